//! Stress soak (the large version of the stress tests): long chains, wide concatenations,
//! threads sharing expressions with in-place reuse, and a long loop with flat memory, each
//! checked against a host computation. `cargo run --release --example soak -- [SCALE]`
//! (SCALE 1 = chains of 10^5 ops, 10^4-array concatenations, 8 threads x 10^4 evals, 10^6
//! loop steps). Prints one line per part and exits non-zero on any wrong answer or error.

use lazyfuse as lf;
use lf::Array;
use std::time::Instant;

fn check(what: &str, ok: bool, t: Instant) -> bool {
    println!(
        "{what}: {} in {:.2?}",
        if ok { "ok" } else { "WRONG" },
        t.elapsed()
    );
    ok
}

fn main() -> lf::Result<()> {
    let scale: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let n = |base: f64| ((base * scale) as usize).max(1);
    let dev = lf::default_device();
    println!("soak on {dev} at scale {scale}");
    let mut ok = true;

    // a chain of 10^5 ops
    let t = Instant::now();
    let ops = n(1e5);
    let mut x = Array::from_vec_on(vec![0.5f64, 1.0], &[2], &dev)?;
    let mut want = [0.5f64, 1.0];
    for i in 0..ops {
        if i % 2 == 0 {
            x = &x * 1.0001;
            want.iter_mut().for_each(|w| *w *= 1.0001);
        } else {
            x = &x + 0.001;
            want.iter_mut().for_each(|w| *w += 0.001);
        }
    }
    let got: Vec<f64> = x.to_vec()?;
    let close = got
        .iter()
        .zip(&want)
        .all(|(g, w)| (g - w).abs() <= 1e-9 * w.abs());
    ok &= check(&format!("chain of {ops} ops"), close, t);

    // a concatenation of 10^4 arrays
    let t = Instant::now();
    let parts_n = n(1e4);
    let parts: Vec<Array> = (0..parts_n)
        .map(|i| Array::from_vec_on(vec![i as f64, -(i as f64)], &[2], &dev))
        .collect::<lf::Result<_>>()?;
    let refs: Vec<&Array> = parts.iter().collect();
    let c: Vec<f64> = lf::concatenate(&refs, 0).to_vec()?;
    let good = (0..parts_n).all(|i| c[2 * i] == i as f64 && c[2 * i + 1] == -(i as f64));
    ok &= check(&format!("concatenate of {parts_n} arrays"), good, t);

    // 8 threads x 10^4 evals of shared expressions with in-place reuse
    let t = Instant::now();
    let evals = n(1e4);
    let base = Array::from_vec_on(vec![1.0f64, 2.0, 3.0], &[3], &dev)?;
    base.eval()?;
    let wrong = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..evals {
                    let x = &base * 2.0;
                    let r = x.eval().and_then(|()| (x * 0.5 + 1.0).to_vec::<f64>());
                    if r.ok() != Some(vec![2.0, 3.0, 4.0]) {
                        wrong.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let w = wrong.into_inner();
    ok &= check(
        &format!("8 threads x {evals} shared evals ({w} wrong or failed)"),
        w == 0,
        t,
    );

    // 10^6 loop steps, memory flat
    let t = Instant::now();
    let steps = n(1e6);
    let mut u = Array::from_vec_on(vec![0.25f32; 256], &[256], &dev)?;
    let mut host = 0.25f32;
    let mut level = None;
    let mut flat = true;
    for k in 0..steps {
        u = &u * 0.5 + 0.125;
        u.eval()?;
        host = host * 0.5 + 0.125;
        if k == 1000 {
            level = Some(lf::memory_stats());
        } else if k % 100_000 == 0 && k > 1000 {
            let m = lf::memory_stats();
            let l = level.unwrap_or(m);
            flat &= m.host_bytes_live <= l.host_bytes_live
                && m.device_bytes_live <= l.device_bytes_live;
        }
    }
    let v: Vec<f32> = u.to_vec()?;
    let good = flat && v.iter().all(|&g| (g - host).abs() <= 1e-6);
    ok &= check(
        &format!("{steps} loop steps (memory flat: {flat})"),
        good,
        t,
    );

    if !ok {
        return Err(lf::Error::Config("soak: a part gave a wrong answer".into()));
    }
    Ok(())
}
