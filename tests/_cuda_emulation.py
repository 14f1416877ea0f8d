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
#include <algorithm>
#include <cstring>
using std::min; using std::max; using std::floor; using std::isfinite; using std::fmin; using std::fmax;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__
struct D3 { unsigned x, y, z; };
static D3 blockIdx, blockDim, threadIdx, gridDim;
extern "C" void emu_set_index(unsigned b, unsigned t, unsigned bd) {
    blockIdx.x = b; threadIdx.x = t; blockDim.x = bd;
}
extern "C" void emu_set_grid(unsigned g) { gridDim.x = g; }
static inline void __syncthreads() {}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, int) { return v; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
static inline long long __double_as_longlong(double v) { long long b; std::memcpy(&b, &v, 8); return b; }
template <typename T> static inline T __ldg(const T* p) { return *p; }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
template <typename T, typename V> static T atomicAdd(T* a, V v) { T old = *a; *a += (T)v; return old; }
static unsigned long long atomicMin(unsigned long long* a, unsigned long long v) {
    unsigned long long old = *a;
    if (v < old) *a = v;
    return old;
}
static int atomicMin(int* a, int v) {
    int old = *a;
    if (v < old) *a = v;
    return old;
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


_SCALARS = {np.int64: ctypes.c_longlong, np.int32: ctypes.c_int, np.float64: ctypes.c_double,
            np.float32: ctypes.c_float, np.uint64: ctypes.c_ulonglong, np.uint32: ctypes.c_uint,
            np.uint16: ctypes.c_ushort, np.uint8: ctypes.c_ubyte}


class _Kernel:
    def __init__(self, lib, name, address=None):
        self.fn = getattr(lib, name) if address is None else address
        self.set_index = lib.emu_set_index
        self.set_grid = getattr(lib, "emu_set_grid", None)

    def __call__(self, grid, block, args, shared_mem=0):
        cargs = []
        for a in args:
            if isinstance(a, np.ndarray):
                cargs.append(ctypes.c_void_p(a.ctypes.data))
            elif type(a) in _SCALARS:
                cargs.append(_SCALARS[type(a)](a.item()))
            else:
                raise TypeError(f"kernel argument of type {type(a).__name__}")
        fn = self.fn
        if isinstance(fn, int):      # a template instance: called through its address
            fn = ctypes.CFUNCTYPE(None, *[type(c) for c in cargs])(fn)
        if self.set_grid is not None:
            self.set_grid(int(grid[0]))
        for b in range(int(grid[0])):
            for t in range(int(block[0])):
                self.set_index(b, t, int(block[0]))
                fn(*cargs)


class Module:
    """Stands in for ``cupy.RawModule``: ``get_function(name)(grid, block, args)``."""

    def __init__(self, source: str, name_expressions=()):
        self.names = list(name_expressions)
        code = _STUB + source + "".join(
            f'\nextern "C" void* emu_addr_{i}() {{ return (void*)&{n}; }}'
            for i, n in enumerate(self.names))
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
        if name in self.names:
            addr = getattr(self.lib, f"emu_addr_{self.names.index(name)}")
            addr.restype = ctypes.c_void_p
            return _Kernel(self.lib, name, address=addr())
        return _Kernel(self.lib, name)


def modules_by_real(source: str):
    """Stands in for a GPU module's ``compiled_module(real="double")``: the
    kernel ``source`` compiled for the host once per C type ``real`` (and
    ``product``, the brute force's C type of the products, and ``dims``,
    the points' dimension, where given)."""
    modules = {}

    def compiled_module(real="double", product=None, dims=None):
        if (real, product, dims) not in modules:
            defines = f"#define REAL {real}\n#define IS_FLOAT {int(real == 'float')}\n"
            if product is not None:
                defines += f"#define GREAL {product}\n"
            if dims is not None:
                defines += f"#define DIMS {int(dims)}\n"
            modules[real, product, dims] = Module(defines + source)
        return modules[real, product, dims]

    return compiled_module


class _Stream:
    def synchronize(self):
        pass


class FakeCupy:
    """NumPy under CuPy's names, as far as the GPU modules use them."""

    class cuda:
        @staticmethod
        def get_current_stream():
            return _Stream()

        class runtime:
            @staticmethod
            def getDevice():
                return 0

    @staticmethod
    def asnumpy(a):
        return np.asarray(a)

    def __getattr__(self, name):
        return getattr(np, name)


class ReduceModule:
    """The reductions of ``skyjoin/_core/kernels/reduce.cu``, which cooperate
    within a block (not emulated thread by thread): each kernel's contract
    in NumPy.  The CUDA code itself is checked by the GPU tests."""

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
    """Make ``skyjoin._core.device_reduce`` and ``device_prims`` run on the
    host (``emulate_device_kernels``, whose list it returns)."""
    return emulate_device_kernels(monkeypatch)


def _scan_contract(kind, args):
    """The three scan phases of ``kernels/prims.cu``, each by its contract."""
    if kind == "scan_chunk_sums":
        a, n, chunk, part = args
        a = np.asarray(a)[:int(n)].astype(part.dtype)
        for b in range(part.size):
            part[b] = a[b * int(chunk):(b + 1) * int(chunk)].sum()
    elif kind == "scan_chunk_offsets":
        part, nb = args
        p = part[:int(nb)].copy()
        part[:int(nb)] = np.cumsum(p) - p
    else:
        a, n, chunk, part, init, inclusive, out = args
        a = np.asarray(a)[:int(n)].astype(out.dtype)
        for b in range(part.size):
            s = slice(b * int(chunk), min(int(n), (b + 1) * int(chunk)))
            c = np.cumsum(a[s])
            out[s] = init + part[b] + (c if int(inclusive) else c - a[s])


class DeviceModule:
    """Stands in for the module of ``skyjoin._core.device_kernels``
    (``reduce.cu`` + ``prims.cu``): the kernels that cooperate within a
    block (shared memory, shuffles: the reductions, the scan phases, the
    column bounds) by their contracts in NumPy; every other kernel is the
    CUDA source itself, compiled by the host compiler (``Module``)."""

    _CONTRACT = ("block_sum", "column_bounds", "flag_nonfinite", "flag_nonzero", "flag_zero")

    def __init__(self):
        from skyjoin._core import device_kernels

        code = "\n".join((device_kernels._DIR / f).read_text() for f in device_kernels._SOURCES)
        names = [n for n in device_kernels.NAMES
                 if n.split("<")[0] not in self._CONTRACT + ("gathered_sum", "weighted_spans")
                 and not n.startswith("scan_")]
        self.compiled = Module(code, names)
        self.reduce = ReduceModule()

    def get_function(self, name):
        kind = name.split("<")[0]
        if kind in self._CONTRACT:
            return self.reduce.get_function(name)
        if kind.startswith("scan_"):
            return lambda grid, block, args: _scan_contract(kind, args)
        if kind == "gathered_sum":
            def run(grid, block, args):
                w, idx, n, mean, squared, part = args
                v = np.asarray(w)[np.asarray(idx)[:int(n)]].astype(np.float64)
                part[:] = 0
                part[0] = ((v - mean) ** 2).sum() if int(squared) else v.sum()
            return run
        if kind == "weighted_spans":
            def run(grid, block, args):
                w, start, n, part = args
                part[:] = 0
                part[0] = (np.asarray(w)[:int(n)] * np.diff(np.asarray(start)[:int(n) + 1])).sum()
            return run
        return self.compiled.get_function(name)


_DEVICE_MODULE = []


def emulate_device_kernels(monkeypatch):
    """Make ``skyjoin._core.device_kernels`` (the reductions and the device
    primitives) run on ``DeviceModule``, and the Thrust argsort on NumPy's
    stable argsort.  Returns the list of the instance sets that
    ``device_kernels.module`` was asked to compile, in order (a kit, or one
    instance that no loaded kit holds), empty at the start."""
    from skyjoin._core import device_kernels, device_prims

    if not _DEVICE_MODULE:
        _DEVICE_MODULE.append(DeviceModule())
    compiled = []

    def module(cp, names):
        compiled.append(tuple(names))
        return _DEVICE_MODULE[0]

    monkeypatch.setattr(device_kernels, "module", module)
    monkeypatch.setattr(device_kernels, "_HOME", {})
    def argsort(cp, keys, in_place=False):
        order = np.argsort(keys, kind="stable").astype(np.int64)
        if in_place:                    # the keys left sorted, as Thrust leaves them
            keys[:] = keys[order]
        return order

    monkeypatch.setattr(device_prims, "argsort", argsort)
    return compiled
