//! `Array::matmul` and `lf::linalg::dot` against a naive triple loop in complex f64 written
//! out here: NumPy's `@` rules (vectors, batches with broadcasting, zero-sized axes), every
//! float and complex dtype and their promotions, transposed, reshaped and broadcast operands,
//! plan-cache reuse, misuse messages, and the plan structure (operand views read in place,
//! elementwise producers fused into one kernel before the library step).
//!
//! Statistics are process-global while tests run on parallel threads, so every test here
//! holds `LOCK`.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use num_complex::Complex64 as C;
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::C64, DType::C128];

// ------------------------------------------------------------------------------------
// The reference
// ------------------------------------------------------------------------------------

/// A C-order array of complex f64 values.
#[derive(Clone, Debug)]
struct Nd {
    shape: Vec<usize>,
    v: Vec<C>,
}

/// NumPy's `a @ b`, and alongside it `sum |a_ip| |b_pj|` per output element (the scale of
/// the rounding error).
fn naive(a: &Nd, b: &Nd) -> (Nd, Vec<f64>) {
    let (va, vb) = (a.shape.len() == 1, b.shape.len() == 1);
    let sa: Vec<usize> = if va {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let sb: Vec<usize> = if vb {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    assert_eq!(k, sb[sb.len() - 2]);
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let nb = ba.len().max(bb.len());
    let pad = |s: &[usize]| -> Vec<usize> {
        let mut p = vec![1; nb - s.len()];
        p.extend_from_slice(s);
        p
    };
    let (pa, pb) = (pad(ba), pad(bb));
    let batch: Vec<usize> = (0..nb)
        .map(|d| {
            assert!(pa[d] == pb[d] || pa[d] == 1 || pb[d] == 1);
            if pa[d] == 1 {
                pb[d]
            } else {
                pa[d]
            }
        })
        .collect();
    let total: usize = batch.iter().product();
    let mut out = vec![C::new(0.0, 0.0); total * m * n];
    let mut scale = vec![0.0; total * m * n];
    for t in 0..total {
        // multi-index of batch entry t, then the operands' batch offsets
        let mut rem = t;
        let mut idx = vec![0; nb];
        for d in (0..nb).rev() {
            idx[d] = rem % batch[d];
            rem /= batch[d];
        }
        let off = |p: &[usize]| -> usize {
            let mut o = 0;
            for d in 0..nb {
                o = o * p[d] + if p[d] == 1 { 0 } else { idx[d] };
            }
            o
        };
        let (oa, ob) = (off(&pa) * m * k, off(&pb) * k * n);
        for i in 0..m {
            for j in 0..n {
                let mut s = C::new(0.0, 0.0);
                let mut sc = 0.0;
                for p in 0..k {
                    let x = a.v[oa + i * k + p];
                    let y = b.v[ob + p * n + j];
                    s += x * y;
                    sc += x.norm() * y.norm();
                }
                out[(t * m + i) * n + j] = s;
                scale[(t * m + i) * n + j] = sc;
            }
        }
    }
    let mut shape = batch;
    if !va {
        shape.push(m);
    }
    if !vb {
        shape.push(n);
    }
    (Nd { shape, v: out }, scale)
}

/// Random values in [-1, 1) (complex: both parts) of `dtype`, from a fixed seed.
fn rand(shape: &[usize], dtype: DType, seed: u64) -> Array {
    let u = |s: u64| lf::random::uniform(shape, DType::F64, s) * 2.0 - 1.0;
    let x = if dtype.is_complex() {
        lf::complex(&u(seed), &u(seed + 7919))
    } else {
        u(seed)
    };
    x.astype(dtype)
}

/// The values of `x` as complex f64 (evaluates `x`).
fn fetch(x: &Array) -> Nd {
    let v: Vec<C> = match x.dtype() {
        DType::F32 => x
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&r| C::new(r as f64, 0.0))
            .collect(),
        DType::F64 => x
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|&r| C::new(r, 0.0))
            .collect(),
        DType::C64 => x
            .to_vec::<lf::c32>()
            .unwrap()
            .iter()
            .map(|c| C::new(c.re as f64, c.im as f64))
            .collect(),
        DType::C128 => x.to_vec::<lf::c64>().unwrap(),
        DType::I32 => x
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .map(|&r| C::new(r as f64, 0.0))
            .collect(),
        DType::I64 => x
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .map(|&r| C::new(r as f64, 0.0))
            .collect(),
        DType::Bool => x
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .map(|&r| C::new(r as u8 as f64, 0.0))
            .collect(),
        d => panic!("fetch: dtype {d} is not used by these tests"),
    };
    Nd {
        shape: x.shape().to_vec(),
        v,
    }
}

fn rtol(dt: DType) -> f64 {
    match dt {
        DType::F32 | DType::C64 => 1e-4,
        _ => 1e-12,
    }
}

/// Checks `got` (dtype first, then shape, then values) against `want` with an error bound
/// relative to `sum |a||b|` per element.
fn check(what: &str, got: &Array, dtype: DType, want: &(Nd, Vec<f64>)) {
    assert_eq!(got.dtype(), dtype, "{what}: dtype");
    let (want, scale) = want;
    assert_eq!(got.shape(), want.shape.as_slice(), "{what}: shape");
    let g = fetch(got);
    assert_eq!(g.v.len(), want.v.len(), "{what}: length");
    let tol = rtol(dtype);
    for (i, ((x, y), s)) in g.v.iter().zip(&want.v).zip(scale).enumerate() {
        let err = (x - y).norm();
        assert!(
            err <= tol * s + 1e-300,
            "{what}: element {i}: got {x}, want {y} (error {err:e}, bound {:e})",
            tol * s
        );
    }
}

device_test!(inner_dimension_one_gives_numpys_signed_zeros);
/// `a @ b` checked against the oracle on the values of `a` and `b`.
/// (The product is returned for the callers that inspect it further.)
fn inner_dimension_one_gives_numpys_signed_zeros(_: &Device) {
    let _g = lock();
    for &dt in &FLOATS {
        // NumPy: a dot product's sum starts at +0, so `0 + (-2 * 0)` is +0, never -0
        let a = Array::from_vec(vec![-2.0f64, 0.0, -0.0], &[3, 1])
            .expect("a")
            .astype(dt);
        let b = Array::from_vec(vec![0.0f64, -0.0, 3.0], &[1, 3])
            .expect("b")
            .astype(dt);
        let y = check_matmul(&format!("{dt} k=1"), &a, &b);
        assert_eq!(y.shape(), &[3, 3]);
        // products: -2*0 = -0, -2*-0 = +0, -2*3 = -6; 0*0 = +0, 0*-0 = -0, 0*3 = +0;
        // -0*0 = -0, -0*-0 = +0, -0*3 = -0 -- and +0 added to each
        let got = fetch(&y);
        for (i, c) in got.v.iter().enumerate() {
            let want_re = [0.0, 0.0, -6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0][i];
            assert_eq!(c.re, want_re, "{dt} k=1 element {i}");
            assert!(
                c.re.is_sign_positive() || c.re != 0.0,
                "{dt} k=1 element {i}: -0 where NumPy gives +0"
            );
            assert!(
                c.im == 0.0 && c.im.is_sign_positive(),
                "{dt} k=1 element {i}: imaginary part {} where NumPy gives +0",
                c.im
            );
        }
        // batched and vector forms take the same path
        let y = check_matmul(
            &format!("{dt} batched k=1"),
            &rand(&[2, 4, 1], dt, 3),
            &rand(&[1, 5], dt, 4),
        );
        assert_eq!(y.shape(), &[2, 4, 5]);
        let y = check_matmul(
            &format!("{dt} vectors k=1"),
            &rand(&[1], dt, 5),
            &rand(&[1, 6], dt, 6),
        );
        assert_eq!(y.shape(), &[6]);
        assert_eq!(plan_counts(&y).1, 0, "{dt}: k=1 calls no library");
    }
}

fn check_matmul(what: &str, a: &Array, b: &Array) -> Array {
    let want = naive(&fetch(a), &fetch(b));
    let y = a.matmul(b);
    check(what, &y, lf::result_type(a.dtype(), b.dtype()), &want);
    y
}

fn plan_counts(y: &Array) -> (usize, usize) {
    (
        lf::debug::kernel_count(&[y]).expect("plan"),
        lf::debug::library_count(&[y]).expect("plan"),
    )
}

// ------------------------------------------------------------------------------------
// Values
// ------------------------------------------------------------------------------------

device_test!(matrices_of_awkward_sizes_in_every_dtype);
fn matrices_of_awkward_sizes_in_every_dtype(_: &Device) {
    let _g = lock();
    let shapes = [
        (1, 1, 1),
        (3, 783, 5),
        (4, 7, 3),
        (17, 1, 9),
        (2, 33, 65),
        (64, 64, 64),
    ];
    for (s, &dt) in FLOATS.iter().enumerate() {
        for (t, &(m, k, n)) in shapes.iter().enumerate() {
            let seed = (s * 100 + t * 2) as u64;
            let a = rand(&[m, k], dt, seed);
            let b = rand(&[k, n], dt, seed + 1);
            let _ = check_matmul(&format!("{dt} ({m}x{k}) @ ({k}x{n})"), &a, &b);
        }
    }
}

device_test!(vectors_follow_numpy_rules);
fn vectors_follow_numpy_rules(_: &Device) {
    let _g = lock();
    for &dt in &FLOATS {
        let v = rand(&[5], dt, 1);
        let w = rand(&[5], dt, 2);
        let y = check_matmul(&format!("{dt} (5) @ (5)"), &v, &w);
        assert_eq!(y.shape(), &[] as &[usize]);
        let m = rand(&[5, 3], dt, 3);
        let y = check_matmul(&format!("{dt} (5) @ (5,3)"), &v, &m);
        assert_eq!(y.shape(), &[3]);
        let y = check_matmul(&format!("{dt} (3,5) @ (5)"), &m.transpose(), &v);
        assert_eq!(y.shape(), &[3]);
        let s = rand(&[2, 4, 5, 3], dt, 4);
        let y = check_matmul(&format!("{dt} (5) @ (2,4,5,3)"), &v, &s);
        assert_eq!(y.shape(), &[2, 4, 3]);
        let y = check_matmul(&format!("{dt} (2,4,3,5) @ (5)"), &s.swapaxes(-1, -2), &v);
        assert_eq!(y.shape(), &[2, 4, 3]);
    }
}

device_test!(batches_broadcast);
fn batches_broadcast(_: &Device) {
    let _g = lock();
    let cases: [(&[usize], &[usize]); 6] = [
        (&[2, 1, 3, 4], &[5, 4, 2]),
        (&[3, 4], &[2, 4, 5]),
        (&[2, 3, 4], &[4, 5]),
        (&[1, 2, 3], &[4, 3, 2]),
        (&[3, 1, 2, 3], &[1, 4, 3, 2]),
        (&[6, 2, 3], &[6, 3, 7]),
    ];
    for (s, &dt) in FLOATS.iter().enumerate() {
        for (t, (sa, sb)) in cases.iter().enumerate() {
            let seed = (s * 100 + t * 2 + 1000) as u64;
            let a = rand(sa, dt, seed);
            let b = rand(sb, dt, seed + 1);
            let _ = check_matmul(&format!("{dt} {sa:?} @ {sb:?}"), &a, &b);
        }
    }
}

device_test!(zero_sized_axes);
fn zero_sized_axes(_: &Device) {
    let _g = lock();
    for &dt in &FLOATS {
        // k = 0: an empty sum, zeros
        let y = check_matmul(
            &format!("{dt} k=0"),
            &rand(&[3, 0], dt, 1),
            &rand(&[0, 4], dt, 2),
        );
        assert_eq!(y.shape(), &[3, 4]);
        assert!(fetch(&y).v.iter().all(|c| *c == C::new(0.0, 0.0)));
        let y = check_matmul(
            &format!("{dt} vectors k=0"),
            &rand(&[0], dt, 1),
            &rand(&[0], dt, 2),
        );
        assert_eq!(y.shape(), &[] as &[usize]);
        // m = 0, n = 0, empty batch: empty results
        let y = check_matmul(
            &format!("{dt} m=0"),
            &rand(&[0, 3], dt, 1),
            &rand(&[3, 4], dt, 2),
        );
        assert_eq!(y.shape(), &[0, 4]);
        let y = check_matmul(
            &format!("{dt} n=0"),
            &rand(&[2, 3], dt, 1),
            &rand(&[3, 0], dt, 2),
        );
        assert_eq!(y.shape(), &[2, 0]);
        let y = check_matmul(
            &format!("{dt} batch 0"),
            &rand(&[0, 2, 3], dt, 1),
            &rand(&[3, 4], dt, 2),
        );
        assert_eq!(y.shape(), &[0, 2, 4]);
    }
}

device_test!(mixed_dtypes_promote);
fn mixed_dtypes_promote(_: &Device) {
    let _g = lock();
    let pairs = [
        (DType::F32, DType::F64, DType::F64),
        (DType::F32, DType::C64, DType::C64),
        (DType::F64, DType::C64, DType::C128),
        (DType::C64, DType::C128, DType::C128),
        (DType::I32, DType::F32, DType::F64),
        (DType::I64, DType::C64, DType::C128),
        (DType::Bool, DType::F32, DType::F32),
    ];
    for (t, &(da, db, dr)) in pairs.iter().enumerate() {
        let a = rand(&[4, 6], DType::F64, 2 * t as u64);
        let a = if da.is_inexact() {
            a.astype(da)
        } else {
            (a * 10.0).astype(da)
        };
        let b = rand(&[6, 3], db, 2 * t as u64 + 1);
        let y = check_matmul(&format!("{da} @ {db}"), &a, &b);
        assert_eq!(y.dtype(), dr);
    }
}

device_test!(complex_products_do_not_conjugate);
fn complex_products_do_not_conjugate(_: &Device) {
    let _g = lock();
    for dt in [DType::C64, DType::C128] {
        let i = Array::from_vec(vec![lf::c64::new(0.0, 1.0)], &[1, 1])
            .unwrap()
            .astype(dt);
        let y = i.transpose().matmul(&i); // i * i = -1, not |i|^2
        let v = fetch(&y).v;
        assert!((v[0] - C::new(-1.0, 0.0)).norm() < 1e-6, "{dt}: {}", v[0]);
    }
}

device_test!(dot_matches_numpy);
fn dot_matches_numpy(_: &Device) {
    let _g = lock();
    let a = rand(&[4, 5], DType::F64, 1);
    let b = rand(&[5, 3], DType::F64, 2);
    check(
        "dot 2-D",
        &lf::linalg::dot(&a, &b),
        DType::F64,
        &naive(&fetch(&a), &fetch(&b)),
    );
    let v = rand(&[5], DType::F64, 3);
    check(
        "dot 1-D",
        &lf::linalg::dot(&v, &v),
        DType::F64,
        &naive(&fetch(&v), &fetch(&v)),
    );
    // 0-d: elementwise product
    let s = Array::scalar(2.0f64);
    let y = lf::linalg::dot(&s, &a);
    let (ha, hy) = (fetch(&a), fetch(&y));
    assert_eq!(hy.shape, ha.shape);
    assert!(hy
        .v
        .iter()
        .zip(&ha.v)
        .all(|(y, x)| (y - 2.0 * x).norm() < 1e-15));
    // N-D: dot(a, b)[i, j, k, m] = sum_p a[i, j, p] * b[k, p, m]
    let a = rand(&[2, 3, 4], DType::C128, 4);
    let b = rand(&[5, 4, 6], DType::C128, 5);
    let y = lf::linalg::dot(&a, &b);
    assert_eq!(y.dtype(), DType::C128);
    assert_eq!(y.shape(), &[2, 3, 5, 6]);
    let (ha, hb, hy) = (fetch(&a), fetch(&b), fetch(&y));
    for i in 0..6 {
        for k in 0..5 {
            for m in 0..6 {
                let mut s = C::new(0.0, 0.0);
                for p in 0..4 {
                    s += ha.v[i * 4 + p] * hb.v[(k * 4 + p) * 6 + m];
                }
                let got = hy.v[(i * 5 + k) * 6 + m];
                assert!((got - s).norm() < 1e-12, "dot N-D at ({i}, {k}, {m})");
            }
        }
    }
}

device_test!(plans_are_reused_with_new_data);
fn plans_are_reused_with_new_data(_: &Device) {
    let _g = lock();
    for seed in 0..3u64 {
        let a = rand(&[6, 4], DType::F32, 10 + seed);
        let b = rand(&[2, 6, 5], DType::F32, 20 + seed);
        a.eval().unwrap();
        b.eval().unwrap();
        let before = lf::stats().plan_cache_hits;
        let _ = check_matmul("a^T @ b", &a.transpose(), &b);
        if seed > 0 {
            assert!(
                lf::stats().plan_cache_hits > before,
                "second plan not cached"
            );
        }
    }
}

device_test!(results_feed_later_steps);
fn results_feed_later_steps(_: &Device) {
    let _g = lock();
    let a = rand(&[3, 4], DType::F64, 1);
    let b = rand(&[4, 5], DType::F64, 2);
    let c = rand(&[3, 6], DType::F64, 3);
    let (ha, hb, hc) = (fetch(&a), fetch(&b), fetch(&c));
    // (a @ b)^T @ c: the first product's buffer is read transposed by the second
    let ab = a.matmul(&b);
    let y = ab.transpose().matmul(&c);
    assert_eq!(
        plan_counts(&y),
        (0, 2),
        "{}",
        lf::debug::plan(&[&y]).unwrap()
    );
    let (hab, _) = naive(&ha, &hb);
    let t = Nd {
        shape: vec![5, 3],
        v: (0..15).map(|q| hab.v[(q % 3) * 5 + q / 3]).collect(),
    };
    check("(a @ b)^T @ c", &y, DType::F64, &naive(&t, &hc));
    // the same product again is the realized node (hash-consing): no library call
    assert_eq!(plan_counts(&(a.matmul(&b) + 1.0)), (1, 0));
    // a consumer of a product fuses into one kernel after it
    let z = c.transpose().matmul(&a) * 2.0 + 1.0;
    assert_eq!(plan_counts(&z), (1, 1));
    let (ct, _) = naive(
        &Nd {
            shape: vec![6, 3],
            v: (0..18).map(|q| hc.v[(q % 3) * 6 + q / 3]).collect(),
        },
        &ha,
    );
    let hz = fetch(&z);
    assert_eq!(hz.shape, vec![6, 4]);
    for (g, w) in hz.v.iter().zip(&ct.v) {
        assert!((g - (w * 2.0 + 1.0)).norm() < 1e-12);
    }
}

// ------------------------------------------------------------------------------------
// Structure: what the plan copies
// ------------------------------------------------------------------------------------

device_test!(transposed_and_broadcast_operands_are_read_in_place);
fn transposed_and_broadcast_operands_are_read_in_place(_: &Device) {
    let _g = lock();
    for &dt in &FLOATS {
        let a = rand(&[5, 3], dt, 1);
        let b = rand(&[5, 4], dt, 2);
        let s = rand(&[2, 4, 3], dt, 3);
        let flat = rand(&[24], dt, 4);
        let t = rand(&[2, 5, 4], dt, 5);
        let v = rand(&[5], dt, 6);
        lf::eval(&[&a, &b, &s, &flat, &t, &v]).unwrap();
        let cases: Vec<(&str, Array, Array)> = vec![
            ("a^T @ b", a.transpose(), b.clone()),
            ("b^T @ a", b.transpose(), a.clone()),
            ("a^T @ a", a.transpose(), a.clone()),
            ("a @ a^T", a.clone(), a.transpose()),
            ("a^T @ (b^T)^T", a.transpose(), b.transpose().transpose()),
            ("s^T batched", s.permute(&[0, 2, 1]), s.clone()),
            ("swapaxes", s.clone(), s.swapaxes(-1, -2)),
            ("broadcast left", a.transpose(), t.clone()),
            ("broadcast right", t.clone(), b.transpose()),
            ("sliced", t.clone(), s.slice(lf::s![0, .., ..])),
            (
                "explicit broadcast_to",
                a.broadcast_to(&[3, 5, 3]).swapaxes(-1, -2),
                b.clone(),
            ),
            ("reshaped buffer", flat.reshape(&[2, 3, 4]), s.clone()),
            ("vector @ matrix", v.clone(), b.clone()),
            ("matrix @ vector", b.transpose(), v.clone()),
        ];
        for (what, x, y) in cases {
            let out = x.matmul(&y);
            let (kernels, libs) = plan_counts(&out);
            assert_eq!(libs, 1, "{dt} {what}");
            // a slice is not a free view: that operand is copied first
            let copies = usize::from(what == "sliced");
            assert!(
                kernels == copies,
                "{dt} {what}: {kernels} kernels\n{}",
                lf::debug::plan(&[&out]).unwrap()
            );
            let want = naive(&fetch(&x), &fetch(&y));
            check(&format!("{dt} {what}"), &out, dt, &want);
        }
    }
}

device_test!(elementwise_producers_fuse_into_one_kernel);
fn elementwise_producers_fuse_into_one_kernel(_: &Device) {
    let _g = lock();
    let x = rand(&[6, 4], DType::F32, 1);
    let y = rand(&[4, 5], DType::F32, 2);
    lf::eval(&[&x, &y]).unwrap();
    let (hx, hy) = (fetch(&x), fetch(&y));
    let scaled = |n: &Nd, f: f64| Nd {
        shape: n.shape.clone(),
        v: n.v.iter().map(|c| c * f).collect(),
    };
    // (x * 2) @ y: one fused kernel materializes x * 2, then one gemm
    let out = (&x * 2.0).matmul(&y);
    assert_eq!(
        plan_counts(&out),
        (1, 1),
        "{}",
        lf::debug::plan(&[&out]).unwrap()
    );
    let before = lf::stats();
    check(
        "(x*2) @ y",
        &out,
        DType::F32,
        &naive(&scaled(&hx, 2.0), &hy),
    );
    let after = lf::stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(after.library_calls - before.library_calls, 1);
    // the transpose of a computed operand: the computation is stored once, in C
    // order, and read transposed
    let out = (&x * 3.0).transpose().matmul(&(&x - 1.0));
    assert_eq!(
        plan_counts(&out),
        (1, 1),
        "{}",
        lf::debug::plan(&[&out]).unwrap()
    );
    let xt = Nd {
        shape: vec![4, 6],
        v: (0..24).map(|q| hx.v[(q % 6) * 4 + q / 6] * 3.0).collect(),
    };
    let xm = Nd {
        shape: hx.shape.clone(),
        v: hx.v.iter().map(|c| c - 1.0).collect(),
    };
    check("(x*3)^T @ (x-1)", &out, DType::F32, &naive(&xt, &xm));
    // lazy random operands of one shape are generated by one (two-output) kernel
    let out = rand(&[4, 4], DType::F64, 5).matmul(&rand(&[4, 4], DType::F64, 6));
    assert_eq!(
        plan_counts(&out),
        (1, 1),
        "{}",
        lf::debug::plan(&[&out]).unwrap()
    );
    // a sliced operand is materialized (one kernel), then multiplied
    let out = x.slice(lf::s![1.., ..]).matmul(&y);
    assert_eq!(plan_counts(&out), (1, 1));
    let hs = Nd {
        shape: vec![5, 4],
        v: hx.v[4..].to_vec(),
    };
    check("x[1:] @ y", &out, DType::F32, &naive(&hs, &hy));
}

// ------------------------------------------------------------------------------------
// Misuse
// ------------------------------------------------------------------------------------

fn panic_message(f: impl FnOnce() -> Array) -> String {
    let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) else {
        panic!("expected a panic");
    };
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

device_test!(integer_and_bool_products_are_exact);
fn integer_and_bool_products_are_exact(dev: &Device) {
    let _g = lock();
    // (2,1,3,4) i32 @ (5,4,2) i64 -> (2,5,3,2) i64, against exact i64 loops
    let av: Vec<i32> = (0..24).map(|v| (v * 7919 % 23) - 11).collect();
    let bv: Vec<i64> = (0..40).map(|v| (v * 104729 % 19) - 9).collect();
    let a = Array::from_vec_on(av.clone(), &[2, 1, 3, 4], dev).unwrap();
    let b = Array::from_vec_on(bv.clone(), &[5, 4, 2], dev).unwrap();
    let c = a.matmul(&b);
    assert_eq!((c.shape(), c.dtype()), (&[2usize, 5, 3, 2][..], DType::I64));
    let got = c.to_vec::<i64>().unwrap();
    let mut want = Vec::new();
    for p in 0..2 {
        for q in 0..5 {
            for i in 0..3 {
                for j in 0..2 {
                    want.push(
                        (0..4)
                            .map(|k| av[p * 12 + i * 4 + k] as i64 * bv[q * 8 + k * 2 + j])
                            .sum::<i64>(),
                    );
                }
            }
        }
    }
    assert_eq!(got, want);
    // i32 @ i32 stays i32 and wraps like NumPy
    let big = Array::from_vec_on(vec![i32::MAX, 2], &[1, 2], dev).unwrap();
    let two = Array::from_vec_on(vec![2i32, 1], &[2], dev).unwrap();
    let w = big.matmul(&two);
    assert_eq!((w.shape(), w.dtype()), (&[1usize][..], DType::I32));
    assert_eq!(
        w.to_vec::<i32>().unwrap(),
        vec![i32::MAX.wrapping_mul(2).wrapping_add(2)]
    );
    // bool @ bool is any(a & b)
    let x = Array::from_vec_on(vec![true, false, false, false, true, false], &[2, 3], dev).unwrap();
    let y = Array::from_vec_on(vec![false, true, true], &[3], dev).unwrap();
    let z = x.matmul(&y);
    assert_eq!((z.shape(), z.dtype()), (&[2usize][..], DType::Bool));
    assert_eq!(z.to_vec::<bool>().unwrap(), vec![false, true]);
}

device_test!(misuse_panics_with_shapes_and_dtypes);
fn misuse_panics_with_shapes_and_dtypes(_: &Device) {
    let _g = lock();
    let a = Array::zeros(&[2, 3], DType::F32);
    let b = Array::zeros(&[4, 5], DType::F64);
    let msg = panic_message(|| a.matmul(&b));
    assert!(
        msg.contains("matmul") && msg.contains("[2, 3]") && msg.contains("[4, 5]"),
        "{msg}"
    );
    assert!(
        msg.contains("float32") || msg.contains("f32") || msg.contains("F32"),
        "{msg}"
    );
    let s = Array::scalar(1.0f32);
    let msg = panic_message(|| s.matmul(&a));
    assert!(msg.contains("0-d"), "{msg}");
    let msg = panic_message(|| {
        Array::zeros(&[2, 2, 3], DType::F32).matmul(&Array::zeros(&[3, 3, 4], DType::F32))
    });
    assert!(msg.contains("batch") && msg.contains("[2, 2, 3]"), "{msg}");
    let msg = panic_message(|| {
        lf::linalg::dot(
            &Array::zeros(&[2, 3, 4], DType::F32),
            &Array::zeros(&[2, 5, 4], DType::F32),
        )
    });
    assert!(msg.contains("dot") && msg.contains("[2, 5, 4]"), "{msg}");
}

device_test!(fusion_off_still_reads_views_in_place);
fn fusion_off_still_reads_views_in_place(_: &Device) {
    let _g = lock();
    let prev = lf::fusion_enabled();
    lf::set_fusion(false);
    let r = std::panic::catch_unwind(|| {
        let x = rand(&[6, 4], DType::F64, 1);
        let y = rand(&[2, 6, 5], DType::F64, 2);
        lf::eval(&[&x, &y]).unwrap();
        let out = (&x + 1.0).transpose().matmul(&y);
        assert_eq!(
            plan_counts(&out),
            (1, 1),
            "{}",
            lf::debug::plan(&[&out]).unwrap()
        );
        let hx = fetch(&(&x + 1.0).transpose());
        check("(x+1)^T @ y", &out, DType::F64, &naive(&hx, &fetch(&y)));
    });
    lf::set_fusion(prev);
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}
