//! Tests of the host interpreter (`interp::run`) against hand-computed values and
//! independent formulas, including NumPy's special cases (see SEMANTICS.md).

use lazyfuse_codegen::ir::{Builder, Inst, Kernel};
use lazyfuse_codegen::{
    interp, semantics, BinaryOp, DType, HostBuf, IrError, LaunchArgs, RandomKind, Scalar, UnaryOp,
    ValueId,
};
use num_complex::{Complex32, Complex64};

// ------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------

/// Runs elements `start .. start + len` of `k` and returns the outputs.
fn run_range(
    k: &Kernel,
    inputs: &[HostBuf],
    shape: &[usize],
    params: &[Scalar],
    start: usize,
    len: usize,
) -> Result<Vec<HostBuf>, IrError> {
    run_range_by(k, inputs, shape, params, start, len, false)
}

/// [`run_range`] through `interp::run`, or, when `planned`, through a plan of the whole
/// launch (`interp::Planned`), as the CPU backend runs the chunks of a split launch.
fn run_range_by(
    k: &Kernel,
    inputs: &[HostBuf],
    shape: &[usize],
    params: &[Scalar],
    start: usize,
    len: usize,
    planned: bool,
) -> Result<Vec<HostBuf>, IrError> {
    let ins: Vec<_> = inputs.iter().map(|b| b.as_slice()).collect();
    let mut outs: Vec<HostBuf> = k.outputs.iter().map(|&d| HostBuf::zeros(d, len)).collect();
    let mut views: Vec<_> = outs.iter_mut().map(|b| b.as_slice_mut()).collect();
    let args = LaunchArgs {
        shape: shape.to_vec().into(),
        params: params.to_vec().into(),
    };
    if planned {
        interp::Planned::new(k, &ins, &args)?.run(&ins, &mut views, &args, start)?;
    } else {
        interp::run(k, &ins, &mut views, &args, start)?;
    }
    drop(views);
    Ok(outs)
}

/// Runs every element of `k`.
fn run_all(k: &Kernel, inputs: &[HostBuf], shape: &[usize], params: &[Scalar]) -> Vec<HostBuf> {
    let n = shape.iter().product();
    run_range(k, inputs, shape, params, 0, n).expect("run")
}

/// Adds an input of dtype `d` and an unguarded load of it at `index`.
fn load_at(b: &mut Builder, d: DType, index: ValueId) -> ValueId {
    let input = b.input(d);
    b.push(
        Inst::Load {
            input,
            index,
            guard: None,
        },
        d,
    )
}

fn len(b: &HostBuf) -> usize {
    b.len()
}

/// `op(x)` elementwise, computed three ways (column, broadcast param, through a gather)
/// which must agree bitwise; returns the column result.
fn apply1(op: UnaryOp, x: HostBuf) -> HostBuf {
    let n = len(&x);
    let d = x.dtype();
    // Column operand (contiguous load).
    let mut b = Builder::new(1);
    let i = b.input(d);
    let ix = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: i,
            index: ix,
            guard: None,
        },
        d,
    );
    let r = b.unary(op, l);
    b.store(r);
    let k = b.finish();
    let col = run_all(&k, std::slice::from_ref(&x), &[n], &[])
        .pop()
        .unwrap();
    // Uniform operand: one launch per element with the element as a param.
    let mut b = Builder::new(1);
    let p = b.param(d);
    let r = b.unary(op, p);
    b.store(r);
    let k = b.finish();
    for j in 0..n {
        let s = scalar_at(&x, j);
        let out = run_all(&k, &[], &[2], &[s]).pop().unwrap();
        assert_eq!(
            scalar_at(&out, 0),
            scalar_at(&col, j),
            "{op:?} uniform at {j}"
        );
        assert_eq!(
            scalar_at(&out, 1),
            scalar_at(&col, j),
            "{op:?} uniform at {j}"
        );
    }
    col
}

/// `op(a, b)` elementwise, computed as column/column, column/param, param/column and
/// param/param, which must agree bitwise; returns the column/column result.
fn apply2(op: BinaryOp, a: HostBuf, bb: HostBuf) -> HostBuf {
    let n = len(&a);
    assert_eq!(n, len(&bb));
    let (da, db) = (a.dtype(), bb.dtype());
    let mut b = Builder::new(1);
    let ia = b.input(da);
    let ib = b.input(db);
    let ix = b.push(Inst::Index, DType::I64);
    let la = b.push(
        Inst::Load {
            input: ia,
            index: ix,
            guard: None,
        },
        da,
    );
    let lb = b.push(
        Inst::Load {
            input: ib,
            index: ix,
            guard: None,
        },
        db,
    );
    let r = b.binary(op, la, lb);
    b.store(r);
    let k = b.finish();
    let col = run_all(&k, &[a.clone(), bb.clone()], &[n], &[])
        .pop()
        .unwrap();
    for mode in 0..3 {
        let mut b = Builder::new(1);
        let (x, y, ins): (ValueId, ValueId, Vec<DType>) = match mode {
            0 => {
                let i = b.input(da);
                let ix = b.push(Inst::Index, DType::I64);
                let l = b.push(
                    Inst::Load {
                        input: i,
                        index: ix,
                        guard: None,
                    },
                    da,
                );
                let p = b.param(db);
                (l, p, vec![da])
            }
            1 => {
                let p = b.param(da);
                let i = b.input(db);
                let ix = b.push(Inst::Index, DType::I64);
                let l = b.push(
                    Inst::Load {
                        input: i,
                        index: ix,
                        guard: None,
                    },
                    db,
                );
                (p, l, vec![db])
            }
            _ => {
                let p = b.param(da);
                let q = b.param(db);
                (p, q, vec![])
            }
        };
        let r = b.binary(op, x, y);
        b.store(r);
        let k = b.finish();
        for j in 0..n {
            let (sa, sb) = (scalar_at(&a, j), scalar_at(&bb, j));
            let (inputs, params) = match mode {
                0 => (vec![single(sa)], vec![sb]),
                1 => (vec![single(sb)], vec![sa]),
                _ => (vec![], vec![sa, sb]),
            };
            assert_eq!(ins.len(), inputs.len());
            let out = run_all(&k, &inputs, &[1], &params).pop().unwrap();
            assert_eq!(
                scalar_at(&out, 0),
                scalar_at(&col, j),
                "{op:?} mode {mode} at {j}"
            );
        }
    }
    col
}

/// A cast of every element of `x` to `d`.
fn cast(x: HostBuf, d: DType) -> HostBuf {
    let n = len(&x);
    let mut b = Builder::new(1);
    let i = b.input(x.dtype());
    let ix = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: i,
            index: ix,
            guard: None,
        },
        x.dtype(),
    );
    let r = b.cast(l, d);
    b.store(r);
    run_all(&b.finish(), &[x], &[n], &[]).pop().unwrap()
}

fn single(s: Scalar) -> HostBuf {
    match s {
        Scalar::Bool(v) => HostBuf::Bool(vec![v]),
        Scalar::I32(v) => HostBuf::I32(vec![v]),
        Scalar::I64(v) => HostBuf::I64(vec![v]),
        Scalar::F32(v) => HostBuf::F32(vec![v]),
        Scalar::F64(v) => HostBuf::F64(vec![v]),
        Scalar::C64(v) => HostBuf::C64(vec![v]),
        Scalar::C128(v) => HostBuf::C128(vec![v]),
        Scalar::U8(v) => HostBuf::U8(vec![v]),
        Scalar::U16(v) => HostBuf::U16(vec![v]),
        Scalar::U32(v) => HostBuf::U32(vec![v]),
        Scalar::U64(v) => HostBuf::U64(vec![v]),
        Scalar::I8(v) => HostBuf::I8(vec![v]),
        Scalar::I16(v) => HostBuf::I16(vec![v]),
        Scalar::F16(v) => HostBuf::F16(vec![v]),
        Scalar::BF16(v) => HostBuf::BF16(vec![v]),
    }
}

fn scalar_at(b: &HostBuf, j: usize) -> Scalar {
    match b {
        HostBuf::Bool(v) => Scalar::Bool(v[j]),
        HostBuf::I32(v) => Scalar::I32(v[j]),
        HostBuf::I64(v) => Scalar::I64(v[j]),
        HostBuf::F32(v) => Scalar::F32(v[j]),
        HostBuf::F64(v) => Scalar::F64(v[j]),
        HostBuf::C64(v) => Scalar::C64(v[j]),
        HostBuf::C128(v) => Scalar::C128(v[j]),
        HostBuf::U8(v) => Scalar::U8(v[j]),
        HostBuf::U16(v) => Scalar::U16(v[j]),
        HostBuf::U32(v) => Scalar::U32(v[j]),
        HostBuf::U64(v) => Scalar::U64(v[j]),
        HostBuf::I8(v) => Scalar::I8(v[j]),
        HostBuf::I16(v) => Scalar::I16(v[j]),
        HostBuf::F16(v) => Scalar::F16(v[j]),
        HostBuf::BF16(v) => Scalar::BF16(v[j]),
    }
}

fn f64s(b: HostBuf) -> Vec<f64> {
    match b {
        HostBuf::F64(v) => v,
        other => panic!("expected float64, got {}", other.dtype()),
    }
}
fn f32s(b: HostBuf) -> Vec<f32> {
    match b {
        HostBuf::F32(v) => v,
        other => panic!("expected float32, got {}", other.dtype()),
    }
}
fn i32s(b: HostBuf) -> Vec<i32> {
    match b {
        HostBuf::I32(v) => v,
        other => panic!("expected int32, got {}", other.dtype()),
    }
}
fn i64s(b: HostBuf) -> Vec<i64> {
    match b {
        HostBuf::I64(v) => v,
        other => panic!("expected int64, got {}", other.dtype()),
    }
}
fn bools(b: HostBuf) -> Vec<bool> {
    match b {
        HostBuf::Bool(v) => v,
        other => panic!("expected bool, got {}", other.dtype()),
    }
}
fn c128s(b: HostBuf) -> Vec<Complex64> {
    match b {
        HostBuf::C128(v) => v,
        other => panic!("expected complex128, got {}", other.dtype()),
    }
}
fn c64s(b: HostBuf) -> Vec<Complex32> {
    match b {
        HostBuf::C64(v) => v,
        other => panic!("expected complex64, got {}", other.dtype()),
    }
}

/// Bitwise equality, except that any NaN equals any NaN.
fn same64(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}
fn same32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}
fn assert_f64s(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(same64(g, w), "{what}[{j}]: got {g:?}, want {w:?}");
    }
}
fn assert_f32s(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(same32(g, w), "{what}[{j}]: got {g:?}, want {w:?}");
    }
}
fn assert_c128s(got: &[Complex64], want: &[Complex64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            same64(g.re, w.re) && same64(g.im, w.im),
            "{what}[{j}]: got {g:?}, want {w:?}"
        );
    }
}
fn close_c128(got: &[Complex64], want: &[Complex64], tol: f64, what: &str) {
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).norm() <= tol, "{what}[{j}]: got {g:?}, want {w:?}");
    }
}

type F64Fn = fn(f64) -> f64;
type F32Fn = fn(f32) -> f32;

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

fn f64_samples() -> Vec<f64> {
    vec![
        0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 3.7, -3.7, 1e300, -1e-300, NAN, INF, -INF,
    ]
}

// ------------------------------------------------------------------------------------
// Unary ops
// ------------------------------------------------------------------------------------

#[test]
fn unary_f64_matches_std() {
    let xs = f64_samples();
    let table: Vec<(UnaryOp, F64Fn)> = vec![
        (UnaryOp::Neg, |x| -x),
        (UnaryOp::Abs, f64::abs),
        (UnaryOp::Sqrt, f64::sqrt),
        (UnaryOp::Rsqrt, |x| 1.0 / x.sqrt()),
        (UnaryOp::Exp, f64::exp),
        (UnaryOp::Expm1, f64::exp_m1),
        (UnaryOp::Log, f64::ln),
        (UnaryOp::Log1p, f64::ln_1p),
        (UnaryOp::Log2, f64::log2),
        (UnaryOp::Log10, f64::log10),
        (UnaryOp::Sin, f64::sin),
        (UnaryOp::Cos, f64::cos),
        (UnaryOp::Tan, f64::tan),
        (UnaryOp::Asin, f64::asin),
        (UnaryOp::Acos, f64::acos),
        (UnaryOp::Atan, f64::atan),
        (UnaryOp::Sinh, f64::sinh),
        (UnaryOp::Cosh, f64::cosh),
        (UnaryOp::Tanh, f64::tanh),
        (UnaryOp::Floor, f64::floor),
        (UnaryOp::Ceil, f64::ceil),
        (UnaryOp::Trunc, f64::trunc),
        (UnaryOp::Square, |x| x * x),
        (UnaryOp::Reciprocal, |x| 1.0 / x),
        (UnaryOp::Real, |x| x),
        (UnaryOp::Imag, |_| 0.0),
        (UnaryOp::Conj, |x| x),
        (UnaryOp::Angle, |x| 0.0f64.atan2(x)),
    ];
    for (op, f) in table {
        let got = f64s(apply1(op, HostBuf::F64(xs.clone())));
        let want: Vec<f64> = xs.iter().map(|&x| f(x)).collect();
        if is_transcendental(op) {
            assert_f64s_near(&got, &want, op.name());
        } else {
            assert_f64s(&got, &want, op.name());
        }
    }
}

/// The ops computed by `vmath` rather than the C library (the transcendental ones,
/// `UnaryOp::is_transcendental`): within 2 ulp of it, with the same special values (NaN,
/// infinities, zeros with their sign).
fn is_transcendental(op: UnaryOp) -> bool {
    op.is_transcendental()
}

fn assert_f64s_near(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() || w.is_infinite() || w == 0.0 {
            same64(g, w)
        } else {
            (g.to_bits() as i64 - w.to_bits() as i64).abs() <= 2
        };
        assert!(ok, "{what}[{j}]: got {g:?}, want {w:?}");
    }
}

fn assert_f32s_near(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() || w.is_infinite() || w == 0.0 {
            same32(g, w)
        } else {
            (g.to_bits() as i64 - w.to_bits() as i64).abs() <= 2
        };
        assert!(ok, "{what}[{j}]: got {g:?}, want {w:?}");
    }
}

#[test]
fn unary_f32_matches_std() {
    let xs: Vec<f32> = f64_samples().iter().map(|&x| x as f32).collect();
    let table: Vec<(UnaryOp, F32Fn)> = vec![
        (UnaryOp::Neg, |x| -x),
        (UnaryOp::Abs, f32::abs),
        (UnaryOp::Sqrt, f32::sqrt),
        (UnaryOp::Exp, f32::exp),
        (UnaryOp::Log, f32::ln),
        (UnaryOp::Sin, f32::sin),
        (UnaryOp::Tanh, f32::tanh),
        (UnaryOp::Floor, f32::floor),
        (UnaryOp::Ceil, f32::ceil),
        (UnaryOp::Square, |x| x * x),
        (UnaryOp::Reciprocal, |x| 1.0 / x),
    ];
    for (op, f) in table {
        let got = f32s(apply1(op, HostBuf::F32(xs.clone())));
        let want: Vec<f32> = xs.iter().map(|&x| f(x)).collect();
        if is_transcendental(op) {
            assert_f32s_near(&got, &want, op.name());
        } else {
            assert_f32s(&got, &want, op.name());
        }
    }
}

#[test]
fn round_is_half_to_even_and_keeps_negative_zero() {
    let xs = vec![
        2.5,
        3.5,
        -2.5,
        -0.5,
        0.5,
        1.5,
        -0.0,
        0.49999999999999994,
        NAN,
    ];
    let want = [2.0, 4.0, -2.0, -0.0, 0.0, 2.0, -0.0, 0.0, NAN];
    let got = f64s(apply1(UnaryOp::Round, HostBuf::F64(xs.clone())));
    assert_f64s(&got, &want, "round f64");
    assert!(got[3].is_sign_negative(), "round(-0.5) must be -0.0");
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let got = f32s(apply1(UnaryOp::Round, HostBuf::F32(xs32)));
    assert_eq!(got[0], 2.0);
    assert_eq!(got[1], 4.0);
    assert!(got[3] == 0.0 && got[3].is_sign_negative());
}

#[test]
fn sign_of_floats() {
    let xs = vec![-3.0, -0.0, 0.0, 2.0, NAN, -INF, INF];
    let got = f64s(apply1(UnaryOp::Sign, HostBuf::F64(xs)));
    assert_f64s(&got, &[-1.0, 0.0, 0.0, 1.0, NAN, -1.0, 1.0], "sign");
    assert!(got[1].is_sign_positive(), "sign(-0.0) must be +0.0");
    let got = f32s(apply1(
        UnaryOp::Sign,
        HostBuf::F32(vec![-0.0, -7.0, f32::NAN]),
    ));
    assert!(got[0] == 0.0 && got[0].is_sign_positive());
    assert_eq!(got[1], -1.0);
    assert!(got[2].is_nan());
}

#[test]
fn float_classification() {
    let xs = vec![1.0, NAN, INF, -INF, 0.0];
    let nan = bools(apply1(UnaryOp::IsNan, HostBuf::F64(xs.clone())));
    let inf = bools(apply1(UnaryOp::IsInf, HostBuf::F64(xs.clone())));
    let fin = bools(apply1(UnaryOp::IsFinite, HostBuf::F64(xs)));
    assert_eq!(nan, [false, true, false, false, false]);
    assert_eq!(inf, [false, false, true, true, false]);
    assert_eq!(fin, [true, false, false, false, true]);
    let ints = HostBuf::I32(vec![0, -5, i32::MIN]);
    assert_eq!(bools(apply1(UnaryOp::IsNan, ints.clone())), [false; 3]);
    assert_eq!(bools(apply1(UnaryOp::IsInf, ints.clone())), [false; 3]);
    assert_eq!(bools(apply1(UnaryOp::IsFinite, ints)), [true; 3]);
    let bs = HostBuf::Bool(vec![true, false]);
    assert_eq!(bools(apply1(UnaryOp::IsFinite, bs.clone())), [true, true]);
    assert_eq!(bools(apply1(UnaryOp::IsNan, bs)), [false, false]);
}

#[test]
fn unary_integers_wrap() {
    let xs = vec![i32::MIN, -7, 0, 5, i32::MAX];
    let x = HostBuf::I32(xs.clone());
    assert_eq!(
        i32s(apply1(UnaryOp::Neg, x.clone())),
        [i32::MIN, 7, 0, -5, -i32::MAX]
    );
    assert_eq!(
        i32s(apply1(UnaryOp::Abs, x.clone())),
        [i32::MIN, 7, 0, 5, i32::MAX]
    );
    assert_eq!(i32s(apply1(UnaryOp::Sign, x.clone())), [-1, -1, 0, 1, 1]);
    let sq: Vec<i32> = xs.iter().map(|&v| v.wrapping_mul(v)).collect();
    assert_eq!(i32s(apply1(UnaryOp::Square, x.clone())), sq);
    assert_eq!(i32s(apply1(UnaryOp::Real, x.clone())), xs);
    assert_eq!(i32s(apply1(UnaryOp::Imag, x.clone())), [0; 5]);
    assert_eq!(i32s(apply1(UnaryOp::Conj, x)), xs);
    let y = HostBuf::I64(vec![i64::MIN, -3, 4]);
    assert_eq!(i64s(apply1(UnaryOp::Neg, y.clone())), [i64::MIN, 3, -4]);
    assert_eq!(i64s(apply1(UnaryOp::Sign, y)), [-1, -1, 1]);
}

#[test]
fn unary_bool() {
    let x = HostBuf::Bool(vec![true, false]);
    assert_eq!(bools(apply1(UnaryOp::Not, x.clone())), [false, true]);
    assert_eq!(bools(apply1(UnaryOp::Conj, x)), [true, false]);
}

#[test]
fn unary_complex() {
    let zs = vec![
        Complex64::new(3.0, 4.0),
        Complex64::new(-1.0, 0.0),
        Complex64::new(0.0, -2.0),
        Complex64::new(0.0, 0.0),
    ];
    let z = HostBuf::C128(zs.clone());
    assert_f64s(
        &f64s(apply1(UnaryOp::Abs, z.clone())),
        &[5.0, 1.0, 2.0, 0.0],
        "cabs",
    );
    assert_f64s(
        &f64s(apply1(UnaryOp::Angle, z.clone())),
        &[
            4.0f64.atan2(3.0),
            std::f64::consts::PI,
            -std::f64::consts::FRAC_PI_2,
            0.0,
        ],
        "angle",
    );
    assert_f64s(
        &f64s(apply1(UnaryOp::Real, z.clone())),
        &[3.0, -1.0, 0.0, 0.0],
        "real",
    );
    assert_f64s(
        &f64s(apply1(UnaryOp::Imag, z.clone())),
        &[4.0, 0.0, -2.0, 0.0],
        "imag",
    );
    let conj: Vec<Complex64> = zs.iter().map(|z| Complex64::new(z.re, -z.im)).collect();
    assert_c128s(&c128s(apply1(UnaryOp::Conj, z.clone())), &conj, "conj");
    let neg: Vec<Complex64> = zs.iter().map(|z| Complex64::new(-z.re, -z.im)).collect();
    assert_c128s(&c128s(apply1(UnaryOp::Neg, z.clone())), &neg, "neg");
    assert_c128s(
        &c128s(apply1(UnaryOp::Sign, z.clone())),
        &[
            Complex64::new(0.6, 0.8),
            Complex64::new(-1.0, 0.0),
            Complex64::new(0.0, -1.0),
            Complex64::new(0.0, 0.0),
        ],
        "csign",
    );
    let sq: Vec<Complex64> = zs
        .iter()
        .map(|z| Complex64::new(z.re * z.re - z.im * z.im, 2.0 * z.re * z.im))
        .collect();
    assert_c128s(&c128s(apply1(UnaryOp::Square, z.clone())), &sq, "csquare");
    // sqrt(-1) = i, sqrt(3+4i) = 2+i, sqrt(-2i) = 1-i.
    close_c128(
        &c128s(apply1(UnaryOp::Sqrt, z.clone())),
        &[
            Complex64::new(2.0, 1.0),
            Complex64::new(0.0, 1.0),
            Complex64::new(1.0, -1.0),
            Complex64::new(0.0, 0.0),
        ],
        1e-15,
        "csqrt",
    );
    // exp(i pi) = -1; log(-1) = i pi.
    let e = c128s(apply1(
        UnaryOp::Exp,
        HostBuf::C128(vec![Complex64::new(0.0, std::f64::consts::PI)]),
    ));
    close_c128(&e, &[Complex64::new(-1.0, 0.0)], 1e-15, "cexp");
    let l = c128s(apply1(
        UnaryOp::Log,
        HostBuf::C128(vec![Complex64::new(-1.0, 0.0)]),
    ));
    close_c128(
        &l,
        &[Complex64::new(0.0, std::f64::consts::PI)],
        1e-15,
        "clog",
    );
    // log2(8i) = 3 + i pi/(2 ln 2); log10(100) = 2; log1p and expm1 near 0.
    let l2 = c128s(apply1(
        UnaryOp::Log2,
        HostBuf::C128(vec![Complex64::new(0.0, 8.0)]),
    ));
    close_c128(
        &l2,
        &[Complex64::new(
            3.0,
            std::f64::consts::FRAC_PI_2 / std::f64::consts::LN_2,
        )],
        1e-14,
        "clog2",
    );
    let l10 = c128s(apply1(
        UnaryOp::Log10,
        HostBuf::C128(vec![Complex64::new(100.0, 0.0)]),
    ));
    close_c128(&l10, &[Complex64::new(2.0, 0.0)], 1e-15, "clog10");
    let small = Complex64::new(1e-10, 1e-10);
    let lp = c128s(apply1(UnaryOp::Log1p, HostBuf::C128(vec![small])));
    // log|1 + z| = log1p(2x + x^2 + y^2) / 2, to full precision (NumPy's log(hypot(1 + x, y))
    // keeps about 6 digits here).
    close_c128(
        &lp,
        &[Complex64::new(
            0.5 * (2e-10f64 + 2e-20).ln_1p(),
            1e-10f64.atan2(1.0 + 1e-10),
        )],
        1e-25,
        "clog1p",
    );
    let em = c128s(apply1(UnaryOp::Expm1, HostBuf::C128(vec![small])));
    // expm1(z) = z + z^2/2 + ... for small z.
    close_c128(&em, &[small + small * small / 2.0], 1e-25, "cexpm1");
    // 1/(3+4i) = (3-4i)/25; rsqrt(-4) = 1/(2i) = -i/2.
    let r = c128s(apply1(
        UnaryOp::Reciprocal,
        HostBuf::C128(vec![Complex64::new(3.0, 4.0)]),
    ));
    close_c128(&r, &[Complex64::new(0.12, -0.16)], 1e-16, "crecip");
    let r = c128s(apply1(
        UnaryOp::Rsqrt,
        HostBuf::C128(vec![Complex64::new(-4.0, 0.0)]),
    ));
    close_c128(&r, &[Complex64::new(0.0, -0.5)], 1e-16, "crsqrt");
    // sin, cos, tanh of a complex against the textbook formulas.
    let w = Complex64::new(0.3, -0.7);
    let s = c128s(apply1(UnaryOp::Sin, HostBuf::C128(vec![w])));
    let want = Complex64::new(w.re.sin() * w.im.cosh(), w.re.cos() * w.im.sinh());
    close_c128(&s, &[want], 1e-15, "csin");
    let c = c128s(apply1(UnaryOp::Cos, HostBuf::C128(vec![w])));
    let want = Complex64::new(w.re.cos() * w.im.cosh(), -w.re.sin() * w.im.sinh());
    close_c128(&c, &[want], 1e-15, "ccos");
    // complex64 too.
    let z32 = HostBuf::C64(vec![Complex32::new(3.0, 4.0)]);
    assert_eq!(f32s(apply1(UnaryOp::Abs, z32.clone())), [5.0]);
    assert_eq!(
        c64s(apply1(UnaryOp::Conj, z32)),
        [Complex32::new(3.0, -4.0)]
    );
}

#[test]
fn complex_classification_and_sign_specials() {
    let zs = vec![
        Complex64::new(NAN, 0.0),
        Complex64::new(0.0, INF),
        Complex64::new(INF, NAN),
        Complex64::new(1.0, -2.0),
    ];
    let z = HostBuf::C128(zs);
    assert_eq!(
        bools(apply1(UnaryOp::IsNan, z.clone())),
        [true, false, true, false]
    );
    assert_eq!(
        bools(apply1(UnaryOp::IsInf, z.clone())),
        [false, true, true, false]
    );
    assert_eq!(
        bools(apply1(UnaryOp::IsFinite, z)),
        [false, false, false, true]
    );
    let s = c128s(apply1(
        UnaryOp::Sign,
        HostBuf::C128(vec![
            Complex64::new(NAN, 1.0),
            Complex64::new(-INF, 2.0),
            Complex64::new(1.0, INF),
        ]),
    ));
    assert!(s[0].re.is_nan() && s[0].im.is_nan());
    assert_c128s(
        &s[1..],
        &[Complex64::new(-1.0, 0.0), Complex64::new(0.0, 1.0)],
        "csign inf",
    );
}

// ------------------------------------------------------------------------------------
// Binary ops
// ------------------------------------------------------------------------------------

#[test]
fn integer_floor_division_and_remainder() {
    let a = HostBuf::I64(vec![-7, 7, -7, 7, 5, -5, i64::MIN, i64::MIN, 0]);
    let b = HostBuf::I64(vec![2, -2, -2, 2, 0, 0, -1, 1, 3]);
    assert_eq!(
        i64s(apply2(BinaryOp::FloorDiv, a.clone(), b.clone())),
        [-4, -4, 3, 3, 0, 0, i64::MIN, i64::MIN, 0]
    );
    assert_eq!(
        i64s(apply2(BinaryOp::Mod, a.clone(), b.clone())),
        [1, -1, -1, 1, 0, 0, 0, 0, 0]
    );
    // Integer Div is not IR: the API casts integer operands of `/` to F64.
    assert!(BinaryOp::Div.result_dtype(DType::I64, DType::I64).is_none());
    let _ = (a, b);
    let a = HostBuf::I32(vec![-7, 7, i32::MIN, 9, -9]);
    let b = HostBuf::I32(vec![2, 0, -1, -4, 4]);
    assert_eq!(
        i32s(apply2(BinaryOp::FloorDiv, a.clone(), b.clone())),
        [-4, 0, i32::MIN, -3, -3]
    );
    assert_eq!(i32s(apply2(BinaryOp::Mod, a, b)), [1, 0, 0, -3, 3]);
}

#[test]
fn integer_arithmetic_wraps() {
    let a = HostBuf::I32(vec![i32::MAX, i32::MIN, 100_000, 3]);
    let b = HostBuf::I32(vec![1, 1, 100_000, -4]);
    assert_eq!(
        i32s(apply2(BinaryOp::Add, a.clone(), b.clone())),
        [i32::MIN, i32::MIN + 1, 200_000, -1]
    );
    assert_eq!(
        i32s(apply2(BinaryOp::Sub, a.clone(), b.clone())),
        [i32::MAX - 1, i32::MAX, 0, 7]
    );
    assert_eq!(
        i32s(apply2(BinaryOp::Mul, a.clone(), b.clone())),
        [i32::MAX, i32::MIN, 1_410_065_408, -12]
    );
    assert_eq!(
        i32s(apply2(BinaryOp::Maximum, a.clone(), b.clone())),
        [i32::MAX, 1, 100_000, 3]
    );
    assert_eq!(
        i32s(apply2(BinaryOp::Minimum, a, b)),
        [1, i32::MIN, 100_000, -4]
    );
    let a = HostBuf::I64(vec![i64::MAX]);
    assert_eq!(
        i64s(apply2(BinaryOp::Add, a, HostBuf::I64(vec![1]))),
        [i64::MIN]
    );
}

#[test]
fn integer_power() {
    let a = HostBuf::I64(vec![2, 3, -2, 0, 0, 7, 1, -1, -1, 2, 0]);
    let b = HostBuf::I64(vec![10, 40, 3, 0, 5, 1, -5, -3, -4, -1, -2]);
    assert_eq!(
        i64s(apply2(BinaryOp::Pow, a, b)),
        [1024, 3i64.wrapping_pow(40), -8, 1, 0, 7, 1, -1, 1, 0, 0]
    );
    let a = HostBuf::I32(vec![2, 3, 10]);
    let b = HostBuf::I32(vec![31, 21, 0]);
    assert_eq!(
        i32s(apply2(BinaryOp::Pow, a, b)),
        [i32::MIN, 3i32.wrapping_pow(21), 1]
    );
}

#[test]
fn index_arithmetic_never_panics() {
    let a = HostBuf::I64(vec![17, 17, 5, i64::MIN]);
    let b = HostBuf::I64(vec![5, 0, 0, -1]);
    assert_eq!(
        i64s(apply2(BinaryOp::IdxDiv, a.clone(), b.clone())),
        [3, 0, 0, 0]
    );
    assert_eq!(i64s(apply2(BinaryOp::IdxMod, a, b)), [2, 0, 0, 0]);
}

#[test]
fn float_arithmetic_and_remainders() {
    let a = vec![
        -7.0, 7.0, -7.0, 7.0, 6.0, -6.0, 1.0, -1.0, 0.0, 5.0, -5.0, INF, NAN, 5.0,
    ];
    let b = vec![
        3.0, -3.0, -3.0, 3.0, -3.0, 3.0, 0.0, 0.0, 0.0, INF, INF, 2.0, 2.0, NAN,
    ];
    let rem = f64s(apply2(
        BinaryOp::Mod,
        HostBuf::F64(a.clone()),
        HostBuf::F64(b.clone()),
    ));
    assert_f64s(
        &rem,
        &[
            2.0, -2.0, -1.0, 1.0, -0.0, 0.0, NAN, NAN, NAN, 5.0, INF, NAN, NAN, NAN,
        ],
        "remainder",
    );
    let fd = f64s(apply2(
        BinaryOp::FloorDiv,
        HostBuf::F64(a.clone()),
        HostBuf::F64(b.clone()),
    ));
    assert_f64s(
        &fd,
        &[
            -3.0, -3.0, 2.0, 2.0, -2.0, -2.0, INF, -INF, NAN, 0.0, -1.0, NAN, NAN, NAN,
        ],
        "floor_divide",
    );
    // Python: -7.0 // 2.0 = -4.0; 1e300 // 1e-300 = inf; 0.0 // -3.0 = -0.0.
    let fd = f64s(apply2(
        BinaryOp::FloorDiv,
        HostBuf::F64(vec![-7.0, 0.0, 7.5]),
        HostBuf::F64(vec![2.0, -3.0, 0.5]),
    ));
    assert_f64s(&fd, &[-4.0, -0.0, 15.0], "floor_divide 2");
    let div = f64s(apply2(
        BinaryOp::Div,
        HostBuf::F64(vec![1.0, -1.0, 1.0, 0.0]),
        HostBuf::F64(vec![0.0, 0.0, -0.0, 0.0]),
    ));
    assert_f64s(&div, &[INF, -INF, -INF, NAN], "divide by zero");
    let x = HostBuf::F64(vec![-0.0, 1.5, INF]);
    let y = HostBuf::F64(vec![-0.0, 2.25, -INF]);
    assert_f64s(
        &f64s(apply2(BinaryOp::Add, x.clone(), y.clone())),
        &[-0.0, 3.75, NAN],
        "add",
    );
    assert_f64s(
        &f64s(apply2(BinaryOp::Sub, x.clone(), y.clone())),
        &[0.0, -0.75, INF],
        "sub",
    );
    assert_f64s(
        &f64s(apply2(BinaryOp::Mul, x, y)),
        &[0.0, 3.375, -INF],
        "mul",
    );
    // float32: -7 % 3 = 2, -7 // 2 = -4.
    let r = f32s(apply2(
        BinaryOp::Mod,
        HostBuf::F32(vec![-7.0, 7.0]),
        HostBuf::F32(vec![3.0, -3.0]),
    ));
    assert_eq!(r, [2.0, -2.0]);
    let r = f32s(apply2(
        BinaryOp::FloorDiv,
        HostBuf::F32(vec![-7.0, 7.0]),
        HostBuf::F32(vec![2.0, 2.0]),
    ));
    assert_eq!(r, [-4.0, 3.0]);
}

#[test]
fn maximum_minimum_propagate_nan() {
    let a = HostBuf::F64(vec![NAN, 1.0, 2.0, -1.0, NAN]);
    let b = HostBuf::F64(vec![1.0, NAN, 1.0, 3.0, NAN]);
    assert_f64s(
        &f64s(apply2(BinaryOp::Maximum, a.clone(), b.clone())),
        &[NAN, NAN, 2.0, 3.0, NAN],
        "maximum",
    );
    assert_f64s(
        &f64s(apply2(BinaryOp::Minimum, a, b)),
        &[NAN, NAN, 1.0, -1.0, NAN],
        "minimum",
    );
    let a = HostBuf::F32(vec![f32::NAN, 1.0]);
    let b = HostBuf::F32(vec![1.0, f32::NAN]);
    let m = f32s(apply2(BinaryOp::Maximum, a, b));
    assert!(m[0].is_nan() && m[1].is_nan());
}

#[test]
fn float_power_atan2_hypot() {
    let a = HostBuf::F64(vec![1.0, NAN, 2.0, -8.0, -2.0, 0.0, -0.0]);
    let b = HostBuf::F64(vec![NAN, 0.0, 10.0, 1.0 / 3.0, 3.0, -1.0, -1.0]);
    assert_f64s(
        &f64s(apply2(BinaryOp::Pow, a, b)),
        &[1.0, 1.0, 1024.0, NAN, -8.0, INF, -INF],
        "power",
    );
    let p = f32s(apply2(
        BinaryOp::Pow,
        HostBuf::F32(vec![1.0, f32::NAN]),
        HostBuf::F32(vec![f32::NAN, 0.0]),
    ));
    assert_eq!(p, [1.0, 1.0]);
    let y = HostBuf::F64(vec![0.0, -0.0, 0.0, 1.0, -1.0]);
    let x = HostBuf::F64(vec![-0.0, -0.0, 0.0, INF, -INF]);
    let pi = std::f64::consts::PI;
    assert_f64s(
        &f64s(apply2(BinaryOp::Atan2, y, x)),
        &[pi, -pi, 0.0, 0.0, -pi],
        "atan2",
    );
    assert_f64s(
        &f64s(apply2(
            BinaryOp::Hypot,
            HostBuf::F64(vec![3.0, INF, NAN]),
            HostBuf::F64(vec![4.0, NAN, -INF]),
        )),
        &[5.0, INF, INF],
        "hypot",
    );
}

#[test]
fn comparisons() {
    let a = HostBuf::F64(vec![1.0, NAN, 2.0, NAN, -0.0]);
    let b = HostBuf::F64(vec![1.0, 1.0, 3.0, NAN, 0.0]);
    let t = |op| bools(apply2(op, a.clone(), b.clone()));
    assert_eq!(t(BinaryOp::Eq), [true, false, false, false, true]);
    assert_eq!(t(BinaryOp::Ne), [false, true, true, true, false]);
    assert_eq!(t(BinaryOp::Lt), [false, false, true, false, false]);
    assert_eq!(t(BinaryOp::Le), [true, false, true, false, true]);
    assert_eq!(t(BinaryOp::Gt), [false, false, false, false, false]);
    assert_eq!(t(BinaryOp::Ge), [true, false, false, false, true]);
    let a = HostBuf::I32(vec![-1, 5, 3]);
    let b = HostBuf::I32(vec![1, 5, 2]);
    assert_eq!(
        bools(apply2(BinaryOp::Lt, a.clone(), b.clone())),
        [true, false, false]
    );
    assert_eq!(bools(apply2(BinaryOp::Ge, a, b)), [false, true, true]);
    let a = HostBuf::Bool(vec![false, false, true, true]);
    let b = HostBuf::Bool(vec![false, true, false, true]);
    assert_eq!(
        bools(apply2(BinaryOp::Lt, a.clone(), b.clone())),
        [false, true, false, false]
    );
    assert_eq!(
        bools(apply2(BinaryOp::And, a.clone(), b.clone())),
        [false, false, false, true]
    );
    assert_eq!(
        bools(apply2(BinaryOp::Or, a.clone(), b.clone())),
        [false, true, true, true]
    );
    assert_eq!(
        bools(apply2(BinaryOp::Xor, a.clone(), b.clone())),
        [false, true, true, false]
    );
    assert_eq!(
        bools(apply2(BinaryOp::Add, a.clone(), b.clone())),
        [false, true, true, true]
    );
    assert_eq!(
        bools(apply2(BinaryOp::Mul, a.clone(), b.clone())),
        [false, false, false, true]
    );
    assert_eq!(
        bools(apply2(BinaryOp::Eq, a, b)),
        [true, false, false, true]
    );
    let za = HostBuf::C128(vec![
        Complex64::new(1.0, 2.0),
        Complex64::new(1.0, 2.0),
        Complex64::new(NAN, 0.0),
    ]);
    let zb = HostBuf::C128(vec![
        Complex64::new(1.0, 2.0),
        Complex64::new(1.0, -2.0),
        Complex64::new(NAN, 0.0),
    ]);
    assert_eq!(
        bools(apply2(BinaryOp::Eq, za.clone(), zb.clone())),
        [true, false, false]
    );
    assert_eq!(bools(apply2(BinaryOp::Ne, za, zb)), [false, true, true]);
}

#[test]
fn complex_binary() {
    let a = HostBuf::C128(vec![
        Complex64::new(1.0, 2.0),
        Complex64::new(1.0, 1.0),
        Complex64::new(1.0, 0.0),
    ]);
    let b = HostBuf::C128(vec![
        Complex64::new(3.0, 4.0),
        Complex64::new(0.0, 0.0),
        Complex64::new(0.0, 2.0),
    ]);
    assert_c128s(
        &c128s(apply2(BinaryOp::Add, a.clone(), b.clone())),
        &[
            Complex64::new(4.0, 6.0),
            Complex64::new(1.0, 1.0),
            Complex64::new(1.0, 2.0),
        ],
        "cadd",
    );
    assert_c128s(
        &c128s(apply2(BinaryOp::Mul, a.clone(), b.clone())),
        &[
            Complex64::new(-5.0, 10.0),
            Complex64::new(0.0, 0.0),
            Complex64::new(0.0, 2.0),
        ],
        "cmul",
    );
    let q = c128s(apply2(BinaryOp::Div, a.clone(), b.clone()));
    close_c128(
        &q[..1],
        &[Complex64::new(11.0 / 25.0, 2.0 / 25.0)],
        1e-16,
        "cdiv",
    );
    assert!(q[1].re.is_infinite() && q[1].im.is_infinite(), "{:?}", q[1]);
    close_c128(&q[2..], &[Complex64::new(0.0, -0.5)], 1e-16, "cdiv");
    // pow: z**2 = z*z, z**0 = 1, 0**(1+0i) = 0, z**-1 = 1/z, i**i = exp(-pi/2).
    let i = Complex64::new(0.0, 1.0);
    let z = Complex64::new(1.0, 2.0);
    let p = c128s(apply2(
        BinaryOp::Pow,
        HostBuf::C128(vec![z, z, Complex64::new(0.0, 0.0), z, i, z]),
        HostBuf::C128(vec![
            Complex64::new(2.0, 0.0),
            Complex64::new(0.0, 0.0),
            Complex64::new(1.0, 0.0),
            Complex64::new(-1.0, 0.0),
            i,
            Complex64::new(5.0, 0.0),
        ]),
    ));
    assert_c128s(
        &p[..3],
        &[
            Complex64::new(-3.0, 4.0),
            Complex64::new(1.0, 0.0),
            Complex64::new(0.0, 0.0),
        ],
        "cpow",
    );
    close_c128(&p[3..4], &[Complex64::new(0.2, -0.4)], 1e-16, "cpow -1");
    close_c128(
        &p[4..5],
        &[Complex64::new((-std::f64::consts::FRAC_PI_2).exp(), 0.0)],
        1e-15,
        "i**i",
    );
    // (1+2i)^5 = 41 - 38i.
    assert_c128s(&p[5..], &[Complex64::new(41.0, -38.0)], "cpow 5");
    // complex(re, im) from two float32 columns.
    let c = c64s(apply2(
        BinaryOp::Complex,
        HostBuf::F32(vec![1.5, -0.0]),
        HostBuf::F32(vec![2.0, f32::NAN]),
    ));
    assert_eq!(c[0], Complex32::new(1.5, 2.0));
    assert!(c[1].re == 0.0 && c[1].re.is_sign_negative() && c[1].im.is_nan());
}

// ------------------------------------------------------------------------------------
// Casts
// ------------------------------------------------------------------------------------

#[test]
fn casts_follow_numpy_astype() {
    let xs = vec![
        NAN,
        INF,
        -INF,
        1e10,
        -1e10,
        2.9,
        -2.9,
        -0.0,
        2147483647.0,
        -2147483648.0,
    ];
    assert_eq!(
        i32s(cast(HostBuf::F64(xs.clone()), DType::I32)),
        [
            i32::MIN,
            i32::MIN,
            i32::MIN,
            i32::MIN,
            i32::MIN,
            2,
            -2,
            0,
            i32::MAX,
            i32::MIN
        ]
    );
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    assert_eq!(
        i32s(cast(HostBuf::F32(xs32.clone()), DType::I32))[..8],
        [i32::MIN, i32::MIN, i32::MIN, i32::MIN, i32::MIN, 2, -2, 0]
    );
    assert_eq!(
        i64s(cast(HostBuf::F64(xs.clone()), DType::I64))[..8],
        [
            i64::MIN,
            i64::MIN,
            i64::MIN,
            10_000_000_000,
            -10_000_000_000,
            2,
            -2,
            0
        ]
    );
    assert_eq!(
        i64s(cast(HostBuf::F64(vec![1e19, -1e19, 9.2e18]), DType::I64)),
        [i64::MIN, i64::MIN, 9_200_000_000_000_000_000]
    );
    assert_eq!(
        bools(cast(HostBuf::F64(vec![NAN, 0.0, -0.0, 0.1]), DType::Bool)),
        [true, false, false, true]
    );
    assert_eq!(
        bools(cast(HostBuf::I32(vec![0, -3]), DType::Bool)),
        [false, true]
    );
    assert_eq!(
        i32s(cast(
            HostBuf::I64(vec![(1i64 << 32) + 5, -1, 1i64 << 31]),
            DType::I32
        )),
        [5, -1, i32::MIN]
    );
    // i64 -> f32 rounds once (not through f64).
    let big = (1i64 << 53) + (1 << 29) + 1;
    assert_eq!(
        f32s(cast(HostBuf::I64(vec![big]), DType::F32)),
        [big as f32]
    );
    assert_eq!(
        f64s(cast(HostBuf::Bool(vec![true, false]), DType::F64)),
        [1.0, 0.0]
    );
    assert_eq!(
        i32s(cast(HostBuf::Bool(vec![true, false]), DType::I32)),
        [1, 0]
    );
    let zs = vec![
        Complex64::new(2.7, -5.0),
        Complex64::new(0.0, 1.0),
        Complex64::new(0.0, 0.0),
    ];
    assert_eq!(
        f64s(cast(HostBuf::C128(zs.clone()), DType::F64)),
        [2.7, 0.0, 0.0]
    );
    assert_eq!(i32s(cast(HostBuf::C128(zs.clone()), DType::I32)), [2, 0, 0]);
    assert_eq!(
        bools(cast(HostBuf::C128(zs.clone()), DType::Bool)),
        [true, true, false]
    );
    assert_eq!(
        c64s(cast(HostBuf::C128(zs), DType::C64))[0],
        Complex32::new(2.7, -5.0)
    );
    assert_eq!(
        c128s(cast(HostBuf::F32(vec![1.5]), DType::C128)),
        [Complex64::new(1.5, 0.0)]
    );
    assert_eq!(
        f32s(cast(HostBuf::F64(vec![1e300, 0.1]), DType::F32)),
        [f32::INFINITY, 0.1f32]
    );
}

// ------------------------------------------------------------------------------------
// Index arithmetic, loads, tiles
// ------------------------------------------------------------------------------------

#[test]
fn axis_values_with_offset_start() {
    let mut b = Builder::new(3);
    for k in 0..3u8 {
        let a = b.push(Inst::Axis(k), DType::I64);
        b.store(a);
    }
    let ix = b.push(Inst::Index, DType::I64);
    b.store(ix);
    let k = b.finish();
    // Shape [3, 4, 5]: start in the middle of a row (7 = (0, 1, 2)), across rows and planes.
    for &(start, len) in &[(7usize, 40usize), (0, 60), (59, 1), (23, 13)] {
        let outs = run_range(&k, &[], &[3, 4, 5], &[], start, len).unwrap();
        let outs: Vec<Vec<i64>> = outs.into_iter().map(i64s).collect();
        for (j, &i) in outs[3].iter().enumerate() {
            assert_eq!(i, (start + j) as i64, "index");
            assert_eq!(outs[0][j], i / 20, "axis0 at {i}");
            assert_eq!(outs[1][j], (i / 5) % 4, "axis1 at {i}");
            assert_eq!(outs[2][j], i % 5, "axis2 at {i}");
        }
    }
}

#[test]
fn axis_over_many_tiles() {
    // Shape [7, 300, 3]: rows longer than a tile on axis 0.
    let mut b = Builder::new(3);
    let a0 = b.push(Inst::Axis(0), DType::I64);
    let a1 = b.push(Inst::Axis(1), DType::I64);
    let a2 = b.push(Inst::Axis(2), DType::I64);
    let c100 = b.const_i64(100);
    let c10000 = b.const_i64(10000);
    let x = b.binary(BinaryOp::Mul, a0, c10000);
    let y = b.binary(BinaryOp::Mul, a1, c100);
    let s = b.binary(BinaryOp::Add, x, y);
    let s = b.binary(BinaryOp::Add, s, a2);
    b.store(s);
    let k = b.finish();
    let n = 7 * 300 * 3;
    let got = i64s(
        run_range(&k, &[], &[7, 300, 3], &[], 5, n - 5)
            .unwrap()
            .pop()
            .unwrap(),
    );
    for (j, &g) in got.iter().enumerate() {
        let i = (j + 5) as i64;
        let want = (i / 900) * 10000 + ((i / 3) % 300) * 100 + i % 3;
        assert_eq!(g, want, "at {i}");
    }
}

/// A broadcast load: a `[4]` row read over a `[3, 4]` launch via `Axis(1) * stride`.
#[test]
fn broadcast_gather_load() {
    let mut b = Builder::new(2);
    let row = b.input(DType::F64);
    let a1 = b.push(Inst::Axis(1), DType::I64);
    let stride = b.param(DType::I64);
    let ix = b.binary(BinaryOp::Mul, a1, stride);
    let l = b.push(
        Inst::Load {
            input: row,
            index: ix,
            guard: None,
        },
        DType::F64,
    );
    b.store(l);
    let k = b.finish();
    let got = f64s(
        run_all(
            &k,
            &[HostBuf::F64(vec![1.0, 9.0, 2.0, 9.0, 3.0, 9.0, 4.0, 9.0])],
            &[3, 4],
            &[Scalar::I64(2)],
        )
        .pop()
        .unwrap(),
    );
    assert_eq!(
        got,
        [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]
    );
}

/// `out[i] = x[i - 5]` for `5 <= i < 15`, else 0: the index is negative or past the end
/// where the guard is false, which must neither be read nor reported.
#[test]
fn guarded_load_with_garbage_index() {
    let mut b = Builder::new(1);
    let x = b.input(DType::I32);
    let i = b.push(Inst::Index, DType::I64);
    let lo = b.const_i64(5);
    let hi = b.const_i64(15);
    let ge = b.binary(BinaryOp::Ge, i, lo);
    let lt = b.binary(BinaryOp::Lt, i, hi);
    let g = b.binary(BinaryOp::And, ge, lt);
    let ix = b.binary(BinaryOp::Sub, i, lo);
    let l = b.push(
        Inst::Load {
            input: x,
            index: ix,
            guard: Some(g),
        },
        DType::I32,
    );
    b.store(l);
    let k = b.finish();
    let xs: Vec<i32> = (100..110).collect();
    let got = i32s(
        run_all(&k, &[HostBuf::I32(xs.clone())], &[20], &[])
            .pop()
            .unwrap(),
    );
    let want: Vec<i32> = (0..20)
        .map(|i| if (5..15).contains(&i) { xs[i - 5] } else { 0 })
        .collect();
    assert_eq!(got, want);

    // A uniform garbage index under a column guard, and under a uniform false guard.
    let mut b = Builder::new(1);
    let x = b.input(DType::F64);
    let i = b.push(Inst::Index, DType::I64);
    let bad = b.const_i64(-1_000_000);
    let zero = b.const_i64(0);
    let never = b.binary(BinaryOp::Lt, i, zero);
    let l = b.push(
        Inst::Load {
            input: x,
            index: bad,
            guard: Some(never),
        },
        DType::F64,
    );
    b.store(l);
    let f = b.push(Inst::Const(Scalar::Bool(false)), DType::Bool);
    let l2 = b.push(
        Inst::Load {
            input: x,
            index: bad,
            guard: Some(f),
        },
        DType::F64,
    );
    b.store(l2);
    let k = b.finish();
    let outs = run_all(&k, &[HostBuf::F64(vec![1.0])], &[3], &[]);
    for o in outs {
        assert_eq!(f64s(o), [0.0; 3]);
    }
}

#[test]
fn out_of_bounds_loads_are_errors() {
    // Gather past the end.
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let two = b.const_i64(2);
    let ix = b.binary(BinaryOp::Mul, i, two);
    let l = b.push(
        Inst::Load {
            input: x,
            index: ix,
            guard: None,
        },
        DType::F32,
    );
    b.store(l);
    let k = b.finish();
    let e = run_range(&k, &[HostBuf::F32(vec![0.0; 10])], &[8], &[], 0, 8).unwrap_err();
    assert!(e.0.contains("out of bounds"), "{e}");
    assert!(run_range(&k, &[HostBuf::F32(vec![0.0; 10])], &[8], &[], 0, 5).is_ok());
    // Negative index.
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let one = b.const_i64(1);
    let ix = b.binary(BinaryOp::Sub, i, one);
    let l = b.push(
        Inst::Load {
            input: x,
            index: ix,
            guard: None,
        },
        DType::F32,
    );
    b.store(l);
    let k = b.finish();
    assert!(run_range(&k, &[HostBuf::F32(vec![0.0; 10])], &[4], &[], 0, 4).is_err());
    assert!(run_range(&k, &[HostBuf::F32(vec![0.0; 10])], &[4], &[], 1, 3).is_ok());
    // Contiguous load from a short input.
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    b.store(l);
    let k = b.finish();
    assert!(run_range(&k, &[HostBuf::F32(vec![0.0; 10])], &[12], &[], 0, 12).is_err());
    assert!(run_range(&k, &[HostBuf::F32(vec![0.0; 10])], &[12], &[], 2, 8).is_ok());
    // A uniform index out of bounds, unguarded.
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let p = b.param(DType::I64);
    let l = b.push(
        Inst::Load {
            input: x,
            index: p,
            guard: None,
        },
        DType::F32,
    );
    b.store(l);
    let k = b.finish();
    let ins = [HostBuf::F32(vec![1.0, 2.0])];
    assert!(run_range(&k, &ins, &[3], &[Scalar::I64(2)], 0, 3).is_err());
    let ok = run_range(&k, &ins, &[3], &[Scalar::I64(1)], 0, 3).unwrap();
    assert_eq!(f32s(ok.into_iter().next().unwrap()), [2.0; 3]);
}

/// A load that would be out of bounds is no error where a uniform `where` discards it.
#[test]
fn discarded_out_of_bounds_loads_are_fine() {
    let mut b = Builder::new(1);
    let x = b.input(DType::F64);
    let i = b.push(Inst::Index, DType::I64);
    let c = b.param(DType::Bool);
    let far = b.param(DType::I64);
    let fallback = b.param(DType::F64);
    let uniform_bad = b.push(
        Inst::Load {
            input: x,
            index: far,
            guard: None,
        },
        DType::F64,
    );
    let shifted = b.binary(BinaryOp::Add, i, far);
    let shifted_bad = b.push(
        Inst::Load {
            input: x,
            index: shifted,
            guard: None,
        },
        DType::F64,
    );
    let here = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F64,
    );
    let w1 = b.select(c, uniform_bad, fallback);
    let w1 = b.binary(BinaryOp::Add, w1, fallback);
    let w2 = b.select(c, shifted_bad, here);
    b.store(w1);
    b.store(w2);
    let k = b.finish();
    let xs = vec![1.0, 2.0, 3.0];
    let ins = [HostBuf::F64(xs.clone())];
    let ps = |c: bool| [Scalar::Bool(c), Scalar::I64(100), Scalar::F64(5.0)];
    let outs = run_range(&k, &ins, &[3], &ps(false), 0, 3).unwrap();
    let mut it = outs.into_iter();
    assert_eq!(f64s(it.next().unwrap()), [10.0; 3]);
    assert_eq!(f64s(it.next().unwrap()), xs);
    let e = run_range(&k, &ins, &[3], &ps(true), 0, 3).unwrap_err();
    assert!(e.0.contains("out of bounds"), "{e}");
}

#[test]
fn argument_errors() {
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let p = b.param(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    let s = b.binary(BinaryOp::Add, l, p);
    b.store(s);
    let k = b.finish();
    let good = [HostBuf::F32(vec![1.0; 4])];
    let ps = [Scalar::F32(1.0)];
    assert!(run_range(&k, &good, &[4], &ps, 0, 4).is_ok());
    // Wrong input count / dtype.
    assert!(run_range(&k, &[], &[4], &ps, 0, 4).is_err());
    assert!(run_range(&k, &[HostBuf::F64(vec![1.0; 4])], &[4], &ps, 0, 4).is_err());
    // Wrong param count / dtype.
    assert!(run_range(&k, &good, &[4], &[], 0, 4).is_err());
    assert!(run_range(&k, &good, &[4], &[Scalar::F64(1.0)], 0, 4).is_err());
    // Range past the launch size; wrong rank.
    assert!(run_range(&k, &good, &[4], &ps, 1, 4).is_err());
    assert!(run_range(&k, &good, &[2, 2], &ps, 0, 4).is_err());
    // Wrong output count, dtype, unequal lengths.
    let ins: Vec<_> = good.iter().map(|b| b.as_slice()).collect();
    let args = LaunchArgs {
        shape: vec![4].into(),
        params: ps.to_vec().into(),
    };
    let mut o1 = HostBuf::F64(vec![0.0; 4]);
    assert!(interp::run(&k, &ins, &mut [o1.as_slice_mut()], &args, 0).is_err());
    assert!(interp::run(&k, &ins, &mut [], &args, 0).is_err());
    // An invalid kernel is reported, not run.
    let mut bad = k.clone();
    bad.values.swap(0, 1);
    let mut o2 = HostBuf::F32(vec![0.0; 4]);
    assert!(interp::run(&bad, &ins, &mut [o2.as_slice_mut()], &args, 0).is_err());
    // Empty ranges do nothing.
    assert!(run_range(&k, &good, &[4], &ps, 4, 0).is_ok());
}

/// 2500 elements starting at 7 (three tiles, the last partial), mixing a contiguous load,
/// a reversed gather, a param, the index and a where.
#[test]
fn tile_boundaries() {
    let n = 3000usize;
    let (start, len) = (7usize, 2500usize);
    let mut b = Builder::new(1);
    let x = b.input(DType::F64);
    let y = b.input(DType::I32);
    let i = b.push(Inst::Index, DType::I64);
    let last = b.param(DType::I64);
    let scale = b.param(DType::F64);
    let lx = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F64,
    );
    let rev = b.binary(BinaryOp::Sub, last, i);
    let ly = b.push(
        Inst::Load {
            input: y,
            index: rev,
            guard: None,
        },
        DType::I32,
    );
    let lyf = b.cast(ly, DType::F64);
    let t = b.binary(BinaryOp::Mul, lx, scale);
    let t = b.binary(BinaryOp::Add, t, lyf);
    let fi = b.cast(i, DType::F64);
    let t = b.binary(BinaryOp::Sub, t, fi);
    let three = b.const_i64(3);
    let m = b.binary(BinaryOp::Mod, i, three);
    let zero = b.const_i64(0);
    let c = b.binary(BinaryOp::Eq, m, zero);
    let w = b.select(c, t, lx);
    b.store(w);
    b.store(ly);
    let k = b.finish();
    let xs: Vec<f64> = (0..n).map(|j| j as f64 * 0.5).collect();
    let ys: Vec<i32> = (0..n).map(|j| (j * 7 % 1000) as i32).collect();
    let outs = run_range(
        &k,
        &[HostBuf::F64(xs.clone()), HostBuf::I32(ys.clone())],
        &[n],
        &[Scalar::I64(n as i64 - 1), Scalar::F64(3.0)],
        start,
        len,
    )
    .unwrap();
    let mut it = outs.into_iter();
    let got = f64s(it.next().unwrap());
    let goty = i32s(it.next().unwrap());
    for j in 0..len {
        let i = start + j;
        let yv = ys[n - 1 - i];
        let want = if i % 3 == 0 {
            xs[i] * 3.0 + yv as f64 - i as f64
        } else {
            xs[i]
        };
        assert_eq!(got[j], want, "at {i}");
        assert_eq!(goty[j], yv, "at {i}");
    }
}

/// A diamond with shared subexpressions and several outputs (exercises column reuse).
#[test]
fn shared_values_and_multiple_outputs() {
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    let one = b.param(DType::F32);
    let a = b.binary(BinaryOp::Add, l, one);
    let two = b.param(DType::F32);
    let m = b.binary(BinaryOp::Mul, l, two);
    let c = b.binary(BinaryOp::Mul, a, m);
    let d = b.binary(BinaryOp::Sub, c, a);
    let e = b.unary(UnaryOp::Neg, d);
    let f = b.binary(BinaryOp::Maximum, e, l);
    b.store(d);
    b.store(f);
    b.store(l);
    let k = b.finish();
    let n = 3000;
    let xs: Vec<f32> = (0..n).map(|j| (j as f32 - 1500.0) * 0.01).collect();
    let outs = run_all(
        &k,
        &[HostBuf::F32(xs.clone())],
        &[n],
        &[Scalar::F32(1.0), Scalar::F32(2.0)],
    );
    let mut it = outs.into_iter();
    let (od, of, ol) = (
        f32s(it.next().unwrap()),
        f32s(it.next().unwrap()),
        f32s(it.next().unwrap()),
    );
    for j in 0..n {
        let x = xs[j];
        let a = x + 1.0;
        let d = a * (x * 2.0) - a;
        assert_eq!(od[j], d);
        assert_eq!(of[j], (-d).max(x));
        assert_eq!(ol[j], x);
    }
}

/// Kernels without loads: a fill from a param, and values derived only from params.
#[test]
fn uniform_only_kernels() {
    let mut b = Builder::new(2);
    let p = b.param(DType::F64);
    let q = b.param(DType::F64);
    let s = b.binary(BinaryOp::Add, p, q);
    let r = b.unary(UnaryOp::Sqrt, s);
    b.store(r);
    let c = b.param(DType::Bool);
    let w = b.select(c, p, q);
    b.store(w);
    let k = b.finish();
    let outs = run_all(
        &k,
        &[],
        &[2, 3],
        &[Scalar::F64(7.0), Scalar::F64(9.0), Scalar::Bool(false)],
    );
    let mut it = outs.into_iter();
    assert_eq!(f64s(it.next().unwrap()), [4.0; 6]);
    assert_eq!(f64s(it.next().unwrap()), [9.0; 6]);
    // Rank 0: one element.
    let mut b = Builder::new(0);
    let p = b.param(DType::I32);
    let n = b.unary(UnaryOp::Neg, p);
    b.store(n);
    let k = b.finish();
    let out = run_all(&k, &[], &[], &[Scalar::I32(5)]);
    assert_eq!(i32s(out.into_iter().next().unwrap()), [-5]);
}

#[test]
fn where_with_every_operand_kind() {
    let mut b = Builder::new(1);
    let x = b.input(DType::I64);
    let i = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::I64,
    );
    let p = b.param(DType::I64);
    let two = b.const_i64(2);
    let m = b.binary(BinaryOp::IdxMod, i, two);
    let zero = b.const_i64(0);
    let c = b.binary(BinaryOp::Eq, m, zero);
    let w1 = b.select(c, l, p);
    let w2 = b.select(c, p, l);
    let w3 = b.select(c, l, i);
    let w4 = b.select(c, p, zero);
    for w in [w1, w2, w3, w4] {
        b.store(w);
    }
    let k = b.finish();
    let xs: Vec<i64> = (0..6).map(|j| 10 + j).collect();
    let outs: Vec<Vec<i64>> = run_all(&k, &[HostBuf::I64(xs)], &[6], &[Scalar::I64(-1)])
        .into_iter()
        .map(i64s)
        .collect();
    assert_eq!(outs[0], [10, -1, 12, -1, 14, -1]);
    assert_eq!(outs[1], [-1, 11, -1, 13, -1, 15]);
    assert_eq!(outs[2], [10, 1, 12, 3, 14, 5]);
    assert_eq!(outs[3], [-1, 0, -1, 0, -1, 0]);
}

/// Loads at `Index + c` (the interpreter reads those in place): `out = x[i + p] - x[i - q]`.
#[test]
fn shifted_loads() {
    let mut b = Builder::new(1);
    let x = b.input(DType::I64);
    let i = b.push(Inst::Index, DType::I64);
    let p = b.param(DType::I64);
    let q = b.param(DType::I64);
    let ip = b.binary(BinaryOp::Add, i, p);
    let iq = b.binary(BinaryOp::Sub, i, q);
    let lp = b.push(
        Inst::Load {
            input: x,
            index: ip,
            guard: None,
        },
        DType::I64,
    );
    let lq = b.push(
        Inst::Load {
            input: x,
            index: iq,
            guard: None,
        },
        DType::I64,
    );
    let d = b.binary(BinaryOp::Sub, lp, lq);
    b.store(d);
    b.store(lp);
    let k = b.finish();
    let n = 5000usize;
    let xs: Vec<i64> = (0..n as i64).map(|j| j * j).collect();
    let ins = [HostBuf::I64(xs.clone())];
    let ps = [Scalar::I64(3), Scalar::I64(2)];
    let (start, len) = (2, n - 5);
    let outs = run_range(&k, &ins, &[n], &ps, start, len).unwrap();
    let mut it = outs.into_iter();
    let (d, l) = (i64s(it.next().unwrap()), i64s(it.next().unwrap()));
    for j in 0..len {
        let i = start + j;
        assert_eq!(d[j], xs[i + 3] - xs[i - 2], "at {i}");
        assert_eq!(l[j], xs[i + 3], "at {i}");
    }
    // One element too far on either side is an error.
    assert!(run_range(&k, &ins, &[n], &ps, 1, 10).is_err());
    assert!(run_range(&k, &ins, &[n], &ps, n - 13, 11).is_err());
    assert!(run_range(&k, &ins, &[n], &ps, n - 13, 10).is_ok());
}

/// `x * 1`, `x + 0`, `where(true, ..)` and a same-dtype cast are identities; a value seen
/// through such an alias must stay alive until the alias's last reader.
#[test]
fn identities_keep_their_operand_alive() {
    let mut b = Builder::new(1);
    let x = b.input(DType::F64);
    let i = b.push(Inst::Index, DType::I64);
    let l = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F64,
    );
    let p = b.param(DType::F64);
    let r = b.binary(BinaryOp::Add, l, p); // a column
    let t = b.param(DType::Bool);
    let y = b.select(t, r, l); // alias of r
    let y = b.push(Inst::Cast(y), DType::F64); // alias of r
    let z = b.unary(UnaryOp::Sin, r); // last direct reader of r
    let zz = b.binary(BinaryOp::Add, z, z); // may reuse a free column
    let w = b.binary(BinaryOp::Add, y, zz); // reads r through the alias
    b.store(w);
    // Integer identities: (i * one + zero) // one, and i * zero.
    let one = b.param(DType::I64);
    let zero = b.param(DType::I64);
    let a = b.binary(BinaryOp::Mul, i, one);
    let a = b.binary(BinaryOp::Add, a, zero);
    let a = b.binary(BinaryOp::FloorDiv, a, one);
    let a = b.binary(BinaryOp::Add, zero, a);
    let z0 = b.binary(BinaryOp::Mul, i, zero);
    let a = b.binary(BinaryOp::Sub, a, z0);
    b.store(a);
    let k = b.finish();
    let n = 5000;
    let xs: Vec<f64> = (0..n).map(|j| j as f64 * 0.001).collect();
    let outs = run_all(
        &k,
        &[HostBuf::F64(xs.clone())],
        &[n],
        &[
            Scalar::F64(0.25),
            Scalar::Bool(true),
            Scalar::I64(1),
            Scalar::I64(0),
        ],
    );
    let mut it = outs.into_iter();
    let (w, a) = (f64s(it.next().unwrap()), i64s(it.next().unwrap()));
    for j in 0..n {
        let r = xs[j] + 0.25;
        let mut sin = [0.0];
        lazyfuse_codegen::vmath::sin_f64(&[r], &mut sin);
        assert_eq!(w[j], r + (sin[0] + sin[0]), "at {j}");
        assert_eq!(a[j], j as i64);
    }
}

/// A row broadcast over a `[m, k]` launch through a zero stride:
/// `out[i, j] = x[i * s0 + j * s1]` with `s0 = 0`, `s1 = 1`.
#[test]
fn zero_stride_broadcast() {
    let mut b = Builder::new(2);
    let x = b.input(DType::F32);
    let a0 = b.push(Inst::Axis(0), DType::I64);
    let a1 = b.push(Inst::Axis(1), DType::I64);
    let s0 = b.param(DType::I64);
    let s1 = b.param(DType::I64);
    let i0 = b.binary(BinaryOp::Mul, a0, s0);
    let i1 = b.binary(BinaryOp::Mul, a1, s1);
    let ix = b.binary(BinaryOp::Add, i0, i1);
    let l = b.push(
        Inst::Load {
            input: x,
            index: ix,
            guard: None,
        },
        DType::F32,
    );
    b.store(l);
    let k = b.finish();
    let (m, kk) = (700usize, 9usize);
    let xs: Vec<f32> = (0..kk).map(|j| j as f32 + 0.5).collect();
    for (s0, s1) in [(0i64, 1i64), (1, 0)] {
        let xs_in = if s0 == 0 {
            xs.clone()
        } else {
            (0..m).map(|j| j as f32).collect()
        };
        let got = f32s(
            run_all(
                &k,
                &[HostBuf::F32(xs_in.clone())],
                &[m, kk],
                &[Scalar::I64(s0), Scalar::I64(s1)],
            )
            .pop()
            .unwrap(),
        );
        for (e, &g) in got.iter().enumerate() {
            let (i, j) = (e / kk, e % kk);
            assert_eq!(g, xs_in[i * s0 as usize + j * s1 as usize], "at {i},{j}");
        }
    }
}

/// Splitting the range into pieces (as the CPU backend's threads do) changes nothing.
#[test]
fn splitting_the_range_changes_nothing() {
    let mut b = Builder::new(2);
    let x = b.input(DType::F32);
    let a0 = b.push(Inst::Axis(0), DType::I64);
    let a1 = b.push(Inst::Axis(1), DType::I64);
    let w = b.param(DType::I64);
    let ix = b.binary(BinaryOp::Mul, a0, w);
    let ix = b.binary(BinaryOp::Add, ix, a1);
    let l = b.push(
        Inst::Load {
            input: x,
            index: ix,
            guard: None,
        },
        DType::F32,
    );
    let f = b.cast(a1, DType::F32);
    let s = b.binary(BinaryOp::Mul, l, f);
    let s = b.unary(UnaryOp::Tanh, s);
    b.store(s);
    let k = b.finish();
    let shape = [37usize, 151usize];
    let n = shape[0] * shape[1];
    let xs: Vec<f32> = (0..n).map(|j| ((j * 7919) % 1000) as f32 * 1e-3).collect();
    let ins = [HostBuf::F32(xs.clone())];
    let ps = [Scalar::I64(shape[1] as i64)];
    let whole = f32s(run_all(&k, &ins, &shape, &ps).pop().unwrap());
    for (j, &g) in whole.iter().enumerate() {
        // The interpreter's tanh is within 1 ulp of the correctly rounded result (it need
        // not match the C library's `tanhf` bit for bit).
        let want = ((xs[j] * (j % shape[1]) as f32) as f64).tanh() as f32;
        assert!(
            (g.to_bits() as i64 - want.to_bits() as i64).abs() <= 1,
            "at {j}: {g:e} vs {want:e}"
        );
    }
    for pieces in [2usize, 3, 7] {
        let mut got = Vec::new();
        let mut s = 0;
        for p in 0..pieces {
            let e = n * (p + 1) / pieces;
            got.extend(f32s(
                run_range(&k, &ins, &shape, &ps, s, e - s)
                    .unwrap()
                    .pop()
                    .unwrap(),
            ));
            s = e;
        }
        assert_eq!(got, whole, "{pieces} pieces");
    }
}

/// Products read only by one sum or difference are computed inside it (one pass, no
/// column in between). Every form, next to products that must stay separate (stored, read
/// twice, with a uniform factor) and one inside a guarded `where` side, against the same
/// IEEE operations done one at a time here, bit for bit, special values included.
#[test]
fn products_inside_sums_match_separate_operations() {
    fn kernel(d: DType) -> Kernel {
        let mut b = Builder::new(1);
        let ix = b.push(Inst::Index, DType::I64);
        let x = load_at(&mut b, d, ix);
        let y = load_at(&mut b, d, ix);
        let z = load_at(&mut b, d, ix);
        let k = b.param(d);
        let zero = b.param(d);
        let xy = b.binary(BinaryOp::Mul, x, y);
        let s0 = b.binary(BinaryOp::Add, xy, z); // a*b + c
        let yz = b.binary(BinaryOp::Mul, y, z);
        let s1 = b.binary(BinaryOp::Sub, x, yz); // c - a*b
        let xx = b.binary(BinaryOp::Mul, x, x);
        let yy = b.binary(BinaryOp::Mul, y, y);
        let s2 = b.binary(BinaryOp::Sub, xx, yy); // a*b - c*d
        let xz = b.binary(BinaryOp::Mul, x, z);
        let s3 = b.binary(BinaryOp::Add, xz, k); // stored product, uniform addend
        let xk = b.binary(BinaryOp::Mul, x, k);
        let s4 = b.binary(BinaryOp::Add, y, xk); // uniform factor
        let zz = b.binary(BinaryOp::Mul, z, z);
        let s5 = b.binary(BinaryOp::Add, zz, zz); // read twice
        let c = b.binary(BinaryOp::Gt, x, zero);
        let yx = b.binary(BinaryOp::Mul, y, x);
        let inner = b.binary(BinaryOp::Sub, yx, k);
        let inner = b.binary(BinaryOp::Add, inner, z);
        let s6 = b.select(c, inner, z); // product inside a guarded side
        for v in [s0, s1, s2, s3, xz, s4, s5, s6] {
            b.store(v);
        }
        b.finish()
    }
    let specials = [
        0.0,
        -0.0,
        1.0,
        -2.5,
        1e-310,
        3e38,
        -3e38,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        7.0,
    ];
    let n = 5000usize;
    let val = |i: usize, s: usize| -> f64 {
        if (i * 7 + s).is_multiple_of(13) {
            specials[(i / 13 + s) % specials.len()]
        } else {
            ((i * 7919 + s * 104729) % 20011) as f64 / 977.0 - 10.0
        }
    };
    let cols: Vec<Vec<f64>> = (0..3)
        .map(|s| (0..n).map(|i| val(i, s)).collect())
        .collect();
    let kval = 0.75;
    // f64
    let k64 = kernel(DType::F64);
    let ins: Vec<HostBuf> = cols.iter().map(|c| HostBuf::F64(c.clone())).collect();
    let ps = [Scalar::F64(kval), Scalar::F64(0.0)];
    let whole: Vec<Vec<f64>> = run_all(&k64, &ins, &[n], &ps)
        .into_iter()
        .map(f64s)
        .collect();
    let (x, y, z) = (&cols[0], &cols[1], &cols[2]);
    let want = |i: usize| -> [f64; 8] {
        let (x, y, z) = (x[i], y[i], z[i]);
        let xy = x * y;
        let yz = y * z;
        let (xx, yy, xz, xk, zz, yx) = (x * x, y * y, x * z, x * kval, z * z, y * x);
        let inner = (yx - kval) + z;
        [
            xy + z,
            x - yz,
            xx - yy,
            xz + kval,
            xz,
            y + xk,
            zz + zz,
            if x > 0.0 { inner } else { z },
        ]
    };
    for i in 0..n {
        let w = want(i);
        for (j, out) in whole.iter().enumerate() {
            assert!(
                same64(out[i], w[j]),
                "f64 output {j} at {i}: {} vs {}",
                out[i],
                w[j]
            );
        }
    }
    // split ranges give the same bits
    let (s0, l0) = (1234usize, 2500usize);
    let part: Vec<Vec<f64>> = run_range(&k64, &ins, &[n], &ps, s0, l0)
        .unwrap()
        .into_iter()
        .map(f64s)
        .collect();
    for (j, out) in part.iter().enumerate() {
        for (t, &g) in out.iter().enumerate() {
            assert!(same64(g, whole[j][s0 + t]), "f64 output {j} at {}", s0 + t);
        }
    }
    // f32
    let k32 = kernel(DType::F32);
    let c32: Vec<Vec<f32>> = cols
        .iter()
        .map(|c| c.iter().map(|&v| v as f32).collect())
        .collect();
    let ins: Vec<HostBuf> = c32.iter().map(|c| HostBuf::F32(c.clone())).collect();
    let ps = [Scalar::F32(kval as f32), Scalar::F32(0.0)];
    let got: Vec<Vec<f32>> = run_all(&k32, &ins, &[n], &ps)
        .into_iter()
        .map(f32s)
        .collect();
    let k = kval as f32;
    for i in 0..n {
        let (x, y, z) = (c32[0][i], c32[1][i], c32[2][i]);
        let (xy, yz, xx, yy, xz, xk, zz, yx) =
            (x * y, y * z, x * x, y * y, x * z, x * k, z * z, y * x);
        let w = [
            xy + z,
            x - yz,
            xx - yy,
            xz + k,
            xz,
            y + xk,
            zz + zz,
            if x > 0.0 { (yx - k) + z } else { z },
        ];
        for (j, out) in got.iter().enumerate() {
            assert!(
                same32(out[i], w[j]),
                "f32 output {j} at {i}: {} vs {}",
                out[i],
                w[j]
            );
        }
    }
}

/// The views of a fused kernel over a `[A, B, C]` launch: a flip of axis 0, a roll of
/// axis 1 (a conditional subtraction), the mirror `(C - k) mod C` of axis 2 (a select), a
/// broadcast row along axis 2, and the roll's wrap condition and index stored as they are.
/// The interpreter evaluates this index arithmetic once per axis value (axis tables); the
/// expected values are computed element by element here.
fn view_kernel() -> Kernel {
    let mut b = Builder::new(3);
    let x = b.input(DType::F64);
    let y = b.input(DType::F64);
    let (na, nb, nc) = (
        b.param(DType::I64),
        b.param(DType::I64),
        b.param(DType::I64),
    );
    let shift = b.param(DType::I64);
    let a0 = b.push(Inst::Axis(0), DType::I64);
    let a1 = b.push(Inst::Axis(1), DType::I64);
    let a2 = b.push(Inst::Axis(2), DType::I64);
    let one = b.const_i64(1);
    let minus = b.const_i64(-1);
    // flip: (A - 1) - a0
    let last = b.binary(BinaryOp::Sub, na, one);
    let f0 = b.binary(BinaryOp::Mul, a0, minus);
    let f0 = b.binary(BinaryOp::Add, f0, last);
    // roll: (a1 + B - shift) wrapped once
    let r = b.binary(BinaryOp::Sub, nb, shift);
    let t = b.binary(BinaryOp::Add, a1, r);
    let wrap = b.binary(BinaryOp::Ge, t, nb);
    let back = b.binary(BinaryOp::Sub, t, nb);
    let r1 = b.select(wrap, back, t);
    // mirror: a2 == 0 ? 0 : C - a2
    let zero = b.const_i64(0);
    let is0 = b.binary(BinaryOp::Eq, a2, zero);
    let m = b.binary(BinaryOp::Sub, nc, a2);
    let m2 = b.select(is0, zero, m);
    let bc = b.binary(BinaryOp::Mul, nb, nc);
    let ix = b.binary(BinaryOp::Mul, f0, bc);
    let rc = b.binary(BinaryOp::Mul, r1, nc);
    let ix = b.binary(BinaryOp::Add, ix, rc);
    let ix = b.binary(BinaryOp::Add, ix, m2);
    let lx = load_from(&mut b, x, ix);
    let ly = load_from(&mut b, y, m2);
    let s = b.binary(BinaryOp::Add, lx, ly);
    b.store(s);
    b.store(wrap);
    b.store(r1);
    b.finish()
}

/// An unguarded load of input `input` (F64) at `index`.
fn load_from(b: &mut Builder, input: u32, index: ValueId) -> ValueId {
    b.push(
        Inst::Load {
            input,
            index,
            guard: None,
        },
        DType::F64,
    )
}

#[test]
fn views_through_axis_tables_match_per_element_index_arithmetic() {
    let k = view_kernel();
    for (shape, shift) in [
        ([5usize, 7, 9], 3i64),
        ([3, 1, 4], 0),
        ([2, 6, 1], 5),
        ([1, 1, 1], 0),
        ([4, 300, 3], 299),
        ([3, 2, 1000], 1),
        ([7, 129, 5], 64),
    ] {
        let [na, nb, nc] = shape;
        let n = na * nb * nc;
        let xs: Vec<f64> = (0..n).map(|j| (j * 7919 % 10007) as f64).collect();
        let ys: Vec<f64> = (0..nc).map(|j| j as f64 * 0.5).collect();
        let ins = [HostBuf::F64(xs.clone()), HostBuf::F64(ys.clone())];
        let ps = [na, nb, nc].map(|v| Scalar::I64(v as i64));
        let ps = [ps[0], ps[1], ps[2], Scalar::I64(shift)];
        let want = |i: usize| {
            let (a, bb, c) = (i / (nb * nc), (i / nc) % nb, i % nc);
            let t = bb as i64 + nb as i64 - shift;
            let wrap = t >= nb as i64;
            let r1 = if wrap { t - nb as i64 } else { t };
            let m2 = (nc - c) % nc;
            let ix = (na - 1 - a) * nb * nc + r1 as usize * nc + m2;
            (xs[ix] + ys[m2], wrap, r1)
        };
        for (pieces, planned) in [
            (1usize, false),
            (2, false),
            (5, false),
            (1, true),
            (5, true),
        ] {
            let mut s = 0;
            for p in 0..pieces {
                let e = n * (p + 1) / pieces;
                let mut outs = run_range_by(&k, &ins, &shape, &ps, s, e - s, planned).unwrap();
                assert_eq!(outs.len(), 3);
                let (v, w, r) = (
                    i64s(outs.pop().unwrap()),
                    bools(outs.pop().unwrap()),
                    f64s(outs.pop().unwrap()),
                );
                assert_eq!(v.len(), e - s);
                for j in 0..e - s {
                    let (wv, ww, wr) = want(s + j);
                    assert_eq!(r[j], wv, "{shape:?} value at {}", s + j);
                    assert_eq!(w[j], ww, "{shape:?} wrap at {}", s + j);
                    assert_eq!(v[j], wr, "{shape:?} rolled index at {}", s + j);
                }
                s = e;
            }
        }
        // one element short: the load whose index is n - 1 is out of bounds, an error
        // and not a panic, whether or not the range starts at 0
        if n > 1 {
            let short = [HostBuf::F64(xs[..n - 1].to_vec()), ins[1].clone()];
            let e = run_range(&k, &short, &shape, &ps, 0, n).unwrap_err();
            assert!(e.to_string().contains("out of bounds"), "{shape:?}: {e}");
            let e = run_range_by(&k, &short, &shape, &ps, 0, n, true).unwrap_err();
            assert!(e.to_string().contains("out of bounds"), "{shape:?}: {e}");
        }
    }
}

// ------------------------------------------------------------------------------------
// Random numbers
// ------------------------------------------------------------------------------------

#[test]
fn philox_known_answer() {
    // Random123 kat_vectors: philox4x32_10, counter 0, key 0.
    assert_eq!(
        semantics::philox(0, 0),
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
    );
}

#[test]
fn random_values_follow_semantics() {
    let mut b = Builder::new(1);
    let i = b.push(Inst::Index, DType::I64);
    let seed = b.param(DType::I64);
    let u32_ = b.push(Inst::Random(RandomKind::Uniform, i, seed), DType::F32);
    let u64_ = b.push(Inst::Random(RandomKind::Uniform, i, seed), DType::F64);
    let n32 = b.push(Inst::Random(RandomKind::Normal, i, seed), DType::F32);
    let n64 = b.push(Inst::Random(RandomKind::Normal, i, seed), DType::F64);
    for v in [u32_, u64_, n32, n64] {
        b.store(v);
    }
    let k = b.finish();
    let seed = -12345i64;
    let n = 2000;
    let outs = run_range(&k, &[], &[n + 100], &[Scalar::I64(seed)], 100, n).unwrap();
    let mut it = outs.into_iter();
    let (a, bb, c, d) = (
        f32s(it.next().unwrap()),
        f64s(it.next().unwrap()),
        f32s(it.next().unwrap()),
        f64s(it.next().unwrap()),
    );
    let s = seed as u64;
    for j in 0..n {
        let ctr = (j + 100) as u64;
        let x = semantics::philox(ctr, s);
        assert_eq!(a[j], (x[0] >> 8) as f32 / 16_777_216.0);
        assert_eq!(bb[j], semantics::uniform_f64(ctr, s));
        assert_eq!(c[j], semantics::normal_f64(ctr, s) as f32);
        assert_eq!(d[j], semantics::normal_f64(ctr, s));
        assert!((0.0..1.0).contains(&a[j]) && (0.0..1.0).contains(&bb[j]));
    }
    let mean = d.iter().sum::<f64>() / n as f64;
    assert!(mean.abs() < 0.1, "normal mean {mean}");
}

// ------------------------------------------------------------------------------------
// Throughput (run with --release -- --ignored --nocapture)
// ------------------------------------------------------------------------------------

#[test]
#[ignore]
fn throughput_f32_chain() {
    let n = 1usize << 24;
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let mut v = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    let p = b.param(DType::F32);
    let q = b.param(DType::F32);
    let ops = [
        BinaryOp::Mul,
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Maximum,
        BinaryOp::Add,
        BinaryOp::Mul,
        BinaryOp::Minimum,
    ];
    for (j, &op) in ops.iter().enumerate() {
        v = b.binary(op, v, if j % 2 == 0 { p } else { q });
        v = b.unary(
            if j % 2 == 0 {
                UnaryOp::Abs
            } else {
                UnaryOp::Neg
            },
            v,
        );
    }
    b.store(v);
    let arith = b.finish();
    let mut b = Builder::new(1);
    let x = b.input(DType::F32);
    let i = b.push(Inst::Index, DType::I64);
    let mut v = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    let p = b.param(DType::F32);
    for j in 0..16 {
        v = match j % 4 {
            0 => b.binary(BinaryOp::Mul, v, p),
            1 => b.unary(UnaryOp::Sin, v),
            2 => b.unary(UnaryOp::Exp, v),
            _ => b.unary(UnaryOp::Tanh, v),
        };
    }
    b.store(v);
    let transc = b.finish();
    let xs = HostBuf::F32((0..n).map(|j| (j % 1000) as f32 * 0.001).collect());
    for (name, k) in [("arith", &arith), ("transcendental", &transc)] {
        let mut out = HostBuf::zeros(DType::F32, n);
        let args = LaunchArgs {
            shape: vec![n].into(),
            params: vec![Scalar::F32(0.999), Scalar::F32(0.5)].into(),
        };
        let params = &k.params;
        let args = LaunchArgs {
            params: args.params[..params.len()].to_vec().into(),
            ..args
        };
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            interp::run(k, &[xs.as_slice()], &mut [out.as_slice_mut()], &args, 0).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name}: 16-op f32 chain over 2^24: {:.1} ms single-thread ({:.2} ns/elem/op)",
            best * 1e3,
            best * 1e9 / n as f64 / 16.0
        );
    }
}

/// `run_shared` keeps a launch's plan per thread: repeated launches of one kernel with
/// other parameters (even ones equal as numbers but not in bits, like `-0.0` and `0.0`,
/// which planning folds), other input lengths or another range must not reuse a plan made
/// for different arguments; results are compared with `interp::run`, which plans anew.
#[test]
fn shared_launch_plans_follow_their_arguments() {
    let mut b = Builder::new(1);
    let i = b.input(DType::F64);
    let p = b.param(DType::F64);
    let ix = b.push(Inst::Index, DType::I64);
    let x = b.push(
        Inst::Load {
            input: i,
            index: ix,
            guard: None,
        },
        DType::F64,
    );
    let one = b.push(Inst::Const(Scalar::F64(1.0)), DType::F64);
    let inv = b.binary(BinaryOp::Div, one, p); // uniform: folded while planning
    let y = b.binary(BinaryOp::Add, x, inv);
    b.store(y);
    let k = std::sync::Arc::new(b.finish());
    let launch = |xs: &[f64], p: f64, shared: bool| -> Vec<f64> {
        let input = HostBuf::F64(xs.to_vec());
        let ins = [input.as_slice()];
        let mut out = HostBuf::zeros(DType::F64, xs.len());
        let mut views = [out.as_slice_mut()];
        let args = LaunchArgs {
            shape: vec![xs.len()].into(),
            params: vec![Scalar::F64(p)].into(),
        };
        if shared {
            interp::run_shared(&k, &ins, &mut views, &args, 0).expect("run_shared");
        } else {
            interp::run(&k, &ins, &mut views, &args, 0).expect("run");
        }
        let HostBuf::F64(v) = out else {
            panic!("dtype")
        };
        v
    };
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let x3 = [1.0, -2.0, 0.5];
    let x5 = [1.0, 2.0, 3.0, 4.0, 5.0];
    for round in 0..2 {
        for (xs, p) in [
            (&x3[..], 0.0),
            (&x3[..], -0.0),
            (&x3[..], 4.0),
            (&x5[..], 4.0),
            (&x3[..], f64::NAN),
            (&x3[..], 0.0),
        ] {
            let want = launch(xs, p, false);
            // independent check of the fold: 1/p added to each element
            for (w, &xv) in want.iter().zip(xs) {
                let e = xv + 1.0 / p;
                assert!(e.to_bits() == w.to_bits() || (e.is_nan() && w.is_nan()));
            }
            let got = launch(xs, p, true);
            assert_eq!(
                bits(&got),
                bits(&want),
                "round {round}, p = {p}, n = {}",
                xs.len()
            );
        }
    }
    // an output of the wrong length is an error on a cached plan too
    let input = HostBuf::F64(x3.to_vec());
    let mut out = HostBuf::zeros(DType::F64, 2);
    let args = LaunchArgs {
        shape: vec![3].into(),
        params: vec![Scalar::F64(4.0)].into(),
    };
    let r = interp::run_shared(&k, &[input.as_slice()], &mut [out.as_slice_mut()], &args, 0);
    assert!(r.is_err());
}

/// A load at a uniform index is folded to the value it reads while planning, so such a
/// plan holds input data: a repeated shared launch with other data must read the new data.
#[test]
fn shared_launch_plans_do_not_keep_input_data() {
    let mut b = Builder::new(1);
    let i = b.input(DType::F32);
    let s = b.input(DType::F32);
    let ix = b.push(Inst::Index, DType::I64);
    let zero = b.push(Inst::Const(Scalar::I64(0)), DType::I64);
    let x = b.push(
        Inst::Load {
            input: i,
            index: ix,
            guard: None,
        },
        DType::F32,
    );
    let sv = b.push(
        Inst::Load {
            input: s,
            index: zero,
            guard: None,
        },
        DType::F32,
    );
    let y = b.binary(BinaryOp::Mul, x, sv);
    b.store(y);
    let k = std::sync::Arc::new(b.finish());
    let xs = HostBuf::F32(vec![1.0, 2.0, 3.0]);
    for scale in [2.0f32, 5.0, -1.0] {
        let sb = HostBuf::F32(vec![scale]);
        let mut out = HostBuf::zeros(DType::F32, 3);
        let args = LaunchArgs {
            shape: vec![3].into(),
            params: Default::default(),
        };
        interp::run_shared(
            &k,
            &[xs.as_slice(), sb.as_slice()],
            &mut [out.as_slice_mut()],
            &args,
            0,
        )
        .expect("run_shared");
        let HostBuf::F32(v) = out else {
            panic!("dtype")
        };
        assert_eq!(v, [scale, 2.0 * scale, 3.0 * scale]);
    }
}

/// `where(i < m, exp(x[2 i]) + p, q)` over `n` elements with `x` only `2 m` long: the true
/// side's load is out of bounds past `m`, so the launch succeeds only if the tiles whose
/// condition is false everywhere skip that side (guarded tiles), and it still fails when a
/// tile mixes true and false (the side runs over the whole tile there: the guard is per
/// tile, not per element).
#[test]
fn where_sides_run_only_in_tiles_that_select_them() {
    let k = {
        let mut b = Builder::new(1);
        let i = b.push(Inst::Index, DType::I64);
        let m = b.param(DType::I64);
        let c = b.binary(BinaryOp::Lt, i, m);
        let two = b.const_i64(2);
        let ix = b.binary(BinaryOp::Mul, i, two);
        let x = load_at(&mut b, DType::F64, ix);
        let e = b.unary(UnaryOp::Exp, x);
        let p = b.param(DType::F64);
        let e = b.binary(BinaryOp::Add, e, p);
        let q = b.param(DType::F64);
        let w = b.select(c, e, q);
        b.store(w);
        b.finish()
    };
    let m = 4 * interp::TILE;
    let n = 7 * interp::TILE + 5;
    let xs: Vec<f64> = (0..2 * m).map(|j| (j % 97) as f64 * 0.01).collect();
    let params = [Scalar::I64(m as i64), Scalar::F64(0.5), Scalar::F64(-3.0)];
    let out = run_all(&k, &[HostBuf::F64(xs.clone())], &[n], &params);
    let got = f64s(out.into_iter().next().unwrap());
    assert_eq!(got.len(), n);
    for (j, &g) in got.iter().enumerate() {
        let want = if j < m { xs[2 * j].exp() + 0.5 } else { -3.0 };
        assert!(
            (g - want).abs() <= 4e-16 * want.abs(),
            "element {j}: {g} != {want}"
        );
    }
    // a tile that mixes both sides computes the true side over the whole tile
    let mixed = [
        Scalar::I64(m as i64 + 10),
        Scalar::F64(0.5),
        Scalar::F64(-3.0),
    ];
    let ins = [HostBuf::F64(xs)];
    let err = run_range(&k, &ins, &[n], &mixed, 0, n).expect_err("out-of-bounds load");
    assert!(err.0.contains("out of bounds"), "{}", err.0);
}

/// `x ** 2` and `x ** 3` with a uniform exponent run as products: within 1.5 ulp of
/// `powf` (exact for squares) with `powf`'s special values.
#[test]
fn small_integer_powers_match_pow() {
    let mut xs: Vec<f32> = (-300..300).map(|k| k as f32 * 0.37).collect();
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-15,
        -2e12,
        3e-39,
    ]);
    for e in [2.0f32, 3.0] {
        let k = {
            let mut b = Builder::new(1);
            let i = b.push(Inst::Index, DType::I64);
            let x = load_at(&mut b, DType::F32, i);
            let p = b.param(DType::F32);
            let y = b.binary(BinaryOp::Pow, x, p);
            b.store(y);
            b.finish()
        };
        let out = run_all(
            &k,
            &[HostBuf::F32(xs.clone())],
            &[xs.len()],
            &[Scalar::F32(e)],
        );
        let got = f32s(out.into_iter().next().unwrap());
        for (&x, &g) in xs.iter().zip(&got) {
            let want = x.powf(e);
            let ok = if want.is_nan() || !want.is_finite() || want == 0.0 {
                same32(g, want)
            } else {
                let ulp = f32::from_bits(want.abs().to_bits() + 1) - want.abs();
                (g - want).abs() <= 1.5 * ulp && (e != 2.0 || g == want)
            };
            assert!(ok, "{x} ** {e}: {g}, powf gives {want}");
        }
    }
}

/// `sin(x)` and `cos(x)` of one f32 column (computed together, one range reduction) give
/// the bits of the separate functions, also used by further values and under a `where`.
#[test]
fn sine_and_cosine_of_one_value_match_the_separate_functions() {
    let k = {
        let mut b = Builder::new(1);
        let i = b.push(Inst::Index, DType::I64);
        let x = load_at(&mut b, DType::F32, i);
        let c = b.unary(UnaryOp::Cos, x);
        let s = b.unary(UnaryOp::Sin, x);
        let p = b.binary(BinaryOp::Mul, s, c);
        let z = b.param(DType::F32);
        let g = b.binary(BinaryOp::Gt, x, z);
        let w = b.select(g, s, c);
        b.store(s);
        b.store(c);
        b.store(p);
        b.store(w);
        b.finish()
    };
    let n = 3 * interp::TILE + 17;
    let xs: Vec<f32> = (0..n).map(|j| (j as f32 - 3000.0) * 0.731).collect();
    let outs = run_all(&k, &[HostBuf::F32(xs.clone())], &[n], &[Scalar::F32(0.0)]);
    let mut it = outs.into_iter().map(f32s);
    let (s, c, p, w) = (
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap(),
    );
    let (mut s1, mut c1) = (vec![0.0f32; n], vec![0.0f32; n]);
    lazyfuse_codegen::vmath::sin_f32(&xs, &mut s1);
    lazyfuse_codegen::vmath::cos_f32(&xs, &mut c1);
    for j in 0..n {
        assert!(same32(s[j], s1[j]) && same32(c[j], c1[j]), "element {j}");
        assert!(same32(p[j], s1[j] * c1[j]), "product {j}");
        let want = if xs[j] > 0.0 { s1[j] } else { c1[j] };
        assert!(same32(w[j], want), "where {j}");
    }
}

/// `(x * y + z)` of F16 inputs through `Builder::finish`.
fn half_fma_kernel(d: DType) -> Kernel {
    let mut b = Builder::new(1);
    let i = b.push(Inst::Index, DType::I64);
    let x = load_at(&mut b, d, i);
    let y = load_at(&mut b, d, i);
    let z = load_at(&mut b, d, i);
    let p = b.binary(BinaryOp::Mul, x, y);
    let s = b.binary(BinaryOp::Add, p, z);
    b.store(s);
    b.finish()
}

#[test]
fn half_kernels_compute_in_f32_and_round_once_at_the_store() {
    let k = half_fma_kernel(DType::F16);
    // 16-bit floats only where they are loaded, converted and stored
    for v in &k.values {
        let ok = match v.inst {
            Inst::Load { .. } => v.dtype == DType::F16,
            Inst::Binary(..) => v.dtype == DType::F32,
            Inst::Cast(a) => {
                let from = k.values[a as usize].dtype;
                matches!(
                    (from, v.dtype),
                    (DType::F16, DType::F32) | (DType::F32, DType::F16)
                )
            }
            _ => !v.dtype.is_half(),
        };
        assert!(ok, "{:?}: {}", v.inst, v.dtype);
    }
    assert_eq!(k.outputs, [DType::F16]);
    // x = y = 1 + 2^-10, z = -(1 + 2^-9): x * y = 1 + 2^-9 + 2^-20 exactly in f32, so the
    // sum is 2^-20 (a float16 subnormal); rounding the product to float16 first (NumPy's
    // op-by-op float16) would give 0. And 1 + 2^-11 (a tie) rounds to even: 1.
    let h = |v: f64| half::f16::from_f64(v);
    let x = HostBuf::F16(vec![h(1.0 + 2f64.powi(-10)), h(1.0)]);
    let z = HostBuf::F16(vec![h(-(1.0 + 2f64.powi(-9))), h(2f64.powi(-11))]);
    let out = run_all(&k, &[x.clone(), x, z], &[2], &[]).pop().unwrap();
    let HostBuf::F16(v) = out else {
        panic!("output dtype {}", out.dtype())
    };
    assert_eq!(v[0].to_f64(), 2f64.powi(-20));
    assert_eq!(v[1].to_bits(), h(1.0).to_bits());
    // bfloat16 the same way: 1 + 2^-8 is a tie between 1 and 1 + 2^-7
    let k = half_fma_kernel(DType::BF16);
    let b = |v: f64| half::bf16::from_f64(v);
    let one = HostBuf::BF16(vec![b(1.0), b(1.0)]);
    let z = HostBuf::BF16(vec![b(2f64.powi(-8)), b(3.0 * 2f64.powi(-8))]);
    let out = run_all(&k, &[one.clone(), one, z], &[2], &[])
        .pop()
        .unwrap();
    let HostBuf::BF16(v) = out else {
        panic!("output dtype {}", out.dtype())
    };
    assert_eq!(v[0].to_f64(), 1.0);
    assert_eq!(v[1].to_f64(), 1.0 + 2f64.powi(-6));
}

#[test]
fn half_arithmetic_without_widening_is_invalid() {
    let mut k = Kernel {
        rank: 1,
        inputs: vec![DType::F16],
        outputs: vec![DType::F16],
        ..Kernel::default()
    };
    k.values.push(lazyfuse_codegen::Value {
        inst: Inst::Index,
        dtype: DType::I64,
    });
    k.values.push(lazyfuse_codegen::Value {
        inst: Inst::Load {
            input: 0,
            index: 0,
            guard: None,
        },
        dtype: DType::F16,
    });
    k.values.push(lazyfuse_codegen::Value {
        inst: Inst::Binary(BinaryOp::Add, 1, 1),
        dtype: DType::F16,
    });
    k.stores.push(lazyfuse_codegen::Store {
        output: 0,
        value: 2,
    });
    let e = k.validate().unwrap_err();
    assert!(e.0.contains("16-bit floats"), "{e}");
    // the widened kernel is valid and adds in f32
    let w = k.widen_half();
    w.validate().unwrap();
    let x = HostBuf::F16(vec![half::f16::from_f32(1.5), half::f16::MAX]);
    let out = run_all(&w, &[x], &[2], &[]).pop().unwrap();
    let HostBuf::F16(v) = out else {
        panic!("output dtype {}", out.dtype())
    };
    assert_eq!(v[0].to_f32(), 3.0);
    assert!(v[1].is_infinite());
}

#[test]
fn small_integer_arithmetic_wraps() {
    let mut b = Builder::new(1);
    let i = b.push(Inst::Index, DType::I64);
    let x = load_at(&mut b, DType::U8, i);
    let y = load_at(&mut b, DType::U8, i);
    let s = b.binary(BinaryOp::Sub, x, y);
    let m = b.binary(BinaryOp::Mul, x, y);
    let q = b.binary(BinaryOp::FloorDiv, x, y);
    b.store(s);
    b.store(m);
    b.store(q);
    let k = b.finish();
    let x = HostBuf::U8(vec![0, 200, 255, 7]);
    let y = HostBuf::U8(vec![1, 2, 0, 2]);
    let out = run_all(&k, &[x, y], &[4], &[]);
    let got: Vec<Vec<u8>> = out
        .into_iter()
        .map(|o| match o {
            HostBuf::U8(v) => v,
            o => panic!("output dtype {}", o.dtype()),
        })
        .collect();
    assert_eq!(got[0], [255, 198, 255, 5]);
    assert_eq!(got[1], [0, 144, 0, 14]);
    assert_eq!(got[2], [0, 100, 0, 3]);
}
