//! The 1000 x 1000 F64 matrix product timed right: the first call (planning, library
//! set-up, compiles) apart from warm calls, every warm timing closed by a device
//! synchronize, the library product (cuBLAS / ndarray) against a hand-fused naive product
//! (`(a[:, :, None] * b[None, :, :]).sum(axis=1)`, one fused reduction kernel), and a
//! profile of each saying where the time went.
//!
//! Run: `cargo run --release --example 05_matmul_timing [-- N]` (N defaults to 1000)

mod common;

use lazyfuse as lf;
use lf::{Array, DType};
use std::time::Instant;

/// The naive product as one fused reduction: every `a[i, k] * b[k, j]` computed inside
/// the kernel that sums over `k` (nothing of size n^3 is stored).
fn naive(a: &Array, b: &Array) -> Array {
    let n = a.shape()[0] as isize;
    let (k, m) = (b.shape()[0] as isize, b.shape()[1] as isize);
    let x = a.reshape(&[n, k, 1]);
    let y = b.reshape(&[1, k, m]);
    (&x * &y).sum_axes(&[1], false)
}

fn main() -> lf::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    println!("matmul {n}x{n} float64 on {dev} ({})", dev.name());
    let a = lf::random::uniform(&[n, n], DType::F64, 1);
    let b = lf::random::uniform(&[n, n], DType::F64, 2);
    lf::eval(&[&a, &b])?;
    dev.synchronize()?;
    let flops = 2.0 * (n as f64).powi(3);

    // 1. The first call pays for planning and the library's set-up: time it apart, with a
    //    synchronize, and never mix it into the warm numbers.
    let t = Instant::now();
    let (c, first) = lf::profile(|| {
        let c = a.matmul(&b);
        c.eval().map(|_| c)
    });
    let c = c?;
    dev.synchronize()?;
    println!(
        "\nfirst call (plan + library set-up + run): {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    println!("{first}");
    // Keep the answer on the host and drop the array: while an evaluated product is alive,
    // building `a.matmul(&b)` again can return that same (already computed) node, and a
    // "warm call" would time nothing.
    let x = c.to_vec::<f64>()?;
    drop(c);

    // 2. Warm calls. `eval` only queues work: the clock is read after a synchronize.
    let t = Instant::now();
    a.matmul(&b).eval()?;
    let queued = t.elapsed().as_secs_f64();
    dev.synchronize()?;
    let done = t.elapsed().as_secs_f64();
    println!(
        "one warm call: eval returned after {:.1} us, the product was done after {:.1} us",
        queued * 1e6,
        done * 1e6
    );
    let iters = if dev.is_cuda() { 50 } else { 2 };
    let lib = common::time_per_call(&dev, iters, 5, || {
        a.matmul(&b).eval().expect("eval");
    });
    println!(
        "library product, warm (median, synchronized): {:.1} us = {:.0} GFLOP/s",
        lib * 1e6,
        flops / lib / 1e9
    );

    // 3. The naive product as one fused kernel: same answer, compiled once.
    let (d, first) = lf::profile(|| {
        let d = naive(&a, &b);
        d.eval().map(|_| d)
    });
    let y = d?.to_vec::<f64>()?;
    println!("\nnaive fused product, first call:\n{first}");
    let fused = common::time_per_call(&dev, iters.div_ceil(10), 3, || {
        naive(&a, &b).eval().expect("eval");
    });
    println!(
        "naive fused product, warm (median, synchronized): {:.1} us = {:.0} GFLOP/s ({:.1}x the library's time)",
        fused * 1e6,
        flops / fused / 1e9,
        fused / lib
    );
    let (_, warm) = lf::profile(|| naive(&a, &b).eval());
    println!("{warm}");

    // 4. Both give the same product (read back before the timings, outside them).
    let err = x
        .iter()
        .zip(&y)
        .map(|(p, q)| (p - q).abs() / p.abs().max(1.0))
        .fold(0.0f64, f64::max);
    println!("largest relative difference between the two products: {err:.2e}");
    Ok(())
}
