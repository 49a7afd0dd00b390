//! Emission of scan kernels (`ReduceLayout::Scan`): blocks take tiles of `BLOCK * items`
//! elements
//! of a row in order from a counter, compute the body's values into shared memory
//! (coalesced), scan the tile (serially per thread over [`items`] adjacent values, then
//! across the threads of each warp and across the warps), and learn the total of the row's earlier tiles by decoupled look-back:
//! each tile publishes its own total at once and its inclusive prefix when known, and a
//! tile's first warp reads its 32 nearest predecessors at a time, summing totals backwards
//! until it meets a published prefix. One
//! pass over memory, whatever the row length.
//!
//! Workspace (zeroed before each launch by the runtime): `wsi[0..tiles]` the tiles'
//! states (0 none, 1 total published, 2 prefix published), `wsi[tiles]` the tile counter;
//! `ws` holds `2 * tiles` values: the totals, then the inclusive prefixes.

use super::emit::{Emitted, Emitter, Mode};
use super::reduce::identity;
use super::{c_type, ArgLayout, RenderOptions, BLOCK};
use crate::ops::{BinaryOp, ReduceOp};
use crate::{DType, Inst, Kernel};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Values each thread scans serially, for accumulators of dtype `d`: 128 bytes' worth (at
/// most 32), so a tile takes 32 KiB of shared memory. A long row's throughput is about
/// 32 tiles per look-back step (a memory round trip) when many tiles are in flight, so
/// tiles are as large as shared memory allows.
pub fn items(d: DType) -> u32 {
    (128 / d.size().max(1)).clamp(4, 32) as u32
}
/// Warps per block.
const WARPS: u32 = BLOCK / 32;

/// How a tile publishes its state (`lf_publish`: 1 with its total, 2 with its inclusive
/// prefix) and how a look-back waits for a predecessor's (`lf_wait`, returning the state
/// and setting the value). A 4-byte value travels with its state in one 64-bit word (one
/// memory round trip per look-back step); a wider one is written before its state with a
/// fence between, and read after it, bypassing the (incoherent) L1 cache.
fn tile_states(d: DType) -> String {
    let t = c_type(d);
    let packed = match d {
        DType::F32 => Some(("__float_as_uint(v)", "__uint_as_float(u)")),
        DType::I32 => Some(("(unsigned int)v", "(int)u")),
        DType::U32 => Some(("v", "u")),
        _ => None,
    };
    if let Some((bits, from)) = packed {
        return format!(
            "__device__ __forceinline__ void lf_publish(long long* st, {t}* tot, {t}* pre, \
             IDX tile, unsigned long long f, {t} v) {{\n\
             \x20 atomicExch((unsigned long long*)&st[tile], (f << 32) | (unsigned long long){bits});\n}}\n\
             __device__ __forceinline__ long long lf_wait(const long long* st, const {t}* tot, \
             const {t}* pre, long long p, {t}& v) {{\n\
             \x20 unsigned long long w;\n\
             \x20 do {{ w = *(volatile const unsigned long long*)&st[p]; }} while ((w >> 32) == 0);\n\
             \x20 const unsigned int u = (unsigned int)w;\n\
             \x20 v = {from};\n\
             \x20 return (long long)(w >> 32);\n}}\n"
        );
    }
    let (ld, st) = match d {
        DType::C64 => (
            "const float2 u = __ldcg((const float2*)p); return c32{u.x, u.y};",
            "__stcg((float2*)p, make_float2(v.re, v.im));",
        ),
        DType::C128 => (
            "const double2 u = __ldcg((const double2*)p); return c64{u.x, u.y};",
            "__stcg((double2*)p, make_double2(v.re, v.im));",
        ),
        DType::Bool => (
            "return *(const volatile bool*)p;",
            "*(volatile bool*)p = v;",
        ),
        _ => ("return __ldcg(p);", "__stcg(p, v);"),
    };
    format!(
        "__device__ __forceinline__ {t} lf_ldcg(const {t}* p) {{ {ld} }}\n\
         __device__ __forceinline__ void lf_stcg({t}* p, {t} v) {{ {st} }}\n\
         __device__ __forceinline__ void lf_publish(long long* st, {t}* tot, {t}* pre, \
         IDX tile, unsigned long long f, {t} v) {{\n\
         \x20 lf_stcg(f == 2 ? &pre[tile] : &tot[tile], v);\n\
         \x20 __threadfence();\n\
         \x20 atomicExch((unsigned long long*)&st[tile], f);\n}}\n\
         __device__ __forceinline__ long long lf_wait(const long long* st, const {t}* tot, \
         const {t}* pre, long long p, {t}& v) {{\n\
         \x20 long long f;\n\
         \x20 do {{ f = *(volatile const long long*)&st[p]; }} while (f == 0);\n\
         \x20 __threadfence();\n\
         \x20 v = f == 2 ? lf_ldcg(&pre[p]) : lf_ldcg(&tot[p]);\n\
         \x20 return f;\n}}\n"
    )
}

/// Renders the whole source of scan kernel `k` (validated and normalized).
pub(super) fn emit(k: &Kernel, opts: &RenderOptions, layout: &ArgLayout, entry: &str) -> Emitted {
    let red = k.reduce.expect("a scan kernel");
    let at = k.reduced_at().expect("a reduced value");
    let mut e = Emitter {
        k,
        helpers: BTreeSet::new(),
        prefetched: BTreeSet::new(),
        value_input: None,
    };
    e.complex_types();
    let vd = k.values[red.value as usize].dtype;
    let acc_t = c_type(vd);
    let nit = items(vd);
    let tile = BLOCK * nit;
    let id = identity(red.op, vd);
    let bop = match red.op {
        ReduceOp::Prod => BinaryOp::Mul,
        _ => BinaryOp::Add,
    };
    let comb = |e: &mut Emitter<'_>, a: &str, b: &str| e.binary(bop, vd, a, b, opts);
    let uniform = k.uniform();
    let uses =
        |inst: Inst, from: usize, to: usize| k.values[from..to].iter().any(|v| v.inst == inst);

    let mut body = String::new();
    let w = &mut body;
    let _ = writeln!(w, "  const IDX M = (IDX)a.shape[0];");
    let _ = writeln!(w, "  const IDX R = (IDX)a.shape[1];");
    let _ = writeln!(w, "  const int t = (int)threadIdx.x;");
    let _ = writeln!(w, "  const IDX per_row = (R + {tile} - 1) / {tile};");
    let _ = writeln!(w, "  const IDX tiles = M * per_row;");
    let _ = writeln!(w, "  {acc_t}* __restrict__ tot = ({acc_t}*)a.ws;");
    let _ = writeln!(w, "  {acc_t}* __restrict__ pre = tot + tiles;");
    let _ = writeln!(w, "  long long* st = a.wsi;");
    // one pad element per 32 keeps both the striped and the blocked accesses free of bank
    // conflicts
    let _ = writeln!(w, "#define LF_SV(e) ((e) + ((e) >> 5))");
    let _ = writeln!(w, "  __shared__ {acc_t} sv[{tile} + {tile} / 32];");
    let _ = writeln!(w, "  __shared__ {acc_t} sh[{BLOCK}];");
    let _ = writeln!(w, "  __shared__ {acc_t} sw[{WARPS}];");
    let _ = writeln!(w, "  __shared__ {acc_t} sl[32];");
    let _ = writeln!(w, "  __shared__ {acc_t} sp;");
    let _ = writeln!(w, "  __shared__ unsigned long long stile;");
    for &i in &super::emit::loaded_inputs(k) {
        let t = c_type(k.inputs[i as usize]);
        let _ = writeln!(w, "  const {t}* __restrict__ in{i} = a.in{i};");
    }
    for (o, &d) in k.outputs.iter().enumerate() {
        let _ = writeln!(w, "  {}* __restrict__ out{o} = a.out{o};", c_type(d));
    }
    for (vid, v) in k.values.iter().enumerate() {
        if uniform[vid] {
            let expr = e.value(v.inst, v.dtype, Mode::Scalar, opts);
            let _ = writeln!(w, "  const {} v{vid} = {expr};", c_type(v.dtype));
        }
    }
    let _ = writeln!(w, "  for (;;) {{");
    let _ = writeln!(
        w,
        "    if (t == 0) stile = atomicAdd((unsigned long long*)&st[tiles], 1ull);"
    );
    let _ = writeln!(w, "    __syncthreads();");
    let _ = writeln!(w, "    const IDX tile = (IDX)stile;");
    let _ = writeln!(w, "    if (tile >= tiles) break;");
    let _ = writeln!(w, "    const IDX row = tile / per_row;");
    let _ = writeln!(w, "    const IDX tr = tile - row * per_row;");
    let _ = writeln!(w, "    const IDX j0 = tr * {tile};");
    // the body, striped: thread t computes positions j0 + q * BLOCK + t
    let _ = writeln!(w, "#pragma unroll");
    let _ = writeln!(w, "    for (int q = 0; q < {nit}; ++q) {{");
    let _ = writeln!(w, "      const IDX r = j0 + (IDX)(q * {BLOCK} + t);");
    let _ = writeln!(w, "      {acc_t} x = {id};");
    let _ = writeln!(w, "      if (r < R) {{");
    if uses(Inst::Index, 0, at) {
        let _ = writeln!(w, "        const IDX i = row * R + r;");
    }
    if uses(Inst::Axis(0), 0, at) {
        let _ = writeln!(w, "        const IDX ax0 = row;");
    }
    if uses(Inst::Axis(1), 0, at) {
        let _ = writeln!(w, "        const IDX ax1 = r;");
    }
    for (vid, v) in k.values[..at].iter().enumerate() {
        if !uniform[vid] {
            let expr = e.value(v.inst, v.dtype, Mode::Scalar, opts);
            let _ = writeln!(w, "        const {} v{vid} = {expr};", c_type(v.dtype));
        }
    }
    let _ = writeln!(w, "        x = v{};", red.value);
    let _ = writeln!(w, "      }}");
    let _ = writeln!(w, "      sv[LF_SV(q * {BLOCK} + t)] = x;");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "    __syncthreads();");
    // serial scan of the thread's adjacent values
    let _ = writeln!(w, "    {acc_t} run = sv[LF_SV(t * {nit})];");
    let _ = writeln!(w, "#pragma unroll");
    let _ = writeln!(w, "    for (int q = 1; q < {nit}; ++q) {{");
    let c = comb(&mut e, "run", &format!("sv[LF_SV(t * {nit} + q)]"));
    let _ = writeln!(w, "      run = {c};");
    let _ = writeln!(w, "      sv[LF_SV(t * {nit} + q)] = run;");
    let _ = writeln!(w, "    }}");
    // across the threads of each warp, then across the warps
    let _ = writeln!(w, "    const int lane = t & 31, warp = t >> 5;");
    let _ = writeln!(w, "    sh[t] = run;");
    let _ = writeln!(w, "    __syncwarp();");
    let _ = writeln!(w, "#pragma unroll");
    let _ = writeln!(w, "    for (int off = 1; off < 32; off <<= 1) {{");
    let _ = writeln!(w, "      {acc_t} y = {id};");
    let _ = writeln!(w, "      if (lane >= off) y = sh[t - off];");
    let _ = writeln!(w, "      __syncwarp();");
    let c = comb(&mut e, "y", "sh[t]");
    let _ = writeln!(w, "      if (lane >= off) sh[t] = {c};");
    let _ = writeln!(w, "      __syncwarp();");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "    __syncthreads();");
    let _ = writeln!(w, "    if (t == 0) {{");
    let _ = writeln!(w, "      {acc_t} x = {id};");
    let _ = writeln!(w, "      for (int q = 0; q < {WARPS}; ++q) {{");
    let c = comb(&mut e, "x", "sh[q * 32 + 31]");
    let _ = writeln!(w, "        x = {c};");
    let _ = writeln!(w, "        sw[q] = x;");
    let _ = writeln!(w, "      }}");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "    __syncthreads();");
    // the look-back, by warp 0: 32 predecessors at a time, lane l at tile - 1 - l, up to
    // the nearest published prefix (a row's first tile always publishes one)
    let _ = writeln!(w, "    if (warp == 0) {{");
    let _ = writeln!(w, "      const {acc_t} total = sw[{WARPS} - 1];");
    let _ = writeln!(w, "      {acc_t} prefix = {id};");
    let _ = writeln!(w, "      if (tr == 0) {{");
    let _ = writeln!(w, "        if (lane == 0) {{");
    let _ = writeln!(w, "          lf_publish(st, tot, pre, tile, 2ull, total);");
    let _ = writeln!(w, "        }}");
    let _ = writeln!(w, "      }} else {{");
    let _ = writeln!(w, "        if (lane == 0) {{");
    let _ = writeln!(w, "          lf_publish(st, tot, pre, tile, 1ull, total);");
    let _ = writeln!(w, "        }}");
    let _ = writeln!(w, "        const long long first = (long long)(tile - tr);");
    let _ = writeln!(w, "        long long p = (long long)tile - 1 - lane;");
    let _ = writeln!(w, "        for (;;) {{");
    let _ = writeln!(w, "          long long f = 2;");
    let _ = writeln!(w, "          {acc_t} v = {id};");
    let _ = writeln!(w, "          if (p >= first) {{");
    let _ = writeln!(w, "            f = lf_wait(st, tot, pre, p, v);");
    let _ = writeln!(w, "          }}");
    let _ = writeln!(
        w,
        "          const unsigned int done = __ballot_sync(0xffffffffu, f == 2);"
    );
    let _ = writeln!(w, "          const int stop = done ? __ffs(done) - 1 : 31;");
    let _ = writeln!(w, "          sl[lane] = lane <= stop ? v : {id};");
    let _ = writeln!(w, "          __syncwarp();");
    let _ = writeln!(w, "          if (lane == 0) {{");
    let _ = writeln!(w, "            for (int q = 0; q <= stop; ++q) {{");
    let c = comb(&mut e, "sl[q]", "prefix");
    let _ = writeln!(w, "              prefix = {c};");
    let _ = writeln!(w, "            }}");
    let _ = writeln!(w, "          }}");
    let _ = writeln!(w, "          __syncwarp();");
    let _ = writeln!(w, "          if (done) break;");
    let _ = writeln!(w, "          p -= 32;");
    let _ = writeln!(w, "        }}");
    let _ = writeln!(w, "        if (lane == 0) {{");
    let c = comb(&mut e, "prefix", "total");
    let _ = writeln!(w, "          lf_publish(st, tot, pre, tile, 2ull, {c});");
    let _ = writeln!(w, "        }}");
    let _ = writeln!(w, "      }}");
    let _ = writeln!(w, "      if (lane == 0) sp = prefix;");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "    __syncthreads();");
    // every value of the thread's run gets the earlier threads' and tiles' total
    let _ = writeln!(w, "    {{");
    let _ = writeln!(w, "      {acc_t} base = sp;");
    let c = comb(&mut e, "base", "sw[warp - 1]");
    let _ = writeln!(w, "      if (warp > 0) base = {c};");
    let c = comb(&mut e, "base", "sh[t - 1]");
    let _ = writeln!(w, "      if (lane > 0) base = {c};");
    let _ = writeln!(w, "#pragma unroll");
    let _ = writeln!(w, "      for (int q = 0; q < {nit}; ++q) {{");
    let c = comb(&mut e, "base", &format!("sv[LF_SV(t * {nit} + q)]"));
    let _ = writeln!(w, "        sv[LF_SV(t * {nit} + q)] = {c};");
    let _ = writeln!(w, "      }}");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "    __syncthreads();");
    // the epilogue and the stores, striped again
    let rt = c_type(k.values[at].dtype);
    let _ = writeln!(w, "#pragma unroll");
    let _ = writeln!(w, "    for (int q = 0; q < {nit}; ++q) {{");
    let _ = writeln!(w, "      const IDX r = j0 + (IDX)(q * {BLOCK} + t);");
    let _ = writeln!(w, "      if (r < R) {{");
    let _ = writeln!(w, "        const IDX i = row * R + r;");
    let _ = writeln!(w, "        const {rt} v{at} = sv[LF_SV(q * {BLOCK} + t)];");
    for (vid, v) in k.values.iter().enumerate().skip(at + 1) {
        if !uniform[vid] {
            let expr = e.value(v.inst, v.dtype, Mode::Scalar, opts);
            let _ = writeln!(w, "        const {} v{vid} = {expr};", c_type(v.dtype));
        }
    }
    for s in &k.stores {
        let _ = writeln!(w, "        out{}[i] = v{};", s.output, s.value);
    }
    let _ = writeln!(w, "      }}");
    let _ = writeln!(w, "    }}");
    let _ = writeln!(w, "    __syncthreads();");
    let _ = writeln!(w, "  }}");

    let mut src = String::new();
    let s = &mut src;
    let _ = writeln!(
        s,
        "// Generated by lazyfuse-codegen. Entry {entry}: {} scan, tiles of {tile}, {BLOCK} threads per block.",
        red.op.name()
    );
    let extra = tile_states(vd);
    super::emit::assemble(
        k,
        opts,
        layout,
        entry,
        &e.helpers,
        &extra,
        &BTreeSet::new(),
        &body,
        s,
    );
    Emitted {
        source: src,
        per_thread: nit,
    }
}
