//! The NCCL backend of the collective layer: all-reduce, all-gather, reduce-scatter,
//! broadcast and all-to-all as NCCL calls queued on the devices' streams.
//!
//! Two kinds of mesh use it. A mesh of distinct GPUs of this process has one communicator
//! per device (`ncclCommInitAll`, made at the first collective and kept for the process):
//! block `i` is rank `i`, and one thread queues every device's calls in one NCCL group.
//! Point-to-point moves (the halo exchanges of rolls, pads and ranges; gathers to one
//! device) stay lazy peer copies there, which fuse with their neighbours. A mesh spanning
//! processes ([`Mesh::global`](super::Mesh::global)) has this process's rank of the job's
//! communicator: block `r` is rank `r`'s, and every move with an end in this process is an
//! NCCL send or receive; the blocks of other processes are stand-ins of the right shape
//! and dtype (lazy zeros, or the replicated result) that are never evaluated.
//!
//! A collective evaluates its inputs when it is built (one plan), allocates its outputs
//! on the calling thread's stream of each device, and queues the NCCL calls after events
//! of the inputs' writers; it returns evaluated arrays without waiting on the host.
//!
//! Reductions go through `ncclAllReduce` / `ncclReduceScatter` where NCCL computes what
//! NumPy does: sums and products of integers and reals (complex sums as pairs of reals),
//! maxima and minima of integers. Maxima and minima of floats (NCCL's drop NaN, NumPy's
//! propagate it), booleans, 16-bit integers and complex products are an all-gather of the
//! partial results followed by the fold in block order on every device, which is
//! bit-identical everywhere. Across several ranks NCCL's reduction order is its own, so a
//! float sum may differ from the host-staged backend's in the last bits (every rank gets
//! the same bits).

use super::collective::{lazy_gather, scatter_blocks, Collectives, Move, ReduceOp};
use crate::graph::{Node, Shape};
use crate::runtime::cuda::nccl::{self, Comms, NcclOp, NcclType};
use crate::runtime::cuda::{CudaBuffer, CudaDevice};
use crate::runtime::Buffer;
use crate::{Array, DType, Device, Error, Result};
use std::sync::Arc;

/// Where a mesh's communicators come from.
enum Source {
    /// Distinct GPUs of this process, block `i` on `devs[i]`: the process's communicator
    /// set for that device list.
    Devices(Vec<&'static CudaDevice>),
    /// This process's rank of a job (`lf::distributed::Group`): block `rank` is here.
    Job { comms: Arc<Comms>, rank: usize },
}

/// Collectives through NCCL (see the module docs).
pub(crate) struct Nccl {
    source: Source,
}

/// The CUDA devices of `devices` when every one is a distinct GPU, else why NCCL cannot
/// serve them.
fn distinct_gpus(devices: &[Device]) -> std::result::Result<Vec<&'static CudaDevice>, String> {
    let mut out: Vec<&'static CudaDevice> = Vec::new();
    for d in devices {
        match d {
            Device::Cuda(c) if out.iter().any(|o| o.ordinal() == c.ordinal()) => {
                return Err(format!(
                    "{d} is listed twice; NCCL takes one rank per GPU (the host-staged \
                     backend serves meshes that repeat a device)"
                ))
            }
            Device::Cuda(c) => out.push(c),
            Device::Cpu => {
                return Err("NCCL runs on CUDA devices only; the mesh lists the cpu".into())
            }
        }
    }
    Ok(out)
}

impl Nccl {
    /// The backend for a mesh of `devices` in this process: an error unless they are
    /// distinct GPUs and NCCL can be loaded. Communicators are made at the first collective.
    pub(crate) fn for_devices(devices: &[Device]) -> Result<Nccl> {
        let devs = distinct_gpus(devices).map_err(|msg| Error::Unsupported {
            op: "Mesh (nccl)",
            msg,
        })?;
        nccl::lib()?;
        Ok(Nccl {
            source: Source::Devices(devs),
        })
    }

    /// Whether a mesh of `devices` would get this backend by default: distinct GPUs, and
    /// NCCL loads.
    pub(crate) fn suits(devices: &[Device]) -> bool {
        distinct_gpus(devices).is_ok() && nccl::lib().is_ok()
    }

    /// The backend of a mesh spanning a job's processes, this one holding `comms`' rank.
    pub(crate) fn for_job(comms: Arc<Comms>) -> Nccl {
        let rank = comms.rank(0);
        Nccl {
            source: Source::Job { comms, rank },
        }
    }

    fn comms(&self) -> Result<Arc<Comms>> {
        match &self.source {
            Source::Devices(devs) => Comms::for_devices(devs),
            Source::Job { comms, .. } => Ok(comms.clone()),
        }
    }

    /// The blocks of this process with their local communicator index.
    fn locals(&self, k: usize) -> Vec<(usize, usize)> {
        match &self.source {
            Source::Devices(_) => (0..k).map(|b| (b, b)).collect(),
            Source::Job { rank, .. } => vec![(*rank, 0)],
        }
    }

    /// The local communicator of block `b`, if it is in this process.
    fn local_of(&self, b: usize) -> Option<usize> {
        match &self.source {
            Source::Devices(_) => Some(b),
            Source::Job { rank, .. } => (*rank == b).then_some(0),
        }
    }

    fn spans_processes(&self) -> bool {
        matches!(self.source, Source::Job { .. })
    }

    /// Fresh outputs of `len` elements of `dtype`, one per local block.
    fn alloc(
        &self,
        comms: &Comms,
        locals: &[(usize, usize)],
        dtype: DType,
        len: usize,
    ) -> Result<Vec<CudaBuffer>> {
        locals
            .iter()
            .map(|&(_, l)| comms.alloc(l, dtype, len))
            .collect()
    }

    /// Every block's entry of a replicated result: the local results where they are, a
    /// local result for the blocks of other processes (the values are the same everywhere).
    fn replicated(&self, locals: &[(usize, usize)], outs: Vec<Array>, k: usize) -> Vec<Array> {
        let mut all: Vec<Option<Array>> = vec![None; k];
        for (&(b, _), a) in locals.iter().zip(&outs) {
            all[b] = Some(a.clone());
        }
        all.into_iter()
            .map(|a| a.unwrap_or_else(|| outs[0].clone()))
            .collect()
    }

    /// Every block's entry of a split result: the local results where they are, lazy zeros
    /// of `shape(b)` (never evaluated) for the blocks of other processes.
    fn split(
        &self,
        locals: &[(usize, usize)],
        outs: Vec<Array>,
        devices: &[Device],
        dtype: DType,
        shape: impl Fn(usize) -> Vec<usize>,
    ) -> Vec<Array> {
        let mut all: Vec<Option<Array>> = vec![None; devices.len()];
        for (&(b, _), a) in locals.iter().zip(outs) {
            all[b] = Some(a);
        }
        all.into_iter()
            .enumerate()
            .map(|(b, a)| a.unwrap_or_else(|| stand_in(&shape(b), dtype, &devices[b])))
            .collect()
    }

    /// Point-to-point moves as NCCL sends and receives in one group (a move within one
    /// rank too: NCCL copies it); entry `t` is what `moves[t]` delivered, a stand-in where
    /// neither end is in this process.
    fn p2p(&self, moves: &[Move], devices: &[Device]) -> Result<Vec<Array>> {
        let comms = self.comms()?;
        let sending: Vec<Array> = moves
            .iter()
            .filter(|m| m.array.size() > 0 && self.local_of(m.src).is_some())
            .map(|m| m.array.clone())
            .collect();
        let send_bufs = evaluated(&sending)?;
        let mut send_iter = send_bufs.iter();
        // (local of the sender, buffer, peer) and (local of the receiver, buffer, peer)
        let mut sends: Vec<(usize, &CudaBuffer, usize, usize)> = Vec::new();
        let mut recvs: Vec<(usize, usize, Option<CudaBuffer>)> = Vec::new();
        for m in moves {
            let (n, dtype) = (m.array.size(), m.array.dtype());
            let bytes = n * dtype.size();
            if n > 0 {
                if let Some(l) = self.local_of(m.src) {
                    let b = send_iter
                        .next()
                        .ok_or_else(|| Error::internal("nccl p2p", "send buffers out of step"))?;
                    sends.push((l, cuda_of(b)?, bytes, m.dst));
                }
            }
            let recv = match self.local_of(m.dst) {
                Some(l) if n > 0 => Some(comms.alloc(l, dtype, n)?),
                _ => None,
            };
            recvs.push((self.local_of(m.dst).unwrap_or(0), m.src, recv));
        }
        // issued in move order on both ends, so that NCCL pairs each send with its receive
        let moved: usize = sends.iter().map(|s| s.2).sum();
        comms.group("send/recv", moved as u64, |c| {
            let mut s = sends.iter();
            for (m, (rl, src, recv)) in moves.iter().zip(&recvs) {
                if m.array.size() > 0 && self.local_of(m.src).is_some() {
                    let &(l, buf, bytes, dst) = s
                        .next()
                        .ok_or_else(|| Error::internal("nccl p2p", "sends out of step"))?;
                    c.send(l, buf, NcclType::ncclUint8, bytes, dst)?;
                }
                if let Some(r) = recv {
                    let bytes = m.array.size() * m.array.dtype().size();
                    c.recv(*rl, r, NcclType::ncclUint8, bytes, *src)?;
                }
            }
            Ok(())
        })?;
        Ok(moves
            .iter()
            .zip(recvs)
            .map(|(m, (_, _, recv))| {
                let dev = &devices[m.dst];
                match recv {
                    Some(buf) => leaf(buf, m.array.shape(), dev),
                    None if self.local_of(m.src).is_some() && self.local_of(m.dst).is_some() => {
                        // an empty move within this process
                        m.array.to_device(dev)
                    }
                    None => stand_in(m.array.shape(), m.array.dtype(), dev),
                }
            })
            .collect())
    }

    /// An all-reduce as an all-gather of the taking parts and a fold in block order on
    /// every device (for the combines NCCL does not compute as NumPy does).
    fn fold(
        &self,
        parts: &[Option<Array>],
        op: ReduceOp,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        let k = devices.len();
        let moves: Vec<Move> = parts
            .iter()
            .enumerate()
            .filter_map(|(j, p)| p.as_ref().map(|p| (j, p)))
            .flat_map(|(j, p)| {
                (0..k).map(move |i| Move {
                    src: j,
                    dst: i,
                    array: p.clone(),
                })
            })
            .collect();
        let got = self.exchange(&moves, devices)?;
        let locals = self.locals(k);
        let outs: Vec<Array> = locals
            .iter()
            .map(|&(b, _)| {
                let mut mine = moves.iter().zip(&got).filter(|(m, _)| m.dst == b);
                let (_, first) = mine
                    .next()
                    .ok_or_else(|| Error::internal("all_reduce", "no block takes part"))?;
                Ok(mine.fold(first.clone(), |acc, (_, a)| op.combine(&acc, a)))
            })
            .collect::<Result<_>>()?;
        Ok(self.replicated(&locals, outs, k))
    }
}

/// NCCL's type and the values per element for reducing `dtype` with `op` as NumPy does, if
/// NCCL can.
fn reduce_type(dtype: DType, op: ReduceOp) -> Option<(NcclType, usize)> {
    use NcclType::*;
    let int = match dtype {
        DType::I8 => Some(ncclInt8),
        DType::U8 => Some(ncclUint8),
        DType::I32 => Some(ncclInt32),
        DType::U32 => Some(ncclUint32),
        DType::I64 => Some(ncclInt64),
        DType::U64 => Some(ncclUint64),
        _ => None,
    };
    let real = match dtype {
        DType::F16 => Some(ncclFloat16),
        DType::BF16 => Some(ncclBfloat16),
        DType::F32 => Some(ncclFloat32),
        DType::F64 => Some(ncclFloat64),
        _ => None,
    };
    match op {
        ReduceOp::Sum | ReduceOp::Prod if int.is_some() || real.is_some() => {
            int.or(real).map(|t| (t, 1))
        }
        ReduceOp::Sum => match dtype {
            DType::C64 => Some((ncclFloat32, 2)),
            DType::C128 => Some((ncclFloat64, 2)),
            _ => None,
        },
        ReduceOp::Max | ReduceOp::Min => int.map(|t| (t, 1)),
        ReduceOp::Prod => None,
    }
}

fn nccl_op(op: ReduceOp) -> NcclOp {
    match op {
        ReduceOp::Sum => NcclOp::ncclSum,
        ReduceOp::Prod => NcclOp::ncclProd,
        ReduceOp::Max => NcclOp::ncclMax,
        ReduceOp::Min => NcclOp::ncclMin,
    }
}

/// What a block that takes no part in a sum or product contributes.
fn identity(op: ReduceOp, shape: &[usize], dtype: DType, dev: &Device) -> Array {
    match op {
        ReduceOp::Prod => Array::ones_on(shape, dtype, dev),
        _ => Array::zeros_on(shape, dtype, dev),
    }
}

/// The entry of a block of another process: lazy zeros, never evaluated.
fn stand_in(shape: &[usize], dtype: DType, dev: &Device) -> Array {
    Array::zeros_on(shape, dtype, dev)
}

/// The buffers of `arrays`, evaluated in one plan (an array listed twice, as a part sent
/// to every block, is one root).
fn evaluated(arrays: &[Array]) -> Result<Vec<Arc<Buffer>>> {
    let mut refs: Vec<&Array> = Vec::with_capacity(arrays.len());
    for a in arrays {
        if !refs.iter().any(|r| Arc::ptr_eq(&r.node, &a.node)) {
            refs.push(a);
        }
    }
    crate::eval(&refs)?;
    arrays.iter().map(|a| a.buffer()).collect()
}

fn cuda_of(b: &Buffer) -> Result<&CudaBuffer> {
    match b {
        Buffer::Cuda(c) => Ok(c),
        Buffer::Host(_) => Err(Error::internal("nccl", "a host buffer on a GPU mesh")),
    }
}

/// An evaluated array of `shape` holding `buf`.
fn leaf(buf: CudaBuffer, shape: &[usize], dev: &Device) -> Array {
    Array::from_node(Node::leaf(
        Buffer::Cuda(buf),
        Shape::from_slice(shape),
        dev.clone(),
    ))
}

/// The permutation moving `axis` to the front, and its inverse.
fn to_front(axis: usize, ndim: usize) -> (Vec<usize>, Vec<usize>) {
    let perm: Vec<usize> = std::iter::once(axis)
        .chain((0..ndim).filter(|&k| k != axis))
        .collect();
    let mut inv = vec![0; ndim];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    (perm, inv)
}

impl Collectives for Nccl {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn local_block(&self) -> Option<usize> {
        match &self.source {
            Source::Devices(_) => None,
            Source::Job { rank, .. } => Some(*rank),
        }
    }

    fn gather(&self, parts: &[Array], axis: usize, dst: &Device) -> Result<Array> {
        if !self.spans_processes() {
            return Ok(lazy_gather(parts, axis, dst));
        }
        // across processes the whole array comes to every rank
        let devices = vec![dst.clone(); parts.len()];
        let rank = self.local_block().unwrap_or(0);
        Ok(self.all_gather(parts, axis, &devices)?.swap_remove(rank))
    }

    fn broadcast(&self, a: &Array, devices: &[Device]) -> Result<Vec<Array>> {
        let (k, n, dtype) = (devices.len(), a.size(), a.dtype());
        if n == 0 {
            return Ok(devices.iter().map(|d| a.to_device(d)).collect());
        }
        let comms = self.comms()?;
        let locals = self.locals(k);
        let root = match self.local_of(0) {
            Some(_) => evaluated(&[a.to_device(&devices[0])])?.pop(),
            None => None,
        };
        let outs = self.alloc(&comms, &locals, dtype, n)?;
        let bytes = n * dtype.size();
        comms.group("broadcast", (bytes * locals.len()) as u64, |c| {
            for (&(b, l), out) in locals.iter().zip(&outs) {
                let send = match (&root, b) {
                    (Some(r), 0) => Some(cuda_of(r)?),
                    _ => None,
                };
                c.broadcast(l, send, out, NcclType::ncclUint8, bytes, 0)?;
            }
            Ok(())
        })?;
        let outs: Vec<Array> = locals
            .iter()
            .zip(outs)
            .map(|(&(b, _), o)| leaf(o, a.shape(), &devices[b]))
            .collect();
        Ok(self.replicated(&locals, outs, k))
    }

    fn all_reduce(
        &self,
        parts: &[Option<Array>],
        op: ReduceOp,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        let k = devices.len();
        let like = first_part(parts, "all_reduce")?;
        let (shape, dtype, n) = (like.shape().to_vec(), like.dtype(), like.size());
        let Some((ty, per)) = reduce_type(dtype, op).filter(|_| n > 0) else {
            return self.fold(parts, op, devices);
        };
        let comms = self.comms()?;
        let locals = self.locals(k);
        let inputs: Vec<Array> = locals
            .iter()
            .map(|&(b, _)| match &parts[b] {
                Some(p) => p.to_device(&devices[b]),
                None => identity(op, &shape, dtype, &devices[b]),
            })
            .collect();
        let bufs = evaluated(&inputs)?;
        let outs = self.alloc(&comms, &locals, dtype, n)?;
        let bytes = (2 * n * dtype.size() * locals.len()) as u64;
        comms.group("all_reduce", bytes, |c| {
            for ((&(_, l), b), out) in locals.iter().zip(&bufs).zip(&outs) {
                c.all_reduce(l, cuda_of(b)?, out, ty, n * per, nccl_op(op))?;
            }
            Ok(())
        })?;
        let outs: Vec<Array> = locals
            .iter()
            .zip(outs)
            .map(|(&(b, _), o)| leaf(o, &shape, &devices[b]))
            .collect();
        Ok(self.replicated(&locals, outs, k))
    }

    fn all_gather(&self, parts: &[Array], axis: usize, devices: &[Device]) -> Result<Vec<Array>> {
        let k = devices.len();
        let block = parts[0].shape().to_vec();
        let (dtype, n) = (parts[0].dtype(), parts[0].size());
        let even = parts.iter().all(|p| p.shape() == block.as_slice());
        if !even || n == 0 {
            // blocks of different lengths: every block to every device, joined there
            let moves: Vec<Move> = (0..k)
                .flat_map(|j| {
                    (0..k).map(move |i| Move {
                        src: j,
                        dst: i,
                        array: parts[j].clone(),
                    })
                })
                .collect();
            let got = self.exchange(&moves, devices)?;
            let locals = self.locals(k);
            let outs: Vec<Array> = locals
                .iter()
                .map(|&(b, _)| {
                    let mine: Vec<&Array> = moves
                        .iter()
                        .zip(&got)
                        .filter(|(m, _)| m.dst == b)
                        .map(|(_, a)| a)
                        .collect();
                    crate::concatenate(&mine, axis as isize)
                })
                .collect();
            return Ok(self.replicated(&locals, outs, k));
        }
        let comms = self.comms()?;
        let locals = self.locals(k);
        let (perm, inv) = to_front(axis, block.len());
        let inputs: Vec<Array> = locals
            .iter()
            .map(|&(b, _)| parts[b].permute(&perm))
            .collect();
        let bufs = evaluated(&inputs)?;
        let outs = self.alloc(&comms, &locals, dtype, k * n)?;
        let bytes = n * dtype.size();
        let moved = ((k + 1) * bytes * locals.len()) as u64;
        comms.group("all_gather", moved, |c| {
            for ((&(_, l), b), out) in locals.iter().zip(&bufs).zip(&outs) {
                c.all_gather(l, cuda_of(b)?, out, NcclType::ncclUint8, bytes)?;
            }
            Ok(())
        })?;
        // the gathered buffer joins the blocks along the front axis of the permuted layout
        let mut front: Vec<usize> = perm.iter().map(|&p| block[p]).collect();
        front[0] *= k;
        let outs: Vec<Array> = locals
            .iter()
            .zip(outs)
            .map(|(&(b, _), o)| leaf(o, &front, &devices[b]).permute(&inv))
            .collect();
        Ok(self.replicated(&locals, outs, k))
    }

    fn reduce_scatter(
        &self,
        parts: &[Option<Array>],
        op: ReduceOp,
        axis: usize,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        let k = devices.len();
        let like = first_part(parts, "reduce_scatter")?;
        let (shape, dtype, n) = (like.shape().to_vec(), like.dtype(), like.size());
        let nccl = reduce_type(dtype, op).filter(|_| n > 0 && shape[axis] % k == 0);
        let Some((ty, per)) = nccl else {
            let full = self.all_reduce(parts, op, devices)?;
            return Ok(scatter_blocks(&full, axis));
        };
        let comms = self.comms()?;
        let locals = self.locals(k);
        let (perm, inv) = to_front(axis, shape.len());
        let inputs: Vec<Array> = locals
            .iter()
            .map(|&(b, _)| {
                let p = match &parts[b] {
                    Some(p) => p.to_device(&devices[b]),
                    None => identity(op, &shape, dtype, &devices[b]),
                };
                p.permute(&perm)
            })
            .collect();
        let bufs = evaluated(&inputs)?;
        let chunk = n / k;
        let outs = self.alloc(&comms, &locals, dtype, chunk)?;
        let moved = ((n + chunk) * dtype.size() * locals.len()) as u64;
        comms.group("reduce_scatter", moved, |c| {
            for ((&(_, l), b), out) in locals.iter().zip(&bufs).zip(&outs) {
                c.reduce_scatter(l, cuda_of(b)?, out, ty, chunk * per, nccl_op(op))?;
            }
            Ok(())
        })?;
        let mut front: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        front[0] /= k;
        let outs: Vec<Array> = locals
            .iter()
            .zip(outs)
            .map(|(&(b, _), o)| leaf(o, &front, &devices[b]).permute(&inv))
            .collect();
        let mut block = shape.clone();
        block[axis] /= k;
        Ok(self.split(&locals, outs, devices, dtype, |_| block.clone()))
    }

    fn all_to_all(
        &self,
        pieces: &[Vec<Array>],
        axis: usize,
        devices: &[Device],
    ) -> Result<Vec<Array>> {
        let k = devices.len();
        let moves: Vec<Move> = pieces
            .iter()
            .enumerate()
            .flat_map(|(src, row)| {
                row.iter().enumerate().map(move |(dst, a)| Move {
                    src,
                    dst,
                    array: a.clone(),
                })
            })
            .collect();
        let got = self.p2p(&moves, devices)?;
        let locals = self.locals(k);
        let outs: Vec<Array> = locals
            .iter()
            .map(|&(b, _)| {
                let mine: Vec<&Array> = moves
                    .iter()
                    .zip(&got)
                    .filter(|(m, _)| m.dst == b)
                    .map(|(_, a)| a)
                    .collect();
                crate::concatenate(&mine, axis as isize)
            })
            .collect();
        let dtype = pieces[0][0].dtype();
        Ok(self.split(&locals, outs, devices, dtype, |dst| {
            let mut s = pieces[0][dst].shape().to_vec();
            s[axis] = pieces.iter().map(|row| row[dst].shape()[axis]).sum();
            s
        }))
    }

    fn exchange(&self, moves: &[Move], devices: &[Device]) -> Result<Vec<Array>> {
        if self.spans_processes() {
            return self.p2p(moves, devices);
        }
        // within one process: lazy peer copies
        Ok(moves
            .iter()
            .map(|m| m.array.to_device(&devices[m.dst]))
            .collect())
    }
}

/// The first part some block holds (all have one shape and dtype): an internal error when
/// no block takes part.
fn first_part<'a>(parts: &'a [Option<Array>], op: &'static str) -> Result<&'a Array> {
    parts
        .iter()
        .flatten()
        .next()
        .ok_or_else(|| Error::internal(op, "no block takes part"))
}
