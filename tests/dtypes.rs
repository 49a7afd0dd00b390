//! The small integer, unsigned and 16-bit float dtypes against NumPy: every case of
//! `tests/data/dtypes.txt` (written by `tests/data/gen_dtypes.py`) rebuilt with lazyfuse
//! on every device, plus transfers and the documented cast rules NumPy leaves to the
//! platform.
//!
//! Comparison: shape and dtype first, then values: integers and bools exactly; floats with
//! NaN where NumPy has NaN, equal infinities and, for exact cases, equal signs of zero;
//! `uN` cases within N units in the last place of the output dtype; `rX` cases (FFTs)
//! within X of the largest output magnitude.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{bf16, f16, Array, DType, Device, Operand};
use num_complex::{Complex32, Complex64};

const CASES: &str = include_str!("data/dtypes.txt");

fn parse_dtype(s: &str) -> DType {
    match s {
        "bool" => DType::Bool,
        "i8" => DType::I8,
        "u8" => DType::U8,
        "i16" => DType::I16,
        "u16" => DType::U16,
        "i32" => DType::I32,
        "u32" => DType::U32,
        "i64" => DType::I64,
        "u64" => DType::U64,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "f32" => DType::F32,
        "f64" => DType::F64,
        "c64" => DType::C64,
        "c128" => DType::C128,
        _ => panic!("dtypes.txt: unknown dtype {s:?}"),
    }
}

/// One element, widened without loss (integers as `i128`, real floats as `f64`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    B(bool),
    I(i128),
    F(f64),
    C(f64, f64),
}

/// A host element type: decoding from little-endian bytes and widening.
trait El: lf::Element {
    const N: usize;
    fn decode(b: &[u8]) -> Self;
    fn val(self) -> Val;
}

macro_rules! int_el {
    ($($t:ty),*) => {$(
        impl El for $t {
            const N: usize = std::mem::size_of::<$t>();
            fn decode(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("element bytes"))
            }
            fn val(self) -> Val {
                Val::I(self as i128)
            }
        }
    )*};
}
int_el!(i8, u8, i16, u16, i32, u32, i64, u64);

impl El for bool {
    const N: usize = 1;
    fn decode(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn val(self) -> Val {
        Val::B(self)
    }
}
impl El for f16 {
    const N: usize = 2;
    fn decode(b: &[u8]) -> Self {
        f16::from_bits(u16::from_le_bytes([b[0], b[1]]))
    }
    fn val(self) -> Val {
        Val::F(self.to_f64())
    }
}
impl El for bf16 {
    const N: usize = 2;
    fn decode(b: &[u8]) -> Self {
        bf16::from_bits(u16::from_le_bytes([b[0], b[1]]))
    }
    fn val(self) -> Val {
        Val::F(self.to_f64())
    }
}
impl El for f32 {
    const N: usize = 4;
    fn decode(b: &[u8]) -> Self {
        f32::from_le_bytes(b.try_into().expect("4 bytes"))
    }
    fn val(self) -> Val {
        Val::F(self as f64)
    }
}
impl El for f64 {
    const N: usize = 8;
    fn decode(b: &[u8]) -> Self {
        f64::from_le_bytes(b.try_into().expect("8 bytes"))
    }
    fn val(self) -> Val {
        Val::F(self)
    }
}
impl El for Complex32 {
    const N: usize = 8;
    fn decode(b: &[u8]) -> Self {
        Complex32::new(f32::decode(&b[..4]), f32::decode(&b[4..]))
    }
    fn val(self) -> Val {
        Val::C(self.re as f64, self.im as f64)
    }
}
impl El for Complex64 {
    const N: usize = 16;
    fn decode(b: &[u8]) -> Self {
        Complex64::new(f64::decode(&b[..8]), f64::decode(&b[8..]))
    }
    fn val(self) -> Val {
        Val::C(self.re, self.im)
    }
}

/// Runs `$body` with `$T` the host type of dtype `$d`.
macro_rules! with_host {
    ($d:expr, $T:ident => $body:expr) => {
        match $d {
            DType::Bool => {
                type $T = bool;
                $body
            }
            DType::I8 => {
                type $T = i8;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::I16 => {
                type $T = i16;
                $body
            }
            DType::U16 => {
                type $T = u16;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U64 => {
                type $T = u64;
                $body
            }
            DType::F16 => {
                type $T = f16;
                $body
            }
            DType::BF16 => {
                type $T = bf16;
                $body
            }
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::C64 => {
                type $T = Complex32;
                $body
            }
            DType::C128 => {
                type $T = Complex64;
                $body
            }
        }
    };
}

/// An array of the case file.
#[derive(Clone, Debug)]
struct Arr {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl Arr {
    fn parse(s: &str) -> Arr {
        let (dt, shape, bytes) = common::parse_fixture_array(s);
        let dtype = parse_dtype(&dt);
        assert_eq!(
            bytes.len(),
            shape.iter().product::<usize>() * dtype.size(),
            "dtypes.txt: size of {s:.60}"
        );
        Arr {
            dtype,
            shape,
            bytes,
        }
    }

    fn typed<T: El>(&self) -> Vec<T> {
        self.bytes.chunks_exact(T::N).map(T::decode).collect()
    }

    fn vals(&self) -> Vec<Val> {
        with_host!(self.dtype, T => self.typed::<T>().into_iter().map(El::val).collect())
    }

    fn upload(&self, dev: &Device) -> Array {
        with_host!(self.dtype, T => {
            Array::from_vec_on(self.typed::<T>(), &self.shape, dev).expect("upload")
        })
    }
}

/// The values of `a` (evaluated) in the widened form.
fn read(a: &Array) -> lf::Result<Vec<Val>> {
    with_host!(a.dtype(), T => Ok(a.to_vec::<T>()?.into_iter().map(El::val).collect()))
}

struct Case {
    name: String,
    op: String,
    params: Vec<String>,
    tol: String,
    inputs: Vec<Arr>,
    outputs: Vec<Arr>,
}

fn cases() -> Vec<Case> {
    CASES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(" | ").map(str::trim).collect();
            assert_eq!(f.len(), 6, "dtypes.txt: bad line {l:.80}");
            let arrs = |s: &str| -> Vec<Arr> {
                if s == "-" {
                    Vec::new()
                } else {
                    s.split(" ; ").map(Arr::parse).collect()
                }
            };
            Case {
                name: f[0].to_string(),
                op: f[1].to_string(),
                params: if f[2] == "-" {
                    Vec::new()
                } else {
                    f[2].split(' ').map(String::from).collect()
                },
                tol: f[3].to_string(),
                inputs: arrs(f[4]),
                outputs: arrs(f[5]),
            }
        })
        .collect()
}

/// The value of parameter `tag:..` (the text after the tag).
fn param<'a>(c: &'a Case, tag: &str) -> Option<&'a str> {
    c.params
        .iter()
        .find_map(|p| p.strip_prefix(tag).and_then(|r| r.strip_prefix(':')))
}

/// The right operand: the second input, or a weak Rust scalar parameter.
fn rhs(c: &Case, xs: &[Array]) -> Operand {
    if let Some(v) = param(c, "si") {
        let v: i128 = v.parse().expect("si");
        return match i64::try_from(v) {
            Ok(v) => v.into(),
            Err(_) => (u64::try_from(v).expect("si fits u64")).into(),
        };
    }
    if let Some(v) = param(c, "sf") {
        return v.parse::<f64>().expect("sf").into();
    }
    if let Some(v) = param(c, "sc") {
        let (re, im) = v.split_once(':').expect("sc");
        return lf::c64::new(re.parse().expect("re"), im.parse().expect("im")).into();
    }
    xs[1].clone().into()
}

fn build(c: &Case, xs: &[Array], dev: &Device) -> Array {
    let dt = || parse_dtype(param(c, "dt").expect("dt param"));
    let x = || &xs[0];
    match c.op.as_str() {
        "add" => x() + rhs(c, xs),
        "sub" => x() - rhs(c, xs),
        "mul" => x() * rhs(c, xs),
        "div" => x() / rhs(c, xs),
        "mod" => x() % rhs(c, xs),
        "floordiv" => x().floor_div(rhs(c, xs)),
        "max" => x().maximum(rhs(c, xs)),
        "min" => x().minimum(rhs(c, xs)),
        "eq" => x().eq(rhs(c, xs)),
        "lt" => x().lt(rhs(c, xs)),
        "ge" => x().ge(rhs(c, xs)),
        "pow" => x().pow(rhs(c, xs)),
        "atan2" => x().atan2(rhs(c, xs)),
        "hypot" => x().hypot(rhs(c, xs)),
        "neg" => -x(),
        "abs" => x().abs(),
        "sign" => x().sign(),
        "square" => x().square(),
        "sqrt" => x().sqrt(),
        "floor" => x().floor(),
        "ceil" => x().ceil(),
        "round" => x().round(),
        "trunc" => x().trunc(),
        "reciprocal" => x().reciprocal(),
        "isnan" => x().isnan(),
        "isinf" => x().isinf(),
        "exp" => x().exp(),
        "log" => x().log(),
        "sin" => x().sin(),
        "cos" => x().cos(),
        "tanh" => x().tanh(),
        "expm1" => x().expm1(),
        "log1p" => x().log1p(),
        "atan" => x().atan(),
        "chain" => (&(x() * &xs[1]) + &xs[2]) * x(),
        "astype" => x().astype(dt()),
        "sum" => x().sum(),
        "prod" => x().prod(),
        "mean" => x().mean(),
        "var" => x().var(),
        "argmax" => x().argmax(0),
        "argmin" => x().argmin(0),
        "sum_axis" => {
            let ax: isize = param(c, "i").expect("axis").parse().expect("axis");
            x().sum_axes(&[ax], false)
        }
        "max_axis" => {
            let ax: isize = param(c, "i").expect("axis").parse().expect("axis");
            x().max_axes(&[ax], false)
        }
        "rsub" => {
            let v: i64 = param(c, "si").expect("si").parse().expect("si");
            v - x()
        }
        "fft" => lf::fft::fft(x(), -1),
        "zeros" => Array::zeros_on(&[3], dt(), dev),
        "ones" => Array::ones_on(&[3], dt(), dev),
        "full" => {
            let v: f64 = param(c, "f").expect("value").parse().expect("value");
            Array::full_on(&[3], v, dt(), dev)
        }
        "arange" => Array::arange_on(0.0, 10.0, 2.0, dt(), dev),
        "flip" => x().flip(0),
        "matmul" => x().matmul(&xs[1]),
        "where" => lf::where_(x(), &xs[1], &xs[2]),
        op => panic!("dtypes.txt: unknown op {op:?}"),
    }
}

/// Reductions named like elementwise ops (`max`, `min`) are told apart by their inputs.
fn build_case(c: &Case, xs: &[Array], dev: &Device) -> Array {
    let reduction = c.name.starts_with("reduce/");
    match c.op.as_str() {
        "max" if reduction => xs[0].max(),
        "min" if reduction => xs[0].min(),
        _ => build(c, xs, dev),
    }
}

/// One unit in the last place of `m >= 0` in the real dtype `d`.
fn ulp(d: DType, m: f64) -> f64 {
    let (p, emin) = match d {
        DType::F16 => (11, -14),
        DType::BF16 => (8, -126),
        DType::F32 | DType::C64 => (24, -126),
        _ => (53, -1022),
    };
    let e = if m > 0.0 {
        (m.log2().floor() as i32).max(emin)
    } else {
        emin
    };
    2f64.powi(e - p + 1)
}

fn real_ok(g: f64, e: f64, d: DType, tol: &str, scale: f64) -> bool {
    if e.is_nan() || g.is_nan() {
        return e.is_nan() && g.is_nan();
    }
    if e.is_infinite() || g.is_infinite() {
        return g == e;
    }
    if tol == "0" {
        return g == e && g.is_sign_negative() == e.is_sign_negative();
    }
    if let Some(n) = tol.strip_prefix('u') {
        let n: f64 = n.parse().expect("ulps");
        return (g - e).abs() <= n * ulp(d, e.abs());
    }
    let r: f64 = tol
        .strip_prefix('r')
        .expect("tolerance")
        .parse()
        .expect("rel");
    (g - e).abs() <= r * scale + ulp(d, scale)
}

/// Problems of one case on `dev` (empty when it matches NumPy).
fn check(c: &Case, dev: &Device) -> Vec<String> {
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let xs: Vec<Array> = c.inputs.iter().map(|a| a.upload(dev)).collect();
        build_case(c, &xs, dev)
    }));
    let got = match built {
        Ok(g) => g,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return vec![format!("building panicked: {msg}")];
        }
    };
    let exp = &c.outputs[0];
    if got.shape() != exp.shape.as_slice() {
        return vec![format!("shape {:?}, NumPy {:?}", got.shape(), exp.shape)];
    }
    if got.dtype() != exp.dtype {
        return vec![format!("dtype {}, NumPy {}", got.dtype(), exp.dtype)];
    }
    let g = match read(&got) {
        Ok(g) => g,
        Err(e) => return vec![format!("evaluation failed: {e}")],
    };
    let e = exp.vals();
    let scale = e
        .iter()
        .map(|v| match *v {
            Val::F(x) if x.is_finite() => x.abs(),
            Val::C(a, b) => a.hypot(b),
            _ => 0.0,
        })
        .fold(0.0, f64::max);
    let d = exp.dtype.real();
    let mut bad = Vec::new();
    for (i, (gv, ev)) in g.iter().zip(&e).enumerate() {
        let ok = match (*gv, *ev) {
            (Val::B(a), Val::B(b)) => a == b,
            (Val::I(a), Val::I(b)) => a == b,
            (Val::F(a), Val::F(b)) => real_ok(a, b, d, &c.tol, scale),
            (Val::C(a, b), Val::C(x, y)) => {
                real_ok(a, x, d, &c.tol, scale) && real_ok(b, y, d, &c.tol, scale)
            }
            _ => false,
        };
        if !ok && bad.len() < 4 {
            let inputs: Vec<Vec<Val>> = c.inputs.iter().map(Arr::vals).collect();
            bad.push(format!(
                "[{i}] got {gv:?}, NumPy {ev:?} (inputs {inputs:?})"
            ));
        }
    }
    bad
}

/// Runs every case whose name starts with `group/` on `dev`.
fn run_group(group: &str, dev: &Device) {
    let all = cases();
    let mine: Vec<&Case> = all
        .iter()
        .filter(|c| c.name.split('/').next() == Some(group))
        .collect();
    assert!(!mine.is_empty(), "no cases in group {group}");
    let mut fails = Vec::new();
    for c in &mine {
        for p in check(c, dev) {
            fails.push(format!("{}: {p}", c.name));
        }
    }
    assert!(
        fails.is_empty(),
        "{} of {} cases of {group} differ from NumPy on {dev}:\n{}",
        fails.len(),
        mine.len(),
        fails.join("\n")
    );
}

device_test!(promotion_of_every_dtype_pair);
fn promotion_of_every_dtype_pair(dev: &Device) {
    run_group("promote", dev);
}

device_test!(weak_rust_scalars);
fn weak_rust_scalars(dev: &Device) {
    run_group("weak", dev);
}

device_test!(integer_arithmetic_wraps);
fn integer_arithmetic_wraps(dev: &Device) {
    run_group("int", dev);
}

device_test!(half_precision_ops);
fn half_precision_ops(dev: &Device) {
    run_group("half", dev);
}

device_test!(mixed_dtype_ops);
fn mixed_dtype_ops(dev: &Device) {
    run_group("mixed", dev);
}

device_test!(casts_between_every_dtype_pair);
fn casts_between_every_dtype_pair(dev: &Device) {
    run_group("cast", dev);
}

device_test!(reductions_of_each_dtype);
fn reductions_of_each_dtype(dev: &Device) {
    run_group("reduce", dev);
}

device_test!(fft_of_small_and_half_inputs);
fn fft_of_small_and_half_inputs(dev: &Device) {
    run_group("fft", dev);
}

device_test!(matmul_and_where_of_each_dtype);
fn matmul_and_where_of_each_dtype(dev: &Device) {
    run_group("linalg", dev);
}

device_test!(creation_in_each_dtype);
fn creation_in_each_dtype(dev: &Device) {
    run_group("create", dev);
}

device_test!(round_trips_through_a_kernel);
fn round_trips_through_a_kernel(dev: &Device) {
    run_group("trip", dev);
}

device_test!(transfers_of_each_dtype);
fn transfers_of_each_dtype(dev: &Device) {
    let u = [0u64, 1, (1 << 63) + 5, u64::MAX];
    let a = Array::from_vec_on(u.to_vec(), &[2, 2], dev).unwrap();
    assert_eq!((a.shape(), a.dtype()), (&[2, 2][..], DType::U64));
    assert_eq!(a.to_vec::<u64>().unwrap(), u);
    let h = a.to_host::<u64>().unwrap();
    assert_eq!(h.shape(), &[2, 2]);
    assert_eq!(h[[1, 1]], u64::MAX);
    let last = a.slice(lf::s![1, 1]);
    assert_eq!((last.shape(), last.dtype()), (&[][..], DType::U64));
    assert_eq!(last.item::<u64>().unwrap(), u64::MAX);
    // above i64::MAX: order, conversion to f64 and wrapping stay unsigned
    let big = a.slice(lf::s![1, ..]);
    assert_eq!(big.gt(1u64 << 62).to_vec::<bool>().unwrap(), [true, true]);
    assert_eq!(
        big.astype(DType::F64).to_vec::<f64>().unwrap(),
        [9_223_372_036_854_775_813.0, 18_446_744_073_709_551_615.0]
    );
    assert_eq!((&big + 1u64).to_vec::<u64>().unwrap(), [(1 << 63) + 6, 0]);
    assert_eq!(big.max().item::<u64>().unwrap(), u64::MAX);

    let i = Array::from_vec_on(vec![-128i8, 127], &[2], dev).unwrap();
    assert_eq!(i.dtype(), DType::I8);
    assert!(i.item::<i8>().is_err(), "item of a 2-element array");
    assert_eq!(i.slice(lf::s![0]).item::<i8>().unwrap(), -128);
    assert!(i.to_vec::<u8>().is_err(), "to_vec of another element type");

    let h16 = [
        f16::from_f32(1.5),
        f16::NEG_INFINITY,
        f16::MIN_POSITIVE_SUBNORMAL,
    ];
    let h = Array::from_vec_on(h16.to_vec(), &[3], dev).unwrap();
    assert_eq!((h.shape(), h.dtype()), (&[3][..], DType::F16));
    let back = h.to_vec::<f16>().unwrap();
    assert_eq!(
        back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        h16.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    let b16 = [bf16::from_f32(-2.5), bf16::NAN, bf16::MAX];
    let b = Array::from_vec_on(b16.to_vec(), &[3], dev).unwrap();
    assert_eq!(b.dtype(), DType::BF16);
    let back = b.flip(0).to_vec::<bf16>().unwrap();
    assert_eq!(back[0].to_bits(), bf16::MAX.to_bits());
    assert!(back[1].is_nan());
    assert_eq!(back[2].to_f32(), -2.5);
    assert_eq!(
        b.slice(lf::s![2]).item::<bf16>().unwrap().to_bits(),
        bf16::MAX.to_bits()
    );
}

device_test!(float_to_small_and_unsigned_casts_follow_the_documented_rule);
fn float_to_small_and_unsigned_casts_follow_the_documented_rule(dev: &Device) {
    // docs/numpy_users.md: 8- and 16-bit targets go through the int32 cast and wrap,
    // uint32 through the int64 cast, uint64 truncates [2^63, 2^64) and otherwise goes
    // through the int64 cast (NaN, infinities and values out of range give the minimum of
    // the signed cast, then wrap)
    let x = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e10,
        -1.5,
        300.7,
        1.5e19,
        2e19,
    ];
    let a = Array::from_vec_on(x.to_vec(), &[x.len()], dev).unwrap();
    let u8s = a.astype(DType::U8);
    assert_eq!((u8s.shape(), u8s.dtype()), (&[8][..], DType::U8));
    assert_eq!(u8s.to_vec::<u8>().unwrap(), [0, 0, 0, 0, 255, 44, 0, 0]);
    let i16s = a.astype(DType::I16);
    assert_eq!(i16s.dtype(), DType::I16);
    assert_eq!(i16s.to_vec::<i16>().unwrap(), [0, 0, 0, 0, -1, 300, 0, 0]);
    let u32s = a.astype(DType::U32);
    assert_eq!(u32s.dtype(), DType::U32);
    assert_eq!(
        u32s.to_vec::<u32>().unwrap(),
        [0, 0, 0, 1_410_065_408, u32::MAX, 300, 0, 0]
    );
    let u64s = a.astype(DType::U64);
    assert_eq!(u64s.dtype(), DType::U64);
    let min = 1u64 << 63;
    assert_eq!(
        u64s.to_vec::<u64>().unwrap(),
        [
            min,
            min,
            min,
            10_000_000_000,
            u64::MAX,
            300,
            15_000_000_000_000_000_000,
            min
        ]
    );
    // the same from float32 and float16 sources (through the exact f64 value)
    let h = a.astype(DType::F16).astype(DType::U16);
    assert_eq!(h.dtype(), DType::U16);
    assert_eq!(h.to_vec::<u16>().unwrap(), [0, 0, 0, 0, 65535, 300, 0, 0]);
}

device_test!(weak_integer_scalars_out_of_range_panic);
fn weak_integer_scalars_out_of_range_panic(dev: &Device) {
    let a = Array::from_vec_on(vec![1u8, 2], &[2], dev).unwrap();
    let i = Array::from_vec_on(vec![1i8, 2], &[2], dev).unwrap();
    let r =
        |f: &dyn Fn() -> Array| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
    assert!(r(&|| &a + 256), "uint8 + 256");
    assert!(r(&|| &a - (-1)), "uint8 - (-1)");
    assert!(r(&|| &i * 128), "int8 * 128");
    // in range: the array's dtype, wrapping
    let s = 255u8 + &a;
    assert_eq!((s.shape(), s.dtype()), (&[2][..], DType::U8));
    assert_eq!(s.to_vec::<u8>().unwrap(), [0, 1]);
    let t = &i - 127;
    assert_eq!(t.dtype(), DType::I8);
    assert_eq!(t.to_vec::<i8>().unwrap(), [-126, -125]);
}

device_test!(large_arrays_cross_tiles_and_chunks);
fn large_arrays_cross_tiles_and_chunks(dev: &Device) {
    // many interpreter tiles and parallel chunks; every value exact in its dtype
    const N: usize = 300_007;
    let v: Vec<f16> = (0..N).map(|i| f16::from_f32((i % 64) as f32)).collect();
    let x = Array::from_vec_on(v, &[N], dev).unwrap();
    let y = (&x * 2.0 + 0.5).flip(0);
    assert_eq!((y.shape(), y.dtype()), (&[N][..], DType::F16));
    let got = y.to_vec::<f16>().unwrap();
    for (j, g) in got.iter().enumerate() {
        let i = N - 1 - j;
        assert_eq!(g.to_f32(), (i % 64) as f32 * 2.0 + 0.5, "element {j}");
    }
    // f32 accumulation of a float16 sum: 0 + 1 + ... + 63 per 64 elements
    let s = x.astype(DType::F32).sum();
    let full = (N / 64) as f64 * 2016.0;
    let rest: f64 = (0..N % 64).map(|i| i as f64).sum();
    assert_eq!(s.dtype(), DType::F32);
    assert_eq!(s.item::<f32>().unwrap() as f64, full + rest);

    let u: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
    let a = Array::from_vec_on(u, &[N], dev).unwrap();
    let w = &a * 3u8; // wraps
    assert_eq!(w.dtype(), DType::U8);
    let got = w.to_vec::<u8>().unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &g)| g == ((i % 251) * 3 % 256) as u8));
    let total = a.sum();
    assert_eq!((total.shape(), total.dtype()), (&[][..], DType::U64));
    let want: u64 = (0..N as u64).map(|i| i % 251).sum();
    assert_eq!(total.item::<u64>().unwrap(), want);
}

device_test!(half_means_count_past_the_float16_range);
fn half_means_count_past_the_float16_range(dev: &Device) {
    // 70000 elements: a float16 count would be infinite
    const N: usize = 70_000;
    let v: Vec<f16> = (0..N)
        .map(|i| {
            if i % 2 == 0 {
                f16::from_f32(3.0)
            } else {
                f16::NAN
            }
        })
        .collect();
    let x = Array::from_vec_on(v, &[N], dev).unwrap();
    let m = x.nanmean();
    assert_eq!((m.shape(), m.dtype()), (&[][..], DType::F16));
    assert_eq!(m.item::<f16>().unwrap().to_f32(), 3.0);
    let ones = Array::ones_on(&[N], DType::BF16, dev);
    let m = ones.mean();
    assert_eq!((m.shape(), m.dtype()), (&[][..], DType::BF16));
    assert_eq!(m.item::<bf16>().unwrap().to_f32(), 1.0);
}
