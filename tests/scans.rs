//! `cumsum` and `cumprod` against a running-sum oracle on every device: every axis, awkward
//! lengths around the segment size, NumPy's accumulation dtypes, and the fusion of an
//! elementwise producer into the scan.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{c64, Array, DType, Device};

/// Small integers as f64 (exact sums), from a fixed seed.
fn ints(n: usize, seed: u64) -> Vec<i64> {
    common::xorshift(n, seed)
        .map(|s| (s % 7) as i64 - 3)
        .collect()
}

/// The running scan along `axis` of a C-order array of `shape`.
fn oracle<T: Copy>(v: &[T], shape: &[usize], axis: usize, f: impl Fn(T, T) -> T) -> Vec<T> {
    let mut out = v.to_vec();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            for k in 1..n {
                let at = (o * n + k) * inner + i;
                let prev = (o * n + k - 1) * inner + i;
                out[at] = f(out[prev], out[at]);
            }
        }
    }
    out
}

device_test!(cumsum_and_cumprod_match_a_running_scan);
fn cumsum_and_cumprod_match_a_running_scan(dev: &Device) {
    for shape in [
        vec![0usize],
        vec![1],
        vec![3],
        vec![16],
        vec![17],
        vec![783],
        vec![4, 33],
        vec![5, 0, 2],
        vec![3, 7, 300],
    ] {
        let n: usize = shape.iter().product();
        let v = ints(n, shape.len() as u64 + n as u64);
        for axis in 0..shape.len() {
            // I64: exact, wrapping products
            let a = Array::from_vec_on(v.clone(), &shape, dev).unwrap();
            let s = a.cumsum(axis as isize);
            assert_eq!(s.shape(), shape.as_slice());
            assert_eq!(s.dtype(), DType::I64);
            assert_eq!(
                s.to_vec::<i64>().unwrap(),
                oracle(&v, &shape, axis, |p, q| p + q)
            );
            let p = a.cumprod(axis as isize);
            assert_eq!(
                p.to_vec::<i64>().unwrap(),
                oracle(&v, &shape, axis, |p: i64, q| p.wrapping_mul(q)),
                "cumprod {shape:?} axis {axis} on {dev}"
            );
            // F64 of small integers: exact in any order
            let f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            let af = Array::from_vec_on(f.clone(), &shape, dev).unwrap();
            let sf = af.cumsum(-(shape.len() as isize) + axis as isize);
            assert_eq!(sf.dtype(), DType::F64);
            assert_eq!(
                sf.to_vec::<f64>().unwrap(),
                oracle(&f, &shape, axis, |p, q| p + q)
            );
        }
    }
}

device_test!(scan_dtypes_follow_numpy);
fn scan_dtypes_follow_numpy(dev: &Device) {
    let b = Array::from_vec_on(vec![true, false, true, true], &[4], dev).unwrap();
    let s = b.cumsum(0);
    assert_eq!(s.dtype(), DType::I64);
    assert_eq!(s.to_vec::<i64>().unwrap(), vec![1, 1, 2, 3]);
    let i = Array::from_vec_on(vec![2i32, 3, 4], &[3], dev).unwrap();
    let p = i.cumprod(0);
    assert_eq!(p.dtype(), DType::I64);
    assert_eq!(p.to_vec::<i64>().unwrap(), vec![2, 6, 24]);
    // unsigned integers accumulate in U64, wrapping; F16 scans in F32 and rounds once
    let u = Array::from_vec_on(vec![200u8, 100, 255], &[3], dev).unwrap();
    let us = u.cumsum(0);
    assert_eq!(us.dtype(), DType::U64);
    assert_eq!(us.to_vec::<u64>().unwrap(), vec![200, 300, 555]);
    let h: Vec<lf::f16> = [0.5f32, 0.25, 2048.0, 1.0]
        .iter()
        .map(|&v| lf::f16::from_f32(v))
        .collect();
    let hs = Array::from_vec_on(h, &[4], dev).unwrap().cumsum(0);
    assert_eq!(hs.dtype(), DType::F16);
    let got: Vec<f32> = hs
        .to_vec::<lf::f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    // 2048.75 and 2049.75 are not f16 values: the nearest are 2048 and 2050
    assert_eq!(got, vec![0.5, 0.75, 2048.0, 2050.0]);
    // F32 stays F32, within the rounding of a running F32 sum of 2^20 + 1 terms (a
    // running sum, as NumPy's, is 1.2e-4 off at the end)
    let n = (1 << 20) + 1;
    let x = Array::arange_on(0.0, n as f64, 1.0, DType::F32, dev);
    let c = (&x * 0.5).cumsum(0);
    assert_eq!(c.dtype(), DType::F32);
    let got = c.to_vec::<f32>().unwrap();
    for &k in &[0usize, 1, 15, 16, 17, 1000, n - 1] {
        let want = 0.25 * k as f64 * (k as f64 + 1.0);
        let g = got[k] as f64;
        assert!(
            (g - want).abs() <= 1e-3 * want.max(1.0),
            "at {k}: {g} vs {want}"
        );
    }
    // complex
    let z = Array::from_vec_on(
        vec![c64::new(1.0, 1.0), c64::new(0.0, 2.0), c64::new(-1.0, 0.5)],
        &[3],
        dev,
    )
    .unwrap();
    let zs = z.cumprod(0).to_vec::<c64>().unwrap();
    let w1 = c64::new(1.0, 1.0);
    let w2 = w1 * c64::new(0.0, 2.0);
    let w3 = w2 * c64::new(-1.0, 0.5);
    for (g, w) in zs.iter().zip([w1, w2, w3]) {
        assert!((g - w).norm() < 1e-12, "{g} vs {w}");
    }
}

device_test!(a_scan_fuses_its_elementwise_producer);
fn a_scan_fuses_its_elementwise_producer(dev: &Device) {
    let x = Array::from_vec_on(ints(783, 9), &[783], dev).unwrap();
    let plain = lf::debug::kernel_count(&[&x.cumsum(0)]).unwrap();
    let fed = lf::debug::kernel_count(&[&(&x * 2 + 1).abs().cumsum(0)]).unwrap();
    assert_eq!(plain, fed);
}

#[test]
#[should_panic(expected = "cumsum: axis 1 out of range")]
fn scan_axis_out_of_range_panics() {
    let _ = Array::zeros_on(&[3], DType::F32, &Device::cpu()).cumsum(1);
}
