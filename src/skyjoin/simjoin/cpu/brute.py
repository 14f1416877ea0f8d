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
diagonal only (pairs i < j) and mirrors them.  ``algorithm="projected"``
screens the products of the points' coordinates on the plan's q principal
axes instead (``skyjoin.simjoin.projection``; margin: ``brute_bound``
step 4), q multiply-adds a pair instead of d.

Costs: n_q n_s d multiply-adds in the products (half for a self-join),
O(n_q n_s) for the screen, O(d) per candidate for the test; memory the
centred float64 copies (8 d bytes a point), one tile of products
(``TILE_ROWS x TILE_COLS`` float64), and for a table the found pairs
(twice, as pairs then as the CSR table).  ``output="counts"`` keeps no
pair: it screens each tile twice, by rows and by columns.
"""

from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange

from ..._core.config import NUMBA_CACHE
from ..._core.plans import report
from ..._core.thread_count import with_cpu_threads
from ..._core.timing import phase
from ..brute_bound import centred, filter_bound, projected, projected_bound, tiles
from ..csr import sort_csr_rows
from ..result import NeighborTable, index_dtype
from .engine import empty_result, eps_squared, guard_table

__all__ = ["run", "TILE_ROWS", "TILE_COLS"]

#: rows of the query points in one tile of the product
TILE_ROWS = 512
#: columns (data points) in one tile of the product
TILE_COLS = 2048
#: survivors a row keeps per tile in the screen's pass; rows with more are
#: screened again for their columns (``_tile_fill``)
SCREEN_WIDTH = 8
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
def _threshold(rr, root_t, cu, cg, inflate):
    """The margin's threshold for norm bounds summing to rr (``brute_bound``)."""
    t = root_t + cu * rr
    return (t * t + cg * (rr * rr)) * inflate


@njit(inline="always")
def _kept(g, na, nb, ra, rb, root_t, cu, cg, inflate):
    """The filter: whether the screened squared distance is within the margin."""
    return (na + nb) - 2.0 * g <= _threshold(ra + rb, root_t, cu, cg, inflate)


@njit(parallel=True, nogil=True, cache=NUMBA_CACHE)
def _tile_screen(G, na, nb, ra, rb, rb_max, A, B, i0, j0, e2, which, root_t, cu, cg, inflate,
                 width, counts, found, col_counts):
    """Screen the tile G (rows A[i0 + ii], columns B[j0 + jj]) in ``chunks``
    of rows, one chunk a thread: ``counts[ii]`` the columns of row ii that
    pass the filter and the test, the first ``width`` of them (ascending)
    into ``found[ii]``; with ``col_counts`` (chunks x columns), each
    chunk's count of every column too.  ``which``: every column, or only
    j > i (global ids).  A row's screened values are first compared with
    the row's largest threshold, one comparison an entry."""
    rows, cols = G.shape
    n_chunks = col_counts.shape[0] if col_counts.shape[0] > 0 else rows
    per = (rows + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        for ii in range(ch * per, min(rows, (ch + 1) * per)):
            i = i0 + ii
            # the row's largest threshold (rr at its largest): above it, every column fails
            lim = _threshold(ra[ii] + rb_max, root_t, cu, cg, inflate)
            lo = 0
            if which == _AFTER:
                lo = max(0, i + 1 - j0)
            c = 0
            for jj in range(lo, cols):
                g = G[ii, jj]
                if (na[ii] + nb[jj]) - 2.0 * g > lim:
                    continue
                j = j0 + jj
                if _kept(g, na[ii], nb[jj], ra[ii], rb[jj], root_t, cu, cg, inflate) \
                        and _within(A, i, B, j, e2):
                    if c < width:
                        found[ii, c] = j
                    if col_counts.shape[0] > 0:
                        col_counts[ch, jj] += 1
                    c += 1
            counts[ii] = c


@njit(parallel=True, nogil=True, cache=NUMBA_CACHE)
def _tile_fill(G, na, nb, ra, rb, A, B, i0, j0, e2, which, root_t, cu, cg, inflate, redo,
               offsets, out):
    """The columns of the rows ``redo`` (those whose survivors overflowed
    the screen's width), in ascending order, at ``out[offsets[k]:]``."""
    for k in prange(redo.shape[0]):
        ii = redo[k]
        i = i0 + ii
        lo = max(0, i + 1 - j0) if which == _AFTER else 0
        c = 0
        for jj in range(lo, G.shape[1]):
            j = j0 + jj
            if _kept(G[ii, jj], na[ii], nb[jj], ra[ii], rb[jj], root_t, cu, cg, inflate) \
                    and _within(A, i, B, j, e2):
                out[offsets[k] + c] = j
                c += 1


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


def _tile_pairs(found, counts, i0, width, idx):
    """(rows, columns) of the survivors of the rows whose survivors the
    screen kept whole (at most ``width``), row by row.  O(rows width)."""
    k = np.where(counts <= width, counts, 0)
    mask = np.arange(width)[None, :] < k[:, None]
    rows = np.repeat(np.arange(i0, i0 + counts.size, dtype=idx), k)
    return rows, found[:counts.size, :width][mask].astype(idx, copy=False)


@with_cpu_threads
def run(plan, R, S, eps, timings=None):
    """The brute-force join of conditioned points (R None: the self-join of
    S) by the request ``plan`` (``plan.algorithm`` "brute" or "projected"): a
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
    proj = plan.projection if plan.algorithm == "projected" else None
    with phase(timings, "centre"):
        if proj is None:
            Qc, nq_, rq, Sc, ns_, rs = centred(Q, S)
        else:                       # the screen on principal components (brute_bound, step 4)
            Qc, nq_, rq, Sc, ns_, rs = projected(Q, S, proj.basis)
            fb = projected_bound(fb, proj.sigma, proj.components, d)
    bound = (fb.root_t, fb.cu, fb.cg, fb.inflate)
    counts_out = np.zeros(nq, dtype=np.int64) if plan.output == "counts" else None
    rows_i, cols_j, found_total = [], [], 0
    idx = index_dtype(ns)
    which = _AFTER if self_join else _ALL
    block = (-1, None)                     # the current column block, (d, columns) contiguous
    chunks = max(1, numba.get_num_threads()) if counts_out is not None and self_join else 0
    width = 0 if counts_out is not None else SCREEN_WIDTH
    found = np.empty((TILE_ROWS, max(width, 1)), dtype=idx)
    with phase(timings, "tiles"):
        for i0, i1, j0, j1 in tiles(nq, ns, TILE_ROWS, TILE_COLS, self_join):
            if block[0] != j0:
                block = (j0, np.ascontiguousarray(Sc[j0:j1].T))
            G = Qc[i0:i1] @ block[1]
            na, ra, nb, rb = nq_[i0:i1], rq[i0:i1], ns_[j0:j1], rs[j0:j1]
            counts = np.zeros(i1 - i0, dtype=np.int64)
            col_counts = np.zeros((chunks, j1 - j0), dtype=np.int64)
            _tile_screen(G, na, nb, ra, rb, float(rb.max()), Q, S, i0, j0, e2, which, *bound,
                         width, counts, found, col_counts)
            if counts_out is not None:
                counts_out[i0:i1] += counts
                if chunks:               # the same pairs, counted for their columns
                    counts_out[j0:j1] += col_counts.sum(axis=0)
                continue
            total = int(counts.sum())
            if not total:
                continue
            rows, cols = _tile_pairs(found, counts, i0, width, idx)
            redo = np.flatnonzero(counts > width)
            if redo.size:                # rows with more survivors than the screen kept
                lens = counts[redo]
                offsets = np.zeros(redo.size, dtype=np.int64)
                np.cumsum(lens[:-1], out=offsets[1:])
                more = np.empty(int(lens.sum()), dtype=idx)
                _tile_fill(G, na, nb, ra, rb, Q, S, i0, j0, e2, which, *bound, redo, offsets,
                           more)
                rows = np.concatenate([rows, np.repeat((redo + i0).astype(idx), lens)])
                cols = np.concatenate([cols, more])
            rows_i.append(rows)
            cols_j.append(cols)
            found_total += total
            guard_table(plan, found_total * (2 if self_join else 1), nq, idx, S.dtype,
                        at_least=True)
    if counts_out is not None:
        if self_join and plan.include_self:
            counts_out += 1
        return counts_out
    I = np.concatenate(rows_i) if rows_i else np.zeros(0, dtype=idx)
    J = np.concatenate(cols_j) if cols_j else np.zeros(0, dtype=idx)
    del rows_i, cols_j
    with phase(timings, "table"):
        if self_join:
            guard_table(plan, 2 * found_total + (nq if plan.include_self else 0), nq, idx, S.dtype)
            indptr, indices = _mirror(I, J, nq, plan.include_self, np.zeros(0, dtype=idx))
            if plan.sort:
                sort_csr_rows(indptr, indices)
        else:
            guard_table(plan, found_total, nq, idx, S.dtype)
            indptr = np.zeros(nq + 1, dtype=np.int64)
            np.cumsum(np.bincount(I, minlength=nq), out=indptr[1:])
            # a row's pairs come tile by tile, in no order within a tile: sort by (row, column)
            indices = J[np.lexsort((J, I))]
    return NeighborTable(indptr, indices, (nq, ns), True if not self_join else plan.sort)
