//! Simulation loops stay healthy: the Allen-Cahn spectral step (BENCH.md `sim100`) run many
//! times through `eval` and through a traced `lf::Function` keeps memory flat, plans and
//! compiles only once, writes in place when it owns its input, and matches an independent
//! rustfft oracle. Steps: `LAZYFUSE_LOOP_STEPS` (default 300).
//!
//! The counters are process-wide, so every test holds `LOCK` and measures deltas.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use rustfft::num_complex::Complex64;
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn graphs_on() -> bool {
    std::env::var("LAZYFUSE_GRAPHS").map_or(true, |v| v.trim() != "0")
}

fn steps() -> usize {
    std::env::var("LAZYFUSE_LOOP_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
        .max(8)
}

/// Deterministic values in [-0.1, 0.1) (a fixed-seed LCG).
fn field(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n * n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect()
}

/// The multiplier of BENCH.md's sim100: 1 / (1 + dt k^2), k = 2 pi fftfreq(n, 1/n) / n.
fn multiplier(n: usize, dt: f64) -> Vec<f64> {
    let k: Vec<f64> = (0..n)
        .map(|i| {
            let f = if i < n.div_ceil(2) {
                i as f64
            } else {
                i as f64 - n as f64
            };
            f * 2.0 * std::f64::consts::PI / n as f64
        })
        .collect();
    let mut m = Vec::with_capacity(n * n);
    for ky in &k {
        for kx in &k {
            m.push(1.0 / (1.0 + dt * (kx * kx + ky * ky)));
        }
    }
    m
}

/// Kernels one simulation step launches on `dev` (see the eval-loop test).
fn kernels_per_step(dev: &lf::Device, n: usize) -> u64 {
    // C2C: the step kernel, the multiplier, the real part; the real-FFT plan: the step
    // kernel and the Hermitian half spectrum times the multiplier (in a CUDA graph the C2R
    // writes one of two result buffers the graph owns, which alternate, so no copy runs);
    // C2C with the generated passes running a transform (`LAZYFUSE_FFT=generated`, or
    // chosen by measurement): the kernels around it run inside its passes (both
    // transforms: none left; one: the kernel on the other side stays)
    // the real-FFT plan with generated real passes: the step kernel inside the R2C's
    // first pass, the product inside the R2C's last pass (the C2R on cuFFT) or the C2R's
    // first (the R2C on cuFFT); both generated: one real round trip, no kernel
    if lf::real_fft_enabled_for(dev, n * n) {
        return match generated_real_transforms(dev, n) {
            (false, false) => 2,
            (false, true) => 1,
            (true, _) => 0,
        };
    }
    match generated_transforms(dev, n) {
        (true, true) => 0,
        (false, false) => 3,
        _ => 1,
    }
}

/// Library steps of one simulation step on `dev`: two transforms, or one where the
/// generated passes run both (the product between them in the pass that goes there and
/// back: a round trip is one step).
fn ffts_per_step(dev: &lf::Device, n: usize) -> u64 {
    let round_trip = !lf::real_fft_enabled_for(dev, n * n)
        && dev.is_cuda()
        && generated_transforms(dev, n) == (true, true);
    if round_trip {
        1
    } else {
        2
    }
}

/// Whether the generated passes run the step's forward and inverse C2C transforms on
/// `dev` (`lf::debug::fft_runs_generated`, asked of transforms of the same shapes).
fn generated_transforms(dev: &lf::Device, n: usize) -> (bool, bool) {
    let fwd = lf::fft::fft2(&Array::zeros_on(&[n, n], lf::DType::F32, dev));
    let inv = lf::fft::ifft2(&Array::zeros_on(&[n, n], lf::DType::C64, dev));
    let runs = |a: &Array| lf::debug::fft_runs_generated(a).unwrap();
    (runs(&fwd), runs(&inv))
}

/// Whether the generated passes run the real-FFT plan's R2C and C2R transforms on `dev`
/// (asked of transforms of the same shapes).
fn generated_real_transforms(dev: &lf::Device, n: usize) -> (bool, bool) {
    let fwd = lf::fft::rfft2(&Array::zeros_on(&[n, n], lf::DType::F32, dev));
    let inv = lf::fft::irfft2(&Array::zeros_on(&[n, n / 2 + 1], lf::DType::C64, dev));
    let runs = |a: &Array| lf::debug::fft_runs_generated(a).unwrap();
    (runs(&fwd), runs(&inv))
}

/// The shape and dtype of each array (checked before values).
fn shapes_and_dtypes(arrays: &[Array]) -> Vec<(Vec<usize>, DType)> {
    arrays
        .iter()
        .map(|a| (a.shape().to_vec(), a.dtype()))
        .collect()
}

/// Whether the step replays a CUDA graph once recorded (generated passes with kernels
/// fused in included: each pass is a kernel node).
fn replays(dev: &lf::Device) -> bool {
    dev.is_cuda() && graphs_on()
}

/// One step of the simulation, lazily.
fn step(u: &Array, mult: &Array, dt: f64) -> Array {
    let v = u + (u - u * u * u) * dt;
    lf::fft::ifft2(&(lf::fft::fft2(&v) * mult)).real()
}

/// The oracle: `steps` steps in f64 with rustfft (2-D FFT as row then column passes).
fn oracle(u0: &[f32], n: usize, dts: &[f64]) -> Vec<f64> {
    let mut planner = rustfft::FftPlanner::<f64>::new();
    let fwd = planner.plan_fft_forward(n);
    let inv = planner.plan_fft_inverse(n);
    let fft2 = |x: &mut Vec<Complex64>, f: &dyn rustfft::Fft<f64>| {
        for row in x.chunks_mut(n) {
            f.process(row);
        }
        let mut col = vec![Complex64::default(); n];
        for j in 0..n {
            for i in 0..n {
                col[i] = x[i * n + j];
            }
            f.process(&mut col);
            for i in 0..n {
                x[i * n + j] = col[i];
            }
        }
    };
    let mut u: Vec<f64> = u0.iter().map(|&v| v as f64).collect();
    for &dt in dts {
        let m = multiplier(n, 0.1);
        let mut c: Vec<Complex64> = u
            .iter()
            .map(|&x| Complex64::new(x + dt * (x - x * x * x), 0.0))
            .collect();
        fft2(&mut c, fwd.as_ref());
        for (z, m) in c.iter_mut().zip(&m) {
            *z *= m;
        }
        fft2(&mut c, inv.as_ref());
        u = c.iter().map(|z| z.re / (n * n) as f64).collect();
    }
    u
}

fn setup(dev: &Device, n: usize) -> (Array, Array, Vec<f32>) {
    let u0 = field(n, 7);
    let m: Vec<f32> = multiplier(n, 0.1).iter().map(|&v| v as f32).collect();
    let u = Array::from_vec_on(u0.clone(), &[n, n], dev).unwrap();
    let mult = Array::from_vec_on(m, &[n, n], dev).unwrap();
    (u, mult, u0)
}

fn check_close(got: &Array, want: &[f64], n: usize, tol: f64) {
    assert_eq!(got.shape(), &[n, n]);
    assert_eq!(got.dtype(), DType::F32);
    let v = got.to_vec::<f32>().unwrap();
    let worst = v
        .iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - w).abs())
        .fold(0.0, f64::max);
    assert!(worst <= tol, "max abs error {worst:e} > {tol:e}");
}

/// Bytes of live buffers on `dev`'s side.
fn live(dev: &Device) -> u64 {
    let m = lf::memory_stats();
    if dev.is_cuda() {
        m.device_bytes_live
    } else {
        m.host_bytes_live
    }
}

fn peak(dev: &Device) -> u64 {
    let m = lf::memory_stats();
    if dev.is_cuda() {
        m.device_bytes_peak
    } else {
        m.host_bytes_peak
    }
}

device_test!(eval_loop_matches_the_oracle);
fn eval_loop_matches_the_oracle(dev: &Device) {
    let _l = lock();
    let n = 32;
    let (mut u, mult, u0) = setup(dev, n);
    let dts: Vec<f64> = (0..6).map(|i| 0.1 + 0.01 * i as f64).collect();
    for &dt in &dts {
        u = step(&u, &mult, dt);
        u.eval().unwrap();
    }
    check_close(&u, &oracle(&u0, n, &dts), n, 2e-5);
}

device_test!(eval_loop_plans_once_compiles_once_and_stays_flat);
fn eval_loop_plans_once_compiles_once_and_stays_flat(dev: &Device) {
    let _l = lock();
    let n = 64;
    let (mut u, mult, _) = setup(dev, n);
    // warm-up: plan, compile, first allocations of every size. The first step has a
    // plan of its own (its input is a leaf, later ones an evaluated step); with the
    // real-FFT plan on CUDA the later plan's two result sets are recorded on their
    // first replays (its second and third runs).
    for i in 0..4 {
        u = step(&u, &mult, 0.1 + 1e-3 * i as f64);
        u.eval().unwrap();
    }
    dev.synchronize().unwrap();
    let live0 = live(dev);
    lf::reset_stats();
    u = step(&u, &mult, 0.2);
    u.eval().unwrap();
    dev.synchronize().unwrap();
    let peak1 = peak(dev);
    let pool1 = dev.pool_usage().unwrap();
    let total = steps();
    for i in 1..total {
        // dt and t change every step: they are kernel arguments, not constants
        let dt = 0.1 + 1e-4 * (i % 17) as f64;
        u = step(&u, &mult, dt);
        u.eval().unwrap();
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    assert_eq!(s.evals, total as u64);
    assert_eq!(s.plans, 0, "the step was planned again");
    assert_eq!(s.plan_cache_hits, total as u64);
    assert_eq!(s.kernels_compiled, 0, "a kernel was compiled again");
    assert_eq!(s.disk_cache_hits, 0);
    // complex transforms (the default for small transforms on CUDA): 3 kernels, 2 FFTs
    // per step; the real-FFT plan: the step kernel, R2C, the Hermitian half spectrum
    // times the multiplier (one kernel), C2R
    assert_eq!(s.kernels_launched, kernels_per_step(dev, n) * total as u64);
    assert_eq!(s.library_calls, ffts_per_step(dev, n) * total as u64);
    if replays(dev) {
        // recorded during the warm-up; every measured step is one graph launch
        assert_eq!(s.graph_captures, 0);
        assert_eq!(s.graph_launches, total as u64);
        assert_eq!(s.graph_fallbacks, 0);
    } else {
        assert_eq!(s.graph_launches, 0);
    }
    assert_eq!(live(dev), live0, "memory held after the loop differs");
    assert_eq!(peak(dev), peak1, "the high-water mark grew after one step");
    // the CUDA pool: what the arrays hold now is what they held after one step, and
    // the pool took no more memory from the driver
    let pool = dev.pool_usage().unwrap();
    assert_eq!(pool.is_some(), dev.is_cuda());
    if let (Some((used1, reserved1)), Some((used, reserved))) = (pool1, pool) {
        assert_eq!(used, used1, "pool bytes in use grew");
        assert!(
            reserved <= reserved1,
            "pool reserve grew: {reserved1} -> {reserved}"
        );
    }
    println!(
        "{dev}: {total} steps: plans {}, kernels compiled {}, kernels launched {}, \
             library calls {}, graph launches {}, graph fallbacks {}, live bytes {} -> {}, \
             peak {} -> {}, pool (used, reserved) {:?} -> {:?}",
        s.plans,
        s.kernels_compiled,
        s.kernels_launched,
        s.library_calls,
        s.graph_launches,
        s.graph_fallbacks,
        live0,
        live(dev),
        peak1,
        peak(dev),
        pool1,
        pool
    );
    let v = u.to_vec::<f32>().unwrap();
    assert!(v.iter().all(|x| x.is_finite()));
}

device_test!(eval_writes_in_place_when_it_owns_the_input);
fn eval_writes_in_place_when_it_owns_the_input(dev: &Device) {
    let _l = lock();
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let mut u = Array::from_vec_on(x.clone(), &[10, 100], dev).unwrap();
    lf::reset_stats();
    let live0 = live(dev);
    for _ in 0..5 {
        u = &u * 2.0 + 1.0; // the old `u` is dropped here: only the new graph holds it
        u.eval().unwrap();
    }
    let s = lf::stats();
    assert_eq!(s.buffers_reused, 5);
    assert_eq!(
        live(dev),
        live0,
        "in-place steps allocate no new array memory"
    );
    assert_eq!(u.shape(), &[10, 100]);
    assert_eq!(u.dtype(), DType::F32);
    let want: Vec<f32> = x
        .iter()
        .map(|&v| (0..5).fold(v, |a, _| a * 2.0 + 1.0))
        .collect();
    assert_eq!(u.to_vec::<f32>().unwrap(), want);
}

device_test!(a_function_may_borrow_its_captures);
fn a_function_may_borrow_its_captures(dev: &Device) {
    let _l = lock();
    let mult = Array::from_vec_on(vec![2.0f32, 3.0, 4.0], &[3], dev).unwrap();
    let u = Array::from_vec_on(vec![1.0f32, 1.0, 1.0], &[3], dev).unwrap();
    // `mult` is borrowed, not moved: the function lives within this scope
    let f = lf::Function::trace(&[&u], |x| vec![&x[0] * &mult + 1.0]).unwrap();
    let v = f.call(&[&u]).unwrap().remove(0);
    assert_eq!(v.to_vec::<f32>().unwrap(), vec![3.0, 4.0, 5.0]);
    // a new shape traces again through the same borrowed closure
    let w = Array::from_vec_on(vec![0.5f32; 6], &[2, 3], dev).unwrap();
    let r = f.call(&[&w]).unwrap().remove(0);
    assert_eq!(r.shape(), &[2, 3]);
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        vec![2.0, 2.5, 3.0, 2.0, 2.5, 3.0]
    );
    drop(f);
    assert_eq!(mult.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
}

device_test!(compound_assignment_and_updates_reuse_the_only_handle);
fn compound_assignment_and_updates_reuse_the_only_handle(dev: &Device) {
    let _l = lock();
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.25).collect();
    let mut u = Array::from_vec_on(x.clone(), &[10, 100], dev).unwrap();
    lf::reset_stats();
    for _ in 0..5 {
        u *= 2.0;
        u += 1.0;
        u = u.at(lf::s![0, ..]).set(-1.0);
        u.eval().unwrap();
    }
    assert_eq!(lf::stats().buffers_reused, 5);
    let mut want: Vec<f32> = x
        .iter()
        .map(|&v| (0..5).fold(v, |a, _| a * 2.0 + 1.0))
        .collect();
    for w in &mut want[..100] {
        *w = -1.0;
    }
    assert_eq!(u.to_vec::<f32>().unwrap(), want);
}

device_test!(a_second_handle_prevents_reuse);
fn a_second_handle_prevents_reuse(dev: &Device) {
    let _l = lock();
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let u = Array::from_vec_on(x.clone(), &[256], dev).unwrap();
    let keep = u.clone();
    lf::reset_stats();
    let u = &u * 3.0;
    u.eval().unwrap();
    assert_eq!(lf::stats().buffers_reused, 0);
    assert_eq!(keep.to_vec::<f32>().unwrap(), x, "the kept handle changed");
    let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
    assert_eq!(u.to_vec::<f32>().unwrap(), want);
}

device_test!(a_lazy_consumer_outside_the_eval_prevents_reuse);
fn a_lazy_consumer_outside_the_eval_prevents_reuse(dev: &Device) {
    let _l = lock();
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let u = Array::from_vec_on(x.clone(), &[64], dev).unwrap();
    let later = &u + 100.0; // lazy, not part of the next eval
    lf::reset_stats();
    let u = &u - 1.0;
    u.eval().unwrap();
    assert_eq!(lf::stats().buffers_reused, 0);
    let want: Vec<f32> = x.iter().map(|v| v + 100.0).collect();
    assert_eq!(later.to_vec::<f32>().unwrap(), want);
    // and a lazy intermediate the user keeps (fused into the eval) prevents it too
    let w = Array::from_vec_on(x.clone(), &[64], dev).unwrap();
    let mid = &w * 2.0;
    drop(w);
    let out = &mid + 1.0;
    out.eval().unwrap();
    assert_eq!(lf::stats().buffers_reused, 0);
    let want: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    assert_eq!(mid.to_vec::<f32>().unwrap(), want);
}

device_test!(shifted_reads_prevent_reuse);
fn shifted_reads_prevent_reuse(dev: &Device) {
    let _l = lock();
    let n = 16;
    let x: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
    let host = ndarray::Array2::from_shape_vec((n, n), x.clone()).unwrap();
    lf::reset_stats();
    // roll
    let u = Array::from_vec_on(x.clone(), &[n, n], dev).unwrap();
    let u = u.roll(1, 0) + 1.0;
    u.eval().unwrap();
    // flip
    let v = Array::from_vec_on(x.clone(), &[n, n], dev).unwrap();
    let v = v.flip(1) * 2.0;
    v.eval().unwrap();
    // transpose (same size and dtype, different index)
    let w = Array::from_vec_on(x.clone(), &[n, n], dev).unwrap();
    let w = w.transpose() - 1.0;
    w.eval().unwrap();
    assert_eq!(lf::stats().buffers_reused, 0);
    let get = |a: &Array| a.to_host::<f32>().unwrap();
    let mut rolled = host.clone();
    for i in 0..n {
        for j in 0..n {
            rolled[[(i + 1) % n, j]] = host[[i, j]];
        }
    }
    assert_eq!(get(&u), (rolled + 1.0).into_dyn());
    let flipped = host.slice(ndarray::s![.., ..;-1]).to_owned();
    assert_eq!(get(&v), (flipped * 2.0).into_dyn());
    assert_eq!(get(&w), (host.t().to_owned() - 1.0).into_dyn());
}

device_test!(same_index_reads_of_the_owned_input_reuse_it);
fn same_index_reads_of_the_owned_input_reuse_it(dev: &Device) {
    let _l = lock();
    // several reads at the output's index, a broadcast operand, a dtype-preserving chain
    let n = 300;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 150.0) * 0.01).collect();
    let b = Array::from_vec_on(vec![0.5f32, -0.25], &[2, 1], dev).unwrap();
    let mut u = Array::from_vec_on(
        x.iter().chain(&x).copied().collect::<Vec<_>>(),
        &[2, n],
        dev,
    )
    .unwrap();
    lf::reset_stats();
    u = &u * &u - &u * &b + u.sin();
    u.eval().unwrap();
    assert_eq!(lf::stats().buffers_reused, 1);
    let got = u.to_vec::<f32>().unwrap();
    for (r, bv) in [0.5f32, -0.25].iter().enumerate() {
        for (i, &v) in x.iter().enumerate() {
            let want = v * v - v * bv + v.sin();
            let g = got[r * n + i];
            assert!(
                (g - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{g} vs {want}"
            );
        }
    }
}

device_test!(function_matches_the_eval_loop_and_replays);
fn function_matches_the_eval_loop_and_replays(dev: &Device) {
    let _l = lock();
    let n = 64;
    let (u, mult, _) = setup(dev, n);
    let dt = 0.1;
    let m = mult.clone();
    let f = lf::Function::trace(&[&u], move |x| vec![step(&x[0], &m, dt)]).unwrap();
    let total = steps();
    // the reference: plain evals
    let mut r = u.clone();
    for _ in 0..total.min(20) {
        r = step(&r, &mult, dt);
        r.eval().unwrap();
    }
    let mut v = u.clone();
    lf::reset_stats();
    v = f.call(&[&v]).unwrap().remove(0); // first call: plain launches
    v = f.call(&[&v]).unwrap().remove(0); // second: recorded (CUDA), arena kept
    dev.synchronize().unwrap();
    let live1 = live(dev);
    for _ in 2..total {
        v = f.call(&[&v]).unwrap().remove(0);
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    assert_eq!(s.plans, 0, "calls never plan");
    assert_eq!(s.plan_cache_hits, 0, "calls never look up plans");
    assert_eq!(
        s.kernels_compiled, 0,
        "the trace's kernels were compiled once"
    );
    assert_eq!(s.evals, total as u64);
    assert_eq!(live(dev), live1, "memory held after the calls differs");
    if replays(dev) {
        // one recording; with the real-FFT plan the C2R writes the result, into one of
        // two result sets the graph owns, recorded on the second and third calls
        let recordings = if lf::real_fft_enabled_for(dev, n * n) {
            2
        } else {
            1
        };
        assert_eq!(s.graph_captures, recordings);
        assert_eq!(s.graph_launches, total as u64 - 1);
        assert_eq!(s.graph_fallbacks, 0);
        assert!(f.is_graph());
    } else {
        assert_eq!(s.graph_launches, 0);
        assert!(!f.is_graph());
    }
    assert_eq!(s.kernels_launched, kernels_per_step(dev, n) * total as u64);
    assert_eq!(s.library_calls, ffts_per_step(dev, n) * total as u64);
    assert_eq!(v.shape(), &[n, n]);
    assert_eq!(v.dtype(), DType::F32);
    // same plan, same kernels: the first 20 steps agree exactly
    let mut w = u.clone();
    for _ in 0..total.min(20) {
        w = f.call(&[&w]).unwrap().remove(0);
    }
    assert_eq!(w.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
    assert!(v.to_vec::<f32>().unwrap().iter().all(|x| x.is_finite()));
}

device_test!(both_fft_plans_of_the_step_match_the_oracle_when_replayed);
/// The step with either FFT plan (complex transforms, or R2C plus the C2R of the Hermitian
/// half spectrum, which on CUDA runs in place on its dead intermediate input once the step
/// is recorded as a graph) matches the oracle, called as a traced function and as an eval
/// loop, over enough calls to record and replay.
fn both_fft_plans_of_the_step_match_the_oracle_when_replayed(dev: &Device) {
    let _l = lock();
    let n = 48;
    let before = lf::real_fft_mode();
    for real in [false, true] {
        lf::set_real_fft(real);
        let (u, mult, u0) = setup(dev, n);
        let dts = vec![0.1; 6];
        let want = oracle(&u0, n, &dts);
        let m = mult.clone();
        let f = lf::Function::trace(&[&u], move |x| vec![step(&x[0], &m, 0.1)]).unwrap();
        let mut v = u.clone();
        for (i, _) in dts.iter().enumerate() {
            if i == 3 {
                lf::reset_stats();
            }
            v = f.call(&[&v]).unwrap().remove(0);
        }
        // the last three calls: 2 kernels per step with the real plan (no copy of the
        // C2R result, also in a CUDA graph), 3 with complex transforms
        let per_call = kernels_per_step(dev, n);
        assert_eq!(
            lf::stats().kernels_launched,
            3 * per_call,
            "real plan {real}"
        );
        check_close(&v, &want, n, 2e-5);
        let mut w = u.clone();
        for &dt in &dts {
            w = step(&w, &mult, dt);
            w.eval().unwrap();
        }
        check_close(&w, &want, n, 2e-5);
        if replays(dev) {
            assert!(f.is_graph(), "real plan {real}: the step replays a graph");
        }
    }
    lf::set_real_fft_mode(before);
}

device_test!(function_takes_changing_scalars_as_inputs);
fn function_takes_changing_scalars_as_inputs(dev: &Device) {
    let _l = lock();
    let n = 32;
    let (u, mult, u0) = setup(dev, n);
    let dt0 = Array::from_vec_on(vec![0.1f32], &[1], dev).unwrap();
    let m = mult.clone();
    let f = lf::Function::trace(&[&u, &dt0], move |x| {
        let (u, dt) = (&x[0], &x[1]);
        let v = u + (u - u * u * u) * dt;
        vec![lf::fft::ifft2(&(lf::fft::fft2(&v) * &m)).real()]
    })
    .unwrap();
    let dts: Vec<f64> = (0..5).map(|i| 0.1 + 0.02 * i as f64).collect();
    let mut v = u.clone();
    for &dt in &dts {
        let d = Array::from_vec_on(vec![dt as f32], &[1], dev).unwrap();
        v = f.call(&[&v, &d]).unwrap().remove(0);
    }
    check_close(&v, &oracle(&u0, n, &dts), n, 2e-5);
}

device_test!(function_results_are_fresh_arrays_and_inputs_survive);
fn function_results_are_fresh_arrays_and_inputs_survive(dev: &Device) {
    let _l = lock();
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let a = Array::from_vec_on(x.clone(), &[100], dev).unwrap();
    let f = lf::Function::trace(&[&a], |x| vec![&x[0] * 2.0, x[0].clone(), &x[0] + 1.0]).unwrap();
    let mut outs = Vec::new();
    for _ in 0..4 {
        outs.push(f.call(&[&a]).unwrap());
    }
    assert_eq!(a.to_vec::<f32>().unwrap(), x, "the input was overwritten");
    for o in &outs {
        assert_eq!(o.len(), 3);
        let twice: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
        let plus: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
        assert_eq!(o[0].to_vec::<f32>().unwrap(), twice);
        assert_eq!(o[1].to_vec::<f32>().unwrap(), x);
        assert_eq!(o[2].to_vec::<f32>().unwrap(), plus);
    }
}

/// `exp(x) + 1` on the host, the oracle of the signature tests.
fn exp_plus_one_f32(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| v.exp() + 1.0).collect()
}

fn assert_close_f32(got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
}

device_test!(function_traces_again_for_a_new_signature);
fn function_traces_again_for_a_new_signature(dev: &Device) {
    let _l = lock();
    let x8: Vec<f32> = (0..8).map(|i| i as f32 * 0.25 - 1.0).collect();
    let a = Array::from_vec_on(x8.clone(), &[8], dev).unwrap();
    lf::reset_stats();
    let f = lf::Function::trace(&[&a], |x| vec![x[0].exp() + 1.0]).unwrap();
    assert_eq!(lf::stats().function_traces, 1);
    assert_eq!(f.signatures(), 1);
    // a new shape, then a new dtype: each traces once and gives its own results
    let x9: Vec<f32> = (0..9).map(|i| i as f32 * 0.5 - 2.0).collect();
    let square = Array::from_vec_on(x9.clone(), &[3, 3], dev).unwrap();
    let x8d: Vec<f64> = x8.iter().map(|&v| v as f64 / 3.0).collect();
    let doubles = Array::from_vec_on(x8d.clone(), &[8], dev).unwrap();
    let r = f.call(&[&square]).unwrap().remove(0);
    assert_eq!((r.shape(), r.dtype()), (&[3usize, 3][..], DType::F32));
    assert_close_f32(&r.to_vec::<f32>().unwrap(), &exp_plus_one_f32(&x9), 1e-6);
    let r = f.call(&[&doubles]).unwrap().remove(0);
    assert_eq!((r.shape(), r.dtype()), (&[8usize][..], DType::F64));
    for (g, v) in r.to_vec::<f64>().unwrap().iter().zip(&x8d) {
        let w = v.exp() + 1.0;
        assert!((g - w).abs() <= 1e-14 * w, "{g} vs {w}");
    }
    assert_eq!(lf::stats().function_traces, 3);
    assert_eq!(f.signatures(), 3);
    // every signature seen keeps its plan: no trace, no planning
    lf::reset_stats();
    for _ in 0..2 {
        for x in [&a, &square, &doubles] {
            let r = f.call(&[x]).unwrap().remove(0);
            assert_eq!((r.shape(), r.dtype()), (x.shape(), x.dtype()));
        }
    }
    let s = lf::stats();
    assert_eq!((s.function_traces, s.plans, s.plan_cache_hits), (0, 0, 0));
    let r = f.call(&[&a]).unwrap().remove(0);
    assert_close_f32(&r.to_vec::<f32>().unwrap(), &exp_plus_one_f32(&x8), 1e-6);
    // the number of inputs is fixed by the closure
    assert!(matches!(f.call(&[]), Err(lf::Error::Shape { .. })));
    assert!(matches!(f.call(&[&a, &a]), Err(lf::Error::Shape { .. })));
    assert!(matches!(
        f.call_owned(vec![a.clone(), a.clone()]),
        Err(lf::Error::Shape { .. })
    ));
}

device_test!(function_keeps_the_most_recent_signatures);
fn function_keeps_the_most_recent_signatures(dev: &Device) {
    let _l = lock();
    let first = Array::from_vec_on(vec![0.5f32], &[1], dev).unwrap();
    let f = lf::Function::trace(&[&first], |x| vec![&x[0] * 3.0 - 1.0]).unwrap();
    lf::reset_stats();
    for n in 2..=20usize {
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let a = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
        let r = f.call(&[&a]).unwrap().remove(0);
        assert_eq!((r.shape(), r.dtype()), (&[n][..], DType::F32));
        let want: Vec<f32> = x.iter().map(|v| v * 3.0 - 1.0).collect();
        assert_eq!(r.to_vec::<f32>().unwrap(), want);
    }
    assert_eq!(lf::stats().function_traces, 19);
    assert_eq!(f.signatures(), 16, "a bounded number of plans is kept");
    // the oldest signature was dropped: calling it traces again
    let r = f.call(&[&first]).unwrap().remove(0);
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![0.5f32]);
    assert_eq!(lf::stats().function_traces, 20);
    assert_eq!(f.signatures(), 16);
}

device_test!(call_owned_writes_into_inputs_it_holds_the_last_handle_to);
fn call_owned_writes_into_inputs_it_holds_the_last_handle_to(dev: &Device) {
    let _l = lock();
    let n = 1000;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.01 - 3.0).collect();
    let u0 = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    // fused (one kernel reading the input once), whatever LAZYFUSE_NOFUSE says
    let f = lf::with_fusion(true, || {
        lf::Function::trace(&[&u0], |x| vec![&x[0] * 0.5 + x[0].sin()])
    })
    .unwrap();
    drop(u0);
    let calls = 6;
    let mut want = x.clone();
    for _ in 0..calls {
        want = want.iter().map(|v| v * 0.5 + v.sin()).collect();
    }
    let mut u = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    dev.synchronize().unwrap();
    lf::reset_stats();
    for _ in 0..calls {
        u = f.call_owned(vec![u]).unwrap().remove(0);
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    assert_eq!(s.function_traces, 0);
    // one kernel: plain launches (also on CUDA), each into the consumed input
    assert_eq!(
        s.buffers_reused, calls as u64,
        "every call consumed its input"
    );
    assert_eq!(s.graph_launches, 0);
    assert_eq!((u.shape(), u.dtype()), (&[n][..], DType::F64));
    for (i, (g, w)) in u.to_vec::<f64>().unwrap().iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{i}: {g} vs {w}");
    }
    // an input with another handle, or passed twice, is never overwritten
    let held = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    lf::reset_stats();
    let r = f.call_owned(vec![held.clone()]).unwrap().remove(0);
    let g = lf::Function::trace(&[&held, &held], |x| vec![&x[0] * 2.0 + &x[1]]).unwrap();
    let twice = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    let r2 = g.call_owned(vec![twice.clone(), twice]).unwrap().remove(0);
    assert_eq!(lf::stats().buffers_reused, 0);
    assert_eq!(
        held.to_vec::<f64>().unwrap(),
        x,
        "a held input was overwritten"
    );
    let once: Vec<f64> = x.iter().map(|v| v * 0.5 + v.sin()).collect();
    for (g, w) in r.to_vec::<f64>().unwrap().iter().zip(&once) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} vs {w}");
    }
    let thrice: Vec<f64> = x.iter().map(|v| v * 3.0).collect();
    assert_eq!(r2.to_vec::<f64>().unwrap(), thrice);
}

device_test!(call_owned_of_a_multi_step_plan_matches_call);
fn call_owned_of_a_multi_step_plan_matches_call(dev: &Device) {
    let _l = lock();
    let n = 256;
    // complex input: the first kernel's result (x * 2 + 1, the FFT's operand) has the
    // input's dtype, so it may take the input's buffer
    let x: Vec<lf::c64> = (0..n)
        .map(|i| lf::c64::new((i as f64 * 0.1).cos(), (i as f64 * 0.3).sin()))
        .collect();
    let f = lf::Function::trace(&[&Array::from_vec_on(x.clone(), &[n], dev).unwrap()], |x| {
        vec![lf::fft::fft(&(&x[0] * 2.0 + 1.0), -1) * (1.0 / 256.0)]
    })
    .unwrap();
    let calls = 4;
    // the reference: the same calls on inputs the caller keeps (never consumed)
    let mut want = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    for _ in 0..calls {
        want = f.call(&[&want]).unwrap().remove(0);
    }
    let want = want.to_vec::<lf::c64>().unwrap();
    let mut u = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    lf::reset_stats();
    for _ in 0..calls {
        u = f.call_owned(vec![u]).unwrap().remove(0);
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    let same_transform = lf::fft::fft(&Array::zeros_on(&[n], lf::DType::C64, dev), -1);
    if lf::debug::fft_runs_generated(&same_transform).unwrap() {
        // the first kernel runs inside the transform's first pass (`tests/fft_fused.rs`),
        // a step that replays no graph and writes no input: the values are checked below
    } else if dev.is_cuda() && graphs_on() {
        // a graph replay writes pooled buffers
        assert_eq!(s.graph_launches, calls as u64);
    } else {
        // the first kernel (x * 2 + 1) writes into the consumed input
        assert_eq!(s.buffers_reused, calls as u64);
    }
    assert_eq!((u.shape(), u.dtype()), (&[n][..], DType::C128));
    assert_eq!(s.function_traces, 0, "one signature");
    assert_eq!(u.to_vec::<lf::c64>().unwrap(), want);
}

device_test!(a_multi_output_kernel_reuses_its_owned_input_once);
fn a_multi_output_kernel_reuses_its_owned_input_once(dev: &Device) {
    let _l = lock();
    let x: Vec<f64> = (0..500).map(|i| i as f64 * 0.25).collect();
    let u = Array::from_vec_on(x.clone(), &[500], dev).unwrap();
    let a = &u * 2.0;
    let b = u.sqrt() + &u;
    drop(u);
    lf::reset_stats();
    lf::eval(&[&a, &b]).unwrap();
    let s = lf::stats();
    assert_eq!(s.kernels_launched, 1, "one multi-output kernel");
    assert_eq!(s.buffers_reused, 1);
    assert_eq!((a.shape(), a.dtype()), (&[500usize][..], DType::F64));
    let wa: Vec<f64> = x.iter().map(|v| v * 2.0).collect();
    let wb: Vec<f64> = x.iter().map(|v| v.sqrt() + v).collect();
    assert_eq!(a.to_vec::<f64>().unwrap(), wa);
    assert_eq!(b.to_vec::<f64>().unwrap(), wb);
}

device_test!(a_one_off_plan_keeps_only_its_result);
fn a_one_off_plan_keeps_only_its_result(dev: &Device) {
    let _l = lock();
    let n = 32;
    let (u, mult, _) = setup(dev, n);
    // the first steps create what lives as long as the plan: cuFFT plans for this
    // layout and, on CUDA, the recorded graph with its arena of intermediates (a
    // plan is recorded on its second run, a plan of one step, such as one round trip
    // of generated passes, after a plain run: on its third); later steps keep only
    // their result
    for _ in 0..3 {
        step(&u, &mult, 0.1).eval().unwrap();
    }
    dev.synchronize().unwrap();
    let live0 = live(dev);
    let r = step(&u, &mult, 0.1);
    r.eval().unwrap();
    dev.synchronize().unwrap();
    // a fresh result, or (the real-FFT plan in a CUDA graph: the C2R writes the result)
    // one of the result buffers the graph owns, allocated by the first steps
    let owned = dev.is_cuda() && graphs_on() && lf::real_fft_enabled_for(dev, n * n);
    let fresh = if owned { 0 } else { (n * n * 4) as u64 };
    assert_eq!(live(dev), live0 + fresh, "intermediates outlived the eval");
    drop(r);
    assert_eq!(live(dev), live0);
}

device_test!(function_never_overwrites_its_inputs_or_captures);
fn function_never_overwrites_its_inputs_or_captures(dev: &Device) {
    let _l = lock();
    let x: Vec<f32> = (0..128).map(|i| i as f32).collect();
    let c = Array::from_vec_on(vec![0.5f32; 128], &[128], dev).unwrap();
    let a = Array::from_vec_on(x.clone(), &[128], dev).unwrap();
    // both the input and the capture are read at the index the kernel writes
    let cc = c.clone();
    let f = lf::Function::trace(&[&a], move |i| vec![&i[0] + &cc]).unwrap();
    lf::reset_stats();
    let mut v = a.clone();
    for _ in 0..4 {
        v = f.call(&[&v]).unwrap().remove(0);
    }
    assert_eq!(lf::stats().buffers_reused, 0);
    assert_eq!(a.to_vec::<f32>().unwrap(), x);
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![0.5f32; 128]);
    let want: Vec<f32> = x.iter().map(|v| v + 2.0).collect();
    assert_eq!(v.to_vec::<f32>().unwrap(), want);
    // and a second function over the same captured array still sees it intact
    let cc = c.clone();
    let g = lf::Function::trace(&[&a], move |i| vec![&i[0] * &cc]).unwrap();
    let w = g.call(&[&a]).unwrap().remove(0);
    let want: Vec<f32> = x.iter().map(|v| v * 0.5).collect();
    assert_eq!(w.to_vec::<f32>().unwrap(), want);
}

device_test!(recorded_ffts_survive_plan_cache_eviction);
/// A traced function whose FFT plan the plan cache evicts meanwhile (more transform shapes
/// planned than the cache holds) still replays its recorded graph, with the same results:
/// the recorded graph keeps the plans its FFT nodes run.
fn recorded_ffts_survive_plan_cache_eviction(dev: &Device) {
    let _l = lock();
    let n = 48;
    let u = Array::from_vec_on(field(n, 5), &[n, n], dev).unwrap();
    let f =
        lf::Function::trace(&[&u], |x| vec![lf::fft::fft2(&(&x[0] * 2.0)).abs() + 1.0]).unwrap();
    let call = || f.call(&[&u]).unwrap().remove(0).to_vec::<f32>().unwrap();
    let first = call();
    assert_eq!(first.len(), n * n);
    assert!(first.iter().all(|v| v.is_finite() && *v >= 1.0));
    assert_eq!(call(), first, "second call (recorded)");
    assert_eq!(call(), first, "third call (replayed)");
    // 80 other lengths: more plans than the cache keeps (64), the oldest evicted
    for m in 2..82 {
        let x = Array::full_on(&[3, m], 1.0, DType::F32, dev) * 1.5;
        let y = lf::fft::fft(&x, -1).abs();
        let v = y.to_vec::<f32>().unwrap();
        // the spectrum of a constant: 1.5 m at frequency 0, zero elsewhere
        assert!(
            (v[0] - 1.5 * m as f32).abs() <= 1e-3 * m as f32,
            "fft of length {m}"
        );
    }
    for k in 0..3 {
        assert_eq!(call(), first, "call {k} after the evictions");
    }
    // a prime length far larger than the recorded transform's: cuFFT's work area for
    // it replaces the device's smaller one, which the recorded graph keeps using
    let m = 65537;
    let x = Array::full_on(&[m], 1.0, DType::F32, dev) * 0.5;
    let v = lf::fft::fft(&x, -1).abs().to_vec::<f32>().unwrap();
    assert_eq!(v.len(), m);
    assert!((v[0] - 0.5 * m as f32).abs() <= 1e-3 * m as f32, "{}", v[0]);
    assert!(
        v[1..].iter().all(|&z| z <= 1e-4 * m as f32),
        "the spectrum of a constant"
    );
    assert_eq!(call(), first, "call after a larger work area");
}

device_test!(a_function_computes_what_depends_only_on_captures_once);
/// What depends on captured arrays alone is computed once, at trace time: a call of
/// `x * sum(exp(c)) + c * flip(c)` (`c` captured, 783 elements) launches one kernel, not the
/// reduction and the product again, and matches the host. The eval of the same expression
/// runs both kernels every time.
fn a_function_computes_what_depends_only_on_captures_once(dev: &Device) {
    let _l = lock();
    let n = 783;
    let cv: Vec<f32> = (0..n)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5)
        .collect();
    let xv: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.25).collect();
    let c = Array::from_vec_on(cv.clone(), &[n], dev).unwrap();
    let x = Array::from_vec_on(xv.clone(), &[n], dev).unwrap();
    let body = |x: &Array, c: &Array| x * &c.exp().sum() + c * &c.flip(0);
    let total: f64 = cv.iter().map(|&v| (v as f64).exp()).sum();
    let want: Vec<f32> = (0..n)
        .map(|i| (xv[i] as f64 * total + cv[i] as f64 * cv[n - 1 - i] as f64) as f32)
        .collect();
    lf::reset_stats();
    let eval = body(&x, &c);
    eval.eval().unwrap();
    let per_eval = lf::stats().kernels_launched;
    assert_eq!(
        per_eval, 2,
        "the eval: the reduction, then the elementwise kernel"
    );
    assert_close_f32(&eval.to_vec::<f32>().unwrap(), &want, 1e-5);
    let cc = c.clone();
    let f = lf::Function::trace(&[&x], move |a| vec![body(&a[0], &cc)]).unwrap();
    for _ in 0..3 {
        let before = lf::stats().kernels_launched;
        let y = f.call(&[&x]).unwrap().remove(0);
        let got = y.to_vec::<f32>().unwrap();
        assert_eq!(
            lf::stats().kernels_launched - before,
            1,
            "one kernel per call"
        );
        assert_eq!((y.shape(), y.dtype()), (&[n][..], DType::F32));
        assert_close_f32(&got, &want, 1e-5);
    }
}

device_test!(traced_reductions_replay_a_graph);
/// A traced step of reductions replays one recorded CUDA graph from its second call, with
/// each call's inputs, and matches the host: a full sum of squares of 2^20 + 1 values
/// (split over many blocks, with partials and counters the graph keeps), the argmax of
/// those values (partial positions too), row maxima and column means of a 783 x 3 matrix
/// (one chunk each), and the maximum as a 0-d array read by a later kernel (a reshape of
/// the reduction's output inside the graph). Cumulative sums (scans, whose tile states a
/// memset node zeroes before each launch) replay too.
fn traced_reductions_replay_a_graph(dev: &Device) {
    let _l = lock();
    let n = (1 << 20) + 1;
    let (rows, cols) = (783, 3);
    let inputs = |k: u64| {
        let mut xv: Vec<f32> = common::uniform(n, 11 + k, -1.0, 1.0)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let peak = (k as usize * 100_003 + 7) % n;
        xv[peak] = 3.0;
        let mv = common::uniform(rows * cols, 29 + k, -5.0, 5.0);
        let x = Array::from_vec_on(xv.clone(), &[n], dev).unwrap();
        let m = Array::from_vec_on(mv.clone(), &[rows, cols], dev).unwrap();
        (x, m, xv, peak, mv)
    };
    let (x0, m0, ..) = inputs(0);
    let f = lf::Function::trace(&[&x0, &m0], |a| {
        vec![
            (&a[0] * &a[0]).sum(),
            a[0].argmax(0),
            a[1].max_axes(&[1], false),
            (&a[1] * 2.0).mean_axes(&[0], false),
            // a 0-d reduction (a reshape of its one-element output) read by a kernel
            &a[1] / &a[0].max(),
        ]
    })
    .unwrap();
    let calls = 5;
    for k in 0..calls {
        if k == 2 {
            // recorded by now (on CUDA: a plain first call, a recording second call)
            dev.synchronize().unwrap();
            lf::reset_stats();
        }
        let (x, m, xv, peak, mv) = inputs(k);
        let out = f.call(&[&x, &m]).unwrap();
        drop((x, m));
        let meta = shapes_and_dtypes(&out);
        assert_eq!(
            meta,
            [
                (vec![], DType::F32),
                (vec![], DType::I64),
                (vec![rows], DType::F64),
                (vec![cols], DType::F64),
                (vec![rows, cols], DType::F64),
            ],
            "call {k}"
        );
        let sumsq: f64 = xv.iter().map(|&v| v as f64 * v as f64).sum();
        let got = out[0].item::<f32>().unwrap() as f64;
        assert!(
            (got - sumsq).abs() <= 1e-4 * sumsq,
            "call {k}: sum of squares {got} vs {sumsq}"
        );
        assert_eq!(out[1].item::<i64>().unwrap(), peak as i64, "call {k}");
        let rmax: Vec<f64> = mv
            .chunks(cols)
            .map(|r| r.iter().copied().fold(f64::NEG_INFINITY, f64::max))
            .collect();
        assert_eq!(
            out[2].to_vec::<f64>().unwrap(),
            rmax,
            "call {k}: row maxima"
        );
        let cmean = out[3].to_vec::<f64>().unwrap();
        for (j, g) in cmean.iter().enumerate() {
            let w = (0..rows).map(|i| 2.0 * mv[i * cols + j]).sum::<f64>() / rows as f64;
            assert!(
                (g - w).abs() <= 1e-12,
                "call {k}: column mean {j}: {g} vs {w}"
            );
        }
        let scaled = out[4].to_vec::<f64>().unwrap();
        let want: Vec<f64> = mv.iter().map(|v| v / 3.0).collect();
        assert_eq!(scaled, want, "call {k}: divided by the maximum, 3");
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    assert_eq!((s.plans, s.kernels_compiled), (0, 0), "calls never plan");
    if dev.is_cuda() && graphs_on() {
        assert_eq!(
            (s.graph_captures, s.graph_launches, s.graph_fallbacks),
            (0, calls - 2, 0),
            "one replay per later call: {s:?}"
        );
        assert!(f.is_graph());
    } else {
        assert_eq!(s.graph_launches, 0);
        assert!(!f.is_graph());
    }
    // scans replay too (a memset node zeroes each scan's tile states before its launch):
    // two independent scans and a reduction beside them, on each call's input
    let g = lf::Function::trace(&[&m0], |a| {
        vec![a[0].cumsum(0) * 2.0, a[0].cumsum(1), a[0].sum()]
    })
    .unwrap();
    for k in 0..5 {
        let (_, m, _, _, mv) = inputs(10 + k);
        let out = g.call(&[&m]).unwrap();
        let meta = shapes_and_dtypes(&out);
        assert_eq!(
            meta,
            [
                (vec![rows, cols], DType::F64),
                (vec![rows, cols], DType::F64),
                (vec![], DType::F64),
            ],
            "scan call {k}"
        );
        let close = |e: f64, w: f64, what: String| {
            assert!(
                (e - w).abs() <= 1e-9 * w.abs().max(1.0),
                "{what}: {e} vs {w}"
            );
        };
        let (down, across) = (
            out[0].to_vec::<f64>().unwrap(),
            out[1].to_vec::<f64>().unwrap(),
        );
        let mut acc = [0.0f64; 3];
        for i in 0..rows {
            let mut row = 0.0;
            for j in 0..cols {
                acc[j] += mv[i * cols + j];
                row += mv[i * cols + j];
                let e = i * cols + j;
                close(
                    down[e],
                    2.0 * acc[j],
                    format!("call {k} cumsum(0) ({i}, {j})"),
                );
                close(across[e], row, format!("call {k} cumsum(1) ({i}, {j})"));
            }
        }
        let total: f64 = mv.iter().sum();
        close(
            out[2].item::<f64>().unwrap(),
            total,
            format!("call {k} sum"),
        );
    }
    assert_eq!(
        g.is_graph(),
        dev.is_cuda() && graphs_on(),
        "scans replay on CUDA"
    );
}

/// The 2-D DFT of a row-major `[h, w]` array (naive sums; `inverse` without the 1/n).
fn dft2(x: &[Complex64], h: usize, w: usize, inverse: bool) -> Vec<Complex64> {
    let sign = if inverse { 1.0 } else { -1.0 };
    let tau = std::f64::consts::TAU;
    let mut out = vec![Complex64::default(); h * w];
    for (k, o) in out.iter_mut().enumerate() {
        let (u, v) = (k / w, k % w);
        for (j, &xj) in x.iter().enumerate() {
            let (r, c) = (j / w, j % w);
            let turns = (u * r) as f64 / h as f64 + (v * c) as f64 / w as f64;
            *o += xj * Complex64::from_polar(1.0, sign * tau * turns);
        }
    }
    out
}

device_test!(traced_branches_follow_the_data);
fn traced_branches_follow_the_data(dev: &Device) {
    // A traced step whose recorded graph has independent branches (two reductions and an
    // inverse transform all read one spectrum) and steps that must wait for earlier readers
    // (transforms share cuFFT's work area; reductions share their counters; intermediates
    // may share arena buffers): every replay must match the host oracle.
    let _l = lock();
    let (h, w) = (6, 10);
    let inputs = |k: u64| {
        let re = common::uniform(h * w, 40 + k, -1.0, 1.0);
        let im = common::uniform(h * w, 50 + k, -1.0, 1.0);
        let wt = common::uniform(h * w, 60 + k, 0.5, 2.0);
        let arr = |v: &Vec<f64>| Array::from_vec_on(v.clone(), &[h, w], dev).unwrap();
        ((arr(&re), arr(&im), arr(&wt)), (re, im, wt))
    };
    let ((r0, i0, w0), _) = inputs(0);
    let f = lf::Function::trace(&[&r0, &i0, &w0], |a| {
        let x = lf::complex(&a[0], &a[1]);
        let spec = lf::fft::fft2(&x);
        let y = lf::fft::ifft2(&(&spec * &a[2]));
        let z = lf::fft::fft2(&(&x * 2.0 + &y)).abs();
        vec![
            spec.abs().square().sum(),
            y.real() + 1.0,
            (&spec * 3.0).real().max(),
            &z + &spec.imag(),
        ]
    })
    .unwrap();
    let calls = 5;
    for k in 0..calls {
        if k == 2 {
            dev.synchronize().unwrap();
            lf::reset_stats();
        }
        let ((r, i, wt), (rv, iv, wv)) = inputs(k);
        let out = f.call(&[&r, &i, &wt]).unwrap();
        drop((r, i, wt));
        let meta = shapes_and_dtypes(&out);
        assert_eq!(
            meta,
            [
                (vec![], DType::F64),
                (vec![h, w], DType::F64),
                (vec![], DType::F64),
                (vec![h, w], DType::F64),
            ],
            "call {k}"
        );
        let x: Vec<Complex64> = rv
            .iter()
            .zip(&iv)
            .map(|(&a, &b)| Complex64::new(a, b))
            .collect();
        let spec = dft2(&x, h, w, false);
        let weighted: Vec<Complex64> = spec.iter().zip(&wv).map(|(s, &m)| s * m).collect();
        let y: Vec<Complex64> = dft2(&weighted, h, w, true)
            .iter()
            .map(|v| v / (h * w) as f64)
            .collect();
        let x2y: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a * 2.0 + b).collect();
        let z = dft2(&x2y, h, w, false);
        let close = |got: f64, want: f64, what: &str| {
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "call {k}: {what}: {got} vs {want}"
            );
        };
        close(
            out[0].item::<f64>().unwrap(),
            spec.iter().map(|s| s.norm_sqr()).sum(),
            "sum of |X|^2",
        );
        for (j, g) in out[1].to_vec::<f64>().unwrap().iter().enumerate() {
            close(*g, y[j].re + 1.0, &format!("real(ifft2(X w)) + 1 [{j}]"));
        }
        close(
            out[2].item::<f64>().unwrap(),
            spec.iter()
                .map(|s| 3.0 * s.re)
                .fold(f64::NEG_INFINITY, f64::max),
            "max of real(3 X)",
        );
        for (j, g) in out[3].to_vec::<f64>().unwrap().iter().enumerate() {
            close(
                *g,
                z[j].norm() + spec[j].im,
                &format!("|fft2(2x + y)| + imag(X) [{j}]"),
            );
        }
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    if dev.is_cuda() && graphs_on() {
        assert_eq!(
            (s.graph_captures, s.graph_launches, s.graph_fallbacks),
            (0, calls - 2, 0),
            "one replay per later call: {s:?}"
        );
        assert!(f.is_graph());
    } else {
        assert_eq!(s.graph_launches, 0);
    }
}

device_test!(a_long_traced_body_holds_about_one_steps_memory);
fn a_long_traced_body_holds_about_one_steps_memory(dev: &Device) {
    let _l = lock();
    let n = 64;
    let (u, mult, u0) = setup(dev, n);
    let dt = 0.1;
    let backends = match dev.is_cuda() {
        true => vec![lf::FftBackend::Cufft, lf::FftBackend::Generated],
        false => vec![lf::fft_backend()],
    };
    for backend in backends {
        let before = lf::set_fft_backend(backend);
        // bytes a traced body of `len` steps holds between calls (its graph's
        // intermediates on CUDA) and at most during them, and its result after three
        // calls (3 x `len` steps)
        let held = |len: usize| {
            dev.synchronize().unwrap();
            let base = live(dev);
            lf::reset_stats();
            let m = mult.clone();
            let f = lf::Function::trace(&[&u], move |x| {
                let mut v = x[0].clone();
                for _ in 0..len {
                    v = step(&v, &m, dt);
                }
                vec![v]
            })
            .unwrap();
            let mut v = u.clone();
            for _ in 0..3 {
                v = f.call(&[&v]).unwrap().remove(0);
            }
            let out = v.to_vec::<f32>().unwrap();
            assert_eq!(v.shape(), &[n, n]);
            assert_eq!(v.dtype(), DType::F32);
            drop(v);
            dev.synchronize().unwrap();
            let held = live(dev).saturating_sub(base);
            (held, peak(dev).saturating_sub(base), out)
        };
        let (short, short_peak, _) = held(4);
        let (long, long_peak, out) = held(24);
        // a step's intermediates are a few n x n complex arrays: twenty more steps may
        // not add twenty steps' worth of them
        let array = (n * n * 8) as u64;
        assert!(
            long <= short + 4 * array,
            "{backend:?}: a 24-step body holds {long} bytes, a 4-step one {short}"
        );
        assert!(
            long_peak <= short_peak + 4 * array,
            "{backend:?}: a 24-step body peaks at {long_peak} bytes, a 4-step one at {short_peak}"
        );
        let want = oracle(&u0, n, &[dt; 72]);
        let got: Vec<f64> = out.iter().map(|&x| x as f64).collect();
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-4,
            "{backend:?}: max abs error {worst:e} after 72 steps"
        );
        lf::set_fft_backend(before);
    }
}
