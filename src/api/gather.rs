//! Gathers with integer index arrays (`take`, `take_along_axis`) and the deferred check of
//! their indices: a gather reads through computed indices inside the consumer's kernel,
//! and whether every index was in range is computed on the device and reported as an
//! error by the next readback on the same thread.

use super::make;
use super::movement::axis_of;
use crate::graph::{Op, Shape};
use crate::{Array, DType, Device, Error, Result};
use std::cell::RefCell;

/// Index checks queued on this thread and not yet read: per device, the unevaluated
/// checks (Bool 0-d, true when an index was out of range) with their messages, and the
/// evaluated union of earlier ones.
#[derive(Default)]
struct Pending {
    checks: Vec<(Array, Message)>,
    folded: Option<(Array, Vec<Message>)>,
}

/// What a check reports when its flag is set: the gather (`take`, `take_along_axis`) and
/// what is wrong, without the gather's name.
type Message = (&'static str, String);

thread_local! {
    static PENDING: RefCell<Vec<(Device, Pending)>> = const { RefCell::new(Vec::new()) };
}

/// Unevaluated checks kept before they are folded into one evaluated flag (each keeps
/// its index array alive until then).
const FOLD_AT: usize = 16;

/// Distinct messages kept per device.
const MESSAGES: usize = 4;

fn register(bad: Array, msg: Message) {
    let dev = bad.device();
    let fold = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let i = match p.iter().position(|(d, _)| *d == dev) {
            Some(i) => i,
            None => {
                p.push((dev.clone(), Pending::default()));
                p.len() - 1
            }
        };
        let q = &mut p[i].1;
        q.checks.push((bad, msg));
        (q.checks.len() >= FOLD_AT).then(|| std::mem::take(&mut p[i].1))
    });
    if let Some(q) = fold {
        // queued, not waited for: the union of the checks becomes one tiny buffer and the
        // index arrays they held are released
        let (flag, msgs) = union(q);
        let _ = flag.eval();
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            if let Some((_, slot)) = p.iter_mut().find(|(d, _)| *d == dev) {
                let (flag, msgs) = match slot.folded.take() {
                    Some((old, mut m)) => {
                        merge(&mut m, msgs);
                        (old.logical_or(&flag), m)
                    }
                    None => (flag, msgs),
                };
                let _ = flag.eval();
                slot.folded = Some((flag, msgs));
            }
        });
    }
}

fn merge(into: &mut Vec<Message>, more: Vec<Message>) {
    for m in more {
        if into.len() < MESSAGES && !into.contains(&m) {
            into.push(m);
        }
    }
}

/// One flag for every check of `q` and their distinct messages.
fn union(q: Pending) -> (Array, Vec<Message>) {
    let mut msgs = Vec::new();
    let mut flags: Vec<Array> = Vec::new();
    if let Some((f, m)) = q.folded {
        flags.push(f);
        merge(&mut msgs, m);
    }
    for (f, m) in q.checks {
        flags.push(f);
        merge(&mut msgs, vec![m]);
    }
    let refs: Vec<&Array> = flags.iter().collect();
    let flag = if refs.len() == 1 {
        refs[0].clone()
    } else {
        crate::stack(&refs, 0).any()
    };
    (flag, msgs)
}

/// Reads the index checks queued on this thread: an error naming the gathers when an
/// index was out of range. Called by every readback before it copies.
pub(crate) fn check_indices() -> Result<()> {
    let pending = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        if p.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut *p))
        }
    });
    let Some(pending) = pending else {
        return Ok(());
    };
    let mut msgs = Vec::new();
    for (_, q) in pending {
        let (flag, m) = union(q);
        if flag.item::<bool>()? {
            merge(&mut msgs, m);
        }
    }
    let Some(&(first, _)) = msgs.first() else {
        return Ok(());
    };
    // the error names the gather once: as its `op` where every message comes from one
    // kind of gather, else in front of each message
    if msgs.iter().all(|(op, _)| *op == first) {
        let msg: Vec<String> = msgs.into_iter().map(|(_, m)| m).collect();
        Err(Error::Index {
            op: first,
            msg: msg.join("; "),
        })
    } else {
        let msg: Vec<String> = msgs.iter().map(|(op, m)| format!("{op}: {m}")).collect();
        Err(Error::Index {
            op: "gather",
            msg: msg.join("; "),
        })
    }
}

/// Queues the check that every index of `idx` lies in `-n..n`.
fn check(op: &'static str, idx: &Array, n: usize, axis: usize) {
    if idx.size() == 0 {
        return;
    }
    let n = n as i64;
    let bad = idx.lt(-n).logical_or(idx.ge(n)).any();
    register(
        bad,
        (
            op,
            format!("an index is out of range for axis {axis} of length {n}"),
        ),
    );
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
    /// the end. An index out of range is an error ([`Error::Index`]) at the next readback
    /// on this thread (inside a traced [`Function`](crate::Function) it reads zero).
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
        check("take", &idx, shape[a], a);
        let mut view: Vec<isize> = vec![1; out.len()];
        for (k, &d) in idx.shape().iter().enumerate() {
            view[a + k] = d as isize;
        }
        let idx = idx.reshape(&view).broadcast_to(&out);
        make(
            Op::Gather { axis: a, span: m },
            self.dtype(),
            out,
            &dev,
            &[self, &idx],
        )
    }
}

/// `out[.., i, ..] = a[.., indices[.., i, ..], ..]` along `axis` (NumPy's
/// `take_along_axis`): `indices` has `a`'s rank; the other axes broadcast. Negative
/// indices count from the end; an index out of range is an error at the next readback
/// on this thread.
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
    check(op, &idx, a.shape()[ax], ax);
    let source = a.broadcast_to(&src);
    let idx = idx.broadcast_to(&out);
    make(
        Op::Gather { axis: ax, span: 1 },
        a.dtype(),
        out,
        &dev,
        &[&source, &idx],
    )
}
