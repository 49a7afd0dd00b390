//! Typed scalar values: kernel arguments, constants and the host element trait's common currency.

use crate::semantics as sem;
use crate::DType;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use std::hash::{Hash, Hasher};

/// One value of a given dtype. Hashing and equality are bitwise, so NaN equals NaN and
/// `-0.0` differs from `0.0` (what hash-consing and caches need).
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// `Bool`
    Bool(bool),
    /// `I32`
    I32(i32),
    /// `I64`
    I64(i64),
    /// `F32`
    F32(f32),
    /// `F64`
    F64(f64),
    /// `C64`
    C64(Complex32),
    /// `C128`
    C128(Complex64),
    /// `U8`
    U8(u8),
    /// `U16`
    U16(u16),
    /// `U32`
    U32(u32),
    /// `U64`
    U64(u64),
    /// `I8`
    I8(i8),
    /// `I16`
    I16(i16),
    /// `F16`
    F16(f16),
    /// `BF16`
    BF16(bf16),
}

/// A value widened to one of the few types every cast starts from: the source of NumPy's
/// `astype` rules, shared by [`Scalar::cast`] and the interpreter (where it folds away
/// after inlining).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wide {
    B(bool),
    I(i64),
    U(u64),
    F(f32),
    D(f64),
    C(Complex32),
    Z(Complex64),
}

impl Wide {
    /// The real part as `f64` (exact for every source but `I`/`U` beyond 2^53).
    #[inline(always)]
    fn re64(self) -> f64 {
        match self {
            Wide::B(b) => b as u8 as f64,
            Wide::I(x) => x as f64,
            Wide::U(x) => x as f64,
            Wide::F(x) => x as f64,
            Wide::D(x) => x,
            Wide::C(z) => z.re as f64,
            Wide::Z(z) => z.re,
        }
    }
    #[inline(always)]
    pub(crate) fn to_bool(self) -> bool {
        match self {
            Wide::B(b) => b,
            Wide::I(x) => x != 0,
            Wide::U(x) => x != 0,
            Wide::F(x) => x != 0.0,
            Wide::D(x) => x != 0.0,
            Wide::C(z) => z.re != 0.0 || z.im != 0.0,
            Wide::Z(z) => z.re != 0.0 || z.im != 0.0,
        }
    }
    /// Integers wrap (`as`), bool is 0/1, floats (and the real part of complex values) go
    /// through `$f` (the NumPy float cast of [`crate::semantics`]).
    #[inline(always)]
    fn to_int<T>(self, wrap_i: fn(i64) -> T, wrap_u: fn(u64) -> T, f: fn(f64) -> T) -> T {
        match self {
            Wide::B(b) => wrap_i(b as i64),
            Wide::I(x) => wrap_i(x),
            Wide::U(x) => wrap_u(x),
            Wide::F(x) => f(x as f64),
            Wide::D(x) => f(x),
            Wide::C(z) => f(z.re as f64),
            Wide::Z(z) => f(z.re),
        }
    }
    #[inline(always)]
    pub(crate) fn to_i8(self) -> i8 {
        self.to_int(|x| x as i8, |x| x as i8, sem::f64_to_i8)
    }
    #[inline(always)]
    pub(crate) fn to_i16(self) -> i16 {
        self.to_int(|x| x as i16, |x| x as i16, sem::f64_to_i16)
    }
    #[inline(always)]
    pub(crate) fn to_i32(self) -> i32 {
        self.to_int(|x| x as i32, |x| x as i32, sem::f64_to_i32)
    }
    #[inline(always)]
    pub(crate) fn to_i64(self) -> i64 {
        self.to_int(|x| x, |x| x as i64, sem::f64_to_i64)
    }
    #[inline(always)]
    pub(crate) fn to_u8(self) -> u8 {
        self.to_int(|x| x as u8, |x| x as u8, sem::f64_to_u8)
    }
    #[inline(always)]
    pub(crate) fn to_u16(self) -> u16 {
        self.to_int(|x| x as u16, |x| x as u16, sem::f64_to_u16)
    }
    #[inline(always)]
    pub(crate) fn to_u32(self) -> u32 {
        self.to_int(|x| x as u32, |x| x as u32, sem::f64_to_u32)
    }
    #[inline(always)]
    pub(crate) fn to_u64(self) -> u64 {
        self.to_int(|x| x as u64, |x| x, sem::f64_to_u64)
    }
    #[inline(always)]
    pub(crate) fn to_f32(self) -> f32 {
        match self {
            Wide::B(b) => b as u8 as f32,
            Wide::I(x) => x as f32,
            Wide::U(x) => x as f32,
            Wide::F(x) => x,
            Wide::D(x) => x as f32,
            Wide::C(z) => z.re,
            Wide::Z(z) => z.re as f32,
        }
    }
    #[inline(always)]
    pub(crate) fn to_f64(self) -> f64 {
        self.re64()
    }
    /// To nearest, ties to even; from `f64` through [`sem::f64_to_f32_odd`] (one rounding).
    #[inline(always)]
    pub(crate) fn to_f16(self) -> f16 {
        match self {
            Wide::B(_) | Wide::F(_) | Wide::C(_) => f16::from_f32(self.to_f32()),
            _ => sem::f64_to_f16(self.re64()),
        }
    }
    #[inline(always)]
    pub(crate) fn to_bf16(self) -> bf16 {
        match self {
            Wide::B(_) | Wide::F(_) | Wide::C(_) => bf16::from_f32(self.to_f32()),
            _ => sem::f64_to_bf16(self.re64()),
        }
    }
    #[inline(always)]
    pub(crate) fn to_c64(self) -> Complex32 {
        match self {
            Wide::C(z) => z,
            Wide::Z(z) => Complex32::new(z.re as f32, z.im as f32),
            _ => Complex32::new(self.to_f32(), 0.0),
        }
    }
    #[inline(always)]
    pub(crate) fn to_c128(self) -> Complex64 {
        match self {
            Wide::C(z) => Complex64::new(z.re as f64, z.im as f64),
            Wide::Z(z) => z,
            _ => Complex64::new(self.re64(), 0.0),
        }
    }
}

impl Scalar {
    /// The dtype of this value.
    pub fn dtype(&self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::C64(_) => DType::C64,
            Scalar::C128(_) => DType::C128,
            Scalar::U8(_) => DType::U8,
            Scalar::U16(_) => DType::U16,
            Scalar::U32(_) => DType::U32,
            Scalar::U64(_) => DType::U64,
            Scalar::I8(_) => DType::I8,
            Scalar::I16(_) => DType::I16,
            Scalar::F16(_) => DType::F16,
            Scalar::BF16(_) => DType::BF16,
        }
    }

    /// The value widened for a cast.
    pub(crate) fn wide(&self) -> Wide {
        match *self {
            Scalar::Bool(b) => Wide::B(b),
            Scalar::I32(v) => Wide::I(v as i64),
            Scalar::I64(v) => Wide::I(v),
            Scalar::F32(v) => Wide::F(v),
            Scalar::F64(v) => Wide::D(v),
            Scalar::C64(v) => Wide::C(v),
            Scalar::C128(v) => Wide::Z(v),
            Scalar::U8(v) => Wide::U(v as u64),
            Scalar::U16(v) => Wide::U(v as u64),
            Scalar::U32(v) => Wide::U(v as u64),
            Scalar::U64(v) => Wide::U(v),
            Scalar::I8(v) => Wide::I(v as i64),
            Scalar::I16(v) => Wide::I(v as i64),
            Scalar::F16(v) => Wide::F(v.to_f32()),
            Scalar::BF16(v) => Wide::F(v.to_f32()),
        }
    }

    /// The value as a complex double (booleans as 0/1).
    pub fn to_c128(&self) -> Complex64 {
        self.wide().to_c128()
    }

    /// The real part as `f64`.
    pub fn to_f64(&self) -> f64 {
        self.to_c128().re
    }

    /// The value as `i64` (integers exactly, `U64` above `i64::MAX` wrapped; floats
    /// truncated with NumPy's cast rules).
    pub fn to_i64(&self) -> i64 {
        self.wide().to_i64()
    }

    /// The value of an integer or bool scalar as `i128` (exact for every integer dtype);
    /// `None` for other dtypes.
    pub fn to_i128(&self) -> Option<i128> {
        match self.wide() {
            Wide::B(b) => Some(b as i128),
            Wide::I(x) => Some(x as i128),
            Wide::U(x) => Some(x as i128),
            _ => None,
        }
    }

    /// Converts to `dtype` with NumPy's `astype` rules (complex to real drops the imaginary
    /// part, integers wrap, float to int truncates, NaN/inf/out-of-range to int follows
    /// [`crate::semantics::f64_to_i64`] and its siblings, 16-bit floats round to nearest
    /// even).
    pub fn cast(&self, dtype: DType) -> Scalar {
        if self.dtype() == dtype {
            return *self;
        }
        let w = self.wide();
        match dtype {
            DType::Bool => Scalar::Bool(w.to_bool()),
            DType::I32 => Scalar::I32(w.to_i32()),
            DType::I64 => Scalar::I64(w.to_i64()),
            DType::F32 => Scalar::F32(w.to_f32()),
            DType::F64 => Scalar::F64(w.to_f64()),
            DType::C64 => Scalar::C64(w.to_c64()),
            DType::C128 => Scalar::C128(w.to_c128()),
            DType::U8 => Scalar::U8(w.to_u8()),
            DType::U16 => Scalar::U16(w.to_u16()),
            DType::U32 => Scalar::U32(w.to_u32()),
            DType::U64 => Scalar::U64(w.to_u64()),
            DType::I8 => Scalar::I8(w.to_i8()),
            DType::I16 => Scalar::I16(w.to_i16()),
            DType::F16 => Scalar::F16(w.to_f16()),
            DType::BF16 => Scalar::BF16(w.to_bf16()),
        }
    }

    /// The zero of `dtype`.
    pub fn zero(dtype: DType) -> Scalar {
        Scalar::I64(0).cast(dtype)
    }

    /// The bits that identify this value (used for hashing and equality).
    fn bits(&self) -> (u8, u64, u64) {
        match *self {
            Scalar::Bool(b) => (0, b as u64, 0),
            Scalar::I32(v) => (1, v as u32 as u64, 0),
            Scalar::I64(v) => (2, v as u64, 0),
            Scalar::F32(v) => (3, v.to_bits() as u64, 0),
            Scalar::F64(v) => (4, v.to_bits(), 0),
            Scalar::C64(v) => (5, v.re.to_bits() as u64, v.im.to_bits() as u64),
            Scalar::C128(v) => (6, v.re.to_bits(), v.im.to_bits()),
            Scalar::U8(v) => (7, v as u64, 0),
            Scalar::U16(v) => (8, v as u64, 0),
            Scalar::U32(v) => (9, v as u64, 0),
            Scalar::U64(v) => (10, v, 0),
            Scalar::I8(v) => (11, v as u8 as u64, 0),
            Scalar::I16(v) => (12, v as u16 as u64, 0),
            Scalar::F16(v) => (13, v.to_bits() as u64, 0),
            Scalar::BF16(v) => (14, v.to_bits() as u64, 0),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.bits() == other.bits()
    }
}
impl Eq for Scalar {}
impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bits().hash(state)
    }
}
