//! Tests of the CUDA C renderer: snapshots of a fixed kernel corpus, the argument struct
//! layout, vectorization decisions and (where NVRTC is installed) compilation of every source.

use lazyfuse_codegen::cuda::{self, pack_args, render, RenderOptions};
use lazyfuse_codegen::ops::{BinaryOp as B, RandomKind, ReduceLayout, ReduceOp, UnaryOp as U};
use lazyfuse_codegen::{Builder, DType, Inst, Kernel, LaunchArgs, Scalar, ValueId};
use num_complex::{Complex32, Complex64};
use std::path::PathBuf;

const IDX32: RenderOptions = RenderOptions {
    index32: true,
    scalar: false,
};
const IDX64: RenderOptions = RenderOptions {
    index32: false,
    scalar: false,
};

/// Adds an input of dtype `d` and loads it at `index`.
fn load(b: &mut Builder, d: DType, index: ValueId) -> ValueId {
    let i = b.input(d);
    b.push(
        Inst::Load {
            input: i,
            index,
            guard: None,
        },
        d,
    )
}

/// Adds an input of dtype `d` and loads it at `index` where `guard` holds.
fn guarded_load(b: &mut Builder, d: DType, index: ValueId, guard: ValueId) -> ValueId {
    let i = b.input(d);
    b.push(
        Inst::Load {
            input: i,
            index,
            guard: Some(guard),
        },
        d,
    )
}

fn index(b: &mut Builder) -> ValueId {
    b.push(Inst::Index, DType::I64)
}

fn axis(b: &mut Builder, k: u8) -> ValueId {
    b.push(Inst::Axis(k), DType::I64)
}

fn konst(b: &mut Builder, s: Scalar) -> ValueId {
    b.push(Inst::Const(s), s.dtype())
}

/// Sums `vs` with `Add` (logical or for Bool).
fn sum(b: &mut Builder, vs: &[ValueId]) -> ValueId {
    vs[1..]
        .iter()
        .fold(vs[0], |acc, &v| b.binary(B::Add, acc, v))
}

/// The 16-op f32 chain: r = sqrt(x*x+y*y); t = atan2(y,x);
/// z = r*cos(t) + exp(p0*r)*sin(t); where(z > p1, z, p2*z) + p3.
fn chain_f32() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let x = load(&mut b, DType::F32, i);
    let y = load(&mut b, DType::F32, i);
    let p0 = b.param(DType::F32);
    let p1 = b.param(DType::F32);
    let p2 = b.param(DType::F32);
    let p3 = b.param(DType::F32);
    let xx = b.binary(B::Mul, x, x);
    let yy = b.binary(B::Mul, y, y);
    let s = b.binary(B::Add, xx, yy);
    let r = b.unary(U::Sqrt, s);
    let t = b.binary(B::Atan2, y, x);
    let c = b.unary(U::Cos, t);
    let rc = b.binary(B::Mul, r, c);
    let nr = b.binary(B::Mul, p0, r);
    let e = b.unary(U::Exp, nr);
    let st = b.unary(U::Sin, t);
    let es = b.binary(B::Mul, e, st);
    let z = b.binary(B::Add, rc, es);
    let g = b.binary(B::Gt, z, p1);
    let lz = b.binary(B::Mul, p2, z);
    let w = b.select(g, z, lz);
    let out = b.binary(B::Add, w, p3);
    b.store(out);
    b.finish()
}

/// out[i, j] = x[i*p0 + j*p1] * y[j*p2] in f64 (broadcast and strided reads).
fn broadcast_mul() -> Kernel {
    let mut b = Builder::new(2);
    let a0 = axis(&mut b, 0);
    let a1 = axis(&mut b, 1);
    let p0 = b.param(DType::I64);
    let p1 = b.param(DType::I64);
    let p2 = b.param(DType::I64);
    let t0 = b.binary(B::Mul, a0, p0);
    let t1 = b.binary(B::Mul, a1, p1);
    let ix = b.binary(B::Add, t0, t1);
    let iy = b.binary(B::Mul, a1, p2);
    let x = load(&mut b, DType::F64, ix);
    let y = load(&mut b, DType::F64, iy);
    let m = b.binary(B::Mul, x, y);
    b.store(m);
    b.finish()
}

/// Zero padding: out[i, j] = x[(i-lo0)*w + (j-lo1)] where in bounds, else 0; times p4.
fn pad_guarded() -> Kernel {
    let mut b = Builder::new(2);
    let a0 = axis(&mut b, 0);
    let a1 = axis(&mut b, 1);
    let lo0 = b.param(DType::I64);
    let lo1 = b.param(DType::I64);
    let h = b.param(DType::I64);
    let w = b.param(DType::I64);
    let scale = b.param(DType::F32);
    let zero = b.const_i64(0);
    let r = b.binary(B::Sub, a0, lo0);
    let c = b.binary(B::Sub, a1, lo1);
    let g0 = b.binary(B::Ge, r, zero);
    let g1 = b.binary(B::Lt, r, h);
    let g2 = b.binary(B::Ge, c, zero);
    let g3 = b.binary(B::Lt, c, w);
    let g01 = b.binary(B::And, g0, g1);
    let g23 = b.binary(B::And, g2, g3);
    let g = b.binary(B::And, g01, g23);
    let rw = b.binary(B::Mul, r, w);
    let ix = b.binary(B::Add, rw, c);
    let v = guarded_load(&mut b, DType::F32, ix, g);
    let o = b.binary(B::Mul, v, scale);
    b.store(o);
    b.finish()
}

/// A padded computation: `where(inside, exp(sin(x[ix]) * p), q)` with the pad test `inside`
/// also guarding the load, plus a value both sides need (`c`).
fn where_branches() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let lo = b.param(DType::I64);
    let len = b.param(DType::I64);
    let p = b.param(DType::F32);
    let q = b.param(DType::F32);
    let zero = b.const_i64(0);
    let r = b.binary(B::Sub, i, lo);
    let g0 = b.binary(B::Ge, r, zero);
    let g1 = b.binary(B::Lt, r, len);
    let g = b.binary(B::And, g0, g1);
    let x = guarded_load(&mut b, DType::F32, r, g);
    let c = b.cast(r, DType::F32);
    let sx = b.unary(U::Sin, x);
    let e = b.unary(U::Exp, sx);
    let live = b.binary(B::Mul, e, p);
    let live = b.binary(B::Add, live, c);
    let pad = b.binary(B::Mul, q, c);
    let w = b.push(Inst::Where(g, live, pad), DType::F32);
    b.store(w);
    b.finish()
}

#[test]
fn where_computes_only_the_chosen_side() {
    let r = render(&where_branches(), &IDX64).unwrap();
    let src = &r.source;
    let body = &src[src.find("for (IDX i").expect("element loop")..];
    let open = body.find("if (").expect("the where is a branch:\n{src}");
    let split = body.find("} else {").expect("else side");
    let exp_at = body.find("expf(").expect("exp");
    let sin_at = body.find("sinf(").expect("sin");
    let load_at = body.find("in0[").expect("load");
    // the live side's work is inside the `if`, the pad side's multiply inside the `else`
    for (what, at) in [("exp", exp_at), ("sin", sin_at), ("load", load_at)] {
        assert!(
            open < at && at < split,
            "{what} outside the live branch:\n{body}"
        );
    }
    // the pad side (one multiply) is cheaper than a branch: computed before the `if`
    let pad_mul = body.find("__fmul_rn(").expect("pad multiply");
    assert!(pad_mul < open, "cheap side inside a branch:\n{body}");
    // the value both sides read is computed before the branch
    let cast_at = body.find("(float)").expect("cast");
    assert!(cast_at < open, "shared value inside a branch:\n{body}");
}

#[test]
fn scalar_option_renders_one_element_per_thread() {
    let vec = render(&chain_f32(), &IDX32).unwrap();
    assert_eq!(vec.per_thread, 4);
    let opts = RenderOptions {
        index32: true,
        scalar: true,
    };
    let r = render(&chain_f32(), &opts).unwrap();
    assert_eq!(r.per_thread, 1);
    assert!(!r.source.contains("lf_vec_"), "vectors in a scalar kernel");
    assert!(r.entry.ends_with("_i32_s") && r.entry != vec.entry);
}

#[test]
fn sin_and_cos_of_one_value_share_sincos() {
    let src = render(&chain_f32(), &IDX64).unwrap().source;
    assert!(src.contains("sincosf("), "no sincosf:\n{src}");
    assert!(
        !src.contains(" sinf(") && !src.contains(" cosf("),
        "separate sin/cos left:\n{src}"
    );
    // complex exp computes its sine and cosine together too
    let src = render(&complex_phase(), &IDX64).unwrap().source;
    assert!(
        src.contains("sincosf("),
        "complex exp without sincosf:\n{src}"
    );
}

/// e = exp(i*phase); out0 = e * amp (complex64), out1 = |e| (float32).
fn complex_phase() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let phase = load(&mut b, DType::F32, i);
    let amp = load(&mut b, DType::F32, i);
    let zero = konst(&mut b, Scalar::F32(0.0));
    let z = b.binary(B::Complex, zero, phase);
    let e = b.unary(U::Exp, z);
    let a = b.binary(B::Complex, amp, zero);
    let o0 = b.binary(B::Mul, e, a);
    let o1 = b.unary(U::Abs, e);
    b.store(o0);
    b.store(o1);
    b.finish()
}

/// Every complex op of dtype `d`, results summed per result dtype.
fn complex_ops(d: DType) -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let z = load(&mut b, d, i);
    let w = load(&mut b, d, i);
    let mut cs = Vec::new();
    for op in [
        U::Neg,
        U::Sqrt,
        U::Rsqrt,
        U::Exp,
        U::Expm1,
        U::Log,
        U::Log1p,
        U::Log2,
        U::Log10,
        U::Sin,
        U::Cos,
        U::Tan,
        U::Asin,
        U::Acos,
        U::Atan,
        U::Sinh,
        U::Cosh,
        U::Tanh,
        U::Sign,
        U::Square,
        U::Reciprocal,
        U::Conj,
    ] {
        cs.push(b.unary(op, z));
    }
    for op in [B::Add, B::Sub, B::Mul, B::Div, B::Pow] {
        cs.push(b.binary(op, z, w));
    }
    let mut rs = Vec::new();
    for op in [U::Abs, U::Real, U::Imag, U::Angle] {
        rs.push(b.unary(op, z));
    }
    let mut bs = vec![
        b.unary(U::IsNan, z),
        b.unary(U::IsInf, z),
        b.unary(U::IsFinite, w),
    ];
    bs.push(b.binary(B::Eq, z, w));
    bs.push(b.binary(B::Ne, z, w));
    let c = sum(&mut b, &cs);
    let r = sum(&mut b, &rs);
    let o = sum(&mut b, &bs);
    b.store(c);
    b.store(r);
    b.store(o);
    b.finish()
}

/// Integer ops of both widths, index division and modulo.
fn int_ops() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let outs = int_op_values(&mut b, i, &[DType::I32, DType::I64]);
    let p = b.param(DType::I64);
    let q = b.binary(B::IdxDiv, i, p);
    let r = b.binary(B::IdxMod, i, p);
    let qr = b.binary(B::Add, q, r);
    let o64 = b.binary(B::Add, outs[1], qr);
    b.store(outs[0]);
    b.store(o64);
    b.finish()
}

/// The integer ops of `int_ops` on the 8-, 16-bit and unsigned dtypes, one output each.
fn small_int_ops() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let ds = [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
    ];
    for v in int_op_values(&mut b, i, &ds) {
        b.store(v);
    }
    b.finish()
}

/// Per dtype of `ds`: binary and unary integer ops of two loads, summed, behind a `where`.
fn int_op_values(b: &mut Builder, i: ValueId, ds: &[DType]) -> Vec<ValueId> {
    let mut outs = Vec::new();
    for &d in ds {
        let x = load(b, d, i);
        let y = load(b, d, i);
        let mut vs = Vec::new();
        for op in [
            B::Add,
            B::Sub,
            B::Mul,
            B::FloorDiv,
            B::Mod,
            B::Pow,
            B::Maximum,
            B::Minimum,
        ] {
            vs.push(b.binary(op, x, y));
        }
        for op in [
            U::Neg,
            U::Abs,
            U::Sign,
            U::Square,
            U::Real,
            U::Imag,
            U::Conj,
        ] {
            vs.push(b.unary(op, x));
        }
        let lt = b.binary(B::Lt, x, y);
        let nan = b.unary(U::IsNan, x);
        let fin = b.unary(U::IsFinite, y);
        let t = b.binary(B::Xor, lt, nan);
        let t = b.binary(B::Or, t, fin);
        let nt = b.unary(U::Not, t);
        let s = sum(b, &vs);
        let s = b.select(nt, s, x);
        outs.push(s);
    }
    outs
}

/// One input of every dtype; output `t` is the sum of every input cast to `t`.
fn casts_all() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let ins: Vec<ValueId> = DType::ALL.iter().map(|&d| load(&mut b, d, i)).collect();
    for to in DType::ALL {
        let cs: Vec<ValueId> = ins.iter().map(|&v| b.cast(v, to)).collect();
        let s = sum(&mut b, &cs);
        b.store(s);
    }
    b.finish()
}

/// Standard normal f32 at counter `i + p1` under seed `p0` (no inputs, vectorized stores).
fn random_normal() -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let seed = b.param(DType::I64);
    let off = b.param(DType::I64);
    let ctr = b.binary(B::Add, i, off);
    let r = b.push(Inst::Random(RandomKind::Normal, ctr, seed), DType::F32);
    b.store(r);
    b.finish()
}

/// Rank 3, a transposed read, outputs of four dtypes, float floor-div/mod and random values.
fn multi_output() -> Kernel {
    let mut b = Builder::new(3);
    let a0 = axis(&mut b, 0);
    let a1 = axis(&mut b, 1);
    let a2 = axis(&mut b, 2);
    let s0 = b.param(DType::I64);
    let s1 = b.param(DType::I64);
    let p = b.param(DType::F32);
    let seed = b.param(DType::I64);
    let t = b.binary(B::Mul, a2, s0);
    let u = b.binary(B::Mul, a0, s1);
    let ix = b.binary(B::Add, t, u);
    let ix = b.binary(B::Add, ix, a1);
    let x = load(&mut b, DType::F32, ix);
    let sq = b.binary(B::Mul, x, p);
    let gt = b.binary(B::Gt, x, p);
    let fd = b.binary(B::FloorDiv, x, p);
    let md = b.binary(B::Mod, x, p);
    let mx = b.binary(B::Maximum, fd, md);
    let mn = b.binary(B::Minimum, mx, sq);
    let rd = b.unary(U::Round, mn);
    let sg = b.unary(U::Sign, rd);
    let i = index(&mut b);
    let u32_ = b.push(Inst::Random(RandomKind::Uniform, i, seed), DType::F32);
    let u64_ = b.push(Inst::Random(RandomKind::Uniform, i, seed), DType::F64);
    let n64 = b.push(Inst::Random(RandomKind::Normal, i, seed), DType::F64);
    let f = b.binary(B::Add, sg, u32_);
    let d = b.binary(B::Add, u64_, n64);
    let ci = b.cast(f, DType::I64);
    b.store(f);
    b.store(gt);
    b.store(d);
    b.store(ci);
    b.finish()
}

/// Every float op of dtype `d` summed into one output, with exact special constants.
fn float_ops(d: DType) -> Kernel {
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let x = load(&mut b, d, i);
    let y = load(&mut b, d, i);
    let mut vs = Vec::new();
    for op in [
        U::Neg,
        U::Abs,
        U::Sqrt,
        U::Rsqrt,
        U::Exp,
        U::Expm1,
        U::Log,
        U::Log1p,
        U::Log2,
        U::Log10,
        U::Sin,
        U::Cos,
        U::Tan,
        U::Asin,
        U::Acos,
        U::Atan,
        U::Sinh,
        U::Cosh,
        U::Tanh,
        U::Floor,
        U::Ceil,
        U::Round,
        U::Trunc,
        U::Sign,
        U::Square,
        U::Reciprocal,
        U::Real,
        U::Imag,
        U::Conj,
        U::Angle,
    ] {
        vs.push(b.unary(op, x));
    }
    for op in [
        B::Add,
        B::Sub,
        B::Mul,
        B::Div,
        B::FloorDiv,
        B::Mod,
        B::Pow,
        B::Atan2,
        B::Maximum,
        B::Minimum,
        B::Hypot,
    ] {
        vs.push(b.binary(op, x, y));
    }
    let (nan, ninf, nzero, tiny) = if d.is_half() {
        // the smallest subnormal of each 16-bit format
        let tiny = if d == DType::F16 { 6e-8 } else { 1e-40 };
        (
            Scalar::F64(f64::NAN).cast(d),
            Scalar::F64(f64::NEG_INFINITY).cast(d),
            Scalar::F64(-0.0).cast(d),
            Scalar::F64(tiny).cast(d),
        )
    } else if d == DType::F32 {
        (
            Scalar::F32(f32::NAN),
            Scalar::F32(f32::NEG_INFINITY),
            Scalar::F32(-0.0),
            Scalar::F32(1e-45),
        )
    } else {
        (
            Scalar::F64(f64::NAN),
            Scalar::F64(f64::NEG_INFINITY),
            Scalar::F64(-0.0),
            Scalar::F64(5e-324),
        )
    };
    let s = sum(&mut b, &vs);
    let c_nan = konst(&mut b, nan);
    let c_ninf = konst(&mut b, ninf);
    let c_nz = konst(&mut b, nzero);
    let c_tiny = konst(&mut b, tiny);
    let isn = b.unary(U::IsNan, y);
    let isi = b.unary(U::IsInf, y);
    let isf = b.unary(U::IsFinite, x);
    let s = b.select(isn, c_nan, s);
    let s = b.select(isi, c_ninf, s);
    let alt = b.binary(B::Add, c_nz, c_tiny);
    let s = b.select(isf, s, alt);
    b.store(s);
    b.finish()
}

/// Rank 0: out = x * p0 + p1 (f64).
fn rank0() -> Kernel {
    let mut b = Builder::new(0);
    let i = index(&mut b);
    let x = load(&mut b, DType::F64, i);
    let p0 = b.param(DType::F64);
    let p1 = b.param(DType::F64);
    let m = b.binary(B::Mul, x, p0);
    let o = b.binary(B::Add, m, p1);
    b.store(o);
    b.finish()
}

/// `sum(x * x) * p0` over the contiguous inner axis.
fn reduce_sumsq(d: DType) -> Kernel {
    let mut b = Builder::new(2);
    let i = index(&mut b);
    let x = load(&mut b, d, i);
    let sq = b.binary(B::Mul, x, x);
    let p = b.param(d);
    let r = b.reduce(ReduceOp::Sum, sq, ReduceLayout::Inner);
    let o = b.binary(B::Mul, r, p);
    b.store(o);
    b.finish()
}

/// `argmax` over axis 0 of an `[r, m]` input (strided reduced axis).
fn reduce_argmax_outer() -> Kernel {
    let mut b = Builder::new(2);
    let m = axis(&mut b, 0);
    let r = axis(&mut b, 1);
    let s = b.param(DType::I64);
    let rs = b.binary(B::Mul, r, s);
    let ix = b.binary(B::Add, rs, m);
    let x = load(&mut b, DType::F64, ix);
    let a = b.reduce(ReduceOp::ArgMax, x, ReduceLayout::Outer);
    b.store(a);
    b.finish()
}

/// `sum(x * p1)` over axis 0 of an `[r, m]` f32 input (the axis-0 mean's kernel).
fn reduce_sum_outer_f32() -> Kernel {
    let mut b = Builder::new(2);
    let m = axis(&mut b, 0);
    let r = axis(&mut b, 1);
    let s = b.param(DType::I64);
    let scale = b.param(DType::F32);
    let rs = b.binary(B::Mul, r, s);
    let ix = b.binary(B::Add, rs, m);
    let x = load(&mut b, DType::F32, ix);
    let xs = b.binary(B::Mul, x, scale);
    let a = b.reduce(ReduceOp::Sum, xs, ReduceLayout::Outer);
    b.store(a);
    b.finish()
}

/// `all(x != 0)` of an I32 input, and `max` of an I64 input.
fn reduce_all_max() -> Vec<Kernel> {
    let mut b = Builder::new(2);
    let i = index(&mut b);
    let x = load(&mut b, DType::I32, i);
    let z = konst(&mut b, Scalar::I32(0));
    let ne = b.binary(B::Ne, x, z);
    let r = b.reduce(ReduceOp::All, ne, ReduceLayout::Inner);
    b.store(r);
    let all = b.finish();
    let mut b = Builder::new(2);
    let i = index(&mut b);
    let x = load(&mut b, DType::I64, i);
    let r = b.reduce(ReduceOp::Max, x, ReduceLayout::Outer);
    let c = b.cast(r, DType::F64);
    let u = b.unary(U::Sqrt, c);
    b.store(u);
    vec![all, b.finish()]
}

/// `cumsum(x * p0)` along rows, then `+ p1` per element (an inclusive scan with a
/// producer and an epilogue); and `cumprod` of a complex input.
fn scans() -> Vec<Kernel> {
    let mut b = Builder::new(2);
    let i = index(&mut b);
    let x = load(&mut b, DType::F32, i);
    let p = b.param(DType::F32);
    let xs = b.binary(B::Mul, x, p);
    let q = b.param(DType::F32);
    let s = b.reduce(ReduceOp::Sum, xs, ReduceLayout::Scan);
    let o = b.binary(B::Add, s, q);
    b.store(o);
    let sum = b.finish();
    let mut b = Builder::new(2);
    let i = index(&mut b);
    let z = load(&mut b, DType::C128, i);
    let s = b.reduce(ReduceOp::Prod, z, ReduceLayout::Scan);
    b.store(s);
    vec![sum, b.finish()]
}

/// The snapshot corpus: (file stem, kernel, options).
fn corpus() -> Vec<(&'static str, Kernel, RenderOptions)> {
    vec![
        ("chain_f32", chain_f32(), IDX64),
        ("broadcast_mul", broadcast_mul(), IDX64),
        ("broadcast_mul_i32", broadcast_mul(), IDX32),
        ("pad_guarded", pad_guarded(), IDX64),
        ("where_branches", where_branches(), IDX64),
        ("complex_phase", complex_phase(), IDX64),
        ("complex_ops_c64", complex_ops(DType::C64), IDX64),
        ("complex_ops_c128", complex_ops(DType::C128), IDX64),
        ("int_ops", int_ops(), IDX64),
        ("small_int_ops", small_int_ops(), IDX64),
        ("casts_all", casts_all(), IDX64),
        ("random_normal", random_normal(), IDX64),
        ("multi_output", multi_output(), IDX64),
        ("float_ops_f32", float_ops(DType::F32), IDX64),
        ("float_ops_f64", float_ops(DType::F64), IDX64),
        ("float_ops_f16", float_ops(DType::F16), IDX64),
        ("float_ops_bf16", float_ops(DType::BF16), IDX64),
        ("rank0", rank0(), IDX64),
        ("reduce_sumsq_f32", reduce_sumsq(DType::F32), IDX32),
        ("reduce_sumsq_c128", reduce_sumsq(DType::C128), IDX64),
        ("reduce_sumsq_f16", reduce_sumsq(DType::F16), IDX32),
        ("reduce_argmax_outer", reduce_argmax_outer(), IDX64),
        ("reduce_sum_outer_f32", reduce_sum_outer_f32(), IDX32),
        ("reduce_all_i32", reduce_all_max()[0].clone(), IDX64),
        ("reduce_max_i64_sqrt", reduce_all_max()[1].clone(), IDX64),
        ("scan_sum_f32", scans()[0].clone(), IDX32),
        ("scan_prod_c128", scans()[1].clone(), IDX64),
    ]
}

/// The snapshot folder, found at run time: `cargo test` runs test binaries from the package
/// directory with `CARGO_MANIFEST_DIR` set, and a test binary copied to another machine
/// (`shared/tools/gpu-bundle`) is run from a copy of the package directory. A path fixed at
/// compile time (`env!`) would point into the building machine's checkout instead.
fn snapshot_dir() -> PathBuf {
    let root = match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => std::env::current_dir().unwrap_or_else(|e| panic!("current directory: {e}")),
    };
    root.join("tests/snapshots")
}

#[test]
fn snapshots_match() {
    let update = std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1");
    let dir = snapshot_dir();
    let mut failures = Vec::new();
    for (name, k, opts) in corpus() {
        let r = render(&k, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = dir.join(format!("{name}.cu"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &r.source).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
        if want != r.source {
            let line = want
                .lines()
                .zip(r.source.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(r.source.lines().count()));
            failures.push(format!("{name}.cu differs from line {}", line + 1));
        }
    }
    assert!(
        failures.is_empty(),
        "snapshots differ (UPDATE_SNAPSHOTS=1 rewrites them): {failures:?}"
    );
}

#[test]
fn sources_are_self_contained_and_deterministic() {
    for (name, k, opts) in corpus() {
        let a = render(&k, &opts).unwrap();
        let b = render(&k, &opts).unwrap();
        assert_eq!(a, b, "{name}");
        assert!(!a.source.contains("#include"), "{name}");
        assert!(a
            .source
            .contains(&format!("void __launch_bounds__(256) {}(", a.entry)));
        assert_eq!(a.block, 256);
    }
}

#[test]
fn entry_names() {
    let a = render(&chain_f32(), &IDX64).unwrap();
    let b = render(&chain_f32(), &IDX64).unwrap();
    let c = render(&chain_f32(), &IDX32).unwrap();
    assert_eq!(a.entry, b.entry);
    assert_eq!(a.entry, format!("lf_{:016x}", chain_f32().key_hash()));
    assert_eq!(c.entry, format!("{}_i32", a.entry));
    assert_ne!(a.entry, render(&broadcast_mul(), &IDX64).unwrap().entry);
    assert!(c.source.contains("typedef unsigned int IDX;"));
    assert!(a.source.contains("typedef unsigned long long IDX;"));
}

#[test]
fn dead_values_do_not_change_the_source() {
    // The same kernel with an extra unused value renders identically (normalized first).
    let k = rank0();
    let mut dead = k.clone();
    let first_f64 = k.values.iter().position(|v| v.dtype == DType::F64).unwrap() as u32;
    dead.values.push(lazyfuse_codegen::Value {
        inst: Inst::Unary(U::Exp, first_f64),
        dtype: DType::F64,
    });
    assert_eq!(render(&k, &IDX64).unwrap(), render(&dead, &IDX64).unwrap());
}

#[test]
fn vector_width_decisions() {
    let pt = |k: &Kernel| render(k, &IDX64).unwrap().per_thread;
    assert_eq!(pt(&chain_f32()), 4, "contiguous f32");
    assert_eq!(pt(&float_ops(DType::F64)), 2, "contiguous f64");
    assert_eq!(pt(&random_normal()), 4, "no inputs, f32 output");
    // loads at computed indices: lane indices first, one vector read when consecutive
    assert_eq!(pt(&broadcast_mul()), 2, "strided loads, f64 output");
    assert_eq!(pt(&pad_guarded()), 1, "guarded load");
    assert_eq!(pt(&where_branches()), 1, "load under one side of a where");
    assert_eq!(
        pt(&complex_phase()),
        4,
        "8- and 4-byte outputs: the smallest decides"
    );
    assert_eq!(pt(&casts_all()), 1, "a bool output");
    assert_eq!(pt(&rank0()), 1, "rank 0");
    let bsrc = render(&broadcast_mul(), &IDX64).unwrap().source;
    assert!(bsrc.contains("const bool ct7 = (ix7[0] & 1) == 0 && ix7[1] == ix7[0] + 1;"));
    assert!(bsrc.contains("pf0_7 = *(const lf_vec_f64*)(in0 + ix7[0]);"));
    assert!(bsrc.contains("for (int j = 0; j < 2; ++j) pf0_7.v[j] = in0[ix7[j]];"));
    let csrc = render(&complex_phase(), &IDX64).unwrap().source;
    assert!(csrc.contains("struct __align__(16) lf_vec4_c32 { c32 v[4]; };"));
    // a gather (index from a loaded value) stays one element per thread
    let gather = {
        let mut b = Builder::new(1);
        let i = index(&mut b);
        let ix = load(&mut b, DType::I64, i);
        let x = load(&mut b, DType::F32, ix);
        b.store(x);
        b.finish()
    };
    assert_eq!(pt(&gather), 1, "gather");
    // strided reductions: adjacent outputs per thread, one vector read per reduced row
    assert_eq!(pt(&reduce_sum_outer_f32()), 4, "outer f32 reduction");
    assert_eq!(pt(&reduce_argmax_outer()), 2, "outer f64 argmax");
    assert_eq!(
        pt(&reduce_sumsq(DType::F32)),
        1,
        "inner reductions: one output per thread"
    );
    let osrc = render(&reduce_sum_outer_f32(), &IDX32).unwrap().source;
    assert!(
        osrc.contains("const bool ct5 = (ix5[0] & 3) == 0;"),
        "consecutive by construction"
    );
    assert!(osrc.contains("pf0_5.v[j] = in0[ix5[0] + j];"));
    assert!(osrc.contains("if (mc + 4 <= M) {"));
    // Same-size 8-byte complex: 2 per thread; 16-byte complex: 1.
    let unary = |d: DType, op: U| {
        let mut b = Builder::new(1);
        let i = index(&mut b);
        let x = load(&mut b, d, i);
        let y = b.unary(op, x);
        b.store(y);
        b.finish()
    };
    assert_eq!(pt(&unary(DType::C64, U::Exp)), 2);
    assert_eq!(pt(&unary(DType::C128, U::Exp)), 1);
    assert_eq!(pt(&unary(DType::Bool, U::Not)), 1);
    assert_eq!(pt(&unary(DType::I32, U::Neg)), 4);
    assert_eq!(pt(&unary(DType::I64, U::Neg)), 2);
    let src = render(&chain_f32(), &IDX64).unwrap().source;
    assert!(src.contains("struct __align__(16) lf_vec_f32 { float v[4]; };"));
    assert!(src.contains("for (IDX i = nvec * 4 + tid; i < n; i += stride)"));
}

#[test]
fn helpers_only_when_used() {
    let src = render(&chain_f32(), &IDX64).unwrap().source;
    for h in ["c32", "lf_philox", "lf_floordiv", "lf_div_", "lf_mod_"] {
        assert!(!src.contains(h), "chain_f32 should not define {h}");
    }
    let src = render(&random_normal(), &IDX64).unwrap().source;
    assert!(src.contains("lf_philox") && src.contains("lf_normal_f64"));
    assert!(!src.contains("lf_uniform"));
}

#[test]
fn invalid_kernels_are_errors() {
    let mut k = rank0();
    k.values[0].dtype = DType::F32; // Index must be I64
    assert!(render(&k, &IDX64).is_err());
    let mut k = rank0();
    k.stores.clear();
    assert!(render(&k, &IDX64).is_err());
}

/// Reads a little-endian value of `N` bytes at `off`.
fn bytes<const N: usize>(buf: &[u8], off: usize) -> [u8; N] {
    buf[off..off + N].try_into().unwrap()
}

#[test]
fn pack_args_mixed_layout() {
    // inputs [F32, C128], outputs [Bool], rank 2,
    // params [Bool, I32, C64, I64, Bool, C128, F32]. Expected C layout, by hand:
    //   0 in0, 8 in1, 16 out0, 24 n, 32 shape[0], 40 shape[1],
    //   48 p0 bool, (3 pad) 52 p1 int, 56 p2 c32 (align 8), 64 p3 long long,
    //   72 p4 bool, (7 pad) 80 p5 c64 (align 16), 96 p6 float, (12 pad) size 112.
    let mut b = Builder::new(2);
    let i = index(&mut b);
    let x = load(&mut b, DType::F32, i);
    let _z = b.input(DType::C128);
    let ps: Vec<ValueId> = [
        DType::Bool,
        DType::I32,
        DType::C64,
        DType::I64,
        DType::Bool,
        DType::C128,
        DType::F32,
    ]
    .iter()
    .map(|&d| b.param(d))
    .collect();
    let g = b.binary(B::Gt, x, ps[6]);
    let g = b.binary(B::And, g, ps[0]);
    b.store(g);
    let k = b.finish();
    assert_eq!(k.params.len(), 7);

    let src = render(&k, &IDX64).unwrap().source;
    assert!(src.contains("}; /* 112 bytes, align 16 */"), "{src}");

    let args = LaunchArgs {
        shape: vec![3, 5].into(),
        params: vec![
            Scalar::Bool(true),
            Scalar::I32(-7),
            Scalar::C64(Complex32::new(1.5, -2.0)),
            Scalar::I64(-1234567890123),
            Scalar::Bool(false),
            Scalar::C128(Complex64::new(0.25, f64::NAN)),
            Scalar::F32(3.0),
        ]
        .into(),
    };
    let inputs = [0x1111_2222_3333_4400u64, 0x5555_6666_7777_8800];
    let outputs = [0x9999_aaaa_bbbb_cc00u64];
    let buf = pack_args(&k, &IDX64, &inputs, &outputs, &args).unwrap();
    assert_eq!(buf.len(), 112);
    let mut want = vec![0u8; 112];
    want[0..8].copy_from_slice(&inputs[0].to_le_bytes());
    want[8..16].copy_from_slice(&inputs[1].to_le_bytes());
    want[16..24].copy_from_slice(&outputs[0].to_le_bytes());
    want[24..32].copy_from_slice(&15i64.to_le_bytes());
    want[32..40].copy_from_slice(&3i64.to_le_bytes());
    want[40..48].copy_from_slice(&5i64.to_le_bytes());
    want[48] = 1;
    want[52..56].copy_from_slice(&(-7i32).to_le_bytes());
    want[56..60].copy_from_slice(&1.5f32.to_le_bytes());
    want[60..64].copy_from_slice(&(-2.0f32).to_le_bytes());
    want[64..72].copy_from_slice(&(-1234567890123i64).to_le_bytes());
    want[72] = 0;
    want[80..88].copy_from_slice(&0.25f64.to_le_bytes());
    want[88..96].copy_from_slice(&f64::NAN.to_le_bytes());
    want[96..100].copy_from_slice(&3.0f32.to_le_bytes());
    assert_eq!(buf, want);
    assert_eq!(f32::from_le_bytes(bytes(&buf, 96)), 3.0);

    // The layout the renderer reports agrees.
    let layout = cuda::arg_layout(&k).unwrap();
    let offsets: Vec<usize> = layout.fields.iter().map(|f| f.offset).collect();
    assert_eq!(offsets, [0, 8, 16, 24, 32, 48, 52, 56, 64, 72, 80, 96]);
    assert_eq!((layout.size, layout.align), (112, 16));
}

#[test]
fn pack_args_rank0_and_no_params() {
    let k = random_normal();
    let args = LaunchArgs {
        shape: vec![10].into(),
        params: vec![Scalar::I64(42), Scalar::I64(7)].into(),
    };
    let buf = pack_args(&k, &IDX32, &[], &[0xabc0], &args).unwrap();
    // out0 @0, n @8, shape[1] @16, p0 @24, p1 @32: size 40.
    assert_eq!(buf.len(), 40);
    assert_eq!(u64::from_le_bytes(bytes(&buf, 0)), 0xabc0);
    assert_eq!(i64::from_le_bytes(bytes(&buf, 8)), 10);
    assert_eq!(i64::from_le_bytes(bytes(&buf, 16)), 10);
    assert_eq!(i64::from_le_bytes(bytes(&buf, 24)), 42);
    assert_eq!(i64::from_le_bytes(bytes(&buf, 32)), 7);

    let k = rank0();
    let args = LaunchArgs {
        shape: vec![].into(),
        params: vec![Scalar::F64(2.0), Scalar::F64(-1.0)].into(),
    };
    let buf = pack_args(&k, &IDX64, &[8], &[16], &args).unwrap();
    // in0 @0, out0 @8, n @16 (= 1), p0 @24, p1 @32.
    assert_eq!(buf.len(), 40);
    assert_eq!(i64::from_le_bytes(bytes(&buf, 16)), 1);
    assert_eq!(f64::from_le_bytes(bytes(&buf, 24)), 2.0);
    assert_eq!(f64::from_le_bytes(bytes(&buf, 32)), -1.0);
}

#[test]
fn pack_args_rejects_mismatches() {
    let k = rank0();
    let good = LaunchArgs {
        shape: vec![].into(),
        params: vec![Scalar::F64(2.0), Scalar::F64(-1.0)].into(),
    };
    assert!(pack_args(&k, &IDX64, &[8], &[16], &good).is_ok());
    assert!(pack_args(&k, &IDX64, &[], &[16], &good).is_err(), "inputs");
    assert!(
        pack_args(&k, &IDX64, &[8], &[16, 24], &good).is_err(),
        "outputs"
    );
    let mut bad = good.clone();
    bad.params[1] = Scalar::F32(1.0);
    assert!(
        pack_args(&k, &IDX64, &[8], &[16], &bad).is_err(),
        "param dtype"
    );
    bad.params.pop();
    assert!(
        pack_args(&k, &IDX64, &[8], &[16], &bad).is_err(),
        "param count"
    );
    let mut bad = good.clone();
    bad.shape = vec![4].into();
    assert!(pack_args(&k, &IDX64, &[8], &[16], &bad).is_err(), "rank");
    // 32-bit index math refuses 2^31 elements.
    let k = random_normal();
    let big = LaunchArgs {
        shape: vec![1 << 31].into(),
        params: vec![Scalar::I64(0), Scalar::I64(0)].into(),
    };
    assert!(pack_args(&k, &IDX32, &[], &[0], &big).is_err());
    assert!(pack_args(&k, &IDX64, &[], &[0], &big).is_ok());
}

#[test]
fn oversized_argument_struct_is_an_error() {
    // 8 pointer bytes... + 500 I64 params = more than 4000 bytes.
    let mut b = Builder::new(1);
    let i = index(&mut b);
    let ps: Vec<ValueId> = (0..500).map(|_| b.param(DType::I64)).collect();
    let mut acc = i;
    for p in ps {
        acc = b.binary(B::Add, acc, p);
    }
    b.store(acc);
    let k = b.finish();
    let e = render(&k, &IDX64).unwrap_err();
    assert!(e.0.contains("4000"), "{e}");
    let args = LaunchArgs {
        shape: vec![1].into(),
        params: vec![Scalar::I64(0); 500].into(),
    };
    assert!(pack_args(&k, &IDX64, &[], &[0], &args).is_err());
}

#[test]
fn literals_are_exact() {
    let src = render(&float_ops(DType::F32), &IDX64).unwrap().source;
    assert!(src.contains("__int_as_float((int)0x7fc00000u)"), "NaN");
    assert!(src.contains("__int_as_float((int)0xff800000u)"), "-inf");
    assert!(src.contains("(-0e0f)"), "-0");
    assert!(src.contains("1e-45f"), "subnormal");
    let src = render(&float_ops(DType::F64), &IDX64).unwrap().source;
    assert!(src.contains("__longlong_as_double((long long)0xfff0000000000000ull)"));
    assert!(src.contains("5e-324"));
}

/// Compiles `src` with NVRTC for sm_90; the log on failure (or warnings) as the error.
fn nvrtc_compile(src: &str, name: &str) -> Result<(), String> {
    use cudarc::nvrtc::result;
    use std::ffi::CString;
    let csrc = CString::new(src).unwrap();
    let cname = CString::new(format!("{name}.cu")).unwrap();
    let prog = result::create_program(&csrc, Some(&cname)).map_err(|e| format!("{e:?}"))?;
    // SAFETY: `prog` was just created and is destroyed exactly once below; `csrc` and
    // `cname` outlive it.
    let out = unsafe { result::compile_program(prog, &["--gpu-architecture=sm_90"]) };
    // SAFETY: as above, `prog` is live.
    let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
    let log: String = log
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8 as char)
        .collect();
    // SAFETY: `prog` is live and not used afterwards.
    unsafe { result::destroy_program(prog) }.map_err(|e| format!("{e:?}"))?;
    match out {
        Err(e) => Err(format!("{e:?}\n{log}")),
        Ok(()) if log.contains("warning") => Err(format!("warnings:\n{log}")),
        Ok(()) => Ok(()),
    }
}

#[test]
fn nvrtc_compiles_every_source() {
    // SAFETY: only probes whether the NVRTC library can be loaded.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !present {
        assert!(
            std::env::var("LAZYFUSE_REQUIRE_NVRTC").map_or(true, |v| v != "1"),
            "LAZYFUSE_REQUIRE_NVRTC=1 but NVRTC (libnvrtc.so.13) cannot be loaded"
        );
        println!("nvrtc_compiles_every_source: skipped, NVRTC not found");
        return;
    }
    let mut failures = Vec::new();
    let mut compiled = 0;
    for (name, k, _) in corpus() {
        for opts in [IDX64, IDX32] {
            let r = render(&k, &opts).unwrap();
            match nvrtc_compile(&r.source, name) {
                Ok(()) => compiled += 1,
                Err(log) => failures.push(format!("{name} (index32={}): {log}", opts.index32)),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "NVRTC failures:\n{}",
        failures.join("\n")
    );
    println!("nvrtc_compiles_every_source: {compiled} sources compiled for sm_90");
}
