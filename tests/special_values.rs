//! NumPy's special cases (shared/notes/SEMANTICS.md) asserted bit-exactly on every device:
//! signed zeros, NaN propagation and its exceptions, infinities, integer division and
//! overflow, float->int casts, complex classification -- each also through strided and
//! reversed views (as NumPy's `TestFPClass` checks strides).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{s, Array, DType, Device};
use num_complex::{Complex32, Complex64};
use std::f64::consts::{FRAC_PI_4, PI};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
/// Filler for the positions a strided view skips.
const JUNK: f64 = 12345.0;

/// True when `g` is `e` exactly: both NaN, or the same bits (so `-0.0 != 0.0`).
fn same(g: f64, e: f64) -> bool {
    (g.is_nan() && e.is_nan()) || g.to_bits() == e.to_bits()
}

#[track_caller]
fn assert_same(got: &[f64], exp: &[f64], what: &str) {
    assert_eq!(got.len(), exp.len(), "{what}: length");
    let bad: Vec<String> = got
        .iter()
        .zip(exp)
        .enumerate()
        .filter(|(_, (&g, &e))| !same(g, e))
        .map(|(i, (g, e))| format!("[{i}] got {g:?}, expected {e:?}"))
        .collect();
    assert!(bad.is_empty(), "{what}: {}", bad.join("; "));
}

/// `x` as a 1-D array of `dtype` (F32 or F64) in one of three layouts: contiguous (0), the
/// step-2 view of an interleaved buffer (1), the step -2 view of a reversed interleaved
/// buffer (2). Every layout shows the same values.
fn layout(x: &[f64], dtype: DType, kind: usize) -> Array {
    let data: Vec<f64> = match kind {
        0 => x.to_vec(),
        _ => {
            let mut v: Vec<f64> = x.iter().flat_map(|&a| [a, JUNK]).collect();
            if kind == 2 {
                v.reverse();
            }
            v
        }
    };
    let n = data.len();
    let a = match dtype {
        DType::F64 => Array::from_vec(data, &[n]),
        DType::F32 => Array::from_vec(data.iter().map(|&v| v as f32).collect(), &[n]),
        d => panic!("layout: float dtypes only, got {d}"),
    }
    .expect("from_vec");
    match kind {
        0 => a,
        1 => a.slice(s![..;2]),
        _ => a.slice(s![..;-2]),
    }
}

/// The array's values as f64 (exact for F32 and F64).
fn values(a: &Array) -> Vec<f64> {
    match a.dtype() {
        DType::F64 => a.to_vec::<f64>().expect("to_vec"),
        DType::F32 => a
            .to_vec::<f32>()
            .expect("to_vec")
            .into_iter()
            .map(f64::from)
            .collect(),
        d => panic!("values: float dtypes only, got {d}"),
    }
}

/// `exp` rounded to `dtype` (F32 or F64).
fn rounded(exp: &[f64], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F32 => exp.iter().map(|&e| e as f32 as f64).collect(),
        _ => exp.to_vec(),
    }
}

/// Asserts `f(x) == exp` bit for bit in F64 and F32, for every layout of `x`.
#[track_caller]
fn unary_exact(what: &str, x: &[f64], f: impl Fn(&Array) -> Array, exp: &[f64]) {
    for dtype in [DType::F64, DType::F32] {
        for kind in 0..3 {
            let out = f(&layout(x, dtype, kind));
            assert_eq!(out.dtype(), dtype, "{what}: dtype");
            assert_same(
                &values(&out),
                &rounded(exp, dtype),
                &format!("{what} ({dtype}, layout {kind})"),
            );
        }
    }
}

/// Asserts `f(x, y) == exp` bit for bit in F64 and F32, for every layout of both operands.
#[track_caller]
fn binary_exact(
    what: &str,
    x: &[f64],
    y: &[f64],
    f: impl Fn(&Array, &Array) -> Array,
    exp: &[f64],
) {
    for dtype in [DType::F64, DType::F32] {
        for (kx, ky) in [(0, 0), (1, 2), (2, 0), (0, 1)] {
            let out = f(&layout(x, dtype, kx), &layout(y, dtype, ky));
            assert_eq!(out.dtype(), dtype, "{what}: dtype");
            assert_same(
                &values(&out),
                &rounded(exp, dtype),
                &format!("{what} ({dtype}, layouts {kx}/{ky})"),
            );
        }
    }
}

fn i32s(v: &[i32]) -> Array {
    Array::from_vec(v.to_vec(), &[v.len()]).expect("from_vec")
}
fn i64s(v: &[i64]) -> Array {
    Array::from_vec(v.to_vec(), &[v.len()]).expect("from_vec")
}

device_test!(signed_zero);
fn signed_zero(_: &Device) {
    unary_exact("sqrt(-0)", &[-0.0, 0.0], |a| a.sqrt(), &[-0.0, 0.0]);
    binary_exact(
        "-0 + -0",
        &[-0.0, -0.0, 0.0],
        &[-0.0, 0.0, -0.0],
        |a, b| a + b,
        &[-0.0, 0.0, 0.0],
    );
    binary_exact(
        "x - x",
        &[0.0, -0.0, -0.0],
        &[0.0, 0.0, -0.0],
        |a, b| a - b,
        &[0.0, -0.0, 0.0],
    );
    binary_exact(
        "-0 * x",
        &[-0.0, -0.0, 0.0],
        &[1.0, -1.0, -2.0],
        |a, b| a * b,
        &[-0.0, 0.0, -0.0],
    );
    unary_exact("-x", &[0.0, -0.0], |a| -a, &[-0.0, 0.0]);
    unary_exact(
        "round(-0)",
        &[-0.0, -0.4, 0.4],
        |a| a.round(),
        &[-0.0, -0.0, 0.0],
    );
    unary_exact(
        "ceil/trunc to -0",
        &[-0.5, -0.7],
        |a| a.ceil() + a.trunc(),
        &[-0.0, -0.0],
    );
    unary_exact("abs(-0)", &[-0.0], |a| a.abs(), &[0.0]);
    // a weak scalar keeps the sign of zero: -0.0 + (-0.0) = -0.0
    unary_exact("-0 + weak -0", &[-0.0, 0.0], |a| a + (-0.0), &[-0.0, 0.0]);
}

device_test!(division_by_zero);
fn division_by_zero(_: &Device) {
    let x = [1.0, 1.0, -1.0, -1.0, 0.0, -0.0, INF, NAN];
    let y = [0.0, -0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0];
    let e = [INF, -INF, -INF, INF, NAN, NAN, -INF, NAN];
    binary_exact("x / ±0", &x, &y, |a, b| a / b, &e);
    unary_exact(
        "reciprocal(±0)",
        &[0.0, -0.0],
        |a| a.reciprocal(),
        &[INF, -INF],
    );
}

device_test!(atan2_at_zeros_and_infinities);
fn atan2_at_zeros_and_infinities(_: &Device) {
    let y = [0.0, -0.0, 0.0, -0.0, INF, INF, -INF, -INF, 1.0, -1.0];
    let x = [-0.0, -0.0, 0.0, 0.0, INF, -INF, INF, -INF, -INF, -INF];
    let e = [
        PI,
        -PI,
        0.0,
        -0.0,
        FRAC_PI_4,
        3.0 * FRAC_PI_4,
        -FRAC_PI_4,
        -3.0 * FRAC_PI_4,
        PI,
        -PI,
    ];
    binary_exact("atan2", &y, &x, |a, b| a.atan2(b), &e);
}

device_test!(round_half_to_even);
fn round_half_to_even(_: &Device) {
    let x = [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 4.5, 0.0, 2.4999, -3.5];
    let e = [0.0, 2.0, 2.0, 4.0, -0.0, -2.0, -2.0, 4.0, 0.0, 2.0, -4.0];
    unary_exact("round", &x, |a| a.round(), &e);
    // F64 only: values beyond f32's exact halves
    let x64 = [
        0.49999999999999994,
        4503599627370495.5,
        -4503599627370495.5,
        2251799813685248.5,
    ];
    let a = Array::from_vec(x64.to_vec(), &[4]).expect("from_vec");
    let e64 = [
        0.0,
        4503599627370496.0,
        -4503599627370496.0,
        2251799813685248.0,
    ];
    assert_same(&values(&a.round()), &e64, "round f64 near 2^52");
}

device_test!(sign_of_zero_and_nan);
fn sign_of_zero_and_nan(_: &Device) {
    let x = [0.0, -0.0, NAN, -INF, INF, -3.0, 2.0, 1e-40];
    let e = [0.0, 0.0, NAN, -1.0, 1.0, -1.0, 1.0, 1.0];
    unary_exact("sign", &x, |a| a.sign(), &e);
}

device_test!(maximum_minimum_propagate_nan);
fn maximum_minimum_propagate_nan(_: &Device) {
    let x = [NAN, 1.0, NAN, -INF, 2.0];
    let y = [1.0, NAN, NAN, NAN, -1.0];
    binary_exact(
        "maximum",
        &x,
        &y,
        |a, b| a.maximum(b),
        &[NAN, NAN, NAN, NAN, 2.0],
    );
    binary_exact(
        "minimum",
        &x,
        &y,
        |a, b| a.minimum(b),
        &[NAN, NAN, NAN, NAN, -1.0],
    );
    // with a weak NaN scalar
    unary_exact(
        "maximum(x, nan)",
        &[1.0, -INF],
        |a| a.maximum(NAN),
        &[NAN, NAN],
    );
}

/// NumPy's answers from `tests/data/gen_minmax.py`.
const MINMAX_ZEROS: &str = include_str!("data/minmax_zeros.txt");

/// The numbers of one `|`-separated field of `minmax_zeros.txt` (`-0.0`, `nan` included).
fn numbers(field: &str) -> Vec<f64> {
    field
        .split_whitespace()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("bad number {v:?}")))
        .collect()
}

device_test!(maximum_minimum_signed_zeros_match_numpy);
/// `maximum`/`minimum` of ±0 return the second operand, as NumPy does (`maximum(-0.0, 0.0)
/// = 0.0`, `maximum(0.0, -0.0) = -0.0`), and NaN wins; so do `max`/`min` of two elements
/// (NumPy's `max([0.0, -0.0])` is -0.0). Checked bit for bit against NumPy's answers in
/// every layout.
fn maximum_minimum_signed_zeros_match_numpy(_: &Device) {
    let mut cases = 0;
    for line in MINMAX_ZEROS.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('|').map(str::trim).collect();
        let (op, dt) = f[0].split_once(' ').expect("OP DTYPE");
        let dtype = match dt {
            "f32" => DType::F32,
            "f64" => DType::F64,
            d => panic!("dtype {d}"),
        };
        let x = numbers(f[1]);
        let exp = numbers(f[f.len() - 1]);
        let what = format!("{op} {dt} of {x:?}");
        let mut check = |out: Array, tag: String| {
            assert_eq!(out.dtype(), dtype, "{what}: dtype");
            assert_same(&values(&out), &exp, &format!("{what} ({tag})"));
            cases += 1;
        };
        for kx in 0..3 {
            let a = layout(&x, dtype, kx);
            match op {
                "maximum" | "minimum" => {
                    let y = numbers(f[2]);
                    for ky in [0, 2] {
                        let b = layout(&y, dtype, ky);
                        let out = if op == "maximum" {
                            a.maximum(&b)
                        } else {
                            a.minimum(&b)
                        };
                        check(out, format!("layouts {kx}/{ky}"));
                    }
                }
                "maximum_scalar" => check(a.maximum(numbers(f[2])[0]), format!("{kx}")),
                "minimum_scalar" => check(a.minimum(numbers(f[2])[0]), format!("{kx}")),
                "max" => check(a.max(), format!("layout {kx}")),
                "min" => check(a.min(), format!("layout {kx}")),
                "max_rows" | "min_rows" if kx == 0 => {
                    let rows = a.reshape(&[-1, 2]);
                    let out = if op == "max_rows" {
                        rows.max_axes(&[1], false)
                    } else {
                        rows.min_axes(&[1], false)
                    };
                    check(out, "rows".into());
                }
                "max_rows" | "min_rows" => {}
                o => panic!("op {o}"),
            }
        }
    }
    assert_eq!(cases, 136, "cases checked");
}

device_test!(clip_with_nan_bounds);
fn clip_with_nan_bounds(_: &Device) {
    let x = [-2.0, 0.5, 3.0, NAN];
    unary_exact("clip(x, nan, 1)", &x, |a| a.clip(NAN, 1.0), &[NAN; 4]);
    unary_exact("clip(x, 0, nan)", &x, |a| a.clip(0.0, NAN), &[NAN; 4]);
    unary_exact(
        "clip(x, 0, 1)",
        &x,
        |a| a.clip(0.0, 1.0),
        &[0.0, 0.5, 1.0, NAN],
    );
}

device_test!(power_special_cases);
fn power_special_cases(_: &Device) {
    let x = [
        1.0, NAN, NAN, -0.0, -INF, -INF, -8.0, 0.0, 1.0, -1.0, -0.0, 2.0,
    ];
    let y = [
        NAN,
        0.0,
        -0.0,
        -3.0,
        3.0,
        2.0,
        1.0 / 3.0,
        -1.0,
        INF,
        INF,
        3.0,
        -INF,
    ];
    let e = [
        1.0, 1.0, 1.0, -INF, -INF, INF, NAN, INF, 1.0, 1.0, -0.0, 0.0,
    ];
    binary_exact("pow", &x, &y, |a, b| a.pow(b), &e);
    unary_exact("powf(nan, 0)", &[NAN, INF], |a| a.powf(0.0), &[1.0, 1.0]);

    // NumPy (2.4.6, measured) computes a constant exponent of 0.5 as `sqrt`:
    // power([-0, -inf], 0.5) = [-0, nan], where C `pow` gives [+0, +inf]
    let x = [-0.0, -INF, INF, 0.0, 4.0, 2.0, -1.0, NAN, 1e-310];
    let e: Vec<f64> = x.iter().map(|v| v.sqrt()).collect();
    unary_exact("powf(x, 0.5)", &x, |a| a.powf(0.5), &e);
    unary_exact("pow(x, 0.5)", &x, |a| a.pow(0.5), &e);
    unary_exact(
        "powf(x, 0.5) = sqrt",
        &x,
        |a| a.powf(0.5),
        &values(&Array::from_vec(x.to_vec(), &[x.len()]).unwrap().sqrt()),
    );
    // an array of exponents is C `pow` elementwise, as NumPy's is
    binary_exact(
        "pow(x, [0.5])",
        &[-0.0, -INF, 4.0],
        &[0.5, 0.5, 0.5],
        |a, b| a.pow(b),
        &[0.0, INF, 2.0],
    );
    // integers: the 0.5 exponent promotes to F64 (as NumPy) and is sqrt too
    let r = i32s(&[4, 2, 0]).powf(0.5);
    assert_eq!(r.dtype(), DType::F64);
    assert_eq!(r.to_vec::<f64>().unwrap(), [2.0, 2f64.sqrt(), 0.0]);
    // a negative integer scalar exponent of an integer base panics (tests/errors.rs);
    // a float one is fine, and computed integer exponents keep the integer part of the
    // real result
    assert_eq!(
        i32s(&[2, -4]).pow(-1.0).to_vec::<f64>().unwrap(),
        [0.5, -0.25]
    );
    let p = i32s(&[2, 1, -1, -1, 0]).pow(i32s(&[-1, -5, -3, -2, -1]));
    assert_eq!(p.to_vec::<i32>().unwrap(), [0, 1, -1, 1, 0]);
}

device_test!(square_of_bool_is_integer);
/// `square` of a Bool array: NumPy gives int8 0/1; I32 is the narrowest integer here.
fn square_of_bool_is_integer(_: &Device) {
    let b = Array::from_vec(vec![true, false, true], &[3]).unwrap();
    let q = b.square();
    assert_eq!(q.dtype(), DType::I32);
    assert_eq!(q.to_vec::<i32>().unwrap(), [1, 0, 1]);
    assert_eq!((b.square() + 1).to_vec::<i32>().unwrap(), [2, 1, 2]);
}

device_test!(exp_log_at_the_edges);
fn exp_log_at_the_edges(_: &Device) {
    unary_exact("exp", &[-INF, INF, NAN], |a| a.exp(), &[0.0, INF, NAN]);
    unary_exact(
        "expm1",
        &[-INF, INF, -0.0],
        |a| a.expm1(),
        &[-1.0, INF, -0.0],
    );
    unary_exact(
        "log",
        &[0.0, -0.0, -1.0, INF, 1.0],
        |a| a.log(),
        &[-INF, -INF, NAN, INF, 0.0],
    );
    unary_exact(
        "log1p",
        &[-1.0, -2.0, -0.0],
        |a| a.log1p(),
        &[-INF, NAN, -0.0],
    );
    unary_exact("sqrt", &[-1.0, INF, -INF], |a| a.sqrt(), &[NAN, INF, NAN]);
}

device_test!(infinity_arithmetic);
fn infinity_arithmetic(_: &Device) {
    let x = [INF, 0.0, INF, -INF, INF, NAN];
    let y = [INF, INF, -INF, -INF, 1.0, 0.0];
    binary_exact(
        "x - y",
        &x,
        &y,
        |a, b| a - b,
        &[NAN, -INF, INF, NAN, INF, NAN],
    );
    binary_exact(
        "x * y",
        &x,
        &y,
        |a, b| a * b,
        &[INF, NAN, -INF, INF, INF, NAN],
    );
    binary_exact(
        "x + y",
        &x,
        &y,
        |a, b| a + b,
        &[INF, INF, NAN, -INF, INF, NAN],
    );
}

device_test!(float_remainder_and_floor_division);
fn float_remainder_and_floor_division(_: &Device) {
    let x = [-7.0, 7.0, 1.0, -0.0, 0.0, 5.5, INF];
    let y = [3.0, -3.0, 0.0, 2.0, -2.0, -2.0, 2.0];
    binary_exact(
        "x % y",
        &x,
        &y,
        |a, b| a % b,
        &[2.0, -2.0, NAN, 0.0, -0.0, -0.5, NAN],
    );
    let x = [1.0, -1.0, 0.0, -0.0, -7.0, 1.0, 7.0];
    let y = [0.0, 0.0, 0.0, 2.0, 2.0, 0.1, -2.0];
    binary_exact(
        "x // y",
        &x,
        &y,
        |a, b| a.floor_div(b),
        &[INF, -INF, NAN, -0.0, -4.0, 9.0, -4.0],
    );
}

device_test!(integer_floor_division_and_remainder);
fn integer_floor_division_and_remainder(_: &Device) {
    let x = [-7, 7, -7, 7, 5, -5, 0, 3];
    let y = [2, -2, -2, 2, 0, 0, 0, -1];
    let q = [-4, -4, 3, 3, 0, 0, 0, -3];
    let r = [1, -1, -1, 1, 0, 0, 0, 0];
    let a = i32s(&x);
    let b = i32s(&y);
    assert_eq!(a.floor_div(&b).to_vec::<i32>().expect("i32 //"), q);
    assert_eq!((&a % &b).to_vec::<i32>().expect("i32 %"), r);
    let a = i64s(&x.map(i64::from));
    let b = i64s(&y.map(i64::from));
    assert_eq!(
        a.floor_div(&b).to_vec::<i64>().expect("i64 //"),
        q.map(i64::from)
    );
    assert_eq!((&a % &b).to_vec::<i64>().expect("i64 %"), r.map(i64::from));
    // weak scalars: -7 // 2 and -7 % 2
    let m = i32s(&[-7]);
    assert_eq!(m.floor_div(2).item::<i32>().expect("item"), -4);
    assert_eq!((&m % 2).item::<i32>().expect("item"), 1);
    // MIN // -1 wraps to MIN, MIN % -1 = 0
    let a = i32s(&[i32::MIN, i32::MIN]);
    let b = i32s(&[-1, 0]);
    assert_eq!(a.floor_div(&b).to_vec::<i32>().expect("//"), [i32::MIN, 0]);
    assert_eq!((&a % &b).to_vec::<i32>().expect("%"), [0, 0]);
    let a = i64s(&[i64::MIN, i64::MIN]);
    let b = i64s(&[-1, 0]);
    assert_eq!(a.floor_div(&b).to_vec::<i64>().expect("//"), [i64::MIN, 0]);
    assert_eq!((&a % &b).to_vec::<i64>().expect("%"), [0, 0]);
    // at strides
    let v = i32s(&[100, -9, 100, 7, 100, -7]).slice(s![..;-2]); // reads -7, 7, -9
    assert_eq!(
        v.floor_div(2).to_vec::<i32>().expect("strided //"),
        [-4, 3, -5]
    );
}

device_test!(integer_overflow_wraps);
fn integer_overflow_wraps(_: &Device) {
    let a = i32s(&[i32::MAX, i32::MIN, i32::MIN]);
    assert_eq!(
        (&a + 1).to_vec::<i32>().expect("+1"),
        [i32::MIN, i32::MIN + 1, i32::MIN + 1]
    );
    assert_eq!(
        (&a - 1).to_vec::<i32>().expect("-1"),
        [i32::MAX - 1, i32::MAX, i32::MAX]
    );
    assert_eq!(
        (&a * -1).to_vec::<i32>().expect("*-1"),
        [-i32::MAX, i32::MIN, i32::MIN]
    );
    assert_eq!(
        (-&a).to_vec::<i32>().expect("neg"),
        [-i32::MAX, i32::MIN, i32::MIN]
    );
    assert_eq!(
        a.abs().to_vec::<i32>().expect("abs"),
        [i32::MAX, i32::MIN, i32::MIN]
    );
    let one = i32s(&[1, 1, 1]);
    assert_eq!(
        (&a + &one).to_vec::<i32>().expect("+ array"),
        [i32::MIN, i32::MIN + 1, i32::MIN + 1]
    );
    let b = i64s(&[i64::MAX, i64::MIN]);
    assert_eq!(
        (&b + 1).to_vec::<i64>().expect("i64 +1"),
        [i64::MIN, i64::MIN + 1]
    );
    assert_eq!((&b * 2).to_vec::<i64>().expect("i64 *2"), [-2, 0]);
    assert_eq!(
        i32s(&[46341]).square().item::<i32>().expect("square"),
        46341i32.wrapping_mul(46341)
    );
}

device_test!(float_to_int_casts_of_nan_inf_and_out_of_range);
fn float_to_int_casts_of_nan_inf_and_out_of_range(_: &Device) {
    let v = [
        NAN,
        INF,
        -INF,
        1e10,
        -1e10,
        3e9,
        2147483647.9,
        -2147483648.9,
        -0.0,
    ];
    let e32 = [
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MAX,
        i32::MIN,
        0,
    ];
    for kind in 0..3 {
        let a = layout(&v, DType::F64, kind);
        assert_eq!(
            a.astype(DType::I32).to_vec::<i32>().expect("f64->i32"),
            e32,
            "f64 layout {kind}"
        );
        let a = layout(&v[..6], DType::F32, kind);
        assert_eq!(
            a.astype(DType::I32).to_vec::<i32>().expect("f32->i32"),
            e32[..6],
            "f32 layout {kind}"
        );
        let w = [NAN, INF, -INF, 1e19, -1e19, 1e10];
        let e64 = [
            i64::MIN,
            i64::MIN,
            i64::MIN,
            i64::MIN,
            i64::MIN,
            10_000_000_000,
        ];
        for dt in [DType::F64, DType::F32] {
            let a = layout(&w, dt, kind);
            assert_eq!(
                a.astype(DType::I64).to_vec::<i64>().expect("->i64"),
                e64,
                "{dt} layout {kind}"
            );
        }
    }
    // NaN is true, -0.0 is false
    let a = layout(&[NAN, -0.0, 0.0, -INF], DType::F32, 1);
    assert_eq!(
        a.astype(DType::Bool).to_vec::<bool>().expect("->bool"),
        [true, false, false, true]
    );
}

device_test!(complex_classification);
fn complex_classification(_: &Device) {
    let z = [
        Complex64::new(NAN, 1.0),
        Complex64::new(1.0, INF),
        Complex64::new(INF, NAN),
        Complex64::new(0.0, -0.0),
        Complex64::new(-INF, 0.0),
        Complex64::new(2.0, -3.0),
    ];
    let isnan = [true, false, true, false, false, false];
    let isinf = [false, true, true, false, true, false];
    let isfinite = [false, false, false, true, false, true];
    let c128 = Array::from_vec(z.to_vec(), &[z.len()]).expect("from_vec");
    let z32: Vec<Complex32> = z
        .iter()
        .map(|c| Complex32::new(c.re as f32, c.im as f32))
        .collect();
    let c64 = Array::from_vec(z32, &[z.len()]).expect("from_vec");
    for a in [&c128, &c64] {
        let what = a.dtype();
        assert_eq!(
            a.isnan().to_vec::<bool>().expect("isnan"),
            isnan,
            "isnan {what}"
        );
        assert_eq!(
            a.isinf().to_vec::<bool>().expect("isinf"),
            isinf,
            "isinf {what}"
        );
        assert_eq!(
            a.isfinite().to_vec::<bool>().expect("isfinite"),
            isfinite,
            "isfinite {what}"
        );
        // the same through a reversed view
        let r = a.flip(0);
        let rev = |v: [bool; 6]| v.iter().rev().copied().collect::<Vec<bool>>();
        assert_eq!(
            r.isnan().to_vec::<bool>().expect("isnan"),
            rev(isnan),
            "isnan flipped {what}"
        );
        assert_eq!(
            r.isinf().to_vec::<bool>().expect("isinf"),
            rev(isinf),
            "isinf flipped {what}"
        );
    }
    // abs of a complex infinity with a NaN part is inf (hypot(inf, nan) = inf)
    let a = Array::from_vec(
        vec![Complex64::new(INF, NAN), Complex64::new(NAN, -INF)],
        &[2],
    )
    .expect("from_vec");
    assert_same(
        &a.abs().to_vec::<f64>().expect("abs"),
        &[INF, INF],
        "abs(complex inf)",
    );
}

device_test!(fpclass_at_strides);
/// NumPy's `TestFPClass::test_fpclass`: classification of special values read through
/// views with strides -5..10.
fn fpclass_at_strides(_: &Device) {
    let base = [
        NAN, -NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 1e-40, 3e38, -2.5, 7.0,
    ];
    let data: Vec<f64> = base.iter().cycle().take(base.len() * 8).copied().collect();
    for dtype in [DType::F64, DType::F32] {
        let full = match dtype {
            DType::F64 => Array::from_vec(data.clone(), &[data.len()]),
            _ => Array::from_vec(data.iter().map(|&v| v as f32).collect(), &[data.len()]),
        }
        .expect("from_vec");
        let host = rounded(&data, dtype);
        for step in (-5isize..=10).filter(|&s| s != 0) {
            let view = full.slice(s![..;step]);
            let idx: Vec<usize> = if step > 0 {
                (0..host.len()).step_by(step as usize).collect()
            } else {
                (0..host.len()).rev().step_by((-step) as usize).collect()
            };
            let x: Vec<f64> = idx.iter().map(|&i| host[i]).collect();
            let what = format!("{dtype} step {step}");
            let isnan: Vec<bool> = x.iter().map(|v| v.is_nan()).collect();
            let isinf: Vec<bool> = x.iter().map(|v| v.is_infinite()).collect();
            let isfinite: Vec<bool> = x.iter().map(|v| v.is_finite()).collect();
            assert_eq!(
                view.isnan().to_vec::<bool>().expect("isnan"),
                isnan,
                "isnan {what}"
            );
            assert_eq!(
                view.isinf().to_vec::<bool>().expect("isinf"),
                isinf,
                "isinf {what}"
            );
            assert_eq!(
                view.isfinite().to_vec::<bool>().expect("isfinite"),
                isfinite,
                "isfinite {what}"
            );
            let sign: Vec<f64> = x
                .iter()
                .map(|&v| {
                    if v.is_nan() {
                        NAN
                    } else if v > 0.0 {
                        1.0
                    } else if v < 0.0 {
                        -1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            assert_same(&values(&view.sign()), &sign, &format!("sign {what}"));
            let neg: Vec<f64> = x.iter().map(|&v| -v).collect();
            let got_neg = values(&(-&view));
            // NaN sign bits are not asserted; every other sign is
            assert_same(&got_neg, &neg, &format!("negative {what}"));
        }
    }
}

device_test!(special_values_under_broadcasting);
/// Special values in a broadcast operand: a (n,1) column against a (1,m) row.
fn special_values_under_broadcasting(_: &Device) {
    let col = [-0.0, 0.0, INF, NAN];
    let row = [-0.0, -INF, 1.0];
    let a = Array::from_vec(col.to_vec(), &[4, 1]).expect("from_vec");
    let b = Array::from_vec(row.to_vec(), &[1, 3]).expect("from_vec");
    let got = (&a + &b).to_vec::<f64>().expect("add");
    let exp: Vec<f64> = col
        .iter()
        .flat_map(|&x| row.iter().map(move |&y| x + y))
        .collect();
    assert_same(&got, &exp, "(4,1) + (1,3)");
    let got = a.maximum(&b).to_vec::<f64>().expect("maximum");
    assert!(
        got[9..].iter().all(|v| v.is_nan()),
        "maximum with a NaN row: {got:?}"
    );
}
