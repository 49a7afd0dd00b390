//! BENCH.md workloads on the default device (fused and unfused), printed as TSV rows
//! `workload size system time_us extra`, the columns of `benches/anchors/anchor_bench.py`,
//! so that our rows and the anchors' concatenate into one table for `bench_report`.
//!
//! `cargo bench --bench workloads [-- psf chain bcast matmul latency sim sumsq mean update cumsum transfers cpulines fft1d nccl] [--quick] [--tsv PATH]`
//!
//! `--tsv PATH` also writes the rows (after a `#` line naming the device) to PATH. The
//! `extra` column of the psf, chain and sim100 fused rows holds the device time of one
//! profiled eval (`lf::profile`): kernels + library calls, and the host's planning time.

// the workload definitions shared with the examples (psf, chain)
#[path = "../examples/common/mod.rs"]
mod common;

use common::{chain, psf};
use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

/// The `--tsv` file, when given.
static TSV: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Mean seconds of one call, median over `repeats`, after `warm` calls; the device is
/// synchronized before each clock read.
fn bench(dev: &Device, iters: usize, repeats: usize, f: impl FnMut(usize)) -> f64 {
    bench_host(dev, iters, repeats, f).0
}

/// [`bench`], and the median host time per call: until the last call returned, before the
/// synchronization (close to the first figure: the host path bounds the loop).
fn bench_host(dev: &Device, iters: usize, repeats: usize, mut f: impl FnMut(usize)) -> (f64, f64) {
    for i in 0..3 {
        f(i);
    }
    dev.synchronize().expect("synchronize");
    let (mut ts, mut hs) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        hs.push(t.elapsed().as_secs_f64() / iters as f64);
        dev.synchronize().expect("synchronize");
        ts.push(t.elapsed().as_secs_f64() / iters as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    (median(&mut ts), median(&mut hs))
}

fn row(w: &str, size: impl std::fmt::Display, system: &str, sec: f64, extra: &str) {
    let line = format!("{w}\t{size}\t{system}\t{:.1} us\t{extra}", sec * 1e6);
    println!("{line}");
    if let Some(f) = TSV.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        if let Err(e) = writeln!(f, "{line}") {
            eprintln!("cannot write the TSV file: {e}");
        }
    }
}

/// "device X us (N kernels, M library), plan Y us" of one profiled call of `f`.
fn device_note(f: impl FnOnce()) -> String {
    let ((), r) = lf::profile(f);
    format!(
        "device {:.1} us ({} kernels, {} library), plan {:.1} us",
        r.compute_time().as_secs_f64() * 1e6,
        r.kernels().len(),
        r.library_calls().len(),
        r.total_time(lf::EntryKind::Plan).as_secs_f64() * 1e6
    )
}

fn system(fused: bool) -> &'static str {
    if fused {
        "lazyfuse-fused"
    } else {
        "lazyfuse-unfused"
    }
}

/// The chain evaluated op by op on ndarray: the naive baseline (and the shape of NumPy).
fn chain_naive(x: &ndarray::ArrayD<f32>, y: &ndarray::ArrayD<f32>) -> ndarray::ArrayD<f32> {
    let r = (x * x + y * y).mapv(f32::sqrt);
    let t = ndarray::Zip::from(y)
        .and(x)
        .map_collect(|&b, &a| b.atan2(a));
    let z = &r * &t.mapv(f32::cos) + &(&r * -0.5f32).mapv(f32::exp) * &t.mapv(f32::sin);
    let gt = z.mapv(|v| v > 0.0);
    let tenth = &z * 0.1f32;
    ndarray::Zip::from(&gt)
        .and(&z)
        .and(&tenth)
        .map_collect(|&c, &a, &b| if c { a } else { b })
        + 1.0f32
}

fn sizes_for(dev: &Device, quick: bool) -> Vec<usize> {
    match (dev.is_cuda(), quick) {
        (true, false) => vec![1 << 16, 1 << 20, 1 << 24, 1 << 27],
        (true, true) => vec![1 << 16, 1 << 20],
        (false, false) => vec![1 << 16, 1 << 20, 1 << 24],
        (false, true) => vec![1 << 16, 1 << 20],
    }
}

fn run_chain(dev: &Device, quick: bool) -> lf::Result<()> {
    for n in sizes_for(dev, quick) {
        let sets = if n <= 1 << 22 { 4 } else { 1 };
        let inputs: Vec<(Array, Array)> = (0..sets)
            .map(|s| {
                let x = lf::random::normal_on(&[n], DType::F32, 10 + s as u64, dev);
                let y = lf::random::normal_on(&[n], DType::F32, 20 + s as u64, dev);
                lf::eval(&[&x, &y]).map(|_| (x, y))
            })
            .collect::<lf::Result<_>>()?;
        let bytes = 3.0 * 4.0 * n as f64;
        let (iters, reps) = if n >= 1 << 24 { (5, 5) } else { (20, 7) };
        for fused in [true, false] {
            lf::set_fusion(fused);
            let t = bench(dev, iters, reps, |i| {
                let (x, y) = &inputs[i % sets];
                chain(x, y).eval().expect("eval");
            });
            let (x, y) = &inputs[0];
            let note = device_note(|| chain(x, y).eval().expect("eval"));
            let gbs = format!("{:.1} GB/s; {note}", bytes / t / 1e9);
            row("chain", n, system(fused), t, &gbs);
        }
        lf::set_fusion(true);
        if !dev.is_cuda() {
            let (x, y) = &inputs[0];
            let (xh, yh) = (x.to_host::<f32>()?, y.to_host::<f32>()?);
            let t = bench(dev, 1.max(iters / 4), 3, |_| {
                std::hint::black_box(chain_naive(&xh, &yh));
            });
            row(
                "chain",
                n,
                "naive-ndarray",
                t,
                &format!("{:.1} GB/s", bytes / t / 1e9),
            );
        }
    }
    Ok(())
}

fn run_bcast(dev: &Device) -> lf::Result<()> {
    let a = Array::arange_on(0.0, 20000.0, 1.0, DType::F64, dev).reshape(&[4000, 5]);
    let b = Array::arange_on(0.0, 2e6, 1.0, DType::F64, dev).reshape(&[100, 4000, 5]);
    lf::eval(&[&a, &b])?;
    for fused in [true, false] {
        lf::set_fusion(fused);
        let t = bench(dev, 20, 7, |_| (&a * &b).eval().expect("eval"));
        row("bcast", "100x4000x5", system(fused), t, "kernel only");
    }
    lf::set_fusion(true);
    let ah: Vec<f64> = (0..20000).map(|i| i as f64).collect();
    let bh: Vec<f64> = (0..2_000_000).map(|i| i as f64).collect();
    let t = bench(dev, 5, 5, |_| {
        let a = Array::from_slice_on(&ah, &[4000, 5], dev).expect("upload");
        let b = Array::from_slice_on(&bh, &[100, 4000, 5], dev).expect("upload");
        std::hint::black_box((&a * &b).to_vec::<f64>().expect("readback"));
    });
    row("bcast", "100x4000x5", "lazyfuse-h2d+kernel+d2h", t, "");
    Ok(())
}

fn run_matmul(dev: &Device) -> lf::Result<()> {
    let n = 1000;
    let a = lf::random::uniform_on(&[n, n], DType::F64, 1, dev);
    let b = lf::random::uniform_on(&[n, n], DType::F64, 2, dev);
    lf::eval(&[&a, &b])?;
    let iters = if dev.is_cuda() { 50 } else { 1 };
    let t = bench(dev, iters, 5, |_| a.matmul(&b).eval().expect("eval"));
    let gflops = 2.0 * (n * n * n) as f64 / t / 1e9;
    row(
        "matmul",
        "1000x1000",
        "lazyfuse",
        t,
        &format!("{gflops:.0} GFLOP/s"),
    );
    Ok(())
}

/// The 10-op expression of the latency rows.
fn ten_ops(a: &Array, b: &Array) -> Array {
    ((((a + b) * 2.0 - 1.0).sin() * b).exp() + a).sqrt().abs() * 3.0 - b
}

fn run_latency(dev: &Device) -> lf::Result<()> {
    let a = Array::from_vec_on(vec![1.5f32], &[1], dev)?;
    let b = Array::from_vec_on(vec![2.5f32], &[1], dev)?;
    let t = bench(dev, 1000, 7, |_| (&a + &b).eval().expect("eval"));
    row("latency", 1, "lazyfuse a+b (eval, async)", t, "");
    let fab = lf::Function::trace(&[&a, &b], |x| vec![&x[0] + &x[1]])?;
    let t = bench(dev, 1000, 7, |_| drop(fab.call(&[&a, &b]).expect("call")));
    row(
        "latency",
        1,
        "lazyfuse-graph a+b (Function call, async)",
        t,
        "",
    );
    // the host path alone: building the expression (hash-consed nodes), nothing evaluated
    let t = bench(dev, 1000, 7, |_| drop(ten_ops(&a, &b)));
    row("latency", 1, "lazyfuse 10-op expr (rebuild only)", t, "");
    // the expression makes 11 nodes (its 11 operations; the three constants come back from
    // the per-thread cache of recent constants)
    let per_node = t / 11.0;
    row(
        "latency",
        1,
        "lazyfuse node creation (per node)",
        per_node,
        &format!("{:.0} ns", per_node * 1e9),
    );
    // a cached 10-op expression, rebuilt every call: graph build + plan lookup + bind + launch
    let t = bench(dev, 1000, 7, |_| ten_ops(&a, &b).eval().expect("eval"));
    row("latency", 1, "lazyfuse 10-op expr (eval, async)", t, "");
    let f = lf::Function::trace(&[&a, &b], |x| vec![ten_ops(&x[0], &x[1])])?;
    let t = bench(dev, 1000, 7, |_| drop(f.call(&[&a, &b]).expect("call")));
    row(
        "latency",
        1,
        "lazyfuse-graph 10-op expr (Function call, async)",
        t,
        "",
    );
    // eval throughput of independent small expressions from several threads at once
    for threads in [1usize, 8] {
        let per = 2000;
        let t = bench(dev, 1, 5, |_| {
            std::thread::scope(|s| {
                for k in 0..threads {
                    let dev = dev.clone();
                    s.spawn(move || {
                        let x = Array::from_vec_on(vec![k as f32], &[1], &dev).expect("upload");
                        let y = Array::from_vec_on(vec![0.5f32], &[1], &dev).expect("upload");
                        for _ in 0..per {
                            ten_ops(&x, &y).eval().expect("eval");
                        }
                        dev.synchronize().expect("synchronize");
                    });
                }
            });
        });
        let evals_per_s = (threads * per) as f64 / t;
        row(
            "latency",
            1,
            &format!("lazyfuse 10-op expr, {threads} threads (per eval)"),
            t / (threads * per) as f64,
            &format!("{:.0} evals/s", evals_per_s),
        );
    }
    lf::set_fusion(false);
    let t = bench(dev, 200, 7, |_| ten_ops(&a, &b).eval().expect("eval"));
    row(
        "latency",
        1,
        "lazyfuse-unfused 10-op expr (eval, async)",
        t,
        "",
    );
    lf::set_fusion(true);
    Ok(())
}

fn run_psf(dev: &Device, quick: bool) -> lf::Result<()> {
    let sizes: &[usize] = match (dev.is_cuda(), quick) {
        (true, false) => &[128, 512, 2048],
        (false, false) => &[128, 512],
        (_, true) => &[128],
    };
    for &n in sizes {
        for fused in [true, false] {
            lf::set_fusion(fused);
            let (iters, reps) = match (n, dev.is_cuda()) {
                (2048, _) => (5, 5),
                (_, true) => (20, 7),
                (512, false) => (2, 3),
                _ => (5, 5),
            };
            let t = bench(dev, iters, reps, |_| psf(n, dev).eval().expect("eval"));
            let note = device_note(|| psf(n, dev).eval().expect("eval"));
            row("psf", n, system(fused), t, &note);
        }
        lf::set_fusion(true);
        if dev.is_cuda() {
            // the generated FFT passes, the pupil computed in the first pass's load
            // (`lf::set_fft_backend`; the row above runs cuFFT unless LAZYFUSE_FFT says
            // otherwise)
            let before = lf::set_fft_backend(lf::FftBackend::Generated);
            let (iters, reps) = if n == 2048 { (5, 5) } else { (20, 7) };
            let t = bench(dev, iters, reps, |_| psf(n, dev).eval().expect("eval"));
            let note = device_note(|| psf(n, dev).eval().expect("eval"));
            row("psf", n, "lazyfuse-generated-fft", t, &note);
            lf::set_fft_backend(before);
        }
        // traced over the pupil's coordinate vector: the whole pipeline per call, a CUDA
        // graph on a GPU; with cuFFT (or the measured choice) and, on CUDA, with the
        // generated passes and the kernels fused into them
        let backends: &[lf::FftBackend] = match dev.is_cuda() {
            true => &[lf::FftBackend::Auto, lf::FftBackend::Generated],
            false => &[lf::FftBackend::Auto],
        };
        for &b in backends {
            let before = lf::set_fft_backend(b);
            let x = Array::linspace_on(-1.0, 1.0, n, DType::F32, dev);
            x.eval()?;
            let f = lf::Function::trace(&[&x], |a| vec![common::psf_of(&a[0])])?;
            let (iters, reps) = match (n, dev.is_cuda()) {
                (2048, _) => (5, 5),
                (_, true) => (50, 7),
                (512, false) => (2, 3),
                _ => (5, 5),
            };
            let (t, host) = bench_host(dev, iters, reps, |_| drop(f.call(&[&x]).expect("call")));
            let name = match b {
                lf::FftBackend::Generated => "lazyfuse-graph-generated-fft",
                _ => "lazyfuse-graph",
            };
            let how = if f.is_graph() {
                "traced, CUDA graph"
            } else {
                "traced"
            };
            row(
                "psf",
                n,
                name,
                t,
                &format!("{how}; host {:.1} us a call", host * 1e6),
            );
            lf::set_fft_backend(before);
        }
    }
    Ok(())
}

/// Value and gradient of the PSF-fit loss (f32) against the forward pass alone: traced
/// `Function` calls of each, and the plain value-and-gradient eval.
fn run_grad(dev: &Device, quick: bool) -> lf::Result<()> {
    let sizes: &[usize] = match (dev.is_cuda(), quick) {
        (true, false) => &[128, 512],
        _ => &[128],
    };
    for &n in sizes {
        let r = n as f64 / 4.0;
        let ap: Vec<f32> = (0..n * n)
            .map(|k| {
                let (y, x) = (
                    (k / n) as f64 - n as f64 / 2.0,
                    (k % n) as f64 - n as f64 / 2.0,
                );
                if x * x + y * y <= r * r {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let aperture = Array::from_vec_on(ap, &[n, n], dev)?;
        let phase = lf::random::normal_on(&[n, n], DType::F32, 1, dev) * 0.3;
        let target = lf::random::uniform_on(&[n, n], DType::F32, 2, dev) * 1e-4;
        lf::eval(&[&phase, &target])?;
        let (ap2, tg2) = (aperture.clone(), target.clone());
        let fwd = lf::Function::trace(&[&phase], move |x: &[Array]| {
            vec![common::psf_loss(&ap2, &x[0], &tg2)]
        })?;
        let (ap3, tg3) = (aperture.clone(), target.clone());
        let both = lf::Function::trace(&[&phase], move |x: &[Array]| {
            let loss = common::psf_loss(&ap3, &x[0], &tg3);
            let g = lf::grad(&loss, &[&x[0]]).expect("gradient");
            vec![loss, g[0].clone()]
        })?;
        let (iters, reps) = if dev.is_cuda() { (20, 7) } else { (3, 3) };
        if dev.is_cuda() {
            // the same traced steps with the generated passes and the kernels fused into them
            let before = lf::set_fft_backend(lf::FftBackend::Generated);
            let (ap4, tg4) = (aperture.clone(), target.clone());
            let fwd_g = lf::Function::trace(&[&phase], move |x: &[Array]| {
                vec![common::psf_loss(&ap4, &x[0], &tg4)]
            })?;
            let (ap5, tg5) = (aperture.clone(), target.clone());
            let both_g = lf::Function::trace(&[&phase], move |x: &[Array]| {
                let loss = common::psf_loss(&ap5, &x[0], &tg5);
                let g = lf::grad(&loss, &[&x[0]]).expect("gradient");
                vec![loss, g[0].clone()]
            })?;
            let (t_f, h_f) = bench_host(dev, iters, reps, |_| {
                drop(fwd_g.call(&[&phase]).expect("call"))
            });
            let (t_b, h_b) = bench_host(dev, iters, reps, |_| {
                drop(both_g.call(&[&phase]).expect("call"))
            });
            let graph = |f: &lf::Function| if f.is_graph() { "CUDA graph" } else { "plain" };
            row(
                "grad",
                n,
                "lazyfuse-graph-generated-fft forward",
                t_f,
                &format!("traced, {}; host {:.1} us a call", graph(&fwd_g), h_f * 1e6),
            );
            row(
                "grad",
                n,
                "lazyfuse-graph-generated-fft value+grad",
                t_b,
                &format!(
                    "traced, {}; {:.2}x the forward; host {:.1} us a call",
                    graph(&both_g),
                    t_b / t_f,
                    h_b * 1e6
                ),
            );
            lf::set_fft_backend(before);
        }
        let (t_fwd, h_fwd) = bench_host(dev, iters, reps, |_| {
            drop(fwd.call(&[&phase]).expect("call"))
        });
        row(
            "grad",
            n,
            "lazyfuse-graph forward",
            t_fwd,
            &format!(
                "psf-fit loss, traced, is_graph {}; host {:.1} us a call",
                fwd.is_graph(),
                h_fwd * 1e6
            ),
        );
        let (t_both, h_both) = bench_host(dev, iters, reps, |_| {
            drop(both.call(&[&phase]).expect("call"))
        });
        row(
            "grad",
            n,
            "lazyfuse-graph value+grad",
            t_both,
            &format!(
                "traced; {:.2}x the forward; host {:.1} us a call",
                t_both / t_fwd,
                h_both * 1e6
            ),
        );
        let t_eval = bench(dev, iters, reps, |_| {
            let loss = common::psf_loss(&aperture, &phase, &target);
            let (v, g) = lf::value_and_grad(&loss, &[&phase]).expect("gradient");
            lf::eval(&[&v, &g[0]]).expect("eval");
        });
        let plan = lf::debug::kernel_count(
            &{
                let loss = common::psf_loss(&aperture, &phase, &target);
                let g = lf::grad(&loss, &[&phase])?;
                vec![loss, g[0].clone()]
            }
            .iter()
            .collect::<Vec<_>>(),
        )?;
        row(
            "grad",
            n,
            "lazyfuse value+grad (eval)",
            t_eval,
            &format!("rebuilt every call; {plan} kernels"),
        );
    }
    Ok(())
}

fn run_sim(dev: &Device, quick: bool) -> lf::Result<()> {
    let sizes: &[usize] = match (dev.is_cuda(), quick) {
        (true, false) => &[256, 1024],
        _ => &[256],
    };
    let dt = 0.1f64;
    for &n in sizes {
        let mult = common::sim_mult(n, dt, dev)?;
        let u0 = lf::random::normal_on(&[n, n], DType::F32, 0, dev) * 0.1;
        u0.eval()?;
        let steps = 100;
        for fused in [true, false] {
            lf::set_fusion(fused);
            let reps = if dev.is_cuda() { 5 } else { 3 };
            let t = bench(dev, 1, reps, |_| {
                let mut u = u0.clone();
                for _ in 0..steps {
                    u = common::sim_step(&u, &mult, dt);
                    u.eval().expect("eval");
                }
            });
            let note = device_note(|| common::sim_step(&u0, &mult, dt).eval().expect("eval"));
            row("sim100", n, system(fused), t, &format!("one step: {note}"));
        }
        lf::set_fusion(true);
        // the step traced once and replayed per call (one CUDA graph launch on a GPU), with
        // the real-FFT plan (R2C, C2R) and with complex transforms (C2C)
        let before = lf::real_fft_mode();
        for real in [true, false] {
            lf::set_real_fft(real);
            let m = mult.clone();
            let f = lf::Function::trace(&[&u0], move |x| vec![common::sim_step(&x[0], &m, dt)])?;
            let reps = if dev.is_cuda() { 5 } else { 3 };
            let (t, host) = bench_host(dev, 1, reps, |_| {
                let mut u = u0.clone();
                for _ in 0..steps {
                    u = f.call(&[&u]).expect("call").remove(0);
                }
            });
            let how = if f.is_graph() {
                "traced Function, CUDA graph per step"
            } else {
                "traced Function"
            };
            let (name, plan) = if real {
                ("lazyfuse-graph", "R2C/C2R")
            } else {
                ("lazyfuse-graph-c2c", "C2C")
            };
            row(
                "sim100",
                n,
                name,
                t,
                &format!("{how}, {plan}; host {:.0} us", host * 1e6),
            );
        }
        if dev.is_cuda() {
            // complex transforms as generated passes, the step's kernels fused into them;
            // a body of ten steps (or all hundred, as JAX's fori_loop compiles them) chains
            // its round trips (two passes a step), run with cuFFT's R2C plan too for
            // comparison; the real transforms (R2C, C2R) as generated passes, one real
            // round trip a step (the update in its first pass, the product in its pass
            // over the half spectrum's columns that goes there and back: three passes)
            for (body, fft, real) in [
                (1, lf::FftBackend::Generated, false),
                (10, lf::FftBackend::Generated, false),
                (100, lf::FftBackend::Generated, false),
                (1, lf::FftBackend::Generated, true),
                (10, lf::FftBackend::Generated, true),
                (100, lf::FftBackend::Generated, true),
                (10, lf::FftBackend::Cufft, true),
                (100, lf::FftBackend::Cufft, true),
                (10, lf::FftBackend::Cufft, false),
            ] {
                lf::set_real_fft(real);
                let fft_before = lf::set_fft_backend(fft);
                let m = mult.clone();
                let f = lf::Function::trace(&[&u0], move |x| {
                    let mut u = x[0].clone();
                    for _ in 0..body {
                        u = common::sim_step(&u, &m, dt);
                    }
                    vec![u]
                })?;
                let (t, host) = bench_host(dev, 1, 5, |_| {
                    let mut u = u0.clone();
                    for _ in 0..steps / body {
                        u = f.call(&[&u]).expect("call").remove(0);
                    }
                });
                let how = match (f.is_graph(), body) {
                    (true, 1) => "CUDA graph per step".to_string(),
                    (true, b) => format!("{b} steps per call, a CUDA graph each"),
                    (false, b) => format!("{b} steps per call, plain launches"),
                };
                let (name, plan) = match (fft, body) {
                    (lf::FftBackend::Cufft, _) if real => ("lazyfuse-graph", "R2C/C2R cuFFT"),
                    (lf::FftBackend::Cufft, _) => ("lazyfuse-graph-c2c", "C2C cuFFT"),
                    _ if real => ("lazyfuse-graph-generated-r2c", "R2C/C2R generated passes"),
                    (_, 1) => ("lazyfuse-graph-generated-fft", "C2C generated passes"),
                    _ => (
                        "lazyfuse-graph-generated-fft",
                        "C2C generated passes, round trips chained",
                    ),
                };
                let name = match body {
                    1 => name.to_string(),
                    b => format!("{name}-{b}step"),
                };
                row(
                    "sim100",
                    n,
                    &name,
                    t,
                    &format!("traced Function, {how}, {plan}; host {:.0} us", host * 1e6),
                );
                lf::set_fft_backend(fft_before);
            }
        }
        lf::set_real_fft_mode(before);
    }
    Ok(())
}

/// sumsq: `sum(x*x)` of f32 vectors (rotating input sets where they fit in L2), fused and
/// unfused; mean over axis 0 and axis 1 of a square f32 matrix.
fn run_reduce(dev: &Device, quick: bool) -> lf::Result<()> {
    let big = dev.is_cuda() && !quick;
    for n in [1usize << 20, if big { 1 << 26 } else { 1 << 22 }] {
        let sets = if n <= 1 << 22 { 4 } else { 1 };
        let xs: Vec<Array> = (0..sets)
            .map(|s| lf::random::normal_on(&[n], DType::F32, 5 + s as u64, dev))
            .collect();
        lf::eval(&xs.iter().collect::<Vec<_>>())?;
        for fused in [true, false] {
            lf::set_fusion(fused);
            let t = bench(dev, 20, 7, |i| {
                let x = &xs[i % sets];
                (x * x).sum().eval().expect("eval");
            });
            let sys = if fused {
                "lazyfuse-fused"
            } else {
                "lazyfuse-unfused"
            };
            row(
                "sumsq",
                n,
                sys,
                t,
                &format!("{:.0} GB/s", 4.0 * n as f64 / t / 1e9),
            );
        }
        lf::set_fusion(true);
    }
    let side = if big { 4096 } else { 1024 };
    let x = lf::random::normal_on(&[side, side], DType::F32, 9, dev);
    x.eval()?;
    for axis in [0isize, 1] {
        let t = bench(dev, 20, 7, |_| {
            x.mean_axes(&[axis], false).eval().expect("eval")
        });
        row(
            &format!("mean-axis{axis}"),
            format!("{side}x{side}"),
            "lazyfuse-fused",
            t,
            &format!("{:.0} GB/s", 4.0 * (side * side) as f64 / t / 1e9),
        );
    }
    Ok(())
}

/// Transfers: `to_vec` of an evaluated F32 array of 1, 16 and 64 MiB, `copy_to_slice` of it
/// into one reused destination (a `Vec`, and a `PinnedVec`), `from_slice` of the same (from
/// both), and `item()` of one element of an
/// evaluated array (GB/s of the bytes moved).
fn run_transfers(dev: &Device) -> lf::Result<()> {
    for n in [1usize << 18, 1 << 22, 1 << 24] {
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let x = Array::from_slice_on(&host, &[n], dev)?;
        x.eval()?;
        let t = bench(dev, 10, 5, |_| {
            std::hint::black_box(x.to_vec::<f32>().expect("readback"));
        });
        let gbs = format!("{:.1} GB/s", 4.0 * n as f64 / t / 1e9);
        row("readback", 4 * n, "lazyfuse-to_vec", t, &gbs);
        let mut dst = vec![0f32; n];
        let t = bench(dev, 10, 5, |_| {
            x.copy_to_slice(&mut dst).expect("readback");
            std::hint::black_box(&dst);
        });
        let gbs = format!("{:.1} GB/s", 4.0 * n as f64 / t / 1e9);
        row("readback", 4 * n, "lazyfuse-copy_to_slice", t, &gbs);
        // the same into page-locked memory: one DMA copy, no copy out of staging
        let mut pinned = lf::PinnedVec::<f32>::zeros(n, dev)?;
        let t = bench(dev, 10, 5, |_| {
            x.copy_to_slice(&mut pinned).expect("readback");
            std::hint::black_box(&pinned[..]);
        });
        let gbs = format!("{:.1} GB/s", 4.0 * n as f64 / t / 1e9);
        row("readback", 4 * n, "lazyfuse-copy_to_slice-pinned", t, &gbs);
        pinned.copy_from_slice(&host);
        for (name, src) in [
            ("lazyfuse-from_slice", &host[..]),
            ("lazyfuse-from_slice-pinned", &pinned[..]),
        ] {
            let t = bench(dev, 10, 5, |_| {
                Array::from_slice_on(src, &[n], dev)
                    .expect("upload")
                    .eval()
                    .expect("eval");
            });
            let gbs = format!("{:.1} GB/s", 4.0 * n as f64 / t / 1e9);
            row("upload", 4 * n, name, t, &gbs);
        }
    }
    let x = Array::arange_on(0.0, 1000.0, 1.0, DType::F32, dev);
    x.eval()?;
    let t = bench(dev, 100, 7, |i| {
        std::hint::black_box(x.slice(lf::s![i % 1000]).item::<f32>().expect("item"));
    });
    row(
        "item",
        1,
        "lazyfuse-item",
        t,
        "one element of an evaluated array",
    );
    Ok(())
}

/// An indexed update of a square F32 array (the interior scaled, NumPy's
/// `u[1:-1, 1:-1] *= 0.5`) and a cumsum of a 1-D F32 array; GB/s counts one read and one
/// write of the array.
fn run_update_scan(dev: &Device, quick: bool) -> lf::Result<()> {
    let big = dev.is_cuda() && !quick;
    let side = if big { 4096 } else { 1024 };
    let u = lf::random::normal_on(&[side, side], DType::F32, 11, dev);
    u.eval()?;
    let e = side as isize - 1;
    let t = bench(dev, 20, 7, |_| {
        u.at(lf::s![1..e, 1..e]).mul(0.5).eval().expect("eval")
    });
    let bytes = 8.0 * (side * side) as f64;
    let note = device_note(|| {
        u.at(lf::s![1..e, 1..e]).mul(0.5).eval().expect("eval");
    });
    row(
        "update",
        format!("{side}x{side}"),
        "lazyfuse-fused",
        t,
        &format!("{:.0} GB/s; {note}", bytes / t / 1e9),
    );
    let n = if big { 1usize << 26 } else { 1 << 22 };
    let x = lf::random::normal_on(&[n], DType::F32, 12, dev);
    x.eval()?;
    let t = bench(dev, 10, 5, |_| x.cumsum(0).eval().expect("eval"));
    let note = device_note(|| x.cumsum(0).eval().expect("eval"));
    row(
        "cumsum",
        n,
        "lazyfuse-fused",
        t,
        &format!("{:.0} GB/s; {note}", 8.0 * n as f64 / t / 1e9),
    );
    Ok(())
}

/// Batched 1-D complex64 FFTs along the last and the first axis, lengths 2^10 to 2^16,
/// 2^24 elements in all on CUDA (2^20 on the CPU): the generated passes against cuFFT alone
/// (`lf::set_fft_backend`; on the CPU both settings run rustfft, so one row). Each call
/// builds the transform of an evaluated input again and drops the result; the `extra`
/// column gives the device time of one profiled call and the rate of one read and one
/// write of the array.
fn run_fft1d(dev: &Device, quick: bool) -> lf::Result<()> {
    let total: usize = match (dev.is_cuda(), quick) {
        (true, false) => 1 << 24,
        (true, true) => 1 << 22,
        (false, _) => 1 << 20,
    };
    let exps: &[u32] = if quick {
        &[10, 13, 16]
    } else {
        &[10, 11, 12, 13, 14, 15, 16]
    };
    let backends: &[(lf::FftBackend, &str)] = if dev.is_cuda() {
        &[
            (lf::FftBackend::Cufft, "lazyfuse-cufft"),
            (lf::FftBackend::Generated, "lazyfuse-generated"),
            (lf::FftBackend::Auto, "lazyfuse-auto"),
        ]
    } else {
        &[(lf::FftBackend::Cufft, "lazyfuse-rustfft")]
    };
    for &e in exps {
        let n = 1usize << e;
        let batch = total / n;
        for (axis, shape, name) in [(1isize, [batch, n], "last"), (0, [n, batch], "first")] {
            // evaluated first: a leaf, so no real-input rewrite applies
            let a = lf::complex(
                &lf::random::normal_on(&shape, DType::F32, 7, dev),
                &lf::random::normal_on(&shape, DType::F32, 8, dev),
            );
            a.eval()?;
            for &(backend, system) in backends {
                let before = lf::set_fft_backend(backend);
                let (iters, reps) = if dev.is_cuda() { (20, 7) } else { (3, 3) };
                let t = bench(dev, iters, reps, |_| {
                    lf::fft::fft(&a, axis).eval().expect("eval")
                });
                let mut note = device_note(|| lf::fft::fft(&a, axis).eval().expect("eval"));
                if backend == lf::FftBackend::Auto {
                    // the transform of a leaf runs unfused: the decision for it alone
                    let key = format!(" complex64 {shape:?} axes [{axis}] forward");
                    let chose = lf::debug::fft_choices(dev)
                        .iter()
                        .any(|c| c.key.ends_with(&key) && c.generated);
                    note = format!(
                        "chose {}; {note}",
                        if chose { "generated" } else { "cuFFT" }
                    );
                }
                let gbs = 16.0 * total as f64 / t / 1e9;
                row(
                    "fft1d",
                    format!("2^{e}x{batch} {name}"),
                    system,
                    t,
                    &format!("{gbs:.0} GB/s; {note}"),
                );
                lf::set_fft_backend(before);
            }
        }
    }
    Ok(())
}

/// Issue 36's goals on a one-device mesh: the chain sharded along axis 0 against the same
/// unsharded plan (`sharded-chain`), a one-rank all-reduce (sum) against a device copy of
/// the same bytes (`all_reduce`), and the host waits inside one profiled sharded step
/// (`sharded-step`). On CUDA the mesh runs NCCL (an error row when it cannot load); on the
/// CPU the host-staged backend stands in and there are no NCCL rows.
fn run_nccl(dev: &Device, quick: bool) -> lf::Result<()> {
    use lf::shard::Backend;
    let one = std::slice::from_ref(dev);
    let (mesh, sys) = if dev.is_cuda() {
        match lf::Mesh::with_backend(one, Backend::Nccl) {
            Ok(m) => (m, "lazyfuse-nccl-mesh1"),
            Err(e) => {
                row(
                    "nccl",
                    1,
                    "lazyfuse-nccl-mesh1",
                    f64::NAN,
                    &format!("no NCCL: {e}"),
                );
                return Ok(());
            }
        }
    } else {
        eprintln!("# nccl: the NCCL rows need CUDA; the host-staged backend stands in");
        (
            lf::Mesh::with_backend(one, Backend::Transfer)?,
            "lazyfuse-transfer-mesh1",
        )
    };
    let (iters, reps) = if dev.is_cuda() { (20, 7) } else { (3, 3) };

    // 1. the 15-op chain, sharded along axis 0 on the one-device mesh vs unsharded
    let n = if quick { 1usize << 20 } else { 1 << 24 };
    let x = lf::random::normal_on(&[n], DType::F32, 10, dev);
    let y = lf::random::normal_on(&[n], DType::F32, 20, dev);
    lf::eval(&[&x, &y])?;
    let (xs, ys) = (x.shard(&mesh, 0)?, y.shard(&mesh, 0)?);
    lf::shard::eval(&[&xs, &ys])?;
    let sharded_chain = || xs.zip(&ys, chain).expect("zip");
    let bytes = 3.0 * 4.0 * n as f64;
    let t_plain = bench(dev, iters, reps, |_| chain(&x, &y).eval().expect("eval"));
    let t_shard = bench(dev, iters, reps, |_| sharded_chain().eval().expect("eval"));
    let note = device_note(|| chain(&x, &y).eval().expect("eval"));
    let gbs = bytes / t_plain / 1e9;
    row(
        "sharded-chain",
        n,
        "lazyfuse-fused (unsharded)",
        t_plain,
        &format!("{gbs:.1} GB/s; {note}"),
    );
    let note = device_note(|| sharded_chain().eval().expect("eval"));
    let gbs = bytes / t_shard / 1e9;
    row(
        "sharded-chain",
        n,
        sys,
        t_shard,
        &format!(
            "{:.3}x the unsharded plan (goal <= 1.05); {gbs:.1} GB/s; {note}",
            t_shard / t_plain
        ),
    );

    // 2. the backend's all-reduce (sum) of one rank against a device copy of the bytes
    let n = if dev.is_cuda() && !quick {
        1usize << 26
    } else {
        1 << 22
    };
    let mib = format!("{}MiB", (4 * n) >> 20);
    let traffic = 2.0 * 4.0 * n as f64; // read + write
    let a = lf::random::normal_on(&[n], DType::F32, 30, dev);
    a.eval()?;
    let all_reduce = || lf::debug::all_reduce_sum(&mesh, std::slice::from_ref(&a));
    let t_ar = bench(dev, iters, reps, |_| {
        lf::eval(&all_reduce().expect("all-reduce").iter().collect::<Vec<_>>()).expect("eval")
    });
    let ((), rep) = lf::profile(|| drop(all_reduce().expect("all-reduce")));
    let lib: Vec<String> = rep
        .library_calls()
        .iter()
        .map(|e| format!("{} {:.1} us", e.name, e.time.as_secs_f64() * 1e6))
        .collect();
    let what = if dev.is_cuda() {
        format!("device: {}", lib.join(", "))
    } else {
        "host-staged backend: one block's sum is the block itself, nothing moves".into()
    };
    // the copies: cuMemcpyDtoDAsync between two evaluated arrays, and the lazyfuse kernel
    // of `a * 1.0` (bit-identical to `a`, -0.0 and infinities included)
    let mut copies: Vec<(String, f64)> = Vec::new();
    #[cfg(feature = "cuda")]
    if dev.is_cuda() {
        let dst = lf::Array::zeros_on(&[n], DType::F32, dev);
        let (sp, dp) = (a.cuda_ptr()?, dst.cuda_ptr()?);
        let stream = dev.cuda_stream()? as cudarc::driver::sys::CUstream;
        // SAFETY: both pointers hold `4 n` bytes of live buffers of this device, kept alive
        // by `sp` and `dp`; `dst` is written only here and never read; the copies are
        // queued on this thread's lazyfuse stream, after the writers of both.
        let copy = || unsafe {
            cudarc::driver::result::memcpy_dtod_async(dp.ptr(), sp.ptr(), 4 * n, stream)
        };
        match copy() {
            Ok(()) => {
                let t = bench(dev, iters, reps, |_| copy().expect("cuMemcpyDtoDAsync"));
                copies.push(("cuMemcpyDtoDAsync".into(), t));
                row(
                    "all_reduce",
                    &mib,
                    "copy cuMemcpyDtoDAsync",
                    t,
                    &format!("{:.0} GB/s (read + write)", traffic / t / 1e9),
                );
            }
            Err(e) => eprintln!("# nccl: no cuMemcpyDtoDAsync baseline: {e}"),
        }
    }
    let kernels = lf::debug::kernel_count(&[&(&a * 1.0)])?;
    if kernels == 1 {
        let t = bench(dev, iters, reps, |_| (&a * 1.0).eval().expect("eval"));
        let note = device_note(|| (&a * 1.0).eval().expect("eval"));
        copies.push(("the a * 1.0 kernel".into(), t));
        row(
            "all_reduce",
            &mib,
            "copy lazyfuse a * 1.0",
            t,
            &format!("{:.0} GB/s (read + write); {note}", traffic / t / 1e9),
        );
    } else {
        eprintln!("# nccl: a * 1.0 plans {kernels} kernels, not a copy: no kernel baseline");
    }
    let vs: Vec<String> = copies
        .iter()
        .map(|(name, t)| format!("{:.3}x {name}", t_ar / t))
        .collect();
    let note = if dev.is_cuda() {
        format!(
            "{:.0} GB/s (read + write); {} (goal <= 1.1); {what}",
            traffic / t_ar / 1e9,
            vs.join(", ")
        )
    } else {
        what
    };
    row("all_reduce", &mib, sys, t_ar, &note);

    // 3. one sharded step (the chain, then its sum over the split axis: an all-reduce),
    // profiled: the host waits and synchronizing driver calls inside it (goal 0)
    let step = || {
        xs.zip(&ys, chain)
            .and_then(|s| s.sum())
            .expect("sharded step")
    };
    for _ in 0..3 {
        lf::shard::eval(&[&step()])?;
    }
    dev.synchronize()?;
    // unprofiled: the host's time to build and queue the step, then the step's end
    let t0 = Instant::now();
    let s = step();
    lf::shard::eval(&[&s])?;
    let queued = t0.elapsed().as_secs_f64();
    dev.synchronize()?;
    let done = t0.elapsed().as_secs_f64();
    drop(s);
    let ((), rep) = lf::profile(|| lf::shard::eval(&[&step()]).expect("eval"));
    let waits = rep.of_kind(lf::EntryKind::Wait).count();
    let entries: Vec<String> = rep
        .entries
        .iter()
        .map(|e| format!("{} {}", e.kind.label(), e.name))
        .collect();
    dev.synchronize()?;
    let ((), calls) = lf::debug::driver_calls(|| lf::shard::eval(&[&step()]).expect("eval"));
    dev.synchronize()?;
    let syncs: u64 = [
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuCtxSynchronize",
    ]
    .iter()
    .map(|c| calls.count(c))
    .sum();
    row(
        "sharded-step",
        xs.shape()[0],
        sys,
        queued,
        &format!(
            "{waits} host waits in the profile, {syncs} synchronizing driver calls (goal 0 \
             each); host queues the chain + its sum over the split axis in this time, done \
             after {:.1} us; device {:.1} us; entries: {}",
            done * 1e6,
            rep.compute_time().as_secs_f64() * 1e6,
            entries.join(", ")
        ),
    );
    Ok(())
}

/// The CPU's line structure (a transform's producer computed inside its first pass,
/// `lf::set_cpu_fft_lines_min_elements(0)`) against its whole-array passes over the
/// stored input (`usize::MAX`: off), in alternating rounds so that both see the same
/// machine: the PSF, a row FFT of a cheap product, and the spectral step with real
/// transforms. Medians of the rounds; the `extra` column holds lines / passes.
fn run_cpu_lines(dev: &Device, quick: bool) -> lf::Result<()> {
    if dev.is_cuda() {
        return Ok(());
    }
    type Case = (&'static str, usize, Box<dyn Fn() -> Array>);
    let mut cases: Vec<Case> = Vec::new();
    let psf_sizes: &[usize] = if quick {
        &[64]
    } else {
        &[32, 64, 128, 256, 512]
    };
    for &n in psf_sizes {
        let d = dev.clone();
        cases.push(("psf", n, Box::new(move || psf(n, &d))));
    }
    let row_sizes: &[usize] = if quick {
        &[256]
    } else {
        &[128, 256, 512, 1024, 2048]
    };
    for &n in row_sizes {
        let a = lf::random::normal_on(&[n, n], DType::F32, 1, dev);
        let b = lf::random::normal_on(&[n, n], DType::F32, 2, dev);
        let z = lf::complex(&a, &b);
        z.eval()?;
        cases.push((
            "fft-rows-of-product",
            n,
            Box::new(move || lf::fft::fft(&(&z * &z + 1.0), -1)),
        ));
    }
    let sim_sizes: &[usize] = if quick {
        &[256]
    } else {
        &[128, 256, 512, 1024]
    };
    for &n in sim_sizes {
        let mult = common::sim_mult(n, 0.1, dev)?;
        let u = lf::random::normal_on(&[n, n], DType::F32, 0, dev) * 0.1;
        u.eval()?;
        cases.push((
            "sim-step",
            n,
            Box::new(move || common::sim_step(&u, &mult, 0.1)),
        ));
    }
    let thresholds = [usize::MAX, 0];
    for (w, n, f) in &cases {
        // calls per timed round: about 20 ms of work
        let before = lf::set_cpu_fft_lines_min_elements(usize::MAX);
        let t0 = Instant::now();
        f().eval()?;
        let once = t0.elapsed().as_secs_f64();
        let iters = ((0.02 / once.max(1e-6)) as usize).clamp(1, 200);
        let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..if quick { 3 } else { 9 } {
            for (k, &m) in thresholds.iter().enumerate() {
                lf::set_cpu_fft_lines_min_elements(m);
                f().eval()?; // plans (or finds the plan) for this setting
                let t = Instant::now();
                for _ in 0..iters {
                    f().eval()?;
                }
                times[k].push(t.elapsed().as_secs_f64() / iters as f64);
            }
        }
        lf::set_cpu_fft_lines_min_elements(before);
        let med = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let (passes, lines) = (med(&mut times[0]), med(&mut times[1]));
        row(w, n, "lazyfuse-cpu-passes", passes, "");
        row(
            w,
            n,
            "lazyfuse-cpu-lines",
            lines,
            &format!("lines / passes {:.3}", lines / passes),
        );
    }
    Ok(())
}

fn main() -> lf::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let quick = args.iter().any(|a| a == "--quick");
    let tsv_path = args
        .iter()
        .position(|a| a == "--tsv")
        .map(|i| {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| lf::Error::Config("--tsv needs a path".into()))
        })
        .transpose()?;
    let only: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--") && Some(*a) != tsv_path.as_ref())
        .map(|s| s.as_str())
        .collect();
    let want = |w: &str| only.is_empty() || only.contains(&w);
    let dev = Device::try_default()?;
    lf::set_default_device(&dev);
    let title = format!("# lazyfuse workloads on {} ({})", dev, dev.name());
    eprintln!("{title}");
    if let Some(path) = &tsv_path {
        let mut f = std::fs::File::create(path)
            .map_err(|e| lf::Error::Config(format!("--tsv {path}: {e}")))?;
        writeln!(f, "{title}").map_err(|e| lf::Error::Config(format!("--tsv {path}: {e}")))?;
        *TSV.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }
    if want("psf") {
        run_psf(&dev, quick)?;
    }
    if want("chain") {
        run_chain(&dev, quick)?;
    }
    if want("bcast") {
        run_bcast(&dev)?;
    }
    if want("matmul") {
        run_matmul(&dev)?;
    }
    if want("latency") {
        run_latency(&dev)?;
    }
    if want("grad") {
        run_grad(&dev, quick)?;
    }
    if want("sim") || want("sim100") {
        run_sim(&dev, quick)?;
    }
    if want("sumsq") || want("mean") {
        run_reduce(&dev, quick)?;
    }
    if want("transfers") {
        run_transfers(&dev)?;
    }
    if want("update") || want("cumsum") {
        run_update_scan(&dev, quick)?;
    }
    if want("cpulines") {
        run_cpu_lines(&dev, quick)?;
    }
    if want("fft1d") {
        run_fft1d(&dev, quick)?;
    }
    if want("nccl") {
        run_nccl(&dev, quick)?;
    }
    Ok(())
}
