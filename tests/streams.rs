//! Streams per thread: arrays made on one thread (one stream) and read, consumed or dropped
//! on another, explicit streams through `lf::with_stream`, many threads mixing plain evals,
//! traced calls and drops, and the driver calls of a cached eval. Every result is compared
//! with a host computation of the same values.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};

/// A long elementwise chain over `n` values, so that its kernel is still running on the
/// producing stream when another thread reads the result (on CUDA).
fn slow_chain(x: &Array, rounds: usize) -> Array {
    let mut y = x.clone();
    for _ in 0..rounds {
        y = (&y * 1.0001).sin() + &y * 0.5;
    }
    y
}

fn slow_chain_host(x: f64, rounds: usize) -> f64 {
    let mut y = x;
    for _ in 0..rounds {
        y = (y * 1.0001).sin() + y * 0.5;
    }
    y
}

fn host_input(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 7919) % 1000) as f64 / 997.0).collect()
}

fn assert_close(got: &[f64], want: impl Iterator<Item = f64>, what: &str) {
    let mut count = 0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * w.abs().max(1.0),
            "{what}: element {i}: {g} != {w}"
        );
        count += 1;
    }
    assert_eq!(count, got.len(), "{what}: length");
}

device_test!(arrays_made_on_one_thread_are_read_exactly_on_another);
fn arrays_made_on_one_thread_are_read_exactly_on_another(dev: &Device) {
    let n = 1 << 20 | 1;
    let host = host_input(n);
    let x = Array::from_slice_on(&host, &[n], dev).unwrap();
    // evaluated (queued) on this thread's stream, read on another thread's right away
    let y = slow_chain(&x, 24);
    y.eval().unwrap();
    let got: Vec<f64> = std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(y.shape(), &[n]);
            assert_eq!(y.dtype(), DType::F64);
            y.to_vec::<f64>().unwrap()
        })
        .join()
        .unwrap()
    });
    assert_close(&got, host.iter().map(|&v| slow_chain_host(v, 24)), "read");
    // built here, evaluated there, consumed there in place, read back here
    let z = slow_chain(&x, 8);
    let w = std::thread::spawn(move || {
        z.eval().unwrap();
        let w = z + 1.0; // the only handle: may be written in place
        w.eval().unwrap();
        w
    })
    .join()
    .unwrap();
    let got: Vec<f64> = w.to_vec().unwrap();
    assert_close(
        &got,
        host.iter().map(|&v| slow_chain_host(v, 8) + 1.0),
        "moved",
    );
}

device_test!(arrays_dropped_on_another_thread_while_in_flight_leave_memory_intact);
fn arrays_dropped_on_another_thread_while_in_flight_leave_memory_intact(dev: &Device) {
    let n = 300_007;
    let host = host_input(n);
    let x = Array::from_slice_on(&host, &[n], dev).unwrap();
    for round in 0..6 {
        let y = slow_chain(&x, 16);
        y.eval().unwrap();
        let z = &y * 2.0; // reads y on this thread's stream
        z.eval().unwrap();
        // y dropped on another thread, its producer maybe still running
        std::thread::spawn(move || drop(y)).join().unwrap();
        // new allocations of the same size reuse memory only after the reads
        let a = (&x + round as f64).exp();
        let b = (&x - round as f64).exp();
        lf::eval(&[&a, &b]).unwrap();
        let got: Vec<f64> = z.to_vec().unwrap();
        assert_close(
            &got,
            host.iter().map(|&v| 2.0 * slow_chain_host(v, 16)),
            "z",
        );
        let got: Vec<f64> = a.to_vec().unwrap();
        assert_close(&got, host.iter().map(|&v| (v + round as f64).exp()), "a");
    }
}

device_test!(explicit_streams_order_their_work_and_hand_results_to_others);
fn explicit_streams_order_their_work_and_hand_results_to_others(dev: &Device) {
    let n = 200_003;
    let host = host_input(n);
    let x = Array::from_slice_on(&host, &[n], dev).unwrap();
    let s1 = dev.new_stream().unwrap();
    let s2 = dev.new_stream().unwrap();
    assert_eq!(s1.device(), dev);
    if dev.is_cuda() {
        assert_ne!(s1.raw(), s2.raw());
        assert_ne!(s1.raw(), 0);
    }
    let a = lf::with_stream(&s1, || {
        let a = slow_chain(&x, 20);
        a.eval().unwrap();
        a
    });
    // read on s2 while s1 may still be writing
    let b = lf::with_stream(&s2, || {
        let b = &a * 3.0 - 1.0;
        b.eval().unwrap();
        b
    });
    // and nested: s1 inside s2, back to s2 after
    let c = lf::with_stream(&s2, || {
        let inner = lf::with_stream(&s1, || {
            let t = &b + &a;
            t.eval().unwrap();
            t
        });
        let c = &inner * 0.5;
        c.eval().unwrap();
        c
    });
    s2.synchronize().unwrap();
    let want_a: Vec<f64> = host.iter().map(|&v| slow_chain_host(v, 20)).collect();
    let got: Vec<f64> = b.to_vec().unwrap();
    assert_close(&got, want_a.iter().map(|a| a * 3.0 - 1.0), "b");
    let got: Vec<f64> = c.to_vec().unwrap();
    assert_close(&got, want_a.iter().map(|a| (a * 3.0 - 1.0 + a) * 0.5), "c");
}

/// The psf-like pipeline of one thread (fft2 of a padded complex field), checked against
/// the same pipeline evaluated on the main thread.
fn spectrum(x: &Array) -> Array {
    let z = (x * lf::c64::i()).exp();
    let n = x.shape()[0];
    let padded = z.pad(&[(n / 2, n / 2), (n / 2, n / 2)], 0.0);
    lf::fft::fft2(&padded).abs().square()
}

#[test]
fn many_threads_mix_evals_calls_ffts_and_drops() {
    let iters: usize = std::env::var("LAZYFUSE_STREAM_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let devices = common::devices();
    let n = 48;
    let inputs: Vec<Vec<f64>> = (0..4)
        .map(|k| {
            (0..n * n)
                .map(|i| ((i * 31 + k * 17) % 97) as f64 / 97.0)
                .collect()
        })
        .collect();
    // the oracle: each input's spectrum on the CPU device, one thread
    let want: Vec<Vec<f64>> = inputs
        .iter()
        .map(|h| {
            let x = Array::from_slice_on(h, &[n, n], &Device::Cpu).unwrap();
            spectrum(&x).to_vec().unwrap()
        })
        .collect();
    let before: Vec<u64> = devices
        .iter()
        .map(|d| d.pool_usage().unwrap().map_or(0, |u| u.0))
        .collect();
    std::thread::scope(|s| {
        for t in 0..16 {
            let (devices, inputs, want) = (&devices, &inputs, &want);
            s.spawn(move || {
                let dev = &devices[t % devices.len()];
                let k = t % inputs.len();
                let x = Array::from_slice_on(&inputs[k], &[n, n], dev).unwrap();
                let f = lf::Function::trace(&[&x], |xs| vec![spectrum(&xs[0])]).unwrap();
                let mut kept = Vec::new();
                for i in 0..iters {
                    let y = if i % 2 == 0 {
                        spectrum(&x)
                    } else {
                        f.call(&[&x]).unwrap().remove(0)
                    };
                    y.eval().unwrap();
                    // keep some results for a while, drop others at once
                    if i % 3 == 0 {
                        kept.push(y);
                    }
                    if kept.len() > 4 {
                        let old = kept.remove(0);
                        if i % 5 == 0 {
                            let got: Vec<f64> = old.to_vec().unwrap();
                            assert_eq!(got.len(), 4 * n * n);
                            for (j, (g, w)) in got.iter().zip(&want[k]).enumerate() {
                                assert!(
                                    (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                                    "thread {t} iteration {i} element {j}: {g} != {w}"
                                );
                            }
                        }
                    }
                }
            });
        }
    });
    for (d, b) in devices.iter().zip(before) {
        d.synchronize().unwrap();
        if let Some((used, _)) = d.pool_usage().unwrap() {
            // what the threads made is gone with them (kept buffers of the free lists, the
            // traced functions' graphs and FFT plans aside: bounded, not per iteration)
            assert!(
                used <= b + (256 << 20),
                "{d}: pool holds {used} bytes after the threads ended, {b} before"
            );
        }
    }
}

device_test!(a_cached_one_kernel_eval_makes_one_launch_and_no_memory_calls);
fn a_cached_one_kernel_eval_makes_one_launch_and_no_memory_calls(dev: &Device) {
    let a = Array::linspace_on(0.0, 1.0, 1000, DType::F32, dev);
    let b = Array::full_on(&[1000], 0.25f32, DType::F32, dev);
    lf::eval(&[&a, &b]).unwrap();
    let ten = || {
        ((((&a + &b) * 2.0 - 1.0).sin() * &b).exp() + &a)
            .sqrt()
            .abs()
            * 3.0
            - &b
    };
    for _ in 0..3 {
        ten().eval().unwrap();
    }
    let (r, calls) = lf::debug::driver_calls(|| ten().eval());
    r.unwrap();
    if dev.is_cuda() {
        assert_eq!(calls.count("cuLaunchKernel"), 1, "{calls}");
        assert_eq!(calls.count("cuMemAllocAsync"), 0, "{calls}");
        assert_eq!(calls.count("cuMemFreeAsync"), 0, "{calls}");
        // the launch and the context check before it
        assert!(calls.total() <= 2, "{calls}");
    } else {
        assert_eq!(calls.total(), 0, "{calls}");
    }
}

device_test!(a_thread_that_panics_mid_eval_leaves_the_device_usable);
fn a_thread_that_panics_mid_eval_leaves_the_device_usable(dev: &Device) {
    let n = 100_003;
    let host = host_input(n);
    let x = Array::from_slice_on(&host, &[n], dev).unwrap();
    let s = dev.new_stream().unwrap();
    // a thread queues work on its own stream and on an explicit one, then panics
    // before reading anything back
    let r = std::thread::scope(|sc| {
        sc.spawn(|| {
            let a = slow_chain(&x, 8);
            a.eval().unwrap();
            lf::with_stream(&s, || {
                let b = &a * 2.0;
                b.eval().unwrap();
                panic!("deliberate panic with work in flight");
            })
        })
        .join()
    });
    assert!(r.is_err(), "the thread should have panicked");
    // every other thread, and the explicit stream, still work
    let got: Vec<Vec<f64>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let x = &x;
                sc.spawn(move || (slow_chain(x, 8) + k as f64).to_vec::<f64>().unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (k, g) in got.iter().enumerate() {
        assert_close(
            g,
            host.iter().map(|&v| slow_chain_host(v, 8) + k as f64),
            "after the panic",
        );
    }
    let c = lf::with_stream(&s, || (&x + 1.0).to_vec::<f64>().unwrap());
    assert_close(&c, host.iter().map(|&v| v + 1.0), "explicit stream");
    dev.synchronize().unwrap();
}
