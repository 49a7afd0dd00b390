//! Settings read from the environment (documented in docs/env_vars.md) and runtime switches:
//! the one place that reads the environment, into the one process-wide [`Config`], and the
//! calling thread's scoped settings ([`with_fusion`], `with_default_device`).
//!
//! Each setting is read when first used (a child process started with a variable sees it,
//! and a variable set before that first use counts), then kept; the setters change it
//! afterwards.

use crate::{Device, Result};
use std::cell::{Cell, RefCell};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::{OnceLock, RwLock};

/// Every process-wide setting: read from the environment on first use, changed afterwards
/// only through its setter.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // CUDA settings
pub(crate) struct Config {
    /// Fusion off (`set_fusion`, `LAZYFUSE_NOFUSE`).
    fusion_off: OnceLock<AtomicBool>,
    /// `LAZYFUSE_DEBUG` level, `u8::MAX` before it is read.
    debug: AtomicU8,
    /// Real-FFT rewrites: 0 unread, 1 on, 2 off, 3 default (`set_real_fft_mode`,
    /// `LAZYFUSE_REAL_FFT`).
    real_fft: AtomicU8,
    /// Smallest CUDA transform run pruned ([`UNREAD`] before `LAZYFUSE_PRUNED_FFT_MIN` is
    /// read).
    pruned_fft_min: AtomicUsize,
    /// Smallest CPU transform input computed inside the first pass ([`UNREAD`] before
    /// `LAZYFUSE_CPU_FFT_LINES_MIN` is read).
    cpu_fft_lines_min: AtomicUsize,
    /// `LAZYFUSE_PROFILE`: 0 not read yet, 1 off, 2 on (a table per call), 3 `summary`.
    profile: AtomicU8,
    /// Which implementation runs CUDA transforms (`set_fft_backend`, `LAZYFUSE_FFT`): 0
    /// unread, else `FftBackend as u8 + 1`.
    fft_backend: AtomicU8,
    /// `LAZYFUSE_GRID_WAVES`.
    grid_waves: OnceLock<u64>,
    /// `LAZYFUSE_DUMP_DIR`.
    dump_dir: OnceLock<Option<PathBuf>>,
    /// `LAZYFUSE_GRAPHS`: 0 off, 1 on, 2 `all`, 3 `chain`.
    graphs: OnceLock<u8>,
    /// `LAZYFUSE_NVRTC_CHECK`.
    nvrtc_check: OnceLock<bool>,
    /// `LAZYFUSE_CPU_THREADS`.
    cpu_threads: OnceLock<Option<usize>>,
    /// `LAZYFUSE_READBACK`: 0 the default rule, 1 `staged`, 2 `registered`.
    readback: OnceLock<u8>,
    /// Print options (`set_printoptions`); `None`: NumPy's defaults.
    pub(crate) print: RwLock<Option<PrintOptions>>,
    /// The device `set_default_device` set.
    pub(crate) default_device: RwLock<Option<Device>>,
    /// `Device::try_default` (from `LAZYFUSE_DEVICE`) as resolved on first use, for the
    /// rest of the process (opening a device, or failing to, happens once; the error is
    /// kept to be reported again).
    pub(crate) env_device: OnceLock<Result<Device>>,
}

/// The process's settings.
pub(crate) static CONFIG: Config = Config {
    fusion_off: OnceLock::new(),
    debug: AtomicU8::new(u8::MAX),
    real_fft: AtomicU8::new(0),
    pruned_fft_min: AtomicUsize::new(UNREAD),
    cpu_fft_lines_min: AtomicUsize::new(UNREAD),
    profile: AtomicU8::new(0),
    fft_backend: AtomicU8::new(0),
    grid_waves: OnceLock::new(),
    dump_dir: OnceLock::new(),
    graphs: OnceLock::new(),
    nvrtc_check: OnceLock::new(),
    cpu_threads: OnceLock::new(),
    readback: OnceLock::new(),
    print: RwLock::new(None),
    default_device: RwLock::new(None),
    env_device: OnceLock::new(),
};

/// The calling thread's scoped settings.
pub(crate) struct Scopes {
    /// The innermost [`with_fusion`] setting of this thread, if any.
    fusion: Cell<Option<bool>>,
    /// Stack of `with_default_device` devices, innermost last.
    pub(crate) devices: RefCell<Vec<Device>>,
}

thread_local! {
    /// This thread's scoped settings.
    pub(crate) static SCOPES: Scopes = const {
        Scopes {
            fusion: Cell::new(None),
            devices: RefCell::new(Vec::new()),
        }
    };
}

/// The variable `name` when it is set to valid Unicode.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Config {
    fn fusion_off(&self) -> &AtomicBool {
        self.fusion_off
            .get_or_init(|| AtomicBool::new(var("LAZYFUSE_NOFUSE").is_some_and(|v| v == "1")))
    }

    /// `LAZYFUSE_PROFILE`: 1 off, 2 on (a table per call), 3 `summary`.
    pub(crate) fn profile_mode(&self) -> u8 {
        match self.profile.load(Relaxed) {
            0 => {
                let v = var("LAZYFUSE_PROFILE").unwrap_or_default();
                let mode = match v.trim() {
                    "" | "0" => 1,
                    s if s.eq_ignore_ascii_case("summary") => 3,
                    _ => 2,
                };
                self.profile.store(mode, Relaxed);
                mode
            }
            v => v,
        }
    }

    /// Full waves of resident blocks a large grid-stride CUDA launch gets
    /// (`LAZYFUSE_GRID_WAVES`, 1 to 64; default 4).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn grid_waves(&self) -> u64 {
        *self.grid_waves.get_or_init(|| {
            var("LAZYFUSE_GRID_WAVES")
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|w| (1..=64).contains(w))
                .unwrap_or(4)
        })
    }

    /// `LAZYFUSE_DUMP_DIR`: where generated CUDA kernels are written, if anywhere.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn dump_dir(&self) -> Option<&PathBuf> {
        self.dump_dir
            .get_or_init(|| {
                std::env::var_os("LAZYFUSE_DUMP_DIR")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .as_ref()
    }

    /// `LAZYFUSE_GRAPHS`: CUDA graphs on (the default) unless it is `0`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn graphs(&self) -> bool {
        self.graphs_mode() != 0
    }

    /// `LAZYFUSE_GRAPHS=all`: plain evaluations of single-kernel plans replay graphs too.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn graphs_all(&self) -> bool {
        self.graphs_mode() == 2
    }

    /// `LAZYFUSE_GRAPHS=chain`: recorded graphs run their steps one after another, as the
    /// plan lists them, instead of following only the data (independent steps concurrent).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn graphs_chain(&self) -> bool {
        self.graphs_mode() == 3
    }

    fn graphs_mode(&self) -> u8 {
        *self.graphs.get_or_init(|| match var("LAZYFUSE_GRAPHS") {
            Some(v) if v.trim() == "0" => 0,
            Some(v) if v.trim().eq_ignore_ascii_case("all") => 2,
            Some(v) if v.trim().eq_ignore_ascii_case("chain") => 3,
            _ => 1,
        })
    }

    /// `LAZYFUSE_NVRTC_CHECK=1`: the CPU backend compile-checks its kernels with NVRTC too.
    pub(crate) fn nvrtc_check(&self) -> bool {
        *self
            .nvrtc_check
            .get_or_init(|| var("LAZYFUSE_NVRTC_CHECK").is_some_and(|v| v == "1"))
    }

    /// `LAZYFUSE_CPU_THREADS`: the size of the CPU backend's own pool, if it has one.
    pub(crate) fn cpu_threads(&self) -> Option<usize> {
        *self
            .cpu_threads
            .get_or_init(|| var("LAZYFUSE_CPU_THREADS").and_then(|v| v.trim().parse().ok()))
    }
}

/// `LAZYFUSE_DEVICE` as it is now: empty when unset, the raw value when it is not Unicode.
pub(crate) fn device_var() -> std::result::Result<String, OsString> {
    match std::env::var("LAZYFUSE_DEVICE") {
        Ok(v) => Ok(v),
        Err(std::env::VarError::NotPresent) => Ok(String::new()),
        Err(std::env::VarError::NotUnicode(v)) => Err(v),
    }
}

/// Where the kernel cache asks to live, read now: `Some(dirs)` with the candidates in
/// order (`LAZYFUSE_CACHE_DIR`, else `$XDG_CACHE_HOME/lazyfuse`, then
/// `$HOME/.cache/lazyfuse`), `None` when `LAZYFUSE_CACHE_DIR` is empty (cache off).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn kernel_cache_dirs() -> Option<Vec<PathBuf>> {
    match std::env::var_os("LAZYFUSE_CACHE_DIR") {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(vec![PathBuf::from(v)]),
        None => {
            let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
            let xdg = nonempty("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("lazyfuse"));
            let home = nonempty("HOME").map(|h| PathBuf::from(h).join(".cache").join("lazyfuse"));
            Some(xdg.into_iter().chain(home).collect())
        }
    }
}

/// The NVTX tool's library named by `name` (`NVTX_INJECTION64_PATH`), read now.
pub(crate) fn nvtx_injection_path(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|p| !p.is_empty())
}

/// The NCCL library to load (`LAZYFUSE_NCCL_LIBRARY`: a path or a file name), read now;
/// How fresh CUDA readbacks of 16 MiB and more go (`LAZYFUSE_READBACK`, read once): 0 the
/// default rule (`runtime::cuda::memory`), 1 `staged`, 2 `registered`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn readback_mode() -> u8 {
    *CONFIG.readback.get_or_init(
        || match var("LAZYFUSE_READBACK").as_deref().map(str::trim) {
            Some("staged") => 1,
            Some("registered") => 2,
            _ => 0,
        },
    )
}

/// `None` when unset or empty (the usual names are searched).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn nccl_library() -> Option<String> {
    var("LAZYFUSE_NCCL_LIBRARY").filter(|v| !v.trim().is_empty())
}

/// A launcher's variable (`RANK`, `SLURM_PROCID`, `MASTER_ADDR`, ..., and
/// `LAZYFUSE_DIST_TIMEOUT`), read now: `Ok(None)` when unset, the raw value when it is not
/// Unicode. Read on demand by `lf::distributed::init` rather than kept in [`Config`]: a
/// launcher describes one start of the process, and `Launch::from_env` is the one reader.
pub(crate) fn launcher_var(name: &str) -> std::result::Result<Option<String>, OsString> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(v),
    }
}

/// Turns fusion on (default) or off. With fusion off every operation is its own kernel:
/// the honest baseline for fused-vs-unfused comparisons. `LAZYFUSE_NOFUSE=1` sets it off
/// at start.
pub fn set_fusion(on: bool) {
    CONFIG.fusion_off().store(!on, Relaxed);
}

/// Runs `f` with fusion on or off for the evaluations this thread plans inside it (nested
/// calls: the innermost wins), whatever [`set_fusion`] says and without touching other
/// threads, so two benchmarks on two threads do not interfere. The previous setting comes
/// back when `f` returns or panics.
pub fn with_fusion<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPES.with(|s| s.fusion.set(self.0));
        }
    }
    let _restore = Restore(SCOPES.with(|s| s.fusion.replace(Some(on))));
    f()
}

/// Whether fusion is on for this thread: its innermost [`with_fusion`], else the
/// process-wide [`set_fusion`] setting.
pub fn fusion_enabled() -> bool {
    if let Some(on) = SCOPES.with(|s| s.fusion.get()) {
        return on;
    }
    !CONFIG.fusion_off().load(Relaxed)
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
    CONFIG.real_fft.store(
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
    let real_fft = &CONFIG.real_fft;
    let m = match real_fft.load(Relaxed) {
        0 => {
            let m = match var("LAZYFUSE_REAL_FFT").as_deref().map(str::trim) {
                Some("1") => 1,
                Some("0") => 2,
                _ => 3,
            };
            // a concurrent `set_real_fft_mode` wins over the environment
            let _ = real_fft.compare_exchange(0, m, Relaxed, Relaxed);
            real_fft.load(Relaxed)
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

/// `Config::pruned_fft_min` before the environment was read.
const UNREAD: usize = usize::MAX - 1;

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
    CONFIG.pruned_fft_min.store(not_unread(elements), Relaxed);
    before
}

/// The smallest transform that runs pruned on CUDA devices
/// ([`set_pruned_fft_min_elements`]).
pub fn pruned_fft_min_elements() -> usize {
    min_elements(
        &CONFIG.pruned_fft_min,
        "LAZYFUSE_PRUNED_FFT_MIN",
        CUDA_PRUNED_FFT_MIN_ELEMENTS,
    )
}

/// A threshold in elements kept in `cell`: its value once set or read, else the
/// environment variable `name` (a number, or `off`: `usize::MAX`), else `default`.
fn min_elements(cell: &AtomicUsize, name: &str, default: usize) -> usize {
    let v = cell.load(Relaxed);
    if v != UNREAD {
        return v;
    }
    let env = var(name);
    let v = match env.as_deref().map(str::trim) {
        Some("off") => usize::MAX,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("lazyfuse: {name}={s:?} is neither a number nor `off`; using {default}");
            default
        }),
        None => default,
    };
    // a concurrent setter wins over the environment
    let _ = cell.compare_exchange(UNREAD, not_unread(v), Relaxed, Relaxed);
    cell.load(Relaxed)
}

/// Smallest input (elements) of a CPU transform whose producer kernel runs inside the
/// transform's first pass by default (the line structure, [`set_cpu_fft_lines_min_elements`]):
/// below it the input fits the L2 cache and the separate kernel costs about what the line
/// structure saves (the `cpulines` bench rows, 2-core machine: 0.98-1.09x the separate
/// passes at 65536 elements, 0.73-0.96x from 262144 but for the spectral step, whose update
/// is cheap: 0.94-1.08x).
pub const CPU_FFT_LINES_MIN_ELEMENTS: usize = 1 << 16;

/// Sets the smallest input (elements) of a CPU transform whose producer, an elementwise
/// kernel, runs inside the transform's first pass where that pass runs along the array's
/// last axis (the line structure: each group of about 16K points computed into the
/// working lines and transformed while in cache, so the input is never stored; C2C over
/// the last axis among others, which then goes first, R2C halving the last axis, C2R
/// along the last axis alone), and returns the previous value. Default
/// [`CPU_FFT_LINES_MIN_ELEMENTS`]; `usize::MAX` turns it off, `0` applies it to every
/// eligible transform. It applies to the plans made afterwards; the results agree with
/// the separate passes within FFT rounding (bit for bit along one axis).
/// `LAZYFUSE_CPU_FFT_LINES_MIN=N` (or `off`) sets it at start.
pub fn set_cpu_fft_lines_min_elements(elements: usize) -> usize {
    let before = cpu_fft_lines_min_elements();
    CONFIG
        .cpu_fft_lines_min
        .store(not_unread(elements), Relaxed);
    before
}

/// The smallest CPU transform input computed inside the first pass
/// ([`set_cpu_fft_lines_min_elements`]).
pub fn cpu_fft_lines_min_elements() -> usize {
    min_elements(
        &CONFIG.cpu_fft_lines_min,
        "LAZYFUSE_CPU_FFT_LINES_MIN",
        CPU_FFT_LINES_MIN_ELEMENTS,
    )
}

/// Which implementation runs transforms on CUDA devices ([`set_fft_backend`],
/// `LAZYFUSE_FFT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FftBackend {
    /// cuFFT for every transform.
    Cufft,
    /// The project's generated passes (`lazyfuse_codegen::fft`) for C2C transforms whose
    /// every transformed length they cover (products of 2, 3, 5 and 7 up to 4096^2
    /// complex64 or 2048^2 complex128 elements per line), and for R2C and C2R transforms
    /// whose halved axis is the last and one pass long; cuFFT for the others.
    Generated,
    /// The default: per transform, cuFFT unless the generated passes measure over 10 %
    /// faster at its first use on a device (cached on disk with the kernels;
    /// `lf::debug::fft_choices` lists the decisions); fusion into the passes only where
    /// the generated passes won.
    #[default]
    Auto,
}

/// Sets which implementation runs transforms on CUDA devices, for the transforms
/// planned afterwards (a recorded CUDA graph keeps what it recorded), and returns the
/// previous setting. Lengths the generated passes do not cover always use cuFFT. The
/// results agree within FFT rounding; normalization is the same.
/// `LAZYFUSE_FFT=cufft|generated|auto` sets it at start.
pub fn set_fft_backend(backend: FftBackend) -> FftBackend {
    let before = fft_backend();
    CONFIG.fft_backend.store(backend as u8 + 1, Relaxed);
    before
}

/// The setting of [`set_fft_backend`].
pub fn fft_backend() -> FftBackend {
    let cell = &CONFIG.fft_backend;
    let decode = |v: u8| match v {
        1 => FftBackend::Cufft,
        2 => FftBackend::Generated,
        _ => FftBackend::Auto,
    };
    match cell.load(Relaxed) {
        0 => {
            let b = match var("LAZYFUSE_FFT").as_deref().map(str::trim) {
                None | Some("") => FftBackend::Auto,
                Some(s) if s.eq_ignore_ascii_case("cufft") => FftBackend::Cufft,
                Some(s) if s.eq_ignore_ascii_case("generated") => FftBackend::Generated,
                Some(s) if s.eq_ignore_ascii_case("auto") => FftBackend::Auto,
                Some(s) => {
                    eprintln!(
                        "lazyfuse: LAZYFUSE_FFT={s:?} is none of cufft, generated, auto; using auto"
                    );
                    FftBackend::Auto
                }
            };
            // a concurrent `set_fft_backend` wins over the environment
            let _ = cell.compare_exchange(0, b as u8 + 1, Relaxed, Relaxed);
            decode(cell.load(Relaxed))
        }
        v => decode(v),
    }
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
    let l = CONFIG.debug.load(Relaxed);
    if l != u8::MAX {
        return l;
    }
    let l = var("LAZYFUSE_DEBUG")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    CONFIG.debug.store(l, Relaxed);
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

/// How arrays print (NumPy's `np.set_printoptions` names and defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrintOptions {
    /// Digits after the decimal point of floats, at most (fewer when fewer identify the
    /// value). NumPy: 8.
    pub precision: usize,
    /// Arrays of more elements than this print summarized. NumPy: 1000.
    pub threshold: usize,
    /// Elements printed at each end of a summarized axis. NumPy: 3.
    pub edgeitems: usize,
    /// Characters per line before wrapping. NumPy: 75.
    pub linewidth: usize,
    /// Never use scientific notation for small values (they print rounded to `precision`).
    /// NumPy: false.
    pub suppress: bool,
}

impl Default for PrintOptions {
    fn default() -> PrintOptions {
        PrintOptions {
            precision: 8,
            threshold: 1000,
            edgeitems: 3,
            linewidth: 75,
            suppress: false,
        }
    }
}
