#!/usr/bin/env bash
# Device call A: host path with plain single-kernel launches against graph replay
# (LAZYFUSE_GRAPHS=all), alternating; latency rows both ways with anchors; gradient example,
# rows and anchors; batched 1-D FFTs, generated passes against cuFFT; transfer rows; psf 2048 example (readback into a fresh Vec).
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
bash .gpu/run.sh example host_path 10 build cpu > /dev/null 2>&1   # unpacks the bundle
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
{ nvidia-smi -L; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; nproc; } > $OUT/machine.txt 2>&1
{
for r in 1 2; do
  echo "== plain $r"; .gpu/examples/host_path 100000 all cuda
  echo "== graphs=all $r"; LAZYFUSE_GRAPHS=all .gpu/examples/host_path 100000 all cuda
done
echo "== cpu"; .gpu/examples/host_path 100000 all cpu
} > $OUT/hostpath.txt 2>&1
{
echo "== plain"; timeout 100 .gpu/benches/workloads --bench latency psf chain --quick
echo "== graphs=all"; LAZYFUSE_GRAPHS=all timeout 100 .gpu/benches/workloads --bench latency psf chain --quick
echo "== anchors"; timeout 100 python3 .gpu/anchors/anchor_bench.py latency chain
} > $OUT/latency.txt 2>&1
{
timeout 60 .gpu/examples/08_phase_retrieval 256 500
timeout 60 .gpu/benches/workloads --bench grad
timeout 120 python3 benches/anchors/grad_anchors.py 128 512
} > $OUT/grad.txt 2>&1
timeout 120 .gpu/benches/workloads --bench fft1d > $OUT/fft1d.txt 2>&1
timeout 60 .gpu/benches/workloads --bench transfers > $OUT/transfers.txt 2>&1
(cd $OUT && for r in 1 2; do timeout 60 $OLDPWD/.gpu/examples/02_psf 2048; done) > $OUT/psf2048.txt 2>&1
rm -f $OUT/psf.png
