"""The multicore CPU join engine (Numba, parallel over grid cells).

Each query cell looks up its adjacent non-empty cells once (self-join paper
§IV-D: the per-dimension masks M_j restrict the search to occupied
coordinates), and all points of the cell scan the resulting candidate
ranges.  Because the grid stores linear ids in rank space with the last
dimension fastest, the adjacent cells that differ only in the last indexed
dimension are consecutive ids, so one lookup yields one contiguous range of
reordered points ("a row"): 3^(k-1) lookups per cell instead of 3^k.

Outputs follow count -> exclusive scan -> fill, since Numba's CPU target has
no atomics: a counting pass sizes every row exactly, then a filling pass
writes each row straight to its final place (rows in the caller's order), so
nothing is ever over-allocated, truncated or copied twice.  The one
exception is LID-UNICOMP on sparse data, whose result is small: its forward
half is found in a single pass into per-block buffers.

Parallelism: the kernels are sequential and nogil, and the host runs them on
blocks of cells from a pool of threads (``_run_blocks``): dynamic
scheduling, since dense cells cost far more than sparse ones, and no parfor
to compile (the prange kernels took most of the first call's 20 s).

Two paths per query cell (``TILE_MIN_POINTS``): dense cells gather their
candidates once (merged into caller-id order, so rows come out sorted) and
split their points into sub-tiles that test only the candidates near their
bounding box; sparse cells go point by point, walking only the adjacent
cells within reach of the point (rigorous distance-to-cell bounds).

Cell patterns (``pattern=``):

* ``"full"``: every point scans all adjacent cells (GPUCALCGLOBAL's pattern,
  self-join paper §IV-E).  Rows are independent; no scatter.
* ``"unicomp"``: the UNICOMP pattern (self-join paper §V-B): a cell
  compares with an adjacent cell iff its own coordinate is odd in the last
  dimension in which the two differ, so each pair of distinct adjacent
  cells is compared exactly once.
* ``"lid_unicomp"``: LID-UNICOMP (load-imbalance paper §III-B): a cell
  compares with the adjacent cells of higher linear id.

With the two symmetric patterns one distance computation yields both (i, j)
and (j, i); the second half of each pair is scattered to its row in a
sequential pass (no atomics on the CPU).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from ._simd import compress16, prefetch_read, prefetch_write

PATTERNS = ("full", "unicomp", "lid_unicomp")
PATTERN_CODE = {"full": 0, "unicomp": 1, "lid_unicomp": 2}

_jit = dict(cache=NUMBA_CACHE, nogil=True)
_U64 = 2.0 ** -53  # unit roundoff of float64


# ---------------------------------------------------------------------------
# Neighbour-cell enumeration
# ---------------------------------------------------------------------------

@nb.njit(inline="always", **_jit)
def _find_cell(cell_ids, lower_bound, lid):
    """Index of the first non-empty cell whose linear id is >= lid."""
    if lower_bound.shape[0] > 0:
        if lid >= lower_bound.shape[0]:
            return cell_ids.shape[0]
        return lower_bound[lid]
    return np.searchsorted(cell_ids, lid)


@nb.njit(**_jit)
def _rank_interval(coords, off0, off1, c):
    """Ranks of the occupied coordinates within [c - 1, c + 1] of one dimension.

    Returns (lo, hi) with lo > hi when none is occupied (the mask test of
    self-join paper §IV-D: O_j intersected with M_j).
    """
    lo = off0 + np.searchsorted(coords[off0:off1], c - 1)
    hi = lo - 1
    j = lo
    while j < off1 and coords[j] <= c + 1:
        hi = j
        j += 1
    return lo - off0, hi - off0


@nb.njit(**_jit)
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
    lo_r = np.empty(k, dtype=np.int64)
    hi_r = np.empty(k, dtype=np.int64)
    own_r = np.empty(k, dtype=np.int64)
    odd = np.empty(k, dtype=np.bool_)
    rem = qc
    for j in range(k - 1, -1, -1):
        r = rem % q_radix[j]
        rem //= q_radix[j]
        c = q_coords[q_coord_off[j] + r]
        lo, hi = _rank_interval(s_coords, s_coord_off[j], s_coord_off[j + 1], c)
        if lo > hi:
            return 0
        lo_r[j] = lo
        hi_r[j] = hi
        # rank of the query's own coordinate in the data grid (self-join: r)
        own_r[j] = r
        odd[j] = (c & 1) == 1
    n_out = 0
    last = k - 1
    own_last = own_r[last]
    # odometer over the first k-1 dimensions; the last one is a lid range
    cur = lo_r.copy()
    while True:
        base = 0
        for j in range(last):
            base += cur[j] * s_stride[j]
        a = _find_cell(s_cell_ids, s_lower_bound, base + lo_r[last])
        b = _find_cell(s_cell_ids, s_lower_bound, base + hi_r[last] + 1)
        if pattern == 0:
            n_out = _emit(out, n_out, s_cell_start, a, b)
        elif pattern == 2:
            # LID-UNICOMP: only cells of higher linear id (= higher index)
            n_out = _emit(out, n_out, s_cell_start, max(a, own_cell + 1), b)
        else:
            # UNICOMP: cell B is compared by the own cell A iff A's coordinate
            # is odd in the last dimension where A and B differ.  In this row
            # the cells other than the one at the own last coordinate differ
            # in the last dimension; that one differs last in dimension m.
            m = -1
            for j in range(last - 1, -1, -1):
                if cur[j] != own_r[j]:
                    m = j
                    break
            x = _find_cell(s_cell_ids, s_lower_bound, base + own_last)
            y = _find_cell(s_cell_ids, s_lower_bound, base + own_last + 1)
            middle = m >= 0 and odd[m]
            if odd[last]:
                if middle:
                    n_out = _emit(out, n_out, s_cell_start, a, b)
                else:
                    n_out = _emit(out, n_out, s_cell_start, a, x)
                    n_out = _emit(out, n_out, s_cell_start, y, b)
            elif middle:
                n_out = _emit(out, n_out, s_cell_start, x, y)
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


@nb.njit(inline="always", **_jit)
def _emit(out, n_out, cell_start, a, b):
    """Append the points of cells [a, b) as one range, if any."""
    if a < b:
        out[n_out, 0] = cell_start[a]
        out[n_out, 1] = cell_start[b]
        n_out += 1
    return n_out


def max_row_ranges(k: int) -> int:
    """Upper bound on the ranges ``cell_rows`` writes for k indexed dims."""
    return 2 * 3 ** (k - 1) + 1


@nb.njit(inline="always", **_jit)
def _within(qp, sp, i, j, d, eps2):
    """sum_k (q_ik - s_jk)^2 <= eps2 in the working precision, k in order."""
    acc = qp[i, 0] * 0    # a zero of the points' dtype (eps2 * 0 is NaN for eps2 = inf)
    for t in range(d):
        diff = qp[i, t] - sp[j, t]
        acc += diff * diff
    return acc <= eps2


# ---------------------------------------------------------------------------
# Counting and filling
# ---------------------------------------------------------------------------

@nb.njit(parallel=True, **_jit)
def count_pass(q_pts, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
               s_pts, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
               k, eps2, pattern, self_join, include_self, counts):
    """Number of neighbours of every reordered query point (forward half for
    the symmetric patterns: neighbours in scanned cells and j > i in the own
    cell).  Query points are processed cell by cell."""
    n_cells = q_cell_ids.shape[0]
    d = q_pts.shape[1]
    max_rows = 2
    for j in range(k - 1):
        max_rows *= 3
    for c in nb.prange(n_cells):
        rows = np.empty((max_rows + 1, 2), dtype=np.int64)
        own = np.int64(c) if self_join else np.int64(-1)
        n_rows = cell_rows(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_cell_ids,
                           s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
                           k, pattern, own, rows)
        c0 = q_cell_start[c]
        c1 = q_cell_start[c + 1]
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


@nb.njit(parallel=True, **_jit)
def fill_pass(q_pts, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
              s_pts, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
              k, eps2, pattern, self_join, include_self, cell_list, row_pos, s_order, indices):
    """Write the neighbours found by ``count_pass`` (as original ids of the
    data set) starting at ``row_pos[i]`` for reordered query point i.

    Only the query cells in ``cell_list`` are visited, and points with
    ``row_pos[i] < 0`` are skipped (used to fill one chunk of rows)."""
    d = q_pts.shape[1]
    max_rows = 2
    for j in range(k - 1):
        max_rows *= 3
    for ci in nb.prange(cell_list.shape[0]):
        c = cell_list[ci]
        rows = np.empty((max_rows + 1, 2), dtype=np.int64)
        own = np.int64(c) if self_join else np.int64(-1)
        n_rows = cell_rows(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_cell_ids,
                           s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
                           k, pattern, own, rows)
        c0 = q_cell_start[c]
        c1 = q_cell_start[c + 1]
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


# ---------------------------------------------------------------------------
# The full pattern, tiled: per cell, the candidates are gathered once into a
# local structure-of-arrays buffer; every point of the cell then runs a
# branch-free, vectorisable distance loop over it.
# ---------------------------------------------------------------------------

@nb.njit(**_jit)
def _merge_runs(cid, cj, m):
    """Sort the candidates by caller id, given that they form a few
    ascending runs (every cell holds its points in ascending caller id: the
    grid's counting sort is stable).  Bottom-up pairwise merging of the
    runs, O(m log runs) instead of a full sort."""
    runs = np.empty(m + 2, dtype=np.int64)
    runs[0] = 0
    nr = 1
    for p in range(1, m):
        if cid[p] < cid[p - 1]:
            runs[nr] = p
            nr += 1
    runs[nr] = m
    if nr == 1:
        return cid, cj
    a_id = cid
    a_j = cj
    b_id = np.empty_like(cid)
    b_j = np.empty_like(cj)
    while nr > 1:
        new_nr = 0
        t = 0
        while t < nr:
            lo = runs[t]
            mid = runs[t + 1]
            hi = runs[t + 2] if t + 2 <= nr else mid
            x = lo
            y = mid
            o = lo
            while x < mid and y < hi:
                # branch-free step (the comparison is unpredictable)
                vx = a_id[x]
                vy = a_id[y]
                ty = vy < vx
                b_id[o] = vy if ty else vx
                b_j[o] = a_j[y] if ty else a_j[x]
                y += ty
                x += 1 - ty
                o += 1
            while x < mid:
                b_id[o] = a_id[x]
                b_j[o] = a_j[x]
                x += 1
                o += 1
            while y < hi:
                b_id[o] = a_id[y]
                b_j[o] = a_j[y]
                y += 1
                o += 1
            runs[new_nr] = lo
            new_nr += 1
            t += 2
        runs[new_nr] = m
        nr = new_nr
        a_id, b_id = b_id, a_id
        a_j, b_j = b_j, a_j
    return a_id, a_j


@nb.njit(**_jit)
def _candidates(rows, n_rows, s_order, with_ids, pad):
    """Candidates of a cell, in row order: reordered ids, and with
    ``with_ids`` their caller ids (dtype of ``s_order``, ``pad`` more slots
    than m, read but never used by ``compress16``).  Returns (cid, cj, m).
    The merge by caller id (``_merge_runs``) is the caller's, so that the
    counting pass, which needs no order, does not compile it."""
    m = 0
    for r in range(n_rows):
        m += rows[r, 1] - rows[r, 0]
    cj = np.empty(m, dtype=np.int64)
    p = 0
    for r in range(n_rows):
        for j in range(rows[r, 0], rows[r, 1]):
            cj[p] = j
            p += 1
    cid = np.zeros(m + pad if with_ids else 0, dtype=s_order.dtype)
    if with_ids:
        for p in range(m):
            cid[p] = s_order[cj[p]]
    return cid, cj, m


@nb.njit(**_jit)
def _coords(s_pts, cid, cj, m, by_caller):
    """Coordinates (d, m) of the candidates: ``s_pts`` holds the points
    reordered (indexed by ``cj``), or with ``by_caller`` in the caller's
    order (indexed by ``cid``)."""
    d = s_pts.shape[1]
    cp = np.empty((d, m), dtype=s_pts.dtype)
    for p in range(m):
        j = np.int64(cid[p]) if by_caller else cj[p]
        for t in range(d):
            cp[t, p] = s_pts[j, t]
    return cp


@nb.njit(inline="always", **_jit)
def _distances(q_pts, i, cp, m, db):
    """db[p] = sum_t (q_it - cp[t, p])^2, summed in dimension order."""
    d = cp.shape[0]
    for p in range(m):
        db[p] = 0
    for t in range(d):
        q = q_pts[i, t]
        row = cp[t]
        for p in range(m):
            diff = q - row[p]
            db[p] += diff * diff


# Dense cells are split into sub-tiles: the cell's query points are grouped
# by sub-cell (about SUBTILE_POINTS per group), and each group tests only
# the candidates inside its own bounding box widened by the reach of the
# test.  In 2-D this halves the candidates of a dense cell (the area
# (2 eps + eps/s)^2 instead of 9 eps^2); the filtered list keeps the
# candidates' order, so rows still come out sorted.
SUBTILE_POINTS = 32


@nb.njit(**_jit)
def _subtiles(q_pts, c0, c1, k, lo, side, target, qorder):
    """Group the query points c0..c1 of a cell by sub-cell: writes the
    points in group order to ``qorder`` and returns the group offsets
    (a single group when the cell holds fewer than 2 * target points)."""
    n_c = c1 - c0
    ng = n_c // target
    if ng < 2:
        for x in range(n_c):
            qorder[x] = c0 + x
        goff = np.empty(2, dtype=np.int64)
        goff[0] = 0
        goff[1] = n_c
        return goff
    kk = min(k, int(np.log2(ng)))
    s = 2 if kk < k else max(2, int(ng ** (1.0 / kk) + 1e-9))
    n_keys = s ** kk
    key = np.empty(n_c, dtype=np.int64)
    goff = np.zeros(n_keys + 1, dtype=np.int64)
    for x in range(n_c):
        i = c0 + x
        kv = 0
        for j in range(kk):
            v = (np.float64(q_pts[i, j]) - lo[j]) / side[j]
            sub = int((v - np.floor(v)) * s)
            sub = min(max(sub, 0), s - 1)
            kv = kv * s + sub
        key[x] = kv
        goff[kv + 1] += 1
    for g in range(n_keys):
        goff[g + 1] += goff[g]
    fill = goff[:-1].copy()
    for x in range(n_c):
        qorder[fill[key[x]]] = c0 + x
        fill[key[x]] += 1
    return goff


@nb.njit(**_jit)
def _filter_box(q_pts, qorder, a, b, cp, cid, cj, m, reach, cp2, cid2, cj2):
    """Candidates within ``reach`` of the bounding box of query points
    qorder[a:b] in every dimension, in their original order; returns how
    many (caller ids are copied when ``cid`` holds them: it is empty in
    the counting pass).  Exactness: a pair that passes the test has
    |q_t - y_t| <= eps (1 + (d + 5) u) exactly (see
    ``skyjoin.index.grid.cell_sides``), and ``reach`` is at least that; the box
    holds q_t, so lo_t - y_t <= reach and y_t - hi_t <= reach exactly, and
    rounding is monotone, so the float64 differences compared here are
    <= reach too."""
    d = cp.shape[0]
    blo = np.empty(d)
    bhi = np.empty(d)
    for t in range(d):
        blo[t] = np.inf
        bhi[t] = -np.inf
    for x in range(a, b):
        i = qorder[x]
        for t in range(d):
            v = np.float64(q_pts[i, t])
            blo[t] = min(blo[t], v)
            bhi[t] = max(bhi[t], v)
    with_ids = cid.shape[0] > 0
    m2 = 0
    for p in range(m):
        keep = True
        for t in range(d):
            v = np.float64(cp[t, p])
            keep = keep and (blo[t] - v <= reach) and (v - bhi[t] <= reach)
        if keep:
            for t in range(d):
                cp2[t, m2] = cp[t, p]
            if with_ids:
                cid2[m2] = cid[p]
            cj2[m2] = cj[p]
            m2 += 1
    return m2


@nb.njit(**_jit)
def count_full(q_pts, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
               s_pts, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
               k, eps2, self_join, include_self, s_order, lo, side, slack, lim, tile_min,
               point_lb, half, counts, cb0, cb1):
    """Full-pattern neighbour count of every reordered query point: cells
    of at least ``tile_min`` points take the tiled path, others the pruned
    point-by-point path.  With ``half`` (self-join, no tiled path) the
    forward half of LID-UNICOMP is counted instead (see ``_point_scan``).
    Query cells [cb0, cb1) only: sequential and nogil, the host runs blocks
    of cells on a pool of threads (``_run_blocks``)."""
    d = q_pts.shape[1]
    early = d > 3
    max_rows = 2
    for j in range(k - 1):
        max_rows *= 3
    dummy = np.empty(0, dtype=np.int32)
    no_map = np.empty(0, dtype=s_order.dtype)
    for c in range(cb0, cb1):
        c0 = q_cell_start[c]
        c1 = q_cell_start[c + 1]
        if c1 - c0 < tile_min:
            craw = np.empty(k, dtype=np.int64)
            lo_r = np.empty(k, dtype=np.int64)
            hi_r = np.empty(k, dtype=np.int64)
            own_r = np.empty(k, dtype=np.int64)
            eqp = np.empty(k, dtype=np.bool_)
            if not _decode_cell(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_coords,
                                s_coord_off, k, craw, lo_r, hi_r, own_r):
                for i in range(c0, c1):
                    counts[i] = 0
                continue
            gl2 = np.empty(k)
            gh2 = np.empty(k)
            cur = np.empty(k, dtype=np.int64)
            partial = np.empty(k)
            for i in range(c0, c1):
                _cell_gaps(q_pts, i, k, lo, side, slack, gl2, gh2)
                excl = i if (self_join and not include_self and not half) else -1
                counts[i] = _point_scan(q_pts, i, i, s_pts, no_map, excl, eps2, lim, early, k,
                                        craw, lo_r, hi_r, own_r, half, s_coords, s_coord_off,
                                        s_stride, s_cell_ids, s_lower_bound, s_cell_start,
                                        point_lb, gl2, gh2, cur, partial, eqp, s_order, dummy,
                                        0, -1)
            continue
        rows = np.empty((max_rows + 1, 2), dtype=np.int64)
        n_rows = cell_rows(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_cell_ids,
                           s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
                           k, 0, np.int64(-1), rows)
        cid, cj, m = _candidates(rows, n_rows, s_order, False, 0)
        cp = _coords(s_pts, cid, cj, m, False)
        db = np.empty(m, dtype=cp.dtype)
        qorder = np.empty(c1 - c0, dtype=np.int64)
        goff = _subtiles(q_pts, c0, c1, k, lo, side, SUBTILE_POINTS, qorder)
        n_groups = goff.shape[0] - 1
        if n_groups > 1:
            cp2 = np.empty_like(cp)
            cid2 = np.empty_like(cid)
            cj2 = np.empty_like(cj)
        else:
            cp2, cid2, cj2 = cp, cid, cj
        reach = np.sqrt(lim) * (1.0 + 4.0 * _U64)
        for g in range(n_groups):
            if goff[g] == goff[g + 1]:
                continue
            m2 = m
            if n_groups > 1:
                m2 = _filter_box(q_pts, qorder, goff[g], goff[g + 1], cp, cid, cj, m, reach,
                                 cp2, cid2, cj2)
            for x in range(goff[g], goff[g + 1]):
                i = qorder[x]
                _distances(q_pts, i, cp2, m2, db)
                cnt = 0
                for p in range(m2):
                    cnt += db[p] <= eps2
                if self_join and not include_self:
                    cnt -= 1  # the point itself, at distance 0
                counts[i] = cnt


# Output rows are prefetched this many query points ahead of their writes.
ROW_LOOKAHEAD = 4


@nb.njit(inline="always", **_jit)
def _prefetch_row(indices, start, rl, line):
    """Announce the writes of indices[start:start + rl] (``line`` items a
    cache line) to the cache."""
    if start >= 0 and rl > 0:
        for q in range(start, start + rl, line):
            prefetch_write(indices, q)
        prefetch_write(indices, start + rl - 1)


@nb.njit(inline="always", **_jit)
def _row_slot(i, row_pos, row_len, q_order, indptr):
    """Start and length of reordered query point i's row in the output."""
    if row_pos.shape[0] > 0:
        return row_pos[i], row_len[i]
    o = q_order[i]
    return indptr[o], indptr[o + 1] - indptr[o]


@nb.njit(**_jit)
def fill_full_kernel(q_pts, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
                     s_pts, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off,
                     s_stride, k, eps2, self_join, include_self, sort, cell_list, row_pos,
                     row_len, q_order, indptr, s_order, lo, side, slack, lim, tile_min,
                     point_lb, half, indices, bad, cb0, cb1):
    """Full-pattern fill: write the caller ids of the neighbours of reordered
    query point i at ``row_pos[i]`` (skipped if < 0), ``row_len[i]`` of them;
    or, when ``row_pos`` is empty, at ``indptr[q_order[i]]``, as many as
    that caller-order CSR row holds (no per-point arrays: less memory).

    ``q_pts``/``s_pts`` are the caller's arrays, not the grids' reordered
    copies (reordered query point i is ``q_pts[q_order[i]]``): the memory
    budget has no room for a copy next to the output.  The tiled path reads
    them once per cell (gathered candidates, whose loads are prefetched, and
    query points).

    With ``sort``, a tiled cell gathers its candidates in caller-id order
    (a merge of the cells' ascending runs), so its rows come out sorted;
    rows of the point-by-point path are sorted in place.  A tiled cell's
    hits are packed 16 candidates at a time (``_simd.compress16``) into a
    local row, then copied to the output row, whose cache lines were
    prefetched a few points ahead (rows in caller order are scattered over
    the output; so are the next cell's row slots and query points, which
    are prefetched while a cell runs).  A row whose length differs from the count (which
    cannot happen with deterministic arithmetic) is not written past its
    end: ``bad[0]`` is set instead.
    Cells of fewer than ``tile_min`` points take the pruned point-by-point
    path, whose rows are sorted in place.  Only cells ``cell_list[cb0:cb1]``
    (cells cb0..cb1 when ``cell_list`` is empty): sequential and nogil, run
    in blocks on a pool of threads."""
    d = q_pts.shape[1]
    early = d > 3
    max_rows = 2
    for j in range(k - 1):
        max_rows *= 3
    line = max(1, 64 // indices.itemsize)  # items per cache line
    qrow = np.empty((1, d), dtype=q_pts.dtype)
    all_cells = cell_list.shape[0] == 0
    for ci in range(cb0, cb1):
        c = ci if all_cells else cell_list[ci]
        c0 = q_cell_start[c]
        c1 = q_cell_start[c + 1]
        if c1 - c0 < tile_min:
            craw = np.empty(k, dtype=np.int64)
            lo_r = np.empty(k, dtype=np.int64)
            hi_r = np.empty(k, dtype=np.int64)
            own_r = np.empty(k, dtype=np.int64)
            eqp = np.empty(k, dtype=np.bool_)
            if not _decode_cell(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_coords,
                                s_coord_off, k, craw, lo_r, hi_r, own_r):
                continue
            gl2 = np.empty(k)
            gh2 = np.empty(k)
            cur = np.empty(k, dtype=np.int64)
            partial = np.empty(k)
            for i in range(c0, c1):
                start, rl = _row_slot(i, row_pos, row_len, q_order, indptr)
                if start < 0:
                    continue
                for t in range(d):
                    qrow[0, t] = q_pts[q_order[i], t]
                _cell_gaps(qrow, 0, k, lo, side, slack, gl2, gh2)
                excl = i if (self_join and not include_self and not half) else -1
                n_found = _point_scan(qrow, 0, i, s_pts, s_order, excl, eps2, lim, early, k, craw,
                                      lo_r, hi_r, own_r, half, s_coords, s_coord_off, s_stride,
                                      s_cell_ids, s_lower_bound, s_cell_start, point_lb, gl2,
                                      gh2, cur, partial, eqp, s_order, indices, start, rl)
                if n_found != rl:
                    bad[0] = 1
                    continue
                if sort:
                    _sort_range(indices, start, start + n_found)
            continue
        rows = np.empty((max_rows + 1, 2), dtype=np.int64)
        n_rows = cell_rows(q_cell_ids[c], q_coords, q_coord_off, q_radix, s_cell_ids,
                           s_lower_bound, s_cell_start, s_coords, s_coord_off, s_stride,
                           k, 0, np.int64(-1), rows)
        # the cell's row slots and query points (copied to a local block,
        # local ids 0..n_c) were prefetched while the previous cell ran;
        # now those of the next cell are (all scattered: caller order)
        n_c = c1 - c0
        r_start = np.empty(n_c, dtype=np.int64)
        r_len = np.empty(n_c, dtype=np.int64)
        qloc = np.empty((n_c, d), dtype=q_pts.dtype)
        for x in range(n_c):
            start, rl = _row_slot(c0 + x, row_pos, row_len, q_order, indptr)
            r_start[x] = start
            r_len[x] = rl
            for t in range(d):
                qloc[x, t] = q_pts[q_order[c0 + x], t]
        if ci + 1 < cb1:
            cn = ci + 1 if all_cells else cell_list[ci + 1]
            for i in range(q_cell_start[cn], q_cell_start[cn + 1]):
                o = q_order[i]
                if row_pos.shape[0] == 0:
                    prefetch_read(indptr, o)
                prefetch_read(q_pts, np.int64(o) * d)
        qorder = np.empty(n_c, dtype=np.int64)
        goff = _subtiles(qloc, 0, n_c, k, lo, side, SUBTILE_POINTS, qorder)
        # the output rows are announced to the cache a few points ahead of
        # their writes (the first ones before the candidates are gathered)
        for x in range(min(ROW_LOOKAHEAD, n_c)):
            _prefetch_row(indices, r_start[qorder[x]], r_len[qorder[x]], line)
        cid, cj, m = _candidates(rows, n_rows, s_order, True, 16)
        # the candidates' rows of the caller's array are scattered: their
        # loads are started here, to overlap the merge
        for p in range(m):
            prefetch_read(s_pts, np.int64(cid[p]) * d)
        # each cell is an ascending run of caller ids: merging the runs
        # costs less than sorting the rows, so sorted rows come for free
        if sort:
            cid, cj = _merge_runs(cid, cj, m)
        cp = _coords(s_pts, cid, cj, m, True)
        # distances padded to a multiple of 16 with NaN (never passes)
        db = np.empty(m + 16, dtype=cp.dtype)
        buf = np.empty(m + 16, dtype=cid.dtype)
        excl_self = self_join and not include_self
        n_groups = goff.shape[0] - 1
        if n_groups > 1:
            cp2 = np.empty_like(cp)
            cid2 = np.empty_like(cid)
            cj2 = np.empty_like(cj)
        else:
            cp2, cid2, cj2 = cp, cid, cj
        reach = np.sqrt(lim) * (1.0 + 4.0 * _U64)
        selfpos = np.empty(n_c, dtype=np.int64)
        for g in range(n_groups):
            if goff[g] == goff[g + 1]:
                continue
            m2 = m
            if n_groups > 1:
                m2 = _filter_box(qloc, qorder, goff[g], goff[g + 1], cp, cid, cj, m, reach,
                                 cp2, cid2, cj2)
            for p in range(m2, m2 + 16):
                db[p] = np.nan
            if excl_self:
                # position of each query point among the candidates: its own
                # distance is set to NaN so that it never passes the test
                # (a query point lies in its own box: never filtered out)
                for p in range(m2):
                    if c0 <= cj2[p] < c1:
                        selfpos[cj2[p] - c0] = p
            for x in range(goff[g], goff[g + 1]):
                if x + ROW_LOOKAHEAD < n_c:
                    ia = qorder[x + ROW_LOOKAHEAD]
                    _prefetch_row(indices, r_start[ia], r_len[ia], line)
                il = qorder[x]
                start = r_start[il]
                rl = r_len[il]
                if start < 0:
                    continue
                _distances(qloc, il, cp2, m2, db)
                if excl_self:
                    db[selfpos[il]] = np.nan
                # the hits, in candidate order, packed into a local row
                # 16 candidates at a time, then copied to the output row
                # (never past its end: a count that differs sets ``bad``)
                n_found = 0
                for p in range(0, m2, 16):
                    n_found += compress16(buf, n_found, cid2, p, db, eps2)
                if n_found != rl:
                    bad[0] = 1
                for t in range(min(n_found, rl)):
                    indices[start + t] = buf[t]


# ---------------------------------------------------------------------------
# The full pattern, point by point with distance-to-cell pruning.  For
# sparse cells (a few points each, typical from 4 dimensions up) gathering a
# cell's 3^k neighbours is wasted work: instead each point walks the
# neighbour odometer with a running lower bound on its squared distance to
# the cells, skips every cell (and whole sub-trees) out of reach, and tests
# candidates with an early exit.  Exactness: the bound is rigorous, see
# ``_cell_gaps``; a skipped cell holds no point that could pass the test.
# ---------------------------------------------------------------------------



@nb.njit(**_jit)
def _cell_gaps(q_pts, i, k, lo, side, slack, gl2, gh2):
    """Squared lower bounds on |q_ij - y_j| for y in the cell below
    (``gl2[j]``) and above (``gh2[j]``) the query's cell in dimension j.

    With v = fl(fl(q - lo) / side) (the value whose floor is the cell
    coordinate c) and f = v - c, every point y of the cell below satisfies
    q - y > side (f - slack), since both coordinates carry at most
    ``slack / 2`` cells of rounding; likewise y - q > side (1 - f - slack)
    above.  The bounds are shrunk by a few ulps more for their own rounding.
    """
    for j in range(k):
        v = (np.float64(q_pts[i, j]) - lo[j]) / side[j]
        f = v - np.floor(v)
        a = f - slack[j]
        b = 1.0 - f - slack[j]
        a = side[j] * a * (1.0 - 8.0 * _U64) if a > 0.0 else 0.0
        b = side[j] * b * (1.0 - 8.0 * _U64) if b > 0.0 else 0.0
        gl2[j] = a * a
        gh2[j] = b * b


@nb.njit(inline="always", **_jit)
def _gap2(s_coords, off, r, c, gl2j, gh2j):
    e = s_coords[off + r]
    if e < c:
        return gl2j
    if e > c:
        return gh2j
    return 0.0


@nb.njit(inline="always", **_jit)
def _test(q_pts, i, s_pts, j, d, eps2, early):
    """The distance test; with ``early`` it stops once the partial sum
    exceeds eps2 (partial sums of squares only grow, so the answer is the
    same)."""
    acc = q_pts[i, 0] * 0    # a zero of the points' dtype (eps2 * 0 is NaN for eps2 = inf)
    for t in range(d):
        diff = q_pts[i, t] - s_pts[j, t]
        acc += diff * diff
        if early and acc > eps2:
            return False
    return acc <= eps2


@nb.njit(inline="always", **_jit)
def _row_bounds(s_cell_ids, s_lower_bound, s_cell_start, point_lb, lid0, lid1):
    """Reordered points [start, stop) of the non-empty cells with linear ids
    in [lid0, lid1).  With a dense rank space ``point_lb[v]`` is the first
    point of the first cell whose id is >= v (one table load instead of
    lower_bound -> cell_start)."""
    if point_lb.shape[0] > 0:
        top = point_lb.shape[0] - 1
        return point_lb[min(lid0, top)], point_lb[min(lid1, top)]
    a = np.searchsorted(s_cell_ids, lid0)
    b = np.searchsorted(s_cell_ids, lid1)
    return s_cell_start[a], s_cell_start[b]


@nb.njit(**_jit)
def _point_scan(q_pts, qi, i, s_pts, s_map, excl, eps2, lim, early, k, craw, lo_r, hi_r, own_r,
                half, s_coords, s_coord_off, s_stride, s_cell_ids, s_lower_bound, s_cell_start,
                point_lb, gl2, gh2, cur, partial, eqp, s_order, out, out_start, cap):
    """Count the neighbours of reordered query point i (coordinates
    ``q_pts[qi]``), walking only the adjacent cells within reach (``lim``
    bounds the squared distance of any pair that can pass the test); with
    ``cap >= 0`` also write the first ``cap`` of them from
    ``out[out_start]`` (never more: the caller checks the count).  Reordered
    data point j lies at ``s_pts[j]``, or at ``s_pts[s_map[j]]`` when
    ``s_map`` is not empty (points in the caller's order).

    With ``half`` (self-join only) the walk follows LID-UNICOMP
    (load-imbalance paper §III-B): only cells of higher linear id than the
    own cell (rank tuple ``own_r``), and in the own cell only points j > i.
    Linear ids order cells lexicographically by rank tuple, so a prefix of
    ranks below the own prefix is skipped whole, one above it is taken whole.
    ``eqp[j]`` records whether ranks 0..j equal the own ranks."""
    last = k - 1
    n_found = 0
    j = 0
    d = q_pts.shape[1]
    mapped = s_map.shape[0] > 0
    if last > 0:
        cur[0] = own_r[0] if half else lo_r[0]
    while True:
        if last > 0:
            if cur[j] > hi_r[j]:
                j -= 1
                if j < 0:
                    break
                cur[j] += 1
                continue
            ps = partial[j - 1] if j > 0 else 0.0
            ps += _gap2(s_coords, s_coord_off[j], cur[j], craw[j], gl2[j], gh2[j])
            if ps > lim:
                cur[j] += 1
                continue
            partial[j] = ps
            if half:
                eqp[j] = (j == 0 or eqp[j - 1]) and cur[j] == own_r[j]
            if j < last - 1:
                j += 1
                cur[j] = own_r[j] if (half and eqp[j - 1]) else lo_r[j]
                continue
        else:
            ps = 0.0
        # a row: the last dimension's reachable ranks form one interval
        off = s_coord_off[last]
        r0 = lo_r[last]
        r1 = hi_r[last]
        own_row = half and (last == 0 or eqp[last - 1])
        if own_row:
            r0 = own_r[last]  # the own cell (gap 0) and those above it
        while r0 <= r1 and ps + _gap2(s_coords, off, r0, craw[last], gl2[last], gh2[last]) > lim:
            r0 += 1
        while r1 >= r0 and ps + _gap2(s_coords, off, r1, craw[last], gl2[last], gh2[last]) > lim:
            r1 -= 1
        if r0 <= r1:
            base = 0
            for t in range(last):
                base += cur[t] * s_stride[t]
            p0, p1 = _row_bounds(s_cell_ids, s_lower_bound, s_cell_start, point_lb,
                                 base + r0, base + r1 + 1)
            if own_row:
                p0 = i + 1  # r0 is the own cell: only its points after i
            if mapped:
                # points in the caller's order (the fill)
                for jj in range(p0, p1):
                    if jj != excl and _test(q_pts, qi, s_pts, s_map[jj], d, eps2, early):
                        if n_found < cap:
                            out[out_start + n_found] = s_order[jj]
                        n_found += 1
            else:
                for jj in range(p0, p1):
                    if jj != excl and _test(q_pts, qi, s_pts, jj, d, eps2, early):
                        if n_found < cap:
                            out[out_start + n_found] = s_order[jj]
                        n_found += 1
        if last == 0:
            break
        cur[j] += 1
    return n_found


@nb.njit(**_jit)
def _decode_cell(qc, q_coords, q_coord_off, q_radix, s_coords, s_coord_off, k, craw, lo_r, hi_r,
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


def pruning_limit(eps: float, d: int, k: int, precision: str) -> float:
    """Squared distance beyond which no pair can pass the test.

    A pair that passes ``fl(sum_k fl(fl(x_k - y_k)^2)) <= fl(eps^2)`` in a
    precision of unit roundoff u has exact squared distance at most
    (eps (1 + (d + 5) u))^2 (same argument as ``skyjoin.index.grid.cell_sides``),
    so the exact sum of its per-dimension gaps to a cell is no larger; the
    float64 sum of k lower bounds errs by at most a factor 1 + k u64.
    """
    u_w = float(np.finfo(np.float32 if precision == "float32" else np.float64).eps) / 2
    e = eps * (1.0 + 4.0 * (d + 5) * u_w)
    return e * e * (1.0 + 16.0 * (k + 2) * _U64)


@nb.njit(**_jit)
def mirror_counts(half_indices, total):
    """Every forward pair (i, j) of a symmetric pattern also belongs to row j:
    add those to the row counts (sequential: the CPU target has no atomics)."""
    for p in range(half_indices.shape[0]):
        total[half_indices[p]] += 1


@nb.njit(**_jit)
def place_forward_block(order, r0, loc_indptr, buf, include_self, fill_pos, indices):
    """Copy the forward half of reordered row r0 + t, held in
    ``buf[loc_indptr[t]:loc_indptr[t + 1]]``, to the start of row
    order[r0 + t] (plus the self pair if asked); advance ``fill_pos``."""
    for t in range(loc_indptr.shape[0] - 1):
        o = order[r0 + t]
        pos = fill_pos[o]
        for p in range(loc_indptr[t], loc_indptr[t + 1]):
            indices[pos] = buf[p]
            pos += 1
        if include_self:
            indices[pos] = o
            pos += 1
        fill_pos[o] = pos


@nb.njit(**_jit)
def mirror_fill_block(order, r0, loc_indptr, buf, fill_pos, indices):
    """Scatter the mirrored half of a block of reordered rows (laid out as
    for ``place_forward_block``): for each forward pair (i, j), write i into
    row j at its next free slot.  Sequential; blocks must be taken in order."""
    for t in range(loc_indptr.shape[0] - 1):
        o = order[r0 + t]
        for p in range(loc_indptr[t], loc_indptr[t + 1]):
            j = buf[p]
            indices[fill_pos[j]] = o
            fill_pos[j] += 1


@nb.njit(**_jit)
def lid_unicomp_block(pts, cell_start, cell_ids, coords, coord_off, radix, stride, lower_bound,
                      point_lb, order, k, eps2, lo, side, slack, lim, cb0, cb1, counts):
    """LID-UNICOMP forward half (load-imbalance paper §III-B) of the cells
    [cb0, cb1) of a self-join grid in a single pass, on the pruned
    point-by-point path: the caller ids of the neighbours of every point go
    to a growing buffer, their number to ``counts`` (reordered rows).
    Returns the buffer, trimmed.  Sequential and nogil: the host runs
    blocks on a pool of threads (dynamic scheduling, no counting pass)."""
    r0 = cell_start[cb0]
    r1 = cell_start[cb1]
    buf = np.empty(4 * (r1 - r0) + 1024, dtype=order.dtype)
    n = 0
    d = pts.shape[1]
    early = d > 3
    craw = np.empty(k, dtype=np.int64)
    lo_r = np.empty(k, dtype=np.int64)
    hi_r = np.empty(k, dtype=np.int64)
    own_r = np.empty(k, dtype=np.int64)
    eqp = np.empty(k, dtype=np.bool_)
    gl2 = np.empty(k)
    gh2 = np.empty(k)
    cur = np.empty(k, dtype=np.int64)
    partial = np.empty(k)
    no_map = np.empty(0, dtype=order.dtype)
    for c in range(cb0, cb1):
        c0 = cell_start[c]
        c1 = cell_start[c + 1]
        _decode_cell(cell_ids[c], coords, coord_off, radix, coords, coord_off, k, craw, lo_r,
                     hi_r, own_r)  # a self-join cell always has itself in reach
        for i in range(c0, c1):
            _cell_gaps(pts, i, k, lo, side, slack, gl2, gh2)
            room = buf.shape[0] - n
            f = _point_scan(pts, i, i, pts, no_map, -1, eps2, lim, early, k, craw, lo_r, hi_r,
                            own_r, True, coords, coord_off, stride, cell_ids, lower_bound,
                            cell_start, point_lb, gl2, gh2, cur, partial, eqp, order, buf, n,
                            room)
            if f > room:
                grown = np.empty(max(2 * buf.shape[0], n + f), dtype=buf.dtype)
                grown[:n] = buf[:n]
                buf = grown
                f = _point_scan(pts, i, i, pts, no_map, -1, eps2, lim, early, k, craw, lo_r,
                                hi_r, own_r, True, coords, coord_off, stride, cell_ids,
                                lower_bound, cell_start, point_lb, gl2, gh2, cur, partial, eqp,
                                order, buf, n, f)
            counts[i] = f
            n += f
    return buf[:n].copy()


@nb.njit(**_jit)
def _scatter_block(order, values_reordered, out, add, b0, b1):
    """out[order[r]] (+)= values_reordered[r] for r in [b0, b1)."""
    for r in range(b0, b1):
        if add:
            out[order[r]] += values_reordered[r]
        else:
            out[order[r]] = values_reordered[r]


def to_caller_order(order, values_reordered, out):
    """out[order[r]] = values_reordered[r] (reordered rows back to caller
    order), in blocks on the thread pool: a prange kernel took 0.8 s to
    compile on the first call, for a pass of a few ms."""
    _run_blocks(_scatter_block, (order, values_reordered, out, False), order.shape[0])


def add_caller_order(order, values_reordered, out):
    """out[order[r]] += values_reordered[r] (``order`` is a permutation:
    blocks never write the same item)."""
    _run_blocks(_scatter_block, (order, values_reordered, out, True), order.shape[0])


@nb.njit(**_jit)
def _insertion_sort(a, lo, hi):
    for i in range(lo + 1, hi):
        v = a[i]
        j = i - 1
        while j >= lo and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@nb.njit(**_jit)
def _sort_range(a, lo, hi):
    """Sort a[lo:hi] in place: insertion sort for short ranges, else an
    in-place heapsort (small code: NumPy's sort adds seconds of compilation
    to every kernel that calls it)."""
    n = hi - lo
    if n <= 24:
        _insertion_sort(a, lo, hi)
        return
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(a, lo, start, n)
    for end in range(n - 1, 0, -1):
        v = a[lo]
        a[lo] = a[lo + end]
        a[lo + end] = v
        _sift_down(a, lo, 0, end)


@nb.njit(inline="always", **_jit)
def _sift_down(a, lo, root, n):
    """Restore the max-heap a[lo:lo + n] below ``root``."""
    v = a[lo + root]
    while True:
        child = 2 * root + 1
        if child >= n:
            break
        if child + 1 < n and a[lo + child + 1] > a[lo + child]:
            child += 1
        if a[lo + child] <= v:
            break
        a[lo + root] = a[lo + child]
        root = child
    a[lo + root] = v


@nb.njit(parallel=True, **_jit)
def sort_csr_rows(indptr, indices):
    """Sort the columns of every CSR row in place, in parallel."""
    n = indptr.shape[0] - 1
    for i in nb.prange(n):
        _sort_range(indices, indptr[i], indptr[i + 1])


@nb.njit(**_jit)
def exclusive_scan_into(counts, indptr):
    """indptr[0] = 0, indptr[i + 1] = sum(counts[:i + 1]) (sequential scan,
    parallel conversion)."""
    total = 0
    indptr[0] = 0
    for i in range(counts.shape[0]):
        total += counts[i]
        indptr[i + 1] = total
    return total


# ---------------------------------------------------------------------------
# Host-side orchestration
# ---------------------------------------------------------------------------

def _query_args(g):
    return (g.points, g.cell_start, g.cell_ids, g.coords, g.coord_off, g.radix)


def _data_args(g):
    return (g.points, g.cell_ids, g.lower_bound, g.cell_start, g.coords, g.coord_off, g.stride)


# Cells with at least this many points are processed by the tiled path (the
# gather of the candidates is shared by enough points to pay off); smaller
# cells point by point with pruning, in any dimension.  Measured (2-core
# development machine, NUMBA_NUM_THREADS=1, process time, full pattern):
# Expo6D1M-0.02 first 50k points 6.3 s with every cell point by point, 2.6 s
# tiled from 64 points, 1.7 s from 16, 1.5 s from 8 or 4; Unif6D1M-12 first
# 100k points (cells of at most 14 points) 2.8-2.9 s whatever the threshold.
TILE_MIN_POINTS = 8


def _run_blocks(kernel, args, weight):
    """Run ``kernel(*args, b0, b1)`` over blocks [b0, b1) of items on a pool
    of threads (dynamic scheduling: dense cells cost far more than sparse
    ones).  ``weight`` is the cumulative work estimate (length items + 1,
    e.g. ``cell_start``); blocks get similar shares of it, and there are
    many more blocks than threads.  An int ``weight`` is the number of
    items, all of the same cost.  The kernels are nogil and sequential,
    so no parfor is compiled."""
    from concurrent.futures import ThreadPoolExecutor

    uniform = isinstance(weight, (int, np.integer))
    n_items = int(weight) if uniform else weight.shape[0] - 1
    if n_items <= 0:
        return
    threads = max(1, nb.get_num_threads())
    # items of equal cost need no more blocks than threads
    n_blocks = max(1, min(n_items, (1 if uniform else 64) * threads))
    total = n_items if uniform else int(weight[-1])
    if uniform and n_blocks > 1:
        bounds = np.unique(np.linspace(0, n_items, n_blocks + 1).astype(np.int64))
    elif total > 0 and n_blocks > 1:
        cuts = np.searchsorted(weight, np.linspace(0, total, n_blocks + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], cuts, [n_items]]))
    else:
        bounds = np.array([0, n_items])
    spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    if threads == 1 or len(spans) == 1:
        for b0, b1 in spans:
            kernel(*args, b0, b1)
        return
    with ThreadPoolExecutor(max_workers=threads) as ex:
        for _ in ex.map(lambda sp: kernel(*args, sp[0], sp[1]), spans):
            pass


def _pruning_args(g, half=False, pts=None):
    pts = g.points if pts is None else pts
    d = pts.shape[1]
    precision = "float32" if pts.dtype == np.float32 else "float64"
    # the symmetric (half) walk exists on the point-by-point path only
    tile_min = np.iinfo(np.int64).max if half else TILE_MIN_POINTS
    return (g.lo, g.side, g.slack, pruning_limit(g.eps, d, g.k, precision), tile_min,
            g.point_lower_bound(), bool(half))


def auto_pattern(g) -> str:
    """The CPU's cell pattern for ``pattern="auto"``: LID-UNICOMP when most
    points lie in sparse cells (point-by-point path, one pass over half of
    the cells), the full pattern when most lie in dense cells (tiled path,
    no mirror and rows sorted by the merge).

    Measured on the 2-core development machine (wall, 2 threads, process
    warmed up): Unif2D1M-0.5 (25 points a cell) full 0.7 s vs lid_unicomp
    2.4 s (the sequential mirror and the row sort of 78M pairs dominate);
    Unif6D1M-12 (2.6 points a cell) full ~15 s vs lid_unicomp ~5 s; 1M
    uniform 2-D points with eps 0.05 / 0.15 (under 1 point a cell) full
    1.9 / 1.3 s vs lid_unicomp 0.7 / 0.7 s; 1M uniform 3-D with eps 1 full
    1.8 s vs lid_unicomp 0.7 s."""
    sizes = np.diff(g.cell_start)
    sparse = int(sizes[sizes < TILE_MIN_POINTS].sum())
    return "lid_unicomp" if 2 * sparse >= g.n_points else "full"


def eps_squared(eps: float, dtype) -> float:
    """eps^2 evaluated in the working precision (the threshold of the test)."""
    e = dtype.type(eps)
    return e * e


def counts_reordered(gq, gs, eps2, pattern: int, self_join: bool, include_self: bool) -> np.ndarray:
    """Neighbour counts of the query grid's reordered points (forward half
    for the symmetric patterns)."""
    counts = np.empty(gq.n_points, dtype=np.int64)
    if gq.n_points == 0:
        return counts
    if pattern == 0:
        args = (*_query_args(gq), *_data_args(gs), gs.k, eps2, self_join, include_self,
                gs.order, *_pruning_args(gs), counts)
        _run_blocks(count_full, args, gq.cell_start)
    else:
        count_pass(*_query_args(gq), *_data_args(gs), gs.k, eps2, pattern, self_join,
                   include_self, counts)
    return counts


def fill_full(gq, gs, eps2, self_join, include_self, sort, row_pos, row_len, indices,
              cell_list=None, indptr=None, *, caller_points):
    """Full-pattern filling pass (rows sorted when ``sort``).  Rows go to
    ``row_pos``/``row_len`` (reordered query points), or, when those are
    None, to the caller-order CSR rows of ``indptr``.  ``caller_points``
    is (Q, S): the C-contiguous query and data points, in the caller's
    order, from which the grids were built; the grids' reordered copies
    are not read (they may have been dropped: ``points`` None)."""
    if gq.n_points == 0:
        return
    q_pts, s_pts = caller_points
    if cell_list is None:
        # every cell: no list (and no temporary of the cells' size)
        cell_list = np.zeros(0, dtype=np.int64)
        weight = gq.cell_start
    else:
        sizes = gq.cell_start[cell_list + 1] - gq.cell_start[cell_list]
        weight = np.zeros(cell_list.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=weight[1:])
    empty = np.zeros(0, dtype=np.int64)
    if row_pos is None:
        row_pos = row_len = empty
    else:
        indptr = empty
    bad = np.zeros(1, dtype=np.int8)
    args = (q_pts, gq.cell_start, gq.cell_ids, gq.coords, gq.coord_off, gq.radix,
            s_pts, gs.cell_ids, gs.lower_bound, gs.cell_start, gs.coords, gs.coord_off,
            gs.stride, gs.k, eps2, self_join, include_self, sort, cell_list, row_pos,
            row_len, gq.order, indptr, gs.order, *_pruning_args(gs, pts=s_pts), indices, bad)
    _run_blocks(fill_full_kernel, args, weight)
    if bad[0]:
        raise RuntimeError("internal error: a row's neighbour count changed between the "
                           "counting and filling passes; no result was produced")


def fill_rows(gq, gs, eps2, pattern, self_join, include_self, row_pos, indices, cell_list=None):
    """Run the filling pass over all query cells (or ``cell_list``)."""
    if cell_list is None:
        cell_list = np.arange(gq.n_cells, dtype=np.int64)
    if gq.n_points:
        fill_pass(*_query_args(gq), *_data_args(gs), gs.k, eps2, pattern, self_join,
                  include_self, cell_list, row_pos, gs.order, indices)


_LIBC_TRIM = []


def release_free_memory():
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``)
    before a large output is allocated.  Temporaries of a few MB come from
    the heap once glibc has raised its mmap threshold, and stay resident
    after they are freed; trimming keeps the peak at what is alive (measured:
    Unif2D1M-0.5 peak RSS increase 337 -> 327 MiB).  A no-op elsewhere."""
    if not _LIBC_TRIM:
        try:
            import ctypes

            fn = ctypes.CDLL("libc.so.6").malloc_trim
            fn.argtypes = [ctypes.c_size_t]
            _LIBC_TRIM.append(fn)
        except (OSError, AttributeError):
            _LIBC_TRIM.append(None)
    if _LIBC_TRIM[0] is not None:
        _LIBC_TRIM[0](0)


def indptr_from_counts(g_rows, counts_r):
    """Caller-order CSR indptr from the counts of the reordered rows.
    Returns (indptr, total)."""
    n = g_rows.n_points
    indptr = np.empty(n + 1, dtype=np.int64)
    indptr[0] = 0
    to_caller_order(g_rows.order, counts_r, indptr[1:])
    np.cumsum(indptr[1:], out=indptr[1:])
    return indptr, int(indptr[-1])


def forward_half(g, eps2, pattern, idx_dtype):
    """Forward half of a symmetric pattern (self-join) on the per-cell path
    (used for UNICOMP; LID-UNICOMP has ``lid_unicomp_half``): for reordered
    point i, the caller ids of its neighbours in the cells the pattern
    assigns to i's cell (and j > i in its own cell).
    Returns (half_counts, half_indptr, half_indices), rows in reordered order."""
    n = g.n_points
    half_counts = counts_reordered(g, g, eps2, pattern, True, False)
    half_indptr = np.empty(n + 1, dtype=np.int64)
    half_total = exclusive_scan_into(half_counts, half_indptr)
    half_indices = np.empty(half_total, dtype=idx_dtype)
    fill_rows(g, g, eps2, pattern, True, False, half_indptr[:-1].copy(), half_indices)
    return half_counts, half_indptr, half_indices


def _cell_blocks(cell_start, n_blocks):
    """Split the cells into about n_blocks runs of similar point counts."""
    n = int(cell_start[-1])
    targets = np.linspace(0, n, n_blocks + 1)[1:-1]
    cuts = np.searchsorted(cell_start, targets)
    bounds = np.unique(np.concatenate([[0], cuts, [cell_start.shape[0] - 1]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def lid_unicomp_half(g, eps2):
    """Forward half of LID-UNICOMP in one pass over blocks of cells run on
    a pool of threads (see ``lid_unicomp_block``).
    Returns (half_counts, blocks) with blocks a list of (r0, buffer)."""
    from concurrent.futures import ThreadPoolExecutor

    n = g.n_points
    counts = np.empty(n, dtype=np.int64)
    lo, side, slack, lim, _, point_lb, _ = _pruning_args(g, half=True)
    threads = max(1, nb.get_num_threads())
    spans = _cell_blocks(g.cell_start, max(16 * threads, min(1024, g.n_cells // 256)))

    def run(span):
        cb0, cb1 = span
        return lid_unicomp_block(g.points, g.cell_start, g.cell_ids, g.coords, g.coord_off,
                                 g.radix, g.stride, g.lower_bound, point_lb, g.order, g.k,
                                 eps2, lo, side, slack, lim, cb0, cb1, counts)

    if threads == 1:
        bufs = [run(sp) for sp in spans]
    else:
        with ThreadPoolExecutor(max_workers=threads) as ex:
            bufs = list(ex.map(run, spans))
    blocks = [(int(g.cell_start[cb0]), b) for (cb0, _), b in zip(spans, bufs)]
    return counts, blocks


def mirror_table_blocks(order, half_counts, blocks, include_self, idx_dtype):
    """``mirror_table`` for a forward half held in blocks (r0, buffer) that
    cover the reordered rows in order."""
    n = order.shape[0]
    total = np.zeros(n, dtype=np.int64)
    for _, buf in blocks:
        mirror_counts(buf, total)
    add_caller_order(order, half_counts, total)
    if include_self:
        total += 1
    indptr = np.empty(n + 1, dtype=np.int64)
    grand = exclusive_scan_into(total, indptr)
    del total
    release_free_memory()
    indices = np.empty(grand, dtype=idx_dtype)
    fill_pos = indptr[:-1].copy()
    ends = [r0 for r0, _ in blocks[1:]] + [n]
    loc = []
    for (r0, buf), r1 in zip(blocks, ends):
        li = np.zeros(r1 - r0 + 1, dtype=np.int64)
        np.cumsum(half_counts[r0:r1], out=li[1:])
        loc.append(li)
        place_forward_block(order, r0, li, buf, include_self, fill_pos, indices)
    for (r0, buf), li in zip(blocks, loc):
        mirror_fill_block(order, r0, li, buf, fill_pos, indices)
    return indptr, indices


def mirror_table(order, half_counts, half_indptr, half_indices, include_self, idx_dtype):
    """Caller-order CSR from a forward half: row order[r] gets the forward
    half of reordered row r (+ the self pair), then every mirrored pair.
    Returns (indptr, indices); rows are not sorted."""
    n = order.shape[0]
    total = np.zeros(n, dtype=np.int64)
    mirror_counts(half_indices, total)
    add_caller_order(order, half_counts, total)
    if include_self:
        total += 1
    indptr = np.empty(n + 1, dtype=np.int64)
    grand = exclusive_scan_into(total, indptr)
    del total
    indices = np.empty(grand, dtype=idx_dtype)
    fill_pos = indptr[:-1].copy()
    # the whole half table is one block starting at reordered row 0
    place_forward_block(order, 0, half_indptr, half_indices, include_self, fill_pos, indices)
    mirror_fill_block(order, 0, half_indptr, half_indices, fill_pos, indices)
    return indptr, indices
