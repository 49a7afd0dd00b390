//! Host interpreter of the kernel IR, used by the CPU backend.
//!
//! The interpreter works column-wise over tiles of [`TILE`] elements: every SSA value of a
//! tile is a typed column (a `Vec` of its dtype, allocated once per call and reused by every
//! tile and, once dead, by later values of the same dtype). The `match` on op and dtype
//! happens once per value per tile; the inner loops are monomorphized closures over slices
//! that the compiler vectorizes.
//!
//! Before the tile loop, a plan (per call, so it sees the runtime params) removes work:
//! * values that do not depend on the element (params, constants and everything computed
//!   only from them) are evaluated once and used as broadcast scalars;
//! * loads at `Index + c` (`c` uniform) read the input slice in place, with one bounds check;
//! * identities (`x * 1`, `x + 0`, `x // 1` on integers, `x * 0 = 0`, `where` with a uniform
//!   condition, a cast to the same dtype) become aliases of their operand;
//! * a value stored once and read by nothing else is computed straight into its output.
//!
//! A load that the plan finds out of bounds is an error only if a store needs it (a uniform
//! `where` may discard it).
//!
//! The arithmetic follows NumPy exactly, through the helpers of [`crate::semantics`]. The
//! float transcendental functions, `atan2` and the rounding ops run over whole columns in
//! [`crate::vmath`] (vectorized; within 1 ulp in F32, about 1 ulp in F64, NumPy's special
//! values).
//! Operations NumPy does not define on a dtype but the IR accepts are documented where
//! they are implemented: on `Bool`, `Add` is `or`, `Mul` is `and` and `Sub` is `xor`;
//! integer `Div` is floor division (as `FloorDiv`).

use crate::cmath;
use crate::ir::Inst;
use crate::ops::{BinaryOp, RandomKind, UnaryOp};
use crate::scalar::Wide;
use crate::semantics as sem;
use crate::vmath;
use crate::{DType, IrError, Kernel, LaunchArgs, Scalar, Slice, SliceMut, ValueId};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::sync::Arc;

#[path = "interp_tables.rs"]
mod tables;

/// Number of elements evaluated together (the length of every column).
pub const TILE: usize = 2048;

/// Computes elements `start .. start + len` of `kernel` (where `len` is the length of every
/// output slice), reading `inputs` and writing `outputs[o][j]` for element `start + j`.
///
/// Checks the kernel (`Kernel::validate`) and the arguments (counts, dtypes, lengths, the
/// launch shape and the parameters) first; an unguarded load (or a load under a true guard)
/// outside its input is an error, never a panic. Each call plans the kernel and allocates
/// a few columns of [`TILE`] elements, so call it on ranges of many tiles.
pub fn run(
    kernel: &Kernel,
    inputs: &[Slice<'_>],
    outputs: &mut [SliceMut<'_>],
    args: &LaunchArgs,
    start: usize,
) -> Result<(), IrError> {
    kernel.validate()?;
    if kernel.reduce.is_some() {
        return crate::reduce::run(kernel, inputs, outputs, args, start);
    }
    let len = check_args(kernel, inputs, outputs, args, start)?;
    if len == 0 {
        return Ok(());
    }
    let ctx = Ctx::new(kernel, inputs, args, start, len)?;
    run_tiles(ctx, kernel, outputs, start, len)
}

/// [`run`] of a shared kernel, for launches that repeat: the plan of the launch (which
/// values are uniform, read in place, or computed into which column) is kept per thread
/// for the last few (kernel, arguments, range, input lengths), so that a repeated launch
/// neither validates nor plans again. The cache holds the `Arc`, so a kernel's address
/// identifies it while its entry lives.
pub fn run_shared(
    kernel: &Arc<Kernel>,
    inputs: &[Slice<'_>],
    outputs: &mut [SliceMut<'_>],
    args: &LaunchArgs,
    start: usize,
) -> Result<(), IrError> {
    if kernel.reduce.is_some() {
        return run(kernel, inputs, outputs, args, start);
    }
    let hit = PLAN_CACHE.with(|c| {
        let c = c.borrow();
        c.iter()
            .position(|e| e.matches(kernel, inputs, args, start))
            .map(|k| c[k].plan.clone())
    });
    let Some(plan) = hit else {
        kernel.validate()?;
        let len = check_args(kernel, inputs, outputs, args, start)?;
        if len == 0 {
            return Ok(());
        }
        let ctx = Ctx::new(kernel, inputs, args, start, len)?;
        if ctx.reads_data_while_planning() {
            // a load at a uniform index was folded to the value it read: the plan holds
            // input data and is good for this launch only
            return run_tiles(ctx, kernel, outputs, start, len);
        }
        let plan = Arc::new(Plan::of(&ctx));
        PLAN_CACHE.with(|c| {
            let mut c = c.borrow_mut();
            let entry = PlanEntry {
                kernel: kernel.clone(),
                args: args.clone(),
                start,
                lens: inputs.iter().map(|s| s.len()).collect(),
                plan,
            };
            if c.len() >= PLAN_CACHE_LEN {
                c.remove(0);
            }
            c.push(entry);
        });
        return run_tiles(ctx, kernel, outputs, start, len);
    };
    // the entry matched the inputs and the range, and the outputs are checked here
    let len = check_outputs(kernel, outputs)?;
    if len != plan.len {
        return Err(internal("cached plan of another length"));
    }
    let ctx = Ctx::from_plan(kernel, inputs, args, &plan);
    run_tiles(ctx, kernel, outputs, start, len)
}

/// An elementwise launch planned once for all of its elements ([`Planned::new`]), so that
/// its ranges (the chunks a launch is split into for the worker threads) are computed
/// without each validating and planning the kernel again: planning builds the axis tables
/// and classifies every value, which for a small kernel costs as much as evaluating a
/// chunk.
pub struct Planned<'k> {
    kernel: &'k Kernel,
    /// `None` for a reduction, whose ranges run through [`run`].
    plan: Option<Plan>,
}

impl<'k> Planned<'k> {
    /// Plans `kernel` over all the elements of the launch `args` with `inputs`, checking
    /// the kernel and every load that planning can prove in or out of bounds for the whole
    /// launch.
    pub fn new(
        kernel: &'k Kernel,
        inputs: &[Slice<'_>],
        args: &LaunchArgs,
    ) -> Result<Planned<'k>, IrError> {
        kernel.validate()?;
        if kernel.reduce.is_some() {
            return Ok(Planned { kernel, plan: None });
        }
        let total = check_launch(kernel, inputs, args)?;
        let plan = if total == 0 {
            None
        } else {
            // the plan of the whole range is good for any part of it: its bounds checks
            // cover every element, and values it folded from input data read the same
            // inputs as every range of this launch
            Some(Plan::of(&Ctx::new(kernel, inputs, args, 0, total)?))
        };
        Ok(Planned { kernel, plan })
    }

    /// [`run`] of elements `start .. start + len` (`len` the length of every output
    /// slice) with the inputs and arguments the launch was planned with.
    pub fn run(
        &self,
        inputs: &[Slice<'_>],
        outputs: &mut [SliceMut<'_>],
        args: &LaunchArgs,
        start: usize,
    ) -> Result<(), IrError> {
        let Some(plan) = &self.plan else {
            return run(self.kernel, inputs, outputs, args, start);
        };
        let len = check_args(self.kernel, inputs, outputs, args, start)?;
        if len == 0 {
            return Ok(());
        }
        let ctx = Ctx::from_plan_len(self.kernel, inputs, args, plan, len);
        run_tiles(ctx, self.kernel, outputs, start, len)
    }
}

/// Launch plans kept per thread by [`run_shared`].
const PLAN_CACHE_LEN: usize = 8;

thread_local! {
    static PLAN_CACHE: std::cell::RefCell<Vec<PlanEntry>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One launch's plan and what it was made for.
struct PlanEntry {
    kernel: Arc<Kernel>,
    args: LaunchArgs,
    start: usize,
    lens: smallvec::SmallVec<[usize; 4]>,
    plan: Arc<Plan>,
}

impl PlanEntry {
    fn matches(
        &self,
        kernel: &Arc<Kernel>,
        inputs: &[Slice<'_>],
        args: &LaunchArgs,
        start: usize,
    ) -> bool {
        Arc::ptr_eq(&self.kernel, kernel)
            && self.start == start
            && self.lens.len() == inputs.len()
            && self.lens.iter().zip(inputs).all(|(&n, s)| n == s.len())
            && kernel
                .inputs
                .iter()
                .zip(inputs)
                .all(|(&d, s)| d == s.dtype())
            && self.args.shape == args.shape
            && self.args.params.len() == args.params.len()
            && self
                .args
                .params
                .iter()
                .zip(&args.params)
                .all(|(a, b)| same_bits(a, b))
    }
}

/// Bitwise equality: planning folds parameters, so `-0.0` and `0.0` (equal as numbers) or
/// two NaNs (unequal) must be told apart by their bits.
fn same_bits(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => x.to_bits() == y.to_bits(),
        (Scalar::F64(x), Scalar::F64(y)) => x.to_bits() == y.to_bits(),
        (Scalar::C64(x), Scalar::C64(y)) => {
            x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits()
        }
        (Scalar::C128(x), Scalar::C128(y)) => {
            x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits()
        }
        _ => a == b,
    }
}

/// A skip in a tile's program: when no element of value `cond` over the tile equals
/// `want`, the next `len` program entries (the values only one side of a `where` needs)
/// are not evaluated; the `where` then selects the other side everywhere in the tile.
#[derive(Clone, Copy, Debug)]
struct Guard {
    cond: usize,
    want: bool,
    len: usize,
}

/// Marks a program entry (`Ctx::order`) that is guard `entry - GUARD`, not a value.
const GUARD: usize = 1 << (usize::BITS - 1);

/// Marks a value entry whose next entry is its sine/cosine partner (the same f32 operand):
/// both are computed by one pass with one range reduction per element.
const PAIR: usize = 1 << (usize::BITS - 2);

/// Fewest values a side of a `where` holds to be guarded (a check of the condition column
/// costs about one cheap op over the tile).
const GUARD_MIN: usize = 2;

/// What [`Ctx::new`] decided for one launch.
struct Plan {
    len: usize,
    locs: Vec<Loc>,
    order: Vec<usize>,
    guards: Vec<Guard>,
    /// Dtype of each column slot.
    slots: Vec<DType>,
    /// The axis tables of the tabled values.
    tab: Option<Arc<tables::Tables>>,
}

impl Plan {
    fn of(ctx: &Ctx<'_, '_>) -> Plan {
        Plan {
            len: ctx.len,
            locs: ctx.locs.clone(),
            order: ctx.order.clone(),
            guards: ctx.guards.clone(),
            slots: ctx.slots.iter().map(|c| c.dtype()).collect(),
            tab: ctx.tab.clone(),
        }
    }
}

/// Checks the outputs' count, dtypes and common length against the kernel; returns the
/// length.
fn check_outputs(kernel: &Kernel, outputs: &[SliceMut<'_>]) -> Result<usize, IrError> {
    let err = |m: String| Err(IrError(m));
    if outputs.len() != kernel.outputs.len() {
        return err(format!(
            "kernel has {} outputs, {} given",
            kernel.outputs.len(),
            outputs.len()
        ));
    }
    let len = outputs.first().map_or(0, |o| o.len());
    for (k, (s, &d)) in outputs.iter().zip(&kernel.outputs).enumerate() {
        let sd = slice_mut_dtype(s);
        if sd != d {
            return err(format!("output {k} is {sd}, kernel expects {d}"));
        }
        if s.len() != len {
            return err(format!(
                "output {k} has length {}, output 0 has {len}",
                s.len()
            ));
        }
    }
    Ok(len)
}

/// The tile loop of a planned launch.
fn run_tiles(
    mut ctx: Ctx<'_, '_>,
    kernel: &Kernel,
    outputs: &mut [SliceMut<'_>],
    start: usize,
    len: usize,
) -> Result<(), IrError> {
    let end = start + len;
    let mut i0 = start;
    while i0 < end {
        let t = Tile {
            i0,
            n: TILE.min(end - i0),
        };
        let off = i0 - start;
        let mut k = 0;
        while k < ctx.order.len() {
            let v = ctx.order[k];
            k += 1;
            if v & PAIR != 0 {
                let (a, b) = (v & !PAIR, ctx.order[k]);
                k += 1;
                ctx.sincos(a, b, t)?;
                continue;
            }
            if v & GUARD != 0 {
                let g = ctx.guards[v - GUARD];
                let skip = match ctx.locs[g.cond] {
                    Loc::Direct(_) => false,
                    _ => match ctx.src::<bool>(g.cond as ValueId, t) {
                        Src::Uni(c) => c != g.want,
                        Src::Col(c) => !c.contains(&g.want),
                    },
                };
                if skip {
                    k += g.len;
                }
                continue;
            }
            match ctx.locs[v] {
                Loc::Slot(s) => {
                    let mut col = std::mem::take(&mut ctx.slots[s]);
                    let r = ctx.eval(v, col.view(t.n), t);
                    ctx.slots[s] = col;
                    r?;
                }
                Loc::Direct(o) => ctx.eval(v, sub(&mut outputs[o], off, t.n), t)?,
                // computed inside its one reader
                Loc::Fused(_) => {}
                _ => return Err(internal("evaluated value has no column")),
            }
        }
        for st in &kernel.stores {
            if !matches!(ctx.locs[st.value as usize], Loc::Direct(_)) {
                ctx.store(st.value, &mut outputs[st.output as usize], off, t);
            }
        }
        i0 += t.n;
    }
    Ok(())
}

/// Checks the arguments against the kernel's signature; returns the number of elements.
fn check_args(
    kernel: &Kernel,
    inputs: &[Slice<'_>],
    outputs: &[SliceMut<'_>],
    args: &LaunchArgs,
    start: usize,
) -> Result<usize, IrError> {
    let total = check_launch(kernel, inputs, args)?;
    let len = check_outputs(kernel, outputs)?;
    match start.checked_add(len) {
        Some(e) if e <= total => Ok(len),
        _ => Err(IrError(format!(
            "elements {start}..{start}+{len} exceed the launch size {total}"
        ))),
    }
}

/// Checks the inputs (count and dtypes), the launch shape's rank and the parameters
/// against the kernel; returns the launch's number of elements.
fn check_launch(
    kernel: &Kernel,
    inputs: &[Slice<'_>],
    args: &LaunchArgs,
) -> Result<usize, IrError> {
    let err = |m: String| Err(IrError(m));
    if inputs.len() != kernel.inputs.len() {
        return err(format!(
            "kernel has {} inputs, {} given",
            kernel.inputs.len(),
            inputs.len()
        ));
    }
    for (k, (s, &d)) in inputs.iter().zip(&kernel.inputs).enumerate() {
        if s.dtype() != d {
            return err(format!("input {k} is {}, kernel expects {d}", s.dtype()));
        }
    }
    if args.shape.len() != kernel.rank as usize {
        return err(format!(
            "launch shape {:?} does not have rank {}",
            args.shape, kernel.rank
        ));
    }
    if args.params.len() != kernel.params.len() {
        return err(format!(
            "kernel has {} params, {} given",
            kernel.params.len(),
            args.params.len()
        ));
    }
    for (k, (p, &d)) in args.params.iter().zip(&kernel.params).enumerate() {
        if p.dtype() != d {
            return err(format!("param {k} is {}, kernel expects {d}", p.dtype()));
        }
    }
    args.shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| IrError(format!("launch shape {:?} overflows", args.shape)))
}

fn slice_mut_dtype(s: &SliceMut<'_>) -> DType {
    match s {
        SliceMut::Bool(_) => DType::Bool,
        SliceMut::I32(_) => DType::I32,
        SliceMut::I64(_) => DType::I64,
        SliceMut::F32(_) => DType::F32,
        SliceMut::F64(_) => DType::F64,
        SliceMut::C64(_) => DType::C64,
        SliceMut::C128(_) => DType::C128,
        SliceMut::U8(_) => DType::U8,
        SliceMut::U16(_) => DType::U16,
        SliceMut::U32(_) => DType::U32,
        SliceMut::U64(_) => DType::U64,
        SliceMut::I8(_) => DType::I8,
        SliceMut::I16(_) => DType::I16,
        SliceMut::F16(_) => DType::F16,
        SliceMut::BF16(_) => DType::BF16,
    }
}

fn internal(m: &str) -> IrError {
    IrError(format!("interpreter invariant broken: {m}"))
}

fn unsupported(name: &str, d: DType) -> IrError {
    IrError(format!("{name} is not defined on {d}"))
}

/// Runs `$body` with `$T` bound to the element type of dtype `$dt`.
macro_rules! with_type {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            DType::Bool => {
                type $T = bool;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
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
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::U16 => {
                type $T = u16;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::U64 => {
                type $T = u64;
                $body
            }
            DType::I8 => {
                type $T = i8;
                $body
            }
            DType::I16 => {
                type $T = i16;
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
        }
    };
}

// ---------------------------------------------------------------------------------------
// Columns and element types
// ---------------------------------------------------------------------------------------

/// One typed column of a tile.
enum Col {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<Complex32>),
    C128(Vec<Complex64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

impl Default for Col {
    fn default() -> Col {
        Col::Bool(Vec::new())
    }
}

impl Col {
    fn dtype(&self) -> DType {
        match self {
            Col::Bool(_) => DType::Bool,
            Col::I32(_) => DType::I32,
            Col::I64(_) => DType::I64,
            Col::F32(_) => DType::F32,
            Col::F64(_) => DType::F64,
            Col::C64(_) => DType::C64,
            Col::C128(_) => DType::C128,
            Col::U8(_) => DType::U8,
            Col::U16(_) => DType::U16,
            Col::U32(_) => DType::U32,
            Col::U64(_) => DType::U64,
            Col::I8(_) => DType::I8,
            Col::I16(_) => DType::I16,
            Col::F16(_) => DType::F16,
            Col::BF16(_) => DType::BF16,
        }
    }
    fn new(dtype: DType, n: usize) -> Col {
        with_type!(dtype, T => T::wrap(vec![T::default(); n]))
    }
    /// True when the column has `dtype` and at least `n` elements.
    fn fits(&self, dtype: DType, n: usize) -> bool {
        let len = match self {
            Col::Bool(v) => v.len(),
            Col::I32(v) => v.len(),
            Col::I64(v) => v.len(),
            Col::F32(v) => v.len(),
            Col::F64(v) => v.len(),
            Col::C64(v) => v.len(),
            Col::C128(v) => v.len(),
            Col::U8(v) => v.len(),
            Col::U16(v) => v.len(),
            Col::U32(v) => v.len(),
            Col::U64(v) => v.len(),
            Col::I8(v) => v.len(),
            Col::I16(v) => v.len(),
            Col::F16(v) => v.len(),
            Col::BF16(v) => v.len(),
        };
        self.dtype() == dtype && len >= n
    }
    /// The first `n` elements, writable.
    fn view(&mut self, n: usize) -> SliceMut<'_> {
        match self {
            Col::Bool(v) => SliceMut::Bool(&mut v[..n]),
            Col::I32(v) => SliceMut::I32(&mut v[..n]),
            Col::I64(v) => SliceMut::I64(&mut v[..n]),
            Col::F32(v) => SliceMut::F32(&mut v[..n]),
            Col::F64(v) => SliceMut::F64(&mut v[..n]),
            Col::C64(v) => SliceMut::C64(&mut v[..n]),
            Col::C128(v) => SliceMut::C128(&mut v[..n]),
            Col::U8(v) => SliceMut::U8(&mut v[..n]),
            Col::U16(v) => SliceMut::U16(&mut v[..n]),
            Col::U32(v) => SliceMut::U32(&mut v[..n]),
            Col::U64(v) => SliceMut::U64(&mut v[..n]),
            Col::I8(v) => SliceMut::I8(&mut v[..n]),
            Col::I16(v) => SliceMut::I16(&mut v[..n]),
            Col::F16(v) => SliceMut::F16(&mut v[..n]),
            Col::BF16(v) => SliceMut::BF16(&mut v[..n]),
        }
    }
    /// The first element as a scalar.
    fn first(&self) -> Scalar {
        match self {
            Col::Bool(v) => Scalar::Bool(v[0]),
            Col::I32(v) => Scalar::I32(v[0]),
            Col::I64(v) => Scalar::I64(v[0]),
            Col::F32(v) => Scalar::F32(v[0]),
            Col::F64(v) => Scalar::F64(v[0]),
            Col::C64(v) => Scalar::C64(v[0]),
            Col::C128(v) => Scalar::C128(v[0]),
            Col::U8(v) => Scalar::U8(v[0]),
            Col::U16(v) => Scalar::U16(v[0]),
            Col::U32(v) => Scalar::U32(v[0]),
            Col::U64(v) => Scalar::U64(v[0]),
            Col::I8(v) => Scalar::I8(v[0]),
            Col::I16(v) => Scalar::I16(v[0]),
            Col::F16(v) => Scalar::F16(v[0]),
            Col::BF16(v) => Scalar::BF16(v[0]),
        }
    }
}

/// An operand: a column of the tile or one value broadcast over it.
#[derive(Clone, Copy)]
enum Src<'a, T> {
    Col(&'a [T]),
    Uni(T),
}

/// A branch-free `c ? a : b` that vectorizes. For two loaded columns LLVM turns a plain
/// `if` into a load from a selected address, which neither vectorizes nor predicts well;
/// a bit mask does not have that problem.
trait Pick: Copy {
    fn pick(c: bool, a: Self, b: Self) -> Self;
}

macro_rules! pick_bits {
    ($($t:ty: $u:ty),*) => {
        $(
            impl Pick for $t {
                #[inline(always)]
                fn pick(c: bool, a: Self, b: Self) -> Self {
                    let m = (c as $u).wrapping_neg();
                    <$t>::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
                }
            }
        )*
    };
}
pick_bits!(f32: u32, f64: u64, f16: u16, bf16: u16);

macro_rules! pick_int {
    ($($t:ty),*) => {
        $(
            impl Pick for $t {
                #[inline(always)]
                fn pick(c: bool, a: Self, b: Self) -> Self {
                    let m = (c as $t).wrapping_neg();
                    (a & m) | (b & !m)
                }
            }
        )*
    };
}
pick_int!(i32, i64, u8, u16, u32, u64, i8, i16);

impl Pick for bool {
    #[inline(always)]
    fn pick(c: bool, a: Self, b: Self) -> Self {
        (c & a) | (!c & b)
    }
}

macro_rules! pick_complex {
    ($($t:ident),*) => {
        $(
            impl Pick for $t {
                #[inline(always)]
                fn pick(c: bool, a: Self, b: Self) -> Self {
                    $t::new(Pick::pick(c, a.re, b.re), Pick::pick(c, a.im, b.im))
                }
            }
        )*
    };
}
pick_complex!(Complex32, Complex64);

/// The element types: access to their column, buffer and scalar variants, and the NumPy
/// `astype` conversions between them (through [`Wide`], which folds away once inlined).
trait Elem: Pick + Default + PartialEq + 'static {
    fn wrap(v: Vec<Self>) -> Col;
    fn col(c: &Col) -> &[Self];
    fn input<'a>(s: &Slice<'a>) -> &'a [Self];
    fn output(s: SliceMut<'_>) -> &mut [Self];
    fn from_scalar(s: Scalar) -> Self;
    fn wide(self) -> Wide;
    fn from_wide(w: Wide) -> Self;
    #[inline(always)]
    fn cast<D: Elem>(self) -> D {
        D::from_wide(self.wide())
    }
}

macro_rules! elem {
    ($t:ty, $v:ident, |$x:ident| $wide:expr, $to:ident) => {
        impl Elem for $t {
            fn wrap(v: Vec<Self>) -> Col {
                Col::$v(v)
            }
            #[inline]
            fn col(c: &Col) -> &[Self] {
                match c {
                    Col::$v(v) => v,
                    _ => unreachable!("column dtype mismatch (validated)"),
                }
            }
            #[inline]
            fn input<'a>(s: &Slice<'a>) -> &'a [Self] {
                match s {
                    Slice::$v(v) => v,
                    _ => unreachable!("input dtype mismatch (checked)"),
                }
            }
            #[inline]
            fn output(s: SliceMut<'_>) -> &mut [Self] {
                match s {
                    SliceMut::$v(v) => v,
                    _ => unreachable!("output dtype mismatch (checked)"),
                }
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::$v(x) => x,
                    _ => unreachable!("scalar dtype mismatch (validated)"),
                }
            }
            #[inline(always)]
            fn wide(self) -> Wide {
                let $x = self;
                $wide
            }
            #[inline(always)]
            fn from_wide(w: Wide) -> Self {
                w.$to()
            }
        }
    };
}

elem!(bool, Bool, |x| Wide::B(x), to_bool);
elem!(i32, I32, |x| Wide::I(x as i64), to_i32);
elem!(i64, I64, |x| Wide::I(x), to_i64);
elem!(f32, F32, |x| Wide::F(x), to_f32);
elem!(f64, F64, |x| Wide::D(x), to_f64);
elem!(Complex32, C64, |x| Wide::C(x), to_c64);
elem!(Complex64, C128, |x| Wide::Z(x), to_c128);
elem!(u8, U8, |x| Wide::U(x as u64), to_u8);
elem!(u16, U16, |x| Wide::U(x as u64), to_u16);
elem!(u32, U32, |x| Wide::U(x as u64), to_u32);
elem!(u64, U64, |x| Wide::U(x), to_u64);
elem!(i8, I8, |x| Wide::I(x as i64), to_i8);
elem!(i16, I16, |x| Wide::I(x as i64), to_i16);
elem!(f16, F16, |x| Wide::F(x.to_f32()), to_f16);
elem!(bf16, BF16, |x| Wide::F(x.to_f32()), to_bf16);

/// The typed destination of an op.
#[inline]
fn out<T: Elem>(o: SliceMut<'_>) -> &mut [T] {
    T::output(o)
}

/// Elements `off .. off + n` of `s`.
fn sub<'s>(s: &'s mut SliceMut<'_>, off: usize, n: usize) -> SliceMut<'s> {
    match s {
        SliceMut::Bool(v) => SliceMut::Bool(&mut v[off..off + n]),
        SliceMut::I32(v) => SliceMut::I32(&mut v[off..off + n]),
        SliceMut::I64(v) => SliceMut::I64(&mut v[off..off + n]),
        SliceMut::F32(v) => SliceMut::F32(&mut v[off..off + n]),
        SliceMut::F64(v) => SliceMut::F64(&mut v[off..off + n]),
        SliceMut::C64(v) => SliceMut::C64(&mut v[off..off + n]),
        SliceMut::C128(v) => SliceMut::C128(&mut v[off..off + n]),
        SliceMut::U8(v) => SliceMut::U8(&mut v[off..off + n]),
        SliceMut::U16(v) => SliceMut::U16(&mut v[off..off + n]),
        SliceMut::U32(v) => SliceMut::U32(&mut v[off..off + n]),
        SliceMut::U64(v) => SliceMut::U64(&mut v[off..off + n]),
        SliceMut::I8(v) => SliceMut::I8(&mut v[off..off + n]),
        SliceMut::I16(v) => SliceMut::I16(&mut v[off..off + n]),
        SliceMut::F16(v) => SliceMut::F16(&mut v[off..off + n]),
        SliceMut::BF16(v) => SliceMut::BF16(&mut v[off..off + n]),
    }
}

/// The integer element types.
trait Int: Elem + Ord {
    fn wadd(self, b: Self) -> Self;
    fn wsub(self, b: Self) -> Self;
    fn wmul(self, b: Self) -> Self;
    fn wneg(self) -> Self;
    fn wabs(self) -> Self;
    fn sign(self) -> Self;
    fn floordiv(self, b: Self) -> Self;
    fn rem(self, b: Self) -> Self;
    fn pow(self, b: Self) -> Self;
    fn idx_div(self, b: Self) -> Self;
    fn idx_mod(self, b: Self) -> Self;
}

/// `Int` for `$t`; `abs` and `sign` are given as functions of `x` (unsigned types have
/// no negative values).
macro_rules! int {
    ($t:ident, $fd:ident, $rem:ident, $pow:ident, |$x:ident| $abs:expr, $sign:expr) => {
        impl Int for $t {
            #[inline(always)]
            fn wadd(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline(always)]
            fn wsub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            #[inline(always)]
            fn wmul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            #[inline(always)]
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn wabs(self) -> Self {
                let $x = self;
                $abs
            }
            #[inline(always)]
            fn sign(self) -> Self {
                let $x = self;
                $sign
            }
            #[inline(always)]
            fn floordiv(self, b: Self) -> Self {
                sem::$fd(self, b)
            }
            #[inline(always)]
            fn rem(self, b: Self) -> Self {
                sem::$rem(self, b)
            }
            #[inline(always)]
            fn pow(self, b: Self) -> Self {
                sem::$pow(self, b)
            }
            #[inline(always)]
            fn idx_div(self, b: Self) -> Self {
                self.checked_div(b).unwrap_or(0)
            }
            #[inline(always)]
            fn idx_mod(self, b: Self) -> Self {
                self.checked_rem(b).unwrap_or(0)
            }
        }
    };
}
int!(
    i32,
    floor_divide_i32,
    remainder_i32,
    power_i32,
    |x| x.wrapping_abs(),
    x.signum()
);
int!(
    i64,
    floor_divide_i64,
    remainder_i64,
    power_i64,
    |x| x.wrapping_abs(),
    x.signum()
);
int!(
    i8,
    floor_divide_i8,
    remainder_i8,
    power_i8,
    |x| x.wrapping_abs(),
    x.signum()
);
int!(
    i16,
    floor_divide_i16,
    remainder_i16,
    power_i16,
    |x| x.wrapping_abs(),
    x.signum()
);
int!(
    u8,
    floor_divide_u8,
    remainder_u8,
    power_u8,
    |x| x,
    (x > 0) as u8
);
int!(
    u16,
    floor_divide_u16,
    remainder_u16,
    power_u16,
    |x| x,
    (x > 0) as u16
);
int!(
    u32,
    floor_divide_u32,
    remainder_u32,
    power_u32,
    |x| x,
    (x > 0) as u32
);
int!(
    u64,
    floor_divide_u64,
    remainder_u64,
    power_u64,
    |x| x,
    (x > 0) as u64
);

/// The real float element types.
trait Real:
    Elem
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    type C: Elem;
    const ZERO: Self;
    const ONE: Self;
    // The transcendental functions, vectorized over slices (`crate::vmath`).
    const EXP: VFn<Self>;
    const EXPM1: VFn<Self>;
    const LN: VFn<Self>;
    const LN_1P: VFn<Self>;
    const LOG2: VFn<Self>;
    const LOG10: VFn<Self>;
    const SIN: VFn<Self>;
    const COS: VFn<Self>;
    const TAN: VFn<Self>;
    const ASIN: VFn<Self>;
    const ACOS: VFn<Self>;
    const ATAN: VFn<Self>;
    const SINH: VFn<Self>;
    const COSH: VFn<Self>;
    const TANH: VFn<Self>;
    const ATAN2: VFn2<Self>;
    /// `hypot` over a column.
    const HYPOT: VFn2<Self>;
    fn sqrt(self) -> Self;
    const FLOOR: VFn<Self>;
    const CEIL: VFn<Self>;
    const TRUNC: VFn<Self>;
    const RINT: VFn<Self>;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_finite(self) -> bool;
    fn powf(self, b: Self) -> Self;
    fn atan2(self, b: Self) -> Self;
    fn floordiv(self, b: Self) -> Self;
    fn rem(self, b: Self) -> Self;
    fn maximum(self, b: Self) -> Self;
    fn minimum(self, b: Self) -> Self;
    fn complex(self, im: Self) -> Self::C;
}

macro_rules! forward {
    ($t:ident; $($m:ident),*) => {
        $(
            #[inline(always)]
            fn $m(self) -> Self {
                $t::$m(self)
            }
        )*
    };
}

/// A function of `crate::vmath`: `out[i] = f(x[i])`.
type VFn<T> = fn(&[T], &mut [T]);
/// A function of `crate::vmath`: `out[i] = f(y[i], x[i])`.
type VFn2<T> = fn(&[T], &[T], &mut [T]);

macro_rules! vmath_consts {
    ($t:ident; $($c:ident = $f:ident),* ; $atan2:ident, $hypot:ident) => {
        $(const $c: VFn<$t> = vmath::$f;)*
        const ATAN2: VFn2<$t> = vmath::$atan2;
        const HYPOT: VFn2<$t> = vmath::$hypot;
    };
    (f32) => {
        vmath_consts!(f32; EXP = exp_f32, EXPM1 = expm1_f32, LN = log_f32, LN_1P = log1p_f32,
            LOG2 = log2_f32, LOG10 = log10_f32, SIN = sin_f32, COS = cos_f32, TAN = tan_f32,
            ASIN = asin_f32, ACOS = acos_f32, ATAN = atan_f32, SINH = sinh_f32,
            COSH = cosh_f32, TANH = tanh_f32, FLOOR = floor_f32, CEIL = ceil_f32,
            TRUNC = trunc_f32, RINT = rint_f32; atan2_f32, hypot_f32);
    };
    (f64) => {
        vmath_consts!(f64; EXP = exp_f64, EXPM1 = expm1_f64, LN = log_f64, LN_1P = log1p_f64,
            LOG2 = log2_f64, LOG10 = log10_f64, SIN = sin_f64, COS = cos_f64, TAN = tan_f64,
            ASIN = asin_f64, ACOS = acos_f64, ATAN = atan_f64, SINH = sinh_f64,
            COSH = cosh_f64, TANH = tanh_f64, FLOOR = floor_f64, CEIL = ceil_f64,
            TRUNC = trunc_f64, RINT = rint_f64; atan2_f64, hypot_f64);
    };
}

macro_rules! real {
    ($t:ident, $c:ident, $fd:ident, $rem:ident, $max:ident, $min:ident, $sign:ident) => {
        impl Real for $t {
            type C = $c;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            forward!($t; sqrt, abs);
            vmath_consts!($t);
            #[inline(always)]
            fn sign(self) -> Self {
                sem::$sign(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            #[inline(always)]
            fn is_infinite(self) -> bool {
                $t::is_infinite(self)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            #[inline(always)]
            fn powf(self, b: Self) -> Self {
                $t::powf(self, b)
            }
            #[inline(always)]
            fn atan2(self, b: Self) -> Self {
                $t::atan2(self, b)
            }
            #[inline(always)]
            fn floordiv(self, b: Self) -> Self {
                sem::$fd(self, b)
            }
            #[inline(always)]
            fn rem(self, b: Self) -> Self {
                sem::$rem(self, b)
            }
            #[inline(always)]
            fn maximum(self, b: Self) -> Self {
                sem::$max(self, b)
            }
            #[inline(always)]
            fn minimum(self, b: Self) -> Self {
                sem::$min(self, b)
            }
            #[inline(always)]
            fn complex(self, im: Self) -> $c {
                $c::new(self, im)
            }
        }
    };
}
real!(
    f32,
    Complex32,
    floor_divide_f32,
    remainder_f32,
    maximum_f32,
    minimum_f32,
    sign_f32
);
real!(
    f64,
    Complex64,
    floor_divide_f64,
    remainder_f64,
    maximum_f64,
    minimum_f64,
    sign_f64
);

/// The complex element types.
trait Cplx:
    Elem + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Neg<Output = Self>
{
    type R: Elem;
    fn ln(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn tanh(self) -> Self;
    fn conj(self) -> Self;
    fn cdiv(self, b: Self) -> Self;
    fn cpow(self, b: Self) -> Self;
    fn recip(self) -> Self;
    fn sign(self) -> Self;
    fn expm1(self) -> Self;
    fn log1p(self) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn re(self) -> Self::R;
    fn im(self) -> Self::R;
    fn abs(self) -> Self::R;
    fn angle(self) -> Self::R;
    fn is_nan(self) -> bool;
    fn is_inf(self) -> bool;
    fn is_finite(self) -> bool;
    /// C99 `csqrt` (NumPy's special cases for infinite and NaN parts).
    fn csqrt(self) -> Self;
    /// C99 `cexp` (NumPy's special cases).
    fn exp(self) -> Self;
    /// `out[i] = exp(a[i])` over a column (vectorized where the type has a fast path).
    fn exp_col(a: &[Self], out: &mut [Self]);
    /// NumPy `abs` of a column (`hypot(re, im)`).
    fn abs_col(a: &[Self], out: &mut [Self::R]);
    /// NumPy `arcsin` (Kahan; correct sides of the branch cuts).
    fn asin(self) -> Self;
    /// NumPy `arccos` (Kahan; correct sides of the branch cuts).
    fn acos(self) -> Self;
}

macro_rules! cplx {
    ($c:ident, $r:ident, $m:ident) => {
        impl Cplx for $c {
            type R = $r;
            cplx!(@cmath $m; ln = log, sin, cos, tan, atan, sinh, cosh, tanh, csqrt = sqrt,
                exp, asin, acos, expm1, log1p);
            #[inline(always)]
            fn conj(self) -> Self {
                $c::conj(&self)
            }
            #[inline(always)]
            fn re(self) -> $r {
                self.re
            }
            #[inline(always)]
            fn im(self) -> $r {
                self.im
            }
            cplx!(@sem $m);
        }
    };
    (@cmath $m:ident; $($f:ident $(= $g:ident)?),*) => {
        $(
            #[inline(always)]
            fn $f(self) -> Self {
                cplx!(@call $m, $f $(, $g)?)(self)
            }
        )*
    };
    (@call $m:ident, $f:ident) => { cmath::$m::$f };
    (@call $m:ident, $f:ident, $g:ident) => { cmath::$m::$g };
    (@sem c64) => {
        fn exp_col(a: &[Self], out: &mut [Self]) {
            crate::vmath::exp_c32(a, out, cmath::c64::exp)
        }
        fn abs_col(a: &[Self], out: &mut [f32]) {
            crate::vmath::abs_c32(a, out)
        }
        cplx!(@fns divide_c64, power_c64, reciprocal_c64, sign_c64, log2_c64, log10_c64,
            abs_c64, angle_c64, isnan_c64, isinf_c64, isfinite_c64);
    };
    (@sem c128) => {
        fn exp_col(a: &[Self], out: &mut [Self]) {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = cmath::c128::exp(x);
            }
        }
        fn abs_col(a: &[Self], out: &mut [f64]) {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = x.abs();
            }
        }
        cplx!(@fns divide_c128, power_c128, reciprocal_c128, sign_c128, log2_c128,
            log10_c128, abs_c128, angle_c128, isnan_c128, isinf_c128, isfinite_c128);
    };
    (@fns $div:ident, $pow:ident, $recip:ident, $sign:ident, $log2:ident, $log10:ident,
        $abs:ident, $angle:ident, $isnan:ident, $isinf:ident, $isfinite:ident) => {
        #[inline(always)]
        fn cdiv(self, b: Self) -> Self {
            sem::$div(self, b)
        }
        #[inline(always)]
        fn cpow(self, b: Self) -> Self {
            sem::$pow(self, b)
        }
        #[inline(always)]
        fn recip(self) -> Self {
            sem::$recip(self)
        }
        #[inline(always)]
        fn sign(self) -> Self {
            sem::$sign(self)
        }
        #[inline(always)]
        fn log2(self) -> Self {
            sem::$log2(self)
        }
        #[inline(always)]
        fn log10(self) -> Self {
            sem::$log10(self)
        }
        #[inline(always)]
        fn abs(self) -> <Self as Cplx>::R {
            sem::$abs(self)
        }
        #[inline(always)]
        fn angle(self) -> <Self as Cplx>::R {
            sem::$angle(self)
        }
        #[inline(always)]
        fn is_nan(self) -> bool {
            sem::$isnan(self)
        }
        #[inline(always)]
        fn is_inf(self) -> bool {
            sem::$isinf(self)
        }
        #[inline(always)]
        fn is_finite(self) -> bool {
            sem::$isfinite(self)
        }
    };
}
cplx!(Complex32, f32, c64);
cplx!(Complex64, f64, c128);

// ---------------------------------------------------------------------------------------
// Loops
// ---------------------------------------------------------------------------------------

#[inline(always)]
fn map1<A: Copy, R: Copy>(a: Src<'_, A>, out: &mut [R], f: impl Fn(A) -> R) {
    match a {
        Src::Col(a) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x);
            }
        }
        Src::Uni(x) => out.fill(f(x)),
    }
}

#[inline(always)]
fn map2<A: Copy, B: Copy, R: Copy>(
    a: Src<'_, A>,
    b: Src<'_, B>,
    out: &mut [R],
    f: impl Fn(A, B) -> R,
) {
    match (a, b) {
        (Src::Col(a), Src::Col(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Src::Col(a), Src::Uni(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        (Src::Uni(x), Src::Col(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        (Src::Uni(x), Src::Uni(y)) => out.fill(f(x, y)),
    }
}

/// `map1` for a function of `crate::vmath` (over slices). A uniform operand goes through
/// the same function, so that it gives the same bits as a column.
fn vmap1<T: Copy + Default>(a: Src<'_, T>, out: &mut [T], f: VFn<T>) {
    match a {
        Src::Col(a) => f(a, out),
        Src::Uni(x) => {
            let mut r = [T::default()];
            f(&[x], &mut r);
            out.fill(r[0]);
        }
    }
}

/// `map2` for a function of `crate::vmath`; a uniform operand is broadcast into a short
/// buffer.
fn vmap2<T: Copy + Default>(a: Src<'_, T>, b: Src<'_, T>, out: &mut [T], f: VFn2<T>) {
    const CHUNK: usize = 256;
    let mut buf = [T::default(); CHUNK];
    match (a, b) {
        (Src::Col(a), Src::Col(b)) => f(a, b, out),
        (Src::Uni(x), Src::Uni(y)) => {
            let mut r = [T::default()];
            f(&[x], &[y], &mut r);
            out.fill(r[0]);
        }
        (Src::Col(a), Src::Uni(y)) => {
            buf.fill(y);
            for (o, a) in out.chunks_mut(CHUNK).zip(a.chunks(CHUNK)) {
                f(a, &buf[..o.len()], o);
            }
        }
        (Src::Uni(x), Src::Col(b)) => {
            buf.fill(x);
            for (o, b) in out.chunks_mut(CHUNK).zip(b.chunks(CHUNK)) {
                f(&buf[..o.len()], b, o);
            }
        }
    }
}

/// Defines `fn $name`, which runs `$body` compiled for AVX-512F or AVX2 when the CPU has
/// it, else for the baseline target. `$body` is `#[inline(always)]`, so the tile loops of
/// `map1`/`map2`/`select` inside it vectorize at that width: the baseline build has 128-bit
/// vectors only, and simple tile ops were a fifth of a transcendental-heavy chain.
/// Only the instruction set changes: no fast-math, no contraction, the same results.
macro_rules! simd_dispatch {
    (fn $name:ident<$T:ident: $B:ident $(+ $B2:ident)*>($($a:ident: $t:ty),*) $(-> $r:ty)? = $body:ident) => {
        fn $name<$T: $B $(+ $B2)*>($($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512<$T: $B $(+ $B2)*>($($a: $t),*) $(-> $r)? {
                    $body::<$T>($($a),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2<$T: $B $(+ $B2)*>($($a: $t),*) $(-> $r)? {
                    $body::<$T>($($a),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: `avx512` only requires the AVX-512F target feature, which the
                    // CPU has (checked just above).
                    return unsafe { avx512::<$T>($($a),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: `avx2` only requires the AVX2 target feature, which the CPU
                    // has (checked just above).
                    return unsafe { avx2::<$T>($($a),*) };
                }
            }
            $body::<$T>($($a),*)
        }
    };
}

simd_dispatch!(fn compare<T: Elem + PartialOrd>(op: BinaryOp, a: Src<'_, T>, b: Src<'_, T>, o: SliceMut<'_>) = compare_body);
simd_dispatch!(fn select<T: Pick>(c: Src<'_, bool>, a: Src<'_, T>, b: Src<'_, T>, out: &mut [T]) = select_body);
simd_dispatch!(fn unary_int<T: Int>(op: UnaryOp, a: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> = unary_int_body);
simd_dispatch!(fn unary_float<T: Real>(op: UnaryOp, a: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> = unary_float_body);
simd_dispatch!(fn binary_int<T: Int>(op: BinaryOp, a: Src<'_, T>, b: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> = binary_int_body);
simd_dispatch!(fn binary_float<T: Real>(op: BinaryOp, a: Src<'_, T>, b: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> = binary_float_body);
simd_dispatch!(fn binary_complex<T: Cplx>(op: BinaryOp, a: Src<'_, T>, b: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> = binary_complex_body);
simd_dispatch!(fn mul_add2<T: Real>(sub: bool, a: &[T], b: &[T], c: &[T], d: &[T], o: &mut [T]) = mul_add2_body);
simd_dispatch!(fn mul_add1<T: Real>(sub: bool, first: bool, a: &[T], b: &[T], c: Src<'_, T>, o: &mut [T]) = mul_add1_body);
simd_dispatch!(fn cast_from<T: Elem>(a: Src<'_, T>, dst: DType, o: SliceMut<'_>) = cast_from_body);

/// `a * b ± c * d` elementwise (each product rounded, then the sum).
#[inline(always)]
fn mul_add2_body<T: Real>(sub: bool, a: &[T], b: &[T], c: &[T], d: &[T], o: &mut [T]) {
    let n = o.len();
    let (a, b, c, d) = (&a[..n], &b[..n], &c[..n], &d[..n]);
    if sub {
        for j in 0..n {
            o[j] = a[j] * b[j] - c[j] * d[j];
        }
    } else {
        for j in 0..n {
            o[j] = a[j] * b[j] + c[j] * d[j];
        }
    }
}

/// `a * b ± c` (`first`) or `c ± a * b` elementwise (the product rounded, then the sum).
#[inline(always)]
fn mul_add1_body<T: Real>(sub: bool, first: bool, a: &[T], b: &[T], c: Src<'_, T>, o: &mut [T]) {
    #[inline(always)]
    fn each<T: Real>(a: &[T], b: &[T], c: Src<'_, T>, o: &mut [T], f: impl Fn(T, T) -> T) {
        let ab = a.iter().zip(b).map(|(&x, &y)| x * y);
        match c {
            Src::Col(c) => {
                for ((o, m), &c) in o.iter_mut().zip(ab).zip(c) {
                    *o = f(m, c);
                }
            }
            Src::Uni(c) => {
                for (o, m) in o.iter_mut().zip(ab) {
                    *o = f(m, c);
                }
            }
        }
    }
    match (first, sub) {
        (true, false) => each(a, b, c, o, |m, c| m + c),
        (true, true) => each(a, b, c, o, |m, c| m - c),
        (false, false) => each(a, b, c, o, |m, c| c + m),
        (false, true) => each(a, b, c, o, |m, c| c - m),
    }
}

#[inline]
fn copy_src<T: Copy>(a: Src<'_, T>, out: &mut [T]) {
    match a {
        Src::Col(a) => out.copy_from_slice(&a[..out.len()]),
        Src::Uni(x) => out.fill(x),
    }
}

#[inline(always)]
fn select_body<T: Pick>(c: Src<'_, bool>, a: Src<'_, T>, b: Src<'_, T>, out: &mut [T]) {
    let c = match c {
        Src::Uni(c) => return copy_src(if c { a } else { b }, out),
        Src::Col(c) => c,
    };
    match (a, b) {
        (Src::Col(a), Src::Col(b)) => {
            for (((o, &c), &x), &y) in out.iter_mut().zip(c).zip(a).zip(b) {
                *o = T::pick(c, x, y);
            }
        }
        (Src::Col(a), Src::Uni(y)) => {
            for ((o, &c), &x) in out.iter_mut().zip(c).zip(a) {
                *o = T::pick(c, x, y);
            }
        }
        (Src::Uni(x), Src::Col(b)) => {
            for ((o, &c), &y) in out.iter_mut().zip(c).zip(b) {
                *o = T::pick(c, x, y);
            }
        }
        (Src::Uni(x), Src::Uni(y)) => {
            for (o, &c) in out.iter_mut().zip(c) {
                *o = T::pick(c, x, y);
            }
        }
    }
}

/// Gathers `inp[idx]` where `guard` holds (zero elsewhere). Returns the first offending
/// index when a load outside `inp` would happen.
///
/// The loops are branch-free: every index is clamped into `inp` (so that no bounds check
/// can fail) and a separate flag records whether any real load was out of bounds.
fn gather<T: Elem>(
    inp: &[T],
    idx: Src<'_, i64>,
    guard: Option<Src<'_, bool>>,
    out: &mut [T],
) -> Result<(), i64> {
    let zero = T::default();
    let len = inp.len() as u64;
    let in_bounds = |ix: i64| (ix as u64) < len;
    let first_bad = |ix: &[i64], g: Option<&[bool]>| {
        let bad = ix
            .iter()
            .enumerate()
            .find(|&(j, &i)| g.is_none_or(|g| g[j]) && !in_bounds(i));
        Err(bad.map_or(-1, |(_, &i)| i))
    };
    let guard = match guard {
        Some(Src::Uni(false)) => {
            out.fill(zero);
            return Ok(());
        }
        Some(Src::Uni(true)) | None => None,
        Some(Src::Col(g)) => Some(g),
    };
    let Some(last) = inp.len().checked_sub(1) else {
        // An empty input: any load at all is out of bounds.
        return match (guard, idx) {
            (None, Src::Uni(ix)) => Err(ix),
            (None, Src::Col(ix)) => first_bad(ix, None),
            (Some(g), Src::Uni(ix)) if g.iter().any(|&g| g) => Err(ix),
            (Some(g), Src::Col(ix)) if g.iter().any(|&g| g) => first_bad(ix, Some(g)),
            _ => {
                out.fill(zero);
                Ok(())
            }
        };
    };
    let at = |ix: i64| inp[(ix as u64).min(last as u64) as usize];
    match (guard, idx) {
        (None, Src::Uni(ix)) => {
            if !in_bounds(ix) {
                return Err(ix);
            }
            out.fill(at(ix));
        }
        (None, Src::Col(ix)) => {
            let mut bad = false;
            for (o, &i) in out.iter_mut().zip(ix) {
                bad |= !in_bounds(i);
                *o = at(i);
            }
            if bad {
                return first_bad(ix, None);
            }
        }
        (Some(g), Src::Uni(ix)) => {
            if !in_bounds(ix) && g.iter().any(|&g| g) {
                return Err(ix);
            }
            let x = at(ix);
            for (o, &g) in out.iter_mut().zip(g) {
                *o = if g { x } else { zero };
            }
        }
        (Some(g), Src::Col(ix)) => {
            let mut bad = false;
            for ((o, &g), &i) in out.iter_mut().zip(g).zip(ix) {
                bad |= g & !in_bounds(i);
                let x = at(i);
                *o = if g { x } else { zero };
            }
            if bad {
                return first_bad(ix, Some(g));
            }
        }
    }
    Ok(())
}

/// Fills `out` with component `k` of the multi-index of `i0, i0 + 1, ...` where the axis
/// has extent `dim` and the axes after it `inner` elements in all.
fn fill_axis(out: &mut [i64], i0: usize, dim: usize, inner: usize) {
    let n = out.len();
    let mut a = (i0 / inner) % dim;
    let mut j = 0;
    if inner == 1 {
        // Runs of 0, 1, ..., dim - 1.
        while j < n {
            let run = (dim - a).min(n - j);
            for (t, o) in out[j..j + run].iter_mut().enumerate() {
                *o = (a + t) as i64;
            }
            j += run;
            a = 0;
        }
        return;
    }
    // Runs of `inner` equal values.
    let mut r = i0 % inner;
    while j < n {
        let run = (inner - r).min(n - j);
        out[j..j + run].fill(a as i64);
        j += run;
        r = 0;
        a += 1;
        if a == dim {
            a = 0;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Ops per dtype family
// ---------------------------------------------------------------------------------------

fn unary_bool(op: UnaryOp, a: Src<'_, bool>, o: SliceMut<'_>) -> Result<(), IrError> {
    use UnaryOp::*;
    let o = out::<bool>(o);
    match op {
        Not => map1(a, o, |x| !x),
        Conj => map1(a, o, |x| x),
        IsNan | IsInf => map1(a, o, |_| false),
        IsFinite => map1(a, o, |_| true),
        _ => return Err(unsupported(op.name(), DType::Bool)),
    }
    Ok(())
}

#[inline(always)]
fn unary_int_body<T: Int>(op: UnaryOp, a: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> {
    use UnaryOp::*;
    match op {
        Neg => map1(a, out(o), T::wneg),
        Abs => map1(a, out(o), T::wabs),
        Sign => map1(a, out(o), T::sign),
        Square => map1(a, out(o), |x: T| x.wmul(x)),
        Real | Conj => map1(a, out(o), |x: T| x),
        Imag => map1(a, out(o), |_: T| T::default()),
        IsNan | IsInf => map1(a, out(o), |_: T| false),
        IsFinite => map1(a, out(o), |_: T| true),
        _ => return Err(unsupported(op.name(), DType::I64)),
    }
    Ok(())
}

#[inline(always)]
fn unary_float_body<T: Real>(op: UnaryOp, a: Src<'_, T>, o: SliceMut<'_>) -> Result<(), IrError> {
    use UnaryOp::*;
    match op {
        Neg => map1(a, out(o), |x: T| -x),
        Abs => map1(a, out(o), T::abs),
        Sqrt => map1(a, out(o), T::sqrt),
        Rsqrt => map1(a, out(o), |x: T| T::ONE / x.sqrt()),
        Exp => vmap1(a, out(o), T::EXP),
        Expm1 => vmap1(a, out(o), T::EXPM1),
        Log => vmap1(a, out(o), T::LN),
        Log1p => vmap1(a, out(o), T::LN_1P),
        Log2 => vmap1(a, out(o), T::LOG2),
        Log10 => vmap1(a, out(o), T::LOG10),
        Sin => vmap1(a, out(o), T::SIN),
        Cos => vmap1(a, out(o), T::COS),
        Tan => vmap1(a, out(o), T::TAN),
        Asin => vmap1(a, out(o), T::ASIN),
        Acos => vmap1(a, out(o), T::ACOS),
        Atan => vmap1(a, out(o), T::ATAN),
        Sinh => vmap1(a, out(o), T::SINH),
        Cosh => vmap1(a, out(o), T::COSH),
        Tanh => vmap1(a, out(o), T::TANH),
        Floor => vmap1(a, out(o), T::FLOOR),
        Ceil => vmap1(a, out(o), T::CEIL),
        Round => vmap1(a, out(o), T::RINT),
        Trunc => vmap1(a, out(o), T::TRUNC),
        Sign => map1(a, out(o), T::sign),
        Square => map1(a, out(o), |x: T| x * x),
        Reciprocal => map1(a, out(o), |x: T| T::ONE / x),
        Real | Conj => map1(a, out(o), |x: T| x),
        Imag => map1(a, out(o), |_: T| T::ZERO),
        Angle => map1(a, out(o), |x: T| T::ZERO.atan2(x)),
        IsNan => map1(a, out(o), T::is_nan),
        IsInf => map1(a, out(o), T::is_infinite),
        IsFinite => map1(a, out(o), T::is_finite),
        Not => return Err(unsupported(op.name(), DType::F64)),
    }
    Ok(())
}

fn unary_complex<C: Cplx>(op: UnaryOp, a: Src<'_, C>, o: SliceMut<'_>) -> Result<(), IrError> {
    use UnaryOp::*;
    match op {
        Neg => map1(a, out(o), |x: C| -x),
        Abs => match a {
            Src::Col(a) => C::abs_col(a, out(o)),
            Src::Uni(x) => out(o).fill(x.abs()),
        },
        Sqrt => map1(a, out(o), C::csqrt),
        Rsqrt => map1(a, out(o), |x: C| x.csqrt().recip()),
        Exp => match a {
            Src::Col(a) => C::exp_col(a, out(o)),
            Src::Uni(x) => out(o).fill(x.exp()),
        },
        Expm1 => map1(a, out(o), C::expm1),
        Log => map1(a, out(o), C::ln),
        Log1p => map1(a, out(o), C::log1p),
        Log2 => map1(a, out(o), C::log2),
        Log10 => map1(a, out(o), C::log10),
        Sin => map1(a, out(o), C::sin),
        Cos => map1(a, out(o), C::cos),
        Tan => map1(a, out(o), C::tan),
        Asin => map1(a, out(o), C::asin),
        Acos => map1(a, out(o), C::acos),
        Atan => map1(a, out(o), C::atan),
        Sinh => map1(a, out(o), C::sinh),
        Cosh => map1(a, out(o), C::cosh),
        Tanh => map1(a, out(o), C::tanh),
        Sign => map1(a, out(o), C::sign),
        Square => map1(a, out(o), |x: C| x * x),
        Reciprocal => map1(a, out(o), C::recip),
        Real => map1(a, out(o), C::re),
        Imag => map1(a, out(o), C::im),
        Conj => map1(a, out(o), C::conj),
        Angle => map1(a, out(o), C::angle),
        IsNan => map1(a, out(o), C::is_nan),
        IsInf => map1(a, out(o), C::is_inf),
        IsFinite => map1(a, out(o), C::is_finite),
        Not | Floor | Ceil | Round | Trunc => return Err(unsupported(op.name(), DType::C128)),
    }
    Ok(())
}

/// The comparisons, shared by every ordered dtype (`Eq`/`Ne` also by complex).
#[inline(always)]
fn compare_body<T: Elem + PartialOrd>(op: BinaryOp, a: Src<'_, T>, b: Src<'_, T>, o: SliceMut<'_>) {
    use BinaryOp::*;
    let o = out::<bool>(o);
    match op {
        Eq => map2(a, b, o, |x, y| x == y),
        Ne => map2(a, b, o, |x, y| x != y),
        Lt => map2(a, b, o, |x, y| x < y),
        Le => map2(a, b, o, |x, y| x <= y),
        Gt => map2(a, b, o, |x, y| x > y),
        _ => map2(a, b, o, |x, y| x >= y),
    }
}

fn binary_bool(
    op: BinaryOp,
    a: Src<'_, bool>,
    b: Src<'_, bool>,
    o: SliceMut<'_>,
) -> Result<(), IrError> {
    use BinaryOp::*;
    if op.is_comparison() {
        compare(op, a, b, o);
        return Ok(());
    }
    let o = out::<bool>(o);
    match op {
        Add | Or => map2(a, b, o, |x, y| x | y),
        Mul | And => map2(a, b, o, |x, y| x & y),
        Sub | Xor => map2(a, b, o, |x, y| x ^ y),
        _ => return Err(unsupported(op.name(), DType::Bool)),
    }
    Ok(())
}

#[inline(always)]
fn binary_int_body<T: Int>(
    op: BinaryOp,
    a: Src<'_, T>,
    b: Src<'_, T>,
    o: SliceMut<'_>,
) -> Result<(), IrError> {
    use BinaryOp::*;
    if op.is_comparison() {
        compare(op, a, b, o);
        return Ok(());
    }
    let o = out::<T>(o);
    match op {
        Add => map2(a, b, o, T::wadd),
        Sub => map2(a, b, o, T::wsub),
        Mul => map2(a, b, o, T::wmul),
        Div | FloorDiv => map2(a, b, o, T::floordiv),
        Mod => map2(a, b, o, T::rem),
        Pow => map2(a, b, o, T::pow),
        Maximum => map2(a, b, o, T::max),
        Minimum => map2(a, b, o, T::min),
        IdxDiv => map2(a, b, o, T::idx_div),
        IdxMod => map2(a, b, o, T::idx_mod),
        _ => return Err(unsupported(op.name(), DType::I64)),
    }
    Ok(())
}

#[inline(always)]
fn binary_float_body<T: Real>(
    op: BinaryOp,
    a: Src<'_, T>,
    b: Src<'_, T>,
    o: SliceMut<'_>,
) -> Result<(), IrError> {
    use BinaryOp::*;
    if op.is_comparison() {
        compare(op, a, b, o);
        return Ok(());
    }
    if op == Complex {
        map2(a, b, out(o), T::complex);
        return Ok(());
    }
    let o = out::<T>(o);
    match op {
        Add => map2(a, b, o, |x, y| x + y),
        Sub => map2(a, b, o, |x, y| x - y),
        Mul => map2(a, b, o, |x, y| x * y),
        Div => map2(a, b, o, |x, y| x / y),
        FloorDiv => map2(a, b, o, T::floordiv),
        Mod => map2(a, b, o, T::rem),
        // small integer powers of a column (`u.powi(3)` of simulation steps) as products,
        // as NumPy squares for `** 2`; `x * x * x` is within 1.5 ulp of `pow(x, 3)`, with
        // the same special values (signed zeros, infinities, NaN)
        Pow if matches!(b, Src::Uni(e) if e == T::from_wide(Wide::D(2.0))) => {
            map1(a, o, |x: T| x * x)
        }
        Pow if matches!(b, Src::Uni(e) if e == T::from_wide(Wide::D(3.0))) => {
            map1(a, o, |x: T| x * x * x)
        }
        Pow => map2(a, b, o, T::powf),
        Atan2 => vmap2(a, b, o, T::ATAN2),
        Maximum => map2(a, b, o, T::maximum),
        Minimum => map2(a, b, o, T::minimum),
        Hypot => vmap2(a, b, o, T::HYPOT),
        _ => return Err(unsupported(op.name(), DType::F64)),
    }
    Ok(())
}

#[inline(always)]
fn binary_complex_body<C: Cplx>(
    op: BinaryOp,
    a: Src<'_, C>,
    b: Src<'_, C>,
    o: SliceMut<'_>,
) -> Result<(), IrError> {
    use BinaryOp::*;
    match op {
        Eq => map2(a, b, out(o), |x: C, y: C| x == y),
        Ne => map2(a, b, out(o), |x: C, y: C| x != y),
        Add => map2(a, b, out(o), |x: C, y: C| x + y),
        Sub => map2(a, b, out(o), |x: C, y: C| x - y),
        Mul => map2(a, b, out(o), |x: C, y: C| x * y),
        Div => map2(a, b, out(o), C::cdiv),
        Pow => map2(a, b, out(o), C::cpow),
        _ => return Err(unsupported(op.name(), DType::C128)),
    }
    Ok(())
}

/// `F16`/`BF16` to `F32` over a column (exact).
fn half_to_f32<H: Elem>(a: Src<'_, H>, o: &mut [f32])
where
    [H]: HalfFloatSliceExt,
{
    match a {
        Src::Col(a) => a.convert_to_f32_slice(o),
        Src::Uni(x) => o.fill(x.cast::<f32>()),
    }
}

/// `F32` to `F16`/`BF16` over a column (to nearest, ties to even).
fn f32_to_half<H: Elem>(a: Src<'_, f32>, o: &mut [H])
where
    [H]: HalfFloatSliceExt,
{
    match a {
        Src::Col(a) => o.convert_from_f32_slice(a),
        Src::Uni(x) => o.fill(x.cast::<H>()),
    }
}

#[inline(always)]
fn cast_from_body<S: Elem>(a: Src<'_, S>, dst: DType, o: SliceMut<'_>) {
    with_type!(dst, D => map1(a, out::<D>(o), |x: S| x.cast::<D>()))
}

// ---------------------------------------------------------------------------------------
// The evaluation plan
// ---------------------------------------------------------------------------------------

/// Where a value lives during the tile loop.
#[derive(Clone, Copy, Debug)]
enum Loc {
    /// Not needed by any store.
    Skip,
    /// Needed; not classified yet (after planning: not needed after all).
    Pending,
    /// The same for every element.
    Uni(Scalar),
    /// A column of `Ctx::slots`.
    Slot(usize),
    /// Computed straight into output `.0` (stored once, read by no other value).
    Direct(usize),
    /// Input buffer `.0` read at the linear index plus `.1` (a contiguous load).
    Input(usize, i64),
    /// Equal to an earlier value (`x * 1`, `x + 0`, `where` with a uniform condition, ...);
    /// only during planning.
    Alias(usize),
    /// The product `.0` (a root value), computed inside the one sum or difference that reads
    /// it (see [`fuse_products`]); no column.
    Fused(usize),
}

/// Value `v`, or the value it is an alias of (during planning).
fn root(locs: &[Loc], v: usize) -> usize {
    match locs[v] {
        Loc::Alias(r) => r,
        _ => v,
    }
}

/// The roots of the values value `v` reads in the tile loop: its operands and, for a
/// product computed inside it, that product's operands.
fn reads(kernel: &Kernel, locs: &[Loc], v: usize) -> smallvec::SmallVec<[usize; 6]> {
    let mut out = smallvec::SmallVec::new();
    for o in kernel.values[v].inst.operands() {
        let r = root(locs, o as usize);
        out.push(r);
        if let Loc::Fused(m) = locs[r] {
            out.extend(
                kernel.values[m]
                    .inst
                    .operands()
                    .map(|x| root(locs, x as usize)),
            );
        }
    }
    out
}

/// Multiply-adds: a float product (of two non-uniform values) read by nothing but one sum
/// or difference of its dtype, and not stored, becomes [`Loc::Fused`] and is computed inside
/// that sum in one pass, without a column in between. The product is rounded before the
/// sum, as in two passes: the results are the same bits. `computed`: the values computed
/// per tile, ascending.
fn fuse_products(kernel: &Kernel, locs: &mut [Loc], computed: &[usize]) {
    let root = |locs: &[Loc], o: u32| root(locs, o as usize);
    let float = |d: DType| matches!(d, DType::F32 | DType::F64);
    if !computed.iter().any(|&v| {
        float(kernel.values[v].dtype)
            && matches!(
                kernel.values[v].inst,
                Inst::Binary(BinaryOp::Add | BinaryOp::Sub, ..)
            )
    }) {
        return;
    }
    let mut uses = vec![0u32; kernel.values.len()];
    for &v in computed {
        for o in kernel.values[v].inst.operands() {
            uses[root(locs, o)] += 1;
        }
    }
    for s in &kernel.stores {
        uses[root(locs, s.value)] += 2;
    }
    for &v in computed {
        let val = kernel.values[v];
        let Inst::Binary(BinaryOp::Add | BinaryOp::Sub, p, q) = val.inst else {
            continue;
        };
        if !float(val.dtype) {
            continue;
        }
        for o in [p, q] {
            let r = root(locs, o);
            let Inst::Binary(BinaryOp::Mul, a, b) = kernel.values[r].inst else {
                continue;
            };
            let column = |x: u32| !matches!(locs[root(locs, x)], Loc::Uni(_) | Loc::Fused(_));
            if uses[r] == 1
                && kernel.values[r].dtype == val.dtype
                && matches!(locs[r], Loc::Pending)
                && column(a)
                && column(b)
            {
                locs[r] = Loc::Fused(r);
            }
        }
    }
}

/// The elements of one tile: `i0 .. i0 + n`.
#[derive(Clone, Copy)]
struct Tile {
    i0: usize,
    n: usize,
}

/// The per-tile program of the live computed values `computed` (ascending ids, roots of
/// `locs`' aliases): the values only one side of a `where` needs form a block right before
/// it, behind a [`Guard`] on its condition (nested for nested `where`s, as the CUDA
/// renderer's regions); values needed in several places stay at the lowest common region.
/// Without guarded sides it is `computed` itself. Iterative at any nesting depth.
fn guarded_program(
    kernel: &Kernel,
    locs: &[Loc],
    computed: &[usize],
    guards: &mut Vec<Guard>,
) -> Vec<usize> {
    let root = |v: usize| match locs[v] {
        Loc::Alias(r) => r,
        _ => v,
    };
    if !computed
        .iter()
        .any(|&v| matches!(kernel.values[v].inst, Inst::Where(..)))
    {
        return computed.to_vec();
    }
    let nv = kernel.values.len();
    let mut is_comp = vec![false; nv];
    for &v in computed {
        is_comp[v] = true;
    }
    // the region tree: (parent, depth); region 0 is "every element"
    let mut parent: Vec<(usize, u32)> = vec![(0, 0)];
    let mut sides: Vec<Option<(usize, usize)>> = vec![None; nv];
    let mut at: Vec<Option<usize>> = vec![None; nv];
    let join = |parent: &[(usize, u32)], a: Option<usize>, b: usize| -> usize {
        let Some(mut a) = a else { return b };
        let mut b = b;
        while a != b {
            if parent[a].1 >= parent[b].1 {
                a = parent[a].0;
            } else {
                b = parent[b].0;
            }
        }
        a
    };
    for st in &kernel.stores {
        let r = root(st.value as usize);
        if is_comp[r] {
            at[r] = Some(0);
        }
    }
    for &v in computed.iter().rev() {
        let Some(r) = at[v] else { continue };
        let put = |o: u32, region: usize, at: &mut Vec<Option<usize>>, parent: &[(usize, u32)]| {
            let o = root(o as usize);
            if is_comp[o] {
                at[o] = Some(join(parent, at[o], region));
            }
        };
        match kernel.values[v].inst {
            Inst::Where(c, a, b) => {
                put(c, r, &mut at, &parent);
                let depth = parent[r].1 + 1;
                parent.push((r, depth));
                parent.push((r, depth));
                let (rt, rf) = (parent.len() - 2, parent.len() - 1);
                sides[v] = Some((rt, rf));
                put(a, rt, &mut at, &parent);
                put(b, rf, &mut at, &parent);
            }
            inst => {
                for o in inst.operands() {
                    put(o, r, &mut at, &parent);
                }
            }
        }
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); parent.len()];
    for &v in computed {
        if let Some(r) = at[v] {
            members[r].push(v);
        }
    }
    // values per region subtree (children were created after their parents)
    let mut size: Vec<usize> = members.iter().map(|m| m.len()).collect();
    for r in (1..parent.len()).rev() {
        size[parent[r].0] += size[r];
    }
    struct Frame {
        region: usize,
        next: usize,
        side: u8,
        guard: Option<(usize, usize)>,
    }
    let mut out = Vec::with_capacity(computed.len() + 8);
    let mut stack = vec![Frame {
        region: 0,
        next: 0,
        side: 0,
        guard: None,
    }];
    while let Some(top) = stack.last_mut() {
        let Some(&v) = members[top.region].get(top.next) else {
            if let Some((g, start)) = top.guard {
                guards[g].len = out.len() - start;
            }
            stack.pop();
            continue;
        };
        match (sides[v], kernel.values[v].inst) {
            (Some((rt, rf)), Inst::Where(c, ..)) if top.side < 2 => {
                let want = top.side == 0;
                let side = if want { rt } else { rf };
                top.side += 1;
                if size[side] < GUARD_MIN {
                    // too small to guard: its values run unconditionally, in place
                    if size[side] > 0 {
                        stack.push(Frame {
                            region: side,
                            next: 0,
                            side: 0,
                            guard: None,
                        });
                    }
                    continue;
                }
                let g = guards.len();
                guards.push(Guard {
                    cond: root(c as usize),
                    want,
                    len: 0,
                });
                out.push(GUARD + g);
                let start = out.len();
                stack.push(Frame {
                    region: side,
                    next: 0,
                    side: 0,
                    guard: Some((g, start)),
                });
            }
            _ => {
                out.push(v);
                top.next += 1;
                top.side = 0;
            }
        }
    }
    out
}

/// Moves the cosine of each f32 value whose sine the program also computes (or the other
/// way round) right after its partner, when both sit in the same guarded block; returns the
/// new program and the positions of the first entry of every pair.
fn pair_sincos(
    kernel: &Kernel,
    locs: &[Loc],
    program: Vec<usize>,
    guards: &[Guard],
) -> (Vec<usize>, Vec<usize>) {
    let trig = |v: usize| match kernel.values[v].inst {
        Inst::Unary(op @ (UnaryOp::Sin | UnaryOp::Cos), a)
            if kernel.values[v].dtype == DType::F32 =>
        {
            let a = a as usize;
            let a = match locs[a] {
                Loc::Alias(r) => r,
                _ => a,
            };
            Some((op == UnaryOp::Sin, a))
        }
        _ => None,
    };
    if !program.iter().any(|&e| e & GUARD == 0 && trig(e).is_some()) {
        return (program, Vec::new());
    }
    // the innermost guarded block of every position
    let mut block = vec![usize::MAX; program.len()];
    let mut open: Vec<(usize, usize)> = Vec::new(); // (end position, guard)
    for (p, &e) in program.iter().enumerate() {
        while open.last().is_some_and(|&(end, _)| end <= p) {
            open.pop();
        }
        block[p] = open.last().map_or(usize::MAX, |&(_, g)| g);
        if e & GUARD != 0 {
            open.push((p + 1 + guards[e - GUARD].len, e - GUARD));
        }
    }
    // first sine and first cosine of each operand, by block
    let mut seen: std::collections::HashMap<(usize, usize), [Option<usize>; 2]> =
        Default::default();
    let mut partner = vec![usize::MAX; program.len()];
    for (p, &e) in program.iter().enumerate() {
        if e & GUARD != 0 {
            continue;
        }
        if let Some((sin, a)) = trig(e) {
            let slot = seen.entry((a, block[p])).or_default();
            let (mine, other) = if sin { (0, 1) } else { (1, 0) };
            match (slot[mine], slot[other]) {
                (None, Some(q)) if partner[q] == usize::MAX => {
                    partner[q] = p;
                    slot[mine] = Some(p);
                }
                (None, _) => slot[mine] = Some(p),
                _ => {}
            }
        }
    }
    let mut moved = vec![false; program.len()];
    let mut out = Vec::with_capacity(program.len());
    let mut firsts = Vec::new();
    for p in 0..program.len() {
        if moved[p] {
            continue;
        }
        out.push(program[p]);
        let q = partner[p];
        if q != usize::MAX {
            firsts.push(out.len() - 1);
            out.push(program[q]);
            moved[q] = true;
        }
    }
    (out, firsts)
}

struct Ctx<'a, 'b> {
    kernel: &'a Kernel,
    inputs: &'a [Slice<'b>],
    shape: &'a [usize],
    /// `inner[k]`: product of the launch shape after axis `k`.
    inner: Vec<usize>,
    locs: Vec<Loc>,
    slots: Vec<Col>,
    /// The values evaluated per tile, in order, and guard entries (`GUARD + k`).
    order: Vec<usize>,
    /// The guards `order` refers to.
    guards: Vec<Guard>,
    /// Columns of earlier launches on this thread, for reuse.
    pool: Vec<Col>,
    /// Elements of the launch.
    len: usize,
    /// The axis tables of the tabled values.
    tab: Option<Arc<tables::Tables>>,
}

/// Most columns a thread keeps for later launches.
const POOL_COLS: usize = 64;

/// The vectors and columns of a [`Ctx`], kept per thread between launches.
#[derive(Default)]
struct CtxBufs {
    inner: Vec<usize>,
    locs: Vec<Loc>,
    slots: Vec<Col>,
    order: Vec<usize>,
    guards: Vec<Guard>,
    pool: Vec<Col>,
}

thread_local! {
    static CTX_BUFS: std::cell::Cell<CtxBufs> = std::cell::Cell::new(CtxBufs::default());
}

impl Drop for Ctx<'_, '_> {
    fn drop(&mut self) {
        let mut pool = std::mem::take(&mut self.pool);
        for col in self.slots.drain(..) {
            if pool.len() < POOL_COLS {
                pool.push(col);
            }
        }
        let bufs = CtxBufs {
            inner: std::mem::take(&mut self.inner),
            locs: std::mem::take(&mut self.locs),
            slots: std::mem::take(&mut self.slots),
            order: std::mem::take(&mut self.order),
            guards: std::mem::take(&mut self.guards),
            pool,
        };
        CTX_BUFS.with(|c| c.set(bufs));
    }
}

/// The integer value of a uniform location, if it is one.
fn uni_int(l: Loc) -> Option<i64> {
    match l {
        Loc::Uni(Scalar::I32(x)) => Some(x as i64),
        Loc::Uni(Scalar::I64(x)) => Some(x),
        Loc::Uni(s) if s.dtype().is_int() => s.to_i128().and_then(|x| i64::try_from(x).ok()),
        _ => None,
    }
}

/// Reusable planning vectors of [`Ctx::new`], one set per thread.
#[derive(Default)]
struct Scratch {
    affine: Vec<Option<i64>>,
    poison: Vec<Option<IrError>>,
    live: Vec<bool>,
    computed: Vec<usize>,
    last_use: Vec<usize>,
    readers: Vec<usize>,
    stores: Vec<usize>,
    free: [Vec<usize>; DType::ALL.len()],
}

thread_local! {
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}

impl<'a, 'b> Ctx<'a, 'b> {
    /// True when planning folded a load into a uniform value (read from the input).
    fn reads_data_while_planning(&self) -> bool {
        self.kernel
            .values
            .iter()
            .zip(&self.locs)
            .any(|(v, l)| matches!(v.inst, Inst::Load { .. }) && matches!(l, Loc::Uni(_)))
    }

    /// A context over the per-thread pooled vectors and columns (see `Drop`), with the
    /// launch's axis strides and nothing planned yet.
    fn pooled(
        kernel: &'a Kernel,
        inputs: &'a [Slice<'b>],
        args: &'a LaunchArgs,
        len: usize,
    ) -> Ctx<'a, 'b> {
        let shape = &args.shape[..];
        let bufs = CTX_BUFS.with(|c| c.take());
        let mut ctx = Ctx {
            kernel,
            inputs,
            shape,
            inner: bufs.inner,
            locs: bufs.locs,
            slots: bufs.slots,
            order: bufs.order,
            guards: bufs.guards,
            pool: bufs.pool,
            len,
            tab: None,
        };
        ctx.inner.clear();
        ctx.inner
            .extend((0..shape.len()).map(|k| shape[k + 1..].iter().product::<usize>()));
        ctx.locs.clear();
        ctx.slots.clear();
        ctx.order.clear();
        ctx.guards.clear();
        ctx
    }

    /// A column of `dtype` for one tile: a pooled one when one fits.
    fn take_col(&mut self, dtype: DType) -> Col {
        let n = TILE.min(self.len);
        match self.pool.iter().rposition(|c| c.fits(dtype, n)) {
            Some(k) => self.pool.swap_remove(k),
            None => Col::new(dtype, n),
        }
    }

    /// The context of a launch planned before (see [`run_shared`]).
    fn from_plan(
        kernel: &'a Kernel,
        inputs: &'a [Slice<'b>],
        args: &'a LaunchArgs,
        plan: &Plan,
    ) -> Ctx<'a, 'b> {
        Ctx::from_plan_len(kernel, inputs, args, plan, plan.len)
    }

    /// [`Ctx::from_plan`] for a range of `len` elements (at most the planned range's).
    fn from_plan_len(
        kernel: &'a Kernel,
        inputs: &'a [Slice<'b>],
        args: &'a LaunchArgs,
        plan: &Plan,
        len: usize,
    ) -> Ctx<'a, 'b> {
        let mut ctx = Ctx::pooled(kernel, inputs, args, len);
        ctx.locs.extend_from_slice(&plan.locs);
        ctx.order.extend_from_slice(&plan.order);
        ctx.guards.extend_from_slice(&plan.guards);
        ctx.tab = plan.tab.clone();
        for &d in &plan.slots {
            let col = ctx.take_col(d);
            ctx.slots.push(col);
        }
        ctx
    }

    /// Plans the evaluation of `start .. start + len` (`len > 0`): finds the needed values,
    /// evaluates the uniform ones, turns loads at `Index + c` into reads of the input in
    /// place, removes identities, and assigns columns to the rest.
    fn new(
        kernel: &'a Kernel,
        inputs: &'a [Slice<'b>],
        args: &'a LaunchArgs,
        start: usize,
        len: usize,
    ) -> Result<Ctx<'a, 'b>, IrError> {
        let nv = kernel.values.len();
        let mut ctx = Ctx::pooled(kernel, inputs, args, len);
        // Needed values (conservatively: every operand of a needed value).
        ctx.locs.resize(nv, Loc::Skip);
        for s in &kernel.stores {
            ctx.locs[s.value as usize] = Loc::Pending;
        }
        for v in (0..nv).rev() {
            if matches!(ctx.locs[v], Loc::Pending) {
                for o in kernel.values[v].inst.operands() {
                    ctx.locs[o as usize] = Loc::Pending;
                }
            }
        }
        // Classification, in order. `affine[v] = Some(c)`: value v is `Index + c`.
        // planning vectors come from a per-thread scratch (no allocation per launch)
        let mut scratch = SCRATCH.with(|c| c.take());
        let mut affine = std::mem::take(&mut scratch.affine);
        affine.clear();
        affine.resize(nv, None);
        // A value whose computation fails at planning time (a uniform or shifted load out of
        // bounds) is an error only if a store needs it: it is "poisoned" until then.
        let mut poison = std::mem::take(&mut scratch.poison);
        poison.clear();
        poison.resize(nv, None);
        let mut ones: [Option<Col>; 8] = Default::default();
        let mut tabs = tables::Tables::default();
        for v in 0..nv {
            if !matches!(ctx.locs[v], Loc::Pending) {
                continue;
            }
            let val = kernel.values[v];
            let loc = |o: ValueId| ctx.locs[o as usize];
            let rooted = |o: ValueId| root(&ctx.locs, o as usize);
            let clean = |o: ValueId| poison[rooted(o)].is_none();
            // `where` with a uniform condition and a load under a uniform false guard
            // read only some of their operands.
            let partial = match val.inst {
                Inst::Where(c, ..) => matches!(loc(c), Loc::Uni(_)) && clean(c),
                Inst::Load { guard: Some(g), .. } => {
                    matches!(loc(g), Loc::Uni(Scalar::Bool(false))) && clean(g)
                }
                _ => false,
            };
            let bad = val.inst.operands().find_map(|o| poison[rooted(o)].clone());
            let any_bad = bad.is_some();
            if let (Some(e), false) = (bad, partial) {
                poison[v] = Some(e);
                ctx.locs[v] = Loc::Uni(Scalar::zero(val.dtype));
                continue;
            }
            let mut err = None;
            let l = match val.inst {
                Inst::Param(k) => Loc::Uni(args.params[k as usize]),
                Inst::Const(s) => Loc::Uni(s),
                Inst::Index => {
                    affine[v] = Some(0);
                    Loc::Pending
                }
                Inst::Axis(_) => Loc::Pending,
                inst if !any_bad && inst.operands().all(|o| matches!(loc(o), Loc::Uni(_))) => {
                    // one reusable 1-element column per dtype: folding allocates once
                    let slot = &mut ones[val.dtype as usize % ones.len()];
                    let mut col = match slot.take() {
                        Some(c) if c.dtype() == val.dtype => c,
                        _ => Col::new(val.dtype, 1),
                    };
                    let r = ctx.eval(v, col.view(1), Tile { i0: 0, n: 1 });
                    let first = col.first();
                    *slot = Some(col);
                    match r {
                        Ok(()) => Loc::Uni(first),
                        Err(e) => {
                            err = Some(e);
                            Loc::Uni(Scalar::zero(val.dtype))
                        }
                    }
                }
                Inst::Load {
                    input,
                    index,
                    guard,
                } => {
                    let g = guard.map(loc);
                    let always = matches!(g, None | Some(Loc::Uni(Scalar::Bool(true))));
                    let never = matches!(g, Some(Loc::Uni(Scalar::Bool(false))));
                    match affine[rooted(index)] {
                        _ if never => Loc::Uni(Scalar::zero(val.dtype)),
                        Some(c) if always => {
                            let have = inputs[input as usize].len() as i128;
                            let lo = start as i128 + c as i128;
                            let hi = (start + len) as i128 + c as i128;
                            if lo < 0 || hi > have {
                                err = Some(IrError(format!(
                                    "value {v}: load from input {input} at indices {lo}..{hi} \
                                     is out of bounds (length {have})"
                                )));
                                Loc::Uni(Scalar::zero(val.dtype))
                            } else {
                                Loc::Input(input as usize, c)
                            }
                        }
                        _ => Loc::Pending,
                    }
                }
                Inst::Where(c, a, b) => match loc(c) {
                    Loc::Uni(Scalar::Bool(c)) => Loc::Alias(rooted(if c { a } else { b })),
                    _ => Loc::Pending,
                },
                Inst::Cast(a) if kernel.values[a as usize].dtype == val.dtype => {
                    Loc::Alias(rooted(a))
                }
                Inst::Binary(op, a, b) if val.dtype.is_int() => {
                    use BinaryOp::*;
                    let (ua, ub) = (uni_int(loc(a)), uni_int(loc(b)));
                    match (op, ua, ub) {
                        (Add, _, Some(0)) | (Sub, _, Some(0)) | (Mul, _, Some(1)) => {
                            Loc::Alias(rooted(a))
                        }
                        (Div | FloorDiv | IdxDiv, _, Some(1)) => Loc::Alias(rooted(a)),
                        (Add, Some(0), _) | (Mul, Some(1), _) => Loc::Alias(rooted(b)),
                        (Mul, Some(0), _) | (Mul, _, Some(0)) => Loc::Uni(Scalar::zero(val.dtype)),
                        (Add, _, Some(d)) if val.dtype == DType::I64 => {
                            affine[v] = affine[rooted(a)].map(|c| c.wrapping_add(d));
                            Loc::Pending
                        }
                        (Add, Some(d), _) if val.dtype == DType::I64 => {
                            affine[v] = affine[rooted(b)].map(|c| c.wrapping_add(d));
                            Loc::Pending
                        }
                        (Sub, _, Some(d)) if val.dtype == DType::I64 => {
                            affine[v] = affine[rooted(a)].map(|c| c.wrapping_sub(d));
                            Loc::Pending
                        }
                        _ => Loc::Pending,
                    }
                }
                _ => Loc::Pending,
            };
            if err.is_some() {
                poison[v] = err;
                ctx.locs[v] = l;
                continue;
            }
            if let Loc::Alias(r) = l {
                affine[v] = affine[r];
                poison[v] = poison[r].clone();
                // An alias of a uniform value or an input is that location itself.
                if !matches!(ctx.locs[r], Loc::Pending) {
                    ctx.locs[v] = ctx.locs[r];
                    continue;
                }
            }
            ctx.locs[v] = l;
            if matches!(l, Loc::Pending) {
                let locs = &ctx.locs;
                let root = |o: u32| root(locs, o as usize);
                tabs.classify(kernel, v, locs, &root, ctx.shape, len);
                if let Inst::Load {
                    input,
                    index,
                    guard,
                } = val.inst
                {
                    let g = guard.map(|g| locs[root(g)]);
                    if matches!(g, None | Some(Loc::Uni(Scalar::Bool(true)))) {
                        tabs.classify_load(v, root(index), inputs[input as usize].len(), ctx.shape);
                    }
                }
            }
        }
        // Values still to be computed per tile: those reachable from the stores through
        // pending values and aliases.
        let mut live = std::mem::take(&mut scratch.live);
        live.clear();
        live.resize(nv, false);
        for s in &kernel.stores {
            live[root(&ctx.locs, s.value as usize)] = true;
        }
        for v in (0..nv).rev() {
            if !live[v] {
                continue;
            }
            if let Some(e) = poison[v].take() {
                return Err(e);
            }
            if matches!(ctx.locs[v], Loc::Pending) && tabs.of(v).is_none() {
                // a tabled value reads its tables, a load through them no index column
                let inst = kernel.values[v].inst;
                let skip = match inst {
                    Inst::Load { index, .. } if tabs.gathers(v).is_some() => Some(index),
                    _ => None,
                };
                for o in inst.operands().filter(|&o| Some(o) != skip) {
                    live[root(&ctx.locs, o as usize)] = true;
                }
            }
        }
        // Columns, reused once their last reader has run.
        let mut computed = std::mem::take(&mut scratch.computed);
        computed.clear();
        computed.extend((0..nv).filter(|&v| live[v] && matches!(ctx.locs[v], Loc::Pending)));
        fuse_products(kernel, &mut ctx.locs, &computed);
        let program = guarded_program(kernel, &ctx.locs, &computed, &mut ctx.guards);
        let (program, pairs) = pair_sincos(kernel, &ctx.locs, program, &ctx.guards);
        if !ctx.guards.is_empty() || !pairs.is_empty() {
            computed.clear();
            computed.extend(program.iter().copied().filter(|&e| e & GUARD == 0));
        }
        let mut last_use = std::mem::take(&mut scratch.last_use);
        last_use.clear();
        last_use.resize(nv, 0);
        for &v in &computed {
            for o in reads(kernel, &ctx.locs, v) {
                last_use[o] = v;
            }
        }
        for s in &kernel.stores {
            last_use[root(&ctx.locs, s.value as usize)] = usize::MAX;
        }
        // A computed value stored once and read by no other value is computed straight
        // into its output.
        let mut readers = std::mem::take(&mut scratch.readers);
        readers.clear();
        readers.resize(nv, 0);
        for &v in &computed {
            for o in kernel.values[v].inst.operands() {
                readers[root(&ctx.locs, o as usize)] += 1;
            }
        }
        let mut stores = std::mem::take(&mut scratch.stores);
        stores.clear();
        stores.resize(nv, 0);
        for s in &kernel.stores {
            stores[root(&ctx.locs, s.value as usize)] += 1;
        }
        for s in &kernel.stores {
            let r = root(&ctx.locs, s.value as usize);
            if stores[r] == 1 && readers[r] == 0 && matches!(ctx.locs[r], Loc::Pending) {
                ctx.locs[r] = Loc::Direct(s.output as usize);
            }
        }
        let mut free = std::mem::take(&mut scratch.free);
        for f in free.iter_mut() {
            f.clear();
        }
        let dix = |d: DType| DType::ALL.iter().position(|&x| x == d).unwrap_or(0);
        for &v in &program {
            ctx.order.push(v);
            if v & GUARD != 0 {
                continue;
            }
            if matches!(ctx.locs[v], Loc::Pending) {
                let d = kernel.values[v].dtype;
                let s = match free[dix(d)].pop() {
                    Some(s) => s,
                    None => {
                        let col = ctx.take_col(d);
                        ctx.slots.push(col);
                        ctx.slots.len() - 1
                    }
                };
                ctx.locs[v] = Loc::Slot(s);
            }
            let ops = reads(kernel, &ctx.locs, v);
            for (k, &o) in ops.iter().enumerate() {
                if ops[..k].contains(&o) || last_use[o] != v {
                    continue;
                }
                if let Loc::Slot(so) = ctx.locs[o] {
                    free[dix(kernel.values[o].dtype)].push(so);
                }
            }
        }
        // Sine/cosine partners computed together where both have columns.
        for &p in &pairs {
            let (a, b) = (ctx.order[p], ctx.order[p + 1]);
            if matches!(ctx.locs[a], Loc::Slot(_)) && matches!(ctx.locs[b], Loc::Slot(_)) {
                ctx.order[p] |= PAIR;
            }
        }
        // Aliases take their root's final location.
        for v in 0..nv {
            if let Loc::Alias(r) = ctx.locs[v] {
                ctx.locs[v] = ctx.locs[r];
            }
        }
        let scratch = Scratch {
            affine,
            poison,
            live,
            computed,
            last_use,
            readers,
            stores,
            free,
        };
        SCRATCH.with(|c| c.set(scratch));
        if !tabs.is_empty() {
            ctx.tab = Some(Arc::new(tabs));
        }
        Ok(ctx)
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.kernel.values[v as usize].dtype
    }

    /// Value `v` over tile `t`.
    #[inline]
    fn src<T: Elem>(&self, v: ValueId, t: Tile) -> Src<'_, T> {
        match self.locs[v as usize] {
            Loc::Uni(s) => Src::Uni(T::from_scalar(s)),
            Loc::Slot(k) => Src::Col(&T::col(&self.slots[k])[..t.n]),
            Loc::Input(k, c) => {
                let lo = (t.i0 as i64).wrapping_add(c) as usize;
                Src::Col(&T::input(&self.inputs[k])[lo..lo + t.n])
            }
            Loc::Skip | Loc::Pending | Loc::Alias(_) | Loc::Direct(_) | Loc::Fused(_) => {
                unreachable!("operand evaluated before its user")
            }
        }
    }

    /// Evaluates the sine/cosine partners `a` and `b` (both with column slots) over tile
    /// `t` in one pass.
    fn sincos(&mut self, a: usize, b: usize, t: Tile) -> Result<(), IrError> {
        let (Inst::Unary(oa, x), Loc::Slot(sa), Loc::Slot(sb)) =
            (self.kernel.values[a].inst, self.locs[a], self.locs[b])
        else {
            return Err(internal("sine/cosine pair without columns"));
        };
        let (ss, sc) = if oa == UnaryOp::Sin {
            (sa, sb)
        } else {
            (sb, sa)
        };
        let mut cs = std::mem::take(&mut self.slots[ss]);
        let mut cc = std::mem::take(&mut self.slots[sc]);
        let r = match self.src::<f32>(x, t) {
            Src::Col(xs) => {
                crate::vmath::sincos_f32(xs, out::<f32>(cs.view(t.n)), out::<f32>(cc.view(t.n)));
                Ok(())
            }
            Src::Uni(_) => {
                let (vs, vc) = if oa == UnaryOp::Sin { (a, b) } else { (b, a) };
                self.eval(vs, cs.view(t.n), t)
                    .and_then(|_| self.eval(vc, cc.view(t.n), t))
            }
        };
        self.slots[ss] = cs;
        self.slots[sc] = cc;
        r
    }

    /// Evaluates value `v` over tile `t` into `o`.
    fn eval(&self, v: usize, o: SliceMut<'_>, t: Tile) -> Result<(), IrError> {
        let val = self.kernel.values[v];
        if let Some(tb) = &self.tab {
            if let Some(s) = tb.of(v) {
                tb.fill(s, self.shape, &self.inner, t.i0, o);
                return Ok(());
            }
            if let (Inst::Load { input, .. }, Some(s)) = (val.inst, tb.gathers(v)) {
                with_type!(val.dtype, T => tb.gather(
                    s,
                    self.shape,
                    &self.inner,
                    t.i0,
                    T::input(&self.inputs[input as usize]),
                    out::<T>(o),
                ));
                return Ok(());
            }
        }
        match val.inst {
            Inst::Reduced => return Err(internal("reduced value outside a reduction")),
            Inst::Index => {
                for (j, x) in out::<i64>(o).iter_mut().enumerate() {
                    *x = (t.i0 + j) as i64;
                }
            }
            Inst::Axis(k) => {
                let k = k as usize;
                fill_axis(out(o), t.i0, self.shape[k], self.inner[k]);
            }
            Inst::Param(_) | Inst::Const(_) => {
                let Loc::Uni(s) = self.locs[v] else {
                    return Err(internal("scalar value without its scalar"));
                };
                with_type!(val.dtype, T => out::<T>(o).fill(T::from_scalar(s)));
            }
            Inst::Load {
                input,
                index,
                guard,
            } => {
                let idx = self.src::<i64>(index, t);
                let g = guard.map(|g| self.src::<bool>(g, t));
                let r = with_type!(val.dtype, T => {
                    gather(T::input(&self.inputs[input as usize]), idx, g, out::<T>(o))
                });
                if let Err(ix) = r {
                    return Err(IrError(format!(
                        "value {v}: load from input {input} at index {ix} is out of bounds \
                         (length {})",
                        self.inputs[input as usize].len()
                    )));
                }
            }
            Inst::Unary(op, a) => match self.dtype(a) {
                DType::Bool => unary_bool(op, self.src(a, t), o)?,
                DType::I32 => unary_int::<i32>(op, self.src(a, t), o)?,
                DType::I64 => unary_int::<i64>(op, self.src(a, t), o)?,
                DType::F32 => unary_float::<f32>(op, self.src(a, t), o)?,
                DType::F64 => unary_float::<f64>(op, self.src(a, t), o)?,
                DType::C64 => unary_complex::<Complex32>(op, self.src(a, t), o)?,
                DType::C128 => unary_complex::<Complex64>(op, self.src(a, t), o)?,
                DType::U8 => unary_int::<u8>(op, self.src(a, t), o)?,
                DType::U16 => unary_int::<u16>(op, self.src(a, t), o)?,
                DType::U32 => unary_int::<u32>(op, self.src(a, t), o)?,
                DType::U64 => unary_int::<u64>(op, self.src(a, t), o)?,
                DType::I8 => unary_int::<i8>(op, self.src(a, t), o)?,
                DType::I16 => unary_int::<i16>(op, self.src(a, t), o)?,
                d @ (DType::F16 | DType::BF16) => return Err(unsupported(op.name(), d)),
            },
            Inst::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), p, q)
                if matches!(self.locs[p as usize], Loc::Fused(_))
                    || matches!(self.locs[q as usize], Loc::Fused(_)) =>
            {
                let sub = op == BinaryOp::Sub;
                match val.dtype {
                    DType::F32 => self.mul_add::<f32>(sub, p, q, t, out(o))?,
                    DType::F64 => self.mul_add::<f64>(sub, p, q, t, out(o))?,
                    d => return Err(unsupported("fused multiply-add", d)),
                }
            }
            Inst::Binary(op, a, b) => match self.dtype(a) {
                DType::Bool => binary_bool(op, self.src(a, t), self.src(b, t), o)?,
                DType::I32 => binary_int::<i32>(op, self.src(a, t), self.src(b, t), o)?,
                DType::I64 => binary_int::<i64>(op, self.src(a, t), self.src(b, t), o)?,
                DType::F32 => binary_float::<f32>(op, self.src(a, t), self.src(b, t), o)?,
                DType::F64 => binary_float::<f64>(op, self.src(a, t), self.src(b, t), o)?,
                DType::C64 => binary_complex::<Complex32>(op, self.src(a, t), self.src(b, t), o)?,
                DType::C128 => binary_complex::<Complex64>(op, self.src(a, t), self.src(b, t), o)?,
                DType::U8 => binary_int::<u8>(op, self.src(a, t), self.src(b, t), o)?,
                DType::U16 => binary_int::<u16>(op, self.src(a, t), self.src(b, t), o)?,
                DType::U32 => binary_int::<u32>(op, self.src(a, t), self.src(b, t), o)?,
                DType::U64 => binary_int::<u64>(op, self.src(a, t), self.src(b, t), o)?,
                DType::I8 => binary_int::<i8>(op, self.src(a, t), self.src(b, t), o)?,
                DType::I16 => binary_int::<i16>(op, self.src(a, t), self.src(b, t), o)?,
                d @ (DType::F16 | DType::BF16) => return Err(unsupported(op.name(), d)),
            },
            Inst::Where(c, a, b) => {
                let c = self.src::<bool>(c, t);
                with_type!(val.dtype, T => {
                    select(c, self.src::<T>(a, t), self.src::<T>(b, t), out::<T>(o))
                });
            }
            Inst::Cast(a) => match (self.dtype(a), val.dtype) {
                // whole columns of 16-bit floats convert in SIMD chunks (the same bits as
                // one element at a time)
                (DType::F16, DType::F32) => half_to_f32::<f16>(self.src(a, t), out(o)),
                (DType::BF16, DType::F32) => half_to_f32::<bf16>(self.src(a, t), out(o)),
                (DType::F32, DType::F16) => f32_to_half::<f16>(self.src(a, t), out(o)),
                (DType::F32, DType::BF16) => f32_to_half::<bf16>(self.src(a, t), out(o)),
                (from, _) => {
                    with_type!(from, S => cast_from::<S>(self.src(a, t), val.dtype, o))
                }
            },
            Inst::Random(kind, c, s) => {
                let (c, s) = (self.src::<i64>(c, t), self.src::<i64>(s, t));
                match (kind, val.dtype) {
                    (RandomKind::Uniform, DType::F32) => {
                        map2(c, s, out(o), |c, s| sem::uniform_f32(c as u64, s as u64))
                    }
                    (RandomKind::Uniform, DType::F64) => {
                        map2(c, s, out(o), |c, s| sem::uniform_f64(c as u64, s as u64))
                    }
                    (RandomKind::Normal, DType::F32) => map2(c, s, out(o), |c, s| {
                        sem::normal_f64(c as u64, s as u64) as f32
                    }),
                    (RandomKind::Normal, DType::F64) => {
                        map2(c, s, out(o), |c, s| sem::normal_f64(c as u64, s as u64))
                    }
                    (_, d) => return Err(unsupported("random", d)),
                }
            }
        }
        Ok(())
    }

    /// The operand columns of fused product `x` (see [`fuse_products`]) over tile `t`.
    fn product<T: Elem>(&self, x: ValueId, t: Tile) -> Option<(&[T], &[T])> {
        let Loc::Fused(r) = self.locs[x as usize] else {
            return None;
        };
        let Inst::Binary(BinaryOp::Mul, a, b) = self.kernel.values[r].inst else {
            return None;
        };
        match (self.src::<T>(a, t), self.src::<T>(b, t)) {
            (Src::Col(a), Src::Col(b)) => Some((a, b)),
            _ => None,
        }
    }

    /// `p ± q` over tile `t` where `p`, `q` or both are fused products.
    fn mul_add<T: Real>(
        &self,
        sub: bool,
        p: ValueId,
        q: ValueId,
        t: Tile,
        o: &mut [T],
    ) -> Result<(), IrError> {
        let bad = || internal("fused product without its columns");
        let (fp, fq) = (self.product::<T>(p, t), self.product::<T>(q, t));
        match (fp, fq) {
            (Some((a, b)), Some((c, d))) => mul_add2(sub, a, b, c, d, o),
            (Some((a, b)), None) => {
                if matches!(self.locs[q as usize], Loc::Fused(_)) {
                    return Err(bad());
                }
                mul_add1(sub, true, a, b, self.src::<T>(q, t), o)
            }
            (None, Some((c, d))) => {
                if matches!(self.locs[p as usize], Loc::Fused(_)) {
                    return Err(bad());
                }
                mul_add1(sub, false, c, d, self.src::<T>(p, t), o)
            }
            (None, None) => return Err(bad()),
        }
        Ok(())
    }

    /// Writes value `v` over tile `t` to `dst[off .. off + t.n]`.
    fn store(&self, v: ValueId, dst: &mut SliceMut<'_>, off: usize, t: Tile) {
        with_type!(self.dtype(v), T => {
            copy_src(self.src::<T>(v, t), T::output(sub(dst, off, t.n)))
        })
    }
}
