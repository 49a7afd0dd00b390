# The split sweep of the axis-0 sum kernel (run on the GPU machine from a checkout):
#   bash benches/results/reduce-tiles-2026-12-01/run.sh
# k_old.cu is the kernel before column tiles (one output per thread); the new one is the
# render snapshot codegen/tests/snapshots/reduce_sum_outer_f32.cu (4 outputs per thread),
# also built with its row loop unrolled 2 and 8 times instead of 4.
cd "$(dirname "$0")"
snap=../../../codegen/tests/snapshots/reduce_sum_outer_f32.cu
cp "$snap" /tmp/k_new.cu
sed 's/#pragma unroll 4/#pragma unroll 2/' "$snap" > /tmp/k_new_u2.cu
sed 's/#pragma unroll 4/#pragma unroll 8/' "$snap" > /tmp/k_new_u8.cu
cp k_old.cu /tmp/k_old.cu
cp harness.cu /tmp/harness.cu
cd /tmp
for k in k_old k_new k_new_u2 k_new_u8; do
  cw=4; [ $k = k_old ] && cw=1
  nvcc -O3 -arch=sm_90 -DKFILE="\"$k.cu\"" -DENTRY=lf_4a5f3bd8b654ffbe_i32 -DCW=$cw harness.cu -o h_$k 2>&1 | grep -v warning | head -5
  ./h_$k
done
