//! The Allen-Cahn spectral step of BENCH.md (`sim100`): `u += dt (u - u^3)`, then
//! `u = real(ifft2(fft2(u) * mult))`, run as a plain `eval` loop and as a traced
//! `lf::Function`. Prints the first step (planning + compilation) separately from the
//! synchronized time per step, and writes the final field as a PNG.
//!
//! Run: `cargo run --release --example 03_simulation_loop [-- N [STEPS] [--tsv]]`
//! (N defaults to 256, STEPS to 1000; writes allen_cahn.png). With `--tsv` it also prints
//! BENCH.md rows `sim100 <n> lazyfuse-fused|lazyfuse-graph <us per 100 steps> us`: the
//! `eval` loop and the traced function, and `lazyfuse-graph-10step`: ten steps traced as one
//! function (with the generated FFT passes, their transforms chain: two passes a step). On
//! CUDA all replay graphs by default (a repeated multi-step plan is recorded once);
//! `LAZYFUSE_GRAPHS=0` gives plain launches.

mod common;

use lazyfuse as lf;
use lf::{Array, DType};
use std::time::Instant;

const DT: f64 = 0.1;

/// `1 / (1 + dt k^2)` with `k = 2 pi fftfreq(n, 1/n) / n` on both axes (BENCH.md).
fn multiplier(n: usize) -> lf::Result<Array> {
    let k =
        lf::fft::fftfreq(n, 1.0 / n as f64, DType::F32) * (2.0 * std::f64::consts::PI / n as f64);
    let k2 = k.square();
    let k2 = k2.reshape(&[1, -1]) + k2.reshape(&[-1, 1]);
    let m = (k2 * DT + 1.0).reciprocal();
    m.eval()?;
    Ok(m)
}

/// One step, lazily.
fn step(u: &Array, mult: &Array, dt: f64) -> Array {
    let v = u + (u - u * u * u) * dt;
    lf::fft::ifft2(&(lf::fft::fft2(&v) * mult)).real()
}

/// The initial field: small noise with a fixed seed.
fn initial(n: usize) -> lf::Result<Array> {
    let u = lf::random::normal(&[n, n], DType::F32, 0) * 0.1;
    u.eval()?;
    Ok(u)
}

/// Seconds per step over `steps` steps of `advance` (warm-up already done), synchronized.
fn per_step(dev: &lf::Device, steps: usize, mut advance: impl FnMut()) -> lf::Result<f64> {
    dev.synchronize()?;
    let t = Instant::now();
    for _ in 0..steps {
        advance();
    }
    dev.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / steps as f64)
}

fn main() -> lf::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tsv = args.iter().any(|a| a == "--tsv");
    let nums: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let n = nums.first().copied().unwrap_or(256);
    let steps = nums.get(1).copied().unwrap_or(1000).max(1);
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    println!(
        "allen-cahn {n}x{n}, {steps} steps, on {dev} ({})",
        dev.name()
    );
    let mult = multiplier(n)?;

    // --- plain eval loop ---
    let mut u = initial(n)?;
    lf::reset_stats();
    let t0 = Instant::now();
    u = step(&u, &mult, DT);
    u.eval()?;
    dev.synchronize()?;
    let first = t0.elapsed();
    let s = lf::stats();
    println!(
        "eval: first step {:.1} ms (compile {:.1} ms, {} kernels compiled, {} disk-cache hits)",
        first.as_secs_f64() * 1e3,
        s.compile_time().as_secs_f64() * 1e3,
        s.kernels_compiled,
        s.disk_cache_hits
    );
    for _ in 0..3 {
        u = step(&u, &mult, DT); // warm-up: the second run records the CUDA graph
        u.eval()?;
    }
    lf::reset_stats();
    let t_eval = per_step(&dev, steps, || {
        u = step(&u, &mult, DT);
        u.eval().expect("eval");
    })?;
    let s = lf::stats();
    println!(
        "eval: {:.1} us/step ({} kernels, {} FFT calls, {} graph launches, {} compiles, {} plans)",
        t_eval * 1e6,
        s.kernels_launched,
        s.library_calls,
        s.graph_launches,
        s.kernels_compiled,
        s.plans
    );

    // --- traced Function ---
    let mut v = initial(n)?;
    lf::reset_stats();
    let t0 = Instant::now();
    let m = mult.clone(); // the function keeps its closure, and with it this capture
    let f = lf::Function::trace(&[&v], move |x| vec![step(&x[0], &m, DT)])?;
    v = f.call(&[&v])?.remove(0);
    dev.synchronize()?;
    println!(
        "function: trace + first call {:.1} ms ({} kernels compiled)",
        t0.elapsed().as_secs_f64() * 1e3,
        lf::stats().kernels_compiled
    );
    for _ in 0..3 {
        v = f.call(&[&v])?.remove(0);
    }
    lf::reset_stats();
    let t_fn = per_step(&dev, steps, || {
        v = f.call(&[&v]).expect("call").remove(0);
    })?;
    let s = lf::stats();
    println!(
        "function: {:.1} us/step ({} graph launches, graph replay: {})",
        t_fn * 1e6,
        s.graph_launches,
        f.is_graph()
    );
    // --- ten steps traced as one Function: on CUDA with the generated FFT passes
    // (`LAZYFUSE_FFT=generated`, complex transforms: `LAZYFUSE_REAL_FFT=0`) the steps'
    // transforms chain, two passes a step ---
    let body = 10;
    let m = mult.clone();
    let f10 = lf::Function::trace(&[&v], move |x| {
        let mut u = x[0].clone();
        for _ in 0..body {
            u = step(&u, &m, DT);
        }
        vec![u]
    })?;
    for _ in 0..3 {
        v = f10.call(&[&v])?.remove(0);
    }
    lf::reset_stats();
    let t_fn10 = per_step(&dev, steps.div_ceil(body), || {
        v = f10.call(&[&v]).expect("call").remove(0);
    })? / body as f64;
    println!(
        "function of {body} steps: {:.1} us/step ({} graph launches, {} FFT calls)",
        t_fn10 * 1e6,
        lf::stats().graph_launches,
        lf::stats().library_calls
    );
    let m = lf::memory_stats();
    println!(
        "memory: device {:.1} MiB live / {:.1} MiB peak, host {:.1} MiB live",
        m.device_bytes_live as f64 / (1 << 20) as f64,
        m.device_bytes_peak as f64 / (1 << 20) as f64,
        m.host_bytes_live as f64 / (1 << 20) as f64
    );

    let host: Vec<f32> = v.to_vec()?;
    let mean = host.iter().map(|&x| x as f64).sum::<f64>() / host.len() as f64;
    println!("final field: mean {mean:.4e}");
    common::write_png("allen_cahn.png", &host, n, n, false)
        .map_err(|e| lf::Error::Config(format!("allen_cahn.png: {e}")))?;
    println!("wrote allen_cahn.png");
    if tsv {
        println!(
            "sim100\t{n}\tlazyfuse-fused\t{:.1} us\t",
            t_eval * 100.0 * 1e6
        );
        println!(
            "sim100\t{n}\tlazyfuse-graph\t{:.1} us\t",
            t_fn * 100.0 * 1e6
        );
        println!(
            "sim100\t{n}\tlazyfuse-graph-{body}step\t{:.1} us\t",
            t_fn10 * 100.0 * 1e6
        );
    }
    Ok(())
}
