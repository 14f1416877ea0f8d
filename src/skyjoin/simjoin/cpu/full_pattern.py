"""The full cell pattern, tiled: the count and fill passes (one Numba kernel).

Every point scans all adjacent cells (GPUCALCGLOBAL's pattern, Gowanlock &
Karsin 2018, §IV-E); rows are independent, so no scatter.  Per query cell
the path is chosen by the cell's size (``plan.TILE_MIN_POINTS``): dense
cells gather their candidates once (merged into caller-id order, so rows
come out sorted) and split their points into sub-tiles that test only the
candidates near their bounding box; sparse cells go point by point,
walking only the adjacent cells within reach of the point
(``point_scan``, rigorous distance-to-cell bounds).

Outputs follow count -> exclusive scan -> fill, since Numba's CPU target
has no atomics: a counting pass sizes every row exactly, then a filling
pass writes each row straight to its final place (rows in the caller's
order), so nothing is ever over-allocated, truncated or copied twice.

Cost: per dense cell, O(c log r) to merge its c candidates from r runs,
then O(d) per (sub-tile point, candidate in the sub-tile's box); per
sparse point, see ``point_scan``.  Memory: O(largest candidate set) per
thread.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._simd import compress16, prefetch_read, prefetch_write
from .cells import U64, decode_cell, adjacent_rows
from ..csr import sort_range
from .point_scan import cell_gaps, scan_point
from ..schedule import INNER, JIT


@nb.njit(**JIT)
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


@nb.njit(**INNER)
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


@nb.njit(**INNER)
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


@nb.njit(inline="always", **JIT)
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


@nb.njit(**INNER)
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


@nb.njit(**INNER)
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


@nb.njit(inline="always", **JIT)
def _point_path(qc, q_coords, q_coord_off, q_radix, s_coords, s_coord_off, k):
    """Scratch of the point-by-point path for query cell qc, its coordinates
    and rank intervals decoded (``cells.decode_cell``).  Returns (ok, craw,
    lo_r, hi_r, own_r, eqp, gl2, gh2, cur, partial); ok is False when some
    dimension has no occupied data coordinate within reach (no neighbours)."""
    craw = np.empty(k, dtype=np.int64)
    lo_r = np.empty(k, dtype=np.int64)
    hi_r = np.empty(k, dtype=np.int64)
    own_r = np.empty(k, dtype=np.int64)
    eqp = np.empty(k, dtype=np.bool_)
    ok = decode_cell(qc, q_coords, q_coord_off, q_radix, s_coords, s_coord_off, k, craw, lo_r,
                      hi_r, own_r)
    gl2 = np.empty(k)
    gh2 = np.empty(k)
    cur = np.empty(k, dtype=np.int64)
    partial = np.empty(k)
    return ok, craw, lo_r, hi_r, own_r, eqp, gl2, gh2, cur, partial


@nb.njit(inline="always", **JIT)
def _box_buffers(cp, cid, cj, n_groups):
    """Buffers for ``_filter_box``'s output: fresh ones when a cell has
    several sub-tiles, else the candidates themselves (never filtered)."""
    if n_groups > 1:
        return np.empty_like(cp), np.empty_like(cid), np.empty_like(cj)
    return cp, cid, cj


@nb.njit(inline="always", **JIT)
def _group_candidates(q_pts, qorder, goff, g, cp, cid, cj, m, reach, cp2, cid2, cj2):
    """Number of candidates of sub-tile g, written to ``cp2``/``cid2``/``cj2``
    by ``_filter_box``; all m (left in place) when the cell is one sub-tile."""
    if goff.shape[0] > 2:
        return _filter_box(q_pts, qorder, goff[g], goff[g + 1], cp, cid, cj, m, reach, cp2, cid2,
                           cj2)
    return m


# Output rows are prefetched this many query points ahead of their writes.
ROW_LOOKAHEAD = 4


@nb.njit(inline="always", **JIT)
def _prefetch_row(indices, start, rl, line):
    """Announce the writes of indices[start:start + rl] (``line`` items a
    cache line) to the cache."""
    if start >= 0 and rl > 0:
        for q in range(start, start + rl, line):
            prefetch_write(indices, q)
        prefetch_write(indices, start + rl - 1)


@nb.njit(inline="always", **JIT)
def _row_slot(i, row_pos, row_len, q_order, indptr):
    """Start and length of reordered query point i's row in the output."""
    if row_pos.shape[0] > 0:
        return row_pos[i], row_len[i]
    o = q_order[i]
    return indptr[o], indptr[o + 1] - indptr[o]


@nb.njit(**JIT)
def full_kernel(q_pts, q_order, q_cell_start, q_cell_ids, q_coords, q_coord_off, q_radix,
                s_pts, s_map, s_cell_ids, s_lower_bound, s_cell_start, s_coords, s_coord_off,
                s_stride, k, eps2, self_join, include_self, sort, cell_list, row_pos, row_len,
                indptr, s_order, lo, side, slack, lim, tile_min, point_lb, half, counts, indices,
                bad, cb0, cb1):
    """Full-pattern count or fill of the query cells ``cell_list[cb0:cb1]``
    (cells cb0..cb1 when ``cell_list`` is empty): sequential and nogil, run
    in blocks on a pool of threads (``schedule.run_blocks``).  One kernel
    for both passes, so that a first table (count, then fill) compiles the
    shared path once.

    Reordered query point i is ``q_pts[q_order[i]]``, reordered data point
    j is ``s_pts[s_map[j]]``; an empty map is the identity (the grids'
    reordered copies).  The fill reads the caller's arrays through the
    grids' orders: the memory budget has no room for a copy next to the
    output.

    **Count** (``counts`` not empty): ``counts[i]``, the number of
    neighbours of reordered query point i.  With ``half`` (self-join, no
    tiled path) the forward half of LID-UNICOMP is counted instead (see
    ``scan_point``).

    **Fill** (``counts`` empty): write the caller ids of the neighbours of
    reordered query point i at ``row_pos[i]`` (skipped if < 0),
    ``row_len[i]`` of them; or, when ``row_pos`` is empty, at
    ``indptr[q_order[i]]``, as many as that caller-order CSR row holds.
    With ``sort``, a tiled cell gathers its candidates in caller-id order
    (a merge of the cells' ascending runs), so its rows come out sorted;
    rows of the point-by-point path are sorted in place.  A tiled cell's
    hits are packed 16 candidates at a time (``_simd.compress16``) into a
    local row, then copied to the output row, whose cache lines were
    prefetched a few points ahead (rows in caller order are scattered over
    the output; so are the next cell's row slots and query points, which
    are prefetched while a cell runs).  A row whose length differs from
    the count (which cannot happen with deterministic arithmetic) is not
    written past its end: ``bad[0]`` is set instead.

    Cells of at least ``tile_min`` points take the tiled path, others the
    pruned point-by-point path."""
    d = q_pts.shape[1]
    early = d > 3
    counting = counts.shape[0] > 0
    q_mapped = q_order.shape[0] > 0
    line = max(1, 64 // indices.itemsize)  # items per cache line
    qrow = np.empty((1, d), dtype=q_pts.dtype)
    # typed values, not literals: a literal gives the helpers a signature
    # (and a compile) of its own
    zero = np.int64(0)
    no_cap = np.int64(-1)
    with_ids = np.bool_(not counting)
    pad = np.int64(0 if counting else 16)
    all_cells = cell_list.shape[0] == 0
    # the tiled path's scratch is allocated once per block, not per cell:
    # per query point (row slots, local points, sub-tile order, self
    # positions) for the block's largest cell; per candidate (distances,
    # local row) grown when a cell needs more (the count writes no rows)
    cap = 0
    for ci in range(cb0, cb1):
        c = ci if all_cells else cell_list[ci]
        cap = max(cap, q_cell_start[c + 1] - q_cell_start[c])
    n_slots = 0 if counting else cap
    r_start = np.empty(n_slots, dtype=np.int64)
    r_len = np.empty(n_slots, dtype=np.int64)
    selfpos = np.empty(n_slots, dtype=np.int64)
    qloc = np.empty((cap, d), dtype=q_pts.dtype)
    qorder = np.empty(cap, dtype=np.int64)
    db = np.empty(0, dtype=s_pts.dtype)
    buf = np.empty(0, dtype=s_order.dtype)
    for ci in range(cb0, cb1):
        c = ci if all_cells else cell_list[ci]
        c0 = q_cell_start[c]
        c1 = q_cell_start[c + 1]
        n_c = c1 - c0
        if n_c < tile_min:
            ok, craw, lo_r, hi_r, own_r, eqp, gl2, gh2, cur, partial = _point_path(
                q_cell_ids[c], q_coords, q_coord_off, q_radix, s_coords, s_coord_off, k)
            for i in range(c0, c1):
                if counting:
                    start, rl = zero, no_cap
                else:
                    start, rl = _row_slot(i, row_pos, row_len, q_order, indptr)
                if not ok or start < 0:
                    if counting:
                        counts[i] = 0
                    continue
                o = q_order[i] if q_mapped else i
                for t in range(d):
                    qrow[0, t] = q_pts[o, t]
                cell_gaps(qrow, zero, k, lo, side, slack, gl2, gh2)
                excl = i if (self_join and not include_self and not half) else -1
                n_found = scan_point(qrow, zero, i, s_pts, s_map, excl, eps2, lim, early, k, craw,
                                      lo_r, hi_r, own_r, half, s_coords, s_coord_off, s_stride,
                                      s_cell_ids, s_lower_bound, s_cell_start, point_lb, gl2,
                                      gh2, cur, partial, eqp, s_order, indices, start, rl)
                if counting:
                    counts[i] = n_found
                elif n_found != rl:
                    bad[0] = 1
                elif sort:
                    sort_range(indices, start, start + n_found)
            continue
        rows, n_rows = adjacent_rows(c, q_cell_ids, q_coords, q_coord_off, q_radix, s_cell_ids,
                                     s_lower_bound, s_cell_start, s_coords, s_coord_off,
                                     s_stride, k, 0, False)
        # the cell's row slots and query points (copied to a local block,
        # local ids 0..n_c) were prefetched while the previous cell ran;
        # now those of the next cell are (all scattered: caller order)
        for x in range(n_c):
            o = c0 + x
            if not counting:
                start, rl = _row_slot(o, row_pos, row_len, q_order, indptr)
                r_start[x] = start
                r_len[x] = rl
                o = q_order[o]
            for t in range(d):
                qloc[x, t] = q_pts[o, t]
        if q_mapped and ci + 1 < cb1:
            cn = ci + 1 if all_cells else cell_list[ci + 1]
            for i in range(q_cell_start[cn], q_cell_start[cn + 1]):
                o = q_order[i]
                if row_pos.shape[0] == 0:
                    prefetch_read(indptr, o)
                prefetch_read(q_pts, np.int64(o) * d)
        goff = _subtiles(qloc, zero, n_c, k, lo, side, SUBTILE_POINTS, qorder)
        # the output rows are announced to the cache a few points ahead of
        # their writes (the first ones before the candidates are gathered)
        ahead = 0 if counting else ROW_LOOKAHEAD
        for x in range(min(ahead, n_c)):
            _prefetch_row(indices, r_start[qorder[x]], r_len[qorder[x]], line)
        cid, cj, m = _candidates(rows, n_rows, s_order, with_ids, pad)
        # the candidates' rows of the caller's array are scattered: their
        # loads are started here, to overlap the merge
        if with_ids:
            for p in range(m):
                prefetch_read(s_pts, np.int64(cid[p]) * d)
            # each cell is an ascending run of caller ids: merging the runs
            # costs less than sorting the rows, so sorted rows come for free
            if sort:
                cid, cj = _merge_runs(cid, cj, m)
        cp = _coords(s_pts, cid, cj, m, with_ids)
        # distances padded to a multiple of 16 with NaN (never passes)
        if db.shape[0] < m + 16:
            db = np.empty(2 * m + 16, dtype=s_pts.dtype)
        if not counting and buf.shape[0] < m + pad:
            buf = np.empty(2 * m + pad, dtype=s_order.dtype)
        excl_self = self_join and not include_self
        n_groups = goff.shape[0] - 1
        cp2, cid2, cj2 = _box_buffers(cp, cid, cj, n_groups)
        reach = np.sqrt(lim) * (1.0 + 4.0 * U64)
        for g in range(n_groups):
            if goff[g] == goff[g + 1]:
                continue
            m2 = _group_candidates(qloc, qorder, goff, g, cp, cid, cj, m, reach, cp2, cid2, cj2)
            for p in range(m2, m2 + 16):
                db[p] = np.nan
            if excl_self and not counting:
                # position of each query point among the candidates: its own
                # distance is set to NaN so that it never passes the test
                # (a query point lies in its own box: never filtered out)
                for p in range(m2):
                    if c0 <= cj2[p] < c1:
                        selfpos[cj2[p] - c0] = p
            if counting:
                # a loop of its own: the fill's row handling stays out of it
                for x in range(goff[g], goff[g + 1]):
                    il = qorder[x]
                    _distances(qloc, il, cp2, m2, db)
                    cnt = 0
                    for p in range(m2):
                        cnt += db[p] <= eps2
                    if excl_self:
                        cnt -= 1  # the point itself, at distance 0
                    counts[c0 + il] = cnt
                continue
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
