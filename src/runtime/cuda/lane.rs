//! Streams per thread ("lanes"): each thread that queues work on a device gets a stream of
//! its own from the device's pool at first use (returned when the thread ends), or the one
//! `lf::with_stream` names. Buffers remember the lanes that wrote and read them; a lane that
//! uses a buffer another lane wrote queues a wait on an event recorded on that lane
//! (`cuStreamWaitEvent`), never a host wait, and a buffer's free is ordered after every
//! lane that used it. Shared per-device resources used in stream order (cuFFT's work area
//! and plans, cuBLAS's handle, a graph's arena) are ordered the same way by
//! [`order_after`] on their last user.

use super::compile::lock;
use super::device::CudaDevice;
use super::driver_err;
use super::memory::FreeList;
use crate::thread_field::Field;
use crate::{Error, Result};
use cudarc::driver::{sys as drv_sys, CudaSlice, CudaStream};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Most pooled lanes per device; further threads share them round-robin (a lane is safe to
/// share: work on one stream is ordered whichever thread queued it).
const MAX_LANES: usize = 32;

/// One stream of a device with what must be per stream: the buffers freed on it (reusable
/// on it without events) and the completion counters of its multi-block reductions.
pub(crate) struct Lane {
    /// Index among the device's lanes (0 is the stream the device opened with).
    pub(crate) id: usize,
    /// The device's ordinal.
    pub(crate) ordinal: usize,
    pub(crate) stream: Arc<CudaStream>,
    /// Freed buffers of this stream kept for reuse.
    pub(super) free: FreeList,
    /// Zeroed completion counters of multi-block reductions (kernels leave them zeroed).
    pub(super) counters: std::sync::OnceLock<CudaSlice<i32>>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream {} of cuda:{}", self.id, self.ordinal)
    }
}

impl Lane {
    pub(super) fn new(id: usize, ordinal: usize, stream: Arc<CudaStream>) -> Lane {
        Lane {
            id,
            ordinal,
            stream,
            free: FreeList::default(),
            counters: std::sync::OnceLock::new(),
        }
    }

    /// Queues on this lane a wait for all work queued so far on `other` (an event recorded
    /// there now; the host does not wait).
    pub(crate) fn wait_for(&self, other: &Lane) -> Result<()> {
        if std::ptr::eq(self, other) {
            return Ok(());
        }
        let event = other
            .stream
            .record_event(Some(drv_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(driver_err("cuEventRecord"))?;
        crate::profile::calls::note("cuEventCreate");
        self.stream
            .wait(&event)
            .map_err(driver_err("cuStreamWaitEvent"))?;
        crate::profile::calls::note("cuEventDestroy");
        Ok(())
    }
}

/// The lanes of one device: every lane made (for `synchronize`) and the idle ones.
pub(crate) struct Lanes {
    all: Vec<Arc<Lane>>,
    idle: Vec<Arc<Lane>>,
    /// Round-robin position for threads beyond [`MAX_LANES`].
    next_shared: usize,
}

impl Lanes {
    /// The lanes of a device that opened with the stream of `first`.
    pub(super) fn new(first: Arc<Lane>) -> Lanes {
        Lanes {
            all: vec![first.clone()],
            idle: vec![first],
            next_shared: 0,
        }
    }
}

/// A lane lent to a thread; back to the device's idle list when the thread ends.
pub(super) struct Lease {
    dev: &'static CudaDevice,
    lane: Arc<Lane>,
    pooled: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.pooled {
            lock(&self.dev.lanes).idle.push(self.lane.clone());
        }
    }
}

/// This thread's lane of each device it used (returned when the thread ends).
const LEASES: Field<super::ThreadCuda, RefCell<SmallVec<[Lease; 1]>>> =
    Field::new(&super::THREAD, |t| &t.leases);
/// Lanes chosen by `with_stream` on this thread, innermost last.
const CHOSEN: Field<super::ThreadCuda, RefCell<SmallVec<[Arc<Lane>; 1]>>> =
    Field::new(&super::THREAD, |t| &t.chosen);

impl CudaDevice {
    /// The lane work of this thread goes to: the one `with_stream` chose, else this
    /// thread's own (taken from the pool at first use).
    pub(crate) fn lane(&self) -> Result<Arc<Lane>> {
        let ordinal = self.ordinal();
        let chosen = CHOSEN.with(|c| {
            c.borrow()
                .iter()
                .rev()
                .find(|l| l.ordinal == ordinal)
                .cloned()
        });
        if let Some(l) = chosen {
            return Ok(l);
        }
        if let Some(l) = LEASES.with(|l| {
            l.borrow()
                .iter()
                .find(|x| x.lane.ordinal == ordinal)
                .map(|x| x.lane.clone())
        }) {
            return Ok(l);
        }
        let (lane, pooled) = self.take_lane()?;
        LEASES.with(|l| {
            l.borrow_mut().push(Lease {
                dev: self.arc()?,
                lane: lane.clone(),
                pooled,
            });
            Ok::<_, Error>(())
        })?;
        Ok(lane)
    }

    /// An idle lane, a new one, or (beyond [`MAX_LANES`]) a shared one; with whether it
    /// returns to the pool.
    fn take_lane(&self) -> Result<(Arc<Lane>, bool)> {
        let mut lanes = lock(&self.lanes);
        if let Some(l) = lanes.idle.pop() {
            return Ok((l, true));
        }
        if lanes.all.len() >= MAX_LANES {
            lanes.next_shared = (lanes.next_shared + 1) % lanes.all.len();
            return Ok((lanes.all[lanes.next_shared].clone(), false));
        }
        let lane = self.make_lane(lanes.all.len())?;
        lanes.all.push(lane.clone());
        Ok((lane, true))
    }

    fn make_lane(&self, id: usize) -> Result<Arc<Lane>> {
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let stream = self
            .ctx
            .new_stream()
            .map_err(driver_err("cuStreamCreate"))?;
        Ok(Arc::new(Lane::new(id, self.ordinal(), stream)))
    }

    /// A new stream of this device, outside the pool (for `lf::with_stream`).
    pub(crate) fn new_lane(&self) -> Result<Arc<Lane>> {
        let mut lanes = lock(&self.lanes);
        let lane = self.make_lane(lanes.all.len())?;
        lanes.all.push(lane.clone());
        Ok(lane)
    }

    /// Every lane made so far (the device's first stream included).
    pub(super) fn all_lanes(&self) -> Vec<Arc<Lane>> {
        lock(&self.lanes).all.clone()
    }
}

/// Runs `f` with `lane` as this thread's lane of its device.
pub(crate) fn with_lane<R>(lane: Arc<Lane>, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            CHOSEN.with(|c| c.borrow_mut().pop());
        }
    }
    CHOSEN.with(|c| c.borrow_mut().push(lane));
    let _pop = Pop;
    f()
}

/// Which lanes used a buffer: its home lane (it was allocated there and is freed there)
/// wrote it unless `writer` says otherwise; `readers` waited for the writer and may still
/// be reading.
#[derive(Default)]
pub(super) struct Users {
    writer: Option<Arc<Lane>>,
    readers: SmallVec<[Arc<Lane>; 2]>,
}

/// The per-buffer record of [`Users`], with a flag that keeps the common case (used only
/// on its home lane) free of the lock.
#[derive(Default)]
pub(super) struct Tracking {
    shared: AtomicBool,
    users: Mutex<Users>,
}

impl Tracking {
    /// Orders a use of the buffer on `lane` after the writes (and, for a write, the reads)
    /// of other lanes: a read waits for the last writer once per lane; a write waits for
    /// every lane that used the buffer, then becomes its writer.
    pub(super) fn use_on(&self, home: &Arc<Lane>, lane: &Arc<Lane>, write: bool) -> Result<()> {
        if Arc::ptr_eq(home, lane) && !self.shared.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut u = lock(&self.users);
        let writer = u.writer.clone().unwrap_or_else(|| home.clone());
        if !write {
            if Arc::ptr_eq(&writer, lane) || u.readers.iter().any(|r| Arc::ptr_eq(r, lane)) {
                return Ok(());
            }
            lane.wait_for(&writer)?;
            u.readers.push(lane.clone());
            self.shared.store(true, Ordering::Release);
            return Ok(());
        }
        lane.wait_for(&writer)?;
        for r in std::mem::take(&mut u.readers) {
            lane.wait_for(&r)?;
        }
        u.writer = (!Arc::ptr_eq(lane, home)).then(|| lane.clone());
        self.shared.store(u.writer.is_some(), Ordering::Release);
        Ok(())
    }

    /// Orders the buffer's free on `home` after every other lane's use of it.
    pub(super) fn before_free(&self, home: &Arc<Lane>) -> Result<()> {
        if !self.shared.load(Ordering::Acquire) {
            return Ok(());
        }
        let u = lock(&self.users);
        for l in u.writer.iter().chain(u.readers.iter()) {
            home.wait_for(l)?;
        }
        Ok(())
    }
}

/// Orders uses of a shared resource (in stream order) across lanes, on its last-user slot
/// (guarded by the resource's own lock while the work is queued): `lane` waits for the last
/// user when that was another lane, and becomes the last user.
pub(crate) fn order_after(last: &mut Option<Arc<Lane>>, lane: &Arc<Lane>) -> Result<()> {
    if let Some(prev) = last.as_ref() {
        if !Arc::ptr_eq(prev, lane) {
            lane.wait_for(prev)?;
        }
    }
    *last = Some(lane.clone());
    Ok(())
}

impl Lane {
    /// Waits (on the host) for the work queued on this lane.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }
    /// The raw `CUstream` handle as an integer.
    pub(crate) fn raw(&self) -> u64 {
        self.stream.cu_stream() as u64
    }
}
