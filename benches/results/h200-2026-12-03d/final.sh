#!/usr/bin/env bash
# final CUDA check of the end build: FFT-related tests, then psf and sim workloads
cd "$(dirname "$0")/.."
mkdir -p .gpu/quick && (cd .gpu/quick && xz -dc ../quick.txz | tar -xf -)
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1 RUST_BACKTRACE=1 CARGO_MANIFEST_DIR=$PWD
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export LAZYFUSE_NVTX_PROBE=$PWD/.gpu/quick/libnvtx_probe.so
S=$OUT/summary.txt; t0=$(date +%s)
for t in lazyfuse fft numpy_fixtures loops cuda_backend nvtx movement; do
  .gpu/quick/$t > $OUT/t.log 2>&1; r=$?
  echo "== $t rc=$r $(grep '^test result' $OUT/t.log | tail -1)" >> $S
  grep -E "FAILED|panicked" $OUT/t.log | head -20 >> $S
  [ $r = 0 ] || cp $OUT/t.log $OUT/fail-$t.log
done
rm -f $OUT/t.log
echo "tests done in $(( $(date +%s) - t0 )) s" >> $S
unset LAZYFUSE_TEST_CUDA
.gpu/quick/02_psf 2048 2>&1 | grep -E "per eval|plan" >> $S
.gpu/quick/workloads --bench psf sim 2>&1 | grep -v "^$" > $OUT/bench-psf-sim.log
echo "done in $(( $(date +%s) - t0 )) s" >> $S
