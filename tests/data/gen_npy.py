#!/usr/bin/env python3
"""Writes the .npy/.npz fixtures of tests/npy.rs into tests/data/npy/, and expected.txt with
the values each one holds.

Run from anywhere: `python3 tests/data/gen_npy.py` (needs NumPy 2.x: `pip install numpy`).
The output is deterministic (fixed seed, no timestamps); the files and this script are
committed together.

Files:
* `<dt>.npy` for every dtype lazyfuse and NumPy share (`bool i8 i16 i32 i64 u8 u16 u32 u64
  f16 f32 f64 c64 c128`): shape (2, 3), C order, little-endian, random values.
* `fortran_f64.npy` (3, 4) and `fortran_i16.npy` (2, 3, 4): Fortran order.
* `big_f64.npy` ('>f8', (4, 5)), `big_i32.npy` ('>i4'), `big_f16.npy` ('>f2'),
  `big_c128.npy` ('>c16'): big-endian.
* `scalar_f64.npy` (shape ()) and `empty_f32.npy` (shape (2, 0, 3)).
* `pair.npz`: `np.savez(path, zeta=<f32 (3, 2)>, alpha=<bool (4,)>)`, members in that order.
* `compressed.npz`: `np.savez_compressed` of one array (lazyfuse reads stored archives only).
* `str.npy` ('<U3') and `structured.npy` ([('a', '<i4'), ('b', '<f8')]): dtypes lazyfuse
  does not have.

expected.txt: one line per array, `file[:member] | dtype [d0,d1,..] HEX` with HEX the raw
little-endian bytes in C (logical) order (`_` when empty), as tests/common/mod.rs's
`parse_fixture_array` reads them.
"""

import os
import platform

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "npy")

NAMES = {
    "bool": "|b1", "i8": "|i1", "i16": "<i2", "i32": "<i4", "i64": "<i8",
    "u8": "|u1", "u16": "<u2", "u32": "<u4", "u64": "<u8",
    "f16": "<f2", "f32": "<f4", "f64": "<f8", "c64": "<c8", "c128": "<c16",
}

rng = np.random.default_rng(20261204)


def values(name, shape):
    dt = np.dtype(NAMES[name])
    if name == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dt)
    re = rng.standard_normal(shape) * 100
    im = rng.standard_normal(shape) * 100
    return (re + 1j * im).astype(dt)


def name_of(a):
    for n, d in NAMES.items():
        if np.dtype(d).newbyteorder("<") == a.dtype.newbyteorder("<"):
            return n
    raise ValueError(a.dtype)


def line(key, a):
    le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
    h = le.tobytes().hex() or "_"
    shape = ",".join(str(d) for d in a.shape)
    return f"{key} | {name_of(a)} [{shape}] {h}"


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []

    def save(fname, a):
        np.save(os.path.join(OUT, fname), a)
        lines.append(line(fname, a))

    for n in NAMES:
        save(f"{n}.npy", values(n, (2, 3)))
    save("fortran_f64.npy", np.asfortranarray(values("f64", (3, 4))))
    save("fortran_i16.npy", np.asfortranarray(values("i16", (2, 3, 4))))
    for n, shape in [("f64", (4, 5)), ("i32", (3,)), ("f16", (2, 2)), ("c128", (3,))]:
        save(f"big_{n}.npy", values(n, shape).astype(np.dtype(NAMES[n]).newbyteorder(">")))
    save("scalar_f64.npy", np.array(2.5))
    save("empty_f32.npy", np.zeros((2, 0, 3), dtype="<f4"))

    zeta, alpha = values("f32", (3, 2)), values("bool", (4,))
    np.savez(os.path.join(OUT, "pair.npz"), zeta=zeta, alpha=alpha)
    lines.append(line("pair.npz:zeta", zeta))
    lines.append(line("pair.npz:alpha", alpha))
    np.savez_compressed(os.path.join(OUT, "compressed.npz"), x=values("f64", (3,)))

    np.save(os.path.join(OUT, "str.npy"), np.array(["ab", "cde"], dtype="<U3"))
    np.save(os.path.join(OUT, "structured.npy"),
            np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))

    with open(os.path.join(OUT, "expected.txt"), "w") as f:
        f.write(f"# written by tests/data/gen_npy.py; NumPy {np.__version__}, "
                f"{platform.machine()}\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
