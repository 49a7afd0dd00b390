//! The test oracle: a deliberately naive per-op evaluator on ndarray that writes NumPy's
//! semantics out again (promotion, casts, floor division, NaN-propagating max/min, ...),
//! independent of lazyfuse's internals, plus readback and comparison helpers.
//!
//! Every array is an `ArrayD<V>` of tagged values with its dtype; every op is plain Rust
//! math per element in the dtype's own precision (F32 work rounds to f32 after each op,
//! I32 wraps as i32). Where NumPy has no such dtype (float16, int8) the oracle follows
//! lazyfuse's documented substitutes: Bool goes to F32 in float functions and to I32 in
//! `//`, `%` and `**`; integer `reciprocal` computes in F64; integers to a negative integer
//! power give the integer part of the real result.
#![allow(dead_code)]

use lazyfuse as lf;
use lf::{Array, DType, Device};
use ndarray::{ArrayD, Dimension, IxDyn, SliceInfoElem};
use num_complex::{Complex32 as Cf, Complex64 as Cd};

// ------------------------------------------------------------------------------------
// Values
// ------------------------------------------------------------------------------------

/// One element of any dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V {
    Bool(bool),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    C64(Cf),
    C128(Cd),
}

/// NumPy's float -> int32 cast (x86): truncation; NaN, infinities and values out of range
/// give `i32::MIN`.
pub fn f_to_i32(x: f64) -> i32 {
    let t = x.trunc();
    if (-2147483648.0..=2147483647.0).contains(&t) {
        t as i32
    } else {
        i32::MIN
    }
}

/// NumPy's float -> int64 cast (x86): as [`f_to_i32`] with `i64::MIN`.
pub fn f_to_i64(x: f64) -> i64 {
    let t = x.trunc();
    if (-9223372036854775808.0..9223372036854775808.0).contains(&t) {
        t as i64
    } else {
        i64::MIN
    }
}

impl V {
    pub fn dtype(self) -> DType {
        match self {
            V::Bool(_) => DType::Bool,
            V::I32(_) => DType::I32,
            V::I64(_) => DType::I64,
            V::F32(_) => DType::F32,
            V::F64(_) => DType::F64,
            V::C64(_) => DType::C64,
            V::C128(_) => DType::C128,
        }
    }

    /// Real and imaginary parts as f64 (exact for every dtype but I64 beyond 2^53).
    pub fn parts(self) -> (f64, f64) {
        match self {
            V::Bool(b) => (b as u8 as f64, 0.0),
            V::I32(x) => (x as f64, 0.0),
            V::I64(x) => (x as f64, 0.0),
            V::F32(x) => (x as f64, 0.0),
            V::F64(x) => (x, 0.0),
            V::C64(z) => (z.re as f64, z.im as f64),
            V::C128(z) => (z.re, z.im),
        }
    }

    /// NumPy `astype` (complex to real drops the imaginary part).
    pub fn cast(self, to: DType) -> V {
        if self.dtype() == to {
            return self;
        }
        let (re, im) = self.parts();
        match to {
            DType::Bool => V::Bool(match self {
                V::I64(x) => x != 0,
                _ => re != 0.0 || im != 0.0,
            }),
            DType::I32 => V::I32(match self {
                V::Bool(b) => b as i32,
                V::I64(x) => x as i32, // wraps, as NumPy
                _ => f_to_i32(re),
            }),
            DType::I64 => V::I64(match self {
                V::Bool(b) => b as i64,
                V::I32(x) => x as i64,
                _ => f_to_i64(re),
            }),
            DType::F32 => V::F32(match self {
                V::I64(x) => x as f32, // one rounding
                _ => re as f32,
            }),
            DType::F64 => V::F64(match self {
                V::I64(x) => x as f64,
                _ => re,
            }),
            DType::C64 => V::C64(match self {
                V::I64(x) => Cf::new(x as f32, 0.0),
                _ => Cf::new(re as f32, im as f32),
            }),
            DType::C128 => V::C128(match self {
                V::I64(x) => Cd::new(x as f64, 0.0),
                _ => Cd::new(re, im),
            }),
            d => unsupported(d),
        }
    }

    pub fn as_bool(self) -> bool {
        match self.cast(DType::Bool) {
            V::Bool(b) => b,
            _ => unreachable!(),
        }
    }

    pub fn is_nan(self) -> bool {
        let (re, im) = self.parts();
        re.is_nan() || im.is_nan()
    }
    pub fn is_inf(self) -> bool {
        let (re, im) = self.parts();
        !self.is_nan() && (re.is_infinite() || im.is_infinite())
    }
}

/// Host element types and their oracle values.
pub trait HostEl: lf::Element {
    fn to_v(self) -> V;
    fn from_v(v: V) -> Self;
}
macro_rules! host_el {
    ($t:ty, $v:ident) => {
        impl HostEl for $t {
            fn to_v(self) -> V {
                V::$v(self)
            }
            fn from_v(v: V) -> Self {
                match v.cast(DType::$v) {
                    V::$v(x) => x,
                    _ => unreachable!(),
                }
            }
        }
        impl From<$t> for V {
            fn from(x: $t) -> V {
                V::$v(x)
            }
        }
    };
}
host_el!(bool, Bool);
host_el!(i32, I32);
host_el!(i64, I64);
host_el!(f32, F32);
host_el!(f64, F64);
host_el!(Cf, C64);
host_el!(Cd, C128);

/// A weak scalar as a lazyfuse operand (the Rust type of the value decides).
impl From<V> for lf::Operand {
    fn from(v: V) -> lf::Operand {
        match v {
            V::Bool(x) => x.into(),
            V::I32(x) => x.into(),
            V::I64(x) => x.into(),
            V::F32(x) => x.into(),
            V::F64(x) => x.into(),
            V::C64(x) => x.into(),
            V::C128(x) => x.into(),
        }
    }
}

/// An oracle array: values and dtype.
#[derive(Clone, Debug)]
pub struct OVal {
    pub dtype: DType,
    pub a: ArrayD<V>,
}

impl OVal {
    /// From values of one dtype (C order).
    pub fn new(dtype: DType, shape: &[usize], vals: Vec<V>) -> OVal {
        assert!(
            vals.iter().all(|v| v.dtype() == dtype),
            "OVal::new: mixed dtypes"
        );
        OVal {
            dtype,
            a: ArrayD::from_shape_vec(IxDyn(shape), vals).expect("OVal::new: shape"),
        }
    }
    /// From host values.
    pub fn from_vec<T: HostEl>(v: Vec<T>, shape: &[usize]) -> OVal {
        OVal::new(T::DTYPE, shape, v.into_iter().map(HostEl::to_v).collect())
    }
    /// A 0-d value.
    pub fn scalar(v: V) -> OVal {
        OVal::new(v.dtype(), &[], vec![v])
    }
    /// `shape` filled with `v`.
    pub fn full(shape: &[usize], v: V) -> OVal {
        let n = shape.iter().product();
        OVal::new(v.dtype(), shape, vec![v; n])
    }
    pub fn shape(&self) -> &[usize] {
        self.a.shape()
    }
    pub fn size(&self) -> usize {
        self.a.len()
    }
    /// Values in C order.
    pub fn vals(&self) -> Vec<V> {
        self.a.iter().copied().collect()
    }
    /// Values as host elements (C order); panics unless `T` matches the dtype.
    pub fn to_vec<T: HostEl>(&self) -> Vec<T> {
        assert_eq!(T::DTYPE, self.dtype, "OVal::to_vec: dtype");
        self.a.iter().map(|&v| T::from_v(v)).collect()
    }
    /// Elementwise map to `dtype`.
    pub fn map(&self, dtype: DType, f: impl Fn(V) -> V) -> OVal {
        OVal {
            dtype,
            a: self.a.mapv(|x| {
                let y = f(x);
                debug_assert_eq!(y.dtype(), dtype);
                y
            }),
        }
    }
    /// NumPy `astype`.
    pub fn astype(&self, to: DType) -> OVal {
        self.map(to, |v| v.cast(to))
    }

    /// Uploads to `dev` as a lazyfuse array.
    pub fn to_lf(&self, dev: &Device) -> Array {
        fn up<T: HostEl>(o: &OVal, dev: &Device) -> Array {
            Array::from_vec_on(o.to_vec::<T>(), o.shape(), dev).expect("upload")
        }
        match self.dtype {
            DType::Bool => up::<bool>(self, dev),
            DType::I32 => up::<i32>(self, dev),
            DType::I64 => up::<i64>(self, dev),
            DType::F32 => up::<f32>(self, dev),
            DType::F64 => up::<f64>(self, dev),
            DType::C64 => up::<Cf>(self, dev),
            DType::C128 => up::<Cd>(self, dev),
            d => unsupported(d),
        }
    }

    /// Reads a lazyfuse array back (evaluating it).
    pub fn fetch(x: &Array) -> lf::Result<OVal> {
        fn get<T: HostEl>(x: &Array) -> lf::Result<OVal> {
            let h = x.to_host::<T>()?;
            Ok(OVal {
                dtype: T::DTYPE,
                a: h.mapv(HostEl::to_v),
            })
        }
        match x.dtype() {
            DType::Bool => get::<bool>(x),
            DType::I32 => get::<i32>(x),
            DType::I64 => get::<i64>(x),
            DType::F32 => get::<f32>(x),
            DType::F64 => get::<f64>(x),
            DType::C64 => get::<Cf>(x),
            DType::C128 => get::<Cd>(x),
            d => unsupported(d),
        }
    }
}

// ------------------------------------------------------------------------------------
// Promotion (NumPy 2, NEP 50), written out from numpy_promotion.txt
// ------------------------------------------------------------------------------------

fn dt_index(d: DType) -> usize {
    match d {
        DType::Bool => 0,
        DType::I32 => 1,
        DType::I64 => 2,
        DType::F32 => 3,
        DType::F64 => 4,
        DType::C64 => 5,
        DType::C128 => 6,
        d => unsupported(d),
    }
}

/// The dtypes the oracle models.
pub const DTYPES: [DType; 7] = [
    DType::Bool,
    DType::I32,
    DType::I64,
    DType::F32,
    DType::F64,
    DType::C64,
    DType::C128,
];

/// The oracle covers bool, int32, int64, float32, float64, complex64 and complex128; the
/// other dtypes are tested against NumPy's values (`tests/dtypes.rs`).
fn unsupported(d: DType) -> ! {
    panic!("the oracle does not model dtype {d}")
}

/// `numpy.result_type` for two array dtypes.
pub fn result_type(a: DType, b: DType) -> DType {
    use DType::*;
    const T: [[DType; 7]; 7] = [
        //   b      i4    i8    f4    f8    c8    c16
        [Bool, I32, I64, F32, F64, C64, C128],      // b
        [I32, I32, I64, F64, F64, C128, C128],      // i4
        [I64, I64, I64, F64, F64, C128, C128],      // i8
        [F32, F64, F64, F32, F64, C64, C128],       // f4
        [F64, F64, F64, F64, F64, C128, C128],      // f8
        [C64, C128, C128, C64, C128, C64, C128],    // c8
        [C128, C128, C128, C128, C128, C128, C128], // c16
    ];
    T[dt_index(a)][dt_index(b)]
}

/// The kind of a weak (Rust literal) scalar: 0 bool, 1 int, 2 float, 3 complex.
fn weak_kind(v: V) -> u8 {
    match v {
        V::Bool(_) => 0,
        V::I32(_) | V::I64(_) => 1,
        V::F32(_) | V::F64(_) => 2,
        V::C64(_) | V::C128(_) => 3,
    }
}

/// NEP 50: an array of dtype `d` with a weak scalar of kind `k`.
fn weak_result(d: DType, k: u8) -> DType {
    use DType::*;
    match (k, d) {
        (0, d) => d,
        (1, Bool) => I64,
        (1, d) => d,
        (2, Bool | I32 | I64) => F64,
        (2, d) => d,
        (_, F32 | C64) => C64,
        _ => C128,
    }
}

/// The dtype a lone weak scalar takes.
fn weak_default(k: u8) -> DType {
    [DType::Bool, DType::I64, DType::F64, DType::C128][k as usize]
}

/// A binary operand: an array or a weak scalar.
#[derive(Clone, Copy, Debug)]
pub enum Opnd<'a> {
    A(&'a OVal),
    S(V),
}

impl<'a> From<&'a OVal> for Opnd<'a> {
    fn from(o: &'a OVal) -> Self {
        Opnd::A(o)
    }
}

impl Opnd<'_> {
    fn shape(&self) -> Vec<usize> {
        match self {
            Opnd::A(o) => o.shape().to_vec(),
            Opnd::S(_) => vec![],
        }
    }
    /// As an array of `dtype` broadcast to `shape`.
    fn expand(&self, dtype: DType, shape: &[usize]) -> ArrayD<V> {
        match self {
            Opnd::A(o) => broadcast(&o.astype(dtype), shape).a,
            Opnd::S(v) => ArrayD::from_elem(IxDyn(shape), v.cast(dtype)),
        }
    }
}

/// The common dtype of operands under NEP 50.
pub fn common_dtype(ops: &[Opnd]) -> DType {
    let arrays: Vec<DType> = ops
        .iter()
        .filter_map(|o| match o {
            Opnd::A(a) => Some(a.dtype),
            _ => None,
        })
        .collect();
    if arrays.is_empty() {
        return ops
            .iter()
            .filter_map(|o| match o {
                Opnd::S(v) => Some(weak_default(weak_kind(*v))),
                _ => None,
            })
            .fold(DType::Bool, result_type);
    }
    let mut d = arrays[1..]
        .iter()
        .fold(arrays[0], |x, &y| result_type(x, y));
    for o in ops {
        if let Opnd::S(v) = o {
            d = weak_result(d, weak_kind(*v));
        }
    }
    d
}

/// The dtype float functions compute in (Bool -> F32 as lazyfuse documents; ints -> F64).
pub fn float_dtype(d: DType) -> DType {
    match d {
        DType::Bool => DType::F32,
        DType::I32 | DType::I64 => DType::F64,
        d => d,
    }
}

// ------------------------------------------------------------------------------------
// Broadcasting
// ------------------------------------------------------------------------------------

/// NumPy's broadcast shape, or `None`.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for k in 0..n {
        let da = if k + a.len() >= n {
            a[k + a.len() - n]
        } else {
            1
        };
        let db = if k + b.len() >= n {
            b[k + b.len() - n]
        } else {
            1
        };
        out[k] = if da == 1 {
            db
        } else if db == 1 || da == db {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

/// `broadcast_to`; panics when impossible.
pub fn broadcast(x: &OVal, shape: &[usize]) -> OVal {
    OVal {
        dtype: x.dtype,
        a: x.a
            .broadcast(IxDyn(shape))
            .unwrap_or_else(|| panic!("oracle broadcast {:?} -> {shape:?}", x.shape()))
            .to_owned(),
    }
}

// ------------------------------------------------------------------------------------
// Unary ops
// ------------------------------------------------------------------------------------

/// Unary operations and methods of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Un {
    Neg,
    /// The `!` operator (Bool only).
    Not,
    LogicalNot,
    Abs,
    Sqrt,
    Rsqrt,
    Exp,
    Expm1,
    Log,
    Log1p,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Floor,
    Ceil,
    Round,
    Trunc,
    Sign,
    Square,
    Reciprocal,
    Real,
    Imag,
    Conj,
    Angle,
    IsNan,
    IsInf,
    IsFinite,
}

impl Un {
    pub const ALL: [Un; 35] = [
        Un::Neg,
        Un::Not,
        Un::LogicalNot,
        Un::Abs,
        Un::Sqrt,
        Un::Rsqrt,
        Un::Exp,
        Un::Expm1,
        Un::Log,
        Un::Log1p,
        Un::Log2,
        Un::Log10,
        Un::Sin,
        Un::Cos,
        Un::Tan,
        Un::Asin,
        Un::Acos,
        Un::Atan,
        Un::Sinh,
        Un::Cosh,
        Un::Tanh,
        Un::Floor,
        Un::Ceil,
        Un::Round,
        Un::Trunc,
        Un::Sign,
        Un::Square,
        Un::Reciprocal,
        Un::Real,
        Un::Imag,
        Un::Conj,
        Un::Angle,
        Un::IsNan,
        Un::IsInf,
        Un::IsFinite,
    ];

    /// Float functions: inputs go to [`float_dtype`] first.
    pub fn is_float_fn(self) -> bool {
        use Un::*;
        matches!(
            self,
            Sqrt | Rsqrt
                | Exp
                | Expm1
                | Log
                | Log1p
                | Log2
                | Log10
                | Sin
                | Cos
                | Tan
                | Asin
                | Acos
                | Atan
                | Sinh
                | Cosh
                | Tanh
                | Reciprocal
                | Angle
        )
    }

    /// Results that are not correctly rounded (library-dependent in the last bits).
    pub fn is_transcendental(self) -> bool {
        self.is_float_fn() && !matches!(self, Un::Sqrt | Un::Reciprocal)
    }

    /// The lazyfuse call.
    pub fn apply(self, a: &Array) -> Array {
        use Un::*;
        match self {
            Neg => -a,
            Not => !a,
            LogicalNot => a.logical_not(),
            Abs => a.abs(),
            Sqrt => a.sqrt(),
            Rsqrt => a.rsqrt(),
            Exp => a.exp(),
            Expm1 => a.expm1(),
            Log => a.log(),
            Log1p => a.log1p(),
            Log2 => a.log2(),
            Log10 => a.log10(),
            Sin => a.sin(),
            Cos => a.cos(),
            Tan => a.tan(),
            Asin => a.asin(),
            Acos => a.acos(),
            Atan => a.atan(),
            Sinh => a.sinh(),
            Cosh => a.cosh(),
            Tanh => a.tanh(),
            Floor => a.floor(),
            Ceil => a.ceil(),
            Round => a.round(),
            Trunc => a.trunc(),
            Sign => a.sign(),
            Square => a.square(),
            Reciprocal => a.reciprocal(),
            Real => a.real(),
            Imag => a.imag(),
            Conj => a.conj(),
            Angle => a.angle(),
            IsNan => a.isnan(),
            IsInf => a.isinf(),
            IsFinite => a.isfinite(),
        }
    }
}

macro_rules! float_fn {
    ($name:ident, $t:ty) => {
        fn $name(op: Un, x: $t) -> $t {
            use Un::*;
            match op {
                Sqrt => x.sqrt(),
                Rsqrt => 1.0 / x.sqrt(),
                Exp => x.exp(),
                Expm1 => x.exp_m1(),
                Log => x.ln(),
                Log1p => x.ln_1p(),
                Log2 => x.log2(),
                Log10 => x.log10(),
                Sin => x.sin(),
                Cos => x.cos(),
                Tan => x.tan(),
                Asin => x.asin(),
                Acos => x.acos(),
                Atan => x.atan(),
                Sinh => x.sinh(),
                Cosh => x.cosh(),
                Tanh => x.tanh(),
                Reciprocal => 1.0 / x,
                // angle of a real: atan2(+0, x)
                Angle => (0.0 as $t).atan2(x),
                Floor => x.floor(),
                Ceil => x.ceil(),
                Round => x.round_ties_even(),
                Trunc => x.trunc(),
                Sign => {
                    if x.is_nan() {
                        x
                    } else if x > 0.0 {
                        1.0
                    } else if x < 0.0 {
                        -1.0
                    } else {
                        0.0
                    }
                }
                Square => x * x,
                Abs => x.abs(),
                Neg => -x,
                _ => unreachable!("float_fn {op:?}"),
            }
        }
    };
}
float_fn!(f32_fn, f32);
float_fn!(f64_fn, f64);

macro_rules! complex_fns {
    ($cfn:ident, $cmul:ident, $cdiv:ident, $cpow:ident, $c:ty, $t:ty) => {
        /// Naive complex product (NumPy's formula).
        pub fn $cmul(a: $c, b: $c) -> $c {
            <$c>::new(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re)
        }

        /// Smith's division, as NumPy's complex divide.
        pub fn $cdiv(a: $c, b: $c) -> $c {
            let (ar, ai, br, bi) = (a.re, a.im, b.re, b.im);
            if br.abs() >= bi.abs() {
                if br.abs() == 0.0 && bi.abs() == 0.0 {
                    <$c>::new(ar / br.abs(), ai / br.abs())
                } else {
                    let rat = bi / br;
                    let scl = 1.0 / (br + bi * rat);
                    <$c>::new((ar + ai * rat) * scl, (ai - ar * rat) * scl)
                }
            } else {
                let rat = br / bi;
                let scl = 1.0 / (bi + br * rat);
                <$c>::new((ar * rat + ai) * scl, (ai * rat - ar) * scl)
            }
        }

        /// NumPy's complex power (`npy_cpow`): zero exponent gives 1, a zero base gives 0
        /// when the exponent's real part is positive (NaN otherwise), small integer
        /// exponents multiply.
        pub fn $cpow(a: $c, b: $c) -> $c {
            let one = <$c>::new(1.0, 0.0);
            if b.re == 0.0 && b.im == 0.0 {
                return one;
            }
            if a.re == 0.0 && a.im == 0.0 {
                return if b.re > 0.0 {
                    <$c>::new(0.0, 0.0)
                } else {
                    <$c>::new(<$t>::NAN, <$t>::NAN)
                };
            }
            if b.im == 0.0 && b.re.fract() == 0.0 && b.re.abs() < 100.0 {
                let n = b.re as i64;
                match n {
                    1 => return a,
                    2 => return $cmul(a, a),
                    3 => return $cmul($cmul(a, a), a),
                    _ => {
                        let mut m = n.unsigned_abs();
                        let mut acc = one;
                        let mut p = a;
                        loop {
                            if m & 1 == 1 {
                                acc = $cmul(acc, p);
                            }
                            m >>= 1;
                            if m == 0 {
                                break;
                            }
                            p = $cmul(p, p);
                        }
                        return if n < 0 { $cdiv(one, acc) } else { acc };
                    }
                }
            }
            cexp($cmul(b, a.ln()))
        }

        /// NumPy's complex `reciprocal` loop (not `1 / z`: `reciprocal(2+0i) = 0.5-0i`, and
        /// `reciprocal(0) = NaN+NaNi`).
        fn crecip(z: $c) -> $c {
            let (x, y) = (z.re, z.im);
            if y.abs() <= x.abs() {
                let r = y / x;
                let d = x + y * r;
                <$c>::new(1.0 / d, -r / d)
            } else {
                let r = x / y;
                let d = x * r + y;
                <$c>::new(r / d, -1.0 / d)
            }
        }

        /// C99 `cexp`: a zero imaginary part stays exactly (`exp(1000+0i) = inf+0i`).
        pub(super) fn cexp(z: $c) -> $c {
            if z.im == 0.0 {
                <$c>::new(z.re.exp(), z.im)
            } else {
                z.exp()
            }
        }

        /// C99 `csqrt` (the sign of a zero imaginary part picks the side of the cut).
        /// Finite values by `t = sqrt((|x| + |z|) / 2)`, the smaller part as `|y| / 2t`:
        /// accurate in each part, where the polar form (`num_complex`'s) loses the
        /// small part next to a cut (`sqrt(-2.862-0.113i)` has the real part 21 f32 ulp
        /// off in f32).
        fn csqrt(z: $c) -> $c {
            let (x, y) = (z.re, z.im);
            if y == 0.0 && !x.is_nan() {
                if x >= 0.0 {
                    <$c>::new(x.sqrt(), y)
                } else {
                    <$c>::new(0.0, (-x).sqrt().copysign(y))
                }
            } else if !(x.is_finite() && y.is_finite()) {
                z.sqrt()
            } else {
                let t = (0.5 * x.abs() + 0.5 * x.hypot(y)).sqrt();
                let s = y.abs() / (2.0 * t);
                if x >= 0.0 {
                    <$c>::new(t, s.copysign(y))
                } else {
                    <$c>::new(s, t.copysign(y))
                }
            }
        }

        /// `tanh z = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y)`: the
        /// denominator is `num_complex`'s `(cosh 2x + cos 2y) / 2` written as a sum of
        /// squares, which does not cancel next to a pole (`num_complex` leaves
        /// `tan(-3037000500)` 1e-13 off relative); `sign(x) + 4 sin y cos y e^{-2|x|} i`
        /// once `e^{-2|x|}` is below the precision.
        fn ctanh(z: $c) -> $c {
            let (x, y) = (z.re, z.im);
            if !(x.is_finite() && y.is_finite()) {
                return z.tanh();
            }
            let (s, c) = y.sin_cos();
            if x.abs() > 20.0 {
                let e = (-2.0 * x.abs()).exp();
                return <$c>::new((1.0 as $t).copysign(x), 4.0 * s * c * e);
            }
            let (sh, ch) = (x.sinh(), x.cosh());
            let d = sh * sh + c * c;
            <$c>::new(sh * ch / d, s * c / d)
        }

        /// `atanh(u + iv) = log1p(4u / ((1 - u)^2 + v^2)) / 4 + i atan2(2v, (1 - u)(1 + u) -
        /// v^2) / 2` (the real part by `|u|`): accurate in each part, and the signs of zeros pick the side of the
        /// cuts as in C99 (`num_complex`'s `atan(-0+2i)` is `+pi/2 + 0.549i`, C99's and
        /// NumPy's `-pi/2 + 0.549i`).
        fn catanh(w: $c) -> $c {
            let (u, v) = (w.re, w.im);
            if !(u.is_finite() && v.is_finite()) {
                return w.atanh();
            }
            // by |u| (`atanh(-w) = -atanh(w)`), where the argument of `log1p` is >= 0
            let a = u.abs();
            let re = (0.25 * (4.0 * a / ((1.0 - a) * (1.0 - a) + v * v)).ln_1p()).copysign(u);
            let im = 0.5 * (2.0 * v).atan2((1.0 - u) * (1.0 + u) - v * v);
            <$c>::new(re, im)
        }

        /// Kahan's `asin`/`acos`, which honor signed zeros on the branch cuts as C99 and
        /// NumPy do (`asin(2+0i) = pi/2 + 1.317i`, `asin(2-0i) = pi/2 - 1.317i`).
        fn casin_cacos(z: $c, acos: bool) -> $c {
            let s1m = csqrt(<$c>::new(1.0 - z.re, -z.im));
            let s1p = csqrt(<$c>::new(1.0 + z.re, z.im));
            if acos {
                let re = 2.0 * s1m.re.atan2(s1p.re);
                let im = $cmul(s1p.conj(), s1m).im.asinh();
                <$c>::new(re, im)
            } else {
                let re = z.re.atan2($cmul(s1m, s1p).re);
                let im = $cmul(s1m.conj(), s1p).im.asinh();
                <$c>::new(re, im)
            }
        }

        pub fn $cfn(op: Un, z: $c) -> $c {
            use Un::*;
            if <$c>::NARROW && op.is_float_fn() && op != Reciprocal {
                // complex64 functions are computed in complex128 and rounded once: done in
                // f32, `num_complex`'s formulas lose the smaller part of a result (the f32
                // `|z|` in `log10(z)` near `|z| = 1` leaves `Re` 1e-5 off relative)
                return <$c>::narrow(super::c128m::c128_fn(op, z.widen()));
            }
            match op {
                Sqrt => csqrt(z),
                Rsqrt => crecip(csqrt(z)),
                Exp => cexp(z),
                Expm1 => <$c>::narrow(cexpm1_wide(z.widen())),
                Log => z.ln(),
                Log1p => <$c>::narrow(clog1p_wide(z.widen())),
                Log2 => z.log2(),
                Log10 => z.log10(),
                Sin => z.sin(),
                Cos => z.cos(),
                Tan => {
                    // tan z = -i tanh(iz)
                    let t = ctanh(<$c>::new(-z.im, z.re));
                    <$c>::new(t.im, -t.re)
                }
                Asin => casin_cacos(z, false),
                Acos => casin_cacos(z, true),
                Atan => {
                    // atan z = -i atanh(iz)
                    let t = catanh(<$c>::new(-z.im, z.re));
                    <$c>::new(t.im, -t.re)
                }
                Sinh => z.sinh(),
                Cosh => z.cosh(),
                Tanh => ctanh(z),
                Reciprocal => crecip(z),
                Square => $cmul(z, z),
                Neg => -z,
                Conj => z.conj(),
                Sign => {
                    if z.re.is_nan() || z.im.is_nan() {
                        <$c>::new(<$t>::NAN, <$t>::NAN)
                    } else if z.re == 0.0 && z.im == 0.0 {
                        <$c>::new(0.0, 0.0)
                    } else {
                        let m = z.re.hypot(z.im);
                        <$c>::new(z.re / m, z.im / m)
                    }
                }
                _ => unreachable!("complex fn {op:?}"),
            }
        }
    };
}
/// Complex values to and from complex128, where [`cexpm1_wide`] and [`clog1p_wide`]
/// compute (complex64 results are then rounded once).
trait Wide: Sized {
    /// True for complex64.
    const NARROW: bool;
    fn widen(self) -> Cd;
    fn narrow(z: Cd) -> Self;
}
impl Wide for Cf {
    const NARROW: bool = true;
    fn widen(self) -> Cd {
        Cd::new(self.re as f64, self.im as f64)
    }
    fn narrow(z: Cd) -> Cf {
        Cf::new(z.re as f32, z.im as f32)
    }
}
impl Wide for Cd {
    const NARROW: bool = false;
    fn widen(self) -> Cd {
        self
    }
    fn narrow(z: Cd) -> Cd {
        z
    }
}

/// `exp(z) - 1` without the cancellation of that formula near 0 (`exp(1e-10 + 1e-10i) - 1`
/// keeps about 6 digits in f64). For `x <= 1`, `Re = e^x cos y - 1 = expm1(x) - 2 e^x
/// sin^2(y/2)`: both terms are accurate and at most `e` times `|expm1(z)|`, so their
/// difference is accurate relative to `|expm1(z)|` (a different rearrangement from
/// lazyfuse's `expm1(x) cos y - 2 sin^2(y/2)`). For `x > 1`, `|exp(z)| > e` and `exp(z) - 1`
/// loses nothing; `e^x` is applied as `e^{x/2} e^{x/2}` so a finite result past `exp`'s
/// overflow threshold stays finite. A zero imaginary part stays exactly (C99's `cexp`).
fn cexpm1_wide(z: Cd) -> Cd {
    let (x, y) = (z.re, z.im);
    if !(x.is_finite() && y.is_finite()) {
        return c128m::cexp(z) - Cd::new(1.0, 0.0);
    }
    if y == 0.0 {
        return Cd::new(x.exp_m1(), y);
    }
    if x > 1.0 {
        let h = (0.5 * x).exp();
        return Cd::new(h * (h * y.cos()) - 1.0, h * (h * y.sin()));
    }
    let s = (0.5 * y).sin();
    Cd::new(x.exp_m1() - 2.0 * x.exp() * s * s, x.exp() * y.sin())
}

/// `log(1 + z)` without the rounding of `1 + z` near 0. There `log|1 + z| = log1p(x) +
/// log1p(t^2) / 2` with `t = y / (1 + x)` (`|x|, |y| < 1/2`, so `1 + x` is near 1 and only
/// the exact `x` enters `log1p`); elsewhere `1 + z` is far from 0 relative to its rounding
/// and `log|w| = log(m) + log1p((n/m)^2) / 2` (`m`, `n` the larger and smaller of `|Re w|`,
/// `|Im w|`) avoids overflow. The argument is `atan2(y, 1 + x)`.
fn clog1p_wide(z: Cd) -> Cd {
    let (x, y) = (z.re, z.im);
    if !(x.is_finite() && y.is_finite()) {
        return (z + Cd::new(1.0, 0.0)).ln();
    }
    let u = 1.0 + x;
    let re = if x.abs() < 0.5 && y.abs() < 0.5 {
        let t = y / u;
        x.ln_1p() + 0.5 * (t * t).ln_1p()
    } else {
        let (m, n) = (u.abs().max(y.abs()), u.abs().min(y.abs()));
        if m == 0.0 {
            f64::NEG_INFINITY
        } else {
            let r = n / m;
            m.ln() + 0.5 * (r * r).ln_1p()
        }
    };
    Cd::new(re, y.atan2(u))
}

mod c64m {
    use super::*;
    complex_fns!(c64_fn, cmul64, cdiv64, cpow64, Cf, f32);
}
mod c128m {
    use super::*;
    complex_fns!(c128_fn, cmul128, cdiv128, cpow128, Cd, f64);
}
pub use c128m::{c128_fn, cdiv128, cmul128, cpow128};
pub use c64m::{c64_fn, cdiv64, cmul64, cpow64};

/// Unary op with NumPy (and lazyfuse's documented) dtype rules; `None` where the op does
/// not accept the dtype (lazyfuse must panic there).
pub fn unary(op: Un, x: &OVal) -> Option<OVal> {
    use DType as D;
    use Un::*;
    let d = x.dtype;
    match op {
        Not => (d == D::Bool).then(|| x.map(D::Bool, |v| V::Bool(!v.as_bool()))),
        LogicalNot => Some(x.map(D::Bool, |v| V::Bool(!v.as_bool()))),
        IsNan => Some(x.map(D::Bool, |v| V::Bool(v.is_nan()))),
        IsInf => Some(x.map(D::Bool, |v| V::Bool(v.is_inf()))),
        IsFinite => Some(x.map(D::Bool, |v| V::Bool(!v.is_nan() && !v.is_inf()))),
        Real => match d {
            D::C64 => Some(x.map(D::F32, |v| V::F32(v.parts().0 as f32))),
            D::C128 => Some(x.map(D::F64, |v| V::F64(v.parts().0))),
            _ => Some(x.clone()),
        },
        Imag => match d {
            D::C64 => Some(x.map(D::F32, |v| V::F32(v.parts().1 as f32))),
            D::C128 => Some(x.map(D::F64, |v| V::F64(v.parts().1))),
            _ => Some(x.map(d, move |_| V::I32(0).cast(d))),
        },
        Conj => match d {
            D::C64 | D::C128 => Some(x.map(d, |v| match v {
                V::C64(z) => V::C64(z.conj()),
                V::C128(z) => V::C128(z.conj()),
                _ => unreachable!(),
            })),
            _ => Some(x.clone()),
        },
        Neg | Sign if d == D::Bool => None,
        Abs if d == D::Bool => Some(x.clone()),
        // NumPy gives int8 0/1; lazyfuse's narrowest integer is I32
        Square if d == D::Bool => Some(x.astype(D::I32)),
        Floor | Ceil | Round | Trunc => match d {
            D::C64 | D::C128 => None,
            D::F32 | D::F64 => Some(x.map(d, move |v| match v {
                V::F32(a) => V::F32(f32_fn(op, a)),
                V::F64(a) => V::F64(f64_fn(op, a)),
                _ => unreachable!(),
            })),
            _ => Some(x.clone()),
        },
        Abs => match d {
            D::C64 => Some(x.map(D::F32, |v| match v {
                V::C64(z) => V::F32(z.re.hypot(z.im)),
                _ => unreachable!(),
            })),
            D::C128 => Some(x.map(D::F64, |v| match v {
                V::C128(z) => V::F64(z.re.hypot(z.im)),
                _ => unreachable!(),
            })),
            _ => Some(x.map(d, |v| match v {
                V::I32(a) => V::I32(a.wrapping_abs()),
                V::I64(a) => V::I64(a.wrapping_abs()),
                V::F32(a) => V::F32(a.abs()),
                V::F64(a) => V::F64(a.abs()),
                _ => unreachable!(),
            })),
        },
        Neg | Sign | Square => Some(x.map(d, move |v| match v {
            V::I32(a) => V::I32(match op {
                Neg => a.wrapping_neg(),
                Sign => a.signum(),
                _ => a.wrapping_mul(a),
            }),
            V::I64(a) => V::I64(match op {
                Neg => a.wrapping_neg(),
                Sign => a.signum(),
                _ => a.wrapping_mul(a),
            }),
            V::F32(a) => V::F32(f32_fn(op, a)),
            V::F64(a) => V::F64(f64_fn(op, a)),
            V::C64(z) => V::C64(c64_fn(op, z)),
            V::C128(z) => V::C128(c128_fn(op, z)),
            V::Bool(_) => unreachable!(),
        })),
        Angle => {
            let t = float_dtype(d);
            let y = x.astype(t);
            Some(match t {
                D::C64 => y.map(D::F32, |v| match v {
                    V::C64(z) => V::F32(z.im.atan2(z.re)),
                    _ => unreachable!(),
                }),
                D::C128 => y.map(D::F64, |v| match v {
                    V::C128(z) => V::F64(z.im.atan2(z.re)),
                    _ => unreachable!(),
                }),
                _ => y.map(t, |v| match v {
                    V::F32(a) => V::F32(f32_fn(Angle, a)),
                    V::F64(a) => V::F64(f64_fn(Angle, a)),
                    _ => unreachable!(),
                }),
            })
        }
        _ => {
            assert!(op.is_float_fn(), "unhandled {op:?}");
            let t = float_dtype(d);
            Some(x.astype(t).map(t, move |v| match v {
                V::F32(a) => V::F32(f32_fn(op, a)),
                V::F64(a) => V::F64(f64_fn(op, a)),
                V::C64(z) => V::C64(c64_fn(op, z)),
                V::C128(z) => V::C128(c128_fn(op, z)),
                _ => unreachable!(),
            }))
        }
    }
}

// ------------------------------------------------------------------------------------
// Binary ops
// ------------------------------------------------------------------------------------

/// Binary operators and methods of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bi {
    Add,
    Sub,
    Mul,
    Div,
    /// The `%` operator.
    Rem,
    FloorDiv,
    Pow,
    Atan2,
    Maximum,
    Minimum,
    Hypot,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

impl Bi {
    pub const ALL: [Bi; 20] = [
        Bi::Add,
        Bi::Sub,
        Bi::Mul,
        Bi::Div,
        Bi::Rem,
        Bi::FloorDiv,
        Bi::Pow,
        Bi::Atan2,
        Bi::Maximum,
        Bi::Minimum,
        Bi::Hypot,
        Bi::Eq,
        Bi::Ne,
        Bi::Lt,
        Bi::Le,
        Bi::Gt,
        Bi::Ge,
        Bi::And,
        Bi::Or,
        Bi::Xor,
    ];

    /// True for the five Rust operators (a scalar may be on the left).
    pub fn is_operator(self) -> bool {
        matches!(self, Bi::Add | Bi::Sub | Bi::Mul | Bi::Div | Bi::Rem)
    }

    /// Results that are not correctly rounded.
    pub fn is_transcendental(self) -> bool {
        matches!(self, Bi::Pow | Bi::Atan2 | Bi::Hypot)
    }

    /// The lazyfuse call `a op b` (`b` an array or a scalar).
    pub fn apply(self, a: &Array, b: impl Into<lf::Operand>) -> Array {
        use Bi::*;
        let b = b.into();
        match self {
            Add => a + b,
            Sub => a - b,
            Mul => a * b,
            Div => a / b,
            Rem => a % b,
            FloorDiv => a.floor_div(b),
            Pow => a.pow(b),
            Atan2 => a.atan2(b),
            Maximum => a.maximum(b),
            Minimum => a.minimum(b),
            Hypot => a.hypot(b),
            Eq => a.eq(b),
            Ne => a.ne(b),
            Lt => a.lt(b),
            Le => a.le(b),
            Gt => a.gt(b),
            Ge => a.ge(b),
            And => a.logical_and(b),
            Or => a.logical_or(b),
            Xor => a.logical_xor(b),
        }
    }

    /// The lazyfuse call `s op b` with the scalar on the left (operators only).
    pub fn apply_lhs(self, s: V, b: &Array) -> Array {
        macro_rules! go {
            ($s:expr) => {
                match self {
                    Bi::Add => $s + b,
                    Bi::Sub => $s - b,
                    Bi::Mul => $s * b,
                    Bi::Div => $s / b,
                    Bi::Rem => $s % b,
                    _ => panic!("{self:?} has no scalar-on-the-left form"),
                }
            };
        }
        match s {
            V::Bool(x) => go!(x),
            V::I32(x) => go!(x),
            V::I64(x) => go!(x),
            V::F32(x) => go!(x),
            V::F64(x) => go!(x),
            V::C64(x) => go!(x),
            V::C128(x) => go!(x),
        }
    }
}

macro_rules! int_bin {
    ($name:ident, $t:ty) => {
        fn $name(op: Bi, a: $t, b: $t) -> Result<$t, bool> {
            use Bi::*;
            Ok(match op {
                Add => a.wrapping_add(b),
                Sub => a.wrapping_sub(b),
                Mul => a.wrapping_mul(b),
                FloorDiv => {
                    if b == 0 {
                        0
                    } else if a == <$t>::MIN && b == -1 {
                        <$t>::MIN
                    } else {
                        let q = a / b;
                        if a % b != 0 && ((a < 0) != (b < 0)) {
                            q - 1
                        } else {
                            q
                        }
                    }
                }
                Rem => {
                    if b == 0 || b == -1 {
                        0
                    } else {
                        let r = a % b;
                        if r != 0 && ((r < 0) != (b < 0)) {
                            r + b
                        } else {
                            r
                        }
                    }
                }
                Pow => {
                    if b < 0 {
                        match a {
                            1 => 1,
                            -1 => {
                                if b % 2 == 0 {
                                    1
                                } else {
                                    -1
                                }
                            }
                            _ => 0,
                        }
                    } else {
                        let mut acc: $t = 1;
                        let mut p = a;
                        let mut e = b;
                        while e > 0 {
                            if e & 1 == 1 {
                                acc = acc.wrapping_mul(p);
                            }
                            p = p.wrapping_mul(p);
                            e >>= 1;
                        }
                        acc
                    }
                }
                Maximum => a.max(b),
                Minimum => a.min(b),
                Eq => return Err(a == b),
                Ne => return Err(a != b),
                Lt => return Err(a < b),
                Le => return Err(a <= b),
                Gt => return Err(a > b),
                Ge => return Err(a >= b),
                _ => unreachable!("int op {op:?}"),
            })
        }
    };
}
int_bin!(i32_bin, i32);
int_bin!(i64_bin, i64);

macro_rules! float_bin {
    ($name:ident, $t:ty) => {
        /// `Ok(value)` or `Err(bool)` for comparisons.
        fn $name(op: Bi, a: $t, b: $t) -> Result<$t, bool> {
            use Bi::*;
            // NumPy's npy_divmod: (floor quotient, Python remainder)
            let divmod = |a: $t, b: $t| -> ($t, $t) {
                let m = a % b; // fmod
                if b == 0.0 {
                    return (a / b, m);
                }
                let mut div = (a - m) / b;
                let mut m = m;
                if m != 0.0 {
                    if (b < 0.0) != (m < 0.0) {
                        m += b;
                        div -= 1.0;
                    }
                } else {
                    m = (0.0 as $t).copysign(b);
                }
                let fl = if div != 0.0 {
                    let mut f = div.floor();
                    if div - f > 0.5 {
                        f += 1.0;
                    }
                    f
                } else {
                    (0.0 as $t).copysign(a / b)
                };
                (fl, m)
            };
            Ok(match op {
                Add => a + b,
                Sub => a - b,
                Mul => a * b,
                Div => a / b,
                FloorDiv => {
                    if b == 0.0 {
                        a / b
                    } else {
                        divmod(a, b).0
                    }
                }
                Rem => {
                    if b == 0.0 {
                        a % b
                    } else {
                        divmod(a, b).1
                    }
                }
                Pow => a.powf(b),
                Atan2 => a.atan2(b),
                Hypot => a.hypot(b),
                Maximum => {
                    if a >= b || a.is_nan() {
                        a
                    } else {
                        b
                    }
                }
                Minimum => {
                    if a <= b || a.is_nan() {
                        a
                    } else {
                        b
                    }
                }
                Eq => return Err(a == b),
                Ne => return Err(a != b),
                Lt => return Err(a < b),
                Le => return Err(a <= b),
                Gt => return Err(a > b),
                Ge => return Err(a >= b),
                _ => unreachable!("float op {op:?}"),
            })
        }
    };
}
float_bin!(f32_bin, f32);
float_bin!(f64_bin, f64);

/// One element of `op` on two values of the compute dtype.
fn bin_elem(op: Bi, x: V, y: V) -> V {
    use Bi::*;
    let res = match (x, y) {
        (V::Bool(a), V::Bool(b)) => {
            return V::Bool(match op {
                Add | Or | Maximum => a | b,
                Mul | And | Minimum => a & b,
                Xor | Ne => a ^ b,
                Eq => a == b,
                Lt => !a & b,
                Le => a <= b,
                Gt => a & !b,
                Ge => a >= b,
                _ => unreachable!("bool op {op:?}"),
            })
        }
        (V::I32(a), V::I32(b)) => i32_bin(op, a, b).map(V::I32),
        (V::I64(a), V::I64(b)) => i64_bin(op, a, b).map(V::I64),
        (V::F32(a), V::F32(b)) => f32_bin(op, a, b).map(V::F32),
        (V::F64(a), V::F64(b)) => f64_bin(op, a, b).map(V::F64),
        (V::C64(a), V::C64(b)) => match op {
            Add => Ok(V::C64(a + b)),
            Sub => Ok(V::C64(a - b)),
            Mul => Ok(V::C64(cmul64(a, b))),
            Div => Ok(V::C64(cdiv64(a, b))),
            Pow => Ok(V::C64(cpow64(a, b))),
            Eq => Err(a.re == b.re && a.im == b.im),
            Ne => Err(!(a.re == b.re && a.im == b.im)),
            _ => unreachable!("complex op {op:?}"),
        },
        (V::C128(a), V::C128(b)) => match op {
            Add => Ok(V::C128(a + b)),
            Sub => Ok(V::C128(a - b)),
            Mul => Ok(V::C128(cmul128(a, b))),
            Div => Ok(V::C128(cdiv128(a, b))),
            Pow => Ok(V::C128(cpow128(a, b))),
            Eq => Err(a.re == b.re && a.im == b.im),
            Ne => Err(!(a.re == b.re && a.im == b.im)),
            _ => unreachable!("complex op {op:?}"),
        },
        _ => unreachable!("bin_elem dtypes {x:?} {y:?}"),
    };
    match res {
        Ok(v) => v,
        Err(b) => V::Bool(b),
    }
}

/// Binary op with NumPy promotion and broadcasting; `None` where NumPy (or lazyfuse's
/// documented restrictions) rejects the dtypes or the shapes.
pub fn binary(op: Bi, a: Opnd, b: Opnd) -> Option<OVal> {
    use Bi::*;
    use DType as D;
    let shape = broadcast_shape(&a.shape(), &b.shape())?;
    let t = common_dtype(&[a, b]);
    let cplx = matches!(t, D::C64 | D::C128);
    // (compute dtype, result dtype)
    let (ct, rt) = match op {
        And | Or | Xor => (D::Bool, D::Bool),
        Eq | Ne => (t, D::Bool),
        Lt | Le | Gt | Ge if cplx => return None, // NumPy orders complex; lazyfuse refuses
        Lt | Le | Gt | Ge => (t, D::Bool),
        Sub if t == D::Bool => return None, // NumPy: boolean subtract is a TypeError
        Add | Sub | Mul => (t, t),
        Div => match t {
            D::Bool | D::I32 | D::I64 => (D::F64, D::F64),
            _ => (t, t),
        },
        FloorDiv | Rem | Maximum | Minimum | Atan2 | Hypot if cplx => return None,
        FloorDiv | Rem | Pow if t == D::Bool => (D::I32, D::I32),
        FloorDiv | Rem | Pow | Maximum | Minimum => (t, t),
        Atan2 | Hypot => (float_dtype(t), float_dtype(t)),
    };
    if op == Pow {
        if let Opnd::S(e) = b {
            let int_exp = matches!(e.dtype(), D::Bool | D::I32 | D::I64);
            // NumPy: `ValueError: Integers to negative integer powers are not allowed.`
            if matches!(ct, D::I32 | D::I64)
                && int_exp
                && matches!(e.cast(D::F64), V::F64(f) if f < 0.0)
            {
                return None;
            }
            // NumPy computes a constant exponent of 0.5 as `sqrt` (-0 -> -0, -inf -> NaN)
            if matches!(ct, D::F32 | D::F64) && e.cast(D::F64) == V::F64(0.5) {
                let x = a.expand(ct, &shape);
                let out = x.mapv(|v| match v {
                    V::F32(f) => V::F32(f.sqrt()),
                    V::F64(f) => V::F64(f.sqrt()),
                    _ => unreachable!(),
                });
                return Some(OVal { dtype: rt, a: out });
            }
        }
    }
    let x = a.expand(ct, &shape);
    let y = b.expand(ct, &shape);
    let out = ndarray::Zip::from(&x)
        .and(&y)
        .map_collect(|&p, &q| bin_elem(op, p, q));
    Some(OVal { dtype: rt, a: out })
}

/// `lf::where_`: `cond ? a : b` with promotion of `a` and `b` and broadcasting of all three.
pub fn where_(cond: &OVal, a: Opnd, b: Opnd) -> Option<OVal> {
    let t = common_dtype(&[a, b]);
    let s = broadcast_shape(cond.shape(), &a.shape())?;
    let s = broadcast_shape(&s, &b.shape())?;
    let c = broadcast(&cond.astype(DType::Bool), &s).a;
    let x = a.expand(t, &s);
    let y = b.expand(t, &s);
    let out = ndarray::Zip::from(&c)
        .and(&x)
        .and(&y)
        .map_collect(|&c, &p, &q| if c.as_bool() { p } else { q });
    Some(OVal { dtype: t, a: out })
}

/// `lf::complex(re, im)`: reals promote to a common float dtype.
pub fn complex(re: &OVal, im: &OVal) -> Option<OVal> {
    let t = float_dtype(result_type(re.dtype, im.dtype));
    let shape = broadcast_shape(re.shape(), im.shape())?;
    let (x, y) = (
        broadcast(&re.astype(t), &shape).a,
        broadcast(&im.astype(t), &shape).a,
    );
    let rt = match t {
        DType::F32 => DType::C64,
        DType::F64 => DType::C128,
        _ => return None,
    };
    let out = ndarray::Zip::from(&x)
        .and(&y)
        .map_collect(|&p, &q| match (p, q) {
            (V::F32(r), V::F32(i)) => V::C64(Cf::new(r, i)),
            (V::F64(r), V::F64(i)) => V::C128(Cd::new(r, i)),
            _ => unreachable!(),
        });
    Some(OVal { dtype: rt, a: out })
}

/// `clip(lo, hi)` = `minimum(maximum(x, lo), hi)`.
pub fn clip(x: &OVal, lo: Opnd, hi: Opnd) -> Option<OVal> {
    let m = binary(Bi::Maximum, Opnd::A(x), lo)?;
    binary(Bi::Minimum, Opnd::A(&m), hi)
}

// ------------------------------------------------------------------------------------
// Movement
// ------------------------------------------------------------------------------------

fn norm_axis(axis: isize, n: usize) -> usize {
    let a = if axis < 0 { axis + n as isize } else { axis };
    assert!(
        a >= 0 && (a as usize) < n,
        "oracle: axis {axis} out of range for rank {n}"
    );
    a as usize
}

impl OVal {
    fn with(&self, a: ArrayD<V>) -> OVal {
        OVal {
            dtype: self.dtype,
            a,
        }
    }

    /// C-order reshape; one `-1` is inferred.
    pub fn reshape(&self, shape: &[isize]) -> OVal {
        let known: usize = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .product();
        let s: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if d >= 0 {
                    d as usize
                } else {
                    self.size() / known
                }
            })
            .collect();
        self.with(ArrayD::from_shape_vec(IxDyn(&s), self.vals()).expect("oracle reshape"))
    }

    /// Output axis `k` is input axis `axes[k]`.
    pub fn permute(&self, axes: &[usize]) -> OVal {
        let p = self.a.clone().permuted_axes(IxDyn(axes));
        self.with(p.as_standard_layout().to_owned())
    }

    pub fn transpose(&self) -> OVal {
        let p: Vec<usize> = (0..self.a.ndim()).rev().collect();
        self.permute(&p)
    }

    pub fn swapaxes(&self, i: isize, j: isize) -> OVal {
        let n = self.a.ndim();
        let mut p: Vec<usize> = (0..n).collect();
        p.swap(norm_axis(i, n), norm_axis(j, n));
        self.permute(&p)
    }

    pub fn broadcast_to(&self, shape: &[usize]) -> OVal {
        broadcast(self, shape)
    }

    pub fn expand_dims(&self, axis: isize) -> OVal {
        let a = norm_axis(axis, self.a.ndim() + 1);
        let mut s: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        s.insert(a, 1);
        self.reshape(&s)
    }

    pub fn squeeze(&self, axis: isize) -> OVal {
        let a = norm_axis(axis, self.a.ndim());
        assert_eq!(self.shape()[a], 1, "oracle squeeze");
        let mut s: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        s.remove(a);
        self.reshape(&s)
    }

    /// Basic slicing with ndarray's `SliceInfoElem`s: bounds clipped as NumPy does; a
    /// negative step walks the selected `start..end` range from its end (ndarray's
    /// meaning); an index drops the axis; `NewAxis` inserts one.
    pub fn slice<I: AsRef<[SliceInfoElem]>>(&self, info: I) -> OVal {
        let elems = info.as_ref();
        // per input axis: the list of selected input indices, and whether the axis stays
        let mut picks: Vec<Vec<usize>> = vec![];
        let mut out_shape: Vec<usize> = vec![];
        // for each output axis: Some(input axis) or None (a new axis)
        let mut out_src: Vec<Option<usize>> = vec![];
        let mut ax = 0;
        for e in elems {
            match *e {
                SliceInfoElem::Slice { start, end, step } => {
                    let n = self.shape()[ax] as isize;
                    let clip = |v: isize| (if v < 0 { v + n } else { v }).clamp(0, n);
                    let (s, e) = (clip(start), end.map_or(n, clip));
                    let mut sel: Vec<usize> = (s.max(0)..e.max(s)).map(|i| i as usize).collect();
                    if step < 0 {
                        sel.reverse();
                    }
                    let sel: Vec<usize> = sel.into_iter().step_by(step.unsigned_abs()).collect();
                    out_shape.push(sel.len());
                    out_src.push(Some(ax));
                    picks.push(sel);
                    ax += 1;
                }
                SliceInfoElem::Index(i) => {
                    let n = self.shape()[ax] as isize;
                    let j = if i < 0 { i + n } else { i };
                    assert!((0..n).contains(&j), "oracle slice: index {i} out of range");
                    picks.push(vec![j as usize]);
                    ax += 1;
                }
                SliceInfoElem::NewAxis => {
                    out_shape.push(1);
                    out_src.push(None);
                }
            }
        }
        for a in ax..self.a.ndim() {
            picks.push((0..self.shape()[a]).collect());
            out_shape.push(self.shape()[a]);
            out_src.push(Some(a));
        }
        let nd = self.a.ndim();
        let out = ArrayD::from_shape_fn(IxDyn(&out_shape), |idx| {
            let mut src = vec![0usize; nd];
            for (k, p) in picks.iter().enumerate() {
                src[k] = p[0];
            }
            for (o, s) in out_src.iter().enumerate() {
                if let Some(a) = s {
                    src[*a] = picks[*a][idx[o]];
                }
            }
            self.a[IxDyn(&src)]
        });
        self.with(out)
    }

    pub fn flip(&self, axis: isize) -> OVal {
        let a = norm_axis(axis, self.a.ndim());
        let n = self.shape()[a];
        let out = ArrayD::from_shape_fn(IxDyn(self.shape()), |idx| {
            let mut src = idx.clone();
            src[a] = n - 1 - idx[a];
            self.a[src]
        });
        self.with(out)
    }

    /// Constant padding; one pair applies to every axis; `value` is cast to the dtype.
    pub fn pad(&self, widths: &[(usize, usize)], value: f64) -> OVal {
        let nd = self.a.ndim();
        let w: Vec<(usize, usize)> = if widths.len() == 1 {
            vec![widths[0]; nd]
        } else {
            widths.to_vec()
        };
        assert_eq!(w.len(), nd, "oracle pad");
        let shape: Vec<usize> = self
            .shape()
            .iter()
            .zip(&w)
            .map(|(&n, &(b, a))| n + b + a)
            .collect();
        let fill = V::F64(value).cast(self.dtype);
        let out = ArrayD::from_shape_fn(IxDyn(&shape), |idx| {
            let mut src = vec![0usize; nd];
            for k in 0..nd {
                let i = idx[k];
                if i < w[k].0 || i >= w[k].0 + self.shape()[k] {
                    return fill;
                }
                src[k] = i - w[k].0;
            }
            self.a[IxDyn(&src)]
        });
        self.with(out)
    }

    /// `numpy.roll` along one axis: `out[(i + shift) mod n] = in[i]`.
    pub fn roll(&self, shift: isize, axis: isize) -> OVal {
        let a = norm_axis(axis, self.a.ndim());
        let n = self.shape()[a] as isize;
        if n == 0 {
            return self.clone();
        }
        let out = ArrayD::from_shape_fn(IxDyn(self.shape()), |idx| {
            let mut src = idx.clone();
            src[a] = (idx[a] as isize - shift).rem_euclid(n) as usize;
            self.a[src]
        });
        self.with(out)
    }
}

/// `lf::concatenate`: dtypes promote by the NumPy table.
pub fn concatenate(xs: &[&OVal], axis: isize) -> OVal {
    let nd = xs[0].a.ndim();
    let a = norm_axis(axis, nd);
    let dtype = xs[1..]
        .iter()
        .fold(xs[0].dtype, |d, x| result_type(d, x.dtype));
    let mut shape = xs[0].shape().to_vec();
    shape[a] = xs.iter().map(|x| x.shape()[a]).sum();
    let casted: Vec<OVal> = xs.iter().map(|x| x.astype(dtype)).collect();
    let out = ArrayD::from_shape_fn(IxDyn(&shape), |idx| {
        let mut i = idx[a];
        for x in &casted {
            let n = x.shape()[a];
            if i < n {
                let mut src = idx.clone();
                src[a] = i;
                return x.a[src];
            }
            i -= n;
        }
        unreachable!()
    });
    OVal { dtype, a: out }
}

/// `lf::stack` along a new axis.
pub fn stack(xs: &[&OVal], axis: isize) -> OVal {
    let e: Vec<OVal> = xs.iter().map(|x| x.expand_dims(axis)).collect();
    let r: Vec<&OVal> = e.iter().collect();
    let a = if axis < 0 {
        axis + xs[0].a.ndim() as isize + 1
    } else {
        axis
    };
    concatenate(&r, a)
}

// ------------------------------------------------------------------------------------
// Comparison
// ------------------------------------------------------------------------------------

/// Tolerances: `|got - want| <= atol + rtol * |want|` per precision (modulus for complex).
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub rtol32: f64,
    pub atol32: f64,
    pub rtol64: f64,
    pub atol64: f64,
    /// Tell `+0` from `-0` (dedicated tests only).
    pub signed_zero: bool,
    /// Complex values that are not finite only need to be not finite in `got` too (C99
    /// annex G cases differ between correct implementations).
    pub loose_complex_specials: bool,
}

impl Tol {
    /// Correctly rounded and chained work: f32 rel 1e-5, f64 rel 1e-12.
    pub const DEFAULT: Tol = Tol {
        rtol32: 1e-5,
        atol32: 1e-37,
        rtol64: 1e-12,
        atol64: 1e-300,
        signed_zero: false,
        loose_complex_specials: false,
    };
    /// A single real transcendental: 8 ulp.
    pub const ULPS: Tol = Tol {
        rtol32: 8.0 * f32::EPSILON as f64,
        atol32: 1e-37,
        rtol64: 8.0 * f64::EPSILON,
        atol64: 1e-300,
        signed_zero: false,
        loose_complex_specials: false,
    };
    /// Bit-exact floats (still NaN == NaN).
    pub const EXACT: Tol = Tol {
        rtol32: 0.0,
        atol32: 0.0,
        rtol64: 0.0,
        atol64: 0.0,
        signed_zero: false,
        loose_complex_specials: false,
    };
    pub fn atol(self, atol32: f64, atol64: f64) -> Tol {
        Tol {
            atol32,
            atol64,
            ..self
        }
    }
    pub fn signed_zero(self) -> Tol {
        Tol {
            signed_zero: true,
            ..self
        }
    }
    pub fn loose_complex(self) -> Tol {
        Tol {
            loose_complex_specials: true,
            ..self
        }
    }
}

/// Per element: `None` = any value is acceptable (ill-conditioned), else extra absolute
/// slack.
pub type Slack = ArrayD<Option<f64>>;

/// The disagreement between the oracle `want` and perturbed twins of it (the same DAG with
/// every non-exact op nudged by a few ulp): elements whose class (NaN, inf, bool, int)
/// changes accept anything; others get `4 * |want - twin|` of extra slack.
pub fn slack_from_twins(want: &OVal, twins: &[&OVal]) -> Slack {
    let mut s: Slack = ArrayD::from_elem(IxDyn(want.shape()), Some(0.0));
    for t in twins {
        assert_eq!(t.shape(), want.shape());
        ndarray::Zip::from(&mut s)
            .and(&want.a)
            .and(&t.a)
            .for_each(|s, &w, &t| {
                let Some(cur) = *s else { return };
                let (wr, wi) = w.parts();
                let (tr, ti) = t.parts();
                let class =
                    |r: f64, i: f64| (r.is_nan() || i.is_nan(), r.is_infinite() || i.is_infinite());
                *s = match w {
                    V::Bool(a) => (a == t.as_bool()).then_some(cur),
                    V::I32(_) | V::I64(_) => {
                        let d = match (w, t) {
                            (V::I64(a), V::I64(b)) => a.abs_diff(b) as f64,
                            _ => (wr - tr).abs(),
                        };
                        // a changed integer means a cast or comparison sat on a boundary
                        (d == 0.0).then_some(cur)
                    }
                    _ if class(wr, wi) != class(tr, ti) => None,
                    _ if !(wr.is_finite() && wi.is_finite()) => Some(cur),
                    _ => Some(cur + 4.0 * (wr - tr).hypot(wi - ti)),
                };
            });
    }
    s
}

fn fmt_v(v: V) -> String {
    match v {
        V::C64(z) => format!("{}{:+}i", z.re, z.im),
        V::C128(z) => format!("{}{:+}i", z.re, z.im),
        V::Bool(b) => format!("{b}"),
        V::I32(x) => format!("{x}"),
        V::I64(x) => format!("{x}"),
        V::F32(x) => format!("{x:e}"),
        V::F64(x) => format!("{x:e}"),
    }
}

/// Compares values (shape and dtype first); `Err` describes up to 8 mismatches.
pub fn compare_vals(
    got: &OVal,
    want: &OVal,
    tol: Tol,
    slack: Option<&Slack>,
) -> Result<(), String> {
    if got.dtype != want.dtype {
        return Err(format!("dtype: got {}, want {}", got.dtype, want.dtype));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape: got {:?}, want {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (rtol, atol) = match want.dtype {
        DType::F32 | DType::C64 => (tol.rtol32, tol.atol32),
        _ => (tol.rtol64, tol.atol64),
    };
    let real_ok = |g: f64, w: f64, extra: f64| -> bool {
        if w.is_nan() || g.is_nan() {
            return w.is_nan() && g.is_nan();
        }
        if w.is_infinite() || g.is_infinite() {
            return g == w;
        }
        if tol.signed_zero && g == 0.0 && w == 0.0 && g.is_sign_negative() != w.is_sign_negative() {
            return false;
        }
        (g - w).abs() <= atol + rtol * w.abs() + extra
    };
    let mut bad = vec![];
    let mut count = 0usize;
    for ((idx, &w), &g) in want.a.indexed_iter().zip(got.a.iter()) {
        let extra = match slack {
            Some(s) => match s[&idx] {
                None => continue,
                Some(x) => x,
            },
            None => 0.0,
        };
        let ok = match (g, w) {
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::I32(a), V::I32(b)) => (a as f64 - b as f64).abs() <= extra,
            (V::I64(a), V::I64(b)) => a.abs_diff(b) as f64 <= extra,
            (V::F32(a), V::F32(b)) => real_ok(a as f64, b as f64, extra),
            (V::F64(a), V::F64(b)) => real_ok(a, b, extra),
            _ => {
                let ((gr, gi), (wr, wi)) = (g.parts(), w.parts());
                let wnan = wr.is_nan() || wi.is_nan();
                let gnan = gr.is_nan() || gi.is_nan();
                let finite = |r: f64, i: f64| r.is_finite() && i.is_finite();
                if tol.loose_complex_specials && !(finite(wr, wi) && finite(gr, gi)) {
                    !finite(wr, wi) && !finite(gr, gi)
                } else if wnan || gnan {
                    wnan && gnan
                } else if !(finite(wr, wi) && finite(gr, gi)) {
                    real_ok(gr, wr, extra) && real_ok(gi, wi, extra)
                } else {
                    let zero_sign_differs = |g: f64, w: f64| {
                        g == 0.0 && w == 0.0 && g.is_sign_negative() != w.is_sign_negative()
                    };
                    let signs_ok = !tol.signed_zero
                        || !(zero_sign_differs(gr, wr) || zero_sign_differs(gi, wi));
                    signs_ok && (gr - wr).hypot(gi - wi) <= atol + rtol * wr.hypot(wi) + extra
                }
            }
        };
        if !ok {
            count += 1;
            if bad.len() < 8 {
                bad.push(format!(
                    "  at {:?}: got {}, want {}",
                    idx.slice(),
                    fmt_v(g),
                    fmt_v(w)
                ));
            }
        }
    }
    if count == 0 {
        Ok(())
    } else {
        Err(format!(
            "{count} of {} elements differ ({} shape {:?}):\n{}",
            want.size(),
            want.dtype,
            want.shape(),
            bad.join("\n")
        ))
    }
}

/// Evaluates `got` and compares it with `want`.
pub fn check(got: &Array, want: &OVal, tol: Tol) -> Result<(), String> {
    if got.dtype() != want.dtype {
        return Err(format!("dtype: got {}, want {}", got.dtype(), want.dtype));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape: got {:?}, want {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let g = OVal::fetch(got).map_err(|e| format!("evaluation failed: {e}"))?;
    compare_vals(&g, want, tol, None)
}

/// [`check`], panicking with `ctx` on a mismatch.
#[track_caller]
pub fn assert_close(got: &Array, want: &OVal, tol: Tol, ctx: &str) {
    if let Err(e) = check(got, want, tol) {
        panic!("{ctx}: {e}");
    }
}

/// Perturbs every float or complex element by `sign * 2` ulp (relative), for twins.
pub fn jitter(x: &OVal, sign: f64) -> OVal {
    let f32k = (1.0 + sign * 2.0 * f32::EPSILON as f64) as f32;
    let f64k = 1.0 + sign * 2.0 * f64::EPSILON;
    match x.dtype {
        DType::F32 => x.map(DType::F32, |v| match v {
            V::F32(a) => V::F32(a * f32k),
            _ => unreachable!(),
        }),
        DType::F64 => x.map(DType::F64, |v| match v {
            V::F64(a) => V::F64(a * f64k),
            _ => unreachable!(),
        }),
        DType::C64 => x.map(DType::C64, |v| match v {
            V::C64(z) => V::C64(Cf::new(z.re * f32k, z.im * f32k)),
            _ => unreachable!(),
        }),
        DType::C128 => x.map(DType::C128, |v| match v {
            V::C128(z) => V::C128(Cd::new(z.re * f64k, z.im * f64k)),
            _ => unreachable!(),
        }),
        _ => x.clone(),
    }
}

// ------------------------------------------------------------------------------------
// Views as data (shared by the movement and property tests)
// ------------------------------------------------------------------------------------

/// One view (movement) operation, applicable to a lazyfuse array and to an oracle value.
#[derive(Clone, Debug)]
pub enum View {
    Reshape(Vec<isize>),
    Transpose,
    Permute(Vec<usize>),
    SwapAxes(isize, isize),
    BroadcastTo(Vec<usize>),
    ExpandDims(isize),
    Squeeze(isize),
    Slice(Vec<SliceInfoElem>),
    Flip(isize),
    Pad(Vec<(usize, usize)>, f64),
    Roll(isize, isize),
}

impl View {
    /// The lazyfuse call.
    pub fn apply(&self, a: &Array) -> Array {
        match self {
            View::Reshape(s) => a.reshape(s),
            View::Transpose => a.transpose(),
            View::Permute(p) => a.permute(p),
            View::SwapAxes(i, j) => a.swapaxes(*i, *j),
            View::BroadcastTo(s) => a.broadcast_to(s),
            View::ExpandDims(k) => a.expand_dims(*k),
            View::Squeeze(k) => a.squeeze(*k),
            View::Slice(e) => a.slice(e),
            View::Flip(k) => a.flip(*k),
            View::Pad(w, v) => a.pad(w, *v),
            View::Roll(s, k) => a.roll(*s, *k),
        }
    }

    /// The oracle's result.
    pub fn oracle(&self, x: &OVal) -> OVal {
        match self {
            View::Reshape(s) => x.reshape(s),
            View::Transpose => x.transpose(),
            View::Permute(p) => x.permute(p),
            View::SwapAxes(i, j) => x.swapaxes(*i, *j),
            View::BroadcastTo(s) => x.broadcast_to(s),
            View::ExpandDims(k) => x.expand_dims(*k),
            View::Squeeze(k) => x.squeeze(*k),
            View::Slice(e) => x.slice(e),
            View::Flip(k) => x.flip(*k),
            View::Pad(w, v) => x.pad(w, *v),
            View::Roll(s, k) => x.roll(*s, *k),
        }
    }
}

/// Distinct, recognizable values of `dtype` in C order: element `k` is `k` (+0.5 for
/// floats, `k - k i` for complex, `k % 3 == 0` for Bool).
pub fn iota(dtype: DType, shape: &[usize]) -> OVal {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|k| match dtype {
            DType::Bool => V::Bool(k % 3 == 0),
            DType::I32 | DType::I64 => V::I64(k as i64).cast(dtype),
            DType::F32 | DType::F64 => V::F64(k as f64 + 0.5).cast(dtype),
            _ => V::C128(Cd::new(k as f64, -(k as f64))).cast(dtype),
        })
        .collect();
    OVal::new(dtype, shape, v)
}

// ------------------------------------------------------------------------------------
// Reductions (naive: one plain loop per output over its group of input elements)
// ------------------------------------------------------------------------------------

/// A reduction; `Var`/`Std` carry their `ddof`. `Norm` is `linalg::norm` (all elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Red {
    Sum,
    Prod,
    Mean,
    Max,
    Min,
    All,
    Any,
    Var(usize),
    Std(usize),
    ArgMax,
    ArgMin,
    Norm,
}

impl Red {
    pub const ALL: [Red; 14] = [
        Red::Sum,
        Red::Prod,
        Red::Mean,
        Red::Max,
        Red::Min,
        Red::All,
        Red::Any,
        Red::Var(0),
        Red::Var(1),
        Red::Std(0),
        Red::Std(1),
        Red::ArgMax,
        Red::ArgMin,
        Red::Norm,
    ];

    /// The lazyfuse call: over all elements for `axes` `None` (no keepdims there), else
    /// over `axes` (`ArgMax`/`ArgMin` take exactly one).
    pub fn apply(self, a: &Array, axes: Option<&[isize]>, keepdims: bool) -> Array {
        match (self, axes) {
            (Red::Sum, None) => a.sum(),
            (Red::Prod, None) => a.prod(),
            (Red::Mean, None) => a.mean(),
            (Red::Max, None) => a.max(),
            (Red::Min, None) => a.min(),
            (Red::All, None) => a.all(),
            (Red::Any, None) => a.any(),
            (Red::Var(0), None) => a.var(),
            (Red::Std(0), None) => a.std(),
            (Red::Var(d), None) => {
                a.var_axes(&(0..a.ndim() as isize).collect::<Vec<_>>(), d, false)
            }
            (Red::Std(d), None) => {
                a.std_axes(&(0..a.ndim() as isize).collect::<Vec<_>>(), d, false)
            }
            (Red::Norm, _) => lf::linalg::norm(a),
            (Red::ArgMax, Some(ax)) => a.argmax(ax[0]),
            (Red::ArgMin, Some(ax)) => a.argmin(ax[0]),
            (Red::ArgMax | Red::ArgMin, None) => panic!("argmax/argmin need an axis"),
            (Red::Sum, Some(ax)) => a.sum_axes(ax, keepdims),
            (Red::Prod, Some(ax)) => a.prod_axes(ax, keepdims),
            (Red::Mean, Some(ax)) => a.mean_axes(ax, keepdims),
            (Red::Max, Some(ax)) => a.max_axes(ax, keepdims),
            (Red::Min, Some(ax)) => a.min_axes(ax, keepdims),
            (Red::All, Some(ax)) => a.all_axes(ax, keepdims),
            (Red::Any, Some(ax)) => a.any_axes(ax, keepdims),
            (Red::Var(d), Some(ax)) => a.var_axes(ax, d, keepdims),
            (Red::Std(d), Some(ax)) => a.std_axes(ax, d, keepdims),
        }
    }

    /// NumPy's result dtype for an input of dtype `d`; `None` where lazyfuse refuses it
    /// (order of complex values).
    pub fn result_dtype(self, d: DType) -> Option<DType> {
        use DType::*;
        let int = matches!(d, Bool | I32 | I64);
        let real = |d: DType| match d {
            F32 | C64 => F32,
            _ => F64,
        };
        Some(match self {
            Red::Sum | Red::Prod if int => I64,
            Red::Sum | Red::Prod => d,
            Red::Mean if int => F64,
            Red::Mean => d,
            Red::Max | Red::Min | Red::ArgMax | Red::ArgMin if d.is_complex() => return None,
            Red::Max | Red::Min => d,
            Red::ArgMax | Red::ArgMin => I64,
            Red::All | Red::Any => Bool,
            Red::Var(_) | Red::Std(_) | Red::Norm => real(d),
        })
    }
}

/// Neumaier-compensated sum (accurate to about one rounding of the result).
fn csum(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for x in xs {
        let t = s + x;
        if s.abs() >= x.abs() {
            c += (s - t) + x;
        } else {
            c += (x - t) + s;
        }
        s = t;
    }
    if c.is_finite() {
        s + c
    } else {
        s
    }
}

/// The value of one output of `op` over `g` (the input's values in C order) in dtype
/// `out`, with a bound on the error a correct pairwise/tree implementation may make.
fn reduce_group(op: Red, g: &[V], inp: DType, out: DType) -> (V, f64) {
    let eps = match out {
        DType::F32 | DType::C64 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    };
    let n = g.len();
    let l = (n.max(2) as f64).log2().ceil() + 1.0;
    let single = matches!(inp, DType::F32 | DType::C64);
    // beyond these magnitudes intermediate results may overflow in an order-dependent
    // way (or squares of F32 values overflow): no claim then
    let (sum_big, sq_big) = if single { (1e34, 1e17) } else { (1e304, 1e150) };
    let maxabs = g
        .iter()
        .map(|v| {
            let (r, i) = v.parts();
            r.hypot(i)
        })
        .filter(|m| m.is_finite())
        .fold(0.0f64, f64::max);
    let parts: Vec<(f64, f64)> = g.iter().map(|v| v.parts()).collect();
    let re_sum = || csum(parts.iter().map(|p| p.0));
    let im_sum = || csum(parts.iter().map(|p| p.1));
    let abs_sum = || csum(parts.iter().map(|p| p.0.hypot(p.1)));
    let make = |re: f64, im: f64| V::C128(Cd::new(re, im)).cast(out);
    let real = |x: f64| V::F64(x).cast(out);
    let ints = || {
        g.iter().map(|v| match *v {
            V::Bool(b) => b as i64,
            V::I32(x) => x as i64,
            V::I64(x) => x,
            _ => unreachable!(),
        })
    };
    match op {
        Red::Sum if out == DType::I64 => (V::I64(ints().fold(0i64, i64::wrapping_add)), 0.0),
        Red::Prod if out == DType::I64 => (V::I64(ints().fold(1i64, i64::wrapping_mul)), 0.0),
        Red::Sum | Red::Mean => {
            let k = if op == Red::Mean { n as f64 } else { 1.0 };
            let b = if maxabs > sum_big {
                f64::INFINITY
            } else {
                4.0 * eps * l * abs_sum() / k
            };
            (make(re_sum() / k, im_sum() / k), b)
        }
        Red::Prod => {
            let mut p = Cd::new(1.0, 0.0);
            let mut logs = 0.0f64;
            for &(r, i) in &parts {
                p = if out.is_complex() {
                    p * Cd::new(r, i)
                } else {
                    Cd::new(p.re * r, 0.0)
                };
                let m = r.hypot(i);
                if m != 0.0 {
                    logs += m.log2().abs();
                }
            }
            let lim = if single { 100.0 } else { 900.0 };
            let b = if logs.is_finite() && logs <= lim {
                4.0 * eps * n as f64 * p.norm()
            } else {
                f64::INFINITY
            };
            (make(p.re, p.im), b)
        }
        Red::Max | Red::Min if inp == DType::Bool => {
            let mut it = g.iter().map(|v| v.as_bool());
            let r = if op == Red::Max {
                it.any(|b| b)
            } else {
                it.all(|b| b)
            };
            (V::Bool(r), 0.0)
        }
        Red::Max | Red::Min if out == DType::I32 || out == DType::I64 => {
            let it = ints();
            let r = if op == Red::Max {
                it.max().expect("nonempty")
            } else {
                it.min().expect("nonempty")
            };
            (V::I64(r).cast(out), 0.0)
        }
        Red::Max | Red::Min => {
            let mut r = parts[0].0;
            for &(x, _) in &parts[1..] {
                if r.is_nan() {
                    break;
                }
                if x.is_nan() || (op == Red::Max && x > r) || (op == Red::Min && x < r) {
                    r = x;
                }
            }
            (real(r), 0.0)
        }
        Red::ArgMax | Red::ArgMin => {
            let mut best = 0usize;
            for (k, &(x, _)) in parts.iter().enumerate().skip(1) {
                let b = parts[best].0;
                if b.is_nan() {
                    break;
                }
                if x.is_nan() || (op == Red::ArgMax && x > b) || (op == Red::ArgMin && x < b) {
                    best = k;
                }
            }
            // I64 values beyond 2^53 compare exactly
            if inp == DType::I64 {
                let v: Vec<i64> = ints().collect();
                best = 0;
                for k in 1..n {
                    if (op == Red::ArgMax && v[k] > v[best])
                        || (op == Red::ArgMin && v[k] < v[best])
                    {
                        best = k;
                    }
                }
            }
            (V::I64(best as i64), 0.0)
        }
        Red::All => (V::Bool(g.iter().all(|v| v.as_bool())), 0.0),
        Red::Any => (V::Bool(g.iter().any(|v| v.as_bool())), 0.0),
        Red::Var(ddof) | Red::Std(ddof) => {
            let (mr, mi) = (re_sum() / n as f64, im_sum() / n as f64);
            let ss = csum(
                parts
                    .iter()
                    .map(|&(r, i)| (r - mr).powi(2) + (i - mi).powi(2)),
            );
            let m = mr.hypot(mi);
            let scale = csum(parts.iter().map(|&(r, i)| (r.hypot(i) + m).powi(2)));
            let den = (n as f64 - ddof as f64).max(0.0);
            let var = ss / den;
            let bv = if maxabs > sq_big {
                f64::INFINITY
            } else {
                8.0 * eps * l * scale / den.max(1.0)
            };
            if let Red::Var(_) = op {
                (real(var), bv)
            } else {
                let sd = var.sqrt();
                let bs = if sd > 0.0 {
                    bv.sqrt().min(bv / (2.0 * sd))
                } else {
                    bv.sqrt()
                };
                (real(sd), bs)
            }
        }
        Red::Norm => {
            let ss = csum(parts.iter().map(|&(r, i)| r * r + i * i));
            let b = if maxabs > sq_big {
                f64::INFINITY
            } else {
                4.0 * eps * l * ss.sqrt()
            };
            (real(ss.sqrt()), b)
        }
    }
}

/// `op` of `x` over `axes` (all axes for `None`, which also ignores `keepdims`) the naive
/// way, with NumPy's result dtype, and per output element a bound on the error of a correct
/// implementation (pairwise or tree order, accumulating in the result's precision;
/// infinite where overflow of intermediates makes the result order-dependent). `None`
/// where lazyfuse refuses the reduction: complex max/min/argmax/argmin, an empty max/min/
/// argmax/argmin, an axis out of range or repeated, or argmax/argmin without one axis.
pub fn reduce(
    op: Red,
    x: &OVal,
    axes: Option<&[isize]>,
    keepdims: bool,
) -> Option<(OVal, ArrayD<f64>)> {
    let out = op.result_dtype(x.dtype)?;
    let nd = x.shape().len();
    let mut red: Vec<usize> = match axes {
        None => (0..nd).collect(),
        Some(ax) => ax
            .iter()
            .map(|&a| {
                let k = if a < 0 { a + nd as isize } else { a };
                (0..nd as isize).contains(&k).then_some(k as usize)
            })
            .collect::<Option<_>>()?,
    };
    red.sort_unstable();
    if red.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let arg = matches!(op, Red::ArgMax | Red::ArgMin);
    if arg && (axes.is_none() || red.len() != 1) {
        return None;
    }
    let keepdims = keepdims && axes.is_some() && !arg;
    let shape = x.shape();
    let n: usize = red.iter().map(|&a| shape[a]).product();
    if n == 0 && (arg || matches!(op, Red::Max | Red::Min)) {
        return None;
    }
    let kept: Vec<usize> = (0..nd).filter(|k| !red.contains(k)).collect();
    let m: usize = kept.iter().map(|&k| shape[k]).product();
    let mut groups: Vec<Vec<V>> = vec![Vec::with_capacity(n); m];
    for (idx, &v) in x.a.indexed_iter() {
        let p = kept.iter().fold(0, |acc, &k| acc * shape[k] + idx[k]);
        groups[p].push(v);
    }
    let (vals, bounds): (Vec<V>, Vec<f64>) = groups
        .iter()
        .map(|g| reduce_group(op, g, x.dtype, out))
        .unzip();
    let out_shape: Vec<usize> = if keepdims {
        (0..nd)
            .map(|k| if red.contains(&k) { 1 } else { shape[k] })
            .collect()
    } else {
        kept.iter().map(|&k| shape[k]).collect()
    };
    let b = ArrayD::from_shape_vec(IxDyn(&out_shape), bounds).expect("bounds shape");
    Some((OVal::new(out, &out_shape, vals), b))
}

/// `x` moved by `sign * bound` per element (real part for complex; integers and bools
/// unchanged): the twins that give a reduction's error bound as slack.
pub fn offset(x: &OVal, bound: &ArrayD<f64>, sign: f64) -> OVal {
    let mut y = x.clone();
    ndarray::Zip::from(&mut y.a).and(bound).for_each(|v, &b| {
        let d = sign * b;
        *v = match *v {
            V::F32(a) => V::F32((a as f64 + d) as f32),
            V::F64(a) => V::F64(a + d),
            V::C64(z) => V::C64(Cf::new((z.re as f64 + d) as f32, z.im)),
            V::C128(z) => V::C128(Cd::new(z.re + d, z.im)),
            other => other,
        };
    });
    y
}
