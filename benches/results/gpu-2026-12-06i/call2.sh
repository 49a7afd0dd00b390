#!/usr/bin/env bash
# Device call 2: chains of round trips after the fix that links the steps (A = ed604fd),
# and radix-4 stages for small launches on top (B = the bundle: be4ece0, a
# sim row of ten C2C cuFFT steps a call and the pass-index count). Every test binary of B by default (fresh
# decision cache; the mock NVTX tool unpacked beside the examples),
# the FFT tests, loops, grad, nvtx and profile again with LAZYFUSE_FFT=generated; the sim
# and psf rows of A and B alternating, twice, each with its own fresh decision cache; ncu
# (speed of light, occupancy, warp stalls) of four sim steps built before one eval (the
# chain) at 256 (A and B) and 1024 (B), and of the psf passes at 128 (A and B).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc so.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
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
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad nvtx profile) | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
mkdir -p $OUT/failed; for f in /tmp/tl/*.log; do grep -q "FAILED\|panicked" $f && cp $f $OUT/failed/; done
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
for rep in 1 2; do
  for b in A B; do
    bin=.gpu/benches/workloads; [ $b = A ] && bin=.gpu/A/benches/workloads
    rm -rf /tmp/lfc-$b
    echo "## $b rep$rep"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 200 $bin --bench sim psf 2>&1 | grep -vE "^\s*$"
  done
done > $OUT/bench.txt
cp /tmp/lfc-B/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats"
for run in "B 256" "A 256" "B 1024"; do
  set -- $run; p=.gpu/examples/kernel_probe; [ $1 = A ] && p=.gpu/A/examples/kernel_probe
  echo "## $1 sim4 $2"
  (cd /tmp && LAZYFUSE_FFT=generated LAZYFUSE_REAL_FFT=0 timeout 120 ncu --clock-control none --kernel-name regex:lf_fft --launch-skip 9 --launch-count 9 $S $OLDPWD/$p sim4 $2 2>&1 | grep -v "==PROF")
done > $OUT/ncu-sim.txt
for b in B A; do
  p=.gpu/examples/kernel_probe; [ $b = A ] && p=.gpu/A/examples/kernel_probe
  echo "## $b psf 128"
  (cd /tmp && LAZYFUSE_FFT=generated timeout 90 ncu --clock-control none --kernel-name regex:lf_fft --launch-skip 2 --launch-count 2 $S $OLDPWD/$p psf 128 2>&1 | grep -v "==PROF")
done > $OUT/ncu-psf.txt
echo done2
