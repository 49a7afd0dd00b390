//! `Function`: a computation traced once over placeholder arrays, then called many times
//! with the plan bound straight to new inputs (no graph building, hashing or planning per
//! call); on CUDA a repeated call replays one CUDA graph.

use crate::graph::{Node, Op, Shape};
use crate::schedule::{self, Template};
use crate::{Array, DType, Device, Error, Result};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What a DAG position of the traced plan becomes at each call.
enum PosSlot {
    /// The call's input `i`.
    Input(usize),
    /// A node the trace captured (an evaluated array, a constant), kept by the function.
    Keep(Arc<Node>),
    /// A node the plan computes: a new node per call.
    Fresh(Op, DType, Shape),
    /// Not referenced by the plan's steps.
    Unused,
}

/// Where a result of a call comes from.
enum Res {
    Pos(usize),
    Input(usize),
    Keep(Arc<Node>),
}

struct Inner {
    device: Device,
    params: Vec<(Vec<usize>, DType)>,
    template: Arc<Template>,
    slots: Vec<PosSlot>,
    results: Vec<Res>,
    /// Stands in for positions no step refers to.
    dummy: Arc<Node>,
    #[cfg(feature = "cuda")]
    graph: Option<cuda_path::GraphState>,
}

/// A computation traced once and called many times: the explicit form of a simulation
/// step.
///
/// [`Function::trace`] runs a closure once over placeholder arrays shaped like the
/// examples, plans the arrays it returns (one fused plan, as `lf::eval` would), and keeps
/// the plan. [`Function::call`] binds that plan to new input arrays of the same shapes,
/// dtypes and device and queues it: no DAG is built, hashed or planned per call. On CUDA,
/// the second call records the plan as a CUDA graph (cuFFT calls included) and every later
/// call updates the graph's kernel arguments and replays it with one launch
/// (`lf::stats().graph_launches`); `LAZYFUSE_GRAPHS=0` turns graphs off. On the CPU a call
/// runs the cached plan through the interpreter.
///
/// Everything the closure captures (arrays such as an FFT multiplier, Rust scalars) is fixed
/// at trace time; a value that changes from call to call must be an input (a 0-d or 1-element
/// array). The closure must be a pure function of its inputs and captures.
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
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Function {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        write!(
            f,
            "Function({} inputs, {} results, {} steps on {})",
            inner.params.len(),
            inner.results.len(),
            inner.template.steps().len(),
            inner.device
        )
    }
}

impl Function {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Traces `f` once over placeholders shaped like `examples` (same shapes, dtypes and
    /// device; their values are not used, but lazy examples are evaluated) and plans the
    /// arrays it returns. Errors when the examples or results live on different devices,
    /// or when planning fails.
    pub fn trace<F>(examples: &[&Array], f: F) -> Result<Function>
    where
        F: FnOnce(&[Array]) -> Vec<Array>,
    {
        let device = examples
            .first()
            .map(|a| a.device())
            .unwrap_or_else(crate::default_device);
        let mut placeholders = Vec::with_capacity(examples.len());
        for a in examples {
            same_device("Function::trace", &device, &a.device())?;
            let buf = a.buffer()?;
            placeholders.push(Array::from_node(Node::leaf_shared(
                buf,
                a.node.shape.clone(),
                device.clone(),
            )));
        }
        let outputs = crate::with_default_device(&device, || f(&placeholders));
        for o in &outputs {
            same_device("Function::trace", &device, &o.device())?;
        }
        let roots: Vec<Arc<Node>> = outputs.iter().map(|o| o.node.clone()).collect();
        let (template, nodes) = schedule::template_for(&roots)?;
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
            Vec::new(),
        );
        let params = examples
            .iter()
            .map(|a| (a.shape().to_vec(), a.dtype()))
            .collect();
        #[cfg(feature = "cuda")]
        let graph =
            cuda_path::GraphState::new(&device, &template, &slots, &results, examples.len());
        Ok(Function {
            inner: Arc::new(Mutex::new(Inner {
                device,
                params,
                template,
                slots,
                results,
                dummy,
                #[cfg(feature = "cuda")]
                graph,
            })),
        })
    }

    /// Runs the traced computation on `inputs` (same count, shapes, dtypes and device as
    /// the trace's examples; lazy inputs are evaluated first) and returns its results.
    /// Asynchronous like [`Array::eval`]: the results are queued, not waited for.
    pub fn call(&self, inputs: &[&Array]) -> Result<Vec<Array>> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        if inputs.len() != inner.params.len() {
            return Err(Error::Shape {
                op: "Function::call",
                msg: format!(
                    "{} inputs given, the function was traced with {}",
                    inputs.len(),
                    inner.params.len()
                ),
            });
        }
        for (i, (a, (shape, dtype))) in inputs.iter().zip(&inner.params).enumerate() {
            if a.shape() != shape.as_slice() || a.dtype() != *dtype {
                return Err(Error::Shape {
                    op: "Function::call",
                    msg: format!(
                        "input {i} is {} {:?}, the function was traced with {dtype} {shape:?}",
                        a.dtype(),
                        a.shape()
                    ),
                });
            }
            same_device("Function::call", &inner.device, &a.device())?;
            a.eval()?;
        }
        let nodes: Vec<Arc<Node>> = inner
            .slots
            .iter()
            .map(|s| match s {
                PosSlot::Input(i) => inputs[*i].node.clone(),
                PosSlot::Keep(n) => n.clone(),
                PosSlot::Fresh(op, d, sh) => {
                    Node::fresh(op.clone(), *d, sh.clone(), inner.device.clone())
                }
                PosSlot::Unused => inner.dummy.clone(),
            })
            .collect();
        let results: Vec<Array> = inner
            .results
            .iter()
            .map(|r| {
                Array::from_node(match r {
                    Res::Pos(p) => nodes[*p].clone(),
                    Res::Input(i) => inputs[*i].node.clone(),
                    Res::Keep(n) => n.clone(),
                })
            })
            .collect();
        crate::stats::bump::evals(1);
        #[cfg(feature = "cuda")]
        if let Some(g) = inner.graph.as_mut() {
            let bufs: Vec<Arc<crate::runtime::Buffer>> = inputs
                .iter()
                .map(|a| {
                    a.node
                        .buffer()
                        .ok_or_else(|| Error::internal("Function::call", "input not evaluated"))
                })
                .collect::<Result<_>>()?;
            g.call(&inner.template, &nodes, &bufs)?;
            return Ok(results);
        }
        // No in-place reuse: the bound nodes do not carry the template's edges, so
        // reference counts say nothing about who else reads the inputs and captures.
        let sched = schedule::bind(&inner.template, &nodes)?.without_reuse();
        drop(nodes);
        schedule::execute(&sched)?;
        Ok(results)
    }

    /// Whether calls replay a recorded CUDA graph now (true from the second call on CUDA
    /// when graphs are on and the plan allows them).
    pub fn is_graph(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            self.lock().graph.as_ref().is_some_and(|g| g.is_recorded())
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
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

#[cfg(feature = "cuda")]
pub(crate) use cuda_path::eval_graph;

#[cfg(feature = "cuda")]
mod cuda_path {
    //! Calls on CUDA through `runtime::cuda::graph`: results are fresh buffers per call,
    //! intermediates live in the graph's arena.

    use super::{PosSlot, Res};
    use crate::graph::{Node, Op};
    use crate::runtime::cuda::graph::{GraphPlan, GraphStep, Slot};
    use crate::runtime::cuda::{CudaBuffer, CudaDevice};
    use crate::runtime::Buffer;
    use crate::schedule::{self, TStep, Template};
    use crate::{Device, Error, Result};
    use smallvec::SmallVec;
    use std::sync::Arc;

    pub(super) struct GraphState {
        dev: Arc<CudaDevice>,
        /// Graph operand of each DAG position a step refers to.
        slot_of: Vec<Option<Slot>>,
        /// Positions of the results computed per call, in `Ext` order after the inputs.
        result_pos: Vec<usize>,
        /// Nodes whose buffers are `Fixed` operands, in order.
        fixed: Vec<Arc<Node>>,
        plan: Option<GraphPlan>,
        /// Number of per-call input buffers.
        n_inputs: usize,
    }

    impl GraphState {
        /// The graph state for a traced plan on `device`; `None` off CUDA or when the plan
        /// holds steps a graph cannot run (copies between devices).
        pub(super) fn new(
            device: &Device,
            template: &Template,
            slots: &[PosSlot],
            results: &[Res],
            n_inputs: usize,
        ) -> Option<GraphState> {
            let Device::Cuda(dev) = device else {
                return None;
            };
            if !template
                .steps()
                .iter()
                .all(|s| matches!(s, TStep::Kernel { .. } | TStep::Fft { .. }))
            {
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
            let mut slot_of = vec![None; slots.len()];
            let mut fixed = Vec::new();
            let mut arena = Vec::new();
            for (p, s) in slots.iter().enumerate() {
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
            let base = n_inputs + result_pos.len();
            let mut k = 0;
            for s in slot_of.iter_mut() {
                if let Some(Slot::Fixed(_)) = s {
                    *s = Some(Slot::Fixed(base + k));
                    k += 1;
                }
            }
            let mut st = GraphState {
                dev: dev.clone(),
                slot_of,
                result_pos,
                fixed,
                plan: None,
                n_inputs,
            };
            // Decide eligibility once, on the template's structure (no buffers needed).
            let probe = st.steps_without_args(template).ok()?;
            st.plan = Some(GraphPlan::new(dev.clone(), &probe, arena));
            Some(st)
        }

        /// Whether graphs are off for this plan from the start (ineligible or disabled).
        pub(super) fn is_off(&self) -> bool {
            self.plan.as_ref().is_none_or(|p| p.is_off())
        }

        pub(super) fn is_recorded(&self) -> bool {
            self.plan.as_ref().is_some_and(|p| p.is_recorded())
        }

        fn slot(&self, p: usize) -> Result<Slot> {
            self.slot_of
                .get(p)
                .copied()
                .flatten()
                .ok_or_else(|| Error::internal("Function", format!("position {p} has no buffer")))
        }

        /// The steps with empty arguments (for the eligibility check).
        fn steps_without_args<'a>(&self, t: &'a Template) -> Result<Vec<GraphStep<'a>>> {
            static NO_ARGS: std::sync::OnceLock<lazyfuse_codegen::LaunchArgs> =
                std::sync::OnceLock::new();
            let no_args = NO_ARGS.get_or_init(Default::default);
            self.steps(t, &vec![no_args; t.steps().len()], &[])
        }

        /// The graph steps of `t` with each kernel step's arguments from `args` and FFT
        /// shapes from `nodes` (empty: shapes unknown, for the eligibility check).
        fn steps<'a>(
            &self,
            t: &'a Template,
            args: &[&'a lazyfuse_codegen::LaunchArgs],
            shapes: &'a [(Vec<usize>, Vec<usize>, crate::graph::FftSpec)],
        ) -> Result<Vec<GraphStep<'a>>> {
            let mut out = Vec::new();
            let mut f = 0;
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
                        out.push(GraphStep::Fft {
                            spec,
                            src: self.slot(*src)?,
                            dst: self.slot(*dst)?,
                            in_shape,
                            out_shape,
                        });
                    }
                    _ => return Err(Error::internal("Function", "step kind without graph")),
                }
            }
            Ok(out)
        }

        /// One call: fresh result buffers, then a plain, recorded or replayed run.
        pub(super) fn call(
            &mut self,
            template: &Template,
            nodes: &[Arc<Node>],
            in_bufs: &[Arc<Buffer>],
        ) -> Result<()> {
            let sched = schedule::bind(template, nodes)?;
            // kernel arguments (from the bound schedule) and FFT shapes, in step order
            let mut args = Vec::with_capacity(sched.steps.len());
            let mut ffts = Vec::new();
            static NO_ARGS: std::sync::OnceLock<lazyfuse_codegen::LaunchArgs> =
                std::sync::OnceLock::new();
            let no_args = NO_ARGS.get_or_init(Default::default);
            for s in &sched.steps {
                match s {
                    schedule::Step::Kernel { args: a, .. } => args.push(a),
                    schedule::Step::Fft { src, dst } => {
                        let Op::Fft(spec) = &dst.op else {
                            return Err(Error::internal("Function", "fft step on a non-fft node"));
                        };
                        ffts.push((src.shape.to_vec(), dst.shape.to_vec(), spec.clone()));
                        args.push(no_args);
                    }
                    _ => args.push(no_args),
                }
            }
            let steps = self.steps(template, &args, &ffts)?;
            // buffers: inputs, fresh results, fixed
            let fixed_bufs: Vec<Arc<Buffer>> = self
                .fixed
                .iter()
                .map(|n| {
                    n.buffer().ok_or_else(|| {
                        Error::internal("Function", "captured array lost its buffer")
                    })
                })
                .collect::<Result<_>>()?;
            let outs: Vec<CudaBuffer> = self
                .result_pos
                .iter()
                .map(|&p| self.dev.alloc_buffer(nodes[p].dtype, nodes[p].size()))
                .collect::<Result<_>>()?;
            let mut ext: Vec<&CudaBuffer> = Vec::new();
            for b in in_bufs {
                ext.push(cuda_of(b)?);
            }
            ext.extend(outs.iter());
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
                nodes[p].realize(Arc::new(Buffer::Cuda(buf)));
            }
            Ok(())
        }
    }

    fn cuda_of(b: &Buffer) -> Result<&CudaBuffer> {
        match b {
            Buffer::Cuda(c) => Ok(c),
            _ => Err(Error::internal("Function", "host buffer in a CUDA plan")),
        }
    }

    /// Graph states of plain evaluations, by plan template (the `Arc` keeps the address).
    type EvalGraphs = Vec<(Arc<Template>, Option<GraphState>)>;
    static EVAL_GRAPHS: std::sync::Mutex<EvalGraphs> = std::sync::Mutex::new(Vec::new());
    /// Most plans with eval-level graph state kept (each holds a graph and its arena).
    const EVAL_GRAPHS_MAX: usize = 64;

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
        let Some(Device::Cuda(_)) = roots.first().map(|r| &r.device) else {
            return Ok(false);
        };
        if !crate::runtime::cuda::graph::graphs_enabled()
            || template.steps().len() < 2
            || roots
                .iter()
                .any(|r| r.buffer().is_some() || r.device != roots[0].device)
        {
            return Ok(false);
        }
        let mut cache = EVAL_GRAPHS.lock().unwrap_or_else(|e| e.into_inner());
        let idx = match cache.iter().position(|(t, _)| Arc::ptr_eq(t, template)) {
            Some(i) => i,
            None => {
                if cache.len() >= EVAL_GRAPHS_MAX {
                    cache.clear();
                }
                let state = new_eval_state(template, nodes, roots);
                cache.push((template.clone(), state));
                cache.len() - 1
            }
        };
        let Some(state) = cache[idx].1.as_mut() else {
            return Ok(false);
        };
        let bufs: Vec<Arc<Buffer>> = nodes.iter().filter_map(|n| n.buffer()).collect();
        if bufs.len() != state.n_inputs {
            return Ok(false); // realized-ness is part of the plan key; defensive only
        }
        state.call(template, nodes, &bufs)?;
        Ok(true)
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
        static SPEC: std::sync::OnceLock<crate::graph::FftSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| crate::graph::FftSpec {
            axes: Default::default(),
            inverse: false,
            kind: crate::graph::FftKind::C2C,
        })
    }
}
