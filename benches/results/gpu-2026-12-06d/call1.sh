#!/usr/bin/env bash
# Device call 1: first readback of the psf 2048 example under staging limits
# (LAZYFUSE_STAGING), transfers rows, and the small-reduction split A/B (base = 23bf58a).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
cd /tmp
R=$OLDPWD
for rep in 1 2; do
  echo "base rep$rep: $($R/.gpu/base/02_psf 2048 2>&1 | grep -E 'readback|first eval' | tr '\n' ' ')"
  for cfg in default 64 16 8 64early 16early 8early; do
    if [ $cfg = default ]; then unset LAZYFUSE_STAGING; else export LAZYFUSE_STAGING=$cfg; fi
    echo "$cfg rep$rep: $($R/.gpu/examples/02_psf 2048 2>&1 | grep -E 'readback|first eval' | tr '\n' ' ')"
  done
  unset LAZYFUSE_STAGING
done > $OUT/readback.txt 2>&1
cd $R
for cfg in default 16early; do
  if [ $cfg = default ]; then unset LAZYFUSE_STAGING; else export LAZYFUSE_STAGING=$cfg; fi
  echo "## $cfg"; timeout 100 .gpu/benches/workloads --bench transfers 2>&1
done > $OUT/transfers.txt
unset LAZYFUSE_STAGING
for rep in 1 2; do
  for b in base benches; do
    echo "## $b rep$rep"; timeout 120 .gpu/$b/workloads --bench grad sumsq mean 2>&1
  done
done > $OUT/reduce-ab.txt
LAZYFUSE_PROFILE=summary timeout 60 .gpu/benches/workloads --bench grad --quick > $OUT/grad-profile.txt 2>&1
echo done
