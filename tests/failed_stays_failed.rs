//! A failed evaluation stays failed: an out-of-range gather's error is returned by every
//! later readback, print and eval of the result and of everything computed from it, on
//! every device, while unrelated arrays read back normally.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};

fn idx(v: Vec<i64>, dev: &lf::Device) -> Array {
    let n = v.len();
    Array::from_vec_on(v, &[n], dev).unwrap()
}

fn assert_index_error<T: std::fmt::Debug>(r: lf::Result<T>, what: &str) -> String {
    match r {
        Err(e @ lf::Error::Index { .. }) => {
            let s = e.to_string();
            assert!(
                s.contains("an index is out of range for axis 0 of length 5"),
                "{what}: {s}"
            );
            s
        }
        other => panic!("{what}: expected an index error, got {other:?}"),
    }
}

device_test!(out_of_range_take_fails_every_time);
fn out_of_range_take_fails_every_time(dev: &Device) {
    for source in ["from_vec", "arange"] {
        let a = match source {
            "from_vec" => Array::from_vec_on(vec![10f32, 11., 12., 13., 14.], &[5], dev),
            _ => Ok(Array::arange_on(10.0, 15.0, 1.0, DType::F32, dev)),
        }
        .unwrap();
        a.eval().unwrap();
        let t = a.take(&idx(vec![0, 9], dev), 0);
        let first = assert_index_error(t.to_vec::<f32>(), source);
        let second = assert_index_error(t.to_vec::<f32>(), source);
        assert_eq!(first, second, "{source}");
        assert_index_error(t.to_host::<f32>(), source);
        assert_index_error(t.slice(lf::s![..1]).item::<f32>(), source);
        assert_index_error(t.eval(), source);
        assert_index_error(lf::eval(&[&t]), source);
        // dependents fail the same way
        let u = (&t * 2.0 + 1.0).sum();
        assert_index_error(u.item::<f32>(), source);
        assert_index_error(u.item::<f32>(), source);
        let printed = format!("{t}");
        assert!(printed.contains("out of range"), "{source}: {printed}");
        // unrelated work is not affected
        let ok = a.take(&idx(vec![4, -5], dev), 0);
        assert_eq!(ok.to_vec::<f32>().unwrap(), vec![14.0, 10.0], "{source}");
        assert_eq!(
            (&a + 1.0).to_vec::<f32>().unwrap(),
            vec![11., 12., 13., 14., 15.]
        );
    }
}

device_test!(failure_survives_a_chain_of_gathers);
fn failure_survives_a_chain_of_gathers(dev: &Device) {
    let a = Array::from_vec_on(vec![1f64, 2., 3., 4., 5.], &[5], dev).unwrap();
    let mut x = a.clone();
    // 40 gathers (more checks than one node keeps unfolded), one of them out of range
    for step in 0..40 {
        let i = if step == 17 {
            vec![7i64, 0, 1, 2, 3]
        } else {
            vec![4i64, 0, 1, 2, 3]
        };
        x = x.take(&idx(i, dev), 0);
        if step % 5 == 0 {
            x.eval().ok();
        }
    }
    assert_index_error(x.to_vec::<f64>(), "chain");
    assert_index_error(x.to_vec::<f64>(), "chain");
    // the same chain without a bad step reads back a rotation of `a`
    let mut y = a.clone();
    for _ in 0..41 {
        y = y.take(&idx(vec![4i64, 0, 1, 2, 3], dev), 0);
    }
    // each step rotates right by one: 41 steps are one rotation
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![5., 1., 2., 3., 4.]);
}

device_test!(the_error_names_the_gather_once);
fn the_error_names_the_gather_once(dev: &Device) {
    let a = Array::from_vec_on(vec![10f32, 11., 12., 13., 14.], &[5], dev).unwrap();
    let t = a.take(&idx(vec![0, 9], dev), 0);
    let e = t.to_vec::<f32>().unwrap_err().to_string();
    assert_eq!(e.matches("take").count(), 1, "{e}");
    let printed = format!("{t}");
    assert_eq!(printed.matches("take").count(), 1, "{printed}");
}
