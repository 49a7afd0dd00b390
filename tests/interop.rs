//! Zero-copy interop on every device: DLPack round trips of every dtype, the descriptor's
//! fields, owners and deleters dropped exactly once, imported memory never written by
//! in-place evaluation, strided imports, and raw CUDA pointers in and out.

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use lf::dlpark::metadata::Dynamic;
use lf::dlpark::{versioned, DlpackFlags};
use lf::{Array, DType, Device};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Counts its drops.
struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A DLPack tensor over `data` made by a producer other than lazyfuse, owning `owner`.
fn foreign_tensor<C: Send + 'static>(
    owner: C,
    data: *mut c_void,
    dtype: DLDataType,
    device: DLDevice,
    shape: &[i64],
    strides: &[i64],
) -> versioned::Dlpack {
    let prepared = Dynamic::new(shape.to_vec(), strides.to_vec())
        .prepare()
        .unwrap();
    let mut init = prepared.initialize(Box::new(owner));
    init.set_data(data).set_device(device).set_dtype(dtype);
    // SAFETY: every test passes a pointer to memory holding the described elements, kept
    // alive by `owner` or by the test until the tensor is gone.
    unsafe { init.finish() }
}

fn dl_device(dev: &Device) -> DLDevice {
    if dev.is_cuda() {
        DLDevice::cuda(0)
    } else {
        DLDevice::CPU
    }
}

/// 24 values of `d` in shape [2, 3, 4], negative, fractional and (complex) imaginary parts
/// included where the dtype has them.
fn sample(d: DType) -> Array {
    let x = Array::arange(0.0, 24.0, 1.0, DType::F64) * 1.25 - 9.0;
    let v = match d {
        DType::C64 => lf::complex(&x.astype(DType::F32), &(-&x).astype(DType::F32)),
        DType::C128 => lf::complex(&x, &(&x * 0.5)),
        d => x.astype(d),
    };
    v.reshape(&[2, 3, 4])
}

fn all_equal(a: &Array, b: &Array) -> bool {
    a.eq(b).all().item::<bool>().unwrap()
}

device_test!(dlpack_round_trip_every_dtype);
fn dlpack_round_trip_every_dtype(dev: &Device) {
    for d in DType::ALL {
        let a = sample(d);
        let t = a.to_dlpack().unwrap();
        {
            let v = t.validate().unwrap();
            assert_eq!(v.shape(), &[2, 3, 4], "{d}");
            assert_eq!(v.strides(), Some(&[12i64, 4, 1][..]), "{d}");
            assert_eq!(v.byte_offset(), 0);
            assert_eq!(v.dtype().lanes, 1);
            assert_eq!(v.dtype().element_size(), d.size(), "{d}");
            assert_eq!(v.device(), dl_device(dev));
            assert!(!v.data_ptr().is_null());
        }
        assert_eq!(t.flags(), DlpackFlags::READ_ONLY);
        assert_eq!(t.version().major, 1);
        // SAFETY: lazyfuse's own export.
        let b = unsafe { Array::from_dlpack(t) }.unwrap();
        assert_eq!(b.dtype(), d);
        assert_eq!(b.shape(), &[2, 3, 4]);
        assert_eq!(b.device(), *dev);
        assert!(all_equal(&a, &b), "{d} on {dev}");
        drop(a); // the import keeps the exported buffer alive
        assert!(all_equal(&sample(d), &b), "{d} on {dev}");
    }
}

#[test]
fn dlpack_codes_for_each_dtype() {
    let want = [
        (DType::Bool, DLDataTypeCode::BOOL, 8),
        (DType::I8, DLDataTypeCode::INT, 8),
        (DType::I64, DLDataTypeCode::INT, 64),
        (DType::U16, DLDataTypeCode::UINT, 16),
        (DType::F16, DLDataTypeCode::FLOAT, 16),
        (DType::BF16, DLDataTypeCode::BFLOAT, 16),
        (DType::F32, DLDataTypeCode::FLOAT, 32),
        (DType::C64, DLDataTypeCode::COMPLEX, 64),
        (DType::C128, DLDataTypeCode::COMPLEX, 128),
    ];
    for (d, code, bits) in want {
        let t = Array::zeros(&[3], d).to_dlpack().unwrap();
        let dt = t.validate().unwrap().dtype();
        assert_eq!((dt.code, dt.bits, dt.lanes), (code, bits, 1), "{d}");
    }
}

device_test!(legacy_abi_and_empty_arrays_round_trip);
fn legacy_abi_and_empty_arrays_round_trip(_dev: &Device) {
    let a = sample(DType::F32);
    let t = a.to_dlpack_legacy().unwrap();
    // SAFETY: lazyfuse's own export.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    assert!(all_equal(&a, &b));
    let e = Array::zeros(&[0, 5], DType::I32);
    let t = e.to_dlpack().unwrap();
    assert!(t.validate().unwrap().data_ptr().is_null());
    // SAFETY: lazyfuse's own export.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    assert_eq!(b.shape(), &[0, 5]);
    assert_eq!(b.to_vec::<i32>().unwrap(), Vec::<i32>::new());
}

device_test!(export_keeps_the_buffer_until_the_deleter_runs);
fn export_keeps_the_buffer_until_the_deleter_runs(_dev: &Device) {
    let t = {
        // exact arithmetic, so that the values compare bit for bit on every device
        let a = Array::arange(0.0, 6.0, 1.0, DType::F64) * 2.0 + 0.5;
        a.to_dlpack().unwrap()
    };
    // SAFETY: lazyfuse's own export, its array long dropped.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    let want: Vec<f64> = (0..6).map(|i| 2.0 * i as f64 + 0.5).collect();
    assert_eq!(b.to_vec::<f64>().unwrap(), want);
}

/// The producer's memory of a test: f64 values `0, 1, ..` on `dev`, and what to put in an
/// owner to keep it alive (a host vector, or a lazyfuse CUDA array's `CudaPtr`).
enum Memory {
    Host(Arc<Vec<f64>>),
    Cuda(Array, lf::CudaPtr),
}

impl Memory {
    fn new(dev: &Device, n: usize) -> Memory {
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        if dev.is_cuda() {
            let a = Array::from_vec_on(v, &[n], dev).unwrap();
            let p = a.cuda_ptr().unwrap();
            Memory::Cuda(a, p)
        } else {
            Memory::Host(Arc::new(v))
        }
    }
    fn ptr(&self) -> *mut c_void {
        match self {
            Memory::Host(v) => v.as_ptr().cast_mut().cast(),
            Memory::Cuda(_, p) => p.ptr() as *mut c_void,
        }
    }
    /// Something that keeps the memory alive, with a drop counter.
    fn owner(&self, count: &Arc<AtomicUsize>) -> Box<dyn std::any::Any + Send + Sync> {
        let g = Guard(count.clone());
        match self {
            Memory::Host(v) => Box::new((v.clone(), g)),
            Memory::Cuda(a, _) => Box::new((a.cuda_ptr().unwrap(), g)),
        }
    }
    fn values(&self) -> Vec<f64> {
        match self {
            Memory::Host(v) => v.to_vec(),
            Memory::Cuda(a, _) => a.to_vec::<f64>().unwrap(),
        }
    }
}

device_test!(producer_deleter_runs_exactly_once);
fn producer_deleter_runs_exactly_once(dev: &Device) {
    let mem = Memory::new(dev, 6);
    let count = Arc::new(AtomicUsize::new(0));
    let t = foreign_tensor(
        mem.owner(&count),
        mem.ptr(),
        DLDataType::F64,
        dl_device(dev),
        &[2, 3],
        &[3, 1],
    );
    // SAFETY: `mem` holds the 6 values and outlives the import.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    let c = (&b * 2.0).sum();
    assert_eq!(c.item::<f64>().unwrap(), 30.0);
    if dev.is_cuda() {
        // zero copy: the producer's tensor lives as long as lazyfuse reads it
        assert_eq!(count.load(SeqCst), 0);
    } else {
        // copied: released at once
        assert_eq!(count.load(SeqCst), 1);
    }
    let d = &b + 1.0; // lazy, holds b's node
    drop(b);
    assert_eq!(
        d.to_vec::<f64>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    drop((c, d));
    assert_eq!(count.load(SeqCst), 1, "on {dev}");
}

device_test!(imported_memory_is_never_written_in_place);
fn imported_memory_is_never_written_in_place(dev: &Device) {
    let n = 1000;
    let mem = Memory::new(dev, n);
    let before = mem.values();
    let count = Arc::new(AtomicUsize::new(0));
    let t = foreign_tensor(
        mem.owner(&count),
        mem.ptr(),
        DLDataType::F64,
        dl_device(dev),
        &[n as i64],
        &[1],
    );
    // SAFETY: `mem` holds the values and outlives the import.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    let c = b + 1.0; // consumes the last handle: in-place eligible
    c.eval().unwrap();
    let got = c.to_vec::<f64>().unwrap();
    assert!(got.iter().zip(&before).all(|(g, b)| *g == b + 1.0));
    let d = (c * 3.0).exp(); // c is lazyfuse's own: reuse is fine here
    d.eval().unwrap();
    assert_eq!(
        mem.values(),
        before,
        "the producer's memory changed on {dev}"
    );
    drop(d);
    assert_eq!(count.load(SeqCst), 1);
}

device_test!(from_cuda_ptr_in_place_and_owner);
fn from_cuda_ptr_in_place_and_owner(dev: &Device) {
    if !dev.is_cuda() {
        return;
    }
    let mem = Memory::new(dev, 64);
    let before = mem.values();
    let count = Arc::new(AtomicUsize::new(0));
    // SAFETY: `mem` holds 64 f64 on `dev`, produced on lazyfuse's stream.
    let b = unsafe {
        Array::from_cuda_ptr(
            mem.ptr() as u64,
            &[8, 8],
            DType::F64,
            dev,
            mem.owner(&count),
        )
    }
    .unwrap();
    let c = b * 2.0; // consumes the last handle: in-place eligible
    c.eval().unwrap();
    assert_eq!(mem.values(), before, "external memory written");
    let got = c.to_vec::<f64>().unwrap();
    assert!(got.iter().zip(&before).all(|(g, b)| *g == 2.0 * b));
    drop(c);
    assert_eq!(count.load(SeqCst), 1);
    // an unaligned pointer is copied once and its owner released
    let count2 = Arc::new(AtomicUsize::new(0));
    // SAFETY: elements 1..9 of `mem`.
    let e = unsafe {
        Array::from_cuda_ptr(
            mem.ptr() as u64 + 8,
            &[8],
            DType::F64,
            dev,
            mem.owner(&count2),
        )
    }
    .unwrap();
    assert_eq!(count2.load(SeqCst), 1);
    assert_eq!(e.to_vec::<f64>().unwrap(), before[1..9].to_vec());
}

device_test!(cuda_ptr_on_every_device);
fn cuda_ptr_on_every_device(dev: &Device) {
    let a = sample(DType::F32);
    if !dev.is_cuda() {
        let e = a.cuda_ptr().unwrap_err();
        assert!(matches!(e, lf::Error::Unsupported { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("cuda_ptr") && msg.contains("cpu"), "{msg}");
        assert!(dev.cuda_stream().is_err());
        // SAFETY: fails before reading anything.
        let e =
            unsafe { Array::from_cuda_ptr(16, &[1], DType::F32, dev, Box::new(())) }.unwrap_err();
        assert!(e.to_string().contains("from_cuda_ptr"), "{e}");
        return;
    }
    let p = a.cuda_ptr().unwrap();
    assert_ne!(p.ptr(), 0);
    assert_eq!(p.ptr() % 256, 0);
    assert_eq!(p.shape(), &[2, 3, 4]);
    assert_eq!(p.strides(), &[12, 4, 1]);
    assert_eq!(p.dtype(), DType::F32);
    assert_eq!(p.device_ordinal(), 0);
    assert_eq!(p.nbytes(), 96);
    assert_eq!(p.stream(), dev.cuda_stream().unwrap());
    let (ptr, shape) = (p.ptr(), p.shape().to_vec());
    // SAFETY: `p` (the owner) keeps the 24 f32 alive.
    let back = unsafe { Array::from_cuda_ptr(ptr, &shape, DType::F32, dev, Box::new(p)) }.unwrap();
    assert!(all_equal(&a, &back));
    // a view is materialized: contiguous in its own C order
    let t = a.permute(&[2, 0, 1]);
    let q = t.cuda_ptr().unwrap();
    assert_eq!((q.shape(), q.strides()), (&[4, 2, 3][..], &[6, 3, 1][..]));
    let (ptr, shape) = (q.ptr(), q.shape().to_vec());
    // SAFETY: as above.
    let back = unsafe { Array::from_cuda_ptr(ptr, &shape, DType::F32, dev, Box::new(q)) }.unwrap();
    assert!(all_equal(&t, &back));
    // null and host pointers are refused
    // SAFETY: refused before reading.
    let e = unsafe { Array::from_cuda_ptr(0, &[4], DType::F32, dev, Box::new(())) };
    assert!(e.is_err());
    let host = [0f32; 4];
    // SAFETY: refused before reading (not device memory).
    let e =
        unsafe { Array::from_cuda_ptr(host.as_ptr() as u64, &[4], DType::F32, dev, Box::new(())) };
    assert!(e.is_err());
}

device_test!(strided_imports);
fn strided_imports(dev: &Device) {
    // Fortran order of a [2, 3] matrix: memory 0..6 holds columns
    let mem = Memory::new(dev, 6);
    let count = Arc::new(AtomicUsize::new(0));
    let t = foreign_tensor(
        mem.owner(&count),
        mem.ptr(),
        DLDataType::F64,
        dl_device(dev),
        &[2, 3],
        &[1, 2],
    );
    // SAFETY: `mem` holds the 6 values.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    assert_eq!(b.shape(), &[2, 3]);
    assert_eq!(
        b.to_vec::<f64>().unwrap(),
        vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]
    );
    // every other element, with a byte offset: a gather on the CPU, refused on CUDA
    let t = foreign_tensor(
        mem.owner(&count),
        mem.ptr(),
        DLDataType::F64,
        dl_device(dev),
        &[2],
        &[3],
    );
    // SAFETY: elements 0 and 3 of `mem`.
    let r = unsafe { Array::from_dlpack(t) };
    if dev.is_cuda() {
        let e = r.unwrap_err();
        assert!(matches!(e, lf::Error::Unsupported { .. }));
        assert!(e.to_string().contains("[3]"), "{e}");
    } else {
        assert_eq!(r.unwrap().to_vec::<f64>().unwrap(), vec![0.0, 3.0]);
    }
    drop(b);
    assert_eq!(count.load(SeqCst), 2, "each tensor released once");
}

#[test]
fn bool_bytes_and_offsets_on_the_host() {
    let bytes: Arc<Vec<u8>> = Arc::new(vec![7, 0, 1, 0, 255]);
    let p = bytes.as_ptr().cast_mut().cast::<c_void>();
    let prepared = Dynamic::new(vec![4i64], vec![1i64]).prepare().unwrap();
    let mut init = prepared.initialize(Box::new(bytes.clone()));
    init.set_data(p)
        .set_device(DLDevice::CPU)
        .set_dtype(DLDataType::BOOL)
        .set_byte_offset(1);
    // SAFETY: bytes 1..5 of `bytes`, alive in the owner.
    let t = unsafe { init.finish() };
    // SAFETY: as above.
    let b = unsafe { Array::from_dlpack(t) }.unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![false, true, false, true]);
}

#[test]
fn unsupported_dtypes_and_devices_are_errors() {
    let v: Arc<Vec<u8>> = Arc::new(vec![0; 8]);
    let p = v.as_ptr().cast_mut().cast::<c_void>();
    let t = foreign_tensor(
        v.clone(),
        p,
        DLDataType::F8E4M3FN,
        DLDevice::CPU,
        &[8],
        &[1],
    );
    // SAFETY: refused before reading.
    let e = unsafe { Array::from_dlpack(t) }.unwrap_err();
    assert!(matches!(e, lf::Error::Unsupported { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("from_dlpack") && msg.contains("code 10"),
        "{msg}"
    );
    let t = foreign_tensor(
        v.clone(),
        p,
        DLDataType::new(DLDataTypeCode::FLOAT, 32, 2),
        DLDevice::CPU,
        &[1],
        &[1],
    );
    // SAFETY: refused before reading.
    let msg = unsafe { Array::from_dlpack(t) }.unwrap_err().to_string();
    assert!(msg.contains("2 lanes"), "{msg}");
    let t = foreign_tensor(v.clone(), p, DLDataType::U8, DLDevice::metal(0), &[8], &[1]);
    // SAFETY: refused before reading.
    let msg = unsafe { Array::from_dlpack(t) }.unwrap_err().to_string();
    assert!(
        msg.contains(&format!("device type {}", DLDeviceType::METAL.0)),
        "{msg}"
    );
    assert_eq!(
        Arc::strong_count(&v),
        1,
        "every refused tensor was released"
    );
}

#[cfg(feature = "cuda")]
device_test!(foreign_cuda_producer_and_consumer);
/// Memory of another CUDA user of the process (cudarc with its own stream and event
/// tracking, as another library would have): imported after ordering lazyfuse's stream
/// behind the producer's, exported to a consumer stream without a host wait.
#[cfg(feature = "cuda")]
fn foreign_cuda_producer_and_consumer(dev: &Device) {
    use cudarc::driver::{result as drv, CudaContext, DevicePtr};
    if !dev.is_cuda() {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    let s = ctx.new_stream().unwrap();
    let host: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let buf = s.clone_htod(&host).unwrap();
    let ptr = {
        let (p, _sync) = buf.device_ptr(&s);
        p
    };
    let stream = s.cu_stream() as u64;
    // SAFETY: `s` is a live stream of device 0's primary context.
    unsafe { dev.wait_for_stream(stream) }.unwrap();
    // SAFETY: `buf` (the owner) holds 1000 f32 written on `s`, which lazyfuse's stream
    // now waits for; nobody writes it afterwards.
    let a =
        unsafe { Array::from_cuda_ptr(ptr, &[10, 100], DType::F32, dev, Box::new(buf)) }.unwrap();
    let b = (&a * 0.01).exp().sum_axes(&[1], false);
    let want: Vec<f32> = (0..10)
        .map(|r| (0..100).map(|c| (host[r * 100 + c] * 0.01).exp()).sum())
        .collect();
    let got = b.to_vec::<f32>().unwrap();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(g, w)| (g - w).abs() <= 1e-4 * w.abs()));
    // export to the consumer stream `s` without a host wait, read back on `s`
    let c = &a + 1.0;
    // SAFETY: `s` is live (see above).
    let t = unsafe { c.to_dlpack_on_stream(stream) }.unwrap();
    let data = t.validate().unwrap().data_ptr() as u64;
    let mut back = vec![0f32; 1000];
    ctx.bind_to_thread().unwrap();
    // SAFETY: `t` keeps 1000 f32 alive at `data`; `s` waits for the kernel writing them.
    unsafe { drv::memcpy_dtoh_async(&mut back, data, s.cu_stream()) }.unwrap();
    s.synchronize().unwrap();
    assert!(back.iter().zip(&host).all(|(b, h)| *b == h + 1.0));
    drop(t);
}
