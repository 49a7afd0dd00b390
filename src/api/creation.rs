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
    /// A 0-d array holding `v`, on the default device ([`crate::default_device`]).
    ///
    /// # Panics
    /// Like every infallible builder on the default device, when that device comes from a
    /// `LAZYFUSE_DEVICE` that names no usable device (the message names the variable and
    /// its value); the `_on` forms take the device instead.
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
    /// Zeros, on the default device (panics when that cannot be had: see
    /// [`Array::scalar`]).
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
///
/// Two ways to seed them. [`uniform`](random::uniform) and [`normal`](random::normal) take a
/// `u64` seed fixed in the graph (a new seed is a new kernel argument, never a recompile).
/// [`uniform_key`](random::uniform_key) and [`normal_key`](random::normal_key) take a
/// [`Key`](random::Key): randomness as data, an array that can be an input of a
/// traced [`crate::Function`], so each call draws new numbers from the same plan.
/// `uniform_key(&Key::new(s), ..)` gives exactly the numbers of `uniform(.., s)`.
pub mod random {
    use super::*;
    use crate::{Error, Result};

    #[track_caller]
    fn check(op: &str, shape: &[usize], dtype: DType) {
        if !matches!(dtype, DType::F32 | DType::F64) {
            panic!("{op}: dtype must be F32 or F64, got {dtype}");
        }
        crate::shape::size_or_panic(op, shape);
    }

    #[track_caller]
    fn random(shape: &[usize], dtype: DType, seed: u64, kind: RandomKind, dev: &Device) -> Array {
        check("random", shape, dtype);
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

    /// Multiplier of [`Key::split`] (odd, so `k -> k * M` is a bijection of `u64`).
    const SPLIT_MUL: u64 = 0x9E37_79B9_7F4A_7C15;
    /// Increment step of [`Key::split`] (odd).
    const SPLIT_ADD: u64 = 0xBF58_476D_1CE4_E5B9;
    /// Multiplier of [`Key::fold_in`] (odd).
    const FOLD_MUL: u64 = 0x94D0_49BB_1331_11EB;
    /// Increment step of [`Key::fold_in`] (odd).
    const FOLD_ADD: u64 = 0xD6E8_FEB8_6659_FD93;

    /// A random key: a 0-d `I64` array holding the 64-bit Philox seed (as its two's
    /// complement bits). Randomness as data: a key is an ordinary lazy array, so it can be
    /// an input of a traced [`crate::Function`] (a new key per call, the same plan), and
    /// [`Key::split`] and [`Key::fold_in`] are lazy array ops that work inside a traced
    /// closure too.
    ///
    /// Derived keys use wrapping 64-bit arithmetic (`*`, `+` modulo 2^64) with fixed odd
    /// constants:
    /// * `k.split(n)[i] = k * 0x9E3779B97F4A7C15 + (i + 1) * 0xBF58476D1CE4E5B9`
    /// * `k.fold_in(d)  = k * 0x94D049BB133111EB + (d + 1) * 0xD6E8FEB86659FD93`
    ///
    /// so the keys of one split differ from each other and from `k` (the multiplier is odd,
    /// `(i + 1) * c` differs for every `i < 2^64`), and Philox4x32-10 turns even adjacent
    /// seeds into unrelated streams.
    ///
    /// ```
    /// use lazyfuse as lf;
    /// use lf::{random::Key, DType};
    ///
    /// # fn main() -> lf::Result<()> {
    /// let key = Key::new(7);
    /// let same = lf::random::uniform_key(&key, &[4], DType::F64);
    /// assert_eq!(same.to_vec::<f64>()?, lf::random::uniform(&[4], DType::F64, 7).to_vec::<f64>()?);
    /// let [a, b]: [Key; 2] = key.split(2).try_into().unwrap();
    /// let x = lf::random::normal_key(&a, &[1000], DType::F32);
    /// let y = lf::random::normal_key(&b, &[1000], DType::F32);
    /// assert_ne!(x.to_vec::<f32>()?, y.to_vec::<f32>()?);
    /// # Ok(())
    /// # }
    /// ```
    #[derive(Clone, Debug)]
    pub struct Key {
        arr: Array,
    }

    impl Key {
        /// The key of `seed`, on the default device: [`uniform_key`] with it draws the
        /// numbers of [`uniform`] with `seed`.
        #[track_caller]
        pub fn new(seed: u64) -> Key {
            Key::new_on(seed, &crate::default_device())
        }
        /// [`Key::new`] on `dev`.
        #[track_caller]
        pub fn new_on(seed: u64, dev: &Device) -> Key {
            Key {
                arr: Array::scalar_on(seed as i64, dev),
            }
        }
        /// A key from an array: a 0-d `I64` array (such as [`Key::as_array`] of another
        /// key, or a traced function's input), its value the seed. Errors, naming the
        /// array's dtype and shape, for any other dtype or shape.
        pub fn from_array(a: &Array) -> Result<Key> {
            if a.dtype() != DType::I64 {
                return Err(Error::DType {
                    op: "random::Key::from_array",
                    expected: a.dtype(),
                    got: DType::I64,
                });
            }
            if !a.shape().is_empty() {
                return Err(Error::Shape {
                    op: "random::Key::from_array",
                    msg: format!(
                        "a key is a 0-d I64 array, got an I64 array of shape {:?}",
                        a.shape()
                    ),
                });
            }
            Ok(Key { arr: a.clone() })
        }
        /// The key's array: 0-d, `I64` (lazy until evaluated, like any array).
        pub fn as_array(&self) -> &Array {
            &self.arr
        }
        /// The key as its array.
        pub fn into_array(self) -> Array {
            self.arr
        }
        /// `n` new keys derived from this one (lazy; see [`Key`] for the mapping). Keys of
        /// one split differ from each other and from `self`; use one for the next step and
        /// the others for draws.
        #[track_caller]
        pub fn split(&self, n: usize) -> Vec<Key> {
            let base = &self.arr * SPLIT_MUL as i64;
            (0..n as u64)
                .map(|i| Key {
                    arr: &base + (i.wrapping_add(1).wrapping_mul(SPLIT_ADD)) as i64,
                })
                .collect()
        }
        /// A new key derived from this one and `data` (a step number, a particle index;
        /// lazy; see [`Key`] for the mapping): different `data` give different keys.
        #[track_caller]
        pub fn fold_in(&self, data: u64) -> Key {
            Key {
                arr: &self.arr * FOLD_MUL as i64
                    + (data.wrapping_add(1).wrapping_mul(FOLD_ADD)) as i64,
            }
        }
    }

    #[track_caller]
    fn keyed(op: &str, key: &Key, shape: &[usize], dtype: DType, kind: RandomKind) -> Array {
        check(op, shape, dtype);
        let seed = key.arr.broadcast_to(shape);
        make(
            Op::RandomKeyed(kind),
            dtype,
            Shape::from_slice(shape),
            &key.arr.device(),
            &[&seed],
        )
    }

    /// Uniform numbers in `[0, 1)` drawn with `key`, on the key's device: the numbers of
    /// [`uniform`] with the key's seed (Philox4x32-10, counter = element index), computed
    /// in the consuming kernel with the seed read from the key's array.
    ///
    /// # Panics
    /// When `dtype` is not F32 or F64.
    #[track_caller]
    pub fn uniform_key(key: &Key, shape: &[usize], dtype: DType) -> Array {
        keyed("uniform_key", key, shape, dtype, RandomKind::Uniform)
    }
    /// Standard normal numbers drawn with `key` (the numbers of [`normal`] with the key's
    /// seed; see [`uniform_key`]).
    ///
    /// # Panics
    /// When `dtype` is not F32 or F64.
    #[track_caller]
    pub fn normal_key(key: &Key, shape: &[usize], dtype: DType) -> Array {
        keyed("normal_key", key, shape, dtype, RandomKind::Normal)
    }
}

#[allow(unused_imports)]
use Scalar as _;
