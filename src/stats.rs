//! Global counters of what the engine did: kernels launched and compiled, cache hits,
//! bytes moved, evaluations. Tests assert fusion structure with them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// Counters are striped: each thread bumps the stripe it was given at its first bump (one
/// cache line pair each), and a read sums the stripes, so threads evaluating at once never
/// write one shared cache line.
const STRIPES: usize = 32;

/// This thread's stripe.
fn stripe() -> usize {
    thread_local! {
        static MINE: usize = GLOBAL.next.fetch_add(1, Relaxed) % STRIPES;
    }
    MINE.try_with(|m| *m).unwrap_or(0)
}

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        #[repr(align(128))]
        struct Counters { $($name: AtomicU64,)* }

        /// What `lf::stats` and `lf::memory_stats` count, for the process (one total across
        /// devices and threads; a sum's peak is not the sum of peaks), and the profiling
        /// gate.
        struct Global {
            /// The next counter stripe to give a thread.
            next: AtomicUsize,
            counters: [Counters; STRIPES],
            /// Bytes of live CUDA buffers (all devices).
            device: Gauge,
            /// Bytes of live host buffers of arrays on the CPU device.
            host: Gauge,
            /// Number of `lf::profile` calls running (in any thread).
            profiling: AtomicUsize,
        }

        static GLOBAL: Global = Global {
            next: AtomicUsize::new(0),
            counters: [const { Counters { $($name: AtomicU64::new(0),)* } }; STRIPES],
            device: Gauge::new(),
            host: Gauge::new(),
            profiling: AtomicUsize::new(0),
        };

        /// A snapshot of the counters (see [`stats`]).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Stats {
            $(#[doc = $doc] pub $name: u64,)*
        }

        /// The counters since the start of the process or the last [`reset_stats`].
        pub fn stats() -> Stats {
            let mut s = Stats::default();
            for c in &GLOBAL.counters {
                $(s.$name += c.$name.load(Relaxed);)*
            }
            s
        }

        /// Sets every counter to zero and every memory peak to its current level.
        pub fn reset_stats() {
            for c in &GLOBAL.counters {
                $(c.$name.store(0, Relaxed);)*
            }
            GLOBAL.device.reset_peak();
            GLOBAL.host.reset_peak();
        }

        #[allow(dead_code)]
        pub(crate) mod bump {
            use super::*;
            $(#[doc = $doc] pub fn $name(n: u64) { GLOBAL.counters[stripe()].$name.fetch_add(n, Relaxed); })*
        }
    };
}

counters! {
    kernels_launched: "Fused kernels run (CUDA launches or CPU interpreter runs).",
    kernels_compiled: "Kernels compiled by NVRTC in this process.",
    kernel_cache_hits: "Kernel lookups served by the in-memory cache.",
    disk_cache_hits: "Kernel lookups served by the on-disk cache.",
    library_calls: "cuFFT/cuBLAS (or CPU FFT/matmul) calls.",
    bytes_h2d: "Bytes copied host to device.",
    bytes_d2h: "Bytes copied device to host.",
    evals: "Evaluations (`eval`, `lf::eval`, `to_host`, ...) that planned work.",
    plans: "Plans made (plan-cache misses).",
    plan_cache_hits: "Evaluations whose plan came from the plan cache.",
    compile_time_ns: "Nanoseconds spent compiling kernels.",
    buffers_allocated: "Device buffers allocated.",
    buffers_reused: "Kernel outputs written in place into the buffer of an input whose last \
        handle the evaluation consumed (see `Array::eval`).",
    function_traces: "Traces of a `Function`'s closure: one at `Function::trace`, one per new \
        input signature a call brings.",
    graph_captures: "CUDA graphs captured (a repeated plan recorded once).",
    graph_launches: "CUDA graph replays (one launch runs a whole plan).",
    graph_fallbacks: "Plans that could have run as a CUDA graph but ran as plain launches \
        (capture or update failed, or the plan reads or writes its boundary buffers).",
}

/// Gauges: levels rather than counts. [`reset_stats`] keeps the current levels and restarts
/// the high-water marks from them.
mod gauges {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    pub(crate) struct Gauge {
        live: AtomicU64,
        peak: AtomicU64,
    }

    impl Gauge {
        pub(crate) const fn new() -> Gauge {
            Gauge {
                live: AtomicU64::new(0),
                peak: AtomicU64::new(0),
            }
        }
        pub(crate) fn add(&self, n: u64) {
            let now = self.live.fetch_add(n, Relaxed) + n;
            self.peak.fetch_max(now, Relaxed);
        }
        pub(crate) fn sub(&self, n: u64) {
            // saturating: a level never wraps below zero
            let _ = self
                .live
                .fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)));
        }
        pub(crate) fn live(&self) -> u64 {
            self.live.load(Relaxed)
        }
        pub(crate) fn peak(&self) -> u64 {
            self.peak.load(Relaxed)
        }
        pub(crate) fn reset_peak(&self) {
            self.peak.store(self.live.load(Relaxed), Relaxed);
        }
    }
}
use gauges::Gauge;

/// Bytes of live CUDA buffers (all devices).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn device_bytes() -> &'static Gauge {
    &GLOBAL.device
}

/// Bytes of live host buffers of arrays on the CPU device.
pub(crate) fn host_bytes() -> &'static Gauge {
    &GLOBAL.host
}

/// Number of [`crate::profile`] calls running (in any thread).
pub(crate) fn profiling() -> &'static AtomicUsize {
    &GLOBAL.profiling
}

/// Memory held by array buffers, in bytes: current levels and high-water marks since start
/// or the last [`reset_stats`] (which restarts each mark from the current level).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of live CUDA buffers (array data, FFT work areas while they exist).
    pub device_bytes_live: u64,
    /// Highest `device_bytes_live` seen.
    pub device_bytes_peak: u64,
    /// Bytes of live host buffers of arrays on the CPU device.
    pub host_bytes_live: u64,
    /// Highest `host_bytes_live` seen.
    pub host_bytes_peak: u64,
}

/// The current memory levels (see [`MemoryStats`]).
pub fn memory_stats() -> MemoryStats {
    MemoryStats {
        device_bytes_live: GLOBAL.device.live(),
        device_bytes_peak: GLOBAL.device.peak(),
        host_bytes_live: GLOBAL.host.live(),
        host_bytes_peak: GLOBAL.host.peak(),
    }
}

impl Stats {
    /// Time spent compiling kernels.
    pub fn compile_time(&self) -> Duration {
        Duration::from_nanos(self.compile_time_ns)
    }
}
