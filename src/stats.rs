//! Global counters of what the engine did: kernels launched and compiled, cache hits,
//! bytes moved, evaluations. Tests assert fusion structure with them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        struct Counters { $($name: AtomicU64,)* }
        static COUNTERS: Counters = Counters { $($name: AtomicU64::new(0),)* };

        /// A snapshot of the counters (since start or the last [`reset_stats`]).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Stats {
            $(#[doc = $doc] pub $name: u64,)*
        }

        /// Reads every counter.
        pub fn stats() -> Stats {
            Stats { $($name: COUNTERS.$name.load(Relaxed),)* }
        }

        /// Sets every counter to zero.
        pub fn reset_stats() {
            $(COUNTERS.$name.store(0, Relaxed);)*
        }

        #[allow(dead_code)]
        pub(crate) mod bump {
            use super::*;
            $(#[doc = $doc] pub fn $name(n: u64) { COUNTERS.$name.fetch_add(n, Relaxed); })*
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
}

impl Stats {
    /// Time spent compiling kernels.
    pub fn compile_time(&self) -> Duration {
        Duration::from_nanos(self.compile_time_ns)
    }
}
