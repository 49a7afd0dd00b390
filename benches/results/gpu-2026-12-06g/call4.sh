#!/usr/bin/env bash
# Device call 4 (tree of the epilogue's index math without the outermost division and with
# the last extent a constant; cut to the device time left): psf rows of 5ec5f19 (cur)
# against this tree (new), one run each; the fused-FFT, FFT, loop and gradient test
# binaries with LAZYFUSE_FFT=generated and the fused-FFT and profile ones by default;
# failures into tests-summary.txt.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc ab.txz | tar -xf -)
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
(cd .gpu/tests && ls fft* | grep -v '\.dir$'; printf '%s\n' loops grad) | LAZYFUSE_FFT=generated MODE=generated xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' fft_fused profile | MODE=default xargs -P 2 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC
for b in cur new; do
  bin=.gpu/benches/workloads; [ $b != new ] && bin=.gpu/$b/workloads
  echo "## $b"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 60 $bin --bench psf 2>&1 | grep -vE "^\s*$"
done > $OUT/ab.txt
echo done
