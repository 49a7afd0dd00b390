//! Page-locked host memory ([`PinnedVec`]): a readback destination the GPU writes by DMA
//! directly, without the copy out of a staging buffer that a pageable destination needs.

use crate::runtime::cuda::PinnedHost;
use crate::{Device, Element, Result};
use std::marker::PhantomData;

/// A fixed-length vector of `T` in host memory that the GPU reads and writes directly:
/// page-locked memory of a CUDA device's context (`cuMemHostAlloc`), or ordinary heap
/// memory for [`Device::Cpu`]. It dereferences to `[T]`.
///
/// Use it as the reused destination of [`Array::copy_to_slice`](crate::Array::copy_to_slice)
/// in a loop that reads results back: a page-locked destination receives one DMA copy,
/// where a pageable one (a `Vec`, what `to_vec` returns) receives a DMA copy into a staging
/// buffer and then a copy on the CPU (on the H200 machine, 1 MiB took 83 us into a `Vec`,
/// the CPU's copy being more than half of it; `benches/NOTES.md`). Any page-locked memory
/// gets the direct copy, also memory that PyTorch (`pin_memory()`) or CuPy
/// (`cupyx.empty_pinned`) allocated, passed as a slice.
///
/// Page-locked memory is a scarce resource of the operating system: allocate it once
/// (allocation costs about as much as a few large copies) and reuse it.
///
/// ```
/// use lazyfuse as lf;
/// # fn main() -> lf::Result<()> {
/// let dev = lf::Device::default();
/// let x = lf::Array::arange_on(0.0, 4.0, 1.0, lf::DType::F32, &dev) * 2.0;
/// let mut out = lf::PinnedVec::<f32>::zeros(4, &dev)?;
/// x.copy_to_slice(&mut out)?;
/// assert_eq!(&out[..], &[0.0, 2.0, 4.0, 6.0]);
/// # Ok(())
/// # }
/// ```
pub struct PinnedVec<T: Element> {
    mem: Mem<T>,
    len: usize,
    _t: PhantomData<T>,
}

enum Mem<T> {
    Pinned(PinnedHost),
    Heap(Vec<T>),
}

impl<T: Element> PinnedVec<T> {
    /// `len` zeros (all bits zero: `false`, `0`, `0.0`) in host memory for transfers
    /// with `device`: page-locked for a CUDA device (an `Error::OutOfMemory` when the
    /// system refuses to lock that much), heap memory for the CPU.
    pub fn zeros(len: usize, device: &Device) -> Result<PinnedVec<T>> {
        let bytes =
            len.checked_mul(std::mem::size_of::<T>())
                .ok_or_else(|| crate::Error::OutOfMemory {
                    op: "PinnedVec::zeros",
                    bytes: usize::MAX,
                    what: format!("{len} elements of {}", T::DTYPE),
                })?;
        let mem = match device {
            Device::Cpu => Mem::Heap(zeroed_vec::<T>(len)?),
            Device::Cuda(d) => Mem::Pinned(d.alloc_pinned_host(bytes)?),
        };
        Ok(PinnedVec {
            mem,
            len,
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the memory is page-locked (allocated for a CUDA device).
    pub fn is_page_locked(&self) -> bool {
        matches!(self.mem, Mem::Pinned(_))
    }
}

/// `len` all-zero `T`s on the heap, allocated fallibly.
fn zeroed_vec<T: Element>(len: usize) -> Result<Vec<T>> {
    let mut v =
        lazyfuse_codegen::try_with_capacity::<T>(len).map_err(|e| crate::Error::OutOfMemory {
            op: "PinnedVec::zeros",
            bytes: e.bytes,
            what: format!("{len} elements of {}", T::DTYPE),
        })?;
    // SAFETY: the capacity is at least `len`; every element type is valid as all-zero
    // bits, so after zeroing the first `len` elements they are initialized.
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr(), 0, len);
        v.set_len(len);
    }
    Ok(v)
}

impl<T: Element> std::ops::Deref for PinnedVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.mem {
            Mem::Heap(v) => v,
            // SAFETY: the pinned allocation holds at least `len * size_of::<T>()` bytes,
            // page-aligned (so aligned for `T`), zeroed at allocation (valid `T`s: every
            // element type is valid as all-zero bits) and written only through `&mut self`
            // since; it lives as long as `self`.
            Mem::Pinned(p) => unsafe {
                std::slice::from_raw_parts(p.as_mut_ptr().cast::<T>(), self.len)
            },
        }
    }
}

impl<T: Element> std::ops::DerefMut for PinnedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.mem {
            Mem::Heap(v) => v,
            // SAFETY: as in `deref`; `&mut self` makes this the only access.
            Mem::Pinned(p) => unsafe {
                std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<T>(), self.len)
            },
        }
    }
}

impl<T: Element> std::fmt::Debug for PinnedVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedVec")
            .field("len", &self.len)
            .field("page_locked", &self.is_page_locked())
            .finish()
    }
}
