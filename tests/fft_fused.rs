//! Transforms with fused elementwise work: with the generated FFT passes selected
//! (`lf::set_fft_backend(Generated)`), the kernel computing a C2C transform's input runs
//! inside the transform's first pass on CUDA, and a consumer reading the transform through
//! rolls only (`fftshift`) inside its last pass: the PSF pipeline plans as one transform
//! and no kernel. It is checked at n = 8, 12 and 64 against the unfused plan and against a
//! naive f64 DFT; lengths the generator does not cover, inputs and outputs read elsewhere
//! and the CPU keep today's plan (kernel + FFT + kernel).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device, FftBackend};
use num_complex::Complex64;
use std::f64::consts::PI;
use std::sync::Mutex;

/// Serializes the tests of this binary: the backend is a process-wide setting.
static BACKEND: Mutex<()> = Mutex::new(());

/// Runs `f` with the generated passes selected (the previous setting back afterwards,
/// even on panic).
fn generated<R>(f: impl FnOnce() -> R) -> R {
    let _g = BACKEND.lock().unwrap_or_else(|e| e.into_inner());
    let before = lf::set_fft_backend(FftBackend::Generated);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    lf::set_fft_backend(before);
    r.unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// The padded, ifftshifted pupil of `examples/common` (`psf` before its FFT).
fn psf_input(n: usize) -> Array {
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
    lf::fft::ifftshift(&padded, None)
}

/// The PSF pipeline of `examples/common` (2p + n square image, `p = n / 2`).
fn psf(n: usize) -> Array {
    let field = lf::fft::fftshift(&lf::fft::fft2(&psf_input(n)), None);
    field.abs().square()
}

/// The PSF computed on the host in f64: the pupil, zero padded, ifftshifted, a naive 2-D
/// DFT (rows, then columns), fftshifted, squared magnitudes.
fn psf_reference(n: usize) -> Vec<f64> {
    let p = n / 2;
    let m = n + 2 * p;
    let x = |i: usize| -1.0 + 2.0 * i as f64 / (n - 1) as f64;
    let mut padded = vec![Complex64::new(0.0, 0.0); m * m];
    for i in 0..n {
        for j in 0..n {
            let (xx, yy) = (x(j), x(i)); // meshgrid "xy": xx varies along columns
            let rho = (xx * xx + yy * yy).sqrt();
            if rho > 1.0 {
                continue;
            }
            let phase = rho * rho * yy.atan2(xx).cos();
            padded[(i + p) * m + (j + p)] = Complex64::from_polar(1.0, 2.0 * PI * phase);
        }
    }
    // ifftshift: y[i] = x[(i + floor(m / 2)) % m] on both axes
    let h = m / 2;
    let mut y = vec![Complex64::new(0.0, 0.0); m * m];
    for i in 0..m {
        for j in 0..m {
            y[i * m + j] = padded[((i + h) % m) * m + (j + h) % m];
        }
    }
    let dft = |v: &[Complex64], stride: usize, step: usize| -> Vec<Complex64> {
        // along one axis: lines start at `l * step`, elements `stride` apart
        let mut out = vec![Complex64::new(0.0, 0.0); m * m];
        for l in 0..m {
            for k in 0..m {
                let mut s = Complex64::new(0.0, 0.0);
                for j in 0..m {
                    let w = Complex64::from_polar(1.0, -2.0 * PI * ((j * k) % m) as f64 / m as f64);
                    s += v[l * step + j * stride] * w;
                }
                out[l * step + k * stride] = s;
            }
        }
        out
    };
    let f = dft(&dft(&y, 1, m), m, 1);
    // fftshift: out[k] = f[(k + m - floor(m / 2)) % m]
    let mut out = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..m {
            out[i * m + j] = f[((i + m - h) % m) * m + (j + m - h) % m].norm_sqr();
        }
    }
    out
}

/// Largest difference between `got` and `want`, relative to `want`'s peak.
fn rel_to_peak(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let peak = want.iter().copied().fold(0.0, f64::max);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs())
        .fold(0.0, f64::max)
        / peak
}

/// The PSF at `n` with the generated passes selected: its plan's kernel and library
/// counts, its plan as text and its values; the unfused plan's values.
fn psf_both(n: usize) -> (usize, usize, String, Vec<f32>, Vec<f32>) {
    generated(|| {
        let img = psf(n);
        let kernels = lf::debug::kernel_count(&[&img]).unwrap();
        let libs = lf::debug::library_count(&[&img]).unwrap();
        let plan = lf::debug::plan(&[&img]).unwrap();
        let fused: Vec<f32> = img.to_vec().unwrap();
        let plain: Vec<f32> = lf::with_fusion(false, || psf(n).to_vec().unwrap());
        (kernels, libs, plan, fused, plain)
    })
}

fn check_psf(dev: &Device, n: usize) {
    let (kernels, libs, plan, fused, plain) = psf_both(n);
    assert_eq!(libs, 1, "plan:\n{plan}");
    if matches!(dev, Device::Cuda(_)) {
        // the kernel computing the transform's input runs inside its first pass, the
        // shifted squared magnitude inside its last
        assert_eq!(kernels, 0, "plan:\n{plan}");
        assert!(plan.contains("fused prologue"), "plan:\n{plan}");
        assert!(plan.contains("fused epilogue"), "plan:\n{plan}");
    } else {
        assert_eq!(kernels, 2, "plan:\n{plan}");
        assert!(!plan.contains("fused prologue"), "plan:\n{plan}");
    }
    let want = psf_reference(n);
    let e_plain = rel_to_peak(&plain, &want);
    let e_fused = rel_to_peak(&fused, &want);
    assert!(
        e_plain < 1e-4,
        "{dev} n={n}: unfused plan off by {e_plain:.2e}"
    );
    assert!(
        e_fused < 1e-4,
        "{dev} n={n}: fused plan off by {e_fused:.2e}"
    );
    let peak = want.iter().copied().fold(0.0, f64::max);
    let apart = fused
        .iter()
        .zip(&plain)
        .map(|(&a, &b)| (a as f64 - b as f64).abs())
        .fold(0.0, f64::max)
        / peak;
    assert!(
        apart < 2e-5,
        "{dev} n={n}: fused and unfused {apart:.2e} apart"
    );
}

device_test!(psf_8_prologue_fused);
fn psf_8_prologue_fused(dev: &Device) {
    check_psf(dev, 8);
}

device_test!(psf_12_prologue_fused);
fn psf_12_prologue_fused(dev: &Device) {
    check_psf(dev, 12);
}

device_test!(psf_64_prologue_fused);
fn psf_64_prologue_fused(dev: &Device) {
    check_psf(dev, 64);
}

device_test!(psf_repeated_eval_reuses_the_plan);
fn psf_repeated_eval_reuses_the_plan(_: &Device) {
    generated(|| {
        let first: Vec<f32> = psf(16).to_vec().unwrap();
        for _ in 0..3 {
            let again: Vec<f32> = psf(16).to_vec().unwrap();
            assert_eq!(again, first);
        }
    });
}

device_test!(uncovered_length_keeps_the_plan);
fn uncovered_length_keeps_the_plan(_: &Device) {
    // 22 + 2 * 11 = 44 = 4 * 11: the generator does not cover it, cuFFT runs it
    let (kernels, libs, plan, fused, plain) = psf_both(22);
    assert_eq!((kernels, libs), (2, 1), "plan:\n{plan}");
    assert!(!plan.contains("fused prologue"), "plan:\n{plan}");
    let want = psf_reference(22);
    assert!(rel_to_peak(&fused, &want) < 1e-4);
    assert!(rel_to_peak(&plain, &want) < 1e-4);
}

device_test!(input_read_elsewhere_is_stored);
fn input_read_elsewhere_is_stored(_: &Device) {
    generated(|| {
        // the transform's input is a result too: its kernel stays and stores it
        let x = psf_input(8);
        let f = lf::fft::fft2(&x);
        assert_eq!(lf::debug::kernel_count(&[&x, &f]).unwrap(), 1);
        assert_eq!(lf::debug::library_count(&[&f]).unwrap(), 1);
        let plan = lf::debug::plan(&[&x, &f]).unwrap();
        assert!(!plan.contains("fused prologue"), "plan:\n{plan}");
    });
}

device_test!(cufft_backend_keeps_the_plan);
fn cufft_backend_keeps_the_plan(_: &Device) {
    let _g = BACKEND.lock().unwrap_or_else(|e| e.into_inner());
    let before = lf::set_fft_backend(FftBackend::Cufft);
    let img = psf(8);
    let kernels = lf::debug::kernel_count(&[&img]);
    lf::set_fft_backend(before);
    assert_eq!(kernels.unwrap(), 2);
}

fn graphs_on() -> bool {
    std::env::var("LAZYFUSE_GRAPHS").map_or(true, |v| v.trim() != "0")
}

device_test!(traced_function_runs_the_fused_transform);
/// Call after call with new inputs, and on CUDA from the second call as one recorded
/// graph whose kernel nodes (the passes) are pointed at each call's buffers.
fn traced_function_runs_the_fused_transform(dev: &Device) {
    generated(|| {
        // a pupil phase as the input: its exponential, padding and shift feed the
        // transform's first pass on CUDA, call after call
        let n = 12;
        let phase = Array::linspace(0.0, 1.0, n * n, DType::F32).reshape(&[n as isize, n as isize]);
        let f = lf::Function::trace(&[&phase], |x| {
            let wave = (&x[0] * (2.0 * PI) * lf::c64::i()).exp();
            let padded = wave.pad(&[(n / 2, n / 2), (n / 2, n / 2)], 0.0);
            let field = lf::fft::fft2(&lf::fft::ifftshift(&padded, None));
            vec![lf::fft::fftshift(&field, None).abs().square()]
        })
        .unwrap();
        let calls = 5;
        // the inputs first: their own evaluations replay graphs too
        let inputs: Vec<Array> = (0..calls)
            .map(|k| {
                let p = &phase * (1.0 + k as f64);
                p.eval().unwrap();
                p
            })
            .collect();
        let mut outs = Vec::new();
        for (k, p) in inputs.into_iter().enumerate() {
            if k == 2 {
                // recorded by now (on CUDA: a plain first call, a recording second call)
                dev.synchronize().unwrap();
                lf::reset_stats();
            }
            outs.push((f.call(&[&p]).unwrap().remove(0), p));
        }
        dev.synchronize().unwrap();
        let s = lf::stats();
        if dev.is_cuda() && graphs_on() {
            assert!(f.is_graph(), "the fused transform replays a graph");
            assert_eq!(
                (s.graph_captures, s.graph_launches, s.graph_fallbacks),
                (0, calls - 2, 0),
                "one replay per later call: {s:?}"
            );
        }
        // one transform per call, no kernel besides its passes (CUDA)
        assert_eq!(s.library_calls, calls - 2);
        if dev.is_cuda() {
            assert_eq!(s.kernels_launched, 0);
        }
        for (k, (out, p)) in outs.iter().enumerate() {
            assert_eq!(
                (out.shape(), out.dtype()),
                (&[2 * n, 2 * n][..], DType::F32)
            );
            let got: Vec<f32> = out.to_vec().unwrap();
            let wave = (p * (2.0 * PI) * lf::c64::i()).exp();
            let padded = wave.pad(&[(n / 2, n / 2), (n / 2, n / 2)], 0.0);
            let want: Vec<f32> = lf::with_fusion(false, || {
                let field = lf::fft::fft2(&lf::fft::ifftshift(&padded, None));
                lf::fft::fftshift(&field, None)
                    .abs()
                    .square()
                    .to_vec()
                    .unwrap()
            });
            let peak = want.iter().copied().fold(0.0f32, f32::max) as f64;
            let apart = got
                .iter()
                .zip(&want)
                .map(|(&a, &b)| (a as f64 - b as f64).abs())
                .fold(0.0, f64::max)
                / peak;
            assert!(apart < 2e-5, "call {k}: {apart:.2e} from the unfused plan");
        }
    });
}

/// The transform of the PSF input read twice (at two indices), or through a transpose.
fn misfit(what: &str) -> Array {
    let f = lf::fft::fft2(&psf_input(8));
    match what {
        "two reads" => &f.abs() + &lf::fft::fftshift(&f, None).abs(),
        _ => f.abs().transpose(),
    }
}

device_test!(consumers_that_do_not_fit_stay_kernels);
fn consumers_that_do_not_fit_stay_kernels(dev: &Device) {
    generated(|| {
        let cuda = matches!(dev, Device::Cuda(_));
        for what in ["two reads", "transpose"] {
            // each case from fresh nodes (an evaluated transform would be a leaf)
            let y = misfit(what);
            let plan = lf::debug::plan(&[&y]).unwrap();
            let kernels = lf::debug::kernel_count(&[&y]).unwrap();
            assert_eq!(kernels, if cuda { 1 } else { 2 }, "{what}: plan:\n{plan}");
            assert!(!plan.contains("fused epilogue"), "{what}: plan:\n{plan}");
            let got: Vec<f32> = y.to_vec().unwrap();
            drop(y);
            let want: Vec<f32> = lf::with_fusion(false, || misfit(what).to_vec().unwrap());
            let peak = want.iter().copied().fold(0.0f32, f32::max);
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 2e-5 * peak, "{what}: {a} vs {b}");
            }
        }
    });
}

device_test!(spectral_step_fuses_each_kernel_once);
/// `ifft2(fft2(u) * m).real()` after an elementwise update: on CUDA one round trip (the
/// product between the transforms, in the row pass that goes there and back), the update
/// in the first pass and `.real()` with the scale in the last; the product joins that one
/// step only (regression: when the product was both the inverse's prologue and the
/// forward's epilogue, the inverse transform was lost). Checked against the unfused plan
/// over three repeated steps.
fn spectral_step_fuses_each_kernel_once(dev: &Device) {
    let n = 32;
    let u0: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7 % 13) as f32) * 0.1 - 0.6)
        .collect();
    let m: Vec<f32> = (0..n * n)
        .map(|i| 1.0 / (1.0 + (i % n) as f32 * 0.01))
        .collect();
    let mult = Array::from_vec_on(m, &[n, n], dev).unwrap();
    let step = |u: &Array| {
        let u = u + (u - u.powi(3)) * 0.1;
        lf::fft::ifft2(&(lf::fft::fft2(&u) * &mult)).real()
    };
    let run = |fused: bool| {
        lf::with_fusion(fused, || {
            let mut u = Array::from_vec_on(u0.clone(), &[n, n], dev).unwrap();
            for _ in 0..3 {
                u = step(&u);
                u.eval().unwrap();
            }
            u.to_vec::<f32>().unwrap()
        })
    };
    let (libs, kernels, plan, got, want) = generated(|| {
        let u = Array::from_vec_on(u0.clone(), &[n, n], dev).unwrap();
        let y = step(&u);
        let libs = lf::debug::library_count(&[&y]).unwrap();
        let kernels = lf::debug::kernel_count(&[&y]).unwrap();
        let plan = lf::debug::plan(&[&y]).unwrap();
        (libs, kernels, plan, run(true), run(false))
    });
    if dev.is_cuda() {
        assert_eq!((libs, kernels), (1, 0), "one round trip: plan:\n{plan}");
        assert!(plan.contains("fused middle work"), "plan:\n{plan}");
    } else {
        assert_eq!(libs, 2, "two transforms, each once: plan:\n{plan}");
    }
    assert_eq!(got.len(), n * n);
    let scale = want.iter().fold(0f32, |a, &v| a.max(v.abs()));
    let worst = got
        .iter()
        .zip(&want)
        .fold(0f32, |a, (&g, &w)| a.max((g - w).abs()));
    assert!(worst <= 1e-5 * scale.max(1.0), "largest difference {worst}");
}

device_test!(auto_fuses_where_the_measured_choice_is_generated);
fn auto_fuses_where_the_measured_choice_is_generated(dev: &Device) {
    let _g = BACKEND.lock().unwrap_or_else(|e| e.into_inner());
    let before = lf::set_fft_backend(FftBackend::Auto);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // the default: the first use of the transform times the generated passes against
        // cuFFT (on CUDA) and keeps the faster; the plan fuses the kernels into its passes
        // exactly when the generated passes won
        let n = 24; // a 48 x 48 transform no other test of this binary plans under `Auto`
        let img = psf(n);
        let spectrum = lf::fft::fft2(&Array::zeros(&[2 * n, 2 * n], DType::C64));
        let generated = lf::debug::fft_runs_generated(&spectrum).unwrap();
        let kernels = lf::debug::kernel_count(&[&img]).unwrap();
        let got: Vec<f32> = img.to_vec().unwrap();
        let choices = lf::debug::fft_choices(dev);
        (generated, kernels, got, choices)
    }));
    lf::set_fft_backend(before);
    let (generated, kernels, got, choices) = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert_eq!(kernels, if generated { 0 } else { 2 }, "{dev}");
    assert_eq!(got.len(), 48 * 48);
    let err = rel_to_peak(&got, &psf_reference(24));
    assert!(err < 1e-4, "{dev}: error {err:.2e} relative to the peak");
    if !dev.is_cuda() {
        // the CPU runs rustfft and measures nothing
        assert!(!generated);
        assert!(choices.is_empty(), "{choices:?}");
        return;
    }
    // one decision for the transform, with both times, and it names the clearly faster
    let mine: Vec<_> = choices
        .iter()
        .filter(|c| c.key.contains(" complex64 [48, 48] axes [0, 1] forward"))
        .collect();
    assert_eq!(mine.len(), 1, "{choices:?}");
    let c = mine[0];
    // the plan fuses both kernels exactly where the passes win with the input's kernel in
    // their first pass
    assert_eq!(c.fused_generated, generated);
    assert!(c.cufft_time > std::time::Duration::ZERO, "{c:?}");
    assert!(c.generated_time > std::time::Duration::ZERO, "{c:?}");
    // the passes must win by 10 % (ties and noise go to cuFFT); fused, against cuFFT and
    // one copy of the array (the kernel the fusion saves)
    let secs = |d: std::time::Duration| d.as_secs_f64();
    let wins = secs(c.generated_time) * 1.1 < secs(c.cufft_time);
    assert_eq!(c.generated, wins, "{c:?}");
    let fused_wins = secs(c.generated_time) * 1.1 < secs(c.cufft_time) + secs(c.copy_time);
    assert_eq!(c.fused_generated, wins || fused_wins, "{c:?}");
}

/// `ifft(fft(2 x, axis 1) * h, axis 1).real()` of a `[rows, n]` f32 array and a length-`n`
/// real filter broadcast over the rows: a 1-D spectral filter.
fn line_filter(x: &Array, h: &Array) -> Array {
    let spec = lf::fft::fft(&(x * 2.0), 1) * h;
    lf::fft::ifft(&spec, 1).real()
}

/// The same in f64 on the host by naive DFTs.
fn line_filter_reference(x: &[f32], h: &[f32], rows: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * n];
    for r in 0..rows {
        let line: Vec<f64> = x[r * n..(r + 1) * n]
            .iter()
            .map(|&v| 2.0 * v as f64)
            .collect();
        let spec: Vec<Complex64> = (0..n)
            .map(|k| {
                let s: Complex64 = (0..n)
                    .map(|j| {
                        line[j]
                            * Complex64::from_polar(1.0, -2.0 * PI * (j * k % n) as f64 / n as f64)
                    })
                    .sum();
                s * h[k] as f64
            })
            .collect();
        for j in 0..n {
            let s: Complex64 = (0..n)
                .map(|k| {
                    spec[k] * Complex64::from_polar(1.0, 2.0 * PI * (j * k % n) as f64 / n as f64)
                })
                .sum();
            out[r * n + j] = s.re / n as f64;
        }
    }
    out
}

device_test!(line_filter_is_one_pass_there_and_back);
/// A 1-D spectral filter along the last axis: on CUDA one pass computes the scaled input,
/// transforms each line, multiplies by the filter, transforms back and stores the real
/// part (no kernel, one library step); everywhere its values match a naive f64 DFT. Rows
/// of 3 and 783 (awkward batches) of 256-point lines, and 60-point lines (radices 4, 5, 3).
fn line_filter_is_one_pass_there_and_back(dev: &Device) {
    for (rows, n) in [(3usize, 256usize), (783, 256), (5, 60)] {
        let xs: Vec<f32> = (0..rows * n)
            .map(|i| ((i * 37 % 101) as f32) / 101.0 - 0.5)
            .collect();
        let hs: Vec<f32> = (0..n).map(|k| 1.0 / (1.0 + (k % 9) as f32)).collect();
        let x = Array::from_vec_on(xs.clone(), &[rows, n], dev).unwrap();
        let h = Array::from_vec_on(hs.clone(), &[n], dev).unwrap();
        let (libs, kernels, plan, got) = generated(|| {
            let y = line_filter(&x, &h);
            let libs = lf::debug::library_count(&[&y]).unwrap();
            let kernels = lf::debug::kernel_count(&[&y]).unwrap();
            let plan = lf::debug::plan(&[&y]).unwrap();
            (libs, kernels, plan, y.to_vec::<f32>().unwrap())
        });
        if dev.is_cuda() {
            assert_eq!((libs, kernels), (1, 0), "{rows}x{n}: plan:\n{plan}");
            assert!(plan.contains("fused middle work"), "plan:\n{plan}");
        }
        let want = line_filter_reference(&xs, &hs, rows, n);
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(0f64, |a, &v| a.max(v.abs()));
        let worst = got
            .iter()
            .zip(&want)
            .fold(0f64, |a, (&g, &w)| a.max((g as f64 - w).abs()));
        assert!(
            worst <= 1e-5 * scale,
            "{rows}x{n}: largest difference {worst:.3e}"
        );
    }
}

device_test!(shifted_or_other_axes_make_no_round_trip);
/// No round trip where the kernel between the transforms reads the first at a shifted
/// index (`fftshift`), or where the second transform runs along other axes: two library
/// steps, values as the unfused plan's.
fn shifted_or_other_axes_make_no_round_trip(dev: &Device) {
    let n = 16;
    let xs: Vec<f32> = (0..n * n).map(|i| ((i * 5 % 17) as f32) * 0.1).collect();
    let x = Array::from_vec_on(xs, &[n, n], dev).unwrap();
    let build = |what: &str| {
        let f = lf::fft::fft2(&(&x * 1.5));
        match what {
            "shifted" => lf::fft::ifft2(&(lf::fft::fftshift(&f, None) * 2.0)).real(),
            _ => lf::fft::ifft(&(&f * 2.0), 0).real(),
        }
    };
    for what in ["shifted", "other axes"] {
        let (libs, plan, got) = generated(|| {
            let y = build(what);
            let libs = lf::debug::library_count(&[&y]).unwrap();
            let plan = lf::debug::plan(&[&y]).unwrap();
            (libs, plan, y.to_vec::<f32>().unwrap())
        });
        assert_eq!(libs, 2, "{what}: plan:\n{plan}");
        assert!(!plan.contains("fused middle work"), "{what}: plan:\n{plan}");
        let want: Vec<f32> = lf::with_fusion(false, || build(what).to_vec().unwrap());
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(0f32, |a, &v| a.max(v.abs()));
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-5 * scale, "{what}: {a} vs {b}");
        }
    }
}

device_test!(traced_spectral_step_replays_the_round_trip);
/// The spectral step traced and called with each step's result: on CUDA the round trip
/// records into the graph once and replays with each call's buffers (no kernel besides
/// its passes); the values follow the unfused plan step by step.
fn traced_spectral_step_replays_the_round_trip(dev: &Device) {
    let n = 24;
    let m: Vec<f32> = (0..n * n)
        .map(|i| 1.0 / (1.0 + (i % 11) as f32 * 0.1))
        .collect();
    let mult = Array::from_vec_on(m, &[n, n], dev).unwrap();
    let step = |u: &Array, mult: &Array| {
        let u = u + (u - u.powi(3)) * 0.1;
        lf::fft::ifft2(&(lf::fft::fft2(&u) * mult)).real()
    };
    let u0: Vec<f32> = (0..n * n)
        .map(|i| ((i * 3 % 7) as f32) * 0.2 - 0.6)
        .collect();
    let calls = 6;
    let (got, s) = generated(|| {
        let m2 = mult.clone();
        let f = lf::Function::trace(&[&mult], move |x| vec![step(&x[0], &m2)]).unwrap();
        let mut u = Array::from_vec_on(u0.clone(), &[n, n], dev).unwrap();
        for k in 0..calls {
            if k == 2 {
                dev.synchronize().unwrap();
                lf::reset_stats();
            }
            u = f.call(&[&u]).unwrap().remove(0);
        }
        dev.synchronize().unwrap();
        let s = lf::stats();
        (u.to_vec::<f32>().unwrap(), s)
    });
    // one round trip a call on CUDA, two transforms on the CPU
    let per_call = if dev.is_cuda() { 1 } else { 2 };
    assert_eq!(s.library_calls, per_call * (calls as u64 - 2), "{s:?}");
    if dev.is_cuda() {
        assert_eq!(s.kernels_launched, 0, "{s:?}");
        if graphs_on() {
            assert_eq!(s.graph_launches, calls as u64 - 2, "{s:?}");
        }
    }
    let want: Vec<f32> = lf::with_fusion(false, || {
        let mut u = Array::from_vec_on(u0.clone(), &[n, n], dev).unwrap();
        for _ in 0..calls {
            u = step(&u, &mult);
            u.eval().unwrap();
        }
        u.to_vec().unwrap()
    });
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |a, &v| a.max(v.abs()));
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * scale.max(1.0), "{a} vs {b}");
    }
}

device_test!(repeated_steps_chain_their_round_trips);
/// Three spectral steps built before one eval (and traced as one body): on CUDA the six
/// transforms run as one chain of round trips (one library call, no kernel; five middle
/// works: each step's product, and `.real()` with the next step's update between the
/// steps), two passes a step; the values follow the unfused plan, evaluated and traced.
fn repeated_steps_chain_their_round_trips(dev: &Device) {
    let (n, steps) = (16, 3);
    let m: Vec<f32> = (0..n * n)
        .map(|i| 1.0 / (1.0 + (i % 13) as f32 * 0.05))
        .collect();
    let mult = Array::from_vec_on(m, &[n, n], dev).unwrap();
    let body = |u: &Array, mult: &Array| {
        let mut u = u.clone();
        for _ in 0..steps {
            let v = &u + (&u - u.powi(3)) * 0.1;
            u = lf::fft::ifft2(&(lf::fft::fft2(&v) * mult)).real();
        }
        u
    };
    let u0: Vec<f32> = (0..n * n)
        .map(|i| ((i * 5 % 11) as f32) * 0.1 - 0.5)
        .collect();
    let start = || Array::from_vec_on(u0.clone(), &[n, n], dev).unwrap();
    let (libs, kernels, plan, got, traced) = generated(|| {
        let y = body(&start(), &mult);
        let libs = lf::debug::library_count(&[&y]).unwrap();
        let kernels = lf::debug::kernel_count(&[&y]).unwrap();
        let plan = lf::debug::plan(&[&y]).unwrap();
        let got: Vec<f32> = y.to_vec().unwrap();
        let m2 = mult.clone();
        let f = lf::Function::trace(&[&mult], move |x| vec![body(&x[0], &m2)]).unwrap();
        let mut u = start();
        for _ in 0..3 {
            u = f.call(&[&u]).unwrap().remove(0);
        }
        (libs, kernels, plan, got, u.to_vec::<f32>().unwrap())
    });
    if dev.is_cuda() {
        assert_eq!((libs, kernels), (1, 0), "one chain: plan:\n{plan}");
        let mids = plan.matches("fused middle work").count();
        assert_eq!(mids, 2 * steps - 1, "plan:\n{plan}");
    } else {
        assert_eq!(libs, 2 * steps, "each transform once: plan:\n{plan}");
    }
    let unfused = |calls: usize| -> Vec<f32> {
        lf::with_fusion(false, || {
            let mut u = start();
            for _ in 0..calls {
                u = body(&u, &mult);
                u.eval().unwrap();
            }
            u.to_vec().unwrap()
        })
    };
    for (got, calls) in [(got, 1), (traced, 3)] {
        let want = unfused(calls);
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(0f32, |a, &v| a.max(v.abs()));
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-5 * scale.max(1.0),
                "{calls}: {a} vs {b}"
            );
        }
    }
}

device_test!(real_spectral_step_is_one_round_trip);
/// `irfft2(rfft2(u') * m)` after an elementwise update `u' = u + (u - u^3) 0.1`, `m` over
/// the half spectrum, on a 24 x 30 array: on CUDA one real round trip, the update in the
/// R2C transform's pass along the rows (loading real values), the product in the pass
/// along the columns of the half spectrum that goes there and back, and irfft2's scaling
/// in the C2R transform's pass along the rows (storing real values): one step, no kernel.
/// Checked against the unfused plan and the CPU over three repeated steps (one eval
/// each).
fn real_spectral_step_is_one_round_trip(dev: &Device) {
    let (h, w) = (24, 30);
    let half = w / 2 + 1;
    let u0: Vec<f32> = (0..h * w)
        .map(|i| ((i * 7 % 13) as f32) * 0.1 - 0.6)
        .collect();
    let m: Vec<f32> = (0..h * half)
        .map(|i| 1.0 / (1.0 + (i % half) as f32 * 0.05 + (i / half) as f32 * 0.01))
        .collect();
    let step = |u: &Array, mult: &Array| {
        let u = u + (u - u.powi(3)) * 0.1;
        lf::fft::irfft2(&(lf::fft::rfft2(&u) * mult))
    };
    // three steps on `on`, fused or not
    let run = |fused: bool, on: &Device| {
        lf::with_fusion(fused, || {
            let mult = Array::from_vec_on(m.clone(), &[h, half], on).unwrap();
            let mut u = Array::from_vec_on(u0.clone(), &[h, w], on).unwrap();
            for _ in 0..3 {
                u = step(&u, &mult);
                u.eval().unwrap();
            }
            u.to_vec::<f32>().unwrap()
        })
    };
    // the CPU's rustfft, an independent implementation, unfused
    let host = run(false, &Device::Cpu);
    let (libs, kernels, plan, got, want) = generated(|| {
        let mult = Array::from_vec_on(m.clone(), &[h, half], dev).unwrap();
        let u = Array::from_vec_on(u0.clone(), &[h, w], dev).unwrap();
        let y = step(&u, &mult);
        assert_eq!((y.shape(), y.dtype()), (&[h, w][..], DType::F32));
        let libs = lf::debug::library_count(&[&y]).unwrap();
        let kernels = lf::debug::kernel_count(&[&y]).unwrap();
        let plan = lf::debug::plan(&[&y]).unwrap();
        (libs, kernels, plan, run(true, dev), run(false, dev))
    });
    if dev.is_cuda() {
        assert_eq!((libs, kernels), (1, 0), "one round trip: plan:\n{plan}");
        assert!(plan.contains("fused middle work"), "plan:\n{plan}");
    } else {
        assert_eq!(libs, 2, "two transforms: plan:\n{plan}");
        assert!(
            kernels >= 2,
            "the CPU fuses nothing into its transforms: plan:\n{plan}"
        );
    }
    assert_eq!((got.len(), want.len()), (h * w, h * w));
    let scale = host.iter().fold(0f32, |a, &v| a.max(v.abs()));
    for (what, v) in [("fused", &got), ("unfused", &want)] {
        let worst = v
            .iter()
            .zip(&host)
            .fold(0f32, |a, (&g, &w)| a.max((g - w).abs()));
        assert!(
            worst <= 1e-5 * scale.max(1.0),
            "{what}: largest difference {worst}"
        );
    }
}
