#!/usr/bin/env python3
"""Generates tests/data/dtypes.txt: NumPy reference results for the small integer, unsigned
and 16-bit float dtypes (uint8 ... uint64, int8, int16, float16, bfloat16), read by
tests/dtypes.rs.

Run from anywhere: `python3 tests/data/gen_dtypes.py` (needs NumPy 2.x). The output is
deterministic and committed; the NumPy version that produced it is in its header.

bfloat16 without ml_dtypes: NumPy has no bfloat16, so its values are computed here the way
ml_dtypes computes them: a bfloat16 is the upper 16 bits of a float32; an operation on
bfloat16 values converts them to float32 (exactly), computes in float32 with NumPy and
rounds the float32 result to bfloat16 (to nearest, ties to even); a conversion from any
other value rounds the exact value once (see `bf16_bits`, which works in exact rational
arithmetic). Promotion with bfloat16 follows ml_dtypes: with float16 it gives float32, with
bool, integers and complex it behaves like float16 (`result_dtype`).

File format (one case per line; lines starting with '#' are comments):

    name | op | params | tol | inputs | outputs

* op: an operation name that tests/dtypes.rs maps to a lazyfuse expression.
* params: space-separated tokens (`-` when none): `si:V` a weak Rust integer scalar (V up to
  2^64 - 1), `sf:V` a weak Rust f64 scalar, `sc:RE:IM` a weak complex scalar, `dt:NAME` a
  dtype, `i:V` an integer (axis, count), `f:V` a float (creation values).
* tol: `0` exact (NaN must be NaN, zeros' signs must match), `uN` within N units in the last
  place of the output dtype, `rX` relative X of the largest output magnitude (FFTs).
* inputs / outputs: `;`-separated arrays `dtype [d0,d1,..] HEX` (raw little-endian bytes in
  C order, `_` when empty), dtypes bool i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16 f32 f64 c64
  c128 (bf16 as its 16 bits).
"""

import os
import struct
import warnings
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "dtypes.txt")

NP = {
    "bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
    "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
}
ALL = ["bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16",
       "f32", "f64", "c64", "c128"]
NEW_INTS = ["i8", "u8", "i16", "u16", "u32", "u64"]
INTS = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]
HALF = ["f16", "bf16"]
NAME = {np.dtype(v): k for k, v in NP.items()}

lines = []
names = set()


# ----------------------------------------------------------------------------------------
# bfloat16, emulated
# ----------------------------------------------------------------------------------------

class BF:
    """A bfloat16 array: its bits (uint16) in a NumPy array."""

    def __init__(self, bits):
        self.bits = np.asarray(bits, dtype=np.uint16)

    @property
    def shape(self):
        return self.bits.shape

    def f32(self):
        return (self.bits.astype(np.uint32) << 16).view(np.float32)


def bf16_bits(x):
    """The bfloat16 bits of the exact value x (int, float or NumPy scalar), rounded once to
    nearest, ties to even."""
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if x != x:
            return 0x7FC0 | (0x8000 if np.signbit(x) else 0)
        if x in (float("inf"), float("-inf")):
            return 0x7F80 | (0x8000 if x < 0 else 0)
        if x == 0:
            return 0x8000 if np.signbit(x) else 0
    v = Fraction(x)
    neg = v < 0
    v = abs(v)
    sign = 0x8000 if neg else 0
    if v == 0:
        return sign
    # candidates: every bfloat16 magnitude is m * 2^(e-7) with 8 significant bits
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    e = max(e, -126)  # subnormals share the smallest exponent
    q = Fraction(2) ** (e - 7)
    m = v / q
    lo = int(m)  # floor
    rem = m - lo
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2 == 1):
        lo += 1
    val = lo * q
    if val >= Fraction(2) ** 128:
        return sign | 0x7F80
    # back to bits through float32 (exact: val is a bfloat16 value)
    b = struct.unpack("<I", struct.pack("<f", float(val)))[0] >> 16
    return sign | b


def to_bf(a):
    """A NumPy array (any dtype) converted to bfloat16 with one rounding per element."""
    a = np.asarray(a)
    flat = a.reshape(-1)
    if a.dtype.kind == "c":
        flat = flat.real
    if a.dtype == np.bool_:
        flat = flat.astype(np.int64)
    if a.dtype.kind in "iub":
        out = [bf16_bits(int(x)) for x in flat]
    else:
        out = [bf16_bits(float(x)) for x in flat]
    return BF(np.array(out, dtype=np.uint16).reshape(a.shape))


def result_dtype(a, b):
    """NumPy's result_type, with bfloat16 as ml_dtypes promotes it."""
    if a == "bf16" or b == "bf16":
        o = b if a == "bf16" else a
        if o in ("bf16", "bool", "i8", "u8"):
            return "bf16"
        if o == "f16":
            return "f32"
        return NAME[np.result_type(np.float16, NP[o])]
    return NAME[np.result_type(NP[a], NP[b])]


# ----------------------------------------------------------------------------------------
# Encoding
# ----------------------------------------------------------------------------------------

def enc(a):
    if isinstance(a, BF):
        name, data, shape = "bf16", a.bits.astype("<u2"), a.shape
    else:
        a = np.asarray(a)
        name, data, shape = NAME[a.dtype], a.astype(a.dtype.newbyteorder("<")), a.shape
    hexs = np.ascontiguousarray(data).tobytes().hex() or "_"
    return f"{name} [{','.join(str(d) for d in shape)}] {hexs}"


def add(name, op, params, tol, inputs, outputs):
    assert name not in names, name
    names.add(name)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    p = " ".join(params) if params else "-"
    ins = " ; ".join(enc(a) for a in inputs) if inputs else "-"
    lines.append(f"{name} | {op} | {p} | {tol} | {ins} | "
                 f"{' ; '.join(enc(a) for a in outputs)}")


# ----------------------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------------------

def int_values(d):
    info = np.iinfo(NP[d])
    lo, hi = int(info.min), int(info.max)
    v = [0, 1, 2, 3, 7, 13, 100 % (hi + 1), hi, hi - 1, hi // 2, hi // 2 + 1]
    if lo < 0:
        v += [-1, -2, -7, lo, lo + 1]
    if d == "u64":
        v += [2**63 + 1, 2**64 - 2]
    return np.array(v, dtype=NP[d])


FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.14159, 100.0, 0.1, 1000.0, -7.25,
          1e-5, 6e-8, 65504.0, 70000.0, 3e38, 1e-40, float("nan"), float("inf"),
          float("-inf"),
          # ties of float16 (11 bits) and bfloat16 (8 bits): to even
          1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-8), 1 + 3 * 2**-8, 65520.0, 65519.99,
          # just above a tie, by less than float32 keeps: one rounding from float64 goes
          # up, rounding through float32 first would land on the tie and go to even
          1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)]


def half_values(d):
    a = np.array(FLOATS, dtype=np.float64)
    return a.astype(np.float16) if d == "f16" else to_bf(a)


def values(d):
    if d == "bool":
        return np.array([True, False, True], dtype=np.bool_)
    if d in INTS:
        return int_values(d)
    if d in HALF:
        return half_values(d)
    if d in ("f32", "f64"):
        return np.array(FLOATS, dtype=NP[d])
    z = np.array([1 + 2j, -3 + 0.5j, 0.0, 2.5 - 1j], dtype=NP[d])
    return z


def as_compute(x):
    """NumPy array of the values (bfloat16 as float32, exactly)."""
    return x.f32() if isinstance(x, BF) else np.asarray(x)


def out_as(r, d):
    """A computed NumPy result stored as dtype d (bfloat16 rounded once)."""
    if d == "bf16":
        return to_bf(r)
    return np.asarray(r).astype(NP[d])


def reshape(x, shape):
    if isinstance(x, BF):
        return BF(x.bits.reshape(shape))
    return np.asarray(x).reshape(shape)


# ----------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------

def promotion():
    for a in ALL:
        for b in ALL:
            r = result_dtype(a, b)
            xv, yv = 1, (1 if b == "bool" else 2)
            x = to_bf(np.array([float(xv)])) if a == "bf16" else np.array([xv], dtype=NP[a])
            y = to_bf(np.array([float(yv)])) if b == "bf16" else np.array([yv], dtype=NP[b])
            if r == "bool":
                out = np.array([True])  # bool + bool is logical or
            else:
                out = out_as(np.array([xv + yv], dtype=np.float64), r)
            add(f"promote/{a}_{b}", "add", [], "0", [x, y], out)


def weak_scalars():
    scal = [("si:1", 1), ("si:3", 3), ("sf:1.5", 1.5), ("sc:0.0:1.0", 1j)]
    for d in ALL:
        if d == "bool":
            continue
        x = values(d)
        for tok, s in scal:
            # NEP 50: a Python scalar takes the array's dtype where its kind allows
            if isinstance(s, int):
                r = d
            elif isinstance(s, float):
                r = d if d in HALF or d in ("f32", "f64", "c64", "c128") else "f64"
            else:
                r = "c64" if d in HALF or d in ("f32", "c64") else "c128"
            with np.errstate(all="ignore"):
                if d == "bf16":
                    got = as_compute(x).astype(np.float32) + np.float32(s) if r == "bf16" \
                        else as_compute(x).astype(NP[r]) + s
                else:
                    got = np.asarray(x) + (NP[r](s) if r != d else s)
            add(f"weak/{d}_{tok}", "add", [tok], "0", [x], out_as(got, r))
    # a weak scalar on the left: `3 - x`, keeping x's dtype (wrapping for integers)
    for d in INTS + HALF:
        x = values(d)
        with np.errstate(all="ignore"):
            if d == "bf16":
                got = to_bf(np.float32(3) - as_compute(x))
            else:
                got = 3 - np.asarray(x)
        add(f"weak/{d}_rsub", "rsub", ["si:3"], "0", [x], got)
    # uint64 above int64's range, with wrapping
    x = np.array([1, 2**63, 2**64 - 1], dtype=np.uint64)
    add("weak/u64_big", "add", ["si:18446744073709551615"], "0", [x],
        x + np.uint64(2**64 - 1))
    add("weak/u64_mul", "mul", ["si:3"], "0", [x], x * np.uint64(3))


BIN_INT = ["add", "sub", "mul", "floordiv", "mod", "max", "min", "eq", "lt", "ge"]
NP_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "max": np.maximum, "min": np.minimum,
    "eq": np.equal, "lt": np.less, "ge": np.greater_equal, "pow": np.power,
    "atan2": np.arctan2, "hypot": np.hypot,
}


def int_arith():
    for d in INTS:
        v = int_values(d)
        x, y = v.reshape(-1, 1), v.reshape(1, -1)
        for op in BIN_INT:
            with np.errstate(all="ignore"):
                add(f"int/{d}_{op}", op, [], "0", [x, y], NP_BIN[op](x, y))
        e = np.arange(6, dtype=NP[d]).reshape(1, -1)
        with np.errstate(all="ignore"):
            add(f"int/{d}_pow", "pow", [], "0", [x, e], np.power(x, e))
        for op, f in [("neg", np.negative), ("abs", np.absolute), ("sign", np.sign),
                      ("square", np.square)]:
            with np.errstate(all="ignore"):
                add(f"int/{d}_{op}", op, [], "0", [v], f(v))
        # float functions: NumPy's result dtype (float16 for 8-bit ints, float32 for 16-bit)
        with np.errstate(all="ignore"):
            add(f"int/{d}_sqrt", "sqrt", [], "u1", [v], np.sqrt(v))
            small = np.array([0, 1, 2, 3, 7], dtype=NP[d])
            add(f"int/{d}_div", "div", [], "0", [small.reshape(-1, 1), small.reshape(1, -1)],
                np.true_divide(small.reshape(-1, 1), small.reshape(1, -1)))


UN_HALF = [("neg", np.negative, 0), ("abs", np.absolute, 0), ("sqrt", np.sqrt, 0),
           ("floor", np.floor, 0), ("ceil", np.ceil, 0), ("round", np.rint, 0),
           ("trunc", np.trunc, 0), ("square", np.square, 0), ("reciprocal", np.reciprocal, 0),
           ("sign", np.sign, 0), ("isnan", np.isnan, 0), ("isinf", np.isinf, 0),
           ("exp", np.exp, 1), ("log", np.log, 1), ("sin", np.sin, 1), ("cos", np.cos, 1),
           ("tanh", np.tanh, 1), ("expm1", np.expm1, 1), ("log1p", np.log1p, 1),
           ("atan", np.arctan, 1)]


def half_arith():
    for d in HALF:
        v = half_values(d)
        c = as_compute(v)
        for op, f, u in UN_HALF:
            with np.errstate(all="ignore"):
                r = f(c.astype(np.float32) if d == "bf16" else c)
            r = r if r.dtype == np.bool_ else out_as(r, d)
            add(f"half/{d}_{op}", op, [], f"u{u}", [v], r)
        # pairs: a column against a row
        # no -0.0: which zero maximum(0.0, -0.0) gives is not what these cases test
        sub = [0.0, 1.0, -2.5, 0.5, 3.14159, 100.0, 1e-5, 65504.0, float("nan"),
               float("inf"), float("-inf"), 7.0, -3.0]
        a = np.array(sub, dtype=np.float64)
        h = a.astype(np.float16) if d == "f16" else to_bf(a)
        x, y = reshape(h, (-1, 1)), reshape(h, (1, -1))
        cx, cy = as_compute(x).astype(np.float32), as_compute(y).astype(np.float32)
        for op in ["add", "sub", "mul", "div", "floordiv", "mod", "max", "min", "eq", "lt",
                   "ge", "pow", "atan2", "hypot"]:
            with np.errstate(all="ignore"):
                if d == "f16":
                    r = NP_BIN[op](as_compute(x), as_compute(y))
                else:
                    r = NP_BIN[op](cx, cy)
            r = r if r.dtype == np.bool_ else out_as(r, d)
            u = 1 if op in ("pow", "atan2", "hypot") else 0
            add(f"half/{d}_{op}", op, [], f"u{u}", [x, y], r)
    # mixed dtypes (promotion with values)
    for a, b in [("f16", "i8"), ("f16", "u8"), ("f16", "i16"), ("f16", "bf16"), ("bf16", "u8"),
                 ("bf16", "i16"), ("bf16", "f32"), ("f16", "f32"), ("bf16", "i32"),
                 ("f16", "u64")]:
        xa = np.array([1.5, -2.0, 100.0, 0.25]) if a in HALF else None
        x = xa.astype(np.float16) if a == "f16" else to_bf(xa)
        yb = np.array([3, 7, 100, 2])
        if b in HALF:
            y = yb.astype(np.float16) if b == "f16" else to_bf(yb.astype(np.float64))
        else:
            y = yb.astype(NP[b])
        r = result_dtype(a, b)
        cx = as_compute(x).astype(np.float32 if r in ("bf16", "f16") else NP[r])
        cy = as_compute(y).astype(np.float32 if r in ("bf16", "f16") else NP[r])
        add(f"mixed/{a}_{b}_mul", "mul", [], "0", [x, y], out_as(cx * cy, r))
    # a fused chain: computed in float32, rounded once when stored
    a = np.array([1.1, 2.2, -3.3, 100.7, 0.001, 65000.0, 7.0])
    for d in HALF:
        x = a.astype(np.float16) if d == "f16" else to_bf(a)
        y = (a * 0.37 + 1).astype(np.float16) if d == "f16" else to_bf(a * 0.37 + 1)
        z = (a - 5).astype(np.float16) if d == "f16" else to_bf(a - 5)
        cx, cy, cz = (as_compute(t).astype(np.float32) for t in (x, y, z))
        with np.errstate(all="ignore"):
            r = (cx * cy + cz) * cx
        add(f"half/{d}_chain", "chain", [], "u1", [x, y, z], out_as(r, d))


def casts():
    big_for = {"u32": (-2.0**31, 2.0**32), "u64": (-2.0**63, 2.0**64)}
    for src in ALL:
        v = values(src)
        for dst in ALL:
            if src == dst:
                continue
            x = v
            if src in HALF + ["f32", "f64", "c64", "c128"] and dst in big_for:
                lo, hi = big_for[dst]
                c = as_compute(x)
                re = c.real if c.dtype.kind == "c" else c
                keep = np.isfinite(re) & (re > lo) & (re < hi)
                x = BF(x.bits[keep]) if isinstance(x, BF) else np.asarray(x)[keep]
            c = as_compute(x)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    if dst == "bf16":
                        r = to_bf(c)
                    else:
                        r = c.astype(NP[dst])
            add(f"cast/{src}_{dst}", "astype", [f"dt:{dst}"], "0", [x], r)


def reductions():
    for d in NEW_INTS + HALF:
        if d in HALF:
            base = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], dtype=np.float64)
            x = base.astype(np.float16) if d == "f16" else to_bf(base)
            xs = [("a", x)]
        else:
            info = np.iinfo(NP[d])
            x = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], dtype=NP[d])
            edge = np.array([info.max, info.max - 1, info.min, 3, 1, 2], dtype=NP[d])
            xs = [("a", x), ("edge", edge)]
        for tag, a in xs:
            c = as_compute(a)
            for op in ["sum", "prod", "max", "min", "mean", "argmax", "argmin"]:
                with np.errstate(all="ignore"):
                    if d in HALF:
                        f = c.astype(np.float32)
                        r = {"sum": lambda: out_as(np.sum(f), d),
                             "prod": lambda: out_as(np.prod(f[:6]), d),
                             "max": lambda: out_as(np.max(f), d),
                             "min": lambda: out_as(np.min(f), d),
                             "mean": lambda: out_as(np.float32(np.sum(f)) / np.float32(f.size), d),
                             "argmax": lambda: np.argmax(f), "argmin": lambda: np.argmin(f)}[op]()
                        inp = BF(a.bits[:6]) if (op == "prod" and d == "bf16") else (
                            a[:6] if op == "prod" else a)
                    else:
                        r = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
                             "mean": np.mean, "argmax": np.argmax, "argmin": np.argmin}[op](a)
                        inp = a
                add(f"reduce/{d}_{tag}_{op}", op, [], "u1" if op == "mean" else "0", [inp],
                    r if isinstance(r, BF) else np.asarray(r))
        # along an axis of [3, 4]
        a2 = reshape(xs[0][1], (3, 4))
        c2 = as_compute(a2)
        for ax in (0, 1):
            if d in HALF:
                r = out_as(np.sum(c2.astype(np.float32), axis=ax), d)
                m = out_as(np.max(c2, axis=ax), d)
            else:
                r = np.sum(a2, axis=ax)
                m = np.max(a2, axis=ax)
            add(f"reduce/{d}_sum_axis{ax}", "sum_axis", [f"i:{ax}"], "0", [a2], r)
            add(f"reduce/{d}_max_axis{ax}", "max_axis", [f"i:{ax}"], "0", [a2], m)
    # wrapping sums of uint64 and int8 accumulating in int64
    u = np.array([2**64 - 1, 2, 2**63], dtype=np.uint64)
    add("reduce/u64_wrap_sum", "sum", [], "0", [u], np.asarray(np.sum(u)))
    i = np.array([127] * 10 + [-128] * 3, dtype=np.int8)
    add("reduce/i8_wide_sum", "sum", [], "0", [i], np.asarray(np.sum(i)))
    f = np.array([0.5, 1.5, 2.25, 4.0, 8.0], dtype=np.float16)
    add("reduce/f16_var", "var", [], "u1", [f], np.asarray(np.var(f)))


def fft_inputs():
    x = np.array([1.0, 2.5, -3.0, 4.0, 0.5, -1.0, 2.0, 7.0])
    for d in ["f16", "bf16", "i8", "u8", "i16", "u16"]:
        a = x.astype(np.float16) if d == "f16" else (to_bf(x) if d == "bf16" else
                                                     np.abs(x * 2).astype(NP[d]))
        c = as_compute(a)
        r = np.fft.fft(c.astype(np.float32) if d in HALF else c)
        r = r.astype(np.complex64 if d in HALF else np.complex128)
        add(f"fft/{d}", "fft", [], "r1e-5", [a], r)


def linalg_and_where():
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float64)
    b = np.array([[7, 8], [9, 10], [11, 12]], dtype=np.float64)
    for d in ["f16", "bf16"] + INTS:
        if d == "bf16":
            x, y = to_bf(a), to_bf(b)
            r = to_bf(a.astype(np.float32) @ b.astype(np.float32))
        else:
            x, y = (a * 20).astype(NP[d]), (b * 3).astype(NP[d])
            with np.errstate(all="ignore"):
                r = x @ y
        add(f"linalg/{d}_matmul", "matmul", [], "0", [x, y], r)
    c = np.array([True, False, True, False])
    for da, db in [("u8", "i8"), ("f16", "u16"), ("bf16", "f16"), ("u64", "i64"),
                   ("u32", "i32"), ("bf16", "u8")]:
        def arr(d, v):
            return to_bf(np.array(v, dtype=np.float64)) if d == "bf16" else np.array(v, dtype=NP[d])
        x, y = arr(da, [1, 2, 3, 4]), arr(db, [5, 6, 7, 8])
        r = result_dtype(da, db)
        want = np.where(c, np.array([1, 2, 3, 4.0]), np.array([5, 6, 7, 8.0]))
        add(f"linalg/where_{da}_{db}", "where", [], "0", [c, x, y], out_as(want, r))


def creation():
    for d in ALL:
        if d == "bool":
            continue
        z = np.zeros(3)
        add(f"create/{d}_zeros", "zeros", [f"dt:{d}"], "0", [], out_as(z, d))
        add(f"create/{d}_ones", "ones", [f"dt:{d}"], "0", [], out_as(np.ones(3), d))
        v = 100 if d in INTS else 2.5
        add(f"create/{d}_full", "full", [f"dt:{d}", f"f:{v}"], "0", [],
            out_as(np.full(3, v), d))
        if d not in ("c64", "c128"):
            if d == "bf16":
                r = to_bf(np.arange(0, 10, 2, dtype=np.float64))
            else:
                r = np.arange(0, 10, 2, dtype=NP[d])
            add(f"create/{d}_arange", "arange", [f"dt:{d}"], "0", [], r)


def round_trips():
    for d in ALL:
        v = values(d)
        add(f"trip/{d}", "flip", [], "0", [v],
            BF(v.bits[::-1]) if isinstance(v, BF) else np.asarray(v)[::-1])


def main():
    # overflow to infinity and NaN results are part of the cases
    warnings.simplefilter("ignore")
    promotion()
    weak_scalars()
    int_arith()
    half_arith()
    casts()
    reductions()
    fft_inputs()
    linalg_and_where()
    creation()
    round_trips()
    with open(OUT, "w") as f:
        f.write(f"# generated by tests/data/gen_dtypes.py with NumPy {np.__version__}\n")
        for line in lines:
            f.write(line + "\n")
    print(f"wrote {len(lines)} cases to {OUT}")


if __name__ == "__main__":
    main()
