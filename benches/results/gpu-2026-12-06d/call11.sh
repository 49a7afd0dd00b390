#!/usr/bin/env bash
# Device call 11: strided FFT passes with a line pitch that spreads a conflict phase over
# the banks: the FFT test binaries (default and LAZYFUSE_FFT=generated), ncu bank conflicts
# of the psf 128 passes, psf and fft1d rows before (base) and after (new), alternating.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc ab.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in fft_fused fft fft_generated; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    d=$(cat .gpu/tests/$t.dir)
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 150 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err|error" $OUT/t.log | head -12
  done
done > $OUT/tests-summary.txt 2>&1
rm -f $OUT/t.log
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC LAZYFUSE_FFT
M=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
for b in base new; do
  echo "## $b"
  LAZYFUSE_FFT=generated timeout 60 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 2 --metrics $M .gpu/$b/workloads --bench psf --quick 2>&1 | grep -v "==PROF" | grep -E "lf_fft|duration|conflicts|wavefronts|dram"
done > $OUT/ncu.txt
for rep in 1 2; do
  for b in base new; do
    echo "## $b rep$rep"; LAZYFUSE_FFT=generated timeout 100 .gpu/$b/workloads --bench psf fft1d --quick 2>&1 | grep -E "generated"
  done
done > $OUT/ab.txt
echo done
