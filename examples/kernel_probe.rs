//! Kernel probe for hardware counters: evaluates one workload twice (`kernel_probe chain N`,
//! `psf N` or `mean N` for an N x N matrix; the first evaluation compiles), synchronizing after each, so that
//! `ncu --clock-control none` on the GPU machine sees each fused kernel of the second run.
use lazyfuse as lf;
use lf::{Array, DType, Device};

fn chain(x: &Array, y: &Array) -> Array {
    let r = (x * x + y * y).sqrt();
    let t = y.atan2(x);
    let z = &r * t.cos() + (&r * -0.5).exp() * t.sin();
    lf::where_(&z.gt(0.0), &z, &z * 0.1) + 1.0
}

fn psf(n: usize, dev: &Device) -> Array {
    let x = Array::linspace_on(-1.0, 1.0, n, DType::F32, dev);
    let g = lf::meshgrid(&[&x, &x], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phi = yy.atan2(xx);
    let phase = rho.square() * phi.cos();
    let wave = (phase * (2.0 * std::f64::consts::PI) * lf::c64::i()).exp();
    let pupil = lf::where_(&rho.gt(1.0), lf::c64::new(0.0, 0.0), &wave);
    let p = n / 2;
    let padded = pupil.pad(&[(p, p), (p, p)], 0.0);
    let field = lf::fft::fftshift(&lf::fft::fft2(&lf::fft::ifftshift(&padded, None)), None);
    field.abs().square()
}

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
    for _ in 0..2 {
        let r = match what.as_str() {
            "psf" => psf(n, &dev),
            "mean" => x.mean_axes(&[0], false),
            _ => chain(&x, &y),
        };
        r.eval()?;
        dev.synchronize()?;
        println!("{what} {n}: {:?} {:?}", r.shape(), r.dtype());
    }
    Ok(())
}
