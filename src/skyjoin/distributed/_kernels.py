"""Numba kernels of the distributed join: a partition's owned rows, and their placement.

Both write CSR rows in parallel by count -> exclusive scan -> fill (Numba's
CPU target has no atomics).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from .._core.search import lower_bound, upper_bound

__all__ = ["select_rows", "place_rows", "route_points", "scatter_into", "prefix_sum",
           "true_indices", "box_counts", "box_fill"]

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


@nb.njit(inline="always", **_jit)
def _chunk_starts(values, k):
    """Where each of k equal row chunks starts in a scan of ``values``: part[c] is
    the sum of the chunks before c (part[k]: the total), the chunks summed in parallel."""
    n = values.shape[0]
    part = np.zeros(k + 1, dtype=np.int64)
    for c in nb.prange(k):
        s = 0
        for i in range(c * n // k, (c + 1) * n // k):
            s += values[i]
        part[c + 1] = s
    for c in range(k):
        part[c + 1] += part[c]
    return part


@nb.njit(inline="always", **_jit)
def _n_chunks(n):
    return max(1, min(64, n // 65536))


@nb.njit(parallel=True, **_jit)
def prefix_sum(counts, indptr):
    """indptr[0] = 0 and indptr[i + 1] = counts[0] + ... + counts[i]: a scan in
    two parallel passes over row chunks (chunk sums, then each chunk's scan)."""
    n = counts.shape[0]
    k = _n_chunks(n)
    part = _chunk_starts(counts, k)
    indptr[0] = 0
    for c in nb.prange(k):
        s = part[c]
        for i in range(c * n // k, (c + 1) * n // k):
            s += counts[i]
            indptr[i + 1] = s


@nb.njit(parallel=True, **_jit)
def true_indices(mask):
    """``np.flatnonzero(mask)`` as int64, in two parallel passes over row chunks:
    O(n) work, O(n / threads) time (NumPy's flatnonzero runs on one thread)."""
    n = mask.shape[0]
    k = _n_chunks(n)
    part = _chunk_starts(mask, k)
    out = np.empty(part[k], dtype=np.int64)
    for c in nb.prange(k):
        w = part[c]
        for i in range(c * n // k, (c + 1) * n // k):
            if mask[i]:  # a branch-free store would write the next chunk's first slot
                out[w] = i
                w += 1
    return out


@nb.njit(parallel=True, **_jit)
def scatter_into(ids, values, out):
    """out[ids] = values, in parallel (ids distinct)."""
    for r in nb.prange(ids.shape[0]):
        out[ids[r]] = values[r]


# --------------------------------------------------------------------------
# routing a block to the partitions (the rule of partition.py, in one parallel pass)
# --------------------------------------------------------------------------
@nb.njit(inline="always")
def _put(X, i, base, p, at, rows, out_X):
    """Point i (global id base + i) written to partition p's next slot."""
    k = at[p]
    rows[k] = base + i
    for c in range(X.shape[1]):
        out_X[k, c] = X[i, c]
    at[p] = k + 1


@nb.njit(inline="always")
def _visit(X, i, dim0, dim1, two, cuts1, cuts2, cptr, offset, w, own_cnt, halo_cnt,
           own_rows, own_X, halo_rows, halo_X, own_at, halo_at, fill, base):
    """Owner and halo partitions of point i: count them, or write the point there."""
    x0 = np.float64(X[i, dim0])
    s = upper_bound(cuts1, 0, cuts1.shape[0], x0)
    t = 0
    x1 = 0.0
    if two:
        x1 = np.float64(X[i, dim1])
        t = upper_bound(cuts2, cptr[s], cptr[s + 1], x1) - cptr[s]
    owner = offset[s] + t
    if fill:
        _put(X, i, base, owner, own_at, own_rows, own_X)
    else:
        own_cnt[owner] += 1
    f0 = lower_bound(cuts1, 0, cuts1.shape[0], x0 - w)
    l0 = upper_bound(cuts1, 0, cuts1.shape[0], x0 + w)
    for s2 in range(f0, l0 + 1):
        f1 = 0
        l1 = 0
        if two:
            f1 = lower_bound(cuts2, cptr[s2], cptr[s2 + 1], x1 - w) - cptr[s2]
            l1 = upper_bound(cuts2, cptr[s2], cptr[s2 + 1], x1 + w) - cptr[s2]
        for t2 in range(f1, l1 + 1):
            p = offset[s2] + t2
            if p == owner:
                continue
            if fill:
                _put(X, i, base, p, halo_at, halo_rows, halo_X)
            else:
                halo_cnt[p] += 1


@nb.njit(parallel=True, **_jit)
def route_points(X, base, dim0, dim1, two, cuts1, cuts2, cptr, offset, w, n_chunks):
    """Rows and points of a block for each partition: owned, and in its halo.

    The ownership and halo rule of :mod:`skyjoin.distributed.partition`
    (a point on a cut belongs to the upper box; the halo test widens a box
    by ``w`` in each split dimension, computed in float64), in two parallel
    passes over chunks of the block: count per (chunk, partition), then
    write.  Rows are global ids (``base`` + position), ascending within each
    partition.

    Returns
    -------
    own_ptr, own_rows, own_X, halo_ptr, halo_rows, halo_X
        Partition p owns rows ``own_rows[own_ptr[p]:own_ptr[p + 1]]`` (and
        those points), and likewise for its halo.
    """
    n = X.shape[0]
    P = offset[offset.shape[0] - 1]
    own_cnt = np.zeros((n_chunks, P), dtype=np.int64)
    halo_cnt = np.zeros((n_chunks, P), dtype=np.int64)
    step = (n + n_chunks - 1) // n_chunks
    e64 = np.zeros(0, dtype=np.int64)
    eX = np.zeros((0, X.shape[1]), dtype=X.dtype)
    for c in nb.prange(n_chunks):
        oc = np.zeros(P, dtype=np.int64)       # the chunk's own counters: no false sharing
        hc = np.zeros(P, dtype=np.int64)
        for i in range(c * step, min(n, (c + 1) * step)):
            _visit(X, i, dim0, dim1, two, cuts1, cuts2, cptr, offset, w, oc, hc,
                   e64, eX, e64, eX, e64, e64, False, base)
        own_cnt[c] = oc
        halo_cnt[c] = hc
    own_ptr = np.zeros(P + 1, dtype=np.int64)
    halo_ptr = np.zeros(P + 1, dtype=np.int64)
    own_start = np.empty((n_chunks, P), dtype=np.int64)
    halo_start = np.empty((n_chunks, P), dtype=np.int64)
    for p in range(P):
        a = 0
        b = 0
        for c in range(n_chunks):
            a += own_cnt[c, p]
            b += halo_cnt[c, p]
        own_ptr[p + 1] = own_ptr[p] + a
        halo_ptr[p + 1] = halo_ptr[p] + b
    for p in range(P):
        a = own_ptr[p]
        b = halo_ptr[p]
        for c in range(n_chunks):
            own_start[c, p] = a
            halo_start[c, p] = b
            a += own_cnt[c, p]
            b += halo_cnt[c, p]
    own_rows = np.empty(own_ptr[P], dtype=np.int64)
    own_X = np.empty((own_ptr[P], X.shape[1]), dtype=X.dtype)
    halo_rows = np.empty(halo_ptr[P], dtype=np.int64)
    halo_X = np.empty((halo_ptr[P], X.shape[1]), dtype=X.dtype)
    for c in nb.prange(n_chunks):
        oa = own_start[c].copy()
        ha = halo_start[c].copy()
        for i in range(c * step, min(n, (c + 1) * step)):
            _visit(X, i, dim0, dim1, two, cuts1, cuts2, cptr, offset, w, own_cnt[c],
                   halo_cnt[c], own_rows, own_X, halo_rows, halo_X, oa, ha, True, base)
    return own_ptr, own_rows, own_X, halo_ptr, halo_rows, halo_X


# --------------------------------------------------------------------------
# one partition's points, selected from the whole array by its box
# --------------------------------------------------------------------------
@nb.njit(inline="always")
def _in_box(X, i, dims, lo, hi, w, widened):
    """Point i in the box [lo, hi) of the split dimensions, or (widened) in
    [lo - w, hi + w]: ``partition.owned_by`` and ``partition.in_widened_box``."""
    for k in range(dims.shape[0]):
        x = np.float64(X[i, dims[k]])
        if widened:
            if x < lo[k] - w or x > hi[k] + w:
                return False
        elif x < lo[k] or x >= hi[k]:
            return False
    return True


@nb.njit(parallel=True, **_jit)
def box_counts(X, dims, lo, hi, w, n_chunks):
    """Owned and halo points of one box, per chunk of rows: (own, halo) int64
    arrays of n_chunks.  One parallel pass, O(rows x split dimensions)."""
    n = X.shape[0]
    step = (n + n_chunks - 1) // n_chunks
    own = np.zeros(n_chunks, dtype=np.int64)
    halo = np.zeros(n_chunks, dtype=np.int64)
    for c in nb.prange(n_chunks):
        a = 0
        b = 0
        for i in range(c * step, min(n, (c + 1) * step)):
            if _in_box(X, i, dims, lo, hi, w, False):
                a += 1
            elif _in_box(X, i, dims, lo, hi, w, True):
                b += 1
        own[c] = a
        halo[c] = b
    return own, halo


@nb.njit(parallel=True, **_jit)
def box_fill(X, dims, lo, hi, w, own_at, halo_at, out_X, out_ids):
    """Write the box's owned points (from ``own_at[c]`` per chunk) then its halo
    points (from ``halo_at[c]``) and their row ids, in row order: the counts of
    :func:`box_counts` turned into start offsets, halo offsets after the owned."""
    n = X.shape[0]
    n_chunks = own_at.shape[0]
    step = (n + n_chunks - 1) // n_chunks
    d = X.shape[1]
    for c in nb.prange(n_chunks):
        a = own_at[c]
        b = halo_at[c]
        for i in range(c * step, min(n, (c + 1) * step)):
            if _in_box(X, i, dims, lo, hi, w, False):
                k = a
                a += 1
            elif _in_box(X, i, dims, lo, hi, w, True):
                k = b
                b += 1
            else:
                continue
            for j in range(d):
                out_X[k, j] = X[i, j]
            out_ids[k] = i
