//! CPU FFTs through rustfft (complex) and realfft (the real axis of R2C and C2R), over any
//! axes, batched over the others and run in parallel on the CPU pool, with the planners
//! (which cache plans) kept for the process. Every buffer (working
//! lines, scratch, results) is allocated fallibly: a transform too large for memory is
//! an `Error::OutOfMemory`, not an abort.

use super::par::{par_chunks_mut, par_for, Disjoint};
use super::real_lines::{RealLines, RealPlans};
use super::transpose::transpose_copy;
use crate::graph::{FftKind, FftSpec};
use crate::{Error, Result};
use lazyfuse_codegen::{DType, HostBuf, SliceMut};
use num_complex::Complex;
use realfft::RealFftPlanner;
use rustfft::{FftNum, FftPlanner};
use std::sync::{Mutex, OnceLock};

fn planner<T: FftNum>(
    cell: &'static OnceLock<Mutex<FftPlanner<T>>>,
) -> &'static Mutex<FftPlanner<T>> {
    cell.get_or_init(|| Mutex::new(FftPlanner::new()))
}

/// The rustfft and realfft planners, with their plans by length, per element type (a part
/// of the CPU device's state), each made on first use.
pub(crate) struct FftPlanners {
    p32: OnceLock<Mutex<FftPlanner<f32>>>,
    p64: OnceLock<Mutex<FftPlanner<f64>>>,
    r32: OnceLock<Mutex<RealFftPlanner<f32>>>,
    r64: OnceLock<Mutex<RealFftPlanner<f64>>>,
}

impl FftPlanners {
    /// No planner made yet.
    pub(crate) const fn new() -> FftPlanners {
        FftPlanners {
            p32: OnceLock::new(),
            p64: OnceLock::new(),
            r32: OnceLock::new(),
            r64: OnceLock::new(),
        }
    }
}

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

/// Lengths from which a plan's own tables are worth checking for before planning.
const PROBE_LEN: usize = 1 << 20;

/// Asks the allocator for a plan's tables first for long lengths: rustfft and realfft
/// allocate them (about `n` values) infallibly, so that a length memory cannot hold is an
/// error, not an abort.
fn probe_plan<T>(n: usize) -> Result<()> {
    if n >= PROBE_LEN {
        drop(try_with_capacity::<Complex<T>>(n, "an FFT plan's tables")?);
    }
    Ok(())
}

/// Lines per parallel work item for `lines` lines of `n` points: a few items per thread,
/// each at least ~16K points so that a hand-off is amortized.
fn lines_per_task(lines: usize, n: usize) -> usize {
    let threads = super::threads().max(1);
    let by_balance = lines.div_ceil(threads * 4);
    let by_size = (1usize << 14).div_ceil(n.max(1));
    by_balance.max(by_size).clamp(1, lines.max(1))
}

/// `f(chunk, first line)` over consecutive groups of `lines_per_task` lines of `line`
/// elements each, in parallel on the CPU pool.
fn par_lines<E: Send>(
    data: &mut [E],
    line: usize,
    f: impl Fn(&mut [E], usize) -> Result<()> + Send + Sync,
) -> Result<()> {
    if data.is_empty() || line == 0 {
        return Ok(());
    }
    let per = lines_per_task(data.len() / line, line);
    if per * line >= data.len() || super::threads() <= 1 {
        // one task: on this thread, without a hand-off to the pool and back
        return f(data, 0);
    }
    par_chunks_mut(data, per * line, &|chunk, c| f(chunk, c * per))
}

/// Copies the `n`-point lines along the middle axis of `block` (`n` x `inner`, C order) into
/// `lines` (line `i` at `i * n`), in parallel.
fn gather<E: Copy + Send + Sync>(
    block: &[E],
    lines: &mut [E],
    n: usize,
    inner: usize,
) -> Result<()> {
    par_lines(lines, n, |chunk, first| {
        let g = chunk.len() / n;
        for k in 0..n {
            let row = &block[k * inner + first..k * inner + first + g];
            for (li, &v) in row.iter().enumerate() {
                chunk[li * n + k] = v;
            }
        }
        Ok(())
    })
}

/// The inverse of [`gather`]: lines of `m` points back along the middle axis of `block`
/// (`m` x `inner`).
fn scatter<E: Copy + Send + Sync>(
    lines: &[E],
    block: &mut [E],
    m: usize,
    inner: usize,
) -> Result<()> {
    par_lines(block, inner, |rows, first| {
        for (r, row) in rows.chunks_mut(inner).enumerate() {
            let k = first + r;
            for (i, v) in row.iter_mut().enumerate() {
                *v = lines[i * m + k];
            }
        }
        Ok(())
    })
}

/// The most columns one task of a strided pass gathers at a time for lines of `n`
/// elements of `E`: 32, or fewer where 32 lines would exceed 256 KiB (the copy stays in
/// the L2 cache while it is written column by column and transformed), but at least a
/// cache line of each row. Measured on the 2-core development machine (one thread): 32
/// columns took 5-10 % less time per pass than 8 or 16 on 256- and 1024-point lines of
/// `Complex<f32>` (fewer, longer row segments per gather).
fn group<E>(n: usize) -> usize {
    let size = std::mem::size_of::<E>().max(1);
    let line = (n + LINE_PAD) * size;
    ((256usize << 10) / line).clamp((64 / size).max(1), 32)
}

/// Elements between the starts of two gathered lines beyond their `n` points: with a
/// stride of exactly `n`, a power of two, the lines written row by row would all fall into
/// one set of the L1 cache and evict each other on every row.
const LINE_PAD: usize = 8;

/// A line transform for [`for_lines`]: `f(lines, stride, from)` on lines
/// `lines[i * stride..][..n]`, which hold copies of the lines `from[i * n..][..n]` first
/// when `from` is given (otherwise they hold the data already).
type LinesFn<'a, E> = dyn Fn(&mut [E], usize, Option<&[E]>) -> Result<()> + Send + Sync + 'a;

/// Runs `f` (see [`LinesFn`]) on every `n`-point line along `axis` of `data` (C order,
/// `shape`), in parallel: directly on contiguous lines (`stride = n`), else on copies of a
/// group of lines at a time gathered from (and written back into) their columns. With
/// `src` (same shape), the lines are read from `src` and their transforms written into
/// `data`, so a first pass needs no separate copy of its input: contiguous lines are
/// copied one at a time by `f` (into a line that is in cache when it is transformed),
/// strided ones gathered from `src`.
fn for_lines<E: Copy + Default + Send + Sync>(
    data: &mut [E],
    src: Option<&[E]>,
    shape: &[usize],
    axis: usize,
    f: &LinesFn<'_, E>,
) -> Result<()> {
    let n = shape[axis];
    if n == 0 || data.is_empty() {
        return Ok(());
    }
    if src.is_some_and(|s| s.len() != data.len()) {
        return Err(Error::internal(
            "fft",
            "source and result of different sizes",
        ));
    }
    let inner: usize = shape[axis + 1..].iter().product();
    if inner == 1 {
        return par_lines(data, n, |chunk, first| {
            f(
                chunk,
                n,
                src.map(|s| &s[first * n..first * n + chunk.len()]),
            )
        });
    }
    let outer = data.len() / (n * inner);
    // groups of near-equal width: 129 columns as 5 groups of 25-26, not 4 of 32 and one
    // of a single column, which would read a whole cache line of every row for one value
    let mut groups = inner.div_ceil(group::<E>(n));
    // a whole number of groups per thread when one block is split over the pool (129
    // columns on two threads: 6 groups, three each, not 5 split 3 + 2), as long as each
    // group keeps a cache line of every row and the groups are not halved
    let balanced = groups.next_multiple_of(super::threads().max(1));
    let min_width = (64 / std::mem::size_of::<E>().max(1)).max(1);
    if outer == 1 && groups > 1 && balanced <= 2 * groups && inner / balanced >= min_width {
        groups = balanced;
    }
    let width_max = inner.div_ceil(groups);
    let units = outer * groups;
    let per = lines_per_task(units, n * width_max);
    let stride = n + LINE_PAD;
    let base = Disjoint(data.as_mut_ptr());
    let base = &base;
    let unit = |buf: &mut Result<Vec<E>>, u: usize| -> Result<()> {
        let buf = buf
            .as_mut()
            .map_err(|_| oom::<E>(stride * width_max, "FFT lines"))?;
        let (o, g) = (u / groups, u % groups);
        let (c0, c1) = (g * inner / groups, (g + 1) * inner / groups);
        let width = c1 - c0;
        let start = o * n * inner + c0;
        let from: *const E = match src {
            Some(s) => s.as_ptr(),
            None => base.0,
        };
        let lines = buf[..width * stride].as_mut_ptr();
        // SAFETY: row `k < n`, column `li < width` of block `o` is element
        // `start + k * inner + li` < `data.len()` = `src.len()` (column `c0 + li` < `c1` <=
        // `inner`), and unit `u` is the only one touching columns `c0..c1` of block `o` of
        // `data`; `li * stride + k` < `width * stride`, inside `buf`, which nothing else
        // borrows here; `buf` and the data do not overlap.
        unsafe { transpose_copy(from.add(start), inner, lines, stride, n, width) };
        f(&mut buf[..width * stride], stride, None)?;
        let lines = buf[..width * stride].as_ptr();
        // SAFETY: as above, in the other direction.
        unsafe { transpose_copy(lines, stride, base.0.add(start), inner, width, n) };
        Ok(())
    };
    let init = || try_filled(stride * width_max, E::default(), "FFT lines");
    if units <= per || super::threads() <= 1 {
        // one task: on this thread, without a hand-off to the pool and back
        let mut buf = init();
        return (0..units).try_for_each(|u| unit(&mut buf, u));
    }
    par_for(units.div_ceil(per), &|t| {
        let mut buf = init();
        (t * per..units.min((t + 1) * per)).try_for_each(|u| unit(&mut buf, u))
    })
}

/// Transforms every line along `axis` of `data` (C order, `shape`) in place, or, with
/// `src`, every line of `src` into `data`.
fn along_axis<T: FftNum + Default>(
    planner: &Mutex<FftPlanner<T>>,
    data: &mut [Complex<T>],
    src: Option<&[Complex<T>]>,
    shape: &[usize],
    axis: usize,
    inverse: bool,
) -> Result<()> {
    let n = shape[axis];
    if n == 0 || data.is_empty() {
        return Ok(());
    }
    let fft = plan_of(planner, n, inverse)?;
    let zero = Complex::new(T::zero(), T::zero());
    let scratch_len = fft.get_inplace_scratch_len();
    for_lines(data, src, shape, axis, &|chunk, stride, from| {
        let mut scratch = try_filled(scratch_len, zero, "FFT scratch")?;
        transform_lines(&*fft, chunk, stride, from, &mut scratch);
        Ok(())
    })
}

/// The rustfft plan of `n` points in one direction (`n` > 0).
fn plan_of<T: FftNum>(
    planner: &Mutex<FftPlanner<T>>,
    n: usize,
    inverse: bool,
) -> Result<std::sync::Arc<dyn rustfft::Fft<T>>> {
    probe_plan::<T>(n)?;
    let mut p = planner.lock().unwrap_or_else(|e| e.into_inner());
    Ok(if inverse {
        p.plan_fft_inverse(n)
    } else {
        p.plan_fft_forward(n)
    })
}

/// Transforms the lines `chunk[i * stride..][..n]` (`n` the plan's length) in place, each
/// copied from `from[i * n..][..n]` first when `from` is given.
fn transform_lines<T: FftNum>(
    fft: &dyn rustfft::Fft<T>,
    chunk: &mut [Complex<T>],
    stride: usize,
    from: Option<&[Complex<T>]>,
    scratch: &mut [Complex<T>],
) {
    let n = fft.len();
    let zero = Complex::new(T::zero(), T::zero());
    for (i, line) in chunk.chunks_exact_mut(stride).enumerate() {
        let line = &mut line[..n];
        if let Some(from) = from {
            line.copy_from_slice(&from[i * n..(i + 1) * n]);
        }
        // an all-zero line transforms to zeros: the empty rows of a zero-padded input
        // cost one scan instead of a transform
        if line.iter().all(|z| z.re == T::zero() && z.im == T::zero()) {
            line.fill(zero);
        } else {
            fft.process_with_scratch(line, scratch);
        }
    }
}

/// The real planners (realfft keeps its own plan cache per planner).
fn real_planner<T: FftNum>(
    cell: &'static OnceLock<Mutex<RealFftPlanner<T>>>,
) -> &'static Mutex<RealFftPlanner<T>> {
    cell.get_or_init(|| Mutex::new(RealFftPlanner::new()))
}

/// Per element type: its planners.
trait Planners: FftNum + Default + RealPlans {
    fn complex() -> &'static Mutex<FftPlanner<Self>>;
    fn real() -> &'static Mutex<RealFftPlanner<Self>>;
    /// `len` values for a result that is overwritten entirely: a recycled host buffer as
    /// it is, or zeros.
    fn real_output(len: usize) -> Result<Vec<Self>>;
    /// The same for complex values.
    fn complex_output(len: usize) -> Result<Vec<Complex<Self>>>;
    /// Hands a complex working buffer back to the recycler.
    fn release_complex(v: Vec<Complex<Self>>);
    /// `v` as a writable host slice (for a fused producer's output).
    fn real_slice(v: &mut [Self]) -> SliceMut<'_>;
    /// The same for complex values.
    fn complex_slice(v: &mut [Complex<Self>]) -> SliceMut<'_>;
}

/// `len` elements of an FFT result of host dtype variant `$v` (see `Planners::real_output`).
macro_rules! output_of {
    ($v:ident, $len:expr) => {
        match super::super::host_output(DType::$v, $len, "an FFT result")? {
            HostBuf::$v(v) => Ok(v),
            _ => Err(Error::internal("fft", "recycled buffer of another dtype")),
        }
    };
}
impl Planners for f32 {
    fn complex() -> &'static Mutex<FftPlanner<f32>> {
        planner(&super::CPU.fft.p32)
    }
    fn real() -> &'static Mutex<RealFftPlanner<f32>> {
        real_planner(&super::CPU.fft.r32)
    }
    fn real_output(len: usize) -> Result<Vec<f32>> {
        output_of!(F32, len)
    }
    fn complex_output(len: usize) -> Result<Vec<Complex<f32>>> {
        output_of!(C64, len)
    }
    fn release_complex(v: Vec<Complex<f32>>) {
        super::super::host_release(HostBuf::C64(v));
    }
    fn real_slice(v: &mut [f32]) -> SliceMut<'_> {
        SliceMut::F32(v)
    }
    fn complex_slice(v: &mut [Complex<f32>]) -> SliceMut<'_> {
        SliceMut::C64(v)
    }
}
impl Planners for f64 {
    fn complex() -> &'static Mutex<FftPlanner<f64>> {
        planner(&super::CPU.fft.p64)
    }
    fn real() -> &'static Mutex<RealFftPlanner<f64>> {
        real_planner(&super::CPU.fft.r64)
    }
    fn real_output(len: usize) -> Result<Vec<f64>> {
        output_of!(F64, len)
    }
    fn complex_output(len: usize) -> Result<Vec<Complex<f64>>> {
        output_of!(C128, len)
    }
    fn release_complex(v: Vec<Complex<f64>>) {
        super::super::host_release(HostBuf::C128(v));
    }
    fn real_slice(v: &mut [f64]) -> SliceMut<'_> {
        SliceMut::F64(v)
    }
    fn complex_slice(v: &mut [Complex<f64>]) -> SliceMut<'_> {
        SliceMut::C128(v)
    }
}

/// A transform of groups of lines: `f(input lines, output lines)`.
type PairFn<'a, A, B> = dyn Fn(&[A], &mut [B]) -> Result<()> + Send + Sync + 'a;

/// `f(x lines, y lines)` over groups of corresponding lines of `xs` (`nx` elements each)
/// and `ys` (`ny` each), in parallel on the CPU pool.
fn par_pairs<A: Sync, B: Send>(
    xs: &[A],
    nx: usize,
    ys: &mut [B],
    ny: usize,
    f: &PairFn<'_, A, B>,
) -> Result<()> {
    if nx == 0 || ny == 0 || xs.is_empty() {
        return Ok(());
    }
    let lines = xs.len() / nx;
    if ys.len() != lines * ny {
        return Err(Error::internal("fft", "line groups of different counts"));
    }
    let per = lines_per_task(lines, nx.max(ny));
    if per >= lines || super::threads() <= 1 {
        return f(xs, ys);
    }
    par_chunks_mut(ys, per * ny, &|y, k| {
        let l0 = k * per;
        f(&xs[l0 * nx..(l0 + y.len() / ny) * nx], y)
    })
}

/// Lines of `nx` points along `axis` of `xs` (`shape`) transformed by `f` (groups of lines)
/// into lines of `ny` points along the same axis of a new buffer: directly when the lines
/// are contiguous, else through gathered copies of each outer block.
fn map_lines<A, B>(
    xs: &[A],
    shape: &[usize],
    axis: usize,
    ny: usize,
    f: &PairFn<'_, A, B>,
    output: fn(usize) -> Result<Vec<B>>,
) -> Result<Vec<B>>
where
    A: Copy + Default + Send + Sync,
    B: Copy + Default + Send + Sync,
{
    let nx = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let len = outer
        .checked_mul(ny)
        .and_then(|x| x.checked_mul(inner))
        .ok_or_else(|| oom::<B>(usize::MAX, "an FFT result"))?;
    // every line of the result is written by `f` (directly or through `scatter`)
    let mut ys = output(len)?;
    if nx == 0 || len == 0 {
        return Ok(ys);
    }
    if inner == 1 {
        par_pairs(xs, nx, &mut ys, ny, f)?;
        return Ok(ys);
    }
    let mut xl = try_filled(nx * inner, A::default(), "FFT lines")?;
    let mut yl = try_filled(ny * inner, B::default(), "FFT lines")?;
    for (xb, yb) in xs.chunks(nx * inner).zip(ys.chunks_mut(ny * inner)) {
        gather(xb, &mut xl, nx, inner)?;
        par_pairs(&xl, nx, &mut yl, ny, f)?;
        scatter(&yl, yb, ny, inner)?;
    }
    Ok(ys)
}

/// The real-to-complex transform of groups of `n`-point real lines into their `n / 2 + 1`
/// non-negative frequencies, half the work of a complex transform (even `n`:
/// [`RealLines`]; odd `n`: realfft). The input lines are only read.
fn r2c_lines<T: Planners>(n: usize) -> Result<Box<PairFn<'static, T, Complex<T>>>> {
    probe_plan::<T>(n)?;
    let zero = Complex::new(T::zero(), T::zero());
    if n >= 2 && n.is_multiple_of(2) {
        let plan = RealLines::get(n, false, T::complex());
        return Ok(Box::new(move |x, y| {
            let mut scratch = try_filled(plan.scratch_len(), zero, "FFT scratch")?;
            let mut work = try_filled(plan.work_len(), zero, "FFT lines")?;
            for (xl, yl) in x.chunks(n).zip(y.chunks_mut(n / 2 + 1)) {
                plan.forward(xl, yl, &mut work, &mut scratch);
            }
            Ok(())
        }));
    }
    let fft = T::real()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plan_fft_forward(n.max(1));
    let scratch_len = fft.get_scratch_len();
    Ok(Box::new(move |x, y| {
        let mut scratch = try_filled(scratch_len, zero, "FFT scratch")?;
        let mut line = try_filled(n, T::zero(), "FFT lines")?;
        for (xl, yl) in x.chunks(n).zip(y.chunks_mut(n / 2 + 1)) {
            line.copy_from_slice(xl);
            fft.process_with_scratch(&mut line, yl, &mut scratch)
                .map_err(|e| Error::internal("fft", e.to_string()))?;
        }
        Ok(())
    }))
}

/// Real-to-complex transform along axis `last` of real `data` (`shape`) ([`r2c_lines`]):
/// `data` is not modified: each line is copied into a working line first, which is in
/// cache when it is transformed.
fn r2c_axis<T: Planners>(data: &[T], shape: &[usize], last: usize) -> Result<Vec<Complex<T>>> {
    let n = shape[last];
    let f = r2c_lines::<T>(n)?;
    map_lines(data, shape, last, n / 2 + 1, &*f, T::complex_output)
}

/// The complex-to-real transform of groups of half spectra of `n` entries into lines of
/// `m` real points, as NumPy's `irfft`: the spectrum cut or zero-padded to `m / 2 + 1`
/// entries, the imaginary parts of the zero and (even `m`) Nyquist frequencies ignored.
/// The input lines are only read (each is transformed from a working copy, as realfft
/// uses its input as scratch).
fn c2r_lines<T: Planners>(n: usize, m: usize) -> Result<Box<PairFn<'static, Complex<T>, T>>> {
    let h = m / 2 + 1;
    probe_plan::<T>(m)?;
    let zero = Complex::new(T::zero(), T::zero());
    if m >= 2 && m.is_multiple_of(2) {
        let plan = RealLines::get(m, true, T::complex());
        return Ok(Box::new(move |x, y| {
            let mut scratch = try_filled(plan.scratch_len(), zero, "FFT scratch")?;
            let mut work = try_filled(plan.work_len(), zero, "FFT lines")?;
            let mut half = if n < h {
                try_filled(h, zero, "FFT lines")?
            } else {
                Vec::new()
            };
            for (xl, yl) in x.chunks(n).zip(y.chunks_mut(m)) {
                // the spectrum cut to `h` entries, or zero-padded to them
                let line = if n >= h {
                    &xl[..h]
                } else {
                    half[..n].copy_from_slice(xl);
                    &half[..]
                };
                plan.inverse(line, yl, &mut work, &mut scratch);
            }
            Ok(())
        }));
    }
    let fft = T::real()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plan_fft_inverse(m.max(1));
    let scratch_len = fft.get_scratch_len();
    Ok(Box::new(move |x, y| {
        let mut scratch = try_filled(scratch_len, zero, "FFT scratch")?;
        let mut half = try_filled(h, zero, "FFT lines")?;
        let k = n.min(h);
        for (xl, yl) in x.chunks(n).zip(y.chunks_mut(m)) {
            half[..k].copy_from_slice(&xl[..k]);
            half[k..].fill(zero);
            half[0].im = T::zero();
            if m.is_multiple_of(2) {
                half[h - 1].im = T::zero();
            }
            fft.process_with_scratch(&mut half, yl, &mut scratch)
                .map_err(|e| Error::internal("fft", e.to_string()))?;
        }
        Ok(())
    }))
}

/// Complex-to-real transform along axis `last` of `data` (`shape`, `shape[last]` entries of
/// each half spectrum) to `m` real points per line ([`c2r_lines`]). `data` is not modified.
fn c2r_axis<T: Planners>(
    data: &[Complex<T>],
    shape: &[usize],
    last: usize,
    m: usize,
) -> Result<Vec<T>> {
    let f = c2r_lines::<T>(shape[last], m)?;
    map_lines(data, shape, last, m, &*f, T::real_output)
}

/// The complex transforms along `axes` of `data` in place or, with `src`, of `src` into
/// `data` (the first axis reads `src`, the others then work in place).
fn along_axes<T: Planners>(
    data: &mut [Complex<T>],
    src: Option<&[Complex<T>]>,
    shape: &[usize],
    axes: &[usize],
    inverse: bool,
) -> Result<()> {
    match (axes.is_empty(), src) {
        (true, Some(s)) if s.len() == data.len() => data.copy_from_slice(s),
        (true, Some(_)) => {
            return Err(Error::internal(
                "fft",
                "source and result of different sizes",
            ))
        }
        _ => {}
    }
    for (i, &a) in axes.iter().enumerate() {
        along_axis(
            T::complex(),
            data,
            src.filter(|_| i == 0),
            shape,
            a,
            inverse,
        )?;
    }
    Ok(())
}

/// Runs the unnormalized FFT `spec` of `input` (shape `in_shape`) to a buffer of
/// `out_shape`. The input is only read: the first pass over it writes the result buffer (a
/// recycled one when a buffer of its size is kept, so a loop's FFTs reuse their memory
/// instead of faulting fresh pages in), the others work in place.
pub(crate) fn run(
    spec: &FftSpec,
    input: &HostBuf,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<HostBuf> {
    let (&last, rest) = spec
        .axes
        .split_last()
        .ok_or_else(|| Error::internal("fft", "an FFT without axes"))?;
    fn typed<T: Planners>(
        spec: &FftSpec,
        input: &[Complex<T>],
        in_shape: &[usize],
        out_shape: &[usize],
        last: usize,
        rest: &[usize],
    ) -> Result<std::result::Result<Vec<Complex<T>>, Vec<T>>> {
        Ok(match spec.kind {
            FftKind::C2C => {
                let mut work = T::complex_output(input.len())?;
                along_axes(&mut work, Some(input), in_shape, &spec.axes, spec.inverse)?;
                Ok(work)
            }
            FftKind::C2R if rest.is_empty() => {
                Err(c2r_axis(input, in_shape, last, out_shape[last])?)
            }
            FftKind::C2R => {
                let mut work = T::complex_output(input.len())?;
                along_axes(&mut work, Some(input), in_shape, rest, true)?;
                let out = c2r_axis(&work, in_shape, last, out_shape[last])?;
                T::release_complex(work);
                Err(out)
            }
            FftKind::R2C => {
                return Err(Error::internal("fft", "R2C of complex data"));
            }
        })
    }
    fn real_typed<T: Planners>(
        input: &[T],
        in_shape: &[usize],
        out_shape: &[usize],
        last: usize,
        rest: &[usize],
    ) -> Result<Vec<Complex<T>>> {
        let mut out = r2c_axis(input, in_shape, last)?;
        along_axes(&mut out, None, out_shape, rest, false)?;
        Ok(out)
    }
    Ok(match (input, spec.kind) {
        (HostBuf::F32(v), FftKind::R2C) => {
            HostBuf::C64(real_typed(v, in_shape, out_shape, last, rest)?)
        }
        (HostBuf::F64(v), FftKind::R2C) => {
            HostBuf::C128(real_typed(v, in_shape, out_shape, last, rest)?)
        }
        (HostBuf::C64(v), _) => match typed(spec, v, in_shape, out_shape, last, rest)? {
            Ok(c) => HostBuf::C64(c),
            Err(r) => HostBuf::F32(r),
        },
        (HostBuf::C128(v), _) => match typed(spec, v, in_shape, out_shape, last, rest)? {
            Ok(c) => HostBuf::C128(c),
            Err(r) => HostBuf::F64(r),
        },
        (other, kind) => {
            return Err(Error::internal(
                "fft",
                format!("unsupported input dtype {} for {kind:?}", other.dtype()),
            ));
        }
    })
}

/// A transform's producer run inside its first pass (the line structure):
/// `fill(start, out)` computes the input's elements `start..start + out.len()` (C order)
/// into `out`.
pub(crate) type FillFn<'a> = dyn Fn(usize, SliceMut<'_>) -> Result<()> + Send + Sync + 'a;

/// Whether [`run_filled`] runs `spec` over an input of `ndim` axes: where its first pass
/// runs along the array's last axis, whose lines are contiguous (a C2C transform over the
/// last axis among others, which then goes first; an R2C transform halving the last axis;
/// a C2R transform along the last axis alone).
pub(crate) fn lines_cover(spec: &FftSpec, ndim: usize) -> bool {
    let Some(last) = ndim.checked_sub(1) else {
        return false;
    };
    match spec.kind {
        FftKind::C2C => spec.axes.contains(&last),
        FftKind::R2C => spec.axes.last() == Some(&last),
        FftKind::C2R => spec.axes.as_slice() == [last],
    }
}

/// Points of the lines one task of a filled first pass computes and transforms: the
/// producer's values are written into lines that stay in the L2 cache until they are
/// transformed.
const FILL_POINTS: usize = 1 << 14;

/// Lines per work item of a filled pass of `n`-point lines: [`FILL_POINTS`] points, at
/// least one line.
fn fill_lines(n: usize) -> usize {
    FILL_POINTS.div_ceil(n.max(1))
}

/// `f(x lines, y lines)` over groups of lines of `ys` (`ny` points each) whose input lines
/// (`nx` points each, of `A`) `fill` computes into a working buffer first, in parallel on
/// the CPU pool: the input is never stored whole.
fn filled_pairs<A: Copy + Default + Send + Sync, B: Send>(
    fill: &FillFn<'_>,
    slice: fn(&mut [A]) -> SliceMut<'_>,
    nx: usize,
    ys: &mut [B],
    ny: usize,
    f: &PairFn<'_, A, B>,
) -> Result<()> {
    if nx == 0 || ny == 0 || ys.is_empty() {
        return Ok(());
    }
    let per = fill_lines(nx.max(ny));
    let body = |y: &mut [B], l0: usize| -> Result<()> {
        let mut x = try_filled((y.len() / ny) * nx, A::default(), "FFT lines")?;
        fill(l0 * nx, slice(&mut x))?;
        f(&x, y)
    };
    filled_groups(ys, per, ny, &body)
}

/// `body(group, first line)` over consecutive groups of `per` lines of `line` elements of
/// `data` (the last group shorter), in parallel on the CPU pool where there is more than
/// one group and more than one thread, else in order on this thread: the groups of a
/// filled pass, each sized to stay in cache while it is computed and transformed.
fn filled_groups<E: Send>(
    data: &mut [E],
    per: usize,
    line: usize,
    body: &(dyn Fn(&mut [E], usize) -> Result<()> + Sync),
) -> Result<()> {
    let group = per * line;
    if group >= data.len() || super::threads() <= 1 {
        return data
            .chunks_mut(group)
            .enumerate()
            .try_for_each(|(k, g)| body(g, k * per));
    }
    par_chunks_mut(data, group, &|g, k| body(g, k * per))
}

/// The unnormalized FFT `spec` of the values `fill` computes (dtype `in_dtype`, shape
/// `in_shape`) as a buffer of `out_shape`, with the line structure ([`lines_cover`]): the
/// first pass computes a group of lines along the last axis through `fill` and transforms
/// them while they are in cache, so the transform's input is never stored; the other axes
/// then run as in [`run`].
pub(crate) fn run_filled(
    spec: &FftSpec,
    fill: &FillFn<'_>,
    in_dtype: DType,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<HostBuf> {
    let ndim = in_shape.len();
    if !lines_cover(spec, ndim) {
        return Err(Error::internal(
            "fft",
            "a filled transform its lines do not cover",
        ));
    }
    let last = ndim - 1;
    let rest: smallvec::SmallVec<[usize; 4]> =
        spec.axes.iter().copied().filter(|&a| a != last).collect();
    fn complex<T: Planners>(
        spec: &FftSpec,
        fill: &FillFn<'_>,
        shape: &[usize],
        rest: &[usize],
    ) -> Result<Vec<Complex<T>>> {
        let n = shape[shape.len() - 1];
        let len: usize = shape.iter().product();
        let mut work = T::complex_output(len)?;
        if len > 0 {
            let fft = plan_of(T::complex(), n, spec.inverse)?;
            let zero = Complex::new(T::zero(), T::zero());
            let scratch_len = fft.get_inplace_scratch_len();
            let body = |chunk: &mut [Complex<T>], first: usize| -> Result<()> {
                fill(first * n, T::complex_slice(chunk))?;
                let mut scratch = try_filled(scratch_len, zero, "FFT scratch")?;
                transform_lines(&*fft, chunk, n, None, &mut scratch);
                Ok(())
            };
            filled_groups(&mut work, fill_lines(n), n, &body)?;
        }
        along_axes(&mut work, None, shape, rest, spec.inverse)?;
        Ok(work)
    }
    fn r2c<T: Planners>(
        fill: &FillFn<'_>,
        in_shape: &[usize],
        out_shape: &[usize],
        rest: &[usize],
    ) -> Result<Vec<Complex<T>>> {
        let n = in_shape[in_shape.len() - 1];
        let mut out = T::complex_output(out_shape.iter().product())?;
        let f = r2c_lines::<T>(n)?;
        filled_pairs(fill, T::real_slice, n, &mut out, n / 2 + 1, &*f)?;
        along_axes(&mut out, None, out_shape, rest, false)?;
        Ok(out)
    }
    fn c2r<T: Planners>(
        fill: &FillFn<'_>,
        in_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<Vec<T>> {
        let (n, m) = (in_shape[in_shape.len() - 1], out_shape[out_shape.len() - 1]);
        let mut out = T::real_output(out_shape.iter().product())?;
        let f = c2r_lines::<T>(n, m)?;
        filled_pairs(fill, T::complex_slice, n, &mut out, m, &*f)?;
        Ok(out)
    }
    Ok(match (in_dtype, spec.kind) {
        (DType::C64, FftKind::C2C) => HostBuf::C64(complex::<f32>(spec, fill, in_shape, &rest)?),
        (DType::C128, FftKind::C2C) => HostBuf::C128(complex::<f64>(spec, fill, in_shape, &rest)?),
        (DType::F32, FftKind::R2C) => HostBuf::C64(r2c::<f32>(fill, in_shape, out_shape, &rest)?),
        (DType::F64, FftKind::R2C) => HostBuf::C128(r2c::<f64>(fill, in_shape, out_shape, &rest)?),
        (DType::C64, FftKind::C2R) => HostBuf::F32(c2r::<f32>(fill, in_shape, out_shape)?),
        (DType::C128, FftKind::C2R) => HostBuf::F64(c2r::<f64>(fill, in_shape, out_shape)?),
        (d, kind) => {
            return Err(Error::internal(
                "fft",
                format!("unsupported input dtype {d} for {kind:?}"),
            ))
        }
    })
}
