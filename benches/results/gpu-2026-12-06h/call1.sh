#!/usr/bin/env bash
# Device call 1: round trips (a transform, its consumer and the transform back along one
# axis as one generated pass). Every test binary by default (fresh decision cache), the
# FFT tests, loops, grad and profile again with LAZYFUSE_FFT=generated; sim, psf and grad
# rows of old and new, alternating, each with its own fresh decision cache; ncu of the
# generated sim step's passes at 256 and 1024. (Found afterwards: old, the workloads binary
# kept from the previous build, was built from 9f81839: 5ec5f19 with the epilogue index
# math that 6b38e26 backed out, so old = epilogue index math, new = round trips.)
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
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
for rep in 1 2; do
  for b in old new; do
    bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
    rm -rf /tmp/lfc-$b
    echo "## $b rep$rep"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 150 $bin --bench sim psf grad 2>&1 | grep -vE "^\s*$"
  done
done > $OUT/ab.txt
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,launch__registers_per_thread
for n in 256 1024; do
  (cd /tmp && LAZYFUSE_FFT=generated LAZYFUSE_REAL_FFT=0 LAZYFUSE_GRAPHS=0 timeout 90 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 6 --metrics $M $OLDPWD/.gpu/examples/03_simulation_loop $n 4 2>&1 | grep -v "==PROF" | grep -E "lf_fft|duration|warps|issue|dram|conflicts|wavefronts|registers")
done > $OUT/ncu-sim.txt
echo done1
