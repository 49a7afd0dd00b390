//! Host execution of reduction kernels: the body runs through the interpreter over whole
//! rows (or row chunks), values combine in a fixed order (pairwise for sums and products,
//! the first position for ties of `argmax`/`argmin`), and the epilogue runs through the
//! interpreter over the outputs. Results never depend on how the caller splits the outputs.

use crate::ir::Kernel;
use crate::ops::{ReduceLayout, ReduceOp};
use crate::semantics as sem;
use crate::{interp, DType, HostBuf, IrError, LaunchArgs, Scalar, Slice, SliceMut};
use num_complex::{Complex32, Complex64};

/// Body elements evaluated per interpreter call.
const CHUNK: usize = 1 << 15;

/// Below this many values a sum is serial; above, the halves are summed separately
/// (NumPy's pairwise summation has the same shape, with blocks of 128 unrolled by 8).
const PAIRWISE_BLOCK: usize = 8;

/// An element type values of reductions may have.
trait RElem: Copy {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn max(self, b: Self) -> Self;
    fn min(self, b: Self) -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn is_nan(self) -> bool;
    fn gt(self, b: Self) -> bool;
    fn lt(self, b: Self) -> bool;
}

macro_rules! int_elem {
    ($t:ty) => {
        impl RElem for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            fn mul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            fn max(self, b: Self) -> Self {
                Ord::max(self, b)
            }
            fn min(self, b: Self) -> Self {
                Ord::min(self, b)
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            fn is_nan(self) -> bool {
                false
            }
            fn gt(self, b: Self) -> bool {
                self > b
            }
            fn lt(self, b: Self) -> bool {
                self < b
            }
        }
    };
}
int_elem!(i32);
int_elem!(i64);
int_elem!(u8);
int_elem!(u16);
int_elem!(u32);
int_elem!(u64);
int_elem!(i8);
int_elem!(i16);

macro_rules! float_elem {
    ($t:ident, $max:ident, $min:ident) => {
        impl RElem for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn add(self, b: Self) -> Self {
                self + b
            }
            fn mul(self, b: Self) -> Self {
                self * b
            }
            fn max(self, b: Self) -> Self {
                sem::$max(self, b)
            }
            fn min(self, b: Self) -> Self {
                sem::$min(self, b)
            }
            fn lowest() -> Self {
                $t::NEG_INFINITY
            }
            fn highest() -> Self {
                $t::INFINITY
            }
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            fn gt(self, b: Self) -> bool {
                self > b
            }
            fn lt(self, b: Self) -> bool {
                self < b
            }
        }
    };
}
float_elem!(f32, maximum_f32, minimum_f32);
float_elem!(f64, maximum_f64, minimum_f64);

macro_rules! complex_elem {
    ($t:ty, $r:ty) => {
        impl RElem for $t {
            const ZERO: Self = <$t>::new(0.0, 0.0);
            const ONE: Self = <$t>::new(1.0, 0.0);
            fn add(self, b: Self) -> Self {
                self + b
            }
            fn mul(self, b: Self) -> Self {
                self * b
            }
            // complex max/min/arg are refused by `ReduceOp::result_dtype`
            fn max(self, _: Self) -> Self {
                self
            }
            fn min(self, _: Self) -> Self {
                self
            }
            fn lowest() -> Self {
                Self::ZERO
            }
            fn highest() -> Self {
                Self::ZERO
            }
            fn is_nan(self) -> bool {
                self.re.is_nan() || self.im.is_nan()
            }
            fn gt(self, _: Self) -> bool {
                false
            }
            fn lt(self, _: Self) -> bool {
                false
            }
        }
    };
}
complex_elem!(Complex32, f32);
complex_elem!(Complex64, f64);

impl RElem for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    fn add(self, b: Self) -> Self {
        self | b
    }
    fn mul(self, b: Self) -> Self {
        self & b
    }
    fn max(self, b: Self) -> Self {
        self | b
    }
    fn min(self, b: Self) -> Self {
        self & b
    }
    fn lowest() -> Self {
        false
    }
    fn highest() -> Self {
        true
    }
    fn is_nan(self) -> bool {
        false
    }
    fn gt(self, b: Self) -> bool {
        self & !b
    }
    fn lt(self, b: Self) -> bool {
        !self & b
    }
}

/// A partial result: the value and, for `argmax`/`argmin`, its position (-1: none yet).
type Part<T> = (T, i64);

fn identity<T: RElem>(op: ReduceOp) -> Part<T> {
    let v = match op {
        ReduceOp::Sum | ReduceOp::Any => T::ZERO,
        ReduceOp::Prod | ReduceOp::All => T::ONE,
        ReduceOp::Max | ReduceOp::ArgMax => T::lowest(),
        ReduceOp::Min | ReduceOp::ArgMin => T::highest(),
    };
    (v, -1)
}

/// Combines two partials; `a` covers earlier positions than `b` (ties keep `a`).
fn combine<T: RElem>(op: ReduceOp, a: Part<T>, b: Part<T>) -> Part<T> {
    match op {
        ReduceOp::Sum | ReduceOp::Any => (a.0.add(b.0), -1),
        ReduceOp::Prod | ReduceOp::All => (a.0.mul(b.0), -1),
        ReduceOp::Max => (a.0.max(b.0), -1),
        ReduceOp::Min => (a.0.min(b.0), -1),
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            let take = if a.1 < 0 {
                b.1 >= 0
            } else if b.1 < 0 || a.0.is_nan() {
                false
            } else if b.0.is_nan() {
                true
            } else if op == ReduceOp::ArgMax {
                b.0.gt(a.0)
            } else {
                b.0.lt(a.0)
            };
            if take {
                b
            } else {
                a
            }
        }
    }
}

/// Reduces `xs` (positions `base..`) in the fixed order of this module.
fn fold<T: RElem>(op: ReduceOp, xs: &[T], base: i64) -> Part<T> {
    match op {
        ReduceOp::Sum | ReduceOp::Prod if xs.len() > PAIRWISE_BLOCK => {
            let h = xs.len() / 2;
            combine(
                op,
                fold(op, &xs[..h], base),
                fold(op, &xs[h..], base + h as i64),
            )
        }
        _ => xs.iter().enumerate().fold(identity(op), |acc, (j, &x)| {
            combine(op, acc, (x, base + j as i64))
        }),
    }
}

/// Pairwise combination of partials in position order.
fn tree<T: RElem>(op: ReduceOp, parts: &[Part<T>]) -> Part<T> {
    match parts.len() {
        0 => identity(op),
        1 => parts[0],
        n => combine(op, tree(op, &parts[..n / 2]), tree(op, &parts[n / 2..])),
    }
}

/// Reduces the rows held in `vals` (`rows` rows of `rn` values, or one chunk of a row).
fn rows_of<T: RElem>(op: ReduceOp, vals: &[T], rn: usize, base: i64, out: &mut Vec<Part<T>>) {
    if rn == 0 {
        return;
    }
    out.extend(vals.chunks(rn).map(|row| fold(op, row, base)));
}

/// `$go!(T, Variant)` for the accumulator dtype `$vd`; 16-bit floats never accumulate
/// (kernels widen them to F32 first: `Kernel::widen_half`), so they are an error of `$what`.
macro_rules! by_acc_dtype {
    ($vd:expr, $go:ident, $what:literal) => {
        match $vd {
            DType::Bool => $go!(bool, Bool),
            DType::I32 => $go!(i32, I32),
            DType::I64 => $go!(i64, I64),
            DType::F32 => $go!(f32, F32),
            DType::F64 => $go!(f64, F64),
            DType::C64 => $go!(Complex32, C64),
            DType::C128 => $go!(Complex64, C128),
            DType::U8 => $go!(u8, U8),
            DType::U16 => $go!(u16, U16),
            DType::U32 => $go!(u32, U32),
            DType::U64 => $go!(u64, U64),
            DType::I8 => $go!(i8, I8),
            DType::I16 => $go!(i16, I16),
            DType::F16 | DType::BF16 => {
                return Err(IrError(format!(
                    "{} of {} values (16-bit floats accumulate in F32: Kernel::widen_half)",
                    $what, $vd
                )))
            }
        }
    };
}

/// Runs reduction kernel `kernel` for outputs `start .. start + len` (the length of the
/// output slices). Arguments are checked like [`interp::run`] checks them.
pub(crate) fn run(
    kernel: &Kernel,
    inputs: &[Slice<'_>],
    outputs: &mut [SliceMut<'_>],
    args: &LaunchArgs,
    start: usize,
) -> Result<(), IrError> {
    let (body, epi) = kernel
        .split_reduce()
        .ok_or_else(|| IrError("not a reduction kernel".into()))?;
    let red = kernel
        .reduce
        .ok_or_else(|| IrError("no reduction".into()))?;
    if red.layout == ReduceLayout::Scan {
        return run_scan(kernel, red.op, inputs, outputs, args, start);
    }
    if args.shape.len() != 2 {
        return Err(IrError(format!(
            "reduction launch shape {:?} is not [m, r]",
            args.shape
        )));
    }
    let (m, rn) = (args.shape[0], args.shape[1]);
    let len = outputs.first().map_or(0, |o| o.len());
    if start.checked_add(len).is_none_or(|e| e > m) {
        return Err(IrError(format!(
            "outputs {start}..{start}+{len} exceed the {m} outputs"
        )));
    }
    let vd = body.outputs[0];
    let body_args = LaunchArgs {
        shape: args.shape.clone(),
        params: args.params.clone(),
    };
    let mut tmp = HostBuf::zeros(vd, CHUNK.min(len.saturating_mul(rn)).max(1));
    macro_rules! go {
        ($T:ty, $get:ident) => {{
            let mut rows: Vec<Part<$T>> = Vec::with_capacity(len);
            let mut parts: Vec<Part<$T>> = Vec::new();
            if rn == 0 {
                rows.resize(len, identity(red.op));
            } else if rn <= CHUNK {
                let per = (CHUNK / rn).max(1);
                let mut i = 0;
                while i < len {
                    let k = per.min(len - i);
                    let n = k * rn;
                    if let HostBuf::$get(s) = &mut tmp {
                        let mut sub = [SliceMut::$get(&mut s[..n])];
                        interp::run(&body, inputs, &mut sub, &body_args, (start + i) * rn)?;
                    }
                    if let HostBuf::$get(v) = &tmp {
                        rows_of::<$T>(red.op, &v[..n], rn, 0, &mut rows);
                    }
                    i += k;
                }
            } else {
                for i in 0..len {
                    parts.clear();
                    let mut r0 = 0;
                    while r0 < rn {
                        let c = CHUNK.min(rn - r0);
                        if let HostBuf::$get(s) = &mut tmp {
                            let mut sub = [SliceMut::$get(&mut s[..c])];
                            interp::run(
                                &body,
                                inputs,
                                &mut sub,
                                &body_args,
                                (start + i) * rn + r0,
                            )?;
                        }
                        if let HostBuf::$get(v) = &tmp {
                            parts.push(fold(red.op, &v[..c], r0 as i64));
                        }
                        r0 += c;
                    }
                    rows.push(tree(red.op, &parts));
                }
            }
            // the accumulator: values, or the positions of arg ops
            if red.op.is_arg() {
                HostBuf::I64(rows.iter().map(|p| Ord::max(p.1, 0)).collect())
            } else {
                HostBuf::$get(rows.iter().map(|p| p.0).collect())
            }
        }};
    }
    let acc = by_acc_dtype!(vd, go, "a reduction");
    let mut ins: Vec<Slice<'_>> = inputs.to_vec();
    ins.push(acc.as_slice());
    let mut params = args.params.clone();
    params.push(Scalar::I64(start as i64));
    let epi_args = LaunchArgs {
        shape: [m].into_iter().collect(),
        params,
    };
    interp::run(&epi, &ins, outputs, &epi_args, start)
}

/// Runs scan kernel `kernel` for elements `start .. start + len` of its `[m, r]` launch:
/// each row is scanned serially from its first element (NumPy's order), the body computed
/// in chunks through the interpreter; the epilogue runs over the elements.
fn run_scan(
    kernel: &Kernel,
    op: ReduceOp,
    inputs: &[Slice<'_>],
    outputs: &mut [SliceMut<'_>],
    args: &LaunchArgs,
    start: usize,
) -> Result<(), IrError> {
    let (body, epi) = kernel
        .split_reduce()
        .ok_or_else(|| IrError("not a scan kernel".into()))?;
    if args.shape.len() != 2 {
        return Err(IrError(format!(
            "scan launch shape {:?} is not [m, r]",
            args.shape
        )));
    }
    let (m, rn) = (args.shape[0], args.shape[1]);
    let total = m * rn;
    let len = outputs.first().map_or(0, |o| o.len());
    let end = match start.checked_add(len) {
        Some(e) if e <= total => e,
        _ => {
            return Err(IrError(format!(
                "outputs {start}..{start}+{len} exceed the {total} elements"
            )))
        }
    };
    if len == 0 {
        return Ok(());
    }
    let vd = body.outputs[0];
    let body_args = LaunchArgs {
        shape: args.shape.clone(),
        params: args.params.clone(),
    };
    let mut tmp = HostBuf::zeros(vd, CHUNK.min(end - (start / rn) * rn).max(1));
    macro_rules! go {
        ($T:ty, $get:ident) => {{
            let mut acc: Vec<$T> = Vec::with_capacity(len);
            let mut row = start / rn;
            while row * rn < end {
                let row0 = row * rn;
                let stop = end.min(row0 + rn);
                let mut run = identity::<$T>(op);
                let mut p = row0;
                while p < stop {
                    let c = CHUNK.min(stop - p);
                    if let HostBuf::$get(s) = &mut tmp {
                        let mut sub = [SliceMut::$get(&mut s[..c])];
                        interp::run(&body, inputs, &mut sub, &body_args, p)?;
                    }
                    if let HostBuf::$get(v) = &tmp {
                        for (q, &x) in v[..c].iter().enumerate() {
                            run = combine(op, run, (x, -1));
                            if p + q >= start {
                                acc.push(run.0);
                            }
                        }
                    }
                    p += c;
                }
                row += 1;
            }
            HostBuf::$get(acc)
        }};
    }
    let acc = by_acc_dtype!(vd, go, "a scan");
    let mut ins: Vec<Slice<'_>> = inputs.to_vec();
    ins.push(acc.as_slice());
    let mut params = args.params.clone();
    params.push(Scalar::I64(start as i64));
    let epi_args = LaunchArgs {
        shape: [total].into_iter().collect(),
        params,
    };
    interp::run(&epi, &ins, outputs, &epi_args, start)
}
