//! `std::ops` operators on sharded arrays: `+ - * /` between two arrays of one mesh,
//! placement and shape (blockwise, as [`Sharded::zip`]), with `f64` scalars on either
//! side, and unary `-`. A mismatch of meshes, placements or shapes is graph-building
//! misuse and panics at the caller's line; [`Sharded::zip`] returns it as an error.

use super::Sharded;
use crate::Result;

/// Unwraps an operator's result: a mismatch is graph-building misuse, so it panics at the
/// caller's line.
#[track_caller]
fn or_panic(r: Result<Sharded>) -> Sharded {
    match r {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

macro_rules! sharded_ops {
    ($($tr:ident $m:ident),*) => {$(
        impl std::ops::$tr<&Sharded> for &Sharded {
            type Output = Sharded;
            #[track_caller]
            fn $m(self, rhs: &Sharded) -> Sharded {
                or_panic(self.zip(rhs, |a, b| std::ops::$tr::$m(a, b)))
            }
        }
        impl std::ops::$tr<Sharded> for Sharded {
            type Output = Sharded;
            #[track_caller]
            fn $m(self, rhs: Sharded) -> Sharded {
                std::ops::$tr::$m(&self, &rhs)
            }
        }
        impl std::ops::$tr<&Sharded> for Sharded {
            type Output = Sharded;
            #[track_caller]
            fn $m(self, rhs: &Sharded) -> Sharded {
                std::ops::$tr::$m(&self, rhs)
            }
        }
        impl std::ops::$tr<f64> for &Sharded {
            type Output = Sharded;
            #[track_caller]
            fn $m(self, rhs: f64) -> Sharded {
                or_panic(self.map(|a| std::ops::$tr::$m(a, rhs)))
            }
        }
        impl std::ops::$tr<f64> for Sharded {
            type Output = Sharded;
            #[track_caller]
            fn $m(self, rhs: f64) -> Sharded {
                std::ops::$tr::$m(&self, rhs)
            }
        }
        impl std::ops::$tr<&Sharded> for f64 {
            type Output = Sharded;
            #[track_caller]
            fn $m(self, rhs: &Sharded) -> Sharded {
                or_panic(rhs.map(|a| std::ops::$tr::$m(self, a)))
            }
        }
    )*};
}
sharded_ops!(Add add, Sub sub, Mul mul, Div div);

impl std::ops::Neg for &Sharded {
    type Output = Sharded;
    #[track_caller]
    fn neg(self) -> Sharded {
        or_panic(self.map(|a| -a))
    }
}
impl std::ops::Neg for Sharded {
    type Output = Sharded;
    #[track_caller]
    fn neg(self) -> Sharded {
        -&self
    }
}
