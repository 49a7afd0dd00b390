# The latency row's 10-op expression in NumPy, eager, on one f32 element (median of 7 x 20000
# calls): the CPU anchor for `cargo bench --bench workloads -- latency` on the same machine.
import numpy as np, time
a = np.array([1.5], dtype=np.float32); b = np.array([2.5], dtype=np.float32)
def ten(a, b):
    return np.abs(np.sqrt(np.exp(np.sin((a + b) * 2.0 - 1.0) * b) + a)) * 3.0 - b
for _ in range(1000): ten(a, b)
ts = []
for r in range(7):
    t = time.perf_counter()
    for _ in range(20000): ten(a, b)
    ts.append((time.perf_counter() - t) / 20000)
ts.sort(); print(f"numpy 10-op eager: {ts[3]*1e6:.2f} us")
