//! Planning: splits the DAG under the requested roots into steps (fused kernels, copies)
//! and runs them. Decisions are data: a `Schedule` can be printed and asserted on.
//!
//! Rules: elementwise ops, broadcasts and every view fuse into their consumer as index
//! arithmetic. A node is materialized (stored by the kernel that computes it) when it is a
//! root, the input of a boundary (a copy between devices, an FFT, a matmul: see `matmul`
//! for the operand views a matmul reads without a copy), or a computation read at
//! different indices (or under different guards) -- read at one index it is computed once
//! inside the kernel, even with several consumers. Materialized nodes of one shape whose
//! dependencies are met at the same time share one multi-output kernel.

mod inplace;
mod lower;
mod matmul;

use crate::graph::{FxBuild, FxHasher, Inputs, Node, Op};
use crate::runtime::matmul::GemmSpec;
use crate::runtime::{self, Buffer};
use crate::{config, profile, Device, Error, Result};
use lazyfuse_codegen::{Kernel, LaunchArgs, Scalar};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hasher;
use std::sync::Arc;

/// Where a kernel's scalar argument comes from when a plan is bound to a DAG.
#[derive(Clone, Debug)]
pub(crate) enum ParamSrc {
    /// Fixed by the plan's structure (sizes, strides, offsets, pad values).
    Fixed(Scalar),
    /// The value of the node at this position (a constant's value, a random seed).
    Node(usize),
}

/// One unit of work of a plan, with nodes named by their position in the DAG walk.
pub(crate) enum TStep {
    Kernel {
        kernel: Arc<Kernel>,
        inputs: Vec<usize>,
        outputs: Vec<usize>,
        shape: Vec<usize>,
        params: Vec<ParamSrc>,
    },
    Copy {
        src: usize,
        dst: usize,
    },
    Fft {
        src: usize,
        dst: usize,
    },
    /// `dst` (a reshape) shares `src`'s buffer.
    Alias {
        src: usize,
        dst: usize,
    },
    MatMul {
        a: usize,
        b: usize,
        dst: usize,
        spec: Arc<GemmSpec>,
    },
}

/// A plan for every DAG of one structure: cached, then bound to each new DAG.
pub(crate) struct Template {
    steps: Vec<TStep>,
    /// In-place opportunities (`inplace`), checked at each execution.
    reuse: Vec<inplace::Cand>,
    /// The CUDA graph that replays plain evaluations of this plan (owned here, so replays
    /// of different plans never share a lock).
    #[cfg(feature = "cuda")]
    pub(crate) eval_graph: crate::function::EvalGraphSlot,
}

/// The nodes a bound step reads or writes (inline for small kernels).
pub(crate) type NodeList = SmallVec<[Arc<Node>; 4]>;

/// One unit of work, bound to nodes.
pub(crate) enum Step {
    /// A fused kernel: reads `inputs`' buffers, computes `outputs`.
    Kernel {
        kernel: Arc<Kernel>,
        inputs: NodeList,
        outputs: NodeList,
        args: LaunchArgs,
    },
    /// Copy of `src`'s buffer to `dst`'s device.
    Copy { src: Arc<Node>, dst: Arc<Node> },
    /// The FFT `dst` of `src`'s buffer (a cuFFT / rustfft call).
    Fft { src: Arc<Node>, dst: Arc<Node> },
    /// `dst`, a reshape of `src`, takes `src`'s buffer (C order is unchanged).
    Alias { src: Arc<Node>, dst: Arc<Node> },
    /// The product `dst` read from `a`'s and `b`'s buffers as `spec` lays them out (a
    /// cuBLAS / ndarray call).
    MatMul {
        a: Arc<Node>,
        b: Arc<Node>,
        dst: Arc<Node>,
        spec: Arc<GemmSpec>,
    },
}

/// The plan of one evaluation.
pub(crate) struct Schedule {
    pub(crate) steps: Vec<Step>,
    /// In-place opportunities bound to this evaluation's nodes.
    reuse: Vec<inplace::Bound>,
}

impl Schedule {
    /// The schedule without in-place reuse: for plans bound to nodes whose edges differ
    /// from the template's DAG (traced functions bind fresh nodes without inputs), where
    /// reference counts cannot prove ownership.
    pub(crate) fn without_reuse(mut self) -> Schedule {
        self.reuse.clear();
        self
    }
    /// Number of kernel steps.
    pub(crate) fn kernel_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Kernel { .. }))
            .count()
    }
    /// Number of library steps (FFTs, matmuls).
    pub(crate) fn library_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Fft { .. } | Step::MatMul { .. }))
            .count()
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "schedule: {} steps", self.steps.len())?;
        for (i, s) in self.steps.iter().enumerate() {
            match s {
                Step::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    args,
                } => {
                    writeln!(
                        f,
                        "step {i}: kernel shape={:?} inputs={inputs:?} outputs={outputs:?} params={:?}",
                        args.shape, args.params
                    )?;
                    for line in kernel.to_string().lines() {
                        writeln!(f, "    {line}")?;
                    }
                }
                Step::Copy { src, dst } => writeln!(f, "step {i}: copy {src:?} -> {dst:?}")?,
                Step::Fft { src, dst } => writeln!(f, "step {i}: fft {src:?} -> {dst:?}")?,
                Step::Alias { src, dst } => writeln!(f, "step {i}: alias {src:?} -> {dst:?}")?,
                Step::MatMul { a, b, dst, spec } => {
                    writeln!(f, "step {i}: matmul {a:?} @ {b:?} -> {dst:?}: {spec}")?
                }
            }
        }
        Ok(())
    }
}

/// Scratch space of [`walk`], kept per thread so that a cached eval allocates nothing to
/// walk its DAG: node id -> walk position (`usize::MAX` while the node is on the stack).
struct WalkScratch {
    seen: HashMap<u64, usize, FxBuild>,
    stack: Vec<Frame>,
}

/// A step of the iterative walk: visit a node, or place it once its inputs are placed
/// (with its realized-ness and inputs as read at the visit).
enum Frame {
    Visit(Arc<Node>),
    Done(Arc<Node>, bool, Inputs),
}

thread_local! {
    static WALK: std::cell::RefCell<WalkScratch> = std::cell::RefCell::new(WalkScratch {
        seen: HashMap::default(),
        stack: Vec::new(),
    });
}

/// Every node reachable from `roots` (realized nodes included, not walked through),
/// inputs before users, in a deterministic order; and the structural plan key of the DAG,
/// written into `key`: the fusion switch, per node its structure hash (ops without
/// constant values and seeds, dtypes, shapes, devices), realized-ness and the walk
/// positions of its inputs, then the roots' positions. Equal keys mean equal plans, and
/// the plan cache compares whole keys (not a hash of them).
fn walk(roots: &[Arc<Node>], fuse: bool, key: &mut Vec<u64>) -> Vec<Arc<Node>> {
    WALK.with(|w| match w.try_borrow_mut() {
        Ok(mut scratch) => walk_with(&mut scratch, roots, fuse, key),
        // re-entered from a walk on this thread (cannot happen today): fresh scratch
        Err(_) => walk_with(
            &mut WalkScratch {
                seen: HashMap::default(),
                stack: Vec::new(),
            },
            roots,
            fuse,
            key,
        ),
    })
}

fn walk_with(
    scratch: &mut WalkScratch,
    roots: &[Arc<Node>],
    fuse: bool,
    key: &mut Vec<u64>,
) -> Vec<Arc<Node>> {
    const ON_STACK: usize = usize::MAX;
    let WalkScratch { seen, stack } = scratch;
    seen.clear();
    stack.clear();
    key.clear();
    key.push(fuse as u64);
    let mut order: Vec<Arc<Node>> = Vec::with_capacity(16);
    stack.extend(roots.iter().rev().map(|r| Frame::Visit(r.clone())));
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Done(n, realized, inputs) => {
                // inputs are placed: hash this node with their positions
                let mut h = FxHasher::default();
                h.write_u64(n.shash);
                h.write_u8(realized as u8);
                for i in &inputs {
                    h.write_usize(seen.get(&i.id).copied().unwrap_or(ON_STACK));
                }
                key.push(h.finish());
                seen.insert(n.id, order.len());
                order.push(n);
            }
            Frame::Visit(n) => {
                if seen.contains_key(&n.id) {
                    continue;
                }
                seen.insert(n.id, ON_STACK);
                // what planning reads of the node's state, taken under one lock
                let (realized, inputs) = {
                    let st = n.settled_state();
                    match st.buffer.is_some() {
                        true => (true, Inputs::new()),
                        false => (false, st.inputs.clone()),
                    }
                };
                let visits: SmallVec<[Arc<Node>; 3]> = inputs
                    .iter()
                    .rev()
                    .filter(|i| !seen.contains_key(&i.id))
                    .cloned()
                    .collect();
                // popped once the inputs' frames above it are all placed
                stack.push(Frame::Done(n, realized, inputs));
                stack.extend(visits.into_iter().map(Frame::Visit));
            }
        }
    }
    key.extend(roots.iter().map(|r| seen[&r.id] as u64));
    seen.clear();
    order
}

type PlanCache = HashMap<Vec<u64>, Arc<Template>, FxBuild>;
static PLANS: std::sync::RwLock<Option<PlanCache>> = std::sync::RwLock::new(None);
const PLAN_CACHE_MAX: usize = 4096;

thread_local! {
    static KEY: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The plan template for `roots` (cached by structure) with the walked nodes it is
/// positioned over, and whether it came from the cache. Readers of the plan cache never
/// block each other; the key is built in a per-thread buffer.
pub(crate) fn template_for_hit(
    roots: &[Arc<Node>],
) -> Result<(Arc<Template>, Vec<Arc<Node>>, bool)> {
    let fuse = config::fusion_enabled(); // read once: the key and the plan agree
    KEY.with(|k| match k.try_borrow_mut() {
        Ok(mut key) => template_with_key(roots, fuse, &mut key),
        Err(_) => template_with_key(roots, fuse, &mut Vec::new()),
    })
}

fn template_with_key(
    roots: &[Arc<Node>],
    fuse: bool,
    key: &mut Vec<u64>,
) -> Result<(Arc<Template>, Vec<Arc<Node>>, bool)> {
    loop {
        let nodes = walk(roots, fuse, key);
        let cached = PLANS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|c| c.get(key.as_slice()).cloned());
        if let Some(t) = cached {
            crate::stats::bump::plan_cache_hits(1);
            return Ok((t, nodes, true));
        }
        if config::debug_level() >= 2 {
            let guard = PLANS.read().unwrap_or_else(|e| e.into_inner());
            let why = crate::explain::plan_miss(key, &nodes, guard.iter().flat_map(|c| c.keys()));
            config::debug_log!(2, "plan cache miss: {why}");
        }
        let pos: HashMap<u64, usize, FxBuild> =
            nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        let planned = make_template(&nodes, &pos, roots, fuse);
        // Planning reads the nodes' live state. When another thread realized one of them
        // meanwhile, the plan (or its error) belongs to a DAG other than the key's: plan
        // again from a fresh walk instead of caching it. Realization only goes one way, so
        // this ends.
        let mut again = Vec::with_capacity(key.len());
        drop(walk(roots, fuse, &mut again));
        if again != *key {
            config::debug_log!(2, "a node was realized while planning: planning again");
            continue;
        }
        let t = Arc::new(planned?);
        if config::debug_level() >= 2 {
            crate::explain::remember_plan(key, &nodes);
        }
        let mut guard = PLANS.write().unwrap_or_else(|e| e.into_inner());
        let cache = guard.get_or_insert_with(HashMap::default);
        if cache.len() >= PLAN_CACHE_MAX {
            cache.clear();
        }
        cache.insert(key.clone(), t.clone());
        return Ok((t, nodes, false));
    }
}

/// The plan template for `roots` (cached by structure) with the walked nodes it is
/// positioned over.
pub(crate) fn template_for(roots: &[Arc<Node>]) -> Result<(Arc<Template>, Vec<Arc<Node>>)> {
    template_for_hit(roots).map(|(t, n, _)| (t, n))
}

/// Plans the evaluation of `roots`: a cached plan of the same structure when there is one.
pub(crate) fn plan(roots: &[Arc<Node>]) -> Result<Schedule> {
    let probe = crate::profile::begin_wall();
    let (template, nodes, hit) = template_for_hit(roots)?;
    let sched = bind(&template, &nodes)?;
    crate::profile::plan_done(probe, hit, sched.steps.len());
    config::debug_log!(3, "{sched}");
    Ok(sched)
}

impl TStep {
    /// DAG positions this step reads. Exhaustive on purpose: a new kind of step must say
    /// what it reads (in-place reuse and traced functions rely on it).
    pub(crate) fn reads(&self) -> SmallVec<[usize; 8]> {
        match self {
            TStep::Kernel { inputs, .. } => inputs.iter().copied().collect(),
            TStep::Copy { src, .. } | TStep::Fft { src, .. } | TStep::Alias { src, .. } => {
                [*src].into_iter().collect()
            }
            TStep::MatMul { a, b, .. } => [*a, *b].into_iter().collect(),
        }
    }
    /// DAG positions this step computes (exhaustive, like [`TStep::reads`]).
    pub(crate) fn writes(&self) -> SmallVec<[usize; 4]> {
        match self {
            TStep::Kernel { outputs, .. } => outputs.iter().copied().collect(),
            TStep::Copy { dst, .. }
            | TStep::Fft { dst, .. }
            | TStep::Alias { dst, .. }
            | TStep::MatMul { dst, .. } => [*dst].into_iter().collect(),
        }
    }
}

impl Template {
    /// The steps, over DAG positions.
    pub(crate) fn steps(&self) -> &[TStep] {
        &self.steps
    }
}

fn make_template(
    nodes: &[Arc<Node>],
    pos: &HashMap<u64, usize, FxBuild>,
    roots: &[Arc<Node>],
    fuse: bool,
) -> Result<Template> {
    let mut mat: HashSet<u64> = HashSet::new();
    let mut aliases = Vec::new();
    for r in roots {
        if r.buffer().is_some() {
            continue;
        }
        // a root reshape is its input's buffer under another shape: no copy
        match (&r.op, r.inputs().first()) {
            (Op::Reshape, Some(i)) => {
                if i.buffer().is_none() {
                    mat.insert(i.id);
                }
                aliases.push(TStep::Alias {
                    src: pos[&i.id],
                    dst: pos[&r.id],
                });
            }
            _ => {
                mat.insert(r.id);
            }
        }
    }
    for n in nodes.iter().filter(|n| n.buffer().is_none()) {
        let is_op = !matches!(n.op, Op::Const(_)) && !(n.op.is_free_view());
        if n.op.is_library() || (!fuse && is_op) {
            mat.insert(n.id);
        }
        if n.op.is_library() {
            for i in matmul::library_reads(n)? {
                if i.buffer().is_none() {
                    mat.insert(i.id);
                }
            }
        }
        if matches!(n.op, Op::Reduce(..)) {
            mat.insert(n.id);
        }
    }
    if fuse {
        absorb_epilogues(nodes, roots, &mut mat);
    }
    // Grow the materialized set until no computation is read in two index contexts.
    loop {
        let (mut steps, extra) = lower::build(nodes, pos, &mat, fuse)?;
        if extra.is_empty() {
            crate::stats::bump::plans(1);
            steps.append(&mut aliases);
            let reuse = inplace::candidates(&steps, nodes, pos, roots);
            return Ok(Template {
                steps,
                reuse,
                #[cfg(feature = "cuda")]
                eval_graph: Default::default(),
            });
        }
        // Materialize only the outermost of the reported nodes: the ones below them may be
        // read in a single context once these are buffers.
        let below = descendants(nodes, &extra, &mat);
        let before = mat.len();
        for id in extra.into_iter().filter(|id| !below.contains(id)) {
            config::debug_log!(
                2,
                "plan split at node #{id}: it is materialized because it is read at several \
                 indices (or under several guards), by two kernels, or its kernel exceeded \
                 the argument-size limit"
            );
            mat.insert(id);
        }
        if mat.len() == before {
            return Err(Error::internal("plan", "materialization made no progress"));
        }
    }
}

/// Lets a reduction's kernel compute its epilogue: while the only user of a materialized
/// reduction (or of its epilogue so far) is an elementwise op of the same shape whose other
/// operands are scalar constants, that user is materialized instead (`sum / n`,
/// `sqrt(sum)`, casts), so the reduction kernel stores the finished value.
fn absorb_epilogues(nodes: &[Arc<Node>], roots: &[Arc<Node>], mat: &mut HashSet<u64>) {
    let mut users: HashMap<u64, Vec<&Arc<Node>>> = HashMap::new();
    for n in nodes.iter().filter(|n| n.buffer().is_none()) {
        for i in n.inputs() {
            users.entry(i.id).or_default().push(n);
        }
    }
    for r in nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Reduce(..)) && n.buffer().is_none())
    {
        let mut cur = r.clone();
        loop {
            if roots.iter().any(|x| x.id == cur.id) {
                break;
            }
            let Some([e]) = users.get(&cur.id).map(|u| u.as_slice()) else {
                break;
            };
            let ok = e.op.is_elementwise()
                && e.shape == cur.shape
                && e.inputs()
                    .iter()
                    .all(|i| i.id == cur.id || lower::is_scalar_const(i));
            if !ok {
                break;
            }
            mat.remove(&cur.id);
            mat.insert(e.id);
            cur = (*e).clone();
        }
    }
}

/// Nodes computed beneath any of `tops` (walking inputs, stopping at materialized nodes).
fn descendants(nodes: &[Arc<Node>], tops: &HashSet<u64>, mat: &HashSet<u64>) -> HashSet<u64> {
    let mut below = HashSet::new();
    let mut stack: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|n| tops.contains(&n.id))
        .flat_map(|n| n.inputs())
        .collect();
    while let Some(n) = stack.pop() {
        if mat.contains(&n.id) || n.buffer().is_some() || !below.insert(n.id) {
            continue;
        }
        stack.extend(n.inputs());
    }
    below
}

/// The template's steps with this DAG's nodes and values.
pub(crate) fn bind(t: &Template, nodes: &[Arc<Node>]) -> Result<Schedule> {
    let value = |p: usize| -> Result<Scalar> {
        match nodes[p].op {
            Op::Const(s) => Ok(s),
            Op::Random(_, seed) => Ok(Scalar::I64(seed as i64)),
            _ => Err(Error::internal(
                "bind",
                "parameter source is not a constant",
            )),
        }
    };
    let steps = t
        .steps
        .iter()
        .map(|s| {
            Ok(match s {
                TStep::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    shape,
                    params,
                } => Step::Kernel {
                    kernel: kernel.clone(),
                    inputs: inputs.iter().map(|&p| nodes[p].clone()).collect(),
                    outputs: outputs.iter().map(|&p| nodes[p].clone()).collect(),
                    args: LaunchArgs {
                        shape: shape.clone(),
                        params: params
                            .iter()
                            .map(|p| match p {
                                ParamSrc::Fixed(v) => Ok(*v),
                                ParamSrc::Node(i) => value(*i),
                            })
                            .collect::<Result<_>>()?,
                    },
                },
                TStep::Copy { src, dst } => Step::Copy {
                    src: nodes[*src].clone(),
                    dst: nodes[*dst].clone(),
                },
                TStep::Fft { src, dst } => Step::Fft {
                    src: nodes[*src].clone(),
                    dst: nodes[*dst].clone(),
                },
                TStep::Alias { src, dst } => Step::Alias {
                    src: nodes[*src].clone(),
                    dst: nodes[*dst].clone(),
                },
                TStep::MatMul { a, b, dst, spec } => Step::MatMul {
                    a: nodes[*a].clone(),
                    b: nodes[*b].clone(),
                    dst: nodes[*dst].clone(),
                    spec: spec.clone(),
                },
            })
        })
        .collect::<Result<_>>()?;
    Ok(Schedule {
        steps,
        reuse: inplace::bind(&t.reuse, nodes),
    })
}

/// Plans and runs the evaluation of `roots`.
pub(crate) fn evaluate(roots: &[Arc<Node>]) -> Result<()> {
    if roots.iter().all(|r| r.buffer().is_some()) {
        return Ok(());
    }
    let _scope = crate::profile::scope(true);
    let probe = crate::profile::begin_wall();
    let (template, nodes, hit) = template_for_hit(roots)?;
    crate::stats::bump::evals(1);
    // a profiled eval runs step by step so that each step is timed
    #[cfg(feature = "cuda")]
    if !crate::profile::recording() && crate::function::eval_graph(&template, &nodes, roots)? {
        return Ok(());
    }
    let sched = bind(&template, &nodes)?;
    drop(nodes); // the schedule holds what it needs; fewer handles, more in-place reuse
    crate::profile::plan_done(probe, hit, sched.steps.len());
    config::debug_log!(3, "{sched}");
    execute(&sched)
}

/// Bytes held by `bufs` together (what a step reads from them, each read once).
fn bytes_of(bufs: &[&Buffer]) -> u64 {
    bufs.iter()
        .map(|b| (b.len() * b.dtype().size()) as u64)
        .sum()
}

fn buffer_of(n: &Node) -> Result<Arc<Buffer>> {
    n.buffer()
        .ok_or_else(|| Error::internal("execute", format!("input {n:?} not materialized")))
}

/// Runs a schedule step by step, realizing each step's outputs.
pub(crate) fn execute(sched: &Schedule) -> Result<()> {
    for (si, step) in sched.steps.iter().enumerate() {
        match step {
            Step::Kernel {
                kernel,
                inputs,
                outputs,
                args,
            } => {
                if inplace::try_run(sched, si, kernel, inputs, outputs, args)? {
                    continue;
                }
                let bufs: SmallVec<[Arc<Buffer>; 4]> =
                    inputs.iter().map(|n| buffer_of(n)).collect::<Result<_>>()?;
                let refs: SmallVec<[&Buffer; 4]> = bufs.iter().map(|b| b.as_ref()).collect();
                let dev: &Device = &outputs[0].device;
                let probe = profile::begin(dev);
                let outs = runtime::run_kernel(dev, kernel, &refs, args)?;
                profile::kernel_done(probe, dev, kernel, &refs, &args.shape);
                for (node, buf) in outputs.iter().zip(outs) {
                    node.realize(Arc::new(buf));
                }
            }
            Step::Fft { src, dst } => {
                let Op::Fft(spec) = &dst.op else {
                    return Err(Error::internal("execute", "fft step on a non-fft node"));
                };
                let b = buffer_of(src)?;
                crate::stats::bump::library_calls(1);
                let probe = profile::begin(&dst.device);
                let out = runtime::fft(&dst.device, spec, &b, &src.shape, &dst.shape)?;
                if probe.is_some() {
                    let bytes = bytes_of(&[&b]) + bytes_of(&[&out]);
                    let detail = format!("{:?} {:?} -> {:?}", spec.kind, src.shape, dst.shape);
                    let name = format!(
                        "fft axes={:?}{}",
                        spec.axes,
                        if spec.inverse { " inverse" } else { "" }
                    );
                    profile::library_done(probe, &dst.device, name, detail, bytes);
                }
                dst.realize(Arc::new(out));
            }
            Step::Alias { src, dst } => dst.realize(buffer_of(src)?),
            Step::MatMul { a, b, dst, spec } => {
                let (x, y) = (buffer_of(a)?, buffer_of(b)?);
                crate::stats::bump::library_calls(1);
                let probe = profile::begin(&dst.device);
                let out = runtime::matmul::run(&dst.device, spec, &x, &y)?;
                if probe.is_some() {
                    let bytes = bytes_of(&[&x, &y]) + bytes_of(&[&out]);
                    let detail = format!("{:?} @ {:?} -> {:?}", a.shape, b.shape, dst.shape);
                    profile::library_done(probe, &dst.device, "matmul".into(), detail, bytes);
                }
                dst.realize(Arc::new(out));
            }
            Step::Copy { src, dst } => {
                let b = buffer_of(src)?;
                let probe = profile::begin_wall();
                let host = runtime::download(&b, 0, b.len())?;
                let out = runtime::upload(&dst.device, host)?;
                let bytes = 2 * bytes_of(&[&out]);
                let detail = format!("{} -> {}", src.device, dst.device);
                profile::host_done(
                    probe,
                    profile::EntryKind::DeviceCopy,
                    "to_device",
                    detail,
                    bytes,
                );
                dst.realize(Arc::new(out));
            }
        }
    }
    Ok(())
}
