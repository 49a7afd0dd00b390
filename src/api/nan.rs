//! NaN-aware reductions (`nansum nanmean nanmax nanmin` and their `_axes` forms) and
//! tolerance comparisons (`isclose`, `allclose`), built from elementwise ops and the
//! ordinary reductions, so they fuse like them: NumPy's semantics, a NaN treated as absent.

use crate::{Array, DType, Result};

/// Where `a` is NaN (NumPy's `isnan`) for float and complex dtypes; `None` for integers and
/// Bool, which hold no NaN.
fn nan_mask(a: &Array) -> Option<Array> {
    (a.dtype().is_float() || a.dtype().is_complex()).then(|| a.isnan())
}

/// `axes`, or every axis of `a` for `None`.
fn axes_or_all(a: &Array, axes: Option<&[isize]>) -> Vec<isize> {
    axes.map_or_else(|| (0..a.ndim() as isize).collect(), <[isize]>::to_vec)
}

impl Array {
    /// `nansum` over `axes` (`None`: every axis).
    #[track_caller]
    fn nan_sum_opt(&self, axes: Option<&[isize]>, keepdims: bool) -> Array {
        let x = match nan_mask(self) {
            Some(m) => crate::where_(&m, 0.0, self),
            None => self.clone(),
        };
        x.sum_axes(&axes_or_all(self, axes), keepdims)
    }

    /// Sum of the elements that are not NaN (NumPy `nansum`: 0 when every element is NaN;
    /// dtypes as [`Array::sum`]).
    #[track_caller]
    pub fn nansum(&self) -> Array {
        self.nan_sum_opt(None, false)
    }
    /// [`Array::nansum`] over `axes`.
    #[track_caller]
    pub fn nansum_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.nan_sum_opt(Some(axes), keepdims)
    }

    /// `nanmean` over `axes` (`None`: every axis).
    #[track_caller]
    fn nan_mean_opt(&self, axes: Option<&[isize]>, keepdims: bool) -> Array {
        if self.dtype().is_half() {
            // in f32 (a float16 count overflows past 65504), returned in the 16-bit dtype
            return self
                .astype(DType::F32)
                .nan_mean_opt(axes, keepdims)
                .astype(self.dtype());
        }
        let ax = axes_or_all(self, axes);
        let Some(m) = nan_mask(self) else {
            return self.mean_axes(&ax, keepdims);
        };
        let s = self.nan_sum_opt(Some(&ax), keepdims);
        let n = (!&m).astype(DType::I64).sum_axes(&ax, keepdims);
        // 0 / 0 = NaN where every element is NaN, as NumPy (which also warns)
        s / n.astype(self.dtype().real())
    }

    /// Mean of the elements that are not NaN (NumPy `nanmean`: NaN where every element is
    /// NaN; integers and Bool as [`Array::mean`]).
    #[track_caller]
    pub fn nanmean(&self) -> Array {
        self.nan_mean_opt(None, false)
    }
    /// [`Array::nanmean`] over `axes`.
    #[track_caller]
    pub fn nanmean_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.nan_mean_opt(Some(axes), keepdims)
    }

    /// `nanmax` (`max`) or `nanmin` over `axes` (`None`: every axis).
    #[track_caller]
    fn nan_extreme_opt(&self, max: bool, axes: Option<&[isize]>, keepdims: bool) -> Array {
        let ax = axes_or_all(self, axes);
        let ax = &ax[..];
        let pick = |x: &Array| {
            if max {
                x.max_axes(ax, keepdims)
            } else {
                x.min_axes(ax, keepdims)
            }
        };
        let Some(m) = nan_mask(self) else {
            return pick(self);
        };
        let fill = if max {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        let e = pick(&crate::where_(&m, fill, self));
        // NaN where every element is NaN, as NumPy (which also warns)
        crate::where_(&m.all_axes(ax, keepdims), f64::NAN, &e)
    }

    /// Maximum of the elements that are not NaN (NumPy `nanmax`: NaN where every element is
    /// NaN). Panics, as [`Array::max`], for an empty array and for complex dtypes.
    #[track_caller]
    pub fn nanmax(&self) -> Array {
        self.nan_extreme_opt(true, None, false)
    }
    /// [`Array::nanmax`] over `axes`.
    #[track_caller]
    pub fn nanmax_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.nan_extreme_opt(true, Some(axes), keepdims)
    }
    /// Minimum of the elements that are not NaN (NumPy `nanmin`).
    #[track_caller]
    pub fn nanmin(&self) -> Array {
        self.nan_extreme_opt(false, None, false)
    }
    /// [`Array::nanmin`] over `axes`.
    #[track_caller]
    pub fn nanmin_axes(&self, axes: &[isize], keepdims: bool) -> Array {
        self.nan_extreme_opt(false, Some(axes), keepdims)
    }

    /// `|self - b| <= atol + rtol |b|` elementwise, broadcast (Bool), as NumPy's `isclose`
    /// with `equal_nan=False`: computed in the floating type of both operands (integers as
    /// F64), equal infinities are close, an infinity is close to nothing else, and a NaN
    /// to nothing.
    #[track_caller]
    pub fn isclose(&self, b: &Array, rtol: f64, atol: f64) -> Array {
        let t = crate::result_type(crate::result_type(self.dtype(), b.dtype()), DType::F32);
        let t = if self.dtype().is_float() || b.dtype().is_float() || t.is_complex() {
            t
        } else {
            DType::F64 // NumPy: result_type(y, 1.0) for integer inputs
        };
        let (x, y) = (self.astype(t), b.astype(t));
        let near = (&x - &y).abs().le(&(y.abs() * rtol + atol));
        let finite = x.isfinite().logical_and(y.isfinite());
        crate::where_(&finite, &near, x.eq(&y))
    }
}

/// Whether every element pair of `a` and `b` (broadcast) is [`Array::isclose`]: evaluates
/// and reads back one Bool. `true` for empty arrays, as NumPy.
pub fn allclose(a: &Array, b: &Array, rtol: f64, atol: f64) -> Result<bool> {
    a.isclose(b, rtol, atol).all().item::<bool>()
}
