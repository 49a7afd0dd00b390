//! cuFFT on a device's stream: C2C, R2C and C2R transforms in single and double precision
//! over any axes of a C-order array, unnormalized, with the semantics of the CPU path
//! (`runtime::cpu::fft`, i.e. NumPy's).
//!
//! # How a transform is laid out
//! Dimensions of length 1 are dropped first (they do not change a C-order layout). The
//! transformed axes are then grouped into runs of consecutive axes, each cut into blocks of
//! at most 3 (cuFFT's largest rank). A block of axes `a..a+r` of a `[outer, dims.., inner]`
//! view is one `cufftMakePlanMany64` plan with an advanced layout:
//! - `inner == 1` (trailing axes, e.g. `fft2` on `[..., H, W]`): stride 1, distance
//!   `prod(dims)`, batch `outer`, one execution;
//! - `outer <= inner`: stride `inner`, distance 1, batch `inner`, executed `outer` times
//!   with the pointers advanced by one `[dims.., inner]` block;
//! - otherwise: stride `inner`, distance `prod(dims) * inner`, batch `outer`, executed
//!   `inner` times with the pointers advanced by one element.
//!
//! C2C: the first block reads the input and writes the output (out of place: cuFFT keeps
//! the input of out-of-place C2C and R2C transforms), later blocks run in place on the
//! output. R2C: one R2C block ending at the real axis (the last of `spec.axes`), covering
//! the transformed axes right before it, then C2C blocks on the output for the rest. C2R:
//! a helper kernel copies the input into a work buffer, truncated or zero-padded to
//! `m/2 + 1` entries along the real axis (C2R transforms overwrite their input, and the
//! input belongs to a graph node); inverse C2C blocks run in place on it along the other
//! axes; the imaginary parts of the zero and Nyquist frequencies are cleared (what NumPy's
//! `irfft` reads of them: cuFFT's result for such non-Hermitian input differs); and a 1-D
//! C2R along the real axis writes the output. A real axis of length 1 uses helper kernels
//! instead of cuFFT.
//!
//! # Plans, work areas, ordering
//! Plans live in a per-device cache of at most [`PLAN_CACHE_CAP`] entries keyed by type,
//! sizes, layout and batch, least recently used evicted first; a CUDA graph recorded with a
//! plan's executions keeps that plan alive until the graph is dropped (its nodes use the
//! plan's device tables), so eviction only drops the cache's reference. cuFFT plans are not
//! thread-safe, so one mutex per device guards the cache and is held through every
//! execution. Plans are bound to the device's stream (`cufftSetStream`) and made without
//! automatic work areas: each execution takes one from the device's stream-ordered pool,
//! freed (stream-ordered) right after, so cached plans hold no work memory. Every call
//! (helper kernels, copies, cuFFT kernels, frees) is queued on the device's one stream, so
//! the transform is ordered after the kernels that wrote its input and before those that
//! read its output; nothing here synchronizes except a plan eviction.

use super::compile::{compile_for, lock, nvrtc_present, Target};
use super::device::{grid_size, CudaDevice};
use super::driver_err;
use super::memory::CudaBuffer;
use crate::graph::{FftKind, FftSpec};
use crate::{Error, Result};
use cudarc::cufft::{result as cufft, sys as cufft_sys};
use cudarc::driver::{result as drv, CudaFunction, DevicePtr};
use cudarc::nvrtc::Ptx;
use lazyfuse_codegen::cuda::Rendered;
use lazyfuse_codegen::DType;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

/// Most plans kept per device.
const PLAN_CACHE_CAP: usize = 64;
/// cuFFT's forward (negative exponent) direction.
const FORWARD: c_int = -1;
/// cuFFT's inverse (positive exponent) direction.
const INVERSE: c_int = 1;
/// Threads per block of the helper kernels.
const HELPER_BLOCK: u32 = 256;

type Dims = SmallVec<[usize; 6]>;

/// Single (complex64) or double (complex128) precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Precision {
    Single,
    Double,
}

impl Precision {
    fn real_size(self) -> usize {
        match self {
            Precision::Single => 4,
            Precision::Double => 8,
        }
    }
    fn complex_size(self) -> usize {
        2 * self.real_size()
    }
    fn real_dtype(self) -> DType {
        match self {
            Precision::Single => DType::F32,
            Precision::Double => DType::F64,
        }
    }
    fn complex_dtype(self) -> DType {
        match self {
            Precision::Single => DType::C64,
            Precision::Double => DType::C128,
        }
    }
    fn c2c(self) -> cufft_sys::cufftType {
        match self {
            Precision::Single => cufft_sys::cufftType::CUFFT_C2C,
            Precision::Double => cufft_sys::cufftType::CUFFT_Z2Z,
        }
    }
    fn r2c(self) -> cufft_sys::cufftType {
        match self {
            Precision::Single => cufft_sys::cufftType::CUFFT_R2C,
            Precision::Double => cufft_sys::cufftType::CUFFT_D2Z,
        }
    }
    fn c2r(self) -> cufft_sys::cufftType {
        match self {
            Precision::Single => cufft_sys::cufftType::CUFFT_C2R,
            Precision::Double => cufft_sys::cufftType::CUFFT_Z2D,
        }
    }
    /// The helper kernel `base` for this precision.
    fn helper(self, base: &str) -> String {
        match self {
            Precision::Single => format!("{base}_f32"),
            Precision::Double => format!("{base}_f64"),
        }
    }
}

/// Whether a cuFFT type reads real input / writes real output.
fn real_in(ty: cufft_sys::cufftType) -> bool {
    use cufft_sys::cufftType::*;
    matches!(ty, CUFFT_R2C | CUFFT_D2Z)
}
fn real_out(ty: cufft_sys::cufftType) -> bool {
    use cufft_sys::cufftType::*;
    matches!(ty, CUFFT_C2R | CUFFT_Z2D)
}

/// Wraps a cuFFT error into the crate's error, naming the call.
fn cufft_err(op: &'static str) -> impl Fn(cufft::CufftError) -> Error {
    move |e| Error::Cuda {
        op,
        msg: format!("{:?}", e.0),
    }
}

/// Whether libcufft can be loaded (checked once; never panics).
fn cufft_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the library candidates.
        catch_unwind(|| unsafe { cufft_sys::is_culib_present() }).unwrap_or(false)
    })
}

// ---------------------------------------------------------------------------------------
// Plans and the per-device state
// ---------------------------------------------------------------------------------------

/// What one cuFFT plan computes: type, sizes, advanced layout (in elements of its input and
/// output types) and batch; the cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlanKey {
    ty: cufft_sys::cufftType,
    n: SmallVec<[i64; 3]>,
    inembed: SmallVec<[i64; 3]>,
    istride: i64,
    idist: i64,
    onembed: SmallVec<[i64; 3]>,
    ostride: i64,
    odist: i64,
    batch: i64,
}

/// An owned cuFFT handle, destroyed on drop (errors ignored: nothing can handle them there).
struct Plan {
    handle: cufft_sys::cufftHandle,
    /// Bytes of work area an execution needs.
    work_size: usize,
    /// Value of the cache clock at the last use.
    last_used: std::sync::atomic::AtomicU64,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: the handle came from `cufftCreate` and is destroyed only here, once; no
        // execution with it is pending: evictions synchronize the stream first, cached
        // plans are never dropped otherwise, and a plan pinned by a recorded graph is
        // dropped with that graph, after the device is synchronized.
        let _ = unsafe { cufft::destroy(self.handle) };
    }
}

/// A cuFFT plan a recorded CUDA graph executes: kept alive by the graph (its nodes use the
/// plan's device tables) after the plan cache may have evicted it.
pub(crate) struct PinnedPlan(#[allow(dead_code)] Arc<Plan>);

thread_local! {
    /// While this thread records a CUDA graph: the plans its FFTs executed.
    static PINS: std::cell::RefCell<Option<Vec<PinnedPlan>>> =
        const { std::cell::RefCell::new(None) };
}

/// Starts collecting the plans this thread's FFTs execute (a graph capture begins).
pub(crate) fn begin_pins() {
    PINS.with(|p| *p.borrow_mut() = Some(Vec::new()));
}

/// The plans collected since [`begin_pins`] (the capture ended); collection stops.
pub(crate) fn take_pins() -> Vec<PinnedPlan> {
    PINS.with(|p| p.borrow_mut().take()).unwrap_or_default()
}

/// The FFT state of one device: its plans and (once needed) its helper kernels.
#[derive(Default)]
struct FftState {
    plans: HashMap<PlanKey, Arc<Plan>>,
    clock: u64,
    helpers: HashMap<String, CudaFunction>,
}

/// The FFT state of device `ordinal` (created on first use, kept for the process like the
/// device itself).
fn state_of(ordinal: usize) -> Arc<Mutex<FftState>> {
    static STATES: Mutex<Vec<(usize, Arc<Mutex<FftState>>)>> = Mutex::new(Vec::new());
    let mut states = lock(&STATES);
    if let Some((_, s)) = states.iter().find(|(o, _)| *o == ordinal) {
        return s.clone();
    }
    let s = Arc::new(Mutex::new(FftState::default()));
    states.push((ordinal, s.clone()));
    s
}

/// Source of the helper kernels (self-contained: no headers). Grid-stride loops over
/// 64-bit indices; one `extern "C"` entry per kernel and precision.
const HELPER_SOURCE: &str = r#"
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
const HELPER_ENTRIES: [&str; 8] = [
    "lf_fft_resize_f32",
    "lf_fft_hermitian_f32",
    "lf_fft_to_complex_f32",
    "lf_fft_real_part_f32",
    "lf_fft_resize_f64",
    "lf_fft_hermitian_f64",
    "lf_fft_to_complex_f64",
    "lf_fft_real_part_f64",
];

/// One helper-kernel argument, passed to `cuLaunchKernel` by address.
enum Arg {
    Ptr(u64),
    I64(i64),
    I32(i32),
}

// ---------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------

/// Drops the dimensions where both `a` and `b` are 1, remapping `axes` (in order; axes of
/// dropped dimensions are dropped too).
fn squeeze(a: &[usize], b: &[usize], axes: &[usize]) -> (Dims, Dims, Dims) {
    let keep: SmallVec<[bool; 8]> = a.iter().zip(b).map(|(&x, &y)| x != 1 || y != 1).collect();
    let mut new_index: SmallVec<[usize; 8]> = SmallVec::new();
    let mut k = 0;
    for &kept in &keep {
        new_index.push(k);
        k += kept as usize;
    }
    let pick = |s: &[usize]| -> Dims {
        s.iter()
            .zip(&keep)
            .filter(|(_, &kept)| kept)
            .map(|(&d, _)| d)
            .collect()
    };
    let new_axes = axes
        .iter()
        .filter(|&&ax| keep[ax])
        .map(|&ax| new_index[ax])
        .collect();
    (pick(a), pick(b), new_axes)
}

/// The blocks `(first axis, rank)` a C2C over `axes` of `shape` runs: runs of consecutive
/// axes of length above 1, each cut into blocks of at most 3 axes from its inner end.
fn c2c_blocks(shape: &[usize], axes: &[usize]) -> SmallVec<[(usize, usize); 4]> {
    let mut ax: Dims = axes.iter().copied().filter(|&a| shape[a] > 1).collect();
    ax.sort_unstable();
    ax.dedup();
    let mut blocks = SmallVec::new();
    let mut i = 0;
    while i < ax.len() {
        let mut j = i + 1;
        while j < ax.len() && ax[j] == ax[j - 1] + 1 {
            j += 1;
        }
        // run ax[i..j]: blocks of 3 from its end
        let mut end = j;
        while end > i {
            let start = end.saturating_sub(3).max(i);
            blocks.push((ax[start], end - start));
            end = start;
        }
        i = j;
    }
    blocks
}

// ---------------------------------------------------------------------------------------
// Programs: what a transform queues, as data
// ---------------------------------------------------------------------------------------

/// A buffer a step reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Buf {
    /// The transform's input (never written).
    Input,
    /// The transform's output.
    Output,
    /// The complex work buffer of a C2R ([`Program::work_len`] elements).
    Work,
}

/// One operation of a transform. Offsets, steps and lengths count elements of the type the
/// buffer holds there.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// `loops` executions of the plan `key`, execution `l` reading `src` from element
    /// `l * istep` and writing `dst` from element `l * ostep` (`src == dst`: in place).
    Fft {
        key: PlanKey,
        src: Buf,
        dst: Buf,
        loops: usize,
        istep: usize,
        ostep: usize,
        dir: c_int,
    },
    /// Copies `len` complex elements.
    Copy { src: Buf, dst: Buf, len: usize },
    /// `dst[o, k, i] = k < n ? src[o, k, i] : 0` for `k < h` (complex `[outer, n, inner]`
    /// to `[outer, h, inner]`); with `sanitize`, the imaginary parts at `k == 0` and
    /// `k == nyq` are cleared.
    Resize {
        src: Buf,
        dst: Buf,
        outer: usize,
        n: usize,
        h: usize,
        inner: usize,
        nyq: i64,
        sanitize: bool,
    },
    /// Clears the imaginary parts of `buf[o, 0, i]` and (`nyq >= 0`) `buf[o, nyq, i]`.
    Hermitian {
        buf: Buf,
        outer: usize,
        h: usize,
        inner: usize,
        nyq: i64,
    },
    /// `len` real elements to complex ones with zero imaginary parts.
    ToComplex { src: Buf, dst: Buf, len: usize },
    /// The real parts of `len` complex elements.
    RealPart { src: Buf, dst: Buf, len: usize },
}

/// Everything one transform queues, in order.
#[derive(Clone, Debug, Default, PartialEq)]
struct Program {
    steps: Vec<Step>,
    /// Complex elements of the work buffer (0: none).
    work_len: usize,
}

/// The program of the (checked) transform `spec` from `in_shape` to `out_shape`.
fn program(spec: &FftSpec, prec: Precision, in_shape: &[usize], out_shape: &[usize]) -> Program {
    let mut b = Builder {
        prec,
        prog: Program::default(),
    };
    match spec.kind {
        FftKind::C2C => {
            let dir = if spec.inverse { INVERSE } else { FORWARD };
            b.c2c(in_shape, &spec.axes, Buf::Input, Buf::Output, dir);
        }
        FftKind::R2C => b.r2c(in_shape, out_shape, &spec.axes),
        FftKind::C2R if spec.hermitian => b.c2r_hermitian(in_shape, out_shape, &spec.axes),
        FftKind::C2R => b.c2r(in_shape, out_shape, &spec.axes),
    }
    b.prog
}

/// Builds a [`Program`].
struct Builder {
    prec: Precision,
    prog: Program,
}

impl Builder {
    fn push(&mut self, step: Step) {
        self.prog.steps.push(step);
    }

    /// C2C over `axes` of `shape` from `src` to `dst` (equal: in place).
    fn c2c(&mut self, shape: &[usize], axes: &[usize], src: Buf, dst: Buf, dir: c_int) {
        let (shape, _, axes) = squeeze(shape, shape, axes);
        let blocks = c2c_blocks(&shape, &axes);
        if blocks.is_empty() {
            // only axes of length 1: the identity
            if src != dst {
                let len = shape.iter().product();
                self.push(Step::Copy { src, dst, len });
            }
            return;
        }
        let mut from = src;
        for &(axis, rank) in &blocks {
            self.block(self.prec.c2c(), &shape, &shape, axis, rank, from, dst, dir);
            from = dst;
        }
    }

    /// R2C over `axes` (the last one real) from the real input (`in_shape`) to the complex
    /// output (`out_shape`).
    fn r2c(&mut self, in_shape: &[usize], out_shape: &[usize], axes: &[usize]) {
        let (&ra, rest) = axes.split_last().expect("checked non-empty");
        if in_shape[ra] == 1 {
            // a length-1 real transform is the identity: widen to complex, then the rest
            let len = in_shape.iter().product();
            self.push(Step::ToComplex {
                src: Buf::Input,
                dst: Buf::Output,
                len,
            });
            return self.c2c(out_shape, rest, Buf::Output, Buf::Output, FORWARD);
        }
        let (is, os, ax) = squeeze(in_shape, out_shape, axes);
        let (&ra, rest) = ax.split_last().expect("the real axis is longer than 1");
        // the R2C block: the transformed axes right before the real axis, up to rank 3
        let mut first = ra;
        while first > 0 && ra - first < 2 && rest.contains(&(first - 1)) {
            first -= 1;
        }
        let (src, dst) = (Buf::Input, Buf::Output);
        self.block(
            self.prec.r2c(),
            &is,
            &os,
            first,
            ra - first + 1,
            src,
            dst,
            FORWARD,
        );
        let others: Dims = rest
            .iter()
            .copied()
            .filter(|&a| a < first || a > ra)
            .collect();
        self.c2c(&os, &others, Buf::Output, Buf::Output, FORWARD);
    }

    /// C2R of an exactly Hermitian half spectrum (`in_shape[last] = m / 2 + 1`): a copy
    /// (cuFFT's C2R overwrites its input), complex inverses along transformed axes outside
    /// the block, then one multi-dimensional C2R over the transformed axes right before and
    /// at the real axis (up to rank 3), as the R2C block.
    fn c2r_hermitian(&mut self, in_shape: &[usize], out_shape: &[usize], axes: &[usize]) {
        let (&ra, _) = axes.split_last().expect("checked non-empty");
        let m = out_shape[ra];
        if m < 2 || in_shape[ra] != m / 2 + 1 {
            return self.c2r(in_shape, out_shape, axes);
        }
        let outer: usize = in_shape[..ra].iter().product();
        let inner: usize = in_shape[ra + 1..].iter().product();
        self.prog.work_len = in_shape.iter().product();
        self.push(Step::Resize {
            src: Buf::Input,
            dst: Buf::Work,
            outer,
            n: in_shape[ra],
            h: in_shape[ra],
            inner,
            nyq: -1,
            sanitize: false,
        });
        let (is, os, ax) = squeeze(in_shape, out_shape, axes);
        let (&ra, rest) = ax.split_last().expect("the real axis is longer than 1");
        let mut first = ra;
        while first > 0 && ra - first < 2 && rest.contains(&(first - 1)) {
            first -= 1;
        }
        let others: Dims = rest
            .iter()
            .copied()
            .filter(|&a| a < first || a > ra)
            .collect();
        self.c2c(&is, &others, Buf::Work, Buf::Work, INVERSE);
        let c2r = self.prec.c2r();
        self.block(
            c2r,
            &is,
            &os,
            first,
            ra - first + 1,
            Buf::Work,
            Buf::Output,
            INVERSE,
        );
    }

    /// C2R over `axes` (the last one real) from the complex input (`in_shape`, a half
    /// spectrum of any length along the real axis) to the real output (`out_shape`).
    fn c2r(&mut self, in_shape: &[usize], out_shape: &[usize], axes: &[usize]) {
        let (&ra, rest) = axes.split_last().expect("checked non-empty");
        let m = out_shape[ra];
        let h = m / 2 + 1;
        let mut wshape: Dims = in_shape.iter().copied().collect();
        wshape[ra] = h;
        let outer: usize = in_shape[..ra].iter().product();
        let inner: usize = in_shape[ra + 1..].iter().product();
        let nyq: i64 = if m.is_multiple_of(2) {
            (m / 2) as i64
        } else {
            -1
        };
        // The work buffer: C2R overwrites its input, which belongs to a graph node.
        self.prog.work_len = wshape.iter().product();
        let mixed = rest.iter().any(|&a| in_shape[a] > 1);
        self.push(Step::Resize {
            src: Buf::Input,
            dst: Buf::Work,
            outer,
            n: in_shape[ra],
            h,
            inner,
            nyq,
            sanitize: !mixed,
        });
        if mixed {
            self.c2c(&wshape, rest, Buf::Work, Buf::Work, INVERSE);
            self.push(Step::Hermitian {
                buf: Buf::Work,
                outer,
                h,
                inner,
                nyq,
            });
        }
        if m == 1 {
            // a length-1 real inverse is the real part of the (sanitized) spectrum
            let len = out_shape.iter().product();
            self.push(Step::RealPart {
                src: Buf::Work,
                dst: Buf::Output,
                len,
            });
        } else {
            let (ws, os, ax) = squeeze(&wshape, out_shape, &[ra]);
            let c2r = self.prec.c2r();
            self.block(c2r, &ws, &os, ax[0], 1, Buf::Work, Buf::Output, INVERSE);
        }
    }

    /// A cuFFT plan of type `ty` over axes `axis..axis + rank` of arrays shaped `ishape`
    /// (input) and `oshape` (output; equal except along the real axis of R2C/C2R).
    #[allow(clippy::too_many_arguments)]
    fn block(
        &mut self,
        ty: cufft_sys::cufftType,
        ishape: &[usize],
        oshape: &[usize],
        axis: usize,
        rank: usize,
        src: Buf,
        dst: Buf,
        dir: c_int,
    ) {
        let outer: usize = ishape[..axis].iter().product();
        let inner: usize = ishape[axis + rank..].iter().product();
        let idims = &ishape[axis..axis + rank];
        let odims = &oshape[axis..axis + rank];
        let ielems: usize = idims.iter().product();
        let oelems: usize = odims.iter().product();
        let logical = if real_out(ty) { odims } else { idims };
        // (istride, idist, ostride, odist, batch, executions, input step, output step)
        let (istride, idist, ostride, odist, batch, loops, istep, ostep) = if inner == 1 {
            (1, ielems, 1, oelems, outer, 1, 0, 0)
        } else if outer <= inner {
            (
                inner,
                1,
                inner,
                1,
                inner,
                outer,
                ielems * inner,
                oelems * inner,
            )
        } else {
            (
                inner,
                ielems * inner,
                inner,
                oelems * inner,
                outer,
                inner,
                1,
                1,
            )
        };
        let to_i64 = |v: &[usize]| v.iter().map(|&d| d as i64).collect();
        let key = PlanKey {
            ty,
            n: to_i64(logical),
            inembed: to_i64(idims),
            istride: istride as i64,
            idist: idist as i64,
            onembed: to_i64(odims),
            ostride: ostride as i64,
            odist: odist as i64,
            batch: batch as i64,
        };
        self.push(Step::Fft {
            key,
            src,
            dst,
            loops,
            istep,
            ostep,
            dir,
        });
    }
}

// ---------------------------------------------------------------------------------------
// Running a program on the device
// ---------------------------------------------------------------------------------------

impl CudaDevice {
    /// The unnormalized FFT `spec` of `input` (C order, shape `in_shape`) as a new buffer of
    /// shape `out_shape`: C2C keeps the shape, R2C halves the last axis of `spec.axes` to
    /// `n/2 + 1`, C2R reads the half spectrum along that axis (truncated or zero-padded to
    /// `m/2 + 1` entries, `m = out_shape[axis]`). Asynchronous: returns once the work is
    /// queued on the device's stream. `Error::NoCuda` when libcufft cannot be loaded.
    pub(crate) fn fft(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        in_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<CudaBuffer> {
        if input.device().ordinal() != self.ordinal() {
            return Err(Error::DeviceMismatch {
                op: "fft",
                a: format!("cuda:{}", self.ordinal()),
                b: format!("cuda:{}", input.device().ordinal()),
            });
        }
        let prec = check(spec, input.dtype(), input.len(), in_shape, out_shape)?;
        let me = self.arc()?;
        let out_dtype = match spec.kind {
            FftKind::C2R => prec.real_dtype(),
            _ => prec.complex_dtype(),
        };
        let out_len: usize = out_shape.iter().product();
        let out = self.alloc(&me, out_dtype, out_len)?;
        self.fft_into(spec, input, &out, in_shape, out_shape)?;
        Ok(out)
    }

    /// [`CudaDevice::fft`] into the existing buffer `out` (of `out_shape`'s length and the
    /// result's dtype), queued on the current work stream (the device's stream, or the
    /// capture stream while a CUDA graph is being recorded on this thread).
    pub(crate) fn fft_into(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        out: &CudaBuffer,
        in_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<()> {
        let prec = check(spec, input.dtype(), input.len(), in_shape, out_shape)?;
        let me = self.arc()?;
        let out_dtype = match spec.kind {
            FftKind::C2R => prec.real_dtype(),
            _ => prec.complex_dtype(),
        };
        let out_len: usize = out_shape.iter().product();
        if out.dtype() != out_dtype
            || out.len() != out_len
            || out.device().ordinal() != self.ordinal()
        {
            return Err(Error::internal(
                "cuda fft",
                format!("output buffer {out:?} for {out_len} x {out_dtype}"),
            ));
        }
        if out_len == 0 {
            return Ok(());
        }
        if !cufft_present() {
            return Err(Error::NoCuda("cuFFT library not found".into()));
        }
        let prog = program(spec, prec, in_shape, out_shape);
        let work = match prog.work_len {
            0 => None,
            n => Some(self.alloc(&me, prec.complex_dtype(), n)?),
        };
        let ptrs = Ptrs {
            input: input.device_ptr(),
            output: out.device_ptr(),
            work: work.as_ref().map_or(0, |w| w.device_ptr()),
        };
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxSetCurrent"))?;
        let state = state_of(self.ordinal());
        let mut st = lock(&state);
        let mut run = Runner {
            dev: self,
            st: &mut st,
            prec,
        };
        // cudarc panics when a symbol is missing from the loaded library: report it instead.
        catch_unwind(AssertUnwindSafe(|| {
            prog.steps.iter().try_for_each(|s| run.step(s, &ptrs))
        }))
        .unwrap_or_else(|_| {
            Err(Error::Cuda {
                op: "cufft",
                msg: "the cuFFT bindings panicked (a missing library symbol?)".into(),
            })
        })?;
        drop(work); // freed on the stream, after the steps that use it
        Ok(())
    }
}

/// Checks the spec against the input's dtype and length and the shapes; the precision of
/// the transform.
fn check(
    spec: &FftSpec,
    dtype: DType,
    len: usize,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<Precision> {
    let bad = |msg: String| Err(Error::internal("cuda fft", msg));
    let nd = in_shape.len();
    let Some(&last) = spec.axes.last() else {
        return bad("no axes".into());
    };
    if out_shape.len() != nd
        || spec.axes.iter().any(|&a| a >= nd)
        || (1..spec.axes.len()).any(|i| spec.axes[..i].contains(&spec.axes[i]))
    {
        return bad(format!(
            "axes {:?} for shapes {in_shape:?} -> {out_shape:?}",
            spec.axes
        ));
    }
    if len != in_shape.iter().product::<usize>() {
        return bad(format!("buffer of {len} elements for shape {in_shape:?}"));
    }
    let same_but =
        |ax: Option<usize>| (0..nd).all(|d| Some(d) == ax || in_shape[d] == out_shape[d]);
    let shapes_ok = match spec.kind {
        FftKind::C2C => same_but(None),
        FftKind::R2C => same_but(Some(last)) && out_shape[last] == in_shape[last] / 2 + 1,
        FftKind::C2R => same_but(Some(last)) && (in_shape[last] > 0 || out_shape.contains(&0)),
    };
    if !shapes_ok {
        return bad(format!(
            "{:?} from {in_shape:?} to {out_shape:?} along {:?}",
            spec.kind, spec.axes
        ));
    }
    match (spec.kind, dtype) {
        (FftKind::C2C | FftKind::C2R, DType::C64) | (FftKind::R2C, DType::F32) => {
            Ok(Precision::Single)
        }
        (FftKind::C2C | FftKind::C2R, DType::C128) | (FftKind::R2C, DType::F64) => {
            Ok(Precision::Double)
        }
        (k, d) => bad(format!("{k:?} of a {d} buffer")),
    }
}

/// Device addresses of a program's buffers.
struct Ptrs {
    input: u64,
    output: u64,
    work: u64,
}

impl Ptrs {
    fn of(&self, b: Buf) -> u64 {
        match b {
            Buf::Input => self.input,
            Buf::Output => self.output,
            Buf::Work => self.work,
        }
    }
}

/// Runs program steps: the device, its locked FFT state, the precision.
struct Runner<'a> {
    dev: &'a CudaDevice,
    st: &'a mut FftState,
    prec: Precision,
}

impl Runner<'_> {
    /// Queues one step.
    fn step(&mut self, step: &Step, p: &Ptrs) -> Result<()> {
        let i64_ = |v: usize| Arg::I64(v as i64);
        match *step {
            Step::Fft {
                ref key,
                src,
                dst,
                loops,
                istep,
                ostep,
                dir,
            } => self.exec(key, p.of(src), p.of(dst), loops, istep, ostep, dir),
            Step::Copy { src, dst, len } => {
                self.copy(p.of(dst), p.of(src), len * self.prec.complex_size())
            }
            Step::Resize {
                src,
                dst,
                outer,
                n,
                h,
                inner,
                nyq,
                sanitize,
            } => self.launch(
                "lf_fft_resize",
                outer * h * inner,
                &[
                    Arg::Ptr(p.of(src)),
                    Arg::Ptr(p.of(dst)),
                    i64_(outer),
                    i64_(n),
                    i64_(h),
                    i64_(inner),
                    Arg::I64(nyq),
                    Arg::I32(sanitize as i32),
                ],
            ),
            Step::Hermitian {
                buf,
                outer,
                h,
                inner,
                nyq,
            } => self.launch(
                "lf_fft_hermitian",
                outer * inner,
                &[
                    Arg::Ptr(p.of(buf)),
                    i64_(outer),
                    i64_(h),
                    i64_(inner),
                    Arg::I64(nyq),
                ],
            ),
            Step::ToComplex { src, dst, len } => self.launch(
                "lf_fft_to_complex",
                len,
                &[Arg::Ptr(p.of(src)), Arg::Ptr(p.of(dst)), i64_(len)],
            ),
            Step::RealPart { src, dst, len } => self.launch(
                "lf_fft_real_part",
                len,
                &[Arg::Ptr(p.of(src)), Arg::Ptr(p.of(dst)), i64_(len)],
            ),
        }
    }

    /// Queues `loops` executions of the plan for `key` (see [`Step::Fft`]).
    #[allow(clippy::too_many_arguments)]
    fn exec(
        &mut self,
        key: &PlanKey,
        src: u64,
        dst: u64,
        loops: usize,
        istep: usize,
        ostep: usize,
        dir: c_int,
    ) -> Result<()> {
        let (handle, work_size) = self.plan(key)?;
        let stream = self.dev.work_stream();
        // Plans are shared and the work stream differs while a graph is being captured:
        // bind the plan to it for these executions (the state lock is held throughout).
        // SAFETY: a live plan and a live stream of this device's context.
        unsafe { cufft::set_stream(handle, stream.cu_stream() as cufft_sys::cudaStream_t) }
            .map_err(cufft_err("cufftSetStream"))?;
        // The work area comes from the stream-ordered pool and is freed on the stream
        // after the executions below.
        // SAFETY: uninitialized bytes are fine for a work area (cuFFT writes before reading).
        let work = unsafe { stream.alloc::<u8>(work_size.max(1)) }
            .map_err(driver_err("cuMemAllocAsync"))?;
        let work_ptr = {
            // Event tracking is off (module docs of `cuda`): the guard records nothing.
            let (ptr, _guard) = work.device_ptr(&stream);
            ptr
        };
        // SAFETY: the handle is a live plan of this device; the work area holds at least
        // `work_size` bytes and stays allocated (in stream order) until after every
        // execution queued below.
        unsafe { cufft::set_work_area(handle, work_ptr as *mut c_void) }
            .map_err(cufft_err("cufftSetWorkArea"))?;
        let isize_ = if real_in(key.ty) {
            self.prec.real_size()
        } else {
            self.prec.complex_size()
        };
        let osize = if real_out(key.ty) {
            self.prec.real_size()
        } else {
            self.prec.complex_size()
        };
        for l in 0..loops {
            let i = src + (l * istep * isize_) as u64;
            let o = dst + (l * ostep * osize) as u64;
            // SAFETY: the program's layouts address exactly the elements of one
            // `[outer, dims.., inner]` view of the buffers behind `src` (read) and `dst`
            // (written), which are sized by the transform's shapes; with these offsets every
            // execution stays inside them (checked by the emulator tests). The buffers
            // outlive the queued work (their frees are ordered after it on this stream).
            unsafe { exec(key.ty, handle, i, o, dir) }.map_err(cufft_err("cufftExec"))?;
        }
        drop(work);
        Ok(())
    }

    /// The cached plan for `key` (made on a miss): its handle and work size.
    fn plan(&mut self, key: &PlanKey) -> Result<(cufft_sys::cufftHandle, usize)> {
        let p = self.plan_arc(key)?;
        PINS.with(|pins| {
            if let Some(v) = pins.borrow_mut().as_mut() {
                if !v.iter().any(|q| Arc::ptr_eq(&q.0, &p)) {
                    v.push(PinnedPlan(p.clone()));
                }
            }
        });
        Ok((p.handle, p.work_size))
    }

    /// The cached plan for `key`, made on a miss (the least recently used one evicted when
    /// the cache is full).
    fn plan_arc(&mut self, key: &PlanKey) -> Result<Arc<Plan>> {
        self.st.clock += 1;
        let now = self.st.clock;
        if let Some(p) = self.st.plans.get_mut(key) {
            p.last_used.store(now, std::sync::atomic::Ordering::Relaxed);
            return Ok(p.clone());
        }
        if self.st.plans.len() >= PLAN_CACHE_CAP {
            let oldest = self
                .st
                .plans
                .iter()
                .min_by_key(|(_, p)| p.last_used.load(std::sync::atomic::Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                // queued executions may still use the plan
                self.dev.synchronize()?;
                self.st.plans.remove(&k);
            }
        }
        let handle = cufft::create().map_err(cufft_err("cufftCreate"))?;
        let mut plan = Plan {
            handle,
            work_size: 0,
            last_used: std::sync::atomic::AtomicU64::new(now),
        };
        // SAFETY: a freshly created handle, configured before cufftMakePlan as required.
        unsafe { cufft::set_auto_allocation(handle, false) }
            .map_err(cufft_err("cufftSetAutoAllocation"))?;
        let (mut n, mut inembed, mut onembed) =
            (key.n.clone(), key.inembed.clone(), key.onembed.clone());
        // SAFETY: the three arrays hold `rank` entries each and live across the call.
        plan.work_size = unsafe {
            cufft::make_plan_many64(
                handle,
                n.len() as c_int,
                n.as_mut_ptr(),
                inembed.as_mut_ptr(),
                key.istride,
                key.idist,
                onembed.as_mut_ptr(),
                key.ostride,
                key.odist,
                key.ty,
                key.batch,
            )
        }
        .map_err(cufft_err("cufftMakePlanMany64"))?;
        let stream = self.dev.stream.cu_stream() as cufft_sys::cudaStream_t;
        // SAFETY: a live plan and this device's live stream (same context).
        unsafe { cufft::set_stream(handle, stream) }.map_err(cufft_err("cufftSetStream"))?;
        let plan = Arc::new(plan);
        self.st.plans.insert(key.clone(), plan.clone());
        Ok(plan)
    }

    /// Queues a device-to-device copy of `bytes` bytes.
    fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: both ranges lie inside live buffers of this device (sized by the program);
        // the copy is ordered on the stream like every other use of them.
        unsafe { drv::memcpy_dtod_async(dst, src, bytes, self.dev.work_stream().cu_stream()) }
            .map_err(driver_err("cuMemcpyDtoDAsync"))
    }

    /// Launches the helper kernel `base` (of this precision) over `n` elements with `args`.
    fn launch(&mut self, base: &str, n: usize, args: &[Arg]) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if self.st.helpers.is_empty() {
            self.st.helpers = compile_helpers(self.dev)?;
        }
        let name = self.prec.helper(base);
        let f = self
            .st
            .helpers
            .get(&name)
            .ok_or_else(|| Error::internal("cuda fft", format!("no helper kernel {name}")))?;
        let mut values: SmallVec<[[u8; 8]; 8]> = args
            .iter()
            .map(|a| match *a {
                Arg::Ptr(p) => p.to_ne_bytes(),
                Arg::I64(v) => v.to_ne_bytes(),
                Arg::I32(v) => {
                    let mut b = [0u8; 8];
                    b[..4].copy_from_slice(&v.to_ne_bytes());
                    b
                }
            })
            .collect();
        let mut params: SmallVec<[*mut c_void; 8]> = values
            .iter_mut()
            .map(|v| v.as_mut_ptr() as *mut c_void)
            .collect();
        let grid = grid_size(n, HELPER_BLOCK, 1, self.dev.sm_count());
        // SAFETY: `params` points at one value per kernel parameter, in order, each at
        // least as large as the parameter (8-byte pointers and long longs; an int read from
        // the first 4 bytes, native endianness); the driver copies them at this call. The
        // pointers are live buffers of this context, sized for the elements the kernel's
        // grid-stride loop touches, and freed only after it on the same stream.
        unsafe {
            drv::launch_kernel(
                f.cu_function(),
                (grid, 1, 1),
                (HELPER_BLOCK, 1, 1),
                0,
                self.dev.work_stream().cu_stream(),
                &mut params,
            )
        }
        .map_err(driver_err("cuLaunchKernel"))
    }
}

/// Executes `plan` (of type `ty`) from `src` to `dst`.
///
/// # Safety
/// `plan` is live and of type `ty`; `src` and `dst` address buffers its layout fits.
unsafe fn exec(
    ty: cufft_sys::cufftType,
    plan: cufft_sys::cufftHandle,
    src: u64,
    dst: u64,
    dir: c_int,
) -> std::result::Result<(), cufft::CufftError> {
    use cufft_sys::cufftType::*;
    use cufft_sys::{double2, float2};
    match ty {
        CUFFT_C2C => cufft::exec_c2c(plan, src as *mut float2, dst as *mut float2, dir),
        CUFFT_Z2Z => cufft::exec_z2z(plan, src as *mut double2, dst as *mut double2, dir),
        CUFFT_R2C => cufft::exec_r2c(plan, src as *mut f32, dst as *mut float2),
        CUFFT_D2Z => cufft::exec_d2z(plan, src as *mut f64, dst as *mut double2),
        CUFFT_C2R => cufft::exec_c2r(plan, src as *mut float2, dst as *mut f32),
        CUFFT_Z2D => cufft::exec_z2d(plan, src as *mut double2, dst as *mut f64),
    }
}

/// Compiles and loads the helper kernels for `dev`.
fn compile_helpers(dev: &CudaDevice) -> Result<HashMap<String, CudaFunction>> {
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

    #[test]
    fn squeeze_drops_unit_dims_and_remaps_axes() {
        let (a, b, ax) = squeeze(&[1, 4, 1, 5], &[1, 4, 1, 3], &[2, 3, 1]);
        assert_eq!(a.as_slice(), &[4, 5]);
        assert_eq!(b.as_slice(), &[4, 3]);
        assert_eq!(ax.as_slice(), &[1, 0]);
        let (a, _, ax) = squeeze(&[1], &[1], &[0]);
        assert!(a.is_empty() && ax.is_empty());
    }

    #[test]
    fn blocks_group_consecutive_axes_up_to_rank_3() {
        assert_eq!(c2c_blocks(&[2, 3, 4], &[2, 1]).as_slice(), &[(1, 2)]);
        assert_eq!(
            c2c_blocks(&[2, 3, 4], &[0, 2]).as_slice(),
            &[(0, 1), (2, 1)]
        );
        assert_eq!(
            c2c_blocks(&[2, 3, 4, 5, 6], &[0, 1, 2, 3, 4]).as_slice(),
            &[(2, 3), (0, 2)]
        );
        assert_eq!(c2c_blocks(&[2, 1, 4], &[1]).as_slice(), &[]);
    }

    // -----------------------------------------------------------------------------------
    // An emulator of the programs: cuFFT's advanced-layout semantics and the helper
    // kernels on the host in f64, checking bounds, overlaps and coverage, so that the
    // layouts can be verified without a GPU against the CPU path (rustfft).
    // -----------------------------------------------------------------------------------

    use crate::runtime::cpu;
    use lazyfuse_codegen::HostBuf;
    use num_complex::Complex64 as Z;

    fn naive_dft(x: &[Z], sign: f64) -> Vec<Z> {
        let n = x.len();
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        let a = sign * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                        v * Z::new(a.cos(), a.sin())
                    })
                    .sum()
            })
            .collect()
    }

    /// Applies `f` to every line along `axis` of the dense array `a` (`dims`), giving lines
    /// of length `m`; the new dims.
    fn lines(
        a: &[Z],
        dims: &[usize],
        axis: usize,
        m: usize,
        f: impl Fn(&[Z]) -> Vec<Z>,
    ) -> (Vec<Z>, Vec<usize>) {
        let n = dims[axis];
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        let mut out = vec![Z::new(0.0, 0.0); outer * m * inner];
        for o in 0..outer {
            for i in 0..inner {
                let line: Vec<Z> = (0..n).map(|k| a[(o * n + k) * inner + i]).collect();
                for (k, v) in f(&line).into_iter().enumerate() {
                    out[(o * m + k) * inner + i] = v;
                }
            }
        }
        let mut d = dims.to_vec();
        d[axis] = m;
        (out, d)
    }

    struct Emu {
        bufs: [Vec<Z>; 3],
        written: Vec<bool>,
    }

    fn slot(b: Buf) -> usize {
        match b {
            Buf::Input => 0,
            Buf::Output => 1,
            Buf::Work => 2,
        }
    }

    impl Emu {
        fn read(&self, b: Buf, i: usize) -> Z {
            let v = &self.bufs[slot(b)];
            assert!(i < v.len(), "read {b:?}[{i}] of {}", v.len());
            v[i]
        }
        fn write(&mut self, b: Buf, i: usize, z: Z) {
            assert_ne!(b, Buf::Input, "the input is written");
            let v = &mut self.bufs[slot(b)];
            assert!(i < v.len(), "write {b:?}[{i}] of {}", v.len());
            v[i] = z;
            if b == Buf::Output {
                self.written[i] = true;
            }
        }

        fn step(&mut self, s: &Step) {
            match *s {
                Step::Fft {
                    ref key,
                    src,
                    dst,
                    loops,
                    istep,
                    ostep,
                    dir,
                } => {
                    for l in 0..loops {
                        self.exec(key, src, dst, l * istep, l * ostep, dir);
                    }
                }
                Step::Copy { src, dst, len } => {
                    for j in 0..len {
                        let z = self.read(src, j);
                        self.write(dst, j, z);
                    }
                }
                Step::Resize {
                    src,
                    dst,
                    outer,
                    n,
                    h,
                    inner,
                    nyq,
                    sanitize,
                } => {
                    for o in 0..outer {
                        for k in 0..h {
                            for i in 0..inner {
                                let mut z = if k < n {
                                    self.read(src, (o * n + k) * inner + i)
                                } else {
                                    Z::new(0.0, 0.0)
                                };
                                if sanitize && (k == 0 || k as i64 == nyq) {
                                    z.im = 0.0;
                                }
                                self.write(dst, (o * h + k) * inner + i, z);
                            }
                        }
                    }
                }
                Step::Hermitian {
                    buf,
                    outer,
                    h,
                    inner,
                    nyq,
                } => {
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut ks = vec![0];
                            if nyq >= 0 {
                                ks.push(nyq as usize);
                            }
                            for k in ks {
                                let j = (o * h + k) * inner + i;
                                let z = self.read(buf, j);
                                self.write(buf, j, Z::new(z.re, 0.0));
                            }
                        }
                    }
                }
                Step::ToComplex { src, dst, len } | Step::RealPart { src, dst, len } => {
                    for j in 0..len {
                        let z = self.read(src, j);
                        self.write(dst, j, Z::new(z.re, 0.0));
                    }
                }
            }
        }

        /// One cuFFT execution with the plan `key`, the buffers offset by `ioff`/`ooff`
        /// elements: reads everything, then writes (in-place safe).
        fn exec(
            &mut self,
            key: &PlanKey,
            src: Buf,
            dst: Buf,
            ioff: usize,
            ooff: usize,
            dir: c_int,
        ) {
            let rank = key.n.len();
            assert!((1..=3).contains(&rank));
            assert_eq!(key.inembed.len(), rank);
            assert_eq!(key.onembed.len(), rank);
            let n: Vec<usize> = key.n.iter().map(|&d| d as usize).collect();
            let half = |v: &[usize]| {
                let mut v = v.to_vec();
                v[rank - 1] = v[rank - 1] / 2 + 1;
                v
            };
            let (ri, ro) = (real_in(key.ty), real_out(key.ty));
            let ilog = if ro { half(&n) } else { n.clone() };
            let olog = if ri { half(&n) } else { n.clone() };
            let inembed: Vec<usize> = key.inembed.iter().map(|&d| d as usize).collect();
            let onembed: Vec<usize> = key.onembed.iter().map(|&d| d as usize).collect();
            for d in 1..rank {
                assert!(
                    inembed[d] >= ilog[d] && onembed[d] >= olog[d],
                    "embeds {key:?}"
                );
            }
            if src == dst {
                assert!(!ri && !ro, "in-place real transform {key:?}");
                assert_eq!(
                    (ioff, key.istride, key.idist, &inembed),
                    (ooff, key.ostride, key.odist, &onembed)
                );
            }
            let at =
                |x: &[usize], embed: &[usize], stride: i64, dist: i64, b: usize, off: usize| {
                    let mut lin = 0usize;
                    for d in 0..rank {
                        lin = lin * embed[d] + x[d];
                    }
                    off + b * dist as usize + lin * stride as usize
                };
            let multi = |dims: &[usize], mut j: usize| {
                let mut x = vec![0; rank];
                for d in (0..rank).rev() {
                    x[d] = j % dims[d];
                    j /= dims[d];
                }
                x
            };
            let (ilen, olen): (usize, usize) = (ilog.iter().product(), olog.iter().product());
            let mut results = Vec::new();
            for b in 0..key.batch as usize {
                let a: Vec<Z> = (0..ilen)
                    .map(|j| {
                        self.read(
                            src,
                            at(&multi(&ilog, j), &inembed, key.istride, key.idist, b, ioff),
                        )
                    })
                    .collect();
                let sign = dir as f64;
                let (mut a, mut dims) = (a, ilog.clone());
                if ro {
                    for d in 0..rank - 1 {
                        (a, dims) = lines(&a, &dims, d, dims[d], |l| naive_dft(l, sign));
                    }
                    let m = n[rank - 1];
                    (a, dims) = lines(&a, &dims, rank - 1, m, |l| {
                        // cuFFT's C2R needs a sane half spectrum: the program sanitizes
                        assert!(l[0].im.abs() < 1e-9, "C2R input with imaginary DC {l:?}");
                        if m.is_multiple_of(2) {
                            assert!(l[m / 2].im.abs() < 1e-9, "C2R input with imaginary Nyquist");
                        }
                        let full: Vec<Z> = (0..m)
                            .map(|k| if k < l.len() { l[k] } else { l[m - k].conj() })
                            .collect();
                        naive_dft(&full, sign)
                            .into_iter()
                            .map(|z| Z::new(z.re, 0.0))
                            .collect()
                    });
                } else {
                    for d in 0..rank {
                        (a, dims) = lines(&a, &dims, d, dims[d], |l| naive_dft(l, sign));
                    }
                    if ri {
                        let h = olog[rank - 1];
                        (a, dims) = lines(&a, &dims, rank - 1, h, |l| l[..h].to_vec());
                    }
                }
                assert_eq!(dims, olog);
                results.push(a);
            }
            let mut seen = std::collections::HashSet::new();
            for (b, a) in results.into_iter().enumerate() {
                for (j, z) in a.into_iter().enumerate().take(olen) {
                    let i = at(&multi(&olog, j), &onembed, key.ostride, key.odist, b, ooff);
                    assert!(
                        seen.insert(i),
                        "execution writes element {i} twice ({key:?})"
                    );
                    self.write(dst, i, z);
                }
            }
        }
    }

    /// Runs the program of `spec` for a double-precision input on the emulator and compares
    /// it with the CPU path.
    fn emulate(
        spec: &FftSpec,
        in_shape: &[usize],
        out_shape: &[usize],
        seed: u64,
    ) -> std::result::Result<(), String> {
        let len: usize = in_shape.iter().product();
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rnd = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let real = spec.kind == FftKind::R2C;
        let mut x: Vec<Z> = (0..len)
            .map(|_| Z::new(rnd(), if real { 0.0 } else { rnd() }))
            .collect();
        if spec.hermitian {
            // an exactly Hermitian half spectrum: the R2C of real data of the output shape
            let r: Vec<f64> = (0..out_shape.iter().product()).map(|_| rnd()).collect();
            let r2c = FftSpec {
                kind: FftKind::R2C,
                inverse: false,
                hermitian: false,
                axes: spec.axes.clone(),
            };
            x = match cpu::fft::run(&r2c, &HostBuf::F64(r), out_shape, in_shape) {
                Ok(HostBuf::C128(v)) => v,
                other => return Err(format!("cpu R2C gave {other:?}")),
            };
        }
        let host = if real {
            HostBuf::F64(x.iter().map(|z| z.re).collect())
        } else {
            HostBuf::C128(x.clone())
        };
        let dtype = host.dtype();
        let prec = check(spec, dtype, len, in_shape, out_shape).map_err(|e| e.to_string())?;
        assert_eq!(prec, Precision::Double);
        let prog = program(spec, prec, in_shape, out_shape);
        let out_len: usize = out_shape.iter().product();
        let mut emu = Emu {
            bufs: [
                x,
                vec![Z::new(f64::NAN, f64::NAN); out_len],
                vec![Z::new(f64::NAN, f64::NAN); prog.work_len],
            ],
            written: vec![false; out_len],
        };
        for st in &prog.steps {
            emu.step(st);
        }
        if let Some(j) = emu.written.iter().position(|w| !w) {
            return Err(format!(
                "output element {j} never written; program {prog:?}"
            ));
        }
        let want: Vec<Z> =
            match cpu::fft::run(spec, &host, in_shape, out_shape).map_err(|e| e.to_string())? {
                HostBuf::C128(v) => v,
                HostBuf::F64(v) => v.into_iter().map(|r| Z::new(r, 0.0)).collect(),
                other => return Err(format!("cpu gave {}", other.dtype())),
            };
        let got = &emu.bufs[1];
        let err: f64 = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).norm_sqr())
            .sum::<f64>()
            .sqrt();
        let norm: f64 = want
            .iter()
            .map(|b| b.norm_sqr())
            .sum::<f64>()
            .sqrt()
            .max(1e-300);
        if err / norm > 1e-10 || err.is_nan() {
            return Err(format!(
                "relative error {:.3e}; program {prog:?}",
                err / norm
            ));
        }
        Ok(())
    }

    /// Every non-empty subset of `0..nd`, each in ascending order and rotated so each
    /// member comes last once.
    fn axes_sets(nd: usize) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        for mask in 1u32..(1 << nd) {
            let set: Vec<usize> = (0..nd).filter(|&a| mask & (1 << a) != 0).collect();
            for r in 0..set.len() {
                let mut v = set.clone();
                v.rotate_left(r);
                out.push(v);
            }
        }
        out
    }

    const SHAPES: [&[usize]; 10] = [
        &[1],
        &[5],
        &[3, 4],
        &[5, 3, 2],
        &[2, 3, 4],
        &[4, 1, 3, 5],
        &[2, 3, 1, 4, 3],
        &[1, 6, 1],
        &[2, 2, 2, 2],
        &[3, 1],
    ];

    fn spec(axes: &[usize], inverse: bool, kind: FftKind) -> FftSpec {
        FftSpec {
            axes: axes.iter().copied().collect(),
            inverse,
            kind,
            hermitian: false,
        }
    }

    #[test]
    fn emulated_c2c_programs_match_the_cpu() {
        let mut fails = Vec::new();
        for shape in SHAPES {
            for axes in axes_sets(shape.len()) {
                for inverse in [false, true] {
                    let sp = spec(&axes, inverse, FftKind::C2C);
                    if let Err(e) = emulate(&sp, shape, shape, axes.len() as u64) {
                        fails.push(format!("C2C {shape:?} {axes:?} inverse={inverse}: {e}"));
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }

    #[test]
    fn emulated_r2c_programs_match_the_cpu() {
        let mut fails = Vec::new();
        for shape in SHAPES {
            for axes in axes_sets(shape.len()) {
                let ra = *axes.last().unwrap();
                let mut out = shape.to_vec();
                out[ra] = shape[ra] / 2 + 1;
                let sp = spec(&axes, false, FftKind::R2C);
                if let Err(e) = emulate(&sp, shape, &out, 3) {
                    fails.push(format!("R2C {shape:?} {axes:?}: {e}"));
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }

    #[test]
    fn emulated_c2r_programs_match_the_cpu() {
        let mut fails = Vec::new();
        for shape in SHAPES {
            for axes in axes_sets(shape.len()) {
                let ra = *axes.last().unwrap();
                for m in [1, 2, 3, 4, 7, 2 * shape[ra].max(1) - 1, 2 * shape[ra]] {
                    let mut out = shape.to_vec();
                    out[ra] = m;
                    let sp = spec(&axes, true, FftKind::C2R);
                    if let Err(e) = emulate(&sp, shape, &out, m as u64) {
                        fails.push(format!("C2R {shape:?} -> {out:?} {axes:?}: {e}"));
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }

    #[test]
    fn emulated_hermitian_c2r_programs_match_the_cpu() {
        // trailing axes (the rewrite's), the real axis exactly `m / 2 + 1` long
        let mut fails = Vec::new();
        for shape in SHAPES {
            let nd = shape.len();
            for k in 1..=nd {
                let axes: Vec<usize> = (nd - k..nd).collect();
                let ra = nd - 1;
                for m in [2, 3, 4, 7, 8] {
                    let (mut i, mut o) = (shape.to_vec(), shape.to_vec());
                    o[ra] = m;
                    i[ra] = m / 2 + 1;
                    let mut sp = spec(&axes, true, FftKind::C2R);
                    sp.hermitian = true;
                    if let Err(e) = emulate(&sp, &i, &o, m as u64) {
                        fails.push(format!("hermitian C2R {i:?} -> {o:?} {axes:?}: {e}"));
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
        // the sim step's inverse: a copy and one rank-2 C2R, nothing else
        let mut sp = spec(&[0, 1], true, FftKind::C2R);
        sp.hermitian = true;
        let p = program(&sp, Precision::Single, &[256, 129], &[256, 256]);
        assert_eq!(p.steps.len(), 2, "{p:?}");
        let Step::Fft { key, .. } = &p.steps[1] else {
            panic!("{p:?}")
        };
        assert_eq!(key.n.as_slice(), &[256i64, 256][..]);
    }

    #[test]
    fn plans_of_the_common_layouts() {
        // fft2 on [B, H, W]: one rank-2 plan, batch B, contiguous, one execution
        let p = program(
            &spec(&[1, 2], false, FftKind::C2C),
            Precision::Single,
            &[3, 8, 16],
            &[3, 8, 16],
        );
        assert_eq!(p.steps.len(), 1);
        let Step::Fft {
            key,
            loops,
            src,
            dst,
            ..
        } = &p.steps[0]
        else {
            panic!("{p:?}")
        };
        assert_eq!(
            (key.n.as_slice(), key.batch, key.istride, key.idist, *loops),
            (&[8i64, 16][..], 3, 1, 128, 1)
        );
        assert_eq!((*src, *dst), (Buf::Input, Buf::Output));
        // rfft2 on [B, H, W]: one rank-2 R2C plan
        let p = program(
            &spec(&[1, 2], false, FftKind::R2C),
            Precision::Double,
            &[3, 8, 16],
            &[3, 8, 9],
        );
        assert_eq!(p.steps.len(), 1, "{p:?}");
        // axis 0 of [N, I]: strided, batched over I, one execution
        let p = program(
            &spec(&[0], false, FftKind::C2C),
            Precision::Single,
            &[8, 5],
            &[8, 5],
        );
        let Step::Fft { key, loops, .. } = &p.steps[0] else {
            panic!("{p:?}")
        };
        assert_eq!((key.istride, key.idist, key.batch, *loops), (5, 1, 5, 1));
        // irfft: resize (sanitizing) then one C2R, no hermitian pass
        let p = program(
            &spec(&[1], true, FftKind::C2R),
            Precision::Single,
            &[4, 5],
            &[4, 8],
        );
        assert_eq!(p.steps.len(), 2, "{p:?}");
        assert_eq!(p.work_len, 20);
    }
}
