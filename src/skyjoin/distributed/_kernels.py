"""Numba kernels of the distributed join: a partition's owned rows, and their placement.

Both write CSR rows in parallel by count -> exclusive scan -> fill (Numba's
CPU target has no atomics).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._config import NUMBA_CACHE

__all__ = ["select_rows", "place_rows"]

_jit = dict(cache=NUMBA_CACHE, nogil=True)


@nb.njit(parallel=True, **_jit)
def _select_fill(indptr, indices, rows, col_ids, out_indptr, out):
    """Global column ids of the chosen rows."""
    for r in nb.prange(rows.shape[0]):
        w = out_indptr[r]
        for k in range(indptr[rows[r]], indptr[rows[r] + 1]):
            out[w] = col_ids[indices[k]]
            w += 1


def select_rows(indptr, indices, rows, col_ids, out_dtype):
    """Some rows of a CSR table, their columns mapped to global ids.

    Parameters
    ----------
    indptr, indices : ndarray
        The table (columns are local indices into col_ids).
    rows : ndarray of int64
        The rows to keep, in output order.
    col_ids : ndarray of int64
        Global id of each local column.
    out_dtype : dtype

    Returns
    -------
    counts : ndarray of int64
    cols : ndarray of out_dtype
    """
    counts = (indptr[rows + 1] - indptr[rows]).astype(np.int64)
    out_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=out_indptr[1:])
    out = np.empty(int(out_indptr[-1]), dtype=out_dtype)
    _select_fill(indptr, indices, rows, col_ids.astype(out_dtype), out_indptr, out)
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
