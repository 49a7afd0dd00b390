#!/usr/bin/env bash
# device call 1: full test suite, psf with and without pruning, probe at 2048^2, ncu psf 2048
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
[ -f .gpu/bins.txz ] && [ ! -d .gpu/tests ] && (cd .gpu && xz -dc bins.txz | tar -xf -)
S=$OUT/summary.txt
t0=$(date +%s)
bash .gpu/run.sh tests > $OUT/tests-summary.txt 2>&1; echo "tests rc=$? in $(( $(date +%s) - t0 )) s" >> $S
grep -c "^test .* ok$" $OUT/tests.log >> $S
for i in 1 2; do
  for p in off default; do
    if [ $p = off ]; then e="LAZYFUSE_PRUNED_FFT_MIN=off"; else e="LAZYFUSE_X=1"; fi
    echo "== psf 2048 pruning $p run $i" >> $S
    env $e LAZYFUSE_TEST_CUDA=1 .gpu/examples/02_psf 2048 2>&1 | grep -E "per eval|peak|plan" >> $S
  done
done
for p in off default; do
  if [ $p = off ]; then e="LAZYFUSE_PRUNED_FFT_MIN=off"; else e="LAZYFUSE_X=1"; fi
  echo "== workloads psf, pruning $p" >> $S
  env $e .gpu/benches/workloads --bench psf 2>&1 | grep -v "^$" >> $OUT/bench-psf.log
done
nvcc -O2 -arch=sm_90 -o /tmp/prune_probe benches/prune_probe.cu -lcufft >> $S 2>&1 && /tmp/prune_probe 1024 2048 >> $S 2>&1
timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --launch-skip 20 --launch-count 30 .gpu/examples/02_psf 2048 > $OUT/psf2048-ncu.csv 2>> $S
echo "done in $(( $(date +%s) - t0 )) s" >> $S
