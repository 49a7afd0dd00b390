//! `Function`: a computation traced once over placeholder arrays, then called many times
//! with the plan bound straight to new inputs (no graph building, hashing or planning per
//! call); on CUDA a repeated call replays one CUDA graph.

use crate::exec::{PosSlot, Res};
use crate::graph::{Node, Op, Shape};
use crate::schedule::{self, Template};
use crate::{Array, DType, Device, Error, Result};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

struct Inner {
    device: Device,
    params: Vec<(Vec<usize>, DType)>,
    template: Arc<Template>,
    slots: Vec<PosSlot>,
    results: Vec<Res>,
    /// Stands in for positions no step refers to.
    dummy: Arc<Node>,
    #[cfg(feature = "cuda")]
    graph: Option<crate::exec::replay::GraphState>,
}

/// A computation traced once and called many times: the explicit form of a simulation
/// step.
///
/// | call | meaning |
/// |---|---|
/// | `lf::Function::trace(&[&Array], FnOnce(&[Array]) -> Vec<Array>) -> lf::Result<Function>` | run the closure once over placeholders shaped like the examples and plan its results |
/// | `f.call(&[&Array]) -> lf::Result<Vec<Array>>` | the results for new inputs (same shapes, dtypes, device); queued, not waited for |
/// | `f.is_graph() -> bool` | whether calls replay a recorded CUDA graph now |
/// | `lf::stats().graph_captures / graph_launches / graph_fallbacks` | graphs recorded, replayed, refused or failed |
/// | `lf::memory_stats()`, `dev.pool_usage()` | live/peak bytes of array buffers; the CUDA pool's used/reserved bytes |
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
            Default::default(),
        );
        let params = examples
            .iter()
            .map(|a| (a.shape().to_vec(), a.dtype()))
            .collect();
        #[cfg(feature = "cuda")]
        let graph = crate::exec::replay::GraphState::new(
            &device,
            &template,
            &slots,
            &results,
            examples.len(),
        );
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
        let sched = crate::exec::bind(&inner.template, &nodes)?.without_reuse();
        drop(nodes);
        crate::exec::execute(&sched)?;
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
