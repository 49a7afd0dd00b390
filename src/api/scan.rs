//! Scans (`cumsum`, `cumprod`): the scanned axis is moved last and the others flattened
//! into rows by views, and one scan node (`Op::Reduce` with `ReduceLayout::Scan`) fuses the
//! elementwise producer it reads and the elementwise epilogue that reads it.

use super::make;
use crate::graph::Op;
use crate::{Array, DType};
use lazyfuse_codegen::{ReduceLayout, ReduceOp};

/// NumPy's accumulation dtype: Bool and signed integers accumulate in I64, unsigned ones
/// in U64, others in their own; 16-bit floats are scanned in F32 (the result is rounded
/// back once).
fn accumulation_dtype(d: DType) -> DType {
    if d.is_bool() || d.is_signed_int() {
        DType::I64
    } else if d.is_unsigned() {
        DType::U64
    } else if d.is_half() {
        DType::F32
    } else {
        d
    }
}

#[track_caller]
fn scan(a: &Array, axis: isize, op: ReduceOp, name: &str) -> Array {
    let nd = a.ndim();
    let ax = super::movement::axis_of(name, axis, nd);
    let dtype = accumulation_dtype(a.dtype());
    let x = a.astype(dtype);
    // the scanned axis last, the others flattened into rows
    let mut perm: Vec<usize> = (0..nd).filter(|&k| k != ax).collect();
    perm.push(ax);
    let moved = if ax + 1 == nd { x } else { x.permute(&perm) };
    let r = a.shape()[ax];
    let m = a.size().checked_div(r).unwrap_or(0);
    let rows = moved.reshape(&[m as isize, r as isize]);
    let done = make(
        Op::Reduce(op, ReduceLayout::Scan),
        dtype,
        [m, r].into_iter().collect(),
        &a.device(),
        &[&rows],
    );
    let back: Vec<isize> = moved.shape().iter().map(|&d| d as isize).collect();
    let y = done.reshape(&back);
    let y = if ax + 1 == nd {
        y
    } else {
        let mut inv = vec![0; nd];
        for (k, &p) in perm.iter().enumerate() {
            inv[p] = k;
        }
        y.permute(&inv)
    };
    if a.dtype().is_half() {
        y.astype(a.dtype())
    } else {
        y
    }
}

impl Array {
    /// Cumulative sum along `axis` (NumPy's `cumsum(axis=..)`): Bool and signed integers
    /// accumulate in I64, unsigned integers in U64, floats and complex numbers in their own
    /// dtype (F16 and BF16 in F32, rounded back once: NumPy rounds every partial sum). On the CPU each
    /// line is summed in order, as NumPy does; on CUDA in tiles (rounding may differ in
    /// the last bits).
    ///
    /// # Panics
    /// When `axis` is out of range.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Array {
        scan(self, axis, ReduceOp::Sum, "cumsum")
    }

    /// Cumulative product along `axis` (NumPy's `cumprod(axis=..)`), with the dtypes of
    /// [`Array::cumsum`].
    ///
    /// # Panics
    /// When `axis` is out of range.
    #[track_caller]
    pub fn cumprod(&self, axis: isize) -> Array {
        scan(self, axis, ReduceOp::Prod, "cumprod")
    }
}
