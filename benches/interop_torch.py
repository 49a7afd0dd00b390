#!/usr/bin/env python3
"""DLPack interop between lazyfuse and NumPy, PyTorch and CuPy, through the C ABI of
examples/dlpack_export.rs loaded with ctypes (no pyo3).

Checks values both ways on the CPU (NumPy) and, where PyTorch or CuPy with CUDA are
importable, on the GPU; then times the exchange itself (export + import of a tensor of n
elements) for each pair.

    cargo build --release --example dlpack_export
    python3 benches/interop_torch.py [path/to/libdlpack_export.so]
"""

import ctypes
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_lib():
    if len(sys.argv) > 1:
        return sys.argv[1]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    for profile in ("release", "debug"):
        p = os.path.join(target, profile, "examples", "libdlpack_export.so")
        if os.path.exists(p):
            return p
    sys.exit("libdlpack_export.so not found: cargo build --release --example dlpack_export")


LIB = ctypes.CDLL(find_lib())
LIB.lf_export_exp_linspace.restype = ctypes.c_void_p
LIB.lf_export_exp_linspace.argtypes = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32]
LIB.lf_import_sum.restype = ctypes.c_double
LIB.lf_import_sum.argtypes = [ctypes.c_void_p, ctypes.c_int32]
LIB.lf_affine.restype = ctypes.c_void_p
LIB.lf_affine.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32]
LIB.lf_dlpack_free.restype = None
LIB.lf_dlpack_free.argtypes = [ctypes.c_void_p, ctypes.c_int32]

# the destructor gets the dying capsule as a raw pointer (a py_object would be revived)
PyCapsule_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, PyCapsule_Destructor]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

_raw = ctypes.PYFUNCTYPE
raw_is_valid = _raw(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", api))
raw_get_pointer = _raw(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", api)
)

# capsule names must outlive their capsules
NAMES = {0: b"dltensor_versioned", 1: b"dltensor"}
USED = {0: b"used_dltensor_versioned", 1: b"used_dltensor"}


def _destroy(legacy):
    name = NAMES[legacy]

    @PyCapsule_Destructor
    def destroy(cap):
        # a consumer renames the capsule when it takes the tensor; otherwise release it
        if raw_is_valid(cap, name):
            LIB.lf_dlpack_free(raw_get_pointer(cap, name), legacy)

    return destroy


DESTROY = {0: _destroy(0), 1: _destroy(1)}


class LfTensor:
    """A lazyfuse result seen through the Python DLPack protocol: `make(legacy)` exports
    it (once) in the ABI the consumer asks for."""

    def __init__(self, make, device):
        self.make, self.device = make, device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # lazyfuse's to_dlpack waits for its stream: ready for any consumer stream
        legacy = 0 if max_version is not None and max_version[0] >= 1 else 1
        if self.make is None:
            raise BufferError("already consumed")
        make, self.make = self.make, None
        ptr = make(legacy)
        if not ptr:
            raise BufferError("lazyfuse export failed (see stderr)")
        return api.PyCapsule_New(ptr, NAMES[legacy], DESTROY[legacy])

    def __dlpack_device__(self):
        return (1, 0) if self.device < 0 else (2, self.device)


def export(n, device):
    return LfTensor(lambda legacy: LIB.lf_export_exp_linspace(n, device, legacy), device)


def affine(capsule, legacy, device):
    """2 * x + 1 in lazyfuse for the consumer-side capsule of x."""
    ptr = take(capsule, legacy)
    return LfTensor(lambda out: LIB.lf_affine(ptr, legacy, out), device)


def take(capsule, legacy):
    """The tensor pointer of a consumer-side capsule, marked used (lazyfuse owns it now)."""
    ptr = api.PyCapsule_GetPointer(capsule, NAMES[legacy])
    api.PyCapsule_SetName(capsule, USED[legacy])
    return ptr


def bench(label, f, reps=200):
    f()
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    us = (time.perf_counter() - t0) / reps * 1e6
    print(f"  {label:<48} {us:9.1f} us")


def check_numpy(n=1000):
    want = np.exp(np.linspace(0, 1, n, dtype=np.float32))
    got = np.from_dlpack(export(n, -1))
    assert got.dtype == np.float32 and got.shape == (n,)
    assert np.allclose(got, want, rtol=1e-6), "lazyfuse -> numpy"
    assert not got.flags.writeable, "READ_ONLY export"
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    s = LIB.lf_import_sum(take(x.__dlpack__(max_version=(1, 0)), 0), 0)
    assert s == x.sum(), f"numpy -> lazyfuse: {s}"
    xt = np.asfortranarray(x)  # strided: gathered on the CPU
    s = LIB.lf_import_sum(take(xt.__dlpack__(max_version=(1, 0)), 0), 0)
    assert s == x.sum()
    y = np.from_dlpack(affine(x.__dlpack__(max_version=(1, 0)), 0, -1))
    assert np.array_equal(y, 2 * x + 1), "numpy -> lazyfuse -> numpy"
    print("numpy: values both ways ok")
    bench("numpy.from_dlpack(lazyfuse export), n=1e6", lambda: np.from_dlpack(export(10**6, -1)), 20)


def check_torch(n=1 << 20):
    try:
        import torch
    except ImportError:
        print("torch: not installed, skipped")
        return
    if not torch.cuda.is_available():
        print("torch: no CUDA, skipped")
        return
    dev = torch.cuda.current_device()
    want = torch.exp(torch.linspace(0, 1, n, dtype=torch.float32, device="cuda"))
    got = torch.from_dlpack(export(n, dev))
    assert got.is_cuda and got.dtype == torch.float32
    assert torch.allclose(got, want, rtol=1e-6), "lazyfuse -> torch"
    x = torch.arange(n, dtype=torch.float64, device="cuda")
    cap = torch.utils.dlpack.to_dlpack(x)  # legacy capsule
    s = LIB.lf_import_sum(take(cap, 1), 1)
    assert s == float(x.sum()), f"torch -> lazyfuse: {s}"
    y = torch.from_dlpack(affine(torch.utils.dlpack.to_dlpack(x), 1, dev))
    assert torch.equal(y, 2 * x + 1), "torch -> lazyfuse -> torch"
    assert int(x[5]) == 5, "the import was never written"
    print("torch: values both ways ok")
    z = torch.randn(n, device="cuda")
    bench(
        "torch -> lazyfuse (2x+1) -> torch, n=2^20",
        lambda: torch.from_dlpack(affine(torch.utils.dlpack.to_dlpack(z), 1, dev)),
    )
    bench("torch 2x+1 alone, n=2^20 (synchronized)", lambda: (2 * z + 1, torch.cuda.synchronize()))


def check_cupy(n=1 << 20):
    try:
        import cupy
    except ImportError:
        print("cupy: not installed, skipped")
        return
    dev = cupy.cuda.Device().id
    got = cupy.from_dlpack(export(n, dev))
    want = cupy.exp(cupy.linspace(0, 1, n, dtype=cupy.float32))
    assert cupy.allclose(got, want, rtol=1e-6), "lazyfuse -> cupy"
    x = cupy.arange(n, dtype=cupy.float64)
    s = LIB.lf_import_sum(take(x.__dlpack__(max_version=(1, 0)), 0), 0)
    assert s == float(x.sum()), f"cupy -> lazyfuse: {s}"
    print("cupy: values both ways ok")
    bench("cupy.from_dlpack(lazyfuse export), n=2^20", lambda: cupy.from_dlpack(export(n, dev)))


if __name__ == "__main__":
    check_numpy()
    check_torch()
    check_cupy()
