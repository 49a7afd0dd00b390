//! Elementwise operations against the naive oracle: every unary and binary op over every
//! dtype, weak-scalar promotion, comparisons, logical ops, `where_`, `astype`, `complex`,
//! `clip`, powers, broadcasting (0-d and 0-size too) and special values.

#[macro_use]
mod common;

use common::oracle::{self as o, Bi, OVal, Opnd, Tol, Un, V};
use lazyfuse as lf;
use lf::{c32, c64, Array, DType, Device};
use std::panic::{catch_unwind, AssertUnwindSafe};

const NAN32: f32 = f32::NAN;
const INF32: f32 = f32::INFINITY;

/// Awkward values of each dtype: zeros of both signs, NaN, infinities, halves (rounding),
/// negatives, subnormals and integers near the wraparound limits.
fn vals(d: DType) -> Vec<V> {
    let f64s = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        3.7,
        -3.7,
        0.1,
        1e-3,
        7.0,
        -7.0,
        100.0,
        3e9,
        -1e30,
        1e30,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    match d {
        DType::Bool => [true, false, true, true, false].map(V::Bool).to_vec(),
        DType::I32 => [
            0,
            1,
            -1,
            2,
            -2,
            3,
            7,
            -7,
            100,
            -100,
            46341,
            i32::MAX,
            i32::MIN,
            i32::MAX - 1,
            i32::MIN + 1,
        ]
        .map(V::I32)
        .to_vec(),
        DType::I64 => [
            0,
            1,
            -1,
            2,
            -2,
            3,
            7,
            -7,
            100,
            -100,
            3_037_000_500,
            1 << 40,
            -(1 << 40),
            9_007_199_254_740_993,
            i64::MAX,
            i64::MIN,
        ]
        .map(V::I64)
        .to_vec(),
        DType::F32 => {
            let mut v: Vec<V> = f64s.iter().map(|&x| V::F32(x as f32)).collect();
            v.push(V::F32(1e-40)); // subnormal
            v
        }
        DType::F64 => {
            let mut v: Vec<V> = f64s.iter().map(|&x| V::F64(x)).collect();
            v.extend([1e300, -1e300, 1e-310, -2147483648.5, 2147483647.9].map(V::F64));
            v
        }
        DType::C64 | DType::C128 => {
            let z = [
                (1.0, 2.0),
                (-3.0, 0.5),
                (0.5, -1.5),
                (-2.0, -2.0),
                (1e-3, 4.0),
                (0.0, 1.0),
                (2.0, 0.0),
                (-1.0, 1e-3),
                (3.0, -4.0),
                (0.0, 0.0),
            ];
            z.iter()
                .map(|&(r, i)| V::C128(c64::new(r, i)).cast(d))
                .collect()
        }
        d => panic!("vals: dtype {d} is not modeled by the oracle (see tests/dtypes.rs)"),
    }
}

fn input(d: DType, shape: &[usize]) -> OVal {
    let v = vals(d);
    let n = v.len();
    let s: Vec<usize> = shape
        .iter()
        .map(|&k| if k == usize::MAX { n } else { k })
        .collect();
    OVal::new(d, &s, v)
}

/// The tolerance of one op on one result dtype.
fn tol_for(d: DType) -> Tol {
    match d {
        DType::C64 | DType::C128 => Tol::DEFAULT,
        _ => Tol::ULPS,
    }
}

/// The tolerance of a binary op: complex powers that overflow have an ill-conditioned
/// direction (`b * arg(a)` for a huge `b`), so there a non-finite result only has to be
/// non-finite.
fn tol_bin(op: Bi, d: DType) -> Tol {
    match op {
        Bi::Pow if d.is_complex() => Tol::DEFAULT.loose_complex(),
        _ => tol_for(d),
    }
}

fn panic_msg(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<panic>".into())
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Builds a lazy array, turning a graph-building panic into `Err` (without printing the
/// expected panic's message).
fn try_build(f: impl FnOnce() -> Array) -> Result<Array, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                default(info)
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let r = catch_unwind(AssertUnwindSafe(f)).map_err(panic_msg);
    QUIET.with(|q| q.set(false));
    r
}

/// Cases built on one device: evaluated together in one plan, then compared one by one.
struct Batch {
    cases: Vec<(String, Array, OVal, Tol)>,
    fails: Vec<String>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            cases: vec![],
            fails: vec![],
        }
    }

    /// Records one case: the oracle's result (`None` = must be rejected) against the
    /// lazyfuse build.
    fn case(&mut self, name: String, want: Option<OVal>, got: impl FnOnce() -> Array, tol: Tol) {
        match (want, try_build(got)) {
            (None, Err(_)) => {}
            (None, Ok(a)) => self.fails.push(format!(
                "{name}: accepted (result {} {:?}) but NumPy/the oracle rejects it",
                a.dtype(),
                a.shape()
            )),
            (Some(_), Err(e)) => self
                .fails
                .push(format!("{name}: panicked while building: {e}")),
            (Some(w), Ok(a)) => self.cases.push((name, a, w, tol)),
        }
    }

    /// Evaluates the cases in plans of up to 16 arrays (so that fewer kernels compile on
    /// CUDA) and compares.
    fn run(mut self) -> Vec<String> {
        for chunk in self.cases.chunks(16) {
            let refs: Vec<&Array> = chunk.iter().map(|c| &c.1).collect();
            if let Err(e) = lf::eval(&refs) {
                self.fails
                    .push(format!("lf::eval of a batch of {} failed: {e}", refs.len()));
            }
        }
        for (name, a, w, tol) in &self.cases {
            if let Err(e) = o::check(a, w, *tol) {
                self.fails.push(format!("{name}: {e}"));
            }
        }
        self.fails
    }
}

#[track_caller]
fn assert_no_fails(dev: &Device, fails: Vec<String>) {
    assert!(
        fails.is_empty(),
        "{} failing cases on {dev}:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

device_test!(unary_ops_over_every_dtype);
fn unary_ops_over_every_dtype(dev: &Device) {
    let mut fails = vec![];
    for d in o::DTYPES {
        let x = input(d, &[usize::MAX]);
        let xa = x.to_lf(dev);
        let mut b = Batch::new();
        for op in Un::ALL {
            let want = o::unary(op, &x);
            let tol = want.as_ref().map_or(Tol::DEFAULT, |w| tol_for(w.dtype));
            b.case(format!("{op:?}({d})"), want, || op.apply(&xa), tol);
        }
        fails.extend(b.run());
    }
    assert_no_fails(dev, fails);
}

device_test!(unary_ops_on_strided_2d_views);
fn unary_ops_on_strided_2d_views(dev: &Device) {
    // the same ops read through a transpose and a negative-step slice
    let mut b = Batch::new();
    for d in [DType::I32, DType::F32, DType::F64, DType::C128] {
        let x = input(d, &[usize::MAX]);
        let n = x.size() as isize;
        let x2 = x.slice(lf::s![..n / 2 * 2]).reshape(&[2, -1]);
        let v = x2.transpose().slice(lf::s![..;-1, ..]);
        let xa = x.to_lf(dev);
        let va = xa
            .slice(lf::s![..n / 2 * 2])
            .reshape(&[2, -1])
            .transpose()
            .slice(lf::s![..;-1, ..]);
        for op in [
            Un::Abs,
            Un::Exp,
            Un::Sqrt,
            Un::Sign,
            Un::Square,
            Un::IsNan,
            Un::Neg,
        ] {
            let want = o::unary(op, &v);
            let tol = want.as_ref().map_or(Tol::DEFAULT, |w| tol_for(w.dtype));
            b.case(format!("{op:?}({d}, strided)"), want, || op.apply(&va), tol);
        }
    }
    assert_no_fails(dev, b.run());
}

device_test!(binary_ops_over_every_dtype_pair);
fn binary_ops_over_every_dtype_pair(dev: &Device) {
    // every pair of values: x as a column, y as a row (broadcasting to the outer product)
    let mut fails = vec![];
    for da in o::DTYPES {
        for db in o::DTYPES {
            let x = input(da, &[usize::MAX, 1]);
            let y = input(db, &[1, usize::MAX]);
            let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
            let mut b = Batch::new();
            for op in Bi::ALL {
                // Complex power with infinite bases: the oracle's npy_cpow port gives
                // inf+0i where NumPy 2.4 gives inf+nanj; the NumPy fixtures
                // (numpy_fixtures.rs) check complex power against NumPy itself.
                if op == Bi::Pow && (da.is_complex() || db.is_complex()) {
                    continue;
                }
                let want = o::binary(op, Opnd::A(&x), Opnd::A(&y));
                let tol = want.as_ref().map_or(Tol::DEFAULT, |w| tol_bin(op, w.dtype));
                b.case(
                    format!("{op:?}({da}, {db})"),
                    want,
                    || op.apply(&xa, &ya),
                    tol,
                );
            }
            fails.extend(b.run());
        }
    }
    assert_no_fails(dev, fails);
}

fn weak_scalars() -> Vec<V> {
    vec![
        V::Bool(true),
        V::Bool(false),
        V::I32(3),
        V::I32(-2),
        V::I64(-7),
        V::I64(0),
        V::F32(2.5),
        V::F64(-0.75),
        V::F64(0.1),
        V::F64(f64::NAN),
        V::C64(c32::new(0.5, -1.0)),
        V::C128(c64::new(0.0, 1.0)),
    ]
}

device_test!(weak_scalar_operands_on_both_sides);
fn weak_scalar_operands_on_both_sides(dev: &Device) {
    let mut fails = vec![];
    for d in o::DTYPES {
        let x = input(d, &[usize::MAX]);
        let xa = x.to_lf(dev);
        let mut b = Batch::new();
        for s in weak_scalars() {
            for op in Bi::ALL {
                let want = o::binary(op, Opnd::A(&x), Opnd::S(s));
                let tol = want.as_ref().map_or(Tol::DEFAULT, |w| tol_bin(op, w.dtype));
                b.case(
                    format!("{op:?}({d}, {s:?})"),
                    want,
                    || op.apply(&xa, s),
                    tol,
                );
                if op.is_operator() {
                    let want = o::binary(op, Opnd::S(s), Opnd::A(&x));
                    let tol = want.as_ref().map_or(Tol::DEFAULT, |w| tol_bin(op, w.dtype));
                    b.case(
                        format!("{op:?}({s:?}, {d})"),
                        want,
                        || op.apply_lhs(s, &xa),
                        tol,
                    );
                }
            }
        }
        fails.extend(b.run());
    }
    assert_no_fails(dev, fails);
}

device_test!(weak_scalar_promotion_dtypes);
#[allow(clippy::eq_op)] // an array with itself is the case under test
fn weak_scalar_promotion_dtypes(dev: &Device) {
    let f32a = Array::from_slice_on(&[1.0f32, -2.0, 3.5], &[3], dev).unwrap();
    let i32a = Array::from_slice_on(&[1i32, -2, 7], &[3], dev).unwrap();
    let i64a = Array::from_slice_on(&[4i64, 5, -6], &[3], dev).unwrap();
    let boola = Array::from_slice_on(&[true, false, true], &[3], dev).unwrap();
    let c64a = Array::from_slice_on(&[c32::new(1.0, 1.0); 3], &[3], dev).unwrap();

    assert_eq!((&f32a * 2.0).dtype(), DType::F32);
    // a bare `2.0 * &a` does not compile (f32 and f64 both implement `Mul<&Array>`),
    // so the literal carries its type
    assert_eq!((2.0f64 * &f32a).dtype(), DType::F32);
    assert_eq!((2.0f32 * &f32a).dtype(), DType::F32);
    assert_eq!((2i32 * &i32a).dtype(), DType::I32);
    assert_eq!((2.5f64 * &i32a).dtype(), DType::F64);
    assert_eq!((&f32a + 1i32).dtype(), DType::F32);
    assert_eq!((&i32a * 2.5).dtype(), DType::F64);
    assert_eq!((&i32a + 1i32).dtype(), DType::I32);
    assert_eq!((&i32a + 1i64).dtype(), DType::I32);
    assert_eq!((&i32a * true).dtype(), DType::I32);
    assert_eq!((&f32a * c64::new(0.0, 1.0)).dtype(), DType::C64);
    assert_eq!((&f32a * c64::i()).dtype(), DType::C64);
    assert_eq!((&i32a * c64::i()).dtype(), DType::C128);
    assert_eq!((&c64a * 2.5f64).dtype(), DType::C64);
    assert_eq!((&i32a / &i32a).dtype(), DType::F64);
    assert_eq!((&i32a / 2i32).dtype(), DType::F64);
    assert_eq!((&boola + 1i32).dtype(), DType::I64);
    assert_eq!((&boola + 1.0).dtype(), DType::F64);
    assert_eq!((&boola * true).dtype(), DType::Bool);
    assert_eq!((&i32a + &i64a).dtype(), DType::I64);
    assert_eq!((&i32a + &f32a).dtype(), DType::F64);
    assert_eq!((&f32a + &c64a).dtype(), DType::C64);
    assert_eq!((&i32a + &c64a).dtype(), DType::C128);
    assert_eq!(i32a.powf(2.0).dtype(), DType::F64);
    assert_eq!(i32a.powi(2).dtype(), DType::I32);
    assert_eq!(f32a.powi(2).dtype(), DType::F32);
    assert_eq!(f32a.gt(1.5).dtype(), DType::Bool);

    // values, with the operator forms (owned and borrowed on both sides)
    let x = OVal::from_vec(vec![1.0f32, -2.0, 3.5], &[3]);
    let want = o::binary(Bi::Mul, Opnd::A(&x), Opnd::S(V::F64(2.0))).unwrap();
    o::assert_close(&(&f32a * 2.0), &want, Tol::EXACT, "f32 * 2.0");
    o::assert_close(&(2.0f64 * &f32a), &want, Tol::EXACT, "2.0 * f32");
    o::assert_close(&(f32a.clone() * 2.0), &want, Tol::EXACT, "owned f32 * 2.0");
    o::assert_close(
        &(2.0f64 * f32a.clone()),
        &want,
        Tol::EXACT,
        "2.0 * owned f32",
    );
    let xi = OVal::from_vec(vec![1i32, -2, 7], &[3]);
    let want = o::binary(Bi::Add, Opnd::A(&xi), Opnd::S(V::I32(1))).unwrap();
    o::assert_close(&(&i32a + 1i32), &want, Tol::EXACT, "i32 + 1i32");
    let want = o::binary(Bi::Sub, Opnd::A(&x), Opnd::A(&xi)).unwrap();
    o::assert_close(&(&f32a - &i32a), &want, Tol::EXACT, "&f32 - &i32");
    o::assert_close(&(f32a.clone() - &i32a), &want, Tol::EXACT, "f32 - &i32");
    o::assert_close(&(&f32a - i32a.clone()), &want, Tol::EXACT, "&f32 - i32");
    o::assert_close(
        &(f32a.clone() - i32a.clone()),
        &want,
        Tol::EXACT,
        "f32 - i32",
    );
    let want = o::binary(Bi::Mul, Opnd::A(&x), Opnd::S(V::C128(c64::new(0.0, 1.0)))).unwrap();
    o::assert_close(
        &(&f32a * c64::new(0.0, 1.0)),
        &want,
        Tol::DEFAULT,
        "f32 * 1j",
    );
    let want = o::binary(Bi::Div, Opnd::A(&xi), Opnd::A(&xi)).unwrap();
    o::assert_close(&(&i32a / &i32a), &want, Tol::EXACT, "i32 / i32");
    let want = o::unary(Un::Neg, &x).unwrap();
    o::assert_close(&(-&f32a), &want, Tol::EXACT, "-&f32");
    o::assert_close(&(-f32a.clone()), &want, Tol::EXACT, "-f32");
    let xb = OVal::from_vec(vec![true, false, true], &[3]);
    let want = o::unary(Un::Not, &xb).unwrap();
    o::assert_close(&(!&boola), &want, Tol::EXACT, "!&bool");
    o::assert_close(&(!boola.clone()), &want, Tol::EXACT, "!bool");
}

device_test!(correctly_rounded_arithmetic_and_sqrt);
fn correctly_rounded_arithmetic_and_sqrt(dev: &Device) {
    // + - * / and sqrt are correctly rounded: bit-exact against the oracle
    let mut b = Batch::new();
    for d in [DType::F32, DType::F64] {
        let x = input(d, &[usize::MAX, 1]);
        let y = input(d, &[1, usize::MAX]);
        let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
        for op in [Bi::Add, Bi::Sub, Bi::Mul, Bi::Div] {
            let want = o::binary(op, Opnd::A(&x), Opnd::A(&y));
            b.case(
                format!("{op:?}({d}) exact"),
                want,
                || op.apply(&xa, &ya),
                Tol::EXACT,
            );
        }
        let want = o::unary(Un::Sqrt, &y);
        b.case(format!("sqrt({d}) exact"), want, || ya.sqrt(), Tol::EXACT);
    }
    assert_no_fails(dev, b.run());
}

device_test!(comparisons_and_logical_ops_with_scalars);
fn comparisons_and_logical_ops_with_scalars(dev: &Device) {
    let mut b = Batch::new();
    for d in o::DTYPES {
        let x = input(d, &[usize::MAX]);
        let xa = x.to_lf(dev);
        let scalars = [
            V::F64(f64::NAN),
            V::F64(0.0),
            V::I32(-1),
            V::Bool(true),
            V::F32(2.5),
            V::C128(c64::new(2.0, 0.0)),
        ];
        for s in scalars {
            for op in [
                Bi::Gt,
                Bi::Ge,
                Bi::Lt,
                Bi::Le,
                Bi::Eq,
                Bi::Ne,
                Bi::And,
                Bi::Or,
                Bi::Xor,
            ] {
                let want = o::binary(op, Opnd::A(&x), Opnd::S(s));
                b.case(
                    format!("{op:?}({d}, {s:?})"),
                    want,
                    || op.apply(&xa, s),
                    Tol::EXACT,
                );
            }
        }
        let want = o::unary(Un::LogicalNot, &x);
        b.case(
            format!("logical_not({d})"),
            want,
            || xa.logical_not(),
            Tol::EXACT,
        );
    }
    assert_no_fails(dev, b.run());
}

device_test!(where_with_arrays_scalars_and_broadcasting);
fn where_with_arrays_scalars_and_broadcasting(dev: &Device) {
    let mut b = Batch::new();
    let c = OVal::from_vec(vec![true, false, false, true], &[4, 1]);
    let ci = OVal::from_vec(vec![0i32, 3, -1], &[1, 3]); // truthiness of a non-bool condition
    let (ca, cia) = (c.to_lf(dev), ci.to_lf(dev));
    for da in o::DTYPES {
        for db in o::DTYPES {
            let x = OVal::new(da, &[3], vals(da)[..3].to_vec());
            let y = OVal::new(db, &[4, 1], vals(db)[1..5].to_vec());
            let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
            let want = o::where_(&c, Opnd::A(&x), Opnd::A(&y));
            b.case(
                format!("where(c, {da}, {db})"),
                want,
                || lf::where_(&ca, &xa, &ya),
                Tol::EXACT,
            );
            let want = o::where_(&ci, Opnd::A(&y), Opnd::A(&x));
            b.case(
                format!("where(int c, {db}, {da})"),
                want,
                || lf::where_(&cia, &ya, &xa),
                Tol::EXACT,
            );
        }
        let x = OVal::new(da, &[3], vals(da)[..3].to_vec());
        let xa = x.to_lf(dev);
        for s in weak_scalars() {
            let want = o::where_(&c, Opnd::A(&x), Opnd::S(s));
            b.case(
                format!("where(c, {da}, {s:?})"),
                want,
                || lf::where_(&ca, &xa, s),
                Tol::EXACT,
            );
            let want = o::where_(&c, Opnd::S(s), Opnd::A(&x));
            b.case(
                format!("where(c, {s:?}, {da})"),
                want,
                || lf::where_(&ca, s, &xa),
                Tol::EXACT,
            );
        }
    }
    // both branches scalars: each takes its default dtype (int -> I64, float -> F64)
    let want = o::where_(&c, Opnd::S(V::I32(1)), Opnd::S(V::I32(2)));
    b.case(
        "where(c, 1i32, 2i32)".into(),
        want,
        || lf::where_(&ca, 1i32, 2i32),
        Tol::EXACT,
    );
    let want = o::where_(&c, Opnd::S(V::F32(1.5)), Opnd::S(V::Bool(true)));
    b.case(
        "where(c, 1.5f32, true)".into(),
        want,
        || lf::where_(&ca, 1.5f32, true),
        Tol::EXACT,
    );
    assert_no_fails(dev, b.run());
}

device_test!(astype_every_dtype_pair);
fn astype_every_dtype_pair(dev: &Device) {
    let mut b = Batch::new();
    for from in o::DTYPES {
        let mut v = vals(from);
        if from == DType::F32 {
            v.extend(
                [
                    1e10f32,
                    -2147483648.0,
                    2147483520.0,
                    -2.9,
                    2.9,
                    16777217.0,
                    9.3e18,
                ]
                .map(V::F32),
            );
        }
        if from == DType::F64 {
            v.extend(
                [
                    1e10,
                    2147483648.0,
                    -2147483649.0,
                    9.3e18,
                    -9.3e18,
                    16777217.0,
                    0.1f64,
                ]
                .map(V::F64),
            );
        }
        if from.is_complex() {
            v.push(V::C128(c64::new(f64::NAN, 1.0)).cast(from));
            v.push(V::C128(c64::new(0.0, -3.0)).cast(from)); // nonzero: true as bool
            v.push(V::C128(c64::new(-2.7, 1e300)).cast(from));
        }
        let n = v.len();
        let x = OVal::new(from, &[n], v);
        let xa = x.to_lf(dev);
        for to in o::DTYPES {
            b.case(
                format!("astype({from} -> {to})"),
                Some(x.astype(to)),
                || xa.astype(to),
                Tol::EXACT,
            );
        }
    }
    assert_no_fails(dev, b.run());
}

device_test!(complex_constructor_and_parts);
fn complex_constructor_and_parts(dev: &Device) {
    let mut b = Batch::new();
    for dr in [DType::Bool, DType::I32, DType::I64, DType::F32, DType::F64] {
        for di in [DType::I32, DType::F32, DType::F64] {
            let re = input(dr, &[usize::MAX, 1]);
            let im = OVal::new(di, &[1, 4], vals(di)[3..7].to_vec());
            let (rea, ima) = (re.to_lf(dev), im.to_lf(dev));
            let want = o::complex(&re, &im);
            b.case(
                format!("complex({dr}, {di})"),
                want.clone(),
                || lf::complex(&rea, &ima),
                Tol::EXACT,
            );
            let w = want.unwrap();
            for op in [Un::Real, Un::Imag, Un::Conj, Un::Abs, Un::Angle] {
                let want = o::unary(op, &w);
                b.case(
                    format!("{op:?}(complex({dr}, {di}))"),
                    want,
                    || op.apply(&lf::complex(&rea, &ima)),
                    Tol::ULPS,
                );
            }
        }
    }
    // complex inputs are refused
    let z = input(DType::C64, &[usize::MAX]);
    let za = z.to_lf(dev);
    b.case(
        "complex(c64, c64)".into(),
        None,
        || lf::complex(&za, &za),
        Tol::EXACT,
    );
    assert_no_fails(dev, b.run());
}

device_test!(clip_powf_powi_maximum_minimum);
fn clip_powf_powi_maximum_minimum(dev: &Device) {
    let mut b = Batch::new();
    for d in o::DTYPES {
        let x = input(d, &[usize::MAX]);
        let xa = x.to_lf(dev);
        let tol = tol_for(o::float_dtype(d));
        for (lo, hi) in [
            (V::F64(-1.0), V::F64(2.0)),
            (V::I32(0), V::I32(5)),
            (V::F64(f64::NAN), V::F64(1.0)),
            (V::F32(-0.5), V::F64(f64::NAN)),
        ] {
            let want = o::clip(&x, Opnd::S(lo), Opnd::S(hi));
            b.case(
                format!("clip({d}, {lo:?}, {hi:?})"),
                want,
                || xa.clip(lo, hi),
                Tol::EXACT,
            );
        }
        // array bounds with broadcasting
        let lo = OVal::from_vec(vec![-1.0f32], &[1]);
        let hv = vals(DType::F64);
        let hi = OVal::new(
            DType::F64,
            &[x.size()],
            (0..x.size()).map(|k| hv[(k * 7) % hv.len()]).collect(),
        );
        let (loa, hia) = (lo.to_lf(dev), hi.to_lf(dev));
        let want = o::clip(&x, Opnd::A(&lo), Opnd::A(&hi));
        b.case(
            format!("clip({d}, array, array)"),
            want,
            || xa.clip(&loa, &hia),
            Tol::EXACT,
        );
        for p in [0.0, 0.5, 2.0, -1.0, 3.0, f64::NAN] {
            let want = o::binary(Bi::Pow, Opnd::A(&x), Opnd::S(V::F64(p)));
            b.case(format!("powf({d}, {p})"), want, || xa.powf(p), tol);
        }
        for p in [0, 1, 2, 3, 5, 31, -1, -2] {
            let want = o::binary(Bi::Pow, Opnd::A(&x), Opnd::S(V::I32(p)));
            b.case(format!("powi({d}, {p})"), want, || xa.powi(p), tol);
        }
        for s in [V::F64(f64::NAN), V::F64(0.0), V::I32(2), V::F64(-0.0)] {
            for op in [Bi::Maximum, Bi::Minimum] {
                let want = o::binary(op, Opnd::A(&x), Opnd::S(s));
                b.case(
                    format!("{op:?}({d}, {s:?})"),
                    want,
                    || op.apply(&xa, s),
                    Tol::EXACT,
                );
            }
        }
    }
    assert_no_fails(dev, b.run());
}

device_test!(special_values_known_answers);
/// NumPy's own results for special cases (from the numpy_promotion.txt session and the
/// array API spec), written as literals rather than through the oracle.
fn special_values_known_answers(dev: &Device) {
    let f = |v: &[f64]| Array::from_slice_on(v, &[v.len()], dev).unwrap();
    let g = |a: Array| a.to_vec::<f64>().unwrap();
    let bits = |v: Vec<f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let same = |got: Vec<f64>, want: &[f64], what: &str| {
        assert_eq!(
            bits(got.clone()),
            bits(want.to_vec()),
            "{what}: got {got:?}, want {want:?}"
        );
    };
    let pi = std::f64::consts::PI;
    // signed zeros
    same(g(f(&[-0.0, 0.0]).sqrt()), &[-0.0, 0.0], "sqrt(-0), sqrt(0)");
    same(
        g(f(&[-0.0, -0.0]) + f(&[-0.0, 0.0])),
        &[-0.0, 0.0],
        "-0 + -0, -0 + 0",
    );
    same(
        g(f(&[1.0, -1.0, 1.0]) / f(&[-0.0, -0.0, 0.0])),
        &[f64::NEG_INFINITY, f64::INFINITY, f64::INFINITY],
        "x / ±0",
    );
    same(
        g(f(&[0.0, -0.0, 0.0, -0.0]).atan2(f(&[-0.0, -0.0, 0.0, 0.0]))),
        &[pi, -pi, 0.0, -0.0],
        "atan2 at the zeros",
    );
    same(
        g(f(&[-0.0, -0.5, 0.5, 2.5, 3.5, -2.5]).round()),
        &[-0.0, -0.0, 0.0, 2.0, 4.0, -2.0],
        "round half even",
    );
    same(
        g(f(&[-0.0, 0.0, f64::NAN]).sign())
            .into_iter()
            .take(2)
            .collect(),
        &[0.0, 0.0],
        "sign(±0)",
    );
    assert!(g(f(&[f64::NAN]).sign())[0].is_nan(), "sign(nan)");
    same(g(f(&[-0.5, -0.0]).ceil()), &[-0.0, -0.0], "ceil(-0.5)");
    same(g(f(&[-0.5]).trunc()), &[-0.0], "trunc(-0.5)");
    same(g(-f(&[0.0])), &[-0.0], "-(0)");
    // NaN propagation and absorption
    let m = g(f(&[f64::NAN, 1.0]).maximum(f(&[1.0, f64::NAN])));
    assert!(
        m[0].is_nan() && m[1].is_nan(),
        "maximum propagates NaN: {m:?}"
    );
    let m = g(f(&[f64::NAN, 1.0]).minimum(f(&[1.0, f64::NAN])));
    assert!(
        m[0].is_nan() && m[1].is_nan(),
        "minimum propagates NaN: {m:?}"
    );
    let c = g(f(&[0.5, 3.0]).clip(f64::NAN, 1.0));
    assert!(c.iter().all(|x| x.is_nan()), "clip with a NaN bound: {c:?}");
    same(
        g(f(&[1.0, f64::NAN]).pow(f(&[f64::NAN, 0.0]))),
        &[1.0, 1.0],
        "pow(1, nan), pow(nan, 0)",
    );
    same(
        g(f(&[f64::INFINITY, f64::NEG_INFINITY]).hypot(f(&[f64::NAN, f64::NAN]))),
        &[f64::INFINITY; 2],
        "hypot(±inf, nan)",
    );
    assert!(
        !f(&[f64::NAN]).eq(f(&[f64::NAN])).item::<bool>().unwrap(),
        "nan == nan"
    );
    assert!(
        f(&[f64::NAN]).ne(f64::NAN).item::<bool>().unwrap(),
        "nan != nan"
    );
    // infinities
    same(g(f(&[f64::NEG_INFINITY]).exp()), &[0.0], "exp(-inf)");
    same(g(f(&[f64::NEG_INFINITY]).expm1()), &[-1.0], "expm1(-inf)");
    same(g(f(&[0.0]).log()), &[f64::NEG_INFINITY], "log(0)");
    same(g(f(&[-1.0]).log1p()), &[f64::NEG_INFINITY], "log1p(-1)");
    assert!(g(f(&[-1.0]).log())[0].is_nan(), "log(-1)");
    assert!(
        g(f(&[f64::INFINITY]) - f64::INFINITY)[0].is_nan(),
        "inf - inf"
    );
    assert!(g(f(&[0.0]) * f64::INFINITY)[0].is_nan(), "0 * inf");
    same(
        g(f(&[-0.0]).powf(-3.0)),
        &[f64::NEG_INFINITY],
        "pow(-0, -3)",
    );
    same(
        g(f(&[f64::NEG_INFINITY, f64::NEG_INFINITY]).pow(f(&[3.0, 2.0]))),
        &[f64::NEG_INFINITY, f64::INFINITY],
        "pow(-inf, odd/even)",
    );
    assert!(
        g(f(&[-8.0]).powf(1.0 / 3.0))[0].is_nan(),
        "pow(x<0, non-integer)"
    );
    let a = g(
        f(&[f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY]).atan2(f(&[
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
        ])),
    );
    let w = [pi / 4.0, 3.0 * pi / 4.0, -pi / 4.0];
    assert!(
        a.iter().zip(w).all(|(x, y)| (x - y).abs() < 1e-15),
        "atan2 at infinities: {a:?}"
    );
    // float floor division and remainder (Python semantics)
    same(
        g(f(&[-7.0, 7.0, -7.0, 1.0]) % f(&[3.0, -3.0, -3.0, 0.1])),
        &[2.0, -2.0, -1.0, 0.09999999999999995],
        "float %",
    );
    same(
        g(f(&[-7.0, 7.0, 1.0, 5.0, -5.0]).floor_div(f(&[
            2.0,
            -2.0,
            0.1,
            f64::INFINITY,
            f64::INFINITY,
        ]))),
        &[-4.0, -4.0, 9.0, 0.0, -1.0],
        "float //",
    );
    same(
        g(f(&[1.0, -1.0]).floor_div(0.0)),
        &[f64::INFINITY, f64::NEG_INFINITY],
        "x // 0.0",
    );
    assert!(g(f(&[1.0]) % 0.0)[0].is_nan(), "x % 0.0");
    // integer semantics
    let i = |v: &[i32]| Array::from_slice_on(v, &[v.len()], dev).unwrap();
    let gi = |a: Array| a.to_vec::<i32>().unwrap();
    assert_eq!(
        gi(i(&[-7, -7, 7, 7]).floor_div(i(&[2, -2, 2, -2]))),
        [-4, 3, 3, -4],
        "int //"
    );
    assert_eq!(
        gi(i(&[-7, -7, 7, 7]) % i(&[2, -2, 2, -2])),
        [1, -1, 1, -1],
        "int %"
    );
    assert_eq!(gi(i(&[1, -5, 0]).floor_div(0i32)), [0, 0, 0], "int // 0");
    assert_eq!(gi(i(&[1, -5]) % 0i32), [0, 0], "int % 0");
    assert_eq!(gi(i(&[i32::MIN]).floor_div(-1i32)), [i32::MIN], "MIN // -1");
    assert_eq!(gi(i(&[i32::MAX]) + 1i32), [i32::MIN], "MAX + 1 wraps");
    assert_eq!(gi(i(&[i32::MIN]).abs()), [i32::MIN], "abs(MIN)");
    assert_eq!(gi(-i(&[i32::MIN])), [i32::MIN], "-MIN");
    assert_eq!(
        gi(i(&[46341]).square()),
        [46341i32.wrapping_mul(46341)],
        "square wraps"
    );
    assert_eq!(gi(i(&[2]).powi(31)), [i32::MIN], "2**31 wraps");
    // float -> int casts of NaN/inf/out of range
    let c = f(&[f64::NAN, f64::INFINITY, 1e10, -2.7])
        .astype(DType::I32)
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(
        c,
        [i32::MIN, i32::MIN, i32::MIN, -2],
        "float -> int32 casts"
    );
    // true division of integers
    let q = (i(&[7, -7, 1]) / i(&[2, 2, 0])).to_vec::<f64>().unwrap();
    assert_eq!(q, [3.5, -3.5, f64::INFINITY], "int / int");
}

device_test!(signed_zeros_against_the_oracle);
fn signed_zeros_against_the_oracle(dev: &Device) {
    let mut b = Batch::new();
    for d in [DType::F32, DType::F64] {
        let z = OVal::new(
            d,
            &[4, 1],
            [0.0, -0.0, 1.0, -1.0]
                .iter()
                .map(|&x| V::F64(x).cast(d))
                .collect(),
        );
        let w = OVal::new(
            d,
            &[1, 4],
            [0.0, -0.0, 2.0, -3.0]
                .iter()
                .map(|&x| V::F64(x).cast(d))
                .collect(),
        );
        let (za, wa) = (z.to_lf(dev), w.to_lf(dev));
        let tol = Tol::ULPS.signed_zero();
        for op in [
            Bi::Add,
            Bi::Sub,
            Bi::Mul,
            Bi::Div,
            Bi::Atan2,
            Bi::FloorDiv,
            Bi::Rem,
        ] {
            let want = o::binary(op, Opnd::A(&z), Opnd::A(&w));
            b.case(
                format!("{op:?}({d}) signed zeros"),
                want,
                || op.apply(&za, &wa),
                tol,
            );
        }
        for op in [
            Un::Neg,
            Un::Sqrt,
            Un::Round,
            Un::Trunc,
            Un::Ceil,
            Un::Floor,
            Un::Sin,
            Un::Tan,
            Un::Abs,
            Un::Square,
        ] {
            let want = o::unary(op, &w);
            b.case(
                format!("{op:?}({d}) signed zeros"),
                want,
                || op.apply(&wa),
                tol,
            );
        }
    }
    assert_no_fails(dev, b.run());
}

device_test!(rejected_dtypes_panic_at_graph_building);
#[allow(clippy::eq_op)] // an array with itself is the case under test
fn rejected_dtypes_panic_at_graph_building(dev: &Device) {
    let b = Array::from_slice_on(&[true, false], &[2], dev).unwrap();
    let i = Array::from_slice_on(&[1i32, 2], &[2], dev).unwrap();
    let z = Array::from_slice_on(&[c64::new(1.0, 1.0); 2], &[2], dev).unwrap();
    assert!(try_build(|| -&b).is_err(), "-bool");
    assert!(try_build(|| !&i).is_err(), "!int");
    assert!(try_build(|| &b - &b).is_err(), "bool - bool");
    assert!(try_build(|| b.sign()).is_err(), "sign(bool)");
    assert!(try_build(|| z.floor()).is_err(), "floor(complex)");
    assert!(try_build(|| z.floor_div(&z)).is_err(), "complex // complex");
    assert!(try_build(|| &z % 2.0).is_err(), "complex % float");
    assert!(
        try_build(|| lf::complex(&z, &z)).is_err(),
        "complex(complex, complex)"
    );
    let a3 = Array::zeros_on(&[3], DType::F32, dev);
    let a4 = Array::zeros_on(&[4], DType::F32, dev);
    assert!(try_build(|| &a3 + &a4).is_err(), "[3] + [4]");
    let a = Array::zeros_on(&[15, 3, 5], DType::F32, dev);
    let c = Array::zeros_on(&[15, 3], DType::F32, dev);
    assert!(try_build(|| &a * &c).is_err(), "[15,3,5] * [15,3]");
    assert!(
        try_build(|| lf::where_(&a4.gt(0.0), &a3, 1.0)).is_err(),
        "where [4] [3]"
    );
}

device_test!(broadcasting_including_0d_and_0_size);
fn broadcasting_including_0d_and_0_size(dev: &Device) {
    let shapes: [&[usize]; 12] = [
        &[],
        &[0],
        &[1],
        &[4],
        &[3, 0],
        &[1, 4],
        &[3, 1],
        &[3, 4],
        &[2, 1, 4],
        &[2, 3, 4],
        &[0, 4],
        &[1, 0],
    ];
    let mut b = Batch::new();
    let mut seed = 1u64;
    for sa in shapes {
        for sb in shapes {
            let x = rand_f64(sa, &mut seed);
            let y = rand_f64(sb, &mut seed).astype(DType::F32);
            let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
            // a small fused expression over both operands
            let want = o::broadcast_shape(sa, sb).map(|_| {
                let s = o::binary(Bi::Mul, Opnd::A(&x), Opnd::A(&y)).unwrap();
                let t = o::binary(Bi::Sub, Opnd::A(&s), Opnd::A(&x)).unwrap();
                let m = o::binary(Bi::Gt, Opnd::A(&x), Opnd::A(&y)).unwrap();
                o::where_(&m, Opnd::A(&t), Opnd::S(V::F64(-1.0))).unwrap()
            });
            b.case(
                format!("broadcast {sa:?} with {sb:?}"),
                want,
                || lf::where_(&xa.gt(&ya), &(&xa * &ya) - &xa, -1.0),
                Tol::DEFAULT.atol(1e-6, 1e-12),
            );
        }
    }
    assert_no_fails(dev, b.run());
}

/// A small deterministic generator (xorshift) for test inputs.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn rand_f64(shape: &[usize], seed: &mut u64) -> OVal {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| V::F64((next(seed) % 2001) as f64 / 1000.0 * 3.0 - 3.0))
        .collect();
    OVal::new(DType::F64, shape, v)
}

device_test!(chained_expression_at_awkward_sizes);
fn chained_expression_at_awkward_sizes(dev: &Device) {
    let mut seed = 7u64;
    for n in [0usize, 1, 3, 783, (1 << 20) + 1] {
        let x = rand_f64(&[n], &mut seed).astype(DType::F32);
        let y = rand_f64(&[n], &mut seed).astype(DType::F32);
        let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
        // ((x * 2 - y).sin() * exp(y) + x / (|y| + 1)).maximum(y) - 0.5, in F32
        let got = ((&xa * 2.0 - &ya).sin() * ya.exp() + &xa / (ya.abs() + 1.0)).maximum(&ya) - 0.5;
        let b = |op, p: &OVal, q: Opnd| o::binary(op, Opnd::A(p), q).unwrap();
        let t = b(Bi::Mul, &x, Opnd::S(V::F64(2.0)));
        let t = b(Bi::Sub, &t, Opnd::A(&y));
        let t = o::unary(Un::Sin, &t).unwrap();
        let e = o::unary(Un::Exp, &y).unwrap();
        let t = b(Bi::Mul, &t, Opnd::A(&e));
        let a = o::unary(Un::Abs, &y).unwrap();
        let a = b(Bi::Add, &a, Opnd::S(V::F64(1.0)));
        let q = b(Bi::Div, &x, Opnd::A(&a));
        let t = b(Bi::Add, &t, Opnd::A(&q));
        let t = b(Bi::Maximum, &t, Opnd::A(&y));
        let want = b(Bi::Sub, &t, Opnd::S(V::F64(0.5)));
        o::assert_close(
            &got,
            &want,
            Tol::DEFAULT.atol(1e-5, 1e-12),
            &format!("chain at n={n}"),
        );

        // an integer chain with wraparound at the same sizes
        let xi = x.astype(DType::I32);
        let xia = xi.to_lf(dev);
        let got = (&xia * 1_000_000_007i32 + i32::MAX).floor_div(3i32) % 1000i32;
        let t = b(Bi::Mul, &xi, Opnd::S(V::I32(1_000_000_007)));
        let t = b(Bi::Add, &t, Opnd::S(V::I32(i32::MAX)));
        let t = b(Bi::FloorDiv, &t, Opnd::S(V::I32(3)));
        let want = b(Bi::Rem, &t, Opnd::S(V::I32(1000)));
        o::assert_close(&got, &want, Tol::EXACT, &format!("int chain at n={n}"));
    }
}

device_test!(same_values_through_every_device_path);
fn same_values_through_every_device_path(dev: &Device) {
    // a scalar array (0-d) with a weak scalar and a 0-d result readback
    let s = Array::scalar_on(2.5f32, dev);
    let r = (&s * 2.0 + 1i32).sqrt();
    assert_eq!(r.shape(), &[] as &[usize]);
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.item::<f32>().unwrap(), 6.0f32.sqrt());
    let n = Array::scalar_on(NAN32, dev).maximum(INF32);
    assert!(n.item::<f32>().unwrap().is_nan());
}

device_test!(one_plan_for_many_outputs);
fn one_plan_for_many_outputs(dev: &Device) {
    // lf::eval of many independent results must split into kernels by itself
    let x = input(DType::F64, &[usize::MAX]);
    let y = input(DType::F32, &[1, usize::MAX]).reshape(&[-1, 1]);
    let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
    let mut outs = vec![];
    let mut wants = vec![];
    for k in 0..300 {
        let s = k as f64 * 0.25 - 3.0;
        outs.push((&xa * s).maximum(&ya) + k);
        let t = o::binary(Bi::Mul, Opnd::A(&x), Opnd::S(V::F64(s))).unwrap();
        let t = o::binary(Bi::Maximum, Opnd::A(&t), Opnd::A(&y)).unwrap();
        wants.push(o::binary(Bi::Add, Opnd::A(&t), Opnd::S(V::I32(k))).unwrap());
    }
    // evaluated on a helper thread so that a planner that never returns fails the test
    // instead of hanging the suite
    let (tx, rx) = std::sync::mpsc::channel();
    let handles = outs.clone();
    std::thread::spawn(move || {
        let refs: Vec<&Array> = handles.iter().collect();
        let _ = tx.send(lf::eval(&refs).map_err(|e| e.to_string()));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(r) => r.unwrap_or_else(|e| panic!("lf::eval of 300 outputs: {e}")),
        Err(_) => panic!("lf::eval of 300 outputs did not return within 20 s"),
    }
    for (k, (g, w)) in outs.iter().zip(&wants).enumerate() {
        o::assert_close(g, w, Tol::EXACT, &format!("output {k}"));
    }
}

device_test!(complex_special_values_known_answers);
/// NumPy's results for complex functions on their branch cuts and at overflow (C99
/// annex G, which NumPy's npymath follows), as literals.
fn complex_special_values_known_answers(dev: &Device) {
    let pi = std::f64::consts::PI;
    let h = pi / 2.0;
    let k = 1.3169578969248166; // acosh(2)
    let z = |re: f64, im: f64| c64::new(re, im);
    let arr = |v: &[c64]| Array::from_slice_on(v, &[v.len()], dev).unwrap();
    let cases: Vec<(&str, Array, Vec<c64>)> = vec![
        (
            "asin on the cut",
            arr(&[z(2.0, 0.0), z(2.0, -0.0), z(-2.0, 0.0)]).asin(),
            vec![z(h, k), z(h, -k), z(-h, k)],
        ),
        (
            "acos on the cut",
            arr(&[z(2.0, 0.0), z(2.0, -0.0)]).acos(),
            vec![z(0.0, -k), z(0.0, k)],
        ),
        (
            "log on the cut",
            arr(&[z(-1.0, 0.0), z(-1.0, -0.0)]).log(),
            vec![z(0.0, pi), z(0.0, -pi)],
        ),
        (
            "sqrt on the cut",
            arr(&[z(-4.0, 0.0), z(-4.0, -0.0)]).sqrt(),
            vec![z(0.0, 2.0), z(0.0, -2.0)],
        ),
        (
            "exp overflow on the real axis",
            arr(&[z(1000.0, 0.0), z(-1000.0, 0.0)]).exp(),
            vec![z(f64::INFINITY, 0.0), z(0.0, 0.0)],
        ),
        (
            "pow overflow on the real axis",
            arr(&[z(2.0, 0.0)]).pow(arr(&[z(2000.5, 0.0)])),
            vec![z(f64::INFINITY, 0.0)],
        ),
    ];
    let mut fails = vec![];
    for (what, got, want) in cases {
        let g = got.to_vec::<c64>().unwrap();
        let close = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-14 * b.abs().max(1.0);
        if !g
            .iter()
            .zip(&want)
            .all(|(a, b)| close(a.re, b.re) && close(a.im, b.im))
        {
            fails.push(format!("{what}: got {g:?}, want {want:?}"));
        }
    }
    let e = Array::from_slice_on(&[c32::new(100.0, 0.0)], &[1], dev)
        .unwrap()
        .exp();
    let g = e.to_vec::<c32>().unwrap();
    if !(g[0].re == f32::INFINITY && g[0].im == 0.0) {
        fails.push(format!("exp(100+0j) in complex64: got {g:?}, want inf+0j"));
    }
    assert_no_fails(dev, fails);
}
