//! Zero-copy interop with other CUDA code: raw device pointers out of evaluated arrays
//! ([`Array::cuda_ptr`]) and into arrays ([`Array::from_cuda_ptr`]), stream ordering
//! between lazyfuse's stream and foreign ones, and DLPack (`dlpack`).

mod dlpack;
mod pinned;

pub use pinned::PinnedVec;

use crate::graph::{Node, Shape};
use crate::runtime::{self, Buffer};
use crate::{Array, DType, Device, Error, Result};
use lazyfuse_codegen::HostBuf;
use std::any::Any;
use std::sync::Arc;

/// The device memory of an evaluated CUDA array, for handing to other CUDA code (a
/// hand-written kernel, cuBLAS, PyTorch through `torch.cuda.ExternalStream`, CuPy's
/// `UnownedMemory`). Returned by [`Array::cuda_ptr`].
///
/// The memory holds [`CudaPtr::size`] elements of [`CudaPtr::dtype`], contiguous in C
/// order ([`CudaPtr::strides`] says so explicitly, in elements), and stays allocated while
/// this value lives: it holds a reference to the array's buffer, so lazyfuse neither frees
/// nor reuses it (in place) meanwhile.
///
/// **Ordering.** The kernels that compute the array are queued, possibly still running, on
/// lazyfuse's stream of the device, [`CudaPtr::stream`]. Work of your own must run on that
/// stream or wait for it (`cudaStreamWaitEvent` after an event recorded on it, or
/// `Device::synchronize`) before it reads the memory. Treat the memory as read-only:
/// lazyfuse buffers are shared by equal expressions. Before dropping the `CudaPtr`, make
/// sure your reads are done or ordered before lazyfuse's stream (for instance with
/// [`Device::wait_for_stream`] on your stream): once dropped, lazyfuse may reuse the memory
/// for work queued on its own stream.
pub struct CudaPtr {
    ptr: u64,
    stream: u64,
    shape: Vec<usize>,
    strides: Vec<isize>,
    dtype: DType,
    ordinal: usize,
    /// Keeps the memory allocated and out of in-place reuse.
    _buffer: Arc<Buffer>,
}

impl CudaPtr {
    /// The device address of element 0 (256-byte aligned for lazyfuse's allocations).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// The raw `CUstream` handle, as an integer, that the producing kernels are queued on.
    pub fn stream(&self) -> u64 {
        self.stream
    }
    /// The array's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Strides in elements, C order (the memory is contiguous).
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The CUDA device ordinal.
    pub fn device_ordinal(&self) -> usize {
        self.ordinal
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }
    /// Number of bytes of the elements.
    pub fn nbytes(&self) -> usize {
        self.size() * self.dtype.size()
    }
}

impl std::fmt::Debug for CudaPtr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaPtr({:#x}, {}, shape={:?}, cuda:{}, stream={:#x})",
            self.ptr, self.dtype, self.shape, self.ordinal, self.stream
        )
    }
}

/// C-order strides of `shape`, in elements.
pub(crate) fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1) as isize);
    }
    s
}

impl Array {
    /// Evaluates the array if needed and returns its device memory, with the stream its
    /// kernels are queued on (see [`CudaPtr`] for the ordering rules). A view of an
    /// evaluated array (a transpose, a slice, a broadcast) is materialized into a buffer of
    /// its own first, so the memory is always contiguous in C order.
    ///
    /// ```no_run
    /// use lazyfuse as lf;
    /// # fn main() -> lf::Result<()> {
    /// let dev = lf::Device::cuda(0)?;
    /// let a = lf::Array::linspace(0.0, 1.0, 1024, lf::DType::F32).to_device(&dev).exp();
    /// let p = a.cuda_ptr()?;                // evaluated; kernels queued on p.stream()
    /// assert_eq!((p.shape(), p.strides()), (&[1024][..], &[1][..]));
    /// // hand p.ptr() and p.stream() to other CUDA code; keep `p` alive while it reads
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a CPU array (use [`Array::to_dlpack`] for host memory, or
    /// move the array with [`Array::to_device`]), and the evaluation's errors.
    pub fn cuda_ptr(&self) -> Result<CudaPtr> {
        let Device::Cuda(d) = &self.node.device else {
            return Err(Error::Unsupported {
                op: "cuda_ptr",
                msg: format!(
                    "array {:?} is on the cpu, not a CUDA device (use to_dlpack for host \
                     memory, or to_device first)",
                    self
                ),
            });
        };
        let buf = self.buffer()?;
        let Buffer::Cuda(c) = &*buf else {
            return Err(Error::internal("cuda_ptr", "CUDA array with a host buffer"));
        };
        if c.len() != self.size() {
            return Err(Error::internal(
                "cuda_ptr",
                format!(
                    "buffer of {} elements for shape {:?}",
                    c.len(),
                    self.shape()
                ),
            ));
        }
        // the stream handed out (this thread's) is ordered after the buffer's producer
        d.order_read(c)?;
        Ok(CudaPtr {
            ptr: c.device_ptr(),
            stream: d.raw_stream()?,
            shape: self.shape().to_vec(),
            strides: c_strides(self.shape()),
            dtype: self.dtype(),
            ordinal: d.ordinal(),
            _buffer: buf.clone(),
        })
    }

    /// An array over `prod(shape)` contiguous C-order elements of `dtype` at device address
    /// `ptr` on `device`, without copying. `owner` is kept alive as long as lazyfuse may
    /// read the memory and dropped exactly once afterwards (when the last array, or plan,
    /// referring to it is gone, after lazyfuse's queued work on the device has finished):
    /// put whatever keeps the memory allocated in it (a `CudaPtr`, a `cudarc::CudaSlice`,
    /// a DLPack tensor, a guard that calls `cudaFree`).
    ///
    /// lazyfuse never frees the memory, never returns it to its pool and never writes
    /// into it: an evaluation that consumes the array's last handle, which could otherwise
    /// reuse an input's buffer for its output, allocates a new buffer instead. A pointer
    /// that is not 16-byte aligned (lazyfuse's kernels load whole 16-byte vectors) is
    /// copied into a fresh buffer once, and `owner` is dropped when that copy is done.
    ///
    /// ```no_run
    /// use lazyfuse as lf;
    /// # fn main() -> lf::Result<()> {
    /// let dev = lf::Device::cuda(0)?;
    /// let a = lf::Array::arange(0.0, 8.0, 1.0, lf::DType::F64).to_device(&dev);
    /// let p = a.cuda_ptr()?;
    /// // SAFETY: p's memory holds 8 f64 on `dev`, stays allocated while `p` (the owner)
    /// // lives, nobody writes it, and it was produced on lazyfuse's own stream.
    /// let b = unsafe {
    ///     lf::Array::from_cuda_ptr(p.ptr(), &[2, 4], lf::DType::F64, &dev, Box::new(p))?
    /// };
    /// assert_eq!(b.to_vec::<f64>()?, a.to_vec::<f64>()?);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Safety
    /// - `ptr` is the address of `prod(shape)` initialized, contiguous elements of `dtype`
    ///   (bools as bytes 0 or 1) in memory that `device`'s kernels can read (device memory
    ///   or managed memory of the process's primary context);
    /// - the memory stays valid while `owner` lives and nobody writes it while lazyfuse may
    ///   read it;
    /// - the writes that produced it are complete, or ordered before lazyfuse's stream: on
    ///   another stream `s`, call `unsafe { device.wait_for_stream(s) }` before evaluating
    ///   anything that reads the array.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when `device` is the CPU; [`Error::Shape`] when `ptr` is null,
    /// is not device memory of this process, or the elements run past the end of its
    /// allocation (checked with the driver); [`Error::DeviceMismatch`] when the memory
    /// belongs to another GPU. `owner` is dropped on every error.
    pub unsafe fn from_cuda_ptr(
        ptr: u64,
        shape: &[usize],
        dtype: DType,
        device: &Device,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<Array> {
        let Device::Cuda(d) = device else {
            return Err(Error::Unsupported {
                op: "from_cuda_ptr",
                msg: format!("device is the cpu, not a CUDA device ({dtype} {shape:?})"),
            });
        };
        let n = crate::shape::checked_size(shape).ok_or_else(|| Error::Shape {
            op: "from_cuda_ptr",
            msg: format!("shape {shape:?} has more elements than usize can count"),
        })?;
        if n == 0 {
            drop(owner);
            let buf = runtime::upload(device, HostBuf::zeros(dtype, 0))?;
            return Ok(Array::from_node(Node::leaf(
                buf,
                Shape::from_slice(shape),
                device.clone(),
            )));
        }
        if ptr == 0 {
            return Err(Error::Shape {
                op: "from_cuda_ptr",
                msg: format!("null pointer for {n} {dtype} elements of shape {shape:?}"),
            });
        }
        // SAFETY: the caller's contract is `wrap_external`'s.
        let ext = unsafe { d.wrap_external(ptr, dtype, n, owner) }?;
        let buf = if ptr.is_multiple_of(16) {
            ext
        } else {
            // `ext` drops inside: that waits for the copy, then drops the owner
            d.copy_into_pool(ext)?
        };
        Ok(Array::from_node(Node::leaf(
            Buffer::Cuda(buf),
            Shape::from_slice(shape),
            device.clone(),
        )))
    }
}

impl Device {
    /// The raw `CUstream` handle, as an integer, that lazyfuse queues the calling thread's
    /// work of this device on (kernels, copies, stream-ordered frees): its own stream, or
    /// the one [`crate::with_stream`] chose. An error on the CPU.
    pub fn cuda_stream(&self) -> Result<u64> {
        match self {
            Device::Cuda(d) => d.raw_stream(),
            Device::Cpu => Err(Error::Unsupported {
                op: "cuda_stream",
                msg: "the cpu device has no CUDA stream".into(),
            }),
        }
    }

    /// Makes lazyfuse's stream of this device wait for all work queued so far on `stream`
    /// (a raw `CUstream` of the same device, 0 for the legacy default stream), without
    /// blocking the host: lazyfuse work queued afterwards runs after it. Use it after
    /// another library wrote memory that lazyfuse will read ([`Array::from_cuda_ptr`]), or
    /// before dropping a [`CudaPtr`] that other work still reads. Does nothing on the CPU.
    ///
    /// # Safety
    /// `stream` is a live stream of this device's primary context (the one the CUDA
    /// runtime, PyTorch and CuPy use), or 0.
    pub unsafe fn wait_for_stream(&self, stream: u64) -> Result<()> {
        match self {
            // SAFETY: forwarded contract.
            Device::Cuda(d) => unsafe { d.wait_for_stream(stream) },
            Device::Cpu => Ok(()),
        }
    }
}
