"""The brute-force join on the CPU: matrix-product tiles, a provable filter, the exact test.

For high dimensions, where almost every grid cell neighbours every other
and the grid pays for nothing (issue of the join in high dimensions;
GDS-Join's grid, Gowanlock and Karsin 2018, §IV, indexes few dimensions
for that reason).  Every pair of a tile of rows and a tile of columns is
screened by ``|a|^2 + |b|^2 - 2 a.b`` from one float64 matrix product
(NumPy's BLAS on all cores) on centred points, against the margin of
:mod:`skyjoin.simjoin.brute_bound`; each survivor is decided by the join's
own test in the working precision (terms in order from zero, no fused
multiply-add: Numba without fastmath), so the result is the grid path's,
pair for pair.  The self-join screens the tiles on and above the
diagonal only (pairs i < j) and mirrors them.

Costs: n_q n_s d multiply-adds in the products (half for a self-join),
O(n_q n_s) for the screen, O(d) per candidate for the test; memory the
centred float64 copies (8 d bytes a point), one tile of products
(``TILE_ROWS x TILE_COLS`` float64), and for a table the found pairs
(twice, as pairs then as the CSR table).  ``output="counts"`` keeps no
pair: it screens each tile twice, by rows and by columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..._core.config import NUMBA_CACHE
from ..._core.plans import report
from ..._core.thread_count import with_cpu_threads
from ..._core.timing import phase
from ..brute_bound import filter_bound, row_radii
from ..csr import sort_csr_rows
from ..result import NeighborTable, index_dtype
from .engine import empty_result, eps_squared, guard_table

__all__ = ["run", "TILE_ROWS", "TILE_COLS", "centred"]

#: rows of the query points in one tile of the product
TILE_ROWS = 1024
#: columns (data points) in one tile of the product
TILE_COLS = 4096
# which pairs of a tile a row counts: every column, the columns after it,
# or the columns before it (global ids)
_ALL, _AFTER, _BEFORE = 0, 1, 2


@njit(inline="always")
def _within(A, i, B, j, e2):
    """The join's test in the working precision: sum_k (a_k - b_k)^2 <= e2."""
    s = A[i, 0] - A[i, 0]
    for k in range(A.shape[1]):
        t = A[i, k] - B[j, k]
        s += t * t
    return s <= e2


@njit(inline="always")
def _kept(g, na, nb, ra, rb, root_t, cu, cg, inflate):
    """The filter: whether the screened squared distance is within the margin."""
    s = (na + nb) - 2.0 * g
    rr = ra + rb
    t = root_t + cu * rr
    return s <= (t * t + cg * (rr * rr)) * inflate


@njit(parallel=True, nogil=True, cache=NUMBA_CACHE)
def _tile_rows(G, na, nb, ra, rb, A, B, i0, j0, e2, which, root_t, cu, cg, inflate,
               counts, offsets, out):
    """For each row ii of the tile G (rows A[i0 + ii], columns B[j0 + jj]):
    the number of columns that pass the filter and the test (into counts),
    or, when ``offsets`` has rows, their global column ids in ascending
    order into ``out[offsets[ii]:]``.  ``which`` restricts the columns
    (``_AFTER``: j > i, ``_BEFORE``: j < i, by global ids)."""
    fill = offsets.shape[0] > 0
    for ii in prange(G.shape[0]):
        i = i0 + ii
        c = 0
        for jj in range(G.shape[1]):
            j = j0 + jj
            if (which == _AFTER and j <= i) or (which == _BEFORE and j >= i):
                continue
            if _kept(G[ii, jj], na[ii], nb[jj], ra[ii], rb[jj], root_t, cu, cg, inflate) \
                    and _within(A, i, B, j, e2):
                if fill:
                    out[offsets[ii] + c] = j
                c += 1
        if not fill:
            counts[ii] = c


@njit(nogil=True, cache=NUMBA_CACHE)
def _mirror(I, J, n, include_self, idx_dtype_probe):
    """The symmetric CSR of the pairs (I[p], J[p]), i < j, each in both rows,
    with (i, i) when include_self.  O(n + pairs)."""
    counts = np.zeros(n + 1, dtype=np.int64)
    for p in range(I.shape[0]):
        counts[I[p] + 1] += 1
        counts[J[p] + 1] += 1
    if include_self:
        for i in range(n):
            counts[i + 1] += 1
    for i in range(n):
        counts[i + 1] += counts[i]
    indptr = counts.copy()
    pos = counts[:n].copy()
    indices = np.empty(indptr[n], dtype=idx_dtype_probe.dtype)
    if include_self:
        for i in range(n):
            indices[pos[i]] = i
            pos[i] += 1
    for p in range(I.shape[0]):
        i, j = I[p], J[p]
        indices[pos[i]] = j
        pos[i] += 1
        indices[pos[j]] = i
        pos[j] += 1
    return indptr, indices


def centred(Q, S):
    """Float64 copies of the query and data points moved by the data's mean
    (one centre for both, so that differences are preserved up to one
    rounding), with their squared norms and norm bounds.  O((n_q + n_s) d)."""
    c = S.mean(axis=0, dtype=np.float64)
    Sc = S.astype(np.float64) - c
    Qc = Sc if Q is S else Q.astype(np.float64) - c
    ns_ = np.einsum("ij,ij->i", Sc, Sc)
    nq_ = ns_ if Q is S else np.einsum("ij,ij->i", Qc, Qc)
    d = S.shape[1]
    rs = row_radii(ns_, d)
    rq = rs if Q is S else row_radii(nq_, d)
    return Qc, nq_, rq, Sc, ns_, rs


def _tiles(nq, ns, self_join):
    """The (row, column) tile bounds: every tile, or for a self-join those
    that hold a pair i < j."""
    for i0 in range(0, nq, TILE_ROWS):
        i1 = min(i0 + TILE_ROWS, nq)
        for j0 in range(0, ns, TILE_COLS):
            j1 = min(j0 + TILE_COLS, ns)
            if self_join and j1 <= i0 + 1:
                continue
            yield i0, i1, j0, j1


@with_cpu_threads
def run(plan, R, S, eps, timings=None):
    """The brute-force join of conditioned points (R None: the self-join of
    S) by the request ``plan`` (``plan.algorithm == "brute"``): a
    NeighborTable or the int64 counts, equal to the grid path's.  Reports
    the plan.  Cost: module docstring."""
    self_join = R is None
    Q = S if self_join else R
    nq, ns = Q.shape[0], S.shape[0]
    report(plan, "join plan")
    if nq == 0 or ns == 0:
        return empty_result(plan, nq, ns)
    d = S.shape[1]
    e2 = eps_squared(eps, S.dtype)
    fb = filter_bound(float(e2), d, plan.precision)
    args = (e2, fb.root_t, fb.cu, fb.cg, fb.inflate)
    with phase(timings, "centre"):
        Qc, nq_, rq, Sc, ns_, rs = centred(Q, S)
    none = np.zeros(0, dtype=np.int64)
    counts_out = np.zeros(nq, dtype=np.int64) if plan.output == "counts" else None
    rows_i, cols_j, found = [], [], 0
    idx = index_dtype(ns)
    with phase(timings, "tiles"):
        for i0, i1, j0, j1 in _tiles(nq, ns, self_join):
            G = Qc[i0:i1] @ Sc[j0:j1].T
            na, ra, nb, rb = nq_[i0:i1], rq[i0:i1], ns_[j0:j1], rs[j0:j1]
            which = _AFTER if self_join else _ALL
            counts = np.zeros(i1 - i0, dtype=np.int64)
            _tile_rows(G, na, nb, ra, rb, Q, S, i0, j0, e2, which, *args[1:], counts, none,
                       none)
            if counts_out is not None:
                counts_out[i0:i1] += counts
                if self_join:           # the same pairs, counted for their columns
                    cc = np.zeros(j1 - j0, dtype=np.int64)
                    _tile_rows(G.T, nb, na, rb, ra, S, Q, j0, i0, e2, _BEFORE, *args[1:], cc,
                               none, none)
                    counts_out[j0:j1] += cc
                continue
            total = int(counts.sum())
            if not total:
                continue
            offsets = np.zeros(i1 - i0, dtype=np.int64)
            np.cumsum(counts[:-1], out=offsets[1:])
            out = np.empty(total, dtype=idx)
            _tile_rows(G, na, nb, ra, rb, Q, S, i0, j0, e2, which, *args[1:], counts, offsets,
                       out)
            rows_i.append(np.repeat(np.arange(i0, i1, dtype=idx), counts))
            cols_j.append(out)
            found += total
            guard_table(plan, found * (2 if self_join else 1), nq, idx, S.dtype, at_least=True)
    if counts_out is not None:
        if self_join and plan.include_self:
            counts_out += 1
        return counts_out
    I = np.concatenate(rows_i) if rows_i else np.zeros(0, dtype=idx)
    J = np.concatenate(cols_j) if cols_j else np.zeros(0, dtype=idx)
    del rows_i, cols_j
    with phase(timings, "table"):
        if self_join:
            guard_table(plan, 2 * found + (nq if plan.include_self else 0), nq, idx, S.dtype)
            indptr, indices = _mirror(I, J, nq, plan.include_self, np.zeros(0, dtype=idx))
            if plan.sort:
                sort_csr_rows(indptr, indices)
        else:
            guard_table(plan, found, nq, idx, S.dtype)
            indptr = np.zeros(nq + 1, dtype=np.int64)
            np.cumsum(np.bincount(I, minlength=nq), out=indptr[1:])
            # a row's pairs come tile by tile, columns ascending: a stable sort by row
            indices = J[np.argsort(I, kind="stable")]
    return NeighborTable(indptr, indices, (nq, ns), True if not self_join else plan.sort)
