//! The CPU's line structure (`lf::set_cpu_fft_lines_min_elements`): a transform's
//! producer kernel computed inside its first pass, along the last axis, group of lines by
//! group of lines, checked against the separate passes over the stored input, with the
//! plan's structure. On CUDA the same graphs run with the generated passes forced
//! (`FftBackend::Generated`) against cuFFT. Its own binary: the settings are process-wide.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device, FftBackend};
use std::sync::Mutex;

/// Serializes the tests of this binary: the settings are process-wide.
static SETTINGS: Mutex<()> = Mutex::new(());

/// Runs `f` with the line structure for every eligible CPU transform (threshold 0) and the
/// generated passes forced on CUDA (`lines` true), or with neither (threshold off, cuFFT),
/// the previous settings back afterwards, even on panic.
fn with_lines<R>(lines: bool, f: impl FnOnce() -> R) -> R {
    let (min, backend) = match lines {
        true => (0, FftBackend::Generated),
        false => (usize::MAX, FftBackend::Cufft),
    };
    let min_before = lf::set_cpu_fft_lines_min_elements(min);
    let backend_before = lf::set_fft_backend(backend);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    lf::set_fft_backend(backend_before);
    lf::set_cpu_fft_lines_min_elements(min_before);
    r.unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// One case of the line structure: a transform of an elementwise product of `z` (complex
/// of `dtype`'s precision, shape `shape`) and whether the CPU's first pass runs along the
/// last axis (so that the product's kernel runs inside it).
fn line_case(what: &str, z: &Array) -> (Array, bool) {
    let p = z * z + 1.0;
    match what {
        "fft last" => (lf::fft::fft(&p, -1), true),
        "fft2" => (lf::fft::fft2(&p), true),
        "fft first" => (lf::fft::fft(&p, 0), false),
        "rfft2" => (lf::fft::rfft2(&p.real()), true),
        "rfft last" => (lf::fft::rfft(&p.real(), -1), true),
        "irfft even" => (lf::fft::irfft(&p, None, -1), true),
        "irfft odd" => (lf::fft::irfft(&p, Some(2 * z.shape()[1] - 3), -1), true),
        "irfft2" => (lf::fft::irfft2(&p), false),
        _ => unreachable!("{what}"),
    }
}

device_test!(line_structure_matches_the_passes);
/// The CPU's line structure (a transform's producer computed inside its first pass, along
/// the last axis, group of lines by group of lines) against the library's passes over the
/// stored input (rustfft's whole-array passes; cuFFT on CUDA): C2C along
/// the last axis and over two axes, R2C (even and odd lengths, a length of 1), C2R along
/// the last axis (even and odd output lengths), over more than one group of lines (783 x
/// 40 points) and lines longer than a group (a line of 20000 points), empty arrays, in
/// single and double precision. Transforms whose first pass runs across lines (along the
/// first axis; C2R over two axes) keep the producer as a kernel. On CUDA the same graphs
/// run with the generated passes and are checked the same way.
fn line_structure_matches_the_passes(dev: &Device) {
    let _serial = SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    {
        let cases = [
            ("fft last", vec![3, 783]),
            ("fft last", vec![2, 20000]),
            ("fft last", vec![0, 8]),
            ("fft2", vec![40, 783]),
            ("fft first", vec![40, 783]),
            ("rfft2", vec![33, 70]),
            ("rfft last", vec![5, 783]),
            ("rfft last", vec![4, 1]),
            ("irfft even", vec![7, 65]),
            ("irfft odd", vec![40, 600]),
            ("irfft2", vec![12, 9]),
        ];
        // the values in f64, real parts then imaginary parts (read after the structure)
        let as_f64 = |a: &Array| -> Vec<f64> {
            match a.dtype() {
                DType::C64 | DType::C128 => {
                    let r = a.real().astype(DType::F64).to_vec::<f64>().unwrap();
                    let i = a.imag().astype(DType::F64).to_vec::<f64>().unwrap();
                    r.into_iter().chain(i).collect()
                }
                _ => a.astype(DType::F64).to_vec::<f64>().unwrap(),
            }
        };
        for dtype in [DType::F32, DType::F64] {
            for (k, (what, shape)) in cases.iter().enumerate() {
                // the input uploaded twice: the reference's graph has leaves of its own (a
                // graph built alike from the same leaves would be the same nodes)
                let seed = 10 * k as u64;
                let host: Vec<Vec<f64>> = (0..2)
                    .map(|j| {
                        lf::random::normal_on(shape, DType::F64, seed + j, dev)
                            .to_vec::<f64>()
                            .unwrap()
                    })
                    .collect();
                let upload = || {
                    let part = |j: usize| {
                        Array::from_vec_on(host[j].clone(), shape, dev)
                            .unwrap()
                            .astype(dtype)
                    };
                    let z = lf::complex(&part(0), &part(1));
                    z.eval().unwrap();
                    z
                };
                let z = upload();
                let (covered, plan, kernels, y_shape, y_dtype, got) = with_lines(true, || {
                    let (y, covered) = line_case(what, &z);
                    let plan = lf::debug::plan(&[&y]).unwrap();
                    let kernels = lf::debug::kernel_count(&[&y]).unwrap();
                    let (shape, dtype) = (y.shape().to_vec(), y.dtype());
                    (covered, plan, kernels, shape, dtype, as_f64(&y))
                });
                // `y` is gone: a graph built alike while it lived would be `y` itself
                // the library passes over a stored input (rustfft, cuFFT)
                let (want, want_plan) = with_lines(false, || {
                    let (want, _) = line_case(what, &upload());
                    let plan = lf::debug::plan(&[&want]).unwrap();
                    want.eval().unwrap(); // planned with these settings
                    (want, plan)
                });
                assert!(!want_plan.contains("fused"), "plan:\n{want_plan}");
                assert_eq!(
                    (&y_shape[..], y_dtype),
                    (want.shape(), want.dtype()),
                    "{what} {shape:?} {dtype}"
                );
                if !dev.is_cuda() {
                    let fused = covered;
                    assert_eq!(
                        plan.contains("fused prologue"),
                        fused,
                        "{what} {shape:?} {dtype}: plan:\n{plan}"
                    );
                    assert_eq!(
                        kernels,
                        usize::from(!fused),
                        "{what} {shape:?} {dtype}: plan:\n{plan}"
                    );
                }
                let want = as_f64(&want);
                assert_eq!(got.len(), want.len());
                let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
                let worst = got
                    .iter()
                    .zip(&want)
                    .fold(0.0f64, |a, (g, w)| a.max((g - w).abs()));
                assert!(
                    worst <= tol * scale,
                    "{what} {shape:?} {dtype}: {worst:.2e} from the unfused plan (scale {scale:.2e})"
                );
            }
        }
    }
}
