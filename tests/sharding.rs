//! Sharded arrays on device meshes: split and gather, blockwise work, reductions with
//! all-reduce, re-sharding, halo exchanges and distributed FFTs, against ndarray oracles
//! and the unsharded computation on one device.
//!
//! Every body runs on every test device (`device_test!`) over meshes that list
//! that device once and three times, so on the CPU the collectives run between three CPU
//! shards and with `LAZYFUSE_TEST_CUDA=1` the same bodies run on the GPU.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{c64, Array, DType, Device, Mesh, Placement, Sharded};
use ndarray::{ArrayD, Axis, IxDyn, Slice};

/// Axis lengths: empty, one, fewer than a 3-mesh, uneven, and large-ish uneven.
const SIZES: [usize; 5] = [0, 1, 3, 7, 783];

/// Meshes over `d`: one shard, and three (an awkward count).
fn meshes(d: &Device) -> Vec<Mesh> {
    vec![
        Mesh::new(std::slice::from_ref(d)).expect("mesh"),
        Mesh::new(&[d.clone(), d.clone(), d.clone()]).expect("mesh"),
    ]
}

/// Fixed pseudo-random values in [-1, 1) of `shape`: the ndarray oracle and the same data
/// as an F64 array on `dev`.
fn data(shape: &[usize], seed: u64, dev: &Device) -> (ArrayD<f64>, Array) {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = common::xorshift(n, seed)
        .map(|w| (w >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let nd = ArrayD::from_shape_vec(IxDyn(shape), v.clone()).expect("oracle");
    let a = Array::from_vec_on(v, shape, dev).expect("array");
    (nd, a)
}

/// NumPy's `array_split` lengths.
fn split(n: usize, k: usize) -> Vec<usize> {
    (0..k).map(|i| n / k + usize::from(i < n % k)).collect()
}

/// The gathered F64 values of `s`, after checking its shape and dtype.
fn host(s: &Sharded, shape: &[usize], dtype: DType) -> ArrayD<f64> {
    assert_eq!(s.shape(), shape, "{s:?}");
    assert_eq!(s.dtype(), dtype, "{s:?}");
    let g = s.gather().expect("gather");
    assert_eq!(g.shape(), shape);
    assert_eq!(g.device(), s.mesh().devices()[0]);
    g.astype(DType::F64).to_host::<f64>().expect("to_host")
}

/// Checks the blocks of a split array: lengths, devices, and the logical shape.
fn check_blocks(s: &Sharded, axis: usize) {
    assert_eq!(s.placement(), Placement::Split(axis), "{s:?}");
    let k = s.mesh().len();
    let lens: Vec<usize> = s.parts().iter().map(|p| p.shape()[axis]).collect();
    assert_eq!(lens, split(s.shape()[axis], k), "{s:?}");
    for (p, d) in s.parts().iter().zip(s.mesh().devices()) {
        assert_eq!(&p.device(), d);
        for (j, (&a, &b)) in p.shape().iter().zip(s.shape()).enumerate() {
            if j != axis {
                assert_eq!(a, b, "{s:?}");
            }
        }
    }
}

fn assert_close(got: &ArrayD<f64>, want: &ArrayD<f64>, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: {g} vs {w}");
    }
}

/// `numpy.roll(x, shift, axis)`.
fn np_roll(x: &ArrayD<f64>, shift: isize, axis: usize) -> ArrayD<f64> {
    let n = x.shape()[axis];
    if n == 0 {
        return x.clone();
    }
    let s = shift.rem_euclid(n as isize) as usize;
    let mut out = x.clone();
    for i in 0..n {
        out.index_axis_mut(Axis(axis), (i + s) % n)
            .assign(&x.index_axis(Axis(axis), i));
    }
    out
}

/// Shapes with one axis of length `n` at each position, and the axis.
fn shapes_with(n: usize) -> Vec<(Vec<usize>, usize)> {
    vec![
        (vec![n], 0),
        (vec![n, 4], 0),
        (vec![3, n], 1),
        (vec![2, n, 3], 1),
    ]
}

#[test]
fn cuda_count_does_not_panic() {
    let n = Device::cuda_count();
    assert_eq!(n, Device::cuda_count());
    if std::env::var("LAZYFUSE_TEST_CUDA").is_ok_and(|s| s == "1") {
        assert!(n >= 1);
    }
    for i in 0..n {
        assert!(Device::cuda(i).is_ok());
    }
    assert!(Device::cuda(n).is_err());
}

device_test!(mesh_basics_and_empty_mesh_error);
fn mesh_basics_and_empty_mesh_error(d: &Device) {
    let e = Mesh::new(&[]).expect_err("an empty mesh");
    assert!(e.to_string().contains("Mesh::new"), "{e}");
    let m = Mesh::new(&[d.clone(), d.clone()]).expect("mesh");
    assert_eq!(m.len(), 2);
    assert!(!m.is_empty());
    assert_eq!(m.devices(), &[d.clone(), d.clone()]);
    assert_eq!(m.distinct_devices(), vec![d.clone()]);
    assert_ne!(m, Mesh::new(std::slice::from_ref(d)).expect("mesh"));
    m.synchronize().expect("synchronize");
}

device_test!(shard_gather_round_trip_every_axis_and_size);
fn shard_gather_round_trip_every_axis_and_size(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            for shape in [vec![n], vec![n, 5], vec![4, n], vec![2, n, 3]] {
                let (nd, a) = data(&shape, 7, d);
                for axis in 0..shape.len() {
                    let s = a.shard(&mesh, axis as isize).expect("shard");
                    check_blocks(&s, axis);
                    assert_eq!(s.axis(), Some(axis));
                    assert_eq!(host(&s, &shape, DType::F64), nd, "{shape:?} axis {axis}");
                }
                // negative axes count from the end
                let s = a.shard(&mesh, -1).expect("shard");
                check_blocks(&s, shape.len() - 1);
            }
        }
    }
}

device_test!(shard_keeps_dtype_and_gathers_to_any_device);
fn shard_keeps_dtype_and_gathers_to_any_device(d: &Device) {
    let mesh = Mesh::new(&[d.clone(), d.clone(), d.clone()]).expect("mesh");
    let v: Vec<i32> = (0..14).collect();
    let a = Array::from_vec_on(v.clone(), &[7, 2], d).expect("array");
    let s = a.shard(&mesh, 0).expect("shard");
    assert_eq!(s.dtype(), DType::I32);
    let on_cpu = s.gather_to(&Device::cpu()).expect("gather");
    assert_eq!(on_cpu.device(), Device::cpu());
    assert_eq!(on_cpu.to_vec::<i32>().expect("to_vec"), v);
    let c = s.astype(DType::C128).expect("astype");
    assert_eq!(c.dtype(), DType::C128);
    let back = c.gather().expect("gather").to_vec::<c64>().expect("to_vec");
    assert!(back
        .iter()
        .zip(&v)
        .all(|(z, &x)| *z == c64::new(x as f64, 0.0)));
}

device_test!(shard_errors_name_the_operation_and_shape);
fn shard_errors_name_the_operation_and_shape(d: &Device) {
    let mesh = Mesh::new(&[d.clone(), d.clone()]).expect("mesh");
    let s = Array::scalar(1.0f32).shard(&mesh, 0).expect_err("0-d");
    assert!(s.to_string().contains("shard"), "{s}");
    let (_, a) = data(&[3, 4], 1, d);
    for axis in [2, -3, 17] {
        let e = a.shard(&mesh, axis).expect_err("bad axis");
        let m = e.to_string();
        assert!(m.contains("shard") && m.contains("[3, 4]"), "{m}");
    }
    let x = a.shard(&mesh, 0).expect("shard");
    assert!(x.reshard(5).is_err());
    assert!(x.roll(1, 2).is_err());
    assert!(x.sum_axes(&[2], false).is_err());
    assert!(x.fftn(&[3]).is_err());
    assert!(x.fftn(&[]).is_err());
}

device_test!(map_zip_and_operators_match_the_unsharded_chain);
fn map_zip_and_operators_match_the_unsharded_chain(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            for (shape, axis) in shapes_with(n) {
                let (_, a) = data(&shape, 11, d);
                let (_, b) = data(&shape, 12, d);
                let want = ((&a * &b + a.sin()) * 2.0 - 1.0) / (b.square() + 1.0);
                let want = (-want).to_host::<f64>().expect("want");
                let x = a.shard(&mesh, axis as isize).expect("shard");
                let y = b.shard(&mesh, axis as isize).expect("shard");
                let sin = x.map(|p| p.sin()).expect("map");
                let num = (&x * &y + &sin) * 2.0 - 1.0;
                let den = y.map(|p| p.square()).expect("map") + 1.0;
                let z = -(num / den);
                check_blocks(&z, axis);
                assert_close(&host(&z, &shape, DType::F64), &want, 1e-12, "chain");
                let w = x.zip(&y, |p, q| p.maximum(q)).expect("zip");
                let want = a.maximum(&b).to_host::<f64>().expect("want");
                assert_eq!(host(&w, &shape, DType::F64), want);
                let f = x.astype(DType::F32).expect("astype") * 3.0;
                let want = (a.astype(DType::F32) * 3.0).astype(DType::F64);
                assert_eq!(host(&f, &shape, DType::F32), want.to_host::<f64>().unwrap());
            }
        }
    }
}

device_test!(blockwise_chain_is_one_fused_kernel_per_block);
fn blockwise_chain_is_one_fused_kernel_per_block(d: &Device) {
    for mesh in meshes(d) {
        let (_, a) = data(&[7, 9], 3, d);
        let (_, b) = data(&[7, 9], 4, d);
        let x = a.shard(&mesh, 0).expect("shard");
        let y = b.shard(&mesh, 0).expect("shard");
        x.eval().expect("eval");
        y.eval().expect("eval");
        assert!(x.parts().iter().all(|p| p.is_evaluated()));
        let z = (&x * &y + x.map(|p| p.exp()).expect("map")) * 0.5 - &y;
        for p in z.parts() {
            let kernels = lf::debug::kernel_count(&[p]).expect("plan");
            assert_eq!(kernels, 1, "one fused kernel per block");
        }
        // evaluated together, blocks of one shape on one device may share a
        // multi-output kernel; blocks on different devices never do
        let parts: Vec<&Array> = z.parts().iter().collect();
        let kernels = lf::debug::kernel_count(&parts).expect("plan");
        assert!((1..=mesh.len()).contains(&kernels), "{kernels} kernels");
        let (_, report) = lf::profile(|| z.eval().expect("eval"));
        assert_eq!(report.kernels().len(), kernels);
        let per = report.per_device();
        assert_eq!(per.len(), 1, "{per:?}");
        assert_eq!(per[0].0, *d);
        assert_eq!(per[0].2, kernels);
        assert!(z.parts().iter().all(|p| p.is_evaluated()));
        // several sharded arrays in one plan
        let u = &x + 1.0;
        let v = &y * &x;
        lf::shard::eval(&[&u, &v]).expect("eval");
        assert!(u.parts().iter().chain(v.parts()).all(|p| p.is_evaluated()));
    }
}

device_test!(mismatched_meshes_axes_and_shapes_are_errors);
fn mismatched_meshes_axes_and_shapes_are_errors(d: &Device) {
    let m2 = Mesh::new(&[d.clone(), d.clone()]).expect("mesh");
    let m3 = Mesh::new(&[d.clone(), d.clone(), d.clone()]).expect("mesh");
    let (_, a) = data(&[6, 4], 5, d);
    let x0 = a.shard(&m3, 0).expect("shard");
    let x1 = a.shard(&m3, 1).expect("shard");
    let y0 = a.shard(&m2, 0).expect("shard");
    let e = x0.zip(&x1, |p, q| p + q).expect_err("axes differ");
    assert!(e.to_string().contains("zip"), "{e}");
    let e = x0.zip(&y0, |p, q| p + q).expect_err("meshes differ");
    assert!(e.to_string().contains("different meshes"), "{e}");
    let (_, b) = data(&[6, 5], 5, d);
    let z = b.shard(&m3, 0).expect("shard");
    assert!(x0.zip(&z, |p, q| p + q).is_err());
    assert!(x0.like(&b).is_err());
    // work that changes the split axis belongs to the sharded methods, not `map`
    let e = x0
        .map(|p| p.sum_axes(&[0], false))
        .expect_err("map reduces the split axis");
    assert!(e.to_string().contains("split axis"), "{e}");
    assert!(x0.map(|p| p.transpose()).is_err());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| &x0 + &x1));
    assert!(
        r.is_err(),
        "an operator between different placements panics"
    );
    // blocks on the wrong devices or of the wrong lengths
    let parts = vec![a.slice(lf::s![0..2, ..]), a.slice(lf::s![2..6, ..])];
    assert!(Sharded::from_parts(&m2, parts, 0).is_err());
    let parts = vec![a.slice(lf::s![0..3, ..]), a.slice(lf::s![3..6, ..])];
    let s = Sharded::from_parts(&m2, parts, 0).expect("from_parts");
    assert_eq!(s.shape(), &[6, 4]);
    assert!(Sharded::from_parts(&m3, s.clone().into_parts(), 0).is_err());
}

device_test!(reductions_over_the_split_axis_all_reduce_and_others_stay_local);
fn reductions_over_the_split_axis_all_reduce_and_others_stay_local(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            let shape = [n, 3, 2];
            let (nd, a) = data(&shape, 21, d);
            let s = a.shard(&mesh, 0).expect("shard");
            // over the split axis: replicated, the same values on every device
            for keep in [false, true] {
                let r = s.sum_axes(&[0], keep).expect("sum");
                assert_eq!(r.placement(), Placement::Replicated);
                let mut want = nd.sum_axis(Axis(0));
                if keep {
                    want.insert_axis_inplace(Axis(0));
                }
                assert_close(&host(&r, want.shape(), DType::F64), &want, 1e-12, "sum 0");
                for (p, dev) in r.parts().iter().zip(mesh.devices()) {
                    assert_eq!(&p.device(), dev);
                    assert_close(&p.to_host::<f64>().unwrap(), &want, 1e-12, "replica");
                }
            }
            let e = s.sum_axes(&[3], false).expect_err("bad axis").to_string();
            assert!(
                e.contains("sum_axes") && e.contains(&format!("{shape:?}")),
                "{e}"
            );
            let total = s.sum().expect("sum");
            assert_eq!(total.shape(), &[] as &[usize]);
            let t = total.gather().unwrap().item::<f64>().unwrap();
            assert!((t - nd.sum()).abs() < 1e-9, "{t} vs {}", nd.sum());
            if n > 0 {
                let m = s.mean_axes(&[0, 2], false).expect("mean");
                let want = nd.mean_axis(Axis(2)).unwrap().mean_axis(Axis(0)).unwrap();
                assert_close(&host(&m, &[3], DType::F64), &want, 1e-12, "mean");
                let mx = s
                    .max()
                    .expect("max")
                    .gather()
                    .unwrap()
                    .item::<f64>()
                    .unwrap();
                assert_eq!(mx, nd.iter().cloned().fold(f64::MIN, f64::max));
                let mn = s.min_axes(&[0], false).expect("min");
                let want = nd.map_axis(Axis(0), |l| l.iter().cloned().fold(f64::MAX, f64::min));
                assert_eq!(host(&mn, &[3, 2], DType::F64), want);
                let mean = s
                    .mean()
                    .expect("mean")
                    .gather()
                    .unwrap()
                    .item::<f64>()
                    .unwrap();
                assert!((mean - nd.mean().unwrap()).abs() < 1e-12);
                let mx = s.max_axes(&[0, 1], true).expect("max");
                assert_eq!(mx.placement(), Placement::Replicated);
                let want = nd
                    .map_axis(Axis(0), |l| l.iter().cloned().fold(f64::MIN, f64::max))
                    .map_axis(Axis(0), |l| l.iter().cloned().fold(f64::MIN, f64::max))
                    .into_shape_with_order(IxDyn(&[1, 1, 2]))
                    .unwrap();
                assert_eq!(host(&mx, &[1, 1, 2], DType::F64), want);
                let p = s.map(|x| x * 0.5 + 1.0).unwrap().prod_axes(&[0], false);
                let want = nd.map(|x| x * 0.5 + 1.0).map_axis(Axis(0), |l| l.product());
                assert_close(
                    &host(&p.unwrap(), &[3, 2], DType::F64),
                    &want,
                    1e-12,
                    "prod",
                );
            }
            // over other axes: still split, renumbered without keepdims
            let r = s.sum_axes(&[1], false).expect("sum");
            check_blocks(&r, 0);
            let want = nd.sum_axis(Axis(1));
            assert_close(&host(&r, &[n, 2], DType::F64), &want, 1e-12, "sum 1");
            let t = a.shard(&mesh, 2).expect("shard").mean_axes(&[0, 1], false);
            let t = t.expect("mean");
            check_blocks(&t, 0);
            assert_eq!(t.shape(), &[2]);
            let t = a.shard(&mesh, 2).unwrap().sum_axes(&[1], true).unwrap();
            check_blocks(&t, 2);
            assert_eq!(t.shape(), &[n, 1, 2]);
        }
        // integer sums accumulate in I64; an integer mean is F64
        let v: Vec<i32> = (0..10).collect();
        let a = Array::from_vec_on(v, &[10], d).unwrap();
        let s = a.shard(&mesh, 0).unwrap();
        let t = s.sum().unwrap();
        assert_eq!(t.dtype(), DType::I64);
        assert_eq!(t.gather().unwrap().item::<i64>().unwrap(), 45);
        let m = s.mean().unwrap();
        assert_eq!(m.dtype(), a.mean().dtype());
        assert_eq!(m.gather().unwrap().item::<f64>().unwrap(), 4.5);
    }
}

device_test!(reshard_moves_the_split_and_keeps_the_values);
fn reshard_moves_the_split_and_keeps_the_values(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            for shape in [vec![n, 5], vec![6, n], vec![2, n, 3]] {
                let (nd, a) = data(&shape, 31, d);
                for from in 0..shape.len() {
                    let s = a.shard(&mesh, from as isize).unwrap();
                    for to in 0..shape.len() {
                        let r = s.reshard(to as isize).expect("reshard");
                        check_blocks(&r, to);
                        assert_eq!(host(&r, &shape, DType::F64), nd, "{from}->{to}");
                    }
                    let rep = s.replicated().expect("all-gather");
                    assert_eq!(rep.placement(), Placement::Replicated);
                    for p in rep.parts() {
                        assert_eq!(p.to_host::<f64>().unwrap(), nd);
                    }
                    let back = rep.reshard(from as isize).unwrap();
                    check_blocks(&back, from);
                    assert_eq!(host(&back, &shape, DType::F64), nd);
                }
            }
        }
    }
}

device_test!(roll_across_block_edges_matches_numpy);
fn roll_across_block_edges_matches_numpy(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            for (shape, axis) in shapes_with(n) {
                let (nd, a) = data(&shape, 41, d);
                let s = a.shard(&mesh, axis as isize).unwrap();
                let nn = n as isize;
                for shift in [0, 1, -1, 2, -3, 5, nn, -nn, nn + 2, -2 * nn - 1, 1000] {
                    let r = s.roll(shift, axis as isize).expect("roll");
                    check_blocks(&r, axis);
                    let want = np_roll(&nd, shift, axis);
                    assert_eq!(host(&r, &shape, DType::F64), want, "shift {shift}");
                }
                // along a local axis
                let other = (axis + 1) % shape.len();
                let r = s.roll(-2, other as isize).unwrap();
                check_blocks(&r, axis);
                assert_eq!(host(&r, &shape, DType::F64), np_roll(&nd, -2, other));
            }
        }
    }
}

device_test!(each_rolled_block_is_one_kernel);
fn each_rolled_block_is_one_kernel(d: &Device) {
    let mesh = Mesh::new(&[d.clone(), d.clone(), d.clone()]).unwrap();
    let (nd, a) = data(&[30, 2], 43, d);
    let s = a.shard(&mesh, 0).unwrap();
    s.eval().unwrap();
    let r = s.roll(3, 0).unwrap();
    // each output block: one kernel reading the slices of its input blocks
    for p in r.parts() {
        assert_eq!(lf::debug::kernel_count(&[p]).unwrap(), 1);
    }
    assert_eq!(host(&r, &[30, 2], DType::F64), np_roll(&nd, 3, 0));
}

device_test!(slice_and_pad_along_the_split_axis);
fn slice_and_pad_along_the_split_axis(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            let shape = [n, 3];
            let (nd, a) = data(&shape, 51, d);
            let s = a.shard(&mesh, 0).unwrap();
            for (lo, hi) in [
                (0, n),
                (1, n),
                (0, n / 2),
                (n / 3, n - n / 3),
                (2, 1),
                (0, 9999),
            ] {
                let r = s.slice_axis(0, lo, hi).expect("slice_axis");
                let (lo, hi) = (lo.min(n), hi.min(n).max(lo.min(n)));
                let want = nd.slice_axis(Axis(0), Slice::from(lo..hi)).to_owned();
                check_blocks(&r, 0);
                assert_eq!(host(&r, &[hi - lo, 3], DType::F64), want, "{lo}..{hi}");
            }
            let r = s.slice_axis(1, 1, 3).unwrap();
            check_blocks(&r, 0);
            let want = nd.slice_axis(Axis(1), Slice::from(1..3)).to_owned();
            assert_eq!(host(&r, &[n, 2], DType::F64), want);
            let p = s.pad(&[(2, 5), (1, 0)], 7.5).expect("pad");
            check_blocks(&p, 0);
            let want = a.pad(&[(2, 5), (1, 0)], 7.5).to_host::<f64>().unwrap();
            assert_eq!(host(&p, &[n + 7, 4], DType::F64), want);
            let p = s.pad(&[(0, 0), (2, 2)], -1.0).unwrap();
            assert_eq!(
                host(&p, &[n, 7], DType::F64),
                a.pad(&[(0, 0), (2, 2)], -1.0).to_host::<f64>().unwrap()
            );
            assert!(s.pad(&[(1, 1), (1, 1), (1, 1)], 0.0).is_err());
        }
    }
}

/// The complex values of an array, as (re, im) pairs in f64.
fn complex(a: &Array) -> Vec<c64> {
    a.astype(DType::C128).to_vec::<c64>().expect("to_vec")
}

fn assert_spectra_close(got: &Sharded, want: &Array, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    assert_eq!(got.dtype(), want.dtype(), "{what}");
    let g = complex(&got.gather().unwrap());
    let w = complex(want);
    let err = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).norm_sqr())
        .sum::<f64>()
        .sqrt();
    let norm = w.iter().map(|b| b.norm_sqr()).sum::<f64>().sqrt();
    assert!(
        err <= tol * norm.max(1.0),
        "{what}: error {err:.3e}, norm {norm:.3e}"
    );
}

device_test!(fft2_and_ifft2_match_the_unsharded_transform);
fn fft2_and_ifft2_match_the_unsharded_transform(d: &Device) {
    for mesh in meshes(d) {
        for shape in [[7, 5], [1, 3], [3, 16], [783, 4], [2, 1]] {
            for dtype in [DType::F64, DType::F32, DType::C64] {
                let (_, a) = data(&shape, 61, d);
                let a = a.astype(dtype);
                let tol = if dtype == DType::F64 { 1e-12 } else { 1e-5 };
                let want = lf::fft::fft2(&a);
                for axis in [0, 1] {
                    let s = a.shard(&mesh, axis).unwrap();
                    let f = s.fft2().expect("fft2");
                    check_blocks(&f, 1 - axis as usize);
                    assert_spectra_close(&f, &want, tol, &format!("fft2 {shape:?}"));
                    let back = f.ifft2().expect("ifft2");
                    check_blocks(&back, axis as usize);
                    let round = lf::fft::ifft2(&want);
                    assert_spectra_close(&back, &round, tol, "ifft2");
                }
            }
        }
    }
}

device_test!(fftn_over_any_axes_of_a_sharded_3d_array);
fn fftn_over_any_axes_of_a_sharded_3d_array(d: &Device) {
    for mesh in meshes(d) {
        let shape = [5, 7, 4];
        let (_, a) = data(&shape, 71, d);
        for axes in [vec![0, 1, 2], vec![0, 2], vec![1], vec![-1, -2], vec![1, 1]] {
            let want = lf::fft::fftn(&a, &axes);
            let iwant = lf::fft::ifftn(&a, &axes);
            for axis in 0..3 {
                let s = a.shard(&mesh, axis).unwrap();
                let f = s.fftn(&axes).expect("fftn");
                assert_spectra_close(&f, &want, 1e-12, &format!("fftn {axes:?} split {axis}"));
                let i = s.ifftn(&axes).expect("ifftn");
                assert_spectra_close(&i, &iwant, 1e-12, &format!("ifftn {axes:?}"));
                let ax = f.axis().expect("split");
                check_blocks(&f, ax);
                let norm: Vec<usize> = axes.iter().map(|&k| k.rem_euclid(3) as usize).collect();
                if norm.contains(&(axis as usize)) {
                    assert_ne!(ax, axis as usize, "the split axis moved off");
                } else {
                    assert_eq!(ax, axis as usize, "local transforms keep the split");
                }
            }
        }
        // 1-D: transformed whole on one device, split again
        let (_, v) = data(&[10], 72, d);
        let f = v.shard(&mesh, 0).unwrap().fftn(&[0]).unwrap();
        check_blocks(&f, 0);
        assert_spectra_close(&f, &lf::fft::fft(&v, 0), 1e-12, "1-d");
        assert!(v.shard(&mesh, 0).unwrap().fft2().is_err());
        // an empty transformed axis is an error, as in NumPy
        let (_, e) = data(&[0, 3], 73, d);
        assert!(e.shard(&mesh, 1).unwrap().fft2().is_err());
    }
}

device_test!(replicated_arrays_work_blockwise);
fn replicated_arrays_work_blockwise(d: &Device) {
    let mesh = Mesh::new(&[d.clone(), d.clone(), d.clone()]).unwrap();
    let (nd, a) = data(&[4, 6], 81, d);
    let r = a.replicate(&mesh).expect("broadcast");
    assert_eq!(r.placement(), Placement::Replicated);
    assert_eq!(r.axis(), None);
    let y = (&r * 2.0).sum_axes(&[1], false).unwrap();
    assert_eq!(y.placement(), Placement::Replicated);
    let want = nd.sum_axis(Axis(1)) * 2.0;
    assert_close(&host(&y, &[4], DType::F64), &want, 1e-12, "replicated sum");
    let s = r.reshard(1).unwrap();
    check_blocks(&s, 1);
    assert_eq!(host(&s, &[4, 6], DType::F64), nd);
    let f = r.fft2().unwrap();
    assert_eq!(f.placement(), Placement::Replicated);
    assert_spectra_close(&f, &lf::fft::fft2(&a), 1e-12, "replicated fft2");
    let like = r.like(&a).unwrap();
    assert_eq!(like.placement(), Placement::Replicated);
    let split = a.shard(&mesh, 1).unwrap();
    let m = split.like(&(&a * 3.0)).unwrap();
    let z = &split * &m;
    assert_close(
        &host(&z, &[4, 6], DType::F64),
        &(&nd * &nd * 3.0),
        1e-12,
        "like",
    );
}

/// A mesh over every test device, each listed more than once (`[cpu, cpu, cpu]` on the CPU
/// alone; `[cpu, cuda:0, cpu]` and so on with `LAZYFUSE_TEST_CUDA=1`, where every
/// collective then copies between devices).
#[test]
fn mixed_mesh_over_every_test_device() {
    let all = common::devices();
    let devices: Vec<Device> = (0..3).map(|i| all[i % all.len()].clone()).collect();
    let mesh = Mesh::new(&devices).expect("mesh");
    let home = &devices[0];
    let (nd, a) = data(&[7, 6], 91, home);
    let s = a.shard(&mesh, 0).expect("shard");
    check_blocks(&s, 0);
    assert_eq!(host(&s, &[7, 6], DType::F64), nd);
    for d in &all {
        let g = s.gather_to(d).expect("gather_to");
        assert_eq!(&g.device(), d);
        assert_eq!(g.to_host::<f64>().unwrap(), nd);
    }
    let z = (&s * 2.0 + 1.0).roll(3, 0).expect("roll");
    check_blocks(&z, 0);
    assert_close(
        &host(&z, &[7, 6], DType::F64),
        &np_roll(&(&nd * 2.0 + 1.0), 3, 0),
        1e-12,
        "roll",
    );
    let r = s.reshard(1).expect("reshard");
    check_blocks(&r, 1);
    assert_eq!(host(&r, &[7, 6], DType::F64), nd);
    let t = s.sum_axes(&[0], false).expect("sum");
    for (p, d) in t.parts().iter().zip(&devices) {
        assert_eq!(&p.device(), d);
        assert_close(
            &p.to_host::<f64>().unwrap(),
            &nd.sum_axis(Axis(0)),
            1e-12,
            "sum",
        );
    }
    let f = s.fft2().expect("fft2");
    check_blocks(&f, 1);
    assert_spectra_close(&f, &lf::fft::fft2(&a), 1e-12, "fft2");
    let p = s.pad(&[(2, 1), (0, 0)], 0.5).expect("pad");
    assert_eq!(
        host(&p, &[10, 6], DType::F64),
        a.pad(&[(2, 1), (0, 0)], 0.5).to_host::<f64>().unwrap()
    );
}

device_test!(permute_and_transpose_move_the_split_axis_with_the_data);
fn permute_and_transpose_move_the_split_axis_with_the_data(d: &Device) {
    for mesh in meshes(d) {
        for n in SIZES {
            let shape = [2, n, 3];
            let (nd, a) = data(&shape, 95, d);
            let s = a.shard(&mesh, 1).unwrap();
            let p = s.permute(&[2, 0, 1]).expect("permute");
            check_blocks(&p, 2);
            let want = nd.clone().permuted_axes(IxDyn(&[2, 0, 1]));
            assert_eq!(host(&p, &[3, 2, n], DType::F64), want);
            let t = a.shard(&mesh, 0).unwrap().transpose();
            check_blocks(&t, 2);
            assert_eq!(host(&t, &[3, n, 2], DType::F64), nd.clone().reversed_axes());
            assert!(s.permute(&[0, 0, 1]).is_err());
            assert!(s.permute(&[0, 1]).is_err());
            assert!(s.permute(&[0, 1, 3]).is_err());
        }
    }
}
