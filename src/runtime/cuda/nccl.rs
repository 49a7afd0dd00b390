//! NCCL, loaded at first use: its entry points, communicators (one per device of this
//! process, or this process's rank of a job spanning processes), and grouped calls queued on
//! the devices' streams, ordered by events.
//!
//! # Loading
//! The types (`ncclComm_t`, `ncclUniqueId`, the data-type and reduction enums) are cudarc's
//! (`nccl` feature); the entry points are resolved here, once per process, from the first
//! of `LAZYFUSE_NCCL_LIBRARY` (when set: only it), `libnccl.so.2`, and cudarc's candidate
//! names. cudarc's own loader is not used for two reasons: it panics when the library is
//! missing (the other CUDA libraries are probed with `is_culib_present` first; here the
//! probe and the load are one step), and its candidates lack `libnccl.so.2`, the soname
//! that NCCL's packages install (the `nvidia-nccl-cu12`/`-cu13` wheels and Debian's
//! `libnccl2` ship it without the development link `libnccl.so`). NCCL's results are
//! read as `c_int`, so that a result code newer than the bindings is an error message,
//! never an invalid enum value.
//!
//! # Ordering
//! Every call of a [`Comms::group`] is queued on the calling thread's lane of the
//! communicator's device, after `CudaDevice::order` made that lane wait (on the device, via
//! events) for the other lanes that wrote the buffers it reads or used the buffers it
//! writes; outputs are fresh buffers of that lane. Nothing waits on the host. The calls of
//! one group are one `ncclGroupStart`/`ncclGroupEnd` pair, which lets one thread drive the
//! communicators of several devices of a process, and pairs the sends and receives of an
//! all-to-all. A set's mutex keeps two threads from interleaving their calls on one
//! communicator (NCCL requires the same call order on every rank).

use super::compile::lock;
use super::device::CudaDevice;
use super::memory::CudaBuffer;
use crate::{Error, Result};
use cudarc::nccl::sys as nccl_sys;
use lazyfuse_codegen::DType;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex};

/// NCCL's data type enum (cudarc's bindings).
pub(crate) use nccl_sys::ncclDataType_t as NcclType;
/// NCCL's reduction enum (cudarc's bindings).
pub(crate) use nccl_sys::ncclRedOp_t as NcclOp;

type Res = c_int;
type Comm = nccl_sys::ncclComm_t;
type Stream = nccl_sys::cudaStream_t;

/// The bytes of an `ncclUniqueId`.
pub(crate) const ID_BYTES: usize = 128;

/// The entry points used, resolved from the loaded library.
struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> Res,
    get_unique_id: unsafe extern "C" fn(*mut nccl_sys::ncclUniqueId) -> Res,
    comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, nccl_sys::ncclUniqueId, c_int) -> Res,
    comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Res,
    comm_destroy: unsafe extern "C" fn(Comm) -> Res,
    comm_get_async_error: unsafe extern "C" fn(Comm, *mut c_int) -> Res,
    get_error_string: unsafe extern "C" fn(Res) -> *const c_char,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        NcclType,
        NcclOp,
        Comm,
        Stream,
    ) -> Res,
    broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        NcclType,
        c_int,
        Comm,
        Stream,
    ) -> Res,
    all_gather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, NcclType, Comm, Stream) -> Res,
    reduce_scatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        NcclType,
        NcclOp,
        Comm,
        Stream,
    ) -> Res,
    send: unsafe extern "C" fn(*const c_void, usize, NcclType, c_int, Comm, Stream) -> Res,
    recv: unsafe extern "C" fn(*mut c_void, usize, NcclType, c_int, Comm, Stream) -> Res,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
}

/// The loaded NCCL library: its entry points, where it came from and its version.
pub(crate) struct NcclLib {
    api: Api,
    /// The name or path it was loaded by.
    name: String,
    /// (major, minor, patch).
    version: (i32, i32, i32),
    /// Keeps the entry points valid.
    _lib: libloading::Library,
}

impl std::fmt::Debug for NcclLib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.version;
        write!(f, "NCCL {a}.{b}.{c} ({})", self.name)
    }
}

/// The names tried, in order: `LAZYFUSE_NCCL_LIBRARY` alone when set, else NCCL's soname
/// and then cudarc's candidates.
pub(crate) fn candidates() -> Vec<String> {
    if let Some(p) = crate::config::nccl_library() {
        return vec![p];
    }
    let mut v = vec!["libnccl.so.2".to_string()];
    for c in cudarc::get_lib_name_candidates("nccl") {
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

/// NCCL's version code as (major, minor, patch): `major * 10000 + minor * 100 + patch`
/// from 2.9 on, `major * 1000 + minor * 100 + patch` before.
pub(crate) fn decode_version(code: i32) -> (i32, i32, i32) {
    if code >= 10000 {
        (code / 10000, (code % 10000) / 100, code % 100)
    } else {
        (code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// Loads the first of `names` that opens and has every entry point used; otherwise why
/// none could be used, naming each one tried. Never panics.
pub(crate) fn load(names: &[String]) -> std::result::Result<NcclLib, String> {
    let mut why = Vec::new();
    for name in names {
        // SAFETY: opening a library runs its initializers; NCCL's have no preconditions.
        let lib = match unsafe { libloading::Library::new(name) } {
            Ok(lib) => lib,
            Err(e) => {
                why.push(format!("{name}: {e}"));
                continue;
            }
        };
        match resolve(&lib) {
            Ok(api) => {
                let mut code: c_int = 0;
                // SAFETY: `code` is a valid place for one int.
                let r = unsafe { (api.get_version)(&mut code) };
                if r != 0 {
                    why.push(format!("{name}: ncclGetVersion returned {r}"));
                    continue;
                }
                return Ok(NcclLib {
                    api,
                    name: name.clone(),
                    version: decode_version(code),
                    _lib: lib,
                });
            }
            Err(e) => why.push(format!("{name}: {e} (NCCL 2.7 or newer is needed)")),
        }
    }
    Err(format!(
        "NCCL cannot be loaded (tried {}). Put the directory of libnccl.so.2 on \
         LD_LIBRARY_PATH (a pip install keeps it under site-packages/nvidia/, e.g. \
         nvidia/nccl/lib) or name the library in LAZYFUSE_NCCL_LIBRARY",
        why.join("; ")
    ))
}

/// Every entry point of [`Api`] from `lib`, or the first missing one.
fn resolve(lib: &libloading::Library) -> std::result::Result<Api, String> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol is NCCL's C function of that name, whose signature (nccl.h
            // since 2.7) is the type of the field it is stored in.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("no {}: {e}", $name))?
        };
    }
    Ok(Api {
        get_version: sym!("ncclGetVersion"),
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank: sym!("ncclCommInitRank"),
        comm_init_all: sym!("ncclCommInitAll"),
        comm_destroy: sym!("ncclCommDestroy"),
        comm_get_async_error: sym!("ncclCommGetAsyncError"),
        get_error_string: sym!("ncclGetErrorString"),
        all_reduce: sym!("ncclAllReduce"),
        broadcast: sym!("ncclBroadcast"),
        all_gather: sym!("ncclAllGather"),
        reduce_scatter: sym!("ncclReduceScatter"),
        send: sym!("ncclSend"),
        recv: sym!("ncclRecv"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
    })
}

/// The process's NCCL (loaded once), or why it cannot be used.
pub(crate) fn lib() -> Result<&'static NcclLib> {
    super::CUDA
        .nccl
        .get_or_init(|| load(&candidates()))
        .as_ref()
        .map_err(|why| Error::Distributed {
            op: "nccl",
            msg: why.clone(),
        })
}

/// The loaded NCCL's (major, minor, patch) version and the name it was loaded by.
pub(crate) fn version() -> Result<((i32, i32, i32), String)> {
    let l = lib()?;
    Ok((l.version, l.name.clone()))
}

impl NcclLib {
    /// `Ok` for `ncclSuccess` (and `ncclInProgress`, which only non-blocking communicators
    /// return), else the error of `op` with NCCL's message.
    fn check(&self, r: Res, op: &'static str) -> Result<()> {
        crate::profile::calls::note(op);
        // ncclSuccess = 0, ncclInProgress = 7
        if r == 0 || r == 7 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString takes any result code and returns a static string.
        let msg = unsafe { (self.api.get_error_string)(r) };
        let text = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null result is a NUL-terminated static string.
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        };
        Err(Error::Distributed {
            op,
            msg: format!("NCCL error {r}: {text}"),
        })
    }
}

/// A fresh NCCL unique id (rank 0 of a job makes it and hands it to the others).
pub(crate) fn unique_id() -> Result<[u8; ID_BYTES]> {
    let l = lib()?;
    let mut id = nccl_sys::ncclUniqueId {
        internal: [0; ID_BYTES],
    };
    // SAFETY: `id` is a valid place for an `ncclUniqueId`.
    l.check(unsafe { (l.api.get_unique_id)(&mut id) }, "ncclGetUniqueId")?;
    Ok(id.internal.map(|c| c as u8))
}

/// One communicator of this process: its rank and device.
struct Rank {
    comm: Comm,
    dev: &'static CudaDevice,
    rank: usize,
}

/// The communicators of one process in a communicator set: one per device of a mesh within
/// the process (rank `i` on the mesh's device `i`), or this process's one rank of a job.
/// Destroyed on drop.
pub(crate) struct Comms {
    lib: &'static NcclLib,
    ranks: Vec<Rank>,
    world: usize,
    /// Held for each group of calls: one thread issues a set's calls at a time.
    lock: Mutex<()>,
}

// SAFETY: the communicator handles are used only under `lock` (`group`) or in `drop`, which
// has the set to itself; NCCL allows a communicator to be used from any thread.
unsafe impl Send for Comms {}
// SAFETY: as above.
unsafe impl Sync for Comms {}

impl Drop for Comms {
    fn drop(&mut self) {
        for r in &self.ranks {
            // SAFETY: the handle came from ncclCommInit* and is destroyed only here, once;
            // ncclCommDestroy waits for its queued work.
            let _ = unsafe { (self.lib.api.comm_destroy)(r.comm) };
        }
    }
}

impl std::fmt::Debug for Comms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranks: Vec<String> = self
            .ranks
            .iter()
            .map(|r| format!("rank {} on cuda:{}", r.rank, r.dev.ordinal()))
            .collect();
        write!(
            f,
            "Comms({} of {}: {ranks:?})",
            self.ranks.len(),
            self.world
        )
    }
}

impl Comms {
    /// The communicators of `devs` (distinct devices of this process; rank `i` on
    /// `devs[i]`), made once per device list (`ncclCommInitAll`) and kept for the process.
    pub(crate) fn for_devices(devs: &[&'static CudaDevice]) -> Result<Arc<Comms>> {
        let lib = lib()?;
        let key: Vec<usize> = devs.iter().map(|d| d.ordinal()).collect();
        let mut cache = lock(&super::CUDA.nccl_comms);
        if let Some((_, c)) = cache.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
        let ordinals: Vec<c_int> = key.iter().map(|&o| o as c_int).collect();
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: `comms` has room for one handle per device of `ordinals`.
        let r = unsafe {
            (lib.api.comm_init_all)(
                comms.as_mut_ptr(),
                ordinals.len() as c_int,
                ordinals.as_ptr(),
            )
        };
        lib.check(r, "ncclCommInitAll")?;
        let set = Arc::new(Comms {
            lib,
            ranks: comms
                .into_iter()
                .zip(devs)
                .enumerate()
                .map(|(rank, (comm, &dev))| Rank { comm, dev, rank })
                .collect(),
            world: devs.len(),
            lock: Mutex::new(()),
        });
        cache.push((key, set.clone()));
        Ok(set)
    }

    /// This process's communicator as `rank` of `world` ranks on `dev`, joining the job
    /// whose unique id is `id` (`ncclCommInitRank`: returns once every rank has joined).
    pub(crate) fn for_rank(
        dev: &'static CudaDevice,
        rank: usize,
        world: usize,
        id: &[u8; ID_BYTES],
    ) -> Result<Comms> {
        let lib = lib()?;
        // ncclCommInitRank uses the current device
        dev.ctx
            .bind_to_thread()
            .map_err(super::driver_err("cuCtxSetCurrent"))?;
        let uid = nccl_sys::ncclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: `comm` is a valid place for the handle; the id is passed by value.
        let r = unsafe { (lib.api.comm_init_rank)(&mut comm, world as c_int, uid, rank as c_int) };
        lib.check(r, "ncclCommInitRank")?;
        Ok(Comms {
            lib,
            ranks: vec![Rank { comm, dev, rank }],
            world,
            lock: Mutex::new(()),
        })
    }

    /// The rank of local communicator `local`.
    pub(crate) fn rank(&self, local: usize) -> usize {
        self.ranks[local].rank
    }

    /// A fresh buffer of `len` elements of `dtype` on the calling thread's lane of the
    /// device of local communicator `local` (where that communicator's calls run).
    pub(crate) fn alloc(&self, local: usize, dtype: DType, len: usize) -> Result<CudaBuffer> {
        let dev = self.ranks[local].dev;
        dev.alloc(dev.arc()?, dtype, len)
    }

    /// Runs `f`, which queues calls through [`Calls`], as one NCCL group under the set's
    /// lock, then asks every communicator of the set for asynchronous errors (a failed peer
    /// or network). Returns once the calls are queued. Profiled as one library step `nccl
    /// {what}` of `bytes` bytes on the set's first device of this process.
    pub(crate) fn group<R>(
        &self,
        what: &'static str,
        bytes: u64,
        f: impl FnOnce(&mut Calls<'_>) -> Result<R>,
    ) -> Result<R> {
        let _guard = lock(&self.lock);
        let _range = crate::nvtx::range(c"lazyfuse.nccl");
        let dev = crate::Device::Cuda(self.ranks[0].dev);
        let probe = crate::profile::begin(&dev);
        let api = &self.lib.api;
        // SAFETY: ncclGroupStart has no arguments; it is paired with the ncclGroupEnd below.
        self.lib
            .check(unsafe { (api.group_start)() }, "ncclGroupStart")?;
        let mut calls = Calls { set: self };
        let r = f(&mut calls);
        // SAFETY: ends the group started above (also after an error, as NCCL requires).
        let end = self.lib.check(unsafe { (api.group_end)() }, "ncclGroupEnd");
        let out = r?;
        end?;
        self.check_async()?;
        let detail = format!(
            "{} of {} ranks in this process",
            self.ranks.len(),
            self.world
        );
        crate::profile::library_done(probe, &dev, format!("nccl {what}"), detail, bytes);
        Ok(out)
    }

    /// An error when a communicator of the set reports an asynchronous failure.
    pub(crate) fn check_async(&self) -> Result<()> {
        for r in &self.ranks {
            let mut state: c_int = 0;
            // SAFETY: the handle is live; `state` is a valid place for one result code.
            let q = unsafe { (self.lib.api.comm_get_async_error)(r.comm, &mut state) };
            self.lib.check(q, "ncclCommGetAsyncError")?;
            self.lib.check(state, "NCCL communicator")?;
        }
        Ok(())
    }
}

/// The calls of one NCCL group (see [`Comms::group`]). Each call names the local
/// communicator it runs on and is queued on the calling thread's lane of its device, ordered
/// after the writers of the buffers it reads and the users of the buffers it writes. The
/// counts are in elements of the NCCL type given.
pub(crate) struct Calls<'a> {
    set: &'a Comms,
}

impl Calls<'_> {
    /// The raw stream of `local`'s device that this thread queues on, with `reads` and
    /// `writes` ordered on it.
    fn stream(
        &self,
        local: usize,
        reads: &[&CudaBuffer],
        writes: &[&CudaBuffer],
    ) -> Result<Stream> {
        let r = &self.set.ranks[local];
        for b in reads.iter().chain(writes) {
            if b.device().ordinal() != r.dev.ordinal() {
                return Err(Error::internal(
                    "nccl",
                    format!(
                        "a buffer of cuda:{} for the communicator of cuda:{}",
                        b.device().ordinal(),
                        r.dev.ordinal()
                    ),
                ));
            }
        }
        let lane = r.dev.order(reads, writes)?;
        Ok(lane.stream.cu_stream() as Stream)
    }

    fn api(&self) -> &Api {
        &self.set.lib.api
    }

    fn check(&self, r: Res, op: &'static str) -> Result<()> {
        self.set.lib.check(r, op)
    }

    /// `ncclAllReduce` of `count` values from `send` into `recv`.
    pub(crate) fn all_reduce(
        &mut self,
        local: usize,
        send: &CudaBuffer,
        recv: &CudaBuffer,
        ty: NcclType,
        count: usize,
        op: NcclOp,
    ) -> Result<()> {
        let s = self.stream(local, &[send], &[recv])?;
        let comm = self.set.ranks[local].comm;
        // SAFETY: both buffers are live device memory of the communicator's device holding
        // at least `count` values of `ty` (the caller sized them); the call is queued on the
        // device's stream, before any free of either (stream-ordered, see `order`).
        let r = unsafe {
            (self.api().all_reduce)(
                send.device_ptr() as *const c_void,
                recv.device_ptr() as *mut c_void,
                count,
                ty,
                op,
                comm,
                s,
            )
        };
        self.check(r, "ncclAllReduce")
    }

    /// `ncclAllGather`: `count` values of `send` from every rank into `recv` (`world *
    /// count` values, in rank order).
    pub(crate) fn all_gather(
        &mut self,
        local: usize,
        send: &CudaBuffer,
        recv: &CudaBuffer,
        ty: NcclType,
        count: usize,
    ) -> Result<()> {
        let s = self.stream(local, &[send], &[recv])?;
        let comm = self.set.ranks[local].comm;
        // SAFETY: as in `all_reduce`; `recv` holds `world * count` values.
        let r = unsafe {
            (self.api().all_gather)(
                send.device_ptr() as *const c_void,
                recv.device_ptr() as *mut c_void,
                count,
                ty,
                comm,
                s,
            )
        };
        self.check(r, "ncclAllGather")
    }

    /// `ncclReduceScatter`: the combine of every rank's `send` (`world * count` values),
    /// chunk `rank` of which (`count` values) lands in `recv`.
    pub(crate) fn reduce_scatter(
        &mut self,
        local: usize,
        send: &CudaBuffer,
        recv: &CudaBuffer,
        ty: NcclType,
        count: usize,
        op: NcclOp,
    ) -> Result<()> {
        let s = self.stream(local, &[send], &[recv])?;
        let comm = self.set.ranks[local].comm;
        // SAFETY: as in `all_reduce`; `send` holds `world * count` values.
        let r = unsafe {
            (self.api().reduce_scatter)(
                send.device_ptr() as *const c_void,
                recv.device_ptr() as *mut c_void,
                count,
                ty,
                op,
                comm,
                s,
            )
        };
        self.check(r, "ncclReduceScatter")
    }

    /// `ncclBroadcast` of `count` values from rank `root`'s `send` (given on the root only)
    /// into every rank's `recv`.
    pub(crate) fn broadcast(
        &mut self,
        local: usize,
        send: Option<&CudaBuffer>,
        recv: &CudaBuffer,
        ty: NcclType,
        count: usize,
        root: usize,
    ) -> Result<()> {
        let reads: Vec<&CudaBuffer> = send.into_iter().collect();
        let s = self.stream(local, &reads, &[recv])?;
        let comm = self.set.ranks[local].comm;
        let src = send.map_or(std::ptr::null(), |b| b.device_ptr() as *const c_void);
        // SAFETY: as in `all_reduce`; `send` is read only on the root, where it is given.
        let r = unsafe {
            (self.api().broadcast)(
                src,
                recv.device_ptr() as *mut c_void,
                count,
                ty,
                root as c_int,
                comm,
                s,
            )
        };
        self.check(r, "ncclBroadcast")
    }

    /// `ncclSend` of `count` values of `buf` to rank `peer` (paired with its `recv` in the
    /// same group; `peer` may be this rank).
    pub(crate) fn send(
        &mut self,
        local: usize,
        buf: &CudaBuffer,
        ty: NcclType,
        count: usize,
        peer: usize,
    ) -> Result<()> {
        let s = self.stream(local, &[buf], &[])?;
        let comm = self.set.ranks[local].comm;
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.api().send)(
                buf.device_ptr() as *const c_void,
                count,
                ty,
                peer as c_int,
                comm,
                s,
            )
        };
        self.check(r, "ncclSend")
    }

    /// `ncclRecv` of `count` values from rank `peer` into `buf`.
    pub(crate) fn recv(
        &mut self,
        local: usize,
        buf: &CudaBuffer,
        ty: NcclType,
        count: usize,
        peer: usize,
    ) -> Result<()> {
        let s = self.stream(local, &[], &[buf])?;
        let comm = self.set.ranks[local].comm;
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.api().recv)(
                buf.device_ptr() as *mut c_void,
                count,
                ty,
                peer as c_int,
                comm,
                s,
            )
        };
        self.check(r, "ncclRecv")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let names = vec!["/nonexistent/libnccl.so.2".to_string()];
        let e = load(&names).expect_err("no such file");
        assert!(e.contains("NCCL cannot be loaded"), "{e}");
        assert!(e.contains("/nonexistent/libnccl.so.2"), "{e}");
        assert!(e.contains("LD_LIBRARY_PATH"), "{e}");
    }

    #[test]
    fn version_codes_of_both_eras() {
        assert_eq!(decode_version(22703), (2, 27, 3));
        assert_eq!(decode_version(2804), (2, 8, 4));
    }

    #[test]
    fn the_soname_comes_first() {
        let c = candidates();
        if crate::config::nccl_library().is_none() {
            assert_eq!(c[0], "libnccl.so.2");
            assert!(c.iter().any(|n| n == "libnccl.so"), "{c:?}");
        }
    }
}
