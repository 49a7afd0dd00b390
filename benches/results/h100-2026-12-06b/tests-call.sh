#!/usr/bin/env bash
# Every test binary on CUDA (LAZYFUSE_TEST_CUDA=1): one line per binary, failures in full.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
bash .gpu/run.sh example host_path 10 build cpu > /dev/null 2>&1   # unpacks the bundle
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_STREAM_SOAK=1000
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
for f in .gpu/tests/*; do
  t=$(basename $f); case $t in *.dir|nvtx) continue;; esac
  d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $OUT/t.log 2>&1; rc=$?
  echo "$t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked" $OUT/t.log | head -8
done 2>&1 | tee $OUT/tests-summary-2.txt
rm -f $OUT/t.log
