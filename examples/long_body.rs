//! A traced body of N steps of the spectral simulation (default 10) on the CPU, called
//! 5 x (100 / N) times after a first call (about 500 steps): whole-process timing of long
//! bodies (`/usr/bin/time -v` gives the peak memory).
//!
//!   cargo run --release --example long_body [N]
#[path = "common/mod.rs"]
mod common;
use lazyfuse as lf;
fn main() -> lf::Result<()> {
    let body: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let dev = lf::Device::Cpu;
    let n = 256;
    let mult = common::sim_mult(n, 0.1, &dev)?;
    let u0 = lf::random::normal_on(&[n, n], lf::DType::F32, 0, &dev) * 0.1;
    u0.eval()?;
    let m = mult.clone();
    let f = lf::Function::trace(&[&u0], move |x| {
        let mut u = x[0].clone();
        for _ in 0..body {
            u = common::sim_step(&u, &m, 0.1);
        }
        vec![u]
    })?;
    let mut u = f.call(&[&u0])?.remove(0);
    for _ in 0..5 {
        for _ in 0..100 / body {
            u = f.call(&[&u])?.remove(0);
        }
    }
    println!("{}", u.sum().item::<f32>()?);
    Ok(())
}
