//! The FFT helper kernels (resizing the half spectrum, the Hermitian pass, real/complex
//! conversions for length-1 real axes): one CUDA source compiled once per device.

use super::super::compile::{compile_for, nvrtc_present, Target};
use super::super::device::CudaDevice;
use super::super::driver_err;
use crate::{Error, Result};
use cudarc::driver::CudaFunction;
use cudarc::nvrtc::Ptx;
use lazyfuse_codegen::cuda::Rendered;
use std::collections::HashMap;

/// Threads per block of the helper kernels.
pub(super) const HELPER_BLOCK: u32 = 256;

/// Source of the helper kernels (self-contained: no headers). Grid-stride loops over
/// 64-bit indices; one `extern "C"` entry per kernel and precision.
pub(super) const HELPER_SOURCE: &str = r#"
struct __align__(8) lf_c32 { float re, im; };
struct __align__(16) lf_c64 { double re, im; };

// dst[o, k, i] = k < n ? src[o, k, i] : 0 for k < h; with `sanitize`, the imaginary part
// of entries k == 0 and k == nyq is cleared.
template <typename C, typename R>
__device__ __forceinline__ void resize_impl(const C* __restrict__ src, C* __restrict__ dst,
    long long outer, long long n, long long h, long long inner, long long nyq, int sanitize) {
    const long long total = outer * h * inner;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long i = idx % inner;
        const long long t = idx / inner;
        const long long k = t % h;
        const long long o = t / h;
        C v;
        if (k < n) {
            v = src[(o * n + k) * inner + i];
        } else {
            v.re = (R)0;
            v.im = (R)0;
        }
        if (sanitize && (k == 0 || k == nyq)) v.im = (R)0;
        dst[idx] = v;
    }
}

// Clears the imaginary part of w[o, 0, i] and (nyq >= 0) of w[o, nyq, i].
template <typename C, typename R>
__device__ __forceinline__ void hermitian_impl(C* w, long long outer, long long h,
    long long inner, long long nyq) {
    const long long total = outer * inner;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long i = idx % inner;
        const long long o = idx / inner;
        const long long base = o * h * inner + i;
        w[base].im = (R)0;
        if (nyq >= 0) w[base + nyq * inner].im = (R)0;
    }
}

template <typename C, typename R>
__device__ __forceinline__ void to_complex_impl(const R* __restrict__ src, C* __restrict__ dst,
    long long n) {
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long long)gridDim.x * blockDim.x) {
        C v;
        v.re = src[j];
        v.im = (R)0;
        dst[j] = v;
    }
}

template <typename C, typename R>
__device__ __forceinline__ void real_part_impl(const C* __restrict__ src, R* __restrict__ dst,
    long long n) {
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long long)gridDim.x * blockDim.x) {
        dst[j] = src[j].re;
    }
}

#define LF_FFT_HELPERS(S, C, R)                                                              \
extern "C" __global__ void __launch_bounds__(256) lf_fft_resize_##S(const C* src, C* dst,    \
    long long outer, long long n, long long h, long long inner, long long nyq, int sanitize) { \
    resize_impl<C, R>(src, dst, outer, n, h, inner, nyq, sanitize);                          \
}                                                                                            \
extern "C" __global__ void __launch_bounds__(256) lf_fft_hermitian_##S(C* w,                 \
    long long outer, long long h, long long inner, long long nyq) {                          \
    hermitian_impl<C, R>(w, outer, h, inner, nyq);                                           \
}                                                                                            \
extern "C" __global__ void __launch_bounds__(256) lf_fft_to_complex_##S(const R* src, C* dst, \
    long long n) {                                                                           \
    to_complex_impl<C, R>(src, dst, n);                                                      \
}                                                                                            \
extern "C" __global__ void __launch_bounds__(256) lf_fft_real_part_##S(const C* src, R* dst, \
    long long n) {                                                                           \
    real_part_impl<C, R>(src, dst, n);                                                       \
}

LF_FFT_HELPERS(f32, lf_c32, float)
LF_FFT_HELPERS(f64, lf_c64, double)
"#;

/// Entry names of [`HELPER_SOURCE`].
pub(super) const HELPER_ENTRIES: [&str; 8] = [
    "lf_fft_resize_f32",
    "lf_fft_hermitian_f32",
    "lf_fft_to_complex_f32",
    "lf_fft_real_part_f32",
    "lf_fft_resize_f64",
    "lf_fft_hermitian_f64",
    "lf_fft_to_complex_f64",
    "lf_fft_real_part_f64",
];

/// Compiles and loads the helper kernels for `dev`.
pub(super) fn compile_helpers(dev: &CudaDevice) -> Result<HashMap<String, CudaFunction>> {
    if !nvrtc_present() {
        return Err(Error::NoCuda(
            "NVRTC not found (the FFT helper kernels need it)".into(),
        ));
    }
    let (major, minor) = dev.compute_capability();
    let target = Target::for_device(major, minor);
    let r = Rendered {
        source: HELPER_SOURCE.into(),
        entry: "lf_fft_helpers".into(),
        block: HELPER_BLOCK,
        per_thread: 1,
    };
    let img = compile_for(&target, &r, &None)?;
    let module = dev
        .ctx
        .load_module(Ptx::from_binary(img.bytes))
        .map_err(driver_err("cuModuleLoadData"))?;
    HELPER_ENTRIES
        .iter()
        .map(|&name| {
            module
                .load_function(name)
                .map(|f| (name.to_string(), f))
                .map_err(driver_err("cuModuleGetFunction"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The helper kernels compile with NVRTC for the H200's sm_90 and define every entry
    /// (skipped when libnvrtc cannot be loaded).
    #[test]
    fn helper_kernels_compile() {
        if !nvrtc_present() {
            return;
        }
        let r = Rendered {
            source: HELPER_SOURCE.into(),
            entry: "lf_fft_helpers".into(),
            block: HELPER_BLOCK,
            per_thread: 1,
        };
        let img = compile_for(&Target::for_device(9, 0), &r, &None).unwrap();
        for name in HELPER_ENTRIES {
            assert!(
                img.bytes.windows(name.len()).any(|w| w == name.as_bytes()),
                "{name} missing from the image"
            );
        }
    }
}
