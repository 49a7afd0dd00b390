//! CUDA backend tests: transfers of every dtype, hand-built kernels against host math, the
//! in-memory and on-disk kernel caches, concurrent use. They need a GPU: without one they
//! pass trivially, unless `LAZYFUSE_TEST_CUDA=1`, which makes a missing GPU a failure.
#![cfg(feature = "cuda")]

use lazyfuse::Device;
use lazyfuse_codegen::{BinaryOp, Builder, DType, HostBuf, Inst, Kernel, LaunchArgs, Scalar};
use num_complex::{Complex32, Complex64};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Once};

/// Stats are process-global: the tests of this file run one at a time so that counter
/// deltas belong to the test reading them.
static SERIAL: Mutex<()> = Mutex::new(());

/// This process's kernel cache directory (fresh per run).
fn cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("lazyfuse-cuda-test-cache-{}", std::process::id()))
}

/// The serialization guard and CUDA device 0, or `None` (skip) when there is no GPU.
fn gpu() -> Option<(MutexGuard<'static, ()>, Device)> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        // The device reads the variable once, when first opened, which happens below
        // (while every other test of this file waits on SERIAL).
        let _ = std::fs::remove_dir_all(cache_dir());
        std::env::set_var("LAZYFUSE_CACHE_DIR", cache_dir());
    });
    match Device::cuda(0) {
        Ok(d) => Some((guard, d)),
        Err(e) => {
            if std::env::var("LAZYFUSE_TEST_CUDA").is_ok_and(|v| v == "1") {
                panic!("LAZYFUSE_TEST_CUDA=1 but CUDA device 0 cannot be opened: {e}");
            }
            eprintln!("no GPU, test skipped: {e}");
            None
        }
    }
}

macro_rules! cuda_or_skip {
    ($guard:ident, $d:ident) => {
        let Some(($guard, dev)) = gpu() else {
            return;
        };
        let Device::Cuda($d) = dev else {
            unreachable!("Device::cuda returned a CPU device")
        };
    };
}

fn samples(dtype: DType, n: usize) -> HostBuf {
    let specials = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        5e-324,
        1e300,
    ];
    let f = |i: usize| {
        if i < specials.len() {
            specials[i]
        } else {
            i as f64 * 0.37 - 1000.0
        }
    };
    match dtype {
        DType::Bool => HostBuf::Bool((0..n).map(|i| i % 3 == 0).collect()),
        DType::I32 => HostBuf::I32((0..n).map(|i| (i as i32).wrapping_mul(-7919)).collect()),
        DType::I64 => HostBuf::I64(
            (0..n)
                .map(|i| (i as i64) * 1_000_000_007 - (1 << 40))
                .collect(),
        ),
        DType::F32 => HostBuf::F32((0..n).map(|i| f(i) as f32).collect()),
        DType::F64 => HostBuf::F64((0..n).map(f).collect()),
        DType::C64 => HostBuf::C64(
            (0..n)
                .map(|i| Complex32::new(f(i) as f32, -(i as f32)))
                .collect(),
        ),
        DType::C128 => HostBuf::C128(
            (0..n)
                .map(|i| Complex64::new(f(i), 0.5 - i as f64))
                .collect(),
        ),
        DType::U8 => HostBuf::U8((0..n).map(|i| (i * 37) as u8).collect()),
        DType::U16 => HostBuf::U16((0..n).map(|i| (i * 7919) as u16).collect()),
        DType::U32 => HostBuf::U32(
            (0..n)
                .map(|i| (i as u32).wrapping_mul(2_654_435_761))
                .collect(),
        ),
        DType::U64 => HostBuf::U64(
            (0..n)
                .map(|i| u64::MAX - i as u64 * 1_000_000_007)
                .collect(),
        ),
        DType::I8 => HostBuf::I8((0..n).map(|i| (i * 37) as i8).collect()),
        DType::I16 => HostBuf::I16((0..n).map(|i| (i * 7919) as i16).collect()),
        DType::F16 => HostBuf::F16((0..n).map(|i| half::f16::from_f64(f(i))).collect()),
        DType::BF16 => HostBuf::BF16((0..n).map(|i| half::bf16::from_f64(f(i))).collect()),
    }
}

#[test]
fn round_trip_every_dtype_and_partial_ranges() {
    cuda_or_skip!(_g, d);
    for dtype in DType::ALL {
        for n in [0usize, 1, 7, 1000, (3 << 20) + 5] {
            let h = samples(dtype, n);
            let b = d.upload(&h).unwrap();
            assert_eq!((b.dtype(), b.len()), (dtype, n));
            let back = d.download(&b, 0, n).unwrap();
            assert_eq!(back.dtype(), dtype);
            assert!(back.as_bytes() == h.as_bytes(), "{dtype} n={n}");
            if n >= 7 {
                let (start, len) = (2, n - 5);
                let part = d.download(&b, start, len).unwrap();
                let s = dtype.size();
                assert!(
                    part.as_bytes() == &h.as_bytes()[start * s..(start + len) * s],
                    "{dtype} n={n}"
                );
                assert_eq!(d.download(&b, n, 0).unwrap().len(), 0);
            }
            assert!(d.download(&b, n, 1).is_err());
            assert!(d.download(&b, usize::MAX, 2).is_err());
        }
    }
}

#[test]
fn download_larger_than_the_staging_buffer() {
    cuda_or_skip!(_g, d);
    let n = (80 << 20) / 8 + 3; // > 64 MiB of f64: several staging chunks
    let h = samples(DType::F64, n);
    let b = d.upload(&h).unwrap();
    assert!(d.download(&b, 0, n).unwrap().as_bytes() == h.as_bytes());
    let tail = d.download(&b, n - 10, 10).unwrap();
    assert!(tail.as_bytes() == &h.as_bytes()[(n - 10) * 8..]);
}

/// `out = in0 <op> in1` over a 1-D launch, both inputs read at the linear index.
fn binary_kernel(op: BinaryOp, dtype: DType) -> Kernel {
    let mut b = Builder::new(1);
    let x = b.input(dtype);
    let y = b.input(dtype);
    let i = b.push(Inst::Index, DType::I64);
    let a = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        dtype,
    );
    let c = b.push(
        Inst::Load {
            input: y,
            index: i,
            guard: None,
        },
        dtype,
    );
    let s = b.binary(op, a, c);
    b.store(s);
    let k = b.finish();
    k.validate().unwrap();
    k
}

fn f32s(h: &HostBuf) -> &[f32] {
    match h {
        HostBuf::F32(v) => v,
        other => panic!("expected F32, got {}", other.dtype()),
    }
}

fn args(n: usize) -> LaunchArgs {
    LaunchArgs {
        shape: vec![n].into(),
        params: Default::default(),
    }
}

#[test]
fn add_kernel_matches_host_math() {
    cuda_or_skip!(_g, d);
    let k = binary_kernel(BinaryOp::Add, DType::F32);
    for n in [1usize, 31, 1000, (1 << 20) + 3, 5 << 20] {
        let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
        let b: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * -1.25).collect();
        let ba = d.upload(&HostBuf::F32(a.clone())).unwrap();
        let bb = d.upload(&HostBuf::F32(b.clone())).unwrap();
        let outs = d.run_kernel(&k, &[&ba, &bb], &args(n)).unwrap();
        assert_eq!(outs.len(), 1);
        assert_eq!((outs[0].dtype(), outs[0].len()), (DType::F32, n));
        let got = d.download(&outs[0], 0, n).unwrap();
        for (i, g) in f32s(&got).iter().enumerate() {
            assert_eq!(g.to_bits(), (a[i] + b[i]).to_bits(), "n={n} i={i}");
        }
    }
}

#[test]
fn scalar_param_and_rank2_launch() {
    cuda_or_skip!(_g, d);
    // out[i] = x[i] * p over a 2-D launch shape.
    let mut b = Builder::new(2);
    let x = b.input(DType::F64);
    let p = b.param(DType::F64);
    let i = b.push(Inst::Index, DType::I64);
    let v = b.push(
        Inst::Load {
            input: x,
            index: i,
            guard: None,
        },
        DType::F64,
    );
    let m = b.binary(BinaryOp::Mul, v, p);
    b.store(m);
    let k = b.finish();
    k.validate().unwrap();
    let (rows, cols) = (37, 1001);
    let h: Vec<f64> = (0..rows * cols).map(|i| i as f64 - 5.0).collect();
    let bx = d.upload(&HostBuf::F64(h.clone())).unwrap();
    for scale in [2.5, -0.125] {
        let la = LaunchArgs {
            shape: vec![rows, cols].into(),
            params: vec![Scalar::F64(scale)].into(),
        };
        let out = d.run_kernel(&k, &[&bx], &la).unwrap();
        let HostBuf::F64(got) = d.download(&out[0], 0, rows * cols).unwrap() else {
            panic!("dtype")
        };
        for (g, x) in got.iter().zip(&h) {
            assert_eq!(*g, x * scale);
        }
    }
}

#[test]
fn memory_cache_hit_on_second_run() {
    cuda_or_skip!(_g, d);
    let k = binary_kernel(BinaryOp::Mul, DType::F32);
    let n = 4096;
    let a = d.upload(&HostBuf::F32(vec![3.0; n])).unwrap();
    let s0 = lazyfuse::stats();
    let first = d.run_kernel(&k, &[&a, &a], &args(n)).unwrap();
    let s1 = lazyfuse::stats();
    assert_eq!(
        (s1.kernels_compiled - s0.kernels_compiled) + (s1.disk_cache_hits - s0.disk_cache_hits),
        1,
        "first run compiles or loads from disk"
    );
    assert_eq!(s1.buffers_allocated - s0.buffers_allocated, 1);
    let second = d.run_kernel(&k, &[&a, &a], &args(n / 2)).unwrap();
    let s2 = lazyfuse::stats();
    assert_eq!(s2.kernel_cache_hits - s1.kernel_cache_hits, 1);
    assert_eq!(s2.kernels_compiled, s1.kernels_compiled);
    assert_eq!(s2.disk_cache_hits, s1.disk_cache_hits);
    assert!(f32s(&d.download(&first[0], 0, n).unwrap())
        .iter()
        .all(|&v| v == 9.0));
    assert!(f32s(&d.download(&second[0], 0, n / 2).unwrap())
        .iter()
        .all(|&v| v == 9.0));
}

#[test]
fn empty_launch_allocates_without_compiling() {
    cuda_or_skip!(_g, d);
    let k = binary_kernel(BinaryOp::Hypot, DType::F32);
    let e = d.upload(&HostBuf::F32(vec![])).unwrap();
    let s0 = lazyfuse::stats();
    let outs = d.run_kernel(&k, &[&e, &e], &args(0)).unwrap();
    let s1 = lazyfuse::stats();
    assert_eq!((outs.len(), outs[0].len()), (1, 0));
    assert_eq!(s1.kernels_compiled, s0.kernels_compiled);
    assert_eq!(d.download(&outs[0], 0, 0).unwrap().len(), 0);
    // A wrong input count or dtype is an error, not a launch.
    assert!(d.run_kernel(&k, &[&e], &args(0)).is_err());
    let i = d.upload(&HostBuf::I32(vec![1])).unwrap();
    assert!(d.run_kernel(&k, &[&i, &i], &args(1)).is_err());
}

fn lfk_files() -> Vec<PathBuf> {
    std::fs::read_dir(cache_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "lfk"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn disk_cache_hit_and_corrupt_file_recovery() {
    cuda_or_skip!(_g, d);
    assert_eq!(d.cache_dir(), Some(cache_dir().as_path()));
    let k = binary_kernel(BinaryOp::Sub, DType::F64);
    let n = 1000;
    let a = d
        .upload(&HostBuf::F64((0..n).map(|i| i as f64).collect()))
        .unwrap();
    let b = d.upload(&HostBuf::F64(vec![0.5; n])).unwrap();
    let run = || {
        let out = d.run_kernel(&k, &[&a, &b], &args(n)).unwrap();
        let HostBuf::F64(v) = d.download(&out[0], 0, n).unwrap() else {
            panic!("dtype")
        };
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as f64 - 0.5));
    };
    let delta = |f: &dyn Fn()| {
        let s0 = lazyfuse::stats();
        f();
        let s1 = lazyfuse::stats();
        (
            s1.kernels_compiled - s0.kernels_compiled,
            s1.disk_cache_hits - s0.disk_cache_hits,
        )
    };

    d.clear_kernel_cache();
    let before = lfk_files().len();
    assert_eq!(delta(&run), (1, 0), "fresh cache dir: compiled");
    assert_eq!(lfk_files().len(), before + 1, "image written to disk");

    d.clear_kernel_cache();
    assert_eq!(
        delta(&run),
        (0, 1),
        "second process-level load comes from disk"
    );

    for f in lfk_files() {
        std::fs::write(&f, b"corrupt").unwrap();
    }
    d.clear_kernel_cache();
    assert_eq!(
        delta(&run),
        (1, 0),
        "corrupt file ignored, kernel recompiled"
    );
    d.clear_kernel_cache();
    assert_eq!(delta(&run), (0, 1), "rewritten file is used");
}

#[test]
fn concurrent_launches_and_downloads() {
    cuda_or_skip!(_g, d);
    let k = binary_kernel(BinaryOp::Add, DType::F32);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (d, k) = (&d, &k);
            s.spawn(move || {
                for r in 0..20 {
                    let n = 1000 + 37 * t + r;
                    let a: Vec<f32> = (0..n).map(|i| (i + t) as f32).collect();
                    let ba = d.upload(&HostBuf::F32(a.clone())).unwrap();
                    let out = d.run_kernel(k, &[&ba, &ba], &args(n)).unwrap();
                    let got = d.download(&out[0], 0, n).unwrap();
                    assert!(f32s(&got).iter().zip(&a).all(|(g, x)| *g == 2.0 * x));
                }
            });
        }
    });
    d.synchronize().unwrap();
}

#[test]
fn buffers_outlive_queued_work() {
    cuda_or_skip!(_g, d);
    // Inputs dropped right after the launch is queued: the stream-ordered free must come
    // after the kernel that reads them.
    let k = binary_kernel(BinaryOp::Add, DType::F32);
    let n = 4 << 20;
    let out = {
        let a = d.upload(&HostBuf::F32(vec![1.5; n])).unwrap();
        let b = d.upload(&HostBuf::F32(vec![2.0; n])).unwrap();
        d.run_kernel(&k, &[&a, &b], &args(n)).unwrap()
    };
    // Reuse the freed memory immediately.
    let c = d.upload(&HostBuf::F32(vec![-100.0; n])).unwrap();
    assert!(f32s(&d.download(&out[0], 0, n).unwrap())
        .iter()
        .all(|&v| v == 3.5));
    assert!(f32s(&d.download(&c, 0, n).unwrap())
        .iter()
        .all(|&v| v == -100.0));
}

/// Host cost of one cached launch (run with `--ignored --nocapture`): no assertion beyond a
/// generous bound, the number is printed.
#[test]
#[ignore]
fn launch_overhead() {
    cuda_or_skip!(_g, d);
    let k = binary_kernel(BinaryOp::Add, DType::F32);
    let n = 1024;
    let a = d.upload(&HostBuf::F32(vec![1.0; n])).unwrap();
    drop(d.run_kernel(&k, &[&a, &a], &args(n)).unwrap());
    d.synchronize().unwrap();
    let iters = 20_000;
    let t0 = std::time::Instant::now();
    for _ in 0..iters {
        drop(d.run_kernel(&k, &[&a, &a], &args(n)).unwrap());
    }
    let host = t0.elapsed();
    d.synchronize().unwrap();
    let total = t0.elapsed();
    let t1 = std::time::Instant::now();
    for _ in 0..1000 {
        let _ = d.download(&a, 5, 1).unwrap();
    }
    let item = t1.elapsed() / 1000;
    println!(
        "run_kernel: {:.2} us/launch on the host, {:.2} us/launch with the GPU; 1-element download {:.2?}",
        host.as_secs_f64() * 1e6 / iters as f64,
        total.as_secs_f64() * 1e6 / iters as f64,
        item
    );
    assert!(host.as_secs_f64() / (iters as f64) < 100e-6);
}
