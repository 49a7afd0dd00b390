//! C templates of the complex elementary functions: statement for statement the algorithms
//! of the host's `crate::cmath` (C99 Annex G special values as NumPy gives them, scaling at
//! large and tiny finite arguments), so both devices give the same answers.
//!
//! Besides the placeholders of `prelude` (`$R`, `$C`, `$F`, `$S`, `$INF`, `$NAN`, `$MUL`,
//! `$BIG`, `$SMALL`, `$UP`, `$DOWN`, `$TH`, `$HUGE`), these use the constants that
//! [`fill_consts`] writes; each is the host's constant of the same name.

use crate::DType;

/// Writes the constants of the complex-math templates for the precision of `d`; runs before
/// `prelude`'s placeholders (none of these names starts with one of them).
pub(super) fn fill_consts(t: &str, d: DType) -> String {
    let single = d.real() == DType::F32;
    let c: [(&str, &str); 11] = if single {
        [
            ("$EXPHI", "88.0f"),
            ("$KLN2HI", "(127.0f * 6.9314575e-1f)"),
            ("$KLN2LO", "(127.0f * 1.4286068e-6f)"),
            ("$TWOKP", "0x1p95f"),
            ("$TWOP", "0x1p32f"),
            ("$LOGBIG", "0x1p124f"),
            ("$LOGUPLN", "(24.0f * 0.693147180559945309f)"),
            ("$LOGUP", "0x1p24f"),
            ("$MINPOS", "0x1p-126f"),
            ("$ASINLARGE", "0x1p12f"),
            ("$PI2", "1.57079632679489662f"),
        ]
    } else {
        [
            ("$EXPHI", "709.0"),
            ("$KLN2HI", "(1023.0 * 6.93147180369123816490e-01)"),
            ("$KLN2LO", "(1023.0 * 1.90821492927058770002e-10)"),
            ("$TWOKP", "0x1p959"),
            ("$TWOP", "0x1p64"),
            ("$LOGBIG", "0x1p1020"),
            ("$LOGUPLN", "(54.0 * 0.693147180559945309)"),
            ("$LOGUP", "0x1p54"),
            ("$MINPOS", "0x1p-1022"),
            ("$ASINLARGE", "0x1p28"),
            ("$PI2", "1.57079632679489662"),
        ]
    };
    let ln2 = if single {
        "0.693147180559945309f"
    } else {
        "0.693147180559945309"
    };
    let mut s = t.replace("$LN2", ln2);
    for (k, v) in c {
        s = s.replace(k, v);
    }
    s
}

pub(super) const C_EXPMUL: &str = r#"/* exp(x) * c * s for finite x and a power of two s, overflowing only when the result does:
   past $EXPHI as (exp(x - K ln 2) (c 2^P)) (2^(K-P) s). */
static __device__ __forceinline__ $R lf_expmul_$S($R x, $R c, $R s) {
  if (x < $EXPHI) return exp$F(x) * s * c;
  const $R r = (x - $KLN2HI) - $KLN2LO;
  return (exp$F(r) * (c * $TWOP)) * ($TWOKP * s);
}
"#;

pub(super) const C_LOGABS: &str = r#"/* log(hypot(x, y)) without overflow or underflow, accurate near |z| = 1 (x^2 + y^2 - 1 from
   exact products); an infinite part gives inf, else a NaN gives NaN. */
static __device__ $R lf_logabs_$S($R x, $R y) {
  const $R ax = fabs$F(x), ay = fabs$F(y);
  if (ax == $INF || ay == $INF) return $INF;
  if (ax != ax || ay != ay) return $NAN;
  const $R hi = ax >= ay ? ax : ay, lo = ax >= ay ? ay : ax;
  if (hi > $LOGBIG) return log$F(hypot$F(hi * ($R)0.5, lo * ($R)0.5)) + $LN2;
  if (hi < $MINPOS) {
    if (hi == 0) return -$INF;
    return log$F(hypot$F(hi * $LOGUP, lo * $LOGUP)) - $LOGUPLN;
  }
  const $R h = hypot$F(hi, lo);
  if (h >= ($R)0.71 && h <= ($R)1.73) {
    const $R p1 = $MUL(hi, hi), e1 = fma$F(hi, hi, -p1);
    const $R p2 = $MUL(lo, lo), e2 = fma$F(lo, lo, -p2);
    return ($R)0.5 * log1p$F(((p1 - ($R)1) + p2) + (e1 + e2));
  }
  return log$F(h);
}
"#;

pub(super) const C_SQRT: &str = r#"/* C99 csqrt: the special cases of infinite and NaN parts first, then the principal square
   root, scaled against overflow and underflow. */
static __device__ $C lf_sqrt_$S($C z) {
  const $R x = z.re, y = z.im;
  if (x == 0 && y == 0) return $C{($R)0, y};
  if (isinf(y)) return $C{$INF, y};
  if (x != x) return $C{$NAN, $NAN};
  if (isinf(x)) {
    if (y != y) return x > 0 ? $C{x, $NAN} : $C{$NAN, $INF};
    return x > 0 ? $C{x, copysign$F(($R)0, y)} : $C{($R)0, copysign$F($INF, y)};
  }
  if (y != y) return $C{$NAN, $NAN};
  $R a = x, b = y, scale = 1;
  if (fabs$F(a) >= $BIG || fabs$F(b) >= $BIG) {
    a *= ($R)0.25; b *= ($R)0.25; scale = 2;
  } else if (fabs$F(a) < $SMALL && fabs$F(b) < $SMALL) {
    a *= $UP; b *= $UP; scale = $DOWN;
  }
  const $R t = sqrt$F(($R)0.5 * (fabs$F(a) + hypot$F(a, b)));
  if (a >= 0) return $C{t * scale, b / (2 * t) * scale};
  return $C{fabs$F(b) / (2 * t) * scale, copysign$F(t * scale, b)};
}
"#;

pub(super) const C_EXP: &str = r#"/* C99 cexp. */
static __device__ $C lf_exp_$S($C z) {
  const $R x = z.re, y = z.im;
  if (y == 0) return $C{exp$F(x), y};
  if (x != x) return $C{$NAN, $NAN};
  if (isinf(x)) {
    if (!isfinite(y)) return x < 0 ? $C{($R)0, copysign$F(($R)0, y)} : $C{x, $NAN};
    const $R e = x < 0 ? ($R)0 : x;
    return $C{e * cos$F(y), e * sin$F(y)};
  }
  if (!isfinite(y)) return $C{$NAN, $NAN};
  $R s, c;
  sincos$F(y, &s, &c); /* one range reduction for both */
  return $C{lf_expmul_$S(x, c, ($R)1), lf_expmul_$S(x, s, ($R)1)};
}
"#;

pub(super) const C_LOG: &str = r#"/* C99 clog: log|z| + i atan2(y, x). */
static __device__ __forceinline__ $C lf_log_$S($C z) {
  return $C{lf_logabs_$S(z.re, z.im), atan2$F(z.im, z.re)};
}
"#;

pub(super) const C_EXPM1: &str = r#"/* NumPy's complex expm1, scaled past exp's overflow threshold like cexp. */
static __device__ __forceinline__ $C lf_expm1_$S($C z) {
  const $R x = z.re, y = z.im;
  if (isfinite(x) && x >= $EXPHI) {
    const $R im = y == 0 ? y : lf_expmul_$S(x, sin$F(y), ($R)1);
    return $C{lf_expmul_$S(x, cos$F(y), ($R)1), im};
  }
  const $R s = sin$F(y * ($R)0.5);
  return $C{expm1$F(x) * cos$F(y) - ($R)2 * s * s, exp$F(x) * sin$F(y)};
}
"#;

pub(super) const C_LOG1P: &str = r#"/* log1p(z): the modulus by log1p(x (2 + x) + y^2) / 2 near 0, else as clog of 1 + z. */
static __device__ __forceinline__ $C lf_log1p_$S($C z) {
  const $R x = z.re, y = z.im;
  const $R u = x + ($R)1;
  const $R re = (fabs$F(x) < ($R)0.5 && fabs$F(y) < ($R)0.5)
      ? ($R)0.5 * log1p$F(x * (($R)2 + x) + y * y)
      : lf_logabs_$S(u, y);
  return $C{re, atan2$F(y, u)};
}
"#;

pub(super) const C_SINH: &str = r#"/* C99 csinh. */
static __device__ $C lf_sinh_$S($C z) {
  const $R x = z.re, y = z.im;
  if (isfinite(x) && isfinite(y)) {
    if (y == 0) return $C{sinh$F(x), y};
    if (fabs$F(x) < $TH) return $C{sinh$F(x) * cos$F(y), cosh$F(x) * sin$F(y)};
    const $R sx = copysign$F(($R)1, x);
    return $C{sx * lf_expmul_$S(fabs$F(x), cos$F(y), ($R)0.5), lf_expmul_$S(fabs$F(x), sin$F(y), ($R)0.5)};
  }
  if (x == 0) return $C{x, $NAN};
  if (y == 0) return $C{x, y};
  if (isinf(x)) {
    if (!isfinite(y)) return $C{$INF, $NAN};
    return $C{x * cos$F(y), $INF * sin$F(y)};
  }
  return $C{$NAN, $NAN};
}
"#;

pub(super) const C_COSH: &str = r#"/* C99 ccosh. */
static __device__ $C lf_cosh_$S($C z) {
  const $R x = z.re, y = z.im;
  if (isfinite(x) && isfinite(y)) {
    if (y == 0) return $C{cosh$F(x), x * y};
    if (fabs$F(x) < $TH) return $C{cosh$F(x) * cos$F(y), sinh$F(x) * sin$F(y)};
    const $R sx = copysign$F(($R)1, x);
    return $C{lf_expmul_$S(fabs$F(x), cos$F(y), ($R)0.5), sx * lf_expmul_$S(fabs$F(x), sin$F(y), ($R)0.5)};
  }
  if (x == 0) return $C{$NAN, ($R)0};
  /* NaN + 0i keeps the zero as it is (the sign of a NaN means nothing) */
  if (y == 0) return $C{x * x, x != x ? y : y * copysign$F(($R)1, x)};
  if (isinf(x)) {
    if (!isfinite(y)) return $C{$INF, $NAN};
    return $C{$INF * cos$F(y), x * sin$F(y)};
  }
  return $C{$NAN, $NAN};
}
"#;

pub(super) const C_TANH: &str = r#"/* C99 ctanh (Kahan's algorithm, as FreeBSD's). */
static __device__ $C lf_tanh_$S($C z) {
  const $R x = z.re, y = z.im;
  if (x != x) return $C{$NAN, y == 0 ? y : $NAN};
  if (isinf(x)) {
    const $R t = isfinite(y) ? sin$F(y) * cos$F(y) : y;
    return $C{copysign$F(($R)1, x), copysign$F(($R)0, t)};
  }
  if (!isfinite(y)) return $C{x == 0 ? x : $NAN, $NAN};
  if (fabs$F(x) >= $TH) {
    const $R e = exp$F(-fabs$F(x));
    return $C{copysign$F(($R)1, x), ($R)4 * sin$F(y) * cos$F(y) * e * e};
  }
  const $R t = tan$F(y);
  const $R beta = ($R)1 + t * t;
  const $R s = sinh$F(x);
  const $R rho = sqrt$F(($R)1 + s * s);
  const $R denom = ($R)1 + beta * s * s;
  return $C{(beta * rho * s) / denom, t / denom};
}
"#;

pub(super) const C_SIN: &str = r#"/* sin(z) = -i sinh(iz); an infinite imaginary part with a NaN real part is +inf (Annex G
   leaves the sign open; NumPy, through glibc's csin, gives +inf). */
static __device__ __forceinline__ $C lf_sin_$S($C z) {
  const $C s = lf_sinh_$S($C{-z.im, z.re});
  if (s.im != s.im && isinf(s.re)) return $C{$NAN, $INF};
  return $C{s.im, -s.re};
}
"#;

pub(super) const C_COS: &str = r#"/* cos(z) = cosh(iz) */
static __device__ __forceinline__ $C lf_cos_$S($C z) { return lf_cosh_$S($C{-z.im, z.re}); }
"#;

pub(super) const C_TAN: &str = r#"/* tan(z) = -i tanh(iz) */
static __device__ __forceinline__ $C lf_tan_$S($C z) {
  const $C t = lf_tanh_$S($C{-z.im, z.re});
  return $C{t.im, -t.re};
}
"#;

pub(super) const C_ASIN: &str = r#"/* C99 casin: Kahan's formula (signed zeros pick the side of the branch cuts); past
   $ASINLARGE in magnitude, and at infinity, -i log(2iz). */
static __device__ $C lf_asin_$S($C z) {
  const $R x = z.re, y = z.im;
  if (x != x) return $C{$NAN, isinf(y) ? y : $NAN};
  if (y != y) {
    if (x == 0) return $C{x, $NAN};
    return $C{$NAN, isinf(x) ? $INF : $NAN};
  }
  if (fabs$F(x) > $ASINLARGE || fabs$F(y) > $ASINLARGE) {
    return $C{atan2$F(x, fabs$F(y)), copysign$F(lf_logabs_$S(x, y) + $LN2, y)};
  }
  const $C s1 = lf_sqrt_$S($C{($R)1 - x, -y});
  const $C s2 = lf_sqrt_$S($C{($R)1 + x, y});
  return $C{atan2$F(x, s1.re * s2.re - s1.im * s2.im), asinh$F(s1.re * s2.im - s1.im * s2.re)};
}
"#;

pub(super) const C_ACOS: &str = r#"/* C99 cacos: Kahan's formula; past $ASINLARGE in magnitude, and at infinity,
   pi/2 + i log(2iz). */
static __device__ $C lf_acos_$S($C z) {
  const $R x = z.re, y = z.im;
  if (x != x) return $C{$NAN, isinf(y) ? -y : $NAN};
  if (y != y) {
    if (x == 0) return $C{$PI2, $NAN};
    return $C{$NAN, isinf(x) ? -$INF : $NAN};
  }
  if (fabs$F(x) > $ASINLARGE || fabs$F(y) > $ASINLARGE) {
    return $C{atan2$F(fabs$F(y), x), -copysign$F(lf_logabs_$S(x, y) + $LN2, y)};
  }
  const $C s1 = lf_sqrt_$S($C{($R)1 - x, -y});
  const $C s2 = lf_sqrt_$S($C{($R)1 + x, y});
  return $C{($R)2 * atan2$F(s1.re, s2.re), asinh$F(s2.re * s1.im - s2.im * s1.re)};
}
"#;

pub(super) const C_ATAN: &str = r#"/* C99 catan: atan2(2x, 1 - |z|^2) / 2 + i log1p(4|y| / (x^2 + (1 - |y|)^2)) / 4, with
   1 - |z|^2 factored around the larger part; +-pi/2 + i y / |z|^2 past $HUGE. */
static __device__ $C lf_atan_$S($C z) {
  const $R x = z.re, y = z.im;
  if (x != x) return (isinf(y) || y == 0) ? $C{$NAN, copysign$F(($R)0, y)} : $C{$NAN, $NAN};
  if (y != y) return isinf(x) ? $C{copysign$F($PI2, x), ($R)0} : $C{$NAN, $NAN};
  if (isinf(x) || isinf(y)) return $C{copysign$F($PI2, x), copysign$F(($R)0, y)};
  const $R ax = fabs$F(x), ay = fabs$F(y);
  if (ax > $HUGE || ay > $HUGE) {
    const $R h = hypot$F(x * ($R)0.5, y * ($R)0.5);
    return $C{copysign$F($PI2, x), (y * ($R)0.5) / h / h * ($R)0.5};
  }
  const $R d = ay >= ax ? (($R)1 - ay) * (($R)1 + ay) - x * x : (($R)1 - ax) * (($R)1 + ax) - y * y;
  const $R re = ($R)0.5 * atan2$F(($R)2 * x, d);
  const $R im = (ay == 1 && ax < ($R)1 / $HUGE)
      ? ($R)0.5 * ($LN2 - log$F(ax))
      : ($R)0.25 * log1p$F(($R)4 * ay / (x * x + (($R)1 - ay) * (($R)1 - ay)));
  return $C{re, copysign$F(im, y)};
}
"#;
