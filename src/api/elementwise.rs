//! Elementwise operations: unary math, binary ops with NumPy promotion and broadcasting,
//! comparisons, `where_`, `astype`, complex helpers.

use super::{make, same_device};
use crate::graph::{Op, Shape};
use crate::promote::{self, WeakKind};
use crate::{Array, Device, Element};
use lazyfuse_codegen::{BinaryOp, DType, Scalar, UnaryOp};

/// A right-hand operand: an array or a Rust scalar (which is "weak" in NumPy's sense: it
/// takes the array's dtype where that can hold it).
#[derive(Clone, Debug)]
pub enum Operand {
    /// An array.
    Array(Array),
    /// A Rust scalar and its kind.
    Scalar(Scalar),
}

impl From<&Array> for Operand {
    fn from(a: &Array) -> Operand {
        Operand::Array(a.clone())
    }
}
impl From<Array> for Operand {
    fn from(a: Array) -> Operand {
        Operand::Array(a)
    }
}
impl From<&&Array> for Operand {
    fn from(a: &&Array) -> Operand {
        Operand::Array((*a).clone())
    }
}
macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand {
            fn from(v: $t) -> Operand { Operand::Scalar(v.to_scalar()) }
        }
    )*};
}
scalar_operand!(
    bool,
    i32,
    i64,
    f32,
    f64,
    crate::c32,
    crate::c64,
    u8,
    u16,
    u32,
    u64,
    i8,
    i16,
    half::f16,
    half::bf16
);

/// Every Rust scalar is weak (NEP 50): integers of any width as a Python `int`, floats of
/// any width as a Python `float`.
fn weak_kind(s: &Scalar) -> WeakKind {
    match s.dtype() {
        DType::Bool => WeakKind::Bool,
        d if d.is_int() => WeakKind::Int,
        d if d.is_float() => WeakKind::Float,
        _ => WeakKind::Complex,
    }
}

impl Operand {
    fn shape(&self) -> &[usize] {
        match self {
            Operand::Array(a) => a.shape(),
            Operand::Scalar(_) => &[],
        }
    }
    /// The value of a weak integer scalar that the integer dtype `dtype` cannot hold.
    fn int_out_of_range(&self, dtype: DType) -> Option<i128> {
        match self {
            Operand::Scalar(s) => promote::weak_int_overflow(s, dtype),
            Operand::Array(_) => None,
        }
    }

    /// This operand as an array of `dtype` broadcast to `shape` on `dev`.
    ///
    /// # Panics
    /// When a weak integer scalar does not fit `dtype` (NumPy 2 raises `OverflowError`
    /// rather than wrapping it).
    #[track_caller]
    fn to_array(&self, op: &str, dtype: DType, shape: &[usize], dev: &Device) -> Array {
        match self {
            Operand::Array(a) => a.astype(dtype).broadcast_to(shape),
            Operand::Scalar(s) => {
                if let Some(v) = promote::weak_int_overflow(s, dtype) {
                    promote::overflow_panic(op, v, dtype);
                }
                Array::const_at(s.cast(dtype), shape, dev)
            }
        }
    }
}

/// The common dtype of operands under NEP 50.
pub(crate) fn common_dtype(ops: &[&Operand]) -> DType {
    let mut arrays = ops.iter().filter_map(|o| match o {
        Operand::Array(a) => Some(a.dtype()),
        _ => None,
    });
    let mut d = match arrays.next() {
        Some(first) => arrays.fold(first, promote::result_type),
        None => {
            // only scalars: each takes its default dtype
            return ops
                .iter()
                .filter_map(|o| match o {
                    Operand::Scalar(s) => Some(weak_kind(s).default_dtype()),
                    _ => None,
                })
                .fold(DType::Bool, promote::result_type);
        }
    };
    for o in ops {
        if let Operand::Scalar(s) = o {
            d = promote::weak_result(d, weak_kind(s));
        }
    }
    d
}

/// Device of the array operands (the default device when there is none).
#[track_caller]
fn operands_device(op: &str, ops: &[&Operand]) -> Device {
    let arrays: smallvec::SmallVec<[&Array; 3]> = ops
        .iter()
        .filter_map(|o| match o {
            Operand::Array(a) => Some(a),
            _ => None,
        })
        .collect();
    if arrays.is_empty() {
        crate::default_device()
    } else {
        same_device(op, &arrays)
    }
}

#[track_caller]
fn broadcast_all(op: &str, ops: &[&Operand]) -> Shape {
    let Some((first, rest)) = ops.split_first() else {
        return Shape::new();
    };
    let mut shape = Shape::from_slice(first.shape());
    for o in rest {
        // `match`, not `unwrap_or_else(|| panic!(..))`: a closure would report its own line
        shape = match crate::shape::broadcast_shapes(&shape, o.shape()) {
            Some(s) => s,
            None => {
                let shapes: Vec<&[usize]> = ops.iter().map(|o| o.shape()).collect();
                panic!("{op}: shapes {shapes:?} cannot be broadcast together")
            }
        };
    }
    shape
}

/// The common case of [`binary`] without its general machinery: arithmetic, min/max or a
/// comparison of two arrays of one dtype, shape and device, or of an array and a weak scalar
/// that its dtype takes as it is (`x * 2.0` on float arrays). Promotion, broadcasting and
/// conversions are then all identities, so the node is built directly from the operands
/// (moved in: a chained expression's temporaries touch no reference count); every other
/// case (and every error) goes back to the general path with its operands.
fn binary_plain(op: BinaryOp, a: Operand, b: Operand) -> Result<Array, (Operand, Operand)> {
    use BinaryOp::*;
    let arr = match (&a, &b) {
        (Operand::Array(x), _) => x,
        (Operand::Scalar(_), Operand::Array(y)) => y,
        _ => return Err((a, b)),
    };
    let t = arr.dtype();
    let fits = match op {
        Add | Sub | Mul => !t.is_bool(),
        Div => t.is_inexact(),
        Eq | Ne => !t.is_bool(),
        Maximum | Minimum | Lt | Le | Gt | Ge => !t.is_bool() && !t.is_complex(),
        _ => false,
    };
    let same = |o: &Operand| match o {
        Operand::Array(x) => {
            x.dtype() == t && x.shape() == arr.shape() && x.node.device == arr.node.device
        }
        Operand::Scalar(s) => {
            promote::weak_result(t, weak_kind(s)) == t && promote::weak_int_overflow(s, t).is_none()
        }
    };
    let out = match op.result_dtype(t, t) {
        Some(out) if fits && same(&a) && same(&b) => out,
        _ => return Err((a, b)),
    };
    let shape = Shape::from_slice(arr.shape());
    let dev = arr.node.device.clone();
    let node = |o: Operand| match o {
        Operand::Array(x) => x.node,
        Operand::Scalar(s) => Array::const_at(s.cast(t), &shape, &dev).node,
    };
    let inputs: crate::graph::Inputs = smallvec::smallvec![node(a), node(b)];
    Ok(super::make_owned(Op::Binary(op), out, shape, dev, inputs))
}

/// A binary elementwise op with NumPy promotion and broadcasting.
#[track_caller]
pub(crate) fn binary(op: BinaryOp, a: Operand, b: Operand) -> Array {
    use BinaryOp::*;
    let (a, b) = match binary_plain(op, a, b) {
        Ok(out) => return out,
        Err(operands) => operands,
    };
    let name = op.name();
    let t = common_dtype(&[&a, &b]);
    let (op, mut t) = match op {
        Add if t.is_bool() => (Or, t),
        Mul if t.is_bool() => (And, t),
        Sub if t.is_bool() => {
            panic!("subtract: numpy boolean subtract is not supported, use logical_xor")
        }
        Div if !t.is_inexact() => (Div, DType::F64),
        FloorDiv | Mod | Pow if t.is_bool() => (op, DType::I32),
        Maximum | Minimum if t.is_bool() => (if op == Maximum { Or } else { And }, t), // NumPy: bool max/min are or/and
        Atan2 | Hypot => (op, promote::float_dtype(t)),
        And | Or | Xor => (op, DType::Bool),
        _ => (op, t),
    };
    if t.is_complex()
        && matches!(
            op,
            FloorDiv | Mod | Atan2 | Hypot | Maximum | Minimum | Lt | Le | Gt | Ge
        )
    {
        panic!("{name}: not supported for complex dtype {t}");
    }
    // NumPy 2 compares with an integer the array's dtype cannot hold exactly (the result is
    // bool, so computing in I64 changes nothing else); other ops refuse it in `to_array`
    if matches!(op, Eq | Ne | Lt | Le | Gt | Ge)
        && (a.int_out_of_range(t).is_some() || b.int_out_of_range(t).is_some())
    {
        t = DType::I64;
    }
    let dev = operands_device(name, &[&a, &b]);
    let shape = broadcast_all(name, &[&a, &b]);
    if op == Pow {
        let exponent = match &b {
            Operand::Scalar(s) => Some(*s),
            Operand::Array(e) => e.scalar_value(),
        };
        match exponent {
            // NumPy: `ValueError: Integers to negative integer powers are not allowed.`
            // (exponents that are computed arrays cannot raise: see `semantics::power_i32`)
            Some(e) if t.is_int() && e.to_i128().is_some_and(|v| v < 0) => {
                panic!(
                    "power: integers to negative integer powers are not allowed (exponent {}); \
                     use a float base or exponent",
                    e.to_i64()
                )
            }
            // NumPy computes `x ** 0.5` with a constant exponent as `sqrt(x)`, so
            // `(-0) ** 0.5 = -0` and `(-inf) ** 0.5 = NaN` (C `pow` gives +0 and +inf)
            Some(e) if t.is_float() && !e.dtype().is_complex() && e.to_f64() == 0.5 => {
                return a.to_array(name, t, &shape, &dev).sqrt();
            }
            _ => {}
        }
    }
    let (x, y) = if matches!(op, And | Or | Xor) {
        (a.to_bool(&shape, &dev), b.to_bool(&shape, &dev))
    } else {
        (
            a.to_array(name, t, &shape, &dev),
            b.to_array(name, t, &shape, &dev),
        )
    };
    let out = op.result_dtype(t, t).expect("dtype rules checked above");
    make(Op::Binary(op), out, shape, &dev, &[&x, &y])
}

impl Operand {
    #[track_caller]
    fn to_bool(&self, shape: &[usize], dev: &Device) -> Array {
        match self {
            Operand::Array(a) => a.astype(DType::Bool).broadcast_to(shape),
            Operand::Scalar(s) => Array::const_at(s.cast(DType::Bool), shape, dev),
        }
    }
}

/// `cond ? a : b` elementwise, with broadcasting; `a` and `b` promote like a binary op.
#[track_caller]
pub fn where_(cond: &Array, a: impl Into<Operand>, b: impl Into<Operand>) -> Array {
    let (a, b) = (a.into(), b.into());
    let c = Operand::Array(cond.clone());
    let t = common_dtype(&[&a, &b]);
    let dev = operands_device("where", &[&c, &a, &b]);
    let shape = broadcast_all("where", &[&c, &a, &b]);
    let cb = cond.astype(DType::Bool).broadcast_to(&shape);
    let x = a.to_array("where", t, &shape, &dev);
    let y = b.to_array("where", t, &shape, &dev);
    make(Op::Where, t, shape, &dev, &[&cb, &x, &y])
}

/// `re + i*im` elementwise (reals promote to a common float dtype; the result is complex).
#[track_caller]
pub fn complex(re: &Array, im: &Array) -> Array {
    let t = promote::float_dtype(promote::result_type(re.dtype(), im.dtype()));
    if t.is_complex() {
        panic!(
            "complex: inputs must be real, got {} and {}",
            re.dtype(),
            im.dtype()
        );
    }
    binary_same(BinaryOp::Complex, t, t.to_complex(), re, im)
}

#[track_caller]
fn binary_same(op: BinaryOp, t: DType, out: DType, a: &Array, b: &Array) -> Array {
    let dev = same_device(op.name(), &[a, b]);
    let shape = match crate::shape::broadcast_shapes(a.shape(), b.shape()) {
        Some(s) => s,
        None => panic!(
            "{}: shapes {:?} and {:?} cannot be broadcast together",
            op.name(),
            a.shape(),
            b.shape()
        ),
    };
    let x = a.astype(t).broadcast_to(&shape);
    let y = b.astype(t).broadcast_to(&shape);
    make(Op::Binary(op), out, shape, &dev, &[&x, &y])
}

macro_rules! float_unary {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(&self) -> Array {
            self.float_unary(UnaryOp::$op)
        }
    )*};
}

macro_rules! binary_method {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(&self, rhs: impl Into<Operand>) -> Array {
            binary(BinaryOp::$op, Operand::Array(self.clone()), rhs.into())
        }
    )*};
}

impl Array {
    #[track_caller]
    fn unary_node(&self, op: UnaryOp) -> Array {
        let Some(out) = op.result_dtype(self.dtype()) else {
            panic!("{}: not supported for dtype {}", op.name(), self.dtype())
        };
        make(
            Op::Unary(op),
            out,
            Shape::from_slice(&self.node.shape),
            &self.node.device,
            &[self],
        )
    }

    #[track_caller]
    fn float_unary(&self, op: UnaryOp) -> Array {
        let t = promote::float_dtype(self.dtype());
        if t == self.dtype() {
            return self.unary_node(op);
        }
        self.astype(t).unary_node(op)
    }

    /// A 0-d constant of the scalar's own dtype on `dev`.
    pub(crate) fn scalar_on_dtype(s: Scalar, dev: &Device) -> Array {
        make(Op::Const(s), s.dtype(), Shape::new(), dev, &[])
    }

    /// The constant `s` (of its own dtype) at every index of `shape`: one node, where a
    /// 0-d constant and a broadcast view would be two.
    pub(crate) fn const_at(s: Scalar, shape: &[usize], dev: &Device) -> Array {
        make(Op::Const(s), s.dtype(), Shape::from_slice(shape), dev, &[])
    }

    /// Conversion to `dtype` with NumPy `astype` rules (a no-op when equal).
    pub fn astype(&self, dtype: DType) -> Array {
        if dtype == self.dtype() {
            return self.clone();
        }
        if let Some(s) = self.scalar_value() {
            let c = s.cast(dtype);
            return make(
                Op::Const(c),
                dtype,
                Shape::from_slice(&self.node.shape),
                &self.node.device,
                &[],
            );
        }
        make(
            Op::Cast,
            dtype,
            Shape::from_slice(&self.node.shape),
            &self.node.device,
            &[self],
        )
    }

    float_unary! {
        /// Square root.
        sqrt => Sqrt,
        /// `1 / sqrt(x)`.
        rsqrt => Rsqrt,
        /// `e^x`.
        exp => Exp,
        /// `e^x - 1`, accurate near 0.
        expm1 => Expm1,
        /// Natural logarithm.
        log => Log,
        /// `log(1 + x)`, accurate near 0.
        log1p => Log1p,
        /// Base-2 logarithm.
        log2 => Log2,
        /// Base-10 logarithm.
        log10 => Log10,
        /// Sine.
        sin => Sin,
        /// Cosine.
        cos => Cos,
        /// Tangent.
        tan => Tan,
        /// Inverse sine.
        asin => Asin,
        /// Inverse cosine.
        acos => Acos,
        /// Inverse tangent.
        atan => Atan,
        /// Hyperbolic sine.
        sinh => Sinh,
        /// Hyperbolic cosine.
        cosh => Cosh,
        /// Hyperbolic tangent.
        tanh => Tanh,
        /// `1 / x` (integers compute in the float dtype of `sqrt`: F16 for 8-bit, F32 for
        /// 16-bit, F64 for wider; NumPy keeps the integer dtype there).
        reciprocal => Reciprocal,
    }

    /// Absolute value; the modulus (a real array) for complex input.
    #[track_caller]
    pub fn abs(&self) -> Array {
        if self.dtype().is_bool() {
            return self.clone();
        }
        self.unary_node(UnaryOp::Abs)
    }

    #[track_caller]
    fn rounding(&self, op: UnaryOp) -> Array {
        match self.dtype() {
            d if d.is_complex() => panic!("{}: not supported for dtype {d}", op.name()),
            d if d.is_float() => self.unary_node(op),
            _ => self.clone(), // integers are already integral (NumPy 2 keeps their dtype)
        }
    }
    /// Round down.
    #[track_caller]
    pub fn floor(&self) -> Array {
        self.rounding(UnaryOp::Floor)
    }
    /// Round up.
    #[track_caller]
    pub fn ceil(&self) -> Array {
        self.rounding(UnaryOp::Ceil)
    }
    /// Round half to even (NumPy `round`).
    #[track_caller]
    pub fn round(&self) -> Array {
        self.rounding(UnaryOp::Round)
    }
    /// Round toward zero.
    #[track_caller]
    pub fn trunc(&self) -> Array {
        self.rounding(UnaryOp::Trunc)
    }
    /// -1, 0 or 1 (NaN stays NaN; `z/|z|` for complex).
    #[track_caller]
    pub fn sign(&self) -> Array {
        if self.dtype().is_bool() {
            panic!("sign: not supported for dtype bool");
        }
        self.unary_node(UnaryOp::Sign)
    }
    /// `x * x`. A Bool array gives I32 0/1: NumPy gives int8, and I32 is the narrowest
    /// integer dtype here (as for `floor_div`, `%` and `pow` of Bool arrays).
    #[track_caller]
    pub fn square(&self) -> Array {
        if self.dtype().is_bool() {
            return self.astype(DType::I32); // 0 * 0 = 0, 1 * 1 = 1
        }
        self.unary_node(UnaryOp::Square)
    }
    /// Real part (the array itself when real).
    #[track_caller]
    pub fn real(&self) -> Array {
        if self.dtype().is_complex() {
            if let Some(r) = super::fft::real_of_inverse(self) {
                return r;
            }
            self.unary_node(UnaryOp::Real)
        } else {
            self.clone()
        }
    }
    /// Real part as an elementwise op of this array, never rewritten into a real
    /// transform (`real` of an unevaluated inverse transform may be): for callers that read
    /// the complex array anyway.
    pub(crate) fn real_part(&self) -> Array {
        if self.dtype().is_complex() {
            self.unary_node(UnaryOp::Real)
        } else {
            self.clone()
        }
    }
    /// Imaginary part (zeros when real).
    #[track_caller]
    pub fn imag(&self) -> Array {
        if self.dtype().is_complex() {
            self.unary_node(UnaryOp::Imag)
        } else {
            Array::const_at(Scalar::zero(self.dtype()), self.shape(), &self.node.device)
        }
    }
    /// Complex conjugate (the array itself when real).
    #[track_caller]
    pub fn conj(&self) -> Array {
        if self.dtype().is_complex() {
            self.unary_node(UnaryOp::Conj)
        } else {
            self.clone()
        }
    }
    /// Argument of complex values (0 or pi for reals), a real array.
    #[track_caller]
    pub fn angle(&self) -> Array {
        self.float_unary(UnaryOp::Angle)
    }
    /// True where NaN.
    #[track_caller]
    pub fn isnan(&self) -> Array {
        self.unary_node(UnaryOp::IsNan)
    }
    /// True where infinite.
    #[track_caller]
    pub fn isinf(&self) -> Array {
        self.unary_node(UnaryOp::IsInf)
    }
    /// True where finite.
    #[track_caller]
    pub fn isfinite(&self) -> Array {
        self.unary_node(UnaryOp::IsFinite)
    }
    /// Logical not of the truth value.
    #[track_caller]
    pub fn logical_not(&self) -> Array {
        self.astype(DType::Bool).unary_node(UnaryOp::Not)
    }
    /// Negation (not for Bool).
    #[track_caller]
    pub(crate) fn neg_impl(&self) -> Array {
        if self.dtype().is_bool() {
            panic!("negative: not supported for dtype bool, use logical_not");
        }
        self.unary_node(UnaryOp::Neg)
    }
    /// Logical not, Bool only.
    #[track_caller]
    pub(crate) fn not_impl(&self) -> Array {
        if !self.dtype().is_bool() {
            panic!("not: `!` needs a bool array, got {}", self.dtype());
        }
        self.unary_node(UnaryOp::Not)
    }

    binary_method! {
        /// `arctan2(self, x)`.
        atan2 => Atan2,
        /// `self ** y` elementwise (NumPy `power`). A constant exponent of 0.5 is `sqrt`,
        /// as in NumPy. An integer base with a negative integer constant exponent panics
        /// (NumPy raises `ValueError`); where the exponents are a computed integer array,
        /// a negative one gives the integer part of the real result (`1` for base 1,
        /// `±1` for base -1, else 0) since a kernel cannot raise.
        pow => Pow,
        /// NaN-propagating elementwise maximum.
        maximum => Maximum,
        /// NaN-propagating elementwise minimum.
        minimum => Minimum,
        /// `sqrt(self^2 + y^2)` without overflow.
        hypot => Hypot,
        /// Floor division (NumPy `//`).
        floor_div => FloorDiv,
        /// `self > rhs`.
        gt => Gt,
        /// `self >= rhs`.
        ge => Ge,
        /// `self < rhs`.
        lt => Lt,
        /// `self <= rhs`.
        le => Le,
        /// `self == rhs`.
        eq => Eq,
        /// `self != rhs`.
        ne => Ne,
        /// Logical and of truth values.
        logical_and => And,
        /// Logical or of truth values.
        logical_or => Or,
        /// Logical xor of truth values.
        logical_xor => Xor,
    }

    /// `self ** p` with a weak float exponent.
    #[track_caller]
    pub fn powf(&self, p: f64) -> Array {
        self.pow(p)
    }
    /// `self ** p` with a weak integer exponent.
    #[track_caller]
    pub fn powi(&self, p: i32) -> Array {
        self.pow(p)
    }
    /// `minimum(maximum(self, lo), hi)` (NaN bounds propagate, as NumPy's `clip`).
    ///
    /// An integer bound outside the range of an integer array's dtype is dropped where it
    /// clips nothing (`lo` below the minimum, `hi` above the maximum) and panics where it
    /// would become a value, as NumPy 2 does.
    #[track_caller]
    pub fn clip(&self, lo: impl Into<Operand>, hi: impl Into<Operand>) -> Array {
        let x = self.clip_side(lo.into(), BinaryOp::Maximum);
        x.clip_side(hi.into(), BinaryOp::Minimum)
    }

    /// One side of [`Array::clip`]: `maximum(self, bound)` or `minimum(self, bound)`.
    #[track_caller]
    fn clip_side(&self, bound: Operand, op: BinaryOp) -> Array {
        let x = Operand::Array(self.clone());
        let t = common_dtype(&[&x, &bound]);
        if let Some(v) = bound.int_out_of_range(t) {
            // beyond the dtype's range on the side this bound keeps: it clips nothing
            if (op == BinaryOp::Maximum) == (v < 0) {
                return self.clone();
            }
            promote::overflow_panic("clip", v, t);
        }
        binary(op, x, bound)
    }
}
