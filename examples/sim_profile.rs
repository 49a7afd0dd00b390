//! Where the time of one step of the spectral simulation goes, with the real-FFT plan (R2C,
//! C2R) and with complex transforms (C2C): per step entry (plan, kernels, transforms), the
//! median over 50 profiled steps, device time on CUDA (events), wall time on the CPU.
//!
//!   cargo run --release --example sim_profile [N...] [cpu|cuda]

#[path = "common/mod.rs"]
mod common;

use common::sim_step as step;
use lazyfuse as lf;
use std::collections::BTreeMap;

fn main() -> lf::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dev = common::device_arg(&args)?;
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![256] } else { sizes };
    println!("# sim step profile on {dev}");
    for n in sizes {
        let mult = lf::Array::full_on(&[n, n], 0.5, lf::DType::F32, &dev);
        let u0 = lf::random::normal_on(&[n, n], lf::DType::F32, 0, &dev) * 0.1;
        u0.eval()?;
        let before = lf::real_fft_mode();
        for real in [true, false] {
            lf::set_real_fft(real);
            step(&u0, &mult, 0.1).eval()?; // compile and plan outside the profile
            let (_, rep) = lf::profile(|| -> lf::Result<()> {
                for _ in 0..50 {
                    step(&u0, &mult, 0.1).eval()?;
                }
                dev.synchronize()
            });
            // per (step index within the eval, kind, detail): the times of every eval
            let mut rows: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
            let mut k_in_eval: BTreeMap<usize, usize> = BTreeMap::new();
            for e in &rep.entries {
                let Some(ev) = e.eval else { continue };
                let i = k_in_eval.entry(ev).or_default();
                let label = format!("{:<8} {}", e.kind.label(), e.detail);
                rows.entry((*i, label))
                    .or_default()
                    .push(e.time.as_secs_f64() * 1e6);
                *i += 1;
            }
            let plan = if real { "R2C/C2R" } else { "C2C" };
            let mut total = 0.0;
            for ((i, label), mut t) in rows {
                t.sort_by(f64::total_cmp);
                let med = t[t.len() / 2];
                total += med;
                println!("{n}\t{plan}\t{i}\t{med:.1} us\t{label}");
            }
            println!("{n}\t{plan}\ttotal\t{total:.1} us\t(sum of the medians)");
        }
        lf::set_real_fft_mode(before);
    }
    Ok(())
}
