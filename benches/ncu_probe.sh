#!/usr/bin/env bash
# Hardware counters of the fused kernels of the probe workloads, on the GPU machine:
#   bash benches/ncu_probe.sh PROBE_BINARY OUT_DIR [WORKLOAD N]...
# PROBE_BINARY is examples/kernel_probe.rs built for release (.gpu/examples/kernel_probe in a
# bundle). One ncu --csv file per workload lands in OUT_DIR; summarize them with
#   python3 benches/results/ncu-2026-12-01/summarize.py OUT_DIR
set -uo pipefail
bin=$1; out=$2; shift 2
mkdir -p "$out"
[ $# -eq 0 ] && set -- psf 2048 psf 128 chain 134217728 chain 1048576 mean 4096
M=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,sm__sass_thread_inst_executed.sum
while [ $# -ge 2 ]; do
  timeout 120 ncu --clock-control none --kernel-name regex:lf_ --metrics "$M" --csv "$bin" "$1" "$2" \
    > "$out/ncu-$1-$2.csv" 2>> "$out/ncu-err.txt" || echo "ncu $1 $2 failed (see ncu-err.txt)"
  shift 2
done
