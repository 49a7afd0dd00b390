//! Emission of one kernel: the argument struct, the grid-stride loop(s), the per-element
//! statements for every IR value (NumPy semantics as C expressions) and the stores.

use super::prelude::{self, inf, mfx, sfx, CFn, Helper};
use super::{c_type, ArgLayout, RenderOptions, BLOCK};
use crate::ops::{BinaryOp, RandomKind, UnaryOp};
use crate::{DType, Inst, Kernel, Scalar};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The source of one kernel and its vector width.
pub(super) struct Emitted {
    pub source: String,
    pub per_thread: u32,
}

/// How loads and stores of one element are written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// `in<k>[index]` and `out<k>[i] = v`.
    Scalar,
    /// Lane `j` of the 16-byte vectors `x<k>` / `o<k>` (contiguous kernels only).
    Vector,
}

pub(super) struct Emitter<'a> {
    pub(super) k: &'a Kernel,
    pub(super) helpers: BTreeSet<Helper>,
    /// Vector mode: the `(input, index value)` pairs read through a prefetched lane vector
    /// `pf<input>_<index>` (every other load in vector mode is at the linear index, `x<input>`).
    pub(super) prefetched: BTreeSet<(u32, u32)>,
    /// An input whose loads are the value `lf_v` in scope instead (a fused FFT epilogue's
    /// transform value, [`device_body`]).
    pub(super) value_input: Option<u32>,
}

/// How the vectorized loop of an elementwise kernel reads its inputs.
pub(super) struct VectorPlan {
    /// Elements per thread and iteration (1: no vector loop).
    pub per_thread: u32,
    /// Inputs read at the linear index: one `pt`-element vector per input.
    pub contiguous: BTreeSet<u32>,
    /// Loads at computed indices (pure index arithmetic, always needed): `(input, index)`.
    /// Each thread computes the `pt` lane indices first and reads one vector when they are
    /// consecutive and aligned (a roll or shift between its wrap points, a broadcast along
    /// outer axes), else `pt` scalar loads.
    pub prefetch: BTreeSet<(u32, u32)>,
}

/// The vector plan of `k`: `16 / s` elements per thread, `s` the smallest output element
/// size when it is 4 or 8, when every load is unguarded, needed for every element (not only
/// under one side of a `where`) and at an index computed from the position alone (no loaded
/// value, no random number); else 1. Inputs may have any element size (a `pt`-element
/// vector of a 16-byte type is read as several 16-byte loads).
pub(super) fn vector_plan(k: &Kernel) -> VectorPlan {
    let mut plan = VectorPlan {
        per_thread: 1,
        contiguous: BTreeSet::new(),
        prefetch: BTreeSet::new(),
    };
    let Some(smallest) = k.outputs.iter().map(|d| d.size()).min() else {
        return plan;
    };
    if k.rank == 0 || !(smallest == 4 || smallest == 8) {
        return plan;
    }
    let index = k.values.iter().position(|v| v.inst == Inst::Index);
    let roots: Vec<u32> = k.stores.iter().map(|s| s.value).collect();
    let live = live_from(k, &roots, Mode::Scalar);
    let regions = Regions::of(k, &live, Mode::Scalar, &roots);
    let mut always = vec![false; k.values.len()];
    for &id in &regions.members[0] {
        always[id] = true;
    }
    let positional = positional(k);
    for (id, v) in k.values.iter().enumerate() {
        let Inst::Load {
            input,
            index: ix,
            guard,
        } = v.inst
        else {
            continue;
        };
        if !live[id] {
            continue;
        }
        if guard.is_none() && Some(ix as usize) == index {
            plan.contiguous.insert(input);
        } else if guard.is_none() && always[id] && positional[ix as usize] {
            plan.prefetch.insert((input, ix));
        } else {
            return plan;
        }
    }
    plan.per_thread = (16 / smallest) as u32;
    plan
}

/// Per value: whether it is computed from the element's position alone (no loaded value, no
/// random number, no reduction result): an index that can be computed ahead of the loads.
pub(super) fn positional(k: &Kernel) -> Vec<bool> {
    let mut positional = vec![false; k.values.len()];
    for (id, v) in k.values.iter().enumerate() {
        positional[id] = match v.inst {
            Inst::Load { .. } | Inst::Random(..) | Inst::Reduced => false,
            inst => inst.operands().all(|o| positional[o as usize]),
        };
    }
    positional
}

/// The inputs some load reads, in order.
pub(super) fn loaded_inputs(k: &Kernel) -> BTreeSet<u32> {
    k.values
        .iter()
        .filter_map(|v| match v.inst {
            Inst::Load { input, .. } => Some(input),
            _ => None,
        })
        .collect()
}

/// Renders the whole source of `k` (already validated and normalized).
pub(super) fn emit(k: &Kernel, opts: &RenderOptions, layout: &ArgLayout, entry: &str) -> Emitted {
    match k.reduce {
        Some(r) if r.layout == crate::ops::ReduceLayout::Scan => {
            return super::scan::emit(k, opts, layout, entry)
        }
        Some(_) => return super::reduce::emit(k, opts, layout, entry),
        None => {}
    }
    let plan = if opts.scalar {
        VectorPlan {
            per_thread: 1,
            contiguous: BTreeSet::new(),
            prefetch: BTreeSet::new(),
        }
    } else {
        vector_plan(k)
    };
    let pt = plan.per_thread;
    let mut e = Emitter {
        k,
        helpers: BTreeSet::new(),
        prefetched: plan.prefetch.clone(),
        value_input: None,
    };
    let used_inputs = loaded_inputs(k);
    let axes: BTreeSet<u8> = k
        .values
        .iter()
        .filter_map(|v| match v.inst {
            Inst::Axis(a) => Some(a),
            _ => None,
        })
        .collect();
    e.complex_types();
    let roots: Vec<u32> = k.stores.iter().map(|s| s.value).collect();

    // Kernel body first: it collects the helpers the source must define.
    let mut body = String::new();
    let w = &mut body;
    let _ = writeln!(w, "  const IDX n = (IDX)a.n;");
    let _ = writeln!(
        w,
        "  const IDX tid = (IDX)blockIdx.x * (IDX)blockDim.x + (IDX)threadIdx.x;"
    );
    let _ = writeln!(w, "  const IDX stride = (IDX)gridDim.x * (IDX)blockDim.x;");
    for &i in &used_inputs {
        let t = c_type(k.inputs[i as usize]);
        let _ = writeln!(w, "  const {t}* __restrict__ in{i} = a.in{i};");
    }
    for (o, &d) in k.outputs.iter().enumerate() {
        let _ = writeln!(w, "  {}* __restrict__ out{o} = a.out{o};", c_type(d));
    }
    let min_axis = axes.first().copied();
    if let Some(m) = min_axis {
        for s in m.max(1)..k.rank {
            let _ = writeln!(w, "  const IDX s{s} = (IDX)a.shape[{s}];");
        }
    }
    let mut vt: BTreeSet<(DType, u32)> = BTreeSet::new();
    if pt > 1 {
        let _ = writeln!(w, "  const IDX nvec = n / {pt};");
        let _ = writeln!(w, "  for (IDX q = tid; q < nvec; q += stride) {{");
        for &i in &plan.contiguous {
            let d = k.inputs[i as usize];
            vt.insert((d, pt));
            let v = vec_n_type(d, pt);
            let _ = writeln!(w, "    const {v} x{i} = ((const {v}*)in{i})[q];");
        }
        if !plan.prefetch.is_empty() {
            e.prefetch(&plan, "    ", opts, w);
            for &(i, _) in &plan.prefetch {
                vt.insert((k.inputs[i as usize], pt));
            }
        }
        for (o, &d) in k.outputs.iter().enumerate() {
            vt.insert((d, pt));
            let _ = writeln!(w, "    {} o{o};", vec_n_type(d, pt));
        }
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "    for (int j = 0; j < {pt}; ++j) {{");
        let live = live_from(k, &roots, Mode::Vector);
        let lane_axes = used_axes(k, &live);
        let lane_index = !lane_axes.is_empty()
            || k.values
                .iter()
                .zip(&live)
                .any(|(v, &l)| l && v.inst == Inst::Index);
        if lane_index {
            let _ = writeln!(w, "      const IDX i = q * {pt} + (IDX)j;");
        }
        e.element(Mode::Vector, "      ", &lane_axes, &roots, opts, w);
        e.stores(Mode::Vector, "      ", w);
        let _ = writeln!(w, "    }}");
        for (o, &d) in k.outputs.iter().enumerate() {
            let v = vec_n_type(d, pt);
            let _ = writeln!(w, "    (({v}*)out{o})[q] = o{o};");
        }
        let _ = writeln!(w, "  }}");
        let _ = writeln!(
            w,
            "  for (IDX i = nvec * {pt} + tid; i < n; i += stride) {{"
        );
    } else {
        let _ = writeln!(w, "  for (IDX i = tid; i < n; i += stride) {{");
    }
    e.element(Mode::Scalar, "    ", &axes, &roots, opts, w);
    e.stores(Mode::Scalar, "    ", w);
    let _ = writeln!(w, "  }}");

    // Assemble.
    let mut src = String::new();
    let s = &mut src;
    let _ = writeln!(s, "// Generated by lazyfuse-codegen. Entry {entry}, {BLOCK} threads per block, {pt} element(s) per thread and iteration.");
    assemble(k, opts, layout, entry, &e.helpers, "", &vt, &body, s);
    Emitted {
        source: src,
        per_thread: pt,
    }
}

/// The statements of `k` (validated, normalized, elementwise) computing its stored values
/// for one element, as the body of a device function: the caller has `a` (a reference to
/// `k`'s argument struct) and `i` (the element's linear index, an `IDX`) in scope. Declares
/// the input pointers and shape extents it reads, then the values; the stored ones are
/// `v<id>` of `k.stores`. Returns the statements and the helpers they call.
pub(super) fn device_body(
    k: &Kernel,
    opts: &RenderOptions,
    ind: &str,
    value_input: Option<u32>,
) -> (String, BTreeSet<Helper>) {
    let mut e = Emitter {
        k,
        helpers: BTreeSet::new(),
        prefetched: BTreeSet::new(),
        value_input,
    };
    e.complex_types();
    let roots: Vec<u32> = k.stores.iter().map(|s| s.value).collect();
    let live = live_from(k, &roots, Mode::Scalar);
    let axes = used_axes(k, &live);
    let mut w = String::new();
    for &i in loaded_inputs(k).iter().filter(|&&i| Some(i) != value_input) {
        let t = c_type(k.inputs[i as usize]);
        let _ = writeln!(w, "{ind}const {t}* __restrict__ in{i} = a.in{i};");
    }
    if let Some(&m) = axes.first() {
        for s in m.max(1)..k.rank {
            let _ = writeln!(w, "{ind}const IDX s{s} = (IDX)a.shape[{s}];");
        }
    }
    e.element(Mode::Scalar, ind, &axes, &roots, opts, &mut w);
    (w, e.helpers)
}

/// The axes the live values read.
fn used_axes(k: &Kernel, live: &[bool]) -> BTreeSet<u8> {
    k.values
        .iter()
        .zip(live)
        .filter_map(|(v, &l)| match v.inst {
            Inst::Axis(a) if l => Some(a),
            _ => None,
        })
        .collect()
}

/// Writes the rest of a kernel's source after its first comment line: the IR as comments,
/// the index type, the helpers, `extra` definitions, the 16-byte vector structs of `vectors`,
/// the argument struct and the entry wrapping `body`.
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble(
    k: &Kernel,
    opts: &RenderOptions,
    layout: &ArgLayout,
    entry: &str,
    helpers: &BTreeSet<Helper>,
    extra: &str,
    vectors: &BTreeSet<(DType, u32)>,
    body: &str,
    s: &mut String,
) {
    let _ = writeln!(s, "// Self-contained: no headers. Kernel IR:");
    for line in k.to_string().lines() {
        let _ = writeln!(s, "//   {line}");
    }
    let idx = if opts.index32 {
        "unsigned int"
    } else {
        "unsigned long long"
    };
    let _ = writeln!(s, "typedef {idx} IDX;");
    prelude::emit_helpers(helpers, s);
    s.push_str(extra);
    for &(d, n) in vectors {
        let _ = writeln!(
            s,
            "struct __align__({}) {} {{ {} v[{n}]; }};",
            (d.size() * n as usize).min(16),
            vec_n_type(d, n),
            c_type(d),
        );
    }
    let _ = writeln!(s, "struct lf_args {{");
    for f in &layout.fields {
        let _ = writeln!(s, "  {}; /* offset {} */", f.decl, f.offset);
    }
    let _ = writeln!(s, "}}; /* {} bytes, align {} */", layout.size, layout.align);
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {entry}(const lf_args a) {{"
    );
    s.push_str(body);
    let _ = writeln!(s, "}}");
}

/// The values `roots` need in `mode` (vector lanes read no load index: contiguous loads are
/// at the lane's position and prefetched ones computed their indices before the lane loop).
fn live_from(k: &Kernel, roots: &[u32], mode: Mode) -> Vec<bool> {
    let mut live = vec![false; k.values.len()];
    for &r in roots {
        live[r as usize] = true;
    }
    for i in (0..k.values.len()).rev() {
        if !live[i] {
            continue;
        }
        match (mode, k.values[i].inst) {
            (Mode::Vector, Inst::Load { .. }) => {}
            (_, inst) => {
                for o in inst.operands() {
                    live[o as usize] = true;
                }
            }
        }
    }
    live
}

/// Guarded evaluation: where each live value is needed. Region 0 is "always"; a `Where`
/// at region `R` opens one child region per operand it selects, holding the values needed
/// only when that operand is chosen (values needed in several regions live in their lowest
/// common ancestor). A `Where` with a non-empty child region is emitted as a branch, so a
/// pad, a concatenation or a `where_` computes only the live side for each element.
struct Regions {
    /// Per region: its parent and depth (region 0 is its own parent).
    parent: Vec<(usize, u32)>,
    /// Per region: the live values in it, in order.
    members: Vec<Vec<usize>>,
    /// Per value that is a `Where`: its (true, false) child regions, when created.
    children: Vec<(Option<usize>, Option<usize>)>,
}

impl Regions {
    fn of(k: &Kernel, live: &[bool], mode: Mode, roots: &[u32]) -> Regions {
        let n = k.values.len();
        let mut g = Regions {
            parent: vec![(0, 0)],
            members: vec![Vec::new()],
            children: vec![(None, None); n],
        };
        let mut at: Vec<Option<usize>> = vec![None; n];
        for &r in roots {
            at[r as usize] = Some(0);
        }
        for id in (0..n).rev() {
            if !live[id] {
                continue;
            }
            let Some(r) = at[id] else { continue };
            match (mode, k.values[id].inst) {
                (Mode::Vector, Inst::Load { .. }) => {}
                (_, Inst::Where(c, a, b)) => {
                    at[c as usize] = Some(g.join(at[c as usize], r));
                    let rt = g.child(r);
                    let rf = g.child(r);
                    g.children[id] = (Some(rt), Some(rf));
                    at[a as usize] = Some(g.join(at[a as usize], rt));
                    at[b as usize] = Some(g.join(at[b as usize], rf));
                }
                (_, inst) => {
                    for o in inst.operands() {
                        at[o as usize] = Some(g.join(at[o as usize], r));
                    }
                }
            }
        }
        for id in 0..n {
            if let (true, Some(r)) = (live[id], at[id]) {
                g.members[r].push(id);
            }
        }
        // Branch only where a side holds real work (a load, a transcendental, a random
        // number, a division: cost >= 4); a side of a few adds, compares or parameters is
        // cheaper as a select, so its values move back into the parent region. Innermost
        // regions first (children are created after their parents).
        let mut cost = vec![0u32; g.parent.len()];
        for r in (1..g.parent.len()).rev() {
            let own: u32 = g.members[r].iter().map(|&id| value_cost(k, id)).sum();
            cost[r] += own;
            if cost[r] < 4 {
                let parent = g.parent[r].0;
                let moved = std::mem::take(&mut g.members[r]);
                g.members[parent].extend(moved);
            }
            let parent = g.parent[r].0;
            cost[parent] += cost[r];
        }
        for m in &mut g.members {
            m.sort_unstable();
        }
        for c in &mut g.children {
            for side in [&mut c.0, &mut c.1] {
                if side.is_some_and(|r| g.members[r].is_empty()) {
                    *side = None;
                }
            }
        }
        g
    }

    fn child(&mut self, r: usize) -> usize {
        let depth = self.parent[r].1 + 1;
        self.parent.push((r, depth));
        self.members.push(Vec::new());
        self.parent.len() - 1
    }

    /// The lowest common ancestor of `a` (when set) and `b`.
    fn join(&self, a: Option<usize>, b: usize) -> usize {
        let Some(mut a) = a else { return b };
        let mut b = b;
        while a != b {
            if self.parent[a].1 >= self.parent[b].1 {
                a = self.parent[a].0;
            } else {
                b = self.parent[b].0;
            }
        }
        a
    }

    /// The (true, false) regions of the `Where` at `id` when it is emitted as a branch.
    fn branches(&self, id: usize) -> Option<(Option<usize>, Option<usize>)> {
        match self.children[id] {
            (None, None) => None,
            c => Some(c),
        }
    }
}

/// A rough cost of computing value `id` once, for deciding whether a side of a `where` is
/// worth a branch.
fn value_cost(k: &Kernel, id: usize) -> u32 {
    use BinaryOp::*;
    let v = &k.values[id];
    match v.inst {
        Inst::Index | Inst::Axis(_) | Inst::Param(_) | Inst::Const(_) | Inst::Reduced => 0,
        Inst::Load { .. } | Inst::Random(..) => 4,
        Inst::Unary(op, _) => match op {
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Not
            | UnaryOp::Real
            | UnaryOp::Imag
            | UnaryOp::Conj
            | UnaryOp::Square
            | UnaryOp::IsNan
            | UnaryOp::IsInf
            | UnaryOp::IsFinite
            | UnaryOp::Sign => 1,
            _ => 4,
        },
        Inst::Binary(op, _, _) => match op {
            Div | FloorDiv | Mod | IdxDiv | IdxMod | Pow | Atan2 | Hypot => 4,
            _ if v.dtype.is_complex() => 2,
            _ => 1,
        },
        Inst::Where(..) | Inst::Cast(_) => 1,
    }
}

/// The 16-byte vector struct of an element type.
pub(super) fn vec_type(d: DType) -> String {
    format!("lf_vec_{}", sfx(d))
}

/// The struct of `n` elements of `d` (the 16-byte one when that is its size), aligned to its
/// size up to 16 bytes.
pub(super) fn vec_n_type(d: DType, n: u32) -> String {
    if d.size() * n as usize == 16 {
        vec_type(d)
    } else {
        format!("lf_vec{n}_{}", sfx(d))
    }
}

impl Emitter<'_> {
    /// Includes the struct of every complex dtype the kernel's buffers, parameters or
    /// values use.
    pub(super) fn complex_types(&mut self) {
        let k = self.k;
        for d in k
            .inputs
            .iter()
            .chain(&k.outputs)
            .chain(&k.params)
            .chain(k.values.iter().map(|v| &v.dtype))
        {
            if d.is_complex() {
                self.helpers.insert(Helper::CType(*d));
            }
        }
    }

    /// Writes the statements computing `roots` for one element with linear index `i` (an
    /// `IDX` in scope).
    fn element(
        &mut self,
        mode: Mode,
        ind: &str,
        axes: &BTreeSet<u8>,
        roots: &[u32],
        opts: &RenderOptions,
        w: &mut String,
    ) {
        // Axis components from the innermost outward, down to the outermost one used.
        if let Some(&m) = axes.first() {
            let mut prev = "i".to_string();
            for ax in (m..self.k.rank).rev() {
                if ax == 0 {
                    let _ = writeln!(w, "{ind}const IDX ax0 = {prev};");
                } else if ax == m {
                    let _ = writeln!(w, "{ind}const IDX ax{ax} = {prev} % s{ax};");
                } else {
                    let _ = writeln!(w, "{ind}const IDX t{ax} = {prev} / s{ax};");
                    if axes.contains(&ax) {
                        let _ = writeln!(w, "{ind}const IDX ax{ax} = {prev} - t{ax} * s{ax};");
                    }
                    prev = format!("t{ax}");
                }
            }
        }
        let live = live_from(self.k, roots, mode);
        let regions = Regions::of(self.k, &live, mode, roots);
        self.region(0, &regions, mode, ind, opts, w);
    }

    /// Writes the stores of one element (after [`Emitter::element`]).
    fn stores(&self, mode: Mode, ind: &str, w: &mut String) {
        for st in &self.k.stores {
            match mode {
                Mode::Scalar => {
                    let _ = writeln!(w, "{ind}out{}[i] = v{};", st.output, st.value);
                }
                Mode::Vector => {
                    let _ = writeln!(w, "{ind}o{}.v[j] = v{};", st.output, st.value);
                }
            }
        }
    }

    /// Writes the values of region `r` in order; a `Where` that owns regions becomes a
    /// branch that computes only the chosen operand's region.
    fn region(
        &mut self,
        r: usize,
        regions: &Regions,
        mode: Mode,
        ind: &str,
        opts: &RenderOptions,
        w: &mut String,
    ) {
        // sin and cos of one real value in this region share one range reduction
        let mut trig: std::collections::HashMap<u32, (bool, bool)> = Default::default();
        for &id in &regions.members[r] {
            let v = self.k.values[id];
            if let (Inst::Unary(op @ (UnaryOp::Sin | UnaryOp::Cos), a), true) =
                (v.inst, v.dtype.is_float())
            {
                let e = trig.entry(a).or_default();
                if op == UnaryOp::Sin {
                    e.0 = true;
                } else {
                    e.1 = true;
                }
            }
        }
        let mut shared: BTreeSet<u32> = BTreeSet::new();
        for &id in &regions.members[r] {
            let v = self.k.values[id];
            let t = c_type(v.dtype);
            if let Inst::Unary(op @ (UnaryOp::Sin | UnaryOp::Cos), a) = v.inst {
                if trig.get(&a) == Some(&(true, true)) {
                    if shared.insert(a) {
                        let f = mfx(v.dtype);
                        let _ = writeln!(
                            w,
                            "{ind}{t} lf_sin{a}, lf_cos{a}; sincos{f}(v{a}, &lf_sin{a}, &lf_cos{a});"
                        );
                    }
                    let which = if op == UnaryOp::Sin { "sin" } else { "cos" };
                    let _ = writeln!(w, "{ind}const {t} v{id} = lf_{which}{a};");
                    continue;
                }
            }
            match (v.inst, regions.branches(id)) {
                (Inst::Where(c, a, b), Some((rt, rf))) => {
                    let inner = format!("{ind}  ");
                    let _ = writeln!(w, "{ind}{t} v{id};");
                    let _ = writeln!(w, "{ind}if (v{c}) {{");
                    if let Some(rt) = rt {
                        self.region(rt, regions, mode, &inner, opts, w);
                    }
                    let _ = writeln!(w, "{inner}v{id} = v{a};");
                    let _ = writeln!(w, "{ind}}} else {{");
                    if let Some(rf) = rf {
                        self.region(rf, regions, mode, &inner, opts, w);
                    }
                    let _ = writeln!(w, "{inner}v{id} = v{b};");
                    let _ = writeln!(w, "{ind}}}");
                }
                _ => {
                    let expr = self.value(v.inst, v.dtype, mode, opts);
                    let _ = writeln!(w, "{ind}const {t} v{id} = {expr};");
                }
            }
        }
    }

    /// Vector loop, before the lanes: the lane indices of every prefetched load (`ix<v>[j]`),
    /// then per load one vector read when they are consecutive and start on a vector
    /// boundary (`ct<v>`), else one read per lane.
    fn prefetch(&mut self, plan: &VectorPlan, ind: &str, opts: &RenderOptions, w: &mut String) {
        let pt = plan.per_thread;
        let k = self.k;
        let indices: BTreeSet<u32> = plan.prefetch.iter().map(|&(_, ix)| ix).collect();
        let roots: Vec<u32> = indices.iter().copied().collect();
        for &ix in &indices {
            let _ = writeln!(w, "{ind}long long ix{ix}[{pt}];");
        }
        let live = live_from(k, &roots, Mode::Scalar);
        let axes = used_axes(k, &live);
        let inner = format!("{ind}  ");
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "{ind}for (int j = 0; j < {pt}; ++j) {{");
        if !axes.is_empty()
            || k.values
                .iter()
                .zip(&live)
                .any(|(v, &l)| l && v.inst == Inst::Index)
        {
            let _ = writeln!(w, "{inner}const IDX i = q * {pt} + (IDX)j;");
        }
        self.element(Mode::Scalar, &inner, &axes, &roots, opts, w);
        for &ix in &indices {
            let _ = writeln!(w, "{inner}ix{ix}[j] = v{ix};");
        }
        let _ = writeln!(w, "{ind}}}");
        self.vector_reads(pt, &plan.prefetch, &BTreeSet::new(), ind, w);
    }

    /// After the lane indices `ix<v>[j]` of `loads` (`(input, index value)`) are computed:
    /// per index whether its `pt` lanes are consecutive from a vector boundary (`ct<v>`),
    /// and per load the vector `pf<input>_<v>`, read whole when they are, else lane by lane.
    /// The indices in `consecutive` are known to step by one from lane to lane (only the
    /// first lane's is read).
    pub(super) fn vector_reads(
        &self,
        pt: u32,
        loads: &BTreeSet<(u32, u32)>,
        consecutive: &BTreeSet<u32>,
        ind: &str,
        w: &mut String,
    ) {
        let indices: BTreeSet<u32> = loads.iter().map(|&(_, ix)| ix).collect();
        for &ix in &indices {
            let mut c = format!("(ix{ix}[0] & {}) == 0", pt - 1);
            if !consecutive.contains(&ix) {
                for j in 1..pt {
                    let _ = write!(c, " && ix{ix}[{j}] == ix{ix}[0] + {j}");
                }
            }
            let _ = writeln!(w, "{ind}const bool ct{ix} = {c};");
        }
        for &(input, ix) in loads {
            let v = vec_n_type(self.k.inputs[input as usize], pt);
            let name = format!("pf{input}_{ix}");
            let _ = writeln!(w, "{ind}{v} {name};");
            let _ = writeln!(w, "{ind}if (ct{ix}) {{");
            let _ = writeln!(w, "{ind}  {name} = *(const {v}*)(in{input} + ix{ix}[0]);");
            let _ = writeln!(w, "{ind}}} else {{");
            let _ = writeln!(w, "#pragma unroll");
            let lane = if consecutive.contains(&ix) {
                format!("ix{ix}[0] + j")
            } else {
                format!("ix{ix}[j]")
            };
            let _ = writeln!(
                w,
                "{ind}  for (int j = 0; j < {pt}; ++j) {name}.v[j] = in{input}[{lane}];"
            );
            let _ = writeln!(w, "{ind}}}");
        }
    }

    fn dtype(&self, v: u32) -> DType {
        self.k.values[v as usize].dtype
    }

    /// The C expression of one value.
    pub(super) fn value(
        &mut self,
        inst: Inst,
        dtype: DType,
        mode: Mode,
        opts: &RenderOptions,
    ) -> String {
        let n = |v: u32| format!("v{v}");
        match inst {
            Inst::Index => "(long long)i".into(),
            Inst::Reduced => "acc_result".into(),
            Inst::Axis(a) => format!("(long long)ax{a}"),
            Inst::Param(p) => format!("a.p{p}"),
            Inst::Const(s) => literal(&s),
            Inst::Load { input, .. } if self.value_input == Some(input) => "lf_v".into(),
            Inst::Load {
                input,
                index,
                guard,
            } => match (mode, guard) {
                (Mode::Vector, _) if self.prefetched.contains(&(input, index)) => {
                    format!("pf{input}_{index}.v[j]")
                }
                (Mode::Vector, _) => format!("x{input}.v[j]"),
                (Mode::Scalar, None) => format!("in{input}[{}]", n(index)),
                (Mode::Scalar, Some(g)) => format!(
                    "{} ? in{input}[{}] : {}",
                    n(g),
                    n(index),
                    literal(&Scalar::zero(dtype))
                ),
            },
            Inst::Unary(op, a) => self.unary(op, self.dtype(a), &n(a)),
            Inst::Binary(op, a, b) => self.binary(op, self.dtype(a), &n(a), &n(b), opts),
            Inst::Where(c, a, b) => format!("{} ? {} : {}", n(c), n(a), n(b)),
            Inst::Cast(a) => self.cast(self.dtype(a), dtype, &n(a)),
            Inst::Random(kind, ctr, seed) => {
                let args = format!(
                    "(unsigned long long){}, (unsigned long long){}",
                    n(ctr),
                    n(seed)
                );
                match (kind, dtype) {
                    (RandomKind::Uniform, DType::F32) => {
                        self.helpers.insert(Helper::UniformF32);
                        format!("lf_uniform_f32({args})")
                    }
                    (RandomKind::Uniform, _) => {
                        self.helpers.insert(Helper::UniformF64);
                        format!("lf_uniform_f64({args})")
                    }
                    (RandomKind::Normal, DType::F32) => {
                        self.helpers.insert(Helper::NormalF64);
                        format!("(float)lf_normal_f64({args})")
                    }
                    (RandomKind::Normal, _) => {
                        self.helpers.insert(Helper::NormalF64);
                        format!("lf_normal_f64({args})")
                    }
                }
            }
        }
    }

    /// Calls complex helper `f` of dtype `d` on `args`.
    fn cfn(&mut self, f: CFn, d: DType, name: &str, args: &str) -> String {
        self.helpers.insert(Helper::C(f, d));
        format!("lf_{name}_{}({args})", sfx(d))
    }

    /// `op(a)` for an operand of dtype `d`.
    fn unary(&mut self, op: UnaryOp, d: DType, a: &str) -> String {
        use UnaryOp::*;
        let f = mfx(d);
        let ct = c_type(d);
        if d.is_complex() {
            let r = c_type(d.real());
            let c = |s: &mut Self, g, name| s.cfn(g, d, name, a);
            return match op {
                Neg => format!("{ct}{{-{a}.re, -{a}.im}}"),
                Conj => format!("{ct}{{{a}.re, -{a}.im}}"),
                Abs if d == DType::C128 => {
                    self.helpers.insert(Helper::HypotF64);
                    format!("lf_hypot_f64({a}.re, {a}.im)")
                }
                Abs => format!("hypot{f}({a}.re, {a}.im)"),
                Real => format!("{a}.re"),
                Imag => format!("{a}.im"),
                Angle => format!("atan2{f}({a}.im, {a}.re)"),
                IsNan => format!("({a}.re != {a}.re || {a}.im != {a}.im)"),
                IsInf => {
                    let i = inf(d);
                    format!("(fabs{f}({a}.re) == {i} || fabs{f}({a}.im) == {i})")
                }
                IsFinite => {
                    let i = inf(d);
                    format!("(fabs{f}({a}.re) < {i} && fabs{f}({a}.im) < {i})")
                }
                Square => c(self, CFn::Square, "square"),
                Reciprocal => c(self, CFn::Recip, "recip"),
                Sqrt => c(self, CFn::Sqrt, "sqrt"),
                Rsqrt => c(self, CFn::Rsqrt, "rsqrt"),
                Exp => c(self, CFn::Exp, "exp"),
                Expm1 => c(self, CFn::Expm1, "expm1"),
                Log => c(self, CFn::Log, "log"),
                Log1p => c(self, CFn::Log1p, "log1p"),
                Log2 => c(self, CFn::Log2, "log2"),
                Log10 => c(self, CFn::Log10, "log10"),
                Sin => c(self, CFn::Sin, "sin"),
                Cos => c(self, CFn::Cos, "cos"),
                Tan => c(self, CFn::Tan, "tan"),
                Asin => c(self, CFn::Asin, "asin"),
                Acos => c(self, CFn::Acos, "acos"),
                Atan => c(self, CFn::Atan, "atan"),
                Sinh => c(self, CFn::Sinh, "sinh"),
                Cosh => c(self, CFn::Cosh, "cosh"),
                Tanh => c(self, CFn::Tanh, "tanh"),
                Sign => c(self, CFn::Sign, "sign"),
                // Rejected by validation (no complex Not/Floor/Ceil/Round/Trunc).
                Not | Floor | Ceil | Round | Trunc => format!("/* invalid {} */ {r}(0)", op.name()),
            };
        }
        if d.is_float() {
            let one = if d == DType::F32 { "1.0f" } else { "1.0" };
            let mul = if d == DType::F32 {
                "__fmul_rn"
            } else {
                "__dmul_rn"
            };
            return match op {
                Neg => format!("-{a}"),
                Abs => format!("fabs{f}({a})"),
                Sqrt | Exp | Expm1 | Log | Log1p | Log2 | Log10 | Sin | Cos | Tan | Asin | Acos
                | Atan | Sinh | Cosh | Tanh | Floor | Ceil | Trunc => {
                    format!("{}{f}({a})", c_math_name(op))
                }
                Round => format!("rint{f}({a})"),
                Rsqrt => format!("{one} / sqrt{f}({a})"),
                Reciprocal => format!("{one} / {a}"),
                Square => format!("{mul}({a}, {a})"),
                Sign => {
                    self.helpers.insert(Helper::FloatSign(d));
                    format!("lf_sign_{}({a})", sfx(d))
                }
                Real | Conj => a.to_string(),
                Imag => format!("({ct})0"),
                Angle => format!("atan2{f}(({ct})0, {a})"),
                IsNan => format!("{a} != {a}"),
                IsInf => format!("fabs{f}({a}) == {}", inf(d)),
                IsFinite => format!("fabs{f}({a}) < {}", inf(d)),
                Not => format!("/* invalid */ !{a}"),
            };
        }
        if d.is_unsigned() {
            let u = unsigned(d);
            return match op {
                Neg => format!("({ct})(({u})0 - ({u}){a})"),
                Abs | Real | Conj => a.to_string(),
                Sign => format!("({ct})({a} > 0)"),
                Square => format!("({ct})(({u}){a} * ({u}){a})"),
                Imag => format!("({ct})0"),
                IsNan | IsInf => "false".into(),
                IsFinite => "true".into(),
                _ => format!("/* invalid {} */ ({ct})0", op.name()),
            };
        }
        if d.is_int() {
            let u = unsigned(d);
            return match op {
                Neg => format!("({ct})(({u})0 - ({u}){a})"),
                Abs => format!("{a} < 0 ? ({ct})(({u})0 - ({u}){a}) : {a}"),
                Sign => format!("({ct})(({a} > 0) - ({a} < 0))"),
                Square => format!("({ct})(({u}){a} * ({u}){a})"),
                Real | Conj => a.to_string(),
                Imag => format!("({ct})0"),
                IsNan | IsInf => "false".into(),
                IsFinite => "true".into(),
                _ => format!("/* invalid {} */ ({ct})0", op.name()),
            };
        }
        // Bool
        match op {
            Not => format!("!{a}"),
            Conj => a.to_string(),
            IsNan | IsInf => "false".into(),
            IsFinite => "true".into(),
            _ => format!("/* invalid {} */ false", op.name()),
        }
    }

    /// `op(a, b)` for operands of dtype `d`.
    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        d: DType,
        a: &str,
        b: &str,
        opts: &RenderOptions,
    ) -> String {
        use BinaryOp::*;
        let ct = c_type(d);
        let s = sfx(d);
        let f = mfx(d);
        match op {
            Eq | Ne | Lt | Le | Gt | Ge if !d.is_complex() => {
                let o = match op {
                    Eq => "==",
                    Ne => "!=",
                    Lt => "<",
                    Le => "<=",
                    Gt => ">",
                    _ => ">=",
                };
                return format!("{a} {o} {b}");
            }
            Complex => {
                let c = c_type(d.to_complex());
                return format!("{c}{{{a}, {b}}}");
            }
            IdxDiv | IdxMod => {
                let o = if op == IdxDiv { "/" } else { "%" };
                return if opts.index32 {
                    format!("{b} == 0 ? 0LL : (long long)((IDX){a} {o} (IDX){b})")
                } else {
                    format!("{b} == 0 ? 0LL : {a} {o} {b}")
                };
            }
            _ => {}
        }
        if d.is_complex() {
            return match op {
                Add => self.cfn(CFn::Add, d, "add", &format!("{a}, {b}")),
                Sub => self.cfn(CFn::Sub, d, "sub", &format!("{a}, {b}")),
                Mul => self.cfn(CFn::Mul, d, "mul", &format!("{a}, {b}")),
                Div => self.cfn(CFn::Div, d, "div", &format!("{a}, {b}")),
                Pow => self.cfn(CFn::Pow, d, "pow", &format!("{a}, {b}")),
                Eq => self.cfn(CFn::Eq, d, "eq", &format!("{a}, {b}")),
                Ne => self.cfn(CFn::Ne, d, "ne", &format!("{a}, {b}")),
                _ => format!("/* invalid {} */ {ct}{{0, 0}}", op.name()),
            };
        }
        if d.is_float() {
            let mul = if d == DType::F32 {
                "__fmul_rn"
            } else {
                "__dmul_rn"
            };
            return match op {
                Add => format!("{a} + {b}"),
                Sub => format!("{a} - {b}"),
                // Never contracted into an FMA: every IR op rounds once, as NumPy does.
                Mul => format!("{mul}({a}, {b})"),
                Div => format!("{a} / {b}"),
                FloorDiv => {
                    self.helpers.insert(Helper::FloatFloorDiv(d));
                    format!("lf_floordiv_{s}({a}, {b})")
                }
                Mod => {
                    self.helpers.insert(Helper::FloatMod(d));
                    format!("lf_mod_{s}({a}, {b})")
                }
                Pow => format!("pow{f}({a}, {b})"),
                Atan2 => format!("atan2{f}({a}, {b})"),
                Hypot if d == DType::F64 => {
                    self.helpers.insert(Helper::HypotF64);
                    format!("lf_hypot_f64({a}, {b})")
                }
                Hypot => format!("hypot{f}({a}, {b})"),
                // NumPy returns the second operand on ties (maximum(0.0, -0.0) is -0.0).
                Maximum => format!("({a} > {b} || {a} != {a}) ? {a} : {b}"),
                Minimum => format!("({a} < {b} || {a} != {a}) ? {a} : {b}"),
                _ => format!("/* invalid {} */ ({ct})0", op.name()),
            };
        }
        if d.is_int() {
            let u = unsigned(d);
            let wrap = |o: &str| format!("({ct})(({u}){a} {o} ({u}){b})");
            return match op {
                Add => wrap("+"),
                Sub => wrap("-"),
                Mul => wrap("*"),
                FloorDiv => {
                    self.helpers.insert(Helper::IntFloorDiv(d));
                    format!("lf_floordiv_{s}({a}, {b})")
                }
                Mod => {
                    self.helpers.insert(Helper::IntMod(d));
                    format!("lf_mod_{s}({a}, {b})")
                }
                Pow => {
                    self.helpers.insert(Helper::IntPow(d));
                    format!("lf_pow_{s}({a}, {b})")
                }
                Maximum => format!("{a} >= {b} ? {a} : {b}"),
                Minimum => format!("{a} <= {b} ? {a} : {b}"),
                _ => format!("/* invalid {} */ ({ct})0", op.name()),
            };
        }
        // Bool: NumPy's + is or, * is and; - (an error in NumPy) is xor.
        match op {
            Add | Or => format!("{a} || {b}"),
            Mul | And => format!("{a} && {b}"),
            Sub | Xor => format!("{a} != {b}"),
            _ => format!("/* invalid {} */ false", op.name()),
        }
    }

    /// Conversion of `a` from `from` to `to` with NumPy `astype` rules.
    fn cast(&mut self, from: DType, to: DType, a: &str) -> String {
        let t = c_type(to);
        if from == to {
            return a.to_string();
        }
        // 16-bit floats (validated: only from F32/F64 and to F32)
        if to.is_half() {
            let h = if from == DType::F64 {
                Helper::HalfFromF64(to)
            } else {
                Helper::HalfFromF32(to)
            };
            self.helpers.insert(h);
            return format!("lf_{}_to_{}({a})", sfx(from), sfx(to));
        }
        if from.is_half() {
            self.helpers.insert(Helper::HalfToF32(from));
            let f = format!("lf_{}_to_f32({a})", sfx(from));
            return if to == DType::F32 {
                f
            } else {
                self.cast(DType::F32, to, &f)
            };
        }
        if to == DType::Bool {
            return if from.is_complex() {
                format!("({a}.re != 0 || {a}.im != 0)")
            } else {
                format!("{a} != 0")
            };
        }
        if to.is_complex() {
            let r = c_type(to.real());
            return if from.is_complex() {
                format!("{t}{{({r}){a}.re, ({r}){a}.im}}")
            } else {
                format!("{t}{{({r}){a}, ({r})0}}")
            };
        }
        // Real target: a complex source drops its imaginary part.
        let (src, sd) = if from.is_complex() {
            (format!("{a}.re"), from.real())
        } else {
            (a.to_string(), from)
        };
        if sd == to {
            return src;
        }
        if sd.is_float() && to.is_int() {
            // i32/i64 directly; narrower through the int32 cast and u32 through the int64
            // cast, then wrapped (`semantics::f64_to_u8` and its siblings)
            let (via, wrap) = match to {
                DType::I32 | DType::I64 => (to, false),
                DType::U32 => (DType::I64, true),
                DType::U64 => {
                    self.helpers.insert(Helper::FloatToU64(sd));
                    return format!("lf_{}_to_u64({src})", sfx(sd));
                }
                _ => (DType::I32, true),
            };
            self.helpers.insert(Helper::FloatToInt(sd, via));
            let c = format!("lf_{}_to_{}({src})", sfx(sd), sfx(via));
            return if wrap {
                format!("({t})({})({c})", unsigned_of(to))
            } else {
                c
            };
        }
        if sd.is_int() && to.is_int() {
            // wraps: a narrowing or sign-changing conversion goes through the unsigned
            // type of the target's width (C leaves the signed one implementation-defined)
            let widening = to.size() > sd.size() || (to.size() == sd.size() && sd.is_signed_int());
            return if to.is_unsigned() || widening {
                format!("({t}){src}")
            } else {
                format!("({t})({}){src}", unsigned_of(to))
            };
        }
        format!("({t}){src}")
    }
}

/// C math function name of a float unary op (without precision suffix).
fn c_math_name(op: UnaryOp) -> &'static str {
    use UnaryOp::*;
    match op {
        Sqrt => "sqrt",
        Exp => "exp",
        Expm1 => "expm1",
        Log => "log",
        Log1p => "log1p",
        Log2 => "log2",
        Log10 => "log10",
        Sin => "sin",
        Cos => "cos",
        Tan => "tan",
        Asin => "asin",
        Acos => "acos",
        Atan => "atan",
        Sinh => "sinh",
        Cosh => "cosh",
        Tanh => "tanh",
        Floor => "floor",
        Ceil => "ceil",
        _ => "trunc",
    }
}

/// The unsigned C type integer arithmetic of `d` wraps in (no C overflow UB; 8- and
/// 16-bit values would otherwise be promoted to `int`, whose products can overflow).
fn unsigned(d: DType) -> &'static str {
    if d.is_int64() {
        "unsigned long long"
    } else {
        "unsigned int"
    }
}

/// The unsigned C type of the width of the integer dtype `d`.
fn unsigned_of(d: DType) -> &'static str {
    match d.size() {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        _ => "unsigned long long",
    }
}

/// An exact C literal of `s` (NaN, infinities and -0 bit-exact).
pub(super) fn literal(s: &Scalar) -> String {
    match *s {
        Scalar::Bool(b) => if b { "true" } else { "false" }.into(),
        Scalar::I32(v) if v == i32::MIN => "(-2147483647 - 1)".into(),
        Scalar::I32(v) if v < 0 => format!("({v})"),
        Scalar::I32(v) => format!("{v}"),
        Scalar::I64(v) if v == i64::MIN => "(-9223372036854775807LL - 1LL)".into(),
        Scalar::I64(v) if v < 0 => format!("({v}LL)"),
        Scalar::I64(v) => format!("{v}LL"),
        Scalar::F32(v) => f32_lit(v),
        Scalar::F64(v) => f64_lit(v),
        Scalar::C64(v) => format!("c32{{{}, {}}}", f32_lit(v.re), f32_lit(v.im)),
        Scalar::C128(v) => format!("c64{{{}, {}}}", f64_lit(v.re), f64_lit(v.im)),
        Scalar::U8(v) => format!("(unsigned char){v}"),
        Scalar::U16(v) => format!("(unsigned short){v}"),
        Scalar::U32(v) => format!("{v}u"),
        Scalar::U64(v) => format!("{v}ull"),
        Scalar::I8(v) => format!("(signed char)({v})"),
        Scalar::I16(v) => format!("(short)({v})"),
        Scalar::F16(v) => format!("(unsigned short)0x{:04x}", v.to_bits()),
        Scalar::BF16(v) => format!("(unsigned short)0x{:04x}", v.to_bits()),
    }
}

/// Exact `float` literal: shortest round-trip decimal, or the bits for non-finite values.
fn f32_lit(v: f32) -> String {
    if !v.is_finite() {
        format!("__int_as_float((int)0x{:08x}u)", v.to_bits())
    } else if v.is_sign_negative() {
        format!("(-{:e}f)", -v)
    } else {
        format!("{v:e}f")
    }
}

/// Exact `double` literal: shortest round-trip decimal, or the bits for non-finite values.
fn f64_lit(v: f64) -> String {
    if !v.is_finite() {
        format!("__longlong_as_double((long long)0x{:016x}ull)", v.to_bits())
    } else if v.is_sign_negative() {
        format!("(-{:e})", -v)
    } else {
        format!("{v:e}")
    }
}
