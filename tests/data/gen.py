#!/usr/bin/env python3
"""Generates tests/data/fixtures.txt: NumPy reference results for tests/numpy_fixtures.rs
(and, group `fft`, for tests/fft.rs).

Run from anywhere: `python3 tests/data/gen.py` (needs NumPy 2.x: `pip install numpy`). The output
is deterministic (fixed seeds, no timestamps) and committed; the NumPy version and platform
that produced it are written in its header.

File format (one case per line; lines starting with '#' are comments):

    name | expr | params | flags | inputs | outputs

* name: `group/what`; the Rust side runs one #[test] per group.
* expr: an expression id that tests/numpy_fixtures.rs maps to a lazyfuse expression.
* params: space-separated `tag:value` tokens (`-` when none):
    f64:2.5 f32:2.5 i64:-3 i32:7 bool:1 c128:RE:IM c64:RE:IM (Rust scalars, NumPy weak scalars),
    i:3 (an integer: axis, shift, count, shape entry), dt:f32 (a dtype),
    sl:START:END:STEP (an ndarray slice; END `n` = open), ix:I (an index), na (a new axis),
    w:BEFORE:AFTER (a pad width), kd:0|1 (keepdims of a reduction), ddof:N (a variance's
    delta degrees of freedom). Floats use Python's repr, which Rust parses exactly.
* flags: `-` or comma-separated: `sz` = the sign of zero results must match.
* inputs / outputs: `;`-separated arrays, each `dtype [d0,d1,..] HEX` with HEX the raw
  little-endian bytes in C order (`_` when empty); dtypes bool i32 i64 f32 f64 c64 c128.
"""

import os
import platform
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures.txt")

DT = {
    "bool": np.dtype(np.bool_),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
    "f32": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
    "c64": np.dtype("<c8"),
    "c128": np.dtype("<c16"),
}
NAME = {v: k for k, v in DT.items()}
ALL = list(DT)
INTS = ["i32", "i64"]
FLOATS = ["f32", "f64"]
COMPLEX = ["c64", "c128"]

lines = []
names = set()


def enc_array(a):
    a = np.asarray(a)
    if a.dtype not in NAME:
        raise TypeError(f"unsupported dtype {a.dtype}")
    shape = "[" + ",".join(str(d) for d in a.shape) + "]"
    data = np.ascontiguousarray(a).tobytes().hex() or "_"
    return f"{NAME[a.dtype]} {shape} {data}"


def add(name, expr, params, inputs, outputs, flags=""):
    if name in names:
        raise ValueError(f"duplicate case name {name}")
    names.add(name)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    p = " ".join(params) if params else "-"
    ins = " ; ".join(enc_array(a) for a in inputs) if inputs else "-"
    outs = " ; ".join(enc_array(a) for a in outputs)
    lines.append(f"{name} | {expr} | {p} | {flags or '-'} | {ins} | {outs}")


def fr(x):
    """A Python float in a form Rust's `f64::from_str` reads back exactly."""
    return repr(float(x))


def scalar_param(v, tag):
    if tag in ("f64", "f32"):
        return f"{tag}:{fr(v)}"
    if tag in ("i64", "i32"):
        return f"{tag}:{int(v)}"
    if tag == "bool":
        return f"bool:{int(bool(v))}"
    if tag in ("c128", "c64"):
        v = complex(v)
        return f"{tag}:{fr(v.real)}:{fr(v.imag)}"
    raise ValueError(tag)


def py_scalar(v, tag):
    """The NumPy-side (weak, Python) value of a Rust scalar param."""
    if tag == "f32":
        return float(np.float32(v))
    if tag == "f64":
        return float(v)
    if tag in ("i32", "i64"):
        return int(v)
    if tag == "bool":
        return bool(v)
    if tag == "c64":
        return complex(np.complex64(v))
    return complex(v)


def arr(values, dt):
    return np.array(values, dtype=DT[dt])


def cplx(re, im, dt):
    """Exact complex construction (no arithmetic, so inf/nan parts stay as given)."""
    re = np.asarray(re, dtype=np.float64)
    im = np.asarray(im, dtype=np.float64)
    out = np.empty(np.broadcast(re, im).shape, dtype=DT[dt])
    out.real = re
    out.imag = im
    return out


# ---------------------------------------------------------------------------------------
# Value sets

F32_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, 3.0, 2.5,
               -7.0, 1e-40, -1.401298464324817e-45, 3.4028234663852886e38, 1.1754943508222875e-38]
F64_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, 3.0, 2.5,
               -7.0, 1e-310, -5e-324, 1.7976931348623157e308, 2.2250738585072014e-308]
SPECIAL = {"f32": F32_SPECIAL, "f64": F64_SPECIAL}

# extra values for unary functions: rounding ties, domain edges, overflow edges
UNARY_EXTRA = {
    "f32": [0.1, -0.1, 0.9, -0.9, 1.5, -1.5, -2.5, 3.5, 4.5, -4.5, 0.49999997, 4194304.5,
            -4194304.5, 4.7, -12.3, 88.0, 89.0, -88.0, -104.0, 100.5, 1e-8, -1e-8, 1e20, -1e20,
            0.7853982, 1.5707964, 3.1415927, 10.0, 1e6],
    "f64": [0.1, -0.1, 0.9, -0.9, 1.5, -1.5, -2.5, 3.5, 4.5, -4.5, 0.49999999999999994,
            2251799813685248.5, -2251799813685248.5, 4503599627370495.5, 4.7, -12.3, 709.0,
            710.0, -745.0, -746.0, 100.5, 1e-8, -1e-8, 1e20, -1e300, 0.7853981633974483,
            1.5707963267948966, 3.141592653589793, 10.0, 1e6],
}

I32_SPECIAL = [-2**31, -2**31 + 1, -7, -3, -2, -1, 0, 1, 2, 3, 7, 46341, 2**31 - 2, 2**31 - 1]
I64_SPECIAL = [-2**63, -2**63 + 1, -7, -3, -2, -1, 0, 1, 2, 3, 7, 3037000500, 2**63 - 2, 2**63 - 1]
ISPECIAL = {"i32": I32_SPECIAL, "i64": I64_SPECIAL}


def complex_values(dt, rng, n=12):
    re = np.concatenate([[1.0, 0.0, -1.0, 0.5, -0.25, 3.0], rng.normal(0, 1.5, n)])
    im = np.concatenate([[0.0, 1.0, 0.5, -2.0, 0.75, -4.0], rng.normal(0, 1.5, n)])
    return cplx(re, im, dt)


def complex_specials(dt):
    vals = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan]
    re, im = np.meshgrid(vals, vals, indexing="ij")
    return cplx(re.ravel(), im.ravel(), dt)


def regular(dt, shape, rng, nonzero=False, small=False):
    """Ordinary values of a dtype (no specials)."""
    n = int(np.prod(shape))
    if dt == "bool":
        return (rng.random(shape) < 0.5) if not nonzero else np.ones(shape, dtype=bool)
    if dt in INTS:
        lo, hi = (0, 4) if small else (-9, 10)
        v = rng.integers(lo, hi, size=n)
        if nonzero:
            v[v == 0] = 3
        return v.reshape(shape).astype(DT[dt])
    if dt in FLOATS:
        v = rng.normal(0, 3, size=n)
        if small:
            v = rng.uniform(0.2, 3.0, size=n)
        return v.reshape(shape).astype(DT[dt])
    re = rng.normal(0, 2, size=n)
    im = rng.normal(0, 2, size=n)
    if small:
        re, im = rng.uniform(0.2, 2.0, size=n), rng.uniform(-1.0, 1.0, size=n)
    return cplx(re.reshape(shape), im.reshape(shape), dt)


# ---------------------------------------------------------------------------------------
# Unary functions

UNARY_NP = {
    "abs": np.abs, "sqrt": np.sqrt, "rsqrt": lambda x: (1 / np.sqrt(x)).astype(np.sqrt(x).dtype),
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2,
    "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "sign": np.sign,
    "square": np.square, "reciprocal": np.reciprocal, "neg": np.negative,
    "not": np.logical_not, "logical_not": np.logical_not, "real": np.real, "imag": np.imag,
    "conj": np.conj, "angle": np.angle, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite,
}
# Op/dtype combinations left out, because NumPy's result has a dtype lazyfuse lacks or the
# combination is a documented difference: float functions of bool (NumPy computes in float16,
# lazyfuse in F32), conj/square of bool (NumPy: int8), reciprocal of integers (NumPy keeps
# the integer dtype, lazyfuse computes in F64), ordering-based ops on complex (maximum,
# minimum, <, floor_divide, ...: lazyfuse rejects them), bool - bool (NumPy raises) and
# bool //, %, ** bool (NumPy: int8).
TRANSCENDENTAL = ["sqrt", "rsqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos",
                  "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "angle"]
EXACT_FLOAT = ["abs", "floor", "ceil", "round", "trunc", "sign", "square", "reciprocal", "neg"]
COMPLEX_OK = ["abs", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin",
              "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "sign", "square",
              "reciprocal", "neg", "real", "imag", "conj", "angle", "isnan", "isinf",
              "isfinite", "logical_not"]
INT_OK = ["abs", "neg", "sign", "square", "floor", "ceil", "round", "trunc", "real", "imag",
          "conj", "isnan", "isinf", "isfinite", "logical_not"] + TRANSCENDENTAL
BOOL_OK = ["abs", "not", "logical_not", "real", "imag", "isnan", "isinf", "isfinite"]


def gen_unary():
    rng = np.random.default_rng(101)
    for dt in FLOATS:
        x = arr(SPECIAL[dt] + UNARY_EXTRA[dt], dt)
        for op in TRANSCENDENTAL + EXACT_FLOAT + ["real", "imag", "conj", "isnan", "isinf",
                                                 "isfinite", "logical_not"]:
            add(f"unary/{op}_{dt}", f"u:{op}", [], [x], UNARY_NP[op](x), flags="sz")
        # ordinary values too (where the special-value set is sparse)
        y = regular(dt, (5, 7), rng)
        for op in ["sin", "cos", "tan", "exp", "tanh", "atan", "round", "sign"]:
            add(f"unary/{op}_{dt}_regular", f"u:{op}", [], [y], UNARY_NP[op](y))
        z = (rng.uniform(-0.999, 0.999, size=(3, 5))).astype(DT[dt])
        for op in ["asin", "acos", "log1p", "expm1"]:
            add(f"unary/{op}_{dt}_unit", f"u:{op}", [], [z], UNARY_NP[op](z))
        p = rng.uniform(1e-3, 1e3, size=(4, 4)).astype(DT[dt])
        for op in ["sqrt", "rsqrt", "log", "log2", "log10", "reciprocal"]:
            add(f"unary/{op}_{dt}_positive", f"u:{op}", [], [p], UNARY_NP[op](p))
    for dt in INTS:
        x = arr(ISPECIAL[dt], dt)
        for op in INT_OK:
            add(f"unary/{op}_{dt}", f"u:{op}", [], [x], UNARY_NP[op](x), flags="sz")
    xb = arr([True, False, True, True, False], "bool")
    for op in BOOL_OK:
        add(f"unary/{op}_bool", f"u:{op}", [], [xb], UNARY_NP[op](xb))
    for dt in COMPLEX:
        x = complex_values(dt, rng)
        for op in COMPLEX_OK:
            add(f"unary/{op}_{dt}", f"u:{op}", [], [x], UNARY_NP[op](x))
        s = complex_specials(dt)
        for op in ["abs", "neg", "conj", "real", "imag", "isnan", "isinf", "isfinite",
                   "logical_not", "sqrt", "exp", "log", "sign", "square", "reciprocal"]:
            add(f"unary/{op}_{dt}_special", f"u:{op}", [], [s], UNARY_NP[op](s))
    # transcendentals at a wider range of ordinary arguments
    for dt in FLOATS:
        w = np.linspace(-20, 20, 81).astype(DT[dt])
        for op in ["sin", "cos", "exp", "sinh", "cosh", "tanh", "atan"]:
            add(f"unary/{op}_{dt}_sweep", f"u:{op}", [], [w], UNARY_NP[op](w))


# ---------------------------------------------------------------------------------------
# Binary operations

BINARY_NP = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "mod": np.remainder, "floor_div": np.floor_divide, "pow": np.power, "atan2": np.arctan2,
    "maximum": np.maximum, "minimum": np.minimum, "hypot": np.hypot, "eq": np.equal,
    "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
}
BIN_ALL = list(BINARY_NP)
BIN_COMPLEX = ["add", "sub", "mul", "div", "pow", "eq", "ne", "and", "or", "xor"]
BIN_BOOL = ["add", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
            "and", "or", "xor"]


def bin_ok(op, da, db):
    """Whether lazyfuse's contract covers `op` on these dtypes the way NumPy does."""
    d = np.result_type(DT[da], DT[db])
    if d == np.bool_:
        return op in BIN_BOOL
    if d.kind == "c":
        return op in BIN_COMPLEX
    return True


def gen_binary():
    rng = np.random.default_rng(202)
    # all pairs of special values: (n,1) op (1,n)
    for dt in FLOATS:
        s = arr(SPECIAL[dt], dt)
        a, b = s.reshape(-1, 1), s.reshape(1, -1)
        for op in BIN_ALL:
            # maximum(+0, -0) and minimum(+0, -0) are the second operand, in NumPy's
            # scalar and SIMD loops alike (NumPy 2.4), so the sign of zero is checked too
            add(f"binary/{op}_{dt}_specials", f"b:{op}", [], [a, b], BINARY_NP[op](a, b),
                flags="sz")
    for dt in INTS:
        s = arr(ISPECIAL[dt], dt)
        a, b = s.reshape(-1, 1), s.reshape(1, -1)
        for op in BIN_ALL:
            if op == "pow":
                e = arr([0, 1, 2, 3, 5, 31, 62], dt).reshape(1, -1)
                add(f"binary/pow_{dt}_specials", "b:pow", [], [a, e], np.power(a, e))
                continue
            add(f"binary/{op}_{dt}_specials", f"b:{op}", [], [a, b], BINARY_NP[op](a, b),
                flags="sz")
    bb = arr([False, True], "bool")
    a, b = bb.reshape(-1, 1), bb.reshape(1, -1)
    for op in BIN_BOOL:
        add(f"binary/{op}_bool", f"b:{op}", [], [a, b], BINARY_NP[op](a, b))
    for dt in COMPLEX:
        x = complex_values(dt, rng, 6).reshape(-1, 1)
        y = complex_values(dt, rng, 6).reshape(1, -1)
        for op in BIN_COMPLEX:
            add(f"binary/{op}_{dt}", f"b:{op}", [], [x, y], BINARY_NP[op](x, y))
        s = complex_specials(dt)
        for op in ["add", "sub", "mul", "div", "eq", "ne"]:
            add(f"binary/{op}_{dt}_specials", f"b:{op}", [], [s.reshape(-1, 1), s[::5]],
                BINARY_NP[op](s.reshape(-1, 1), s[::5]))
    # floor division and remainder of ordinary floats, including 1.0 // 0.1 == 9
    for dt in FLOATS:
        a = arr([1.0, -1.0, 7.0, -7.0, 7.5, -7.5, 0.3, -0.3, 1e10, -1e-3, 5.0, 6.0], dt)
        b = arr([0.1, -0.1, 3.0, -3.0, 2.0, -2.0, 0.7, 1e-3, 0.5], dt)
        a2, b2 = a.reshape(-1, 1), b.reshape(1, -1)
        for op in ["floor_div", "mod"]:
            add(f"binary/{op}_{dt}_ordinary", f"b:{op}", [], [a2, b2], BINARY_NP[op](a2, b2),
                flags="sz")
        # pow of ordinary values
        x = rng.uniform(0.1, 4.0, size=(6, 1)).astype(DT[dt])
        y = rng.uniform(-3.0, 3.0, size=(1, 7)).astype(DT[dt])
        add(f"binary/pow_{dt}_ordinary", "b:pow", [], [x, y], np.power(x, y))
        neg = arr([-2.0, -0.5, -1.0, -0.0, -np.inf], dt).reshape(-1, 1)
        ex = arr([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 0.5, -0.5, np.inf, -np.inf], dt)
        add(f"binary/pow_{dt}_negative_base", "b:pow", [], [neg, ex.reshape(1, -1)],
            np.power(neg, ex.reshape(1, -1)), flags="sz")
    # broadcasting shapes and promotion between every dtype pair
    shapes = [((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((5,), ()), ((0, 4), (4,)), ((1,), (2, 3))]
    ops = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "maximum", "minimum", "gt",
           "eq", "and"]
    k = 0
    for da in ALL:
        for db in ALL:
            for op in ops:
                if not bin_ok(op, da, db):
                    continue
                sa, sb = shapes[k % len(shapes)]
                k += 1
                small = op == "pow"
                x = regular(da, sa, rng, small=small)
                y = regular(db, sb, rng, nonzero=op in ("div", "floor_div", "mod"), small=small)
                x, y = np.asarray(x, dtype=DT[da]), np.asarray(y, dtype=DT[db])
                add(f"promote/{op}_{da}_{db}", f"b:{op}", [], [x, y], BINARY_NP[op](x, y))
    # 0-d arrays are strong (not weak) operands in NumPy 2
    x = regular("f32", (5,), rng)
    z = np.array(1.25, dtype=np.float64)
    add("promote/mul_f32_0d_f64", "b:mul", [], [x, z], x * z)
    zi = np.array(3, dtype=np.int64)
    xi = regular("i32", (5,), rng)
    add("promote/add_i32_0d_i64", "b:add", [], [xi, zi], xi + zi)


# ---------------------------------------------------------------------------------------
# Weak (Python) scalars, powf/powi, clip, where, complex()

def gen_weak():
    rng = np.random.default_rng(303)
    base = {dt: regular(dt, (2, 5), rng) for dt in ALL}
    cases = [
        # (array dtype, op, scalar, tag)
        ("f32", "mul", 2.0, "f64"), ("f32", "mul", 2.5, "f32"), ("f32", "add", 0.1, "f64"),
        ("f32", "mul", 1j, "c128"), ("f32", "add", 1 + 2j, "c64"), ("f64", "mul", 1j, "c128"),
        ("i32", "mul", 2.5, "f64"), ("i32", "mul", 2, "i64"), ("i32", "add", 7, "i32"),
        ("i32", "add", 1j, "c128"), ("i64", "mul", 3, "i64"), ("i64", "sub", 0.5, "f64"),
        ("bool", "add", 1, "i64"), ("bool", "mul", 2.5, "f64"), ("bool", "add", True, "bool"),
        ("bool", "mul", 1j, "c128"), ("c64", "mul", 2.0, "f64"), ("c64", "add", 3, "i64"),
        ("c128", "mul", 0.5j, "c128"), ("f32", "div", 3, "i64"), ("i32", "div", 2, "i64"),
        ("i32", "floor_div", 2, "i64"), ("i32", "mod", -3, "i64"), ("f64", "mod", 2.5, "f64"),
        ("f32", "floor_div", 0.5, "f64"), ("i32", "pow", 2, "i64"), ("f32", "pow", 0.5, "f64"),
        ("f32", "pow", 2, "i64"), ("i32", "gt", 2.5, "f64"), ("i32", "eq", 3, "i64"),
        ("f32", "eq", 0.1, "f64"), ("f32", "lt", 0.5, "f32"), ("f32", "maximum", 0.5, "f64"),
        ("i32", "minimum", 2.5, "f64"), ("i64", "maximum", 1, "i32"), ("f64", "sub", 1, "i64"),
        ("f32", "hypot", 3.0, "f64"), ("i32", "atan2", 1.0, "f64"), ("f32", "ne", 1, "i64"),
        ("bool", "and", 1.5, "f64"), ("f32", "mul", False, "bool"), ("i32", "ge", True, "bool"),
    ]
    for dt, op, v, tag in cases:
        x = base[dt]
        if op == "pow" and dt == "i32":
            x = np.abs(x)
        s = py_scalar(v, tag)
        add(f"weak/{dt}_{op}_{tag}_{str(v).replace(' ', '')}", f"bs:{op}", [scalar_param(v, tag)],
            [x], BINARY_NP[op](x, s))
    lhs = [
        ("f32", "sub", 2.0, "f64"), ("i32", "div", 1.0, "f64"), ("i32", "mod", 7, "i64"),
        ("c64", "mul", 2.5, "f64"), ("f32", "div", 1, "i32"), ("i64", "sub", 10, "i64"),
        ("bool", "add", 2, "i64"), ("f64", "mod", -7.5, "f64"), ("f32", "add", 1j, "c128"),
    ]
    for dt, op, v, tag in lhs:
        x = base[dt]
        if op in ("div", "mod"):
            x = regular(dt, (2, 5), rng, nonzero=True)
        s = py_scalar(v, tag)
        add(f"weak/lhs_{tag}_{op}_{dt}_{str(v).replace(' ', '')}", f"sb:{op}",
            [scalar_param(v, tag)], [x], BINARY_NP[op](s, x))
    # powf / powi
    for dt, p in [("f32", 0.5), ("f64", -1.5), ("i32", 0.5), ("f32", 3.0)]:
        x = np.abs(regular(dt, (6,), rng, nonzero=True))
        add(f"weak/powf_{dt}_{p}", "powf", [f"f64:{fr(p)}"], [x], np.power(x, p))
    for dt, p in [("f32", 3), ("f64", -2), ("i32", 2), ("i64", 5), ("c64", 3)]:
        x = regular(dt, (6,), rng, nonzero=True)
        add(f"weak/powi_{dt}_{p}", "powi", [f"i32:{p}"], [x], np.power(x, p))
    # clip
    for dt in FLOATS:
        x = arr(SPECIAL[dt], dt)
        add(f"clip/{dt}_scalar", "clip", [f"f64:{fr(-1.0)}", f"f64:{fr(2.0)}"], [x],
            np.clip(x, -1.0, 2.0), flags="sz")
        add(f"clip/{dt}_nan_lo", "clip", [f"f64:nan", f"f64:{fr(2.0)}"], [x],
            np.clip(x, np.nan, 2.0))
        add(f"clip/{dt}_nan_hi", "clip", [f"f64:{fr(-1.0)}", f"f64:nan"], [x],
            np.clip(x, -1.0, np.nan))
        lo = arr([-1.0, np.nan, 0.0], dt).reshape(3, 1)
        hi = arr([0.5, 3.0, np.nan, 10.0], dt).reshape(1, 1, 4)
        xx = x.reshape(-1, 1, 1)
        add(f"clip/{dt}_arrays", "clip_arr", [], [xx, lo, hi], np.clip(xx, lo, hi))
    for dt in INTS:
        x = arr(ISPECIAL[dt], dt)
        add(f"clip/{dt}_scalar", "clip", [f"i64:-3", f"i64:5"], [x], np.clip(x, -3, 5))
        add(f"clip/{dt}_float_bounds", "clip", [f"f64:-2.5", f"f64:2.5"], [x],
            np.clip(x, -2.5, 2.5))
    # where
    c = rng.random((3, 4)) < 0.5
    a32, b32 = regular("f32", (3, 4), rng), regular("f32", (3, 4), rng)
    add("where/f32_f32", "where", [], [c, a32, b32], np.where(c, a32, b32))
    ai = regular("i32", (1, 4), rng)
    bf = regular("f32", (3, 1), rng)
    add("where/i32_f32_bcast", "where", [], [c, ai, bf], np.where(c, ai, bf))
    cc = (rng.random((3, 1)) < 0.5)
    add("where/cond_bcast", "where", [], [cc, a32, np.array(2.0, np.float32)],
        np.where(cc, a32, np.float32(2.0)))
    ci = regular("i32", (3, 4), rng)
    add("where/int_cond", "where", [], [ci, a32, b32], np.where(ci, a32, b32))
    cf = arr([np.nan, 0.0, -0.0, 1.0], "f64")
    add("where/float_cond", "where", [], [cf, arr([1, 2, 3, 4], "i64"), arr([5, 6, 7, 8], "i64")],
        np.where(cf, arr([1, 2, 3, 4], "i64"), arr([5, 6, 7, 8], "i64")))
    add("where/array_scalar_f32", "where_as", ["f64:0.0"], [c, a32], np.where(c, a32, 0.0))
    add("where/scalar_array_i32", "where_sa", ["f64:2.5"], [c, ci], np.where(c, 2.5, ci))
    add("where/scalars_int_float", "where_ss", ["i64:1", "f64:0.5"], [c], np.where(c, 1, 0.5))
    add("where/scalars_int", "where_ss", ["i64:1", "i64:-4"], [c], np.where(c, 1, -4))
    xc = regular("c64", (3, 4), rng)
    add("where/c64_scalar", "where_as", ["f64:0.0"], [c, xc], np.where(c, xc, 0.0))
    zc = regular("c128", (4,), rng)
    add("where/f32_c128", "where", [], [c, a32, zc], np.where(c, a32, zc))
    # lf::complex
    for da, db in [("f32", "f32"), ("f64", "f64"), ("f32", "f64"), ("i32", "f32")]:
        re = regular(da, (3, 1), rng)
        im = regular(db, (4,), rng)
        t = np.result_type(re.dtype, im.dtype)
        t = np.float64 if t.kind in "iu" else t
        out = cplx(*np.broadcast_arrays(re.astype(t), im.astype(t)),
                   "c64" if t == np.float32 else "c128")
        add(f"weak/complex_{da}_{db}", "complex", [], [re, im], out)
    re = arr([np.inf, np.nan, -0.0, 1.0], "f32")
    im = arr([np.nan, 1.0, -0.0, -np.inf], "f32")
    add("weak/complex_specials", "complex", [], [re, im], cplx(re, im, "c64"), flags="sz")


# ---------------------------------------------------------------------------------------
# astype between every pair

CAST_VALUES = {
    "bool": [True, False, True],
    "i32": [-2**31, -7, -1, 0, 1, 7, 255, 256, 2**31 - 1, 16777217, 123456789],
    "i64": [-2**63, -2**31 - 1, 2**31, -7, 0, 1, 2**53 + 1, 2**63 - 1, 3000000000, 2**40,
            2**60 + 2**36 + 1, -(2**60 + 2**36 + 1)],
    "f32": [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 1e10, -1e10,
            2147483520.0, 2147483648.0, -2147483648.0, 1e-40, 3.4028234663852886e38, 0.1,
            255.9, 16777217.0, 9.2233715e18, -9.2233715e18, 1e19],
    "f64": [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 1e10, -1e10,
            2147483647.9, -2147483648.9, 2147483648.0, -2147483649.0, 1e300, -1e300, 5e-324,
            1e-310, 0.1, 255.9, 1e19, -9.2e18, 9007199254740993.0, 3.4028235677973366e38,
            1.00000005960464477539],
}


def gen_cast():
    for src in ALL:
        if src in COMPLEX:
            re = [np.nan, 1.5, 0.0, -0.0, np.inf, 1e10, 0.0, -2.7, 1e300]
            im = [0.0, -2.0, 3.0, -0.0, np.nan, 1.0, 0.0, 0.5, -1e300]
            x = cplx(re, im, src)
        else:
            x = arr(CAST_VALUES[src], src)
        for dst in ALL:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = x.astype(DT[dst])
            add(f"cast/{src}_to_{dst}", f"astype:{dst}", [], [x], y, flags="sz")


# ---------------------------------------------------------------------------------------
# Views

def np_slice(a, spec):
    """Applies ndarray-style slice elements (lf::s! semantics) with NumPy: a range selects
    a[start:end] and a negative step then walks that range from its end; an index drops the
    axis; `na` inserts one."""
    idx, steps = [], []
    for s in spec:
        if s[0] == "sl":
            idx.append(slice(s[1], s[2]))
            steps.append(slice(None, None, s[3]))
        elif s[0] == "ix":
            idx.append(s[1])
        else:
            idx.append(None)
            steps.append(slice(None))
    return a[tuple(idx)][tuple(steps)]


def sl_param(s):
    if s[0] == "sl":
        end = "n" if s[2] is None else str(s[2])
        return f"sl:{s[1]}:{end}:{s[3]}"
    if s[0] == "ix":
        return f"ix:{s[1]}"
    return "na"


def gen_views():
    rng = np.random.default_rng(404)
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    f = regular("f64", (2, 3, 4), rng)
    for x, dt in [(a, "i32"), (f, "f64")]:
        add(f"view/reshape_{dt}", "reshape", ["i:4", "i:-1"], [x], x.reshape(4, -1))
        add(f"view/reshape_flat_{dt}", "reshape", ["i:-1"], [x], x.reshape(-1))
        add(f"view/transpose_{dt}", "transpose", [], [x], x.transpose())
        add(f"view/permute_{dt}", "permute", ["i:1", "i:0", "i:2"], [x], x.transpose(1, 0, 2))
        add(f"view/swapaxes_{dt}", "swapaxes", ["i:0", "i:-1"], [x], np.swapaxes(x, 0, -1))
        add(f"view/expand_dims_{dt}", "expand_dims", ["i:-1"], [x], np.expand_dims(x, -1))
        add(f"view/flip0_{dt}", "flip", ["i:0"], [x], np.flip(x, 0))
        add(f"view/flip_last_{dt}", "flip", ["i:-1"], [x], np.flip(x, -1))
        for sh in [1, -2, 7, 0]:
            add(f"view/roll_{sh}_{dt}", "roll", [f"i:{sh}", "i:-1"], [x], np.roll(x, sh, -1))
        add(f"view/roll_axis1_{dt}", "roll", ["i:2", "i:1"], [x], np.roll(x, 2, 1))
        add(f"view/transpose_reshape_{dt}", "transpose_reshape", ["i:6", "i:4"], [x],
            x.transpose().reshape(6, 4))
    b = regular("f32", (1, 4), rng)
    add("view/broadcast_to", "broadcast_to", ["i:3", "i:2", "i:4"], [b],
        np.broadcast_to(b, (3, 2, 4)))
    add("view/squeeze", "squeeze", ["i:0"], [b], np.squeeze(b, 0))
    m = np.arange(35, dtype=np.int64).reshape(5, 7)
    mf = regular("f32", (5, 7), rng)
    specs = [
        [("sl", 1, 5, 2), ("sl", 0, None, -1)],
        [("sl", -4, None, 3), ("sl", 1, 6, -2)],
        [("sl", 0, None, -2), ("sl", 2, 3, 1)],
        [("sl", 0, 100, 1), ("sl", -100, -2, 3)],
        [("ix", 2), ("sl", 0, None, 2)],
        [("sl", 1, 4, 1), ("ix", -1)],
        [("na",), ("sl", 4, 1, 1), ("sl", 0, None, 1)],
        [("sl", 0, None, -3), ("na",), ("sl", -1, None, -1)],
    ]
    for i, spec in enumerate(specs):
        for x, dt in [(m, "i64"), (mf, "f32")]:
            add(f"view/slice{i}_{dt}", "slice", [sl_param(s) for s in spec], [x],
                np_slice(x, spec))
    add("view/slice_then_add", "slice_add", [sl_param(s) for s in specs[1]], [mf],
        np_slice(mf, specs[1]) + np.float32(1.0))
    # pad
    p = regular("f64", (3, 4), rng)
    add("view/pad_f64", "pad", ["w:1:2", "w:0:3", "f64:7.5"], [p],
        np.pad(p, ((1, 2), (0, 3)), constant_values=7.5))
    pi = np.arange(6, dtype=np.int32).reshape(2, 3)
    add("view/pad_i32_all", "pad", ["w:2:1", "f64:-2.0"], [pi],
        np.pad(pi, ((2, 1), (2, 1)), constant_values=-2))
    pc = regular("c64", (2, 2), rng)
    add("view/pad_c64", "pad", ["w:1:1", "f64:0.0"], [pc], np.pad(pc, 1))
    pb = np.array([[True, False]])
    add("view/pad_bool", "pad", ["w:1:0", "w:0:2", "f64:0.0"], [pb],
        np.pad(pb, ((1, 0), (0, 2))))
    # concatenate / stack
    c1, c2, c3 = regular("f32", (2, 3), rng), regular("f32", (1, 3), rng), regular("f32", (4, 3), rng)
    add("view/concat_axis0", "concat", ["i:0"], [c1, c2, c3], np.concatenate([c1, c2, c3], 0))
    d1, d2 = regular("i32", (2, 3), rng), regular("i32", (2, 1), rng)
    add("view/concat_axis_last", "concat", ["i:-1"], [d1, d2], np.concatenate([d1, d2], -1))
    e1 = regular("f64", (2, 1), rng)
    add("view/concat_promote", "concat", ["i:1"], [d1, e1], np.concatenate([d1, e1], 1))
    s1, s2, s3 = (regular("i64", (2, 3), rng) for _ in range(3))
    for ax in [0, 1, -1]:
        add(f"view/stack_{ax}", "stack", [f"i:{ax}"], [s1, s2, s3], np.stack([s1, s2, s3], ax))
    # views feeding elementwise work, a node read at two indices
    x = regular("f32", (4, 5), rng)
    add("view/roll_plus_self", "roll_add", ["i:1", "i:0"], [x], np.roll(np.sin(x), 1, 0) + np.sin(x))
    add("view/flip_minus_self", "flip_sub", ["i:1"], [x], np.flip(x * 2, 1) - x * 2)
    y = regular("f32", (5, 4), rng)
    add("view/transpose_plus", "transpose_add", [], [x, y], x.T + y)
    add("view/pad_roll_mul", "pad_roll_mul", [], [x], np.roll(np.pad(x * 3, 1, constant_values=1.0), -2, 1) * 0.5)


# ---------------------------------------------------------------------------------------
# Creation

def gen_creation():
    for start, stop, step, dt in [(0, 10, 1, "i32"), (-5, 7, 2, "i64"), (0, 1, 0.1, "f64"),
                                  (0, 1, 0.1, "f32"), (10, 0, -3, "i32"), (0.5, 4, 0.5, "f64"),
                                  (1, 1, 1, "f64"), (2.5, -1, -0.7, "f64"), (0, 5, 1, "c64"),
                                  (-3, 3, 1.5, "f32")]:
        y = np.arange(start, stop, step, dtype=DT[dt])
        add(f"creation/arange_{start}_{stop}_{step}_{dt}", "arange",
            [f"f64:{fr(start)}", f"f64:{fr(stop)}", f"f64:{fr(step)}", f"dt:{dt}"], [], y)
    for start, stop, num, dt in [(0, 1, 11, "f64"), (-1, 1, 8, "f32"), (-3, 7, 6, "i32"),
                                 (0, 10, 7, "i64"), (-5, 5, 8, "i32"), (2, 3, 1, "f64"),
                                 (0, 1, 0, "f64"), (1, 0, 5, "f32"), (-1, 1, 783, "f32"),
                                 (0, 100, 13, "c128"), (-7.5, 2.25, 9, "i64")]:
        y = np.linspace(start, stop, num, dtype=DT[dt])
        add(f"creation/linspace_{start}_{stop}_{num}_{dt}", "linspace",
            [f"f64:{fr(start)}", f"f64:{fr(stop)}", f"i:{num}", f"dt:{dt}"], [], y)
    for n, dt in [(4, "f64"), (3, "i32"), (3, "bool"), (2, "c64"), (1, "f32")]:
        add(f"creation/eye_{n}_{dt}", "eye", [f"i:{n}", f"dt:{dt}"], [], np.eye(n, dtype=DT[dt]))
    x = np.linspace(-1, 1, 3).astype(np.float32)
    y = np.array([10, 20, 30, 40], dtype=np.int32)
    z = np.array([0.5, 1.5], dtype=np.float64)
    add("creation/meshgrid_xy_2", "meshgrid_xy", [], [x, y], np.meshgrid(x, y, indexing="xy"))
    add("creation/meshgrid_ij_2", "meshgrid_ij", [], [x, y], np.meshgrid(x, y, indexing="ij"))
    add("creation/meshgrid_xy_3", "meshgrid_xy", [], [x, y, z], np.meshgrid(x, y, z, indexing="xy"))
    add("creation/meshgrid_ij_3", "meshgrid_ij", [], [x, y, z], np.meshgrid(x, y, z, indexing="ij"))
    add("creation/meshgrid_xy_1", "meshgrid_xy", [], [y], np.meshgrid(y, indexing="xy"))
    add("creation/zeros_ones_full", "zeros_ones_full", [], [],
        [np.zeros((2, 3), np.float32), np.ones((3,), np.int64),
         np.full((2, 2), 2.5, dtype=np.complex128), np.full((2,), -1.7, dtype=np.int32)])


# ---------------------------------------------------------------------------------------
# Workloads: the PSF pipeline before its FFT, and the BENCH.md chain

def psf_pre_fft(n):
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = np.linspace(-1, 1, n, dtype=np.float32)
    xx, yy = np.meshgrid(x, y)
    rho, phi = np.sqrt(xx**2 + yy**2), np.arctan2(yy, xx)
    phase_err = rho**2 * np.cos(phi)
    mask = rho > 1
    wv = np.exp(1j * 2 * np.float32(np.pi) * phase_err).astype(np.complex64)
    wv[mask] = 0
    pad = n // 2
    padded = np.pad(wv, ((pad, pad), (pad, pad)), mode="constant", constant_values=0)
    shifted = np.fft.ifftshift(padded)
    return [rho, phase_err, padded, shifted]


def chain(x, y):
    r = np.sqrt(x * x + y * y)
    t = np.arctan2(y, x)
    z = r * np.cos(t) + np.exp(-0.5 * r) * np.sin(t)
    return np.where(z > 0, z, 0.1 * z) + 1


def gen_workloads():
    for n in (16, 32):
        add(f"workload/psf_pre_fft_{n}", "psf", [f"i:{n}"], [], psf_pre_fft(n))
    rng = np.random.default_rng(505)
    n = 783
    x = rng.normal(0, 2, n).astype(np.float32)
    y = rng.normal(0, 2, n).astype(np.float32)
    add("workload/chain_783", "chain", [], [x, y], chain(x, y))
    x2 = rng.normal(0, 2, (27, 29)).astype(np.float32)
    y2 = rng.normal(0, 2, (29,)).astype(np.float32)
    add("workload/chain_bcast_27x29", "chain", [], [x2, y2], chain(x2, y2))
    a = np.arange(20, dtype=np.float64).reshape(4, 5)
    b = np.arange(300, dtype=np.float64).reshape(15, 4, 5)
    add("workload/bcast_small", "b:mul", [], [a, b], a * b)


# ---------------------------------------------------------------------------------------
# Reductions

# NumPy function of each reduction id; `r:OP` reduces all elements, `ra:OP` the `i:` axes
# (with `kd:` keepdims and, for var/std, `ddof:`), `arg:max`/`arg:min` one `i:` axis.
RED_NP = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min,
          "all": np.all, "any": np.any, "var": np.var, "std": np.std}
# lazyfuse refuses complex max/min/argmax/argmin (complex values have no order)
RED_ORDERED = ["max", "min"]


def red_ok(op, dt):
    return not (op in RED_ORDERED and dt in COMPLEX)


def red_values(op, dt, shape, rng):
    """Inputs for `op`: products of values near +-1 (no overflow in floats), else regular."""
    n = int(np.prod(shape))
    if op == "prod" and dt in FLOATS:
        v = rng.uniform(0.8, 1.25, size=n) * np.where(rng.random(n) < 0.3, -1.0, 1.0)
        return v.reshape(shape).astype(DT[dt])
    if op == "prod" and dt in COMPLEX:
        ang = rng.uniform(-np.pi, np.pi, size=n)
        mag = rng.uniform(0.9, 1.1, size=n)
        return cplx((mag * np.cos(ang)).reshape(shape), (mag * np.sin(ang)).reshape(shape), dt)
    if op in ("all", "any") and dt != "bool":
        # mostly nonzero, so that `all` is not always False
        x = regular(dt, shape, rng, nonzero=True)
        z = rng.random(shape) < (0.5 / max(n, 1) if n > 8 else 0.2)
        x[z] = 0
        return x
    return regular(dt, shape, rng)


def red_case(name, op, x, axes=None, keepdims=False, ddof=0, flags=""):
    f = RED_NP[op]
    kw = {}
    if op in ("var", "std") and ddof:
        kw["ddof"] = ddof
    if axes is None:
        if keepdims or ddof:
            raise ValueError("full reductions take no keepdims/ddof")
        y = f(x, **kw)
        add(name, f"r:{op}", [], [x], np.asarray(y), flags=flags)
        return
    y = f(x, axis=tuple(axes), keepdims=keepdims, **kw)
    params = [f"i:{a}" for a in axes] + [f"kd:{int(keepdims)}"]
    if op in ("var", "std"):
        params.append(f"ddof:{ddof}")
    add(name, f"ra:{op}", params, [x], np.asarray(y), flags=flags)


def ax_name(axes, keepdims, ddof=0):
    s = "all" if axes is None else ("ax" + "_".join(str(a) for a in axes) if axes else "ax_none")
    return s + ("_kd" if keepdims else "") + (f"_ddof{ddof}" if ddof else "")


def shape_name(shape):
    return "x".join(str(d) for d in shape) if shape else "0d"


def gen_reduce():
    rng = np.random.default_rng(606)
    # (shape, axes, keepdims): every op and dtype; the big shapes below only for floats
    small = [((), None, False), ((), [], False), ((0,), None, False), ((1,), None, False),
             ((3,), None, False), ((3,), [-1], True), ((2, 3, 4), [0], False),
             ((2, 3, 4), [1], True), ((2, 3, 4), [-1], False), ((2, 3, 4), [0, 2], False),
             ((2, 3, 4), [-3, -1], True), ((2, 3, 4), [2, 0, 1], False),
             ((2, 3, 4), [], False), ((4, 1, 5), [1], False), ((3, 0, 2), None, False),
             ((3, 0, 2), [1], False), ((3, 0, 2), [0], True), ((3, 0, 2), [0, -1], False)]
    big = [((783,), None, False), ((783,), [0], True), ((7, 129), None, False),
           ((7, 129), [0], False), ((7, 129), [-1], True), ((7, 129), [1, 0], False)]
    for op in RED_NP:
        for dt in ALL:
            if not red_ok(op, dt):
                continue
            # (keeps fixtures.txt small: the big shapes mostly where accuracy is at stake)
            if dt in FLOATS:
                cfgs = small + (big if op in ("sum", "mean", "var", "std", "prod")
                                else big[2:4])
            elif dt in COMPLEX:
                cfgs = small + (big[:1] if op in ("sum", "mean", "var") else [])
            else:
                cfgs = small + big[3:4]
            for shape, axes, kd in cfgs:
                n_red = (int(np.prod(shape)) if axes is None
                         else int(np.prod([shape[a] for a in axes])))
                if op in ("max", "min") and n_red == 0 and int(np.prod(shape)) == 0:
                    if axes is None or any(shape[a] == 0 for a in axes):
                        continue  # NumPy raises: no identity
                x = red_values(op, dt, shape, rng)
                red_case(f"reduce/{op}_{dt}_{shape_name(shape)}_{ax_name(axes, kd)}", op, x,
                         axes, kd)
    # ddof (var and std)
    for dt in ["f32", "f64", "i32", "c64", "c128", "bool"]:
        x = regular(dt, (3, 5), rng)
        for op in ("var", "std"):
            for axes, kd, ddof in [([-1], False, 1), ([0], True, 2), ([0, 1], False, 1),
                                   ([0], False, 3), ([1], False, 7)]:
                red_case(f"reduce/{op}_{dt}_3x5_{ax_name(axes, kd, ddof)}", op, x, axes, kd,
                         ddof)
    # argmax / argmin (first occurrence of ties)
    for dt in ["bool", "i32", "i64", "f32", "f64"]:
        for shape, axes in [((1,), [0]), ((7,), [0]), ((7,), [-1]), ((2, 3, 4), [0]),
                            ((2, 3, 4), [1]), ((2, 3, 4), [-1]), ((7, 129), [1]),
                            ((7, 129), [0]), ((783,), [0]), ((3, 0, 2), [0]), ((3, 0, 2), [2])]:
            x = regular(dt, shape, rng)
            if dt in INTS:
                x = (x // 3).astype(DT[dt])  # many ties
            for op, f in (("max", np.argmax), ("min", np.argmin)):
                add(f"reduce/arg{op}_{dt}_{shape_name(shape)}_ax{axes[0]}", f"arg:{op}",
                    [f"i:{axes[0]}"], [x], np.asarray(f(x, axis=axes[0])))
    # linalg.norm of all elements
    for dt in ALL:
        for shape in [(0,), (1,), (3,), (2, 3, 4)] + ([(783,), (7, 129)] if dt in FLOATS else []):
            x = regular(dt, shape, rng)
            add(f"reduce/norm_{dt}_{shape_name(shape)}", "norm", [], [x],
                np.asarray(np.linalg.norm(x)))
    # special values: NaN propagation, infinities, signed zeros, integer extremes
    for dt in FLOATS:
        nan, inf = np.nan, np.inf
        rows = arr([[1.0, nan, 3.0, nan], [-inf, 2.0, inf, 0.0], [inf, inf, 1.0, -2.0],
                    [-0.0, -0.0, -0.0, -0.0], [0.0, -0.0, 0.0, -0.0], [-inf, -inf, -5.0, -inf],
                    [2.0, 5.0, 5.0, -1.0], [nan, 1.0, -inf, nan]], dt)
        for op in ["sum", "prod", "mean", "max", "min", "all", "any", "var", "std"]:
            red_case(f"reduce/special_{op}_{dt}_rows", op, rows, [-1], False)
            red_case(f"reduce/special_{op}_{dt}_cols", op, rows, [0], True)
            red_case(f"reduce/special_{op}_{dt}_all", op, rows, None)
        for op, f in (("max", np.argmax), ("min", np.argmin)):
            add(f"reduce/special_arg{op}_{dt}_rows", f"arg:{op}", ["i:1"], [rows],
                np.asarray(f(rows, axis=1)))
            add(f"reduce/special_arg{op}_{dt}_cols", f"arg:{op}", ["i:0"], [rows],
                np.asarray(f(rows, axis=0)))
        add(f"reduce/special_norm_{dt}", "norm", [], [rows[1]], np.asarray(np.linalg.norm(rows[1])))
        add(f"reduce/special_norm_nan_{dt}", "norm", [], [rows[0]],
            np.asarray(np.linalg.norm(rows[0])))
        # the sign of zero: NumPy's sum of -0.0 values is +0.0 (its pairwise sum starts at
        # +0.0); prod keeps the sign
        negz = arr([-0.0, -0.0, -0.0], dt)
        for op in ("sum", "prod", "mean", "max", "min"):
            red_case(f"reduce/signed_zero_{op}_{dt}", op, negz, None, flags="sz")
        # overflow of an F32/F64 sum to infinity
        big = arr([np.finfo(DT[dt]).max] * 4 + [-1.0], dt)
        red_case(f"reduce/overflow_sum_{dt}", "sum", big, None)
        red_case(f"reduce/overflow_mean_{dt}", "mean", big, None)
        tiny = arr([np.finfo(DT[dt]).smallest_subnormal] * 6 + [-0.0], dt)
        red_case(f"reduce/subnormal_sum_{dt}", "sum", tiny, None)
        red_case(f"reduce/subnormal_min_{dt}", "min", tiny, None)
    for dt in COMPLEX:
        s = complex_specials(dt).reshape(7, 7)
        for op in ("sum", "mean", "prod", "all", "any"):
            red_case(f"reduce/special_{op}_{dt}_rows", op, s, [1], False)
    for dt in INTS:
        x = arr(ISPECIAL[dt], dt).reshape(2, 7)
        for op in ["sum", "prod", "max", "min", "mean", "all", "any"]:
            red_case(f"reduce/special_{op}_{dt}_rows", op, x, [-1], True)
            red_case(f"reduce/special_{op}_{dt}_all", op, x, None)
        for op, f in (("max", np.argmax), ("min", np.argmin)):
            add(f"reduce/special_arg{op}_{dt}", f"arg:{op}", ["i:1"], [x],
                np.asarray(f(x, axis=1)))
    # products that overflow I64 wrap around like NumPy's
    w = arr([3037000500, 3037000500, -7, 2**62, 5, 2**40, 2**40, 1], "i64")
    red_case("reduce/prod_i64_wraps", "prod", w, None)
    red_case("reduce/sum_i64_wraps", "sum", arr([2**63 - 1, 2**63 - 1, 5], "i64"), None)
    red_case("reduce/sum_i32_widens", "sum", arr([2**31 - 1] * 3, "i32"), None)
    # a long F32 sum, where a serial loop loses about 1e-4 relative and a pairwise one not
    x = rng.uniform(0.0, 1.0, 1024).astype(np.float32)
    add("reduce/sum_f32_broadcast_131072", "bsum", ["i:128"], [x],
        np.asarray(np.broadcast_to(x, (128, 1024)).sum(dtype=np.float32)))
    # reductions fused with elementwise work before and after them
    for dt in FLOATS + ["c128"]:
        x = regular(dt, (6, 7, 5), rng)
        for axes in ([-1], [0, 2], [1]):
            m = np.mean(x, axis=tuple(axes), keepdims=True)
            add(f"reduce/center_{dt}_{ax_name(axes, True)}", "center",
                [f"i:{a}" for a in axes], [x], x - m)
    for dt in FLOATS:
        x = regular(dt, (6, 7, 5), rng)
        for axes in ([-1], [0, 2]):
            ax = tuple(axes)
            e = np.exp(x - np.max(x, axis=ax, keepdims=True))
            add(f"reduce/softmax_{dt}_{ax_name(axes, True)}", "softmax",
                [f"i:{a}" for a in axes], [x], e / np.sum(e, axis=ax, keepdims=True))
            z = (x - np.mean(x, axis=ax, keepdims=True)) / np.std(x, axis=ax, keepdims=True)
            add(f"reduce/zscore_{dt}_{ax_name(axes, True)}", "zscore",
                [f"i:{a}" for a in axes], [x], z)
            add(f"reduce/sumsq_t_{dt}_{ax_name(axes, False)}", "sumsq_t",
                [f"i:{a}" for a in axes], [x], np.sum(x.T * x.T + 1, axis=ax))
            add(f"reduce/max_epilogue_{dt}_{ax_name(axes, False)}", "max_epilogue",
                [f"i:{a}" for a in axes], [x], np.max(x, axis=ax) * 2 - 1)


# ---------------------------------------------------------------------------------------
# FFT over repeated axes (read by tests/fft.rs, not tests/numpy_fixtures.rs): `rfftn` with
# the `i:` axes; `irfftn` with the `i:` axes, and `irfftn_n` whose first `i:` is the last
# axis's output length `n` (the other axes keep their lengths).

def gen_fft():
    rng = np.random.default_rng(606)
    x = rng.normal(0, 1, (4, 3, 6))
    for dt, cases in [("f64", [(0, 0), (2, 2), (0, 2, 0), (2, 0, 2), (1, 1, 1), (-1, 0, -1)]),
                      ("f32", [(0, 0), (2, 0, 2)])]:
        xd = x.astype(DT[dt])
        for axes in cases:
            name = "_".join(str(a) for a in axes).replace("-", "m")
            add(f"fft/rfftn_{dt}_{name}", "rfftn", [f"i:{a}" for a in axes], [xd],
                np.fft.rfftn(xd, axes=axes))
    z = cplx(rng.normal(0, 1, (4, 3, 5)), rng.normal(0, 1, (4, 3, 5)), "c128")
    for axes, n in [((0, 0), None), ((2, 2), None), ((1, 1, 1), None), ((2, 0, 2), 9),
                    ((0, 2, 0), 7), ((-1, -1), 4)]:
        name = "_".join(str(a) for a in axes).replace("-", "m")
        if n is None:
            add(f"fft/irfftn_{name}", "irfftn", [f"i:{a}" for a in axes], [z],
                np.fft.irfftn(z, axes=axes))
        else:
            s = [z.shape[a] for a in axes[:-1]] + [n]
            add(f"fft/irfftn_{name}_n{n}", "irfftn_n", [f"i:{n}"] + [f"i:{a}" for a in axes],
                [z], np.fft.irfftn(z, s=s, axes=axes))


def main():
    if not np.__version__.startswith("2."):
        sys.exit(f"NumPy 2.x required, found {np.__version__}")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen_unary()
        gen_binary()
        gen_weak()
        gen_cast()
        gen_views()
        gen_creation()
        gen_workloads()
        gen_reduce()
        gen_fft()
    header = [
        "# NumPy reference fixtures for tests/numpy_fixtures.rs -- generated by tests/data/gen.py,",
        "# do not edit. Format: see the docstring of gen.py.",
        f"# numpy {np.__version__}; python {platform.python_version()}; {platform.machine()}",
        f"# cases {len(lines)}",
    ]
    with open(OUT, "w", newline="\n") as fh:
        fh.write("\n".join(header + lines) + "\n")
    print(f"wrote {len(lines)} cases, {os.path.getsize(OUT)} bytes to {OUT}")


if __name__ == "__main__":
    main()
