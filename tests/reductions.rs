//! Reductions against a naive oracle (every output accumulated in f64 / complex f64 by a
//! plain loop over the input's multi-indices): sum, prod, mean, max, min, argmax, argmin,
//! all, any, var, std and `linalg::norm` over all elements and over axes (negative,
//! several, `keepdims`), NumPy's dtype rules, NaN propagation, empty reductions, F32
//! accuracy and repeatability on large inputs, and fusion structure (kernel counts).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{c32, c64, Array, DType, Device};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Deterministic pseudo-random values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f64> {
    common::uniform(n, seed, -1.0, 1.0)
}

/// C-order strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// The oracle's grouping: for each input element, its output position; the result shape
/// (NumPy's, with or without kept axes) and the number of outputs.
fn groups(shape: &[usize], axes: &[usize], keepdims: bool) -> (Vec<usize>, Vec<usize>, usize) {
    let out_full: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(k, &n)| if axes.contains(&k) { 1 } else { n })
        .collect();
    let os = strides(&out_full);
    let is = strides(shape);
    let total: usize = shape.iter().product();
    let pos = (0..total)
        .map(|i| {
            (0..shape.len())
                .map(|k| {
                    let ik = (i / is[k]) % shape[k];
                    if axes.contains(&k) {
                        0
                    } else {
                        ik * os[k]
                    }
                })
                .sum()
        })
        .collect();
    let out_shape: Vec<usize> = if keepdims {
        out_full.clone()
    } else {
        shape
            .iter()
            .enumerate()
            .filter(|(k, _)| !axes.contains(k))
            .map(|(_, &n)| n)
            .collect()
    };
    (pos, out_shape, out_full.iter().product())
}

fn norm_axes(axes: Option<&[isize]>, ndim: usize) -> Vec<usize> {
    match axes {
        None => (0..ndim).collect(),
        Some(a) => a
            .iter()
            .map(|&x| {
                if x < 0 {
                    (x + ndim as isize) as usize
                } else {
                    x as usize
                }
            })
            .collect(),
    }
}

/// Compares `got` with `want` elementwise: equal NaN-ness, else within `rel` of the
/// larger magnitude (or `abs`).
fn close(got: &[f64], want: &[f64], rel: f64, abs: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() || g.is_nan() {
            assert!(w.is_nan() && g.is_nan(), "{what}[{k}]: got {g}, want {w}");
            continue;
        }
        let tol = abs + rel * w.abs().max(g.abs());
        assert!(
            (g - w).abs() <= tol || g == w,
            "{what}[{k}]: got {g}, want {w} (tol {tol})"
        );
    }
}

/// Host values of `x` as f64 (ints, bools and floats), checking the dtype first.
fn fetch_real(x: &Array, dtype: DType) -> Vec<f64> {
    assert_eq!(x.dtype(), dtype, "dtype");
    match dtype {
        DType::Bool => x
            .to_vec::<bool>()
            .unwrap()
            .into_iter()
            .map(|b| b as u8 as f64)
            .collect(),
        DType::I32 => x
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::I64 => x
            .to_vec::<i64>()
            .unwrap()
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        DType::F32 => x
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::F64 => x.to_vec::<f64>().unwrap(),
        d => panic!("fetch_real: {d}"),
    }
}

/// An array of `dtype` on `dev` from f64 values (ints scaled by 10 and truncated; bools
/// from the sign).
fn make(vals: &[f64], shape: &[usize], dtype: DType, dev: &Device) -> (Array, Vec<f64>) {
    match dtype {
        DType::Bool => {
            let v: Vec<bool> = vals.iter().map(|&x| x > 0.0).collect();
            let f = v.iter().map(|&b| b as u8 as f64).collect();
            (Array::from_vec_on(v, shape, dev).unwrap(), f)
        }
        DType::I32 => {
            let v: Vec<i32> = vals.iter().map(|&x| (x * 10.0) as i32).collect();
            let f = v.iter().map(|&b| b as f64).collect();
            (Array::from_vec_on(v, shape, dev).unwrap(), f)
        }
        DType::I64 => {
            let v: Vec<i64> = vals.iter().map(|&x| (x * 10.0) as i64).collect();
            let f = v.iter().map(|&b| b as f64).collect();
            (Array::from_vec_on(v, shape, dev).unwrap(), f)
        }
        DType::F32 => {
            let v: Vec<f32> = vals.iter().map(|&x| x as f32).collect();
            let f = v.iter().map(|&b| b as f64).collect();
            (Array::from_vec_on(v, shape, dev).unwrap(), f)
        }
        DType::F64 => (
            Array::from_vec_on(vals.to_vec(), shape, dev).unwrap(),
            vals.to_vec(),
        ),
        d => panic!("make: {d}"),
    }
}

/// Tests here count launches (process-global): they run one at a time.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const SHAPES: &[&[usize]] = &[
    &[0],
    &[1],
    &[3],
    &[783],
    &[3, 4, 5],
    &[2, 0, 3],
    &[7, 129],
    &[],
];

fn axes_for(ndim: usize) -> Vec<Option<Vec<isize>>> {
    let mut v = vec![None, Some(vec![])];
    if ndim >= 1 {
        v.push(Some(vec![0]));
        v.push(Some(vec![-1]));
    }
    if ndim >= 3 {
        v.push(Some(vec![0, 2]));
        v.push(Some(vec![1]));
        v.push(Some(vec![-1, 0, 1]));
    }
    v
}

device_test!(sum_prod_mean_over_axes_match_the_oracle);
fn sum_prod_mean_over_axes_match_the_oracle(dev: &Device) {
    let _g = lock();
    for &shape in SHAPES {
        let n: usize = shape.iter().product();
        let vals = data(n, 7);
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool] {
            let (x, xf) = make(&vals, shape, dtype, dev);
            for axes in axes_for(shape.len()) {
                for keepdims in [false, true] {
                    let ax = norm_axes(axes.as_deref(), shape.len());
                    let (pos, oshape, m) = groups(shape, &ax, keepdims);
                    let mut sum = vec![0.0; m];
                    let mut prod = vec![1.0; m];
                    let mut iprod = vec![1i64; m];
                    let mut cnt = vec![0usize; m];
                    for (i, &p) in pos.iter().enumerate() {
                        sum[p] += xf[i];
                        prod[p] *= xf[i];
                        iprod[p] = iprod[p].wrapping_mul(xf[i] as i64);
                        cnt[p] += 1;
                    }
                    let mean: Vec<f64> = sum.iter().zip(&cnt).map(|(s, &c)| s / c as f64).collect();
                    let what = format!("{dtype} {shape:?} axes {axes:?} keepdims {keepdims}");
                    let (s, p, mn) = match (&axes, keepdims) {
                        (None, false) => (x.sum(), x.prod(), x.mean()),
                        (None, true) => {
                            let all: Vec<isize> = (0..shape.len() as isize).collect();
                            (
                                x.sum_axes(&all, true),
                                x.prod_axes(&all, true),
                                x.mean_axes(&all, true),
                            )
                        }
                        (Some(a), k) => (x.sum_axes(a, k), x.prod_axes(a, k), x.mean_axes(a, k)),
                    };
                    let int = !dtype.is_float();
                    let sd = if int { DType::I64 } else { dtype };
                    let md = if int { DType::F64 } else { dtype };
                    assert_eq!(s.shape(), oshape.as_slice(), "sum shape {what}");
                    assert_eq!(p.shape(), oshape.as_slice(), "prod shape {what}");
                    assert_eq!(mn.shape(), oshape.as_slice(), "mean shape {what}");
                    let rel = if dtype == DType::F32 { 2e-6 } else { 1e-12 };
                    close(&fetch_real(&s, sd), &sum, rel, rel, &format!("sum {what}"));
                    if int {
                        assert_eq!(p.dtype(), DType::I64, "prod dtype {what}");
                        assert_eq!(p.to_vec::<i64>().unwrap(), iprod, "prod {what}");
                    } else {
                        close(
                            &fetch_real(&p, sd),
                            &prod,
                            rel,
                            1e-30,
                            &format!("prod {what}"),
                        );
                    }
                    close(
                        &fetch_real(&mn, md),
                        &mean,
                        rel,
                        rel,
                        &format!("mean {what}"),
                    );
                }
            }
        }
    }
}

device_test!(max_min_argmax_argmin_all_any_match_the_oracle);
fn max_min_argmax_argmin_all_any_match_the_oracle(dev: &Device) {
    let _g = lock();
    for &shape in &[
        &[1usize][..],
        &[3],
        &[783],
        &[3, 4, 5],
        &[7, 129],
        &[5, 1, 2],
    ] {
        let n: usize = shape.iter().product();
        let mut vals = data(n, 11);
        // ties: repeat the first values later on, so the first position must win
        for k in (n / 2)..n.min(n / 2 + 3) {
            vals[k] = vals[k - n / 2];
        }
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool] {
            let (x, xf) = make(&vals, shape, dtype, dev);
            for axes in axes_for(shape.len()) {
                let ax = norm_axes(axes.as_deref(), shape.len());
                let (pos, oshape, m) = groups(shape, &ax, false);
                let mut mx = vec![f64::NEG_INFINITY; m];
                let mut mn = vec![f64::INFINITY; m];
                let mut all = vec![1.0; m];
                let mut any = vec![0.0; m];
                for (i, &p) in pos.iter().enumerate() {
                    mx[p] = mx[p].max(xf[i]);
                    mn[p] = mn[p].min(xf[i]);
                    all[p] = if all[p] > 0.0 && xf[i] != 0.0 {
                        1.0
                    } else {
                        0.0
                    };
                    any[p] = if any[p] > 0.0 || xf[i] != 0.0 {
                        1.0
                    } else {
                        0.0
                    };
                }
                let what = format!("{dtype} {shape:?} axes {axes:?}");
                let (a, b, c, d) = match &axes {
                    None => (x.max(), x.min(), x.all(), x.any()),
                    Some(v) => (
                        x.max_axes(v, false),
                        x.min_axes(v, false),
                        x.all_axes(v, false),
                        x.any_axes(v, false),
                    ),
                };
                if axes.as_ref().is_some_and(|v| v.is_empty()) && shape.is_empty() {
                    continue;
                }
                assert_eq!(a.shape(), oshape.as_slice(), "max shape {what}");
                close(
                    &fetch_real(&a, dtype),
                    &mx,
                    0.0,
                    0.0,
                    &format!("max {what}"),
                );
                close(
                    &fetch_real(&b, dtype),
                    &mn,
                    0.0,
                    0.0,
                    &format!("min {what}"),
                );
                close(
                    &fetch_real(&c, DType::Bool),
                    &all,
                    0.0,
                    0.0,
                    &format!("all {what}"),
                );
                close(
                    &fetch_real(&d, DType::Bool),
                    &any,
                    0.0,
                    0.0,
                    &format!("any {what}"),
                );
            }
            for axis in 0..shape.len() as isize {
                let ax = [axis as usize];
                let (pos, oshape, m) = groups(shape, &ax, false);
                let len = shape[axis as usize];
                let st = strides(shape)[axis as usize];
                let mut best = vec![(f64::NAN, usize::MAX); m];
                let mut worst = vec![(f64::NAN, usize::MAX); m];
                for (i, &p) in pos.iter().enumerate() {
                    let j = (i / st) % len;
                    if best[p].1 == usize::MAX || xf[i] > best[p].0 {
                        best[p] = (xf[i], j);
                    }
                    if worst[p].1 == usize::MAX || xf[i] < worst[p].0 {
                        worst[p] = (xf[i], j);
                    }
                }
                let am = x.argmax(axis - shape.len() as isize);
                let an = x.argmin(axis);
                assert_eq!(am.shape(), oshape.as_slice(), "argmax shape");
                let want: Vec<f64> = best.iter().map(|b| b.1 as f64).collect();
                close(
                    &fetch_real(&am, DType::I64),
                    &want,
                    0.0,
                    0.0,
                    &format!("argmax {dtype} {shape:?} axis {axis}"),
                );
                let want: Vec<f64> = worst.iter().map(|b| b.1 as f64).collect();
                close(
                    &fetch_real(&an, DType::I64),
                    &want,
                    0.0,
                    0.0,
                    &format!("argmin {dtype} {shape:?} axis {axis}"),
                );
            }
        }
    }
}

device_test!(strided_reductions_over_column_tiles_match_the_oracle);
/// Reductions over a leading axis (outputs adjacent in memory, reduced positions strided), at
/// sizes where the CUDA kernel accumulates several adjacent outputs per thread and splits the
/// reduced extent over blocks: rows that are whole vectors (256 columns), rows that start
/// off vector boundaries with a partial last tile (130, 3 columns), and a view whose columns
/// are not adjacent (a transpose).
fn strided_reductions_over_column_tiles_match_the_oracle(dev: &Device) {
    let _g = lock();
    for &(rows, cols) in &[(4096usize, 256usize), (1000, 130), (2050, 3), (67, 783)] {
        let shape = [rows, cols];
        let vals = data(rows * cols, 11);
        for dtype in [DType::F32, DType::F64, DType::I32] {
            let (x, xf) = make(&vals, &shape, dtype, dev);
            let what = format!("{dtype} {shape:?} axis 0");
            let mut sum = vec![0.0; cols];
            let mut best = vec![(f64::NAN, usize::MAX); cols];
            for r in 0..rows {
                for c in 0..cols {
                    let v = xf[r * cols + c];
                    sum[c] += v;
                    if best[c].1 == usize::MAX || v > best[c].0 {
                        best[c] = (v, r);
                    }
                }
            }
            let s = x.sum_axes(&[0], false);
            let am = x.argmax(0);
            let mx = x.max_axes(&[0], false);
            assert_eq!(s.shape(), &[cols], "sum shape {what}");
            assert_eq!(am.shape(), &[cols], "argmax shape {what}");
            let sd = if dtype == DType::I32 {
                DType::I64
            } else {
                dtype
            };
            let rel = if dtype == DType::F32 { 2e-5 } else { 1e-12 };
            close(&fetch_real(&s, sd), &sum, rel, rel, &format!("sum {what}"));
            let want: Vec<f64> = best.iter().map(|b| b.1 as f64).collect();
            close(
                &fetch_real(&am, DType::I64),
                &want,
                0.0,
                0.0,
                &format!("argmax {what}"),
            );
            let want: Vec<f64> = best.iter().map(|b| b.0).collect();
            close(
                &fetch_real(&mx, dtype),
                &want,
                0.0,
                0.0,
                &format!("max {what}"),
            );
            // the transpose's axis 1 is the same reduction read through a strided view
            let t = x.transpose().sum_axes(&[1], false);
            close(
                &fetch_real(&t, sd),
                &sum,
                rel,
                rel,
                &format!("sum of x.T axis 1 {what}"),
            );
        }
    }
}

device_test!(nan_propagates_and_the_first_nan_wins);
fn nan_propagates_and_the_first_nan_wins(dev: &Device) {
    let _g = lock();
    let v = vec![1.0f32, f32::NAN, 5.0, f32::NAN, -3.0, 2.0];
    let x = Array::from_vec_on(v, &[2, 3], dev).unwrap();
    assert!(x.max().item::<f32>().unwrap().is_nan());
    assert!(x.min().item::<f32>().unwrap().is_nan());
    assert_eq!(x.argmax(-1).to_vec::<i64>().unwrap(), vec![1, 0]);
    assert_eq!(x.argmin(1).to_vec::<i64>().unwrap(), vec![1, 0]);
    let mx = x.max_axes(&[0], false).to_vec::<f32>().unwrap();
    assert!(mx[0].is_nan() && mx[1].is_nan() && mx[2] == 5.0, "{mx:?}");
    let mn = x.min_axes(&[1], true);
    assert_eq!(mn.shape(), &[2, 1]);
    let mn = mn.to_vec::<f32>().unwrap();
    assert!(mn[0].is_nan() && mn[1].is_nan(), "{mn:?}");
    let y = x.slice(lf::s![1.., 1..]);
    assert_eq!(
        y.max_axes(&[0], false).to_vec::<f32>().unwrap(),
        vec![-3.0, 2.0]
    );
    assert!(x.sum().item::<f32>().unwrap().is_nan());
    let inf = Array::from_vec_on(vec![f64::NEG_INFINITY; 4], &[4], dev).unwrap();
    assert_eq!(inf.argmax(0).item::<i64>().unwrap(), 0);
    assert_eq!(inf.max().item::<f64>().unwrap(), f64::NEG_INFINITY);
}

device_test!(empty_reductions_follow_numpy);
fn empty_reductions_follow_numpy(dev: &Device) {
    let _g = lock();
    let e = Array::from_vec_on(Vec::<f64>::new(), &[0, 3], dev).unwrap();
    assert_eq!(e.sum().item::<f64>().unwrap(), 0.0);
    assert_eq!(e.prod().item::<f64>().unwrap(), 1.0);
    assert!(e.mean().item::<f64>().unwrap().is_nan());
    assert!(e.all().item::<bool>().unwrap());
    assert!(!e.any().item::<bool>().unwrap());
    let s = e.sum_axes(&[0], false);
    assert_eq!(s.shape(), &[3]);
    assert_eq!(s.to_vec::<f64>().unwrap(), vec![0.0; 3]);
    let s = e.max_axes(&[1], false);
    assert_eq!(s.shape(), &[0]);
    assert_eq!(s.to_vec::<f64>().unwrap(), Vec::<f64>::new());
    for (name, f) in [
        ("max", Box::new(|| e.max()) as Box<dyn Fn() -> Array>),
        ("min", Box::new(|| e.min_axes(&[0], false))),
        ("argmax", Box::new(|| e.argmax(0))),
    ] {
        let r = catch_unwind(AssertUnwindSafe(f));
        let msg = r.err().and_then(|p| p.downcast_ref::<String>().cloned());
        let msg = msg.unwrap_or_else(|| panic!("{name} of an empty array must panic"));
        assert!(msg.contains(name) && msg.contains("[0, 3]"), "{msg}");
    }
}

device_test!(var_std_norm_match_the_oracle);
fn var_std_norm_match_the_oracle(dev: &Device) {
    let _g = lock();
    for &shape in &[&[783usize][..], &[3, 4, 5], &[7, 129]] {
        let n: usize = shape.iter().product();
        let vals = data(n, 3);
        for dtype in [DType::F32, DType::F64, DType::I32] {
            let (x, xf) = make(&vals, shape, dtype, dev);
            let fd = if dtype == DType::F32 {
                DType::F32
            } else {
                DType::F64
            };
            let rel = if dtype == DType::F32 { 1e-5 } else { 1e-11 };
            let mut cases = vec![(vec![0isize], 0usize), (vec![-1], 1)];
            if shape.len() > 1 {
                cases.push((vec![0, -1], 1));
            }
            for (axes, ddof) in cases {
                let ax = norm_axes(Some(&axes), shape.len());
                let (pos, oshape, m) = groups(shape, &ax, true);
                let mut s = vec![0.0; m];
                let mut c = vec![0usize; m];
                for (i, &p) in pos.iter().enumerate() {
                    s[p] += xf[i];
                    c[p] += 1;
                }
                let mut q = vec![0.0; m];
                for (i, &p) in pos.iter().enumerate() {
                    let d = xf[i] - s[p] / c[p] as f64;
                    q[p] += d * d;
                }
                let var: Vec<f64> = q
                    .iter()
                    .zip(&c)
                    .map(|(q, &c)| q / (c as f64 - ddof as f64))
                    .collect();
                let std: Vec<f64> = var.iter().map(|v| v.sqrt()).collect();
                let v = x.var_axes(&axes, ddof, true);
                let sd = x.std_axes(&axes, ddof, true);
                assert_eq!(v.shape(), oshape.as_slice());
                let what = format!("{dtype} {shape:?} {axes:?} ddof {ddof}");
                close(&fetch_real(&v, fd), &var, rel, rel, &format!("var {what}"));
                close(&fetch_real(&sd, fd), &std, rel, rel, &format!("std {what}"));
            }
            let nrm: f64 = xf.iter().map(|v| v * v).sum::<f64>().sqrt();
            let got = lf::linalg::norm(&x);
            assert_eq!(got.shape(), &[] as &[usize]);
            close(
                &fetch_real(&got, fd),
                &[nrm],
                rel,
                0.0,
                &format!("norm {dtype}"),
            );
        }
    }
}

device_test!(complex_sum_mean_var_norm);
fn complex_sum_mean_var_norm(dev: &Device) {
    let _g = lock();
    let re = data(301, 5);
    let im = data(301, 6);
    let z64: Vec<c64> = re.iter().zip(&im).map(|(&a, &b)| c64::new(a, b)).collect();
    let z32: Vec<c32> = z64
        .iter()
        .map(|z| c32::new(z.re as f32, z.im as f32))
        .collect();
    let s: c64 = z64.iter().sum();
    let mean = s / 301.0;
    let var: f64 = z64.iter().map(|z| (z - mean).norm_sqr()).sum::<f64>() / 301.0;
    let nrm: f64 = z64.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
    let x = Array::from_vec_on(z64.clone(), &[301], dev).unwrap();
    assert_eq!(x.sum().dtype(), DType::C128);
    let got = x.sum().item::<c64>().unwrap();
    assert!((got - s).norm() < 1e-12, "{got} {s}");
    let got = x.mean().item::<c64>().unwrap();
    assert!((got - mean).norm() < 1e-13, "{got} {mean}");
    assert_eq!(x.var().dtype(), DType::F64);
    assert!((x.var().item::<f64>().unwrap() - var).abs() < 1e-12);
    assert!((lf::linalg::norm(&x).item::<f64>().unwrap() - nrm).abs() < 1e-12);
    let y = Array::from_vec_on(z32, &[7, 43], dev).unwrap();
    assert_eq!(y.var().dtype(), DType::F32);
    let got = y.sum().item::<c32>().unwrap();
    assert!((got.re as f64 - s.re).abs() < 1e-4 && (got.im as f64 - s.im).abs() < 1e-4);
    let p = y.prod_axes(&[1], false);
    assert_eq!((p.shape(), p.dtype()), (&[7usize][..], DType::C64));
}

device_test!(large_f32_sums_are_accurate_and_repeatable);
fn large_f32_sums_are_accurate_and_repeatable(dev: &Device) {
    let _g = lock();
    for n in [(1usize << 20) + 1, 3 << 20] {
        let x = lf::random::uniform_on(&[n], DType::F32, 42, dev);
        let host = x.to_vec::<f32>().unwrap();
        let exact: f64 = host.iter().map(|&v| v as f64).sum();
        let a = x.sum().item::<f32>().unwrap();
        let b = (&x * 1.0).sum().item::<f32>().unwrap();
        // a serial f32 loop is off by ~1e-4 relative here; pairwise/tree order ~1e-7
        let err = (a as f64 - exact).abs() / exact;
        assert!(err < 2e-6, "n={n}: sum {a} vs {exact} (rel {err})");
        assert_eq!(a.to_bits(), b.to_bits(), "same sum twice");
        // one long row over a strided axis and many short rows
        let y = x
            .slice(lf::s![..(n / 3) * 3])
            .reshape(&[(n / 3) as isize, 3]);
        let cols = y.sum_axes(&[0], false).to_vec::<f32>().unwrap();
        for (k, &c) in cols.iter().enumerate() {
            let e: f64 = host[..(n / 3) * 3]
                .iter()
                .skip(k)
                .step_by(3)
                .map(|&v| v as f64)
                .sum();
            assert!((c as f64 - e).abs() / e < 2e-6, "column {k}: {c} vs {e}");
        }
        let rows = y.argmax(1).to_vec::<i64>().unwrap();
        for (r, &j) in rows.iter().enumerate().step_by(9973) {
            let row = &host[r * 3..r * 3 + 3];
            let want = (0..3).fold(0, |b, k| if row[k] > row[b] { k } else { b });
            assert_eq!(j as usize, want, "row {r}");
        }
        let pos = x.argmax(0).item::<i64>().unwrap() as usize;
        let want = (0..n).fold(0, |b, k| if host[k] > host[b] { k } else { b });
        assert_eq!(pos, want);
    }
}

/// Kernels launched while `f` runs.
fn launched(f: impl FnOnce()) -> u64 {
    let before = lf::stats().kernels_launched;
    f();
    lf::stats().kernels_launched - before
}

device_test!(reductions_fuse_their_producers_and_epilogues);
fn reductions_fuse_their_producers_and_epilogues(dev: &Device) {
    let _g = lock();
    let x = lf::random::uniform_on(&[64, 783], DType::F32, 1, dev);
    x.eval().unwrap();
    // sum(x*x): one kernel reading x once
    let s = (&x * &x).sum();
    assert_eq!(lf::debug::kernel_count(&[&s]).unwrap(), 1);
    assert_eq!(launched(|| s.eval().unwrap()), 1);
    // mean with its scale, std with its sqrt: the epilogue is in the reduction kernel
    assert_eq!(
        lf::debug::kernel_count(&[&x.mean_axes(&[0], false)]).unwrap(),
        1
    );
    assert_eq!(lf::debug::kernel_count(&[&x.sqrt().mean()]).unwrap(), 1);
    assert_eq!(
        lf::debug::kernel_count(&[&lf::linalg::norm(&x)]).unwrap(),
        1
    );
    // the broadcast consumer is one following kernel
    let c = &x - &x.mean_axes(&[1], true);
    assert_eq!(lf::debug::kernel_count(&[&c]).unwrap(), 2);
    // var: mean kernel + sum-of-squares kernel
    assert_eq!(
        lf::debug::kernel_count(&[&x.var_axes(&[1], 0, false)]).unwrap(),
        2
    );
    // two reductions of one computed producer (a kernel computes one reduction): the
    // producer is cheap, so each reduction's kernel computes it rather than reading it
    // stored
    let p = &x * 2.0;
    let a = p.sum_axes(&[1], false);
    let b = p.max_axes(&[1], false);
    assert_eq!(lf::debug::kernel_count(&[&a, &b]).unwrap(), 2);
    // an expensive producer (more than the recomputation bound) is stored once, then each
    // reduction reads it
    let p = (&x * 2.0).sin().exp().cos().tanh();
    let a = p.sum_axes(&[1], false);
    let b = p.max_axes(&[1], false);
    assert_eq!(lf::debug::kernel_count(&[&a, &b]).unwrap(), 3);
    // equal unevaluated producers built separately are separate nodes (only evaluated
    // results are shared by hash-consing): each fuses into its reduction
    let a = (&x * 2.0).sum_axes(&[1], false);
    let b = (&x * 2.0).max_axes(&[1], false);
    assert_eq!(lf::debug::kernel_count(&[&a, &b]).unwrap(), 2);
    // of a buffer: one kernel each
    let a = x.sum_axes(&[1], false);
    let b = x.max_axes(&[1], false);
    assert_eq!(lf::debug::kernel_count(&[&a, &b]).unwrap(), 2);
    // fusion off: one kernel per operation
    lf::set_fusion(false);
    let k = lf::debug::kernel_count(&[&(&x * &x).sum()]);
    lf::set_fusion(true);
    assert_eq!(k.unwrap(), 2);
}

device_test!(scalar_changes_do_not_replan_reductions);
fn scalar_changes_do_not_replan_reductions(dev: &Device) {
    let _g = lock();
    let x = lf::random::uniform_on(&[5, 7], DType::F64, 2, dev);
    x.eval().unwrap();
    let host = x.to_vec::<f64>().unwrap();
    let first = (&x * 0.5).sum_axes(&[1], false).to_vec::<f64>().unwrap();
    let before = lf::stats();
    for k in 1..4 {
        let s = (&x * (k as f64))
            .sum_axes(&[1], false)
            .to_vec::<f64>()
            .unwrap();
        for r in 0..5 {
            let want: f64 = host[r * 7..r * 7 + 7].iter().sum::<f64>() * k as f64;
            assert!((s[r] - want).abs() < 1e-12);
        }
    }
    let after = lf::stats();
    assert_eq!(after.plans, before.plans, "no new plan for new scalars");
    assert_eq!(after.kernels_compiled, before.kernels_compiled);
    assert_eq!(first.len(), 5);
}

device_test!(nan_aware_reductions_skip_nans);
/// `nansum nanmean nanmax nanmin` (all elements and over axes) against an oracle that skips
/// NaNs: rows with no NaN, some NaNs and only NaNs (NaN for the mean and the extremes, 0 for
/// the sum), f32 and f64, integers (no NaN: the plain reductions), an empty array.
fn nan_aware_reductions_skip_nans(dev: &Device) {
    let _g = lock();
    let (rows, cols) = (5usize, 783usize);
    let mut v = data(rows * cols, 3);
    for c in 0..cols {
        v[cols + c] = f64::NAN; // row 1: only NaNs
        if c % 7 == 0 {
            v[2 * cols + c] = f64::NAN; // row 2: some NaNs
        }
    }
    v[4 * cols + 5] = f64::NAN;
    for dtype in [DType::F32, DType::F64] {
        let (x, xf) = make(&v, &[rows, cols], dtype, dev);
        let what = format!("{dtype}");
        let rel = if dtype == DType::F32 { 2e-5 } else { 1e-12 };
        let (mut sum, mut cnt) = (vec![0.0; rows], vec![0usize; rows]);
        let (mut mx, mut mn) = (vec![f64::NAN; rows], vec![f64::NAN; rows]);
        for r in 0..rows {
            for c in 0..cols {
                let e = xf[r * cols + c];
                if e.is_nan() {
                    continue;
                }
                sum[r] += e;
                cnt[r] += 1;
                mx[r] = if mx[r].is_nan() { e } else { mx[r].max(e) };
                mn[r] = if mn[r].is_nan() { e } else { mn[r].min(e) };
            }
        }
        let mean: Vec<f64> = sum.iter().zip(&cnt).map(|(s, &n)| s / n as f64).collect();
        let s = x.nansum_axes(&[1], false);
        assert_eq!(
            (s.shape(), s.dtype()),
            (&[rows][..], dtype),
            "nansum {what}"
        );
        close(
            &fetch_real(&s, dtype),
            &sum,
            rel,
            rel,
            &format!("nansum {what}"),
        );
        let m = x.nanmean_axes(&[-1], false);
        assert_eq!(
            (m.shape(), m.dtype()),
            (&[rows][..], dtype),
            "nanmean {what}"
        );
        close(
            &fetch_real(&m, dtype),
            &mean,
            rel,
            rel,
            &format!("nanmean {what}"),
        );
        let a = x.nanmax_axes(&[1], true);
        assert_eq!(a.shape(), &[rows, 1], "nanmax keepdims {what}");
        close(
            &fetch_real(&a, dtype),
            &mx,
            0.0,
            0.0,
            &format!("nanmax {what}"),
        );
        let b = x.nanmin_axes(&[1], false);
        close(
            &fetch_real(&b, dtype),
            &mn,
            0.0,
            0.0,
            &format!("nanmin {what}"),
        );
        // over everything
        let total: f64 = sum.iter().sum();
        let n: usize = cnt.iter().sum();
        close(
            &fetch_real(&x.nansum(), dtype),
            &[total],
            rel,
            rel,
            &format!("nansum all {what}"),
        );
        close(
            &fetch_real(&x.nanmean(), dtype),
            &[total / n as f64],
            rel,
            rel,
            &format!("nanmean all {what}"),
        );
        let gmax = mx
            .iter()
            .copied()
            .filter(|e| !e.is_nan())
            .fold(f64::MIN, f64::max);
        close(
            &fetch_real(&x.nanmax(), dtype),
            &[gmax],
            0.0,
            0.0,
            &format!("nanmax all {what}"),
        );
        let gmin = mn
            .iter()
            .copied()
            .filter(|e| !e.is_nan())
            .fold(f64::MAX, f64::min);
        close(
            &fetch_real(&x.nanmin(), dtype),
            &[gmin],
            0.0,
            0.0,
            &format!("nanmin all {what}"),
        );
    }
    // integers hold no NaN: the plain reductions, with their dtypes
    let (xi, xif) = make(
        &v.iter()
            .map(|e| if e.is_nan() { 7.0 } else { (e * 50.0).round() })
            .collect::<Vec<_>>(),
        &[rows, cols],
        DType::I32,
        dev,
    );
    let s = xi.nansum();
    assert_eq!(s.dtype(), DType::I64);
    close(
        &fetch_real(&s, DType::I64),
        &[xif.iter().sum()],
        0.0,
        0.0,
        "nansum i32",
    );
    assert_eq!(xi.nanmean().dtype(), DType::F64);
    // an empty array: sum 0, mean NaN
    let e = Array::from_vec_on(Vec::<f32>::new(), &[0], dev).unwrap();
    assert_eq!(e.nansum().item::<f32>().unwrap(), 0.0);
    assert!(e.nanmean().item::<f32>().unwrap().is_nan());
}

device_test!(isclose_and_allclose_follow_numpy);
/// `isclose` and `allclose` as NumPy's (`equal_nan=False`; the expected values are
/// NumPy 2.4's `np.isclose(a, b)` for both dtypes): the tolerance formula, equal
/// infinities close, an infinity close to nothing else, NaN close to nothing, broadcasting,
/// integers compared in F64.
fn isclose_and_allclose_follow_numpy(dev: &Device) {
    let inf = f64::INFINITY;
    let a = [1.0, 1.0, 1.0, 0.0, inf, inf, -inf, f64::NAN, 1e10, 0.0];
    let b = [
        1.0,
        1.0 + 1e-6,
        1.1,
        1e-9,
        inf,
        -inf,
        -inf,
        f64::NAN,
        1.000009e10,
        2e-8,
    ];
    let want = [
        true, true, false, true, true, false, true, false, true, false,
    ];
    for dtype in [DType::F32, DType::F64] {
        let (x, _) = make(&a, &[a.len()], dtype, dev);
        let (y, _) = make(&b, &[b.len()], dtype, dev);
        let c = x.isclose(&y, 1e-5, 1e-8);
        assert_eq!((c.shape(), c.dtype()), (&[a.len()][..], DType::Bool));
        let got = c.to_vec::<bool>().unwrap();
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            // the f32 roundings of these values stay on the same side of the bound
            assert_eq!(g, w, "{dtype} isclose({}, {})", a[k], b[k]);
        }
        assert!(!lf::allclose(&x, &y, 1e-5, 1e-8).unwrap());
        assert!(lf::allclose(&x.slice(lf::s![..2]), &y.slice(lf::s![..2]), 1e-5, 1e-8).unwrap());
    }
    // broadcasting a scalar-shaped array, and integers
    let x = Array::from_vec_on(vec![1i32, 2, 3], &[3], dev).unwrap();
    let y = Array::from_vec_on(vec![2i32], &[1], dev).unwrap();
    assert_eq!(
        x.isclose(&y, 0.0, 0.0).to_vec::<bool>().unwrap(),
        [false, true, false]
    );
    assert!(lf::allclose(&x, &x, 0.0, 0.0).unwrap());
    let empty = Array::from_vec_on(Vec::<f64>::new(), &[0], dev).unwrap();
    assert!(lf::allclose(&empty, &empty, 1e-5, 1e-8).unwrap());
}
