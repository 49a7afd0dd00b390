#!/usr/bin/env bash
# Device call 1: fused FFT replays that keep their passes (host), small fused passes that
# spread their load and store over more threads, twiddles read before the load. Tests the
# FFT, loop, gradient and profile binaries by default and with LAZYFUSE_FFT=generated
# (failures into tests-summary.txt), ncu of the psf 128 and 512 fused passes before (base,
# 31c7a59) and after (new), then psf, grad and sim rows of base and new, alternating.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc base.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 150 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
printf '%s\n' fft_fused fft fft_generated loops grad profile fft-codegen | MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' fft_fused fft fft_generated loops grad profile | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
for b in base new; do
  bin=.gpu/benches/workloads; [ $b = base ] && bin=.gpu/base/workloads
  echo "## $b"
  LAZYFUSE_FFT=generated timeout 90 ncu --clock-control none --kernel-name regex:lf_fftf --launch-count 2 --metrics $M $bin --bench psf --quick 2>&1 | grep -v "==PROF" | grep -E "lf_fft|duration|warps|issue|dram|registers"
done > $OUT/ncu.txt
for rep in 1 2; do
  for b in base new; do
    bin=.gpu/benches/workloads; [ $b = base ] && bin=.gpu/base/workloads
    q=""; [ $rep = 2 ] && q=--quick
    echo "## $b rep$rep $q"; timeout 150 $bin --bench psf grad sim $q 2>&1 | grep -vE "^\s*$"
  done
done > $OUT/ab.txt
echo done
