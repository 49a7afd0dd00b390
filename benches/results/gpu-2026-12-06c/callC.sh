#!/usr/bin/env bash
# Device call C: the FFT fusion (a transform's producer in its first pass, its consumer in
# its last): the FFT, structure, plan, loop and gradient tests on CUDA; psf rows with cuFFT,
# unfused and with the generated, fused passes; the psf sizes the generated path covers.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
[ -d .gpu/tests ] || (cd .gpu && xz -dc bins.txz | tar -xf -)
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
timeout 150 .gpu/benches/workloads --bench psf > $OUT/psf.txt 2>&1
for t in fft_fused fft_generated fft structure plan_hits loops grad statics fft-codegen; do
  d=$(cat .gpu/tests/$t.dir)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 120 "$OLDPWD/.gpu/tests/$t") > $OUT/t-$t.log 2>&1; rc=$?
  echo "$t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t-$t.log) $(grep -h '^test result' $OUT/t-$t.log | tail -1)"
  if [ $rc = 0 ]; then rm -f $OUT/t-$t.log; else grep -E "FAILED|panicked" $OUT/t-$t.log | head -12; fi
done > $OUT/tests-summary.txt 2>&1
for t in fft loops grad; do
  d=$(cat .gpu/tests/$t.dir)
  (cd $d && LAZYFUSE_FFT=generated CARGO_MANIFEST_DIR="$PWD" timeout 120 "$OLDPWD/.gpu/tests/$t") > $OUT/g-$t.log 2>&1; rc=$?
  echo "LAZYFUSE_FFT=generated $t rc=$rc $(grep -h '^test result' $OUT/g-$t.log | tail -1)"
  if [ $rc = 0 ]; then rm -f $OUT/g-$t.log; else grep -E "FAILED|panicked" $OUT/g-$t.log | head -12; fi
done >> $OUT/tests-summary.txt 2>&1
