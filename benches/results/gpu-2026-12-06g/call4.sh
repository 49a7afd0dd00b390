#!/usr/bin/env bash
# Device call 4 (tree of the epilogue's index math without the outermost division and with
# the last extent a constant): psf and grad rows of 5ec5f19 (cur) against this tree (new),
# one run each (the device time left); ncu of the generated psf 2048 passes; then the FFT,
# loop, gradient, profile, plan, stream and backend test binaries on CUDA, 3 at a time, and
# the FFT, loop, gradient and profile binaries with LAZYFUSE_FFT=generated; failures into
# tests-summary.txt.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
for rep in 1; do
  for b in cur new; do
    bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
    rm -rf /tmp/lfc-$b
    echo "## $b rep$rep"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 100 $bin --bench psf grad 2>&1 | grep -vE "^\s*$"
  done
done > $OUT/ab.txt
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
(cd /tmp && LAZYFUSE_FFT=generated timeout 60 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 3 --metrics $M $OLDPWD/.gpu/examples/02_psf 2048 2>&1 | grep -v "==PROF" | grep -E "lf_fft|duration|warps|issue|dram") > $OUT/ncu-psf2048.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
rm -rf /tmp/lfc-tests
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile plan_hits streams cuda_backend lazyfuse-lib) | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile) | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
echo done
