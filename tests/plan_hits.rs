//! Cached plans found by the roots' structural keys: DAGs whose trees look alike but whose
//! sharing or realized nodes differ get the right plan (results against a host
//! computation), and arrays move between threads: built on one, evaluated and read on
//! another, under many threads mixing plain evals, traced calls and drops.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, Device};

fn host(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32) * 0.25 - 3.0) * k).collect()
}

device_test!(same_tree_different_sharing);
fn same_tree_different_sharing(dev: &Device) {
    let n = 783;
    let (av, bv) = (host(n, 1.0), host(n, -0.5));
    let a = Array::from_slice_on(&av, &[n], dev).unwrap();
    let b = Array::from_slice_on(&bv, &[n], dev).unwrap();
    for round in 0..3 {
        // one node read twice
        let s = &a + &b;
        let y: Vec<f32> = (&s * &s).to_vec().unwrap();
        // the same tree built twice (two nodes)
        let z: Vec<f32> = ((&a + &b) * (&a + &b)).to_vec().unwrap();
        // a leaf read twice, against two leaves of one structure
        let w: Vec<f32> = (&a * &a).to_vec().unwrap();
        let v: Vec<f32> = (&a * &b).to_vec().unwrap();
        assert_eq!((y.len(), z.len(), w.len(), v.len()), (n, n, n, n));
        for i in 0..n {
            let s = av[i] + bv[i];
            assert_eq!(y[i], s * s, "round {round} element {i}");
            assert_eq!(z[i], s * s, "round {round} element {i}");
            assert_eq!(w[i], av[i] * av[i], "round {round} element {i}");
            assert_eq!(v[i], av[i] * bv[i], "round {round} element {i}");
        }
    }
}

device_test!(input_realized_after_building);
fn input_realized_after_building(dev: &Device) {
    let n = 3;
    let (av, bv) = (host(n, 2.0), host(n, 3.0));
    let a = Array::from_slice_on(&av, &[n], dev).unwrap();
    let b = Array::from_slice_on(&bv, &[n], dev).unwrap();
    for round in 0..4 {
        let x = &a + &b;
        let y = (&x * 2.0).exp();
        // alternate: the intermediate evaluated between building and evaluating `y`
        if round % 2 == 1 {
            x.eval().unwrap();
        }
        let got: Vec<f32> = y.to_vec().unwrap();
        let want: Vec<f32> = (0..n).map(|i| ((av[i] + bv[i]) * 2.0).exp()).collect();
        assert_eq!(got.len(), n);
        for i in 0..n {
            let tol = 1e-5 * want[i].abs().max(1.0);
            assert!(
                (got[i] - want[i]).abs() <= tol,
                "round {round} element {i}: {} != {}",
                got[i],
                want[i]
            );
        }
    }
}

device_test!(repeated_eval_hits_the_plan_cache);
fn repeated_eval_hits_the_plan_cache(dev: &Device) {
    let a = Array::from_slice_on(&host(17, 1.0), &[17], dev).unwrap();
    let ten = |a: &Array| (((a * 2.0 - 1.0).sin() * a).exp() + a).sqrt();
    ten(&a).eval().unwrap();
    let before = lf::stats();
    for _ in 0..10 {
        ten(&a).eval().unwrap();
    }
    let after = lf::stats();
    // other tests run at once in this binary: count at least this thread's hits, and
    // no plan made for a structure already planned
    assert!(after.plan_cache_hits - before.plan_cache_hits >= 10);
}

device_test!(arrays_move_between_threads);
fn arrays_move_between_threads(dev: &Device) {
    let n = 1025;
    let av = host(n, 1.5);
    let built: Array = std::thread::scope(|s| {
        s.spawn(|| {
            let a = Array::from_slice_on(&av, &[n], dev).unwrap();
            (&a * 2.0 + 1.0).abs().sqrt()
        })
        .join()
        .unwrap()
    });
    // evaluated on one thread, read on another
    let evaluated = std::thread::scope(|s| {
        s.spawn(|| {
            built.eval().unwrap();
            built.clone()
        })
        .join()
        .unwrap()
    });
    let got: Vec<f32> = std::thread::scope(|s| {
        s.spawn(|| evaluated.to_vec::<f32>().unwrap())
            .join()
            .unwrap()
    });
    // exactly what the same expression gives on this thread, and close to the host's
    let a = Array::from_slice_on(&av, &[n], dev).unwrap();
    let here: Vec<f32> = (&a * 2.0 + 1.0).abs().sqrt().to_vec().unwrap();
    assert_eq!(got.len(), n);
    assert_eq!(got, here);
    for i in 0..n {
        let w = (av[i] * 2.0 + 1.0).abs().sqrt();
        assert!((got[i] - w).abs() <= 1e-6 * w.max(1.0), "element {i}");
    }
}

#[test]
fn many_threads_mix_evals_calls_and_drops() {
    let devs = common::devices();
    let n = 64;
    let av = host(n, 0.125);
    let want: Vec<f32> = av.iter().map(|&x| (x * 3.0 - 1.0).tanh() + x).collect();
    let step = |x: &Array| (x * 3.0 - 1.0).tanh() + x;
    // warm: plans and kernels exist before the memory level is read
    for d in &devs {
        let a = Array::from_slice_on(&av, &[n], d).unwrap();
        step(&a).eval().unwrap();
        d.synchronize().unwrap();
    }
    let threads = 16;
    let iters = 100_000 / threads;
    let mut levels = Vec::new();
    for pass in 0..2 {
        std::thread::scope(|s| {
            for t in 0..threads {
                let (devs, av, want) = (&devs, &av, &want);
                s.spawn(move || {
                    let dev = &devs[t % devs.len()];
                    let a = Array::from_slice_on(av, &[n], dev).unwrap();
                    let f = lf::Function::trace(&[&a], |x| vec![step(&x[0])]).unwrap();
                    let mut kept = None;
                    for i in 0..iters {
                        let r = if i % 2 == 0 {
                            let y = step(&a);
                            y.eval().unwrap();
                            y
                        } else {
                            f.call(&[&a]).unwrap().remove(0)
                        };
                        if i % 997 == 0 {
                            let got: Vec<f32> = r.to_vec().unwrap();
                            assert_eq!(got.len(), n);
                            for (g, w) in got.iter().zip(want) {
                                assert!(
                                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                                    "pass {pass} thread {t} iteration {i}: {g} != {w}"
                                );
                            }
                        }
                        // every so often one result lives on across iterations
                        if i % 7 == 0 {
                            kept = Some(r);
                        }
                    }
                    drop(kept);
                    dev.synchronize().unwrap();
                });
            }
        });
        let m = lf::memory_stats();
        levels.push((m.host_bytes_live, m.device_bytes_live));
    }
    // memory is flat: the second pass ends where the first did (other tests of this binary
    // may hold arrays meanwhile, so allow their small inputs)
    let (h0, d0) = levels[0];
    let (h1, d1) = levels[1];
    assert!(h1 <= h0 + (1 << 20), "host memory grew: {h0} -> {h1} bytes");
    assert!(
        d1 <= d0 + (1 << 20),
        "device memory grew: {d0} -> {d1} bytes"
    );
}
