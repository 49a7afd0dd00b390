//! Host interpreter of the kernel IR, used by the CPU backend.

use crate::{IrError, Kernel, LaunchArgs, Slice, SliceMut};

/// Computes elements `start .. start + len` of `kernel` (where `len` is the length of every
/// output slice), reading `inputs` and writing `outputs[o][j]` for element `start + j`.
pub fn run(
    kernel: &Kernel,
    inputs: &[Slice<'_>],
    outputs: &mut [SliceMut<'_>],
    args: &LaunchArgs,
    start: usize,
) -> Result<(), IrError> {
    let _ = (kernel, inputs, outputs, args, start);
    Err(IrError("interpreter not written yet".into()))
}
