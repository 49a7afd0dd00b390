//! Batched matrix products as the runtime sees them: the layout a matmul step reads its
//! operands with (`GemmSpec`), its batch loop, and the dispatch to ndarray (CPU) or cuBLAS.
//!
//! Conventions: the output is a C-order `[batch.., m, n]` buffer; `A` is `m x k`, `B` is
//! `k x n`. An operand matrix is stored either row-major (element `(i, j)` of an `r x c`
//! matrix at `i * c + j`) or, when `trans` is set, column-major (at `j * r + i`, i.e. the
//! buffer of its transpose). Batch offsets are arbitrary element strides per output batch
//! axis, 0 where the operand is broadcast.

use super::Buffer;
use crate::{Device, Error, Result};
use lazyfuse_codegen::DType;
use smallvec::SmallVec;
use std::fmt;

/// How a matmul step reads one operand from its buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GemmOperand {
    /// Element stride of each output batch axis (0 where the operand is broadcast).
    pub(crate) batch_strides: SmallVec<[usize; 4]>,
    /// The matrix is stored column-major (the buffer holds its transpose in C order).
    pub(crate) trans: bool,
}

/// One batched matrix product `C[b] = A[b] @ B[b]` over the output batch axes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GemmSpec {
    /// Element dtype of both operands and the output (F32, F64, C64 or C128).
    pub(crate) dtype: DType,
    /// Output batch axes (C order; may be empty).
    pub(crate) batch: SmallVec<[usize; 4]>,
    /// Rows of `A` and `C`.
    pub(crate) m: usize,
    /// Columns of `B` and `C`.
    pub(crate) n: usize,
    /// Columns of `A`, rows of `B`.
    pub(crate) k: usize,
    /// Layout of `A`.
    pub(crate) a: GemmOperand,
    /// Layout of `B`.
    pub(crate) b: GemmOperand,
}

/// The batch loop of a [`GemmSpec`]: for every entry of `outer` (element offsets of `A`,
/// `B`, `C`), `count` products whose offsets advance by `strides` -- one strided-batched
/// library call each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Batches {
    pub(crate) outer: Vec<[usize; 3]>,
    pub(crate) count: usize,
    pub(crate) strides: [usize; 3],
}

impl Batches {
    /// Element offsets of `A`, `B`, `C` of every product, in order.
    pub(crate) fn offsets(&self) -> impl Iterator<Item = [usize; 3]> + '_ {
        let s = self.strides;
        self.outer.iter().flat_map(move |o| {
            (0..self.count).map(move |i| [o[0] + i * s[0], o[1] + i * s[1], o[2] + i * s[2]])
        })
    }
}

impl GemmSpec {
    /// Elements of the output.
    pub(crate) fn out_len(&self) -> usize {
        self.batch.iter().product::<usize>() * self.m * self.n
    }

    /// Leading dimension of `A` as stored (row-major: `k`; column-major: `m`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn lda(&self) -> usize {
        if self.a.trans {
            self.m
        } else {
            self.k
        }
    }

    /// Leading dimension of `B` as stored (row-major: `n`; column-major: `k`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn ldb(&self) -> usize {
        if self.b.trans {
            self.k
        } else {
            self.n
        }
    }

    /// Elements a buffer must hold for `op` read as an `rows x cols` matrix per batch.
    fn needed(&self, op: &GemmOperand, rows: usize, cols: usize) -> usize {
        if self.out_len() == 0 || rows * cols == 0 {
            return 0;
        }
        let last: usize = self
            .batch
            .iter()
            .zip(&op.batch_strides)
            .map(|(&d, &s)| (d - 1) * s)
            .sum();
        last + rows * cols
    }

    /// Checks the operand buffers against the spec.
    pub(crate) fn check(&self, a: (DType, usize), b: (DType, usize)) -> Result<()> {
        let bad = |msg: String| Err(Error::internal("matmul", msg));
        if !matches!(
            self.dtype,
            DType::F32 | DType::F64 | DType::C64 | DType::C128
        ) {
            return bad(format!("unsupported dtype {}", self.dtype));
        }
        if a.0 != self.dtype || b.0 != self.dtype {
            return bad(format!(
                "operand dtypes {} and {} for a {} product",
                a.0, b.0, self.dtype
            ));
        }
        let nb = self.batch.len();
        if self.a.batch_strides.len() != nb || self.b.batch_strides.len() != nb {
            return bad(format!("batch strides do not match batch {:?}", self.batch));
        }
        let (na, nbb) = (
            self.needed(&self.a, self.m, self.k),
            self.needed(&self.b, self.k, self.n),
        );
        if a.1 < na || b.1 < nbb {
            return bad(format!(
                "buffers of {} and {} elements for {self} (need {na} and {nbb})",
                a.1, b.1
            ));
        }
        Ok(())
    }

    /// The batch loop: batch axes of length 1 dropped, adjacent axes merged where all three
    /// operands step uniformly across them, the innermost merged axis batched.
    pub(crate) fn batches(&self) -> Batches {
        let mn = self.m * self.n;
        let c_strides = crate::shape::strides(&self.batch);
        // (size, stride of A, B, C), innermost first after merging
        let mut axes: Vec<(usize, [usize; 3])> = Vec::new();
        for d in (0..self.batch.len()).rev() {
            let size = self.batch[d];
            if size == 1 {
                continue;
            }
            let s = [
                self.a.batch_strides[d],
                self.b.batch_strides[d],
                c_strides[d] * mn,
            ];
            match axes.last_mut() {
                Some((n, t)) if (0..3).all(|i| s[i] == t[i] * *n) => *n *= size,
                _ => axes.push((size, s)),
            }
        }
        let (count, strides) = if axes.is_empty() {
            (1, [0; 3])
        } else {
            axes.remove(0)
        };
        let mut outer = vec![[0usize; 3]];
        for (size, s) in axes {
            outer = (0..size)
                .flat_map(|i| {
                    outer
                        .iter()
                        .map(move |o| [o[0] + i * s[0], o[1] + i * s[1], o[2] + i * s[2]])
                })
                .collect();
        }
        outer.sort_by_key(|o| o[2]);
        Batches {
            outer,
            count,
            strides,
        }
    }
}

impl fmt::Display for GemmSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |o: &GemmOperand| if o.trans { "^T" } else { "" };
        write!(
            f,
            "{} batch {:?}: [{}x{}]{} (batch strides {:?}) @ [{}x{}]{} (batch strides {:?})",
            self.dtype,
            self.batch.as_slice(),
            self.m,
            self.k,
            t(&self.a),
            self.a.batch_strides.as_slice(),
            self.k,
            self.n,
            t(&self.b),
            self.b.batch_strides.as_slice()
        )
    }
}

/// The product `spec` of the buffers `a` and `b` as a new buffer on `dev`.
pub(crate) fn run(dev: &Device, spec: &GemmSpec, a: &Buffer, b: &Buffer) -> Result<Buffer> {
    spec.check((a.dtype(), a.len()), (b.dtype(), b.len()))?;
    match (dev, a, b) {
        (Device::Cpu, Buffer::Host(x), Buffer::Host(y)) => {
            Ok(Buffer::Host(super::cpu::matmul::run(spec, x, y)?))
        }
        // cuBLAS on the device's stream (`cuda::blas`).
        #[cfg(feature = "cuda")]
        (Device::Cuda(d), Buffer::Cuda(x), Buffer::Cuda(y)) => {
            Ok(Buffer::Cuda(d.matmul(spec, x, y)?))
        }
        #[cfg(not(feature = "cuda"))]
        (Device::Cuda(_), _, _) => Err(Error::NoCuda(
            "lazyfuse was built without the `cuda` feature".into(),
        )),
        _ => Err(Error::internal("matmul", "buffer on another device")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(batch: &[usize], sa: &[usize], sb: &[usize]) -> GemmSpec {
        GemmSpec {
            dtype: DType::F64,
            batch: batch.iter().copied().collect(),
            m: 2,
            n: 3,
            k: 4,
            a: GemmOperand {
                batch_strides: sa.iter().copied().collect(),
                trans: false,
            },
            b: GemmOperand {
                batch_strides: sb.iter().copied().collect(),
                trans: false,
            },
        }
    }

    #[test]
    fn contiguous_batches_merge_into_one_call() {
        let b = spec(&[2, 5], &[40, 8], &[60, 12]).batches();
        assert_eq!(b.outer, vec![[0, 0, 0]]);
        assert_eq!((b.count, b.strides), (10, [8, 12, 6]));
    }

    #[test]
    fn broadcast_batches_loop_outside() {
        // (2,1,m,k) @ (5,k,n): A steps along axis 0 only, B along axis 1 only
        let b = spec(&[2, 5], &[8, 0], &[0, 12]).batches();
        assert_eq!(b.outer, vec![[0, 0, 0], [8, 0, 30]]);
        assert_eq!((b.count, b.strides), (5, [0, 12, 6]));
        assert_eq!(b.offsets().count(), 10);
    }

    #[test]
    fn no_batch_is_one_product() {
        let b = spec(&[], &[], &[]).batches();
        assert_eq!(b.offsets().collect::<Vec<_>>(), vec![[0, 0, 0]]);
        let s: GemmSpec = spec(&[1, 1], &[0, 0], &[0, 0]);
        assert_eq!(s.batches().offsets().count(), 1);
        assert!(s.check((DType::F64, 8), (DType::F64, 12)).is_ok());
        assert!(s.check((DType::F64, 7), (DType::F64, 12)).is_err());
    }
}
