//! The basics: build a lazy expression, look at its plan, evaluate it on the default
//! device (CUDA when present, else CPU) and read results back.
//!
//! Run: `cargo run --release --example 01_basics`

use lazyfuse as lf;
use lf::{Array, DType};
use std::time::Instant;

fn main() -> lf::Result<()> {
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    println!("device: {} ({})", dev, dev.name());

    // Creation functions are lazy too: nothing is computed yet.
    let n = 1 << 20;
    let x = lf::random::normal(&[n], DType::F32, 1);
    let y = lf::random::normal(&[n], DType::F32, 2);

    // The chain of BENCH.md: 16 elementwise operations.
    let r = (&x * &x + &y * &y).sqrt();
    let t = y.atan2(&x);
    let z = &r * t.cos() + (&r * -0.5).exp() * t.sin();
    let out = lf::where_(&z.gt(0.0), &z, &z * 0.1) + 1.0;
    println!("planned kernels: {}", lf::debug::kernel_count(&[&out])?);

    lf::reset_stats();
    let t0 = Instant::now();
    out.eval()?;
    dev.synchronize()?;
    let first = t0.elapsed();
    let s = lf::stats();
    println!(
        "first eval: {first:?} ({} kernel launched, {} compiled, {:?} compiling)",
        s.kernels_launched,
        s.kernels_compiled,
        s.compile_time()
    );

    // Rebuilding the same expression with new data reuses the compiled kernel.
    let x2 = lf::random::normal(&[n], DType::F32, 3);
    let again = (&x2 * &x2 + 1.0).sqrt();
    let t0 = Instant::now();
    again.eval()?;
    dev.synchronize()?;
    println!("another expression: {:?}", t0.elapsed());

    // Readback: only to_host / to_vec / item copy to the host.
    let first_three: Vec<f32> = out.slice(lf::s![..3]).to_vec()?;
    println!("out[..3] = {first_three:?}");
    let last: f32 = out.slice(lf::s![-1]).item()?;
    println!("out[-1] = {last}");

    // Views fuse: a padded, rolled, transposed grid is still one kernel.
    let g = Array::arange(0.0, 12.0, 1.0, DType::F64).reshape(&[3, 4]);
    let v = g.pad(&[(1, 1), (0, 0)], -1.0).roll(1, 1).transpose() * 10.0;
    println!("view chain kernels: {}", lf::debug::kernel_count(&[&v])?);
    println!("{}", v.to_host::<f64>()?);
    Ok(())
}
