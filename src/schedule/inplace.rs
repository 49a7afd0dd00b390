//! In place by ownership: a kernel step writes an output into the buffer of an input whose
//! last handle the evaluation consumed, when no one can observe the difference.
//!
//! Structure (decided once per plan template, [`candidates`]): input `X` of kernel step `k`
//! may hold output `o` when `X` is a realized node read by no other step and by no root,
//! the kernel loads `X` only at the index it stores (`Inst::Index`, unguarded), and `o` has
//! `X`'s dtype. The *cone* of `X` is every node of the DAG that consumes `X` through nodes
//! computed inside step `k`; its tips are step `k`'s outputs.
//!
//! Ownership (checked at every execution, `exec::inplace::try_run`): walking the cone from the tips
//! down, a node *dies* with this step when it is an output of the step (realizing it drops
//! its inputs) or when every strong reference to it is accounted for by the schedule and
//! by dying consumers. `X` is consumed when it dies and its buffer has no other handle:
//! then no `Array`, no lazy node outside this evaluation and no other step can read `X`
//! again, so overwriting its buffer is invisible. The check and the hand-over run under
//! the hash-consing lock (`graph::consume_buffer`), so no other thread can obtain `X`
//! meanwhile.

use super::{Dag, TStep};
use crate::graph::{FxBuild, Node};
use lazyfuse_codegen::{Inst, Kernel};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// One node of a candidate's cone, by DAG position.
#[derive(Clone, Debug)]
pub(crate) struct ConeNode {
    pub(crate) pos: usize,
    /// An output of the step: dies when the step realizes it.
    pub(crate) tip: bool,
    /// References the schedule's steps hold.
    pub(crate) sched_refs: usize,
    /// Consumers inside the cone: (index into the cone, number of edges).
    pub(crate) consumers: SmallVec<[(usize, usize); 2]>,
}

/// A structural in-place opportunity of a template.
#[derive(Clone, Debug)]
pub(crate) struct Cand {
    pub(crate) step: usize,
    pub(crate) slot: usize,
    pub(crate) out: usize,
    pub(crate) x: usize,
    pub(crate) x_sched_refs: usize,
    /// Consumers of `X` in the cone: (index into the cone, number of edges).
    pub(crate) x_consumers: SmallVec<[(usize, usize); 2]>,
    /// Users before their inputs.
    pub(crate) cone: std::sync::Arc<[ConeNode]>,
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

/// The in-place candidates of a template's `steps` over the walked `nodes` (`dag`: what
/// the walk read of their state).
pub(crate) fn candidates(
    steps: &[TStep],
    nodes: &[Arc<Node>],
    dag: &Dag,
    root_pos: &[usize],
) -> Vec<Cand> {
    let mut sched_refs: HashMap<usize, usize, FxBuild> = HashMap::default();
    let mut readers: HashMap<usize, usize, FxBuild> = HashMap::default();
    let mut produced_by: HashMap<usize, usize, FxBuild> = HashMap::default();
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
    let mut is_root = vec![false; nodes.len()];
    for &r in root_pos {
        is_root[r] = true;
    }
    // consumers of every node, with edge multiplicity; positions are visited in order, so
    // an earlier edge from the same consumer is the last entry (a node read by many, such
    // as a shared constant, costs no scan per consumer)
    let mut consumers: Vec<SmallVec<[(usize, usize); 2]>> = vec![SmallVec::new(); nodes.len()];
    for p in 0..nodes.len() {
        for &ip in dag.inputs(p) {
            let ip = ip as usize;
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
                || is_root[x]
                || !dag.realized(x)
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
                    cone: c.1.into(),
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
    produced_by: &HashMap<usize, usize, FxBuild>,
    sched_refs: &HashMap<usize, usize, FxBuild>,
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
