//! Property tests: random expression DAGs (random ops, dtypes, shapes, views, scalars and
//! shared subexpressions) evaluated by lazyfuse -- fused, several roots in one
//! `lf::eval`, and with fusion off -- against the naive oracle.
//!
//! A program is a pool of random leaf arrays plus a list of instructions; every
//! instruction reads earlier values by index, so values are reused (shared
//! subexpressions) and the result is a DAG. The oracle runs the same program three times:
//! plainly and twice with every not-correctly-rounded result nudged by +-2 ulp. Where the
//! nudged runs disagree with the plain one the element is ill-conditioned and gets that
//! much slack (or any value, when a NaN, an infinity, a bool or an integer flips).
//!
//! Reductions (random op, random subset of axes, negative or not, keepdims) appear inside
//! programs, at their end, and followed by elementwise work that broadcasts their
//! keepdims result back (`x - x.mean_axes(axes, true)`). Their oracle is a naive loop per
//! output; the twins are moved by the error bound of a pairwise/tree-order sum
//! (`eps * log2(n) * sum|x|` and the like, see `oracle::reduce`), which becomes the slack.

#[macro_use]
mod common;

use common::oracle::{self as o, Bi, OVal, Opnd, Red, Tol, Un, View, V};
use lazyfuse as lf;
use lf::{c32, c64, Array, DType, Device};
use ndarray::SliceInfoElem;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::sync::Mutex;

/// `lf::set_fusion` is process-global: every test here holds this while it evaluates.
static FUSION: Mutex<()> = Mutex::new(());

const SHAPES: [&[usize]; 12] = [
    &[],
    &[1],
    &[4],
    &[3, 1],
    &[1, 4],
    &[3, 4],
    &[2, 3, 4],
    &[2, 1, 4],
    &[0],
    &[0, 4],
    &[5, 1],
    &[2, 3, 1],
];

const WEAK: [V; 10] = [
    V::Bool(true),
    V::I32(2),
    V::I32(-3),
    V::I64(5),
    V::F32(0.5),
    V::F64(-1.25),
    V::F64(3.0),
    V::F64(0.0),
    V::C64(c32::new(0.5, -1.0)),
    V::C128(c64::new(0.0, 1.0)),
];

const PAD_VALUES: [f64; 4] = [0.0, 1.5, -2.0, f64::NAN];

/// The dtypes the DAGs draw from (those the oracle models).
const DTYPES: [DType; 7] = [
    DType::Bool,
    DType::I32,
    DType::I64,
    DType::F32,
    DType::F64,
    DType::C64,
    DType::C128,
];

#[derive(Clone, Debug)]
struct Leaf {
    dtype: usize,
    shape: usize,
    seed: u64,
}

/// A view to build against whatever shape the source has at build time.
#[derive(Clone, Debug)]
enum ViewGen {
    Reshape(u8),
    Transpose,
    Permute(u64),
    /// Per axis: (start, end, step, kind) with kind 0..5 a range, 6 an index, 7 NewAxis.
    Slice(Vec<(i8, i8, i8, u8)>),
    Pad(u8, u8, u8),
    Roll(i8, u8),
    Flip(u8),
    Broadcast(u8),
    ExpandSqueeze(u8),
}

#[derive(Clone, Debug)]
enum Instr {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    /// op, source, scalar, scalar on the left
    ScalarBinary(usize, usize, usize, bool),
    Where(usize, usize, usize),
    WhereScalar(usize, usize, usize),
    Cast(usize, usize),
    View(ViewGen, usize),
    Concat(usize, usize, u8, bool),
    Stack(usize, usize, u8),
    /// op (index into `Red::ALL`), source, axes seed, keepdims
    Reduce(usize, usize, u64, bool),
    /// `x - reduce(x, axes, keepdims=true)` (or `/` for sums): op index into `RECENTER`,
    /// source, axes seed
    Recenter(usize, usize, u64),
}

/// Reductions followed by a broadcasting binary op in `Instr::Recenter`.
const RECENTER: [(Red, Bi); 4] = [
    (Red::Mean, Bi::Sub),
    (Red::Max, Bi::Sub),
    (Red::Min, Bi::Sub),
    (Red::Sum, Bi::Div),
];

#[derive(Clone, Debug)]
struct Program {
    leaves: Vec<Leaf>,
    instrs: Vec<Instr>,
    /// A reduction appended after `instrs` (the program then ends in it).
    tail: Option<Instr>,
    roots: usize,
}

fn view_gen() -> impl Strategy<Value = ViewGen> {
    prop_oneof![
        any::<u8>().prop_map(ViewGen::Reshape),
        Just(ViewGen::Transpose),
        any::<u64>().prop_map(ViewGen::Permute),
        proptest::collection::vec((-6i8..7, -6i8..8, -3i8..4, 0u8..8), 1..4)
            .prop_map(ViewGen::Slice),
        (0u8..3, 0u8..3, any::<u8>()).prop_map(|(a, b, c)| ViewGen::Pad(a, b, c)),
        (-7i8..8, any::<u8>()).prop_map(|(s, a)| ViewGen::Roll(s, a)),
        any::<u8>().prop_map(ViewGen::Flip),
        any::<u8>().prop_map(ViewGen::Broadcast),
        any::<u8>().prop_map(ViewGen::ExpandSqueeze),
    ]
}

fn instr() -> impl Strategy<Value = Instr> {
    let src = 0usize..6;
    prop_oneof![
        3 => (0..Un::ALL.len(), src.clone()).prop_map(|(op, a)| Instr::Unary(op, a)),
        4 => (0..Bi::ALL.len(), src.clone(), src.clone()).prop_map(|(op, a, b)| Instr::Binary(op, a, b)),
        2 => (0..Bi::ALL.len(), src.clone(), 0..WEAK.len(), any::<bool>())
            .prop_map(|(op, a, s, l)| Instr::ScalarBinary(op, a, s, l)),
        1 => (src.clone(), src.clone(), src.clone()).prop_map(|(c, a, b)| Instr::Where(c, a, b)),
        1 => (src.clone(), src.clone(), 0..WEAK.len()).prop_map(|(c, a, s)| Instr::WhereScalar(c, a, s)),
        1 => (0..7usize, src.clone()).prop_map(|(d, a)| Instr::Cast(d, a)),
        4 => (view_gen(), src.clone()).prop_map(|(v, a)| Instr::View(v, a)),
        1 => (src.clone(), src.clone(), any::<u8>(), any::<bool>()).prop_map(|(a, b, ax, e)| Instr::Concat(a, b, ax, e)),
        1 => (src.clone(), src.clone(), any::<u8>()).prop_map(|(a, b, ax)| Instr::Stack(a, b, ax)),
        2 => reduce_instr(),
        1 => (0..RECENTER.len(), src.clone(), any::<u64>()).prop_map(|(op, a, s)| Instr::Recenter(op, a, s)),
    ]
}

fn reduce_instr() -> impl Strategy<Value = Instr> {
    (0..Red::ALL.len(), 0usize..6, any::<u64>(), any::<bool>())
        .prop_map(|(op, a, s, k)| Instr::Reduce(op, a, s, k))
}

fn program() -> impl Strategy<Value = Program> {
    let leaf = (0..7usize, 0..SHAPES.len(), any::<u64>()).prop_map(|(dtype, shape, seed)| Leaf {
        dtype,
        shape,
        seed,
    });
    (
        proptest::collection::vec(leaf, 1..4),
        proptest::collection::vec(instr(), 1..12),
        proptest::option::weighted(0.3, reduce_instr()),
        1usize..4,
    )
        .prop_map(|(leaves, instrs, tail, roots)| Program {
            leaves,
            instrs,
            tail,
            roots,
        })
}

/// The default configuration: `PROPTEST_CASES` (else 256) cases, no regression files, a
/// fixed seed (`PROPTEST_RNG_SEED` picks another) so that every run checks the same DAGs.
fn config() -> ProptestConfig {
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1a2f);
    ProptestConfig {
        failure_persistence: None,
        max_shrink_iters: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    }
}

fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn leaf_value(leaf: &Leaf) -> OVal {
    let d = DTYPES[leaf.dtype];
    let shape = SHAPES[leaf.shape];
    let n: usize = shape.iter().product();
    let mut s = leaf.seed | 1;
    let v = (0..n)
        .map(|_| {
            let r = next(&mut s);
            let special = r.is_multiple_of(13);
            let k = (r >> 8) as usize;
            match d {
                DType::Bool => V::Bool(r & 256 == 0),
                DType::I32 => V::I32(if special {
                    [i32::MAX, i32::MIN, 0, 46341][k % 4]
                } else {
                    (k % 21) as i32 - 10
                }),
                DType::I64 => V::I64(if special {
                    [i64::MAX, i64::MIN, 1 << 40, 3_037_000_500][k % 4]
                } else {
                    (k % 21) as i64 - 10
                }),
                DType::F32 | DType::F64 => {
                    let x = if special {
                        [
                            0.0,
                            -0.0,
                            f64::NAN,
                            f64::INFINITY,
                            f64::NEG_INFINITY,
                            0.5,
                            2.5,
                            -1.5,
                        ][k % 8]
                    } else {
                        (k % 8001) as f64 / 1000.0 - 4.0
                    };
                    V::F64(x).cast(d)
                }
                _ => {
                    let re = (k % 8001) as f64 / 1000.0 - 4.0;
                    let im = ((k / 8001) % 8001) as f64 / 1000.0 - 4.0;
                    V::C128(c64::new(re, im)).cast(d)
                }
            }
        })
        .collect();
    OVal::new(d, shape, v)
}

/// The lowest precision in which any value on the path to a value was computed by an op
/// whose result lazyfuse and the oracle may round differently (a nudged op, a float
/// reduction, or a cast to 32 bits of such a result). A float64 value carried over from a
/// float32 (or complex64) one that differs by an ulp between the two is only as precise as
/// that float32 value, so it is compared with the 32-bit tolerance. Ordered: the larger,
/// the lower the precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    /// Bit for bit the oracle's value so far (exact or correctly rounded ops only).
    Exact,
    /// Last-bit differences at float64 precision.
    F64,
    /// Last-bit differences at float32 precision.
    F32,
}

impl Floor {
    /// The floor an inexactly computed result of dtype `d` sets.
    fn of(d: DType) -> Floor {
        match d {
            DType::F32 | DType::C64 => Floor::F32,
            DType::F64 | DType::C128 => Floor::F64,
            _ => Floor::Exact,
        }
    }
}

/// One value of the program: the lazyfuse array, the oracle's value, two nudged twins, a
/// taint mask (elements that depend on a non-finite complex value, where C99's special
/// cases leave implementations free, or on a value the oracle cannot tell from zero where
/// the op jumps at zero, see [`maybe_zero`]) and its precision floor.
#[derive(Clone)]
struct Val {
    a: Array,
    w: OVal,
    t1: OVal,
    t2: OVal,
    taint: OVal,
    floor: Floor,
}

struct Builder {
    vals: Vec<Val>,
    log: Vec<String>,
}

/// The largest value the builder makes (keeps cases fast).
const MAX_SIZE: usize = 4096;

/// The reduced axes a seed means for rank `nd`: `None` (all elements, through `sum()` and
/// the like) or a subset of the axes, each given as `k` or `k - nd`, in a rotated order.
fn seed_axes(seed: u64, nd: usize) -> Option<Vec<isize>> {
    if seed.is_multiple_of(5) {
        return None;
    }
    let mut axes: Vec<isize> = (0..nd)
        .filter(|k| (seed >> (3 + k)) & 1 == 1)
        .map(|k| {
            if (seed >> (20 + k)) & 1 == 1 {
                k as isize - nd as isize
            } else {
                k as isize
            }
        })
        .collect();
    if !axes.is_empty() {
        let r = (seed >> 40) as usize % axes.len();
        axes.rotate_left(r);
    }
    Some(axes)
}

/// The one axis of argmax/argmin a seed means for rank `nd` (`nd > 0`).
fn seed_axis(seed: u64, nd: usize) -> isize {
    let k = ((seed >> 3) % nd as u64) as isize;
    if (seed >> 20) & 1 == 1 {
        k - nd as isize
    } else {
        k
    }
}

fn finite_mask(x: &OVal) -> OVal {
    x.map(DType::Bool, |v| V::Bool(!v.is_nan() && !v.is_inf()))
}

fn or(a: &OVal, b: &OVal) -> OVal {
    o::binary(Bi::Or, Opnd::A(a), Opnd::A(b)).expect("taint or")
}

/// Twins move all elements of a value by the same relative amount, so they do not see the
/// last-bit errors of two elements of one value cancel in a difference (`x - x.max()`, `x -
/// flip(x)`: float32 `atan2` one ulp off at 2.6 leaves `x - x.max() = -0.0237` 1e-5 off
/// relative) nor in the parts of a complex product. There the result is known only to
/// within the operands' rounding, `2 eps (|a| + |b|)` for `+` and `-` (`2 eps (2|a| +
/// |b|)` for `%`, a difference `a - k b`), `2 eps |a| |b|`
/// and `2 eps |a| / |b|` for complex `*` and `/`, with `eps` that of the operands'
/// precision floor; the twins are moved by that much (`None`: exact operands or another
/// op).
fn operand_bound(op: Bi, x: &Val, y: &Val, shape: &[usize]) -> Option<ndarray::ArrayD<f64>> {
    let eps = match x.floor.max(y.floor) {
        Floor::Exact => return None,
        Floor::F64 => f64::EPSILON,
        Floor::F32 => f32::EPSILON as f64,
    };
    let complex = x.w.dtype.is_complex() || y.w.dtype.is_complex();
    let combine: fn(f64, f64) -> f64 = match op {
        Bi::Add | Bi::Sub => |a, b| a + b,
        // `a % b = a - k b` with `|k b| <= |a| + |b|`
        Bi::Rem => |a, b| 2.0 * a + b,
        Bi::Mul if complex => |a, b| a * b,
        Bi::Div if complex => |a, b| a / b,
        _ => return None,
    };
    let mag = |p: &OVal| {
        o::broadcast(p, shape).a.mapv(|v| {
            let (re, im) = v.parts();
            re.hypot(im)
        })
    };
    let (a, b) = (mag(&x.w), mag(&y.w));
    Some(
        ndarray::Zip::from(&a)
            .and(&b)
            .map_collect(|&a, &b| 2.0 * eps * combine(a, b)),
    )
}

/// Elements of `x` the oracle cannot tell from zero: a twin lies at least a quarter of
/// the oracle's magnitude away from it (or at all away from an oracle zero). lazyfuse may
/// compute an exact 0 there where the oracle has rounding noise, or the other way round
/// (`(x - x.mean()).sum()`; the mean of int64 values near `i64::MAX` converted to float64
/// first, as NumPy does, against an exact one), so a result that jumps at zero (a
/// quotient by it, its truth value, its log) can be anything there.
fn maybe_zero(x: &Val) -> OVal {
    let mut m = x.w.map(DType::Bool, |_| V::Bool(false));
    ndarray::Zip::from(&mut m.a)
        .and(&x.w.a)
        .and(&x.t1.a)
        .and(&x.t2.a)
        .for_each(|m, &w, &t1, &t2| {
            let (wr, wi) = w.parts();
            let mw = wr.hypot(wi);
            let unsure = |t: V| {
                let (tr, ti) = t.parts();
                let d = (tr - wr).hypot(ti - wi);
                !d.is_finite() || (d > 0.0 && 4.0 * d >= mw)
            };
            *m = V::Bool(mw.is_finite() && (unsure(t1) || unsure(t2)));
        });
    m
}

/// `x` with every float element moved by `sign * bound` (both parts of a complex one).
fn shift(x: &OVal, bound: &ndarray::ArrayD<f64>, sign: f64) -> OVal {
    let mut y = x.clone();
    ndarray::Zip::from(&mut y.a).and(bound).for_each(|v, &b| {
        let d = sign * b;
        *v = match *v {
            V::F32(a) => V::F32((a as f64 + d) as f32),
            V::F64(a) => V::F64(a + d),
            V::C64(z) => V::C64(c32::new((z.re as f64 + d) as f32, (z.im as f64 + d) as f32)),
            V::C128(z) => V::C128(c64::new(z.re + d, z.im + d)),
            other => other,
        };
    });
    y
}

impl Builder {
    fn new(p: &Program, dev: &Device) -> Builder {
        let mut b = Builder {
            vals: vec![],
            log: vec![],
        };
        for l in &p.leaves {
            let w = leaf_value(l);
            let taint = OVal::full(w.shape(), V::Bool(false));
            b.log.push(format!(
                "v{} = leaf {} {:?}",
                b.vals.len(),
                w.dtype,
                w.shape()
            ));
            b.vals.push(Val {
                a: w.to_lf(dev),
                t1: w.clone(),
                t2: w.clone(),
                w,
                taint,
                floor: Floor::Exact,
            });
        }
        b
    }

    /// Recent values first: `k` counts back from the newest.
    fn pick(&self, k: usize) -> Val {
        self.vals[self.vals.len() - 1 - k % self.vals.len()].clone()
    }

    /// The direction in which the first twin of the next value is nudged (alternating).
    fn sign(&self) -> f64 {
        if self.vals.len().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        }
    }

    fn push(&mut self, what: String, mut v: Val, nudge: bool) {
        assert_eq!(v.a.shape(), v.w.shape(), "shape of {what}");
        if nudge {
            v.floor = v.floor.max(Floor::of(v.w.dtype));
            let s = self.sign();
            v.t1 = o::jitter(&v.t1, s);
            v.t2 = o::jitter(&v.t2, -s);
        }
        if v.w.dtype.is_complex() {
            let bad = finite_mask(&v.w).map(DType::Bool, |b| V::Bool(!b.as_bool()));
            v.taint = or(&v.taint, &bad);
        }
        self.log.push(format!(
            "v{} = {what} -> {} {:?}",
            self.vals.len(),
            v.w.dtype,
            v.w.shape()
        ));
        self.vals.push(v);
    }

    fn view(&self, x: &Val, v: &View) -> Val {
        Val {
            a: v.apply(&x.a),
            w: v.oracle(&x.w),
            t1: v.oracle(&x.t1),
            t2: v.oracle(&x.t2),
            taint: v.oracle(&x.taint),
            floor: x.floor,
        }
    }

    fn cast(&self, x: &Val, d: DType) -> Val {
        // rounding a value that may differ in its last float64 bits to 32 bits may give
        // values an f32 ulp apart
        let floor = if x.floor > Floor::Exact {
            x.floor.max(Floor::of(d))
        } else {
            x.floor
        };
        Val {
            a: x.a.astype(d),
            w: x.w.astype(d),
            t1: x.t1.astype(d),
            t2: x.t2.astype(d),
            // a truth value of a value the oracle cannot tell from zero
            taint: if d == DType::Bool {
                or(&x.taint, &maybe_zero(x))
            } else {
                x.taint.clone()
            },
            floor,
        }
    }

    /// `y`, or a one-element view of it when it does not broadcast with `shape`.
    fn fit(&self, y: &Val, shape: &[usize]) -> Val {
        if o::broadcast_shape(shape, y.w.shape()).is_some() {
            return y.clone();
        }
        let flat = self.view(y, &View::Reshape(vec![-1]));
        if y.w.size() > 0 {
            self.view(
                &flat,
                &View::Slice(vec![SliceInfoElem::Slice {
                    start: 0,
                    end: Some(1),
                    step: 1,
                }]),
            )
        } else {
            self.view(&flat, &View::Pad(vec![(1, 0)], 1.0))
        }
    }

    fn unary(&mut self, op: Un, i: usize) {
        let mut x = self.pick(i);
        if o::unary(op, &x.w).is_none() {
            x = self.cast(
                &x,
                if op == Un::Not {
                    DType::Bool
                } else {
                    DType::F64
                },
            );
        }
        let f = |v: &OVal| o::unary(op, v).expect("accepted after the cast");
        let nudge = op.is_transcendental()
            || op == Un::Rsqrt
            || (x.w.dtype.is_complex() && !matches!(op, Un::Neg | Un::Conj | Un::Real | Un::Imag));
        let jumps_at_zero = matches!(
            op,
            Un::Reciprocal | Un::Rsqrt | Un::Log | Un::Log2 | Un::Log10 | Un::LogicalNot
        );
        let v = Val {
            a: op.apply(&x.a),
            w: f(&x.w),
            t1: f(&x.t1),
            t2: f(&x.t2),
            taint: if jumps_at_zero {
                or(&x.taint, &maybe_zero(&x))
            } else {
                x.taint.clone()
            },
            floor: x.floor,
        };
        self.push(format!("{op:?}"), v, nudge);
    }

    fn nudges(op: Bi, d: DType) -> bool {
        op.is_transcendental() || op == Bi::Mul || (d.is_complex() && op == Bi::Div)
    }

    fn binary(&mut self, op: Bi, i: usize, j: usize) {
        let x = self.pick(i);
        let y = self.fit(&self.pick(j), x.w.shape());
        self.binary_vals(op, x, y);
    }

    fn binary_vals(&mut self, op: Bi, mut x: Val, mut y: Val) {
        if o::broadcast_shape(x.w.shape(), y.w.shape())
            .unwrap()
            .iter()
            .product::<usize>()
            > MAX_SIZE
        {
            return;
        }
        if o::binary(op, Opnd::A(&x.w), Opnd::A(&y.w)).is_none() {
            x = self.cast(&x, DType::F64);
            y = self.cast(&y, DType::F64);
        }
        let f = |p: &OVal, q: &OVal| {
            o::binary(op, Opnd::A(p), Opnd::A(q)).expect("accepted after the cast")
        };
        let mut v = Val {
            a: op.apply(&x.a, &y.a),
            w: f(&x.w, &y.w),
            t1: f(&x.t1, &y.t1),
            t2: f(&x.t2, &y.t2),
            taint: or(&x.taint, &y.taint),
            floor: x.floor.max(y.floor),
        };
        // a divisor, a base or a truth value the oracle cannot tell from zero
        match op {
            Bi::Div | Bi::Rem | Bi::FloorDiv => v.taint = or(&v.taint, &maybe_zero(&y)),
            Bi::Pow => v.taint = or(&v.taint, &maybe_zero(&x)),
            // truth values of floats
            Bi::And | Bi::Or | Bi::Xor => {
                v.taint = or(&or(&v.taint, &maybe_zero(&x)), &maybe_zero(&y));
            }
            _ => {}
        }
        if let Some(b) = operand_bound(op, &x, &y, v.w.shape()) {
            let s = self.sign();
            v.t1 = shift(&v.t1, &b, s);
            v.t2 = shift(&v.t2, &b, -s);
        }
        let nudge = Self::nudges(op, v.w.dtype) || Self::nudges(op, x.w.dtype);
        self.push(format!("{op:?}"), v, nudge);
    }

    fn scalar_binary(&mut self, op: Bi, i: usize, s: V, left: bool) {
        let left = left && op.is_operator();
        let mut x = self.pick(i);
        let run = |p: &OVal| {
            if left {
                o::binary(op, Opnd::S(s), Opnd::A(p))
            } else {
                o::binary(op, Opnd::A(p), Opnd::S(s))
            }
        };
        if run(&x.w).is_none() {
            x = self.cast(&x, DType::F64);
        }
        let Some(w) = run(&x.w) else { return }; // e.g. a complex scalar with `//`
        let a = if left {
            op.apply_lhs(s, &x.a)
        } else {
            op.apply(&x.a, s)
        };
        let v = Val {
            a,
            w,
            t1: run(&x.t1).unwrap(),
            t2: run(&x.t2).unwrap(),
            // an array divisor or base the oracle cannot tell from zero
            taint: match op {
                Bi::Div | Bi::Rem | Bi::FloorDiv if left => or(&x.taint, &maybe_zero(&x)),
                Bi::Pow if !left => or(&x.taint, &maybe_zero(&x)),
                _ => x.taint.clone(),
            },
            floor: x.floor,
        };
        let nudge = Self::nudges(op, v.w.dtype) || Self::nudges(op, x.w.dtype);
        let what = if left {
            format!("{s:?} {op:?} x")
        } else {
            format!("x {op:?} {s:?}")
        };
        self.push(what, v, nudge);
    }

    fn where_(&mut self, c: usize, i: usize, j: Result<usize, V>) {
        let x = self.pick(i);
        let cond = self.fit(&self.pick(c), x.w.shape());
        let s = o::broadcast_shape(cond.w.shape(), x.w.shape()).unwrap();
        // the condition's truth value, where the oracle cannot tell it from zero, is unknown
        let cond_taint = or(&cond.taint, &maybe_zero(&cond));
        let (v, what) = match j {
            Ok(j) => {
                let y = self.fit(&self.pick(j), &s);
                if o::broadcast_shape(&s, y.w.shape())
                    .unwrap()
                    .iter()
                    .product::<usize>()
                    > MAX_SIZE
                {
                    return;
                }
                let f =
                    |c: &OVal, p: &OVal, q: &OVal| o::where_(c, Opnd::A(p), Opnd::A(q)).unwrap();
                let v = Val {
                    a: lf::where_(&cond.a, &x.a, &y.a),
                    w: f(&cond.w, &x.w, &y.w),
                    t1: f(&cond.t1, &x.t1, &y.t1),
                    t2: f(&cond.t2, &x.t2, &y.t2),
                    taint: or(&or(&cond_taint, &x.taint), &y.taint),
                    floor: cond.floor.max(x.floor).max(y.floor),
                };
                (v, "where(c, x, y)".to_string())
            }
            Err(sc) => {
                let f = |c: &OVal, p: &OVal| o::where_(c, Opnd::S(sc), Opnd::A(p)).unwrap();
                let v = Val {
                    a: lf::where_(&cond.a, sc, &x.a),
                    w: f(&cond.w, &x.w),
                    t1: f(&cond.t1, &x.t1),
                    t2: f(&cond.t2, &x.t2),
                    taint: or(&cond_taint, &x.taint),
                    floor: cond.floor.max(x.floor),
                };
                (v, format!("where(c, {sc:?}, x)"))
            }
        };
        self.push(what, v, false);
    }

    /// The concrete view a generator means for a value of `shape`, if any.
    fn make_view(g: &ViewGen, shape: &[usize]) -> Option<View> {
        let nd = shape.len();
        let size: usize = shape.iter().product();
        Some(match g {
            ViewGen::Reshape(k) => match k % 4 {
                0 => View::Reshape(vec![-1]),
                1 if nd >= 2 => {
                    let mut s: Vec<isize> = vec![(shape[0] * shape[1]) as isize];
                    s.extend(shape[2..].iter().map(|&d| d as isize));
                    View::Reshape(s)
                }
                2 if nd >= 1 && shape[0].is_multiple_of(2) && shape[0] > 0 => {
                    let mut s: Vec<isize> = vec![2, shape[0] as isize / 2];
                    s.extend(shape[1..].iter().map(|&d| d as isize));
                    View::Reshape(s)
                }
                _ if size > 0 => {
                    let mut s: Vec<isize> = vec![1];
                    s.extend(shape.iter().map(|&d| d as isize));
                    s.push(-1);
                    View::Reshape(s)
                }
                _ => View::Reshape(vec![-1]),
            },
            ViewGen::Transpose => View::Transpose,
            ViewGen::Permute(seed) => {
                let mut p: Vec<usize> = (0..nd).collect();
                let mut s = *seed | 1;
                for k in (1..nd).rev() {
                    p.swap(k, (next(&mut s) % (k as u64 + 1)) as usize);
                }
                View::Permute(p)
            }
            ViewGen::Slice(axes) => {
                let mut e = vec![];
                let mut ax = 0;
                for &(start, end, step, kind) in axes {
                    if kind == 7 {
                        e.push(SliceInfoElem::NewAxis);
                        continue;
                    }
                    if ax >= nd {
                        break;
                    }
                    let n = shape[ax] as isize;
                    if kind == 6 && n > 0 {
                        e.push(SliceInfoElem::Index(
                            (start as isize).rem_euclid(n) - if start < 0 { n } else { 0 },
                        ));
                    } else {
                        let step = if step == 0 { 1 } else { step as isize };
                        let end = if end == 7 { None } else { Some(end as isize) };
                        e.push(SliceInfoElem::Slice {
                            start: start as isize,
                            end,
                            step,
                        });
                    }
                    ax += 1;
                }
                View::Slice(e)
            }
            ViewGen::Pad(b, a, v) => {
                if nd == 0 {
                    return None;
                }
                let val = PAD_VALUES[*v as usize % PAD_VALUES.len()];
                if v % 2 == 0 {
                    View::Pad(vec![(*b as usize, *a as usize)], val)
                } else {
                    View::Pad(
                        (0..nd)
                            .map(|k| ((*b as usize + k) % 3, (*a as usize * k) % 3))
                            .collect(),
                        val,
                    )
                }
            }
            ViewGen::Roll(s, a) if nd > 0 => View::Roll(
                *s as isize,
                (*a as usize % nd) as isize - if a % 2 == 0 { nd as isize } else { 0 },
            ),
            ViewGen::Flip(a) if nd > 0 => View::Flip((*a as usize % nd) as isize),
            ViewGen::Broadcast(k) => {
                let ones: Vec<usize> = (0..nd).filter(|&i| shape[i] == 1).collect();
                if k % 2 == 0 || ones.is_empty() {
                    let mut s = vec![2];
                    s.extend_from_slice(shape);
                    View::BroadcastTo(s)
                } else {
                    let mut s = shape.to_vec();
                    s[ones[*k as usize % ones.len()]] = 3;
                    View::BroadcastTo(s)
                }
            }
            ViewGen::ExpandSqueeze(k) => {
                let ones: Vec<usize> = (0..nd).filter(|&i| shape[i] == 1).collect();
                if k % 2 == 0 || ones.is_empty() {
                    View::ExpandDims((*k as usize % (nd + 1)) as isize)
                } else {
                    View::Squeeze(ones[*k as usize % ones.len()] as isize)
                }
            }
            _ => return None,
        })
    }

    fn view_instr(&mut self, g: &ViewGen, i: usize) {
        let x = self.pick(i);
        let Some(v) = Self::make_view(g, x.w.shape()) else {
            return;
        };
        if x.w.shape().len() >= 5 && matches!(v, View::BroadcastTo(_) | View::ExpandDims(_)) {
            return;
        }
        let y = self.view(&x, &v);
        if y.w.size() > MAX_SIZE {
            return;
        }
        self.push(format!("{v:?}"), y, false);
    }

    fn concat(&mut self, i: usize, j: usize, axis: u8, empty: bool) {
        let x = self.pick(i);
        let nd = x.w.shape().len();
        if nd == 0 {
            return;
        }
        let a = axis as usize % nd;
        let y = self.pick(j);
        let compatible =
            y.w.shape().len() == nd && (0..nd).all(|k| k == a || y.w.shape()[k] == x.w.shape()[k]);
        let y = if compatible {
            y
        } else {
            self.view(&x, &View::Flip(a as isize))
        };
        let mut parts = vec![x, y];
        if empty {
            // a zero-length piece in the middle
            let mut e = vec![
                SliceInfoElem::Slice {
                    start: 0,
                    end: None,
                    step: 1
                };
                nd
            ];
            e[a] = SliceInfoElem::Slice {
                start: 0,
                end: Some(0),
                step: 1,
            };
            let z = self.view(&parts[0], &View::Slice(e));
            parts.insert(1, z);
        }
        if parts.iter().map(|p| p.w.size()).sum::<usize>() > MAX_SIZE {
            return;
        }
        let ax = if axis.is_multiple_of(2) {
            a as isize
        } else {
            a as isize - nd as isize
        };
        let pick = |f: fn(&Val) -> &OVal| -> OVal {
            let r: Vec<&OVal> = parts.iter().map(f).collect();
            o::concatenate(&r, ax)
        };
        let arrays: Vec<&Array> = parts.iter().map(|p| &p.a).collect();
        let v = Val {
            a: lf::concatenate(&arrays, ax),
            w: pick(|p| &p.w),
            t1: pick(|p| &p.t1),
            t2: pick(|p| &p.t2),
            taint: pick(|p| &p.taint),
            floor: parts.iter().map(|p| p.floor).max().unwrap(),
        };
        self.push(
            format!("concatenate(.., {} parts, axis {ax})", parts.len()),
            v,
            false,
        );
    }

    fn stack(&mut self, i: usize, j: usize, axis: u8) {
        let x = self.pick(i);
        let y = self.pick(j);
        let y = if y.w.shape() == x.w.shape() {
            y
        } else {
            x.clone()
        };
        if 2 * x.w.size() > MAX_SIZE || x.w.shape().len() >= 5 {
            return;
        }
        let ax = (axis as usize % (x.w.shape().len() + 1)) as isize;
        let pick = |p: &OVal, q: &OVal| o::stack(&[p, q], ax);
        let v = Val {
            a: lf::stack(&[&x.a, &y.a], ax),
            w: pick(&x.w, &y.w),
            t1: pick(&x.t1, &y.t1),
            t2: pick(&x.t2, &y.t2),
            taint: pick(&x.taint, &y.taint),
            floor: x.floor.max(y.floor),
        };
        self.push(format!("stack(axis {ax})"), v, false);
    }

    /// `op` of `x`, or `None` where lazyfuse refuses it (and the oracle with it).
    fn reduce_val(&self, op: Red, x: &Val, axes: Option<&[isize]>, kd: bool) -> Option<Val> {
        let (w, bound) = o::reduce(op, &x.w, axes, kd)?;
        // selections are exact; float sums, products and moments depend on the order
        let red_floor = match op {
            Red::Max | Red::Min | Red::ArgMax | Red::ArgMin => Floor::Exact,
            _ => Floor::of(w.dtype),
        };
        let r = |v: &OVal| o::reduce(op, v, axes, kd).expect("as for w").0;
        // argmax/argmin have no keepdims
        let kd_taint = kd && !matches!(op, Red::ArgMax | Red::ArgMin);
        // all/any take truth values
        let x_taint = if matches!(op, Red::All | Red::Any) {
            or(&x.taint, &maybe_zero(x))
        } else {
            x.taint.clone()
        };
        let taint = o::reduce(Red::Any, &x_taint, axes, kd_taint)
            .expect("any of the taint")
            .0;
        Some(Val {
            a: op.apply(&x.a, axes, kd),
            t1: o::offset(&r(&x.t1), &bound, 1.0),
            t2: o::offset(&r(&x.t2), &bound, -1.0),
            w,
            taint,
            floor: x.floor.max(red_floor),
        })
    }

    /// The axes (or one axis) of `op` for a value of rank `nd`, from `seed`; var/std get a
    /// ddof below the count they divide by.
    fn reduce_args(op: Red, seed: u64, shape: &[usize]) -> Option<(Red, Option<Vec<isize>>)> {
        let nd = shape.len();
        let axes = match op {
            Red::ArgMax | Red::ArgMin if nd == 0 => return None,
            Red::ArgMax | Red::ArgMin => Some(vec![seed_axis(seed, nd)]),
            Red::Norm => None,
            _ => seed_axes(seed, nd),
        };
        let n: usize = match &axes {
            None => shape.iter().product(),
            Some(a) => a
                .iter()
                .map(|&k| shape[if k < 0 { k + nd as isize } else { k } as usize])
                .product(),
        };
        let op = match op {
            Red::Var(d) => Red::Var(d.min(n.saturating_sub(1))),
            Red::Std(d) => Red::Std(d.min(n.saturating_sub(1))),
            op => op,
        };
        Some((op, axes))
    }

    fn reduce(&mut self, op: Red, i: usize, seed: u64, kd: bool) {
        let mut x = self.pick(i);
        let Some((op, axes)) = Self::reduce_args(op, seed, x.w.shape()) else {
            return;
        };
        if op.result_dtype(x.w.dtype).is_none() {
            x = self.cast(&x, DType::F64);
        }
        let Some(v) = self.reduce_val(op, &x, axes.as_deref(), kd) else {
            return; // an empty max/min/argmax/argmin
        };
        self.push(format!("{op:?} axes {axes:?} keepdims {kd}"), v, false);
    }

    fn recenter(&mut self, k: usize, i: usize, seed: u64) {
        let (op, bi) = RECENTER[k];
        let mut x = self.pick(i);
        let Some((op, axes)) = Self::reduce_args(op, seed, x.w.shape()) else {
            return;
        };
        // keepdims=true over explicit axes (all of them for `None`), so the result
        // broadcasts back against `x`
        let axes = axes.unwrap_or_else(|| (0..x.w.shape().len() as isize).collect());
        if op.result_dtype(x.w.dtype).is_none() {
            x = self.cast(&x, DType::F64);
        }
        let Some(r) = self.reduce_val(op, &x, Some(&axes), true) else {
            return;
        };
        self.push(
            format!("{op:?} axes {axes:?} keepdims true"),
            r.clone(),
            false,
        );
        self.binary_vals(bi, x, r);
    }

    fn run(&mut self, ins: &Instr) {
        match *ins {
            Instr::Unary(op, a) => self.unary(Un::ALL[op], a),
            Instr::Binary(op, a, b) => self.binary(Bi::ALL[op], a, b),
            Instr::ScalarBinary(op, a, s, l) => self.scalar_binary(Bi::ALL[op], a, WEAK[s], l),
            Instr::Where(c, a, b) => self.where_(c, a, Ok(b)),
            Instr::WhereScalar(c, a, s) => self.where_(c, a, Err(WEAK[s])),
            Instr::Cast(d, a) => {
                let x = self.pick(a);
                let v = self.cast(&x, DTYPES[d]);
                self.push(format!("astype({})", DTYPES[d]), v, false);
            }
            Instr::View(ref g, a) => self.view_instr(g, a),
            Instr::Concat(a, b, ax, e) => self.concat(a, b, ax, e),
            Instr::Stack(a, b, ax) => self.stack(a, b, ax),
            Instr::Reduce(op, a, s, k) => self.reduce(Red::ALL[op], a, s, k),
            Instr::Recenter(op, a, s) => self.recenter(op, a, s),
        }
    }
}

/// Builds the program on `dev`; returns the builder and the indices of its roots.
fn build(p: &Program, dev: &Device) -> (Builder, Vec<usize>) {
    let mut b = Builder::new(p, dev);
    for ins in p.instrs.iter().chain(&p.tail) {
        b.run(ins);
    }
    let n = b.vals.len();
    let roots: Vec<usize> = (n.saturating_sub(p.roots)..n).collect();
    (b, roots)
}

fn slack(v: &Val) -> o::Slack {
    let mut s = o::slack_from_twins(&v.w, &[&v.t1, &v.t2]);
    ndarray::Zip::from(&mut s).and(&v.taint.a).for_each(|s, t| {
        if t.as_bool() {
            *s = None;
        }
    });
    s
}

const TOL: Tol = Tol {
    loose_complex_specials: true,
    ..Tol::DEFAULT
};

/// The tolerance for value `v`: its dtype's, or float32's when its precision floor is.
fn tol(v: &Val) -> Tol {
    if v.floor == Floor::F32 {
        Tol {
            rtol64: TOL.rtol32,
            atol64: TOL.atol32,
            ..TOL
        }
    } else {
        TOL
    }
}

/// Compares `got` (read back) with the oracle for value `v`.
fn compare(got: &OVal, v: &Val, what: &str, log: &[String]) -> Result<(), TestCaseError> {
    o::compare_vals(got, &v.w, tol(v), Some(&slack(v)))
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}\nprogram:\n  {}", log.join("\n  "))))
}

/// Evaluates the roots in one `lf::eval` and reads them back.
fn eval_roots(b: &Builder, roots: &[usize]) -> Result<Vec<OVal>, TestCaseError> {
    let arrays: Vec<&Array> = roots.iter().map(|&r| &b.vals[r].a).collect();
    let fail = |e: lf::Error| lf_error(e, &b.log);
    lf::eval(&arrays).map_err(fail)?;
    arrays
        .iter()
        .map(|a| OVal::fetch(a).map_err(fail))
        .collect()
}

/// A lazyfuse error as a failure, with the program that caused it.
fn lf_error(e: lf::Error, log: &[String]) -> TestCaseError {
    let m = e.to_string();
    TestCaseError::fail(format!("{m}\nprogram:\n  {}", log.join("\n  ")))
}

fn check_program(p: &Program, dev: &Device) -> Result<(), TestCaseError> {
    let (b, roots) = build(p, dev);
    let got = eval_roots(&b, &roots)?;
    for (g, &r) in got.iter().zip(&roots) {
        compare(g, &b.vals[r], &format!("root v{r} on {dev}"), &b.log)?;
    }
    // an intermediate value read afterwards, on top of the evaluated roots
    let mid = p.instrs.len() % b.vals.len();
    let g = OVal::fetch(&b.vals[mid].a).map_err(|e| lf_error(e, &b.log))?;
    compare(
        &g,
        &b.vals[mid],
        &format!("intermediate v{mid} on {dev}"),
        &b.log,
    )?;
    Ok(())
}

/// Runs the property `body` over the random programs of `config` on `dev`, each under the
/// fusion lock; a panic or a failure fails the test with the shrunk program, as in
/// `proptest!`.
fn check_programs(
    config: ProptestConfig,
    dev: &Device,
    body: impl Fn(&Program, &Device) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(config);
    let r = runner.run(&program(), |p| {
        let _g = FUSION.lock().unwrap_or_else(|e| e.into_inner());
        body(&p, dev)
    });
    if let Err(e) = r {
        panic!("{e}\n{runner}");
    }
}

device_test!(random_dags_match_the_oracle);
/// Fused evaluation of random DAGs (several roots in one plan) equals the oracle.
fn random_dags_match_the_oracle(dev: &Device) {
    check_programs(config(), dev, check_program);
}

/// Restores fusion when dropped (also on a panic).
struct FusionOff;
impl FusionOff {
    fn new() -> FusionOff {
        lf::set_fusion(false);
        FusionOff
    }
}
impl Drop for FusionOff {
    fn drop(&mut self) {
        lf::set_fusion(true);
    }
}

device_test!(fused_and_unfused_agree);
/// The same programs with fusion off: equal to the oracle and to the fused results.
fn fused_and_unfused_agree(dev: &Device) {
    let config = ProptestConfig {
        cases: (config().cases / 4).max(8),
        ..config()
    };
    check_programs(config, dev, |p, dev| {
        let (fb, roots) = build(p, dev);
        let fused = eval_roots(&fb, &roots)?;
        let (ub, unfused) = {
            let _off = FusionOff::new();
            let (ub, roots2) = build(p, dev);
            prop_assert_eq!(&roots, &roots2);
            let got = eval_roots(&ub, &roots)?;
            (ub, got)
        };
        for ((f, u), &r) in fused.iter().zip(&unfused).zip(&roots) {
            let v = &ub.vals[r];
            compare(u, v, &format!("unfused root v{r} on {dev}"), &ub.log)?;
            // fused against unfused, with the oracle's conditioning as slack
            let s = slack(v);
            o::compare_vals(u, f, tol(v), Some(&s)).map_err(|e| {
                TestCaseError::fail(format!(
                    "unfused vs fused root v{r} on {dev}: {e}\nprogram:\n  {}",
                    ub.log.join("\n  ")
                ))
            })?;
        }
        Ok(())
    });
}

device_test!(shared_subexpressions_evaluated_once_per_plan);
/// A fixed DAG with a subexpression shared by several consumers and roots, fused and
/// unfused, with `lf::eval` of all roots at once.
fn shared_subexpressions_evaluated_once_per_plan(dev: &Device) {
    let _g = FUSION.lock().unwrap_or_else(|e| e.into_inner());
    let x = o::iota(DType::F32, &[3, 4]);
    let y = o::iota(DType::F64, &[4]);
    for fused in [true, false] {
        let _off = (!fused).then(FusionOff::new);
        let (xa, ya) = (x.to_lf(dev), y.to_lf(dev));
        let s = (&xa * 0.5).sin(); // shared
        let r1 = &s + &ya;
        let r2 = s.transpose().exp();
        let r3 = lf::where_(&s.gt(0.0), &s, &r1);
        lf::eval(&[&r1, &r2, &r3, &s]).unwrap();
        let sw = o::unary(
            Un::Sin,
            &o::binary(Bi::Mul, Opnd::A(&x), Opnd::S(V::F64(0.5))).unwrap(),
        )
        .unwrap();
        let w1 = o::binary(Bi::Add, Opnd::A(&sw), Opnd::A(&y)).unwrap();
        let w2 = o::unary(Un::Exp, &sw.transpose()).unwrap();
        let c = o::binary(Bi::Gt, Opnd::A(&sw), Opnd::S(V::F64(0.0))).unwrap();
        let w3 = o::where_(&c, Opnd::A(&sw), Opnd::A(&w1)).unwrap();
        // the F32 sine's last-bit differences between devices carry into the F64 sums
        let tol = Tol::DEFAULT.atol(1e-6, 1e-6);
        o::assert_close(&s, &sw, tol, &format!("s (fused={fused})"));
        o::assert_close(&r1, &w1, tol, &format!("r1 (fused={fused})"));
        o::assert_close(&r2, &w2, tol, &format!("r2 (fused={fused})"));
        o::assert_close(&r3, &w3, tol, &format!("r3 (fused={fused})"));
    }
}

device_test!(reduction_beside_a_root_of_its_output_size);
/// Regression (found by the random DAGs): a reduction evaluated in one `lf::eval` with
/// another root whose kernel has as many elements as the reduction has outputs once shared
/// that root's kernel group and failed in the planner.
fn reduction_beside_a_root_of_its_output_size(dev: &Device) {
    // NumPy: x.sum() = 6.5, y + 1 = [5.0]
    let x = Array::from_vec_on(vec![1.5f32, 2.0, 3.0], &[3], dev).unwrap();
    let y = Array::from_vec_on(vec![4.0f32], &[1], dev).unwrap();
    let (s, t) = (x.sum(), &y + 1.0);
    lf::eval(&[&s, &t]).expect("x.sum() and y + 1 in one eval");
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![6.5]);
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![5.0]);
    // NumPy: np.sum(x, axis=()) = x, x + 1 = [2.5, 3.0, 4.0]
    let a = x.sum_axes(&[], false);
    let b = &x + 1.0;
    lf::eval(&[&a, &b]).expect("x.sum_axes(&[]) and x + 1 in one eval");
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5, 2.0, 3.0]);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.5, 3.0, 4.0]);
    // two roots reading one reduction: NumPy: -x.sum(axis=1) = [-3, -9], imag = [0, 0]
    let x = Array::from_vec_on(vec![1.0f64, 2.0, 4.0, 5.0], &[2, 2], dev).unwrap();
    let a = -x.sum_axes(&[1], false);
    let b = a.imag();
    lf::eval(&[&a, &b]).expect("-x.sum_axes(&[1]) and its imag in one eval");
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![-3.0, -9.0]);
    assert_eq!(b.to_vec::<f64>().unwrap(), vec![0.0, 0.0]);
}

device_test!(empty_var_with_two_epilogue_roots);
/// Regression (found by the random DAGs): the variance of an empty array negated,
/// evaluated together with its `imag()` (a 0.0 constant root, the same node as the divisor
/// `n - ddof` of the variance) once loaded that constant in a reduction's epilogue.
fn empty_var_with_two_epilogue_roots(dev: &Device) {
    // NumPy: -np.var(np.array([], bool)) = nan, np.imag(nan) = 0.0
    let x = Array::from_vec_on(Vec::<bool>::new(), &[0], dev).unwrap();
    let a = -x.var();
    let b = a.imag();
    lf::eval(&[&a, &b]).expect("-x.var() and its imag in one eval");
    assert!(a.to_vec::<f64>().unwrap()[0].is_nan());
    assert_eq!(b.to_vec::<f64>().unwrap(), vec![0.0]);
}

/// The oracle's complex functions against high-precision references (mpmath, 200 bits),
/// where plain formulas lose digits: `exp(z) - 1` and `log(1 + z)` near 0, the polar
/// square root next to the cut, `tan` next to a pole; and C99's side of the cut for
/// `atan(-0+2i)` and the sign of NumPy's `reciprocal(2+0i)`.
#[test]
fn oracle_complex_functions_are_accurate() {
    let close = |got: c64, re: f64, im: f64| {
        let d = (got.re - re).hypot(got.im - im);
        assert!(
            d <= 4.0 * f64::EPSILON * re.hypot(im),
            "{got} vs {re}{im:+}i"
        );
    };
    close(
        o::c128_fn(Un::Expm1, c64::new(1e-10, 1e-10)),
        1e-10,
        1.0000000001000001e-10,
    );
    close(
        o::c128_fn(Un::Log1p, c64::new(1e-10, -2e-10)),
        1.00000000015e-10,
        -1.9999999998e-10,
    );
    close(
        o::c128_fn(Un::Tan, c64::new(-3037000500.0, 0.0)),
        -65.16037789988646,
        0.0,
    );
    // correctly rounded parts
    let s = o::c64_fn(Un::Sqrt, c32::new(-2.862, -0.113));
    assert_eq!((s.re, s.im), (0.033390973, -1.6920742));
    let a = o::c128_fn(Un::Atan, c64::new(-0.0, 2.0));
    close(a, -std::f64::consts::FRAC_PI_2, 0.5493061443340549);
    let r = o::c128_fn(Un::Reciprocal, c64::new(2.0, 0.0));
    assert!(r.re == 0.5 && r.im == 0.0 && r.im.is_sign_negative());
}
