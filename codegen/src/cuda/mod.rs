//! CUDA C renderer: a pure function from the kernel IR to self-contained CUDA C source,
//! plus the packing of launch arguments into the by-value struct the source declares.

use crate::{IrError, Kernel, LaunchArgs};

/// Target choices that are part of the compiled kernel's identity (and its cache key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RenderOptions {
    /// Index arithmetic in 32-bit `int` (the caller guarantees every index fits).
    pub index32: bool,
}

/// Rendered source and how to launch it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// Complete CUDA C, no headers needed.
    pub source: String,
    /// The `extern "C"` name of the kernel.
    pub entry: String,
    /// Threads per block the kernel is written for.
    pub block: u32,
    /// Elements each thread handles per grid-stride iteration (vector width).
    pub per_thread: u32,
}

/// Renders `kernel` to CUDA C.
pub fn render(kernel: &Kernel, opts: &RenderOptions) -> Result<Rendered, IrError> {
    let _ = (kernel, opts);
    Err(IrError("CUDA renderer not written yet".into()))
}

/// Packs the kernel's single by-value argument: device pointers of inputs and outputs,
/// the element count, the launch shape and every scalar parameter, laid out exactly as the
/// struct `render` declares.
pub fn pack_args(
    kernel: &Kernel,
    opts: &RenderOptions,
    inputs: &[u64],
    outputs: &[u64],
    args: &LaunchArgs,
) -> Result<Vec<u8>, IrError> {
    let _ = (kernel, opts, inputs, outputs, args);
    Err(IrError("CUDA renderer not written yet".into()))
}
