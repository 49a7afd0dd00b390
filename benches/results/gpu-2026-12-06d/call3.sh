#!/usr/bin/env bash
# Device call 3: the FFT choice by measurement (default backend) in tests and fft1d/psf rows;
# readback of registered fresh destinations against staged (LAZYFUSE_READBACK).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export LAZYFUSE_CACHE_DIR=/tmp/lfcache
nvidia-smi -L > $OUT/machine.txt
R=$PWD; cd /tmp
for rep in 1 2 3; do
  for mode in auto staged registered; do
    export LAZYFUSE_READBACK=$mode
    echo "$mode rep$rep: $($R/.gpu/examples/02_psf 2048 2>&1 | grep -E 'readback|first eval' | tr '\n' ' ')"
  done
done > $OUT/readback.txt 2>&1
cd $R
for mode in auto staged registered; do
  export LAZYFUSE_READBACK=$mode
  echo "## $mode"; timeout 100 .gpu/benches/workloads --bench transfers 2>&1
done > $OUT/transfers.txt
unset LAZYFUSE_READBACK
export LAZYFUSE_TEST_CUDA=1 LAZYFUSE_REQUIRE_NVRTC=1
for mode in default generated; do
  for t in fft_fused fft loops fft_generated structure reductions; do
    if [ $mode = generated ]; then export LAZYFUSE_FFT=generated; else unset LAZYFUSE_FFT; fi
    (CARGO_MANIFEST_DIR="$PWD" timeout 150 .gpu/tests/$t) > $OUT/t.log 2>&1; rc=$?
    echo "$mode $t rc=$rc cuda-ok=$(grep -c '::cuda ... ok' $OUT/t.log) $(grep -h '^test result' $OUT/t.log | tail -1)"
    [ $rc = 0 ] || grep -E "FAILED|panicked|Err|error" $OUT/t.log | head -12
  done
done > $OUT/tests-summary.txt 2>&1
rm -f $OUT/t.log
unset LAZYFUSE_TEST_CUDA LAZYFUSE_REQUIRE_NVRTC LAZYFUSE_FFT
cp /tmp/lfcache/fft-choices.tsv $OUT/fft-choices-after-tests.tsv 2>/dev/null
timeout 200 .gpu/benches/workloads --bench fft1d psf > $OUT/fft-psf.txt 2>&1
cp /tmp/lfcache/fft-choices.tsv $OUT/fft-choices.tsv 2>/dev/null
echo done
