//! The FFT helper kernels (resizing the half spectrum, real/complex conversions for
//! length-1 real axes) as kernel IR: compiled, cached on disk, profiled and
//! launched like every fused kernel, and run on the CPU interpreter by the tests.

use super::plan::Precision;
use lazyfuse_codegen::ir::{Builder, Inst};
use lazyfuse_codegen::{BinaryOp, DType, Kernel, LaunchArgs, Scalar, UnaryOp};
use smallvec::smallvec;
use std::sync::{Arc, OnceLock};

/// One helper kernel with its launch arguments.
pub(super) struct Launch {
    pub(super) kernel: Arc<Kernel>,
    pub(super) args: LaunchArgs,
}

/// The complex value `v` with its imaginary part cleared where `k` (I64) is 0 or `nyq`.
fn sanitized(b: &mut Builder, v: u32, k: u32, nyq: u32, complex: DType) -> u32 {
    let zero = b.const_i64(0);
    let at_zero = b.binary(BinaryOp::Eq, k, zero);
    let at_nyq = b.binary(BinaryOp::Eq, k, nyq);
    let clear = b.binary(BinaryOp::Or, at_zero, at_nyq);
    let re = b.unary(UnaryOp::Real, v);
    let real = b.cast(re, complex);
    b.select(clear, real, v)
}

/// `dst[o, k, i] = k < n ? src[o, k, i] : 0` over `[outer, h, inner]` (`src` is
/// `[outer, n, inner]`); with `sanitize` the imaginary parts at `k == 0` and `k == nyq` are
/// cleared. Params: `n`, `inner`, `nyq` (I64).
fn resize_kernel(complex: DType, sanitize: bool) -> Kernel {
    let mut b = Builder::new(3);
    let src = b.input(complex);
    let n = b.param(DType::I64);
    let inner = b.param(DType::I64);
    let nyq = b.param(DType::I64);
    let o = b.push(Inst::Axis(0), DType::I64);
    let k = b.push(Inst::Axis(1), DType::I64);
    let i = b.push(Inst::Axis(2), DType::I64);
    let row = b.binary(BinaryOp::Mul, o, n);
    let row = b.binary(BinaryOp::Add, row, k);
    let at = b.binary(BinaryOp::Mul, row, inner);
    let at = b.binary(BinaryOp::Add, at, i);
    let inside = b.binary(BinaryOp::Lt, k, n);
    let v = b.push(
        Inst::Load {
            input: src,
            index: at,
            guard: Some(inside),
        },
        complex,
    );
    let v = if sanitize {
        sanitized(&mut b, v, k, nyq, complex)
    } else {
        v
    };
    b.store(v);
    b.finish()
}

/// Real elements to complex ones with zero imaginary parts (`real`), or the real parts of
/// complex ones.
fn convert_kernel(from: DType, to_complex: bool) -> Kernel {
    let mut b = Builder::new(1);
    let src = b.input(from);
    let at = b.push(Inst::Index, DType::I64);
    let v = b.push(
        Inst::Load {
            input: src,
            index: at,
            guard: None,
        },
        from,
    );
    let v = if to_complex {
        b.cast(v, from.to_complex())
    } else {
        b.unary(UnaryOp::Real, v)
    };
    b.store(v);
    b.finish()
}

/// The kernels of one precision, built once per device (shared `Arc`s, so that launches
/// find their loaded kernel without hashing the IR).
struct Kernels {
    resize: Arc<Kernel>,
    resize_sanitized: Arc<Kernel>,
    to_complex: Arc<Kernel>,
    real_part: Arc<Kernel>,
}

impl Kernels {
    fn new(prec: Precision) -> Kernels {
        let (c, r) = (prec.complex_dtype(), prec.real_dtype());
        Kernels {
            resize: Arc::new(resize_kernel(c, false)),
            resize_sanitized: Arc::new(resize_kernel(c, true)),
            to_complex: Arc::new(convert_kernel(r, true)),
            real_part: Arc::new(convert_kernel(c, false)),
        }
    }
}

/// The helper kernels of both precisions as IR, each built on its first use: a field of
/// the device whose kernel cache loads them.
#[derive(Default)]
pub(in crate::runtime::cuda) struct HelperKernels([OnceLock<Kernels>; 2]);

impl HelperKernels {
    fn get(&self, prec: Precision) -> &Kernels {
        let cell = match prec {
            Precision::Single => &self.0[0],
            Precision::Double => &self.0[1],
        };
        cell.get_or_init(|| Kernels::new(prec))
    }
}

fn i64s(v: &[i64]) -> smallvec::SmallVec<[Scalar; 4]> {
    v.iter().map(|&x| Scalar::I64(x)).collect()
}

/// `Step::Resize` (reads `[outer, n, inner]`, writes `[outer, h, inner]`).
pub(super) fn resize(
    helpers: &HelperKernels,
    prec: Precision,
    (outer, n, h, inner): (usize, usize, usize, usize),
    nyq: i64,
    sanitize: bool,
) -> Launch {
    let k = helpers.get(prec);
    Launch {
        kernel: if sanitize {
            k.resize_sanitized.clone()
        } else {
            k.resize.clone()
        },
        args: LaunchArgs {
            shape: smallvec![outer, h, inner],
            params: i64s(&[n as i64, inner as i64, nyq]),
        },
    }
}

/// `Step::ToComplex` (`to_complex`) or `Step::RealPart` of `len` elements.
pub(super) fn convert(
    helpers: &HelperKernels,
    prec: Precision,
    len: usize,
    to_complex: bool,
) -> Launch {
    let k = helpers.get(prec);
    Launch {
        kernel: if to_complex {
            k.to_complex.clone()
        } else {
            k.real_part.clone()
        },
        args: LaunchArgs {
            shape: smallvec![len],
            params: Default::default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazyfuse_codegen::{interp, HostBuf};
    use num_complex::Complex64 as Z;

    fn run(l: &Launch, input: &HostBuf) -> HostBuf {
        let n = l.args.len();
        let mut out = HostBuf::zeros(l.kernel.outputs[0], n);
        interp::run(
            &l.kernel,
            &[input.as_slice()],
            &mut [out.as_slice_mut()],
            &l.args,
            0,
        )
        .unwrap();
        out
    }

    fn values(len: usize) -> Vec<Z> {
        (0..len)
            .map(|j| Z::new(j as f64 * 0.5 - 3.0, 1.0 + (j % 7) as f64))
            .collect()
    }

    /// Each helper on the CPU interpreter against the step's definition, both precisions,
    /// awkward sizes (a truncation, a zero padding, odd lengths without a Nyquist entry).
    #[test]
    fn helper_kernels_compute_their_steps() {
        let helpers = HelperKernels::default();
        for prec in [Precision::Single, Precision::Double] {
            let cast = |v: &[Z]| match prec {
                Precision::Double => HostBuf::C128(v.to_vec()),
                Precision::Single => HostBuf::C64(
                    v.iter()
                        .map(|z| num_complex::Complex32::new(z.re as f32, z.im as f32))
                        .collect(),
                ),
            };
            let back = |b: &HostBuf| -> Vec<Z> {
                match b {
                    HostBuf::C128(v) => v.clone(),
                    HostBuf::C64(v) => v.iter().map(|z| Z::new(z.re as f64, z.im as f64)).collect(),
                    HostBuf::F64(v) => v.iter().map(|&r| Z::new(r, 0.0)).collect(),
                    HostBuf::F32(v) => v.iter().map(|&r| Z::new(r as f64, 0.0)).collect(),
                    other => panic!("{}", other.dtype()),
                }
            };
            for (outer, n, h, inner, nyq) in [(2, 5, 3, 3, 2), (1, 3, 5, 1, -1), (3, 4, 4, 2, 3)] {
                let x = values(outer * n * inner);
                for sanitize in [false, true] {
                    let got = back(&run(
                        &resize(&helpers, prec, (outer, n, h, inner), nyq, sanitize),
                        &cast(&x),
                    ));
                    let mut want = Vec::new();
                    for o in 0..outer {
                        for k in 0..h {
                            for i in 0..inner {
                                let mut z = if k < n {
                                    x[(o * n + k) * inner + i]
                                } else {
                                    Z::new(0.0, 0.0)
                                };
                                if sanitize && (k == 0 || k as i64 == nyq) {
                                    z.im = 0.0;
                                }
                                want.push(z);
                            }
                        }
                    }
                    assert_eq!(got, want, "resize {prec:?} {:?}", (outer, n, h, inner, nyq));
                }
            }
            let x = values(7);
            let re: Vec<Z> = x.iter().map(|z| Z::new(z.re, 0.0)).collect();
            assert_eq!(
                back(&run(&convert(&helpers, prec, 7, false), &cast(&x))),
                re
            );
            let real_in = match prec {
                Precision::Double => HostBuf::F64(x.iter().map(|z| z.re).collect()),
                Precision::Single => HostBuf::F32(x.iter().map(|z| z.re as f32).collect()),
            };
            let got = run(&convert(&helpers, prec, 7, true), &real_in);
            assert_eq!(got.dtype(), prec.complex_dtype());
            assert_eq!(back(&got), re);
        }
    }

    /// Every helper kernel renders, and compiles with NVRTC for sm_90 where NVRTC is
    /// installed (the GPU machine; `LAZYFUSE_REQUIRE_NVRTC=1` makes its absence a failure).
    #[test]
    fn helper_kernels_render_and_compile() {
        let helpers = HelperKernels::default();
        let present = crate::runtime::cuda::nvrtc_check(&helpers.get(Precision::Single).resize)
            .expect("nvrtc check");
        assert!(
            present || std::env::var("LAZYFUSE_REQUIRE_NVRTC").map_or(true, |v| v != "1"),
            "LAZYFUSE_REQUIRE_NVRTC=1 but NVRTC cannot be loaded"
        );
        for prec in [Precision::Single, Precision::Double] {
            let k = helpers.get(prec);
            for kernel in [&k.resize, &k.resize_sanitized, &k.to_complex, &k.real_part] {
                for index32 in [true, false] {
                    let opts = lazyfuse_codegen::cuda::RenderOptions {
                        index32,
                        scalar: false,
                    };
                    lazyfuse_codegen::cuda::render(kernel, &opts).expect("render");
                }
                assert_eq!(
                    crate::runtime::cuda::nvrtc_check(kernel).expect("nvrtc"),
                    present
                );
            }
        }
    }
}
