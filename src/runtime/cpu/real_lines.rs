//! Real FFTs of even length `n` through one complex FFT of length `n / 2` (rustfft) and a
//! separation pass: the textbook packing of even and odd samples as one complex line.
//!
//! The realfft crate computes the same thing, but its separation loop (one complex value
//! from each end per step, twiddles applied in place) runs scalar: in the 256x256 sim step
//! on the CPU it cost about as much as the half-length FFTs themselves (`perf record`:
//! `RealToComplexEven` and `ComplexToRealEven` took 10 % of the step). Here the separation
//! reads the half-length spectrum and writes a separate output line front to back, which
//! the compiler vectorizes.

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftNum, FftPlanner};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The plans of one even length `n`: the complex FFT of `n / 2` points and the twiddles
/// `w[k] = exp(-2 pi i k / n)`, `k = 0 .. n / 2`.
pub(super) struct RealLines<T: FftNum> {
    n: usize,
    fft: Arc<dyn Fft<T>>,
    tw: Vec<Complex<T>>,
}

/// Plans by (length, inverse).
type Cache<T> = Mutex<HashMap<(usize, bool), Arc<RealLines<T>>>>;

/// Per element type: the cache of [`RealLines`] by length and direction.
pub(super) trait RealPlans: FftNum {
    fn cache() -> &'static Cache<Self>;
}

/// The caches of both element types (a part of the CPU device's state), each made on first
/// use.
pub(crate) struct RealLinesCaches {
    f32: OnceLock<Cache<f32>>,
    f64: OnceLock<Cache<f64>>,
}

impl RealLinesCaches {
    /// Both empty.
    pub(crate) const fn new() -> RealLinesCaches {
        RealLinesCaches {
            f32: OnceLock::new(),
            f64: OnceLock::new(),
        }
    }
}

macro_rules! real_plans {
    ($t:ident) => {
        impl RealPlans for $t {
            fn cache() -> &'static Cache<$t> {
                super::CPU
                    .real_lines
                    .$t
                    .get_or_init(|| Mutex::new(HashMap::new()))
            }
        }
    };
}
real_plans!(f32);
real_plans!(f64);

impl<T: FftNum + RealPlans> RealLines<T> {
    /// The plans for real lines of even length `n >= 2`, forward (real to complex) or
    /// inverse, from the process-wide cache; the complex FFT comes from `planner`.
    pub(super) fn get(n: usize, inverse: bool, planner: &Mutex<FftPlanner<T>>) -> Arc<Self> {
        debug_assert!(n >= 2 && n.is_multiple_of(2));
        let mut cache = T::cache().lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry((n, inverse))
            .or_insert_with(|| {
                let half = n / 2;
                let fft = {
                    let mut p = planner.lock().unwrap_or_else(|e| e.into_inner());
                    if inverse {
                        p.plan_fft_inverse(half)
                    } else {
                        p.plan_fft_forward(half)
                    }
                };
                let tw = (0..=half)
                    .map(|k| {
                        let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
                        Complex::new(
                            T::from_f64(a.cos()).unwrap_or_else(T::zero),
                            T::from_f64(a.sin()).unwrap_or_else(T::zero),
                        )
                    })
                    .collect();
                Arc::new(RealLines { n, fft, tw })
            })
            .clone()
    }

    /// Complex elements of the working line that [`forward`](Self::forward) and
    /// [`inverse`](Self::inverse) take.
    pub(super) fn work_len(&self) -> usize {
        self.n / 2
    }

    /// Scratch elements the complex FFT needs.
    pub(super) fn scratch_len(&self) -> usize {
        self.fft.get_inplace_scratch_len()
    }

    /// The `n / 2 + 1` non-negative frequencies `y` of the real line `x` (`n` points),
    /// unnormalized.
    pub(super) fn forward(
        &self,
        x: &[T],
        y: &mut [Complex<T>],
        work: &mut [Complex<T>],
        scratch: &mut [Complex<T>],
    ) {
        let h = self.n / 2;
        let (x, y, z, tw) = (
            &x[..self.n],
            &mut y[..h + 1],
            &mut work[..h],
            &self.tw[..h + 1],
        );
        // z[m] = x[2m] + i x[2m + 1]
        for (zm, p) in z.iter_mut().zip(x.chunks_exact(2)) {
            *zm = Complex::new(p[0], p[1]);
        }
        self.fft.process_with_scratch(z, scratch);
        let half = T::from_f64(0.5).unwrap_or_else(T::zero);
        // k = 0 and k = h: the even and odd parts' sums
        y[0] = Complex::new(z[0].re + z[0].im, T::zero());
        y[h] = Complex::new(z[0].re - z[0].im, T::zero());
        // 0 < k < h: with a = z[k], b = conj(z[h - k]), the even samples' transform is
        // (a + b) / 2 and the odd ones' -i (a - b) / 2, combined with the twiddle w[k]
        for k in 1..h {
            let (a, b) = (z[k], z[h - k].conj());
            let e = (a + b) * half;
            let d = (a - b) * half;
            let o = Complex::new(d.im, -d.re);
            y[k] = e + tw[k] * o;
        }
    }

    /// The real line `y` (`n` points) of the half spectrum `x` (`n / 2 + 1` entries, the
    /// imaginary parts of its first and last ignored), unnormalized (`n` times the inverse
    /// DFT, as rustfft's and realfft's inverse transforms).
    pub(super) fn inverse(
        &self,
        x: &[Complex<T>],
        y: &mut [T],
        work: &mut [Complex<T>],
        scratch: &mut [Complex<T>],
    ) {
        let h = self.n / 2;
        let (x, y, z, tw) = (
            &x[..h + 1],
            &mut y[..self.n],
            &mut work[..h],
            &self.tw[..h + 1],
        );
        // Z[k] = (x[k] + conj(x[h - k])) + i conj(w[k]) (x[k] - conj(x[h - k])): twice the
        // transforms of the even and odd samples, so that the half-length inverse gives
        // n times the samples as z[m] = y[2m] + i y[2m + 1]
        let (r0, rh) = (x[0].re, x[h].re);
        z[0] = Complex::new(r0 + rh, r0 - rh);
        for k in 1..h {
            let (a, b) = (x[k], x[h - k].conj());
            let e = a + b;
            let o = tw[k].conj() * (a - b);
            z[k] = Complex::new(e.re - o.im, e.im + o.re);
        }
        self.fft.process_with_scratch(z, scratch);
        for (p, zm) in y.chunks_exact_mut(2).zip(z.iter()) {
            p[0] = zm.re;
            p[1] = zm.im;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DFT of `x` by its definition, in f64.
    fn dft(x: &[Complex<f64>], inverse: bool) -> Vec<Complex<f64>> {
        let n = x.len();
        let s = if inverse { 1.0 } else { -1.0 };
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .fold(Complex::new(0.0, 0.0), |acc, (j, &v)| {
                        let a = s * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                        acc + v * Complex::new(a.cos(), a.sin())
                    })
            })
            .collect()
    }

    #[test]
    fn forward_and_inverse_match_the_dft() {
        let planner = Mutex::new(FftPlanner::<f64>::new());
        for n in [2usize, 4, 6, 8, 10, 16, 30, 64, 256, 1000] {
            let x: Vec<f64> = (0..n)
                .map(|j| ((j * 7919) % 113) as f64 / 7.0 - 8.0)
                .collect();
            let want: Vec<Complex<f64>> = dft(
                &x.iter().map(|&v| Complex::new(v, 0.0)).collect::<Vec<_>>(),
                false,
            );
            let fwd = RealLines::get(n, false, &planner);
            let mut work = vec![Complex::new(0.0, 0.0); fwd.work_len()];
            let mut scratch = vec![Complex::new(0.0, 0.0); fwd.scratch_len()];
            let mut y = vec![Complex::new(f64::NAN, f64::NAN); n / 2 + 1];
            fwd.forward(&x, &mut y, &mut work, &mut scratch);
            let scale = x.iter().map(|v| v.abs()).sum::<f64>();
            for k in 0..=n / 2 {
                assert!((y[k] - want[k]).norm() <= 1e-12 * scale, "n {n} k {k}");
            }
            assert_eq!((y[0].im, y[n / 2].im), (0.0, 0.0), "n {n}");
            // the inverse of the half spectrum (imaginary parts of its ends set to noise,
            // which must be ignored) is n times the line
            y[0].im = 3.5;
            y[n / 2].im = -1.25;
            let inv = RealLines::get(n, true, &planner);
            let mut work = vec![Complex::new(0.0, 0.0); inv.work_len()];
            let mut scratch = vec![Complex::new(0.0, 0.0); inv.scratch_len()];
            let mut back = vec![f64::NAN; n];
            inv.inverse(&y, &mut back, &mut work, &mut scratch);
            for j in 0..n {
                assert!(
                    (back[j] - n as f64 * x[j]).abs() <= 1e-11 * scale * n as f64,
                    "n {n} j {j}: {} vs {}",
                    back[j],
                    n as f64 * x[j]
                );
            }
        }
    }
}
