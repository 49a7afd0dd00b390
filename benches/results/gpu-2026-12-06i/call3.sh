#!/usr/bin/env bash
# Device call 3 (device time nearly spent, so a slim bundle of the same build as call 2's
# script: B = 8d7927f, A = ed604fd): the FFT, fused-FFT, loops and NVTX tests of B by
# default (fresh decision cache) and with LAZYFUSE_FFT=generated; the sim rows of B, then
# of A (each with its own fresh decision cache).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc so.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 100 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
rm -rf /tmp/lfc-tests
(cd .gpu/tests && ls | grep -v '\.dir$') | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 5 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
(cd .gpu/tests && ls | grep -v '\.dir$') | LAZYFUSE_FFT=generated MODE=generated xargs -P 5 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
mkdir -p $OUT/failed; for f in /tmp/tl/*.log; do grep -q "FAILED\|panicked" $f && cp $f $OUT/failed/; done
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
for b in B A; do
  bin=.gpu/benches/workloads; [ $b = A ] && bin=.gpu/A/benches/workloads
  rm -rf /tmp/lfc-$b
  echo "## $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 100 $bin --bench sim 2>&1 | grep -vE "^\s*$"
done > $OUT/bench.txt
echo done3
