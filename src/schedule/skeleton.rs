//! The cache-hit path of planning: a plan remembers the structure of the DAG it was made
//! for (its skeleton), an eval finds a candidate plan by the roots' incremental structural
//! keys (`Node::use_key`, O(1)), and binding verifies the DAG against the skeleton in one
//! walk that follows the skeleton's edges (no hashing, no map). A DAG that passes has the
//! plan key of the skeleton's DAG, so the plan is the one a full walk would find.

use super::{Dag, NodeOrder, Template};
use crate::graph::{mix, IdHasher, Node};
use crate::thread_field::Field;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// The structure of the DAG a plan was made for, by walk position (inputs before users).
pub(crate) struct Skeleton {
    /// Per position: the node's structure hash.
    shash: Box<[u64]>,
    /// Per position: whether the node held a buffer.
    realized: Box<[bool]>,
    /// `edges[start[p]..start[p + 1]]`: the positions of the inputs of the node at `p`.
    start: Box<[u32]>,
    edges: Box<[u32]>,
    /// The roots' positions, in the order they were asked for.
    roots: Box<[u32]>,
}

impl Skeleton {
    /// The skeleton of a walked DAG (`nodes` in walk order, `dag` as the walk read it).
    pub(super) fn new(nodes: &[Arc<Node>], dag: &Dag, root_pos: &[usize]) -> Skeleton {
        Skeleton {
            shash: nodes.iter().map(|n| n.shash).collect(),
            realized: dag.realized.clone().into_boxed_slice(),
            start: dag.start.clone().into_boxed_slice(),
            edges: dag.edges.clone().into_boxed_slice(),
            roots: root_pos.iter().map(|&p| p as u32).collect(),
        }
    }

    /// The nodes of `roots`' DAG by this skeleton's positions, when the DAG has exactly
    /// this structure: at every position the same structure hash and realized-ness, the
    /// same number of inputs at the same positions, and every distinct node at one
    /// position. `None` otherwise (the caller walks the DAG in full).
    ///
    /// Every non-root position has a user at a higher position (the walk places inputs
    /// first), so visiting positions downwards finds each node placed by a user before it
    /// is checked.
    pub(super) fn bind(&self, roots: &[Arc<Node>]) -> Option<NodeOrder> {
        if roots.len() != self.roots.len() {
            return None;
        }
        let n = self.shash.len();
        let mut slots: SmallVec<[Option<Arc<Node>>; 16]> = SmallVec::from_elem(None, n);
        for (r, &p) in roots.iter().zip(self.roots.iter()) {
            match &slots[p as usize] {
                Some(x) if !Arc::ptr_eq(x, r) => return None,
                Some(_) => {}
                None => slots[p as usize] = Some(r.clone()),
            }
        }
        for p in (0..n).rev() {
            // inputs lie below `p`: the node and the slots it fills are disjoint
            let (below, here) = slots.split_at_mut(p);
            let node = here[0].as_ref()?;
            if node.shash != self.shash[p] {
                return None;
            }
            let st = node.settled_state();
            let realized = st.buffer.is_some();
            if realized != self.realized[p] {
                return None;
            }
            if realized {
                continue;
            }
            let ins = &self.edges[self.start[p] as usize..self.start[p + 1] as usize];
            if ins.len() != st.inputs.len() {
                return None;
            }
            for (i, &q) in st.inputs.iter().zip(ins) {
                let q = q as usize;
                if q >= p {
                    return None;
                }
                match &below[q] {
                    Some(x) if !Arc::ptr_eq(x, i) => return None,
                    Some(_) => {}
                    None => below[q] = Some(i.clone()),
                }
            }
        }
        let order: NodeOrder = slots.into_iter().collect::<Option<_>>()?;
        // one position per distinct node (the walk gives a node reached twice one position)
        let mut ids: SmallVec<[u64; 16]> = order.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        Some(order)
    }
}

/// The key under which this thread remembers the plan of `roots`: the planning settings
/// (`plan_mode`) and the roots' structural keys.
fn hint(roots: &[Arc<Node>], mode: u64) -> u64 {
    roots
        .iter()
        .fold(mix(mode, roots.len() as u64), |h, r| mix(h, r.use_key()))
}

/// Plans this thread found lately, by [`hint`]. Per thread, so a hit takes no lock.
pub(super) type Recent = HashMap<u64, Arc<Template>, std::hash::BuildHasherDefault<IdHasher>>;
const RECENT_MAX: usize = 1024;

/// This thread's recent plans (at most [`RECENT_MAX`]).
const RECENT: Field<super::ThreadPlanning, RefCell<Recent>> =
    Field::new(&super::PLANNING, |t| &t.recent);

/// The plan this thread last used for a DAG with `roots`' structural keys, with the DAG's
/// nodes by the plan's positions, when the DAG passes the plan's skeleton.
pub(super) fn lookup(roots: &[Arc<Node>], mode: u64) -> Option<(Arc<Template>, NodeOrder)> {
    let h = hint(roots, mode);
    let t = RECENT
        .try_with(|r| r.try_borrow().ok()?.get(&h).cloned())
        .ok()
        .flatten()?;
    let nodes = t.skeleton.bind(roots)?;
    Some((t, nodes))
}

/// Remembers `t` as the plan of DAGs with `roots`' structural keys on this thread.
pub(super) fn remember(roots: &[Arc<Node>], mode: u64, t: &Arc<Template>) {
    let h = hint(roots, mode);
    let _ = RECENT.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if r.len() >= RECENT_MAX {
                r.clear();
            }
            r.insert(h, t.clone());
        }
    });
}
