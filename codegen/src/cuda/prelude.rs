//! Device helper functions of generated kernels (complex math, NumPy integer and float
//! division, casts, Philox): C source templates, their dependencies and a deterministic
//! emission order, so a kernel carries only the helpers it uses.
//!
//! Templates are written once for both precisions with placeholders: `$R` real type, `$C`
//! complex type, `$F` math-function suffix (`sinf` / `sin`), `$S` name suffix, `$I`/`$U`
//! signed/unsigned integer types, `$MUL` a product never contracted into an FMA (so complex
//! `*` and `/` round like NumPy's) and a few exact constants (`$INF`, `$NAN`, `$BIG`, ...).

use super::cmath::{self, *};
use crate::DType;
use std::collections::BTreeSet;

/// Complex functions emitted as helpers (suffix `c32` / `c64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CFn {
    Add,
    Sub,
    Mul,
    Div,
    Eq,
    Ne,
    Square,
    Recip,
    Sqrt,
    Rsqrt,
    Exp,
    Log,
    Log2,
    Log10,
    Expm1,
    Log1p,
    Sinh,
    Cosh,
    Tanh,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sign,
    Pow,
    /// `exp(x) * c * s` without spurious overflow (a real helper of the complex functions).
    ExpMul,
    /// `log|z|` without overflow or underflow (a real helper of the complex functions).
    LogAbs,
}

/// One helper of the generated source. The derived order is the emission order (a helper's
/// dependencies are emitted before it regardless).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Helper {
    /// The struct of a complex dtype (`C64` → `c32`, `C128` → `c64`).
    CType(DType),
    /// Philox4x32-10 and its result struct.
    Philox,
    /// Uniform `[0, 1)` f32.
    UniformF32,
    /// Uniform `[0, 1)` f64.
    UniformF64,
    /// Standard normal f64.
    NormalF64,
    /// f64 hypot that does not overflow for finite results (CUDA's `hypot` returns inf for
    /// `hypot(x, DBL_MAX)`, NumPy `DBL_MAX`).
    HypotF64,
    /// NumPy integer `//`.
    IntFloorDiv(DType),
    /// NumPy integer `%`.
    IntMod(DType),
    /// Integer power by squaring.
    IntPow(DType),
    /// Float (first) to integer (second) cast with NumPy's out-of-range rule.
    FloatToInt(DType, DType),
    /// Float (`F32` or `F64`) to `U64` (exact in `[2^63, 2^64)`, else through int64).
    FloatToU64(DType),
    /// `F32` to the 16-bit float (round to nearest even) and back.
    HalfFromF32(DType),
    /// `F64` to the 16-bit float (one rounding, through round-to-odd `f32`).
    HalfFromF64(DType),
    /// The 16-bit float to `F32` (exact).
    HalfToF32(DType),
    /// NumPy float `sign`.
    FloatSign(DType),
    /// NumPy's `npy_divmod`.
    FloatDivmod(DType),
    /// NumPy float `//`.
    FloatFloorDiv(DType),
    /// NumPy float `%`.
    FloatMod(DType),
    /// A complex function of the complex dtype.
    C(CFn, DType),
}

/// Short dtype suffix used in helper names.
pub(crate) fn sfx(d: DType) -> &'static str {
    match d {
        DType::Bool => "b",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::C64 => "c32",
        DType::C128 => "c64",
        DType::U8 => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
    }
}

/// Math-function suffix of a float or complex dtype's precision (`f` for single).
pub(crate) fn mfx(d: DType) -> &'static str {
    if d.real() == DType::F32 {
        "f"
    } else {
        ""
    }
}

/// The exact C expression of +infinity in the precision of `d`.
pub(crate) fn inf(d: DType) -> &'static str {
    if d.real() == DType::F32 {
        "__int_as_float(0x7f800000)"
    } else {
        "__longlong_as_double(0x7ff0000000000000LL)"
    }
}

/// The exact C expression of a quiet NaN in the precision of `d`.
pub(crate) fn nan(d: DType) -> &'static str {
    if d.real() == DType::F32 {
        "__int_as_float(0x7fc00000)"
    } else {
        "__longlong_as_double(0x7ff8000000000000LL)"
    }
}

impl Helper {
    /// Helpers this one calls.
    fn deps(self) -> Vec<Helper> {
        use CFn::*;
        match self {
            Helper::UniformF32 | Helper::UniformF64 | Helper::NormalF64 => vec![Helper::Philox],
            Helper::FloatFloorDiv(d) | Helper::FloatMod(d) => vec![Helper::FloatDivmod(d)],
            Helper::FloatToU64(f) => vec![Helper::FloatToInt(f, DType::I64)],
            Helper::HalfFromF64(h) => vec![Helper::HalfFromF32(h)],
            Helper::C(f, d) => {
                let c = |g| Helper::C(g, d);
                let mut v = vec![Helper::CType(d)];
                v.extend(match f {
                    Rsqrt => vec![c(Recip), c(Sqrt)],
                    Exp | Expm1 | Sinh | Cosh => vec![c(ExpMul)],
                    Log | Log1p => vec![c(LogAbs)],
                    Log2 | Log10 => vec![c(Log)],
                    Sin => vec![c(Sinh)],
                    Cos => vec![c(Cosh)],
                    Tan => vec![c(Tanh)],
                    Asin | Acos => vec![c(Sqrt), c(LogAbs)],
                    Pow => vec![c(Mul), c(Div), c(Exp), c(Log)],
                    _ => vec![],
                });
                v
            }
            _ => vec![],
        }
    }

    /// The C source of this helper.
    fn source(self) -> String {
        match self {
            Helper::CType(d) => {
                let align = if d == DType::C64 { "8" } else { "16" };
                real_tpl(CTYPE, d).replace("$A", align)
            }
            Helper::Philox => PHILOX.to_string(),
            Helper::UniformF32 => UNIFORM_F32.to_string(),
            Helper::UniformF64 => UNIFORM_F64.to_string(),
            Helper::NormalF64 => NORMAL_F64.to_string(),
            Helper::HypotF64 => HYPOT_F64.to_string(),
            Helper::IntFloorDiv(d) if d.is_unsigned() => int_tpl(UINT_FLOORDIV, d),
            Helper::IntMod(d) if d.is_unsigned() => int_tpl(UINT_MOD, d),
            Helper::IntPow(d) if d.is_unsigned() => int_tpl(UINT_POW, d),
            Helper::IntFloorDiv(d) => int_tpl(INT_FLOORDIV, d),
            Helper::IntMod(d) => int_tpl(INT_MOD, d),
            Helper::IntPow(d) => int_tpl(INT_POW, d),
            Helper::FloatToInt(f, t) => {
                let (lo, min) = if t == DType::I32 {
                    ("2147483648.0", "(-2147483647 - 1)")
                } else {
                    ("9223372036854775808.0", "(-9223372036854775807LL - 1LL)")
                };
                real_tpl(FLOAT_TO_INT, f)
                    .replace("$T", sfx(t))
                    .replace("$I", crate::cuda::c_type(t))
                    .replace("$LIM", lo)
                    .replace("$MIN", min)
            }
            Helper::FloatToU64(f) => real_tpl(FLOAT_TO_U64, f),
            Helper::HalfFromF32(DType::BF16) => BF16_FROM_F32.to_string(),
            Helper::HalfFromF32(_) => F16_FROM_F32.to_string(),
            Helper::HalfFromF64(h) => HALF_FROM_F64.replace("$H", sfx(h)),
            Helper::HalfToF32(DType::BF16) => BF16_TO_F32.to_string(),
            Helper::HalfToF32(_) => F16_TO_F32.to_string(),
            Helper::FloatSign(d) => real_tpl(FLOAT_SIGN, d),
            Helper::FloatDivmod(d) => real_tpl(FLOAT_DIVMOD, d),
            Helper::FloatFloorDiv(d) => real_tpl(FLOAT_FLOORDIV, d),
            Helper::FloatMod(d) => real_tpl(FLOAT_MOD, d),
            Helper::C(f, d) => real_tpl(&cmath::fill_consts(complex_source(f), d), d),
        }
    }
}

/// Emits every helper in `set` and, before each, its dependencies, each once, in a fixed order.
pub(crate) fn emit_helpers(set: &BTreeSet<Helper>, out: &mut String) {
    fn visit(h: Helper, done: &mut BTreeSet<Helper>, out: &mut String) {
        if done.contains(&h) {
            return;
        }
        done.insert(h);
        for d in h.deps() {
            visit(d, done, out);
        }
        out.push_str(&h.source());
    }
    let mut done = BTreeSet::new();
    for &h in set {
        visit(h, &mut done, out);
    }
}

/// Fills a template for a real or complex dtype `d` (either precision).
fn real_tpl(t: &str, d: DType) -> String {
    let single = d.real() == DType::F32;
    let (r, c) = if single {
        ("float", "c32")
    } else {
        ("double", "c64")
    };
    let (big, small, up, down, th) = if single {
        ("0x1p125f", "0x1p-64f", "0x1p64f", "0x1p-32f", "9.0f")
    } else {
        ("0x1p1021", "0x1p-512", "0x1p512", "0x1p-256", "22.0")
    };
    let mul = if single { "__fmul_rn" } else { "__dmul_rn" };
    t.replace("$INF", inf(d))
        .replace("$MUL", mul)
        .replace("$NAN", nan(d))
        .replace("$BIG", big)
        .replace("$SMALL", small)
        .replace("$UP", up)
        .replace("$DOWN", down)
        .replace("$TH", th)
        .replace("$HUGE", if single { "0x1p60f" } else { "0x1p500" })
        .replace("$R", r)
        .replace("$C", c)
        .replace("$F", mfx(d))
        .replace("$S", sfx(d))
}

/// Fills a template for an integer dtype `d`.
fn int_tpl(t: &str, d: DType) -> String {
    let i = crate::cuda::c_type(d);
    let u = if d.is_int64() {
        "unsigned long long"
    } else {
        "unsigned int"
    };
    t.replace("$I", i).replace("$U", u).replace("$S", sfx(d))
}

const CTYPE: &str = "struct __align__($A) $C { $R re, im; };\n";

const PHILOX: &str = r#"struct lf_u32x4 { unsigned int v[4]; };
/* Philox4x32-10 of counter (ctr_lo, ctr_hi, 0, 0) under key (seed_lo, seed_hi). */
static __device__ __forceinline__ lf_u32x4 lf_philox(unsigned long long ctr, unsigned long long seed) {
  unsigned int c0 = (unsigned int)ctr, c1 = (unsigned int)(ctr >> 32), c2 = 0u, c3 = 0u;
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  lf_u32x4 r;
  r.v[0] = c0; r.v[1] = c1; r.v[2] = c2; r.v[3] = c3;
  return r;
}
"#;

const UNIFORM_F32: &str = r#"static __device__ __forceinline__ float lf_uniform_f32(unsigned long long ctr, unsigned long long seed) {
  return (float)(lf_philox(ctr, seed).v[0] >> 8) * 5.9604644775390625e-08f;
}
"#;

const UNIFORM_F64: &str = r#"static __device__ __forceinline__ double lf_uniform_f64(unsigned long long ctr, unsigned long long seed) {
  const lf_u32x4 x = lf_philox(ctr, seed);
  const unsigned long long m = (((unsigned long long)x.v[0] << 32) | x.v[1]) >> 11;
  return (double)m * 1.1102230246251565404236316680908203125e-16;
}
"#;

const NORMAL_F64: &str = r#"static __device__ __forceinline__ double lf_normal_f64(unsigned long long ctr, unsigned long long seed) {
  const lf_u32x4 x = lf_philox(ctr, seed);
  const unsigned long long a = (((unsigned long long)x.v[0] << 32) | x.v[1]) >> 11;
  const unsigned long long b = (((unsigned long long)x.v[2] << 32) | x.v[3]) >> 11;
  const double u1 = (double)(a + 1ull) * 1.1102230246251565404236316680908203125e-16;
  const double u2 = (double)b * 1.1102230246251565404236316680908203125e-16;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
"#;

const HYPOT_F64: &str = r#"static __device__ __forceinline__ double lf_hypot_f64(double x, double y) {
  const double a = fabs(x), b = fabs(y);
  if (isinf(a) || isinf(b)) return __longlong_as_double(0x7ff0000000000000LL);
  if (isnan(a) || isnan(b)) return a + b;
  const double hi = a > b ? a : b, lo = a > b ? b : a;
  if (hi == 0.0) return 0.0;
  const double r = lo / hi;
  return hi * sqrt(1.0 + r * r);
}
"#;

const INT_FLOORDIV: &str = r#"static __device__ __forceinline__ $I lf_floordiv_$S($I a, $I b) {
  if (b == 0) return 0;
  if (b == -1) return ($I)(($U)0 - ($U)a);
  const $I q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
"#;

const INT_MOD: &str = r#"static __device__ __forceinline__ $I lf_mod_$S($I a, $I b) {
  if (b == 0 || b == -1) return 0;
  const $I r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"#;

const INT_POW: &str = r#"static __device__ __forceinline__ $I lf_pow_$S($I a, $I b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  $U r = 1, x = ($U)a, e = ($U)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return ($I)r;
}
"#;

const UINT_FLOORDIV: &str = r#"static __device__ __forceinline__ $I lf_floordiv_$S($I a, $I b) {
  return b == 0 ? ($I)0 : ($I)(a / b);
}
"#;

const UINT_MOD: &str = r#"static __device__ __forceinline__ $I lf_mod_$S($I a, $I b) {
  return b == 0 ? ($I)0 : ($I)(a % b);
}
"#;

const UINT_POW: &str = r#"static __device__ __forceinline__ $I lf_pow_$S($I a, $I b) {
  $U r = 1, x = ($U)a, e = ($U)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return ($I)r;
}
"#;

const FLOAT_TO_INT: &str = r#"static __device__ __forceinline__ $I lf_$S_to_$T($R x) {
  return (x != x || x >= ($R)$LIM || x < -($R)$LIM) ? $MIN : ($I)x;
}
"#;

const FLOAT_TO_U64: &str = r#"static __device__ __forceinline__ unsigned long long lf_$S_to_u64($R x) {
  return (x >= ($R)9223372036854775808.0 && x < ($R)18446744073709551616.0)
      ? (unsigned long long)x : (unsigned long long)lf_$S_to_i64(x);
}
"#;

// 16-bit floats are `unsigned short` bits in generated code: NVRTC finds cuda_fp16.h and
// cuda_bf16.h only through an include path (NVRTC 13: "no directories in search list"), and
// generated kernels include nothing. IEEE half: PTX conversions (to nearest even; NaN stays
// NaN).
const F16_FROM_F32: &str = r#"static __device__ __forceinline__ unsigned short lf_f32_to_f16(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
"#;

const F16_TO_F32: &str = r#"static __device__ __forceinline__ float lf_f16_to_f32(unsigned short h) {
  float x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(h));
  return x;
}
"#;

// bfloat16: the upper half of an f32, rounded to nearest even; NaN stays a quiet NaN.
const BF16_FROM_F32: &str = r#"static __device__ __forceinline__ unsigned short lf_f32_to_bf16(float x) {
  const unsigned int u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
"#;

const BF16_TO_F32: &str = r#"static __device__ __forceinline__ float lf_bf16_to_f32(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}
"#;

// f64 to a 16-bit float with one rounding: to f32 toward zero with the last bit set when
// inexact (round to odd), then to nearest even.
const HALF_FROM_F64: &str = r#"static __device__ __forceinline__ unsigned short lf_f64_to_$H(double x) {
  float t = __double2float_rz(x);
  if (x == x && (double)t != x) t = __uint_as_float(__float_as_uint(t) | 1u);
  return lf_f32_to_$H(t);
}
"#;

const FLOAT_SIGN: &str = r#"static __device__ __forceinline__ $R lf_sign_$S($R x) {
  return x > 0 ? ($R)1 : (x < 0 ? ($R)-1 : (x == 0 ? ($R)0 : x));
}
"#;

const FLOAT_DIVMOD: &str = r#"/* NumPy's npy_divmod (b != 0): floor quotient, remainder with the sign of b. */
static __device__ __forceinline__ $R lf_divmod_$S($R a, $R b, $R* modulus) {
  $R mod = fmod$F(a, b);
  $R div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) { mod += b; div -= ($R)1; }
  } else {
    mod = copysign$F(($R)0, b);
  }
  $R fdiv;
  if (div != 0) {
    fdiv = floor$F(div);
    if (div - fdiv > ($R)0.5) fdiv += ($R)1;
  } else {
    fdiv = copysign$F(($R)0, a / b);
  }
  *modulus = mod;
  return fdiv;
}
"#;

const FLOAT_FLOORDIV: &str = r#"static __device__ __forceinline__ $R lf_floordiv_$S($R a, $R b) {
  if (b == 0) return a / b;
  $R m;
  return lf_divmod_$S(a, b, &m);
}
"#;

const FLOAT_MOD: &str = r#"static __device__ __forceinline__ $R lf_mod_$S($R a, $R b) {
  if (b == 0) return fmod$F(a, b);
  $R m;
  lf_divmod_$S(a, b, &m);
  return m;
}
"#;

/// The template of a complex helper.
fn complex_source(f: CFn) -> &'static str {
    match f {
        CFn::Add => C_ADD,
        CFn::Sub => C_SUB,
        CFn::Mul => C_MUL,
        CFn::Div => C_DIV,
        CFn::Eq => C_EQ,
        CFn::Ne => C_NE,
        CFn::Square => C_SQUARE,
        CFn::Recip => C_RECIP,
        CFn::Sqrt => C_SQRT,
        CFn::Rsqrt => C_RSQRT,
        CFn::Exp => C_EXP,
        CFn::Log => C_LOG,
        CFn::Log2 => C_LOG2,
        CFn::Log10 => C_LOG10,
        CFn::Expm1 => C_EXPM1,
        CFn::Log1p => C_LOG1P,
        CFn::Sinh => C_SINH,
        CFn::Cosh => C_COSH,
        CFn::Tanh => C_TANH,
        CFn::Sin => C_SIN,
        CFn::Cos => C_COS,
        CFn::Tan => C_TAN,
        CFn::Asin => C_ASIN,
        CFn::Acos => C_ACOS,
        CFn::Atan => C_ATAN,
        CFn::Sign => C_SIGN,
        CFn::Pow => C_POW,
        CFn::ExpMul => C_EXPMUL,
        CFn::LogAbs => C_LOGABS,
    }
}

const C_ADD: &str = r#"static __device__ __forceinline__ $C lf_add_$S($C a, $C b) { return $C{a.re + b.re, a.im + b.im}; }
"#;

const C_SUB: &str = r#"static __device__ __forceinline__ $C lf_sub_$S($C a, $C b) { return $C{a.re - b.re, a.im - b.im}; }
"#;

const C_MUL: &str = r#"static __device__ __forceinline__ $C lf_mul_$S($C a, $C b) {
  return $C{$MUL(a.re, b.re) - $MUL(a.im, b.im), $MUL(a.re, b.im) + $MUL(a.im, b.re)};
}
"#;

const C_DIV: &str = r#"/* NumPy's complex division (Smith's algorithm), products rounded separately as NumPy does. */
static __device__ __forceinline__ $C lf_div_$S($C a, $C b) {
  const $R abr = fabs$F(b.re), abi = fabs$F(b.im);
  if (abr >= abi) {
    if (abr == 0 && abi == 0) return $C{a.re / abr, a.im / abr};
    const $R rat = b.im / b.re;
    const $R scl = ($R)1 / (b.re + $MUL(b.im, rat));
    return $C{$MUL(a.re + $MUL(a.im, rat), scl), $MUL(a.im - $MUL(a.re, rat), scl)};
  }
  const $R rat = b.re / b.im;
  const $R scl = ($R)1 / (b.im + $MUL(b.re, rat));
  return $C{$MUL($MUL(a.re, rat) + a.im, scl), $MUL($MUL(a.im, rat) - a.re, scl)};
}
"#;

const C_EQ: &str = r#"static __device__ __forceinline__ bool lf_eq_$S($C a, $C b) { return a.re == b.re && a.im == b.im; }
"#;

const C_NE: &str = r#"static __device__ __forceinline__ bool lf_ne_$S($C a, $C b) { return a.re != b.re || a.im != b.im; }
"#;

const C_SQUARE: &str = r#"static __device__ __forceinline__ $C lf_square_$S($C a) {
  return $C{$MUL(a.re, a.re) - $MUL(a.im, a.im), $MUL(a.re, a.im) + $MUL(a.im, a.re)};
}
"#;

const C_RECIP: &str = r#"/* NumPy's complex reciprocal. */
static __device__ __forceinline__ $C lf_recip_$S($C z) {
  if (fabs$F(z.im) <= fabs$F(z.re)) {
    const $R r = z.im / z.re, d = z.re + $MUL(z.im, r);
    return $C{($R)1 / d, -r / d};
  }
  const $R r = z.re / z.im, d = $MUL(z.re, r) + z.im;
  return $C{r / d, ($R)-1 / d};
}
"#;

const C_RSQRT: &str = r#"static __device__ __forceinline__ $C lf_rsqrt_$S($C z) { return lf_recip_$S(lf_sqrt_$S(z)); }
"#;

const C_LOG2: &str = r#"static __device__ __forceinline__ $C lf_log2_$S($C z) {
  const $C l = lf_log_$S(z);
  return $C{l.re * ($R)1.44269504088896340736, l.im * ($R)1.44269504088896340736};
}
"#;

const C_LOG10: &str = r#"static __device__ __forceinline__ $C lf_log10_$S($C z) {
  const $C l = lf_log_$S(z);
  return $C{l.re * ($R)0.434294481903251827651, l.im * ($R)0.434294481903251827651};
}
"#;

const C_SIGN: &str = r#"/* NumPy 2's complex sign: z / |z|, 0 at 0. */
static __device__ __forceinline__ $C lf_sign_$S($C z) {
  const $R m = hypot$F(z.re, z.im);
  if (m != m) return $C{$NAN, $NAN};
  if (m == $INF) {
    if (fabs$F(z.re) == $INF) {
      if (fabs$F(z.im) == $INF) return $C{$NAN, $NAN};
      return $C{z.re > 0 ? ($R)1 : ($R)-1, ($R)0};
    }
    return $C{($R)0, z.im > 0 ? ($R)1 : ($R)-1};
  }
  if (m == 0) return $C{($R)0, ($R)0};
  return $C{z.re / m, z.im / m};
}
"#;

const C_POW: &str = r#"/* NumPy's complex power: exact small integer exponents, else exp(b log a). */
static __device__ $C lf_pow_$S($C a, $C b) {
  if (b.re == 0 && b.im == 0) return $C{($R)1, ($R)0};
  if (a.re == 0 && a.im == 0) {
    if (b.re > 0) return $C{($R)0, ($R)0};
    return $C{$NAN, $NAN};
  }
  if (b.im == 0 && fabs$F(b.re) < ($R)100 && b.re == trunc$F(b.re)) {
    const int n = (int)b.re;
    if (n == 1) return a;
    if (n == 2) return lf_mul_$S(a, a);
    if (n == 3) return lf_mul_$S(a, lf_mul_$S(a, a));
    unsigned int m = n < 0 ? -n : n;
    $C acc = $C{($R)1, ($R)0}, p = a;
    while (true) {
      if (m & 1u) acc = lf_mul_$S(acc, p);
      m >>= 1;
      if (m == 0) break;
      p = lf_mul_$S(p, p);
    }
    return n < 0 ? lf_div_$S($C{($R)1, ($R)0}, acc) : acc;
  }
  return lf_exp_$S(lf_mul_$S(b, lf_log_$S(a)));
}
"#;
