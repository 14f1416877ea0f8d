"""UNICOMP per-cell passes: count, then fill, of a symmetric cell pattern.

UNICOMP (Gowanlock & Karsin 2018, §V-B, Algorithm 2): a cell compares with
an adjacent cell iff its own coordinate is odd in the last dimension in
which the two differ, so each pair of distinct adjacent cells is compared
exactly once, and one distance computation yields both (i, j) and (j, i).
These passes find the forward half (rows of the reordered points); the
second half is scattered by ``mirror``.  Outputs follow count -> scan ->
fill (Numba's CPU target has no atomics).

Cost: per query cell, 3^(k-1) cell lookups (``cells.cell_rows``), then
O(d) per candidate pair, about half the candidates of the full pattern.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .cells import adjacent_rows, data_args, query_args
from ..csr import exclusive_scan_into
from ..schedule import JIT


@nb.njit(inline="always", **JIT)
def _within(qp, sp, i, j, d, eps2):
    """sum_k (q_ik - s_jk)^2 <= eps2 in the working precision, k in order."""
    acc = qp[i, 0] * 0    # a zero of the points' dtype (eps2 * 0 is NaN for eps2 = inf)
    for t in range(d):
        diff = qp[i, t] - sp[j, t]
        acc += diff * diff
    return acc <= eps2


@nb.njit(inline="always", **JIT)
def _cell_work(c, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix, s_cell_ids,
               s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride, k, pattern,
               self_join):
    """The work of query cell c: its reordered points c0..c1 and the rows of
    the adjacent cells the pattern assigns to it (``cells.adjacent_rows``).
    Returns (c0, c1, rows, n_rows)."""
    rows, n_rows = adjacent_rows(c, q_cell_ids, q_coords, q_coord_off, q_radix, s_cell_ids,
                                 s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride, k,
                                 pattern, self_join)
    return q_cell_start[c], q_cell_start[c + 1], rows, n_rows


# ---------------------------------------------------------------------------
# Counting and filling
# ---------------------------------------------------------------------------

@nb.njit(parallel=True, **JIT)
def count_pass(q_pts, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
               s_pts, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
               k, eps2, pattern, self_join, include_self, counts):
    """Number of neighbours of every reordered query point (forward half for
    the symmetric patterns: neighbours in scanned cells and j > i in the own
    cell).  Query points are processed cell by cell."""
    n_cells = q_cell_ids.shape[0]
    d = q_pts.shape[1]
    for c in nb.prange(n_cells):
        c0, c1, rows, n_rows = _cell_work(c, q_cell_start, q_cell_ids, q_coords, q_coord_off,
                                          q_radix, s_cell_ids, s_lower_bound, s_cell_start,
                                          s_coords, s_coord_off, s_stride, k, pattern, self_join)
        for i in range(c0, c1):
            cnt = 0
            for r in range(n_rows):
                for j in range(rows[r, 0], rows[r, 1]):
                    if _within(q_pts, s_pts, i, j, d, eps2):
                        cnt += 1
            if pattern != 0:
                for j in range(i + 1, c1):
                    if _within(q_pts, s_pts, i, j, d, eps2):
                        cnt += 1
            elif self_join and not include_self:
                cnt -= 1  # the point itself was counted in its own cell
            counts[i] = cnt
    return counts


@nb.njit(parallel=True, **JIT)
def fill_pass(q_pts, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
              s_pts, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
              k, eps2, pattern, self_join, include_self, cell_list, row_pos, s_order, indices):
    """Write the neighbours found by ``count_pass`` (as original ids of the
    data set) starting at ``row_pos[i]`` for reordered query point i.

    Only the query cells in ``cell_list`` are visited, and points with
    ``row_pos[i] < 0`` are skipped (used to fill one chunk of rows)."""
    d = q_pts.shape[1]
    for ci in nb.prange(cell_list.shape[0]):
        c = cell_list[ci]
        c0, c1, rows, n_rows = _cell_work(c, q_cell_start, q_cell_ids, q_coords, q_coord_off,
                                          q_radix, s_cell_ids, s_lower_bound, s_cell_start,
                                          s_coords, s_coord_off, s_stride, k, pattern, self_join)
        for i in range(c0, c1):
            pos = row_pos[i]
            if pos < 0:
                continue
            skip = i if (self_join and pattern == 0 and not include_self) else -1
            for r in range(n_rows):
                for j in range(rows[r, 0], rows[r, 1]):
                    if j != skip and _within(q_pts, s_pts, i, j, d, eps2):
                        indices[pos] = s_order[j]
                        pos += 1
            if pattern != 0:
                for j in range(i + 1, c1):
                    if _within(q_pts, s_pts, i, j, d, eps2):
                        indices[pos] = s_order[j]
                        pos += 1


def fill_rows(gq, gs, eps2, pattern, self_join, include_self, row_pos, indices, cell_list=None):
    """Run the filling pass over all query cells (or ``cell_list``)."""
    if cell_list is None:
        cell_list = np.arange(gq.n_cells, dtype=np.int64)
    if gq.n_points:
        fill_pass(*query_args(gq), *data_args(gs), gs.k, eps2, pattern, self_join,
                  include_self, cell_list, row_pos, gs.order, indices)


def count_rows(gq, gs, eps2, pattern, self_join, include_self, counts):
    """Run the counting pass over all query cells into ``counts``."""
    count_pass(*query_args(gq), *data_args(gs), gs.k, eps2, pattern, self_join,
               include_self, counts)


def forward_half(g, eps2, pattern, idx_dtype, before_fill=None):
    """Forward half of UNICOMP (self-join) on the per-cell path: for
    reordered point i, the caller ids of its neighbours in the cells the
    pattern assigns to i's cell (and j > i in its own cell).
    Returns (half_counts, half_indptr, half_indices), rows in reordered order.
    ``before_fill(half_total)``, if given, runs between the count and the
    allocation of the half (the result-size guard).

    Cost: two passes over the candidates (count, fill), O(n) scan."""
    n = g.n_points
    half_counts = np.empty(n, dtype=np.int64)
    if n:
        count_rows(g, g, eps2, pattern, True, False, half_counts)
    half_indptr = np.empty(n + 1, dtype=np.int64)
    half_total = exclusive_scan_into(half_counts, half_indptr)
    if before_fill is not None:
        before_fill(int(half_total))
    half_indices = np.empty(half_total, dtype=idx_dtype)
    fill_rows(g, g, eps2, pattern, True, False, half_indptr[:-1].copy(), half_indices)
    return half_counts, half_indptr, half_indices

