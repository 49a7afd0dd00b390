//! CUDA C renderer: a pure function from the kernel IR to self-contained CUDA C source,
//! plus the packing of launch arguments into the by-value struct the source declares.
//!
//! # The generated kernel
//!
//! One `extern "C" __global__ void lf_<16 hex digits of key_hash>[_i32](const lf_args a)`,
//! written for blocks of [`BLOCK`] threads, walking the `n` elements with a grid-stride
//! loop. Nothing is `#include`d (NVRTC ships no headers): complex types, NaN-aware helpers and
//! the Philox generator are emitted into the source, and only those the kernel uses.
//!
//! # The argument struct (`lf_args`), passed by value
//!
//! Fields, in this order, each at the next offset that is a multiple of its alignment (C
//! natural layout), padding bytes zero:
//!
//! | field | C type | size | align |
//! |---|---|---|---|
//! | `in<k>` for every input `k` | `const T* __restrict__` | 8 | 8 |
//! | `out<k>` for every output `k` | `T* __restrict__` | 8 | 8 |
//! | `n` (element count) | `long long` | 8 | 8 |
//! | `shape[rank]` (omitted for rank 0) | `long long` each | 8·rank | 8 |
//! | `p<k>` for every scalar parameter `k` | by dtype, below | | |
//!
//! Parameter C types: `Bool` → `bool` (1, 1), `I32` → `int` (4, 4), `I64` → `long long`
//! (8, 8), `F32` → `float` (4, 4), `F64` → `double` (8, 8), `C64` → `c32` = `{float re, im}`
//! (8, align 8), `C128` → `c64` = `{double re, im}` (16, align 16). Bool is one byte 0/1,
//! everything little-endian, pointers as `u64`. The total size is rounded up to the struct's
//! alignment (the largest field alignment: 8, or 16 with a `C128` parameter) and may not
//! exceed [`MAX_ARG_BYTES`]. [`arg_layout`] returns the offsets.
//!
//! # Loops and vectorization
//!
//! `IDX` is `unsigned int` with [`RenderOptions::index32`], else `unsigned long long`; it
//! types the grid-stride counter `i` and the axis decomposition of `i` (div/mod by
//! `shape[k]`, innermost axis first, only down to the outermost axis used). Every other I64
//! value is `long long`. Elementwise kernels of rank >= 1 whose smallest output element is 4
//! or 8 bytes, and whose loads are all unguarded, needed for every element (not only under
//! one side of a `where`) and at indices computed from the position alone, handle
//! `pt = 16 / size` consecutive elements per thread and iteration through `__align__`
//! structs of `pt` elements (16 bytes for the smallest outputs, more for larger elements),
//! then a scalar loop finishes the `n % pt` tail. A load at the linear index is one vector
//! read; for any other load the thread first computes the `pt` lane indices (`ix<v>[j]`),
//! then reads one vector when they are consecutive from a multiple of `pt` (`ct<v>`), else
//! one element per lane. Other kernels (guarded loads, gathers) run one element per thread.
//!
//! Reductions over a strided axis (`Outer`) whose body loads are all unguarded at position
//! indices accumulate `16 / size` adjacent outputs per thread (`Rendered::per_thread`, which
//! the runtime's split must use: a block covers `BLOCK / tpr * per_thread` outputs): per
//! reduced position one vector read per load when the index provably steps by one from
//! output to output (sums and differences of `Axis(0)` with values that do not change) and
//! the first is a multiple of the width, else per-column reads; a tile that runs past the
//! last output goes column by column.
//!
//! # Element semantics (NumPy's, matching the host interpreter)
//!
//! * Integers wrap: `+ - *`, negation, `abs`, `square` run in unsigned arithmetic.
//!   `//` floors and `%` takes the divisor's sign; `x // 0 = x % 0 = 0`, `MIN // -1 = MIN`;
//!   `Div` truncates with the same zero/`-1` rules; `pow` by squaring, negative exponents
//!   give 1 for base 1, ±1 for base -1, else 0.
//! * Float `*` is `__fmul_rn`/`__dmul_rn` so no IR product is contracted into an FMA; float
//!   `//` and `%` are NumPy's `npy_divmod` (`x % 0 = NaN`, `x // 0 = x / 0`); `maximum` and
//!   `minimum` propagate NaN and return the second operand on ties, as NumPy does
//!   (`a > b || a != a ? a : b`); `round` is `rint` (half to even);
//!   `sign(±0) = +0`, NaN stays NaN; `rsqrt` is `1 / sqrt`.
//! * Casts: float to int gives `INT_MIN`/`LLONG_MIN` for NaN, infinities and out-of-range
//!   values, else truncates; `I64 -> I32` wraps; to Bool is `!= 0` (either part for complex);
//!   complex to real drops the imaginary part.
//! * Complex (`c32`/`c64` structs): `*` and `/` (Smith's algorithm) and `reciprocal` as NumPy
//!   writes them; `abs` is `hypot`; `sqrt` with C99 special values; `exp`, `log`, `sinh`,
//!   `cosh`, `tanh` (Kahan), `sin`/`cos`/`tan` through them; `asin`, `acos` by Kahan's
//!   formulas (NumPy's signs on the branch cuts), `atan` through `atan2` and `log1p`;
//!   `expm1`, `log2`, `log10` as NumPy; `log1p` as NumPy but by `log1p` for small `|z|`;
//!   `sign` is `z/|z|`; `pow` as NumPy 2.5 (`z**0 = 1`, `0**b = 0` for `re b > 0` else NaN,
//!   exact integer powers below 100, else `exp(b log a)`).
//! * Random: Philox4x32-10 and the mappings of [`crate::semantics::philox`]; `Random(kind,
//!   counter, seed)`; normal F32 is the f64 value rounded.
//! * Guarded loads read only where the guard holds (`g ? in[k] : 0`). `IdxDiv`/`IdxMod` are
//!   plain `/`, `%` (in `IDX` with `index32`), 0 for a zero divisor.

mod cmath;
mod emit;
pub mod fft;
mod prelude;
mod reduce;
mod scan;
pub mod scatter;

use crate::{DType, IrError, Kernel, LaunchArgs, Scalar};

/// Threads per block every rendered kernel is written for (`__launch_bounds__`).
pub const BLOCK: u32 = 256;

/// Largest accepted argument struct, in bytes (CUDA's classic kernel parameter limit is 4096).
pub const MAX_ARG_BYTES: usize = 4000;

/// Target choices that are part of the compiled kernel's identity (and its cache key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RenderOptions {
    /// Index arithmetic in 32-bit `int` (the caller guarantees every index fits).
    ///
    /// Precisely: the grid-stride loop counter and the division of the linear index into
    /// axis components (and `IdxDiv`/`IdxMod`) run in `unsigned int`. The caller guarantees
    /// `n < 2^31`, every index value in `[0, 2^31)`, and fewer than `2^31` launched threads;
    /// [`pack_args`] rejects `n >= 2^31`.
    pub index32: bool,
    /// One element per thread and iteration, no 16-byte vectors (elementwise kernels):
    /// for launches too small to fill the GPU with vectorized threads, where more threads
    /// finish sooner. Reduction kernels ignore it.
    pub scalar: bool,
}

/// Rendered source and how to launch it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// Complete CUDA C, no headers needed.
    pub source: String,
    /// The `extern "C"` name of the kernel.
    pub entry: String,
    /// Threads per block the kernel is written for.
    pub block: u32,
    /// Elements each thread handles per grid-stride iteration (vector width); for a
    /// reduction, the adjacent outputs each thread accumulates (see the module docs).
    ///
    /// Above 1 the kernel reads and writes whole 16-byte vectors, so every input and output
    /// pointer must be 16-byte aligned (the runtime's buffers are 256-byte aligned and views
    /// never offset a pointer: offsets are index arithmetic).
    pub per_thread: u32,
}

/// What one field of the argument struct holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// Device pointer of input buffer `k`.
    Input(u32),
    /// Device pointer of output buffer `k`.
    Output(u32),
    /// The element count `n`.
    Count,
    /// The launch shape, `rank` values.
    Shape,
    /// Scalar parameter `k`.
    Param(u32),
    /// Reductions: device pointer of the partial results (`m * chunks` values).
    Workspace,
    /// Reductions: device pointer of the partial positions (`m * chunks` I64, arg ops).
    WorkspaceIdx,
    /// Reductions: device pointer of the zeroed completion counters (one per row block).
    Counters,
    /// Reductions: threads per output (a power of two dividing the block).
    ThreadsPerOutput,
    /// Reductions: chunks the reduced extent is split into (blocks per output).
    Chunks,
}

/// How one launch of a reduction kernel is split (chosen by the runtime per launch; see
/// the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReduceLaunch {
    /// Threads sharing one output: a power of two, at most [`BLOCK`].
    pub threads_per_output: u32,
    /// Blocks sharing one output (`gridDim.y`); above 1 the partials go through
    /// `workspace` and the last block of each row block finishes them.
    pub chunks: u32,
    /// Device pointer of `m * chunks` partial values (unused when `chunks == 1`).
    pub workspace: u64,
    /// Device pointer of `m * chunks` partial positions (arg ops with `chunks > 1`).
    pub workspace_idx: u64,
    /// Device pointer of zeroed `u32` counters, one per row block; the kernel leaves them
    /// zeroed again.
    pub counters: u64,
}

/// One field of the argument struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgField {
    /// What it holds.
    pub kind: ArgKind,
    /// The C declaration (`const float* __restrict__ in0`, `long long shape[2]`, ...).
    pub decl: String,
    /// Byte offset in the struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// The byte layout of a kernel's argument struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgLayout {
    /// Fields in declaration order.
    pub fields: Vec<ArgField>,
    /// Total size in bytes (a multiple of `align`).
    pub size: usize,
    /// Alignment of the struct.
    pub align: usize,
}

/// C type name of an element of `d` in generated code.
pub fn c_type(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::C64 => "c32",
        DType::C128 => "c64",
        DType::U8 => "unsigned char",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
        DType::I8 => "signed char",
        DType::I16 => "short",
        // 16-bit floats are stored as their bits (see `prelude`'s conversion helpers)
        DType::F16 | DType::BF16 => "unsigned short",
    }
}

/// C alignment of `d` (equal to its size except `C64`, aligned to 8, and `C128` to 16).
fn c_align(d: DType) -> usize {
    d.size()
}

/// Computes the argument struct layout of `kernel` (see the module docs for the rule).
pub fn arg_layout(kernel: &Kernel) -> Result<ArgLayout, IrError> {
    let mut fields = Vec::new();
    let mut off = 0usize;
    let mut align = 8usize;
    let mut push = |kind, decl: String, size: usize, al: usize| {
        off = off.div_ceil(al) * al;
        fields.push(ArgField {
            kind,
            decl,
            offset: off,
            size,
        });
        off += size;
        align = align.max(al);
    };
    for (k, &d) in kernel.inputs.iter().enumerate() {
        let decl = format!("const {}* __restrict__ in{k}", c_type(d));
        push(ArgKind::Input(k as u32), decl, 8, 8);
    }
    for (k, &d) in kernel.outputs.iter().enumerate() {
        let decl = format!("{}* __restrict__ out{k}", c_type(d));
        push(ArgKind::Output(k as u32), decl, 8, 8);
    }
    push(ArgKind::Count, "long long n".into(), 8, 8);
    if kernel.rank > 0 {
        let decl = format!("long long shape[{}]", kernel.rank);
        push(ArgKind::Shape, decl, 8 * kernel.rank as usize, 8);
    }
    for (k, &d) in kernel.params.iter().enumerate() {
        let decl = format!("{} p{k}", c_type(d));
        push(ArgKind::Param(k as u32), decl, d.size(), c_align(d));
    }
    if kernel.reduce.is_some() {
        push(ArgKind::Workspace, "void* ws".into(), 8, 8);
        push(ArgKind::WorkspaceIdx, "long long* wsi".into(), 8, 8);
        push(ArgKind::Counters, "unsigned int* counters".into(), 8, 8);
        push(ArgKind::ThreadsPerOutput, "int tpr".into(), 4, 4);
        push(ArgKind::Chunks, "int chunks".into(), 4, 4);
    }
    let size = off.div_ceil(align) * align;
    if size > MAX_ARG_BYTES {
        return Err(IrError(format!(
            "kernel argument struct is {size} bytes, more than the {MAX_ARG_BYTES} allowed"
        )));
    }
    Ok(ArgLayout {
        fields,
        size,
        align,
    })
}

/// The entry name of `kernel` (normalized first): `lf_` + 16 hex digits of its key hash,
/// plus `_i32` for 32-bit index math.
pub fn entry_name(kernel: &Kernel, opts: &RenderOptions) -> String {
    let h = kernel.normalize().key_hash();
    let suffix = if opts.index32 { "_i32" } else { "" };
    let scalar = if opts.scalar { "_s" } else { "" };
    format!("lf_{h:016x}{suffix}{scalar}")
}

/// Renders `kernel` to CUDA C.
///
/// The kernel is validated, then normalized (dead values dropped), so two kernels with the
/// same normal form give the same source and entry name. The element computations follow
/// NumPy's rules as documented in [`crate::semantics`] and [`crate::ops`].
pub fn render(kernel: &Kernel, opts: &RenderOptions) -> Result<Rendered, IrError> {
    kernel.validate()?;
    let k = kernel.normalize();
    let layout = arg_layout(&k)?;
    let entry = entry_name(&k, opts);
    let emitted = emit::emit(&k, opts, &layout, &entry);
    Ok(Rendered {
        source: emitted.source,
        entry,
        block: BLOCK,
        per_thread: emitted.per_thread,
    })
}

/// Packs the kernel's single by-value argument: device pointers of inputs and outputs,
/// the element count, the launch shape and every scalar parameter, laid out exactly as the
/// struct `render` declares.
pub fn pack_args(
    kernel: &Kernel,
    opts: &RenderOptions,
    inputs: &[u64],
    outputs: &[u64],
    args: &LaunchArgs,
) -> Result<Vec<u8>, IrError> {
    pack_args_reduce(
        kernel,
        opts,
        inputs,
        outputs,
        args,
        &ReduceLaunch::default(),
    )
}

/// [`pack_args`] for any kernel, with the split of a reduction launch (ignored for
/// elementwise kernels).
pub fn pack_args_reduce(
    kernel: &Kernel,
    opts: &RenderOptions,
    inputs: &[u64],
    outputs: &[u64],
    args: &LaunchArgs,
    red: &ReduceLaunch,
) -> Result<Vec<u8>, IrError> {
    kernel.validate()?;
    let layout = arg_layout(kernel)?;
    pack_args_prepared(kernel, &layout, opts, inputs, outputs, args, red)
}

/// [`pack_args_reduce`] for a kernel already validated (every kernel a compiled plan
/// launches was validated when it was rendered) with its precomputed [`arg_layout`]: the
/// launch-time checks of counts, ranks and dtypes stay, nothing is allocated but the blob.
pub fn pack_args_prepared(
    kernel: &Kernel,
    layout: &ArgLayout,
    opts: &RenderOptions,
    inputs: &[u64],
    outputs: &[u64],
    args: &LaunchArgs,
    red: &ReduceLaunch,
) -> Result<Vec<u8>, IrError> {
    if kernel.reduce.is_some()
        && (!red.threads_per_output.is_power_of_two()
            || red.threads_per_output > BLOCK
            || red.chunks == 0)
    {
        return Err(IrError(format!("invalid reduction launch {red:?}")));
    }
    let err = |m: String| Err(IrError(m));
    if inputs.len() != kernel.inputs.len() {
        return err(format!(
            "{} input pointers for {} inputs",
            inputs.len(),
            kernel.inputs.len()
        ));
    }
    if outputs.len() != kernel.outputs.len() {
        return err(format!(
            "{} output pointers for {} outputs",
            outputs.len(),
            kernel.outputs.len()
        ));
    }
    if args.shape.len() != kernel.rank as usize {
        return err(format!(
            "launch shape {:?} has rank {}, kernel has rank {}",
            args.shape,
            args.shape.len(),
            kernel.rank
        ));
    }
    if args.params.len() != kernel.params.len() {
        return err(format!(
            "{} scalar arguments for {} parameters",
            args.params.len(),
            kernel.params.len()
        ));
    }
    for (k, (p, &d)) in args.params.iter().zip(&kernel.params).enumerate() {
        if p.dtype() != d {
            return err(format!(
                "scalar argument {k} is {}, expected {d}",
                p.dtype()
            ));
        }
    }
    let mut n: i64 = 1;
    for &s in &args.shape {
        n = i64::try_from(s)
            .ok()
            .and_then(|s| n.checked_mul(s))
            .ok_or_else(|| IrError(format!("launch shape {:?} too large", args.shape)))?;
    }
    if opts.index32 && n > i32::MAX as i64 {
        return err(format!("{n} elements do not fit 32-bit index math"));
    }
    let mut buf = vec![0u8; layout.size];
    for f in &layout.fields {
        let at = &mut buf[f.offset..f.offset + f.size];
        match f.kind {
            ArgKind::Input(k) => at.copy_from_slice(&inputs[k as usize].to_le_bytes()),
            ArgKind::Output(k) => at.copy_from_slice(&outputs[k as usize].to_le_bytes()),
            ArgKind::Count => at.copy_from_slice(&n.to_le_bytes()),
            ArgKind::Shape => {
                for (chunk, &s) in at.chunks_exact_mut(8).zip(&args.shape) {
                    chunk.copy_from_slice(&(s as i64).to_le_bytes());
                }
            }
            ArgKind::Param(k) => write_scalar(at, &args.params[k as usize]),
            ArgKind::Workspace => at.copy_from_slice(&red.workspace.to_le_bytes()),
            ArgKind::WorkspaceIdx => at.copy_from_slice(&red.workspace_idx.to_le_bytes()),
            ArgKind::Counters => at.copy_from_slice(&red.counters.to_le_bytes()),
            ArgKind::ThreadsPerOutput => at.copy_from_slice(&red.threads_per_output.to_le_bytes()),
            ArgKind::Chunks => at.copy_from_slice(&red.chunks.to_le_bytes()),
        }
    }
    Ok(buf)
}

/// Writes `s` in its C representation into `at` (exactly its size).
fn write_scalar(at: &mut [u8], s: &Scalar) {
    match *s {
        Scalar::Bool(b) => at[0] = b as u8,
        Scalar::I32(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::I64(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::F32(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::F64(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::C64(v) => {
            at[..4].copy_from_slice(&v.re.to_le_bytes());
            at[4..].copy_from_slice(&v.im.to_le_bytes());
        }
        Scalar::C128(v) => {
            at[..8].copy_from_slice(&v.re.to_le_bytes());
            at[8..].copy_from_slice(&v.im.to_le_bytes());
        }
        Scalar::U8(v) => at[0] = v,
        Scalar::I8(v) => at[0] = v as u8,
        Scalar::U16(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::I16(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::U32(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::U64(v) => at.copy_from_slice(&v.to_le_bytes()),
        Scalar::F16(v) => at.copy_from_slice(&v.to_bits().to_le_bytes()),
        Scalar::BF16(v) => at.copy_from_slice(&v.to_bits().to_le_bytes()),
    }
}
