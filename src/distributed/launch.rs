//! A process's place in a job, parsed from the variables its launcher set: torchrun's (and
//! every `env://` launcher's) `RANK`/`WORLD_SIZE`/`LOCAL_RANK`, Slurm's `SLURM_PROCID`/
//! `SLURM_NTASKS`/`SLURM_LOCALID`, Open MPI's `OMPI_COMM_WORLD_*`; `MASTER_ADDR` and
//! `MASTER_PORT` name rank 0's rendezvous. A pure function of a variable lookup, so that
//! every rule is tested without touching the process environment.

use crate::{Device, Error, Result};
use std::time::Duration;

/// The rendezvous port when `MASTER_PORT` is unset (torchrun's default).
pub const DEFAULT_PORT: u16 = 29500;

/// How long a rendezvous or a barrier waits for every rank when `LAZYFUSE_DIST_TIMEOUT`
/// is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Which launcher's variables described the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Launcher {
    /// No launcher variables: a world of one.
    Single,
    /// `RANK`, `WORLD_SIZE`, `LOCAL_RANK` (torchrun, and the launchers of PyTorch's
    /// `env://` convention).
    Torchrun,
    /// `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID` (`srun`).
    Slurm,
    /// `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`, `OMPI_COMM_WORLD_LOCAL_RANK`
    /// (Open MPI's `mpirun`).
    Mpi,
}

/// This process's place in a job: its rank among `world_size` processes, its rank on its
/// host (which picks its GPU), where rank 0 serves the rendezvous, and how long to wait
/// for the others. [`Launch::from_env`] reads it from the launcher's variables;
/// [`Launch::from_vars`] from any lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Whose variables these were.
    pub launcher: Launcher,
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// The number of processes.
    pub world_size: usize,
    /// This process's rank on its host: it uses CUDA device `local_rank` (device 0 when the
    /// process sees one GPU only).
    pub local_rank: usize,
    /// Rank 0's rendezvous address (`MASTER_ADDR`, `MASTER_PORT`); `None` for a world of one.
    pub master: Option<(String, u16)>,
    /// How long the rendezvous and each barrier wait for every rank
    /// (`LAZYFUSE_DIST_TIMEOUT`, seconds; default [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
}

/// The variables of each launcher: (rank, world size, local rank).
const TORCHRUN: [&str; 3] = ["RANK", "WORLD_SIZE", "LOCAL_RANK"];
const SLURM: [&str; 3] = ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"];
const MPI: [&str; 3] = [
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
];

fn bad(msg: String) -> Error {
    Error::Config(format!("lf::distributed::init: {msg}"))
}

/// The value of `name` as a count or index (surrounding spaces ignored).
fn number(name: &str, v: &str) -> Result<usize> {
    v.trim().parse::<usize>().map_err(|_| {
        bad(format!(
            "{name}={v:?} is not a non-negative integer (as the launcher sets it)"
        ))
    })
}

impl Launch {
    /// A world of one: rank 0 of 1, no rendezvous.
    pub fn single() -> Launch {
        Launch {
            launcher: Launcher::Single,
            rank: 0,
            world_size: 1,
            local_rank: 0,
            master: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The launcher's variables of this process, read now (see [`Launch::from_vars`]). A
    /// variable that is not Unicode is an error naming it.
    pub fn from_env() -> Result<Launch> {
        let not_unicode = std::cell::RefCell::new(None);
        let launch = Launch::from_vars(|name| match crate::config::launcher_var(name) {
            Ok(v) => v,
            Err(raw) => {
                not_unicode
                    .borrow_mut()
                    .get_or_insert((name.to_string(), raw));
                None
            }
        });
        if let Some((name, raw)) = not_unicode.into_inner() {
            return Err(bad(format!("{name}={raw:?} is not valid Unicode")));
        }
        launch
    }

    /// A launch described by the variables `get` returns (`None`: unset). The first
    /// launcher whose rank variable is set wins, in this order: torchrun (`RANK`), Slurm
    /// (`SLURM_PROCID`), Open MPI (`OMPI_COMM_WORLD_RANK`); none set is a world of one.
    /// torchrun sets `RANK` inside a Slurm allocation too, and its variables describe the
    /// process, so they come first.
    ///
    /// The launcher's world size must be set; its local rank defaults to the rank (one
    /// host). With more than one process `MASTER_ADDR` must be set (`MASTER_PORT`
    /// defaults to [`DEFAULT_PORT`]). `LAZYFUSE_DIST_TIMEOUT` (seconds, > 0) sets the
    /// timeout. Errors name the variable and its value: a value that is not a
    /// non-negative integer, a world size of 0, a rank not below the world size, a port
    /// that is not 1 to 65535.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Launch> {
        let timeout = match get("LAZYFUSE_DIST_TIMEOUT") {
            None => DEFAULT_TIMEOUT,
            Some(v) => match v.trim().parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => Duration::from_secs_f64(s),
                _ => {
                    return Err(bad(format!(
                        "LAZYFUSE_DIST_TIMEOUT={v:?} is not a positive number of seconds"
                    )))
                }
            },
        };
        let found = [
            (Launcher::Torchrun, TORCHRUN),
            (Launcher::Slurm, SLURM),
            (Launcher::Mpi, MPI),
        ]
        .into_iter()
        .find_map(|(l, vars)| get(vars[0]).map(|rank| (l, vars, rank)));
        let Some((launcher, [rank_var, size_var, local_var], rank)) = found else {
            // a size without a rank is a half-set launch, not a world of one
            for vars in [TORCHRUN, SLURM, MPI] {
                if let Some(v) = get(vars[1]) {
                    return Err(bad(format!(
                        "{}={v:?} is set but {} is not; set both (or neither for one process)",
                        vars[1], vars[0]
                    )));
                }
            }
            return Ok(Launch {
                timeout,
                ..Launch::single()
            });
        };
        let rank = number(rank_var, &rank)?;
        let Some(size) = get(size_var) else {
            return Err(bad(format!(
                "{rank_var} is set but {size_var} is not; the launcher sets both"
            )));
        };
        let world_size = number(size_var, &size)?;
        if world_size == 0 {
            return Err(bad(format!(
                "{size_var}={size:?}: a job has at least one process"
            )));
        }
        if rank >= world_size {
            return Err(bad(format!(
                "{rank_var}={rank} is not below {size_var}={world_size}"
            )));
        }
        let local_rank = match get(local_var) {
            Some(v) => number(local_var, &v)?,
            None => rank,
        };
        let master = if world_size > 1 {
            let addr = get("MASTER_ADDR")
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .ok_or_else(|| {
                    bad(format!(
                        "MASTER_ADDR is not set; {world_size} processes ({size_var}) need \
                         rank 0's host name or address to meet at (torchrun sets it; under \
                         srun or mpirun export it, e.g. the first host of the allocation)"
                    ))
                })?;
            let port = match get("MASTER_PORT") {
                None => DEFAULT_PORT,
                Some(p) => match p.trim().parse::<u16>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(bad(format!(
                            "MASTER_PORT={p:?} is not a port number (1 to 65535)"
                        )))
                    }
                },
            };
            Some((addr, port))
        } else {
            None
        };
        Ok(Launch {
            launcher,
            rank,
            world_size,
            local_rank,
            master,
            timeout,
        })
    }

    /// The device this process uses: CUDA device `local_rank` when CUDA is usable (device 0
    /// when the process sees only one GPU, as under a launcher that gives each process its
    /// own), else the CPU; `LAZYFUSE_DEVICE=cpu` forces the CPU. No other GPU is touched
    /// (opening device 0 in every process would put a context of each on it). An error
    /// when the host has several GPUs but none of ordinal `local_rank`.
    pub fn local_device(&self) -> Result<Device> {
        let forced_cpu =
            crate::config::device_var().is_ok_and(|v| v.trim().eq_ignore_ascii_case("cpu"));
        let count = Device::cuda_count();
        if forced_cpu || count == 0 {
            return Ok(Device::Cpu);
        }
        let ordinal = match count {
            1 => 0,
            n if self.local_rank < n => self.local_rank,
            n => {
                return Err(bad(format!(
                    "local rank {} (from the launcher) but this host has {n} CUDA devices",
                    self.local_rank
                )))
            }
        };
        Device::cuda(ordinal)
    }
}
