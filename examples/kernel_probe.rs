//! Kernel probe for hardware counters: evaluates one workload twice (`kernel_probe chain N`,
//! `psf N`, `mean N` for an N x N matrix, `grad N`: the PSF-fit loss and its gradient
//! at N x N, or `sim4 N`: four Allen-Cahn steps of an N x N field built before one eval;
//! the first evaluation compiles), synchronizing after each, so that
//! `ncu --clock-control none` on the GPU machine sees each fused kernel of the second run.
mod common;

use common::{chain, psf, psf_loss, sim_mult, sim_step};
use lazyfuse as lf;
use lf::DType;

fn main() -> lf::Result<()> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "chain".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let dev = lf::default_device();
    let (x, y) = match what.as_str() {
        "chain" => (
            lf::random::normal_on(&[n], DType::F32, 10, &dev),
            lf::random::normal_on(&[n], DType::F32, 20, &dev),
        ),
        // mean: an n x n matrix
        _ => {
            let k = if what == "mean" { n } else { 1 };
            let m = lf::random::uniform_on(&[k, k], DType::F32, 30, &dev);
            (m.clone(), m)
        }
    };
    lf::eval(&[&x, &y])?;
    let phase = lf::random::normal_on(&[n, n], DType::F32, 1, &dev) * 0.3;
    let target = lf::random::uniform_on(&[n, n], DType::F32, 2, &dev) * 1e-4;
    let aperture = lf::random::uniform_on(&[n, n], DType::F32, 3, &dev);
    if what == "grad" {
        lf::eval(&[&phase, &target, &aperture])?;
    }
    let (field, mult) = match what.as_str() {
        "sim4" => {
            let u = lf::random::normal_on(&[n, n], DType::F32, 4, &dev) * 0.1;
            u.eval()?;
            (u, sim_mult(n, 0.1, &dev)?)
        }
        _ => (x.clone(), x.clone()),
    };
    for _ in 0..2 {
        let r = match what.as_str() {
            "psf" => psf(n, &dev),
            "mean" => x.mean_axes(&[0], false),
            "sim4" => (0..4).fold(field.clone(), |u, _| sim_step(&u, &mult, 0.1)),
            "grad" => {
                let loss = psf_loss(&aperture, &phase, &target);
                let g = lf::grad(&loss, &[&phase])?;
                lf::eval(&[&loss, &g[0]])?;
                g[0].clone()
            }
            _ => chain(&x, &y),
        };
        r.eval()?;
        dev.synchronize()?;
        println!("{what} {n}: {:?} {:?}", r.shape(), r.dtype());
    }
    Ok(())
}
