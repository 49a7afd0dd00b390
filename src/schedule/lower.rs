//! Lowering: turns groups of materialized nodes into kernel IR (`lazyfuse_codegen::Kernel`)
//! plus launch arguments, and reports computations read in more than one index context
//! (which the planner then materializes).

use super::{ParamSrc, TStep};
use crate::config;
use crate::graph::{FxBuild, Node, Op};
use crate::{Error, Result};
use lazyfuse_codegen::{BinaryOp, Builder, DType, Inst, ReduceOp, Scalar, ValueId};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Most bytes of scalar arguments one kernel may take before the planner splits it (the
/// CUDA argument struct must stay under 4 KB).
const MAX_ARG_BYTES: usize = 3500;

/// Most IR values one kernel may hold before the planner splits it: NVRTC's compile time
/// grows faster than the kernel's length (a 10^5-op kernel took minutes).
const MAX_KERNEL_VALUES: usize = 8192;

/// Most computed nodes the planner's one-pass split leaves in one kernel.
const MAX_KERNEL_NODES: usize = 2048;

type Axes = SmallVec<[ValueId; 4]>;

/// An index into a node: its linear index and/or its multi-index, and the condition under
/// which it is in bounds (from padding or concatenation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Idx {
    lin: Option<ValueId>,
    axes: Option<Axes>,
    guard: Option<ValueId>,
}

impl Idx {
    /// The identity of the index for "same index" decisions.
    fn key(&self) -> Idx {
        match self.lin {
            Some(_) => Idx {
                lin: self.lin,
                axes: None,
                guard: self.guard,
            },
            None => self.clone(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Stride(usize),
    Size(usize),
    /// Extent of an axis of a view's source (pad bounds).
    SrcSize(usize),
    /// Element count of a broadcast's source.
    SrcTotal,
    Start(usize),
    Step(usize),
    Before(usize),
    Offset(usize),
    Value,
    Fill,
    Seed,
}

/// What [`Lowerer::enter`] found: the value, or a computation to lower.
enum Entered {
    Value(ValueId),
    Frame(Frame),
}

/// The next move of a frame: lower an input at an index, or finish with a value.
enum Next {
    Input(Arc<Node>, Idx),
    Done(ValueId),
}

/// Per-op state of a frame beyond the input values it has collected.
enum Cont {
    /// Nothing emitted yet.
    Start,
    /// Pad: the in-bounds condition the source's value is selected by.
    Pad { valid: ValueId },
    /// Concat: the node's multi-index, the upper-bound condition of each input lowered so
    /// far (none for the last), and the start of the next input along the axis.
    Concat {
        axes: Axes,
        conds: Vec<Option<ValueId>>,
        offset: usize,
    },
}

/// One computation being lowered: a node at an index, with the values of the inputs
/// lowered so far.
struct Frame {
    node: Arc<Node>,
    inputs: crate::graph::Inputs,
    idx: Idx,
    values: SmallVec<[ValueId; 3]>,
    cont: Cont,
}

struct Lowerer<'a> {
    b: Builder,
    params: Vec<ParamSrc>,
    pos: &'a HashMap<u64, usize, FxBuild>,
    param_memo: HashMap<(u64, Role), ValueId>,
    inputs: Vec<Arc<Node>>,
    input_slot: HashMap<u64, u32>,
    memo: HashMap<(u64, Idx), ValueId>,
    mat: &'a HashSet<u64>,
    load_free: &'a HashSet<u64>,
    /// The index context each computation was read in by this kernel.
    seen: HashMap<u64, Idx>,
    extra: &'a mut HashSet<u64>,
}

impl Lowerer<'_> {
    fn param(&mut self, node: u64, role: Role, value: Scalar) -> ValueId {
        if let Some(&v) = self.param_memo.get(&(node, role)) {
            return v;
        }
        let v = self.b.param(value.dtype());
        // values that can change without changing the plan's structure are re-read from
        // the node at every bind; everything else is fixed by the structure
        let src = match (role, self.pos.get(&node)) {
            (Role::Value | Role::Seed, Some(&p)) => ParamSrc::Node(p),
            _ => ParamSrc::Fixed(value),
        };
        self.params.push(src);
        self.param_memo.insert((node, role), v);
        v
    }
    fn iparam(&mut self, node: u64, role: Role, value: usize) -> ValueId {
        self.param(node, role, Scalar::I64(value as i64))
    }
    fn c(&mut self, x: i64) -> ValueId {
        self.b.const_i64(x)
    }
    fn and(&mut self, a: Option<ValueId>, b: ValueId) -> ValueId {
        match a {
            Some(a) => self.b.binary(BinaryOp::And, a, b),
            None => b,
        }
    }

    /// The linear (C-order) index into `node` for `idx`.
    fn linear(&mut self, idx: &Idx, node: &Node) -> ValueId {
        if let Some(l) = idx.lin {
            return l;
        }
        let axes = idx
            .axes
            .as_ref()
            .expect("an index has a linear or a multi-index form");
        let strides = crate::shape::strides(&node.shape);
        let mut acc: Option<ValueId> = None;
        for (k, &a) in axes.iter().enumerate() {
            if node.shape[k] == 1 {
                continue;
            }
            let term = if k + 1 == axes.len() {
                a
            } else {
                let s = self.iparam(node.id, Role::Stride(k), strides[k]);
                self.b.binary(BinaryOp::Mul, a, s)
            };
            acc = Some(match acc {
                Some(x) => self.b.binary(BinaryOp::Add, x, term),
                None => term,
            });
        }
        acc.unwrap_or_else(|| self.c(0))
    }

    /// The multi-index into `node` for `idx`.
    fn axes(&mut self, idx: &Idx, node: &Node) -> Axes {
        if let Some(a) = &idx.axes {
            return a.clone();
        }
        let lin = idx
            .lin
            .expect("an index has a linear or a multi-index form");
        let strides = crate::shape::strides(&node.shape);
        let first = node.shape.iter().position(|&n| n != 1);
        (0..node.shape.len())
            .map(|k| {
                if node.shape[k] == 1 {
                    return self.c(0);
                }
                let q = if k + 1 == node.shape.len() {
                    lin
                } else {
                    let s = self.iparam(node.id, Role::Stride(k), strides[k]);
                    self.b.binary(BinaryOp::IdxDiv, lin, s)
                };
                if Some(k) == first {
                    q // the outermost non-trivial axis needs no modulo
                } else {
                    let n = self.iparam(node.id, Role::Size(k), node.shape[k]);
                    self.b.binary(BinaryOp::IdxMod, q, n)
                }
            })
            .collect()
    }

    fn load(&mut self, node: &Arc<Node>, idx: &Idx) -> ValueId {
        let slot = match self.input_slot.get(&node.id) {
            Some(&s) => s,
            None => {
                let s = self.b.input(node.dtype);
                self.inputs.push(node.clone());
                self.input_slot.insert(node.id, s);
                s
            }
        };
        let off = self.linear(idx, node);
        self.b.push(
            Inst::Load {
                input: slot,
                index: off,
                guard: idx.guard,
            },
            node.dtype,
        )
    }

    /// The value of `node` at `idx` in the kernel computing `computing`: a load of a
    /// materialized node, else its computation (memoized per node and index context).
    ///
    /// An explicit-stack machine, so that the depth of the DAG is bounded by memory, not by
    /// the thread's stack: each frame is one computation whose inputs are being lowered, and
    /// `resume` takes it to its next input or to its value. The IR is emitted in the order
    /// of a depth-first recursion over the inputs.
    fn lower(&mut self, node: &Arc<Node>, idx: &Idx, computing: u64) -> Result<ValueId> {
        let mut stack: Vec<Frame> = Vec::new();
        // the value the top frame asked for (the result once the stack is empty)
        let mut arg = match self.enter(node, idx.clone(), computing) {
            Entered::Value(v) => return Ok(v),
            Entered::Frame(f) => {
                stack.push(f);
                None
            }
        };
        while let Some(top) = stack.last_mut() {
            match self.resume(top, arg.take())? {
                Next::Input(n, x) => match self.enter(&n, x, computing) {
                    Entered::Value(v) => arg = Some(v),
                    Entered::Frame(f) => stack.push(f),
                },
                Next::Done(v) => {
                    if let Some(f) = stack.pop() {
                        self.memo.insert((f.node.id, f.idx.key()), v);
                    }
                    arg = Some(v);
                }
            }
        }
        arg.ok_or_else(|| Error::internal("lower", "lowering ended without a value"))
    }

    /// Starts lowering `node` at `idx`: its value when memoized or loaded, else a frame
    /// that computes it.
    fn enter(&mut self, node: &Arc<Node>, idx: Idx, computing: u64) -> Entered {
        let key = (node.id, idx.key());
        if let Some(&v) = self.memo.get(&key) {
            return Entered::Value(v);
        }
        // a constant is always a parameter, even where it is also a root or evaluated
        // (epilogues of reductions may read only parameters)
        let materialized = !matches!(node.op, Op::Const(_))
            && (node.buffer().is_some() || (self.mat.contains(&node.id) && node.id != computing));
        if materialized {
            let v = self.load(node, &idx);
            self.memo.insert(key, v);
            return Entered::Value(v);
        }
        // Pure functions of the index (generators and math on them) are recomputed
        // wherever they are read: cheaper than a buffer round trip.
        if node.op.is_elementwise()
            && !self.load_free.contains(&node.id)
            && !self.mat.contains(&node.id)
        {
            let ctx = key.1;
            match self.seen.get(&node.id) {
                Some(prev) if *prev != ctx => {
                    self.extra.insert(node.id);
                }
                Some(_) => {}
                None => {
                    self.seen.insert(node.id, ctx);
                }
            }
        }
        Entered::Frame(Frame {
            node: node.clone(),
            inputs: node.inputs(),
            idx,
            values: SmallVec::new(),
            cont: Cont::Start,
        })
    }

    /// Takes frame `f` one step on, given the value of the input it asked for last
    /// (`None` on the first step): the next input to lower, or the frame's value.
    fn resume(&mut self, f: &mut Frame, arg: Option<ValueId>) -> Result<Next> {
        if let Some(v) = arg {
            f.values.push(v);
        }
        let lowered = f.values.len();
        let node = &f.node;
        let idx = &f.idx;
        let input = |k: usize| -> Result<Arc<Node>> {
            f.inputs
                .get(k)
                .cloned()
                .ok_or_else(|| Error::internal("lower", format!("{node:?} lacks input {k}")))
        };
        let with_axes = |axes: Axes| Idx {
            lin: None,
            axes: Some(axes),
            guard: idx.guard,
        };
        // views read their one input at another index and take its value
        let view = |x: Idx| -> Result<Next> { Ok(Next::Input(input(0)?, x)) };
        Ok(match &node.op {
            Op::Reshape | Op::Permute(_) | Op::Broadcast | Op::Slice(_) | Op::Roll { .. }
                if lowered > 0 =>
            {
                Next::Done(f.values[0])
            }
            Op::Const(s) => Next::Done(self.param(node.id, Role::Value, *s)),
            Op::Iota => Next::Done(self.linear(idx, node)),
            Op::Random(kind, seed) => {
                let ctr = self.linear(idx, node);
                let s = self.param(node.id, Role::Seed, Scalar::I64(*seed as i64));
                Next::Done(self.b.push(Inst::Random(*kind, ctr, s), node.dtype))
            }
            Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast => {
                let arity = match node.op {
                    Op::Binary(_) => 2,
                    Op::Where => 3,
                    _ => 1,
                };
                if lowered < arity {
                    return Ok(Next::Input(input(lowered)?, idx.clone()));
                }
                let v = &f.values;
                Next::Done(match &node.op {
                    Op::Unary(op) => self.b.unary(*op, v[0]),
                    Op::Binary(op) => self.b.binary(*op, v[0], v[1]),
                    Op::Where => self.b.select(v[0], v[1], v[2]),
                    _ => self.b.cast(v[0], node.dtype),
                })
            }
            Op::Reshape => {
                let lin = self.linear(idx, node);
                view(Idx {
                    lin: Some(lin),
                    axes: None,
                    guard: idx.guard,
                })?
            }
            Op::Permute(p) => {
                let a = self.axes(idx, node);
                let mut xa: Axes = a.clone();
                for (k, &pk) in p.iter().enumerate() {
                    xa[pk] = a[k];
                }
                view(with_axes(xa))?
            }
            Op::Broadcast => {
                let src = input(0)?;
                let x = self.broadcast_idx(idx, node, &src);
                Next::Input(src, x)
            }
            Op::Slice(sl) => {
                let a = self.axes(idx, node);
                let mut xa = Axes::new();
                for (k, &(start, step)) in sl.iter().enumerate() {
                    xa.push(if start == 0 && step == 1 {
                        a[k]
                    } else {
                        let st = self.param(node.id, Role::Step(k), Scalar::I64(step as i64));
                        let s0 = self.param(node.id, Role::Start(k), Scalar::I64(start as i64));
                        let m = self.b.binary(BinaryOp::Mul, a[k], st);
                        self.b.binary(BinaryOp::Add, m, s0)
                    });
                }
                view(with_axes(xa))?
            }
            Op::Roll { axis, shift } => {
                let n = node.shape[*axis];
                let mut xa = self.axes(idx, node);
                let r = self.iparam(node.id, Role::Offset(0), n - shift);
                let np = self.iparam(node.id, Role::Size(*axis), n);
                let s = self.b.binary(BinaryOp::Add, xa[*axis], r);
                xa[*axis] = self.b.binary(BinaryOp::IdxMod, s, np);
                view(with_axes(xa))?
            }
            Op::Pad(w, value) => match f.cont {
                Cont::Start => {
                    let src = input(0)?;
                    let a = self.axes(idx, node);
                    let mut xa = Axes::new();
                    let mut valid: Option<ValueId> = None;
                    for (k, &(before, after)) in w.iter().enumerate() {
                        if before == 0 && after == 0 {
                            xa.push(a[k]);
                            continue;
                        }
                        let j = if before > 0 {
                            let b0 = self.iparam(node.id, Role::Before(k), before);
                            self.b.binary(BinaryOp::Sub, a[k], b0)
                        } else {
                            a[k]
                        };
                        let n = self.iparam(node.id, Role::SrcSize(k), src.shape[k]);
                        let lt = self.b.binary(BinaryOp::Lt, j, n);
                        let ok = if before > 0 {
                            let zero = self.c(0);
                            let ge = self.b.binary(BinaryOp::Ge, j, zero);
                            self.b.binary(BinaryOp::And, ge, lt)
                        } else {
                            lt
                        };
                        valid = Some(self.and(valid, ok));
                        xa.push(j);
                    }
                    let valid =
                        valid.ok_or_else(|| Error::internal("lower", "pad without padding"))?;
                    let guard = Some(self.and(idx.guard, valid));
                    f.cont = Cont::Pad { valid };
                    Next::Input(
                        src,
                        Idx {
                            lin: None,
                            axes: Some(xa),
                            guard,
                        },
                    )
                }
                Cont::Pad { valid } => {
                    let fill = self.param(node.id, Role::Fill, *value);
                    Next::Done(self.b.select(valid, f.values[0], fill))
                }
                Cont::Concat { .. } => return Err(Error::internal("lower", "pad frame state")),
            },
            Op::Concat(axis) => {
                let axis = *axis;
                if let Cont::Start = f.cont {
                    let a = self.axes(idx, node);
                    f.cont = Cont::Concat {
                        axes: a,
                        conds: Vec::with_capacity(f.inputs.len()),
                        offset: 0,
                    };
                }
                let Cont::Concat {
                    axes: a,
                    conds,
                    offset,
                } = &mut f.cont
                else {
                    return Err(Error::internal("lower", "concat frame state"));
                };
                let i = a[axis];
                let m = f.inputs.len();
                let t = lowered;
                if t < m {
                    // input t is read where the index lies in its part, shifted to it
                    let x = &f.inputs[t];
                    let lo = (t > 0).then(|| self.iparam(node.id, Role::Offset(t), *offset));
                    *offset += x.shape[axis];
                    let lt = (t + 1 < m).then(|| {
                        let hi = self.iparam(node.id, Role::Offset(t + 1), *offset);
                        self.b.binary(BinaryOp::Lt, i, hi)
                    });
                    let mut guard = idx.guard;
                    let mut xa = a.clone();
                    if let Some(lo) = lo {
                        let ge = self.b.binary(BinaryOp::Ge, i, lo);
                        guard = Some(self.and(guard, ge));
                        xa[axis] = self.b.binary(BinaryOp::Sub, i, lo);
                    }
                    if let Some(lt) = lt {
                        guard = Some(self.and(guard, lt));
                    }
                    conds.push(lt);
                    return Ok(Next::Input(
                        x.clone(),
                        Idx {
                            lin: None,
                            axes: Some(xa),
                            guard,
                        },
                    ));
                }
                // the select chain, innermost (last input) first
                let values = &f.values;
                let mut r = *values
                    .last()
                    .ok_or_else(|| Error::internal("lower", "concat without inputs"))?;
                for t in (0..m - 1).rev() {
                    let c = conds[t].ok_or_else(|| Error::internal("lower", "concat condition"))?;
                    r = self.b.select(c, values[t], r);
                }
                Next::Done(r)
            }
            Op::Buffer | Op::ToDevice | Op::Fft(_) | Op::Reduce(..) | Op::MatMul => {
                return Err(Error::internal(
                    "lower",
                    format!("{node:?} should be materialized"),
                ))
            }
        })
    }

    fn broadcast_idx(&mut self, idx: &Idx, node: &Node, src: &Node) -> Idx {
        let off = node.shape.len() - src.shape.len();
        if src.size() == 1 {
            let z = self.c(0);
            return Idx {
                lin: Some(z),
                axes: None,
                guard: idx.guard,
            };
        }
        if let (Some(lin), true) = (idx.lin, node.shape[off..] == src.shape[..]) {
            // broadcasting only adds leading axes: one modulo by the source's size
            let n = self.iparam(node.id, Role::SrcTotal, src.size());
            let l = self.b.binary(BinaryOp::IdxMod, lin, n);
            return Idx {
                lin: Some(l),
                axes: None,
                guard: idx.guard,
            };
        }
        let a = self.axes(idx, node);
        let xa = (0..src.shape.len())
            .map(|j| {
                if src.shape[j] == 1 {
                    self.c(0)
                } else {
                    a[j + off]
                }
            })
            .collect();
        Idx {
            lin: None,
            axes: Some(xa),
            guard: idx.guard,
        }
    }
}

/// Targets that share a step: (level, library step?, shape, device).
type GroupKey = (usize, bool, Vec<usize>, crate::Device);

/// Nodes computed from the element index alone (no buffer is read beneath them).
fn load_free(nodes: &[Arc<Node>], mat: &HashSet<u64>) -> HashSet<u64> {
    let mut free = HashSet::new();
    for n in nodes {
        if n.buffer().is_some()
            || mat.contains(&n.id)
            || n.op.is_library()
            || matches!(n.op, Op::Reduce(..))
        {
            continue;
        }
        let leaf = matches!(n.op, Op::Const(_) | Op::Iota | Op::Random(..));
        if leaf || n.inputs().iter().all(|i| free.contains(&i.id)) {
            free.insert(n.id);
        }
    }
    free
}

/// A constant node (how scalars enter expressions, at any broadcast shape).
pub(super) fn is_scalar_const(n: &Node) -> bool {
    // a broadcast constant is itself a constant node (`broadcast_to`, `const_at`)
    matches!(n.op, Op::Const(_))
}

/// The reduction a target's kernel performs: the target itself, or the reduction at the
/// bottom of an epilogue chain (elementwise ops with scalar constants) the planner let the
/// target absorb.
fn reduce_root(t: &Arc<Node>, mat: &HashSet<u64>) -> Option<Arc<Node>> {
    let mut cur = t.clone();
    loop {
        if matches!(cur.op, Op::Reduce(..)) {
            return Some(cur);
        }
        if !cur.op.is_elementwise() {
            return None;
        }
        let ins = cur.inputs();
        let mut rest = ins.iter().filter(|i| !is_scalar_const(i));
        let next = rest.next()?.clone();
        if rest.next().is_some() || next.buffer().is_some() || mat.contains(&next.id) {
            return None;
        }
        cur = next;
    }
}

/// Materialized nodes a target depends on (through nodes computed inside its kernel).
fn deps(target: &Arc<Node>, mat: &HashSet<u64>) -> Vec<u64> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = target.inputs();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.id) || n.buffer().is_some() {
            continue;
        }
        if mat.contains(&n.id) {
            out.push(n.id);
        } else {
            stack.extend(n.inputs());
        }
    }
    out
}

/// Builds the steps for the materialized set `mat`; the second result lists computations
/// that must be materialized too (read in several index contexts, or split for limits).
/// Nodes to materialize so that the computation of `target` splits into kernels whose
/// arguments (and lengths, [`MAX_KERNEL_NODES`]) stay within the limits, found in one pass: walking the computed nodes beneath
/// `target` inputs first, each node's estimated argument bytes are its own plus its
/// inputs'; where that passes two thirds of the limit, the node's computed elementwise inputs
/// become buffers (a pointer each for their users). Shared nodes are counted once per user,
/// which only overestimates. Empty when no cut helps (the caller then falls back).
fn arg_cuts(target: &Arc<Node>, mat: &HashSet<u64>) -> Vec<u64> {
    let budget = MAX_ARG_BYTES * 2 / 3;
    let computed = |n: &Node| {
        n.id != target.id
            && !matches!(n.op, Op::Const(_))
            && n.buffer().is_none()
            && !mat.contains(&n.id)
    };
    // post-order over the computed cone (iterative)
    let mut order: Vec<Arc<Node>> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut stack: Vec<(Arc<Node>, bool)> = vec![(target.clone(), false)];
    while let Some((n, done)) = stack.pop() {
        if done {
            order.push(n);
            continue;
        }
        if !seen.insert(n.id) {
            continue;
        }
        let inputs = n.inputs();
        stack.push((n, true));
        for i in inputs.iter().rev() {
            if computed(i) && !seen.contains(&i.id) {
                stack.push((i.clone(), false));
            }
        }
    }
    // readers of each leaf (constant, buffer, materialized node) within the cone
    let mut leaf_uses: HashMap<u64, usize> = HashMap::new();
    for n in &order {
        for i in n.inputs().iter().filter(|i| !seen.contains(&i.id)) {
            *leaf_uses.entry(i.id).or_default() += 1;
        }
    }
    let mut cost: HashMap<u64, usize> = HashMap::new();
    // computed nodes in each node's kernel so far (shared ones counted per user)
    let mut nodes: HashMap<u64, usize> = HashMap::new();
    let mut cuts = Vec::new();
    for n in &order {
        let rank = n.shape.len();
        // parameters a node's index arithmetic or value takes, 16 bytes each (estimate)
        let own = match n.op {
            Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast => 0,
            // an offset per part
            Op::Concat(_) => 16 * (2 * rank + 2 + n.inputs().len()),
            _ => 16 * (2 * rank + 2),
        };
        // a leaf's arguments are shared by every reader in the kernel: each reader carries
        // its share
        let input_cost = |i: &Arc<Node>, cost: &HashMap<u64, usize>| match cost.get(&i.id) {
            Some(&c) => c,
            None => {
                let base = match i.op {
                    Op::Const(_) => 16,
                    _ => 8 + 16 * i.shape.len(), // a buffer: its pointer and strides
                };
                base.div_ceil(leaf_uses.get(&i.id).copied().unwrap_or(1).max(1))
            }
        };
        let inputs = n.inputs();
        let input_nodes = |nodes: &HashMap<u64, usize>| -> usize {
            inputs
                .iter()
                .map(|i| nodes.get(&i.id).copied().unwrap_or(0))
                .sum()
        };
        let mut c = own + inputs.iter().map(|i| input_cost(i, &cost)).sum::<usize>();
        let mut m = 1 + input_nodes(&nodes);
        if c > budget || m > MAX_KERNEL_NODES {
            for i in &inputs {
                // any computed node may become a buffer except a broadcast (which would
                // store its expansion)
                let cuttable = i.op.is_elementwise()
                    || matches!(
                        i.op,
                        Op::Reshape
                            | Op::Permute(_)
                            | Op::Slice(_)
                            | Op::Pad(..)
                            | Op::Roll { .. }
                            | Op::Concat(_)
                    );
                if cuttable && cost.get(&i.id).is_some_and(|&ci| ci > 8) {
                    cuts.push(i.id);
                    cost.insert(i.id, 8);
                    nodes.insert(i.id, 0);
                }
            }
            c = own + inputs.iter().map(|i| input_cost(i, &cost)).sum::<usize>();
            m = 1 + input_nodes(&nodes);
        }
        cost.insert(n.id, c);
        nodes.insert(n.id, m);
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

pub(super) fn build(
    nodes: &[Arc<Node>],
    pos: &HashMap<u64, usize, FxBuild>,
    mat: &HashSet<u64>,
    fuse: bool,
) -> Result<(Vec<TStep>, HashSet<u64>, HashSet<u64>)> {
    // levels: a target runs after every target it reads
    let mut level: HashMap<u64, usize> = HashMap::new();
    // (key, shareable, targets): a group of a target that shares no kernel takes no others
    let mut groups: Vec<(GroupKey, bool, Vec<Arc<Node>>)> = Vec::new();
    for n in nodes
        .iter()
        .filter(|n| mat.contains(&n.id) && n.buffer().is_none())
    {
        let l = deps(n, mat)
            .iter()
            .map(|d| level.get(d).map_or(0, |l| l + 1))
            .max()
            .unwrap_or(0);
        level.insert(n.id, l);
        let key = (l, n.op.is_library(), n.shape.to_vec(), n.device.clone());
        // with fusion off every operation is its own kernel, so outputs are not shared;
        // a reduction kernel has one output (and joins no other group)
        let shareable = !key.1 && fuse && reduce_root(n, mat).is_none();
        match groups
            .iter_mut()
            .find(|(k, s, _)| shareable && *s && *k == key)
        {
            Some((_, _, g)) => g.push(n.clone()),
            None => groups.push((key, shareable, vec![n.clone()])),
        }
    }
    groups.sort_by_key(|((l, ..), ..)| *l);
    let load_free = load_free(nodes, mat);
    let mut steps = Vec::new();
    let mut contexts: HashMap<u64, usize> = HashMap::new();
    let mut extra = HashSet::new();
    let mut cuts: HashSet<u64> = HashSet::new();
    let mut queue: std::collections::VecDeque<(GroupKey, Vec<Arc<Node>>)> =
        groups.into_iter().map(|(k, _, g)| (k, g)).collect();
    let mut gi = 0;
    while let Some(((level, is_copy, shape, device), targets)) = queue.pop_front() {
        gi += 1;
        if is_copy {
            let t = &targets[0];
            if t.op == Op::MatMul {
                steps.push(super::matmul::step(t, pos)?);
                continue;
            }
            let src = t
                .inputs()
                .first()
                .cloned()
                .ok_or_else(|| Error::internal("plan", "library step without input"))?;
            let (src, dst) = (pos[&src.id], pos[&t.id]);
            steps.push(match t.op {
                Op::Fft(_) => TStep::Fft { src, dst },
                _ => TStep::Copy { src, dst },
            });
            continue;
        }
        let red = match targets.as_slice() {
            [t] => reduce_root(t, mat),
            _ => None,
        };
        let shape = match &red {
            Some(r) => r.inputs().first().map_or(shape, |x| x.shape.to_vec()),
            None => shape,
        };
        let mut lw = Lowerer {
            b: Builder::new(shape.len()),
            params: Vec::new(),
            pos,
            param_memo: HashMap::new(),
            inputs: Vec::new(),
            input_slot: HashMap::new(),
            memo: HashMap::new(),
            mat,
            load_free: &load_free,
            seen: HashMap::new(),
            extra: &mut extra,
        };
        let index = lw.b.push(Inst::Index, DType::I64);
        let axes: Axes = (0..shape.len())
            .map(|k| lw.b.push(Inst::Axis(k as u8), DType::I64))
            .collect();
        let root = Idx {
            lin: Some(index),
            axes: Some(axes),
            guard: None,
        };
        if let Some(r) = &red {
            let Op::Reduce(op, layout) = r.op else {
                return Err(Error::internal("lower", "reduce root is not a reduction"));
            };
            let t = &targets[0];
            let x = r
                .inputs()
                .first()
                .cloned()
                .ok_or_else(|| Error::internal("lower", "reduction without input"))?;
            let v = lw.lower(&x, &root, t.id)?;
            let vd = match op {
                ReduceOp::Sum | ReduceOp::Prod => r.dtype,
                ReduceOp::All | ReduceOp::Any => DType::Bool,
                _ => x.dtype,
            };
            let v = lw.b.cast(v, vd);
            let acc = lw.b.reduce(op, v, layout);
            // the epilogue reads the reduction at the output's own index
            lw.memo.insert((r.id, root.key()), acc);
            let e = lw.lower(t, &root, t.id)?;
            let e = lw.b.cast(e, t.dtype);
            lw.b.store(e);
        } else {
            for t in &targets {
                let v = lw.lower(t, &root, t.id)?;
                let v = lw.b.cast(v, t.dtype);
                lw.b.store(v);
            }
        }
        let arg_bytes = lw.params.len() * 16 + (lw.inputs.len() + targets.len()) * 8;
        let values = lw.b.value_count();
        if arg_bytes > MAX_ARG_BYTES || values > MAX_KERNEL_VALUES {
            config::debug_log!(
                2,
                "plan split: a kernel needs {arg_bytes} argument bytes (limit {MAX_ARG_BYTES}: \
                 the CUDA argument struct must stay under 4 KB) and {values} values (limit \
                 {MAX_KERNEL_VALUES})"
            );
            if targets.len() > 1 {
                // several outputs: two kernels of half the outputs each
                let mut first = targets;
                let second = first.split_off(first.len() / 2);
                let key = (level, is_copy, shape, device);
                queue.push_front((key.clone(), second));
                queue.push_front((key, first));
                continue;
            }
            // one output: cut its computation into kernels within the limit, in one pass
            let found = arg_cuts(&targets[0], mat);
            let mut split = !found.is_empty();
            cuts.extend(found);
            if !split {
                // no cut found by the estimate: materialize the computations it reads
                for i in targets[0].inputs() {
                    if i.op.is_elementwise() && !mat.contains(&i.id) && i.buffer().is_none() {
                        lw.extra.insert(i.id);
                        split = true;
                    }
                }
            }
            if !split {
                return Err(Error::internal(
                    "plan",
                    format!("kernel arguments of {arg_bytes} bytes cannot be split"),
                ));
            }
        }
        let Lowerer {
            b,
            params,
            inputs,
            seen,
            ..
        } = lw;
        // a computation read by two kernels is materialized too
        for (id, _) in seen {
            match contexts.get(&id) {
                Some(&g) if g != gi => {
                    extra.insert(id);
                }
                _ => {
                    contexts.insert(id, gi);
                }
            }
        }
        let kernel = b.finish();
        kernel
            .validate()
            .map_err(|e| Error::internal("lower", format!("{e} in\n{kernel}")))?;
        steps.push(TStep::Kernel {
            kernel: Arc::new(kernel),
            inputs: inputs.iter().map(|n| pos[&n.id]).collect(),
            outputs: targets.iter().map(|n| pos[&n.id]).collect(),
            shape: shape.into(),
            params,
        });
    }
    Ok((steps, extra, cuts))
}
