#!/usr/bin/env bash
# Device call 1 (commit in git log): every test binary on CUDA (4 at a time), the random-DAG
# differential test at 5 x 2000 cases on CUDA (5 seeds), the gradient tests, example, bench
# rows and anchors, and the transfer rows. Logs in $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
bash .gpu/run.sh example host_path 10 build cpu > /dev/null 2>&1   # unpacks the bundle
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1 LAZYFUSE_STREAM_SOAK=1000
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
{ nvidia-smi -L; cat /sys/kernel/mm/transparent_hugepage/enabled; nproc; } > $OUT/machine.txt 2>&1
d=$(cat .gpu/tests/proptest_dag.dir)
for s in 11 22 33 44 55; do
  (cd $d && PROPTEST_CASES=2000 PROPTEST_RNG_SEED=$s timeout 420 "$OLDPWD/.gpu/tests/proptest_dag" > $OUT/proptest-seed$s.txt 2>&1; echo "rc=$?" >> $OUT/proptest-seed$s.txt) &
done
one() {  # one test binary: a summary line, failures in full
  t=$1; d=$(cat .gpu/tests/$t.dir 2>/dev/null || echo .)
  (cd $d && CARGO_MANIFEST_DIR="$PWD" timeout 240 "$OLDPWD/.gpu/tests/$t") > $OUT/t-$t.log 2>&1; rc=$?
  echo "$t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t-$t.log) $(grep -h '^test result' $OUT/t-$t.log | tail -1)"
  [ $rc = 0 ] || grep -E "FAILED|panicked" $OUT/t-$t.log | head -8
  [ $rc = 0 ] && rm -f $OUT/t-$t.log
}
export -f one; export OUT
ls .gpu/tests | grep -v '\.dir$' | grep -v -x -e nvtx -e proptest_dag | xargs -P 3 -I{} bash -c 'one {}' > $OUT/tests-summary.txt 2>&1
{
timeout 60 .gpu/examples/08_phase_retrieval 256 500
timeout 60 .gpu/benches/workloads --bench grad
timeout 120 python3 benches/anchors/grad_anchors.py 128 512
} > $OUT/grad.txt 2>&1
timeout 60 .gpu/benches/workloads --bench transfers > $OUT/transfers.txt 2>&1
wait
grep -h "test result\|rc=\|FAILED\|minimal failing" $OUT/proptest-seed*.txt > $OUT/proptest-summary.txt
