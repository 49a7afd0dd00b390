//! Accuracy and special-value tests of the vectorized math functions (`vmath`): ulp error
//! against the C library in `f64` over dense sweeps (every exponent, subnormals included),
//! and exact NumPy / C99 special values.

use lazyfuse_codegen::vmath;

// ------------------------------------------------------------------------------------
// Inputs and error measurement
// ------------------------------------------------------------------------------------

/// Every `stride`-th f32 bit pattern of one sign (`neg`), from 0 up to `max` (all finite
/// magnitudes, subnormals included, evenly per binade), plus `max` itself.
fn bit_sweep(stride: u32, max: f32, neg: bool) -> Vec<f32> {
    let top = max.to_bits();
    let sign = if neg { 0x8000_0000 } else { 0 };
    let mut v: Vec<f32> = (0..=top / stride)
        .map(|k| f32::from_bits((k * stride) | sign))
        .collect();
    v.push(f32::from_bits(top | sign));
    v
}

/// `n + 1` evenly spaced points of `[a, b]`, rounded to f32.
fn lin(a: f64, b: f64, n: usize) -> Vec<f32> {
    (0..=n)
        .map(|k| (a + (b - a) * k as f64 / n as f64) as f32)
        .collect()
}

/// Bit sweeps of both signs over all finite magnitudes (about 2 x 2.1M points).
fn full_sweep() -> Vec<f32> {
    let mut v = bit_sweep(2039, f32::MAX, false);
    v.extend(bit_sweep(2039, f32::MAX, true));
    v
}

/// The ulp of the f32 nearest to `r` (the spacing of f32 at the magnitude of `r`,
/// subnormal spacing below the normal range).
fn ulp32(r: f64) -> f64 {
    let a = (r as f32).abs();
    let e = if a == 0.0 || a < f32::MIN_POSITIVE {
        -126
    } else {
        ((a.to_bits() >> 23) as i32) - 127
    };
    2f64.powi(e - 23)
}

/// Error of `got` against the exact `want` in ulps of f32; `inf` when they disagree on
/// NaN-ness or on an infinite result.
fn ulp_err(got: f32, want: f64) -> f64 {
    let w32 = want as f32;
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if w32.is_infinite() || got.is_infinite() {
        return if got == w32 { 0.0 } else { f64::INFINITY };
    }
    (got as f64 - want).abs() / ulp32(want)
}

/// Applies `f` to `xs`, compares with `reference` (the C library in f64) and returns the
/// largest ulp error, printing it with the worst input.
fn measure1(name: &str, f: fn(&[f32], &mut [f32]), reference: fn(f64) -> f64, xs: &[f32]) -> f64 {
    let mut out = vec![0.0f32; xs.len()];
    // Uneven chunk lengths exercise the loops' remainders.
    for (x, o) in xs.chunks(1237).zip(out.chunks_mut(1237)) {
        f(x, o);
    }
    let (mut worst, mut at) = (0.0f64, 0.0f32);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulp_err(y, reference(x as f64));
        if e > worst || e.is_nan() {
            worst = e;
            at = x;
        }
    }
    println!(
        "{name:6}: max {worst:.3} ulp over {} points (worst at x = {at:e}: got {:e}, want {:e})",
        xs.len(),
        {
            let mut o = [0.0f32];
            f(&[at], &mut o);
            o[0]
        },
        reference(at as f64)
    );
    worst
}

/// The same for a function of two arguments `f(y, x)`.
fn measure2(
    name: &str,
    f: fn(&[f32], &[f32], &mut [f32]),
    reference: fn(f64, f64) -> f64,
    ys: &[f32],
    xs: &[f32],
) -> f64 {
    let mut out = vec![0.0f32; xs.len()];
    f(ys, xs, &mut out);
    let (mut worst, mut at) = (0.0f64, (0.0f32, 0.0f32));
    for ((&y, &x), &r) in ys.iter().zip(xs).zip(&out) {
        let e = ulp_err(r, reference(y as f64, x as f64));
        if e > worst {
            worst = e;
            at = (y, x);
        }
    }
    println!(
        "{name:6}: max {worst:.3} ulp over {} points (worst at y, x = {:e}, {:e})",
        xs.len(),
        at.0,
        at.1
    );
    worst
}

const MAX_ULP: f64 = 2.0;

/// A `vmath` function of one f32 slice.
type F32 = fn(&[f32], &mut [f32]);
/// A function with its exact special values `(x, f(x))`.
type Specials<'a> = (&'a str, F32, &'a [(f32, f32)]);
/// A function with its f64 reference.
type WithRef = (F32, fn(f64) -> f64);

fn check1(name: &str, f: fn(&[f32], &mut [f32]), reference: fn(f64) -> f64, xs: &[f32]) {
    let e = measure1(name, f, reference, xs);
    assert!(e <= MAX_ULP, "{name}: {e} ulp");
}

// ------------------------------------------------------------------------------------
// ulp sweeps
// ------------------------------------------------------------------------------------

#[test]
fn sin_cos_tan_f32_ulp() {
    let mut xs = full_sweep();
    xs.extend(lin(-20.0, 20.0, 1_000_000));
    xs.extend(lin(-1.1e6, 1.1e6, 1_000_000));
    // Near multiples of pi/2, where the reduction cancels most.
    for k in 1..20_000 {
        let c = k as f64 * std::f64::consts::FRAC_PI_2;
        let m = (c as f32).to_bits();
        xs.extend((m - 8..m + 8).map(f32::from_bits));
    }
    check1("sin", vmath::sin_f32, f64::sin, &xs);
    check1("cos", vmath::cos_f32, f64::cos, &xs);
    check1("tan", vmath::tan_f32, f64::tan, &xs);
}

#[test]
fn exp_family_f32_ulp() {
    let mut xs = full_sweep();
    xs.extend(lin(-110.0, 95.0, 2_000_000));
    xs.extend(lin(-1.0, 1.0, 1_000_000));
    check1("exp", vmath::exp_f32, f64::exp, &xs);
    check1("expm1", vmath::expm1_f32, f64::exp_m1, &xs);
    check1("sinh", vmath::sinh_f32, f64::sinh, &xs);
    check1("cosh", vmath::cosh_f32, f64::cosh, &xs);
    check1("tanh", vmath::tanh_f32, f64::tanh, &xs);
}

#[test]
fn log_family_f32_ulp() {
    let mut xs = full_sweep();
    xs.extend(lin(0.0, 4.0, 2_000_000));
    xs.extend(lin(-1.0, 1.0, 1_000_000));
    check1("log", vmath::log_f32, f64::ln, &xs);
    check1("log2", vmath::log2_f32, f64::log2, &xs);
    check1("log10", vmath::log10_f32, f64::log10, &xs);
    check1("log1p", vmath::log1p_f32, f64::ln_1p, &xs);
}

#[test]
fn atan_asin_acos_f32_ulp() {
    let mut xs = full_sweep();
    xs.extend(lin(-1.5, 1.5, 2_000_000));
    check1("atan", vmath::atan_f32, f64::atan, &xs);
    check1("asin", vmath::asin_f32, f64::asin, &xs);
    check1("acos", vmath::acos_f32, f64::acos, &xs);
}

#[test]
fn atan2_f32_ulp() {
    // Pairs over all magnitudes and signs, and a dense grid near the origin.
    let a = full_sweep();
    let n = a.len();
    let mut ys: Vec<f32> = a.clone();
    let mut xs: Vec<f32> = (0..n).map(|k| a[(k * 7919 + 13) % n]).collect();
    let g = lin(-3.0, 3.0, 1500);
    for &y in &g {
        for &x in &g {
            ys.push(y);
            xs.push(x);
        }
    }
    let e = measure2("atan2", vmath::atan2_f32, f64::atan2, &ys, &xs);
    assert!(e <= MAX_ULP, "atan2: {e} ulp");
}

#[test]
fn atan2_f32_ulp_near_octant_edges_and_huge() {
    // Ratios y / x around the reduction's thresholds (tan(pi/8), 1/2, 1, and their
    // inverses) with both signs, at ordinary, tiny and huge scales (where `x + y` would
    // overflow f32).
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    let (mut ys, mut xs) = (Vec::new(), Vec::new());
    for &ratio in &[0.41421356f64, 0.5, 1.0, 2.0, 2.41421356, 0.3, 0.45, 0.7] {
        for &scale in &[1.0f64, 3.0e-38, 1.0e-44, 1.0e38, 3.0e38, 1.7e38] {
            for k in 0..20_000 {
                let x = scale * (0.5 + next());
                let r = ratio * (1.0 + 0.2 * (next() - 0.5));
                let (sy, sx) = (k & 1 == 0, k & 2 == 0);
                let y = (x * r) as f32;
                let x = x as f32;
                ys.push(if sy { y } else { -y });
                xs.push(if sx { x } else { -x });
            }
        }
    }
    let e = measure2("atan2", vmath::atan2_f32, f64::atan2, &ys, &xs);
    assert!(e <= MAX_ULP, "atan2: {e} ulp");
}

#[test]
fn hypot_f32_ulp_and_specials() {
    // Pairs over all magnitudes (products that overflow or underflow f32 included), and a
    // grid near the origin; the reference is libm's f64 hypot.
    let a = full_sweep();
    let n = a.len();
    let mut ys: Vec<f32> = a.clone();
    let mut xs: Vec<f32> = (0..n).map(|k| a[(k * 7919 + 13) % n]).collect();
    let g = lin(-3.0, 3.0, 700);
    for &y in &g {
        for &x in &g {
            ys.push(y);
            xs.push(x);
        }
    }
    let e = measure2("hypot", vmath::hypot_f32, f64::hypot, &ys, &xs);
    assert!(e <= 1.0, "hypot: {e} ulp");
    // C's special values: an infinite part wins over a NaN; signed zeros give +0.
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let cases = [
        (inf, nan, inf),
        (nan, -inf, inf),
        (nan, 1.0, nan),
        (-0.0, 0.0, 0.0),
        (-0.0, -0.0, 0.0),
        (3.0, -4.0, 5.0),
        (f32::MAX, f32::MAX, inf),
        (f32::from_bits(1), 0.0, f32::from_bits(1)),
    ];
    let (y, x): (Vec<f32>, Vec<f32>) = cases.iter().map(|&(y, x, _)| (y, x)).unzip();
    let mut got = vec![0.0f32; cases.len()];
    vmath::hypot_f32(&y, &x, &mut got);
    for (&(y, x, want), &g) in cases.iter().zip(&got) {
        assert!(same(g, want), "hypot({y}, {x}) = {g}, want {want}");
    }
    // abs of complex64 is the same function of (re, im)
    let z: Vec<num_complex::Complex32> = y
        .iter()
        .zip(&x)
        .map(|(&re, &im)| num_complex::Complex32::new(re, im))
        .collect();
    let mut abs = vec![0.0f32; z.len()];
    vmath::abs_c32(&z, &mut abs);
    for ((&(y, x, want), &g), zi) in cases.iter().zip(&abs).zip(&z) {
        assert!(
            same(g, want),
            "abs({zi}) from ({y}, {x}) = {g}, want {want}"
        );
    }
}

// ------------------------------------------------------------------------------------
// Special values
// ------------------------------------------------------------------------------------

/// Bitwise equality, any NaN equal to any NaN.
fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn one(f: fn(&[f32], &mut [f32]), x: f32) -> f32 {
    let mut o = [0.0f32; 1];
    f(&[x], &mut o);
    o[0]
}

const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

#[test]
fn special_values_f32() {
    use vmath::*;
    let pi2 = std::f32::consts::FRAC_PI_2;
    let cases: &[Specials<'_>] = &[
        (
            "sin",
            sin_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (INF, NAN),
                (-INF, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "cos",
            cos_f32,
            &[(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
        ),
        (
            "tan",
            tan_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (INF, NAN),
                (-INF, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "exp",
            exp_f32,
            &[
                (0.0, 1.0),
                (-0.0, 1.0),
                (INF, INF),
                (-INF, 0.0),
                (NAN, NAN),
                (89.0, INF),
                (1e30, INF),
                (-104.0, 0.0),
                (-1e30, 0.0),
            ],
        ),
        (
            "expm1",
            expm1_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (INF, INF),
                (-INF, -1.0),
                (NAN, NAN),
                (89.0, INF),
                (-1e30, -1.0),
                (1e-40, 1e-40),
                (-1e-40, -1e-40),
            ],
        ),
        (
            "log",
            log_f32,
            &[
                (0.0, -INF),
                (-0.0, -INF),
                (1.0, 0.0),
                (INF, INF),
                (-INF, NAN),
                (-1.0, NAN),
                (-1e-40, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "log2",
            log2_f32,
            &[
                (0.0, -INF),
                (-0.0, -INF),
                (1.0, 0.0),
                (8.0, 3.0),
                (1.0e-45, -149.0),
                (INF, INF),
                (-1.0, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "log10",
            log10_f32,
            &[
                (0.0, -INF),
                (1.0, 0.0),
                (1000.0, 3.0),
                (1e-10, -10.0),
                (INF, INF),
                (-1.0, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "log1p",
            log1p_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (-1.0, -INF),
                (-2.0, NAN),
                (INF, INF),
                (-INF, NAN),
                (NAN, NAN),
                (1e-40, 1e-40),
                // Just below 2^-29, where 1 + x is not exact in f64 any more.
                (1.862645e-9, 1.862645e-9),
                (-1.862645e-9, -1.862645e-9),
            ],
        ),
        (
            "atan",
            atan_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (INF, pi2),
                (-INF, -pi2),
                (NAN, NAN),
            ],
        ),
        (
            "asin",
            asin_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (1.0, pi2),
                (-1.0, -pi2),
                (1.0000001, NAN),
                (INF, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "acos",
            acos_f32,
            &[
                (1.0, 0.0),
                (-1.0, std::f32::consts::PI),
                (0.0, pi2),
                (-0.0, pi2),
                (-1.0000001, NAN),
                (-INF, NAN),
                (NAN, NAN),
            ],
        ),
        (
            "sinh",
            sinh_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (INF, INF),
                (-INF, -INF),
                (90.0, INF),
                (-90.0, -INF),
                (NAN, NAN),
            ],
        ),
        (
            "cosh",
            cosh_f32,
            &[
                (0.0, 1.0),
                (-0.0, 1.0),
                (INF, INF),
                (-INF, INF),
                (-90.0, INF),
                (NAN, NAN),
            ],
        ),
        (
            "tanh",
            tanh_f32,
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (INF, 1.0),
                (-INF, -1.0),
                (20.0, 1.0),
                (-1e30, -1.0),
                (NAN, NAN),
            ],
        ),
    ];
    for &(name, f, table) in cases {
        for &(x, want) in table {
            let got = one(f, x);
            assert!(same(got, want), "{name}({x:e}) = {got:e}, want {want:e}");
        }
    }
}

#[test]
fn special_values_atan2_f32() {
    use std::f32::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let specials = [0.0f32, -0.0, 1.0, -1.0, 1e-45, -3e38, INF, -INF, NAN];
    for &y in &specials {
        for &x in &specials {
            let mut o = [0.0f32];
            vmath::atan2_f32(&[y], &[x], &mut o);
            // C's atan2 in f64, rounded: exact for these special cases.
            let want = (y as f64).atan2(x as f64) as f32;
            assert!(
                same(o[0], want),
                "atan2({y:e}, {x:e}) = {:e}, want {want:e}",
                o[0]
            );
        }
    }
    // The named cases of C99 F.9.1.4 / the array API.
    let named = [
        (0.0, -0.0, PI),
        (-0.0, -0.0, -PI),
        (0.0, 0.0, 0.0),
        (-0.0, 0.0, -0.0),
        (INF, INF, FRAC_PI_4),
        (-INF, INF, -FRAC_PI_4),
        (INF, -INF, 3.0 * FRAC_PI_4),
        (-INF, -INF, -3.0 * FRAC_PI_4),
        (1.0, 0.0, FRAC_PI_2),
        (-1.0, -0.0, -FRAC_PI_2),
        (1.0, -INF, PI),
        (-1.0, -INF, -PI),
        (1.0, INF, 0.0),
        (-1.0, INF, -0.0),
    ];
    for (y, x, want) in named {
        let mut o = [0.0f32];
        vmath::atan2_f32(&[y], &[x], &mut o);
        assert!(
            same(o[0], want),
            "atan2({y:e}, {x:e}) = {:e}, want {want:e}",
            o[0]
        );
    }
}

/// Special values at every position of a long slice (the vector loop, its remainder and
/// the large-argument fallback of the trigonometric functions).
#[test]
fn specials_inside_long_slices() {
    let fs: [WithRef; 6] = [
        (vmath::sin_f32, f64::sin),
        (vmath::cos_f32, f64::cos),
        (vmath::tan_f32, f64::tan),
        (vmath::exp_f32, f64::exp),
        (vmath::log_f32, f64::ln),
        (vmath::tanh_f32, f64::tanh),
    ];
    let pattern = [
        0.5f32, -0.0, NAN, INF, -INF, 3e7, -1e20, 2.0, 1e-42, 0.0, 7.25,
    ];
    let xs: Vec<f32> = (0..1000).map(|k| pattern[k % pattern.len()]).collect();
    for (f, r) in fs {
        for n in [1usize, 7, 8, 9, 31, 1000] {
            let mut out = vec![0.0f32; n];
            f(&xs[..n], &mut out);
            for (&x, &y) in xs.iter().zip(&out) {
                let e = ulp_err(y, r(x as f64));
                assert!(e <= MAX_ULP, "f({x:e}) = {y:e}, want {:e}", r(x as f64));
                if x == 0.0 && r(x as f64) == 0.0 {
                    assert_eq!(y.to_bits(), x.to_bits(), "sign of zero at {x:e}");
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------
// f64
// ------------------------------------------------------------------------------------

/// Every `stride`-th f64 bit pattern of one sign from 0 up to `max`, plus `max`.
fn bit_sweep64(stride: u64, max: f64, neg: bool) -> Vec<f64> {
    let top = max.to_bits();
    let sign = if neg { 1u64 << 63 } else { 0 };
    let mut v: Vec<f64> = (0..=top / stride)
        .map(|k| f64::from_bits((k * stride) | sign))
        .collect();
    v.push(f64::from_bits(top | sign));
    v
}

fn lin64(a: f64, b: f64, n: usize) -> Vec<f64> {
    (0..=n).map(|k| a + (b - a) * k as f64 / n as f64).collect()
}

/// Bit sweeps of both signs over all finite magnitudes (about 2 x 1M points).
fn full_sweep64() -> Vec<f64> {
    let stride = (0x7fef_ffff_ffff_ffffu64 / 1_000_003) | 1;
    let mut v = bit_sweep64(stride, f64::MAX, false);
    v.extend(bit_sweep64(stride, f64::MAX, true));
    v
}

/// The ulp of f64 at the magnitude of `r` (as a float, so that it is exact).
fn ulp64(r: f64) -> f64 {
    let a = r.abs();
    let e = if a < f64::MIN_POSITIVE {
        -1022
    } else {
        ((a.to_bits() >> 52) as i32) - 1023
    };
    // 2^(e - 52), built from bits (powi underflows to 0 there).
    if e - 52 >= -1022 {
        f64::from_bits(((e - 52 + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e - 52 + 1074))
    }
}

/// Error of `got` against the C library's `want`, in f64 ulps of `want`.
fn ulp_err64(got: f64, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if want.is_infinite() || got.is_infinite() {
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    // (got - want) exactly enough: both are near each other.
    (got - want).abs() / ulp64(want)
}

/// Largest ulp difference from the C library (glibc's functions are within about 1 ulp
/// of the exact result, most of them correctly rounded), printed with the worst input.
fn measure64(name: &str, f: fn(&[f64], &mut [f64]), reference: fn(f64) -> f64, xs: &[f64]) -> f64 {
    let mut out = vec![0.0f64; xs.len()];
    for (x, o) in xs.chunks(1237).zip(out.chunks_mut(1237)) {
        f(x, o);
    }
    let (mut worst, mut at) = (0.0f64, 0.0f64);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulp_err64(y, reference(x));
        if e > worst {
            worst = e;
            at = x;
        }
    }
    let mut o = [0.0f64];
    f(&[at], &mut o);
    println!(
        "{name:6}: max {worst:.3} ulp from libm over {} points (worst at x = {at:e}: got \
         {:e}, libm {:e})",
        xs.len(),
        o[0],
        reference(at)
    );
    worst
}

/// Allowed difference from the C library in f64: our error plus the library's.
const MAX_ULP64: f64 = 2.5;

fn check64(name: &str, f: fn(&[f64], &mut [f64]), reference: fn(f64) -> f64, xs: &[f64]) {
    let e = measure64(name, f, reference, xs);
    assert!(e <= MAX_ULP64, "{name}: {e} ulp");
}

#[test]
fn sin_cos_tan_f64_ulp() {
    let mut xs = full_sweep64();
    xs.extend(lin64(-20.0, 20.0, 1_000_000));
    xs.extend(lin64(-1.1e6, 1.1e6, 500_000));
    for k in 1..20_000 {
        let m = (k as f64 * std::f64::consts::FRAC_PI_2).to_bits();
        xs.extend((m - 4..m + 4).map(f64::from_bits));
    }
    check64("sin", vmath::sin_f64, f64::sin, &xs);
    check64("cos", vmath::cos_f64, f64::cos, &xs);
    check64("tan", vmath::tan_f64, f64::tan, &xs);
}

#[test]
fn exp_family_f64_ulp() {
    let mut xs = full_sweep64();
    xs.extend(lin64(-750.0, 712.0, 1_000_000));
    xs.extend(lin64(-2.0, 2.0, 1_000_000));
    check64("exp", vmath::exp_f64, f64::exp, &xs);
    check64("expm1", vmath::expm1_f64, f64::exp_m1, &xs);
    check64("sinh", vmath::sinh_f64, f64::sinh, &xs);
    check64("cosh", vmath::cosh_f64, f64::cosh, &xs);
    check64("tanh", vmath::tanh_f64, f64::tanh, &xs);
}

#[test]
fn log_family_f64_ulp() {
    let mut xs = full_sweep64();
    xs.extend(lin64(0.0, 4.0, 1_000_000));
    xs.extend(lin64(-1.0, 1.0, 1_000_000));
    check64("log", vmath::log_f64, f64::ln, &xs);
    check64("log2", vmath::log2_f64, f64::log2, &xs);
    check64("log10", vmath::log10_f64, f64::log10, &xs);
    check64("log1p", vmath::log1p_f64, f64::ln_1p, &xs);
}

#[test]
fn atan_asin_acos_f64_ulp() {
    let mut xs = full_sweep64();
    xs.extend(lin64(-3.0, 3.0, 1_000_000));
    xs.extend(lin64(-1.0, 1.0, 1_000_000));
    check64("atan", vmath::atan_f64, f64::atan, &xs);
    check64("asin", vmath::asin_f64, f64::asin, &xs);
    check64("acos", vmath::acos_f64, f64::acos, &xs);
}

#[test]
fn atan2_f64_ulp() {
    let a = full_sweep64();
    let n = a.len();
    let mut ys: Vec<f64> = a.clone();
    let mut xs: Vec<f64> = (0..n).map(|k| a[(k * 7919 + 13) % n]).collect();
    let g = lin64(-3.0, 3.0, 1000);
    for &y in &g {
        for &x in &g {
            ys.push(y);
            xs.push(x);
        }
    }
    let mut out = vec![0.0f64; n];
    out.resize(xs.len(), 0.0);
    vmath::atan2_f64(&ys, &xs, &mut out);
    let (mut worst, mut at) = (0.0f64, (0.0, 0.0));
    for ((&y, &x), &r) in ys.iter().zip(&xs).zip(&out) {
        let e = ulp_err64(r, y.atan2(x));
        if e > worst {
            worst = e;
            at = (y, x);
        }
    }
    println!(
        "atan2 : max {worst:.3} ulp from libm (worst at y, x = {:e}, {:e})",
        at.0, at.1
    );
    assert!(worst <= MAX_ULP64, "atan2: {worst} ulp");
}

#[test]
fn special_values_f64() {
    use vmath::*;
    const INF: f64 = f64::INFINITY;
    const NAN: f64 = f64::NAN;
    type F = fn(&[f64], &mut [f64]);
    type Row = (&'static str, F, fn(f64) -> f64);
    let fs: [Row; 15] = [
        ("sin", sin_f64, f64::sin),
        ("cos", cos_f64, f64::cos),
        ("tan", tan_f64, f64::tan),
        ("exp", exp_f64, f64::exp),
        ("expm1", expm1_f64, f64::exp_m1),
        ("log", log_f64, f64::ln),
        ("log2", log2_f64, f64::log2),
        ("log10", log10_f64, f64::log10),
        ("log1p", log1p_f64, f64::ln_1p),
        ("atan", atan_f64, f64::atan),
        ("asin", asin_f64, f64::asin),
        ("acos", acos_f64, f64::acos),
        ("sinh", sinh_f64, f64::sinh),
        ("cosh", cosh_f64, f64::cosh),
        ("tanh", tanh_f64, f64::tanh),
    ];
    let specials = [
        0.0,
        -0.0,
        INF,
        -INF,
        NAN,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        f64::MAX,
        -f64::MAX,
        1e300,
        -1e300,
        709.8,
        710.5,
        -745.2,
        -746.0,
        1.0 + f64::EPSILON,
        -1.0 - f64::EPSILON,
    ];
    for (name, f, r) in fs {
        for &x in &specials {
            let mut o = [0.0f64];
            f(&[x], &mut o);
            let want = r(x);
            let ok = if want.is_nan() || want.is_infinite() || want == 0.0 {
                (want.is_nan() && o[0].is_nan()) || o[0].to_bits() == want.to_bits()
            } else {
                ulp_err64(o[0], want) <= MAX_ULP64
            };
            assert!(ok, "{name}({x:e}) = {:e}, libm {want:e}", o[0]);
        }
    }
    let s2 = [0.0, -0.0, 1.0, -1.0, 5e-324, -f64::MAX, INF, -INF, NAN];
    for &y in &s2 {
        for &x in &s2 {
            let mut o = [0.0f64];
            atan2_f64(&[y], &[x], &mut o);
            let want = y.atan2(x);
            let ok = (want.is_nan() && o[0].is_nan())
                || o[0].to_bits() == want.to_bits()
                || (want != 0.0 && want.is_finite() && ulp_err64(o[0], want) <= 1.0);
            assert!(ok, "atan2({y:e}, {x:e}) = {:e}, libm {want:e}", o[0]);
        }
    }
}

/// floor, ceil, trunc and round-half-to-even are exact: bitwise equal to the C library.
#[test]
fn rounding_is_exact() {
    let mut xs = full_sweep();
    xs.extend(lin(-10.0, 10.0, 100_000));
    xs.extend([
        0.5, -0.5, 1.5, 2.5, -2.5, 8388607.5, -8388608.5, INF, -INF, NAN, -0.0,
    ]);
    type Row32 = (&'static str, F32, fn(f32) -> f32);
    let fs32: [Row32; 4] = [
        ("floor", vmath::floor_f32, f32::floor),
        ("ceil", vmath::ceil_f32, f32::ceil),
        ("trunc", vmath::trunc_f32, f32::trunc),
        ("rint", vmath::rint_f32, f32::round_ties_even),
    ];
    let mut out = vec![0.0f32; xs.len()];
    for (name, f, r) in fs32 {
        f(&xs, &mut out);
        for (&x, &y) in xs.iter().zip(&out) {
            assert!(same(y, r(x)), "{name}({x:e}) = {y:e}");
        }
    }
    let xs: Vec<f64> = full_sweep64()
        .into_iter()
        .chain(lin64(-10.0, 10.0, 100_000))
        .chain([0.5, -0.5, 2.5, -2.5, 4503599627370495.5, f64::NAN, -0.0])
        .collect();
    type Row64 = (&'static str, fn(&[f64], &mut [f64]), fn(f64) -> f64);
    let fs64: [Row64; 4] = [
        ("floor", vmath::floor_f64, f64::floor),
        ("ceil", vmath::ceil_f64, f64::ceil),
        ("trunc", vmath::trunc_f64, f64::trunc),
        ("rint", vmath::rint_f64, f64::round_ties_even),
    ];
    let mut out = vec![0.0f64; xs.len()];
    for (name, f, r) in fs64 {
        f(&xs, &mut out);
        for (&x, &y) in xs.iter().zip(&out) {
            let w = r(x);
            assert!(
                (w.is_nan() && y.is_nan()) || w.to_bits() == y.to_bits(),
                "{name}({x:e}) = {y:e}"
            );
        }
    }
}

/// Every f32 input (2^32 of them) of every one-argument function, against the C library in
/// f64: `cargo test --release -p lazyfuse-codegen --test vmath -- --ignored --nocapture`
/// (minutes per function; `VMATH_FNS=sin,exp` picks some).
#[test]
#[ignore]
fn exhaustive_f32() {
    use vmath::*;
    let all: [(&str, WithRef); 15] = [
        ("sin", (sin_f32, f64::sin)),
        ("cos", (cos_f32, f64::cos)),
        ("tan", (tan_f32, f64::tan)),
        ("exp", (exp_f32, f64::exp)),
        ("expm1", (expm1_f32, f64::exp_m1)),
        ("log", (log_f32, f64::ln)),
        ("log2", (log2_f32, f64::log2)),
        ("log10", (log10_f32, f64::log10)),
        ("log1p", (log1p_f32, f64::ln_1p)),
        ("atan", (atan_f32, f64::atan)),
        ("asin", (asin_f32, f64::asin)),
        ("acos", (acos_f32, f64::acos)),
        ("sinh", (sinh_f32, f64::sinh)),
        ("cosh", (cosh_f32, f64::cosh)),
        ("tanh", (tanh_f32, f64::tanh)),
    ];
    let pick = std::env::var("VMATH_FNS").ok();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (name, (f, r)) in all {
        if pick
            .as_ref()
            .is_some_and(|p| !p.split(',').any(|q| q == name))
        {
            continue;
        }
        let per = (1u64 << 32) / threads as u64;
        let worst = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads as u64)
                .map(|t| {
                    s.spawn(move || {
                        let (mut worst, mut at) = (0.0f64, 0u32);
                        let mut xs = vec![0.0f32; 1 << 16];
                        let mut out = vec![0.0f32; 1 << 16];
                        let mut b = t * per;
                        while b < (t + 1) * per {
                            for (k, x) in xs.iter_mut().enumerate() {
                                *x = f32::from_bits((b + k as u64) as u32);
                            }
                            f(&xs, &mut out);
                            for (&x, &y) in xs.iter().zip(&out) {
                                let e = ulp_err(y, r(x as f64));
                                if e > worst {
                                    worst = e;
                                    at = x.to_bits();
                                }
                            }
                            b += 1 << 16;
                        }
                        (worst, at)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("thread"))
                .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
        });
        println!(
            "{name:6}: max {:.3} ulp over all f32 (worst at x = {:e})",
            worst.0,
            f32::from_bits(worst.1)
        );
        assert!(worst.0 <= MAX_ULP, "{name}: {} ulp", worst.0);
    }
}

// ------------------------------------------------------------------------------------
// complex64 exp
// ------------------------------------------------------------------------------------

type C32 = num_complex::Complex<f32>;

/// A marker for the out-of-range pass: the value itself tells which elements took it.
fn marker(_: C32) -> C32 {
    C32::new(7.0, -7.0)
}

#[test]
fn exp_c32_parts_within_two_ulp_and_routes_the_rest() {
    // x over the whole fast range (subnormal results included), y from tiny to 2^20
    let xs = lin(-100.0, 88.0, 1500);
    let mut ys = lin(-40.0, 40.0, 400);
    ys.extend(bit_sweep(4_000_000, 1048576.0, false));
    ys.extend(bit_sweep(4_000_000, 1048576.0, true));
    let z: Vec<C32> = xs
        .iter()
        .flat_map(|&x| ys.iter().map(move |&y| C32::new(x, y)))
        .collect();
    let mut out = vec![C32::new(0.0, 0.0); z.len()];
    vmath::exp_c32(&z, &mut out, marker);
    let mut worst = (0.0f64, C32::new(0.0, 0.0));
    for (v, o) in z.iter().zip(&out) {
        let (x, y) = (v.re as f64, v.im as f64);
        let (re, im) = (x.exp() * y.cos(), x.exp() * y.sin());
        let e = ulp_err(o.re, re).max(ulp_err(o.im, im));
        if e > worst.0 {
            worst = (e, *v);
        }
    }
    assert!(worst.0 <= 2.0, "exp_c32: {:.2} ulp at {}", worst.0, worst.1);
    // outside the fast range, and NaNs: the second pass
    let odd = [
        C32::new(88.5, 1.0),
        C32::new(-100.5, 1.0),
        C32::new(0.0, 2e6),
        C32::new(f32::NAN, 0.0),
        C32::new(0.0, f32::INFINITY),
        C32::new(f32::NEG_INFINITY, 1.0),
    ];
    let mut long: Vec<C32> = vec![C32::new(0.5, 0.25); 37];
    long.extend(odd);
    let mut out = vec![C32::new(0.0, 0.0); long.len()];
    vmath::exp_c32(&long, &mut out, marker);
    for (v, o) in long.iter().zip(&out).skip(37) {
        assert_eq!(*o, marker(*v), "{v} should take the exact path");
    }
    assert!(out[..37].iter().all(|o| *o != marker(*o)));
    // zero imaginary parts keep their sign, and the real part is exp(x)
    let mut o = [C32::new(0.0, 0.0); 2];
    vmath::exp_c32(&[C32::new(1.0, 0.0), C32::new(1.0, -0.0)], &mut o, marker);
    assert_eq!(o[0].im.to_bits(), 0.0f32.to_bits());
    assert_eq!(o[1].im.to_bits(), (-0.0f32).to_bits());
    assert!(ulp_err(o[0].re, 1f64.exp()) <= 1.0);
}

#[test]
fn sincos_f32_gives_the_bits_of_sin_and_cos() {
    let mut xs = full_sweep();
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1048577.0,
        -3e7,
    ]);
    let (mut s, mut c) = (vec![0.0f32; xs.len()], vec![0.0f32; xs.len()]);
    vmath::sincos_f32(&xs, &mut s, &mut c);
    let (mut s1, mut c1) = (vec![0.0f32; xs.len()], vec![0.0f32; xs.len()]);
    vmath::sin_f32(&xs, &mut s1);
    vmath::cos_f32(&xs, &mut c1);
    for (k, &x) in xs.iter().enumerate() {
        assert!(
            same(s[k], s1[k]) && same(c[k], c1[k]),
            "sincos({x}): ({}, {}) vs ({}, {})",
            s[k],
            c[k],
            s1[k],
            c1[k]
        );
    }
}
