#!/usr/bin/env bash
# Device call D (after the fix: a kernel joins one fused FFT step only): the FFT, fusion,
# loop, structure and gradient tests on CUDA, by default and with LAZYFUSE_FFT=generated.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
for mode in default generated; do
  for t in fft_fused fft loops structure fft_generated grad; do
    d=$(cat .gpu/tests/$t.dir)
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 100 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err" $OUT/t.log | head -12
  done
done 2>&1 | tee $OUT/tests-summary.txt
rm -f $OUT/t.log
