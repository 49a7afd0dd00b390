//! CUDA graphs for repeated plans: the first run launches normally (compiling kernels,
//! making cuFFT plans), the second records the plan once on a private capture stream, and
//! every later run updates the recorded kernel nodes' arguments and replays the whole plan
//! with one `cuGraphLaunch` on the calling thread's stream.
//!
//! # What may change between replays
//! Only the arguments of the plan's own fused kernels: their by-value argument structs hold
//! every buffer address and scalar, and `cuGraphExecKernelNodeSetParams` rewrites them
//! before each launch. Everything recorded inside cuFFT (its kernels, the FFT helper
//! kernels, copies) keeps the addresses it was recorded with, so FFT inputs and outputs
//! must be buffers that stay put: intermediates in the graph's own arena (allocated when the
//! graph is recorded, reused by every replay; a plan that is not recorded frees its
//! intermediates after each run) or buffers the caller keeps alive for the graph's lifetime
//! (result buffers the caller owns and alternates, `exec::replay`). A plan keeps one
//! recording per set of FFT addresses. The caller ([`GraphPlan::new`]) refuses plans whose
//! FFTs read per-call inputs and runs them plainly. cuFFT's work area is one scratch area
//! per device (`fft`), so a recording holds no memory nodes for it.
//!
//! # Ordering
//! Recording executes nothing, so the capture stream needs no ordering against the device
//! stream; replays go to the device stream and are ordered like any launch there. The
//! arena is only touched by replays, which the stream serializes.
//!
//! Inside a recording, a step's first node depends only on the steps it must follow
//! ([`Hazards`]): the last writer of every buffer it reads or writes, and every reader of a
//! buffer it overwrites since that buffer's last write. cuFFT steps also follow each other
//! (they share the device's work area), as do split reductions (they share the completion
//! counters). Independent steps, such as a loss's reduction and the backward pass that
//! reads the same spectrum, then run concurrently. `LAZYFUSE_GRAPHS=chain` records the
//! steps as one chain in plan order instead.
//!
//! # Failure
//! Any error while recording, instantiating, updating or launching turns the graph off for
//! this plan (logged at `LAZYFUSE_DEBUG>=1`, counted in `graph_fallbacks`) and the run
//! proceeds with plain launches.

use super::compile::LoadedKernel;
use super::device::{CudaDevice, CAPTURE};
use super::lane::{order_after, Lane};
use super::memory::CudaBuffer;
use super::{driver_err, driver_error};
use crate::config::debug_log;
use crate::graph::{FftKind, FftSpec};
use crate::stats::bump;
use crate::{Error, Result};
use cudarc::driver::{result as drv, sys as drv_sys, CudaStream};
use lazyfuse_codegen::{DType, Kernel, LaunchArgs};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Where an operand of a graph step lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    /// A buffer given anew at every run (inputs and results): index into `ext`.
    Ext(usize),
    /// A buffer given at every run that is the same at every run (held by the caller for
    /// the plan's lifetime): index into `ext`.
    Fixed(usize),
    /// The graph's own intermediate buffer number `i` (see [`GraphPlan::new`]).
    Arena(usize),
}

/// One step of a plan run through [`GraphPlan::run`].
pub(crate) enum GraphStep<'a> {
    /// A fused kernel.
    Kernel {
        kernel: &'a Arc<Kernel>,
        inputs: SmallVec<[Slot; 8]>,
        outputs: SmallVec<[Slot; 4]>,
        args: &'a LaunchArgs,
    },
    /// An FFT (cuFFT).
    Fft {
        spec: &'a FftSpec,
        src: Slot,
        dst: Slot,
        in_shape: &'a [usize],
        out_shape: &'a [usize],
        /// Nothing reads `src` after this step (an intermediate of the arena): the
        /// transform may overwrite it.
        clobber: bool,
    },
    /// A C2C transform run as generated passes (see [`FusedStep`]).
    FftFused(Box<FusedStep<'a>>),
    /// A scatter-add (`Op::ScatterAdd`) of `values` at `indices` into `dst` of shape
    /// `out` (`[pre, n, post]`): a zeroing and an adding kernel node.
    Scatter {
        values: Slot,
        indices: Slot,
        dst: Slot,
        out: [usize; 3],
    },
}

/// A C2C transform run as generated passes, its input computed in the first pass by
/// `prologue`, with `round` its consumer and its transform back in the same passes (and
/// on, for each round trip of a chain), and with `epilogue` the (last) transform's
/// consumer in the last pass: every pass is a kernel node, so each replay points it at
/// that run's buffers.
pub(crate) struct FusedStep<'a> {
    pub(crate) spec: &'a FftSpec,
    pub(crate) prologue: &'a Arc<Kernel>,
    pub(crate) inputs: SmallVec<[Slot; 8]>,
    pub(crate) args: &'a LaunchArgs,
    pub(crate) round: Vec<FusedMid<'a>>,
    pub(crate) epilogue: Option<FusedEpi<'a>>,
    /// The step's result: the (last) transform, or the epilogue's output.
    pub(crate) dst: Slot,
    /// The transform's input shape (the prologue's launch shape).
    pub(crate) shape: &'a [usize],
    /// Its (last transform's) output shape: the input's for C2C, the other end's of an R2C
    /// or C2R transform.
    pub(crate) out_shape: &'a [usize],
}

/// The kernel between the transforms of a round trip in a [`FusedStep`], and the second
/// transform.
pub(crate) struct FusedMid<'a> {
    pub(crate) kernel: &'a Arc<Kernel>,
    /// Its inputs; `None` at `value_input`, the first transform.
    pub(crate) inputs: SmallVec<[Option<Slot>; 8]>,
    pub(crate) value_input: u32,
    pub(crate) args: &'a LaunchArgs,
    pub(crate) spec: &'a FftSpec,
}

/// The buffers of one run of a [`FusedStep`] (`GraphPlan::fused_buffers`).
struct FusedBufs<'b> {
    /// The prologue's inputs.
    ins: SmallVec<[&'b CudaBuffer; 8]>,
    /// The transform's output.
    out: &'b CudaBuffer,
    /// Each middle kernel's inputs (`None` for the transform before it).
    mid_ins: Vec<SmallVec<[Option<&'b CudaBuffer>; 8]>>,
    /// The epilogue's inputs (`None` for the transform) and its output.
    epi_ins: SmallVec<[Option<&'b CudaBuffer>; 8]>,
    epi_out: Option<&'b CudaBuffer>,
}

/// The consumer fused into the last pass of a [`FusedStep`].
pub(crate) struct FusedEpi<'a> {
    pub(crate) kernel: &'a Arc<Kernel>,
    /// Its inputs; `None` at `value_input`, the transform.
    pub(crate) inputs: SmallVec<[Option<Slot>; 8]>,
    pub(crate) value_input: u32,
    pub(crate) shift_param: u32,
    pub(crate) args: &'a LaunchArgs,
}

/// The buffers one fused transform step of a plan keeps while the plan has a recording:
/// its passes' work buffer and, when an epilogue stores the result, the transform's own
/// output (which then only holds the passes before the last), as indices into
/// `GraphPlan::fused_bufs` (a step that follows another through the data takes over its
/// buffers, see `GraphPlan::prepare_fused`).
#[derive(Default)]
struct FusedScratch {
    work: Option<usize>,
    out: Option<usize>,
    /// The passes' kernels, grids and tables, made at the step's first run and kept while
    /// the plan keeps its buffers: a replay then only packs each pass's arguments.
    passes: std::sync::OnceLock<super::fft::PassSet>,
}

/// Keeps the buffer in `slot` when it holds `len` values of `dtype`, else puts a fresh one
/// of `dev` there (the scratch of a plan, made once for its shapes).
fn keep_or_alloc(
    dev: &CudaDevice,
    slot: &mut Option<CudaBuffer>,
    dtype: DType,
    len: usize,
) -> Result<()> {
    if !slot
        .as_ref()
        .is_some_and(|b| b.len() == len && b.dtype() == dtype)
    {
        *slot = Some(dev.alloc(dev.arc()?, dtype, len)?);
    }
    Ok(())
}

/// A recorded kernel node and what its arguments were last set to.
struct KernelNode {
    node: drv_sys::CUgraphNode,
    kernel: Arc<LoadedKernel>,
    grid: (u32, u32),
    block: u32,
    blob: Vec<u8>,
}

/// One launch of a kernel step: the loaded kernel, its checked argument blob, its grid
/// (x, y) and block size, and for a scan its tile states, zeroed before the launch.
struct Launch {
    kernel: Arc<LoadedKernel>,
    blob: Vec<u8>,
    grid: (u32, u32),
    block: u32,
    zero: Option<(u64, usize)>,
}

/// The partials of one split reduction step of a plan (see `CudaDevice::reduce_geometry`),
/// or a scan's values (`values`, two per tile) and tile states (`positions`, `tiles + 1`
/// I64, see `CudaDevice::scan_geometry`): kept while the plan has a recording, whose
/// kernel node holds their addresses (and whose memset node zeroes a scan's states).
struct ReduceScratch {
    values: Option<CudaBuffer>,
    positions: Option<CudaBuffer>,
}

/// What one step of a recording touches: the addresses of the buffers it reads and of
/// those it writes (its outputs, its private scratch, and the shared resources below).
#[derive(Default)]
struct Access {
    reads: SmallVec<[u64; 8]>,
    writes: SmallVec<[u64; 8]>,
}

/// Stands for the device's cuFFT work area among the written addresses of a cuFFT step
/// (no buffer lives at address 1), so that cuFFT steps follow each other.
const CUFFT_WORK_AREA: u64 = 1;

/// The nodes a step's work ends in (the capture's dependency set after it).
type Ends = SmallVec<[drv_sys::CUgraphNode; 2]>;

/// The uses of one buffer so far in a recording: the end nodes of its last writer and of
/// every step that read it since.
#[derive(Default)]
struct Uses {
    writer: Ends,
    readers: Vec<drv_sys::CUgraphNode>,
}

/// Read-after-write, write-after-read and write-after-write tracking over the steps of a
/// recording, by buffer address: what a step's nodes must depend on. Linear in the number
/// of accesses (each reader is waited for by at most the next writer).
#[derive(Default)]
struct Hazards {
    bufs: HashMap<u64, Uses>,
}

impl Hazards {
    /// The end nodes of the earlier steps `a` must follow, without repeats.
    fn deps(&self, a: &Access) -> Vec<drv_sys::CUgraphNode> {
        let mut d = Vec::new();
        for r in &a.reads {
            if let Some(u) = self.bufs.get(r) {
                d.extend_from_slice(&u.writer);
            }
        }
        for w in &a.writes {
            if let Some(u) = self.bufs.get(w) {
                d.extend_from_slice(&u.writer);
                d.extend_from_slice(&u.readers);
            }
        }
        d.sort_unstable_by_key(|n| *n as usize);
        d.dedup();
        d
    }

    /// Notes that the step with access `a` ended in `ends`.
    fn after(&mut self, a: &Access, ends: &Ends) {
        for r in &a.reads {
            if !a.writes.contains(r) {
                self.bufs
                    .entry(*r)
                    .or_default()
                    .readers
                    .extend_from_slice(ends);
            }
        }
        for w in &a.writes {
            let u = self.bufs.entry(*w).or_default();
            u.writer = ends.clone();
            u.readers.clear();
        }
    }
}

/// An instantiated graph and its kernel nodes, in step order.
struct Recorded {
    graph: drv_sys::CUgraph,
    exec: drv_sys::CUgraphExec,
    kernels: Vec<KernelNode>,
    /// The cuFFT plans the graph's FFT nodes run (the plan cache may evict them).
    pins: Vec<super::fft::PinnedPlan>,
    /// The device, synchronized before pinned plans are released.
    dev: &'static CudaDevice,
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if !self.pins.is_empty() {
            // the pinned cuFFT plans (dropped after this) may serve a launch in flight
            let _ = self.dev.synchronize();
        }
        // SAFETY: both handles came from a successful capture and instantiation and are
        // destroyed only here; an exec still running is freed by the driver on completion.
        unsafe {
            let _ = drv::graph::exec_destroy(self.exec);
            let _ = drv::graph::destroy(self.graph);
        }
    }
}

// SAFETY: the raw graph handles are only used under the owner's lock (`GraphPlan` is used
// through `&mut`), and the driver's graph objects are not tied to a thread.
unsafe impl Send for Recorded {}

/// Most recordings one plan keeps: one per set of addresses its FFTs run on (a plan whose
/// last FFT writes a result alternates between result buffers it owns, see
/// `exec::replay`).
const MAX_RECORDINGS: usize = 3;

/// The addresses a recording's FFT nodes use: every FFT's source and destination.
type FftKey = SmallVec<[u64; 8]>;

/// The graph state of one repeated plan (owned by a traced `Function`).
pub(crate) struct GraphPlan {
    dev: &'static CudaDevice,
    arena_spec: Vec<(DType, usize)>,
    arena: Vec<CudaBuffer>,
    /// Per reduction step, in step order: its partials (none when it runs in one chunk).
    scratch: Vec<ReduceScratch>,
    /// Zeroed completion counters shared by the plan's split reductions (they run in
    /// order and leave the counters zeroed), one per row block of the widest.
    counters: Option<CudaBuffer>,
    /// Per fused transform step, in step order.
    fused: Vec<FusedScratch>,
    /// The fused transform steps' work buffers and outputs (`FusedScratch`).
    fused_bufs: Vec<CudaBuffer>,
    /// `scratch`, `counters` and `fused` are made for these steps (their sizes follow from
    /// the plan's shapes alone, so once is enough while they are kept).
    prepared: bool,
    /// The recordings, by the FFT addresses they were recorded with.
    recorded: Vec<(FftKey, Recorded)>,
    /// Graphs are off for this plan (ineligible, disabled, or a failure).
    off: bool,
    runs: u64,
    /// The stream of the last run: a run on another stream first waits for it (the arena
    /// and the recorded FFT addresses are reused run after run).
    last_lane: Option<Arc<Lane>>,
}

impl CudaDevice {
    /// The default memory pool's `(used, reserved)` bytes: memory handed out by
    /// stream-ordered allocations now, and memory the pool holds from the driver.
    pub fn pool_usage(&self) -> Result<(u64, u64)> {
        // SAFETY: `cu_device` is the device of this live context.
        let pool = unsafe { drv::device::get_default_mem_pool(self.ctx.cu_device()) }
            .map_err(driver_err("cuDeviceGetDefaultMemPool"))?;
        let get = |attr: drv_sys::CUmemPool_attribute| -> Result<u64> {
            let mut v: u64 = 0;
            // SAFETY: both attributes are cuuint64_t values, which `v` is.
            unsafe { drv::mem_pool::get_attribute(pool, attr, &mut v as *mut u64 as *mut c_void) }
                .map_err(driver_err("cuMemPoolGetAttribute"))?;
            Ok(v)
        };
        Ok((
            get(drv_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            get(drv_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
        ))
    }

    /// A fresh uninitialized buffer of `len` elements of `dtype` (for results of graph
    /// runs, which the graph's kernels write completely).
    pub(crate) fn alloc_buffer(&self, dtype: DType, len: usize) -> Result<CudaBuffer> {
        let me = self.arc()?;
        self.alloc(me, dtype, len)
    }
}

/// `LAZYFUSE_GRAPHS`: `0` turns CUDA graphs off, `1` (the default) on.
pub(crate) fn graphs_enabled() -> bool {
    crate::config::CONFIG.graphs()
}

impl GraphPlan {
    /// The graph state of a plan over `steps` on `dev` with intermediates `arena` (dtype,
    /// length each). Graphs stay off when disabled or when an FFT reads or writes a buffer
    /// that changes between runs.
    pub(crate) fn new(
        dev: &'static CudaDevice,
        steps: &[GraphStep<'_>],
        arena: Vec<(DType, usize)>,
    ) -> GraphPlan {
        let movable_fft = steps.iter().any(|s| {
            matches!(s, GraphStep::Fft { src, dst, .. }
                if matches!(src, Slot::Ext(_)) || !matches!(dst, Slot::Arena(_)))
        });
        let off = !graphs_enabled() || movable_fft;
        if movable_fft && graphs_enabled() {
            debug_log!(
                1,
                "graph: plan runs plainly (an FFT reads an input or writes a result)"
            );
            bump::graph_fallbacks(1);
        }
        GraphPlan {
            dev,
            arena_spec: arena,
            arena: Vec::new(),
            scratch: Vec::new(),
            counters: None,
            fused: Vec::new(),
            fused_bufs: Vec::new(),
            prepared: false,
            recorded: Vec::new(),
            off,
            runs: 0,
            last_lane: None,
        }
    }

    /// Whether graphs are off for this plan.
    pub(crate) fn is_off(&self) -> bool {
        self.off
    }

    /// Whether runs replay a recorded graph.
    pub(crate) fn is_recorded(&self) -> bool {
        !self.recorded.is_empty()
    }

    /// Runs `steps` with `ext` as the buffers of `Slot::Ext`/`Slot::Fixed` operands (the
    /// results among them already allocated): plainly on the first run, recorded on the
    /// second and replayed from then on. FFT nodes keep the addresses they were recorded
    /// with, so each set of FFT addresses has its own recording (up to
    /// [`MAX_RECORDINGS`]; runs on further sets go plainly). Asynchronous like every
    /// launch.
    pub(crate) fn run(&mut self, steps: &[GraphStep<'_>], ext: &[&CudaBuffer]) -> Result<()> {
        // this thread's stream, after the previous run's and the writers of the inputs
        let lane = self.dev.lane()?;
        order_after(&mut self.last_lane, &lane)?;
        let mut written: SmallVec<[bool; 8]> = SmallVec::from_elem(false, ext.len());
        for s in steps {
            let mut mark = |slot: &Slot| {
                if let Slot::Ext(i) | Slot::Fixed(i) = *slot {
                    if let Some(w) = written.get_mut(i) {
                        *w = true;
                    }
                }
            };
            match s {
                GraphStep::Kernel { outputs, .. } => outputs.iter().for_each(&mut mark),
                GraphStep::Fft { dst, .. } | GraphStep::Scatter { dst, .. } => mark(dst),
                GraphStep::FftFused(f) => mark(&f.dst),
            }
        }
        for (b, w) in ext.iter().zip(&written) {
            b.use_on(&lane, *w)?;
        }
        if self.arena.len() != self.arena_spec.len() {
            let me = self.dev.arc()?;
            self.arena = self
                .arena_spec
                .iter()
                .map(|&(d, n)| self.dev.alloc(me, d, n))
                .collect::<Result<_>>()?;
        }
        if !self.prepared {
            self.prepare_reductions(steps, ext)?;
            self.prepare_fused(steps)?;
            self.prepared = true;
        }
        self.runs += 1;
        let key = self.fft_key(steps, ext)?;
        let mut at = self.recorded.iter().position(|(k, _)| *k == key);
        if !self.off && at.is_none() && self.runs >= 2 && self.recorded.len() < MAX_RECORDINGS {
            match self.record(steps, ext) {
                Ok(r) => {
                    bump::graph_captures(1);
                    debug_log!(
                        2,
                        "graph: recorded {} kernel nodes of ours; {}",
                        r.kernels.len(),
                        node_census(r.graph)
                    );
                    self.recorded.push((key, r));
                    at = Some(self.recorded.len() - 1);
                }
                Err(e) => self.give_up(&e),
            }
        }
        let mut result = None;
        if let Some(i) = at.filter(|_| !self.off) {
            match self.replay(i, steps, ext) {
                Ok(()) => result = Some(Ok(())),
                Err(e) => self.give_up(&e),
            }
        }
        let result = result.unwrap_or_else(|| self.plain(steps, ext, None));
        if self.recorded.is_empty() {
            // Only a recorded graph needs its intermediates to stay put: otherwise they go
            // back to the pool (after the queued work), so a plan run once holds nothing.
            self.arena.clear();
            self.scratch.clear();
            self.counters = None;
            self.fused.clear();
            self.fused_bufs.clear();
            self.prepared = false;
        }
        result
    }

    /// The zeroing and adding launches of scatter step `s` over these buffers.
    fn scatter_launches(
        &self,
        s: &GraphStep<'_>,
        ext: &[&CudaBuffer],
    ) -> Result<Vec<super::fft::PassLaunch>> {
        let GraphStep::Scatter {
            values,
            indices,
            dst,
            out: [pre, n, post],
        } = *s
        else {
            return Err(Error::internal("graph", "not a scatter step"));
        };
        let (v, ix, o) = (
            self.buf(values, ext)?,
            self.buf(indices, ext)?,
            self.buf(dst, ext)?,
        );
        let d = crate::runtime::scatter::Dims {
            pre,
            k: v.len().checked_div(pre * post).unwrap_or(0),
            post,
            n,
        };
        self.dev.scatter_launches(d, v, ix, o)
    }

    /// Makes the work buffers and transform outputs of the plan's fused transforms. A
    /// fused step that follows an earlier one through the data (the latest fused step its
    /// inputs come from, through any kernels) takes over that step's buffers where they
    /// have its sizes, once: a body of many simulation steps then holds one step's, and a
    /// recording adds no edge (the data orders the two steps already).
    fn prepare_fused(&mut self, steps: &[GraphStep<'_>]) -> Result<()> {
        // per slot, the latest fused step (index among them) its value comes from
        let mut from: HashMap<Slot, usize> = HashMap::new();
        let latest = |from: &HashMap<Slot, usize>, slots: &mut dyn Iterator<Item = Slot>| {
            slots.filter_map(|s| from.get(&s).copied()).max()
        };
        // per fused step: its buffers' (dtype, length) and whether a later one took them
        let mut keys: Vec<[Option<(DType, usize)>; 2]> = Vec::new();
        let mut taken: Vec<bool> = Vec::new();
        let mut want: Vec<(DType, usize)> = Vec::new();
        let mut owner: Vec<[Option<usize>; 2]> = Vec::new();
        for s in steps {
            let f = match s {
                GraphStep::FftFused(f) => f,
                GraphStep::Kernel {
                    inputs, outputs, ..
                } => {
                    let dep = latest(&from, &mut inputs.iter().copied());
                    for o in outputs {
                        match dep {
                            Some(d) => from.insert(*o, d),
                            None => from.remove(o),
                        };
                    }
                    continue;
                }
                GraphStep::Fft { dst, .. } | GraphStep::Scatter { dst, .. } => {
                    // their outputs come from no fused step (conservative: a later step
                    // then takes over nothing through them)
                    from.remove(dst);
                    continue;
                }
            };
            let FusedStep {
                spec,
                prologue,
                epilogue,
                round,
                shape,
                out_shape,
                ..
            } = &**f;
            let in_dtype = fused_dtype(prologue)?;
            let dtype = super::fused_dtypes(spec, in_dtype).0;
            let last = round.last().map_or(*spec, |r| r.spec);
            let out_dtype = super::fused_dtypes(last, in_dtype).1;
            let n: usize = out_shape.iter().product();
            let back: SmallVec<[&FftSpec; 8]> = round.iter().map(|r| r.spec).collect();
            let work = spec
                .passes_shape(shape, out_shape)
                .and_then(|t| CudaDevice::fused_work_len(spec, &back, t, dtype))
                .unwrap_or(0);
            let key = [
                (work > 0).then_some((dtype, work)),
                epilogue.is_some().then_some((out_dtype, n)),
            ];
            let mut ins = f
                .inputs
                .iter()
                .copied()
                .chain(
                    f.epilogue
                        .iter()
                        .flat_map(|e| e.inputs.iter().flatten().copied()),
                )
                .chain(
                    f.round
                        .iter()
                        .flat_map(|r| r.inputs.iter().flatten().copied()),
                );
            let dep = latest(&from, &mut ins);
            let fi = keys.len();
            let mut own = [None, None];
            if let Some(d) = dep.filter(|&d| !taken[d] && keys[d] == key) {
                taken[d] = true;
                own = owner[d];
            } else {
                for (k, w) in key.iter().enumerate() {
                    if let Some(w) = w {
                        own[k] = Some(want.len());
                        want.push(*w);
                    }
                }
            }
            keys.push(key);
            taken.push(false);
            owner.push(own);
            from.insert(f.dst, fi);
        }
        // the buffers: kept from the last preparation where their sizes match
        let mut old = std::mem::take(&mut self.fused_bufs).into_iter();
        for &(dtype, len) in &want {
            let mut slot = old.next();
            keep_or_alloc(self.dev, &mut slot, dtype, len)?;
            self.fused_bufs.push(slot.expect("kept or allocated"));
        }
        // each step keeps the passes it made (they hold no buffer)
        let mut passes = std::mem::take(&mut self.fused)
            .into_iter()
            .map(|sc| sc.passes);
        self.fused = owner
            .iter()
            .map(|o| FusedScratch {
                work: o[0],
                out: o[1],
                passes: passes.next().unwrap_or_default(),
            })
            .collect();
        Ok(())
    }

    /// The buffers of fused transform step `s` (the `fi`-th of the plan).
    fn fused_buffers<'b>(
        &'b self,
        s: &FusedStep<'_>,
        ext: &[&'b CudaBuffer],
        fi: usize,
    ) -> Result<FusedBufs<'b>> {
        let FusedStep {
            inputs,
            epilogue,
            round,
            dst,
            ..
        } = s;
        let ins = inputs
            .iter()
            .map(|&s| self.buf(s, ext))
            .collect::<Result<_>>()?;
        let but_value = |v: &[Option<Slot>]| -> Result<SmallVec<[Option<&'b CudaBuffer>; 8]>> {
            v.iter()
                .map(|s| s.map(|s| self.buf(s, ext)).transpose())
                .collect()
        };
        let mid_ins = round
            .iter()
            .map(|r| but_value(&r.inputs))
            .collect::<Result<Vec<_>>>()?;
        let dst = self.buf(*dst, ext)?;
        let Some(e) = epilogue else {
            return Ok(FusedBufs {
                ins,
                out: dst,
                mid_ins,
                epi_ins: SmallVec::new(),
                epi_out: None,
            });
        };
        let out = self
            .fused
            .get(fi)
            .and_then(|sc| sc.out)
            .and_then(|i| self.fused_bufs.get(i))
            .ok_or_else(|| Error::internal("graph", "fused transform without its output"))?;
        Ok(FusedBufs {
            ins,
            out,
            mid_ins,
            epi_ins: but_value(&e.inputs)?,
            epi_out: Some(dst),
        })
    }

    /// The pass launches of fused transform step `s` (the `fi`-th of the plan) over these
    /// buffers; `None` when the generated passes cannot run it now.
    fn fused_launches(
        &self,
        s: &FusedStep<'_>,
        ext: &[&CudaBuffer],
        fi: usize,
    ) -> Result<Option<Vec<super::fft::PassLaunch>>> {
        let FusedStep {
            spec,
            prologue,
            args,
            epilogue,
            round,
            shape,
            out_shape,
            ..
        } = s;
        let b = self.fused_buffers(s, ext, fi)?;
        let pro = super::Prologue {
            kernel: prologue,
            inputs: &b.ins,
            args,
        };
        let epi = match (epilogue, b.epi_out) {
            (Some(e), Some(o)) => Some(super::Epilogue {
                kernel: e.kernel,
                inputs: &b.epi_ins,
                value_input: e.value_input,
                shift_param: e.shift_param,
                args: e.args,
                out: o,
            }),
            _ => None,
        };
        let mids: Vec<super::Mid> = round
            .iter()
            .zip(&b.mid_ins)
            .map(|(r, ins)| super::Mid {
                kernel: r.kernel,
                inputs: ins,
                value_input: r.value_input,
                args: r.args,
                spec: r.spec,
            })
            .collect();
        let sc = self
            .fused
            .get(fi)
            .ok_or_else(|| Error::internal("graph", "fused transform without its scratch"))?;
        let set = match sc.passes.get() {
            Some(set) => set,
            None => {
                let (dtype, _) = super::fused_dtypes(spec, fused_dtype(prologue)?);
                let Some(shape) = spec.passes_shape(shape, out_shape) else {
                    return Ok(None);
                };
                let made =
                    self.dev
                        .fused_passes(spec, &pro, &mids, epi.as_ref(), b.out, shape, dtype)?;
                let Some(made) = made else { return Ok(None) };
                sc.passes.get_or_init(|| made)
            }
        };
        let work = sc.work.and_then(|i| self.fused_bufs.get(i));
        self.dev
            .fused_launches(set, &pro, &mids, epi.as_ref(), b.out, work)
            .map(Some)
    }

    /// Fused transform step `s` (the `fi`-th) as the kernels and the transforms apart, for
    /// a run outside a recording when the generated passes cannot run it: the prologue
    /// into a fresh buffer, the transform into the step's output, each round trip's kernel
    /// into a fresh buffer and its transform into the output, the epilogue from it.
    fn fused_apart(&self, s: &FusedStep<'_>, ext: &[&CudaBuffer], fi: usize) -> Result<()> {
        let FusedStep {
            spec,
            prologue,
            args,
            epilogue,
            round,
            shape,
            out_shape,
            ..
        } = s;
        let b = self.fused_buffers(s, ext, fi)?;
        let out = b.out;
        let input = self
            .dev
            .run_kernel_shared(prologue, &b.ins, args)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::internal("graph", "prologue without output"))?;
        // a real round trip's first transform writes the half spectrum (the middle
        // kernel's launch shape) into a fresh buffer; C2C transforms all write the output
        let first = match round.first() {
            Some(r) if spec.kind != FftKind::C2C => {
                Some(self.dev.fft(spec, &input, shape, &r.args.shape)?)
            }
            _ => {
                self.dev
                    .fft_into(spec, &input, out, shape, out_shape, true)?;
                None
            }
        };
        let before = first.as_ref().unwrap_or(out);
        for (r, mid_ins) in round.iter().zip(&b.mid_ins) {
            let ins: SmallVec<[&CudaBuffer; 8]> =
                mid_ins.iter().map(|b| b.unwrap_or(before)).collect();
            let m = self
                .dev
                .run_kernel_shared(r.kernel, &ins, r.args)?
                .into_iter()
                .next()
                .ok_or_else(|| Error::internal("graph", "middle kernel without output"))?;
            self.dev
                .fft_into(r.spec, &m, out, &r.args.shape, out_shape, true)?;
        }
        let (Some(e), Some(dst)) = (epilogue, b.epi_out) else {
            return Ok(());
        };
        let ins: SmallVec<[&CudaBuffer; 8]> = b.epi_ins.iter().map(|b| b.unwrap_or(out)).collect();
        let Some((p, opts)) = self.dev.check_and_load(e.kernel, &ins, e.args, None)? else {
            return Ok(());
        };
        let in_ptrs: SmallVec<[u64; 8]> = ins.iter().map(|b| b.device_ptr()).collect();
        let blob = p.pack(
            e.kernel,
            &opts,
            &in_ptrs,
            &[dst.device_ptr()],
            e.args,
            &Default::default(),
        )?;
        self.dev.launch(&p.loaded, blob, e.args.len())
    }

    /// Makes the partials and counters of the plan's split reductions and the workspaces
    /// of its scans (loading each kernel to learn its split).
    fn prepare_reductions(&mut self, steps: &[GraphStep<'_>], ext: &[&CudaBuffer]) -> Result<()> {
        let mut ri = 0;
        let mut widest = 0u32;
        for s in steps {
            let GraphStep::Kernel {
                kernel,
                inputs,
                args,
                ..
            } = s
            else {
                continue;
            };
            let Some(red) = kernel.reduce else { continue };
            let ins: Vec<&CudaBuffer> = inputs
                .iter()
                .map(|&s| self.buf(s, ext))
                .collect::<Result<_>>()?;
            let loaded = self.dev.check_and_load(kernel, &ins, args, None)?;
            let vd = kernel.values[red.value as usize].dtype;
            if self.scratch.len() <= ri {
                self.scratch.push(ReduceScratch {
                    values: None,
                    positions: None,
                });
            }
            if red.layout == lazyfuse_codegen::ReduceLayout::Scan {
                let tiles = loaded
                    .as_ref()
                    .map_or(0, |(p, _)| self.dev.scan_geometry(p, args).0);
                let sc = &mut self.scratch[ri];
                if tiles == 0 {
                    *sc = ReduceScratch {
                        values: None,
                        positions: None,
                    };
                } else {
                    keep_or_alloc(self.dev, &mut sc.values, vd, 2 * tiles)?;
                    keep_or_alloc(self.dev, &mut sc.positions, DType::I64, tiles + 1)?;
                }
                ri += 1;
                continue;
            }
            let geometry = match loaded {
                Some((p, _)) => self.dev.reduce_geometry(&p, kernel, red, args),
                None => (1, 1, 0),
            };
            let (_, chunks, gx) = geometry;
            let n = kernel.out_len(args) * chunks as usize;
            let sc = &mut self.scratch[ri];
            if chunks > 1 {
                widest = widest.max(gx);
                keep_or_alloc(self.dev, &mut sc.values, vd, n)?;
                if red.op.is_arg() {
                    keep_or_alloc(self.dev, &mut sc.positions, DType::I64, n)?;
                }
            } else {
                *sc = ReduceScratch {
                    values: None,
                    positions: None,
                };
            }
            ri += 1;
        }
        self.scratch.truncate(ri);
        if widest > 0
            && self
                .counters
                .as_ref()
                .is_none_or(|c| c.len() < widest as usize)
        {
            self.counters = Some(self.dev.alloc_zeroed(DType::U32, widest as usize)?);
        }
        Ok(())
    }

    fn give_up(&mut self, e: &Error) {
        debug_log!(1, "graph: falling back to plain launches: {e}");
        // Frees queued on an aborted capture store their errors on the context, which
        // cudarc would report at the next unrelated call (`bind_to_thread`): clear them.
        if let Err(stale) = self.dev.ctx.check_err() {
            debug_log!(1, "graph: cleared a stored driver error: {stale:?}");
        }
        bump::graph_fallbacks(1);
        self.recorded.clear();
        self.off = true;
    }

    /// The addresses the FFT steps run on with these buffers.
    fn fft_key(&self, steps: &[GraphStep<'_>], ext: &[&CudaBuffer]) -> Result<FftKey> {
        let mut key = FftKey::new();
        for s in steps {
            if let GraphStep::Fft { src, dst, .. } = s {
                key.push(self.ptr(*src, ext)?);
                key.push(self.ptr(*dst, ext)?);
            }
        }
        Ok(key)
    }

    fn ptr(&self, s: Slot, ext: &[&CudaBuffer]) -> Result<u64> {
        self.buf(s, ext).map(|b| b.device_ptr())
    }

    fn buf<'b>(&'b self, s: Slot, ext: &[&'b CudaBuffer]) -> Result<&'b CudaBuffer> {
        match s {
            Slot::Ext(i) | Slot::Fixed(i) => ext.get(i).copied(),
            Slot::Arena(i) => self.arena.get(i),
        }
        .ok_or_else(|| Error::internal("graph", format!("no buffer for {s:?}")))
    }

    /// The launch of kernel step `kernel` over these buffers (`None`: it computes nothing);
    /// a reduction (the `ri`-th of the plan) with its split, partials and counters
    /// (`prepare_reductions`).
    fn launch_of(
        &self,
        kernel: &Arc<Kernel>,
        inputs: &[Slot],
        outputs: &[Slot],
        args: &LaunchArgs,
        ext: &[&CudaBuffer],
        ri: usize,
    ) -> Result<Option<Launch>> {
        let ins: Vec<&CudaBuffer> = inputs
            .iter()
            .map(|&s| self.buf(s, ext))
            .collect::<Result<_>>()?;
        let n = kernel.out_len(args);
        for &o in outputs {
            let b = self.buf(o, ext)?;
            if b.len() != n {
                return Err(Error::internal("graph", "output of the wrong length"));
            }
        }
        let Some((p, opts)) = self.dev.check_and_load(kernel, &ins, args, None)? else {
            return Ok(None);
        };
        let in_ptrs: SmallVec<[u64; 8]> = ins.iter().map(|b| b.device_ptr()).collect();
        let out_ptrs: SmallVec<[u64; 4]> = outputs
            .iter()
            .map(|&s| self.ptr(s, ext))
            .collect::<Result<_>>()?;
        let Some(red) = kernel.reduce else {
            let blob = p.pack(
                kernel,
                &opts,
                &in_ptrs,
                &out_ptrs,
                args,
                &Default::default(),
            )?;
            let (blob, grid, block) = self.dev.launch_shape(&p.loaded, blob, args.len())?;
            return Ok(Some(Launch {
                kernel: p.loaded,
                blob,
                grid: (grid, 1),
                block,
                zero: None,
            }));
        };
        if red.layout == lazyfuse_codegen::ReduceLayout::Scan {
            let (tiles, grid) = self.dev.scan_geometry(&p, args);
            let sc = self.scratch.get(ri);
            let (Some(values), Some(states)) = (
                sc.and_then(|s| s.values.as_ref()),
                sc.and_then(|s| s.positions.as_ref()),
            ) else {
                // no tiles: nothing to compute
                return Ok(None);
            };
            let launch = lazyfuse_codegen::cuda::ReduceLaunch {
                threads_per_output: 1,
                chunks: 1,
                workspace: values.device_ptr(),
                workspace_idx: states.device_ptr(),
                counters: 0,
            };
            let blob = p.pack(kernel, &opts, &in_ptrs, &out_ptrs, args, &launch)?;
            let blob = super::device::checked_blob(&p.loaded, blob)?;
            let block = p.loaded.rendered.block.max(1);
            return Ok(Some(Launch {
                kernel: p.loaded,
                blob,
                grid: (grid, 1),
                block,
                zero: Some((states.device_ptr(), (tiles + 1) * 8)),
            }));
        }
        let (tpr, chunks, gx) = self.dev.reduce_geometry(&p, kernel, red, args);
        let mut launch = lazyfuse_codegen::cuda::ReduceLaunch {
            threads_per_output: tpr,
            chunks,
            ..Default::default()
        };
        if chunks > 1 {
            let sc = self
                .scratch
                .get(ri)
                .ok_or_else(|| Error::internal("graph", "reduction without partials"))?;
            let ptr = |b: &Option<CudaBuffer>| b.as_ref().map_or(0, |b| b.device_ptr());
            launch.workspace = ptr(&sc.values);
            launch.workspace_idx = ptr(&sc.positions);
            launch.counters = ptr(&self.counters);
            if launch.workspace == 0 || launch.counters == 0 {
                return Err(Error::internal("graph", "reduction without partials"));
            }
        }
        let blob = p.pack(kernel, &opts, &in_ptrs, &out_ptrs, args, &launch)?;
        let blob = super::device::checked_blob(&p.loaded, blob)?;
        let block = p.loaded.rendered.block.max(1);
        Ok(Some(Launch {
            kernel: p.loaded,
            blob,
            grid: (gx, chunks),
            block,
            zero: None,
        }))
    }

    /// The buffers step `s` reads and writes (see [`Access`]); `ri` and `fi` count the
    /// reductions and fused transforms before it.
    fn access(
        &self,
        s: &GraphStep<'_>,
        ext: &[&CudaBuffer],
        ri: usize,
        fi: usize,
    ) -> Result<Access> {
        let mut a = Access::default();
        let some = |b: &Option<CudaBuffer>| b.as_ref().map(|b| b.device_ptr());
        match s {
            GraphStep::Kernel {
                kernel,
                inputs,
                outputs,
                ..
            } => {
                for &i in inputs {
                    a.reads.push(self.ptr(i, ext)?);
                }
                for &o in outputs {
                    a.writes.push(self.ptr(o, ext)?);
                }
                let split = kernel.reduce.and_then(|r| Some((r, self.scratch.get(ri)?)));
                if let Some((r, sc)) = split.filter(|(_, sc)| sc.values.is_some()) {
                    a.writes.extend(some(&sc.values));
                    a.writes.extend(some(&sc.positions));
                    // split reductions share the counters; a scan's states are its own
                    if r.layout != lazyfuse_codegen::ReduceLayout::Scan {
                        a.writes.extend(some(&self.counters));
                    }
                }
            }
            GraphStep::FftFused(f) => {
                for &i in &f.inputs {
                    a.reads.push(self.ptr(i, ext)?);
                }
                for i in f.epilogue.iter().flat_map(|e| e.inputs.iter().flatten()) {
                    a.reads.push(self.ptr(*i, ext)?);
                }
                for i in f.round.iter().flat_map(|r| r.inputs.iter().flatten()) {
                    a.reads.push(self.ptr(*i, ext)?);
                }
                a.writes.push(self.ptr(f.dst, ext)?);
                if let Some(sc) = self.fused.get(fi) {
                    let bufs = [sc.work, sc.out].into_iter().flatten();
                    a.writes.extend(
                        bufs.filter_map(|i| self.fused_bufs.get(i))
                            .map(|b| b.device_ptr()),
                    );
                }
            }
            GraphStep::Scatter {
                values,
                indices,
                dst,
                ..
            } => {
                a.reads.push(self.ptr(*values, ext)?);
                a.reads.push(self.ptr(*indices, ext)?);
                a.writes.push(self.ptr(*dst, ext)?);
            }
            GraphStep::Fft {
                src, dst, clobber, ..
            } => {
                a.reads.push(self.ptr(*src, ext)?);
                a.writes.push(self.ptr(*dst, ext)?);
                if *clobber {
                    a.writes.push(self.ptr(*src, ext)?);
                }
                a.writes.push(CUFFT_WORK_AREA);
            }
        }
        Ok(a)
    }

    /// Queues every step on the current work stream; while recording, collects the kernel
    /// nodes into `nodes` and makes each step's nodes depend only on the steps it must
    /// follow (see the module docs).
    fn plain(
        &self,
        steps: &[GraphStep<'_>],
        ext: &[&CudaBuffer],
        mut nodes: Option<&mut Vec<KernelNode>>,
    ) -> Result<()> {
        let counting = nodes.is_none();
        let mut hazards =
            (nodes.is_some() && !crate::config::CONFIG.graphs_chain()).then(Hazards::default);
        let (mut ri, mut fi) = (0, 0);
        for s in steps {
            let access = match &hazards {
                Some(h) => {
                    let a = self.access(s, ext, ri, fi)?;
                    set_capture_deps(&h.deps(&a))?;
                    Some(a)
                }
                None => None,
            };
            match s {
                GraphStep::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    args,
                } => {
                    let launch = self.launch_of(kernel, inputs, outputs, args, ext, ri)?;
                    ri += usize::from(kernel.reduce.is_some());
                    let Some(l) = launch else { continue };
                    if let Some((ptr, bytes)) = l.zero {
                        // SAFETY: `ptr` is the scan's tile states, `bytes` long, kept
                        // by this plan while it has a recording; the kernel launched next
                        // on the same stream is their only user.
                        unsafe { self.dev.memset_zero(ptr, bytes) }?;
                    }
                    self.dev
                        .launch_at(&l.kernel, l.blob.clone(), l.grid, l.block)?;
                    if counting {
                        bump::kernels_launched(1);
                    }
                    if let Some(nodes) = nodes.as_deref_mut() {
                        nodes.push(KernelNode {
                            node: last_captured_node()?,
                            kernel: l.kernel,
                            grid: l.grid,
                            block: l.block,
                            blob: l.blob,
                        });
                    }
                }
                GraphStep::Scatter { .. } => {
                    let _range = crate::nvtx::range(c"lazyfuse.scatter_add");
                    self.launch_all(self.scatter_launches(s, ext)?, nodes.as_deref_mut())?;
                    if counting {
                        bump::library_calls(1);
                    }
                }
                GraphStep::FftFused(f) => {
                    let launches = self.fused_launches(f, ext, fi)?;
                    let _range =
                        crate::nvtx::range_with(|| format!("lazyfuse.{} fused", f.spec.label()));
                    match (launches, nodes.as_deref_mut()) {
                        (Some(ls), nodes) => self.launch_all(ls, nodes)?,
                        (None, None) => self.fused_apart(f, ext, fi)?,
                        (None, Some(_)) => {
                            return Err(Error::internal(
                                "graph",
                                "the generated passes cannot record this transform now",
                            ))
                        }
                    }
                    fi += 1;
                    if counting {
                        bump::library_calls(1);
                    }
                }
                GraphStep::Fft {
                    spec,
                    src,
                    dst,
                    in_shape,
                    out_shape,
                    clobber,
                } => {
                    let (a, b) = (self.buf(*src, ext)?, self.buf(*dst, ext)?);
                    let _range = crate::nvtx::range_with(|| format!("lazyfuse.{}", spec.label()));
                    self.dev
                        .fft_into(spec, a, b, in_shape, out_shape, *clobber)?;
                    if counting {
                        bump::library_calls(1);
                    }
                }
            }
            if let (Some(h), Some(a)) = (&mut hazards, &access) {
                h.after(a, &capture_deps()?);
            }
        }
        Ok(())
    }

    /// Queues `launches` (a fused transform's passes, a scatter-add's kernels) in order;
    /// while recording, collects their kernel nodes into `nodes`.
    fn launch_all(
        &self,
        launches: Vec<super::fft::PassLaunch>,
        mut nodes: Option<&mut Vec<KernelNode>>,
    ) -> Result<()> {
        for l in launches {
            self.dev
                .launch_at(&l.kernel, l.blob.clone(), (l.grid, 1), l.block)?;
            if let Some(nodes) = nodes.as_deref_mut() {
                nodes.push(KernelNode {
                    node: last_captured_node()?,
                    kernel: l.kernel,
                    grid: (l.grid, 1),
                    block: l.block,
                    blob: l.blob,
                });
            }
        }
        Ok(())
    }

    /// Records the steps on a fresh capture stream and instantiates the graph.
    fn record(&self, steps: &[GraphStep<'_>], ext: &[&CudaBuffer]) -> Result<Recorded> {
        let _range = crate::nvtx::range(c"lazyfuse.graph capture");
        let dev = &self.dev;
        dev.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        let stream: Arc<CudaStream> = dev.ctx.new_stream().map_err(driver_err("cuStreamCreate"))?;
        stream
            .begin_capture(drv_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(driver_err("cuStreamBeginCapture"))?;
        struct Unset;
        impl Drop for Unset {
            fn drop(&mut self) {
                CAPTURE.with(|c| c.borrow_mut().take());
            }
        }
        let mut nodes = Vec::new();
        super::fft::begin_pins();
        let recorded = {
            CAPTURE.with(|c| *c.borrow_mut() = Some((dev.ordinal(), stream.clone())));
            let _unset = Unset;
            // cudarc panics when a symbol is missing: report it as an error instead
            catch_unwind(AssertUnwindSafe(|| {
                self.plain(steps, ext, Some(&mut nodes))
            }))
            .unwrap_or_else(|_| {
                Err(Error::Cuda {
                    op: "graph capture",
                    msg: "the driver bindings panicked".into(),
                })
            })
        };
        let pins = super::fft::take_pins();
        // Always end the capture, also after an error, so the stream is usable again.
        // SAFETY: the stream is capturing (begun above) on this thread.
        let ended = unsafe { drv::stream::end_capture(stream.cu_stream()) };
        let graph = match (recorded, ended) {
            (Ok(()), Ok(g)) if !g.is_null() => g,
            (r, ended) => {
                if let Ok(g) = ended {
                    if !g.is_null() {
                        // SAFETY: a graph the capture returned, not used elsewhere.
                        let _ = unsafe { drv::graph::destroy(g) };
                    }
                }
                return Err(match (r, ended) {
                    (Err(e), _) => e,
                    (Ok(()), Err(e)) => driver_error("cuStreamEndCapture", e),
                    (Ok(()), Ok(_)) => Error::Cuda {
                        op: "cuStreamEndCapture",
                        msg: "the capture produced no graph".into(),
                    },
                });
            }
        };
        // SAFETY: a valid graph from the capture above.
        let exec =
            match unsafe { drv::graph::instantiate(graph, drv_sys::CUgraphInstantiate_flags(0)) } {
                Ok(x) => x,
                Err(e) => {
                    // SAFETY: the graph is ours and not instantiated.
                    let _ = unsafe { drv::graph::destroy(graph) };
                    return Err(driver_error("cuGraphInstantiate", e));
                }
            };
        Ok(Recorded {
            graph,
            exec,
            kernels: nodes,
            pins,
            dev,
        })
    }

    /// Updates the kernel nodes of recording `at` for this run's buffers and launches its
    /// graph on the device stream.
    fn replay(&mut self, at: usize, steps: &[GraphStep<'_>], ext: &[&CudaBuffer]) -> Result<()> {
        let _range = crate::nvtx::range(c"lazyfuse.graph replay");
        let mut blobs = Vec::new();
        let (mut ri, mut fi) = (0, 0);
        // kernel steps' launches (a fused transform's passes count as its library call)
        let mut ours = 0;
        for s in steps {
            match s {
                GraphStep::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    args,
                } => {
                    let launch = self.launch_of(kernel, inputs, outputs, args, ext, ri)?;
                    ri += usize::from(kernel.reduce.is_some());
                    if let Some(l) = launch {
                        blobs.push(l.blob);
                        ours += 1;
                    }
                }
                GraphStep::FftFused(f) => {
                    let launches = self.fused_launches(f, ext, fi)?.ok_or_else(|| {
                        Error::internal("graph", "the generated passes cannot run now")
                    })?;
                    fi += 1;
                    blobs.extend(launches.into_iter().map(|l| l.blob));
                }
                GraphStep::Scatter { .. } => {
                    blobs.extend(self.scatter_launches(s, ext)?.into_iter().map(|l| l.blob));
                }
                GraphStep::Fft { .. } => {}
            }
        }
        let rec = self
            .recorded
            .get_mut(at)
            .map(|(_, r)| r)
            .ok_or_else(|| Error::internal("graph", "replay without a recording"))?;
        if blobs.len() != rec.kernels.len() {
            return Err(Error::internal("graph", "kernel count changed"));
        }
        self.dev
            .ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        for (kn, mut blob) in rec.kernels.iter_mut().zip(blobs) {
            if blob == kn.blob {
                continue;
            }
            let mut params = [blob.as_mut_ptr() as *mut c_void];
            let p = drv_sys::CUDA_KERNEL_NODE_PARAMS {
                func: kn.kernel.func.cu_function(),
                gridDimX: kn.grid.0,
                gridDimY: kn.grid.1,
                gridDimZ: 1,
                blockDimX: kn.block,
                blockDimY: 1,
                blockDimZ: 1,
                sharedMemBytes: 0,
                kernelParams: params.as_mut_ptr(),
                extra: std::ptr::null_mut(),
                kern: std::ptr::null_mut(),
                ctx: std::ptr::null_mut(),
            };
            // SAFETY: `node` is a kernel node of the graph `exec` was instantiated from,
            // recorded with this same function, grid and block; `params` points at one
            // argument blob of the size the function declares (checked by launch_shape),
            // which the driver copies during the call. Every address in it is a live
            // buffer of this context that outlives the launch below (ext buffers are held
            // by the caller until after it is queued and freed in stream order; the arena
            // lives as long as this plan).
            let r = catch_unwind(AssertUnwindSafe(|| unsafe {
                drv_sys::cuGraphExecKernelNodeSetParams_v2(rec.exec, kn.node, &p).result()
            }))
            .unwrap_or(Err(cudarc::driver::DriverError(
                drv_sys::cudaError_enum::CUDA_ERROR_NOT_FOUND,
            )));
            r.map_err(driver_err("cuGraphExecKernelNodeSetParams"))?;
            kn.blob = blob;
        }
        let lane = self.dev.lane()?;
        // the graph's FFT nodes use the device's cuFFT plans and work area, in stream order
        // with every other execution (held until the launch is queued)
        // SAFETY: a live instantiated graph of this context, launched on this thread's
        // stream (ordered after the work that wrote its inputs and after the plan's last run,
        // by `run`).
        let launch = || {
            crate::profile::calls::clock("cuGraphLaunch", || unsafe {
                drv::graph::launch(rec.exec, lane.stream.cu_stream())
            })
            .map_err(driver_err("cuGraphLaunch"))
        };
        // the FFT nodes' work areas, after their uses on other streams
        for pin in &rec.pins {
            pin.order_on(&lane)?;
        }
        launch()?;
        bump::graph_launches(1);
        bump::kernels_launched(ours);
        bump::library_calls(
            steps
                .iter()
                .filter(|s| {
                    matches!(
                        s,
                        GraphStep::Fft { .. } | GraphStep::FftFused(_) | GraphStep::Scatter { .. }
                    )
                })
                .count() as u64,
        );
        Ok(())
    }
}

/// The nodes of `graph` by type and its edges and roots, e.g. `7 nodes: 5 kernel, 1 mem
/// alloc, 1 mem free; 6 edges, 1 roots` (for `LAZYFUSE_DEBUG=2`: cuFFT's kernels and the
/// work areas' memory nodes show here; fewer edges than a chain's mean concurrent steps).
fn node_census(graph: drv_sys::CUgraph) -> String {
    use drv_sys::CUgraphNodeType as T;
    let census = catch_unwind(AssertUnwindSafe(|| -> Option<String> {
        let mut n = 0usize;
        // SAFETY: a live graph; a null node array asks for the count only.
        unsafe { drv_sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut n) }
            .result()
            .ok()?;
        let mut nodes = vec![std::ptr::null_mut(); n];
        // SAFETY: `nodes` has room for the `n` nodes the graph holds.
        unsafe { drv_sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut n) }
            .result()
            .ok()?;
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for &node in &nodes[..n] {
            let mut ty = T::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: `node` is a node of `graph`, which is alive.
            unsafe { drv_sys::cuGraphNodeGetType(node, &mut ty) }
                .result()
                .ok()?;
            let name = match ty {
                T::CU_GRAPH_NODE_TYPE_KERNEL => "kernel",
                T::CU_GRAPH_NODE_TYPE_MEMCPY => "memcpy",
                T::CU_GRAPH_NODE_TYPE_MEMSET => "memset",
                T::CU_GRAPH_NODE_TYPE_MEM_ALLOC => "mem alloc",
                T::CU_GRAPH_NODE_TYPE_MEM_FREE => "mem free",
                _ => "other",
            };
            match counts.iter_mut().find(|(k, _)| *k == name) {
                Some((_, c)) => *c += 1,
                None => counts.push((name, 1)),
            }
        }
        let parts: Vec<String> = counts.iter().map(|(k, c)| format!("{c} {k}")).collect();
        let (mut edges, mut roots) = (0usize, 0usize);
        // SAFETY: a live graph; null arrays ask for the counts only.
        unsafe {
            drv_sys::cuGraphGetEdges_v2(
                graph,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut edges,
            )
        }
        .result()
        .ok()?;
        // SAFETY: as above.
        unsafe { drv_sys::cuGraphGetRootNodes(graph, std::ptr::null_mut(), &mut roots) }
            .result()
            .ok()?;
        Some(format!(
            "{n} nodes: {}; {edges} edges, {roots} roots",
            parts.join(", ")
        ))
    }));
    census
        .ok()
        .flatten()
        .unwrap_or_else(|| "node census unavailable".into())
}

/// This thread's capture stream (while [`GraphPlan::record`] runs).
fn capture_stream() -> Result<drv_sys::CUstream> {
    CAPTURE
        .with(|c| c.borrow().as_ref().map(|(_, s)| s.cu_stream()))
        .ok_or_else(|| Error::internal("graph", "not capturing"))
}

/// The nodes the next node captured on this thread's capture stream will depend on: after
/// a step, the nodes its work ends in.
fn capture_deps() -> Result<Ends> {
    let stream = capture_stream()?;
    let mut status = drv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id: drv_sys::cuuint64_t = 0;
    let mut graph: drv_sys::CUgraph = std::ptr::null_mut();
    let mut deps: *const drv_sys::CUgraphNode = std::ptr::null();
    let mut n: usize = 0;
    // SAFETY: every out-pointer is a valid local; edge data is not requested (null), which
    // the driver allows when the edges carry default data (ours do: plain stream order).
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        drv_sys::cuStreamGetCaptureInfo_v3(
            stream,
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            std::ptr::null_mut(),
            &mut n,
        )
        .result()
    }))
    .unwrap_or(Err(cudarc::driver::DriverError(
        drv_sys::cudaError_enum::CUDA_ERROR_NOT_FOUND,
    )));
    r.map_err(driver_err("cuStreamGetCaptureInfo"))?;
    if status != drv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
        || (n > 0 && deps.is_null())
    {
        return Err(Error::Cuda {
            op: "graph capture",
            msg: format!("capture status {status:?} with {n} dependencies"),
        });
    }
    if n == 0 {
        return Ok(Ends::new());
    }
    // SAFETY: the driver reported `n` valid entries at `deps`, alive until the next
    // capture call on this stream; they are copied out here.
    Ok(unsafe { std::slice::from_raw_parts(deps, n) }
        .iter()
        .copied()
        .collect())
}

/// The node the current capture on this thread's capture stream ends in: the kernel just
/// launched (its only dependency).
fn last_captured_node() -> Result<drv_sys::CUgraphNode> {
    let deps = capture_deps()?;
    match deps.as_slice() {
        [one] => Ok(*one),
        _ => Err(Error::Cuda {
            op: "graph capture",
            msg: format!("{} dependencies after a launch", deps.len()),
        }),
    }
}

/// Makes the next node captured on this thread's capture stream depend on exactly `deps`
/// (none: a root of the graph).
fn set_capture_deps(deps: &[drv_sys::CUgraphNode]) -> Result<()> {
    let stream = capture_stream()?;
    let mut owned: Vec<drv_sys::CUgraphNode> = deps.to_vec();
    let ptr = if owned.is_empty() {
        std::ptr::null_mut()
    } else {
        owned.as_mut_ptr()
    };
    let flag =
        drv_sys::CUstreamUpdateCaptureDependencies_flags_enum::CU_STREAM_SET_CAPTURE_DEPENDENCIES
            as std::ffi::c_uint;
    // SAFETY: `stream` is capturing on this thread; `ptr` holds `owned.len()` nodes of its
    // capture graph (ends of earlier steps), read during the call; null edge data means
    // default edges (plain stream order), as `capture_deps` assumes.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        drv_sys::cuStreamUpdateCaptureDependencies_v2(
            stream,
            ptr,
            std::ptr::null(),
            owned.len(),
            flag,
        )
        .result()
    }))
    .unwrap_or(Err(cudarc::driver::DriverError(
        drv_sys::cudaError_enum::CUDA_ERROR_NOT_FOUND,
    )));
    r.map_err(driver_err("cuStreamUpdateCaptureDependencies"))
}

/// The complex dtype of a fused transform: its prologue's output.
fn fused_dtype(prologue: &Kernel) -> Result<DType> {
    prologue
        .outputs
        .first()
        .copied()
        .ok_or_else(|| Error::internal("graph", "prologue without output"))
}
