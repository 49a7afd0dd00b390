//! Distributed FFTs of sharded arrays (numpy.fft semantics): transforms over axes that are
//! local run blockwise; the split axis is transformed after an all-to-all that makes it
//! local, and the result stays split along the axis the data was moved to (no transpose
//! back, as FFTW-MPI's transposed output).

use super::{axis_in, Placement, Sharded};
use crate::{Array, Error, Result};

/// `f(p)`, or zeros of its shape and dtype when it holds no elements (an empty block has
/// nothing to transform, and FFT libraries reject empty batches).
fn nonempty(p: &Array, f: impl Fn(&Array) -> Array) -> Array {
    let y = f(p);
    if y.size() == 0 {
        Array::zeros_on(y.shape(), y.dtype(), &y.device())
    } else {
        y
    }
}

impl Sharded {
    /// `numpy.fft.fft2` (the last two axes). For a split along one of them, the result is
    /// split along the other (see [`Sharded::fftn`]).
    pub fn fft2(&self) -> Result<Sharded> {
        self.fftn(&self.last_two("fft2")?)
    }

    /// `numpy.fft.ifft2` (the last two axes). For a split along one of them, the result
    /// is split along the other, so `ifft2(fft2(x))` is split as `x` was.
    pub fn ifft2(&self) -> Result<Sharded> {
        self.ifftn(&self.last_two("ifft2")?)
    }

    /// `numpy.fft.fftn` over `axes`. Axes other than the split one are transformed in
    /// every block; when the split axis is among `axes`, the array is then re-sharded
    /// onto the first other axis of `axes` (or, when `axes` names only the split axis, the
    /// first other axis of the array), and the split axis, now local, is transformed. The
    /// result is split along that new axis. A 1-D array is gathered on the first device,
    /// transformed there and split again.
    pub fn fftn(&self, axes: &[isize]) -> Result<Sharded> {
        self.transform("fftn", axes, false)
    }

    /// `numpy.fft.ifftn` over `axes` (1/n scaling); placement as [`Sharded::fftn`].
    pub fn ifftn(&self, axes: &[isize]) -> Result<Sharded> {
        self.transform("ifftn", axes, true)
    }

    fn last_two(&self, op: &'static str) -> Result<Vec<isize>> {
        if self.ndim() < 2 {
            return Err(Error::Shape {
                op,
                msg: format!("needs at least 2 axes, shape is {:?}", self.shape),
            });
        }
        Ok(vec![-2, -1])
    }

    fn transform(&self, op: &'static str, axes: &[isize], inverse: bool) -> Result<Sharded> {
        if axes.is_empty() {
            return Err(Error::Shape {
                op,
                msg: format!("no axes given for shape {:?}", self.shape),
            });
        }
        let norm: Vec<usize> = axes
            .iter()
            .map(|&ax| axis_in(op, ax, &self.shape))
            .collect::<Result<_>>()?;
        if let Some(&k) = norm.iter().find(|&&k| self.shape[k] == 0) {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "invalid number of FFT data points (0) along axis {k} of shape {:?}",
                    self.shape
                ),
            });
        }
        let many = |p: &Array, ax: &[isize]| {
            if inverse {
                crate::fft::ifftn(p, ax)
            } else {
                crate::fft::fftn(p, ax)
            }
        };
        let Placement::Split(a) = self.placement else {
            let ax: Vec<isize> = norm.iter().map(|&k| k as isize).collect();
            return self.map(|p| many(p, &ax));
        };
        let local: Vec<isize> = norm
            .iter()
            .filter(|&&k| k != a)
            .map(|&k| k as isize)
            .collect();
        let x = if local.is_empty() {
            self.clone()
        } else {
            self.map(|p| nonempty(p, |q| many(q, &local)))?
        };
        let mentions = norm.iter().filter(|&&k| k == a).count();
        if mentions == 0 {
            return Ok(x);
        }
        let target = norm
            .iter()
            .copied()
            .find(|&k| k != a)
            .or_else(|| (0..self.ndim()).find(|&k| k != a));
        let Some(b) = target else {
            // 1-D: the whole axis on one device
            let whole = x.gather()?;
            let ax = vec![a as isize; mentions];
            return many(&whole, &ax).shard(&self.mesh, a as isize);
        };
        let mut y = x.reshard(b as isize)?;
        for _ in 0..mentions {
            y = y.map(|p| nonempty(p, |q| many(q, &[a as isize])))?;
        }
        Ok(y)
    }
}
