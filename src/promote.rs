//! NumPy 2 (NEP 50) type promotion for the dtypes lazyfuse has, including weak Rust scalars.

use crate::DType;
use lazyfuse_codegen::Scalar;

/// `numpy.result_type(a, b)` for lazyfuse's dtypes: NumPy 2's table, with `bfloat16`
/// promoting as `ml_dtypes` does (with `float16` it gives `float32`; with bool, integers
/// and complex it behaves like `float16`).
pub fn result_type(a: DType, b: DType) -> DType {
    use DType::*;
    // rows and columns in `ORDER`
    const ORDER: [DType; 15] = [
        Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64, C128,
    ];
    const TABLE: [[DType; 15]; 15] = [
        [
            Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64, C128,
        ],
        [
            I8, I8, I16, I16, I32, I32, I64, I64, F64, F16, BF16, F32, F64, C64, C128,
        ],
        [
            U8, I16, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64, C128,
        ],
        [
            I16, I16, I16, I16, I32, I32, I64, I64, F64, F32, F32, F32, F64, C64, C128,
        ],
        [
            U16, I32, U16, I32, U16, I32, U32, I64, U64, F32, F32, F32, F64, C64, C128,
        ],
        [
            I32, I32, I32, I32, I32, I32, I64, I64, F64, F64, F64, F64, F64, C128, C128,
        ],
        [
            U32, I64, U32, I64, U32, I64, U32, I64, U64, F64, F64, F64, F64, C128, C128,
        ],
        [
            I64, I64, I64, I64, I64, I64, I64, I64, F64, F64, F64, F64, F64, C128, C128,
        ],
        [
            U64, F64, U64, F64, U64, F64, U64, F64, U64, F64, F64, F64, F64, C128, C128,
        ],
        [
            F16, F16, F16, F32, F32, F64, F64, F64, F64, F16, F32, F32, F64, C64, C128,
        ],
        [
            BF16, BF16, BF16, F32, F32, F64, F64, F64, F64, F32, BF16, F32, F64, C64, C128,
        ],
        [
            F32, F32, F32, F32, F32, F64, F64, F64, F64, F32, F32, F32, F64, C64, C128,
        ],
        [
            F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, C128, C128,
        ],
        [
            C64, C64, C64, C64, C64, C128, C128, C128, C128, C64, C64, C64, C128, C64, C128,
        ],
        [
            C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128,
            C128,
        ],
    ];
    let ix = |d: DType| ORDER.iter().position(|&x| x == d).unwrap_or(0);
    TABLE[ix(a)][ix(b)]
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
            DType::C64 | DType::F32 | DType::F16 | DType::BF16 => DType::C64,
            _ => DType::C128,
        },
    }
}

/// The dtype floating-point functions (`sqrt`, `sin`, `arctan2`, ...) compute in for an
/// input of dtype `d`, as NumPy's: inexact dtypes stay; 8-bit integers go to F16, 16-bit
/// integers to F32, wider integers to F64. Bool goes to F32 (NumPy gives float16; kept
/// from before lazyfuse had float16, see `docs/numpy_users.md`).
pub(crate) fn float_dtype(d: DType) -> DType {
    match d {
        DType::Bool => DType::F32,
        DType::I8 | DType::U8 => DType::F16,
        DType::I16 | DType::U16 => DType::F32,
        x if x.is_int() => DType::F64,
        x => x,
    }
}

/// The value of a weak integer scalar `s` that the integer dtype `t` cannot hold (`None`
/// when it fits, when it is not an integer, or when `t` is not an integer dtype).
pub(crate) fn weak_int_overflow(s: &Scalar, t: DType) -> Option<i128> {
    if !s.dtype().is_int() {
        return None;
    }
    let v = s.to_i128()?;
    let fits = match t {
        DType::I8 => i8::try_from(v).is_ok(),
        DType::I16 => i16::try_from(v).is_ok(),
        DType::I32 => i32::try_from(v).is_ok(),
        DType::I64 => i64::try_from(v).is_ok(),
        DType::U8 => u8::try_from(v).is_ok(),
        DType::U16 => u16::try_from(v).is_ok(),
        DType::U32 => u32::try_from(v).is_ok(),
        DType::U64 => u64::try_from(v).is_ok(),
        _ => true, // float targets round, as NumPy's do
    };
    (!fits).then_some(v)
}

/// Panics at the caller's line for a weak integer scalar that does not fit the integer
/// dtype the operation `op` computes in (NumPy 2 raises `OverflowError` there).
#[track_caller]
pub(crate) fn overflow_panic(op: &str, v: i128, t: DType) -> ! {
    panic!(
        "{op}: integer scalar {v} out of bounds for dtype {t} (NumPy raises OverflowError); \
         convert the array first, e.g. `.astype(DType::I64)`"
    )
}
