//! Shape and movement operations. All are views: they add index arithmetic to whatever
//! reads them and copy nothing.

use super::{make, same_device};
use crate::graph::{Op, Shape};
use crate::promote;
use crate::shape::{can_broadcast, norm_axis};
use crate::{Array, Device};
use lazyfuse_codegen::{DType, Scalar};
use ndarray::SliceInfoElem;
use smallvec::SmallVec;

/// A basic slice resolved against a shape (see [`Array::slice_plan`]).
pub(crate) struct SlicePlan {
    pub(crate) sl: SmallVec<[(isize, isize); 4]>,
    pub(crate) mid: Shape,
    pub(crate) fin: Shape,
}

#[track_caller]
pub(crate) fn axis_of(op: &str, axis: isize, ndim: usize) -> usize {
    // `match`, not `unwrap_or_else(|| panic!(..))`: a closure would report its own line
    match norm_axis(axis, ndim, false) {
        Some(a) => a,
        None => panic!("{op}: axis {axis} out of range for an array of rank {ndim}"),
    }
}

impl Array {
    /// `self[.., start..stop, ..]`: axis `axis` sliced to `[start, stop)`, every other axis
    /// whole (a view).
    pub(crate) fn slice_axis(&self, axis: usize, start: usize, stop: usize) -> Array {
        let info: Vec<SliceInfoElem> = (0..self.ndim())
            .map(|k| SliceInfoElem::Slice {
                start: if k == axis { start as isize } else { 0 },
                end: if k == axis { Some(stop as isize) } else { None },
                step: 1,
            })
            .collect();
        self.slice(info.as_slice())
    }
}

impl Array {
    /// Same elements in C order with a new shape; one entry may be `-1` (inferred).
    #[track_caller]
    pub fn reshape(&self, shape: &[isize]) -> Array {
        let size = self.size();
        let known_dims: Shape = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .collect();
        let known = crate::shape::size_or_panic("reshape", &known_dims);
        let infer = shape.iter().filter(|&&d| d < 0).count();
        if infer > 1 || shape.iter().any(|&d| d < -1) {
            panic!("reshape: invalid shape {shape:?}");
        }
        let mut new = Shape::new();
        for &d in shape {
            new.push(if d >= 0 {
                d as usize
            } else {
                match size.checked_div(known) {
                    Some(n) => n,
                    None => {
                        panic!("reshape: cannot infer -1 in {shape:?} with a zero-size dimension")
                    }
                }
            });
        }
        if crate::shape::checked_size(&new) != Some(size) {
            panic!(
                "reshape: cannot reshape array of shape {:?} into {shape:?}",
                self.shape()
            );
        }
        self.reshape_to(new)
    }

    pub(crate) fn reshape_to(&self, new: Shape) -> Array {
        if new.as_slice() == self.shape() {
            return self.clone();
        }
        make(Op::Reshape, self.dtype(), new, &self.node.device, &[self])
    }

    /// Reverses the axes.
    #[track_caller]
    pub fn transpose(&self) -> Array {
        let p: Vec<usize> = (0..self.ndim()).rev().collect();
        self.permute(&p)
    }

    /// Reorders the axes: output axis `k` is input axis `axes[k]`.
    #[track_caller]
    pub fn permute(&self, axes: &[usize]) -> Array {
        let n = self.ndim();
        let mut seen = vec![false; n];
        if axes.len() != n
            || axes
                .iter()
                .any(|&a| a >= n || std::mem::replace(&mut seen[a], true))
        {
            panic!(
                "permute: {axes:?} is not a permutation of the {n} axes of shape {:?}",
                self.shape()
            );
        }
        if axes.iter().enumerate().all(|(i, &a)| i == a) {
            return self.clone();
        }
        let shape: Shape = axes.iter().map(|&a| self.shape()[a]).collect();
        make(
            Op::Permute(axes.into()),
            self.dtype(),
            shape,
            &self.node.device,
            &[self],
        )
    }

    /// Exchanges two axes.
    #[track_caller]
    pub fn swapaxes(&self, a: isize, b: isize) -> Array {
        let (a, b) = (
            axis_of("swapaxes", a, self.ndim()),
            axis_of("swapaxes", b, self.ndim()),
        );
        let mut p: Vec<usize> = (0..self.ndim()).collect();
        p.swap(a, b);
        self.permute(&p)
    }

    /// NumPy broadcasting to `shape`.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Array {
        if shape == self.shape() {
            return self.clone();
        }
        crate::shape::size_or_panic("broadcast_to", shape);
        if !can_broadcast(self.shape(), shape) {
            panic!(
                "broadcast_to: cannot broadcast shape {:?} to {shape:?}",
                self.shape()
            );
        }
        if let Op::Const(s) = self.node.op {
            // a constant broadcast is the constant at the new shape: one node, no view
            // (its value is a kernel parameter at every index either way)
            return make(
                Op::Const(s),
                self.dtype(),
                Shape::from_slice(shape),
                &self.node.device,
                &[],
            );
        }
        make(
            Op::Broadcast,
            self.dtype(),
            Shape::from_slice(shape),
            &self.node.device,
            &[self],
        )
    }

    /// Inserts an axis of length 1 at `axis`.
    #[track_caller]
    pub fn expand_dims(&self, axis: isize) -> Array {
        let Some(a) = norm_axis(axis, self.ndim(), true) else {
            panic!(
                "expand_dims: axis {axis} out of range for rank {}",
                self.ndim()
            )
        };
        let mut s: Shape = Shape::from_slice(&self.node.shape);
        s.insert(a, 1);
        self.reshape_to(s)
    }

    /// Removes the axis `axis`, which must have length 1.
    #[track_caller]
    pub fn squeeze(&self, axis: isize) -> Array {
        let a = axis_of("squeeze", axis, self.ndim());
        if self.shape()[a] != 1 {
            panic!(
                "squeeze: axis {axis} of shape {:?} does not have length 1",
                self.shape()
            );
        }
        let mut s: Shape = Shape::from_slice(&self.node.shape);
        s.remove(a);
        self.reshape_to(s)
    }

    /// The per-axis `(start, step)` of a basic slice, the sliced shape before index axes
    /// drop and `NewAxis` axes appear (`mid`, one entry per axis of `self`), and the final
    /// shape (`fin`).
    #[track_caller]
    pub(crate) fn slice_plan(&self, op: &str, elems: &[SliceInfoElem]) -> SlicePlan {
        let n_axes = elems
            .iter()
            .filter(|e| !matches!(e, SliceInfoElem::NewAxis))
            .count();
        if n_axes > self.ndim() {
            panic!(
                "{op}: {n_axes} indices for an array of rank {}",
                self.ndim()
            );
        }
        let mut sl: SmallVec<[(isize, isize); 4]> = SmallVec::new();
        let mut mid: Shape = Shape::new();
        let mut fin: Shape = Shape::new();
        let mut ax = 0;
        for e in elems {
            match *e {
                SliceInfoElem::Slice { start, end, step } => {
                    let n = self.shape()[ax] as isize;
                    if step == 0 {
                        panic!("{op}: step 0 on axis {ax}");
                    }
                    let clip = |v: isize| (if v < 0 { v + n } else { v }).clamp(0, n);
                    let s = clip(start);
                    let e = end.map_or(n, clip);
                    let len = if e > s {
                        (e - s + step.abs() - 1) / step.abs()
                    } else {
                        0
                    };
                    let first = if step > 0 || len == 0 { s } else { e - 1 };
                    sl.push((first, step));
                    mid.push(len as usize);
                    fin.push(len as usize);
                    ax += 1;
                }
                SliceInfoElem::Index(i) => {
                    let n = self.shape()[ax] as isize;
                    let j = if i < 0 { i + n } else { i };
                    if !(0..n).contains(&j) {
                        panic!("{op}: index {i} out of range for axis {ax} of length {n}");
                    }
                    sl.push((j, 1));
                    mid.push(1);
                    ax += 1;
                }
                SliceInfoElem::NewAxis => fin.push(1),
            }
        }
        for a in ax..self.ndim() {
            sl.push((0, 1));
            mid.push(self.shape()[a]);
            fin.push(self.shape()[a]);
        }
        SlicePlan { sl, mid, fin }
    }

    /// Basic slicing with ndarray's `s![..]` (re-exported as `lf::s!`): ranges with steps,
    /// single indices (dropping the axis) and `NewAxis`. Negative indices count from the
    /// end, out-of-range bounds are clipped (as NumPy does); a negative step walks the
    /// selected range from its end (ndarray's meaning: `s![..;-1]` reverses).
    #[track_caller]
    pub fn slice<I: AsRef<[SliceInfoElem]>>(&self, info: I) -> Array {
        let SlicePlan { sl, mid, fin } = self.slice_plan("slice", info.as_ref());
        let identity = sl
            .iter()
            .zip(mid.iter())
            .zip(self.shape())
            .all(|((&(s, st), &m), &n)| s == 0 && st == 1 && m == n);
        let sliced = if identity {
            self.clone()
        } else {
            make(
                Op::Slice(sl.into_vec().into()),
                self.dtype(),
                mid,
                &self.node.device,
                &[self],
            )
        };
        sliced.reshape_to(fin)
    }

    /// Reverses the order of elements along `axis`.
    #[track_caller]
    pub fn flip(&self, axis: isize) -> Array {
        let a = axis_of("flip", axis, self.ndim());
        let n = self.shape()[a];
        if n <= 1 {
            return self.clone();
        }
        let sl: Box<[(isize, isize)]> = (0..self.ndim())
            .map(|k| if k == a { (n as isize - 1, -1) } else { (0, 1) })
            .collect();
        make(
            Op::Slice(sl),
            self.dtype(),
            Shape::from_slice(&self.node.shape),
            &self.node.device,
            &[self],
        )
    }

    /// Constant padding: `widths[k] = (before, after)` for each axis (one pair applies to
    /// every axis), filled with `value` (converted to the array's dtype).
    #[track_caller]
    pub fn pad(&self, widths: &[(usize, usize)], value: f64) -> Array {
        let w: SmallVec<[(usize, usize); 4]> = match widths.len() {
            1 => std::iter::repeat_n(widths[0], self.ndim()).collect(),
            n if n == self.ndim() => widths.into(),
            n => panic!(
                "pad: {n} (before, after) pairs for an array of rank {}",
                self.ndim()
            ),
        };
        if w.iter().all(|&(b, a)| b == 0 && a == 0) {
            return self.clone();
        }
        let shape: Shape = self
            .shape()
            .iter()
            .zip(&w)
            .map(|(&n, &(b, a))| n + b + a)
            .collect();
        let v = Scalar::F64(value).cast(self.dtype());
        make(
            Op::Pad(w.into_vec().into(), v),
            self.dtype(),
            shape,
            &self.node.device,
            &[self],
        )
    }

    /// Rotates elements along `axis` by `shift` (positive shifts move elements to higher
    /// indices), as `numpy.roll`.
    #[track_caller]
    pub fn roll(&self, shift: isize, axis: isize) -> Array {
        let a = axis_of("roll", axis, self.ndim());
        let n = self.shape()[a];
        if n == 0 {
            return self.clone();
        }
        let s = shift.rem_euclid(n as isize) as usize;
        if s == 0 {
            return self.clone();
        }
        make(
            Op::Roll { axis: a, shift: s },
            self.dtype(),
            Shape::from_slice(&self.node.shape),
            &self.node.device,
            &[self],
        )
    }
}

/// Joins arrays along an existing axis (dtypes promote as NumPy's `concatenate`).
#[track_caller]
pub fn concatenate(arrays: &[&Array], axis: isize) -> Array {
    let Some(first) = arrays.first() else {
        panic!("concatenate: no arrays given")
    };
    let nd = first.ndim();
    if nd == 0 {
        panic!("concatenate: zero-dimensional arrays cannot be concatenated");
    }
    let a = axis_of("concatenate", axis, nd);
    let dev = same_device("concatenate", arrays);
    let dtype = arrays
        .iter()
        .map(|x| x.dtype())
        .reduce(promote::result_type)
        .unwrap_or(first.dtype());
    let mut shape: Shape = Shape::from_slice(&first.node.shape);
    shape[a] = 0;
    for x in arrays {
        let ok = x.ndim() == nd && (0..nd).all(|k| k == a || x.shape()[k] == first.shape()[k]);
        if !ok {
            let shapes: Vec<&[usize]> = arrays.iter().map(|x| x.shape()).collect();
            panic!("concatenate: shapes {shapes:?} differ outside axis {axis}");
        }
        shape[a] += x.shape()[a];
    }
    let parts: Vec<Array> = arrays
        .iter()
        .filter(|x| x.shape()[a] > 0)
        .map(|x| x.astype(dtype))
        .collect();
    if parts.is_empty() {
        return first.astype(dtype);
    }
    // Many parts: a balanced tree of concatenations of at most CONCAT_FANOUT each, so that
    // no kernel needs the offsets and pointers of every part (the planner can then cut the
    // tree into kernels within the argument limit).
    let mut level = parts;
    while level.len() > CONCAT_FANOUT {
        level = level
            .chunks(CONCAT_FANOUT)
            .map(|group| concat_node(group, a, dtype, &dev))
            .collect();
    }
    debug_assert_eq!(level.iter().map(|x| x.shape()[a]).sum::<usize>(), shape[a]);
    concat_node(&level, a, dtype, &dev)
}

/// Most parts one concatenation node joins.
const CONCAT_FANOUT: usize = 32;

/// One concatenation node over `parts` (non-empty, one dtype, equal shapes off `axis`).
fn concat_node(parts: &[Array], axis: usize, dtype: DType, dev: &Device) -> Array {
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let mut shape: Shape = Shape::from_slice(&parts[0].node.shape);
    shape[axis] = parts.iter().map(|x| x.shape()[axis]).sum();
    let refs: Vec<&Array> = parts.iter().collect();
    make(Op::Concat(axis), dtype, shape, dev, &refs)
}

/// Joins arrays of one shape along a new axis.
#[track_caller]
pub fn stack(arrays: &[&Array], axis: isize) -> Array {
    let Some(first) = arrays.first() else {
        panic!("stack: no arrays given")
    };
    if arrays.iter().any(|x| x.shape() != first.shape()) {
        let shapes: Vec<&[usize]> = arrays.iter().map(|x| x.shape()).collect();
        panic!("stack: all arrays must have the same shape, got {shapes:?}");
    }
    let Some(a) = norm_axis(axis, first.ndim(), true) else {
        panic!(
            "stack: axis {axis} out of range for rank {}",
            first.ndim() + 1
        )
    };
    let expanded: Vec<Array> = arrays.iter().map(|x| x.expand_dims(a as isize)).collect();
    let refs: Vec<&Array> = expanded.iter().collect();
    if refs.len() == 1 {
        return expanded[0].clone();
    }
    concatenate(&refs, a as isize)
}
