#!/usr/bin/env bash
# Device call 1: reductions and fused transforms inside recorded CUDA graphs.
# A/B: the workloads bench of 59e79c6 (base, with this commit's workloads.rs) against the new
# build, alternating, on the grad, psf and sim rows; the gradient anchors (JAX, torch) in the
# same call; the graph-related test binaries by default and with LAZYFUSE_FFT=generated.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
[ -d .gpu/tests ] || (cd .gpu && xz -dc bins.txz | tar -xf -)
[ -d .gpu/base ] || (cd .gpu && xz -dc base.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in loops fft_fused grad reductions random fft-main fft_generated streams plan_hits; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    [ $mode = generated ] && case $t in reductions|random|streams|plan_hits) continue;; esac
    d=$(cat .gpu/tests/$t.dir)
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 150 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err|error" $OUT/t.log | head -20
  done
done > $OUT/tests-summary.txt 2>&1
rm -f $OUT/t.log
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC LAZYFUSE_FFT
for rep in 1 2; do
  for b in base new; do
    bin=.gpu/benches/workloads; [ $b = base ] && bin=.gpu/base/workloads
    echo "## $b rep$rep"; timeout 150 $bin --bench grad psf sim 2>&1
  done
done > $OUT/ab.txt
timeout 150 python3 benches/anchors/grad_anchors.py 128 512 > $OUT/grad-anchors.txt 2>&1
echo done
