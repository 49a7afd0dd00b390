//! Functional indexed and masked updates (`a.at(s![..]).set(v)`, `.add`, `.mul`,
//! `masked_fill`) and compound assignment (`a += &b`): each returns a new lazy array built
//! from views and a `where`, so an update fuses into its consumer's kernel like any other
//! elementwise work.

use super::elementwise::{binary, Operand};
use super::movement::SlicePlan;
use crate::{Array, DType};
use lazyfuse_codegen::{BinaryOp, Scalar};
use ndarray::SliceInfoElem;
use smallvec::SmallVec;

/// The region of an array selected by a basic slice, to be updated functionally: the
/// spelling of NumPy's `a[idx] = v` and JAX's `x.at[idx].set(v)`. Made by [`Array::at`].
#[derive(Clone, Debug)]
#[must_use = "an indexed update does nothing until set, add or mul is called"]
pub struct At<'a> {
    base: &'a Array,
    elems: SmallVec<[SliceInfoElem; 4]>,
}

impl Array {
    /// The region `info` (basic slicing as in [`Array::slice`]: ranges with steps, single
    /// indices, negative indices from the end) of this array, for a functional update:
    /// `a.at(lf::s![0, ..]).set(0.0)` is NumPy's `a[0, :] = 0` as a new array.
    #[track_caller]
    pub fn at<I: AsRef<[SliceInfoElem]>>(&self, info: I) -> At<'_> {
        let elems: SmallVec<[SliceInfoElem; 4]> = info.as_ref().iter().copied().collect();
        // resolve once here so that a bad index panics at the caller's line
        let _ = self.slice_plan("at", &elems);
        At { base: self, elems }
    }

    /// `where(mask, v, self)` keeping this array's dtype (NumPy's `a[mask] = v`); `mask`
    /// (Bool, or converted to Bool) and `v` broadcast to this array's shape.
    ///
    /// # Panics
    /// When `mask` or `v` does not broadcast to this array's shape.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Array, v: impl Into<Operand>) -> Array {
        let shape = self.shape();
        if !crate::shape::can_broadcast(mask.shape(), shape) {
            panic!(
                "masked_fill: mask of shape {:?} does not broadcast to {:?}",
                mask.shape(),
                shape
            );
        }
        let v = value_array("masked_fill", v.into(), self, shape);
        crate::where_(&mask.astype(DType::Bool), &v, self)
    }
}

/// `v` as an array of `base`'s dtype broadcast to `shape` (assignment casts like NumPy's
/// `__setitem__`: any value converts).
#[track_caller]
fn value_array(op: &str, v: Operand, base: &Array, shape: &[usize]) -> Array {
    let vs: &[usize] = match &v {
        Operand::Array(a) => a.shape(),
        Operand::Scalar(_) => &[],
    };
    if !crate::shape::can_broadcast(vs, shape) {
        panic!("{op}: value of shape {vs:?} does not broadcast to the region's shape {shape:?}");
    }
    match v {
        Operand::Array(a) => a.astype(base.dtype()).broadcast_to(shape),
        Operand::Scalar(s) => Array::const_at(s.cast(base.dtype()), shape, &base.device()),
    }
}

/// Per axis of the base: the lowest selected index, the (positive) distance between
/// selected indices, and their count; plus the axes walked backwards.
struct Region {
    axes: SmallVec<[(usize, usize, usize); 4]>,
    reversed: SmallVec<[usize; 4]>,
}

impl Region {
    fn of(plan: &SlicePlan) -> Region {
        let mut axes = SmallVec::new();
        let mut reversed = SmallVec::new();
        for (k, (&(first, step), &len)) in plan.sl.iter().zip(plan.mid.iter()).enumerate() {
            if step < 0 && len > 1 {
                reversed.push(k);
                let low = first + (len as isize - 1) * step;
                axes.push((low as usize, step.unsigned_abs(), len));
            } else {
                axes.push((first.max(0) as usize, step.unsigned_abs(), len));
            }
        }
        Region { axes, reversed }
    }

    /// `x` (shaped like the region, in ascending index order) placed into an array of
    /// `full` shape, zero (false) elsewhere: a dilation per strided axis, then one pad.
    fn place(&self, x: &Array, full: &[usize]) -> Array {
        let mut x = x.clone();
        let mut widths: SmallVec<[(usize, usize); 4]> = SmallVec::new();
        for (k, &(low, step, len)) in self.axes.iter().enumerate() {
            let mut span = len;
            if step > 1 && len > 1 {
                // [.., len, ..] -> [.., len, step] (zeros after each element) -> [.., len *
                // step, ..] -> the first (len - 1) * step + 1
                let mut pw: SmallVec<[(usize, usize); 5]> =
                    SmallVec::from_elem((0, 0), x.ndim() + 1);
                pw[k + 1] = (0, step - 1);
                let spread = x.expand_dims(k as isize + 1).pad(&pw, 0.0);
                let mut merged: SmallVec<[isize; 4]> =
                    x.shape().iter().map(|&d| d as isize).collect();
                merged[k] = (len * step) as isize;
                span = (len - 1) * step + 1;
                let mut info: SmallVec<[SliceInfoElem; 4]> = SmallVec::new();
                for j in 0..x.ndim() {
                    info.push(SliceInfoElem::Slice {
                        start: 0,
                        end: (j == k).then_some(span as isize),
                        step: 1,
                    });
                }
                x = spread.reshape(&merged).slice(info.as_slice());
            }
            widths.push((low, full[k] - low - span));
        }
        if widths.iter().all(|&w| w == (0, 0)) {
            x
        } else {
            x.pad(&widths, 0.0)
        }
    }
}

impl At<'_> {
    /// The base with the region replaced by `v` (an array or a Rust scalar, broadcast to the
    /// region's shape and converted to the base's dtype).
    ///
    /// # Panics
    /// When `v` does not broadcast to the region's shape.
    #[track_caller]
    pub fn set(&self, v: impl Into<Operand>) -> Array {
        self.update("at().set", v.into(), None)
    }
    /// The base with `v` added to the region (NumPy's `a[idx] += v`: the result keeps the
    /// base's dtype).
    #[track_caller]
    pub fn add(&self, v: impl Into<Operand>) -> Array {
        self.update("at().add", v.into(), Some(BinaryOp::Add))
    }
    /// The base with the region multiplied by `v` (the result keeps the base's dtype).
    #[track_caller]
    pub fn mul(&self, v: impl Into<Operand>) -> Array {
        self.update("at().mul", v.into(), Some(BinaryOp::Mul))
    }

    #[track_caller]
    fn update(&self, op: &str, v: Operand, combine: Option<BinaryOp>) -> Array {
        let base = self.base;
        let plan = base.slice_plan(op, &self.elems);
        if plan.mid.contains(&0) {
            return base.clone();
        }
        let region = Region::of(&plan);
        let full = base.shape();
        let dev = base.device();
        // the value at every index of the base (meaningful inside the region): a scalar
        // stays a scalar, an array is placed by views
        let value = match v {
            Operand::Scalar(s) => Operand::Scalar(s),
            Operand::Array(a) => {
                if !crate::shape::can_broadcast(a.shape(), &plan.fin) {
                    panic!(
                        "{op}: value of shape {:?} does not broadcast to the region's shape {:?}",
                        a.shape(),
                        plan.fin.as_slice()
                    );
                }
                let mid: SmallVec<[isize; 4]> = plan.mid.iter().map(|&d| d as isize).collect();
                let mut x = a.broadcast_to(&plan.fin).reshape(&mid);
                for &k in &region.reversed {
                    x = x.flip(k as isize);
                }
                Operand::Array(region.place(&x, full))
            }
        };
        let new = match combine {
            None => match value {
                Operand::Scalar(s) => Array::const_at(s.cast(base.dtype()), &[], &dev),
                Operand::Array(a) => a.astype(base.dtype()),
            },
            Some(bop) => assign_cast(
                op,
                &binary(bop, Operand::Array(base.clone()), value),
                base.dtype(),
            ),
        };
        let mask = region.place(&Array::const_at(Scalar::Bool(true), &plan.mid, &dev), full);
        crate::where_(&mask, &new, base)
    }
}

/// `x` converted to `to` under NumPy's `same_kind` rule for in-place operations.
///
/// # Panics
/// When the conversion would change kind (float into int, complex into float, anything
/// into bool), as NumPy raises `UFuncTypeError`.
#[track_caller]
fn assign_cast(op: &str, x: &Array, to: DType) -> Array {
    let rank = |d: DType| {
        if d.is_bool() {
            0
        } else if d.is_complex() {
            3
        } else if d.is_float() {
            2
        } else {
            1
        }
    };
    if rank(x.dtype()) > rank(to) {
        panic!(
            "{op}: cannot store the {} result in an array of {to} (NumPy's same_kind rule; \
             convert explicitly with astype)",
            x.dtype()
        );
    }
    x.astype(to)
}

macro_rules! compound {
    ($($tr:ident $method:ident $op:ident $sym:literal),*) => {$(
        impl<R: Into<Operand>> std::ops::$tr<R> for Array {
            /// Rebinds the array to the lazy result, which keeps the array's dtype (NumPy's
            /// in-place rule); when this handle was the only one, evaluation may reuse its
            /// buffer.
            ///
            /// # Panics
            /// When the result's dtype cannot be stored in the array's (float into int).
            #[track_caller]
            fn $method(&mut self, rhs: R) {
                let to = self.dtype();
                let lhs = std::mem::replace(self, Array::const_at(Scalar::Bool(false), &[], &self.device()));
                let shape = lhs.shape().to_vec();
                let r = binary(BinaryOp::$op, Operand::Array(lhs), rhs.into());
                if r.shape() != shape.as_slice() {
                    panic!(
                        "{}: the result's shape {:?} is not the array's {:?} (an in-place \
                         operation cannot broadcast its target)",
                        $sym,
                        r.shape(),
                        shape
                    );
                }
                *self = assign_cast($sym, &r, to);
            }
        }
    )*};
}

compound!(AddAssign add_assign Add "+=", SubAssign sub_assign Sub "-=", MulAssign mul_assign Mul "*=", DivAssign div_assign Div "/=");
