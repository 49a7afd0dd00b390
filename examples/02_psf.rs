//! The optics point-spread-function pipeline of BENCH.md (`psf`): pupil phase error ->
//! complex pupil -> zero padding -> fft2 with shifts -> intensity. Plans to one fused
//! kernel, one FFT and one fused kernel.
//!
//! Run: `cargo run --release --example 02_psf [-- N]` (N defaults to 128; writes psf.png)

mod common;

use common::psf;
use lazyfuse as lf;

fn main() -> lf::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    let m = 2 * n;
    println!("psf {n}x{n} (FFT of {m}x{m}) on {dev} ({})", dev.name());

    let img = psf(n, &dev);
    println!(
        "plan: {} fused kernels + {} FFT",
        lf::debug::kernel_count(&[&img])?,
        lf::debug::library_count(&[&img])?
    );
    let t0 = std::time::Instant::now();
    img.eval()?;
    dev.synchronize()?;
    println!(
        "first eval (plan + compile + run): {:.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );

    let iters = if n >= 1024 { 5 } else { 20 };
    let t = common::time_per_call(&dev, iters, 5, || psf(n, &dev).eval().expect("eval"));
    println!("per eval (synchronized, median): {:.1} us", t * 1e6);

    let t0 = std::time::Instant::now();
    let host: Vec<f32> = img.to_vec()?;
    let secs = t0.elapsed().as_secs_f64();
    let bytes = 4.0 * host.len() as f64;
    println!(
        "readback of {:.1} MB into a fresh Vec: {:.2} ms ({:.1} GB/s)",
        bytes / 1e6,
        secs * 1e3,
        bytes / secs / 1e9
    );
    let (arg, peak) = host
        .iter()
        .enumerate()
        .fold((0, f32::MIN), |m, (i, &v)| if v > m.1 { (i, v) } else { m });
    println!("peak {peak:.6e} at ({}, {})", arg / (2 * n), arg % (2 * n));
    common::write_png("psf.png", &host, 2 * n, 2 * n, true)
        .map_err(|e| lf::Error::Config(format!("psf.png: {e}")))?;
    println!("wrote psf.png");
    Ok(())
}
