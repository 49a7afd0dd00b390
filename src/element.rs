//! The `Element` trait: the host element types (`bool, i8, i16, i32, i64, u8, u16, u32,
//! u64, half::f16, half::bf16, f32, f64, c32, c64`) and how they map to dtypes, host buffers
//! and scalars.

use crate::DType;
use lazyfuse_codegen::{HostBuf, Scalar};
use num_complex::{Complex32, Complex64};

/// A host element type with a matching [`DType`].
pub trait Element: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The dtype of arrays of this element type.
    const DTYPE: DType;
    #[doc(hidden)]
    fn into_host(v: Vec<Self>) -> HostBuf;
    #[doc(hidden)]
    fn from_host(h: HostBuf) -> Option<Vec<Self>>;
    #[doc(hidden)]
    fn to_scalar(self) -> Scalar;
    #[doc(hidden)]
    fn from_scalar(s: Scalar) -> Self;
}

macro_rules! element {
    ($t:ty, $v:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$v;
            fn into_host(v: Vec<Self>) -> HostBuf {
                HostBuf::$v(v)
            }
            fn from_host(h: HostBuf) -> Option<Vec<Self>> {
                match h {
                    HostBuf::$v(v) => Some(v),
                    _ => None,
                }
            }
            fn to_scalar(self) -> Scalar {
                Scalar::$v(self)
            }
            fn from_scalar(s: Scalar) -> Self {
                match s.cast(DType::$v) {
                    Scalar::$v(v) => v,
                    _ => unreachable!("cast gives the requested dtype"),
                }
            }
        }
    };
}
element!(bool, Bool);
element!(i32, I32);
element!(i64, I64);
element!(f32, F32);
element!(f64, F64);
element!(Complex32, C64);
element!(Complex64, C128);
element!(u8, U8);
element!(u16, U16);
element!(u32, U32);
element!(u64, U64);
element!(i8, I8);
element!(i16, I16);
element!(half::f16, F16);
element!(half::bf16, BF16);
