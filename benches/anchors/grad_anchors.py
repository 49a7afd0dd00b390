"""Anchors for the `grad` rows of benches/workloads.rs: value and gradient of the PSF-fit
loss sum((|fft2(a e^{i phase})|^2 / N^2 - target)^2) in float32 at 128 and 512, by
jax.jit(jax.value_and_grad(..)), PyTorch eager (autograd) and PyTorch with forward and
backward captured in one CUDA graph; the forward pass alone for each. Synchronizes before
reading the clock; prints TSV rows like the bench: workload, size, system, time, note."""
import sys
import time

import numpy as np

SIZES = [int(s) for s in sys.argv[1:]] or [128, 512]


def inputs(n):
    yy, xx = np.mgrid[0:n, 0:n] - n / 2.0
    ap = ((xx * xx + yy * yy) <= (n / 4.0) ** 2).astype(np.float32)
    rng = np.random.default_rng(1)
    phase = (rng.standard_normal((n, n)) * 0.3).astype(np.float32)
    target = (rng.random((n, n)) * 1e-4).astype(np.float32)
    return ap, phase, target


def median_time(f, sync, iters=50, reps=7):
    for _ in range(5):
        f()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(iters):
            f()
        sync()
        ts.append((time.perf_counter() - t) / iters)
    return sorted(ts)[len(ts) // 2]


def row(n, system, sec, note=""):
    print(f"grad\t{n}\t{system}\t{sec * 1e6:.1f} us\t{note}", flush=True)


def run_jax(n):
    import jax
    import jax.numpy as jnp

    ap, phase, target = (jnp.asarray(x) for x in inputs(n))
    norm = 1.0 / float(n * n) ** 2

    def loss(p):
        field = ap * jnp.exp(1j * p)
        return jnp.sum((jnp.abs(jnp.fft.fft2(field)) ** 2 * norm - target) ** 2)

    fwd = jax.jit(loss)
    both = jax.jit(jax.value_and_grad(loss))
    t = median_time(lambda: fwd(phase).block_until_ready(), lambda: None)
    row(n, "jax-jit forward", t)
    t2 = median_time(lambda: jax.block_until_ready(both(phase)), lambda: None)
    row(n, "jax-jit value+grad", t2, f"{t2 / t:.2f}x the forward")


def run_torch(n):
    import torch

    dev = "cuda"
    ap, phase, target = (torch.tensor(x, device=dev) for x in inputs(n))
    norm = 1.0 / float(n * n) ** 2
    p = phase.clone().requires_grad_(True)

    def loss(p):
        field = torch.polar(ap, p)
        return ((torch.fft.fft2(field).abs() ** 2 * norm - target) ** 2).sum()

    def step():
        l = loss(p)
        (g,) = torch.autograd.grad(l, p)
        return l, g

    sync = torch.cuda.synchronize
    with torch.no_grad():
        t = median_time(lambda: loss(p), sync)
    row(n, "torch-eager forward", t)
    t2 = median_time(step, sync)
    row(n, "torch-eager value+grad", t2, f"{t2 / t:.2f}x the forward")
    # forward and backward in one CUDA graph (static input, warmed up on a side stream)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_l, static_g = step()
    t3 = median_time(graph.replay, sync)
    row(n, "torch-cudagraph value+grad", t3, f"{t3 / t:.2f}x the eager forward")


for n in SIZES:
    for name, f in (("jax", run_jax), ("torch", run_torch)):
        try:
            f(n)
        except Exception as e:  # an anchor that cannot run is reported, not fatal
            print(f"grad\t{n}\t{name}\tfailed\t{type(e).__name__}: {e}", flush=True)
