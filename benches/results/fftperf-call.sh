#!/usr/bin/env bash
# Device call for the generated FFT passes' speed work: benches fft1d and psf, the FFT tests
# on CUDA (default backend and LAZYFUSE_FFT=generated), and ncu on the generated passes.
# Run from the repo root with the bundle in .gpu/ (.gpu/benches/workloads, .gpu/tests/<name>
# and .gpu/tests/<name>.dir). Output under $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/device.txt 2>&1
# benches (the workloads binary times generated and cuFFT itself)
for b in fft1d psf; do
  timeout 240 .gpu/benches/workloads --bench $b > $OUT/$b.txt 2>&1; echo "bench $b rc=$?"
done 2>&1 | tee $OUT/bench-summary.txt
# tests on CUDA
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in fft_generated fft_fused fft; do
    d=$(cat .gpu/tests/$t.dir)
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 120 "$OLDPWD/.gpu/tests/$t") > $OUT/t-$mode-$t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t-$mode-$t.log) $(grep -h '^test result' $OUT/t-$mode-$t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err" $OUT/t-$mode-$t.log | head -12
  done
done 2>&1 | tee $OUT/tests-summary.txt
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
# ncu on the generated passes (first kernels of the fft1d bench), if ncu is there
if command -v ncu > /dev/null; then
  LAZYFUSE_FFT=generated timeout 180 ncu --clock-control none --kernel-name regex:lf_fft \
    --launch-count 3 --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,gpu__time_duration.sum \
    .gpu/benches/workloads --bench fft1d > $OUT/ncu-fft1d.txt 2>&1
  echo "ncu rc=$?" >> $OUT/bench-summary.txt
fi
