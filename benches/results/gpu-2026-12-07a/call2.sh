#!/usr/bin/env bash
# Device call 2: R2C and C2R as generated passes with elementwise work fused into them, and
# real round trips (rfft2, the product on the half spectrum, irfft2 as one program of three
# passes) (3a562de). Every test binary by default (fresh decision cache), the FFT tests,
# loops, grad and profile again with LAZYFUSE_FFT=generated; the sim rows once (the default
# R2C rows now measure the generated real passes against cuFFT); ncu of two sim steps on
# the generated real passes (kernel_probe sim4: four steps before one eval), 256 and 1024.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc so.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
rm -rf /tmp/lfc-tests
(cd .gpu/tests && ls | grep -v '\.dir$') | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile) | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
mkdir -p $OUT/failed; for f in /tmp/tl/*.log; do grep -q "FAILED\|panicked" $f && cp $f $OUT/failed/; done
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
rm -rf /tmp/lfc-b
for rep in 1; do
  echo "## rep$rep"; LAZYFUSE_CACHE_DIR=/tmp/lfc-b timeout 200 .gpu/benches/workloads --bench sim 2>&1 | grep -vE "^\s*$"
done > $OUT/bench.txt
cp /tmp/lfc-b/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats"
for n in 256 1024; do
  (cd /tmp && LAZYFUSE_FFT=generated timeout 120 ncu --clock-control none --kernel-name regex:lf_fft --launch-skip 6 --launch-count 6 $S $OLDPWD/.gpu/examples/kernel_probe sim4 $n 2>&1 | grep -v "==PROF")
done > $OUT/ncu-sim-real.txt
echo done2
