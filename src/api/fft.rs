//! `lf::fft`: numpy.fft on lazy arrays. Transforms are library steps (cuFFT / rustfft);
//! normalization scales and the shifts around them are elementwise ops and views that fuse
//! into the neighbouring kernels.

use super::make;
use crate::graph::{FftKind, FftSpec, Op, Shape};
use crate::shape::norm_axis;
use crate::{Array, DType, Device};
use lazyfuse_codegen::{BinaryOp, Scalar, UnaryOp};
use smallvec::SmallVec;

/// Normalization mode (NumPy's `norm=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Norm {
    /// Forward unscaled, inverse scaled by `1/n` (NumPy's default).
    #[default]
    Backward,
    /// Both scaled by `1/sqrt(n)`.
    Ortho,
    /// Forward scaled by `1/n`, inverse unscaled.
    Forward,
}

impl Norm {
    fn scale(self, n: usize, inverse: bool) -> f64 {
        match (self, inverse) {
            (Norm::Backward, false) | (Norm::Forward, true) => 1.0,
            (Norm::Ortho, _) => 1.0 / (n as f64).sqrt(),
            _ => 1.0 / n as f64,
        }
    }
}

/// The normalized axes (an axis may be repeated: it is then transformed once per mention).
#[track_caller]
fn axes_of(op: &str, a: &Array, axes: &[isize]) -> SmallVec<[usize; 4]> {
    let mut out: SmallVec<[usize; 4]> = SmallVec::new();
    for &ax in axes {
        // `let else`, not `unwrap_or_else(|| panic!(..))`: a closure reports its own line
        let Some(k) = norm_axis(ax, a.ndim(), false) else {
            panic!("{op}: axis {ax} out of range for shape {:?}", a.shape())
        };
        out.push(k);
    }
    if out.is_empty() {
        panic!("{op}: no axes given");
    }
    out
}

/// Applies `scale` where it fuses: into the kernel materializing a lazy input, else
/// onto the (lazy) output.
#[track_caller]
fn transform(x: Array, spec: FftSpec, out_dtype: DType, out_shape: Shape, scale: f64) -> Array {
    let scale_input = scale != 1.0 && !x.is_evaluated();
    let x = if scale_input { x * scale } else { x };
    let dev: Device = x.device();
    let y = make(Op::Fft(Box::new(spec)), out_dtype, out_shape, &dev, &[&x]);
    if scale != 1.0 && !scale_input {
        y * scale
    } else {
        y
    }
}

#[track_caller]
fn c2c(op: &str, a: &Array, axes: &[isize], inverse: bool, norm: Norm) -> Array {
    let axes = axes_of(op, a, axes);
    if axes.iter().any(|&k| a.shape()[k] == 0) {
        panic!(
            "{op}: invalid number of FFT data points (0) in shape {:?}",
            a.shape()
        );
    }
    if repeated(&axes) {
        // NumPy transforms along a repeated axis once per mention: one 1-D transform per
        // axis, in order, each normalized by its own length
        let mut y = a.clone();
        for &k in &axes {
            y = c2c(op, &y, &[k as isize], inverse, norm);
        }
        return y;
    }
    let n: usize = axes.iter().map(|&k| a.shape()[k]).product();
    let dt = match a.dtype() {
        DType::F16 | DType::BF16 | DType::F32 | DType::C64 => DType::C64,
        _ => DType::C128,
    };
    if let Some(y) = real_input(a, dt, &axes, inverse, norm.scale(n, inverse)) {
        return y;
    }
    // a zero padding along the last axis, when it and the one before are transformed
    let nd = a.ndim();
    let support = (nd >= 2 && axes.contains(&(nd - 1)) && axes.contains(&(nd - 2)))
        .then(|| crate::graph::support::nonzero_ranges(&a.node, nd - 1))
        .flatten()
        .map(|r| r.into_vec().into_boxed_slice());
    let x = a.astype(dt);
    let spec = FftSpec {
        axes,
        inverse,
        kind: FftKind::C2C,
        hermitian: false,
        support,
    };
    transform(
        x,
        spec,
        dt,
        Shape::from_slice(&a.node.shape),
        norm.scale(n, inverse),
    )
}

/// FFT along `axis`.
#[track_caller]
pub fn fft(a: &Array, axis: isize) -> Array {
    c2c("fft", a, &[axis], false, Norm::Backward)
}
/// Inverse FFT along `axis` (scaled by `1/n`).
#[track_caller]
pub fn ifft(a: &Array, axis: isize) -> Array {
    c2c("ifft", a, &[axis], true, Norm::Backward)
}
/// 2-D FFT over the last two axes.
#[track_caller]
pub fn fft2(a: &Array) -> Array {
    c2c("fft2", a, &[-2, -1], false, Norm::Backward)
}
/// 2-D inverse FFT over the last two axes.
#[track_caller]
pub fn ifft2(a: &Array) -> Array {
    c2c("ifft2", a, &[-2, -1], true, Norm::Backward)
}
/// N-D FFT over `axes`. An axis named twice is transformed twice, as in NumPy.
#[track_caller]
pub fn fftn(a: &Array, axes: &[isize]) -> Array {
    c2c("fftn", a, axes, false, Norm::Backward)
}
/// N-D inverse FFT over `axes`.
#[track_caller]
pub fn ifftn(a: &Array, axes: &[isize]) -> Array {
    c2c("ifftn", a, axes, true, Norm::Backward)
}
/// [`fftn`] with a normalization mode.
#[track_caller]
pub fn fftn_norm(a: &Array, axes: &[isize], norm: Norm) -> Array {
    c2c("fftn", a, axes, false, norm)
}
/// [`ifftn`] with a normalization mode.
#[track_caller]
pub fn ifftn_norm(a: &Array, axes: &[isize], norm: Norm) -> Array {
    c2c("ifftn", a, axes, true, norm)
}

/// Whether `axes` are the last `axes.len()` axes of an `ndim`-array, in order (the rewrites
/// are limited to them: cuFFT's R2C plans for a strided real axis are refused at execution
/// on the H200, `CUFFT_INVALID_VALUE`, and `fft`, `fft2` and `fftn` over all axes are the
/// transforms of real data that pipelines use).
fn trailing(axes: &[usize], ndim: usize) -> bool {
    let k = axes.len();
    k <= ndim && axes.iter().enumerate().all(|(i, &a)| a == ndim - k + i)
}

/// The real data a complex transform of `a` reads: `a` itself when real, or the real array a
/// lazy cast to complex reads.
fn real_data(a: &Array) -> Option<Array> {
    if !a.dtype().is_complex() {
        return Some(a.clone());
    }
    if !matches!(a.node.op, Op::Cast) || a.is_evaluated() {
        return None;
    }
    let inputs = a.node.inputs();
    let src = inputs.first()?;
    (!src.dtype.is_complex()).then(|| Array::from_node(src.clone()))
}

/// `x[-k]` over `axes`: every index `k` along them replaced by `(n - k) mod n` (a view).
fn mirrored(x: &Array, axes: &[usize]) -> Array {
    let mut m = x.clone();
    for &a in axes {
        if x.shape()[a] > 1 {
            m = m.flip(a as isize).roll(1, a as isize);
        }
    }
    m
}

/// The real-input rewrite of a complex transform over distinct `axes` with the last of
/// length >= 2: `fftn(x) = E(rfftn(x))` and `ifftn(x) = E(conj(rfftn(x))) * scale`, where
/// `E` extends the half spectrum `h` (last axis `n / 2 + 1` long) to all `n` frequencies
/// with `X[k] = conj(h[-k])` (Hermitian symmetry of the transform of real data), as views
/// that fuse into consumers.
fn real_input(a: &Array, dt: DType, axes: &[usize], inverse: bool, scale: f64) -> Option<Array> {
    if !trailing(axes, a.ndim()) {
        return None;
    }
    let &last = axes.last()?;
    let n_last = a.shape()[last];
    if n_last < 2 || !crate::config::real_fft_enabled_for(&a.device(), a.size()) {
        return None;
    }
    let x = real_data(a)?.astype(dt.real());
    let half = n_last / 2 + 1;
    let mut shape = Shape::from_slice(&a.node.shape);
    shape[last] = half;
    let spec = FftSpec {
        axes: SmallVec::from_slice(axes),
        inverse: false,
        kind: FftKind::R2C,
        hermitian: false,
        support: None,
    };
    let mut h = transform(x, spec, dt, shape, scale);
    if inverse {
        h = h.conj();
    }
    let tail = n_last - half;
    if tail == 0 {
        return Some(h);
    }
    let t = extension_tail(&h, axes, tail);
    Some(crate::concatenate(&[&h, &t], last as isize))
}

/// The frequencies `half .. n_last - 1` of the Hermitian extension of half spectrum `h`
/// over `axes` (the last one the halved axis): `conj(h[-k])`, along the last axis `h[tail]`,
/// ..., `h[1]` (views).
fn extension_tail(h: &Array, axes: &[usize], tail: usize) -> Array {
    let last = axes[axes.len() - 1];
    let t = h.slice_axis(last, 1, 1 + tail).flip(last as isize);
    mirrored(&t, &axes[..axes.len() - 1]).conj()
}

/// Whether the chains of one-input nodes from `a` and from `b` down to `base` have the
/// same ops, dtypes and shapes (an iterative walk; false past `limit` nodes).
fn same_chain(a: &Array, b: &Array, base: &Array, limit: usize) -> bool {
    let (mut a, mut b) = (a.node.clone(), b.node.clone());
    for _ in 0..limit {
        if a.id == base.node.id || b.id == base.node.id {
            return a.id == b.id;
        }
        if a.op != b.op || a.dtype != b.dtype || a.shape != b.shape {
            return false;
        }
        let (ia, ib) = (a.inputs(), b.inputs());
        let (Some(na), Some(nb), 1, 1) = (ia.first(), ib.first(), ia.len(), ib.len()) else {
            return false;
        };
        (a, b) = (na.clone(), nb.clone());
    }
    false
}

/// Whether a constant is real (a complex one with a zero imaginary part included).
fn const_is_real(c: &Scalar) -> bool {
    match c {
        Scalar::C64(z) => z.im == 0.0,
        Scalar::C128(z) => z.im == 0.0,
        _ => true,
    }
}

/// Whether `h` is a half spectrum of real data: an R2C transform's result, possibly
/// conjugated or scaled by a real constant (what `real_input` and `transform` build).
fn is_real_spectrum(h: &Array) -> bool {
    let mut n = h.node.clone();
    for _ in 0..4 {
        match &n.op {
            Op::Fft(spec) => return spec.kind == FftKind::R2C,
            Op::Unary(UnaryOp::Conj) => {}
            Op::Binary(BinaryOp::Mul) => {
                let ins = n.inputs();
                let real_const = |x: &std::sync::Arc<crate::graph::Node>| {
                    let mut x = x.clone();
                    while matches!(x.op, Op::Broadcast) {
                        let Some(i) = x.inputs().first().cloned() else {
                            return false;
                        };
                        x = i;
                    }
                    matches!(&x.op, Op::Const(c) if const_is_real(c))
                };
                let next = match (ins.first(), ins.get(1)) {
                    (Some(a), Some(b)) if real_const(b) => a.clone(),
                    (Some(a), Some(b)) if real_const(a) => b.clone(),
                    _ => return false,
                };
                n = next;
                continue;
            }
            _ => return false,
        }
        let Some(next) = n.inputs().first().cloned() else {
            return false;
        };
        n = next;
    }
    false
}

/// `h` when `x` is the Hermitian extension over `axes` that `real_input` builds from the
/// half spectrum of real data `h` (so `conj(x[-k]) = x[k]`).
fn extension_of(x: &Array, axes: &[usize]) -> Option<Array> {
    let &last = axes.last()?;
    if x.node.op != Op::Concat(last) || x.is_evaluated() {
        return None;
    }
    let ins = x.node.inputs();
    let (Some(h), Some(t), 2) = (ins.first(), ins.get(1), ins.len()) else {
        return None;
    };
    let (h, t) = (Array::from_node(h.clone()), Array::from_node(t.clone()));
    if !is_real_spectrum(&h) || h.shape()[last] != x.shape()[last] / 2 + 1 {
        return None;
    }
    let want = extension_tail(&h, axes, t.shape()[last]);
    same_chain(&t, &want, &h, 4 * axes.len() + 4).then_some(h)
}

/// `(h, c)` with `x = E * c` (`c` the product of the other factors; `None` for 1), when `x`
/// is a product whose factors include the Hermitian extension `E` of half spectrum `h`.
fn hermitian_factor(x: &Array, axes: &[usize]) -> Option<(Array, Option<Array>)> {
    let mut factors: Vec<Array> = Vec::new();
    let mut cur = x.clone();
    for _ in 0..16 {
        if let Some(h) = extension_of(&cur, axes) {
            let c = factors.into_iter().reduce(|p, f| p * f);
            return Some((h, c));
        }
        if cur.node.op != Op::Binary(BinaryOp::Mul) || cur.is_evaluated() {
            return None;
        }
        let ins = cur.node.inputs();
        let (a, b) = (
            Array::from_node(ins.first()?.clone()),
            Array::from_node(ins.get(1)?.clone()),
        );
        let product = |y: &Array| {
            extension_of(y, axes).is_some()
                || (y.node.op == Op::Binary(BinaryOp::Mul) && !y.is_evaluated())
        };
        if product(&a) {
            factors.push(b);
            cur = a;
        } else if product(&b) {
            factors.push(a);
            cur = b;
        } else {
            return None;
        }
    }
    None
}

/// `(r, s)` with `c = r * s` (`r` real, of `c`'s precision, `None` for 1; `s` a real
/// number) when the complex array `c` is a product (at most `depth` levels) of lazy casts
/// of real arrays and constants with a zero imaginary part.
fn real_valued(c: &Array, depth: usize) -> Option<(Option<Array>, f64)> {
    let dt = c.dtype();
    if !dt.is_complex() {
        return Some((Some(c.clone()), 1.0));
    }
    if depth == 0 || c.is_evaluated() {
        return None;
    }
    let ins = c.node.inputs();
    match c.node.op {
        Op::Const(s) => match s {
            Scalar::C64(z) if z.im == 0.0 => Some((None, z.re as f64)),
            Scalar::C128(z) if z.im == 0.0 => Some((None, z.re)),
            _ => None,
        },
        Op::Cast => {
            let src = ins.first()?;
            let r = Array::from_node(src.clone()).astype(dt.real());
            (!src.dtype.is_complex()).then_some((Some(r), 1.0))
        }
        Op::Binary(BinaryOp::Mul) => {
            let (a, x) = real_valued(&Array::from_node(ins.first()?.clone()), depth - 1)?;
            let (b, y) = real_valued(&Array::from_node(ins.get(1)?.clone()), depth - 1)?;
            let r = match (a, b) {
                (Some(a), Some(b)) => Some(&a * &b),
                (a, b) => a.or(b),
            };
            Some((r, x * y))
        }
        _ => None,
    }
}

/// The rewrite of `real(y)` for `y` an unevaluated inverse complex transform:
/// `real(ifftn(Y)) = irfftn(H)` with `H` the half spectrum of `Y`'s Hermitian part,
/// `(Y[k] + conj(Y[-k])) / 2`, computed in the kernel that produces the transform's input.
/// When the complex `y` is used as well, it stays a transform of its own (the two results
/// are then two transforms, 1.5 times the complex one's work); callers that read `y`
/// anyway take `Array::real_part` instead (the gradient of `complex(re, im)`).
pub(crate) fn real_of_inverse(y: &Array) -> Option<Array> {
    let Op::Fft(spec) = &y.node.op else {
        return None;
    };
    if spec.kind != FftKind::C2C
        || !spec.inverse
        || y.is_evaluated()
        || !crate::config::real_fft_enabled_for(&y.device(), y.size())
    {
        return None;
    }
    if !trailing(&spec.axes, y.ndim()) {
        return None;
    }
    let &last = spec.axes.last()?;
    let n_last = y.shape()[last];
    if n_last < 2 {
        return None;
    }
    let inputs = y.node.inputs();
    let x = Array::from_node(inputs.first()?.clone());
    let half = n_last / 2 + 1;
    let herm = match hermitian_factor(&x, &spec.axes) {
        // x = E c with E exactly Hermitian (the extension of a real transform's half
        // spectrum h): its Hermitian part is E (c + conj(c[-k])) / 2, which on the half
        // spectrum reads h directly and mirrors only c
        Some((h, c)) if h.dtype() == x.dtype() => match c {
            None => h,
            Some(c) => {
                // a real-valued factor (a real array cast to complex, times real scalars,
                // as the filter and the normalization of a spectral step) is its own
                // conjugate: its Hermitian part is computed in real arithmetic, with the
                // scalars applied once
                match real_valued(&c, 16) {
                    Some((Some(r), s)) => {
                        let hr = symmetrized_half(&r, &spec.axes, half);
                        &h * &(hr * (0.5 * s))
                    }
                    Some((None, s)) => &h * s,
                    None => {
                        let hc = (&c + &mirrored(&c, &spec.axes).conj()) * 0.5;
                        &h * &hc.slice_axis(last, 0, half)
                    }
                }
            }
        },
        _ => {
            let herm = (&x + &mirrored(&x, &spec.axes).conj()) * 0.5;
            herm.slice_axis(last, 0, half)
        }
    };
    let c2r = FftSpec {
        axes: spec.axes.clone(),
        inverse: true,
        kind: FftKind::C2R,
        hermitian: true,
        support: None,
    };
    let dev = y.device();
    Some(make(
        Op::Fft(Box::new(c2r)),
        y.dtype().real(),
        Shape::from_slice(&y.node.shape),
        &dev,
        &[&herm],
    ))
}

/// One kept symmetrized half spectrum ([`symmetrized_half`]): for the filter `filter` (its
/// `Weak` keeps the node's allocation, so the address names that node alone), axes and
/// half length.
struct Kept {
    filter: std::sync::Weak<crate::graph::Node>,
    axes: SmallVec<[usize; 4]>,
    half: usize,
    value: Array,
}

/// The symmetrized half spectra of evaluated real filters kept on one device (a field of
/// the device, the CPU's included: at most 8 each).
#[derive(Default)]
pub(crate) struct KeptSpectra(std::sync::Mutex<Vec<Kept>>);

/// `(r + r[-k]).slice(0..half)` along the last of `axes` (mirrored over all of them): the
/// doubled Hermitian part of the real factor `r` on the half spectrum. When `r` is
/// evaluated (a captured filter, as in a simulation loop that rebuilds its step every
/// time), the result depends on nothing that changes, so it is evaluated once and kept
/// while `r` lives (at most 8 per device; an entry whose filter died goes at the next
/// lookup): every later step reads it instead of gathering `r` at mirrored indices again.
/// An evaluation error leaves it lazy.
fn symmetrized_half(r: &Array, axes: &[usize], half: usize) -> Array {
    use std::sync::Arc;
    const MAX_KEPT: usize = 8;
    let last = axes[axes.len() - 1];
    let build = || (r + &mirrored(r, axes)).slice_axis(last, 0, half);
    if !r.is_evaluated() {
        return build();
    }
    let dev = r.device();
    let kept_on: &KeptSpectra = match &dev {
        crate::Device::Cpu => crate::runtime::cpu::CPU.attached.get(),
        crate::Device::Cuda(d) => d.attached().get(),
    };
    let same = |k: &Kept| {
        std::ptr::eq(k.filter.as_ptr(), Arc::as_ptr(&r.node))
            && k.axes.as_slice() == axes
            && k.half == half
    };
    {
        let mut kept = kept_on.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| k.filter.strong_count() > 0);
        if let Some(k) = kept.iter().find(|k| same(k)) {
            return k.value.clone();
        }
    }
    let value = build();
    if value.eval().is_err() {
        return value;
    }
    let mut kept = kept_on.0.lock().unwrap_or_else(|e| e.into_inner());
    kept.retain(|k| k.filter.strong_count() > 0);
    if !kept.iter().any(same) {
        if kept.len() >= MAX_KEPT {
            drop(kept.remove(0));
        }
        kept.push(Kept {
            filter: Arc::downgrade(&r.node),
            axes: SmallVec::from_slice(axes),
            half,
            value: value.clone(),
        });
    }
    value
}

/// Whether an axis is named more than once.
fn repeated(axes: &[usize]) -> bool {
    (1..axes.len()).any(|i| axes[..i].contains(&axes[i]))
}

#[track_caller]
fn r2c(op: &str, a: &Array, axes: &[isize], norm: Norm) -> Array {
    let axes = axes_of(op, a, axes);
    if axes.iter().any(|&k| a.shape()[k] == 0) {
        panic!(
            "{op}: invalid number of FFT data points (0) in shape {:?}",
            a.shape()
        );
    }
    if repeated(&axes) {
        // As `numpy.fft.rfftn`: the real transform along the last axis named, then a
        // complex one per other mention, last to first, each at the input's length along
        // its axis (the half spectrum is zero-padded back to it), each normalized by its
        // own length.
        let (&last, rest) = axes.split_last().expect("axes checked non-empty");
        let mut y = r2c(op, a, &[last as isize], norm);
        for &k in rest.iter().rev() {
            let (n, m) = (a.shape()[k], y.shape()[k]);
            if m < n {
                let mut w = vec![(0, 0); y.ndim()];
                w[k] = (0, n - m);
                y = y.pad(&w, 0.0);
            }
            y = c2c(op, &y, &[k as isize], false, norm);
        }
        return y;
    }
    let n: usize = axes.iter().map(|&k| a.shape()[k]).product();
    let rt = match a.dtype() {
        DType::F16 | DType::BF16 | DType::F32 | DType::C64 => DType::F32,
        _ => DType::F64,
    };
    let x = a.real().astype(rt);
    let last = *axes.last().expect("axes checked non-empty");
    let mut shape = Shape::from_slice(&a.node.shape);
    shape[last] = shape[last] / 2 + 1;
    let spec = FftSpec {
        axes,
        inverse: false,
        kind: FftKind::R2C,
        hermitian: false,
        support: None,
    };
    transform(x, spec, rt.to_complex(), shape, norm.scale(n, false))
}

#[track_caller]
fn c2r(op: &str, a: &Array, n: Option<usize>, axes: &[isize], norm: Norm) -> Array {
    let axes = axes_of(op, a, axes);
    let last = *axes.last().expect("axes checked non-empty");
    let m = n.unwrap_or(2 * a.shape()[last].saturating_sub(1));
    if m == 0 || axes.iter().any(|&k| a.shape()[k] == 0) {
        panic!(
            "{op}: invalid number of FFT data points (0) for shape {:?}",
            a.shape()
        );
    }
    if repeated(&axes) {
        // As `numpy.fft.irfftn`: a complex inverse transform per mention but the last, in
        // order, each at the input's length along its axis, then the real one along the
        // last axis named; each normalized by its own length.
        let (_, rest) = axes.split_last().expect("axes checked non-empty");
        let mut y = a.clone();
        for &k in rest {
            y = c2c(op, &y, &[k as isize], true, norm);
        }
        return c2r(op, &y, Some(m), &[last as isize], norm);
    }
    let ct = match a.dtype() {
        DType::F16 | DType::BF16 | DType::F32 | DType::C64 => DType::C64,
        _ => DType::C128,
    };
    let mut shape = Shape::from_slice(&a.node.shape);
    shape[last] = m;
    let total: usize = axes.iter().map(|&k| shape[k]).product();
    let x = a.astype(ct);
    let spec = FftSpec {
        axes,
        inverse: true,
        kind: FftKind::C2R,
        hermitian: false,
        support: None,
    };
    transform(x, spec, ct.real(), shape, norm.scale(total, true))
}

/// FFT of real input along `axis`: the `n/2 + 1` non-negative frequencies.
#[track_caller]
pub fn rfft(a: &Array, axis: isize) -> Array {
    r2c("rfft", a, &[axis], Norm::Backward)
}
/// Inverse of [`rfft`]: a real array of length `n` (default `2 (m - 1)`) along `axis`.
#[track_caller]
pub fn irfft(a: &Array, n: Option<usize>, axis: isize) -> Array {
    c2r("irfft", a, n, &[axis], Norm::Backward)
}
/// 2-D FFT of real input over the last two axes.
#[track_caller]
pub fn rfft2(a: &Array) -> Array {
    r2c("rfft2", a, &[-2, -1], Norm::Backward)
}
/// Inverse of [`rfft2`] (last axis of length `2 (m - 1)`).
#[track_caller]
pub fn irfft2(a: &Array) -> Array {
    c2r("irfft2", a, None, &[-2, -1], Norm::Backward)
}
/// N-D FFT of real input over `axes`. An axis named twice is transformed twice, as in
/// NumPy: the real transform along the last axis named, then a complex transform for
/// each other mention at the input's length along that axis (zero-padding a half
/// spectrum back to it).
#[track_caller]
pub fn rfftn(a: &Array, axes: &[isize]) -> Array {
    r2c("rfftn", a, axes, Norm::Backward)
}
/// Inverse of [`rfftn`], the last axis of length `n` (default `2 (m - 1)`). An axis named
/// twice is transformed twice, as in NumPy: a complex inverse transform for each mention
/// but the last, then the real one along the last axis named.
#[track_caller]
pub fn irfftn(a: &Array, n: Option<usize>, axes: &[isize]) -> Array {
    c2r("irfftn", a, n, axes, Norm::Backward)
}

#[track_caller]
fn shift(a: &Array, axes: Option<&[isize]>, inverse: bool) -> Array {
    let op = if inverse { "ifftshift" } else { "fftshift" };
    let all: Vec<isize> = (0..a.ndim() as isize).collect();
    let axes = axes.unwrap_or(&all);
    let mut y = a.clone();
    for &ax in axes {
        let Some(k) = norm_axis(ax, a.ndim(), false) else {
            panic!("{op}: axis {ax} out of range for shape {:?}", a.shape())
        };
        let n = a.shape()[k] as isize;
        let s = if inverse { -(n / 2) } else { n / 2 };
        y = y.roll(s, k as isize);
    }
    y
}

/// Moves the zero frequency to the centre (a view: fuses into its consumer).
#[track_caller]
pub fn fftshift(a: &Array, axes: Option<&[isize]>) -> Array {
    shift(a, axes, false)
}
/// Inverse of [`fftshift`].
#[track_caller]
pub fn ifftshift(a: &Array, axes: Option<&[isize]>) -> Array {
    shift(a, axes, true)
}

/// Panics, as NumPy raises `ZeroDivisionError`, when `n` or `d` is 0 (`1 / (n d)`).
#[track_caller]
fn check_freq(op: &str, n: usize, d: f64) {
    if n == 0 || d == 0.0 {
        panic!("{op}: division by zero: n = {n}, d = {d} (the spacing is 1 / (n d))");
    }
}

/// Sample frequencies of an `n`-point FFT with sample spacing `d`.
///
/// # Panics
/// When `n` or `d` is 0 (NumPy raises `ZeroDivisionError`).
#[track_caller]
pub fn fftfreq(n: usize, d: f64, dtype: DType) -> Array {
    check_freq("fftfreq", n, d);
    let i = Array::iota_on(n, &crate::default_device());
    let half = n.div_ceil(2) as i64;
    let k = crate::where_(&i.lt(half), &i, &i - n as i64);
    (k.astype(DType::F64) * (1.0 / (d * n as f64))).astype(dtype)
}

/// Sample frequencies of an `n`-point [`rfft`] with sample spacing `d`.
///
/// # Panics
/// When `n` or `d` is 0 (NumPy raises `ZeroDivisionError`).
#[track_caller]
pub fn rfftfreq(n: usize, d: f64, dtype: DType) -> Array {
    check_freq("rfftfreq", n, d);
    let i = Array::iota_on(n / 2 + 1, &crate::default_device());
    (i.astype(DType::F64) * (1.0 / (d * n as f64))).astype(dtype)
}
