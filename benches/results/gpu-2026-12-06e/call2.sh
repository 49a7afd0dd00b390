#!/usr/bin/env bash
# Device call 2: why the traced PSF-fit steps do not replay a graph (LAZYFUSE_DEBUG=2 graph
# lines and plans), and the two graph tests with stable counting (reset after the recording).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
[ -d .gpu/tests ] || (cd .gpu && xz -dc bins.txz | tar -xf -)
[ -d .gpu/t2 ] || (cd .gpu && xz -dc t2.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
LAZYFUSE_DEBUG=3 timeout 100 .gpu/benches/workloads --bench grad --quick > $OUT/grad-debug.txt 2>&1
grep -n "graph\|^step\|schedule:" $OUT/grad-debug.txt | head -150 > $OUT/grad-debug-graph.txt
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in loops fft_fused; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    (CARGO_MANIFEST_DIR="$PWD" timeout 150 .gpu/t2/$t traced) > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|one replay|left|right" $OUT/t.log | head -20
  done
done > $OUT/tests-summary.txt 2>&1
echo done
