//! Tests of the generated FFT passes on the host: the host executor (same passes, radices,
//! butterflies and rounded twiddles as the rendered CUDA C) against a compensated f64 DFT,
//! with rustfft's error at the same length and precision as the yardstick; the rendered
//! source's structure; and (where NVRTC is installed) its compilation.

use lazyfuse_codegen::cuda::fft::{
    fused_layout, pack_args, pack_fused_args, render, render_fused, Epilogue, Fused, FusedArgs,
    Mid, ARG_BYTES,
};
use lazyfuse_codegen::fft::{self, host, Buf, Program};
use lazyfuse_codegen::{BinaryOp, Builder, DType, Inst, Kernel, LaunchArgs, Scalar, UnaryOp};
use num_complex::{Complex, Complex32, Complex64};

/// Deterministic inputs in [-1, 1) (f32 values, exact in f64).
fn input(len: usize, seed: u64) -> Vec<Complex64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 23) as f32 - 1.0) as f64
    };
    (0..len).map(|_| Complex64::new(next(), next())).collect()
}

/// `a + b` as a rounded sum and its error (Knuth's TwoSum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The DFT of `x` along the middle axis of `[outer, n, inner]`, summed with compensation
/// (TwoSum), so that its own error stays near one f64 rounding per term at every length,
/// below the error of any f64 FFT it checks (a plain sum's grows like `sqrt(n)` ulps).
fn dft(x: &[Complex64], outer: usize, n: usize, inner: usize, inverse: bool) -> Vec<Complex64> {
    let tw = fft::twiddles(n);
    let mut out = vec![Complex64::default(); x.len()];
    for o in 0..outer {
        for i in 0..inner {
            for k in 0..n {
                let (mut re, mut rc, mut im, mut ic) = (0.0, 0.0, 0.0, 0.0);
                for j in 0..n {
                    let (c, mut s) = tw[(j * k) % n];
                    if inverse {
                        s = -s;
                    }
                    let v = x[(o * n + j) * inner + i];
                    let (a, e) = two_sum(re, v.re * c - v.im * s);
                    re = a;
                    rc += e;
                    let (a, e) = two_sum(im, v.re * s + v.im * c);
                    im = a;
                    ic += e;
                }
                out[(o * n + k) * inner + i] = Complex64::new(re + rc, im + ic);
            }
        }
    }
    out
}

/// Relative L2 error of `got` against `want`.
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

/// rustfft's result along the middle axis of `[outer, n, inner]`.
fn rustfft_along<T: rustfft::FftNum>(
    x: &[Complex<T>],
    outer: usize,
    n: usize,
    inner: usize,
    inverse: bool,
) -> Vec<Complex<T>> {
    let mut planner = rustfft::FftPlanner::<T>::new();
    let plan = if inverse {
        planner.plan_fft_inverse(n)
    } else {
        planner.plan_fft_forward(n)
    };
    let mut out = x.to_vec();
    let mut line = vec![x[0]; n];
    for o in 0..outer {
        for i in 0..inner {
            for (j, l) in line.iter_mut().enumerate() {
                *l = x[(o * n + j) * inner + i];
            }
            plan.process(&mut line);
            for (j, l) in line.iter().enumerate() {
                out[(o * n + j) * inner + i] = *l;
            }
        }
    }
    out
}

/// The bound on the generated passes' relative L2 error: twice rustfft's at the same
/// length and precision (the goal is "no worse than 2x cuFFT's"; rustfft stands in
/// for cuFFT on the CPU: both are mixed-radix FFTs with twiddles accurate to one rounding,
/// so their errors grow alike, like `eps * log n`), and never below one unit roundoff
/// (at n <= 2 either may be exact or one rounding away).
fn bound(rust_err: f64, eps: f64) -> f64 {
    2.0 * rust_err.max(eps)
}

/// Checks the program for `shape` along `axis` in both precisions and directions.
fn check_axis(shape: &[usize], axis: usize) {
    let n = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let x = input(shape.iter().product(), n as u64 * 7 + axis as u64);
    for inverse in [false, true] {
        let want = dft(&x, outer, n, inner, inverse);
        // f32 / C64
        let prog = fft::plan_c2c(shape, &[axis], DType::C64, inverse).expect("covered");
        let x32: Vec<Complex32> = x
            .iter()
            .map(|z| Complex32::new(z.re as f32, z.im as f32))
            .collect();
        let got = host::run_program(&prog, &x32);
        let err = rel_err(&got, &want);
        let rust = rel_err(&rustfft_along(&x32, outer, n, inner, inverse), &want);
        println!("C64 {shape:?} axis {axis} inverse {inverse}: {err:.2e} (rustfft {rust:.2e})");
        assert!(
            err <= bound(rust, f32::EPSILON as f64 / 2.0),
            "C64 {shape:?} axis {axis} inverse {inverse}: error {err:.3e}, rustfft {rust:.3e}"
        );
        // f64 / C128
        let prog = fft::plan_c2c(shape, &[axis], DType::C128, inverse).expect("covered");
        let got = host::run_program(&prog, &x);
        let err = rel_err(&got, &want);
        let rust = rel_err(&rustfft_along(&x, outer, n, inner, inverse), &want);
        println!("C128 {shape:?} axis {axis} inverse {inverse}: {err:.2e} (rustfft {rust:.2e})");
        assert!(
            err <= bound(rust, f64::EPSILON / 2.0),
            "C128 {shape:?} axis {axis} inverse {inverse}: error {err:.3e}, rustfft {rust:.3e}"
        );
    }
}

#[test]
fn last_axis_lengths() {
    for n in [1, 2, 3, 5, 7, 8, 12, 60, 128, 1000, 4096] {
        check_axis(&[3, n], 1);
    }
}

#[test]
fn beyond_shared_memory_two_passes() {
    // 2^14: two passes of 128 through the work buffer in both precisions
    let p = fft::plan_c2c(&[1, 1 << 14], &[1], DType::C64, false).unwrap();
    assert_eq!(p.steps.len(), 2);
    assert_eq!((p.steps[0].src, p.steps[0].dst), (Buf::Input, Buf::Work));
    assert_eq!((p.steps[1].src, p.steps[1].dst), (Buf::Work, Buf::Output));
    assert!(p.steps[1].pass.twiddle_in && p.steps[1].args.big_n == 1 << 14);
    check_axis(&[1, 1 << 14], 1);
}

#[test]
fn first_and_middle_axes() {
    for n in [2, 3, 8, 12, 60, 128, 1000] {
        check_axis(&[n, 5], 0);
        check_axis(&[2, n, 3], 1);
    }
    // 4096 complex128 is two passes (64 x 64), along a strided axis
    check_axis(&[4096, 3], 0);
    // strided complex64 lines too long for four lines per block: two passes as well
    let p = fft::plan_c2c(&[2048, 5], &[0], DType::C64, false).unwrap();
    assert_eq!(p.steps.len(), 2);
    assert!(p.steps.iter().all(|s| s.pass.lines_per_block >= 4));
    check_axis(&[2048, 5], 0);
    check_axis(&[1024, 4], 0);
}

#[test]
fn several_axes_match_one_axis_at_a_time() {
    let shape = [6, 8, 5];
    let x: Vec<Complex32> = input(240, 3)
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    let all = fft::plan_c2c(&shape, &[0, 1, 2], DType::C64, false).unwrap();
    assert_eq!(all.steps.len(), 3);
    assert_eq!(all.steps[1].src, Buf::Output);
    let got = host::run_program(&all, &x);
    let mut want = x.clone();
    for ax in [0, 1, 2] {
        let p = fft::plan_c2c(&shape, &[ax], DType::C64, false).unwrap();
        want = host::run_program(&p, &want);
    }
    assert_eq!(got, want);
}

#[test]
fn uncovered_lengths_and_dtypes() {
    assert!(fft::plan_c2c(&[4, 11], &[1], DType::C64, false).is_none());
    assert!(fft::plan_c2c(&[4, 8], &[1], DType::F32, false).is_none());
    assert!(fft::plan_c2c(&[0, 8], &[1], DType::C64, false).is_none());
    // length-1 axes only: one copy pass
    let p: Program = fft::plan_c2c(&[3, 1], &[1], DType::C64, false).unwrap();
    assert_eq!(p.steps.len(), 1);
}

#[test]
fn rendered_pass_structure() {
    let p = fft::plan_c2c(&[7, 1000], &[1], DType::C64, false).unwrap();
    let pass = &p.steps[0].pass;
    let r = render(pass);
    assert!(r.entry.starts_with("lf_fft_"));
    let src = &r.source;
    // the load and store hooks a fused pass replaces, by linear element index
    assert!(
        src.contains("lf_fft_load(const lf_fft_args& a, long long i)"),
        "{src}"
    );
    assert!(src.contains("lf_fft_store(const lf_fft_args& a, long long i, c32 v)"));
    // one stage block per radix, twiddles from the table, never sincos
    assert_eq!(src.matches("// stage").count(), 4);
    assert!(src.contains("a.tw["));
    assert!(!src.contains("sincos") && !src.contains("__sinf"));
    assert!(src.contains(&format!(
        "__shared__ c32 sm[{}]",
        pass.lines_per_block as usize * fft::pitch(1000, DType::C64)
    )));
    assert_eq!(r.block, pass.block());
    // inverse differs; f64 uses c64
    let inv = fft::plan_c2c(&[7, 1000], &[1], DType::C64, true).unwrap();
    assert_ne!(render(&inv.steps[0].pass).entry, r.entry);
    let d = fft::plan_c2c(&[7, 1000], &[1], DType::C128, false).unwrap();
    assert!(render(&d.steps[0].pass).source.contains("c64 sm["));
    // arguments: 15 eight-byte fields
    let blob = pack_args(&p.steps[0].args, [1, 2, 3, 4]);
    assert_eq!(blob.len(), ARG_BYTES);
    assert_eq!(&blob[..8], &1u64.to_le_bytes());
}

/// A prologue of rank 2 and dtype `dt`: `where(ax1 < p0, exp(in0[i] * p1), 0)`, the load
/// under the guard (the shape of a padded, computed FFT input).
fn prologue(dt: DType) -> Kernel {
    let mut b = Builder::new(2);
    let i = b.push(Inst::Index, DType::I64);
    let ax1 = b.push(Inst::Axis(1), DType::I64);
    let lim = b.param(DType::I64);
    let scale = b.param(dt);
    let x = b.input(dt);
    let inside = b.binary(BinaryOp::Lt, ax1, lim);
    let v = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: Some(inside),
        },
        dt,
    );
    let m = b.binary(BinaryOp::Mul, v, scale);
    let e = b.unary(UnaryOp::Exp, m);
    let z = b.cast(lim, dt);
    let zero = b.binary(BinaryOp::Sub, z, z);
    let r = b.select(inside, e, zero);
    b.store(r);
    b.finish()
}

/// An epilogue of rank 2 reading the transform (input 1, of `dt`) at a shifted index and a
/// real input 0 at its own: `abs(x)^2 * w[i]`, with the two I64 shifts from parameter 0.
fn epilogue(dt: DType) -> Kernel {
    let mut b = Builder::new(2);
    let i = b.push(Inst::Index, DType::I64);
    let s0 = b.param(DType::I64);
    let _s1 = b.param(DType::I64);
    let w = b.input(DType::F32);
    let x = b.input(dt);
    // any index: the store replaces the load by the transform's value
    let at = b.binary(BinaryOp::Add, i, s0);
    let v = b.push(
        Inst::Load {
            input: x,
            index: at,
            guard: None,
        },
        dt,
    );
    let a = b.unary(UnaryOp::Abs, v);
    let sq = b.unary(UnaryOp::Square, a);
    let wv = b.push(
        Inst::Load {
            input: w,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    let wv = b.cast(wv, sq_dtype(dt));
    let r = b.binary(BinaryOp::Mul, sq, wv);
    b.store(r);
    b.finish()
}

fn sq_dtype(dt: DType) -> DType {
    if dt == DType::C64 || dt == DType::F32 {
        DType::F32
    } else {
        DType::F64
    }
}

#[test]
fn fused_prologue_and_epilogue_pass() {
    let k = prologue(DType::C64);
    let e = epilogue(DType::C64);
    let p = fft::plan_c2c(&[12, 16], &[0, 1], DType::C64, false).unwrap();
    let pass = &p.steps[0].pass;
    let pro = Fused {
        prologue: Some(&k),
        epilogue: None,
        mid: None,
    };
    let r = render_fused(pass, &pro).unwrap();
    assert!(r.entry.starts_with("lf_fftf_"));
    assert_ne!(r.entry, render(pass).entry);
    let src = &r.source;
    assert!(src.contains("lf_pro_args pro;"), "{src}");
    assert!(
        src.contains("lf_fft_load(const lf_fft_args& fa, long long li)"),
        "{src}"
    );
    // one complex struct only (the helpers' one), the prologue's math inside the load
    assert_eq!(src.matches("struct __align__(8) c32").count(), 1, "{src}");
    assert!(src.contains("const lf_pro_args& a = fa.pro;"));
    // an equal prologue is the same kernel
    let k2 = prologue(DType::C64).normalize();
    let same = Fused {
        prologue: Some(&k2),
        epilogue: None,
        mid: None,
    };
    assert_eq!(render_fused(pass, &same).unwrap().entry, r.entry);
    // a prologue of the wrong dtype is refused
    let wrong = prologue(DType::C128);
    let bad = Fused {
        prologue: Some(&wrong),
        epilogue: None,
        mid: None,
    };
    assert!(render_fused(pass, &bad).is_err());
    // both: the epilogue in the store
    let both = Fused {
        prologue: Some(&k),
        epilogue: Some(Epilogue {
            kernel: &e,
            value_input: 1,
            shift_param: 0,
        }),
        mid: None,
    };
    let rb = render_fused(pass, &both).unwrap();
    assert!(rb.source.contains("lf_epi_args epi;"), "{}", rb.source);
    assert!(rb.source.contains("const lf_epi_args& a = fa.epi;"));
    assert!(!rb.source.contains("in1["), "{}", rb.source);
    assert_ne!(rb.entry, r.entry);
    // the shifts' index math: the outermost coordinate without a division; in the last
    // axis's pass (12 x 16: lines of 16 along the rows) the last extent is the constant 16
    assert!(rb.source.contains("ik = rem;"), "{}", rb.source);
    assert!(!rb.source.contains("(IDX)16,"), "{}", rb.source);
    let last = &p.steps[1].pass;
    assert!(fft::plan_c2c(&[12, 16], &[0, 1], DType::C64, false).is_some());
    assert!(lazyfuse_codegen::cuda::fft::line_is_last_axis(last));
    assert!(!lazyfuse_codegen::cuda::fft::line_is_last_axis(pass));
    let rl = render_fused(last, &both).unwrap();
    assert!(
        rl.source.contains("const IDX nk = (IDX)16, ik = rem % nk;"),
        "{}",
        rl.source
    );
    use lazyfuse_codegen::cuda::fft::epilogue_extent_fits;
    assert!(epilogue_extent_fits(last, &[12, 16]) && !epilogue_extent_fits(last, &[16, 12]));
    assert!(epilogue_extent_fits(pass, &[16, 12]));
    // the epilogue must read the transform's dtype with its shifts
    let no_shift = Fused {
        prologue: None,
        epilogue: Some(Epilogue {
            kernel: &e,
            value_input: 1,
            shift_param: 1,
        }),
        mid: None,
    };
    assert!(render_fused(pass, &no_shift).is_err());
    // arguments: the pass's, then the prologue's struct, then the epilogue's
    let (at, eat, size) = fused_layout(&both).unwrap();
    assert_eq!(at, ARG_BYTES.div_ceil(8) * 8);
    assert!(eat > at && size > eat);
    let args = LaunchArgs {
        shape: [12, 16].into_iter().collect(),
        params: [Scalar::I64(9), Scalar::C64(Complex32::new(1.0, 0.5))]
            .into_iter()
            .collect(),
    };
    let eargs = LaunchArgs {
        shape: [12, 16].into_iter().collect(),
        params: [Scalar::I64(6), Scalar::I64(8)].into_iter().collect(),
    };
    let blob = pack_fused_args(
        &p.steps[0].args,
        [1, 2, 3, 4],
        &both,
        Some(FusedArgs {
            inputs: &[77],
            outputs: &[],
            args: &args,
        }),
        Some(FusedArgs {
            inputs: &[55, 0],
            outputs: &[66],
            args: &eargs,
        }),
        None,
    )
    .unwrap();
    assert_eq!(blob.len(), size);
    assert_eq!(&blob[at..at + 8], &77u64.to_le_bytes());
    assert_eq!(&blob[eat..eat + 8], &55u64.to_le_bytes());
    assert_eq!(&blob[eat + 16..eat + 24], &66u64.to_le_bytes());
}

#[test]
fn rendered_passes_compile_with_nvrtc() {
    // SAFETY: only tries to dlopen the library candidates.
    let present = std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() })
        .unwrap_or(false);
    if !present {
        assert!(
            std::env::var("LAZYFUSE_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "NVRTC required but not found"
        );
        eprintln!("NVRTC not found: compile check skipped");
        return;
    }
    let mut passes = Vec::new();
    for (shape, axis) in [
        (vec![3usize, 1000], 1usize),
        (vec![60, 5], 0),
        (vec![1, 1 << 14], 1),
        (vec![2, 7, 3], 1),
        (vec![4, 1], 1),
        // shared memory at its limit: strided 1024 complex64 lines, 4096 / 2048 per line
        (vec![1024, 3], 0),
        (vec![3, 4096], 1),
        (vec![2048, 3], 0),
        (vec![2, 2187], 1),
    ] {
        for dt in [DType::C64, DType::C128] {
            for inv in [false, true] {
                let p = fft::plan_c2c(&shape, &[axis], dt, inv).unwrap();
                passes.extend(p.steps.into_iter().map(|s| s.pass));
            }
        }
    }
    // real transforms: the last-axis passes, both directions, odd and power-of-two lines
    for (shape, dts) in [
        (vec![3usize, 1000], &[DType::C64, DType::C128][..]),
        (vec![5, 7], &[DType::C64, DType::C128]),
        (vec![2, 4096], &[DType::C64]),
        (vec![2, 2048], &[DType::C128]),
    ] {
        for &dt in dts {
            for p in [
                fft::plan_r2c(&shape, &[0, 1], dt),
                fft::plan_c2r(&shape, &[0, 1], dt),
            ] {
                passes.extend(p.unwrap().steps.into_iter().map(|s| s.pass));
            }
        }
    }
    let mut rendered: Vec<_> = passes.iter().map(render).collect();
    for dt in [DType::C64, DType::C128] {
        let (k, e) = (prologue(dt), epilogue(dt));
        let both = Fused {
            prologue: Some(&k),
            epilogue: Some(Epilogue {
                kernel: &e,
                value_input: 1,
                shift_param: 0,
            }),
            mid: None,
        };
        for pass in fft::plan_c2c(&[6, 1 << 14], &[0, 1], dt, true)
            .unwrap()
            .steps
        {
            rendered.push(render_fused(&pass.pass, &both).unwrap());
        }
        // pruned programs (gathered first passes, masked last ones), spread as a fused
        // launch spreads them, with the fused work
        let support: &[(usize, usize)] = &[(0, 16), (48, 64)];
        for shape in [[64usize, 64], [8192, 64]] {
            let p = fft::plan_c2c_pruned(&shape, &[0, 1], dt, false, Some(support)).unwrap();
            for s in p.steps {
                let pass = s.pass.spread_for(s.args.line_count());
                rendered.push(render(&pass));
                rendered.push(render_fused(&pass, &both).unwrap());
            }
        }
    }
    // real transforms: a real prologue in an R2C program's first pass and a complex
    // epilogue in its last, a complex prologue in a C2R program's first pass and a real
    // epilogue in its last (one pass each for a 1-D transform), spread as fused launches
    for (dt, rdt) in [(DType::C64, DType::F32), (DType::C128, DType::F64)] {
        let (kr, kc) = (prologue(rdt), prologue(dt));
        let (er, ec) = (epilogue(rdt), epilogue(dt));
        for (shape, axes) in [(vec![6usize, 30], vec![0usize, 1]), (vec![5, 16], vec![1])] {
            for (prog, first, last) in [
                (fft::plan_r2c(&shape, &axes, dt), &kr, &ec),
                (fft::plan_c2r(&shape, &axes, dt), &kc, &er),
            ] {
                let steps = prog.unwrap().steps;
                let n = steps.len();
                for (i, st) in steps.into_iter().enumerate() {
                    let (k, e) = ((i == 0).then_some(first), (i + 1 == n).then_some(last));
                    let f = Fused {
                        prologue: k,
                        epilogue: e.map(|kernel| Epilogue {
                            kernel,
                            value_input: 1,
                            shift_param: 0,
                        }),
                        mid: None,
                    };
                    let pass = st.pass.spread_for(st.args.line_count());
                    rendered.push(render_fused(&pass, &f).unwrap());
                }
            }
        }
    }
    // round trips (the middle work alone; with a prologue and an epilogue on one axis),
    // spread as a fused launch spreads them
    for dt in [DType::C64, DType::C128] {
        let (k, e, m) = (prologue(dt), epilogue(dt), mid_kernel(dt));
        let mid = Some(Mid {
            kernel: &m,
            value_input: 1,
        });
        for (shape, axes) in [
            (&[256usize, 256][..], &[0usize, 1][..]),
            (&[1024, 8], &[1, 0]),
        ] {
            let p = fft::plan_round_trip(shape, axes, axes, dt, false, None).unwrap();
            for s in p.steps.iter().filter(|s| s.pass.round_trip) {
                let fused = Fused {
                    mid,
                    ..Default::default()
                };
                rendered.push(render_fused(&s.pass, &fused).unwrap());
                let spread = s.pass.clone().spread_for(s.args.line_count());
                rendered.push(render_fused(&spread, &fused).unwrap());
            }
        }
        // a chain's turns: along the rows and the strided columns, either direction first
        let two: &[usize] = &[0, 1];
        let links: Vec<(&[usize], bool)> = (0..4).map(|j| (two, j % 2 == 1)).collect();
        let p = fft::plan_chain(&[256, 256], &links, dt, None).unwrap();
        for s in p.steps.iter().filter(|s| s.pass.round_trip) {
            let fused = Fused {
                mid,
                ..Default::default()
            };
            rendered.push(render_fused(&s.pass, &fused).unwrap());
        }
        let p = fft::plan_round_trip(&[3, 256], &[1], &[1], dt, true, None).unwrap();
        let all = Fused {
            prologue: Some(&k),
            epilogue: Some(Epilogue {
                kernel: &e,
                value_input: 1,
                shift_param: 0,
            }),
            mid,
        };
        let pass = p.steps[0].pass.clone().spread_for(3);
        rendered.push(render_fused(&pass, &all).unwrap());
    }
    for r in rendered {
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(
            &r.source,
            cudarc::nvrtc::CompileOptions {
                arch: Some("sm_90"),
                options: vec!["--std=c++17".into()],
                ..Default::default()
            },
        );
        assert!(ptx.is_ok(), "{:?}\n{}", ptx.err(), r.source);
    }
}

#[test]
fn direct_first_and_last_stages() {
    // contiguous pass: the first stage loads and the last stores from registers, small
    // launch or large (fused work spreads a small one's load and store instead)
    let small = fft::plan_c2c(&[3, 1024], &[1], DType::C64, false).unwrap();
    assert_eq!(small.steps[0].pass.spread, 1);
    assert!(!render(&small.steps[0].pass).source.contains("// load"));
    let fused = small.steps[0].pass.clone().spread_for(3);
    assert!(fused.spread > 1 && render(&fused).source.contains("// load"));
    // a small strided launch spreads: it has load and store phases anyway
    let strided = fft::plan_c2c(&[256, 8], &[0], DType::C64, false).unwrap();
    assert!(strided.steps.iter().all(|s| s.pass.spread > 1));
    let p = fft::plan_c2c(&[1024, 1024], &[1], DType::C64, false).unwrap();
    assert_eq!(p.steps[0].pass.spread, 1);
    let src = render(&p.steps[0].pass).source;
    assert!(
        !src.contains("// load") && !src.contains("// store"),
        "{src}"
    );
    assert!(src.contains("typedef") || src.contains("int lf_pad"));
    // strided pass: shared-memory load and store phases
    let p = fft::plan_c2c(&[1024, 8], &[0], DType::C64, false).unwrap();
    let src = render(&p.steps[0].pass).source;
    assert!(src.contains("// load") && src.contains("// store"), "{src}");
}

#[test]
fn small_fused_launches_spread_their_load_and_store() {
    // the 128 PSF's passes: 256 lines of 256, 32 stage threads a line
    let p = fft::plan_c2c(&[256, 256], &[0, 1], DType::C64, false).unwrap();
    for s in &p.steps {
        let lines = s.args.line_count();
        let pass = s.pass.clone().spread_for(lines);
        // the plain column pass (strided) spreads as well, the row pass does not
        assert_eq!(s.pass == pass, s.pass.load_lines_fastest);
        let mut plain = pass.clone();
        plain.spread = 1;
        assert!(pass.spread > 1, "{pass:?}");
        assert_eq!(pass.stage_threads(), plain.block());
        assert_eq!(pass.block(), plain.block() * pass.spread);
        assert!(pass.block() <= 512);
        // one element a load thread at most: the spread never exceeds a stage thread's share
        assert!(pass.spread * pass.threads_per_line <= pass.n);
        assert_eq!(pass.grid(lines), plain.grid(lines));
        let r = render(&pass);
        assert_eq!(r.block, pass.block());
        assert!(r
            .source
            .contains(&format!("__launch_bounds__({})", pass.block())));
        // every element goes through the load phase (no stage reads global memory)
        assert!(r.source.contains("// load") && r.source.contains("// store"));
        assert_ne!(r.entry, render(&plain).entry);
        // the twiddles are read before the load
        assert!(r.source.find("= a.tw[").unwrap() < r.source.find("// load").unwrap());
        // stage threads are the first ones; the others skip the stages
        assert!(r
            .source
            .contains(&format!("li = threadIdx.x / {}", pass.threads_per_line)));
    }
    // a large launch keeps one thread per stage thread
    let big = fft::plan_c2c(&[4096, 256], &[1], DType::C64, false).unwrap();
    let s = &big.steps[0];
    assert_eq!(s.pass.clone().spread_for(s.args.line_count()).spread, 1);
}

#[test]
fn twiddles_are_read_before_the_load_where_few() {
    // a small (spread) launch with fused work
    let p = fft::plan_c2c(&[4, 256], &[1], DType::C64, false).unwrap();
    let src = render(&p.steps[0].pass.clone().spread_for(4)).source;
    // 256 = 8 * 8 * 4 with 32 threads a line: 7 + 2 * 3 twiddles a thread
    let at = src.find("tw1[q][r] = a.tw[").expect("prefetched");
    assert!(at < src.find("// stage 0").unwrap());
    assert!(src.contains("lf_tw(v[q][r], tw2[q][r])"));
    // 3000 = 8 * 5 * 5 * 5 * 3 with 375 threads a line: 7 + 3 * 2 * 4 + 3 * 2 twiddles a
    // thread, more than the registers allow: read in the stages
    let q = fft::plan_c2c(&[7, 3000], &[1], DType::C64, false).unwrap();
    let src = render(&q.steps[0].pass).source;
    assert!(!src.contains("tw1[q][r] = a.tw["));
    // a large launch keeps its registers for occupancy: read in the stages
    let big = fft::plan_c2c(&[4096, 256], &[1], DType::C64, false).unwrap();
    let src = render(&big.steps[0].pass).source;
    assert!(!src.contains("tw1[q][r] = a.tw[") && src.contains("a.tw[r * k]"));
    assert!(src.contains("a.tw[r * k]"));
}

#[test]
fn pruned_programs_skip_the_zero_columns() {
    // (shape, axes, support of the last axis): one range, two ranges (a rolled padding),
    // a first axis split in two passes, an outer batch, and the axes given last first
    type Case<'a> = (&'a [usize], &'a [usize], &'a [(usize, usize)]);
    let cases: &[Case] = &[
        (&[256, 256], &[0, 1], &[(64, 192)]),
        (&[48, 40], &[0, 1], &[(0, 10), (30, 40)]),
        (&[8192, 16], &[0, 1], &[(4, 12)]),
        (&[3, 20, 24], &[0, 1, 2], &[(6, 18)]),
        (&[3, 20, 24], &[2, 1], &[(0, 5), (19, 24)]),
    ];
    for &(shape, axes, support) in cases {
        let (n, cols) = (shape.iter().product::<usize>(), shape[shape.len() - 1]);
        let inside = |i: usize| support.iter().any(|&(l, h)| (l..h).contains(&(i % cols)));
        let x: Vec<Complex32> = input(n, 7)
            .iter()
            .enumerate()
            .map(|(i, v)| match inside(i) {
                true => Complex32::new(v.re as f32, v.im as f32),
                false => Complex32::default(),
            })
            .collect();
        // the same axes in the pruned program's order (the last two first): the same
        // arithmetic, so the same values
        let nd = shape.len();
        let order: Vec<usize> = [nd - 2, nd - 1]
            .into_iter()
            .chain(axes.iter().copied().filter(|&a| a + 2 < nd))
            .collect();
        let plain = fft::plan_c2c(shape, &order, DType::C64, false).unwrap();
        let pruned = fft::plan_c2c_pruned(shape, axes, DType::C64, false, Some(support)).unwrap();
        // the first axis transforms the support's columns only, the last axis loads them
        // (one launch over both ranges; two for a first axis split in two passes)
        let first = &pruned.steps[0];
        let width: usize = support.iter().map(|&(l, h)| h - l).sum();
        assert_eq!(first.args.lines[2] as usize, width, "{shape:?} {support:?}");
        assert!(first.pass.gathered && !first.pass.masked);
        let gathered = pruned.steps.iter().filter(|s| s.pass.gathered).count();
        assert_eq!(gathered, if shape[0] > 4096 { 2 } else { 1 });
        assert_eq!(pruned.steps.iter().filter(|s| s.pass.masked).count(), 1);
        assert_eq!(pruned.steps.len(), plain.steps.len());
        // the output starts as NaN (`run_program`): a read of a column the first axis
        // skipped would show
        let want = host::run_program(&plain, &x);
        let got = host::run_program(&pruned, &x);
        assert_eq!(got.len(), want.len());
        let bad = got.iter().zip(&want).position(|(g, w)| g != w);
        assert_eq!(bad, None, "{shape:?} {axes:?} {support:?}");
    }
    // where pruning does not apply, the plain program: a support of most columns, three
    // ranges, the last axis not transformed
    let plain = fft::plan_c2c(&[64, 64], &[0, 1], DType::C64, false).unwrap();
    for (axes, support) in [
        (&[0usize, 1][..], &[(0usize, 60usize)][..]),
        (&[0, 1], &[(0, 4), (10, 14), (20, 24)]),
    ] {
        let p = fft::plan_c2c_pruned(&[64, 64], axes, DType::C64, false, Some(support));
        assert_eq!(p.as_ref(), Some(&plain));
    }
    let p = fft::plan_c2c_pruned(&[64, 64], &[0], DType::C64, false, Some(&[(0, 8)]));
    assert_eq!(p, fft::plan_c2c(&[64, 64], &[0], DType::C64, false));
}

#[test]
fn masked_passes_render_their_bounds() {
    let p =
        fft::plan_c2c_pruned(&[256, 256], &[0, 1], DType::C64, false, Some(&[(64, 192)])).unwrap();
    let masked = p.steps.iter().find(|s| s.pass.masked).unwrap();
    let src = render(&masked.pass).source;
    assert!(src.contains("a.keep0") && src.contains("a.keep3"), "{src}");
    assert!(!render(&p.steps[0].pass).source.contains("a.keep0 &&"));
    let blob = pack_args(&masked.args, [1, 2, 3, 4]);
    assert_eq!(blob.len(), ARG_BYTES);
    let field = |i: usize| u64::from_le_bytes(blob[8 * i..8 * i + 8].try_into().unwrap());
    assert_eq!(
        [field(15), field(16), field(17), field(18)],
        [64, 192, 0, 0]
    );
    // the first pass maps its lines through the same ranges
    let first = render(&p.steps[0].pass).source;
    assert!(first.contains("a.keep2 + (lg - w0)"), "{first}");
}

/// Placeholders of the renderer's format strings left in `src` (a string passed where a
/// formatted one was meant).
fn placeholders(src: &str) -> Vec<&'static str> {
    const NAMES: &[&str] = &[
        "{li_t}", "{c}", "{r}", "{n}", "{tpl}", "{lpb}", "{pitch}", "{block}", "{name}", "{m}",
        "{ns}", "{rad}", "{k}", "{guard}", "{read}", "{write}", "{shift}", "{st}", "{idx}", "{at}",
        "{body}", "{nk}", "{ik}", "{gather}",
    ];
    NAMES.iter().copied().filter(|p| src.contains(p)).collect()
}

#[test]
fn rendered_sources_hold_no_placeholders() {
    let support: &[(usize, usize)] = &[(0, 64), (192, 256)];
    let mut progs = vec![
        fft::plan_c2c_pruned(&[256, 256], &[0, 1], DType::C64, false, Some(support)).unwrap(),
        fft::plan_c2c_pruned(&[4096, 4096], &[0, 1], DType::C64, true, Some(&[(0, 1024)])).unwrap(),
    ];
    for shape in [[7usize, 1000], [1024, 1024], [3, 20], [8192, 16]] {
        for axes in [&[0usize][..], &[1], &[0, 1]] {
            progs.push(fft::plan_c2c(&shape, axes, DType::C128, false).unwrap());
        }
    }
    for p in &progs {
        for s in &p.steps {
            let src = render(&s.pass).source;
            assert_eq!(
                placeholders(&src),
                Vec::<&str>::new(),
                "{:?}\n{src}",
                s.pass
            );
        }
    }
}

/// Middle work of rank 2 and dtype `dt`: `x * w[i]`, the transform's output `x` (input 1)
/// times a real filter `w` (input 0, F32) at its own index (a spectral step's multiplier).
fn mid_kernel(dt: DType) -> Kernel {
    let mut b = Builder::new(2);
    let i = b.push(Inst::Index, DType::I64);
    let w = b.input(DType::F32);
    let x = b.input(dt);
    let v = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        dt,
    );
    let wv = b.push(
        Inst::Load {
            input: w,
            index: i,
            guard: None,
        },
        DType::F32,
    );
    let wc = b.cast(wv, dt);
    let r = b.binary(BinaryOp::Mul, v, wc);
    b.store(r);
    b.finish()
}

/// The host's middle work of the round-trip tests: element `i` times `1 / (1 + i % 7)`.
fn filter<T: fft::host::Real>(i: usize, v: Complex<T>) -> Complex<T> {
    let f = T::from_f64(1.0 / (1.0 + (i % 7) as f64));
    Complex::new(v.re * f, v.im * f)
}

/// The plain programs a round trip stands for: the first transform, and the second with
/// the round trip's axis first (the same arithmetic in the same order).
fn two_programs(
    shape: &[usize],
    axes: &[usize],
    back: &[usize],
    dt: DType,
    support: Option<&[(usize, usize)]>,
    rt: &Program,
) -> (Program, Program) {
    let first = fft::plan_c2c_pruned(shape, axes, dt, false, support).unwrap();
    // the round trip's axis: the one whose line length and stride its pass has
    let s = rt.steps.iter().find(|s| s.pass.round_trip).unwrap();
    let last = (0..shape.len())
        .find(|&a| {
            shape[a] == s.pass.n as usize
                && shape[a + 1..].iter().product::<usize>() as i64 == s.args.output.stride
                && back.contains(&a)
        })
        .unwrap();
    let order: Vec<usize> = std::iter::once(last)
        .chain(back.iter().copied().filter(|&a| a != last && shape[a] > 1))
        .collect();
    (first, fft::plan_c2c(shape, &order, dt, true).unwrap())
}

#[test]
fn round_trips_match_two_transforms() {
    // (shape, first axes, second axes, support of the first's input)
    type Case<'a> = (
        &'a [usize],
        &'a [usize],
        &'a [usize],
        Option<&'a [(usize, usize)]>,
    );
    let cases: &[Case] = &[
        (&[12, 16], &[0, 1], &[0, 1], None),
        (&[6, 10, 8], &[1, 2], &[2, 1], None),
        (&[64], &[0], &[0], None),
        (&[3, 256], &[1], &[1], None),
        (&[5, 24], &[1, 0], &[0, 1], None),
        (&[40, 48], &[0, 1], &[0, 1], Some(&[(0, 10), (38, 48)])),
        (&[8192, 16], &[0, 1], &[1, 0], None),
    ];
    for &(shape, axes, back, support) in cases {
        let n: usize = shape.iter().product();
        let inside = |i: usize| {
            support.is_none_or(|s| {
                s.iter()
                    .any(|&(l, h)| (l..h).contains(&(i % shape[shape.len() - 1])))
            })
        };
        let x: Vec<Complex64> = input(n, 11)
            .into_iter()
            .enumerate()
            .map(|(i, v)| if inside(i) { v } else { Complex64::default() })
            .collect();
        let x32: Vec<Complex32> = x
            .iter()
            .map(|z| Complex32::new(z.re as f32, z.im as f32))
            .collect();
        for dt in [DType::C64, DType::C128] {
            let rt = fft::plan_round_trip(shape, axes, back, dt, false, support)
                .unwrap_or_else(|| panic!("{shape:?} {axes:?} {dt:?}"));
            assert_eq!(rt.steps.iter().filter(|s| s.pass.round_trip).count(), 1);
            let (first, second) = two_programs(shape, axes, back, dt, support, &rt);
            // one pass fewer than the two transforms
            assert_eq!(
                rt.steps.len() + 1,
                first.steps.len() + second.steps.len(),
                "{shape:?}"
            );
            let same = |got: &[Complex64], want: &[Complex64]| {
                assert_eq!(got.len(), want.len());
                let bad = got.iter().zip(want).position(|(g, w)| g != w);
                assert_eq!(bad, None, "{shape:?} {axes:?} {back:?} {dt:?}");
            };
            if dt == DType::C64 {
                let got = host::run_program_mid(&rt, &x32, &filter);
                let mut y = host::run_program(&first, &x32);
                y.iter_mut()
                    .enumerate()
                    .for_each(|(i, v)| *v = filter(i, *v));
                let want = host::run_program(&second, &y);
                let widen = |v: &[Complex32]| -> Vec<Complex64> {
                    v.iter()
                        .map(|z| Complex64::new(z.re as f64, z.im as f64))
                        .collect()
                };
                same(&widen(&got), &widen(&want));
            } else {
                let got = host::run_program_mid(&rt, &x, &filter);
                let mut y = host::run_program(&first, &x);
                y.iter_mut()
                    .enumerate()
                    .for_each(|(i, v)| *v = filter(i, *v));
                same(&got, &host::run_program(&second, &y));
            }
        }
    }
}

#[test]
fn round_trip_against_a_dft() {
    // ifft2(fft2(x) * w) of a 12 x 16 array against compensated f64 DFTs
    let (r, c) = (12usize, 16usize);
    let x = input(r * c, 5);
    let mut y = dft(&dft(&x, 1, r, c, false), r, c, 1, false);
    y.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = filter(i, *v));
    let want = dft(&dft(&y, r, c, 1, true), 1, r, c, true);
    let rt = fft::plan_round_trip(&[r, c], &[0, 1], &[0, 1], DType::C128, false, None).unwrap();
    let got = host::run_program_mid(&rt, &x, &filter);
    assert_eq!(got.len(), want.len());
    let err = rel_err(&got, &want);
    assert!(err < 1e-14, "{err:.3e}");
}

/// The host's second middle work of the chain tests: the real part through the Allen-Cahn
/// update `u + (u - u^3) / 10`, with the element's index in it.
fn update<T: fft::host::Real + Into<f64>>(i: usize, v: Complex<T>) -> Complex<T> {
    let u = v.re.into() / 256.0 + (i % 3) as f64 * 0.01;
    Complex::new(T::from_f64(u + (u - u * u * u) * 0.1), T::from_f64(0.0))
}

/// The host's middle works of a chain of `count` transforms: [`filter`] after each forward
/// transform, [`update`] after each inverse one.
fn chain_mids<T: fft::host::Real + Into<f64>>(count: usize) -> Vec<fft::host::Mid<'static, T>> {
    (1..count)
        .map(|j| -> fft::host::Mid<'static, T> {
            if j % 2 == 1 {
                &filter::<T>
            } else {
                &update::<T>
            }
        })
        .collect()
}

/// `x` (C order, `shape`) transformed along each of `axes` by compensated f64 DFTs.
fn dft_axes(x: &[Complex64], shape: &[usize], axes: &[usize], inverse: bool) -> Vec<Complex64> {
    let mut y = x.to_vec();
    for &a in axes {
        let outer: usize = shape[..a].iter().product();
        let inner: usize = shape[a + 1..].iter().product();
        y = dft(&y, outer, shape[a], inner, inverse);
    }
    y
}

#[test]
fn chains_of_round_trips_against_dfts() {
    // (shape, axes of every transform, transforms): forward, inverse, forward, ...
    let cases: &[(&[usize], &[usize], usize)] = &[
        (&[12, 16], &[0, 1], 4),
        (&[16, 12], &[1, 0], 3),
        (&[6, 10, 8], &[1, 2], 5),
        (&[4, 6, 10], &[0, 1, 2], 4),
        (&[9, 1, 8], &[0, 1, 2], 2),
    ];
    for &(shape, axes, count) in cases {
        let n: usize = shape.iter().product();
        let x = input(n, 17);
        let links: Vec<(&[usize], bool)> = (0..count).map(|j| (axes, j % 2 == 1)).collect();
        // the chain by DFTs, the middle work alternating between the two maps
        let mut want = x.clone();
        for j in 0..count {
            if j > 0 {
                let m = if j % 2 == 1 { filter } else { update };
                want.iter_mut().enumerate().for_each(|(i, v)| *v = m(i, *v));
            }
            want = dft_axes(&want, shape, axes, j % 2 == 1);
        }
        let (mids64, mids32) = (chain_mids::<f64>(count), chain_mids::<f32>(count));
        for dt in [DType::C64, DType::C128] {
            let p = fft::plan_chain(shape, &links, dt, None)
                .unwrap_or_else(|| panic!("{shape:?} {axes:?} {dt:?}"));
            // one round-trip pass between each two transforms; every transform's other
            // passes once (a turn saves one pass of each transform it joins)
            let trips = p.steps.iter().filter(|s| s.pass.round_trip).count();
            assert_eq!(trips, count - 1, "{shape:?}");
            let real_axes = axes.iter().filter(|&&a| shape[a] > 1).count();
            assert_eq!(p.steps.len(), count * real_axes - (count - 1), "{shape:?}");
            let err = match dt {
                DType::C64 => {
                    let x32: Vec<Complex32> = x
                        .iter()
                        .map(|z| Complex32::new(z.re as f32, z.im as f32))
                        .collect();
                    rel_err(&host::run_program_mids(&p, &x32, &mids32), &want)
                }
                _ => rel_err(&host::run_program_mids(&p, &x, &mids64), &want),
            };
            let tol = if dt == DType::C64 { 1e-5 } else { 1e-13 };
            assert!(err < tol, "{shape:?} {axes:?} {dt:?}: {err:.3e}");
        }
    }
}

#[test]
fn chains_only_where_each_transform_turns() {
    let dt = DType::C64;
    let two: &[usize] = &[0, 1];
    // the sim step repeated: two passes a step, the turning axes alternating
    let links: Vec<(&[usize], bool)> = (0..6).map(|j| (two, j % 2 == 1)).collect();
    let p = fft::plan_chain(&[256, 256], &links, dt, None).unwrap();
    assert_eq!(p.steps.len(), 7);
    let turns: Vec<i64> = p
        .steps
        .iter()
        .filter(|s| s.pass.round_trip)
        .map(|s| s.args.output.stride)
        .collect();
    assert_eq!(turns, [1, 256, 1, 256, 1]);
    let dirs: Vec<bool> = p.steps.iter().map(|s| s.pass.inverse).collect();
    assert_eq!(dirs, [false, false, true, false, true, false, true]);
    // directions that do not alternate; one transform; a 1-D transform inside the chain
    // (no pass of its own to turn in); different axis sets; a turning axis of two passes
    let same_way: [(&[usize], bool); 2] = [(two, false), (two, false)];
    assert_eq!(fft::plan_chain(&[8, 8], &same_way, dt, None), None);
    assert_eq!(fft::plan_chain(&[8, 8], &[(two, false)], dt, None), None);
    let one: &[usize] = &[1];
    let ones: [(&[usize], bool); 3] = [(one, false), (one, true), (one, false)];
    assert_eq!(fft::plan_chain(&[8, 8], &ones, dt, None), None);
    assert!(fft::plan_chain(&[8, 8], &ones[..2], dt, None).is_some());
    let mixed: [(&[usize], bool); 3] = [(two, false), (two, true), (one, false)];
    assert_eq!(fft::plan_chain(&[8, 8], &mixed, dt, None), None);
    let long: [(&[usize], bool); 3] = [(two, false), (two, true), (two, false)];
    assert_eq!(fft::plan_chain(&[1 << 14, 8], &long, dt, None), None);
    assert!(fft::plan_chain(&[1 << 14, 8], &long[..2], dt, None).is_some());
}

#[test]
fn round_trips_only_where_one_pass_goes_and_back() {
    let dt = DType::C64;
    // different axes; a last axis of two passes; an uncovered length; an empty array
    assert_eq!(
        fft::plan_round_trip(&[8, 8], &[0, 1], &[1], dt, false, None),
        None
    );
    assert_eq!(
        fft::plan_round_trip(&[2, 1 << 14], &[1], &[1], dt, false, None),
        None
    );
    assert_eq!(
        fft::plan_round_trip(&[22, 8], &[0, 1], &[0, 1], dt, false, None),
        None
    );
    assert_eq!(
        fft::plan_round_trip(&[0, 8], &[0, 1], &[0, 1], dt, false, None),
        None
    );
    assert_eq!(
        fft::plan_round_trip(&[8, 8], &[0], &[0], DType::F32, false, None),
        None
    );
    // a first axis split in two passes still ends on a one-pass axis
    let p = fft::plan_round_trip(&[1 << 14, 8], &[0, 1], &[0, 1], dt, true, None).unwrap();
    let s = p.steps.iter().position(|s| s.pass.round_trip).unwrap();
    assert!(p.steps[s].pass.inverse && !p.steps[s + 1].pass.inverse);
    assert_eq!(p.steps[s].pass.n, 8);
}

#[test]
fn round_trip_passes_render_both_directions() {
    let dt = DType::C64;
    let p = fft::plan_round_trip(&[256, 256], &[0, 1], &[0, 1], dt, false, None).unwrap();
    let rt = p.steps.iter().find(|s| s.pass.round_trip).unwrap();
    let m = mid_kernel(dt);
    let mid = Fused {
        mid: Some(Mid {
            kernel: &m,
            value_input: 1,
        }),
        ..Default::default()
    };
    let r = render_fused(&rt.pass, &mid).unwrap();
    let src = &r.source;
    assert_eq!(placeholders(src), Vec::<&str>::new(), "{src}");
    for needle in [
        "lf_mid_args mid;",
        "lf_fft_mid(const lf_fft_args& fa",
        "lf_bfly8_f(v[q])",
        "lf_bfly8_b(v[q])",
        "lf_tw_f(",
        "lf_tw_b(",
        "lf_rot_b(",
        "= lf_fft_mid(a,",
    ] {
        assert!(src.contains(needle), "{needle}\n{src}");
    }
    // the middle work's load is the transform's value
    assert!(!src.contains("in1["), "{src}");
    // middle work only in a round-trip pass, and a round-trip pass only with it
    assert!(render_fused(&p.steps[0].pass, &mid).is_err());
    assert!(render_fused(&rt.pass, &Fused::default()).is_err());
    let wrong = mid_kernel(DType::C128);
    let bad = Fused {
        mid: Some(Mid {
            kernel: &wrong,
            value_input: 1,
        }),
        ..Default::default()
    };
    assert!(render_fused(&rt.pass, &bad).is_err());
    // the middle work's struct follows the pass's arguments
    let (_, _, size) = fused_layout(&mid).unwrap();
    let args = LaunchArgs {
        shape: [256, 256].into_iter().collect(),
        params: Default::default(),
    };
    let blob = pack_fused_args(
        &rt.args,
        [1, 2, 3, 4],
        &mid,
        None,
        None,
        Some(FusedArgs {
            inputs: &[99, 0],
            outputs: &[],
            args: &args,
        }),
    )
    .unwrap();
    assert_eq!(blob.len(), size);
    let at = ARG_BYTES.div_ceil(8) * 8;
    assert_eq!(&blob[at..at + 8], &99u64.to_le_bytes());
}

/// The half spectrum (last axis `n -> n/2 + 1`) of a full one over `shape`.
fn halve(x: &[Complex64], shape: &[usize]) -> Vec<Complex64> {
    let n = *shape.last().unwrap();
    x.chunks(n).flat_map(|l| l[..n / 2 + 1].to_vec()).collect()
}

/// `x` in the precision of `dt`, run through `prog` by the host executor, in f64.
fn run_in(prog: &Program, x: &[Complex64], dt: DType) -> Vec<Complex64> {
    match dt {
        DType::C64 => {
            let x32: Vec<Complex32> = x
                .iter()
                .map(|z| Complex32::new(z.re as f32, z.im as f32))
                .collect();
            host::run_program(prog, &x32)
                .iter()
                .map(|z| Complex64::new(z.re as f64, z.im as f64))
                .collect()
        }
        _ => host::run_program(prog, x),
    }
}

#[test]
fn real_transforms_against_dfts() {
    // (shape, axes; the last of them the array's last axis, halved): odd and even halved
    // lengths, one and several axes, a length-1 axis
    let cases: &[(&[usize], &[usize])] = &[
        (&[16], &[0]),
        (&[7], &[0]),
        (&[1], &[0]),
        (&[2], &[0]),
        (&[3, 10], &[1]),
        (&[5, 12], &[0, 1]),
        (&[4, 6, 9], &[0, 1, 2]),
        (&[6, 1, 8], &[1, 0, 2]),
        (&[2, 4096], &[0, 1]),
    ];
    for &(shape, axes) in cases {
        let len: usize = shape.iter().product();
        let n = *shape.last().unwrap();
        let mut half_shape = shape.to_vec();
        *half_shape.last_mut().unwrap() = n / 2 + 1;
        let x: Vec<Complex64> = input(len, 23)
            .iter()
            .map(|z| Complex64::new(z.re, 0.0))
            .collect();
        // R2C: the full complex DFT's half spectrum
        let want = halve(&dft_axes(&x, shape, axes, false), shape);
        // C2R: a half spectrum (any, not Hermitian along the other axes), its inverse DFTs
        // along the other axes, then the Hermitian line extended and transformed back
        let spec = input(want.len(), 29);
        let back = c2r_dft(&spec, shape, axes);
        for dt in [DType::C64, DType::C128] {
            let tol = if dt == DType::C64 { 1e-5 } else { 1e-13 };
            if !fft::one_pass(n, dt) {
                // the halved axis takes two passes (4096 complex128 values)
                assert!(fft::plan_r2c(shape, axes, dt).is_none(), "{shape:?}");
                assert!(fft::plan_c2r(shape, axes, dt).is_none(), "{shape:?}");
                continue;
            }
            let r2c = fft::plan_r2c(shape, axes, dt).unwrap_or_else(|| panic!("{shape:?}"));
            assert_eq!(r2c.out_len, want.len(), "{shape:?}");
            let real = r2c.steps.iter().filter(|s| s.pass.real == fft::RealIo::R2C);
            assert_eq!(real.count(), 1, "{shape:?}: one real pass");
            let got = run_in(&r2c, &x, dt);
            let err = rel_err(&got, &want);
            assert!(err < tol, "r2c {shape:?} {axes:?} {dt:?}: {err:.3e}");
            let c2r = fft::plan_c2r(shape, axes, dt).unwrap_or_else(|| panic!("{shape:?}"));
            assert_eq!(c2r.out_len, len, "{shape:?}");
            let last_pass = &c2r.steps.last().unwrap().pass;
            assert_eq!(last_pass.real, fft::RealIo::C2R, "{shape:?}");
            let got = run_in(&c2r, &spec, dt);
            assert!(got.iter().all(|z| z.im == 0.0), "{shape:?}: real output");
            let err = rel_err(&got, &back);
            assert!(err < tol, "c2r {shape:?} {axes:?} {dt:?}: {err:.3e}");
        }
    }
}

#[test]
fn real_transforms_only_where_covered() {
    // the halved axis not the array's last, uncovered, two passes; an axis twice; empty
    assert!(fft::plan_r2c(&[8, 6], &[1, 0], DType::C64).is_none());
    assert!(fft::plan_r2c(&[8, 11], &[1], DType::C64).is_none());
    assert!(fft::plan_r2c(&[2, 1 << 13], &[1], DType::C64).is_none());
    assert!(fft::plan_r2c(&[8, 6], &[1, 1], DType::C64).is_none());
    assert!(fft::plan_r2c(&[0, 6], &[0, 1], DType::C64).is_none());
    assert!(fft::plan_r2c(&[8, 6], &[1], DType::F32).is_none());
    // a C2R program's other axes must be one pass each (its only scratch is the work
    // buffer); the R2C program's may be two
    assert!(fft::plan_c2r(&[1 << 13, 8], &[0, 1], DType::C64).is_none());
    assert!(fft::plan_r2c(&[1 << 13, 8], &[0, 1], DType::C64).is_some());
    assert!(fft::plan_c2r(&[16, 8], &[0, 1], DType::C64).is_some());
}

/// The unnormalized C2R transform of the half spectrum `spec` into a real array of `shape`
/// over `axes` (the last of them the last axis) by DFTs: inverse DFTs along the other axes,
/// then each line along the last extended by conjugates and transformed back; the real
/// parts (imaginary parts zero).
fn c2r_dft(spec: &[Complex64], shape: &[usize], axes: &[usize]) -> Vec<Complex64> {
    let n = *shape.last().unwrap();
    let mut half_shape = shape.to_vec();
    *half_shape.last_mut().unwrap() = n / 2 + 1;
    let y = dft_axes(spec, &half_shape, &axes[..axes.len() - 1], true);
    let full: Vec<Complex64> = y
        .chunks(n / 2 + 1)
        .flat_map(|l| (0..n).map(move |p| if p <= n / 2 { l[p] } else { l[n - p].conj() }))
        .collect();
    dft_axes(&full, shape, &[shape.len() - 1], true)
        .iter()
        .map(|z| Complex64::new(z.re, 0.0))
        .collect()
}

#[test]
fn real_round_trips_against_dfts() {
    // (shape, axes): the R2C transform's last other axis turns over the half spectrum
    let cases: &[(&[usize], &[usize])] = &[
        (&[12, 16], &[0, 1]),
        (&[9, 10], &[0, 1]),
        (&[4, 6, 9], &[0, 1, 2]),
        (&[6, 5, 8], &[1, 0, 2]),
    ];
    for &(shape, axes) in cases {
        let len: usize = shape.iter().product();
        let x: Vec<Complex64> = input(len, 31)
            .iter()
            .map(|z| Complex64::new(z.re, 0.0))
            .collect();
        let mut spec = halve(&dft_axes(&x, shape, axes, false), shape);
        spec.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = filter(i, *v));
        let want = c2r_dft(&spec, shape, axes);
        for dt in [DType::C64, DType::C128] {
            let p = fft::plan_real_round_trip(shape, axes, dt)
                .unwrap_or_else(|| panic!("{shape:?} {axes:?}"));
            // the R2C pass, one pass per other axis but the turning one once for both
            // transforms, the C2R pass
            let others = axes.len() - 1;
            assert_eq!(p.steps.len(), 2 + 2 * others - 1, "{shape:?}");
            assert_eq!(p.steps.iter().filter(|s| s.pass.round_trip).count(), 1);
            assert_eq!(p.out_len, len);
            let err = match dt {
                DType::C64 => {
                    let x32: Vec<Complex32> =
                        x.iter().map(|z| Complex32::new(z.re as f32, 0.0)).collect();
                    let f: fft::host::Mid<f32> = &filter;
                    rel_err(&host::run_program_mid(&p, &x32, f), &want)
                }
                _ => {
                    let f: fft::host::Mid<f64> = &filter;
                    rel_err(&host::run_program_mid(&p, &x, f), &want)
                }
            };
            let tol = if dt == DType::C64 { 1e-5 } else { 1e-13 };
            assert!(err < tol, "{shape:?} {axes:?} {dt:?}: {err:.3e}");
        }
    }
    // only the halved axis: no pass to turn in
    assert!(fft::plan_real_round_trip(&[4, 16], &[1], DType::C64).is_none());
}
