//! Shape and movement operations (views) and creation functions against the oracle and
//! known answers: reshape, transpose, permute, swapaxes, broadcast_to, expand_dims,
//! squeeze, slicing, flip, pad, roll, concatenate, stack, views of views, views feeding
//! elementwise work, `item()` readback of a view, and zeros/ones/full/arange/linspace/eye/
//! meshgrid/random.

#[macro_use]
mod common;

use common::oracle::{self as o, iota, Bi, OVal, Opnd, Tol, Un, View, V};
use lazyfuse as lf;
use lf::{c32, Array, DType, Device};
use ndarray::{Dimension, SliceInfoElem};
use std::sync::{RwLock, RwLockReadGuard};

/// Tests that assert on the global `lf::stats()` take this for writing; every other test
/// in this binary takes it for reading, so no transfer runs while counters are compared.
static STATS: RwLock<()> = RwLock::new(());

fn stats_read() -> RwLockReadGuard<'static, ()> {
    STATS.read().unwrap_or_else(|e| e.into_inner())
}

const DTYPES: [DType; 5] = [DType::Bool, DType::I32, DType::F32, DType::F64, DType::C64];

/// Applies `chain` to `iota(dtype, shape)` both ways and compares exactly.
fn try_chain(dev: &Device, dtype: DType, shape: &[usize], chain: &[View]) -> Result<(), String> {
    let x = iota(dtype, shape);
    let mut a = x.to_lf(dev);
    let mut w = x;
    for v in chain {
        a = v.apply(&a);
        w = v.oracle(&w);
        if a.shape() != w.shape() {
            return Err(format!(
                "shape after {v:?}: got {:?}, want {:?} ({dtype}, from {shape:?}, chain {chain:?})",
                a.shape(),
                w.shape()
            ));
        }
    }
    o::check(&a, &w, Tol::EXACT).map_err(|e| format!("{dtype} {shape:?} {chain:?}: {e}"))
}

#[track_caller]
fn check_chain(dev: &Device, dtype: DType, shape: &[usize], chain: &[View]) {
    if let Err(e) = try_chain(dev, dtype, shape, chain) {
        panic!("{e}");
    }
}

fn sl(e: &[SliceInfoElem]) -> View {
    View::Slice(e.to_vec())
}

fn r(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice { start, end, step }
}

device_test!(reshape_with_inferred_axis);
fn reshape_with_inferred_axis(dev: &Device) {
    let _g = stats_read();
    for d in DTYPES {
        check_chain(dev, d, &[2, 3, 4], &[View::Reshape(vec![6, -1])]);
        check_chain(dev, d, &[2, 3, 4], &[View::Reshape(vec![-1])]);
        check_chain(dev, d, &[2, 3, 4], &[View::Reshape(vec![4, 1, -1, 2])]);
        check_chain(dev, d, &[24], &[View::Reshape(vec![2, -1, 3])]);
        check_chain(dev, d, &[], &[View::Reshape(vec![1, 1])]);
        check_chain(dev, d, &[1, 1], &[View::Reshape(vec![])]);
        check_chain(dev, d, &[0, 3], &[View::Reshape(vec![3, 0, 1])]);
        // reshape of a non-contiguous view reads in the view's C order
        check_chain(dev, d, &[3, 4], &[View::Transpose, View::Reshape(vec![-1])]);
        check_chain(
            dev,
            d,
            &[4, 6],
            &[
                sl(&[r(1, None, 2), r(0, None, -1)]),
                View::Reshape(vec![3, 2, -1]),
            ],
        );
    }
    let a = Array::zeros_on(&[2, 3], DType::F32, dev);
    assert_eq!(a.reshape(&[3, -1]).shape(), &[3, 2]);
}

device_test!(transpose_permute_swapaxes);
fn transpose_permute_swapaxes(dev: &Device) {
    let _g = stats_read();
    for d in DTYPES {
        check_chain(dev, d, &[2, 3, 4], &[View::Transpose]);
        check_chain(dev, d, &[5], &[View::Transpose]);
        check_chain(dev, d, &[], &[View::Transpose]);
        check_chain(dev, d, &[2, 3, 4], &[View::Permute(vec![1, 2, 0])]);
        check_chain(dev, d, &[2, 3, 4, 5], &[View::Permute(vec![3, 0, 2, 1])]);
        check_chain(dev, d, &[2, 3, 4], &[View::SwapAxes(0, -1)]);
        check_chain(dev, d, &[2, 3, 4], &[View::SwapAxes(-2, 1)]);
        check_chain(dev, d, &[2, 3], &[View::Transpose, View::Transpose]);
        check_chain(dev, d, &[3, 0, 2], &[View::Permute(vec![2, 0, 1])]);
    }
    // known answer
    let a = Array::from_vec_on((0..6).collect::<Vec<i32>>(), &[2, 3], dev).unwrap();
    assert_eq!(a.transpose().to_vec::<i32>().unwrap(), [0, 3, 1, 4, 2, 5]);
}

device_test!(broadcast_expand_squeeze);
fn broadcast_expand_squeeze(dev: &Device) {
    let _g = stats_read();
    for d in DTYPES {
        check_chain(dev, d, &[3, 1], &[View::BroadcastTo(vec![2, 3, 4])]);
        check_chain(dev, d, &[], &[View::BroadcastTo(vec![2, 2])]);
        check_chain(dev, d, &[1], &[View::BroadcastTo(vec![0])]);
        check_chain(dev, d, &[4], &[View::BroadcastTo(vec![3, 0, 4])]);
        check_chain(dev, d, &[2, 3], &[View::ExpandDims(0)]);
        check_chain(dev, d, &[2, 3], &[View::ExpandDims(-1)]);
        check_chain(
            dev,
            d,
            &[2, 3],
            &[View::ExpandDims(1), View::BroadcastTo(vec![2, 5, 3])],
        );
        check_chain(dev, d, &[2, 1, 3], &[View::Squeeze(1)]);
        check_chain(dev, d, &[2, 3, 1], &[View::Squeeze(-1)]);
        check_chain(dev, d, &[1], &[View::Squeeze(0)]);
        // a broadcast read through a transpose and a slice
        check_chain(
            dev,
            d,
            &[3, 1],
            &[
                View::BroadcastTo(vec![3, 4]),
                View::Transpose,
                sl(&[r(1, None, 2)]),
            ],
        );
    }
}

device_test!(slicing_ranges_steps_indices_newaxis);
fn slicing_ranges_steps_indices_newaxis(dev: &Device) {
    let _g = stats_read();
    use SliceInfoElem::{Index, NewAxis};
    let cases: Vec<Vec<SliceInfoElem>> = vec![
        vec![r(1, Some(4), 1)],
        vec![r(0, None, 2)],
        vec![r(0, None, -1)],
        vec![r(1, Some(5), -2)], // ndarray meaning: 1..5 walked from its end: 4, 2
        vec![r(-3, None, 1)],
        vec![r(0, Some(-1), 3)],
        vec![r(-100, Some(100), 1)], // out-of-range bounds are clipped
        vec![r(4, Some(2), 1)],      // empty
        vec![r(5, None, -1)],        // empty at the end
        vec![Index(2)],
        vec![Index(-1)],
        vec![r(0, None, 1), Index(1)],
        vec![NewAxis, r(1, None, 1)],
        vec![Index(0), NewAxis, r(0, None, -2)],
        vec![r(0, None, -3), NewAxis, Index(-2), r(1, Some(3), 1)],
    ];
    for d in DTYPES {
        for c in &cases {
            let rank = c.iter().filter(|e| !matches!(e, NewAxis)).count();
            let shape: Vec<usize> = [6, 4, 5, 3][..rank.max(1)].to_vec();
            check_chain(dev, d, &shape, &[View::Slice(c.clone())]);
            check_chain(dev, d, &[6, 4, 5], &[View::Slice(c.clone())]);
        }
    }
    // known answers (ndarray's negative-step meaning, documented on Array::slice)
    let a = Array::from_vec_on((0..6).collect::<Vec<i64>>(), &[6], dev).unwrap();
    assert_eq!(
        a.slice(lf::s![..;-1]).to_vec::<i64>().unwrap(),
        [5, 4, 3, 2, 1, 0]
    );
    assert_eq!(a.slice(lf::s![..;-2]).to_vec::<i64>().unwrap(), [5, 3, 1]);
    assert_eq!(a.slice(lf::s![1..4;-1]).to_vec::<i64>().unwrap(), [3, 2, 1]);
    assert_eq!(a.slice(lf::s![1..5;-2]).to_vec::<i64>().unwrap(), [4, 2]);
    assert_eq!(a.slice(lf::s![-2..]).to_vec::<i64>().unwrap(), [4, 5]);
    assert_eq!(
        a.slice(lf::s![2..100]).to_vec::<i64>().unwrap(),
        [2, 3, 4, 5]
    );
    assert_eq!(a.slice(lf::s![3]).shape(), &[] as &[usize]);
    assert_eq!(a.slice(lf::s![ndarray::NewAxis, 1..3]).shape(), &[1, 2]);
}

#[test]
fn oracle_slice_agrees_with_ndarray() {
    // the oracle's slicing is written out by hand; check it against ndarray's own
    let x = iota(DType::I64, &[6, 5]);
    let h: ndarray::ArrayD<V> = x.a.clone();
    for info in [
        ndarray::s![1..4, ..;-1].as_ref().to_vec(),
        ndarray::s![..;-2, 1..5;2].as_ref().to_vec(),
        ndarray::s![2, ndarray::NewAxis, 1..4;-2].as_ref().to_vec(),
        ndarray::s![-3.., -1].as_ref().to_vec(),
    ] {
        let want = h.slice(info.as_slice()).to_owned();
        let got = x.slice(&info);
        assert_eq!(got.a, want, "oracle slice {info:?}");
    }
}

device_test!(flip_pad_roll);
fn flip_pad_roll(dev: &Device) {
    let _g = stats_read();
    for d in DTYPES {
        check_chain(dev, d, &[5], &[View::Flip(0)]);
        check_chain(dev, d, &[3, 4], &[View::Flip(0)]);
        check_chain(dev, d, &[3, 4], &[View::Flip(-1)]);
        check_chain(dev, d, &[2, 3, 4], &[View::Flip(1), View::Flip(2)]);
        check_chain(dev, d, &[0, 3], &[View::Flip(0)]);
        check_chain(dev, d, &[3, 4], &[View::Pad(vec![(1, 2)], 0.0)]);
        check_chain(dev, d, &[3, 4], &[View::Pad(vec![(0, 0), (3, 1)], 7.0)]);
        check_chain(
            dev,
            d,
            &[2, 3, 4],
            &[View::Pad(vec![(1, 0), (0, 2), (2, 2)], -1.5)],
        );
        check_chain(dev, d, &[0, 2], &[View::Pad(vec![(1, 1)], 2.7)]);
        check_chain(dev, d, &[3], &[View::Pad(vec![(2, 2)], f64::NAN)]); // NaN cast per dtype
        for s in [-7, -3, -1, 0, 1, 2, 4, 5, 13] {
            check_chain(dev, d, &[5], &[View::Roll(s, 0)]);
            check_chain(dev, d, &[3, 4], &[View::Roll(s, -1)]);
            check_chain(dev, d, &[3, 4], &[View::Roll(s, 0)]);
        }
        check_chain(dev, d, &[0, 4], &[View::Roll(3, 0)]);
        check_chain(dev, d, &[4, 0], &[View::Roll(3, 0)]);
    }
    // known answers
    let a = Array::from_vec_on((0..5).collect::<Vec<i32>>(), &[5], dev).unwrap();
    assert_eq!(a.roll(2, 0).to_vec::<i32>().unwrap(), [3, 4, 0, 1, 2]);
    assert_eq!(a.roll(-1, 0).to_vec::<i32>().unwrap(), [1, 2, 3, 4, 0]);
    assert_eq!(a.roll(7, -1).to_vec::<i32>().unwrap(), [3, 4, 0, 1, 2]);
    assert_eq!(a.flip(0).to_vec::<i32>().unwrap(), [4, 3, 2, 1, 0]);
    assert_eq!(
        a.pad(&[(1, 2)], 9.9).to_vec::<i32>().unwrap(),
        [9, 0, 1, 2, 3, 4, 9, 9]
    );
    let b = Array::from_vec_on(vec![1.5f32, 2.5], &[1, 2], dev).unwrap();
    assert_eq!(
        b.pad(&[(1, 0), (0, 1)], -1.0).to_vec::<f32>().unwrap(),
        [-1.0, -1.0, -1.0, 1.5, 2.5, -1.0]
    );
}

device_test!(large_shifted_and_broadcast_reads);
/// Rolls, shifts and broadcasts of arrays large enough that the CUDA kernels run their
/// vectorized loop (lane indices computed first, one vector read where they are consecutive
/// and aligned): wraps on a vector boundary, inside a vector, and rows that start off one;
/// 4-, 8- and 16-byte elements; an f32 result of a shifted c64 read (mixed sizes); a
/// broadcast along outer axes and along the inner axis.
fn large_shifted_and_broadcast_reads(dev: &Device) {
    let _g = stats_read();
    for d in [DType::F32, DType::F64, DType::C64] {
        for (shape, shift, axis) in [
            ([1024usize, 1152usize], 576isize, -1isize),
            ([1024, 1152], 3, -1),
            ([1031, 1027], 5, -1),
            ([1031, 1027], -514, 0),
        ] {
            check_chain(dev, d, &shape, &[View::Roll(shift, axis)]);
        }
        check_chain(
            dev,
            d,
            &[1, 1024, 1152],
            &[View::BroadcastTo(vec![2, 1024, 1152]), View::Roll(7, 1)],
        );
        check_chain(dev, d, &[1027, 1], &[View::BroadcastTo(vec![1027, 1100])]);
    }
    // |z| of a shifted c64 read: 8-byte loads feeding 4-byte stores
    for shape in [[1024usize, 1152usize], [1031, 1027]] {
        let x = iota(DType::C64, &shape);
        let (h, w) = ((shape[0] / 2) as isize, (shape[1] / 2) as isize);
        let shifted = View::Roll(w, 1).oracle(&View::Roll(h, 0).oracle(&x));
        let want = o::unary(Un::Abs, &shifted).expect("abs of c64");
        let got = lf::fft::fftshift(&x.to_lf(dev), None).abs();
        assert_eq!(got.dtype(), DType::F32, "abs dtype");
        o::check(&got, &want, Tol::DEFAULT)
            .unwrap_or_else(|e| panic!("abs(fftshift) {shape:?}: {e}"));
    }
}

device_test!(concatenate_and_stack);
fn concatenate_and_stack(dev: &Device) {
    let _g = stats_read();
    // same dtype, several axes, zero-length pieces
    for d in DTYPES {
        let x = iota(d, &[2, 3]);
        let y = iota(d, &[2, 4]).astype(d);
        let z = iota(d, &[2, 0]);
        let (xa, ya, za) = (x.to_lf(dev), y.to_lf(dev), z.to_lf(dev));
        let w = o::concatenate(&[&x, &z, &y, &x], 1);
        o::assert_close(
            &lf::concatenate(&[&xa, &za, &ya, &xa], 1),
            &w,
            Tol::EXACT,
            &format!("concat {d} axis 1"),
        );
        let w = o::concatenate(&[&y, &x], -1);
        o::assert_close(
            &lf::concatenate(&[&ya, &xa], -1),
            &w,
            Tol::EXACT,
            &format!("concat {d} axis -1"),
        );
        let t = x.transpose();
        let w = o::concatenate(&[&t, &t.flip(0)], 0);
        o::assert_close(
            &lf::concatenate(&[&xa.transpose(), &xa.transpose().flip(0)], 0),
            &w,
            Tol::EXACT,
            "concat views",
        );
        let w = o::concatenate(&[&z, &z], 1);
        o::assert_close(
            &lf::concatenate(&[&za, &za], 1),
            &w,
            Tol::EXACT,
            "concat of empties",
        );
        let w = o::concatenate(&[&x], 0);
        o::assert_close(&lf::concatenate(&[&xa], 0), &w, Tol::EXACT, "concat of one");
        for axis in [0, 1, 2, -1, -3] {
            let w = o::stack(&[&x, &x, &x], axis);
            o::assert_close(
                &lf::stack(&[&xa, &xa, &xa], axis),
                &w,
                Tol::EXACT,
                &format!("stack {d} axis {axis}"),
            );
        }
        let w = o::stack(&[&x], 1);
        o::assert_close(&lf::stack(&[&xa], 1), &w, Tol::EXACT, "stack of one");
    }
    // dtype promotion across pieces (NumPy's table), including an empty piece
    for da in DTYPES {
        for db in [
            DType::Bool,
            DType::I32,
            DType::I64,
            DType::F32,
            DType::F64,
            DType::C64,
            DType::C128,
        ] {
            let x = iota(da, &[3]);
            let y = iota(db, &[2]);
            let e = iota(db, &[0]);
            let (xa, ya, ea) = (x.to_lf(dev), y.to_lf(dev), e.to_lf(dev));
            let w = o::concatenate(&[&x, &e, &y], 0);
            o::assert_close(
                &lf::concatenate(&[&xa, &ea, &ya], 0),
                &w,
                Tol::EXACT,
                &format!("concat {da} {db}"),
            );
            let w = o::concatenate(&[&x, &e], 0);
            o::assert_close(
                &lf::concatenate(&[&xa, &ea], 0),
                &w,
                Tol::EXACT,
                &format!("concat {da} with empty {db}"),
            );
        }
    }
    // known answer
    let a = Array::from_vec_on(vec![1i32, 2], &[2], dev).unwrap();
    let b = Array::from_vec_on(vec![0.5f64], &[1], dev).unwrap();
    let c = lf::concatenate(&[&a, &b], 0);
    assert_eq!(c.dtype(), DType::F64);
    assert_eq!(c.to_vec::<f64>().unwrap(), [1.0, 2.0, 0.5]);
    let s = lf::stack(&[&a, &a], 1);
    assert_eq!(s.shape(), &[2, 2]);
    assert_eq!(s.to_vec::<i32>().unwrap(), [1, 1, 2, 2]);
}

device_test!(views_of_views);
fn views_of_views(dev: &Device) {
    let _g = stats_read();
    let chains: Vec<(Vec<usize>, Vec<View>)> = vec![
        // slice of transpose of pad
        (
            vec![3, 4],
            vec![
                View::Pad(vec![(1, 2), (0, 1)], 5.0),
                View::Transpose,
                sl(&[r(1, None, 2), r(-1, None, -1)]),
            ],
        ),
        // roll of flip of slice
        (
            vec![5, 6],
            vec![
                sl(&[r(1, Some(4), 1), r(0, None, 2)]),
                View::Flip(0),
                View::Roll(-2, 1),
            ],
        ),
        // pad of roll of broadcast
        (
            vec![1, 3],
            vec![
                View::BroadcastTo(vec![4, 3]),
                View::Roll(1, 0),
                View::Pad(vec![(2, 0), (1, 1)], -3.0),
            ],
        ),
        // reshape of permute of slice of pad
        (
            vec![2, 3, 4],
            vec![
                View::Pad(vec![(1, 1)], 1.0),
                sl(&[r(0, None, 2)]),
                View::Permute(vec![2, 0, 1]),
                View::Reshape(vec![-1, 4]),
            ],
        ),
        // roll after roll, flip after flip on the same axis
        (
            vec![7],
            vec![
                View::Roll(3, 0),
                View::Roll(-5, 0),
                View::Flip(0),
                View::Flip(0),
            ],
        ),
        // expand, broadcast, swap, squeeze
        (
            vec![3],
            vec![
                View::ExpandDims(0),
                View::BroadcastTo(vec![2, 3]),
                View::SwapAxes(0, 1),
                sl(&[r(0, None, 1), SliceInfoElem::Index(1)]),
            ],
        ),
        // negative-step slice of a padded, rolled array, then reshape
        (
            vec![4, 4],
            vec![
                View::Roll(1, 1),
                View::Pad(vec![(1, 1), (2, 0)], 0.0),
                sl(&[r(0, None, -2), r(1, None, -3)]),
                View::Reshape(vec![-1]),
            ],
        ),
        // slice with an index of a transpose, then pad
        (
            vec![3, 5, 2],
            vec![
                View::Transpose,
                sl(&[SliceInfoElem::Index(-1), r(1, None, 1)]),
                View::Pad(vec![(0, 1)], 9.0),
            ],
        ),
        // reshape of a pad that pads two axes (the reshape reads the pad by linear index)
        (
            vec![1, 4],
            vec![View::Pad(vec![(1, 1)], 0.0), View::Reshape(vec![-1])],
        ),
        (
            vec![2, 3],
            vec![
                View::Pad(vec![(1, 2), (2, 1)], -1.0),
                View::Reshape(vec![-1]),
            ],
        ),
        (
            vec![2, 3],
            vec![
                View::Pad(vec![(0, 1), (1, 0)], 3.0),
                View::Reshape(vec![2, 6]),
                View::Transpose,
            ],
        ),
    ];
    let mut fails = vec![];
    for d in DTYPES {
        for (shape, chain) in &chains {
            fails.extend(try_chain(dev, d, shape, chain).err());
        }
    }
    assert!(
        fails.is_empty(),
        "{} failing view chains:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

device_test!(views_feeding_elementwise_ops);
fn views_feeding_elementwise_ops(dev: &Device) {
    let _g = stats_read();
    let x = iota(DType::F64, &[3, 4]);
    let y = iota(DType::F32, &[4, 3]);
    let z = iota(DType::I32, &[2, 3]);
    let (xa, ya, za) = (x.to_lf(dev), y.to_lf(dev), z.to_lf(dev));
    // (x + y^T) * pad(z)[1:4, :] - roll(x, 1, 1).flip(0)
    let got = (&xa + &ya.transpose()) * za.pad(&[(1, 1), (0, 1)], 2.0).slice(lf::s![1..4, ..])
        - xa.roll(1, 1).flip(0);
    let s = o::binary(Bi::Add, Opnd::A(&x), Opnd::A(&y.transpose())).unwrap();
    let p = z.pad(&[(1, 1), (0, 1)], 2.0).slice(lf::s![1..4, ..]);
    let m = o::binary(Bi::Mul, Opnd::A(&s), Opnd::A(&p)).unwrap();
    let w = o::binary(Bi::Sub, Opnd::A(&m), Opnd::A(&x.roll(1, 1).flip(0))).unwrap();
    o::assert_close(&got, &w, Tol::ULPS, "views into elementwise");

    // the same array read at different indices in one expression
    let got = &xa * xa.flip(1) + xa.roll(2, 0).sqrt();
    let a = o::binary(Bi::Mul, Opnd::A(&x), Opnd::A(&x.flip(1))).unwrap();
    let b = o::unary(Un::Sqrt, &x.roll(2, 0)).unwrap();
    let w = o::binary(Bi::Add, Opnd::A(&a), Opnd::A(&b)).unwrap();
    o::assert_close(&got, &w, Tol::ULPS, "self at different indices");

    // a view of an elementwise result, then more elementwise work
    let e = (&xa * 2.0).exp().transpose().slice(lf::s![..;-1, 1..]) / 3.0;
    let t = o::binary(Bi::Mul, Opnd::A(&x), Opnd::S(V::F64(2.0))).unwrap();
    let t = o::unary(Un::Exp, &t)
        .unwrap()
        .transpose()
        .slice(lf::s![..;-1, 1..]);
    let w = o::binary(Bi::Div, Opnd::A(&t), Opnd::S(V::F64(3.0))).unwrap();
    o::assert_close(&e, &w, Tol::ULPS, "view of elementwise");

    // concatenate of computed pieces, then a where over it
    let c = lf::concatenate(&[&(&xa + 1.0), &ya.transpose().astype(DType::F64).sin()], 0);
    let got = lf::where_(&c.gt(2.0), &c, c.flip(0));
    let p1 = o::binary(Bi::Add, Opnd::A(&x), Opnd::S(V::F64(1.0))).unwrap();
    let p2 = o::unary(Un::Sin, &y.transpose().astype(DType::F64)).unwrap();
    let cw = o::concatenate(&[&p1, &p2], 0);
    let g = o::binary(Bi::Gt, Opnd::A(&cw), Opnd::S(V::F64(2.0))).unwrap();
    let w = o::where_(&g, Opnd::A(&cw), Opnd::A(&cw.flip(0))).unwrap();
    o::assert_close(&got, &w, Tol::ULPS, "where over a concatenation");
}

device_test!(evaluated_arrays_as_view_sources);
fn evaluated_arrays_as_view_sources(dev: &Device) {
    let _g = stats_read();
    // views of arrays that already hold buffers, and a second eval on top
    let x = iota(DType::F32, &[4, 5]);
    let a = (&x.to_lf(dev) * 2.0) - 1.0;
    a.eval().unwrap();
    let w0 = o::binary(Bi::Mul, Opnd::A(&x), Opnd::S(V::F64(2.0))).unwrap();
    let w0 = o::binary(Bi::Sub, Opnd::A(&w0), Opnd::S(V::F64(1.0))).unwrap();
    for chain in [
        vec![View::Transpose],
        vec![sl(&[r(1, None, 2), r(0, None, -1)])],
        vec![View::Roll(2, 1), View::Pad(vec![(1, 0)], 0.0)],
    ] {
        let mut g = a.clone();
        let mut w = w0.clone();
        for v in &chain {
            g = v.apply(&g);
            w = v.oracle(&w);
        }
        let g = &g + 0.25;
        let w = o::binary(Bi::Add, Opnd::A(&w), Opnd::S(V::F64(0.25))).unwrap();
        o::assert_close(
            &g,
            &w,
            Tol::EXACT,
            &format!("{chain:?} of an evaluated array"),
        );
    }
}

device_test!(item_of_a_view_reads_one_element);
fn item_of_a_view_reads_one_element(dev: &Device) {
    // the only test here that reads the global counters: it excludes all others
    let _g = STATS.write().unwrap_or_else(|e| e.into_inner());
    let x = iota(DType::F64, &[4, 5]);
    let a = &x.to_lf(dev) * 2.0;
    a.eval().unwrap();
    dev.synchronize().unwrap();
    let cases: Vec<(Array, f64)> = vec![
        (a.slice(lf::s![2, 3]), 2.0 * 13.5),
        (a.slice(lf::s![-1, -1]), 2.0 * 19.5),
        (a.transpose().slice(lf::s![3..4, 2..3]), 2.0 * 13.5),
        (a.slice(lf::s![1..2, ..;-1]).slice(lf::s![.., 0]), 2.0 * 9.5),
        (a.reshape(&[-1]).slice(lf::s![7]), 2.0 * 7.5),
        (a.slice(lf::s![0, 0]).broadcast_to(&[1, 1]), 2.0 * 0.5),
    ];
    for (v, want) in cases {
        let before = lf::stats().bytes_d2h;
        let got = v.item::<f64>().unwrap();
        let moved = lf::stats().bytes_d2h - before;
        assert_eq!(got, want, "item of {:?}", v.shape());
        if dev.is_cuda() {
            assert_eq!(
                moved, 8,
                "item() of a view copied {moved} bytes, not one f64"
            );
        } else {
            assert_eq!(moved, 0, "the CPU backend counts no device-to-host bytes");
        }
    }
    // item of a lazy size-1 expression also works
    let s = (a.slice(lf::s![1..2, 2..3]) + 1.0).sqrt();
    assert_eq!(s.item::<f64>().unwrap(), (2.0f64 * 7.5 + 1.0).sqrt());
    // item of a larger array is an error, not a panic
    assert!(a.item::<f64>().is_err());
    assert!(
        a.slice(lf::s![0, 0]).item::<f32>().is_err(),
        "wrong element type"
    );
}

device_test!(zeros_ones_full);
fn zeros_ones_full(dev: &Device) {
    let _g = stats_read();
    for d in [
        DType::Bool,
        DType::I32,
        DType::I64,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ] {
        for shape in [&[][..], &[0], &[3], &[2, 3]] {
            let z = Array::zeros_on(shape, d, dev);
            o::assert_close(
                &z,
                &OVal::full(shape, V::I32(0).cast(d)),
                Tol::EXACT,
                &format!("zeros {d} {shape:?}"),
            );
            let one = Array::ones_on(shape, d, dev);
            o::assert_close(
                &one,
                &OVal::full(shape, V::I32(1).cast(d)),
                Tol::EXACT,
                &format!("ones {d} {shape:?}"),
            );
            let f = Array::full_on(shape, -2.5f64, d, dev);
            o::assert_close(
                &f,
                &OVal::full(shape, V::F64(-2.5).cast(d)),
                Tol::EXACT,
                &format!("full {d} {shape:?}"),
            );
        }
    }
    let f = Array::full_on(&[2], c32::new(1.0, -1.0), DType::C64, dev);
    assert_eq!(f.to_vec::<c32>().unwrap(), [c32::new(1.0, -1.0); 2]);
    let f = Array::full_on(&[2], 7i32, DType::F32, dev);
    assert_eq!(f.to_vec::<f32>().unwrap(), [7.0, 7.0]);
}

device_test!(arange_and_linspace);
fn arange_and_linspace(dev: &Device) {
    let _g = stats_read();
    // arange: ceil((stop - start) / step) values start + i * step
    let cases: [(f64, f64, f64, DType); 9] = [
        (0.0, 10.0, 1.0, DType::I32),
        (10.0, 0.0, -3.0, DType::I64),
        (0.5, 3.0, 0.5, DType::F64),
        (0.0, 1.0, 0.1, DType::F64),
        (-1.0, 1.0, 0.25, DType::F32),
        (0.0, 0.0, 1.0, DType::F64),
        (5.0, 1.0, 1.0, DType::I32),
        (0.0, 5.0, 2.0, DType::C64),
        (-3.0, 4.0, 2.0, DType::F32),
    ];
    for (start, stop, step, d) in cases {
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        let w = OVal::new(
            d,
            &[n],
            (0..n)
                .map(|i| V::F64(start + i as f64 * step).cast(d))
                .collect(),
        );
        let a = Array::arange_on(start, stop, step, d, dev);
        o::assert_close(
            &a,
            &w,
            Tol::ULPS,
            &format!("arange({start}, {stop}, {step}, {d})"),
        );
    }
    assert_eq!(
        Array::arange_on(0.0, 1.0, 0.1, DType::F64, dev).shape(),
        &[10]
    );
    // linspace: endpoint included, exactly `stop` at the end; integers floor
    let cases: [(f64, f64, usize, DType); 8] = [
        (0.0, 1.0, 5, DType::F64),
        (-1.0, 1.0, 1, DType::F64),
        (0.0, 1.0, 0, DType::F32),
        (0.0, 10.0, 4, DType::I32),
        (-5.0, 5.0, 4, DType::I64),
        (1.0, -2.0, 7, DType::F32),
        (0.0, 0.3, 4, DType::F64),
        (2.0, 3.0, 2, DType::C128),
    ];
    for (start, stop, num, d) in cases {
        let step = if num > 1 {
            (stop - start) / (num - 1) as f64
        } else {
            0.0
        };
        let v = (0..num)
            .map(|i| {
                let y = if num > 1 && i == num - 1 {
                    stop
                } else {
                    i as f64 * step + start
                };
                let y = if matches!(d, DType::I32 | DType::I64) {
                    y.floor()
                } else {
                    y
                };
                V::F64(y).cast(d)
            })
            .collect();
        let w = OVal::new(d, &[num], v);
        let a = Array::linspace_on(start, stop, num, d, dev);
        o::assert_close(
            &a,
            &w,
            Tol::ULPS,
            &format!("linspace({start}, {stop}, {num}, {d})"),
        );
    }
    assert_eq!(
        Array::linspace_on(0.0, 10.0, 4, DType::I32, dev)
            .to_vec::<i32>()
            .unwrap(),
        [0, 3, 6, 10]
    );
    assert_eq!(
        Array::linspace_on(0.0, 1.0, 5, DType::F64, dev)
            .to_vec::<f64>()
            .unwrap(),
        [0.0, 0.25, 0.5, 0.75, 1.0]
    );
}

device_test!(eye_and_meshgrid);
fn eye_and_meshgrid(dev: &Device) {
    let _g = stats_read();
    for d in [DType::Bool, DType::I32, DType::F32, DType::C64] {
        for n in [0usize, 1, 4] {
            let v = (0..n * n)
                .map(|k| V::Bool(k / n.max(1) == k % n.max(1)).cast(d))
                .collect();
            o::assert_close(
                &Array::eye_on(n, d, dev),
                &OVal::new(d, &[n, n], v),
                Tol::EXACT,
                &format!("eye({n}, {d})"),
            );
        }
    }
    let x = iota(DType::F64, &[3]);
    let y = iota(DType::I32, &[2]);
    let z = iota(DType::F32, &[4]);
    let (xa, ya, za) = (x.to_lf(dev), y.to_lf(dev), z.to_lf(dev));
    // Xy with two inputs: shape (ny, nx), X[i, j] = x[j], Y[i, j] = y[i]
    let g = lf::meshgrid(&[&xa, &ya], lf::Indexing::Xy);
    assert_eq!(g.len(), 2);
    let xv = x.vals();
    let yv = y.vals();
    let zv = z.vals();
    let grid = |d: DType, shape: &[usize], f: &dyn Fn(&[usize]) -> V| {
        let a = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(shape), |i| f(i.slice()));
        OVal { dtype: d, a }
    };
    o::assert_close(
        &g[0],
        &grid(DType::F64, &[2, 3], &|i| xv[i[1]]),
        Tol::EXACT,
        "meshgrid xy X",
    );
    o::assert_close(
        &g[1],
        &grid(DType::I32, &[2, 3], &|i| yv[i[0]]),
        Tol::EXACT,
        "meshgrid xy Y",
    );
    let g = lf::meshgrid(&[&xa, &ya], lf::Indexing::Ij);
    o::assert_close(
        &g[0],
        &grid(DType::F64, &[3, 2], &|i| xv[i[0]]),
        Tol::EXACT,
        "meshgrid ij X",
    );
    o::assert_close(
        &g[1],
        &grid(DType::I32, &[3, 2], &|i| yv[i[1]]),
        Tol::EXACT,
        "meshgrid ij Y",
    );
    // three inputs: Xy gives (ny, nx, nz)
    let g = lf::meshgrid(&[&xa, &ya, &za], lf::Indexing::Xy);
    o::assert_close(
        &g[0],
        &grid(DType::F64, &[2, 3, 4], &|i| xv[i[1]]),
        Tol::EXACT,
        "meshgrid3 xy X",
    );
    o::assert_close(
        &g[1],
        &grid(DType::I32, &[2, 3, 4], &|i| yv[i[0]]),
        Tol::EXACT,
        "meshgrid3 xy Y",
    );
    o::assert_close(
        &g[2],
        &grid(DType::F32, &[2, 3, 4], &|i| zv[i[2]]),
        Tol::EXACT,
        "meshgrid3 xy Z",
    );
    let g = lf::meshgrid(&[&xa, &ya, &za], lf::Indexing::Ij);
    o::assert_close(
        &g[0],
        &grid(DType::F64, &[3, 2, 4], &|i| xv[i[0]]),
        Tol::EXACT,
        "meshgrid3 ij X",
    );
    o::assert_close(
        &g[2],
        &grid(DType::F32, &[3, 2, 4], &|i| zv[i[2]]),
        Tol::EXACT,
        "meshgrid3 ij Z",
    );
    // meshgrid outputs feed elementwise work: r^2 = X^2 + Y^2
    let g = lf::meshgrid(&[&xa, &ya], lf::Indexing::Xy);
    let r2 = g[0].square() + g[1].square();
    let w = grid(DType::F64, &[2, 3], &|i| {
        let (a, b) = (xv[i[1]].parts().0, yv[i[0]].parts().0);
        V::F64(a * a + b * b)
    });
    o::assert_close(&r2, &w, Tol::EXACT, "meshgrid r^2");
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

device_test!(random_uniform_and_normal);
fn random_uniform_and_normal(dev: &Device) {
    let _g = stats_read();
    let n = 100_000;
    for d in [DType::F32, DType::F64] {
        let get = |a: Array| -> Vec<f64> {
            OVal::fetch(&a)
                .unwrap()
                .vals()
                .iter()
                .map(|v| v.parts().0)
                .collect()
        };
        let u1 = get(lf::random::uniform_on(&[n], d, 42, dev));
        let u2 = get(lf::random::uniform_on(&[n], d, 42, dev));
        let u3 = get(lf::random::uniform_on(&[n], d, 43, dev));
        assert!(
            u1.iter().all(|&x| (0.0..1.0).contains(&x)),
            "uniform {d} outside [0, 1)"
        );
        assert_eq!(u1, u2, "same seed, same numbers ({d})");
        let same = u1.iter().zip(&u3).filter(|(a, b)| a == b).count();
        assert!(
            same < n / 100,
            "another seed gives other numbers ({d}: {same} equal)"
        );
        let (m, v) = mean_var(&u1);
        assert!(
            (m - 0.5).abs() < 0.01 && (v - 1.0 / 12.0).abs() < 0.005,
            "uniform {d}: mean {m}, var {v}"
        );
        // the numbers do not depend on the shape's rank
        let u4 = get(lf::random::uniform_on(&[100, 1000], d, 42, dev));
        assert_eq!(u1, u4, "uniform {d}: [n] and [100, 1000] differ");

        let g1 = get(lf::random::normal_on(&[n], d, 7, dev));
        let g2 = get(lf::random::normal_on(&[n], d, 7, dev));
        assert_eq!(g1, g2, "normal {d}: same seed");
        assert!(
            g1.iter().all(|x| x.is_finite()),
            "normal {d}: non-finite values"
        );
        let (m, v) = mean_var(&g1);
        assert!(
            m.abs() < 0.02 && (v - 1.0).abs() < 0.03,
            "normal {d}: mean {m}, var {v}"
        );
        let tail = g1.iter().filter(|x| x.abs() > 1.96).count() as f64 / n as f64;
        assert!(
            (tail - 0.05).abs() < 0.006,
            "normal {d}: P(|x| > 1.96) = {tail}"
        );

        // the same numbers on every device
        if dev.is_cuda() {
            let cpu = Device::cpu();
            let c = get(lf::random::uniform_on(&[n], d, 42, &cpu));
            assert_eq!(u1, c, "uniform {d}: CUDA and CPU differ");
            let c = get(lf::random::normal_on(&[n], d, 7, &cpu));
            let worst = g1
                .iter()
                .zip(&c)
                .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
                .fold(0.0, f64::max);
            assert!(worst < 1e-5, "normal {d}: CUDA and CPU differ by {worst}");
        }
    }
    // random numbers fuse into elementwise consumers
    let u = lf::random::uniform_on(&[1000], DType::F64, 5, dev);
    let s = (&u * 2.0 - 1.0).abs();
    let uv = u.to_vec::<f64>().unwrap();
    let w = OVal::new(
        DType::F64,
        &[1000],
        uv.iter().map(|x| V::F64((x * 2.0 - 1.0).abs())).collect(),
    );
    o::assert_close(&s, &w, Tol::EXACT, "uniform fused into abs");
}

device_test!(ndarray_arrays_and_views_round_trip);
/// `from_ndarray` takes owned arrays and views of any dimension and layout (ndarray 0.17's
/// `ArrayRef`, re-exported as `lf::ndarray`), and `to_host` gives the values back.
fn ndarray_arrays_and_views_round_trip(dev: &Device) {
    let _g = stats_read();
    use lf::ndarray::{s, Array2, Array3, ArrayD, IxDyn};
    let a = Array3::from_shape_fn((3, 4, 5), |(i, j, k)| (i * 100 + j * 10 + k) as f32);
    let cases: Vec<(&str, ArrayD<f32>, Array)> = vec![
        (
            "owned",
            a.clone().into_dyn(),
            Array::from_ndarray_on(&a, dev).unwrap(),
        ),
        (
            "strided slice",
            a.slice(s![.., 1..;2, ..;-1]).to_owned().into_dyn(),
            Array::from_ndarray_on(&a.slice(s![.., 1..;2, ..;-1]), dev).unwrap(),
        ),
        (
            "transposed view",
            a.t().to_owned().into_dyn(),
            Array::from_ndarray_on(&a.t(), dev).unwrap(),
        ),
        (
            "dynamic dimension",
            a.clone().into_dyn(),
            Array::from_ndarray_on(&a.view().into_dyn(), dev).unwrap(),
        ),
    ];
    for (what, want, got) in cases {
        assert_eq!(got.shape(), want.shape(), "{what}: shape");
        assert_eq!(got.dtype(), DType::F32, "{what}: dtype");
        assert_eq!(got.to_host::<f32>().unwrap(), want, "{what}");
    }
    let b = Array2::<f64>::zeros((0, 3));
    let e = Array::from_ndarray_on(&b, dev).unwrap();
    assert_eq!(e.shape(), &[0, 3]);
    assert_eq!(
        e.to_host::<f64>().unwrap(),
        ArrayD::<f64>::zeros(IxDyn(&[0, 3]))
    );
}

device_test!(large_readbacks_and_uploads_round_trip);
fn large_readbacks_and_uploads_round_trip(dev: &Device) {
    let _g = stats_read();
    // above the 8 MB from which CUDA readbacks go through alternating staging halves,
    // with a length that leaves a partial last chunk
    let n = 3 * (1 << 20) + 7;
    let host: Vec<f32> = (0..n).map(|i| (i % 100_003) as f32 * 0.5).collect();
    let a = Array::from_slice_on(&host, &[n], dev).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), host);
    let b = (&a * 2.0).slice(lf::s![1..]);
    let got = b.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), n - 1);
    assert!(got.iter().zip(&host[1..]).all(|(g, h)| *g == h * 2.0));
}

device_test!(copy_to_slice_fills_a_reused_destination);
fn copy_to_slice_fills_a_reused_destination(dev: &Device) {
    let _g = stats_read();
    // sizes around the staging chunks (256 KiB, 1 MiB quarters, 4 MiB) with partial last
    // chunks; the destination starts with values no result has, and is reused
    let mut dst: Vec<f32> = Vec::new();
    for n in [
        0usize,
        1,
        3,
        783,
        (1 << 16) + 5,
        (1 << 18) + 3,
        3 * (1 << 20) + 7,
    ] {
        let host: Vec<f32> = (0..n).map(|i| (i % 100_003) as f32 * 0.25).collect();
        let a = Array::from_slice_on(&host, &[n], dev).unwrap();
        dst.clear();
        dst.resize(n, f32::NAN);
        a.copy_to_slice(&mut dst).unwrap();
        assert_eq!(dst, host, "n = {n}");
        // a computed, permuted result, read into the same memory again
        let rows = n / 3;
        let b = (&a.slice(lf::s![..3 * rows]).reshape(&[rows as isize, 3]) * 2.0).transpose();
        dst.truncate(3 * rows);
        dst.iter_mut().for_each(|v| *v = f32::NAN);
        b.copy_to_slice(&mut dst).unwrap();
        let want: Vec<f32> = (0..3)
            .flat_map(|c| (0..rows).map(move |r| (r, c)))
            .map(|(r, c)| host[3 * r + c] * 2.0)
            .collect();
        assert_eq!(dst, want, "transposed, n = {n}");
    }
    let ints = Array::from_slice_on(&[5i64, -1, 7], &[3], dev).unwrap();
    let mut out = [0i64; 3];
    ints.copy_to_slice(&mut out).unwrap();
    assert_eq!(out, [5, -1, 7]);
    let flags = ints.gt(0i64);
    let mut out = [true, false, true];
    flags.copy_to_slice(&mut out).unwrap();
    assert_eq!(out, [true, false, true]);
    let z = Array::from_slice_on(&[c32::new(1.0, -2.0)], &[1], dev).unwrap();
    let mut out = [c32::new(0.0, 0.0)];
    (&z * 3.0f32).copy_to_slice(&mut out).unwrap();
    assert_eq!(out, [c32::new(3.0, -6.0)]);
    // a wrong length or dtype is an error naming the operation; nothing is written
    let mut short = [9.0f32; 2];
    match ints.astype(DType::F32).copy_to_slice(&mut short) {
        Err(lf::Error::Shape { op, msg }) => {
            assert_eq!(op, "copy_to_slice");
            assert!(msg.contains("[3]"), "{msg}");
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert_eq!(short, [9.0; 2]);
    let mut wrong = [0.0f64; 3];
    assert!(matches!(
        ints.copy_to_slice(&mut wrong),
        Err(lf::Error::DType {
            op: "copy_to_slice",
            ..
        })
    ));
}

device_test!(copy_to_slice_into_page_locked_memory);
fn copy_to_slice_into_page_locked_memory(dev: &Device) {
    let _g = stats_read();
    // a PinnedVec destination (page-locked on CUDA: the direct DMA path) gets the same
    // values as a Vec, whole or in parts of it (a part is still one page-locked buffer);
    // the memory starts zeroed and the neighbours of a part stay untouched
    for n in [0usize, 1, 3, 783, (1 << 18) + 3, (1 << 20) + 1] {
        let mut pinned = lf::PinnedVec::<f32>::zeros(n + 2, dev).unwrap();
        assert_eq!(pinned.len(), n + 2);
        assert_eq!(pinned.is_page_locked(), dev.is_cuda());
        assert!(pinned.iter().all(|&v| v == 0.0), "zeroed, n = {n}");
        pinned.iter_mut().for_each(|v| *v = -1.0);
        let host: Vec<f32> = (0..n).map(|i| (i % 9973) as f32 - 17.5).collect();
        let a = Array::from_slice_on(&host, &[n], dev).unwrap();
        let b = (&a * 0.001).exp();
        b.copy_to_slice(&mut pinned[1..n + 1]).unwrap();
        let want = b.to_vec::<f32>().unwrap();
        assert_eq!(&pinned[1..n + 1], &want[..], "n = {n}");
        assert_eq!((pinned[0], pinned[n + 1]), (-1.0, -1.0), "n = {n}");
        // reused, whole, for another result
        let c = a.sqrt() + 1.0;
        let mut whole = lf::PinnedVec::<f32>::zeros(n, dev).unwrap();
        c.copy_to_slice(&mut whole).unwrap();
        let want: Vec<f32> = host.iter().map(|&x| x.sqrt() + 1.0).collect();
        assert_eq!(whole.len(), want.len());
        for (g, w) in whole.iter().zip(&want) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{g} {w}"
            );
        }
    }
    // other dtypes: bools and complex numbers
    let flags = Array::from_slice_on(&[3i64, -1, 0, 8], &[4], dev)
        .unwrap()
        .gt(0i64);
    let mut out = lf::PinnedVec::<bool>::zeros(4, dev).unwrap();
    flags.copy_to_slice(&mut out).unwrap();
    assert_eq!(&out[..], &[true, false, false, true]);
    let z = Array::from_slice_on(&[c32::new(1.0, -2.0), c32::new(0.5, 4.0)], &[2], dev).unwrap();
    let mut out = lf::PinnedVec::<c32>::zeros(2, dev).unwrap();
    (&z * 2.0f32).copy_to_slice(&mut out).unwrap();
    assert_eq!(&out[..], &[c32::new(2.0, -4.0), c32::new(1.0, 8.0)]);
    // a wrong length is the same error as for any slice
    let mut short = lf::PinnedVec::<bool>::zeros(3, dev).unwrap();
    assert!(matches!(
        flags.copy_to_slice(&mut short),
        Err(lf::Error::Shape {
            op: "copy_to_slice",
            ..
        })
    ));
}

device_test!(uploads_from_page_locked_memory_do_not_see_later_writes);
fn uploads_from_page_locked_memory_do_not_see_later_writes(dev: &Device) {
    let _g = stats_read();
    // a page-locked source is read by DMA, not staged: an upload must have read it before
    // it returns, so writing the memory right after cannot change the array (sizes on both
    // sides of the 8 MiB direct-copy limit)
    for n in [0usize, 1, 783, (1 << 21) + 3, (3 << 20) + 1] {
        let mut src = lf::PinnedVec::<f32>::zeros(n, dev).unwrap();
        for (i, v) in src.iter_mut().enumerate() {
            *v = (i % 1009) as f32 + 0.5;
        }
        let want = src.to_vec();
        let a = Array::from_slice_on(&src, &[n], dev).unwrap();
        src.iter_mut().for_each(|v| *v = -7.0);
        let b = Array::from_slice_on(&src[..n / 2], &[n / 2], dev).unwrap();
        src.iter_mut().for_each(|v| *v = f32::NAN);
        assert_eq!(a.to_vec::<f32>().unwrap(), want, "n = {n}");
        assert!(
            b.to_vec::<f32>().unwrap().iter().all(|&v| v == -7.0),
            "n = {n}"
        );
    }
}
