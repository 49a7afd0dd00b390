//! `lazyfuse-codegen`: the typed kernel IR of lazyfuse, its validation and cache key, the
//! host interpreter the CPU backend runs, and the CUDA C renderer (pure, no GPU needed).

#![warn(missing_docs)]

mod cmath;
mod dtype;
pub mod host;
pub mod ir;
pub mod ops;
mod reduce;
mod scalar;
pub mod semantics;
pub mod vmath;

pub use dtype::DType;
pub use host::{host_bytes_possible, try_with_capacity, AllocError, HostBuf, Slice, SliceMut};
pub use ir::{
    Builder, Inst, IrError, Kernel, LaunchArgs, LaunchShape, Reduce, Store, Value, ValueId,
};
pub use ops::{BinaryOp, RandomKind, ReduceLayout, ReduceOp, UnaryOp};
pub use scalar::Scalar;
pub mod cuda;
pub mod fft;
pub mod interp;
