#!/usr/bin/env bash
# Device call 12 (bfdf3c1): random DAGs against the oracle and fused against unfused on
# CUDA with the recomputation rule and the FFT choice by measurement.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
PROPTEST_CASES=800 PROPTEST_RNG_SEED=77 LAZYFUSE_TEST_CUDA=1 timeout 170 .gpu/tests/proptest_dag > $OUT/proptest.txt 2>&1
echo "rc=$?" >> $OUT/proptest.txt
grep -E "^test |test result" $OUT/proptest.txt > $OUT/proptest-summary.txt
echo done
