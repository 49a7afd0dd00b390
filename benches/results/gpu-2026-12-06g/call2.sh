#!/usr/bin/env bash
# Device call 2: every small FFT pass spreads its load and store (twiddles read before the
# load only there), and the measured FFT choice credits fused passes with one copy of the
# array. Tests by default (fresh decision cache) and with LAZYFUSE_FFT=generated; then
# psf, grad, sim and fft1d rows of base (31c7a59), cur (call 1's build) and new, each with
# its own fresh decision cache, alternating; new's decisions into fft-choices.tsv.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 150 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
rm -rf /tmp/lfc-tests
printf '%s\n' fft_fused fft fft_generated loops grad profile fft-codegen lazyfuse-lib | LAZYFUSE_CACHE_DIR=/tmp/lfc-tests MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' fft_fused fft fft_generated loops grad profile | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
for rep in 1 2; do
  for b in base cur new; do
    bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
    rm -rf /tmp/lfc-$b
    q=""; [ $rep = 2 ] && q=--quick
    echo "## $b rep$rep $q"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 150 $bin --bench psf grad sim $q 2>&1 | grep -vE "^\s*$"
    [ $rep = 1 ] && [ $b = new ] && cp /tmp/lfc-new/fft-choices.tsv $OUT/fft-choices.tsv
  done
done > $OUT/ab.txt
for b in cur new; do
  bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
  echo "## $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 100 $bin --bench fft1d --quick 2>&1 | grep -vE "^\s*$"
done > $OUT/fft1d.txt
echo done
