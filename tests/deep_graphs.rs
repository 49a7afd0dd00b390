//! Deep DAGs plan and evaluate without exhausting the stack: long elementwise chains (on a
//! spawned thread's default 2 MiB stack and, 100,000 ops deep, on the test thread), long
//! chains of views, and a matmul operand behind a long chain of transposes, each checked
//! against plain Rust loops.
//!
//! Chains of views that take scalar arguments per view (flip, roll, slice, pad, reshapes
//! of permuted data) are left out: a few hundred of them exceed the kernel argument limit
//! before depth matters.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};

/// The start values of the elementwise chains.
const START: [f64; 2] = [0.5, 1.0];

/// `ops` alternating `x * 1.0001` and `x + 0.001` over `START` on `dev`.
fn alternating_chain(dev: &Device, ops: usize) -> Array {
    let mut x = Array::from_vec_on(START.to_vec(), &[2], dev).expect("from_vec_on");
    for i in 0..ops {
        x = if i % 2 == 0 { &x * 1.0001 } else { &x + 0.001 };
    }
    x
}

/// The same recurrence as [`alternating_chain`] in plain f64.
fn alternating_reference(ops: usize) -> Vec<f64> {
    START
        .iter()
        .map(|&v0| {
            let mut v = v0;
            for i in 0..ops {
                v = if i % 2 == 0 { v * 1.0001 } else { v + 0.001 };
            }
            v
        })
        .collect()
}

/// Checks shape and dtype, then every value within `rel` relative error of `want`.
fn assert_values(x: &Array, shape: &[usize], want: &[f64], rel: f64, what: &str) {
    assert_eq!(x.shape(), shape, "{what}: shape");
    assert_eq!(x.dtype(), DType::F64, "{what}: dtype");
    let got = x
        .to_vec::<f64>()
        .unwrap_or_else(|e| panic!("{what}: evaluation failed: {e}"));
    assert_eq!(got.len(), want.len(), "{what}: element count");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs(),
            "{what}: element {k} is {g}, expected {w} (relative tolerance {rel})"
        );
    }
}

/// Runs `body` on a freshly spawned thread with the default stack size, propagating its
/// panic; the thread starts in `dev`'s default-device scope like the test thread.
fn on_spawned_thread(dev: &Device, body: impl FnOnce(&Device) + Send + 'static) {
    let dev = dev.clone();
    let r = std::thread::spawn(move || lf::with_default_device(&dev, || body(&dev))).join();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}

device_test!(chain_of_2500_ops_on_a_default_stack);
fn chain_of_2500_ops_on_a_default_stack(dev: &Device) {
    const OPS: usize = 2_500;
    on_spawned_thread(dev, |dev| {
        let x = alternating_chain(dev, OPS);
        assert_values(
            &x,
            &[2],
            &alternating_reference(OPS),
            1e-12,
            "2,500-op chain on a spawned thread",
        );
    });
}

device_test!(chain_of_100000_ops_on_the_test_thread);
fn chain_of_100000_ops_on_the_test_thread(dev: &Device) {
    // The chain splits into kernels of a few hundred ops each (kernel argument limit).
    // Where each is compiled (CUDA, or the CPU with LAZYFUSE_NVRTC_CHECK=1 as in CI),
    // 10^5 ops take minutes, so those runs check a tenth of the depth (still several
    // times the depth that overflowed the stack before lowering was iterative).
    let compiled = dev.is_cuda() || std::env::var("LAZYFUSE_NVRTC_CHECK").is_ok_and(|v| v == "1");
    let ops: usize = if compiled { 10_000 } else { 100_000 };
    let x = alternating_chain(dev, ops);
    let start = std::time::Instant::now();
    let kernels = lf::debug::kernel_count(&[&x]).expect("planning a 100,000-op chain");
    eprintln!(
        "planned the {ops}-op chain on {dev} in {:?} ({kernels} kernel(s))",
        start.elapsed()
    );
    assert_values(
        &x,
        &[2],
        &alternating_reference(ops),
        1e-12,
        "100,000-op chain",
    );
}

/// Row-major `[rows, cols]` test data: element `(i, j)` is `i * cols + j`.
fn iota_matrix(rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols).map(|v| v as f64).collect()
}

/// The transpose of row-major `[rows, cols]` data.
fn transposed(v: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; v.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = v[i * cols + j];
        }
    }
    t
}

device_test!(chain_of_3001_transposes_on_a_default_stack);
fn chain_of_3001_transposes_on_a_default_stack(dev: &Device) {
    const VIEWS: usize = 3_001; // odd: the result is transposed
    on_spawned_thread(dev, |dev| {
        let data = iota_matrix(2, 3);
        let mut x = Array::from_vec_on(data.clone(), &[2, 3], dev).expect("from_vec_on");
        for _ in 0..VIEWS {
            x = x.transpose();
        }
        assert_values(
            &x,
            &[3, 2],
            &transposed(&data, 2, 3),
            0.0,
            "3,001 transposes",
        );
    });
}

device_test!(chain_of_3000_reshapes_on_a_default_stack);
fn chain_of_3000_reshapes_on_a_default_stack(dev: &Device) {
    const VIEWS: usize = 3_000;
    on_spawned_thread(dev, |dev| {
        let data = iota_matrix(2, 3);
        let mut x = Array::from_vec_on(data.clone(), &[2, 3], dev).expect("from_vec_on");
        for i in 0..VIEWS {
            x = if i % 2 == 0 {
                x.reshape(&[6])
            } else {
                x.reshape(&[3, 2])
            };
        }
        assert_values(&x, &[3, 2], &data, 0.0, "3,000 reshapes");
    });
}

device_test!(transposes_between_3000_elementwise_ops_on_a_default_stack);
fn transposes_between_3000_elementwise_ops_on_a_default_stack(dev: &Device) {
    const STEPS: usize = 3_000;
    let (rows, cols) = (2, 3);
    on_spawned_thread(dev, move |dev| {
        let data = iota_matrix(rows, cols);
        let mut x = Array::from_vec_on(data.clone(), &[rows, cols], dev).expect("from_vec_on");
        // reference: row-major data of the current shape
        let (mut want, mut shape) = (data, [rows, cols]);
        for i in 0..STEPS {
            if i % 2 == 0 {
                x = x.transpose();
                want = transposed(&want, shape[0], shape[1]);
                shape = [shape[1], shape[0]];
            } else {
                x = &x * 1.0001 + 0.001;
                want.iter_mut().for_each(|v| *v = *v * 1.0001 + 0.001);
            }
        }
        assert_values(
            &x,
            &shape,
            &want,
            1e-12,
            "transposes between elementwise ops",
        );
    });
}

device_test!(matmul_operand_behind_100000_transposes_on_a_default_stack);
fn matmul_operand_behind_100000_transposes_on_a_default_stack(dev: &Device) {
    const VIEWS: usize = 100_000;
    let (m, k, n) = (2, 3, 4);
    on_spawned_thread(dev, move |dev| {
        let a_data = iota_matrix(m, k);
        let b_data: Vec<f64> = iota_matrix(k, n).iter().map(|v| v * 0.5 - 1.0).collect();
        let a = Array::from_vec_on(a_data.clone(), &[m, k], dev).expect("from_vec_on");
        let b = Array::from_vec_on(b_data.clone(), &[k, n], dev).expect("from_vec_on");
        // an even number of transposes: the operand is `a` itself, read in place
        let mut at = a.clone();
        for _ in 0..VIEWS {
            at = at.transpose();
        }
        let c = at.matmul(&b);
        let want: Vec<f64> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                (0..k).map(|l| a_data[i * k + l] * b_data[l * n + j]).sum()
            })
            .collect();
        assert_values(
            &c,
            &[m, n],
            &want,
            1e-12,
            "matmul behind 100,000 transposes",
        );
    });
}

device_test!(wide_concatenations_and_view_chains_split_within_the_argument_limit);
/// Many parts and long view chains past the kernel argument limit plan and give NumPy's
/// values (regression: "kernel arguments of N bytes cannot be split" for concatenations of
/// 150 or more arrays, about 200 chained transpose/roll/flip views, 100 pad/slice pairs).
fn wide_concatenations_and_view_chains_split_within_the_argument_limit(dev: &Device) {
    // 1,000 arrays of two elements each, concatenated
    let n = 1000;
    let parts: Vec<Array> = (0..n)
        .map(|i| Array::from_vec_on(vec![i as f64, i as f64 + 0.5], &[2], dev).unwrap())
        .collect();
    let refs: Vec<&Array> = parts.iter().collect();
    let c = lf::concatenate(&refs, 0);
    let want: Vec<f64> = (0..n).flat_map(|i| [i as f64, i as f64 + 0.5]).collect();
    assert_values(&c, &[2 * n], &want, 0.0, "concatenate of 1,000 arrays");
    // 300 arrays stacked
    let s = lf::stack(&refs[..300], 0);
    assert_values(&s, &[300, 2], &want[..600], 0.0, "stack of 300 arrays");

    // 300 chained views on a [3, 4] matrix: transpose, flip, roll in turn
    let (r, k) = (3usize, 4usize);
    let base = iota_matrix(r, k);
    let mut x = Array::from_vec_on(base.clone(), &[r, k], dev).unwrap();
    let mut host = ndarray::Array2::from_shape_vec((r, k), base).unwrap();
    for step in 0..300 {
        match step % 3 {
            0 => {
                x = x.transpose();
                host = host.t().to_owned();
            }
            1 => {
                x = x.flip(0);
                host = host.slice(ndarray::s![..;-1, ..]).to_owned();
            }
            _ => {
                x = x.roll(1, 1);
                let cols = host.ncols();
                host = ndarray::Array2::from_shape_fn(host.dim(), |(i, j)| {
                    host[(i, (j + cols - 1) % cols)]
                });
            }
        }
    }
    let shape = host.shape().to_vec();
    let want: Vec<f64> = host.iter().copied().collect();
    assert_values(&x, &shape, &want, 0.0, "300 chained views");

    // 100 pad/slice pairs: the identity, 100 guards deep
    let v: Vec<f64> = (0..7).map(|i| i as f64 * 1.5).collect();
    let mut y = Array::from_vec_on(v.clone(), &[7], dev).unwrap();
    for _ in 0..100 {
        y = y.pad(&[(1, 1)], -1.0).slice(lf::s![1..8]);
    }
    assert_values(&y, &[7], &v, 0.0, "100 pad/slice pairs");
}

device_test!(chain_of_1500_transcendentals_is_split_for_the_compiler);
/// A deep chain of transcendental functions under `where` (guarded branches nest one level
/// per step) is cut into kernels of at most 64 transcendental functions each: NVRTC's time
/// grows faster than their number, and a single kernel of this chain did not compile in 5
/// minutes. Values against the same loop in f64 on the host.
fn chain_of_1500_transcendentals_is_split_for_the_compiler(dev: &Device) {
    const LEVELS: usize = 750;
    on_spawned_thread(dev, |dev| {
        let base = [0.5f64, -0.5, 2.0, 0.0, 1e-3];
        let x = Array::from_slice_on(&base, &[5], dev).unwrap();
        let mut y = x.clone();
        for _ in 0..LEVELS {
            y = lf::where_(&x.gt(0.0), y.exp().sin(), 0.25);
        }
        let kernels = lf::debug::kernel_count(&[&y]).unwrap();
        assert!(
            kernels >= 2 * LEVELS / 64,
            "{kernels} kernels for {} transcendental functions",
            2 * LEVELS
        );
        let want: Vec<f64> = base
            .iter()
            .map(|&b| {
                let mut v = b;
                for _ in 0..LEVELS {
                    v = if b > 0.0 { v.exp().sin() } else { 0.25 };
                }
                v
            })
            .collect();
        assert_values(&y, &[5], &want, 1e-9, "1,500 transcendentals");
    });
}
