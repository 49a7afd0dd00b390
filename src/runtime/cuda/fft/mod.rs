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
//! # Where the parts live
//! [`plan`] turns a spec and shapes into a `Program` (plans, executions, helper launches)
//! as plain data, tested on the CPU against an emulator of cuFFT's layouts; [`helpers`]
//! builds the helper kernels as kernel IR, compiled, disk-cached and launched like fused
//! kernels (`CudaDevice::launch_raw`) and tested on the CPU interpreter; this module caches
//! plans and runs programs. A 2-D transform of an input known to be zero outside some
//! columns (`FftSpec::support`) transforms those columns, then the rows (`Step::Zero`
//! clears the output's other columns when the input may not be overwritten).
//!
//! # Plans, work areas, ordering
//! Plans live in a per-device cache of at most [`PLAN_CACHE_CAP`] entries keyed by type,
//! sizes, layout and batch, least recently used evicted first; a CUDA graph recorded with a
//! plan's executions keeps that plan alive until the graph is dropped (its nodes use the
//! plan's device tables), so eviction only drops the cache's reference. cuFFT plans are not
//! thread-safe, so one mutex per device guards the cache and is held through every
//! execution. Plans are bound to the calling thread's stream at each execution
//! (`cufftSetStream`) and made without automatic work areas: every execution uses one
//! scratch area per device, grown to the largest need (executions on different streams are
//! ordered by the state's last-user stream, `lane::order_after`; a recorded graph keeps the
//! area it was recorded with), so cached plans hold no work memory and a recorded graph
//! holds no memory nodes for work areas. Every call (helper kernels, copies, cuFFT kernels,
//! frees) is queued on the thread's stream, after the input's writer (`CudaDevice::order`),
//! so the transform is ordered after the kernels that wrote its input and before those that
//! read its output; nothing here synchronizes except a plan eviction.

mod choice;
pub(crate) use choice::Choices;
mod generated;
pub(crate) use generated::{fused_dtypes, Epilogue, Mid, Prologue};
pub(super) use generated::{PassLaunch, PassSet};
mod helpers;
pub(super) use helpers::HelperKernels;
mod plan;

use super::compile::lock;
use super::device::CudaDevice;
use super::driver_err;
use super::lane::Lane;
use super::memory::CudaBuffer;
use crate::graph::{FftKind, FftSpec};
use crate::{Error, Result};
use cudarc::cufft::{result as cufft, sys as cufft_sys};
use cudarc::driver::result as drv;
use lazyfuse_codegen::DType;
use plan::*;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Most plans kept per device.
const PLAN_CACHE_CAP: usize = 64;

/// Wraps a cuFFT error into the crate's error, naming the call.
/// Like `driver_err`: built right after each cuFFT call returns, so it counts the call.
fn cufft_err(op: &'static str) -> impl Fn(cufft::CufftError) -> Error {
    crate::profile::calls::note(op);
    move |e| Error::Cuda {
        op,
        msg: format!("{:?}", e.0),
    }
}

/// Whether libcufft can be loaded (checked once; never panics).
fn cufft_present() -> bool {
    *super::CUDA.cufft.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the library candidates.
        catch_unwind(|| unsafe { cufft_sys::is_culib_present() }).unwrap_or(false)
    })
}

// ---------------------------------------------------------------------------------------
// Plans and the per-device state
// ---------------------------------------------------------------------------------------

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

/// What a recorded CUDA graph's FFT nodes use, kept alive by the graph after the device's
/// FFT state may have dropped it: a cuFFT plan (its nodes use the plan's device tables) or
/// the scratch area its executions ran in.
pub(crate) struct PinnedPlan(#[allow(dead_code)] Pin);

impl PinnedPlan {
    /// Orders a replay on `lane` of the graph that pins this after the other streams' uses
    /// of the work area it pins (a plan is only read by its executions).
    pub(crate) fn order_on(&self, lane: &Arc<Lane>) -> Result<()> {
        match &self.0 {
            Pin::Scratch(b) => b.use_on(lane, true),
            Pin::Plan(_) => Ok(()),
        }
    }
}

/// What a [`PinnedPlan`] holds.
enum Pin {
    /// A plan the cache may evict.
    Plan(Arc<Plan>),
    /// A work area a larger one may replace.
    Scratch(Arc<CudaBuffer>),
}

/// While this thread records a CUDA graph: the plans its FFTs executed (goes with the
/// capture, `ThreadCuda`).
const PINS: crate::thread_field::Field<
    super::ThreadCuda,
    std::cell::RefCell<Option<Vec<PinnedPlan>>>,
> = crate::thread_field::Field::new(&super::THREAD, |t| &t.pins);

/// Starts collecting the plans this thread's FFTs execute (a graph capture begins).
pub(crate) fn begin_pins() {
    PINS.with(|p| *p.borrow_mut() = Some(Vec::new()));
}

/// The plans collected since [`begin_pins`] (the capture ended); collection stops.
pub(crate) fn take_pins() -> Vec<PinnedPlan> {
    PINS.with(|p| p.borrow_mut().take()).unwrap_or_default()
}

/// The FFT state of one device (a field of the device, behind its mutex): its plans and the
/// work area every execution uses.
#[derive(Default)]
pub(crate) struct FftState {
    /// Plans by the stream they run on (its lane id) and layout: a plan's executions on one
    /// stream are ordered, and streams never share a plan.
    plans: HashMap<(usize, PlanKey), Arc<Plan>>,
    clock: u64,
    /// cuFFT's work area of each stream (by lane id), allocated on that stream and grown to
    /// the largest need seen: no allocation per execution, and no memory nodes in recorded
    /// CUDA graphs. A graph replayed on another stream than the one it was recorded on
    /// orders itself after the area's other users (`PinnedPlan::order_on`).
    scratch: HashMap<usize, Arc<CudaBuffer>>,
    /// Twiddle tables of the generated passes by length and dtype (`generated`), kept
    /// while the device lives: recorded CUDA graphs read them.
    tables: HashMap<(usize, DType), Arc<CudaBuffer>>,
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
        let out = self.alloc(me, out_dtype, out_len)?;
        self.fft_into(spec, input, &out, in_shape, out_shape, false)?;
        Ok(out)
    }

    /// [`CudaDevice::fft`] into the existing buffer `out` (of `out_shape`'s length and the
    /// result's dtype), queued on the current work stream (the device's stream, or the
    /// capture stream while a CUDA graph is being recorded on this thread). With
    /// `clobber_input` nothing reads `input` after the transform, which may then overwrite
    /// it (a C2R of an exactly Hermitian spectrum runs on it without a working copy).
    pub(crate) fn fft_into(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        out: &CudaBuffer,
        in_shape: &[usize],
        out_shape: &[usize],
        clobber_input: bool,
    ) -> Result<()> {
        let prec = check(spec, input.dtype(), input.len(), in_shape, out_shape)?;
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
        if self.fft_generated(spec, input, out, in_shape, out_shape, prec)? {
            return Ok(());
        }
        self.cufft_into(spec, input, out, in_shape, out_shape, clobber_input, prec)
    }

    /// The cuFFT part of [`CudaDevice::fft_into`]: `out` checked by the caller.
    #[allow(clippy::too_many_arguments)]
    fn cufft_into(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        out: &CudaBuffer,
        in_shape: &[usize],
        out_shape: &[usize],
        clobber_input: bool,
        prec: Precision,
    ) -> Result<()> {
        let me = self.arc()?;
        if !cufft_present() {
            return Err(Error::NoCuda("cuFFT library not found".into()));
        }
        let prog = program(
            spec,
            prec,
            in_shape,
            out_shape,
            clobber_input,
            crate::config::pruned_fft_min_elements(),
        );
        let work = match prog.work_len {
            0 => None,
            n => Some(self.alloc(me, prec.complex_dtype(), n)?),
        };
        let ptrs = Ptrs {
            input: input.device_ptr(),
            output: out.device_ptr(),
            work: work.as_ref().map_or(0, |w| w.device_ptr()),
        };
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        // the buffers on this thread's stream, after their writers
        let lane = if clobber_input {
            self.order(&[], &[input, out])?
        } else {
            self.order(&[input], &[out])?
        };
        let mut st = lock(&self.fft);
        let mut run = Runner {
            dev: self,
            me,
            st: &mut st,
            prec,
            lane,
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

/// Runs program steps: the device (and an owning handle), its locked FFT state, the
/// precision.
struct Runner<'a> {
    dev: &'a CudaDevice,
    me: &'static CudaDevice,
    st: &'a mut FftState,
    prec: Precision,
    /// The stream of this thread (the plans and work area of this stream are used).
    lane: Arc<Lane>,
}

impl Runner<'_> {
    /// Queues one step.
    fn step(&mut self, step: &Step, p: &Ptrs) -> Result<()> {
        match *step {
            Step::Fft {
                ref key,
                src,
                dst,
                loops,
                istep,
                ostep,
                offset,
                dir,
            } => {
                let size = |real: bool| match real {
                    true => self.prec.real_size(),
                    false => self.prec.complex_size(),
                } as u64;
                let (src, dst) = (
                    p.of(src) + offset as u64 * size(real_in(key.ty)),
                    p.of(dst) + offset as u64 * size(real_out(key.ty)),
                );
                self.exec(key, src, dst, loops, istep, ostep, dir)
            }
            Step::Zero {
                buf,
                rows,
                row_len,
                lo,
                hi,
            } => self.zero(p.of(buf), rows, row_len, lo, hi),
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
            } => {
                let l = helpers::resize(
                    &self.dev.fft_helpers,
                    self.prec,
                    (outer, n, h, inner),
                    nyq,
                    sanitize,
                );
                self.launch(&l, &[(p.of(src), outer * n * inner)], p.of(dst))
            }
            Step::Hermitian {
                buf,
                outer,
                h,
                inner,
                nyq,
            } => {
                self.clear_imag(p.of(buf), outer, h, inner, 0)?;
                match usize::try_from(nyq) {
                    Ok(k) => self.clear_imag(p.of(buf), outer, h, inner, k),
                    Err(_) => Ok(()),
                }
            }
            Step::ToComplex { src, dst, len } => {
                let l = helpers::convert(&self.dev.fft_helpers, self.prec, len, true);
                self.launch(&l, &[(p.of(src), len)], p.of(dst))
            }
            Step::RealPart { src, dst, len } => {
                let l = helpers::convert(&self.dev.fft_helpers, self.prec, len, false);
                self.launch(&l, &[(p.of(src), len)], p.of(dst))
            }
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
        let stream = self.dev.work_stream()?;
        // Plans are shared and the work stream differs while a graph is being captured:
        // bind the plan to it for these executions (the state lock is held throughout).
        // SAFETY: a live plan and a live stream of this device's context.
        unsafe { cufft::set_stream(handle, stream.cu_stream() as cufft_sys::cudaStream_t) }
            .map_err(cufft_err("cufftSetStream"))?;
        if work_size > 0 {
            let work_ptr = self.scratch(work_size)?;
            // SAFETY: the handle is a live plan of this device; the scratch area holds at
            // least `work_size` bytes and stays allocated until after every execution
            // queued below (a replaced area is freed in stream order, or kept by the
            // recorded graphs that use it).
            unsafe { cufft::set_work_area(handle, work_ptr as *mut c_void) }
                .map_err(cufft_err("cufftSetWorkArea"))?;
        }
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
            crate::profile::calls::clock("cufftExec", || unsafe {
                exec(key.ty, handle, i, o, dir)
            })
            .map_err(cufft_err("cufftExec"))?;
        }
        Ok(())
    }

    /// The device address of the shared work area, grown to at least `bytes` (allocated
    /// on the device's stream, outside any recording) and pinned by a graph being recorded.
    fn scratch(&mut self, bytes: usize) -> Result<u64> {
        let id = self.lane.id;
        let fits = self.st.scratch.get(&id).is_some_and(|b| b.len() >= bytes);
        if !fits {
            // Rounded up so that a series of slightly larger needs allocates rarely.
            let len = bytes.next_power_of_two().max(1 << 16);
            let buf = self
                .dev
                .alloc_on_lane(self.me, DType::U8, len, &self.lane)?;
            // the old area (if any) is freed in stream order, after the work queued on it
            // on every stream (its tracking)
            self.st.scratch.insert(id, Arc::new(buf));
        }
        let buf = self.st.scratch.get(&id).expect("allocated above");
        if self.dev.capture_stream().is_none() {
            // after a replay on another stream of a graph recorded with this area
            buf.use_on(&self.lane, true)?;
        }
        PINS.with(|pins| {
            if let Some(v) = pins.borrow_mut().as_mut() {
                let pinned = v
                    .iter()
                    .any(|q| matches!(&q.0, Pin::Scratch(b) if Arc::ptr_eq(b, buf)));
                if !pinned {
                    v.push(PinnedPlan(Pin::Scratch(buf.clone())));
                }
            }
        });
        Ok(buf.device_ptr())
    }

    /// The cached plan for `key` (made on a miss): its handle and work size.
    fn plan(&mut self, key: &PlanKey) -> Result<(cufft_sys::cufftHandle, usize)> {
        let p = self.plan_arc(key)?;
        PINS.with(|pins| {
            if let Some(v) = pins.borrow_mut().as_mut() {
                if !v
                    .iter()
                    .any(|q| matches!(&q.0, Pin::Plan(x) if Arc::ptr_eq(x, &p)))
                {
                    v.push(PinnedPlan(Pin::Plan(p.clone())));
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
        let lkey = (self.lane.id, key.clone());
        if let Some(p) = self.st.plans.get_mut(&lkey) {
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
        let stream = self.lane.stream.cu_stream() as cufft_sys::cudaStream_t;
        // SAFETY: a live plan and this thread's live stream of the device (same context).
        unsafe { cufft::set_stream(handle, stream) }.map_err(cufft_err("cufftSetStream"))?;
        let plan = Arc::new(plan);
        self.st.plans.insert(lkey, plan.clone());
        Ok(plan)
    }

    /// Queues a device-to-device copy of `bytes` bytes.
    fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: both ranges lie inside live buffers of this device (sized by the program);
        // the copy is ordered on the stream like every other use of them.
        unsafe { drv::memcpy_dtod_async(dst, src, bytes, self.dev.work_stream()?.cu_stream()) }
            .map_err(driver_err("cuMemcpyDtoDAsync"))
    }

    /// Queues the clearing of columns `lo..hi` of `rows` rows of `row_len` complex elements
    /// at `ptr` (one 2-D memset).
    fn zero(&self, ptr: u64, rows: usize, row_len: usize, lo: usize, hi: usize) -> Result<()> {
        let size = self.prec.complex_size();
        if lo >= hi {
            return Ok(());
        }
        // columns lo..hi of every row lie inside the buffer at `ptr` (hi <= row_len)
        self.memset_2d(
            ptr + (lo * size) as u64,
            row_len * size,
            (hi - lo) * size / 4,
            rows,
        )
    }

    /// Queues the clearing of the imaginary parts of `buf[o, k, i]` for every `o < outer`,
    /// `i < inner` of the complex `[outer, h, inner]` array at `ptr`: 2-D memsets of the
    /// imaginary halves, one per `o` or one per `i` (whichever is fewer; one when either
    /// is 1), so that nothing but those `outer * inner` values is touched.
    fn clear_imag(&self, ptr: u64, outer: usize, h: usize, inner: usize, k: usize) -> Result<()> {
        let size = self.prec.complex_size();
        let words = size / 8; // 32-bit words of one imaginary part
        let imag = ptr + (size / 2) as u64;
        // (first element, pitch between rows, rows) of each memset: element
        // `first + r * pitch` is `[o, k, i]` (`k < h`), whose imaginary half follows its
        // real half
        let runs: Vec<(usize, usize, usize)> = if inner <= outer {
            (0..inner)
                .map(|i| (k * inner + i, h * inner, outer))
                .collect()
        } else {
            (0..outer)
                .map(|o| ((o * h + k) * inner, 1, inner))
                .collect()
        };
        for (first, pitch, rows) in runs {
            self.memset_2d(imag + (first * size) as u64, pitch * size, words, rows)?;
        }
        Ok(())
    }

    /// Queues a 2-D memset to zero of `rows` rows of `words` 32-bit words, `pitch` bytes
    /// apart, from `ptr`. The callers pass ranges inside one live buffer of this device.
    fn memset_2d(&self, ptr: u64, pitch: usize, words: usize, rows: usize) -> Result<()> {
        if rows == 0 || words == 0 {
            return Ok(());
        }
        // SAFETY: the rows lie inside a live buffer of this device's context (the callers'
        // ranges, sized by the program); the memset is ordered on the stream like every
        // other use of the buffer.
        unsafe {
            cudarc::driver::sys::cuMemsetD2D32Async(
                ptr,
                pitch,
                0,
                words,
                rows,
                self.dev.work_stream()?.cu_stream(),
            )
        }
        .result()
        .map_err(driver_err("cuMemsetD2D32Async"))
    }

    /// Launches the helper kernel of `l` reading `inputs` (addresses and lengths) and
    /// writing its `l.args.len()` elements at `out`.
    fn launch(&self, l: &helpers::Launch, inputs: &[(u64, usize)], out: u64) -> Result<()> {
        self.dev.launch_raw(&l.kernel, inputs, &[out], &l.args)
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
