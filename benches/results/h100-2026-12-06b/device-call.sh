#!/usr/bin/env bash
# One device call: A/B of the host path, threads and latency rows (base 353d5ca vs this
# commit, alternating), anchors, then every test binary on CUDA.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu-base && tar -xJf base.txz)
bash .gpu/run.sh example host_path 1000 all cuda > /dev/null 2>&1   # unpacks the bundle
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/device.txt
{
for r in 1 2 3; do
  echo "== base $r"; .gpu-base/host_path 100000 all cuda
  echo "== new $r"; .gpu/examples/host_path 100000 all cuda
done
for r in 1 2; do
  echo "== base cpu $r"; .gpu-base/host_path 100000 all cpu
  echo "== new cpu $r"; .gpu/examples/host_path 100000 all cpu
done
} 2>&1 | tee $OUT/hostpath.txt
{
for r in 1 2; do
  echo "== base $r"; .gpu-base/threads cuda 0.3
  echo "== new $r"; .gpu/examples/threads cuda 0.3
done
echo "== new cpu"; .gpu/examples/threads cpu 0.3
echo "== torch"; timeout 120 python3 benches/anchors/threads_torch.py 0.3
} 2>&1 | tee $OUT/threads.txt
{
echo "== base"; timeout 150 .gpu-base/workloads --bench latency psf chain sim --quick
echo "== new"; timeout 150 .gpu/benches/workloads --bench latency psf chain sim --quick
echo "== anchors"; timeout 150 python3 .gpu/anchors/anchor_bench.py latency chain
} 2>&1 | tee $OUT/latency.txt
export LAZYFUSE_STREAM_SOAK=1000
for f in .gpu/tests/*; do
  t=$(basename $f); case $t in *.dir|nvtx) continue;; esac
  d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
  echo "$t rc=$rc $(grep -h '^test result' $OUT/t.log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked" $OUT/t.log | head -8
done 2>&1 | tee $OUT/tests-summary.txt
rm -f $OUT/t.log
