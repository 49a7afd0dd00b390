#!/usr/bin/env bash
# Device call 10 (the final code): the FFT and gradient test binaries by default (choice by
# measurement with its 10 % margin) and with LAZYFUSE_FFT=generated; the quick fft1d rows
# and the psf rows with the decisions they made.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export LAZYFUSE_CACHE_DIR=/tmp/lfcache10
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in fft_fused fft loops fft_generated grad; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    d=$(cat .gpu/tests/$t.dir)
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 150 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err|error" $OUT/t.log | head -12
  done
done > $OUT/tests-summary.txt 2>&1
rm -f $OUT/t.log
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC LAZYFUSE_FFT
timeout 150 .gpu/benches/workloads --bench fft1d psf --quick > $OUT/fft-psf.txt 2>&1
cp /tmp/lfcache10/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
echo done
