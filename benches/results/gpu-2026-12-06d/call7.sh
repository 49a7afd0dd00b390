#!/usr/bin/env bash
# Device call 7: every test binary on CUDA, 3 at a time, NCCL on the
# library path; one summary line per binary, failures in full.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf -)
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_STREAM_SOAK=1000 LAZYFUSE_REQUIRE_NVRTC=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
nvidia-smi -L > $OUT/machine.txt
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $OUT/t-$t.log 2>&1; rc=$?
  echo "$t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t-$t.log) $(grep -h '^test result' $OUT/t-$t.log | tail -1)"
  if [ $rc = 0 ]; then rm -f $OUT/t-$t.log; else grep -E "FAILED|panicked" $OUT/t-$t.log | head -8; fi
}
export -f one; export OUT
ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx | xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
