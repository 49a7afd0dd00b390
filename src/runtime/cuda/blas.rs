//! cuBLAS matrix products on a device's stream: `cublas{S,D,C,Z}gemmStridedBatched` for
//! the row-major `GemmSpec`s of matmul steps, one cached handle per device.
//!
//! # Row-major through column-major cuBLAS
//! cuBLAS is column-major, and a row-major `m x n` buffer is the column-major buffer of the
//! transpose. So `C = A B` (row-major) is computed as `C^T = B^T A^T` (column-major): the
//! call gets `m' = n`, `n' = m`, `B` as its first operand and `A` as its second. A
//! row-major operand read column-major is already the transpose the formula needs
//! (`CUBLAS_OP_N`); an operand stored column-major (a transposed view, `trans` in the
//! spec) is read with `CUBLAS_OP_T`. No conjugation: NumPy's `@` does not conjugate.
//!
//! # Batches, ordering
//! The spec's batch loop (`GemmSpec::batches`) gives one strided-batched call per outer
//! entry, with stride 0 for a broadcast operand. The handle is bound to the device's one
//! stream, so the calls are ordered after the kernels that wrote the operands and before
//! those that read the product; nothing here synchronizes. cuBLAS handles are not meant
//! for concurrent use, so a mutex per device guards the handle through every call.

use super::compile::lock;
use super::device::CudaDevice;
use super::driver_err;
use super::lane::{order_after, Lane};
use super::memory::CudaBuffer;
use crate::runtime::matmul::{Batches, GemmSpec};
use crate::{Error, Result};
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::result as drv;
use lazyfuse_codegen::DType;
use std::ffi::{c_int, c_longlong};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// An owned cuBLAS handle of a device, destroyed on drop.
struct Handle(blas_sys::cublasHandle_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as calls do not overlap;
// every use goes through the device's mutex around its `BlasState`.
unsafe impl Send for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from `cublasCreate` and is destroyed only here, once.
        let _ = unsafe { blas_sys::cublasDestroy_v2(self.0) };
    }
}

/// Whether libcublas can be loaded (checked once; never panics).
fn cublas_present() -> bool {
    *super::CUDA.cublas.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the library candidates.
        catch_unwind(|| unsafe { blas_sys::is_culib_present() }).unwrap_or(false)
    })
}

/// Wraps a cuBLAS status into the crate's error, naming the call and the product.
fn check(status: blas_sys::cublasStatus_t, op: &'static str, spec: &GemmSpec) -> Result<()> {
    crate::profile::calls::note(op);
    if status == blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda {
            op,
            msg: format!("{status:?} in matmul {spec}"),
        })
    }
}

/// A device's cuBLAS state (a field of the device, behind its mutex): the handle, made
/// at the first product, and the stream of its last use (its workspace is used in stream
/// order, see `lane::order_after`).
#[derive(Default)]
pub(super) struct BlasState {
    handle: Option<Handle>,
    last: Option<Arc<Lane>>,
}

impl BlasState {
    /// The handle (created on first use; the device's context is current on this thread).
    fn handle(&mut self) -> Result<blas_sys::cublasHandle_t> {
        if let Some(h) = &self.handle {
            return Ok(h.0);
        }
        let mut raw: blas_sys::cublasHandle_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid place for the new handle; the device's context is
        // current on this thread (bound by the caller).
        let status = unsafe { blas_sys::cublasCreate_v2(&mut raw) };
        crate::profile::calls::note("cublasCreate");
        if status != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(Error::Cuda {
                op: "cublasCreate",
                msg: format!("{status:?}"),
            });
        }
        Ok(self.handle.insert(Handle(raw)).0)
    }
}

/// A size as cuBLAS's `int`, or a shape error naming the product.
fn int(v: usize, what: &str, spec: &GemmSpec) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| Error::Shape {
        op: "matmul",
        msg: format!("{what} = {v} exceeds cuBLAS's 32-bit sizes in {spec}"),
    })
}

/// Arguments of one strided-batched call, in cuBLAS's (column-major) terms.
struct Call {
    transa: blas_sys::cublasOperation_t,
    transb: blas_sys::cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    lda: c_int,
    ldb: c_int,
    ldc: c_int,
    stride_a: c_longlong,
    stride_b: c_longlong,
    stride_c: c_longlong,
    count: c_int,
}

impl Call {
    /// The call computing every entry of one outer batch step of `spec`:
    /// `C^T (n x m) = op(B') op(A')`, with `B'` and `A'` the buffers as stored.
    fn new(spec: &GemmSpec, batches: &Batches) -> Result<Call> {
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let stride = |s: usize| {
            c_longlong::try_from(s).map_err(|_| Error::Shape {
                op: "matmul",
                msg: format!("batch stride {s} exceeds 64 bits in {spec}"),
            })
        };
        Ok(Call {
            transa: op(spec.b.trans),
            transb: op(spec.a.trans),
            m: int(spec.n, "n", spec)?,
            n: int(spec.m, "m", spec)?,
            k: int(spec.k, "k", spec)?,
            lda: int(spec.ldb().max(1), "ldb", spec)?,
            ldb: int(spec.lda().max(1), "lda", spec)?,
            ldc: int(spec.n.max(1), "ldc", spec)?,
            stride_a: stride(batches.strides[1])?,
            stride_b: stride(batches.strides[0])?,
            stride_c: stride(batches.strides[2])?,
            count: int(batches.count, "batch count", spec)?,
        })
    }
}

impl CudaDevice {
    /// The batched product `spec` of `a` and `b` (checked against the spec by the caller)
    /// as a new C-order buffer. Asynchronous: returns once the calls are queued on the
    /// device's stream. `Error::NoCuda` when libcublas cannot be loaded.
    pub(crate) fn matmul(
        &self,
        spec: &GemmSpec,
        a: &CudaBuffer,
        b: &CudaBuffer,
    ) -> Result<CudaBuffer> {
        for x in [a, b] {
            if x.device().ordinal() != self.ordinal() {
                return Err(Error::DeviceMismatch {
                    op: "matmul",
                    a: format!("cuda:{}", self.ordinal()),
                    b: format!("cuda:{}", x.device().ordinal()),
                });
            }
        }
        let me = self.arc()?;
        let out = self.alloc(me, spec.dtype, spec.out_len())?;
        if out.is_empty() {
            return Ok(out);
        }
        let lane = self.order(&[a, b], &[])?;
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxGetCurrent"))?;
        if spec.k == 0 {
            // an empty sum: zeros
            // SAFETY: the output buffer holds `out_len * size` bytes, written here on the
            // stream that every later reader is ordered on.
            unsafe {
                drv::memset_d8_async(
                    out.device_ptr(),
                    0,
                    spec.out_len() * spec.dtype.size(),
                    lane.stream.cu_stream(),
                )
            }
            .map_err(driver_err("cuMemsetD8Async"))?;
            return Ok(out);
        }
        if !cublas_present() {
            return Err(Error::NoCuda("cuBLAS library not found".into()));
        }
        let batches = spec.batches();
        let call = Call::new(spec, &batches)?;
        let size = spec.dtype.size() as u64;
        let (pa, pb, pc) = (a.device_ptr(), b.device_ptr(), out.device_ptr());
        // cudarc panics when a symbol is missing from the loaded library: report it instead.
        catch_unwind(AssertUnwindSafe(|| {
            let mut st = lock(&self.blas);
            let h = st.handle()?;
            // the handle's workspace is used in stream order: after its last use on another
            // stream, then on this thread's
            order_after(&mut st.last, &lane)?;
            // SAFETY: a live handle (guarded by the device's mutex) and a live stream of
            // this device.
            let status = unsafe { blas_sys::cublasSetStream_v2(h, lane.stream.cu_stream() as _) };
            check(status, "cublasSetStream", spec)?;
            batches.outer.iter().try_for_each(|&[oa, ob, oc]| {
                let x = pb + ob as u64 * size;
                let y = pa + oa as u64 * size;
                let z = pc + oc as u64 * size;
                // SAFETY: `spec.check` verified that every batch entry's matrix lies inside
                // the operand buffers, and the output holds every entry; the buffers stay
                // allocated until after the queued calls (stream-ordered frees); the handle
                // is bound to this device's stream and guarded by its mutex.
                unsafe { gemm(h, spec, &call, x, y, z) }
            })
        }))
        .unwrap_or_else(|_| {
            Err(Error::Cuda {
                op: "cublas",
                msg: "the cuBLAS bindings panicked (a missing library symbol?)".into(),
            })
        })?;
        Ok(out)
    }
}

/// Queues one strided-batched product of the device buffers at `x` (cuBLAS's first
/// operand), `y` (second) into `z`.
///
/// # Safety
/// `handle` must be live and not used concurrently; the addresses must be device memory
/// covering every matrix the call reads and writes.
unsafe fn gemm(
    handle: blas_sys::cublasHandle_t,
    spec: &GemmSpec,
    c: &Call,
    x: u64,
    y: u64,
    z: u64,
) -> Result<()> {
    macro_rules! call {
        ($f:ident, $t:ty, $one:expr, $zero:expr) => {{
            let (one, zero): ($t, $t) = ($one, $zero);
            // SAFETY: per this function's contract; alpha and beta are host values
            // (the handle's default pointer mode).
            let status = unsafe {
                blas_sys::$f(
                    handle,
                    c.transa,
                    c.transb,
                    c.m,
                    c.n,
                    c.k,
                    &one,
                    x as *const $t,
                    c.lda,
                    c.stride_a,
                    y as *const $t,
                    c.ldb,
                    c.stride_b,
                    &zero,
                    z as *mut $t,
                    c.ldc,
                    c.stride_c,
                    c.count,
                )
            };
            check(status, stringify!($f), spec)
        }};
    }
    use blas_sys::{double2, float2};
    match spec.dtype {
        DType::F32 => call!(cublasSgemmStridedBatched, f32, 1.0, 0.0),
        DType::F64 => call!(cublasDgemmStridedBatched, f64, 1.0, 0.0),
        DType::C64 => call!(
            cublasCgemmStridedBatched,
            float2,
            float2 { x: 1.0, y: 0.0 },
            float2 { x: 0.0, y: 0.0 }
        ),
        DType::C128 => call!(
            cublasZgemmStridedBatched,
            double2,
            double2 { x: 1.0, y: 0.0 },
            double2 { x: 0.0, y: 0.0 }
        ),
        d => Err(Error::internal(
            "cuda matmul",
            format!("unsupported dtype {d}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    //! The cuBLAS arguments checked without a GPU: a column-major reference gemm with
    //! cuBLAS's argument semantics runs the calls `Call::new` makes on host data.
    use super::*;
    use crate::runtime::matmul::GemmOperand;
    use blas_sys::cublasOperation_t::CUBLAS_OP_N;

    /// `C[b] = op(A[b]) op(B[b])`, column-major, as `cublasDgemmStridedBatched` defines it.
    fn reference(c: &Call, a: &[f64], b: &[f64], out: &mut [f64], offs: [usize; 3]) {
        let (m, n, k) = (c.m as usize, c.n as usize, c.k as usize);
        let (lda, ldb, ldc) = (c.lda as usize, c.ldb as usize, c.ldc as usize);
        for t in 0..c.count as usize {
            let oa = offs[0] + t * c.stride_a as usize;
            let ob = offs[1] + t * c.stride_b as usize;
            let oc = offs[2] + t * c.stride_c as usize;
            for i in 0..m {
                for j in 0..n {
                    let mut s = 0.0;
                    for p in 0..k {
                        let x = if c.transa == CUBLAS_OP_N {
                            a[oa + i + p * lda]
                        } else {
                            a[oa + p + i * lda]
                        };
                        let y = if c.transb == CUBLAS_OP_N {
                            b[ob + p + j * ldb]
                        } else {
                            b[ob + j + p * ldb]
                        };
                        s += x * y;
                    }
                    out[oc + i + j * ldc] = s;
                }
            }
        }
    }

    /// Lays out `count` logical `r x c` matrices (`f(t, i, j)`) as stored with `trans`.
    fn store(
        count: usize,
        r: usize,
        c: usize,
        trans: bool,
        f: impl Fn(usize, usize, usize) -> f64,
    ) -> Vec<f64> {
        let mut v = vec![0.0; count * r * c];
        for t in 0..count {
            for i in 0..r {
                for j in 0..c {
                    let at = if trans { j * r + i } else { i * c + j };
                    v[t * r * c + at] = f(t, i, j);
                }
            }
        }
        v
    }

    #[test]
    fn calls_compute_row_major_products() {
        let fa = |t: usize, i: usize, p: usize| (t * 31 + i * 7 + p) as f64 * 0.25 - 3.0;
        let fb = |t: usize, p: usize, j: usize| (t * 13 + p * 5 + j * 3) as f64 * 0.5 - 2.0;
        for (m, k, n) in [(3, 4, 5), (1, 6, 2), (4, 1, 3), (5, 3, 1)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                // batch [2, 3]: A varies along axis 0 only (shape (2, 1, m, k)), B along
                // both (shape (2, 3, k, n))
                let spec = GemmSpec {
                    dtype: DType::F64,
                    batch: [2, 3].into_iter().collect(),
                    m,
                    n,
                    k,
                    a: GemmOperand {
                        batch_strides: [m * k, 0].into_iter().collect(),
                        trans: ta,
                    },
                    b: GemmOperand {
                        batch_strides: [3 * k * n, k * n].into_iter().collect(),
                        trans: tb,
                    },
                };
                let a = store(2, m, k, ta, fa);
                let b = store(6, k, n, tb, fb);
                spec.check((DType::F64, a.len()), (DType::F64, b.len()))
                    .unwrap();
                let batches = spec.batches();
                let call = Call::new(&spec, &batches).unwrap();
                let mut out = vec![f64::NAN; spec.out_len()];
                for &[oa, ob, oc] in &batches.outer {
                    // cuBLAS's first operand is B, its second A
                    reference(&call, &b, &a, &mut out, [ob, oa, oc]);
                }
                for t in 0..6 {
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k).map(|p| fa(t / 3, i, p) * fb(t, p, j)).sum();
                            let got = out[(t * m + i) * n + j];
                            assert_eq!(got, want, "({m},{k},{n}) trans {ta} {tb} at {t},{i},{j}");
                        }
                    }
                }
            }
        }
    }
}
