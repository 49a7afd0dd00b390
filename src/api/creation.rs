//! Creation functions: constants, ranges, identity, meshgrid and counter-based random
//! numbers. All are lazy and fuse into their consumers.

use super::make;
use crate::graph::{Op, Shape};
use crate::{Array, Device, Element};
use lazyfuse_codegen::{DType, RandomKind, Scalar};

/// Index ordering of [`meshgrid`]: `Xy` (Cartesian, NumPy's default) or `Ij` (matrix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Cartesian: the first two output axes are swapped.
    Xy,
    /// Matrix indexing.
    Ij,
}

impl Array {
    /// A 0-d array holding `v`, on the default device ([`crate::default_device`]: the CPU,
    /// with a warning, when `LAZYFUSE_DEVICE` names a device that cannot be opened).
    #[track_caller]
    pub fn scalar<T: Element>(v: T) -> Array {
        Array::scalar_on(v, &crate::default_device())
    }
    /// [`Array::scalar`] on `dev`.
    #[track_caller]
    pub fn scalar_on<T: Element>(v: T, dev: &Device) -> Array {
        Array::scalar_on_dtype(v.to_scalar(), dev)
    }
    /// An array of `shape` filled with `v` converted to `dtype`.
    ///
    /// # Panics
    /// When `v` is an integer that the integer `dtype` cannot hold (NumPy 2's `full`
    /// raises `OverflowError` rather than wrapping it).
    #[track_caller]
    pub fn full<T: Element>(shape: &[usize], v: T, dtype: DType) -> Array {
        Array::full_on(shape, v, dtype, &crate::default_device())
    }
    /// [`Array::full`] on `dev`.
    #[track_caller]
    pub fn full_on<T: Element>(shape: &[usize], v: T, dtype: DType, dev: &Device) -> Array {
        crate::shape::size_or_panic("full", shape);
        let s = v.to_scalar();
        if let Some(v) = crate::promote::weak_int_overflow(&s, dtype) {
            crate::promote::overflow_panic("full", v, dtype);
        }
        Array::const_at(s.cast(dtype), shape, dev)
    }
    /// Zeros, on the default device (see [`Array::scalar`] for a default that cannot be
    /// opened).
    #[track_caller]
    pub fn zeros(shape: &[usize], dtype: DType) -> Array {
        Array::zeros_on(shape, dtype, &crate::default_device())
    }
    /// [`Array::zeros`] on `dev`.
    #[track_caller]
    pub fn zeros_on(shape: &[usize], dtype: DType, dev: &Device) -> Array {
        crate::shape::size_or_panic("zeros", shape);
        Array::full_on(shape, 0i64, dtype, dev)
    }
    /// Ones.
    #[track_caller]
    pub fn ones(shape: &[usize], dtype: DType) -> Array {
        Array::ones_on(shape, dtype, &crate::default_device())
    }
    /// [`Array::ones`] on `dev`.
    #[track_caller]
    pub fn ones_on(shape: &[usize], dtype: DType, dev: &Device) -> Array {
        crate::shape::size_or_panic("ones", shape);
        Array::full_on(shape, 1i64, dtype, dev)
    }

    /// `0, 1, .., n-1` as I64.
    #[track_caller]
    pub(crate) fn iota_on(n: usize, dev: &Device) -> Array {
        make(Op::Iota, DType::I64, Shape::from_slice(&[n]), dev, &[])
    }

    /// `start, start + step, ..` below `stop` (NumPy `arange`).
    ///
    /// # Panics
    /// When `step` is 0 or a bound is not finite, and when the count of elements does not
    /// fit `usize`. A count that fits but whose buffer cannot exist is an error at
    /// evaluation ([`Array::eval`]).
    #[track_caller]
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Array {
        Array::arange_on(start, stop, step, dtype, &crate::default_device())
    }
    /// [`Array::arange`] on `dev`.
    #[track_caller]
    pub fn arange_on(start: f64, stop: f64, step: f64, dtype: DType, dev: &Device) -> Array {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            panic!("arange: invalid range start={start} stop={stop} step={step}");
        }
        let count = ((stop - start) / step).ceil().max(0.0);
        // 2^64 is the first count usize cannot hold (and `as` would saturate, silently);
        // a count that fits but whose buffer does not is an error at evaluation
        if count >= 18_446_744_073_709_551_616.0 {
            panic!(
                "arange: {count:e} elements (start={start} stop={stop} step={step}) are more \
                 than usize can count"
            );
        }
        let n = count as usize;
        let i = Array::iota_on(n, dev);
        if dtype.is_int() {
            // exact integer arithmetic for integer ranges
            if start.fract() == 0.0 && step.fract() == 0.0 {
                return (i * step as i64 + start as i64).astype(dtype);
            }
        }
        (i.astype(DType::F64) * step + start).astype(dtype)
    }

    /// `num` evenly spaced values from `start` to `stop`, both included (NumPy `linspace`;
    /// integer dtypes round toward -inf as NumPy 2 does).
    #[track_caller]
    pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Array {
        Array::linspace_on(start, stop, num, dtype, &crate::default_device())
    }
    /// [`Array::linspace`] on `dev`.
    #[track_caller]
    pub fn linspace_on(start: f64, stop: f64, num: usize, dtype: DType, dev: &Device) -> Array {
        let i = Array::iota_on(num, dev).astype(DType::F64);
        let y = if num > 1 {
            let step = (stop - start) / (num - 1) as f64;
            let y = &i * step + start;
            crate::where_(&i.eq((num - 1) as f64), stop, &y)
        } else {
            i + start
        };
        if dtype.is_int() { y.floor() } else { y }.astype(dtype)
    }

    /// The `n x n` identity matrix.
    #[track_caller]
    pub fn eye(n: usize, dtype: DType) -> Array {
        Array::eye_on(n, dtype, &crate::default_device())
    }
    /// [`Array::eye`] on `dev`.
    #[track_caller]
    pub fn eye_on(n: usize, dtype: DType, dev: &Device) -> Array {
        crate::shape::size_or_panic("eye", &[n, n]);
        let i = Array::iota_on(n, dev);
        i.reshape(&[-1, 1]).eq(i.reshape(&[1, -1])).astype(dtype)
    }
}

/// Coordinate arrays from 1-D coordinate vectors (NumPy `meshgrid`; inputs of other ranks
/// are flattened).
#[track_caller]
pub fn meshgrid(arrays: &[&Array], indexing: Indexing) -> Vec<Array> {
    let k = arrays.len();
    let mut lens: Vec<usize> = arrays.iter().map(|a| a.size()).collect();
    let swap = indexing == Indexing::Xy && k >= 2;
    if swap {
        lens.swap(0, 1);
    }
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let pos = if swap && i < 2 { 1 - i } else { i };
            let mut s: Vec<isize> = vec![1; k];
            s[pos] = -1;
            a.reshape(&[-1]).reshape(&s).broadcast_to(&lens)
        })
        .collect()
}

/// Counter-based random numbers: the same seed gives the same numbers on every device.
pub mod random {
    use super::*;

    #[track_caller]
    fn random(shape: &[usize], dtype: DType, seed: u64, kind: RandomKind, dev: &Device) -> Array {
        if !matches!(dtype, DType::F32 | DType::F64) {
            panic!("random: dtype must be F32 or F64, got {dtype}");
        }
        crate::shape::size_or_panic("random", shape);
        make(
            Op::Random(kind, seed),
            dtype,
            Shape::from_slice(shape),
            dev,
            &[],
        )
    }

    /// Uniform numbers in `[0, 1)` (Philox4x32-10 keyed by `seed`, counter = element index).
    #[track_caller]
    pub fn uniform(shape: &[usize], dtype: DType, seed: u64) -> Array {
        random(
            shape,
            dtype,
            seed,
            RandomKind::Uniform,
            &crate::default_device(),
        )
    }
    /// [`uniform`] on `dev`.
    #[track_caller]
    pub fn uniform_on(shape: &[usize], dtype: DType, seed: u64, dev: &Device) -> Array {
        random(shape, dtype, seed, RandomKind::Uniform, dev)
    }
    /// Standard normal numbers (Box-Muller on Philox4x32-10).
    #[track_caller]
    pub fn normal(shape: &[usize], dtype: DType, seed: u64) -> Array {
        random(
            shape,
            dtype,
            seed,
            RandomKind::Normal,
            &crate::default_device(),
        )
    }
    /// [`normal`] on `dev`.
    #[track_caller]
    pub fn normal_on(shape: &[usize], dtype: DType, seed: u64, dev: &Device) -> Array {
        random(shape, dtype, seed, RandomKind::Normal, dev)
    }
}

#[allow(unused_imports)]
use Scalar as _;
