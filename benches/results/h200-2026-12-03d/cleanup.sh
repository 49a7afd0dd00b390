#!/usr/bin/env bash
# CUDA check of the cleanup commit: lib, fft, loops, numpy_fixtures
cd "$(dirname "$0")/.."
mkdir -p .gpu/quick && (cd .gpu/quick && xz -dc ../quick.txz | tar -xf -)
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1 RUST_BACKTRACE=1 CARGO_MANIFEST_DIR=$PWD
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
S=$OUT/summary.txt; t0=$(date +%s)
for t in lazyfuse fft loops numpy_fixtures; do
  .gpu/quick/$t > $OUT/t.log 2>&1; r=$?
  echo "== $t rc=$r $(grep '^test result' $OUT/t.log | tail -1)" >> $S
  grep -E "FAILED|panicked" -A6 $OUT/t.log | head -30 >> $S
done
rm -f $OUT/t.log
echo "done in $(( $(date +%s) - t0 )) s" >> $S
