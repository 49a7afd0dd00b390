//! The collective layer under sharded arrays: point-to-point moves, gather, broadcast,
//! all-reduce, all-gather, reduce-scatter and all-to-all between the blocks of a
//! [`Mesh`](super::Mesh), behind one small trait.
//!
//! [`Collectives`] is what the sharding planner calls; it never moves data itself. Two
//! backends implement it:
//! - [`Transfer`] builds every collective from the library's own lazy operations:
//!   [`Array::to_device`] (one peer copy between two GPUs, a copy through host memory
//!   between the host and a GPU, nothing at all between two shards on one device), slices,
//!   [`concatenate`](crate::concatenate) and elementwise combines. Its results are lazy
//!   arrays like any other, so a collective fuses with the work around it and runs when the
//!   arrays are evaluated. It serves a mesh of CPU devices (the stand-in that tests the
//!   planner and every collective without GPUs), a mesh listing one GPU several times, and
//!   mixed meshes, all within one process.
//! - `Nccl` (`shard/nccl.rs`, with the `cuda` feature) runs all-reduce, all-gather,
//!   reduce-scatter, broadcast and all-to-all as NCCL calls on the devices' streams: for a
//!   mesh of distinct GPUs of one process, one communicator per device, and for a mesh
//!   spanning processes ([`Mesh::global`](super::Mesh::global)), this process's rank of
//!   the job's communicator, where point-to-point moves become NCCL sends and receives too.
//!   A collective evaluates its inputs when it is built and queues the NCCL calls then
//!   (asynchronously: nothing waits on the host); its results are evaluated arrays.
//!
//! The planner above does not know which backend runs.

use super::{offsets, split_sizes};
use crate::{Array, Device, Result};
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

/// One point-to-point move of a batch ([`Collectives::exchange`]): `array`, data of block
/// `src` on that block's device, delivered to block `dst`.
#[derive(Clone, Debug)]
pub(crate) struct Move {
    /// Read by the NCCL backend (the sender's rank).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) array: Array,
}

/// Data movement between the blocks of a mesh (`devices[i]` holds block `i`). Results are
/// arrays on the receiving blocks' devices; on a mesh spanning processes, entries of blocks
/// of other processes are stand-ins of the right shape and dtype that are never evaluated.
pub(crate) trait Collectives: Send + Sync {
    /// A short name for messages and `Debug` output.
    fn name(&self) -> &'static str;

    /// On a mesh spanning processes, the block of this process; `None` when every block is
    /// in this process.
    fn local_block(&self) -> Option<usize> {
        None
    }

    /// `a`, an array of this process, on `dst`, a device of this process (lazy).
    fn send(&self, a: &Array, dst: &Device) -> Array {
        a.to_device(dst)
    }

    /// The blocks joined along `axis` on `dst`, a device of this process.
    fn gather(&self, parts: &[Array], axis: usize, dst: &Device) -> Result<Array> {
        Ok(lazy_gather(parts, axis, dst))
    }

    /// Block 0's `a` on every block's device (for a mesh spanning processes, rank 0's).
    fn broadcast(&self, a: &Array, devices: &[Device]) -> Result<Vec<Array>> {
        Ok(devices.iter().map(|d| a.to_device(d)).collect())
    }

    /// The combine of the parts (equal shapes; `None` for a block that takes no part) on
    /// every block's device. Every copy holds the same values bit for bit.
    fn all_reduce(
        &self,
        parts: &[Option<Array>],
        op: ReduceOp,
        devices: &[Device],
    ) -> Result<Vec<Array>>;

    /// Every block's device gets the blocks `parts` (a split along `axis`) joined.
    fn all_gather(&self, parts: &[Array], axis: usize, devices: &[Device]) -> Result<Vec<Array>> {
        devices
            .iter()
            .map(|d| self.gather(parts, axis, d))
            .collect()
    }

    /// The combine of the parts (as [`Collectives::all_reduce`]) split along `axis` into
    /// `array_split` blocks, block `i` on `devices[i]`.
    fn reduce_scatter(
        &self,
        parts: &[Option<Array>],
        op: ReduceOp,
        axis: usize,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        let full = self.all_reduce(parts, op, devices)?;
        Ok(scatter_blocks(&full, axis))
    }

    /// `pieces[src][dst]` sent from block `src` to block `dst`; entry `dst` of the result
    /// joins what `dst` received along `axis`, in `src` order.
    fn all_to_all(
        &self,
        pieces: &[Vec<Array>],
        axis: usize,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        Ok(lazy_all_to_all(pieces, axis, devices))
    }

    /// The moves of one batch, each delivered to its block's device; entry `t` of the
    /// result is what `moves[t]` delivered.
    fn exchange(&self, moves: &[Move], devices: &[Device]) -> Result<Vec<Array>> {
        Ok(moves
            .iter()
            .map(|m| m.array.to_device(&devices[m.dst]))
            .collect())
    }
}

/// The parts joined along `axis` on `dst`, from lazy device copies.
pub(crate) fn lazy_gather(parts: &[Array], axis: usize, dst: &Device) -> Array {
    let moved: Vec<Array> = parts.iter().map(|p| p.to_device(dst)).collect();
    let refs: Vec<&Array> = moved.iter().collect();
    crate::concatenate(&refs, axis as isize)
}

/// The all-to-all of `pieces` from lazy device copies and concatenations.
pub(crate) fn lazy_all_to_all(
    pieces: &[Vec<Array>],
    axis: usize,
    devices: &[Device],
) -> Vec<Array> {
    devices
        .iter()
        .enumerate()
        .map(|(dst, dev)| {
            let recv: Vec<Array> = pieces.iter().map(|row| row[dst].to_device(dev)).collect();
            let refs: Vec<&Array> = recv.iter().collect();
            crate::concatenate(&refs, axis as isize)
        })
        .collect()
}

/// Block `i` (NumPy's `array_split` along `axis`) of `full[i]`, for every `i`.
pub(crate) fn scatter_blocks(full: &[Array], axis: usize) -> Vec<Array> {
    let n = full[0].shape()[axis];
    let sizes = split_sizes(n, full.len());
    offsets(&sizes)
        .iter()
        .zip(&sizes)
        .zip(full)
        .map(|((&o, &s), a)| a.slice_axis(axis, o, o + s))
        .collect()
}

/// Collectives built from lazy device copies, slices and concatenations: works on every
/// device kind, within one process.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Transfer;

impl Collectives for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }

    fn all_reduce(
        &self,
        parts: &[Option<Array>],
        op: ReduceOp,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        // reduce on the first device in block order, then broadcast: 2 (k - 1) transfers,
        // and one combine order, so every copy is the same
        let root = &devices[0];
        let mut taking = parts.iter().flatten();
        let Some(first) = taking.next() else {
            return Err(crate::Error::internal("all_reduce", "no block takes part"));
        };
        let mut acc = first.to_device(root);
        for p in taking {
            acc = op.combine(&acc, &p.to_device(root));
        }
        self.broadcast(&acc, devices)
    }
}

impl fmt::Debug for dyn Collectives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
