//! `Function`: a computation traced over placeholder arrays, then called many times with
//! the plan bound straight to new inputs (no graph building, hashing or planning per
//! call); one traced plan per input signature; on CUDA a repeated call replays one CUDA
//! graph.

use crate::exec::{PosSlot, Res};
use crate::graph::{Node, Op, Shape};
use crate::schedule::{self, Template};
use crate::{config, Array, DType, Device, Error, Result};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// The traced closure (it may borrow what it captures for the function's lifetime `'f`).
type Closure<'f> = dyn Fn(&[Array]) -> Vec<Array> + Send + Sync + 'f;

/// Most input signatures a function keeps plans for; a new one beyond it drops the least
/// recently called (each plan may hold a CUDA graph and its arena).
const MAX_SIGNATURES: usize = 16;

/// What a trace is keyed by: the inputs' shapes and dtypes and their device.
#[derive(Clone, PartialEq, Eq)]
struct Signature {
    device: Device,
    params: Vec<(Vec<usize>, DType)>,
}

impl Signature {
    fn of(device: &Device, inputs: &[&Array]) -> Signature {
        Signature {
            device: device.clone(),
            params: inputs
                .iter()
                .map(|a| (a.shape().to_vec(), a.dtype()))
                .collect(),
        }
    }
    /// Whether `inputs` on `device` have this signature (no allocation: the per-call check).
    fn matches(&self, device: &Device, inputs: &[&Array]) -> bool {
        self.device == *device
            && self.params.len() == inputs.len()
            && self
                .params
                .iter()
                .zip(inputs)
                .all(|((s, d), a)| a.dtype() == *d && a.shape() == s.as_slice())
    }
    /// How `other` differs from this signature, for the cache-miss explanation.
    fn diff(&self, other: &Signature) -> String {
        let mut out = Vec::new();
        if self.device != other.device {
            out.push(format!("device {} -> {}", self.device, other.device));
        }
        for (i, ((s0, d0), (s1, d1))) in self.params.iter().zip(&other.params).enumerate() {
            if s0 != s1 || d0 != d1 {
                out.push(format!("input {i}: {d0} {s0:?} -> {d1} {s1:?}"));
            }
        }
        out.join(", ")
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(")?;
        for (i, (s, d)) in self.params.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d} {s:?}")?;
        }
        write!(f, ") on {}", self.device)
    }
}

/// The closure traced for one input signature: its plan and how to bind it per call.
struct Traced {
    device: Device,
    template: Arc<Template>,
    slots: Vec<PosSlot>,
    results: Vec<Res>,
    /// Stands in for positions no step refers to.
    dummy: Arc<Node>,
    #[cfg(feature = "cuda")]
    graph: Option<crate::exec::replay::GraphState>,
    /// The plan is one kernel that may write into an input's buffer.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    inplace_one_kernel: bool,
    /// Per step: the intermediates (fresh positions, no result) nothing reads after it,
    /// whose buffers a plain run releases then (`exec::Schedule::with_release`).
    release: Vec<SmallVec<[usize; 2]>>,
}

/// One cached trace.
struct Entry {
    sig: Signature,
    traced: Mutex<Traced>,
}

struct Shared<'f> {
    f: Box<Closure<'f>>,
    /// Number of inputs the closure takes (that of the first trace's examples).
    n_inputs: usize,
    /// Traces by signature, least recently called first.
    entries: Mutex<Vec<Arc<Entry>>>,
}

/// A computation traced once per input signature and called many times: the explicit
/// form of a simulation step.
///
/// | call | meaning |
/// |---|---|
/// | `lf::Function::trace(&[&Array], Fn(&[Array]) -> Vec<Array> + Send + Sync) -> lf::Result<Function>` | run the closure once over placeholders shaped like the examples and plan its results |
/// | `f.call(&[&Array]) -> lf::Result<Vec<Array>>` | the results for new inputs (same count; new shapes, dtypes or device trace again); queued, not waited for |
/// | `f.call_owned(Vec<Array>) -> lf::Result<Vec<Array>>` | the same, consuming the inputs: a result may be written into the buffer of an input whose last handle this was |
/// | `f.is_graph() -> bool` | whether calls replay a recorded CUDA graph now |
/// | `f.signatures() -> usize` | input signatures traced and kept |
/// | `lf::random::Key` as an input | new random numbers every call from the same plan (`lf::random::uniform_key`) |
/// | `lf::stats().function_traces` | traces run (one per new signature) |
/// | `lf::stats().graph_captures / graph_launches / graph_fallbacks` | graphs recorded, replayed, refused or failed |
/// | `lf::memory_stats()`, `dev.pool_usage()` | live/peak bytes of array buffers; the CUDA pool's used/reserved bytes |
/// | `LAZYFUSE_DEBUG=2` | says why a call traced again (which input's shape, dtype or device changed) |
///
/// [`Function::trace`] runs a closure once over placeholder arrays shaped like the
/// examples, plans the arrays it returns (one fused plan, as `lf::eval` would), and keeps
/// the plan and the closure. [`Function::call`] binds that plan to new input arrays of the
/// same shapes, dtypes and device and queues it: no DAG is built, hashed or planned per
/// call. Inputs of another signature (shapes, dtypes, device) run the closure again over
/// placeholders like them and keep that plan too: one plan per signature, the 16 most
/// recently called kept. On CUDA, the second call of a signature records its plan as a
/// CUDA graph (cuFFT calls included) and every later call updates the graph's kernel
/// arguments and replays it with one launch (`lf::stats().graph_launches`);
/// `LAZYFUSE_GRAPHS=0` turns graphs off. On the CPU a call runs the cached plan through
/// the interpreter.
///
/// Everything the closure captures (arrays such as an FFT multiplier, Rust scalars) is fixed
/// at trace time, so what depends on captured arrays alone is computed once, then: a trace
/// evaluates and keeps each such computation that the inputs' computation reads (the
/// symmetrized half of a captured filter in the real-FFT sim step, a reduction or a
/// transform of a captured array), when it is no larger than the captured buffers it reads;
/// calls read it instead of computing it again. A value that changes from call to call must
/// be an input (a 0-d or 1-element array, a [`crate::random::Key`]'s array for random
/// numbers). The closure must be a pure function of its inputs and captures: it may run
/// again for a new signature.
///
/// ```
/// use lazyfuse as lf;
/// use lf::{Array, DType};
///
/// # fn main() -> lf::Result<()> {
/// let mut u = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
/// let step = lf::Function::trace(&[&u], |x| vec![&x[0] * 0.5 + 1.0])?;
/// for _ in 0..10 {
///     u = step.call(&[&u])?.remove(0);
/// }
/// let v = u.to_vec::<f32>()?;
/// assert!((v[0] - 1.9990234).abs() < 1e-6); // 2 - 0.5^10
/// // another shape traces again
/// let w = step.call(&[&Array::from_vec(vec![4.0f32; 5], &[5])?])?.remove(0);
/// assert_eq!(w.to_vec::<f32>()?, vec![3.0f32; 5]);
/// assert_eq!(step.signatures(), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Function<'f> {
    inner: Arc<Shared<'f>>,
}

impl std::fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries();
        write!(f, "Function({} inputs", self.inner.n_inputs)?;
        for e in entries.iter() {
            let t = lock(&e.traced);
            write!(
                f,
                "; {}: {} results, {} steps",
                e.sig,
                t.results.len(),
                t.template.steps().len()
            )?;
        }
        write!(f, ")")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'f> Function<'f> {
    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Entry>>> {
        lock(&self.inner.entries)
    }

    /// Traces `f` over placeholders shaped like `examples` (same shapes, dtypes and
    /// device; their values are not used, but lazy examples are evaluated) and plans the
    /// arrays it returns. The function keeps `f`: a call with inputs of another signature
    /// runs it again. `f` may borrow what it captures (an FFT multiplier, a mask); the
    /// function then lives no longer than those borrows (`Function<'f>`; a closure that
    /// owns its captures gives a `Function<'static>`). Errors when the examples or results live on different devices, or
    /// when planning fails.
    pub fn trace<F>(examples: &[&Array], f: F) -> Result<Function<'f>>
    where
        F: Fn(&[Array]) -> Vec<Array> + Send + Sync + 'f,
    {
        let f: Box<Closure<'f>> = Box::new(f);
        let device = inputs_device("Function::trace", examples)?;
        let sig = Signature::of(&device, examples);
        let traced = trace_one(&*f, examples, &device)?;
        crate::stats::bump::function_traces(1);
        Ok(Function {
            inner: Arc::new(Shared {
                f,
                n_inputs: examples.len(),
                entries: Mutex::new(vec![Arc::new(Entry {
                    sig,
                    traced: Mutex::new(traced),
                })]),
            }),
        })
    }

    /// Runs the traced computation on `inputs` (lazy inputs are evaluated first) and
    /// returns its results. Inputs of a signature (shapes, dtypes, device) not seen yet
    /// trace the closure again first. Asynchronous like [`Array::eval`]: the results are
    /// queued, not waited for. Errors when the number of inputs differs from the trace's,
    /// or the inputs live on different devices. Tracing for another device runs the
    /// closure there: arrays it captured from the first device then meet the new inputs,
    /// which panics as any expression mixing devices does: trace one function per device
    /// when the closure captures arrays.
    pub fn call(&self, inputs: &[&Array]) -> Result<Vec<Array>> {
        let _range = crate::nvtx::range(c"lazyfuse.call");
        let entry = self.entry_for("Function::call", inputs)?;
        let nodes = inputs.iter().map(|a| a.node.clone()).collect();
        let mut t = lock(&entry.traced);
        t.call(nodes, false)
    }

    /// [`Function::call`] that takes the inputs by value: where the plan reads an input
    /// only at the index where it writes a result of the input's dtype and size, and
    /// `inputs` held the last handle to that array (no other `Array`, lazy expression or
    /// capture refers to it, and no other input is the same array), the result is
    /// written into the input's buffer instead of a new one (`lf::stats().buffers_reused`),
    /// as a plain `eval` does. The usual loop: `u = f.call_owned(vec![u])?.remove(0)`.
    /// On CUDA a plan of one kernel that can write into an input then runs as a plain
    /// launch rather than a graph replay (a graph saves nothing for one launch, as for
    /// `eval`); a plan of several steps replays its graph, whose results are fresh pooled
    /// buffers (the consumed inputs' buffers return to the pool for the next call).
    pub fn call_owned(&self, inputs: Vec<Array>) -> Result<Vec<Array>> {
        let _range = crate::nvtx::range(c"lazyfuse.call");
        let entry = {
            let refs: Vec<&Array> = inputs.iter().collect();
            self.entry_for("Function::call_owned", &refs)?
        };
        let nodes = inputs.into_iter().map(|a| a.node).collect();
        let mut t = lock(&entry.traced);
        t.call(nodes, true)
    }

    /// The trace for `inputs`' signature (traced now when new), with the inputs
    /// evaluated.
    fn entry_for(&self, op: &'static str, inputs: &[&Array]) -> Result<Arc<Entry>> {
        let n = self.inner.n_inputs;
        if inputs.len() != n {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "{} inputs given, the function was traced with {n}",
                    inputs.len()
                ),
            });
        }
        let device = inputs_device(op, inputs)?;
        for a in inputs {
            a.eval()?;
        }
        {
            let mut entries = self.entries();
            if let Some(i) = entries.iter().rposition(|e| e.sig.matches(&device, inputs)) {
                let last = entries.len() - 1;
                if i != last {
                    let e = entries.remove(i);
                    entries.push(e);
                }
                return Ok(entries[last].clone());
            }
            if config::debug_level() >= 2 {
                let sig = Signature::of(&device, inputs);
                let why = entries
                    .last()
                    .map_or_else(String::new, |e| format!(": {}", e.sig.diff(&sig)));
                config::debug_log!(
                    2,
                    "Function::call: no trace for input signature {sig} ({} kept){why}; \
                     tracing again",
                    entries.len()
                );
            }
        }
        // traced without the lock: the closure may be slow, or call this function itself
        let traced = trace_one(&*self.inner.f, inputs, &device)?;
        crate::stats::bump::function_traces(1);
        let entry = Arc::new(Entry {
            sig: Signature::of(&device, inputs),
            traced: Mutex::new(traced),
        });
        let mut entries = self.entries();
        // another thread may have traced the same signature meanwhile: either plan is good
        entries.retain(|e| !e.sig.matches(&device, inputs));
        if entries.len() >= MAX_SIGNATURES {
            entries.remove(0);
        }
        entries.push(entry.clone());
        Ok(entry)
    }

    /// Whether calls of the most recently called signature replay a recorded CUDA graph
    /// now (true from that signature's second call on CUDA when graphs are on and the
    /// plan allows them).
    pub fn is_graph(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            let last = self.entries().last().cloned();
            last.is_some_and(|e| {
                lock(&e.traced)
                    .graph
                    .as_ref()
                    .is_some_and(|g| g.is_recorded())
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
    }

    /// Number of input signatures traced and kept (one plan each).
    pub fn signatures(&self) -> usize {
        self.entries().len()
    }
}

/// The device all of `arrays` live on (the default device when there are none).
fn inputs_device(op: &'static str, arrays: &[&Array]) -> Result<Device> {
    let device = arrays
        .first()
        .map(|a| a.device())
        .unwrap_or_else(crate::default_device);
    for a in arrays {
        same_device(op, &device, &a.device())?;
    }
    Ok(device)
}

/// Runs `f` once over placeholders shaped like `examples` on `device` and plans the
/// arrays it returns.
fn trace_one(f: &Closure<'_>, examples: &[&Array], device: &Device) -> Result<Traced> {
    let _range = crate::nvtx::range(c"lazyfuse.trace");
    let mut placeholders = Vec::with_capacity(examples.len());
    for a in examples {
        let buf = a.buffer()?;
        placeholders.push(Array::from_node(Node::leaf_shared(
            buf,
            a.node.shape.clone(),
            device.clone(),
        )));
    }
    let outputs = crate::with_default_device(device, || f(&placeholders));
    for o in &outputs {
        same_device("Function::trace", device, &o.device())?;
    }
    let roots: Vec<Arc<Node>> = outputs.iter().map(|o| o.node.clone()).collect();
    let ids: HashSet<u64> = placeholders.iter().map(|p| p.node.id).collect();
    let hoisted = invariants(&roots, &ids);
    if !hoisted.is_empty() {
        // a body of many steps builds the same invariant once a step (the real-FFT plan's
        // half multiplier): one is computed, the others share its buffer
        let (unique, copies) = same_expressions(&hoisted);
        crate::exec::evaluate(&unique)?;
        for (copy, of) in copies {
            let buf = unique[of].buffer().ok_or_else(|| {
                Error::internal("Function::trace", "an evaluated invariant has no buffer")
            })?;
            copy.realize(buf);
        }
    }
    let planning = crate::nvtx::range(c"lazyfuse.plan");
    let (template, nodes) = schedule::template_for(&roots)?;
    drop(planning);
    let pos: HashMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let produced: HashSet<usize> = template.steps().iter().flat_map(|s| s.writes()).collect();
    let input_of: HashMap<u64, usize> = placeholders
        .iter()
        .enumerate()
        .map(|(i, p)| (p.node.id, i))
        .collect();
    let slots: Vec<PosSlot> = nodes
        .iter()
        .enumerate()
        .map(|(p, n)| {
            if let Some(&i) = input_of.get(&n.id) {
                PosSlot::Input(i)
            } else if n.buffer().is_some() {
                PosSlot::Keep(n.clone())
            } else if produced.contains(&p) {
                PosSlot::Fresh(n.op.clone(), n.dtype, n.shape.clone())
            } else if matches!(n.op, Op::Const(_) | Op::Random(..)) && n.inputs().is_empty() {
                PosSlot::Keep(n.clone())
            } else {
                PosSlot::Unused
            }
        })
        .collect();
    let results: Vec<Res> = roots
        .iter()
        .map(|r| {
            let p = pos[&r.id];
            match &slots[p] {
                PosSlot::Input(i) => Ok(Res::Input(*i)),
                PosSlot::Keep(n) => Ok(Res::Keep(n.clone())),
                PosSlot::Fresh(..) => Ok(Res::Pos(p)),
                PosSlot::Unused => Err(Error::internal(
                    "Function::trace",
                    "a result is neither computed nor an input",
                )),
            }
        })
        .collect::<Result<_>>()?;
    let dummy = Node::new(
        Op::Const(lazyfuse_codegen::Scalar::Bool(false)),
        DType::Bool,
        Shape::new(),
        device.clone(),
        Default::default(),
    );
    #[cfg(feature = "cuda")]
    let graph =
        crate::exec::replay::GraphState::new(device, &template, &slots, &results, examples.len());
    let inplace_one_kernel = template.steps().len() == 1
        && template
            .reuse()
            .iter()
            .any(|c| matches!(slots[c.x], PosSlot::Input(_)));
    let release = dead_after(&template, &slots, &results);
    Ok(Traced {
        device: device.clone(),
        template,
        slots,
        results,
        dummy,
        release,
        #[cfg(feature = "cuda")]
        graph,
        inplace_one_kernel,
    })
}

/// Per step of `t`: the fresh positions of `slots` that are no result and that no later
/// step reads or writes (a long body's intermediates, released as the call goes). Those
/// the last step touches go with the call anyway; empty when nothing is released early
/// (a one-step plan).
fn dead_after(t: &Template, slots: &[PosSlot], results: &[Res]) -> Vec<SmallVec<[usize; 2]>> {
    let mut last: HashMap<usize, usize> = HashMap::new();
    for (i, s) in t.steps().iter().enumerate() {
        for p in s.reads().into_iter().chain(s.writes()) {
            last.insert(p, i);
        }
    }
    let kept: HashSet<usize> = results
        .iter()
        .filter_map(|r| match r {
            Res::Pos(p) => Some(*p),
            _ => None,
        })
        .collect();
    let final_step = t.steps().len().saturating_sub(1);
    let mut out = vec![SmallVec::new(); t.steps().len()];
    let mut any = false;
    for (p, i) in last {
        if i < final_step && matches!(slots.get(p), Some(PosSlot::Fresh(..))) && !kept.contains(&p)
        {
            out[i].push(p);
            any = true;
        }
    }
    if !any {
        out.clear();
    }
    out
}

/// The subexpressions under `roots` that a trace evaluates once and keeps: computations of
/// captured arrays alone (no input in `inputs` below them) read by a node that depends on an
/// input, no larger than the largest captured buffer they read (a symmetrized filter, a
/// transform or a reduction of a captured array; not a broadcast of one to a larger shape,
/// nor a view, nor anything made only of constants, random numbers or ranges, which cost
/// more to read back than to compute). Captured arrays are fixed at trace time, so the
/// results are the same; each call then reads them instead of computing them again.
/// Iterative: any depth.
fn invariants(roots: &[Arc<Node>], inputs: &HashSet<u64>) -> Vec<Arc<Node>> {
    /// Per node: depends on an input; the largest captured buffer below it (elements);
    /// computes something (not only views of buffers and constants).
    #[derive(Clone, Copy)]
    struct Info {
        variant: bool,
        largest: usize,
        computes: bool,
    }
    let mut info: HashMap<u64, Info> = HashMap::new();
    let mut order: Vec<(Arc<Node>, crate::graph::Inputs)> = Vec::new();
    // (node, its inputs once visited: the node is done when popped with them)
    let mut stack: Vec<(Arc<Node>, Option<crate::graph::Inputs>)> =
        roots.iter().map(|r| (r.clone(), None)).collect();
    let mut seen: HashSet<u64> = HashSet::new();
    while let Some((n, visited)) = stack.pop() {
        let Some(ins) = visited else {
            if seen.insert(n.id) {
                let ins = n.inputs();
                let below: Vec<Arc<Node>> = ins
                    .iter()
                    .filter(|x| !seen.contains(&x.id))
                    .cloned()
                    .collect();
                stack.push((n, Some(ins)));
                stack.extend(below.into_iter().map(|x| (x, None)));
            }
            continue;
        };
        let mut i = Info {
            variant: inputs.contains(&n.id),
            largest: 0,
            computes: !ins.is_empty()
                && (n.op.is_elementwise()
                    || n.op.is_library()
                    || matches!(n.op, Op::Reduce(..) | Op::Gather { .. })),
        };
        if ins.is_empty() && n.buffer().is_some() && !i.variant {
            i.largest = n.shape.iter().product();
        }
        for x in &ins {
            let xi = info[&x.id];
            i.variant |= xi.variant;
            i.largest = i.largest.max(xi.largest);
            i.computes |= xi.computes;
        }
        info.insert(n.id, i);
        order.push((n, ins));
    }
    let mut out: Vec<Arc<Node>> = Vec::new();
    let mut chosen: HashSet<u64> = HashSet::new();
    for (n, ins) in &order {
        if !info[&n.id].variant {
            continue;
        }
        for x in ins {
            let xi = info[&x.id];
            let size: usize = x.shape.iter().product();
            if !xi.variant
                && xi.computes
                && xi.largest > 0
                && size <= xi.largest
                && x.buffer().is_none()
                && chosen.insert(x.id)
            {
                out.push(x.clone());
            }
        }
    }
    out
}

/// A node and the canonical ids of its inputs (`same_expressions`).
type Canonical = (Arc<Node>, SmallVec<[u64; 3]>);

/// `nodes` split by [`same_expressions`]: the firsts, and each other with its first's index.
type Split = (Vec<Arc<Node>>, Vec<(Arc<Node>, usize)>);

/// Splits `nodes` into the first of each group of equal expressions (same operations over
/// the same leaves, compared structurally below them) and the others, each with the index
/// of its group's first in the first list.
fn same_expressions(nodes: &[Arc<Node>]) -> Split {
    // per node below `nodes` (post-order, iteratively): the id of the first equal node
    let mut canon: HashMap<u64, u64> = HashMap::new();
    // per structural key: the first nodes seen with it and their inputs' canonical ids
    let mut firsts: HashMap<u64, Vec<Canonical>> = HashMap::new();
    let mut stack: Vec<(Arc<Node>, bool)> =
        nodes.iter().rev().map(|n| (n.clone(), false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if canon.contains_key(&n.id) {
            continue;
        }
        let ins = n.inputs();
        if !expanded && !ins.is_empty() {
            stack.push((n, true));
            stack.extend(
                ins.iter()
                    .filter(|x| !canon.contains_key(&x.id))
                    .map(|x| (x.clone(), false)),
            );
            continue;
        }
        // a leaf (a buffer, a constant) is itself; an operation is the first equal one
        let id = if ins.is_empty() {
            n.id
        } else {
            let keys: SmallVec<[u64; 3]> = ins.iter().map(|x| canon[&x.id]).collect();
            let same = firsts.entry(n.structure_key()).or_default();
            match same.iter().find(|(f, k)| {
                *k == keys
                    && f.op == n.op
                    && f.dtype == n.dtype
                    && f.shape == n.shape
                    && f.device == n.device
            }) {
                Some((f, _)) => f.id,
                None => {
                    same.push((n.clone(), keys));
                    n.id
                }
            }
        };
        canon.insert(n.id, id);
    }
    let mut unique: Vec<Arc<Node>> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut copies = Vec::new();
    for n in nodes {
        let c = canon[&n.id];
        match index.get(&c) {
            Some(&i) => copies.push((n.clone(), i)),
            None => {
                index.insert(c, unique.len());
                unique.push(n.clone());
            }
        }
    }
    (unique, copies)
}

impl Traced {
    /// One call over the inputs' (evaluated) nodes. Handles in `inputs` are the call's
    /// own: they are dropped before the plan runs, so an input whose last handle this was
    /// may be written in place. `owned`: the caller gave its handles up
    /// ([`Function::call_owned`]), so a one-kernel plan that can write into an input runs
    /// plainly instead of through a CUDA graph.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    fn call(&mut self, inputs: Vec<Arc<Node>>, owned: bool) -> Result<Vec<Array>> {
        let nodes: Vec<Arc<Node>> = self
            .slots
            .iter()
            .map(|s| match s {
                PosSlot::Input(i) => inputs[*i].clone(),
                PosSlot::Keep(n) => n.clone(),
                PosSlot::Fresh(op, d, sh) => {
                    Node::fresh(op.clone(), *d, sh.clone(), self.device.clone())
                }
                PosSlot::Unused => self.dummy.clone(),
            })
            .collect();
        let results: Vec<Array> = self
            .results
            .iter()
            .map(|r| {
                Array::from_node(match r {
                    Res::Pos(p) => nodes[*p].clone(),
                    Res::Input(i) => inputs[*i].clone(),
                    Res::Keep(n) => n.clone(),
                })
            })
            .collect();
        crate::stats::bump::evals(1);
        #[cfg(feature = "cuda")]
        if let Some(g) = self
            .graph
            .as_mut()
            .filter(|_| !(owned && self.inplace_one_kernel))
        {
            let bufs: Vec<Arc<crate::runtime::Buffer>> = inputs
                .iter()
                .map(|n| {
                    n.buffer()
                        .ok_or_else(|| Error::internal("Function::call", "input not evaluated"))
                })
                .collect::<Result<_>>()?;
            g.call(&self.template, &nodes, &bufs)?;
            return Ok(results);
        }
        // In place only into inputs: the bound nodes do not carry the template's edges, so
        // reference counts prove ownership of nothing else (see `exec::inplace`).
        let slots = &self.slots;
        let sched = crate::exec::bind(&self.template, &nodes)?
            .with_input_reuse(&self.template, &nodes, |p| {
                matches!(slots[p], PosSlot::Input(_))
            })
            .with_release(&self.release, &nodes);
        drop(nodes);
        drop(inputs);
        crate::exec::execute(&sched)?;
        Ok(results)
    }
}

fn same_device(op: &'static str, a: &Device, b: &Device) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::DeviceMismatch {
            op,
            a: a.to_string(),
            b: b.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_miss_names_what_changed() {
        let cpu = Device::Cpu;
        let a = Signature {
            device: cpu.clone(),
            params: vec![(vec![8], DType::F32), (vec![], DType::I64)],
        };
        let b = Signature {
            device: cpu.clone(),
            params: vec![(vec![3, 3], DType::F32), (vec![], DType::I64)],
        };
        let c = Signature {
            device: cpu,
            params: vec![(vec![8], DType::F64), (vec![], DType::I64)],
        };
        assert_eq!(a.diff(&b), "input 0: float32 [8] -> float32 [3, 3]");
        assert_eq!(a.diff(&c), "input 0: float32 [8] -> float64 [8]");
        assert_eq!(a.diff(&a), "");
        assert_eq!(b.to_string(), "(float32 [3, 3], int64 []) on cpu");
    }
}
