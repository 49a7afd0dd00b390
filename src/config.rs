//! Settings read from the environment (documented in docs/env_vars.md) and runtime switches.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;

static FUSION_OFF: AtomicBool = AtomicBool::new(false);
static FUSION_INIT: OnceLock<()> = OnceLock::new();
static DEBUG: AtomicU8 = AtomicU8::new(u8::MAX);

fn init_fusion() {
    FUSION_INIT.get_or_init(|| {
        if std::env::var("LAZYFUSE_NOFUSE").is_ok_and(|v| v == "1") {
            FUSION_OFF.store(true, Relaxed);
        }
    });
}

/// Turns fusion on (default) or off. With fusion off every operation is its own kernel:
/// the honest baseline for fused-vs-unfused comparisons. `LAZYFUSE_NOFUSE=1` sets it off
/// at start.
pub fn set_fusion(on: bool) {
    init_fusion();
    FUSION_OFF.store(!on, Relaxed);
}

/// Whether fusion is on.
pub fn fusion_enabled() -> bool {
    init_fusion();
    !FUSION_OFF.load(Relaxed)
}

/// The `LAZYFUSE_DEBUG` level (0 when unset).
pub(crate) fn debug_level() -> u8 {
    let l = DEBUG.load(Relaxed);
    if l != u8::MAX {
        return l;
    }
    let l = std::env::var("LAZYFUSE_DEBUG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    DEBUG.store(l, Relaxed);
    l
}

/// Prints to stderr when the debug level is at least `$lvl`.
macro_rules! debug_log {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::config::debug_level() >= $lvl {
            eprintln!("[lazyfuse] {}", format!($($arg)*));
        }
    };
}
pub(crate) use debug_log;
