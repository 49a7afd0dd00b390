//! Planning of matmul steps: which buffer each operand is read from and with which
//! layout, so that transposes, reshapes of buffers and batch broadcasts cost no copy.
//!
//! An operand is followed down through `Permute`, `Broadcast` and (directly above its
//! base) `Reshape` views to a *base*: a realized node or a computation that the plan
//! materializes anyway. Those views only change strides, so the operand is a strided view
//! of the base's C-order buffer. When its matrix axes are row-major or column-major and
//! dense, the step reads the base with batch strides and a transpose flag; otherwise
//! (slices, pads, constants, odd strides) the operand itself is materialized by the
//! fused kernel before the step, as for other library steps. The decision depends only on
//! structure (ops, shapes, realized-ness), so cached templates stay valid.

use super::TStep;
use crate::graph::{FxBuild, Node, Op};
use crate::runtime::matmul::{GemmOperand, GemmSpec};
use crate::{Error, Result};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

type Strides = SmallVec<[usize; 6]>;

/// `node` as a strided view of a base node's C-order buffer: the base and the strides of
/// `node`'s axes; `None` when some view on the way is not a pure stride change.
///
/// Walks down the chain of views to the base first, then composes the strides back up
/// from it, so a long chain of views cannot exhaust the stack.
fn strided(node: &Arc<Node>) -> Option<(Arc<Node>, Strides)> {
    let own = |n: &Arc<Node>| -> Strides { crate::shape::strides(&n.shape).into_iter().collect() };
    // the views from `node` down to (without) the base, each with its input
    let mut views: Vec<(Arc<Node>, Arc<Node>)> = Vec::new();
    let mut cur = node.clone();
    let base = loop {
        if cur.buffer().is_some() {
            break cur;
        }
        match &cur.op {
            Op::Permute(_) | Op::Broadcast | Op::Reshape => {
                let input = cur.inputs().into_iter().next()?;
                views.push((cur, input.clone()));
                cur = input;
            }
            Op::Const(_)
            | Op::Slice(_)
            | Op::Pad(..)
            | Op::Roll { .. }
            | Op::Concat(_)
            | Op::Gather { .. } => return None,
            // any other computation is materialized into a C-order buffer
            _ => break cur,
        }
    };
    let mut s = own(&base);
    for (view, src) in views.iter().rev() {
        s = match &view.op {
            Op::Permute(p) => p.iter().map(|&k| s[k]).collect(),
            Op::Broadcast => {
                let off = view.shape.len() - src.shape.len();
                let mut out: Strides = SmallVec::from_elem(0, view.shape.len());
                for (j, &d) in src.shape.iter().enumerate() {
                    if d != 1 {
                        out[j + off] = s[j];
                    }
                }
                out
            }
            // a reshape of the base itself (C-contiguous) is the same buffer
            _ if base.id == src.id => own(view),
            _ => return None,
        };
    }
    Some((base, s))
}

/// The layout of a matrix operand of shape `sh` with element strides `s`, for an output
/// batch of rank `nb`; `None` unless its matrix axes are dense row- or column-major.
fn gemm_operand(sh: &[usize], s: &[usize], nb: usize) -> Option<GemmOperand> {
    let nd = sh.len();
    if nd < 2 || nd - 2 > nb || s.len() != nd {
        return None;
    }
    let (r, c) = (sh[nd - 2], sh[nd - 1]);
    let (rs, cs) = (s[nd - 2], s[nd - 1]);
    let trans = if (c <= 1 || cs == 1) && (r <= 1 || rs == c) {
        false
    } else if (r <= 1 || rs == 1) && (c <= 1 || cs == r) {
        true
    } else {
        return None;
    };
    // the operand's batch axes align with the last ones of the output's
    let mut batch_strides: SmallVec<[usize; 4]> = SmallVec::from_elem(0, nb);
    for j in 0..nd - 2 {
        if sh[j] != 1 {
            batch_strides[nb + j + 2 - nd] = s[j];
        }
    }
    Some(GemmOperand {
        batch_strides,
        trans,
    })
}

/// The node a matmul step reads for `operand` and its layout there: the base when the
/// operand is a free view of it, else the operand itself (materialized, C order).
fn resolve(operand: &Arc<Node>, nb: usize) -> Result<(Arc<Node>, GemmOperand)> {
    if let Some((base, s)) = strided(operand) {
        if let Some(l) = gemm_operand(&operand.shape, &s, nb) {
            return Ok((base, l));
        }
    }
    let s = crate::shape::strides(&operand.shape);
    gemm_operand(&operand.shape, &s, nb)
        .map(|l| (operand.clone(), l))
        .ok_or_else(|| Error::internal("plan", "a C-order matmul operand has no layout"))
}

/// The nodes the library step of `node` reads (to be materialized when not realized):
/// the matmul's bases, or every input of other library nodes.
pub(super) fn library_reads(node: &Arc<Node>) -> Result<Vec<Arc<Node>>> {
    let inputs = node.inputs();
    match node.op {
        Op::MatMul => {
            let nb = batch_rank(&inputs);
            inputs.iter().map(|i| Ok(resolve(i, nb)?.0)).collect()
        }
        _ => Ok(inputs.into_vec()),
    }
}

/// Rank of the broadcast batch of matmul operands.
fn batch_rank(inputs: &[Arc<Node>]) -> usize {
    inputs
        .iter()
        .map(|i| i.shape.len().saturating_sub(2))
        .max()
        .unwrap_or(0)
}

/// The template step computing the matmul node `node`.
pub(super) fn step(node: &Arc<Node>, pos: &HashMap<u64, usize, FxBuild>) -> Result<TStep> {
    let inputs = node.inputs();
    let [x, y] = inputs.as_slice() else {
        return Err(Error::internal("plan", "matmul without two operands"));
    };
    let bad = || {
        Error::internal(
            "plan",
            format!(
                "matmul of shapes {:?} @ {:?} to {:?}",
                x.shape, y.shape, node.shape
            ),
        )
    };
    let (nx, ny) = (x.shape.len(), y.shape.len());
    if nx < 2 || ny < 2 {
        return Err(bad());
    }
    let nb = batch_rank(&inputs);
    let batch =
        crate::shape::broadcast_shapes(&x.shape[..nx - 2], &y.shape[..ny - 2]).ok_or_else(bad)?;
    let (m, k, n) = (x.shape[nx - 2], x.shape[nx - 1], y.shape[ny - 1]);
    if y.shape[ny - 2] != k || batch.iter().product::<usize>() * m * n != node.size() {
        return Err(bad());
    }
    let (ba, la) = resolve(x, nb)?;
    let (bb, lb) = resolve(y, nb)?;
    let spec = GemmSpec {
        dtype: node.dtype,
        batch: batch.into_iter().collect(),
        m,
        n,
        k,
        a: la,
        b: lb,
    };
    let at = |n: &Node| {
        pos.get(&n.id)
            .copied()
            .ok_or_else(|| Error::internal("plan", "matmul operand outside the DAG walk"))
    };
    Ok(TStep::MatMul {
        a: at(&ba)?,
        b: at(&bb)?,
        dst: at(node)?,
        spec: Arc::new(spec),
    })
}
