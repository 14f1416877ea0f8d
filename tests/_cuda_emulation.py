"""Run the project's CUDA C++ kernels on the CPU, one thread after another.

For logic checks on machines without a GPU: the kernel source is compiled
by the host C++ compiler with the CUDA keywords defined away, and each
launch calls the kernel once per (block, thread) with blockIdx/threadIdx
set.  Threads run one at a time, so races are not exercised (the GPU tests
do that); the arithmetic, indexing and control flow are.  NumPy stands in
for CuPy.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

_STUB = r"""
#include <cmath>
#define __global__
#define __device__
#define __forceinline__ inline
struct D3 { unsigned x, y, z; };
static D3 blockIdx, blockDim, threadIdx;
extern "C" void emu_set_index(unsigned b, unsigned t, unsigned bd) {
    blockIdx.x = b; threadIdx.x = t; blockDim.x = bd;
}
static unsigned long long atomicCAS(unsigned long long* a, unsigned long long cmp,
                                    unsigned long long val) {
    unsigned long long old = *a;
    if (old == cmp) *a = val;
    return old;
}
"""


def compiler():
    """The host C++ compiler, or None."""
    return shutil.which("g++") or shutil.which("c++")


class _Kernel:
    def __init__(self, lib, name):
        self.fn = getattr(lib, name)
        self.set_index = lib.emu_set_index

    def __call__(self, grid, block, args):
        cargs = []
        for a in args:
            if isinstance(a, np.ndarray):
                cargs.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, np.int64):
                cargs.append(ctypes.c_longlong(int(a)))
            elif isinstance(a, np.int32):
                cargs.append(ctypes.c_int(int(a)))
            elif isinstance(a, np.float64):
                cargs.append(ctypes.c_double(float(a)))
            else:
                raise TypeError(f"kernel argument of type {type(a).__name__}")
        for b in range(int(grid[0])):
            for t in range(int(block[0])):
                self.set_index(b, t, int(block[0]))
                self.fn(*cargs)


class Module:
    """Stands in for ``cupy.RawModule``: ``get_function(name)(grid, block, args)``."""

    def __init__(self, source: str):
        code = _STUB + source
        tag = hashlib.sha1(code.encode()).hexdigest()[:16]
        folder = os.path.join(tempfile.gettempdir(), "skyjoin-cuda-emulation")
        os.makedirs(folder, exist_ok=True)
        lib = os.path.join(folder, f"k{tag}.so")
        if not os.path.exists(lib):
            src = os.path.join(folder, f"k{tag}.cpp")
            with open(src, "w") as fh:
                fh.write(code)
            subprocess.run([compiler(), "-O1", "-std=c++17", "-shared", "-fPIC",
                            "-ffp-contract=off", "-o", lib, src], check=True)
        self.lib = ctypes.CDLL(lib)

    def get_function(self, name):
        return _Kernel(self.lib, name)


class _Stream:
    def synchronize(self):
        pass


class FakeCupy:
    """NumPy under CuPy's names, as far as the GPU modules use them."""

    class cuda:
        @staticmethod
        def get_current_stream():
            return _Stream()

    @staticmethod
    def asnumpy(a):
        return np.asarray(a)

    def __getattr__(self, name):
        return getattr(np, name)


class ReduceModule:
    """Stands in for the module of ``skyjoin/_core/kernels/reduce.cu``, whose
    kernels are templates (``Module`` loads ``extern "C"`` kernels only):
    each kernel's contract in NumPy.  The CUDA code itself is checked by the
    GPU tests."""

    def get_function(self, name):
        kind = name.split("<")[0]

        def run(grid, block, args):
            if kind == "column_bounds":
                a, n, d, j0, lo, hi, flag = args
                rows = np.asarray(a).reshape(-1)[:int(n) * int(d)].reshape(int(n), int(d))
                cols = rows[:, int(j0):int(j0) + 8].astype(np.float64)
                k = slice(int(j0), int(j0) + cols.shape[1])
                lo[:, k], hi[:, k] = np.inf, -np.inf
                with np.errstate(invalid="ignore"):
                    lo[0, k], hi[0, k] = np.fmin.reduce(cols, axis=0), np.fmax.reduce(cols, axis=0)
                flag[0] |= int(not np.isfinite(cols).all())
                return
            a, n, out = args
            a = np.asarray(a)[:int(n)]
            if kind == "block_sum":
                out[:] = 0
                out[0] = a.sum(dtype=out.dtype)
            elif kind == "flag_nonfinite":
                out[0] |= int(not np.isfinite(a.astype(np.float64)).all())
            elif kind == "flag_nonzero":
                out[0] |= int(bool((a != 0).any()))
            elif kind == "flag_zero":
                out[0] |= int(bool((a == 0).any()))
            else:
                raise KeyError(name)

        return run


def emulate_reductions(monkeypatch):
    """Make ``skyjoin._core.device_reduce`` run on ``ReduceModule``."""
    from skyjoin._core import device_reduce

    monkeypatch.setattr(device_reduce, "_module", lambda cp: ReduceModule())
