// Times one generated axis-0 reduction kernel over 4096x4096 f32 at several launch splits.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include KFILE
int main() {
  const long long M = 4096, R = 4096;
  float *in, *out, *ws; unsigned *cnt;
  cudaMalloc(&in, M * R * 4); cudaMemset(in, 0x3f, M * R * 4);
  cudaMalloc(&out, M * 4); cudaMalloc(&ws, M * 256 * 4);
  cudaMalloc(&cnt, 65536 * 4); cudaMemset(cnt, 0, 65536 * 4);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  int tprs[] = {4, 8, 16, 32};
  int chs[] = {1, 4, 8, 16, 32, 64};
  for (int tpr : tprs) for (int ch : chs) {
    lf_args a = {};
    a.in0 = in; a.out0 = out; a.n = M; a.shape[0] = M; a.shape[1] = R; a.p0 = M; a.p1 = 1.0f;
    a.ws = ws; a.wsi = 0; a.counters = cnt; a.tpr = tpr; a.chunks = ch;
    int rb = 256 / tpr * CW;
    dim3 grid((M + rb - 1) / rb, ch);
    for (int w = 0; w < 3; ++w) ENTRY<<<grid, 256>>>(a);
    cudaEventRecord(e0);
    const int reps = 50;
    for (int w = 0; w < reps; ++w) ENTRY<<<grid, 256>>>(a);
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    std::vector<float> h(M); cudaMemcpy(h.data(), out, M * 4, cudaMemcpyDeviceToHost);
    float want; { unsigned u = 0x3f3f3f3f; float f; memcpy(&f, &u, 4); want = f * R; }
    int bad = 0; for (auto v : h) bad += fabsf(v - want) > 1e-3f * want;
    cudaError_t err = cudaGetLastError();
    printf("%s tpr=%d chunks=%d grid=%dx%d: %.1f us%s%s\n", KFILE, tpr, ch, grid.x, grid.y, ms * 1000 / reps,
           bad ? " WRONG" : "", err ? cudaGetErrorString(err) : "");
  }
  return 0;
}
