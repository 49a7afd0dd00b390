//! Indexed and masked updates (`at().set/add/mul`, `masked_fill`), compound assignment
//! and gathers (`take`, `take_along_axis`) against ndarray's own slice assignment and
//! naive loops, on every device; fusion asserted by kernel counts.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};
use ndarray::{ArrayD, Dimension, IxDyn, SliceInfoElem};

/// Deterministic values in [-50, 50) with a fixed seed.
fn data(n: usize, seed: u64) -> Vec<f64> {
    common::xorshift(n, seed)
        .map(|s| ((s >> 11) % 1000) as f64 / 10.0 - 50.0)
        .collect()
}

fn host(shape: &[usize], seed: u64) -> ArrayD<f64> {
    ArrayD::from_shape_vec(IxDyn(shape), data(shape.iter().product(), seed)).unwrap()
}

fn on(dev: &Device, a: &ArrayD<f64>) -> Array {
    Array::from_ndarray_on(a, dev).unwrap()
}

#[track_caller]
fn same(got: &Array, want: &ArrayD<f64>) {
    assert_eq!(got.shape(), want.shape(), "shape");
    assert_eq!(got.dtype(), DType::F64, "dtype");
    let g = got.to_vec::<f64>().unwrap();
    let w: Vec<f64> = want.iter().copied().collect();
    assert_eq!(g, w);
}

fn r(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice { start, end, step }
}

/// Region specs over a [7, 9] array: ranges, steps, negative steps, single indices.
fn regions() -> Vec<Vec<SliceInfoElem>> {
    use SliceInfoElem::Index;
    vec![
        vec![Index(0), r(0, None, 1)],
        vec![r(1, Some(-1), 1), r(1, Some(-1), 1)],
        vec![r(0, None, 2), r(1, None, 3)],
        vec![r(0, None, -1), r(2, Some(7), -2)],
        vec![Index(-1), Index(4)],
        vec![r(5, Some(5), 1), r(0, None, 1)], // empty
        vec![r(-3, None, 1), r(0, None, 1)],
    ]
}

device_test!(at_set_add_mul_match_ndarray_slice_assignment);
fn at_set_add_mul_match_ndarray_slice_assignment(dev: &Device) {
    let base = host(&[7, 9], 1);
    let a = on(dev, &base);
    for reg in regions() {
        let info = reg.as_slice();
        // a scalar
        let mut want = base.clone();
        want.slice_mut(info).fill(2.5);
        same(&a.at(info).set(2.5), &want);
        // an array broadcast to the region (one row of the region's width)
        let region_shape = base.slice(info).shape().to_vec();
        let vshape: Vec<usize> = match region_shape.len() {
            0 => vec![],
            n => region_shape[n - 1..].to_vec(),
        };
        let v = host(&vshape, 2);
        let mut want = base.clone();
        want.slice_mut(info)
            .assign(&v.broadcast(IxDyn(&region_shape)).unwrap());
        same(&a.at(info).set(on(dev, &v)), &want);
        // add and mul
        let mut want = base.clone();
        want.slice_mut(info).mapv_inplace(|x| x + 3.0);
        same(&a.at(info).add(3.0), &want);
        let mut want = base.clone();
        want.slice_mut(info)
            .zip_mut_with(&v.broadcast(IxDyn(&region_shape)).unwrap(), |x, y| *x *= y);
        same(&a.at(info).mul(on(dev, &v)), &want);
    }
}

device_test!(at_keeps_the_base_dtype);
fn at_keeps_the_base_dtype(dev: &Device) {
    let a = Array::from_vec_on(vec![1i32, 2, 3, 4, 5], &[5], dev).unwrap();
    let b = a.at(lf::s![1..4]).set(7.9); // NumPy's a[1:4] = 7.9 truncates
    assert_eq!(b.dtype(), DType::I32);
    assert_eq!(b.to_vec::<i32>().unwrap(), vec![1, 7, 7, 7, 5]);
    let c = a.at(lf::s![..;2]).add(10);
    assert_eq!(c.dtype(), DType::I32);
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![11, 2, 13, 4, 15]);
    // 0-length and size-1 arrays
    let e = Array::zeros_on(&[0], DType::F32, dev);
    assert_eq!(e.at(lf::s![..]).set(1.0).shape(), &[0]);
    let one = Array::from_vec_on(vec![4.0f32], &[1], dev).unwrap();
    assert_eq!(
        one.at(lf::s![0]).mul(0.5).to_vec::<f32>().unwrap(),
        vec![2.0]
    );
}

#[test]
#[should_panic(expected = "same_kind")]
fn at_add_of_a_float_into_ints_panics() {
    let a = Array::from_vec_on(vec![1i32, 2], &[2], &Device::cpu()).unwrap();
    let _ = a.at(lf::s![..]).add(0.5);
}

#[test]
#[should_panic(expected = "does not broadcast")]
fn at_set_of_a_wrong_shape_panics() {
    let a = Array::zeros_on(&[4, 4], DType::F32, &Device::cpu());
    let v = Array::zeros_on(&[3], DType::F32, &Device::cpu());
    let _ = a.at(lf::s![0, ..]).set(&v);
}

device_test!(masked_fill_matches_a_loop);
fn masked_fill_matches_a_loop(dev: &Device) {
    for n in [0usize, 1, 3, 783] {
        let x = host(&[n], 3);
        let a = on(dev, &x);
        let got = a.masked_fill(&a.lt(0.0), 0.0);
        let want = x.mapv(|v| if v < 0.0 { 0.0 } else { v });
        same(&got, &want);
    }
    // a broadcast mask and array value
    let x = host(&[4, 5], 4);
    let a = on(dev, &x);
    let mask = Array::from_vec_on(vec![true, false, true, false, false], &[5], dev).unwrap();
    let v = on(dev, &host(&[4, 1], 5));
    let vh = host(&[4, 1], 5);
    let mut want = x.clone();
    for i in 0..4 {
        for j in [0, 2] {
            want[[i, j]] = vh[[i, 0]];
        }
    }
    same(&a.masked_fill(&mask, &v), &want);
    // the dtype stays the array's
    let ints = Array::from_vec_on(vec![1i64, -2, 3], &[3], dev).unwrap();
    let f = ints.masked_fill(&ints.lt(0), 9.7);
    assert_eq!(f.dtype(), DType::I64);
    assert_eq!(f.to_vec::<i64>().unwrap(), vec![1, 9, 3]);
}

device_test!(compound_assignment_rebinds_and_keeps_the_dtype);
fn compound_assignment_rebinds_and_keeps_the_dtype(dev: &Device) {
    let x = host(&[783], 6);
    let y = host(&[783], 7);
    let mut a = on(dev, &x);
    let b = on(dev, &y);
    a += &b;
    a *= 2.0;
    a -= &b;
    a /= 4.0;
    let want = x
        .iter()
        .zip(y.iter())
        .map(|(&p, &q)| ((p + q) * 2.0 - q) / 4.0)
        .collect::<Vec<_>>();
    same(&a, &ArrayD::from_shape_vec(IxDyn(&[783]), want).unwrap());
    // F32 += F64 array stays F32 (same_kind allows the narrowing)
    let mut f = Array::from_vec_on(vec![1.0f32, 2.0], &[2], dev).unwrap();
    f += Array::from_vec_on(vec![0.5f64, 0.25], &[2], dev).unwrap();
    assert_eq!(f.dtype(), DType::F32);
    assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.5, 2.25]);
    // ints with ints, and broadcasting of the right-hand side
    let mut i = Array::from_vec_on(vec![1i32, 2, 3, 4, 5, 6], &[2, 3], dev).unwrap();
    i += Array::from_vec_on(vec![10i32, 20, 30], &[3], dev).unwrap();
    i -= 1;
    assert_eq!(i.dtype(), DType::I32);
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![10, 21, 32, 13, 24, 35]);
}

#[test]
#[should_panic(expected = "same_kind")]
fn int_true_division_in_place_panics() {
    let mut a = Array::from_vec_on(vec![1i32, 2], &[2], &Device::cpu()).unwrap();
    a /= 2;
}

#[test]
#[should_panic(expected = "cannot broadcast its target")]
fn compound_assignment_cannot_grow_the_target() {
    let mut a = Array::zeros_on(&[3], DType::F32, &Device::cpu());
    a += Array::zeros_on(&[2, 3], DType::F32, &Device::cpu());
}

device_test!(updates_fuse_with_their_neighbours);
fn updates_fuse_with_their_neighbours(dev: &Device) {
    let u = on(dev, &host(&[64, 64], 8));
    let du = on(dev, &host(&[64, 64], 9));
    // a boundary update inside a step: one kernel
    let mut v = u.at(lf::s![0, ..]).set(0.0).at(lf::s![.., -1]).set(1.0);
    v += &du * 0.1;
    v *= 0.5;
    assert_eq!(lf::debug::kernel_count(&[&v]).unwrap(), 1);
    let m = u.masked_fill(&du.gt(0.0), 0.0).sqrt();
    assert_eq!(lf::debug::kernel_count(&[&m]).unwrap(), 1);
    let t = u.take(
        &Array::from_vec_on(vec![3i64, -1, 0], &[3], dev).unwrap(),
        0,
    ) * 2.0;
    assert_eq!(lf::debug::kernel_count(&[&t]).unwrap(), 1);
}

fn ints(dev: &Device, v: &[i64], shape: &[usize]) -> Array {
    Array::from_vec_on(v.to_vec(), shape, dev).unwrap()
}

device_test!(take_matches_a_loop);
fn take_matches_a_loop(dev: &Device) {
    let x = host(&[5, 6, 3], 10);
    let a = on(dev, &x);
    let idx = [4i64, -1, 0, 2, -5, 3];
    for axis in 0..3usize {
        let n = x.shape()[axis] as i64;
        let ii: Vec<i64> = idx.iter().copied().filter(|&i| i >= -n && i < n).collect();
        let m = ii.len();
        // indices of shape [2, m/2] when even, else [m]
        let ishape: Vec<usize> = if m.is_multiple_of(2) {
            vec![2, m / 2]
        } else {
            vec![m]
        };
        let got = a.take(&ints(dev, &ii, &ishape), axis as isize);
        let mut out: Vec<usize> = x.shape()[..axis].to_vec();
        out.extend(&ishape);
        out.extend(&x.shape()[axis + 1..]);
        let want = ArrayD::from_shape_fn(IxDyn(&out), |o| {
            let o = o.as_array_view().to_vec();
            let k = o[axis..axis + ishape.len()]
                .iter()
                .zip(ishape.iter())
                .fold(0, |acc, (&i, &d)| acc * d + i);
            let j = ii[k].rem_euclid(n) as usize;
            let mut src: Vec<usize> = o[..axis].to_vec();
            src.push(j);
            src.extend(&o[axis + ishape.len()..]);
            x[IxDyn(&src)]
        });
        same(&got, &want);
    }
    // I32 indices, a 0-d index, an empty index array
    let i32s = Array::from_vec_on(vec![1i32, 0], &[2], dev).unwrap();
    let t = on(dev, &host(&[3], 11)).take(&i32s, 0);
    let h = host(&[3], 11);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![h[[1]], h[[0]]]);
    let s = on(dev, &h).take(&Array::scalar_on(2i64, dev), 0);
    assert_eq!(s.shape(), &[] as &[usize]);
    assert_eq!(s.item::<f64>().unwrap(), h[[2]]);
    let e = on(dev, &h).take(&Array::zeros_on(&[0], DType::I64, dev), 0);
    assert_eq!(e.shape(), &[0]);
    assert!(e.to_vec::<f64>().unwrap().is_empty());
}

device_test!(take_along_axis_matches_a_loop);
fn take_along_axis_matches_a_loop(dev: &Device) {
    let x = host(&[4, 7], 12);
    let a = on(dev, &x);
    // per row, indices that sort the row (argsort computed here on the host)
    let mut order = Vec::new();
    for i in 0..4 {
        let mut ix: Vec<i64> = (0..7).collect();
        ix.sort_by(|&p, &q| x[[i, p as usize]].total_cmp(&x[[i, q as usize]]));
        order.extend(ix);
    }
    let got = lf::take_along_axis(&a, &ints(dev, &order, &[4, 7]), 1);
    let mut want = x.clone();
    for i in 0..4 {
        for j in 0..7 {
            want[[i, j]] = x[[i, order[i * 7 + j] as usize]];
        }
    }
    same(&got, &want);
    // broadcast indices [1, 2] along axis 0, negative entries
    let col = [-1i64, 0, 2, 1, 3, 0, -4];
    let got = lf::take_along_axis(&a, &ints(dev, &col, &[1, 7]), 0);
    let want = ArrayD::from_shape_fn(IxDyn(&[1, 7]), |o| {
        x[[col[o[1]].rem_euclid(4) as usize, o[1]]]
    });
    same(&got, &want);
    let got = lf::take_along_axis(&a.slice(lf::s![..2, ..]), &ints(dev, &[-1, 0], &[2, 1]), 1);
    let want = ArrayD::from_shape_fn(IxDyn(&[2, 1]), |o| {
        let o = o.as_array_view().to_vec();
        x[[o[0], if o[0] == 0 { 6 } else { 0 }]]
    });
    same(&got, &want);
}

device_test!(out_of_range_indices_fail_every_readback_of_their_result);
fn out_of_range_indices_fail_every_readback_of_their_result(dev: &Device) {
    let a = on(dev, &host(&[5], 13));
    let bad = a.take(&ints(dev, &[1, 5], &[2]), 0);
    bad.eval().unwrap();
    for _ in 0..2 {
        match bad.to_vec::<f64>() {
            Err(lf::Error::Index { msg, .. }) => assert!(msg.contains("length 5"), "{msg}"),
            other => panic!("expected an index error, got {other:?}"),
        }
    }
    // other gathers and unrelated readbacks work
    let ok = a.take(&ints(dev, &[-5, 4], &[2]), 0);
    assert_eq!(ok.to_vec::<f64>().unwrap().len(), 2);
    assert!(a.sum().item::<f64>().is_ok());
    // take_along_axis, and a dependent of it
    let m = on(dev, &host(&[2, 3], 14));
    let t = lf::take_along_axis(&m, &ints(dev, &[0, -4], &[1, 2]), 1);
    assert!(matches!(
        t.sum().item::<f64>(),
        Err(lf::Error::Index { .. })
    ));
    assert!(matches!(t.to_vec::<f64>(), Err(lf::Error::Index { .. })));
    // many gathers: only the ones out of range fail
    for k in 0..40i64 {
        let g = a.take(&ints(dev, &[k % 7], &[1]), 0);
        assert_eq!(g.to_vec::<f64>().is_err(), k % 7 >= 5, "index {}", k % 7);
    }
}

#[test]
#[should_panic(expected = "indices must be integers")]
fn take_with_float_indices_panics() {
    let a = Array::zeros_on(&[3], DType::F32, &Device::cpu());
    let _ = a.take(&Array::zeros_on(&[1], DType::F32, &Device::cpu()), 0);
}
