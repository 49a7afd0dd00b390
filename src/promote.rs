//! NumPy 2 (NEP 50) type promotion for the dtypes lazyfuse has, including weak Rust scalars.

use crate::DType;
use lazyfuse_codegen::Scalar;

/// `numpy.result_type(a, b)` restricted to lazyfuse's dtypes.
pub fn result_type(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    match (lo, hi) {
        (Bool, x) => x,
        (I32, I64) => I64,
        // int32/int64 with float32 -> float64 (NumPy's table)
        (I32 | I64, F32) => F64,
        (I32 | I64, F64) => F64,
        (I32 | I64, C64) => C128,
        (I32 | I64, C128) => C128,
        (F32, F64) => F64,
        (F32, C64) => C64,
        (F32, C128) => C128,
        (F64, C64 | C128) => C128,
        (C64, C128) => C128,
        _ => hi,
    }
}

/// The kind of a weak (Rust literal) scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WeakKind {
    Bool,
    Int,
    Float,
    Complex,
}

impl WeakKind {
    /// The dtype a weak scalar takes on its own (no array to follow).
    pub(crate) fn default_dtype(self) -> DType {
        match self {
            WeakKind::Bool => DType::Bool,
            WeakKind::Int => DType::I64,
            WeakKind::Float => DType::F64,
            WeakKind::Complex => DType::C128,
        }
    }
}

/// NEP 50: the result dtype of an array of dtype `d` with a weak scalar of kind `k`.
pub(crate) fn weak_result(d: DType, k: WeakKind) -> DType {
    match k {
        WeakKind::Bool => d,
        WeakKind::Int => {
            if d.is_bool() {
                DType::I64
            } else {
                d
            }
        }
        WeakKind::Float => {
            if d.is_inexact() {
                d
            } else {
                DType::F64
            }
        }
        WeakKind::Complex => match d {
            DType::C64 | DType::F32 => DType::C64,
            _ => DType::C128,
        },
    }
}

/// The dtype floating-point functions (`sqrt`, `sin`, `/`, ...) compute in for an input
/// of dtype `d`: inexact dtypes stay, integers go to F64. Bool goes to F32 (NumPy uses
/// float16, which lazyfuse does not have).
pub(crate) fn float_dtype(d: DType) -> DType {
    match d {
        DType::Bool => DType::F32,
        DType::I32 | DType::I64 => DType::F64,
        x => x,
    }
}

/// The value of a weak integer scalar `s` that the integer dtype `t` cannot hold (`None`
/// when it fits, when it is not an integer, or when `t` is not an integer dtype).
pub(crate) fn weak_int_overflow(s: &Scalar, t: DType) -> Option<i64> {
    let v = match *s {
        Scalar::I32(v) => i64::from(v),
        Scalar::I64(v) => v,
        _ => return None,
    };
    let fits = match t {
        DType::I32 => i32::try_from(v).is_ok(),
        _ => true, // I64 holds every Rust integer scalar; float targets round, as NumPy's do
    };
    (!fits).then_some(v)
}

/// Panics at the caller's line for a weak integer scalar that does not fit the integer
/// dtype the operation `op` computes in (NumPy 2 raises `OverflowError` there).
#[track_caller]
pub(crate) fn overflow_panic(op: &str, v: i64, t: DType) -> ! {
    panic!(
        "{op}: integer scalar {v} out of bounds for dtype {t} (NumPy raises OverflowError); \
         convert the array first, e.g. `.astype(DType::I64)`"
    )
}
