//! Planning cost of wide and long graphs: a sum of N distinct inputs, `x + c_i` over N
//! constants, and a chain of 10^5 alternating ops (planned alone, then evaluated from
//! scratch). `cargo run --release --example plan_cost -- [REPEAT]` plans the chain REPEAT
//! times (chains of distinct lengths, so none hits the plan cache), for profiling.
use lazyfuse as lf;
use lf::Array;
use std::time::Instant;

/// `n` ops alternating `* 1.0001` and `+ 0.001` (starting with the product when `mul_first`)
/// on a 2-element f64 array.
fn chain(n: usize, mul_first: bool, dev: &lf::Device) -> lf::Result<Array> {
    let mut x = Array::from_vec_on(vec![0.5f64, 1.0], &[2], dev)?;
    for i in 0..n {
        x = if (i % 2 == 0) == mul_first {
            &x * 1.0001
        } else {
            &x + 0.001
        };
    }
    Ok(x)
}

fn main() -> lf::Result<()> {
    let repeat: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dev = lf::Device::Cpu;
    for n in [400usize, 800, 2000] {
        let xs: Vec<Array> = (0..n)
            .map(|i| Array::from_vec_on(vec![i as f64; 4], &[4], &dev))
            .collect::<lf::Result<_>>()?;
        let mut s = xs[0].clone();
        for x in &xs[1..] {
            s = &s + x;
        }
        let t = Instant::now();
        let k = lf::debug::kernel_count(&[&s])?;
        println!(
            "sum of {n} inputs: {k} kernels, planned in {:?}",
            t.elapsed()
        );
    }
    let n = 100_000;
    for r in 0..repeat {
        let x = chain(n + r, true, &dev)?;
        let t = Instant::now();
        let k = lf::debug::kernel_count(&[&x])?;
        println!(
            "chain of {} ops: {k} kernels, planned in {:?}",
            n + r,
            t.elapsed()
        );
    }
    {
        // a chain of another structure: its first eval plans, prepares and runs
        let x = chain(n, false, &dev)?;
        let t = Instant::now();
        x.eval()?;
        let v: Vec<f64> = x.to_vec()?;
        println!(
            "chain of {n} ops: first eval (plan + run) in {:?}",
            t.elapsed()
        );
        let mut want = [0.5f64, 1.0];
        for i in 0..n {
            for w in &mut want {
                *w = if i % 2 == 0 { *w + 0.001 } else { *w * 1.0001 };
            }
        }
        println!("  value {v:?} (want {want:?})");
        let y = chain(n, false, &dev)?;
        let t = Instant::now();
        y.eval()?;
        println!(
            "chain of {n} ops: second eval (cached plan) in {:?}",
            t.elapsed()
        );
    }
    for n in [5000usize] {
        let x = Array::from_vec_on(vec![1.0f64; 4], &[4], &dev)?;
        let mut s = x.clone();
        for i in 0..n {
            s = &s + (i as f64 * 1e-3);
        }
        let t = Instant::now();
        let k = lf::debug::kernel_count(&[&s])?;
        println!(
            "x + c_i over {n} constants: {k} kernels, planned in {:?}",
            t.elapsed()
        );
        let v: Vec<f64> = s.to_vec()?;
        let want = 1.0 + (0..n).map(|i| i as f64 * 1e-3).sum::<f64>();
        println!("  value {} (want {want})", v[0]);
    }
    Ok(())
}
