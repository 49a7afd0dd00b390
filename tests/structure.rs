//! Fusion structure: how many kernels an expression plans to (`lf::debug::kernel_count`) and
//! launches (`lf::stats().kernels_launched`), with fusion on and off.
//!
//! Stats and the fusion switch are process-global while tests run on parallel threads, so
//! every test here holds `LOCK` and measures deltas (stats before and after).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets fusion for its lifetime and restores the previous setting on drop (even on panic).
struct Fusion(bool);
impl Fusion {
    fn set(on: bool) -> Fusion {
        let prev = lf::fusion_enabled();
        lf::set_fusion(on);
        Fusion(prev)
    }
}
impl Drop for Fusion {
    fn drop(&mut self) {
        lf::set_fusion(self.0);
    }
}

/// Kernels launched while `f` runs.
fn launched(f: impl FnOnce()) -> u64 {
    let before = lf::stats().kernels_launched;
    f();
    lf::stats().kernels_launched - before
}

fn ramp(n: usize, scale: f32, offset: f32) -> Array {
    let v: Vec<f32> = (0..n)
        .map(|i| (i as f32 * 0.37).sin() * scale + offset)
        .collect();
    Array::from_vec(v, &[n]).expect("from_vec")
}

/// The BENCH.md chain: r=sqrt(x*x+y*y); t=atan2(y,x); z=r*cos(t)+exp(-0.5r)*sin(t);
/// where(z>0, z, 0.1z)+1.
fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (-0.5f64 * &r).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, 0.1f64 * &z) + 1.0
}

fn chain_host(x: f32, y: f32) -> f32 {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = r * t.cos() + (-0.5 * r).exp() * t.sin();
    (if z > 0.0 { z } else { 0.1 * z }) + 1.0
}

#[track_caller]
fn assert_close(got: &[f32], exp: &[f32], what: &str) {
    assert_eq!(got.len(), exp.len(), "{what}: length");
    for (i, (g, e)) in got.iter().zip(exp).enumerate() {
        assert!(
            (g - e).abs() <= 1e-5 * e.abs().max(1.0),
            "{what}[{i}]: got {g}, expected {e}"
        );
    }
}

device_test!(chain_is_one_kernel_fused_and_sixteen_unfused);
fn chain_is_one_kernel_fused_and_sixteen_unfused(_: &Device) {
    let _g = lock();
    let n = 4096;
    let (x, y) = (ramp(n, 3.0, 0.1), ramp(n, -2.0, 0.5));
    let hx = x.to_vec::<f32>().expect("x");
    let hy = y.to_vec::<f32>().expect("y");

    let fused = {
        let _f = Fusion::set(true);
        let out = chain(&x, &y);
        assert_eq!(
            lf::debug::kernel_count(&[&out]).expect("plan"),
            1,
            "fused chain"
        );
        assert_eq!(
            launched(|| out.eval().expect("eval")),
            1,
            "fused chain launches"
        );
        out.to_vec::<f32>().expect("fused result")
    };
    let unfused = {
        let _f = Fusion::set(false);
        // fresh leaves, so that no node of the fused run can be shared by hash-consing
        let x = Array::from_vec(hx.clone(), &[n]).expect("from_vec");
        let y = Array::from_vec(hy.clone(), &[n]).expect("from_vec");
        let out = chain(&x, &y);
        // One kernel per operation node: x*x, y*y, add, sqrt, atan2, cos, r*cos(t),
        // -0.5*r, exp, sin, exp(..)*sin(t), add, z>0, 0.1*z, where, +1 = 16. Scalars
        // are kernel parameters and broadcasts of them are free views, not kernels.
        let steps: Vec<String> = lf::debug::plan(&[&out])
            .expect("plan")
            .lines()
            .filter(|l| l.starts_with("step"))
            .map(String::from)
            .collect();
        assert_eq!(
            lf::debug::kernel_count(&[&out]).expect("plan"),
            16,
            "unfused chain plan:\n{}",
            steps.join("\n")
        );
        assert_eq!(
            launched(|| out.eval().expect("eval")),
            16,
            "unfused chain launches"
        );
        out.to_vec::<f32>().expect("unfused result")
    };
    let host: Vec<f32> = hx
        .iter()
        .zip(&hy)
        .map(|(&a, &b)| chain_host(a, b))
        .collect();
    assert_close(&fused, &host, "fused chain vs host");
    assert_close(&unfused, &fused, "unfused vs fused chain");
}

device_test!(shared_subexpression_gives_one_multi_output_kernel);
fn shared_subexpression_gives_one_multi_output_kernel(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let x = ramp(1000, 1.0, 0.0);
    let s = (&x * &x).exp(); // read by both roots at the same index
    let a = &s + 1.0;
    let b = &s * 2.0;
    assert_eq!(lf::debug::kernel_count(&[&a, &b]).expect("plan"), 1);
    assert_eq!(launched(|| lf::eval(&[&a, &b]).expect("eval")), 1);
    assert_eq!(
        launched(|| lf::eval(&[&a, &b]).expect("eval")),
        0,
        "already evaluated"
    );
    let hx = x.to_vec::<f32>().expect("x");
    let ea: Vec<f32> = hx.iter().map(|v| (v * v).exp() + 1.0).collect();
    let eb: Vec<f32> = hx.iter().map(|v| (v * v).exp() * 2.0).collect();
    assert_close(&a.to_vec::<f32>().expect("a"), &ea, "a");
    assert_close(&b.to_vec::<f32>().expect("b"), &eb, "b");
}

device_test!(node_read_at_two_indices_is_materialized);
fn node_read_at_two_indices_is_materialized(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let x = Array::from_vec((0..24).map(|i| i as f64 * 0.25).collect(), &[6, 4]).expect("from_vec");
    let a = x.sin();
    let b = &a + a.roll(1, 0);
    assert_eq!(lf::debug::kernel_count(&[&b]).expect("plan"), 2);
    assert_eq!(launched(|| b.eval().expect("eval")), 2);
    let got = b.to_vec::<f64>().expect("b");
    for i in 0..6 {
        for j in 0..4 {
            let s = |r: usize| ((r * 4 + j) as f64 * 0.25).sin();
            let e = s(i) + s((i + 5) % 6);
            assert!(
                (got[i * 4 + j] - e).abs() < 1e-12,
                "[{i},{j}]: {} vs {e}",
                got[i * 4 + j]
            );
        }
    }
}

device_test!(broadcast_multiply_is_one_kernel);
fn broadcast_multiply_is_one_kernel(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let m = Array::from_vec((0..20_000).map(|i| i as f64).collect(), &[4000, 5]).expect("from_vec");
    let d = Array::from_vec((0..2_000_000).map(|i| i as f64).collect(), &[100, 4000, 5])
        .expect("from_vec");
    let out = &m * &d;
    assert_eq!(out.shape(), &[100, 4000, 5]);
    assert_eq!(lf::debug::kernel_count(&[&out]).expect("plan"), 1);
    assert_eq!(launched(|| out.eval().expect("eval")), 1);
    for &k in &[0usize, 19_999, 20_000, 1_234_567, 1_999_999] {
        let e = (k % 20_000) as f64 * k as f64;
        let got = out
            .reshape(&[-1])
            .slice(lf::s![k as isize..k as isize + 1])
            .item::<f64>()
            .expect("item");
        assert_eq!(got, e, "element {k}");
    }
}

/// The PSF pipeline before its FFT: linspace, meshgrid, rho/phi, phase, exp(i 2pi phase),
/// the rho > 1 mask, padding and the ifftshift roll.
fn psf_pre_fft(n: usize) -> Array {
    let x = Array::linspace(-1.0, 1.0, n, DType::F32);
    let g = lf::meshgrid(&[&x, &x], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phi = yy.atan2(xx);
    let phase = rho.square() * phi.cos();
    let wv = (&phase * lf::c64::new(0.0, 2.0 * std::f64::consts::PI)).exp();
    let wv = lf::where_(&rho.gt(1.0), 0.0, &wv);
    let padded = wv.pad(&[(n / 2, n / 2)], 0.0);
    let h = n as isize; // half of the padded size 2n
    padded.roll(-h, 0).roll(-h, 1)
}

device_test!(psf_pre_fft_is_one_kernel);
fn psf_pre_fft_is_one_kernel(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let n = 64;
    let out = psf_pre_fft(n);
    assert_eq!(out.dtype(), DType::C64);
    assert_eq!(out.shape(), &[2 * n, 2 * n]);
    assert_eq!(lf::debug::kernel_count(&[&out]).expect("plan"), 1);
    assert_eq!(launched(|| out.eval().expect("eval")), 1);
    let v = out.to_vec::<lf::c32>().expect("psf");
    // after ifftshift the pupil's centre (1 at the origin region) sits at the corners,
    // the padding (0) in the middle
    assert_eq!(
        v[n * 2 * n + n],
        lf::c32::new(0.0, 0.0),
        "padding in the middle"
    );
    let inside = v.iter().filter(|z| (z.norm() - 1.0).abs() < 1e-5).count();
    let zeros = v.iter().filter(|z| z.norm() == 0.0).count();
    assert_eq!(
        inside + zeros,
        v.len(),
        "every value is on the unit circle or 0"
    );
    assert!(
        inside > n * n / 2,
        "the unit disc holds most of the pupil: {inside}"
    );
}

device_test!(evaluated_arrays_become_leaves_in_a_loop);
fn evaluated_arrays_become_leaves_in_a_loop(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let mut u = Array::from_vec(vec![0.0f32; 256], &[256]).expect("from_vec");
    let first_plan = lf::debug::plan(&[&(&u * 0.5 + 1.0)]).expect("plan");
    let mut expected = 0.0f32;
    for step in 0..100 {
        u = &u * 0.5 + 1.0;
        expected = expected * 0.5 + 1.0;
        assert_eq!(
            lf::debug::kernel_count(&[&u]).expect("plan"),
            1,
            "step {step}"
        );
        assert_eq!(launched(|| u.eval().expect("eval")), 1, "step {step}");
    }
    let next = &u * 0.5 + 1.0;
    let last_plan = lf::debug::plan(&[&next]).expect("plan");
    assert_eq!(
        last_plan.lines().count(),
        first_plan.lines().count(),
        "the plan of step 101 has the size of step 1's:\n{first_plan}\n---\n{last_plan}"
    );
    let v = u.to_vec::<f32>().expect("u");
    assert!(v.iter().all(|&x| x == expected), "{} vs {expected}", v[0]);
}

device_test!(unfused_loop_launches_one_kernel_per_operation);
fn unfused_loop_launches_one_kernel_per_operation(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(false);
    let mut u = Array::from_vec(vec![1.0f64; 64], &[64]).expect("from_vec");
    for step in 0..10 {
        u = &u * 0.5 + 1.0;
        assert_eq!(
            launched(|| u.eval().expect("eval")),
            2,
            "step {step}: mul, add"
        );
    }
    assert_eq!(
        u.to_vec::<f64>().expect("u")[0],
        (0..10).fold(1.0, |a, _| a * 0.5 + 1.0)
    );
}

device_test!(evaluated_expression_rebuilt_is_not_recomputed);
fn evaluated_expression_rebuilt_is_not_recomputed(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let x = ramp(100, 1.0, 2.0);
    let a = x.sqrt();
    assert_eq!(launched(|| a.eval().expect("eval")), 1);
    // hash-consing: the same expression over the same live inputs is the evaluated node
    let b = x.sqrt();
    assert_eq!(lf::debug::kernel_count(&[&b]).expect("plan"), 0);
    assert_eq!(launched(|| b.eval().expect("eval")), 0);
    // and a consumer of it reads its buffer as a leaf: one kernel, no sqrt recomputed
    let c = (&b * 3.0 + 1.0).log();
    assert_eq!(lf::debug::kernel_count(&[&c]).expect("plan"), 1);
    let plan = lf::debug::plan(&[&c]).expect("plan");
    assert!(!plan.contains("Unary(Sqrt"), "sqrt recomputed:\n{plan}");
}

device_test!(views_fuse_into_one_kernel);
fn views_fuse_into_one_kernel(_: &Device) {
    let _g = lock();
    let _f = Fusion::set(true);
    let x = Array::from_vec((0..60).map(|i| i as f32).collect(), &[3, 4, 5]).expect("from_vec");
    let y = x.transpose().slice(lf::s![..;-1, 1..3, ..]).reshape(&[-1]); // (5,2,3) -> 30
    let z = lf::concatenate(&[&y, &y.flip(0)], 0)
        .pad(&[(2, 1)], -1.0)
        .roll(3, 0);
    let out = (z.sin() + lf::stack(&[&z, &z], 0).slice(lf::s![1, ..])) * 2.0;
    assert_eq!(out.shape(), &[63]);
    assert_eq!(lf::debug::kernel_count(&[&out]).expect("plan"), 1);
    assert_eq!(launched(|| out.eval().expect("eval")), 1);
}

device_test!(wide_graphs_split_into_few_large_kernels);
/// Graphs past the kernel argument limit split in one pass into few large kernels, not one
/// kernel per op (regression: a sum of 2,000 inputs planned into 1,565 kernels in 4.5 s,
/// `x + c_i` over 5,000 constants took minutes).
fn wide_graphs_split_into_few_large_kernels(dev: &Device) {
    let _l = lock(); // the fusion switch must stay on
    let n = 2000;
    let xs: Vec<Array> = (0..n)
        .map(|i| Array::from_vec_on(vec![i as f64, 1.0], &[2], dev).unwrap())
        .collect();
    let mut s = xs[0].clone();
    for x in &xs[1..] {
        s = &s + x;
    }
    let k = lf::debug::kernel_count(&[&s]).unwrap();
    assert!(k <= n / 40, "a sum of {n} inputs planned into {k} kernels");
    assert_eq!(s.shape(), &[2]);
    assert_eq!(s.dtype(), DType::F64);
    let want = (n * (n - 1) / 2) as f64;
    assert_eq!(s.to_vec::<f64>().unwrap(), vec![want, n as f64]);

    let m = 5000;
    let mut y = Array::from_vec_on(vec![0.5f64], &[1], dev).unwrap();
    for i in 0..m {
        y = &y + (i % 7) as f64;
    }
    let k = lf::debug::kernel_count(&[&y]).unwrap();
    assert!(
        k <= m / 50,
        "x + c_i over {m} constants planned into {k} kernels"
    );
    let want = 0.5 + (0..m).map(|i| (i % 7) as f64).sum::<f64>();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![want]);
}

device_test!(with_fusion_is_scoped_to_the_thread);
/// `with_fusion` sets fusion for the evaluations planned on this thread only, nests, and
/// restores the previous setting after a panic; another thread inside its own scope is
/// not affected.
fn with_fusion_is_scoped_to_the_thread(dev: &Device) {
    let x = Array::from_vec_on(vec![0.5f32; 64], &[64], dev).unwrap();
    let y = Array::from_vec_on(vec![-1.5f32; 64], &[64], dev).unwrap();
    let kernels = || lf::debug::kernel_count(&[&chain(&x, &y)]).unwrap();
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            lf::with_fusion(true, || {
                barrier.wait(); // the other thread is inside `with_fusion(false)`
                assert_eq!(kernels(), 1, "fused on the other thread");
                barrier.wait();
            })
        });
        lf::with_fusion(false, || {
            barrier.wait();
            assert_eq!(kernels(), 16, "unfused in the scope");
            lf::with_fusion(true, || assert_eq!(kernels(), 1, "nested scope"));
            assert_eq!(kernels(), 16, "back in the outer scope");
            barrier.wait();
        });
    });
    // (inside an outer scope: other tests of this binary switch the global setting)
    lf::with_fusion(true, || {
        let r = std::panic::catch_unwind(|| lf::with_fusion(false, || panic!("inside")));
        assert!(r.is_err());
        assert!(lf::fusion_enabled(), "restored after a panic");
    });
}
