#!/usr/bin/env bash
# Device call 3: the final tree, cut to the device time left: nvtx (the mock tool unpacked
# beside the examples), the FFT, loop, profile, structure and plan tests and lib by default
# (fresh decision cache), fft_fused and loops again with LAZYFUSE_FFT=generated; one run of
# the sim rows.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc so.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
rm -rf /tmp/lfc-tests
(cd .gpu/tests && ls nvtx fft* loops profile structure plan_hits lazyfuse-lib | grep -v '\.dir$') | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' fft_fused loops | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
mkdir -p $OUT/failed; for f in /tmp/tl/*.log; do grep -q "FAILED\|panicked" $f && cp $f $OUT/failed/; done
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
rm -rf /tmp/lfc-new
LAZYFUSE_CACHE_DIR=/tmp/lfc-new timeout 150 .gpu/benches/workloads --bench sim 2>&1 | grep -vE "^\s*$" > $OUT/bench.txt
echo done3
