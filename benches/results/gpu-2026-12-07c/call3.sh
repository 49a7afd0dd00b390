#!/usr/bin/env bash
# Device call 3 (0548a5b, the bundle of call 2): the sim and psf rows of 6a94748 (.gpu/old)
# and 0548a5b, alternating twice (old, new, old, new).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
(cd .gpu && xz -dc bins.txz | tar -xf - && xz -dc so.txz | tar -xf -)
(mkdir -p .gpu/old && cd .gpu/old && xz -dc ../old.txz | tar -xf -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > $OUT/machine.txt
start=$(date +%s)
for b in old new old new; do
  [ $(( $(date +%s) - start )) -gt 200 ] && break
  case $b in old) W=.gpu/old/workloads;; *) W=.gpu/benches/workloads;; esac
  echo "## $b $(( $(date +%s) - start )) s"; LAZYFUSE_CACHE_DIR=/tmp/lfc-$b timeout 60 $W --bench sim psf 2>&1 | grep -vE "^\s*$"
done > $OUT/bench-ab.txt
echo "end: $(( $(date +%s) - start )) s"
