//! Shared test helpers: the devices every test body runs on, tolerances and comparisons.
#![allow(dead_code)]

use lazyfuse::Device;

pub mod oracle;

/// The devices every device-generic test runs on: the CPU always, and CUDA device 0 when
/// `LAZYFUSE_TEST_CUDA=1` (then a missing GPU is a failure, not a skip).
pub fn devices() -> Vec<Device> {
    let mut v = vec![Device::cpu()];
    if std::env::var("LAZYFUSE_TEST_CUDA").is_ok_and(|s| s == "1") {
        match Device::cuda(0) {
            Ok(d) => v.push(d),
            Err(e) => panic!("LAZYFUSE_TEST_CUDA=1 but CUDA device 0 is unusable: {e}"),
        }
    }
    v
}

/// Runs `body` once per device, naming the device in any failure.
pub fn for_each_device(mut body: impl FnMut(&Device)) {
    for d in devices() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lazyfuse::with_default_device(&d, || body(&d))
        }));
        if let Err(e) = r {
            eprintln!("test failed on device {d}");
            std::panic::resume_unwind(e);
        }
    }
}
