// prune_probe.cu: which pruned 2-D transform of psf's zero-padded input is cheapest on this
// machine. The input is m x m (m = 2n) with data only in the first and last n/2 rows and
// columns (an n x n block padded by n/2 on each side, then ifftshifted).
//
//   nvcc -O2 -o prune_probe benches/prune_probe.cu -lcufft && ./prune_probe [n ...]
//
// Per n it prints the median us per transform (CUDA events over 20-call batches) of:
//   2d     one cufftPlan2d C2C over the whole grid;
//   rows   1-D transforms of the 2 x n/2 rows that hold data, then every column;
//   cols   1-D transforms of the 2 x n/2 columns that hold data, then every row;
// and each pruned result's largest difference from the 2-D plan's.
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::printf("FAIL %s = %d at line %d\n", #x, (int)e_, __LINE__); std::exit(1); } } while (0)

__global__ void fill(float2* a, int n, int m, float2* ref) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)m * m) return;
    int r = (int)(i / m), c = (int)(i % m);
    bool data = (r < n / 2 || r >= m - n / 2) && (c < n / 2 || c >= m - n / 2);
    float2 v = data ? make_float2(__sinf(0.37f * r + 0.11f * c), __cosf(0.21f * r - 0.53f * c)) : make_float2(0.f, 0.f);
    a[i] = v;
    if (ref) ref[i] = v;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    std::vector<int> ns;
    for (int i = 1; i < argc; i++) ns.push_back(std::atoi(argv[i]));
    if (ns.empty()) ns = {128, 512, 2048};
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    for (int n : ns) {
        int m = 2 * n;
        size_t elems = (size_t)m * m;
        float2 *a, *ref;
        CK(cudaMalloc(&a, elems * 8));
        CK(cudaMalloc(&ref, elems * 8));
        unsigned blocks = (unsigned)((elems + 255) / 256);
        cufftHandle plan2d, rows_half, cols_all, cols_half, rows_all;
        CK(cufftPlan2d(&plan2d, m, m, CUFFT_C2C));
        int len[1] = {m}, emb[1] = {m};
        // contiguous rows: stride 1, distance m
        CK(cufftPlanMany(&rows_half, 1, len, emb, 1, m, emb, 1, m, CUFFT_C2C, n / 2));
        CK(cufftPlanMany(&rows_all, 1, len, emb, 1, m, emb, 1, m, CUFFT_C2C, m));
        // strided columns: stride m, distance 1
        CK(cufftPlanMany(&cols_half, 1, len, emb, m, 1, emb, m, 1, CUFFT_C2C, n / 2));
        CK(cufftPlanMany(&cols_all, 1, len, emb, m, 1, emb, m, 1, CUFFT_C2C, m));
        for (auto p : {plan2d, rows_half, cols_all, cols_half, rows_all}) CK(cufftSetStream(p, stream));
        auto c = [](float2* p) { return (cufftComplex*)p; };
        auto refill = [&] { fill<<<blocks, 256, 0, stream>>>(a, n, m, nullptr); };
        auto t2d = [&] { CK(cufftExecC2C(plan2d, c(a), c(a), CUFFT_FORWARD)); };
        auto trows = [&] {
            CK(cufftExecC2C(rows_half, c(a), c(a), CUFFT_FORWARD));
            float2* b = a + (size_t)(m - n / 2) * m;
            CK(cufftExecC2C(rows_half, c(b), c(b), CUFFT_FORWARD));
            CK(cufftExecC2C(cols_all, c(a), c(a), CUFFT_FORWARD));
        };
        auto tcols = [&] {
            CK(cufftExecC2C(cols_half, c(a), c(a), CUFFT_FORWARD));
            float2* b = a + (m - n / 2);
            CK(cufftExecC2C(cols_half, c(b), c(b), CUFFT_FORWARD));
            CK(cufftExecC2C(rows_all, c(a), c(a), CUFFT_FORWARD));
        };
        auto time = [&](auto f) {
            for (int i = 0; i < 5; i++) f();
            CK(cudaStreamSynchronize(stream));
            std::vector<double> ts;
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            for (int rep = 0; rep < 15; rep++) {
                cudaEventRecord(e0, stream);
                for (int i = 0; i < 20; i++) f();
                cudaEventRecord(e1, stream);
                cudaEventSynchronize(e1);
                float t;
                cudaEventElapsedTime(&t, e0, e1);
                ts.push_back(t * 1000.0 / 20);
            }
            return median(ts);
        };
        // values are checked once each; the timings transform the transformed data again,
        // which costs the same
        std::vector<float2> h2d(elems), hp(elems);
        fill<<<blocks, 256, 0, stream>>>(a, n, m, ref);
        t2d();
        CK(cudaMemcpyAsync(h2d.data(), a, elems * 8, cudaMemcpyDeviceToHost, stream));
        CK(cudaStreamSynchronize(stream));
        double peak = 0;
        for (auto v : h2d) peak = std::max(peak, (double)std::hypot(v.x, v.y));
        auto diff = [&](auto f) {
            refill();
            f();
            CK(cudaMemcpyAsync(hp.data(), a, elems * 8, cudaMemcpyDeviceToHost, stream));
            CK(cudaStreamSynchronize(stream));
            double d = 0;
            for (size_t i = 0; i < elems; i++) d = std::max(d, (double)std::hypot(hp[i].x - h2d[i].x, hp[i].y - h2d[i].y));
            return d / peak;
        };
        double drows = diff(trows), dcols = diff(tcols);
        double s2d = time(t2d), srows = time(trows), scols = time(tcols);
        auto tfill_2d = [&] { refill(); t2d(); };
        auto tfill_cols = [&] { refill(); tcols(); };
        double sf2d = time(tfill_2d), sfcols = time(tfill_cols);
        std::printf("n %d (fft %dx%d): 2d %.1f us, rows %.1f us (diff %.2g of peak), cols %.1f us (diff %.2g); with a fill kernel: 2d %.1f, cols %.1f\n",
                    n, m, m, s2d, srows, drows, scols, dcols, sf2d, sfcols);
        for (auto p : {plan2d, rows_half, cols_all, cols_half, rows_all}) cufftDestroy(p);
        cudaFree(a);
        cudaFree(ref);
    }
    return 0;
}
