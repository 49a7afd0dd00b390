//! Phase retrieval: recover the pupil phase of a circular aperture from its simulated
//! point-spread function by Adam on the phase pixels. One optimization step (loss, gradient
//! through the FFT, Adam update) is one traced `Function` call. Prints the loss every 50
//! steps, the final relative phase error inside the aperture (up to the trivial
//! ambiguities: a constant offset, and the twin `-phi(-r)` that gives the same PSF) and the
//! time per step.
//!
//! Run: `cargo run --release --example 08_phase_retrieval [-- N STEPS LR]` (N = 256,
//! STEPS = 500, LR = 0.05: the Adam step size)

use lazyfuse as lf;
use lf::{Array, DType};

/// The aperture (1 inside a centred circle of radius n/4: the PSF is sampled at twice
/// Nyquist) and the true phase, smooth low-order aberrations (defocus, astigmatism, coma,
/// trefoil) of about half a radian RMS, as host vectors.
fn pupil(n: usize) -> (Vec<f64>, Vec<f64>) {
    let r0 = n as f64 / 4.0;
    let mut a = vec![0.0; n * n];
    let mut phi = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let y = (i as f64 - n as f64 / 2.0) / r0;
            let x = (j as f64 - n as f64 / 2.0) / r0;
            let rr = x * x + y * y;
            if rr <= 1.0 {
                a[i * n + j] = 1.0;
                phi[i * n + j] = 0.35 * (2.0 * rr - 1.0)
                    + 0.30 * (x * x - y * y)
                    + 0.25 * (3.0 * rr - 2.0) * x
                    + 0.20 * (y * y * y - 3.0 * x * x * y);
            }
        }
    }
    (a, phi)
}

/// `|fft2(a * e^{i phi})|^2`, normalized to unit sum.
fn psf(aperture: &Array, phase: &Array) -> Array {
    let field = lf::complex(&(aperture * &phase.cos()), &(aperture * &phase.sin()));
    let i = lf::fft::fft2(&field).abs().square();
    let total = aperture.sum() * aperture.size() as f64;
    i / total
}

/// Relative error of `est` against `truth` inside the aperture, after removing the mean
/// difference (a constant offset leaves the PSF unchanged).
fn rel_error(est: &[f64], truth: &[f64], a: &[f64]) -> f64 {
    let inside: Vec<usize> = (0..a.len()).filter(|&k| a[k] > 0.0).collect();
    let mean = inside.iter().map(|&k| est[k] - truth[k]).sum::<f64>() / inside.len() as f64;
    let num: f64 = inside
        .iter()
        .map(|&k| (est[k] - truth[k] - mean).powi(2))
        .sum();
    let tm = inside.iter().map(|&k| truth[k]).sum::<f64>() / inside.len() as f64;
    let den: f64 = inside.iter().map(|&k| (truth[k] - tm).powi(2)).sum();
    (num / den).sqrt()
}

fn main() -> lf::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(256);
    let steps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(500);
    let dev = lf::Device::try_default()?;
    lf::set_default_device(&dev);
    println!(
        "phase retrieval {n}x{n}, {steps} Adam steps on {dev} ({})",
        dev.name()
    );

    let (a_host, phi_true) = pupil(n);
    let aperture = Array::from_vec(a_host.clone(), &[n, n])?;
    let truth = Array::from_vec(phi_true.clone(), &[n, n])?;
    let measured = psf(&aperture, &truth);
    measured.eval()?;

    // Adam: (phase, m, v, lr_t) -> (phase', m', v', loss); lr_t carries the bias correction
    let (b1, b2, eps) = (0.9, 0.999, 1e-8);
    let zeros = || Array::zeros(&[n, n], DType::F64);
    let (mut phase, mut m, mut v) = (zeros(), zeros(), zeros());
    let lr0 = Array::full(&[], 0.0f64, DType::F64);
    // the measurement is data: evaluated already, and marked as a constant for `grad`
    let (ap, meas) = (aperture.clone(), (&measured + 1e-12).sqrt().stop_gradient());
    let step = lf::Function::trace(&[&phase, &m, &v, &lr0], move |x: &[Array]| {
        let (p, m, v, lr) = (&x[0], &x[1], &x[2], &x[3]);
        // amplitudes, not intensities: the better-conditioned fit (Gerchberg-Saxton's
        // error metric), with a floor that keeps the square root differentiable at 0
        let loss = ((psf(&ap, p) + 1e-12).sqrt() - &meas).square().sum();
        let g = lf::grad(&loss, &[p]).expect("gradient");
        let g = &g[0];
        let m2 = m * b1 + g * (1.0 - b1);
        let v2 = v * b2 + g.square() * (1.0 - b2);
        let p2 = p - &(lr * &m2 / (v2.sqrt() + eps));
        vec![p2, m2, v2, loss]
    })?;

    let lr: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0.05);
    let t0 = std::time::Instant::now();
    let mut last = f64::NAN;
    for t in 1..=steps {
        let lr_t = lr * (1.0 - f64::powi(b2, t as i32)).sqrt() / (1.0 - f64::powi(b1, t as i32));
        let lr_arr = Array::full(&[], lr_t, DType::F64);
        let out = step.call(&[&phase, &m, &v, &lr_arr])?;
        let mut it = out.into_iter();
        phase = it.next().expect("phase");
        m = it.next().expect("m");
        v = it.next().expect("v");
        let loss = it.next().expect("loss");
        if t % 50 == 0 || t == 1 {
            last = loss.item::<f64>()?;
            println!("step {t:4}: loss {last:.4e}");
        }
    }
    phase.eval()?;
    dev.synchronize()?;
    let per_step = t0.elapsed().as_secs_f64() / steps as f64;

    let est: Vec<f64> = phase.to_vec()?;
    // the twin: -phi(-r), about the grid's centre (index n - k, modulo n)
    let twin: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            -est[((n - i) % n) * n + (n - j) % n]
        })
        .collect();
    let err = rel_error(&est, &phi_true, &a_host).min(rel_error(&twin, &phi_true, &a_host));
    println!("final loss {last:.4e}; relative phase error inside the aperture {err:.3e}");
    println!(
        "time per step (loss, gradient, Adam update; one traced call): {:.1} us",
        per_step * 1e6
    );
    Ok(())
}
