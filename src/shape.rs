//! Shape arithmetic: broadcasting, axis normalization, C-order strides.

use crate::graph::Shape;

/// NumPy broadcasting of two shapes, or `None` when incompatible.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Shape> {
    if a == b {
        return Some(Shape::from_slice(a)); // the common case, without the per-axis loop
    }
    let n = a.len().max(b.len());
    let mut out = Shape::from_elem(0, n);
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// True when `from` broadcasts to `to`.
pub(crate) fn can_broadcast(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

/// Normalizes a possibly negative axis for an array of rank `ndim` (`ndim + 1` slots when
/// `extra` is set, as `expand_dims` needs); `None` when out of range.
pub(crate) fn norm_axis(axis: isize, ndim: usize, extra: bool) -> Option<usize> {
    let n = (ndim + extra as usize) as isize;
    let a = if axis < 0 { axis + n } else { axis };
    (0..n).contains(&a).then_some(a as usize)
}

/// C-order strides (in elements) of a shape.
pub(crate) fn strides(shape: &[usize]) -> Shape {
    let mut s = Shape::from_elem(1, shape.len());
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The number of elements of `shape`, or `None` when it does not fit `usize`. As in NumPy,
/// the product of the non-zero dimensions must fit even when a zero makes the size 0; so
/// every shape this accepts also has a plain `iter().product()` that cannot overflow.
pub(crate) fn checked_size(shape: &[usize]) -> Option<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d))?;
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

/// [`checked_size`], panicking at the caller's line, naming `op`, when the size does not
/// fit `usize` (NumPy: `ValueError: array is too big`).
#[track_caller]
pub(crate) fn size_or_panic(op: &str, shape: &[usize]) -> usize {
    match checked_size(shape) {
        Some(n) => n,
        None => panic!("{op}: shape {shape:?} has more elements than usize can count"),
    }
}

/// Bytes of a buffer of `len` elements of `dtype`, or `None` when they overflow or exceed
/// `isize::MAX` (the most any allocation, host or device, can hold).
pub(crate) fn buffer_bytes(len: usize, dtype: lazyfuse_codegen::DType) -> Option<usize> {
    len.checked_mul(dtype.size())
        .filter(|&b| b <= isize::MAX as usize)
}
