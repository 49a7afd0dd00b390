//! Gradients (`lf::grad`, `lf::value_and_grad`, `lf::vjp`, `stop_gradient`) against central
//! finite differences in f64 on fixed pseudo-random inputs: elementwise rules, broadcasting,
//! views, reductions, `where_`, matmul; errors for what has no gradient; fusion of the
//! backward pass by kernel count.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, DType, Device};

/// A named one-operand case.
type Unary = (&'static str, fn(&Array) -> Array);
/// A named two-operand case.
type Binary = (&'static str, fn(&Array, &Array) -> Array);

use common::uniform as data;

/// Checks `lf::grad` of `f` at `inputs` (values, shape) against central differences of
/// `f` evaluated on the device, element by element: shape and dtype first, then values
/// within `tol` (relative to max(1, |difference quotient|)).
fn check_grad(
    what: &str,
    dev: &Device,
    inputs: &[(Vec<f64>, Vec<usize>)],
    f: impl Fn(&[Array]) -> Array,
) {
    let arrays: Vec<Array> = inputs
        .iter()
        .map(|(v, s)| Array::from_vec_on(v.clone(), s, dev).expect("upload"))
        .collect();
    let refs: Vec<&Array> = arrays.iter().collect();
    let loss = f(&arrays);
    let (value, grads) = lf::value_and_grad(&loss, &refs).expect("gradient");
    lf::eval(&[&value]).expect("loss");
    assert_eq!(grads.len(), inputs.len(), "{what}: one gradient per input");
    let eps = 1e-6;
    for (k, ((vals, shape), g)) in inputs.iter().zip(&grads).enumerate() {
        assert_eq!(g.shape(), &shape[..], "{what}: gradient {k} shape");
        assert_eq!(g.dtype(), DType::F64, "{what}: gradient {k} dtype");
        let got = g.to_vec::<f64>().expect("gradient values");
        for j in 0..vals.len() {
            let at = |d: f64| {
                let moved: Vec<Array> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, (v, s))| {
                        let mut v = v.clone();
                        if i == k {
                            v[j] += d;
                        }
                        Array::from_vec_on(v, s, dev).expect("upload")
                    })
                    .collect();
                f(&moved).item::<f64>().expect("loss value")
            };
            let fd = (at(eps) - at(-eps)) / (2.0 * eps);
            let tol = 1e-5 * fd.abs().max(1.0);
            assert!(
                (got[j] - fd).abs() <= tol,
                "{what}: d/d input {k} [{j}]: gradient {} vs finite difference {fd}",
                got[j]
            );
        }
    }
}

device_test!(elementwise_unary_rules);
fn elementwise_unary_rules(dev: &Device) {
    // in (0.2, 0.9): inside every function's domain, away from kinks
    let x = (data(7, 1, 0.2, 0.9), vec![7]);
    let cases: Vec<Unary> = vec![
        ("neg", |x| -x),
        ("abs", |x| (x - 0.5).abs()),
        ("sqrt", |x| x.sqrt()),
        ("rsqrt", |x| x.rsqrt()),
        ("exp", |x| x.exp()),
        ("expm1", |x| x.expm1()),
        ("log", |x| x.log()),
        ("log1p", |x| x.log1p()),
        ("log2", |x| x.log2()),
        ("log10", |x| x.log10()),
        ("sin", |x| x.sin()),
        ("cos", |x| x.cos()),
        ("tan", |x| x.tan()),
        ("asin", |x| x.asin()),
        ("acos", |x| x.acos()),
        ("atan", |x| x.atan()),
        ("sinh", |x| x.sinh()),
        ("cosh", |x| x.cosh()),
        ("tanh", |x| x.tanh()),
        ("square", |x| x.square()),
        ("reciprocal", |x| x.reciprocal()),
        ("floor", |x| (x * 3.0).floor() + x),
    ];
    for (name, f) in cases {
        check_grad(name, dev, std::slice::from_ref(&x), |a| {
            (f(&a[0]) * 1.5).sum()
        });
    }
    // a chain through several rules at once
    check_grad("chain", dev, std::slice::from_ref(&x), |a| {
        let x = &a[0];
        ((((x * 2.0 - 1.0).sin() * x).exp() + x).sqrt().abs() * 3.0 - x).sum()
    });
}

device_test!(elementwise_binary_rules);
fn elementwise_binary_rules(dev: &Device) {
    let x = (data(6, 2, 0.3, 1.7), vec![2, 3]);
    let y = (data(6, 3, 0.4, 1.9), vec![2, 3]);
    let cases: Vec<Binary> = vec![
        ("add", |x, y| x + y),
        ("sub", |x, y| x - y),
        ("mul", |x, y| x * y),
        ("div", |x, y| x / y),
        ("maximum", |x, y| x.maximum(y)),
        ("minimum", |x, y| x.minimum(y)),
        ("pow", |x, y| x.pow(y)),
        ("atan2", |x, y| x.atan2(y)),
        ("hypot", |x, y| x.hypot(y)),
        ("mod", |x, y| (x * 3.0) % y),
        ("scalar sides", |x, y| 2.0 / x + y * 0.5 - 1.0),
        ("shared operand", |x, _| x * x * x),
    ];
    for (name, f) in cases {
        check_grad(name, dev, &[x.clone(), y.clone()], |a| {
            (f(&a[0], &a[1]) * &a[1]).sum()
        });
    }
}

device_test!(ties_split_evenly);
fn ties_split_evenly(dev: &Device) {
    // JAX's convention: at a tie, each operand of maximum/minimum gets half
    let x = Array::from_vec_on(vec![1.0f64, 2.0, 3.0], &[3], dev).expect("x");
    let y = Array::from_vec_on(vec![1.0f64, 5.0, 0.0], &[3], dev).expect("y");
    let g = lf::grad(&x.maximum(&y).sum(), &[&x, &y]).expect("grad");
    assert_eq!(g[0].to_vec::<f64>().expect("gx"), vec![0.5, 0.0, 1.0]);
    assert_eq!(g[1].to_vec::<f64>().expect("gy"), vec![0.5, 1.0, 0.0]);
    let m = Array::from_vec_on(vec![4.0f64, 1.0, 4.0, 2.0], &[4], dev).expect("m");
    let g = lf::grad(&m.max(), &[&m]).expect("grad");
    assert_eq!(g[0].to_vec::<f64>().expect("gm"), vec![0.5, 0.0, 0.5, 0.0]);
}

device_test!(broadcasting_sums_over_broadcast_axes);
fn broadcasting_sums_over_broadcast_axes(dev: &Device) {
    let x = (data(3, 4, -1.0, 1.0), vec![3, 1]);
    let y = (data(4, 5, -1.0, 1.0), vec![4]);
    let z = (data(1, 6, -1.0, 1.0), vec![]);
    check_grad("broadcast", dev, &[x, y, z], |a| {
        ((&a[0] + &a[1]) * &a[1] * &a[2]).sin().sum()
    });
}

device_test!(views_and_movement);
fn views_and_movement(dev: &Device) {
    let x = (data(12, 7, -1.0, 1.0), vec![3, 4]);
    let w = (data(12, 8, -1.0, 1.0), vec![2, 6]);
    check_grad("reshape and transpose", dev, &[x.clone(), w], |a| {
        (a[0].reshape(&[6, 2]).transpose() * &a[1]).sum()
    });
    check_grad("permute of rank 3", dev, std::slice::from_ref(&x), |a| {
        let p = a[0].reshape(&[3, 2, 2]).permute(&[2, 0, 1]);
        (p.exp() * Array::arange(0.0, 12.0, 1.0, DType::F64).reshape(&[2, 3, 2])).sum()
    });
}

device_test!(slices_pads_rolls_and_concatenation);
fn slices_pads_rolls_and_concatenation(dev: &Device) {
    let x = (data(30, 16, -1.0, 1.0), vec![5, 6]);
    let cases: Vec<Unary> = vec![
        ("slice", |x| x.slice(lf::s![1..4, 2..5])),
        ("strided slice", |x| x.slice(lf::s![..;2, 1..;3])),
        ("reversed slice", |x| x.slice(lf::s![..;-1, 1..5;-2])),
        ("index", |x| x.slice(lf::s![2, ..])),
        ("flip", |x| x.flip(1)),
        ("pad", |x| x.pad(&[(1, 2), (0, 3)], 0.5)),
        ("roll", |x| x.roll(2, 1).roll(-1, 0)),
        ("concatenate", |x| {
            lf::concatenate(&[x, &x.slice(lf::s![.., 1..3]).exp(), x], 1)
        }),
    ];
    for (name, f) in cases {
        check_grad(name, dev, std::slice::from_ref(&x), move |a| {
            let y = f(&a[0]);
            // weights that tell every output position apart
            let shape: Vec<isize> = y.shape().iter().map(|&d| d as isize).collect();
            let w = Array::arange(1.0, y.size() as f64 + 1.0, 1.0, DType::F64).reshape(&shape);
            (y.sin() * (w * 0.1)).sum()
        });
    }
}

device_test!(complex_intermediates);
fn complex_intermediates(dev: &Device) {
    let x = (data(6, 17, 0.2, 1.2), vec![6]);
    let y = (data(6, 18, -0.9, 0.9), vec![6]);
    let cases: Vec<Binary> = vec![
        ("mul, div, exp, conj", |x, y| {
            let z = lf::complex(x, y);
            (&(&z * &z) + &(&z.exp() * &z.conj() / &(&z + 2.0))).abs()
        }),
        ("real, imag, angle", |x, y| {
            let z = lf::complex(x, y);
            z.sin().real() * z.imag() + z.angle() + z.log().imag()
        }),
        ("sqrt, square, reciprocal, tanh", |x, y| {
            let z = lf::complex(&(x + 1.0), y);
            (z.sqrt() + z.square() * 0.1 + z.reciprocal() + z.tanh()).abs()
        }),
        ("cast to complex", |x, y| {
            let z = x.astype(DType::C128) * lf::complex(y, x);
            z.abs() + z.real()
        }),
        ("complex pow, both operands complex", |x, y| {
            let z = lf::complex(&(x + 0.5), y);
            let w = lf::complex(&(y * 0.5 + 1.0), &(x * 0.3));
            z.pow(&w).abs() + z.pow(&w).real()
        }),
    ];
    for (name, f) in cases {
        check_grad(name, dev, &[x.clone(), y.clone()], |a| {
            f(&a[0], &a[1]).sum()
        });
    }
}

device_test!(transforms);
fn transforms(dev: &Device) {
    let x = (data(24, 19, -1.0, 1.0), vec![4, 6]);
    let y = (data(24, 20, -1.0, 1.0), vec![4, 6]);
    let cases: Vec<Binary> = vec![
        ("fft of complex", |x, y| {
            lf::fft::fft(&lf::complex(x, y), -1).abs()
        }),
        ("ifft2 of complex", |x, y| {
            lf::fft::ifft2(&lf::complex(x, y)).real() * y
        }),
        ("fft2 of real (half spectrum and its mirror)", |x, y| {
            lf::fft::fft2(x).abs().square() * (y + 2.0)
        }),
        ("fft of real along the first axis", |x, y| {
            lf::fft::fft(&(x * y), 0).imag()
        }),
        ("rfft2", |x, y| {
            lf::fft::rfft2(x).abs() * lf::fft::rfft2(y).real()
        }),
        ("irfft", |x, y| {
            let h = lf::complex(x, y).slice(lf::s![.., ..4]);
            lf::fft::irfft(&h, Some(6), -1) * x
        }),
        ("irfft2 of odd length", |x, y| {
            let h = lf::complex(x, y).slice(lf::s![.., ..3]);
            lf::fft::irfftn(&h, Some(5), &[0, 1]).sin()
        }),
        ("ortho norm", |x, y| {
            lf::fft::fftn_norm(&lf::complex(x, y), &[0, 1], lf::fft::Norm::Ortho).abs()
        }),
        ("optics: |fft2(aperture * e^{i phase})|^2", |x, y| {
            let field = lf::complex(&x.cos(), &x.sin()) * y.abs();
            lf::fft::fft2(&field).abs().square() * 0.01
        }),
    ];
    for (name, f) in cases {
        check_grad(name, dev, &[x.clone(), y.clone()], |a| {
            let v = f(&a[0], &a[1]);
            let shape: Vec<isize> = v.shape().iter().map(|&d| d as isize).collect();
            let w = Array::arange(1.0, v.size() as f64 + 1.0, 1.0, DType::F64).reshape(&shape);
            (v * (w * 0.05).sin()).sum()
        });
    }
}

device_test!(reductions);
fn reductions(dev: &Device) {
    let x = (data(12, 9, 0.5, 1.5), vec![3, 4]);
    check_grad("sum over an axis", dev, std::slice::from_ref(&x), |a| {
        a[0].sum_axes(&[1], false).square().sum()
    });
    check_grad(
        "sum over the first axis",
        dev,
        std::slice::from_ref(&x),
        |a| a[0].sum_axes(&[0], false).exp().sum(),
    );
    check_grad("mean", dev, std::slice::from_ref(&x), |a| {
        a[0].mean_axes(&[0], true).square().sum() + a[0].mean()
    });
    check_grad("max and min", dev, std::slice::from_ref(&x), |a| {
        a[0].max_axes(&[1], false).sum() - a[0].min_axes(&[0], false).sum()
    });
    check_grad("prod", dev, std::slice::from_ref(&x), |a| {
        a[0].prod_axes(&[1], false).sum()
    });
    check_grad("var and std", dev, std::slice::from_ref(&x), |a| {
        a[0].var_axes(&[1], 1, false).sum() + a[0].std()
    });
    check_grad("cumsum", dev, std::slice::from_ref(&x), |a| {
        (a[0].cumsum(1).sin() + a[0].cumsum(0).square()).sum()
    });
    check_grad("cumprod", dev, std::slice::from_ref(&x), |a| {
        a[0].cumprod(1).sum() + a[0].cumprod(0).sin().sum()
    });
    check_grad("norm", dev, std::slice::from_ref(&x), |a| {
        lf::linalg::norm(&a[0])
    });
}

device_test!(where_routes_the_cotangent);
fn where_routes_the_cotangent(dev: &Device) {
    let x = (data(9, 10, -1.0, 1.0), vec![9]);
    check_grad("where", dev, std::slice::from_ref(&x), |a| {
        let x = &a[0];
        lf::where_(&x.gt(0.1), x * x, -x).sum()
    });
    let m = (data(12, 24, -1.0, 1.0), vec![3, 4]);
    let u = (data(2, 25, -1.0, 1.0), vec![2]);
    check_grad("indexed updates", dev, &[m, u], |a| {
        let (m, u) = (&a[0], &a[1]);
        let y = m.at(lf::s![1, 1..3]).set(u.exp());
        let y = y
            .at(lf::s![.., 0])
            .add(2.0)
            .at(lf::s![2, ..;2])
            .mul(m.slice(lf::s![0, ..2]));
        y.masked_fill(&m.gt(0.5), 0.25).sin().sum()
    });
}

device_test!(matmul_rules);
fn matmul_rules(dev: &Device) {
    let a = (data(6, 11, -1.0, 1.0), vec![2, 3]);
    let b = (data(12, 12, -1.0, 1.0), vec![3, 4]);
    check_grad("matrices", dev, &[a.clone(), b.clone()], |x| {
        x[0].matmul(&x[1]).sin().sum()
    });
    let v = (data(3, 13, -1.0, 1.0), vec![3]);
    check_grad("vector @ matrix", dev, &[v.clone(), b], |x| {
        x[0].matmul(&x[1]).square().sum()
    });
    let batch = (data(12, 14, -1.0, 1.0), vec![2, 2, 3]);
    check_grad("batch broadcast", dev, &[batch, v], |x| {
        x[0].matmul(&x[1]).exp().sum()
    });
}

device_test!(stop_gradient_and_unused_inputs);
fn stop_gradient_and_unused_inputs(dev: &Device) {
    let x = Array::from_vec_on(vec![1.0f64, -2.0, 3.0], &[3], dev).expect("x");
    let y = Array::from_vec_on(vec![4.0f64, 5.0, 6.0], &[3], dev).expect("y");
    // d/dx sum(x * stop(x)) = stop(x) = x, not 2x
    let g = lf::grad(&(&x * &x.stop_gradient()).sum(), &[&x, &y]).expect("grad");
    assert_eq!(g[0].to_vec::<f64>().expect("gx"), vec![1.0, -2.0, 3.0]);
    // y takes no part: zeros of its shape
    assert_eq!(g[1].shape(), &[3]);
    assert_eq!(g[1].to_vec::<f64>().expect("gy"), vec![0.0, 0.0, 0.0]);
    // the marker keeps the values
    assert_eq!(
        x.stop_gradient().to_vec::<f64>().expect("values"),
        vec![1.0, -2.0, 3.0]
    );
}

device_test!(vjp_takes_cotangents);
fn vjp_takes_cotangents(dev: &Device) {
    let x = Array::from_vec_on(vec![1.0f64, 2.0, 3.0], &[3], dev).expect("x");
    let c = Array::from_vec_on(vec![1.0f64, 10.0, 100.0], &[3], dev).expect("c");
    let y = &x * &x;
    let g = lf::vjp(&[&y], &[&c], &[&x]).expect("vjp");
    // d(sum(c * x^2))/dx = 2 c x
    assert_eq!(g[0].to_vec::<f64>().expect("g"), vec![2.0, 40.0, 600.0]);
}

device_test!(errors_name_the_problem);
fn errors_name_the_problem(dev: &Device) {
    let x = Array::from_vec_on(vec![1.0f64, 2.0], &[2], dev).expect("x");
    // a loss that is not 0-d
    let e = lf::grad(&(&x * 2.0), &[&x]).expect_err("not 0-d");
    assert!(e.to_string().contains("0-d"), "{e}");
    // an integer input
    let i = Array::from_vec_on(vec![1i32, 2], &[2], dev).expect("i");
    let e = lf::grad(&i.astype(DType::F64).sum(), &[&i]).expect_err("integer wrt");
    assert!(e.to_string().contains("int32"), "{e}");
    // an intermediate evaluated before the gradient was asked for
    let y = x.exp();
    y.eval().expect("eval");
    let e = lf::grad(&y.sum(), &[&x]).expect_err("evaluated intermediate");
    assert!(e.to_string().contains("evaluated"), "{e}");
    assert!(e.to_string().contains("exp"), "{e}");
    // an evaluated loss: its expression is gone
    let l = (&x * &x).sum();
    l.eval().expect("eval");
    let e = lf::grad(&l, &[&x]).expect_err("evaluated loss");
    assert!(e.to_string().contains("value_and_grad"), "{e}");
    // an evaluated array not computed straight from `wrt` is a constant
    let c = &Array::from_vec_on(vec![3.0f64, 4.0], &[2], dev).expect("c") * 2.0;
    c.eval().expect("eval");
    let g = lf::grad(&(&x * &c).sum(), &[&x]).expect("grad");
    assert_eq!(g[0].to_vec::<f64>().expect("g"), vec![6.0, 8.0]);
    // a gather whose one-hot gradient would take 4.9e9 comparisons: a scatter-add of
    // 70000 ones into index 0 (formerly refused)
    let big = Array::zeros_on(&[70_000], DType::F64, dev);
    let idx = Array::zeros_on(&[70_000], DType::I64, dev);
    let g = lf::grad(&big.take(&idx, 0).sum(), &[&big]).expect("scatter-add");
    let g = g[0].to_vec::<f64>().expect("g");
    assert_eq!(
        (g.len(), g[0], g[1..].iter().sum::<f64>()),
        (70_000, 70_000.0, 0.0)
    );
    // mismatched cotangents
    let e = lf::vjp(&[&x], &[], &[&x]).expect_err("count");
    assert!(e.to_string().contains("cotangents"), "{e}");
}

device_test!(gathers_scatter_add_their_cotangents);
fn gathers_scatter_add_their_cotangents(dev: &Device) {
    let x = (data(12, 31, -1.0, 1.0), vec![3, 4]);
    let y = (data(6, 32, 0.5, 1.5), vec![3, 2]);
    // repeated and negative indices: their cotangents accumulate
    let take2 = Array::from_vec_on(vec![0i64, -1, 2, 0], &[2, 2], dev).expect("indices");
    let along = Array::from_vec_on(vec![3i64, 3, 0, 1, -2, 1], &[3, 2], dev).expect("indices");
    let row = Array::from_vec_on(vec![2i64, 2, 0, 1], &[1, 4], dev).expect("indices");
    let f = |a: &[Array]| {
        let t = a[0].take(&take2, 1); // [3, 2, 2]: an index array of rank 2 on axis 1
        let s = lf::take_along_axis(&a[0], &along, 1) * &a[1]; // [3, 2]
        let r = lf::take_along_axis(&a[0], &row, 0); // indices broadcast over the rows
        (t.square() * 0.5).sum() + s.sin().sum() + (r * &a[0]).sum()
    };
    check_grad("take, take_along_axis", dev, &[x.clone(), y.clone()], f);
    // the gradient with respect to the gathered source counts each index's uses
    let v = Array::from_vec_on(vec![1.0f64, 2.0, 3.0], &[3], dev).expect("v");
    let i = Array::from_vec_on(vec![2i64, 2, -3, 2], &[4], dev).expect("i");
    let g = lf::grad(&v.take(&i, 0).sum(), &[&v]).expect("grad");
    assert_eq!(g[0].shape(), &[3]);
    assert_eq!(g[0].to_vec::<f64>().expect("g"), vec![1.0, 0.0, 3.0]);
}

device_test!(large_gathers_scatter_add_in_one_step);
fn large_gathers_scatter_add_in_one_step(dev: &Device) {
    // Beyond the one-hot form's budget (k * n * the other axes > 2^22 comparisons) the
    // source's cotangent is one scatter-add step; against a host oracle that adds each
    // cotangent at its index (repeats and negative indices accumulate).
    let (rows, n, k) = (3usize, 2503usize, 2001usize);
    let xv = data(rows * n, 61, -1.0, 1.0);
    let wv = data(rows * k, 62, 0.5, 1.5);
    let iv: Vec<i64> = common::xorshift(k, 63)
        .map(|r| (r % (2 * n as u64)) as i64 - n as i64)
        .collect();
    let x = Array::from_vec_on(xv.clone(), &[rows, n], dev).expect("x");
    let w = Array::from_vec_on(wv.clone(), &[rows, k], dev).expect("w");
    let idx = Array::from_vec_on(iv.clone(), &[k], dev).expect("indices");
    let at = |j: i64| {
        if j < 0 {
            (j + n as i64) as usize
        } else {
            j as usize
        }
    };
    // take along axis 1: d/dx[p, j] = sum over i with idx[i] = j of w[p, i]
    let loss = (x.take(&idx, 1) * &w).sum();
    let g = lf::grad(&loss, &[&x]).expect("grad");
    assert_eq!(lf::debug::library_count(&[&g[0]]).expect("plan"), 1);
    assert_eq!((g[0].shape(), g[0].dtype()), (&[rows, n][..], DType::F64));
    let mut want = vec![0.0f64; rows * n];
    for p in 0..rows {
        for (i, &j) in iv.iter().enumerate() {
            want[p * n + at(j)] += wv[p * k + i];
        }
    }
    let got = g[0].to_vec::<f64>().expect("gradient");
    for (e, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-12 * b.abs().max(1.0),
            "take [{e}]: {a} vs {b}"
        );
    }
    // a float16 source adds in float32 and comes back as float16
    let x16 = x.astype(DType::F16);
    x16.eval().expect("x16");
    let loss = (x16.take(&idx, 1).astype(DType::F64) * &w).sum();
    let g = lf::grad(&loss, &[&x16]).expect("grad");
    assert_eq!((g[0].shape(), g[0].dtype()), (&[rows, n][..], DType::F16));
    let got = g[0].astype(DType::F64).to_vec::<f64>().expect("gradient");
    for (e, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= 2e-3 * b.abs().max(1.0),
            "f16 take [{e}]: {a} vs {b}"
        );
    }
    // take_along_axis along axis 0 of a [n, 3] complex source, per-column indices, in
    // complex64: d/dz of sum(|gathered|^2) is 2 z times the uses of each element
    let zr = data(n * rows, 64, -1.0, 1.0);
    let zi = data(n * rows, 65, -1.0, 1.0);
    let jv: Vec<i64> = common::xorshift(k * rows, 66)
        .map(|r| (r % n as u64) as i64)
        .collect();
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let z = lf::complex(
        &Array::from_vec_on(f32s(&zr), &[n, rows], dev).expect("re"),
        &Array::from_vec_on(f32s(&zi), &[n, rows], dev).expect("im"),
    );
    let along = Array::from_vec_on(jv.clone(), &[k, rows], dev).expect("indices");
    let loss = lf::take_along_axis(&z, &along, 0).abs().square().sum();
    let g = lf::grad(&loss, &[&z]).expect("grad");
    assert_eq!(lf::debug::library_count(&[&g[0]]).expect("plan"), 1);
    assert_eq!((g[0].shape(), g[0].dtype()), (&[n, rows][..], DType::C64));
    let mut uses = vec![0.0f64; n * rows];
    for (t, &j) in jv.iter().enumerate() {
        uses[j as usize * rows + t % rows] += 1.0;
    }
    let re = g[0].real().to_vec::<f32>().expect("re");
    let im = g[0].imag().to_vec::<f32>().expect("im");
    for e in 0..n * rows {
        let (wr, wi) = (2.0 * uses[e] * zr[e], 2.0 * uses[e] * zi[e]);
        assert!(
            (re[e] as f64 - wr).abs() <= 1e-5 * wr.abs().max(1.0)
                && (im[e] as f64 - wi).abs() <= 1e-5 * wi.abs().max(1.0),
            "take_along_axis [{e}]: ({}, {}) vs ({wr}, {wi})",
            re[e],
            im[e]
        );
    }
    // traced: the scatter-add replays inside the step's CUDA graph (a zeroing and an
    // adding kernel node), call after call with new weights
    let step = lf::Function::trace(&[&x, &w], |a| {
        let loss = (a[0].take(&idx, 1) * &a[1]).sum();
        lf::grad(&loss, &[&a[0]]).expect("grad while tracing")
    })
    .expect("trace");
    for call in 0..4u64 {
        let wv = data(rows * k, 70 + call, -1.0, 1.0);
        let w = Array::from_vec_on(wv.clone(), &[rows, k], dev).expect("w");
        let g = step.call(&[&x, &w]).expect("call").remove(0);
        assert_eq!((g.shape(), g.dtype()), (&[rows, n][..], DType::F64));
        let mut want = vec![0.0f64; rows * n];
        for p in 0..rows {
            for (i, &j) in iv.iter().enumerate() {
                want[p * n + at(j)] += wv[p * k + i];
            }
        }
        let got = g.to_vec::<f64>().expect("gradient");
        for (e, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "traced call {call} [{e}]: {a} vs {b}"
            );
        }
    }
    let graphs = std::env::var("LAZYFUSE_GRAPHS").map_or(true, |v| v.trim() != "0");
    assert_eq!(
        step.is_graph(),
        dev.is_cuda() && graphs,
        "the traced scatter replays"
    );
    // a small gather keeps the one-hot form: no library step
    let small = Array::from_vec_on(vec![1i64, 1, 0], &[3], dev).expect("indices");
    let g = lf::grad(&x.take(&small, 1).sum(), &[&x]).expect("grad");
    assert_eq!(lf::debug::library_count(&[&g[0]]).expect("plan"), 0);
}

device_test!(backward_chain_fuses);
fn backward_chain_fuses(dev: &Device) {
    let x = Array::from_vec_on(data(1000, 15, -1.0, 1.0), &[1000], dev).expect("x");
    let loss = ((&x * 2.0).sin().exp() * &x).sum();
    let g = lf::grad(&loss, &[&x]).expect("grad");
    // the gradient is elementwise in x (the loss's cotangent is a broadcast constant): one
    // fused kernel, as the forward chain's elementwise part is
    assert_eq!(lf::debug::kernel_count(&[&g[0]]).expect("plan"), 1);
    // the loss and the gradient in one evaluation: the values both use (`2x`, `e^{sin 2x}`)
    // are cheap elementwise values, recomputed by the sum's kernel and the gradient's
    // rather than stored by kernels of their own
    assert_eq!(lf::debug::kernel_count(&[&loss, &g[0]]).expect("plan"), 2);
    // and the values agree with the closed form 2 cos(2x) e^{sin 2x} x + e^{sin 2x}
    let xs = x.to_vec::<f64>().expect("x");
    let got = g[0].to_vec::<f64>().expect("g");
    for (i, (&x, &gv)) in xs.iter().zip(&got).enumerate() {
        let e = (2.0 * x).sin().exp();
        let want = 2.0 * (2.0 * x).cos() * e * x + e;
        assert!(
            (gv - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{i}: {gv} vs {want}"
        );
    }
}

/// Serializes the tests that switch the real-FFT rewrites (a process-wide setting).
static REWRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `body` with the real-FFT rewrites on (as on the CPU by default, and on CUDA for large
/// transforms) and cuFFT for complex transforms on CUDA (the kernel counts below are those
/// of transforms running apart from the kernels; with the generated passes chosen, the
/// kernels around a transform may run inside its passes: `tests/fft_fused.rs`), restoring
/// both settings.
fn with_real_fft<R>(body: impl FnOnce() -> R) -> R {
    let _g = REWRITES.lock().unwrap_or_else(|e| e.into_inner());
    let before = lf::real_fft_mode();
    let backend = lf::set_fft_backend(lf::FftBackend::Cufft);
    lf::set_real_fft(true);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    lf::set_real_fft_mode(before);
    lf::set_fft_backend(backend);
    r.unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// The PSF-fit loss `sum((|fft2(a e^{i phase})|^2 s - target)^2)`.
fn psf_fit(aperture: &Array, phase: &Array, target: &Array, s: f64) -> Array {
    let field = lf::complex(&(aperture * &phase.cos()), &(aperture * &phase.sin()));
    ((lf::fft::fft2(&field).abs().square() * s) - target)
        .square()
        .sum()
}

device_test!(psf_fit_gradient_plans_two_transforms);
fn psf_fit_gradient_plans_two_transforms(dev: &Device) {
    with_real_fft(|| {
        let n = 128;
        let aperture = lf::random::uniform_on(&[n, n], DType::F32, 3, dev);
        let phase = lf::random::normal_on(&[n, n], DType::F32, 1, dev) * 0.3;
        let target = lf::random::uniform_on(&[n, n], DType::F32, 2, dev) * 1e-4;
        lf::eval(&[&aperture, &phase, &target]).expect("inputs");
        let loss = psf_fit(&aperture, &phase, &target, 1e-8);
        let g = lf::grad(&loss, &[&phase]).expect("grad");
        let both = [&loss, &g[0]];
        // the field's kernel, the forward transform, the loss's reduction and the
        // spectrum's cotangent (both computing |X| and the residual rather than reading
        // them stored), the inverse transform (whose real part is read from the complex
        // result the imaginary part needs, not transformed again), the gradient's kernel
        let plan = lf::debug::plan(&both).expect("plan");
        assert_eq!(lf::debug::library_count(&both).expect("plan"), 2, "{plan}");
        assert_eq!(lf::debug::kernel_count(&both).expect("plan"), 4, "{plan}");
        assert!(!plan.contains("c2r"), "{plan}");
        let lines: Vec<&str> = plan.lines().filter(|l| l.contains("recomputes")).collect();
        assert_eq!(lines.len(), 2, "{plan}");
        assert!(lines[0].ends_with("subtract"), "{plan}");
        assert!(
            lines[1].contains("abs") && lines[1].contains("subtract"),
            "{plan}"
        );
        // the values: the fused plan agrees with every operation evaluated on its own
        let loss_fused = loss.item::<f32>().expect("loss");
        let g_fused = g[0].to_vec::<f32>().expect("gradient");
        let (loss_plain, g_plain) = lf::with_fusion(false, || {
            let loss = psf_fit(&aperture, &phase, &target, 1e-8);
            let g = lf::grad(&loss, &[&phase]).expect("grad");
            (
                loss.item::<f32>().expect("loss"),
                g[0].to_vec::<f32>().expect("g"),
            )
        });
        assert!(
            (loss_fused - loss_plain).abs() <= 1e-4 * loss_plain.abs(),
            "{loss_fused} vs {loss_plain}"
        );
        let peak = g_plain.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in g_fused.iter().zip(&g_plain).enumerate() {
            assert!((a - b).abs() <= 1e-4 * peak, "[{i}]: {a} vs {b}");
        }
    });
}

device_test!(psf_fit_gradient_matches_finite_differences);
fn psf_fit_gradient_matches_finite_differences(dev: &Device) {
    with_real_fft(|| {
        let n = 8;
        let aperture = Array::from_vec_on(data(n * n, 31, 0.0, 1.0), &[n, n], dev).expect("a");
        let target = Array::from_vec_on(data(n * n, 32, 0.0, 0.5), &[n, n], dev).expect("t");
        let phase = (data(n * n, 33, -1.0, 1.0), vec![n, n]);
        let f = |a: &[Array]| psf_fit(&aperture, &a[0], &target, 1.0 / 64.0);
        // the same plan as the f32 one above
        let p = Array::from_vec_on(phase.0.clone(), &phase.1, dev).expect("p");
        let loss = f(std::slice::from_ref(&p));
        let g = lf::grad(&loss, &[&p]).expect("grad");
        assert_eq!(lf::debug::library_count(&[&loss, &g[0]]).expect("plan"), 2);
        assert_eq!(lf::debug::kernel_count(&[&loss, &g[0]]).expect("plan"), 4);
        check_grad("psf fit", dev, std::slice::from_ref(&phase), f);
    });
}

device_test!(recomputed_intermediates_keep_their_values);
fn recomputed_intermediates_keep_their_values(dev: &Device) {
    // cheap elementwise values read by several kernels (reductions, and outputs at other
    // shapes) and built on each other: computed in each kernel, with the values of the plan
    // that evaluates every operation on its own
    let x = Array::from_vec_on(data(96, 34, -1.0, 1.0), &[8, 12], dev).expect("x");
    let y = Array::from_vec_on(data(12, 35, 0.5, 1.5), &[12], dev).expect("y");
    let build = || {
        let a = &x * 1.5 + &y; // broadcast
        let b = a.sin() * &a;
        let c = &b - &a.square() * 0.25;
        let d = (&c * &x).exp();
        vec![
            a.sum(),
            b.sum_axes(&[0], false),
            (&c * &b).max(),
            d.sum_axes(&[1], false),
            &d + &c.slice(lf::s![.., ..1]),
            c.roll(3, 1) * &a,
        ]
    };
    let fused = build();
    let refs: Vec<&Array> = fused.iter().collect();
    let plan = lf::debug::plan(&refs).expect("plan");
    assert!(plan.contains("recomputes"), "{plan}");
    lf::eval(&refs).expect("fused");
    let plain = lf::with_fusion(false, || {
        let p = build();
        let refs: Vec<&Array> = p.iter().collect();
        lf::eval(&refs).expect("plain");
        p
    });
    for (k, (f, p)) in fused.iter().zip(&plain).enumerate() {
        let (f, p) = (f.to_vec::<f64>().expect("f"), p.to_vec::<f64>().expect("p"));
        for (i, (a, b)) in f.iter().zip(&p).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "output {k} [{i}]: {a} vs {b}"
            );
        }
    }
    // a long chain of shared values, each summed (a reduction kernel each): recomputation
    // stays within its bound, so the plan's kernels hold a number of values linear in the
    // chain's length, and planning ends
    let mut v = x.clone();
    let mut sums = Vec::new();
    for k in 0..60 {
        v = &v * 0.5 + &v.square() * (0.01 * k as f64);
        sums.push(v.sum());
    }
    let refs: Vec<&Array> = sums.iter().collect();
    let plan = lf::debug::plan(&refs).expect("plan");
    let values = plan
        .lines()
        .filter(|l| l.trim_start().starts_with('%'))
        .count();
    assert!(
        values < 60 * 80,
        "{values} IR values for a chain of 60:\n{plan}"
    );
    lf::eval(&refs).expect("chain");
    let want = lf::with_fusion(false, || {
        let mut v = x.clone();
        let mut last = None;
        for k in 0..60 {
            v = &v * 0.5 + &v.square() * (0.01 * k as f64);
            last = Some(v.sum());
        }
        last.expect("sum").item::<f64>().expect("plain")
    });
    let got = sums[59].item::<f64>().expect("fused");
    assert!(
        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
        "{got} vs {want}"
    );
}

device_test!(gradients_trace_inside_a_function);
fn gradients_trace_inside_a_function(dev: &Device) {
    // one traced step: loss and gradient of a PSF-like fit, called with new data
    let loss_of = |phase: &Array, target: &Array| {
        let field = lf::complex(&phase.cos(), &phase.sin());
        let psf = lf::fft::fft2(&field).abs().square() * (1.0 / 16.0);
        (psf - target).square().sum()
    };
    let p0 = Array::from_vec_on(data(16, 21, -1.0, 1.0), &[4, 4], dev).expect("p0");
    let t0 = Array::from_vec_on(data(16, 22, 0.0, 1.0), &[4, 4], dev).expect("t0");
    let step = lf::Function::trace(&[&p0, &t0], move |xs: &[Array]| {
        let loss = loss_of(&xs[0], &xs[1]);
        let g = lf::grad(&loss, &[&xs[0]]).expect("gradient while tracing");
        vec![loss, g[0].clone()]
    })
    .expect("trace");
    for seed in [23u64, 24, 25] {
        let p = Array::from_vec_on(data(16, seed, -1.0, 1.0), &[4, 4], dev).expect("p");
        let out = step.call(&[&p, &t0]).expect("call");
        let loss = loss_of(&p, &t0);
        let want = lf::grad(&loss, &[&p]).expect("gradient");
        assert_eq!(out[1].shape(), &[4, 4]);
        assert_eq!(out[1].dtype(), DType::F64);
        let got = out[1].to_vec::<f64>().expect("traced gradient");
        let want = want[0].to_vec::<f64>().expect("plain gradient");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "seed {seed} [{i}]: {a} vs {b}"
            );
        }
        let l1 = out[0].item::<f64>().expect("traced loss");
        let l2 = loss.item::<f64>().expect("loss");
        assert!((l1 - l2).abs() <= 1e-12 * l2.abs().max(1.0), "{l1} vs {l2}");
    }
}

device_test!(awkward_sizes_and_single_precision);
fn awkward_sizes_and_single_precision(dev: &Device) {
    // empty, one-element and odd shapes: gradients of the input's shape and dtype
    for shape in [vec![0usize], vec![1], vec![3, 0], vec![1, 1], vec![783]] {
        let n: usize = shape.iter().product();
        let x = Array::from_vec_on(data(n, 26, -1.0, 1.0), &shape, dev).expect("x");
        let g = lf::grad(&(x.sin() * 2.0).sum(), &[&x]).expect("grad");
        assert_eq!(g[0].shape(), &shape[..], "shape {shape:?}");
        assert_eq!(g[0].dtype(), DType::F64, "shape {shape:?}");
        let xs = x.to_vec::<f64>().expect("x");
        let gs = g[0].to_vec::<f64>().expect("g");
        for (i, (&a, &b)) in xs.iter().zip(&gs).enumerate() {
            let want = 2.0 * a.cos();
            assert!(
                (b - want).abs() <= 1e-12,
                "shape {shape:?} [{i}]: {b} vs {want}"
            );
        }
    }
    // f32 inputs get f32 gradients, computed in f32
    let v: Vec<f32> = data(5, 27, 0.5, 1.5).iter().map(|&x| x as f32).collect();
    let x = Array::from_vec_on(v.clone(), &[5], dev).expect("x");
    let g = lf::grad(&(x.log() * &x).sum(), &[&x]).expect("grad");
    assert_eq!(g[0].dtype(), DType::F32);
    let gs = g[0].to_vec::<f32>().expect("g");
    for (i, (&a, &b)) in v.iter().zip(&gs).enumerate() {
        let want = a.ln() + 1.0;
        assert!(
            (b - want).abs() <= 1e-6 * want.abs().max(1.0),
            "[{i}]: {b} vs {want}"
        );
    }
    // a 0-d input
    let s = Array::from_vec_on(vec![0.5f64], &[], dev).expect("s");
    let g = lf::grad(&(&s * &s), &[&s]).expect("grad");
    assert_eq!(g[0].shape(), &[] as &[usize]);
    assert_eq!(g[0].item::<f64>().expect("g"), 1.0);
}

device_test!(gradients_from_several_threads);
fn gradients_from_several_threads(dev: &Device) {
    // threads take gradients through one shared unevaluated expression while another
    // evaluates expressions built on it
    let x = Array::from_vec_on(data(64, 28, -1.0, 1.0), &[64], dev).expect("x");
    let base = x.sin();
    let xs = x.to_vec::<f64>().expect("x");
    std::thread::scope(|s| {
        for k in 1..=4 {
            let (x, base, xs, dev) = (&x, &base, &xs, dev.clone());
            s.spawn(move || {
                lf::with_default_device(&dev, || {
                    for _ in 0..20 {
                        let g = lf::grad(&(base * k as f64).sum(), &[x]).expect("grad");
                        let got = g[0].to_vec::<f64>().expect("g");
                        for (i, (&a, &b)) in xs.iter().zip(&got).enumerate() {
                            let want = k as f64 * a.cos();
                            assert!((b - want).abs() <= 1e-12, "thread {k} [{i}]: {b} vs {want}");
                        }
                    }
                })
            });
        }
        s.spawn(|| {
            for j in 0..20 {
                let v = (&base * j as f64).to_vec::<f64>().expect("eval");
                assert_eq!(v.len(), 64);
            }
        });
    });
}
