#!/usr/bin/env python3
"""Where a large readback's time goes on this host: first touch of fresh host pages,
prefaulting with madvise, copies from pinned staging, and PyTorch's device-to-host copies
into fresh pageable, pre-touched pageable and pinned memory, for the same sizes.

    python3 benches/readback_probe.py [MiB ...]     (default: 1 64)

Prints one line per measurement: name, MiB, median microseconds, GB/s (10 runs).
"""
import ctypes
import mmap
import statistics
import sys
import time

import numpy as np

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23


def timed(f, runs=10):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def row(name, mib, s):
    gbs = mib * 1048576 / s / 1e9
    print(f"{name:44s} {mib:5d} MiB {s * 1e6:10.1f} us {gbs:7.2f} GB/s", flush=True)


def madv(a, advice):
    """madvise over the whole pages of numpy array `a`; returns 0 or errno."""
    addr = a.ctypes.data
    start = addr & ~(mmap.PAGESIZE - 1)
    rc = LIBC.madvise(start, addr + a.nbytes - start, advice)
    return 0 if rc == 0 else ctypes.get_errno()


def host(mib):
    n = mib * 1048576
    src = np.ones(n, np.uint8)
    row("first touch (fresh np.empty, fill)", mib, timed(lambda: np.empty(n, np.uint8).fill(1)))
    touched = np.empty(n, np.uint8)
    touched.fill(0)
    row("fill of touched memory", mib, timed(lambda: touched.fill(1)))
    row("copy into touched memory", mib, timed(lambda: np.copyto(touched, src)))
    row("copy into fresh memory", mib, timed(lambda: np.copyto(np.empty(n, np.uint8), src)))
    errs = {}

    def populate(advice):
        a = np.empty(n, np.uint8)
        e = madv(a, advice)
        if e:
            errs[advice] = e
        np.copyto(a, src)

    row("madvise(POPULATE_WRITE) + copy, fresh", mib, timed(lambda: populate(MADV_POPULATE_WRITE)))
    row("madvise(HUGEPAGE) + copy, fresh", mib, timed(lambda: populate(MADV_HUGEPAGE)))
    if errs:
        print(f"madvise errors (advice: errno): {errs}", flush=True)

    def mapped(flags):
        m = mmap.mmap(-1, n, flags=flags)
        a = np.frombuffer(m, np.uint8)
        np.copyto(a, src)
        del a
        m.close()

    row("mmap(PRIVATE|ANON) + copy", mib, timed(lambda: mapped(mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)))
    if hasattr(mmap, "MAP_POPULATE"):
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
        row("mmap(PRIVATE|ANON|POPULATE) + copy", mib, timed(lambda: mapped(flags)))


def torch_rows(mib):
    try:
        import torch
    except ImportError:
        print("torch not importable", flush=True)
        return
    if not torch.cuda.is_available():
        print("torch: no CUDA", flush=True)
        return
    n = mib * 1048576
    g = torch.ones(n, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(n, dtype=torch.uint8)
    pageable.fill_(0)

    def into(dst):
        dst.copy_(g)
        torch.cuda.synchronize()

    def fresh():
        g.cpu()
        torch.cuda.synchronize()

    def up(src):
        g.copy_(src)
        torch.cuda.synchronize()

    pinned.fill_(1)
    row("torch h2d from pinned", mib, timed(lambda: up(pinned)))
    row("torch h2d from touched pageable", mib, timed(lambda: up(pageable)))
    row("torch d2h into pinned", mib, timed(lambda: into(pinned)))
    row("torch d2h into touched pageable", mib, timed(lambda: into(pageable)))
    row("torch d2h into fresh pageable (g.cpu())", mib, timed(fresh))
    row("torch fresh torch.empty + fill_ (threads)", mib,
        timed(lambda: torch.empty(n, dtype=torch.uint8).fill_(1)))
    print(f"torch threads: {torch.get_num_threads()}", flush=True)


def register_rows(mib):
    """Device-to-host copies straight into host memory pinned for the copy (cuMemHostRegister),
    through CuPy's runtime bindings, registration and unregistration included."""
    try:
        import cupy
    except ImportError:
        print("cupy not importable", flush=True)
        return
    rt = cupy.cuda.runtime
    n = mib * 1048576
    g = cupy.ones(n, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()

    def registered(a):
        ptr = a.ctypes.data
        rt.hostRegister(ptr, n, 0)
        rt.memcpy(ptr, g.data.ptr, n, rt.memcpyDeviceToHost)
        rt.hostUnregister(ptr)

    def fresh_hugepage():
        a = np.empty(n, np.uint8)
        madv(a, MADV_HUGEPAGE)
        registered(a)

    touched = np.zeros(n, np.uint8)
    row("register + d2h + unregister, touched", mib, timed(lambda: registered(touched)))
    row("register + d2h + unregister, fresh", mib, timed(lambda: registered(np.empty(n, np.uint8))))
    row("madvise(HUGEPAGE) + register + d2h, fresh", mib, timed(fresh_hugepage))
    rt.hostRegister(touched.ctypes.data, n, 0)
    row("d2h into registered memory", mib,
        timed(lambda: rt.memcpy(touched.ctypes.data, g.data.ptr, n, rt.memcpyDeviceToHost)))
    rt.hostUnregister(touched.ctypes.data)


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1, 64]
    for path in ("enabled", "defrag"):
        try:
            with open(f"/sys/kernel/mm/transparent_hugepage/{path}") as f:
                print(f"transparent_hugepage/{path}: {f.read().strip()}", flush=True)
        except OSError as e:
            print(f"transparent_hugepage/{path}: {e}", flush=True)
    for mib in sizes:
        host(mib)
        torch_rows(mib)
        register_rows(mib)


if __name__ == "__main__":
    main()
