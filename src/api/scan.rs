//! Scans (`cumsum`, `cumprod`): the scanned axis is moved last and the others flattened
//! into rows by views, and one scan node (`Op::Reduce` with `ReduceLayout::Scan`) fuses the
//! elementwise producer it reads and the elementwise epilogue that reads it.

use super::make;
use crate::graph::Op;
use crate::{Array, DType};
use lazyfuse_codegen::{ReduceLayout, ReduceOp};

/// NumPy's accumulation dtype: Bool and integers accumulate in I64, others in their own.
fn accumulation_dtype(d: DType) -> DType {
    if d.is_bool() || d.is_int() {
        DType::I64
    } else {
        d
    }
}

#[track_caller]
fn scan(a: &Array, axis: isize, op: ReduceOp, name: &str) -> Array {
    let nd = a.ndim();
    let ax = match crate::shape::norm_axis(axis, nd, false) {
        Some(x) => x,
        None => panic!("{name}: axis {axis} out of range for an array of rank {nd}"),
    };
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
    if ax + 1 == nd {
        y
    } else {
        let mut inv = vec![0; nd];
        for (k, &p) in perm.iter().enumerate() {
            inv[p] = k;
        }
        y.permute(&inv)
    }
}

impl Array {
    /// Cumulative sum along `axis` (NumPy's `cumsum(axis=..)`): Bool and integers
    /// accumulate in I64, floats and complex numbers in their own dtype. On the CPU each
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
