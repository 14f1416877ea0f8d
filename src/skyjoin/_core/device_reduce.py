"""Whole-array reductions on the GPU that compile fast.

CuPy's reductions of a whole array (``.all()``, ``.sum()``, ``.mean()``, and
``ReductionKernel``) go through CUB while CuPy's reduction accelerator is on
(its default); each new routine and dtype then compiles CUB's headers with
NVRTC on its first call, the largest compile cost of a first GPU call
(docs/decisions/core-gpu-first-calls.md).  Here plain kernels
(``kernels/reduce.cu``, compiled once per process with the device
primitives: :mod:`skyjoin._core.device_kernels`) reduce a fixed grid of
blocks with a grid-stride loop: per-block partial sums, summed on the host,
so a sum is the same on every run; flags set by any thread that sees a
match.  CuPy is passed in, never imported here.  Each call is one pass over
the array, O(n), and one small device-to-host copy.
"""

from __future__ import annotations

import math

import numpy as np

from . import device_kernels

__all__ = ["all_finite", "all_true", "any_true", "total", "row_sums", "column_bounds",
           "work_sums", "weighted_span_sum", "flag_differ"]

_BLOCKS, _THREADS = 512, 256


def _launch(cp, kernel: str, A, out):
    """Run ``kernel`` (a name pattern with ``{t}``) over A's values into ``out``."""
    a = cp.ascontiguousarray(A).reshape(-1)
    fn = device_kernels.function(cp, kernel.format(t=device_kernels.c_type(a.dtype)))
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


def column_bounds(cp, X, ncols=None):
    """Minimum and maximum of each of the first ``ncols`` columns (default
    all) of the (n, d) device array X (n >= 1, float32 or float64), and
    whether every value of those columns is finite.

    One pass over X per 8 columns (row-wise reads, per-block partials in a
    fixed grid, finished on the host): CuPy's ``X.min(axis=0)`` reduces each
    column with one block.  Returns (lo, hi, finite): two float64 host
    arrays of shape (ncols,) and a bool; the bounds mean nothing when a
    value is not finite.
    """
    a = cp.ascontiguousarray(X)
    n, d = a.shape
    m = d if ncols is None else int(ncols)
    if n == 0:
        raise ValueError("column_bounds needs at least one row")
    if not 1 <= m <= d:
        raise ValueError(f"column_bounds: ncols must be between 1 and {d}, got {ncols}")
    lo = cp.empty((_BLOCKS, d), dtype=cp.float64)
    hi = cp.empty((_BLOCKS, d), dtype=cp.float64)
    flag = cp.zeros(1, dtype=cp.int32)
    fn = device_kernels.function(cp, f"column_bounds<{device_kernels.c_type(a.dtype)}>")
    for j0 in range(0, m, 8):
        fn((_BLOCKS,), (_THREADS,), (a, np.int64(n), np.int32(d), np.int32(j0), lo, hi, flag))
    return (cp.asnumpy(lo).min(axis=0)[:m], cp.asnumpy(hi).max(axis=0)[:m],
            not int(cp.asnumpy(flag)[0]))


def work_sums(cp, w, idx):
    """Mean and standard deviation of v_i = w[idx[i]] in float64 (w int64,
    idx int32 device arrays, idx not empty), without materialising v.

    Both sums are the ones ``total`` gives on the materialised float64
    arrays v and (v - mean)^2 (the same fixed grid, each term rounded the
    same way).  Two passes over idx, O(n).
    """
    n = int(idx.size)
    fn = device_kernels.function(cp, "gathered_sum")
    part = cp.zeros(_BLOCKS, dtype=cp.float64)
    fn((_BLOCKS,), (_THREADS,), (w, idx, np.int64(n), np.float64(0.0), np.int32(0), part))
    mean = float(cp.asnumpy(part).sum()) / n
    fn((_BLOCKS,), (_THREADS,), (w, idx, np.int64(n), np.float64(mean), np.int32(1), part))
    return mean, math.sqrt(float(cp.asnumpy(part).sum()) / n)


def weighted_span_sum(cp, w, start) -> int:
    """Sum over c of w[c] * (start[c + 1] - start[c]) (w int64 (m,), start
    int32 (m + 1,) device arrays), in int64.  O(m)."""
    m = int(w.size)
    if not m:
        return 0
    part = cp.zeros(_BLOCKS, dtype=cp.int64)
    device_kernels.function(cp, "weighted_spans")((_BLOCKS,), (_THREADS,),
                                                  (w, start, np.int64(m), part))
    return int(cp.asnumpy(part).sum())


def flag_differ(cp, a, b, flag) -> None:
    """Set the int32 device flag ``flag[0]`` to 1 when the int32 device
    arrays a and b (same size) differ somewhere; leave it alone otherwise
    (no synchronisation).  O(n)."""
    if a.size:
        device_kernels.function(cp, "flag_differ<int>")(
            (_BLOCKS,), (_THREADS,), (cp.ascontiguousarray(a), cp.ascontiguousarray(b),
                                      np.int64(a.size), flag))
