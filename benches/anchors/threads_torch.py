"""Anchor for examples/threads.rs: the 10-op expression on 1024 float32 elements, evaluated
eagerly by PyTorch from 1, 2, 4, 8 and 16 threads, each thread with its own inputs and its
own CUDA stream; every thread synchronizes its stream before the clock stops. Prints the
same TSV columns as the example: workload, threads, calls per second, speed-up over one."""
import sys
import threading
import time

import torch

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3


def ten(a, b):
    return ((((a + b) * 2.0 - 1.0).sin() * b).exp() + a).sqrt().abs() * 3.0 - b


def worker(k, barrier, out):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.linspace(0.0, 1.0 + k, 1024, device="cuda")
        b = torch.full((1024,), 0.5 + k, device="cuda")
        for _ in range(200):
            ten(a, b)
        s.synchronize()
        barrier.wait()
        t = time.perf_counter()
        n = 0
        while time.perf_counter() - t < SECS:
            for _ in range(50):
                ten(a, b)
            n += 50
        s.synchronize()
        out[k] = (n, time.perf_counter() - t)


def main():
    print("# torch %s on %s" % (torch.__version__, torch.cuda.get_device_name()))
    print("workload\tthreads\tcalls_per_s\tspeedup")
    one = None
    for threads in [1, 2, 4, 8, 16]:
        barrier = threading.Barrier(threads)
        out = [None] * threads
        ts = [threading.Thread(target=worker, args=(k, barrier, out)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        rate = sum(n for n, _ in out) / max(s for _, s in out)
        one = one or rate
        print("torch 10-op eager 1024\t%d\t%.0f\t%.2f" % (threads, rate, rate / one))


if __name__ == "__main__":
    main()
