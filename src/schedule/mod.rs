//! Planning: splits the DAG under the requested roots into steps (fused kernels, copies),
//! cached as a `Template` by structure. Decisions only: `exec` binds and runs them, and a
//! bound `exec::Schedule` can be printed and asserted on.
//!
//! Rules: elementwise ops, broadcasts and every view fuse into their consumer as index
//! arithmetic. A node is materialized (stored by the kernel that computes it) when it is a
//! root, the input of a boundary (a copy between devices, an FFT, a matmul: see `matmul`
//! for the operand views a matmul reads without a copy), or a computation read at
//! different indices (or under different guards) -- read at one index it is computed once
//! inside the kernel, even with several consumers. Materialized nodes of one shape whose
//! dependencies are met at the same time share one multi-output kernel.

pub(crate) mod inplace;
mod lower;
mod matmul;

use crate::graph::{FxBuild, FxHasher, Inputs, Node, Op};
use crate::runtime::matmul::GemmSpec;
use crate::{config, Error, Result};
use lazyfuse_codegen::{Kernel, Scalar};
use smallvec::SmallVec;
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

/// The nodes of one evaluation in plan position order (inline for small graphs).
pub(crate) type Walked = SmallVec<[Arc<Node>; 16]>;

/// Every node reachable from `roots` (realized nodes included, not walked through),
/// inputs before users, in a deterministic order; and the structural plan key of the DAG,
/// written into `key`: the fusion switch, per node its structure hash (ops without
/// constant values and seeds, dtypes, shapes, devices), realized-ness and the walk
/// positions of its inputs, then the roots' positions. Equal keys mean equal plans, and
/// the plan cache compares whole keys (not a hash of them).
fn walk(roots: &[Arc<Node>], fuse: bool, key: &mut Vec<u64>) -> Walked {
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
) -> Walked {
    const ON_STACK: usize = usize::MAX;
    let WalkScratch { seen, stack } = scratch;
    seen.clear();
    stack.clear();
    key.clear();
    key.push(fuse as u64);
    let mut order = Walked::new();
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
pub(crate) fn template_for_hit(roots: &[Arc<Node>]) -> Result<(Arc<Template>, Walked, bool)> {
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
) -> Result<(Arc<Template>, Walked, bool)> {
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
        // Shapes are part of the key, so a plan that was made passed this check.
        check_buffer_sizes(&nodes)?;
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
pub(crate) fn template_for(roots: &[Arc<Node>]) -> Result<(Arc<Template>, Walked)> {
    template_for_hit(roots).map(|(t, n, _)| (t, n))
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
    /// The in-place opportunities, checked at each execution (`exec::inplace`).
    pub(crate) fn reuse(&self) -> &[inplace::Cand] {
        &self.reuse
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
        let (mut steps, extra, cuts) = lower::build(nodes, pos, &mat, fuse)?;
        if !cuts.is_empty() {
            // kernels over the argument limit: cut them all at once, then plan again
            config::debug_log!(
                2,
                "plan split: {} node(s) materialized to keep kernel arguments under the limit",
                cuts.len()
            );
            let before = mat.len();
            mat.extend(cuts);
            if mat.len() > before {
                continue;
            }
        }
        if extra.is_empty() {
            crate::stats::bump::plans(1);
            steps.append(&mut aliases);
            let reuse = inplace::candidates(&steps, nodes, pos, roots);
            return Ok(Template { steps, reuse });
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

/// Refuses a DAG holding an unevaluated node whose buffer could not exist (its bytes
/// overflow or exceed `isize::MAX`), whether or not the plan would materialize that node:
/// NumPy could not have created it either, and running such a plan would at best take
/// years (a reduction over 2^62 broadcast zeros) and at worst abort on allocation.
fn check_buffer_sizes(nodes: &[Arc<Node>]) -> Result<()> {
    for n in nodes.iter().filter(|n| n.buffer().is_none()) {
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
