//! CUDA backend through cudarc: one context per device and a stream per thread, NVRTC
//! compilation with in-memory and on-disk kernel caches, stream-ordered memory, pinned
//! staging for readback, and launches of the generated grid-stride kernels.
//!
//! # Design
//! - **A stream per thread, event tracking off.** Every call a thread makes on a device
//!   (allocation, copy, launch, free) goes to that thread's non-blocking stream (`lane`), so
//!   within a thread the stream's order is the dependency order; across streams, buffers
//!   order their own uses by events recorded when another stream first touches them
//!   (`lane::Tracking`), and shared per-device state by its last user's stream
//!   (`lane::order_after`). cudarc's per-buffer event tracking (two `CUevent`s per
//!   allocation, waits and records around every launch) is therefore switched off on the
//!   context before any stream or buffer exists; it would cost driver calls on every launch
//!   and must be off for CUDA-graph capture anyway. Use after free cannot happen: a
//!   `CudaSlice` frees with `cuMemFreeAsync` on the stream it was allocated on, after that
//!   stream waited for every other stream that used the buffer, so the free is ordered after
//!   every launch or copy submitted before the drop (a buffer can only be dropped after the
//!   calls borrowing it returned, i.e. after their work was queued).
//! - **Memory** comes from the device's default stream-ordered pool (`cuMemAllocAsync`,
//!   256-byte aligned) whose release threshold is raised to `u64::MAX`, so freed blocks stay
//!   in the pool instead of going back to the driver at each synchronization.
//! - **Between devices**: a copy from another GPU is one `cuMemcpyPeerAsync` on the
//!   destination's stream, after an event of the source's writer, with peer access enabled
//!   once per pair where the hardware allows (`peer`); collectives go through NCCL
//!   (`nccl`), queued on the devices' streams the same way.
//! - **Readback** goes through one pinned staging buffer per device (grown on demand up to a
//!   cap): chunks of 1-2 MiB, each followed by an event the host polls, are copied out as
//!   they arrive (on every worker thread from 2 MiB), overlapping the two copies; pageable
//!   device-to-host copies are ~40x slower.
//! - **Arguments**: the generated kernel takes exactly one by-value struct; its bytes come
//!   from `lazyfuse_codegen::cuda::pack_args` and are passed to `cuLaunchKernel` as the single
//!   entry of the parameter array (the driver copies the parameter's declared size from that
//!   pointer at launch time; the size is checked against `cuFuncGetParamInfo` when the
//!   driver has it).

mod blas;
mod compile;
mod device;
mod disk_cache;
mod fft;
pub(crate) mod graph;
pub(crate) mod lane;
mod memory;
pub(crate) mod nccl;
mod peer;
mod scatter;

pub use compile::nvrtc_check;
pub use device::CudaDevice;
pub(crate) use device::{event_elapsed, TimingEvent};
pub(crate) use fft::{fused_dtypes, Epilogue, Mid, Prologue};
pub use memory::{CudaBuffer, PinnedHost};

use crate::Error;
use cudarc::driver::DriverError;
use lazyfuse_codegen::Kernel;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

/// What CUDA is in this process: the libraries loaded (each probed once, never panicking)
/// and the devices opened. Everything of one device is a field of its [`CudaDevice`].
struct CudaProcess {
    /// The number of CUDA devices, or why CUDA is unusable.
    count: OnceLock<std::result::Result<usize, String>>,
    /// Every opened device, one per ordinal.
    devices: Mutex<Vec<&'static CudaDevice>>,
    /// Whether libnvrtc loads.
    nvrtc: OnceLock<bool>,
    /// NVRTC's (major, minor) version.
    nvrtc_version: OnceLock<Option<(i32, i32)>>,
    /// The SM versions NVRTC can target.
    nvrtc_archs: OnceLock<Vec<i32>>,
    /// Kernels that passed the NVRTC compile check for `sm_90` (a property of the loaded
    /// NVRTC; no device takes part).
    checked: Mutex<Option<HashSet<Kernel>>>,
    /// Whether the driver has `cuFuncGetParamInfo` (CUDA 12.4+).
    param_info: OnceLock<bool>,
    /// Whether libcufft loads.
    cufft: OnceLock<bool>,
    /// Whether libcublas loads.
    cublas: OnceLock<bool>,
    /// NCCL's entry points, or why it cannot be loaded (`nccl::lib`).
    nccl: OnceLock<std::result::Result<nccl::NcclLib, String>>,
    /// The NCCL communicators of device sets within this process, by ordinals (a set's
    /// communicators span several devices, so no one device owns them).
    nccl_comms: Mutex<Vec<(Vec<usize>, Arc<nccl::Comms>)>>,
    /// Sequence number of the disk cache's temporary file names (unique in the process;
    /// the pid tells processes apart).
    disk_seq: AtomicU64,
}

/// This thread on CUDA: per thread, as a capture, a lane lease and a `with_stream` scope
/// belong to one thread (the lane pools themselves are device fields; a per-device map
/// keyed by thread would take a lock on every launch).
struct ThreadCuda {
    /// The stream (and device ordinal) this thread captures a CUDA graph on.
    capture: std::cell::RefCell<Option<(usize, Arc<cudarc::driver::CudaStream>)>>,
    /// This thread's lane on each device it used, returned to the device when the thread
    /// ends.
    leases: std::cell::RefCell<smallvec::SmallVec<[lane::Lease; 1]>>,
    /// Lanes `with_stream` chose, innermost last.
    chosen: std::cell::RefCell<smallvec::SmallVec<[Arc<lane::Lane>; 1]>>,
    /// cuFFT plans and work areas used during this thread's capture.
    pins: std::cell::RefCell<Option<Vec<fft::PinnedPlan>>>,
}

thread_local! {
    /// This thread's CUDA state.
    static THREAD: ThreadCuda = const {
        ThreadCuda {
            capture: std::cell::RefCell::new(None),
            leases: std::cell::RefCell::new(smallvec::SmallVec::new_const()),
            chosen: std::cell::RefCell::new(smallvec::SmallVec::new_const()),
            pins: std::cell::RefCell::new(None),
        }
    };
}

/// The CUDA libraries and devices of this process.
static CUDA: CudaProcess = CudaProcess {
    count: OnceLock::new(),
    devices: Mutex::new(Vec::new()),
    nvrtc: OnceLock::new(),
    nvrtc_version: OnceLock::new(),
    nvrtc_archs: OnceLock::new(),
    checked: Mutex::new(None),
    param_info: OnceLock::new(),
    cufft: OnceLock::new(),
    cublas: OnceLock::new(),
    nccl: OnceLock::new(),
    nccl_comms: Mutex::new(Vec::new()),
    disk_seq: AtomicU64::new(0),
};

/// Wraps a driver error into the crate's error, naming the call. Every driver call of this
/// backend maps its result through one of these, built right after the call returns, so
/// building it also counts the call (`crate::calls`, for `lf::debug::driver_calls`).
fn driver_err(op: &'static str) -> impl Fn(DriverError) -> Error {
    crate::profile::calls::note(op);
    move |e| driver_error(op, e)
}

/// The crate's error for a failed driver call `op` (not counted: see [`driver_err`]).
fn driver_error(op: &'static str, e: DriverError) -> Error {
    Error::Cuda {
        op,
        msg: format!("{e:?}"),
    }
}
