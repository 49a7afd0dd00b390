//! In place by ownership: a kernel step writes an output into the buffer of an input whose
//! last handle the evaluation consumed, when no one can observe the difference.
//!
//! Structure (decided once per plan template, [`candidates`]): input `X` of kernel step `k`
//! may hold output `o` when `X` is a realized node read by no other step and by no root,
//! the kernel loads `X` only at the index it stores (`Inst::Index`, unguarded), and `o` has
//! `X`'s dtype. The *cone* of `X` is every node of the DAG that consumes `X` through nodes
//! computed inside step `k`; its tips are step `k`'s outputs.
//!
//! Ownership (checked at every execution, [`try_run`]): walking the cone from the tips
//! down, a node *dies* with this step when it is an output of the step (realizing it drops
//! its inputs) or when every strong reference to it is accounted for by the schedule and
//! by dying consumers. `X` is consumed when it dies and its buffer has no other handle:
//! then no `Array`, no lazy node outside this evaluation and no other step can read `X`
//! again, so overwriting its buffer is invisible. The check and the hand-over run under
//! the hash-consing lock (`graph::consume_buffer`), so no other thread can obtain `X`
//! meanwhile.

use super::TStep;
use crate::graph::{self, FxBuild, Node};
use crate::runtime::{self, Buffer};
use crate::{Error, Result};
use lazyfuse_codegen::{Inst, Kernel, LaunchArgs};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// One node of a candidate's cone, by DAG position.
#[derive(Clone, Debug)]
pub(crate) struct ConeNode {
    pos: usize,
    /// An output of the step: dies when the step realizes it.
    tip: bool,
    /// References the schedule's steps hold.
    sched_refs: usize,
    /// Consumers inside the cone: (index into the cone, number of edges).
    consumers: SmallVec<[(usize, usize); 2]>,
}

/// A structural in-place opportunity of a template.
#[derive(Clone, Debug)]
pub(crate) struct Cand {
    step: usize,
    slot: usize,
    out: usize,
    x: usize,
    x_sched_refs: usize,
    /// Consumers of `X` in the cone: (index into the cone, number of edges).
    x_consumers: SmallVec<[(usize, usize); 2]>,
    /// Users before their inputs.
    cone: Vec<ConeNode>,
}

/// A candidate bound to the nodes of one evaluation.
pub(crate) struct Bound {
    step: usize,
    slot: usize,
    out: usize,
    x: Arc<Node>,
    x_sched_refs: usize,
    x_consumers: SmallVec<[(usize, usize); 2]>,
    cone: Vec<(Arc<Node>, ConeNode)>,
}

/// Whether `kernel` reads input `slot` only at the index it writes.
fn reads_at_own_index(kernel: &Kernel, slot: usize) -> bool {
    let is_index = |v: u32| {
        kernel
            .values
            .get(v as usize)
            .is_some_and(|v| matches!(v.inst, Inst::Index))
    };
    let mut any = false;
    for v in &kernel.values {
        if let Inst::Load {
            input,
            index,
            guard,
        } = v.inst
        {
            if input as usize == slot {
                if guard.is_some() || !is_index(index) {
                    return false;
                }
                any = true;
            }
        }
    }
    any
}

/// The in-place candidates of a template's `steps` over the walked `nodes`.
pub(crate) fn candidates(
    steps: &[TStep],
    nodes: &[Arc<Node>],
    pos: &HashMap<u64, usize, FxBuild>,
    roots: &[Arc<Node>],
) -> Vec<Cand> {
    let mut sched_refs: HashMap<usize, usize> = HashMap::new();
    let mut readers: HashMap<usize, usize> = HashMap::new();
    let mut produced_by: HashMap<usize, usize> = HashMap::new();
    for (si, s) in steps.iter().enumerate() {
        for p in s.reads() {
            *sched_refs.entry(p).or_default() += 1;
            *readers.entry(p).or_default() += 1;
        }
        for p in s.writes() {
            *sched_refs.entry(p).or_default() += 1;
            produced_by.insert(p, si);
        }
    }
    let root_pos: Vec<usize> = roots
        .iter()
        .filter_map(|r| pos.get(&r.id))
        .copied()
        .collect();
    // consumers of every node, with edge multiplicity; positions are visited in order, so
    // an earlier edge from the same consumer is the last entry (a node read by many, such
    // as a shared constant, costs no scan per consumer)
    let mut consumers: Vec<SmallVec<[(usize, usize); 2]>> = vec![SmallVec::new(); nodes.len()];
    for (p, n) in nodes.iter().enumerate() {
        for i in n.inputs() {
            let Some(&ip) = pos.get(&i.id) else { continue };
            match consumers[ip].last_mut() {
                Some(e) if e.0 == p => e.1 += 1,
                _ => consumers[ip].push((p, 1)),
            }
        }
    }
    let mut out = Vec::new();
    for (si, s) in steps.iter().enumerate() {
        let TStep::Kernel {
            kernel,
            inputs,
            outputs,
            ..
        } = s
        else {
            continue;
        };
        if kernel.reduce.is_some() {
            continue; // a reduction writes fewer elements than it reads
        }
        for (slot, &x) in inputs.iter().enumerate() {
            let xn = &nodes[x];
            if readers.get(&x) != Some(&1)
                || root_pos.contains(&x)
                || xn.buffer().is_none()
                || !reads_at_own_index(kernel, slot)
            {
                continue;
            }
            let Some(o) = outputs
                .iter()
                .position(|&op| nodes[op].dtype == xn.dtype && nodes[op].size() == xn.size())
            else {
                continue;
            };
            if let Some(c) = cone_of(x, si, &consumers, &produced_by, &sched_refs) {
                out.push(Cand {
                    step: si,
                    slot,
                    out: o,
                    x,
                    x_sched_refs: sched_refs.get(&x).copied().unwrap_or(0),
                    x_consumers: c.0,
                    cone: c.1,
                });
                break; // one reuse per step
            }
        }
    }
    out
}

/// The cone of `x` for step `si` (consumers of `x`, then the cone users-first), or `None`
/// when a consumer is computed by another step.
#[allow(clippy::type_complexity)]
fn cone_of(
    x: usize,
    si: usize,
    consumers: &[SmallVec<[(usize, usize); 2]>],
    produced_by: &HashMap<usize, usize>,
    sched_refs: &HashMap<usize, usize>,
) -> Option<(SmallVec<[(usize, usize); 2]>, Vec<ConeNode>)> {
    let mut members: Vec<usize> = Vec::new();
    let mut stack: Vec<usize> = consumers[x].iter().map(|&(c, _)| c).collect();
    while let Some(p) = stack.pop() {
        if members.contains(&p) {
            continue;
        }
        members.push(p);
        match produced_by.get(&p) {
            Some(&s) if s == si => {} // a tip
            Some(_) => return None,
            None => stack.extend(consumers[p].iter().map(|&(c, _)| c)),
        }
        if members.len() > 4096 {
            return None; // not worth the per-eval check
        }
    }
    members.sort_unstable_by(|a, b| b.cmp(a)); // users (later positions) first
    let index_of = |p: usize| members.iter().position(|&m| m == p);
    let cone = members
        .iter()
        .map(|&p| {
            let tip = produced_by.contains_key(&p);
            Some(ConeNode {
                pos: p,
                tip,
                sched_refs: sched_refs.get(&p).copied().unwrap_or(0),
                consumers: if tip {
                    SmallVec::new()
                } else {
                    consumers[p]
                        .iter()
                        .map(|&(c, m)| Some((index_of(c)?, m)))
                        .collect::<Option<_>>()?
                },
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let xc = consumers[x]
        .iter()
        .map(|&(c, m)| Some((index_of(c)?, m)))
        .collect::<Option<_>>()?;
    Some((xc, cone))
}

/// Binds the candidates to one evaluation's nodes.
pub(crate) fn bind(cands: &[Cand], nodes: &[Arc<Node>]) -> Vec<Bound> {
    cands
        .iter()
        .map(|c| Bound {
            step: c.step,
            slot: c.slot,
            out: c.out,
            x: nodes[c.x].clone(),
            x_sched_refs: c.x_sched_refs,
            x_consumers: c.x_consumers.clone(),
            cone: c
                .cone
                .iter()
                .map(|m| (nodes[m.pos].clone(), m.clone()))
                .collect(),
        })
        .collect()
}

impl Bound {
    /// Whether nothing outside this evaluation can read `x` after the step (see the module
    /// docs). Every count includes the one reference this `Bound` holds.
    fn unobserved(&self) -> bool {
        let mut dying: SmallVec<[bool; 32]> = SmallVec::from_elem(false, self.cone.len());
        for (i, (n, m)) in self.cone.iter().enumerate() {
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
        crate::profile::kernel_done(probe, dev, kernel, &read, &args.shape);
    }
    crate::stats::bump::buffers_reused(1);
    for (node, buf) in outputs.iter().zip(outs) {
        node.realize(Arc::new(buf));
    }
    drop(detached);
    Ok(true)
}
