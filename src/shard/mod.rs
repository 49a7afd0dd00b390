//! Sharded arrays: one logical array split along one axis into contiguous blocks over the
//! devices of a [`Mesh`], each block an ordinary lazy [`Array`] on its device.
//!
//! Work that keeps the split axis local ([`Sharded::map`], [`Sharded::zip`], the
//! operators, views along other axes) builds the same graph on every part, so each device
//! gets the same fused kernels for its block. Work that needs data from other blocks goes
//! through the mesh's collective layer (`shard/collective.rs`, internal): reductions over the split axis
//! (local reduce, then all-reduce to a [`Placement::Replicated`] result), re-sharding onto
//! another axis (all-to-all), rolls, pads and ranges along the split axis (each output
//! block assembled from the input blocks it overlaps, a halo exchange), and distributed
//! FFTs (local transforms, all-to-all, local transforms). Everything stays lazy until
//! [`Sharded::eval`] or a readback; [`Sharded::eval`] evaluates all blocks in one plan.
//!
//! ```
//! use lazyfuse as lf;
//! use lf::{DType, Device, Mesh};
//!
//! # fn main() -> lf::Result<()> {
//! let devices: Vec<Device> = match Device::cuda_count() {
//!     0 => vec![Device::cpu(); 2],
//!     n => (0..n).map(Device::cuda).collect::<lf::Result<_>>()?,
//! };
//! let mesh = Mesh::new(&devices)?;
//! let u = lf::random::normal(&[256, 256], DType::F32, 0).shard(&mesh, 0)?;
//! let v = u.map(|p| (p - p * p * p) * 0.1 + p)?; // one fused kernel per device
//! let spectrum = v.fft2()?;                        // split on axis 1 afterwards
//! let energy = spectrum.map(|p| p.abs().square())?.sum()?; // replicated, 0-d
//! assert!(energy.gather()?.item::<f32>()? > 0.0);
//! # Ok(())
//! # }
//! ```

pub(crate) mod collective;
mod fft;
mod layout;
#[cfg(feature = "cuda")]
mod nccl;
mod ops;
mod reduce;

use crate::shape::norm_axis;
use crate::{Array, DType, Device, Error, Result};
use collective::{Collectives, Move, Transfer};
use std::fmt;
use std::sync::Arc;

/// The transport of a mesh's collectives ([`Mesh::with_backend`], [`Mesh::backend`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// NCCL for a mesh of distinct GPUs when NCCL can be loaded, the host-staged
    /// [`Backend::Transfer`] otherwise (what [`Mesh::new`] picks).
    Auto,
    /// The library's own lazy device copies, slices and concatenations: any devices of one
    /// process (CPU meshes, a GPU listed several times, mixed meshes); a copy between two
    /// GPUs is one peer copy, between the host and a GPU it goes through host memory.
    Transfer,
    /// NCCL's collectives on the devices' streams: distinct GPUs, one communicator per
    /// device (or, for [`Mesh::global`], per process). A collective evaluates its inputs
    /// when it is built and queues the NCCL calls then, without waiting on the host.
    Nccl,
}

/// The devices a sharded array is spread over, in block order. A device may appear
/// several times: a mesh `[cpu, cpu, cpu]` has three shards on the host (the stand-in
/// for several GPUs that tests run on), `[cuda:0, cuda:0]` two on one GPU.
///
/// A mesh made by [`Mesh::global`] spans the processes of a job: block `r` lives in rank
/// `r`'s process, on its device. There, [`Mesh::devices`] lists this process's device for
/// every block, the blocks of other ranks in a [`Sharded`] are stand-ins of the right shape
/// that are never evaluated (see [`Mesh::local_block`]), and data between blocks moves
/// through NCCL.
#[derive(Clone)]
pub struct Mesh {
    devices: Arc<[Device]>,
    collectives: Arc<dyn Collectives>,
    backend: Backend,
}

impl Mesh {
    /// A mesh over `devices` (block `i` of a sharded array lives on `devices[i]`); an
    /// error for an empty list. Collectives run through NCCL when the devices are distinct
    /// GPUs and NCCL can be loaded, otherwise through the library's own lazy device copies,
    /// slices and concatenations ([`Backend::Auto`]).
    pub fn new(devices: &[Device]) -> Result<Mesh> {
        Mesh::with_backend(devices, Backend::Auto)
    }

    /// A mesh over `devices` whose collectives use `backend`. [`Backend::Nccl`] is an error
    /// unless the devices are distinct GPUs and NCCL can be loaded (the message says which,
    /// and for a missing library where it was looked for).
    pub fn with_backend(devices: &[Device], backend: Backend) -> Result<Mesh> {
        if devices.is_empty() {
            return Err(Error::Shape {
                op: "Mesh::new",
                msg: "a mesh needs at least one device, got none".into(),
            });
        }
        let (collectives, backend): (Arc<dyn Collectives>, Backend) = match backend {
            Backend::Transfer => (Arc::new(Transfer), Backend::Transfer),
            #[cfg(feature = "cuda")]
            Backend::Nccl => (Arc::new(nccl::Nccl::for_devices(devices)?), Backend::Nccl),
            #[cfg(not(feature = "cuda"))]
            Backend::Nccl => {
                return Err(Error::NoCuda(
                    "lazyfuse was built without the `cuda` feature, which NCCL meshes need".into(),
                ))
            }
            #[cfg(feature = "cuda")]
            Backend::Auto if nccl::Nccl::suits(devices) => {
                (Arc::new(nccl::Nccl::for_devices(devices)?), Backend::Nccl)
            }
            Backend::Auto => (Arc::new(Transfer), Backend::Transfer),
        };
        Ok(Mesh {
            devices: devices.into(),
            collectives,
            backend,
        })
    }

    /// The mesh of a job's processes: block `r` on rank `r`'s device. A world of one is the
    /// one-device mesh of [`Mesh::new`] (NCCL on a GPU where it loads, the host-staged
    /// backend on the CPU). Across processes the ranks must run on GPUs with NCCL (the
    /// group's communicator); an error otherwise.
    pub fn global(group: &crate::distributed::Group) -> Result<Mesh> {
        let world = group.world_size();
        if world == 1 {
            return Mesh::new(&[group.local_device()]);
        }
        #[cfg(feature = "cuda")]
        if let Some(comms) = group.comms() {
            return Ok(Mesh {
                devices: vec![group.local_device(); world].into(),
                collectives: Arc::new(nccl::Nccl::for_job(comms)),
                backend: Backend::Nccl,
            });
        }
        Err(Error::Distributed {
            op: "Mesh::global",
            msg: format!(
                "a mesh spanning {world} processes moves data through NCCL, which needs every \
                 rank on a GPU; this rank runs on {}",
                group.local_device()
            ),
        })
    }

    /// The number of shards.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Always false: a mesh holds at least one device.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The devices, in block order (on a mesh spanning processes, this process's device
    /// for every block).
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The transport its collectives use: [`Backend::Nccl`] or [`Backend::Transfer`].
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// On a mesh spanning processes ([`Mesh::global`] of more than one rank), the block of
    /// this process (its rank); `None` when every block is in this process.
    pub fn local_block(&self) -> Option<usize> {
        self.collectives.local_block()
    }

    /// Whether block `i` is in this process.
    pub fn is_local(&self, i: usize) -> bool {
        self.local_block().is_none_or(|b| b == i)
    }

    /// The distinct devices of the mesh, in first-appearance order.
    pub fn distinct_devices(&self) -> Vec<Device> {
        let mut out: Vec<Device> = Vec::new();
        for d in self.devices.iter() {
            if !out.contains(d) {
                out.push(d.clone());
            }
        }
        out
    }

    /// Waits for the work queued on every device of the mesh (of this process).
    pub fn synchronize(&self) -> Result<()> {
        self.distinct_devices()
            .iter()
            .try_for_each(|d| d.synchronize())
    }

    pub(crate) fn coll(&self) -> &dyn Collectives {
        self.collectives.as_ref()
    }
}

impl PartialEq for Mesh {
    fn eq(&self, other: &Mesh) -> bool {
        self.devices == other.devices && self.local_block() == other.local_block()
    }
}
impl Eq for Mesh {}

impl fmt::Debug for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.local_block() {
            None => write!(f, "Mesh({:?}, {:?})", &self.devices[..], self.collectives),
            Some(r) => write!(
                f,
                "Mesh({} ranks, rank {r} on {}, {:?})",
                self.devices.len(),
                self.devices[r],
                self.collectives
            ),
        }
    }
}

/// How a [`Sharded`] array's blocks cover the logical array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Split along this axis into contiguous blocks, NumPy's `array_split` sizes: with `n`
    /// elements over `k` devices, the first `n % k` blocks hold `n / k + 1`, the others
    /// `n / k` (blocks may be empty when `n < k`).
    Split(usize),
    /// Every device holds the whole array (the result of an all-reduce).
    Replicated,
}

/// One logical array spread over the devices of a [`Mesh`] (see [`Placement`]). Cheap to
/// clone; lazy like [`Array`].
#[derive(Clone)]
#[must_use = "sharded arrays are lazy: nothing is computed until they are evaluated or read back"]
pub struct Sharded {
    parts: Vec<Array>,
    placement: Placement,
    shape: Vec<usize>,
    mesh: Mesh,
}

/// Evaluates the blocks of several sharded arrays in one plan (as [`crate::eval`]; shared
/// subexpressions are computed once). On a mesh spanning processes, the blocks of this
/// process.
pub fn eval(arrays: &[&Sharded]) -> Result<()> {
    let refs: Vec<&Array> = arrays.iter().flat_map(|s| s.local_parts()).collect();
    crate::eval(&refs)
}

/// NumPy's `array_split` block lengths of `n` elements over `k` blocks.
pub(crate) fn split_sizes(n: usize, k: usize) -> Vec<usize> {
    (0..k).map(|i| n / k + usize::from(i < n % k)).collect()
}

/// The start of each block of `sizes`.
pub(crate) fn offsets(sizes: &[usize]) -> Vec<usize> {
    let mut o = 0;
    sizes
        .iter()
        .map(|&s| {
            let start = o;
            o += s;
            start
        })
        .collect()
}

/// The axis `axis` of a rank-`ndim` array, or the shape error of `op`.
pub(crate) fn axis_in(op: &'static str, axis: isize, shape: &[usize]) -> Result<usize> {
    norm_axis(axis, shape.len(), false).ok_or_else(|| Error::Shape {
        op,
        msg: format!("axis {axis} out of range for shape {shape:?}"),
    })
}

impl Array {
    /// This array split along `axis` over `mesh`: block `i` (NumPy's `array_split` sizes,
    /// see [`Placement::Split`]) moved to `mesh.devices()[i]`. Lazy. An error for a 0-d
    /// array or an axis out of range. On a mesh spanning processes every rank takes its
    /// block from its own copy of the array, so every rank must build the same array (as
    /// an SPMD program does; `replicate` first hands out rank 0's).
    pub fn shard(&self, mesh: &Mesh, axis: isize) -> Result<Sharded> {
        if self.ndim() == 0 {
            return Err(Error::Shape {
                op: "shard",
                msg: format!(
                    "a 0-d array (shape {:?}) has no axis to split",
                    self.shape()
                ),
            });
        }
        let a = axis_in("shard", axis, self.shape())?;
        let sizes = split_sizes(self.shape()[a], mesh.len());
        let parts = offsets(&sizes)
            .iter()
            .zip(&sizes)
            .zip(mesh.devices())
            .map(|((&o, &s), d)| mesh.coll().send(&self.slice_axis(a, o, o + s), d))
            .collect();
        Ok(Sharded {
            parts,
            placement: Placement::Split(a),
            shape: self.shape().to_vec(),
            mesh: mesh.clone(),
        })
    }

    /// This array on every device of `mesh` ([`Placement::Replicated`]): a broadcast from
    /// the first device (lazy copies on the host-staged backend, `ncclBroadcast` on NCCL; on
    /// a mesh spanning processes, rank 0's array is the value every rank gets).
    pub fn replicate(&self, mesh: &Mesh) -> Result<Sharded> {
        Ok(Sharded {
            parts: mesh.coll().broadcast(self, mesh.devices())?,
            placement: Placement::Replicated,
            shape: self.shape().to_vec(),
            mesh: mesh.clone(),
        })
    }
}

impl Sharded {
    /// A sharded array from blocks already on the mesh's devices: `parts[i]` on
    /// `mesh.devices()[i]`, all of one dtype and rank, equal off `axis`, with the
    /// `array_split` lengths along `axis` ([`Placement::Split`]). An error otherwise.
    pub fn from_parts(mesh: &Mesh, parts: Vec<Array>, axis: isize) -> Result<Sharded> {
        let bad = |msg: String| Error::Shape {
            op: "Sharded::from_parts",
            msg,
        };
        if parts.len() != mesh.len() {
            return Err(bad(format!(
                "{} parts for a mesh of {} devices",
                parts.len(),
                mesh.len()
            )));
        }
        let first = &parts[0];
        if first.ndim() == 0 {
            return Err(bad("0-d parts have no axis to split".into()));
        }
        let a = axis_in("Sharded::from_parts", axis, first.shape())?;
        let mut shape = first.shape().to_vec();
        shape[a] = parts
            .iter()
            .map(|p| p.shape().get(a).copied().unwrap_or(0))
            .sum();
        let sizes = split_sizes(shape[a], mesh.len());
        for (i, (p, d)) in parts.iter().zip(mesh.devices()).enumerate() {
            let mut want = shape.clone();
            want[a] = sizes[i];
            if p.shape() != want.as_slice() || p.dtype() != first.dtype() {
                let got: Vec<String> = parts
                    .iter()
                    .map(|p| format!("{} {:?}", p.dtype(), p.shape()))
                    .collect();
                return Err(bad(format!(
                    "part {i} is {} {:?}, expected {} {want:?} (parts: {got:?}; lengths \
                     along axis {a} must be {sizes:?})",
                    p.dtype(),
                    p.shape(),
                    first.dtype()
                )));
            }
            if &p.device() != d {
                return Err(Error::DeviceMismatch {
                    op: "Sharded::from_parts",
                    a: format!("part {i} on {}", p.device()),
                    b: format!("mesh device {d}"),
                });
            }
        }
        Ok(Sharded {
            parts,
            placement: Placement::Split(a),
            shape,
            mesh: mesh.clone(),
        })
    }

    /// The logical (full) shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.parts[0].dtype()
    }
    /// How the blocks cover the array.
    pub fn placement(&self) -> Placement {
        self.placement
    }
    /// The split axis; `None` when replicated.
    pub fn axis(&self) -> Option<usize> {
        match self.placement {
            Placement::Split(a) => Some(a),
            Placement::Replicated => None,
        }
    }
    /// The mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }
    /// The blocks, `parts()[i]` on `mesh().devices()[i]`.
    pub fn parts(&self) -> &[Array] {
        &self.parts
    }
    /// The blocks, by value.
    pub fn into_parts(self) -> Vec<Array> {
        self.parts
    }

    /// The blocks of this process (all of them unless the mesh spans processes).
    pub fn local_parts(&self) -> impl Iterator<Item = &Array> {
        let mesh = &self.mesh;
        self.parts
            .iter()
            .enumerate()
            .filter(move |(i, _)| mesh.is_local(*i))
            .map(|(_, p)| p)
    }

    /// Evaluates every block of this process in one plan (per-device work is queued on
    /// each device; on CUDA this returns once it is queued).
    pub fn eval(&self) -> Result<()> {
        let refs: Vec<&Array> = self.local_parts().collect();
        crate::eval(&refs)
    }

    /// The whole array on the mesh's first device (lazy on the host-staged backend). On a
    /// mesh spanning processes, the whole array on this process's device, in every
    /// process (an all-gather; see [`Sharded::gather_to_rank`] for one rank only).
    pub fn gather(&self) -> Result<Array> {
        self.gather_to(&self.mesh.devices[0])
    }

    /// The whole array on `dev`, a device of this process: the blocks concatenated there,
    /// or, replicated, the copy already on `dev` if there is one.
    pub fn gather_to(&self, dev: &Device) -> Result<Array> {
        match self.placement {
            Placement::Split(a) => self.mesh.coll().gather(&self.parts, a, dev),
            Placement::Replicated => Ok(match self.parts.iter().find(|p| &p.device() == dev) {
                Some(p) => p.clone(),
                None => self.mesh.coll().send(&self.parts[0], dev),
            }),
        }
    }

    /// The whole array in rank `rank`'s process, on its device: `Some` there, `None` in
    /// every other process (only the blocks move, to that rank). Within one process (any
    /// mesh but a [`Mesh::global`] of several ranks) the only rank is 0 and this is
    /// `Some(self.gather()?)`. An error for a rank the job does not have.
    pub fn gather_to_rank(&self, rank: usize) -> Result<Option<Array>> {
        let k = self.mesh.len();
        let Some(me) = self.mesh.local_block() else {
            if rank != 0 {
                return Err(Error::Shape {
                    op: "gather_to_rank",
                    msg: format!("rank {rank} of a mesh within one process (rank 0 only)"),
                });
            }
            return self.gather().map(Some);
        };
        if rank >= k {
            return Err(Error::Shape {
                op: "gather_to_rank",
                msg: format!("rank {rank} of a job of {k} ranks"),
            });
        }
        let a = match self.placement {
            Placement::Replicated => return Ok((me == rank).then(|| self.parts[me].clone())),
            Placement::Split(a) => a,
        };
        let moves: Vec<Move> = (0..k)
            .map(|j| Move {
                src: j,
                dst: rank,
                array: self.parts[j].clone(),
            })
            .collect();
        let got = self.mesh.coll().exchange(&moves, self.mesh.devices())?;
        if me != rank {
            return Ok(None);
        }
        let refs: Vec<&Array> = got.iter().collect();
        Ok(Some(crate::concatenate(&refs, a as isize)))
    }

    /// `f` applied to every block, for work that keeps the split axis where it is and its
    /// length unchanged: elementwise and unary ops, casts, views along other axes. The
    /// result's shape is taken from the blocks; an error when `f` changes the rank or the
    /// split axis's lengths, or moves a block to another device.
    pub fn map(&self, f: impl Fn(&Array) -> Array) -> Result<Sharded> {
        let parts: Vec<Array> = self.parts.iter().map(f).collect();
        self.with_parts("map", parts)
    }

    /// `f` applied blockwise to `self` and `other`, for binary elementwise work between
    /// two arrays of one shape, mesh and placement. An error when they differ.
    pub fn zip(&self, other: &Sharded, f: impl Fn(&Array, &Array) -> Array) -> Result<Sharded> {
        self.check_like("zip", other)?;
        let parts: Vec<Array> = self
            .parts
            .iter()
            .zip(&other.parts)
            .map(|(a, b)| f(a, b))
            .collect();
        self.with_parts("zip", parts)
    }

    /// `a` sharded the way `self` is (same mesh and placement); `a` must have `self`'s
    /// shape. For an unsharded operand of [`Sharded::zip`], such as a multiplier.
    pub fn like(&self, a: &Array) -> Result<Sharded> {
        if a.shape() != self.shape() {
            return Err(Error::Shape {
                op: "Sharded::like",
                msg: format!(
                    "array of shape {:?} for a sharded array of shape {:?}",
                    a.shape(),
                    self.shape()
                ),
            });
        }
        match self.placement {
            Placement::Split(ax) => a.shard(&self.mesh, ax as isize),
            Placement::Replicated => a.replicate(&self.mesh),
        }
    }

    /// A cast of every block.
    pub fn astype(&self, dtype: DType) -> Result<Sharded> {
        self.map(|p| p.astype(dtype))
    }

    /// An error unless `other` has `self`'s mesh, placement and shape.
    fn check_like(&self, op: &'static str, other: &Sharded) -> Result<()> {
        if self.mesh != other.mesh {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "sharded arrays on different meshes ({:?} and {:?})",
                    self.mesh, other.mesh
                ),
            });
        }
        if self.placement != other.placement || self.shape != other.shape {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "sharded arrays of shape {:?} placed {:?} and shape {:?} placed {:?}; \
                     reshard or shard one like the other first",
                    self.shape, self.placement, other.shape, other.placement
                ),
            });
        }
        Ok(())
    }

    /// A sharded array of `parts` placed as `self` is, its shape read from the parts.
    fn with_parts(&self, op: &'static str, parts: Vec<Array>) -> Result<Sharded> {
        let shape = match self.placement {
            Placement::Replicated => parts[0].shape().to_vec(),
            Placement::Split(a) => {
                let mut shape = parts[0].shape().to_vec();
                let keeps = parts
                    .iter()
                    .zip(&self.parts)
                    .all(|(p, q)| p.ndim() == q.ndim() && p.shape().get(a) == q.shape().get(a));
                if !keeps {
                    return Err(Error::Shape {
                        op,
                        msg: format!(
                            "blocks of shape {:?} became {:?}: the split axis {a} must keep \
                             its place and lengths",
                            self.parts.iter().map(|p| p.shape()).collect::<Vec<_>>(),
                            parts.iter().map(|p| p.shape()).collect::<Vec<_>>()
                        ),
                    });
                }
                shape[a] = self.shape[a];
                shape
            }
        };
        for (i, (p, d)) in parts.iter().zip(self.mesh.devices()).enumerate() {
            let mut want = shape.clone();
            if let Placement::Split(a) = self.placement {
                want[a] = p.shape()[a];
            }
            if p.shape() != want.as_slice() {
                return Err(Error::Shape {
                    op,
                    msg: format!("block {i} has shape {:?}, expected {want:?}", p.shape()),
                });
            }
            if &p.device() != d {
                return Err(Error::DeviceMismatch {
                    op,
                    a: format!("block {i} on {}", p.device()),
                    b: format!("mesh device {d}"),
                });
            }
        }
        Ok(Sharded {
            parts,
            placement: self.placement,
            shape,
            mesh: self.mesh.clone(),
        })
    }
}

impl fmt::Debug for Sharded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes: Vec<usize> = match self.placement {
            Placement::Split(a) => self.parts.iter().map(|p| p.shape()[a]).collect(),
            Placement::Replicated => Vec::new(),
        };
        write!(
            f,
            "Sharded({}, shape={:?}, {:?} {:?}, {:?})",
            self.dtype(),
            self.shape,
            self.placement,
            sizes,
            self.mesh
        )
    }
}
