//! The generated FFT passes against a compensated f64 DFT and against cuFFT: with
//! `lf::set_fft_backend(Generated)` forced, C2C `fft`/`ifft`/`fft2`/`fftn` along first,
//! last and middle axes at the generator's test lengths (up to 2^14, two passes beyond
//! shared memory) and odd batch sizes, in both precisions; the error of the generated
//! result may be at most twice the library's (cuFFT on CUDA). On the CPU the same bodies
//! check the normal path (rustfft) and the host executor of the generated passes
//! (`lazyfuse_codegen::fft::host`) on the same inputs. Uncovered lengths fall back to cuFFT.
//! Real transforms (`rfftn`, `irfftn`) likewise, with their choice by measurement.

#[macro_use]
mod common;

use lazyfuse as lf;
use lazyfuse_codegen::fft as gen;
use lf::{Array, DType, Device, FftBackend};
use num_complex::{Complex, Complex32, Complex64};
use rayon::prelude::*;
use std::sync::Mutex;

/// Serializes the tests of this binary: the backend is a process-wide setting.
static BACKEND: Mutex<()> = Mutex::new(());

/// Runs `f` with `backend` set (and the previous setting back afterwards).
fn with_backend<R>(backend: FftBackend, f: impl FnOnce() -> R) -> R {
    let before = lf::set_fft_backend(backend);
    let r = f();
    lf::set_fft_backend(before);
    r
}

/// Deterministic complex inputs in [-1, 1) whose parts are f32 values (exact in f64).
fn values(len: usize, seed: u64) -> Vec<Complex64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 23) as f32 - 1.0) as f64
    };
    (0..len).map(|_| Complex64::new(next(), next())).collect()
}

/// The unnormalized DFT along `axis` of a C-order array of `shape`, each output summed in
/// f64 with TwoSum compensation (its error stays near one rounding at every length, far
/// below any FFT's in f32 and below the f64 FFTs' own).
fn dft_axis(x: &[Complex64], shape: &[usize], axis: usize, inverse: bool) -> Vec<Complex64> {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let tw = gen::twiddles(n);
    (0..x.len())
        .into_par_iter()
        .map(|idx| {
            let (o, k, i) = (idx / (n * inner), (idx / inner) % n, idx % inner);
            let (mut re, mut rc, mut im, mut ic) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for j in 0..n {
                let (c, s) = tw[(j * k) % n];
                let s = if inverse { -s } else { s };
                let v = x[(o * n + j) * inner + i];
                let t = v.re * c - v.im * s;
                let sum = re + t;
                let bb = sum - re;
                rc += (re - (sum - bb)) + (t - bb);
                re = sum;
                let t = v.re * s + v.im * c;
                let sum = im + t;
                let bb = sum - im;
                ic += (im - (sum - bb)) + (t - bb);
                im = sum;
            }
            Complex64::new(re + rc, im + ic)
        })
        .collect()
}

/// NumPy's `fftn`/`ifftn` over `axes` (the inverse scaled by `1 / prod(n)`).
fn reference(x: &[Complex64], shape: &[usize], axes: &[usize], inverse: bool) -> Vec<Complex64> {
    let mut v = x.to_vec();
    for &a in axes {
        v = dft_axis(&v, shape, a, inverse);
    }
    if inverse {
        let scale = 1.0 / axes.iter().map(|&a| shape[a]).product::<usize>() as f64;
        v.iter_mut().for_each(|z| *z *= scale);
    }
    v
}

/// Relative L2 error.
fn rel_err<T: Copy + Into<f64>>(got: &[Complex<T>], want: &[Complex64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        let (gr, gi): (f64, f64) = (g.re.into(), g.im.into());
        num += (gr - w.re).powi(2) + (gi - w.im).powi(2);
        den += w.re * w.re + w.im * w.im;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// The transform under test.
#[derive(Clone, Copy, Debug)]
enum Op {
    Fft(usize),
    Ifft(usize),
    Fft2,
    Ifft2,
    Fftn(&'static [usize]),
}

impl Op {
    fn axes(self, rank: usize) -> Vec<usize> {
        match self {
            Op::Fft(a) | Op::Ifft(a) => vec![a],
            Op::Fft2 | Op::Ifft2 => vec![rank - 2, rank - 1],
            Op::Fftn(a) => a.to_vec(),
        }
    }

    fn inverse(self) -> bool {
        matches!(self, Op::Ifft(_) | Op::Ifft2)
    }

    fn apply(self, a: &Array) -> Array {
        match self {
            Op::Fft(ax) => lf::fft::fft(a, ax as isize),
            Op::Ifft(ax) => lf::fft::ifft(a, ax as isize),
            Op::Fft2 => lf::fft::fft2(a),
            Op::Ifft2 => lf::fft::ifft2(a),
            Op::Fftn(axes) => {
                let axes: Vec<isize> = axes.iter().map(|&x| x as isize).collect();
                lf::fft::fftn(a, &axes)
            }
        }
    }
}

/// The result of `op` on `x` (of `shape` and `dtype`) on `dev` with `backend`, as f64
/// pairs. Each call builds a new input array, so no evaluated node is shared between
/// backends.
fn run(
    dev: &Device,
    backend: FftBackend,
    op: Op,
    x: &[Complex64],
    shape: &[usize],
    dtype: DType,
) -> Vec<Complex64> {
    with_backend(backend, || match dtype {
        DType::C64 => {
            let h: Vec<Complex32> = x
                .iter()
                .map(|z| Complex32::new(z.re as f32, z.im as f32))
                .collect();
            let a = Array::from_vec_on(h, shape, dev).unwrap();
            let r: Vec<Complex32> = op.apply(&a).to_vec().unwrap();
            r.iter()
                .map(|z| Complex64::new(z.re as f64, z.im as f64))
                .collect()
        }
        _ => {
            let a = Array::from_vec_on(x.to_vec(), shape, dev).unwrap();
            op.apply(&a).to_vec::<Complex64>().unwrap()
        }
    })
}

/// Unit roundoff of `dtype`'s real type: the floor of the error bound (at lengths 1 and 2
/// either side may be exact or one rounding away).
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::C64 => f32::EPSILON as f64 / 2.0,
        _ => f64::EPSILON / 2.0,
    }
}

/// The host executor's result of `op` (one axis) on `x`, normalized as NumPy.
fn host_executor(op: Op, x: &[Complex64], shape: &[usize], dtype: DType) -> Vec<Complex64> {
    let axes = op.axes(shape.len());
    let prog = gen::plan_c2c(shape, &axes, dtype, op.inverse()).expect("covered");
    let scale = if op.inverse() {
        1.0 / axes.iter().map(|&a| shape[a]).product::<usize>() as f64
    } else {
        1.0
    };
    match dtype {
        DType::C64 => {
            let h: Vec<Complex32> = x
                .iter()
                .map(|z| Complex32::new(z.re as f32, z.im as f32))
                .collect();
            gen::host::run_program(&prog, &h)
                .iter()
                .map(|z| Complex64::new(z.re as f64, z.im as f64) * (scale as f32 as f64))
                .collect()
        }
        _ => gen::host::run_program(&prog, x)
            .iter()
            .map(|z| z * scale)
            .collect(),
    }
}

/// Checks `op` on arrays of `shape` in both precisions: the generated passes' error (on
/// CUDA; the host executor's on the CPU) against the compensated reference is at most
/// twice the library's (cuFFT on CUDA, rustfft on the CPU: the issue's "no worse than 2x
/// cuFFT's"), or one unit roundoff, whichever is larger.
fn check(dev: &Device, op: Op, shape: &[usize]) {
    let _serial = BACKEND.lock().unwrap_or_else(|e| e.into_inner());
    let x = values(shape.iter().product(), shape.iter().sum::<usize>() as u64);
    let axes = op.axes(shape.len());
    let want = reference(&x, shape, &axes, op.inverse());
    for dtype in [DType::C64, DType::C128] {
        // the generated passes first: a plain run (a repeated plan may be recorded as a
        // CUDA graph, and a recording never uploads a new twiddle table)
        let generated = run(dev, FftBackend::Generated, op, &x, shape, dtype);
        let library = run(dev, FftBackend::Cufft, op, &x, shape, dtype);
        let lib_err = rel_err(&library, &want);
        let bound = 2.0 * lib_err.max(eps(dtype));
        let gen_err = if dev.is_cuda() {
            rel_err(&generated, &want)
        } else {
            // the CPU path does not change with the backend
            assert_eq!(generated, library);
            let covered = gen::plan_c2c(shape, &axes, dtype, false).is_some();
            match op {
                Op::Fft(_) | Op::Ifft(_) if covered => {
                    rel_err(&host_executor(op, &x, shape, dtype), &want)
                }
                _ => lib_err,
            }
        };
        println!("{dev} {op:?} {shape:?} {dtype}: generated {gen_err:.2e}, library {lib_err:.2e}");
        assert!(
            gen_err <= bound,
            "{dev} {op:?} {shape:?} {dtype}: generated error {gen_err:.3e}, library {lib_err:.3e}"
        );
    }
}

/// The generator's test lengths (2^14 is two passes through a work buffer).
const LENGTHS: [usize; 12] = [1, 2, 3, 5, 7, 8, 12, 60, 128, 1000, 4096, 1 << 14];

device_test!(last_axis);
fn last_axis(dev: &Device) {
    for n in LENGTHS {
        let lines = if n >= 4096 { 1 } else { 3 };
        check(dev, Op::Fft(1), &[lines, n]);
        check(dev, Op::Ifft(1), &[lines, n]);
    }
}

device_test!(first_axis);
fn first_axis(dev: &Device) {
    for n in LENGTHS {
        let lines = if n >= 4096 { 1 } else { 5 };
        check(dev, Op::Fft(0), &[n, lines]);
        check(dev, Op::Ifft(0), &[n, lines]);
    }
    // strided lines of a two-pass length (complex128 4096 is 64 x 64)
    check(dev, Op::Fft(0), &[4096, 3]);
}

device_test!(middle_axis);
fn middle_axis(dev: &Device) {
    for n in [2, 3, 7, 8, 60, 128, 1000] {
        check(dev, Op::Fft(1), &[3, n, 5]);
        check(dev, Op::Ifft(1), &[3, n, 5]);
    }
}

device_test!(two_and_more_axes);
fn two_and_more_axes(dev: &Device) {
    check(dev, Op::Fft2, &[3, 60, 128]);
    check(dev, Op::Ifft2, &[3, 60, 128]);
    check(dev, Op::Fft2, &[1000, 8]);
    check(dev, Op::Ifft2, &[5, 7, 12]);
    check(dev, Op::Fftn(&[0, 2]), &[12, 5, 8]);
}

device_test!(uncovered_lengths_fall_back);
fn uncovered_lengths_fall_back(dev: &Device) {
    // 11 and 22 are not covered (prime factor 11): the library runs them, no error
    check(dev, Op::Fft(1), &[3, 11]);
    check(dev, Op::Fft2, &[22, 12]);
    assert!(!gen::covers(11, DType::C64));
}

/// Kernel lookups so far (compiled, or found in the memory or disk cache): generated
/// passes look their kernels up, cuFFT does not.
fn lookups() -> u64 {
    let s = lf::stats();
    s.kernels_compiled + s.kernel_cache_hits + s.disk_cache_hits
}

/// NumPy's `rfftn` over `axes` (the last of them the array's last axis) of the real parts
/// of `x`, by the compensated DFTs: the full transform's half spectrum.
fn rfft_reference(x: &[Complex64], shape: &[usize], axes: &[usize]) -> Vec<Complex64> {
    let real: Vec<Complex64> = x.iter().map(|z| Complex64::new(z.re, 0.0)).collect();
    let n = *shape.last().unwrap();
    reference(&real, shape, axes, false)
        .chunks(n)
        .flat_map(|l| l[..n / 2 + 1].to_vec())
        .collect()
}

/// NumPy's `irfftn` over `axes` into a real array of `shape` from the half spectrum `x`:
/// inverse DFTs along the other axes, then each line along the last extended by
/// conjugates and transformed back; the real parts, scaled by `1 / prod(n)`.
fn irfft_reference(x: &[Complex64], shape: &[usize], axes: &[usize]) -> Vec<Complex64> {
    let n = *shape.last().unwrap();
    let mut half = shape.to_vec();
    *half.last_mut().unwrap() = n / 2 + 1;
    let mut y = x.to_vec();
    for &a in &axes[..axes.len() - 1] {
        y = dft_axis(&y, &half, a, true);
    }
    let full: Vec<Complex64> = y
        .chunks(n / 2 + 1)
        .flat_map(|l| (0..n).map(move |p| if p <= n / 2 { l[p] } else { l[n - p].conj() }))
        .collect();
    let scale = 1.0 / axes.iter().map(|&a| shape[a]).product::<usize>() as f64;
    dft_axis(&full, shape, shape.len() - 1, true)
        .iter()
        .map(|z| Complex64::new(z.re * scale, 0.0))
        .collect()
}

/// `rfftn` (`inverse` false: real `x` of `shape`) or `irfftn` (the half spectrum `x` into a
/// real array of `shape`) over `axes` on `dev` with `backend` in `dtype`'s precision, as
/// f64 pairs, and the kernel lookups it took.
fn run_real(
    dev: &Device,
    backend: FftBackend,
    inverse: bool,
    x: &[Complex64],
    shape: &[usize],
    axes: &[usize],
    dtype: DType,
) -> (Vec<Complex64>, u64) {
    let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    let n = *shape.last().unwrap();
    let mut half = shape.to_vec();
    *half.last_mut().unwrap() = n / 2 + 1;
    with_backend(backend, || {
        let a = match (inverse, dtype) {
            (false, DType::C64) => {
                Array::from_vec_on(x.iter().map(|z| z.re as f32).collect(), shape, dev)
            }
            (false, _) => Array::from_vec_on(x.iter().map(|z| z.re).collect(), shape, dev),
            (true, DType::C64) => Array::from_vec_on(
                x.iter()
                    .map(|z| Complex32::new(z.re as f32, z.im as f32))
                    .collect(),
                &half,
                dev,
            ),
            (true, _) => Array::from_vec_on(x.to_vec(), &half, dev),
        }
        .unwrap();
        let before = lookups();
        let y = match inverse {
            false => lf::fft::rfftn(&a, &ax),
            true => lf::fft::irfftn(&a, Some(n), &ax),
        };
        y.eval().unwrap();
        let looked = lookups() - before;
        let v: Vec<Complex64> = match inverse {
            false => y.to_vec_as::<Complex64>().unwrap(),
            true => y
                .to_vec_as::<f64>()
                .unwrap()
                .into_iter()
                .map(|r| Complex64::new(r, 0.0))
                .collect(),
        };
        (v, looked)
    })
}

device_test!(real_transforms);
fn real_transforms(dev: &Device) {
    let _serial = BACKEND.lock().unwrap_or_else(|e| e.into_inner());
    // (shape, axes): 1-D of odd, even and length 1 or 2; batched; 2-D and 3-D, the halved
    // axis of 4096 (one pass in single precision, cuFFT in double)
    let cases: &[(&[usize], &[usize])] = &[
        (&[1], &[0]),
        (&[2], &[0]),
        (&[7], &[0]),
        (&[783], &[0]),
        (&[3, 128], &[1]),
        (&[12, 60], &[0, 1]),
        (&[5, 6, 10], &[0, 1, 2]),
        (&[2, 4096], &[0, 1]),
    ];
    for &(shape, axes) in cases {
        let len: usize = shape.iter().product();
        let n = *shape.last().unwrap();
        let half_len = len / n * (n / 2 + 1);
        let x = values(len, len as u64 + 5);
        let spec = values(half_len, len as u64 + 7);
        for inverse in [false, true] {
            let want = match inverse {
                false => rfft_reference(&x, shape, axes),
                true => irfft_reference(&spec, shape, axes),
            };
            let input = if inverse { &spec } else { &x };
            for dtype in [DType::C64, DType::C128] {
                let what = format!("{dev} {shape:?} {axes:?} inverse {inverse} {dtype}");
                let (generated, g_looks) = run_real(
                    dev,
                    FftBackend::Generated,
                    inverse,
                    input,
                    shape,
                    axes,
                    dtype,
                );
                let (library, l_looks) =
                    run_real(dev, FftBackend::Cufft, inverse, input, shape, axes, dtype);
                assert_eq!(
                    (generated.len(), library.len()),
                    (want.len(), want.len()),
                    "{what}"
                );
                let lib_err = rel_err(&library, &want);
                let gen_err = rel_err(&generated, &want);
                let bound = 2.0 * lib_err.max(eps(dtype));
                println!("{what}: generated {gen_err:.2e}, library {lib_err:.2e}");
                // the library itself near the reference (rustfft on the CPU, cuFFT on CUDA)
                let tol = if dtype == DType::C64 { 1e-5 } else { 1e-12 };
                assert!(lib_err < tol, "{what}: library {lib_err:.3e}");
                assert!(
                    gen_err <= bound,
                    "{what}: generated {gen_err:.3e}, library {lib_err:.3e}"
                );
                let prog = match inverse {
                    false => gen::plan_r2c(shape, axes, dtype),
                    true => gen::plan_c2r(shape, axes, dtype),
                };
                match (dev.is_cuda(), prog) {
                    (true, Some(p)) => {
                        // the forward transform alone: the passes look up one kernel
                        // each, cuFFT none (but for a halved axis of length 1, which it
                        // runs as a helper kernel; the inverse's scaling is a kernel
                        // either way)
                        if !inverse {
                            assert_eq!(g_looks, p.steps.len() as u64, "{what}");
                            assert_eq!(l_looks, u64::from(n == 1), "{what}");
                        }
                        // the default measures both (the passes ran: a time) and keeps
                        // the faster; its result is right either way
                        let (auto, _) =
                            run_real(dev, FftBackend::Auto, inverse, input, shape, axes, dtype);
                        assert!(rel_err(&auto, &want) <= bound, "{what}: auto");
                        let key = format!(
                            " {dtype} {shape:?} axes {axes:?} {} {}",
                            if inverse { "inverse" } else { "forward" },
                            if inverse { "c2r" } else { "r2c" }
                        );
                        let choices = lf::debug::fft_choices(dev);
                        let c = choices.iter().find(|c| c.key.ends_with(&key));
                        let c =
                            c.unwrap_or_else(|| panic!("{what}: no choice {key} in {choices:?}"));
                        assert!(c.generated_time < std::time::Duration::MAX, "{what}: {c:?}");
                    }
                    (true, None) => assert_eq!(g_looks, l_looks, "{what}: cuFFT both times"),
                    // the CPU path does not change with the backend
                    (false, _) => assert_eq!(generated, library, "{what}"),
                }
            }
        }
    }
}
