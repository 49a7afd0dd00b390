//! CPU matrix products: one `ndarray::linalg::general_mat_mul` (matrixmultiply's sgemm,
//! dgemm, cgemm, zgemm) per batch entry, over strided views of the host buffers.

use crate::runtime::matmul::GemmSpec;
use crate::{Error, Result};
use lazyfuse_codegen::HostBuf;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, LinalgScalar, ShapeBuilder};

/// The product `spec` of `a` and `b` (checked against the spec by the caller).
pub(crate) fn run(spec: &GemmSpec, a: &HostBuf, b: &HostBuf) -> Result<HostBuf> {
    Ok(match (a, b) {
        (HostBuf::F32(x), HostBuf::F32(y)) => HostBuf::F32(typed(spec, x, y)?),
        (HostBuf::F64(x), HostBuf::F64(y)) => HostBuf::F64(typed(spec, x, y)?),
        (HostBuf::C64(x), HostBuf::C64(y)) => HostBuf::C64(typed(spec, x, y)?),
        (HostBuf::C128(x), HostBuf::C128(y)) => HostBuf::C128(typed(spec, x, y)?),
        (x, y) => {
            return Err(Error::internal(
                "matmul",
                format!("unsupported operand dtypes {} and {}", x.dtype(), y.dtype()),
            ))
        }
    })
}

fn typed<T: LinalgScalar>(spec: &GemmSpec, a: &[T], b: &[T]) -> Result<Vec<T>> {
    // fallible: a product too large for memory is an error, not an abort
    let len = spec.out_len();
    let mut out: Vec<T> =
        lazyfuse_codegen::try_with_capacity(len).map_err(|e| Error::OutOfMemory {
            op: "matmul",
            bytes: e.bytes,
            what: format!("{len} elements of a matrix product"),
        })?;
    out.resize(len, T::zero());
    let (m, n, k) = (spec.m, spec.n, spec.k);
    if out.is_empty() || k == 0 {
        return Ok(out); // an empty sum is zero
    }
    let view_err = |e: ndarray::ShapeError| Error::internal("matmul", format!("{e} for {spec}"));
    // strides of the stored matrices (row-major or column-major)
    let sa = if spec.a.trans { (1, m) } else { (k, 1) };
    let sb = if spec.b.trans { (1, k) } else { (n, 1) };
    for [oa, ob, oc] in spec.batches().offsets() {
        let av = ArrayView2::from_shape((m, k).strides(sa), &a[oa..]).map_err(view_err)?;
        let bv = ArrayView2::from_shape((k, n).strides(sb), &b[ob..]).map_err(view_err)?;
        let mut cv =
            ArrayViewMut2::from_shape((m, n), &mut out[oc..oc + m * n]).map_err(view_err)?;
        general_mat_mul(T::one(), &av, &bv, T::zero(), &mut cv);
    }
    Ok(out)
}
