//! NumPy's scalar semantics on the host: casts, integer division, rounding and the
//! counter-based random generator. The CUDA renderer emits the same rules as C.

use num_complex::{Complex32, Complex64};

/// NumPy's float -> int64 cast: NaN, infinities and out-of-range values give `i64::MIN`
/// (what x86 NumPy does), others truncate toward zero.
pub fn f64_to_i64(x: f64) -> i64 {
    const LIM: f64 = 9.223_372_036_854_776e18; // 2^63, exact
    if (-LIM..LIM).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// NumPy's float -> int32 cast: NaN, infinities and out-of-range values give `i32::MIN`.
pub fn f64_to_i32(x: f64) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// NumPy's float -> int8 cast as x86 NumPy does it: through the int32 cast (NaN,
/// infinities and values outside int32 give `i32::MIN`), then wrapped to 8 bits
/// (`200.5 -> -56`, NaN -> 0).
pub fn f64_to_i8(x: f64) -> i8 {
    f64_to_i32(x) as i8
}

/// NumPy's float -> int16 cast: through the int32 cast, then wrapped to 16 bits.
pub fn f64_to_i16(x: f64) -> i16 {
    f64_to_i32(x) as i16
}

/// Float -> uint8: through the int32 cast, then wrapped to 8 bits (`-1.5 -> 255`,
/// NaN -> 0), as x86 NumPy gives.
pub fn f64_to_u8(x: f64) -> u8 {
    f64_to_i32(x) as u8
}

/// Float -> uint16: through the int32 cast, then wrapped to 16 bits.
pub fn f64_to_u16(x: f64) -> u16 {
    f64_to_i32(x) as u16
}

/// Float -> uint32: through the int64 cast, then wrapped to 32 bits (negative values
/// wrap; NaN, infinities and values outside int64 give 0). x86 NumPy agrees on values in
/// range and on negative ones inside int32; it gives `2^31` for NaN.
pub fn f64_to_u32(x: f64) -> u32 {
    f64_to_i64(x) as u32
}

/// Float -> uint64: values in `[2^63, 2^64)` truncate exactly; everything else goes through
/// the int64 cast and wraps (negative values wrap; NaN, infinities and values outside
/// int64 and that range give `2^63`, as x86 NumPy gives for NaN and `-inf`).
pub fn f64_to_u64(x: f64) -> u64 {
    const LO: f64 = 9.223_372_036_854_776e18; // 2^63
    const HI: f64 = 1.844_674_407_370_955_2e19; // 2^64
    if (LO..HI).contains(&x) {
        x as u64
    } else {
        f64_to_i64(x) as u64
    }
}

/// `x` rounded to `f32` toward zero with the lowest bit set when inexact ("round to odd").
/// Rounding that to a format of at most 22 significant bits to nearest gives the correctly
/// rounded result of `x` (no double rounding), which is how f64 becomes f16 and bf16.
pub fn f64_to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if r.is_nan() || r as f64 == x {
        return r;
    }
    let mut b = r.to_bits();
    if (r as f64).abs() > x.abs() {
        b -= 1; // one step toward zero
    }
    f32::from_bits(b | 1)
}

/// `f64 -> f16` rounded to nearest, ties to even (NumPy's `npy_double_to_half`).
pub fn f64_to_f16(x: f64) -> half::f16 {
    half::f16::from_f32(f64_to_f32_odd(x))
}

/// `f64 -> bf16` rounded to nearest, ties to even.
pub fn f64_to_bf16(x: f64) -> half::bf16 {
    half::bf16::from_f32(f64_to_f32_odd(x))
}

/// Philox4x32-10 of counter `(ctr_lo, ctr_hi, 0, 0)` under key `(seed_lo, seed_hi)`.
///
/// The mapping to random values, identical on every device:
/// * uniform F32: `(x[0] >> 8) * 2^-24`
/// * uniform F64: `(((x[0] as u64) << 32 | x[1]) >> 11) * 2^-53`
/// * normal (both precisions, computed in f64 then rounded): Box-Muller with
///   `u1 = ((((x[0] as u64) << 32 | x[1]) >> 11) + 1) * 2^-53` (in `(0, 1]`),
///   `u2 = (((x[2] as u64) << 32 | x[3]) >> 11) * 2^-53`,
///   `sqrt(-2 ln u1) * cos(2 pi u2)`.
pub fn philox(counter: u64, seed: u64) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut c = [counter as u32, (counter >> 32) as u32, 0u32, 0u32];
    let mut k = [seed as u32, (seed >> 32) as u32];
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = M0 * c[0] as u64;
        let p1 = M1 * c[2] as u64;
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// Uniform `[0, 1)` in f32 for `counter` under `seed`.
pub fn uniform_f32(counter: u64, seed: u64) -> f32 {
    (philox(counter, seed)[0] >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Uniform `[0, 1)` in f64 for `counter` under `seed`.
pub fn uniform_f64(counter: u64, seed: u64) -> f64 {
    let x = philox(counter, seed);
    ((((x[0] as u64) << 32) | x[1] as u64) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Standard normal in f64 for `counter` under `seed` (Box-Muller, see [`philox`]).
pub fn normal_f64(counter: u64, seed: u64) -> f64 {
    let x = philox(counter, seed);
    let a = (((x[0] as u64) << 32) | x[1] as u64) >> 11;
    let b = (((x[2] as u64) << 32) | x[3] as u64) >> 11;
    let u1 = (a + 1) as f64 * (1.0 / 9_007_199_254_740_992.0);
    let u2 = b as f64 * (1.0 / 9_007_199_254_740_992.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// NumPy's float32 -> int32 cast (through `f64`, which is exact): NaN, infinities and
/// out-of-range values give `i32::MIN`, others truncate toward zero.
pub fn f32_to_i32(x: f32) -> i32 {
    f64_to_i32(x as f64)
}

/// NumPy's float32 -> int64 cast (through `f64`, which is exact): NaN, infinities and
/// out-of-range values give `i64::MIN`, others truncate toward zero.
pub fn f32_to_i64(x: f32) -> i64 {
    f64_to_i64(x as f64)
}

/// `base ** exp` (a non-negative `exp`) of `$t` by squaring, wrapping.
macro_rules! wrapping_pow {
    ($t:ident, $base:expr, $exp:expr) => {{
        let mut result: $t = 1;
        let mut b = $base;
        let mut e = $exp;
        while e > 0 {
            if e & 1 == 1 {
                result = result.wrapping_mul(b);
            }
            e >>= 1;
            if e > 0 {
                b = b.wrapping_mul(b);
            }
        }
        result
    }};
}

macro_rules! int_helpers {
    ($t:ident, $floordiv:ident, $rem:ident, $pow:ident) => {
        #[doc = concat!("NumPy `floor_divide` on `", stringify!($t), "`: the quotient rounded ")]
        #[doc = "toward negative infinity; `x // 0 = 0` and `MIN // -1 = MIN` (wrapping), as"]
        #[doc = "NumPy gives (with a warning NumPy prints and we do not)."]
        pub fn $floordiv(a: $t, b: $t) -> $t {
            if b == 0 {
                return 0;
            }
            if b == -1 {
                return a.wrapping_neg();
            }
            let q = a / b;
            let r = a % b;
            if r != 0 && ((r < 0) != (b < 0)) {
                q - 1
            } else {
                q
            }
        }

        #[doc = concat!("NumPy `remainder` (`%`) on `", stringify!($t), "`: the result has the ")]
        #[doc = "sign of the divisor (`-7 % 2 = 1`); `x % 0 = 0` and `MIN % -1 = 0`."]
        pub fn $rem(a: $t, b: $t) -> $t {
            if b == 0 || b == -1 {
                return 0;
            }
            let r = a % b;
            if r != 0 && ((r < 0) != (b < 0)) {
                r + b
            } else {
                r
            }
        }

        #[doc = concat!("NumPy `power` on `", stringify!($t), "`: exponentiation by squaring ")]
        #[doc = "with two's-complement wrapping (`x ** 0 = 1`, also for `x = 0`). NumPy raises"]
        #[doc = "an error for a negative exponent; we return the exact integer part of the real"]
        #[doc = "result instead: `1` for base `1`, `(-1)^e` for base `-1`, `0` otherwise (also"]
        #[doc = "for base `0`, where the real result would be infinite)."]
        pub fn $pow(base: $t, exp: $t) -> $t {
            if exp < 0 {
                return match base {
                    1 => 1,
                    -1 => {
                        if exp & 1 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                };
            }
            wrapping_pow!($t, base, exp)
        }
    };
}

int_helpers!(i32, floor_divide_i32, remainder_i32, power_i32);
int_helpers!(i64, floor_divide_i64, remainder_i64, power_i64);
int_helpers!(i8, floor_divide_i8, remainder_i8, power_i8);
int_helpers!(i16, floor_divide_i16, remainder_i16, power_i16);

macro_rules! uint_helpers {
    ($t:ident, $floordiv:ident, $rem:ident, $pow:ident) => {
        #[doc = concat!("NumPy `floor_divide` on `", stringify!($t), "`: `a / b`, `x // 0 = 0`.")]
        pub fn $floordiv(a: $t, b: $t) -> $t {
            a.checked_div(b).unwrap_or(0)
        }

        #[doc = concat!("NumPy `remainder` on `", stringify!($t), "`: `a % b`, `x % 0 = 0`.")]
        pub fn $rem(a: $t, b: $t) -> $t {
            a.checked_rem(b).unwrap_or(0)
        }

        #[doc = concat!("NumPy `power` on `", stringify!($t), "`: exponentiation by squaring ")]
        #[doc = "with wrapping (`x ** 0 = 1`)."]
        pub fn $pow(base: $t, exp: $t) -> $t {
            wrapping_pow!($t, base, exp)
        }
    };
}

uint_helpers!(u8, floor_divide_u8, remainder_u8, power_u8);
uint_helpers!(u16, floor_divide_u16, remainder_u16, power_u16);
uint_helpers!(u32, floor_divide_u32, remainder_u32, power_u32);
uint_helpers!(u64, floor_divide_u64, remainder_u64, power_u64);

macro_rules! float_helpers {
    ($t:ident, $floordiv:ident, $rem:ident, $max:ident, $min:ident, $sign:ident, $round:ident) => {
        #[doc = concat!("NumPy `floor_divide` on `", stringify!($t), "` (`npy_floor_divide`): ")]
        #[doc = "`b == 0` gives `a / b`; otherwise `div = (a - fmod(a, b)) / b`, lowered by"]
        #[doc = "one when the remainder's sign differs from `b`'s, then snapped to the nearest"]
        #[doc = "integer (`floor`, plus one when the fraction exceeds 0.5); a zero quotient"]
        #[doc = "takes the sign of `a / b`. NaN in gives NaN; `inf // x` is NaN."]
        pub fn $floordiv(a: $t, b: $t) -> $t {
            if b == 0.0 {
                return a / b;
            }
            let m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div != 0.0 {
                let mut fd = div.floor();
                if div - fd > 0.5 {
                    fd += 1.0;
                }
                fd
            } else {
                (0.0 as $t).copysign(a / b)
            }
        }

        #[doc = concat!("NumPy `remainder` (`%`) on `", stringify!($t), "` (`npy_remainder`): ")]
        #[doc = "`r = fmod(a, b)`, plus `b` when `r` is nonzero and its sign differs from"]
        #[doc = "`b`'s; a zero result takes the sign of `b`. `x % 0.0` is NaN (`-7.0 % 3.0 = 2.0`)."]
        pub fn $rem(a: $t, b: $t) -> $t {
            let m = a % b;
            if b == 0.0 {
                return m;
            }
            if m != 0.0 {
                if (b < 0.0) != (m < 0.0) {
                    m + b
                } else {
                    m
                }
            } else {
                (0.0 as $t).copysign(b)
            }
        }

        #[doc = concat!("NumPy `maximum` on `", stringify!($t), "`: NaN-propagating ")]
        #[doc = "(`a > b || isnan(a) ? a : b`), unlike C `fmax`; on ties the second operand"]
        #[doc = "(`maximum(-0.0, 0.0) = 0.0`, `maximum(0.0, -0.0) = -0.0`), as NumPy and the"]
        #[doc = "CUDA renderer give."]
        #[inline]
        pub fn $max(a: $t, b: $t) -> $t {
            if a > b || a.is_nan() {
                a
            } else {
                b
            }
        }

        #[doc = concat!("NumPy `minimum` on `", stringify!($t), "`: NaN-propagating ")]
        #[doc = "(`a < b || isnan(a) ? a : b`), unlike C `fmin`; on ties the second operand"]
        #[doc = "(`minimum(-0.0, 0.0) = 0.0`, `minimum(0.0, -0.0) = -0.0`)."]
        #[inline]
        pub fn $min(a: $t, b: $t) -> $t {
            if a < b || a.is_nan() {
                a
            } else {
                b
            }
        }

        #[doc = concat!("NumPy `sign` on `", stringify!($t), "`: `-1`, `+0` (for both zeros) ")]
        #[doc = "or `1`; NaN stays NaN."]
        #[inline]
        pub fn $sign(x: $t) -> $t {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else if x == 0.0 {
                0.0
            } else {
                x
            }
        }

        #[doc = concat!("NumPy `round` on `", stringify!($t), "`: half to even ")]
        #[doc = "(`round(2.5) = 2`, `round(-0.5) = -0`), not C `round`."]
        #[inline]
        pub fn $round(x: $t) -> $t {
            x.round_ties_even()
        }
    };
}

float_helpers!(
    f32,
    floor_divide_f32,
    remainder_f32,
    maximum_f32,
    minimum_f32,
    sign_f32,
    round_f32
);
float_helpers!(
    f64,
    floor_divide_f64,
    remainder_f64,
    maximum_f64,
    minimum_f64,
    sign_f64,
    round_f64
);

macro_rules! complex_helpers {
    (
        $c:ident, $t:ident, $m:ident, $div:ident, $recip:ident, $sign:ident, $pow:ident,
        $log2:ident, $log10:ident, $abs:ident, $angle:ident, $isnan:ident, $isinf:ident,
        $isfinite:ident
    ) => {
        #[doc = concat!("NumPy complex division on `", stringify!($c), "` (Smith's algorithm, ")]
        #[doc = "as NumPy's loop does it); dividing by `0` gives `(a.re / 0, a.im / 0)`."]
        pub fn $div(a: $c, b: $c) -> $c {
            let (abr, abi) = (b.re.abs(), b.im.abs());
            if abr >= abi {
                if abr == 0.0 && abi == 0.0 {
                    return $c::new(a.re / abr, a.im / abi);
                }
                let rat = b.im / b.re;
                let scl = 1.0 / (b.re + b.im * rat);
                $c::new((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl)
            } else {
                let rat = b.re / b.im;
                let scl = 1.0 / (b.im + b.re * rat);
                $c::new((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl)
            }
        }

        #[doc = concat!("NumPy `reciprocal` on `", stringify!($c), "` (NumPy's loop; `1/0` is NaN).")]
        pub fn $recip(z: $c) -> $c {
            if z.im.abs() <= z.re.abs() {
                let r = z.im / z.re;
                let d = z.re + z.im * r;
                $c::new(1.0 / d, -r / d)
            } else {
                let r = z.re / z.im;
                let d = z.re * r + z.im;
                $c::new(r / d, -1.0 / d)
            }
        }

        #[doc = concat!("NumPy 2 `sign` on `", stringify!($c), "`: `z / |z|`, `0` for `0`, ")]
        #[doc = "NaN (both parts) when a part is NaN or both are infinite; `(±1, 0)` or"]
        #[doc = "`(0, ±1)` when exactly one part is infinite."]
        pub fn $sign(z: $c) -> $c {
            let a = z.re.hypot(z.im);
            if a.is_nan() {
                $c::new($t::NAN, $t::NAN)
            } else if a.is_infinite() {
                if z.re.is_infinite() {
                    if z.im.is_infinite() {
                        $c::new($t::NAN, $t::NAN)
                    } else {
                        $c::new(if z.re > 0.0 { 1.0 } else { -1.0 }, 0.0)
                    }
                } else {
                    $c::new(0.0, if z.im > 0.0 { 1.0 } else { -1.0 })
                }
            } else if a == 0.0 {
                $c::new(0.0, 0.0)
            } else {
                $c::new(z.re / a, z.im / a)
            }
        }

        #[doc = concat!("NumPy `power` on `", stringify!($c), "` (`npy_cpow`): `z ** 0 = 1`; ")]
        #[doc = "`0 ** b` is `0` when `b.re > 0`, else NaN; integer real exponents below 100 in"]
        #[doc = "magnitude use repeated multiplication (and a reciprocal for negative ones);"]
        #[doc = "everything else is `exp(b * log(a))` (C99 `cexp` and `clog`, the crate's `cmath` module)."]
        pub fn $pow(a: $c, b: $c) -> $c {
            if b.re == 0.0 && b.im == 0.0 {
                return $c::new(1.0, 0.0);
            }
            if a.re == 0.0 && a.im == 0.0 {
                return if b.re > 0.0 {
                    $c::new(0.0, 0.0)
                } else {
                    $c::new($t::NAN, $t::NAN)
                };
            }
            if b.im == 0.0 && b.re == b.re.trunc() && b.re.abs() < 100.0 {
                let n = b.re as i32;
                match n {
                    1 => return a,
                    2 => return a * a,
                    3 => return a * (a * a),
                    _ => {
                        let mut m = n.unsigned_abs();
                        let mut acc = $c::new(1.0, 0.0);
                        let mut p = a;
                        loop {
                            if m & 1 == 1 {
                                acc *= p;
                            }
                            m >>= 1;
                            if m == 0 {
                                break;
                            }
                            p = p * p;
                        }
                        return if n < 0 {
                            $div($c::new(1.0, 0.0), acc)
                        } else {
                            acc
                        };
                    }
                }
            }
            crate::cmath::$m::exp(b * crate::cmath::$m::log(a))
        }

        #[doc = concat!("NumPy `log2` on `", stringify!($c), "`: `ln(z) * log2(e)`.")]
        pub fn $log2(z: $c) -> $c {
            let l = crate::cmath::$m::log(z);
            $c::new(
                l.re * std::$t::consts::LOG2_E,
                l.im * std::$t::consts::LOG2_E,
            )
        }

        #[doc = concat!("NumPy `log10` on `", stringify!($c), "`: `ln(z) * log10(e)`.")]
        pub fn $log10(z: $c) -> $c {
            let l = crate::cmath::$m::log(z);
            $c::new(
                l.re * std::$t::consts::LOG10_E,
                l.im * std::$t::consts::LOG10_E,
            )
        }

        #[doc = concat!("NumPy `abs` on `", stringify!($c), "`: `hypot(re, im)`.")]
        #[inline]
        pub fn $abs(z: $c) -> $t {
            z.re.hypot(z.im)
        }

        #[doc = concat!("NumPy `angle` on `", stringify!($c), "`: `atan2(im, re)`.")]
        #[inline]
        pub fn $angle(z: $c) -> $t {
            z.im.atan2(z.re)
        }

        #[doc = concat!("NumPy `isnan` on `", stringify!($c), "`: either part is NaN.")]
        #[inline]
        pub fn $isnan(z: $c) -> bool {
            z.re.is_nan() || z.im.is_nan()
        }

        #[doc = concat!("NumPy `isinf` on `", stringify!($c), "`: either part is infinite.")]
        #[inline]
        pub fn $isinf(z: $c) -> bool {
            z.re.is_infinite() || z.im.is_infinite()
        }

        #[doc = concat!("NumPy `isfinite` on `", stringify!($c), "`: both parts are finite.")]
        #[inline]
        pub fn $isfinite(z: $c) -> bool {
            z.re.is_finite() && z.im.is_finite()
        }
    };
}

complex_helpers!(
    Complex32,
    f32,
    c64,
    divide_c64,
    reciprocal_c64,
    sign_c64,
    power_c64,
    log2_c64,
    log10_c64,
    abs_c64,
    angle_c64,
    isnan_c64,
    isinf_c64,
    isfinite_c64
);
complex_helpers!(
    Complex64,
    f64,
    c128,
    divide_c128,
    reciprocal_c128,
    sign_c128,
    power_c128,
    log2_c128,
    log10_c128,
    abs_c128,
    angle_c128,
    isnan_c128,
    isinf_c128,
    isfinite_c128
);
