//! Element types shared by every stage: the closed `DType` enum and its properties.

use std::fmt;

/// The element type of an array, a node or an IR value. Names follow NumPy
/// (`C64` = complex64 = two `f32`; `BF16` is `ml_dtypes.bfloat16`).
///
/// `F16` and `BF16` are storage types: kernels load them, compute in `f32` and round the
/// result back (to nearest, ties to even) when they store it or cast to a 16-bit float
/// ([`crate::Kernel::widen_half`]). Integer arithmetic wraps in every integer dtype.
///
/// The derived order is the declaration order, which carries no meaning for promotion
/// (lazyfuse's `result_type` is NumPy's table); [`DType::ALL`] lists NumPy's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Boolean (one byte).
    Bool,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// Complex of two `f32`.
    C64,
    /// Complex of two `f64`.
    C128,
    /// 8-bit unsigned integer (`uint8`).
    U8,
    /// 16-bit unsigned integer (`uint16`).
    U16,
    /// 32-bit unsigned integer (`uint32`).
    U32,
    /// 64-bit unsigned integer (`uint64`).
    U64,
    /// 8-bit signed integer (`int8`).
    I8,
    /// 16-bit signed integer (`int16`).
    I16,
    /// IEEE half precision (`float16`, host type `half::f16`).
    F16,
    /// bfloat16: the upper 16 bits of an `f32` (host type `half::bf16`).
    BF16,
}

impl DType {
    /// Every dtype, in NumPy's order (bool, signed and unsigned integers by size, floats,
    /// complex).
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }
    /// True for `Bool`.
    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }
    /// True for the signed and unsigned integer dtypes.
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned()
    }
    /// True for `I8`, `I16`, `I32` and `I64`.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }
    /// True for `U8`, `U16`, `U32` and `U64`.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }
    /// True for the real floating-point dtypes (`F16`, `BF16`, `F32`, `F64`).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }
    /// True for the 16-bit float storage dtypes `F16` and `BF16` (computed in `F32`).
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }
    /// The dtype kernels compute a value of this dtype in: `F32` for `F16` and `BF16`,
    /// the dtype itself otherwise.
    pub fn compute(self) -> DType {
        if self.is_half() {
            DType::F32
        } else {
            self
        }
    }
    /// True for 64-bit integer dtypes.
    pub fn is_int64(self) -> bool {
        matches!(self, DType::I64 | DType::U64)
    }
    /// True for `C64` and `C128`.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }
    /// True for float or complex dtypes.
    pub fn is_inexact(self) -> bool {
        self.is_float() || self.is_complex()
    }
    /// The real dtype of a complex dtype (`C64 -> F32`); other dtypes map to themselves.
    pub fn real(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        }
    }
    /// The complex dtype with this precision (`F16`, `BF16`, `F32 -> C64`, everything
    /// else `-> C128` except `C64`, which stays).
    pub fn to_complex(self) -> DType {
        match self {
            DType::F16 | DType::BF16 | DType::F32 | DType::C64 => DType::C64,
            _ => DType::C128,
        }
    }
    /// The NumPy name (`float32`, `complex64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
