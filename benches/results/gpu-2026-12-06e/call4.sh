#!/usr/bin/env bash
# Device call 4 (the tree after 9f9d423: FusedStep refactor): the profile, fused-FFT, loop
# and gradient tests by default and with LAZYFUSE_FFT=generated; whether the phase-retrieval step replays a
# graph (LAZYFUSE_DEBUG=2 graph lines); ncu of the PSF-128 generated passes with the kernels
# fused in, 66cdce6 (mid: 64-bit fused index math) against this tree (new).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc base.txz | tar -xf - && xz -dc t3.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
for mode in default generated; do
  for t in profile fft_fused loops grad; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    (LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1 CARGO_MANIFEST_DIR="$PWD" timeout 100 .gpu/t3/$t) > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked" -A4 $OUT/t.log | head -20
  done
done > $OUT/tests-summary.txt 2>&1
unset LAZYFUSE_FFT; rm -f $OUT/t.log
(cd /tmp && LAZYFUSE_DEBUG=2 timeout 100 $OLDPWD/.gpu/examples/08_phase_retrieval) > $OUT/pr.log 2>&1
grep -i "graph" $OUT/pr.log | sort | uniq -c | sort -rn | head -20 > $OUT/phase_retrieval-graph.txt
tail -3 $OUT/pr.log >> $OUT/phase_retrieval-graph.txt; rm -f $OUT/pr.log
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for b in mid new; do
  bin=.gpu/benches/workloads; [ $b = mid ] && bin=.gpu/mid/workloads
  echo "## $b"; LAZYFUSE_FFT=generated timeout 120 ncu --clock-control none --kernel-name regex:lf_fftf --launch-skip 4 --launch-count 4 --metrics $M $bin --bench psf --quick 2>&1 | grep -E "lf_fftf|duration|dram__|warps_active|issue_active|inst_executed|sm__throughput"
done > $OUT/ncu-psf128.txt
echo done
