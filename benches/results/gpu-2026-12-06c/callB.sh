#!/usr/bin/env bash
# Device call B: timings of the host path, threads and latency rows; every test binary on CUDA (3 at a time) and, beside them, the random-DAG
# differential test at 5 x 2000 cases on CUDA (seeds 11..55); the loop and elementwise
# tests again with LAZYFUSE_GRAPHS=all; the FFT, gradient and loop tests with the generated
# FFT passes forced (LAZYFUSE_FFT=generated).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
bash .gpu/run.sh example host_path 10 build cpu > /dev/null 2>&1   # unpacks the bundle
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_STREAM_SOAK=1000 LAZYFUSE_REQUIRE_NVRTC=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
# NCCL for the distributed and sharding tests (pip wheels keep libnccl.so.2 in site-packages)
nccl=$(python3 -c 'import glob,site;print(next((p for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnccl.so.2",recursive=True)),""))' 2>/dev/null)
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname $nccl):$LD_LIBRARY_PATH"
echo "nccl: ${nccl:-not found}" >> $OUT/machine.txt
# timings first, on a quiet GPU: host path (single-kernel evals replay when alone), threads,
# latency rows
{
for r in 1 2; do echo "== host_path $r"; .gpu/examples/host_path 100000 all cuda; done
echo "== threads"; timeout 60 .gpu/examples/threads cuda 0.3
echo "== latency"; timeout 100 .gpu/benches/workloads --bench latency psf chain --quick
} > $OUT/timings.txt 2>&1
d=$(cat .gpu/tests/proptest_dag.dir)
for s in 11 22 33 44 55; do
  (cd $d && PROPTEST_CASES=2000 PROPTEST_RNG_SEED=$s timeout 400 "$OLDPWD/.gpu/tests/proptest_dag" > $OUT/proptest-seed$s.txt 2>&1; echo "rc=$?" >> $OUT/proptest-seed$s.txt) &
done
one() {  # one test binary: a summary line, failures in full
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 200 "$OLDPWD/.gpu/tests/$t") > $OUT/t-$t.log 2>&1; rc=$?
  echo "$t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t-$t.log) $(grep -h '^test result' $OUT/t-$t.log | tail -1)"
  if [ $rc = 0 ]; then rm -f $OUT/t-$t.log; else grep -E "FAILED|panicked" $OUT/t-$t.log | head -8; fi
}
export -f one; export OUT
ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx -e proptest_dag | xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
for t in loops elementwise; do LAZYFUSE_GRAPHS=all bash -c "one $t"; done > $OUT/tests-graphs-all.txt 2>&1
for t in fft grad loops; do LAZYFUSE_FFT=generated bash -c "one $t"; done > $OUT/tests-fft-generated.txt 2>&1
wait
grep -h "test result\|rc=\|FAILED\|minimal failing" $OUT/proptest-seed*.txt > $OUT/proptest-summary.txt
