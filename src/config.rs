//! Settings read from the environment (documented in docs/env_vars.md) and runtime switches.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

static FUSION_OFF: AtomicBool = AtomicBool::new(false);
static FUSION_INIT: OnceLock<()> = OnceLock::new();
static DEBUG: AtomicU8 = AtomicU8::new(u8::MAX);
/// 0 unread, 1 on, 2 off.
static REAL_FFT: AtomicU8 = AtomicU8::new(0);

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

thread_local! {
    /// The innermost [`with_fusion`] setting of this thread, if any.
    static FUSION_SCOPE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with fusion on or off for the evaluations this thread plans inside it (nested
/// calls: the innermost wins), whatever [`set_fusion`] says and without touching other
/// threads, so two benchmarks on two threads do not interfere. The previous setting comes
/// back when `f` returns or panics.
pub fn with_fusion<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FUSION_SCOPE.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(FUSION_SCOPE.with(|s| s.replace(Some(on))));
    f()
}

/// Whether fusion is on for this thread: its innermost [`with_fusion`], else the
/// process-wide [`set_fusion`] setting.
pub fn fusion_enabled() -> bool {
    if let Some(on) = FUSION_SCOPE.with(|s| s.get()) {
        return on;
    }
    init_fusion();
    !FUSION_OFF.load(Relaxed)
}

/// Turns the real-FFT rewrites on or off on every device, in place of the default (see
/// [`set_real_fft_mode`]).
pub fn set_real_fft(on: bool) {
    set_real_fft_mode(Some(on));
}

/// Sets the real-FFT rewrites on (`Some(true)`) or off (`Some(false)`) on every device, or
/// back to the default (`None`): on for arrays on the CPU, and on CUDA devices for
/// transforms of at least [`CUDA_REAL_FFT_MIN_ELEMENTS`] elements.
///
/// The rewrites plan `fft*` of real data as a real-to-complex transform plus a
/// Hermitian-extension view, and `real(ifft*(y))` as a complex-to-real transform of `y`'s
/// Hermitian part (exact identities: results agree with the complex plans within FFT
/// rounding, at half the transform work). On the CPU the 256^2 sim step runs 1.4-1.7
/// times faster with them on one thread, about 1.3 times on two; on the H200 sim100
/// 1024^2 as a traced function takes 3011 us with them against 3908 us with C2C
/// (benches/NOTES.md). `LAZYFUSE_REAL_FFT=1` (or `0`) sets them on (off) at start.
pub fn set_real_fft_mode(mode: Option<bool>) {
    REAL_FFT.store(
        match mode {
            Some(true) => 1,
            Some(false) => 2,
            None => 3,
        },
        Relaxed,
    );
}

/// The real-FFT setting: `Some(on)` when set for every device, `None` for the default.
pub fn real_fft_mode() -> Option<bool> {
    let m = match REAL_FFT.load(Relaxed) {
        0 => {
            let m = match std::env::var("LAZYFUSE_REAL_FFT").as_deref().map(str::trim) {
                Ok("1") => 1,
                Ok("0") => 2,
                _ => 3,
            };
            // a concurrent `set_real_fft_mode` wins over the environment
            let _ = REAL_FFT.compare_exchange(0, m, Relaxed, Relaxed);
            REAL_FFT.load(Relaxed)
        }
        m => m,
    };
    match m {
        1 => Some(true),
        2 => Some(false),
        _ => None,
    }
}

/// Smallest transform (elements of the array transformed) that the real-FFT rewrites
/// apply to by default on CUDA devices. On the H200 the sim step with R2C/C2R took 30.1
/// against 39.1 us per step at 1024^2 as a traced function (30.7 against 38.9 as an eval
/// loop). At 512^2 and 256^2 the traced function gains less (17.0 against 18.5, 13.3
/// against 13.5 us) and the eval loop loses (29.0 against 18.4, 28.4 against 16.1 us: the
/// rewritten step's larger graph costs host time there), so smaller transforms stay
/// complex (benches/NOTES.md).
pub const CUDA_REAL_FFT_MIN_ELEMENTS: usize = 1 << 19;

/// Whether the real-FFT rewrites are on for arrays on `dev`: the setting when one is made
/// ([`set_real_fft_mode`], `LAZYFUSE_REAL_FFT`), else on for the CPU and, on CUDA devices,
/// for transforms of at least [`CUDA_REAL_FFT_MIN_ELEMENTS`] elements
/// ([`real_fft_enabled_for`]; this answers for the largest).
pub fn real_fft_enabled_on(dev: &crate::Device) -> bool {
    real_fft_enabled_for(dev, usize::MAX)
}

/// Whether the real-FFT rewrites apply to a transform of an array of `elements` elements
/// on `dev` (see [`real_fft_enabled_on`]).
pub fn real_fft_enabled_for(dev: &crate::Device, elements: usize) -> bool {
    real_fft_mode().unwrap_or(!dev.is_cuda() || elements >= CUDA_REAL_FFT_MIN_ELEMENTS)
}

/// Smallest 2-D complex transform (elements of the array transformed) whose zero padding
/// cuFFT skips by default: when the input is zero outside some columns (a padding, shifted
/// or not), the strided pass runs over those columns only, then the rows. On the H200 the
/// 4096^2 transform of psf 2048's input took 146 against 212 us with one 2-D plan; at
/// 1024^2 it took 18.3 against 13.9 us (more launches), so smaller ones use one plan
/// (benches/NOTES.md, `benches/prune_probe.cu`).
pub const CUDA_PRUNED_FFT_MIN_ELEMENTS: usize = 1 << 22;

/// `PRUNED_FFT_MIN` before the environment was read.
const UNREAD: usize = usize::MAX - 1;
static PRUNED_FFT_MIN: AtomicUsize = AtomicUsize::new(UNREAD);

/// `v`, with the sentinel (a transform of `usize::MAX - 1` elements: none) as off.
fn not_unread(v: usize) -> usize {
    if v == UNREAD {
        usize::MAX
    } else {
        v
    }
}

/// Sets the smallest transform that runs pruned on CUDA devices (see
/// [`CUDA_PRUNED_FFT_MIN_ELEMENTS`], the default; `usize::MAX` turns pruning off, `0`
/// prunes every eligible transform) and returns the previous value. It applies to the
/// transforms queued afterwards: a recorded CUDA graph keeps what it recorded. The results
/// agree with the unpruned plan within FFT rounding. `LAZYFUSE_PRUNED_FFT_MIN=N` (or
/// `off`) sets it at start.
pub fn set_pruned_fft_min_elements(elements: usize) -> usize {
    let before = pruned_fft_min_elements();
    PRUNED_FFT_MIN.store(not_unread(elements), Relaxed);
    before
}

/// The smallest transform that runs pruned on CUDA devices
/// ([`set_pruned_fft_min_elements`]).
pub fn pruned_fft_min_elements() -> usize {
    let v = PRUNED_FFT_MIN.load(Relaxed);
    if v != UNREAD {
        return v;
    }
    let env = std::env::var("LAZYFUSE_PRUNED_FFT_MIN").ok();
    let v = match env.as_deref().map(str::trim) {
        Some("off") => usize::MAX,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!(
                "lazyfuse: LAZYFUSE_PRUNED_FFT_MIN={s:?} is neither a number nor `off`; \
                 using {CUDA_PRUNED_FFT_MIN_ELEMENTS}"
            );
            CUDA_PRUNED_FFT_MIN_ELEMENTS
        }),
        None => CUDA_PRUNED_FFT_MIN_ELEMENTS,
    };
    // a concurrent `set_pruned_fft_min_elements` wins over the environment
    let _ = PRUNED_FFT_MIN.compare_exchange(UNREAD, not_unread(v), Relaxed, Relaxed);
    PRUNED_FFT_MIN.load(Relaxed)
}

/// Whether the real-FFT rewrites are on for arrays on the default device
/// ([`crate::default_device`]).
///
/// # Panics
/// As [`crate::default_device`] does: when the default device comes from a
/// `LAZYFUSE_DEVICE` that names no usable device.
#[track_caller]
pub fn real_fft_enabled() -> bool {
    real_fft_enabled_on(&crate::default_device())
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
