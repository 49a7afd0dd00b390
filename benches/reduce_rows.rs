//! BENCH.md reduction workloads (sumsq, mean over an axis) on the default device, fused and
//! unfused, as TSV rows `workload size system time_us extra` (merged into `workloads`).

use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::time::Instant;

fn bench(dev: &Device, iters: usize, repeats: usize, mut f: impl FnMut(usize)) -> f64 {
    for i in 0..3 {
        f(i);
    }
    dev.synchronize().expect("synchronize");
    let mut ts = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        dev.synchronize().expect("synchronize");
        ts.push(t.elapsed().as_secs_f64() / iters as f64);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ts[ts.len() / 2]
}

fn main() -> lf::Result<()> {
    let dev = Device::try_default()?;
    lf::set_default_device(&dev);
    let big = dev.is_cuda();
    for n in [1usize << 20, if big { 1 << 26 } else { 1 << 22 }] {
        let sets = if n <= 1 << 22 { 4 } else { 1 };
        let xs: Vec<Array> = (0..sets)
            .map(|s| lf::random::normal_on(&[n], DType::F32, 5 + s as u64, &dev))
            .collect();
        lf::eval(&xs.iter().collect::<Vec<_>>())?;
        for fused in [true, false] {
            lf::set_fusion(fused);
            let t = bench(&dev, 20, 7, |i| {
                let x = &xs[i % sets];
                (x * x).sum().eval().expect("eval");
            });
            let sys = if fused {
                "lazyfuse-fused"
            } else {
                "lazyfuse-unfused"
            };
            println!(
                "sumsq\t{n}\t{sys}\t{:.1} us\t{:.0} GB/s",
                t * 1e6,
                4.0 * n as f64 / t / 1e9
            );
        }
        lf::set_fusion(true);
    }
    let side = if big { 4096 } else { 1024 };
    let x = lf::random::normal_on(&[side, side], DType::F32, 9, &dev);
    x.eval()?;
    for axis in [0isize, 1] {
        let t = bench(&dev, 20, 7, |_| {
            x.mean_axes(&[axis], false).eval().expect("eval")
        });
        println!(
            "mean-axis{axis}\t{side}x{side}\tlazyfuse-fused\t{:.1} us\t{:.0} GB/s",
            t * 1e6,
            4.0 * (side * side) as f64 / t / 1e9
        );
    }
    Ok(())
}
