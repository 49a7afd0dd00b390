//! A C ABI over lazyfuse's DLPack export and import, built as a shared library so that
//! Python can load it with `ctypes` (no pyo3): `benches/interop_torch.py` wraps the
//! returned `DLManagedTensor(Versioned)*` in PyCapsules for NumPy, PyTorch and CuPy, and
//! hands their capsules' tensors back.
//!
//! Build: `cargo build --release --example dlpack_export` (gives
//! `target/release/examples/libdlpack_export.so`).
//!
//! Every function catches panics and reports errors on stderr: nothing unwinds into C.

use lazyfuse as lf;
use lf::dlpark::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use lf::dlpark::Managed;
use lf::{Array, DType, Device};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `-1`: the CPU; `n >= 0`: CUDA device `n`.
fn device(dev: i32) -> lf::Result<Device> {
    if dev < 0 {
        Ok(Device::cpu())
    } else {
        Device::cuda(dev as usize)
    }
}

/// Runs `f`, turning an error or a panic into `fallback` and a line on stderr.
fn guarded<T>(what: &str, fallback: T, f: impl FnOnce() -> lf::Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            eprintln!("{what}: {e}");
            fallback
        }
        Err(_) => {
            eprintln!("{what}: panicked");
            fallback
        }
    }
}

/// Exports `a` in the versioned ABI (`legacy == 0`) or the legacy one.
fn export(a: &Array, legacy: i32) -> lf::Result<*mut c_void> {
    Ok(if legacy == 0 {
        a.to_dlpack()?.into_raw().cast()
    } else {
        a.to_dlpack_legacy()?.into_raw().cast()
    })
}

/// Takes ownership of a DLPack tensor of either ABI and imports it.
///
/// # Safety
/// `t` is a valid, unconsumed `DLManagedTensorVersioned*` (`legacy == 0`) or
/// `DLManagedTensor*`, whose data is ready.
unsafe fn import(t: *mut c_void, legacy: i32) -> lf::Result<Array> {
    let bad = |e: lf::dlpark::dlpack::FromRawError| lf::Error::Shape {
        op: "from_dlpack",
        msg: e.to_string(),
    };
    // SAFETY: the caller's contract.
    unsafe {
        if legacy == 0 {
            let m = Managed::from_raw(t.cast::<DLManagedTensorVersioned>()).map_err(bad)?;
            Array::from_dlpack(m)
        } else {
            let m = Managed::from_raw(t.cast::<DLManagedTensor>()).map_err(bad)?;
            Array::from_dlpack(m)
        }
    }
}

/// `exp(linspace(0, 1, n))` in f32 on device `dev` (-1: CPU), exported as DLPack (versioned
/// ABI when `legacy == 0`). Null on error.
#[no_mangle]
pub extern "C" fn lf_export_exp_linspace(n: u64, dev: i32, legacy: i32) -> *mut c_void {
    guarded("lf_export_exp_linspace", std::ptr::null_mut(), || {
        let d = device(dev)?;
        let a = Array::linspace(0.0, 1.0, n as usize, DType::F32)
            .to_device(&d)
            .exp();
        export(&a, legacy)
    })
}

/// Imports the DLPack tensor `t` (taking ownership; `legacy` as above) and returns the sum
/// of its elements as f64. NaN on error.
///
/// # Safety
/// `t` is a valid, unconsumed DLPack tensor of the ABI `legacy` names, ready to read.
#[no_mangle]
pub unsafe extern "C" fn lf_import_sum(t: *mut c_void, legacy: i32) -> f64 {
    guarded("lf_import_sum", f64::NAN, || {
        // SAFETY: the caller's contract.
        let a = unsafe { import(t, legacy) }?;
        a.astype(DType::F64).sum().item::<f64>()
    })
}

/// Imports `t` (taking ownership; ABI `legacy`), computes `2 * t + 1` on its device and
/// exports the result (ABI `out_legacy`). Null on error.
///
/// # Safety
/// As [`lf_import_sum`].
#[no_mangle]
pub unsafe extern "C" fn lf_affine(t: *mut c_void, legacy: i32, out_legacy: i32) -> *mut c_void {
    guarded("lf_affine", std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let a = unsafe { import(t, legacy) }?;
        export(&(&a * 2.0 + 1.0), out_legacy)
    })
}

/// Releases an exported tensor nobody consumed (a PyCapsule destructor calls this).
///
/// # Safety
/// `t` is an unconsumed tensor of the ABI `legacy` names.
#[no_mangle]
pub unsafe extern "C" fn lf_dlpack_free(t: *mut c_void, legacy: i32) {
    guarded("lf_dlpack_free", (), || {
        // SAFETY: the caller's contract; dropping runs the deleter once.
        unsafe { import_drop(t, legacy) };
        Ok(())
    })
}

/// # Safety
/// As [`lf_dlpack_free`].
unsafe fn import_drop(t: *mut c_void, legacy: i32) {
    // SAFETY: the caller's contract.
    unsafe {
        if legacy == 0 {
            drop(Managed::from_raw(t.cast::<DLManagedTensorVersioned>()));
        } else {
            drop(Managed::from_raw(t.cast::<DLManagedTensor>()));
        }
    }
}
