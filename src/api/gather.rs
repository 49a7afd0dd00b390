//! Gathers with integer index arrays (`take`, `take_along_axis`) and the deferred check of
//! their indices: a gather reads through computed indices inside the consumer's kernel,
//! and whether every index was in range is computed on the device as a flag that the
//! result, and everything computed from it, carries (`graph::Checks`): every readback of
//! every dependent reports the same error.

use super::make_checked;
use super::movement::axis_of;
use crate::graph::{Checks, Node, Op, Shape};
use crate::{Array, DType, Error, Result};
use std::sync::Arc;

/// More checks than this on one node are folded into one flag (a chain of gathers in a
/// loop would otherwise carry every earlier step's check).
const FOLD_AT: usize = 16;

/// Distinct messages kept per folded check.
const MESSAGES: usize = 4;

/// The checks of a node built from `inputs`, with `own` added (a gather's own check),
/// folded into one flag when there are many.
pub(crate) fn checks_of(inputs: &[&Array], own: Option<(Array, String)>) -> Option<Arc<Checks>> {
    let union = Checks::union(inputs.iter().map(|a| &a.node));
    let Some((flag, msg)) = own else {
        return fold(union);
    };
    let mut items = union.map(|c| c.items.clone()).unwrap_or_default();
    items.push((flag.node.clone(), msg.into()));
    fold(Some(Arc::new(Checks::new(items))))
}

/// `checks` with more than [`FOLD_AT`] flags replaced by one flag for all of them.
pub(crate) fn fold(checks: Option<Arc<Checks>>) -> Option<Arc<Checks>> {
    let c = checks?;
    if c.items.len() <= FOLD_AT {
        return Some(c);
    }
    let flags: Vec<Array> = c
        .items
        .iter()
        .map(|(f, _)| Array::from_node(f.clone()))
        .collect();
    let refs: Vec<&Array> = flags.iter().collect();
    let flag = crate::stack(&refs, 0).any();
    let mut msgs: Vec<&str> = Vec::new();
    for (_, m) in &c.items {
        if msgs.len() < MESSAGES && !msgs.contains(&&**m) {
            msgs.push(m);
        }
    }
    let msg: Arc<str> = msgs.join("; ").into();
    Some(Arc::new(Checks::new(vec![(flag.node.clone(), msg)])))
}

/// The outcome of the checks `node`'s value depends on: an error naming the gathers whose
/// indices were out of range. Evaluated (and waited for) once per set of checks, then
/// remembered, so every later readback of every dependent returns the same error.
pub(crate) fn check_node(node: &Arc<Node>) -> Result<()> {
    let Some(c) = node.checks() else {
        return Ok(());
    };
    let verdict = match c.verdict.get() {
        Some(v) => v.clone(),
        None => {
            let flags: Vec<Array> = c
                .items
                .iter()
                .map(|(f, _)| Array::from_node(f.clone()))
                .collect();
            let refs: Vec<&Array> = flags.iter().collect();
            crate::eval(&refs)?;
            let mut msgs: Vec<&str> = Vec::new();
            for ((_, m), f) in c.items.iter().zip(&flags) {
                if f.item::<bool>()? && !msgs.contains(&&**m) {
                    msgs.push(m);
                }
            }
            let v = (!msgs.is_empty()).then(|| Arc::<str>::from(msgs.join("; ")));
            c.verdict.get_or_init(|| v).clone()
        }
    };
    match verdict {
        None => Ok(()),
        Some(msg) => Err(index_error(&msg)),
    }
}

/// The error of failed checks' messages (`op: what`, joined by `; `): the gather named
/// once, as the error's op, where every message comes from one kind of gather.
fn index_error(msgs: &str) -> Error {
    let parts: Vec<(&str, &str)> = msgs
        .split("; ")
        .map(|m| m.split_once(": ").unwrap_or(("take", m)))
        .collect();
    let op = match parts.first() {
        Some(&(first, _)) if parts.iter().all(|(o, _)| *o == first) => first,
        _ => "gather",
    };
    let op = if op == "take_along_axis" {
        "take_along_axis"
    } else if op == "take" {
        "take"
    } else {
        "gather"
    };
    let msg = if op == "gather" {
        msgs.to_string()
    } else {
        parts.iter().map(|(_, m)| *m).collect::<Vec<_>>().join("; ")
    };
    Error::Index { op, msg }
}

/// The error of `node`'s checks when it is already known (no evaluation, no wait).
pub(crate) fn known_failure(node: &Arc<Node>) -> Result<()> {
    match node.checks().and_then(|c| c.verdict.get()) {
        Some(Some(msg)) => Err(index_error(msg)),
        _ => Ok(()),
    }
}

/// The check that every index of `idx` lies in `-n..n` (none for no indices).
fn check(op: &str, idx: &Array, n: usize, axis: usize) -> Option<(Array, String)> {
    if idx.size() == 0 {
        return None;
    }
    let n = n as i64;
    let bad = idx.lt(-n).logical_or(idx.ge(n)).any();
    Some((
        bad,
        format!("{op}: an index is out of range for axis {axis} of length {n}"),
    ))
}

#[track_caller]
fn index_array(op: &str, indices: &Array) -> Array {
    match indices.dtype() {
        DType::I64 => indices.clone(),
        d if d.is_int() => indices.astype(DType::I64),
        d => panic!("{op}: indices must be integers, got {d}"),
    }
}

impl Array {
    /// The elements at `indices` along `axis` (NumPy's `take`): the result's shape is
    /// `shape[..axis] + indices.shape + shape[axis + 1..]`. Negative indices count from
    /// the end. An index out of range is an error ([`Error::Index`]) at every readback of
    /// the result and of everything computed from it (inside a traced [`Function`](crate::Function) it reads zero).
    ///
    /// # Panics
    /// When `indices` is not of an integer dtype or `axis` is out of range.
    #[track_caller]
    pub fn take(&self, indices: &Array, axis: isize) -> Array {
        let dev = super::same_device("take", &[self, indices]);
        let a = axis_of("take", axis, self.ndim());
        let idx = index_array("take", indices);
        let (shape, m) = (self.shape(), idx.ndim());
        let mut out: Shape = Shape::from_slice(&shape[..a]);
        out.extend_from_slice(idx.shape());
        out.extend_from_slice(&shape[a + 1..]);
        let own = check("take", &idx, shape[a], a);
        let mut view: Vec<isize> = vec![1; out.len()];
        for (k, &d) in idx.shape().iter().enumerate() {
            view[a + k] = d as isize;
        }
        let idx = idx.reshape(&view).broadcast_to(&out);
        let checks = checks_of(&[self, &idx], own);
        make_checked(
            Op::Gather { axis: a, span: m },
            self.dtype(),
            out,
            &dev,
            &[self, &idx],
            checks,
        )
    }
}

/// `out[.., i, ..] = a[.., indices[.., i, ..], ..]` along `axis` (NumPy's
/// `take_along_axis`): `indices` has `a`'s rank; the other axes broadcast. Negative
/// indices count from the end; an index out of range is an error at every readback
/// of the result and of everything computed from it.
///
/// # Panics
/// When the ranks differ, the other axes do not broadcast, `indices` is not of an
/// integer dtype or `axis` is out of range.
#[track_caller]
pub fn take_along_axis(a: &Array, indices: &Array, axis: isize) -> Array {
    let op = "take_along_axis";
    let dev = super::same_device(op, &[a, indices]);
    if a.ndim() != indices.ndim() {
        panic!(
            "{op}: indices of rank {} for an array of rank {} (shapes {:?} and {:?})",
            indices.ndim(),
            a.ndim(),
            indices.shape(),
            a.shape()
        );
    }
    let ax = axis_of(op, axis, a.ndim());
    let idx = index_array(op, indices);
    let (mut sa, mut si) = (Shape::from_slice(a.shape()), Shape::from_slice(idx.shape()));
    sa[ax] = 1;
    si[ax] = 1;
    let Some(mut out) = crate::shape::broadcast_shapes(&sa, &si) else {
        panic!(
            "{op}: shapes {:?} and {:?} do not broadcast outside axis {ax}",
            a.shape(),
            indices.shape()
        );
    };
    let mut src = out.clone();
    src[ax] = a.shape()[ax];
    out[ax] = idx.shape()[ax];
    let own = check(op, &idx, a.shape()[ax], ax);
    let source = a.broadcast_to(&src);
    let idx = idx.broadcast_to(&out);
    let checks = checks_of(&[&source, &idx], own);
    make_checked(
        Op::Gather { axis: ax, span: 1 },
        a.dtype(),
        out,
        &dev,
        &[&source, &idx],
        checks,
    )
}
