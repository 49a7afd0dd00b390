//! CPU backend: runs fused kernels through the IR interpreter over cache-sized chunks,
//! in parallel across cores, each output element written once.

pub(crate) mod fft;
pub(crate) mod matmul;

pub(crate) mod par;
mod real_lines;
mod transpose;

use crate::{Error, Result};
use lazyfuse_codegen::{interp, HostBuf, Kernel, LaunchArgs, Slice, SliceMut};

/// Elements per parallel work item: big enough to amortize a thread hand-off, small
/// enough that a few chunks per core balance the load.
const CHUNK: usize = 1 << 16;

/// Fewest elements of an elementwise work item when a launch is split to keep every core
/// busy (eight interpreter tiles).
const MIN_CHUNK: usize = 1 << 14;

/// The state of the CPU device, one per process as the host is one device (`Device::Cpu`
/// holds none): its threads, its loops, its recycled buffers and its FFT plans.
pub(crate) struct CpuState {
    /// Pool of `LAZYFUSE_CPU_THREADS` threads; none means rayon's global pool.
    pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
    /// The latest parallel loop, for lingering helpers to join.
    loops: par::Loops,
    /// Large host buffers kept for reuse (`runtime::recycle`).
    pub(crate) kept_buffers: std::sync::Mutex<Vec<HostBuf>>,
    /// rustfft and realfft planners.
    fft: fft::FftPlanners,
    /// Even-length real FFT plans by length and direction.
    real_lines: real_lines::RealLinesCaches,
    /// State the layers above keep for the CPU device.
    pub(crate) attached: super::attached::Attached,
}

/// The CPU device's state.
pub(crate) static CPU: CpuState = CpuState {
    pool: std::sync::OnceLock::new(),
    loops: par::Loops::new(),
    kept_buffers: std::sync::Mutex::new(Vec::new()),
    fft: fft::FftPlanners::new(),
    real_lines: real_lines::RealLinesCaches::new(),
    attached: super::attached::Attached::new(),
};

/// The worker pool CPU kernels run on: rayon's global pool (shared with the rest of the
/// program), or a pool of `LAZYFUSE_CPU_THREADS` threads when that is set. Built once; no
/// launch spawns a thread.
fn pool() -> Option<&'static rayon::ThreadPool> {
    CPU.pool
        .get_or_init(|| {
            let n = crate::config::CONFIG.cpu_threads()?;
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .thread_name(|i| format!("lazyfuse-cpu-{i}"))
                .build()
                .ok()
        })
        .as_ref()
}

/// Runs `f` on the pool CPU kernels run on (rayon's parallel iterators inside it use it).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Starts `f` on a thread of the pool CPU kernels run on, without waiting for it.
pub(crate) fn spawn(f: impl FnOnce() + Send + 'static) {
    match pool() {
        Some(p) => p.spawn(f),
        None => rayon::spawn(f),
    }
}

/// `dst.copy_from_slice(src)`, split over the worker threads when large: a fresh
/// destination's page faults, which bound a single-threaded copy into new memory, are then
/// taken on every core.
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "par_copy of slices of different lengths"
    );
    // SAFETY: two slices of `dst.len()` bytes; `&mut` excludes overlap and other access.
    unsafe { par_copy_raw(dst.as_mut_ptr(), src.as_ptr(), dst.len(), false) }
}

/// Pieces of a parallel copy.
const COPY_PIECE: usize = 256 << 10;

/// Copies `len` bytes from `src` to `dst` as [`par_copy`] does, into memory that may be
/// uninitialized, with streaming (non-temporal) stores when `streaming`. Split over the
/// worker threads from 8 pieces of 256 KiB up. Below, handing the pieces to the pool costs
/// more than it saves: on the H200's host a 1 MiB upload took 120 us split against 68 us
/// direct, while the `bcast` benchmark (16 MB each way in 3.8 MiB chunks) took 1.75 ms
/// with its chunks split against 3.17 ms without.
///
/// # Safety
/// `src` is readable and `dst` writable for `len` bytes, the two do not overlap, and
/// nothing else accesses them during the call.
pub(crate) unsafe fn par_copy_raw(dst: *mut u8, src: *const u8, len: usize, streaming: bool) {
    let piece = |d: *mut u8, s: *const u8, n: usize| {
        if streaming {
            // SAFETY: the caller's contract, for this piece.
            unsafe { stream_copy(d, s, n) }
        } else {
            // SAFETY: the caller's contract, for this piece.
            unsafe { std::ptr::copy_nonoverlapping(s, d, n) }
        }
    };
    if len < 8 * COPY_PIECE || threads() <= 1 {
        piece(dst, src, len);
        return;
    }
    // addresses as integers, so that the closure is Sync
    let (d, s) = (dst as usize, src as usize);
    let _ = par::par_for(len.div_ceil(COPY_PIECE), &|i| {
        let at = i * COPY_PIECE;
        let n = COPY_PIECE.min(len - at);
        // piece `i` is bytes `at..at + n` of both ranges (inside `len`), and no two
        // pieces overlap; the caller's contract covers the rest
        piece((d + at) as *mut u8, (s + at) as *const u8, n);
        Ok(())
    });
}

/// Copies `len` bytes with streaming stores where the CPU has AVX2 (the destination's
/// lines are written to memory, not left dirty in this core's cache).
///
/// # Safety
/// As [`par_copy_raw`].
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked); the caller's contract covers the ranges.
        return unsafe { stream_copy_avx2(dst, src, len) };
    }
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stream_copy_avx2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::*;
    let head = ((32 - (dst as usize & 31)) & 31).min(len);
    // SAFETY (all): offsets stay below `len`, inside both ranges (the caller's contract);
    // stores at `dst + i` are 32-byte aligned after the head.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 128 <= len {
            let a = _mm256_loadu_si256(src.add(i).cast());
            let b = _mm256_loadu_si256(src.add(i + 32).cast());
            let c = _mm256_loadu_si256(src.add(i + 64).cast());
            let e = _mm256_loadu_si256(src.add(i + 96).cast());
            _mm256_stream_si256(dst.add(i).cast(), a);
            _mm256_stream_si256(dst.add(i + 32).cast(), b);
            _mm256_stream_si256(dst.add(i + 64).cast(), c);
            _mm256_stream_si256(dst.add(i + 96).cast(), e);
            i += 128;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        _mm_sfence();
    }
}

/// The name of a kernel the CPU interprets, as profiles and NVTX ranges show it: the entry
/// name of its CUDA rendering with 32-bit indices.
pub(crate) fn kernel_name(kernel: &Kernel) -> String {
    let opts = lazyfuse_codegen::cuda::RenderOptions {
        index32: true,
        scalar: false,
    };
    lazyfuse_codegen::cuda::entry_name(kernel, &opts)
}

/// Worker threads CPU kernels may use.
pub(crate) fn threads() -> usize {
    pool().map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
}

/// Elements `start..start+len` of `h` as a new buffer (large ranges copied by every
/// worker thread, [`par_copy`]).
pub(crate) fn copy_range(h: &HostBuf, start: usize, len: usize) -> HostBuf {
    let size = h.dtype().size();
    if len * size >= 8 << 20 && h.dtype() != lazyfuse_codegen::DType::Bool {
        if let Ok(mut out) = HostBuf::try_zeros(h.dtype(), len) {
            let src = &h.as_bytes()[start * size..(start + len) * size];
            let dst: *mut u8 =
                lazyfuse_codegen::dispatch!(&mut out, HostBuf, v => v.as_mut_ptr().cast::<u8>());
            // SAFETY: `out` holds `len` elements of `size` bytes, plain old data without
            // padding or invalid bit patterns (Bool is excluded), and is not otherwise
            // accessed while `bytes` lives.
            let bytes = unsafe { std::slice::from_raw_parts_mut(dst, len * size) };
            par_copy(bytes, src);
            return out;
        }
    }
    match h {
        HostBuf::Bool(v) => HostBuf::Bool(v[start..start + len].to_vec()),
        HostBuf::I32(v) => HostBuf::I32(v[start..start + len].to_vec()),
        HostBuf::I64(v) => HostBuf::I64(v[start..start + len].to_vec()),
        HostBuf::F32(v) => HostBuf::F32(v[start..start + len].to_vec()),
        HostBuf::F64(v) => HostBuf::F64(v[start..start + len].to_vec()),
        HostBuf::C64(v) => HostBuf::C64(v[start..start + len].to_vec()),
        HostBuf::C128(v) => HostBuf::C128(v[start..start + len].to_vec()),
        HostBuf::U8(v) => HostBuf::U8(v[start..start + len].to_vec()),
        HostBuf::U16(v) => HostBuf::U16(v[start..start + len].to_vec()),
        HostBuf::U32(v) => HostBuf::U32(v[start..start + len].to_vec()),
        HostBuf::U64(v) => HostBuf::U64(v[start..start + len].to_vec()),
        HostBuf::I8(v) => HostBuf::I8(v[start..start + len].to_vec()),
        HostBuf::I16(v) => HostBuf::I16(v[start..start + len].to_vec()),
        HostBuf::F16(v) => HostBuf::F16(v[start..start + len].to_vec()),
        HostBuf::BF16(v) => HostBuf::BF16(v[start..start + len].to_vec()),
    }
}

/// Runs `kernel` over `args.shape`, returning its outputs.
pub(crate) fn run_kernel(
    kernel: &std::sync::Arc<Kernel>,
    inputs: &[&HostBuf],
    args: &LaunchArgs,
) -> Result<smallvec::SmallVec<[HostBuf; 2]>> {
    let n = kernel.out_len(args);
    // outputs per work item: a reduction's output costs a whole row of the body
    let chunk = match (&kernel.reduce, args.shape.get(1)) {
        // a scan's work items are whole rows (each is scanned from its start)
        (Some(red), Some(&r)) if red.layout == lazyfuse_codegen::ReduceLayout::Scan => {
            (CHUNK / r.max(1)).max(1) * r.max(1)
        }
        (Some(_), Some(&r)) => (CHUNK / r.max(1)).max(1),
        // at least four items per thread down to MIN_CHUNK elements each
        _ => {
            let chunk = n.div_ceil(threads() * 4).clamp(MIN_CHUNK, CHUNK);
            // a whole number of chunks per thread (33K elements on two threads: four
            // chunks of 8K, not 16K + 16K + 1K, which leaves one thread the last chunk
            // alone), unless that would halve the chunks (65K elements on 16 threads stay
            // four chunks of 16K, not sixteen of 4K)
            let chunks = n.div_ceil(chunk);
            let balanced = chunks.next_multiple_of(threads());
            if chunks > 1 && balanced <= 2 * chunks {
                n.div_ceil(balanced)
            } else {
                chunk
            }
        }
    };
    // an elementwise kernel stores every element of every output on every tile (the IR
    // checks that each output is stored exactly once), so its outputs need no zeroing
    let alloc = match kernel.reduce {
        None => super::host_output,
        Some(_) => super::host_zeros,
    };
    let mut outs: smallvec::SmallVec<[HostBuf; 2]> = kernel
        .outputs
        .iter()
        .map(|&d| alloc(d, n, "a kernel output"))
        .collect::<Result<_>>()?;
    if n == 0 {
        return Ok(outs);
    }
    let ins: smallvec::SmallVec<[Slice<'_>; 4]> = inputs.iter().map(|h| h.as_slice()).collect();
    if n <= chunk {
        // one work item: run it here, with no chunk lists and no hand-off
        {
            let mut slices: smallvec::SmallVec<[SliceMut<'_>; 4]> =
                outs.iter_mut().map(|o| o.as_slice_mut()).collect();
            // launches this small repeat in loops: their plan is kept per thread
            interp::run_shared(kernel, &ins, &mut slices, args, 0)
                .map_err(|e| Error::internal("cpu kernel", e))?;
        }
        return Ok(outs);
    }
    // Split every output into the same chunks; chunk c of every output goes to one task.
    let mut chunks: Vec<Vec<SliceMut<'_>>> = Vec::new();
    for out in outs.iter_mut() {
        let mut rest = out.as_slice_mut();
        let mut c = 0;
        while !rest.is_empty() {
            let take = rest.len().min(chunk);
            let (head, tail) = rest.split_at(take);
            if chunks.len() <= c {
                chunks.push(Vec::new());
            }
            chunks[c].push(head);
            rest = tail;
            c += 1;
        }
    }
    let nthreads = threads().min(chunks.len());
    // planned once here, not once per chunk
    let planned =
        interp::Planned::new(kernel, &ins, args).map_err(|e| Error::internal("cpu kernel", e))?;
    let run_one = |c: usize, slices: &mut Vec<SliceMut<'_>>| {
        planned
            .run(&ins, slices, args, c * chunk)
            .map_err(|e| Error::internal("cpu kernel", e))
    };
    if nthreads <= 1 {
        for (c, slices) in chunks.iter_mut().enumerate() {
            run_one(c, slices)?;
        }
        return Ok(outs);
    }
    // chunk c of every output is one work item of the loop
    let base = par::Disjoint(chunks.as_mut_ptr());
    let base = &base;
    par::par_for(chunks.len(), &|c| {
        // SAFETY: `c < chunks.len()`, each iteration touches its own entry only, and
        // `chunks` is not otherwise accessed during the loop.
        let slices = unsafe { &mut *base.0.add(c) };
        run_one(c, slices)
    })?;
    drop(chunks);
    Ok(outs)
}

/// The unnormalized FFT `spec` of the values `kernel` (an elementwise kernel of one output,
/// launched with `args` over the transform's input shape `in_shape`) computes, as a buffer
/// of `out_shape`, with the line structure (`fft::run_filled`): the kernel runs on each
/// group of lines of the transform's first pass just before the group is transformed, so
/// its output is never stored whole. The kernel is planned once for all the groups.
pub(crate) fn fft_of_kernel(
    spec: &crate::graph::FftSpec,
    kernel: &std::sync::Arc<Kernel>,
    inputs: &[&HostBuf],
    args: &LaunchArgs,
    in_shape: &[usize],
    out_shape: &[usize],
) -> Result<HostBuf> {
    let err = |e| Error::internal("cpu kernel", e);
    let in_dtype = match kernel.outputs.as_slice() {
        [d] if kernel.reduce.is_none() => *d,
        _ => {
            return Err(Error::internal(
                "fft",
                "a fused producer that is not elementwise with one output",
            ))
        }
    };
    if kernel.out_len(args) != in_shape.iter().product::<usize>() {
        return Err(Error::internal(
            "fft",
            format!("a fused producer not over the transform's input {in_shape:?}"),
        ));
    }
    let ins: smallvec::SmallVec<[Slice<'_>; 4]> = inputs.iter().map(|h| h.as_slice()).collect();
    let total: usize = in_shape.iter().product();
    // planned once for all the groups, on first need: a transform whose input is one
    // group runs the kernel as a plain launch does, through the plan kept per thread
    // (planning a small kernel again each call cost as much as running it: the 32 PSF's
    // first pass took 1.28x the separate kernel and passes until it did so)
    let planned = std::sync::OnceLock::new();
    let fill = |start: usize, out: SliceMut<'_>| -> Result<()> {
        if start == 0 && out.len() == total {
            return interp::run_shared(kernel, &ins, &mut [out], args, 0).map_err(err);
        }
        match planned.get_or_init(|| interp::Planned::new(kernel, &ins, args)) {
            Ok(p) => p.run(&ins, &mut [out], args, start).map_err(err),
            Err(e) => Err(err(e.clone())),
        }
    };
    fft::run_filled(spec, &fill, in_dtype, in_shape, out_shape)
}

/// [`run_kernel`] writing output `out` into `donor` (the buffer of input `slot`, whose entry
/// in `inputs` is `None`): chunk by chunk, the kernel computes into a chunk-sized scratch
/// buffer while reading `donor`, then the chunk is copied into `donor`. Sound because the
/// kernel reads input `slot` only at the index it writes (the caller's guarantee), so no
/// later chunk reads an element an earlier chunk replaced. Output `out`'s entry of the
/// result is `None`; the other outputs are fresh.
pub(crate) fn run_kernel_reuse(
    kernel: &Kernel,
    inputs: &[Option<&HostBuf>],
    args: &LaunchArgs,
    slot: usize,
    out: usize,
    donor: &mut HostBuf,
) -> Result<Vec<Option<HostBuf>>> {
    let n = args.len();
    if donor.len() != n || kernel.outputs.get(out) != Some(&donor.dtype()) {
        return Err(Error::internal(
            "cpu kernel",
            format!("input {slot} cannot hold output {out} of {n} elements"),
        ));
    }
    let mut outs: Vec<Option<HostBuf>> = kernel
        .outputs
        .iter()
        .enumerate()
        .map(|(j, &d)| {
            (j != out)
                .then(|| super::host_zeros(d, n, "a kernel output"))
                .transpose()
        })
        .collect::<Result<_>>()?;
    let mut scratch = HostBuf::zeros(donor.dtype(), n.min(CHUNK));
    let planned = {
        let ins: Vec<Slice<'_>> = inputs
            .iter()
            .map(|b| b.map_or_else(|| donor.as_slice(), |b| b.as_slice()))
            .collect();
        // the plan reads no element of the donor that a chunk replaces: values folded
        // from input data come from loads at one index for the whole launch, which the
        // caller's guarantee (input `slot` read only at the index written) rules out for
        // the donor unless the launch has a single element, computed before any copy
        interp::Planned::new(kernel, &ins, args).map_err(|e| Error::internal("cpu kernel", e))?
    };
    let mut start = 0;
    while start < n {
        let len = (n - start).min(CHUNK);
        {
            let ins: Vec<Slice<'_>> = inputs
                .iter()
                .enumerate()
                .map(|(i, b)| match b {
                    Some(b) => Ok(b.as_slice()),
                    None if i == slot => Ok(donor.as_slice()),
                    None => Err(Error::internal("cpu kernel", "missing input")),
                })
                .collect::<Result<_>>()?;
            let mut slices: Vec<SliceMut<'_>> = Vec::with_capacity(outs.len());
            let mut tile = Some(scratch.as_slice_mut());
            for o in outs.iter_mut() {
                let s = match o {
                    Some(buf) => sub_mut(buf.as_slice_mut(), start, len),
                    None => sub_mut(
                        tile.take()
                            .ok_or_else(|| Error::internal("cpu kernel", "two reused outputs"))?,
                        0,
                        len,
                    ),
                };
                slices.push(s);
            }
            planned
                .run(&ins, &mut slices, args, start)
                .map_err(|e| Error::internal("cpu kernel", e))?;
        }
        copy_chunk(donor, start, &scratch, len);
        start += len;
    }
    Ok(outs)
}

/// Elements `start..start + len` of a writable view.
fn sub_mut(s: SliceMut<'_>, start: usize, len: usize) -> SliceMut<'_> {
    let (_, rest) = s.split_at(start);
    rest.split_at(len).0
}

/// `dst[start..start + len] = src[..len]` (same dtype).
fn copy_chunk(dst: &mut HostBuf, start: usize, src: &HostBuf, len: usize) {
    macro_rules! copy {
        ($($v:ident),*) => {
            match (dst, src) {
                $((HostBuf::$v(d), HostBuf::$v(s)) => d[start..start + len].copy_from_slice(&s[..len]),)*
                _ => unreachable!("scratch has the donor's dtype"),
            }
        };
    }
    copy!(Bool, I32, I64, F32, F64, C64, C128, U8, U16, U32, U64, I8, I16, F16, BF16)
}

#[cfg(test)]
mod tests {
    use super::par_copy_raw;

    /// Copies of every alignment and a length around the vector width, the piece size and
    /// the parallel threshold, with and without streaming stores, against `copy_from_slice`.
    #[test]
    fn parallel_and_streaming_copies_match_a_plain_copy() {
        let n = (2 << 20) + 4096 + 200;
        let src: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
        let lens = [
            0,
            1,
            31,
            32,
            127,
            128,
            129,
            4095,
            (256 << 10) + 3,
            (2 << 20) + 77,
        ];
        for streaming in [false, true] {
            for &len in &lens {
                for (so, dof) in [(0, 0), (1, 0), (0, 5), (3, 31), (17, 64)] {
                    let mut dst = vec![0xAAu8; len + 100];
                    // SAFETY: both ranges hold `len` bytes (`so + len <= n`,
                    // `dof + len <= dst.len()`) and do not overlap.
                    unsafe {
                        par_copy_raw(
                            dst.as_mut_ptr().add(dof),
                            src.as_ptr().add(so),
                            len,
                            streaming,
                        )
                    };
                    assert_eq!(
                        &dst[dof..dof + len],
                        &src[so..so + len],
                        "len {len}, offsets {so}/{dof}"
                    );
                    assert!(
                        dst[..dof]
                            .iter()
                            .chain(&dst[dof + len..])
                            .all(|&b| b == 0xAA),
                        "wrote outside, len {len}"
                    );
                }
            }
        }
    }
}
