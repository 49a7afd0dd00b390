//! `std::ops` operators (`+ - * / %`, unary `-`, `!`) between arrays, references to arrays
//! and Rust scalars on either side.

use super::elementwise::{binary, Operand};
use crate::{c32, c64, Array};
use lazyfuse_codegen::BinaryOp;
use std::ops::{Add, Div, Mul, Neg, Not, Rem, Sub};

macro_rules! array_ops {
    ($($tr:ident $method:ident $op:ident),*) => {$(
        impl<R: Into<Operand>> $tr<R> for Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: R) -> Array {
                binary(BinaryOp::$op, Operand::Array(self), rhs.into())
            }
        }
        impl<R: Into<Operand>> $tr<R> for &Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: R) -> Array {
                binary(BinaryOp::$op, Operand::Array(self.clone()), rhs.into())
            }
        }
        scalar_lhs!($tr $method $op: bool, i32, i64, f32, f64, c32, c64, u8, u16, u32, u64, i8, i16,
            half::f16, half::bf16);
    )*};
}

macro_rules! scalar_lhs {
    ($tr:ident $method:ident $op:ident: $($t:ty),*) => {$(
        impl $tr<Array> for $t {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: Array) -> Array {
                binary(BinaryOp::$op, Operand::from(self), Operand::Array(rhs))
            }
        }
        impl $tr<&Array> for $t {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: &Array) -> Array {
                binary(BinaryOp::$op, Operand::from(self), Operand::Array(rhs.clone()))
            }
        }
    )*};
}

array_ops!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Mod);

impl Neg for Array {
    type Output = Array;
    #[track_caller]
    fn neg(self) -> Array {
        self.neg_impl()
    }
}
impl Neg for &Array {
    type Output = Array;
    #[track_caller]
    fn neg(self) -> Array {
        self.neg_impl()
    }
}
impl Not for Array {
    type Output = Array;
    #[track_caller]
    fn not(self) -> Array {
        self.not_impl()
    }
}
impl Not for &Array {
    type Output = Array;
    #[track_caller]
    fn not(self) -> Array {
        self.not_impl()
    }
}
