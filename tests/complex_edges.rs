//! Complex functions at special and large finite arguments against NumPy on every device:
//! the C99 Annex G special-value tables (signed zeros, infinities, NaN in each part), parts
//! near the ends of each precision's range and past exp's overflow threshold, and the cases
//! of the robustness issue. Oracle: `tests/data/complex_edges.txt`, written by
//! `tests/data/gen_complex.py` from NumPy.
//!
//! Comparison per part: NaN where NumPy has NaN; the same infinity; a zero with NumPy's sign
//! in the special-value table (where Annex G defines it); otherwise within rtol 1e-5 (c64)
//! or 1e-12 (c128) plus 16 subnormal ulps (results that underflow keep few digits).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use num_complex::{Complex32, Complex64};
use std::collections::BTreeMap;

const FIXTURES: &str = include_str!("data/complex_edges.txt");

/// One fixture line: inputs and NumPy's outputs as f64 (exact for both precisions).
struct Case {
    re: f64,
    im: f64,
    out_re: f64,
    out_im: f64,
}

/// Cases grouped by (group, function, dtype), in file order within each.
type Groups = BTreeMap<(String, String, String), Vec<Case>>;

fn part(hex: &str, dtype: &str) -> f64 {
    let bits = u64::from_str_radix(hex, 16).expect("fixture: hex bits");
    match dtype {
        "c64" => f64::from(f32::from_bits(bits as u32)),
        "c128" => f64::from_bits(bits),
        _ => panic!("fixture: unknown dtype {dtype}"),
    }
}

fn load() -> Groups {
    let mut groups = Groups::new();
    for line in FIXTURES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 7, "fixture line: {line}");
        let case = Case {
            re: part(f[3], f[1]),
            im: part(f[4], f[1]),
            out_re: part(f[5], f[1]),
            out_im: part(f[6], f[1]),
        };
        groups
            .entry((f[2].to_string(), f[0].to_string(), f[1].to_string()))
            .or_default()
            .push(case);
    }
    groups
}

fn apply(func: &str, x: &Array) -> Array {
    match func {
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "tanh" => x.tanh(),
        "arcsin" => x.asin(),
        "arccos" => x.acos(),
        "arctan" => x.atan(),
        "exp" => x.exp(),
        "log" => x.log(),
        "sqrt" => x.sqrt(),
        "expm1" => x.expm1(),
        "log1p" => x.log1p(),
        _ => panic!("fixture: unknown function {func}"),
    }
}

/// Evaluates `func` at the cases' inputs in `dtype`; the results as f64 pairs.
fn eval(func: &str, dtype: &str, cases: &[Case]) -> Vec<(f64, f64)> {
    let n = cases.len();
    match dtype {
        "c64" => {
            let z: Vec<Complex32> = cases
                .iter()
                .map(|c| Complex32::new(c.re as f32, c.im as f32))
                .collect();
            let out = apply(func, &Array::from_vec(z, &[n]).expect("from_vec"));
            assert_eq!(out.dtype(), DType::C64, "{func} c64: dtype");
            let v = out.to_vec::<Complex32>().expect("to_vec");
            v.iter().map(|w| (w.re as f64, w.im as f64)).collect()
        }
        _ => {
            let z: Vec<Complex64> = cases.iter().map(|c| Complex64::new(c.re, c.im)).collect();
            let out = apply(func, &Array::from_vec(z, &[n]).expect("from_vec"));
            assert_eq!(out.dtype(), DType::C128, "{func} c128: dtype");
            let v = out.to_vec::<Complex64>().expect("to_vec");
            v.iter().map(|w| (w.re, w.im)).collect()
        }
    }
}

/// Whether part `g` matches NumPy's `e` (see the module docs).
fn part_ok(g: f64, e: f64, dtype: &str, signed_zero: bool) -> bool {
    if e.is_nan() {
        return g.is_nan();
    }
    if e.is_infinite() || g.is_infinite() || g.is_nan() {
        return g == e;
    }
    if e == 0.0 && signed_zero {
        return g == 0.0 && g.is_sign_negative() == e.is_sign_negative();
    }
    let (rtol, atol) = if dtype == "c64" {
        (1e-5, 16.0 * f64::from(f32::from_bits(1)))
    } else {
        (1e-12, 16.0 * f64::from_bits(1))
    };
    (g - e).abs() <= rtol * e.abs() + atol
}

/// Runs every (function, dtype) of `group` on the default device; all mismatches in one
/// report.
fn check_group(group: &str) {
    let groups = load();
    let mut seen = 0;
    let mut bad = Vec::new();
    for ((g, func, dtype), cases) in &groups {
        if g != group {
            continue;
        }
        seen += cases.len();
        let got = eval(func, dtype, cases);
        for (c, &(gr, gi)) in cases.iter().zip(&got) {
            let sz = group == "special";
            if !part_ok(gr, c.out_re, dtype, sz) || !part_ok(gi, c.out_im, dtype, sz) {
                bad.push(format!(
                    "{func} {dtype} ({:e}, {:e}): got ({gr:e}, {gi:e}), NumPy ({:e}, {:e})",
                    c.re, c.im, c.out_re, c.out_im
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{group}: {} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(seen > 0, "fixture group {group} is empty");
}

device_test!(annex_g_special_values);
fn annex_g_special_values(_: &Device) {
    check_group("special");
}

device_test!(large_and_tiny_finite_parts);
fn large_and_tiny_finite_parts(_: &Device) {
    check_group("large");
}

device_test!(reported_cases);
fn reported_cases(_: &Device) {
    check_group("reported");
}

device_test!(expm1_log1p_against_a_wider_type);
/// `expm1` and `log1p`, where NumPy's formulas cancel or overflow, against NumPy in a
/// wider type.
fn expm1_log1p_against_a_wider_type(_: &Device) {
    check_group("accurate");
}
