// lto_probe.cu: what cuFFT's LTO callbacks (cufftXtSetJITCallback, CUDA 13 signature) cost
// and save on this machine, for the psf pipeline's shape: a pupil computed per element
// (padded by n/2 on each side, ifftshifted) -> 2-D C2C FFT -> |x|^2 written fftshifted.
//
//   nvcc -O2 -o lto_probe benches/lto_probe.cu -lcufft -lnvrtc -lcuda && ./lto_probe [n ...]
//
// Prints, per n (FFT of 2n x 2n): plan creation time with and without callbacks, and the
// median time per pipeline of (a) producer kernel + cufftExecC2C + consumer kernel and
// (b) one cufftExecC2C with a load and a store callback, plus the largest difference.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::printf("FAIL %s = %d at line %d\n", #x, (int)e_, __LINE__); std::exit(1); } } while (0)

// The pupil at padded, ifftshifted position `i` of an m x m grid (m = 2n): 0 outside the
// unit disc and in the padding, exp(2 pi i rho^2 cos(phi)) inside.
static const char* kBody = R"(
struct Info { float* out; int n; int m; };
__device__ __forceinline__ float2 pupil(unsigned long long i, int n, int m) {
    int r = (int)(i / m), c = (int)(i % m);
    // ifftshift of the padded grid: stored position (r, c) holds logical (r + m/2, c + m/2)
    int lr = (r + m / 2) % m - n / 2, lc = (c + m / 2) % m - n / 2;
    if (lr < 0 || lr >= n || lc < 0 || lc >= n) return make_float2(0.f, 0.f);
    float y = -1.f + 2.f * lr / (n - 1), x = -1.f + 2.f * lc / (n - 1);
    float rho2 = x * x + y * y;
    if (rho2 > 1.f) return make_float2(0.f, 0.f);
    float rho = sqrtf(rho2), phi = atan2f(y, x);
    float s, co;
    sincosf(6.283185307f * rho2 * cosf(phi), &s, &co);
    (void)rho;
    return make_float2(co, s);
}
__device__ __forceinline__ void put(float* out, unsigned long long i, float2 v, int m) {
    int r = (int)(i / m), c = (int)(i % m);
    int sr = (r + m / 2) % m, sc = (c + m / 2) % m;
    out[(size_t)sr * m + sc] = v.x * v.x + v.y * v.y;
}
)";

static const char* kCallbacks = R"(
__device__ float2 lf_load(void* in, unsigned long long off, void* info, void* sh) {
    Info* p = (Info*)info;
    return pupil(off, p->n, p->m);
}
__device__ void lf_store(void* out, unsigned long long off, float2 v, void* info, void* sh) {
    Info* p = (Info*)info;
    put(p->out, off, v, p->m);
}
)";

static const char* kKernels = R"(
extern "C" __global__ void produce(float2* a, int n, int m) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < (unsigned long long)m * m) a[i] = pupil(i, n, m);
}
extern "C" __global__ void consume(const float2* a, float* out, int m) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < (unsigned long long)m * m) put(out, i, a[i], m);
}
)";

static std::vector<char> compile(const std::string& src, bool lto, double* ms) {
    auto t0 = std::chrono::steady_clock::now();
    nvrtcProgram prog;
    CK(nvrtcCreateProgram(&prog, src.c_str(), "probe.cu", 0, nullptr, nullptr));
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    std::string arch = std::string(lto ? "-arch=compute_" : "-arch=sm_") + std::to_string(major * 10 + minor);
    std::vector<const char*> opts = {arch.c_str(), "-std=c++17"};
    if (lto) { opts.push_back("-dlto"); opts.push_back("--relocatable-device-code=true"); opts.push_back("-default-device"); }
    nvrtcResult r = nvrtcCompileProgram(prog, (int)opts.size(), opts.data());
    if (r != NVRTC_SUCCESS) {
        size_t n; nvrtcGetProgramLogSize(prog, &n);
        std::string log(n, 0); nvrtcGetProgramLog(prog, &log[0]);
        std::printf("nvrtc: %s\n%s\n", nvrtcGetErrorString(r), log.c_str());
        std::exit(1);
    }
    std::vector<char> out;
    size_t n;
    if (lto) { CK(nvrtcGetLTOIRSize(prog, &n)); out.resize(n); CK(nvrtcGetLTOIR(prog, out.data())); }
    else { CK(nvrtcGetCUBINSize(prog, &n)); out.resize(n); CK(nvrtcGetCUBIN(prog, out.data())); }
    nvrtcDestroyProgram(&prog);
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
    std::vector<int> ns;
    for (int i = 1; i < argc; i++) ns.push_back(std::atoi(argv[i]));
    if (ns.empty()) ns = {128, 512, 2048};
    CK(cudaFree(0));
    int ver = 0; cufftGetVersion(&ver);
    std::printf("cufft version %d, CUFFT_VERSION %d\n", ver, CUFFT_VERSION);
    double ms;
    std::vector<char> cubin = compile(std::string(kBody) + kKernels, false, &ms);
    std::printf("kernels compiled in %.1f ms\n", ms);
    std::vector<char> lto = compile(std::string(kBody) + kCallbacks, true, &ms);
    std::printf("callbacks compiled to LTO-IR (%zu bytes) in %.1f ms\n", lto.size(), ms);
    CUmodule mod; CUfunction produce, consume;
    CK(cuModuleLoadData(&mod, cubin.data()));
    CK(cuModuleGetFunction(&produce, mod, "produce"));
    CK(cuModuleGetFunction(&consume, mod, "consume"));
    cudaStream_t stream; CK(cudaStreamCreate(&stream));
    for (int n : ns) {
        int m = 2 * n;
        size_t elems = (size_t)m * m;
        float2* a; float* out; float* out2;
        CK(cudaMalloc(&a, elems * sizeof(float2)));
        CK(cudaMalloc(&out, elems * sizeof(float)));
        CK(cudaMalloc(&out2, elems * sizeof(float)));
        struct Info { float* out; int n; int m; } hinfo = {out2, n, m};
        void* dinfo; CK(cudaMalloc(&dinfo, sizeof(hinfo)));
        CK(cudaMemcpy(dinfo, &hinfo, sizeof(hinfo), cudaMemcpyHostToDevice));

        auto t0 = std::chrono::steady_clock::now();
        cufftHandle plain; CK(cufftPlan2d(&plain, m, m, CUFFT_C2C));
        double plan_plain = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        CK(cufftSetStream(plain, stream));

        auto make = [&](bool ld, bool st, cufftHandle* h) {
            CK(cufftCreate(h));
            if (ld) CK(cufftXtSetJITCallback(*h, "lf_load", lto.data(), lto.size(), CUFFT_CB_LD_COMPLEX, &dinfo));
            if (st) CK(cufftXtSetJITCallback(*h, "lf_store", lto.data(), lto.size(), CUFFT_CB_ST_COMPLEX, &dinfo));
            size_t work;
            return (int)cufftMakePlan2d(*h, m, m, CUFFT_C2C, &work);
        };
        cufftHandle lo, so;
        double plan_lo, plan_so;
        t0 = std::chrono::steady_clock::now();
        CK(make(true, false, &lo));
        plan_lo = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        t0 = std::chrono::steady_clock::now();
        CK(make(false, true, &so));
        plan_so = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        CK(cufftSetStream(lo, stream));
        CK(cufftSetStream(so, stream));
        t0 = std::chrono::steady_clock::now();
        cufftHandle cb;
        CK(make(true, true, &cb));
        double plan_cb = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        CK(cufftSetStream(cb, stream));

        unsigned blocks = (unsigned)((elems + 255) / 256);
        auto plain_run = [&] {
            void* pa[] = {&a, &n, &m};
            CK(cuLaunchKernel(produce, blocks, 1, 1, 256, 1, 1, 0, stream, pa, nullptr));
            CK(cufftExecC2C(plain, (cufftComplex*)a, (cufftComplex*)a, CUFFT_FORWARD));
            void* pc[] = {&a, &out, &m};
            CK(cuLaunchKernel(consume, blocks, 1, 1, 256, 1, 1, 0, stream, pc, nullptr));
        };
        auto cb_run = [&] { CK(cufftExecC2C(cb, (cufftComplex*)a, (cufftComplex*)a, CUFFT_FORWARD)); };
        auto time = [&](auto f) {
            for (int i = 0; i < 5; i++) f();
            CK(cudaStreamSynchronize(stream));
            std::vector<double> ts;
            cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
            for (int rep = 0; rep < 15; rep++) {
                cudaEventRecord(e0, stream);
                for (int i = 0; i < 20; i++) f();
                cudaEventRecord(e1, stream);
                cudaEventSynchronize(e1);
                float t; cudaEventElapsedTime(&t, e0, e1);
                ts.push_back(t * 1000.0 / 20);
            }
            return median(ts);
        };
        auto fft_only = [&] { CK(cufftExecC2C(plain, (cufftComplex*)a, (cufftComplex*)a, CUFFT_FORWARD)); };
        auto lo_run = [&] {
            CK(cufftExecC2C(lo, (cufftComplex*)a, (cufftComplex*)a, CUFFT_FORWARD));
            void* pc[] = {&a, &out, &m};
            CK(cuLaunchKernel(consume, blocks, 1, 1, 256, 1, 1, 0, stream, pc, nullptr));
        };
        auto so_run = [&] {
            void* pa[] = {&a, &n, &m};
            CK(cuLaunchKernel(produce, blocks, 1, 1, 256, 1, 1, 0, stream, pa, nullptr));
            CK(cufftExecC2C(so, (cufftComplex*)a, (cufftComplex*)a, CUFFT_FORWARD));
        };
        double t_fft = time(fft_only), t_lo = time(lo_run), t_so = time(so_run);
        std::printf("n %d: plan %.1f ms load-only, %.1f ms store-only; fft alone %.1f us, load callback + consumer kernel %.1f us, producer kernel + store callback %.1f us\n",
                    n, plan_lo, plan_so, t_fft, t_lo, t_so);
        // pruned padding: the rows that hold data (after the ifftshift, rows m - n/2 .. m
        // and 0 .. n/2) get 1-D transforms, then every column is transformed
        cufftHandle rows, cols;
        {
            int len[1] = {m};
            CK(cufftPlanMany(&rows, 1, len, nullptr, 1, m, nullptr, 1, m, CUFFT_C2C, n / 2));
            int emb[1] = {m};
            CK(cufftPlanMany(&cols, 1, len, emb, m, 1, emb, m, 1, CUFFT_C2C, m));
            CK(cufftSetStream(rows, stream));
            CK(cufftSetStream(cols, stream));
        }
        auto pruned = [&] {
            cufftComplex* top = (cufftComplex*)a;
            cufftComplex* bottom = (cufftComplex*)a + (size_t)(m - n / 2) * m;
            CK(cufftExecC2C(rows, top, top, CUFFT_FORWARD));
            CK(cufftExecC2C(rows, bottom, bottom, CUFFT_FORWARD));
            CK(cufftExecC2C(cols, (cufftComplex*)a, (cufftComplex*)a, CUFFT_FORWARD));
        };
        auto pruned_run = [&] {
            void* pa[] = {&a, &n, &m};
            CK(cuLaunchKernel(produce, blocks, 1, 1, 256, 1, 1, 0, stream, pa, nullptr));
            pruned();
            void* pc[] = {&a, &out2, &m};
            CK(cuLaunchKernel(consume, blocks, 1, 1, 256, 1, 1, 0, stream, pc, nullptr));
        };
        double t_pruned_fft = time(pruned), t_pruned = time(pruned_run);
        {
            std::vector<float> h1(elems), h2(elems);
            plain_run();
            CK(cudaMemcpy(h1.data(), out, elems * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h2.data(), out2, elems * 4, cudaMemcpyDeviceToHost));
            double maxd = 0, maxv = 0;
            for (size_t i = 0; i < elems; i++) { maxd = std::max(maxd, (double)std::fabs(h1[i] - h2[i])); maxv = std::max(maxv, (double)std::fabs(h1[i])); }
            std::printf("n %d: pruned padding: transforms alone %.1f us (2-D plan %.1f us); kernel + pruned transforms + kernel %.1f us; max |diff| %.3g of max %.3g\n",
                        n, t_pruned_fft, t_fft, t_pruned, maxd, maxv);
        }
        cufftDestroy(rows); cufftDestroy(cols);
        double t_plain = time(plain_run), t_cb = time(cb_run);
        std::vector<float> h1(elems), h2(elems);
        CK(cudaMemcpy(h1.data(), out, elems * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2.data(), out2, elems * 4, cudaMemcpyDeviceToHost));
        double maxd = 0, maxv = 0;
        for (size_t i = 0; i < elems; i++) { maxd = std::max(maxd, (double)std::fabs(h1[i] - h2[i])); maxv = std::max(maxv, (double)std::fabs(h1[i])); }
        std::printf("n %d (fft %dx%d): plan %.2f ms plain, %.2f ms with callbacks; kernel+fft+kernel %.1f us, callbacks %.1f us; max |diff| %.3g of max %.3g\n",
                    n, m, m, plan_plain, plan_cb, t_plain, t_cb, maxd, maxv);
        cufftDestroy(plain); cufftDestroy(cb); cufftDestroy(lo); cufftDestroy(so);
        cudaFree(a); cudaFree(out); cudaFree(out2); cudaFree(dinfo);
    }
    return 0;
}
