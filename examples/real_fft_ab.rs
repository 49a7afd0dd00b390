//! The sim100 step with the real-FFT plan (R2C / C2R rewrites) against the complex plan
//! (C2C), alternating in one run: per round, 100 steps with each plan (the order swapped
//! every round), then the median of the per-round time ratios C2C / R2C.
//!
//!   cargo run --release --example real_fft_ab [N [ROUNDS]] [cpu|cuda] [fn]
//!
//! With `fn` each plan runs as a traced `lf::Function` (traced with its plan's setting)
//! instead of an eval loop.

#[path = "common/mod.rs"]
mod common;

use lazyfuse as lf;
use std::time::Instant;

fn main() -> lf::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dev = common::device_arg(&args)?;
    let nums: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let n = nums.first().copied().unwrap_or(256);
    let rounds = nums.get(1).copied().unwrap_or(9).max(1);
    let mult = common::sim_mult(n, 0.1, &dev)?;
    let u0 = lf::random::normal_on(&[n, n], lf::DType::F32, 0, &dev) * 0.1;
    u0.eval()?;
    let before = lf::real_fft_mode();
    let traced = args.iter().any(|a| a == "fn");
    let mut fns = Vec::new();
    for real in [true, false] {
        lf::set_real_fft(real);
        let m = mult.clone();
        fns.push(lf::Function::trace(&[&u0], move |x| {
            vec![common::sim_step(&x[0], &m, 0.1)]
        })?);
    }
    let run = |real: bool| -> lf::Result<f64> {
        lf::set_real_fft(real);
        let t = Instant::now();
        let mut u = u0.clone();
        for _ in 0..100 {
            if traced {
                u = fns[usize::from(!real)].call(&[&u])?.remove(0);
            } else {
                u = common::sim_step(&u, &mult, 0.1);
                u.eval()?;
            }
        }
        dev.synchronize()?;
        drop(u);
        Ok(t.elapsed().as_secs_f64())
    };
    // warm-up: compile and plan both variants
    run(true)?;
    run(false)?;
    if std::env::var("AB_PROFILE").is_ok() {
        for real in [true, false] {
            let (r, rep) = lf::profile(|| run(real));
            r?;
            println!("{rep}");
        }
    }
    let (mut real, mut complex, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let (a, b) = if r % 2 == 0 {
            let a = run(true)?;
            (a, run(false)?)
        } else {
            let b = run(false)?;
            (run(true)?, b)
        };
        real.push(a);
        complex.push(b);
        ratio.push(b / a);
    }
    lf::set_real_fft_mode(before);
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "sim100 {n}^2 on {dev}{}: R2C/C2R {:.2} ms, C2C {:.2} ms (medians of {rounds} rounds); \
         C2C / R2C {:.2} (median of the per-round ratios)",
        if traced { " (traced functions)" } else { "" },
        med(&mut real) * 1e3,
        med(&mut complex) * 1e3,
        med(&mut ratio)
    );
    Ok(())
}
