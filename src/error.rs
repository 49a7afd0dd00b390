//! The one error enum of the crate; every variant names the operation it comes from.

use crate::DType;

/// Result type of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong after a graph is built. New variants may be added in minor
/// versions (`#[non_exhaustive]`): match with a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- user input ---
    /// A host element type that does not match the array's dtype. The message names both
    /// dtypes and their host types (`array is complex64 (lf::c32); requested lf::c64
    /// (complex128)`).
    #[error(
        "{op}: dtype mismatch: array is {expected} ({}); requested {} ({got}){}",
        host_type(*expected),
        host_type(*got),
        convert_hint(op)
    )]
    DType {
        /// The operation.
        op: &'static str,
        /// The array's dtype.
        expected: DType,
        /// The requested dtype.
        got: DType,
    },
    /// A shape that does not fit the operation.
    #[error("{op}: {msg}")]
    Shape {
        /// The operation.
        op: &'static str,
        /// What is wrong, with the shapes involved.
        msg: String,
    },
    /// An index out of range, found on the device after the operation ran (a gather's
    /// indices are checked where they are computed and reported by every readback of the
    /// result and of everything computed from it).
    #[error("{op}: {msg}")]
    Index {
        /// The operation.
        op: &'static str,
        /// Which indices, and the axis length they exceed.
        msg: String,
    },
    /// Arrays of one operation live on different devices.
    #[error("{op}: arrays on different devices ({a} and {b})")]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// One device.
        a: String,
        /// The other device.
        b: String,
    },
    /// A request the operation cannot serve: a device it does not work on, a DLPack dtype
    /// code or memory layout lazyfuse cannot represent.
    #[error("{op}: {msg}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// What is not supported, with the device, dtype or layout involved.
        msg: String,
    },
    /// A file that could not be read or written, or whose contents the operation cannot use:
    /// a malformed or truncated `.npy` header, a dtype lazyfuse does not have, data shorter
    /// or longer than the header says.
    #[error("{op}: {path}: {msg}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The file (for an archive's member, the archive's path joined with its name).
        path: String,
        /// What is wrong.
        msg: String,
        /// The I/O error, when one caused this.
        #[source]
        source: Option<std::io::Error>,
    },
    /// An invalid setting (environment variable, argument).
    #[error("{0}")]
    Config(String),

    /// A buffer that could exist but could not be allocated.
    #[error("{op}: out of memory: {bytes} bytes for {what}")]
    OutOfMemory {
        /// The operation.
        op: &'static str,
        /// The bytes requested.
        bytes: usize,
        /// What the buffer was for.
        what: String,
    },

    // --- devices ---
    /// CUDA is not usable: no driver, no GPU, or the `cuda` feature is off.
    #[error("CUDA unavailable: {0}")]
    NoCuda(String),
    /// A CUDA driver/library call failed.
    #[error("CUDA {op} failed: {msg}")]
    Cuda {
        /// The call.
        op: &'static str,
        /// The driver's message.
        msg: String,
    },
    /// NVRTC rejected generated source.
    #[error("NVRTC compile of kernel {kernel} failed (options {options:?}; source dumped to {source_path}):\n{log}")]
    Compile {
        /// Kernel entry name.
        kernel: String,
        /// Compiler options used.
        options: Vec<String>,
        /// The compiler log.
        log: String,
        /// Where the source was written.
        source_path: String,
    },

    // --- several devices or processes ---
    /// A collective or a multi-process setup that failed: NCCL that cannot be loaded or
    /// reports an error, a rendezvous between ranks that failed or timed out (the message
    /// names the address, the launcher variables and the ranks involved).
    #[error("{op}: {msg}")]
    Distributed {
        /// The operation (`ncclAllReduce`, `rendezvous`, `barrier`, `Mesh::global`, ...).
        op: &'static str,
        /// What went wrong.
        msg: String,
    },

    // --- internal ---
    /// The generated kernel IR was malformed (a bug in lazyfuse).
    #[error("internal error in {op}: {msg}")]
    Internal {
        /// The stage.
        op: &'static str,
        /// What happened.
        msg: String,
    },
}

/// The Rust host type of `d`'s elements, as a program names it.
fn host_type(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        DType::F16 => "lf::f16",
        DType::BF16 => "lf::bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::C64 => "lf::c32",
        DType::C128 => "lf::c64",
    }
}

/// For the readbacks, where to find the converting ones.
fn convert_hint(op: &str) -> &'static str {
    match op {
        "to_vec" | "to_host" | "copy_to_slice" => "; to_vec_as converts",
        "item" => "; item_as converts",
        _ => "",
    }
}

impl Error {
    pub(crate) fn internal(op: &'static str, msg: impl std::fmt::Display) -> Error {
        Error::Internal {
            op,
            msg: msg.to_string(),
        }
    }
}
