//! Emission of reduction kernels: a group of `tpr` threads per output accumulates the
//! body's values serially, the group combines in a shared-memory tree, and when the
//! reduced extent is split over several blocks (`gridDim.y > 1`) each block writes its
//! partial and the last block of a row block combines the partials in position order.
//! Every order is fixed by the launch split, so results repeat exactly run to run.

use super::emit::{literal, Emitted, Emitter, Mode};
use super::{c_type, ArgLayout, RenderOptions, BLOCK};
use crate::ops::{BinaryOp, ReduceLayout, ReduceOp};
use crate::{DType, Inst, Kernel, Scalar};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The identity of `op` on values of dtype `d`, as a C literal.
pub(super) fn identity(op: ReduceOp, d: DType) -> String {
    let s = match op {
        ReduceOp::Sum => Scalar::zero(d),
        ReduceOp::Prod => Scalar::I64(1).cast(d),
        ReduceOp::All => Scalar::Bool(true),
        ReduceOp::Any => Scalar::Bool(false),
        ReduceOp::Max | ReduceOp::ArgMax => match d {
            DType::I32 => Scalar::I32(i32::MIN),
            DType::I64 => Scalar::I64(i64::MIN),
            DType::I8 => Scalar::I8(i8::MIN),
            DType::I16 => Scalar::I16(i16::MIN),
            d if d.is_unsigned() => Scalar::zero(d),
            _ => Scalar::F64(f64::NEG_INFINITY).cast(d),
        },
        ReduceOp::Min | ReduceOp::ArgMin => match d {
            DType::I32 => Scalar::I32(i32::MAX),
            DType::I64 => Scalar::I64(i64::MAX),
            DType::I8 => Scalar::I8(i8::MAX),
            DType::I16 => Scalar::I16(i16::MAX),
            DType::U8 => Scalar::U8(u8::MAX),
            DType::U16 => Scalar::U16(u16::MAX),
            DType::U32 => Scalar::U32(u32::MAX),
            DType::U64 => Scalar::U64(u64::MAX),
            _ => Scalar::F64(f64::INFINITY).cast(d),
        },
    };
    literal(&s)
}

/// The position-tracking combine of `argmax`/`argmin` (ties and NaNs take the first
/// position; a position below 0 means "no value yet").
const ARGPICK: &str = r#"template <class T>
__device__ __forceinline__ void lf_argpick(bool is_max, T& av, long long& ai, T bv, long long bi) {
  bool take;
  if (ai < 0) take = bi >= 0;
  else if (bi < 0) take = false;
  else if (bv != bv) take = !(av != av) || bi < ai;
  else if (av != av) take = false;
  else if (is_max) take = bv > av || (bv == av && bi < ai);
  else take = bv < av || (bv == av && bi < ai);
  if (take) { av = bv; ai = bi; }
}
"#;

/// Values per 16-byte vector load of the body: above 1 when the reduced positions are
/// contiguous (`Inner`) and every body load reads its input at the element's own index,
/// unguarded, from inputs of one element size of 4 or 8 bytes.
fn body_vector_width(k: &Kernel, at: usize, layout: ReduceLayout) -> u32 {
    if layout != ReduceLayout::Inner {
        return 1;
    }
    let index = k.values[..at].iter().position(|v| v.inst == Inst::Index);
    let mut size = None;
    for v in &k.values[..at] {
        if let Inst::Load {
            input,
            index: ix,
            guard,
        } = v.inst
        {
            let s = k.inputs[input as usize].size();
            if guard.is_some() || Some(ix as usize) != index || size.is_some_and(|x| x != s) {
                return 1;
            }
            size = Some(s);
        }
    }
    match size {
        Some(4) => 4,
        Some(8) => 2,
        _ => 1,
    }
}

/// Outputs each thread of an `Outer` reduction accumulates side by side (`16 / s` for the
/// smallest loaded element size `s` of 4 or 8 bytes), with the loads they read at
/// consecutive positions of one reduced row: every body load unguarded at an index computed
/// from the position alone. 1 (one output per thread) otherwise.
pub(super) fn outer_columns(k: &Kernel) -> (u32, BTreeSet<(u32, u32)>) {
    let none = (1, BTreeSet::new());
    let (Some(red), Some(at)) = (k.reduce, k.reduced_at()) else {
        return none;
    };
    if red.layout != ReduceLayout::Outer {
        return none;
    }
    let positional = super::emit::positional(k);
    let mut loads = BTreeSet::new();
    let mut smallest = usize::MAX;
    for v in &k.values[..at] {
        if let Inst::Load {
            input,
            index,
            guard,
        } = v.inst
        {
            if guard.is_some() || !positional[index as usize] {
                return none;
            }
            loads.insert((input, index));
            smallest = smallest.min(k.inputs[input as usize].size());
        }
    }
    match smallest {
        4 | 8 => ((16 / smallest) as u32, loads),
        _ => none,
    }
}

/// How a body value changes from one output to the next (`Axis(0)` plus one).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Not at all.
    Zero,
    /// By exactly one.
    One,
    /// Otherwise, or not known.
    Other,
}

/// [`Step`] of every body value below `at`, by exact integer rules (sums and differences of
/// unchanged values and one `Axis(0)`; products and other ops of unchanged values only).
fn column_steps(k: &Kernel, at: usize) -> Vec<Step> {
    use Step::*;
    let mut st = vec![Other; at];
    for id in 0..at {
        let v = &k.values[id];
        st[id] = match v.inst {
            Inst::Axis(0) => One,
            Inst::Axis(_) | Inst::Param(_) | Inst::Const(_) => Zero,
            Inst::Index | Inst::Load { .. } | Inst::Random(..) | Inst::Reduced => Other,
            Inst::Binary(op, a, b) if v.dtype == DType::I64 => {
                let (x, y) = (st[a as usize], st[b as usize]);
                match (op, x, y) {
                    (_, Zero, Zero) => Zero,
                    (BinaryOp::Add, One, Zero) | (BinaryOp::Add, Zero, One) => One,
                    (BinaryOp::Sub, One, Zero) => One,
                    _ => Other,
                }
            }
            inst => {
                if inst.operands().all(|o| st[o as usize] == Zero) {
                    Zero
                } else {
                    Other
                }
            }
        };
    }
    st
}

/// Body values needed per element when loads come from vectors (load indices are dead).
fn live_in_vector_mode(k: &Kernel, at: usize, value: u32) -> Vec<bool> {
    let mut live = vec![false; at];
    live[value as usize] = true;
    for i in (0..at).rev() {
        if live[i] && !matches!(k.values[i].inst, Inst::Load { .. }) {
            for o in k.values[i].inst.operands() {
                live[o as usize] = true;
            }
        }
    }
    live
}

/// Renders the whole source of reduction kernel `k` (validated and normalized).
pub(super) fn emit(k: &Kernel, opts: &RenderOptions, layout: &ArgLayout, entry: &str) -> Emitted {
    let red = k.reduce.expect("a reduction kernel");
    let at = k.reduced_at().expect("a reduced value");
    let (cw, col_loads) = outer_columns(k);
    let mut e = Emitter {
        k,
        helpers: BTreeSet::new(),
        prefetched: col_loads.clone(),
        value_input: None,
    };
    e.complex_types();
    let vd = k.values[red.value as usize].dtype;
    let acc_t = c_type(vd);
    let arg = red.op.is_arg();
    let is_max = matches!(red.op, ReduceOp::ArgMax);
    let uniform = k.uniform();
    let used_axes: BTreeSet<u8> = k.values[..at]
        .iter()
        .filter_map(|v| match v.inst {
            Inst::Axis(a) => Some(a),
            _ => None,
        })
        .collect();
    let uses_index = k.values[..at].iter().any(|v| v.inst == Inst::Index);

    // `acc = combine(acc, b)` (with positions `ai`, `bi` for arg ops).
    let combine = |e: &mut Emitter<'_>, a: &str, ai: &str, b: &str, bi: &str| -> String {
        let op = match red.op {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Maximum,
            ReduceOp::Min => BinaryOp::Minimum,
            ReduceOp::All => BinaryOp::And,
            ReduceOp::Any => BinaryOp::Or,
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                return format!("lf_argpick<{acc_t}>({is_max}, {a}, {ai}, {b}, {bi});");
            }
        };
        format!("{a} = {};", e.binary(op, vd, a, b, opts))
    };

    // The body values of one element (those `live` and not uniform) and the combine step.
    let (accv, acciv) = if cw > 1 {
        ("acc[j]", "acci[j]")
    } else {
        ("acc", "acci")
    };
    let body_step = |e: &mut Emitter<'_>, w: &mut String, ind: &str, mode: Mode, live: &[bool]| {
        for (id, v) in k.values[..at].iter().enumerate() {
            if !uniform[id] && live[id] {
                let expr = e.value(v.inst, v.dtype, mode, opts);
                let _ = writeln!(w, "{ind}const {} v{id} = {expr};", c_type(v.dtype));
            }
        }
        let step = combine(e, accv, acciv, &format!("v{}", red.value), "(long long)r");
        let _ = writeln!(w, "{ind}{step}");
    };

    let mut body = String::new();
    let w = &mut body;
    let _ = writeln!(w, "  const IDX M = (IDX)a.shape[0];");
    let _ = writeln!(w, "  const IDX R = (IDX)a.shape[1];");
    let _ = writeln!(w, "  const int tpr = a.tpr;");
    let _ = writeln!(w, "  const int rb = {BLOCK} / tpr;");
    let _ = writeln!(w, "  const int t = (int)threadIdx.x;");
    match red.layout {
        ReduceLayout::Inner => {
            let _ = writeln!(w, "  const int row = t / tpr;");
            let _ = writeln!(w, "  const int lane = t % tpr;");
        }
        ReduceLayout::Outer | ReduceLayout::Scan => {
            let _ = writeln!(w, "  const int row = t % rb;");
            let _ = writeln!(w, "  const int lane = t / rb;");
        }
    }
    let _ = writeln!(w, "  const int me = row * tpr + lane;");
    let _ = writeln!(w, "  const IDX G = (IDX)a.chunks;");
    let _ = writeln!(w, "  const IDX g = (IDX)blockIdx.y;");
    let pt = body_vector_width(k, at, red.layout);
    if pt > 1 {
        // chunks start at multiples of the vector width
        let _ = writeln!(
            w,
            "  const IDX clen = ((R + G - 1) / G + {pt} - 1) / {pt} * {pt};"
        );
    } else {
        let _ = writeln!(w, "  const IDX clen = (R + G - 1) / G;");
    }
    let _ = writeln!(w, "  const IDX r0 = g * clen;");
    let _ = writeln!(w, "  const IDX r1 = (r0 + clen < R) ? r0 + clen : R;");
    let _ = writeln!(w, "  __shared__ {acc_t} sh[{BLOCK}];");
    if arg {
        let _ = writeln!(w, "  __shared__ long long shi[{BLOCK}];");
    }
    let _ = writeln!(w, "  __shared__ bool last;");
    for &i in &super::emit::loaded_inputs(k) {
        let t = c_type(k.inputs[i as usize]);
        let _ = writeln!(w, "  const {t}* __restrict__ in{i} = a.in{i};");
    }
    for (o, &d) in k.outputs.iter().enumerate() {
        let _ = writeln!(w, "  {}* __restrict__ out{o} = a.out{o};", c_type(d));
    }
    for (id, v) in k.values.iter().enumerate() {
        if uniform[id] {
            let expr = e.value(v.inst, v.dtype, Mode::Scalar, opts);
            let _ = writeln!(w, "  const {} v{id} = {expr};", c_type(v.dtype));
        }
    }
    // outputs per block
    let ob = if cw > 1 {
        format!("(rb * {cw})")
    } else {
        "rb".to_string()
    };
    let _ = writeln!(
        w,
        "  for (IDX mb = (IDX)blockIdx.x * {ob}; mb < M; mb += (IDX)gridDim.x * {ob}) {{"
    );
    if cw > 1 {
        // `cw` adjacent outputs per thread: per reduced position, the loads of the `cw`
        // columns are one vector read where their indices are consecutive (a row of a
        // row-major input), else `cw` scalar reads; a partial tile goes column by column.
        let _ = writeln!(w, "    const IDX mc = mb + (IDX)row * {cw};");
        let _ = writeln!(w, "    {acc_t} acc[{cw}];");
        if arg {
            let _ = writeln!(w, "    long long acci[{cw}];");
        }
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "    for (int j = 0; j < {cw}; ++j) {{");
        let _ = writeln!(w, "      acc[j] = {};", identity(red.op, vd));
        if arg {
            let _ = writeln!(w, "      acci[j] = -1;");
        }
        let _ = writeln!(w, "    }}");
        // `m` (column `j` of the tile) and the position values `live` reads
        let position = |w: &mut String, ind: &str, live: &[bool], tile: bool| {
            let uses = |inst: Inst| {
                k.values[..at]
                    .iter()
                    .zip(live)
                    .any(|(v, &l)| l && v.inst == inst)
            };
            if tile && (uses(Inst::Index) || uses(Inst::Axis(0))) {
                let _ = writeln!(w, "{ind}const IDX m = mc + (IDX)j;");
            }
            if uses(Inst::Index) {
                let _ = writeln!(w, "{ind}const IDX i = m * R + r;");
            }
            if uses(Inst::Axis(0)) {
                let _ = writeln!(w, "{ind}const IDX ax0 = m;");
            }
            if uses(Inst::Axis(1)) {
                let _ = writeln!(w, "{ind}const IDX ax1 = r;");
            }
        };
        let indices: BTreeSet<u32> = col_loads.iter().map(|&(_, ix)| ix).collect();
        let mut cone = vec![false; at];
        for &ix in &indices {
            cone[ix as usize] = true;
        }
        for id in (0..at).rev() {
            if cone[id] {
                for o in k.values[id].inst.operands() {
                    cone[o as usize] = true;
                }
            }
        }
        let _ = writeln!(w, "    if (mc + {cw} <= M) {{");
        let _ = writeln!(w, "#pragma unroll 4");
        let _ = writeln!(w, "      for (IDX r = r0 + lane; r < r1; r += tpr) {{");
        for &ix in &indices {
            let _ = writeln!(w, "        long long ix{ix}[{cw}];");
        }
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "        for (int j = 0; j < {cw}; ++j) {{");
        position(w, "          ", &cone, true);
        for (id, v) in k.values[..at].iter().enumerate() {
            if cone[id] && !uniform[id] {
                let expr = e.value(v.inst, v.dtype, Mode::Scalar, opts);
                let _ = writeln!(w, "          const {} v{id} = {expr};", c_type(v.dtype));
            }
        }
        for &ix in &indices {
            let _ = writeln!(w, "          ix{ix}[j] = v{ix};");
        }
        let _ = writeln!(w, "        }}");
        let steps = column_steps(k, at);
        let consecutive: BTreeSet<u32> = indices
            .iter()
            .copied()
            .filter(|&ix| steps[ix as usize] == Step::One)
            .collect();
        e.vector_reads(cw, &col_loads, &consecutive, "        ", w);
        let live = live_in_vector_mode(k, at, red.value);
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "        for (int j = 0; j < {cw}; ++j) {{");
        position(w, "          ", &live, true);
        body_step(&mut e, w, "          ", Mode::Vector, &live);
        let _ = writeln!(w, "        }}");
        let _ = writeln!(w, "      }}");
        let _ = writeln!(w, "    }} else {{");
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "      for (int j = 0; j < {cw}; ++j) {{");
        let _ = writeln!(w, "        const IDX m = mc + (IDX)j;");
        let _ = writeln!(w, "        if (m < M) {{");
        let _ = writeln!(w, "          for (IDX r = r0 + lane; r < r1; r += tpr) {{");
        let all = vec![true; at];
        position(w, "            ", &all, false);
        body_step(&mut e, w, "            ", Mode::Scalar, &all);
        let _ = writeln!(w, "          }}");
        let _ = writeln!(w, "        }}");
        let _ = writeln!(w, "      }}");
        let _ = writeln!(w, "    }}");
    } else {
        let _ = writeln!(w, "    const IDX m = mb + row;");
        let _ = writeln!(w, "    {acc_t} acc = {};", identity(red.op, vd));
        if arg {
            let _ = writeln!(w, "    long long acci = -1;");
        }
        let _ = writeln!(w, "    if (m < M) {{");
        if pt > 1 {
            // whole 16-byte vectors when every row and chunk starts on a vector boundary
            let live = live_in_vector_mode(k, at, red.value);
            let lane_uses = |inst: Inst| {
                k.values[..at]
                    .iter()
                    .zip(&live)
                    .any(|(v, &l)| l && v.inst == inst)
            };
            let _ = writeln!(w, "      if (R % {pt} == 0) {{");
            let _ = writeln!(w, "#pragma unroll 2");
            let _ = writeln!(
                w,
                "        for (IDX q = r0 + (IDX)lane * {pt}; q < r1; q += (IDX)tpr * {pt}) {{"
            );
            let _ = writeln!(w, "          const IDX base = m * R + q;");
            for &i in &super::emit::loaded_inputs(k) {
                let vt = super::emit::vec_type(k.inputs[i as usize]);
                let _ = writeln!(
                    w,
                    "          const {vt} x{i} = *(const {vt}*)(in{i} + base);"
                );
            }
            let _ = writeln!(w, "#pragma unroll");
            let _ = writeln!(w, "          for (int j = 0; j < {pt}; ++j) {{");
            if arg || lane_uses(Inst::Axis(1)) {
                let _ = writeln!(w, "            const IDX r = q + (IDX)j;");
            }
            if lane_uses(Inst::Index) {
                let _ = writeln!(w, "            const IDX i = base + (IDX)j;");
            }
            if lane_uses(Inst::Axis(0)) {
                let _ = writeln!(w, "            const IDX ax0 = m;");
            }
            if lane_uses(Inst::Axis(1)) {
                let _ = writeln!(w, "            const IDX ax1 = r;");
            }
            body_step(&mut e, w, "            ", Mode::Vector, &live);
            let _ = writeln!(w, "          }}");
            let _ = writeln!(w, "        }}");
            let _ = writeln!(w, "      }} else {{");
        }
        // unrolled so that several independent loads are in flight per thread
        let _ = writeln!(w, "#pragma unroll 4");
        let _ = writeln!(w, "      for (IDX r = r0 + lane; r < r1; r += tpr) {{");
        if uses_index {
            let _ = writeln!(w, "        const IDX i = m * R + r;");
        }
        if used_axes.contains(&0) {
            let _ = writeln!(w, "        const IDX ax0 = m;");
        }
        if used_axes.contains(&1) {
            let _ = writeln!(w, "        const IDX ax1 = r;");
        }
        body_step(&mut e, w, "        ", Mode::Scalar, &vec![true; at]);
        let _ = writeln!(w, "      }}");
        if pt > 1 {
            let _ = writeln!(w, "      }}");
        }
        let _ = writeln!(w, "    }}");
    }
    let tree = |e: &mut Emitter<'_>, w: &mut String, ind: &str| {
        let _ = writeln!(w, "{ind}sh[me] = {accv};");
        if arg {
            let _ = writeln!(w, "{ind}shi[me] = {acciv};");
        }
        let _ = writeln!(w, "{ind}__syncthreads();");
        let _ = writeln!(w, "{ind}for (int s = tpr >> 1; s > 0; s >>= 1) {{");
        let _ = writeln!(w, "{ind}  if (lane < s) {{");
        let _ = writeln!(w, "{ind}    {acc_t} x = sh[me];");
        if arg {
            let _ = writeln!(w, "{ind}    long long xi = shi[me];");
        }
        let c = combine(
            e,
            "x",
            "xi",
            "sh[me + s]",
            if arg { "shi[me + s]" } else { "-1" },
        );
        let _ = writeln!(w, "{ind}    {c}");
        let _ = writeln!(w, "{ind}    sh[me] = x;");
        if arg {
            let _ = writeln!(w, "{ind}    shi[me] = xi;");
        }
        let _ = writeln!(w, "{ind}  }}");
        let _ = writeln!(w, "{ind}  __syncthreads();");
        let _ = writeln!(w, "{ind}}}");
    };
    // The epilogue of output `m` from the group's combined value.
    let epilogue = |e: &mut Emitter<'_>, ind: &str| -> String {
        let mut w = String::new();
        let rt = c_type(k.values[at].dtype);
        if arg {
            let _ = writeln!(
                w,
                "{ind}const {rt} v{at} = shi[row * tpr] < 0 ? 0 : shi[row * tpr];"
            );
        } else {
            let _ = writeln!(w, "{ind}const {rt} v{at} = sh[row * tpr];");
        }
        for (id, v) in k.values.iter().enumerate().skip(at + 1) {
            if !uniform[id] {
                let expr = e.value(v.inst, v.dtype, Mode::Scalar, opts);
                let _ = writeln!(w, "{ind}const {} v{id} = {expr};", c_type(v.dtype));
            }
        }
        for st in &k.stores {
            let _ = writeln!(w, "{ind}out{}[m] = v{};", st.output, st.value);
        }
        w
    };
    // The finished value of output `m` (`ind` deep): the epilogue, or with several chunks
    // this block's partial.
    let finish = |e: &mut Emitter<'_>, w: &mut String, ind: &str| {
        tree(e, w, ind);
        let _ = writeln!(w, "{ind}if (G == 1) {{");
        let _ = writeln!(w, "{ind}  if (lane == 0 && m < M) {{");
        w.push_str(&epilogue(e, &format!("{ind}    ")));
        let _ = writeln!(w, "{ind}  }}");
        let _ = writeln!(w, "{ind}}} else {{");
        let _ = writeln!(w, "{ind}  if (lane == 0 && m < M) {{");
        let _ = writeln!(w, "{ind}    (({acc_t}*)a.ws)[m * G + g] = sh[me];");
        if arg {
            let _ = writeln!(w, "{ind}    a.wsi[m * G + g] = shi[me];");
        }
        let _ = writeln!(w, "{ind}  }}");
    };
    // The last block of a split row block: output `m` from its partials.
    let from_partials = |e: &mut Emitter<'_>, w: &mut String, ind: &str| {
        let _ = writeln!(w, "{ind}{accv} = {};", identity(red.op, vd));
        if arg {
            let _ = writeln!(w, "{ind}{acciv} = -1;");
        }
        let _ = writeln!(w, "{ind}if (m < M) {{");
        let _ = writeln!(w, "{ind}  for (IDX q = lane; q < G; q += tpr) {{");
        let _ = writeln!(
            w,
            "{ind}    const {acc_t} pv = ((const {acc_t}*)a.ws)[m * G + q];"
        );
        let pi = if arg {
            let _ = writeln!(w, "{ind}    const long long pi = a.wsi[m * G + q];");
            "pi"
        } else {
            "-1"
        };
        let c = combine(e, accv, acciv, "pv", pi);
        let _ = writeln!(w, "{ind}    {c}");
        let _ = writeln!(w, "{ind}  }}");
        let _ = writeln!(w, "{ind}}}");
        tree(e, w, ind);
        let _ = writeln!(w, "{ind}if (lane == 0 && m < M) {{");
        w.push_str(&epilogue(e, &format!("{ind}  ")));
        let _ = writeln!(w, "{ind}}}");
    };
    let counter = |w: &mut String, ind: &str| {
        let _ = writeln!(w, "{ind}__threadfence();");
        let _ = writeln!(w, "{ind}__syncthreads();");
        let _ = writeln!(w, "{ind}if (t == 0) {{");
        let _ = writeln!(
            w,
            "{ind}  const unsigned int prev = atomicAdd(&a.counters[mb / {ob}], 1u);"
        );
        let _ = writeln!(w, "{ind}  last = prev == (unsigned int)(G - 1);");
        let _ = writeln!(w, "{ind}}}");
        let _ = writeln!(w, "{ind}__syncthreads();");
        let _ = writeln!(w, "{ind}if (last) {{");
        let _ = writeln!(w, "{ind}  __threadfence();");
    };
    let counter_end = |w: &mut String, ind: &str| {
        let _ = writeln!(w, "{ind}  if (t == 0) a.counters[mb / {ob}] = 0u;");
        let _ = writeln!(w, "{ind}}}");
        let _ = writeln!(w, "{ind}__syncthreads();");
    };
    if cw > 1 {
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "    for (int j = 0; j < {cw}; ++j) {{");
        let _ = writeln!(w, "      const IDX m = mc + (IDX)j;");
        finish(&mut e, w, "      ");
        let _ = writeln!(w, "      }}");
        let _ = writeln!(w, "    }}");
        let _ = writeln!(w, "    if (G > 1) {{");
        counter(w, "      ");
        let _ = writeln!(w, "#pragma unroll");
        let _ = writeln!(w, "        for (int j = 0; j < {cw}; ++j) {{");
        let _ = writeln!(w, "          const IDX m = mc + (IDX)j;");
        from_partials(&mut e, w, "          ");
        let _ = writeln!(w, "        }}");
        counter_end(w, "      ");
        let _ = writeln!(w, "    }}");
    } else {
        finish(&mut e, w, "    ");
        counter(w, "      ");
        from_partials(&mut e, w, "        ");
        counter_end(w, "      ");
        let _ = writeln!(w, "    }}");
    }
    let _ = writeln!(w, "  }}");

    let mut src = String::new();
    let s = &mut src;
    let _ = writeln!(
        s,
        "// Generated by lazyfuse-codegen. Entry {entry}: {} reduction ({:?}), {BLOCK} threads per block.",
        red.op.name(),
        red.layout
    );
    let vt: BTreeSet<(DType, u32)> = if cw > 1 {
        col_loads
            .iter()
            .map(|&(i, _)| (k.inputs[i as usize], cw))
            .collect()
    } else if pt > 1 {
        super::emit::loaded_inputs(k)
            .iter()
            .map(|&i| {
                let d = k.inputs[i as usize];
                (d, (16 / d.size()) as u32)
            })
            .collect()
    } else {
        BTreeSet::new()
    };
    let extra = if arg { ARGPICK } else { "" };
    super::emit::assemble(k, opts, layout, entry, &e.helpers, extra, &vt, &body, s);
    Emitted {
        source: src,
        per_thread: cw,
    }
}
