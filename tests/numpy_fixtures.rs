//! NumPy fixtures: every case of `tests/data/fixtures.txt` (written by `tests/data/gen.py`)
//! rebuilt with lazyfuse and compared with NumPy's result on every device.
//!
//! Comparison: dtype and shape first; integers and bools exactly; floats NaN where NumPy has
//! NaN, the same infinities, the sign of zero where the case is flagged `sz`, otherwise within
//! rtol 1e-5 (F32/C64) or 1e-12 (F64/C128) with a 4-ulp floor for results near zero.
//! Reductions (group `reduce`) get an extra absolute slack per output element that scales
//! with the number of values combined (see [`reduce_slack`]).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device, Operand};
use ndarray::SliceInfoElem;
use num_complex::{Complex32, Complex64};
use std::sync::OnceLock;

const FIXTURES: &str = include_str!("data/fixtures.txt");

/// Typed element data of one array.
#[derive(Clone, Debug)]
enum Data {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<Complex32>),
    C128(Vec<Complex64>),
}

/// An array of the fixture file.
#[derive(Clone, Debug)]
struct Arr {
    dtype: DType,
    shape: Vec<usize>,
    data: Data,
}

/// A parameter token (`tag:value`).
#[derive(Clone, Debug)]
enum Param {
    F64(f64),
    F32(f32),
    I64(i64),
    I32(i32),
    Bool(bool),
    C128(Complex64),
    C64(Complex32),
    Int(isize),
    Dt(DType),
    Slice(SliceInfoElem),
    Width(usize, usize),
    /// `keepdims` of a reduction.
    Kd(bool),
    /// `ddof` of a variance or standard deviation.
    Ddof(usize),
}

#[derive(Debug)]
struct Case {
    name: String,
    expr: String,
    params: Vec<Param>,
    signed_zero: bool,
    inputs: Vec<Arr>,
    outputs: Vec<Arr>,
}

fn parse_dtype(s: &str) -> DType {
    match s {
        "bool" => DType::Bool,
        "i32" => DType::I32,
        "i64" => DType::I64,
        "f32" => DType::F32,
        "f64" => DType::F64,
        "c64" => DType::C64,
        "c128" => DType::C128,
        _ => panic!("fixtures: unknown dtype {s:?}"),
    }
}

fn hex_bytes(s: &str) -> Vec<u8> {
    if s == "_" {
        return Vec::new();
    }
    assert!(s.len().is_multiple_of(2), "fixtures: odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("fixtures: bad hex"))
        .collect()
}

fn chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    assert!(
        b.len().is_multiple_of(N),
        "fixtures: byte count is not a multiple of {N}"
    );
    b.chunks_exact(N).map(|c| c.try_into().expect("chunk size"))
}

fn parse_arr(s: &str) -> Arr {
    let mut it = s.split_whitespace();
    let (dt, shape, hex) = (it.next(), it.next(), it.next());
    let (Some(dt), Some(shape), Some(hex)) = (dt, shape, hex) else {
        panic!("fixtures: bad array {s:?}")
    };
    let dtype = parse_dtype(dt);
    let inner = shape.trim_start_matches('[').trim_end_matches(']');
    let shape: Vec<usize> = if inner.is_empty() {
        Vec::new()
    } else {
        inner
            .split(',')
            .map(|d| d.parse().expect("fixtures: bad shape"))
            .collect()
    };
    let b = hex_bytes(hex);
    let data = match dtype {
        DType::Bool => Data::Bool(b.iter().map(|&x| x != 0).collect()),
        DType::I32 => Data::I32(chunks::<4>(&b).map(i32::from_le_bytes).collect()),
        DType::I64 => Data::I64(chunks::<8>(&b).map(i64::from_le_bytes).collect()),
        DType::F32 => Data::F32(chunks::<4>(&b).map(f32::from_le_bytes).collect()),
        DType::F64 => Data::F64(chunks::<8>(&b).map(f64::from_le_bytes).collect()),
        DType::C64 => Data::C64(
            chunks::<8>(&b)
                .map(|c| {
                    let re = f32::from_le_bytes(c[..4].try_into().expect("4 bytes"));
                    let im = f32::from_le_bytes(c[4..].try_into().expect("4 bytes"));
                    Complex32::new(re, im)
                })
                .collect(),
        ),
        DType::C128 => Data::C128(
            chunks::<16>(&b)
                .map(|c| {
                    let re = f64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                    let im = f64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
                    Complex64::new(re, im)
                })
                .collect(),
        ),
        d => panic!("fixtures: dtype {d} is not used here (tests/dtypes.rs has its own)"),
    };
    let arr = Arr { dtype, shape, data };
    assert_eq!(
        data_len(&arr.data),
        arr.shape.iter().product::<usize>(),
        "fixtures: size of {s:.60}"
    );
    arr
}

fn data_len(d: &Data) -> usize {
    match d {
        Data::Bool(v) => v.len(),
        Data::I32(v) => v.len(),
        Data::I64(v) => v.len(),
        Data::F32(v) => v.len(),
        Data::F64(v) => v.len(),
        Data::C64(v) => v.len(),
        Data::C128(v) => v.len(),
    }
}

fn pf(s: &str) -> f64 {
    s.parse()
        .unwrap_or_else(|_| panic!("fixtures: bad float {s:?}"))
}
fn pi(s: &str) -> i64 {
    s.parse()
        .unwrap_or_else(|_| panic!("fixtures: bad integer {s:?}"))
}

fn parse_param(tok: &str) -> Param {
    let parts: Vec<&str> = tok.split(':').collect();
    match parts.as_slice() {
        ["f64", v] => Param::F64(pf(v)),
        ["f32", v] => Param::F32(pf(v) as f32),
        ["i64", v] => Param::I64(pi(v)),
        ["i32", v] => Param::I32(pi(v) as i32),
        ["bool", v] => Param::Bool(*v == "1"),
        ["c128", re, im] => Param::C128(Complex64::new(pf(re), pf(im))),
        ["c64", re, im] => Param::C64(Complex32::new(pf(re) as f32, pf(im) as f32)),
        ["i", v] => Param::Int(pi(v) as isize),
        ["dt", v] => Param::Dt(parse_dtype(v)),
        ["sl", s, e, st] => Param::Slice(SliceInfoElem::Slice {
            start: pi(s) as isize,
            end: if *e == "n" {
                None
            } else {
                Some(pi(e) as isize)
            },
            step: pi(st) as isize,
        }),
        ["ix", i] => Param::Slice(SliceInfoElem::Index(pi(i) as isize)),
        ["na"] => Param::Slice(SliceInfoElem::NewAxis),
        ["w", b, a] => Param::Width(pi(b) as usize, pi(a) as usize),
        ["kd", v] => Param::Kd(*v == "1"),
        ["ddof", v] => Param::Ddof(pi(v) as usize),
        _ => panic!("fixtures: bad param {tok:?}"),
    }
}

fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        FIXTURES
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split(" | ").collect();
                assert_eq!(f.len(), 6, "fixtures: bad line {:.80}", l);
                let list = |s: &str| -> Vec<Arr> {
                    if s.trim() == "-" {
                        Vec::new()
                    } else {
                        s.split(" ; ").map(parse_arr).collect()
                    }
                };
                Case {
                    name: f[0].to_string(),
                    expr: f[1].to_string(),
                    params: if f[2] == "-" {
                        Vec::new()
                    } else {
                        f[2].split_whitespace().map(parse_param).collect()
                    },
                    signed_zero: f[3].split(',').any(|x| x == "sz"),
                    inputs: list(f[4]),
                    outputs: list(f[5]),
                }
            })
            .collect()
    })
}

fn to_array(a: &Arr, dev: &Device) -> Array {
    let s = &a.shape;
    match &a.data {
        Data::Bool(v) => Array::from_vec_on(v.clone(), s, dev),
        Data::I32(v) => Array::from_vec_on(v.clone(), s, dev),
        Data::I64(v) => Array::from_vec_on(v.clone(), s, dev),
        Data::F32(v) => Array::from_vec_on(v.clone(), s, dev),
        Data::F64(v) => Array::from_vec_on(v.clone(), s, dev),
        Data::C64(v) => Array::from_vec_on(v.clone(), s, dev),
        Data::C128(v) => Array::from_vec_on(v.clone(), s, dev),
    }
    .expect("from_vec_on")
}

// ------------------------------------------------------------------------------------------
// Building the expressions

fn operand(p: &Param) -> Operand {
    match *p {
        Param::F64(v) => v.into(),
        Param::F32(v) => v.into(),
        Param::I64(v) => v.into(),
        Param::I32(v) => v.into(),
        Param::Bool(v) => v.into(),
        Param::C128(v) => v.into(),
        Param::C64(v) => v.into(),
        ref other => panic!("not a scalar parameter: {other:?}"),
    }
}

fn int(p: &Param) -> isize {
    match *p {
        Param::Int(v) => v,
        ref other => panic!("not an integer parameter: {other:?}"),
    }
}
fn float(p: &Param) -> f64 {
    match *p {
        Param::F64(v) => v,
        ref other => panic!("not a float parameter: {other:?}"),
    }
}
fn dtype(p: &Param) -> DType {
    match *p {
        Param::Dt(d) => d,
        ref other => panic!("not a dtype parameter: {other:?}"),
    }
}
fn ints(ps: &[Param]) -> Vec<isize> {
    ps.iter().map(int).collect()
}

fn unary(op: &str, x: &Array) -> Array {
    match op {
        "abs" => x.abs(),
        "sqrt" => x.sqrt(),
        "rsqrt" => x.rsqrt(),
        "exp" => x.exp(),
        "expm1" => x.expm1(),
        "log" => x.log(),
        "log1p" => x.log1p(),
        "log2" => x.log2(),
        "log10" => x.log10(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "tanh" => x.tanh(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "trunc" => x.trunc(),
        "sign" => x.sign(),
        "square" => x.square(),
        "reciprocal" => x.reciprocal(),
        "neg" => -x,
        "not" => !x,
        "logical_not" => x.logical_not(),
        "real" => x.real(),
        "imag" => x.imag(),
        "conj" => x.conj(),
        "angle" => x.angle(),
        "isnan" => x.isnan(),
        "isinf" => x.isinf(),
        "isfinite" => x.isfinite(),
        _ => panic!("unknown unary op {op}"),
    }
}

fn binary(op: &str, a: &Array, b: Operand) -> Array {
    match op {
        "add" => a + b,
        "sub" => a - b,
        "mul" => a * b,
        "div" => a / b,
        "mod" => a % b,
        "floor_div" => a.floor_div(b),
        "pow" => a.pow(b),
        "atan2" => a.atan2(b),
        "maximum" => a.maximum(b),
        "minimum" => a.minimum(b),
        "hypot" => a.hypot(b),
        "eq" => a.eq(b),
        "ne" => a.ne(b),
        "lt" => a.lt(b),
        "le" => a.le(b),
        "gt" => a.gt(b),
        "ge" => a.ge(b),
        "and" => a.logical_and(b),
        "or" => a.logical_or(b),
        "xor" => a.logical_xor(b),
        _ => panic!("unknown binary op {op}"),
    }
}

/// `scalar op array` through the operators implemented for Rust scalars on the left.
fn scalar_lhs(op: &str, p: &Param, a: &Array) -> Array {
    macro_rules! apply {
        ($v:expr) => {{
            let v = $v;
            match op {
                "add" => v + a,
                "sub" => v - a,
                "mul" => v * a,
                "div" => v / a,
                "mod" => v % a,
                _ => panic!("no scalar-lhs operator {op}"),
            }
        }};
    }
    match *p {
        Param::F64(v) => apply!(v),
        Param::F32(v) => apply!(v),
        Param::I64(v) => apply!(v),
        Param::I32(v) => apply!(v),
        Param::Bool(v) => apply!(v),
        Param::C128(v) => apply!(v),
        Param::C64(v) => apply!(v),
        ref other => panic!("not a scalar parameter: {other:?}"),
    }
}

fn psf_pre_fft(n: usize) -> Vec<Array> {
    let x = Array::linspace(-1.0, 1.0, n, DType::F32);
    let y = Array::linspace(-1.0, 1.0, n, DType::F32);
    let g = lf::meshgrid(&[&x, &y], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phi = yy.atan2(xx);
    let phase = rho.square() * phi.cos();
    // NumPy: 1j * 2 * np.float32(np.pi) * phase_err, a complex64 product
    let two_pi = 2.0 * std::f32::consts::PI as f64;
    let wv = (&phase * lf::c64::new(0.0, two_pi)).exp();
    let wv = lf::where_(&rho.gt(1.0), 0.0, &wv);
    let pad = n / 2;
    let padded = wv.pad(&[(pad, pad)], 0.0);
    let half = (padded.shape()[0] / 2) as isize;
    let shifted = padded.roll(-half, 0).roll(-half, 1);
    vec![rho, phase, padded, shifted]
}

fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (-0.5f64 * &r).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, 0.1f64 * &z) + 1.0
}

/// The axes (`i:` tokens), keepdims and ddof of a reduction's parameters.
fn reduce_params(ps: &[Param]) -> (Vec<isize>, bool, usize) {
    let (mut axes, mut kd, mut ddof) = (Vec::new(), false, 0);
    for p in ps {
        match *p {
            Param::Int(a) => axes.push(a),
            Param::Kd(k) => kd = k,
            Param::Ddof(d) => ddof = d,
            ref other => panic!("not a reduction parameter: {other:?}"),
        }
    }
    (axes, kd, ddof)
}

/// `op` over all elements (`axes` `None`) or over `(axes, keepdims, ddof)`.
fn reduce(op: &str, x: &Array, axes: Option<(&[isize], bool, usize)>) -> Array {
    match axes {
        None => match op {
            "sum" => x.sum(),
            "prod" => x.prod(),
            "mean" => x.mean(),
            "max" => x.max(),
            "min" => x.min(),
            "all" => x.all(),
            "any" => x.any(),
            "var" => x.var(),
            "std" => x.std(),
            _ => panic!("unknown reduction {op}"),
        },
        Some((a, kd, ddof)) => match op {
            "sum" => x.sum_axes(a, kd),
            "prod" => x.prod_axes(a, kd),
            "mean" => x.mean_axes(a, kd),
            "max" => x.max_axes(a, kd),
            "min" => x.min_axes(a, kd),
            "all" => x.all_axes(a, kd),
            "any" => x.any_axes(a, kd),
            "var" => x.var_axes(a, ddof, kd),
            "std" => x.std_axes(a, ddof, kd),
            _ => panic!("unknown reduction {op}"),
        },
    }
}

fn slice_elems(ps: &[Param]) -> Vec<SliceInfoElem> {
    ps.iter()
        .map(|p| match p {
            Param::Slice(s) => *s,
            other => panic!("not a slice parameter: {other:?}"),
        })
        .collect()
}

fn build(c: &Case, x: &[Array]) -> Vec<Array> {
    let p = &c.params;
    let (head, arg) = c.expr.split_once(':').unwrap_or((c.expr.as_str(), ""));
    let one = match head {
        "u" => unary(arg, &x[0]),
        "b" => binary(arg, &x[0], (&x[1]).into()),
        "bs" => binary(arg, &x[0], operand(&p[0])),
        "sb" => scalar_lhs(arg, &p[0], &x[0]),
        "powf" => x[0].powf(float(&p[0])),
        "powi" => match p[0] {
            Param::I32(v) => x[0].powi(v),
            ref other => panic!("powi needs i32, got {other:?}"),
        },
        "clip" => x[0].clip(operand(&p[0]), operand(&p[1])),
        "clip_arr" => x[0].clip(&x[1], &x[2]),
        "where" => lf::where_(&x[0], &x[1], &x[2]),
        "where_as" => lf::where_(&x[0], &x[1], operand(&p[0])),
        "where_sa" => lf::where_(&x[0], operand(&p[0]), &x[1]),
        "where_ss" => lf::where_(&x[0], operand(&p[0]), operand(&p[1])),
        "complex" => lf::complex(&x[0], &x[1]),
        "astype" => x[0].astype(parse_dtype(arg)),
        "reshape" => x[0].reshape(&ints(p)),
        "transpose" => x[0].transpose(),
        "permute" => x[0].permute(&ints(p).iter().map(|&a| a as usize).collect::<Vec<_>>()),
        "swapaxes" => x[0].swapaxes(int(&p[0]), int(&p[1])),
        "expand_dims" => x[0].expand_dims(int(&p[0])),
        "squeeze" => x[0].squeeze(int(&p[0])),
        "broadcast_to" => {
            x[0].broadcast_to(&ints(p).iter().map(|&a| a as usize).collect::<Vec<_>>())
        }
        "flip" => x[0].flip(int(&p[0])),
        "roll" => x[0].roll(int(&p[0]), int(&p[1])),
        "transpose_reshape" => x[0].transpose().reshape(&ints(p)),
        "slice" => x[0].slice(slice_elems(p).as_slice()),
        "slice_add" => x[0].slice(slice_elems(p).as_slice()) + 1.0,
        "pad" => {
            let (w, v) = p.split_at(p.len() - 1);
            let widths: Vec<(usize, usize)> = w
                .iter()
                .map(|q| match *q {
                    Param::Width(b, a) => (b, a),
                    ref other => panic!("not a width: {other:?}"),
                })
                .collect();
            x[0].pad(&widths, float(&v[0]))
        }
        "concat" => lf::concatenate(&x.iter().collect::<Vec<_>>(), int(&p[0])),
        "stack" => lf::stack(&x.iter().collect::<Vec<_>>(), int(&p[0])),
        "roll_add" => {
            let s = x[0].sin();
            s.roll(int(&p[0]), int(&p[1])) + &s
        }
        "flip_sub" => {
            let d = &x[0] * 2.0;
            d.flip(int(&p[0])) - &d
        }
        "transpose_add" => x[0].transpose() + &x[1],
        "pad_roll_mul" => (&x[0] * 3.0).pad(&[(1, 1)], 1.0).roll(-2, 1) * 0.5,
        "arange" => Array::arange(float(&p[0]), float(&p[1]), float(&p[2]), dtype(&p[3])),
        "linspace" => Array::linspace(
            float(&p[0]),
            float(&p[1]),
            int(&p[2]) as usize,
            dtype(&p[3]),
        ),
        "eye" => Array::eye(int(&p[0]) as usize, dtype(&p[1])),
        "meshgrid_xy" => return lf::meshgrid(&x.iter().collect::<Vec<_>>(), lf::Indexing::Xy),
        "meshgrid_ij" => return lf::meshgrid(&x.iter().collect::<Vec<_>>(), lf::Indexing::Ij),
        "zeros_ones_full" => {
            return vec![
                Array::zeros(&[2, 3], DType::F32),
                Array::ones(&[3], DType::I64),
                Array::full(&[2, 2], 2.5, DType::C128),
                Array::full(&[2], -1.7, DType::I32),
            ]
        }
        "psf" => return psf_pre_fft(int(&p[0]) as usize),
        "chain" => chain(&x[0], &x[1]),
        "r" => reduce(arg, &x[0], None),
        "ra" => {
            let (axes, kd, ddof) = reduce_params(p);
            reduce(arg, &x[0], Some((&axes, kd, ddof)))
        }
        "arg" => match arg {
            "max" => x[0].argmax(int(&p[0])),
            "min" => x[0].argmin(int(&p[0])),
            _ => panic!("unknown arg reduction {arg}"),
        },
        "norm" => lf::linalg::norm(&x[0]),
        "bsum" => {
            let n = x[0].shape()[0];
            x[0].broadcast_to(&[int(&p[0]) as usize, n]).sum()
        }
        "center" => &x[0] - x[0].mean_axes(&ints(p), true),
        "softmax" => {
            let e = (&x[0] - x[0].max_axes(&ints(p), true)).exp();
            &e / e.sum_axes(&ints(p), true)
        }
        "zscore" => {
            let ax = ints(p);
            (&x[0] - x[0].mean_axes(&ax, true)) / x[0].std_axes(&ax, 0, true)
        }
        "sumsq_t" => {
            let t = x[0].transpose();
            (&t * &t + 1.0).sum_axes(&ints(p), false)
        }
        "max_epilogue" => x[0].max_axes(&ints(p), false) * 2.0 - 1.0,
        _ => panic!("unknown expression id {}", c.expr),
    };
    vec![one]
}

// ------------------------------------------------------------------------------------------
// Comparison

/// Distance to the next representable value above `|x|` in the precision of `f32` or `f64`.
fn ulp(x: f64, single: bool) -> f64 {
    if single {
        let a = (x as f32).abs();
        (f32::from_bits(a.to_bits() + 1) - a) as f64
    } else {
        let a = x.abs();
        f64::from_bits(a.to_bits() + 1) - a
    }
}

fn real_ok(g: f64, e: f64, single: bool, signed_zero: bool, extra: f64) -> bool {
    if e.is_nan() {
        return g.is_nan();
    }
    if e.is_infinite() || g.is_infinite() || g.is_nan() {
        return g == e;
    }
    if e == 0.0 && g == 0.0 {
        return !signed_zero || g.is_sign_negative() == e.is_sign_negative();
    }
    let rtol = if single { 1e-5 } else { 1e-12 };
    (g - e).abs() <= (rtol * e.abs().max(g.abs())).max(4.0 * ulp(e, single)) + extra
}

fn complex_ok(g: Complex64, e: Complex64, single: bool, signed_zero: bool, extra: f64) -> bool {
    let special = |z: Complex64| !z.re.is_finite() || !z.im.is_finite();
    if special(e) || special(g) {
        return real_ok(g.re, e.re, single, signed_zero, extra)
            && real_ok(g.im, e.im, single, signed_zero, extra);
    }
    if signed_zero {
        for (a, b) in [(g.re, e.re), (g.im, e.im)] {
            if a == 0.0 && b == 0.0 && a.is_sign_negative() != b.is_sign_negative() {
                return false;
            }
        }
    }
    let rtol = if single { 1e-5 } else { 1e-12 };
    let m = e.norm().max(g.norm());
    (g - e).norm() <= (rtol * m).max(4.0 * ulp(m, single)) + extra
}

fn read(a: &Array) -> lf::Result<Data> {
    Ok(match a.dtype() {
        DType::Bool => Data::Bool(a.to_vec()?),
        DType::I32 => Data::I32(a.to_vec()?),
        DType::I64 => Data::I64(a.to_vec()?),
        DType::F32 => Data::F32(a.to_vec()?),
        DType::F64 => Data::F64(a.to_vec()?),
        DType::C64 => Data::C64(a.to_vec()?),
        DType::C128 => Data::C128(a.to_vec()?),
        d => panic!("read: dtype {d} is not used by these fixtures"),
    })
}

/// Indices and descriptions of mismatching elements; `slack[i]` (when present) is extra
/// absolute tolerance for float element `i`.
fn mismatches(got: &Data, exp: &Data, sz: bool, slack: &[f64]) -> Vec<(usize, String, String)> {
    fn collect<T: Copy + std::fmt::Debug>(
        g: &[T],
        e: &[T],
        ok: impl Fn(T, T, usize) -> bool,
    ) -> Vec<(usize, String, String)> {
        g.iter()
            .zip(e)
            .enumerate()
            .filter(|(i, (&a, &b))| !ok(a, b, *i))
            .map(|(i, (a, b))| (i, format!("{a:?}"), format!("{b:?}")))
            .collect()
    }
    let c32 = |z: Complex32| Complex64::new(z.re as f64, z.im as f64);
    let x = |i: usize| slack.get(i).copied().unwrap_or(0.0);
    match (got, exp) {
        (Data::Bool(g), Data::Bool(e)) => collect(g, e, |a, b, _| a == b),
        (Data::I32(g), Data::I32(e)) => collect(g, e, |a, b, _| a == b),
        (Data::I64(g), Data::I64(e)) => collect(g, e, |a, b, _| a == b),
        (Data::F32(g), Data::F32(e)) => {
            collect(g, e, |a, b, i| real_ok(a as f64, b as f64, true, sz, x(i)))
        }
        (Data::F64(g), Data::F64(e)) => collect(g, e, |a, b, i| real_ok(a, b, false, sz, x(i))),
        (Data::C64(g), Data::C64(e)) => {
            collect(g, e, |a, b, i| complex_ok(c32(a), c32(b), true, sz, x(i)))
        }
        (Data::C128(g), Data::C128(e)) => {
            collect(g, e, |a, b, i| complex_ok(a, b, false, sz, x(i)))
        }
        _ => vec![(0, "(dtype differs)".into(), String::new())],
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::C64 => "c64",
        DType::C128 => "c128",
        d => d.name(),
    }
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// Runs one case; a list of problems (empty when it matches NumPy).
fn check_case(c: &Case, dev: &Device) -> Vec<String> {
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let xs: Vec<Array> = c.inputs.iter().map(|a| to_array(a, dev)).collect();
        build(c, &xs)
    }));
    let outs = match built {
        Ok(o) => o,
        Err(e) => return vec![format!("building panicked: {}", panic_text(e.as_ref()))],
    };
    if outs.len() != c.outputs.len() {
        return vec![format!(
            "{} outputs, NumPy has {}",
            outs.len(),
            c.outputs.len()
        )];
    }
    let mut problems = Vec::new();
    for (k, (got, exp)) in outs.iter().zip(&c.outputs).enumerate() {
        if got.dtype() != exp.dtype {
            problems.push(format!(
                "output {k}: dtype {} but NumPy gives {}",
                dtype_name(got.dtype()),
                dtype_name(exp.dtype)
            ));
            continue;
        }
        if got.shape() != exp.shape.as_slice() {
            problems.push(format!(
                "output {k}: shape {:?} but NumPy gives {:?}",
                got.shape(),
                exp.shape
            ));
            continue;
        }
        let data = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(got))) {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                problems.push(format!("output {k}: evaluation failed: {e}"));
                continue;
            }
            Err(e) => {
                problems.push(format!(
                    "output {k}: evaluation panicked: {}",
                    panic_text(e.as_ref())
                ));
                continue;
            }
        };
        let slack = reduce_slack(c, exp);
        let bad = mismatches(&data, &exp.data, c.signed_zero, &slack);
        let n = bad.len();
        for (i, g, e) in bad.into_iter().take(usize::MAX) {
            let input: Vec<String> =
                if c.inputs.len() == 1 && data_len(&c.inputs[0].data) == data_len(&exp.data) {
                    vec![element_text(&c.inputs[0].data, i)]
                } else {
                    Vec::new()
                };
            let at = if input.is_empty() {
                String::new()
            } else {
                format!(" (input {})", input[0])
            };
            problems.push(format!("output {k}[{i}]{at}: got {g}, NumPy {e}"));
        }
        if n > 6 {
            problems.push(format!("output {k}: ... {n} mismatching elements in all"));
        }
    }
    problems
}

/// Magnitudes of the elements of `d` (modulus for complex, 0/1 for bool).
fn magnitudes(d: &Data) -> Vec<f64> {
    match d {
        Data::Bool(v) => v.iter().map(|&b| b as u8 as f64).collect(),
        Data::I32(v) => v.iter().map(|&a| (a as f64).abs()).collect(),
        Data::I64(v) => v.iter().map(|&a| (a as f64).abs()).collect(),
        Data::F32(v) => v.iter().map(|&a| (a as f64).abs()).collect(),
        Data::F64(v) => v.iter().map(|&a| a.abs()).collect(),
        Data::C64(v) => v.iter().map(|a| (a.norm()) as f64).collect(),
        Data::C128(v) => v.iter().map(|a| a.norm()).collect(),
    }
}

/// For each element of an input of `shape`, the position (C order) of the output it is
/// reduced into when `axes` (normalized) are reduced; and the number of outputs.
fn reduce_groups(shape: &[usize], axes: &[usize]) -> (Vec<usize>, usize) {
    let kept: Vec<usize> = (0..shape.len()).filter(|k| !axes.contains(k)).collect();
    let m: usize = kept.iter().map(|&k| shape[k]).product();
    let total: usize = shape.iter().product();
    let pos = (0..total)
        .map(|mut i| {
            // the multi-index of flat index `i`, then its kept part in C order
            let mut idx = vec![0; shape.len()];
            for k in (0..shape.len()).rev() {
                idx[k] = i % shape[k];
                i /= shape[k];
            }
            kept.iter().fold(0, |acc, &k| acc * shape[k] + idx[k])
        })
        .collect();
    (pos, m)
}

/// Extra absolute tolerance per output element of a `reduce/` case (empty otherwise).
///
/// NumPy sums floats pairwise (with short serial runs at the leaves, and serially across an
/// outer axis), and so does lazyfuse in its own tree order; each result is within about
/// `eps * log2(n) * sum|x|` of the exact sum, so two such sums of n values may differ by a
/// few ulp times log2(n), relative to `sum|x|` (not to the result, which cancellation can
/// make arbitrarily small). Hence, with `L = ceil(log2 n) + 1` and `eps` of the result's
/// precision:
/// * sum: `4 eps L sum|x|`; mean: the same divided by n;
/// * var, std, norm (sums of nonnegative terms): `4 eps L |want|`;
/// * prod (serial in NumPy): `4 eps n |want|`;
/// * reductions inside elementwise work (`center`, `softmax`, ...): `8 eps L M (1 + |want|)`
///   with `M = max(max|x|, 1)` and n the input's size;
/// * max, min, argmax, argmin, all, any and integer results: exact (no slack).
fn reduce_slack(c: &Case, exp: &Arr) -> Vec<f64> {
    // an infinite or NaN input makes the bound meaningless: no slack, exact specials
    reduce_slack_raw(c, exp)
        .into_iter()
        .map(|s| if s.is_finite() { s } else { 0.0 })
        .collect()
}

fn reduce_slack_raw(c: &Case, exp: &Arr) -> Vec<f64> {
    if !c.name.starts_with("reduce/") || c.inputs.is_empty() {
        return Vec::new();
    }
    let eps = match exp.dtype {
        DType::F32 | DType::C64 => f32::EPSILON as f64,
        DType::F64 | DType::C128 => f64::EPSILON,
        _ => return Vec::new(),
    };
    let want = magnitudes(&exp.data);
    let x = &c.inputs[0];
    let mag = magnitudes(&x.data);
    let log = |n: usize| (n.max(2) as f64).log2().ceil() + 1.0;
    let (head, op) = c.expr.split_once(':').unwrap_or((c.expr.as_str(), ""));
    let nd = x.shape.len();
    let axes: Vec<usize> = match head {
        "r" | "norm" | "bsum" => (0..nd).collect(),
        "ra" => reduce_params(&c.params)
            .0
            .iter()
            .map(|&a| {
                if a < 0 {
                    (a + nd as isize) as usize
                } else {
                    a as usize
                }
            })
            .collect(),
        "arg" => return Vec::new(),
        _ => {
            let m = mag.iter().fold(1.0f64, |a, &b| a.max(b));
            let l = log(mag.len());
            return want.iter().map(|w| 8.0 * eps * l * m * (1.0 + w)).collect();
        }
    };
    let (pos, m) = reduce_groups(&x.shape, &axes);
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let mut abs_sum = vec![0.0; m];
    for (&p, &v) in pos.iter().zip(&mag) {
        abs_sum[p] += v;
    }
    let l = log(n);
    match (head, op) {
        ("bsum", _) => {
            let k = int(&c.params[0]) as f64;
            let n = k as usize * mag.len();
            vec![4.0 * eps * log(n) * k * abs_sum[0]]
        }
        (_, "sum") => abs_sum.iter().map(|s| 4.0 * eps * l * s).collect(),
        (_, "mean") => abs_sum
            .iter()
            .map(|s| 4.0 * eps * l * s / n.max(1) as f64)
            .collect(),
        (_, "var" | "std") | ("norm", _) => want.iter().map(|w| 4.0 * eps * l * w).collect(),
        (_, "prod") => want.iter().map(|w| 4.0 * eps * n as f64 * w).collect(),
        _ => Vec::new(),
    }
}

fn element_text(d: &Data, i: usize) -> String {
    match d {
        Data::Bool(v) => format!("{:?}", v[i]),
        Data::I32(v) => format!("{:?}", v[i]),
        Data::I64(v) => format!("{:?}", v[i]),
        Data::F32(v) => format!("{:?}", v[i]),
        Data::F64(v) => format!("{:?}", v[i]),
        Data::C64(v) => format!("{:?}", v[i]),
        Data::C128(v) => format!("{:?}", v[i]),
    }
}

/// Runs every case of `group` on `dev`; fails listing all its mismatches.
fn run_group(group: &str, dev: &Device) {
    let selected: Vec<&Case> = cases()
        .iter()
        .filter(|c| c.name.split('/').next() == Some(group))
        .collect();
    assert!(!selected.is_empty(), "no fixture cases in group {group}");
    let mut failed = 0;
    let mut lines = Vec::new();
    for c in &selected {
        let problems = check_case(c, dev);
        if !problems.is_empty() {
            failed += 1;
            lines.push(format!("{} [{}] ({}):", c.name, dev, c.expr));
            lines.extend(problems.into_iter().map(|p| format!("    {p}")));
        }
    }
    assert!(
        failed == 0,
        "{failed} of {} NumPy fixture cases of group {group:?} differ on {dev}:\n{}",
        selected.len(),
        lines.join("\n")
    );
}

#[test]
fn fixture_file_parses() {
    let cs = cases();
    assert!(cs.len() > 1000, "only {} cases", cs.len());
    let header = FIXTURES
        .lines()
        .find(|l| l.starts_with("# numpy "))
        .expect("numpy version line");
    assert!(header.starts_with("# numpy 2."), "{header}");
    let groups = [
        "unary", "binary", "promote", "weak", "clip", "where", "cast", "view", "creation",
        "workload", "reduce", "fft", // repeated FFT axes, checked by tests/fft.rs
    ];
    for c in cs {
        let g = c.name.split('/').next().unwrap_or("");
        assert!(groups.contains(&g), "case {} belongs to no test", c.name);
    }
}

device_test!(numpy_unary);
fn numpy_unary(dev: &Device) {
    run_group("unary", dev);
}

device_test!(numpy_binary);
fn numpy_binary(dev: &Device) {
    run_group("binary", dev);
}

device_test!(numpy_promotion);
fn numpy_promotion(dev: &Device) {
    run_group("promote", dev);
}

device_test!(numpy_weak_scalars);
fn numpy_weak_scalars(dev: &Device) {
    run_group("weak", dev);
}

device_test!(numpy_clip);
fn numpy_clip(dev: &Device) {
    run_group("clip", dev);
}

device_test!(numpy_where);
fn numpy_where(dev: &Device) {
    run_group("where", dev);
}

device_test!(numpy_astype);
fn numpy_astype(dev: &Device) {
    run_group("cast", dev);
}

device_test!(numpy_views);
fn numpy_views(dev: &Device) {
    run_group("view", dev);
}

device_test!(numpy_creation);
fn numpy_creation(dev: &Device) {
    run_group("creation", dev);
}

device_test!(numpy_workloads);
fn numpy_workloads(dev: &Device) {
    run_group("workload", dev);
}

device_test!(numpy_reductions);
fn numpy_reductions(dev: &Device) {
    run_group("reduce", dev);
}
