//! Generated FFT passes as plain data: the factorization of a line length into radices,
//! one pass (Stockham transforms of a block of lines held in shared memory, loaded and
//! stored through a three-level line map), the programs of passes that transform axes of a
//! C-order array, and the twiddle tables. [`crate::cuda::fft`] renders a pass to CUDA C;
//! [`host`] executes the same passes on the host (the CPU test of the algorithm).
//!
//! # The algorithm of one pass
//! A pass transforms lines of length `n = r_0 * r_1 * ... * r_{s-1}` (radices from
//! [`RADICES`]) by the Stockham autosort formulation: with `ns = r_0 * ... * r_{t-1}`
//! before stage `t` of radix `r`, butterfly `j < n / r` reads `x[j + q * n / r]`
//! (`q < r`), multiplies them by `w^{q * (j % ns) * n / (ns * r)}` (`w = e^{-2 pi i / n}`,
//! conjugated for inverse transforms; no twiddles at the first stage), transforms them with
//! an `r`-point DFT, and writes `y[(j / ns) * ns * r + j % ns + q * ns]`. After the last
//! stage the line is in natural order. Twiddles come from a table of `w^k`, `k < n`,
//! computed on the host in f64 and rounded once to the pass's precision ([`twiddles`]),
//! never from `sincosf` on the device.
//!
//! # Lines and where they live
//! Line `l < a * b * c` is `(la, lb, lc)` with `lc` fastest; its element `p` is read at
//! `la * da + lb * db + lc * dc + p * stride` of the input, with the input's distances,
//! and written at the same expression of the output's ([`LineMap`]). One map covers every
//! axis of a C-order array (`[outer, n, inner]`: counts `(outer, 1, inner)`, distances
//! `(n * inner, 0, 1)`, stride `inner`) and both passes of a long line split in two.
//!
//! # Lines longer than shared memory
//! A line of `n = n1 * n2` is two passes (the "four-step" split, which is also what the
//! Stockham stages compute when grouped): pass A transforms the `n2` sub-sequences
//! `x[m + p * n2]` (length `n1`) into a work buffer at `m * n1 + k1`; pass B multiplies
//! element `m` of line `k1` by `w_n^{m * k1}` (the pass's `twiddle_in`, from the table of
//! length `n`) and transforms the `n1` lines `y[m * n1 + k1]` (length `n2`), writing
//! `X[k1 + n1 * k2]`. Along a strided axis the same split also replaces one pass whose
//! block would hold too few neighbouring lines to read whole DRAM sectors
//! ([`split_strided`]).
//!
//! # Real transforms
//! An R2C transform's pass along the last axis ([`RealIo::R2C`]) loads real values (the
//! imaginary parts zero), transforms the whole line, and stores the half spectrum
//! (elements `0..=n/2`); a C2R transform's last pass ([`RealIo::C2R`]) loads the half
//! spectrum, takes element `p > n/2` as the conjugate of element `n - p`, and stores the
//! real parts. The line costs a C2C transform's arithmetic (twice a packed real
//! transform's), but the memory traffic, which bounds these passes, is the real data's:
//! [`plan_r2c`], [`plan_c2r`].

pub mod host;

use crate::DType;
use smallvec::SmallVec;

/// Radices a pass is built from.
pub const RADICES: [usize; 6] = [8, 7, 5, 4, 3, 2];

/// Largest line one pass holds in shared memory, in bytes: 4096 complex64 or 2048
/// complex128 values.
pub const MAX_LINE_BYTES: usize = 32768;

/// Largest static shared memory of one block (CUDA's limit without opting in).
pub const MAX_BLOCK_SHARED: usize = 49152;

/// Most threads of one block.
pub const MAX_THREADS: usize = 1024;

/// Shared bytes of one line besides its elements (`ib`, `ob`, `lbv` of the kernel).
const LINE_EXTRA: usize = 24;

/// Bytes of one row of shared-memory banks (32 banks of 4 bytes): the padding of a line
/// ([`pad`]) skips one element per row.
const BANK_ROW: usize = 128;

/// Bytes of one DRAM sector: a strided pass keeps its lines per block a multiple of the
/// elements of a sector, so that the runs of neighbouring lines it reads fill sectors.
const SECTOR: usize = 32;

/// Threads per block a pass aims at when lines are short.
const TARGET_THREADS: usize = 256;

/// Lines per block a pass aims at when its loads or stores are strided (so that the lines'
/// neighbouring elements fill memory transactions), shared memory allowing.
const STRIDED_LINES: usize = 16;

/// Fewest blocks a pass aims for: a launch over few lines (a 256-line transform of the
/// 128 PSF) takes fewer lines per block rather than leave SMs idle (H100 and H200 have
/// 132). ncu on the 256^2 PSF's row pass at 16 lines a block (16 blocks): 4.5 % of the SMs'
/// throughput, 25 % of warps active, 10.4 us.
const MIN_BLOCKS: u64 = 128;

/// Stage threads of a launch below which [`FftPass::spread_for`] spreads the load and store
/// phases: 2^16, a quarter of the threads 132 SMs hold at once.
const SPREAD_BELOW: u64 = 1 << 16;

/// Most threads of a spread block (fused elementwise work with its trigonometry keeps
/// more registers than 1024 threads a block leave).
const SPREAD_BLOCK: u32 = 512;

/// The radices of `n` in stage order, or `None` when `n` has a prime factor above 7 (or is
/// 0). Powers of two use radix 8 and at most two radix-4 stages (radix 2 only for `n == 2`
/// times odd factors); `1` has no stage.
pub fn factor(n: usize) -> Option<SmallVec<[u8; 16]>> {
    if n == 0 {
        return None;
    }
    let mut m = n;
    let mut odd: SmallVec<[u8; 16]> = SmallVec::new();
    for p in [7usize, 5, 3] {
        while m.is_multiple_of(p) {
            odd.push(p as u8);
            m /= p;
        }
    }
    if !m.is_power_of_two() {
        return None;
    }
    let k = m.trailing_zeros() as usize;
    let mut r: SmallVec<[u8; 16]> = SmallVec::new();
    match (k / 3, k % 3) {
        (e, 0) => r.extend(std::iter::repeat_n(8, e)),
        (0, 1) => r.push(2),
        (e, 1) => {
            r.extend(std::iter::repeat_n(8, e - 1));
            r.extend([4, 4]);
        }
        (e, _) => {
            r.extend(std::iter::repeat_n(8, e));
            r.push(4);
        }
    }
    r.extend(odd);
    Some(r)
}

/// Bytes of one complex element of `dtype` (`C64` or `C128`), `None` for other dtypes.
pub fn complex_size(dtype: DType) -> Option<usize> {
    match dtype {
        DType::C64 => Some(8),
        DType::C128 => Some(16),
        _ => None,
    }
}

/// Whether one pass transforms lines of length `n` of `dtype` (in shared memory).
pub fn one_pass(n: usize, dtype: DType) -> bool {
    let Some(size) = complex_size(dtype) else {
        return false;
    };
    match factor(n) {
        Some(r) => {
            n * size <= MAX_LINE_BYTES
                && threads_per_line(n, &r) <= MAX_THREADS
                && pitch(n, dtype) * size + LINE_EXTRA <= MAX_BLOCK_SHARED
        }
        None => false,
    }
}

/// The split `(n1, n2)` of a line of length `n` into the two passes described in the
/// module docs: both factors one-pass lengths, as close to `sqrt(n)` as possible. `None`
/// when `n` is a one-pass length or has no such split.
pub fn split(n: usize, dtype: DType) -> Option<(usize, usize)> {
    if one_pass(n, dtype) {
        return None;
    }
    two_factors(n, dtype)
}

/// The factors `(n / d, d)` of `n`, both one-pass lengths, with `d <= sqrt(n)` as large as
/// possible; the larger factor first: pass A's strided loads then cover more lines per
/// block in pass B, which reads the work buffer strided as well.
fn two_factors(n: usize, dtype: DType) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    let mut d = 2;
    while d * d <= n {
        if n.is_multiple_of(d) && one_pass(d, dtype) && one_pass(n / d, dtype) {
            best = Some((n / d, d));
        }
        d += 1;
    }
    best
}

/// The shared-memory slot of element `i` of a line of `dtype` (`C64` or `C128`): one
/// element skipped per `BANK_ROW` bytes. The Stockham stages write butterfly outputs at
/// `d + q * ns`; at the first stages (`ns` 1 or 2) neighbouring threads write `r` elements
/// apart, which without the skip puts a half-warp of radix-8 writes on two bank groups (an
/// 8-way conflict); with it the 16 writes of a half-warp land on 16 different bank pairs.
/// The renderer computes the same (`lf_pad`).
pub fn pad(i: usize, dtype: DType) -> usize {
    let per_row = BANK_ROW / complex_size(dtype).unwrap_or(8);
    i + i / per_row
}

/// Shared-memory elements between the starts of neighbouring lines of a block: the padded
/// length made odd, so that a load or store phase with neighbouring threads on neighbouring
/// lines (strided passes) hits different banks.
pub fn pitch(n: usize, dtype: DType) -> usize {
    padded_len(n, dtype) | 1
}

/// Shared-memory elements a line of `n` takes with its padding ([`pad`]).
fn padded_len(n: usize, dtype: DType) -> usize {
    pad(n.max(1) - 1, dtype) + 1
}

/// The split `(n1, n2)` of a one-pass length `n` along a strided axis (`inner > 1`) whose
/// one pass would hold fewer lines per block than a DRAM sector holds elements: every warp
/// of its loads would then fetch sectors it uses a part of (a quarter for one line of
/// c64). Two passes of short lines ([`split`]'s structure) hold many neighbouring lines per
/// block and read whole sectors; they move the data twice, which costs less than reading
/// a quarter of every sector. `None` when one pass is kept.
pub fn split_strided(n: usize, dtype: DType) -> Option<(usize, usize)> {
    let size = complex_size(dtype)?;
    if !one_pass(n, dtype) || strided_lines(n, dtype) >= SECTOR / size {
        return None;
    }
    two_factors(n, dtype)
}

/// Lines per block of a one-pass length `n` with strided loads.
fn strided_lines(n: usize, dtype: DType) -> usize {
    FftPass::new(n, dtype, false, true, true, false).lines_per_block as usize
}

/// Whether the generated passes transform lines of length `n` of `dtype` (one pass, or two
/// through a work buffer); lengths they do not cover go to the library FFT.
pub fn covers(n: usize, dtype: DType) -> bool {
    n >= 1 && (one_pass(n, dtype) || split(n, dtype).is_some())
}

/// Threads that share one line: one butterfly of the largest radix each (`n / r_max`);
/// stages of smaller radices loop.
fn threads_per_line(n: usize, radices: &[u8]) -> usize {
    let rmax = radices.iter().copied().max().unwrap_or(1) as usize;
    (n / rmax).max(1)
}

/// The twiddle table of length `n` in f64: `w^k = e^{-2 pi i k / n}` as `(re, im)`,
/// `k < n`, with the angle reduced to `[-pi, pi]` before `sin_cos` (so every entry is
/// within about one f64 rounding of the exact value).
pub fn twiddles(n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|k| {
            // k - n for k > n/2: the angle -2 pi k / n in [-pi, pi]
            let kk = if 2 * k > n {
                k as f64 - n as f64
            } else {
                k as f64
            };
            let (s, c) = (-2.0 * std::f64::consts::PI * kk / n as f64).sin_cos();
            (c, s)
        })
        .collect()
}

/// Structure of one generated pass: everything its compiled kernel depends on (its cache
/// key). Sizes of the batch, distances and strides are [`PassArgs`], kernel arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FftPass {
    /// Line length.
    pub n: u32,
    /// Radices in stage order (product `n`; empty for `n == 1`).
    pub radices: SmallVec<[u8; 16]>,
    /// `C64` or `C128`.
    pub dtype: DType,
    /// Positive exponent (unnormalized inverse).
    pub inverse: bool,
    /// Lines each block transforms (its shared memory holds them all).
    pub lines_per_block: u32,
    /// Threads of a block working on one line.
    pub threads_per_line: u32,
    /// The load phase puts neighbouring lines on neighbouring threads (strided input),
    /// else neighbouring elements of a line.
    pub load_lines_fastest: bool,
    /// The same for the store phase.
    pub store_lines_fastest: bool,
    /// Element `p` of a line whose middle line coordinate is `lb` is multiplied by
    /// `W^{p * lb}` after its load, `W` the root of the second twiddle table (pass B of
    /// a split line).
    pub twiddle_in: bool,
    /// Every element offset of the launch (input, output, work buffer, tables) fits an
    /// `i32`: the kernel computes line bases and element offsets in 32-bit integers, and
    /// so does elementwise work fused into the pass (`crate::cuda::fft::render_fused`; a
    /// caller fusing work that reads or writes 2^31 elements or more clears it).
    pub index32: bool,
    /// Loads only the elements of a line inside `PassArgs::keep`, the others are zero.
    pub masked: bool,
    /// The fastest line coordinate counts the columns inside `PassArgs::keep`'s two ranges:
    /// `lc < keep[1] - keep[0]` stands for column `keep[0] + lc`, a larger one for
    /// `keep[2] + lc - (keep[1] - keep[0])` (the first pass of a pruned program, one launch
    /// over both ranges).
    pub gathered: bool,
    /// Threads of the load and store phases per stage thread (a power of two, at least 1):
    /// the block has `lines_per_block * threads_per_line * spread` threads, and only the
    /// first `lines_per_block * threads_per_line` run the stages. A small launch with
    /// elementwise work fused into its load or store ([`FftPass::spread_for`]) then
    /// computes that work on more threads at once, instead of each stage thread computing
    /// `n / threads_per_line` elements one after another.
    pub spread: u32,
    /// Transforms its lines, passes every element through the fused middle work (the
    /// consumer of one transform that produces the next: `crate::cuda::fft::Fused::mid`,
    /// at the element's linear index in the output), and transforms the lines back in the
    /// other direction: the last pass of a transform and the first of its inverse along
    /// the same axis as one pass ([`plan_round_trip`]).
    pub round_trip: bool,
    /// Real data at one end of the pass (the last-axis pass of a real transform).
    pub real: RealIo,
}

/// Real data at one end of a pass ([`FftPass::real`]): the load and store of the pass
/// along the last axis of an R2C or C2R transform. Line maps count the real buffer's
/// elements at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RealIo {
    /// Complex at both ends.
    #[default]
    Complex,
    /// Loads real values (imaginary parts zero) and stores elements `0..=n/2` of each
    /// line, the half spectrum.
    R2C,
    /// Loads the half spectrum, elements `0..=n/2` of each line (element `p > n/2` is the
    /// conjugate of element `n - p`; the imaginary parts of elements 0 and `n/2` drop out,
    /// as NumPy's and cuFFT's C2R drop them), and stores the real parts.
    C2R,
}

impl RealIo {
    /// Elements of a line at the pass's input end, for lines of length `n`.
    pub fn in_len(self, n: usize) -> usize {
        match self {
            RealIo::C2R => n / 2 + 1,
            _ => n,
        }
    }

    /// Elements of a line at the pass's output end, for lines of length `n`.
    pub fn out_len(self, n: usize) -> usize {
        match self {
            RealIo::R2C => n / 2 + 1,
            _ => n,
        }
    }

    /// The dtype of the pass's input elements for a pass of complex `dtype`.
    pub fn in_dtype(self, dtype: DType) -> DType {
        match self {
            RealIo::R2C => real_of(dtype),
            _ => dtype,
        }
    }

    /// The dtype of the pass's output elements for a pass of complex `dtype`.
    pub fn out_dtype(self, dtype: DType) -> DType {
        match self {
            RealIo::C2R => real_of(dtype),
            _ => dtype,
        }
    }
}

/// The real dtype of complex `dtype` (`F32` for `C64`, else `F64`).
fn real_of(dtype: DType) -> DType {
    match dtype {
        DType::C64 => DType::F32,
        _ => DType::F64,
    }
}

/// Where element `p` of line `(la, lb, lc)` lives in a buffer: `la * dist[0] + lb *
/// dist[1] + lc * dist[2] + p * stride` (elements; `lc` through the support's ranges in a
/// [`FftPass::gathered`] pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LineMap {
    /// Distances of the three line coordinates.
    pub dist: [i64; 3],
    /// Distance of neighbouring elements of a line.
    pub stride: i64,
}

/// The launch arguments of one pass: the lines and where they are read and written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PassArgs {
    /// Counts of the line coordinates `(la, lb, lc)`; lines are their product.
    pub lines: [u64; 3],
    /// The input's map.
    pub input: LineMap,
    /// The output's map.
    pub output: LineMap,
    /// Length of the second twiddle table (`twiddle_in` passes), else 0.
    pub big_n: u64,
    /// The support's ranges `[keep[0], keep[1])` and `[keep[2], keep[3])` (the second may be
    /// empty): a [`FftPass::masked`] pass loads element `p` of a line only inside them (the
    /// others are zeros a pruned first pass did not write), a [`FftPass::gathered`] pass
    /// transforms the columns inside them ([`plan_c2c_pruned`]).
    pub keep: [u64; 4],
}

impl PassArgs {
    /// Number of lines.
    pub fn line_count(&self) -> u64 {
        self.lines.iter().product()
    }
}

impl FftPass {
    /// A pass over lines of length `n` (which [`one_pass`] must accept) with the thread
    /// mapping chosen for the strides of its loads and stores.
    pub fn new(
        n: usize,
        dtype: DType,
        inverse: bool,
        strided_load: bool,
        strided_store: bool,
        twiddle_in: bool,
    ) -> FftPass {
        let radices = factor(n).expect("a covered length");
        let size = complex_size(dtype).expect("a complex dtype");
        let tpl = threads_per_line(n, &radices);
        // each line also takes its two base offsets and its middle coordinate (8 bytes each)
        let by_shared = (MAX_BLOCK_SHARED / (pitch(n, dtype) * size + LINE_EXTRA)).max(1);
        let by_threads = (MAX_THREADS / tpl).max(1);
        let mut lpb = (TARGET_THREADS / tpl).max(1);
        let strided = strided_load || strided_store;
        if strided {
            lpb = lpb.max(STRIDED_LINES);
        }
        let mut lpb = lpb.min(by_shared).min(by_threads).max(1);
        // strided: whole sectors per element row of the block (5 lines of c64 read runs
        // of 40 bytes, which straddle two or three sectors; 4 lines read one sector)
        let sector = SECTOR / size;
        if strided && lpb > sector {
            lpb -= lpb % sector;
        }
        FftPass {
            n: n as u32,
            radices,
            dtype,
            inverse,
            lines_per_block: lpb as u32,
            threads_per_line: tpl as u32,
            load_lines_fastest: strided_load,
            store_lines_fastest: strided_store,
            twiddle_in,
            index32: false,
            masked: false,
            gathered: false,
            spread: 1,
            round_trip: false,
            real: RealIo::Complex,
        }
    }

    /// This pass with its load and store phases spread over more threads ([`FftPass::spread`])
    /// for a launch over `lines` lines (elementwise work fused into them then runs on more
    /// threads at once, and the loads of a plain pass issue from more warps): while the
    /// launch has fewer than `SPREAD_BELOW` stage threads, as many as make each load and
    /// store thread take one element, at most `SPREAD_BLOCK` threads a block.
    pub fn spread_for(mut self, lines: u64) -> FftPass {
        let stage_threads = lines.saturating_mul(self.threads_per_line as u64);
        let mut spread = 1u32;
        if stage_threads < SPREAD_BELOW {
            let per_thread = (self.n / self.threads_per_line.max(1)).max(1);
            while spread * 2 <= per_thread && self.stage_threads() * spread * 2 <= SPREAD_BLOCK {
                spread *= 2;
            }
        }
        self.spread = spread;
        self
    }

    /// This pass with fewer lines per block where a launch over `lines` lines would have
    /// fewer than `MIN_BLOCKS` blocks: at least one line, and along a strided axis at
    /// least one sector's worth of neighbouring lines (so that loads still read whole
    /// sectors); and with its strided load and store spread over more threads where the
    /// launch is small ([`FftPass::spread_for`]).
    pub fn for_lines(mut self, lines: u64) -> FftPass {
        let lpb = self.lines_per_block as u64;
        if lines.div_ceil(lpb) >= MIN_BLOCKS {
            return self.spread_plain(lines);
        }
        let floor = if self.load_lines_fastest || self.store_lines_fastest {
            (SECTOR / complex_size(self.dtype).unwrap_or(8)) as u64
        } else {
            1
        };
        let want = lines.div_ceil(MIN_BLOCKS).max(floor).min(lpb);
        self.lines_per_block = want as u32;
        self.spread_plain(lines)
    }

    /// [`FftPass::spread_for`] for a pass without fused work where neither its load nor its
    /// store could run from the stages' registers (strided, or twiddled on load): a pass
    /// along the line keeps its direct first and last stages (spread, the 256^2 sim step's
    /// row passes lost more to the extra shared-memory round trip than they gained).
    fn spread_plain(self, lines: u64) -> FftPass {
        if (self.load_lines_fastest || self.twiddle_in) && self.store_lines_fastest {
            self.spread_for(lines)
        } else {
            self
        }
    }

    /// Shared-memory elements between the starts of neighbouring lines of this pass's
    /// block: [`pitch`], except where a strided load or store phase puts fewer lines than
    /// a bank row holds elements (`units`: 16 complex64, 8 complex128) on the threads of
    /// one conflict phase (a half-warp of 8-byte or a quarter-warp of 16-byte accesses).
    /// Those threads then take `units / lines` neighbouring elements of each line, and an
    /// odd pitch overlaps them (ncu: 39 % of the shared-memory wavefronts of the 1024^2
    /// PSF's column pass, 4 lines a block, were conflicts); a pitch of `units / lines`
    /// modulo `units` puts every line's run on banks of its own. Only where a warp works
    /// inside one line (32 threads a line or more: the stages never mix lines in a warp)
    /// and the block still fits its shared memory.
    pub fn line_pitch(&self) -> usize {
        let n = self.n as usize;
        let base = pitch(n, self.dtype);
        let Some(size) = complex_size(self.dtype) else {
            return base;
        };
        let units = BANK_ROW / size;
        let lines = self.lines_per_block as usize;
        let strided = self.load_lines_fastest || self.store_lines_fastest;
        if !strided || lines <= 1 || lines >= units || !units.is_multiple_of(lines) {
            return base;
        }
        if (self.threads_per_line as usize) < 32 {
            return base;
        }
        let want = units / lines;
        let p = padded_len(n, self.dtype);
        let aligned = p + (want + units - p % units) % units;
        if lines * (aligned * size + LINE_EXTRA) > MAX_BLOCK_SHARED {
            return base;
        }
        aligned
    }

    /// Threads per block.
    pub fn block(&self) -> u32 {
        self.lines_per_block * self.threads_per_line * self.spread.max(1)
    }

    /// Threads per block that run the stages.
    pub fn stage_threads(&self) -> u32 {
        self.lines_per_block * self.threads_per_line
    }

    /// Blocks of a launch over `lines` lines.
    pub fn grid(&self, lines: u64) -> u64 {
        lines.div_ceil(self.lines_per_block as u64)
    }
}

/// A buffer of a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    /// The transform's input (read only).
    Input,
    /// The transform's output.
    Output,
    /// A work buffer of [`Program::work_len`] elements.
    Work,
}

/// One launch of a program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// The pass.
    pub pass: FftPass,
    /// Its arguments.
    pub args: PassArgs,
    /// The buffer it reads.
    pub src: Buf,
    /// The buffer it writes (may be `src`: a block reads all of its lines before it writes).
    pub dst: Buf,
}

impl Step {
    /// Length of the line twiddle table this step reads (`n` of its pass).
    pub fn table_len(&self) -> usize {
        self.pass.n as usize
    }
}

/// The passes of an unnormalized C2C transform over some axes of a C-order array.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Program {
    /// Launches in order.
    pub steps: Vec<Step>,
    /// Elements of the work buffer (0: none).
    pub work_len: usize,
    /// Elements of the output (real ones for a C2R program).
    pub out_len: usize,
}

/// The program of an unnormalized C2C transform of a C-order array of `shape` and complex
/// `dtype` along `axes` (each once, in range), from the input into the output: one pass per
/// axis (two for a line longer than shared memory), the first reading the input, the
/// others in place on the output. `None` when an axis length is not covered ([`covers`]),
/// the dtype is not complex, or the array is empty (the caller keeps its other path).
pub fn plan_c2c(shape: &[usize], axes: &[usize], dtype: DType, inverse: bool) -> Option<Program> {
    plan_c2c_pruned(shape, axes, dtype, inverse, None)
}

/// Most ranges of a support a pruned program takes (`PassArgs::keep` holds two).
const PRUNE_RANGES: usize = 2;

/// [`plan_c2c`] of an input that is zero outside the ranges `support` of its last axis
/// (sorted, disjoint; the zero padding of a PSF's pupil): where `axes` include the last two
/// and the last is one pass, the second-to-last axis goes first and transforms only the
/// columns inside the support (at most two ranges covering at most three quarters of the
/// columns, one launch over both: [`FftPass::gathered`]), and the last axis's pass loads
/// only those columns
/// ([`FftPass::masked`]), taking the others as the zeros they are; the output's other
/// columns are never read before that pass writes them. Otherwise the plain program.
pub fn plan_c2c_pruned(
    shape: &[usize],
    axes: &[usize],
    dtype: DType,
    inverse: bool,
    support: Option<&[(usize, usize)]>,
) -> Option<Program> {
    let (todo, keep) = axis_order(shape, axes, dtype, support)?;
    let mut prog = Program::default();
    axes_steps(&mut prog, shape, &todo, keep, dtype, inverse, Buf::Input);
    set_index32(&mut prog, shape);
    Some(prog)
}

/// The program of `C2C(!inverse, axes_back)(mid(C2C(inverse, axes)(x)))`, `mid` an
/// elementwise map of each element at its linear index (the consumer of the first
/// transform that produces the second's input), where both transform the same axes (in
/// any order) and the first program's last axis is one pass: that pass becomes a
/// [`FftPass::round_trip`] pass (forward, `mid`, back along that axis), and the second
/// transform's other axes follow in place. `support` prunes the first transform as in
/// [`plan_c2c_pruned`]. `None` where this does not apply (the caller keeps two programs).
pub fn plan_round_trip(
    shape: &[usize],
    axes: &[usize],
    axes_back: &[usize],
    dtype: DType,
    inverse: bool,
    support: Option<&[(usize, usize)]>,
) -> Option<Program> {
    plan_chain(
        shape,
        &[(axes, inverse), (axes_back, !inverse)],
        dtype,
        support,
    )
}

/// The program of a chain of C2C transforms `links` (axes and direction of each, in
/// order), an elementwise map of each element at its linear index between each two
/// (`mid_j` computing transform `j`'s input from transform `j - 1`'s output): consecutive
/// transforms run in opposite directions over the same axes, and each pair is a round
/// trip ([`plan_round_trip`]). The first transform's passes come first, its last axis's
/// pass going there and back ([`FftPass::round_trip`], computing `mid_1`); each following
/// transform's other axes follow in place, its last one going on into the next transform
/// (round-trip pass `j` computes `mid_j`). A spectral step `ifft2(fft2(u) * m)` repeated
/// with elementwise work between the steps thus takes two passes a step. `support` prunes
/// the first transform as in [`plan_c2c_pruned`]. `None` where this does not apply: fewer
/// than two transforms, directions that do not alternate, different axis sets, a turning
/// axis that takes two passes, or a transform inside the chain with one axis only (it has
/// no pass of its own to turn in).
pub fn plan_chain(
    shape: &[usize],
    links: &[(&[usize], bool)],
    dtype: DType,
    support: Option<&[(usize, usize)]>,
) -> Option<Program> {
    let [(axes, inverse), rest @ ..] = links else {
        return None;
    };
    if rest.is_empty() {
        return None;
    }
    let (todo, keep) = axis_order(shape, axes, dtype, support)?;
    let mut set = todo.clone();
    set.sort_unstable();
    let mut prog = Program::default();
    axes_steps(&mut prog, shape, &todo, keep, dtype, *inverse, Buf::Input);
    let (mut turn, mut dir) = (*todo.last()?, *inverse);
    for (j, &(axes_back, inv)) in rest.iter().enumerate() {
        let (back, _) = axis_order(shape, axes_back, dtype, None)?;
        let mut b = back.clone();
        b.sort_unstable();
        let outer: usize = shape[..turn].iter().product();
        let inner: usize = shape[turn + 1..].iter().product();
        if inv == dir || b != set || shape[turn] < 2 || !axis_one_pass(shape[turn], inner, dtype) {
            return None;
        }
        let rt = prog.steps.last_mut()?;
        if rt.dst != Buf::Output
            || rt.pass.twiddle_in
            || rt.pass.round_trip
            || rt.args.lines != [outer as u64, 1, inner as u64]
        {
            return None;
        }
        rt.pass.round_trip = true;
        let others: Vec<usize> = back.into_iter().filter(|&x| x != turn).collect();
        if j + 1 < rest.len() {
            // the next turn is this transform's last pass, along another axis
            turn = *others.last()?;
        }
        axes_steps(&mut prog, shape, &others, None, dtype, inv, Buf::Output);
        dir = inv;
    }
    set_index32(&mut prog, shape);
    Some(prog)
}

/// The program of an unnormalized R2C transform (NumPy's `rfftn`) of a real C-order array
/// of `shape` along `axes` (each once, in range), the last of them the array's last axis
/// (halved: the output is `shape` with that extent `n/2 + 1`), the output of complex
/// `dtype`: that axis's pass first ([`RealIo::R2C`], reading the real input, writing the
/// half spectrum), then the other axes in place on the output, as [`plan_c2c`] over the
/// half spectrum's shape. `None` where the generated passes do not cover the transform, the
/// halved axis is not the last or takes two passes, or the array is empty.
pub fn plan_r2c(shape: &[usize], axes: &[usize], dtype: DType) -> Option<Program> {
    let (outer, n, half, others) = real_plan_shapes(shape, axes, dtype)?;
    let mut prog = Program::default();
    prog.steps.push(real_step(
        outer,
        n,
        dtype,
        RealIo::R2C,
        Buf::Input,
        Buf::Output,
    ));
    if !others.is_empty() {
        let (todo, _) = axis_order(&half, &others, dtype, None)?;
        axes_steps(&mut prog, &half, &todo, None, dtype, false, Buf::Output);
    }
    set_index32(&mut prog, shape);
    prog.out_len = half.iter().product();
    Some(prog)
}

/// The program of an unnormalized C2R transform (NumPy's `irfftn` without its scaling)
/// into a real C-order array of `shape` along `axes` (as [`plan_r2c`]: the last of them the
/// array's last axis), from the half spectrum of complex `dtype`: the other axes first
/// (inverse, from the input into the work buffer, then in place there), then the last
/// axis's pass ([`RealIo::C2R`]) into the real output. `None` as [`plan_r2c`], and where
/// another axis takes two passes (the work buffer is the program's only scratch).
pub fn plan_c2r(shape: &[usize], axes: &[usize], dtype: DType) -> Option<Program> {
    let (outer, n, half, others) = real_plan_shapes(shape, axes, dtype)?;
    let mut prog = Program::default();
    let mut src = Buf::Input;
    if !others.is_empty() {
        let (todo, _) = axis_order(&half, &others, dtype, None)?;
        work_steps(&mut prog, &half, &todo, dtype, true, Buf::Input)?;
        src = Buf::Work;
    }
    prog.steps
        .push(real_step(outer, n, dtype, RealIo::C2R, src, Buf::Output));
    set_index32(&mut prog, shape);
    Some(prog)
}

/// The program of `C2R(axes)(mid(R2C(axes)(x)))` into a real array of `shape` (as
/// [`plan_r2c`]), `mid` an elementwise map of each element of the half spectrum at its
/// linear index (a spectral filter between `rfftn` and `irfftn`): the R2C transform's
/// last-axis pass into the work buffer, its other axes there, the last of them going there
/// and back with `mid` between ([`FftPass::round_trip`]), the C2R transform's other axes,
/// and its last-axis pass into the real output. A 2-D real spectral step is three passes,
/// the middle one over the half spectrum. `None` as [`plan_c2r`], or where only the halved
/// axis is transformed (no pass to turn in).
pub fn plan_real_round_trip(shape: &[usize], axes: &[usize], dtype: DType) -> Option<Program> {
    let (outer, n, half, others) = real_plan_shapes(shape, axes, dtype)?;
    if others.is_empty() {
        return None;
    }
    let mut prog = Program::default();
    prog.steps.push(real_step(
        outer,
        n,
        dtype,
        RealIo::R2C,
        Buf::Input,
        Buf::Work,
    ));
    let (todo, _) = axis_order(&half, &others, dtype, None)?;
    let (&turn, back) = todo.split_last()?;
    if half[turn] < 2 {
        return None;
    }
    work_steps(&mut prog, &half, &todo, dtype, false, Buf::Work)?;
    prog.steps.last_mut()?.pass.round_trip = true;
    work_steps(&mut prog, &half, back, dtype, true, Buf::Work)?;
    prog.steps.push(real_step(
        outer,
        n,
        dtype,
        RealIo::C2R,
        Buf::Work,
        Buf::Output,
    ));
    set_index32(&mut prog, shape);
    Some(prog)
}

/// Appends the steps of the axes `todo` of the half spectrum `half` in the work buffer
/// (the first reading `src`, the others in place there), each axis one pass (the work
/// buffer is the real programs' only scratch); `None` where one takes two.
fn work_steps(
    prog: &mut Program,
    half: &[usize],
    todo: &[usize],
    dtype: DType,
    inverse: bool,
    src: Buf,
) -> Option<()> {
    for &a in todo {
        let inner: usize = half[a + 1..].iter().product();
        if !axis_one_pass(half[a], inner, dtype) {
            return None;
        }
    }
    let at = prog.steps.len();
    axes_steps(prog, half, todo, None, dtype, inverse, src);
    for s in &mut prog.steps[at..] {
        for b in [&mut s.src, &mut s.dst] {
            if *b == Buf::Output {
                *b = Buf::Work;
            }
        }
    }
    prog.work_len = half.iter().product();
    Some(())
}

/// What [`plan_r2c`] and [`plan_c2r`] plan from: the lines before the halved (last) axis,
/// its length, the half spectrum's shape, and the other axes longer than one (checked:
/// covered, in range, each once; the halved axis one pass).
fn real_plan_shapes(
    shape: &[usize],
    axes: &[usize],
    dtype: DType,
) -> Option<(usize, usize, Vec<usize>, Vec<usize>)> {
    complex_size(dtype)?;
    let nd = shape.len();
    let &last = axes.last()?;
    let mut seen = axes.to_vec();
    seen.sort_unstable();
    seen.dedup();
    if last + 1 != nd
        || seen.len() != axes.len()
        || axes.iter().any(|&a| a >= nd)
        || shape.contains(&0)
        || axes.iter().any(|&a| !covers(shape[a], dtype))
        || !axis_one_pass(shape[last], 1, dtype)
    {
        return None;
    }
    let n = shape[last];
    let mut half = shape.to_vec();
    half[last] = n / 2 + 1;
    let others = axes[..axes.len() - 1]
        .iter()
        .copied()
        .filter(|&a| shape[a] > 1)
        .collect();
    Some((shape[..last].iter().product(), n, half, others))
}

/// The pass of a real transform along the last axis (`real` says which end is real) over
/// `outer` lines of length `n`, reading `src` and writing `dst`.
fn real_step(outer: usize, n: usize, dtype: DType, real: RealIo, src: Buf, dst: Buf) -> Step {
    let mut pass = FftPass::new(n, dtype, real == RealIo::C2R, false, false, false);
    pass.real = real;
    let map = |len: usize| LineMap {
        dist: [len as i64, 0, 1],
        stride: 1,
    };
    Step {
        pass: pass.for_lines(outer as u64),
        args: PassArgs {
            lines: [outer as u64, 1, 1],
            input: map(real.in_len(n)),
            output: map(real.out_len(n)),
            big_n: 0,
            keep: [0; 4],
        },
        src,
        dst,
    }
}

/// The axes of a transform of `shape` over `axes` in the order its passes take them, and
/// the `keep` ranges of a pruned program (see [`plan_c2c_pruned`]); `None` where the
/// generated passes do not cover the transform.
fn axis_order(
    shape: &[usize],
    axes: &[usize],
    dtype: DType,
    support: Option<&[(usize, usize)]>,
) -> Option<(Vec<usize>, Option<[u64; 4]>)> {
    complex_size(dtype)?;
    if shape.contains(&0)
        || axes.iter().any(|&a| a >= shape.len())
        || axes.iter().any(|&a| !covers(shape[a], dtype))
    {
        return None;
    }
    // a length-1 axis is the identity; with nothing else to do, one pass copies
    let mut todo: Vec<usize> = axes.iter().copied().filter(|&a| shape[a] > 1).collect();
    if todo.is_empty() {
        todo.push(*axes.first()?);
    }
    let keep = support.and_then(|s| prunable(shape, &todo, dtype, s));
    if keep.is_some() {
        let nd = shape.len();
        todo.retain(|&a| a + 2 < nd);
        todo.splice(0..0, [nd - 2, nd - 1]);
    }
    Some((todo, keep))
}

/// Appends the steps of the axes `todo` (in order) of a transform of `shape`, the first
/// reading `src` and the others the output, pruned by `keep` (the first two axes of
/// [`axis_order`]'s pruned order).
#[allow(clippy::too_many_arguments)]
fn axes_steps(
    prog: &mut Program,
    shape: &[usize],
    todo: &[usize],
    keep: Option<[u64; 4]>,
    dtype: DType,
    inverse: bool,
    first_src: Buf,
) {
    for (i, &ax) in todo.iter().enumerate() {
        let n = shape[ax];
        let outer: usize = shape[..ax].iter().product();
        let inner: usize = shape[ax + 1..].iter().product();
        let src = if i == 0 { first_src } else { Buf::Output };
        let at = prog.steps.len();
        match (keep, i) {
            (Some(k), 0) => {
                let width = (k[1] - k[0] + k[3] - k[2]) as usize;
                axis_steps(prog, n, outer, inner, width, dtype, inverse, src);
                for s in &mut prog.steps[at..] {
                    s.pass.gathered = true;
                    s.args.keep = k;
                }
            }
            (Some(k), 1) => {
                axis_steps(prog, n, outer, inner, inner, dtype, inverse, src);
                let s = &mut prog.steps[at];
                s.pass.masked = true;
                s.args.keep = k;
            }
            _ => axis_steps(prog, n, outer, inner, inner, dtype, inverse, src),
        }
    }
}

/// Sets [`FftPass::index32`] of every step of a program over `shape`, and its output's
/// length (the array's): every buffer of the program (input, output, work) holds the
/// array's elements, the tables fewer, so 32-bit offsets serve when the array's do (a
/// real program passes the larger of its two shapes).
fn set_index32(prog: &mut Program, shape: &[usize]) {
    let total: usize = shape.iter().product();
    let index32 = total <= i32::MAX as usize;
    for s in &mut prog.steps {
        s.pass.index32 = index32;
    }
    prog.out_len = total;
}

/// Whether [`axis_steps`] transforms an axis of length `n` (covered) with `inner`
/// elements after it in one pass.
fn axis_one_pass(n: usize, inner: usize, dtype: DType) -> bool {
    axis_split(n, inner, dtype).is_none()
}

/// The two passes' line lengths of an axis of length `n` with `inner` elements after it
/// ([`split`], and [`split_strided`] along a strided axis), `None` for one pass.
fn axis_split(n: usize, inner: usize, dtype: DType) -> Option<(usize, usize)> {
    match inner > 1 {
        true => split(n, dtype).or_else(|| split_strided(n, dtype)),
        false => split(n, dtype),
    }
}

/// The `keep` ranges of a pruned program of `shape` over the axes `todo` of an input zero
/// outside `support` (see [`plan_c2c_pruned`]), `None` where pruning does not apply.
fn prunable(
    shape: &[usize],
    todo: &[usize],
    dtype: DType,
    support: &[(usize, usize)],
) -> Option<[u64; 4]> {
    let nd = shape.len();
    if nd < 2 || !todo.contains(&(nd - 1)) || !todo.contains(&(nd - 2)) {
        return None;
    }
    let cols = shape[nd - 1];
    let covered: usize = support.iter().map(|&(l, h)| h.saturating_sub(l)).sum();
    let sorted = support.windows(2).all(|w| w[0].1 < w[1].0);
    if support.is_empty()
        || support.len() > PRUNE_RANGES
        || !sorted
        || support.iter().any(|&(l, h)| l >= h || h > cols)
        || covered * 4 > cols * 3
        || !one_pass(cols, dtype)
    {
        return None;
    }
    let mut keep = [0u64; 4];
    for (i, &(l, h)) in support.iter().enumerate() {
        keep[2 * i] = l as u64;
        keep[2 * i + 1] = h as u64;
    }
    Some(keep)
}

/// Appends the steps of one axis of length `n` (covered) of an `[outer, n, inner]` view,
/// reading `src` and writing the output, over `width` of the `inner` line coordinates.
#[allow(clippy::too_many_arguments)]
fn axis_steps(
    prog: &mut Program,
    n: usize,
    outer: usize,
    inner: usize,
    width: usize,
    dtype: DType,
    inverse: bool,
    src: Buf,
) {
    let (ni, nn) = (inner as i64, n as i64);
    // `width` values of the fastest line coordinate (`inner`, or the columns of a pruned
    // first pass: `FftPass::gathered`)
    let block = nn * ni;
    match axis_split(n, inner, dtype) {
        None => {
            let map = LineMap {
                dist: [block, 0, 1],
                stride: ni,
            };
            prog.steps.push(Step {
                pass: FftPass::new(n, dtype, inverse, inner > 1, inner > 1, false)
                    .for_lines((outer * width) as u64),
                args: PassArgs {
                    lines: [outer as u64, 1, width as u64],
                    input: map,
                    output: map,
                    big_n: 0,
                    keep: [0; 4],
                },
                src,
                dst: Buf::Output,
            });
        }
        Some((n1, n2)) => {
            let (i1, i2) = (n1 as i64, n2 as i64);
            prog.work_len = prog.work_len.max(outer * n * inner);
            // pass A: line (o, m, i) reads x[m + p * n2], writes y[m * n1 + k1]
            prog.steps.push(Step {
                pass: FftPass::new(n1, dtype, inverse, true, inner > 1, false)
                    .for_lines((outer * n2 * width) as u64),
                args: PassArgs {
                    lines: [outer as u64, n2 as u64, width as u64],
                    input: LineMap {
                        dist: [block, ni, 1],
                        stride: i2 * ni,
                    },
                    output: LineMap {
                        dist: [block, i1 * ni, 1],
                        stride: ni,
                    },
                    big_n: 0,
                    keep: [0; 4],
                },
                src,
                dst: Buf::Work,
            });
            // pass B: line (o, k1, i) reads y[m * n1 + k1] times w_n^(m k1), writes
            // X[k1 + n1 * k2]
            let map = LineMap {
                dist: [block, ni, 1],
                stride: i1 * ni,
            };
            prog.steps.push(Step {
                pass: FftPass::new(n2, dtype, inverse, true, true, true)
                    .for_lines((outer * n1 * width) as u64),
                args: PassArgs {
                    lines: [outer as u64, n1 as u64, width as u64],
                    input: map,
                    output: map,
                    big_n: n as u64,
                    keep: [0; 4],
                },
                src: Buf::Work,
                dst: Buf::Output,
            });
        }
    }
}

/// The constants of an odd prime radix `r`: `(cos(2 pi k / r), sin(2 pi k / r))` for
/// `k = 1..=(r-1)/2`, in f64 (the renderer prints them; the host executor rounds them to
/// its precision the same way).
pub fn odd_radix_constants(r: usize) -> Vec<(f64, f64)> {
    (1..=(r - 1) / 2)
        .map(|k| {
            let (s, c) = (2.0 * std::f64::consts::PI * k as f64 / r as f64).sin_cos();
            (c, s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorizations() {
        let f = |n| factor(n).map(|v| v.to_vec());
        assert_eq!(f(1), Some(vec![]));
        assert_eq!(f(2), Some(vec![2]));
        assert_eq!(f(16), Some(vec![4, 4]));
        assert_eq!(f(32), Some(vec![8, 4]));
        assert_eq!(f(1024), Some(vec![8, 8, 4, 4]));
        assert_eq!(f(4096), Some(vec![8, 8, 8, 8]));
        assert_eq!(f(1000), Some(vec![8, 5, 5, 5]));
        assert_eq!(f(60), Some(vec![4, 5, 3]));
        assert_eq!(f(11), None);
        assert_eq!(f(0), None);
        for n in 1..5000 {
            if let Some(r) = factor(n) {
                assert_eq!(r.iter().map(|&x| x as usize).product::<usize>(), n);
            }
        }
    }

    #[test]
    fn coverage_and_splits() {
        assert!(one_pass(4096, DType::C64));
        assert!(!one_pass(4096, DType::C128));
        assert!(one_pass(2048, DType::C128));
        assert_eq!(split(1 << 14, DType::C64), Some((128, 128)));
        assert_eq!(split(1 << 16, DType::C64), Some((256, 256)));
        assert!(covers(1 << 24, DType::C64));
        assert!(!covers(1 << 25, DType::C64));
        assert!(!covers(22, DType::C64));
        assert!(!covers(8, DType::F32));
    }

    #[test]
    fn passes_fit_a_block() {
        for n in 1..=4096 {
            for dt in [DType::C64, DType::C128] {
                if !one_pass(n, dt) {
                    continue;
                }
                for strided in [false, true] {
                    for lines in [1u64, 100, 1 << 20] {
                        let p =
                            FftPass::new(n, dt, false, strided, strided, false).for_lines(lines);
                        assert!(p.block() as usize <= MAX_THREADS, "{p:?}");
                        assert!(p.line_pitch() >= pitch(n, dt) - 1, "{p:?}");
                        let per_line = p.line_pitch() * complex_size(dt).unwrap() + LINE_EXTRA;
                        let shared = p.lines_per_block as usize * per_line;
                        assert!(shared <= MAX_BLOCK_SHARED, "{p:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn strided_phases_spread_over_the_banks() {
        // a conflict phase of a strided load: `units` threads, `lines` lines, `units /
        // lines` neighbouring elements of each; every slot on a bank of its own
        for (n, dt) in [(1024, DType::C64), (512, DType::C64), (1024, DType::C128)] {
            let p = FftPass::new(n, dt, false, true, true, false);
            let units = BANK_ROW / complex_size(dt).unwrap();
            let lines = p.lines_per_block as usize;
            assert!(lines < units, "{p:?}");
            let pitch = p.line_pitch();
            for p0 in [0usize, 16, 100, 500] {
                let banks: std::collections::BTreeSet<usize> = (0..units)
                    .map(|e| ((e % lines) * pitch + pad(p0 + e / lines, dt)) % units)
                    .collect();
                assert_eq!(banks.len(), units, "n {n} {dt:?} pitch {pitch} p0 {p0}");
            }
        }
    }

    #[test]
    fn few_lines_take_more_blocks() {
        // the 128 PSF's 256^2 transform: 256 lines per axis
        let prog = plan_c2c(&[256, 256], &[0, 1], DType::C64, false).unwrap();
        let grids: Vec<u64> = prog
            .steps
            .iter()
            .map(|s| s.pass.grid(s.args.line_count()))
            .collect();
        // the strided axis keeps a sector of neighbouring lines (4 complex64) a block
        assert_eq!(prog.steps[0].pass.lines_per_block, 4);
        assert_eq!(grids, vec![64, 128]);
        // many lines: unchanged
        let big = plan_c2c(&[4096, 256], &[1], DType::C64, false).unwrap();
        let p = &big.steps[0].pass;
        assert_eq!(
            p.lines_per_block,
            FftPass::new(256, DType::C64, false, false, false, false).lines_per_block
        );
        // one line: one block
        let one = FftPass::new(1024, DType::C128, false, false, false, false).for_lines(1);
        assert_eq!(one.lines_per_block, 1);
    }

    #[test]
    fn padding_and_strided_splits() {
        assert_eq!(pad(15, DType::C64), 15);
        assert_eq!(pad(16, DType::C64), 17);
        assert_eq!(pad(8, DType::C128), 9);
        assert_eq!(pitch(1024, DType::C64) % 2, 1);
        // radix-8 first-stage writes of a half-warp: 16 distinct bank pairs
        let slots: std::collections::BTreeSet<usize> =
            (0..16).map(|j| pad(8 * j, DType::C64) % 16).collect();
        assert_eq!(slots.len(), 16);
        assert_eq!(split_strided(4096, DType::C64), Some((64, 64)));
        assert_eq!(split_strided(2048, DType::C64), Some((64, 32)));
        assert_eq!(split_strided(1024, DType::C64), None);
        assert_eq!(split_strided(64, DType::C64), None);
        let p = FftPass::new(1024, DType::C64, false, true, true, false);
        assert_eq!(p.lines_per_block, 4);
    }

    #[test]
    fn twiddle_table() {
        let t = twiddles(8);
        assert!((t[2].0).abs() < 1e-16 && (t[2].1 + 1.0).abs() < 1e-16);
        assert!((t[6].1 - 1.0).abs() < 1e-16);
    }
}
