//! The lazyfuse side of `benches/cpu_vs_numpy.py`: reads one workload per line from stdin
//! (`psf N`, `chain N`, `sim N`, `quit`), runs it once on the CPU as a user would (the
//! expression rebuilt, evaluated and the result dropped) and answers `ok SECONDS`, so the
//! script can alternate it with NumPy in one run. Inputs are made once per workload.
//!
//!   cargo run --release --example cpu_vs_numpy   (normally started by the script)

#[path = "common/mod.rs"]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Instant;

/// One Allen-Cahn semi-implicit spectral step (BENCH.md `sim`).
fn sim_step(u: &Array, mult: &Array, dt: f64) -> Array {
    let u = u + (u - u.powi(3)) * dt;
    lf::fft::ifft2(&(lf::fft::fft2(&u) * mult)).real()
}

/// `mult = 1 / (1 + dt k^2)` with `k = 2 pi fftfreq(n, 1/n) / n`, as the NumPy side.
fn sim_mult(n: usize, dt: f32) -> lf::Result<Array> {
    let k: Vec<f32> = (0..n)
        .map(|i| {
            let f = if i < n.div_ceil(2) {
                i as f32
            } else {
                i as f32 - n as f32
            };
            f * 2.0 * std::f32::consts::PI / n as f32
        })
        .collect();
    let m: Vec<f32> = (0..n * n)
        .map(|i| 1.0 / (1.0 + dt * (k[i % n] * k[i % n] + k[i / n] * k[i / n])))
        .collect();
    Array::from_vec_on(m, &[n, n], &Device::Cpu)
}

fn main() -> lf::Result<()> {
    let dev = Device::Cpu;
    let mut chains: HashMap<usize, (Array, Array)> = HashMap::new();
    let mut sims: HashMap<usize, (Array, Array)> = HashMap::new();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| lf::Error::Config(format!("stdin: {e}")))?;
        let mut it = line.split_whitespace();
        let (Some(w), Some(n)) = (it.next(), it.next().and_then(|s| s.parse::<usize>().ok()))
        else {
            break;
        };
        let t = match w {
            "psf" => {
                let t = Instant::now();
                let img = common::psf(n, &dev);
                img.eval()?;
                drop(img);
                t.elapsed()
            }
            "chain" => {
                let (x, y) = chains.entry(n).or_insert_with(|| {
                    let x = lf::random::normal_on(&[n], DType::F32, 1, &dev);
                    let y = lf::random::normal_on(&[n], DType::F32, 2, &dev);
                    x.eval().expect("eval");
                    y.eval().expect("eval");
                    (x, y)
                });
                let t = Instant::now();
                let z = common::chain(x, y);
                z.eval()?;
                drop(z);
                t.elapsed()
            }
            "sim" => {
                if let std::collections::hash_map::Entry::Vacant(e) = sims.entry(n) {
                    let u0 = lf::random::normal_on(&[n, n], DType::F32, 0, &dev) * 0.1;
                    u0.eval()?;
                    e.insert((u0, sim_mult(n, 0.1)?));
                }
                let (u0, mult) = &sims[&n];
                let t = Instant::now();
                let mut u = u0.clone();
                for _ in 0..100 {
                    u = sim_step(&u, mult, 0.1);
                    u.eval()?;
                }
                drop(u);
                t.elapsed()
            }
            other => return Err(lf::Error::Config(format!("unknown workload {other}"))),
        };
        writeln!(out, "ok {:.9}", t.as_secs_f64())
            .and_then(|_| out.flush())
            .map_err(|e| lf::Error::Config(format!("stdout: {e}")))?;
    }
    Ok(())
}
