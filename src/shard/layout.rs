//! Moving blocks between shards: re-sharding onto another axis (all-to-all), replication
//! (all-gather), and the rolls, pads and ranges along the split axis whose output blocks
//! are assembled from the input blocks they overlap (halo exchange).

use super::collective::Move;
use super::{axis_in, offsets, split_sizes, Placement, Sharded};
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
                                p.slice_axis(b, s, e)
                            })
                            .collect()
                    })
                    .collect();
                self.mesh
                    .coll()
                    .all_to_all(&pieces, a, self.mesh.devices())?
            }
            Placement::Replicated => self
                .parts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (s, e) = range(i);
                    p.slice_axis(b, s, e)
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

    /// The axes reordered, as [`Array::permute`] (`axes[k]` is the input axis that becomes
    /// axis `k`): a view of every block; the split axis moves with its data, so nothing
    /// moves between devices. An error unless `axes` is a permutation of the axes.
    pub fn permute(&self, axes: &[usize]) -> Result<Sharded> {
        let mut seen = vec![false; self.ndim()];
        let ok = axes.len() == self.ndim()
            && axes
                .iter()
                .all(|&k| k < seen.len() && !std::mem::replace(&mut seen[k], true));
        if !ok {
            return Err(Error::Shape {
                op: "permute",
                msg: format!(
                    "axes {axes:?} are not a permutation of the axes of shape {:?}",
                    self.shape
                ),
            });
        }
        let placement = match self.placement {
            Placement::Split(a) => Placement::Split(axes.iter().position(|&k| k == a).unwrap_or(a)),
            Placement::Replicated => Placement::Replicated,
        };
        Ok(Sharded {
            parts: self.parts.iter().map(|p| p.permute(axes)).collect(),
            placement,
            shape: axes.iter().map(|&k| self.shape[k]).collect(),
            mesh: self.mesh.clone(),
        })
    }

    /// The axes reversed, as [`Array::transpose`] (see [`Sharded::permute`]).
    pub fn transpose(&self) -> Sharded {
        let axes: Vec<usize> = (0..self.ndim()).rev().collect();
        Sharded {
            parts: self.parts.iter().map(|p| p.transpose()).collect(),
            placement: match self.placement {
                Placement::Split(a) => Placement::Split(self.ndim() - 1 - a),
                Placement::Replicated => Placement::Replicated,
            },
            shape: axes.iter().map(|&k| self.shape[k]).collect(),
            mesh: self.mesh.clone(),
        }
    }

    /// The whole array on every device ([`Placement::Replicated`]; an all-gather: lazy
    /// copies and concatenations on the host-staged backend, `ncclAllGather` on NCCL).
    pub fn replicated(&self) -> Result<Sharded> {
        let parts = match self.placement {
            Placement::Replicated => return Ok(self.clone()),
            Placement::Split(a) => {
                self.mesh
                    .coll()
                    .all_gather(&self.parts, a, self.mesh.devices())?
            }
        };
        Ok(Sharded {
            parts,
            placement: Placement::Replicated,
            shape: self.shape.clone(),
            mesh: self.mesh.clone(),
        })
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
        self.exchange(a, n, &roll_runs(n, s), 0.0)
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
            return self.map(|p| p.slice_axis(a, start, start + len));
        }
        let runs = [Run {
            start: 0,
            len,
            src: Source::Input(start),
        }];
        self.exchange(a, len, &runs, 0.0)
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
        x.exchange(a, before + n + after, &runs, value)
    }

    /// The array whose split axis `a` has `out_len` positions filled by `runs` (covering
    /// `0..out_len` in order), split into `array_split` blocks: each block joins, on its
    /// device, the slices of the input blocks and the fills its positions come from. The
    /// slices move in one batch ([`Collectives::exchange`](super::collective::Collectives)).
    fn exchange(&self, a: usize, out_len: usize, runs: &[Run], fill: f64) -> Result<Sharded> {
        let k = self.mesh.len();
        let in_sizes: Vec<usize> = self.parts.iter().map(|p| p.shape()[a]).collect();
        let out_sizes = split_sizes(out_len, k);
        let out_offs = offsets(&out_sizes);
        let pieces: Vec<Vec<Piece>> = (0..k)
            .map(|i| {
                let (lo, hi) = (out_offs[i], out_offs[i] + out_sizes[i]);
                block_pieces(&in_sizes, lo, hi, runs)
            })
            .collect();
        let moves: Vec<Move> = pieces
            .iter()
            .enumerate()
            .flat_map(|(i, ps)| {
                ps.iter().filter_map(move |piece| match *piece {
                    Piece::Block { j, start, stop } => Some(Move {
                        src: j,
                        dst: i,
                        array: self.parts[j].slice_axis(a, start, stop),
                    }),
                    Piece::Fill(_) => None,
                })
            })
            .collect();
        let mut moved = self
            .mesh
            .coll()
            .exchange(&moves, self.mesh.devices())?
            .into_iter();
        let mut shape = self.parts[0].shape().to_vec();
        let mut parts = Vec::with_capacity(k);
        for (i, ps) in pieces.iter().enumerate() {
            let dev = &self.mesh.devices()[i];
            let mut joined: Vec<Array> = Vec::with_capacity(ps.len());
            for piece in ps {
                joined.push(match piece {
                    Piece::Fill(len) => {
                        shape[a] = *len;
                        Array::full_on(&shape, fill, self.dtype(), dev)
                    }
                    Piece::Block { .. } => moved
                        .next()
                        .ok_or_else(|| crate::Error::internal("exchange", "moves out of step"))?,
                });
            }
            parts.push(if joined.is_empty() {
                shape[a] = 0;
                Array::zeros_on(&shape, self.dtype(), dev)
            } else {
                let refs: Vec<&Array> = joined.iter().collect();
                crate::concatenate(&refs, a as isize)
            });
        }
        let mut full = self.parts[0].shape().to_vec();
        full[a] = out_len;
        Ok(Sharded {
            parts,
            placement: Placement::Split(a),
            shape: full,
            mesh: self.mesh.clone(),
        })
    }
}

/// One piece of an output block, in order along the split axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    /// Positions `start..stop` of input block `j` (block-local).
    Block { j: usize, start: usize, stop: usize },
    /// This many positions of the pad value.
    Fill(usize),
}

/// The pieces of the output block `lo..hi` given the input blocks' lengths and the runs
/// of the output axis: the runs cut at the block's edges and at the input blocks' edges.
fn block_pieces(in_sizes: &[usize], lo: usize, hi: usize, runs: &[Run]) -> Vec<Piece> {
    let in_offs = offsets(in_sizes);
    let mut out = Vec::new();
    for r in runs {
        // the part of this run inside the block
        let (s, e) = (r.start.max(lo), (r.start + r.len).min(hi));
        if s >= e {
            continue;
        }
        match r.src {
            Source::Fill => out.push(Piece::Fill(e - s)),
            Source::Input(from) => {
                // input positions from + (s - r.start) onwards, cut at input block edges
                let mut g = from + (s - r.start);
                let end = g + (e - s);
                for (j, (&o, &n)) in in_offs.iter().zip(in_sizes).enumerate() {
                    if g >= end {
                        break;
                    }
                    if g < o || g >= o + n {
                        continue;
                    }
                    let stop = end.min(o + n);
                    out.push(Piece::Block {
                        j,
                        start: g - o,
                        stop: stop - o,
                    });
                    g = stop;
                }
            }
        }
    }
    out
}

/// The runs of a roll by `s` (`0 <= s < n`) of an axis of length `n`:
/// `out[g] = in[(g - s) mod n]`.
fn roll_runs(n: usize, s: usize) -> [Run; 2] {
    [
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
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_roll_reads_two_neighbouring_blocks() {
        let sizes = split_sizes(30, 3);
        let runs = roll_runs(30, 3);
        let pieces: Vec<Vec<Piece>> = (0..3)
            .map(|i| block_pieces(&sizes, 10 * i, 10 * i + 10, &runs))
            .collect();
        let b = |j, start, stop| Piece::Block { j, start, stop };
        assert_eq!(pieces[0], vec![b(2, 7, 10), b(0, 0, 7)]);
        assert_eq!(pieces[1], vec![b(0, 7, 10), b(1, 0, 7)]);
        assert_eq!(pieces[2], vec![b(1, 7, 10), b(2, 0, 7)]);
        // uneven blocks and every shift: each block reads at most two blocks whenever the
        // shift's remainder is no longer than the shortest block
        let sizes = split_sizes(31, 4);
        for s in 0..31 {
            let runs = roll_runs(31, s);
            let offs = offsets(&sizes);
            for i in 0..4 {
                let p = block_pieces(&sizes, offs[i], offs[i] + sizes[i], &runs);
                let len: usize = p
                    .iter()
                    .map(|q| match q {
                        Piece::Block { start, stop, .. } => stop - start,
                        Piece::Fill(n) => *n,
                    })
                    .sum();
                assert_eq!(len, sizes[i]);
                if s <= 7 || s >= 31 - 7 {
                    assert!(p.len() <= 2, "shift {s} block {i}: {p:?}");
                }
            }
        }
    }

    #[test]
    fn pad_pieces_put_the_fill_at_the_ends() {
        let sizes = split_sizes(4, 2);
        let runs = [
            Run {
                start: 0,
                len: 3,
                src: Source::Fill,
            },
            Run {
                start: 3,
                len: 4,
                src: Source::Input(0),
            },
            Run {
                start: 7,
                len: 1,
                src: Source::Fill,
            },
        ];
        let b = |j, start, stop| Piece::Block { j, start, stop };
        assert_eq!(
            block_pieces(&sizes, 0, 4, &runs),
            vec![Piece::Fill(3), b(0, 0, 1)]
        );
        assert_eq!(
            block_pieces(&sizes, 4, 8, &runs),
            vec![b(0, 1, 2), b(1, 0, 2), Piece::Fill(1)]
        );
    }
}
