#!/usr/bin/env bash
# Device call 4 (0548a5b, call 2's bundle), on whatever card a plain call gets (an H200
# when one starts): every test binary by default (fresh decision cache), then the FFT
# tests, loops, grad, profile and streams again with LAZYFUSE_FFT=generated.
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
start=$(date +%s)
(cd .gpu/tests && ls | grep -v '\.dir$') | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
echo "default: $(( $(date +%s) - start )) s" >> $OUT/tests-summary.txt
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad profile streams) | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
echo "all: $(( $(date +%s) - start )) s" >> $OUT/tests-summary.txt
for f in /tmp/tl/*.log; do grep -q "FAILED\|panicked" $f && { echo "=== $f"; grep -E "panicked|FAILED|assert|left|right" -A4 $f | head -80; }; done > $OUT/failed-logs.txt
echo "end: $(( $(date +%s) - start )) s"
