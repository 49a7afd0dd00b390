//! A CUDA device: driver detection, the per-ordinal registry, context/stream/pool setup,
//! and kernel launches.

use super::compile::{lock, KernelCache, LoadedKernel, Prepared, Target};
use super::disk_cache::DiskCache;
use super::driver_err;
use super::lane::{Lane, Lanes};
use super::memory::{CudaBuffer, Staging};
use crate::config::debug_log;
use crate::profile;
use crate::{Error, Result};
use cudarc::driver::{result as drv, sys as drv_sys, CudaContext, CudaStream, DevicePtr};
use lazyfuse_codegen::cuda::{ReduceLaunch, RenderOptions, BLOCK};
use lazyfuse_codegen::{DType, Kernel, LaunchArgs, ReduceLayout};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Blocks per SM a grid-stride launch is capped at: enough to fill every SM several times
/// over, few enough that each thread loops over many elements of a large array.
const BLOCKS_PER_SM: u64 = 16;
/// Sizes below this use 32-bit index arithmetic.
const INDEX32_LIMIT: usize = 1 << 31;
/// Parameter bytes every CUDA driver accepts; a blob whose declared size the driver cannot
/// report is zero-padded to this so that the driver never reads past it.
const CLASSIC_PARAM_LIMIT: usize = 4096;

/// One CUDA GPU: its context, its streams (one per thread, `lane`), its kernel caches,
/// cuBLAS handle and staging memory.
/// Opened once per ordinal and shared ([`CudaDevice::open`]).
pub struct CudaDevice {
    ordinal: usize,
    name: String,
    compute_capability: (i32, i32),
    sm_count: u32,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) kernels: KernelCache,
    pub(super) staging: Staging,
    /// The streams threads queue work on (`lane`).
    pub(super) lanes: Mutex<Lanes>,
    /// cuBLAS's handle and the stream of its last use.
    pub(super) blas: Mutex<super::blas::BlasState>,
    /// cuFFT's plans and work area, and the stream of their last use.
    pub(super) fft: Mutex<super::fft::FftState>,
    /// The FFT helper kernels (resize, conversions) as IR, built on first use.
    pub(super) fft_helpers: super::fft::HelperKernels,
    /// Generated passes or cuFFT, per transform (`fft::choice`).
    pub(super) fft_choices: super::fft::Choices,
    /// Which other GPUs this one accesses directly (`peer`), asked once per peer.
    pub(super) peers: super::peer::Peers,
    /// State the layers above keep for this device: the CUDA graph states of plain
    /// evaluations (per plan template), the kept half spectra of real filters.
    attached: crate::runtime::attached::Attached,
    /// Threads inside a plain evaluation on this device now (`exec::replay::Evaluating`).
    evaluating: std::sync::atomic::AtomicUsize,
}

/// Completion counters available to one reduction launch (one per row block).
const REDUCE_COUNTERS: usize = 1 << 16;
/// Blocks a reduction launch aims for before it splits rows over several blocks.
const REDUCE_BLOCKS_PER_SM: usize = 8;
/// Fewest values each thread of a split reduction handles.
const REDUCE_MIN_PER_THREAD: usize = 64;
/// ... and in a reduction of fewer than [`REDUCE_SMALL`] values, which is bound by the
/// latency of each thread's serial loads rather than by bandwidth. On the H200 the traced
/// PSF-fit loss at 128 (its last kernel sums 128^2 values) went from 34.8 to 18.6 us, the
/// sum of squares of 2^20 values from 7.7 to 6.4 us; 2^26 values did not change. Below
/// [`REDUCE_TINY`] values each thread takes fewer still (one value a thread at 2^14 and
/// below, doubling to this at 2^17): ncu timed the 128^2 loss sum at 8 a thread (8 blocks)
/// at 11.3 us on the H100, four times the elementwise kernels around it.
const REDUCE_MIN_PER_THREAD_SMALL: usize = 8;
/// See [`REDUCE_MIN_PER_THREAD_SMALL`].
const REDUCE_TINY: usize = 1 << 17;
/// See [`REDUCE_MIN_PER_THREAD_SMALL`].
const REDUCE_SMALL: usize = 1 << 22;

/// Blocks per SM a scan launches (each loops over tiles). Blocks take tiles in order
/// from a counter, so every tile a look-back waits for is held by a running block.
const SCAN_BLOCKS_PER_SM: usize = 4;

/// How a reduction of `m` outputs over `r` values each is launched on `sm_count` SMs, for a
/// kernel whose threads each accumulate `cols` adjacent outputs (`per_thread` of a rendered
/// reduction): (threads per output, chunks per output, blocks along x).
pub(super) fn reduce_split(
    layout: ReduceLayout,
    m: usize,
    r: usize,
    cols: u32,
    sm_count: u32,
) -> (u32, u32, u32) {
    let block = BLOCK as usize;
    let cols = cols.max(1) as usize;
    let tpr = match layout {
        ReduceLayout::Inner => r.max(1).next_power_of_two().min(block),
        // adjacent-column tiles: 16 threads per output measured best on the H200 (axis-0
        // sum of 4096^2 f32: 29.0 us at 16 against 31.1 at 8 and 30.4 at 32)
        ReduceLayout::Outer if cols > 1 => r.max(1).next_power_of_two().min(16),
        ReduceLayout::Outer => 8,
        // scans are launched by tiles (`launch_scan`)
        ReduceLayout::Scan => 1,
    };
    let rb = block / tpr * cols;
    let row_blocks = m.div_ceil(rb).max(1);
    let target = REDUCE_BLOCKS_PER_SM * sm_count.max(1) as usize;
    let mut chunks = 1usize;
    if row_blocks < target && row_blocks <= REDUCE_COUNTERS {
        let values = m.saturating_mul(r);
        let per_thread = if values < REDUCE_TINY {
            (values / (REDUCE_TINY / REDUCE_MIN_PER_THREAD_SMALL))
                .clamp(1, REDUCE_MIN_PER_THREAD_SMALL)
        } else if values < REDUCE_SMALL {
            REDUCE_MIN_PER_THREAD_SMALL
        } else {
            REDUCE_MIN_PER_THREAD
        };
        let by_work = r * cols / (tpr * per_thread);
        chunks = target.div_ceil(row_blocks).min(by_work).clamp(1, 65535);
    }
    let cap = (BLOCKS_PER_SM as usize * sm_count.max(1) as usize).max(1);
    let gx = if chunks > 1 {
        row_blocks
    } else {
        row_blocks.min(cap)
    };
    (tpr as u32, chunks as u32, gx.min(i32::MAX as usize) as u32)
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cuda:{} ({})", self.ordinal, self.name)
    }
}

/// The number of CUDA devices, or why CUDA is unusable. Never panics (cudarc panics when a
/// library or symbol is missing; that is caught here).
fn device_count() -> std::result::Result<usize, String> {
    super::CUDA
        .count
        .get_or_init(|| {
            catch_unwind(|| {
                // SAFETY: `is_culib_present` only tries to dlopen the driver library.
                if !unsafe { drv_sys::is_culib_present() } {
                    return Err("libcuda cannot be loaded (no NVIDIA driver)".to_string());
                }
                match CudaContext::device_count() {
                    Ok(n) if n > 0 => Ok(n as usize),
                    Ok(_) => Err("the driver reports no CUDA device".to_string()),
                    Err(e) => Err(format!("cuInit failed: {e:?}")),
                }
            })
            .unwrap_or_else(|_| Err("the CUDA driver library failed to load".to_string()))
        })
        .clone()
}

/// The stream a CUDA graph is being captured on by this thread, with its device ordinal
/// (`graph::capture`); work of that device queued by this thread goes there.
#[allow(clippy::type_complexity)]
pub(super) const CAPTURE: crate::thread_field::Field<
    super::ThreadCuda,
    std::cell::RefCell<Option<(usize, Arc<CudaStream>)>>,
> = crate::thread_field::Field::new(&super::THREAD, |t| &t.capture);

/// Grid size for `n` elements: enough blocks to cover every element once, capped at
/// `BLOCKS_PER_SM` per SM (the kernels' grid-stride loop covers the rest), at least 1.
#[cfg(test)]
fn grid_size(n: usize, block: u32, per_thread: u32, sm_count: u32) -> u32 {
    grid_size_resident(n, block, per_thread, sm_count, None)
}

/// The grid size for `n` elements (enough blocks to cover every element once, at least 1)
/// for a kernel of which `resident` blocks fit on one SM at once (the
/// driver's occupancy figure from its register use): a large launch is capped at
/// [`grid_waves`] full waves of resident blocks (whole waves, so that the last one fills
/// every slot); without the figure, at [`BLOCKS_PER_SM`] blocks per SM.
pub(super) fn grid_size_resident(
    n: usize,
    block: u32,
    per_thread: u32,
    sm_count: u32,
    resident: Option<u32>,
) -> u32 {
    let per_block = block.max(1) as u64 * per_thread.max(1) as u64;
    let blocks = (n as u64).div_ceil(per_block);
    let per_sm = match resident {
        Some(r) => r.max(1) as u64 * grid_waves(),
        None => BLOCKS_PER_SM,
    };
    let cap = sm_count.max(1) as u64 * per_sm;
    blocks.min(cap).max(1) as u32
}

/// Full waves of resident blocks a large grid-stride launch gets (`LAZYFUSE_GRID_WAVES`,
/// 1 to 64; default 4: more blocks than slots let SMs whose blocks finish early take new
/// ones, which measured faster than one wave on the H200).
fn grid_waves() -> u64 {
    crate::config::CONFIG.grid_waves()
}

/// The render options a launch over `n` elements reading `input_lens` uses.
///
/// An elementwise launch of fewer elements than `sm_count` SMs hold as resident threads
/// with 4 elements each (2048 threads per SM) runs one element per thread
/// ([`RenderOptions::scalar`]): vectorized, it could not give every SM a full complement
/// of threads, and the few threads it has would each work through their vector in series.
pub(super) fn render_options(
    n: usize,
    input_lens: impl IntoIterator<Item = usize>,
    sm_count: u32,
    elementwise: bool,
) -> RenderOptions {
    RenderOptions {
        index32: n < INDEX32_LIMIT && input_lens.into_iter().all(|l| l < INDEX32_LIMIT),
        scalar: elementwise && n < sm_count.max(1) as usize * 2048 * 4,
    }
}

impl CudaDevice {
    /// True when a CUDA driver and at least one GPU are present. Never panics; the answer
    /// is computed once per process.
    pub fn available() -> bool {
        device_count().is_ok()
    }

    /// The number of CUDA devices; 0 when no driver or GPU is usable. Never panics.
    pub fn count() -> usize {
        device_count().unwrap_or(0)
    }

    /// The number of CUDA devices (at least 1), or why CUDA is unusable. Never panics; the
    /// answer is computed once per process.
    pub fn probe() -> std::result::Result<usize, String> {
        device_count()
    }

    /// Opens device `ordinal` (once per process: later calls return the same `Arc`).
    /// `Error::NoCuda` when there is no driver or no such device, `Error::Cuda` when the
    /// driver fails to set it up.
    pub fn open(ordinal: usize) -> Result<&'static CudaDevice> {
        // every device lives for the process: opened once, never dropped, so a reference to
        // it is `'static` and handing one out touches no shared reference count
        let mut devices = lock(&super::CUDA.devices);
        if let Some(d) = devices.iter().find(|d| d.ordinal == ordinal) {
            return Ok(*d);
        }
        let count = device_count().map_err(Error::NoCuda)?;
        if ordinal >= count {
            return Err(Error::NoCuda(format!(
                "CUDA device {ordinal} requested, {count} present"
            )));
        }
        let dev =
            catch_unwind(AssertUnwindSafe(|| CudaDevice::init(ordinal))).unwrap_or_else(|_| {
                Err(Error::NoCuda(format!(
                    "setting up CUDA device {ordinal} panicked inside the driver bindings"
                )))
            })?;
        devices.push(dev);
        Ok(dev)
    }

    fn init(ordinal: usize) -> Result<&'static CudaDevice> {
        let ctx = CudaContext::new(ordinal).map_err(driver_err("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: no buffer exists on this context object yet; buffers order their uses
        // across this device's streams themselves (`lane::Tracking`), which makes cudarc's
        // per-buffer events redundant (module docs); frees are stream-ordered.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_err("cuStreamCreate"))?;
        if ctx.has_async_alloc() {
            raise_release_threshold(&ctx);
        }
        let compute_capability = ctx
            .compute_capability()
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let sm_count = ctx
            .attribute(drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_err("cuDeviceGetAttribute"))?
            .max(1) as u32;
        let name = ctx.name().map_err(driver_err("cuDeviceGetName"))?;
        let target = Target::for_device(compute_capability.0, compute_capability.1);
        let kernels = KernelCache::new(target, DiskCache::from_env());
        debug_log!(
            1,
            "opened cuda:{ordinal} {name} (sm_{}{}, {sm_count} SMs, async alloc {})",
            compute_capability.0,
            compute_capability.1,
            ctx.has_async_alloc()
        );
        Ok(Box::leak(Box::new(CudaDevice {
            ordinal,
            name,
            compute_capability,
            sm_count,
            ctx,
            lanes: Mutex::new(Lanes::new(Arc::new(Lane::new(0, ordinal, stream)))),
            kernels,
            staging: Staging::default(),
            blas: Mutex::default(),
            fft: Mutex::default(),
            fft_helpers: Default::default(),
            fft_choices: Default::default(),
            peers: Default::default(),
            attached: Default::default(),
            evaluating: Default::default(),
        })))
    }

    /// The count of threads inside a plain evaluation on this device (kept by
    /// `exec::replay::Evaluating`).
    pub(crate) fn evaluating(&self) -> &std::sync::atomic::AtomicUsize {
        &self.evaluating
    }

    /// State the layers above keep for this device.
    pub(crate) fn attached(&self) -> &crate::runtime::attached::Attached {
        &self.attached
    }

    /// The stream this thread queues work of this device on: its lane's, or the capture
    /// stream while this thread records a CUDA graph for this device.
    pub(super) fn work_stream(&self) -> Result<Arc<CudaStream>> {
        match self.capture_stream() {
            Some(s) => Ok(s),
            None => Ok(self.lane()?.stream.clone()),
        }
    }

    /// The capture stream while this thread records a CUDA graph for this device.
    pub(super) fn capture_stream(&self) -> Option<Arc<CudaStream>> {
        CAPTURE.with(|c| {
            c.borrow()
                .as_ref()
                .filter(|(o, _)| *o == self.ordinal)
                .map(|(_, s)| s.clone())
        })
    }

    /// This thread's lane, with the buffers it is about to read and write ordered on it
    /// (see `lane::Tracking`; nothing to order while a graph is being recorded: recording
    /// runs nothing).
    pub(super) fn order(&self, reads: &[&CudaBuffer], writes: &[&CudaBuffer]) -> Result<Arc<Lane>> {
        let lane = self.lane()?;
        if CAPTURE.with(|c| c.borrow().is_none()) {
            for b in reads {
                b.use_on(&lane, false)?;
            }
            for b in writes {
                b.use_on(&lane, true)?;
            }
        }
        Ok(lane)
    }

    /// This device as a `'static` reference (for buffers and states that name it).
    pub(super) fn arc(&self) -> Result<&'static CudaDevice> {
        // SAFETY: every `CudaDevice` is made by `init`, which leaks it (`Box::leak`): it is
        // never dropped or moved, so a reference to it is valid for the rest of the process.
        Ok(unsafe { &*(self as *const CudaDevice) })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device name ("NVIDIA H200").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// The on-disk kernel cache directory (`None` when disabled or not creatable). Read
    /// from the environment once, when the device is opened.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.kernels.disk_dir()
    }

    /// Forgets the kernels compiled in this process (the next launch of each loads it from
    /// the disk cache or compiles it again). Meant for tests and long-running processes.
    pub fn clear_kernel_cache(&self) {
        self.kernels.clear();
    }

    /// Waits for all work queued on the device, by every thread (each of its streams);
    /// reports errors of earlier asynchronous work.
    pub fn synchronize(&self) -> Result<()> {
        for lane in self.all_lanes() {
            lane.stream
                .synchronize()
                .map_err(driver_err("cuStreamSynchronize"))?;
        }
        Ok(())
    }

    /// Orders this thread's stream after the work that wrote `buf` (for handing the buffer
    /// to other code on that stream).
    pub(crate) fn order_read(&self, buf: &CudaBuffer) -> Result<()> {
        self.order(&[buf], &[]).map(drop)
    }

    /// Waits for the work this thread queued on the device (its stream).
    pub(crate) fn synchronize_lane(&self) -> Result<()> {
        self.lane()?
            .stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }

    /// The raw `CUstream` handle (as an integer) this thread's kernels, copies and
    /// stream-ordered frees of this device are queued on (its stream, or the one
    /// `lf::with_stream` chose).
    pub fn raw_stream(&self) -> Result<u64> {
        Ok(self.lane()?.stream.cu_stream() as u64)
    }

    /// Queues on this device's stream a wait for all work queued so far on `stream` (a raw
    /// `CUstream` of this device's context; 0 is the legacy default stream). Returns at
    /// once: the host does not wait.
    ///
    /// # Safety
    /// `stream` is a live stream of this device's (primary) context, or 0.
    pub unsafe fn wait_for_stream(&self, stream: u64) -> Result<()> {
        let event = self
            .ctx
            .new_event(None)
            .map_err(driver_err("cuEventCreate"))?;
        // SAFETY: `event` is live (dropped after the wait is queued, which the driver allows:
        // its resources are released once the wait has completed); `stream` is live per the
        // caller's contract.
        unsafe { drv::event::record(event.cu_event(), stream as drv_sys::CUstream) }
            .map_err(driver_err("cuEventRecord"))?;
        let lane = self.lane()?;
        // SAFETY: this thread's stream and the event recorded above are live.
        unsafe {
            drv::stream::wait_event(
                lane.stream.cu_stream(),
                event.cu_event(),
                drv_sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(driver_err("cuStreamWaitEvent"))
    }

    /// Queues on `stream` (a raw `CUstream` of this device's context, 0 the legacy default
    /// stream) a wait for all work queued so far on this device's stream.
    ///
    /// # Safety
    /// As [`CudaDevice::wait_for_stream`].
    pub(crate) unsafe fn order_stream_after(&self, stream: u64) -> Result<()> {
        let event = self
            .lane()?
            .stream
            .record_event(None)
            .map_err(driver_err("cuEventRecord"))?;
        // SAFETY: the event is live; `stream` is live per the caller's contract.
        unsafe {
            drv::stream::wait_event(
                stream as drv_sys::CUstream,
                event.cu_event(),
                drv_sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(driver_err("cuStreamWaitEvent"))
    }

    /// Waits for all work of every stream of this device's context (other libraries'
    /// streams included, when they share the primary context as PyTorch and CuPy do).
    pub(crate) fn synchronize_context(&self) -> Result<()> {
        self.ctx
            .synchronize()
            .map_err(driver_err("cuCtxSynchronize"))
    }

    /// A timing event recorded on this thread's stream now (for the profiler).
    pub(crate) fn timing_event(&self) -> Result<TimingEvent> {
        self.work_stream()?
            .record_event(Some(drv_sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("cuEventRecord"))
    }

    /// Runs `kernel` over `args.shape`, reading `inputs`, into fresh output buffers of
    /// `args.len()` elements each. Asynchronous: returns once the launch is queued. Expects
    /// a normalized kernel (as `Builder::finish` returns); equal kernels share one compile.
    pub fn run_kernel(
        &self,
        kernel: &Kernel,
        inputs: &[&CudaBuffer],
        args: &LaunchArgs,
    ) -> Result<Vec<CudaBuffer>> {
        Ok(self
            .run_kernel_shared(&Arc::new(kernel.clone()), inputs, args)?
            .into_vec())
    }

    /// [`CudaDevice::run_kernel`] of a plan's shared kernel: launches of one `Arc` find
    /// their loaded kernel and argument layout without hashing or comparing the IR.
    pub(crate) fn run_kernel_shared(
        &self,
        kernel: &Arc<Kernel>,
        inputs: &[&CudaBuffer],
        args: &LaunchArgs,
    ) -> Result<SmallVec<[CudaBuffer; 2]>> {
        self.run_kernel_reuse(kernel, inputs, args, None)?
            .into_iter()
            .map(|b| b.ok_or_else(|| Error::internal("run_kernel", "output not allocated")))
            .collect()
    }

    /// [`CudaDevice::run_kernel`], writing output `out` into input `slot`'s buffer when
    /// `reuse` is `Some((slot, out))` (the caller guarantees that the kernel reads that input
    /// only at the index it writes, and that nobody else observes the buffer). The entry of
    /// output `out` is then `None`; every other output is freshly allocated.
    pub(crate) fn run_kernel_reuse(
        &self,
        kernel: &Arc<Kernel>,
        inputs: &[&CudaBuffer],
        args: &LaunchArgs,
        reuse: Option<(usize, usize)>,
    ) -> Result<SmallVec<[Option<CudaBuffer>; 2]>> {
        let prepared = self.check_and_load(kernel, inputs, args, reuse)?;
        let me = self.arc()?;
        // inputs are read on this thread's stream, an input written in place is written
        match reuse {
            None => self.order(inputs, &[])?,
            Some((slot, _)) => {
                let mut r: SmallVec<[&CudaBuffer; 4]> = SmallVec::new();
                let mut w: SmallVec<[&CudaBuffer; 1]> = SmallVec::new();
                for (i, b) in inputs.iter().enumerate() {
                    if i == slot {
                        w.push(b)
                    } else {
                        r.push(b)
                    }
                }
                self.order(&r, &w)?
            }
        };
        let n = kernel.out_len(args);
        let outputs: SmallVec<[Option<CudaBuffer>; 2]> = kernel
            .outputs
            .iter()
            .enumerate()
            .map(|(j, &d)| match reuse {
                Some((_, out)) if out == j => Ok(None),
                _ => self.alloc(me, d, n).map(Some),
            })
            .collect::<Result<_>>()?;
        let Some((p, opts)) = prepared else {
            return Ok(outputs); // nothing to compute
        };
        if let Some(red) = kernel.reduce {
            let outs: SmallVec<[CudaBuffer; 2]> = outputs.into_iter().flatten().collect();
            self.launch_reduce(me, &p, &opts, kernel, red, inputs, &outs, args)?;
            return Ok(outs.into_iter().map(Some).collect());
        }
        let in_ptrs: SmallVec<[u64; 8]> = inputs.iter().map(|b| b.device_ptr()).collect();
        let out_ptrs: SmallVec<[u64; 4]> = outputs
            .iter()
            .map(|b| match (b, reuse) {
                (Some(b), _) => b.device_ptr(),
                (None, Some((slot, _))) => in_ptrs[slot],
                (None, None) => 0, // unreachable: every output is allocated without reuse
            })
            .collect();
        let blob = p.pack(
            kernel,
            &opts,
            &in_ptrs,
            &out_ptrs,
            args,
            &ReduceLaunch::default(),
        )?;
        self.launch(&p.loaded, blob, n)?;
        Ok(outputs)
    }

    /// Launches the elementwise `kernel` over raw device addresses of this context: input
    /// `j` at `inputs[j].0` holding `inputs[j].1` elements of the kernel's dtype, and
    /// outputs of `args.len()` elements each (which may be an input's address when the
    /// kernel reads it only at the index it writes). For library steps that address parts
    /// of buffers they own (the FFT helpers); compiled and cached like any kernel.
    pub(super) fn launch_raw(
        &self,
        kernel: &Arc<Kernel>,
        inputs: &[(u64, usize)],
        outputs: &[u64],
        args: &LaunchArgs,
    ) -> Result<()> {
        let n = kernel.out_len(args);
        if kernel.reduce.is_some()
            || inputs.len() != kernel.inputs.len()
            || outputs.len() != kernel.outputs.len()
        {
            return Err(Error::internal(
                "launch_raw",
                format!(
                    "{} inputs and {} outputs for a kernel of {} and {}",
                    inputs.len(),
                    outputs.len(),
                    kernel.inputs.len(),
                    kernel.outputs.len()
                ),
            ));
        }
        if n == 0 {
            return Ok(());
        }
        let opts = render_options(
            args.len().max(n),
            inputs.iter().map(|&(_, len)| len),
            self.sm_count,
            true,
        );
        let p = self.kernels.prepared(&self.ctx, kernel, &opts)?;
        let in_ptrs: SmallVec<[u64; 8]> = inputs.iter().map(|&(ptr, _)| ptr).collect();
        let blob = p.pack(
            kernel,
            &opts,
            &in_ptrs,
            outputs,
            args,
            &ReduceLaunch::default(),
        )?;
        self.launch(&p.loaded, blob, n)
    }

    /// Checks `inputs` (device, dtype, count) and the reuse request against `kernel`, and
    /// loads (compiling on a miss) the kernel for this launch. `None` when `args` computes
    /// no element.
    #[allow(clippy::type_complexity)]
    pub(super) fn check_and_load(
        &self,
        kernel: &Arc<Kernel>,
        inputs: &[&CudaBuffer],
        args: &LaunchArgs,
        reuse: Option<(usize, usize)>,
    ) -> Result<Option<(Prepared, RenderOptions)>> {
        if inputs.len() != kernel.inputs.len() {
            return Err(Error::internal(
                "run_kernel",
                format!(
                    "{} inputs given, kernel takes {}",
                    inputs.len(),
                    kernel.inputs.len()
                ),
            ));
        }
        for (i, (b, &d)) in inputs.iter().zip(&kernel.inputs).enumerate() {
            if b.device().ordinal != self.ordinal {
                return Err(Error::DeviceMismatch {
                    op: "run_kernel",
                    a: format!("cuda:{}", self.ordinal),
                    b: format!("cuda:{}", b.device().ordinal),
                });
            }
            if b.dtype() != d {
                return Err(Error::internal(
                    "run_kernel",
                    format!("input {i} is {}, kernel reads {d}", b.dtype()),
                ));
            }
        }
        let n = kernel.out_len(args);
        if let Some((slot, out)) = reuse {
            let ok = kernel.reduce.is_none()
                && inputs.get(slot).is_some_and(|b| b.len() == n)
                && kernel.outputs.get(out) == kernel.inputs.get(slot);
            if !ok {
                return Err(Error::internal(
                    "run_kernel",
                    format!("input {slot} cannot hold output {out} of {n} elements"),
                ));
            }
        }
        if n == 0 {
            return Ok(None);
        }
        let opts = render_options(
            args.len().max(n),
            inputs.iter().map(|b| b.len()),
            self.sm_count,
            kernel.reduce.is_none(),
        );
        let p = self.kernels.prepared(&self.ctx, kernel, &opts)?;
        Ok(Some((p, opts)))
    }

    /// Launches reduction kernel `k` into `outputs`, split as [`reduce_split`] decides
    /// (partials of a split row in pool memory freed, stream-ordered, after the launch).
    #[allow(clippy::too_many_arguments)]
    fn launch_reduce(
        &self,
        me: &'static CudaDevice,
        p: &Prepared,
        opts: &RenderOptions,
        kernel: &Kernel,
        red: lazyfuse_codegen::Reduce,
        inputs: &[&CudaBuffer],
        outputs: &[CudaBuffer],
        args: &LaunchArgs,
    ) -> Result<()> {
        if red.layout == ReduceLayout::Scan {
            return self.launch_scan(me, p, opts, kernel, red, inputs, outputs, args);
        }
        let n = kernel.out_len(args);
        let (tpr, chunks, gx) = self.reduce_geometry(p, kernel, red, args);
        let mut launch = ReduceLaunch {
            threads_per_output: tpr,
            chunks,
            ..ReduceLaunch::default()
        };
        let mut partials = Vec::new();
        if chunks > 1 {
            let vd = kernel.values[red.value as usize].dtype;
            let ws = self.alloc(me, vd, n * chunks as usize)?;
            launch.workspace = ws.device_ptr();
            partials.push(ws);
            if red.op.is_arg() {
                let wsi = self.alloc(me, DType::I64, n * chunks as usize)?;
                launch.workspace_idx = wsi.device_ptr();
                partials.push(wsi);
            }
            launch.counters = self.reduce_counters()?;
        }
        let blob = reduce_blob(p, opts, kernel, inputs, outputs, args, &launch)?;
        let k = &*p.loaded;
        self.launch_at(k, blob, (gx, chunks), k.rendered.block.max(1))?;
        drop(partials);
        Ok(())
    }

    /// How a reduction launch of `p` (`kernel`, reducing as `red`, not a scan) over `args`
    /// is split: (threads per output, chunks per output, blocks along x), see
    /// [`reduce_split`]. With more than one chunk the launch needs `out_len * chunks`
    /// partials and zeroed counters for its `gx` row blocks.
    pub(super) fn reduce_geometry(
        &self,
        p: &Prepared,
        kernel: &Kernel,
        red: lazyfuse_codegen::Reduce,
        args: &LaunchArgs,
    ) -> (u32, u32, u32) {
        let n = kernel.out_len(args);
        let r = args.shape.get(1).copied().unwrap_or(0);
        let cols = p.loaded.rendered.per_thread;
        reduce_split(red.layout, n, r, cols, self.sm_count)
    }

    /// A buffer of `len` elements of `dtype` with every byte zero (cleared on this thread's
    /// work stream, in order before any later launch there).
    pub(super) fn alloc_zeroed(&self, dtype: DType, len: usize) -> Result<CudaBuffer> {
        let buf = self.alloc(self.arc()?, dtype, len)?;
        // SAFETY: `buf` holds `len` elements of `dtype`, all of which this clears, on the
        // stream its later users are ordered on (the caller's work stream).
        unsafe { self.memset_zero(buf.device_ptr(), len * dtype.size()) }?;
        Ok(buf)
    }

    /// Clears `bytes` bytes at device address `ptr` on this thread's work stream (a memset
    /// node while it records a graph).
    ///
    /// # Safety
    /// `ptr..ptr + bytes` must lie inside a live buffer of this context that the caller
    /// owns, alive until the memset has run (buffers are freed in stream order), and whose
    /// later users are ordered on the same stream.
    pub(super) unsafe fn memset_zero(&self, ptr: u64, bytes: usize) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        // SAFETY: the caller's contract: `ptr..ptr + bytes` is memory of a live buffer of
        // this context, cleared in stream order before its later users.
        unsafe { drv::memset_d8_async(ptr, 0, bytes, self.work_stream()?.cu_stream()) }
            .map_err(driver_err("cuMemsetD8Async"))
    }

    /// The tiles of a scan launch over `args` (`BLOCK * per_thread` elements of each row)
    /// and its grid: at most [`SCAN_BLOCKS_PER_SM`] blocks per SM. Its workspace is `2 *
    /// tiles` values and `tiles + 1` zeroed I64 tile states.
    pub(super) fn scan_geometry(&self, p: &Prepared, args: &LaunchArgs) -> (usize, u32) {
        let m = args.shape.first().copied().unwrap_or(0);
        let r = args.shape.get(1).copied().unwrap_or(0);
        let tile = BLOCK as usize * p.loaded.rendered.per_thread.max(1) as usize;
        let tiles = m * r.div_ceil(tile);
        let grid = tiles.min(SCAN_BLOCKS_PER_SM * self.sm_count.max(1) as usize) as u32;
        (tiles, grid)
    }

    /// Launches scan kernel `k`: tiles of `BLOCK * per_thread` elements of each row, taken in
    /// order by at most [`SCAN_BLOCKS_PER_SM`] blocks per SM, with a zeroed workspace of
    /// tile states and a tile counter, and room for two values per tile (freed,
    /// stream-ordered, after the launch).
    #[allow(clippy::too_many_arguments)]
    fn launch_scan(
        &self,
        me: &'static CudaDevice,
        p: &Prepared,
        opts: &RenderOptions,
        kernel: &Kernel,
        red: lazyfuse_codegen::Reduce,
        inputs: &[&CudaBuffer],
        outputs: &[CudaBuffer],
        args: &LaunchArgs,
    ) -> Result<()> {
        let (tiles, grid) = self.scan_geometry(p, args);
        if tiles == 0 {
            return Ok(());
        }
        let vd = kernel.values[red.value as usize].dtype;
        let values = self.alloc(me, vd, 2 * tiles)?;
        let states = self.alloc(me, DType::I64, tiles + 1)?;
        // SAFETY: `states` holds `tiles + 1` I64 values, zeroed on the stream the launch
        // below runs on (and freed after it, in stream order).
        unsafe { self.memset_zero(states.device_ptr(), (tiles + 1) * 8) }?;
        let launch = ReduceLaunch {
            threads_per_output: 1,
            chunks: 1,
            workspace: values.device_ptr(),
            workspace_idx: states.device_ptr(),
            counters: 0,
        };
        let blob = reduce_blob(p, opts, kernel, inputs, outputs, args, &launch)?;
        let k = &*p.loaded;
        self.launch_at(k, blob, (grid, 1), k.rendered.block.max(1))?;
        drop((values, states));
        Ok(())
    }

    /// The device pointer of this thread's stream's zeroed reduction counters (allocated
    /// on first use; reductions on one stream run in order, so they share them).
    fn reduce_counters(&self) -> Result<u64> {
        let lane = self.lane()?;
        if let Some(c) = lane.counters.get() {
            let (ptr, _sync) = c.device_ptr(&lane.stream);
            return Ok(ptr);
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let zeros = lane
            .stream
            .alloc_zeros::<i32>(REDUCE_COUNTERS)
            .map_err(driver_err("cuMemsetD8Async"))?;
        let (ptr, _sync) = lane.counters.get_or_init(|| zeros).device_ptr(&lane.stream);
        Ok(ptr)
    }

    /// Launches `k` over `n` elements with the packed argument struct `blob`.
    pub(super) fn launch(&self, k: &LoadedKernel, blob: Vec<u8>, n: usize) -> Result<()> {
        let (blob, grid, block) = self.launch_shape(k, blob, n)?;
        self.launch_at(k, blob, (grid, 1), block)
    }

    /// Launches `k` on a `grid` of `block`-thread blocks with the checked blob.
    pub(super) fn launch_at(
        &self,
        k: &LoadedKernel,
        mut blob: Vec<u8>,
        grid: (u32, u32),
        block: u32,
    ) -> Result<()> {
        debug_log!(
            4,
            "launch {} grid={grid:?} block={block} per_thread={} args={}B",
            k.rendered.entry,
            k.rendered.per_thread,
            blob.len()
        );
        if profile::on() {
            profile::note_launch(grid, block, k.rendered.per_thread, k.regs);
        }
        let _range = crate::nvtx::range_with(|| k.rendered.entry.clone());
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let mut params = [blob.as_mut_ptr() as *mut c_void];
        // SAFETY: the function takes exactly one by-value parameter whose layout pack_args
        // wrote (its size checked against the driver's when reported, else the blob is
        // padded to the classic 4 KiB limit so no read leaves it); the driver copies the
        // parameter at this call, so `blob` may be dropped afterwards. Every device pointer
        // in it belongs to a live buffer of this context: inputs are borrowed by the caller
        // and any later free of them is ordered after this launch on the same stream;
        // outputs hold `n` elements, which the kernel's grid-stride loop writes exactly.
        let stream = self.work_stream()?;
        crate::profile::calls::clock("cuLaunchKernel", || unsafe {
            drv::launch_kernel(
                k.func.cu_function(),
                (grid.0, grid.1, 1),
                (block, 1, 1),
                0,
                stream.cu_stream(),
                &mut params,
            )
        })
        .map_err(driver_err("cuLaunchKernel"))
    }

    /// The checked (and, where the driver cannot report the parameter size, padded)
    /// argument blob of a launch of `k` over `n` elements, its grid and its block size.
    pub(super) fn launch_shape(
        &self,
        k: &LoadedKernel,
        blob: Vec<u8>,
        n: usize,
    ) -> Result<(Vec<u8>, u32, u32)> {
        let blob = checked_blob(k, blob)?;
        let block = k.rendered.block.max(1);
        let grid = grid_size_resident(
            n,
            block,
            k.rendered.per_thread,
            self.sm_count,
            k.blocks_per_sm,
        );
        Ok((blob, grid, block))
    }
}

/// The argument blob of a launch of `k`, checked against the size the driver reports for
/// the kernel's parameter (or, where it reports none, zero-padded to the classic limit).
pub(super) fn checked_blob(k: &LoadedKernel, mut blob: Vec<u8>) -> Result<Vec<u8>> {
    match k.param_size {
        Some(size) if size != blob.len() => {
            return Err(Error::internal(
                "run_kernel",
                format!(
                    "kernel {} declares {size} parameter bytes, pack_args gave {}",
                    k.rendered.entry,
                    blob.len()
                ),
            ))
        }
        Some(_) => {}
        None if blob.len() < CLASSIC_PARAM_LIMIT => blob.resize(CLASSIC_PARAM_LIMIT, 0),
        None => {}
    }
    Ok(blob)
}

/// A CUDA event with timing enabled, recorded on a device's stream.
pub(crate) type TimingEvent = cudarc::driver::CudaEvent;

/// The device time between two recorded timing events (waits for both to complete).
pub(crate) fn event_elapsed(start: &TimingEvent, end: &TimingEvent) -> Result<std::time::Duration> {
    let ms = start
        .elapsed_ms(end)
        .map_err(driver_err("cuEventElapsedTime"))?;
    Ok(std::time::Duration::from_secs_f64(
        f64::from(ms.max(0.0)) / 1e3,
    ))
}

/// Keeps freed memory in the default pool instead of returning it to the driver at every
/// synchronization (measured: 0.7 ms against 110 ms for 200 alloc/free/sync cycles).
fn raise_release_threshold(ctx: &CudaContext) {
    // SAFETY: `cu_device` is the device of a live context.
    let pool = match unsafe { drv::device::get_default_mem_pool(ctx.cu_device()) } {
        Ok(p) => p,
        Err(e) => {
            debug_log!(1, "cannot get the default memory pool: {e:?}");
            return;
        }
    };
    let mut threshold: u64 = u64::MAX;
    // SAFETY: the release-threshold attribute is a cuuint64_t, which `threshold` is.
    let r = unsafe {
        drv::mem_pool::set_attribute(
            pool,
            drv_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut threshold as *mut u64 as *mut c_void,
        )
    };
    if let Err(e) = r {
        debug_log!(1, "cannot raise the memory pool release threshold: {e:?}");
    }
}

/// The checked argument blob of a reduction or scan launch of `p` over `inputs` into
/// `outputs`.
fn reduce_blob(
    p: &Prepared,
    opts: &RenderOptions,
    kernel: &Kernel,
    inputs: &[&CudaBuffer],
    outputs: &[CudaBuffer],
    args: &LaunchArgs,
    launch: &ReduceLaunch,
) -> Result<Vec<u8>> {
    let in_ptrs: SmallVec<[u64; 8]> = inputs.iter().map(|b| b.device_ptr()).collect();
    let out_ptrs: SmallVec<[u64; 4]> = outputs.iter().map(|b| b.device_ptr()).collect();
    let blob = p.pack(kernel, opts, &in_ptrs, &out_ptrs, args, launch)?;
    checked_blob(&p.loaded, blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_splits() {
        // full reduction of 2^26: one row, split over ~8 blocks per SM
        assert_eq!(
            reduce_split(ReduceLayout::Inner, 1, 1 << 26, 1, 132),
            (256, 1056, 1)
        );
        // rows of 4096 already give 4096 blocks: no split
        assert_eq!(
            reduce_split(ReduceLayout::Inner, 4096, 4096, 1, 132),
            (256, 1, 2112)
        );
        // axis-0 mean of 4096^2: 128 row blocks of 32 columns, 8 chunks each
        assert_eq!(
            reduce_split(ReduceLayout::Outer, 4096, 4096, 1, 132),
            (8, 8, 128)
        );
        // ... and with 4 adjacent columns per thread: 64 row blocks of 64, 16 chunks each
        assert_eq!(
            reduce_split(ReduceLayout::Outer, 4096, 4096, 4, 132),
            (16, 16, 64)
        );
        // few reduced rows: no more threads per output than rows
        assert_eq!(reduce_split(ReduceLayout::Outer, 1 << 20, 3, 4, 132).0, 4);
        // short rows share a block; tiny work is never split
        assert_eq!(
            reduce_split(ReduceLayout::Inner, 1000, 3, 1, 132),
            (4, 1, 16)
        );
        assert_eq!(
            reduce_split(ReduceLayout::Inner, 1, 100, 1, 132),
            (128, 1, 1)
        );
        assert_eq!(reduce_split(ReduceLayout::Inner, 0, 0, 1, 0).1, 1);
        // a small full reduction (128^2 values) is latency-bound: 64 blocks of one value a
        // thread; 2^16 values take 4 a thread, 2^17 and more 8 (2^20: 512 blocks)
        assert_eq!(
            reduce_split(ReduceLayout::Inner, 1, 1 << 14, 1, 132),
            (256, 64, 1)
        );
        assert_eq!(reduce_split(ReduceLayout::Inner, 1, 1 << 16, 1, 132).1, 64);
        assert_eq!(reduce_split(ReduceLayout::Inner, 1, 1 << 17, 1, 132).1, 64);
        assert_eq!(reduce_split(ReduceLayout::Inner, 1, 1 << 20, 1, 132).1, 512);
        assert_eq!(reduce_split(ReduceLayout::Inner, 1, 100, 1, 132).1, 1);
    }

    #[test]
    fn grid_covers_or_caps() {
        // H200: 132 SMs, cap 2112 blocks.
        assert_eq!(grid_size(1, 256, 1, 132), 1);
        assert_eq!(grid_size(256, 256, 1, 132), 1);
        assert_eq!(grid_size(257, 256, 1, 132), 2);
        assert_eq!(grid_size(1000, 256, 4, 132), 1);
        assert_eq!(grid_size(1025, 256, 4, 132), 2);
        assert_eq!(grid_size(1 << 30, 256, 1, 132), 132 * 16);
        assert_eq!(grid_size(usize::MAX, 1024, 8, 1), 16);
        assert_eq!(grid_size(10, 0, 0, 0), 10);
        assert_eq!(grid_size(100, 0, 0, 0), 16);
        // with the occupancy figure: four full waves of resident blocks at most (default)
        assert_eq!(
            grid_size_resident(1 << 30, 256, 4, 132, Some(8)),
            132 * 8 * 4
        );
        assert_eq!(grid_size_resident(1 << 20, 256, 4, 132, Some(8)), 1024);
        assert_eq!(grid_size_resident(1 << 30, 256, 4, 132, Some(0)), 132 * 4);
    }

    #[test]
    fn index32_only_when_everything_fits() {
        assert!(render_options(10, [5, 7], 132, true).index32);
        assert!(render_options((1 << 31) - 1, [], 132, true).index32);
        assert!(!render_options(1 << 31, [], 132, true).index32);
        assert!(!render_options(10, [5, 1 << 31], 132, true).index32);
        // one element per thread below 132 SMs x 2048 threads x 4 elements, elementwise only
        assert!(render_options(132 * 2048 * 4 - 1, [], 132, true).scalar);
        assert!(!render_options(132 * 2048 * 4, [], 132, true).scalar);
        assert!(!render_options(10, [], 132, false).scalar);
    }

    #[test]
    fn available_never_panics_and_agrees_with_open() {
        let avail = CudaDevice::available();
        match CudaDevice::open(0) {
            Ok(d) => {
                assert!(avail);
                assert!(std::ptr::eq(d, CudaDevice::open(0).unwrap()));
            }
            Err(Error::NoCuda(_)) => assert!(!avail),
            Err(e) => panic!("unexpected {e}"),
        }
        assert!(matches!(CudaDevice::open(1 << 20), Err(Error::NoCuda(_))));
    }

    /// The launch path alone (no renderer): a hand-written kernel taking one by-value struct.
    #[test]
    fn handwritten_kernel_launch() {
        use super::super::compile::{compile_for, load_image};
        use lazyfuse_codegen::cuda::Rendered;
        use lazyfuse_codegen::{DType, HostBuf};
        let d = match CudaDevice::open(0) {
            Ok(d) => d,
            Err(e) if std::env::var("LAZYFUSE_TEST_CUDA").is_ok_and(|v| v == "1") => {
                panic!("LAZYFUSE_TEST_CUDA=1 but no GPU: {e}")
            }
            Err(_) => return,
        };
        let source = r#"
struct __align__(8) lf_args { const float* in0; float* out0; long long n; float scale; };
extern "C" __global__ void __launch_bounds__(256) lf_hand_scale(const lf_args a) {
    for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < (unsigned long long)a.n;
         i += (unsigned long long)gridDim.x * 256ull)
        a.out0[i] = a.in0[i] * a.scale;
}
"#;
        let r = Rendered {
            source: source.into(),
            entry: "lf_hand_scale".into(),
            block: 256,
            per_thread: 1,
        };
        let (maj, min) = d.compute_capability();
        let img = compile_for(&Target::for_device(maj, min), &r, &None).unwrap();
        let k = load_image(&d.ctx, &img, &r).unwrap();
        assert_eq!(k.param_size, Some(32));
        let me = d.arc().unwrap();
        for n in [1usize, 255, 257, 1 << 22] {
            let x: Vec<f32> = (0..n).map(|i| i as f32 - 3.0).collect();
            let input = d.upload(&HostBuf::F32(x.clone())).unwrap();
            let out = d.alloc(me, DType::F32, n).unwrap();
            let mut blob = Vec::new();
            blob.extend_from_slice(&input.device_ptr().to_le_bytes());
            blob.extend_from_slice(&out.device_ptr().to_le_bytes());
            blob.extend_from_slice(&(n as i64).to_le_bytes());
            blob.extend_from_slice(&1.5f32.to_le_bytes());
            blob.extend_from_slice(&[0; 4]);
            assert!(
                d.launch(&k, blob[..24].to_vec(), n).is_err(),
                "short blob rejected"
            );
            d.launch(&k, blob, n).unwrap();
            drop(input); // freed after the kernel on the stream
            let HostBuf::F32(got) = d.download(&out, 0, n).unwrap() else {
                panic!("dtype")
            };
            assert!(got.iter().zip(&x).all(|(g, x)| *g == x * 1.5), "n={n}");
        }
    }
}
