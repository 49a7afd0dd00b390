//! Helpers shared by the examples and the workloads bench: the BENCH.md workload
//! definitions (psf, chain), timing with device synchronization and PNG output.
#![allow(dead_code)]

use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::time::Instant;

/// The device named among the command-line `args` (`cpu` or `cuda`, for CUDA device 0),
/// else the default device.
pub fn device_arg(args: &[String]) -> lf::Result<Device> {
    match args.iter().find(|a| *a == "cpu" || *a == "cuda") {
        Some(d) if d == "cpu" => Ok(Device::Cpu),
        Some(_) => Device::cuda(0),
        None => Device::try_default(),
    }
}

/// The PSF intensity image (2N x 2N) of an N x N pupil with a coma-like phase error, on
/// `dev` (BENCH.md `psf`): pupil phase -> complex pupil -> zero padding -> fft2 with shifts
/// -> intensity.
pub fn psf(n: usize, dev: &Device) -> Array {
    psf_of(&Array::linspace_on(-1.0, 1.0, n, DType::F32, dev))
}

/// The pipeline of [`psf`] from the pupil's coordinate vector `x` (n values): a traced
/// `Function` of `x` runs the whole pipeline per call.
pub fn psf_of(x: &Array) -> Array {
    let n = x.shape()[0];
    let g = lf::meshgrid(&[x, x], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phi = yy.atan2(xx);
    let phase = rho.square() * phi.cos();
    let wave = (phase * (2.0 * std::f64::consts::PI) * lf::c64::i()).exp(); // complex64
    let pupil = lf::where_(&rho.gt(1.0), lf::c64::new(0.0, 0.0), &wave);
    let p = n / 2;
    let padded = pupil.pad(&[(p, p), (p, p)], 0.0);
    let field = lf::fft::fftshift(&lf::fft::fft2(&lf::fft::ifftshift(&padded, None)), None);
    field.abs().square()
}

/// The PSF-fit loss of the gradient benchmarks: `sum((|fft2(a e^{i phase})|^2 / norm -
/// target)^2)`, `norm` the squared number of pixels.
pub fn psf_loss(aperture: &Array, phase: &Array, target: &Array) -> Array {
    let field = lf::complex(&(aperture * &phase.cos()), &(aperture * &phase.sin()));
    let norm = 1.0 / (aperture.size() as f64 * aperture.size() as f64);
    ((lf::fft::fft2(&field).abs().square() * norm) - target)
        .square()
        .sum()
}

/// The BENCH.md elementwise chain of two f32 arrays (sqrt, atan2, cos, sin, exp, where).
pub fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (&r * -0.5).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, &z * 0.1) + 1.0
}

/// One Allen-Cahn semi-implicit spectral step (BENCH.md `sim100`):
/// `u += dt (u - u^3); u = real(ifft2(fft2(u) * mult))`.
pub fn sim_step(u: &Array, mult: &Array, dt: f64) -> Array {
    let u = u + (u - u.powi(3)) * dt;
    lf::fft::ifft2(&(lf::fft::fft2(&u) * mult)).real()
}

/// The step's multiplier on `dev`: `1 / (1 + dt k^2)` with `k = 2 pi fftfreq(n, 1/n) / n`
/// on both axes, as the NumPy anchor computes it.
pub fn sim_mult(n: usize, dt: f64, dev: &Device) -> lf::Result<Array> {
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
    let mult: Vec<f32> = (0..n * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            1.0 / (1.0 + dt as f32 * (k[c] * k[c] + k[r] * k[r]))
        })
        .collect();
    Array::from_vec_on(mult, &[n, n], dev)
}

/// Median seconds per call of `f` over `repeats` runs of `iters` calls, after 3 warm-up
/// calls; the device is synchronized before every clock read.
pub fn time_per_call(dev: &lf::Device, iters: usize, repeats: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    dev.synchronize().expect("synchronize");
    let mut ts: Vec<f64> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            dev.synchronize().expect("synchronize");
            t.elapsed().as_secs_f64() / iters as f64
        })
        .collect();
    ts.sort_by(|a, b| a.total_cmp(b));
    ts[ts.len() / 2]
}

/// Writes a 2-D image (row-major `h x w`) as an 8-bit grayscale PNG, scaled to its
/// maximum, with `log` compressing the dynamic range.
pub fn write_png(path: &str, data: &[f32], h: usize, w: usize, log: bool) -> std::io::Result<()> {
    let f = |v: f32| if log { (1.0 + v.max(0.0)).ln() } else { v };
    let max = data
        .iter()
        .copied()
        .map(f)
        .fold(f32::MIN_POSITIVE, f32::max);
    let (lo, hi) = if log {
        (0.0, max)
    } else {
        (data.iter().copied().fold(f32::MAX, f32::min), max)
    };
    let span = (hi - lo).max(f32::MIN_POSITIVE);
    let pixels: Vec<u8> = data
        .iter()
        .map(|&v| (255.0 * (f(v) - lo) / span).clamp(0.0, 255.0) as u8)
        .collect();
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut enc = png::Encoder::new(file, w as u32, h as u32);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(std::io::Error::other)?;
    writer
        .write_image_data(&pixels)
        .map_err(std::io::Error::other)?;
    Ok(())
}
