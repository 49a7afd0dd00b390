//! BENCH.md workloads on the default device (fused and unfused), printed as TSV rows
//! `workload size system time_us extra`, the columns of the anchor script.
//!
//! `cargo bench --bench workloads [-- chain bcast matmul latency] [--quick]`

use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::time::Instant;

/// Mean seconds of one call, median over `repeats`, after `warm` calls; the device is
/// synchronized before each clock read.
fn bench(dev: &Device, iters: usize, repeats: usize, mut f: impl FnMut(usize)) -> f64 {
    for i in 0..3 {
        f(i);
    }
    dev.synchronize().expect("synchronize");
    let mut ts = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        dev.synchronize().expect("synchronize");
        ts.push(t.elapsed().as_secs_f64() / iters as f64);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ts[ts.len() / 2]
}

fn row(w: &str, size: impl std::fmt::Display, system: &str, sec: f64, extra: &str) {
    println!("{w}\t{size}\t{system}\t{:.1} us\t{extra}", sec * 1e6);
}

fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (&r * -0.5).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, &z * 0.1) + 1.0
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
            let sys = if fused {
                "lazyfuse-fused"
            } else {
                "lazyfuse-unfused"
            };
            row("chain", n, sys, t, &format!("{:.1} GB/s", bytes / t / 1e9));
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
        let sys = if fused {
            "lazyfuse-kernel"
        } else {
            "lazyfuse-unfused-kernel"
        };
        row("bcast", "100x4000x5", sys, t, "");
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

fn run_latency(dev: &Device) -> lf::Result<()> {
    let a = Array::from_vec_on(vec![1.5f32], &[1], dev)?;
    let b = Array::from_vec_on(vec![2.5f32], &[1], dev)?;
    let t = bench(dev, 1000, 7, |_| (&a + &b).eval().expect("eval"));
    row("latency", 1, "lazyfuse a+b (eval, async)", t, "");
    // a cached 10-op expression: per-eval host overhead (graph build + plan + launch)
    let ten =
        |a: &Array, b: &Array| ((((a + b) * 2.0 - 1.0).sin() * b).exp() + a).sqrt().abs() * 3.0 - b;
    let t = bench(dev, 1000, 7, |_| ten(&a, &b).eval().expect("eval"));
    row("latency", 1, "lazyfuse 10-op expr (eval, async)", t, "");
    Ok(())
}

fn main() -> lf::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|s| s.as_str())
        .collect();
    let want = |w: &str| only.is_empty() || only.contains(&w);
    let dev = Device::try_default()?;
    lf::set_default_device(&dev);
    eprintln!("# lazyfuse workloads on {} ({})", dev, dev.name());
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
    Ok(())
}
