//! Reductions of sharded arrays: over other axes a local reduction of every block; over
//! the split axis a local reduction, then an all-reduce of the partial results, which
//! leaves the result [`Placement::Replicated`].

use super::collective::ReduceOp;
use super::{axis_in, Placement, Sharded};
use crate::{Array, Error, Result};

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
        let partial = self.partials(op, &norm, keepdims, a);
        let mut parts = self
            .mesh
            .coll()
            .all_reduce(&partial, op, self.mesh.devices())?;
        if mean {
            let count: usize = norm.iter().map(|&k| self.shape[k]).product();
            // NumPy: an integer mean is a float64 division; a float mean keeps its dtype
            parts = parts.into_iter().map(|p| p / count as f64).collect();
        }
        self.reduced(parts, Placement::Replicated)
    }

    /// The local partial results of a reduction over `norm`, which holds the split axis
    /// `a`: `None` for a block that takes no part. Blocks with no elements along the split
    /// axis add nothing, and a max or min of one would have no identity, so only blocks
    /// holding elements take part (all of them when none does, so that the local
    /// reduction reports the empty case). A mean's partials are sums (`op` is `Sum`).
    fn partials(
        &self,
        op: ReduceOp,
        norm: &[usize],
        keepdims: bool,
        a: usize,
    ) -> Vec<Option<Array>> {
        let ax: Vec<isize> = norm.iter().map(|&k| k as isize).collect();
        let none_takes = self.parts.iter().all(|p| p.shape()[a] == 0);
        self.parts
            .iter()
            .map(|p| {
                (none_takes || p.shape()[a] > 0).then(|| match op {
                    ReduceOp::Sum => p.sum_axes(&ax, keepdims),
                    ReduceOp::Prod => p.prod_axes(&ax, keepdims),
                    ReduceOp::Max => p.max_axes(&ax, keepdims),
                    ReduceOp::Min => p.min_axes(&ax, keepdims),
                })
            })
            .collect()
    }

    /// [`Sharded::sum_axes`] over axes that include the split axis, with the result split
    /// along its axis `split` instead of replicated: a reduce-scatter, in which each device
    /// receives only its block of the sum (half the traffic of an all-reduce, and no
    /// replica). `split` counts the result's axes (`keepdims` decides which remain); an
    /// error when the result has no axis (a full reduction) or `axes` leaves the split axis
    /// out (then the sum is blockwise and stays split: use [`Sharded::sum_axes`]).
    pub fn sum_axes_split(&self, axes: &[isize], keepdims: bool, split: isize) -> Result<Sharded> {
        self.reduce_split("sum_axes_split", axes, keepdims, split, false)
    }

    /// [`Sharded::mean_axes`] with the result split along `split`, as
    /// [`Sharded::sum_axes_split`].
    pub fn mean_axes_split(&self, axes: &[isize], keepdims: bool, split: isize) -> Result<Sharded> {
        self.reduce_split("mean_axes_split", axes, keepdims, split, true)
    }

    fn reduce_split(
        &self,
        name: &'static str,
        axes: &[isize],
        keepdims: bool,
        split: isize,
        mean: bool,
    ) -> Result<Sharded> {
        let mut norm: Vec<usize> = axes
            .iter()
            .map(|&ax| axis_in(name, ax, &self.shape))
            .collect::<Result<_>>()?;
        norm.sort_unstable();
        norm.dedup();
        let a = match self.placement {
            Placement::Split(a) if norm.contains(&a) => a,
            _ => {
                return Err(Error::Shape {
                    op: name,
                    msg: format!(
                        "{:?} does not reduce over the split axis of a {:?} array; the sum \
                         is blockwise there (sum_axes/mean_axes)",
                        axes, self.placement
                    ),
                })
            }
        };
        let out_shape: Vec<usize> = (0..self.ndim())
            .filter_map(|k| match norm.contains(&k) {
                true if keepdims => Some(1),
                true => None,
                false => Some(self.shape[k]),
            })
            .collect();
        if out_shape.is_empty() {
            return Err(Error::Shape {
                op: name,
                msg: format!(
                    "reducing {axes:?} of shape {:?} leaves no axis to split",
                    self.shape
                ),
            });
        }
        let b = axis_in(name, split, &out_shape)?;
        let partial = self.partials(ReduceOp::Sum, &norm, keepdims, a);
        let mut parts =
            self.mesh
                .coll()
                .reduce_scatter(&partial, ReduceOp::Sum, b, self.mesh.devices())?;
        if mean {
            let count: usize = norm.iter().map(|&k| self.shape[k]).product();
            parts = parts.into_iter().map(|p| p / count as f64).collect();
        }
        self.reduced(parts, Placement::Split(b))
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
