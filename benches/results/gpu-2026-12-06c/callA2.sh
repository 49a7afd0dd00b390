#!/usr/bin/env bash
# Device call A2 (the examples missing from call A's bundle): host path with plain
# single-kernel launches against graph replay (LAZYFUSE_GRAPHS=all), alternating; the
# phase-retrieval example; psf 2048 example (readback into a fresh Vec).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
mkdir -p .gpu && (cd .gpu && xz -dc ../.gpu-a2/ex.txz | tar -xf -)   # the three examples
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
{
for r in 1 2; do
  echo "== plain $r"; .gpu/examples/host_path 100000 all cuda
  echo "== graphs=all $r"; LAZYFUSE_GRAPHS=all .gpu/examples/host_path 100000 all cuda
done
echo "== cpu"; .gpu/examples/host_path 100000 all cpu
} > $OUT/hostpath.txt 2>&1
timeout 90 .gpu/examples/08_phase_retrieval 256 500 > $OUT/phase_retrieval.txt 2>&1
(cd $OUT && for r in 1 2; do timeout 60 $OLDPWD/.gpu/examples/02_psf 2048; done) > $OUT/psf2048.txt 2>&1
rm -f $OUT/psf.png
