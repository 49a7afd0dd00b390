//! Planning: splits the DAG under the requested roots into steps (fused kernels, copies)
//! and runs them. Decisions are data: a `Schedule` can be printed and asserted on.
//!
//! Rules: elementwise ops, broadcasts and every view fuse into their consumer as index
//! arithmetic. A node is materialized (stored by the kernel that computes it) when it is a
//! root, the input of a boundary (a copy between devices), or a computation read at
//! different indices (or under different guards) -- read at one index it is computed once
//! inside the kernel, even with several consumers. Materialized nodes of one shape whose
//! dependencies are met at the same time share one multi-output kernel.

mod lower;

use crate::graph::{Node, Op};
use crate::runtime::{self, Buffer};
use crate::{config, Device, Error, Result};
use lazyfuse_codegen::{Kernel, LaunchArgs};
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// One unit of work.
pub(crate) enum Step {
    /// A fused kernel: reads `inputs`' buffers, computes `outputs`.
    Kernel {
        kernel: Arc<Kernel>,
        inputs: Vec<Arc<Node>>,
        outputs: Vec<Arc<Node>>,
        args: LaunchArgs,
    },
    /// Copy of `src`'s buffer to `dst`'s device.
    Copy { src: Arc<Node>, dst: Arc<Node> },
}

/// The plan of one evaluation.
pub(crate) struct Schedule {
    pub(crate) steps: Vec<Step>,
}

impl Schedule {
    /// Number of kernel steps.
    pub(crate) fn kernel_count(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Kernel { .. })).count()
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
            }
        }
        Ok(())
    }
}

/// All unrealized nodes reachable from `roots`, inputs before users.
fn topo(roots: &[Arc<Node>]) -> Vec<Arc<Node>> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<(Arc<Node>, bool)> = roots.iter().rev().map(|r| (r.clone(), false)).collect();
    while let Some((n, done)) = stack.pop() {
        if done {
            order.push(n);
            continue;
        }
        if !seen.insert(n.id) || n.buffer().is_some() {
            continue;
        }
        stack.push((n.clone(), true));
        for i in n.inputs().into_iter().rev() {
            if !seen.contains(&i.id) {
                stack.push((i, false));
            }
        }
    }
    order
}

/// Plans the evaluation of `roots` (already-realized roots need nothing).
pub(crate) fn plan(roots: &[Arc<Node>]) -> Result<Schedule> {
    let nodes = topo(roots);
    let fuse = config::fusion_enabled();
    let mut mat: HashSet<u64> = HashSet::new();
    for r in roots {
        if r.buffer().is_none() {
            mat.insert(r.id);
        }
    }
    for n in &nodes {
        let is_op = !matches!(n.op, Op::Const(_)) && !(n.op.is_free_view());
        if n.op == Op::ToDevice || (!fuse && is_op) {
            mat.insert(n.id);
        }
        if n.op == Op::ToDevice {
            for i in n.inputs() {
                if i.buffer().is_none() {
                    mat.insert(i.id);
                }
            }
        }
    }
    // Grow the materialized set until no computation is read in two index contexts.
    loop {
        let (steps, extra) = lower::build(&nodes, &mat)?;
        if extra.is_empty() {
            let sched = Schedule { steps };
            crate::stats::bump::plans(1);
            config::debug_log!(3, "{sched}");
            return Ok(sched);
        }
        for id in extra {
            config::debug_log!(3, "materializing #{id}: read at several indices");
            mat.insert(id);
        }
    }
}

/// Plans and runs the evaluation of `roots`.
pub(crate) fn evaluate(roots: &[Arc<Node>]) -> Result<()> {
    if roots.iter().all(|r| r.buffer().is_some()) {
        return Ok(());
    }
    let sched = plan(roots)?;
    crate::stats::bump::evals(1);
    execute(&sched)
}

fn buffer_of(n: &Node) -> Result<Arc<Buffer>> {
    n.buffer()
        .ok_or_else(|| Error::internal("execute", format!("input {n:?} not materialized")))
}

/// Runs a schedule step by step, realizing each step's outputs.
pub(crate) fn execute(sched: &Schedule) -> Result<()> {
    for step in &sched.steps {
        match step {
            Step::Kernel {
                kernel,
                inputs,
                outputs,
                args,
            } => {
                let bufs: Vec<Arc<Buffer>> = inputs.iter().map(|n| buffer_of(n)).collect::<Result<_>>()?;
                let refs: Vec<&Buffer> = bufs.iter().map(|b| b.as_ref()).collect();
                let dev: &Device = &outputs[0].device;
                let outs = runtime::run_kernel(dev, kernel, &refs, args)?;
                for (node, buf) in outputs.iter().zip(outs) {
                    node.realize(Arc::new(buf));
                }
            }
            Step::Copy { src, dst } => {
                let b = buffer_of(src)?;
                let host = runtime::download(&b, 0, b.len())?;
                dst.realize(Arc::new(runtime::upload(&dst.device, host)?));
            }
        }
    }
    Ok(())
}
