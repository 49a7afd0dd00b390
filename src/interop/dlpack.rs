//! DLPack export and import through the `dlpark` crate: `Array::to_dlpack` hands an
//! evaluated buffer out as a managed tensor that keeps it alive until the consumer's
//! deleter runs; `Array::from_dlpack` wraps a producer's CUDA tensor without copying (the
//! producer's deleter runs when lazyfuse lets go of it) and copies CPU tensors.

use super::c_strides;
use crate::graph::{Node, Shape};
use crate::runtime::{self, Buffer};
use crate::{Array, DType, Device, Error, Result};
use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use lazyfuse_codegen::HostBuf;
use std::ffi::c_void;
use std::sync::Arc;

/// The DLPack data type of `d` (every lazyfuse dtype has one).
fn to_dl(d: DType) -> DLDataType {
    match d {
        DType::Bool => DLDataType::BOOL,
        DType::I8 => DLDataType::I8,
        DType::I16 => DLDataType::I16,
        DType::I32 => DLDataType::I32,
        DType::I64 => DLDataType::I64,
        DType::U8 => DLDataType::U8,
        DType::U16 => DLDataType::U16,
        DType::U32 => DLDataType::U32,
        DType::U64 => DLDataType::U64,
        DType::F16 => DLDataType::scalar(DLDataTypeCode::FLOAT, 16),
        DType::BF16 => DLDataType::scalar(DLDataTypeCode::BFLOAT, 16),
        DType::F32 => DLDataType::F32,
        DType::F64 => DLDataType::F64,
        DType::C64 => DLDataType::C64,
        DType::C128 => DLDataType::C128,
    }
}

/// The lazyfuse dtype of DLPack data type `t`, or an error naming its code, bits and lanes.
fn from_dl(t: DLDataType) -> Result<DType> {
    let c = t.code;
    let d = match (c, t.bits, t.lanes) {
        (DLDataTypeCode::BOOL, 8, 1) => DType::Bool,
        (DLDataTypeCode::INT, 8, 1) => DType::I8,
        (DLDataTypeCode::INT, 16, 1) => DType::I16,
        (DLDataTypeCode::INT, 32, 1) => DType::I32,
        (DLDataTypeCode::INT, 64, 1) => DType::I64,
        (DLDataTypeCode::UINT, 8, 1) => DType::U8,
        (DLDataTypeCode::UINT, 16, 1) => DType::U16,
        (DLDataTypeCode::UINT, 32, 1) => DType::U32,
        (DLDataTypeCode::UINT, 64, 1) => DType::U64,
        (DLDataTypeCode::FLOAT, 16, 1) => DType::F16,
        (DLDataTypeCode::BFLOAT, 16, 1) => DType::BF16,
        (DLDataTypeCode::FLOAT, 32, 1) => DType::F32,
        (DLDataTypeCode::FLOAT, 64, 1) => DType::F64,
        (DLDataTypeCode::COMPLEX, 64, 1) => DType::C64,
        (DLDataTypeCode::COMPLEX, 128, 1) => DType::C128,
        _ => {
            return Err(Error::Unsupported {
                op: "from_dlpack",
                msg: format!(
                    "DLPack dtype code {} ({}) with {} bits and {} lanes has no lazyfuse dtype",
                    c.0,
                    code_name(c),
                    t.bits,
                    t.lanes
                ),
            })
        }
    };
    Ok(d)
}

fn code_name(c: DLDataTypeCode) -> &'static str {
    match c.0 {
        0 => "int",
        1 => "uint",
        2 => "float",
        3 => "opaque handle",
        4 => "bfloat",
        5 => "complex",
        6 => "bool",
        7..=14 => "float8",
        15 | 16 => "float6",
        17 => "float4",
        _ => "unknown",
    }
}

/// What a lazyfuse export keeps alive until the consumer's deleter runs.
struct Keep(#[allow(dead_code)] Arc<Buffer>);

impl Array {
    /// Evaluates the array and exports its buffer as a DLPack tensor (the versioned ABI,
    /// `DLManagedTensorVersioned`, DLPack 1.x), without copying: kDLCPU for CPU arrays
    /// (the host buffer), kDLCUDA with the device ordinal for CUDA arrays. Shape and C-order
    /// strides are explicit; the tensor is flagged `READ_ONLY` (lazyfuse buffers are shared
    /// by equal expressions, so a consumer must not write them).
    ///
    /// The buffer stays alive until the consumer drops the returned value or calls its
    /// deleter (`into_raw` hands the raw `*mut DLManagedTensorVersioned` to C or to a
    /// Python capsule named `dltensor_versioned`). On CUDA this waits for lazyfuse's
    /// queued work first, so the data is ready for a consumer on any stream; use
    /// [`Array::to_dlpack_on_stream`] to order a consumer stream instead of waiting. A
    /// consumer's device work that reads the memory must be done, or ordered before
    /// lazyfuse's stream ([`Device::wait_for_stream`]), when the deleter runs: afterwards
    /// lazyfuse may reuse the memory.
    ///
    /// ```
    /// use lazyfuse as lf;
    /// # fn main() -> lf::Result<()> {
    /// let a = lf::Array::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let t = a.to_dlpack()?;
    /// let view = t.validate().expect("valid tensor");
    /// assert_eq!(view.shape(), &[2, 2]);
    /// assert_eq!(view.strides(), Some(&[2i64, 1][..]));
    /// // SAFETY: `t` is a valid export whose producer (lazyfuse) wrote the data.
    /// let b = unsafe { lf::Array::from_dlpack(t)? };
    /// assert_eq!(b.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_dlpack(&self) -> Result<dlpark::versioned::Dlpack> {
        let t = self.export("to_dlpack")?;
        if let Device::Cuda(d) = &self.node.device {
            d.synchronize()?;
        }
        Ok(t)
    }

    /// [`Array::to_dlpack`] in the legacy ABI (`DLManagedTensor`, capsule name `dltensor`)
    /// for consumers that only take DLPack 0.x; it has no flags, so the read-only rule is
    /// this documentation's alone.
    pub fn to_dlpack_legacy(&self) -> Result<dlpark::legacy::Dlpack> {
        let t = self.export("to_dlpack_legacy")?;
        if let Device::Cuda(d) = &self.node.device {
            d.synchronize()?;
        }
        Ok(t)
    }

    /// [`Array::to_dlpack`] without waiting on the host: on CUDA, `stream` (the consumer's
    /// raw `CUstream`, 0 for the legacy default stream) is made to wait for the kernels
    /// that compute the array, like `__dlpack__(stream=...)` in Python. On the CPU `stream`
    /// is ignored.
    ///
    /// # Safety
    /// `stream` is a live stream of the array's device's primary context, or 0.
    pub unsafe fn to_dlpack_on_stream(&self, stream: u64) -> Result<dlpark::versioned::Dlpack> {
        let t = self.export("to_dlpack_on_stream")?;
        if let Device::Cuda(d) = &self.node.device {
            // SAFETY: forwarded contract.
            unsafe { d.order_stream_after(stream) }?;
        }
        Ok(t)
    }

    fn export<M: ManagedTensorBase>(&self, op: &'static str) -> Result<Managed<M>> {
        let buf = self.buffer()?;
        if buf.len() != self.size() || buf.dtype() != self.dtype() {
            return Err(Error::internal(op, "buffer does not match the array"));
        }
        let empty = self.size() == 0;
        let (data, device): (*mut c_void, DLDevice) = match &*buf {
            Buffer::Host(h) => (h.as_bytes().as_ptr().cast_mut().cast(), DLDevice::CPU),
            Buffer::Cuda(c) => {
                let id = i32::try_from(c.device().ordinal())
                    .map_err(|_| Error::internal(op, "device ordinal exceeds i32"))?;
                (c.device_ptr() as *mut c_void, DLDevice::cuda(id))
            }
        };
        let data = if empty { std::ptr::null_mut() } else { data };
        let shape: Vec<i64> = self.shape().iter().map(|&n| n as i64).collect();
        let strides: Vec<i64> = c_strides(self.shape()).iter().map(|&s| s as i64).collect();
        let prepared = Dynamic::new(shape, strides)
            .prepare_as::<M>()
            .map_err(|e| Error::Shape {
                op,
                msg: format!("shape {:?}: {e}", self.shape()),
            })?;
        let mut init = prepared.initialize(Box::new(Keep(buf)));
        init.set_data(data)
            .set_device(device)
            .set_dtype(to_dl(self.dtype()))
            .set_flags(DlpackFlags::READ_ONLY)
            .map_err(|e| Error::internal(op, e))?;
        // SAFETY: `data` addresses the buffer's `size()` contiguous C-order elements (null
        // when there are none), which the `Keep` context holds alive until the deleter
        // runs; shape and strides live in the managed allocation; READ_ONLY is accurate.
        Ok(unsafe { init.finish() })
    }

    /// Imports a DLPack tensor (either ABI). A CUDA (kDLCUDA, or kDLCUDAManaged) tensor
    /// is wrapped without copying: its memory becomes an external buffer that lazyfuse
    /// only reads, and `tensor` (its deleter) is dropped exactly once, when the last array
    /// or plan referring to it is gone and lazyfuse's queued work on the device is done.
    /// A CPU (kDLCPU, or pinned kDLCUDAHost) tensor is copied into a lazyfuse host buffer
    /// (the CPU backend works on owned buffers), and its deleter runs before this returns;
    /// a pinned one is read after the same wait as a CUDA tensor (on CUDA device 0).
    ///
    /// Layouts: C-contiguous tensors (any stride on an axis of length 1), and on CUDA also
    /// any permutation of a C-contiguous layout (a transpose, Fortran order), imported as a
    /// lazy `permute` of the memory. Other strides (gaps, broadcast zeros, negative) are
    /// gathered on the CPU and refused on CUDA with [`Error::Unsupported`]: make the
    /// tensor contiguous on the producer's side.
    ///
    /// On CUDA this first waits for every stream of the device's context (so producers
    /// such as PyTorch and CuPy, which queue their writes on the primary context, need no
    /// step of their own); [`Array::from_dlpack_on_stream`] orders one stream instead.
    ///
    /// # Safety
    /// The tensor's data pointer (plus `byte_offset`) addresses the elements its shape,
    /// strides and dtype describe, initialized (bools as bytes 0 or 1), valid until its
    /// deleter runs, and not written by anyone while lazyfuse may read it.
    ///
    /// # Errors
    /// [`Error::Unsupported`] naming the dtype code, the device type or the strides it
    /// cannot represent; [`Error::Shape`] for a descriptor that fails validation.
    pub unsafe fn from_dlpack<M: ManagedTensorBase + 'static>(tensor: Managed<M>) -> Result<Array> {
        // SAFETY: forwarded contract; `None` synchronizes the context.
        unsafe { import(tensor, None) }
    }

    /// [`Array::from_dlpack`] that, on CUDA, makes lazyfuse's stream wait for the
    /// producer's `stream` (a raw `CUstream`, 0 for the legacy default stream) instead of
    /// synchronizing the context: the host does not wait.
    ///
    /// # Safety
    /// As [`Array::from_dlpack`], and `stream` is a live stream of the tensor's device's
    /// primary context (or 0) on which every write of the data was queued.
    pub unsafe fn from_dlpack_on_stream<M: ManagedTensorBase + 'static>(
        tensor: Managed<M>,
        stream: u64,
    ) -> Result<Array> {
        // SAFETY: forwarded contract.
        unsafe { import(tensor, Some(stream)) }
    }
}

/// Imports `tensor`; `stream`: the producer's stream to order after (CUDA), or `None` to
/// synchronize the device's context.
///
/// # Safety
/// As `Array::from_dlpack_on_stream` (with `stream`) or `Array::from_dlpack`.
unsafe fn import<M: ManagedTensorBase + 'static>(
    tensor: Managed<M>,
    stream: Option<u64>,
) -> Result<Array> {
    const OP: &str = "from_dlpack";
    let bad = |e: dlpark::tensor::Error| Error::Shape {
        op: OP,
        msg: format!("invalid DLPack tensor: {e}"),
    };
    let t = tensor.validate().map_err(bad)?;
    let dtype = from_dl(t.dtype())?;
    let shape: Vec<usize> = t
        .shape()
        .iter()
        .map(|&n| usize::try_from(n))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::Shape {
            op: OP,
            msg: format!("negative extent in shape {:?}", t.shape()),
        })?;
    let strides: Vec<i64> = t.strides_or_compact().map_err(bad)?.into_owned();
    let n = t.num_elements();
    let offset = usize::try_from(t.byte_offset()).map_err(|_| Error::Shape {
        op: OP,
        msg: format!("byte offset {} exceeds the address space", t.byte_offset()),
    })?;
    let base = t.data_ptr() as usize;
    if n > 0 && base == 0 {
        return Err(Error::Shape {
            op: OP,
            msg: format!("null data pointer for {n} {dtype} elements of shape {shape:?}"),
        });
    }
    let data = base.wrapping_add(offset);
    let dev = t.device();
    match dev.device_type {
        DLDeviceType::CPU | DLDeviceType::CUDAHOST => {
            if dev.device_type == DLDeviceType::CUDAHOST && n > 0 {
                // pinned memory a device may still be writing: wait for it on the host
                let device = Device::cuda(0)?;
                let Device::Cuda(d) = &device else {
                    return Err(Error::internal(OP, "Device::cuda gave another device"));
                };
                match stream {
                    Some(s) => {
                        // SAFETY: forwarded contract.
                        unsafe { d.wait_for_stream(s) }?;
                        d.synchronize()?;
                    }
                    None => d.synchronize_context()?,
                }
            }
            let host = if n == 0 {
                HostBuf::zeros(dtype, 0)
            } else {
                // SAFETY: the caller's contract: `data` with `strides` addresses the
                // tensor's `n` initialized elements of `dtype` on the host.
                unsafe { gather_host(data as *const u8, dtype, &shape, &strides) }?
            };
            drop(tensor); // the producer's deleter: its data was copied
            let buf = Buffer::host(host);
            Ok(Array::from_node(Node::leaf(
                buf,
                Shape::from_slice(&shape),
                Device::Cpu,
            )))
        }
        DLDeviceType::CUDA | DLDeviceType::CUDAMANAGED => {
            let ordinal = usize::try_from(dev.device_id).map_err(|_| Error::Unsupported {
                op: OP,
                msg: format!("CUDA device id {} is negative", dev.device_id),
            })?;
            let device = Device::cuda(ordinal)?;
            let Device::Cuda(d) = &device else {
                return Err(Error::internal(OP, "Device::cuda gave another device"));
            };
            // the memory's own (C-contiguous) shape, and the view that gives the tensor
            let Some((mem_shape, perm)) = permuted_contiguous(&shape, &strides) else {
                return Err(Error::Unsupported {
                    op: OP,
                    msg: format!(
                        "CUDA tensor of shape {shape:?} with strides {strides:?} (elements) \
                         is not a permutation of a C-contiguous layout; make it contiguous \
                         first"
                    ),
                });
            };
            match stream {
                // SAFETY: forwarded contract.
                Some(s) => unsafe { d.wait_for_stream(s) }?,
                None => d.synchronize_context()?,
            }
            // SAFETY: the caller's contract: `data` addresses `n` contiguous elements (in
            // the order of `mem_shape`) on this device, valid and unwritten while the
            // tensor (the owner) lives, and their writes are complete or ordered before the
            // device's stream (just established above).
            let a = unsafe {
                Array::from_cuda_ptr(data as u64, &mem_shape, dtype, &device, Box::new(tensor))
            }?;
            Ok(match perm {
                Some(p) => a.permute(&p),
                None => a,
            })
        }
        other => Err(Error::Unsupported {
            op: OP,
            msg: format!(
                "DLPack device type {} (id {}) is neither CPU nor CUDA",
                other.0, dev.device_id
            ),
        }),
    }
}

/// For a tensor of `shape` and element `strides`: the shape of the C-contiguous memory
/// and, when it differs, the permutation that views it as the tensor (`None`: the tensor
/// is C-contiguous itself, strides of length-1 axes ignored). `None` overall when the
/// layout is no permutation of a contiguous one.
#[allow(clippy::type_complexity)]
fn permuted_contiguous(
    shape: &[usize],
    strides: &[i64],
) -> Option<(Vec<usize>, Option<Vec<usize>>)> {
    if shape.contains(&0) {
        return Some((shape.to_vec(), None));
    }
    // memory axes: tensor axes by decreasing stride (length-1 axes keep their place in
    // a stable order by giving them the stride they would have in C order)
    let c = c_strides(shape);
    let eff: Vec<i64> = (0..shape.len())
        .map(|i| {
            if shape[i] == 1 {
                c[i] as i64
            } else {
                strides[i]
            }
        })
        .collect();
    if eff == c.iter().map(|&s| s as i64).collect::<Vec<_>>() {
        return Some((shape.to_vec(), None));
    }
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by(|&a, &b| eff[b].cmp(&eff[a]).then(a.cmp(&b)));
    let mem_shape: Vec<usize> = order.iter().map(|&i| shape[i]).collect();
    let mem_c = c_strides(&mem_shape);
    for (k, &i) in order.iter().enumerate() {
        if shape[i] != 1 && eff[i] != mem_c[k] as i64 {
            return None;
        }
    }
    // tensor axis i is memory axis pos[i]
    let mut perm = vec![0usize; shape.len()];
    for (k, &i) in order.iter().enumerate() {
        perm[i] = k;
    }
    Some((mem_shape, Some(perm)))
}

/// The elements of a host tensor at `data` (`shape`, element `strides`) in C order.
///
/// # Safety
/// Every element the shape and strides address from `data` is an initialized element of
/// `dtype` (bools as any byte; nonzero reads as true).
unsafe fn gather_host(
    data: *const u8,
    dtype: DType,
    shape: &[usize],
    strides: &[i64],
) -> Result<HostBuf> {
    let n: usize = shape.iter().product();
    let es = dtype.size();
    let mut out = runtime::host_zeros(dtype, n, "a DLPack import")?;
    let contiguous = permuted_contiguous(shape, strides).is_some_and(|(_, p)| p.is_none());
    let mut bytes = vec![0u8; n * es];
    if contiguous {
        // SAFETY: the `n * es` bytes at `data` are the contiguous elements (contract).
        bytes.copy_from_slice(unsafe { std::slice::from_raw_parts(data, n * es) });
    } else {
        let mut idx = vec![0usize; shape.len()];
        for chunk in bytes.chunks_exact_mut(es) {
            let off: isize = idx
                .iter()
                .zip(strides)
                .map(|(&i, &s)| i as isize * s as isize)
                .sum();
            // SAFETY: `off` elements from `data` is an element the tensor addresses.
            let src = unsafe { data.offset(off * es as isize) };
            // SAFETY: as above; `es` bytes of one element.
            chunk.copy_from_slice(unsafe { std::slice::from_raw_parts(src, es) });
            for ax in (0..shape.len()).rev() {
                idx[ax] += 1;
                if idx[ax] < shape[ax] {
                    break;
                }
                idx[ax] = 0;
            }
        }
    }
    if let HostBuf::Bool(v) = &mut out {
        for (b, &x) in v.iter_mut().zip(&bytes) {
            *b = x != 0;
        }
        return Ok(out);
    }
    let dst: *mut u8 =
        lazyfuse_codegen::dispatch!(&mut out, HostBuf, v => v.as_mut_ptr().cast::<u8>());
    // SAFETY: `out` holds `n` elements of `es` bytes of a plain-old-data type without
    // invalid bit patterns (Bool was handled above); `bytes` has exactly `n * es` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n * es) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_maps_both_ways() {
        for d in DType::ALL {
            assert_eq!(from_dl(to_dl(d)).unwrap(), d, "{d}");
            assert_eq!(to_dl(d).element_size(), d.size(), "{d}");
        }
        let e = from_dl(DLDataType::F8E4M3FN).unwrap_err().to_string();
        assert!(e.contains("code 10") && e.contains("float8"), "{e}");
        let e = from_dl(DLDataType::new(DLDataTypeCode::FLOAT, 32, 4))
            .unwrap_err()
            .to_string();
        assert!(e.contains("4 lanes"), "{e}");
    }

    #[test]
    fn layouts() {
        assert_eq!(
            permuted_contiguous(&[2, 3], &[3, 1]),
            Some((vec![2, 3], None))
        );
        // length-1 axes may carry any stride
        assert_eq!(
            permuted_contiguous(&[2, 1, 3], &[3, 99, 1]),
            Some((vec![2, 1, 3], None))
        );
        // a transpose: memory [3, 2], viewed through permute([1, 0])
        assert_eq!(
            permuted_contiguous(&[2, 3], &[1, 2]),
            Some((vec![3, 2], Some(vec![1, 0])))
        );
        // Fortran order of [2, 3, 4]
        assert_eq!(
            permuted_contiguous(&[2, 3, 4], &[1, 2, 6]),
            Some((vec![4, 3, 2], Some(vec![2, 1, 0])))
        );
        assert_eq!(permuted_contiguous(&[2, 3], &[6, 2]), None); // gaps
        assert_eq!(permuted_contiguous(&[2, 3], &[0, 1]), None); // broadcast
        assert_eq!(permuted_contiguous(&[2, 3], &[-3, 1]), None); // negative
        assert_eq!(
            permuted_contiguous(&[0, 3], &[7, 7]),
            Some((vec![0, 3], None))
        );
    }
}
