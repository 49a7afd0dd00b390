//! Throughput of independent work from 1, 2, 4, 8 and 16 threads on one device
//! (`threads [cpu|cuda] [seconds-per-point]`): each thread rebuilds and evaluates the 10-op
//! expression on its own 1024-element inputs (each result dropped before the next), or calls
//! its own traced psf-128 `Function`; every thread synchronizes the device before the clock
//! stops. Prints one TSV row per (workload, threads): calls per second and the speed-up over
//! one thread.
use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;

fn ten(a: &Array, b: &Array) -> Array {
    ((((a + b) * 2.0 - 1.0).sin() * b).exp() + a).sqrt().abs() * 3.0 - b
}

/// Runs `work` (one call per invocation, given the thread's index) on `threads` threads for
/// about `secs`, after a warm-up; calls per second over all threads.
fn throughput(
    dev: &Device,
    threads: usize,
    secs: f64,
    make: &(dyn Fn(usize) -> Box<dyn FnMut() + Send> + Sync),
) -> f64 {
    let start = std::sync::Barrier::new(threads);
    let total: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let (start, dev) = (&start, dev.clone());
                s.spawn(move || {
                    let mut work = make(k);
                    for _ in 0..200 {
                        work();
                    }
                    dev.synchronize().expect("synchronize");
                    start.wait();
                    let t = Instant::now();
                    let mut n = 0usize;
                    while t.elapsed() < Duration::from_secs_f64(secs) {
                        for _ in 0..50 {
                            work();
                        }
                        n += 50;
                    }
                    dev.synchronize().expect("synchronize");
                    (n, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        let res: Vec<(usize, f64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let longest = res.iter().map(|r| r.1).fold(0.0, f64::max);
        (res.iter().map(|r| r.0).sum::<usize>() as f64 / longest) as usize
    });
    total as f64
}

fn main() -> lf::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dev = common::device_arg(&args)?;
    let secs: f64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(0.5);
    lf::set_default_device(&dev);
    println!("# threads on {dev} ({})", dev.name());
    println!("workload\tthreads\tcalls_per_s\tspeedup");
    let ten_ops = |k: usize| -> Box<dyn FnMut() + Send> {
        let dev = lf::default_device();
        let a = Array::linspace_on(0.0, 1.0 + k as f64, 1024, DType::F32, &dev);
        let b = Array::full_on(&[1024], 0.5 + k as f64, DType::F32, &dev);
        lf::eval(&[&a, &b]).expect("eval");
        Box::new(move || ten(&a, &b).eval().expect("eval"))
    };
    let psf = |k: usize| -> Box<dyn FnMut() + Send> {
        let dev = lf::default_device();
        let x = Array::linspace_on(-1.0, 1.0 + 1e-3 * k as f64, 128, DType::F32, &dev);
        x.eval().expect("eval");
        let f = lf::Function::trace(&[&x], |xs| vec![common::psf_of(&xs[0])]).expect("trace");
        Box::new(move || drop(f.call(&[&x]).expect("call")))
    };
    type Make<'a> = &'a (dyn Fn(usize) -> Box<dyn FnMut() + Send> + Sync);
    let workloads: [(&str, Make); 2] = [("10-op eval 1024", &ten_ops), ("psf128 Function", &psf)];
    for (name, make) in workloads {
        let mut one = 0.0;
        for threads in [1usize, 2, 4, 8, 16] {
            let r = throughput(&dev, threads, secs, make);
            if threads == 1 {
                one = r;
            }
            println!("{name}\t{threads}\t{r:.0}\t{:.2}", r / one);
        }
    }
    Ok(())
}
