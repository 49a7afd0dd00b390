//! Typed scalar values: kernel arguments, constants and the host element trait's common currency.

use crate::DType;
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
        }
    }

    /// The value as a complex double (booleans as 0/1).
    pub fn to_c128(&self) -> Complex64 {
        match *self {
            Scalar::Bool(b) => Complex64::new(b as u8 as f64, 0.0),
            Scalar::I32(v) => Complex64::new(v as f64, 0.0),
            Scalar::I64(v) => Complex64::new(v as f64, 0.0),
            Scalar::F32(v) => Complex64::new(v as f64, 0.0),
            Scalar::F64(v) => Complex64::new(v, 0.0),
            Scalar::C64(v) => Complex64::new(v.re as f64, v.im as f64),
            Scalar::C128(v) => v,
        }
    }

    /// The real part as `f64`.
    pub fn to_f64(&self) -> f64 {
        self.to_c128().re
    }

    /// The value as `i64` (integers exactly; floats truncated with NumPy's cast rules).
    pub fn to_i64(&self) -> i64 {
        match *self {
            Scalar::Bool(b) => b as i64,
            Scalar::I32(v) => v as i64,
            Scalar::I64(v) => v,
            _ => crate::semantics::f64_to_i64(self.to_f64()),
        }
    }

    /// Converts to `dtype` with NumPy's `astype` rules (complex to real drops the imaginary
    /// part, float to int truncates, NaN/inf/out-of-range to int gives the minimum value).
    pub fn cast(&self, dtype: DType) -> Scalar {
        if self.dtype() == dtype {
            return *self;
        }
        let c = self.to_c128();
        match dtype {
            DType::Bool => Scalar::Bool(match *self {
                Scalar::I32(v) => v != 0,
                Scalar::I64(v) => v != 0,
                _ => c.re != 0.0 || c.im != 0.0,
            }),
            DType::I32 => Scalar::I32(match *self {
                Scalar::I64(v) => v as i32,
                Scalar::Bool(b) => b as i32,
                _ => crate::semantics::f64_to_i32(c.re),
            }),
            DType::I64 => Scalar::I64(self.to_i64()),
            DType::F32 => Scalar::F32(match *self {
                Scalar::I64(v) => v as f32,
                _ => c.re as f32,
            }),
            DType::F64 => Scalar::F64(match *self {
                Scalar::I64(v) => v as f64,
                _ => c.re,
            }),
            DType::C64 => Scalar::C64(match *self {
                Scalar::I64(v) => Complex32::new(v as f32, 0.0),
                _ => Complex32::new(c.re as f32, c.im as f32),
            }),
            DType::C128 => Scalar::C128(match *self {
                Scalar::I64(v) => Complex64::new(v as f64, 0.0),
                _ => c,
            }),
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
