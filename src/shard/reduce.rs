//! Reductions of sharded arrays: over other axes a local reduction of every block; over
//! the split axis a local reduction, then an all-reduce of the partial results, which
//! leaves the result [`Placement::Replicated`].

use super::collective::ReduceOp;
use super::{axis_in, Placement, Sharded};
use crate::{Array, Result};

impl Sharded {
    /// The sum over all elements (replicated 0-d result).
    pub fn sum(&self) -> Result<Sharded> {
        self.sum_axes(&self.all_axes(), false)
    }
    /// The mean over all elements (replicated 0-d result).
    pub fn mean(&self) -> Result<Sharded> {
        self.mean_axes(&self.all_axes(), false)
    }
    /// The maximum over all elements (replicated 0-d result).
    pub fn max(&self) -> Result<Sharded> {
        self.max_axes(&self.all_axes(), false)
    }
    /// The minimum over all elements (replicated 0-d result).
    pub fn min(&self) -> Result<Sharded> {
        self.min_axes(&self.all_axes(), false)
    }

    /// [`Array::sum_axes`] of the logical array. Over the split axis the result is
    /// replicated (local sums, then an all-reduce); otherwise it stays split (along the
    /// same axis, renumbered when `keepdims` is false and reduced axes precede it).
    pub fn sum_axes(&self, axes: &[isize], keepdims: bool) -> Result<Sharded> {
        self.reduce("sum_axes", ReduceOp::Sum, axes, keepdims, false)
    }
    /// [`Array::prod_axes`] of the logical array (placement as [`Sharded::sum_axes`]).
    pub fn prod_axes(&self, axes: &[isize], keepdims: bool) -> Result<Sharded> {
        self.reduce("prod_axes", ReduceOp::Prod, axes, keepdims, false)
    }
    /// [`Array::max_axes`] of the logical array (placement as [`Sharded::sum_axes`]; empty
    /// blocks take no part).
    pub fn max_axes(&self, axes: &[isize], keepdims: bool) -> Result<Sharded> {
        self.reduce("max_axes", ReduceOp::Max, axes, keepdims, false)
    }
    /// [`Array::min_axes`] of the logical array (placement as [`Sharded::max_axes`]).
    pub fn min_axes(&self, axes: &[isize], keepdims: bool) -> Result<Sharded> {
        self.reduce("min_axes", ReduceOp::Min, axes, keepdims, false)
    }
    /// [`Array::mean_axes`] of the logical array (placement as [`Sharded::sum_axes`]): over
    /// the split axis, the all-reduced sum divided by the number of reduced elements.
    pub fn mean_axes(&self, axes: &[isize], keepdims: bool) -> Result<Sharded> {
        self.reduce("mean_axes", ReduceOp::Sum, axes, keepdims, true)
    }

    fn all_axes(&self) -> Vec<isize> {
        (0..self.ndim() as isize).collect()
    }

    fn reduce(
        &self,
        name: &'static str,
        op: ReduceOp,
        axes: &[isize],
        keepdims: bool,
        mean: bool,
    ) -> Result<Sharded> {
        let mut norm: Vec<usize> = axes
            .iter()
            .map(|&ax| axis_in(name, ax, &self.shape))
            .collect::<Result<_>>()?;
        norm.sort_unstable();
        norm.dedup();
        let local = |p: &Array| -> Array {
            let ax: Vec<isize> = norm.iter().map(|&k| k as isize).collect();
            match (op, mean) {
                (ReduceOp::Sum, true) => p.mean_axes(&ax, keepdims),
                (ReduceOp::Sum, false) => p.sum_axes(&ax, keepdims),
                (ReduceOp::Prod, _) => p.prod_axes(&ax, keepdims),
                (ReduceOp::Max, _) => p.max_axes(&ax, keepdims),
                (ReduceOp::Min, _) => p.min_axes(&ax, keepdims),
            }
        };
        let a = match self.placement {
            Placement::Split(a) if norm.contains(&a) => a,
            Placement::Split(a) => {
                let parts: Vec<Array> = self.parts.iter().map(local).collect();
                let new_a = if keepdims {
                    a
                } else {
                    a - norm.iter().filter(|&&k| k < a).count()
                };
                return self.reduced(parts, Placement::Split(new_a));
            }
            Placement::Replicated => {
                let parts: Vec<Array> = self.parts.iter().map(local).collect();
                return self.reduced(parts, Placement::Replicated);
            }
        };
        // blocks with no elements along the split axis add nothing; a max or min of one
        // would have no identity, so only blocks holding elements take part (all of them
        // when none does, so that the local reduction reports the empty case)
        let mut takers: Vec<&Array> = self.parts.iter().filter(|p| p.shape()[a] > 0).collect();
        if takers.is_empty() {
            takers = self.parts.iter().collect();
        }
        let partial: Vec<Array> = takers
            .iter()
            .map(|p| match (op, mean) {
                // a mean is the all-reduced sum over the count of the logical array
                (ReduceOp::Sum, true) => {
                    let ax: Vec<isize> = norm.iter().map(|&k| k as isize).collect();
                    p.sum_axes(&ax, keepdims)
                }
                _ => local(p),
            })
            .collect();
        let mut parts = self
            .mesh
            .coll()
            .all_reduce(&partial, op, self.mesh.devices());
        if mean {
            let count: usize = norm.iter().map(|&k| self.shape[k]).product();
            // NumPy: an integer mean is a float64 division; a float mean keeps its dtype
            parts = parts.into_iter().map(|p| p / count as f64).collect();
        }
        self.reduced(parts, Placement::Replicated)
    }

    fn reduced(&self, parts: Vec<Array>, placement: Placement) -> Result<Sharded> {
        let mut shape = parts[0].shape().to_vec();
        if let Placement::Split(a) = placement {
            shape[a] = parts.iter().map(|p| p.shape()[a]).sum();
        }
        Ok(Sharded {
            parts,
            placement,
            shape,
            mesh: self.mesh.clone(),
        })
    }
}
