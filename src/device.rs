//! Devices: the closed `Device` enum (CPU or one CUDA GPU) and the default device (kept in
//! the process's `Config` and the calling thread's scopes).

use crate::config::{CONFIG, SCOPES};
use crate::runtime::cuda::CudaDevice;
use crate::{Error, Result};
use std::fmt;
use std::sync::Arc;

/// The environment variable that forces the default device.
const ENV: &str = "LAZYFUSE_DEVICE";

/// The CUDA devices of a machine with `n >= 1` of them, as an error message lists them:
/// "cuda:0 (1 device)", "cuda:0, cuda:1 (2 devices)", "cuda:0 to cuda:7 (8 devices)".
fn cuda_devices(n: usize) -> String {
    let names = match n {
        0..=4 => (0..n)
            .map(|i| format!("cuda:{i}"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => format!("cuda:0 to cuda:{}", n - 1),
    };
    let s = if n == 1 { "" } else { "s" };
    format!("{names} ({n} device{s})")
}

/// Where arrays live and kernels run.
#[derive(Clone)]
pub enum Device {
    /// The host: fused kernels run through the IR interpreter on all cores.
    Cpu,
    /// One CUDA GPU.
    Cuda(&'static CudaDevice),
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

    /// What [`Device::default`] picks, as a `Result`. `LAZYFUSE_DEVICE` unset (or blank):
    /// CUDA device 0 when a usable driver and GPU exist, else the CPU. Set to `cpu`, `cuda`
    /// or `cuda:N` (surrounding spaces and case ignored), it forces that device, and a
    /// forced device that cannot be used is an [`Error::Config`] naming the variable and its
    /// value, never a quiet CPU run: `cuda:7` on a machine with one GPU says which devices
    /// exist, `cuda` without a usable driver or GPU says why CUDA is unusable. Any other
    /// value is an error too.
    pub fn try_default() -> Result<Device> {
        let raw = match crate::config::device_var() {
            Ok(v) => v,
            Err(v) => {
                return Err(Error::Config(format!(
                    "{ENV}={v:?}: not UTF-8; expected cpu, cuda or cuda:N"
                )))
            }
        };
        let bad = |why: String| Error::Config(format!("{ENV}={raw:?}: {why}"));
        let ordinal = match raw.trim().to_ascii_lowercase().as_str() {
            "" => {
                if CudaDevice::available() {
                    if let Ok(d) = Device::cuda(0) {
                        return Ok(d);
                    }
                }
                return Ok(Device::Cpu);
            }
            "cpu" => return Ok(Device::Cpu),
            "cuda" => 0,
            s => match s.strip_prefix("cuda:").and_then(|n| n.trim().parse().ok()) {
                Some(n) => n,
                None => {
                    return Err(bad(
                        "not a device; expected cpu, cuda or cuda:N, or unset for the GPU \
                         when one works, else the CPU"
                            .into(),
                    ))
                }
            },
        };
        let count =
            CudaDevice::probe().map_err(|why| bad(format!("no CUDA device is usable: {why}")))?;
        if ordinal >= count {
            return Err(bad(format!(
                "no such device; this machine has {}",
                cuda_devices(count)
            )));
        }
        Device::cuda(ordinal).map_err(|e| bad(format!("cuda:{ordinal} cannot be opened: {e}")))
    }

    /// The number of CUDA devices this process can open (`Device::cuda(0..n)`): 0 without
    /// a usable driver or GPU, or with the `cuda` feature off. Never panics; the answer is
    /// computed once per process.
    pub fn cuda_count() -> usize {
        CudaDevice::count()
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
                let range = crate::nvtx::range(c"lazyfuse.synchronize");
                let r = d.synchronize();
                drop(range);
                let kind = crate::profile::EntryKind::Wait;
                crate::profile::host_done(p, kind, "synchronize", String::new(), 0);
                r
            }
        }
    }
}

impl Device {
    /// A new stream of this device (CuPy's `cupy.cuda.Stream()`): work that
    /// [`with_stream`] runs on it queues there, in order, concurrently with other streams.
    /// Without it, each thread queues its work on a stream of its own, taken from the
    /// device's pool at its first use. On the CPU the stream is a no-op handle.
    pub fn new_stream(&self) -> Result<Stream> {
        Ok(Stream {
            device: self.clone(),
            lane: match self {
                Device::Cpu => None,
                Device::Cuda(d) => Some(d.new_lane()?),
            },
        })
    }
}

/// A stream of one device ([`Device::new_stream`]), chosen for a block of code with
/// [`with_stream`]. Work on different streams may run concurrently; an array produced on
/// one stream and read on another is ordered by an event (the host does not wait), and
/// its memory is freed only after every stream that used it is done with it.
#[derive(Clone)]
pub struct Stream {
    device: Device,
    lane: Option<Arc<crate::runtime::cuda::lane::Lane>>,
}

impl Stream {
    /// The stream's device.
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Waits for the work queued on this stream.
    pub fn synchronize(&self) -> Result<()> {
        match &self.lane {
            None => Ok(()),
            Some(l) => l.synchronize(),
        }
    }
    /// The raw `CUstream` handle as an integer (0 on the CPU), for other CUDA code.
    pub fn raw(&self) -> u64 {
        self.lane.as_ref().map_or(0, |l| l.raw())
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lane {
            None => write!(f, "Stream(cpu)"),
            Some(l) => write!(f, "Stream({l:?})"),
        }
    }
}

/// Runs `f` with its work on `stream`'s device queued on `stream` (CuPy's `with stream:`),
/// instead of the calling thread's own stream; work on other devices is unaffected. Nests;
/// the previous choice returns when `f` returns or panics.
///
/// ```
/// use lazyfuse as lf;
/// # fn main() -> lf::Result<()> {
/// let dev = lf::default_device();
/// let s = dev.new_stream()?;
/// let x = lf::Array::linspace_on(0.0, 1.0, 1000, lf::DType::F32, &dev);
/// let y = lf::with_stream(&s, || (&x * 2.0).sin().eval().map(|_| ()));
/// y?;
/// s.synchronize()?;
/// # Ok(())
/// # }
/// ```
pub fn with_stream<R>(stream: &Stream, f: impl FnOnce() -> R) -> R {
    match &stream.lane {
        None => f(),
        Some(l) => crate::runtime::cuda::lane::with_lane(l.clone(), f),
    }
}

impl Default for Device {
    /// See [`Device::try_default`].
    ///
    /// # Panics
    /// Where that is an error: `LAZYFUSE_DEVICE` is set to a device that cannot be used, or
    /// to no device name. The message names the variable and its value. A misconfigured
    /// device never turns into a quiet run on another one; use [`Device::try_default`] to
    /// get the error as a value.
    #[track_caller]
    fn default() -> Device {
        match Device::try_default() {
            Ok(d) => d,
            Err(e) => no_default(&e),
        }
    }
}

/// The panic of an infallible call that needs a default device that cannot be had.
#[track_caller]
fn no_default(e: &Error) -> ! {
    panic!("lazyfuse: no default device: {e}")
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

/// Makes `dev` the device creation functions use, whatever `LAZYFUSE_DEVICE` says (a bad
/// value of it is then never read by them; [`Device::default`] still reads it).
pub fn set_default_device(dev: &Device) {
    *CONFIG
        .default_device
        .write()
        .unwrap_or_else(|e| e.into_inner()) = Some(dev.clone());
}

/// Runs `f` with `dev` as the default device of the current thread (other threads keep
/// the process-wide default); restores the previous default afterwards, even on panic.
pub fn with_default_device<R>(dev: &Device, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPES.with(|s| s.devices.borrow_mut().pop());
        }
    }
    SCOPES.with(|s| s.devices.borrow_mut().push(dev.clone()));
    let _pop = Pop;
    f()
}

/// The device creation functions use: the innermost [`with_default_device`] of this
/// thread, else the one [`set_default_device`] set, else [`Device::try_default`] (resolved
/// once per process).
///
/// # Panics
/// When it comes to that last one and it is an error (`LAZYFUSE_DEVICE` is set to a device
/// that cannot be used, or to no device name), with a message naming the variable and its
/// value. So do the infallible builders on the default device (`zeros`, `scalar`,
/// `arange`, `random::normal`, ...), while the fallible ones (`Array::from_vec`,
/// `from_slice`) return the error. An explicit [`set_default_device`] or
/// [`with_default_device`] overrides the variable.
#[track_caller]
pub fn default_device() -> Device {
    match try_default_device() {
        Ok(d) => d,
        Err(e) => no_default(&e),
    }
}

/// [`default_device`] with a default from the environment that cannot be had as the error.
pub(crate) fn try_default_device() -> Result<Device> {
    if let Some(d) = SCOPES.with(|s| s.devices.borrow().last().cloned()) {
        return Ok(d);
    }
    if let Some(d) = CONFIG
        .default_device
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        return Ok(d.clone());
    }
    match CONFIG.env_device.get_or_init(Device::try_default) {
        Ok(d) => Ok(d.clone()),
        Err(e) => Err(replay(e)),
    }
}

/// A copy of an error from opening a device (`Error` is not `Clone`: it can hold FFI
/// diagnostics; the ones opening a device gives are plain text).
fn replay(e: &Error) -> Error {
    match e {
        Error::NoCuda(m) => Error::NoCuda(m.clone()),
        Error::Cuda { op, msg } => Error::Cuda {
            op,
            msg: msg.clone(),
        },
        Error::Config(m) => Error::Config(m.clone()),
        e => Error::Config(e.to_string()),
    }
}
