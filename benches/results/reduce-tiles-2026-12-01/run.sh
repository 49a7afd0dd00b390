cd "$(dirname "$0")"
for k in k_old k_new k_new_u2 k_new_u8; do
  cw=4; [ $k = k_old ] && cw=1
  nvcc -O3 -arch=sm_90 -DKFILE="\"$k.cu\"" -DENTRY=lf_4a5f3bd8b654ffbe_i32 -DCW=$cw harness.cu -o h_$k 2>&1 | grep -v warning | head -5
  ./h_$k
done
