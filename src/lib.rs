//! # lazyfuse
//!
//! Lazy NumPy-like arrays for Rust. Operations build an expression DAG; evaluation fuses
//! each chain of elementwise work (with broadcasts and views) into one kernel -- CUDA C
//! generated at run time and compiled with NVRTC on a GPU, the same plan interpreted on
//! the CPU -- and nothing is copied to the host until `to_host`/`item`.
//!
//! ```
//! use lazyfuse as lf;
//! use lf::{Array, DType};
//!
//! # fn main() -> lf::Result<()> {
//! let x = Array::linspace(0.0, 1.0, 5, DType::F32);
//! let y = (&x * 2.0).sin() + x.square();      // lazy: nothing runs yet
//! let v = y.to_vec::<f32>()?;                  // one fused kernel, then the copy
//! assert_eq!(v.len(), 5);
//! assert!((v[4] - (2.0f32.sin() + 1.0)).abs() < 1e-6);
//! # Ok(())
//! # }
//! ```
//!
//! # Pipeline
//! Calls in [`Array`] and the free functions only build nodes of a hash-consed DAG. An
//! evaluation ([`Array::eval`], [`eval`], [`Array::to_host`], [`Array::item`]) plans the DAG
//! into steps -- fused kernels, FFT library calls, device copies -- (cached by structure, so
//! a loop that rebuilds the same expression reuses the plan), lowers each kernel to a typed
//! IR, and runs the steps: on CUDA as NVRTC-compiled kernels (cached in memory and on disk,
//! keyed by structure only) and cuFFT calls, on the CPU through an interpreter of the same IR
//! and rustfft. [`doc::architecture`] describes each stage.
//!
//! # Where did my time go?
//! [`profile`] runs a closure and returns a [`Report`] of everything it evaluated: planning
//! (plan-cache hit or miss), each kernel's compile source and device time, library calls,
//! transfers and waits. `LAZYFUSE_PROFILE=1` prints the same table after every call;
//! [`Report::to_chrome_trace`] writes it as JSON for Perfetto or `chrome://tracing`.
//!
//! ```
//! use lazyfuse as lf;
//! use lf::{Array, DType, EntryKind};
//!
//! # fn main() -> lf::Result<()> {
//! let x = Array::linspace(0.0, 1.0, 4096, DType::F32);
//! let (spectrum, report) = lf::profile(|| lf::fft::fft(&x.exp(), 0).abs().to_vec::<f32>());
//! assert_eq!(spectrum?.len(), 4096);
//! // one kernel makes the complex input, cuFFT (rustfft on the CPU), one kernel takes abs
//! assert_eq!(report.kernels().len(), 2);
//! assert_eq!(report.library_calls().len(), 1);
//! assert_eq!(report.of_kind(EntryKind::Plan).count(), 1);
//! println!("{report}");
//! # Ok(())
//! # }
//! ```
//!
//! Other CUDA code shares memory with lazyfuse without copies: [`Array::cuda_ptr`] hands
//! out an evaluated buffer with the stream its kernels are queued on,
//! [`Array::from_cuda_ptr`] wraps foreign device memory (never written or freed by
//! lazyfuse), and [`Array::to_dlpack`] / [`Array::from_dlpack`] speak DLPack through the
//! re-exported [`dlpark`] crate.
//!
//! Environment variables (`LAZYFUSE_DEVICE`, `LAZYFUSE_DEBUG`, `LAZYFUSE_PROFILE`, caches) are
//! listed in [`doc::env_vars`]; NumPy equivalents in [`doc::numpy_users`].
//!
//! Loops are first-class: evaluating a DAG of a structure seen before reuses its plan and
//! kernels (every scalar is an argument, so a new `dt` recompiles nothing), an evaluation
//! that consumes the last handle of an input may write its output into that input's buffer,
//! and [`Function`] traces a step once and replays it, on CUDA as one graph launch (the
//! example `03_simulation_loop` runs a spectral simulation both ways:
//! `cargo run --release --example 03_simulation_loop -- 256 1000`). Random numbers that
//! change every step come from a [`random::Key`] passed as an input: randomness as data, the
//! plan stays the same.
//!
//! Reductions fuse with the elementwise work that feeds them and with the scalar work after
//! them (`sum(x*x)` reads `x` once; a mean divides inside its reduction kernel), and
//! `matmul` is one cuBLAS call (ndarray on the CPU) reading transposed operands in place.
//!
//! ```
//! use lazyfuse as lf;
//! use lf::DType;
//!
//! # fn main() -> lf::Result<()> {
//! let x = lf::random::normal(&[256, 8], DType::F64, 3);
//! let z = (&x - x.mean_axes(&[0], true)) / x.std_axes(&[0], 0, true);
//! assert_eq!(z.shape(), &[256, 8]);
//! let cov = z.transpose().matmul(&z) / 256.0; // correlation matrix, ones on the diagonal
//! let d = cov.to_vec::<f64>()?;
//! assert!((0..8).all(|i| (d[i * 9] - 1.0).abs() < 1e-12));
//! # Ok(())
//! # }
//! ```
//!
//! Several devices of one host share one array through [`Mesh`] and [`Sharded`]:
//! `a.shard(&mesh, axis)` splits an axis into blocks, one per device; blockwise work
//! plans the same fused kernels on every device, and reductions over the split axis,
//! re-sharding, rolls and pads across block edges and `fft2`/`fftn` move data between the
//! devices ([`shard`] describes how; [`Device::cuda_count`] says how many GPUs there are).
//!
//! # Requirements
//! - **Rust 1.89** or newer (the crate's `rust-version`).
//! - **Nothing else to build, test or run on the CPU.** The CUDA libraries are loaded at run
//!   time (cudarc with dynamic loading), so the crate builds without a CUDA toolkit, and
//!   without a usable GPU and driver every array lives and runs on the CPU
//!   (`LAZYFUSE_DEVICE=cpu` forces that; see [`doc::env_vars`]). The `cuda` feature (on by
//!   default) only decides whether the CUDA backend is compiled in.
//! - **For the CUDA backend** (optional), found by the dynamic loader (`LD_LIBRARY_PATH` or
//!   the ld cache) when first needed:
//!   - an NVIDIA GPU and its driver, which provides `libcuda`; the driver must support the
//!     CUDA major version of the libraries below (CUDA 13.x: driver 580 or newer; CUDA
//!     12.x: driver 525 or newer);
//!   - `libnvrtc` (with its `libnvrtc-builtins`) of CUDA 12.x or 13.x, which compiles the
//!     generated kernels: needed to run anything on the GPU;
//!   - `libcufft` (CUDA 12.x or 13.x) for FFTs and `libcublas` (CUDA 12.x or 13.x) for
//!     matmuls; an FFT or matmul on the GPU without them is an [`Error`].
//!   - `libnccl.so.2` (NCCL 2.7 or newer; the `nvidia-nccl-cu12`/`-cu13` wheels, or
//!     `LAZYFUSE_NCCL_LIBRARY`) for collectives between GPUs and for one process per GPU
//!     ([`distributed`], [`doc::distributed`]); without it a mesh of GPUs moves data with
//!     its own copies, and a multi-process job is an [`Error`] saying NCCL cannot be loaded.
//!
//!   These come with a CUDA toolkit or as PyPI wheels (`nvidia-cuda-nvrtc`, `nvidia-cufft`,
//!   `nvidia-cublas`). The bindings are built for CUDA 13.0 (cudarc's `cuda-13000`) and
//!   tested on driver 580 with CUDA 13.0 (NVRTC 13.0.88, cuFFT 12.0, cuBLAS 13.1) on an
//!   H200; CUDA 12.x libraries are among the names searched but are not tested.
//! - **Python 3 with NumPy 2.x** only to regenerate the committed test fixtures
//!   (`tests/data/gen*.py`); `cargo test` needs neither.

#![warn(missing_docs)]

mod api;
mod array;
mod config;
mod device;
pub mod distributed;
pub mod doc;
mod element;
mod error;
mod exec;
mod explain;
mod function;
mod graph;
mod interop;
mod npy;
mod nvtx;
mod profile;
mod promote;
pub(crate) mod runtime;
mod schedule;
mod shape;
pub mod shard;
mod stats;
mod thread_field;

pub use api::creation::{meshgrid, random, Indexing};
pub use api::elementwise::{complex, where_, Operand};
pub use api::fft;
pub use api::gather::take_along_axis;
pub use api::grad::{grad, value_and_grad, vjp};
pub use api::linalg;
pub use api::movement::{concatenate, stack};
pub use api::nan::allclose;
pub use api::print::{printoptions, set_printoptions, PrintOptions};
pub use api::update::At;
pub use array::{eval, Array};
pub use config::{
    cpu_fft_lines_min_elements, fft_backend, fusion_enabled, pruned_fft_min_elements,
    real_fft_enabled, real_fft_enabled_for, real_fft_enabled_on, real_fft_mode,
    set_cpu_fft_lines_min_elements, set_fft_backend, set_fusion, set_pruned_fft_min_elements,
    set_real_fft, set_real_fft_mode, with_fusion, FftBackend, CPU_FFT_LINES_MIN_ELEMENTS,
    CUDA_PRUNED_FFT_MIN_ELEMENTS, CUDA_REAL_FFT_MIN_ELEMENTS,
};
pub use device::{
    default_device, set_default_device, with_default_device, with_stream, Device, Stream,
};
/// The DLPack crate lazyfuse's [`Array::to_dlpack`] and [`Array::from_dlpack`] speak
/// (`dlpark`), so that a program can name exactly these types.
pub use dlpark;
pub use element::Element;
pub use error::{Error, Result};
pub use function::Function;
/// The host types of `DType::F16` (`half::f16`) and `DType::BF16` (`half::bf16`).
pub use half::{bf16, f16};
pub use interop::{CudaPtr, PinnedVec};
pub use lazyfuse_codegen::DType;
/// The ndarray version lazyfuse's host interop uses ([`Array::from_ndarray`],
/// [`Array::to_host`]), so that a program can name exactly these types.
pub use ndarray;
pub use ndarray::{s, NewAxis};
pub use npy::{load_npy, load_npy_on, loadz, loadz_on, savez};
pub use profile::summary::{profile_summary, Summary, SummaryRow};
pub use profile::{profile, CompileSource, Entry, EntryKind, Report, Timing};
pub use promote::result_type;
pub use shard::{Mesh, Placement, Sharded};
pub use stats::{memory_stats, reset_stats, stats, MemoryStats, Stats};

/// `num_complex::Complex32`, the host type of `DType::C64`.
#[allow(non_camel_case_types)]
pub type c32 = num_complex::Complex32;
/// `num_complex::Complex64`, the host type of `DType::C128`.
#[allow(non_camel_case_types)]
pub type c64 = num_complex::Complex64;

/// The README's code blocks, compiled and run as doctests so that they cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Introspection for tests and tools: the plan an evaluation would run, the driver calls an
/// evaluation makes.
pub mod debug {
    use crate::Array;

    pub use crate::profile::calls::DriverCalls;

    /// Runs `f` and returns, with its result, the CUDA driver, cuFFT and cuBLAS calls this
    /// thread made meanwhile: per entry point, how many and the host time spent inside
    /// them. Work queued by a plain `eval` of a cached one-kernel expression costs one
    /// `cuLaunchKernel` and one context check (`cuCtxGetCurrent`), plus an allocation and
    /// a free when the device's free list cannot serve them. Calls on the CPU device: none.
    ///
    /// ```
    /// use lazyfuse as lf;
    /// # fn main() -> lf::Result<()> {
    /// let x = lf::Array::linspace(0.0, 1.0, 8, lf::DType::F32);
    /// x.eval()?;
    /// let (r, calls) = lf::debug::driver_calls(|| (&x * 2.0).eval());
    /// r?;
    /// println!("{calls}");
    /// assert!(calls.total() <= 8);
    /// # Ok(())
    /// # }
    /// ```
    pub fn driver_calls<R>(f: impl FnOnce() -> R) -> (R, DriverCalls) {
        crate::profile::calls::count(f)
    }

    /// The number of library calls (FFTs, matmuls) evaluating `arrays` would make now.
    pub fn library_count(arrays: &[&Array]) -> crate::Result<usize> {
        let nodes: Vec<_> = arrays.iter().map(|a| a.node.clone()).collect();
        Ok(crate::exec::plan(&nodes)?.library_count())
    }

    /// The number of fused kernels evaluating `arrays` would launch now (planning only).
    pub fn kernel_count(arrays: &[&Array]) -> crate::Result<usize> {
        let nodes: Vec<_> = arrays.iter().map(|a| a.node.clone()).collect();
        Ok(crate::exec::plan(&nodes)?.kernel_count())
    }

    /// The plan evaluating `arrays` would run, as text (what `LAZYFUSE_DEBUG=3` prints).
    pub fn plan(arrays: &[&Array]) -> crate::Result<String> {
        let nodes: Vec<_> = arrays.iter().map(|a| a.node.clone()).collect();
        Ok(crate::exec::plan(&nodes)?.to_string())
    }

    /// One decision between the generated FFT passes and cuFFT (see [`fft_choices`]).
    #[derive(Clone, Debug, PartialEq)]
    pub struct FftChoice {
        /// The transform: device name and compute capability, dtype, shape, axes and
        /// direction, then `r2c` or `c2r` for a real transform (whose shape is the real
        /// array's).
        pub key: String,
        /// Whether the generated passes run it alone (they measured over 10 % faster).
        pub generated: bool,
        /// Whether they run it with the elementwise kernel computing its input fused into
        /// their first pass: over 10 % faster than cuFFT plus `copy_time` (that kernel's
        /// memory traffic: it writes the array, the transform reads it).
        pub fused_generated: bool,
        /// The fastest of the timed runs of the generated passes (`Duration::MAX` when they
        /// could not run it).
        pub generated_time: std::time::Duration,
        /// The fastest of the timed runs of cuFFT.
        pub cufft_time: std::time::Duration,
        /// The memory time of one device-to-device copy of the array: the fastest timed copy
        /// less the fastest copy of one element (zero in decisions stored before it was
        /// measured).
        pub copy_time: std::time::Duration,
    }

    /// The decisions made so far on `dev` between the generated FFT passes and cuFFT
    /// (`lf::FftBackend::Auto`, the default): the first use of a transform shape (C2C, R2C
    /// or C2R) times
    /// both and a copy of the array, and keeps cuFFT unless the passes are over 10 %
    /// faster (with the kernel computing the input fused into them: faster than cuFFT and
    /// that copy), and the decision is
    /// written next to the disk kernel cache for later processes (loaded decisions are
    /// listed too). Empty on the CPU, which runs rustfft.
    pub fn fft_choices(dev: &crate::Device) -> Vec<FftChoice> {
        crate::runtime::fft_choices(dev)
    }

    /// Whether the transform `spectrum` (the result of an `lf::fft` function) runs as the
    /// generated FFT passes on its device where the elementwise kernel computing its input
    /// fuses into their first pass (the plan then fuses it, and a consumer reading the
    /// transform through rolls into the last pass): as `lf::set_fft_backend` says, and for
    /// the default `Auto` by the measured decision (made now, by timing both, when there
    /// is none yet: see [`fft_choices`]; `FftChoice::fused_generated`). A transform of an
    /// array computed earlier runs unfused, by `FftChoice::generated`. `false` on the CPU,
    /// for transforms the generator does not cover (lengths; an R2C or C2R transform whose
    /// halved axis is not the last, or whose input is not exactly the half spectrum), for
    /// a real transform already evaluated, and when `spectrum` is no transform.
    pub fn fft_runs_generated(spectrum: &Array) -> crate::Result<bool> {
        let n = &spectrum.node;
        let crate::graph::Op::Fft(spec) = &n.op else {
            return Ok(false);
        };
        // a C2C transform's ends are alike; a real one's passes plan over its input too
        // (gone once it is evaluated)
        let input = match spec.kind {
            crate::graph::FftKind::C2C => None,
            _ => match n.inputs().first().cloned() {
                Some(i) => Some(i),
                None => return Ok(false),
            },
        };
        let (in_shape, in_dtype) = input
            .as_ref()
            .map_or((&n.shape[..], n.dtype), |i| (&i.shape[..], i.dtype));
        let (Some(shape), Some(dtype)) = (
            spec.passes_shape(in_shape, &n.shape),
            spec.passes_dtype(in_dtype, n.dtype),
        ) else {
            return Ok(false);
        };
        crate::runtime::fft_prefers_generated(&n.device, spec, shape, dtype, true)
    }

    /// The all-reduce (sum) of `mesh`'s backend alone, as a reduction over the split axis
    /// calls it after its local sums: `parts[i]` is block `i`'s array (one per block, equal
    /// shapes and dtypes), and entry `i` of the result is the sum of all of them on
    /// `mesh.devices()[i]`. On an NCCL mesh this is one `ncclAllReduce` per device, queued
    /// now; on the host-staged backend it is lazy. For benchmarks and tests of the backends.
    ///
    /// ```
    /// use lazyfuse as lf;
    /// # fn main() -> lf::Result<()> {
    /// let mesh = lf::Mesh::new(&[lf::Device::Cpu, lf::Device::Cpu])?;
    /// let a = lf::Array::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// let b = lf::Array::from_vec(vec![10.0f32, 20.0], &[2])?;
    /// let r = lf::debug::all_reduce_sum(&mesh, &[a, b])?;
    /// assert_eq!(r[1].to_vec::<f32>()?, vec![11.0, 22.0]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::Shape`] when the number of parts is not the mesh's length or their
    /// shapes or dtypes differ; the backend's errors.
    pub fn all_reduce_sum(mesh: &crate::Mesh, parts: &[Array]) -> crate::Result<Vec<Array>> {
        let shape_err = |msg: String| crate::Error::Shape {
            op: "all_reduce_sum",
            msg,
        };
        if parts.len() != mesh.len() {
            return Err(shape_err(format!(
                "{} parts for a mesh of {} blocks",
                parts.len(),
                mesh.len()
            )));
        }
        if let Some(p) = parts
            .iter()
            .find(|p| p.shape() != parts[0].shape() || p.dtype() != parts[0].dtype())
        {
            return Err(shape_err(format!(
                "parts differ: {} {:?} and {} {:?}",
                parts[0].dtype(),
                parts[0].shape(),
                p.dtype(),
                p.shape()
            )));
        }
        let parts: Vec<Option<Array>> = parts.iter().cloned().map(Some).collect();
        mesh.coll().all_reduce(
            &parts,
            crate::shard::collective::ReduceOp::Sum,
            mesh.devices(),
        )
    }
}
