#!/usr/bin/env bash
# Device call 6: readback registered in 8 MiB pieces on every thread (registered) against one
# registration (registered-serial) and staged: first readback (psf 2048 example, fresh
# process) and steady (transfers rows).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export LAZYFUSE_CACHE_DIR=/tmp/lfcache
nvidia-smi -L > $OUT/machine.txt
R=$PWD; cd /tmp
for rep in 1 2 3; do
  for mode in staged registered registered-serial; do
    export LAZYFUSE_READBACK=$mode
    echo "$mode rep$rep: $($R/.gpu/examples/02_psf 2048 2>&1 | grep -E 'readback|first eval' | tr '\n' ' ')"
  done
done > $OUT/readback.txt 2>&1
cd $R
for mode in staged registered registered-serial; do
  export LAZYFUSE_READBACK=$mode
  echo "## $mode"; timeout 100 .gpu/benches/workloads --bench transfers 2>&1 | grep -E "readback"
done > $OUT/transfers.txt
echo done
