#!/usr/bin/env bash
# Device call 3 (tree of the commit after 66cdce6: 32-bit index math in fused passes):
# every test binary on CUDA, 3 at a time (NCCL on the library path, stream soak 1000),
# then the FFT/loop/gradient binaries with LAZYFUSE_FFT=generated; the grad and psf rows
# of 59e79c6 (base), 66cdce6 (mid: graphs, 64-bit fused index math) and this tree (new),
# alternating, with the JAX/torch gradient anchors in the same call; phase retrieval.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc base.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
for rep in 1 2; do
  for b in base mid new; do
    bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
    echo "## $b rep$rep"; timeout 60 $bin --bench grad psf --quick 2>&1
  done
done > $OUT/ab.txt
timeout 100 python3 benches/anchors/grad_anchors.py 128 512 > $OUT/grad-anchors.txt 2>&1
timeout 120 .gpu/benches/workloads --bench grad psf sim > $OUT/new-full.txt 2>&1
(cd /tmp && timeout 100 $OLDPWD/.gpu/examples/08_phase_retrieval) > $OUT/phase_retrieval.txt 2>&1
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
MODE=default ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx | MODE=default xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
export LAZYFUSE_FFT=generated
printf '%s\n' fft_fused fft-main loops grad fft_generated | MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
echo done
