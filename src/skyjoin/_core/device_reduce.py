"""Whole-array reductions on the GPU that compile fast.

CuPy's reductions of a whole array (``.all()``, ``.sum()``, ``.mean()``, and
``ReductionKernel``) go through CUB while CuPy's reduction accelerator is on
(its default); each new routine and dtype then compiles CUB's headers with
NVRTC on its first call, the largest compile cost of a first GPU call
(docs/design.md, "First calls on the GPU").  Here one small module of plain kernels (``kernels/reduce.cu``,
compiled once per process for the few dtypes used) reduces a fixed grid of
blocks with a grid-stride loop: per-block partial sums, summed on the host,
so a sum is the same on every run; flags set by any thread that sees a
match.  CuPy is passed in, never imported here.  Each call is one pass over
the array, O(n), and one small device-to-host copy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["all_finite", "all_true", "any_true", "total", "row_sums", "column_bounds"]

_SOURCE = Path(__file__).with_name("kernels") / "reduce.cu"
_TYPES = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int",
          "uint64": "unsigned long long", "uint32": "unsigned int", "uint8": "unsigned char",
          "bool": "bool", "int8": "signed char", "int16": "short", "uint16": "unsigned short"}
_KERNELS = ("block_sum<{t}, long long>", "block_sum<{t}, double>", "flag_nonfinite<{t}>",
            "flag_nonzero<{t}>", "flag_zero<{t}>")
_BLOCKS, _THREADS = 512, 256
_MODULE = None


def _module(cp):
    global _MODULE
    if _MODULE is None:
        names = [k.format(t=t) for k in _KERNELS for t in _TYPES.values()] + \
            [f"column_bounds<{t}>" for t in ("double", "float")]
        _MODULE = cp.RawModule(code=_SOURCE.read_text(), options=("--std=c++14",),
                               name_expressions=names)
    return _MODULE


def _launch(cp, kernel: str, A, out):
    """Run ``kernel`` (a name of ``_KERNELS``) over A's values into ``out``."""
    a = cp.ascontiguousarray(A).reshape(-1)
    fn = _module(cp).get_function(kernel.format(t=_TYPES[a.dtype.name]))
    fn((_BLOCKS,), (_THREADS,), (a, np.int64(a.size), out))
    return out


def _flag(cp, kernel: str, A):
    return _launch(cp, kernel, A, cp.zeros(1, dtype=cp.int32))


def all_finite(cp, A) -> bool:
    """Whether every value of the device array A is finite (True when empty)."""
    return not A.size or A.dtype.kind not in "fc" or not int(_flag(cp, "flag_nonfinite<{t}>", A)[0])


def all_true(cp, A) -> bool:
    """Whether every value of the device array A is non-zero (True when empty)."""
    return not A.size or not int(_flag(cp, "flag_zero<{t}>", A)[0])


def any_true(cp, A):
    """Whether some value of the device array A is non-zero, as a 1-element
    device array of int32 (no synchronisation)."""
    if not A.size:
        return cp.zeros(1, dtype=cp.int32)
    return _flag(cp, "flag_nonzero<{t}>", A)


def total(cp, A):
    """Sum of the device array A: an int for integer or bool arrays (in
    int64), a float for floating ones (in float64; per-block partial sums
    in a fixed order, then summed on the host)."""
    if A.dtype.kind in "biu":
        if not A.size:
            return 0
        return int(cp.asnumpy(_launch(cp, "block_sum<{t}, long long>", A, cp.zeros(_BLOCKS, cp.int64))).sum())
    if not A.size:
        return 0.0
    return float(cp.asnumpy(_launch(cp, "block_sum<{t}, double>", A, cp.zeros(_BLOCKS, cp.float64))).sum())


def row_sums(cp, X):
    """Sum of each row of the (n, d) device array X, column by column left to
    right (elementwise adds, no reduction kernel).  O(n d)."""
    out = cp.array(X[:, 0], dtype=cp.float64, copy=True) if X.shape[1] else cp.zeros(X.shape[0])
    for j in range(1, X.shape[1]):
        out += X[:, j]
    return out


def column_bounds(cp, X):
    """Minimum and maximum of each column of the (n, d) device array X (n >= 1,
    float32 or float64), and whether every value is finite.

    One pass over X per 8 columns (row-wise reads, per-block partials in a
    fixed grid, finished on the host): CuPy's ``X.min(axis=0)`` reduces each
    column with one block.  Returns (lo, hi, finite): two float64 host
    arrays of shape (d,) and a bool; the bounds mean nothing when a value is
    not finite.
    """
    a = cp.ascontiguousarray(X)
    n, d = a.shape
    if n == 0:
        raise ValueError("column_bounds needs at least one row")
    lo = cp.empty((_BLOCKS, d), dtype=cp.float64)
    hi = cp.empty((_BLOCKS, d), dtype=cp.float64)
    flag = cp.zeros(1, dtype=cp.int32)
    fn = _module(cp).get_function(f"column_bounds<{_TYPES[a.dtype.name]}>")
    for j0 in range(0, d, 8):
        fn((_BLOCKS,), (_THREADS,), (a, np.int64(n), np.int32(d), np.int32(j0), lo, hi, flag))
    return cp.asnumpy(lo).min(axis=0), cp.asnumpy(hi).max(axis=0), not int(cp.asnumpy(flag)[0])
