"""Numba kernels behind ``skyjoin.grid.build_grid``."""

import numba as nb
import numpy as np

from ._config import NUMBA_CACHE


@nb.njit(parallel=True, cache=NUMBA_CACHE)
def raw_coords(X, j, lo, side, out):
    """Cell coordinate floor((x_j - lo) / side) of every point (§IV-B)."""
    for i in nb.prange(X.shape[0]):
        out[i] = np.int64(np.floor((np.float64(X[i, j]) - lo) / side))


@nb.njit(parallel=True, cache=NUMBA_CACHE)
def column_bounds(X, k):
    """Minimum and maximum of each of the first k columns, as float64, in one
    parallel pass over row chunks (NumPy's axis-0 reduction of a strided
    (n, k) view is ~10x slower).  X has at least one row."""
    n = X.shape[0]
    n_chunks = max(1, min(64, n // 65536))
    los = np.empty((n_chunks, k))
    his = np.empty((n_chunks, k))
    for c in nb.prange(n_chunks):
        a = c * n // n_chunks
        b = (c + 1) * n // n_chunks
        for j in range(k):
            los[c, j] = np.float64(X[a, j])
            his[c, j] = los[c, j]
        for i in range(a + 1, b):
            for j in range(k):
                v = np.float64(X[i, j])
                if v < los[c, j]:
                    los[c, j] = v
                if v > his[c, j]:
                    his[c, j] = v
    lo = los[0].copy()
    hi = his[0].copy()
    for c in range(1, n_chunks):
        for j in range(k):
            lo[j] = min(lo[j], los[c, j])
            hi[j] = max(hi[j], his[c, j])
    return lo, hi


@nb.njit(parallel=True, cache=NUMBA_CACHE)
def horner_step(lid, rank, radix):
    """lid = lid * radix + rank: append one dimension to the linear ids."""
    for i in nb.prange(lid.shape[0]):
        lid[i] = lid[i] * radix + rank[i]


@nb.njit(cache=NUMBA_CACHE)
def counting_sort(lid, volume, order_zero):
    """Stable counting sort of points by linear id; also the lower-bound table.

    Returns (order, lower_bound) where lower_bound[v] is the index of the
    first non-empty cell whose id is >= v, for v in [0, volume].
    """
    n = lid.shape[0]
    hist = np.zeros(volume + 1, dtype=np.int64)
    for i in range(n):
        hist[lid[i] + 1] += 1
    lower_bound = np.empty(volume + 1, dtype=np.int64)
    cells = 0
    for v in range(volume):
        lower_bound[v] = cells
        if hist[v + 1] > 0:
            cells += 1
    lower_bound[volume] = cells
    for v in range(volume):
        hist[v + 1] += hist[v]
    order = np.empty(n, dtype=type(order_zero))
    for i in range(n):
        v = lid[i]
        order[hist[v]] = i
        hist[v] += 1
    return order, lower_bound


@nb.njit(parallel=True, cache=NUMBA_CACHE)
def gather_rows(X, order):
    """X[order] into a new C-contiguous array, in parallel (order: any row ids)."""
    m, d = order.shape[0], X.shape[1]
    out = np.empty((m, d), dtype=X.dtype)
    for r in nb.prange(m):
        src = order[r]
        for t in range(d):
            out[r, t] = X[src, t]
    return out
