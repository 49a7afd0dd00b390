//! Folded profiles: a report's steps grouped by kind and name (count, total, mean, min, max),
//! as Nsight's summaries do, and the per-thread accumulation behind
//! `LAZYFUSE_PROFILE=summary`, printed when the thread ends (at exit for the main thread)
//! or taken on demand with [`profile_summary`].

use super::{fmt_time, EntryKind, Report, Timing};
use crate::thread_field::Field;
use std::cell::RefCell;
use std::fmt;
use std::time::Duration;

/// One row of a [`Summary`]: every step of one kind and name.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// What the steps measured.
    pub kind: EntryKind,
    /// The kernel's entry name, the library call, or the step's description; plan steps
    /// are named by their plan-cache outcome (`plan (hit)`, `plan (miss)`).
    pub name: String,
    /// How the steps' times were measured.
    pub timing: Timing,
    /// How many steps.
    pub count: usize,
    /// Their time together.
    pub total: Duration,
    /// The shortest one.
    pub min: Duration,
    /// The longest one.
    pub max: Duration,
    /// Bytes read and written, together.
    pub bytes: u64,
    /// Compile or load time, together (kernels).
    pub compile_time: Duration,
}

impl SummaryRow {
    /// The mean time of one step.
    pub fn mean(&self) -> Duration {
        self.total / self.count.max(1) as u32
    }
}

/// A profile folded by step ([`Report::summary`]): one row per kind and name, ordered by
/// total time, longest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// The rows, longest total first.
    pub rows: Vec<SummaryRow>,
    /// Evaluations folded in.
    pub evals: usize,
    /// Host wall time of the folded stretches together.
    pub wall: Duration,
}

impl Summary {
    /// Folds `report`'s entries into this summary.
    pub fn add(&mut self, report: &Report) {
        for e in &report.entries {
            let name = match (e.kind, e.plan_cache_hit) {
                (EntryKind::Plan, Some(true)) => format!("{} (hit)", e.name),
                (EntryKind::Plan, Some(false)) => format!("{} (miss)", e.name),
                _ => e.name.clone(),
            };
            let row = match self
                .rows
                .iter_mut()
                .find(|r| r.kind == e.kind && r.timing == e.timing && r.name == name)
            {
                Some(r) => r,
                None => {
                    self.rows.push(SummaryRow {
                        kind: e.kind,
                        name,
                        timing: e.timing,
                        count: 0,
                        total: Duration::ZERO,
                        min: Duration::MAX,
                        max: Duration::ZERO,
                        bytes: 0,
                        compile_time: Duration::ZERO,
                    });
                    self.rows.last_mut().expect("pushed above")
                }
            };
            row.count += 1;
            row.total += e.time;
            row.min = row.min.min(e.time);
            row.max = row.max.max(e.time);
            row.bytes += e.bytes;
            row.compile_time += e.compile_time;
        }
        self.rows.sort_by_key(|r| std::cmp::Reverse(r.total));
        self.evals += report.evals;
        self.wall += report.wall;
    }
}

impl Report {
    /// This report folded by step: one row per kind and name with the count, total, mean,
    /// minimum and maximum time (a loop of 50 evaluations of one plan gives one row per
    /// kernel instead of 50).
    ///
    /// ```
    /// use lazyfuse as lf;
    /// let x = lf::Array::linspace(0.0, 1.0, 1000, lf::DType::F32);
    /// let ((), report) = lf::profile(|| {
    ///     for k in 0..5 {
    ///         (&x * k as f64).sin().eval().unwrap();
    ///     }
    /// });
    /// let s = report.summary();
    /// assert_eq!(s.rows.iter().find(|r| r.kind == lf::EntryKind::Kernel).unwrap().count, 5);
    /// println!("{s}");
    /// ```
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        s.add(self);
        s
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lazyfuse profile summary: {} eval(s), wall {}",
            self.evals,
            fmt_time(self.wall)
        )?;
        writeln!(
            f,
            "{:<8}  {:<28}  {:>7}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}",
            "step", "name", "count", "total", "mean", "min", "max", "compile", "GB/s"
        )?;
        let mixed = self.rows.iter().any(|r| r.timing == Timing::DeviceEvents);
        for r in &self.rows {
            let star = if mixed && r.timing == Timing::Wall {
                "*"
            } else {
                ""
            };
            let t = r.total.as_secs_f64();
            let gbs = if r.bytes > 0 && t > 0.0 {
                format!("{:.1}", r.bytes as f64 / t / 1e9)
            } else {
                "-".into()
            };
            writeln!(
                f,
                "{:<8}  {:<28}  {:>7}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}",
                r.kind.label(),
                r.name,
                r.count,
                format!("{}{star}", fmt_time(r.total)),
                fmt_time(r.mean()),
                fmt_time(r.min),
                fmt_time(r.max),
                fmt_time(r.compile_time),
                gbs
            )?;
        }
        if mixed {
            writeln!(
                f,
                "(times without * are device time from CUDA events; * = host wall time)"
            )
        } else {
            writeln!(f, "(all times are host wall time)")
        }
    }
}

/// This thread's folded profile under `LAZYFUSE_PROFILE=summary`; printed to stderr when the
/// thread ends unless taken before (a field of the thread's profiling state).
pub(super) struct Accumulated(Option<Summary>);

impl Accumulated {
    /// Nothing folded yet.
    pub(super) const fn new() -> Accumulated {
        Accumulated(None)
    }
}

impl Drop for Accumulated {
    fn drop(&mut self) {
        if let Some(s) = self.0.take().filter(|s| !s.rows.is_empty()) {
            eprint!("{s}");
        }
    }
}

const ACC: Field<super::ThreadProfile, RefCell<Accumulated>> =
    Field::new(&super::PROFILE, |t| &t.summary);

/// Folds a finished call's report into this thread's summary (`LAZYFUSE_PROFILE=summary`).
pub(crate) fn fold(report: &Report) {
    let _ = ACC.try_with(|a| {
        if let Ok(mut a) = a.try_borrow_mut() {
            a.0.get_or_insert_with(Summary::default).add(report);
        }
    });
}

/// Takes the summary this thread has folded so far under `LAZYFUSE_PROFILE=summary`
/// (`None` when nothing was folded, or in the other modes); folding starts over. Without
/// this call the summary is printed to stderr when the thread ends, for the main thread
/// when the program exits.
pub fn profile_summary() -> Option<Summary> {
    ACC.try_with(|a| a.try_borrow_mut().ok().and_then(|mut a| a.0.take()))
        .ok()
        .flatten()
}
