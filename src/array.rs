//! `Array`: the cheap-clone handle to a node of the lazy DAG; metadata, evaluation and
//! readback.

use crate::graph::{Node, Op, Shape};
use crate::runtime::{self, Buffer};
use crate::{Device, Element, Error, Result};
use lazyfuse_codegen::{DType, Scalar};
use std::sync::Arc;

/// A lazy n-dimensional array on a device. Operations build new arrays without computing
/// anything; [`Array::eval`] (or a readback) runs the fused plan.
#[derive(Clone)]
#[must_use = "arrays are lazy: nothing is computed until the result is used, evaluated or read back"]
pub struct Array {
    pub(crate) node: Arc<Node>,
}

impl Array {
    pub(crate) fn from_node(node: Arc<Node>) -> Array {
        Array { node }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.node.shape
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.node.shape.len()
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.node.size()
    }
    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.node.dtype
    }
    /// The device the array lives on.
    pub fn device(&self) -> Device {
        self.node.device.clone()
    }
    /// True once the array holds its computed buffer.
    pub fn is_evaluated(&self) -> bool {
        self.node.buffer().is_some()
    }

    // --- creation from host data ---

    /// An array holding `data` (C order) with `shape`, on the default device
    /// ([`default_device`](crate::default_device)); an error, too, when the default device
    /// comes from a `LAZYFUSE_DEVICE` that names no usable device.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Array> {
        Array::from_vec_on(data, shape, &crate::device::try_default_device()?)
    }

    /// [`Array::from_vec`] on `dev`.
    pub fn from_vec_on<T: Element>(data: Vec<T>, shape: &[usize], dev: &Device) -> Result<Array> {
        check_fill("from_vec", data.len(), shape)?;
        let _scope = crate::profile::scope(false);
        let buf = match dev {
            Device::Cpu => runtime::upload(dev, T::into_host(data))?,
            _ => runtime::upload_slice(dev, &data)?,
        };
        Ok(Array::from_node(Node::leaf(
            buf,
            Shape::from_slice(shape),
            dev.clone(),
        )))
    }

    /// An array copied from `data` (C order) with `shape`, on the default device.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Array> {
        Array::from_vec(data.to_vec(), shape)
    }

    /// [`Array::from_slice`] on `dev`.
    pub fn from_slice_on<T: Element>(data: &[T], shape: &[usize], dev: &Device) -> Result<Array> {
        check_fill("from_slice", data.len(), shape)?;
        let _scope = crate::profile::scope(false);
        let buf = runtime::upload_slice(dev, data)?;
        Ok(Array::from_node(Node::leaf(
            buf,
            Shape::from_slice(shape),
            dev.clone(),
        )))
    }

    /// An array copied from an ndarray array or view of any dimension and memory layout
    /// (`&ndarray::ArrayRef`: owned arrays, views, slices and transposes coerce to it), on
    /// the default device.
    ///
    /// # Panics
    /// When the default device cannot be had (a `LAZYFUSE_DEVICE` that names no usable
    /// device, see [`crate::default_device`]) or cannot take the data (a failed
    /// host-to-device copy); use [`Array::from_ndarray_on`] to get the error.
    #[track_caller]
    pub fn from_ndarray<T: Element, D: ndarray::Dimension>(a: &ndarray::ArrayRef<T, D>) -> Array {
        match Array::from_ndarray_on(a, &crate::default_device()) {
            Ok(x) => x,
            Err(e) => panic!("from_ndarray: {e}"),
        }
    }

    /// [`Array::from_ndarray`] on `dev`, with the error as a `Result`. Contiguous C-order
    /// data is copied in one block; any other layout is gathered in logical (C) order.
    pub fn from_ndarray_on<T: Element, D: ndarray::Dimension>(
        a: &ndarray::ArrayRef<T, D>,
        dev: &Device,
    ) -> Result<Array> {
        match a.as_slice() {
            Some(s) => Array::from_slice_on(s, a.shape(), dev),
            None => Array::from_vec_on(a.iter().copied().collect(), a.shape(), dev),
        }
    }

    // --- evaluation ---

    /// Materializes the array on its device. On CUDA this returns once the work is queued.
    ///
    /// # Errors
    /// Besides the device's errors: [`Error::Shape`] before anything runs when a node of the
    /// graph would need a buffer of more than `isize::MAX` bytes (NumPy: `ValueError: array
    /// is too big`), and [`Error::OutOfMemory`] when a buffer that could exist cannot be
    /// allocated.
    pub fn eval(&self) -> Result<()> {
        crate::api::gather::known_failure(&self.node)?;
        crate::exec::evaluate(std::slice::from_ref(&self.node))
    }

    /// The evaluated buffer (evaluating first when needed).
    pub(crate) fn buffer(&self) -> Result<Arc<Buffer>> {
        if let Some(b) = self.node.buffer() {
            return Ok(b);
        }
        self.eval()?;
        self.node
            .buffer()
            .ok_or_else(|| Error::internal("eval", "node not realized after eval"))
    }

    fn check_dtype<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::DType {
                op,
                expected: self.dtype(),
                got: T::DTYPE,
            });
        }
        Ok(())
    }

    fn host_data<T: Element>(&self, op: &'static str) -> Result<Vec<T>> {
        self.check_dtype::<T>(op)?;
        crate::api::gather::check_node(&self.node)?;
        let _scope = crate::profile::scope(false);
        let buf = self.buffer()?;
        let host = runtime::download(&buf, 0, buf.len())?;
        T::from_host(host).ok_or_else(|| Error::internal(op, "buffer dtype differs from node"))
    }

    /// Evaluates and copies to the host as an ndarray (waits for the device). `T` must
    /// match the dtype.
    pub fn to_host<T: Element>(&self) -> Result<ndarray::ArrayD<T>> {
        let data = self.host_data::<T>("to_host")?;
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(self.shape()), data)
            .map_err(|e| Error::internal("to_host", e))
    }

    /// Evaluates and copies to the host as a flat vector in C order.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.host_data::<T>("to_vec")
    }

    /// Evaluates and copies into `out` (flat, C order), which must hold exactly
    /// `self.size()` elements of the array's dtype. Reusing one destination across calls
    /// avoids the page faults of fresh host memory, which bound a large [`Array::to_vec`]
    /// (see `benches/NOTES.md`, "Transfers").
    pub fn copy_to_slice<T: Element>(&self, out: &mut [T]) -> Result<()> {
        self.check_dtype::<T>("copy_to_slice")?;
        if out.len() != self.size() {
            return Err(Error::Shape {
                op: "copy_to_slice",
                msg: format!(
                    "a destination of {} elements for an array of shape {:?} ({} elements)",
                    out.len(),
                    self.shape(),
                    self.size()
                ),
            });
        }
        if T::DTYPE == DType::Bool {
            // bools are read as bytes and mapped (see `runtime::download`)
            out.copy_from_slice(&self.host_data::<T>("copy_to_slice")?);
            return Ok(());
        }
        crate::api::gather::check_node(&self.node)?;
        let _scope = crate::profile::scope(false);
        let buf = self.buffer()?;
        // SAFETY: `T` is a plain old data element type other than bool (checked above), so
        // any bytes written into `out` are valid elements; `out` is borrowed mutably here.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(out),
            )
        };
        runtime::download_into(&buf, bytes)
    }

    /// The single element of a size-1 array. Reading an element of a view of an evaluated
    /// array copies only that element.
    pub fn item<T: Element>(&self) -> Result<T> {
        self.check_dtype::<T>("item")?;
        if self.size() != 1 {
            return Err(Error::Shape {
                op: "item",
                msg: format!(
                    "item() needs exactly one element, shape is {:?}",
                    self.shape()
                ),
            });
        }
        crate::api::gather::check_node(&self.node)?;
        let _scope = crate::profile::scope(false);
        let (buf, offset) = match single_element(&self.node) {
            Some(found) => found,
            None => (self.buffer()?, 0),
        };
        let host = runtime::download(&buf, offset, 1)?;
        let v = T::from_host(host).ok_or_else(|| Error::internal("item", "dtype"))?;
        Ok(v[0])
    }

    /// Evaluates `self.astype(T::DTYPE)` and copies it to the host as a flat vector in C
    /// order: a readback that converts with NumPy's `astype` rules, where [`Array::to_vec`]
    /// needs `T` to match the dtype. The conversion fuses into the kernel that computes the
    /// array. Floats to integers truncate toward zero, anything to `bool` is `x != 0`, and
    /// complex to real keeps the real part (NumPy's `astype` does the same, with a
    /// `ComplexWarning`).
    pub fn to_vec_as<T: Element>(&self) -> Result<Vec<T>> {
        self.astype(T::DTYPE).host_data::<T>("to_vec_as")
    }

    /// The single element of a size-1 array converted to `T` with NumPy's `astype` rules
    /// (see [`Array::to_vec_as`]).
    pub fn item_as<T: Element>(&self) -> Result<T> {
        if self.size() != 1 {
            return Err(Error::Shape {
                op: "item_as",
                msg: format!(
                    "item_as() needs exactly one element, shape is {:?}",
                    self.shape()
                ),
            });
        }
        self.astype(T::DTYPE).item::<T>()
    }

    /// A lazy copy of this array on `dev`.
    #[track_caller]
    pub fn to_device(&self, dev: &Device) -> Array {
        if &self.node.device == dev {
            return self.clone();
        }
        Array::from_node(Node::new(
            Op::ToDevice,
            self.dtype(),
            Shape::from_slice(&self.node.shape),
            dev.clone(),
            smallvec::smallvec![self.node.clone()],
        ))
    }

    pub(crate) fn scalar_value(&self) -> Option<Scalar> {
        match self.node.op {
            Op::Const(s) => Some(s),
            _ => None,
        }
    }
}

/// `Ok` when `len` elements fill `shape`, else the shape error of `op`.
fn check_fill(op: &'static str, len: usize, shape: &[usize]) -> Result<()> {
    let Some(n) = crate::shape::checked_size(shape) else {
        return Err(Error::Shape {
            op,
            msg: format!("shape {shape:?} has more elements than usize can count"),
        });
    };
    if n != len {
        return Err(Error::Shape {
            op,
            msg: format!("{len} elements do not fill shape {shape:?}"),
        });
    }
    Ok(())
}

/// For a size-1 view chain (slice, reshape, permute, broadcast) over an evaluated buffer:
/// the buffer and the element's offset, computed on the host.
fn single_element(node: &Arc<Node>) -> Option<(Arc<Buffer>, usize)> {
    // index of the element in the current node, as a multi-index
    let mut idx: Shape = Shape::from_elem(0, node.shape.len());
    let mut cur = node.clone();
    loop {
        if let Some(b) = cur.buffer() {
            let strides = crate::shape::strides(&cur.shape);
            let off = idx.iter().zip(strides.iter()).map(|(i, s)| i * s).sum();
            return Some((b, off));
        }
        let inputs = cur.inputs();
        let input = inputs.first()?.clone();
        idx = match &cur.op {
            Op::Reshape => {
                let strides = crate::shape::strides(&cur.shape);
                let lin: usize = idx.iter().zip(strides.iter()).map(|(i, s)| i * s).sum();
                let istr = crate::shape::strides(&input.shape);
                istr.iter()
                    .zip(input.shape.iter())
                    .map(|(s, n)| (lin / s) % n.max(&1))
                    .collect()
            }
            Op::Permute(p) => {
                let mut out = Shape::from_elem(0, p.len());
                for (k, &pk) in p.iter().enumerate() {
                    out[pk] = idx[k];
                }
                out
            }
            Op::Broadcast => {
                let off = cur.shape.len() - input.shape.len();
                (0..input.shape.len())
                    .map(|j| if input.shape[j] == 1 { 0 } else { idx[j + off] })
                    .collect()
            }
            Op::Slice(sl) => idx
                .iter()
                .zip(sl.iter())
                .map(|(&i, &(start, step))| (start + i as isize * step) as usize)
                .collect(),
            _ => return None,
        };
        cur = input;
    }
}

/// Materializes several arrays in one plan; shared subexpressions are computed once.
pub fn eval(arrays: &[&Array]) -> Result<()> {
    for a in arrays {
        crate::api::gather::known_failure(&a.node)?;
    }
    let nodes: Vec<Arc<Node>> = arrays.iter().map(|a| a.node.clone()).collect();
    crate::exec::evaluate(&nodes)
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Array({}, shape={:?}, {}{})",
            self.dtype(),
            self.shape(),
            self.node.device,
            if self.is_evaluated() { "" } else { ", lazy" }
        )
    }
}

impl<T: Element, D: ndarray::Dimension> From<ndarray::Array<T, D>> for Array {
    #[track_caller]
    fn from(a: ndarray::Array<T, D>) -> Array {
        Array::from_ndarray(&a)
    }
}
