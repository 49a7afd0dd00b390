#!/usr/bin/env bash
# Device call 2: chains of round trips after the fix that links the steps (A = ed604fd),
# and radix-4 stages for small launches on top (B = the bundle: be4ece0, a
# sim row of ten C2C cuFFT steps a call and the pass-index count: 8d7927f). Every test
# binary of B by default (fresh decision cache; the mock NVTX tool unpacked beside the
# examples),
# the FFT tests, loops, grad, nvtx and profile again with LAZYFUSE_FFT=generated; the sim
# rows of A then B, each with its own fresh decision cache; ncu (speed of light,
# occupancy, warp stalls) of four sim steps built before one eval (the chain) at 256 (B);
# the psf rows of A then B; ncu of the chain at 256 (A) and 1024 (B). (Ordered so that
# what matters most comes back if device time runs out.)
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
for b in A B; do
  bin=.gpu/benches/workloads; [ $b = A ] && bin=.gpu/A/benches/workloads
  rm -rf /tmp/lfc-$b
  echo "## $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 120 $bin --bench sim 2>&1 | grep -vE "^\s*$"
done > $OUT/bench.txt
cp /tmp/lfc-B/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats"
ncu_sim() {
  p=.gpu/examples/kernel_probe; [ $1 = A ] && p=.gpu/A/examples/kernel_probe
  echo "## $1 sim4 $2"
  (cd /tmp && LAZYFUSE_FFT=generated LAZYFUSE_REAL_FFT=0 timeout 60 ncu --clock-control none --kernel-name regex:lf_fft --launch-skip 9 --launch-count 9 $S $OLDPWD/$p sim4 $2 2>&1 | grep -v "==PROF")
}
ncu_sim B 256 > $OUT/ncu-sim.txt
for b in A B; do
  bin=.gpu/benches/workloads; [ $b = A ] && bin=.gpu/A/benches/workloads
  echo "## $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 60 $bin --bench psf 2>&1 | grep -vE "^\s*$"
done >> $OUT/bench.txt
(ncu_sim A 256; ncu_sim B 1024) >> $OUT/ncu-sim.txt
echo done2
