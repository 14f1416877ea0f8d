"""Numba kernels of the distributed join: a partition's owned rows, and their placement.

Both write CSR rows in parallel by count -> exclusive scan -> fill (Numba's
CPU target has no atomics).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._config import NUMBA_CACHE

__all__ = ["owned_rows", "place_rows"]

_jit = dict(cache=NUMBA_CACHE, nogil=True)


@nb.njit(parallel=True, **_jit)
def _drop_self_fill(indptr, indices, self_col, col_ids, out_indptr, out):
    """Global column ids of each row, its self column dropped."""
    n = indptr.shape[0] - 1
    for r in nb.prange(n):
        w = out_indptr[r]
        s = self_col[r]
        for k in range(indptr[r], indptr[r + 1]):
            j = indices[k]
            if j != s:
                out[w] = col_ids[j]
                w += 1


def owned_rows(indptr, indices, self_col, col_ids, out_dtype):
    """Map a partition's CSR rows to global columns, dropping each row's self pair.

    Every row lists its own point exactly once (its distance to itself is 0),
    so dropping it removes one entry per row.

    Parameters
    ----------
    indptr, indices : ndarray
        The partition's rows (columns are local indices into col_ids).
    self_col : ndarray of int64
        Local column of each row's own point (every row lists it), or -1 in
        every row to keep every entry.
    col_ids : ndarray of int64
        Global id of each local column.
    out_dtype : dtype

    Returns
    -------
    counts : ndarray of int64
    cols : ndarray of out_dtype
    """
    n = len(indptr) - 1
    counts = np.diff(indptr).astype(np.int64)
    if n and self_col[0] >= 0:
        counts -= 1
    out_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=out_indptr[1:])
    out = np.empty(int(out_indptr[-1]), dtype=out_dtype)
    _drop_self_fill(indptr, indices, self_col, col_ids.astype(out_dtype), out_indptr, out)
    return counts, out


@nb.njit(parallel=True, **_jit)
def place_rows(indptr, row_ids, counts, cols, out):
    """Copy a partition's rows (row_ids, counts, cols) to their places in the global CSR."""
    n = row_ids.shape[0]
    local = np.empty(n + 1, dtype=np.int64)
    local[0] = 0
    for r in range(n):
        local[r + 1] = local[r] + counts[r]
    for r in nb.prange(n):
        dst = indptr[row_ids[r]]
        src = local[r]
        for k in range(counts[r]):
            out[dst + k] = cols[src + k]
