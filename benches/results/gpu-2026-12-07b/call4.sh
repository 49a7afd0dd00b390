#!/usr/bin/env bash
# NOT RUN: the device gave no machine after call 3 (five failed starts). Ready for the
# next run: bundle e0e1971 (reverted in fc16a00) as .gpu and 1db24a1's workloads and
# kernel_probe as .gpu/old/old.txz.
# Device call 4 (e0e1971): the fixes after call 3 (auto's one-element copy sized by the
# smaller dtype; the CPU line structure under its own threshold; the loops test's count of
# kernels with generated real transforms) and strided generated passes at two blocks an SM
# (e0e1971). Every test binary by default (fresh decision cache); the FFT tests, loops,
# grad, profile and streams again with LAZYFUSE_FFT=generated; the sim and psf rows
# of 1db24a1 (.gpu/old, before e0e1971) and e0e1971 alternating; ncu of the real 1024 step.
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
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile streams) | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
for f in /tmp/tl/*.log; do grep -q "FAILED\|panicked" $f && { echo "=== $f"; grep -E "panicked|FAILED|assert|left|right" -A4 $f | head -80; }; done > $OUT/failed-logs.txt
d=$(cat .gpu/tests/fft_generated.dir 2>/dev/null || echo .); (cd $d && LAZYFUSE_CACHE_DIR=/tmp/lfc-tests timeout 200 "$OLDPWD/.gpu/tests/fft_generated" --nocapture --test-threads 2 2>&1 | grep "generated .*library") > $OUT/fft-errors.txt
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
(cd .gpu/old && xz -dc old.txz | tar -xf -)
for rep in 1; do
  for b in old new; do
    if [ $b = old ]; then W=.gpu/old/workloads; else W=.gpu/benches/workloads; fi
    echo "## rep$rep $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 150 $W --bench sim psf 2>&1 | grep -vE "^\s*$"
  done
done > $OUT/bench-ab.txt
cp /tmp/lfc-new/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats"
for b in old new; do
  if [ $b = old ]; then K=$PWD/.gpu/old/kernel_probe; else K=$PWD/.gpu/examples/kernel_probe; fi
  echo "## $b sim4 1024 real"; (cd /tmp && LAZYFUSE_FFT=generated LAZYFUSE_REAL_FFT=1 timeout 60 ncu --clock-control none --kernel-name regex:lf_fft --launch-skip 6 --launch-count 3 $S $K sim4 1024 2>&1 | grep -v "==PROF")
done > $OUT/ncu-ab.txt
echo done4
