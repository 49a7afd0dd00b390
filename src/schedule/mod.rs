//! Planning: splits the DAG under the requested roots into steps (fused kernels, copies),
//! cached as a `Template` by structure. Decisions only: `exec` binds and runs them, and a
//! bound `exec::Schedule` can be printed and asserted on.
//!
//! Rules: elementwise ops, broadcasts and every view fuse into their consumer as index
//! arithmetic. A node is materialized (stored by the kernel that computes it) when it is a
//! root, the input of a boundary (a copy between devices, an FFT, a matmul: see `matmul`
//! for the operand views a matmul reads without a copy), or a computation read at
//! different indices (or under different guards) -- read at one index it is computed once
//! inside the kernel, even with several consumers -- or by several kernels, unless it is
//! cheap enough to recompute in each (`lower::cheap_nodes`: elementwise work beneath the
//! stored values of a bounded cost, in at most four kernels, while that moves fewer bytes
//! than storing it; FFT, matmul, reduction and scan results are always stored). Materialized
//! nodes of one shape whose dependencies are met at the same time share one multi-output
//! kernel.

pub(crate) mod inplace;
mod lower;
mod matmul;
mod skeleton;

use crate::graph::{FxBuild, FxHasher, Inputs, Node, Op};
use crate::runtime::matmul::GemmSpec;
use crate::thread_field::Field;
use crate::{config, Error, Result};
use lazyfuse_codegen::{Kernel, Scalar};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
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
        shape: lazyfuse_codegen::LaunchShape,
        params: Vec<ParamSrc>,
        /// Computations this kernel computes that other kernels compute too, instead of
        /// reading them stored (`lower::cheap_nodes`); `None` for most kernels.
        recomputes: Option<Arc<Recomputes>>,
    },
    Copy {
        src: usize,
        dst: usize,
    },
    Fft {
        src: usize,
        dst: usize,
    },
    /// The transform `dst` of the values the elementwise `kernel` (launched over `shape`,
    /// the transform's input shape, with `params`, reading `inputs`) computes inside the
    /// transform's first pass: the input itself is never stored (`fuse_prologues`).
    /// With `round` trips, the transform's consumer and a second transform of its
    /// result follow in the same passes (`RoundPlan`), then that one's consumer and a
    /// third, and so on (a chain), and the step computes the last transform instead.
    /// With an `epilogue`, the (last) transform's consumer is computed in its last pass:
    /// the transform is not stored either, the epilogue's output is.
    FftFused {
        kernel: Arc<Kernel>,
        inputs: Vec<usize>,
        shape: lazyfuse_codegen::LaunchShape,
        params: Vec<ParamSrc>,
        spec: Arc<crate::graph::FftSpec>,
        dst: usize,
        round: Vec<RoundPlan>,
        epilogue: Option<Box<EpiPlan>>,
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
    /// `dst`, an `Op::ScatterAdd` node, of the buffers of `values` and `indices`.
    Scatter {
        values: usize,
        indices: usize,
        dst: usize,
    },
}

/// The computations a kernel computes although other kernels compute them too (cheap
/// elementwise values recomputed rather than stored): what plans and profiles show.
pub(crate) struct Recomputes {
    /// Their DAG positions, outermost only (those the kernel's outputs reach through its
    /// own computations alone).
    pub(crate) at: Vec<usize>,
    /// Their op names, comma-separated (the same for every DAG of the plan's structure).
    pub(crate) ops: String,
}

/// The consumer of a fused transform's output, computed in the transform's last pass
/// (`fuse_prologues`): an elementwise kernel of one output over the transform's shape that
/// reads the transform (its input `value_input`, at DAG position `inputs[value_input]`)
/// once, at a cyclic shift of its own index by the I64 parameters from `shift_param` on
/// (`lazyfuse_codegen::cuda::fft::Epilogue`).
pub(crate) struct EpiPlan {
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) inputs: Vec<usize>,
    pub(crate) params: Vec<ParamSrc>,
    pub(crate) value_input: u32,
    pub(crate) shift_param: u32,
    /// The position the kernel computes.
    pub(crate) out: usize,
}

/// The second half of a fused round trip (`fuse_prologues`): the first transform's only
/// consumer, an elementwise kernel of one output reading it once at its own index, and the
/// transform of that kernel's result back along the same axes. The generated passes run
/// both transforms' passes along one axis as one pass with the kernel between them
/// (`lazyfuse_codegen::fft::plan_round_trip`); neither the first transform nor the
/// kernel's result is stored.
pub(crate) struct RoundPlan {
    /// The kernel between the transforms.
    pub(crate) kernel: Arc<Kernel>,
    /// Its inputs; the one at `value_input` is the first transform (not read).
    pub(crate) inputs: Vec<usize>,
    pub(crate) params: Vec<ParamSrc>,
    pub(crate) value_input: u32,
    /// The second transform and its DAG position.
    pub(crate) spec: Arc<crate::graph::FftSpec>,
    pub(crate) dst: usize,
}

/// A plan for every DAG of one structure: cached, then bound to each new DAG.
pub(crate) struct Template {
    steps: Vec<TStep>,
    /// In-place opportunities (`inplace`), checked at each execution.
    reuse: Vec<inplace::Cand>,
    /// The structure of the DAG the plan was made for: verifies a cache hit found by the
    /// roots' structural keys.
    skeleton: skeleton::Skeleton,
    /// What plain executions of this plan did: 0 none yet, 1 ran without writing in place,
    /// 2 wrote a result in place (see [`Template::note_plain_run`]).
    plain_runs: std::sync::atomic::AtomicU8,
}

/// Scratch space of [`walk`], kept per thread so that a cached eval allocates nothing to
/// walk its DAG: node id -> walk position (`usize::MAX` while the node is on the stack), the
/// frame stack, and the input ids read at each visit.
struct WalkScratch {
    seen: HashMap<u64, usize, FxBuild>,
    stack: Vec<Frame>,
    ids: Vec<u64>,
}

impl WalkScratch {
    fn new() -> WalkScratch {
        WalkScratch {
            seen: HashMap::default(),
            stack: Vec::new(),
            ids: Vec::new(),
        }
    }
}

/// A step of the iterative walk: visit a node, or place it once its inputs are placed
/// (with its realized-ness and where its inputs' ids, as read at the visit, lie in
/// `WalkScratch::ids`).
enum Frame {
    Visit(Arc<Node>),
    Done(Arc<Node>, bool, u32, u32),
}

/// This thread's planning state: scratch of the DAG walk and of the plan key, and the
/// plans it used lately.
struct ThreadPlanning {
    walk: RefCell<WalkScratch>,
    key: RefCell<Walked>,
    recent: RefCell<skeleton::Recent>,
}

thread_local! {
    /// This thread's planning state (per thread: scratch, and a hit takes no lock).
    static PLANNING: ThreadPlanning = ThreadPlanning {
        walk: RefCell::new(WalkScratch::new()),
        key: RefCell::new(Walked::default()),
        recent: RefCell::new(skeleton::Recent::default()),
    };
}

/// Scratch of the DAG walk (seen set, stack, ids).
const WALK: Field<ThreadPlanning, RefCell<WalkScratch>> = Field::new(&PLANNING, |t| &t.walk);
/// Buffers of the plan key and the walked DAG.
const KEY: Field<ThreadPlanning, RefCell<Walked>> = Field::new(&PLANNING, |t| &t.key);

/// The nodes of one evaluation in plan position order (inline for small graphs).
pub(crate) type NodeOrder = SmallVec<[Arc<Node>; 16]>;

/// What planning reads of a walked DAG's live state, by walk position: each node's
/// realized-ness and its inputs' positions (none for a realized node), read once under the
/// node's lock by the walk that wrote the plan key. Planning reads nothing else that can
/// change, so a plan always belongs to its key's DAG.
#[derive(Default)]
pub(crate) struct Dag {
    realized: Vec<bool>,
    /// `edges[start[p]..start[p + 1]]` are the positions of node `p`'s inputs.
    start: Vec<u32>,
    edges: Vec<u32>,
}

impl Dag {
    fn clear(&mut self) {
        self.realized.clear();
        self.start.clear();
        self.start.push(0);
        self.edges.clear();
    }
    /// Whether the node at `p` held a buffer when walked.
    pub(crate) fn realized(&self, p: usize) -> bool {
        self.realized[p]
    }
    /// The positions of the inputs of the node at `p`, in order.
    pub(crate) fn inputs(&self, p: usize) -> &[u32] {
        &self.edges[self.start[p] as usize..self.start[p + 1] as usize]
    }
}

/// Every node reachable from `roots` (realized nodes included, not walked through),
/// inputs before users, in a deterministic order; and the structural plan key of the DAG,
/// written into `key`: the planning settings (`plan_mode`), per node its structure hash (ops without
/// constant values and seeds, dtypes, shapes, devices), realized-ness and the walk
/// positions of its inputs, then the roots' positions. Equal keys mean equal plans, and
/// the plan cache compares whole keys (not a hash of them). `dag` receives what the key
/// was made from.
fn walk(roots: &[Arc<Node>], mode: u64, key: &mut Vec<u64>, dag: &mut Dag) -> NodeOrder {
    WALK.with(|w| match w.try_borrow_mut() {
        Ok(mut scratch) => walk_with(&mut scratch, roots, mode, key, dag),
        // re-entered from a walk on this thread (cannot happen today): fresh scratch
        Err(_) => walk_with(&mut WalkScratch::new(), roots, mode, key, dag),
    })
}

/// The settings a plan depends on besides its DAG, as part of the plan key: bit 0 the
/// fusion switch, bit 1 whether transforms may take their producer's kernel into their
/// first pass (fusion on and the generated FFT passes not ruled out: `fuse_prologues`),
/// bit 2 whether the generated passes are forced (else chosen per transform by
/// measurement, a decision that never changes once made); the bits from 3 the smallest
/// CPU transform input computed in the first pass (`runtime::cpu_fft_lines`), capped.
fn plan_mode() -> u64 {
    let fuse = config::fusion_enabled();
    let backend = config::fft_backend();
    let fft = fuse && backend != config::FftBackend::Cufft;
    let lines = config::cpu_fft_lines_min_elements().min(1 << 56) as u64;
    fuse as u64
        | (fft as u64) << 1
        | ((backend == config::FftBackend::Generated) as u64) << 2
        | lines << 3
}

fn walk_with(
    scratch: &mut WalkScratch,
    roots: &[Arc<Node>],
    mode: u64,
    key: &mut Vec<u64>,
    dag: &mut Dag,
) -> NodeOrder {
    const ON_STACK: usize = usize::MAX;
    let WalkScratch { seen, stack, ids } = scratch;
    seen.clear();
    stack.clear();
    ids.clear();
    key.clear();
    dag.clear();
    key.push(mode);
    let mut order = NodeOrder::new();
    stack.extend(roots.iter().rev().map(|r| Frame::Visit(r.clone())));
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Done(n, realized, from, to) => {
                // inputs are placed: hash this node with their positions
                let mut h = FxHasher::default();
                h.write_u64(n.shash);
                h.write_u8(realized as u8);
                for i in &ids[from as usize..to as usize] {
                    let p = seen.get(i).copied().unwrap_or(ON_STACK);
                    h.write_usize(p);
                    dag.edges.push(p as u32);
                }
                key.push(h.finish());
                dag.realized.push(realized);
                dag.start.push(dag.edges.len() as u32);
                seen.insert(n.id, order.len());
                order.push(n);
            }
            Frame::Visit(n) => {
                match seen.entry(n.id) {
                    std::collections::hash_map::Entry::Occupied(_) => continue,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(ON_STACK);
                    }
                }
                // what planning reads of the node's state, taken under one lock (only
                // inputs not met yet are cloned, to be visited)
                let from = ids.len() as u32;
                let mut visits: Inputs = Inputs::new();
                let realized = {
                    let st = n.settled_state();
                    let realized = st.buffer.is_some();
                    if !realized {
                        for i in &st.inputs {
                            ids.push(i.id);
                            if !seen.contains_key(&i.id) {
                                visits.push(i.clone());
                            }
                        }
                    }
                    realized
                };
                // popped once the inputs' frames above it are all placed
                stack.push(Frame::Done(n, realized, from, ids.len() as u32));
                while let Some(i) = visits.pop() {
                    stack.push(Frame::Visit(i));
                }
            }
        }
    }
    key.extend(roots.iter().map(|r| seen[&r.id] as u64));
    seen.clear();
    order
}

type PlanCache = HashMap<Vec<u64>, Arc<Template>, FxBuild>;

/// The plan cache: per process, as a plan may span devices (copies, sharded plans).
pub(crate) struct Plans {
    /// Plan templates by structural key (at most [`PLAN_CACHE_MAX`]).
    templates: std::sync::RwLock<Option<PlanCache>>,
    /// Node descriptions of recent plans, by the same keys, at debug level 2 and above (to
    /// explain misses: `explain`).
    pub(crate) nodes: std::sync::Mutex<Option<HashMap<Vec<u64>, Vec<String>>>>,
}

/// The process's plan cache.
pub(crate) static PLANS: Plans = Plans {
    templates: std::sync::RwLock::new(None),
    nodes: std::sync::Mutex::new(None),
};
const PLAN_CACHE_MAX: usize = 4096;

/// Per-thread buffers of a walk: the plan key and the DAG it was made from.
#[derive(Default)]
struct Walked {
    key: Vec<u64>,
    dag: Dag,
}

/// The plan template for `roots` (cached by structure) with the walked nodes it is
/// positioned over, and whether it came from the cache. Readers of the plan cache never
/// block each other; the key is built in a per-thread buffer.
pub(crate) fn template_for_hit(roots: &[Arc<Node>]) -> Result<(Arc<Template>, NodeOrder, bool)> {
    let mode = plan_mode(); // read once: the key and the plan agree
    if let Some((t, nodes)) = skeleton::lookup(roots, mode) {
        crate::stats::bump::plan_cache_hits(1);
        return Ok((t, nodes, true));
    }
    let (t, nodes, hit) = KEY.with(|k| match k.try_borrow_mut() {
        Ok(mut w) => {
            let Walked { key, dag } = &mut *w;
            template_with_key(roots, mode, key, dag)
        }
        Err(_) => template_with_key(roots, mode, &mut Vec::new(), &mut Dag::default()),
    })?;
    skeleton::remember(roots, mode, &t);
    Ok((t, nodes, hit))
}

fn template_with_key(
    roots: &[Arc<Node>],
    mode: u64,
    key: &mut Vec<u64>,
    dag: &mut Dag,
) -> Result<(Arc<Template>, NodeOrder, bool)> {
    loop {
        let nodes = walk(roots, mode, key, dag);
        let cached = PLANS
            .templates
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|c| c.get(key.as_slice()).cloned());
        if let Some(t) = cached {
            crate::stats::bump::plan_cache_hits(1);
            return Ok((t, nodes, true));
        }
        if config::debug_level() >= 2 {
            let guard = PLANS.templates.read().unwrap_or_else(|e| e.into_inner());
            let why = crate::explain::plan_miss(key, &nodes, guard.iter().flat_map(|c| c.keys()));
            config::debug_log!(2, "plan cache miss: {why}");
        }
        // Shapes are part of the key, so a plan that was made passed this check.
        check_buffer_sizes(&nodes, dag)?;
        let root_pos: Vec<usize> = key[key.len() - roots.len()..]
            .iter()
            .map(|&p| p as usize)
            .collect();
        let planned = make_template(&nodes, dag, &root_pos, mode & 1 != 0, mode & 2 != 0);
        // Planning reads the walk's snapshot (`dag`), except for the operand views of a
        // matmul (`matmul`), read live. When another thread realized one of those
        // meanwhile, the plan (or its error) belongs to a DAG other than the key's: plan
        // again from a fresh walk instead of caching it. Realization only goes one way, so
        // this ends.
        if nodes.iter().any(|n| n.op == Op::MatMul) {
            let mut again = Vec::with_capacity(key.len());
            drop(walk(roots, mode, &mut again, &mut Dag::default()));
            if again != *key {
                config::debug_log!(2, "a node was realized while planning: planning again");
                continue;
            }
        }
        let t = Arc::new(planned?);
        if config::debug_level() >= 2 {
            crate::explain::remember_plan(key, &nodes);
        }
        let mut guard = PLANS.templates.write().unwrap_or_else(|e| e.into_inner());
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
pub(crate) fn template_for(roots: &[Arc<Node>]) -> Result<(Arc<Template>, NodeOrder)> {
    template_for_hit(roots).map(|(t, n, _)| (t, n))
}

impl TStep {
    /// DAG positions this step reads. Exhaustive on purpose: a new kind of step must say
    /// what it reads (in-place reuse and traced functions rely on it).
    pub(crate) fn reads(&self) -> SmallVec<[usize; 8]> {
        match self {
            TStep::Kernel { inputs, .. } => inputs.iter().copied().collect(),
            TStep::FftFused {
                inputs,
                epilogue,
                dst,
                round,
                ..
            } => {
                let mut r: SmallVec<[usize; 8]> = inputs.iter().copied().collect();
                // the middle kernels' and the epilogue's inputs but the transforms, which
                // the step computes
                for m in round {
                    let not_value = |&(k, _): &(usize, &usize)| k != m.value_input as usize;
                    r.extend(
                        m.inputs
                            .iter()
                            .enumerate()
                            .filter(not_value)
                            .map(|(_, &p)| p),
                    );
                }
                let last = round.last().map_or(*dst, |m| m.dst);
                if let Some(e) = epilogue {
                    r.extend(e.inputs.iter().copied().filter(|&p| p != last));
                }
                r
            }
            TStep::Copy { src, .. } | TStep::Fft { src, .. } | TStep::Alias { src, .. } => {
                [*src].into_iter().collect()
            }
            TStep::MatMul { a, b, .. } => [*a, *b].into_iter().collect(),
            TStep::Scatter {
                values, indices, ..
            } => [*values, *indices].into_iter().collect(),
        }
    }
    /// DAG positions this step computes (exhaustive, like [`TStep::reads`]).
    pub(crate) fn writes(&self) -> SmallVec<[usize; 4]> {
        match self {
            TStep::Kernel { outputs, .. } => outputs.iter().copied().collect(),
            TStep::FftFused {
                dst,
                epilogue,
                round,
                ..
            } => match (epilogue, round.last()) {
                (Some(e), _) => [e.out].into_iter().collect(),
                (None, Some(m)) => [m.dst].into_iter().collect(),
                (None, None) => [*dst].into_iter().collect(),
            },
            TStep::Copy { dst, .. }
            | TStep::Fft { dst, .. }
            | TStep::Alias { dst, .. }
            | TStep::MatMul { dst, .. }
            | TStep::Scatter { dst, .. } => [*dst].into_iter().collect(),
        }
    }
}

impl Template {
    /// Records a plain execution of this plan and whether it wrote a result in place.
    pub(crate) fn note_plain_run(&self, in_place: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        // a load first: every eval passes here, and a read-modify-write of a line other
        // threads read would bounce it between them
        match (in_place, self.plain_runs.load(Relaxed)) {
            (true, 2) | (false, 1 | 2) => {}
            (true, _) => self.plain_runs.store(2, Relaxed),
            (false, _) => {
                let _ = self.plain_runs.compare_exchange(0, 1, Relaxed, Relaxed);
            }
        }
    }
    /// Whether this plan has run plainly and never written in place: a single-kernel plan
    /// may then replay as a CUDA graph (`exec::replay::eval_graph`) without losing the
    /// in-place writes of a loop such as `u = f(u)`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn ran_without_in_place(&self) -> bool {
        self.plain_runs.load(std::sync::atomic::Ordering::Relaxed) == 1
    }
    /// The steps, over DAG positions.
    pub(crate) fn steps(&self) -> &[TStep] {
        &self.steps
    }
    /// The in-place opportunities, checked at each execution (`exec::inplace`).
    pub(crate) fn reuse(&self) -> &[inplace::Cand] {
        &self.reuse
    }
}

/// A set of DAG positions.
pub(super) type PosSet = HashSet<usize, FxBuild>;

fn make_template(
    nodes: &[Arc<Node>],
    dag: &Dag,
    root_pos: &[usize],
    fuse: bool,
    fft_fuse: bool,
) -> Result<Template> {
    // node id -> position, for the library steps (which resolve their operands by node)
    let pos: HashMap<u64, usize, FxBuild> = match nodes.iter().any(|n| n.op.is_library()) {
        true => nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect(),
        false => HashMap::default(),
    };
    let pos = &pos;
    // the materialized set, by position
    let mut mat = vec![false; nodes.len()];
    let mut aliases = Vec::new();
    for &rp in root_pos {
        let r = &nodes[rp];
        if dag.realized(rp) {
            continue;
        }
        // a root reshape is its input's buffer under another shape: no copy
        match (&r.op, dag.inputs(rp).first()) {
            (Op::Reshape, Some(&i)) => {
                let i = i as usize;
                if !dag.realized(i) {
                    mat[i] = true;
                }
                aliases.push(TStep::Alias { src: i, dst: rp });
            }
            _ => mat[rp] = true,
        }
    }
    for (p, n) in nodes.iter().enumerate() {
        if dag.realized(p) {
            continue;
        }
        let is_op = !matches!(n.op, Op::Const(_)) && !(n.op.is_free_view());
        if n.op.is_library() || (!fuse && is_op) {
            mat[p] = true;
        }
        if n.op.is_library() {
            for i in matmul::library_reads(n)? {
                let ip = pos[&i.id];
                if !dag.realized(ip) {
                    mat[ip] = true;
                }
            }
        }
        if matches!(n.op, Op::Reduce(..)) {
            mat[p] = true;
        }
    }
    if fuse {
        absorb_epilogues(nodes, dag, root_pos, &mut mat);
    }
    // Grow the materialized set until no computation is read in two index contexts.
    loop {
        let (mut steps, extra, cuts) = lower::build(nodes, dag, pos, &mat, fuse)?;
        if !cuts.is_empty() {
            // kernels over the argument limit: cut them all at once, then plan again
            config::debug_log!(
                2,
                "plan split: {} node(s) materialized to keep kernel arguments under the limit",
                cuts.len()
            );
            let mut grew = false;
            for p in cuts {
                grew |= !std::mem::replace(&mut mat[p], true);
            }
            if grew {
                continue;
            }
        }
        if extra.is_empty() {
            crate::stats::bump::plans(1);
            steps.append(&mut aliases);
            if fft_fuse {
                fuse_prologues(&mut steps, nodes, dag, root_pos);
            }
            let reuse = inplace::candidates(&steps, nodes, dag, root_pos);
            let skeleton = skeleton::Skeleton::new(nodes, dag, root_pos);
            return Ok(Template {
                steps,
                reuse,
                skeleton,
                plain_runs: Default::default(),
            });
        }
        // Materialize only the outermost of the reported nodes: the ones below them may be
        // read in a single context once these are buffers.
        let below = descendants(dag, &extra, &mat);
        let mut grew = false;
        for p in extra.into_iter().filter(|p| !below.contains(p)) {
            config::debug_log!(
                2,
                "plan split at node #{}: it is materialized because it is read at several \
                 indices (or under several guards), by two kernels, or its kernel exceeded \
                 the argument-size limit",
                nodes[p].id
            );
            grew |= !std::mem::replace(&mut mat[p], true);
        }
        if !grew {
            return Err(Error::internal("plan", "materialization made no progress"));
        }
    }
}

/// Refuses a DAG holding an unevaluated node whose buffer could not exist (its bytes
/// overflow or exceed `isize::MAX`), whether or not the plan would materialize that node:
/// NumPy could not have created it either, and running such a plan would at best take
/// years (a reduction over 2^62 broadcast zeros) and at worst abort on allocation.
fn check_buffer_sizes(nodes: &[Arc<Node>], dag: &Dag) -> Result<()> {
    for (p, n) in nodes.iter().enumerate() {
        if dag.realized(p) {
            continue;
        }
        if crate::shape::buffer_bytes(n.size(), n.dtype).is_none() {
            return Err(Error::Shape {
                op: "eval",
                msg: format!(
                    "{} of shape {:?} and dtype {}: {} elements of {} bytes are more than a \
                     buffer can hold (isize::MAX bytes)",
                    n.op.name(),
                    n.shape.as_slice(),
                    n.dtype,
                    n.size(),
                    n.dtype.size()
                ),
            });
        }
    }
    Ok(())
}

/// Lets a reduction's kernel compute its epilogue: while the only user of a materialized
/// reduction (or of its epilogue so far) is an elementwise op of the same shape whose other
/// operands are scalar constants, that user is materialized instead (`sum / n`,
/// `sqrt(sum)`, casts), so the reduction kernel stores the finished value.
fn absorb_epilogues(nodes: &[Arc<Node>], dag: &Dag, root_pos: &[usize], mat: &mut [bool]) {
    if !nodes.iter().any(|n| matches!(n.op, Op::Reduce(..))) {
        return;
    }
    // users of each position (a user reading a node twice is listed twice)
    let mut users: Vec<SmallVec<[usize; 2]>> = vec![SmallVec::new(); nodes.len()];
    for p in 0..nodes.len() {
        for &i in dag.inputs(p) {
            users[i as usize].push(p);
        }
    }
    let root_pos: PosSet = root_pos.iter().copied().collect();
    for (r, n) in nodes.iter().enumerate() {
        if !matches!(n.op, Op::Reduce(..)) || dag.realized(r) {
            continue;
        }
        let mut cur = r;
        loop {
            if root_pos.contains(&cur) {
                break;
            }
            let [e] = users[cur].as_slice() else {
                break;
            };
            let e = *e;
            let en = &nodes[e];
            let ok = en.op.is_elementwise()
                && en.shape == nodes[cur].shape
                && dag
                    .inputs(e)
                    .iter()
                    .all(|&i| i as usize == cur || lower::is_scalar_const(&nodes[i as usize]));
            if !ok {
                break;
            }
            mat[cur] = false;
            mat[e] = true;
            cur = e;
        }
    }
}

/// Takes the kernel computing a transform's input into the transform's first pass
/// (`TStep::FftFused`), so that the input is computed where the pass loads it and never
/// stored: a transform on a CUDA device the generated passes cover (C2C; R2C and C2R, whose
/// real end is then computed in the pass along the last axis), or on the CPU one whose
/// first pass runs along the last axis (`runtime::cpu_fft_lines`, the line structure,
/// which takes no consumer, round trip or chain), of an input that is no
/// root, computed by an elementwise kernel of one output over the input's shape, and read
/// by no other step. Then, where the transform's
/// only consumer is such a kernel reading it through rolls only (`epilogue_of`), that
/// kernel too, into the last pass. Only transforms the generated passes run
/// (`generated_runs`), when the FFT setting does not rule them out (`plan_mode`).
fn fuse_prologues(steps: &mut Vec<TStep>, nodes: &[Arc<Node>], dag: &Dag, root_pos: &[usize]) {
    use lazyfuse_codegen::cuda::fft::{fused_layout, Fused};
    // (producer step, transform step, consumer step and the shifts of its rolls)
    type Found = (usize, usize, Option<(usize, Vec<usize>)>);
    let mut found: Vec<Found> = Vec::new();
    for (fi, s) in steps.iter().enumerate() {
        let TStep::Fft { src, dst } = *s else {
            continue;
        };
        let (sn, dn) = (&nodes[src], &nodes[dst]);
        let Op::Fft(spec) = &dn.op else {
            continue;
        };
        if root_pos.contains(&src) {
            continue;
        }
        let on_cpu = !dn.device.is_cuda();
        if on_cpu {
            if !crate::runtime::cpu_fft_lines(spec, &sn.shape) {
                continue;
            }
        } else {
            // the shape the passes plan over and their complex dtype: the real array's
            // and the spectrum's for R2C and C2R
            let (Some(shape), Some(dtype)) = (
                spec.passes_shape(&sn.shape, &dn.shape),
                spec.passes_dtype(sn.dtype, dn.dtype),
            ) else {
                continue;
            };
            if !generated_runs(dn, spec, shape, dtype) {
                continue;
            }
        }
        let producer = steps.iter().position(
            |s| matches!(s, TStep::Kernel { outputs, .. } if outputs.as_slice() == [src]),
        );
        let Some(ki) = producer else {
            continue;
        };
        let TStep::Kernel { kernel, shape, .. } = &steps[ki] else {
            continue;
        };
        let pro = Fused {
            prologue: Some(kernel),
            ..Default::default()
        };
        let fits = kernel.reduce.is_none()
            && shape.as_slice() == sn.shape.as_slice()
            && kernel.outputs.as_slice() == [sn.dtype]
            && (on_cpu || fused_layout(&pro).is_ok());
        let other_reader = steps
            .iter()
            .enumerate()
            .any(|(i, s)| i != fi && s.reads().contains(&src));
        if fits && !other_reader && ki < fi {
            found.push((ki, fi, None));
        }
    }
    if found.is_empty() {
        return;
    }
    // Round trips: a transform whose only consumer is the next one's prologue, reading it
    // at its own index, back along the same axes (`ifft2(fft2(u) * m)`): one step whose
    // pass along the first's last axis goes there and back. Linked on (a spectral step
    // repeated, its update between the steps), the transforms make a chain: one step that
    // turns in one pass between each two.
    // each transform's consumer that its last pass could compute
    // (none on the CPU, whose line structure takes the producer only)
    let mut consumers: Vec<Option<(usize, Vec<usize>)>> = found
        .iter()
        .map(|f| match &steps[f.1] {
            TStep::Fft { dst, .. } if nodes[*dst].device.is_cuda() => {
                epilogue_of(steps, f.1, nodes, dag, root_pos)
            }
            _ => None,
        })
        .collect();
    // the transform whose prologue each kernel step is
    let prologue_of: HashMap<usize, usize> =
        found.iter().enumerate().map(|(i, f)| (f.0, i)).collect();
    let mut next: HashMap<usize, usize> = HashMap::new();
    let mut has_prev: HashSet<usize> = HashSet::new();
    for a in 0..found.len() {
        let Some((ci, shifts)) = &consumers[a] else {
            continue;
        };
        let Some(&b) = prologue_of.get(ci) else {
            continue;
        };
        let pair = [found[a].1, found[b].1];
        if shifts.iter().any(|&s| s != 0)
            || has_prev.contains(&b)
            || !(chains(steps, nodes, &pair) || real_trip(steps, nodes, &pair))
        {
            continue;
        }
        next.insert(a, b);
        has_prev.insert(b);
    }
    // the chains from each transform no link reaches, each as long as the generated passes
    // run it as one program; where they refuse a link, the next chain starts after it
    let mut second_of: HashMap<usize, usize> = HashMap::new();
    for start in (0..found.len()).filter(|a| !has_prev.contains(a)) {
        let mut todo = vec![start];
        while let Some(&b) = next.get(todo.last().unwrap_or(&start)) {
            todo.push(b);
        }
        let mut at = 0;
        while at + 1 < todo.len() {
            let fs: Vec<usize> = todo[at..].iter().map(|&i| found[i].1).collect();
            // the longest chain from `at` (a chain's prefix is one; pairs were checked)
            let (mut lo, mut hi) = (2, fs.len());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                match chains(steps, nodes, &fs[..mid]) {
                    true => lo = mid,
                    false => hi = mid - 1,
                }
            }
            for w in todo[at..at + lo].windows(2) {
                second_of.insert(w[0], w[1]);
            }
            at += lo;
        }
    }
    // A kernel joins one fused step only: one that is a transform's prologue is no other
    // transform's epilogue (in `ifft2(fft2(u) * m)` without a round trip the product is
    // the inverse's prologue, not the forward's epilogue), and an epilogue serves one
    // transform.
    let mut epilogues: HashSet<usize> = HashSet::new();
    for (i, f) in found.iter_mut().enumerate() {
        if second_of.contains_key(&i) {
            continue;
        }
        f.2 = consumers[i]
            .take()
            .filter(|(ci, _)| !prologue_of.contains_key(ci) && epilogues.insert(*ci));
    }
    let seconds: HashSet<usize> = second_of.values().copied().collect();
    let mut taken: Vec<Option<TStep>> = std::mem::take(steps).into_iter().map(Some).collect();
    // the fused step goes where the (last) consumer was (its other inputs are ready there),
    // else where the (last) transform was
    for (i, (ki, fi, _)) in found.iter().enumerate() {
        if seconds.contains(&i) {
            continue;
        }
        let (
            Some(TStep::Kernel {
                kernel,
                inputs,
                shape,
                params,
                ..
            }),
            Some(TStep::Fft { src, dst }),
        ) = (taken[*ki].take(), taken[*fi].take())
        else {
            continue; // not reached: the pairs name a kernel and a transform each
        };
        let Op::Fft(spec) = &nodes[dst].op else {
            continue;
        };
        // the later transforms of a chain, each with the kernel before it
        let mut round: Vec<RoundPlan> = Vec::new();
        let mut end = i;
        while let Some(&b) = second_of.get(&end) {
            let (mk, mf, _) = &found[b];
            let (
                Some(TStep::Kernel {
                    kernel,
                    inputs,
                    params,
                    ..
                }),
                Some(TStep::Fft { dst: d2, .. }),
            ) = (taken[*mk].take(), taken[*mf].take())
            else {
                break; // not reached: `found` names a kernel and a transform
            };
            let Op::Fft(spec2) = &nodes[d2].op else {
                break;
            };
            let before = round.last().map_or(dst, |r| r.dst);
            let value_input = inputs.iter().position(|&p| p == before).unwrap_or(0) as u32;
            round.push(RoundPlan {
                kernel,
                inputs,
                params,
                value_input,
                spec: Arc::new((**spec2).clone()),
                dst: d2,
            });
            end = b;
        }
        let (fi, ci) = (found[end].1, &found[end].2);
        let dst_last = round.last().map_or(dst, |r| r.dst);
        let at = ci.as_ref().map_or(fi, |c| c.0);
        let epilogue = ci
            .as_ref()
            .and_then(|(ci, shifts)| match taken[*ci].take() {
                Some(TStep::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    params,
                    ..
                }) => Some(epi_plan(
                    kernel, inputs, outputs[0], params, dst_last, shifts,
                )),
                _ => None,
            });
        config::debug_log!(
            2,
            "plan: the kernel computing node #{} runs inside the first pass of its transform{}{}",
            nodes[src].id,
            if !round.is_empty() {
                ", the transform's consumer and the transform back in the same passes"
            } else {
                ""
            },
            if epilogue.is_some() {
                ", its consumer inside the last"
            } else {
                ""
            }
        );
        taken[at] = Some(TStep::FftFused {
            kernel,
            inputs,
            shape,
            params,
            spec: Arc::new((**spec).clone()),
            dst,
            round,
            epilogue: epilogue.map(Box::new),
        });
    }
    steps.extend(taken.into_iter().flatten());
}

/// Whether the fused transform steps `pair` are an R2C transform and the C2R transform back
/// over the same axes into the R2C's input shape and dtype (the second's prologue reading
/// the first at its own index, `fuse_prologues`) that the generated passes run as one
/// program (`lazyfuse_codegen::fft::plan_real_round_trip`: the turning pass over the half
/// spectrum). Such a round trip links no further (`chains` takes C2C transforms only).
fn real_trip(steps: &[TStep], nodes: &[Arc<Node>], pair: &[usize; 2]) -> bool {
    use crate::graph::FftKind;
    let mut ends = pair.iter().map(|&f| match &steps[f] {
        TStep::Fft { src, dst } => match &nodes[*dst].op {
            Op::Fft(spec) => Some((&*nodes[*src], &*nodes[*dst], &**spec)),
            _ => None,
        },
        _ => None,
    });
    let (Some(Some((x, spectrum, fwd))), Some(Some((_, y, back)))) = (ends.next(), ends.next())
    else {
        return false;
    };
    fwd.kind == FftKind::R2C
        && back.kind == FftKind::C2R
        && fwd.axes == back.axes
        && fwd.support.is_none()
        && x.shape == y.shape
        && x.dtype == y.dtype
        && lazyfuse_codegen::fft::plan_real_round_trip(&x.shape, &fwd.axes, spectrum.dtype)
            .is_some()
}

/// Whether the fused transform steps `fs` (each one's prologue reading the one before at
/// its own index, `fuse_prologues`) make a chain of round trips the generated passes run
/// as one program: C2C transforms of one shape and dtype in alternating directions over
/// the same axes, all inputs but the first's without a known support, with a program
/// (`lazyfuse_codegen::fft::plan_chain`).
fn chains(steps: &[TStep], nodes: &[Arc<Node>], fs: &[usize]) -> bool {
    let mut links: SmallVec<[(&[usize], bool); 8]> = SmallVec::new();
    let mut first: Option<(&Node, &crate::graph::FftSpec)> = None;
    for &f in fs {
        let TStep::Fft { dst, .. } = &steps[f] else {
            return false;
        };
        let n = &*nodes[*dst];
        let Op::Fft(spec) = &n.op else {
            return false;
        };
        if spec.kind != crate::graph::FftKind::C2C {
            return false;
        }
        match first {
            None => first = Some((n, spec)),
            Some((n0, _)) => {
                if n.shape != n0.shape || n.dtype != n0.dtype || spec.support.is_some() {
                    return false;
                }
            }
        }
        links.push((&spec.axes, spec.inverse));
    }
    let Some((n0, s0)) = first else {
        return false;
    };
    lazyfuse_codegen::fft::plan_chain(&n0.shape, &links, n0.dtype, s0.support.as_deref()).is_some()
}

/// Whether the generated passes run the transform `dn` (`runtime::fft_prefers_generated`:
/// by measurement unless forced). A device error here leaves the transform unfused: the
/// run meets the error again if it persists.
fn generated_runs(
    dn: &Node,
    spec: &crate::graph::FftSpec,
    shape: &[usize],
    dtype: lazyfuse_codegen::DType,
) -> bool {
    crate::runtime::fft_prefers_generated(&dn.device, spec, shape, dtype, true).unwrap_or_else(
        |e| {
            config::debug_log!(1, "plan: no FFT choice for node #{}: {e}", dn.id);
            false
        },
    )
}

/// The consumer step of the transform step `fi` that its last pass can compute: the only
/// reader of the transform (no root), a kernel of one output over the transform's shape
/// reading it in one unguarded load, at its own index or through rolls only (each read by
/// the next alone).
fn epilogue_of(
    steps: &[TStep],
    fi: usize,
    nodes: &[Arc<Node>],
    dag: &Dag,
    root_pos: &[usize],
) -> Option<(usize, Vec<usize>)> {
    let TStep::Fft { dst, .. } = steps[fi] else {
        return None;
    };
    if root_pos.contains(&dst) {
        return None;
    }
    let readers: Vec<usize> = (0..steps.len())
        .filter(|&i| i != fi && steps[i].reads().contains(&dst))
        .collect();
    let [ci] = readers.as_slice() else {
        return None;
    };
    let TStep::Kernel {
        kernel,
        inputs,
        outputs,
        shape,
        ..
    } = &steps[*ci]
    else {
        return None;
    };
    let [out] = outputs.as_slice() else {
        return None;
    };
    let slot = inputs.iter().position(|&p| p == dst)? as u32;
    let loads = kernel
        .values
        .iter()
        .filter(|v| matches!(v.inst, lazyfuse_codegen::Inst::Load { input, .. } if input == slot))
        .count();
    let unguarded = kernel.values.iter().all(|v| {
        !matches!(v.inst, lazyfuse_codegen::Inst::Load { input, guard: Some(_), .. } if input == slot)
    });
    if kernel.reduce.is_some()
        || shape.as_slice() != nodes[dst].shape.as_slice()
        || nodes[*out].shape != nodes[dst].shape
        || loads != 1
        || !unguarded
    {
        return None;
    }
    // a load at the kernel's own linear index reads each element where the kernel computes
    // it, however the value spreads through the kernel after it (`u + (u - u^3) dt` of a
    // transform's real part); through rolls, the shifts
    let own_index = kernel.values.iter().any(|v| {
        matches!(v.inst, lazyfuse_codegen::Inst::Load { input, index, .. }
            if input == slot
                && kernel.values.get(index as usize).map(|x| x.inst)
                    == Some(lazyfuse_codegen::Inst::Index))
    });
    match rolls_to(dst, *out, nodes, dag) {
        Some(shifts) => Some((*ci, shifts)),
        None if own_index => Some((*ci, vec![0; nodes[dst].shape.len()])),
        None => None,
    }
}

/// The shift per axis of the rolls through which `out`'s computation reads `dst`: from
/// `dst` up, each node has one reader, rolls first, then elementwise ops up to `out`
/// (which read their inputs at their own index); `None` for any other shape of the path.
/// `out`'s element `j` then reads `dst`'s element `i` with `j_k = (i_k + s_k) mod n_k`.
fn rolls_to(dst: usize, out: usize, nodes: &[Arc<Node>], dag: &Dag) -> Option<Vec<usize>> {
    let shape = &nodes[dst].shape;
    let mut shifts = vec![0usize; shape.len()];
    let mut elementwise = false;
    let mut cur = dst;
    while cur != out {
        let readers: Vec<usize> = (cur + 1..nodes.len())
            .filter(|&q| dag.inputs(q).iter().any(|&i| i as usize == cur))
            .collect();
        let [u] = readers.as_slice() else {
            return None;
        };
        match nodes[*u].op {
            Op::Roll { axis, shift } if !elementwise => {
                shifts[axis] = (shifts[axis] + shift) % shape[axis];
            }
            ref op if op.is_elementwise() && nodes[*u].shape == *shape => elementwise = true,
            _ => return None,
        }
        cur = *u;
    }
    Some(shifts)
}

/// The epilogue of a fused transform from its consumer kernel: the consumer with one I64
/// shift parameter per axis appended (`rolls_to`).
fn epi_plan(
    kernel: Arc<Kernel>,
    inputs: Vec<usize>,
    out: usize,
    mut params: Vec<ParamSrc>,
    dst: usize,
    shifts: &[usize],
) -> EpiPlan {
    let value_input = inputs.iter().position(|&p| p == dst).unwrap_or(0) as u32;
    let mut k = (*kernel).clone();
    let shift_param = k.params.len() as u32;
    // fixed by the plan's structure (shapes and shifts are part of the plan key)
    for &s in shifts {
        k.params.push(lazyfuse_codegen::DType::I64);
        params.push(ParamSrc::Fixed(lazyfuse_codegen::Scalar::I64(s as i64)));
    }
    EpiPlan {
        kernel: Arc::new(k),
        inputs,
        params,
        value_input,
        shift_param,
        out,
    }
}

/// Nodes computed beneath any of `tops` (walking inputs, stopping at materialized nodes).
fn descendants(dag: &Dag, tops: &PosSet, mat: &[bool]) -> PosSet {
    let mut below = PosSet::default();
    let mut stack: Vec<usize> = tops
        .iter()
        .flat_map(|&p| dag.inputs(p).iter().map(|&i| i as usize))
        .collect();
    while let Some(p) = stack.pop() {
        if mat[p] || dag.realized(p) || !below.insert(p) {
            continue;
        }
        stack.extend(dag.inputs(p).iter().map(|&i| i as usize));
    }
    below
}
