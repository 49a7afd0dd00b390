//! Axis tables of the host interpreter: index arithmetic evaluated once per axis value
//! instead of once per element.
//!
//! The views of a fused kernel (flips, rolls, slices, broadcasts, pads, permutations)
//! lower to integer and boolean arithmetic on the components `Axis(k)` of the element's
//! multi-index, ending in the linear index of a load. Most of that arithmetic depends on
//! one axis at a time: a roll along axis 1 is a function of `Axis(1)` only, and the load
//! index is a sum of such functions scaled by the input's strides. Such a value is kept
//! here as `c + T_k0[a_k0] + T_k1[a_k1] + ...`, one table per axis over that axis's whole
//! range, computed while planning a launch with the same column ops the tile loop uses (so
//! with the same results, wrapping included):
//! * `Axis(k)` is the identity table of axis `k`;
//! * a sum, difference, or product with a uniform value of tabled values adds, subtracts
//!   or scales their tables (exact in wrapping `i64` arithmetic);
//! * any other op whose non-uniform operands are tabled on one and the same axis is
//!   evaluated over that axis's table (compares, selects, divisions, ...).
//!
//! In the tile loop a tabled value is filled row by row from its tables (one add per
//! element), and its operands are not computed at all; a load through a tabled index whose
//! bounds the tables prove reads the input row by row without an index column.

use super::{binary_bool, binary_int, select, unary_bool, unary_int, uni_int, Col, Loc, Src};
use crate::ir::Inst;
use crate::ops::BinaryOp;
use crate::{DType, Kernel, Scalar};
use smallvec::SmallVec;

/// Longest axis that gets tables (a table costs about one op per entry to build).
const MAX_AXIS: usize = 1 << 14;

/// `c + Σ tables[t][a_k]` over the `(k, t)` terms, at most one per axis, ascending axes.
#[derive(Clone, Debug, Default)]
pub(super) struct Sep {
    c: i64,
    terms: SmallVec<[(usize, usize); 4]>,
}

/// The tables of one launch's plan.
#[derive(Default)]
pub(super) struct Tables {
    /// Per value: its representation in `seps`, when it has one.
    of: Vec<Option<u32>>,
    /// Per value: a load whose index is tabled (that index's entry of `seps`) and in bounds
    /// everywhere.
    gathers: Vec<Option<u32>>,
    seps: Vec<Sep>,
    /// `I64` or `Bool` columns, one entry per value of their axis.
    tabs: Vec<Col>,
    /// Per table read by a gather along the runs' axis: its unit-step segments.
    segs: Vec<Vec<Seg>>,
}

/// Entries `start .. end` of a table that step by `dir` (+1 or -1; 0: a lone entry), so
/// that a gather through them is a forward or a backward copy.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: usize,
    end: usize,
    dir: i8,
}

/// The axis runs go along: the last one longer than 1 (0 when none is).
fn runs_axis(shape: &[usize]) -> usize {
    (0..shape.len()).rev().find(|&k| shape[k] > 1).unwrap_or(0)
}

/// The maximal unit-step segments of `t`.
fn segments(t: &[i64]) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let step = |j: usize| t.get(j + 1).map(|&y| y.wrapping_sub(t[j]));
        let dir = match step(i) {
            Some(1) => 1,
            Some(-1) => -1,
            _ => 0,
        };
        let mut e = i + 1;
        if dir != 0 {
            while e < t.len() && step(e - 1) == Some(dir as i64) {
                e += 1;
            }
        }
        out.push(Seg {
            start: i,
            end: e,
            dir,
        });
        i = e;
    }
    out
}

/// An operand of a table op: uniform, or a column over one axis.
enum Arg {
    I64(Option<i64>, Vec<i64>),
    Bool(Option<bool>, Vec<bool>),
}

impl Arg {
    fn i64(&self) -> Option<Src<'_, i64>> {
        match self {
            Arg::I64(Some(x), _) => Some(Src::Uni(*x)),
            Arg::I64(None, v) => Some(Src::Col(v)),
            Arg::Bool(..) => None,
        }
    }
    fn bool(&self) -> Option<Src<'_, bool>> {
        match self {
            Arg::Bool(Some(x), _) => Some(Src::Uni(*x)),
            Arg::Bool(None, v) => Some(Src::Col(v)),
            Arg::I64(..) => None,
        }
    }
}

impl Tables {
    /// True when no value is tabled.
    pub(super) fn is_empty(&self) -> bool {
        self.seps.is_empty()
    }

    /// The representation of value `v`, if tabled.
    pub(super) fn of(&self, v: usize) -> Option<&Sep> {
        self.of
            .get(v)
            .copied()
            .flatten()
            .map(|s| &self.seps[s as usize])
    }

    /// The tabled index load `v` reads through (see [`Tables::gather`]).
    pub(super) fn gathers(&self, v: usize) -> Option<&Sep> {
        let s = self.gathers.get(v).copied().flatten()?;
        Some(&self.seps[s as usize])
    }

    fn push(&mut self, v: usize, s: Sep) {
        // per-value entries grow on demand: a kernel without tabled values allocates none
        if self.of.len() <= v {
            self.of.resize(v + 1, None);
        }
        self.of[v] = Some(self.seps.len() as u32);
        self.seps.push(s);
    }

    fn table(&mut self, c: Col) -> usize {
        self.tabs.push(c);
        self.tabs.len() - 1
    }

    fn i64_tab(&self, t: usize) -> &[i64] {
        match &self.tabs[t] {
            Col::I64(v) => v,
            _ => &[],
        }
    }

    /// A tabled `I64` value or an integer uniform as a [`Sep`].
    fn sum_of(&self, locs: &[Loc], o: usize) -> Option<Sep> {
        match self.of(o) {
            Some(s) if matches!(self.tabs[s.terms[0].1], Col::I64(_)) => Some(s.clone()),
            Some(_) => None,
            None => uni_int(locs[o]).map(|c| Sep {
                c,
                terms: SmallVec::new(),
            }),
        }
    }

    /// `a + sign * b` term by term.
    fn combine(&mut self, a: Sep, b: Sep, sign: i64) -> Sep {
        let mut terms: SmallVec<[(usize, usize); 4]> = SmallVec::new();
        let (mut i, mut j) = (0, 0);
        while i < a.terms.len() || j < b.terms.len() {
            let ka = a.terms.get(i).map_or(usize::MAX, |x| x.0);
            let kb = b.terms.get(j).map_or(usize::MAX, |x| x.0);
            if ka < kb {
                terms.push(a.terms[i]);
                i += 1;
            } else if kb < ka {
                let t = if sign == 1 {
                    b.terms[j].1
                } else {
                    let v = self.i64_tab(b.terms[j].1).iter().map(|x| x.wrapping_neg());
                    self.table(Col::I64(v.collect()))
                };
                terms.push((kb, t));
                j += 1;
            } else {
                let (ta, tb) = (self.i64_tab(a.terms[i].1), self.i64_tab(b.terms[j].1));
                let v = ta
                    .iter()
                    .zip(tb)
                    .map(|(&x, &y)| x.wrapping_add(y.wrapping_mul(sign)))
                    .collect();
                let t = self.table(Col::I64(v));
                terms.push((ka, t));
                i += 1;
                j += 1;
            }
        }
        Sep {
            c: a.c.wrapping_add(b.c.wrapping_mul(sign)),
            terms,
        }
    }

    fn scale(&mut self, a: Sep, m: i64) -> Sep {
        let mut terms = SmallVec::new();
        for &(k, t) in &a.terms {
            let v = self.i64_tab(t).iter().map(|x| x.wrapping_mul(m)).collect();
            terms.push((k, self.table(Col::I64(v))));
        }
        Sep {
            c: a.c.wrapping_mul(m),
            terms,
        }
    }

    /// Operand `o` of a one-axis op over axis `k` (`n` entries): its uniform value or its
    /// column.
    fn arg(&self, locs: &[Loc], o: usize, dtype: DType) -> Option<(Option<usize>, Arg)> {
        if let Some(s) = self.of(o) {
            let &[(k, t)] = &s.terms[..] else {
                return None;
            };
            return Some(match &self.tabs[t] {
                Col::I64(v) => (
                    Some(k),
                    Arg::I64(None, v.iter().map(|x| x.wrapping_add(s.c)).collect()),
                ),
                Col::Bool(v) => (Some(k), Arg::Bool(None, v.clone())),
                _ => return None,
            });
        }
        match (dtype, locs[o]) {
            (DType::Bool, Loc::Uni(Scalar::Bool(b))) => Some((None, Arg::Bool(Some(b), vec![]))),
            (DType::I64, l) => uni_int(l).map(|c| (None, Arg::I64(Some(c), vec![]))),
            _ => None,
        }
    }

    /// Classifies value `v` (needed, computed per element so far): tables it when its
    /// operands allow (see the module documentation). `root(o)` resolves aliases.
    pub(super) fn classify(
        &mut self,
        kernel: &Kernel,
        v: usize,
        locs: &[Loc],
        root: &dyn Fn(u32) -> usize,
        shape: &[usize],
        len: usize,
    ) {
        let val = kernel.values[v];
        let is_ix = |d: DType| matches!(d, DType::I64 | DType::Bool);
        if !is_ix(val.dtype) {
            return;
        }
        let fits = |k: usize| shape[k] <= MAX_AXIS && shape[k] <= len.max(1);
        let dt = |o: u32| kernel.values[o as usize].dtype;
        let sep = match val.inst {
            Inst::Axis(k) => {
                let k = k as usize;
                if k >= shape.len() || !fits(k) {
                    return;
                }
                let t = self.table(Col::I64((0..shape[k] as i64).collect()));
                Some(Sep {
                    c: 0,
                    terms: smallvec::smallvec![(k, t)],
                })
            }
            Inst::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), a, b) if val.dtype == DType::I64 => {
                match (self.sum_of(locs, root(a)), self.sum_of(locs, root(b))) {
                    (Some(x), Some(y)) => {
                        Some(self.combine(x, y, if op == BinaryOp::Add { 1 } else { -1 }))
                    }
                    _ => None,
                }
            }
            Inst::Binary(BinaryOp::Mul, a, b) if val.dtype == DType::I64 => {
                let (ra, rb) = (root(a), root(b));
                match (uni_int(locs[ra]), uni_int(locs[rb])) {
                    (_, Some(m)) => self.sum_of(locs, ra).map(|s| self.scale(s, m)),
                    (Some(m), _) => self.sum_of(locs, rb).map(|s| self.scale(s, m)),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(s) = sep {
            if !s.terms.is_empty() {
                self.push(v, s);
            }
            return;
        }
        // one axis: evaluate the op over it
        let ops: SmallVec<[u32; 3]> = match val.inst {
            Inst::Binary(..) | Inst::Unary(..) | Inst::Where(..) => val.inst.operands().collect(),
            _ => return,
        };
        if !ops.iter().all(|&o| is_ix(dt(o))) {
            return;
        }
        let mut axis = None;
        let mut args: SmallVec<[Arg; 3]> = SmallVec::new();
        for &o in &ops {
            let Some((k, arg)) = self.arg(locs, root(o), dt(o)) else {
                return;
            };
            match (axis, k) {
                (Some(a), Some(k)) if a != k => return,
                (None, Some(k)) => axis = Some(k),
                _ => {}
            }
            args.push(arg);
        }
        let Some(k) = axis else { return };
        let n = shape[k];
        let mut col = Col::new(val.dtype, n);
        let ok = match (val.inst, &args[..]) {
            (Inst::Binary(op, ..), [a, b]) => match (a.i64(), b.i64(), a.bool(), b.bool()) {
                (Some(x), Some(y), ..) => binary_int::<i64>(op, x, y, col.view(n)).is_ok(),
                (_, _, Some(x), Some(y)) => binary_bool(op, x, y, col.view(n)).is_ok(),
                _ => false,
            },
            (Inst::Unary(op, _), [a]) => match (a.i64(), a.bool()) {
                (Some(x), _) => unary_int::<i64>(op, x, col.view(n)).is_ok(),
                (_, Some(x)) => unary_bool(op, x, col.view(n)).is_ok(),
                _ => false,
            },
            (Inst::Where(..), [c, a, b]) => match (&mut col, c.bool()) {
                (Col::I64(o), Some(c)) => match (a.i64(), b.i64()) {
                    (Some(x), Some(y)) => {
                        select(c, x, y, o);
                        true
                    }
                    _ => false,
                },
                (Col::Bool(o), Some(c)) => match (a.bool(), b.bool()) {
                    (Some(x), Some(y)) => {
                        select(c, x, y, o);
                        true
                    }
                    _ => false,
                },
                _ => false,
            },
            _ => false,
        };
        if ok {
            let t = self.table(col);
            self.push(
                v,
                Sep {
                    c: 0,
                    terms: smallvec::smallvec![(k, t)],
                },
            );
        }
    }

    /// Marks load `v` of input `input` (length `have`) at tabled index `index` as read
    /// through the tables when every index the tables give lies in the input.
    pub(super) fn classify_load(&mut self, v: usize, index: usize, have: usize, shape: &[usize]) {
        let Some(id) = self.of.get(index).copied().flatten() else {
            return;
        };
        let s = &self.seps[id as usize];
        if !matches!(self.tabs[s.terms[0].1], Col::I64(_)) {
            return;
        }
        let (mut lo, mut hi) = (s.c as i128, s.c as i128);
        for &(_, t) in &s.terms {
            let tab = self.i64_tab(t);
            let (Some(&mn), Some(&mx)) = (tab.iter().min(), tab.iter().max()) else {
                return;
            };
            lo += mn as i128;
            hi += mx as i128;
        }
        if lo >= 0 && hi < have as i128 {
            if self.gathers.len() <= v {
                self.gathers.resize(v + 1, None);
            }
            self.gathers[v] = Some(id);
            let s = &self.seps[id as usize];
            if let (Some(t), _) = self.split(s, shape) {
                if self.segs.len() <= t {
                    self.segs.resize(t + 1, Vec::new());
                }
                if self.segs[t].is_empty() {
                    self.segs[t] = segments(self.i64_tab(t));
                }
            }
        }
    }

    /// Calls `f(j, run, coords)` for the runs of elements `i0 .. i0 + n` (C order over
    /// `shape`, `inner[k]` the product of the axes after `k`) along the last axis longer
    /// than 1, `j` counted from `i0`, `coords` the multi-index of the run's first element.
    fn runs(
        shape: &[usize],
        inner: &[usize],
        i0: usize,
        n: usize,
        mut f: impl FnMut(usize, usize, &[usize]),
    ) {
        let rank = shape.len();
        let last = runs_axis(shape);
        let mut a: SmallVec<[usize; 8]> = (0..rank)
            .map(|k| (i0 / inner[k]) % shape[k].max(1))
            .collect();
        let mut j = 0;
        while j < n {
            let run = if rank == 0 {
                n
            } else {
                (shape[last] - a[last]).min(n - j)
            };
            f(j, run, &a);
            j += run;
            if rank == 0 {
                break;
            }
            a[last] = 0;
            for k in (0..last).rev() {
                a[k] += 1;
                if a[k] < shape[k] {
                    break;
                }
                a[k] = 0;
            }
        }
    }

    /// The table of `s` along the runs' axis (the last one longer than 1), if `s` has a
    /// term there, and that axis.
    fn split(&self, s: &Sep, shape: &[usize]) -> (Option<usize>, usize) {
        let last = runs_axis(shape);
        let t = s.terms.iter().find(|&&(k, _)| k == last).map(|&(_, t)| t);
        (t, last)
    }

    /// `s` without its term along axis `last`, at multi-index `a` (constant along a run).
    fn row_base(&self, s: &Sep, last: usize, a: &[usize]) -> i64 {
        s.terms
            .iter()
            .filter(|&&(k, _)| k != last)
            .fold(s.c, |b, &(k, t)| b.wrapping_add(self.i64_tab(t)[a[k]]))
    }

    /// Fills `out` (`I64` or `Bool`, the value's dtype) with tabled value `s` over elements
    /// `i0 ..`.
    pub(super) fn fill(
        &self,
        s: &Sep,
        shape: &[usize],
        inner: &[usize],
        i0: usize,
        out: super::SliceMut<'_>,
    ) {
        let (lt, last) = self.split(s, shape);
        match out {
            super::SliceMut::I64(o) => {
                let n = o.len();
                let lt = lt.map(|t| self.i64_tab(t));
                Self::runs(shape, inner, i0, n, |j, run, a| {
                    let base = self.row_base(s, last, a);
                    let dst = &mut o[j..j + run];
                    match lt {
                        Some(tab) => {
                            for (d, &x) in dst.iter_mut().zip(&tab[a[last]..a[last] + run]) {
                                *d = base.wrapping_add(x);
                            }
                        }
                        None => dst.fill(base),
                    }
                });
            }
            super::SliceMut::Bool(o) => {
                let n = o.len();
                let (k, t) = s.terms[0];
                let Col::Bool(tab) = &self.tabs[t] else {
                    return;
                };
                Self::runs(shape, inner, i0, n, |j, run, a| {
                    let dst = &mut o[j..j + run];
                    if k == last {
                        dst.copy_from_slice(&tab[a[last]..a[last] + run]);
                    } else {
                        dst.fill(tab[a[k]]);
                    }
                });
            }
            _ => {}
        }
    }

    /// Load through tabled index `s` (in bounds, see [`Tables::classify_load`]) of `inp`
    /// into `out` over elements `i0 ..`.
    pub(super) fn gather<T: Copy>(
        &self,
        s: &Sep,
        shape: &[usize],
        inner: &[usize],
        i0: usize,
        inp: &[T],
        out: &mut [T],
    ) {
        let (lt, last) = self.split(s, shape);
        let segs = lt
            .and_then(|t| self.segs.get(t))
            .map_or(&[][..], |v| &v[..]);
        let lt = lt.map(|t| self.i64_tab(t));
        Self::runs(shape, inner, i0, out.len(), |j, run, a| {
            let base = self.row_base(s, last, a);
            let dst = &mut out[j..j + run];
            let Some(tab) = lt else {
                dst.fill(inp[base as usize]);
                return;
            };
            // every index is in bounds: checked over every table entry when classified
            let at = |x: i64| base.wrapping_add(x) as usize;
            let (a0, a1) = (a[last], a[last] + run);
            let first = segs.partition_point(|g| g.end <= a0);
            for g in segs[first..].iter().take_while(|g| g.start < a1) {
                let (lo, hi) = (g.start.max(a0), g.end.min(a1));
                let d = &mut dst[lo - a0..hi - a0];
                match g.dir {
                    1 => d.copy_from_slice(&inp[at(tab[lo])..at(tab[lo]) + (hi - lo)]),
                    -1 => {
                        let src = &inp[at(tab[hi - 1])..at(tab[hi - 1]) + (hi - lo)];
                        for (x, &y) in d.iter_mut().zip(src.iter().rev()) {
                            *x = y;
                        }
                    }
                    _ => {
                        for (x, &t) in d.iter_mut().zip(&tab[lo..hi]) {
                            *x = inp[at(t)];
                        }
                    }
                }
            }
            if segs.is_empty() {
                for (d, &x) in dst.iter_mut().zip(&tab[a0..a1]) {
                    *d = inp[at(x)];
                }
            }
        });
    }
}
