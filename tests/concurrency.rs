//! Evaluations from several threads at once: shared inputs, shared subexpressions and
//! separate expressions all give the results a host computation gives.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};

device_test!(concurrent_evals_are_correct);
fn concurrent_evals_are_correct(dev: &Device) {
    let n = 10_007;
    let base: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let x = Array::from_slice_on(&base, &[n], dev).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let x = x.clone();
                let base = &base;
                s.spawn(move || {
                    for round in 0..20 {
                        let k = (t * 100 + round) as f64;
                        // a subexpression every thread builds (hash-consed to one node)
                        let shared = (&x * 2.0).exp();
                        let y = (&shared + k).sqrt() - &x;
                        let got: Vec<f64> = y.to_vec().unwrap();
                        assert_eq!(got.len(), n);
                        for (i, (&g, &b)) in got.iter().zip(base).enumerate() {
                            let want = ((b * 2.0).exp() + k).sqrt() - b;
                            assert!(
                                (g - want).abs() <= 1e-12 * want.abs().max(1.0),
                                "thread {t} round {round} element {i}: {g} != {want}"
                            );
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("worker thread panicked");
        }
    });
    // a fresh random array per thread, evaluated concurrently, matches a serial one
    let serial: Vec<f32> = lf::random::uniform_on(&[5000], DType::F32, 99, dev)
        .to_vec()
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let r: Vec<f32> = lf::random::uniform_on(&[5000], DType::F32, 99, dev)
                    .to_vec()
                    .unwrap();
                assert_eq!(r, serial);
            });
        }
    });
}

device_test!(shared_expressions_with_in_place_reuse);
/// Threads sharing one evaluated array build the same expressions (hash-consing hands them
/// the same nodes) while evaluations reuse buffers in place: every readback must be right
/// and no evaluation may fail. Regression: a thread walking a shared node while another
/// evaluation consumed a buffer beneath it got "node not realized after eval".
fn shared_expressions_with_in_place_reuse(dev: &Device) {
    let base = lf::Array::from_vec_on(vec![1.0f64, 2.0, 3.0], &[3], dev).unwrap();
    base.eval().unwrap();
    let iters = if dev.is_cuda() { 500 } else { 10000 };
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..iters {
                    let x = &base * 2.0;
                    x.eval().unwrap();
                    let y = x * 0.5 + 1.0;
                    assert_eq!(y.shape(), &[3]);
                    assert_eq!(y.dtype(), lf::DType::F64);
                    let v = y.to_vec::<f64>().unwrap();
                    assert_eq!(v, vec![2.0, 3.0, 4.0]);
                }
            });
        }
    });
}
