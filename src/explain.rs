//! Cache-miss explanations for `LAZYFUSE_DEBUG=2`: why a kernel had to be compiled (new
//! structure, dtype, rank, layout class or index width, against the nearest cached kernel)
//! and why a plan missed the plan cache (against the nearest cached plan).

use crate::graph::{Node, Op};
use lazyfuse_codegen::cuda::{entry_name, RenderOptions};
use lazyfuse_codegen::{DType, Inst, Kernel};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// The parts of a kernel's structure a recompile can be blamed on.
#[derive(PartialEq)]
struct Signature {
    /// The computation's op sequence without dtypes (index arithmetic left out).
    ops: Vec<String>,
    /// Dtypes of inputs, outputs and every computed value.
    dtypes: Vec<DType>,
    rank: u8,
    /// The index arithmetic feeding the loads: how views, broadcasts and padding address
    /// the inputs (the layout class).
    addressing: Vec<String>,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn signature(k: &Kernel) -> Signature {
    // Values that feed a load's index or guard are addressing; the rest is computation.
    let mut addr: HashSet<usize> = HashSet::new();
    let mut stack: Vec<usize> = Vec::new();
    for v in &k.values {
        if let Inst::Load { index, guard, .. } = v.inst {
            stack.push(index as usize);
            stack.extend(guard.map(|g| g as usize));
        }
    }
    while let Some(i) = stack.pop() {
        if addr.insert(i) {
            if let Some(v) = k.values.get(i) {
                stack.extend(v.inst.operands().map(|o| o as usize));
            }
        }
    }
    let tag = |inst: &Inst| -> String {
        match inst {
            Inst::Index => "index".into(),
            Inst::Axis(a) => format!("axis{a}"),
            Inst::Param(_) => "param".into(),
            Inst::Const(c) => format!("{c:?}"),
            Inst::Load { guard, .. } => if guard.is_some() { "load?" } else { "load" }.into(),
            Inst::Unary(op, _) => format!("{op:?}"),
            Inst::Binary(op, _, _) => format!("{op:?}"),
            Inst::Where(..) => "where".into(),
            Inst::Cast(_) => "cast".into(),
            Inst::Random(kind, _, _) => format!("random {kind:?}"),
            Inst::Reduced => match k.reduce {
                Some(r) => format!("reduce {} ({:?})", r.op.name(), r.layout),
                None => "reduced".into(),
            },
        }
    };
    let mut ops = Vec::new();
    let mut addressing = Vec::new();
    let mut dtypes: Vec<DType> = k.inputs.iter().chain(&k.outputs).copied().collect();
    for (i, v) in k.values.iter().enumerate() {
        if addr.contains(&i) {
            addressing.push(tag(&v.inst));
        } else if !matches!(v.inst, Inst::Index | Inst::Axis(_)) {
            ops.push(tag(&v.inst));
            dtypes.push(v.dtype);
        }
    }
    Signature {
        ops,
        dtypes,
        rank: k.rank,
        addressing,
    }
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn io_dtypes(k: &Kernel) -> String {
    let list = |d: &[DType]| {
        d.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("({}) -> ({})", list(&k.inputs), list(&k.outputs))
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Positions where two op sequences differ, plus their length difference.
fn op_distance(a: &[String], b: &[String]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len())
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Why `new` (with 32-bit indices when `index32`) is not among `cached`: the most specific
/// of new index width, new dtype, new rank, new layout class, or new structure, naming the
/// nearest cached kernel.
pub(crate) fn kernel_miss<'a>(
    new: &Kernel,
    index32: bool,
    cached: impl Iterator<Item = (&'a Kernel, bool)>,
) -> String {
    let ns = signature(new);
    let name = |k: &Kernel, i32: bool| {
        entry_name(
            k,
            &RenderOptions {
                index32: i32,
                scalar: false,
            },
        )
    };
    let mut best: Option<(usize, String)> = None; // (rank of the reason, text)
    let mut nearest: Option<(usize, String, usize)> = None;
    let mut any = false;
    for (k, k32) in cached {
        any = true;
        if k == new && k32 == index32 {
            continue;
        }
        let cs = signature(k);
        let reason = if k == new {
            Some((
                0,
                format!(
                    "new index width: {} bit indices, {} is cached with {} bit",
                    if index32 { 32 } else { 64 },
                    name(k, k32),
                    if k32 { 32 } else { 64 }
                ),
            ))
        } else if cs.ops == ns.ops {
            let dt = cs.dtypes != ns.dtypes;
            let rk = cs.rank != ns.rank;
            let lay = cs.addressing != ns.addressing;
            let other = name(k, k32);
            match (dt, rk, lay) {
                (true, false, false) => Some((
                    1,
                    format!(
                        "new dtype: same op sequence as {other}, dtypes {} instead of {}",
                        io_dtypes(new),
                        io_dtypes(k)
                    ),
                )),
                (false, true, _) => Some((
                    2,
                    format!(
                        "new rank: {} (same ops and dtypes as {other}, which has rank {})",
                        ns.rank, cs.rank
                    ),
                )),
                (false, false, true) => Some((
                    3,
                    format!(
                        "new layout class: same ops, dtypes and rank as {other}, but the inputs \
                         are addressed differently (views, broadcasts, padding or slicing)"
                    ),
                )),
                (false, false, false) => Some((
                    4,
                    format!("same ops, dtypes, rank and layout as {other} but wired differently"),
                )),
                _ => Some((
                    5,
                    format!(
                        "same op sequence as {other}, but new{}{}{}",
                        if dt { " dtypes" } else { "" },
                        if rk { " rank" } else { "" },
                        if lay { " layout class" } else { "" }
                    ),
                )),
            }
        } else {
            let d = op_distance(&ns.ops, &cs.ops);
            if nearest.as_ref().is_none_or(|n| d < n.0) {
                nearest = Some((d, name(k, k32), cs.ops.len()));
            }
            None
        };
        if let Some((r, text)) = reason {
            if best.as_ref().is_none_or(|b| r < b.0) {
                best = Some((r, text));
            }
        }
    }
    if let Some((_, text)) = best {
        return text;
    }
    match nearest {
        Some((d, other, len)) => format!(
            "new structure: no cached kernel has this op sequence of {} ops (nearest: {other}, \
             {len} ops, {d} differ)",
            ns.ops.len()
        ),
        None if any => "new structure".into(),
        None => "first kernel compiled on this device in this process".into(),
    }
}

// ---------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------

/// Descriptions of the nodes of recently planned structures (`schedule::Plans::nodes`),
/// recorded only at debug level 2 and above so that a miss can say what changed.
fn plan_nodes() -> &'static Mutex<Option<HashMap<Vec<u64>, Vec<String>>>> {
    &crate::schedule::PLANS.nodes
}
const REMEMBER_MAX: usize = 1024;

fn describe(n: &Node) -> String {
    let op = match &n.op {
        Op::Const(_) => "const".to_string(),
        Op::Random(k, _) => format!("random {k:?}"),
        Op::RandomKeyed(k) => format!("random {k:?} (keyed)"),
        Op::Unary(u) => format!("{u:?}"),
        Op::Binary(b) => format!("{b:?}"),
        Op::Fft(spec) => format!("fft {:?} axes={:?}", spec.kind, spec.axes),
        other => format!("{other:?}"),
    };
    let evaluated = if n.buffer().is_some() {
        " (evaluated)"
    } else {
        ""
    };
    format!("{op} {} {:?}{evaluated}", n.dtype, n.shape)
}

/// Records the node descriptions of a new plan's structure `key`.
pub(crate) fn remember_plan(key: &[u64], nodes: &[Arc<Node>]) {
    let mut g = plan_nodes().lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if map.len() >= REMEMBER_MAX {
        map.clear();
    }
    map.insert(key.to_vec(), nodes.iter().map(|n| describe(n)).collect());
}

/// Why the structure `key` of `nodes` is not among `cached` plan keys. Keys are laid out as
/// `schedule::structure_key` writes them: the planning settings, one hash per node (in walk
/// order), then the roots' positions.
pub(crate) fn plan_miss<'a>(
    key: &[u64],
    nodes: &[Arc<Node>],
    cached: impl Iterator<Item = &'a Vec<u64>>,
) -> String {
    let mut same_len: Option<(usize, &Vec<u64>)> = None;
    let mut closest_len: Option<usize> = None;
    let mut count = 0usize;
    for c in cached {
        count += 1;
        if c.len() == key.len() {
            let d = c.iter().zip(key).filter(|(a, b)| a != b).count();
            if same_len.is_none_or(|s| d < s.0) {
                same_len = Some((d, c));
            }
        } else if closest_len.is_none_or(|l| l.abs_diff(key.len()) > c.len().abs_diff(key.len())) {
            closest_len = Some(c.len());
        }
    }
    if count == 0 {
        return "first plan of this process".into();
    }
    let Some((_, other)) = same_len else {
        return format!(
            "new DAG size: {} nodes and roots, no cached plan has as many (nearest has {})",
            key.len() - 1,
            closest_len.map_or(0, |l| l.saturating_sub(1))
        );
    };
    if (other[0] ^ key[0]) & 1 != 0 {
        return format!(
            "fusion is {} now; the cached plan of this structure was made with it {}",
            if key[0] & 1 == 1 { "on" } else { "off" },
            if key[0] & 1 == 1 { "off" } else { "on" }
        );
    }
    if other[0] != key[0] {
        return format!(
            "the FFT backend setting changed (generated passes with fused prologues {} now)",
            if key[0] & 2 != 0 { "on" } else { "off" }
        );
    }
    let remembered = plan_nodes()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(other).cloned());
    let diffs: Vec<usize> = (1..key.len()).filter(|&i| other[i] != key[i]).collect();
    let mut parts = Vec::new();
    for &i in diffs.iter().take(3) {
        match nodes.get(i - 1) {
            Some(n) => {
                let was = remembered
                    .as_ref()
                    .and_then(|r| r.get(i - 1))
                    .map_or_else(String::new, |w| format!(" (cached plan: {w})"));
                parts.push(format!("node {}: {}{was}", i - 1, describe(n)));
            }
            None => parts.push("the roots differ".into()),
        }
    }
    format!(
        "{} of {} nodes differ from the nearest cached plan of the same size (dtype, shape, op \
         or evaluated inputs): {}{}",
        diffs.len(),
        nodes.len(),
        parts.join("; "),
        if diffs.len() > 3 { "; ..." } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazyfuse_codegen::{BinaryOp, Store, UnaryOp, Value};

    fn kernel(dt: DType, rank: u8, op: UnaryOp) -> Kernel {
        let v = |inst, dtype| Value { inst, dtype };
        Kernel {
            rank,
            inputs: vec![dt],
            outputs: vec![dt],
            params: vec![],
            values: vec![
                v(Inst::Index, DType::I64),
                v(
                    Inst::Load {
                        input: 0,
                        index: 0,
                        guard: None,
                    },
                    dt,
                ),
                v(Inst::Unary(op, 1), dt),
                v(Inst::Binary(BinaryOp::Add, 2, 1), dt),
            ],
            stores: vec![Store {
                output: 0,
                value: 3,
            }],
            reduce: None,
        }
    }

    #[test]
    fn names_the_most_specific_reason() {
        let base = kernel(DType::F32, 1, UnaryOp::Sin);
        let none: Vec<(&Kernel, bool)> = Vec::new();
        assert!(kernel_miss(&base, true, none.into_iter()).starts_with("first kernel"));
        let f64k = kernel(DType::F64, 1, UnaryOp::Sin);
        let why = kernel_miss(&f64k, true, [(&base, true)].into_iter());
        assert!(why.starts_with("new dtype"), "{why}");
        assert!(
            why.contains("(float64) -> (float64)") || why.contains("f64"),
            "{why}"
        );
        let r2 = kernel(DType::F32, 2, UnaryOp::Sin);
        let why = kernel_miss(&r2, true, [(&base, true), (&f64k, true)].into_iter());
        assert!(why.starts_with("new rank: 2"), "{why}");
        let why = kernel_miss(&base, false, [(&base, true)].into_iter());
        assert!(why.starts_with("new index width: 64"), "{why}");
        let cos = kernel(DType::F32, 1, UnaryOp::Cos);
        let why = kernel_miss(&cos, true, [(&base, true)].into_iter());
        assert!(why.starts_with("new structure"), "{why}");
        assert!(why.contains("1 differ"), "{why}");
    }
}
