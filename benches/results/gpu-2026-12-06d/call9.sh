#!/usr/bin/env bash
# Device call 9: generated passes over few lines with more blocks: psf rows (the generated
# row, and the default's) and the quick fft1d rows, the binary before (base) against after
# (new), alternating; the FFT test binaries by default and with LAZYFUSE_FFT=generated.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc ab.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
for rep in 1 2; do
  for b in base new; do
    echo "## $b rep$rep"; timeout 120 .gpu/$b/workloads --bench psf 2>&1
  done
done > $OUT/psf-ab.txt
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in fft_fused fft-main loops fft_generated; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    d=$(cat .gpu/tests/$t.dir)
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 150 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err|error" $OUT/t.log | head -12
  done
done > $OUT/tests-summary.txt 2>&1
rm -f $OUT/t.log
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC LAZYFUSE_FFT
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__issue_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed
LAZYFUSE_FFT=generated timeout 100 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 2 --metrics $M .gpu/new/workloads --bench psf --quick > $OUT/ncu-psf128.txt 2>&1
echo done
