//! Generated FFT passes on a CUDA device: a C2C, R2C or C2R transform whose every
//! transformed length the generator covers (`lazyfuse_codegen::fft`) runs as the passes'
//! kernels instead of cuFFT when `LAZYFUSE_FFT=generated` (`lf::set_fft_backend`), or by
//! default where they measured faster (`choice`). The passes compile through
//! the device's kernel cache (memory, disk, NVRTC) keyed by their structure, so a new batch
//! size or array shape reuses them; twiddle tables are uploaded once per length and
//! precision and kept by the device's FFT state. Unnormalized in both directions, as the
//! cuFFT path. A plan may fuse the elementwise kernel producing a transform's input into
//! the first pass ([`Prologue`], `CudaDevice::fft_fused`): that pass computes each input
//! element in its load, and the input is never written; and the elementwise kernel
//! consuming its output into the last pass ([`Epilogue`]), which stores the consumer's
//! result instead of the transform.

use super::plan::Precision;
use super::FftState;
use crate::graph::{FftKind, FftSpec};
use crate::runtime::cuda::compile::lock;
use crate::runtime::cuda::compile::LoadedKernel;
use crate::runtime::cuda::device::{checked_blob, CudaDevice};
use crate::runtime::cuda::driver_err;
use crate::runtime::cuda::memory::CudaBuffer;
use crate::{Error, Result};
use lazyfuse_codegen::cuda::fft::{
    epilogue_extent_fits, pack_args, Epilogue as CgEpilogue, Fused, FusedArgs, FusedPacker,
    Mid as CgMid,
};
use lazyfuse_codegen::fft::{self as gen, Buf};
use lazyfuse_codegen::{DType, Kernel, LaunchArgs};
use smallvec::SmallVec;
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

/// Elementwise work fused into the first pass of a generated transform: the kernel whose
/// stored value at linear index `i` is element `i` of the transform's input, its input
/// buffers and its launch arguments (launch shape: the transform's input shape).
pub(crate) struct Prologue<'a> {
    /// The kernel (an elementwise kernel with one output of the transform's dtype).
    pub(crate) kernel: &'a Arc<Kernel>,
    /// Its input buffers.
    pub(crate) inputs: &'a [&'a CudaBuffer],
    /// Its launch arguments.
    pub(crate) args: &'a LaunchArgs,
}

/// Elementwise work fused into the last pass of a generated transform: a kernel reading
/// the transform's output at a cyclic shift of its own index
/// (`lazyfuse_codegen::cuda::fft::Epilogue`), its other inputs, its launch arguments (the
/// transform's shape, the shifts among the parameters) and its output buffer.
pub(crate) struct Epilogue<'a> {
    /// The kernel.
    pub(crate) kernel: &'a Arc<Kernel>,
    /// Its input buffers, `None` at `value_input`.
    pub(crate) inputs: &'a [Option<&'a CudaBuffer>],
    /// The input standing for the transform's output.
    pub(crate) value_input: u32,
    /// The first of its shift parameters.
    pub(crate) shift_param: u32,
    /// Its launch arguments.
    pub(crate) args: &'a LaunchArgs,
    /// Its output.
    pub(crate) out: &'a CudaBuffer,
}

/// The kernel between the two transforms of a fused round trip
/// (`lazyfuse_codegen::fft::plan_round_trip`): it reads the first transform's output at
/// its own index and computes the second's input; its other inputs, its launch arguments
/// (the transforms' shape) and the second transform.
pub(crate) struct Mid<'a> {
    /// The kernel (an elementwise kernel with one output of the transforms' dtype).
    pub(crate) kernel: &'a Arc<Kernel>,
    /// Its input buffers, `None` at `value_input`.
    pub(crate) inputs: &'a [Option<&'a CudaBuffer>],
    /// The input standing for the first transform's output.
    pub(crate) value_input: u32,
    /// Its launch arguments.
    pub(crate) args: &'a LaunchArgs,
    /// The second transform.
    pub(crate) spec: &'a FftSpec,
}

impl CudaDevice {
    /// Queues the transform `spec` of `input` (of `in_shape`) into `out` (of `out_shape`,
    /// both checked by the caller) as generated passes when the setting asks for them and
    /// the generator covers it (every transformed length; for R2C and C2R, a halved axis
    /// that is the array's last and one pass, and a C2R input of exactly the half
    /// spectrum): `Ok(true)` when queued, `Ok(false)` when the caller should use cuFFT.
    pub(super) fn fft_generated(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        out: &CudaBuffer,
        in_shape: &[usize],
        out_shape: &[usize],
        prec: Precision,
    ) -> Result<bool> {
        let dtype = prec.complex_dtype();
        let Some(shape) = spec.passes_shape(in_shape, out_shape) else {
            return Ok(false);
        };
        if !self.prefers_generated(spec, shape, dtype, false)? {
            return Ok(false);
        }
        self.run_generated(spec, Source::Buffer(input), &[], out, None, shape, dtype)
    }

    /// The generated passes of the transform `spec` of `input` into `out` (`shape` the
    /// transform's, see `FftSpec::passes_shape`; `dtype` complex), whatever the backend setting
    /// (for the measurement of `choice`): `Ok(false)` with nothing queued when they cannot
    /// run it.
    pub(super) fn run_generated_buffer(
        &self,
        spec: &FftSpec,
        input: &CudaBuffer,
        out: &CudaBuffer,
        shape: &[usize],
        dtype: DType,
    ) -> Result<bool> {
        self.run_generated(spec, Source::Buffer(input), &[], out, None, shape, dtype)
    }

    /// Queues the C2C transform `spec` (unnormalized) of the values `prologue` computes
    /// into `out` (of `shape` and the complex dtype `dtype`) as generated passes, the first
    /// computing its input in its load; with an `epilogue`, the last pass computes it in
    /// its store instead of writing `out` (which then only holds the passes before). With
    /// `mids`, the transform's consumer and its transform back run in the same passes
    /// (`out` and the epilogue then see the second transform).
    /// `Ok(false)`, with nothing queued, when the generator does not cover the transforms
    /// or cannot run them now (the caller then runs the kernels and the transforms apart).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fft_fused(
        &self,
        spec: &FftSpec,
        prologue: &Prologue,
        mids: &[Mid],
        epilogue: Option<&Epilogue>,
        out: &CudaBuffer,
        shape: &[usize],
        dtype: DType,
    ) -> Result<bool> {
        let here = |b: &CudaBuffer| b.device().ordinal() == self.ordinal();
        let epi_here = |e: &Epilogue| here(e.out) && e.inputs.iter().flatten().all(|b| here(b));
        let mid_here = |m: &Mid| m.inputs.iter().flatten().all(|b| here(b));
        if !fits_output(last_spec(spec, mids), out, shape, dtype)
            || !prologue.inputs.iter().all(|b| here(b))
            || epilogue.is_some_and(|e| !epi_here(e))
            || mids.iter().any(|m| !mid_here(m))
        {
            return Ok(false);
        }
        let src = Source::Prologue(prologue);
        self.run_generated(spec, src, mids, out, epilogue, shape, dtype)
    }

    /// The passes of the C2C transform `spec` of `src` (and back through `mids`) into
    /// `out`, the last storing through `epi` when given (see the callers).
    #[allow(clippy::too_many_arguments)]
    fn run_generated(
        &self,
        spec: &FftSpec,
        src: Source,
        mids: &[Mid],
        out: &CudaBuffer,
        epi: Option<&Epilogue>,
        shape: &[usize],
        dtype: DType,
    ) -> Result<bool> {
        let Some(prog) = plan(spec, &specs_of(mids), shape, dtype) else {
            return Ok(false);
        };
        let me = self.arc()?;
        let work = match prog.work_len {
            0 => None,
            n => Some(self.alloc(me, dtype, n)?),
        };
        let Some(set) = self.pass_set(prog, &src, mids, out, epi, dtype)? else {
            return Ok(false);
        };
        let launches = self.set_launches(&set, &src, mids, out, epi, work.as_ref())?;
        let tables = &set.tables;
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let mut reads: Vec<&CudaBuffer> = match &src {
            Source::Buffer(b) => vec![b],
            Source::Prologue(p) => p.inputs.to_vec(),
        };
        let mut writes: Vec<&CudaBuffer> = vec![out];
        if let Some(e) = epi {
            reads.extend(e.inputs.iter().flatten());
            writes.push(e.out);
        }
        for m in mids {
            reads.extend(m.inputs.iter().flatten());
        }
        reads.extend(tables.iter().map(|t| &**t));
        // the buffers on this thread's stream, after their writers
        self.order(&reads, &writes)?;
        for l in launches {
            // The pointers: the transform's input and output (sized by the shape the
            // program was planned for, as the caller checked), the work buffer of the
            // program's `work_len` elements and the tables of the lengths the steps name,
            // all ordered on this stream; the line maps address only elements inside them
            // (tested on the host executor, which indexes slices of those lengths). Fused
            // work loads and stores as its kernels do, over its own buffers (ordered above)
            // and launch shape (the transform's, checked by the plan that fused them).
            self.launch_at(&l.kernel, l.blob, (l.grid, 1), l.block)?;
        }
        drop(work); // freed on the stream, after the passes that use it
        Ok(true)
    }

    /// The kernels, grids and twiddle tables of `prog`'s passes reading `src` into an
    /// output like `out`, its round-trip passes computing `mids` and the last storing through
    /// `epi` when given: what stays the same from run to run of one plan.
    /// `None` when they cannot run now (a grid beyond CUDA's, a table missing while
    /// recording or beyond [`MAX_TABLES`]).
    fn pass_set(
        &self,
        prog: gen::Program,
        src: &Source,
        mids: &[Mid],
        out: &CudaBuffer,
        epi: Option<&Epilogue>,
        dtype: DType,
    ) -> Result<Option<PassSet>> {
        // fused work over 2^31 elements or more indexes in 64 bits (`FftPass::index32`)
        let wide = |b: &CudaBuffer| b.len() > i32::MAX as usize;
        let fused_wide = match src {
            Source::Prologue(p) => p.inputs.iter().any(|b| wide(b)),
            Source::Buffer(_) => false,
        } || epi
            .is_some_and(|e| e.inputs.iter().flatten().any(|b| wide(b)) || wide(e.out))
            || mids
                .iter()
                .any(|m| m.inputs.iter().flatten().any(|b| wide(b)));
        let mut passes = Vec::with_capacity(prog.steps.len());
        // round-trip passes so far (the next one computes `mids[trips]`)
        let mut trips = 0;
        for (i, s) in prog.steps.iter().enumerate() {
            // a grid beyond CUDA's 2^31 - 1 blocks goes to cuFFT
            let grid = s.pass.grid(s.args.line_count());
            let Ok(grid) = u32::try_from(grid.min(1 << 31)) else {
                return Ok(None);
            };
            if grid >= 1 << 31 {
                return Ok(None);
            }
            // the step reading the transform's input computes it through the prologue, the
            // last one stores through the epilogue
            let at = fused_at(&prog, i, trips, src, mids, epi);
            trips += usize::from(s.pass.round_trip);
            let (kernel, packer) = match at {
                (None, None, None) => (self.kernels.get_fft(&self.ctx, &s.pass)?, None),
                (p, m, e) => {
                    let work = (
                        p.map(|p| p.kernel),
                        e.map(|e| (e.kernel, e.value_input, e.shift_param)),
                        m.map(|m| (m.kernel, m.value_input)),
                    );
                    // fused prologues and epilogues spread their work over more threads
                    // (the middle work of a round trip runs in the stages' threads)
                    let mut pass = match p.is_some() || e.is_some() {
                        true => s.pass.clone().spread_for(s.args.line_count()),
                        false => s.pass.clone(),
                    };
                    pass.index32 &= !fused_wide;
                    if e.is_some_and(|e| !epilogue_extent_fits(&pass, &e.args.shape)) {
                        return Ok(None);
                    }
                    let k = self.kernels.get_fft_fused(&self.ctx, &pass, work)?;
                    let packer = FusedPacker::new(&cg_fused(p, m, e))
                        .map_err(|e| Error::internal("generated fft", e))?;
                    (k, Some(packer))
                }
            };
            let block = kernel.rendered.block.max(1);
            passes.push(SetPass {
                kernel,
                grid,
                block,
                packer,
                tw: 0,
                tw_big: 0,
            });
        }
        // the tables of every step: its line table and the table of its input twiddles
        let mut tables: Vec<Arc<CudaBuffer>> = Vec::new();
        {
            let mut st = lock(&self.fft);
            for (s, p) in prog.steps.iter().zip(&mut passes) {
                let Some(line) = st.table(self, s.table_len(), dtype)? else {
                    return Ok(None);
                };
                p.tw = line.device_ptr();
                p.tw_big = p.tw;
                tables.push(line);
                if s.args.big_n != 0 {
                    let Some(big) = st.table(self, s.args.big_n as usize, dtype)? else {
                        return Ok(None);
                    };
                    p.tw_big = big.device_ptr();
                    tables.push(big);
                }
            }
        }
        Ok(Some(PassSet {
            prog,
            passes,
            tables,
            out_len: out.len(),
        }))
    }

    /// The launches of `set`'s passes from `src` into `out` (through `mids` and `epi`, the
    /// work `set` was made for), with `work` as its work buffer (of the program's
    /// `work_len` elements at least).
    fn set_launches(
        &self,
        set: &PassSet,
        src: &Source,
        mids: &[Mid],
        out: &CudaBuffer,
        epi: Option<&Epilogue>,
        work: Option<&CudaBuffer>,
    ) -> Result<Vec<PassLaunch>> {
        let prog = &set.prog;
        if work.map_or(0, |w| w.len()) < prog.work_len {
            return Err(Error::internal("generated fft", "no work buffer"));
        }
        let ptr = |b: Buf| -> Result<u64> {
            match (b, src) {
                (Buf::Input, Source::Buffer(input)) => Ok(input.device_ptr()),
                // not read: the fused load computes the input
                (Buf::Input, Source::Prologue(_)) => Ok(0),
                (Buf::Output, _) => Ok(out.device_ptr()),
                (Buf::Work, _) => work
                    .map(|w| w.device_ptr())
                    .ok_or_else(|| Error::internal("generated fft", "no work buffer")),
            }
        };
        let mut launches = Vec::with_capacity(set.passes.len());
        let mut trips = 0;
        for (i, (s, p)) in prog.steps.iter().zip(&set.passes).enumerate() {
            let ptrs = [ptr(s.src)?, ptr(s.dst)?, p.tw, p.tw_big];
            let at = fused_at(prog, i, trips, src, mids, epi);
            trips += usize::from(s.pass.round_trip);
            let blob = match (at, &p.packer) {
                ((None, None, None), None) => pack_args(&s.args, ptrs),
                ((pro, m, e), Some(packer)) => fused_blob(packer, &s.args, ptrs, pro, m, e)?,
                _ => return Err(Error::internal("generated fft", "fused work changed")),
            };
            launches.push(PassLaunch {
                kernel: p.kernel.clone(),
                blob: checked_blob(&p.kernel, blob)?,
                grid: p.grid,
                block: p.block,
            });
        }
        Ok(launches)
    }

    /// Elements of the work buffer the generated passes of the transform `spec` (and back
    /// by `round`, and on for each round trip of a chain) over `shape` (its
    /// `FftSpec::passes_shape`) in the complex `dtype` need; `None` when the generator does
    /// not cover it.
    pub(in crate::runtime::cuda) fn fused_work_len(
        spec: &FftSpec,
        round: &[&FftSpec],
        shape: &[usize],
        dtype: DType,
    ) -> Option<usize> {
        plan(spec, round, shape, dtype).map(|p| p.work_len)
    }

    /// The passes of the fused transform [`CudaDevice::fft_fused`] queues, for a caller
    /// that launches or records them itself (a CUDA graph) and keeps them from run to run
    /// of one plan ([`CudaDevice::fused_launches`] makes each run's launches): `None` when
    /// they cannot run now. Outside a recording the twiddle tables are ordered on this
    /// thread's stream (later runs follow this one); the caller orders every other buffer.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::runtime::cuda) fn fused_passes(
        &self,
        spec: &FftSpec,
        prologue: &Prologue,
        mids: &[Mid],
        epilogue: Option<&Epilogue>,
        out: &CudaBuffer,
        shape: &[usize],
        dtype: DType,
    ) -> Result<Option<PassSet>> {
        if !fits_output(last_spec(spec, mids), out, shape, dtype) {
            return Ok(None);
        }
        let Some(prog) = plan(spec, &specs_of(mids), shape, dtype) else {
            return Ok(None);
        };
        let src = Source::Prologue(prologue);
        let Some(set) = self.pass_set(prog, &src, mids, out, epilogue, dtype)? else {
            return Ok(None);
        };
        let tables: Vec<&CudaBuffer> = set.tables.iter().map(|t| &**t).collect();
        self.order(&tables, &[])?; // nothing while recording
        Ok(Some(set))
    }

    /// The launches of `set` (from [`CudaDevice::fused_passes`] for the same kernels and
    /// shapes) over these buffers and the work buffer `work`
    /// ([`CudaDevice::fused_work_len`] elements).
    pub(in crate::runtime::cuda) fn fused_launches(
        &self,
        set: &PassSet,
        prologue: &Prologue,
        mids: &[Mid],
        epilogue: Option<&Epilogue>,
        out: &CudaBuffer,
        work: Option<&CudaBuffer>,
    ) -> Result<Vec<PassLaunch>> {
        if out.len() != set.out_len {
            return Err(Error::internal("generated fft", "output of another shape"));
        }
        self.set_launches(set, &Source::Prologue(prologue), mids, out, epilogue, work)
    }
}

/// The passes of a generated transform as loaded kernels with their grids and tables:
/// what stays the same from run to run of one plan ([`CudaDevice::fused_passes`]).
pub(in crate::runtime::cuda) struct PassSet {
    prog: gen::Program,
    passes: Vec<SetPass>,
    /// Every table the passes read (kept alive with them).
    tables: Vec<Arc<CudaBuffer>>,
    /// Elements of the output it was made for.
    out_len: usize,
}

/// One pass of a [`PassSet`].
struct SetPass {
    kernel: Arc<LoadedKernel>,
    grid: u32,
    block: u32,
    /// The layout of the fused work's arguments, for a pass with fused work.
    packer: Option<FusedPacker>,
    /// Addresses of its line table and its input-twiddle table (the line table's without).
    tw: u64,
    tw_big: u64,
}

/// One pass of a generated transform, ready to launch: the kernel, its checked argument
/// blob, its grid (blocks along x) and block size.
pub(in crate::runtime::cuda) struct PassLaunch {
    pub(in crate::runtime::cuda) kernel: Arc<LoadedKernel>,
    pub(in crate::runtime::cuda) blob: Vec<u8>,
    pub(in crate::runtime::cuda) grid: u32,
    pub(in crate::runtime::cuda) block: u32,
}

/// Whether `out` holds the output of the transform `spec` over `shape` (its
/// `FftSpec::passes_shape`) in the complex `dtype` (what the generated passes of a fused
/// transform write): `shape` of `dtype` for C2C, its half spectrum for R2C, `shape` of the
/// real dtype for C2R.
fn fits_output(spec: &FftSpec, out: &CudaBuffer, shape: &[usize], dtype: DType) -> bool {
    let all: usize = shape.iter().product();
    let (len, dt) = match spec.kind {
        FftKind::C2C => (all, dtype),
        FftKind::R2C => match shape.last() {
            Some(&n) if n > 0 => (all / n * (n / 2 + 1), dtype),
            _ => return false,
        },
        FftKind::C2R => (all, fused_dtypes(spec, dtype).1),
    };
    out.dtype() == dt && out.len() == len
}

/// The complex dtype the generated passes of the transform `spec` compute in, and the
/// dtype of its output, for an input of `in_dtype` (a fused transform's prologue's output).
pub(crate) fn fused_dtypes(spec: &FftSpec, in_dtype: DType) -> (DType, DType) {
    let prec = match in_dtype {
        DType::F64 | DType::C128 => Precision::Double,
        _ => Precision::Single,
    };
    match spec.kind {
        FftKind::C2C => (in_dtype, in_dtype),
        FftKind::R2C => (prec.complex_dtype(), prec.complex_dtype()),
        FftKind::C2R => (prec.complex_dtype(), prec.real_dtype()),
    }
}

/// The `Fused` description of a prologue, a round trip's middle work and an epilogue.
fn cg_fused<'a>(p: Option<&'a Prologue>, m: Option<&'a Mid>, e: Option<&'a Epilogue>) -> Fused<'a> {
    Fused {
        prologue: p.map(|p| &**p.kernel),
        epilogue: e.map(|e| CgEpilogue {
            kernel: e.kernel,
            value_input: e.value_input,
            shift_param: e.shift_param,
        }),
        mid: m.map(|m| CgMid {
            kernel: m.kernel,
            value_input: m.value_input,
        }),
    }
}

/// The argument blob of a pass with fused work.
fn fused_blob(
    packer: &FusedPacker,
    args: &gen::PassArgs,
    ptrs: [u64; 4],
    p: Option<&Prologue>,
    m: Option<&Mid>,
    e: Option<&Epilogue>,
) -> Result<Vec<u8>> {
    let pro_in: SmallVec<[u64; 8]> = p
        .map(|p| p.inputs.iter().map(|b| b.device_ptr()).collect())
        .unwrap_or_default();
    // a fused kernel's input pointers, 0 at its transform value
    let ptrs_of = |ins: Option<&[Option<&CudaBuffer>]>| -> SmallVec<[u64; 8]> {
        ins.unwrap_or_default()
            .iter()
            .map(|b| b.map_or(0, |b| b.device_ptr()))
            .collect()
    };
    let epi_in = ptrs_of(e.map(|e| e.inputs));
    let mid_in = ptrs_of(m.map(|m| m.inputs));
    let epi_out: [u64; 1] = [e.map_or(0, |e| e.out.device_ptr())];
    let pro = p.map(|p| FusedArgs {
        inputs: &pro_in,
        outputs: &[],
        args: p.args,
    });
    let epi = e.map(|e| FusedArgs {
        inputs: &epi_in,
        outputs: &epi_out,
        args: e.args,
    });
    let mid = m.map(|m| FusedArgs {
        inputs: &mid_in,
        outputs: &[],
        args: m.args,
    });
    packer
        .pack(args, ptrs, &cg_fused(p, m, e), pro, epi, mid)
        .map_err(|e| Error::internal("generated fft", e))
}

/// The fused work of step `i` of `prog` (after `trips` round-trip passes): the prologue
/// when it reads the transform's input, the `j`-th middle work in the `j`-th round-trip
/// pass, the epilogue when it is the last step.
fn fused_at<'a>(
    prog: &gen::Program,
    i: usize,
    trips: usize,
    src: &'a Source,
    mids: &'a [Mid<'a>],
    epi: Option<&'a Epilogue<'a>>,
) -> (
    Option<&'a Prologue<'a>>,
    Option<&'a Mid<'a>>,
    Option<&'a Epilogue<'a>>,
) {
    let pro = match (src, prog.steps[i].src) {
        (Source::Prologue(p), Buf::Input) => Some(*p),
        _ => None,
    };
    let mid = mids.get(trips).filter(|_| prog.steps[i].pass.round_trip);
    (pro, mid, epi.filter(|_| i + 1 == prog.steps.len()))
}

/// What the first pass of a generated transform reads.
enum Source<'a> {
    /// The input buffer.
    Buffer(&'a CudaBuffer),
    /// Values computed by a fused prologue.
    Prologue(&'a Prologue<'a>),
}

/// The generated passes of the transform `spec` over `shape` (its `FftSpec::passes_shape`) in
/// the complex `dtype`: an R2C or C2R transform by `plan_r2c` or `plan_c2r`; a C2C one
/// pruned to the columns of its input's support when it has one (`FftSpec::support`,
/// `lazyfuse_codegen::fft::plan_c2c_pruned`); with `round`, and on by those transforms,
/// turning in a round-trip pass between each two (`lazyfuse_codegen::fft::plan_chain`); an
/// R2C transform with the C2R transform back as one program over the half spectrum
/// (`lazyfuse_codegen::fft::plan_real_round_trip`).
fn plan(spec: &FftSpec, round: &[&FftSpec], shape: &[usize], dtype: DType) -> Option<gen::Program> {
    match (spec.kind, round) {
        (FftKind::R2C, []) => return gen::plan_r2c(shape, &spec.axes, dtype),
        (FftKind::C2R, []) => return gen::plan_c2r(shape, &spec.axes, dtype),
        (FftKind::R2C, [back]) if back.kind == FftKind::C2R && back.axes == spec.axes => {
            return gen::plan_real_round_trip(shape, &spec.axes, dtype);
        }
        (FftKind::C2C, _) => {}
        _ => return None,
    }
    let support = spec.support.as_deref();
    if round.is_empty() {
        return gen::plan_c2c_pruned(shape, &spec.axes, dtype, spec.inverse, support);
    }
    if round.iter().any(|r| r.kind != FftKind::C2C) {
        return None;
    }
    let links: SmallVec<[(&[usize], bool); 8]> = std::iter::once(spec)
        .chain(round.iter().copied())
        .map(|s| (s.axes.as_slice(), s.inverse))
        .collect();
    gen::plan_chain(shape, &links, dtype, support)
}

/// The last transform of `spec` and the transforms of its middle work `mids` (whose output
/// the step writes).
pub(crate) fn last_spec<'a>(spec: &'a FftSpec, mids: &[Mid<'a>]) -> &'a FftSpec {
    mids.last().map_or(spec, |m| m.spec)
}

/// The transforms of a chain's middle work, in order.
fn specs_of<'a>(mids: &[Mid<'a>]) -> SmallVec<[&'a FftSpec; 8]> {
    mids.iter().map(|m| m.spec).collect()
}
