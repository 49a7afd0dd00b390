//! CPU FFTs through rustfft: C2C, R2C and C2R over any axes, batched over the others,
//! with rustfft's planners (which cache plans) kept for the process. Every buffer (the
//! work copy, scratch, results) is allocated fallibly: a transform too large for memory is
//! an `Error::OutOfMemory`, not an abort.

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

/// The out-of-memory error for `len` elements of `T` for `what`.
fn oom<T>(len: usize, what: &str) -> Error {
    Error::OutOfMemory {
        op: "fft",
        bytes: len.saturating_mul(std::mem::size_of::<T>()),
        what: format!("{len} elements of {what}"),
    }
}

/// A vector with room for exactly `len` elements, or an out-of-memory error.
fn try_with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    lazyfuse_codegen::try_with_capacity(len).map_err(|_| oom::<T>(len, what))
}

/// `len` copies of `x`, or an out-of-memory error.
fn try_filled<T: Clone>(len: usize, x: T, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len, what)?;
    v.resize(len, x);
    Ok(v)
}

/// The items of `it` collected into an exactly sized vector, or an out-of-memory error.
fn try_collect<T>(it: impl ExactSizeIterator<Item = T>, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(it.len(), what)?;
    v.extend(it);
    Ok(v)
}

/// Lengths from which a plan's own tables are worth checking for before planning.
const PROBE_LEN: usize = 1 << 20;

/// Transforms every line along `axis` of `data` (C order, `shape`) in place.
fn along_axis<T: FftNum>(
    planner: &Mutex<FftPlanner<T>>,
    data: &mut [Complex<T>],
    shape: &[usize],
    axis: usize,
    inverse: bool,
) -> Result<()> {
    let n = shape[axis];
    if n == 0 || data.is_empty() {
        return Ok(());
    }
    let zero = Complex::new(T::zero(), T::zero());
    if n >= PROBE_LEN {
        // rustfft allocates a plan's twiddle tables (about `n` values) infallibly: ask the
        // allocator first, so that a length memory cannot hold is an error, not an abort
        drop(try_with_capacity::<Complex<T>>(n, "an FFT plan's tables")?);
    }
    let fft = {
        let mut p = planner.lock().unwrap_or_else(|e| e.into_inner());
        if inverse {
            p.plan_fft_inverse(n)
        } else {
            p.plan_fft_forward(n)
        }
    };
    let mut scratch = try_filled(fft.get_inplace_scratch_len(), zero, "FFT scratch")?;
    let inner: usize = shape[axis + 1..].iter().product();
    if inner == 1 {
        // contiguous lines: one batched call
        fft.process_with_scratch(data, &mut scratch);
        return Ok(());
    }
    let outer: usize = shape[..axis].iter().product();
    // gather a block of lines into contiguous scratch, transform, scatter back
    let mut lines = try_filled(n * inner, zero, "FFT lines")?;
    for o in 0..outer {
        let base = o * n * inner;
        for k in 0..n {
            for i in 0..inner {
                lines[i * n + k] = data[base + k * inner + i];
            }
        }
        fft.process_with_scratch(&mut lines, &mut scratch);
        for k in 0..n {
            for i in 0..inner {
                data[base + k * inner + i] = lines[i * n + k];
            }
        }
    }
    Ok(())
}

fn run_typed<T: FftNum>(
    planner: &Mutex<FftPlanner<T>>,
    spec: &FftSpec,
    mut data: Vec<Complex<T>>,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<Vec<Complex<T>>> {
    let (last, rest) = spec
        .axes
        .split_last()
        .expect("an FFT has at least one axis");
    match spec.kind {
        FftKind::C2C => {
            for &a in &spec.axes {
                along_axis(planner, &mut data, in_shape, a, spec.inverse)?;
            }
            Ok(data)
        }
        FftKind::R2C => {
            along_axis(planner, &mut data, in_shape, *last, false)?;
            let mut out = resize_axis(&data, in_shape, *last, out_shape[*last], false)?;
            drop(data);
            for &a in rest {
                along_axis(planner, &mut out, out_shape, a, false)?;
            }
            Ok(out)
        }
        FftKind::C2R => {
            for &a in rest {
                along_axis(planner, &mut data, in_shape, a, true)?;
            }
            // Hermitian completion of the half spectrum along the last axis
            let mut full = resize_axis(&data, in_shape, *last, out_shape[*last], true)?;
            drop(data);
            along_axis(planner, &mut full, out_shape, *last, true)?;
            Ok(full)
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
) -> Result<Vec<Complex<T>>> {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let zero = Complex::new(T::zero(), T::zero());
    let len = outer
        .checked_mul(m)
        .and_then(|x| x.checked_mul(inner))
        .ok_or_else(|| oom::<Complex<T>>(usize::MAX, "an FFT result"))?;
    let mut out = try_with_capacity(len, "an FFT result")?;
    let half = m / 2 + 1; // entries NumPy's irfft reads
                          // written in order: element (o, k, i) is at (o * m + k) * inner + i
    for o in 0..outer {
        for k in 0..m {
            for i in 0..inner {
                let src = |k: usize| data[(o * n + k) * inner + i];
                out.push(if !hermitian || k < half {
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
                });
            }
        }
    }
    Ok(out)
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
    const WORK: &str = "an FFT's working copy";
    const REAL: &str = "an FFT's real result";
    Ok(match input {
        HostBuf::C64(v) => {
            let work = try_collect(v.iter().copied(), WORK)?;
            let out = run_typed(planner(&P32), spec, work, in_shape, out_shape)?;
            if real_out {
                HostBuf::F32(try_collect(out.iter().map(|c| c.re), REAL)?)
            } else {
                HostBuf::C64(out)
            }
        }
        HostBuf::C128(v) => {
            let work = try_collect(v.iter().copied(), WORK)?;
            let out = run_typed(planner(&P64), spec, work, in_shape, out_shape)?;
            if real_out {
                HostBuf::F64(try_collect(out.iter().map(|c| c.re), REAL)?)
            } else {
                HostBuf::C128(out)
            }
        }
        HostBuf::F32(v) => {
            let c = try_collect(v.iter().map(|&x| Complex::new(x, 0.0)), WORK)?;
            HostBuf::C64(run_typed(planner(&P32), spec, c, in_shape, out_shape)?)
        }
        HostBuf::F64(v) => {
            let c = try_collect(v.iter().map(|&x| Complex::new(x, 0.0)), WORK)?;
            HostBuf::C128(run_typed(planner(&P64), spec, c, in_shape, out_shape)?)
        }
        other => {
            return Err(Error::internal(
                "fft",
                format!("unsupported input dtype {}", other.dtype()),
            ));
        }
    })
}
