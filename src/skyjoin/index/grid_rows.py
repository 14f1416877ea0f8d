"""The adjacent rows of the epsilon grid's cells, found by merging rather than searching.

The epsilon grid (:mod:`skyjoin.index.grid`, self-join paper, Gowanlock &
Karsin 2018, §IV) numbers its non-empty cells by linear ids in rank space,
the last indexed dimension fastest, so the adjacent cells of a cell that
differ only in that dimension are consecutive: a *row*, 3^(k-1) of them
per cell (§IV-D).  The join finds each row by binary searches in the
sorted ids; a pass over the cells in id order can instead keep, for each
row offset, a pointer into the ids that only moves forward, since the
first id of the row at a fixed offset grows with the cell's id.  Each
block of cells places its pointers once by binary search, then walks
them: O(cells of the block + the ids they pass) per offset, and no
allocation per cell.

The offsets of a row step by at most one *occupied* coordinate in each of
the first k - 1 indexed dimensions: a coordinate c - 1 or c + 1 that holds
no point has no rank (the masks M_j of §IV-D), and the row is skipped.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from .._core.search import lower_bound

__all__ = ["row_offsets", "cell_ranks", "new_cursor", "cell_rows"]


def row_offsets(k: int, half: bool = False) -> np.ndarray:
    """The 3^(k-1) row offsets (steps in {-1, 0, 1} of the first k - 1
    indexed dimensions), int64 of shape (rows, k - 1), the zero offset (the
    cell's own row) first; ``half``: only it and the lexicographically
    positive ones (each unordered pair of rows once, (3^(k-1) + 1) / 2 of
    them).  O(3^k)."""
    if k <= 1:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.meshgrid(*[np.array([0, -1, 1])] * (k - 1), indexing="ij")
    offs = np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)
    if half:
        keep = [i for i, o in enumerate(offs.tolist()) if tuple(o) >= (0,) * (k - 1)]
        offs = offs[keep]
    return np.ascontiguousarray(offs)


def cell_ranks(cell_ids, radix) -> np.ndarray:
    """The rank of every non-empty cell in each indexed dimension, int64 of
    shape (cells, k): the digits of its linear id (last dimension fastest).
    O(cells k), NumPy (a division by one number at a time)."""
    k = radix.shape[0]
    ranks = np.empty((cell_ids.shape[0], k), dtype=np.int64)
    rem = cell_ids.copy()
    for j in range(k - 1, -1, -1):
        ranks[:, j] = rem % radix[j]
        rem //= radix[j]
    return ranks


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def new_cursor(k, n_rows):
    """A walk's state for k indexed dimensions: a pointer per row offset
    (-1: not placed yet), the occupied bounds of the cell's ranks, and each
    row's cell range [a, b) (written by ``cell_rows``)."""
    ptr = np.full(n_rows, -1, dtype=np.int64)
    lo = np.empty(k, dtype=np.int64)
    hi = np.empty(k, dtype=np.int64)
    a = np.zeros(n_rows, dtype=np.int64)
    b = np.zeros(n_rows, dtype=np.int64)
    return ptr, lo, hi, a, b


@nb.njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def cell_rows(t, cell_ids, ranks, coords, coord_off, radix, stride, offsets, cursor):
    """The cells [a[o], b[o]) of each row offset o of cell t (empty: a == b),
    into the cursor; ``ranks`` from ``cell_ranks``.  Cells must be visited
    in increasing t within one cursor (the pointers only move forward).
    O(k 3^(k-1)) plus the ids the pointers pass."""
    ptr, lo, hi, a, b = cursor
    k = lo.shape[0]
    m = cell_ids.shape[0]
    for j in range(k):
        r = ranks[t, j]
        c = coords[coord_off[j] + r]
        lo[j] = r - 1 if r > 0 and coords[coord_off[j] + r - 1] == c - 1 else r
        hi[j] = r + 1 if r + 1 < radix[j] and coords[coord_off[j] + r + 1] == c + 1 else r
    last = k - 1
    for o in range(offsets.shape[0]):
        base = 0
        inside = True
        for j in range(last):
            r = ranks[t, j] + offsets[o, j]
            if r < lo[j] or r > hi[j]:
                inside = False
                break
            base += r * stride[j]
        if not inside:
            a[o] = 0
            b[o] = 0
            continue
        key0 = base + lo[last]
        key1 = base + hi[last]
        p = ptr[o]
        if p < 0:
            p = lower_bound(cell_ids, 0, m, key0)
        else:
            while p < m and cell_ids[p] < key0:
                p += 1
        ptr[o] = p
        e = p
        while e < m and cell_ids[e] <= key1:
            e += 1
        a[o] = p
        b[o] = e
