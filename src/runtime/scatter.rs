//! Scatter-add steps (`Op::ScatterAdd`, the cotangent of a gather with many indices): the
//! checks of the operands and the dispatch to a loop over the host buffers (CPU) or the
//! atomic kernel (`lazyfuse_codegen::cuda::scatter`) on CUDA.

use super::Buffer;
use crate::{Device, Error, Result};
use lazyfuse_codegen::{DType, HostBuf};
use num_complex::Complex;

/// The sizes of one scatter-add: `values` and `indices` are `[pre, k, post]`, the output
/// `[pre, n, post]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dims {
    pub(crate) pre: usize,
    pub(crate) k: usize,
    pub(crate) post: usize,
    pub(crate) n: usize,
}

impl Dims {
    /// Values (and indices).
    pub(crate) fn values(&self) -> usize {
        self.pre * self.k * self.post
    }
    /// Output elements.
    pub(crate) fn out(&self) -> usize {
        self.pre * self.n * self.post
    }
}

/// The scatter-add of `values` (shape `from`) at `indices` into zeros of shape `to`, on
/// `dev`.
pub(crate) fn run(
    dev: &Device,
    from: &[usize],
    to: &[usize],
    values: &Buffer,
    indices: &Buffer,
) -> Result<Buffer> {
    let ([pre, k, post], [pre2, n, post2]) = (from, to) else {
        return Err(Error::internal(
            "scatter_add",
            format!("shapes {from:?} -> {to:?} are not 3-D"),
        ));
    };
    let d = Dims {
        pre: *pre,
        k: *k,
        post: *post,
        n: *n,
    };
    if (pre, post) != (pre2, post2)
        || values.len() != d.values()
        || indices.len() != d.values()
        || indices.dtype() != DType::I64
    {
        return Err(Error::internal(
            "scatter_add",
            format!(
                "{} values and {} {} indices for {from:?} -> {to:?}",
                values.len(),
                indices.len(),
                indices.dtype()
            ),
        ));
    }
    match (dev, values, indices) {
        (Device::Cpu, Buffer::Host(v), Buffer::Host(HostBuf::I64(ix))) => {
            Ok(Buffer::host(host(d, v, ix)?))
        }
        #[cfg(feature = "cuda")]
        (Device::Cuda(c), Buffer::Cuda(v), Buffer::Cuda(ix)) => {
            Ok(Buffer::Cuda(c.scatter_add(d, v, ix)?))
        }
        #[cfg(not(feature = "cuda"))]
        (Device::Cuda(_), _, _) => Err(Error::NoCuda(
            "lazyfuse was built without the `cuda` feature".into(),
        )),
        _ => Err(Error::internal("scatter_add", "buffer on another device")),
    }
}

/// The CPU scatter-add: in order of the values (deterministic).
fn host(d: Dims, v: &HostBuf, ix: &[i64]) -> Result<HostBuf> {
    Ok(match v {
        HostBuf::F32(x) => HostBuf::F32(typed(d, x, ix, 0.0)?),
        HostBuf::F64(x) => HostBuf::F64(typed(d, x, ix, 0.0)?),
        HostBuf::C64(x) => HostBuf::C64(typed(d, x, ix, Complex::new(0.0, 0.0))?),
        HostBuf::C128(x) => HostBuf::C128(typed(d, x, ix, Complex::new(0.0, 0.0))?),
        other => {
            return Err(Error::internal(
                "scatter_add",
                format!("values of dtype {}", other.dtype()),
            ))
        }
    })
}

fn typed<T: Copy + std::ops::AddAssign>(d: Dims, v: &[T], ix: &[i64], zero: T) -> Result<Vec<T>> {
    let len = d.out();
    let mut out: Vec<T> =
        lazyfuse_codegen::try_with_capacity(len).map_err(|e| Error::OutOfMemory {
            op: "scatter_add",
            bytes: e.bytes,
            what: format!("{len} elements of a scatter-add"),
        })?;
    out.resize(len, zero);
    let n = d.n as i64;
    for (t, (&val, &j)) in v.iter().zip(ix).enumerate() {
        let j = if j < 0 { j + n } else { j };
        if !(0..n).contains(&j) {
            continue;
        }
        let (q, p) = (t % d.post, t / d.post / d.k);
        out[(p * d.n + j as usize) * d.post + q] += val;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_scatter_accumulates_repeats_and_skips_out_of_range() {
        // pre 2, k 3, post 1, n 4: row p adds its three values at its indices
        let d = Dims {
            pre: 2,
            k: 3,
            post: 1,
            n: 4,
        };
        let v = HostBuf::F64(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
        let ix = [1, 1, -1, 0, 9, 3];
        let HostBuf::F64(out) = host(d, &v, &ix).unwrap() else {
            panic!("dtype")
        };
        assert_eq!(out, vec![0.0, 3.0, 0.0, 4.0, 8.0, 0.0, 0.0, 32.0]);
        // post 2: columns stay apart
        let d = Dims {
            pre: 1,
            k: 2,
            post: 2,
            n: 3,
        };
        let v = HostBuf::F32(vec![1.0, 2.0, 4.0, 8.0]);
        let HostBuf::F32(out) = host(d, &v, &[2, 0, 2, 2]).unwrap() else {
            panic!("dtype")
        };
        assert_eq!(out, vec![0.0, 2.0, 0.0, 0.0, 5.0, 8.0]);
    }
}
