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
                    e.insert((u0, common::sim_mult(n, 0.1, &dev)?));
                }
                let (u0, mult) = &sims[&n];
                let t = Instant::now();
                let mut u = u0.clone();
                for _ in 0..100 {
                    u = common::sim_step(&u, mult, 0.1);
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
