//! Host buffers: owned typed vectors and borrowed typed slices, one variant per dtype.

use crate::DType;
use num_complex::{Complex32, Complex64};

macro_rules! per_dtype {
    ($(#[$m:meta])* $name:ident $(<$lt:lifetime>)?, $wrap:ident) => {
        $(#[$m])*
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub enum $name $(<$lt>)? {
            Bool($wrap!(bool $(,$lt)?)),
            I32($wrap!(i32 $(,$lt)?)),
            I64($wrap!(i64 $(,$lt)?)),
            F32($wrap!(f32 $(,$lt)?)),
            F64($wrap!(f64 $(,$lt)?)),
            C64($wrap!(Complex32 $(,$lt)?)),
            C128($wrap!(Complex64 $(,$lt)?)),
            U8($wrap!(u8 $(,$lt)?)),
            U16($wrap!(u16 $(,$lt)?)),
            U32($wrap!(u32 $(,$lt)?)),
            U64($wrap!(u64 $(,$lt)?)),
            I8($wrap!(i8 $(,$lt)?)),
            I16($wrap!(i16 $(,$lt)?)),
            F16($wrap!(half::f16 $(,$lt)?)),
            BF16($wrap!(half::bf16 $(,$lt)?)),
        }
    };
}
macro_rules! owned { ($t:ty) => { Vec<$t> }; }
macro_rules! borrowed {
    ($t:ty, $lt:lifetime) => {
        &$lt[$t]
    };
}
macro_rules! borrowed_mut { ($t:ty, $lt:lifetime) => { &$lt mut [$t] }; }

per_dtype!(
    /// An owned host buffer.
    HostBuf, owned
);
per_dtype!(
    /// A borrowed, read-only host buffer.
    Slice<'a>, borrowed
);
per_dtype!(
    /// A borrowed, writable host buffer.
    SliceMut<'a>, borrowed_mut
);

/// Applies `$body` to the inner vector/slice of any variant, binding it to `$v`.
#[macro_export]
macro_rules! dispatch {
    ($e:expr, $ty:ident, $v:ident => $body:expr) => {
        match $e {
            $crate::$ty::Bool($v) => $body,
            $crate::$ty::I32($v) => $body,
            $crate::$ty::I64($v) => $body,
            $crate::$ty::F32($v) => $body,
            $crate::$ty::F64($v) => $body,
            $crate::$ty::C64($v) => $body,
            $crate::$ty::C128($v) => $body,
            $crate::$ty::U8($v) => $body,
            $crate::$ty::U16($v) => $body,
            $crate::$ty::U32($v) => $body,
            $crate::$ty::U64($v) => $body,
            $crate::$ty::I8($v) => $body,
            $crate::$ty::I16($v) => $body,
            $crate::$ty::F16($v) => $body,
            $crate::$ty::BF16($v) => $body,
        }
    };
}

impl Clone for HostBuf {
    fn clone(&self) -> Self {
        match self {
            HostBuf::Bool(v) => HostBuf::Bool(v.clone()),
            HostBuf::I32(v) => HostBuf::I32(v.clone()),
            HostBuf::I64(v) => HostBuf::I64(v.clone()),
            HostBuf::F32(v) => HostBuf::F32(v.clone()),
            HostBuf::F64(v) => HostBuf::F64(v.clone()),
            HostBuf::C64(v) => HostBuf::C64(v.clone()),
            HostBuf::C128(v) => HostBuf::C128(v.clone()),
            HostBuf::U8(v) => HostBuf::U8(v.clone()),
            HostBuf::U16(v) => HostBuf::U16(v.clone()),
            HostBuf::U32(v) => HostBuf::U32(v.clone()),
            HostBuf::U64(v) => HostBuf::U64(v.clone()),
            HostBuf::I8(v) => HostBuf::I8(v.clone()),
            HostBuf::I16(v) => HostBuf::I16(v.clone()),
            HostBuf::F16(v) => HostBuf::F16(v.clone()),
            HostBuf::BF16(v) => HostBuf::BF16(v.clone()),
        }
    }
}

/// A host allocation that failed (or whose size overflows): the bytes requested,
/// saturated at `usize::MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError {
    /// The bytes requested.
    pub bytes: usize,
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "out of memory: {} bytes", self.bytes)
    }
}

impl std::error::Error for AllocError {}

/// Element types whose all-zero bit pattern is their zero (`false`, `0`, `0.0`, `0 + 0i`).
trait ZeroBits: Copy {}
impl ZeroBits for bool {}
impl ZeroBits for i32 {}
impl ZeroBits for i64 {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}
impl ZeroBits for Complex32 {}
impl ZeroBits for Complex64 {}
impl ZeroBits for u8 {}
impl ZeroBits for u16 {}
impl ZeroBits for u32 {}
impl ZeroBits for u64 {}
impl ZeroBits for i8 {}
impl ZeroBits for i16 {}
impl ZeroBits for half::f16 {}
impl ZeroBits for half::bf16 {}

/// `len` zeros, or an error instead of the abort of `vec![0; len]` when the allocator
/// refuses. Zeroed allocation, like `vec!` of a zero, so the OS may hand out untouched
/// zero pages.
fn try_zeroed<T: ZeroBits>(len: usize) -> Result<Vec<T>, AllocError> {
    let err = AllocError {
        bytes: len.saturating_mul(std::mem::size_of::<T>()),
    };
    // `Layout::array` refuses sizes above isize::MAX
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| err)?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // Under unconditional memory overcommit the allocator grants any size and the process
    // is killed when the pages are touched. A buffer far larger than the machine's memory
    // and swap can never be filled. (Far larger: virtual machines that grow their memory on
    // demand report a fraction of what they can have.)
    if !host_bytes_possible(layout.size()) {
        return Err(err);
    }
    // SAFETY: the layout's size is non-zero.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        return Err(err);
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `[T; len]`, which is
    // the layout a `Vec<T>` of capacity `len` owns; all `len` elements are initialized, as
    // all-zero bytes are a valid `T` (`ZeroBits`).
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// A vector of `len` elements whose bytes `fill` writes in place (see
/// [`HostBuf::try_filled`]).
///
/// # Safety
/// Every bit pattern is a valid `T`, and on `Ok` `fill` wrote all `len * size_of::<T>()`
/// bytes at the address it got.
unsafe fn try_filled_vec<T: ZeroBits, E>(
    len: usize,
    fill: impl FnOnce(*mut u8, usize) -> Result<(), E>,
) -> Result<Result<Vec<T>, E>, AllocError> {
    let mut v = try_with_capacity::<T>(len)?;
    let bytes = len * std::mem::size_of::<T>();
    match fill(v.as_mut_ptr().cast::<u8>(), bytes) {
        // SAFETY: capacity is `len` (`try_with_capacity`), and `fill` initialized all
        // `len` elements (the caller's contract).
        Ok(()) => {
            unsafe { v.set_len(len) };
            Ok(Ok(v))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// False for a host allocation of `bytes` that can never be filled: far more than the
/// machine's memory and swap. Under unconditional overcommit the allocator would grant it
/// and the process would be killed once its pages are touched; fallible allocations check
/// this first.
pub fn host_bytes_possible(bytes: usize) -> bool {
    host_memory_limit().is_none_or(|limit| bytes as u64 <= limit)
}

/// An empty vector with room for exactly `len` elements, or an [`AllocError`] where the
/// allocator refuses or the bytes could never be filled (see [`host_bytes_possible`]).
pub fn try_with_capacity<T>(len: usize) -> Result<Vec<T>, AllocError> {
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    let err = AllocError { bytes };
    if !host_bytes_possible(bytes) {
        return Err(err);
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| err)?;
    Ok(v)
}

/// How many times the reported memory and swap a host buffer may take before it is refused
/// without trying.
const HOST_MEMORY_FACTOR: u64 = 8;

/// [`HOST_MEMORY_FACTOR`] times physical memory plus swap in bytes (Linux `/proc/meminfo`),
/// read once; `None` where it cannot be read.
fn host_memory_limit() -> Option<u64> {
    static LIMIT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib = |key: &str| -> Option<u64> {
            let line = info.lines().find(|l| l.starts_with(key))?;
            line[key.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        let total = kib("MemTotal:")? + kib("SwapTotal:").unwrap_or(0);
        Some(total.saturating_mul(1024 * HOST_MEMORY_FACTOR))
    })
}

impl HostBuf {
    /// `len` zeros of `dtype`, or an [`AllocError`] when the memory cannot be had (where
    /// [`HostBuf::zeros`] would abort the process).
    pub fn try_zeros(dtype: DType, len: usize) -> Result<HostBuf, AllocError> {
        Ok(match dtype {
            DType::Bool => HostBuf::Bool(try_zeroed(len)?),
            DType::I32 => HostBuf::I32(try_zeroed(len)?),
            DType::I64 => HostBuf::I64(try_zeroed(len)?),
            DType::F32 => HostBuf::F32(try_zeroed(len)?),
            DType::F64 => HostBuf::F64(try_zeroed(len)?),
            DType::C64 => HostBuf::C64(try_zeroed(len)?),
            DType::C128 => HostBuf::C128(try_zeroed(len)?),
            DType::U8 => HostBuf::U8(try_zeroed(len)?),
            DType::U16 => HostBuf::U16(try_zeroed(len)?),
            DType::U32 => HostBuf::U32(try_zeroed(len)?),
            DType::U64 => HostBuf::U64(try_zeroed(len)?),
            DType::I8 => HostBuf::I8(try_zeroed(len)?),
            DType::I16 => HostBuf::I16(try_zeroed(len)?),
            DType::F16 => HostBuf::F16(try_zeroed(len)?),
            DType::BF16 => HostBuf::BF16(try_zeroed(len)?),
        })
    }
    /// `len` elements of `dtype` (not `Bool`) whose bytes `fill` writes: it gets the
    /// address of `len * dtype.size()` uninitialized bytes and must write every one of them
    /// before it returns `Ok`. No zeroing pass, so a reused allocation costs no memset.
    /// `Ok(Err(e))` when `fill` fails (the memory is freed); `Err` when it cannot be had,
    /// and for `Bool`, whose bytes other than 0 and 1 are not valid values.
    ///
    /// # Safety
    /// On `Ok`, `fill` has written all `len * dtype.size()` bytes at the address it got.
    pub unsafe fn try_filled<E>(
        dtype: DType,
        len: usize,
        fill: impl FnOnce(*mut u8, usize) -> Result<(), E>,
    ) -> Result<Result<HostBuf, E>, AllocError> {
        // SAFETY (each arm): forwarded from the caller; every dtype but Bool is plain old
        // data in which any bytes are a valid element.
        unsafe {
            Ok(match dtype {
                DType::Bool => return Err(AllocError { bytes: usize::MAX }),
                DType::I32 => try_filled_vec(len, fill)?.map(HostBuf::I32),
                DType::I64 => try_filled_vec(len, fill)?.map(HostBuf::I64),
                DType::F32 => try_filled_vec(len, fill)?.map(HostBuf::F32),
                DType::F64 => try_filled_vec(len, fill)?.map(HostBuf::F64),
                DType::C64 => try_filled_vec(len, fill)?.map(HostBuf::C64),
                DType::C128 => try_filled_vec(len, fill)?.map(HostBuf::C128),
                DType::U8 => try_filled_vec(len, fill)?.map(HostBuf::U8),
                DType::U16 => try_filled_vec(len, fill)?.map(HostBuf::U16),
                DType::U32 => try_filled_vec(len, fill)?.map(HostBuf::U32),
                DType::U64 => try_filled_vec(len, fill)?.map(HostBuf::U64),
                DType::I8 => try_filled_vec(len, fill)?.map(HostBuf::I8),
                DType::I16 => try_filled_vec(len, fill)?.map(HostBuf::I16),
                DType::F16 => try_filled_vec(len, fill)?.map(HostBuf::F16),
                DType::BF16 => try_filled_vec(len, fill)?.map(HostBuf::BF16),
            })
        }
    }
    /// `len` zeros of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> HostBuf {
        match dtype {
            DType::Bool => HostBuf::Bool(vec![false; len]),
            DType::I32 => HostBuf::I32(vec![0; len]),
            DType::I64 => HostBuf::I64(vec![0; len]),
            DType::F32 => HostBuf::F32(vec![0.0; len]),
            DType::F64 => HostBuf::F64(vec![0.0; len]),
            DType::C64 => HostBuf::C64(vec![Complex32::default(); len]),
            DType::C128 => HostBuf::C128(vec![Complex64::default(); len]),
            DType::U8 => HostBuf::U8(vec![0; len]),
            DType::U16 => HostBuf::U16(vec![0; len]),
            DType::U32 => HostBuf::U32(vec![0; len]),
            DType::U64 => HostBuf::U64(vec![0; len]),
            DType::I8 => HostBuf::I8(vec![0; len]),
            DType::I16 => HostBuf::I16(vec![0; len]),
            DType::F16 => HostBuf::F16(vec![half::f16::ZERO; len]),
            DType::BF16 => HostBuf::BF16(vec![half::bf16::ZERO; len]),
        }
    }
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            HostBuf::Bool(_) => DType::Bool,
            HostBuf::I32(_) => DType::I32,
            HostBuf::I64(_) => DType::I64,
            HostBuf::F32(_) => DType::F32,
            HostBuf::F64(_) => DType::F64,
            HostBuf::C64(_) => DType::C64,
            HostBuf::C128(_) => DType::C128,
            HostBuf::U8(_) => DType::U8,
            HostBuf::U16(_) => DType::U16,
            HostBuf::U32(_) => DType::U32,
            HostBuf::U64(_) => DType::U64,
            HostBuf::I8(_) => DType::I8,
            HostBuf::I16(_) => DType::I16,
            HostBuf::F16(_) => DType::F16,
            HostBuf::BF16(_) => DType::BF16,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        dispatch!(self, HostBuf, v => v.len())
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A read-only view.
    pub fn as_slice(&self) -> Slice<'_> {
        match self {
            HostBuf::Bool(v) => Slice::Bool(v),
            HostBuf::I32(v) => Slice::I32(v),
            HostBuf::I64(v) => Slice::I64(v),
            HostBuf::F32(v) => Slice::F32(v),
            HostBuf::F64(v) => Slice::F64(v),
            HostBuf::C64(v) => Slice::C64(v),
            HostBuf::C128(v) => Slice::C128(v),
            HostBuf::U8(v) => Slice::U8(v),
            HostBuf::U16(v) => Slice::U16(v),
            HostBuf::U32(v) => Slice::U32(v),
            HostBuf::U64(v) => Slice::U64(v),
            HostBuf::I8(v) => Slice::I8(v),
            HostBuf::I16(v) => Slice::I16(v),
            HostBuf::F16(v) => Slice::F16(v),
            HostBuf::BF16(v) => Slice::BF16(v),
        }
    }
    /// A writable view.
    pub fn as_slice_mut(&mut self) -> SliceMut<'_> {
        match self {
            HostBuf::Bool(v) => SliceMut::Bool(v),
            HostBuf::I32(v) => SliceMut::I32(v),
            HostBuf::I64(v) => SliceMut::I64(v),
            HostBuf::F32(v) => SliceMut::F32(v),
            HostBuf::F64(v) => SliceMut::F64(v),
            HostBuf::C64(v) => SliceMut::C64(v),
            HostBuf::C128(v) => SliceMut::C128(v),
            HostBuf::U8(v) => SliceMut::U8(v),
            HostBuf::U16(v) => SliceMut::U16(v),
            HostBuf::U32(v) => SliceMut::U32(v),
            HostBuf::U64(v) => SliceMut::U64(v),
            HostBuf::I8(v) => SliceMut::I8(v),
            HostBuf::I16(v) => SliceMut::I16(v),
            HostBuf::F16(v) => SliceMut::F16(v),
            HostBuf::BF16(v) => SliceMut::BF16(v),
        }
    }
    /// Sets every element to zero (`false` for bool), keeping the length.
    pub fn fill_zero(&mut self) {
        // SAFETY: every element type has zero as its all-zero bit pattern (`false` for
        // bool, `0.0 + 0.0i` for complex numbers, +0 for the 16-bit floats), and the write
        // covers exactly the vector's initialized elements.
        dispatch!(self, HostBuf, v => unsafe {
            std::ptr::write_bytes(v.as_mut_ptr(), 0, v.len())
        })
    }
    /// The raw bytes of the elements (bool as one byte 0/1).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: every element type is plain old data without padding (bool is one byte
        // holding 0 or 1; Complex<T> is repr(C) of two T; half's f16 and bf16 are
        // repr(transparent) over u16), so viewing it as bytes is sound.
        dispatch!(self, HostBuf, v => unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(&v[..]))
        })
    }
}

impl<'a> Slice<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        dispatch!(self, Slice, v => v.len())
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Slice::Bool(_) => DType::Bool,
            Slice::I32(_) => DType::I32,
            Slice::I64(_) => DType::I64,
            Slice::F32(_) => DType::F32,
            Slice::F64(_) => DType::F64,
            Slice::C64(_) => DType::C64,
            Slice::C128(_) => DType::C128,
            Slice::U8(_) => DType::U8,
            Slice::U16(_) => DType::U16,
            Slice::U32(_) => DType::U32,
            Slice::U64(_) => DType::U64,
            Slice::I8(_) => DType::I8,
            Slice::I16(_) => DType::I16,
            Slice::F16(_) => DType::F16,
            Slice::BF16(_) => DType::BF16,
        }
    }
}

impl<'a> SliceMut<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        dispatch!(self, SliceMut, v => v.len())
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Splits at `mid` like `split_at_mut`.
    pub fn split_at(self, mid: usize) -> (SliceMut<'a>, SliceMut<'a>) {
        match self {
            SliceMut::Bool(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::Bool(a), SliceMut::Bool(b))
            }
            SliceMut::I32(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::I32(a), SliceMut::I32(b))
            }
            SliceMut::I64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::I64(a), SliceMut::I64(b))
            }
            SliceMut::F32(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::F32(a), SliceMut::F32(b))
            }
            SliceMut::F64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::F64(a), SliceMut::F64(b))
            }
            SliceMut::C64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::C64(a), SliceMut::C64(b))
            }
            SliceMut::C128(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::C128(a), SliceMut::C128(b))
            }
            SliceMut::U8(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::U8(a), SliceMut::U8(b))
            }
            SliceMut::U16(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::U16(a), SliceMut::U16(b))
            }
            SliceMut::U32(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::U32(a), SliceMut::U32(b))
            }
            SliceMut::U64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::U64(a), SliceMut::U64(b))
            }
            SliceMut::I8(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::I8(a), SliceMut::I8(b))
            }
            SliceMut::I16(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::I16(a), SliceMut::I16(b))
            }
            SliceMut::F16(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::F16(a), SliceMut::F16(b))
            }
            SliceMut::BF16(v) => {
                let (a, b) = v.split_at_mut(mid);
                (SliceMut::BF16(a), SliceMut::BF16(b))
            }
        }
    }
}

// A slice only borrows: copying it copies the reference.
impl Clone for Slice<'_> {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for Slice<'_> {}
