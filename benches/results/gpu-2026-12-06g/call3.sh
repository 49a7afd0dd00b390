#!/usr/bin/env bash
# Device call 3: a pruned program's first axis as one launch over both support ranges,
# plain passes spread only where both their load and store are strided, the fused FFT
# choice credited with the memory time of one copy (a copy less a one-element copy). Tests
# by default (fresh decision cache) and with LAZYFUSE_FFT=generated; psf, grad, sim rows
# (full, then quick) and fft1d rows of cur (call 1's build) and new, each with its own fresh
# decision cache; new's decisions into fft-choices.tsv; ncu of the generated psf passes.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
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
rm -rf /tmp/lfc-tests
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile lazyfuse-lib) | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile) | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
for rep in 1 2; do
  for b in cur new; do
    bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
    rm -rf /tmp/lfc-$b
    q=""; [ $rep = 2 ] && q=--quick
    echo "## $b rep$rep $q"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 150 $bin --bench psf grad sim $q 2>&1 | grep -vE "^\s*$"
    [ $rep = 1 ] && [ $b = new ] && cp /tmp/lfc-new/fft-choices.tsv $OUT/fft-choices.tsv
  done
done > $OUT/ab.txt
for b in cur new; do
  bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
  echo "## $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 100 $bin --bench fft1d --quick 2>&1 | grep -vE "^\s*$"
done > $OUT/fft1d.txt

M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
for n in 128 512 2048; do
  (cd /tmp && LAZYFUSE_FFT=generated timeout 60 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 5 --metrics $M $OLDPWD/.gpu/examples/02_psf $n 2>&1 | grep -v "==PROF" | grep -E "lf_fft|duration|warps|issue|dram|conflicts|wavefronts")
done > $OUT/ncu-psf.txt
echo done2
