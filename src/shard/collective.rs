//! The collective layer under sharded arrays: point-to-point sends, gather, all-reduce and
//! all-to-all between the devices of a [`Mesh`](super::Mesh), behind one small trait.
//!
//! [`Collectives`] is what the sharding planner calls; it never moves data itself. The one
//! backend today, [`Transfer`], builds every collective from the library's own lazy
//! operations: [`Array::to_device`] (a device copy staged through host memory; nothing at
//! all between two shards on the same device), slices, [`concatenate`](crate::concatenate)
//! and elementwise combines. Its results are lazy arrays like any other, so a collective
//! fuses with the work around it and runs when the arrays are evaluated. The same code
//! serves a mesh of CPU devices (the stand-in that tests the planner and every collective
//! without GPUs), a mesh listing one GPU several times, and a mesh of several GPUs.
//!
//! A backend with its own transport (NCCL's `ncclAllReduce` / `ncclSend`/`ncclRecv` on the
//! devices' streams, cufftXt for distributed transforms) implements the same trait and is
//! picked when a [`Mesh`](super::Mesh) is made; the planner above does not change.

use crate::{Array, Device};
use std::fmt;

/// The combine of a reduction's partial results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    /// `a + b`.
    Sum,
    /// `a * b`.
    Prod,
    /// NumPy's `maximum` (NaN-propagating).
    Max,
    /// NumPy's `minimum` (NaN-propagating).
    Min,
}

impl ReduceOp {
    /// `a` combined with `b` (both on one device).
    pub(crate) fn combine(self, a: &Array, b: &Array) -> Array {
        match self {
            ReduceOp::Sum => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Max => a.maximum(b),
            ReduceOp::Min => a.minimum(b),
        }
    }
}

/// Data movement between the devices of a mesh. Every method is lazy: it returns arrays
/// whose evaluation moves the data.
pub(crate) trait Collectives: Send + Sync {
    /// A short name for messages and `Debug` output.
    fn name(&self) -> &'static str;

    /// `a` delivered to `dst` (point-to-point).
    fn send(&self, a: &Array, dst: &Device) -> Array;

    /// The parts joined along `axis` on `dst`, in order.
    fn gather(&self, parts: &[Array], axis: usize, dst: &Device) -> Array;

    /// `a` on each of `devices`.
    fn broadcast(&self, a: &Array, devices: &[Device]) -> Vec<Array>;

    /// The combine of all `parts` (equal shapes, any devices), on each of `devices`. Every
    /// copy holds the same values bit for bit (one fixed combine order).
    fn all_reduce(&self, parts: &[Array], op: ReduceOp, devices: &[Device]) -> Vec<Array>;

    /// `pieces[src][dst]` sent from `src` to `dst`; entry `dst` of the result joins what
    /// `dst` received along `axis`, in `src` order.
    fn all_to_all(&self, pieces: &[Vec<Array>], axis: usize, devices: &[Device]) -> Vec<Array>;
}

/// Collectives built from lazy device copies, slices and concatenations: works on every
/// device kind; on CUDA a copy between two GPUs goes through host memory.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Transfer;

impl Collectives for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }

    fn send(&self, a: &Array, dst: &Device) -> Array {
        a.to_device(dst)
    }

    fn gather(&self, parts: &[Array], axis: usize, dst: &Device) -> Array {
        let moved: Vec<Array> = parts.iter().map(|p| self.send(p, dst)).collect();
        let refs: Vec<&Array> = moved.iter().collect();
        crate::concatenate(&refs, axis as isize)
    }

    fn broadcast(&self, a: &Array, devices: &[Device]) -> Vec<Array> {
        devices.iter().map(|d| self.send(a, d)).collect()
    }

    fn all_reduce(&self, parts: &[Array], op: ReduceOp, devices: &[Device]) -> Vec<Array> {
        // reduce on the first device in part order, then broadcast: 2 (k - 1) transfers,
        // and one combine order, so every copy is the same
        let root = &devices[0];
        let mut acc = self.send(&parts[0], root);
        for p in &parts[1..] {
            acc = op.combine(&acc, &self.send(p, root));
        }
        self.broadcast(&acc, devices)
    }

    fn all_to_all(&self, pieces: &[Vec<Array>], axis: usize, devices: &[Device]) -> Vec<Array> {
        devices
            .iter()
            .enumerate()
            .map(|(dst, dev)| {
                let recv: Vec<Array> = pieces.iter().map(|row| self.send(&row[dst], dev)).collect();
                let refs: Vec<&Array> = recv.iter().collect();
                crate::concatenate(&refs, axis as isize)
            })
            .collect()
    }
}

impl fmt::Debug for dyn Collectives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
