//! Fused against unfused, side by side: the PSF pipeline and the elementwise chain of
//! BENCH.md, each evaluated with fusion on and off, with the profile (`lf::profile`) of one
//! warm evaluation of each and the synchronized time per eval.
//!
//! Run: `cargo run --release --example 04_fused_vs_unfused [-- N]` (N: PSF pupil size,
//! default 128; the chain runs over 16 N^2 elements).

mod common;

use lazyfuse as lf;
use lf::{Array, DType};
use std::f64::consts::PI;

/// The PSF intensity image (2N x 2N) of an N x N pupil (as `examples/02_psf.rs`).
fn psf(n: usize) -> Array {
    let x = Array::linspace(-1.0, 1.0, n, DType::F32);
    let g = lf::meshgrid(&[&x, &x], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phase = rho.square() * yy.atan2(xx).cos();
    let wave = (phase * (2.0 * PI) * lf::c64::i()).exp();
    let pupil = lf::where_(&rho.gt(1.0), lf::c64::new(0.0, 0.0), &wave);
    let p = n / 2;
    let padded = pupil.pad(&[(p, p), (p, p)], 0.0);
    let field = lf::fft::fftshift(&lf::fft::fft2(&lf::fft::ifftshift(&padded, None)), None);
    field.abs().square()
}

/// The BENCH.md chain: 12 elementwise operations over two inputs.
fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (&r * -0.5).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, &z * 0.1) + 1.0
}

/// Evaluates `build()` once to warm up (plan, compile), then prints the profile of one warm
/// eval and the synchronized median time per eval.
fn compare(dev: &lf::Device, what: &str, build: &dyn Fn() -> Array) -> lf::Result<()> {
    for fused in [true, false] {
        lf::set_fusion(fused);
        build().eval()?;
        dev.synchronize()?;
        let (result, report) = lf::profile(|| build().eval());
        result?;
        let t = common::time_per_call(dev, 10, 5, || build().eval().expect("eval"));
        println!(
            "== {what}, fusion {}: {:.1} us per eval (synchronized median); {} kernels, {} \
             library calls, device {:.1} us",
            if fused { "on" } else { "off" },
            t * 1e6,
            report.kernels().len(),
            report.library_calls().len(),
            report.compute_time().as_secs_f64() * 1e6
        );
        println!("{report}\n");
    }
    lf::set_fusion(true);
    Ok(())
}

fn main() -> lf::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    println!("on {dev} ({})\n", dev.name());

    compare(&dev, &format!("psf {n}"), &|| psf(n))?;

    let len = 16 * n * n;
    let x = lf::random::normal(&[len], DType::F32, 1);
    let y = lf::random::normal(&[len], DType::F32, 2);
    lf::eval(&[&x, &y])?;
    compare(&dev, &format!("chain {len}"), &|| chain(&x, &y))?;
    Ok(())
}
