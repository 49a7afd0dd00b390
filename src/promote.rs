//! NumPy 2 (NEP 50) type promotion for the dtypes lazyfuse has, including weak Rust scalars.

use crate::DType;

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
