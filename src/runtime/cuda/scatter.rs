//! Scatter-add on a CUDA device: the zeroing kernel over the output, then the atomic
//! kernel of `lazyfuse_codegen::cuda::scatter` over every value, on this thread's stream
//! (or as two kernel nodes of a recorded graph, `graph`).

use super::device::{checked_blob, CudaDevice};
use super::fft::PassLaunch;
use super::memory::CudaBuffer;
use crate::runtime::scatter::Dims;
use crate::{Error, Result};
use lazyfuse_codegen::cuda::scatter::{pack_args, pack_zero_args, render, render_zero};
use lazyfuse_codegen::DType;

/// Most blocks of one launch (the kernels' loops stride over the rest).
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
        let out = self.alloc(self.arc()?, values.dtype(), d.out())?;
        // the operands on this thread's stream, after their writers
        self.order(&[values, indices], &[&out])?;
        for l in self.scatter_launches(d, values, indices, &out)? {
            // The zeroing kernel writes the `words` 4-byte words of `out`; the adding
            // kernel reads `pre * k * post` values and I64 indices (the lengths checked by
            // `scatter_launches`) and writes inside `out` only (indices out of range are
            // skipped): buffers of this context, ordered on this stream above.
            self.launch_at(&l.kernel, l.blob, (l.grid, 1), l.block)?;
        }
        Ok(out)
    }

    /// The two launches of a scatter-add into `out`: zero it, then add every value (none
    /// when there is nothing to write).
    pub(super) fn scatter_launches(
        &self,
        d: Dims,
        values: &CudaBuffer,
        indices: &CudaBuffer,
        out: &CudaBuffer,
    ) -> Result<Vec<PassLaunch>> {
        let dtype = values.dtype();
        if values.len() != d.values()
            || indices.len() != d.values()
            || indices.dtype() != DType::I64
            || out.len() != d.out()
            || out.dtype() != dtype
        {
            return Err(Error::internal(
                "scatter_add",
                format!("buffers do not fit {d:?}"),
            ));
        }
        if d.out() == 0 {
            return Ok(Vec::new());
        }
        let kernel = |entry: &str, r: &dyn Fn() -> Option<lazyfuse_codegen::cuda::Rendered>| {
            self.kernels
                .get_scatter(&self.ctx, entry, r)?
                .ok_or_else(|| Error::internal("scatter_add", format!("no kernel for {dtype}")))
        };
        let grid = |n: usize, block: u32| n.div_ceil(block as usize).clamp(1, MAX_GRID) as u32;
        let zero = kernel("lf_zero_words", &|| Some(render_zero()))?;
        let words = d.out() * dtype.size() / 4;
        let mut launches = vec![PassLaunch {
            blob: checked_blob(&zero, pack_zero_args(out.device_ptr(), words as u64))?,
            grid: grid(words, zero.rendered.block),
            block: zero.rendered.block,
            kernel: zero,
        }];
        if d.values() > 0 {
            let add = kernel(&format!("lf_scatter_{}", dtype.name()), &|| render(dtype))?;
            let blob = pack_args(
                [values.device_ptr(), indices.device_ptr(), out.device_ptr()],
                [d.values() as u64, d.k as u64, d.post as u64, d.n as u64],
            );
            launches.push(PassLaunch {
                blob: checked_blob(&add, blob)?,
                grid: grid(d.values(), add.rendered.block),
                block: add.rendered.block,
                kernel: add,
            });
        }
        Ok(launches)
    }
}
