//! `lf::fft` against a naive O(n^2) DFT written out here in f64: every transform, sizes
//! 1, 3, 8, 17 and 100, real and complex inputs of both precisions, batched and strided
//! axes, `irfft` lengths that truncate and pad, shifts and frequencies, and the PSF
//! pipeline of `examples/02_psf.rs` (plan structure and peak value).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use num_complex::Complex64 as C;
use std::f64::consts::PI;

const SIZES: [usize; 5] = [1, 3, 8, 17, 100];

// ------------------------------------------------------------------------------------
// The reference: complex f64 arrays in C order and naive transforms along one axis
// ------------------------------------------------------------------------------------

/// A C-order array of complex f64 values (real data has zero imaginary parts).
#[derive(Clone, Debug)]
struct Nd {
    shape: Vec<usize>,
    v: Vec<C>,
}

impl Nd {
    fn zeros(shape: &[usize]) -> Nd {
        Nd {
            shape: shape.to_vec(),
            v: vec![C::new(0.0, 0.0); shape.iter().product()],
        }
    }

    fn norm_axis(&self, axis: isize) -> usize {
        if axis < 0 {
            (self.shape.len() as isize + axis) as usize
        } else {
            axis as usize
        }
    }

    /// Applies `f` to every line along `axis`, giving lines of length `m`.
    fn map_lines(&self, axis: isize, m: usize, f: impl Fn(&[C]) -> Vec<C>) -> Nd {
        let axis = self.norm_axis(axis);
        let n = self.shape[axis];
        let outer: usize = self.shape[..axis].iter().product();
        let inner: usize = self.shape[axis + 1..].iter().product();
        let mut shape = self.shape.clone();
        shape[axis] = m;
        let mut out = Nd::zeros(&shape);
        let mut line = vec![C::new(0.0, 0.0); n];
        for o in 0..outer {
            for i in 0..inner {
                for (k, l) in line.iter_mut().enumerate() {
                    *l = self.v[(o * n + k) * inner + i];
                }
                let r = f(&line);
                assert_eq!(r.len(), m);
                for (k, x) in r.into_iter().enumerate() {
                    out.v[(o * m + k) * inner + i] = x;
                }
            }
        }
        out
    }

    /// Unnormalized DFT along `axis` (positive exponent when `inverse`).
    fn dft(&self, axis: isize, inverse: bool) -> Nd {
        let n = self.shape[self.norm_axis(axis)];
        self.map_lines(axis, n, |x| dft(x, inverse))
    }

    /// NumPy's `fft`.
    fn fft(&self, axis: isize) -> Nd {
        self.dft(axis, false)
    }

    /// NumPy's `ifft` (scaled by `1/n`).
    fn ifft(&self, axis: isize) -> Nd {
        let n = self.shape[self.norm_axis(axis)] as f64;
        let mut r = self.dft(axis, true);
        r.v.iter_mut().for_each(|x| *x /= n);
        r
    }

    /// NumPy's `rfft` of real data: the `n/2 + 1` non-negative frequencies.
    fn rfft(&self, axis: isize) -> Nd {
        let n = self.shape[self.norm_axis(axis)];
        self.map_lines(axis, n / 2 + 1, |x| dft(x, false)[..n / 2 + 1].to_vec())
    }

    /// NumPy's `irfft` to `m` points: the half spectrum truncated or zero-padded to
    /// `m/2 + 1` entries, the imaginary parts of the zero and Nyquist frequencies ignored,
    /// completed as `X[m - k] = conj(X[k])`, inverse DFT, real part, scaled by `1/m`.
    fn irfft(&self, axis: isize, m: usize) -> Nd {
        self.map_lines(axis, m, |x| {
            let h = m / 2 + 1;
            let at = |k: usize| x.get(k).copied().unwrap_or(C::new(0.0, 0.0));
            let mut full = vec![C::new(0.0, 0.0); m];
            for (k, f) in full.iter_mut().enumerate() {
                *f = if k < h { at(k) } else { at(m - k).conj() };
            }
            full[0].im = 0.0;
            if m.is_multiple_of(2) {
                full[m / 2].im = 0.0;
            }
            dft(&full, true)
                .into_iter()
                .map(|z| C::new(z.re / m as f64, 0.0))
                .collect()
        })
    }

    /// NumPy's `fftshift` along `axis` (a roll by `n/2`).
    fn roll(&self, axis: isize, shift: isize) -> Nd {
        let n = self.shape[self.norm_axis(axis)];
        self.map_lines(axis, n, |x| {
            let mut out = x.to_vec();
            for (j, &v) in x.iter().enumerate() {
                out[(j as isize + shift).rem_euclid(n as isize) as usize] = v;
            }
            out
        })
    }
}

/// Naive DFT: `X[k] = sum_j x[j] exp(-+2 pi i jk/n)`, the angle reduced mod n exactly.
fn dft(x: &[C], inverse: bool) -> Vec<C> {
    let n = x.len();
    let sign = if inverse { 1.0 } else { -1.0 };
    (0..n)
        .map(|k| {
            x.iter()
                .enumerate()
                .map(|(j, &v)| {
                    let a = sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64;
                    v * C::new(a.cos(), a.sin())
                })
                .sum()
        })
        .collect()
}

// ------------------------------------------------------------------------------------
// Inputs, readback, comparison
// ------------------------------------------------------------------------------------

/// Deterministic values in [-1, 1).
fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// An input array of `dtype` and `shape` on the default device, and its exact values.
fn input(dtype: DType, shape: &[usize], seed: u64) -> (Array, Nd) {
    let len: usize = shape.iter().product();
    let re = values(len, seed);
    let im = values(len, seed ^ 0x9e37_79b9);
    let (a, v): (Array, Vec<C>) = match dtype {
        DType::F32 => {
            let h: Vec<f32> = re.iter().map(|&x| x as f32).collect();
            let v = h.iter().map(|&x| C::new(x as f64, 0.0)).collect();
            (Array::from_vec(h, shape).unwrap(), v)
        }
        DType::F64 => {
            let v = re.iter().map(|&x| C::new(x, 0.0)).collect();
            (Array::from_vec(re, shape).unwrap(), v)
        }
        DType::C64 => {
            let h: Vec<lf::c32> = re
                .iter()
                .zip(&im)
                .map(|(&r, &i)| lf::c32::new(r as f32, i as f32))
                .collect();
            let v = h.iter().map(|z| C::new(z.re as f64, z.im as f64)).collect();
            (Array::from_vec(h, shape).unwrap(), v)
        }
        DType::C128 => {
            let h: Vec<C> = re.iter().zip(&im).map(|(&r, &i)| C::new(r, i)).collect();
            (Array::from_vec(h.clone(), shape).unwrap(), h)
        }
        d => panic!("no FFT input of {d}"),
    };
    (
        a,
        Nd {
            shape: shape.to_vec(),
            v,
        },
    )
}

/// Reads `a` back as complex f64 values.
fn fetch(a: &Array) -> Vec<C> {
    match a.dtype() {
        DType::F32 => a
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(|x| C::new(x as f64, 0.0))
            .collect(),
        DType::F64 => a
            .to_vec::<f64>()
            .unwrap()
            .into_iter()
            .map(|x| C::new(x, 0.0))
            .collect(),
        DType::C64 => a
            .to_vec::<lf::c32>()
            .unwrap()
            .into_iter()
            .map(|z| C::new(z.re as f64, z.im as f64))
            .collect(),
        DType::C128 => a.to_vec::<C>().unwrap(),
        d => panic!("unexpected result dtype {d}"),
    }
}

/// Relative norm error allowed for results of `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::C64 => 1e-5,
        _ => 1e-12,
    }
}

/// The result dtype NumPy gives: complex (or real, for `irfft`) of the input's precision.
fn expected_dtype(input: DType, real_out: bool) -> DType {
    let single = matches!(input, DType::F32 | DType::C64);
    match (single, real_out) {
        (true, false) => DType::C64,
        (false, false) => DType::C128,
        (true, true) => DType::F32,
        (false, true) => DType::F64,
    }
}

/// Collects mismatches so one run reports all of them.
#[derive(Default)]
struct Checks {
    fails: Vec<String>,
    count: usize,
}

impl Checks {
    /// Compares `got` with `want`: shape, dtype, and `|got - want| <= tol |want|` (norms;
    /// absolute when `want` is zero).
    fn check(&mut self, what: &str, got: &Array, want: &Nd, dtype: DType) {
        self.count += 1;
        if got.shape() != want.shape.as_slice() {
            self.fails.push(format!(
                "{what}: shape {:?}, want {:?}",
                got.shape(),
                want.shape
            ));
            return;
        }
        if got.dtype() != dtype {
            self.fails
                .push(format!("{what}: dtype {}, want {dtype}", got.dtype()));
            return;
        }
        let g = fetch(got);
        let err = g
            .iter()
            .zip(&want.v)
            .map(|(a, b)| (a - b).norm_sqr())
            .sum::<f64>()
            .sqrt();
        let norm = want.v.iter().map(|b| b.norm_sqr()).sum::<f64>().sqrt();
        let rel = if norm > 0.0 { err / norm } else { err };
        if rel.is_nan() || rel > tol(dtype) {
            self.fails.push(format!(
                "{what}: relative error {rel:.3e} > {:.0e}",
                tol(dtype)
            ));
        }
    }

    fn finish(self, dev: &lf::Device) {
        assert!(self.count > 0);
        assert!(
            self.fails.is_empty(),
            "{} of {} checks failed on {dev}:\n{}",
            self.fails.len(),
            self.count,
            self.fails.join("\n")
        );
    }
}

const ALL_INPUTS: [DType; 4] = [DType::F32, DType::F64, DType::C64, DType::C128];
const REAL_INPUTS: [DType; 2] = [DType::F32, DType::F64];
const COMPLEX_INPUTS: [DType; 2] = [DType::C64, DType::C128];

// ------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------

/// The naive DFT itself against closed forms, so that the references below can be trusted.
#[test]
fn reference_dft_closed_forms() {
    // impulse -> ones; ones -> n * impulse; exp(2 pi i f j / n) -> n at bin f
    for n in SIZES {
        let mut x = vec![C::new(0.0, 0.0); n];
        x[0] = C::new(1.0, 0.0);
        assert!(dft(&x, false)
            .iter()
            .all(|z| (z - C::new(1.0, 0.0)).norm() < 1e-12));
        let ones = vec![C::new(1.0, 0.0); n];
        let y = dft(&ones, false);
        assert!((y[0] - C::new(n as f64, 0.0)).norm() < 1e-9);
        assert!(y[1..].iter().all(|z| z.norm() < 1e-9));
        let f = n / 3;
        let tone: Vec<C> = (0..n)
            .map(|j| C::from_polar(1.0, 2.0 * PI * (f * j) as f64 / n as f64))
            .collect();
        let y = dft(&tone, false);
        for (k, z) in y.iter().enumerate() {
            let want = if k == f { n as f64 } else { 0.0 };
            assert!((z - C::new(want, 0.0)).norm() < 1e-9, "n={n} k={k}: {z}");
        }
        // round trip, and irfft(rfft(x)) == x for real x
        let x: Vec<C> = values(n, 7).into_iter().map(|r| C::new(r, 0.0)).collect();
        let back: Vec<C> = dft(&dft(&x, false), true)
            .into_iter()
            .map(|z| z / n as f64)
            .collect();
        assert!(back.iter().zip(&x).all(|(a, b)| (a - b).norm() < 1e-12));
        let nd = Nd {
            shape: vec![n],
            v: x.clone(),
        };
        let rt = nd.rfft(0).irfft(0, n);
        assert!(rt.v.iter().zip(&x).all(|(a, b)| (a - b).norm() < 1e-12));
    }
}

device_test!(fft_and_ifft_1d);
fn fft_and_ifft_1d(dev: &Device) {
    let mut c = Checks::default();
    for (s, dt) in ALL_INPUTS.into_iter().enumerate() {
        let want_dt = expected_dtype(dt, false);
        for n in SIZES {
            // batched along the last axis
            let (a, x) = input(dt, &[3, n], n as u64 + s as u64);
            c.check(
                &format!("fft({dt} [3,{n}])"),
                &lf::fft::fft(&a, -1),
                &x.fft(-1),
                want_dt,
            );
            c.check(
                &format!("ifft({dt} [3,{n}])"),
                &lf::fft::ifft(&a, -1),
                &x.ifft(-1),
                want_dt,
            );
            // strided: along axis 0 with the batch inside
            let (a, x) = input(dt, &[n, 2], 100 + n as u64);
            c.check(
                &format!("fft({dt} [{n},2], 0)"),
                &lf::fft::fft(&a, 0),
                &x.fft(0),
                want_dt,
            );
            c.check(
                &format!("ifft({dt} [{n},2], 0)"),
                &lf::fft::ifft(&a, 0),
                &x.ifft(0),
                want_dt,
            );
            // the middle axis of a 3-D array
            let (a, x) = input(dt, &[2, n, 3], 200 + n as u64);
            c.check(
                &format!("fft({dt} [2,{n},3], 1)"),
                &lf::fft::fft(&a, 1),
                &x.fft(1),
                want_dt,
            );
        }
        // more outer lines than inner ones (cuFFT batches over the outer lines)
        for n in [3, 17] {
            let (a, x) = input(dt, &[5, n, 2], 250 + n as u64);
            c.check(
                &format!("fft({dt} [5,{n},2], 1)"),
                &lf::fft::fft(&a, 1),
                &x.fft(1),
                want_dt,
            );
        }
        // 1-D, no batch
        let (a, x) = input(dt, &[100], 300);
        c.check(
            &format!("fft({dt} [100])"),
            &lf::fft::fft(&a, 0),
            &x.fft(0),
            want_dt,
        );
    }
    // a lazy input (the fused producer) and a fused consumer
    let (a, x) = input(DType::C128, &[4, 17], 400);
    let got = lf::fft::fft(&(&a * 2.0), -1).abs();
    let mut want = x.fft(-1);
    want.v
        .iter_mut()
        .for_each(|z| *z = C::new(2.0 * z.norm(), 0.0));
    c.check("abs(fft(2 a))", &got, &want, DType::F64);
    c.finish(dev);
}

device_test!(fft2_and_ifft2);
fn fft2_and_ifft2(dev: &Device) {
    let mut c = Checks::default();
    for dt in ALL_INPUTS {
        let want_dt = expected_dtype(dt, false);
        for (h, w) in [(1, 1), (3, 8), (17, 3), (8, 100), (1, 17), (100, 1)] {
            let (a, x) = input(dt, &[2, h, w], (h * 1000 + w) as u64);
            c.check(
                &format!("fft2({dt} [2,{h},{w}])"),
                &lf::fft::fft2(&a),
                &x.fft(-1).fft(-2),
                want_dt,
            );
            c.check(
                &format!("ifft2({dt} [2,{h},{w}])"),
                &lf::fft::ifft2(&a),
                &x.ifft(-1).ifft(-2),
                want_dt,
            );
        }
        let (a, x) = input(dt, &[8, 17], 5);
        c.check(
            &format!("fft2({dt} [8,17])"),
            &lf::fft::fft2(&a),
            &x.fft(0).fft(1),
            want_dt,
        );
    }
    c.finish(dev);
}

device_test!(fftn_over_any_axes);
fn fftn_over_any_axes(dev: &Device) {
    let mut c = Checks::default();
    for dt in ALL_INPUTS {
        let want_dt = expected_dtype(dt, false);
        let (a, x) = input(dt, &[4, 3, 17], 11);
        // a repeated axis is transformed once per mention, as in NumPy
        let cases: [&[isize]; 11] = [
            &[0],
            &[1],
            &[2],
            &[0, 2],
            &[2, 0],
            &[0, 1],
            &[-1, -3, 1],
            &[1, 2],
            &[0, 0],
            &[2, 0, -1],
            &[1, 1, 1],
        ];
        for axes in cases {
            let mut want = x.clone();
            let mut inv = x.clone();
            for &ax in axes {
                want = want.fft(ax);
                inv = inv.ifft(ax);
            }
            c.check(
                &format!("fftn({dt} [4,3,17], {axes:?})"),
                &lf::fft::fftn(&a, axes),
                &want,
                want_dt,
            );
            c.check(
                &format!("ifftn({dt} [4,3,17], {axes:?})"),
                &lf::fft::ifftn(&a, axes),
                &inv,
                want_dt,
            );
        }
        // rank 4 (cuFFT plans at most 3 axes at once) and length-1 axes in between
        let (a, x) = input(dt, &[3, 2, 1, 8, 5], 12);
        let axes: &[isize] = &[0, 1, 2, 3, 4];
        let want = (0..5).fold(x.clone(), |y, ax| y.fft(ax));
        c.check(
            &format!("fftn({dt} [3,2,1,8,5], all)"),
            &lf::fft::fftn(&a, axes),
            &want,
            want_dt,
        );
        let want = x.fft(0).fft(3);
        c.check(
            &format!("fftn({dt} [3,2,1,8,5], [0,3])"),
            &lf::fft::fftn(&a, &[0, 3]),
            &want,
            want_dt,
        );
        let want = x.ifft(2);
        c.check(
            &format!("ifftn({dt} [3,2,1,8,5], [2])"),
            &lf::fft::ifftn(&a, &[2]),
            &want,
            want_dt,
        );
    }
    c.finish(dev);
}

device_test!(rfft_and_irfft);
fn rfft_and_irfft(dev: &Device) {
    let mut c = Checks::default();
    for dt in REAL_INPUTS {
        let want_dt = expected_dtype(dt, false);
        for n in SIZES {
            let (a, x) = input(dt, &[3, n], 20 + n as u64);
            c.check(
                &format!("rfft({dt} [3,{n}])"),
                &lf::fft::rfft(&a, -1),
                &x.rfft(-1),
                want_dt,
            );
            let (a, x) = input(dt, &[n, 2], 30 + n as u64);
            c.check(
                &format!("rfft({dt} [{n},2], 0)"),
                &lf::fft::rfft(&a, 0),
                &x.rfft(0),
                want_dt,
            );
            // round trip through the spectrum of real data
            let (a, x) = input(dt, &[2, n], 40 + n as u64);
            let back = lf::fft::irfft(&lf::fft::rfft(&a, -1), Some(n), -1);
            c.check(
                &format!("irfft(rfft({dt} [2,{n}]), {n})"),
                &back,
                &x,
                expected_dtype(dt, true),
            );
        }
    }
    // irfft of arbitrary (non-Hermitian) half spectra: n = None, even, odd, truncating,
    // padding, and 1
    for dt in COMPLEX_INPUTS {
        let want_dt = expected_dtype(dt, true);
        for m in SIZES {
            let (a, x) = input(dt, &[3, m], 50 + m as u64);
            let default_n = 2 * (m - 1);
            let mut ns: Vec<Option<usize>> =
                vec![Some(1), Some(2 * m - 1), Some(2 * m + 6), Some(m + 1)];
            if default_n > 0 {
                ns.push(None);
            }
            if m > 2 {
                ns.push(Some(m / 2 + 1)); // truncates
                ns.push(Some(m)); // truncates
            }
            for n in ns {
                let out_n = n.unwrap_or(default_n);
                c.check(
                    &format!("irfft({dt} [3,{m}], {n:?})"),
                    &lf::fft::irfft(&a, n, -1),
                    &x.irfft(-1, out_n),
                    want_dt,
                );
            }
            // along axis 0, batch inside
            let (a, x) = input(dt, &[m, 4], 60 + m as u64);
            let out_n = 2 * m + 1;
            c.check(
                &format!("irfft({dt} [{m},4], {out_n}, 0)"),
                &lf::fft::irfft(&a, Some(out_n), 0),
                &x.irfft(0, out_n),
                want_dt,
            );
        }
    }
    c.finish(dev);
}

device_test!(rfft2_irfft2_and_rfftn);
fn rfft2_irfft2_and_rfftn(dev: &Device) {
    let mut c = Checks::default();
    for dt in REAL_INPUTS {
        let want_dt = expected_dtype(dt, false);
        for (h, w) in [(1, 1), (3, 8), (17, 3), (8, 100), (4, 1)] {
            let (a, x) = input(dt, &[2, h, w], (h * 100 + w) as u64);
            let spec = x.rfft(-1).fft(-2);
            c.check(
                &format!("rfft2({dt} [2,{h},{w}])"),
                &lf::fft::rfft2(&a),
                &spec,
                want_dt,
            );
        }
        let (a, x) = input(dt, &[4, 3, 6], 70);
        for axes in [
            &[0isize, 2][..],
            &[2, 0],
            &[0, 1],
            &[1],
            &[0, 1, 2],
            &[2, 1, 0],
        ] {
            let (last, rest) = axes.split_last().unwrap();
            let want = rest.iter().fold(x.rfft(*last), |y, &ax| y.fft(ax));
            c.check(
                &format!("rfftn({dt} [4,3,6], {axes:?})"),
                &lf::fft::rfftn(&a, axes),
                &want,
                want_dt,
            );
        }
    }
    for dt in COMPLEX_INPUTS {
        let want_dt = expected_dtype(dt, true);
        for (h, w) in [(1, 2), (3, 5), (17, 3), (8, 51), (4, 1)] {
            let (a, x) = input(dt, &[2, h, w], (h * 10 + w) as u64);
            let m = 2 * (w - 1);
            if m == 0 {
                continue;
            }
            let want = x.ifft(-2).irfft(-1, m);
            c.check(
                &format!("irfft2({dt} [2,{h},{w}])"),
                &lf::fft::irfft2(&a),
                &want,
                want_dt,
            );
        }
        let (a, x) = input(dt, &[4, 3, 5], 80);
        for (axes, n) in [
            (&[0isize, 2][..], None),
            (&[2, 0], Some(7)),
            (&[0, 1], Some(4)),
            (&[1, 2, 0], Some(1)),
            (&[0, 1, 2], Some(9)),
        ] {
            let (last, rest) = axes.split_last().unwrap();
            let ax = x.norm_axis(*last);
            let m = n.unwrap_or(2 * (x.shape[ax] - 1));
            let want = rest
                .iter()
                .fold(x.clone(), |y, &r| y.ifft(r))
                .irfft(*last, m);
            c.check(
                &format!("irfftn({dt} [4,3,5], {n:?}, {axes:?})"),
                &lf::fft::irfftn(&a, n, axes),
                &want,
                want_dt,
            );
        }
    }
    c.finish(dev);
}

/// NumPy's results over repeated axes: the `fft/` lines of `tests/data/fixtures.txt`
/// (made by `tests/data/gen.py`, whose docstring gives the format).
const FIXTURES: &str = include_str!("data/fixtures.txt");

/// A fixture array (`dtype [shape] HEX`): its dtype, shape and values as complex f64.
fn fixture_array(s: &str) -> (DType, Vec<usize>, Vec<C>) {
    let mut it = s.split_whitespace();
    let (dt, shape, hex) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let shape: Vec<usize> = shape
        .trim_matches(['[', ']'])
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap())
        .collect();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let f32_at = |b: &[u8]| f32::from_le_bytes(b.try_into().unwrap()) as f64;
    let f64_at = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap());
    let (dt, v) = match dt {
        "f32" => (
            DType::F32,
            bytes.chunks(4).map(|b| C::new(f32_at(b), 0.0)).collect(),
        ),
        "f64" => (
            DType::F64,
            bytes.chunks(8).map(|b| C::new(f64_at(b), 0.0)).collect(),
        ),
        "c64" => (
            DType::C64,
            bytes
                .chunks(8)
                .map(|b| C::new(f32_at(&b[..4]), f32_at(&b[4..])))
                .collect(),
        ),
        "c128" => (
            DType::C128,
            bytes
                .chunks(16)
                .map(|b| C::new(f64_at(&b[..8]), f64_at(&b[8..])))
                .collect(),
        ),
        other => panic!("fixture dtype {other}"),
    };
    (dt, shape, v)
}

device_test!(rfftn_and_irfftn_over_repeated_axes_match_numpy);
fn rfftn_and_irfftn_over_repeated_axes_match_numpy(dev: &Device) {
    let cases: Vec<Vec<&str>> = FIXTURES
        .lines()
        .filter(|l| l.starts_with("fft/"))
        .map(|l| l.split(" | ").collect())
        .collect();
    assert!(cases.len() >= 10, "only {} fft fixtures", cases.len());
    let mut c = Checks::default();
    for f in &cases {
        let (name, expr) = (f[0], f[1]);
        let ints: Vec<isize> = f[2]
            .split_whitespace()
            .map(|t| t.strip_prefix("i:").unwrap().parse().unwrap())
            .collect();
        let (dt, shape, v) = fixture_array(f[4]);
        let a = match dt {
            DType::F32 => Array::from_vec(v.iter().map(|z| z.re as f32).collect(), &shape),
            DType::F64 => Array::from_vec(v.iter().map(|z| z.re).collect(), &shape),
            DType::C128 => {
                Array::from_vec(v.iter().map(|z| lf::c64::new(z.re, z.im)).collect(), &shape)
            }
            other => panic!("fixture input dtype {other}"),
        }
        .unwrap();
        let got = match expr {
            "rfftn" => lf::fft::rfftn(&a, &ints),
            "irfftn" => lf::fft::irfftn(&a, None, &ints),
            "irfftn_n" => lf::fft::irfftn(&a, Some(ints[0] as usize), &ints[1..]),
            other => panic!("fixture expression {other}"),
        };
        let (want_dt, shape, v) = fixture_array(f[5]);
        c.check(name, &got, &Nd { shape, v }, want_dt);
    }
    c.finish(dev);
}

device_test!(shifts_and_frequencies);
fn shifts_and_frequencies(dev: &Device) {
    let mut c = Checks::default();
    for (h, w) in [(1, 1), (3, 8), (17, 100), (8, 3)] {
        let (a, x) = input(DType::C128, &[h, w], (h + w) as u64);
        let (hs, ws) = ((h / 2) as isize, (w / 2) as isize);
        c.check(
            "fftshift",
            &lf::fft::fftshift(&a, None),
            &x.roll(0, hs).roll(1, ws),
            DType::C128,
        );
        c.check(
            "ifftshift",
            &lf::fft::ifftshift(&a, None),
            &x.roll(0, -hs).roll(1, -ws),
            DType::C128,
        );
        c.check(
            "fftshift(axes [1])",
            &lf::fft::fftshift(&a, Some(&[1])),
            &x.roll(1, ws),
            DType::C128,
        );
        c.check(
            "ifftshift(axes [-2])",
            &lf::fft::ifftshift(&a, Some(&[-2])),
            &x.roll(0, -hs),
            DType::C128,
        );
        let round = lf::fft::ifftshift(&lf::fft::fftshift(&a, None), None);
        c.check("ifftshift(fftshift)", &round, &x, DType::C128);
        // shifted spectrum
        let (a, x) = input(DType::F32, &[h, w], 3 * (h + w) as u64);
        let got = lf::fft::fftshift(&lf::fft::fft2(&a), None);
        c.check(
            "fftshift(fft2)",
            &got,
            &x.fft(1).fft(0).roll(0, hs).roll(1, ws),
            DType::C64,
        );
    }
    for n in SIZES {
        for d in [1.0, 0.1] {
            let want = Nd {
                shape: vec![n],
                v: (0..n)
                    .map(|i| {
                        let k = if i < n.div_ceil(2) {
                            i as f64
                        } else {
                            i as f64 - n as f64
                        };
                        C::new(k / (d * n as f64), 0.0)
                    })
                    .collect(),
            };
            c.check(
                &format!("fftfreq({n}, {d})"),
                &lf::fft::fftfreq(n, d, DType::F64),
                &want,
                DType::F64,
            );
            c.check(
                &format!("fftfreq({n}, {d}) f32"),
                &lf::fft::fftfreq(n, d, DType::F32),
                &want,
                DType::F32,
            );
            let want = Nd {
                shape: vec![n / 2 + 1],
                v: (0..n / 2 + 1)
                    .map(|i| C::new(i as f64 / (d * n as f64), 0.0))
                    .collect(),
            };
            c.check(
                &format!("rfftfreq({n}, {d})"),
                &lf::fft::rfftfreq(n, d, DType::F64),
                &want,
                DType::F64,
            );
        }
    }
    c.finish(dev);
}

device_test!(transforms_leave_their_input_intact);
/// The input buffer of a transform belongs to a graph node and must survive it (cuFFT's
/// C2R transforms overwrite their input; the others must not either).
fn transforms_leave_their_input_intact(dev: &Device) {
    let mut c = Checks::default();
    for dt in [DType::F32, DType::F64] {
        let (a, x) = input(dt, &[3, 8, 17], 90);
        lf::eval(&[
            &lf::fft::rfft2(&a),
            &lf::fft::rfftn(&a, &[0, 2]),
            &lf::fft::rfft(&a, 0),
        ])
        .unwrap();
        c.check(&format!("{dt} input after rfft2/rfftn/rfft"), &a, &x, dt);
    }
    for dt in COMPLEX_INPUTS {
        let (a, x) = input(dt, &[3, 8, 17], 91);
        lf::eval(&[
            &lf::fft::fft2(&a),
            &lf::fft::fftn(&a, &[0]),
            &lf::fft::ifftn(&a, &[0, 2]),
            &lf::fft::irfft2(&a),
            &lf::fft::irfftn(&a, Some(9), &[2, 0]),
            &lf::fft::irfft(&a, Some(1), 1),
        ])
        .unwrap();
        c.check(
            &format!("{dt} input after fft2/fftn/ifftn/irfft2/irfftn/irfft"),
            &a,
            &x,
            dt,
        );
        // an intermediate read again after the transform
        let y = &a * 2.0;
        let f = lf::fft::irfft2(&y);
        let z = &lf::fft::fft2(&y) + &y;
        lf::eval(&[&f, &z]).unwrap();
        let mut want = x.fft(-1).fft(-2);
        want.v
            .iter_mut()
            .zip(&x.v)
            .for_each(|(w, v)| *w = *w * 2.0 + v * 2.0);
        c.check(
            &format!("fft2(2 a) + 2 a ({dt}, next to irfft2(2 a))"),
            &z,
            &want,
            dt,
        );
    }
    c.finish(dev);
}

/// The PSF intensity image (2N x 2N) of an N x N pupil with a coma-like phase error (as in
/// `examples/02_psf.rs`).
fn psf(n: usize) -> Array {
    let x = Array::linspace(-1.0, 1.0, n, DType::F32);
    let g = lf::meshgrid(&[&x, &x], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phi = yy.atan2(xx);
    let phase = rho.square() * phi.cos();
    let wave = (phase * (2.0 * PI) * lf::c64::i()).exp(); // complex64
    let pupil = lf::where_(&rho.gt(1.0), lf::c64::new(0.0, 0.0), &wave);
    let p = n / 2;
    let padded = pupil.pad(&[(p, p), (p, p)], 0.0);
    let field = lf::fft::fftshift(&lf::fft::fft2(&lf::fft::ifftshift(&padded, None)), None);
    field.abs().square()
}

/// The peak of the PSF, computed on the host in f64: the same pupil, zero padded, a naive
/// 2-D DFT (the shifts only change phases, not the largest magnitude).
fn psf_peak_reference(n: usize) -> f64 {
    let m = 2 * n;
    let p = n / 2;
    let mut field = Nd::zeros(&[m, m]);
    let x = |i: usize| -1.0 + 2.0 * i as f64 / (n - 1) as f64;
    for i in 0..n {
        for j in 0..n {
            let (xx, yy) = (x(j), x(i)); // meshgrid "xy": xx varies along columns
            let rho = (xx * xx + yy * yy).sqrt();
            if rho > 1.0 {
                continue;
            }
            let phase = rho * rho * yy.atan2(xx).cos();
            field.v[(i + p) * m + (j + p)] = C::from_polar(1.0, 2.0 * PI * phase);
        }
    }
    let spec = field.fft(0).fft(1);
    spec.v.iter().map(|z| z.norm_sqr()).fold(0.0, f64::max)
}

/// Serializes the tests that switch the real-FFT rewrites (a process-wide setting).
static REWRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `body` with the real-FFT rewrites on and then off, restoring the setting.
fn both_plans(mut body: impl FnMut(bool)) {
    let _g = REWRITES.lock().unwrap_or_else(|e| e.into_inner());
    let before = lf::real_fft_mode();
    for on in [true, false] {
        lf::set_real_fft(on);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(on)));
        lf::set_real_fft_mode(before);
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
    }
}

/// Whether the plan of `a` holds a transform of `kind` (`r2c`, `c2r`, `c2c`).
fn plans(a: &Array, kind: &str) -> bool {
    lf::debug::plan(&[a])
        .unwrap()
        .lines()
        .any(|l| l.starts_with("step") && l.contains(&format!("kind: {kind}")))
}

device_test!(real_part_of_a_filtered_real_spectrum_matches_the_dft);
/// `real(ifftn(fftn(x) * c))` of real `x` with the rewrites: the inverse's input is the
/// Hermitian extension `E` of `x`'s half spectrum times other factors, so its Hermitian part
/// is computed as `h * (c + conj(c[-k])) / 2` on the half spectrum (`h` read directly, only
/// `c` mirrored). Checked against the naive DFT with the rewrites on and off, for factors
/// that are not symmetric (real and complex arrays), a factor on either side with a scalar,
/// `E` alone and `E * E`; with the rewrites on, the plan holds R2C and C2R transforms and
/// (but for `E * E`) no guarded (concatenation) load of the extension.
fn real_part_of_a_filtered_real_spectrum_matches_the_dft(dev: &Device) {
    both_plans(|on| {
        let mut c = Checks::default();
        for shape in [&[8usize][..], &[7], &[3, 8], &[8, 3], &[5, 4], &[4, 3, 6]] {
            let seed = shape.iter().sum::<usize>() as u64;
            let (a, x) = input(DType::F64, shape, 11 + seed);
            let (m, mx) = input(DType::F64, shape, 23 + seed);
            let (mc, mcx) = input(DType::C128, shape, 37 + seed);
            let all: Vec<isize> = (0..shape.len() as isize).collect();
            let spectrum = |v: &Nd| {
                let mut w = v.clone();
                for &k in &all {
                    w = w.fft(k);
                }
                w
            };
            let real_inverse = |v: &Nd| {
                let mut w = v.clone();
                for &k in &all {
                    w = w.ifft(k);
                }
                w.v.iter_mut().for_each(|z| *z = C::new(z.re, 0.0));
                w
            };
            let times = |p: &Nd, q: &Nd, s: f64| {
                let mut w = p.clone();
                w.v.iter_mut().zip(&q.v).for_each(|(z, &y)| *z = *z * y * s);
                w
            };
            let xs = spectrum(&x);
            let e = || lf::fft::fftn(&a, &all);
            let cases: Vec<(&str, Array, Nd)> = vec![
                ("E", lf::fft::ifftn(&e(), &all).real(), real_inverse(&xs)),
                (
                    "E * m",
                    lf::fft::ifftn(&(&e() * &m), &all).real(),
                    real_inverse(&times(&xs, &mx, 1.0)),
                ),
                (
                    "m * E * 0.5",
                    lf::fft::ifftn(&(&(&m * &e()) * 0.5), &all).real(),
                    real_inverse(&times(&xs, &mx, 0.5)),
                ),
                (
                    "E * complex m",
                    lf::fft::ifftn(&(&e() * &mc), &all).real(),
                    real_inverse(&times(&xs, &mcx, 1.0)),
                ),
                (
                    "E * E",
                    lf::fft::ifftn(&(&e() * &e()), &all).real(),
                    real_inverse(&times(&xs, &xs, 1.0)),
                ),
            ];
            for (name, got, want) in cases {
                let what = format!("real(ifftn({name})) {shape:?} rewrites {on}");
                let rewritten = on && shape[shape.len() - 1] >= 2;
                assert_eq!(plans(&got, "c2r"), rewritten, "{what}: plan");
                assert_eq!(plans(&got, "r2c"), rewritten, "{what}: plan");
                // E * E: the second factor is read through the extension, as it must be
                if rewritten && name != "E * E" {
                    let plan = lf::debug::plan(&[&got]).unwrap();
                    assert!(
                        !plan.contains("guard: Some"),
                        "{what}: the extension is read through guarded loads:\n{plan}"
                    );
                }
                c.check(&what, &got, &want, DType::F64);
            }
        }
        c.finish(dev);
    });
}

device_test!(real_data_rewrites_match_the_dft_with_and_without);
/// Complex transforms of real data (planned as R2C plus a Hermitian-extension view) and the
/// real part of inverse transforms (planned as C2R of the Hermitian part), each with the
/// rewrites on and off, against the naive DFT: odd, even, length-1 and length-2 axes, real
/// inputs and real inputs cast to complex, results consumed by further elementwise work.
fn real_data_rewrites_match_the_dft_with_and_without(dev: &Device) {
    both_plans(|on| {
        let mut c = Checks::default();
        for dt in REAL_INPUTS {
            let ct = expected_dtype(dt, false);
            for shape in [
                &[1usize][..],
                &[2],
                &[3],
                &[8],
                &[17],
                &[3, 8],
                &[8, 3],
                &[5, 1],
                &[4, 3, 6],
            ] {
                let (a, x) = input(dt, shape, shape.len() as u64 * 31 + shape[0] as u64);
                let what = |f: &str| format!("{f} {dt} {shape:?} rewrites {on}");
                let nd = shape.len() as isize;
                let all: Vec<isize> = (0..nd).collect();
                let mut want = x.clone();
                for &k in &all {
                    want = want.fft(k);
                }
                let got = lf::fft::fftn(&a, &all);
                let last = shape[shape.len() - 1];
                assert_eq!(plans(&got, "r2c"), on && last >= 2, "{}", what("fftn plan"));
                c.check(&what("fftn"), &got, &want, ct);
                // through a cast to complex, and consumed by elementwise work
                let got = lf::fft::fftn(&a.astype(ct), &all) * 2.0;
                let mut w2 = want.clone();
                w2.v.iter_mut().for_each(|z| *z *= 2.0);
                c.check(&what("fftn(astype) * 2"), &got, &w2, ct);
                let mut want = x.clone();
                for &k in &all {
                    want = want.ifft(k);
                }
                c.check(&what("ifftn"), &lf::fft::ifftn(&a, &all), &want, ct);
                if nd >= 2 {
                    // the last axis only (rewritten), and the first only (not: a
                    // strided real axis stays complex)
                    let got = lf::fft::fft(&a, -1);
                    assert_eq!(
                        plans(&got, "r2c"),
                        on && last >= 2,
                        "{}",
                        what("fft -1 plan")
                    );
                    c.check(&what("fft -1"), &got, &x.fft(-1), ct);
                    let got = lf::fft::fft(&a, 0);
                    assert!(!plans(&got, "r2c"), "{}", what("fft 0 plan"));
                    c.check(&what("fft 0"), &got, &x.fft(0), ct);
                }
            }
        }
        for dt in COMPLEX_INPUTS {
            let rt = expected_dtype(dt, false).real();
            for shape in [&[2usize][..], &[3], &[8], &[3, 8], &[8, 3], &[4, 3, 5]] {
                let (a, x) = input(dt, shape, 7 + shape.len() as u64);
                let all: Vec<isize> = (0..shape.len() as isize).collect();
                let mut want = x.clone();
                for &k in &all {
                    want = want.ifft(k);
                }
                want.v.iter_mut().for_each(|z| *z = C::new(z.re, 0.0));
                let what = format!("real(ifftn(y)) {dt} {shape:?} rewrites {on}");
                // the transform's input is lazy (the usual case: a spectrum times a filter)
                let got = lf::fft::ifftn(&(&a * 1.0), &all).real();
                assert_eq!(plans(&got, "c2r"), on, "{what} plan");
                c.check(&what, &got, &want, rt);
                // the complex result used as well: both right
                let full = lf::fft::ifftn(&(&a * 1.0), &all);
                let re = full.real();
                c.check(&format!("{what}, kept"), &re, &want, rt);
                let mut wfull = x.clone();
                for &k in &all {
                    wfull = wfull.ifft(k);
                }
                c.check(&format!("{what}, the complex result"), &full, &wfull, dt);
            }
        }
        c.finish(dev);
    });
}

device_test!(psf_plans_two_kernels_and_one_fft_and_matches_the_host);
fn psf_plans_two_kernels_and_one_fft_and_matches_the_host(dev: &Device) {
    let want = psf_peak_reference(16);
    assert!(want > 1.0, "reference peak {want}");
    let img = psf(16);
    // where the generated passes run the transform (`LAZYFUSE_FFT=generated`, or chosen by
    // measurement), CUDA computes both kernels inside its passes (`tests/fft_fused.rs`)
    let same_transform = lf::fft::fft2(&Array::zeros(&[32, 32], DType::C64));
    let fused = lf::debug::fft_runs_generated(&same_transform).unwrap();
    assert!(!fused || dev.is_cuda());
    assert_eq!(
        lf::debug::kernel_count(&[&img]).unwrap(),
        if fused { 0 } else { 2 },
        "plan:\n{}",
        lf::debug::plan(&[&img]).unwrap()
    );
    assert_eq!(lf::debug::library_count(&[&img]).unwrap(), 1);
    assert_eq!(img.shape(), &[32, 32]);
    assert_eq!(img.dtype(), DType::F32);
    let host: Vec<f32> = img.to_vec().unwrap();
    let peak = host.iter().copied().fold(f32::MIN, f32::max) as f64;
    let rel = (peak - want).abs() / want;
    assert!(
        rel < 1e-4,
        "{dev}: peak {peak}, host f64 reference {want} (relative {rel:.2e})"
    );
    // energy spreads beyond the peak (Parseval: the total is 4N^2 times the pupil area)
    let total: f64 = host.iter().map(|&v| v as f64).sum();
    assert!(total.is_finite() && total > peak);
}

/// `x` zero-padded by `widths` (before, after) per axis.
fn pad_nd(x: &Nd, widths: &[(usize, usize)]) -> Nd {
    let shape: Vec<usize> = x
        .shape
        .iter()
        .zip(widths)
        .map(|(&n, &(b, a))| n + b + a)
        .collect();
    let mut out = Nd::zeros(&shape);
    for (j, &v) in x.v.iter().enumerate() {
        let (mut rest, mut at, mut stride) = (j, 0, 1);
        for d in (0..shape.len()).rev() {
            at += (rest % x.shape[d] + widths[d].0) * stride;
            rest /= x.shape[d];
            stride *= shape[d];
        }
        out.v[at] = v;
    }
    out
}

device_test!(transforms_of_zero_padded_inputs_match_the_dft_pruned_and_not);
/// Transforms over the last two axes of zero-padded inputs: the padding shifted so that the
/// data wraps around the edges (psf's layout), in one block and in several, forward and
/// inverse, 2-D and batched 3-D, single and double precision. The plan records the columns
/// that hold data, and the results match the naive DFT with pruning forced for every size
/// (on CUDA: the column passes, then the rows) and with it off. Each is evaluated three times,
/// so that on CUDA a recorded graph (which transforms the dead input in place) runs too.
fn transforms_of_zero_padded_inputs_match_the_dft_pruned_and_not(dev: &Device) {
    let _g = REWRITES.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Checks::default();
    for prune in [0, usize::MAX] {
        let before = lf::set_pruned_fft_min_elements(prune);
        type Case<'a> = (DType, &'a [usize], &'a [(usize, usize)], bool);
        let cases: [Case; 4] = [
            (DType::C64, &[5, 6], &[(3, 2), (3, 3)], true),
            (DType::C128, &[3, 7], &[(1, 4), (0, 9)], false),
            (DType::C64, &[2, 4, 3], &[(0, 0), (2, 2), (5, 0)], true),
            (DType::C128, &[17, 9], &[(4, 4), (12, 11)], false),
        ];
        for (dt, shape, widths, shift) in cases {
            for inverse in [false, true] {
                let (a, x) = input(dt, shape, shape.iter().sum::<usize>() as u64);
                let mut want = pad_nd(&x, widths);
                if shift {
                    for ax in 0..shape.len() {
                        let n = want.shape[ax] as isize;
                        want = want.roll(ax as isize, -(n / 2));
                    }
                }
                want = if inverse {
                    want.ifft(-1).ifft(-2)
                } else {
                    want.fft(-1).fft(-2)
                };
                let what = format!(
                    "{} of {dt} {shape:?} padded by {widths:?} (shifted {shift}, pruned \
                         from {prune})",
                    if inverse { "ifft2" } else { "fft2" }
                );
                for _ in 0..3 {
                    let p = a.pad(widths, 0.0);
                    let p = if shift {
                        lf::fft::ifftshift(&p, None)
                    } else {
                        p
                    };
                    let y = if inverse {
                        lf::fft::ifft2(&p)
                    } else {
                        lf::fft::fft2(&p)
                    };
                    let plan = lf::debug::plan(&[&y]).unwrap();
                    if !plan.contains("support: some([(") {
                        c.fails
                            .push(format!("{what}: no support in the plan:\n{plan}"));
                    }
                    c.check(&what, &y, &want, dt);
                }
            }
        }
        lf::set_pruned_fft_min_elements(before);
    }
    c.finish(dev);
}

device_test!(a_filtered_real_step_reads_its_filters_symmetrized_half_once_computed);
/// The real-FFT rewrite of a filtered step, `real(ifft2(fft2(u) * m))` with an evaluated real
/// filter `m` (a simulation loop that rebuilds its step every time): the filter's Hermitian
/// part on the half spectrum depends only on `m`, so it is evaluated at the first build and
/// kept while `m` lives. The step's half-spectrum kernel then loads the spectrum and that
/// array once each (no mirrored reads of `m`), every later build reuses it, and the results
/// match the naive DFT.
fn a_filtered_real_step_reads_its_filters_symmetrized_half_once_computed(dev: &Device) {
    let _g = REWRITES.lock().unwrap_or_else(|e| e.into_inner());
    let before = lf::real_fft_mode();
    lf::set_real_fft(true);
    let mut c = Checks::default();
    for (h, w) in [(6usize, 8usize), (5, 7), (1, 17)] {
        let (u, ux) = input(DType::F32, &[h, w], (h * 31 + w) as u64);
        let (m, mx) = input(DType::F32, &[h, w], (h * 17 + w) as u64);
        let mut want = ux.fft(0).fft(1);
        for (z, f) in want.v.iter_mut().zip(&mx.v) {
            *z *= f.re;
        }
        let mut want = want.ifft(0).ifft(1);
        want.v.iter_mut().for_each(|z| *z = C::new(z.re, 0.0));
        for round in 0..3 {
            let y = lf::fft::ifft2(&(lf::fft::fft2(&u) * &m)).real();
            let plan = lf::debug::plan(&[&y]).unwrap();
            let half = format!("shape=[{h}, {}]", w / 2 + 1);
            let loads = plan
                .split("step ")
                .filter(|s| s.contains(&half) && s.contains("kernel"))
                .map(|s| s.matches("= Load {").count())
                .collect::<Vec<_>>();
            if loads != [2] {
                c.fails.push(format!(
                    "[{h}, {w}] build {round}: loads of the half-spectrum kernels {loads:?}:\n{plan}"
                ));
            }
            c.check(
                &format!("filtered step [{h}, {w}] build {round}"),
                &y,
                &want,
                DType::F32,
            );
        }
    }
    lf::set_real_fft_mode(before);
    c.finish(dev);
}
