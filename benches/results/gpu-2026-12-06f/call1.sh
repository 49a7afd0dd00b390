#!/usr/bin/env bash
# Device call 1 (graphs whose steps follow the data, not the plan's order): the grad rows
# with LAZYFUSE_GRAPHS=chain (one chain, as before) against the default, alternating; the
# full grad rows with the JAX/torch anchors in the same call; the recorded graphs' census
# (nodes, edges, roots) at LAZYFUSE_DEBUG=2; ncu kernel times of one value+grad eval at
# 128; phase retrieval; every test binary on CUDA, then the FFT/loop/gradient binaries with
# LAZYFUSE_FFT=generated and with LAZYFUSE_GRAPHS=chain.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
W=.gpu/benches/workloads
for rep in 1 2; do
  for m in chain 1; do
    echo "## LAZYFUSE_GRAPHS=$m rep$rep"; LAZYFUSE_GRAPHS=$m timeout 60 $W --bench grad --quick 2>&1
  done
done > $OUT/ab.txt
timeout 100 python3 benches/anchors/grad_anchors.py 128 512 > $OUT/grad-anchors.txt 2>&1
timeout 120 $W --bench grad psf sim > $OUT/full.txt 2>&1
LAZYFUSE_DEBUG=2 timeout 60 $W --bench grad --quick 2>&1 | grep "graph: recorded" | sort | uniq -c > $OUT/census-grad.txt
timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv .gpu/examples/kernel_probe grad 128 > $OUT/ncu-grad128.csv 2>$OUT/ncu-err.txt
(cd /tmp && LAZYFUSE_DEBUG=2 timeout 100 $OLDPWD/.gpu/examples/08_phase_retrieval) > $OUT/pr.log 2>&1
grep "graph" $OUT/pr.log | sort | uniq -c | sort -rn | head -20 > $OUT/phase_retrieval.txt
tail -4 $OUT/pr.log >> $OUT/phase_retrieval.txt; rm -f $OUT/pr.log
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_STREAM_SOAK=1000 LAZYFUSE_REQUIRE_NVRTC=1
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $OUT/t-$MODE-$t.log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t-$MODE-$t.log) $(grep -h '^test result' $OUT/t-$MODE-$t.log | tail -1)"
  if [ $rc = 0 ]; then rm -f $OUT/t-$MODE-$t.log; else grep -E "FAILED|panicked" $OUT/t-$MODE-$t.log | head -8; fi
}
export -f one; export OUT
ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx | MODE=default xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' fft_fused fft-main loops grad fft_generated profile | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
printf '%s\n' loops grad | LAZYFUSE_GRAPHS=chain MODE=chain xargs -P 2 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
echo done
