//! Runs schedules on a backend: buffers, transfers and kernel launches, dispatched on the
//! closed `Device` enum to the CPU backend or the CUDA backend.

pub(crate) mod attached;
pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda_off.rs"]
pub mod cuda;
pub(crate) mod matmul;
pub(crate) mod scatter;

use crate::nvtx;
use crate::profile::{self, EntryKind};
use crate::{Device, Result};
use lazyfuse_codegen::{DType, HostBuf, Kernel, LaunchArgs};
use std::time::{Duration, Instant};

/// Storage of one materialized array: contiguous, C order, immutable once written.
#[derive(Debug)]
pub(crate) enum Buffer {
    Host(HostBuf),
    Cuda(cuda::CudaBuffer),
}

impl Buffer {
    /// A host buffer, counted in the host memory gauge until dropped.
    pub(crate) fn host(h: HostBuf) -> Buffer {
        crate::stats::host_bytes().add(h.as_bytes().len() as u64);
        Buffer::Host(h)
    }
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Buffer::Host(h) => h.dtype(),
            Buffer::Cuda(c) => c.dtype(),
        }
    }
    pub(crate) fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len(),
            Buffer::Cuda(c) => c.len(),
        }
    }
    /// True for memory another owner lent (`Array::from_cuda_ptr`, `Array::from_dlpack`):
    /// lazyfuse must never write into it (host imports are copies, so never external).
    pub(crate) fn is_external(&self) -> bool {
        match self {
            Buffer::Host(_) => false,
            Buffer::Cuda(c) => c.is_external(),
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // CUDA buffers count themselves (`cuda::CudaBuffer`); host ones were counted by
        // `Buffer::host`.
        if let Buffer::Host(h) = self {
            crate::stats::host_bytes().sub(h.as_bytes().len() as u64);
            recycle::give(std::mem::replace(h, HostBuf::Bool(Vec::new())));
        }
    }
}

/// Large host buffers kept after their array is dropped, for the next allocation of the
/// same dtype and length: a loop that evaluates the same shapes every step (a simulation,
/// a pipeline called again) reuses its memory instead of returning it to the system and
/// faulting fresh pages in. Freeing and refaulting a 512 KB buffer (the allocator gives
/// memory above its thresholds back with `munmap` or `brk`, which also flushes the other
/// threads' TLBs) was a sixth of the CPU PSF at 128^2.
mod recycle {
    use super::HostBuf;
    use lazyfuse_codegen::DType;
    use std::sync::Mutex;

    /// Buffers smaller than this come from the allocator's free lists cheaply.
    const MIN_BYTES: usize = 64 << 10;
    /// At most this many bytes are kept, and at most [`MAX_BUFFERS`] buffers; the oldest
    /// go first.
    const MAX_BYTES: usize = 128 << 20;
    const MAX_BUFFERS: usize = 16;

    /// The buffers kept: the CPU device's.
    fn kept() -> &'static Mutex<Vec<HostBuf>> {
        &super::cpu::CPU.kept_buffers
    }

    /// Keeps `h` for reuse when it is large enough (else it is freed here).
    pub(super) fn give(h: HostBuf) {
        let bytes = h.as_bytes().len();
        if !(MIN_BYTES..=MAX_BYTES).contains(&bytes) {
            return;
        }
        let Ok(mut kept) = kept().lock() else { return };
        kept.push(h);
        let mut total: usize = kept.iter().map(|b| b.as_bytes().len()).sum();
        while kept.len() > MAX_BUFFERS || total > MAX_BYTES {
            total -= kept.remove(0).as_bytes().len();
        }
    }

    /// A kept buffer of `len` elements of `dtype` holding whatever it last held, if there
    /// is one.
    pub(super) fn take(dtype: DType, len: usize) -> Option<HostBuf> {
        if len.saturating_mul(dtype.size()) < MIN_BYTES {
            return None;
        }
        let mut kept = kept().lock().ok()?;
        let i = kept
            .iter()
            .rposition(|b| b.dtype() == dtype && b.len() == len)?;
        Some(kept.remove(i))
    }

    /// A kept buffer of `len` elements of `dtype`, zeroed, if there is one.
    pub(super) fn take_zeroed(dtype: DType, len: usize) -> Option<HostBuf> {
        let mut h = take(dtype, len)?;
        h.fill_zero();
        Some(h)
    }
}

/// `len` zeros of `dtype` on the host for `what`: an [`Error::OutOfMemory`] naming the
/// bytes, not an abort, when the allocator refuses them.
///
/// [`Error::OutOfMemory`]: crate::Error::OutOfMemory
pub(crate) fn host_zeros(dtype: DType, len: usize, what: &str) -> Result<HostBuf> {
    match recycle::take_zeroed(dtype, len) {
        Some(h) => Ok(h),
        None => fresh_zeros(dtype, len, what),
    }
}

/// `len` freshly allocated zeros of `dtype` for `what` (errors as [`host_zeros`]).
fn fresh_zeros(dtype: DType, len: usize, what: &str) -> Result<HostBuf> {
    HostBuf::try_zeros(dtype, len).map_err(|e| crate::Error::OutOfMemory {
        op: "eval",
        bytes: e.bytes,
        what: format!("{len} {dtype} elements of {what}"),
    })
}

/// `len` elements of `dtype` on the host for `what`, to be overwritten entirely by the
/// caller: a recycled buffer is handed as it is (its old values are plain initialized
/// data), a fresh one zeroed. Errors as [`host_zeros`].
pub(crate) fn host_output(dtype: DType, len: usize, what: &str) -> Result<HostBuf> {
    match recycle::take(dtype, len) {
        Some(h) => Ok(h),
        None => fresh_zeros(dtype, len, what),
    }
}

/// Hands a host buffer that is no longer needed to the recycler (kept for the next
/// allocation of its dtype and length when large enough, else freed).
pub(crate) fn host_release(h: HostBuf) {
    recycle::give(h);
}

/// Copies host data to `dev`.
pub(crate) fn upload(dev: &Device, host: HostBuf) -> Result<Buffer> {
    match dev {
        Device::Cpu => Ok(Buffer::host(host)),
        Device::Cuda(d) => {
            let bytes = host.as_bytes().len() as u64;
            crate::stats::bump::bytes_h2d(bytes);
            let p = profile::begin_wall();
            let range = nvtx::range(c"lazyfuse.upload");
            let buf = d.upload(&host)?;
            drop(range);
            profile::host_done(p, EntryKind::HostToDevice, "upload", String::new(), bytes);
            Ok(Buffer::Cuda(buf))
        }
    }
}

/// A buffer holding a copy of `data` on `dev`: one copy from the caller's memory on CUDA
/// (no intermediate host vector), a vector on the CPU.
pub(crate) fn upload_slice<T: crate::Element>(dev: &Device, data: &[T]) -> Result<Buffer> {
    match dev {
        Device::Cuda(d) if std::mem::size_of::<T>() == T::DTYPE.size() => {
            // SAFETY: every `Element` type is plain old data of `T::DTYPE.size()` bytes
            // (checked above) without padding, so its elements may be read as bytes; the
            // view lives only for this call, during which `data` is borrowed.
            let bytes = unsafe {
                std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
            };
            let n = bytes.len() as u64;
            crate::stats::bump::bytes_h2d(n);
            let p = profile::begin_wall();
            let range = nvtx::range(c"lazyfuse.upload");
            let buf = d.upload_bytes(T::DTYPE, data.len(), bytes)?;
            drop(range);
            profile::host_done(p, EntryKind::HostToDevice, "upload", String::new(), n);
            Ok(Buffer::Cuda(buf))
        }
        _ => upload(dev, T::into_host(data.to_vec())),
    }
}

/// Copies elements `start..start+len` of `buf` to the host (waits for queued work).
pub(crate) fn download(buf: &Buffer, start: usize, len: usize) -> Result<HostBuf> {
    let _range = nvtx::range(c"lazyfuse.readback");
    match buf {
        Buffer::Host(h) => Ok(cpu::copy_range(h, start, len)),
        Buffer::Cuda(c) => profiled_readback(c, || {
            let out = c.device().download(c, start, len)?;
            let bytes = out.as_bytes().len() as u64;
            Ok((out, bytes))
        }),
    }
}

/// Copies all of `buf` into `dst` (its size in bytes), as [`download`] does.
pub(crate) fn download_into(buf: &Buffer, dst: &mut [u8]) -> Result<()> {
    let _range = nvtx::range(c"lazyfuse.readback");
    match buf {
        Buffer::Host(h) => {
            cpu::par_copy(dst, h.as_bytes());
            Ok(())
        }
        Buffer::Cuda(c) => profiled_readback(c, || {
            c.device().download_into(c, dst)?;
            Ok(((), dst.len() as u64))
        }),
    }
}

/// A copy of `buf` on `dst` (another device), with whether it went device to device: one
/// peer copy between two GPUs (`cuMemcpyPeerAsync` on `dst`'s stream, never through host
/// memory), otherwise a download and an upload.
pub(crate) fn copy_to(buf: &Buffer, dst: &Device) -> Result<(Buffer, bool)> {
    #[cfg(feature = "cuda")]
    if let (Buffer::Cuda(c), Device::Cuda(d)) = (buf, dst) {
        if c.device().ordinal() != d.ordinal() {
            return Ok((Buffer::Cuda(d.copy_from_peer(c)?), true));
        }
    }
    let host = download(buf, 0, buf.len())?;
    Ok((upload(dst, host)?, false))
}

/// Runs `copy` (a readback of `c` returning its result and the bytes it moved) with the
/// profile's entries and the transfer counters.
fn profiled_readback<R>(
    c: &cuda::CudaBuffer,
    copy: impl FnOnce() -> Result<(R, u64)>,
) -> Result<R> {
    if profile::on() {
        // The copy waits for every queued kernel first; profiled, that wait is measured
        // on its own so the readback is not blamed for the compute.
        let p = profile::begin_wall();
        let range = nvtx::range(c"lazyfuse.wait");
        c.device().synchronize()?;
        drop(range);
        profile::host_done(
            p,
            EntryKind::Wait,
            "queued work",
            "before readback".into(),
            0,
        );
    }
    let p = profile::begin_wall();
    let (out, bytes) = copy()?;
    profile::host_done(p, EntryKind::DeviceToHost, "readback", String::new(), bytes);
    crate::stats::bump::bytes_d2h(bytes);
    Ok(out)
}

/// A point in time for the profiler: a host instant, or a timing event recorded on a
/// device's stream.
pub(crate) enum Mark {
    Wall(Instant),
    Event(cuda::TimingEvent),
}

impl Mark {
    pub(crate) fn wall() -> Mark {
        Mark::Wall(Instant::now())
    }
    pub(crate) fn is_device(&self) -> bool {
        matches!(self, Mark::Event(_))
    }
}

/// Now, on `dev`'s timeline: a CUDA timing event recorded on its stream, or the host clock.
pub(crate) fn mark(dev: &Device) -> Result<Mark> {
    match dev {
        Device::Cpu => Ok(Mark::wall()),
        Device::Cuda(d) => Ok(Mark::Event(d.timing_event()?)),
    }
}

/// The time between two host marks; `None` when either is a device event (read it later
/// with [`mark_elapsed`], which waits).
pub(crate) fn mark_elapsed_now(start: &Mark, end: &Mark) -> Option<Duration> {
    match (start, end) {
        (Mark::Wall(a), Mark::Wall(b)) => Some(b.saturating_duration_since(*a)),
        _ => None,
    }
}

/// The time between two marks, waiting for device events to complete.
pub(crate) fn mark_elapsed(start: &Mark, end: &Mark) -> Result<Duration> {
    match (start, end) {
        (Mark::Wall(a), Mark::Wall(b)) => Ok(b.saturating_duration_since(*a)),
        (Mark::Event(a), Mark::Event(b)) => cuda::event_elapsed(a, b),
        _ => Err(crate::Error::internal(
            "profile",
            "a host mark and a device mark cannot be compared",
        )),
    }
}

/// The output buffers of one kernel launch (inline for up to two).
pub(crate) type Outputs = smallvec::SmallVec<[Buffer; 2]>;

/// The host buffers of `inputs` for a CPU step of `op`; an error if one is on a device.
fn host_inputs<'a>(
    op: &'static str,
    inputs: &[&'a Buffer],
) -> Result<smallvec::SmallVec<[&'a HostBuf; 4]>> {
    inputs
        .iter()
        .map(|b| match b {
            Buffer::Host(h) => Ok(h),
            _ => Err(crate::Error::internal(op, "CUDA buffer given to the CPU")),
        })
        .collect()
}

/// Runs one fused kernel on `dev`, returning its freshly allocated outputs.
pub(crate) fn run_kernel(
    dev: &Device,
    kernel: &std::sync::Arc<Kernel>,
    inputs: &[&Buffer],
    args: &LaunchArgs,
) -> Result<Outputs> {
    crate::stats::bump::kernels_launched(1);
    match dev {
        Device::Cpu => {
            if nvrtc_check_enabled() {
                cuda::nvrtc_check(kernel)?;
            }
            let _range = nvtx::range_with(|| cpu::kernel_name(kernel));
            let ins = host_inputs("run_kernel", inputs)?;
            Ok(cpu::run_kernel(kernel, &ins, args)?
                .into_iter()
                .map(Buffer::host)
                .collect())
        }
        Device::Cuda(d) => {
            let ins: smallvec::SmallVec<[&cuda::CudaBuffer; 4]> = inputs
                .iter()
                .map(|b| match b {
                    Buffer::Cuda(c) => Ok(c),
                    _ => Err(crate::Error::internal(
                        "run_kernel",
                        "host buffer given to CUDA",
                    )),
                })
                .collect::<Result<_>>()?;
            Ok(d.run_kernel_shared(kernel, &ins, args)?
                .into_iter()
                .map(Buffer::Cuda)
                .collect())
        }
    }
}

/// Runs one fused kernel on `dev` writing output `out` into `donor`, the buffer of input
/// `slot` (whose entry of `inputs` is `None`): the kernel must read that input only at the
/// index it writes, and nothing else may observe `donor` (see `schedule::inplace`). Returns
/// every output, `donor` itself at position `out`.
pub(crate) fn run_kernel_reuse(
    dev: &Device,
    kernel: &std::sync::Arc<Kernel>,
    inputs: &[Option<&Buffer>],
    args: &LaunchArgs,
    (slot, out): (usize, usize),
    mut donor: Buffer,
) -> Result<Outputs> {
    crate::stats::bump::kernels_launched(1);
    let wrong = || crate::Error::internal("run_kernel", "buffer on another device");
    let mut outs: Vec<Option<Buffer>> = match (dev, &mut donor) {
        (Device::Cpu, Buffer::Host(d)) => {
            if nvrtc_check_enabled() {
                cuda::nvrtc_check(kernel)?;
            }
            let _range = nvtx::range_with(|| cpu::kernel_name(kernel));
            let ins: Vec<Option<&HostBuf>> = inputs
                .iter()
                .map(|b| match b {
                    None => Ok(None),
                    Some(Buffer::Host(h)) => Ok(Some(h)),
                    Some(_) => Err(wrong()),
                })
                .collect::<Result<_>>()?;
            cpu::run_kernel_reuse(kernel, &ins, args, slot, out, d)?
                .into_iter()
                .map(|b| b.map(Buffer::host))
                .collect()
        }
        #[cfg(feature = "cuda")]
        (Device::Cuda(dv), Buffer::Cuda(d)) => {
            let ins: Vec<&cuda::CudaBuffer> = inputs
                .iter()
                .map(|b| match b {
                    None => Ok(&*d),
                    Some(Buffer::Cuda(c)) => Ok(c),
                    Some(_) => Err(wrong()),
                })
                .collect::<Result<_>>()?;
            dv.run_kernel_reuse(kernel, &ins, args, Some((slot, out)))?
                .into_iter()
                .map(|b| b.map(Buffer::Cuda))
                .collect()
        }
        _ => return Err(wrong()),
    };
    if outs.get(out).is_none_or(|o| o.is_some()) {
        return Err(crate::Error::internal(
            "run_kernel",
            "reused output missing",
        ));
    }
    outs[out] = Some(donor);
    Ok(outs.into_iter().flatten().collect())
}

/// `LAZYFUSE_NVRTC_CHECK=1`: compile every kernel the CPU runs with NVRTC too (for sm_90),
/// so a codegen error fails the CPU test suite on a machine without a GPU.
fn nvrtc_check_enabled() -> bool {
    crate::config::CONFIG.nvrtc_check()
}

/// `b` as a CUDA buffer.
#[cfg(feature = "cuda")]
fn cuda_buf(b: &Buffer) -> Result<&cuda::CudaBuffer> {
    match b {
        Buffer::Cuda(c) => Ok(c),
        _ => Err(crate::Error::internal("fft", "host buffer given to CUDA")),
    }
}

/// Whether the C2C transform `spec` over `shape` of `dtype` runs as generated passes on
/// `dev` (which elementwise work may then fuse into): on a CUDA device as the FFT setting
/// says, by measurement for the default `Auto` (`cuda::fft::choice`); never on the CPU.
pub(crate) fn fft_prefers_generated(
    dev: &Device,
    spec: &crate::graph::FftSpec,
    shape: &[usize],
    dtype: lazyfuse_codegen::DType,
    fused: bool,
) -> Result<bool> {
    match dev {
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => d.prefers_generated(spec, shape, dtype, fused),
        _ => {
            let _ = (spec, shape, dtype, fused);
            Ok(false)
        }
    }
}

/// Whether the CPU runs the transform `spec` of an input of `shape` with its producer
/// kernel inside the first pass (`cpu::fft::run_filled`, the line structure): where that
/// pass runs along contiguous lines, for inputs of at least
/// `config::cpu_fft_lines_min_elements()` elements.
pub(crate) fn cpu_fft_lines(spec: &crate::graph::FftSpec, shape: &[usize]) -> bool {
    cpu::fft::lines_cover(spec, shape.len())
        && shape.iter().product::<usize>() >= crate::config::cpu_fft_lines_min_elements()
}

/// The generated-or-cuFFT decisions made on `dev` so far (empty on the CPU).
pub(crate) fn fft_choices(dev: &Device) -> Vec<crate::debug::FftChoice> {
    match dev {
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => d
            .fft_choices()
            .into_iter()
            .map(|(key, c)| crate::debug::FftChoice {
                key,
                generated: c.generated,
                generated_time: c.generated_time,
                cufft_time: c.cufft_time,
                copy_time: c.copy_time,
                fused_generated: c.fused_generated(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The consumer of a fused transform's output (`schedule::EpiPlan`) for one run: its
/// kernel, its input buffers (`None` at `value_input`, the transform's output), its first
/// shift parameter and its launch arguments.
pub(crate) struct EpiRun<'a> {
    pub(crate) kernel: &'a std::sync::Arc<Kernel>,
    pub(crate) inputs: &'a [Option<&'a Buffer>],
    pub(crate) value_input: u32,
    pub(crate) shift_param: u32,
    pub(crate) args: &'a LaunchArgs,
}

/// The kernel between the transforms of a fused round trip (`schedule::RoundPlan`) for
/// one run: its kernel, its input buffers (`None` at `value_input`, the first transform's
/// output), its launch arguments, and the second transform.
pub(crate) struct RoundRun<'a> {
    pub(crate) kernel: &'a std::sync::Arc<Kernel>,
    pub(crate) inputs: &'a [Option<&'a Buffer>],
    pub(crate) value_input: u32,
    pub(crate) args: &'a LaunchArgs,
    pub(crate) spec: &'a crate::graph::FftSpec,
}

/// The unnormalized C2C transform `spec` of the values `prologue` computes (an
/// elementwise kernel with one output, launched over `in_shape` with `args`, reading
/// `inputs`), with `round` its consumer's result transformed back (and on, for each round
/// trip of a chain), and with `epi` that consumer's output of the (last) transform: on a
/// CUDA device as generated passes computing the prologue in the first pass's loads, each
/// round trip's kernel between the transforms in one pass, and the epilogue in the last
/// pass's stores, where the generator runs the transforms; on the CPU with the prologue
/// inside the first pass where that pass runs along the last axis (`cpu_fft_lines`, the
/// line structure); otherwise the kernels run apart and the transforms between them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fft_fused(
    dev: &Device,
    spec: &crate::graph::FftSpec,
    prologue: &std::sync::Arc<Kernel>,
    inputs: &[&Buffer],
    args: &LaunchArgs,
    in_shape: &[usize],
    out_shape: &[usize],
    round: &[RoundRun],
    epi: Option<&EpiRun>,
) -> Result<Buffer> {
    let err = |m: &str| crate::Error::internal("fft", m.to_string());
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = dev {
        let ins: smallvec::SmallVec<[&cuda::CudaBuffer; 4]> =
            inputs.iter().map(|b| cuda_buf(b)).collect::<Result<_>>()?;
        let in_dtype = *prologue
            .outputs
            .first()
            .ok_or_else(|| err("prologue without output"))?;
        // the passes' complex dtype and the (last) transform's output dtype (real for C2R)
        let dtype = cuda::fused_dtypes(spec, in_dtype).0;
        let last = round.last().map_or(spec, |r| r.spec);
        let out_dtype = cuda::fused_dtypes(last, in_dtype).1;
        let n: usize = out_shape.iter().product();
        let out = d.alloc_buffer(out_dtype, n)?;
        let p = cuda::Prologue {
            kernel: prologue,
            inputs: &ins,
            args,
        };
        // the fused kernels' inputs on the device, `None` at their transform values
        type Ins<'a> = smallvec::SmallVec<[Option<&'a cuda::CudaBuffer>; 4]>;
        fn cuda_ins<'a>(ins: Option<&[Option<&'a Buffer>]>) -> Result<Ins<'a>> {
            ins.unwrap_or_default()
                .iter()
                .map(|b| b.map(cuda_buf).transpose())
                .collect()
        }
        let epi_ins = cuda_ins(epi.map(|e| e.inputs))?;
        let epi_out = match epi {
            Some(e) => {
                let d_out = *e
                    .kernel
                    .outputs
                    .first()
                    .ok_or_else(|| err("epilogue without output"))?;
                Some(d.alloc_buffer(d_out, e.args.len())?)
            }
            None => None,
        };
        let e = match (epi, &epi_out) {
            (Some(e), Some(o)) => Some(cuda::Epilogue {
                kernel: e.kernel,
                inputs: &epi_ins,
                value_input: e.value_input,
                shift_param: e.shift_param,
                args: e.args,
                out: o,
            }),
            _ => None,
        };
        let mid_ins = round
            .iter()
            .map(|r| cuda_ins(Some(r.inputs)))
            .collect::<Result<Vec<_>>>()?;
        let mids: Vec<cuda::Mid> = round
            .iter()
            .zip(&mid_ins)
            .map(|(r, ins)| cuda::Mid {
                kernel: r.kernel,
                inputs: ins,
                value_input: r.value_input,
                args: r.args,
                spec: r.spec,
            })
            .collect();
        if let Some(shape) = spec.passes_shape(in_shape, out_shape) {
            if d.fft_fused(spec, &p, &mids, e.as_ref(), &out, shape, dtype)? {
                return Ok(Buffer::Cuda(epi_out.unwrap_or(out)));
            }
        }
    }
    // each transform's output has the shape its consumer runs over (the next middle
    // kernel's launch shape: a real round trip's half spectrum), the last `out_shape`
    let shape_after = |j: usize| round.get(j).map_or(out_shape, |r| &r.args.shape[..]);
    let mut f = match dev {
        // the CPU's line structure: the prologue inside the first pass
        Device::Cpu if cpu::fft::lines_cover(spec, in_shape.len()) => {
            if nvrtc_check_enabled() {
                cuda::nvrtc_check(prologue)?;
            }
            let ins = host_inputs("fft", inputs)?;
            Buffer::host(cpu::fft_of_kernel(
                spec,
                prologue,
                &ins,
                args,
                in_shape,
                shape_after(0),
            )?)
        }
        _ => {
            let input = run_kernel(dev, prologue, inputs, args)?
                .into_iter()
                .next()
                .ok_or_else(|| err("prologue without output"))?;
            fft(dev, spec, &input, in_shape, shape_after(0))?
        }
    };
    for (j, r) in round.iter().enumerate() {
        let m = run_with_value(dev, r.kernel, r.inputs, r.value_input, &f, r.args)?;
        f = fft(dev, r.spec, &m, &r.args.shape, shape_after(j + 1))?;
    }
    let Some(e) = epi else {
        return Ok(f);
    };
    // the shift parameters are the epilogue's last ones; as a plain kernel it ignores them
    debug_assert!(e.shift_param as usize <= e.kernel.params.len());
    run_with_value(dev, e.kernel, e.inputs, e.value_input, &f, e.args)
}

/// The output of `kernel` (one output) reading `value` as its input `value_input` and
/// `inputs`' buffers as the others (a fused kernel run apart from its transform).
fn run_with_value(
    dev: &Device,
    kernel: &std::sync::Arc<Kernel>,
    inputs: &[Option<&Buffer>],
    value_input: u32,
    value: &Buffer,
    args: &LaunchArgs,
) -> Result<Buffer> {
    let err = |m: &str| crate::Error::internal("fft", m.to_string());
    let ins: smallvec::SmallVec<[&Buffer; 4]> = inputs
        .iter()
        .enumerate()
        .map(|(k, b)| match (b, k as u32 == value_input) {
            (_, true) => Ok(value),
            (Some(b), false) => Ok(*b),
            (None, false) => Err(err("fused kernel input missing")),
        })
        .collect::<Result<_>>()?;
    run_kernel(dev, kernel, &ins, args)?
        .into_iter()
        .next()
        .ok_or_else(|| err("fused kernel without output"))
}

/// The unnormalized FFT `spec` of `input` (shape `in_shape`) as a new buffer of
/// `out_shape` on `dev`.
pub(crate) fn fft(
    dev: &Device,
    spec: &crate::graph::FftSpec,
    input: &Buffer,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<Buffer> {
    match (dev, input) {
        (Device::Cpu, Buffer::Host(h)) => {
            Ok(Buffer::host(cpu::fft::run(spec, h, in_shape, out_shape)?))
        }
        // cuFFT on the device's stream (`cuda::fft`).
        #[cfg(feature = "cuda")]
        (Device::Cuda(d), Buffer::Cuda(c)) => {
            Ok(Buffer::Cuda(d.fft(spec, c, in_shape, out_shape)?))
        }
        #[cfg(not(feature = "cuda"))]
        (Device::Cuda(_), _) => Err(crate::Error::NoCuda(
            "lazyfuse was built without the `cuda` feature".into(),
        )),
        _ => Err(crate::Error::internal("fft", "buffer on another device")),
    }
}
