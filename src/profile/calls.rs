//! Counting and timing of the driver and library calls a thread makes (CUDA driver, cuFFT,
//! cuBLAS), for [`crate::debug::driver_calls`]: what a cached eval costs in calls, and how
//! much of its time the driver took. Off (one thread-local read per call) unless a
//! `driver_calls` closure runs on the thread.
// without the `cuda` feature nothing makes driver calls
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use crate::thread_field::Field;
use std::cell::RefCell;
use std::fmt;
use std::time::{Duration, Instant};

/// Per call name: how many, and the host time inside them.
pub(super) type Tally = Vec<(&'static str, u64, Duration)>;

/// The tally of the innermost `driver_calls` closure running on this thread; `None` when
/// none runs (counting is off). A field of the thread's profiling state.
const TALLY: Field<super::ThreadProfile, RefCell<Option<Tally>>> =
    Field::new(&super::PROFILE, |t| &t.calls);

/// Whether this thread counts its calls now.
#[inline]
pub(crate) fn on() -> bool {
    // `try_with`: calls made by other thread-local destructors at thread end count nothing
    TALLY.try_with(|t| t.borrow().is_some()).unwrap_or(false)
}

/// Adds `count` calls of `name` taking `time` to `tally`.
fn merge(tally: &mut Tally, name: &'static str, count: u64, time: Duration) {
    match tally.iter_mut().find(|(n, ..)| *n == name) {
        Some(e) => {
            e.1 += count;
            e.2 += time;
        }
        None => tally.push((name, count, time)),
    }
}

fn add(name: &'static str, count: u64, time: Duration) {
    let _ = TALLY.try_with(|t| {
        if let Some(t) = t.borrow_mut().as_mut() {
            merge(t, name, count, time);
        }
    });
}

/// Counts one call of `name` (made without a timer: its time is not known).
#[inline]
pub(crate) fn note(name: &'static str) {
    if on() {
        add(name, 1, Duration::ZERO);
    }
}

/// Runs the call `f`, counting it as `name` and timing it while counting is on.
#[inline]
pub(crate) fn timed<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    measure(name, 1, f)
}

/// Runs the call `f`, timing it as `name` while counting is on, without counting it (for
/// calls counted where their result is mapped, as `driver_err` does).
#[inline]
pub(crate) fn clock<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    measure(name, 0, f)
}

/// Runs `f`, adding `count` calls and its time to `name` while counting is on.
#[inline]
fn measure<T>(name: &'static str, count: u64, f: impl FnOnce() -> T) -> T {
    if !on() {
        return f();
    }
    let t = Instant::now();
    let r = f();
    add(name, count, t.elapsed());
    r
}

/// The driver and library calls one thread made while a closure ran (see
/// [`crate::debug::driver_calls`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DriverCalls {
    /// Per call, in order of first use: its name (the CUDA driver, cuFFT or cuBLAS entry
    /// point), how many times it was called, and the host time spent inside those calls
    /// (zero for calls made inside other libraries' code, which are counted but not timed).
    pub calls: Vec<(&'static str, u64, Duration)>,
}

impl DriverCalls {
    /// All calls together.
    pub fn total(&self) -> u64 {
        self.calls.iter().map(|c| c.1).sum()
    }
    /// How many times `name` was called.
    pub fn count(&self, name: &str) -> u64 {
        self.calls.iter().filter(|c| c.0 == name).map(|c| c.1).sum()
    }
    /// The host time spent inside the timed calls.
    pub fn time(&self) -> Duration {
        self.calls.iter().map(|c| c.2).sum()
    }
}

impl fmt::Display for DriverCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "driver calls: {} in {:.1} us",
            self.total(),
            self.time().as_secs_f64() * 1e6
        )?;
        for (name, n, t) in &self.calls {
            writeln!(f, "  {name:<32} {n:>8} {:>12.1} us", t.as_secs_f64() * 1e6)?;
        }
        Ok(())
    }
}

/// Runs `f` counting the calls this thread makes meanwhile.
pub(crate) fn count<R>(f: impl FnOnce() -> R) -> (R, DriverCalls) {
    /// Puts the enclosing closure's tally back (also when `f` panics); an enclosing closure
    /// counts the inner one's calls too.
    struct Restore(Option<Tally>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let mut outer = self.0.take();
            let inner = TALLY.with(|t| t.borrow_mut().take()).unwrap_or_default();
            if let Some(o) = outer.as_mut() {
                for (name, n, time) in inner {
                    merge(o, name, n, time);
                }
            }
            TALLY.with(|t| *t.borrow_mut() = outer);
        }
    }
    let outer = TALLY.with(|t| t.borrow_mut().replace(Tally::new()));
    let guard = Restore(outer);
    let r = f();
    let calls = TALLY.with(|t| t.borrow().clone()).unwrap_or_default();
    drop(guard);
    (r, DriverCalls { calls })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_inside_the_closure_and_nests() {
        note("outside");
        let ((), outer) = count(|| {
            note("a");
            let (v, inner) = count(|| timed("b", || 7));
            assert_eq!(v, 7);
            assert_eq!(inner.total(), 1);
            assert_eq!(inner.count("b"), 1);
            note("a");
        });
        assert_eq!(outer.count("a"), 2);
        assert_eq!(outer.count("b"), 1);
        assert_eq!(outer.count("outside"), 0);
        assert_eq!(outer.total(), 3);
        assert!(!on());
    }
}
