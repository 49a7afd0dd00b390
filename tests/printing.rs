//! `format!("{a}")` against NumPy's `str(a)` (fixtures from tests/data/gen_print.py) on
//! every device, under default and changed print options; `{a:?}` never evaluates, and a
//! summarized print reads back only the printed elements.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{Array, Device};
use std::sync::Mutex;

/// Print options and the transfer counters are process-wide: the tests here take turns.
static SERIAL: Mutex<()> = Mutex::new(());

struct Case {
    dtype: String,
    shape: Vec<usize>,
    opts: lf::PrintOptions,
    bytes: Vec<u8>,
    expected: String,
}

fn cases() -> Vec<Case> {
    // embedded, so that the test binary runs anywhere (python3 tests/data/gen_print.py writes
    // the file)
    let text = include_str!("data/print_cases.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, " | ").collect();
            assert_eq!(f.len(), 5, "{l}");
            let shape = if f[1].is_empty() {
                vec![]
            } else {
                f[1].split(',').map(|d| d.parse().unwrap()).collect()
            };
            let mut o = lf::PrintOptions::default();
            for kv in f[2].split(' ') {
                let (k, v) = kv.split_once(':').unwrap();
                let n: usize = v.parse().unwrap();
                match k {
                    "p" => o.precision = n,
                    "t" => o.threshold = n,
                    "e" => o.edgeitems = n,
                    "w" => o.linewidth = n,
                    "s" => o.suppress = n == 1,
                    _ => panic!("option {k}"),
                }
            }
            let bytes = common::hex_bytes(f[3]);
            let mut expected = String::new();
            let mut chars = f[4].chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    match chars.next() {
                        Some('n') => expected.push('\n'),
                        Some(x) => expected.push(x),
                        None => {}
                    }
                } else {
                    expected.push(c);
                }
            }
            Case {
                dtype: f[0].to_string(),
                shape,
                opts: o,
                bytes,
                expected,
            }
        })
        .collect()
}

fn build(c: &Case, dev: &Device) -> Array {
    common::array_from_le(&c.dtype, &c.shape, &c.bytes, dev)
}

device_test!(display_matches_numpy_str);
fn display_matches_numpy_str(dev: &Device) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = cases();
    assert!(cases.len() > 50);
    let mut failures = Vec::new();
    for c in &cases {
        let a = build(c, dev);
        assert_eq!(a.shape(), c.shape.as_slice());
        lf::set_printoptions(c.opts);
        let got = format!("{a}");
        lf::set_printoptions(lf::PrintOptions::default());
        if got != c.expected {
            failures.push(format!(
                "{} {:?} {:?}:\n got:\n{got}\n want:\n{}",
                c.dtype, c.shape, c.opts, c.expected
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

device_test!(debug_is_metadata_and_print_reads_only_what_it_shows);
fn debug_is_metadata_and_print_reads_only_what_it_shows(dev: &Device) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = (1 << 20) + 1;
    let x = Array::arange_on(0.0, n as f64, 1.0, lf::DType::F32, dev).sqrt();
    let d = format!("{x:?}");
    assert!(d.contains("lazy"), "{d}");
    assert!(!x.is_evaluated());
    lf::reset_stats();
    let s = format!("{x}");
    assert_eq!(
        s,
        "[0.0000000e+00 1.0000000e+00 1.4142135e+00 ... 1.0239990e+03 1.0239995e+03\n 1.0240000e+03]"
    );
    // six elements of four bytes (and the index checks' flags, if any), not 4 MiB
    assert!(lf::stats().bytes_d2h <= 64, "{}", lf::stats().bytes_d2h);
}

device_test!(failed_eval_prints_the_error_naming_the_op_once);
/// An array whose evaluation fails prints the error in place of its values, naming the
/// failing gather once.
fn failed_eval_prints_the_error_naming_the_op_once(dev: &Device) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let a = Array::from_vec(vec![10f32, 11., 12., 13., 14.], &[5]).unwrap();
    let idx = Array::from_vec(vec![0i64, 9], &[2]).unwrap();
    let t = a.take(&idx, 0);
    assert_eq!(
        format!("{t}"),
        "<array not printable: take: an index is out of range for axis 0 of length 5>",
        "{dev}"
    );
    // the same error from a readback names its op in the variant, once in the text
    let t = a.take(&idx, 0);
    match t.to_vec::<f32>() {
        Err(e @ lf::Error::Index { op: "take", .. }) => assert_eq!(
            e.to_string(),
            "take: an index is out of range for axis 0 of length 5"
        ),
        other => panic!("expected a take index error, got {other:?}"),
    }
    // a result of two kinds of gather out of range: each named once
    let m = Array::from_vec(vec![1f32, 2., 3., 4., 5., 6.], &[2, 3]).unwrap();
    let bad = Array::from_vec(vec![0i64, 7], &[1, 2]).unwrap();
    let u = lf::take_along_axis(&m, &bad, 1);
    let both = a.take(&idx, 0).sum() + u.sum();
    let text = format!("{both}");
    assert_eq!(
        text,
        "<array not printable: gather: take: an index is out of range for axis 0 of \
             length 5; take_along_axis: an index is out of range for axis 1 of length 3>",
        "{dev}"
    );
}
