//! The profiler's report: entries per plan step, compile sources, byte counts and the table.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, CompileSource, DType, Device, EntryKind};
use std::f64::consts::PI;
use std::sync::atomic::{AtomicU64, Ordering};

/// The BENCH.md PSF pipeline on an `n x n` pupil (1 kernel + 1 FFT + 1 kernel).
fn psf(n: usize) -> Array {
    let x = Array::linspace(-1.0, 1.0, n, DType::F32);
    let g = lf::meshgrid(&[&x, &x], lf::Indexing::Xy);
    let (xx, yy) = (&g[0], &g[1]);
    let rho = (xx.square() + yy.square()).sqrt();
    let phase = rho.square() * yy.atan2(xx).cos();
    let wave = (phase * (2.0 * PI) * lf::c64::i()).exp();
    let pupil = lf::where_(&rho.gt(1.0), lf::c64::new(0.0, 0.0), &wave);
    let p = n / 2;
    let padded = pupil.pad(&[(p, p), (p, p)], 0.0);
    let field = lf::fft::fftshift(&lf::fft::fft2(&lf::fft::ifftshift(&padded, None)), None);
    field.abs().square()
}

/// An elementwise chain whose op sequence is new to this process (and, with high
/// probability, to the on-disk kernel cache): 40 ops picked by a per-call random word.
fn unique_chain(x: &Array, word: u64) -> Array {
    let mut y = x.clone();
    for bit in 0..40 {
        y = if (word >> bit) & 1 == 1 {
            y.sin()
        } else {
            y.cos()
        };
    }
    y + 1.0
}

fn fresh_word() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let c = COUNTER.fetch_add(1, Ordering::Relaxed);
    (nanos ^ (u64::from(std::process::id()) << 20) ^ c.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        & ((1 << 40) - 1)
}

device_test!(psf_reports_kernel_fft_kernel);
fn psf_reports_kernel_fft_kernel(dev: &Device) {
    // where the generated passes run the 64 x 64 transform (`LAZYFUSE_FFT=generated`, or
    // chosen by measurement) both kernels fuse into its passes: one library step alone
    let spectrum = lf::fft::fft2(&Array::zeros_on(&[64, 64], DType::C64, dev));
    let generated = lf::debug::fft_runs_generated(&spectrum).unwrap();
    let ((), report) = lf::profile(|| psf(32).eval().unwrap());
    assert_eq!(report.evals, 1);
    let steps: Vec<EntryKind> = report
        .entries
        .iter()
        .map(|e| e.kind)
        .filter(|k| matches!(k, EntryKind::Kernel | EntryKind::Library))
        .collect();
    let want: &[EntryKind] = match generated {
        true => &[EntryKind::Library],
        false => &[EntryKind::Kernel, EntryKind::Library, EntryKind::Kernel],
    };
    assert_eq!(steps, want, "{report}");
    assert_eq!(report.kernels().len(), if generated { 0 } else { 2 });
    assert_eq!(report.library_calls().len(), 1);
    assert_eq!(report.of_kind(EntryKind::Plan).count(), 1);
    let fft = report.library_calls()[0];
    assert!(fft.name.starts_with("fft"), "{}", fft.name);
    // 64 x 64 complex64 in and out (fused: the prologue's inputs instead of the first)
    if !generated {
        assert_eq!(fft.bytes, 2 * 64 * 64 * 8);
    }
    for e in report.kernels() {
        assert!(e.name.starts_with("lf_"), "{}", e.name);
        assert_eq!(e.eval, Some(0));
        let expect = if dev.is_cuda() {
            lf::Timing::DeviceEvents
        } else {
            lf::Timing::Wall
        };
        assert_eq!(e.timing, expect);
    }
    // every timed step has a time once the report is finished
    assert!(report.compute_time() > std::time::Duration::ZERO);
}

device_test!(compile_then_memory_hit_and_plan_cache);
fn compile_then_memory_hit_and_plan_cache(dev: &Device) {
    let x = Array::linspace(0.0, 1.0, 257, DType::F32);
    x.eval().unwrap();
    let word = fresh_word();
    let (_, first) = lf::profile(|| unique_chain(&x, word).eval().unwrap());
    let (_, second) = lf::profile(|| unique_chain(&x, word).eval().unwrap());
    let plan_hit = |r: &lf::Report| {
        r.of_kind(EntryKind::Plan)
            .map(|e| e.plan_cache_hit)
            .collect::<Vec<_>>()
    };
    assert_eq!(plan_hit(&first), [Some(false)], "{first}");
    assert_eq!(plan_hit(&second), [Some(true)], "{second}");
    let src = |r: &lf::Report| r.kernels().iter().map(|e| e.compile).collect::<Vec<_>>();
    if dev.is_cuda() {
        assert_eq!(src(&first), [Some(CompileSource::Compiled)], "{first}");
        assert!(first.kernels()[0].compile_time > std::time::Duration::ZERO);
        assert_eq!(src(&second), [Some(CompileSource::MemoryHit)], "{second}");
        assert_eq!(second.kernels()[0].compile_time, std::time::Duration::ZERO);
        assert!(first.to_string().contains("compiled"));
        assert!(second.to_string().contains("memory hit"));
    } else {
        assert_eq!(src(&first), [Some(CompileSource::Interpreted)]);
        assert_eq!(src(&second), [Some(CompileSource::Interpreted)]);
    }
    assert_eq!(first.kernels()[0].name, second.kernels()[0].name);
}

device_test!(bytes_match_the_arrays);
fn bytes_match_the_arrays(dev: &Device) {
    let (v, r) = lf::profile(|| {
        let a = Array::from_vec((0..1000).map(|i| i as f32).collect(), &[1000]).unwrap();
        let b = Array::from_vec(vec![0.5f32; 10 * 1000], &[10, 1000]).unwrap();
        ((&a + &b) * 2.0).to_vec::<f32>().unwrap()
    });
    assert_eq!(v.len(), 10_000);
    assert_eq!(v[3], 7.0);
    let k = r.kernels();
    assert_eq!(k.len(), 1, "{r}");
    // reads a (4 kB, broadcast: each buffer counted once) and b (40 kB), writes 40 kB
    assert_eq!(k[0].bytes, 4_000 + 40_000 + 40_000);
    assert!(k[0].detail.contains("2 in -> 1 out"), "{}", k[0].detail);
    if dev.is_cuda() {
        assert_eq!(r.total_bytes(EntryKind::HostToDevice), 44_000, "{r}");
        assert_eq!(r.total_bytes(EntryKind::DeviceToHost), 40_000, "{r}");
        assert_eq!(r.of_kind(EntryKind::Wait).count(), 1, "{r}");
    } else {
        // host memory: nothing is copied between devices
        assert_eq!(r.total_bytes(EntryKind::HostToDevice), 0);
        assert_eq!(r.total_bytes(EntryKind::DeviceToHost), 0);
    }
    let gbs = k[0].gb_per_s().expect("a timed kernel that moved bytes");
    assert!(gbs > 0.0);
}

device_test!(display_lists_the_steps);
fn display_lists_the_steps(_: &Device) {
    let x = Array::linspace(0.0, 1.0, 64, DType::F64);
    // where the generated passes run the transform (on CUDA, when they measured faster than
    // cuFFT), the kernels before and after it run inside its passes
    let generated = lf::debug::fft_runs_generated(&lf::fft::fft(&(&x * 3.0), -1)).unwrap();
    let kernels = if generated { 0 } else { 2 };
    let (_, r) = lf::profile(|| {
        let y = lf::fft::fft(&(&x * 3.0), -1).abs();
        y.to_vec::<f64>().unwrap()
    });
    let text = r.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "lazyfuse profile: 1 eval(s), {kernels} kernel(s), 1 library call(s)"
        )),
        "{text}"
    );
    assert!(
        lines[1].contains("name") && lines[1].contains("GB/s"),
        "{text}"
    );
    let rows = |kind: &str| {
        lines
            .iter()
            .filter(|l| l.split_whitespace().nth(1) == Some(kind))
            .count()
    };
    assert_eq!(rows("kernel"), kernels, "{text}");
    assert_eq!(rows("library"), 1, "{text}");
    assert_eq!(rows("plan"), 1, "{text}");
    assert!(text.contains("fft axes=[0]"), "{text}");
    assert!(text.contains("totals: planning"), "{text}");
}

device_test!(footer_says_how_times_were_measured);
/// The footer says how the times were measured: on the CPU every row is host wall time
/// (no `*` marks, no mention of CUDA events); on CUDA kernel rows are device time and the
/// host rows carry a `*`.
fn footer_says_how_times_were_measured(d: &Device) {
    let x = Array::linspace(0.0, 1.0, 64, DType::F32);
    let (_, r) = lf::profile(|| (&x * 2.0).sin().to_vec::<f32>().unwrap());
    let text = r.to_string();
    let footer = text
        .lines()
        .find(|l| l.starts_with('('))
        .unwrap_or_else(|| panic!("no footer:\n{text}"));
    let device_timed = r
        .entries
        .iter()
        .filter(|e| e.timing == lf::Timing::DeviceEvents)
        .count();
    let starred = text
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .any(|w| w.len() > 1 && w.ends_with('*'))
        })
        .count();
    if d.is_cuda() {
        assert!(device_timed > 0, "{text}");
        assert_eq!(
            footer,
            "(times without * are device time from CUDA events; * = host wall time)"
        );
        assert!(starred > 0, "the plan row is host wall time:\n{text}");
    } else {
        assert_eq!(device_timed, 0, "{text}");
        assert!(r.kernels().iter().all(|e| e.timing == lf::Timing::Wall));
        assert_eq!(
            footer,
            "(all times are host wall time; no step was timed by CUDA events)"
        );
        assert_eq!(
            starred, 0,
            "no `*` marks on an all-wall-time table:\n{text}"
        );
    }
}

device_test!(only_work_inside_the_closure_is_reported);
fn only_work_inside_the_closure_is_reported(_: &Device) {
    let x = Array::linspace(0.0, 1.0, 100, DType::F32);
    let y = x.exp();
    y.eval().unwrap(); // before profiling: not reported
    let (_, r) = lf::profile(|| y.eval().unwrap()); // already evaluated: nothing to do
    assert_eq!(r.evals, 0);
    assert!(r.entries.is_empty(), "{r}");
    // nested: the inner report holds its own work, the outer one everything
    let (inner, outer) = lf::profile(|| {
        (&x + 1.0).eval().unwrap();
        lf::profile(|| (&x * 3.0).eval().unwrap()).1
    });
    assert_eq!(inner.kernels().len(), 1);
    assert_eq!(outer.kernels().len(), 2);
    assert_eq!(outer.evals, 1 + 1);
}

device_test!(in_place_kernels_are_reported);
/// A kernel run in place (its input's last handle moved into the expression) is profiled
/// like any other launch. Regression: in-place kernels never reached the profiler.
fn in_place_kernels_are_reported(dev: &Device) {
    let x = Array::from_vec_on((0..1000).map(|i| i as f32).collect(), &[1000], dev).unwrap();
    x.eval().unwrap();
    let before = lf::stats().buffers_reused;
    let (_, r) = lf::profile(|| {
        let y = x * 2.0; // `x` moved: its buffer may hold `y`
        y.eval().unwrap();
        let v = y.to_vec::<f32>().unwrap();
        assert_eq!(v[999], 1998.0);
    });
    assert!(
        lf::stats().buffers_reused > before,
        "the kernel did not run in place"
    );
    assert_eq!(r.kernels().len(), 1, "{r}");
    let k = r.kernels()[0];
    assert_eq!(k.bytes, 2 * 1000 * 4, "{r}");
}

/// A JSON value, from the small parser below (enough to check the trace's structure).
#[derive(Clone, Debug, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn str(&self, key: &str) -> &str {
        match self.get(key) {
            Some(Json::Str(s)) => s,
            other => panic!("{key}: not a string: {other:?}"),
        }
    }
    fn num(&self, key: &str) -> f64 {
        match self.get(key) {
            Some(Json::Num(x)) => *x,
            other => panic!("{key}: not a number: {other:?}"),
        }
    }
}

/// Parses one JSON document (RFC 8259), panicking on malformed input or trailing text.
fn parse_json(text: &str) -> Json {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && b" \t\n\r".contains(&self.s[self.i]) {
                self.i += 1;
            }
        }
        fn eat(&mut self, c: u8) {
            self.ws();
            assert_eq!(
                self.s.get(self.i),
                Some(&c),
                "expected {:?} at {}",
                c as char,
                self.i
            );
            self.i += 1;
        }
        fn lit(&mut self, word: &str, v: Json) -> Json {
            assert!(
                self.s[self.i..].starts_with(word.as_bytes()),
                "bad literal at {}",
                self.i
            );
            self.i += word.len();
            v
        }
        fn string(&mut self) -> String {
            self.eat(b'"');
            let mut out = String::new();
            loop {
                let c = *self.s.get(self.i).expect("unterminated string");
                self.i += 1;
                match c {
                    b'"' => return out,
                    b'\\' => {
                        let e = self.s[self.i];
                        self.i += 1;
                        match e {
                            b'"' => out.push('"'),
                            b'\\' => out.push('\\'),
                            b'/' => out.push('/'),
                            b'n' => out.push('\n'),
                            b'r' => out.push('\r'),
                            b't' => out.push('\t'),
                            b'b' => out.push('\u{8}'),
                            b'f' => out.push('\u{c}'),
                            b'u' => {
                                let h = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
                                self.i += 4;
                                out.push(
                                    char::from_u32(u32::from_str_radix(h, 16).unwrap()).unwrap(),
                                );
                            }
                            _ => panic!("bad escape at {}", self.i),
                        }
                    }
                    c if c < 0x20 => panic!("raw control character in a string at {}", self.i),
                    _ => {
                        // copy one UTF-8 sequence
                        let start = self.i - 1;
                        let len = match c {
                            0x00..=0x7f => 1,
                            0xc0..=0xdf => 2,
                            0xe0..=0xef => 3,
                            _ => 4,
                        };
                        self.i = start + len;
                        out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap());
                    }
                }
            }
        }
        fn value(&mut self) -> Json {
            self.ws();
            match self.s.get(self.i).copied().expect("unexpected end") {
                b'{' => {
                    self.i += 1;
                    let mut m = Vec::new();
                    self.ws();
                    if self.s[self.i] == b'}' {
                        self.i += 1;
                        return Json::Obj(m);
                    }
                    loop {
                        let k = self.string();
                        self.eat(b':');
                        m.push((k, self.value()));
                        self.ws();
                        self.i += 1;
                        match self.s[self.i - 1] {
                            b',' => continue,
                            b'}' => return Json::Obj(m),
                            c => panic!("expected , or }} at {}, got {:?}", self.i, c as char),
                        }
                    }
                }
                b'[' => {
                    self.i += 1;
                    let mut v = Vec::new();
                    self.ws();
                    if self.s[self.i] == b']' {
                        self.i += 1;
                        return Json::Arr(v);
                    }
                    loop {
                        v.push(self.value());
                        self.ws();
                        self.i += 1;
                        match self.s[self.i - 1] {
                            b',' => continue,
                            b']' => return Json::Arr(v),
                            c => panic!("expected , or ] at {}, got {:?}", self.i, c as char),
                        }
                    }
                }
                b'"' => Json::Str(self.string()),
                b't' => self.lit("true", Json::Bool(true)),
                b'f' => self.lit("false", Json::Bool(false)),
                b'n' => self.lit("null", Json::Null),
                _ => {
                    let start = self.i;
                    while self.i < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.i]) {
                        self.i += 1;
                    }
                    let t = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                    Json::Num(t.parse().unwrap_or_else(|_| panic!("bad number {t:?}")))
                }
            }
        }
    }
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value();
    p.ws();
    assert_eq!(p.i, text.len(), "trailing text after the JSON value");
    v
}

device_test!(chrome_trace_holds_one_event_per_entry);
fn chrome_trace_holds_one_event_per_entry(dev: &Device) {
    let x = Array::linspace_on(0.0, 1.0, 4096, DType::F32, dev);
    let ((), mut report) = lf::profile(|| {
        let y = (&x * 3.0).sin() + 1.0;
        let z = lf::fft::fft(&y, -1).abs();
        let _ = z.to_vec::<f32>().unwrap();
    });
    // a name and detail that need escaping, and a note
    let mut odd = report.entries[0].clone();
    odd.name = "quote \" backslash \\ tab \t".into();
    odd.detail = "line\nbreak \u{1} µs".into();
    report.entries.push(odd);
    report.notes.push("a \"note\"".into());
    let trace = parse_json(&report.to_chrome_trace());
    let Some(Json::Arr(events)) = trace.get("traceEvents") else {
        panic!("no traceEvents array");
    };
    let complete: Vec<&Json> = events
        .iter()
        .filter(|e| matches!(e.get("ph"), Some(Json::Str(p)) if p == "X"))
        .collect();
    assert_eq!(
        complete.len(),
        report.entries.len(),
        "one X event per entry"
    );
    // the kernels fuse into the transform's passes where the generated passes run it
    let generated = lf::debug::fft_runs_generated(&lf::fft::fft(&x, -1)).unwrap();
    assert!(report.kernels().is_empty() == generated && report.library_calls().len() == 1);
    let wall_us = report.wall.as_nanos() as f64 / 1e3;
    for (ev, e) in complete.iter().zip(&report.entries) {
        assert_eq!(ev.str("name"), e.name);
        assert_eq!(ev.str("cat"), e.kind.label());
        let args = ev.get("args").expect("args");
        assert_eq!(args.str("kind"), e.kind.label());
        assert_eq!(args.str("detail"), e.detail);
        assert_eq!(args.num("bytes"), e.bytes as f64);
        let (ts, dur) = (ev.num("ts"), ev.num("dur"));
        let us = |d: std::time::Duration| d.as_nanos() as f64 / 1e3;
        assert!(
            (dur - us(e.time)).abs() <= 1e-3,
            "dur {dur} vs {:?}",
            e.time
        );
        assert!((ts - us(e.start)).abs() <= 1e-3, "ts {ts} vs {:?}", e.start);
        assert!(
            ts >= 0.0 && ts <= wall_us,
            "ts {ts} outside the stretch of {wall_us} us"
        );
        let tid = ev.num("tid");
        let device_timed = e.timing == lf::Timing::DeviceEvents;
        assert_eq!(tid, if device_timed { 2.0 } else { 1.0 });
    }
    // every kernel and the FFT are there by name
    let names: Vec<&str> = complete.iter().map(|e| e.str("name")).collect();
    for e in report.kernels().iter().chain(report.library_calls().iter()) {
        assert!(names.contains(&e.name.as_str()), "{} missing", e.name);
    }
    let other = trace.get("otherData").expect("otherData");
    assert_eq!(other.num("evals"), report.evals as f64);
    assert_eq!(
        other.get("notes"),
        Some(&Json::Arr(
            report.notes.iter().map(|n| Json::Str(n.clone())).collect()
        ))
    );
    // the track names
    let meta: Vec<&str> = events
        .iter()
        .filter(|e| matches!(e.get("ph"), Some(Json::Str(p)) if p == "M"))
        .map(|e| e.get("args").expect("args").str("name"))
        .collect();
    assert_eq!(meta, ["lazyfuse", "host", "device"]);
}

device_test!(nested_profiles_place_inner_entries_in_the_outer_stretch);
fn nested_profiles_place_inner_entries_in_the_outer_stretch(dev: &Device) {
    let x = Array::linspace_on(0.0, 1.0, 2048, DType::F64, dev);
    let (inner, outer) = lf::profile(|| {
        (&x * 2.0).exp().eval().unwrap();
        dev.synchronize().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let ((), inner) = lf::profile(|| (&x + 1.0).sqrt().eval().unwrap());
        inner
    });
    assert!(!inner.entries.is_empty());
    // the inner entries come last in the outer report, shifted by when the inner
    // stretch began (after the 2 ms pause)
    let copied = &outer.entries[outer.entries.len() - inner.entries.len()..];
    for (o, i) in copied.iter().zip(&inner.entries) {
        assert_eq!((o.kind, &o.name, &o.detail), (i.kind, &i.name, &i.detail));
        assert!(
            o.start >= i.start + std::time::Duration::from_millis(2),
            "{:?} vs {:?}",
            o.start,
            i.start
        );
        assert!(
            o.start <= outer.wall,
            "{:?} after the outer wall {:?}",
            o.start,
            outer.wall
        );
    }
    let first = &outer.entries[0];
    assert!(first.start <= copied[0].start);
}

device_test!(a_summary_folds_repeated_evals_into_one_row_per_step);
fn a_summary_folds_repeated_evals_into_one_row_per_step(dev: &Device) {
    let x = Array::linspace_on(0.0, 1.0, 10_007, DType::F32, dev);
    x.eval().unwrap();
    let ((), report) = lf::profile(|| {
        for k in 1..=20 {
            ((&x * (k as f64 + 0.5)).sin() + 1.0).eval().unwrap();
        }
    });
    let s = report.summary();
    assert_eq!(s.evals, report.evals);
    // every entry lands in exactly one row
    let entries = report.entries.len();
    assert_eq!(s.rows.iter().map(|r| r.count).sum::<usize>(), entries);
    let kernels = report.kernels();
    assert_eq!(kernels.len(), 20);
    let row = s
        .rows
        .iter()
        .find(|r| r.kind == EntryKind::Kernel)
        .expect("a kernel row");
    assert_eq!(row.count, 20, "{s}");
    assert_eq!(row.name, kernels[0].name);
    let total: std::time::Duration = kernels.iter().map(|e| e.time).sum();
    assert_eq!(row.total, total);
    assert_eq!(row.min, kernels.iter().map(|e| e.time).min().unwrap());
    assert_eq!(row.max, kernels.iter().map(|e| e.time).max().unwrap());
    assert!(row.min <= row.mean() && row.mean() <= row.max);
    assert_eq!(row.bytes, kernels.iter().map(|e| e.bytes).sum::<u64>());
    // plans fold by their cache outcome
    let plans: usize = s
        .rows
        .iter()
        .filter(|r| r.kind == EntryKind::Plan)
        .map(|r| r.count)
        .sum();
    assert_eq!(plans, report.of_kind(EntryKind::Plan).count());
    let hits = report
        .of_kind(EntryKind::Plan)
        .filter(|e| e.plan_cache_hit == Some(true))
        .count();
    if hits > 0 {
        let hit_row = s.rows.iter().find(|r| r.name == "plan (hit)").unwrap();
        assert_eq!(hit_row.count, hits);
    }
    // longest total first
    assert!(s.rows.windows(2).all(|w| w[0].total >= w[1].total));
    let text = s.to_string();
    assert!(
        text.contains("lazyfuse profile summary: 20 eval(s)"),
        "{text}"
    );
    assert!(text.contains(&row.name), "{text}");
}

/// The child of [`the_summary_mode_prints_one_folded_table_per_thread`].
#[test]
#[ignore = "run as a child process by the_summary_mode_prints_one_folded_table_per_thread"]
fn summary_mode_child() {
    if std::env::var("LAZYFUSE_SUMMARY_CHILD").is_err() {
        return;
    }
    let x = Array::linspace(0.0, 1.0, 4099, DType::F32);
    for k in 0..30 {
        let v: Vec<f32> = ((&x + k as f64) * 2.0).to_vec().unwrap();
        assert_eq!(v.len(), 4099);
    }
    // taken on demand: the calls so far, then folding starts over
    let s = lf::profile_summary().expect("a summary under LAZYFUSE_PROFILE=summary");
    println!("CHILD evals {}", s.evals);
    for k in 0..7 {
        (&x * k as f64).eval().unwrap();
    }
    // the rest is printed to stderr when this thread ends
}

#[test]
fn the_summary_mode_prints_one_folded_table_per_thread() {
    let exe = std::env::current_exe().expect("test binary path");
    let r = std::process::Command::new(exe)
        .args(["summary_mode_child", "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env("LAZYFUSE_SUMMARY_CHILD", "1")
        .env("LAZYFUSE_PROFILE", "summary")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stdout}\n{stderr}");
    // 30 readbacks: each evaluates once
    assert!(stdout.contains("CHILD evals 30"), "{stdout}");
    // no per-call tables, one summary of the 7 later evaluations
    assert!(!stderr.contains("lazyfuse profile:"), "{stderr}");
    assert_eq!(
        stderr.matches("lazyfuse profile summary:").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("lazyfuse profile summary: 7 eval(s)"),
        "{stderr}"
    );
}
