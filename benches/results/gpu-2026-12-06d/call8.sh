#!/usr/bin/env bash
# Device call 8: gradient rows with their JAX/PyTorch anchors in the same call, the
# phase-retrieval example, and ncu counters of the generated FFT passes (psf at 128, 512,
# 2048 with LAZYFUSE_FFT=generated; the quick fft1d rows).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
[ -d .gpu/tests ] || (cd .gpu && xz -dc bins.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
timeout 120 .gpu/benches/workloads --bench grad > $OUT/grad.txt 2>&1
timeout 150 python3 benches/anchors/grad_anchors.py 128 512 >> $OUT/grad.txt 2>&1
(cd /tmp && timeout 120 $OLDPWD/.gpu/examples/08_phase_retrieval) > $OUT/phase_retrieval.txt 2>&1
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for n in 128 512 2048; do
  (cd /tmp && LAZYFUSE_FFT=generated timeout 120 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 4 --metrics $M $OLDPWD/.gpu/examples/02_psf $n) > $OUT/ncu-psf$n.txt 2>&1
done
LAZYFUSE_FFT=generated timeout 200 ncu --clock-control none --kernel-name regex:lf_fft --launch-count 150 --print-summary per-kernel --metrics $M .gpu/benches/workloads --bench fft1d --quick > $OUT/ncu-fft1d.txt 2>&1
(CARGO_MANIFEST_DIR="$PWD" LAZYFUSE_TEST_CUDA=1 .gpu/extra/statics > $OUT/statics.txt 2>&1; echo "statics rc=$?" >> $OUT/statics.txt)
echo done
