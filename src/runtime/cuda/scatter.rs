//! Scatter-add on a CUDA device: a zeroed output, then the atomic kernel of
//! `lazyfuse_codegen::cuda::scatter` over every value, on this thread's stream.

use super::device::{checked_blob, CudaDevice};
use super::memory::CudaBuffer;
use crate::runtime::scatter::Dims;
use crate::{Error, Result};
use lazyfuse_codegen::cuda::scatter::{pack_args, supports};

/// Most blocks of one launch (the kernel's loop strides over the rest).
const MAX_GRID: usize = 1 << 20;

impl CudaDevice {
    /// The `[pre, n, post]` sums of `values` at `indices` (both `[pre, k, post]`; checked
    /// by the caller), see `Op::ScatterAdd`.
    pub(crate) fn scatter_add(
        &self,
        d: Dims,
        values: &CudaBuffer,
        indices: &CudaBuffer,
    ) -> Result<CudaBuffer> {
        let dtype = values.dtype();
        if !supports(dtype) {
            return Err(Error::internal(
                "scatter_add",
                format!("values of dtype {dtype}"),
            ));
        }
        let out = self.alloc_zeroed(dtype, d.out())?;
        let total = d.values();
        if total == 0 || d.out() == 0 {
            return Ok(out);
        }
        let k = self
            .kernels
            .get_scatter(&self.ctx, dtype)?
            .ok_or_else(|| Error::internal("scatter_add", format!("no kernel for {dtype}")))?;
        // the operands on this thread's stream, after their writers
        self.order(&[values, indices], &[&out])?;
        let blob = pack_args(
            [values.device_ptr(), indices.device_ptr(), out.device_ptr()],
            [total as u64, d.k as u64, d.post as u64, d.n as u64],
        );
        let blob = checked_blob(&k, blob)?;
        let grid = total.div_ceil(k.rendered.block as usize).min(MAX_GRID) as u32;
        // The kernel reads `total` values and I64 indices (the lengths the caller checked)
        // and writes only inside `out` (`pre * n * post` elements: out-of-range indices
        // are skipped), all buffers of this context ordered on this stream.
        self.launch_at(&k, blob, (grid, 1), k.rendered.block)?;
        Ok(out)
    }
}
