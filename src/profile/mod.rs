//! The profiler: where an evaluation's time went (planning, kernel compiles, transfers,
//! each kernel's and library call's device time, waiting), printed after each call with
//! `LAZYFUSE_PROFILE=1` and returned by [`profile`].
//!
//! Recording is per thread: the hooks in planning, execution and the runtime append to the
//! calling thread's recorder when one is open. Everything is behind [`on`], two relaxed
//! atomic loads, so a process that never profiles pays nothing else. On CUDA each step is
//! bracketed by two timing events on the thread's stream and the elapsed times are read when
//! the report is finished (which waits for the device); on the CPU a step's time is its wall
//! time.

pub(crate) mod calls;
pub(crate) mod summary;

use crate::runtime::{self, Buffer, Mark};
use crate::thread_field::Field;
use crate::Device;
use lazyfuse_codegen::Kernel;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// `LAZYFUSE_PROFILE`: 1 off, 2 on (a table per call), 3 `summary` (folded per thread,
/// `summary`).
fn env_mode() -> u8 {
    crate::config::CONFIG.profile_mode()
}

fn env_on() -> bool {
    env_mode() >= 2
}

/// True when some profiling is active (`LAZYFUSE_PROFILE=1` or a running [`profile`]).
#[inline]
pub(crate) fn on() -> bool {
    crate::stats::profiling().load(Relaxed) != 0 || env_on()
}

// ---------------------------------------------------------------------------------------
// Report data
// ---------------------------------------------------------------------------------------

/// What an [`Entry`] of a [`Report`] measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// Planning of one evaluation (host time), with the plan-cache outcome.
    Plan,
    /// One fused kernel.
    Kernel,
    /// One library call (cuFFT / rustfft; cuBLAS and matmul in the future).
    Library,
    /// A host-to-device copy.
    HostToDevice,
    /// A device-to-host copy (readback), not counting the wait before it.
    DeviceToHost,
    /// A copy between devices.
    DeviceCopy,
    /// Time the host spent waiting for queued device work (before a readback, or in
    /// `Device::synchronize`).
    Wait,
}

impl EntryKind {
    /// The short name used in the table.
    pub fn label(self) -> &'static str {
        match self {
            EntryKind::Plan => "plan",
            EntryKind::Kernel => "kernel",
            EntryKind::Library => "library",
            EntryKind::HostToDevice => "h2d",
            EntryKind::DeviceToHost => "d2h",
            EntryKind::DeviceCopy => "copy",
            EntryKind::Wait => "wait",
        }
    }
}

/// Where a kernel launch got its compiled code from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompileSource {
    /// The in-memory kernel cache of this process: no compile.
    MemoryHit,
    /// The on-disk kernel cache (`LAZYFUSE_CACHE_DIR`): loaded, not compiled.
    DiskHit,
    /// Compiled by NVRTC now (the entry's `compile_time` says how long, loading included).
    Compiled,
    /// The CPU backend: the kernel IR is interpreted, nothing is compiled.
    Interpreted,
}

impl fmt::Display for CompileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompileSource::MemoryHit => "memory hit",
            CompileSource::DiskHit => "disk hit",
            CompileSource::Compiled => "compiled",
            CompileSource::Interpreted => "interpreted",
        })
    }
}

/// How an entry's `time` was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timing {
    /// Between two CUDA events on the device's stream: device time only.
    DeviceEvents,
    /// Host wall-clock time of the call.
    Wall,
}

/// One measured step of a [`Report`].
#[derive(Clone, Debug)]
pub struct Entry {
    /// What was measured.
    pub kind: EntryKind,
    /// The kernel's entry name (`lf_<hash>`), the library call (`fft c2c axes=[0, 1]`), or a
    /// short description.
    pub name: String,
    /// Extra detail: launch shape, operand counts, plan size.
    pub detail: String,
    /// Which evaluation of the report (0-based) the entry belongs to; `None` for transfers
    /// and waits outside an evaluation.
    pub eval: Option<usize>,
    /// When the step began, from the start of the profiled stretch. Wall-timed entries:
    /// host time at the start of the call. Device-timed entries: the device's own clock
    /// (from the CUDA events), aligned to the host's at the first device-timed step of
    /// the stretch on that device, so their spacing is the device's (queued work shows
    /// when it ran, not when it was issued).
    pub start: Duration,
    /// Device time (CUDA events) or wall time, see `timing`. Zero when the events could not
    /// be read (the report's `notes` then say why).
    pub time: Duration,
    /// How `time` was measured.
    pub timing: Timing,
    /// Bytes the step read plus bytes it wrote (each buffer counted once).
    pub bytes: u64,
    /// Kernels: where the compiled code came from.
    pub compile: Option<CompileSource>,
    /// Kernels: time spent compiling or loading the code (zero for memory hits).
    pub compile_time: Duration,
    /// Plan entries: whether the plan came from the plan cache.
    pub plan_cache_hit: Option<bool>,
    /// The device a kernel or library call ran on; `None` for planning, transfers and
    /// waits (which the host times).
    pub device: Option<Device>,
}

impl Entry {
    fn new(kind: EntryKind, name: String, timing: Timing) -> Entry {
        Entry {
            kind,
            name,
            detail: String::new(),
            eval: None,
            start: Duration::ZERO,
            time: Duration::ZERO,
            timing,
            bytes: 0,
            compile: None,
            compile_time: Duration::ZERO,
            plan_cache_hit: None,
            device: None,
        }
    }

    /// Achieved bandwidth in GB/s (10^9 bytes per second): `bytes / time`; `None` when
    /// nothing was moved or no time was measured.
    pub fn gb_per_s(&self) -> Option<f64> {
        let t = self.time.as_secs_f64();
        (self.bytes > 0 && t > 0.0).then(|| self.bytes as f64 / t / 1e9)
    }
}

/// What a profiled stretch of work did, step by step. `Display` prints the table that
/// `LAZYFUSE_PROFILE=1` writes to stderr. Where some rows are device time from CUDA
/// events, host wall times carry a `*`; a report without any (every row of a CPU run) says
/// in its last line that all times are host wall time.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The measured steps, in the order they were issued.
    pub entries: Vec<Entry>,
    /// Evaluations that planned work.
    pub evals: usize,
    /// Host wall time of the whole profiled stretch (including the final wait that reads
    /// the device timers).
    pub wall: Duration,
    /// Problems met while measuring (e.g. a timing event that could not be created).
    pub notes: Vec<String>,
}

impl Report {
    /// The entries of one kind.
    pub fn of_kind(&self, kind: EntryKind) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }
    /// The kernel entries.
    pub fn kernels(&self) -> Vec<&Entry> {
        self.of_kind(EntryKind::Kernel).collect()
    }
    /// The library-call entries (FFTs).
    pub fn library_calls(&self) -> Vec<&Entry> {
        self.of_kind(EntryKind::Library).collect()
    }
    /// Sum of the times of the entries of `kind`.
    pub fn total_time(&self, kind: EntryKind) -> Duration {
        self.of_kind(kind).map(|e| e.time).sum()
    }
    /// Sum of the bytes of the entries of `kind`.
    pub fn total_bytes(&self, kind: EntryKind) -> u64 {
        self.of_kind(kind).map(|e| e.bytes).sum()
    }
    /// Time spent compiling or loading kernels (memory hits cost nothing).
    pub fn compile_time(&self) -> Duration {
        self.entries.iter().map(|e| e.compile_time).sum()
    }
    /// Device (or, on the CPU, wall) time of kernels and library calls together.
    pub fn compute_time(&self) -> Duration {
        self.total_time(EntryKind::Kernel) + self.total_time(EntryKind::Library)
    }

    /// Kernel and library time per device, in the order the devices first appear: each
    /// device with its [`compute_time`](Report::compute_time) share and its number of
    /// kernels and library calls. Work on a device listed several times in a mesh (the
    /// CPU stand-in for several GPUs) adds up under that one device.
    pub fn per_device(&self) -> Vec<(Device, Duration, usize)> {
        let mut out: Vec<(Device, Duration, usize)> = Vec::new();
        let compute = self
            .entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Kernel | EntryKind::Library));
        for e in compute {
            let Some(d) = &e.device else { continue };
            match out.iter_mut().find(|(o, _, _)| o == d) {
                Some(row) => {
                    row.1 += e.time;
                    row.2 += 1;
                }
                None => out.push((d.clone(), e.time, 1)),
            }
        }
        out
    }

    /// The report as a Chrome trace (the JSON that Perfetto and `chrome://tracing` open):
    /// one complete event (`"ph": "X"`) per entry, in entry order, with `ts` (its
    /// [`Entry::start`]) and `dur` (its [`Entry::time`]) in microseconds, the entry's name
    /// as `name`, its kind's [label](EntryKind::label) as `cat`, and `args` holding
    /// `kind`, `bytes`, `detail`, `eval` (or null), `timing` (`"device"` or `"wall"`) and,
    /// where set, `compile`, `compile_us`, `plan_cache_hit` and `gb_per_s`. Wall-timed
    /// entries lie on the track (`tid`) 1, "host", device-timed ones on track 2,
    /// "device"; the report's evaluations, wall time and notes are in `otherData`.
    ///
    /// ```
    /// use lazyfuse as lf;
    /// let x = lf::Array::linspace(0.0, 1.0, 1000, lf::DType::F32);
    /// let (_, report) = lf::profile(|| (&x * 2.0).sin().eval());
    /// let json = report.to_chrome_trace();
    /// assert!(json.starts_with("{\"traceEvents\":["));
    /// // std::fs::write("trace.json", json) and open it in https://ui.perfetto.dev
    /// ```
    pub fn to_chrome_trace(&self) -> String {
        use std::fmt::Write as _;
        const PID: u32 = 1;
        const HOST: u32 = 1;
        const DEVICE: u32 = 2;
        let us = |d: Duration| d.as_nanos() as f64 / 1e3;
        let mut out = String::from("{\"traceEvents\":[");
        let meta = [
            ("process_name", 0, "lazyfuse"),
            ("thread_name", HOST, "host"),
            ("thread_name", DEVICE, "device"),
        ];
        for (k, (name, tid, value)) in meta.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                "{{\"name\":\"{name}\",\"ph\":\"M\",\"pid\":{PID},\"tid\":{tid},\
                 \"args\":{{\"name\":\"{value}\"}}}}"
            );
        }
        for e in &self.entries {
            let tid = match e.timing {
                Timing::DeviceEvents => DEVICE,
                Timing::Wall => HOST,
            };
            let _ = write!(
                out,
                ",{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\
                 \"pid\":{PID},\"tid\":{tid},\"args\":{{\"kind\":\"{}\",\"bytes\":{},\
                 \"detail\":{},\"eval\":{},\"timing\":\"{}\"",
                json_str(&e.name),
                e.kind.label(),
                us(e.start),
                us(e.time),
                e.kind.label(),
                e.bytes,
                json_str(&e.detail),
                e.eval.map_or_else(|| "null".to_string(), |i| i.to_string()),
                match e.timing {
                    Timing::DeviceEvents => "device",
                    Timing::Wall => "wall",
                },
            );
            if let Some(c) = e.compile {
                let _ = write!(
                    out,
                    ",\"compile\":{},\"compile_us\":{:.3}",
                    json_str(&c.to_string()),
                    us(e.compile_time)
                );
            }
            if let Some(h) = e.plan_cache_hit {
                let _ = write!(out, ",\"plan_cache_hit\":{h}");
            }
            if let Some(g) = e.gb_per_s().filter(|g| g.is_finite()) {
                let _ = write!(out, ",\"gb_per_s\":{g:.3}");
            }
            out.push_str("}}");
        }
        let _ = write!(
            out,
            "],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"evals\":{},\"wall_us\":{:.3},\
             \"notes\":[",
            self.evals,
            us(self.wall)
        );
        for (k, n) in self.notes.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            out.push_str(&json_str(n));
        }
        out.push_str("]}}");
        out
    }
}

/// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
fn json_str(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn fmt_time(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.1} us")
    }
}

fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b} B")
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lazyfuse profile: {} eval(s), {} kernel(s), {} library call(s), wall {}",
            self.evals,
            self.kernels().len(),
            self.library_calls().len(),
            fmt_time(self.wall)
        )?;
        writeln!(
            f,
            "{:>4}  {:<7}  {:<24}  {:<20}  {:>10}  {:>10}  {:>8}  detail",
            "eval", "step", "name", "compile", "time", "bytes", "GB/s"
        )?;
        // `*` marks wall-time rows only where some row holds device time to tell apart
        let mixed = self
            .entries
            .iter()
            .any(|e| e.timing == Timing::DeviceEvents);
        for e in &self.entries {
            let eval = e.eval.map_or_else(|| "-".to_string(), |i| i.to_string());
            let compile = match (e.compile, e.plan_cache_hit) {
                (Some(CompileSource::Compiled), _) | (Some(CompileSource::DiskHit), _) => {
                    format!(
                        "{} {}",
                        e.compile.unwrap_or(CompileSource::Compiled),
                        fmt_time(e.compile_time)
                    )
                }
                (Some(c), _) => c.to_string(),
                (None, Some(true)) => "plan cache hit".into(),
                (None, Some(false)) => "plan cache miss".into(),
                (None, None) => "-".into(),
            };
            let time = match e.timing {
                Timing::DeviceEvents => fmt_time(e.time),
                Timing::Wall if mixed => format!("{}*", fmt_time(e.time)),
                Timing::Wall => fmt_time(e.time),
            };
            let bytes = if e.bytes > 0 {
                fmt_bytes(e.bytes)
            } else {
                "-".into()
            };
            let gbs = match e.gb_per_s() {
                None => "-".to_string(),
                Some(g) if g >= 1.0 => format!("{g:.1}"),
                Some(g) => format!("{g:.3}"),
            };
            writeln!(
                f,
                "{eval:>4}  {:<7}  {:<24}  {compile:<20}  {time:>10}  {bytes:>10}  {gbs:>8}  {}",
                e.kind.label(),
                e.name,
                e.detail
            )?;
        }
        let compiled = self
            .entries
            .iter()
            .filter(|e| e.compile == Some(CompileSource::Compiled))
            .count();
        let disk = self
            .entries
            .iter()
            .filter(|e| e.compile == Some(CompileSource::DiskHit))
            .count();
        writeln!(
            f,
            "totals: planning {}, compile {} ({compiled} compiled, {disk} from disk), \
             kernels+library {}, h2d {} in {}, d2h {} in {}, waiting {}",
            fmt_time(self.total_time(EntryKind::Plan)),
            fmt_time(self.compile_time()),
            fmt_time(self.compute_time()),
            fmt_bytes(self.total_bytes(EntryKind::HostToDevice)),
            fmt_time(self.total_time(EntryKind::HostToDevice)),
            fmt_bytes(self.total_bytes(EntryKind::DeviceToHost)),
            fmt_time(self.total_time(EntryKind::DeviceToHost)),
            fmt_time(self.total_time(EntryKind::Wait)),
        )?;
        if mixed {
            write!(
                f,
                "(times without * are device time from CUDA events; * = host wall time)"
            )?;
        } else {
            write!(
                f,
                "(all times are host wall time; no step was timed by CUDA events)"
            )?;
        }
        for n in &self.notes {
            write!(f, "\nnote: {n}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------

/// An entry whose time is pending between two marks (device events, read at the end).
struct Pending {
    entry: usize,
    start: Mark,
    end: Mark,
    /// Index into [`Recorder::bases`]: the device's clock origin (`None`: the marks are not
    /// both device events).
    base: Option<usize>,
}

/// The clock origin of one device in a recording: the start mark of its first
/// device-timed entry (`pending`, an index into [`Recorder::pending`]), taken as
/// happening at host time `host`.
struct Base {
    device: Device,
    pending: usize,
    host: Duration,
}

/// The open recording of one thread.
struct Recorder {
    report: Report,
    /// Entries whose time is pending between two marks.
    pending: Vec<Pending>,
    /// Clock origins of the devices timed by events.
    bases: Vec<Base>,
    /// Nesting depth of public calls (to_host -> eval) inside this recording.
    depth: usize,
    /// Set by `profile`: the recording outlives the calls; nothing is printed per call.
    explicit: bool,
    /// The evaluation entries are attributed to.
    current_eval: Option<usize>,
    started: Instant,
}

impl Recorder {
    fn new(explicit: bool) -> Recorder {
        Recorder {
            report: Report::default(),
            pending: Vec::new(),
            bases: Vec::new(),
            depth: 0,
            explicit,
            current_eval: None,
            started: Instant::now(),
        }
    }

    fn push(&mut self, mut e: Entry) -> usize {
        e.eval = self.current_eval;
        self.report.entries.push(e);
        self.report.entries.len() - 1
    }

    /// Reads every pending timer (waits for the device) and closes the report.
    fn finish(mut self) -> Report {
        for p in &self.pending {
            let i = p.entry;
            match runtime::mark_elapsed(&p.start, &p.end) {
                Ok(t) => self.report.entries[i].time = t,
                Err(err) => self.report.notes.push(format!(
                    "timer of {} {} unreadable: {err}",
                    self.report.entries[i].kind.label(),
                    self.report.entries[i].name
                )),
            }
            if let Some(b) = p.base.map(|b| &self.bases[b]) {
                let origin = &self.pending[b.pending].start;
                if let Ok(since) = runtime::mark_elapsed(origin, &p.start) {
                    self.report.entries[i].start = b.host + since;
                }
            }
        }
        self.report.wall = self.started.elapsed();
        self.report
    }
}

/// The launch shape of a kernel: grid, block, elements per thread, registers.
type LaunchShape = ((u32, u32), u32, u32, Option<u32>);

/// This thread's profiling state: `profile` records the calling thread.
struct ThreadProfile {
    /// This thread's open recorder.
    rec: RefCell<Option<Recorder>>,
    /// The kernel cache's answer for the launch in progress: (source, compile or load time).
    last_compile: Cell<Option<(CompileSource, Duration)>>,
    /// The entry name of that kernel.
    last_name: RefCell<String>,
    /// The launch shape of that kernel.
    last_launch: Cell<Option<LaunchShape>>,
    /// The tally of the innermost `debug::driver_calls` closure (none: counting off).
    calls: RefCell<Option<calls::Tally>>,
    /// The folded profile under `LAZYFUSE_PROFILE=summary`, printed when the thread ends.
    summary: RefCell<summary::Accumulated>,
}

thread_local! {
    /// This thread's profiling state.
    static PROFILE: ThreadProfile = const {
        ThreadProfile {
            rec: RefCell::new(None),
            last_compile: Cell::new(None),
            last_name: RefCell::new(String::new()),
            last_launch: Cell::new(None),
            calls: RefCell::new(None),
            summary: RefCell::new(summary::Accumulated::new()),
        }
    };
}

const REC: Field<ThreadProfile, RefCell<Option<Recorder>>> = Field::new(&PROFILE, |t| &t.rec);
const LAST_COMPILE: Field<ThreadProfile, Cell<Option<(CompileSource, Duration)>>> =
    Field::new(&PROFILE, |t| &t.last_compile);
const LAST_NAME: Field<ThreadProfile, RefCell<String>> = Field::new(&PROFILE, |t| &t.last_name);
const LAST_LAUNCH: Field<ThreadProfile, Cell<Option<LaunchShape>>> =
    Field::new(&PROFILE, |t| &t.last_launch);

fn with_rec<T>(f: impl FnOnce(&mut Recorder) -> T) -> Option<T> {
    REC.with(|r| r.borrow_mut().as_mut().map(f))
}

/// Runs `f` with profiling on for this thread and returns its result together with the
/// report of everything it evaluated, transferred and waited for.
///
/// The report's device times come from CUDA events, read when `f` returns: `profile`
/// therefore waits for the device before returning (the work `f` queued is complete
/// afterwards). Calls nest: an inner `profile` gets its own report, and its entries also
/// appear in the outer one.
///
/// ```
/// use lazyfuse as lf;
/// let x = lf::Array::linspace(0.0, 1.0, 1000, lf::DType::F32);
/// let (sum_of_first, report) = lf::profile(|| {
///     let y = (&x * 2.0).sin() + 1.0;
///     y.to_vec::<f32>().map(|v| v[0])
/// });
/// assert_eq!(sum_of_first.unwrap(), 1.0);
/// assert_eq!(report.kernels().len(), 1);
/// println!("{report}");
/// ```
pub fn profile<R>(f: impl FnOnce() -> R) -> (R, Report) {
    crate::stats::profiling().fetch_add(1, Relaxed);
    let outer = REC.with(|r| r.borrow_mut().replace(Recorder::new(true)));
    // Restores the outer recording (and the counter) even when `f` panics.
    struct Restore(Option<Option<Recorder>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                REC.with(|r| *r.borrow_mut() = outer);
                crate::stats::profiling().fetch_sub(1, Relaxed);
            }
        }
    }
    let mut restore = Restore(Some(outer));
    let out = f();
    let rec = REC.with(|r| r.borrow_mut().take());
    let started = rec.as_ref().map(|r| r.started);
    let report = rec.map(Recorder::finish).unwrap_or_default();
    if let Some(outer) = restore.0.take() {
        REC.with(|r| *r.borrow_mut() = outer);
        crate::stats::profiling().fetch_sub(1, Relaxed);
    }
    with_rec(|r| {
        let base = r.report.evals;
        // the inner stretch's times count from its own start
        let shift = started.map_or(Duration::ZERO, |s| s.saturating_duration_since(r.started));
        for e in &report.entries {
            let mut e = e.clone();
            e.start += shift;
            e.eval = e.eval.map(|i| i + base).or(r.current_eval);
            r.report.entries.push(e);
        }
        r.report.evals += report.evals;
        r.report.notes.extend(report.notes.iter().cloned());
    });
    (out, report)
}

/// Guard of one public call (eval, readback, upload, synchronize). With `LAZYFUSE_PROFILE=1`
/// the outermost one opens a recording and prints its table when dropped; with
/// `LAZYFUSE_PROFILE=summary` it folds the table into the thread's summary instead.
pub(crate) struct Scope {
    active: bool,
}

/// Opens a call scope; `eval` marks an evaluation, which later entries are attributed to.
pub(crate) fn scope(eval: bool) -> Scope {
    if !on() {
        return Scope { active: false };
    }
    let active = REC.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_none() {
            if !env_on() {
                return false; // another thread's `profile`; this thread records nothing
            }
            *r = Some(Recorder::new(false));
        }
        let rec = r.as_mut().expect("recorder set above");
        rec.depth += 1;
        if eval {
            rec.current_eval = Some(rec.report.evals);
            rec.report.evals += 1;
        }
        true
    });
    Scope { active }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        let done = REC.with(|r| {
            let mut r = r.borrow_mut();
            let rec = r.as_mut()?;
            rec.depth = rec.depth.saturating_sub(1);
            if rec.depth == 0 {
                rec.current_eval = None;
                if !rec.explicit {
                    return r.take();
                }
            }
            None
        });
        if let Some(rec) = done {
            let report = rec.finish();
            if report.entries.is_empty() {
                return;
            }
            if env_mode() == 3 {
                summary::fold(&report);
            } else {
                eprintln!("{report}");
            }
        }
    }
}

/// A started measurement of one step (`None` when this thread records nothing).
pub(crate) struct Probe {
    start: Mark,
    device_timed: bool,
    /// Host time at the start.
    host: Instant,
}

/// Starts measuring a step on `dev` (CUDA: a timing event on its stream).
#[inline]
pub(crate) fn begin(dev: &Device) -> Option<Probe> {
    if !on() || REC.with(|r| r.borrow().is_none()) {
        return None;
    }
    LAST_COMPILE.with(|c| c.set(None));
    let host = Instant::now();
    Some(match runtime::mark(dev) {
        Ok(m) => Probe {
            device_timed: m.is_device(),
            start: m,
            host,
        },
        Err(e) => {
            with_rec(|r| r.report.notes.push(format!("no timing event: {e}")));
            Probe {
                start: Mark::wall(),
                device_timed: false,
                host,
            }
        }
    })
}

/// True when this thread is recording a profile (then evaluations run step by step, not
/// as CUDA graph replays, so that every step is timed).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn recording() -> bool {
    on() && REC.with(|r| r.borrow().is_some())
}

/// Begins a host-timed measurement (planning, transfers, waits).
#[inline]
pub(crate) fn begin_wall() -> Option<Probe> {
    if !on() || REC.with(|r| r.borrow().is_none()) {
        return None;
    }
    Some(Probe {
        start: Mark::wall(),
        device_timed: false,
        host: Instant::now(),
    })
}

fn finish_probe(p: Probe, dev: Option<&Device>, mut e: Entry) {
    e.device = dev.cloned();
    let end = match (p.device_timed, dev) {
        (true, Some(d)) => runtime::mark(d).unwrap_or_else(|_| Mark::wall()),
        _ => Mark::wall(),
    };
    e.timing = if end.is_device() && p.device_timed {
        Timing::DeviceEvents
    } else {
        Timing::Wall
    };
    with_rec(|r| {
        let host = p.host.saturating_duration_since(r.started);
        e.start = host;
        let i = r.push(e);
        match runtime::mark_elapsed_now(&p.start, &end) {
            Some(t) => r.report.entries[i].time = t,
            None => {
                // device events: this device's first one is its clock origin
                let base = match (dev, p.start.is_device() && end.is_device()) {
                    (Some(d), true) => Some(match r.bases.iter().position(|b| b.device == *d) {
                        Some(b) => b,
                        None => {
                            r.bases.push(Base {
                                device: d.clone(),
                                pending: r.pending.len(),
                                host,
                            });
                            r.bases.len() - 1
                        }
                    }),
                    _ => None,
                };
                r.pending.push(Pending {
                    entry: i,
                    start: p.start,
                    end,
                    base,
                });
            }
        }
    });
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Records the kernel cache's answer for the launch being measured (called by the CUDA
/// kernel cache).
#[inline]
pub(crate) fn note_compile(entry: &str, source: CompileSource, time: Duration) {
    if !on() {
        return;
    }
    LAST_COMPILE.with(|c| c.set(Some((source, time))));
    LAST_NAME.with(|n| {
        let mut n = n.borrow_mut();
        n.clear();
        n.push_str(entry);
    });
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Records the launch shape of the kernel being measured (called by the CUDA launch): its
/// grid and block, elements per thread and iteration, and registers per thread.
#[inline]
pub(crate) fn note_launch(grid: (u32, u32), block: u32, per_thread: u32, regs: Option<u32>) {
    if !on() {
        return;
    }
    LAST_LAUNCH.with(|c| c.set(Some((grid, block, per_thread, regs))));
}

/// Ends a kernel step that read `inputs` and wrote its outputs over `shape`. Bytes: each
/// input buffer read once but at most one element per computed element (a slice reads only
/// its part; a broadcast input its whole, smaller buffer), each output written once. The
/// detail names the values the kernel `recomputes` rather than reads stored.
pub(crate) fn kernel_done(
    p: Option<Probe>,
    dev: &Device,
    kernel: &Kernel,
    inputs: &[&Buffer],
    shape: &[usize],
    recomputes: Option<&str>,
) {
    let Some(p) = p else { return };
    let n: usize = shape.iter().product();
    let out_bytes: u64 = kernel.outputs.iter().map(|d| (d.size() * n) as u64).sum();
    let in_bytes: u64 = inputs
        .iter()
        .map(|b| (b.len().min(n) * b.dtype().size()) as u64)
        .sum();
    // CUDA: the kernel cache noted where the code came from (nothing for an empty launch).
    let noted = LAST_COMPILE.with(|c| c.take());
    let (source, ctime) = match (noted, dev.is_cuda()) {
        (Some((s, t)), _) => (Some(s), t),
        (None, false) => (Some(CompileSource::Interpreted), Duration::ZERO),
        (None, true) => (None, Duration::ZERO),
    };
    let name = if noted.is_some() {
        LAST_NAME.with(|n| n.borrow().clone())
    } else {
        runtime::cpu::kernel_name(kernel)
    };
    let mut e = Entry::new(EntryKind::Kernel, name, Timing::Wall);
    e.detail = format!(
        "{} in -> {} out, shape {shape:?}",
        kernel.inputs.len(),
        kernel.outputs.len()
    );
    if let Some(((gx, gy), block, pt, regs)) = LAST_LAUNCH.with(|c| c.take()) {
        let grid = if gy > 1 {
            format!("{gx}x{gy}")
        } else {
            gx.to_string()
        };
        let regs = regs.map_or(String::new(), |r| format!(", {r} regs"));
        e.detail += &format!(", grid {grid} x {block}, {pt}/thread{regs}");
    }
    if let Some(r) = recomputes {
        e.detail += &format!(", recomputes {r}");
    }
    e.bytes = in_bytes + out_bytes;
    e.compile = source;
    e.compile_time = ctime;
    finish_probe(p, Some(dev), e);
}

/// Ends a library step (`name`, e.g. an FFT) that read `in_bytes` and wrote `out_bytes`.
pub(crate) fn library_done(
    p: Option<Probe>,
    dev: &Device,
    name: String,
    detail: String,
    bytes: u64,
) {
    let Some(p) = p else { return };
    let mut e = Entry::new(EntryKind::Library, name, Timing::Wall);
    e.detail = detail;
    e.bytes = bytes;
    finish_probe(p, Some(dev), e);
}

/// Ends a host-timed step of `kind`.
pub(crate) fn host_done(p: Option<Probe>, kind: EntryKind, name: &str, detail: String, bytes: u64) {
    let Some(p) = p else { return };
    let mut e = Entry::new(kind, name.to_string(), Timing::Wall);
    e.detail = detail;
    e.bytes = bytes;
    finish_probe(p, None, e);
}

/// Ends the planning of an evaluation.
pub(crate) fn plan_done(p: Option<Probe>, cache_hit: bool, steps: usize) {
    let Some(p) = p else { return };
    let mut e = Entry::new(EntryKind::Plan, "plan".into(), Timing::Wall);
    e.detail = format!("{steps} step(s)");
    e.plan_cache_hit = Some(cache_hit);
    finish_probe(p, None, e);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EntryKind, us: u64, bytes: u64) -> Entry {
        let mut e = Entry::new(kind, format!("{}-step", kind.label()), Timing::DeviceEvents);
        e.time = Duration::from_micros(us);
        e.bytes = bytes;
        e.eval = Some(0);
        e
    }

    #[test]
    fn table_rows_totals_and_bandwidth() {
        let mut compiled = entry(EntryKind::Kernel, 10, 40_000_000);
        compiled.compile = Some(CompileSource::Compiled);
        compiled.compile_time = Duration::from_millis(42);
        let mut disk = entry(EntryKind::Kernel, 5, 0);
        disk.compile = Some(CompileSource::DiskHit);
        disk.compile_time = Duration::from_micros(300);
        let mut plan = entry(EntryKind::Plan, 7, 0);
        plan.timing = Timing::Wall;
        plan.plan_cache_hit = Some(false);
        let mut wait = entry(EntryKind::Wait, 20, 0);
        wait.eval = None;
        let r = Report {
            entries: vec![
                plan,
                compiled,
                disk,
                entry(EntryKind::Library, 30, 1000),
                wait,
                entry(EntryKind::DeviceToHost, 2, 4000),
            ],
            evals: 1,
            wall: Duration::from_millis(50),
            notes: vec!["a note".into()],
        };
        assert_eq!(r.kernels().len(), 2);
        assert_eq!(r.compile_time(), Duration::from_micros(42_300));
        assert_eq!(r.compute_time(), Duration::from_micros(45));
        // 40 MB in 10 us = 4000 GB/s
        assert!((r.kernels()[0].gb_per_s().unwrap() - 4000.0).abs() < 1e-6);
        assert_eq!(r.kernels()[1].gb_per_s(), None);
        let text = r.to_string();
        assert!(text.starts_with("lazyfuse profile: 1 eval(s), 2 kernel(s), 1 library call(s)"));
        assert!(text.contains("compiled 42.0 ms"), "{text}");
        assert!(text.contains("disk hit 300.0 us"), "{text}");
        assert!(text.contains("plan cache miss"), "{text}");
        assert!(text.contains("7.0 us*"), "{text}");
        assert!(text.contains("4000.0"), "{text}");
        assert!(text.contains("(1 compiled, 1 from disk)"), "{text}");
        assert!(
            text.contains("d2h 4.0 kB in 2.0 us, waiting 20.0 us"),
            "{text}"
        );
        assert!(text.ends_with("note: a note"), "{text}");
        let wait_row = text.lines().find(|l| l.contains("wait-step")).unwrap();
        assert!(wait_row.trim_start().starts_with('-'), "{wait_row}");
    }

    #[test]
    fn nothing_is_recorded_without_a_recorder() {
        // no `profile` on this thread: probes are not started
        if !env_on() {
            assert!(begin_wall().is_none());
            assert!(begin(&Device::Cpu).is_none());
        }
        let ((), r) = profile(|| {
            let p = begin_wall();
            assert!(p.is_some());
            host_done(p, EntryKind::Wait, "w", String::new(), 0);
        });
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].eval, None);
        assert_eq!(r.entries[0].timing, Timing::Wall);
    }
}
