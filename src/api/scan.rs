//! Scans (`cumsum`, `cumprod`) built from fused reductions: a line is cut into segments of
//! [`SEGMENT`] elements, each segment's inclusive scan is one masked reduction over the
//! segment (so the scan's elementwise producer fuses into it), the segment totals are
//! scanned the same way, recursively, and each segment adds its predecessors' total.

use crate::{Array, DType};
use ndarray::SliceInfoElem;

/// Elements per segment: each output of a segment's scan reduces this many masked inputs.
pub(crate) const SEGMENT: usize = 16;

#[derive(Clone, Copy)]
enum ScanOp {
    Sum,
    Prod,
}

impl ScanOp {
    fn identity(self) -> f64 {
        match self {
            ScanOp::Sum => 0.0,
            ScanOp::Prod => 1.0,
        }
    }
    fn name(self) -> &'static str {
        match self {
            ScanOp::Sum => "cumsum",
            ScanOp::Prod => "cumprod",
        }
    }
    fn reduce_last(self, x: &Array) -> Array {
        match self {
            ScanOp::Sum => x.sum_axes(&[-1], false),
            ScanOp::Prod => x.prod_axes(&[-1], false),
        }
    }
    fn combine(self, a: &Array, b: &Array) -> Array {
        match self {
            ScanOp::Sum => a + b,
            ScanOp::Prod => a * b,
        }
    }
}

fn full_slice() -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    }
}

/// The inclusive scan of each segment `x[.., 0..s]` (the last axis, `s <= SEGMENT`): output
/// `j` reduces the inputs `k <= j` with the others replaced by the identity.
fn segment_scan(x: &Array, op: ScanOp) -> Array {
    let s = x.shape()[x.ndim() - 1];
    let dev = x.device();
    let k = Array::arange_on(0.0, s as f64, 1.0, DType::I64, &dev);
    let mask = k.reshape(&[1, s as isize]).le(k.reshape(&[s as isize, 1]));
    let mut wide: Vec<usize> = x.shape().to_vec();
    wide.insert(x.ndim() - 1, s);
    let spread = x.expand_dims(-2).broadcast_to(&wide);
    let fill = Array::scalar_on(op.identity(), &dev).astype(x.dtype());
    op.reduce_last(&crate::where_(&mask, &spread, &fill))
}

/// The inclusive scan of every row of `x` (`[m, r]`, already in the accumulation dtype).
fn scan_rows(x: &Array, op: ScanOp) -> Array {
    let (m, r) = (x.shape()[0], x.shape()[1]);
    if r <= 1 || m == 0 {
        return x.clone();
    }
    if r <= SEGMENT {
        return segment_scan(x, op);
    }
    let b = r.div_ceil(SEGMENT);
    let padded = x.pad(&[(0, 0), (0, b * SEGMENT - r)], op.identity());
    let local = segment_scan(
        &padded.reshape(&[m as isize, b as isize, SEGMENT as isize]),
        op,
    );
    let last = SliceInfoElem::Index(SEGMENT as isize - 1);
    let totals = local.slice([full_slice(), full_slice(), last].as_slice());
    let inclusive = scan_rows(&totals, op);
    let before = inclusive
        .slice(
            [
                full_slice(),
                SliceInfoElem::Slice {
                    start: 0,
                    end: Some(b as isize - 1),
                    step: 1,
                },
            ]
            .as_slice(),
        )
        .pad(&[(0, 0), (1, 0)], op.identity());
    let out = op.combine(&local, &before.expand_dims(-1));
    out.reshape(&[m as isize, (b * SEGMENT) as isize]).slice(
        [
            full_slice(),
            SliceInfoElem::Slice {
                start: 0,
                end: Some(r as isize),
                step: 1,
            },
        ]
        .as_slice(),
    )
}

/// NumPy's accumulation dtype: Bool and integers accumulate in I64, others in their own.
fn accumulation_dtype(d: DType) -> DType {
    if d.is_bool() || d.is_int() {
        DType::I64
    } else {
        d
    }
}

#[track_caller]
fn scan(a: &Array, axis: isize, op: ScanOp) -> Array {
    let nd = a.ndim();
    let ax = match crate::shape::norm_axis(axis, nd, false) {
        Some(x) => x,
        None => panic!(
            "{}: axis {axis} out of range for an array of rank {nd}",
            op.name()
        ),
    };
    let x = a.astype(accumulation_dtype(a.dtype()));
    // the scanned axis last, the others flattened into rows
    let mut perm: Vec<usize> = (0..nd).filter(|&k| k != ax).collect();
    perm.push(ax);
    let moved = if ax + 1 == nd { x } else { x.permute(&perm) };
    let r = a.shape()[ax];
    let m = a.size().checked_div(r).unwrap_or(0);
    let rows = moved.reshape(&[m as isize, r as isize]);
    let done = scan_rows(&rows, op);
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
    /// accumulate in I64, floats and complex numbers in their own dtype (in segments of 16
    /// and then across segments, an order at least as accurate as a running sum).
    ///
    /// # Panics
    /// When `axis` is out of range.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Array {
        scan(self, axis, ScanOp::Sum)
    }

    /// Cumulative product along `axis` (NumPy's `cumprod(axis=..)`), with the dtypes of
    /// [`Array::cumsum`].
    ///
    /// # Panics
    /// When `axis` is out of range.
    #[track_caller]
    pub fn cumprod(&self, axis: isize) -> Array {
        scan(self, axis, ScanOp::Prod)
    }
}
