#!/usr/bin/env python3
"""NumPy eager against lazyfuse on the CPU, alternating in one run (issue: CPU backend).

Starts the lazyfuse side (examples/cpu_vs_numpy.rs, built with
`cargo build --release --example cpu_vs_numpy`) as a subprocess that runs one call per
request, and alternates it with the same workload in NumPy (the BENCH.md definitions), the
order swapped every round. Prints one TSV row per workload: median seconds of each side and
the median of the per-round ratios lazyfuse / NumPy.

  python3 benches/cpu_vs_numpy.py [--bin PATH] [--rounds R] [--threads N] [WORKLOAD SIZE]...
  python3 benches/cpu_vs_numpy.py --scaling chain 16777216 --threads 1,2,4,8,16

Default workloads: psf 128, psf 512, chain 1048576, sim 256 (sim = 100 steps per call).
--threads sets LAZYFUSE_CPU_THREADS for the lazyfuse side (NumPy's elementwise work and
its FFT are single-threaded). --scaling times only lazyfuse at each thread count and prints
the speedup over the first.
"""
import os, statistics, subprocess, sys, time
import numpy as np

def psf(n):
    x = np.linspace(-1, 1, n, dtype=np.float32)
    xx, yy = np.meshgrid(x, x)
    rho, phi = np.sqrt(xx**2 + yy**2), np.arctan2(yy, xx)
    phase = rho**2 * np.cos(phi)
    wv = np.exp(1j * 2 * np.float32(np.pi) * phase).astype(np.complex64)
    wv[rho > 1] = 0
    p = n // 2
    padded = np.pad(wv, ((p, p), (p, p)))
    f = np.fft.fftshift(np.fft.fft2(np.fft.ifftshift(padded)))
    return np.abs(f) ** 2

def chain(x, y):
    r = np.sqrt(x * x + y * y)
    t = np.arctan2(y, x)
    z = r * np.cos(t) + np.exp(-0.5 * r) * np.sin(t)
    return np.where(z > 0, z, 0.1 * z) + 1.0

_cache = {}
def numpy_call(w, n):
    if w == "psf":
        t = time.perf_counter(); psf(n); return time.perf_counter() - t
    if w == "chain":
        if ("chain", n) not in _cache:
            g = np.random.default_rng(0)
            _cache[("chain", n)] = (g.standard_normal(n, dtype=np.float32), g.standard_normal(n, dtype=np.float32))
        x, y = _cache[("chain", n)]
        t = time.perf_counter(); chain(x, y); return time.perf_counter() - t
    if w == "sim":
        if ("sim", n) not in _cache:
            k = np.fft.fftfreq(n, 1.0 / n).astype(np.float32) * 2 * np.pi / n
            dt = np.float32(0.1)
            mult = (1.0 / (1.0 + dt * (k[None, :]**2 + k[:, None]**2))).astype(np.float32)
            u0 = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32) * 0.1
            _cache[("sim", n)] = (u0, mult, dt)
        u, mult, dt = _cache[("sim", n)]
        t = time.perf_counter()
        for _ in range(100):
            u = u + dt * (u - u**3)
            u = np.fft.ifft2(np.fft.fft2(u) * mult).real.astype(np.float32)
        return time.perf_counter() - t
    raise SystemExit(f"unknown workload {w}")

class Lazyfuse:
    def __init__(self, binary, threads=None):
        env = dict(os.environ)
        if threads:
            env["LAZYFUSE_CPU_THREADS"] = str(threads)
        env["LAZYFUSE_DEVICE"] = "cpu"
        self.p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    def call(self, w, n):
        self.p.stdin.write(f"{w} {n}\n"); self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        if not line or line[0] != "ok":
            raise SystemExit(f"lazyfuse side failed on {w} {n}: {line}")
        return float(line[1])
    def close(self):
        self.p.stdin.write("quit\n"); self.p.stdin.flush(); self.p.wait()

def rounds_for(w, n):
    return {"psf": 15 if n <= 128 else 7, "chain": 15, "sim": 3}.get(w, 5)

def main():
    args = sys.argv[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    binary = os.path.join(here, "..", "target", "release", "examples", "cpu_vs_numpy")
    rounds, threads, scaling = None, None, False
    rest = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--bin": binary = args[i + 1]; i += 2
        elif a == "--rounds": rounds = int(args[i + 1]); i += 2
        elif a == "--threads": threads = args[i + 1]; i += 2
        elif a == "--scaling": scaling = True; i += 1
        else: rest.append(a); i += 1
    work = [(rest[j], int(rest[j + 1])) for j in range(0, len(rest) - 1, 2)] or \
        [("psf", 128), ("psf", 512), ("chain", 1 << 20), ("sim", 256)]
    print(f"# numpy {np.__version__}, {os.cpu_count()} CPUs; lazyfuse {binary}")
    if scaling:
        counts = [int(t) for t in (threads or "1,2").split(",")]
        for w, n in work:
            base = None
            for k in counts:
                lf = Lazyfuse(binary, k)
                for _ in range(2): lf.call(w, n)
                t = statistics.median(lf.call(w, n) for _ in range(rounds or rounds_for(w, n)))
                lf.close()
                base = base or t
                print(f"{w}\t{n}\tthreads={k}\t{t * 1e3:.3f} ms\tspeedup {base / t:.2f}x", flush=True)
        return
    lf = Lazyfuse(binary, threads)
    print("workload\tsize\tnumpy\tlazyfuse\tlazyfuse/numpy (median of per-round ratios)")
    for w, n in work:
        for _ in range(2):
            numpy_call(w, n); lf.call(w, n)
        tn, tl, ratios = [], [], []
        for r in range(rounds or rounds_for(w, n)):
            if r % 2 == 0:
                a = numpy_call(w, n); b = lf.call(w, n)
            else:
                b = lf.call(w, n); a = numpy_call(w, n)
            tn.append(a); tl.append(b); ratios.append(b / a)
        print(f"{w}\t{n}\t{statistics.median(tn) * 1e3:.3f} ms\t{statistics.median(tl) * 1e3:.3f} ms\t{statistics.median(ratios):.3f}", flush=True)
    lf.close()

if __name__ == "__main__":
    main()
