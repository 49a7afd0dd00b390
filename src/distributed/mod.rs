//! One process per GPU, on any number of hosts: [`init`] reads the launcher's environment
//! (torchrun, `srun`, `mpirun`), meets the other processes at rank 0's address, and returns
//! the job's [`Group`]; [`Mesh::global`](crate::Mesh::global) spans every rank's device,
//! and sharded arrays on it keep each block in its rank's process, with NCCL moving data
//! between them. Every process runs the same program (SPMD, like JAX's multi-controller
//! model).
//!
//! ```no_run
//! use lazyfuse as lf;
//! # fn main() -> lf::Result<()> {
//! // torchrun --nproc-per-node=8 ./program   (or srun / mpirun with MASTER_ADDR set)
//! let g = lf::distributed::init()?;
//! let mesh = lf::Mesh::global(&g)?;                  // block r on rank r's GPU
//! let u = lf::random::normal(&[4096, 4096], lf::DType::F32, 0).shard(&mesh, 0)?;
//! let energy = u.map(|p| p.square())?.sum()?;        // ncclAllReduce across the ranks
//! let whole = u.gather_to_rank(0)?;                  // Some on rank 0, None elsewhere
//! if let Some(a) = whole {
//!     println!("{:?} energy {}", a.shape(), energy.gather()?.item::<f32>()?);
//! }
//! g.barrier()?;
//! # Ok(())
//! # }
//! ```
//!
//! The parts are separate so that each can be used and tested alone: [`Launch`] parses the
//! variables ([`Launch::from_vars`] takes any lookup), [`rendezvous`] is the TCP meeting
//! (rank 0 hands the others 128 bytes: the NCCL unique id), and [`init_with`] makes a group
//! from a launch and a device. A world of one needs none of it: no variables, no network,
//! and on the CPU no NCCL.

mod launch;
mod rendezvous;

pub use launch::{Launch, Launcher, DEFAULT_PORT, DEFAULT_TIMEOUT};
pub use rendezvous::{rendezvous, Rendezvous, PAYLOAD_BYTES};

use crate::{Device, Result};
use std::fmt;
use std::sync::Arc;

/// The processes of one job and this process's place in it (see the module docs). Cheap
/// to clone; the connections and the NCCL communicator close when the last clone drops.
#[derive(Clone)]
pub struct Group {
    inner: Arc<Inner>,
}

struct Inner {
    launch: Launch,
    device: Device,
    meeting: Rendezvous,
    /// This process's rank of the job's NCCL communicator (GPU ranks of a world of more
    /// than one).
    #[cfg(feature = "cuda")]
    comms: Option<Arc<crate::runtime::cuda::nccl::Comms>>,
}

/// Joins the job this process was started in: [`Launch::from_env`] reads the launcher's
/// variables, [`Launch::local_device`] picks the device (CUDA device `LOCAL_RANK` when a
/// GPU is usable, else the CPU; `LAZYFUSE_DEVICE=cpu` forces the CPU), and [`init_with`]
/// meets the other ranks. Without launcher
/// variables this is a world of one and returns at once.
///
/// Call it once per process and keep the group; every rank must call it.
pub fn init() -> Result<Group> {
    let launch = Launch::from_env()?;
    let device = launch.local_device()?;
    init_with(&launch, &device)
}

/// Joins the job `launch` describes, running on `device`. With more than one rank on
/// GPUs, rank 0 makes the NCCL unique id, hands it out through the [`rendezvous`], and
/// every rank joins the communicator (`ncclCommInitRank`); a GPU rank where NCCL cannot be
/// loaded fails before meeting the others, with an error saying so. Ranks on the CPU meet
/// without NCCL (their group has barriers, but no mesh spans them). Every rank must run on
/// the same kind of device.
pub fn init_with(launch: &Launch, device: &Device) -> Result<Group> {
    let nccl = device.is_cuda() && launch.world_size > 1;
    #[cfg(feature = "cuda")]
    if nccl {
        crate::runtime::cuda::nccl::lib()?;
    }
    let meeting = rendezvous::meet(launch, u8::from(nccl), || {
        if nccl {
            nccl_id()
        } else {
            Ok([0; PAYLOAD_BYTES])
        }
    })?;
    #[cfg(feature = "cuda")]
    let comms = match device {
        Device::Cuda(d) if nccl && meeting.is_nccl_id() => {
            Some(Arc::new(crate::runtime::cuda::nccl::Comms::for_rank(
                d,
                launch.rank,
                launch.world_size,
                meeting.payload(),
            )?))
        }
        _ => None,
    };
    Ok(Group {
        inner: Arc::new(Inner {
            launch: launch.clone(),
            device: device.clone(),
            meeting,
            #[cfg(feature = "cuda")]
            comms,
        }),
    })
}

/// A fresh NCCL unique id.
fn nccl_id() -> Result<[u8; PAYLOAD_BYTES]> {
    #[cfg(feature = "cuda")]
    return crate::runtime::cuda::nccl::unique_id();
    #[cfg(not(feature = "cuda"))]
    Err(crate::Error::NoCuda(
        "lazyfuse was built without the `cuda` feature".into(),
    ))
}

/// The version of the NCCL library this process loads (major, minor, patch), loading it
/// if needed; an error saying why when it cannot be loaded (the names tried, and how to
/// point the loader at it: `LD_LIBRARY_PATH` or `LAZYFUSE_NCCL_LIBRARY`). Never panics.
pub fn nccl_version() -> Result<(i32, i32, i32)> {
    #[cfg(feature = "cuda")]
    return crate::runtime::cuda::nccl::version().map(|(v, _)| v);
    #[cfg(not(feature = "cuda"))]
    Err(crate::Error::NoCuda(
        "lazyfuse was built without the `cuda` feature".into(),
    ))
}

impl Group {
    /// This process's rank, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.inner.launch.rank
    }

    /// The number of processes in the job.
    pub fn world_size(&self) -> usize {
        self.inner.launch.world_size
    }

    /// This process's rank on its host.
    pub fn local_rank(&self) -> usize {
        self.inner.launch.local_rank
    }

    /// The device this process computes on.
    pub fn local_device(&self) -> Device {
        self.inner.device.clone()
    }

    /// The launch this group was made from.
    pub fn launch(&self) -> &Launch {
        &self.inner.launch
    }

    /// Waits until every rank has called `barrier` (through the rendezvous connections;
    /// queued device work is not waited for: synchronize the device first for that), then
    /// checks the NCCL communicator for asynchronous errors. An error naming the missing
    /// ranks after the launch's timeout, never a hang.
    pub fn barrier(&self) -> Result<()> {
        self.inner.meeting.barrier()?;
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.inner.comms {
            c.check_async()?;
        }
        Ok(())
    }

    /// This process's rank of the job's NCCL communicator, if it has one.
    #[cfg(feature = "cuda")]
    pub(crate) fn comms(&self) -> Option<Arc<crate::runtime::cuda::nccl::Comms>> {
        self.inner.comms.clone()
    }
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Group(rank {} of {}, {:?}, {})",
            self.rank(),
            self.world_size(),
            self.inner.launch.launcher,
            self.inner.device
        )
    }
}
