#!/usr/bin/env bash
# Device call E (after the merges of the pass-speed work and the NCCL rows): fft1d and psf
# rows (generated passes against cuFFT), the NCCL rows, the FFT/fusion/loop tests by default
# and with LAZYFUSE_FFT=generated, the distributed and sharding tests, ncu on three passes.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf -)
export RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
nvidia-smi -L > $OUT/machine.txt
for b in fft1d psf nccl; do
  timeout 150 .gpu/benches/workloads --bench $b > $OUT/$b.txt 2>&1; echo "bench $b rc=$?"
done > $OUT/bench-summary.txt 2>&1
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in fft_generated fft_fused fft loops distributed sharding; do
    [ $mode = generated ] && case $t in distributed|sharding) continue;; esac
    d=$(cat .gpu/tests/$t.dir)
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 120 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err" $OUT/t.log | head -12
  done
done > $OUT/tests-summary.txt 2>&1
rm -f $OUT/t.log
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC LAZYFUSE_FFT
LAZYFUSE_FFT=generated timeout 100 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 3 \
  --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,gpu__time_duration.sum \
  .gpu/benches/workloads --bench fft1d --quick > $OUT/ncu-fft1d.txt 2>&1
echo "ncu rc=$?" >> $OUT/bench-summary.txt
