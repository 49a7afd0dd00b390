//! Shared test helpers: the devices every test body runs on, tolerances and comparisons.
#![allow(dead_code, unused_macros)]

use lazyfuse::Device;

pub mod oracle;

/// Whether `LAZYFUSE_TEST_CUDA=1` asks for the CUDA tests.
fn cuda_requested() -> bool {
    std::env::var("LAZYFUSE_TEST_CUDA").is_ok_and(|s| s == "1")
}

/// CUDA device 0 when `LAZYFUSE_TEST_CUDA=1` (a missing GPU is then a failure, not a skip);
/// otherwise `None`, with one line on stderr saying the CUDA test was skipped.
pub fn cuda_device() -> Option<Device> {
    if !cuda_requested() {
        eprintln!("cuda: skipped (set LAZYFUSE_TEST_CUDA=1 on a GPU machine)");
        return None;
    }
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => panic!("LAZYFUSE_TEST_CUDA=1 but CUDA device 0 is unusable: {e}"),
    }
}

/// Every device, for the tests that need several in one test (copies between devices,
/// mixing devices): the CPU always, and CUDA device 0 when `LAZYFUSE_TEST_CUDA=1` (then a
/// missing GPU is a failure, not a skip).
pub fn devices() -> Vec<Device> {
    let mut v = vec![Device::cpu()];
    if cuda_requested() {
        v.extend(cuda_device());
    }
    v
}

/// Runs `body` on `dev`, with `dev` as the thread's default device.
pub fn run_on(dev: &Device, body: fn(&Device)) {
    lazyfuse::with_default_device(dev, || body(dev))
}

/// Runs `body` on `dev` as [`run_on`] does and requires it to panic with a message that
/// contains `expected`: `#[should_panic(expected = ..)]` for a test that may be skipped.
pub fn run_on_expecting_panic(dev: &Device, body: fn(&Device), expected: &str) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_on(dev, body)));
    let Err(payload) = r else {
        panic!("no panic on {dev}; expected one containing {expected:?}")
    };
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(
        msg.contains(expected),
        "panic on {dev} was {msg:?}; expected one containing {expected:?}"
    );
}

/// One test per device for the device-generic test body `fn $name(dev: &Device)`:
/// `device_test!(name);` above the function makes the tests `name::cpu` and `name::cuda`,
/// so a failure names its case and device. The CUDA test runs when `LAZYFUSE_TEST_CUDA=1`
/// (a missing GPU is then a failure) and otherwise passes at once, printing that it was
/// skipped. Attributes written before the name (`#[ignore]`, `#[cfg(..)]`,
/// `#[should_panic(expected = "..")]`, which must come first) go on both tests; the body runs
/// with its device as the thread's default device.
macro_rules! device_test {
    (#[should_panic] $(#[$m:meta])* $name:ident) => {
        compile_error!("device_test!: write #[should_panic(expected = \"..\")]");
    };
    (#[should_panic(expected = $e:literal)] $(#[$m:meta])* $name:ident) => {
        mod $name {
            $(#[$m])*
            #[test]
            #[should_panic(expected = $e)]
            fn cpu() {
                $crate::common::run_on(&lazyfuse::Device::cpu(), super::$name);
            }

            // A skipped test cannot panic as `should_panic` wants: this one checks the
            // panic itself.
            $(#[$m])*
            #[test]
            fn cuda() {
                if let Some(d) = $crate::common::cuda_device() {
                    $crate::common::run_on_expecting_panic(&d, super::$name, $e);
                }
            }
        }
    };
    ($(#[$m:meta])* $name:ident) => {
        mod $name {
            $(#[$m])*
            #[test]
            fn cpu() {
                $crate::common::run_on(&lazyfuse::Device::cpu(), super::$name);
            }

            $(#[$m])*
            #[test]
            fn cuda() {
                if let Some(d) = $crate::common::cuda_device() {
                    $crate::common::run_on(&d, super::$name);
                }
            }
        }
    };
}

/// A fixture array `dtype [d0,d1,..] HEX` as the generator scripts write it: the dtype
/// name, the shape and the raw little-endian bytes.
pub fn parse_fixture_array(s: &str) -> (String, Vec<usize>, Vec<u8>) {
    let mut it = s.split_whitespace();
    let (Some(dt), Some(shape), Some(hex)) = (it.next(), it.next(), it.next()) else {
        panic!("bad fixture array {s:?}")
    };
    let inner = shape.trim_start_matches('[').trim_end_matches(']');
    let shape = if inner.is_empty() {
        Vec::new()
    } else {
        inner
            .split(',')
            .map(|d| d.parse().expect("a length"))
            .collect()
    };
    (dt.to_string(), shape, hex_bytes(hex))
}

/// The bytes of a hex string (`_` for none), as the fixture generators write them.
pub fn hex_bytes(h: &str) -> Vec<u8> {
    if h == "_" {
        return Vec::new();
    }
    (0..h.len() / 2)
        .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex digits"))
        .collect()
}

fn words<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    b.chunks_exact(N)
        .map(|c| c.try_into().expect("whole words"))
}

/// An array of the fixtures' dtype name (`bool i8 i16 i32 i64 u8 u16 u32 u64 f16 f32 f64
/// c64 c128`) from little-endian C-order bytes, on `dev`.
pub fn array_from_le(dtype: &str, shape: &[usize], b: &[u8], dev: &Device) -> lazyfuse::Array {
    use lazyfuse::{c32, c64, Array};
    let s = shape;
    let r = match dtype {
        "bool" => Array::from_vec_on(b.iter().map(|&x| x != 0).collect::<Vec<_>>(), s, dev),
        "u8" => Array::from_vec_on(b.to_vec(), s, dev),
        "i8" => Array::from_vec_on(b.iter().map(|&x| x as i8).collect::<Vec<_>>(), s, dev),
        "u16" => Array::from_vec_on(words::<2>(b).map(u16::from_le_bytes).collect(), s, dev),
        "i16" => Array::from_vec_on(words::<2>(b).map(i16::from_le_bytes).collect(), s, dev),
        "u32" => Array::from_vec_on(words::<4>(b).map(u32::from_le_bytes).collect(), s, dev),
        "i32" => Array::from_vec_on(words::<4>(b).map(i32::from_le_bytes).collect(), s, dev),
        "u64" => Array::from_vec_on(words::<8>(b).map(u64::from_le_bytes).collect(), s, dev),
        "i64" => Array::from_vec_on(words::<8>(b).map(i64::from_le_bytes).collect(), s, dev),
        "f16" => Array::from_vec_on(
            words::<2>(b)
                .map(|w| lazyfuse::f16::from_bits(u16::from_le_bytes(w)))
                .collect(),
            s,
            dev,
        ),
        "f32" => Array::from_vec_on(words::<4>(b).map(f32::from_le_bytes).collect(), s, dev),
        "f64" => Array::from_vec_on(words::<8>(b).map(f64::from_le_bytes).collect(), s, dev),
        "c64" => {
            let v: Vec<f32> = words::<4>(b).map(f32::from_le_bytes).collect();
            Array::from_vec_on(v.chunks(2).map(|p| c32::new(p[0], p[1])).collect(), s, dev)
        }
        "c128" => {
            let v: Vec<f64> = words::<8>(b).map(f64::from_le_bytes).collect();
            Array::from_vec_on(v.chunks(2).map(|p| c64::new(p[0], p[1])).collect(), s, dev)
        }
        d => panic!("fixture dtype {d}"),
    };
    r.expect("an array from fixture bytes")
}

/// `n` pseudo-random 64-bit words from `seed` (xorshift64): fixed test data without a
/// generator crate.
pub fn xorshift(n: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n).map(move |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// Deterministic pseudo-random values in [lo, hi) (a 64-bit LCG), the same for every seed
/// on every machine.
pub fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + ((s >> 11) as f64 / (1u64 << 53) as f64) * (hi - lo)
        })
        .collect()
}
