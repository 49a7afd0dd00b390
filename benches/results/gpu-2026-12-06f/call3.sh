#!/usr/bin/env bash
# Device call 3 (a shorter call 2, for the device time left): the grad and psf rows of
# 68e7e7d (base) against this tree (new), once each; ncu kernel times of one value+grad
# eval at 128; every test binary on CUDA (failures into tests-summary.txt), then the
# gradient, loop, FFT and profile binaries with LAZYFUSE_FFT=generated (call 1 kept failure
# logs of fft and profile in that mode; with LAZYFUSE_GRAPHS=chain too, to compare).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc base.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_REQUIRE_NVRTC=1
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 120 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx | MODE=default xargs -P 4 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' loops grad fft_fused fft profile | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
printf '%s\n' fft profile | LAZYFUSE_FFT=generated LAZYFUSE_GRAPHS=chain MODE=generated-chain xargs -P 2 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
for b in base new; do
  bin=.gpu/benches/workloads; [ $b = base ] && bin=.gpu/base/workloads
  echo "## $b"; timeout 40 $bin --bench grad psf --quick 2>&1
done > $OUT/ab.txt
timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum --csv .gpu/examples/kernel_probe grad 128 > $OUT/ncu-grad128.csv 2>&1
echo done
