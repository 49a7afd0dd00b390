//! The layout planner of cuFFT transforms: pure data from shapes to a [`Program`] of
//! plans, executions and helper-kernel launches (see the parent module for the layouts),
//! tested on the CPU by an emulator of cuFFT's advanced-layout semantics.

use crate::graph::{FftKind, FftSpec};
use crate::{Error, Result};
use cudarc::cufft::sys as cufft_sys;
use lazyfuse_codegen::DType;
use smallvec::SmallVec;
use std::ffi::c_int;

/// cuFFT's forward (negative exponent) direction.
pub(super) const FORWARD: c_int = -1;
/// cuFFT's inverse (positive exponent) direction.
pub(super) const INVERSE: c_int = 1;

pub(super) type Dims = SmallVec<[usize; 6]>;

/// Single (complex64) or double (complex128) precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Precision {
    Single,
    Double,
}

impl Precision {
    pub(super) fn real_size(self) -> usize {
        match self {
            Precision::Single => 4,
            Precision::Double => 8,
        }
    }
    pub(super) fn complex_size(self) -> usize {
        2 * self.real_size()
    }
    pub(super) fn real_dtype(self) -> DType {
        match self {
            Precision::Single => DType::F32,
            Precision::Double => DType::F64,
        }
    }
    pub(super) fn complex_dtype(self) -> DType {
        match self {
            Precision::Single => DType::C64,
            Precision::Double => DType::C128,
        }
    }
    pub(super) fn c2c(self) -> cufft_sys::cufftType {
        match self {
            Precision::Single => cufft_sys::cufftType::CUFFT_C2C,
            Precision::Double => cufft_sys::cufftType::CUFFT_Z2Z,
        }
    }
    pub(super) fn r2c(self) -> cufft_sys::cufftType {
        match self {
            Precision::Single => cufft_sys::cufftType::CUFFT_R2C,
            Precision::Double => cufft_sys::cufftType::CUFFT_D2Z,
        }
    }
    pub(super) fn c2r(self) -> cufft_sys::cufftType {
        match self {
            Precision::Single => cufft_sys::cufftType::CUFFT_C2R,
            Precision::Double => cufft_sys::cufftType::CUFFT_Z2D,
        }
    }
}

/// Whether a cuFFT type reads real input / writes real output.
pub(super) fn real_in(ty: cufft_sys::cufftType) -> bool {
    use cufft_sys::cufftType::*;
    matches!(ty, CUFFT_R2C | CUFFT_D2Z)
}
pub(super) fn real_out(ty: cufft_sys::cufftType) -> bool {
    use cufft_sys::cufftType::*;
    matches!(ty, CUFFT_C2R | CUFFT_Z2D)
}

/// What one cuFFT plan computes: type, sizes, advanced layout (in elements of its input and
/// output types) and batch; the cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PlanKey {
    pub(super) ty: cufft_sys::cufftType,
    pub(super) n: SmallVec<[i64; 3]>,
    pub(super) inembed: SmallVec<[i64; 3]>,
    pub(super) istride: i64,
    pub(super) idist: i64,
    pub(super) onembed: SmallVec<[i64; 3]>,
    pub(super) ostride: i64,
    pub(super) odist: i64,
    pub(super) batch: i64,
}

// ---------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------

/// Drops the dimensions where both `a` and `b` are 1, remapping `axes` (in order; axes of
/// dropped dimensions are dropped too).
pub(super) fn squeeze(a: &[usize], b: &[usize], axes: &[usize]) -> (Dims, Dims, Dims) {
    let keep: SmallVec<[bool; 8]> = a.iter().zip(b).map(|(&x, &y)| x != 1 || y != 1).collect();
    let mut new_index: SmallVec<[usize; 8]> = SmallVec::new();
    let mut k = 0;
    for &kept in &keep {
        new_index.push(k);
        k += kept as usize;
    }
    let pick = |s: &[usize]| -> Dims {
        s.iter()
            .zip(&keep)
            .filter(|(_, &kept)| kept)
            .map(|(&d, _)| d)
            .collect()
    };
    let new_axes = axes
        .iter()
        .filter(|&&ax| keep[ax])
        .map(|&ax| new_index[ax])
        .collect();
    (pick(a), pick(b), new_axes)
}

/// The blocks `(first axis, rank)` a C2C over `axes` of `shape` runs: runs of consecutive
/// axes of length above 1, each cut into blocks of at most 3 axes from its inner end.
pub(super) fn c2c_blocks(shape: &[usize], axes: &[usize]) -> SmallVec<[(usize, usize); 4]> {
    let mut ax: Dims = axes.iter().copied().filter(|&a| shape[a] > 1).collect();
    ax.sort_unstable();
    ax.dedup();
    let mut blocks = SmallVec::new();
    let mut i = 0;
    while i < ax.len() {
        let mut j = i + 1;
        while j < ax.len() && ax[j] == ax[j - 1] + 1 {
            j += 1;
        }
        // run ax[i..j]: blocks of 3 from its end
        let mut end = j;
        while end > i {
            let start = end.saturating_sub(3).max(i);
            blocks.push((ax[start], end - start));
            end = start;
        }
        i = j;
    }
    blocks
}

// ---------------------------------------------------------------------------------------
// Programs: what a transform queues, as data
// ---------------------------------------------------------------------------------------

/// A buffer a step reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Buf {
    /// The transform's input (written only by programs made with `clobber`).
    Input,
    /// The transform's output.
    Output,
    /// The complex work buffer of a C2R ([`Program::work_len`] elements).
    Work,
}

/// One operation of a transform. Offsets, steps and lengths count elements of the type the
/// buffer holds there.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Step {
    /// `loops` executions of the plan `key`, execution `l` reading `src` from element
    /// `offset + l * istep` and writing `dst` from element `offset + l * ostep` (`src ==
    /// dst`: in place).
    Fft {
        key: PlanKey,
        src: Buf,
        dst: Buf,
        loops: usize,
        istep: usize,
        ostep: usize,
        offset: usize,
        dir: c_int,
    },
    /// Clears columns `lo..hi` of every one of `rows` rows of `row_len` complex elements.
    Zero {
        buf: Buf,
        rows: usize,
        row_len: usize,
        lo: usize,
        hi: usize,
    },
    /// Copies `len` complex elements.
    Copy { src: Buf, dst: Buf, len: usize },
    /// `dst[o, k, i] = k < n ? src[o, k, i] : 0` for `k < h` (complex `[outer, n, inner]`
    /// to `[outer, h, inner]`); with `sanitize`, the imaginary parts at `k == 0` and
    /// `k == nyq` are cleared.
    Resize {
        src: Buf,
        dst: Buf,
        outer: usize,
        n: usize,
        h: usize,
        inner: usize,
        nyq: i64,
        sanitize: bool,
    },
    /// Clears the imaginary parts of `buf[o, 0, i]` and (`nyq >= 0`) `buf[o, nyq, i]`.
    Hermitian {
        buf: Buf,
        outer: usize,
        h: usize,
        inner: usize,
        nyq: i64,
    },
    /// `len` real elements to complex ones with zero imaginary parts.
    ToComplex { src: Buf, dst: Buf, len: usize },
    /// The real parts of `len` complex elements.
    RealPart { src: Buf, dst: Buf, len: usize },
}

/// Everything one transform queues, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Program {
    pub(super) steps: Vec<Step>,
    /// Complex elements of the work buffer (0: none).
    pub(super) work_len: usize,
}

/// The program of the (checked) transform `spec` from `in_shape` to `out_shape`. With
/// `clobber` the input is dead after the transform and may be overwritten: a C2R of an
/// exactly Hermitian half spectrum then runs on it directly, without a working copy, and a
/// pruned C2C transforms its columns in place there. A C2C whose spec knows where its
/// input is zero ([`FftSpec::support`]) runs pruned from images of `prune_min` elements.
pub(super) fn program(
    spec: &FftSpec,
    prec: Precision,
    in_shape: &[usize],
    out_shape: &[usize],
    clobber: bool,
    prune_min: usize,
) -> Program {
    let mut b = Builder {
        prec,
        prog: Program::default(),
    };
    match spec.kind {
        FftKind::C2C => {
            let dir = if spec.inverse { INVERSE } else { FORWARD };
            let pruned = spec
                .support
                .as_deref()
                .is_some_and(|s| b.c2c_pruned(in_shape, &spec.axes, s, clobber, prune_min, dir));
            if !pruned {
                b.c2c(in_shape, &spec.axes, Buf::Input, Buf::Output, dir);
            }
        }
        FftKind::R2C => b.r2c(in_shape, out_shape, &spec.axes),
        FftKind::C2R if spec.hermitian => b.c2r_hermitian(in_shape, out_shape, &spec.axes, clobber),
        FftKind::C2R => b.c2r(in_shape, out_shape, &spec.axes),
    }
    b.prog
}

/// Builds a [`Program`].
pub(super) struct Builder {
    pub(super) prec: Precision,
    pub(super) prog: Program,
}

impl Builder {
    pub(super) fn push(&mut self, step: Step) {
        self.prog.steps.push(step);
    }

    /// C2C over `axes` of `shape` from `src` to `dst` (equal: in place).
    pub(super) fn c2c(&mut self, shape: &[usize], axes: &[usize], src: Buf, dst: Buf, dir: c_int) {
        let (shape, _, axes) = squeeze(shape, shape, axes);
        let blocks = c2c_blocks(&shape, &axes);
        if blocks.is_empty() {
            // only axes of length 1: the identity
            if src != dst {
                let len = shape.iter().product();
                self.push(Step::Copy { src, dst, len });
            }
            return;
        }
        let mut from = src;
        for &(axis, rank) in &blocks {
            self.block(self.prec.c2c(), &shape, &shape, axis, rank, from, dst, dir);
            from = dst;
        }
    }

    /// R2C over `axes` (the last one real) from the real input (`in_shape`) to the complex
    /// output (`out_shape`).
    pub(super) fn r2c(&mut self, in_shape: &[usize], out_shape: &[usize], axes: &[usize]) {
        let (&ra, rest) = axes.split_last().expect("checked non-empty");
        if in_shape[ra] == 1 {
            // a length-1 real transform is the identity: widen to complex, then the rest
            let len = in_shape.iter().product();
            self.push(Step::ToComplex {
                src: Buf::Input,
                dst: Buf::Output,
                len,
            });
            return self.c2c(out_shape, rest, Buf::Output, Buf::Output, FORWARD);
        }
        let (is, os, ax) = squeeze(in_shape, out_shape, axes);
        let (&ra, rest) = ax.split_last().expect("the real axis is longer than 1");
        // the R2C block: the transformed axes right before the real axis, up to rank 3
        let mut first = ra;
        while first > 0 && ra - first < 2 && rest.contains(&(first - 1)) {
            first -= 1;
        }
        let (src, dst) = (Buf::Input, Buf::Output);
        self.block(
            self.prec.r2c(),
            &is,
            &os,
            first,
            ra - first + 1,
            src,
            dst,
            FORWARD,
        );
        let others: Dims = rest
            .iter()
            .copied()
            .filter(|&a| a < first || a > ra)
            .collect();
        self.c2c(&os, &others, Buf::Output, Buf::Output, FORWARD);
    }

    /// C2R of an exactly Hermitian half spectrum (`in_shape[last] = m / 2 + 1`): a copy
    /// (cuFFT's C2R overwrites its input; skipped with `clobber`, when the input is dead),
    /// complex inverses along transformed axes outside the block, then one
    /// multi-dimensional C2R over the transformed axes right before and at the real axis
    /// (up to rank 3), as the R2C block.
    pub(super) fn c2r_hermitian(
        &mut self,
        in_shape: &[usize],
        out_shape: &[usize],
        axes: &[usize],
        clobber: bool,
    ) {
        let (&ra, _) = axes.split_last().expect("checked non-empty");
        let m = out_shape[ra];
        if m < 2 || in_shape[ra] != m / 2 + 1 {
            return self.c2r(in_shape, out_shape, axes);
        }
        let outer: usize = in_shape[..ra].iter().product();
        let inner: usize = in_shape[ra + 1..].iter().product();
        let work = if clobber {
            Buf::Input
        } else {
            self.prog.work_len = in_shape.iter().product();
            self.push(Step::Resize {
                src: Buf::Input,
                dst: Buf::Work,
                outer,
                n: in_shape[ra],
                h: in_shape[ra],
                inner,
                nyq: -1,
                sanitize: false,
            });
            Buf::Work
        };
        let (is, os, ax) = squeeze(in_shape, out_shape, axes);
        let (&ra, rest) = ax.split_last().expect("the real axis is longer than 1");
        let mut first = ra;
        while first > 0 && ra - first < 2 && rest.contains(&(first - 1)) {
            first -= 1;
        }
        let others: Dims = rest
            .iter()
            .copied()
            .filter(|&a| a < first || a > ra)
            .collect();
        self.c2c(&is, &others, work, work, INVERSE);
        let c2r = self.prec.c2r();
        self.block(
            c2r,
            &is,
            &os,
            first,
            ra - first + 1,
            work,
            Buf::Output,
            INVERSE,
        );
    }

    /// C2R over `axes` (the last one real) from the complex input (`in_shape`, a half
    /// spectrum of any length along the real axis) to the real output (`out_shape`).
    pub(super) fn c2r(&mut self, in_shape: &[usize], out_shape: &[usize], axes: &[usize]) {
        let (&ra, rest) = axes.split_last().expect("checked non-empty");
        let m = out_shape[ra];
        let h = m / 2 + 1;
        let mut wshape: Dims = in_shape.iter().copied().collect();
        wshape[ra] = h;
        let outer: usize = in_shape[..ra].iter().product();
        let inner: usize = in_shape[ra + 1..].iter().product();
        let nyq: i64 = if m.is_multiple_of(2) {
            (m / 2) as i64
        } else {
            -1
        };
        // The work buffer: C2R overwrites its input, which belongs to a graph node.
        self.prog.work_len = wshape.iter().product();
        let mixed = rest.iter().any(|&a| in_shape[a] > 1);
        self.push(Step::Resize {
            src: Buf::Input,
            dst: Buf::Work,
            outer,
            n: in_shape[ra],
            h,
            inner,
            nyq,
            sanitize: !mixed,
        });
        if mixed {
            self.c2c(&wshape, rest, Buf::Work, Buf::Work, INVERSE);
            self.push(Step::Hermitian {
                buf: Buf::Work,
                outer,
                h,
                inner,
                nyq,
            });
        }
        if m == 1 {
            // a length-1 real inverse is the real part of the (sanitized) spectrum
            let len = out_shape.iter().product();
            self.push(Step::RealPart {
                src: Buf::Work,
                dst: Buf::Output,
                len,
            });
        } else {
            let (ws, os, ax) = squeeze(&wshape, out_shape, &[ra]);
            let c2r = self.prec.c2r();
            self.block(c2r, &ws, &os, ax[0], 1, Buf::Work, Buf::Output, INVERSE);
        }
    }

    /// A cuFFT plan of type `ty` over axes `axis..axis + rank` of arrays shaped `ishape`
    /// (input) and `oshape` (output; equal except along the real axis of R2C/C2R).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn block(
        &mut self,
        ty: cufft_sys::cufftType,
        ishape: &[usize],
        oshape: &[usize],
        axis: usize,
        rank: usize,
        src: Buf,
        dst: Buf,
        dir: c_int,
    ) {
        let outer: usize = ishape[..axis].iter().product();
        let inner: usize = ishape[axis + rank..].iter().product();
        let idims = &ishape[axis..axis + rank];
        let odims = &oshape[axis..axis + rank];
        let ielems: usize = idims.iter().product();
        let oelems: usize = odims.iter().product();
        let logical = if real_out(ty) { odims } else { idims };
        // (istride, idist, ostride, odist, batch, executions, input step, output step)
        let (istride, idist, ostride, odist, batch, loops, istep, ostep) = if inner == 1 {
            (1, ielems, 1, oelems, outer, 1, 0, 0)
        } else if outer <= inner {
            (
                inner,
                1,
                inner,
                1,
                inner,
                outer,
                ielems * inner,
                oelems * inner,
            )
        } else {
            (
                inner,
                ielems * inner,
                inner,
                oelems * inner,
                outer,
                inner,
                1,
                1,
            )
        };
        let to_i64 = |v: &[usize]| v.iter().map(|&d| d as i64).collect();
        let key = PlanKey {
            ty,
            n: to_i64(logical),
            inembed: to_i64(idims),
            istride: istride as i64,
            idist: idist as i64,
            onembed: to_i64(odims),
            ostride: ostride as i64,
            odist: odist as i64,
            batch: batch as i64,
        };
        self.push(Step::Fft {
            key,
            src,
            dst,
            loops,
            istep,
            ostep,
            offset: 0,
            dir,
        });
    }

    /// The pruned C2C over `axes` of `shape` (which include the last two) of an input that
    /// is zero outside the columns `support` (ranges along the last axis): 1-D transforms
    /// of those columns only, then of every row, then the other axes. With `clobber` the
    /// columns are transformed in place in the input; else into the output, whose other
    /// columns are cleared. False (nothing queued) where this layout does not apply: more
    /// than 4 executions of the column plan, a support of over 3/4 of the columns, or an
    /// image (the last two axes) below `min_elements`.
    pub(super) fn c2c_pruned(
        &mut self,
        shape: &[usize],
        axes: &[usize],
        support: &[(usize, usize)],
        clobber: bool,
        min_elements: usize,
        dir: c_int,
    ) -> bool {
        let nd = shape.len();
        if nd < 2 || !axes.contains(&(nd - 1)) || !axes.contains(&(nd - 2)) {
            return false;
        }
        let (rows, cols) = (shape[nd - 2], shape[nd - 1]);
        let outer: usize = shape[..nd - 2].iter().product();
        let covered: usize = support.iter().map(|&(l, h)| h.saturating_sub(l)).sum();
        let sorted = support.windows(2).all(|w| w[0].1 < w[1].0);
        if rows < 2
            || cols < 2
            || rows.saturating_mul(cols) < min_elements
            || support.is_empty()
            || !sorted
            || support.iter().any(|&(l, h)| l >= h || h > cols)
            || covered * 4 > cols * 3
            || outer * support.len() > 4
        {
            return false;
        }
        let image = rows * cols;
        let to_i64 = |d: usize| SmallVec::from_slice(&[d as i64]);
        let mid = if clobber { Buf::Input } else { Buf::Output };
        for &(lo, hi) in support {
            let key = PlanKey {
                ty: self.prec.c2c(),
                n: to_i64(rows),
                inembed: to_i64(rows),
                istride: cols as i64,
                idist: 1,
                onembed: to_i64(rows),
                ostride: cols as i64,
                odist: 1,
                batch: (hi - lo) as i64,
            };
            self.push(Step::Fft {
                key,
                src: Buf::Input,
                dst: mid,
                loops: outer,
                istep: image,
                ostep: image,
                offset: lo,
                dir,
            });
        }
        if !clobber {
            let mut from = 0;
            for &(lo, hi) in support.iter().chain([&(cols, cols)]) {
                if from < lo {
                    self.push(Step::Zero {
                        buf: Buf::Output,
                        rows: outer * rows,
                        row_len: cols,
                        lo: from,
                        hi: lo,
                    });
                }
                from = hi;
            }
        }
        let key = PlanKey {
            ty: self.prec.c2c(),
            n: to_i64(cols),
            inembed: to_i64(cols),
            istride: 1,
            idist: cols as i64,
            onembed: to_i64(cols),
            ostride: 1,
            odist: cols as i64,
            batch: (outer * rows) as i64,
        };
        self.push(Step::Fft {
            key,
            src: mid,
            dst: Buf::Output,
            loops: 1,
            istep: 0,
            ostep: 0,
            offset: 0,
            dir,
        });
        let others: Dims = axes.iter().copied().filter(|&a| a < nd - 2).collect();
        self.c2c(shape, &others, Buf::Output, Buf::Output, dir);
        true
    }
}

/// Checks the spec against the input's dtype and length and the shapes; the precision of
/// the transform.
pub(super) fn check(
    spec: &FftSpec,
    dtype: DType,
    len: usize,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<Precision> {
    let bad = |msg: String| Err(Error::internal("cuda fft", msg));
    let nd = in_shape.len();
    let Some(&last) = spec.axes.last() else {
        return bad("no axes".into());
    };
    if out_shape.len() != nd
        || spec.axes.iter().any(|&a| a >= nd)
        || (1..spec.axes.len()).any(|i| spec.axes[..i].contains(&spec.axes[i]))
    {
        return bad(format!(
            "axes {:?} for shapes {in_shape:?} -> {out_shape:?}",
            spec.axes
        ));
    }
    if len != in_shape.iter().product::<usize>() {
        return bad(format!("buffer of {len} elements for shape {in_shape:?}"));
    }
    let same_but =
        |ax: Option<usize>| (0..nd).all(|d| Some(d) == ax || in_shape[d] == out_shape[d]);
    let shapes_ok = match spec.kind {
        FftKind::C2C => same_but(None),
        FftKind::R2C => same_but(Some(last)) && out_shape[last] == in_shape[last] / 2 + 1,
        FftKind::C2R => same_but(Some(last)) && (in_shape[last] > 0 || out_shape.contains(&0)),
    };
    if !shapes_ok {
        return bad(format!(
            "{:?} from {in_shape:?} to {out_shape:?} along {:?}",
            spec.kind, spec.axes
        ));
    }
    match (spec.kind, dtype) {
        (FftKind::C2C | FftKind::C2R, DType::C64) | (FftKind::R2C, DType::F32) => {
            Ok(Precision::Single)
        }
        (FftKind::C2C | FftKind::C2R, DType::C128) | (FftKind::R2C, DType::F64) => {
            Ok(Precision::Double)
        }
        (k, d) => bad(format!("{k:?} of a {d} buffer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeeze_drops_unit_dims_and_remaps_axes() {
        let (a, b, ax) = squeeze(&[1, 4, 1, 5], &[1, 4, 1, 3], &[2, 3, 1]);
        assert_eq!(a.as_slice(), &[4, 5]);
        assert_eq!(b.as_slice(), &[4, 3]);
        assert_eq!(ax.as_slice(), &[1, 0]);
        let (a, _, ax) = squeeze(&[1], &[1], &[0]);
        assert!(a.is_empty() && ax.is_empty());
    }

    #[test]
    fn blocks_group_consecutive_axes_up_to_rank_3() {
        assert_eq!(c2c_blocks(&[2, 3, 4], &[2, 1]).as_slice(), &[(1, 2)]);
        assert_eq!(
            c2c_blocks(&[2, 3, 4], &[0, 2]).as_slice(),
            &[(0, 1), (2, 1)]
        );
        assert_eq!(
            c2c_blocks(&[2, 3, 4, 5, 6], &[0, 1, 2, 3, 4]).as_slice(),
            &[(2, 3), (0, 2)]
        );
        assert_eq!(c2c_blocks(&[2, 1, 4], &[1]).as_slice(), &[]);
    }

    // -----------------------------------------------------------------------------------
    // An emulator of the programs: cuFFT's advanced-layout semantics and the helper
    // kernels on the host in f64, checking bounds, overlaps and coverage, so that the
    // layouts can be verified without a GPU against the CPU path (rustfft).
    // -----------------------------------------------------------------------------------

    use crate::runtime::cpu;
    use lazyfuse_codegen::HostBuf;
    use num_complex::Complex64 as Z;

    fn naive_dft(x: &[Z], sign: f64) -> Vec<Z> {
        let n = x.len();
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        let a = sign * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                        v * Z::new(a.cos(), a.sin())
                    })
                    .sum()
            })
            .collect()
    }

    /// Applies `f` to every line along `axis` of the dense array `a` (`dims`), giving lines
    /// of length `m`; the new dims.
    fn lines(
        a: &[Z],
        dims: &[usize],
        axis: usize,
        m: usize,
        f: impl Fn(&[Z]) -> Vec<Z>,
    ) -> (Vec<Z>, Vec<usize>) {
        let n = dims[axis];
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        let mut out = vec![Z::new(0.0, 0.0); outer * m * inner];
        for o in 0..outer {
            for i in 0..inner {
                let line: Vec<Z> = (0..n).map(|k| a[(o * n + k) * inner + i]).collect();
                for (k, v) in f(&line).into_iter().enumerate() {
                    out[(o * m + k) * inner + i] = v;
                }
            }
        }
        let mut d = dims.to_vec();
        d[axis] = m;
        (out, d)
    }

    struct Emu {
        bufs: [Vec<Z>; 3],
        written: Vec<bool>,
        /// Whether the program may overwrite its input.
        clobber: bool,
    }

    fn slot(b: Buf) -> usize {
        match b {
            Buf::Input => 0,
            Buf::Output => 1,
            Buf::Work => 2,
        }
    }

    impl Emu {
        fn read(&self, b: Buf, i: usize) -> Z {
            let v = &self.bufs[slot(b)];
            assert!(i < v.len(), "read {b:?}[{i}] of {}", v.len());
            v[i]
        }
        fn write(&mut self, b: Buf, i: usize, z: Z) {
            assert!(self.clobber || b != Buf::Input, "the input is written");
            let v = &mut self.bufs[slot(b)];
            assert!(i < v.len(), "write {b:?}[{i}] of {}", v.len());
            v[i] = z;
            if b == Buf::Output {
                self.written[i] = true;
            }
        }

        fn step(&mut self, s: &Step) {
            match *s {
                Step::Fft {
                    ref key,
                    src,
                    dst,
                    loops,
                    istep,
                    ostep,
                    offset,
                    dir,
                } => {
                    for l in 0..loops {
                        self.exec(key, src, dst, offset + l * istep, offset + l * ostep, dir);
                    }
                }
                Step::Zero {
                    buf,
                    rows,
                    row_len,
                    lo,
                    hi,
                } => {
                    for r in 0..rows {
                        for c in lo..hi {
                            self.write(buf, r * row_len + c, Z::new(0.0, 0.0));
                        }
                    }
                }
                Step::Copy { src, dst, len } => {
                    for j in 0..len {
                        let z = self.read(src, j);
                        self.write(dst, j, z);
                    }
                }
                Step::Resize {
                    src,
                    dst,
                    outer,
                    n,
                    h,
                    inner,
                    nyq,
                    sanitize,
                } => {
                    for o in 0..outer {
                        for k in 0..h {
                            for i in 0..inner {
                                let mut z = if k < n {
                                    self.read(src, (o * n + k) * inner + i)
                                } else {
                                    Z::new(0.0, 0.0)
                                };
                                if sanitize && (k == 0 || k as i64 == nyq) {
                                    z.im = 0.0;
                                }
                                self.write(dst, (o * h + k) * inner + i, z);
                            }
                        }
                    }
                }
                Step::Hermitian {
                    buf,
                    outer,
                    h,
                    inner,
                    nyq,
                } => {
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut ks = vec![0];
                            if nyq >= 0 {
                                ks.push(nyq as usize);
                            }
                            for k in ks {
                                let j = (o * h + k) * inner + i;
                                let z = self.read(buf, j);
                                self.write(buf, j, Z::new(z.re, 0.0));
                            }
                        }
                    }
                }
                Step::ToComplex { src, dst, len } | Step::RealPart { src, dst, len } => {
                    for j in 0..len {
                        let z = self.read(src, j);
                        self.write(dst, j, Z::new(z.re, 0.0));
                    }
                }
            }
        }

        /// One cuFFT execution with the plan `key`, the buffers offset by `ioff`/`ooff`
        /// elements: reads everything, then writes (in-place safe).
        fn exec(
            &mut self,
            key: &PlanKey,
            src: Buf,
            dst: Buf,
            ioff: usize,
            ooff: usize,
            dir: c_int,
        ) {
            let rank = key.n.len();
            assert!((1..=3).contains(&rank));
            assert_eq!(key.inembed.len(), rank);
            assert_eq!(key.onembed.len(), rank);
            let n: Vec<usize> = key.n.iter().map(|&d| d as usize).collect();
            let half = |v: &[usize]| {
                let mut v = v.to_vec();
                v[rank - 1] = v[rank - 1] / 2 + 1;
                v
            };
            let (ri, ro) = (real_in(key.ty), real_out(key.ty));
            let ilog = if ro { half(&n) } else { n.clone() };
            let olog = if ri { half(&n) } else { n.clone() };
            let inembed: Vec<usize> = key.inembed.iter().map(|&d| d as usize).collect();
            let onembed: Vec<usize> = key.onembed.iter().map(|&d| d as usize).collect();
            for d in 1..rank {
                assert!(
                    inembed[d] >= ilog[d] && onembed[d] >= olog[d],
                    "embeds {key:?}"
                );
            }
            if src == dst {
                assert!(!ri && !ro, "in-place real transform {key:?}");
                assert_eq!(
                    (ioff, key.istride, key.idist, &inembed),
                    (ooff, key.ostride, key.odist, &onembed)
                );
            }
            let at =
                |x: &[usize], embed: &[usize], stride: i64, dist: i64, b: usize, off: usize| {
                    let mut lin = 0usize;
                    for d in 0..rank {
                        lin = lin * embed[d] + x[d];
                    }
                    off + b * dist as usize + lin * stride as usize
                };
            let multi = |dims: &[usize], mut j: usize| {
                let mut x = vec![0; rank];
                for d in (0..rank).rev() {
                    x[d] = j % dims[d];
                    j /= dims[d];
                }
                x
            };
            let (ilen, olen): (usize, usize) = (ilog.iter().product(), olog.iter().product());
            let mut results = Vec::new();
            for b in 0..key.batch as usize {
                let a: Vec<Z> = (0..ilen)
                    .map(|j| {
                        self.read(
                            src,
                            at(&multi(&ilog, j), &inembed, key.istride, key.idist, b, ioff),
                        )
                    })
                    .collect();
                let sign = dir as f64;
                let (mut a, mut dims) = (a, ilog.clone());
                if ro {
                    for d in 0..rank - 1 {
                        (a, dims) = lines(&a, &dims, d, dims[d], |l| naive_dft(l, sign));
                    }
                    let m = n[rank - 1];
                    (a, dims) = lines(&a, &dims, rank - 1, m, |l| {
                        // cuFFT's C2R needs a sane half spectrum: the program sanitizes
                        assert!(l[0].im.abs() < 1e-9, "C2R input with imaginary DC {l:?}");
                        if m.is_multiple_of(2) {
                            assert!(l[m / 2].im.abs() < 1e-9, "C2R input with imaginary Nyquist");
                        }
                        let full: Vec<Z> = (0..m)
                            .map(|k| if k < l.len() { l[k] } else { l[m - k].conj() })
                            .collect();
                        naive_dft(&full, sign)
                            .into_iter()
                            .map(|z| Z::new(z.re, 0.0))
                            .collect()
                    });
                } else {
                    for d in 0..rank {
                        (a, dims) = lines(&a, &dims, d, dims[d], |l| naive_dft(l, sign));
                    }
                    if ri {
                        let h = olog[rank - 1];
                        (a, dims) = lines(&a, &dims, rank - 1, h, |l| l[..h].to_vec());
                    }
                }
                assert_eq!(dims, olog);
                results.push(a);
            }
            if ro && src != dst && (src != Buf::Input || self.clobber) {
                // cuFFT's C2R overwrites its input: nothing may read it afterwards
                for b in 0..key.batch as usize {
                    for j in 0..ilen {
                        let i = at(&multi(&ilog, j), &inembed, key.istride, key.idist, b, ioff);
                        self.bufs[slot(src)][i] = Z::new(f64::NAN, f64::NAN);
                    }
                }
            }
            let mut seen = std::collections::HashSet::new();
            for (b, a) in results.into_iter().enumerate() {
                for (j, z) in a.into_iter().enumerate().take(olen) {
                    let i = at(&multi(&olog, j), &onembed, key.ostride, key.odist, b, ooff);
                    assert!(
                        seen.insert(i),
                        "execution writes element {i} twice ({key:?})"
                    );
                    self.write(dst, i, z);
                }
            }
        }
    }

    /// Runs the program of `spec` for a double-precision input on the emulator and compares
    /// it with the CPU path.
    fn emulate(
        spec: &FftSpec,
        in_shape: &[usize],
        out_shape: &[usize],
        seed: u64,
    ) -> std::result::Result<(), String> {
        emulate_with(spec, in_shape, out_shape, seed, false)
    }

    /// [`emulate`] of the program made with `clobber` (the input may be overwritten).
    fn emulate_with(
        spec: &FftSpec,
        in_shape: &[usize],
        out_shape: &[usize],
        seed: u64,
        clobber: bool,
    ) -> std::result::Result<(), String> {
        let len: usize = in_shape.iter().product();
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rnd = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let real = spec.kind == FftKind::R2C;
        let mut x: Vec<Z> = (0..len)
            .map(|_| Z::new(rnd(), if real { 0.0 } else { rnd() }))
            .collect();
        if spec.hermitian {
            // an exactly Hermitian half spectrum: the R2C of real data of the output shape
            let r: Vec<f64> = (0..out_shape.iter().product()).map(|_| rnd()).collect();
            let r2c = FftSpec {
                kind: FftKind::R2C,
                inverse: false,
                hermitian: false,
                axes: spec.axes.clone(),
                support: None,
            };
            x = match cpu::fft::run(&r2c, &HostBuf::F64(r), out_shape, in_shape) {
                Ok(HostBuf::C128(v)) => v,
                other => return Err(format!("cpu R2C gave {other:?}")),
            };
        }
        let dtype = if real { DType::F64 } else { DType::C128 };
        let prec = check(spec, dtype, len, in_shape, out_shape).map_err(|e| e.to_string())?;
        assert_eq!(prec, Precision::Double);
        if let Some(support) = spec.support.as_deref() {
            // zero outside the columns the spec names (pruned from any size)
            let cols = in_shape[in_shape.len() - 1];
            for (j, z) in x.iter_mut().enumerate() {
                if !support.iter().any(|&(l, h)| (l..h).contains(&(j % cols))) {
                    *z = Z::new(0.0, 0.0);
                }
            }
        }
        let host = if real {
            HostBuf::F64(x.iter().map(|z| z.re).collect())
        } else {
            HostBuf::C128(x.clone())
        };
        let prog = program(spec, prec, in_shape, out_shape, clobber, 0);
        let out_len: usize = out_shape.iter().product();
        let mut emu = Emu {
            bufs: [
                x,
                vec![Z::new(f64::NAN, f64::NAN); out_len],
                vec![Z::new(f64::NAN, f64::NAN); prog.work_len],
            ],
            written: vec![false; out_len],
            clobber,
        };
        for st in &prog.steps {
            emu.step(st);
        }
        if let Some(j) = emu.written.iter().position(|w| !w) {
            return Err(format!(
                "output element {j} never written; program {prog:?}"
            ));
        }
        let want: Vec<Z> =
            match cpu::fft::run(spec, &host, in_shape, out_shape).map_err(|e| e.to_string())? {
                HostBuf::C128(v) => v,
                HostBuf::F64(v) => v.into_iter().map(|r| Z::new(r, 0.0)).collect(),
                other => return Err(format!("cpu gave {}", other.dtype())),
            };
        let got = &emu.bufs[1];
        let err: f64 = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).norm_sqr())
            .sum::<f64>()
            .sqrt();
        let norm: f64 = want
            .iter()
            .map(|b| b.norm_sqr())
            .sum::<f64>()
            .sqrt()
            .max(1e-300);
        if err / norm > 1e-10 || err.is_nan() {
            return Err(format!(
                "relative error {:.3e}; program {prog:?}",
                err / norm
            ));
        }
        Ok(())
    }

    /// Every non-empty subset of `0..nd`, each in ascending order and rotated so each
    /// member comes last once.
    fn axes_sets(nd: usize) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        for mask in 1u32..(1 << nd) {
            let set: Vec<usize> = (0..nd).filter(|&a| mask & (1 << a) != 0).collect();
            for r in 0..set.len() {
                let mut v = set.clone();
                v.rotate_left(r);
                out.push(v);
            }
        }
        out
    }

    const SHAPES: [&[usize]; 10] = [
        &[1],
        &[5],
        &[3, 4],
        &[5, 3, 2],
        &[2, 3, 4],
        &[4, 1, 3, 5],
        &[2, 3, 1, 4, 3],
        &[1, 6, 1],
        &[2, 2, 2, 2],
        &[3, 1],
    ];

    fn spec(axes: &[usize], inverse: bool, kind: FftKind) -> FftSpec {
        FftSpec {
            axes: axes.iter().copied().collect(),
            inverse,
            kind,
            hermitian: false,
            support: None,
        }
    }

    #[test]
    fn emulated_c2c_programs_match_the_cpu() {
        let mut fails = Vec::new();
        for shape in SHAPES {
            for axes in axes_sets(shape.len()) {
                for inverse in [false, true] {
                    let sp = spec(&axes, inverse, FftKind::C2C);
                    if let Err(e) = emulate(&sp, shape, shape, axes.len() as u64) {
                        fails.push(format!("C2C {shape:?} {axes:?} inverse={inverse}: {e}"));
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }

    #[test]
    fn emulated_r2c_programs_match_the_cpu() {
        let mut fails = Vec::new();
        for shape in SHAPES {
            for axes in axes_sets(shape.len()) {
                let ra = *axes.last().unwrap();
                let mut out = shape.to_vec();
                out[ra] = shape[ra] / 2 + 1;
                let sp = spec(&axes, false, FftKind::R2C);
                if let Err(e) = emulate(&sp, shape, &out, 3) {
                    fails.push(format!("R2C {shape:?} {axes:?}: {e}"));
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }

    #[test]
    fn emulated_c2r_programs_match_the_cpu() {
        let mut fails = Vec::new();
        for shape in SHAPES {
            for axes in axes_sets(shape.len()) {
                let ra = *axes.last().unwrap();
                for m in [1, 2, 3, 4, 7, 2 * shape[ra].max(1) - 1, 2 * shape[ra]] {
                    let mut out = shape.to_vec();
                    out[ra] = m;
                    let sp = spec(&axes, true, FftKind::C2R);
                    if let Err(e) = emulate(&sp, shape, &out, m as u64) {
                        fails.push(format!("C2R {shape:?} -> {out:?} {axes:?}: {e}"));
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }

    #[test]
    fn emulated_hermitian_c2r_programs_match_the_cpu() {
        // trailing axes (the rewrite's), the real axis exactly `m / 2 + 1` long
        let mut fails = Vec::new();
        for shape in SHAPES {
            let nd = shape.len();
            for k in 1..=nd {
                let axes: Vec<usize> = (nd - k..nd).collect();
                let ra = nd - 1;
                for m in [2, 3, 4, 7, 8] {
                    let (mut i, mut o) = (shape.to_vec(), shape.to_vec());
                    o[ra] = m;
                    i[ra] = m / 2 + 1;
                    let mut sp = spec(&axes, true, FftKind::C2R);
                    sp.hermitian = true;
                    for clobber in [false, true] {
                        if let Err(e) = emulate_with(&sp, &i, &o, m as u64, clobber) {
                            fails.push(format!(
                                "hermitian C2R {i:?} -> {o:?} {axes:?} (clobber {clobber}): {e}"
                            ));
                        }
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
        // the sim step's inverse: a copy and one rank-2 C2R, nothing else
        let mut sp = spec(&[0, 1], true, FftKind::C2R);
        sp.hermitian = true;
        let p = program(&sp, Precision::Single, &[256, 129], &[256, 256], false, 0);
        assert_eq!(p.steps.len(), 2, "{p:?}");
        let Step::Fft { key, .. } = &p.steps[1] else {
            panic!("{p:?}")
        };
        assert_eq!(key.n.as_slice(), &[256i64, 256][..]);
        // with a dead input: the C2R alone, on the input, no work buffer
        let p = program(&sp, Precision::Single, &[256, 129], &[256, 256], true, 0);
        assert_eq!(p.work_len, 0, "{p:?}");
        let [Step::Fft { key, src, dst, .. }] = p.steps.as_slice() else {
            panic!("{p:?}")
        };
        assert_eq!(
            (key.n.as_slice(), *src, *dst),
            (&[256i64, 256][..], Buf::Input, Buf::Output)
        );
    }

    #[test]
    fn emulated_pruned_c2c_programs_match_the_cpu() {
        // inputs zero outside the columns of the support, the last two axes transformed
        type Case<'a> = (&'a [usize], &'a [(usize, usize)]);
        let cases: &[Case] = &[
            (&[6, 8], &[(0, 2), (6, 8)]),
            (&[5, 8], &[(2, 6)]),
            (&[4, 7], &[(0, 1), (3, 4), (6, 7)]),
            (&[3, 4, 6], &[(1, 3)]),
            (&[2, 1, 5, 4], &[(0, 1), (3, 4)]),
            (&[1, 9, 6], &[(0, 3)]),
        ];
        let mut fails = Vec::new();
        for &(shape, support) in cases {
            let nd = shape.len();
            for first in 0..nd - 1 {
                let axes: Vec<usize> = (first..nd).collect();
                for inverse in [false, true] {
                    let mut sp = spec(&axes, inverse, FftKind::C2C);
                    sp.support = Some(support.into());
                    let prog = program(&sp, Precision::Double, shape, shape, false, 0);
                    let pruned = prog
                        .steps
                        .iter()
                        .any(|s| matches!(s, Step::Fft { offset, .. } if *offset > 0))
                        || prog.steps.iter().any(|s| matches!(s, Step::Zero { .. }));
                    let outer: usize = shape[..nd - 2].iter().product();
                    if pruned != (outer * support.len() <= 4) {
                        fails.push(format!("{shape:?} {axes:?}: pruned {pruned}: {prog:?}"));
                    }
                    for clobber in [false, true] {
                        if let Err(e) = emulate_with(&sp, shape, shape, nd as u64, clobber) {
                            fails.push(format!(
                                "pruned C2C {shape:?} {axes:?} inverse {inverse} support \
                                 {support:?} (clobber {clobber}): {e}"
                            ));
                        }
                    }
                }
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
        // psf 2048's transform: two column passes of 1024 columns each in place in the dead
        // input, then the 4096 rows into the output; below the size, one 2-D plan
        let mut sp = spec(&[0, 1], false, FftKind::C2C);
        sp.support = Some(vec![(0, 1024), (3072, 4096)].into());
        let psf = |sp: &FftSpec, min| {
            let shape = [4096, 4096];
            program(sp, Precision::Single, &shape, &shape, true, min)
        };
        let p = psf(&sp, 1 << 22);
        let cols: Vec<_> = p
            .steps
            .iter()
            .map(|s| match s {
                Step::Fft {
                    key,
                    src,
                    dst,
                    offset,
                    ..
                } => (key.n[0], key.istride, key.batch, *offset, *src, *dst),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            cols,
            [
                (4096, 4096, 1024, 0, Buf::Input, Buf::Input),
                (4096, 4096, 1024, 3072, Buf::Input, Buf::Input),
                (4096, 1, 4096, 0, Buf::Input, Buf::Output),
            ]
        );
        let p = psf(&sp, 1 << 25);
        assert_eq!(p.steps.len(), 1, "{p:?}");
        // a support of most columns is not worth the extra passes
        sp.support = Some(vec![(0, 3500)].into());
        let p = psf(&sp, 0);
        assert_eq!(p.steps.len(), 1, "{p:?}");
    }

    #[test]
    fn plans_of_the_common_layouts() {
        // fft2 on [B, H, W]: one rank-2 plan, batch B, contiguous, one execution
        let p = program(
            &spec(&[1, 2], false, FftKind::C2C),
            Precision::Single,
            &[3, 8, 16],
            &[3, 8, 16],
            false,
            0,
        );
        assert_eq!(p.steps.len(), 1);
        let Step::Fft {
            key,
            loops,
            src,
            dst,
            ..
        } = &p.steps[0]
        else {
            panic!("{p:?}")
        };
        assert_eq!(
            (key.n.as_slice(), key.batch, key.istride, key.idist, *loops),
            (&[8i64, 16][..], 3, 1, 128, 1)
        );
        assert_eq!((*src, *dst), (Buf::Input, Buf::Output));
        // rfft2 on [B, H, W]: one rank-2 R2C plan
        let p = program(
            &spec(&[1, 2], false, FftKind::R2C),
            Precision::Double,
            &[3, 8, 16],
            &[3, 8, 9],
            false,
            0,
        );
        assert_eq!(p.steps.len(), 1, "{p:?}");
        // axis 0 of [N, I]: strided, batched over I, one execution
        let p = program(
            &spec(&[0], false, FftKind::C2C),
            Precision::Single,
            &[8, 5],
            &[8, 5],
            false,
            0,
        );
        let Step::Fft { key, loops, .. } = &p.steps[0] else {
            panic!("{p:?}")
        };
        assert_eq!((key.istride, key.idist, key.batch, *loops), (5, 1, 5, 1));
        // irfft: resize (sanitizing) then one C2R, no hermitian pass
        let p = program(
            &spec(&[1], true, FftKind::C2R),
            Precision::Single,
            &[4, 5],
            &[4, 8],
            false,
            0,
        );
        assert_eq!(p.steps.len(), 2, "{p:?}");
        assert_eq!(p.work_len, 20);
    }
}
