//! Reductions: `sum mean max min prod argmax argmin all any var std` over all elements or
//! over axes, and `linalg::norm`. Every reduction is built as views (the kept axes moved
//! first and the array seen as `[kept, reduced]`), one `Reduce` node over the last axis,
//! scalar epilogue ops (`/ n`, `sqrt`) that the planner fuses into the reduction kernel,
//! and a reshape to NumPy's result shape.

use super::make;
use crate::graph::{Op, Shape};
use crate::shape::norm_axis;
use crate::Array;
use lazyfuse_codegen::{DType, ReduceLayout, ReduceOp};

/// A reduction built up to its `[m]` result, with the shape NumPy gives the result.
struct Reduced {
    flat: Array,
    shape: Shape,
    /// Number of values each output combines.
    count: usize,
}

impl Reduced {
    #[track_caller]
    fn finish(self, f: impl FnOnce(Array, usize) -> Array) -> Array {
        f(self.flat, self.count).reshape_to(self.shape)
    }
}

/// The reduced axes (sorted, distinct) of `axes`, or every axis for `None`.
#[track_caller]
fn norm_axes(name: &str, axes: Option<&[isize]>, ndim: usize) -> Vec<usize> {
    let Some(axes) = axes else {
        return (0..ndim).collect();
    };
    // a loop of `match`es, not `map(unwrap_or_else(|| panic!(..)))`: a closure would
    // report its own line instead of the caller's
    let mut out: Vec<usize> = Vec::with_capacity(axes.len());
    for &a in axes {
        match norm_axis(a, ndim, false) {
            Some(k) => out.push(k),
            None => panic!("{name}: axis {a} out of range for an array of rank {ndim}"),
        }
    }
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        panic!("{name}: duplicate axis in {axes:?}");
    }
    out
}

impl Array {
    /// The `Reduce` node of `op` over `axes` of `self` (already of the dtype the op reads).
    #[track_caller]
    fn reduce_core(
        &self,
        name: &str,
        op: ReduceOp,
        axes: Option<&[isize]>,
        keepdims: bool,
    ) -> Reduced {
        let n = self.ndim();
        let red = norm_axes(name, axes, n);
        let shape = self.shape();
        let kept: Vec<usize> = (0..n).filter(|a| !red.contains(a)).collect();
        let m: usize = kept.iter().map(|&a| shape[a]).product();
        let r: usize = red.iter().map(|&a| shape[a]).product();
        let perm: Vec<usize> = kept.iter().chain(&red).copied().collect();
        let x = if perm.iter().enumerate().all(|(k, &p)| k == p) {
            self.clone()
        } else {
            self.permute(&perm)
        };
        let x = x.reshape_to([m, r].into_iter().collect());
        let trailing = red.iter().enumerate().all(|(k, &a)| a == n - red.len() + k);
        let layout = if trailing || m == 1 || r == 1 {
            ReduceLayout::Inner
        } else {
            ReduceLayout::Outer
        };
        let Some(dtype) = op.result_dtype(self.dtype()) else {
            panic!("{name}: not supported for dtype {}", self.dtype())
        };
        let flat = make(
            Op::Reduce(op, layout),
            dtype,
            [m].into_iter().collect(),
            &self.node.device,
            &[&x],
        );
        let out: Shape = if keepdims {
            (0..n)
                .map(|a| if red.contains(&a) { 1 } else { shape[a] })
                .collect()
        } else {
            kept.iter().map(|&a| shape[a]).collect()
        };
        Reduced {
            flat,
            shape: out,
            count: r,
        }
    }

    /// Refuses complex dtypes for ordering reductions, like the elementwise `maximum`.
    #[track_caller]
    fn ordered(&self, name: &str) {
        if self.dtype().is_complex() {
            panic!(
                "{name}: complex values have no order (dtype {})",
                self.dtype()
            );
        }
    }

    /// Refuses an empty reduction that has no identity (NumPy raises `ValueError`).
    #[track_caller]
    fn nonempty(&self, name: &str, axes: Option<&[isize]>) {
        let red = norm_axes(name, axes, self.ndim());
        let r: usize = red.iter().map(|&a| self.shape()[a]).product();
        if r == 0 && self.size() == 0 {
            panic!(
                "{name}: zero-size reduction over axes {red:?} of shape {:?} has no identity",
                self.shape()
            );
        }
    }

    /// The dtype sums and products accumulate in, as NumPy's: I64 for Bool and signed
    /// integers, U64 for unsigned integers.
    fn sum_dtype(&self) -> DType {
        match self.dtype() {
            d if d.is_bool() || d.is_signed_int() => DType::I64,
            d if d.is_unsigned() => DType::U64,
            d => d,
        }
    }

    /// The dtype means are computed in: F64 for Bool and integers (16-bit floats are
    /// computed in F32 and the result rounded back, see `mean_opt`).
    fn mean_dtype(&self) -> DType {
        match self.dtype() {
            d if d.is_bool() || d.is_int() => DType::F64,
            d => d,
        }
    }

    #[track_caller]
    fn sum_opt(&self, axes: Option<&[isize]>, keepdims: bool) -> Array {
        let x = self.astype(self.sum_dtype());
        x.reduce_core("sum", ReduceOp::Sum, axes, keepdims)
            .finish(|a, _| a)
    }

    #[track_caller]
    fn prod_opt(&self, axes: Option<&[isize]>, keepdims: bool) -> Array {
        let x = self.astype(self.sum_dtype());
        x.reduce_core("prod", ReduceOp::Prod, axes, keepdims)
            .finish(|a, _| a)
    }

    #[track_caller]
    fn mean_opt(&self, axes: Option<&[isize]>, keepdims: bool) -> Array {
        if self.dtype().is_half() {
            // NumPy: the mean of float16 is computed in float32 and returned as float16
            return self
                .astype(DType::F32)
                .mean_opt(axes, keepdims)
                .astype(self.dtype());
        }
        let x = self.astype(self.mean_dtype());
        x.reduce_core("mean", ReduceOp::Sum, axes, keepdims)
            .finish(|a, n| a / n as f64)
    }

    #[track_caller]
    fn extreme_opt(&self, name: &str, max: bool, axes: Option<&[isize]>, keepdims: bool) -> Array {
        self.ordered(name);
        self.nonempty(name, axes);
        let op = match (self.dtype(), max) {
            (DType::Bool, true) => ReduceOp::Any,
            (DType::Bool, false) => ReduceOp::All,
            (_, true) => ReduceOp::Max,
            (_, false) => ReduceOp::Min,
        };
        self.reduce_core(name, op, axes, keepdims).finish(|a, _| a)
    }

    #[track_caller]
    fn logical_opt(&self, name: &str, all: bool, axes: Option<&[isize]>, keepdims: bool) -> Array {
        let op = if all { ReduceOp::All } else { ReduceOp::Any };
        self.astype(DType::Bool)
            .reduce_core(name, op, axes, keepdims)
            .finish(|a, _| a)
    }

    #[track_caller]
    fn arg_opt(&self, name: &str, max: bool, axis: isize) -> Array {
        self.ordered(name);
        let ax = [axis];
        let red = norm_axes(name, Some(&ax), self.ndim());
        if self.shape()[red[0]] == 0 {
            panic!(
                "{name}: attempt to get {name} of an empty sequence (axis {axis} of shape {:?})",
                self.shape()
            );
        }
        let x = if self.dtype() == DType::Bool {
            self.astype(DType::I32)
        } else {
            self.clone()
        };
        let op = if max {
            ReduceOp::ArgMax
        } else {
            ReduceOp::ArgMin
        };
        x.reduce_core(name, op, Some(&ax), false).finish(|a, _| a)
    }

    /// `|x - mean|^2` summed and divided by `n - ddof`, in the dtype NumPy gives `var`.
    #[track_caller]
    fn var_opt(&self, name: &str, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Array {
        norm_axes(name, axes, self.ndim()); // bad axes named after the caller's op
        if self.dtype().is_half() {
            // computed in float32, returned in the 16-bit dtype (NumPy's float16 rule)
            return self
                .astype(DType::F32)
                .var_opt(name, axes, ddof, keepdims)
                .astype(self.dtype());
        }
        let x = self.astype(self.mean_dtype());
        let mean = x.mean_opt(axes, true);
        let d = &x - &mean;
        let sq = if d.dtype().is_complex() {
            let (re, im) = (d.real(), d.imag());
            &re * &re + &im * &im
        } else {
            &d * &d
        };
        sq.reduce_core("var", ReduceOp::Sum, axes, keepdims)
            .finish(|a, n| a / (n as f64 - ddof as f64).max(0.0))
    }

    /// Sum of all elements (a 0-d array). Integers and Bool sum in I64; F32 sums in F32
    /// in pairwise/tree order.
    #[track_caller]
    pub fn sum(&self) -> Array {
        self.sum_opt(None, false)
    }
    /// Sum over `axes` (negative axes count from the end); `keepdims` keeps them as 1s.
    #[track_caller]
    pub fn sum_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.sum_opt(Some(axes), keepdims)
    }
    /// Product of all elements (integers and Bool in I64).
    #[track_caller]
    pub fn prod(&self) -> Array {
        self.prod_opt(None, false)
    }
    /// Product over `axes`.
    #[track_caller]
    pub fn prod_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.prod_opt(Some(axes), keepdims)
    }
    /// Mean of all elements (integers and Bool in F64; NaN for an empty array).
    #[track_caller]
    pub fn mean(&self) -> Array {
        self.mean_opt(None, false)
    }
    /// Mean over `axes`.
    #[track_caller]
    pub fn mean_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.mean_opt(Some(axes), keepdims)
    }
    /// Maximum of all elements; NaN if any element is NaN. Panics for an empty array (no
    /// identity) and for complex dtypes.
    #[track_caller]
    pub fn max(&self) -> Array {
        self.extreme_opt("max", true, None, false)
    }
    /// Maximum over `axes`.
    #[track_caller]
    pub fn max_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.extreme_opt("max", true, Some(axes), keepdims)
    }
    /// Minimum of all elements; NaN if any element is NaN.
    #[track_caller]
    pub fn min(&self) -> Array {
        self.extreme_opt("min", false, None, false)
    }
    /// Minimum over `axes`.
    #[track_caller]
    pub fn min_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.extreme_opt("min", false, Some(axes), keepdims)
    }
    /// True when every element is nonzero (`true` for an empty array).
    #[track_caller]
    pub fn all(&self) -> Array {
        self.logical_opt("all", true, None, false)
    }
    /// `all` over `axes`.
    #[track_caller]
    pub fn all_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.logical_opt("all", true, Some(axes), keepdims)
    }
    /// True when some element is nonzero (`false` for an empty array).
    #[track_caller]
    pub fn any(&self) -> Array {
        self.logical_opt("any", false, None, false)
    }
    /// `any` over `axes`.
    #[track_caller]
    pub fn any_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.logical_opt("any", false, Some(axes), keepdims)
    }
    /// Position (I64) of the first maximum along `axis`; the first NaN wins.
    #[track_caller]
    pub fn argmax(&self, axis: isize) -> Array {
        self.arg_opt("argmax", true, axis)
    }
    /// Position (I64) of the first minimum along `axis`; the first NaN wins.
    #[track_caller]
    pub fn argmin(&self, axis: isize) -> Array {
        self.arg_opt("argmin", false, axis)
    }
    /// Variance over `axes` with `n - ddof` in the divisor (real result: F32 for F32 and
    /// C64, F64 otherwise).
    #[track_caller]
    pub fn var_axes(&self, axes: &[isize], ddof: usize, keepdims: bool) -> Array {
        self.var_opt("var", Some(axes), ddof, keepdims)
    }
    /// Standard deviation over `axes` (`sqrt` of [`Array::var_axes`]).
    #[track_caller]
    pub fn std_axes(&self, axes: &[isize], ddof: usize, keepdims: bool) -> Array {
        self.var_opt("std", Some(axes), ddof, keepdims).sqrt()
    }
    /// Variance of all elements.
    #[track_caller]
    pub fn var(&self) -> Array {
        self.var_opt("var", None, 0, false)
    }
    /// Standard deviation of all elements.
    #[track_caller]
    pub fn std(&self) -> Array {
        self.var_opt("std", None, 0, false).sqrt()
    }
}

/// The Frobenius / 2-norm of all elements, `sqrt(sum(|a|^2))` (NumPy `linalg.norm(a)`):
/// real, F32 for F32 and C64, F64 otherwise.
#[track_caller]
pub fn norm(a: &Array) -> Array {
    let x = a.astype(a.mean_dtype());
    let sq = if x.dtype().is_complex() {
        let (re, im) = (x.real(), x.imag());
        &re * &re + &im * &im
    } else {
        &x * &x
    };
    sq.reduce_core("norm", ReduceOp::Sum, None, false)
        .finish(|s, _| s.sqrt())
}
