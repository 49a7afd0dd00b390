//! The three classic timing mistakes on a GPU, and what the profile shows instead: timing
//! an asynchronous launch, counting compile time as run time, and blaming the readback for
//! the compute it waits for. Prints the profiles used in the README's "Where did my time
//! go?" section.
//!
//! Run: `cargo run --release --example 06_where_did_my_time_go [-- N]` (default N = 512).

use lazyfuse as lf;
use lf::{Array, DType};
use std::time::Instant;

/// The BENCH.md chain over `x` and `y`.
fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (&r * -0.5).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, &z * 0.1) + 1.0
}

fn main() -> lf::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    let len = n * n;
    println!("chain over {len} f32 on {dev} ({})\n", dev.name());
    let x = lf::random::normal(&[len], DType::F32, 1);
    let y = lf::random::normal(&[len], DType::F32, 2);
    lf::eval(&[&x, &y])?;
    dev.synchronize()?;

    // 1 + 2: the first eval of a new expression plans it and compiles its kernel.
    let t = Instant::now();
    let (r, first) = lf::profile(|| chain(&x, &y).eval());
    r?;
    println!(
        "first eval, timed around the call: {:.1} us (plan + compile + run)",
        t.elapsed().as_secs_f64() * 1e6
    );
    println!("{first}\n");

    // 1: a warm eval returns once the kernel is queued; the clock around it sees the queueing.
    let z = chain(&x, &y);
    let t = Instant::now();
    z.eval()?;
    let queued = t.elapsed();
    dev.synchronize()?;
    let (r, warm) = lf::profile(|| chain(&x, &y).eval());
    r?;
    println!(
        "warm eval, timed around the call without a synchronize: {:.1} us; device time of \
         its kernel: {:.1} us",
        queued.as_secs_f64() * 1e6,
        warm.compute_time().as_secs_f64() * 1e6
    );
    println!("{warm}\n");

    // 3: the readback waits for the queued kernel before it copies.
    let (v, readback) = lf::profile(|| chain(&x, &y).to_vec::<f32>());
    println!("to_vec of {} values:", v?.len());
    println!("{readback}");
    Ok(())
}
