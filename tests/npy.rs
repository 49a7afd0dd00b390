//! Saving and loading in NumPy's `.npy` / `.npz` formats, on every device: round trips of
//! every dtype and awkward shapes, files written by NumPy (`tests/data/npy/`, made by
//! `tests/data/gen_npy.py`, values in its `expected.txt`), malformed files, and the
//! converting readbacks `to_vec_as` / `item_as`.
//!
//! The fixtures are compiled into the binary and written to a temporary directory when a
//! test runs, so the binary does not need the source tree.

#[macro_use]
mod common;

use common::{array_from_le, parse_fixture_array, xorshift};
use lazyfuse as lf;
use lf::{Array, DType, Device};
use std::path::PathBuf;

/// The dtypes NumPy's format and lazyfuse share, by the fixtures' names.
const DTYPES: [&str; 14] = [
    "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "c64",
    "c128",
];

const SHAPES: [&[usize]; 6] = [&[], &[0], &[1], &[3], &[2, 0, 3], &[7, 5]];

const EXPECTED: &str = include_str!("data/npy/expected.txt");

macro_rules! fixtures {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_bytes!(concat!("data/npy/", $name)) as &[u8])),*]
    };
}

/// Every file `tests/data/gen_npy.py` writes, by name.
const FIXTURES: &[(&str, &[u8])] = fixtures![
    "bool.npy",
    "i8.npy",
    "i16.npy",
    "i32.npy",
    "i64.npy",
    "u8.npy",
    "u16.npy",
    "u32.npy",
    "u64.npy",
    "f16.npy",
    "f32.npy",
    "f64.npy",
    "c64.npy",
    "c128.npy",
    "fortran_f64.npy",
    "fortran_i16.npy",
    "big_f64.npy",
    "big_i32.npy",
    "big_f16.npy",
    "big_c128.npy",
    "scalar_f64.npy",
    "empty_f32.npy",
    "pair.npz",
    "compressed.npz",
    "str.npy",
    "structured.npy",
];

/// A fresh directory for this test's files.
fn temp_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lazyfuse-npy-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).expect("a temporary directory");
    d
}

/// The fixture `name` written into `dir`.
fn fixture(dir: &std::path::Path, name: &str) -> PathBuf {
    let (_, bytes) = FIXTURES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no fixture {name}"));
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("writing a fixture");
    p
}

fn dtype_of(name: &str) -> DType {
    match name {
        "bool" => DType::Bool,
        "i8" => DType::I8,
        "i16" => DType::I16,
        "i32" => DType::I32,
        "i64" => DType::I64,
        "u8" => DType::U8,
        "u16" => DType::U16,
        "u32" => DType::U32,
        "u64" => DType::U64,
        "f16" => DType::F16,
        "f32" => DType::F32,
        "f64" => DType::F64,
        "c64" => DType::C64,
        "c128" => DType::C128,
        d => panic!("dtype {d}"),
    }
}

/// The array's elements as little-endian bytes in C order (floats by their bits, so NaNs
/// compare).
fn le_bytes(a: &Array) -> Vec<u8> {
    fn cat<T, const N: usize>(v: Vec<T>, f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.into_iter().flat_map(f).collect()
    }
    let r = match a.dtype() {
        DType::Bool => a.to_vec::<bool>().map(|v| cat(v, |x| [x as u8])),
        DType::I8 => a.to_vec::<i8>().map(|v| cat(v, i8::to_le_bytes)),
        DType::I16 => a.to_vec::<i16>().map(|v| cat(v, i16::to_le_bytes)),
        DType::I32 => a.to_vec::<i32>().map(|v| cat(v, i32::to_le_bytes)),
        DType::I64 => a.to_vec::<i64>().map(|v| cat(v, i64::to_le_bytes)),
        DType::U8 => a.to_vec::<u8>(),
        DType::U16 => a.to_vec::<u16>().map(|v| cat(v, u16::to_le_bytes)),
        DType::U32 => a.to_vec::<u32>().map(|v| cat(v, u32::to_le_bytes)),
        DType::U64 => a.to_vec::<u64>().map(|v| cat(v, u64::to_le_bytes)),
        DType::F16 => a
            .to_vec::<lf::f16>()
            .map(|v| cat(v, |x| x.to_bits().to_le_bytes())),
        DType::F32 => a.to_vec::<f32>().map(|v| cat(v, f32::to_le_bytes)),
        DType::F64 => a.to_vec::<f64>().map(|v| cat(v, f64::to_le_bytes)),
        DType::C64 => a.to_vec::<lf::c32>().map(|v| {
            v.into_iter()
                .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()])
                .flatten()
                .collect()
        }),
        DType::C128 => a.to_vec::<lf::c64>().map(|v| {
            v.into_iter()
                .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()])
                .flatten()
                .collect()
        }),
        d => panic!("no fixture bytes for {d}"),
    };
    r.expect("readback")
}

/// `n` pseudo-random elements of `dtype` as little-endian bytes (bools as 0 or 1).
fn random_bytes(dtype: &str, n: usize, seed: u64) -> Vec<u8> {
    let size = dtype_of(dtype).size();
    let mut b: Vec<u8> = xorshift(n * size / 8 + 1, seed)
        .flat_map(u64::to_le_bytes)
        .take(n * size)
        .collect();
    if dtype == "bool" {
        b.iter_mut().for_each(|x| *x &= 1);
    }
    b
}

device_test!(round_trip_every_dtype_and_shape);
fn round_trip_every_dtype_and_shape(dev: &Device) {
    let dir = temp_dir("round_trip");
    for (k, name) in DTYPES.iter().enumerate() {
        for (j, shape) in SHAPES.iter().enumerate() {
            let n = shape.iter().product();
            let bytes = random_bytes(name, n, (k * 10 + j) as u64);
            let a = array_from_le(name, shape, &bytes, dev);
            let p = dir.join(format!("{name}_{j}.npy"));
            a.save_npy(&p).expect("save_npy");
            let b = lf::load_npy_on(&p, dev).expect("load_npy");
            assert_eq!(b.dtype(), a.dtype(), "{name} {shape:?}");
            assert_eq!(b.shape(), *shape, "{name} {shape:?}");
            assert_eq!(b.device(), *dev);
            assert_eq!(le_bytes(&b), bytes, "{name} {shape:?}");
        }
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn header_is_what_numpy_writes() {
    // NumPy pads the header with spaces so the data starts at a multiple of 64 bytes
    let dir = temp_dir("header");
    for name in ["f16", "f64", "bool"] {
        let a = array_from_le(name, &[2, 3], &random_bytes(name, 6, 1), &Device::cpu());
        let p = dir.join(format!("{name}.npy"));
        a.save_npy(&p).expect("save_npy");
        let bytes = std::fs::read(&p).expect("read");
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + len) % 64, 0, "{name}");
        let text = std::str::from_utf8(&bytes[10..10 + len]).expect("ASCII");
        assert!(text.contains("'fortran_order': False"), "{text}");
        assert!(text.contains("'shape': (2, 3)"), "{text}");
        assert!(text.ends_with('\n'), "{text:?}");
    }
    std::fs::remove_dir_all(dir).ok();
}

device_test!(loads_numpy_fixtures);
fn loads_numpy_fixtures(dev: &Device) {
    let dir = temp_dir("fixtures");
    let mut pair = Vec::new();
    for line in EXPECTED.lines().filter(|l| !l.starts_with('#')) {
        let (key, arr) = line.split_once(" | ").expect("key | array");
        let (dtype, shape, bytes) = parse_fixture_array(arr);
        if let Some(member) = key.strip_prefix("pair.npz:") {
            pair.push((member.to_string(), dtype, shape, bytes));
            continue;
        }
        let a = lf::load_npy_on(fixture(&dir, key), dev).expect(key);
        assert_eq!(a.shape(), &shape[..], "{key}");
        assert_eq!(a.dtype(), dtype_of(&dtype), "{key}");
        assert_eq!(a.device(), *dev);
        assert_eq!(le_bytes(&a), bytes, "{key}");
    }
    let got = lf::loadz_on(fixture(&dir, "pair.npz"), dev).expect("loadz");
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha"], "the archive's order");
    for ((name, a), (want, dtype, shape, bytes)) in got.iter().zip(&pair) {
        assert_eq!(name, want);
        assert_eq!(a.shape(), &shape[..], "{name}");
        assert_eq!(a.dtype(), dtype_of(dtype), "{name}");
        assert_eq!(le_bytes(a), *bytes, "{name}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn fixtures_cover_orders_and_byte_orders() {
    // the fixtures are what the test above claims to read
    let header = |name: &str| {
        let (_, b) = FIXTURES.iter().find(|(n, _)| *n == name).expect(name);
        String::from_utf8_lossy(&b[10..128.min(b.len())]).into_owned()
    };
    assert!(header("fortran_f64.npy").contains("'fortran_order': True"));
    assert!(header("fortran_i16.npy").contains("'fortran_order': True"));
    for (name, descr) in [
        ("big_f64.npy", "'>f8'"),
        ("big_i32.npy", "'>i4'"),
        ("big_f16.npy", "'>f2'"),
        ("big_c128.npy", "'>c16'"),
    ] {
        assert!(header(name).contains(descr), "{name}: {}", header(name));
    }
}

#[test]
fn loads_as_the_default_device() {
    let dir = temp_dir("default_device");
    let a = lf::load_npy(fixture(&dir, "scalar_f64.npy")).expect("load_npy");
    assert_eq!(a.device(), lf::default_device());
    assert_eq!(a.shape(), &[] as &[usize]);
    assert_eq!(a.item::<f64>().expect("item"), 2.5);
    let z = lf::loadz(fixture(&dir, "pair.npz")).expect("loadz");
    assert_eq!(z.len(), 2);
    std::fs::remove_dir_all(dir).ok();
}

device_test!(saving_a_lazy_array_evaluates_it);
fn saving_a_lazy_array_evaluates_it(dev: &Device) {
    let dir = temp_dir("lazy");
    let x = Array::arange_on(0.0, 12.0, 1.0, DType::F64, dev).reshape(&[3, 4]);
    let y = (&x * 0.5).sin() + 1.0;
    assert!(!y.is_evaluated());
    let p = dir.join("y.npy");
    y.save_npy(&p).expect("save_npy");
    let back = lf::load_npy_on(&p, dev).expect("load_npy");
    assert_eq!(back.shape(), &[3, 4]);
    let want: Vec<f64> = (0..12).map(|i| (i as f64 * 0.5).sin() + 1.0).collect();
    assert_eq!(back.to_vec::<f64>().expect("readback"), want);
    std::fs::remove_dir_all(dir).ok();
}

device_test!(savez_round_trip_keeps_names_and_order);
fn savez_round_trip_keeps_names_and_order(dev: &Device) {
    let dir = temp_dir("savez");
    let a = array_from_le("c64", &[2, 2], &random_bytes("c64", 4, 7), dev);
    let b = array_from_le("f16", &[3], &random_bytes("f16", 3, 8), dev);
    let c = Array::arange_on(0.0, 5.0, 1.0, DType::I16, dev) * 3i64; // lazy
    let p = dir.join("three.npz");
    lf::savez(&p, &[("second", &a), ("first", &b), ("third", &c)]).expect("savez");
    let got = lf::loadz_on(&p, dev).expect("loadz");
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["second", "first", "third"]);
    for ((_, g), want) in got.iter().zip([&a, &b, &c]) {
        assert_eq!(g.dtype(), want.dtype());
        assert_eq!(g.shape(), want.shape());
        assert_eq!(le_bytes(g), le_bytes(want));
    }
    let e = lf::savez(dir.join("dup.npz"), &[("x", &a), ("x", &b)]).unwrap_err();
    assert!(e.to_string().contains("\"x\" is given twice"), "{e}");
    lf::savez(dir.join("none.npz"), &[]).expect("an empty archive");
    assert!(lf::loadz(dir.join("none.npz")).expect("loadz").is_empty());
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bf16_has_no_npy_dtype() {
    let dir = temp_dir("bf16");
    let a = Array::arange(0.0, 4.0, 1.0, DType::BF16);
    let p = dir.join("bf16.npy");
    let e = a.save_npy(&p).unwrap_err();
    assert!(matches!(e, lf::Error::Unsupported { .. }), "{e:?}");
    let m = e.to_string();
    assert!(m.starts_with("save_npy: ") && m.contains("bfloat16"), "{m}");
    assert!(m.contains("bf16.npy"), "{m}");
    assert!(!p.exists());
    let z = dir.join("bf16.npz");
    let f = Array::arange(0.0, 4.0, 1.0, DType::F32);
    let e = lf::savez(&z, &[("ok", &f), ("bad", &a)]).unwrap_err();
    assert!(e.to_string().starts_with("savez: "), "{e}");
    assert!(!z.exists(), "nothing is written");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn unsupported_files_are_errors_naming_op_path_and_problem() {
    let dir = temp_dir("unsupported");
    let p = fixture(&dir, "str.npy");
    let m = lf::load_npy(&p).unwrap_err().to_string();
    assert!(m.starts_with("load_npy: "), "{m}");
    assert!(
        m.contains("str.npy") && m.contains("unsupported dtype descr \"<U3\""),
        "{m}"
    );
    let m = lf::load_npy(fixture(&dir, "structured.npy"))
        .unwrap_err()
        .to_string();
    assert!(m.contains("structured dtype of 2 fields"), "{m}");
    let m = lf::loadz(fixture(&dir, "compressed.npz"))
        .unwrap_err()
        .to_string();
    assert!(
        m.starts_with("loadz: ") && m.contains("np.savez_compressed"),
        "{m}"
    );
    // an .npy file is not an archive
    let m = lf::loadz(fixture(&dir, "f64.npy")).unwrap_err().to_string();
    assert!(m.contains("not a .npz (zip) archive"), "{m}");
    let missing = dir.join("missing.npy");
    match lf::load_npy(&missing).unwrap_err() {
        lf::Error::Io {
            op, path, source, ..
        } => {
            assert_eq!(op, "load_npy");
            assert!(path.ends_with("missing.npy"), "{path}");
            assert_eq!(source.map(|s| s.kind()), Some(std::io::ErrorKind::NotFound));
        }
        e => panic!("{e:?}"),
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn malformed_files_are_errors_not_panics() {
    let dir = temp_dir("malformed");
    let p = dir.join("bad.npy");
    let load = |bytes: &[u8]| {
        std::fs::write(&p, bytes).expect("write");
        lf::load_npy_on(&p, &Device::cpu())
    };
    let good = FIXTURES
        .iter()
        .find(|(n, _)| *n == "fortran_i16.npy")
        .expect("fixture")
        .1;
    // every truncation
    for n in 0..good.len() {
        let e = load(&good[..n]).expect_err("a truncated file");
        assert!(e.to_string().starts_with("load_npy: "), "{e}");
        if n > 128 {
            assert!(e.to_string().contains("truncated file"), "{n}: {e}");
        }
    }
    // trailing bytes
    let mut long = good.to_vec();
    long.extend_from_slice(&[0; 3]);
    assert!(load(&long)
        .unwrap_err()
        .to_string()
        .contains("3 bytes after"));
    // every header byte set to characters that break the literal: an error or (when the
    // change keeps it valid) an array of the right size, never a panic
    let specials = [
        b'(', b')', b'{', b'[', b'\'', b',', b':', b'9', b'x', 0, 0xff,
    ];
    for i in 0..128 {
        for &c in &specials {
            let mut b = good.to_vec();
            b[i] = c;
            if let Ok(a) = load(&b) {
                assert_eq!(a.size(), 24, "byte {i} = {c}");
            }
        }
    }
    // random garbage after the magic string
    for (k, w) in xorshift(200, 5).enumerate() {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend(xorshift(1 + k % 40, w).flat_map(u64::to_le_bytes));
        assert!(load(&b).is_err());
    }
    // headers that lie about the size, the nesting or the numbers
    let header = |dict: &str| {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        b.extend_from_slice(&[0; 16]);
        b
    };
    for (dict, want) in [
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }",
            "truncated file",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }",
            "too large",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
            "does not fit",
        ),
        ("{'descr': '<f8', 'shape': (2,), }", "no \"fortran_order\""),
        (
            "{'descr': '<f8', 'fortran_order': 1, 'shape': (2,), }",
            "fortran_order",
        ),
        (
            "{'descr': 'f8', 'fortran_order': False, 'shape': (2,), }",
            "descr",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': 2, }",
            "not a tuple",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }",
            "malformed",
        ),
        (
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
            "nested too deeply",
        ),
        ("{'descr': '<f8'", "malformed"),
    ] {
        let m = load(&header(dict)).unwrap_err().to_string();
        assert!(m.contains(want), "{dict}: {m}");
    }
    let mut v9 = good.to_vec();
    v9[6] = 9;
    assert!(load(&v9)
        .unwrap_err()
        .to_string()
        .contains("unsupported .npy format version 9.0"));
    std::fs::remove_dir_all(dir).ok();
}

device_test!(to_vec_as_converts_with_astype_rules);
fn to_vec_as_converts_with_astype_rules(dev: &Device) {
    let x =
        Array::from_vec_on(vec![1.7f64, -1.7, 2.5, -0.5, 0.0, 100.9], &[6], dev).expect("from_vec");
    assert_eq!(
        x.to_vec_as::<i32>().expect("to_vec_as"),
        [1, -1, 2, 0, 0, 100],
        "truncation toward zero"
    );
    let f =
        Array::from_vec_on(vec![0.0f32, -0.0, 0.5, f32::NAN, -3.0], &[5], dev).expect("from_vec");
    assert_eq!(
        f.to_vec_as::<bool>().expect("to_vec_as"),
        [false, false, true, true, true]
    );
    assert_eq!(f.to_vec_as::<f32>().expect("same dtype")[2], 0.5);
    // complex to real keeps the real part (NumPy: the same, with a ComplexWarning)
    let z = Array::from_vec_on(
        vec![lf::c32::new(1.5, 2.0), lf::c32::new(-3.0, -4.0)],
        &[2],
        dev,
    )
    .expect("from_vec");
    assert_eq!(z.to_vec_as::<f64>().expect("to_vec_as"), [1.5, -3.0]);
    assert_eq!(
        z.to_vec_as::<lf::c64>().expect("to_vec_as"),
        [lf::c64::new(1.5, 2.0), lf::c64::new(-3.0, -4.0)]
    );
    let i = Array::arange_on(0.0, 4.0, 1.0, DType::I64, dev);
    assert_eq!(
        i.to_vec_as::<f64>().expect("to_vec_as"),
        [0.0, 1.0, 2.0, 3.0]
    );
    assert_eq!(i.to_vec_as::<u8>().expect("to_vec_as"), [0, 1, 2, 3]);
    // a lazy expression converts in the kernel that computes it
    let lazy = (&x * 2.0).abs();
    assert_eq!(
        lf::debug::kernel_count(&[&lazy.astype(DType::I32)]).expect("plan"),
        1
    );
    assert_eq!(
        lazy.to_vec_as::<i64>().expect("to_vec_as"),
        [3, 3, 5, 1, 0, 201]
    );
}

device_test!(item_as_converts_one_element);
fn item_as_converts_one_element(dev: &Device) {
    let s = Array::scalar_on(3.9f32, dev);
    assert_eq!(s.item_as::<i64>().expect("item_as"), 3);
    assert!(s.item_as::<bool>().expect("item_as"));
    let v = Array::arange_on(0.0, 4.0, 1.0, DType::F64, dev);
    assert_eq!(v.slice(lf::s![2..3]).item_as::<u16>().expect("item_as"), 2);
    let e = v.item_as::<i32>().unwrap_err();
    assert!(matches!(e, lf::Error::Shape { op: "item_as", .. }), "{e:?}");
    let z = Array::scalar_on(lf::c64::new(-2.5, 7.0), dev);
    assert_eq!(z.item_as::<f32>().expect("item_as"), -2.5);
}

device_test!(readback_mismatch_names_both_host_types);
fn readback_mismatch_names_both_host_types(dev: &Device) {
    let z = Array::from_vec_on(vec![lf::c32::new(1.0, 0.0)], &[1], dev).expect("from_vec");
    let m = z.to_vec::<lf::c64>().unwrap_err().to_string();
    assert_eq!(
        m,
        "to_vec: dtype mismatch: array is complex64 (lf::c32); requested lf::c64 \
             (complex128); to_vec_as converts"
    );
    let m = z.to_host::<f32>().unwrap_err().to_string();
    assert!(
        m.starts_with(
            "to_host: dtype mismatch: array is complex64 (lf::c32); requested f32 (float32)"
        ),
        "{m}"
    );
    let h = Array::scalar_on(lf::f16::from_f32(1.0), dev);
    let m = h.item::<f32>().unwrap_err().to_string();
    assert_eq!(
        m,
        "item: dtype mismatch: array is float16 (lf::f16); requested f32 (float32); \
             item_as converts"
    );
    assert_eq!(h.item_as::<f32>().expect("item_as"), 1.0);
}
