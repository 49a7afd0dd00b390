//! `lf::linalg` and `Array::matmul`: matrix products with NumPy's `@` rules. A product of
//! floating-point or complex arrays is one library step (cuBLAS / ndarray); its elementwise
//! producers fuse into the kernel that materializes its operands, and transposed or
//! batch-broadcast operands are read in place (`schedule::matmul`).

use super::{make, same_device};
use crate::graph::{Op, Shape};
use crate::promote::result_type;
use crate::shape::broadcast_shapes;
use crate::Array;
use lazyfuse_codegen::DType;

pub use super::reduce::norm;

impl Array {
    /// The matrix product `self @ other` (NumPy's `matmul`): 1-D operands are vectors (a
    /// dimension is prepended to the left one, appended to the right one, and removed from
    /// the result); operands of rank above 2 are stacks of matrices whose batch axes
    /// broadcast. The result dtype is the promotion of both dtypes.
    ///
    /// # Panics
    /// On a 0-d operand, mismatched inner dimensions, batch axes that do not broadcast,
    /// operands on different devices, and (for now) integer or bool results.
    #[track_caller]
    pub fn matmul(&self, other: &Array) -> Array {
        matmul_impl("matmul", self, other)
    }
}

/// NumPy's `dot`: for operands of rank 1 and 2 the same as [`Array::matmul`]; a 0-d
/// operand multiplies elementwise; for an N-D left operand and an M-D right operand
/// (M >= 2) the sum product over the last axis of `a` and the second-to-last axis of `b`,
/// of shape `a.shape[..-1] + b.shape[..-2] + b.shape[-1..]`.
#[track_caller]
pub fn dot(a: &Array, b: &Array) -> Array {
    if a.ndim() == 0 || b.ndim() == 0 {
        same_device("dot", &[a, b]);
        return a * b;
    }
    if a.ndim() <= 2 && b.ndim() <= 2 || b.ndim() == 1 {
        return matmul_impl("dot", a, b);
    }
    // a: (.., k), b: (.., k, n) -> (p, k) @ (k, q) with p = prod(a[..-1]),
    // q = prod(b[..-2]) * n, then back to the N-D result
    let (na, nb) = (a.ndim(), b.ndim());
    let k = a.shape()[na - 1];
    if b.shape()[nb - 2] != k {
        panic!(
            "dot: shapes {:?} ({}) and {:?} ({}) not aligned: {} (dim {}) != {} (dim {})",
            a.shape(),
            a.dtype(),
            b.shape(),
            b.dtype(),
            k,
            na - 1,
            b.shape()[nb - 2],
            nb - 2
        );
    }
    let p: usize = a.shape()[..na - 1].iter().product();
    let mut perm: Vec<usize> = vec![nb - 2];
    perm.extend((0..nb).filter(|&d| d != nb - 2));
    let q: usize = perm[1..].iter().map(|&d| b.shape()[d]).product();
    let a2 = a.reshape_to(Shape::from_slice(&[p, k]));
    let b2 = b.permute(&perm).reshape_to(Shape::from_slice(&[k, q]));
    let mut out: Shape = a.shape()[..na - 1].iter().copied().collect();
    out.extend(b.shape()[..nb - 2].iter().copied());
    out.push(b.shape()[nb - 1]);
    matmul_impl("dot", &a2, &b2).reshape_to(out)
}

/// `matmul` with the name of the calling operation for messages.
#[track_caller]
fn matmul_impl(op: &str, a: &Array, b: &Array) -> Array {
    let what = || {
        format!(
            "operands of shapes {:?} ({}) and {:?} ({})",
            a.shape(),
            a.dtype(),
            b.shape(),
            b.dtype()
        )
    };
    if a.ndim() == 0 || b.ndim() == 0 {
        panic!(
            "{op}: 0-d operands are not matrices (use `*` to scale): {}",
            what()
        );
    }
    let dev = same_device(op, &[a, b]);
    let (na, nb) = (a.ndim(), b.ndim());
    let k = a.shape()[na - 1];
    let kb = if nb == 1 {
        b.shape()[0]
    } else {
        b.shape()[nb - 2]
    };
    if k != kb {
        panic!("{op}: inner dimensions differ ({k} vs {kb}) for {}", what());
    }
    // vectors become matrices: (k,) -> (1, k) on the left, (k, 1) on the right
    let a2 = if na == 1 {
        a.reshape_to(Shape::from_slice(&[1, k]))
    } else {
        a.clone()
    };
    let b2 = if nb == 1 {
        b.reshape_to(Shape::from_slice(&[k, 1]))
    } else {
        b.clone()
    };
    let (sa, sb) = (a2.shape(), b2.shape());
    // `let else`, not `unwrap_or_else(|| panic!(..))`: a closure reports its own line
    let Some(batch) = broadcast_shapes(&sa[..sa.len() - 2], &sb[..sb.len() - 2]) else {
        panic!("{op}: batch dimensions do not broadcast for {}", what())
    };
    let dt = result_type(a.dtype(), b.dtype());
    let (m, n) = (sa[sa.len() - 2], sb[sb.len() - 1]);
    // the node has NumPy's result shape: the axes the vectors gained are dropped (the
    // C-order buffer of `[batch.., m, n]` is the same)
    let mut shape = batch;
    if na > 1 {
        shape.push(m);
    }
    if nb > 1 {
        shape.push(n);
    }
    if k == 0 {
        // an empty sum: NumPy gives zeros
        return Array::zeros_on(&shape, dt, &dev);
    }
    if !dt.is_inexact() {
        return matmul_integer(&a2, &b2, dt).reshape_to(shape);
    }
    if k == 1 {
        // an outer product, fused with its neighbours instead of a library call; NumPy's
        // sum starts at +0, so `0 + (-2 * 0)` is +0: adding +0 gives the same signed zeros
        // (a GEMM keeps the product's -0)
        let p = &a2.astype(dt) * &b2.astype(dt);
        return (p + 0.0).reshape_to(shape);
    }
    if dt.is_half() {
        // no 16-bit GEMM: products and sums in F32 (NumPy's float16 dot accumulates in
        // float32 too), the result rounded once
        let f = DType::F32;
        return make(Op::MatMul, f, shape, &dev, &[&a2.astype(f), &b2.astype(f)]).astype(dt);
    }
    make(
        Op::MatMul,
        dt,
        shape,
        &dev,
        &[&a2.astype(dt), &b2.astype(dt)],
    )
}

/// Matrix products with an integer or bool result dtype (cuBLAS has none): the
/// broadcast products `a[.., m, k, 1] * b[.., 1, k, n]` summed over `k` by one fused
/// reduction kernel (NumPy's integer `@` wraps like this sum; bool `@` is `any(a & b)`).
#[track_caller]
fn matmul_integer(a: &Array, b: &Array, dt: DType) -> Array {
    let mut sa: Shape = a.shape().iter().copied().collect();
    sa.push(1);
    let mut sb: Shape = b.shape().iter().copied().collect();
    sb.insert(sb.len() - 2, 1);
    let (x, y) = (a.astype(dt).reshape_to(sa), b.astype(dt).reshape_to(sb));
    if dt == DType::Bool {
        x.logical_and(&y).any_axes(&[-2], false)
    } else {
        (&x * &y).sum_axes(&[-2], false).astype(dt)
    }
}
