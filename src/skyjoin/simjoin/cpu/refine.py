"""The refine of a metric join: each candidate pair decided by the metric's own test.

The candidates come from the Euclidean filter (``skyjoin.simjoin.metrics``);
each pair (i, j) is kept iff ``reduced_distance(i, j) <= threshold``, the
formula and comparison of scikit-learn's neighbour searches
(``sklearn/metrics/_dist_metrics.pyx.tp``: ``rdist`` against
``_dist_to_rdist(eps)``; cosine: ``cosine_distances``), evaluated in float64
in the same order of operations.  Numba compiles without fastmath, so no
operation is fused or reordered, and ``math.sin`` / ``math.cos`` /
``math.asin`` call the C library's functions, the ones scikit-learn's
compiled code calls.  In a self-join the pair (i, i) is kept at distance
0 (scikit-learn's ``cosine_distances`` sets its diagonal to 0; the other
metrics give 0 exactly).

A table is refined in place, row by row (kept columns moved to the front
of their row, order kept), then gathered into a new table; the kernels are
sequential and nogil, run on blocks of rows by the pool of threads
(``schedule.run_blocks``).  Cost: O(candidates d) for the tests,
O(candidates) for the moves; memory: the refined table beside the
candidates.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..csr import exclusive_scan_into
from ..result import NeighborTable, PairChunk
from ..schedule import JIT, run_blocks

__all__ = ["reduced_distance", "refine_counts", "refine_table", "refine_chunk"]

# metric codes (``metrics.METRIC_CODE``)
_MANHATTAN, _CHEBYSHEV, _HAVERSINE = 0, 1, 2


@nb.njit(inline="always", **JIT)
def reduced_distance(metric, Q, i, S, j):
    """scikit-learn's reduced distance of Q[i] (the query) and S[j]: Manhattan
    ``sum |q - s|`` and Chebyshev ``max |q - s|`` (terms in order from 0);
    haversine ``sin0 * sin0 + cos(q0) * cos(s0) * sin1 * sin1`` with
    ``sin_k = sin(0.5 * (q_k - s_k))``; cosine ``clip(1 - q.s, 0, 2)`` on
    normalised rows (its dot product in order from 0)."""
    d = Q.shape[1]
    if metric == _MANHATTAN:
        r = 0.0
        for k in range(d):
            r += abs(Q[i, k] - S[j, k])
        return r
    if metric == _CHEBYSHEV:
        r = 0.0
        for k in range(d):
            t = abs(Q[i, k] - S[j, k])
            if t > r:
                r = t
        return r
    if metric == _HAVERSINE:
        s0 = math.sin(0.5 * (Q[i, 0] - S[j, 0]))
        s1 = math.sin(0.5 * (Q[i, 1] - S[j, 1]))
        return s0 * s0 + math.cos(Q[i, 0]) * math.cos(S[j, 0]) * s1 * s1
    dot = 0.0
    for k in range(d):
        dot += Q[i, k] * S[j, k]
    r = 1.0 - dot
    if r < 0.0:
        return 0.0
    return r if r < 2.0 else 2.0


@nb.njit(inline="always", **JIT)
def _chord2(FQ, i, FS, j):
    """Squared distance of the filter points FQ[i] and FS[j], terms in order."""
    s = 0.0
    for k in range(FQ.shape[1]):
        t = FQ[i, k] - FS[j, k]
        s += t * t
    return s


@nb.njit(**JIT)
def _refine_rows(metric, Q, S, indptr, indices, row0, self_join, threshold, FQ, FS, sure2,
                 kept, b0, b1):
    """Rows [b0, b1) of a CSR table whose row r holds the candidates of point
    ``row0 + r``: keep the columns that pass the test, moved to the front of
    their row in order; ``kept[r]`` their number.  With ``sure2 >= 0`` a
    pair whose filter points (FQ, FS) lie within the sure chord is kept
    without the test (``metrics.sure_radius``: the test would keep it)."""
    for r in range(b0, b1):
        i = row0 + r
        lo = indptr[r]
        w = lo
        for k in range(lo, indptr[r + 1]):
            j = indices[k]
            if (self_join and j == i) or (sure2 >= 0.0 and _chord2(FQ, i, FS, j) <= sure2) \
                    or reduced_distance(metric, Q, i, S, j) <= threshold:
                indices[w] = j
                w += 1
        kept[r] = w - lo


@nb.njit(**JIT)
def _gather_rows(indptr, indices, new_indptr, out, b0, b1):
    """Copy the kept front of each row [b0, b1) into the refined table."""
    for r in range(b0, b1):
        src = indptr[r]
        dst = new_indptr[r]
        for k in range(new_indptr[r + 1] - dst):
            out[dst + k] = indices[src + k]


@nb.njit(**JIT)
def _distance_rows(metric, Q, S, indptr, indices, row0, self_join, out, b0, b1):
    """The metric distance of each pair of rows [b0, b1): haversine
    ``2 asin(sqrt(r))`` of the reduced distance r (scikit-learn's
    ``_rdist_to_dist``), the reduced distance itself for the others."""
    for r in range(b0, b1):
        i = row0 + r
        for k in range(indptr[r], indptr[r + 1]):
            j = indices[k]
            if self_join and j == i:
                out[k] = 0.0
                continue
            v = reduced_distance(metric, Q, i, S, j)
            out[k] = 2.0 * math.asin(math.sqrt(v)) if metric == _HAVERSINE else v


def refine_counts(metric, Q, S, indptr, indices, threshold, *, self_join, row0=0, sure=None):
    """Refine the candidate rows in place; returns the int64 kept count of
    each row.  ``S`` is Q for a self-join.  ``sure``: (FQ, FS, radius), the
    filter points of Q and S and the chord within which a pair is kept
    untested (haversine: ``metrics.sure_radius``), or None."""
    if sure is None:
        FQ = FS = np.empty((0, 3))
        sure2 = -1.0
    else:
        FQ, FS, radius = sure
        sure2 = float(radius) * float(radius)
    kept = np.zeros(indptr.shape[0] - 1, dtype=np.int64)
    run_blocks(_refine_rows, (metric, Q, S, indptr, indices, row0, bool(self_join),
                              float(threshold), FQ, FS, sure2, kept), indptr)
    return kept


def _compacted(indptr, indices, kept):
    """The refined CSR arrays from in-place refined rows and their counts."""
    new_indptr = np.empty_like(indptr)
    exclusive_scan_into(kept, new_indptr)
    out = np.empty(int(new_indptr[-1]), dtype=indices.dtype)
    run_blocks(_gather_rows, (indptr, indices, new_indptr, out), new_indptr)
    return new_indptr, out


def refine_table(metric, Q, S, nt: NeighborTable, threshold, *, self_join, distances=False,
                 sure=None):
    """The refined table of the candidate table ``nt`` (a host table, which
    is consumed), with the metric distance of each pair when asked for;
    ``sure`` as ``refine_counts``'."""
    indptr = np.ascontiguousarray(nt.indptr, dtype=np.int64)
    kept = refine_counts(metric, Q, S, indptr, nt.indices, threshold, self_join=self_join,
                         sure=sure)
    new_indptr, new_indices = _compacted(indptr, nt.indices, kept)
    out = NeighborTable(new_indptr, new_indices, nt.shape, nt.sorted)
    if distances:
        dist = np.empty(new_indices.shape[0], dtype=np.float64)
        run_blocks(_distance_rows, (metric, Q, S, new_indptr, new_indices, 0, bool(self_join),
                                    dist), new_indptr)
        out.distances = dist
    return out


def refine_chunk(metric, Q, chunk: PairChunk, threshold, sure=None) -> PairChunk:
    """The refined chunk of a self-join's candidate chunk (CSR form)."""
    indptr = np.ascontiguousarray(chunk.indptr, dtype=np.int64)
    kept = refine_counts(metric, Q, Q, indptr, chunk.indices, threshold, self_join=True,
                         row0=chunk.row_start, sure=sure)
    new_indptr, new_indices = _compacted(indptr, chunk.indices, kept)
    return PairChunk.from_csr(chunk.row_start, new_indptr, new_indices)
