//! Randomness as data: `lf::random::Key` draws the numbers of its seed, derives keys by the
//! documented wrapping mapping (checked against the host), works as a traced function's
//! input (one plan, new numbers every call) and rejects arrays that are not keys.
//!
//! The oracle for numbers is the `u64`-seeded `lf::random::uniform` / `normal` (a separate
//! graph op whose seed is a kernel argument), fed the seed the host computes for each key.
//! Counters are process-wide, so every test holds `LOCK` (a test that only evaluates
//! still moves the counters another one reads).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::random::Key;
use lf::{Array, DType, Device};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn graphs_on() -> bool {
    std::env::var("LAZYFUSE_GRAPHS").map_or(true, |v| v.trim() != "0")
}

/// The documented mapping of `Key::split`, on the host.
fn split_seed(k: u64, i: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
}

/// The documented mapping of `Key::fold_in`, on the host.
fn fold_seed(k: u64, d: u64) -> u64 {
    k.wrapping_mul(0x94D0_49BB_1331_11EB)
        .wrapping_add(d.wrapping_add(1).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// The values of a real array as f64, after checking its shape and dtype.
fn vals(a: &Array, shape: &[usize], dtype: DType) -> Vec<f64> {
    assert_eq!(a.shape(), shape, "shape");
    assert_eq!(a.dtype(), dtype, "dtype");
    match dtype {
        DType::F32 => a
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::F64 => a.to_vec::<f64>().unwrap(),
        d => panic!("not a random dtype: {d}"),
    }
}

/// The seed a key holds, read back (checking the key array's shape and dtype).
fn seed_of(k: &Key) -> u64 {
    let a = k.as_array();
    assert_eq!(a.shape(), &[] as &[usize]);
    assert_eq!(a.dtype(), DType::I64);
    a.item::<i64>().unwrap() as u64
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let c = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - ma) * (y - mb))
        .sum::<f64>()
        / a.len() as f64;
    c / (va * vb).sqrt()
}

device_test!(a_key_draws_the_numbers_of_its_seed);
fn a_key_draws_the_numbers_of_its_seed(dev: &Device) {
    let _l = lock();
    for seed in [0u64, 42, u64::MAX - 3] {
        for d in [DType::F32, DType::F64] {
            let k = Key::new_on(seed, dev);
            assert_eq!(seed_of(&k), seed);
            for shape in [&[1000][..], &[20, 30][..]] {
                let u = vals(&lf::random::uniform_key(&k, shape, d), shape, d);
                let want = vals(&lf::random::uniform_on(shape, d, seed, dev), shape, d);
                assert_eq!(u, want, "uniform {d} {shape:?}, seed {seed}");
                let g = vals(&lf::random::normal_key(&k, shape, d), shape, d);
                let want = vals(&lf::random::normal_on(shape, d, seed, dev), shape, d);
                assert_eq!(g, want, "normal {d} {shape:?}, seed {seed}");
            }
        }
    }
    // a key computed on the device (not a constant) draws the same numbers, and so
    // does the CPU for a key on another device
    let k = Key::from_array(&(Array::scalar_on(20i64, dev) + 22i64)).unwrap();
    let u = vals(
        &lf::random::uniform_key(&k, &[500], DType::F64),
        &[500],
        DType::F64,
    );
    let want = vals(
        &lf::random::uniform_on(&[500], DType::F64, 42, &Device::cpu()),
        &[500],
        DType::F64,
    );
    assert_eq!(u, want, "a computed key on {dev}");
}

device_test!(split_and_fold_in_follow_the_documented_mapping);
fn split_and_fold_in_follow_the_documented_mapping(dev: &Device) {
    let _l = lock();
    let n = 100_000;
    let seed = 7u64;
    let k = Key::new_on(seed, dev);
    let keys = k.split(3);
    assert_eq!(keys.len(), 3);
    let mut draws = Vec::new();
    for (i, ki) in keys.iter().enumerate() {
        let s = split_seed(seed, i as u64);
        assert_eq!(seed_of(ki), s, "split key {i}");
        let u = vals(
            &lf::random::uniform_key(ki, &[n], DType::F64),
            &[n],
            DType::F64,
        );
        let want = vals(
            &lf::random::uniform_on(&[n], DType::F64, s, dev),
            &[n],
            DType::F64,
        );
        assert_eq!(u, want, "split key {i} draws the numbers of its seed");
        let (m, v) = mean_var(&u);
        assert!(
            (m - 0.5).abs() < 0.01 && (v - 1.0 / 12.0).abs() < 0.005,
            "split key {i}: mean {m}, var {v}"
        );
        draws.push(u);
    }
    // the parent's numbers and each split key's differ, and are uncorrelated
    draws.push(vals(
        &lf::random::uniform_key(&k, &[n], DType::F64),
        &[n],
        DType::F64,
    ));
    for a in 0..draws.len() {
        for b in a + 1..draws.len() {
            let same = draws[a]
                .iter()
                .zip(&draws[b])
                .filter(|(x, y)| x == y)
                .count();
            assert!(same < n / 1000, "draws {a} and {b}: {same} equal");
            let c = correlation(&draws[a], &draws[b]);
            assert!(c.abs() < 0.02, "draws {a} and {b}: correlation {c}");
        }
    }
    // fold_in: one key per datum, by the mapping; normal numbers are standard normal
    for d in [0u64, 1, 1000, u64::MAX] {
        let kd = k.fold_in(d);
        let s = fold_seed(seed, d);
        assert_eq!(seed_of(&kd), s, "fold_in({d})");
        let g = vals(
            &lf::random::normal_key(&kd, &[n], DType::F32),
            &[n],
            DType::F32,
        );
        let want = vals(
            &lf::random::normal_on(&[n], DType::F32, s, dev),
            &[n],
            DType::F32,
        );
        assert_eq!(g, want, "fold_in({d}) draws the numbers of its seed");
        let (m, v) = mean_var(&g);
        assert!(
            m.abs() < 0.02 && (v - 1.0).abs() < 0.03,
            "fold_in({d}): mean {m}, var {v}"
        );
    }
    // derived keys chain (a split of a fold), still by the mapping
    let chained = k.fold_in(3).split(2).remove(1);
    assert_eq!(seed_of(&chained), split_seed(fold_seed(seed, 3), 1));
    assert!(k.split(0).is_empty());
}

device_test!(keyed_numbers_fuse_into_their_consumer);
fn keyed_numbers_fuse_into_their_consumer(dev: &Device) {
    let _l = lock();
    let k = Key::new_on(11, dev).split(2).remove(0);
    let x = lf::random::uniform_key(&k, &[4096], DType::F32) * 2.0 - 1.0;
    lf::reset_stats();
    lf::with_fusion(true, || x.eval()).unwrap();
    assert_eq!(
        lf::stats().kernels_launched,
        1,
        "key, draw and affine map: one kernel"
    );
    let got = vals(&x, &[4096], DType::F32);
    let u = lf::random::uniform_on(&[4096], DType::F32, split_seed(11, 0), dev);
    let want = vals(&(u * 2.0 - 1.0), &[4096], DType::F32);
    assert_eq!(got, want);
}

device_test!(a_function_with_a_key_input_is_one_plan_and_draws_new_numbers_each_call);
fn a_function_with_a_key_input_is_one_plan_and_draws_new_numbers_each_call(dev: &Device) {
    let _l = lock();
    let n = 2048;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.01).sin()).collect();
    let u = Array::from_vec_on(x.clone(), &[n], dev).unwrap();
    let key = Key::new_on(5, dev);
    // a noisy step: returns the new state and the key for the next call
    let f = lf::Function::trace(&[&u, key.as_array()], move |a| {
        let k = Key::from_array(&a[1]).expect("a key input");
        let [draw, next]: [Key; 2] = k.split(2).try_into().expect("two keys");
        let noise = lf::random::normal_key(&draw, &[n], DType::F32);
        vec![&a[0] + noise * 0.1f32, next.into_array()]
    })
    .unwrap();
    let calls = 6;
    let mut k = key.as_array().clone();
    let mut seed = 5u64;
    let mut outs = Vec::new();
    for c in 0..calls {
        if c == 1 {
            // kernels compile at the trace (CPU) or the first call (CUDA), never later
            dev.synchronize().unwrap();
            lf::reset_stats();
        }
        let mut r = f.call(&[&u, &k]).unwrap();
        k = r.pop().unwrap();
        outs.push((r.pop().unwrap(), seed));
        seed = split_seed(seed, 1);
    }
    dev.synchronize().unwrap();
    let s = lf::stats();
    assert_eq!(s.function_traces, 0, "one trace");
    assert_eq!((s.plans, s.plan_cache_hits), (0, 0), "calls never plan");
    assert_eq!(s.kernels_compiled, 0, "no compile after the first call");
    if dev.is_cuda() && graphs_on() {
        assert_eq!(s.graph_captures, 1);
        assert_eq!(s.graph_launches, calls - 1);
        assert!(f.is_graph());
    }
    assert_eq!(s.evals, calls - 1);
    assert_eq!(
        seed_of(&Key::from_array(&k).unwrap()),
        seed,
        "the chained key"
    );
    // each call: the state plus noise drawn with that call's split key
    let mut prev: Option<Vec<f64>> = None;
    for (i, (r, s)) in outs.iter().enumerate() {
        let got = vals(r, &[n], DType::F32);
        let noise = lf::random::normal_on(&[n], DType::F32, split_seed(*s, 0), dev);
        let want = vals(&(&u + noise * 0.1f32), &[n], DType::F32);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "call {i}, {j}: {g} vs {w}"
            );
        }
        if let Some(p) = &prev {
            let same = p.iter().zip(&got).filter(|(a, b)| a == b).count();
            assert!(
                same < n / 100,
                "calls {} and {i} drew the same numbers",
                i - 1
            );
        }
        prev = Some(got);
    }
}

device_test!(key_from_array_checks_dtype_and_shape);
fn key_from_array_checks_dtype_and_shape(dev: &Device) {
    let _l = lock();
    let a = Array::from_vec_on(vec![9i64], &[], dev).unwrap();
    let k = Key::from_array(&a).unwrap();
    assert_eq!(seed_of(&k), 9);
    let u = vals(
        &lf::random::uniform_key(&k, &[64], DType::F32),
        &[64],
        DType::F32,
    );
    let want = vals(
        &lf::random::uniform_on(&[64], DType::F32, 9, dev),
        &[64],
        DType::F32,
    );
    assert_eq!(u, want);

    let floats = Array::from_vec_on(vec![9.0f64], &[], dev).unwrap();
    let e = Key::from_array(&floats).unwrap_err();
    assert!(matches!(e, lf::Error::DType { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("Key::from_array") && msg.contains("float64"),
        "{msg}"
    );

    let pair = Array::from_vec_on(vec![1i64, 2], &[2], dev).unwrap();
    let e = Key::from_array(&pair).unwrap_err();
    assert!(matches!(e, lf::Error::Shape { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("Key::from_array") && msg.contains("[2]"),
        "{msg}"
    );
}

#[test]
#[should_panic(expected = "uniform_key: dtype must be F32 or F64, got int32")]
fn keyed_draws_of_an_integer_dtype_panic() {
    let _l = lock();
    let _ = lf::random::uniform_key(&Key::new_on(1, &Device::cpu()), &[4], DType::I32);
}
