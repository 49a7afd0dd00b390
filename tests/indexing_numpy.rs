//! Indexed updates, masked fills, in-place operators, gathers and scans against NumPy's
//! answers (tests/data/indexing_cases.txt, made by tests/data/gen_indexing.py), on every
//! device: shape and dtype first, then values (exact for integers and for copies, within
//! rounding for float scans, whose order differs between devices).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{c32, c64, Array, DType, Device};

struct Fixture {
    shape: Vec<usize>,
    dtype: String,
    bytes: Vec<u8>,
}

fn parse_array(s: &str) -> Fixture {
    let (dtype, shape, bytes) = common::parse_fixture_array(s);
    Fixture {
        shape,
        dtype,
        bytes,
    }
}

fn dtype_of(name: &str) -> DType {
    match name {
        "bool" => DType::Bool,
        "i32" => DType::I32,
        "i64" => DType::I64,
        "u8" => DType::U8,
        "u64" => DType::U64,
        "f16" => DType::F16,
        "f32" => DType::F32,
        "f64" => DType::F64,
        "c64" => DType::C64,
        "c128" => DType::C128,
        d => panic!("dtype {d}"),
    }
}

/// The lazyfuse expression of each case id.
fn expr(id: &str, x: &[Array]) -> Array {
    let a = &x[0];
    match id {
        "set_rows" => a.at(lf::s![1..5, ..;2]).set(2.5),
        "set_array" => a.at(lf::s![..;-2, ..]).set(&x[1]),
        "add_region" => a.at(lf::s![2..7]).add(3),
        "mul_index" => a.at(lf::s![1, ..]).mul(c64::new(2.0, -1.0)),
        "masked_fill" => a.masked_fill(&x[1], -1.0),
        "masked_fill_bcast" => a.masked_fill(&x[1], 7),
        "iadd" => {
            let mut b = a.clone();
            b += &x[1];
            b
        }
        "imul_int" => {
            let mut b = a.clone();
            b *= &x[1];
            b
        }
        "isub_idiv" => {
            let mut b = a.clone();
            b -= 2.0;
            b /= 4.0;
            b
        }
        "take0" => a.take(&x[1], 0),
        "take1_2d" => a.take(&x[1], 1),
        "take_along" => lf::take_along_axis(a, &x[1], 1),
        "take_along0_bcast" => lf::take_along_axis(a, &x[1], 0),
        "cumsum_f64_ax1" => a.cumsum(1),
        "cumsum_i32_ax0" => a.cumsum(0),
        "cumprod_f32" => a.cumprod(0),
        "cumsum_bool" | "cumsum_u8" | "cumsum_long" => a.cumsum(0),
        "cumprod_c64_last" => a.cumprod(-1),
        "cumsum_3d_ax1" => a.cumsum(1),
        other => panic!("no expression for case {other}"),
    }
}

/// Values as (re, im) pairs of f64, or exact integers.
enum Vals {
    Exact(Vec<i128>),
    Float(Vec<(f64, f64)>),
}

fn values(a: &Array) -> Vals {
    let f = |v: Vec<f64>| Vals::Float(v.into_iter().map(|x| (x, 0.0)).collect());
    match a.dtype() {
        DType::Bool => Vals::Exact(
            a.to_vec::<bool>()
                .unwrap()
                .into_iter()
                .map(i128::from)
                .collect(),
        ),
        DType::I32 => Vals::Exact(
            a.to_vec::<i32>()
                .unwrap()
                .into_iter()
                .map(i128::from)
                .collect(),
        ),
        DType::I64 => Vals::Exact(
            a.to_vec::<i64>()
                .unwrap()
                .into_iter()
                .map(i128::from)
                .collect(),
        ),
        DType::U8 => Vals::Exact(
            a.to_vec::<u8>()
                .unwrap()
                .into_iter()
                .map(i128::from)
                .collect(),
        ),
        DType::U64 => Vals::Exact(
            a.to_vec::<u64>()
                .unwrap()
                .into_iter()
                .map(i128::from)
                .collect(),
        ),
        DType::F16 => f(a
            .to_vec::<lf::f16>()
            .unwrap()
            .into_iter()
            .map(|v| v.to_f64())
            .collect()),
        DType::F32 => f(a
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()),
        DType::F64 => f(a.to_vec::<f64>().unwrap()),
        DType::C64 => Vals::Float(
            a.to_vec::<c32>()
                .unwrap()
                .into_iter()
                .map(|z| (f64::from(z.re), f64::from(z.im)))
                .collect(),
        ),
        DType::C128 => Vals::Float(
            a.to_vec::<c64>()
                .unwrap()
                .into_iter()
                .map(|z| (z.re, z.im))
                .collect(),
        ),
        d => panic!("dtype {d}"),
    }
}

device_test!(updates_gathers_and_scans_match_numpy);
fn updates_gathers_and_scans_match_numpy(dev: &Device) {
    // embedded, so that the test binary runs anywhere (python3 tests/data/gen_indexing.py
    // writes the file)
    let text = include_str!("data/indexing_cases.txt");
    let cases: Vec<(&str, Vec<Fixture>, Fixture)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(" | ").collect();
            assert_eq!(f.len(), 3, "{l}");
            let ins = f[1].split(" ; ").map(parse_array).collect();
            (f[0], ins, parse_array(f[2]))
        })
        .collect();
    assert_eq!(cases.len(), 21);
    for (id, ins, want) in &cases {
        let x: Vec<Array> = ins
            .iter()
            .map(|f| common::array_from_le(&f.dtype, &f.shape, &f.bytes, dev))
            .collect();
        let got = expr(id, &x);
        assert_eq!(got.shape(), want.shape.as_slice(), "{id}: shape");
        assert_eq!(got.dtype(), dtype_of(&want.dtype), "{id}: dtype");
        let w = common::array_from_le(&want.dtype, &want.shape, &want.bytes, dev);
        // a float scan's rounding depends on its order (tiles on CUDA, a running sum
        // on the CPU as in NumPy); everything else is exact
        let scan = id.starts_with("cum") || *id == "mul_index";
        let tol = match got.dtype() {
            DType::F32 | DType::C64 => 1e-5,
            _ => 1e-12,
        };
        match (values(&got), values(&w)) {
            (Vals::Exact(g), Vals::Exact(e)) => assert_eq!(g, e, "{id}"),
            (Vals::Float(g), Vals::Float(e)) => {
                let scale = e
                    .iter()
                    .fold(1.0f64, |m, z| m.max(z.0.abs()).max(z.1.abs()));
                for (k, (p, q)) in g.iter().zip(&e).enumerate() {
                    let same = if scan {
                        (p.0 - q.0).abs() <= tol * scale && (p.1 - q.1).abs() <= tol * scale
                    } else {
                        (p.0.to_bits() == q.0.to_bits() || (p.0.is_nan() && q.0.is_nan()))
                            && (p.1.to_bits() == q.1.to_bits() || (p.1.is_nan() && q.1.is_nan()))
                    };
                    assert!(same, "{id} at {k}: {p:?} vs {q:?}");
                }
            }
            _ => panic!("{id}: kinds differ"),
        }
    }
}
