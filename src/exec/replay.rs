//! Repeated plans on CUDA replayed as captured graphs (`runtime::cuda::graph`), for traced
//! functions and for plain evaluations: results are fresh buffers per call, except those an
//! FFT writes (two sets owned here alternate, see `GraphState::owned`); intermediates live
//! in the graph's arena.

use super::{PosSlot, Res};
use crate::graph::FxBuild;
use crate::graph::{Node, Op};
use crate::runtime::cuda::graph::{FusedEpi, FusedMid, FusedStep, GraphPlan, GraphStep, Slot};
use crate::runtime::cuda::{CudaBuffer, CudaDevice};
use crate::runtime::Buffer;
use crate::schedule::{TStep, Template};
use crate::{Device, Error, Result};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub(crate) struct GraphState {
    dev: &'static CudaDevice,
    /// Graph operand of each DAG position a step refers to.
    slot_of: Vec<Option<Slot>>,
    /// Positions of the results computed per call, in `Ext` order after the inputs.
    result_pos: Vec<usize>,
    /// Nodes whose buffers are `Fixed` operands, in order.
    fixed: Vec<Arc<Node>>,
    plan: Option<GraphPlan>,
    /// Number of per-call input buffers.
    n_inputs: usize,
    /// FFTs that write a result, by destination position: they write an arena buffer
    /// instead, which a copy kernel moves into the fresh result (cuFFT's graph nodes keep
    /// the addresses they were recorded with; only kernel nodes can be pointed elsewhere).
    /// Used only when every set in `owned` is busy.
    staged: Arc<Staged>,
    /// The results (indices into `result_pos`) that staged FFTs write.
    staged_results: Vec<usize>,
    /// Result buffers this state owns for the results FFTs write, up to [`OWNED_SETS`]
    /// sets of one buffer per staged result (`(index in result_pos, buffer)`). A call
    /// hands out a set nobody else holds any more, and its FFTs write into it directly
    /// (each set has its own recording): in a loop `u = f(u)` two sets alternate and no
    /// copy kernel runs.
    owned: Vec<Vec<(usize, Arc<Buffer>)>>,
    /// Per template step: an FFT whose source is an arena intermediate that no later step
    /// reads, so the transform may overwrite it.
    dead_src: Vec<bool>,
    /// The output shapes (`[pre, n, post]`) of the scatter-add steps, in step order.
    scatter_shapes: Vec<[usize; 3]>,
}

/// Most sets of owned result buffers one graph state keeps.
const OWNED_SETS: usize = 2;

/// [`GraphState::staged`].
type Staged = HashMap<usize, Stage, FxBuild>;

/// The staging of one FFT result: its arena slot and the copy kernel with its arguments.
struct Stage {
    arena: usize,
    kernel: Arc<lazyfuse_codegen::Kernel>,
    args: lazyfuse_codegen::LaunchArgs,
}

/// `out[i] = in[i]` over `n` elements of `dtype`.
fn copy_stage(dtype: crate::DType, n: usize, arena: usize) -> Stage {
    use lazyfuse_codegen::{Builder, Inst};
    let mut b = Builder::new(1);
    let i = b.push(Inst::Index, crate::DType::I64);
    let input = b.input(dtype);
    let x = b.push(
        Inst::Load {
            input,
            index: i,
            guard: None,
        },
        dtype,
    );
    b.store(x);
    Stage {
        arena,
        kernel: Arc::new(b.finish()),
        args: lazyfuse_codegen::LaunchArgs {
            shape: [n].into_iter().collect(),
            params: Default::default(),
        },
    }
}

impl GraphState {
    /// The graph state for a traced plan on `device`; `None` off CUDA or when the plan
    /// holds steps a graph cannot run (copies between devices).
    pub(crate) fn new(
        device: &Device,
        template: &Template,
        slots: &[PosSlot],
        results: &[Res],
        n_inputs: usize,
    ) -> Option<GraphState> {
        let Device::Cuda(dev) = device else {
            return None;
        };
        if !template.steps().iter().all(|s| match s {
            // reductions keep their partials and counters with the graph plan, scans their
            // tile states (zeroed by a memset node before each launch)
            TStep::Kernel { .. } => true,
            // cuFFT, and generated passes with fused work (each pass a kernel node); a
            // reshape shares its source's buffer (one graph operand, see below)
            TStep::Fft { .. } | TStep::FftFused { .. } | TStep::Alias { .. } => true,
            // a zeroing and an adding kernel node
            TStep::Scatter { .. } => true,
            _ => false,
        }) {
            return None;
        }
        let result_pos: Vec<usize> = {
            let mut v: Vec<usize> = results
                .iter()
                .filter_map(|r| match r {
                    Res::Pos(p) => Some(*p),
                    _ => None,
                })
                .collect();
            v.dedup();
            let mut seen = Vec::new();
            v.retain(|p| {
                let new = !seen.contains(p);
                seen.push(*p);
                new
            });
            v
        };
        // Reshapes (`Alias` steps) join their source in one buffer: a group of positions
        // that one step computes and the others reshape, with at most one result among
        // them (the group's operand is then that result's buffer, which the producing step
        // writes directly; otherwise one arena buffer).
        let group = alias_groups(template, slots.len());
        let mut members = vec![0u32; slots.len()];
        for &g in &group {
            members[g] += 1;
        }
        let joined = |p: usize| members[group[p]] > 1;
        let mut group_result: HashMap<usize, usize> = HashMap::new();
        for (k, &r) in result_pos.iter().enumerate() {
            if joined(r) && group_result.insert(group[r], k).is_some() {
                return None; // two results would share one buffer
            }
        }
        if (0..slots.len()).any(|p| joined(p) && !matches!(slots[p], PosSlot::Fresh(..))) {
            return None; // a reshape of an input or a captured array
        }
        let mut group_slot: HashMap<usize, Slot> = HashMap::new();
        let mut slot_of = vec![None; slots.len()];
        let mut fixed = Vec::new();
        let mut arena = Vec::new();
        for (p, s) in slots.iter().enumerate() {
            if joined(p) {
                // a reshape group's operand: its result's buffer, else one arena buffer
                let g = group[p];
                if let Some(&slot) = group_slot.get(&g) {
                    slot_of[p] = Some(slot);
                    continue;
                }
                let PosSlot::Fresh(_, d, sh) = s else {
                    return None;
                };
                let slot = match group_result.get(&g) {
                    Some(&k) => Slot::Ext(n_inputs + k),
                    None => {
                        arena.push((*d, sh.iter().product::<usize>()));
                        Slot::Arena(arena.len() - 1)
                    }
                };
                group_slot.insert(g, slot);
                slot_of[p] = Some(slot);
                continue;
            }
            slot_of[p] = match s {
                PosSlot::Input(i) => Some(Slot::Ext(*i)),
                PosSlot::Keep(n) if n.buffer().is_some() => {
                    fixed.push(n.clone());
                    Some(Slot::Fixed(usize::MAX)) // numbered below
                }
                PosSlot::Fresh(_, d, sh) => match result_pos.iter().position(|&r| r == p) {
                    Some(k) => Some(Slot::Ext(n_inputs + k)),
                    None => {
                        arena.push((*d, sh.iter().product::<usize>()));
                        Some(Slot::Arena(arena.len() - 1))
                    }
                },
                _ => None,
            };
        }
        // intermediates whose lives do not overlap share a buffer, so that a long body
        // (a hundred simulation steps) holds about as much as one step
        arena = share_arena(template.steps(), &mut slot_of, arena);
        let mut staged = Staged::default();
        let mut staged_results = Vec::new();
        for s in template.steps() {
            if let TStep::Fft { dst, .. } = s {
                if let (Some(Slot::Ext(e)), PosSlot::Fresh(_, d, sh)) =
                    (slot_of[*dst], &slots[*dst])
                {
                    let n = sh.iter().product::<usize>();
                    arena.push((*d, n));
                    staged.insert(*dst, copy_stage(*d, n, arena.len() - 1));
                    // the result (a reshape of the transform's output, or itself)
                    staged_results.push(e - n_inputs);
                }
            }
        }
        let base = n_inputs + result_pos.len();
        let mut k = 0;
        for s in slot_of.iter_mut() {
            if let Some(Slot::Fixed(_)) = s {
                *s = Some(Slot::Fixed(base + k));
                k += 1;
            }
        }
        let steps = template.steps();
        let dead_src: Vec<bool> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                TStep::Fft { src, .. } => {
                    matches!(slot_of[*src], Some(Slot::Arena(_)))
                        && !steps[i + 1..]
                            .iter()
                            .any(|later| later.reads().contains(src))
                }
                _ => false,
            })
            .collect();
        let mut scatter_shapes = Vec::new();
        for s in steps {
            if let TStep::Scatter { dst, .. } = s {
                match &slots[*dst] {
                    PosSlot::Fresh(_, _, sh) if sh.len() == 3 => {
                        scatter_shapes.push([sh[0], sh[1], sh[2]])
                    }
                    _ => return None,
                }
            }
        }
        let mut st = GraphState {
            dev,
            slot_of,
            result_pos,
            fixed,
            plan: None,
            n_inputs,
            staged: Arc::new(staged),
            staged_results,
            owned: Vec::new(),
            dead_src,
            scatter_shapes,
        };
        // Decide eligibility once, on the template's structure (no buffers needed).
        let probe = st.steps_without_args(template).ok()?;
        st.plan = Some(GraphPlan::new(dev, &probe, arena));
        Some(st)
    }

    /// Whether graphs are off for this plan from the start (ineligible or disabled).
    pub(crate) fn is_off(&self) -> bool {
        self.plan.as_ref().is_none_or(|p| p.is_off())
    }

    pub(crate) fn is_recorded(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.is_recorded())
    }

    fn slot(&self, p: usize) -> Result<Slot> {
        self.slot_of
            .get(p)
            .copied()
            .flatten()
            .ok_or_else(|| Error::internal("Function", format!("position {p} has no buffer")))
    }

    /// The slots of a fused kernel's inputs, `None` at `value_input` (a transform the step
    /// computes).
    fn slots_but_value(
        &self,
        inputs: &[usize],
        value_input: u32,
    ) -> Result<SmallVec<[Option<Slot>; 8]>> {
        inputs
            .iter()
            .enumerate()
            .map(|(k, &p)| match k as u32 == value_input {
                true => Ok(None),
                false => self.slot(p).map(Some),
            })
            .collect()
    }

    /// The steps with empty arguments (for the eligibility check).
    fn steps_without_args<'a>(&'a self, t: &'a Template) -> Result<Vec<GraphStep<'a>>> {
        self.steps(t, &vec![NO_ARGS; t.steps().len()], &[], &[], &self.staged)
    }

    /// The graph steps of `t` with each kernel step's arguments from `args`, FFT shapes
    /// from `shapes` and each fused transform's prologue and epilogue arguments from
    /// `fused` (both empty: unknown, for the eligibility check).
    fn steps<'a>(
        &self,
        t: &'a Template,
        args: &[&'a lazyfuse_codegen::LaunchArgs],
        shapes: &'a [(Vec<usize>, Vec<usize>, crate::graph::FftSpec)],
        fused: &[FusedArgs<'a>],
        staged: &'a Staged,
    ) -> Result<Vec<GraphStep<'a>>> {
        let mut out = Vec::new();
        let (mut f, mut fi, mut si) = (0, 0, 0);
        for (i, s) in t.steps().iter().enumerate() {
            match s {
                TStep::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    ..
                } => out.push(GraphStep::Kernel {
                    kernel,
                    inputs: inputs
                        .iter()
                        .map(|&p| self.slot(p))
                        .collect::<Result<SmallVec<_>>>()?,
                    outputs: outputs
                        .iter()
                        .map(|&p| self.slot(p))
                        .collect::<Result<SmallVec<_>>>()?,
                    args: args[i],
                }),
                TStep::Fft { src, dst } => {
                    let (in_shape, out_shape, spec) = match shapes.get(f) {
                        Some((a, b, s)) => (a.as_slice(), b.as_slice(), s),
                        None => (&[][..], &[][..], fft_spec_placeholder()),
                    };
                    f += 1;
                    let stage = staged.get(dst);
                    out.push(GraphStep::Fft {
                        spec,
                        src: self.slot(*src)?,
                        dst: match stage {
                            Some(st) => Slot::Arena(st.arena),
                            None => self.slot(*dst)?,
                        },
                        in_shape,
                        out_shape,
                        clobber: self.dead_src[i],
                    });
                    if let Some(st) = stage {
                        out.push(GraphStep::Kernel {
                            kernel: &st.kernel,
                            inputs: [Slot::Arena(st.arena)].into_iter().collect(),
                            outputs: [self.slot(*dst)?].into_iter().collect(),
                            args: &st.args,
                        });
                    }
                }
                TStep::FftFused {
                    kernel,
                    inputs,
                    shape,
                    spec,
                    dst,
                    round,
                    epilogue,
                    ..
                } => {
                    let (pro_args, epi_args, mid_args, out_shape) = match fused.get(fi) {
                        Some((p, e, m, o)) => (*p, *e, m.as_slice(), *o),
                        None => (NO_ARGS, None, &[][..], &shape[..]),
                    };
                    fi += 1;
                    let epilogue = match epilogue {
                        Some(e) => Some(FusedEpi {
                            kernel: &e.kernel,
                            inputs: self.slots_but_value(&e.inputs, e.value_input)?,
                            value_input: e.value_input,
                            shift_param: e.shift_param,
                            args: epi_args.unwrap_or(NO_ARGS),
                        }),
                        None => None,
                    };
                    let round = round
                        .iter()
                        .enumerate()
                        .map(|(j, r)| {
                            Ok(FusedMid {
                                kernel: &r.kernel,
                                inputs: self.slots_but_value(&r.inputs, r.value_input)?,
                                value_input: r.value_input,
                                args: mid_args.get(j).copied().unwrap_or(NO_ARGS),
                                spec: &r.spec,
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    out.push(GraphStep::FftFused(Box::new(FusedStep {
                        spec,
                        prologue: kernel,
                        inputs: inputs
                            .iter()
                            .map(|&p| self.slot(p))
                            .collect::<Result<SmallVec<_>>>()?,
                        args: pro_args,
                        dst: self.slot(fused_out(s).unwrap_or(*dst))?,
                        round,
                        epilogue,
                        shape,
                        out_shape,
                    })));
                }
                // the reshape's buffer is its source's (`alias_groups`)
                TStep::Alias { .. } => {}
                TStep::Scatter {
                    values,
                    indices,
                    dst,
                } => {
                    out.push(GraphStep::Scatter {
                        values: self.slot(*values)?,
                        indices: self.slot(*indices)?,
                        dst: self.slot(*dst)?,
                        out: self.scatter_shapes.get(si).copied().ok_or_else(|| {
                            Error::internal("Function", "scatter step without its shape")
                        })?,
                    });
                    si += 1;
                }
                _ => return Err(Error::internal("Function", "step kind without graph")),
            }
        }
        Ok(out)
    }

    /// One call: fresh result buffers, then a plain, recorded or replayed run.
    pub(crate) fn call(
        &mut self,
        template: &Template,
        nodes: &[Arc<Node>],
        in_bufs: &[Arc<Buffer>],
    ) -> Result<()> {
        let sched = super::bind(template, nodes)?;
        crate::config::debug_log!(3, "graph run of {sched}");
        // kernel arguments (from the bound schedule) and FFT shapes, in step order
        let mut args = Vec::with_capacity(sched.steps.len());
        let mut ffts = Vec::new();
        // (declared before the arguments that borrow them)
        let none = Staged::default();
        let staged = self.staged.clone();
        let mut fused: Vec<FusedArgs> = Vec::new();
        let no_args = NO_ARGS;
        for s in &sched.steps {
            match s {
                super::Step::Kernel { args: a, .. } => args.push(a),
                super::Step::Fft { src, dst } => {
                    let Op::Fft(spec) = &dst.op else {
                        return Err(Error::internal("Function", "fft step on a non-fft node"));
                    };
                    ffts.push((src.shape.to_vec(), dst.shape.to_vec(), (**spec).clone()));
                    args.push(no_args);
                }
                super::Step::FftFused(ff) => {
                    fused.push((
                        &ff.args,
                        ff.epilogue.as_ref().map(|e| &e.args),
                        ff.round.iter().map(|r| &r.args).collect(),
                        &ff.dst.shape,
                    ));
                    args.push(no_args);
                }
                _ => args.push(no_args),
            }
        }
        let set = self.free_owned_set(nodes)?;
        let steps = self.steps(
            template,
            &args,
            &ffts,
            &fused,
            if set.is_some() { &none } else { &staged },
        )?;
        // buffers: inputs, fresh results, fixed
        let fixed_bufs: Vec<Arc<Buffer>> = self
            .fixed
            .iter()
            .map(|n| {
                n.buffer()
                    .ok_or_else(|| Error::internal("Function", "captured array lost its buffer"))
            })
            .collect::<Result<_>>()?;
        let owned: &[(usize, Arc<Buffer>)] = set.map_or(&[], |i| &self.owned[i]);
        let outs: Vec<Arc<Buffer>> = self
            .result_pos
            .iter()
            .enumerate()
            .map(|(k, &p)| match owned.iter().find(|(j, _)| *j == k) {
                Some((_, b)) => Ok(b.clone()),
                None => Ok(Arc::new(Buffer::Cuda(
                    self.dev.alloc_buffer(nodes[p].dtype, nodes[p].size())?,
                ))),
            })
            .collect::<Result<_>>()?;
        let mut ext: Vec<&CudaBuffer> = Vec::new();
        for b in in_bufs {
            ext.push(cuda_of(b)?);
        }
        for b in &outs {
            ext.push(cuda_of(b)?);
        }
        for b in &fixed_bufs {
            ext.push(cuda_of(b)?);
        }
        let plan = self
            .plan
            .as_mut()
            .ok_or_else(|| Error::internal("Function", "no graph plan"))?;
        plan.run(&steps, &ext)?;
        drop(ext);
        for (&p, buf) in self.result_pos.iter().zip(outs) {
            nodes[p].realize(buf);
        }
        Ok(())
    }

    /// A set of owned result buffers that nothing outside this state holds (made when
    /// fewer than [`OWNED_SETS`] exist); `None` when the plan stages no FFT result or
    /// every set is still held by the caller.
    fn free_owned_set(&mut self, nodes: &[Arc<Node>]) -> Result<Option<usize>> {
        if self.staged.is_empty() {
            return Ok(None);
        }
        if let Some(i) = self
            .owned
            .iter()
            .position(|set| set.iter().all(|(_, b)| Arc::strong_count(b) == 1))
        {
            return Ok(Some(i));
        }
        if self.owned.len() >= OWNED_SETS {
            return Ok(None);
        }
        let mut set = Vec::new();
        for (k, &p) in self.result_pos.iter().enumerate() {
            if self.staged_results.contains(&k) {
                let b = self.dev.alloc_buffer(nodes[p].dtype, nodes[p].size())?;
                set.push((k, Arc::new(Buffer::Cuda(b))));
            }
        }
        self.owned.push(set);
        Ok(Some(self.owned.len() - 1))
    }
}

fn cuda_of(b: &Buffer) -> Result<&CudaBuffer> {
    match b {
        Buffer::Cuda(c) => Ok(c),
        _ => Err(Error::internal("Function", "host buffer in a CUDA plan")),
    }
}

/// The graph state of plain evaluations of one plan template. A replay locks only its
/// own plan's state (and try-locks it: a plan busy in another thread runs plainly); the
/// table of states is read under a shared lock that no launch holds.
struct PlanGraph {
    /// Keeps the keyed address alive.
    _template: Arc<Template>,
    state: std::sync::Mutex<SlotState>,
}

#[derive(Default)]
enum SlotState {
    /// Not tried yet.
    #[default]
    Untried,
    /// The plan is not worth a graph.
    Ineligible,
    Ready(Box<GraphState>),
}

/// Graph states of plain evaluations on one CUDA device, by the address of their template
/// (a field of the device: each state records on it).
#[derive(Default)]
pub(crate) struct PlanGraphs(RwLock<HashMap<usize, Arc<PlanGraph>, FxBuild>>);
/// Most plans with eval-level graph state kept (each holds a graph and its arena); the
/// table starts over beyond it.
const EVAL_GRAPHS_MAX: usize = 64;

/// The graph state entry of `template` on `dev`, created on first use.
fn plan_graph(dev: &CudaDevice, template: &Arc<Template>) -> Arc<PlanGraph> {
    let key = Arc::as_ptr(template) as usize;
    let table = &dev.attached().get::<PlanGraphs>().0;
    let found = table
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned();
    if let Some(p) = found {
        return p;
    }
    let mut map = table.write().unwrap_or_else(|e| e.into_inner());
    if map.len() >= EVAL_GRAPHS_MAX && !map.contains_key(&key) {
        map.clear(); // entries busy in other threads live on through their handles
    }
    map.entry(key)
        .or_insert_with(|| {
            Arc::new(PlanGraph {
                _template: template.clone(),
                state: Default::default(),
            })
        })
        .clone()
}

/// Runs the evaluation of `roots` (planned as `template` over `nodes`) through a CUDA
/// graph when the plan is worth one; `Ok(false)` when the caller should execute it
/// plainly. Worth one: CUDA, graphs on, at least two steps (a single launch gains
/// nothing from a graph and would lose in-place reuse), every root computed by the
/// plan, only kernel and FFT steps, and FFTs between intermediates.
pub(crate) fn eval_graph(
    template: &Arc<Template>,
    nodes: &[Arc<Node>],
    roots: &[Arc<Node>],
) -> Result<bool> {
    let Some(Device::Cuda(dev)) = roots.first().map(|r| &r.device) else {
        return Ok(false);
    };
    // A single kernel replays as a graph only after a plain run of its plan wrote nothing
    // in place (a loop `u = f(u)` keeps writing in place), and only while this thread is
    // the device's only evaluating one: a graph launch costs less host time than a kernel
    // launch (H100: a plain `a + b` eval 3.4-3.7 us replayed against 6.1-6.2 us launched),
    // but the driver serializes graph launches across threads, so 8 threads evaluating at
    // once got 366k evals/s replayed against 470k launched (`benches/NOTES.md`, "Host
    // path").
    let single = template.steps().len() < 2;
    if !crate::runtime::cuda::graph::graphs_enabled()
        || (single
            && !crate::config::CONFIG.graphs_all()
            && (dev.evaluating().load(std::sync::atomic::Ordering::Relaxed) > 1
                || !template.ran_without_in_place()))
        || roots
            .iter()
            .any(|r| r.buffer().is_some() || r.device != roots[0].device)
    {
        return Ok(false);
    }
    let entry = plan_graph(dev, template);
    // another thread replaying this plan's graph right now: run plainly instead of waiting
    let mut slot = match entry.state.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
    };
    if matches!(*slot, SlotState::Untried) {
        *slot = match new_eval_state(template, nodes, roots) {
            Some(st) => SlotState::Ready(Box::new(st)),
            None => SlotState::Ineligible,
        };
    }
    let SlotState::Ready(state) = &mut *slot else {
        return Ok(false);
    };
    let bufs: Vec<Arc<Buffer>> = nodes.iter().filter_map(|n| n.buffer()).collect();
    if bufs.len() != state.n_inputs {
        return Ok(false); // realized-ness is part of the plan key; defensive only
    }
    state.call(template, nodes, &bufs)?;
    Ok(true)
}

/// Counts the calling thread as evaluating on a CUDA device while it lives (see
/// [`eval_graph`]).
pub(crate) struct Evaluating(Option<&'static CudaDevice>);

impl Evaluating {
    /// Enters the evaluation of `roots` (counted only when the first root is on CUDA).
    pub(crate) fn enter(roots: &[Arc<Node>]) -> Evaluating {
        match roots.first().map(|r| &r.device) {
            Some(Device::Cuda(dev)) => {
                dev.evaluating()
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Evaluating(Some(*dev))
            }
            _ => Evaluating(None),
        }
    }
}

impl Drop for Evaluating {
    fn drop(&mut self) {
        if let Some(dev) = self.0 {
            dev.evaluating()
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The graph state of an evaluation plan: realized positions are the per-eval inputs
/// (in position order), roots the results, every other produced node an intermediate.
fn new_eval_state(
    template: &Template,
    nodes: &[Arc<Node>],
    roots: &[Arc<Node>],
) -> Option<GraphState> {
    let produced: std::collections::HashSet<usize> =
        template.steps().iter().flat_map(|s| s.writes()).collect();
    let mut k = 0;
    let slots: Vec<PosSlot> = nodes
        .iter()
        .enumerate()
        .map(|(p, n)| {
            if n.buffer().is_some() {
                k += 1;
                PosSlot::Input(k - 1)
            } else if produced.contains(&p) {
                PosSlot::Fresh(n.op.clone(), n.dtype, n.shape.clone())
            } else {
                PosSlot::Unused
            }
        })
        .collect();
    let results: Vec<Res> = roots
        .iter()
        .map(|r| nodes.iter().position(|n| n.id == r.id).map(Res::Pos))
        .collect::<Option<_>>()?;
    let st = GraphState::new(&roots[0].device, template, &slots, &results, k)?;
    (!st.is_off()).then_some(st)
}

/// A spec for eligibility probing only (never executed).
fn fft_spec_placeholder() -> &'static crate::graph::FftSpec {
    const SPEC: &crate::graph::FftSpec = &crate::graph::FftSpec {
        axes: SmallVec::new_const(),
        inverse: false,
        kind: crate::graph::FftKind::C2C,
        hermitian: false,
        support: None,
    };
    SPEC
}

/// Empty launch arguments (for steps whose arguments do not matter or come later).
const NO_ARGS: &lazyfuse_codegen::LaunchArgs = &lazyfuse_codegen::LaunchArgs {
    shape: SmallVec::new_const(),
    params: SmallVec::new_const(),
};

/// A fused transform's prologue, epilogue and round-trip kernels' launch arguments, and
/// the shape of its (last) transform's output.
type FusedArgs<'a> = (
    &'a lazyfuse_codegen::LaunchArgs,
    Option<&'a lazyfuse_codegen::LaunchArgs>,
    SmallVec<[&'a lazyfuse_codegen::LaunchArgs; 2]>,
    &'a [usize],
);

/// What a fused transform step computes when it is not its first transform: the
/// epilogue's output, else a chain's last transform.
fn fused_out(s: &TStep) -> Option<usize> {
    match s {
        TStep::FftFused {
            epilogue: Some(e), ..
        } => Some(e.out),
        TStep::FftFused { round, .. } => round.last().map(|r| r.dst),
        _ => None,
    }
}

/// Renumbers the arena intermediates of `slot_of` so that those whose lives (from the
/// first step that touches them to the last) do not overlap share a buffer of the same
/// dtype and length, in step order: a buffer is free again after the step that last reads
/// it, never for that step's own outputs. Returns the shared arena's specs. A recording
/// orders every step after the earlier readers and writers of the buffers it writes
/// (`graph::Hazards`), so sharing adds no race; plain runs are in step order.
fn share_arena(
    steps: &[TStep],
    slot_of: &mut [Option<Slot>],
    arena: Vec<(crate::DType, usize)>,
) -> Vec<(crate::DType, usize)> {
    let mut first = vec![usize::MAX; arena.len()];
    let mut last = vec![0usize; arena.len()];
    for (i, s) in steps.iter().enumerate() {
        for p in s.reads().into_iter().chain(s.writes()) {
            if let Some(Some(Slot::Arena(a))) = slot_of.get(p) {
                first[*a] = first[*a].min(i);
                last[*a] = last[*a].max(i);
            }
        }
    }
    let mut starts: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    let mut ends: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    let mut new_of = vec![usize::MAX; arena.len()];
    let mut shared: Vec<(crate::DType, usize)> = Vec::new();
    for (a, &f) in first.iter().enumerate() {
        if f == usize::MAX {
            // touched by no step: a buffer of its own, as before
            shared.push(arena[a]);
            new_of[a] = shared.len() - 1;
        } else {
            starts[f].push(a);
            ends[last[a]].push(a);
        }
    }
    let mut free: HashMap<(crate::DType, usize), Vec<usize>> = HashMap::new();
    for (born, dying) in starts.iter().zip(&ends) {
        for &a in born {
            new_of[a] = match free.get_mut(&arena[a]).and_then(|v| v.pop()) {
                Some(b) => b,
                None => {
                    shared.push(arena[a]);
                    shared.len() - 1
                }
            };
        }
        for &a in dying {
            free.entry(arena[a]).or_default().push(new_of[a]);
        }
    }
    for s in slot_of.iter_mut() {
        if let Some(Slot::Arena(a)) = s {
            *a = new_of[*a];
        }
    }
    shared
}

/// For each DAG position of `t`'s plan (`n` positions), the representative of its reshape
/// group: positions joined by `Alias` steps share one buffer (the representative: the
/// group's first position); every other position is its own group.
fn alias_groups(t: &Template, n: usize) -> Vec<usize> {
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut p: usize) -> usize {
        while root[p] != p {
            root[p] = root[root[p]];
            p = root[p];
        }
        p
    }
    for s in t.steps() {
        if let TStep::Alias { src, dst } = *s {
            if src < n && dst < n {
                let (a, b) = (find(&mut root, src), find(&mut root, dst));
                let (lo, hi) = (a.min(b), a.max(b));
                root[hi] = lo;
            }
        }
    }
    (0..n).map(|p| find(&mut root, p)).collect()
}
