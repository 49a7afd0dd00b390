//! NVTX ranges end to end: a child process of this test evaluates on every device with
//! `NVTX_INJECTION64_PATH` naming a mock tool (`examples/nvtx_probe.rs`, which logs each
//! push, pop and mark); the names and their nesting are checked here. Without the variable
//! nothing is loaded, and a tool that cannot attach leaves no ranges and one debug line.
//!
//! The tool is looked for at `<dir of this binary>/../examples/`, where cargo puts examples
//! next to `deps/` (`cargo test` builds it; `cargo test --test nvtx` alone needs `cargo build
//! --example nvtx_probe` first), or at the path in `LAZYFUSE_NVTX_PROBE`.

mod common;

use lazyfuse as lf;
use lf::{Array, DType};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Set in the child process: the log the probe and the child write to.
const CHILD_LOG: &str = "LAZYFUSE_NVTX_CHILD_LOG";
/// Set in the child process: a tool to name in NVTX_INJECTION64_PATH only after the first
/// evaluation, too late to be loaded.
const LATE_TOOL: &str = "LAZYFUSE_NVTX_LATE_TOOL";

/// The workload of the child: each kind of step once per device, separated by notes.
#[test]
fn child() {
    let Some(log) = std::env::var_os(CHILD_LOG) else {
        return; // not the child: nothing to do
    };
    let note = |s: &str| {
        let mut f = std::fs::File::options()
            .append(true)
            .create(true)
            .open(&log)
            .expect("the child's log");
        writeln!(f, "- note {s}").expect("a note");
    };
    if let Some(tool) = std::env::var_os(LATE_TOOL) {
        Array::arange(0.0, 8.0, 1.0, DType::F32)
            .exp()
            .eval()
            .unwrap();
        // only the test thread runs here (`--test-threads=1`) and no other thread reads the
        // environment meanwhile
        std::env::set_var("NVTX_INJECTION64_PATH", tool);
    }
    // every device in this one process: the parent reads one log for all of them
    for dev in common::devices() {
        lf::with_default_device(&dev, || {
            note(&format!("device {dev}"));
            let x = Array::from_vec((0..64).map(|i| i as f32 / 64.0).collect(), &[64]).unwrap();
            let y = (&x * 2.0).sin() + 1.0;
            y.eval().unwrap();
            let (a, b) = (x.cos(), x.exp());
            lf::eval(&[&a, &b]).unwrap();
            lf::fft::fft(&x.astype(DType::C64), 0).abs().eval().unwrap();
            let m = Array::from_vec(vec![1.0f32; 16], &[4, 4]).unwrap();
            m.matmul(&(&m + 1.0)).eval().unwrap();
            let f = lf::Function::trace(&[&x], |a| vec![(&a[0] * 3.0).tanh()]).unwrap();
            f.call(&[&x]).unwrap();
            assert_eq!(y.to_vec::<f32>().unwrap().len(), 64);
            dev.synchronize().unwrap();
            note("end");
        });
    }
}

/// The mock tool's library.
fn probe() -> PathBuf {
    let p = match std::env::var_os("LAZYFUSE_NVTX_PROBE") {
        Some(p) => PathBuf::from(p),
        None => {
            let exe = std::env::current_exe().expect("the test binary's path");
            let name = format!(
                "{}nvtx_probe{}",
                std::env::consts::DLL_PREFIX,
                std::env::consts::DLL_SUFFIX
            );
            exe.parent()
                .and_then(Path::parent)
                .map(|d| d.join("examples").join(name))
                .expect("the test binary lies in a directory")
        }
    };
    assert!(
        p.is_file(),
        "the mock NVTX tool {} is missing: `cargo test` builds it, or build it with \
         `cargo build --example nvtx_probe` (same profile), or name it in LAZYFUSE_NVTX_PROBE",
        p.display()
    );
    p
}

/// A fresh log path for one child run.
fn log_path(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("lazyfuse-nvtx-{}-{tag}.log", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// Runs the child workload with `env` set (and NVTX_INJECTION64_PATH removed unless `env`
/// sets it); fails when the child fails.
fn run_child(log: &Path, env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD_LOG, log)
        .env("NVTX_PROBE_LOG", log)
        .env_remove("NVTX_INJECTION64_PATH")
        .env_remove("NVTX_PROBE_FAIL")
        .env_remove(LATE_TOOL)
        .env_remove("LAZYFUSE_DEBUG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the child process starts");
    assert!(
        out.status.success(),
        "child failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One closed range of the log: its name, the ranges opened inside it and its marks.
#[derive(Debug, Default)]
struct Range {
    name: String,
    children: Vec<Range>,
    marks: Vec<String>,
}

impl Range {
    /// This range and every range inside it.
    fn walk(&self) -> Vec<&Range> {
        let mut v = vec![self];
        for c in &self.children {
            v.extend(c.walk());
        }
        v
    }
    fn child(&self, name: &str) -> Option<&Range> {
        self.children.iter().find(|c| c.name == name)
    }
    fn has_kernel(&self) -> bool {
        self.walk().iter().any(|r| is_kernel_name(&r.name))
    }
}

/// `lf_` (or `lf_fft_`, `lf_fftf_`) and 16 hex digits, then optional `_i32` and `_s` suffixes.
fn is_kernel_name(s: &str) -> bool {
    // elementwise and reduction kernels `lf_<hash>`, generated FFT passes `lf_fft_<hash>`
    // and passes with fused work `lf_fftf_<hash>`
    let Some(rest) = ["lf_fftf_", "lf_fft_", "lf_"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
    else {
        return false;
    };
    let (hex, suffix) = rest.split_at(rest.len().min(16));
    hex.len() == 16
        && hex.chars().all(|c| c.is_ascii_hexdigit())
        && ["", "_i32", "_s", "_i32_s"].contains(&suffix)
}

/// The sections of the log, one per device note: the device's name and its top-level
/// ranges in order (over all threads), checking that pushes and pops balance per thread.
fn sections(log: &str) -> Vec<(String, Vec<Range>)> {
    let mut out: Vec<(String, Vec<Range>)> = Vec::new();
    let mut stacks: HashMap<String, Vec<Range>> = HashMap::new();
    for line in log.lines().filter(|l| !l.starts_with("init")) {
        let (thread, rest) = line.split_once(' ').expect("a thread tag");
        let (what, name) = rest.split_once(' ').unwrap_or((rest, ""));
        if what == "note" {
            assert!(
                stacks.values().all(|s| s.is_empty()),
                "ranges open at `{name}`:\n{log}"
            );
            if let Some(dev) = name.strip_prefix("device ") {
                out.push((dev.to_string(), Vec::new()));
            }
            continue;
        }
        let stack = stacks.entry(thread.to_string()).or_default();
        match what {
            "push" => stack.push(Range {
                name: name.to_string(),
                ..Range::default()
            }),
            "pop" => {
                let r = stack
                    .pop()
                    .unwrap_or_else(|| panic!("pop of no range:\n{log}"));
                match stack.last_mut() {
                    Some(parent) => parent.children.push(r),
                    None => out.last_mut().expect("a device section").1.push(r),
                }
            }
            "mark" => {
                let parent = stack
                    .last_mut()
                    .unwrap_or_else(|| panic!("mark {name} outside any range:\n{log}"));
                parent.marks.push(name.to_string());
            }
            _ => panic!("unexpected line {line:?}"),
        }
    }
    assert!(
        stacks.values().all(|s| s.is_empty()),
        "unclosed ranges:\n{log}"
    );
    out
}

#[test]
fn ranges_name_every_step_with_a_tool_attached() {
    let log = log_path("on");
    let probe = probe();
    let out = run_child(
        &log,
        &[
            ("NVTX_INJECTION64_PATH", probe.as_os_str()),
            ("LAZYFUSE_DEBUG", "1".as_ref()),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("nvtx:"),
        "the tool attached silently:\n{stderr}"
    );
    let text = std::fs::read_to_string(&log).expect("the probe wrote its log");
    let _ = std::fs::remove_file(&log);
    // the export tables as NVIDIA's headers lay them out
    let init: Vec<&str> = text.lines().filter(|l| l.starts_with("init")).collect();
    assert_eq!(
        init,
        ["init version=3 callbacks=16 sizes=0,16,9,15,7,16,7,0 terminated=yes reserved=null"],
        "{text}"
    );
    let secs = sections(&text);
    let devices: Vec<String> = common::devices().iter().map(|d| d.to_string()).collect();
    assert_eq!(
        secs.iter().map(|s| &s.0).collect::<Vec<_>>(),
        devices.iter().collect::<Vec<_>>(),
        "{text}"
    );
    let mut misses = 0;
    for (dev, roots) in &secs {
        let ctx = || format!("device {dev}:\n{text}");
        let evals: Vec<&Range> = roots.iter().filter(|r| r.name == "lazyfuse.eval").collect();
        // y.eval, lf::eval, the FFT and the matmul (the readback's eval has nothing to do)
        assert!(evals.len() >= 4, "{}", ctx());
        for e in &evals {
            let plan = e.child("lazyfuse.plan");
            assert!(plan.is_some(), "eval without a plan range: {}", ctx());
            misses += plan.map_or(0, |p| p.marks.len());
            for r in e.walk() {
                for m in &r.marks {
                    assert_eq!(m, "lazyfuse.plan cache miss", "{}", ctx());
                    assert_eq!(r.name, "lazyfuse.plan", "{}", ctx());
                }
            }
        }
        // the first eval: plan, then its one fused kernel
        assert!(
            evals[0].has_kernel(),
            "no kernel range in the first eval: {}",
            ctx()
        );
        let all: Vec<&Range> = roots.iter().flat_map(|r| r.walk()).collect();
        assert!(
            evals.iter().any(|e| e
                .walk()
                .iter()
                // "... fused" where the generated passes run the transform with the
                // kernels around it (by measurement on CUDA)
                .any(|r| r.name == "lazyfuse.fft axes=[0]"
                    || r.name == "lazyfuse.fft axes=[0] fused")),
            "no FFT range inside an eval: {}",
            ctx()
        );
        assert!(
            evals.iter().any(|e| e.child("lazyfuse.matmul").is_some()),
            "no matmul range inside an eval: {}",
            ctx()
        );
        let trace = roots.iter().find(|r| r.name == "lazyfuse.trace");
        assert!(
            trace.is_some_and(|t| t.child("lazyfuse.plan").is_some()),
            "Function::trace traces and plans: {}",
            ctx()
        );
        let call = roots
            .iter()
            .find(|r| r.name == "lazyfuse.call")
            .unwrap_or_else(|| panic!("no Function call range: {}", ctx()));
        assert!(call.has_kernel(), "the call launches a kernel: {}", ctx());
        assert!(
            roots.iter().any(|r| r.name == "lazyfuse.readback"),
            "no readback range: {}",
            ctx()
        );
        if dev.starts_with("cuda") {
            for name in ["lazyfuse.upload", "lazyfuse.synchronize"] {
                assert!(roots.iter().any(|r| r.name == name), "no {name}: {}", ctx());
            }
        }
        // nothing but lazyfuse's own names and kernel entry names
        for r in all {
            assert!(
                r.name.starts_with("lazyfuse.") || is_kernel_name(&r.name),
                "unexpected range name {:?}: {}",
                r.name,
                ctx()
            );
        }
    }
    assert!(misses >= 1, "no plan-cache miss was marked:\n{text}");
}

#[test]
fn without_the_variable_nothing_is_loaded() {
    let log = log_path("off");
    run_child(&log, &[]);
    // the child's notes only: nothing answered NVTX calls
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert!(
        text.lines().all(|l| l.starts_with("- note ")),
        "something answered NVTX without the variable:\n{text}"
    );
    // the variable is read once, at the first range: naming the tool later loads nothing
    let log = log_path("late");
    let probe = probe();
    run_child(&log, &[(LATE_TOOL, probe.as_os_str())]);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert!(
        text.lines().all(|l| l.starts_with("- note ")),
        "the tool named after the first range was loaded:\n{text}"
    );
}

#[test]
fn a_tool_that_cannot_attach_leaves_no_ranges() {
    // a library that is not there
    let log = log_path("missing");
    let out = run_child(
        &log,
        &[
            (
                "NVTX_INJECTION64_PATH",
                "/nonexistent/libnvtx_tool.so".as_ref(),
            ),
            ("LAZYFUSE_DEBUG", "1".as_ref()),
        ],
    );
    let _ = std::fs::remove_file(&log);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("nvtx:")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("NVTX_INJECTION64_PATH=/nonexistent/libnvtx_tool.so")
            && lines[0].contains("cannot load"),
        "{stderr}"
    );

    // a tool whose initialization fails after it filled the slots: they must not be called
    let log = log_path("refused");
    let probe = probe();
    let out = run_child(
        &log,
        &[
            ("NVTX_INJECTION64_PATH", probe.as_os_str()),
            ("NVTX_PROBE_FAIL", "1".as_ref()),
            ("LAZYFUSE_DEBUG", "1".as_ref()),
        ],
    );
    let text = std::fs::read_to_string(&log).expect("the probe wrote its log");
    let _ = std::fs::remove_file(&log);
    let tool: Vec<&str> = text.lines().filter(|l| !l.starts_with("- note ")).collect();
    assert_eq!(tool.len(), 2, "{text}");
    assert!(
        tool[0].starts_with("init version=3") && tool[1] == "init refused",
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("nvtx:")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("returned 0"), "{stderr}");
}
