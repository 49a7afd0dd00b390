#!/usr/bin/env bash
# Device call 2 (tree of the commit replaying scans and scatter-adds in graphs): the grad and psf rows of 68e7e7d (base:
# graphs following the data, 8 values a thread in small reductions) against this tree
# (new: 1 value a thread at 128^2), alternating; the full grad/psf/sim rows; ncu kernel
# times of one value+grad eval at 128; every test binary on CUDA, then the FFT/loop/
# gradient binaries with LAZYFUSE_FFT=generated and with LAZYFUSE_GRAPHS=chain. At most 8
# files come back: failures go into tests-summary.txt.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc base.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
for rep in 1 2; do
  for b in base new; do
    bin=.gpu/benches/workloads; [ $b = base ] && bin=.gpu/base/workloads
    echo "## $b rep$rep"; timeout 60 $bin --bench grad psf --quick 2>&1
  done
done > $OUT/ab.txt
LAZYFUSE_DEBUG=2 timeout 60 .gpu/benches/workloads --bench grad --quick 2>&1 | grep "graph: recorded" | sort | uniq -c >> $OUT/ab.txt
timeout 120 .gpu/benches/workloads --bench grad psf > $OUT/full.txt 2>&1
timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv .gpu/examples/kernel_probe grad 128 > $OUT/ncu-grad128.csv 2>&1
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_STREAM_SOAK=1000 LAZYFUSE_REQUIRE_NVRTC=1
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
mkdir -p /tmp/tl
one() {
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .); log=/tmp/tl/$MODE-$t.log
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $log 2>&1; rc=$?
  echo "$MODE $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $log) $(grep -h '^test result' $log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked|assert" -A3 $log | head -30
}
export -f one; export OUT
ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx | MODE=default xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
printf '%s\n' fft_fused fft-main loops grad fft_generated profile | LAZYFUSE_FFT=generated MODE=generated xargs -P 3 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
printf '%s\n' loops grad | LAZYFUSE_GRAPHS=chain MODE=chain xargs -P 2 -I{} bash -c 'one {}' >> $OUT/tests-summary.txt 2>&1
echo done
