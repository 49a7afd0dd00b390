// lto_sim_probe.cu: what cuFFT's LTO callbacks save on the sim100 step's shape,
// u += dt (u - u^3); u = real(ifft2(fft2(u) * mult)), with mult real and even.
//
//   nvcc -O2 -o lto_sim_probe benches/lto_sim_probe.cu -lcufft -lnvrtc -lcuda && ./lto_sim_probe [n ...]
//
// Plans, each timed over 100 steps as stream launches, as one CUDA graph launched per step
// (what a traced Function does) and as one graph of all 100 steps:
//   c2c      producer kernel, C2C, multiply kernel, C2C, real-part kernel (today's plan)
//   c2c-cb   C2C with a load callback (the update, real -> complex) and a store callback
//            (the multiply), C2C with a store callback (real part, scaled): no kernels
//   r2c      producer kernel, R2C, multiply kernel on the half spectrum, C2R, scale kernel
//   r2c-cb   R2C with a load callback (the update) and a store callback (the multiply),
//            C2R with a store callback (the scale): no kernels
// Every plan starts from the same u and its result after 100 steps is compared with c2c's.
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
#include <functional>
#include <string>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::printf("FAIL %s = %d at line %d\n", #x, (int)e_, __LINE__); std::exit(1); } } while (0)

static const char* kBody = R"(
struct Info { float* u; const float* mult; float dt; float scale; int n; int half; };
__device__ __forceinline__ float upd(float u, float dt) { return u + dt * (u - u * u * u); }
)";

static const char* kCallbacks = R"(
__device__ float2 ld_c(void* in, unsigned long long off, void* info, void* sh) {
    Info* p = (Info*)info;
    return make_float2(upd(p->u[off], p->dt), 0.f);
}
__device__ void st_mul_full(void* out, unsigned long long off, float2 v, void* info, void* sh) {
    Info* p = (Info*)info;
    float m = p->mult[off];
    ((float2*)out)[off] = make_float2(v.x * m, v.y * m);
}
__device__ void st_real(void* out, unsigned long long off, float2 v, void* info, void* sh) {
    Info* p = (Info*)info;
    p->u[off] = v.x * p->scale;
}
__device__ float ld_r(void* in, unsigned long long off, void* info, void* sh) {
    Info* p = (Info*)info;
    return upd(((const float*)in)[off], p->dt);
}
__device__ void st_mul_half(void* out, unsigned long long off, float2 v, void* info, void* sh) {
    Info* p = (Info*)info;
    unsigned long long r = off / p->half, c = off % p->half;
    float m = p->mult[r * p->n + c];
    ((float2*)out)[off] = make_float2(v.x * m, v.y * m);
}
__device__ void st_scale(void* out, unsigned long long off, float v, void* info, void* sh) {
    Info* p = (Info*)info;
    ((float*)out)[off] = v * p->scale;
}
)";

static const char* kKernels = R"(
extern "C" __global__ void produce_c(const float* u, float2* f, float dt, int tot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < tot) f[i] = make_float2(upd(u[i], dt), 0.f);
}
extern "C" __global__ void mul_full(float2* f, const float* m, int tot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < tot) { float2 v = f[i]; float k = m[i]; f[i] = make_float2(v.x * k, v.y * k); }
}
extern "C" __global__ void real_part(const float2* f, float* u, float scale, int tot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < tot) u[i] = f[i].x * scale;
}
extern "C" __global__ void produce_r(float* u, float dt, int tot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < tot) u[i] = upd(u[i], dt);
}
extern "C" __global__ void mul_half(float2* h, const float* m, int n, int half) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * half) { int r = i / half, c = i % half; float2 v = h[i]; float k = m[r * n + c]; h[i] = make_float2(v.x * k, v.y * k); }
}
extern "C" __global__ void scale_r(const float* t, float* u, float scale, int tot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < tot) u[i] = t[i] * scale;
}
)";

static std::vector<char> compile(const std::string& src, bool lto) {
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
    return out;
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
    std::vector<int> ns;
    for (int i = 1; i < argc; i++) ns.push_back(std::atoi(argv[i]));
    if (ns.empty()) ns = {256, 1024};
    CK(cudaFree(0));
    std::vector<char> cubin = compile(std::string(kBody) + kKernels, false);
    std::vector<char> lto = compile(std::string(kBody) + kCallbacks, true);
    CUmodule mod;
    CK(cuModuleLoadData(&mod, cubin.data()));
    auto fn = [&](const char* name) { CUfunction f; CK(cuModuleGetFunction(&f, mod, name)); return f; };
    CUfunction produce_c = fn("produce_c"), mul_full = fn("mul_full"), real_part = fn("real_part");
    CUfunction produce_r = fn("produce_r"), mul_half = fn("mul_half"), scale_r = fn("scale_r");
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int n : ns) {
        int tot = n * n, half = n / 2 + 1;
        float dt = 0.1f, scale = 1.0f / tot;
        std::vector<float> hu(tot), hm(tot);
        unsigned seed = 12345;
        for (int i = 0; i < tot; i++) { seed = seed * 1664525u + 1013904223u; hu[i] = ((seed >> 8) / 16777216.0f - 0.5f) * 0.2f; }
        for (int r = 0; r < n; r++) for (int c = 0; c < n; c++) {
            auto k = [&](int i) { float f = i < (n + 1) / 2 ? i : i - n; return f * 2.f * 3.14159265f / n; };
            hm[r * n + c] = 1.f / (1.f + dt * (k(r) * k(r) + k(c) * k(c)));
        }
        float *u, *m, *t; float2 *f, *h;
        CK(cudaMalloc(&u, tot * 4)); CK(cudaMalloc(&m, tot * 4)); CK(cudaMalloc(&t, tot * 4));
        CK(cudaMalloc(&f, tot * 8)); CK(cudaMalloc(&h, (size_t)n * half * 8));
        CK(cudaMemcpy(m, hm.data(), tot * 4, cudaMemcpyHostToDevice));
        struct Info { float* u; const float* mult; float dt; float scale; int n; int half; } hinfo = {u, m, dt, scale, n, half};
        void* dinfo; CK(cudaMalloc(&dinfo, sizeof(hinfo)));
        CK(cudaMemcpy(dinfo, &hinfo, sizeof(hinfo), cudaMemcpyHostToDevice));

        auto plan = [&](cufftType type, std::vector<std::pair<const char*, cufftXtCallbackType>> cbs) {
            cufftHandle p; CK(cufftCreate(&p));
            for (auto& cb : cbs) CK(cufftXtSetJITCallback(p, cb.first, lto.data(), lto.size(), cb.second, &dinfo));
            size_t work; CK(cufftMakePlan2d(p, n, n, type, &work));
            CK(cufftSetStream(p, s));
            return p;
        };
        cufftHandle c2c = plan(CUFFT_C2C, {});
        cufftHandle c2c_fwd_cb = plan(CUFFT_C2C, {{"ld_c", CUFFT_CB_LD_COMPLEX}, {"st_mul_full", CUFFT_CB_ST_COMPLEX}});
        cufftHandle c2c_inv_cb = plan(CUFFT_C2C, {{"st_real", CUFFT_CB_ST_COMPLEX}});
        cufftHandle r2c = plan(CUFFT_R2C, {}), c2r = plan(CUFFT_C2R, {});
        cufftHandle r2c_cb = plan(CUFFT_R2C, {{"ld_r", CUFFT_CB_LD_REAL}, {"st_mul_half", CUFFT_CB_ST_COMPLEX}});
        cufftHandle c2r_cb = plan(CUFFT_C2R, {{"st_scale", CUFFT_CB_ST_REAL}});

        unsigned blk = (unsigned)((tot + 255) / 256), hblk = (unsigned)((n * half + 255) / 256);
        auto launch = [&](CUfunction k, unsigned b, std::vector<void*> args) { CK(cuLaunchKernel(k, b, 1, 1, 256, 1, 1, 0, s, args.data(), nullptr)); };
        std::vector<std::pair<const char*, std::function<void()>>> plans = {
            {"c2c", [&] {
                launch(produce_c, blk, {&u, &f, &dt, &tot});
                CK(cufftExecC2C(c2c, f, f, CUFFT_FORWARD));
                launch(mul_full, blk, {&f, &m, &tot});
                CK(cufftExecC2C(c2c, f, f, CUFFT_INVERSE));
                launch(real_part, blk, {&f, &u, &scale, &tot});
            }},
            {"c2c-cb", [&] {
                CK(cufftExecC2C(c2c_fwd_cb, f, f, CUFFT_FORWARD));
                CK(cufftExecC2C(c2c_inv_cb, f, f, CUFFT_INVERSE));
            }},
            {"r2c", [&] {
                launch(produce_r, blk, {&u, &dt, &tot});
                CK(cufftExecR2C(r2c, u, h));
                launch(mul_half, hblk, {&h, &m, &n, &half});
                CK(cufftExecC2R(c2r, h, t));
                launch(scale_r, blk, {&t, &u, &scale, &tot});
            }},
            {"r2c-cb", [&] {
                CK(cufftExecR2C(r2c_cb, u, h));
                CK(cufftExecC2R(c2r_cb, h, u));
            }},
        };
        std::vector<float> ref;
        // PROBE_QUICK=1: two steps per plan and no timing (for kernel profilers)
        bool quick = std::getenv("PROBE_QUICK") != nullptr;
        for (auto& pl : plans) {
            const char* name = pl.first; auto& step = pl.second;
            CK(cudaMemcpy(u, hu.data(), tot * 4, cudaMemcpyHostToDevice));
            for (int i = 0; i < (quick ? 2 : 100); i++) step();
            if (quick) { CK(cudaStreamSynchronize(s)); continue; }
            CK(cudaStreamSynchronize(s));
            std::vector<float> out(tot);
            CK(cudaMemcpy(out.data(), u, tot * 4, cudaMemcpyDeviceToHost));
            if (ref.empty()) ref = out;
            double maxd = 0, maxv = 0;
            for (int i = 0; i < tot; i++) { maxd = std::max(maxd, (double)std::fabs(out[i] - ref[i])); maxv = std::max(maxv, (double)std::fabs(ref[i])); }
            cudaGraph_t g1, g100; cudaGraphExec_t e1, e100;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)); step(); CK(cudaStreamEndCapture(s, &g1));
            CK(cudaGraphInstantiate(&e1, g1, 0));
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)); for (int i = 0; i < 100; i++) step(); CK(cudaStreamEndCapture(s, &g100));
            CK(cudaGraphInstantiate(&e100, g100, 0));
            size_t nodes = 0; CK(cudaGraphGetNodes(g1, nullptr, &nodes));
            auto time = [&](std::function<void()> run100) {
                for (int i = 0; i < 3; i++) run100();
                CK(cudaStreamSynchronize(s));
                std::vector<double> ts;
                for (int rep = 0; rep < 9; rep++) {
                    double t0 = now_us();
                    run100();
                    CK(cudaStreamSynchronize(s));
                    ts.push_back(now_us() - t0);
                }
                return median(ts);
            };
            double t_stream = time([&] { for (int i = 0; i < 100; i++) step(); });
            double t_g1 = time([&] { for (int i = 0; i < 100; i++) CK(cudaGraphLaunch(e1, s)); });
            double t_g100 = time([&] { CK(cudaGraphLaunch(e100, s)); });
            std::printf("sim100 %d\t%s\tstream %.0f us\tgraph per step %.0f us\tone graph %.0f us\t%zu graph nodes per step\tmax |diff| from c2c %.2g of %.2g\n",
                        n, name, t_stream, t_g1, t_g100, nodes, maxd, maxv);
            cudaGraphExecDestroy(e1); cudaGraphExecDestroy(e100); cudaGraphDestroy(g1); cudaGraphDestroy(g100);
        }
        for (auto p : {c2c, c2c_fwd_cb, c2c_inv_cb, r2c, c2r, r2c_cb, c2r_cb}) cufftDestroy(p);
        cudaFree(u); cudaFree(m); cudaFree(t); cudaFree(f); cudaFree(h); cudaFree(dinfo);
    }
    return 0;
}
