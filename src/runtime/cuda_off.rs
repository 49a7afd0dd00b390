//! Stand-in for the CUDA backend when the `cuda` feature is off: same API, every call
//! returns `Error::NoCuda`.

use crate::{Error, Result};
use lazyfuse_codegen::{DType, HostBuf, Kernel, LaunchArgs};
use std::sync::Arc;

fn off<T>() -> Result<T> {
    Err(Error::NoCuda(
        "lazyfuse was built without the `cuda` feature".into(),
    ))
}

/// A CUDA device (never constructed without the `cuda` feature).
#[derive(Debug)]
pub struct CudaDevice {
    _never: std::convert::Infallible,
}

/// Page-locked host memory (never constructed without the `cuda` feature).
#[derive(Debug)]
pub struct PinnedHost {
    _never: std::convert::Infallible,
}

impl PinnedHost {
    /// Unreachable.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        match self._never {}
    }
    /// Unreachable.
    pub fn bytes(&self) -> usize {
        match self._never {}
    }
}

/// A device buffer (never constructed without the `cuda` feature).
#[derive(Debug)]
pub struct CudaBuffer {
    _never: std::convert::Infallible,
}

impl CudaBuffer {
    /// Element dtype.
    pub fn dtype(&self) -> DType {
        match self._never {}
    }
    /// Element count.
    pub fn len(&self) -> usize {
        match self._never {}
    }
    /// The owning device.
    pub fn device(&self) -> &'static CudaDevice {
        match self._never {}
    }
    /// Unreachable.
    pub fn is_external(&self) -> bool {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn device_ptr(&self) -> u64 {
        match self._never {}
    }
}

impl CudaDevice {
    /// Always false.
    pub fn available() -> bool {
        false
    }
    /// Always 0.
    pub fn count() -> usize {
        0
    }
    /// Always why CUDA cannot be used: the feature is off.
    pub fn probe() -> std::result::Result<usize, String> {
        Err("lazyfuse was built without the `cuda` feature".into())
    }
    /// Always an error.
    pub fn open(_ordinal: usize) -> Result<&'static CudaDevice> {
        off()
    }
    /// Unreachable.
    pub fn ordinal(&self) -> usize {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn attached(&self) -> &crate::runtime::attached::Attached {
        match self._never {}
    }
    /// Unreachable.
    pub fn name(&self) -> &str {
        match self._never {}
    }
    /// Unreachable.
    pub fn synchronize(&self) -> Result<()> {
        match self._never {}
    }
    /// Unreachable.
    pub fn raw_stream(&self) -> Result<u64> {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn order_read(&self, _buf: &CudaBuffer) -> Result<()> {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn new_lane(&self) -> Result<Arc<lane::Lane>> {
        match self._never {}
    }
    /// Unreachable.
    ///
    /// # Safety
    /// None needed: never called.
    pub unsafe fn wait_for_stream(&self, _stream: u64) -> Result<()> {
        match self._never {}
    }
    /// Unreachable.
    ///
    /// # Safety
    /// None needed: never called.
    pub(crate) unsafe fn order_stream_after(&self, _stream: u64) -> Result<()> {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn synchronize_context(&self) -> Result<()> {
        match self._never {}
    }
    /// Unreachable.
    ///
    /// # Safety
    /// None needed: never called.
    pub(crate) unsafe fn wrap_external(
        &self,
        _ptr: u64,
        _dtype: DType,
        _len: usize,
        _owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<CudaBuffer> {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn copy_into_pool(&self, _src: CudaBuffer) -> Result<CudaBuffer> {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn timing_event(&self) -> Result<TimingEvent> {
        match self._never {}
    }
    /// Unreachable.
    pub fn upload(&self, _h: &HostBuf) -> Result<CudaBuffer> {
        match self._never {}
    }
    /// Unreachable.
    pub fn upload_bytes(&self, _d: DType, _len: usize, _bytes: &[u8]) -> Result<CudaBuffer> {
        match self._never {}
    }
    /// Unreachable.
    pub fn download(&self, _b: &CudaBuffer, _start: usize, _len: usize) -> Result<HostBuf> {
        match self._never {}
    }
    /// Unreachable.
    pub fn download_into(&self, _b: &CudaBuffer, _dst: &mut [u8]) -> Result<()> {
        match self._never {}
    }
    /// Unreachable.
    pub fn alloc_pinned_host(&self, _bytes: usize) -> Result<PinnedHost> {
        match self._never {}
    }
    /// Unreachable.
    pub(crate) fn run_kernel_shared(
        &self,
        _k: &std::sync::Arc<Kernel>,
        _i: &[&CudaBuffer],
        _a: &LaunchArgs,
    ) -> Result<Vec<CudaBuffer>> {
        match self._never {}
    }
    /// Unreachable.
    pub fn run_kernel(
        &self,
        _k: &Kernel,
        _i: &[&CudaBuffer],
        _a: &LaunchArgs,
    ) -> Result<Vec<CudaBuffer>> {
        match self._never {}
    }
}

/// A CUDA timing event (never constructed without the `cuda` feature).
pub struct TimingEvent {
    _never: std::convert::Infallible,
}

/// Unreachable: no event exists.
pub(crate) fn event_elapsed(a: &TimingEvent, _b: &TimingEvent) -> Result<std::time::Duration> {
    match a._never {}
}

/// NVRTC is never present without the `cuda` feature.
pub fn nvrtc_check(_kernel: &Kernel) -> Result<bool> {
    Ok(false)
}

/// Streams per thread (none without the `cuda` feature).
pub(crate) mod lane {
    use std::sync::Arc;

    /// A stream (never constructed without the `cuda` feature).
    #[derive(Debug)]
    pub(crate) struct Lane {
        _never: std::convert::Infallible,
    }

    impl Lane {
        /// Unreachable.
        pub(crate) fn synchronize(&self) -> crate::Result<()> {
            match self._never {}
        }
        /// Unreachable.
        pub(crate) fn raw(&self) -> u64 {
            match self._never {}
        }
    }

    /// Unreachable with a lane; runs `f`.
    pub(crate) fn with_lane<R>(lane: Arc<Lane>, _f: impl FnOnce() -> R) -> R {
        match lane._never {}
    }
}
