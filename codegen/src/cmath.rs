//! Complex elementary functions on the host with C99 Annex G special values (NumPy's) and
//! no spurious overflow or cancellation at large or near-singular finite arguments. The CUDA
//! renderer emits the same algorithms, statement for statement (`cuda/cmath.rs`).
//!
//! Algorithms (one set, both precisions):
//! * `exp`, `sinh`, `cosh`: `exp(x) * c` for `x` past the overflow threshold is
//!   `(exp(x - K ln 2) * c) * 2^K`, so a finite result stays finite (`exp(709.9+0.5j)`).
//! * `tanh`: Kahan's formula; `sign(x) + 4 sin y cos y e^{-2|x|} i` once `e^{-2|x|}` is
//!   below the precision. `sin`, `cos`, `tan` are `sinh`, `cosh`, `tanh` of `iz`, rotated.
//! * `sqrt`: `sqrt((|x| + |z|) / 2)` with the argument scaled by 1/4 or 2^p near the ends of
//!   the range.
//! * `log`: `log|z|` by `log(hypot)` with scaling near overflow and underflow, and by
//!   `log1p(x^2 + y^2 - 1) / 2` (products exact through FMA) for `|z|` near 1.
//! * `asin`, `acos`: Kahan's formulas (signed zeros pick the side of the branch cuts); past
//!   `2^(p/2)` in magnitude `asin z = -i log(2iz)`, which is also the limit at infinity.
//! * `atan`: `atan2(2x, 1 - |z|^2) / 2 + i log1p(4|y| / (x^2 + (1 - |y|)^2)) / 4` with
//!   `1 - |z|^2` factored around the larger part; `±pi/2 + i y / |z|^2` for huge `|z|`.
//! * `expm1`, `log1p` (not in Annex G): NumPy's formulas, with the same scaling, and
//!   `log1p` by `log1p(2x + x^2 + y^2) / 2` near 0.

macro_rules! cmath {
    (
        $m:ident, $c:ident, $t:ident,
        exp_hi = $exp_hi:expr, k = $k:expr, two_kp = $two_kp:expr, two_p = $two_p:expr,
        ln2_hi = $ln2_hi:expr, ln2_lo = $ln2_lo:expr,
        cosh_small = $cosh_small:expr,
        sqrt_big = $sqrt_big:expr, sqrt_small = $sqrt_small:expr,
        sqrt_up = $sqrt_up:expr, sqrt_down = $sqrt_down:expr,
        log_big = $log_big:expr, log_up = $log_up:expr, log_up_p = $log_up_p:expr,
        asin_large = $asin_large:expr, atan_huge = $atan_huge:expr
    ) => {
        #[doc = concat!("Complex functions on `", stringify!($c), "` (see the module docs).")]
        pub mod $m {
            use num_complex::$c as C;
            use std::$t::consts::{FRAC_PI_2, LN_2};

            type R = $t;
            const NAN: R = R::NAN;
            const INF: R = R::INFINITY;
            /// At and above this, `exp(x)` is computed scaled ([`exp_mul`]).
            const EXP_HI: R = $exp_hi;
            /// `K ln 2` in two parts; the first is exact (`ln2_hi` has trailing zero bits).
            const KLN2_HI: R = $k * $ln2_hi;
            const KLN2_LO: R = $k * $ln2_lo;
            /// `2^(K - P)` and `2^P`: a factor `c` is scaled up by `2^P` before it meets
            /// `exp(x - K ln 2)`, so a subnormal `c` keeps its digits.
            const TWO_KP: R = $two_kp;
            const TWO_P: R = $two_p;
            /// Below this `|x|`, `sinh x` and `cosh x` are used directly.
            const COSH_SMALL: R = $cosh_small;
            const SQRT_BIG: R = $sqrt_big;
            const SQRT_SMALL: R = $sqrt_small;
            const SQRT_UP: R = $sqrt_up;
            const SQRT_DOWN: R = $sqrt_down;
            /// Above this, `hypot` is taken of the halved parts.
            const LOG_BIG: R = $log_big;
            /// Below the smallest normal, parts are scaled up by `2^P` (`LOG_UP`).
            const LOG_UP: R = $log_up;
            const LOG_UP_LN: R = $log_up_p * LN_2;
            /// Past this magnitude `asin`/`acos` use `log(2 |z|)`.
            const ASIN_LARGE: R = $asin_large;
            /// Past this magnitude `atan` uses `±pi/2 + i y / |z|^2`.
            const ATAN_HUGE: R = $atan_huge;

            /// `exp(x) * c * s` for finite `x` and a power of two `s`, overflowing only
            /// when the result does: past [`EXP_HI`] as `(exp(x - K ln 2) (c 2^P)) (2^(K-P) s)`.
            #[inline]
            fn exp_mul(x: R, c: R, s: R) -> R {
                if x < EXP_HI {
                    return x.exp() * s * c;
                }
                let r = (x - KLN2_HI) - KLN2_LO;
                (r.exp() * (c * TWO_P)) * (TWO_KP * s)
            }

            /// `log(hypot(x, y))` without overflow or underflow, accurate near `|z| = 1`;
            /// an infinite part gives `inf` (also with a NaN), else a NaN gives NaN.
            pub(crate) fn log_abs(x: R, y: R) -> R {
                let (ax, ay) = (x.abs(), y.abs());
                if ax == INF || ay == INF {
                    return INF;
                }
                if ax.is_nan() || ay.is_nan() {
                    return NAN;
                }
                let (hi, lo) = if ax >= ay { (ax, ay) } else { (ay, ax) };
                if hi > LOG_BIG {
                    return (hi * 0.5).hypot(lo * 0.5).ln() + LN_2;
                }
                if hi < R::MIN_POSITIVE {
                    if hi == 0.0 {
                        return -INF;
                    }
                    return (hi * LOG_UP).hypot(lo * LOG_UP).ln() - LOG_UP_LN;
                }
                let h = hi.hypot(lo);
                if (0.71..=1.73).contains(&h) {
                    // x^2 + y^2 - 1 = (p1 - 1) + p2 + e1 + e2, p1 - 1 exact here
                    let p1 = hi * hi;
                    let e1 = hi.mul_add(hi, -p1);
                    let p2 = lo * lo;
                    let e2 = lo.mul_add(lo, -p2);
                    return 0.5 * (((p1 - 1.0) + p2) + (e1 + e2)).ln_1p();
                }
                h.ln()
            }

            /// C99 `cexp` (NumPy's special values).
            pub fn exp(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if y == 0.0 {
                    return C::new(x.exp(), y);
                }
                if x.is_nan() {
                    return C::new(NAN, NAN);
                }
                if x.is_infinite() {
                    if !y.is_finite() {
                        return if x < 0.0 {
                            C::new(0.0, (0.0 as R).copysign(y))
                        } else {
                            C::new(x, NAN)
                        };
                    }
                    let e = if x < 0.0 { 0.0 } else { x };
                    return C::new(e * y.cos(), e * y.sin());
                }
                if !y.is_finite() {
                    return C::new(NAN, NAN);
                }
                C::new(exp_mul(x, y.cos(), 1.0), exp_mul(x, y.sin(), 1.0))
            }

            /// C99 `clog`: `log|z| + i atan2(y, x)`.
            pub fn log(z: C) -> C {
                C::new(log_abs(z.re, z.im), z.im.atan2(z.re))
            }

            /// C99 `csqrt` (NumPy's): the special cases of infinite and NaN parts first,
            /// then the principal square root, scaled against overflow and underflow.
            pub fn sqrt(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x == 0.0 && y == 0.0 {
                    return C::new(0.0, y);
                }
                if y.is_infinite() {
                    return C::new(INF, y);
                }
                if x.is_nan() {
                    return C::new(NAN, NAN);
                }
                if x.is_infinite() {
                    if y.is_nan() {
                        return if x > 0.0 {
                            C::new(x, NAN)
                        } else {
                            C::new(NAN, INF)
                        };
                    }
                    return if x > 0.0 {
                        C::new(x, (0.0 as R).copysign(y))
                    } else {
                        C::new(0.0, INF.copysign(y))
                    };
                }
                if y.is_nan() {
                    return C::new(NAN, NAN);
                }
                let (mut a, mut b, mut scale) = (x, y, 1.0);
                if a.abs() >= SQRT_BIG || b.abs() >= SQRT_BIG {
                    a *= 0.25;
                    b *= 0.25;
                    scale = 2.0;
                } else if a.abs() < SQRT_SMALL && b.abs() < SQRT_SMALL {
                    a *= SQRT_UP;
                    b *= SQRT_UP;
                    scale = SQRT_DOWN;
                }
                let t = (0.5 * (a.abs() + a.hypot(b))).sqrt();
                if a >= 0.0 {
                    C::new(t * scale, b / (2.0 * t) * scale)
                } else {
                    C::new(b.abs() / (2.0 * t) * scale, (t * scale).copysign(b))
                }
            }

            /// C99 `csinh`.
            pub fn sinh(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_finite() && y.is_finite() {
                    if y == 0.0 {
                        return C::new(x.sinh(), y);
                    }
                    if x.abs() < COSH_SMALL {
                        return C::new(x.sinh() * y.cos(), x.cosh() * y.sin());
                    }
                    let sx = (1.0 as R).copysign(x);
                    return C::new(
                        sx * exp_mul(x.abs(), y.cos(), 0.5),
                        exp_mul(x.abs(), y.sin(), 0.5),
                    );
                }
                if x == 0.0 {
                    return C::new(x, NAN);
                }
                if y == 0.0 {
                    return C::new(x, y);
                }
                if x.is_infinite() {
                    if !y.is_finite() {
                        return C::new(INF, NAN);
                    }
                    return C::new(x * y.cos(), INF * y.sin());
                }
                C::new(NAN, NAN)
            }

            /// C99 `ccosh`.
            pub fn cosh(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_finite() && y.is_finite() {
                    if y == 0.0 {
                        return C::new(x.cosh(), x * y);
                    }
                    if x.abs() < COSH_SMALL {
                        return C::new(x.cosh() * y.cos(), x.sinh() * y.sin());
                    }
                    let sx = (1.0 as R).copysign(x);
                    return C::new(
                        exp_mul(x.abs(), y.cos(), 0.5),
                        sx * exp_mul(x.abs(), y.sin(), 0.5),
                    );
                }
                if x == 0.0 {
                    return C::new(NAN, 0.0);
                }
                if y == 0.0 {
                    // NaN + 0i keeps the zero as it is (the sign of a NaN means nothing)
                    return C::new(
                        x * x,
                        if x.is_nan() {
                            y
                        } else {
                            y * (1.0 as R).copysign(x)
                        },
                    );
                }
                if x.is_infinite() {
                    if !y.is_finite() {
                        return C::new(INF, NAN);
                    }
                    return C::new(INF * y.cos(), x * y.sin());
                }
                C::new(NAN, NAN)
            }

            /// C99 `ctanh` (Kahan's algorithm).
            pub fn tanh(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_nan() {
                    return C::new(NAN, if y == 0.0 { y } else { NAN });
                }
                if x.is_infinite() {
                    let t = if y.is_finite() { y.sin() * y.cos() } else { y };
                    return C::new((1.0 as R).copysign(x), (0.0 as R).copysign(t));
                }
                if !y.is_finite() {
                    return C::new(if x == 0.0 { x } else { NAN }, NAN);
                }
                if x.abs() >= COSH_SMALL {
                    let e = (-x.abs()).exp();
                    return C::new((1.0 as R).copysign(x), 4.0 * y.sin() * y.cos() * e * e);
                }
                let t = y.tan();
                let beta = 1.0 + t * t;
                let s = x.sinh();
                let rho = (1.0 + s * s).sqrt();
                let denom = 1.0 + beta * s * s;
                C::new((beta * rho * s) / denom, t / denom)
            }

            /// `sin z = -i sinh(iz)`.
            pub fn sin(z: C) -> C {
                let s = sinh(C::new(-z.im, z.re));
                if s.im.is_nan() && s.re.is_infinite() {
                    // an infinite imaginary part with a NaN real part: Annex G leaves the
                    // sign open, NumPy (glibc's csin) gives +inf
                    return C::new(NAN, INF);
                }
                C::new(s.im, -s.re)
            }

            /// `cos z = cosh(iz)`.
            pub fn cos(z: C) -> C {
                cosh(C::new(-z.im, z.re))
            }

            /// `tan z = -i tanh(iz)`.
            pub fn tan(z: C) -> C {
                let t = tanh(C::new(-z.im, z.re));
                C::new(t.im, -t.re)
            }

            /// NumPy `arcsin` (C99 `casin`).
            pub fn asin(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_nan() {
                    return C::new(NAN, if y.is_infinite() { y } else { NAN });
                }
                if y.is_nan() {
                    if x == 0.0 {
                        return C::new(x, NAN);
                    }
                    return C::new(NAN, if x.is_infinite() { INF } else { NAN });
                }
                if x.abs() > ASIN_LARGE || y.abs() > ASIN_LARGE {
                    return C::new(x.atan2(y.abs()), (log_abs(x, y) + LN_2).copysign(y));
                }
                let s1 = sqrt(C::new(1.0 - x, -y));
                let s2 = sqrt(C::new(1.0 + x, y));
                C::new(
                    x.atan2(s1.re * s2.re - s1.im * s2.im),
                    (s1.re * s2.im - s1.im * s2.re).asinh(),
                )
            }

            /// NumPy `arccos` (C99 `cacos`).
            pub fn acos(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_nan() {
                    return C::new(NAN, if y.is_infinite() { -y } else { NAN });
                }
                if y.is_nan() {
                    if x == 0.0 {
                        return C::new(FRAC_PI_2, NAN);
                    }
                    return C::new(NAN, if x.is_infinite() { -INF } else { NAN });
                }
                if x.abs() > ASIN_LARGE || y.abs() > ASIN_LARGE {
                    return C::new(y.abs().atan2(x), -(log_abs(x, y) + LN_2).copysign(y));
                }
                let s1 = sqrt(C::new(1.0 - x, -y));
                let s2 = sqrt(C::new(1.0 + x, y));
                C::new(
                    2.0 * s1.re.atan2(s2.re),
                    (s2.re * s1.im - s2.im * s1.re).asinh(),
                )
            }

            /// NumPy `arctan` (C99 `catan`).
            pub fn atan(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_nan() {
                    return if y.is_infinite() || y == 0.0 {
                        C::new(NAN, (0.0 as R).copysign(y))
                    } else {
                        C::new(NAN, NAN)
                    };
                }
                if y.is_nan() {
                    return if x.is_infinite() {
                        C::new(FRAC_PI_2.copysign(x), 0.0)
                    } else {
                        C::new(NAN, NAN)
                    };
                }
                if x.is_infinite() || y.is_infinite() {
                    return C::new(FRAC_PI_2.copysign(x), (0.0 as R).copysign(y));
                }
                let (ax, ay) = (x.abs(), y.abs());
                if ax > ATAN_HUGE || ay > ATAN_HUGE {
                    let h = (x * 0.5).hypot(y * 0.5);
                    return C::new(FRAC_PI_2.copysign(x), (y * 0.5) / h / h * 0.5);
                }
                // 1 - x^2 - y^2, factored around the larger part
                let d = if ay >= ax {
                    (1.0 - ay) * (1.0 + ay) - x * x
                } else {
                    (1.0 - ax) * (1.0 + ax) - y * y
                };
                let re = 0.5 * (2.0 * x).atan2(d);
                let im = if ay == 1.0 && ax < 1.0 / ATAN_HUGE {
                    0.5 * (LN_2 - ax.ln())
                } else {
                    0.25 * (4.0 * ay / (x * x + (1.0 - ay) * (1.0 - ay))).ln_1p()
                };
                C::new(re, im.copysign(y))
            }

            /// NumPy `expm1`: `(expm1(x) cos y - 2 sin^2(y/2), exp(x) sin y)`, scaled past
            /// the overflow threshold of `exp` like [`exp`].
            pub fn expm1(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if x.is_finite() && x >= EXP_HI {
                    let im = if y == 0.0 {
                        y
                    } else {
                        exp_mul(x, y.sin(), 1.0)
                    };
                    return C::new(exp_mul(x, y.cos(), 1.0), im);
                }
                let s = (y * 0.5).sin();
                C::new(x.exp_m1() * y.cos() - 2.0 * s * s, x.exp() * y.sin())
            }

            /// NumPy `log1p`: `log|1 + z| + i atan2(y, 1 + x)`, the modulus by
            /// `log1p(x (2 + x) + y^2) / 2` near 0 and by [`log_abs`] elsewhere.
            pub fn log1p(z: C) -> C {
                let (x, y) = (z.re, z.im);
                let u = x + 1.0;
                let re = if x.abs() < 0.5 && y.abs() < 0.5 {
                    0.5 * (x * (2.0 + x) + y * y).ln_1p()
                } else {
                    log_abs(u, y)
                };
                C::new(re, y.atan2(u))
            }
        }
    };
}

cmath!(
    c64,
    Complex32,
    f32,
    exp_hi = 88.0,
    k = 127.0,
    two_kp = f32::from_bits(0x6f00_0000),
    two_p = f32::from_bits(0x4f80_0000),
    ln2_hi = f32::from_bits(0x3f31_7200),
    ln2_lo = 1.428_606_8e-6,
    cosh_small = 9.0,
    sqrt_big = f32::from_bits(0x7e00_0000),
    sqrt_small = f32::from_bits(0x1f80_0000),
    sqrt_up = f32::from_bits(0x5f80_0000),
    sqrt_down = f32::from_bits(0x2f80_0000),
    log_big = f32::from_bits(0x7d80_0000),
    log_up = f32::from_bits(0x4b80_0000),
    log_up_p = 24.0,
    asin_large = f32::from_bits(0x4580_0000),
    atan_huge = f32::from_bits(0x5d80_0000)
);
cmath!(
    c128,
    Complex64,
    f64,
    exp_hi = 709.0,
    k = 1023.0,
    two_kp = f64::from_bits(0x7be0_0000_0000_0000),
    two_p = f64::from_bits(0x43f0_0000_0000_0000),
    ln2_hi = f64::from_bits(0x3fe6_2e42_fee0_0000),
    ln2_lo = 1.908_214_929_270_587_7e-10,
    cosh_small = 22.0,
    sqrt_big = f64::from_bits(0x7fc0_0000_0000_0000),
    sqrt_small = f64::from_bits(0x1ff0_0000_0000_0000),
    sqrt_up = f64::from_bits(0x5ff0_0000_0000_0000),
    sqrt_down = f64::from_bits(0x2ff0_0000_0000_0000),
    log_big = f64::from_bits(0x7fb0_0000_0000_0000),
    log_up = f64::from_bits(0x4350_0000_0000_0000),
    log_up_p = 54.0,
    asin_large = f64::from_bits(0x41b0_0000_0000_0000),
    atan_huge = f64::from_bits(0x5f30_0000_0000_0000)
);
