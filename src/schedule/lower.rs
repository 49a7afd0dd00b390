//! Lowering: turns groups of materialized nodes into kernel IR (`lazyfuse_codegen::Kernel`)
//! plus launch arguments, and reports computations read in more than one index context
//! (which the planner then materializes).

use super::{Dag, ParamSrc, PosSet, TStep};
use crate::config;
use crate::graph::{FxBuild, Node, Op};
use crate::{Error, Result};
use lazyfuse_codegen::{BinaryOp, Builder, DType, Inst, ReduceOp, Scalar, ValueId};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// Most bytes of scalar arguments one kernel may take before the planner splits it (the
/// CUDA argument struct must stay under 4 KB).
const MAX_ARG_BYTES: usize = 3500;

/// Most IR values one kernel may hold before the planner splits it: NVRTC's compile time
/// grows faster than the kernel's length (a 10^5-op kernel took minutes).
const MAX_KERNEL_VALUES: usize = 8192;

/// Most computed nodes the planner's one-pass split leaves in one kernel.
const MAX_KERNEL_NODES: usize = 2048;

/// Most heavy values (transcendental functions, random numbers: `Value::is_heavy`) one
/// kernel may hold: NVRTC's time grows faster than their number (on the 2-core development
/// machine a chain of `sin(exp(..))` compiled in 0.4 s at 16, 2.1 s at 64, 10.5 s at 200
/// and did not finish in 5 minutes at 4000). In the one-pass split a heavy node counts as
/// this many plain ones.
const MAX_KERNEL_HEAVY: usize = 64;
const HEAVY_WEIGHT: usize = MAX_KERNEL_NODES / MAX_KERNEL_HEAVY;

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
    Input(usize, Idx),
    Done(ValueId),
}

/// Per-op state of a frame beyond the input values it has collected.
enum Cont {
    /// Nothing emitted yet.
    Start,
    /// Pad: the in-bounds condition the source's value is selected by.
    Pad { valid: ValueId },
    /// Concat: see [`ConcatState`] (boxed: frames stay small on deep stacks).
    Concat(Box<ConcatState>),
    /// Gather: the source has been asked for (its value is the frame's second).
    Gather,
}

/// A concatenation's frame state: the node's multi-index, the upper-bound condition of
/// each input lowered so far (none for the last), and the start of the next input along
/// the axis.
struct ConcatState {
    axes: Axes,
    conds: Vec<Option<ValueId>>,
    offset: usize,
}

/// One computation being lowered: the node at DAG position `p` at an index, with the
/// values of the inputs lowered so far.
struct Frame {
    p: usize,
    idx: Idx,
    values: SmallVec<[ValueId; 3]>,
    cont: Cont,
}

/// Lowers the kernels of one planning pass; nodes are named by DAG position.
struct Lowerer<'a> {
    b: Builder,
    params: Vec<ParamSrc>,
    nodes: &'a [Arc<Node>],
    dag: &'a Dag,
    param_memo: HashMap<(usize, Role), ValueId, FxBuild>,
    inputs: Vec<usize>,
    input_slot: HashMap<usize, u32, FxBuild>,
    memo: HashMap<(usize, Idx), ValueId, FxBuild>,
    mat: &'a [bool],
    load_free: &'a [bool],
    /// Computations cheap enough to compute twice, and in how many kernels
    /// ([`cheap_nodes`]).
    cheap: &'a [Cheap],
    /// The index context each computation was read in by this kernel (a cheap one may be
    /// read in a second).
    seen: HashMap<usize, (Idx, Option<Idx>), FxBuild>,
    extra: &'a mut PosSet,
    /// Stop lowering once the kernel is over a limit (its IR is then thrown away).
    bail: bool,
    /// Outputs the kernel stores (for the argument-size estimate).
    outputs: usize,
    /// The frame stack of [`Lowerer::lower`], kept to reuse its allocation (a long chain
    /// is as deep as it is long).
    stack: Vec<Frame>,
}

impl Lowerer<'_> {
    /// Whether the kernel so far exceeds a limit. Both counts only grow while lowering, so
    /// a kernel over a limit part way is over it once complete.
    fn over_limit(&self) -> bool {
        self.arg_bytes() > MAX_ARG_BYTES
            || self.b.value_count() > MAX_KERNEL_VALUES
            || self.b.heavy_count() > MAX_KERNEL_HEAVY
    }
    fn arg_bytes(&self) -> usize {
        self.params.len() * 16 + (self.inputs.len() + self.outputs) * 8
    }
    fn param(&mut self, node: usize, role: Role, value: Scalar) -> ValueId {
        if let Some(&v) = self.param_memo.get(&(node, role)) {
            return v;
        }
        let v = self.b.param(value.dtype());
        // values that can change without changing the plan's structure are re-read from
        // the node at every bind; everything else is fixed by the structure
        let src = match role {
            Role::Value | Role::Seed => ParamSrc::Node(node),
            _ => ParamSrc::Fixed(value),
        };
        self.params.push(src);
        self.param_memo.insert((node, role), v);
        v
    }
    fn iparam(&mut self, node: usize, role: Role, value: usize) -> ValueId {
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

    /// The linear (C-order) index into the node at `p` for `idx`.
    fn linear(&mut self, idx: &Idx, p: usize) -> ValueId {
        let node = &self.nodes[p];
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
                let s = self.iparam(p, Role::Stride(k), strides[k]);
                self.b.binary(BinaryOp::Mul, a, s)
            };
            acc = Some(match acc {
                Some(x) => self.b.binary(BinaryOp::Add, x, term),
                None => term,
            });
        }
        acc.unwrap_or_else(|| self.c(0))
    }

    /// The multi-index into the node at `p` for `idx`.
    fn axes(&mut self, idx: &Idx, p: usize) -> Axes {
        let node = &self.nodes[p];
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
                    let s = self.iparam(p, Role::Stride(k), strides[k]);
                    self.b.binary(BinaryOp::IdxDiv, lin, s)
                };
                if Some(k) == first {
                    q // the outermost non-trivial axis needs no modulo
                } else {
                    let n = self.iparam(p, Role::Size(k), node.shape[k]);
                    self.b.binary(BinaryOp::IdxMod, q, n)
                }
            })
            .collect()
    }

    fn load(&mut self, p: usize, idx: &Idx) -> ValueId {
        let dtype = self.nodes[p].dtype;
        let slot = match self.input_slot.get(&p) {
            Some(&s) => s,
            None => {
                let s = self.b.input(dtype);
                self.inputs.push(p);
                self.input_slot.insert(p, s);
                s
            }
        };
        let off = self.linear(idx, p);
        self.b.push(
            Inst::Load {
                input: slot,
                index: off,
                guard: idx.guard,
            },
            dtype,
        )
    }

    /// The value of the node at `p` at `idx` in the kernel computing `computing`: a load
    /// of a materialized node, else its computation (memoized per node and index context).
    /// `None` when the lowerer bails out over a limit.
    ///
    /// An explicit-stack machine, so that the depth of the DAG is bounded by memory, not by
    /// the thread's stack: each frame is one computation whose inputs are being lowered, and
    /// `resume` takes it to its next input or to its value. The IR is emitted in the order
    /// of a depth-first recursion over the inputs.
    fn lower(&mut self, p: usize, idx: &Idx, computing: usize) -> Result<Option<ValueId>> {
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        let r = self.lower_on(&mut stack, p, idx, computing);
        self.stack = stack;
        r
    }

    fn lower_on(
        &mut self,
        stack: &mut Vec<Frame>,
        p: usize,
        idx: &Idx,
        computing: usize,
    ) -> Result<Option<ValueId>> {
        // the value the top frame asked for (the result once the stack is empty)
        let mut arg = match self.enter(p, idx.clone(), computing) {
            Entered::Value(v) => return Ok(Some(v)),
            Entered::Frame(f) => {
                stack.push(f);
                None
            }
        };
        while let Some(top) = stack.last_mut() {
            match self.resume(top, arg.take())? {
                Next::Input(n, x) => match self.enter(n, x, computing) {
                    Entered::Value(v) => arg = Some(v),
                    Entered::Frame(f) => stack.push(f),
                },
                Next::Done(v) => {
                    if let Some(f) = stack.pop() {
                        self.memo.insert((f.p, f.idx.key()), v);
                    }
                    arg = Some(v);
                    if self.bail && self.over_limit() {
                        return Ok(None);
                    }
                }
            }
        }
        arg.map(Some)
            .ok_or_else(|| Error::internal("lower", "lowering ended without a value"))
    }

    /// Starts lowering the node at `p` at `idx`: its value when memoized or loaded, else a
    /// frame that computes it.
    fn enter(&mut self, p: usize, idx: Idx, computing: usize) -> Entered {
        let key = (p, idx.key());
        if let Some(&v) = self.memo.get(&key) {
            return Entered::Value(v);
        }
        let node = &self.nodes[p];
        // a constant is always a parameter, even where it is also a root or evaluated
        // (epilogues of reductions may read only parameters)
        let materialized = !matches!(node.op, Op::Const(_))
            && (self.dag.realized(p) || (self.mat[p] && p != computing));
        if materialized {
            let v = self.load(p, &idx);
            self.memo.insert(key, v);
            return Entered::Value(v);
        }
        // Pure functions of the index (generators and math on them) are recomputed
        // wherever they are read: cheaper than a buffer round trip. So is a cheap
        // computation in a second index context (a Hermitian part `y + conj(y[-k])`, a
        // two-point stencil); a third context materializes it.
        if node.op.is_elementwise() && !self.load_free[p] && !self.mat[p] {
            let ctx = &key.1;
            match self.seen.get_mut(&p) {
                Some((first, second)) if first != ctx => match second {
                    Some(s) if s == ctx => {}
                    None if self.cheap[p].twice => *second = Some(ctx.clone()),
                    _ => {
                        self.extra.insert(p);
                    }
                },
                Some(_) => {}
                None => {
                    self.seen.insert(p, (ctx.clone(), None));
                }
            }
        }
        Entered::Frame(Frame {
            p,
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
        let (nodes, dag) = (self.nodes, self.dag);
        let p = f.p;
        let node = &nodes[p];
        let ins = dag.inputs(p);
        let idx = &f.idx;
        let input = |k: usize| -> Result<usize> {
            ins.get(k)
                .map(|&i| i as usize)
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
            Op::Const(s) => Next::Done(self.param(p, Role::Value, *s)),
            Op::Iota => Next::Done(self.linear(idx, p)),
            Op::Random(kind, seed) => {
                let ctr = self.linear(idx, p);
                let s = self.param(p, Role::Seed, Scalar::I64(*seed as i64));
                Next::Done(self.b.push(Inst::Random(*kind, ctr, s), node.dtype))
            }
            Op::RandomKeyed(kind) => {
                // the seed is the input's value at this index (a broadcast key: one load
                // or one parameter); the counter is this node's linear index, as above
                if lowered < 1 {
                    return Ok(Next::Input(input(0)?, idx.clone()));
                }
                let ctr = self.linear(idx, p);
                Next::Done(
                    self.b
                        .push(Inst::Random(*kind, ctr, f.values[0]), node.dtype),
                )
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
                let lin = self.linear(idx, p);
                view(Idx {
                    lin: Some(lin),
                    axes: None,
                    guard: idx.guard,
                })?
            }
            Op::Permute(perm) => {
                let a = self.axes(idx, p);
                let mut xa: Axes = a.clone();
                for (k, &pk) in perm.iter().enumerate() {
                    xa[pk] = a[k];
                }
                view(with_axes(xa))?
            }
            Op::Broadcast => {
                let src = input(0)?;
                let x = self.broadcast_idx(idx, p, src);
                Next::Input(src, x)
            }
            Op::Slice(sl) => {
                let a = self.axes(idx, p);
                let mut xa = Axes::new();
                for (k, &(start, step)) in sl.iter().enumerate() {
                    xa.push(if start == 0 && step == 1 {
                        a[k]
                    } else {
                        let st = self.param(p, Role::Step(k), Scalar::I64(step as i64));
                        let s0 = self.param(p, Role::Start(k), Scalar::I64(start as i64));
                        let m = self.b.binary(BinaryOp::Mul, a[k], st);
                        self.b.binary(BinaryOp::Add, m, s0)
                    });
                }
                view(with_axes(xa))?
            }
            Op::Roll { axis, shift } => {
                let n = node.shape[*axis];
                let mut xa = self.axes(idx, p);
                let r = self.iparam(p, Role::Offset(0), n - shift);
                let np = self.iparam(p, Role::Size(*axis), n);
                // x + (n - shift) lies in [1, 2n) for an index x in [0, n): one conditional
                // subtraction instead of a modulo (indices outside the axis occur only under
                // a guard, whose loads they never reach)
                let s = self.b.binary(BinaryOp::Add, xa[*axis], r);
                let wrap = self.b.binary(BinaryOp::Ge, s, np);
                let back = self.b.binary(BinaryOp::Sub, s, np);
                xa[*axis] = self.b.select(wrap, back, s);
                view(with_axes(xa))?
            }
            Op::Pad(w, value) => match f.cont {
                Cont::Start => {
                    let src = input(0)?;
                    let a = self.axes(idx, p);
                    let mut xa = Axes::new();
                    let mut valid: Option<ValueId> = None;
                    for (k, &(before, after)) in w.iter().enumerate() {
                        if before == 0 && after == 0 {
                            xa.push(a[k]);
                            continue;
                        }
                        let j = if before > 0 {
                            let b0 = self.iparam(p, Role::Before(k), before);
                            self.b.binary(BinaryOp::Sub, a[k], b0)
                        } else {
                            a[k]
                        };
                        let n = self.iparam(p, Role::SrcSize(k), nodes[src].shape[k]);
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
                    let fill = self.param(p, Role::Fill, *value);
                    Next::Done(self.b.select(valid, f.values[0], fill))
                }
                _ => return Err(Error::internal("lower", "pad frame state")),
            },
            Op::Concat(axis) => {
                let axis = *axis;
                if let Cont::Start = f.cont {
                    let a = self.axes(idx, p);
                    f.cont = Cont::Concat(Box::new(ConcatState {
                        axes: a,
                        conds: Vec::with_capacity(ins.len()),
                        offset: 0,
                    }));
                }
                let Cont::Concat(state) = &mut f.cont else {
                    return Err(Error::internal("lower", "concat frame state"));
                };
                let ConcatState {
                    axes: a,
                    conds,
                    offset,
                } = &mut **state;
                let i = a[axis];
                let m = ins.len();
                let t = lowered;
                if t < m {
                    // input t is read where the index lies in its part, shifted to it
                    let x = ins[t] as usize;
                    let lo = (t > 0).then(|| self.iparam(p, Role::Offset(t), *offset));
                    *offset += nodes[x].shape[axis];
                    let lt = (t + 1 < m).then(|| {
                        let hi = self.iparam(p, Role::Offset(t + 1), *offset);
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
                        x,
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
            Op::Gather { axis, span } => match f.cont {
                // the indices first, at the node's own index
                Cont::Start if lowered == 0 => Next::Input(input(1)?, idx.clone()),
                Cont::Start => {
                    let (axis, span) = (*axis, *span);
                    let src = input(0)?;
                    let a = self.axes(idx, p);
                    let zero = self.c(0);
                    let n = self.iparam(p, Role::SrcSize(axis), nodes[src].shape[axis]);
                    // a negative index counts from the end; out of range reads nothing
                    let i = f.values[0];
                    let neg = self.b.binary(BinaryOp::Lt, i, zero);
                    let up = self.b.binary(BinaryOp::Add, i, n);
                    let j = self.b.select(neg, up, i);
                    let ge = self.b.binary(BinaryOp::Ge, j, zero);
                    let lt = self.b.binary(BinaryOp::Lt, j, n);
                    let ok = self.b.binary(BinaryOp::And, ge, lt);
                    let mut xa: Axes = a[..axis].iter().copied().collect();
                    xa.push(j);
                    xa.extend(a[axis + span..].iter().copied());
                    let guard = Some(self.and(idx.guard, ok));
                    f.cont = Cont::Gather;
                    Next::Input(
                        src,
                        Idx {
                            lin: None,
                            axes: Some(xa),
                            guard,
                        },
                    )
                }
                Cont::Gather => Next::Done(f.values[1]),
                _ => return Err(Error::internal("lower", "gather frame state")),
            },
            Op::Buffer
            | Op::ToDevice
            | Op::Fft(_)
            | Op::Reduce(..)
            | Op::MatMul
            | Op::ScatterAdd(_) => {
                return Err(Error::internal(
                    "lower",
                    format!("{node:?} should be materialized"),
                ))
            }
        })
    }

    fn broadcast_idx(&mut self, idx: &Idx, p: usize, src: usize) -> Idx {
        let (node, src) = (&self.nodes[p], &self.nodes[src]);
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
            let n = self.iparam(p, Role::SrcTotal, src.size());
            let l = self.b.binary(BinaryOp::IdxMod, lin, n);
            return Idx {
                lin: Some(l),
                axes: None,
                guard: idx.guard,
            };
        }
        let a = self.axes(idx, p);
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

/// Nodes computed from the element index alone (no buffer is read beneath them), by
/// position.
fn load_free(nodes: &[Arc<Node>], dag: &Dag, mat: &[bool]) -> Vec<bool> {
    let mut free = vec![false; nodes.len()];
    for (p, n) in nodes.iter().enumerate() {
        if dag.realized(p) || mat[p] || n.op.is_library() || matches!(n.op, Op::Reduce(..)) {
            continue;
        }
        let leaf = matches!(n.op, Op::Const(_) | Op::Iota | Op::Random(..));
        free[p] = leaf || dag.inputs(p).iter().all(|&i| free[i as usize]);
    }
    free
}

/// Largest [`cheap_nodes`] cost of a computation that may be computed in two index contexts
/// of one kernel.
const CHEAP_COST: u32 = 8;

/// Largest [`cheap_nodes`] cost of a computation that several kernels may each compute
/// rather than read stored: two transcendental functions and a few simple ops (a store and
/// a load per element, and a launch, cost more on a memory-bound device).
const RECOMPUTE_COST: u32 = 32;

/// Most kernels that may each compute one computation ([`cheap_nodes`]) rather than read
/// it stored.
const MAX_RECOMPUTE_KERNELS: u8 = 4;

/// What [`cheap_nodes`] allows of a computation.
#[derive(Clone, Copy, Default)]
struct Cheap {
    /// It may be computed in a second index context of one kernel.
    twice: bool,
    /// The most kernels that may compute it rather than read it stored (1 or more).
    kernels: u8,
}

/// Per position, how often an elementwise computation may be repeated rather than stored,
/// by its kernel-side work (loads and simple ops count 1, transcendental functions and
/// divisions 8, summed over the nodes its kernel computes; a shared subexpression counts
/// once per path, which only overestimates): at most [`CHEAP_COST`], in a second index
/// context of one kernel; at most [`RECOMPUTE_COST`], in several kernels.
///
/// Computing a node in `k` kernels reads the buffers beneath it (`l` bytes an element, each
/// distinct buffer once) `k` times; storing it reads them once, writes the node (`o` bytes)
/// and reads it back `k` times. It is recomputed while `k * l <= l + (k + 1) * o`, in at
/// most [`MAX_RECOMPUTE_KERNELS`] kernels. The cost includes everything beneath the node,
/// so each kernel spends at most [`RECOMPUTE_COST`] on a node it recomputes, chains of
/// recomputed nodes included, and no node is computed by more than
/// [`MAX_RECOMPUTE_KERNELS`] kernels: the work a plan repeats is linear in its nodes.
fn cheap_nodes(nodes: &[Arc<Node>], dag: &Dag, mat: &[bool]) -> Vec<Cheap> {
    use lazyfuse_codegen::BinaryOp as B;
    let mut cost = vec![0u32; nodes.len()];
    let mut cheap = vec![Cheap::default(); nodes.len()];
    // the buffers a node's kernel loads, for nodes within the cost bound (at most
    // RECOMPUTE_COST of them, as each load counts 1)
    let mut loads: Vec<SmallVec<[u32; 4]>> = vec![SmallVec::new(); nodes.len()];
    for (p, n) in nodes.iter().enumerate() {
        if dag.realized(p) || mat[p] {
            cost[p] = 1; // a load
            if !matches!(n.op, Op::Const(_)) {
                loads[p].push(p as u32);
            }
            continue;
        }
        let own = match n.op {
            Op::Unary(u) if u.is_transcendental() => 8,
            Op::Binary(B::Div | B::FloorDiv | B::Mod | B::Pow | B::Atan2 | B::Hypot) => 8,
            Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast => 1,
            Op::Random(..) | Op::RandomKeyed(_) | Op::Reduce(..) => 8,
            _ => 0,
        };
        let below = dag
            .inputs(p)
            .iter()
            .fold(0u32, |acc, &i| acc.saturating_add(cost[i as usize]));
        cost[p] = below.saturating_add(own).min(u32::MAX / 4);
        if cost[p] > RECOMPUTE_COST {
            continue;
        }
        let mut mine: SmallVec<[u32; 4]> = SmallVec::new();
        for &i in dag.inputs(p) {
            for &l in &loads[i as usize] {
                if !mine.contains(&l) {
                    mine.push(l);
                }
            }
        }
        if n.op.is_elementwise() {
            cheap[p] = Cheap {
                twice: cost[p] <= CHEAP_COST,
                kernels: recompute_kernels(n, &mine, nodes),
            };
        }
        loads[p] = mine;
    }
    cheap
}

/// The most kernels that may compute the cheap node `n` (which loads the buffers at
/// positions `loads`) instead of reading it stored: see [`cheap_nodes`].
fn recompute_kernels(n: &Node, loads: &[u32], nodes: &[Arc<Node>]) -> u8 {
    let size = n.size().max(1);
    // bytes an element: a buffer smaller than the node (broadcast) counts its share
    let l: usize = loads
        .iter()
        .map(|&b| {
            let b = &nodes[b as usize];
            b.dtype.size() * b.size().min(size) / size
        })
        .sum();
    let o = n.dtype.size();
    let mut k = 1u8;
    while k < MAX_RECOMPUTE_KERNELS {
        let next = usize::from(k) + 1;
        if next * l > l + (next + 1) * o {
            break;
        }
        k += 1;
    }
    k
}

/// Per position, the most elementwise ops (unary, binary, where) on one path down from the
/// node through nodes its kernel would compute (to loads, constants, generators and
/// reductions). Each such op emits an instruction reading the value below it, so a kernel
/// computing a node of depth `d` holds more than `d` values: a lower bound that shows a
/// kernel over [`MAX_KERNEL_VALUES`] without lowering it.
fn op_depths(nodes: &[Arc<Node>], dag: &Dag, mat: &[bool]) -> Vec<usize> {
    let mut depth = vec![0usize; nodes.len()];
    for (p, n) in nodes.iter().enumerate() {
        if dag.realized(p) || matches!(n.op, Op::Reduce(..)) {
            continue;
        }
        let below = dag
            .inputs(p)
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| !mat[i])
            .map(|i| depth[i])
            .max()
            .unwrap_or(0);
        let own = matches!(n.op, Op::Unary(_) | Op::Binary(_) | Op::Where) as usize;
        depth[p] = below + own;
    }
    depth
}

/// A constant node (how scalars enter expressions, at any broadcast shape).
pub(super) fn is_scalar_const(n: &Node) -> bool {
    // a broadcast constant is itself a constant node (`broadcast_to`, `const_at`)
    matches!(n.op, Op::Const(_))
}

/// The reduction a target's kernel performs: the target itself, or the reduction at the
/// bottom of an epilogue chain (elementwise ops with scalar constants) the planner let the
/// target absorb.
fn reduce_root(t: usize, nodes: &[Arc<Node>], dag: &Dag, mat: &[bool]) -> Option<usize> {
    let mut cur = t;
    loop {
        let op = &nodes[cur].op;
        if matches!(op, Op::Reduce(..)) {
            return Some(cur);
        }
        if !op.is_elementwise() {
            return None;
        }
        let mut rest = dag
            .inputs(cur)
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| !is_scalar_const(&nodes[i]));
        let next = rest.next()?;
        if rest.next().is_some() || dag.realized(next) || mat[next] {
            return None;
        }
        cur = next;
    }
}

/// Materialized nodes the target at `t` depends on (through nodes computed inside its
/// kernel). `mark` is scratch of the DAG's length, stamped with the target's position.
fn deps(t: usize, dag: &Dag, mat: &[bool], mark: &mut [usize]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack: Vec<usize> = dag.inputs(t).iter().map(|&i| i as usize).collect();
    while let Some(p) = stack.pop() {
        if mark[p] == t || dag.realized(p) {
            continue;
        }
        mark[p] = t;
        if mat[p] {
            out.push(p);
        } else {
            stack.extend(dag.inputs(p).iter().map(|&i| i as usize));
        }
    }
    out
}

/// Nodes to materialize so that the computation of the target at `target` splits into
/// kernels whose arguments (and lengths, [`MAX_KERNEL_NODES`] with heavy nodes weighted)
/// stay within the limits,
/// found in one pass: walking the computed nodes beneath `target` inputs first, each node's
/// estimated argument bytes are its own plus its inputs'; where that passes two thirds of
/// the limit, the node's computed elementwise inputs become buffers (a pointer each for
/// their users). Shared nodes are counted once per user, which only overestimates. Empty
/// when no cut helps (the caller then falls back).
fn arg_cuts(target: usize, nodes: &[Arc<Node>], dag: &Dag, mat: &[bool]) -> Vec<usize> {
    type Map = HashMap<usize, usize, FxBuild>;
    let budget = MAX_ARG_BYTES * 2 / 3;
    let computed = |p: usize| {
        p != target && !matches!(nodes[p].op, Op::Const(_)) && !dag.realized(p) && !mat[p]
    };
    let ins = |p: usize| dag.inputs(p).iter().map(|&i| i as usize);
    // post-order over the computed cone (iterative)
    let mut order: Vec<usize> = Vec::new();
    let mut seen = vec![false; nodes.len()];
    let mut stack: Vec<(usize, bool)> = vec![(target, false)];
    while let Some((n, done)) = stack.pop() {
        if done {
            order.push(n);
            continue;
        }
        if std::mem::replace(&mut seen[n], true) {
            continue;
        }
        stack.push((n, true));
        for i in ins(n).rev() {
            if computed(i) && !seen[i] {
                stack.push((i, false));
            }
        }
    }
    // readers of each leaf (constant, buffer, materialized node) within the cone
    let mut leaf_uses = Map::default();
    for &n in &order {
        for i in ins(n).filter(|&i| !seen[i]) {
            *leaf_uses.entry(i).or_default() += 1;
        }
    }
    // by position: estimated argument bytes (`None` for leaves) and computed nodes in each
    // node's kernel so far (shared ones counted per user)
    let mut cost: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut count: Vec<usize> = vec![0; nodes.len()];
    let mut cuts = Vec::new();
    for &n in &order {
        let node = &nodes[n];
        let rank = node.shape.len();
        let inputs = dag.inputs(n);
        // parameters a node's index arithmetic or value takes, 16 bytes each (estimate)
        let own = match node.op {
            Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast => 0,
            // an offset per part
            Op::Concat(_) => 16 * (2 * rank + 2 + inputs.len()),
            _ => 16 * (2 * rank + 2),
        };
        // a leaf's arguments are shared by every reader in the kernel: each reader carries
        // its share
        let input_cost = |i: usize, cost: &[Option<usize>]| match cost[i] {
            Some(c) => c,
            None => {
                let base = match nodes[i].op {
                    Op::Const(_) => 16,
                    _ => 8 + 16 * nodes[i].shape.len(), // a buffer: its pointer and strides
                };
                base.div_ceil(leaf_uses.get(&i).copied().unwrap_or(1).max(1))
            }
        };
        let input_nodes = |count: &[usize]| -> usize { ins(n).map(|i| count[i]).sum() };
        let mut c = own + ins(n).map(|i| input_cost(i, &cost)).sum::<usize>();
        // heavy nodes (`Value::is_heavy`) weigh more, so that a kernel also holds at most
        // MAX_KERNEL_HEAVY; every complex unary op counts as heavy here (their helpers are
        // long too; an overestimate only cuts earlier)
        let weight = match &node.op {
            Op::Unary(u) if u.is_transcendental() || node.dtype.is_complex() => HEAVY_WEIGHT,
            Op::Binary(b) if b.is_transcendental() => HEAVY_WEIGHT,
            Op::Random(..) | Op::RandomKeyed(_) => HEAVY_WEIGHT,
            _ => 1,
        };
        let mut m = weight + input_nodes(&count);
        if c > budget || m > MAX_KERNEL_NODES {
            for i in ins(n) {
                // any computed node may become a buffer except a broadcast (which would
                // store its expansion)
                let cuttable = nodes[i].op.is_elementwise()
                    || matches!(
                        nodes[i].op,
                        Op::Reshape
                            | Op::Permute(_)
                            | Op::Slice(_)
                            | Op::Pad(..)
                            | Op::Roll { .. }
                            | Op::Concat(_)
                            | Op::Gather { .. }
                            | Op::RandomKeyed(_)
                    );
                if cuttable && cost[i].is_some_and(|ci| ci > 8) {
                    cuts.push(i);
                    cost[i] = Some(8);
                    count[i] = 0;
                }
            }
            c = own + ins(n).map(|i| input_cost(i, &cost)).sum::<usize>();
            m = weight + input_nodes(&count);
        }
        cost[n] = Some(c);
        count[n] = m;
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// `map` emptied and taken (keeping its allocation for the taker).
fn cleared<K, V>(map: &mut HashMap<K, V, FxBuild>) -> HashMap<K, V, FxBuild> {
    let mut m = std::mem::take(map);
    m.clear();
    m
}

/// Lowers one kernel of `targets` (with the reduction `red` when it is a reduction kernel)
/// over the iteration `shape`. Stops early, leaving the IR incomplete, when the lowerer
/// bails out over a limit.
fn lower_kernel(
    lw: &mut Lowerer,
    targets: &[usize],
    red: Option<usize>,
    shape: &[usize],
) -> Result<()> {
    let nodes = lw.nodes;
    let index = lw.b.push(Inst::Index, DType::I64);
    let axes: Axes = (0..shape.len())
        .map(|k| lw.b.push(Inst::Axis(k as u8), DType::I64))
        .collect();
    let root = Idx {
        lin: Some(index),
        axes: Some(axes),
        guard: None,
    };
    if let Some(r) = red {
        let Op::Reduce(op, layout) = nodes[r].op else {
            return Err(Error::internal("lower", "reduce root is not a reduction"));
        };
        let t = targets[0];
        let x = lw
            .dag
            .inputs(r)
            .first()
            .map(|&i| i as usize)
            .ok_or_else(|| Error::internal("lower", "reduction without input"))?;
        let Some(v) = lw.lower(x, &root, t)? else {
            return Ok(());
        };
        let vd = match op {
            ReduceOp::Sum | ReduceOp::Prod => nodes[r].dtype,
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            _ => nodes[x].dtype,
        };
        let v = lw.b.cast(v, vd);
        let acc = lw.b.reduce(op, v, layout);
        // the epilogue reads the reduction at the output's own index
        lw.memo.insert((r, root.key()), acc);
        let Some(e) = lw.lower(t, &root, t)? else {
            return Ok(());
        };
        let e = lw.b.cast(e, nodes[t].dtype);
        lw.b.store(e);
    } else {
        for &t in targets {
            let Some(v) = lw.lower(t, &root, t)? else {
                return Ok(());
            };
            let v = lw.b.cast(v, nodes[t].dtype);
            lw.b.store(v);
        }
    }
    Ok(())
}

/// Builds the steps for the materialized set `mat` (by position); the second result lists
/// computations that must be materialized too (read in several index contexts, or by two
/// kernels), the third the nodes to materialize to split kernels over a limit.
pub(super) fn build(
    nodes: &[Arc<Node>],
    dag: &Dag,
    pos: &HashMap<u64, usize, FxBuild>,
    mat: &[bool],
    fuse: bool,
) -> Result<(Vec<TStep>, PosSet, PosSet)> {
    // levels: a target runs after every target it reads
    let mut level: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut mark = vec![usize::MAX; nodes.len()];
    // (key, shareable, targets): a group of a target that shares no kernel takes no others
    let mut groups: Vec<(GroupKey, bool, Vec<usize>)> = Vec::new();
    // the one shareable group of each key (a `Device` hashes by its kind and ordinal,
    // which never change)
    #[allow(clippy::mutable_key_type)]
    let mut shared: HashMap<GroupKey, usize, FxBuild> = HashMap::default();
    let reductions = nodes.iter().any(|n| matches!(n.op, Op::Reduce(..)));
    let reduce_root = |t: usize| match reductions {
        true => reduce_root(t, nodes, dag, mat),
        false => None,
    };
    for (p, n) in nodes.iter().enumerate() {
        if !mat[p] || dag.realized(p) {
            continue;
        }
        let l = deps(p, dag, mat, &mut mark)
            .iter()
            .map(|&d| level[d].map_or(0, |l| l + 1))
            .max()
            .unwrap_or(0);
        level[p] = Some(l);
        let key = (l, n.op.is_library(), n.shape.to_vec(), n.device.clone());
        // with fusion off every operation is its own kernel, so outputs are not shared;
        // a reduction kernel has one output (and joins no other group)
        let shareable = !key.1 && fuse && reduce_root(p).is_none();
        if shareable {
            if let Some(&g) = shared.get(&key) {
                groups[g].2.push(p);
                continue;
            }
            shared.insert(key.clone(), groups.len());
        }
        groups.push((key, shareable, vec![p]));
    }
    groups.sort_by_key(|((l, ..), ..)| *l);
    let load_free = load_free(nodes, dag, mat);
    let cheap = cheap_nodes(nodes, dag, mat);
    let depth = op_depths(nodes, dag, mat);
    let mut steps = Vec::new();
    // the kernels that compute each computation so far, by position
    let mut kernels: Vec<u8> = vec![0; nodes.len()];
    // the kernel steps (by index into `steps`) that compute a computation another kernel
    // may compute too
    let mut shared_work: Vec<usize> = Vec::new();
    let mut extra = PosSet::default();
    let mut cuts = PosSet::default();
    let mut queue: std::collections::VecDeque<(GroupKey, Vec<usize>)> =
        groups.into_iter().map(|(k, _, g)| (k, g)).collect();
    // allocations reused from kernel to kernel (cleared before each)
    let mut frames = Vec::new();
    let mut spare_memo: HashMap<(usize, Idx), ValueId, FxBuild> = HashMap::default();
    let mut spare_seen: HashMap<usize, (Idx, Option<Idx>), FxBuild> = HashMap::default();
    while let Some(((level, is_copy, shape, device), targets)) = queue.pop_front() {
        if is_copy {
            let t = targets[0];
            if nodes[t].op == Op::MatMul {
                steps.push(super::matmul::step(&nodes[t], pos)?);
                continue;
            }
            let src = dag
                .inputs(t)
                .first()
                .map(|&i| i as usize)
                .ok_or_else(|| Error::internal("plan", "library step without input"))?;
            steps.push(match nodes[t].op {
                Op::Fft(_) => TStep::Fft { src, dst: t },
                Op::ScatterAdd(_) => TStep::Scatter {
                    values: src,
                    indices: dag
                        .inputs(t)
                        .get(1)
                        .map(|&i| i as usize)
                        .ok_or_else(|| Error::internal("plan", "scatter without indices"))?,
                    dst: t,
                },
                _ => TStep::Copy { src, dst: t },
            });
            continue;
        }
        let red = match targets.as_slice() {
            [t] => reduce_root(*t),
            _ => None,
        };
        let shape = match red {
            Some(r) => dag
                .inputs(r)
                .first()
                .map_or(shape, |&x| nodes[x as usize].shape.to_vec()),
            None => shape,
        };
        let mut lw = Lowerer {
            b: Builder::new(shape.len()),
            params: Vec::new(),
            nodes,
            dag,
            param_memo: HashMap::default(),
            inputs: Vec::new(),
            input_slot: HashMap::default(),
            memo: cleared(&mut spare_memo),
            mat,
            load_free: &load_free,
            cheap: &cheap,
            seen: cleared(&mut spare_seen),
            extra: &mut extra,
            // an over-limit kernel is split and lowered again: its IR is not needed
            bail: true,
            outputs: targets.len(),
            stack: std::mem::take(&mut frames),
        };
        // a kernel certainly over the value limit is not lowered at all
        let too_deep = targets.iter().any(|&t| depth[t] >= MAX_KERNEL_VALUES);
        if !too_deep {
            lower_kernel(&mut lw, &targets, red, &shape)?;
        }
        if too_deep || lw.over_limit() {
            frames = std::mem::take(&mut lw.stack);
            spare_memo = std::mem::take(&mut lw.memo);
            spare_seen = std::mem::take(&mut lw.seen);
            config::debug_log!(
                2,
                "plan split: a kernel needs more than {MAX_ARG_BYTES} argument bytes (the \
                 CUDA argument struct must stay under 4 KB), more than {MAX_KERNEL_VALUES} \
                 values or more than {MAX_KERNEL_HEAVY} transcendental functions"
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
            // (this planning pass is then only a search for cuts)
            let found = arg_cuts(targets[0], nodes, dag, mat);
            if !found.is_empty() {
                cuts.extend(found);
                continue;
            }
            // no cut found by the estimate: the whole kernel, and the computations it reads
            // materialized
            lw.bail = false;
            lw.b = Builder::new(shape.len());
            lw.params.clear();
            lw.param_memo.clear();
            lw.inputs.clear();
            lw.input_slot.clear();
            lw.memo = cleared(&mut spare_memo);
            lw.seen = cleared(&mut spare_seen);
            lw.stack = std::mem::take(&mut frames);
            lower_kernel(&mut lw, &targets, red, &shape)?;
            let mut split = false;
            for &i in dag.inputs(targets[0]) {
                let i = i as usize;
                if nodes[i].op.is_elementwise() && !mat[i] && !dag.realized(i) {
                    lw.extra.insert(i);
                    split = true;
                }
            }
            if !split {
                return Err(Error::internal(
                    "plan",
                    format!(
                        "kernel arguments of {} bytes cannot be split",
                        lw.arg_bytes()
                    ),
                ));
            }
        }
        let Lowerer {
            b,
            params,
            inputs,
            seen,
            memo,
            stack,
            ..
        } = lw;
        frames = stack;
        spare_memo = memo;
        // a computation read by two kernels is materialized too, unless it is cheap
        // enough to compute in each (`cheap_nodes`)
        let mut shares = false;
        for &p in seen.keys() {
            kernels[p] = kernels[p].saturating_add(1);
            if kernels[p] > cheap[p].kernels.max(1) {
                extra.insert(p);
            }
            shares |= cheap[p].kernels > 1;
        }
        spare_seen = seen;
        if shares {
            shared_work.push(steps.len());
        }
        let kernel = b.finish();
        kernel
            .validate()
            .map_err(|e| Error::internal("lower", format!("{e} in\n{kernel}")))?;
        steps.push(TStep::Kernel {
            kernel: Arc::new(kernel),
            inputs,
            outputs: targets,
            shape: shape.into(),
            params,
            recomputes: None,
        });
    }
    if extra.is_empty() {
        // the plan is final unless cuts are found (then its notes are not read)
        note_recomputed(&mut steps, &shared_work, &kernels, nodes, dag, mat);
    }
    Ok((steps, extra, cuts))
}

/// Records on each kernel step the computations it computes that other kernels compute
/// too (rather than reading them stored): the outermost ones, those its outputs reach
/// through computations of its own alone. `shared_work` lists the kernel steps that may
/// compute such computations, `kernels` how many kernels compute each position.
fn note_recomputed(
    steps: &mut [TStep],
    shared_work: &[usize],
    kernels: &[u8],
    nodes: &[Arc<Node>],
    dag: &Dag,
    mat: &[bool],
) {
    let mut visited = PosSet::default();
    for &si in shared_work {
        let TStep::Kernel {
            outputs,
            recomputes,
            ..
        } = &mut steps[si]
        else {
            continue;
        };
        // from the outputs down through computed nodes, stopping at shared ones
        visited.clear();
        let mut found: Vec<usize> = Vec::new();
        let mut stack: Vec<usize> = outputs.clone();
        while let Some(u) = stack.pop() {
            for &i in dag.inputs(u) {
                let i = i as usize;
                if dag.realized(i) || mat[i] || !visited.insert(i) {
                    continue;
                }
                // a computed node beneath the outputs is this kernel's (only elementwise
                // ones are counted in `kernels`)
                if kernels[i] >= 2 {
                    found.push(i);
                } else {
                    stack.push(i);
                }
            }
        }
        if found.is_empty() {
            continue;
        }
        found.sort_unstable();
        let ops = found
            .iter()
            .map(|&p| nodes[p].op.name())
            .collect::<Vec<_>>()
            .join(", ");
        *recomputes = Some(Arc::new(super::Recomputes { at: found, ops }));
    }
}
