//! Parallel loops of the CPU backend in which the calling thread works too.
//!
//! A rayon parallel iterator started from outside the pool hands the whole loop to the
//! workers and puts the caller to sleep until they finish: two thread wake-ups per loop.
//! On a virtual machine a wake-up of an idle core costs tens of microseconds (on the 2-core
//! development machine a 256x256 row FFT pass took 47 us on one thread and 94 us on two).
//! [`par_for`] instead wakes helpers and runs the loop on the caller at once: every
//! participant claims the next index from a shared counter, so a helper that starts late
//! finds the work taken and returns, and the caller waits only for indices a helper is
//! still running. A loop is never slower than one thread by more than the helpers'
//! hand-off, and gains when they start in time.
//!
//! A helper that has finished its part of a loop stays for [`LINGER`], spinning, and
//! joins the next loop started meanwhile: the loops of one evaluation (a kernel, the row
//! and column passes of an FFT, the next kernel) follow each other within microseconds,
//! and a helper that went back to sleep would be woken, late, for each. A loop started
//! while helpers linger spawns only as many new ones as are missing.

use crate::{Error, Result};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a helper waits, spinning, for the next loop after finishing its part of one
/// (OpenMP runtimes spin for milliseconds by default; this is the cost of one hand-off on
/// the 2-core development machine).
const LINGER: Duration = Duration::from_micros(100);

/// The loops' shared state (a part of the CPU device's state: helpers are threads of its
/// pool, shared by every loop).
pub(crate) struct Loops {
    /// The most recently started loop, with its number: what a lingering helper joins.
    latest: Mutex<Option<(u64, Arc<Shared>)>>,
    /// The number of the most recently started loop.
    started: AtomicU64,
    /// Helpers lingering now.
    lingering: AtomicUsize,
}

impl Loops {
    /// No loop started yet.
    pub(crate) const fn new() -> Loops {
        Loops {
            latest: Mutex::new(None),
            started: AtomicU64::new(0),
            lingering: AtomicUsize::new(0),
        }
    }
}

/// The loops' state of the process's CPU device.
fn loops() -> &'static Loops {
    &super::CPU.loops
}

/// The loop body as a pointer without its lifetime (see the safety argument of [`par_for`]).
type Body = *const (dyn Fn(usize) -> Result<()> + Sync);

/// What the participants of one loop share.
struct Shared {
    body: Body,
    n: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

// SAFETY: `body` points to a `Sync` closure, which is only called (through `&`) for an index
// claimed below `n`; the rest is atomics and mutexes.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// Claims and runs indices until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            if !self.failed.load(Ordering::Relaxed) {
                // SAFETY: index `i < n` was claimed by this thread, so the caller of
                // `par_for` has not returned (it waits until `done == n`, and `done` counts
                // this index only after the call below); the closure and what it borrows
                // are alive.
                let body = unsafe { &*self.body };
                match catch_unwind(AssertUnwindSafe(|| body(i))) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        self.failed.store(true, Ordering::Relaxed);
                        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert(e);
                    }
                    Err(p) => {
                        self.failed.store(true, Ordering::Relaxed);
                        let mut slot = self.panic.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert(p);
                    }
                }
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Runs `body(i)` for every `i` in `0..n`, on the calling thread and on up to
/// `threads() - 1` helpers of the CPU pool (see the module documentation). The first error
/// is returned (indices not yet started then do not run); a panic in `body` is resumed on
/// the calling thread once every running index has finished.
pub(crate) fn par_for(n: usize, body: &(dyn Fn(usize) -> Result<()> + Sync)) -> Result<()> {
    let helpers = super::threads().saturating_sub(1).min(n.saturating_sub(1));
    if helpers == 0 {
        return (0..n).try_for_each(body);
    }
    // SAFETY: only the lifetime is erased. The pointer is dereferenced for claimed indices
    // below `n` only, and this function returns (or unwinds) only after `done == n`, that
    // is, after every such call has returned.
    let body: Body =
        unsafe { std::mem::transmute::<&(dyn Fn(usize) -> Result<()> + Sync), Body>(body) };
    let shared = Arc::new(Shared {
        body,
        n,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        panic: Mutex::new(None),
    });
    let number = {
        let mut latest = loops().latest.lock().unwrap_or_else(|p| p.into_inner());
        let number = loops().started.fetch_add(1, Ordering::AcqRel) + 1;
        *latest = Some((number, shared.clone()));
        number
    };
    // helpers lingering after an earlier loop join this one by themselves
    let missing = helpers.saturating_sub(loops().lingering.load(Ordering::Acquire));
    for _ in 0..missing {
        let s = shared.clone();
        super::spawn(move || help(s, number));
    }
    shared.work();
    let mut spins = 0u32;
    while shared.done.load(Ordering::Acquire) < n {
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    if let Some(p) = shared
        .panic
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        resume_unwind(p);
    }
    let error = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A helper's life: its part of loop `number`, then the parts of the loops started while it
/// lingers (see the module documentation). Joining a loop that has finished is harmless:
/// every index is claimed, so the helper finds nothing to run and never calls its body.
fn help(first: Arc<Shared>, number: u64) {
    first.work();
    drop(first);
    let mut seen = number;
    let Loops {
        latest,
        started,
        lingering,
    } = loops();
    lingering.fetch_add(1, Ordering::AcqRel);
    let mut since = Instant::now();
    loop {
        if started.load(Ordering::Acquire) != seen {
            let next = latest
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(|(k, s)| (*k, s.clone()));
            if let Some((k, s)) = next.filter(|(k, _)| *k != seen) {
                lingering.fetch_sub(1, Ordering::AcqRel);
                s.work();
                drop(s);
                seen = k;
                lingering.fetch_add(1, Ordering::AcqRel);
                since = Instant::now();
                continue;
            }
        }
        if since.elapsed() > LINGER {
            lingering.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        std::hint::spin_loop();
    }
}

/// A buffer's base pointer shared by the iterations of one [`par_for`], each of which
/// touches its own elements only.
pub(crate) struct Disjoint<E>(pub(crate) *mut E);
// SAFETY: the pointer is only dereferenced by iterations of one parallel loop that access
// pairwise disjoint element sets, while the buffer it points into is borrowed mutably by
// the function running that loop.
unsafe impl<E: Send> Sync for Disjoint<E> {}

/// `f(chunk, k)` for the consecutive chunks of `chunk` elements of `data` (the last may be
/// shorter), `k` the chunk's number, in parallel as [`par_for`].
pub(crate) fn par_chunks_mut<E: Send>(
    data: &mut [E],
    chunk: usize,
    f: &(dyn Fn(&mut [E], usize) -> Result<()> + Sync),
) -> Result<()> {
    let len = data.len();
    if chunk == 0 || len == 0 {
        return Ok(());
    }
    let base = Disjoint(data.as_mut_ptr());
    let base = &base;
    par_for(len.div_ceil(chunk), &|k| {
        let at = k * chunk;
        let n = chunk.min(len - at);
        // SAFETY: chunk `k` is elements `at..at + n` of `data` (inside its length), no two
        // chunks overlap, and `data` is borrowed mutably for the whole loop.
        let part = unsafe { std::slice::from_raw_parts_mut(base.0.add(at), n) };
        f(part, k)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_once_and_errors_come_back() {
        for n in [0usize, 1, 2, 3, 17, 1000] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            par_for(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "n = {n}"
            );
        }
        let e = par_for(100, &|i| {
            if i == 37 {
                Err(Error::internal("par_for test", "index 37"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("index 37"), "{e}");
    }

    #[test]
    fn chunks_cover_the_buffer_once() {
        for (len, chunk) in [(0usize, 4usize), (1, 4), (10, 3), (4096, 512), (783, 100)] {
            let mut v = vec![0u32; len];
            par_chunks_mut(&mut v, chunk, &|c, k| {
                for (j, x) in c.iter_mut().enumerate() {
                    *x += (k * chunk + j) as u32 + 1;
                }
                Ok(())
            })
            .unwrap();
            assert!(
                v.iter().enumerate().all(|(j, &x)| x == j as u32 + 1),
                "{len} {chunk}"
            );
        }
    }

    #[test]
    fn a_panic_reaches_the_caller_after_the_loop() {
        let ran = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            par_for(64, &|i| {
                ran.fetch_add(1, Ordering::Relaxed);
                assert!(i != 5, "index 5");
                Ok(())
            })
        }));
        assert!(r.is_err());
        assert!(ran.load(Ordering::Relaxed) >= 1);
    }
}
