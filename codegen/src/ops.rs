//! The closed operation vocabulary, one set of enums from the API down to the renderer.

use crate::DType;

/// Elementwise operations of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    /// Logical not (Bool only).
    Not,
    /// Absolute value; the modulus for complex (result is real).
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
    /// Round half to even (NumPy `round`), not C `round`.
    Round,
    Trunc,
    /// -1, 0, 1 (NaN stays NaN); for complex `z/|z|` (NumPy 2).
    Sign,
    Square,
    Reciprocal,
    /// Real part of a complex value (result is real).
    Real,
    /// Imaginary part of a complex value (result is real).
    Imag,
    Conj,
    /// Argument of a complex value (result is real).
    Angle,
    IsNan,
    IsInf,
    IsFinite,
}

impl UnaryOp {
    /// True for the transcendental functions (exp, log, trig, hyperbolic and their
    /// inverses): each inlines into a long instruction sequence in CUDA, so they bound how
    /// much of a kernel NVRTC compiles in reasonable time.
    pub fn is_transcendental(self) -> bool {
        use UnaryOp::*;
        matches!(
            self,
            Exp | Expm1
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
        )
    }
    /// Every unary op.
    pub const ALL: [UnaryOp; 34] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Log2,
        UnaryOp::Log10,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Tanh,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Trunc,
        UnaryOp::Sign,
        UnaryOp::Square,
        UnaryOp::Reciprocal,
        UnaryOp::Real,
        UnaryOp::Imag,
        UnaryOp::Conj,
        UnaryOp::Angle,
        UnaryOp::IsNan,
        UnaryOp::IsInf,
        UnaryOp::IsFinite,
    ];

    /// The dtype of the result for an operand of dtype `x`, or `None` if the IR does not
    /// accept that operand dtype (the API inserts casts so that this never happens).
    pub fn result_dtype(self, x: DType) -> Option<DType> {
        use UnaryOp::*;
        match self {
            Not => x.is_bool().then_some(DType::Bool),
            IsNan | IsInf | IsFinite => Some(DType::Bool),
            Abs | Real | Imag => (!x.is_bool()).then_some(x.real()),
            Angle => x.is_inexact().then_some(x.real()),
            Neg | Sign | Square => (!x.is_bool()).then_some(x),
            Conj => Some(x),
            Floor | Ceil | Round | Trunc => x.is_float().then_some(x),
            Sqrt | Rsqrt | Exp | Expm1 | Log | Log1p | Log2 | Log10 | Sin | Cos | Tan | Asin
            | Acos | Atan | Sinh | Cosh | Tanh | Reciprocal => x.is_inexact().then_some(x),
        }
    }

    /// Lower-case name, as NumPy spells it where it has one.
    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "negative",
            Not => "logical_not",
            Abs => "abs",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Exp => "exp",
            Expm1 => "expm1",
            Log => "log",
            Log1p => "log1p",
            Log2 => "log2",
            Log10 => "log10",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Asin => "arcsin",
            Acos => "arccos",
            Atan => "arctan",
            Sinh => "sinh",
            Cosh => "cosh",
            Tanh => "tanh",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
            Sign => "sign",
            Square => "square",
            Reciprocal => "reciprocal",
            Real => "real",
            Imag => "imag",
            Conj => "conj",
            Angle => "angle",
            IsNan => "isnan",
            IsInf => "isinf",
            IsFinite => "isfinite",
        }
    }
}

/// Elementwise operations of two operands. Both operands have the same dtype except for
/// `Complex` (two reals of one precision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// True division (float and complex only: the API casts integer operands to F64).
    Div,
    /// NumPy `//`: floor division (integers: `x // 0 = 0`, `MIN // -1 = MIN`).
    FloorDiv,
    /// NumPy `%`: the result takes the sign of the divisor (integers: `x % 0 = 0`).
    Mod,
    Pow,
    Atan2,
    /// NaN-propagating maximum (NumPy `maximum`, not C `fmax`).
    Maximum,
    /// NaN-propagating minimum.
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
    /// `re + i*im` from two reals.
    Complex,
    /// Index arithmetic: `a / b` on non-negative I64 (truncation equals floor).
    IdxDiv,
    /// Index arithmetic: `a % b` on non-negative I64.
    IdxMod,
}

impl BinaryOp {
    /// True for the binary transcendental functions (`pow`, `atan2`, `hypot`); see
    /// [`UnaryOp::is_transcendental`].
    pub fn is_transcendental(self) -> bool {
        matches!(self, BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Hypot)
    }
    /// Every binary op.
    pub const ALL: [BinaryOp; 23] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::FloorDiv,
        BinaryOp::Mod,
        BinaryOp::Pow,
        BinaryOp::Atan2,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Hypot,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Complex,
        BinaryOp::IdxDiv,
        BinaryOp::IdxMod,
    ];

    /// True for the comparisons (result Bool).
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge)
    }

    /// The dtype of the result for operands of dtypes `a` and `b`, or `None` if the IR does
    /// not accept them.
    pub fn result_dtype(self, a: DType, b: DType) -> Option<DType> {
        use BinaryOp::*;
        match self {
            Complex => (a == b && a.is_float()).then_some(a.to_complex()),
            _ if a != b => None,
            Eq | Ne => Some(DType::Bool),
            Lt | Le | Gt | Ge => (!a.is_complex()).then_some(DType::Bool),
            And | Or | Xor => a.is_bool().then_some(a),
            IdxDiv | IdxMod => (a == DType::I64).then_some(a),
            Add | Sub | Mul => Some(a),
            Div => a.is_inexact().then_some(a),
            Pow => (!a.is_bool()).then_some(a),
            FloorDiv | Mod | Maximum | Minimum => (a.is_int() || a.is_float()).then_some(a),
            Atan2 | Hypot => a.is_float().then_some(a),
        }
    }

    /// Lower-case name, as NumPy spells it where it has one.
    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Sub => "subtract",
            Mul => "multiply",
            Div => "divide",
            FloorDiv => "floor_divide",
            Mod => "remainder",
            Pow => "power",
            Atan2 => "arctan2",
            Maximum => "maximum",
            Minimum => "minimum",
            Hypot => "hypot",
            Eq => "equal",
            Ne => "not_equal",
            Lt => "less",
            Le => "less_equal",
            Gt => "greater",
            Ge => "greater_equal",
            And => "logical_and",
            Or => "logical_or",
            Xor => "logical_xor",
            Complex => "complex",
            IdxDiv => "idx_div",
            IdxMod => "idx_mod",
        }
    }
}

/// Distribution of a counter-based random value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RandomKind {
    /// Uniform in `[0, 1)`.
    Uniform,
    /// Standard normal (Box-Muller on two uniforms).
    Normal,
}

/// How a reduction combines the values of its reduced extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOp {
    /// Sum (integers wrap; floats in pairwise/tree order).
    Sum,
    /// Product.
    Prod,
    /// NaN-propagating maximum.
    Max,
    /// NaN-propagating minimum.
    Min,
    /// Position (I64) of the first maximum; a NaN counts as the maximum.
    ArgMax,
    /// Position (I64) of the first minimum; a NaN counts as the minimum.
    ArgMin,
    /// Logical and of Bool values.
    All,
    /// Logical or of Bool values.
    Any,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 8] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
        ReduceOp::All,
        ReduceOp::Any,
    ];

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
        }
    }

    /// The dtype of the result for reduced values of dtype `d`, or `None` when the IR does
    /// not define the reduction on `d` (the API casts first: sums of integers in I64,
    /// `all`/`any` of Bool).
    pub fn result_dtype(self, d: DType) -> Option<DType> {
        match self {
            ReduceOp::Sum | ReduceOp::Prod => (!d.is_bool()).then_some(d),
            ReduceOp::Max | ReduceOp::Min => (d.is_int() || d.is_float()).then_some(d),
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                (d.is_int() || d.is_float()).then_some(DType::I64)
            }
            ReduceOp::All | ReduceOp::Any => d.is_bool().then_some(d),
        }
    }

    /// True for `ArgMax`/`ArgMin` (the result is a position, not a value).
    pub fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }
}

/// Which threads of a CUDA block share one output of a reduction (a choice of the planner
/// that is part of the kernel's identity; the results are the same either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceLayout {
    /// The reduced positions of one output are adjacent in memory: the threads of a group
    /// read consecutive positions of one output.
    Inner,
    /// The kept positions are adjacent in memory: neighbouring threads take neighbouring
    /// outputs (coalesced across the kept axis) and split the reduced extent between
    /// groups.
    Outer,
    /// An inclusive scan: every element is an output, and output `(i, j)` combines the
    /// values at `(i, 0..=j)` (sums and products only). The outputs hold `m * r` elements.
    /// CUDA blocks take tiles of a row in order and pass running totals on by decoupled
    /// look-back.
    Scan,
}
