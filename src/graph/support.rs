//! Where an array can be nonzero along one axis, read from the structure of its expression
//! (a zero padding, rolled and sliced): what lets an FFT skip the lines that hold only the
//! padding's zeros (see `FftSpec::support`).

use super::{Node, Op};
use lazyfuse_codegen::{BinaryOp, UnaryOp};
use smallvec::SmallVec;
use std::sync::Arc;

/// Sorted, disjoint, non-adjacent index ranges `[lo, hi)`.
pub(crate) type Ranges = SmallVec<[(usize, usize); 2]>;

/// How many levels below the array the analysis looks (the ops that carry a padding to an
/// FFT are few: shifts, casts, a scale).
const MAX_DEPTH: usize = 16;
/// How many nodes it visits at most (binary ops visit both sides).
const MAX_NODES: usize = 64;

/// The index ranges along `axis` of `node` outside which every element is exactly zero,
/// when the structure shows some (`None`: it may be nonzero anywhere). Only structure is
/// read (pad values and widths, shifts, slices; never a constant's value, which a cached
/// plan does not fix), so the answer holds for every DAG of this structure.
pub(crate) fn nonzero_ranges(node: &Arc<Node>, axis: usize) -> Option<Ranges> {
    let n = *node.shape.get(axis)?;
    let mut budget = MAX_NODES;
    let r = ranges(node, axis, 0, &mut budget)?;
    (r.as_slice() != [(0, n)]).then_some(r)
}

/// [`nonzero_ranges`] without the final check; `Some([(0, n)])` or `None` for "anywhere".
fn ranges(node: &Arc<Node>, axis: usize, depth: usize, budget: &mut usize) -> Option<Ranges> {
    if depth > MAX_DEPTH || *budget == 0 {
        return None;
    }
    *budget -= 1;
    let n = node.shape[axis];
    // a realized node drops its inputs: what its own op shows still holds for its values
    let inputs = node.inputs();
    let below = |i: usize, ax: usize, budget: &mut usize| -> Option<Ranges> {
        inputs.get(i).and_then(|x| ranges(x, ax, depth + 1, budget))
    };
    match &node.op {
        Op::Pad(widths, value) => {
            if value.to_c128() != num_complex::Complex64::new(0.0, 0.0) {
                return None;
            }
            let (before, after) = widths[axis];
            let inner = match below(0, axis, budget) {
                Some(r) => r,
                None => SmallVec::from_slice(&[(0, n - before - after)]),
            };
            Some(
                inner
                    .iter()
                    .map(|&(l, h)| (l + before, h + before))
                    .collect(),
            )
        }
        Op::Roll { axis: a, shift } if *a == axis => {
            let r = below(0, axis, budget)?;
            let mut out = Ranges::new();
            for (l, h) in r {
                let (l, h) = (l + shift, h + shift);
                if h <= n {
                    out.push((l, h));
                } else if l >= n {
                    out.push((l - n, h - n));
                } else {
                    out.push((l, n));
                    out.push((0, h - n));
                }
            }
            Some(normalize(out))
        }
        Op::Roll { .. } | Op::Cast => below(0, axis, budget),
        Op::Unary(u) if zero_preserving(*u) => below(0, axis, budget),
        Op::Slice(per_axis) => {
            let (start, step) = per_axis[axis];
            if step < 1 {
                return None;
            }
            let r = below(0, axis, budget)?;
            let (start, step) = (start as i64, step as i64);
            // output i reads input start + i * step: inside [l, h) for i in [il, ih)
            let first =
                |x: i64| (x - start).div_euclid(step) + ((x - start).rem_euclid(step) != 0) as i64;
            let out: Ranges = r
                .iter()
                .map(|&(l, h)| {
                    let il = first(l as i64).clamp(0, n as i64) as usize;
                    let ih = first(h as i64).clamp(0, n as i64) as usize;
                    (il, ih)
                })
                .filter(|&(l, h)| l < h)
                .collect();
            Some(normalize(out))
        }
        Op::Permute(p) => below(0, p[axis], budget),
        Op::Broadcast => {
            let x = inputs.first()?;
            let lead = node.shape.len().checked_sub(x.shape.len())?;
            let ax = axis.checked_sub(lead)?;
            if x.shape[ax] != n {
                return None; // broadcast along the axis: the same values at every index
            }
            below(0, ax, budget)
        }
        Op::Reshape => {
            let x = inputs.first()?;
            let outer: usize = node.shape[..axis].iter().product();
            let ax = (0..x.shape.len())
                .find(|&j| x.shape[j] == n && x.shape[..j].iter().product::<usize>() == outer)?;
            below(0, ax, budget)
        }
        Op::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Complex) => {
            // outside both sides' ranges both are zero, and so is the result
            let a = below(0, axis, budget)?;
            let b = below(1, axis, budget)?;
            Some(union(&a, &b))
        }
        Op::Where => {
            let a = below(1, axis, budget)?;
            let b = below(2, axis, budget)?;
            Some(union(&a, &b))
        }
        _ => None,
    }
}

/// Unary ops that map +0 and -0 to a zero whatever the dtype.
fn zero_preserving(u: UnaryOp) -> bool {
    use UnaryOp::*;
    matches!(
        u,
        Neg | Abs
            | Sqrt
            | Expm1
            | Log1p
            | Sin
            | Tan
            | Asin
            | Atan
            | Sinh
            | Tanh
            | Floor
            | Ceil
            | Round
            | Trunc
            | Sign
            | Square
            | Real
            | Imag
            | Conj
    )
}

/// Sorts and merges overlapping or adjacent ranges.
fn normalize(mut r: Ranges) -> Ranges {
    r.retain(|&mut (l, h)| l < h);
    r.sort_unstable();
    let mut out = Ranges::new();
    for (l, h) in r {
        match out.last_mut() {
            Some(last) if l <= last.1 => last.1 = last.1.max(h),
            _ => out.push((l, h)),
        }
    }
    out
}

fn union(a: &Ranges, b: &Ranges) -> Ranges {
    normalize(a.iter().chain(b).copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(v: &[(usize, usize)]) -> Ranges {
        SmallVec::from_slice(v)
    }

    #[test]
    fn ranges_merge_and_sort() {
        assert_eq!(
            normalize(r(&[(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)])),
            r(&[(0, 3), (5, 9)])
        );
        assert_eq!(union(&r(&[(0, 1)]), &r(&[(3, 4)])), r(&[(0, 1), (3, 4)]));
    }

    fn last(a: &crate::Array) -> Option<Ranges> {
        nonzero_ranges(&a.node, a.ndim() - 1)
    }

    #[test]
    fn a_shifted_zero_padding_shows_its_data_columns() {
        use crate::{DType, Device};
        let x = crate::Array::linspace_on(-1.0, 1.0, 6, DType::F32, &Device::Cpu);
        let g = crate::meshgrid(&[&x, &x], crate::Indexing::Xy);
        let wave = (&g[0] * &g[1]).sin().astype(DType::C64);
        let padded = wave.pad(&[(3, 3), (3, 3)], 0.0);
        assert_eq!(last(&padded), Some(r(&[(3, 9)])));
        // ifftshift rolls the 12 columns by 6: the data wraps around the edge
        let shifted = crate::fft::ifftshift(&padded, None);
        assert_eq!(last(&shifted), Some(r(&[(0, 3), (9, 12)])));
        assert_eq!(last(&(-&shifted).conj()), Some(r(&[(0, 3), (9, 12)])));
        // along the other axis too
        assert_eq!(
            nonzero_ranges(&shifted.node, 0),
            Some(r(&[(0, 3), (9, 12)]))
        );
        // a slice keeps the columns it reads: columns 8..12 step 2 read 8, 10
        let sl = padded.slice(crate::s![.., 2..12;2]);
        assert_eq!(last(&sl), Some(r(&[(1, 4)])));
        // sums and products of padded arrays: the union
        let other = wave.pad(&[(3, 3), (0, 6)], 0.0);
        assert_eq!(last(&(&padded * &other)), Some(r(&[(0, 9)])));
        // a transpose reads the other axis
        let tall = wave.pad(&[(0, 0), (2, 0)], 0.0); // 6 x 8, data in columns 2..8
        assert_eq!(
            nonzero_ranges(&tall.transpose().node, 0),
            Some(r(&[(2, 8)]))
        );
        assert_eq!(nonzero_ranges(&tall.transpose().node, 1), None);
    }

    #[test]
    fn values_the_plan_does_not_fix_give_no_ranges() {
        use crate::{DType, Device};
        let x = crate::Array::ones_on(&[4, 4], DType::C64, &Device::Cpu);
        let padded = x.pad(&[(2, 2), (2, 2)], 0.0);
        // a padding with a nonzero value, a constant (0 * inf is NaN), a cosine (cos 0 = 1)
        assert_eq!(last(&x.pad(&[(2, 2), (2, 2)], 1.0)), None);
        assert_eq!(last(&(&padded * 2.0)), None);
        assert_eq!(last(&padded.cos()), None);
        assert_eq!(last(&(&padded + 1.0)), None);
        // a broadcast along the axis repeats one column everywhere
        let col =
            crate::Array::ones_on(&[8, 1], DType::C64, &Device::Cpu).pad(&[(0, 0), (0, 0)], 0.0);
        assert_eq!(last(&col.broadcast_to(&[8, 8])), None);
        // a full padding is no information
        let z = crate::Array::ones_on(&[0, 4], DType::C64, &Device::Cpu);
        assert_eq!(last(&z.pad(&[(1, 1), (0, 0)], 0.0)), None);
    }
}
