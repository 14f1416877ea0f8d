"""Neighbour-cell enumeration of the epsilon grid (Numba kernels).

Each query cell looks up its adjacent non-empty cells once (Gowanlock &
Karsin 2018, §IV-D: the per-dimension masks M_j restrict the search to
occupied coordinates).  Because the grid stores linear ids in rank space
with the last dimension fastest, the adjacent cells that differ only in
the last indexed dimension are consecutive ids, so one lookup yields one
contiguous range of reordered points ("a row"): 3^(k-1) lookups per cell
instead of 3^k, each a binary search, O(k log c) for c occupied cells.

The cell patterns (``cell_rows``' ``pattern``): 0 full (GPUCALCGLOBAL,
Gowanlock & Karsin 2018 §IV-E); 1 UNICOMP (§V-B); 2 LID-UNICOMP (Gallet &
Gowanlock 2019, §III-B).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..._core.search import lower_bound as _lower_bound
from ..schedule import INNER, JIT

U64 = 2.0 ** -53  # unit roundoff of float64

#: Codes of the cell patterns in the kernels.
PATTERN_CODE = {"full": 0, "unicomp": 1, "lid_unicomp": 2}


@nb.njit(inline="always", **JIT)
def _find_cell(cell_ids, lower_bound, lid):
    """Index of the first non-empty cell whose linear id is >= lid."""
    if lower_bound.shape[0] > 0:
        if lid >= lower_bound.shape[0]:
            return cell_ids.shape[0]
        return lower_bound[lid]
    return _lower_bound(cell_ids, 0, cell_ids.shape[0], lid)


@nb.njit(inline="always", **JIT)
def _rank_interval(coords, off0, off1, c):
    """Ranks of the occupied coordinates within [c - 1, c + 1] of one dimension.

    Returns (lo, hi) with lo > hi when none is occupied (the mask test of
    self-join paper §IV-D: O_j intersected with M_j).
    """
    lo = _lower_bound(coords, off0, off1, c - 1)
    hi = lo - 1
    j = lo
    while j < off1 and coords[j] <= c + 1:
        hi = j
        j += 1
    return lo - off0, hi - off0


@nb.njit(**INNER)
def cell_rows(qc, q_coords, q_coord_off, q_radix, s_cell_ids, s_lower_bound, s_cell_start,
              s_coords, s_coord_off, s_stride, k, pattern, own_cell, out):
    """Point ranges of the adjacent cells that query cell ``qc`` must scan.

    ``qc`` is a cell of the query grid (its linear id is decoded into
    per-dimension coordinates through the query grid's masks); the adjacent
    cells are looked up in the data grid ``s_*``.  For a self-join both
    grids are the same and ``own_cell`` is the index of ``qc`` (else -1).
    Writes (start, stop) pairs into ``out`` and returns how many.  The own
    cell is left out for the symmetric patterns (the caller scans it with
    j > i), and included for ``full``.

    Patterns: 0 full; 1 UNICOMP (self-join paper §V-B, Algorithm 2): the
    pair of adjacent cells (A, B) is compared by the cell whose coordinate
    is odd in the last dimension where A and B differ; 2 LID-UNICOMP
    (load-imbalance paper §III-B, Algorithm 3): by the cell of lower id.
    """
    # decode the query cell's coordinates and find the rank interval of each
    # dimension in the data grid (lo_r[j] .. hi_r[j])
    craw = np.empty(k, dtype=np.int64)
    lo_r = np.empty(k, dtype=np.int64)
    hi_r = np.empty(k, dtype=np.int64)
    own_r = np.empty(k, dtype=np.int64)
    if not decode_cell(qc, q_coords, q_coord_off, q_radix, s_coords, s_coord_off, k, craw,
                        lo_r, hi_r, own_r):
        return 0
    n_out = 0
    last = k - 1
    own_last = own_r[last]
    # the row's lookups (its bounds; for UNICOMP also the own last
    # coordinate's cell) and the ranges it emits go through one site each:
    # every inlined copy of a helper costs compile time
    keys = np.empty(4, dtype=np.int64)
    found = np.empty(4, dtype=np.int64)
    n_keys = 4 if pattern == 1 else 2
    # odometer over the first k-1 dimensions; the last one is a lid range
    cur = lo_r.copy()
    while True:
        base = 0
        for j in range(last):
            base += cur[j] * s_stride[j]
        keys[0] = base + lo_r[last]
        keys[1] = base + hi_r[last] + 1
        keys[2] = base + own_last
        keys[3] = base + own_last + 1
        for w in range(n_keys):
            found[w] = _find_cell(s_cell_ids, s_lower_bound, keys[w])
        a = found[0]
        b = found[1]
        # up to two ranges [a0, b0), [a1, b1) of cells, in this order
        a0, b0, a1, b1 = a, b, b, b
        if pattern == 2:
            # LID-UNICOMP: only cells of higher linear id (= higher index)
            a0 = max(a, own_cell + 1)
        elif pattern == 1:
            # UNICOMP: cell B is compared by the own cell A iff A's coordinate
            # is odd in the last dimension where A and B differ.  In this row
            # the cells other than the one at the own last coordinate differ
            # in the last dimension; that one differs last in dimension m.
            m = -1
            for j in range(last - 1, -1, -1):
                if cur[j] != own_r[j]:
                    m = j
                    break
            x = found[2]
            y = found[3]
            middle = m >= 0 and (craw[m] & 1) == 1
            if (craw[last] & 1) == 1:
                if not middle:
                    b0 = x
                    a1 = y
            elif middle:
                a0 = x
                b0 = y
            else:
                b0 = a
        for r in range(2):
            n_out = _emit(out, n_out, s_cell_start, a0 if r == 0 else a1, b0 if r == 0 else b1)
        # advance the odometer
        j = last - 1
        while j >= 0:
            cur[j] += 1
            if cur[j] <= hi_r[j]:
                break
            cur[j] = lo_r[j]
            j -= 1
        if j < 0:
            break
    return n_out


@nb.njit(inline="always", **JIT)
def max_rows(k):
    """Most rows ``cell_rows`` can write for k indexed dimensions: two per
    lookup of the 3^(k-1) (UNICOMP splits a row around the own cell)."""
    rows = 2
    for _ in range(k - 1):
        rows *= 3
    return rows


@nb.njit(inline="always", **JIT)
def adjacent_rows(c, q_cell_ids, q_coords, q_coord_off, q_radix, s_cell_ids, s_lower_bound,
                  s_cell_start, s_coords, s_coord_off, s_stride, k, pattern, self_join):
    """``cell_rows`` of query cell index c into a fresh array: returns
    (rows, n_rows).  For a self-join the own cell is c."""
    rows = np.empty((max_rows(k) + 1, 2), dtype=np.int64)
    own = np.int64(c) if self_join else np.int64(-1)
    n_rows = cell_rows(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_cell_ids, s_lower_bound,
                       s_cell_start, s_coords, s_coord_off, s_stride, k, pattern, own, rows)
    return rows, n_rows


@nb.njit(inline="always", **JIT)
def _emit(out, n_out, cell_start, a, b):
    """Append the points of cells [a, b) as one range, if any."""
    if a < b:
        out[n_out, 0] = cell_start[a]
        out[n_out, 1] = cell_start[b]
        n_out += 1
    return n_out


@nb.njit(inline="always", **JIT)
def decode_cell(qc, q_coords, q_coord_off, q_radix, s_coords, s_coord_off, k, craw, lo_r, hi_r,
                 own_r):
    """Per-dimension coordinate of query cell qc, its rank in the query grid
    (``own_r``) and the interval of data ranks within one cell of it; False
    if some dimension has none."""
    rem = qc
    for j in range(k - 1, -1, -1):
        r = rem % q_radix[j]
        rem //= q_radix[j]
        c = q_coords[q_coord_off[j] + r]
        lo, hi = _rank_interval(s_coords, s_coord_off[j], s_coord_off[j + 1], c)
        if lo > hi:
            return False
        craw[j] = c
        lo_r[j] = lo
        hi_r[j] = hi
        own_r[j] = r
    return True


def query_args(g):
    """The query grid's arrays, in the kernels' argument order."""
    return (g.points, g.cell_start, g.cell_ids, g.coords, g.coord_off, g.radix)


def data_args(g):
    """The data grid's arrays, in the kernels' argument order."""
    return (g.points, g.cell_ids, g.lower_bound, g.cell_start, g.coords, g.coord_off, g.stride)
