#!/usr/bin/env bash
# Device call 2 (0548a5b; call 1 got no machine): every test binary by default (fresh
# decision cache), then the FFT tests, loops, grad, profile and streams again with
# LAZYFUSE_FFT=generated; the sim rows of 6a94748 (.gpu/old), 0548a5b (traced bodies hold
# one step's memory) and e0e1971 on f31ad95 (.gpu/e0: strided passes at two blocks an SM;
# f31ad95's graph replays are 0548a5b's), alternating in this call (new, old, e0, new while
# time allows).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc so.txz | tar -xf -)
(mkdir -p .gpu/old && cd .gpu/old && xz -dc ../old.txz | tar -xf -)
(mkdir -p .gpu/e0 && cd .gpu/e0 && xz -dc ../e0.txz | tar -xf -)
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
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
for b in new old e0 new; do
  [ $(( $(date +%s) - start )) -gt 470 ] && break
  case $b in old) W=.gpu/old/workloads;; e0) W=.gpu/e0/workloads;; *) W=.gpu/benches/workloads;; esac
  echo "## $b $(( $(date +%s) - start )) s"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 90 $W --bench sim 2>&1 | grep -vE "^\s*$"
done > $OUT/bench-ab.txt
cp /tmp/lfc-new/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
echo "end: $(( $(date +%s) - start )) s"
