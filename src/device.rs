//! Devices: the closed `Device` enum (CPU or one CUDA GPU) and the process-wide default.

use crate::runtime::cuda::CudaDevice;
use crate::{Error, Result};
use std::fmt;
use std::sync::{Arc, RwLock};

/// Where arrays live and kernels run.
#[derive(Clone)]
pub enum Device {
    /// The host: fused kernels run through the IR interpreter on all cores.
    Cpu,
    /// One CUDA GPU.
    Cuda(Arc<CudaDevice>),
}

impl Device {
    /// The host CPU.
    pub fn cpu() -> Device {
        Device::Cpu
    }

    /// CUDA device `ordinal`; an error when no usable driver or GPU exists (or the `cuda`
    /// feature is off).
    pub fn cuda(ordinal: usize) -> Result<Device> {
        Ok(Device::Cuda(CudaDevice::open(ordinal)?))
    }

    /// What [`Device::default`] picks, as a `Result`: `LAZYFUSE_DEVICE=cpu|cuda|cuda:N`
    /// forces a device (forcing CUDA where none is usable is an error); unset, CUDA device 0
    /// when usable, else the CPU.
    pub fn try_default() -> Result<Device> {
        match std::env::var("LAZYFUSE_DEVICE").ok().as_deref() {
            None | Some("") => {
                if CudaDevice::available() {
                    if let Ok(d) = Device::cuda(0) {
                        return Ok(d);
                    }
                }
                Ok(Device::Cpu)
            }
            Some("cpu") => Ok(Device::Cpu),
            Some("cuda") => Device::cuda(0),
            Some(s) => match s.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
                Some(n) => Device::cuda(n),
                None => Err(Error::Config(format!(
                    "LAZYFUSE_DEVICE={s}: expected cpu, cuda or cuda:N"
                ))),
            },
        }
    }

    /// True for a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// A human-readable name ("cpu", "NVIDIA H200").
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_string(),
            Device::Cuda(d) => d.name().to_string(),
        }
    }

    /// The CUDA memory pool's `(used, reserved)` bytes on this device (`None` on the CPU):
    /// what stream-ordered allocations hold now, and what the pool keeps from the driver.
    /// Loops that keep memory flat keep both flat after their first steps.
    pub fn pool_usage(&self) -> Result<Option<(u64, u64)>> {
        match self {
            Device::Cpu => Ok(None),
            #[cfg(feature = "cuda")]
            Device::Cuda(d) => d.pool_usage().map(Some),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => Ok(None),
        }
    }

    /// Waits for all work queued on the device.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(d) => {
                let p = crate::profile::begin_wall();
                let r = d.synchronize();
                let kind = crate::profile::EntryKind::Wait;
                crate::profile::host_done(p, kind, "synchronize", String::new(), 0);
                r
            }
        }
    }
}

impl Default for Device {
    /// See [`Device::try_default`].
    ///
    /// # Panics
    /// When `LAZYFUSE_DEVICE` forces a device that cannot be opened (a configuration error
    /// the `Default` trait cannot report); use [`Device::try_default`] to get the error.
    fn default() -> Device {
        Device::try_default().unwrap_or_else(|e| panic!("lazyfuse: Device::default(): {e}"))
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
            (Device::Cuda(a), Device::Cuda(b)) => a.ordinal() == b.ordinal(),
            _ => false,
        }
    }
}
impl Eq for Device {}

impl std::hash::Hash for Device {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Device::Cpu => 0usize.hash(state),
            Device::Cuda(d) => (1 + d.ordinal()).hash(state),
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(d) => write!(f, "cuda:{}", d.ordinal()),
        }
    }
}
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

static DEFAULT: RwLock<Option<Device>> = RwLock::new(None);

/// Makes `dev` the device creation functions use.
pub fn set_default_device(dev: &Device) {
    *DEFAULT.write().unwrap_or_else(|e| e.into_inner()) = Some(dev.clone());
}

thread_local! {
    static SCOPED: std::cell::RefCell<Vec<Device>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with `dev` as the default device of the current thread (other threads keep
/// the process-wide default); restores the previous default afterwards, even on panic.
pub fn with_default_device<R>(dev: &Device, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPED.with(|s| s.borrow_mut().pop());
        }
    }
    SCOPED.with(|s| s.borrow_mut().push(dev.clone()));
    let _pop = Pop;
    f()
}

/// The device creation functions use: the innermost [`with_default_device`] of this
/// thread, else the process-wide default (initialized from [`Device::default`] on first
/// use).
pub fn default_device() -> Device {
    if let Some(d) = SCOPED.with(|s| s.borrow().last().cloned()) {
        return d;
    }
    if let Some(d) = DEFAULT.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return d.clone();
    }
    let mut w = DEFAULT.write().unwrap_or_else(|e| e.into_inner());
    w.get_or_insert_with(Device::default).clone()
}
