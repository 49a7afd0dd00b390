//! In place by ownership, at execution: binds a template's in-place candidates
//! (`schedule::inplace`, which explains the rule) to one evaluation's nodes and, per kernel
//! step, proves ownership and runs the kernel into the consumed buffer.

use crate::graph::{self, Node};
use crate::runtime::{self, Buffer};
use crate::schedule::inplace::{Cand, ConeNode};
use crate::{Error, Result};
use lazyfuse_codegen::{Kernel, LaunchArgs};
use smallvec::SmallVec;
use std::sync::Arc;

/// A candidate bound to the nodes of one evaluation.
pub(crate) struct Bound {
    step: usize,
    slot: usize,
    out: usize,
    x: Arc<Node>,
    x_sched_refs: usize,
    x_consumers: SmallVec<[(usize, usize); 2]>,
    /// The cone's nodes, in the order of `cone`.
    nodes: SmallVec<[Arc<Node>; 12]>,
    cone: Arc<[ConeNode]>,
}

/// Binds the candidates to one evaluation's nodes.
pub(crate) fn bind(cands: &[Cand], nodes: &[Arc<Node>]) -> SmallVec<[Bound; 1]> {
    cands
        .iter()
        .map(|c| Bound {
            step: c.step,
            slot: c.slot,
            out: c.out,
            x: nodes[c.x].clone(),
            x_sched_refs: c.x_sched_refs,
            x_consumers: c.x_consumers.clone(),
            nodes: c.cone.iter().map(|m| nodes[m.pos].clone()).collect(),
            cone: c.cone.clone(),
        })
        .collect()
}

impl Bound {
    /// Whether nothing outside this evaluation can read `x` after the step (see the module
    /// docs). Every count includes the one reference this `Bound` holds.
    fn unobserved(&self) -> bool {
        let mut dying: SmallVec<[bool; 32]> = SmallVec::from_elem(false, self.cone.len());
        for (i, (n, m)) in self.nodes.iter().zip(self.cone.iter()).enumerate() {
            dying[i] = m.tip || {
                let explained: usize = 1
                    + m.sched_refs
                    + m.consumers
                        .iter()
                        .filter(|&&(c, _)| dying[c])
                        .map(|&(_, k)| k)
                        .sum::<usize>();
                Arc::strong_count(n) == explained
            };
        }
        let explained: usize = 1
            + self.x_sched_refs
            + self
                .x_consumers
                .iter()
                .filter(|&&(c, _)| dying[c])
                .map(|&(_, k)| k)
                .sum::<usize>();
        Arc::strong_count(&self.x) == explained
    }
}

/// Runs kernel step `si` of `sched` in place when its candidate's input can be consumed;
/// `Ok(false)` (nothing done) otherwise.
pub(crate) fn try_run(
    sched: &super::Schedule,
    si: usize,
    kernel: &Arc<Kernel>,
    inputs: &[Arc<Node>],
    outputs: &[Arc<Node>],
    args: &LaunchArgs,
    recomputes: Option<&str>,
) -> Result<bool> {
    let Some(b) = sched.reuse.iter().find(|b| b.step == si) else {
        return Ok(false);
    };
    let same_node = inputs.get(b.slot).is_some_and(|n| Arc::ptr_eq(n, &b.x));
    let fits = outputs
        .get(b.out)
        .is_some_and(|o| o.device == b.x.device && args.len() == b.x.size());
    if !same_node || !fits {
        return Ok(false);
    }
    let Some((buf, detached)) = graph::consume_buffer(&b.x, outputs, || b.unobserved()) else {
        return Ok(false);
    };
    let donor: Buffer = Arc::try_unwrap(buf)
        .map_err(|_| Error::internal("in place", "consumed buffer still shared"))?;
    let others: Vec<Arc<Buffer>> = inputs
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != b.slot)
        .map(|(_, n)| {
            n.buffer()
                .ok_or_else(|| Error::internal("execute", format!("input {n:?} not materialized")))
        })
        .collect::<Result<_>>()?;
    let mut it = others.iter();
    let refs: Vec<Option<&Buffer>> = (0..inputs.len())
        .map(|i| {
            if i == b.slot {
                None
            } else {
                it.next().map(|a| &**a)
            }
        })
        .collect();
    let dev = &outputs[0].device;
    let probe = crate::profile::begin(dev);
    let outs = runtime::run_kernel_reuse(dev, kernel, &refs, args, (b.slot, b.out), donor)?;
    if probe.is_some() {
        // the same profile entry as a plain launch: the reused buffer counts as read once
        let mut read: SmallVec<[&Buffer; 4]> = others.iter().map(|a| &**a).collect();
        read.extend(outs.get(b.out));
        crate::profile::kernel_done(probe, dev, kernel, &read, &args.shape, recomputes);
    }
    crate::stats::bump::buffers_reused(1);
    for (node, buf) in outputs.iter().zip(outs) {
        node.realize(Arc::new(buf));
    }
    drop(detached);
    Ok(true)
}

/// Binds the candidates whose consumed input is one of a traced function's per-call
/// inputs (`is_input` of its position) to one call's nodes. A call binds fresh nodes that
/// hold no inputs, so nothing in the call references such an input but the schedule: its
/// cone is empty, and it is consumed when the schedule's references are its only ones
/// (the caller handed over its last handle) and its buffer has no other holder.
pub(crate) fn bind_inputs(
    cands: &[Cand],
    nodes: &[Arc<Node>],
    is_input: impl Fn(usize) -> bool,
) -> SmallVec<[Bound; 1]> {
    cands
        .iter()
        .filter(|c| is_input(c.x))
        .map(|c| Bound {
            step: c.step,
            slot: c.slot,
            out: c.out,
            x: nodes[c.x].clone(),
            x_sched_refs: c.x_sched_refs,
            x_consumers: SmallVec::new(),
            nodes: SmallVec::new(),
            cone: Arc::from(Vec::new()),
        })
        .collect()
}
