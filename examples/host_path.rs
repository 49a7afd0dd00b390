//! Host-path probe: the cached 10-op expression on one element, evaluated in a loop
//! (`host_path N eval|build|function|add [cpu|cuda]`), for `perf stat`, `perf record` and
//! valgrind's instruction counts; on CUDA the loop ends with a synchronize. Prints the
//! driver calls (`lf::debug::driver_calls`) of one warm call of each kind first.
use lazyfuse as lf;
use lf::Array;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;
static TRACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
thread_local! { static IN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) }; }
fn trace() {
    if TRACE.load(Relaxed) && !IN.with(|c| c.replace(true)) {
        let bt = std::backtrace::Backtrace::force_capture().to_string();
        let frames: Vec<&str> = bt
            .lines()
            .filter(|l| l.contains("lazyfuse") && !l.contains("at "))
            .take(3)
            .collect();
        eprintln!("ALLOC {}", frames.join(" <- "));
        IN.with(|c| c.set(false));
    }
}
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        trace();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;
fn main() -> lf::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200000);
    let mode = args.next().unwrap_or_else(|| "all".into());
    let dev = match args.next().as_deref() {
        Some("cuda") => lf::Device::cuda(0)?,
        _ => lf::Device::Cpu,
    };
    let a = Array::from_vec_on(vec![1.5f32], &[1], &dev)?;
    let b = Array::from_vec_on(vec![2.5f32], &[1], &dev)?;
    let ten =
        |a: &Array, b: &Array| ((((a + b) * 2.0 - 1.0).sin() * b).exp() + a).sqrt().abs() * 3.0 - b;
    let f = lf::Function::trace(&[&a, &b], move |xs: &[Array]| vec![ten(&xs[0], &xs[1])])?;
    for _ in 0..1000 {
        ten(&a, &b).eval()?;
        f.call(&[&a, &b])?;
    }
    let c0 = ALLOCS.load(Relaxed);
    TRACE.store(std::env::var("TRACE").is_ok_and(|v| v == "build"), Relaxed);
    let x = ten(&a, &b);
    TRACE.store(false, Relaxed);
    let c1 = ALLOCS.load(Relaxed);
    TRACE.store(std::env::var("TRACE").is_ok_and(|v| v == "eval"), Relaxed);
    x.eval()?;
    drop(x);
    TRACE.store(false, Relaxed);
    let c2 = ALLOCS.load(Relaxed);
    TRACE.store(
        std::env::var("TRACE").is_ok_and(|v| v == "function"),
        Relaxed,
    );
    f.call(&[&a, &b])?;
    TRACE.store(false, Relaxed);
    let c3 = ALLOCS.load(Relaxed);
    println!(
        "allocs: build {} eval {} function {}",
        c1 - c0,
        c2 - c1,
        c3 - c2
    );
    // driver calls of one warm call of each kind (results dropped inside, as in the loops)
    for (what, calls) in [
        ("eval", lf::debug::driver_calls(|| ten(&a, &b).eval()).1),
        ("add", lf::debug::driver_calls(|| (&a + &b).eval()).1),
        (
            "function",
            lf::debug::driver_calls(|| f.call(&[&a, &b]).map(drop)).1,
        ),
    ] {
        print!("{what}: {calls}");
    }
    let per = |t: std::time::Instant| -> lf::Result<f64> {
        dev.synchronize()?;
        Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
    };
    if mode == "all" || mode == "eval" {
        let t = std::time::Instant::now();
        for _ in 0..n {
            ten(&a, &b).eval()?;
        }
        println!("eval {:.2} us", per(t)?);
    }
    if mode == "all" || mode == "add" {
        let t = std::time::Instant::now();
        for _ in 0..n {
            (&a + &b).eval()?;
        }
        println!("add {:.2} us", per(t)?);
    }
    if mode == "all" || mode == "build" {
        let t = std::time::Instant::now();
        for _ in 0..n {
            let _ = ten(&a, &b);
        }
        println!("build {:.2} us", per(t)?);
    }
    if mode == "all" || mode == "function" {
        let t = std::time::Instant::now();
        for _ in 0..n {
            f.call(&[&a, &b])?;
        }
        println!("function {:.2} us", per(t)?);
    }
    Ok(())
}
