//! CPU FFTs through rustfft: C2C, R2C and C2R over any axes, batched over the others,
//! with rustfft's planners (which cache plans) kept for the process.

use crate::graph::{FftKind, FftSpec};
use crate::{Error, Result};
use lazyfuse_codegen::HostBuf;
use num_complex::Complex;
use rustfft::{FftNum, FftPlanner};
use std::sync::{Mutex, OnceLock};

fn planner<T: FftNum>(
    cell: &'static OnceLock<Mutex<FftPlanner<T>>>,
) -> &'static Mutex<FftPlanner<T>> {
    cell.get_or_init(|| Mutex::new(FftPlanner::new()))
}
static P32: OnceLock<Mutex<FftPlanner<f32>>> = OnceLock::new();
static P64: OnceLock<Mutex<FftPlanner<f64>>> = OnceLock::new();

/// Transforms every line along `axis` of `data` (C order, `shape`) in place.
fn along_axis<T: FftNum>(
    planner: &Mutex<FftPlanner<T>>,
    data: &mut [Complex<T>],
    shape: &[usize],
    axis: usize,
    inverse: bool,
) {
    let n = shape[axis];
    if n == 0 || data.is_empty() {
        return;
    }
    let fft = {
        let mut p = planner.lock().unwrap_or_else(|e| e.into_inner());
        if inverse {
            p.plan_fft_inverse(n)
        } else {
            p.plan_fft_forward(n)
        }
    };
    let inner: usize = shape[axis + 1..].iter().product();
    if inner == 1 {
        fft.process(data); // contiguous lines: one batched call
        return;
    }
    let outer: usize = shape[..axis].iter().product();
    // gather a block of lines into contiguous scratch, transform, scatter back
    let mut lines = vec![Complex::new(T::zero(), T::zero()); n * inner];
    for o in 0..outer {
        let base = o * n * inner;
        for k in 0..n {
            for i in 0..inner {
                lines[i * n + k] = data[base + k * inner + i];
            }
        }
        fft.process(&mut lines);
        for k in 0..n {
            for i in 0..inner {
                data[base + k * inner + i] = lines[i * n + k];
            }
        }
    }
}

fn run_typed<T: FftNum>(
    planner: &Mutex<FftPlanner<T>>,
    spec: &FftSpec,
    mut data: Vec<Complex<T>>,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Vec<Complex<T>> {
    let (last, rest) = spec
        .axes
        .split_last()
        .expect("an FFT has at least one axis");
    match spec.kind {
        FftKind::C2C => {
            for &a in &spec.axes {
                along_axis(planner, &mut data, in_shape, a, spec.inverse);
            }
            data
        }
        FftKind::R2C => {
            along_axis(planner, &mut data, in_shape, *last, false);
            let mut out = resize_axis(&data, in_shape, *last, out_shape[*last], false);
            for &a in rest {
                along_axis(planner, &mut out, out_shape, a, false);
            }
            out
        }
        FftKind::C2R => {
            for &a in rest {
                along_axis(planner, &mut data, in_shape, a, true);
            }
            // Hermitian completion of the half spectrum along the last axis
            let mut full = resize_axis(&data, in_shape, *last, out_shape[*last], true);
            along_axis(planner, &mut full, out_shape, *last, true);
            full
        }
    }
}

/// Copies `data` with axis `axis` resized to `m` entries: truncated/zero-padded, or, with
/// `hermitian`, completed as `x[k] = conj(x[m - k])` beyond the half spectrum given.
fn resize_axis<T: FftNum>(
    data: &[Complex<T>],
    shape: &[usize],
    axis: usize,
    m: usize,
    hermitian: bool,
) -> Vec<Complex<T>> {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let zero = Complex::new(T::zero(), T::zero());
    let mut out = vec![zero; outer * m * inner];
    let half = m / 2 + 1; // entries NumPy's irfft reads
    for o in 0..outer {
        for k in 0..m {
            for i in 0..inner {
                let src = |k: usize| data[(o * n + k) * inner + i];
                out[(o * m + k) * inner + i] = if !hermitian || k < half {
                    if k < n {
                        src(k)
                    } else {
                        zero
                    }
                } else {
                    let j = m - k;
                    if j < n {
                        src(j).conj()
                    } else {
                        zero
                    }
                };
            }
        }
    }
    out
}

/// Runs the unnormalized FFT `spec` of `input` (shape `in_shape`) to a buffer of
/// `out_shape`.
pub(crate) fn run(
    spec: &FftSpec,
    input: &HostBuf,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<HostBuf> {
    let real_out = spec.kind == FftKind::C2R;
    Ok(match input {
        HostBuf::C64(v) => {
            let out = run_typed(planner(&P32), spec, v.clone(), in_shape, out_shape);
            if real_out {
                HostBuf::F32(out.iter().map(|c| c.re).collect())
            } else {
                HostBuf::C64(out)
            }
        }
        HostBuf::C128(v) => {
            let out = run_typed(planner(&P64), spec, v.clone(), in_shape, out_shape);
            if real_out {
                HostBuf::F64(out.iter().map(|c| c.re).collect())
            } else {
                HostBuf::C128(out)
            }
        }
        HostBuf::F32(v) => {
            let c = v.iter().map(|&x| Complex::new(x, 0.0)).collect();
            HostBuf::C64(run_typed(planner(&P32), spec, c, in_shape, out_shape))
        }
        HostBuf::F64(v) => {
            let c = v.iter().map(|&x| Complex::new(x, 0.0)).collect();
            HostBuf::C128(run_typed(planner(&P64), spec, c, in_shape, out_shape))
        }
        other => {
            return Err(Error::internal(
                "fft",
                format!("unsupported input dtype {}", other.dtype()),
            ));
        }
    })
}
