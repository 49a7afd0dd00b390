#!/usr/bin/env python3
"""Generates tests/data/complex_edges.txt: NumPy's complex functions at special and large
finite arguments, the oracle of tests/complex_edges.rs.

Run from anywhere: `python3 tests/data/gen_complex.py` (needs NumPy 2.x). The output is
deterministic and committed; the NumPy version and platform that produced it are in its header.

File format (one case per line; lines starting with '#' are comments):

    func dtype group in_re in_im out_re out_im

* func: the NumPy name (sin, arcsin, ...); dtype: c64 or c128.
* group: `special` (the C99 Annex G table: every part in +-0, +-0.5, +-2, +-inf, nan; the
  sign of a zero result is checked), `large` (large, tiny and ordinary finite parts),
  `reported` (the cases of the robustness issue) or `accurate` (expm1 and log1p where
  NumPy's own formulas cancel or overflow: the oracle is NumPy in a wider type, complex128
  for complex64 inputs and clongdouble for complex128 ones, rounded back).
* values: the raw bits of each part in hex (8 digits for c64, 16 for c128), so NaN, the
  sign of zero and subnormals survive exactly.
"""

import itertools
import os
import platform
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "complex_edges.txt")

DT = {"c64": np.complex64, "c128": np.complex128}
PART = {"c64": np.float32, "c128": np.float64}
UINT = {"c64": np.uint32, "c128": np.uint64}

FUNCS = ["sin", "cos", "tan", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan", "exp",
         "log", "sqrt", "expm1", "log1p"]
# Annex G does not cover expm1/log1p: NumPy evaluates formulas for them, and its answers at
# large finite arguments overflow spuriously (log1p(3e38+3e38j) = inf in complex64), so
# they join the special-value table only.
LARGE_FUNCS = FUNCS[:12]

SPECIAL_PARTS = [0.0, -0.0, 0.5, -0.5, 2.0, -2.0, np.inf, -np.inf, np.nan]

# Magnitudes at the ends of each precision's range, around exp's overflow threshold and
# in between.
LARGE_PARTS = {
    "c128": [1e-310, 1e-300, 1e-9, 0.7, 1.0, 3.0, 25.0, 300.0, 709.5, 710.5, 1e5, 1e20,
             1e154, 1e300, 1.7e308],
    "c64": [1e-44, 1e-38, 1e-9, 0.7, 1.0, 3.0, 10.0, 45.0, 88.5, 89.5, 100.0, 1e5, 1e19,
            1e30, 3.4e38],
}

REPORTED = [
    ("tanh", 45 + 1j), ("tanh", -45 + 1j), ("tan", 1 + 400j), ("sinh", 800 + 0j),
    ("cosh", 800 + 0j), ("sin", 800j), ("exp", 709.9 + 0.5j), ("sqrt", 3e38 + 3e38j),
    ("log", 3e38 + 3e38j), ("arctan", 1e-9 + 1e-9j), ("arctan", 0.5 + 1e-6j),
    ("log", 0.6 + 0.8j), ("log", 1 + 1e-8j), ("arctan", 1e-9 + 1j), ("arctan", 1e10 + 1j),
    ("arcsin", 1e300 + 1e300j), ("arccos", 3e38 + 3e38j), ("arctan", 3e38 + 3e38j),
    ("sinh", 710 + 1j), ("cosh", -710 + 1j), ("exp", 89 + 1j),
]


def hexbits(v, dt):
    return format(int(np.array(v, dtype=PART[dt]).view(UINT[dt])), "0%dx" % (8 if dt == "c64" else 16))


def make(re, im, dt):
    z = np.zeros(1, dtype=DT[dt])
    z.real = re
    z.imag = im
    return z


lines = []


def add(func, dt, group, re, im):
    z = make(re, im, dt)
    r = getattr(np, func)(z)
    assert r.dtype == DT[dt], (func, dt, r.dtype)
    zi, ri = z[0], r[0]
    lines.append(" ".join([func, dt, group, hexbits(zi.real, dt), hexbits(zi.imag, dt),
                           hexbits(ri.real, dt), hexbits(ri.imag, dt)]))


# (func, dtype, z) of the `accurate` group: arguments where the wider type's formula is
# accurate to the narrower type's precision.
ACCURATE = [(f, "c64", z) for f in ("expm1", "log1p")
            for z in (1e-6 + 1e-6j, -3e-5 + 2e-4j, 1e-4 - 1e-7j, 0.3 - 0.2j)] + [
    ("log1p", "c64", 3e38 + 3e38j), ("log1p", "c64", -3e38 + 1e30j),
    ("expm1", "c64", 88.5 + 0.5j), ("expm1", "c64", 89.5 + 0j), ("expm1", "c64", 200 - 1j),
    ("expm1", "c128", 709.9 + 0.5j), ("expm1", "c128", 800 + 0j), ("expm1", "c128", 710 - 3j),
]
WIDER = {"c64": np.complex128, "c128": np.clongdouble}


def add_accurate(func, dt, z):
    x = make(z.real, z.imag, dt)
    w = x.astype(WIDER[dt])
    r = (np.exp(w) - 1) if func == "expm1" else np.log1p(w)
    r = r.astype(DT[dt])
    lines.append(" ".join([func, dt, "accurate", hexbits(x[0].real, dt), hexbits(x[0].imag, dt),
                           hexbits(r[0].real, dt), hexbits(r[0].imag, dt)]))


def main():
    warnings.simplefilter("ignore")
    with np.errstate(all="ignore"):
        for dt in DT:
            for func in FUNCS:
                for re, im in itertools.product(SPECIAL_PARTS, SPECIAL_PARTS):
                    add(func, dt, "special", re, im)
            vals = LARGE_PARTS[dt]
            for func in LARGE_FUNCS:
                for i, j in itertools.product(range(len(vals)), range(len(vals))):
                    sr, si = [(1, 1), (-1, 1), (1, -1), (-1, -1)][(i + 2 * j) % 4]
                    add(func, dt, "large", sr * vals[i], si * vals[j])
            for func, z in REPORTED:
                add(func, dt, "reported", z.real, z.imag)
        for func, dt, z in ACCURATE:
            add_accurate(func, dt, z)
    head = [
        "# NumPy complex functions at special and large arguments for tests/complex_edges.rs",
        "# -- generated by tests/data/gen_complex.py, do not edit. Format: see its docstring.",
        "# numpy %s; python %s; %s" % (np.__version__, platform.python_version(),
                                       platform.machine()),
        "# cases %d" % len(lines),
    ]
    with open(OUT, "w") as f:
        f.write("\n".join(head + lines) + "\n")
    print("wrote %d cases to %s" % (len(lines), OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
