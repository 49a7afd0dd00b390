//! CUDA C of the scatter-add kernel: the sum of `values` into a zeroed `[pre, n, post]`
//! output at the positions `indices` name along its middle axis (the cotangent of a gather
//! with many indices). One thread per value, grid-stride; each adds its value with
//! `atomicAdd` (complex values: one per part), so repeated indices accumulate and the order
//! of the additions, hence the last bits of a float sum, may differ from run to run.
//!
//! # The kernel
//! `extern "C" __global__ void lf_scatter_<dtype>(const lf_scatter_args a)`, blocks of
//! [`BLOCK`] threads. Value `t` (flat over `[pre, k, post]`) has `q = t % post` and
//! `p = t / (k * post)`; its index `j = indices[t]` (plus `n` when negative) names output
//! element `(p * n + j) * post + q`. Indices outside `[0, n)` add nothing (the gather that
//! read them reports them).
//!
//! # Arguments (`lf_scatter_args`, by value, 7 fields of 8 bytes: [`ARG_BYTES`])
//! `values`, `indices` (I64), `out`, then `total` (`pre * k * post`), `k`, `post`, `n`.
//! Written by [`pack_args`].
//!
//! The output is zeroed first by a second kernel, [`render_zero`] (`lf_zero_words`, its
//! arguments `lf_zero_args { out, words }`: 4-byte words, grid-stride), so that both are kernel nodes a recorded CUDA
//! graph can point at each call's output.

use super::{Rendered, BLOCK};
use crate::DType;

/// Bytes of the argument struct.
pub const ARG_BYTES: usize = 56;

/// The dtypes the kernel adds: F32, F64, C64 and C128 (narrower floats are summed in F32
/// by the caller).
pub fn supports(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64 | DType::C64 | DType::C128)
}

/// The argument struct of one launch: the pointers, then `[total, k, post, n]`.
pub fn pack_args(ptrs: [u64; 3], sizes: [u64; 4]) -> Vec<u8> {
    ptrs.iter()
        .chain(&sizes)
        .flat_map(|f| f.to_le_bytes())
        .collect()
}

/// Renders the kernel for values of `dtype` (one of [`supports`]'s; `None` otherwise).
pub fn render(dtype: DType) -> Option<Rendered> {
    let (t, real, parts) = match dtype {
        DType::F32 => ("float", "float", 1),
        DType::F64 => ("double", "double", 1),
        DType::C64 => ("lf_c", "float", 2),
        DType::C128 => ("lf_c", "double", 2),
        _ => return None,
    };
    let entry = format!("lf_scatter_{}", dtype.name());
    let complex = if parts == 2 {
        format!(
            "struct __align__({}) lf_c {{ {real} re, im; }};\n",
            dtype.size()
        )
    } else {
        String::new()
    };
    let add = if parts == 2 {
        format!(
            "    {real}* o = reinterpret_cast<{real}*>(a.out + at);\n    const lf_c v = a.values[t];\n    \
             atomicAdd(o, v.re);\n    atomicAdd(o + 1, v.im);\n"
        )
    } else {
        "    atomicAdd(a.out + at, a.values[t]);\n".to_string()
    };
    let source = format!(
        "// generated scatter-add of {dtype} values\n{complex}\
         struct lf_scatter_args {{\n  const {t}* __restrict__ values;\n  \
         const long long* __restrict__ indices;\n  {t}* out;\n  \
         long long total, k, post, n;\n}};\n\
         extern \"C\" __global__ void __launch_bounds__({BLOCK}) {entry}(const lf_scatter_args a) {{\n  \
         const long long step = (long long)gridDim.x * blockDim.x;\n  \
         for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < a.total; t += step) {{\n    \
         long long j = a.indices[t];\n    if (j < 0) j += a.n;\n    if (j < 0 || j >= a.n) continue;\n    \
         const long long q = t % a.post, p = t / a.post / a.k;\n    \
         const long long at = (p * a.n + j) * a.post + q;\n{add}  }}\n}}\n"
    );
    Some(Rendered {
        source,
        entry,
        block: BLOCK,
        per_thread: 1,
    })
}

/// Bytes of the zeroing kernel's argument struct: the pointer and the word count.
pub const ZERO_ARG_BYTES: usize = 16;

/// The zeroing kernel's argument struct.
pub fn pack_zero_args(ptr: u64, words: u64) -> Vec<u8> {
    [ptr, words].iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// Renders `lf_zero_words`: `out[w] = 0` for every 4-byte word `w < words`.
pub fn render_zero() -> Rendered {
    let entry = "lf_zero_words".to_string();
    let source = [
        "// generated: zeroes a buffer of 4-byte words".to_string(),
        "struct lf_zero_args { unsigned int* out; long long words; };".to_string(),
        format!(
            "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {entry}(const lf_zero_args a) {{"
        ),
        "  const long long step = (long long)gridDim.x * blockDim.x;".to_string(),
        "  for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < a.words; w += step) a.out[w] = 0u;".to_string(),
        "}".to_string(),
        String::new(),
    ]
    .join("\n");
    Rendered {
        source,
        entry,
        block: BLOCK,
        per_thread: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_supported_dtype() {
        for d in [DType::F32, DType::F64, DType::C64, DType::C128] {
            let r = render(d).expect("supported");
            assert!(r.source.contains(&r.entry), "{}", r.source);
            assert!(r.source.contains("atomicAdd"), "{}", r.source);
            assert_eq!(
                r.source.matches("atomicAdd").count(),
                if d.is_complex() { 2 } else { 1 }
            );
        }
        assert!(render(DType::F16).is_none());
        assert!(render(DType::I64).is_none());
        assert_eq!(pack_args([1, 2, 3], [4, 5, 6, 7]).len(), ARG_BYTES);
        assert_eq!(pack_zero_args(1, 2).len(), ZERO_ARG_BYTES);
        assert!(render_zero().source.contains("lf_zero_words("));
    }
}
