#!/usr/bin/env bash
# Short device call: the gradient tests on CUDA, the phase-retrieval example, the grad rows
# and their anchors (JAX, PyTorch eager and CUDA graph) in the same call.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
bash .gpu/run.sh example host_path 10 build cpu > /dev/null 2>&1   # unpacks the bundle
export LAZYFUSE_TEST_CUDA=1 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
{
(cd $(cat .gpu/tests/grad.dir) && CARGO_MANIFEST_DIR="$PWD" timeout 60 "$OLDPWD/.gpu/tests/grad" 2>&1 | grep -E "test result|FAILED|panicked|cuda \.\.\." | head -40)
timeout 60 .gpu/examples/08_phase_retrieval 256 500
timeout 60 .gpu/benches/workloads --bench grad
timeout 120 python3 benches/anchors/grad_anchors.py 128 512
} 2>&1 | tee $OUT/grad.txt
