//! Branch-free elementwise math functions over slices, written so that LLVM vectorizes
//! their loops: the interpreter's F32 and F64 transcendental unary ops, `atan2`, and the
//! rounding ops use them.
//!
//! Every function maps `x[i]` (and `y[i]`) to `out[i]` over the common length of the
//! slices. The loop bodies use plain IEEE arithmetic (no `mul_add`, so the results do not
//! depend on the CPU), bit manipulation through `to_bits`/`from_bits`, and selects instead of
//! branches; no table is indexed by data. On x86-64 each loop is also compiled for AVX-512F
//! and for AVX2, and the widest build the CPU supports is chosen at run time; every build
//! gives the same bits.
//!
//! Method (Cephes / fdlibm / musl algorithms, made branch-free):
//! * `f32`: `exp` is computed in `f32` (Cody-Waite reduction by `ln 2`, Cephes' degree-7
//!   polynomial; below 1 ulp). `atan2` runs in `f32` too (octant reduction with the
//!   difference and sum carried exactly, the multiple of `pi/4` added last in two parts;
//!   below 1.7 ulp), and so do the `sin` and `cos` polynomials (Cephes) on an argument
//!   reduced by `pi/2` in `f64` with a 33 + 53 bit `pi/2` (below 1.6 ulp): on 16 lanes
//!   instead of 8 they take about half the time. The others convert to `f64`, run a short
//!   `f64` kernel accurate to about 2^-34 relative and round once to `f32`, so their error
//!   stays within about 0.5 ulp.
//! * `f64`: fdlibm's kernels (`__kernel_sin/cos`, `k_log1p`, `s_atan`, `e_log2/10`, ...)
//!   with every branch turned into a select; `exp`/`expm1` use a degree-12 polynomial
//!   instead of fdlibm's rational form, `asin`/`acos` one of degree 14 in `x^2`, and `tan`
//!   divides the sine and cosine pairs with a correction step. About 1 ulp (see the tests).
//! * `sin`, `cos`, `tan` of `|x| > 2^20` are recomputed by the C library (in `f64` for the
//!   `f32` functions) in a second pass over the slice, only when the slice has such elements.
//! * Special values follow C99 Annex F / NumPy: NaN in gives NaN out, `sin(-0) = -0`,
//!   `exp(-inf) = 0`, `log(0) = -inf`, `log(x < 0) = NaN`, `tanh(+-inf) = +-1`, `atan2` at
//!   every signed zero / infinity combination as C's `atan2`, and so on.

// The constants keep the digits of their sources (fdlibm, musl, Cephes, or our fits); each
// rounds to the intended float.
#![allow(clippy::excessive_precision)]

// ---------------------------------------------------------------------------------------
// Dispatch and loops
// ---------------------------------------------------------------------------------------

/// Runs `$body` (an expression over the function's arguments `$a`) compiled for AVX-512F
/// or AVX2 when the CPU has it, else compiled for the baseline target.
macro_rules! simd {
    (($($a:ident: $t:ty),*) => $body:expr) => {{
        #[inline(always)]
        fn body($($a: $t),*) {
            $body
        }
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512($($a: $t),*) {
                body($($a),*)
            }
            #[target_feature(enable = "avx2")]
            fn avx2($($a: $t),*) {
                body($($a),*)
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: `avx512` only requires the AVX-512F target feature, which the CPU
                // has (checked just above).
                unsafe { avx512($($a),*) };
                return;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: `avx2` only requires the AVX2 target feature, which the CPU has
                // (checked just above).
                unsafe { avx2($($a),*) };
                return;
            }
        }
        body($($a),*)
    }};
}

/// Defines `pub fn $name(x: &[$t], out: &mut [$t])`: `out[i] = $f(x[i])`, with runtime
/// dispatch. With `big: B, $slow`, elements with `|x| > B` (where `$f` is not accurate) are
/// recomputed with `$slow` in a second pass, if there are any.
///
/// The loops call `$f` (`#[inline(always)]`) directly: passed as an `impl Fn`, LLVM may
/// keep the call through the `Fn` shim of a large function, which kills vectorization.
macro_rules! unary {
    ($(#[$doc:meta])* $name:ident, $t:ty, $f:ident) => {
        $(#[$doc])*
        pub fn $name(x: &[$t], out: &mut [$t]) {
            simd!((x: &[$t], out: &mut [$t]) => {
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = $f(v);
                }
            })
        }
    };
    ($(#[$doc:meta])* $name:ident, $t:ty, $f:ident, big: $big:expr, $slow:path) => {
        $(#[$doc])*
        pub fn $name(x: &[$t], out: &mut [$t]) {
            simd!((x: &[$t], out: &mut [$t]) => {
                let mut any = false;
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = $f(v);
                    any |= v.abs() > $big;
                }
                if any {
                    for (o, &v) in out.iter_mut().zip(x) {
                        if v.abs() > $big {
                            *o = $slow(v);
                        }
                    }
                }
            })
        }
    };
}

/// Defines `pub fn $name(y: &[$t], x: &[$t], out: &mut [$t])`: `out[i] = $f(y[i], x[i])`.
macro_rules! binary {
    ($(#[$doc:meta])* $name:ident, $t:ty, $f:ident) => {
        $(#[$doc])*
        pub fn $name(y: &[$t], x: &[$t], out: &mut [$t]) {
            simd!((y: &[$t], x: &[$t], out: &mut [$t]) => {
                for ((o, &a), &b) in out.iter_mut().zip(y).zip(x) {
                    *o = $f(a, b);
                }
            })
        }
    };
}

// ---------------------------------------------------------------------------------------
// Scalar helpers (all inlined into the loops)
// ---------------------------------------------------------------------------------------

/// `c ? a : b` on values already computed (a select, not a branch).
#[inline(always)]
fn sel<T>(c: bool, a: T, b: T) -> T {
    if c {
        a
    } else {
        b
    }
}

/// `c[0] + x c[1] + x^2 c[2] + ...` (Horner).
#[inline(always)]
fn horner<const N: usize>(x: f64, c: [f64; N]) -> f64 {
    let mut r = c[N - 1];
    let mut i = N - 1;
    while i > 0 {
        i -= 1;
        r = r * x + c[i];
    }
    r
}

/// `horner` in `f32`.
#[inline(always)]
fn horner32<const N: usize>(x: f32, c: [f32; N]) -> f32 {
    let mut r = c[N - 1];
    let mut i = N - 1;
    while i > 0 {
        i -= 1;
        r = r * x + c[i];
    }
    r
}

/// `|x|` with the sign of `s`.
#[inline(always)]
fn copysign64(x: f64, s: f64) -> f64 {
    const SIGN: u64 = 1 << 63;
    f64::from_bits((x.to_bits() & !SIGN) | (s.to_bits() & SIGN))
}

/// 1.5 * 2^52: `(t + MAGIC52) - MAGIC52` rounds `|t| < 2^51` to an integer (ties to
/// even), and the low bits of `(t + MAGIC52).to_bits()` hold that integer.
const MAGIC52: f64 = 6755399441055744.0;
/// 1.5 * 2^23, the same for `f32` and `|t| < 2^22`.
const MAGIC23: f32 = 12582912.0;

const PI: f64 = std::f64::consts::PI;
const PIO2: f64 = std::f64::consts::FRAC_PI_2;
const PIO4: f64 = std::f64::consts::FRAC_PI_4;

// ---------------------------------------------------------------------------------------
// f64 kernels for the f32 functions (relative error about 2^-34 or less)
// ---------------------------------------------------------------------------------------

/// `2/pi`.
const INV_PIO2: f64 = std::f64::consts::FRAC_2_PI;
/// The first 33 bits of `pi/2` (so that `q * PIO2_1` is exact for `q < 2^20`).
const PIO2_1: f64 = 1.57079632673412561417e+00;
/// `pi/2 - PIO2_1`.
const PIO2_1T: f64 = 6.07710050650619224932e-11;

/// `x = q pi/2 + r` for `0 <= x <= 2^20`: returns `r` (`|r| <= pi/4`, error about 2^-67
/// absolute) and the low bits of `q`.
#[inline(always)]
fn reduce_pio2(x: f64) -> (f64, u64) {
    let t = x * INV_PIO2 + MAGIC52;
    let q = t - MAGIC52;
    ((x - q * PIO2_1) - q * PIO2_1T, t.to_bits())
}

/// `sin(r)` for `|r| <= pi/4`, relative error below 2^-37.5 (musl `__sindf`).
#[inline(always)]
fn sin_kernel(r: f64) -> f64 {
    const S: [f64; 4] = [
        -0.166666666416265235595,
        0.0083333293858894631756,
        -0.000198393348360966317347,
        0.0000027183114939898219064,
    ];
    let z = r * r;
    let w = z * z;
    let t = S[2] + z * S[3];
    let s = z * r;
    (r + s * (S[0] + z * S[1])) + s * w * t
}

/// `cos(r)` for `|r| <= pi/4`, absolute error below 2^-34.1 (musl `__cosdf`).
#[inline(always)]
fn cos_kernel(r: f64) -> f64 {
    const C: [f64; 4] = [
        -0.499999997251031003120,
        0.0416666233237390631894,
        -0.00138867637746099294692,
        0.0000243904487962774090654,
    ];
    let z = r * r;
    let w = z * z;
    let t = C[2] + z * C[3];
    ((1.0 + z * C[0]) + w * C[1]) + (w * z) * t
}

/// `ln 2` split for Cody-Waite reduction: `LN2_HI` has 32 bits (so `k * LN2_HI` is exact for
/// `|k| < 2^21`), `LN2_LO = ln 2 - LN2_HI`.
const LN2_HI: f64 = 6.93147180369123816490e-01;
const LN2_LO: f64 = 1.90821492927058770002e-10;
const INV_LN2: f64 = std::f64::consts::LOG2_E;

/// `e^x - 1` for `-60 <= x <= 100` (or NaN), relative error about 2^-37.
#[inline(always)]
fn expm1_kernel(x: f64) -> f64 {
    let t = x * INV_LN2 + MAGIC52;
    let k = t - MAGIC52;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // e^r - 1 = r + r^2/2 + r^3 Q(r), |r| <= ln(2)/2.
    const Q: [f64; 6] = [
        0.16666666748971748,
        0.041666666317009396,
        0.008333290288047033,
        0.0013888946488908413,
        0.00019904216804432872,
        2.48094066027464e-05,
    ];
    let p = r + r * (r * (0.5 + r * horner(r, Q)));
    let ki = (t.to_bits() as i64).wrapping_sub(MAGIC52.to_bits() as i64);
    let scale = f64::from_bits((ki.wrapping_add(1023) as u64) << 52);
    (scale - 1.0) + scale * p
}

/// `log(x)` split as `(k, l)` with `log(x) = k ln 2 + l`, for positive finite `x` whose
/// exponent is normal; `l = log(m)` for `m = x / 2^k` in `[sqrt(1/2), sqrt(2))`, relative
/// error about 2^-37.
#[inline(always)]
fn log_kernel(x: f64) -> (f64, f64) {
    const C: u64 = 0x3fe6_a09e_667f_3bcd; // sqrt(1/2)
    let b = x.to_bits().wrapping_add(0x3ff0_0000_0000_0000 - C);
    // k + 1023 as a float, exactly: 2^52 + (b >> 52) minus 2^52.
    let k = f64::from_bits(0x4330_0000_0000_0000 | (b >> 52)) - (4503599627370496.0 + 1023.0);
    let m = f64::from_bits((b & 0x000f_ffff_ffff_ffff) + C);
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let w = s * s;
    // log(1 + f) = 2 atanh(s) = 2 s + s w R(w), w <= 0.0295.
    const R: [f64; 4] = [
        0.6666666564545662,
        0.40000335190861946,
        0.28537308542114376,
        0.2358215131429968,
    ];
    (k, 2.0 * s + s * (w * horner(w, R)))
}

/// The special cases of every logarithm of `u` (the argument, `1 + x` for `log1p`):
/// `u < 0` or NaN gives NaN, `u = 0` gives `-inf`, `u = inf` gives `inf`, else `r`.
#[inline(always)]
fn log_special(u: f64, r: f64) -> f64 {
    let r = sel(u == f64::INFINITY, u, r);
    sel(u > 0.0, r, sel(u == 0.0, f64::NEG_INFINITY, f64::NAN))
}

/// `atan(s)` for `|s| <= tan(pi/8)`, relative error below 2^-35.
#[inline(always)]
fn atan_kernel(s: f64) -> f64 {
    const P: [f64; 6] = [
        -0.3333333251460833,
        0.1999990518687606,
        -0.14282042076000553,
        0.11045093563376616,
        -0.08478406333532755,
        0.04748275552823959,
    ];
    let z = s * s;
    s + s * (z * horner(z, P))
}

/// `tan(pi/8)`.
const TAN_PIO8: f64 = 0.41421356237309503;

/// `atan2(y, x)` with C's special cases, for `x`, `y` converted from `f32` (relative error
/// below 2^-34).
#[inline(always)]
fn atan2_kernel(y: f64, x: f64) -> f64 {
    let (ax, ay) = (x.abs(), y.abs());
    // atan2(+-inf, +-inf) is atan2(+-1, +-1) (odd multiples of pi/4).
    let both_inf = (ax == f64::INFINITY) & (ay == f64::INFINITY);
    let ax = sel(both_inf, 1.0, ax);
    let ay = sel(both_inf, 1.0, ay);
    // atan(num / den) with num <= den, then atan(a) = pi/2 - atan(1/a) when swapped.
    let swap = ay > ax;
    let num = sel(swap, ax, ay);
    let den = sel(swap, ay, ax);
    // atan(a) = pi/4 + atan((a - 1) / (a + 1)) for a > tan(pi/8); the sum and difference
    // of two floats of close magnitude are exact in f64.
    let mid = num > TAN_PIO8 * den;
    let n = sel(mid, num - den, num);
    let d = sel(mid, num + den, den);
    // d = 0 only for atan2(+-0, +-0) (angle 0 before the quadrant fix-up; n = +0) or a
    // NaN y with x = +-0 (n = NaN).
    let s = sel(d == 0.0, n, n / d);
    let t = atan_kernel(s) + sel(mid, PIO4, 0.0);
    let t = sel(swap, PIO2 - t, t);
    let t = sel(x.is_sign_negative(), PI - t, t);
    copysign64(t, y)
}

/// `asin(s) = s + s z P(z)` for `z = s^2 <= 1/4`, relative error below 2^-35.
#[inline(always)]
fn asin_kernel(s: f64, z: f64) -> f64 {
    const P: [f64; 7] = [
        0.1666666718984735,
        0.07499948155738506,
        0.044660163524449605,
        0.030110254186336848,
        0.02461834761118746,
        0.007469187394362613,
        0.03469288109119229,
    ];
    s + s * (z * horner(z, P))
}

/// `(p, big)` with `asin(|x|) = big ? pi/2 - 2p : p`, for `x` converted from `f32`.
#[inline(always)]
fn asin_parts(x: f64) -> (f64, bool) {
    let a = x.abs();
    let big = a > 0.5;
    // asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2)) for a > 1/2 (NaN for a > 1).
    let z = sel(big, (1.0 - a) * 0.5, a * a);
    let s = sel(big, z.sqrt(), a);
    (asin_kernel(s, z), big)
}

// ---------------------------------------------------------------------------------------
// f32 elementwise functions
// ---------------------------------------------------------------------------------------

/// Beyond this `|x|` the `f32` `sin`, `cos`, `tan` use the C library (the reduction
/// needs `q = round(x 2/pi) < 2^20`), in `f64`, which then rounds once to `f32`.
const TRIG_BIG32: f32 = 1048576.0;

fn sin_big_f32(x: f32) -> f32 {
    (x as f64).sin() as f32
}

fn cos_big_f32(x: f32) -> f32 {
    (x as f64).cos() as f32
}

fn tan_big_f32(x: f32) -> f32 {
    (x as f64).tan() as f32
}

/// `(sin x, cos x)` for `|x| <= 2^20`: the reduction by `pi/2` runs in `f64` (exact to
/// about 2^-67, also near the zeros), the polynomials in `f32` on the reduced `r` rounded
/// to `f32` (within 2 ulp in all, see the tests).
#[inline(always)]
fn sincos1_f32(x: f32) -> (f32, f32) {
    let (r, q) = reduce_pio2(x.abs() as f64);
    let r = r as f32;
    let z = r * r;
    // Cephes sinf / cosf on |r| <= pi/4.
    let s0 = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c0 = (1.0 - 0.5 * z)
        + (z * z) * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    let q = q as u32;
    let odd = q & 1 != 0;
    // sin: negated in quadrants 2 and 3 and for a negative x (sin is odd); cos: cos, -sin,
    // -cos, sin in quadrants 0..3.
    let sflip = ((q & 2) << 30) ^ (x.to_bits() & 0x8000_0000);
    let cflip = (q.wrapping_add(1) & 2) << 30;
    (
        f32::from_bits(sel(odd, c0, s0).to_bits() ^ sflip),
        f32::from_bits(sel(odd, s0, c0).to_bits() ^ cflip),
    )
}

#[inline(always)]
fn sin1_f32(x: f32) -> f32 {
    sincos1_f32(x).0
}

#[inline(always)]
fn cos1_f32(x: f32) -> f32 {
    sincos1_f32(x).1
}

#[inline(always)]
fn tan1_f32(x: f32) -> f32 {
    let (r, q) = reduce_pio2(x.abs() as f64);
    let (s, c) = (sin_kernel(r), cos_kernel(r));
    // tan(r) in even quadrants, -cot(r) in odd ones.
    let odd = q & 1 != 0;
    let v = sel(odd, c, s) / sel(odd, s, c);
    let flip = ((q & 1) << 63) ^ (((x.to_bits() >> 31) as u64) << 63);
    f64::from_bits(v.to_bits() ^ flip) as f32
}

#[inline(always)]
fn exp1_f32(x: f32) -> f32 {
    // exp(x) overflows above 88.73 and rounds to 0 below -103.98; the clamps keep k in
    // [-150, 128] (and keep NaN).
    let x = sel(x > 89.0, 89.0, x);
    let x = sel(x < -104.0, -104.0, x);
    let t = x * std::f32::consts::LOG2_E + MAGIC23;
    let k = t - MAGIC23;
    // Cody-Waite: C1 has 9 bits, so k * C1 is exact.
    const C1: f32 = 0.693359375;
    const C2: f32 = -2.12194440e-4;
    let r = (x - k * C1) - k * C2;
    // Cephes expf: e^r = 1 + r + r^2 P(r), |r| <= ln(2)/2.
    const P: [f32; 6] = [
        5.0000001201e-1,
        1.6666665459e-1,
        4.1665795894e-2,
        8.3334519073e-3,
        1.3981999507e-3,
        1.9875691500e-4,
    ];
    let y = ((r * r) * horner32(r, P) + r) + 1.0;
    // Scale by 2^k as 2^(k/2) 2^(k - k/2): both factors are normal, the first product is
    // exact and the second rounds once (also into the subnormals, or up to inf).
    let ki = (t.to_bits() as i32).wrapping_sub(MAGIC23.to_bits() as i32);
    let k1 = ki >> 1;
    let k2 = ki - k1;
    let p1 = f32::from_bits((k1.wrapping_add(127) as u32) << 23);
    let p2 = f32::from_bits((k2.wrapping_add(127) as u32) << 23);
    y * p1 * p2
}

#[inline(always)]
fn expm1_1_f32(x: f32) -> f32 {
    let c = sel(x > 100.0, 100.0, sel(x < -60.0, -60.0, x));
    let v = expm1_kernel(c as f64) as f32;
    sel(x == 0.0, x, v)
}

#[inline(always)]
fn log1_f32(x: f32) -> f32 {
    let u = x as f64;
    let (k, l) = log_kernel(u);
    log_special(u, k * std::f64::consts::LN_2 + l) as f32
}

#[inline(always)]
fn log2_1_f32(x: f32) -> f32 {
    let u = x as f64;
    let (k, l) = log_kernel(u);
    log_special(u, k + l * std::f64::consts::LOG2_E) as f32
}

#[inline(always)]
fn log10_1_f32(x: f32) -> f32 {
    let u = x as f64;
    let (k, l) = log_kernel(u);
    log_special(
        u,
        k * std::f64::consts::LOG10_2 + l * std::f64::consts::LOG10_E,
    ) as f32
}

#[inline(always)]
fn log1p1_f32(x: f32) -> f32 {
    // 1 + x is exact in f64 for |x| >= 2^-29 (and log1p(x) rounds to x below that).
    let u = 1.0 + x as f64;
    let (k, l) = log_kernel(u);
    let v = log_special(u, k * std::f64::consts::LN_2 + l) as f32;
    sel(x.abs() < 1.0 / 536870912.0, x, v) // 2^-29
}

#[inline(always)]
fn atan1_f32(x: f32) -> f32 {
    atan2_kernel(x as f64, 1.0) as f32
}

/// `pi/4 = P4A + P4B` to about 2^-45: `P4A` has 8 significant bits and `P4B` 24, so
/// `m * P4A` is exact and `m * P4B` nearly so for the multipliers `m <= 4` used.
const P4A: f32 = 0.78515625;
const P4B: f32 = 2.4191339616663754e-4;

/// `atan2(y, x)` in `f32` arithmetic with C's special cases (within 2 ulp, see the tests).
///
/// The angle is `m pi/4 + sigma atan(s)` with `|s| <= tan(pi/8)`, an integer `0 <= m <= 4`
/// and a sign `sigma`, from the octant of `(x, y)`; the multiple of `pi/4` is added last,
/// in two parts, so that only the final addition rounds at the result's scale.
#[inline(always)]
fn atan2_1_f32(y: f32, x: f32) -> f32 {
    let (ax, ay) = (x.abs(), y.abs());
    // atan2(+-inf, +-inf) is atan2(+-1, +-1) (odd multiples of pi/4).
    let both_inf = (ax == f32::INFINITY) & (ay == f32::INFINITY);
    let ax = sel(both_inf, 1.0, ax);
    let ay = sel(both_inf, 1.0, ay);
    // atan(num / den) with num <= den, then atan(a) = pi/2 - atan(1/a) when swapped.
    let swap = ay > ax;
    let num = sel(swap, ax, ay);
    let den = sel(swap, ay, ax);
    // num + den must not overflow: huge pairs are scaled by 1/4 (exact for a normal num;
    // one that becomes subnormal has a ratio far below f32's smallest angle anyway); tiny
    // pairs are scaled by 2^24 (exact) so that the rounding errors below stay normal.
    let huge = den > 4.2535296e37; // 2^125
    let tiny = den < 1.9721523e-31; // 2^-102
    let scale = sel(huge, 0.25, sel(tiny, 16777216.0, 1.0));
    let num = num * scale;
    let den = den * scale;
    // atan(a) = pi/4 + atan((a - 1) / (a + 1)) for a > tan(pi/8).
    // The difference and sum are carried with their rounding errors (`num <= den`, so
    // Fast2Sum is exact), and the quotient is corrected by them: without that, their
    // roundings would add up to more than 2 ulp just above tan(pi/8).
    let mid = num > 0.41421357 * den;
    let (dif, sum) = (num - den, den + num);
    let dif_lo = num - (dif + den);
    let sum_lo = num - (sum - den);
    let n = sel(mid, dif, num);
    let d = sel(mid, sum, den);
    let n_lo = sel(mid, dif_lo, 0.0);
    let d_lo = sel(mid, sum_lo, 0.0);
    // d = 0 only for atan2(+-0, +-0) (angle 0 before the quadrant fix-up; n = +0) or a
    // NaN y with x = +-0 (n = NaN).
    let q = n / d;
    let s = sel(d == 0.0, n, q + (n_lo - q * d_lo) / d);
    const P: [f32; 6] = [
        -0.3333333251460833,
        0.1999990518687606,
        -0.14282042076000553,
        0.11045093563376616,
        -0.08478406333532755,
        0.04748275552823959,
    ];
    let z = s * s;
    let t = s + s * (z * horner32(z, P));
    // m and sigma: pi/4 + t when mid, then pi/2 - (.) when swapped, then pi - (.) for a
    // negative x.
    let m = sel(mid, 1.0f32, 0.0);
    let neg1 = swap;
    let m = sel(swap, 2.0 - m, m);
    let negx = x.is_sign_negative();
    let m = sel(negx, 4.0 - m, m);
    let t = f32::from_bits(t.to_bits() ^ (((neg1 ^ negx) as u32) << 31));
    let r = m * P4A + (m * P4B + t);
    f32::from_bits((r.to_bits() & 0x7fff_ffff) | (y.to_bits() & 0x8000_0000))
}

#[inline(always)]
fn asin1_f32(x: f32) -> f32 {
    let (p, big) = asin_parts(x as f64);
    copysign64(sel(big, PIO2 - 2.0 * p, p), x as f64) as f32
}

#[inline(always)]
fn acos1_f32(x: f32) -> f32 {
    let x = x as f64;
    let (p, big) = asin_parts(x);
    // acos(x) = pi/2 - asin(x); for |x| > 1/2: 2p (x > 0) or pi - 2p (x < 0).
    let neg = x < 0.0;
    let v = sel(
        big,
        sel(neg, PI - 2.0 * p, 2.0 * p),
        PIO2 - copysign64(p, x),
    );
    v as f32
}

#[inline(always)]
fn sinh1_f32(x: f32) -> f32 {
    let a = (x as f64).abs();
    let a = sel(a > 100.0, 100.0, a);
    let t = expm1_kernel(a);
    // sinh(a) = (e^a - e^-a) / 2 = (t + t / (t + 1)) / 2.
    copysign64(0.5 * (t + t / (t + 1.0)), x as f64) as f32
}

#[inline(always)]
fn cosh1_f32(x: f32) -> f32 {
    let a = (x as f64).abs();
    let a = sel(a > 100.0, 100.0, a);
    let e = expm1_kernel(a) + 1.0;
    (0.5 * (e + 1.0 / e)) as f32
}

#[inline(always)]
fn tanh1_f32(x: f32) -> f32 {
    let a = (x as f64).abs();
    // tanh(a) rounds to 1 in f32 from a = 9.01 on.
    let a = sel(a > 20.0, 20.0, a);
    let t = expm1_kernel(-2.0 * a);
    copysign64(-t / (t + 2.0), x as f64) as f32
}

unary!(
    /// `out[i] = sin(x[i])` (f32).
    sin_f32, f32, sin1_f32, big: TRIG_BIG32, sin_big_f32
);

unary!(
    /// `out[i] = cos(x[i])` (f32).
    cos_f32, f32, cos1_f32, big: TRIG_BIG32, cos_big_f32
);

/// `s[i] = sin(x[i])`, `c[i] = cos(x[i])` (f32) with one range reduction per element: the
/// same values as [`sin_f32`] and [`cos_f32`].
pub fn sincos_f32(x: &[f32], s: &mut [f32], c: &mut [f32]) {
    simd!((x: &[f32], s: &mut [f32], c: &mut [f32]) => {
        let mut any = false;
        for ((so, co), &v) in s.iter_mut().zip(c.iter_mut()).zip(x) {
            (*so, *co) = sincos1_f32(v);
            any |= v.abs() > TRIG_BIG32;
        }
        if any {
            for ((so, co), &v) in s.iter_mut().zip(c.iter_mut()).zip(x) {
                if v.abs() > TRIG_BIG32 {
                    *so = sin_big_f32(v);
                    *co = cos_big_f32(v);
                }
            }
        }
    })
}

/// `out[i] = exp(z[i])` for complex64: `e^x (cos y + i sin y)` with `e^x` from the `f32`
/// `exp` and `cos y`, `sin y` from one shared `f64` reduction and kernels, each part's
/// product formed in `f64` and rounded once. Elements outside `-100 <= x <= 88`,
/// `|y| <= 2^20` (or with a NaN) are recomputed by `slow` (C99 `cexp` with its special
/// values) in a second pass, only when there are any.
pub fn exp_c32(
    z: &[num_complex::Complex<f32>],
    out: &mut [num_complex::Complex<f32>],
    slow: fn(num_complex::Complex<f32>) -> num_complex::Complex<f32>,
) {
    type C32 = num_complex::Complex<f32>;
    simd!((z: &[C32], out: &mut [C32], slow: fn(C32) -> C32) => {
        let mut any = false;
        for (o, v) in out.iter_mut().zip(z) {
            let (x, y) = (v.re, v.im);
            let ok = (-100.0..=88.0).contains(&x) && y.abs() <= TRIG_BIG32;
            let e = exp1_f32(sel(ok, x, 0.0)) as f64;
            let (r, q) = reduce_pio2(sel(ok, y, 0.0).abs() as f64);
            let (s0, c0) = (sin_kernel(r), cos_kernel(r));
            let sv = sel(q & 1 != 0, c0, s0);
            let sflip = ((q & 2) << 62) ^ (((y.to_bits() >> 31) as u64) << 63);
            let sv = f64::from_bits(sv.to_bits() ^ sflip);
            let cv = sel(q & 1 != 0, s0, c0);
            let cv = f64::from_bits(cv.to_bits() ^ ((q.wrapping_add(1) & 2) << 62));
            *o = num_complex::Complex::new((e * cv) as f32, (e * sv) as f32);
            any |= !ok;
        }
        if any {
            for (o, &v) in out.iter_mut().zip(z) {
                if !((-100.0..=88.0).contains(&v.re) && v.im.abs() <= TRIG_BIG32) {
                    *o = slow(v);
                }
            }
        }
    })
}

unary!(
    /// `out[i] = tan(x[i])` (f32).
    tan_f32, f32, tan1_f32, big: TRIG_BIG32, tan_big_f32
);

unary!(
    /// `out[i] = exp(x[i])` (f32).
    exp_f32, f32, exp1_f32
);
unary!(
    /// `out[i] = exp(x[i]) - 1` (f32).
    expm1_f32, f32, expm1_1_f32
);
unary!(
    /// `out[i] = ln(x[i])` (f32).
    log_f32, f32, log1_f32
);
unary!(
    /// `out[i] = ln(1 + x[i])` (f32).
    log1p_f32, f32, log1p1_f32
);
unary!(
    /// `out[i] = log2(x[i])` (f32).
    log2_f32, f32, log2_1_f32
);
unary!(
    /// `out[i] = log10(x[i])` (f32).
    log10_f32, f32, log10_1_f32
);
unary!(
    /// `out[i] = atan(x[i])` (f32).
    atan_f32, f32, atan1_f32
);
unary!(
    /// `out[i] = asin(x[i])` (f32).
    asin_f32, f32, asin1_f32
);
unary!(
    /// `out[i] = acos(x[i])` (f32).
    acos_f32, f32, acos1_f32
);
unary!(
    /// `out[i] = sinh(x[i])` (f32).
    sinh_f32, f32, sinh1_f32
);
unary!(
    /// `out[i] = cosh(x[i])` (f32).
    cosh_f32, f32, cosh1_f32
);
unary!(
    /// `out[i] = tanh(x[i])` (f32).
    tanh_f32, f32, tanh1_f32
);

binary!(
    /// `out[i] = atan2(y[i], x[i])` (f32), with C's special cases.
    atan2_f32, f32, atan2_1_f32
);

#[inline(always)]
fn hypot1_f32(x: f32, y: f32) -> f32 {
    // Both squares are exact in f64 and their sum is within an f64 rounding of the true
    // value, so the square root rounds to the correctly rounded f32 result (barring a
    // double-rounding tie, within 1 ulp); f64 cannot overflow here. C's special case: an
    // infinite part gives +inf even beside a NaN.
    let (a, b) = (x as f64, y as f64);
    let r = (a * a + b * b).sqrt() as f32;
    sel(x.is_infinite() || y.is_infinite(), f32::INFINITY, r)
}

binary!(
    /// `out[i] = hypot(y[i], x[i])` (f32), with C's special cases.
    hypot_f32, f32, hypot1_f32
);

#[inline(always)]
fn hypot1_f64(x: f64, y: f64) -> f64 {
    x.hypot(y)
}

binary!(
    /// `out[i] = hypot(y[i], x[i])` (f64): libm's `hypot` per element.
    hypot_f64, f64, hypot1_f64
);

/// `out[i] = |z[i]|` (complex64), NumPy's `abs`: `hypot(re, im)` as [`hypot_f32`].
pub fn abs_c32(z: &[num_complex::Complex<f32>], out: &mut [f32]) {
    type C32 = num_complex::Complex<f32>;
    simd!((z: &[C32], out: &mut [f32]) => {
        for (o, v) in out.iter_mut().zip(z) {
            *o = hypot1_f32(v.re, v.im);
        }
    })
}

// ---------------------------------------------------------------------------------------
// f64 kernels (fdlibm / musl algorithms made branch-free, about 1 ulp)
// ---------------------------------------------------------------------------------------

/// `2^k` for `-1022 <= k <= 1023`.
#[inline(always)]
fn pow2(k: i64) -> f64 {
    f64::from_bits((k.wrapping_add(1023) as u64) << 52)
}

/// `y 2^k` for `|k| <= 2046` and `y` near 1: two normal factors, the first product exact,
/// the second rounding once (into the subnormals or up to inf where it must).
#[inline(always)]
fn scale2(y: f64, k: i64) -> f64 {
    let k1 = k >> 1;
    y * pow2(k1) * pow2(k - k1)
}

/// Cody-Waite reduction for the exponentials: `x = k ln 2 + (hi - lo)` and
/// `e^(hi - lo) - 1 = (hi - lo) + u`, with `|hi - lo| <= ln(2)/2`, `k * LN2_HI` exact and
/// `u` accurate to about 2^-63 absolute. Valid for `|x| < 2^20` (or NaN).
#[inline(always)]
fn exp_reduce(x: f64) -> (i64, f64, f64, f64) {
    let t = x * INV_LN2 + MAGIC52;
    let k = t - MAGIC52;
    let hi = x - k * LN2_HI;
    let lo = k * LN2_LO;
    let r = hi - lo;
    // e^r - 1 - r - r^2/2 = r^3 Q(r), absolute error below 2^-63.9 for |r| <= 0.3476.
    const Q: [f64; 10] = [
        0.16666666666666685,
        0.04166666666666667,
        0.008333333333316107,
        0.0013888888888884158,
        0.00019841269898640865,
        2.4801587323648627e-05,
        2.7557232638734997e-06,
        2.7557276416908106e-07,
        2.5112802303247477e-08,
        2.091343264534595e-09,
    ];
    let u = r * r * (0.5 + r * horner(r, Q));
    let ki = (t.to_bits() as i64).wrapping_sub(MAGIC52.to_bits() as i64);
    (ki, hi, lo, u)
}

/// `e^(hi - lo) = 1 + hi + (u - lo)` with `1 + hi` kept exact (Fast2Sum, `|hi| < 1`).
#[inline(always)]
fn exp_mantissa(hi: f64, lo: f64, u: f64) -> f64 {
    let s = 1.0 + hi;
    let e = (1.0 - s) + hi;
    s + (e + (u - lo))
}

/// `e^x - 1 = 2^k (1 + p) - 1` for the reduction of `x`, for `k <= 1000`:
/// `(2^k - 1) + 2^k hi` kept exact (Fast2Sum), plus `2^k (u - lo)`; returned as a pair
/// `(s, e)` with `|e|` below about an ulp of `s`.
#[inline(always)]
fn expm1_pair(ki: i64, hi: f64, lo: f64, u: f64) -> (f64, f64) {
    let sc = pow2(sel(ki > 1000, 1000, ki));
    let a = sc - 1.0;
    let b = sc * hi;
    let s = a + b;
    let e = (a - s) + b;
    (s, e + sc * (u - lo))
}

/// `expm1_pair` rounded.
#[inline(always)]
fn expm1_parts(ki: i64, hi: f64, lo: f64, u: f64) -> f64 {
    let (s, e) = expm1_pair(ki, hi, lo, u);
    s + e
}

#[inline(always)]
fn exp1_f64(x: f64) -> f64 {
    // exp overflows above 709.79 and rounds to 0 below -745.14.
    let x = sel(x > 710.0, 710.0, sel(x < -746.0, -746.0, x));
    let (ki, hi, lo, u) = exp_reduce(x);
    scale2(exp_mantissa(hi, lo, u), ki)
}

#[inline(always)]
fn expm1_1_f64(x: f64) -> f64 {
    // expm1(x) rounds to -1 below -37.5.
    let c = sel(x > 710.0, 710.0, sel(x < -45.0, -45.0, x));
    let (ki, hi, lo, u) = exp_reduce(c);
    let big = scale2(exp_mantissa(hi, lo, u), ki);
    let v = sel(ki > 1000, big, expm1_parts(ki, hi, lo, u));
    sel(x == 0.0, x, v)
}

/// `log(x) = k ln 2 + log(1 + f)` for positive `x` (subnormals included): returns `k`, `f`
/// (`1 + f` in `[sqrt(1/2), sqrt(2))`, exact), `hfsq = f^2 / 2` and
/// `r = s (hfsq + R)`, so that `log(1 + f) = f - hfsq + r` (fdlibm `k_log1p`).
#[inline(always)]
fn log_reduce(x: f64) -> (f64, f64, f64, f64) {
    let sub = x < f64::MIN_POSITIVE;
    let xs = sel(sub, x * 18014398509481984.0, x); // 2^54
    const C: u64 = 0x3fe6_a09e_667f_3bcd; // sqrt(1/2)
    let b = xs.to_bits().wrapping_add(0x3ff0_0000_0000_0000 - C);
    let k = f64::from_bits(0x4330_0000_0000_0000 | (b >> 52)) - (4503599627370496.0 + 1023.0);
    let k = k - sel(sub, 54.0, 0.0);
    let f = f64::from_bits((b & 0x000f_ffff_ffff_ffff) + C) - 1.0;
    let (hfsq, r) = log1p_kernel(f);
    (k, f, hfsq, r)
}

/// `(f^2 / 2, s (f^2/2 + R(s^2)))` with `s = f / (2 + f)`: `log(1 + f) = f - hfsq + r`
/// (fdlibm, polynomial error below 2^-58.45).
#[inline(always)]
fn log1p_kernel(f: f64) -> (f64, f64) {
    const LG: [f64; 7] = [
        6.666666666666735130e-01,
        3.999999999940941908e-01,
        2.857142874366239149e-01,
        2.222219843214978396e-01,
        1.818357216161805012e-01,
        1.531383769920937332e-01,
        1.479819860511658591e-01,
    ];
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
    let t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
    let hfsq = 0.5 * f * f;
    (hfsq, s * (hfsq + (t1 + t2)))
}

#[inline(always)]
fn log1_f64(x: f64) -> f64 {
    let (k, f, hfsq, r) = log_reduce(x);
    let v = k * LN2_HI - ((hfsq - (r + k * LN2_LO)) - f);
    log_special(x, v)
}

/// `(hi, lo)` with `log(1 + f) = hi + lo`, `hi` holding 21 bits (FreeBSD `e_log2.c`).
#[inline(always)]
fn log_hi_lo(f: f64, hfsq: f64, r: f64) -> (f64, f64) {
    let hi = f64::from_bits((f - hfsq).to_bits() & 0xffff_ffff_0000_0000);
    (hi, (f - hi) - hfsq + r)
}

#[inline(always)]
fn log2_1_f64(x: f64) -> f64 {
    const IVLN2HI: f64 = 1.44269504072144627571e+00;
    const IVLN2LO: f64 = 1.67517131648865118353e-10;
    let (k, f, hfsq, r) = log_reduce(x);
    let (hi, lo) = log_hi_lo(f, hfsq, r);
    let val_hi = hi * IVLN2HI;
    let val_lo = (lo + hi) * IVLN2LO + lo * IVLN2HI;
    let w = k + val_hi;
    let val_lo = val_lo + ((k - w) + val_hi);
    log_special(x, val_lo + w)
}

#[inline(always)]
fn log10_1_f64(x: f64) -> f64 {
    const IVLN10HI: f64 = 4.34294481878168880939e-01;
    const IVLN10LO: f64 = 2.50829467116452752298e-11;
    const LOG10_2HI: f64 = 3.01029995663611771306e-01;
    const LOG10_2LO: f64 = 3.69423907715893078616e-13;
    let (k, f, hfsq, r) = log_reduce(x);
    let (hi, lo) = log_hi_lo(f, hfsq, r);
    let val_hi = hi * IVLN10HI;
    let y2 = k * LOG10_2HI;
    let val_lo = k * LOG10_2LO + (lo + hi) * IVLN10LO + lo * IVLN10HI;
    let w = y2 + val_hi;
    let val_lo = val_lo + ((y2 - w) + val_hi);
    log_special(x, val_lo + w)
}

#[inline(always)]
fn log1p1_f64(x: f64) -> f64 {
    // u = 1 + x and its rounding error c (TwoSum): log1p(x) = log(u) + c/u.
    let u = 1.0 + x;
    let bb = u - 1.0;
    let c = (1.0 - (u - bb)) + (x - bb);
    let (k, f, hfsq, r) = log_reduce(u);
    let c = sel(u > 0.0, c / u, 0.0);
    let v = k * LN2_HI - ((hfsq - (r + (k * LN2_LO + c))) - f);
    sel(x == 0.0, x, log_special(u, v))
}

/// `(s, e)` with `s = a + b` rounded and `a + b = s + e` exactly (Knuth's TwoSum).
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// `x = q pi/2 + y0 + y1` for `0 <= x <= 2^20` (`|y0| <= pi/4` about, `y1` the tail of
/// `y0`): musl's `__rem_pio2` medium case with 33-bit parts of `pi/2`, always taking its
/// three rounds and keeping their rounding errors (TwoSum) instead of branching.
#[inline(always)]
fn reduce_pio2_f64(x: f64) -> (f64, f64, u64) {
    const PIO2_2: f64 = 6.07710050630396597660e-11;
    const PIO2_3: f64 = 2.02226624871116645580e-21;
    const PIO2_3T: f64 = 8.47842766036889956997e-32;
    let t = x * INV_PIO2 + MAGIC52;
    let q = t - MAGIC52;
    // Exact: q * PIO2_1 is exact and within a factor 2 of x (Sterbenz).
    let r1 = x - q * PIO2_1;
    let (r2, e2) = two_sum(r1, -(q * PIO2_2));
    let (r3, e3) = two_sum(r2, -(q * PIO2_3));
    let tail = (e2 + e3) - q * PIO2_3T;
    let y0 = r3 + tail;
    (y0, (r3 - y0) + tail, t.to_bits())
}

/// `sin(x + y) = hi + lo` (not normalized) for `|x| <= pi/4`, `|y|` below half an ulp of
/// `x` (fdlibm `__kernel_sin`, whose result is `hi + lo`).
#[inline(always)]
fn sin_kernel_f64(x: f64, y: f64) -> (f64, f64) {
    const S: [f64; 6] = [
        -1.66666666666666324348e-01,
        8.33333333332248946124e-03,
        -1.98412698298579493134e-04,
        2.75573137070700676789e-06,
        -2.50507602534068634195e-08,
        1.58969099521155010221e-10,
    ];
    let z = x * x;
    let w = z * z;
    let r = S[1] + z * (S[2] + z * S[3]) + z * w * (S[4] + z * S[5]);
    let v = z * x;
    (x, -((z * (0.5 * y - v * r) - y) - v * S[0]))
}

/// `cos(x + y) = hi + lo` (not normalized) for `|x| <= pi/4` (fdlibm `__kernel_cos`).
#[inline(always)]
fn cos_kernel_f64(x: f64, y: f64) -> (f64, f64) {
    const C: [f64; 6] = [
        4.16666666666666019037e-02,
        -1.38888888888741095749e-03,
        2.48015872894767294178e-05,
        -2.75573143513906633035e-07,
        2.08757232129817482790e-09,
        -1.13596475577881948265e-11,
    ];
    let z = x * x;
    let w = z * z;
    let r = z * (C[0] + z * (C[1] + z * C[2])) + w * w * (C[3] + z * (C[4] + z * C[5]));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    (w, ((1.0 - w) - hz) + (z * r - x * y))
}

/// `(hi, lo)` with `hi = a + b` rounded and `a + b = hi + lo` exactly, for `|a| >= |b|`
/// (Fast2Sum).
#[inline(always)]
fn fast_two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    (s, b - (s - a))
}

/// `(p, e)` with `p = a b` rounded and `a b = p + e` exactly (Dekker, without FMA).
#[inline(always)]
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    const SPLIT: f64 = 134217729.0; // 2^27 + 1
    let p = a * b;
    let (ca, cb) = (SPLIT * a, SPLIT * b);
    let (ah, bh) = (ca - (ca - a), cb - (cb - b));
    let (al, bl) = (a - ah, b - bh);
    (p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
}

/// `(nh + nl) / (dh + dl)` for normalized pairs, to about 2^-100 relative plus the final
/// rounding: one division and a correction by the exact remainder.
#[inline(always)]
fn div_pair(nh: f64, nl: f64, dh: f64, dl: f64) -> f64 {
    let inv = 1.0 / dh;
    let q = nh * inv;
    let (ph, pl) = two_prod(q, dh);
    let rem = (((nh - ph) - pl) + nl) - q * dl;
    q + rem * inv
}

/// Beyond this `|x|` the `f64` `sin`, `cos`, `tan` use the C library.
const TRIG_BIG64: f64 = 1048576.0;

#[inline(always)]
fn sin1_f64(x: f64) -> f64 {
    let (y0, y1, q) = reduce_pio2_f64(x.abs());
    let (sh, sl) = sin_kernel_f64(y0, y1);
    let (ch, cl) = cos_kernel_f64(y0, y1);
    let v = sel(q & 1 != 0, ch + cl, sh + sl);
    let flip = ((q & 2) << 62) ^ (x.to_bits() & (1 << 63));
    f64::from_bits(v.to_bits() ^ flip)
}

#[inline(always)]
fn cos1_f64(x: f64) -> f64 {
    let (y0, y1, q) = reduce_pio2_f64(x.abs());
    let (sh, sl) = sin_kernel_f64(y0, y1);
    let (ch, cl) = cos_kernel_f64(y0, y1);
    let v = sel(q & 1 != 0, sh + sl, ch + cl);
    f64::from_bits(v.to_bits() ^ ((q.wrapping_add(1) & 2) << 62))
}

#[inline(always)]
fn tan1_f64(x: f64) -> f64 {
    let (y0, y1, q) = reduce_pio2_f64(x.abs());
    let (sh, sl) = sin_kernel_f64(y0, y1);
    let (ch, cl) = cos_kernel_f64(y0, y1);
    let (sh, sl) = fast_two_sum(sh, sl);
    let (ch, cl) = fast_two_sum(ch, cl);
    // tan(r) = sin / cos in even quadrants, -cot(r) = -cos / sin in odd ones.
    let odd = q & 1 != 0;
    let v = div_pair(
        sel(odd, ch, sh),
        sel(odd, cl, sl),
        sel(odd, sh, ch),
        sel(odd, sl, cl),
    );
    // tan(+-0) = +-0 (the pair division gives 0 / 1 + 0).
    let v = sel(y0 == 0.0, y0, v);
    let flip = ((q & 1) << 63) ^ (x.to_bits() & (1 << 63));
    f64::from_bits(v.to_bits() ^ flip)
}

/// `atan` of the reduced argument: `hi - ((t P(t^2) - lo) - t)` (fdlibm `s_atan.c`).
#[inline(always)]
fn atan_poly_f64(t: f64, hi: f64, lo: f64) -> f64 {
    const AT: [f64; 11] = [
        3.33333333333329318027e-01,
        -1.99999999998764832476e-01,
        1.42857142725034663711e-01,
        -1.11111104054623557880e-01,
        9.09088713343650656196e-02,
        -7.69187620504482999495e-02,
        6.66107313738753120669e-02,
        -5.83357013379057348645e-02,
        4.97687799461593236017e-02,
        -3.65315727442169155270e-02,
        1.62858201153657823623e-02,
    ];
    let z = t * t;
    let w = z * z;
    let s1 = z * (AT[0] + w * (AT[2] + w * (AT[4] + w * (AT[6] + w * (AT[8] + w * AT[10])))));
    let s2 = w * (AT[1] + w * (AT[3] + w * (AT[5] + w * (AT[7] + w * AT[9]))));
    hi - ((t * (s1 + s2) - lo) - t)
}

/// `atan(a)` for `a >= 0` (or NaN): fdlibm's five ranges, chosen by selects.
#[inline(always)]
fn atan_abs_f64(a: f64) -> f64 {
    const HI: [f64; 4] = [
        4.63647609000806093515e-01,
        PIO4,
        9.82793723247329054082e-01,
        PIO2,
    ];
    const LO: [f64; 4] = [
        2.26987774529616870924e-17,
        3.06161699786838301793e-17,
        1.39033110312309984516e-17,
        6.12323399573676603587e-17,
    ];
    // [0, 7/16): t = a; [7/16, 11/16): (2a - 1)/(2 + a), atan(1/2); [11/16, 19/16):
    // (a - 1)/(a + 1), atan(1); [19/16, 39/16): (a - 3/2)/(1 + 3a/2), atan(3/2);
    // above (and NaN): -1/a, pi/2.
    let r0 = a < 0.4375;
    let r1 = a < 0.6875;
    let r2 = a < 1.1875;
    let r3 = a < 2.4375;
    let n = sel(
        r0,
        a,
        sel(r1, 2.0 * a - 1.0, sel(r2, a - 1.0, sel(r3, a - 1.5, -1.0))),
    );
    let d = sel(
        r0,
        1.0,
        sel(r1, 2.0 + a, sel(r2, a + 1.0, sel(r3, 1.0 + 1.5 * a, a))),
    );
    let hi = sel(
        r0,
        0.0,
        sel(r1, HI[0], sel(r2, HI[1], sel(r3, HI[2], HI[3]))),
    );
    let lo = sel(
        r0,
        0.0,
        sel(r1, LO[0], sel(r2, LO[1], sel(r3, LO[2], LO[3]))),
    );
    atan_poly_f64(n / d, hi, lo)
}

#[inline(always)]
fn atan1_f64(x: f64) -> f64 {
    copysign64(atan_abs_f64(x.abs()), x)
}

#[inline(always)]
fn atan2_1_f64(y: f64, x: f64) -> f64 {
    const PI_LO: f64 = 1.2246467991473532072e-16;
    let (ax, ay) = (x.abs(), y.abs());
    // atan(|y| / |x|): the ratio may round to 0 or overflow to inf, where atan is exact
    // enough (0 / 0 and inf / inf are the angles 0 and pi/4).
    let both_inf = (ax == f64::INFINITY) & (ay == f64::INFINITY);
    let both_zero = (ax == 0.0) & (ay == 0.0);
    let s = sel(both_inf, 1.0, sel(both_zero, 0.0, ay / ax));
    let t = atan_abs_f64(s);
    let t = sel(x.is_sign_negative(), (PI - t) + PI_LO, t);
    copysign64(t, y)
}

/// `asin(s) = s + s r` with `r = z P(z)`, `z = s^2 <= 1/4` (relative error below 2^-59).
#[inline(always)]
fn asin_r_f64(z: f64) -> f64 {
    const P: [f64; 13] = [
        0.16666666666666763,
        0.07499999999970261,
        0.04464285717512161,
        0.03038194268358522,
        0.02237221566104888,
        0.017351600080612817,
        0.013980961566234774,
        0.011397775166856642,
        0.010786533177919833,
        0.003683027679259391,
        0.021763531681734807,
        -0.02107733580935371,
        0.03267691576316294,
    ];
    z * horner(z, P)
}

const PIO2_HI: f64 = PIO2;
const PIO2_LO: f64 = 6.12323399573676603587e-17;
const PIO4_HI: f64 = PIO4;

/// `(s, df, c)` with `sqrt(z) = s = df + c` to about 2^-100: `df` is `s` with 21 bits, so
/// `df^2` is exact and `c = (z - df^2) / (s + df)` (fdlibm).
#[inline(always)]
fn sqrt_split(z: f64) -> (f64, f64, f64) {
    let s = z.sqrt();
    let df = f64::from_bits(s.to_bits() & 0xffff_ffff_0000_0000);
    (s, df, (z - df * df) / (s + df))
}

#[inline(always)]
fn asin1_f64(x: f64) -> f64 {
    let a = x.abs();
    // |x| < 1/2: a + a r(a^2).
    let small = a + a * asin_r_f64(a * a);
    // |x| >= 1/2: asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2)).
    let t = (1.0 - a) * 0.5;
    let r = asin_r_f64(t);
    let (s, df, c) = sqrt_split(t);
    let near1 = PIO2_HI - (2.0 * (s + s * r) - PIO2_LO);
    let p = 2.0 * s * r - (PIO2_LO - 2.0 * c);
    let q = PIO4_HI - 2.0 * df;
    let mid = PIO4_HI - (p - q);
    let v = sel(a < 0.5, small, sel(a >= 0.975, near1, mid));
    copysign64(v, x)
}

#[inline(always)]
fn acos1_f64(x: f64) -> f64 {
    let a = x.abs();
    // |x| < 1/2: pi/2 - (x + x r).
    let small = PIO2_HI - (x - (PIO2_LO - x * asin_r_f64(x * x)));
    let z = (1.0 - a) * 0.5;
    let r = asin_r_f64(z);
    let (s, df, c) = sqrt_split(z);
    // x <= -1/2: pi - 2 (s + s r); x >= 1/2: 2 (df + (s r + c)).
    let neg = PI - 2.0 * (s + (r * s - PIO2_LO));
    let pos = 2.0 * (df + (r * s + c));
    let pos = sel(x == 1.0, 0.0, pos);
    sel(a < 0.5, small, sel(x < 0.0, neg, pos))
}

#[inline(always)]
fn sinh1_f64(x: f64) -> f64 {
    let a = x.abs();
    // sinh overflows above 710.48: e^a / 2 = 2^(k - 1) (1 + p).
    let a = sel(a > 711.0, 711.0, a);
    let (ki, hi, lo, u) = exp_reduce(a);
    let half_e = scale2(exp_mantissa(hi, lo, u), ki - 1);
    let t = expm1_parts(ki, hi, lo, u);
    let small = 0.5 * (2.0 * t - t * t / (t + 1.0));
    let mid = 0.5 * (t + t / (t + 1.0));
    let v = sel(a < 1.0, small, sel(a < 22.0, mid, half_e));
    copysign64(v, x)
}

#[inline(always)]
fn cosh1_f64(x: f64) -> f64 {
    let a = x.abs();
    let a = sel(a > 711.0, 711.0, a);
    let (ki, hi, lo, u) = exp_reduce(a);
    let half_e = scale2(exp_mantissa(hi, lo, u), ki - 1);
    // |x| < ln(2)/2 (k = 0): 1 + t^2 / (2 (1 + t)), t = expm1(a) = hi + u.
    let t = hi + u;
    let w = 1.0 + t;
    let small = 1.0 + (t * t) / (w + w);
    let mid = half_e + 0.25 / half_e;
    sel(a < 0.34657359027997264, small, sel(a < 22.0, mid, half_e))
}

#[inline(always)]
fn tanh1_f64(x: f64) -> f64 {
    let a = x.abs();
    // tanh rounds to 1 from 19.1 on.
    let a = sel(a > 22.0, 22.0, a);
    // tanh(a) = t / (t + 2) = 1 - 2 / (t + 2) with t = expm1(2a) >= 0, where the relative
    // error of t is not amplified.
    let (ki, hi, lo, u) = exp_reduce(2.0 * a);
    let (th, tl) = expm1_pair(ki, hi, lo, u);
    let (th, tl) = fast_two_sum(th, tl);
    let t = th + tl;
    // t / (t + 2) with t and t + 2 as pairs (t >= 0, so 2 + t keeps the error of 2 + th).
    let (dh, dl) = two_sum(2.0, th);
    let (dh, dl) = fast_two_sum(dh, dl + tl);
    let small = div_pair(th, tl, dh, dl);
    let v = sel(a >= 1.0, 1.0 - 2.0 / (t + 2.0), small);
    copysign64(v, x)
}

unary!(
    /// `out[i] = sin(x[i])` (f64).
    sin_f64, f64, sin1_f64, big: TRIG_BIG64, f64::sin
);

unary!(
    /// `out[i] = cos(x[i])` (f64).
    cos_f64, f64, cos1_f64, big: TRIG_BIG64, f64::cos
);

unary!(
    /// `out[i] = tan(x[i])` (f64).
    tan_f64, f64, tan1_f64, big: TRIG_BIG64, f64::tan
);

unary!(
    /// `out[i] = exp(x[i])` (f64).
    exp_f64, f64, exp1_f64
);
unary!(
    /// `out[i] = exp(x[i]) - 1` (f64).
    expm1_f64, f64, expm1_1_f64
);
unary!(
    /// `out[i] = ln(x[i])` (f64).
    log_f64, f64, log1_f64
);
unary!(
    /// `out[i] = ln(1 + x[i])` (f64).
    log1p_f64, f64, log1p1_f64
);
unary!(
    /// `out[i] = log2(x[i])` (f64).
    log2_f64, f64, log2_1_f64
);
unary!(
    /// `out[i] = log10(x[i])` (f64).
    log10_f64, f64, log10_1_f64
);
unary!(
    /// `out[i] = atan(x[i])` (f64).
    atan_f64, f64, atan1_f64
);
unary!(
    /// `out[i] = asin(x[i])` (f64).
    asin_f64, f64, asin1_f64
);
unary!(
    /// `out[i] = acos(x[i])` (f64).
    acos_f64, f64, acos1_f64
);
unary!(
    /// `out[i] = sinh(x[i])` (f64).
    sinh_f64, f64, sinh1_f64
);
unary!(
    /// `out[i] = cosh(x[i])` (f64).
    cosh_f64, f64, cosh1_f64
);
unary!(
    /// `out[i] = tanh(x[i])` (f64).
    tanh_f64, f64, tanh1_f64
);

binary!(
    /// `out[i] = atan2(y[i], x[i])` (f64), with C's special cases.
    atan2_f64, f64, atan2_1_f64
);

// ---------------------------------------------------------------------------------------
// Rounding (exact; a single instruction from SSE4.1 on, a C library call without it)
// ---------------------------------------------------------------------------------------

macro_rules! rounding {
    ($($name:ident, $one:ident, $t:ident, $m:ident, $what:literal;)*) => {
        $(
            #[inline(always)]
            fn $one(x: $t) -> $t {
                x.$m()
            }
            unary!(
                #[doc = concat!("`out[i] = ", $what, "(x[i])` (", stringify!($t), ").")]
                $name, $t, $one
            );
        )*
    };
}

rounding!(
    floor_f32, floor1_f32, f32, floor, "floor";
    ceil_f32, ceil1_f32, f32, ceil, "ceil";
    trunc_f32, trunc1_f32, f32, trunc, "trunc";
    rint_f32, rint1_f32, f32, round_ties_even, "round half to even";
    floor_f64, floor1_f64, f64, floor, "floor";
    ceil_f64, ceil1_f64, f64, ceil, "ceil";
    trunc_f64, trunc1_f64, f64, trunc, "trunc";
    rint_f64, rint1_f64, f64, round_ties_even, "round half to even";
);
