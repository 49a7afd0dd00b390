//! The guides of the `docs/` folder, as part of the API documentation.
//!
//! Each submodule is empty: it exists to carry one guide.
//!
//! - [`architecture`]: the pipeline stage by stage (API, graph, schedule, lower, codegen,
//!   runtime), the profiler and the cache-miss explanations, loops and CUDA graphs, and
//!   sharded arrays over several devices.
//! - [`distributed`]: several GPUs, in one process (a mesh over the host's GPUs) or one
//!   process per GPU under torchrun, `srun` or `mpirun`; collectives through NCCL.
//! - [`env_vars`]: every `LAZYFUSE_*` environment variable (device choice, debug output,
//!   profiling, caches, CUDA graphs, tests) and the launcher variables read at
//!   `lf::distributed::init`.
//! - [`numpy_users`]: NumPy calls and their lazyfuse equivalents, and the differences worth
//!   knowing.

pub mod architecture {
    #![doc = include_str!("../docs/architecture.md")]
}

pub mod distributed {
    #![doc = include_str!("../docs/distributed.md")]
}

pub mod env_vars {
    #![doc = include_str!("../docs/env_vars.md")]
}

pub mod numpy_users {
    #![doc = include_str!("../docs/numpy_users.md")]
}
