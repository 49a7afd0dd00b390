#!/usr/bin/env python3
"""Anchors for the `update` and `cumsum` rows of benches/workloads.rs: PyTorch and CuPy on
the same GPU, timed as the workloads bench times lazyfuse (a fresh result per call, the
device synchronized before each clock read, median of repeats). Prints TSV rows
`workload size system time_us extra`."""

import time


def bench(f, sync, iters=20, repeats=7):
    for _ in range(3):
        f()
    sync()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(iters):
            f()
        sync()
        ts.append((time.perf_counter() - t) / iters)
    ts.sort()
    return ts[len(ts) // 2]


def row(w, size, system, sec, extra=""):
    print(f"{w}\t{size}\t{system}\t{sec * 1e6:.1f} us\t{extra}", flush=True)


side, n = 4096, 1 << 26
try:
    import torch

    u = torch.randn(side, side, device="cuda")

    def upd():
        v = u.clone()
        v[1:-1, 1:-1] *= 0.5
        return v

    t = bench(upd, torch.cuda.synchronize)
    row("update", f"{side}x{side}", "torch", t, f"{8 * side * side / t / 1e9:.0f} GB/s (clone + in-place)")
    x = torch.randn(n, device="cuda")
    t = bench(lambda: torch.cumsum(x, 0), torch.cuda.synchronize, 10, 5)
    row("cumsum", n, "torch", t, f"{8 * n / t / 1e9:.0f} GB/s")
except Exception as e:  # noqa: BLE001
    print(f"# torch unavailable: {e}")
try:
    import cupy as cp

    u = cp.random.standard_normal((side, side), dtype=cp.float32)
    sync = cp.cuda.Device().synchronize

    def upd():
        v = u.copy()
        v[1:-1, 1:-1] *= 0.5
        return v

    t = bench(upd, sync)
    row("update", f"{side}x{side}", "cupy", t, f"{8 * side * side / t / 1e9:.0f} GB/s (copy + in-place)")
    x = cp.random.standard_normal(n, dtype=cp.float32)
    t = bench(lambda: cp.cumsum(x), sync, 10, 5)
    row("cumsum", n, "cupy", t, f"{8 * n / t / 1e9:.0f} GB/s")
except Exception as e:  # noqa: BLE001
    print(f"# cupy unavailable: {e}")
