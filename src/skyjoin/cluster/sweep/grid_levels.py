"""Sweep grid path, first stage: the level of every point on the fine grid (§7.6 without T).

The level of a point is the number of the sweep's min_samples it is core
for, from one capped count per point (``point_levels``; with weights the
exact-sum rule of ``core_points``, ``point_levels_weighted`` then
``exact_levels``).  Costs: O(n + cells) for the grid, and per point the
distance tests over the cells that can hold a neighbour, stopping at the
largest min_samples.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from numba import njit, prange

from ..._core.config import NUMBA_CACHE
from ..core_points import exact_row_sums, naive_sum_decides_nb
from ..grid_cpu import d2, neighbour_slots


# ---------------------------------------------------------------------------
# The grid path (CPU, float64, d <= 4): a whole min_samples sweep without T
# ---------------------------------------------------------------------------
#
# On the fine grid of ``grid_cpu`` (cells of side eps / sqrt(d), so that
# every cell is "close": all its points are pairwise within eps) the sweep
# over min_samples of §7.6 needs no neighbour table at all:
#
# * one capped count per point gives its *level*, the number of the sweep's
#   min_samples it is core for (core(m') is a subset of core(m) for m' > m);
# * the core points of a close cell at level k (those of level >= k) are a
#   clique, so the core graph at level k is the graph of the cells of max
#   level >= k, two cells being linked at level k iff some pair within eps has
#   both levels >= k.  That is one number per pair of cells, the bottleneck
#   ``w(t, u) = max over pairs within eps of min(level_p, level_q)``, found
#   scanning the points of each cell in decreasing level and stopping early;
# * a union-find over the cells (the package's one, ``union_find.find/union``)
#   takes the levels in decreasing order (Kruskal): at level k the pairs of
#   bound ``min(maxlev_t, maxlev_u) = k`` not yet joined get their w (joined
#   if k, else kept for level w), as ``add_core_level`` does on T but on the
#   ~n/15 cells, and no pair of cells already joined is ever scanned;
# * a non-core point at level k is reached by a cell iff some point of it
#   within eps has level >= k: the highest such level per (point, cell),
#   its "reach", is found once; its label at level k is the lowest cluster
#   label among the cells of reach >= k (``union_find``'s border rule).  The
#   count pass already scanned the whole neighbourhood of these points, and
#   records which neighbour cells hold a neighbour (a bit mask), so this
#   pass visits only those.
#
# Clusters are numbered by the lowest caller id of their core points, as in
# ``union_find``.  Every distance decision is the join's test in float64
# (``grid_cpu.d2``) or a box test that bounds it (rounding is monotone),
# so each level's labels equal scikit-learn's.


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def gap2(Xs, p, box_lo, box_hi, u):
    """Squared gap from point p to the box of cell slot u: no pair test passes if this fails.

    Branch-free (max is exact): the outcome of these tests is data-dependent.
    """
    s = 0.0
    for k in range(Xs.shape[1]):
        x = Xs[p, k]
        g = max(max(box_lo[u, k] - x, x - box_hi[u, k]), 0.0)
        s += g * g
    return s


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def span2(Xs, p, box_lo, box_hi, u):
    """Squared distance from p to the far corner of box u: every pair test passes if this does.

    ``fl(x - q)`` is monotone in q, so for q in [lo, hi] its magnitude is at
    most that of ``fl(x - lo)`` or ``fl(x - hi)``; squares and sums in the
    same order are monotone too.
    """
    s = 0.0
    for k in range(Xs.shape[1]):
        x = Xs[p, k]
        a = max(abs(x - box_lo[u, k]), abs(x - box_hi[u, k]))
        s += a * a
    return s


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _count_within(Xs, p, a, b, eps2):
    """How many of the points a..b-1 pass the join's test with p (``d2``, unrolled in 2-D).

    In 2-D the sum is formed as ``d2`` forms it, ``(0 + t0 t0) + t1 t1``,
    so every decision is the same bit for bit.
    """
    cnt = 0
    if Xs.shape[1] == 2:
        x0 = Xs[p, 0]
        x1 = Xs[p, 1]
        for q in range(a, b):
            t0 = x0 - Xs[q, 0]
            t1 = x1 - Xs[q, 1]
            cnt += (0.0 + t0 * t0) + t1 * t1 <= eps2
    else:
        for q in range(a, b):
            cnt += d2(Xs, p, q) <= eps2
    return cnt


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _level_of(s, m_asc):
    """Number of the (increasing) min_samples that s reaches."""
    lo = 0
    hi = m_asc.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if m_asc[mid] <= s:
            lo = mid + 1
        else:
            hi = mid
    return lo


SCAN_PARTS = 4  # parts of a cell's box per dimension with their own scan order (d <= 2)


@functools.lru_cache(maxsize=16)
def _scan_orders_cached(offsets_bytes, d, R):
    offs = np.frombuffer(offsets_bytes, dtype=np.int64).reshape(-1, d).astype(np.float64)
    rows = []
    for part in itertools.product(range(R), repeat=d):
        x = (np.asarray(part, dtype=np.float64) + 0.5) / R   # centre of the part, cell units
        gap = np.maximum(np.maximum(offs - x, x - (offs + 1.0)), 0.0)
        far = np.maximum(np.abs(offs - x), np.abs(offs + 1.0 - x))
        rows.append(np.lexsort(((far ** 2).sum(axis=1), (gap ** 2).sum(axis=1))))
    return np.ascontiguousarray(rows, dtype=np.int64)


def scan_orders(offsets, R):
    """For each of the R^d parts of a cell, the offsets by increasing distance from
    the part's centre (ties: nearer far corner first), the count pass's scan order.

    Only a speed heuristic: a point counts the same cells in any order, and
    nearer cells first reach the cap sooner (docs/decisions/dbscan-sweep.md).
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    return _scan_orders_cached(offsets.tobytes(), offsets.shape[1], R)


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def point_levels(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2, m_asc,
                 hits, scan_order, R):
    """Level of every (sorted) point: how many of m_asc its neighbourhood size reaches.

    Counting stops at the largest min_samples (a cell holding that many
    points makes them all reach it at once); a cell wholly within eps of a
    point counts at once, one out of reach is skipped.  The neighbour cells
    are scanned nearest first, for where the point lies in its cell's box
    (``scan_order``, one row per box part of ``scan_orders``): the cap is
    reached after fewer distances.  ``hits[p]`` (when there are at most 64
    offsets): bit o set iff the cell at offset o holds a neighbour of p,
    complete for the points below the top level (their whole neighbourhood
    is scanned), which is all the border pass reads.
    """
    n = Xs.shape[0]
    m = cells.shape[0]
    n_off = offsets.shape[0]
    d = Xs.shape[1]
    K = m_asc.shape[0]
    cap = m_asc[K - 1]
    level = np.empty(n, dtype=np.int32)
    for t in prange(m):
        c = cells[t]
        a, b = start[c], start[c + 1]
        size = b - a
        if size >= cap:
            for p in range(a, b):
                level[p] = K
            continue
        nb = neighbour_slots(c, radix, offsets, deltas, slot_of)
        for p in range(a, b):
            part = 0
            for k in range(d):
                f = Xs[p, k] - box_lo[t, k]
                w = box_hi[t, k] - box_lo[t, k]
                j = 0
                if f > 0.0:
                    j = R - 1
                    if f < w:
                        j = min(int((f / w) * R), R - 1)
                part = part * R + j
            s = size
            mask = np.uint64(0)
            for i in range(n_off):
                o = scan_order[part, i]
                t2 = nb[o]
                if t2 < 0 or t2 == t or gap2(Xs, p, box_lo, box_hi, t2) > eps2:
                    continue
                c2 = cells[t2]
                if span2(Xs, p, box_lo, box_hi, t2) <= eps2:
                    got = start[c2 + 1] - start[c2]
                else:
                    got = _count_within(Xs, p, start[c2], start[c2 + 1], eps2)
                s += got
                if got > 0:
                    mask |= np.uint64(1) << np.uint64(o)
                if s >= cap:
                    break
            level[p] = _level_of(s, m_asc)
            if hits.shape[0] > 0:
                hits[p] = mask
    return level


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _near_cell(Xs, p, t, t2, box_lo, box_hi, eps2):
    """0: no point of cell slot t2 is within eps of p; 1: every point is; 2: test each."""
    if t2 < 0 or t2 == t or gap2(Xs, p, box_lo, box_hi, t2) > eps2:
        return 0
    return 1 if span2(Xs, p, box_lo, box_hi, t2) <= eps2 else 2


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def point_levels_weighted(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                          eps2, m_asc, w, hits):
    """``point_levels`` with sample weights: complete sums (weights may be negative).

    Each point's weight sum is added naively (cell subtotals), with the sum
    of |w| and the number of terms: a point whose sum cannot decide against
    the min_samples on either side of it (``core_points.naive_sum_decides``) gets
    level -1, for ``exact_levels`` to decide by the correctly rounded sum.
    """
    n = Xs.shape[0]
    m = cells.shape[0]
    n_off = offsets.shape[0]
    K = m_asc.shape[0]
    level = np.empty(n, dtype=np.int32)
    wsum = np.zeros(m, dtype=np.float64)
    wabs = np.zeros(m, dtype=np.float64)
    for t in prange(m):
        c = cells[t]
        s = 0.0
        a = 0.0
        for p in range(start[c], start[c + 1]):
            s += w[p]
            a += abs(w[p])
        wsum[t] = s
        wabs[t] = a
    for t in prange(m):
        c = cells[t]
        nb = neighbour_slots(c, radix, offsets, deltas, slot_of)
        for p in range(start[c], start[c + 1]):
            s = wsum[t]
            a = wabs[t]
            k = start[c + 1] - start[c]
            mask = np.uint64(0)
            for o in range(n_off):
                t2 = nb[o]
                near = _near_cell(Xs, p, t, t2, box_lo, box_hi, eps2)
                if near == 0:
                    continue
                c2 = cells[t2]
                got = False
                if near == 1:
                    s += wsum[t2]
                    a += wabs[t2]
                    k += start[c2 + 1] - start[c2]
                    got = True
                else:
                    for q in range(start[c2], start[c2 + 1]):
                        if d2(Xs, p, q) <= eps2:
                            s += w[q]
                            a += abs(w[q])
                            k += 1
                            got = True
                if got:
                    mask |= np.uint64(1) << np.uint64(o)
            lv = _level_of(s, m_asc)
            if lv > 0 and not naive_sum_decides_nb(s, a, k, m_asc[lv - 1]):
                lv = -1
            elif lv < K and not naive_sum_decides_nb(s, a, k, m_asc[lv]):
                lv = -1
            level[p] = lv
            if hits.shape[0] > 0:
                hits[p] = mask
    return level


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _weights_near(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2, w,
                  slots, points, indptr, values):
    """The weights of the eps-neighbourhood (itself included) of each of ``points``,
    as CSR rows: with ``values`` empty, only the row lengths into ``indptr[1:]``.
    ``slots[r]`` is the cell slot of point ``points[r]``."""
    count_only = values.shape[0] == 0
    for r in prange(points.shape[0]):
        p = points[r]
        t = slots[r]
        c = cells[t]
        nb = neighbour_slots(c, radix, offsets, deltas, slot_of)
        pos = indptr[r]
        for q in range(start[c], start[c + 1]):
            if not count_only:
                values[pos] = w[q]
            pos += 1
        for t2 in nb:
            near = _near_cell(Xs, p, t, t2, box_lo, box_hi, eps2)
            if near == 0:
                continue
            for q in range(start[cells[t2]], start[cells[t2] + 1]):
                if near == 1 or d2(Xs, p, q) <= eps2:
                    if not count_only:
                        values[pos] = w[q]
                    pos += 1
        if count_only:
            indptr[r + 1] = pos - indptr[r]


def exact_levels(level, Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                 eps2, w, m_asc):
    """Decide the points ``point_levels_weighted`` left at -1 by the correctly
    rounded sum of their neighbourhood's weights (``core_points.exact_row_sums``),
    in place.  O(neighbours * partials) per such point."""
    points = np.flatnonzero(level < 0)
    if points.size == 0:
        return
    slots = slot_of[np.searchsorted(start, points, side="right") - 1]
    args = (Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2, w, slots,
            points)
    indptr = np.zeros(points.size + 1, dtype=np.int64)
    _weights_near(*args, indptr, np.zeros(0))
    np.cumsum(indptr, out=indptr)
    values = np.empty(int(indptr[-1]))
    _weights_near(*args, indptr, values)
    exact = exact_row_sums(indptr, values)
    level[points] = np.searchsorted(m_asc, exact, side="right")


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def sort_by_level(Xs, perm, level, hits, start, cells, K):
    """In place, each cell's points by decreasing level (stable): rows of Xs, perm, level
    and hits (when not empty).  Cells already in order (all those of one level, such as
    the cells of at least the largest min_samples points) are left as they are."""
    d = Xs.shape[1]
    use_hits = hits.shape[0] > 0
    for t in prange(cells.shape[0]):
        c = cells[t]
        a, b = start[c], start[c + 1]
        done = True
        for p in range(a + 1, b):
            if level[p] > level[p - 1]:
                done = False
                break
        if done:
            continue
        size = b - a
        new = np.empty(size, dtype=np.int64)  # new[i]: old offset of the i-th point
        if size <= 32:
            for i in range(size):  # insertion sort of a small cell
                j = i
                while j > 0 and level[a + new[j - 1]] < level[a + i]:
                    new[j] = new[j - 1]
                    j -= 1
                new[j] = i
        else:
            cnt = np.zeros(K + 2, dtype=np.int64)
            for p in range(a, b):
                cnt[K - level[p] + 1] += 1
            for k in range(1, K + 2):
                cnt[k] += cnt[k - 1]
            for i in range(size):
                r = K - level[a + i]
                new[cnt[r]] = i
                cnt[r] += 1
        x = Xs[a:b].copy()
        pm = perm[a:b].copy()
        lv = level[a:b].copy()
        for i in range(size):
            j = new[i]
            for k in range(d):
                Xs[a + i, k] = x[j, k]
            perm[a + i] = pm[j]
            level[a + i] = lv[j]
        if use_hits:
            h = hits[a:b].copy()
            for i in range(size):
                hits[a + i] = h[new[i]]


@njit(cache=NUMBA_CACHE, nogil=True)
def level_codes(start, cells, perm, level, bits, like):
    """``cell slot << bits | level`` of every point, in the caller's order."""
    code = np.empty(perm.shape[0], dtype=like.dtype)
    for t in range(cells.shape[0]):
        c = cells[t]
        for p in range(start[c], start[c + 1]):
            code[perm[p]] = (t << bits) | level[p]
    return code
