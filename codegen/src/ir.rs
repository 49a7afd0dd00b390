//! The typed kernel IR: buffer and scalar parameters, SSA values with dtypes, stores;
//! a hash-consing builder, `validate` and `normalize` (the cache key).
//!
//! A kernel computes `n = prod(shape)` elements. For each linear index `i` (C order over the
//! launch `shape`) it evaluates its values in order and stores some of them to outputs at
//! position `i` (outputs are contiguous). Inputs are flat buffers read at computed linear
//! offsets: every view (broadcast, slice, transpose, pad, roll, concatenate) is index
//! arithmetic in the IR, and every size, stride and offset that arithmetic uses is a runtime
//! `Param`, so the IR -- the cache key -- never holds a shape or a user's scalar value.

use crate::ops::{BinaryOp, RandomKind, ReduceLayout, ReduceOp, UnaryOp};
use crate::{DType, Scalar};
use std::collections::HashMap;
use std::fmt::{self, Write as _};

/// Index of a value in `Kernel::values`.
pub type ValueId = u32;

/// One SSA instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inst {
    /// The linear index `i` of the element being computed (I64).
    Index,
    /// Component `k` of the multi-index of `i` over the launch shape (I64).
    Axis(u8),
    /// Scalar argument `k`; its dtype is `Kernel::params[k]`.
    Param(u32),
    /// A structural constant (small integers of index math, `false`/`true`). User scalars
    /// are never constants: they are `Param`s so that a new value never recompiles.
    Const(Scalar),
    /// Element `index` (I64) of input buffer `input`. With a guard, the load happens only
    /// where the guard (Bool) is true; elsewhere the value is zero of the input's dtype.
    Load {
        /// Input buffer number.
        input: u32,
        /// Linear element offset (I64).
        index: ValueId,
        /// Optional Bool condition under which the offset is in bounds.
        guard: Option<ValueId>,
    },
    /// Elementwise op of one operand.
    Unary(UnaryOp, ValueId),
    /// Elementwise op of two operands.
    Binary(BinaryOp, ValueId, ValueId),
    /// `cond ? a : b` (cond is Bool).
    Where(ValueId, ValueId, ValueId),
    /// Conversion to the value's dtype with NumPy `astype` rules.
    Cast(ValueId),
    /// A counter-based random number (F32 or F64): Philox4x32-10 keyed by `seed` (I64),
    /// counter `counter` (I64). See [`crate::semantics::philox`] for the exact mapping.
    Random(RandomKind, ValueId, ValueId),
    /// The result of the kernel's reduction (see [`Reduce`]); only in reduction kernels.
    Reduced,
}

impl Inst {
    /// The operands this instruction reads.
    pub fn operands(&self) -> impl Iterator<Item = ValueId> {
        let v: [Option<ValueId>; 3] = match *self {
            Inst::Index | Inst::Axis(_) | Inst::Param(_) | Inst::Const(_) | Inst::Reduced => {
                [None; 3]
            }
            Inst::Load { index, guard, .. } => [Some(index), guard, None],
            Inst::Unary(_, a) | Inst::Cast(a) => [Some(a), None, None],
            Inst::Binary(_, a, b) | Inst::Random(_, a, b) => [Some(a), Some(b), None],
            Inst::Where(c, a, b) => [Some(c), Some(a), Some(b)],
        };
        v.into_iter().flatten()
    }

    fn map_operands(&self, f: impl Fn(ValueId) -> ValueId) -> Inst {
        match *self {
            Inst::Load {
                input,
                index,
                guard,
            } => Inst::Load {
                input,
                index: f(index),
                guard: guard.map(&f),
            },
            Inst::Unary(op, a) => Inst::Unary(op, f(a)),
            Inst::Cast(a) => Inst::Cast(f(a)),
            Inst::Binary(op, a, b) => Inst::Binary(op, f(a), f(b)),
            Inst::Random(k, a, b) => Inst::Random(k, f(a), f(b)),
            Inst::Where(c, a, b) => Inst::Where(f(c), f(a), f(b)),
            other => other,
        }
    }
}

/// An instruction with the dtype of its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    /// What computes it.
    pub inst: Inst,
    /// Its dtype.
    pub dtype: DType,
}

/// `outputs[output][i] = values[value]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Store {
    /// Output buffer number.
    pub output: u32,
    /// The stored value (its dtype equals the output's).
    pub value: ValueId,
}

/// The reduction of a reduction kernel.
///
/// A reduction kernel has rank 2: its launch shape is `[m, r]`, output element `i < m`
/// combines the values `value` takes at the elements `(i, 0..r)` (so `Index` is `i * r + j`,
/// `Axis(0)` is `i` and `Axis(1)` is `j` in the values before `Inst::Reduced`). The values
/// list holds exactly one `Inst::Reduced`: values before it are the body (computed per
/// element of `[m, r]`), values after it the epilogue (computed once per output from
/// `Reduced` and uniform values -- params, constants and math on them only). Stores take
/// epilogue values (or `Reduced` itself); outputs hold `m` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reduce {
    /// How values combine.
    pub op: ReduceOp,
    /// The body value combined.
    pub value: ValueId,
    /// How CUDA threads share outputs.
    pub layout: ReduceLayout,
}

/// One fused kernel: elementwise, or a reduction with its producers and epilogue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Kernel {
    /// Rank of the launch shape (`Axis(k)` needs `k < rank`).
    pub rank: u8,
    /// Dtypes of the input buffers.
    pub inputs: Vec<DType>,
    /// Dtypes of the output buffers (each `n` elements, contiguous).
    pub outputs: Vec<DType>,
    /// Dtypes of the scalar parameters.
    pub params: Vec<DType>,
    /// SSA values in dependency order (operands precede their users).
    pub values: Vec<Value>,
    /// One store per output.
    pub stores: Vec<Store>,
    /// The reduction, for reduction kernels.
    pub reduce: Option<Reduce>,
}

/// A launch shape (inline up to rank 6: no allocation per launch).
pub type LaunchShape = smallvec::SmallVec<[usize; 6]>;

/// The runtime arguments of one launch: everything that may change without recompiling.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LaunchArgs {
    /// The launch shape (its length is `Kernel::rank`; inline up to rank 6).
    pub shape: LaunchShape,
    /// One value per `Kernel::params` entry, of that dtype (inline up to 4).
    pub params: smallvec::SmallVec<[Scalar; 4]>,
}

impl LaunchArgs {
    /// Number of elements computed (`prod(shape)`).
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    /// True when no element is computed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A malformed kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrError(pub String);

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid kernel IR: {}", self.0)
    }
}
impl std::error::Error for IrError {}

impl Kernel {
    /// The dtype an instruction produces given this kernel's values and signature, or an
    /// error naming what is wrong.
    fn infer(&self, inst: &Inst, dtype: DType) -> Result<(), IrError> {
        let d = |v: ValueId| self.values[v as usize].dtype;
        let err = |m: String| Err(IrError(m));
        // 16-bit floats are storage only (see `widen_half`)
        let half_ok = match *inst {
            Inst::Load { .. } | Inst::Param(_) => true,
            Inst::Cast(a) if dtype.is_half() => matches!(d(a), DType::F32 | DType::F64),
            Inst::Cast(a) if d(a).is_half() => dtype == DType::F32,
            _ => !dtype.is_half() && !inst.operands().any(|o| d(o).is_half()),
        };
        if !half_ok {
            return err(format!(
                "{inst:?} -> {dtype}: 16-bit floats are only loaded, passed, stored and cast \
                 from/to F32 (Kernel::widen_half)"
            ));
        }
        match *inst {
            Inst::Index | Inst::Axis(_) if dtype != DType::I64 => err(format!("{inst:?} is I64")),
            Inst::Axis(k) if k >= self.rank => err(format!("axis {k} >= rank {}", self.rank)),
            Inst::Param(k) => match self.params.get(k as usize) {
                Some(&p) if p == dtype => Ok(()),
                _ => err(format!("param {k} missing or not {dtype}")),
            },
            Inst::Const(s) if s.dtype() != dtype => err(format!("const {s:?} is not {dtype}")),
            Inst::Load {
                input,
                index,
                guard,
            } => {
                if self.inputs.get(input as usize) != Some(&dtype) {
                    return err(format!("input {input} missing or not {dtype}"));
                }
                if d(index) != DType::I64 || guard.is_some_and(|g| d(g) != DType::Bool) {
                    return err("load index must be I64 and guard Bool".into());
                }
                Ok(())
            }
            Inst::Unary(op, a) => match op.result_dtype(d(a)) {
                Some(r) if r == dtype => Ok(()),
                _ => err(format!("{}({}) cannot give {dtype}", op.name(), d(a))),
            },
            Inst::Binary(op, a, b) => match op.result_dtype(d(a), d(b)) {
                Some(r) if r == dtype => Ok(()),
                _ => err(format!(
                    "{}({}, {}) cannot give {dtype}",
                    op.name(),
                    d(a),
                    d(b)
                )),
            },
            Inst::Where(c, a, b) => {
                if d(c) != DType::Bool || d(a) != dtype || d(b) != dtype {
                    return err("where needs (Bool, T, T) -> T".into());
                }
                Ok(())
            }
            Inst::Random(_, c, s) => {
                if d(c) != DType::I64 || d(s) != DType::I64 || !dtype.is_float() {
                    return err("random needs (I64, I64) -> F32/F64".into());
                }
                Ok(())
            }
            Inst::Reduced => match self.reduce {
                Some(r) if r.op.result_dtype(d(r.value)) == Some(dtype) => Ok(()),
                Some(r) => err(format!(
                    "{} of {} cannot give {dtype}",
                    r.op.name(),
                    d(r.value)
                )),
                None => err("reduced value in a kernel without a reduction".into()),
            },
            _ => Ok(()),
        }
    }

    /// Checks every invariant the renderer and the interpreter rely on.
    pub fn validate(&self) -> Result<(), IrError> {
        for (i, v) in self.values.iter().enumerate() {
            if let Some(bad) = v.inst.operands().find(|&o| o as usize >= i) {
                return Err(IrError(format!("value {i} reads later value {bad}")));
            }
            self.infer(&v.inst, v.dtype)
                .map_err(|e| IrError(format!("value {i}: {}", e.0)))?;
        }
        // a bit per output for the usual few outputs (no allocation), a vector beyond
        let mut small = [false; 16];
        let mut big = Vec::new();
        let seen: &mut [bool] = if self.outputs.len() <= small.len() {
            &mut small[..self.outputs.len()]
        } else {
            big.resize(self.outputs.len(), false);
            &mut big
        };
        for s in &self.stores {
            let o = s.output as usize;
            if o >= self.outputs.len() || seen[o] {
                return Err(IrError(format!("output {o} missing or stored twice")));
            }
            seen[o] = true;
            match self.values.get(s.value as usize) {
                Some(v) if v.dtype == self.outputs[o] => {}
                _ => return Err(IrError(format!("store to output {o} has the wrong value"))),
            }
        }
        if seen.iter().any(|s| !s) {
            return Err(IrError("an output is never stored".into()));
        }
        self.validate_reduce()
    }

    /// The position of `Inst::Reduced` (reduction kernels).
    pub fn reduced_at(&self) -> Option<usize> {
        self.values.iter().position(|v| v.inst == Inst::Reduced)
    }

    /// Per value: true when it is the same for every element (params, constants and
    /// arithmetic on them only).
    pub fn uniform(&self) -> Vec<bool> {
        let mut u = vec![false; self.values.len()];
        for (i, v) in self.values.iter().enumerate() {
            u[i] = match v.inst {
                Inst::Param(_) | Inst::Const(_) => true,
                Inst::Index
                | Inst::Axis(_)
                | Inst::Load { .. }
                | Inst::Random(..)
                | Inst::Reduced => false,
                other => other.operands().all(|o| u[o as usize]),
            };
        }
        u
    }

    fn validate_reduce(&self) -> Result<(), IrError> {
        let count = self
            .values
            .iter()
            .filter(|v| v.inst == Inst::Reduced)
            .count();
        let Some(r) = self.reduce else {
            return match count {
                0 => Ok(()),
                _ => Err(IrError("reduced value without a reduction".into())),
            };
        };
        let err = |m: &str| Err(IrError(format!("reduction kernel: {m}")));
        if self.rank != 2 {
            return err("rank must be 2");
        }
        if r.layout == ReduceLayout::Scan && !matches!(r.op, ReduceOp::Sum | ReduceOp::Prod) {
            return err("a scan sums or multiplies");
        }
        if count != 1 {
            return err("needs exactly one reduced value");
        }
        let at = self.reduced_at().unwrap_or(0);
        if r.value as usize >= at {
            return err("the reduced value must precede Reduced");
        }
        let uniform = self.uniform();
        for (i, v) in self.values.iter().enumerate().skip(at + 1) {
            let ok_inst = !matches!(
                v.inst,
                Inst::Index | Inst::Axis(_) | Inst::Load { .. } | Inst::Random(..)
            );
            let ok_ops = v
                .inst
                .operands()
                .all(|o| o as usize >= at || uniform[o as usize]);
            if !ok_inst || !ok_ops {
                return Err(IrError(format!(
                    "reduction kernel: epilogue value {i} reads per-element data"
                )));
            }
        }
        if self.stores.iter().any(|s| (s.value as usize) < at) {
            return err("stores must take epilogue values");
        }
        Ok(())
    }

    /// Number of output elements of a launch over `args` (`m` for a reduction, every
    /// element for a scan).
    pub fn out_len(&self, args: &LaunchArgs) -> usize {
        match self.reduce {
            Some(r) if r.layout != ReduceLayout::Scan => args.shape.first().copied().unwrap_or(0),
            _ => args.len(),
        }
    }

    /// A reduction kernel as two plain kernels: the body (rank 2, storing the reduced value
    /// to its one output) and the epilogue (rank 1 over the outputs, reading the reduced
    /// values from an extra last input at `Index - p` where `p` is an extra last I64
    /// param, so a caller can pass a slice that starts at output `p`).
    pub fn split_reduce(&self) -> Option<(Kernel, Kernel)> {
        let r = self.reduce?;
        let at = self.reduced_at()?;
        let body = Kernel {
            rank: 2,
            inputs: self.inputs.clone(),
            outputs: vec![self.values[r.value as usize].dtype],
            params: self.params.clone(),
            values: self.values[..at].to_vec(),
            stores: vec![Store {
                output: 0,
                value: r.value,
            }],
            reduce: None,
        }
        .normalize();
        let uniform = self.uniform();
        let mut b = Builder::new(1);
        for &d in &self.inputs {
            b.input(d);
        }
        let acc = b.input(self.values[at].dtype);
        for &d in &self.params {
            b.kernel.params.push(d);
        }
        b.kernel.params.push(DType::I64);
        let mut remap = vec![u32::MAX; self.values.len()];
        for (i, v) in self.values.iter().enumerate() {
            if i < at && !uniform[i] {
                continue;
            }
            remap[i] = if v.inst == Inst::Reduced {
                let index = b.push(Inst::Index, DType::I64);
                let p = b.push(Inst::Param(self.params.len() as u32), DType::I64);
                let off = b.binary(BinaryOp::Sub, index, p);
                b.push(
                    Inst::Load {
                        input: acc,
                        index: off,
                        guard: None,
                    },
                    v.dtype,
                )
            } else {
                b.push(v.inst.map_operands(|o| remap[o as usize]), v.dtype)
            };
        }
        for s in &self.stores {
            b.kernel.outputs.push(self.outputs[s.output as usize]);
            b.kernel.stores.push(Store {
                output: s.output,
                value: remap[s.value as usize],
            });
        }
        Some((body, b.finish()))
    }

    /// The kernel with its 16-bit float (`F16`, `BF16`) arithmetic moved to `F32`: loads
    /// and params of a 16-bit float are converted up once; every value computed from them
    /// is computed in `F32`; a cast to a 16-bit float, a cast from one and a store to one
    /// round the `F32` value to that format (to nearest, ties to even). So a chain of
    /// 16-bit float ops inside one kernel rounds where its value leaves the format (a
    /// store, an `astype`), not after every op. Afterwards 16-bit floats appear only as
    /// loads, params, the casts `F32/F64 -> half` and `half -> F32`, and stores
    /// (what [`Kernel::validate`] requires). Other kernels are returned unchanged.
    /// [`Builder::finish`] applies it.
    pub fn widen_half(&self) -> Kernel {
        let has_half = |d: &DType| d.is_half();
        if !self.values.iter().any(|v| v.dtype.is_half())
            && !self.outputs.iter().any(has_half)
            && !self.inputs.iter().any(has_half)
            && !self.params.iter().any(has_half)
        {
            return self.clone();
        }
        let mut b = Builder::new(self.rank as usize);
        b.kernel.inputs = self.inputs.clone();
        b.kernel.params = self.params.clone();
        // an F32 value equal to `x` rounded to the 16-bit float `h`
        fn rounded(b: &mut Builder, x: ValueId, h: DType) -> ValueId {
            if let Inst::Cast(y) = b.kernel.values[x as usize].inst {
                if b.dtype(y) == h {
                    return x;
                }
            }
            let y = to_half(b, x, h);
            b.push(Inst::Cast(y), DType::F32)
        }
        // `x` as a value of the 16-bit float `h` (one rounding from any dtype)
        fn to_half(b: &mut Builder, x: ValueId, h: DType) -> ValueId {
            if let Inst::Cast(y) = b.kernel.values[x as usize].inst {
                if b.dtype(y) == h {
                    return y;
                }
            }
            let src = match b.dtype(x) {
                DType::F32 | DType::F64 => x,
                d if d.is_half() => {
                    let f = b.push(Inst::Cast(x), DType::F32);
                    return to_half(b, f, h);
                }
                // exact in f64 (i32, u32) or one rounding closer than through f32
                DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::C128 => {
                    b.push(Inst::Cast(x), DType::F64)
                }
                _ => b.push(Inst::Cast(x), DType::F32),
            };
            b.push(Inst::Cast(src), h)
        }
        let mut map = vec![0 as ValueId; self.values.len()];
        for (i, v) in self.values.iter().enumerate() {
            let inst = v.inst.map_operands(|o| map[o as usize]);
            let h = v.dtype.is_half();
            map[i] = match v.inst {
                Inst::Load { .. } | Inst::Param(_) if h => {
                    let x = b.push(inst, v.dtype);
                    b.push(Inst::Cast(x), DType::F32)
                }
                Inst::Const(c) if h => b.push(Inst::Const(c.cast(DType::F32)), DType::F32),
                Inst::Cast(a) => {
                    let sa = self.values[a as usize].dtype;
                    let x = map[a as usize];
                    if sa == v.dtype {
                        x
                    } else {
                        let x = if sa.is_half() {
                            rounded(&mut b, x, sa)
                        } else {
                            x
                        };
                        if h {
                            rounded(&mut b, x, v.dtype)
                        } else {
                            b.cast(x, v.dtype)
                        }
                    }
                }
                _ => b.push(inst, v.dtype.compute()),
            };
        }
        for s in &self.stores {
            let d = self.outputs[s.output as usize];
            let x = map[s.value as usize];
            let x = if d.is_half() {
                to_half(&mut b, x, d)
            } else {
                x
            };
            b.kernel.outputs.push(d);
            b.kernel.stores.push(Store {
                output: s.output,
                value: x,
            });
        }
        let mut k = b.kernel;
        k.outputs = self.outputs.clone();
        k.reduce = self.reduce.map(|r| Reduce {
            value: map[r.value as usize],
            ..r
        });
        k
    }

    /// The canonical form: values not reachable from a store are removed and the rest
    /// renumbered in order. Two kernels with equal normal forms compile to the same code.
    pub fn normalize(&self) -> Kernel {
        let mut live = vec![false; self.values.len()];
        for s in &self.stores {
            live[s.value as usize] = true;
        }
        if let Some(r) = self.reduce {
            live[r.value as usize] = true;
            if let Some(at) = self.reduced_at() {
                live[at] = true;
            }
        }
        for i in (0..self.values.len()).rev() {
            if live[i] {
                for o in self.values[i].inst.operands() {
                    live[o as usize] = true;
                }
            }
        }
        let mut remap = vec![u32::MAX; self.values.len()];
        let mut values = Vec::new();
        for (i, v) in self.values.iter().enumerate() {
            if live[i] {
                remap[i] = values.len() as u32;
                values.push(Value {
                    inst: v.inst.map_operands(|o| remap[o as usize]),
                    dtype: v.dtype,
                });
            }
        }
        let mut stores: Vec<Store> = self
            .stores
            .iter()
            .map(|s| Store {
                output: s.output,
                value: remap[s.value as usize],
            })
            .collect();
        stores.sort_by_key(|s| s.output);
        Kernel {
            rank: self.rank,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            params: self.params.clone(),
            values,
            stores,
            reduce: self.reduce.map(|r| Reduce {
                value: remap[r.value as usize],
                ..r
            }),
        }
    }

    /// A stable text key of the structure (call on a normalized kernel). Holds ops, operand
    /// positions, dtypes, rank and structural constants; never sizes or scalar values.
    pub fn cache_key(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "r{};in{:?};out{:?};p{:?};",
            self.rank, self.inputs, self.outputs, self.params
        );
        for v in &self.values {
            let _ = write!(s, "{:?}:{:?};", v.inst, v.dtype);
        }
        let _ = write!(s, "st{:?}", self.stores);
        if let Some(r) = self.reduce {
            let _ = write!(s, ";red{r:?}");
        }
        s
    }

    /// A 64-bit FNV-1a hash of `cache_key()`, stable across processes and platforms.
    pub fn key_hash(&self) -> u64 {
        fnv1a(self.cache_key().as_bytes())
    }

    /// True when every load reads its input at the linear index itself (no index math,
    /// no guard): the "contiguous" layout class, which allows vectorized access.
    pub fn all_loads_contiguous(&self) -> bool {
        let index = self.values.iter().position(|v| v.inst == Inst::Index);
        self.values.iter().all(|v| match v.inst {
            Inst::Load {
                index: ix, guard, ..
            } => guard.is_none() && Some(ix as usize) == index,
            _ => true,
        })
    }
}

/// 64-bit FNV-1a.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kernel rank={} inputs={:?} outputs={:?} params={:?}",
            self.rank, self.inputs, self.outputs, self.params
        )?;
        for (i, v) in self.values.iter().enumerate() {
            writeln!(f, "  %{i}: {} = {:?}", v.dtype, v.inst)?;
        }
        if let Some(r) = self.reduce {
            writeln!(
                f,
                "  reduce {} of %{} ({:?})",
                r.op.name(),
                r.value,
                r.layout
            )?;
        }
        for s in &self.stores {
            writeln!(f, "  out{} <- %{}", s.output, s.value)?;
        }
        Ok(())
    }
}

/// Builds a kernel with hash-consing: pushing an instruction equal to an existing one
/// returns the existing value, so equal subexpressions (and equal index arithmetic) are
/// computed once.
#[derive(Debug, Default)]
pub struct Builder {
    kernel: Kernel,
    memo: HashMap<Value, ValueId, FastBuild>,
    /// Values pushed that are heavy to compile ([`Value::is_heavy`]).
    heavy: usize,
}

impl Value {
    /// True for values whose CUDA code is long (transcendental functions of any dtype,
    /// random numbers): NVRTC's compile time grows with their number faster than linearly,
    /// so the planner bounds it per kernel.
    pub fn is_heavy(&self) -> bool {
        match self.inst {
            Inst::Unary(op, _) => op.is_transcendental(),
            Inst::Binary(op, _, _) => op.is_transcendental(),
            Inst::Random(..) => true,
            _ => false,
        }
    }
}

/// A small, fast, deterministic hasher (FxHash's mixing) for the builder's memo (building
/// a kernel hashes every value pushed, and SipHash's cost showed in planning long chains)
/// and for lazyfuse's node and plan keys. The field is the running state (a seed).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(pub u64);

impl std::hash::Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for c in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(x as u64);
    }
    fn write_isize(&mut self, x: isize) {
        self.write_u64(x as u64);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// `HashMap` hasher built from [`FastHasher`].
pub type FastBuild = std::hash::BuildHasherDefault<FastHasher>;

impl Builder {
    /// Number of values pushed so far.
    pub fn value_count(&self) -> usize {
        self.kernel.values.len()
    }

    /// A builder for a kernel over a launch shape of rank `rank`.
    pub fn new(rank: usize) -> Builder {
        Builder {
            kernel: Kernel {
                rank: rank as u8,
                ..Kernel::default()
            },
            memo: HashMap::default(),
            heavy: 0,
        }
    }
    /// Adds an input buffer, returning its number.
    pub fn input(&mut self, dtype: DType) -> u32 {
        self.kernel.inputs.push(dtype);
        (self.kernel.inputs.len() - 1) as u32
    }
    /// Adds a scalar parameter and returns the value that reads it.
    pub fn param(&mut self, dtype: DType) -> ValueId {
        self.kernel.params.push(dtype);
        let k = (self.kernel.params.len() - 1) as u32;
        self.push(Inst::Param(k), dtype)
    }
    /// Appends (or reuses) a value. The dtype is checked by `validate`, not here.
    pub fn push(&mut self, inst: Inst, dtype: DType) -> ValueId {
        let v = Value { inst, dtype };
        if let Some(&id) = self.memo.get(&v) {
            return id;
        }
        let id = self.kernel.values.len() as ValueId;
        self.heavy += v.is_heavy() as usize;
        self.kernel.values.push(v);
        self.memo.insert(v, id);
        id
    }
    /// Number of heavy values pushed so far ([`Value::is_heavy`]).
    pub fn heavy_count(&self) -> usize {
        self.heavy
    }
    /// The dtype of a value.
    pub fn dtype(&self, v: ValueId) -> DType {
        self.kernel.values[v as usize].dtype
    }
    /// An I64 structural constant.
    pub fn const_i64(&mut self, x: i64) -> ValueId {
        self.push(Inst::Const(Scalar::I64(x)), DType::I64)
    }
    /// `op(a)` with its result dtype inferred (panics on an operand dtype the op rejects:
    /// that is a bug in the caller).
    pub fn unary(&mut self, op: UnaryOp, a: ValueId) -> ValueId {
        let d = op.result_dtype(self.dtype(a)).expect("unary dtype");
        self.push(Inst::Unary(op, a), d)
    }
    /// `op(a, b)` with its result dtype inferred (panics like `unary`).
    pub fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        let d = op
            .result_dtype(self.dtype(a), self.dtype(b))
            .unwrap_or_else(|| panic!("binary dtype {op:?} {:?}", (self.dtype(a), self.dtype(b))));
        self.push(Inst::Binary(op, a, b), d)
    }
    /// `c ? a : b`.
    pub fn select(&mut self, c: ValueId, a: ValueId, b: ValueId) -> ValueId {
        let d = self.dtype(a);
        self.push(Inst::Where(c, a, b), d)
    }
    /// Cast to `dtype` (no-op when already of that dtype).
    pub fn cast(&mut self, a: ValueId, dtype: DType) -> ValueId {
        if self.dtype(a) == dtype {
            return a;
        }
        self.push(Inst::Cast(a), dtype)
    }
    /// Adds an output storing `v`, returning the output number.
    pub fn store(&mut self, v: ValueId) -> u32 {
        let d = self.dtype(v);
        self.kernel.outputs.push(d);
        let o = (self.kernel.outputs.len() - 1) as u32;
        self.kernel.stores.push(Store {
            output: o,
            value: v,
        });
        o
    }
    /// Makes this a reduction kernel combining `value` by `op`; returns the value that
    /// reads the result (values pushed after it form the epilogue).
    pub fn reduce(&mut self, op: ReduceOp, value: ValueId, layout: ReduceLayout) -> ValueId {
        let d = op
            .result_dtype(self.dtype(value))
            .unwrap_or_else(|| panic!("reduce dtype {op:?} {:?}", self.dtype(value)));
        self.kernel.reduce = Some(Reduce { op, value, layout });
        self.push(Inst::Reduced, d)
    }
    /// The kernel built so far.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    /// Finishes: the normalized kernel.
    pub fn finish(self) -> Kernel {
        self.kernel.widen_half().normalize()
    }
}
