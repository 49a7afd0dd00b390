//! CUDA C of one generated FFT pass ([`crate::fft::FftPass`]): a block loads its lines into
//! shared memory through `lf_fft_load`, runs the Stockham stages there (butterflies in
//! registers, twiddles from the table argument) and stores through `lf_fft_store`.
//!
//! # The kernel
//! `extern "C" __global__ void lf_fft_<16 hex digits>(const lf_fft_args a)`, blocks of
//! [`FftPass::block`] threads, one block per [`FftPass::lines_per_block`] lines (the last
//! block may hold fewer). Three phases, separated by `__syncthreads`:
//! Line `li` of the block sits at `sm + li * pitch`, its element `i` at `lf_pad(i)` (one
//! slot skipped per 128 bytes, odd pitch: [`crate::fft::pitch`]), against bank conflicts.
//! Offsets are 32-bit integers for [`FftPass::index32`] passes.
//! 1. *load*: the block's lines into `sm`, element `p` of line `li` from
//!    `lf_fft_load(a, base_in[li] + p * in_stride)` (times `tw_big[p * lb]` for
//!    `twiddle_in` passes), neighbouring threads on neighbouring lines when the pass's
//!    loads are strided, else on neighbouring elements;
//! 2. *stages*: `threads_per_line` threads per line; per stage each thread reads its
//!    butterflies' inputs into registers, the block synchronizes, and it writes the outputs
//!    (in place in `sm`);
//! 3. *store*: `lf_fft_store(a, base_out[li] + k * out_stride, sm[li * n + k])`.
//!
//! A pass whose loads (stores) run along the line skips phase 1 (3): its first (last)
//! stage reads (writes) global memory directly from its registers, coalesced.
//!
//! `lf_fft_load` and `lf_fft_store` take the linear element index in the input and output
//! buffers: a fused pass ([`render_fused`]) computes its producer's value there (a
//! prologue kernel's body, `lf_pro_args pro` in the arguments) and its consumer's result
//! (an epilogue kernel's body at the shifted index, `lf_epi_args epi`) instead of reading
//! and writing plain buffers.
//!
//! # Arguments (`lf_fft_args`, by value, 19 fields of 8 bytes: [`ARG_BYTES`])
//! `in`, `out`, `tw` (the table of the line length), `tw_big` (the table of `big_n`, or any
//! pointer when the pass does not use it), `lines` (total), `cnt_b`, `cnt_c` (counts of the
//! middle and fastest line coordinates), then `da, db, dc, stride` of the input and of the
//! output ([`crate::fft::LineMap`]), and the four bounds of a pruned program's support
//! (`PassArgs::keep`). Written by [`pack_args`].
//!
//! # Numerics
//! Twiddles are read from tables the host computed in f64 and rounded once, never from
//! `sincosf` (whose fast-math variants lose most digits near the zeros of sin); the constants
//! of radices 3, 5, 7 and 8 are literals of the f64 values rounded to the precision. Complex
//! products are written plainly (NVRTC may contract them into FMAs, which only helps here).

use super::{ArgLayout, Rendered};
use crate::fft::{odd_radix_constants, FftPass, PassArgs, RealIo};
use crate::ir::fnv1a;
use crate::{DType, Inst, IrError, Kernel, LaunchArgs};
use std::fmt::Write;

/// Bytes of the argument struct.
pub const ARG_BYTES: usize = 152;

/// The argument struct of one launch: device pointers `[in, out, tw, tw_big]`, then the
/// line counts and maps of `args` (see the module docs).
pub fn pack_args(args: &PassArgs, ptrs: [u64; 4]) -> Vec<u8> {
    let fields: [u64; 19] = [
        ptrs[0],
        ptrs[1],
        ptrs[2],
        ptrs[3],
        args.line_count(),
        args.lines[1],
        args.lines[2],
        args.input.dist[0] as u64,
        args.input.dist[1] as u64,
        args.input.dist[2] as u64,
        args.input.stride as u64,
        args.output.dist[0] as u64,
        args.output.dist[1] as u64,
        args.output.dist[2] as u64,
        args.output.stride as u64,
        args.keep[0],
        args.keep[1],
        args.keep[2],
        args.keep[3],
    ];
    fields.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// The entry name of `pass`: `lf_fft_` and 16 hex digits of a hash of its structure.
pub fn entry(pass: &FftPass) -> String {
    format!("lf_fft_{:016x}", fnv1a(format!("{pass:?}").as_bytes()))
}

/// A floating literal of `v` rounded to the real type of `dtype`.
fn lit(v: f64, dtype: DType) -> String {
    match dtype {
        DType::C64 => format!("{:?}f", v as f32),
        _ => format!("{v:?}"),
    }
}

/// Renders `pass` (see the module docs). Pure; the pass must come from [`FftPass::new`].
pub fn render(pass: &FftPass) -> Rendered {
    render_pass(pass, &Fused::default())
}

/// Elementwise work fused into a pass (see [`render_fused`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Fused<'a> {
    /// Computes the pass's input (first passes): element `i` of the transform's input is
    /// the value this elementwise kernel of one output stores at its linear index `i`
    /// (launched over the input's shape).
    pub prologue: Option<&'a Kernel>,
    /// Consumes the pass's output (last passes).
    pub epilogue: Option<Epilogue<'a>>,
    /// Turns the first transform's output into the second's input in a
    /// [`FftPass::round_trip`] pass (and only there).
    pub mid: Option<Mid<'a>>,
}

/// The work between the two transforms of a [`FftPass::round_trip`] pass: an elementwise
/// kernel of one output of the pass's dtype, launched over the transforms' shape, that
/// reads the first transform's output (its input [`Mid::value_input`]) in one unguarded
/// load at its own index; its result at that index is the second transform's input.
#[derive(Clone, Copy, Debug)]
pub struct Mid<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// The input standing for the first transform's output (not read through its pointer).
    pub value_input: u32,
}

/// A consumer of a transform's output computed in the last pass's store: an elementwise
/// kernel of one output, launched over the transform's shape, that reads the transform's
/// output (its input [`Epilogue::value_input`]) in one unguarded load at a cyclic shift of
/// its own index. Element `i` of the transform's output (multi-index `i_k`) is read by the
/// kernel's element `j` with `j_k = (i_k + s_k) mod n_k`, `s_k` (in `[0, n_k)`) the I64
/// parameters from [`Epilogue::shift_param`] on, one per axis; the store computes element
/// `j` with the value `v` in place of that load and writes it to the kernel's output.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// The input standing for the transform's output (not read through its pointer).
    pub value_input: u32,
    /// The first of the kernel's `rank` I64 shift parameters.
    pub shift_param: u32,
}

/// Offsets of the prologue's and the epilogue's argument structs in a fused pass's
/// arguments (after [`pack_args`]'s fields) and the arguments' total size (the middle
/// work's struct, where there is one, follows the epilogue's).
pub fn fused_layout(fused: &Fused) -> Result<(usize, usize, usize), IrError> {
    let p = FusedPacker::new(fused)?;
    Ok((p.pro_at, p.epi_at, p.size))
}

/// What packing a fused pass's arguments needs besides the values: the prologue's and the
/// epilogue's argument layouts with their offsets, and the blob's size. Built once per
/// fused pass (it validates the kernels and lays out their structs), then
/// [`FusedPacker::pack`] allocates nothing but the blob, for a replay that repacks every
/// run.
#[derive(Clone, Debug)]
pub struct FusedPacker {
    pro: Option<ArgLayout>,
    epi: Option<ArgLayout>,
    mid: Option<ArgLayout>,
    /// Where each struct starts (where it would start, when absent).
    pro_at: usize,
    epi_at: usize,
    mid_at: usize,
    size: usize,
}

impl FusedPacker {
    /// The layout of `fused`'s arguments; an error when a kernel is invalid or the
    /// arguments exceed CUDA's limit.
    pub fn new(fused: &Fused) -> Result<Self, IrError> {
        let mut end = ARG_BYTES;
        let mut align = 8;
        let mut place = |k: Option<&Kernel>| -> Result<(Option<ArgLayout>, usize), IrError> {
            let Some(k) = k else { return Ok((None, end)) };
            k.validate()?;
            let layout = super::arg_layout(k)?;
            let at = end.div_ceil(layout.align) * layout.align;
            end = at + layout.size;
            align = align.max(layout.align);
            Ok((Some(layout), at))
        };
        let (pro, pro_at) = place(fused.prologue)?;
        let (epi, epi_at) = place(fused.epilogue.map(|e| e.kernel))?;
        let (mid, mid_at) = place(fused.mid.map(|m| m.kernel))?;
        let size = end.div_ceil(align) * align;
        if size > super::MAX_ARG_BYTES {
            return Err(IrError(format!(
                "fused FFT pass arguments of {size} bytes exceed {}",
                super::MAX_ARG_BYTES
            )));
        }
        Ok(Self {
            pro,
            epi,
            mid,
            pro_at,
            epi_at,
            mid_at,
            size,
        })
    }

    /// The argument blob of a pass with `fused` work (the kernels this packer was built
    /// from): [`pack_args`]'s fields, then the prologue's, the epilogue's and the middle
    /// work's structs.
    pub fn pack(
        &self,
        args: &PassArgs,
        ptrs: [u64; 4],
        fused: &Fused,
        pro: Option<FusedArgs>,
        epi: Option<FusedArgs>,
        mid: Option<FusedArgs>,
    ) -> Result<Vec<u8>, IrError> {
        let mut blob = pack_args(args, ptrs);
        let opts = Default::default();
        let parts = [
            (fused.prologue, pro, &self.pro, self.pro_at),
            (
                fused.epilogue.map(|e| e.kernel),
                epi,
                &self.epi,
                self.epi_at,
            ),
            (fused.mid.map(|m| m.kernel), mid, &self.mid, self.mid_at),
        ];
        for (k, a, layout, at) in parts {
            let (Some(k), Some(a)) = (k, a) else {
                continue;
            };
            let Some(layout) = layout else {
                return Err(IrError(
                    "fused FFT work its packer was not built for".into(),
                ));
            };
            let zeros = [0u64; 1];
            let outs = match a.outputs.is_empty() {
                true if k.outputs.len() <= 1 => &zeros[..k.outputs.len()],
                true => return Err(IrError("a fused kernel with several outputs".into())),
                false => a.outputs,
            };
            let red = Default::default();
            let p = super::pack_args_prepared(k, layout, &opts, a.inputs, outs, a.args, &red)?;
            blob.resize(at, 0);
            blob.extend_from_slice(&p);
        }
        blob.resize(self.size, 0);
        Ok(blob)
    }
}

/// Checks that `fused` fits `pass` (see [`Fused`], [`Epilogue`]).
fn check_fused(pass: &FftPass, fused: &Fused) -> Result<(), IrError> {
    let err = |m: String| Err(IrError(m));
    let (in_dt, out_dt) = (
        pass.real.in_dtype(pass.dtype),
        pass.real.out_dtype(pass.dtype),
    );
    if let Some(k) = fused.prologue {
        k.validate()?;
        if k.reduce.is_some() || k.outputs.as_slice() != [in_dt] || k.stores.len() != 1 {
            return err(format!(
                "a fused FFT prologue is an elementwise kernel with one {in_dt} output"
            ));
        }
    }
    if let Some(e) = fused.epilogue {
        let k = e.kernel;
        k.validate()?;
        let rank = k.rank as u32;
        let loads = value_loads(k, e.value_input);
        let shifts_ok = (e.shift_param..e.shift_param + rank)
            .all(|p| k.params.get(p as usize) == Some(&DType::I64));
        if k.reduce.is_some()
            || k.outputs.len() != 1
            || k.stores.len() != 1
            || k.inputs.get(e.value_input as usize) != Some(&out_dt)
            || loads.as_slice() != [None]
            || !shifts_ok
        {
            return err(format!(
                "a fused FFT epilogue is an elementwise kernel with one output reading its \
                 {out_dt} input {} once, unguarded, with {rank} shift parameters",
                e.value_input
            ));
        }
    }
    if pass.real != RealIo::Complex && (pass.round_trip || pass.masked) {
        return err("a real FFT pass neither goes round trip nor masks its loads".into());
    }
    if pass.round_trip != fused.mid.is_some() {
        return err("a round-trip FFT pass fuses middle work, no other pass does".into());
    }
    if let Some(m) = fused.mid {
        let k = m.kernel;
        k.validate()?;
        let loads = value_loads(k, m.value_input);
        if k.reduce.is_some()
            || k.outputs.as_slice() != [pass.dtype]
            || k.stores.len() != 1
            || k.inputs.get(m.value_input as usize) != Some(&pass.dtype)
            || loads.as_slice() != [None]
        {
            return err(format!(
                "fused FFT middle work is an elementwise kernel with one {} output reading its \
                 {} input {} once, unguarded, at its own index",
                pass.dtype, pass.dtype, m.value_input
            ));
        }
    }
    fused_layout(fused).map(|_| ())
}

/// The guards of `k`'s loads of its input `value_input` (a fused kernel's transform value,
/// which must be one unguarded load).
fn value_loads(k: &Kernel, value_input: u32) -> Vec<Option<crate::ValueId>> {
    k.values
        .iter()
        .filter_map(|v| match v.inst {
            Inst::Load { input, guard, .. } if input == value_input => Some(guard),
            _ => None,
        })
        .collect()
}

/// The entry name of `pass` with `fused`: `lf_fftf_` and 16 hex digits of a hash of the
/// structures.
pub fn fused_entry(pass: &FftPass, fused: &Fused) -> String {
    let mut key = format!("{pass:?}");
    if let Some(k) = fused.prologue {
        key += &format!("|pro {}", k.normalize().cache_key());
    }
    if let Some(e) = fused.epilogue {
        key += &format!(
            "|epi {} {} {}",
            e.value_input,
            e.shift_param,
            e.kernel.normalize().cache_key()
        );
    }
    if let Some(m) = fused.mid {
        key += &format!(
            "|mid {} {}",
            m.value_input,
            m.kernel.normalize().cache_key()
        );
    }
    format!("lf_fftf_{:016x}", fnv1a(key.as_bytes()))
}

/// Renders `pass` with `fused`: a prologue computes each input element inside
/// `lf_fft_load` from its own inputs and parameters (the pass's `in` pointer is not read);
/// an epilogue computes its output element inside `lf_fft_store` from the transform's
/// value (the pass's `out` pointer is not written). Their argument structs follow the
/// pass's arguments (see [`fused_layout`], [`pack_fused_args`]). Pure; `Err` for work
/// that does not fit the pass (see [`Fused`]).
pub fn render_fused(pass: &FftPass, fused: &Fused) -> Result<Rendered, IrError> {
    check_fused(pass, fused)?;
    let pro = fused.prologue.map(|k| k.normalize());
    let epi = fused.epilogue.map(|e| (e.kernel.normalize(), e));
    let mid = fused.mid.map(|m| (m.kernel.normalize(), m));
    let norm = Fused {
        prologue: pro.as_ref(),
        epilogue: epi.as_ref().map(|(k, e)| Epilogue { kernel: k, ..*e }),
        mid: mid.as_ref().map(|(k, m)| Mid { kernel: k, ..*m }),
    };
    Ok(render_pass(pass, &norm))
}

/// The pointers and launch arguments of a fused kernel's argument struct.
#[derive(Clone, Copy, Debug)]
pub struct FusedArgs<'a> {
    /// Input pointers (any value for an epilogue's [`Epilogue::value_input`]).
    pub inputs: &'a [u64],
    /// Output pointers (none read for a prologue).
    pub outputs: &'a [u64],
    /// Launch shape (the transform's) and parameters.
    pub args: &'a LaunchArgs,
}

/// The argument blob of a fused pass: [`pack_args`]'s fields, then the prologue's, the
/// epilogue's and the middle work's argument structs at their offsets ([`fused_layout`]).
pub fn pack_fused_args(
    args: &PassArgs,
    ptrs: [u64; 4],
    fused: &Fused,
    pro: Option<FusedArgs>,
    epi: Option<FusedArgs>,
    mid: Option<FusedArgs>,
) -> Result<Vec<u8>, IrError> {
    FusedPacker::new(fused)?.pack(args, ptrs, fused, pro, epi, mid)
}

/// Declares the argument struct `name` of `k`.
fn arg_struct(w: &mut String, name: &str, k: &Kernel) {
    if let Ok(layout) = super::arg_layout(k) {
        let _ = writeln!(w, "struct {name} {{");
        for f in &layout.fields {
            let _ = writeln!(w, "  {}; /* offset {} */", f.decl, f.offset);
        }
        let _ = writeln!(w, "}};");
    }
}

/// [`render`], with the normalized, checked `fused` work in its load and store.
fn render_pass(pass: &FftPass, fused: &Fused) -> Rendered {
    let (c, r) = match pass.dtype {
        DType::C64 => ("c32", "float"),
        _ => ("c64", "double"),
    };
    // the element types at the two ends (real for the last-axis pass of a real transform)
    let in_t = if pass.real == RealIo::R2C { r } else { c };
    let out_t = if pass.real == RealIo::C2R { r } else { c };
    let align = if pass.dtype == DType::C64 { 8 } else { 16 };
    let n = pass.n as usize;
    let lpb = pass.lines_per_block as usize;
    let tpl = pass.threads_per_line as usize;
    let block = pass.block() as usize;
    let any = fused.prologue.is_some() || fused.epilogue.is_some() || fused.mid.is_some();
    let name = match any {
        true => fused_entry(pass, fused),
        false => entry(pass),
    };
    // The fused kernels' index arithmetic (the decomposition of the element index into
    // axis coordinates, index maps' `/` and `%`) in 32 bits where the pass's is: 64-bit
    // division is a long software sequence per element (the caller clears `index32` when
    // a fused buffer holds 2^31 elements or more).
    let opts = super::RenderOptions {
        index32: pass.index32,
        ..Default::default()
    };
    let mut helpers = std::collections::BTreeSet::new();
    let pro = fused.prologue.map(|k| {
        let (body, h) = super::emit::device_body(k, &opts, "  ", None);
        helpers.extend(h);
        (k, body)
    });
    let epi = fused.epilogue.map(|e| {
        let (body, h) = super::emit::device_body(e.kernel, &opts, "  ", Some(e.value_input));
        helpers.extend(h);
        (e, body)
    });
    let mid = fused.mid.map(|m| {
        let (body, h) = super::emit::device_body(m.kernel, &opts, "  ", Some(m.value_input));
        helpers.extend(h);
        (m, body)
    });
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "// generated FFT pass: {pass:?}");
    let mut members = String::new();
    if !any {
        let _ = writeln!(w, "struct __align__({align}) {c} {{ {r} re, im; }};");
    } else {
        helpers.insert(super::prelude::Helper::CType(pass.dtype));
        for (what, k) in [
            ("prologue", fused.prologue),
            ("epilogue", fused.epilogue.map(|e| e.kernel)),
            ("middle", fused.mid.map(|m| m.kernel)),
        ] {
            if let Some(k) = k {
                let _ = writeln!(w, "// fused {what} IR:");
                for line in k.to_string().lines() {
                    let _ = writeln!(w, "//   {line}");
                }
            }
        }
        let idx = if pass.index32 {
            "unsigned int"
        } else {
            "unsigned long long"
        };
        let _ = writeln!(w, "typedef {idx} IDX;");
        super::prelude::emit_helpers(&helpers, w);
        if let Some(k) = fused.prologue {
            arg_struct(w, "lf_pro_args", k);
            members += "  lf_pro_args pro;\n";
        }
        if let Some(e) = fused.epilogue {
            arg_struct(w, "lf_epi_args", e.kernel);
            members += "  lf_epi_args epi;\n";
        }
        if let Some(m) = fused.mid {
            arg_struct(w, "lf_mid_args", m.kernel);
            members += "  lf_mid_args mid;\n";
        }
    }
    let _ = writeln!(
        w,
        "struct lf_fft_args {{\n  const {in_t}* in;\n  {out_t}* out;\n  const {c}* __restrict__ tw;\n  \
         const {c}* __restrict__ tw_big;\n  long long lines, cnt_b, cnt_c;\n  \
         long long in_da, in_db, in_dc, in_stride;\n  \
         long long out_da, out_db, out_dc, out_stride;\n  \
         long long keep0, keep1, keep2, keep3;\n{members}}};"
    );
    let _ = writeln!(
        w,
        "__device__ __forceinline__ {c} lf_cadd({c} a, {c} b) {{ return {{a.re + b.re, a.im + b.im}}; }}\n\
         __device__ __forceinline__ {c} lf_csub({c} a, {c} b) {{ return {{a.re - b.re, a.im - b.im}}; }}\n\
         __device__ __forceinline__ {c} lf_rmul({r} k, {c} a) {{ return {{k * a.re, k * a.im}}; }}\n\
         __device__ __forceinline__ {c} lf_conj({c} a) {{ return {{a.re, -a.im}}; }}"
    );
    // the twiddle product and the radix-4 rotation of each direction the stages run (a
    // round-trip pass's second set, `_b`, runs the other way)
    let dirs: &[(bool, &str)] = match pass.round_trip {
        true => &[(pass.inverse, "_f"), (!pass.inverse, "_b")],
        false => &[(pass.inverse, "")],
    };
    for &(inverse, sfx) in dirs {
        direction_helpers(w, c, inverse, sfx);
    }
    let _ = writeln!(
        w,
        "// the load and store of a pass, by linear element index in the input and output"
    );
    match &pro {
        None => {
            let _ = writeln!(
                w,
                "__device__ __forceinline__ {in_t} lf_fft_load(const lf_fft_args& a, long long i) {{ return a.in[i]; }}"
            );
        }
        Some((k, body)) => {
            let _ = writeln!(
                w,
                "__device__ __forceinline__ {in_t} lf_fft_load(const lf_fft_args& fa, long long li) {{\n  \
                 const lf_pro_args& a = fa.pro;\n  const IDX i = (IDX)li;\n{body}  return v{};\n}}",
                k.stores[0].value
            );
        }
    }
    match &epi {
        None => {
            let _ = writeln!(
                w,
                "__device__ __forceinline__ void lf_fft_store(const lf_fft_args& a, long long i, {out_t} v) {{ a.out[i] = v; }}"
            );
        }
        Some((e, body)) => {
            // the consumer's element j of the transform's element li: j_k = (i_k + s_k) mod n_k
            let _ = writeln!(
                w,
                "__device__ __forceinline__ void lf_fft_store(const lf_fft_args& fa, long long li, {out_t} lf_v) {{\n  \
                 const lf_epi_args& a = fa.epi;\n  IDX rem = (IDX)li, j = 0, st = 1;"
            );
            // The outermost coordinate is what remains (no division); where this pass runs
            // along the last axis in one pass (contiguous, untwiddled: the last pass of such
            // a transform), that axis's extent is the line length, a constant the compiler
            // divides by without a division (`epilogue_extent_fits` checks it at launch).
            let rank = e.kernel.rank as u32;
            for k in (0..rank).rev() {
                let nk = match k + 1 == rank && line_is_last_axis(pass) {
                    true => format!("(IDX){}", pass.real.out_len(n)),
                    false => format!("(IDX)a.shape[{k}]"),
                };
                let ik = match k {
                    0 => "rem".to_string(),
                    _ => "rem % nk;\n    rem /= nk".to_string(),
                };
                let _ = writeln!(
                    w,
                    "  {{\n    const IDX nk = {nk}, ik = {ik};\n    \
                     IDX jk = ik + (IDX)a.p{};\n    if (jk >= nk) jk -= nk;\n    j += jk * st;\n    st *= nk;\n  }}",
                    e.shift_param + k
                );
            }
            let _ = writeln!(
                w,
                "  const IDX i = (IDX)j;\n{body}  a.out{}[i] = v{};\n}}",
                e.kernel.stores[0].output, e.kernel.stores[0].value
            );
        }
    }
    if let Some((m, body)) = &mid {
        // the second transform's input from the first's output at linear index `li`
        let _ = writeln!(
            w,
            "__device__ __forceinline__ {c} lf_fft_mid(const lf_fft_args& fa, long long li, {c} lf_v) {{\n  \
             const lf_mid_args& a = fa.mid;\n  const IDX i = (IDX)li;\n{body}  return v{};\n}}",
            m.kernel.stores[0].value
        );
    }
    let mut radices: Vec<u8> = pass.radices.to_vec();
    radices.sort_unstable();
    radices.dedup();
    if radices.contains(&8) && !radices.contains(&4) {
        radices.insert(0, 4); // radix 8 calls radix 4
    }
    for &(inverse, sfx) in dirs {
        for &rad in &radices {
            butterfly(w, rad as usize, c, pass.dtype, inverse, sfx);
        }
    }
    // Line bases and element offsets in 32-bit integers when the plan says every offset
    // fits (`FftPass::index32`, as `RenderOptions::index32` for elementwise kernels): a
    // 64-bit multiply is two to four 32-bit instructions and the per-line `%` and `/` of
    // the line coordinates a long software sequence; only the final address is widened.
    let li_t = if pass.index32 { "int" } else { "long long" };
    // Shared-memory layout: element `i` of line `li` at `li * pitch + lf_pad(i)`, one slot
    // skipped per 128 bytes and a pitch chosen against bank conflicts
    // (`crate::fft::pad`, `FftPass::line_pitch`): the first
    // Stockham stages write `r` elements apart from neighbouring threads (8-way bank
    // conflicts for radix 8 unpadded) and strided load and store phases put neighbouring
    // threads on neighbouring lines (every line's element at the same bank unpadded).
    let pitch = pass.line_pitch();
    let shift = (128 / crate::fft::complex_size(pass.dtype).unwrap_or(8)).trailing_zeros();
    let _ = writeln!(
        w,
        "__device__ __forceinline__ int lf_pad(int i) {{ return i + (i >> {shift}); }}"
    );
    // The load of line `li`'s element at position `pos` (an expression): a masked pass
    // loads the elements inside `keep` only (the others are zeros a pruned first pass never
    // wrote), an R2C pass real values, a C2R pass the half spectrum and conjugates.
    let load = |pos: &str| {
        let at = |p: &str| format!("(long long)(ib[li] + ({li_t})({p}) * in_stride)");
        match (pass.masked, pass.real) {
            (true, _) => format!(
                "(((long long)({pos}) >= a.keep0 && (long long)({pos}) < a.keep1) || \
                 ((long long)({pos}) >= a.keep2 && (long long)({pos}) < a.keep3) \
                 ? lf_fft_load(a, {}) : {c}{{0, 0}})",
                at(pos)
            ),
            (false, RealIo::R2C) => format!("{c}{{lf_fft_load(a, {}), 0}}", at(pos)),
            (false, RealIo::C2R) => format!(
                "(({pos}) <= {h} ? lf_fft_load(a, {}) : lf_conj(lf_fft_load(a, {})))",
                at(pos),
                at(&format!("{n} - ({pos})")),
                h = n / 2
            ),
            (false, RealIo::Complex) => format!("lf_fft_load(a, {})", at(pos)),
        }
    };
    // The store of value `v` at position `pos` of line `li`: an R2C pass stores the half
    // spectrum, a C2R pass real parts.
    let store = |pos: &str, v: &str| {
        let at = format!("(long long)(ob[li] + ({li_t})({pos}) * out_stride)");
        match pass.real {
            RealIo::R2C => format!("if (({pos}) <= {}) lf_fft_store(a, {at}, {v})", n / 2),
            RealIo::C2R => format!("lf_fft_store(a, {at}, ({v}).re)"),
            RealIo::Complex => format!("lf_fft_store(a, {at}, {v})"),
        }
    };
    let _ = writeln!(
        w,
        "extern \"C\" __global__ void __launch_bounds__({block}) {name}(const lf_fft_args a) {{"
    );
    let _ = writeln!(
        w,
        "  __shared__ {c} sm[{}];\n  __shared__ {li_t} ib[{lpb}], ob[{lpb}];",
        lpb * pitch
    );
    if pass.twiddle_in {
        let _ = writeln!(w, "  __shared__ {li_t} lbv[{lpb}];");
    }
    // a gathered pass's fastest line coordinate counts the support's columns
    let gather = match pass.gathered {
        true => format!(
            "const {li_t} w0 = ({li_t})(a.keep1 - a.keep0);\n    \
             const {li_t} lc = lg < w0 ? ({li_t})a.keep0 + lg : ({li_t})a.keep2 + (lg - w0);"
        ),
        false => format!("const {li_t} lc = lg;"),
    };
    let _ = writeln!(
        w,
        "  const {li_t} line0 = ({li_t})blockIdx.x * {lpb};\n  \
         const int nl = (int)min(({li_t}){lpb}, ({li_t})a.lines - line0);\n  \
         if ((int)threadIdx.x < nl) {{\n    \
         const {li_t} l = line0 + ({li_t})threadIdx.x;\n    \
         const {li_t} cc = ({li_t})a.cnt_c, cb = ({li_t})a.cnt_b;\n    \
         const {li_t} lg = l % cc, t = l / cc, lb = t % cb, la = t / cb;\n    \
         {gather}\n    \
         ib[threadIdx.x] = la * ({li_t})a.in_da + lb * ({li_t})a.in_db + lc * ({li_t})a.in_dc;\n    \
         ob[threadIdx.x] = la * ({li_t})a.out_da + lb * ({li_t})a.out_db + lc * ({li_t})a.out_dc;"
    );
    if pass.twiddle_in {
        let _ = writeln!(w, "    lbv[threadIdx.x] = lb;");
    }
    let _ = writeln!(
        w,
        "  }}\n  __syncthreads();\n  const {li_t} in_stride = ({li_t})a.in_stride, out_stride = ({li_t})a.out_stride;"
    );
    // The first stage reads `x[j + r * m]` and the last writes `x[j + r * ns]` (`d == j`
    // there): for a pass whose loads (stores) run along the line, neighbouring threads
    // touch neighbouring elements, so those stages read (write) global memory directly,
    // coalesced, from their registers. That skips a shared-memory round trip and two
    // `__syncthreads` per side; a block still reads all of its lines (first stage) before
    // it writes any (last stage, after the stages' barriers, or in the same thread when the
    // pass has one stage), so in-place passes stay correct.
    let staged = !pass.radices.is_empty();
    // a spread pass loads and stores on all of its threads, the stages on the first ones
    let spread = pass.spread > 1;
    let direct_load = staged && !pass.load_lines_fastest && !pass.twiddle_in && !spread;
    let direct_store = staged && !pass.store_lines_fastest && !spread;
    // The stages' twiddles of a small (spread) launch, read from the table before the load
    // phase when they fit a few registers: their loads then overlap the input's instead of
    // waiting, stage after stage, behind the barriers (a global load is not moved across
    // `__syncthreads`). Large launches keep the registers for occupancy (prefetching in
    // the 2048 PSF's passes took it from 399 to 426 us).
    let prefetch = spread && twiddle_regs(pass) <= PREFETCH_TWIDDLES;
    if prefetch && staged {
        let _ = writeln!(w, "  const int tw_t = threadIdx.x % {tpl};");
        let mut ns = 1usize;
        for (st, &rad) in pass.radices.iter().enumerate() {
            let rad = rad as usize;
            let k = (n / rad).div_ceil(tpl);
            if ns > 1 {
                let _ = writeln!(
                    w,
                    "  {c} tw{st}[{k}][{rad}];\n  #pragma unroll\n  for (int q = 0; q < {k}; q++) {{\n    \
                     const int k = ((tw_t + q * {tpl}) % {ns}) * {};\n    #pragma unroll\n    \
                     for (int r = 1; r < {rad}; r++) tw{st}[q][r] = a.tw[r * k];\n  }}",
                    n / (ns * rad)
                );
            }
            ns *= rad;
        }
    }
    // phase 1: load. Strided passes put neighbouring threads on neighbouring lines, which
    // the plan lays out at neighbouring addresses (the fastest line coordinate walks the
    // batch dimension), `lines_per_block` of them a multiple of a sector's elements
    let split = |lines_fastest: bool| {
        if lines_fastest {
            format!("const int li = e % {lpb}, p = e / {lpb};")
        } else {
            format!("const int li = e / {n}, p = e % {n};")
        }
    };
    if !direct_load {
        let _ = writeln!(
            w,
            "  // load\n  for (int e = threadIdx.x; e < {}; e += {block}) {{\n    {}\n    if (li < nl) {{\n      \
             {c} v = {};",
            lpb * n,
            split(pass.load_lines_fastest),
            load("p")
        );
        if pass.twiddle_in {
            let _ = writeln!(
                w,
                "      v = lf_tw{}(v, a.tw_big[({li_t})p * lbv[li]]);",
                dirs[0].1
            );
        }
        let _ = writeln!(
            w,
            "      sm[li * {pitch} + lf_pad(p)] = v;\n    }}\n  }}\n  __syncthreads();"
        );
    }
    // phase 2: stages
    if staged {
        let _ = writeln!(
            w,
            "  const int li = threadIdx.x / {tpl}, t = threadIdx.x % {tpl};\n  {c}* x = sm + li * {pitch};"
        );
    }
    // one set of stages per direction: a round trip's first set passes its last stage's
    // writes through the middle work, its second set runs back
    for (k, &(_, sfx)) in dirs.iter().enumerate() {
        let how = Stages {
            sfx,
            from_global: direct_load && k == 0,
            to_global: direct_store && k + 1 == dirs.len(),
            mid: pass.round_trip && k == 0,
        };
        emit_stages(w, pass, c, li_t, prefetch, &load, &store, how);
    }
    // phase 3: store
    if direct_store {
        let _ = writeln!(w, "}}");
    } else {
        let _ = writeln!(
            w,
            "  // store\n  for (int e = threadIdx.x; e < {}; e += {block}) {{\n    {}\n    \
             if (li < nl) {{ {}; }}\n  }}\n}}",
            lpb * n,
            split(pass.store_lines_fastest),
            store("p", &format!("sm[li * {pitch} + lf_pad(p)]"))
        );
    }
    Rendered {
        source: s,
        entry: name,
        block: block as u32,
        per_thread: 1,
    }
}

/// How [`emit_stages`] writes one set of stages: the suffix of its direction's helpers,
/// whether its first stage reads global memory and its last writes it, and whether its
/// last stage's writes pass through the middle work (`lf_fft_mid`).
#[derive(Clone, Copy)]
struct Stages<'a> {
    sfx: &'a str,
    from_global: bool,
    to_global: bool,
    mid: bool,
}

/// Writes the Stockham stages of `pass` on the lines in `sm` (`x`, `li`, `t` declared),
/// as `how` says; `load` renders a global load of a line position, `store` a global store
/// of a value at a line position.
#[allow(clippy::too_many_arguments)]
fn emit_stages(
    w: &mut String,
    pass: &FftPass,
    c: &str,
    li_t: &str,
    prefetch: bool,
    load: &dyn Fn(&str) -> String,
    store: &dyn Fn(&str, &str) -> String,
    how: Stages,
) {
    let sfx = how.sfx;
    let n = pass.n as usize;
    let tpl = pass.threads_per_line as usize;
    let mut ns = 1usize;
    let last_stage = pass.radices.len().saturating_sub(1);
    for (st, &rad) in pass.radices.iter().enumerate() {
        let rad = rad as usize;
        let m = n / rad;
        let k = m.div_ceil(tpl);
        let guard = if k * tpl == m {
            String::new()
        } else {
            format!(" && j < {m}")
        };
        let (from_global, to_global) = (
            st == 0 && how.from_global,
            st == last_stage && how.to_global,
        );
        let read = match from_global {
            true => load(&format!("j + r * {m}")),
            false => format!("x[lf_pad(j + r * {m})]"),
        };
        let _ = writeln!(
            w,
            "  // stage {st}: radix {rad}, ns {ns}\n  {{\n    {c} v[{k}][{rad}];\n    #pragma unroll\n    \
             for (int q = 0; q < {k}; q++) {{\n      const int j = t + q * {tpl};\n      \
             if (li < nl{guard}) {{\n        #pragma unroll\n        \
             for (int r = 0; r < {rad}; r++) v[q][r] = {read};"
        );
        if ns > 1 && prefetch {
            let _ = writeln!(
                w,
                "        #pragma unroll\n        \
                 for (int r = 1; r < {rad}; r++) v[q][r] = lf_tw{sfx}(v[q][r], tw{st}[q][r]);"
            );
        } else if ns > 1 {
            let _ = writeln!(
                w,
                "        const int k = (j % {ns}) * {};\n        #pragma unroll\n        \
                 for (int r = 1; r < {rad}; r++) v[q][r] = lf_tw{sfx}(v[q][r], a.tw[r * k]);",
                n / (ns * rad)
            );
        }
        // the barrier between reading and overwriting `sm` (none when either side is global)
        let mid = if from_global || to_global {
            ""
        } else {
            "\n    __syncthreads();"
        };
        let write = match (to_global, how.mid && st == last_stage) {
            (true, _) => format!("{{ {}; }}", store(&format!("d + r * {ns}"), "v[q][r]")),
            (false, true) => format!(
                "x[lf_pad(d + r * {ns})] = \
                 lf_fft_mid(a, (long long)(ob[li] + ({li_t})(d + r * {ns}) * out_stride), v[q][r])"
            ),
            (false, false) => format!("x[lf_pad(d + r * {ns})] = v[q][r]"),
        };
        let end = if to_global {
            ""
        } else {
            "\n    __syncthreads();"
        };
        let _ = writeln!(
            w,
            "        lf_bfly{rad}{sfx}(v[q]);\n      }}\n    }}{mid}\n    #pragma unroll\n    \
             for (int q = 0; q < {k}; q++) {{\n      const int j = t + q * {tpl};\n      \
             if (li < nl{guard}) {{\n        const int d = (j / {ns}) * {} + j % {ns};\n        \
             #pragma unroll\n        for (int r = 0; r < {rad}; r++) {write};\n      \
             }}\n    }}{end}\n  }}",
            ns * rad
        );
        ns *= rad;
    }
}

/// Whether `pass` stores along its lines without a second twiddle (a one-pass step along
/// the array's last axis: the only one whose store is not strided), so that an epilogue
/// fused into it may take the last axis's extent as the line length.
pub fn line_is_last_axis(pass: &FftPass) -> bool {
    !pass.store_lines_fastest && !pass.twiddle_in
}

/// Whether an epilogue launched over `shape` may be fused into `pass` as rendered: where
/// [`line_is_last_axis`], the last extent must be the length of the stored lines (the
/// half spectrum's for an R2C pass).
pub fn epilogue_extent_fits(pass: &FftPass, shape: &[usize]) -> bool {
    !line_is_last_axis(pass) || shape.last() == Some(&pass.real.out_len(pass.n as usize))
}

/// Most twiddles (complex values) a thread of a pass reads from the table before its load
/// phase, over all of its stages.
const PREFETCH_TWIDDLES: usize = 24;

/// Twiddles (complex values) one stage thread of `pass` multiplies by, over all stages.
fn twiddle_regs(pass: &FftPass) -> usize {
    let n = pass.n as usize;
    let tpl = (pass.threads_per_line as usize).max(1);
    let mut ns = 1;
    let mut total = 0;
    for &r in &pass.radices {
        let r = r as usize;
        if ns > 1 {
            total += (n / r).div_ceil(tpl) * (r - 1);
        }
        ns *= r;
    }
    total
}

/// Writes `lf_tw<sfx>(a, t)`, a value times a twiddle (conjugated for `inverse`), and
/// `lf_rot<sfx>(z)`, `z * (-i)` forward and `z * i` inverse.
fn direction_helpers(w: &mut String, c: &str, inverse: bool, sfx: &str) {
    let tw = if inverse {
        "{a.re * t.re + a.im * t.im, a.im * t.re - a.re * t.im}"
    } else {
        "{a.re * t.re - a.im * t.im, a.re * t.im + a.im * t.re}"
    };
    let _ = writeln!(
        w,
        "__device__ __forceinline__ {c} lf_tw{sfx}({c} a, {c} t) {{ return {tw}; }}"
    );
    let rot = if inverse {
        "{-z.im, z.re}"
    } else {
        "{z.im, -z.re}"
    };
    let _ = writeln!(
        w,
        "__device__ __forceinline__ {c} lf_rot{sfx}({c} z) {{ return {rot}; }}"
    );
}

/// Writes the `rad`-point butterfly `lf_bfly<rad><sfx>(v)` of `dtype` in the direction
/// `inverse` (calling `lf_rot<sfx>`, `lf_bfly4<sfx>`), computing what `crate::fft::host`
/// computes, in the same order.
fn butterfly(w: &mut String, rad: usize, c: &str, dtype: DType, inverse: bool, sfx: &str) {
    let _ = writeln!(
        w,
        "__device__ __forceinline__ void lf_bfly{rad}{sfx}({c}* v) {{"
    );
    match rad {
        2 => {
            let _ = writeln!(
                w,
                "  const {c} a = v[0], b = v[1];\n  v[0] = lf_cadd(a, b);\n  v[1] = lf_csub(a, b);"
            );
        }
        4 => {
            let _ = writeln!(
                w,
                "  const {c} t0 = lf_cadd(v[0], v[2]), t1 = lf_csub(v[0], v[2]);\n  \
                 const {c} t2 = lf_cadd(v[1], v[3]), t3 = lf_rot{sfx}(lf_csub(v[1], v[3]));\n  \
                 v[0] = lf_cadd(t0, t2);\n  v[2] = lf_csub(t0, t2);\n  \
                 v[1] = lf_cadd(t1, t3);\n  v[3] = lf_csub(t1, t3);"
            );
        }
        8 => {
            let k = lit(std::f64::consts::FRAC_1_SQRT_2, dtype);
            let (o1, o3) = if inverse {
                (
                    format!("{{{k} * (o[1].re - o[1].im), {k} * (o[1].re + o[1].im)}}"),
                    format!("{{-({k} * (o[3].re + o[3].im)), {k} * (o[3].re - o[3].im)}}"),
                )
            } else {
                (
                    format!("{{{k} * (o[1].re + o[1].im), {k} * (o[1].im - o[1].re)}}"),
                    format!("{{{k} * (o[3].im - o[3].re), -({k} * (o[3].re + o[3].im))}}"),
                )
            };
            let _ = writeln!(
                w,
                "  {c} e[4] = {{v[0], v[2], v[4], v[6]}};\n  {c} o[4] = {{v[1], v[3], v[5], v[7]}};\n  \
                 lf_bfly4{sfx}(e);\n  lf_bfly4{sfx}(o);\n  o[1] = {o1};\n  o[2] = lf_rot{sfx}(o[2]);\n  o[3] = {o3};\n  \
                 #pragma unroll\n  for (int k = 0; k < 4; k++) {{ v[k] = lf_cadd(e[k], o[k]); v[k + 4] = lf_csub(e[k], o[k]); }}"
            );
        }
        _ => {
            let h = (rad - 1) / 2;
            let consts = odd_radix_constants(rad);
            let _ = writeln!(w, "  const {c} x0 = v[0];");
            for m in 1..=h {
                let _ = writeln!(
                    w,
                    "  const {c} s{m} = lf_cadd(v[{m}], v[{}]), d{m} = lf_csub(v[{m}], v[{}]);",
                    rad - m,
                    rad - m
                );
            }
            let _ = write!(w, "  {c} y0 = x0;");
            for m in 1..=h {
                let _ = write!(w, " y0 = lf_cadd(y0, s{m});");
            }
            let _ = writeln!(w, "\n  v[0] = y0;");
            for k in 1..=h {
                let _ = writeln!(w, "  {{\n    {c} a = x0, b = {{0, 0}};");
                for m in 1..=h {
                    let i = (k * m) % rad;
                    let (cs, sn) = if i <= h {
                        consts[i - 1]
                    } else {
                        let (cs, sn) = consts[rad - i - 1];
                        (cs, -sn)
                    };
                    let _ = writeln!(
                        w,
                        "    a = lf_cadd(a, lf_rmul({}, s{m}));\n    b = lf_cadd(b, lf_rmul({}, d{m}));",
                        lit(cs, dtype),
                        lit(sn, dtype)
                    );
                }
                let (yk, yrk) = if inverse {
                    ("{a.re - b.im, a.im + b.re}", "{a.re + b.im, a.im - b.re}")
                } else {
                    ("{a.re + b.im, a.im - b.re}", "{a.re - b.im, a.im + b.re}")
                };
                let _ = writeln!(w, "    v[{k}] = {yk};\n    v[{}] = {yrk};\n  }}", rad - k);
            }
        }
    }
    let _ = writeln!(w, "}}");
}
