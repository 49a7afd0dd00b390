//! Host executor of generated FFT programs: the same passes, radix sequence, stage
//! structure, butterflies and rounded twiddle tables as the rendered CUDA C, in f32 for
//! `C64` and f64 for `C128`, one line at a time. It tests the algorithm on the CPU. Real
//! buffers (an R2C program's input, a C2R program's output) are complex ones whose real
//! parts hold the values (the imaginary parts of an input are ignored, of an output zero).

use super::{odd_radix_constants, twiddles, Buf, FftPass, PassArgs, Program, RealIo};
use num_complex::Complex;
use std::ops::{Add, Mul, Neg, Sub};

/// The real type of a complex element the executor computes in (`f32` for `C64`, `f64` for
/// `C128`).
pub trait Real:
    Copy
    + Default
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + 'static
{
    /// `v` rounded to this type.
    fn from_f64(v: f64) -> Self;
    /// Not a number.
    fn nan() -> Self;
}

impl Real for f32 {
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn nan() -> f32 {
        f32::NAN
    }
}

impl Real for f64 {
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn nan() -> f64 {
        f64::NAN
    }
}

type C<T> = Complex<T>;

fn add<T: Real>(a: C<T>, b: C<T>) -> C<T> {
    C::new(a.re + b.re, a.im + b.im)
}

fn sub<T: Real>(a: C<T>, b: C<T>) -> C<T> {
    C::new(a.re - b.re, a.im - b.im)
}

/// The complex product as the renderer writes it.
fn mul<T: Real>(a: C<T>, t: C<T>) -> C<T> {
    C::new(a.re * t.re - a.im * t.im, a.re * t.im + a.im * t.re)
}

/// The twiddle table of length `n` rounded to `T`.
fn table<T: Real>(n: usize) -> Vec<C<T>> {
    twiddles(n)
        .into_iter()
        .map(|(re, im)| C::new(T::from_f64(re), T::from_f64(im)))
        .collect()
}

/// `z * (-i)` forward, `z * i` inverse (the radix-4 rotation).
fn rot<T: Real>(z: C<T>, inverse: bool) -> C<T> {
    if inverse {
        C::new(-z.im, z.re)
    } else {
        C::new(z.im, -z.re)
    }
}

fn bfly2<T: Real>(v: &mut [C<T>]) {
    let (a, b) = (v[0], v[1]);
    v[0] = add(a, b);
    v[1] = sub(a, b);
}

fn bfly4<T: Real>(v: &mut [C<T>], inverse: bool) {
    let t0 = add(v[0], v[2]);
    let t1 = sub(v[0], v[2]);
    let t2 = add(v[1], v[3]);
    let t3 = rot(sub(v[1], v[3]), inverse);
    v[0] = add(t0, t2);
    v[2] = sub(t0, t2);
    v[1] = add(t1, t3);
    v[3] = sub(t1, t3);
}

fn bfly8<T: Real>(v: &mut [C<T>], inverse: bool) {
    let c = T::from_f64(std::f64::consts::FRAC_1_SQRT_2);
    let mut e = [v[0], v[2], v[4], v[6]];
    let mut o = [v[1], v[3], v[5], v[7]];
    bfly4(&mut e, inverse);
    bfly4(&mut o, inverse);
    let (a, b) = (o[1].re, o[1].im);
    o[1] = if inverse {
        C::new(c * (a - b), c * (a + b))
    } else {
        C::new(c * (a + b), c * (b - a))
    };
    o[2] = rot(o[2], inverse);
    let (a, b) = (o[3].re, o[3].im);
    o[3] = if inverse {
        C::new(-(c * (a + b)), c * (a - b))
    } else {
        C::new(c * (b - a), -(c * (a + b)))
    };
    for k in 0..4 {
        v[k] = add(e[k], o[k]);
        v[k + 4] = sub(e[k], o[k]);
    }
}

/// The DFT of odd prime length `r` by symmetric pairs (see `cuda::fft` for the same
/// sums in the same order).
fn bfly_odd<T: Real>(v: &mut [C<T>], r: usize, consts: &[(T, T)], inverse: bool) {
    let h = (r - 1) / 2;
    let mut s = [C::<T>::default(); 3];
    let mut d = [C::<T>::default(); 3];
    for m in 1..=h {
        s[m - 1] = add(v[m], v[r - m]);
        d[m - 1] = sub(v[m], v[r - m]);
    }
    let x0 = v[0];
    let mut y0 = x0;
    for sm in &s[..h] {
        y0 = add(y0, *sm);
    }
    v[0] = y0;
    for k in 1..=h {
        let mut a = x0;
        let mut b = C::<T>::default();
        for m in 1..=h {
            let (cos, sin) = odd_const(consts, r, k * m);
            a = add(a, C::new(cos * s[m - 1].re, cos * s[m - 1].im));
            b = add(b, C::new(sin * d[m - 1].re, sin * d[m - 1].im));
        }
        // forward: y_k = a - i b, y_{r-k} = a + i b; inverse: the other way round
        let minus = C::new(a.re + b.im, a.im - b.re);
        let plus = C::new(a.re - b.im, a.im + b.re);
        let (yk, yrk) = if inverse {
            (plus, minus)
        } else {
            (minus, plus)
        };
        v[k] = yk;
        v[r - k] = yrk;
    }
}

/// `(cos, sin)` of `2 pi km / r` from the constants of `1..=(r-1)/2`.
pub(crate) fn odd_const<T: Real>(consts: &[(T, T)], r: usize, km: usize) -> (T, T) {
    let i = km % r;
    if i <= (r - 1) / 2 {
        consts[i - 1]
    } else {
        let (c, s) = consts[r - i - 1];
        (c, -s)
    }
}

/// One butterfly of radix `r`.
fn butterfly<T: Real>(v: &mut [C<T>], r: usize, consts: &[(T, T)], inverse: bool) {
    match r {
        2 => bfly2(v),
        4 => bfly4(v, inverse),
        8 => bfly8(v, inverse),
        _ => bfly_odd(v, r, consts, inverse),
    }
}

/// `t` or its conjugate.
fn dir<T: Real>(t: C<T>, inverse: bool) -> C<T> {
    if inverse {
        C::new(t.re, -t.im)
    } else {
        t
    }
}

/// Transforms one line in place by the Stockham stages of `pass` (`scratch` holds `n`).
fn stages<T: Real>(pass: &FftPass, tw: &[C<T>], x: &mut Vec<C<T>>, scratch: &mut Vec<C<T>>) {
    let n = pass.n as usize;
    let mut ns = 1;
    let mut v = [C::<T>::default(); 8];
    for &r in &pass.radices {
        let r = r as usize;
        let consts: Vec<(T, T)> = if r % 2 == 1 {
            odd_radix_constants(r)
                .into_iter()
                .map(|(c, s)| (T::from_f64(c), T::from_f64(s)))
                .collect()
        } else {
            Vec::new()
        };
        let m = n / r;
        for j in 0..m {
            for q in 0..r {
                v[q] = x[j + q * m];
            }
            if ns > 1 {
                let k = (j % ns) * (n / (ns * r));
                for (q, vq) in v.iter_mut().enumerate().take(r).skip(1) {
                    *vq = mul(*vq, dir(tw[q * k], pass.inverse));
                }
            }
            butterfly(&mut v[..r], r, &consts, pass.inverse);
            let d = (j / ns) * ns * r + j % ns;
            for q in 0..r {
                scratch[d + q * ns] = v[q];
            }
        }
        std::mem::swap(x, scratch);
        ns *= r;
    }
}

/// The middle work of a [`FftPass::round_trip`] pass: element `(i, v)` of the first
/// transform's output at linear index `i` to the second's input.
pub type Mid<'a, T> = &'a dyn Fn(usize, C<T>) -> C<T>;

/// Runs one pass from `src` (`None`: in place) into `dst`.
pub fn run_pass<T: Real>(pass: &FftPass, args: &PassArgs, src: Option<&[C<T>]>, dst: &mut [C<T>]) {
    run_pass_mid(pass, args, src, dst, &|_, v| v)
}

/// [`run_pass`] with the middle work of a round-trip pass.
fn run_pass_mid<T: Real>(
    pass: &FftPass,
    args: &PassArgs,
    src: Option<&[C<T>]>,
    dst: &mut [C<T>],
    mid: Mid<T>,
) {
    let n = pass.n as usize;
    let back = FftPass {
        inverse: !pass.inverse,
        ..pass.clone()
    };
    let tw = table::<T>(n);
    let big = if pass.twiddle_in {
        table::<T>(args.big_n as usize)
    } else {
        Vec::new()
    };
    let (mut x, mut scratch) = (vec![C::<T>::default(); n], vec![C::<T>::default(); n]);
    let [na, nb, nc] = args.lines;
    // the support's ranges (gathered lines, masked loads)
    let k = args.keep.map(|b| b as usize);
    let w0 = (k[1] - k[0]) as i64;
    let kept = |p: usize| (k[0]..k[1]).contains(&p) || (k[2]..k[3]).contains(&p);
    for la in 0..na as i64 {
        for lb in 0..nb as i64 {
            for lc in 0..nc as i64 {
                let lc = match (pass.gathered, lc < w0) {
                    (false, _) => lc,
                    (true, true) => k[0] as i64 + lc,
                    (true, false) => k[2] as i64 + lc - w0,
                };
                let base = |m: &super::LineMap| la * m.dist[0] + lb * m.dist[1] + lc * m.dist[2];
                let (ib, ob) = (base(&args.input), base(&args.output));
                let half = n / 2;
                for (p, xp) in x.iter_mut().enumerate() {
                    if pass.masked && !kept(p) {
                        *xp = C::default();
                        continue;
                    }
                    // a C2R pass reads the half spectrum, the rest as conjugates
                    let q = match pass.real == RealIo::C2R && p > half {
                        true => n - p,
                        false => p,
                    };
                    let at = (ib + q as i64 * args.input.stride) as usize;
                    let mut val = match src {
                        Some(s) => s[at],
                        None => dst[at],
                    };
                    match pass.real {
                        RealIo::R2C => val.im = T::default(),
                        RealIo::C2R if q != p => val.im = -val.im,
                        _ => {}
                    }
                    if pass.twiddle_in {
                        val = mul(val, dir(big[p * lb as usize], pass.inverse));
                    }
                    *xp = val;
                }
                stages(pass, &tw, &mut x, &mut scratch);
                if pass.round_trip {
                    for (k, xk) in x.iter_mut().enumerate() {
                        *xk = mid((ob + k as i64 * args.output.stride) as usize, *xk);
                    }
                    stages(&back, &tw, &mut x, &mut scratch);
                }
                for (k, xk) in x.iter().enumerate().take(pass.real.out_len(n)) {
                    let v = match pass.real {
                        RealIo::C2R => C::new(xk.re, T::default()),
                        _ => *xk,
                    };
                    dst[(ob + k as i64 * args.output.stride) as usize] = v;
                }
            }
        }
    }
}

/// Runs `prog` on `input` (C order, the shape it was planned for) and returns the output.
/// The output and work buffers start as NaN, as a device's pooled memory holds anything: a
/// pass reading an element no pass wrote shows in the result.
pub fn run_program<T: Real>(prog: &Program, input: &[C<T>]) -> Vec<C<T>> {
    run_program_mid(prog, input, &|_, v| v)
}

/// [`run_program`] with `mid` the middle work of its round-trip pass
/// ([`super::plan_round_trip`]).
pub fn run_program_mid<T: Real>(prog: &Program, input: &[C<T>], mid: Mid<T>) -> Vec<C<T>> {
    run_program_mids(prog, input, &[mid])
}

/// [`run_program`] of a chain of round trips ([`super::plan_chain`]): its `j`-th
/// round-trip pass computes `mids[j]` (a pass without one passes values through).
pub fn run_program_mids<T: Real>(prog: &Program, input: &[C<T>], mids: &[Mid<T>]) -> Vec<C<T>> {
    let nan = C::new(T::nan(), T::nan());
    let mut out = vec![nan; prog.out_len];
    let mut work = vec![nan; prog.work_len];
    let mut trips = 0;
    let same: Mid<T> = &|_, v| v;
    for s in &prog.steps {
        let (p, a) = (&s.pass, &s.args);
        let mid = match p.round_trip {
            true => {
                trips += 1;
                mids.get(trips - 1).copied().unwrap_or(same)
            }
            false => same,
        };
        match (s.src, s.dst) {
            (Buf::Input, Buf::Output) => run_pass_mid(p, a, Some(input), &mut out, mid),
            (Buf::Input, Buf::Work) => run_pass_mid(p, a, Some(input), &mut work, mid),
            (Buf::Output, Buf::Output) => run_pass_mid(p, a, None, &mut out, mid),
            (Buf::Output, Buf::Work) => run_pass_mid(p, a, Some(&out), &mut work, mid),
            (Buf::Work, Buf::Output) => run_pass_mid(p, a, Some(&work), &mut out, mid),
            (Buf::Work, Buf::Work) => run_pass_mid(p, a, None, &mut work, mid),
            (_, Buf::Input) => panic!("a program never writes its input"),
        }
    }
    out
}
