//! Generated FFT passes on a CUDA device: a C2C transform whose every transformed length
//! the generator covers (`lazyfuse_codegen::fft`) runs as the passes' kernels instead of
//! cuFFT when `LAZYFUSE_FFT=generated` (`lf::set_fft_backend`). The passes compile through
//! the device's kernel cache (memory, disk, NVRTC) keyed by their structure, so a new batch
//! size or array shape reuses them; twiddle tables are uploaded once per length and
//! precision and kept by the device's FFT state. Unnormalized in both directions, as the
//! cuFFT path.

use super::plan::Precision;
use super::FftState;
use crate::config::FftBackend;
use crate::graph::{FftKind, FftSpec};
use crate::runtime::cuda::compile::lock;
use crate::runtime::cuda::device::CudaDevice;
use crate::runtime::cuda::driver_err;
use crate::runtime::cuda::memory::CudaBuffer;
use crate::{Error, Result};
use lazyfuse_codegen::cuda::fft::pack_args;
use lazyfuse_codegen::fft::{self as gen, Buf};
use lazyfuse_codegen::DType;
use std::sync::Arc;

/// Most twiddle tables a device keeps (one per length and precision used); beyond it the
/// transform goes to cuFFT rather than evict a table a recorded CUDA graph may read.
const MAX_TABLES: usize = 256;

impl FftState {
    /// The twiddle table of `len` entries of `dtype` (uploaded on a miss; `None` while a
    /// graph is being recorded on this thread, when the table is missing, or when the
    /// device holds [`MAX_TABLES`] already).
    fn table(
        &mut self,
        dev: &CudaDevice,
        len: usize,
        dtype: DType,
    ) -> Result<Option<Arc<CudaBuffer>>> {
        if let Some(t) = self.tables.get(&(len, dtype)) {
            return Ok(Some(t.clone()));
        }
        if dev.capture_stream().is_some() || self.tables.len() >= MAX_TABLES {
            return Ok(None);
        }
        let tw = gen::twiddles(len);
        let bytes: Vec<u8> = match dtype {
            DType::C64 => tw
                .iter()
                .flat_map(|&(re, im)| [re as f32, im as f32])
                .flat_map(f32::to_le_bytes)
                .collect(),
            _ => tw
                .iter()
                .flat_map(|&(re, im)| [re, im])
                .flat_map(f64::to_le_bytes)
                .collect(),
        };
        let buf = Arc::new(dev.upload_bytes(dtype, len, &bytes)?);
        self.tables.insert((len, dtype), buf.clone());
        Ok(Some(buf))
    }
}

impl CudaDevice {
    /// Queues the C2C transform `spec` of `input` into `out` (both of `shape`, checked by
    /// the caller) as generated passes when the setting asks for them and the generator
    /// covers every transformed length: `Ok(true)` when queued, `Ok(false)` when the
    /// caller should use cuFFT.
    pub(super) fn fft_generated(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        out: &CudaBuffer,
        shape: &[usize],
        prec: Precision,
    ) -> Result<bool> {
        if spec.kind != FftKind::C2C || crate::config::fft_backend() != FftBackend::Generated {
            return Ok(false);
        }
        let dtype = prec.complex_dtype();
        let Some(prog) = gen::plan_c2c(shape, &spec.axes, dtype, spec.inverse) else {
            return Ok(false);
        };
        let mut launches = Vec::with_capacity(prog.steps.len());
        for s in &prog.steps {
            // a grid beyond CUDA's 2^31 - 1 blocks goes to cuFFT
            let grid = s.pass.grid(s.args.line_count());
            let Ok(grid) = u32::try_from(grid.min(1 << 31)) else {
                return Ok(false);
            };
            if grid >= 1 << 31 {
                return Ok(false);
            }
            launches.push((self.kernels.get_fft(&self.ctx, &s.pass)?, grid));
        }
        // the tables of every step: (line table, table of the input twiddles)
        let mut tables: Vec<(Arc<CudaBuffer>, Option<Arc<CudaBuffer>>)> = Vec::new();
        {
            let mut st = lock(&self.fft);
            for s in &prog.steps {
                let Some(line) = st.table(self, s.table_len(), dtype)? else {
                    return Ok(false);
                };
                let big = match s.args.big_n {
                    0 => None,
                    n => match st.table(self, n as usize, dtype)? {
                        Some(t) => Some(t),
                        None => return Ok(false),
                    },
                };
                tables.push((line, big));
            }
        }
        let me = self.arc()?;
        let work = match prog.work_len {
            0 => None,
            n => Some(self.alloc(me, dtype, n)?),
        };
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let mut reads: Vec<&CudaBuffer> = vec![input];
        for (line, big) in &tables {
            reads.push(line);
            if let Some(b) = big {
                reads.push(b);
            }
        }
        // the buffers on this thread's stream, after their writers
        self.order(&reads, &[out])?;
        let ptr = |b: Buf| -> Result<u64> {
            match b {
                Buf::Input => Ok(input.device_ptr()),
                Buf::Output => Ok(out.device_ptr()),
                Buf::Work => work
                    .as_ref()
                    .map(|w| w.device_ptr())
                    .ok_or_else(|| Error::internal("generated fft", "no work buffer")),
            }
        };
        for ((s, (k, grid)), (line, big)) in prog.steps.iter().zip(&launches).zip(&tables) {
            let tw = line.device_ptr();
            let tw_big = big.as_ref().map_or(tw, |b| b.device_ptr());
            let blob = pack_args(&s.args, [ptr(s.src)?, ptr(s.dst)?, tw, tw_big]);
            // The pointers: the transform's input and output (sized by the shape the
            // program was planned for, as the caller checked), the work buffer of the
            // program's `work_len` elements and the tables of the lengths the steps name,
            // all ordered on this stream; the line maps address only elements inside them
            // (tested on the host executor, which indexes slices of those lengths).
            self.launch_grid(k, blob, *grid)?;
        }
        drop(work); // freed on the stream, after the passes that use it
        Ok(true)
    }
}
