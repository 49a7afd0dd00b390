//! The NumPy-like surface: creation, elementwise ops and operators, movement (views), FFTs
//! and linear algebra.
//! Only builds nodes and checks shapes/dtypes; never executes.

pub(crate) mod creation;
pub(crate) mod elementwise;
pub mod fft;
pub(crate) mod gather;
pub(crate) mod grad;
pub mod linalg;
pub(crate) mod movement;
pub(crate) mod nan;
mod operators;
pub(crate) mod print;
pub(crate) mod reduce;
pub(crate) mod scan;
pub(crate) mod update;

use crate::graph::{Node, Op, Shape};
use crate::{Array, Device};
use lazyfuse_codegen::DType;

/// Builds (or reuses, by hash-consing) a node.
///
/// # Panics
/// At the caller's line when the shape's element count does not fit `usize` (the API
/// functions that take a shape from the user check it first, with their own name; this
/// catches the derived shapes: broadcasts, pads, concatenations, batch shapes). So every
/// node's `size()` is exact.
#[track_caller]
pub(crate) fn make(
    op: Op,
    dtype: DType,
    shape: Shape,
    device: &Device,
    inputs: &[&Array],
) -> Array {
    if crate::shape::checked_size(&shape).is_none() {
        // the name only on failure: `Op::name` allocates, and building stays allocation-lean
        panic!(
            "{}: shape {:?} has more elements than usize can count",
            op.name(),
            shape.as_slice()
        );
    }
    let mut ins = crate::graph::Inputs::new();
    for a in inputs {
        ins.push(a.node.clone());
    }
    make_owned(op, dtype, shape, device.clone(), ins)
}

/// [`make`] taking its inputs' nodes by value: a caller that owns its operands (the
/// temporaries of a chained expression) moves them in, with no reference count touched.
/// The caller has checked the shape's size.
pub(crate) fn make_owned(
    op: Op,
    dtype: DType,
    shape: Shape,
    device: Device,
    inputs: crate::graph::Inputs,
) -> Array {
    let checks = crate::api::gather::fold(crate::graph::Checks::union(inputs.iter()));
    Array::from_node(Node::with_checks(op, dtype, shape, device, inputs, checks))
}

/// [`make`] with the deferred checks given (a gather's: its inputs' and its own).
#[track_caller]
pub(crate) fn make_checked(
    op: Op,
    dtype: DType,
    shape: Shape,
    device: &Device,
    inputs: &[&Array],
    checks: Option<std::sync::Arc<crate::graph::Checks>>,
) -> Array {
    if crate::shape::checked_size(&shape).is_none() {
        panic!(
            "{}: shape {:?} has more elements than usize can count",
            op.name(),
            shape.as_slice()
        );
    }
    let ins: crate::graph::Inputs = inputs.iter().map(|a| a.node.clone()).collect();
    Array::from_node(Node::with_checks(
        op,
        dtype,
        shape,
        device.clone(),
        ins,
        checks,
    ))
}

/// Panics at the caller's line unless all arrays share one device.
#[track_caller]
pub(crate) fn same_device(op: &str, arrays: &[&Array]) -> Device {
    let d = arrays[0].node.device.clone();
    for a in &arrays[1..] {
        if a.node.device != d {
            panic!(
                "{op}: arrays on different devices ({d} and {})",
                a.node.device
            );
        }
    }
    d
}
