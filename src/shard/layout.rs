//! Moving blocks between shards: re-sharding onto another axis (all-to-all), replication
//! (all-gather), and the rolls, pads and ranges along the split axis whose output blocks
//! are assembled from the input blocks they overlap (halo exchange).

use super::{axis_in, offsets, slice_axis, split_sizes, Placement, Sharded};
use crate::{Array, Error, Result};

/// Where a run of the output's split axis comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Input positions from this one on, consecutively.
    Input(usize),
    /// The constant fill of a pad.
    Fill,
}

/// One run of output positions `[start, start + len)` and its source.
#[derive(Clone, Copy, Debug)]
struct Run {
    start: usize,
    len: usize,
    src: Source,
}

impl Sharded {
    /// The same array split along `axis` instead (lazy). From a split along another axis
    /// this is an all-to-all: every block is sliced into the pieces each device's new block
    /// needs, and each device joins what it receives. From a replicated array every device
    /// slices its own copy. The same placement returns a clone.
    pub fn reshard(&self, axis: isize) -> Result<Sharded> {
        if self.ndim() == 0 {
            return Err(Error::Shape {
                op: "reshard",
                msg: "a 0-d sharded array has no axis to split".into(),
            });
        }
        let b = axis_in("reshard", axis, &self.shape)?;
        let k = self.mesh.len();
        let sizes = split_sizes(self.shape[b], k);
        let offs = offsets(&sizes);
        let range = |i: usize| (offs[i], offs[i] + sizes[i]);
        let parts = match self.placement {
            Placement::Split(a) if a == b => return Ok(self.clone()),
            Placement::Split(a) => {
                let pieces: Vec<Vec<Array>> = self
                    .parts
                    .iter()
                    .map(|p| {
                        (0..k)
                            .map(|i| {
                                let (s, e) = range(i);
                                slice_axis(p, b, s, e)
                            })
                            .collect()
                    })
                    .collect();
                self.mesh.coll().all_to_all(&pieces, a, self.mesh.devices())
            }
            Placement::Replicated => self
                .parts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (s, e) = range(i);
                    slice_axis(p, b, s, e)
                })
                .collect(),
        };
        Ok(Sharded {
            parts,
            placement: Placement::Split(b),
            shape: self.shape.clone(),
            mesh: self.mesh.clone(),
        })
    }

    /// The whole array on every device ([`Placement::Replicated`]; an all-gather). Lazy.
    pub fn replicated(&self) -> Sharded {
        let parts = match self.placement {
            Placement::Replicated => return self.clone(),
            Placement::Split(a) => self
                .mesh
                .devices()
                .iter()
                .map(|d| self.mesh.coll().gather(&self.parts, a, d))
                .collect(),
        };
        Sharded {
            parts,
            placement: Placement::Replicated,
            shape: self.shape.clone(),
            mesh: self.mesh.clone(),
        }
    }

    /// `numpy.roll(a, shift, axis)`, lazily. Along the split axis each output block is
    /// the input positions it rotates in: slices of the one or two input blocks they lie
    /// in (more only when a block is shorter than the shift's remainder at its edge),
    /// sent to the block's device and joined. Along another axis a local roll of each
    /// block.
    pub fn roll(&self, shift: isize, axis: isize) -> Result<Sharded> {
        let a = axis_in("roll", axis, &self.shape)?;
        if self.placement != Placement::Split(a) {
            return self.map(|p| p.roll(shift, a as isize));
        }
        let n = self.shape[a];
        if n == 0 {
            return Ok(self.clone());
        }
        let s = shift.rem_euclid(n as isize) as usize;
        // out[g] = in[(g - s) mod n]
        let runs = [
            Run {
                start: 0,
                len: s,
                src: Source::Input(n - s),
            },
            Run {
                start: s,
                len: n - s,
                src: Source::Input(0),
            },
        ];
        Ok(self.exchange(a, n, &runs, 0.0))
    }

    /// Positions `start..stop` along `axis` (clipped to the axis, as NumPy's slicing;
    /// `stop <= start` gives an empty axis), lazily. Along the split axis the result is
    /// split again into `array_split` blocks, each assembled from the input blocks it
    /// overlaps; along another axis a local slice of each block. General slicing (steps,
    /// indices, several axes) is [`Sharded::map`] with [`Array::slice`] along local axes,
    /// or a [`gather`](Sharded::gather) first.
    pub fn slice_axis(&self, axis: isize, start: usize, stop: usize) -> Result<Sharded> {
        let a = axis_in("slice_axis", axis, &self.shape)?;
        let n = self.shape[a];
        let (start, stop) = (start.min(n), stop.min(n));
        let len = stop.saturating_sub(start);
        if self.placement != Placement::Split(a) {
            return self.map(|p| slice_axis(p, a, start, start + len));
        }
        let runs = [Run {
            start: 0,
            len,
            src: Source::Input(start),
        }];
        Ok(self.exchange(a, len, &runs, 0.0))
    }

    /// Constant padding, as [`Array::pad`] (`widths` holds one `(before, after)` pair for
    /// every axis, or one for all), lazily. Other axes pad locally in every block; the
    /// split axis's padded length is split again into `array_split` blocks, each assembled
    /// from the input blocks it overlaps and the fill.
    pub fn pad(&self, widths: &[(usize, usize)], value: f64) -> Result<Sharded> {
        let nd = self.ndim();
        let w: Vec<(usize, usize)> = match widths.len() {
            1 => vec![widths[0]; nd],
            n if n == nd => widths.to_vec(),
            n => {
                return Err(Error::Shape {
                    op: "pad",
                    msg: format!(
                        "{n} (before, after) pairs for a sharded array of shape {:?}",
                        self.shape
                    ),
                })
            }
        };
        let Placement::Split(a) = self.placement else {
            return self.map(|p| p.pad(&w, value));
        };
        let mut local = w.clone();
        local[a] = (0, 0);
        let x = self.map(|p| p.pad(&local, value))?;
        let (before, after) = w[a];
        if before == 0 && after == 0 {
            return Ok(x);
        }
        let n = self.shape[a];
        let runs = [
            Run {
                start: 0,
                len: before,
                src: Source::Fill,
            },
            Run {
                start: before,
                len: n,
                src: Source::Input(0),
            },
            Run {
                start: before + n,
                len: after,
                src: Source::Fill,
            },
        ];
        Ok(x.exchange(a, before + n + after, &runs, value))
    }

    /// The array whose split axis `a` has `out_len` positions filled by `runs` (covering
    /// `0..out_len` in order), split into `array_split` blocks: each block joins, on its
    /// device, the slices of the input blocks and the fills its positions come from.
    fn exchange(&self, a: usize, out_len: usize, runs: &[Run], fill: f64) -> Sharded {
        let k = self.mesh.len();
        let in_sizes: Vec<usize> = self.parts.iter().map(|p| p.shape()[a]).collect();
        let in_offs = offsets(&in_sizes);
        let out_sizes = split_sizes(out_len, k);
        let out_offs = offsets(&out_sizes);
        let coll = self.mesh.coll();
        let mut shape = self.parts[0].shape().to_vec();
        let parts = (0..k)
            .map(|i| {
                let dev = &self.mesh.devices()[i];
                let (lo, hi) = (out_offs[i], out_offs[i] + out_sizes[i]);
                let mut pieces: Vec<Array> = Vec::new();
                for r in runs {
                    // the part of this run inside the block
                    let (s, e) = (r.start.max(lo), (r.start + r.len).min(hi));
                    if s >= e {
                        continue;
                    }
                    match r.src {
                        Source::Fill => {
                            shape[a] = e - s;
                            pieces.push(Array::full_on(&shape, fill, self.dtype(), dev));
                        }
                        Source::Input(from) => {
                            // input positions [from + s - r.start, ..), cut at block edges
                            let mut g = from + (s - r.start);
                            let end = g + (e - s);
                            while g < end {
                                let j = in_offs
                                    .iter()
                                    .zip(&in_sizes)
                                    .position(|(&o, &n)| g >= o && g < o + n)
                                    .unwrap_or(k - 1);
                                let stop = end.min(in_offs[j] + in_sizes[j]);
                                let piece =
                                    slice_axis(&self.parts[j], a, g - in_offs[j], stop - in_offs[j]);
                                pieces.push(coll.send(&piece, dev));
                                g = stop.max(g + 1);
                            }
                        }
                    }
                }
                if pieces.is_empty() {
                    shape[a] = 0;
                    return Array::zeros_on(&shape, self.dtype(), dev);
                }
                let refs: Vec<&Array> = pieces.iter().collect();
                crate::concatenate(&refs, a as isize)
            })
            .collect();
        let mut full = self.parts[0].shape().to_vec();
        full[a] = out_len;
        Sharded {
            parts,
            placement: Placement::Split(a),
            shape: full,
            mesh: self.mesh.clone(),
        }
    }
}
