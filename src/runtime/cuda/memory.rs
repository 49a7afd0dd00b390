//! Device buffers (stream-ordered allocations that free themselves into the pool), uploads,
//! and downloads through a reused pinned staging buffer.

use super::compile::lock;
use super::device::CudaDevice;
use super::lane::{Lane, Tracking};
use super::{driver_err, driver_error};
use crate::stats::bump;
use crate::{Error, Result};
use cudarc::driver::{
    result as drv, sys as drv_sys, CudaEvent, CudaSlice, DevicePtr, DriverError, PinnedHostSlice,
};
use lazyfuse_codegen::{DType, HostBuf};
use std::collections::HashMap;
use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

/// Smallest pinned staging buffer allocated.
const STAGING_MIN: usize = 1 << 20;
/// Largest pinned staging buffer.
const STAGING_MAX: usize = 64 << 20;
/// The largest chunk of a staged copy.
const STAGING_CHUNK: usize = 4 << 20;
/// Uploads up to this many bytes go straight from the caller's memory (the driver stages
/// them, faster there than a copy through the staging buffer: measured on the H200, 1 MiB
/// took 68 us direct against 120 us staged); larger ones in chunks through the staging
/// buffer.
const DIRECT_MAX: usize = 2 * STAGING_CHUNK;

/// The chunk of a staged upload of `len` bytes: all of it up to 2 MiB, else a quarter of it
/// within 1..=4 MiB, so that the host's copy of one chunk overlaps the device's copy of
/// the next. Each chunk costs a synchronization (about 10 us on the H200).
fn staging_chunk(len: usize) -> usize {
    const SINGLE: usize = 2 << 20;
    if len <= SINGLE {
        len
    } else {
        (len / 4).clamp(1 << 20, STAGING_CHUNK)
    }
}

/// The chunk of a readback of `len` bytes: a sixteenth of it within 1..=2 MiB (all of it
/// when smaller). The host copies a chunk out as soon as its event shows it arrived, so
/// the host's copy of one chunk overlaps the device's copies of the next ones. Smaller
/// chunks did not pay on the H200: a 1 MiB readback took 83 us in one chunk, 89-111 us in
/// chunks of 64-256 KiB, copied out on one thread or on all (`benches/NOTES.md`).
fn readback_chunk(len: usize) -> usize {
    (len / 16).clamp(1 << 20, 2 << 20).min(len)
}

/// Fresh host destinations of at least this many bytes are advised to use huge pages.
const HUGE_PAGE_ADVICE_MIN: usize = 4 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of the fresh destination `ptr..ptr+len`
/// with transparent huge pages (`madvise(MADV_HUGEPAGE)`), before its first touch. A large
/// readback into fresh memory is bound by page faults: the H200 host touched fresh 4 KiB
/// pages at 6.2 GB/s on one thread and 11 GB/s on 16, below the device's copy rate
/// (`benches/NOTES.md`, "Transfers"); a huge page costs one fault per 2 MiB. Only advice:
/// where transparent huge pages are off, or the call fails, nothing changes.
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if len < HUGE_PAGE_ADVICE_MIN {
            return;
        }
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: `start..end` lies inside the caller's allocation (rounded inwards
            // to whole huge pages); MADV_HUGEPAGE is advice about how to back those pages
            // and changes no contents or permissions.
            let _ = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE)
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len, HUGE_PAGE_ADVICE_MIN);
}

/// The first fresh readback destination of at least this many bytes on a device is
/// page-locked for the copy (`cuMemHostRegister`) and receives one DMA copy, when the
/// staging buffer is smaller than the staged copy would need
/// ([`CudaDevice::read_registered`]).
const REGISTER_MIN: usize = 16 << 20;

/// Touches every page of the fresh `dst..dst + len` (writing a zero byte into each 4 KiB)
/// on every worker thread, 2 MiB a task: a fresh page is zeroed by the kernel at its first
/// touch, at about 10 GB/s on one thread, which would otherwise happen inside the
/// single-threaded `cuMemHostRegister`.
fn prefault(dst: *mut u8, len: usize) {
    const TASK: usize = 2 << 20;
    const PAGE: usize = 4096;
    let base = dst as usize;
    let touch = |t: usize| {
        let end = ((t + 1) * TASK).min(len);
        for off in (t * TASK..end).step_by(PAGE) {
            // SAFETY: `off < len`: inside the destination, which the caller gives us to
            // write; its contents are overwritten by the copy that follows.
            unsafe { std::ptr::write_volatile((base + off) as *mut u8, 0) };
        }
    };
    let tasks = len.div_ceil(TASK);
    if crate::runtime::cpu::threads() > 1 && tasks > 1 {
        use rayon::prelude::*;
        crate::runtime::cpu::in_pool(|| (0..tasks).into_par_iter().for_each(touch));
    } else {
        (0..tasks).for_each(touch);
    }
}

/// Chunks of a readback window (see `copy_to_host`).
const WINDOW_CHUNKS: usize = 16;

/// Readback windows of this many bytes and more are copied out on every worker thread
/// (each chunk by one thread).
const PARALLEL_COPY_OUT: usize = 2 << 20;

/// The staging bytes an upload of `len` bytes uses: one chunk, or the two it alternates.
fn staging_need(len: usize) -> usize {
    let chunk = staging_chunk(len);
    if chunk >= len {
        len
    } else {
        2 * chunk
    }
}

/// Page-locked host memory of one device's context (see [`CudaDevice::alloc_pinned_host`]).
pub struct PinnedHost {
    _mem: PinnedHostSlice<u8>,
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the memory is plain bytes owned by this value alone (`_mem` frees it on drop);
// access goes through `&self`/`&mut self` like a `Vec<u8>`'s.
unsafe impl Send for PinnedHost {}
// SAFETY: as above.
unsafe impl Sync for PinnedHost {}

impl PinnedHost {
    /// The first byte (page-aligned).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl std::fmt::Debug for PinnedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedHost({} bytes at {:p})", self.bytes, self.ptr)
    }
}

/// A device buffer: `len` elements of `dtype`, contiguous, 256-byte aligned. Dropping it
/// returns the memory to the device's pool, ordered after all work queued before the drop.
///
/// An *external* buffer ([`CudaDevice::wrap_external`]) is memory someone else allocated
/// (`Array::from_cuda_ptr`, `Array::from_dlpack`): lazyfuse only reads it, never frees it,
/// never puts it in the pool and never writes into it (in-place reuse refuses it:
/// `graph::consume_buffer`); dropping it waits for the device's queued work, then drops its
/// owner.
pub struct CudaBuffer {
    mem: Memory,
    dtype: DType,
    len: usize,
    device: &'static CudaDevice,
    /// The stream it was allocated on (or imported from), where it is freed.
    home: Arc<Lane>,
    /// The other streams that used it (see `lane::Tracking`).
    tracking: Tracking,
}

/// Where a buffer's bytes come from.
enum Memory {
    /// `len * dtype.size()` bytes of the pool (at least 1, so that empty buffers are real
    /// allocations). Taken out in `drop`, to the device's free list or freed.
    Pool(ManuallyDrop<CudaSlice<u8>>),
    /// Memory of another owner: `ptr` stays valid while `owner` lives.
    External {
        ptr: u64,
        /// Dropped (only) after the device's queued work is done.
        owner: Option<Box<dyn std::any::Any + Send + Sync>>,
    },
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CudaBuffer({} x {} on cuda:{}{})",
            self.len,
            self.dtype,
            self.device.ordinal(),
            if self.is_external() { ", external" } else { "" }
        )
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        match &mut self.mem {
            Memory::Pool(slice) => {
                bump_live_sub(slice.len());
                // SAFETY: `slice` is never used again: this is the buffer's drop.
                let slice = unsafe { ManuallyDrop::take(slice) };
                // the free is ordered after the other streams' uses
                if let Err(e) = self.tracking.before_free(&self.home) {
                    crate::config::debug_log!(1, "buffer drop: {e}");
                    if let Err(e) = self.device.synchronize() {
                        crate::config::debug_log!(1, "buffer drop: {e}");
                    }
                }
                // kept for reuse, or freed (stream-ordered) when the free list declines it
                self.home.free.put(slice, &self.home.stream);
            }
            Memory::External { owner, .. } => {
                // Kernels queued before this drop may still read the memory; its owner may
                // free it at once, and that free is not ordered on this device's stream.
                if let Err(e) = self.device.synchronize() {
                    crate::config::debug_log!(1, "external buffer drop: {e}");
                }
                drop(owner.take());
            }
        }
    }
}

/// Largest buffer the free list keeps.
const FREE_MAX_BUFFER: usize = 16 << 20;
/// Most bytes the free list holds in all.
const FREE_MAX_BYTES: usize = 256 << 20;
/// Most buffers of one size the free list holds.
const FREE_MAX_PER_SIZE: usize = 8;

/// Freed device buffers of one stream by size, handed out again without a driver call.
/// Reuse is safe without events because every buffer kept here was allocated on this
/// stream and its drop ordered the stream after every other stream that used it
/// (`lane::Tracking::before_free`): work queued after the reuse runs after the work queued
/// before the drop. Buffers recorded into CUDA graphs are never kept (they are allocated
/// on the capture stream).
#[derive(Default)]
pub(super) struct FreeList(Mutex<FreeInner>);

#[derive(Default)]
struct FreeInner {
    by_size: HashMap<usize, Vec<CudaSlice<u8>>, crate::graph::FxBuild>,
    bytes: usize,
}

impl FreeList {
    /// A kept buffer of exactly `bytes` bytes.
    fn take(&self, bytes: usize) -> Option<CudaSlice<u8>> {
        if bytes > FREE_MAX_BUFFER {
            return None;
        }
        let mut inner = lock(&self.0);
        let slice = inner.by_size.get_mut(&bytes)?.pop()?;
        inner.bytes -= bytes;
        Some(slice)
    }

    /// Keeps `slice` for reuse when it was allocated on `stream` and fits the limits;
    /// otherwise it is freed here (`cuMemFreeAsync` on its stream).
    fn put(&self, slice: CudaSlice<u8>, stream: &Arc<cudarc::driver::CudaStream>) {
        if let Some(declined) = self.keep(slice, stream) {
            crate::profile::calls::timed("cuMemFreeAsync", || drop(declined));
        }
    }

    /// `put` without the free: the slice back when it is not kept.
    fn keep(
        &self,
        slice: CudaSlice<u8>,
        stream: &Arc<cudarc::driver::CudaStream>,
    ) -> Option<CudaSlice<u8>> {
        let bytes = slice.len();
        if bytes > FREE_MAX_BUFFER || !Arc::ptr_eq(slice.stream(), stream) {
            return Some(slice);
        }
        let mut inner = lock(&self.0);
        if inner.bytes + bytes > FREE_MAX_BYTES {
            return Some(slice);
        }
        let list = inner.by_size.entry(bytes).or_default();
        if list.len() >= FREE_MAX_PER_SIZE {
            return Some(slice);
        }
        list.push(slice);
        inner.bytes += bytes;
        None
    }

    /// Frees every kept buffer (into the stream-ordered pool).
    pub(super) fn clear(&self) {
        let kept = std::mem::take(&mut *lock(&self.0));
        drop(kept);
    }
}

fn bump_live_sub(bytes: usize) {
    crate::stats::device_bytes().sub(bytes as u64);
}

impl CudaBuffer {
    /// Element dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Element count.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The owning device.
    pub fn device(&self) -> &'static CudaDevice {
        self.device
    }
    /// The device address of element 0.
    pub(crate) fn device_ptr(&self) -> u64 {
        match &self.mem {
            Memory::Pool(slice) => {
                // Event tracking is off (module docs), so the returned guard records nothing.
                let (ptr, _guard) = slice.device_ptr(&self.home.stream);
                ptr
            }
            Memory::External { ptr, .. } => *ptr,
        }
    }
    /// True for memory lazyfuse did not allocate (see the type's docs): never written,
    /// never freed by lazyfuse.
    pub fn is_external(&self) -> bool {
        matches!(self.mem, Memory::External { .. })
    }

    /// Orders a read (or a write) of this buffer on `lane` after the other streams' uses
    /// (see `lane::Tracking`).
    pub(super) fn use_on(&self, lane: &Arc<Lane>, write: bool) -> Result<()> {
        self.tracking.use_on(&self.home, lane, write)
    }
}

/// The pinned host buffer transfers go through, grown on demand, and the events that mark
/// a readback's chunks as arrived (one per device; a transfer holds it for its whole copy).
#[derive(Default)]
pub(super) struct Staging(Mutex<StagingState>);

/// What [`Staging`] guards.
#[derive(Default)]
pub(super) struct StagingState {
    pinned: Option<PinnedHostSlice<u8>>,
    /// A readback registered its destination instead of growing this buffer
    /// (`CudaDevice::read_registered`).
    registered_once: bool,
    /// One per chunk slot of a readback, created on first use.
    events: Vec<CudaEvent>,
}

fn is_oom(e: &DriverError) -> bool {
    e.0 == drv_sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY
}

impl CudaDevice {
    /// Allocates an uninitialized buffer of `len` elements of `dtype` on the stream.
    pub(super) fn alloc(
        &self,
        me: &'static CudaDevice,
        dtype: DType,
        len: usize,
    ) -> Result<CudaBuffer> {
        // This thread's stream, or the capture stream while this thread records a CUDA
        // graph (then the allocation is part of the recording).
        let lane = self.lane()?;
        let stream = self.capture_stream().unwrap_or_else(|| lane.stream.clone());
        self.alloc_on(me, dtype, len, stream, lane)
    }

    /// [`CudaDevice::alloc`] on `lane`'s stream, also while this thread records a CUDA
    /// graph: for buffers that outlive any one recording (FFT work areas).
    pub(super) fn alloc_on_lane(
        &self,
        me: &'static CudaDevice,
        dtype: DType,
        len: usize,
        lane: &Arc<Lane>,
    ) -> Result<CudaBuffer> {
        self.alloc_on(me, dtype, len, lane.stream.clone(), lane.clone())
    }

    fn alloc_on(
        &self,
        me: &'static CudaDevice,
        dtype: DType,
        len: usize,
        stream: Arc<cudarc::driver::CudaStream>,
        home: Arc<Lane>,
    ) -> Result<CudaBuffer> {
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| Error::Shape {
            op: "cuda alloc",
            msg: format!("{len} elements of {dtype} overflow the address space"),
        })?;
        let size = bytes.max(1);
        let kept = if Arc::ptr_eq(&stream, &home.stream) {
            home.free.take(size)
        } else {
            None
        };
        // SAFETY: the bytes are uninitialized; u8 has no invalid values, and every buffer is
        // fully written before it is read (uploads copy all bytes, kernels store every
        // output element).
        let alloc = || {
            // cudarc binds the context (cuCtxGetCurrent) before allocating
            crate::profile::calls::note("cuCtxGetCurrent");
            crate::profile::calls::timed("cuMemAllocAsync", || unsafe { stream.alloc::<u8>(size) })
        };
        let slice = match kept.map(Ok).unwrap_or_else(alloc) {
            Err(e) if is_oom(&e) => {
                // Kept buffers go back to the pool; frees queued on the stream may not have
                // reached it yet.
                for lane in self.all_lanes() {
                    lane.free.clear();
                }
                self.synchronize()?;
                alloc()
            }
            r => r,
        }
        .map_err(|e| {
            if is_oom(&e) {
                Error::OutOfMemory {
                    op: "cuda alloc",
                    bytes,
                    what: format!("{len} {dtype} elements on the device"),
                }
            } else {
                driver_error("cuMemAllocAsync", e)
            }
        })?;
        bump::buffers_allocated(1);
        crate::stats::device_bytes().add(slice.len() as u64);
        let buf = CudaBuffer {
            mem: Memory::Pool(ManuallyDrop::new(slice)),
            dtype,
            len,
            device: me,
            home,
            tracking: Tracking::default(),
        };
        // Vectorized kernels access whole 16-byte vectors; pool allocations are 256-aligned.
        if !buf.device_ptr().is_multiple_of(16) {
            return Err(Error::internal(
                "cuda alloc",
                format!("allocation {:#x} is not 16-byte aligned", buf.device_ptr()),
            ));
        }
        Ok(buf)
    }

    /// Copies `host` to a new device buffer. Asynchronous with respect to the device, but
    /// `host` may be dropped as soon as this returns (the driver stages pageable memory;
    /// a copy from page-locked memory is waited for).
    pub fn upload(&self, host: &HostBuf) -> Result<CudaBuffer> {
        self.upload_bytes(host.dtype(), host.len(), host.as_bytes())
    }

    /// Copies `bytes` (`len` elements of `dtype`) to a new device buffer. Up to
    /// 8 MB this is one copy from the caller's memory (the driver stages it); above, the
    /// bytes go in chunks through the two halves of the pinned staging buffer, the host
    /// filling one half while the device copies the other, and this waits for the last
    /// chunk. `bytes` may be dropped as soon as this returns.
    pub fn upload_bytes(&self, dtype: DType, len: usize, bytes: &[u8]) -> Result<CudaBuffer> {
        let me = self.arc()?;
        let mut buf = self.alloc(me, dtype, len)?;
        if bytes.len() != len * dtype.size() {
            return Err(Error::internal(
                "upload",
                format!("{} bytes for {len} {dtype} elements", bytes.len()),
            ));
        }
        // A page-locked source (a `PinnedVec`, or memory PyTorch or CuPy pinned) is read by
        // one DMA copy of any size, which the driver does not stage: the copy is waited for
        // before returning, since the caller may write the memory as soon as this returns.
        let locked = !bytes.is_empty() && self.page_locked(bytes.as_ptr(), bytes.len())?;
        if bytes.len() <= DIRECT_MAX || locked {
            if !bytes.is_empty() {
                let Memory::Pool(slice) = &mut buf.mem else {
                    return Err(Error::internal("upload", "fresh buffer is external"));
                };
                buf.home
                    .stream
                    .memcpy_htod(bytes, &mut **slice)
                    .map_err(driver_err("cuMemcpyHtoDAsync"))?;
            }
            if locked {
                buf.home
                    .stream
                    .synchronize()
                    .map_err(driver_err("cuStreamSynchronize"))?;
            }
            return Ok(buf);
        }
        let chunk = staging_chunk(bytes.len());
        let mut staging = lock(&self.staging.0);
        let base = self.staging_at_least(&mut staging.pinned, staging_need(bytes.len()))?;
        let dst = buf.device_ptr();
        for (i, part) in bytes.chunks(chunk).enumerate() {
            let half = (i % 2) * chunk;
            // Streaming stores: the device then reads the staging buffer from memory, not
            // from lines left dirty in the cores' caches. On the H200's host this halved a
            // staged upload (16 MiB: 1021 -> 498 us; 64 MiB: 3525 -> 1773 us).
            // SAFETY: `base + half` starts `chunk >= part.len()` pinned bytes of the staging
            // buffer (it holds two chunks, or the one chunk there is), owned by this thread
            // through the staging mutex; the device copy that last read this half (chunk
            // i - 2) finished at the synchronization of the previous iteration.
            unsafe {
                crate::runtime::cpu::par_copy_raw(base.add(half), part.as_ptr(), part.len(), true)
            };
            // chunk i - 1, from the other half, is done before this half's copy is queued
            // (and before the next iteration overwrites that other half)
            self.synchronize_lane()?;
            self.ctx
                .bind_to_thread()
                .map_err(driver_err("cuCtxGetCurrent"))?;
            // SAFETY: `base + half` holds the `part.len()` bytes copied above, which stay
            // untouched until the next synchronization.
            let stage = unsafe { std::slice::from_raw_parts(base.add(half), part.len()) };
            // SAFETY: the copy writes `part.len()` bytes at `dst + i * chunk`, inside the
            // new buffer of `bytes.len()` bytes.
            unsafe {
                drv::memcpy_htod_async(dst + (i * chunk) as u64, stage, buf.home.stream.cu_stream())
            }
            .map_err(driver_err("cuMemcpyHtoDAsync"))?;
        }
        // the staging buffer is free again only when the last copy has read it
        self.synchronize_lane()?;
        Ok(buf)
    }

    /// The staging buffer's address, (re)allocated to hold at least `want` bytes (at most
    /// `STAGING_MAX`).
    fn staging_at_least(
        &self,
        staging: &mut Option<PinnedHostSlice<u8>>,
        want: usize,
    ) -> Result<*mut u8> {
        let want = want.min(STAGING_MAX);
        if staging.as_ref().is_none_or(|s| s.len() < want) {
            *staging = None; // free the old buffer before allocating the larger one
            let size = want.next_power_of_two().clamp(STAGING_MIN, STAGING_MAX);
            // SAFETY: the pinned memory is uninitialized; it is only read after a copy into
            // it has completed.
            let pinned = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(size, 0) }
                .map_err(driver_err("cuMemHostAlloc"))?;
            *staging = Some(pinned);
        }
        let pinned = staging.as_mut().expect("staging buffer allocated above");
        pinned
            .as_mut_ptr()
            .map_err(driver_err("cuEventSynchronize"))
    }

    /// A buffer over `len` elements of `dtype` at device address `ptr`, owned by `owner`
    /// (see [`CudaBuffer`]: lazyfuse never writes or frees it). Checks with the driver that
    /// `ptr` is memory of this device and, where it can tell, that the range fits.
    ///
    /// # Safety
    /// `ptr` holds `len` initialized elements of `dtype` (bools as bytes 0 or 1) that stay
    /// valid and unwritten while `owner` lives, and the writes that produced them are
    /// complete or ordered before this device's stream.
    pub(crate) unsafe fn wrap_external(
        &self,
        ptr: u64,
        dtype: DType,
        len: usize,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<CudaBuffer> {
        let me = self.arc()?;
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| Error::Shape {
            op: "from_cuda_ptr",
            msg: format!("{len} elements of {dtype} overflow the address space"),
        })?;
        if bytes > 0 {
            self.check_range(ptr, bytes)?;
        }
        Ok(CudaBuffer {
            mem: Memory::External {
                ptr,
                owner: Some(owner),
            },
            dtype,
            len,
            device: me,
            home: self.lane()?,
            tracking: Tracking::default(),
        })
    }

    /// Whether `ptr` is device (or managed) memory of this device and, where the driver
    /// reports the allocation's range, whether `bytes` bytes from it fit inside.
    fn check_range(&self, ptr: u64, bytes: usize) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let not_cuda = |e: DriverError| Error::Shape {
            op: "from_cuda_ptr",
            msg: format!("{ptr:#x} is not CUDA device memory of this process ({e:?})"),
        };
        let mut ordinal: i32 = -1;
        // SAFETY: the device-ordinal attribute is an int, which `ordinal` is; the driver
        // only inspects the address.
        unsafe {
            drv_sys::cuPointerGetAttribute(
                &mut ordinal as *mut i32 as *mut std::ffi::c_void,
                drv_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            )
        }
        .result()
        .map_err(not_cuda)?;
        if ordinal != self.ordinal() as i32 {
            return Err(Error::DeviceMismatch {
                op: "from_cuda_ptr",
                a: format!("cuda:{}", self.ordinal()),
                b: format!("memory of cuda:{ordinal}"),
            });
        }
        let (mut base, mut size): (u64, usize) = (0, 0);
        // SAFETY: both out-pointers are valid locals; the driver only inspects the address.
        let range = unsafe { drv_sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) };
        // best effort: memory the driver cannot give a range for (some mappings) passes
        if range.result().is_err() {
            return Ok(());
        }
        let end = ptr.checked_add(bytes as u64);
        if end.is_none_or(|e| e > base.saturating_add(size as u64)) {
            return Err(Error::Shape {
                op: "from_cuda_ptr",
                msg: format!(
                    "{bytes} bytes at {ptr:#x} run past the end of its allocation \
                     ({size} bytes at {base:#x})"
                ),
            });
        }
        Ok(())
    }

    /// A fresh pool buffer holding a copy of `src` (queued on the stream); `src` is dropped
    /// once the copy is queued (an external one waits for it, then drops its owner).
    pub(crate) fn copy_into_pool(&self, src: CudaBuffer) -> Result<CudaBuffer> {
        let me = self.arc()?;
        let dst = self.alloc(me, src.dtype, src.len)?;
        self.order(&[&src], &[])?;
        let bytes = src.len * src.dtype.size();
        if bytes > 0 {
            self.ctx
                .bind_to_thread()
                .map_err(driver_err("cuCtxGetCurrent"))?;
            // SAFETY: both ranges hold `bytes` bytes of live buffers of this context; the
            // copy is queued on the stream, before any later free of either.
            unsafe {
                drv::memcpy_dtod_async(
                    dst.device_ptr(),
                    src.device_ptr(),
                    bytes,
                    self.work_stream()?.cu_stream(),
                )
            }
            .map_err(driver_err("cuMemcpyDtoDAsync"))?;
        }
        Ok(dst)
    }

    /// An error naming `op` unless `buf` lives on this device.
    fn check_own(&self, buf: &CudaBuffer, op: &'static str) -> Result<()> {
        if buf.device.ordinal() != self.ordinal() {
            return Err(Error::DeviceMismatch {
                op,
                a: format!("cuda:{}", self.ordinal()),
                b: format!("cuda:{}", buf.device.ordinal()),
            });
        }
        Ok(())
    }

    /// Copies elements `start..start + len` of `buf` to the host, after the work that wrote
    /// it. Only those elements move, through the pinned staging buffer.
    pub fn download(&self, buf: &CudaBuffer, start: usize, len: usize) -> Result<HostBuf> {
        self.check_own(buf, "download")?;
        if start.checked_add(len).is_none_or(|end| end > buf.len) {
            return Err(Error::Shape {
                op: "download",
                msg: format!("elements {start}..{start}+{len} of a buffer of {}", buf.len),
            });
        }
        self.order(&[buf], &[])?;
        let size = buf.dtype.size();
        let src = buf.device_ptr() + (start * size) as u64;
        if buf.dtype == DType::Bool {
            // Read bools as bytes and map them, so that a stray byte other than 0/1 can
            // never become an invalid `bool`.
            let mut bytes = vec![0u8; len];
            // SAFETY: `bytes` is `len` writable bytes, only used after the call.
            unsafe { self.copy_to_host(src, bytes.as_mut_ptr(), len)? };
            return Ok(HostBuf::Bool(bytes.iter().map(|&b| b != 0).collect()));
        }
        let filled = {
            let fill = |dst: *mut u8, bytes: usize| {
                // a fresh destination: its pages are first touched by the copy-out
                advise_huge_pages(dst, bytes);
                // SAFETY: `dst` is the new vector's `bytes` writable bytes, untouched
                // elsewhere.
                if unsafe { self.read_registered(src, dst, bytes)? } {
                    return Ok(());
                }
                // SAFETY: as above.
                unsafe { self.copy_to_host(src, dst, bytes) }
            };
            // SAFETY: `copy_to_host` writes all `bytes` bytes at `dst` when it returns `Ok`.
            unsafe { HostBuf::try_filled(buf.dtype, len, fill) }
        };
        filled.map_err(|e| Error::OutOfMemory {
            op: "download",
            bytes: e.bytes,
            what: format!("{len} {} elements on the host", buf.dtype),
        })?
    }

    /// Copies all of `buf` into `dst`, which holds exactly its bytes, after the work that
    /// wrote it. A destination in page-locked memory ([`PinnedHost`], or memory
    /// another library allocated or registered with the driver) receives one DMA copy
    /// directly; any other goes through the staging buffer.
    pub fn download_into(&self, buf: &CudaBuffer, dst: &mut [u8]) -> Result<()> {
        self.check_own(buf, "download")?;
        if dst.len() != buf.len * buf.dtype.size() {
            return Err(Error::internal(
                "download",
                format!("{} bytes for {} {} elements", dst.len(), buf.len, buf.dtype),
            ));
        }
        let lane = self.order(&[buf], &[])?;
        if !dst.is_empty() && self.page_locked(dst.as_ptr(), dst.len())? {
            // SAFETY: `dst` is writable for its length, borrowed mutably until the stream
            // has finished the copy (synchronized below before returning).
            unsafe { drv::memcpy_dtoh_async(dst, buf.device_ptr(), lane.stream.cu_stream()) }
                .map_err(driver_err("cuMemcpyDtoHAsync"))?;
            return lane
                .stream
                .synchronize()
                .map_err(driver_err("cuStreamSynchronize"));
        }
        // SAFETY: `dst` is `dst.len()` writable bytes, borrowed mutably for the call.
        unsafe { self.copy_to_host(buf.device_ptr(), dst.as_mut_ptr(), dst.len()) }
    }

    /// Whether all `len > 0` bytes at host address `ptr` are page-locked memory known to
    /// the driver, in one allocation: its first and last byte are host memory of the same
    /// buffer (`cuPointerGetAttribute`; ordinary pageable memory is unknown to the driver,
    /// which then answers with an error, taken as "no").
    fn page_locked(&self, ptr: *const u8, len: usize) -> Result<bool> {
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let attr = |p: *const u8, a: drv_sys::CUpointer_attribute, out: *mut std::ffi::c_void| {
            // SAFETY: `out` points to a local of the attribute's type (a 32-bit memory
            // type or a 64-bit buffer id); the driver only inspects the address.
            unsafe { drv_sys::cuPointerGetAttribute(out, a, p as u64) }
                .result()
                .is_ok()
        };
        let mut kind: u32 = 0;
        let (mut first, mut last): (u64, u64) = (0, 1);
        let host = drv_sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32;
        Ok(attr(
            ptr,
            drv_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            &mut kind as *mut u32 as *mut std::ffi::c_void,
        ) && kind == host
            && attr(
                ptr,
                drv_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_BUFFER_ID,
                &mut first as *mut u64 as *mut std::ffi::c_void,
            )
            && attr(
                ptr.wrapping_add(len - 1),
                drv_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_BUFFER_ID,
                &mut last as *mut u64 as *mut std::ffi::c_void,
            )
            && first == last)
    }

    /// `bytes` bytes of zeroed page-locked host memory (`cuMemHostAlloc`), freed when the
    /// result is dropped.
    pub fn alloc_pinned_host(&self, bytes: usize) -> Result<PinnedHost> {
        let oom = |_| Error::OutOfMemory {
            op: "PinnedVec::zeros",
            bytes,
            what: "page-locked host memory".into(),
        };
        // SAFETY: the memory is zeroed below before anything reads it.
        let mut mem = unsafe {
            self.ctx
                .alloc_pinned_with_flags::<u8>(bytes.max(1), drv_sys::CU_MEMHOSTALLOC_PORTABLE)
        }
        .map_err(oom)?;
        let ptr = mem.as_mut_ptr().map_err(driver_err("cuEventSynchronize"))?;
        // SAFETY: `ptr` is the start of `bytes.max(1)` bytes just allocated and owned here.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes.max(1)) };
        Ok(PinnedHost {
            _mem: mem,
            ptr,
            bytes,
        })
    }

    /// Copies `len` bytes from device address `src` into the fresh host memory at `dst` by
    /// touching its pages on every thread ([`prefault`]), page-locking it for the copy
    /// (`cuMemHostRegister`), one DMA copy, and unregistering it, when that is the better
    /// way: the first readback of `len >= REGISTER_MIN` bytes on the device while the
    /// staging buffer is smaller than a staged copy would need. Allocating a 64 MiB
    /// staging buffer takes 20-25 ms, so a fresh process's first readback of the 64 MiB
    /// PSF took 26-42 ms staged against 8.1-10.6 ms registered (H100,
    /// `benches/NOTES.md`); but once the buffer exists a staged copy is faster (3.1 ms
    /// against 6.4 ms), so later readbacks grow it and go staged. `Ok(false)`: not done
    /// (the rule says no, or the driver refused the registration); the caller copies
    /// through the staging buffer.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and not accessed elsewhere during the call.
    unsafe fn read_registered(&self, src: u64, dst: *mut u8, len: usize) -> Result<bool> {
        let wanted = match crate::config::readback_mode() {
            1 => false,
            2 => len >= REGISTER_MIN,
            _ => {
                len >= REGISTER_MIN && {
                    let chunk = readback_chunk(len);
                    let need = len.div_ceil(chunk).min(2 * WINDOW_CHUNKS) * chunk;
                    let mut staging = lock(&self.staging.0);
                    let small = staging.pinned.as_ref().is_none_or(|p| p.len() < need);
                    small && !std::mem::replace(&mut staging.registered_once, true)
                }
            }
        };
        if !wanted {
            return Ok(false);
        }
        let lane = self.lane()?;
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        prefault(dst, len);
        // SAFETY: `dst..dst + len` is memory of this process the caller gives us for the
        // call; registering only pins its pages and maps them for the device.
        let registered = unsafe { drv_sys::cuMemHostRegister_v2(dst.cast(), len, 0) };
        if registered.result().is_err() {
            crate::config::debug_log!(
                1,
                "readback of {len} bytes: registration refused ({registered:?}); staged"
            );
            return Ok(false);
        }
        // SAFETY: `dst` is registered for `len` bytes (above) and written only by this
        // copy until the stream is synchronized below; `src..src + len` lies in the source
        // buffer (range checked by the caller).
        let copied =
            unsafe { drv_sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, lane.stream.cu_stream()) }
                .result()
                .map_err(driver_err("cuMemcpyDtoHAsync"))
                .and_then(|()| {
                    lane.stream
                        .synchronize()
                        .map_err(driver_err("cuStreamSynchronize"))
                });
        // SAFETY: `dst` was registered above and the copy into it has finished or failed
        // (the stream was synchronized, or the copy was never queued).
        let unregistered = unsafe { drv_sys::cuMemHostUnregister(dst.cast()) };
        copied?;
        unregistered
            .result()
            .map_err(driver_err("cuMemHostUnregister"))?;
        Ok(true)
    }

    /// Copies `len` bytes from device address `src` to host address `dst` through the
    /// staging buffer, after the work queued on this thread's stream. `dst` may be uninitialized; on `Ok` all `len`
    /// bytes are written.
    ///
    /// The copy goes in chunks ([`readback_chunk`]), each followed by an event; the host
    /// polls the events and copies each chunk out as soon as it has arrived, while the
    /// device copies the next ones. Windows of [`WINDOW_CHUNKS`] chunks alternate between
    /// the two halves of the staging buffer, so a readback of any size holds at most
    /// `2 * WINDOW_CHUNKS` chunks there; the next window but one is queued when a window
    /// has been copied out. Windows of 2 MiB and more are copied out on every worker
    /// thread, each taking whole chunks.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and not accessed elsewhere during the call.
    unsafe fn copy_to_host(&self, src: u64, dst: *mut u8, len: usize) -> Result<()> {
        if len == 0 {
            return self.synchronize_lane();
        }
        let lane = self.lane()?;
        let mut staging = lock(&self.staging.0);
        let chunk = readback_chunk(len);
        let n = len.div_ceil(chunk);
        let slots = n.min(2 * WINDOW_CHUNKS);
        // addresses as integers, so that the copy-out closures are Send
        let base = self.staging_at_least(&mut staging.pinned, slots * chunk)? as usize;
        let dst = dst as usize;
        while staging.events.len() < slots {
            let event = self
                .ctx
                .new_event(None)
                .map_err(driver_err("cuEventCreate"))?;
            staging.events.push(event);
        }
        let events = &staging.events;
        let slot = |i: usize| i % slots;
        let part = |i: usize| chunk.min(len - i * chunk);
        let window = |w: usize| w * WINDOW_CHUNKS..((w + 1) * WINDOW_CHUNKS).min(n);
        let enqueue = |w: usize| -> Result<()> {
            self.ctx
                .bind_to_thread()
                .map_err(driver_err("cuCtxGetCurrent"))?;
            for i in window(w) {
                // SAFETY: slot `slot(i)` is `chunk >= part(i)` pinned bytes inside the
                // staging buffer (`slots * chunk` bytes), owned by this thread through the
                // staging mutex; no host copy reads it now (the window that used it last,
                // `w - 2`, has been copied out); the copy reads `part(i)` bytes from
                // `src + i * chunk`, inside the source (range checked by the caller).
                let stage = unsafe {
                    std::slice::from_raw_parts_mut((base + slot(i) * chunk) as *mut u8, part(i))
                };
                // SAFETY: as above; `stage` is read only after this chunk's event.
                unsafe {
                    drv::memcpy_dtoh_async(stage, src + (i * chunk) as u64, lane.stream.cu_stream())
                }
                .map_err(driver_err("cuMemcpyDtoHAsync"))?;
                events[slot(i)]
                    .record(&lane.stream)
                    .map_err(driver_err("cuEventRecord"))?;
            }
            Ok(())
        };
        let copy_out = |i: usize| -> Result<()> {
            wait_for(&events[slot(i)])?;
            // SAFETY: chunk i's copy into its slot has completed (its event, recorded after
            // it, has) and the device writes only other slots until this window is copied
            // out; bytes `i * chunk..` of `dst` lie inside its `len` writable bytes (the
            // caller's contract), and each chunk is copied by one thread.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (base + slot(i) * chunk) as *const u8,
                    (dst + i * chunk) as *mut u8,
                    part(i),
                )
            };
            Ok(())
        };
        let windows = n.div_ceil(WINDOW_CHUNKS);
        enqueue(0)?;
        if windows > 1 {
            enqueue(1)?;
        }
        for w in 0..windows {
            let chunks = window(w);
            let bytes = (chunks.end - chunks.start) * chunk;
            if bytes >= PARALLEL_COPY_OUT && crate::runtime::cpu::threads() > 1 {
                use rayon::prelude::*;
                crate::runtime::cpu::in_pool(|| {
                    chunks.into_par_iter().try_for_each(|i| {
                        self.ctx
                            .bind_to_thread()
                            .map_err(driver_err("cuCtxGetCurrent"))?;
                        copy_out(i)
                    })
                })?;
            } else {
                chunks.into_iter().try_for_each(copy_out)?;
            }
            if w + 2 < windows {
                enqueue(w + 2)?;
            }
        }
        Ok(())
    }
}

/// Waits for `event`: polls it for up to 200 us (the next chunk of a readback arrives in
/// tens of microseconds, and polling sees it at once), then blocks, so that a readback
/// behind long kernels does not spin.
fn wait_for(event: &CudaEvent) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        if event
            .try_is_complete()
            .map_err(driver_err("cuEventQuery"))?
        {
            return Ok(());
        }
        if start.elapsed() > std::time::Duration::from_micros(200) {
            return event
                .synchronize()
                .map_err(driver_err("cuEventSynchronize"));
        }
        std::hint::spin_loop();
    }
}
