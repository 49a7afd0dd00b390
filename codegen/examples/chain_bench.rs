//! Times the interpreter on the BENCH.md `chain` kernel and on single transcendental ops,
//! over 2^24 f32 elements, single-threaded (or `--threads N`); prints ns per element (the
//! thread's CPU time when single-threaded, so that a busy machine does not inflate it).
//!
//! `cargo run --release -p lazyfuse-codegen --example chain_bench -- [--threads N] [--n LOG2]
//! [--reps R] [--chain-only]`; `-- --direct` instead times each `vmath` function on an
//! in-cache tile next to the C library called element by element.

use lazyfuse_codegen::ir::{Builder, Inst, Kernel};
use lazyfuse_codegen::{interp, BinaryOp, DType, LaunchArgs, Scalar, Slice, SliceMut, UnaryOp};
use std::time::Instant;

/// A contiguous load of input `input` at the linear index.
fn load(b: &mut Builder, input: u32, d: DType) -> u32 {
    let ix = b.push(Inst::Index, DType::I64);
    b.push(
        Inst::Load {
            input,
            index: ix,
            guard: None,
        },
        d,
    )
}

/// `r=sqrt(x*x+y*y); t=atan2(y,x); z=r*cos(t)+exp(-0.5*r)*sin(t); where(z>0, z, 0.1*z)+1`,
/// the scalars as params (as the library passes them): -0.5, 0, 0.1, 1.
fn chain_kernel() -> Kernel {
    use BinaryOp::*;
    let mut b = Builder::new(1);
    let (ix, iy) = (b.input(DType::F32), b.input(DType::F32));
    let x = load(&mut b, ix, DType::F32);
    let y = load(&mut b, iy, DType::F32);
    let (mhalf, zero, tenth, one) = (
        b.param(DType::F32),
        b.param(DType::F32),
        b.param(DType::F32),
        b.param(DType::F32),
    );
    let xx = b.binary(Mul, x, x);
    let yy = b.binary(Mul, y, y);
    let s = b.binary(Add, xx, yy);
    let r = b.unary(UnaryOp::Sqrt, s);
    let t = b.binary(Atan2, y, x);
    let c = b.unary(UnaryOp::Cos, t);
    let rc = b.binary(Mul, r, c);
    let hr = b.binary(Mul, mhalf, r);
    let e = b.unary(UnaryOp::Exp, hr);
    let sn = b.unary(UnaryOp::Sin, t);
    let es = b.binary(Mul, e, sn);
    let z = b.binary(Add, rc, es);
    let pos = b.binary(Gt, z, zero);
    let tz = b.binary(Mul, tenth, z);
    let w = b.select(pos, z, tz);
    let o = b.binary(Add, w, one);
    b.store(o);
    b.finish()
}

fn unary_kernel(op: UnaryOp) -> Kernel {
    let mut b = Builder::new(1);
    let i = b.input(DType::F32);
    let x = load(&mut b, i, DType::F32);
    let r = b.unary(op, x);
    b.store(r);
    b.finish()
}

fn binary_kernel(op: BinaryOp) -> Kernel {
    let mut b = Builder::new(1);
    let (i, j) = (b.input(DType::F32), b.input(DType::F32));
    let x = load(&mut b, i, DType::F32);
    let y = load(&mut b, j, DType::F32);
    let r = b.binary(op, x, y);
    // A comparison is stored through a cast back to F32.
    let r = b.cast(r, DType::F32);
    b.store(r);
    b.finish()
}

/// Nanoseconds this thread has run on a CPU (Linux `/proc/thread-self/schedstat`).
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Fastest of `reps` runs (seconds; the machine may be shared) of `k` over all of `out`, split over `threads` threads.
fn time(
    k: &Kernel,
    ins: &[&[f32]],
    params: &[Scalar],
    out: &mut [f32],
    threads: usize,
    reps: usize,
) -> f64 {
    let n = out.len();
    let args = LaunchArgs {
        shape: vec![n].into(),
        params: params.to_vec().into(),
    };
    let inputs: Vec<Slice<'_>> = ins.iter().map(|s| Slice::F32(s)).collect();
    let mut ts = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let chunk = n.div_ceil(threads);
        if threads == 1 {
            // On a shared machine, the thread's CPU time is the better measure.
            let c0 = cpu_ns();
            let mut outs = [SliceMut::F32(&mut out[..])];
            interp::run(k, &inputs, &mut outs, &args, 0).expect("run");
            let wall = t0.elapsed().as_secs_f64();
            // (schedstat is updated at scheduler ticks: only for long runs.)
            ts.push(match (c0, cpu_ns()) {
                (Some(a), Some(b)) if wall > 0.05 => (b - a) as f64 * 1e-9,
                _ => wall,
            });
            continue;
        }
        std::thread::scope(|sc| {
            for (c, o) in out.chunks_mut(chunk).enumerate() {
                let (inputs, args, k) = (&inputs, &args, k);
                sc.spawn(move || {
                    let mut outs = [SliceMut::F32(o)];
                    interp::run(k, inputs, &mut outs, args, c * chunk).expect("run");
                });
            }
        });
        ts.push(t0.elapsed().as_secs_f64());
    }
    ts.sort_by(f64::total_cmp);
    ts[0]
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let opt = |name: &str, def: usize| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|p| argv.get(p + 1))
            .map_or(def, |v| v.parse().expect("number"))
    };
    if argv.iter().any(|a| a == "--direct") {
        direct();
        return;
    }
    let threads = opt("--threads", 1);
    let n = 1usize << opt("--n", 24);
    let reps = opt("--reps", 5);
    // Deterministic pseudo-normal inputs (sum of uniforms), as the benchmark's randn.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut randn = || (0..4).map(|_| next()).sum::<f32>() * 1.7 - 3.4;
    let x: Vec<f32> = (0..n).map(|_| randn()).collect();
    let y: Vec<f32> = (0..n).map(|_| randn()).collect();
    let mut out = vec![0.0f32; n];
    let per = |t: f64| t / n as f64 * 1e9;
    let params = [
        Scalar::F32(-0.5),
        Scalar::F32(0.0),
        Scalar::F32(0.1),
        Scalar::F32(1.0),
    ];
    let t = time(&chain_kernel(), &[&x, &y], &params, &mut out, threads, reps);
    println!(
        "chain  n=2^{} threads={threads}: {:8.2} ms  {:6.3} ns/elem  (checksum {:.6e})",
        n.trailing_zeros(),
        t * 1e3,
        per(t),
        out.iter().map(|&v| v as f64).sum::<f64>()
    );
    if argv.iter().any(|a| a == "--chain-only") {
        return;
    }
    use UnaryOp::*;
    let xs: Vec<f32> = x.iter().map(|&v| v.abs() * 3.0 + 1e-3).collect();
    for op in [
        Sqrt, Exp, Expm1, Log, Log1p, Log2, Log10, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh,
        Tanh, Floor, Round, Abs, Reciprocal,
    ] {
        let inp: Vec<f32> = match op {
            Asin | Acos => x.iter().map(|&v| (v * 0.3).clamp(-1.0, 1.0)).collect(),
            Log | Log1p | Log2 | Log10 => xs.clone(),
            _ => x.clone(),
        };
        let t = time(&unary_kernel(op), &[&inp], &[], &mut out, threads, reps);
        println!("{:8} {:6.3} ns/elem", op.name(), per(t));
    }
    for op in [
        BinaryOp::Atan2,
        BinaryOp::Add,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Lt,
        BinaryOp::Mod,
    ] {
        let t = time(&binary_kernel(op), &[&y, &x], &[], &mut out, threads, reps);
        println!("{:8} {:6.3} ns/elem", op.name(), per(t));
    }
}

/// Best ns per element of `f` over an in-cache tile of `x`.
fn per_elem<T: Copy + Default>(x: &[T], f: &dyn Fn(&[T], &mut [T])) -> f64 {
    let mut o = vec![T::default(); x.len()];
    let mut best = f64::MAX;
    for _ in 0..30 {
        let t0 = Instant::now();
        for _ in 0..50 {
            f(std::hint::black_box(x), &mut o);
        }
        best = best.min(t0.elapsed().as_secs_f64() / 50.0);
    }
    best / x.len() as f64 * 1e9
}

/// ns per element of every `vmath` function called directly on an in-cache tile, next to
/// the C library called element by element (what the interpreter did before).
fn direct() {
    use lazyfuse_codegen::vmath as v;
    let n = 2048;
    let x32: Vec<f32> = (0..n).map(|k| (k as f32 * 0.37).sin() * 3.0).collect();
    let p32: Vec<f32> = x32.iter().map(|v| v.abs() + 1e-3).collect();
    let u32_: Vec<f32> = x32.iter().map(|v| v / 3.0).collect();
    let x64: Vec<f64> = x32.iter().map(|&v| v as f64).collect();
    let p64: Vec<f64> = p32.iter().map(|&v| v as f64).collect();
    let u64_: Vec<f64> = u32_.iter().map(|&v| v as f64).collect();
    type V32 = fn(&[f32], &mut [f32]);
    type V64 = fn(&[f64], &mut [f64]);
    /// Name, vmath f32, libm f32, vmath f64, libm f64, input domain.
    type Row = (&'static str, V32, fn(f32) -> f32, V64, fn(f64) -> f64, u8);
    #[rustfmt::skip]
    let fs: [Row; 15] = [
        ("sin", v::sin_f32, f32::sin, v::sin_f64, f64::sin, 0),
        ("cos", v::cos_f32, f32::cos, v::cos_f64, f64::cos, 0),
        ("tan", v::tan_f32, f32::tan, v::tan_f64, f64::tan, 0),
        ("exp", v::exp_f32, f32::exp, v::exp_f64, f64::exp, 0),
        ("expm1", v::expm1_f32, f32::exp_m1, v::expm1_f64, f64::exp_m1, 0),
        ("log", v::log_f32, f32::ln, v::log_f64, f64::ln, 1),
        ("log1p", v::log1p_f32, f32::ln_1p, v::log1p_f64, f64::ln_1p, 1),
        ("log2", v::log2_f32, f32::log2, v::log2_f64, f64::log2, 1),
        ("log10", v::log10_f32, f32::log10, v::log10_f64, f64::log10, 1),
        ("atan", v::atan_f32, f32::atan, v::atan_f64, f64::atan, 0),
        ("asin", v::asin_f32, f32::asin, v::asin_f64, f64::asin, 2),
        ("acos", v::acos_f32, f32::acos, v::acos_f64, f64::acos, 2),
        ("sinh", v::sinh_f32, f32::sinh, v::sinh_f64, f64::sinh, 0),
        ("cosh", v::cosh_f32, f32::cosh, v::cosh_f64, f64::cosh, 0),
        ("tanh", v::tanh_f32, f32::tanh, v::tanh_f64, f64::tanh, 0),
    ];
    println!("ns/elem on a tile of {n}: vmath f32 | libm f32 | vmath f64 | libm f64");
    for (name, f32v, f32s, f64v, f64s, dom) in fs {
        let (a, b) = match dom {
            1 => (&p32, &p64),
            2 => (&u32_, &u64_),
            _ => (&x32, &x64),
        };
        println!(
            "{name:6} {:6.3} {:6.3} {:6.3} {:6.3}",
            per_elem(a, &f32v),
            per_elem(a, &|x: &[f32], o: &mut [f32]| {
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = f32s(v)
                }
            }),
            per_elem(b, &f64v),
            per_elem(b, &|x: &[f64], o: &mut [f64]| {
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = f64s(v)
                }
            }),
        );
    }
    let y32: Vec<f32> = x32.iter().rev().copied().collect();
    let y64: Vec<f64> = x64.iter().rev().copied().collect();
    let mut o32 = vec![0.0f32; n];
    let mut o64 = vec![0.0f64; n];
    let t = |f: &mut dyn FnMut()| {
        let mut best = f64::MAX;
        for _ in 0..30 {
            let t0 = Instant::now();
            for _ in 0..50 {
                f();
            }
            best = best.min(t0.elapsed().as_secs_f64() / 50.0);
        }
        best / n as f64 * 1e9
    };
    println!(
        "atan2  {:6.3} {:6.3} {:6.3} {:6.3}",
        t(&mut || v::atan2_f32(&y32, std::hint::black_box(&x32), &mut o32)),
        t(&mut || {
            for ((o, &a), &b) in o32.iter_mut().zip(&y32).zip(std::hint::black_box(&x32)) {
                *o = a.atan2(b)
            }
        }),
        t(&mut || v::atan2_f64(&y64, std::hint::black_box(&x64), &mut o64)),
        t(&mut || {
            for ((o, &a), &b) in o64.iter_mut().zip(&y64).zip(std::hint::black_box(&x64)) {
                *o = a.atan2(b)
            }
        }),
    );
}
