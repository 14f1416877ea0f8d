"""``skyjoin.dbscan_sweep``: the multi-clustering pipeline of HYBRID-DBSCAN (§7.5, §7.6).

Many (eps, min_samples) variants of one data set, for throughput:

* **reuse over min_samples (§7.6)**: what one eps needs is built once and
  every min_samples reads it.  Going further than the paper, the
  min_samples of one eps are assigned *incrementally*: taken in decreasing
  order, the core set only grows, so the union-find forest of the previous
  min_samples stays valid and only the links of the newly core points are
  added.  Every link is then joined once for the whole sweep instead of
  once per min_samples.

  - CPU, float64, d <= 4 (the grid path, ``_grid_index``): no table at
    all.  On the fine grid of ``grid_dbscan`` one capped count per point
    gives its level (how many of the min_samples it is core for), one
    bottleneck level per pair of cells replaces the pairs of T (found
    lazily, Kruskal-style: never for two cells already joined), and one
    "reach" per (non-core point, cell) gives every border label; each
    min_samples then costs a union-find step over the cells and an O(n)
    labelling pass (those of all min_samples run side by side, one per
    thread, once every union-find step is done).
  - otherwise (the table path): T on the points in cell order, the core
    points of each new level made core by ``add_core_level``.

* **pipelining (§7.5)**: a producer thread builds the next eps's table
  (grid path: its grid and levels, what T would tell) while the consumer
  assigns points with the current one (everything that decides clusters:
  links, border reaches, labels).  Both are Numba code that releases the
  GIL; on a GPU the join runs on the device, and on the CPU the threads are
  split between the stages (``_thread_split``).  The ideal time of such a pipeline
  is equation (2), ``T_opt = T_np (|V| + 1) / (2 |V|)``, when the two
  stages take equal times on separate processors; ``pipeline_makespan``
  gives it for measured stage times.

Results are yielded as they finish, as ``SweepResult`` objects.
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import numba
import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE
from .._core.conditioning import condition_points, plan_conditioning
from .._core.device import resolve_device
from .._core.threads import numba_threads, threadsafe_numba
from .._core.validate import check_eps, check_min_samples, check_points, check_precision
from .assign import _find, _naive_sum_decides, _union  # the one union-find of the package
from .assign import exact_row_sums
from .grid_dbscan import _boxes_apart, _d2, _neighbour_slots

__all__ = ["SweepResult", "dbscan_sweep", "add_core_level", "ideal_pipeline_time",
           "pipeline_makespan"]

log = logging.getLogger("skyjoin")


@dataclass
class SweepResult:
    """One clustering of a sweep.

    Attributes
    ----------
    eps : float
    min_samples : int
    labels : ndarray of intp
        scikit-learn's labels (noise -1).
    core_sample_indices : ndarray of int64
    n_clusters : int
    timings : dict
        "table" (seconds to build what this eps's min_samples share: the
        grid index or the table T), "assign" (seconds of this clustering's
        assignment), "path" ("grid-cpu" or "table"), "pairs" (size of T, on
        the table path only) and "finished" (seconds since the sweep began).
    """

    eps: float
    min_samples: int
    labels: np.ndarray
    core_sample_indices: np.ndarray
    n_clusters: int
    timings: dict = field(default_factory=dict)


@njit(cache=NUMBA_CACHE, nogil=True)
def add_core_level(indptr, indices, weight, level, previous_level, parent):
    """Make the points with level <= weight < previous_level core and join their edges.

    ``parent`` is the union-find forest of the core points of the previous
    (larger) min_samples, -1 for non-core points; links always hang the
    larger root under the smaller, so roots stay the lowest core index.
    """
    n = indptr.shape[0] - 1
    for i in range(n):
        if weight[i] >= level and weight[i] < previous_level:
            parent[i] = i
    for i in range(n):
        if not (weight[i] >= level and weight[i] < previous_level):
            continue
        ri = i
        while parent[ri] != ri:
            parent[ri] = parent[parent[ri]]
            ri = parent[ri]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            p = parent[j]
            if p < 0 or p == ri:
                continue
            rj = p
            while parent[rj] != rj:
                parent[rj] = parent[parent[rj]]
                rj = parent[rj]
            if rj < ri:
                parent[ri] = rj
                ri = rj
            elif rj > ri:
                parent[rj] = ri


# ---------------------------------------------------------------------------
# The grid path (CPU, float64, d <= 4): a whole min_samples sweep without T
# ---------------------------------------------------------------------------
#
# On the fine grid of ``grid_dbscan`` (cells of side eps / sqrt(d), so that
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
# * a union-find over the cells (the package's one, ``assign._find/_union``)
#   takes the levels in decreasing order (Kruskal): at level k the pairs of
#   bound ``min(maxlev_t, maxlev_u) = k`` not yet joined get their w (joined
#   if k, else kept for level w), as ``add_core_level`` does on T but on the
#   ~n/15 cells, and no pair of cells already joined is ever scanned;
# * a non-core point at level k is reached by a cell iff some point of it
#   within eps has level >= k: the highest such level per (point, cell),
#   its "reach", is found once; its label at level k is the lowest cluster
#   label among the cells of reach >= k (``assign``'s border rule).  The
#   count pass already scanned the whole neighbourhood of these points, and
#   records which neighbour cells hold a neighbour (a bit mask), so this
#   pass visits only those.
#
# Clusters are numbered by the lowest caller id of their core points, as in
# ``assign``.  Every distance decision is the join's test in float64
# (``grid_dbscan._d2``) or a box test that bounds it (rounding is monotone),
# so each level's labels equal scikit-learn's.


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _gap2(Xs, p, box_lo, box_hi, u):
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
def _span2(Xs, p, box_lo, box_hi, u):
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
    """How many of the points a..b-1 pass the join's test with p (``_d2``, unrolled in 2-D).

    In 2-D the sum is formed as ``_d2`` forms it, ``(0 + t0 t0) + t1 t1``,
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
            cnt += _d2(Xs, p, q) <= eps2
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


_SCAN_PARTS = 4  # parts of a cell's box per dimension with their own scan order (d <= 2)


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


def _scan_orders(offsets, R):
    """For each of the R^d parts of a cell, the offsets by increasing distance from
    the part's centre (ties: nearer far corner first), the count pass's scan order.

    Only a speed heuristic: a point counts the same cells in any order.  On 1M
    blobs (eps 0.3, cap 80) it halves the distances computed (81M -> 37M).
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    return _scan_orders_cached(offsets.tobytes(), offsets.shape[1], R)


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _grid_levels(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2, m_asc,
                 hits, scan_order, R):
    """Level of every (sorted) point: how many of m_asc its neighbourhood size reaches.

    Counting stops at the largest min_samples (a cell holding that many
    points makes them all reach it at once); a cell wholly within eps of a
    point counts at once, one out of reach is skipped.  The neighbour cells
    are scanned nearest first, for where the point lies in its cell's box
    (``scan_order``, one row per box part of ``_scan_orders``): the cap is
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
        nb = _neighbour_slots(c, radix, offsets, deltas, slot_of)
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
                if t2 < 0 or t2 == t or _gap2(Xs, p, box_lo, box_hi, t2) > eps2:
                    continue
                c2 = cells[t2]
                if _span2(Xs, p, box_lo, box_hi, t2) <= eps2:
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
    if t2 < 0 or t2 == t or _gap2(Xs, p, box_lo, box_hi, t2) > eps2:
        return 0
    return 1 if _span2(Xs, p, box_lo, box_hi, t2) <= eps2 else 2


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _grid_levels_weighted(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                          eps2, m_asc, w, hits):
    """``_grid_levels`` with sample weights: complete sums (weights may be negative).

    Each point's weight sum is added naively (cell subtotals), with the sum
    of |w| and the number of terms: a point whose sum cannot decide against
    the min_samples on either side of it (``assign.naive_sum_decides``) gets
    level -1, for ``_exact_levels`` to decide by the correctly rounded sum.
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
        nb = _neighbour_slots(c, radix, offsets, deltas, slot_of)
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
                        if _d2(Xs, p, q) <= eps2:
                            s += w[q]
                            a += abs(w[q])
                            k += 1
                            got = True
                if got:
                    mask |= np.uint64(1) << np.uint64(o)
            lv = _level_of(s, m_asc)
            if lv > 0 and not _naive_sum_decides(s, a, k, m_asc[lv - 1]):
                lv = -1
            elif lv < K and not _naive_sum_decides(s, a, k, m_asc[lv]):
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
    n_off = offsets.shape[0]
    for r in prange(points.shape[0]):
        p = points[r]
        t = slots[r]
        c = cells[t]
        nb = _neighbour_slots(c, radix, offsets, deltas, slot_of)
        pos = indptr[r]
        for q in range(start[c], start[c + 1]):
            if not count_only:
                values[pos] = w[q]
            pos += 1
        for o in range(n_off):
            t2 = nb[o]
            near = _near_cell(Xs, p, t, t2, box_lo, box_hi, eps2)
            if near == 0:
                continue
            c2 = cells[t2]
            for q in range(start[c2], start[c2 + 1]):
                if near == 1 or _d2(Xs, p, q) <= eps2:
                    if not count_only:
                        values[pos] = w[q]
                    pos += 1
        if count_only:
            indptr[r + 1] = pos - indptr[r]


def _exact_levels(level, Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                  eps2, w, m_asc):
    """Decide the points ``_grid_levels_weighted`` left at -1 by the correctly
    rounded sum of their neighbourhood's weights (``assign.exact_row_sums``),
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
def _sort_by_level(Xs, perm, level, hits, start, cells, K):
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


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _cell_pairs(start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, positive, eps2,
                maxlev, K, U):
    """The pairs of cells that may be linked, bucketed by their upper bound (counting sort).

    Each unordered pair of near cells once, unless the box test separates
    them; its link level cannot exceed ``ub = min(maxlev[t], maxlev[u])``,
    and pairs of bucket k are [ptr[k], ptr[k + 1]), by increasing t then
    offset.  In parallel over blocks of cells: each block counts its pairs
    per bucket, then writes them at its place.  ``U``: (m, len(positive))
    scratch of integers.
    """
    m = cells.shape[0]
    n_pos = positive.shape[0]
    B = min(m, _PAIR_BLOCKS)
    cnt = np.zeros((B, K + 1), dtype=np.int64)
    for b in prange(B):
        for t in range(b * m // B, (b + 1) * m // B):
            for j in range(n_pos):
                U[t, j] = -1
            if maxlev[t] == 0:
                continue
            nb = _neighbour_slots(cells[t], radix, offsets, deltas, slot_of)
            for j in range(n_pos):
                u = nb[positive[j]]
                if u < 0 or maxlev[u] == 0 or _boxes_apart(box_lo, box_hi, t, u, eps2):
                    continue
                U[t, j] = u
                cnt[b, min(maxlev[t], maxlev[u])] += 1
    ptr = np.zeros(K + 2, dtype=np.int64)
    run = 0
    for k in range(K + 1):
        ptr[k] = run
        for b in range(B):
            c = cnt[b, k]
            cnt[b, k] = run  # now where block b's pairs of bucket k go
            run += c
    ptr[K + 1] = run
    pa = np.empty(run, dtype=np.int64)
    pb = np.empty(run, dtype=np.int64)
    for b in prange(B):
        for t in range(b * m // B, (b + 1) * m // B):
            for j in range(n_pos):
                u = U[t, j]
                if u >= 0:
                    k = min(maxlev[t], maxlev[u])
                    at = cnt[b, k]
                    pa[at] = t
                    pb[at] = u
                    cnt[b, k] = at + 1
    return ptr, pa, pb


_PAIR_BLOCKS = 1024  # blocks of cells of ``_cell_pairs``


@njit(cache=NUMBA_CACHE, nogil=True)
def _bottleneck(Xs, start, cells, box_lo, box_hi, eps2, level, t, u, ub):
    """``w(t, u)``: the highest min(level_p, level_q) over pairs within eps, 0 if none.

    Both cells' points are in decreasing level, so the scan stops at the
    first pair that cannot beat the best so far, and at ``ub``.
    """
    c, c2 = cells[t], cells[u]
    a, b = start[c], start[c + 1]
    a2, b2 = start[c2], start[c2 + 1]
    best = 0
    for p in range(a, b):
        lp = level[p]
        if lp <= best:
            break
        if _gap2(Xs, p, box_lo, box_hi, u) > eps2:
            continue
        for q in range(a2, b2):
            lq = level[q]
            if lq <= best:
                break
            if _d2(Xs, p, q) <= eps2:
                best = lp if lp < lq else lq
                break
        if best == ub:
            break
    return best


@njit(cache=NUMBA_CACHE, nogil=True)
def _link_level(k, Xs, start, cells, box_lo, box_hi, eps2, level, pair_ptr, pa, pb, later_head,
                later_next, parent):
    """Join the cells linked at level k: Kruskal over the cell pairs, evaluated lazily.

    A pair whose bound is k is skipped when its cells are already joined
    (through links of level >= k, so adding it changes no level <= k);
    otherwise its level w is found: joined now if w == k, kept for level w
    if lower.  Then the pairs kept for level k are joined (if still apart).
    """
    for e in range(pair_ptr[k], pair_ptr[k + 1]):
        t, u = pa[e], pb[e]
        if _find(parent, t) == _find(parent, u):
            continue
        w = _bottleneck(Xs, start, cells, box_lo, box_hi, eps2, level, t, u, k)
        if w == k:
            _union(parent, t, u)
        elif w > 0:
            later_next[e] = later_head[w]
            later_head[w] = e
    e = later_head[k]
    while e >= 0:
        _union(parent, pa[e], pb[e])
        e = later_next[e]


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _reach_scan(Xs, p, t, nb, start, cells, box_lo, box_hi, eps2, level, maxlev, hits, out_r,
                out_c, at):
    """Cells that reach non-core point p above its own level, with their reach.

    Only the offsets of ``hits[p]`` when known.  Writes them at
    ``out_*[at:]`` when ``at >= 0``; returns how many.
    """
    lp = level[p]
    cnt = 0
    if maxlev[t] > lp:  # its own (close) cell: its best point is another point
        if at >= 0:
            out_r[at] = maxlev[t]
            out_c[at] = t
        cnt += 1
    use_hits = hits.shape[0] > 0
    for o in range(nb.shape[0]):
        if use_hits and (hits[p] >> np.uint64(o)) & np.uint64(1) == 0:
            continue
        u = nb[o]
        if u < 0 or u == t or maxlev[u] <= lp or _gap2(Xs, p, box_lo, box_hi, u) > eps2:
            continue
        c2 = cells[u]
        if _span2(Xs, p, box_lo, box_hi, u) <= eps2:  # all of u within eps: its best point
            if at >= 0:
                out_r[at + cnt] = maxlev[u]
                out_c[at + cnt] = u
            cnt += 1
            continue
        for q in range(start[c2], start[c2 + 1]):
            lq = level[q]
            if lq <= lp:
                break
            if _d2(Xs, p, q) <= eps2:
                if at >= 0:
                    out_r[at + cnt] = lq
                    out_c[at + cnt] = u
                cnt += 1
                break
    return cnt


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _reach_room(start, cells, slot_of, radix, offsets, deltas, level, maxlev, K, gap_test, Xs,
                box_lo, box_hi, eps2, hits):
    """Room for the reaching cells of each point: the cells of a higher max level
    (with ``gap_test``, only those that pass the box test too; with ``hits``,
    only those that hold a neighbour)."""
    n = level.shape[0]
    room = np.zeros(n + 1, dtype=np.int64)
    for t in prange(cells.shape[0]):
        c = cells[t]
        a, b = start[c], start[c + 1]
        if level[b - 1] >= K:
            continue
        nb = _neighbour_slots(c, radix, offsets, deltas, slot_of)
        for p in range(a, b):
            lp = level[p]
            if lp >= K:
                continue
            r = 1 if maxlev[t] > lp else 0
            for o in range(nb.shape[0]):
                if hits.shape[0] > 0 and (hits[p] >> np.uint64(o)) & np.uint64(1) == 0:
                    continue
                u = nb[o]
                if u >= 0 and u != t and maxlev[u] > lp:
                    if not gap_test or _gap2(Xs, p, box_lo, box_hi, u) <= eps2:
                        r += 1
            room[p + 1] = r
    return room


@njit(cache=NUMBA_CACHE, nogil=True)
def _reach_fill(lo, hi, Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2,
                level, maxlev, K, hits, at, reach_all, cell_all, counts):
    """Fill the rows (at ``at[p]``, -1: none) of the points of cell slots lo..hi-1 with
    their reaching cells, by decreasing reach, and their counts.  One thread: the
    ranges are handed out by ``_share``."""
    for t in range(lo, hi):
        c = cells[t]
        a, b = start[c], start[c + 1]
        if level[b - 1] >= K:
            continue
        nb = _neighbour_slots(c, radix, offsets, deltas, slot_of)
        for p in range(a, b):
            lo_p = at[p]
            if lo_p < 0:
                continue
            cnt = _reach_scan(Xs, p, t, nb, start, cells, box_lo, box_hi, eps2, level, maxlev,
                              hits, reach_all, cell_all, lo_p)
            counts[p] = cnt
            for i in range(lo_p + 1, lo_p + cnt):  # insertion sort by decreasing reach
                r = reach_all[i]
                u = cell_all[i]
                j = i
                while j > lo_p and reach_all[j - 1] < r:
                    reach_all[j] = reach_all[j - 1]
                    cell_all[j] = cell_all[j - 1]
                    j -= 1
                reach_all[j] = r
                cell_all[j] = u


@njit(cache=NUMBA_CACHE, nogil=True)
def _rows_by_caller(room, perm, slot):
    """The points with room, in increasing caller id, and where each one's row starts.

    Returns (their cell-order ids, their caller ids, row starts of length
    count + 1); ``slot``: n items of scratch, all -1.
    """
    n = perm.shape[0]
    n_rows = 0
    for p in range(n):
        if room[p + 1] > 0:
            slot[perm[p]] = p
            n_rows += 1
    rows_p = np.empty(n_rows, dtype=np.int64)
    ids = np.empty(n_rows, dtype=np.int64)
    row_at = np.empty(n_rows + 1, dtype=np.int64)
    row_at[0] = 0
    j = 0
    for i in range(n):
        p = slot[i]
        if p >= 0:
            rows_p[j] = p
            ids[j] = i
            row_at[j + 1] = row_at[j] + room[p + 1]
            j += 1
    return rows_p, ids, row_at


class _Reach:
    """For every point below the top level: the cells that reach it higher (border labels).

    ``prepare`` lays out the rows, ``fill(i)`` fills the rows of the i-th of
    ``n_parts`` ranges of cells (any thread, any order), ``result`` returns
    the points that may have any, in increasing caller id, their levels,
    where their rows start and how many entries each holds, and the rows'
    (reach, cell) by decreasing reach, where reach is the highest level of a
    point of that cell within eps.  One scan of the distances: rows, laid out
    in the caller's order, get room for every neighbour cell of a higher max
    level (or, if that is more than 8 per point, for those passing the box
    test too), then are filled.
    """

    def __init__(self, g, n_parts):
        self.g, self.K = g, g.n_levels
        m = len(g.cells)
        self.n_parts = max(1, min(m, n_parts))
        self.bounds = np.linspace(0, m, self.n_parts + 1).astype(np.int64)

    def prepare(self):
        g, K = self.g, self.K
        n = g.Xs.shape[0]
        args = (g.start, g.cells, g.slot_of, g.radix, g.offsets, g.deltas, g.level, g.maxlev, K)
        room = _reach_room(*args, False, g.Xs, g.box_lo, g.box_hi, g.eps2, g.hits)
        if room.sum() > 8 * n:
            room = _reach_room(*args, True, g.Xs, g.box_lo, g.box_hi, g.eps2, g.hits)
        self.rows_p, self.ids, self.row_at = _rows_by_caller(room, g.perm,
                                                             np.full(n, -1, dtype=np.int64))
        self.at = np.full(n, -1, dtype=np.int64)
        self.at[self.rows_p] = self.row_at[:-1]
        self.reach_all = np.empty(self.row_at[-1], dtype=np.int32)
        self.cell_all = np.empty(self.row_at[-1], dtype=np.int64)
        self.counts = np.zeros(n, dtype=np.int64)

    def fill(self, i):
        g = self.g
        _reach_fill(self.bounds[i], self.bounds[i + 1], g.Xs, g.start, g.cells, g.slot_of,
                    g.box_lo, g.box_hi, g.radix, g.offsets, g.deltas, g.eps2, g.level, g.maxlev,
                    self.K, g.hits, self.at, self.reach_all, self.cell_all, self.counts)

    def result(self):
        return (self.ids, self.g.level[self.rows_p], self.row_at, self.counts[self.rows_p],
                self.reach_all, self.cell_all)


@njit(cache=NUMBA_CACHE, nogil=True)
def _components_at(k, parent, maxlev, level, start, cells, perm, pos, first, comp_min,
                   cell_label):
    """Number the clusters of level k once its links are in ``parent`` (§7.6, incrementally).

    ``pos[t]``/``first[t]``: how far cell t's points (by decreasing level)
    have been read and the lowest caller id among them, advanced to level k;
    clusters are numbered by the lowest caller id of their core points
    (scikit-learn's order).  Fills ``cell_label`` for the cells of max level
    >= k and returns the number of clusters.
    """
    m = maxlev.shape[0]
    big = np.iinfo(np.int64).max
    n_roots = 0
    for t in range(m):
        if maxlev[t] < k:
            continue
        b = start[cells[t] + 1]
        p = pos[t]
        f = first[t]
        while p < b and level[p] >= k:
            if perm[p] < f:
                f = perm[p]
            p += 1
        pos[t] = p
        first[t] = f
        comp_min[t] = big
    for t in range(m):
        if maxlev[t] < k:
            continue
        r = _find(parent, t)
        if r == t:
            n_roots += 1
        if first[t] < comp_min[r]:
            comp_min[r] = first[t]
    keys = np.empty(n_roots, dtype=np.int64)
    ids = np.empty(n_roots, dtype=np.int64)
    i = 0
    for t in range(m):
        if maxlev[t] >= k and parent[t] == t:
            keys[i] = comp_min[t]
            ids[i] = t
            i += 1
    rank = np.argsort(keys)
    for c in range(n_roots):
        cell_label[ids[rank[c]]] = c
    for t in range(m):
        if maxlev[t] >= k and parent[t] != t:
            cell_label[t] = cell_label[_find(parent, t)]
    return n_roots


@njit(cache=NUMBA_CACHE, nogil=True)
def _link_all(Xs, start, cells, box_lo, box_hi, eps2, level, pair_ptr, pa, pb, maxlev, perm, K,
              tab, n_clusters):
    """The cell clusters of every level, K down to 1, in one union-find (§7.6, incrementally).

    ``tab[k, t]``: the cluster of cell slot t at level k (for the cells of
    max level >= k; -1 elsewhere), ``n_clusters[k]`` their number.  The
    links of level k are joined when level k is reached (``_link_level``),
    then the clusters are numbered (``_components_at``).
    """
    m = cells.shape[0]
    parent = np.arange(m)
    later_head = np.full(K + 1, -1, dtype=np.int64)
    later_next = np.empty(pa.shape[0], dtype=np.int64)
    pos = np.empty(m, dtype=np.int64)
    for t in range(m):
        pos[t] = start[cells[t]]
    first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    comp_min = np.empty(m, dtype=np.int64)
    cell_label = np.full(m, -1, dtype=np.intp)
    for k in range(K, 0, -1):
        _link_level(k, Xs, start, cells, box_lo, box_hi, eps2, level, pair_ptr, pa, pb,
                    later_head, later_next, parent)
        n_clusters[k] = _components_at(k, parent, maxlev, level, start, cells, perm, pos, first,
                                       comp_min, cell_label)
        for t in range(m):
            tab[k, t] = cell_label[t] if maxlev[t] >= k else -1


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _labels_levels(k_hi, k_lo, at_least, code, bits, tab, cand, cand_level, row_at, row_len,
                   reach, cell):
    """Labels and core indices of the levels k_hi down to k_lo, in the caller's order.

    The levels in parallel, each one pass over the points.  ``code[i] = cell
    slot << bits | level`` of the caller's point i.  Core points take their
    cell's cluster (``tab``); border points (``cand``, increasing caller
    ids, with their reaching cells by decreasing reach) the lowest cluster
    among the cells that reach them at level k; noise -1.  Returns two
    lists, entry g for level k_hi - g.  The arrays come from Numba's
    allocator (plain pages): NumPy's asks for huge pages, and a fault on
    those can stall on memory compaction (measured: 40 ms per level after
    other large runs, instead of ~6).
    """
    n = code.shape[0]
    mask = (1 << bits) - 1
    G = k_hi - k_lo + 1
    labels = [np.empty(n, dtype=np.intp) for _ in range(G)]
    cores = [np.empty(at_least[k_hi - g] + 1, dtype=np.int64) for g in range(G)]
    for g in prange(G):
        k = k_hi - g
        lab = labels[g]
        core = cores[g]
        c = 0
        for i in range(n):
            v = code[i]
            is_core = (v & mask) >= k
            lab[i] = tab[k, v >> bits] if is_core else -1
            core[c] = i
            c += is_core
        for j in range(cand.shape[0]):
            if cand_level[j] >= k:
                continue
            best = -1
            for e in range(row_at[j], row_at[j] + row_len[j]):
                if reach[e] < k:
                    break
                lb = tab[k, cell[e]]
                if best < 0 or lb < best:
                    best = lb
            lab[cand[j]] = best
    return labels, cores


@njit(cache=NUMBA_CACHE, nogil=True)
def _codes(start, cells, perm, level, bits, like):
    """``cell slot << bits | level`` of every point, in the caller's order."""
    code = np.empty(perm.shape[0], dtype=like.dtype)
    for t in range(cells.shape[0]):
        c = cells[t]
        for p in range(start[c], start[c + 1]):
            code[perm[p]] = (t << bits) | level[p]
    return code


@dataclass
class _GridIndex:
    """One eps on the fine grid (``_grid_index``): the first stage of the pipeline, no table.

    The grid, the points in cell order and their levels (the neighbourhood
    sizes that T would give); the assignment stage adds the rest.
    """

    n_levels: int
    Xs: np.ndarray
    start: np.ndarray
    cells: np.ndarray
    slot_of: np.ndarray
    box_lo: np.ndarray
    box_hi: np.ndarray
    radix: np.ndarray
    offsets: np.ndarray
    deltas: np.ndarray
    positive: np.ndarray
    eps2: float
    level: np.ndarray          # level of each point (cell order)
    perm: np.ndarray           # caller id of each point in cell order
    hits: np.ndarray           # offsets holding a neighbour, bit mask per point (or empty)
    # filled by ``_order_by_level`` (assignment stage):
    maxlev: np.ndarray = None  # max level of each cell
    code: np.ndarray = None    # cell slot << bits | level of every point, caller's order
    bits: int = 0
    at_least: np.ndarray = None  # at_least[k]: how many points have level >= k


def _grid_index(X, eps, m_asc, sample_weight=None, timings=None):
    """The grid of one eps and the level of every point, or None (§7.6 without T).

    None when ``grid_dbscan`` would not take the grid (d > 4, too many
    cells) or when rounding left a cell that is not close (the table path
    is exact in every case).
    """
    from .grid_dbscan import MAX_DIMS, fine_grid, positive_offsets

    clock = [time.perf_counter()]

    def tick(name):
        now = time.perf_counter()
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + now - clock[0]
        clock[0] = now

    n, d = X.shape
    if n == 0 or d > MAX_DIMS:
        return None
    g = fine_grid(X, eps)
    if g is None or not g.close.all():
        return None
    Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2, perm = (
        g.Xs, g.start, g.cells, g.slot_of, g.box_lo, g.box_hi, g.radix, g.offsets, g.deltas,
        g.eps2, g.perm)
    positive = positive_offsets(offsets)
    tick("grid")
    K = len(m_asc)
    m_arr = np.asarray(m_asc, dtype=np.float64)
    hits = np.empty(n if len(offsets) <= 64 else 0, dtype=np.uint64)
    if sample_weight is None:
        R = _SCAN_PARTS if d <= 2 else 2
        level = _grid_levels(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                             eps2, m_arr, hits, _scan_orders(offsets, R), R)
    else:
        w = np.ascontiguousarray(sample_weight[perm], dtype=np.float64)
        level = _grid_levels_weighted(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets,
                                      deltas, eps2, m_arr, w, hits)
        _exact_levels(level, Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                      eps2, w, m_arr)
    tick("levels")
    return _GridIndex(n_levels=K, Xs=Xs, start=start, cells=cells, slot_of=slot_of,
                      box_lo=box_lo, box_hi=box_hi, radix=radix, offsets=offsets, deltas=deltas,
                      positive=positive, eps2=eps2, level=level, perm=perm, hits=hits)


def _order_by_level(g):
    """Each cell's points by decreasing level, the cells' max levels and the caller-order
    codes (the start of the assignment stage)."""
    K = g.n_levels
    _sort_by_level(g.Xs, g.perm, g.level, g.hits, g.start, g.cells, K)
    g.maxlev = g.level[g.start[g.cells]]
    g.bits = max(1, int(K).bit_length())
    code_t = np.int32 if (len(g.cells) << g.bits) < 2**31 else np.int64
    g.code = _codes(g.start, g.cells, g.perm, g.level, g.bits, np.zeros(0, dtype=code_t))
    g.at_least = np.cumsum(np.bincount(g.level, minlength=K + 1)[::-1])[::-1]


def _levels(min_samples):
    """Distinct min_samples in decreasing order (the core set grows along it)."""
    return sorted({check_min_samples(m) for m in min_samples}, reverse=True)


def _share(serial, prepare, task, n_tasks, n_threads=None):
    """Run ``serial()`` on a helper thread while this thread runs ``prepare()``, then the
    tasks ``task(i)``, i in 0..n_tasks-1, taken in turn by this thread, by the helper
    once ``serial`` returns, and by Numba's other threads (if more than two).

    ``serial`` is sequential Numba code that releases the GIL, ``task`` too;
    ``prepare`` may run parallel regions, on one thread fewer than Numba's
    count (the helper has one core).  Handing out small tasks lets the
    serial part end on a core of its own while the rest fill the others: on 2
    cores, 1M blobs, the union-find (47 ms) beside the border reaches as one
    parallel region (39 ms alone) took 75-83 ms (three threads on two cores,
    the union-find given 2/3 of one), beside the reaches on one thread 70 ms.
    """
    n_threads = max(2, numba.get_num_threads() if n_threads is None else n_threads)
    tasks = itertools.count()  # next() is atomic under the GIL
    ready = threading.Event()
    failed = threading.Event()
    err = []

    def drain():
        ready.wait()
        while not failed.is_set():
            i = next(tasks)
            if i >= n_tasks:
                return
            task(i)

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # re-raised by the caller
                err.append(exc)
                failed.set()
                ready.set()
        return run

    def helper():
        serial()
        drain()

    threads = [threading.Thread(target=guarded(helper), name="skyjoin-sweep-links", daemon=True)]
    threads += [threading.Thread(target=guarded(drain), name="skyjoin-sweep-reach", daemon=True)
                for _ in range(n_threads - 2)]
    for th in threads:
        th.start()
    try:
        with numba_threads(min(n_threads - 1, numba.config.NUMBA_NUM_THREADS)):
            guarded(prepare)()
        ready.set()
        guarded(drain)()
    finally:
        ready.set()
        for th in threads:
            th.join()
    if err:
        raise err[0]


_REACH_PARTS_PER_THREAD = 32  # ranges of cells of the border reaches per thread

_GROUP_BYTES = 1 << 29  # output bytes of the levels labelled in one pass


def _prepare_links(g):
    """The points ordered by level, and the pairs of near cells (ptr, a, b) that the
    union-find reads."""
    _order_by_level(g)
    U = np.empty((len(g.cells), len(g.positive)),
                 dtype=np.int32 if len(g.cells) < 2**31 else np.int64)
    return _cell_pairs(g.start, g.cells, g.slot_of, g.box_lo, g.box_hi, g.radix, g.offsets,
                       g.deltas, g.positive, g.eps2, g.maxlev, g.n_levels, U)


def _reaches(g, serial):
    """The border reaches of ``g`` (``_Reach``), found beside ``serial()`` (``_share``)."""
    rc = _Reach(g, _REACH_PARTS_PER_THREAD * max(2, numba.get_num_threads()))
    _share(serial, rc.prepare, rc.fill, rc.n_parts)
    return rc.result()


def _assign_grid_levels(gi, min_samples_desc):
    """Yield (min_samples, core indices, labels, n_clusters, seconds), largest first (§7.6).

    The second stage of the pipeline: the points ordered by level, the
    pairs of near cells, the reaching cells of the border points, one
    union-find over the cells for the whole sweep (the links of level k
    found and joined when level k is reached, ``_link_all``), then the
    labels of all levels in parallel passes over the points
    (``_labels_levels``, as many levels per pass as ``_GROUP_BYTES`` of
    output allows).  The shared seconds are counted in the first clustering
    of each pass.
    """
    g = gi
    t0 = time.perf_counter()
    K = g.n_levels
    pair_ptr, pair_a, pair_b = _prepare_links(g)
    n = len(g.level)
    m = len(g.cells)
    tab = np.empty((K + 1, m), dtype=np.int32 if n < 2**31 else np.int64)
    n_clusters = np.zeros(K + 1, dtype=np.int64)

    def links():
        _link_all(g.Xs, g.start, g.cells, g.box_lo, g.box_hi, g.eps2, g.level, pair_ptr, pair_a,
                  pair_b, g.maxlev, g.perm, K, tab, n_clusters)

    # the union-find (sequential) beside the border reaches: measured on 16 cores (1M
    # blobs, 8 eps, pipelined), 0.56-0.57 s against 0.71-0.83 s with the reaches moved
    # to the build stage, which then took 0.68-0.81 s of the 0.9 s unpipelined
    cand, cand_level, row_at, row_len, reach, reach_cell = _reaches(g, links)
    k_hi = K
    while k_hi >= 1:
        k_lo = k_hi
        size = 8 * (n + g.at_least[k_hi])
        while k_lo > 1 and size + 8 * (n + g.at_least[k_lo - 1]) <= _GROUP_BYTES:
            k_lo -= 1
            size += 8 * (n + g.at_least[k_lo])
        labels, cores = _labels_levels(k_hi, k_lo, g.at_least, g.code, g.bits, tab, cand,
                                       cand_level, row_at, row_len, reach, reach_cell)
        for j, k in enumerate(range(k_hi, k_lo - 1, -1)):
            ms = min_samples_desc[K - k]
            yield (ms, cores[j][:-1], labels[j], int(n_clusters[k]),
                   time.perf_counter() - t0)
            t0 = time.perf_counter()
        del labels, cores
        k_hi = k_lo - 1


def _assign_levels(nt, min_samples_desc, sample_weight, order):
    """Yield (min_samples, core indices, labels, n_clusters, seconds), incrementally (§7.6).

    The table's point p is the caller's row ``order[p]``; results come back
    in the caller's order.
    """
    from .assign import _roots, core_forest, labels_from_roots, weighted_neighbourhood

    if nt.on_device:
        yield from _assign_levels_gpu(nt, min_samples_desc, sample_weight, order)
        return
    indptr = np.ascontiguousarray(nt.indptr, dtype=np.int64)
    indices = nt.indices
    if sample_weight is None:
        weight = (np.diff(indptr) + 1).astype(np.float64)
    else:
        weight = weighted_neighbourhood(indptr, indices, sample_weight[order], True)
    parent = None
    previous = np.inf
    for m in min_samples_desc:
        t0 = time.perf_counter()
        if parent is None:  # the first level from nothing: the parallel forests
            parent = core_forest(indptr, indices, (weight >= m).view(np.uint8))
        else:               # then only the new core points' edges
            add_core_level(indptr, indices, weight, float(m), previous, parent)
        previous = float(m)
        is_core = (parent >= 0).view(np.uint8)
        labels = labels_from_roots(_roots(parent), is_core, indptr, indices, order)
        core_out = np.empty_like(is_core)
        core_out[order] = is_core
        labels_out = np.empty_like(labels)
        labels_out[order] = labels
        yield (m, np.flatnonzero(core_out), labels_out, _n_clusters(labels_out),
               time.perf_counter() - t0)


def _assign_levels_gpu(nt, min_samples_desc, sample_weight, order):
    """Each min_samples assigned on the GPU from the table kept there (§7.6 on the device)."""
    from .._core.device import cupy
    from .gpu import gpu_dbscan_table

    cp = cupy()
    w = None if sample_weight is None else cp.asarray(sample_weight[order])
    order_d = cp.asarray(order)          # numbering by caller rows, as scikit-learn's
    n = nt.shape[0]
    for m in min_samples_desc:
        t0 = time.perf_counter()
        is_core, labels = gpu_dbscan_table(nt.indptr, nt.indices, m, sample_weight=w,
                                           order=order_d)
        core_out = np.empty(n, dtype=np.uint8)
        core_out[order] = cp.asnumpy(is_core)
        labels_out = np.empty(n, dtype=np.intp)
        labels_out[order] = cp.asnumpy(labels)
        yield (m, np.flatnonzero(core_out), labels_out, _n_clusters(labels_out),
               time.perf_counter() - t0)


def _n_clusters(labels):
    return int(labels.max()) + 1 if len(labels) else 0


def ideal_pipeline_time(non_pipelined_s: float, n_variants: int) -> float:
    """Equation (2) of the paper: T_opt = T_np (|V| + 1) / (2 |V|).

    It is the time of the two-stage pipeline of Fig. 3 when each stage of
    each variant takes T_np / (2 |V|), "perfect load balancing between CPU
    and GPU components" (§7.5), each stage on its own processor.  For stages
    of other lengths see ``pipeline_makespan``.
    """
    return non_pipelined_s * (n_variants + 1) / (2 * n_variants)


def pipeline_makespan(build_s, assign_s) -> float:
    """Best time of the two-stage pipeline of §7.5 (Fig. 3) for measured stage times.

    Variant i's table (``build_s[i]``) is built after variant i-1's, and
    its assignment (``assign_s[i]``) starts when both its table and the
    previous assignment are done, each stage on its own processor.  With
    every stage equal to T_np / (2 |V|) this is equation (2); with unequal
    stages equation (2) is below what any schedule can reach, since the
    longer stage runs back to back.
    """
    built = done = 0.0
    for b, a in zip(build_s, assign_s, strict=True):
        built += b
        done = max(done, built) + a
    return done


def dbscan_sweep(X, eps, min_samples, *, sample_weight=None, device="auto",
                 precision="float64", pipeline=True, progress=False, method="auto"):
    """DBSCAN for every (eps, min_samples) pair, reusing tables and pipelining (§7.5-7.6).

    Parameters
    ----------
    X : array_like, shape (n, d)
        The points (Euclidean distance).
    eps : float or sequence of float
        Radii; one neighbour table is built per eps, in the order given.
    min_samples : int or sequence of int
        Every min_samples is clustered with every eps.
    sample_weight : array_like of shape (n,), optional
        As in ``DBSCAN.fit``.
    device : {"auto", "cpu", "gpu"} or None
        Device of the join.  On the CPU, in float64 with d <= 4 and a grid
        of cells of side eps / sqrt(d) that fits (as ``grid_dbscan``), no
        table is built (the grid path, see the module's notes); otherwise
        T is built by the join and assigned on the CPU.  On the GPU, in
        float64 without weights and d <= 4, every clustering runs the GPU
        grid path from points sent once (``_sweep_gpu_grid``); otherwise
        each table stays in GPU memory when it fits and every min_samples
        is assigned there, else it is streamed to the host and assigned on
        the CPU (HYBRID-DBSCAN).
    precision : {"float64", "float32"}
    pipeline : bool, default True
        Build the next eps's table (or grid and levels) in a background
        thread while the current one is assigned (§7.5); on the CPU the
        builder keeps all of Numba's threads and the assigner gets half.
        False runs the stages one after the other, each on all threads.
    progress : bool, default False
        Show a tqdm progress bar (one step per clustering).
    method : {"auto", "hybrid"}, default "auto"
        "auto": the paths above, the fastest.  "hybrid": the paper's
        HYBRID-DBSCAN on any device: T is built by the device's join and
        streamed to the host, and the CPU assigns every min_samples from it
        (incrementally, §7.6) while the join builds the next eps's T (§7.5).
        On a GPU this keeps the two processors of Fig. 3 busy at once.

    Yields
    ------
    SweepResult
        One per (eps, min_samples), as soon as it is ready: eps in the order
        given, min_samples of one eps in decreasing order.

    Raises
    ------
    ValueError
        Bad points, an eps <= 0, a min_samples < 1, a bad sample_weight or
        method.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> X = np.random.default_rng(0).normal(size=(2000, 2))
    >>> res = list(sj.dbscan_sweep(X, eps=[0.1, 0.2], min_samples=[5, 10], device="cpu"))
    >>> [(r.eps, r.min_samples) for r in res]
    [(0.1, 10), (0.1, 5), (0.2, 10), (0.2, 5)]
    """
    eps_list = [check_eps(e) for e in np.atleast_1d(np.asarray(eps, dtype=object)).tolist()]
    ms_list = _levels(np.atleast_1d(np.asarray(min_samples, dtype=object)).tolist())
    if not eps_list or not ms_list:
        raise ValueError("eps and min_samples must each hold at least one value")
    precision = check_precision(precision)
    if method not in ("auto", "hybrid"):
        raise ValueError(f"method must be 'auto' or 'hybrid', got {method!r}")
    hybrid = method == "hybrid"
    dev = resolve_device(device)
    X = check_points(X, name="X")
    if sample_weight is not None:
        sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != (X.shape[0],) or not np.isfinite(sample_weight).all():
            raise ValueError(f"sample_weight must be {X.shape[0]} finite numbers, "
                             f"got shape {sample_weight.shape}")
    if (not hybrid and dev == "gpu" and precision == "float64" and sample_weight is None
            and X.shape[1] <= 4):
        return _sweep_gpu_grid(X, eps_list, ms_list, progress)
    return _sweep(X, eps_list, ms_list, sample_weight, dev, precision, pipeline, progress,
                  hybrid)


def _sweep_gpu_grid(X, eps_list, ms_list, progress):
    """The sweep on the GPU by the grid path (``gpu_grid.gpu_grid_dbscan``) per clustering.

    On the GPU a single grid clustering (no table) costs about what reading a
    reused table once costs (1M blobs on the H200: 15 ms against 25 ms for
    one assignment from T kept on the GPU, whose build is extra), so reuse
    buys nothing there: the points go to the GPU once and every
    (eps, min_samples) is clustered from them.  An eps whose grid does not
    fit takes the table path.
    """
    from .._core.device import cupy
    from .._core.transfer import to_device
    from .gpu_grid import gpu_grid_dbscan

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(eps_list) * len(ms_list), desc="dbscan sweep", unit="clustering")
    start = time.perf_counter()
    Xd = to_device(cupy(), X, "X", np.float64)
    try:
        for e in eps_list:
            t0 = time.perf_counter()
            # an eps that needs the points rescaled (skyjoin._core.conditioning)
            # takes the table path, which rescales them
            scaled = not plan_conditioning([X], e).identity
            res = None if scaled else gpu_grid_dbscan(Xd, e, ms_list[0])
            if res is None:
                for r in _sweep(X, [e], ms_list, None, "gpu", "float64", False, False, False):
                    if bar is not None:
                        bar.update(1)
                    yield r
                continue
            for k, m in enumerate(ms_list):
                if k:
                    t0 = time.perf_counter()
                    res = gpu_grid_dbscan(Xd, e, m)
                core, labels = res
                r = SweepResult(eps=e, min_samples=m, labels=labels, core_sample_indices=core,
                                n_clusters=_n_clusters(labels),
                                timings={"table": 0.0, "assign": time.perf_counter() - t0,
                                         "path": "grid-gpu",
                                         "finished": time.perf_counter() - start})
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(eps=e, min_samples=m)
                yield r
    finally:
        if bar is not None:
            bar.close()


def _build(X, e, dev, precision, ms_list, sample_weight, hybrid=False):
    """Build what one eps's clusterings read, and time it (the first stage of §7.5).

    On the CPU in float64 with d <= 4: the fine-grid index of this eps
    (the levels, ``_grid_index``), which replaces T for a whole min_samples
    sweep.  Otherwise the table T on the points in cell
    order: on the GPU it stays in GPU memory when it fits (every min_samples
    is then assigned there, ``gpu.gpu_dbscan_table``), else it is streamed
    to the host (HYBRID-DBSCAN).  With ``hybrid``, always T on the host.
    """
    from .estimator import neighbor_table, spatial_order

    t0 = time.perf_counter()
    (X,), e = condition_points([X], e)           # the grids' float64 range
    if dev == "cpu" and precision == "float64" and not hybrid:
        gi = _grid_index(X, e, ms_list[::-1], sample_weight)
        if gi is not None:
            return ("grid", gi), time.perf_counter() - t0
    Xo, order = spatial_order(X, e, precision, dev)
    nt = None
    if dev == "gpu" and not hybrid:
        try:
            nt = neighbor_table(Xo, e, device=dev, precision=precision, on_device=True)
        except MemoryError:
            nt = None
    if nt is None:
        nt = neighbor_table(Xo, e, device=dev, precision=precision)
    return ("table", nt, order), time.perf_counter() - t0


def _thread_split(dev, pipelined):
    """Numba threads of the (builder, assigner) of a pipelined sweep; None: all of them.

    The assigner gets half of the threads.  On the CPU both stages share
    the cores (§7.5 gives the GPU to the builder and the CPU to the
    assigner): the builder, whose count pass is parallel, keeps all of
    them, and the assigner, mostly sequential (union-find, labelling), runs
    on cores the builder leaves idle in its sequential parts.  Measured on
    2 cores, 1M blobs, 8 eps (best of 3; splits builder/assigner): 2/1
    0.86-0.87 s, 2/2 0.85-0.89 s, 1/1 0.92-0.97 s, 1/2 0.91-1.14 s, not
    pipelined 1.04-1.28 s.  On a GPU the builder's host side copies each
    table into host memory (with its own copy threads) while the assigner
    reads the previous one: on the 16-core H200 host, HYBRID-DBSCAN over
    8 eps (``scripts/sweep_profile.py --gpu-hybrid``) took 1.13 s with the
    assigner on 16 threads, 0.94-1.02 s on 12, 0.92-1.01 s on 8, 1.37-1.41 s
    on 4 (not pipelined 1.27-1.44 s).
    """
    if not pipelined:
        return None, None
    total = numba.get_num_threads()  # the caller's count
    return (total if dev == "cpu" else None), max(1, total // 2)


def _tables(X, eps_list, dev, precision, pipeline, ms_list, sample_weight, build_threads=None,
            hybrid=False):
    """Yield (eps, table, seconds); with pipeline, built one ahead in a thread (§7.5)."""
    if not pipeline or len(eps_list) == 1:  # nothing to overlap with one eps
        for e in eps_list:
            built, dt = _build(X, e, dev, precision, ms_list, sample_weight, hybrid)
            yield e, built, dt
        return
    q: queue.Queue = queue.Queue(maxsize=1)  # at most one finished table waits
    stop = threading.Event()

    def producer():
        try:
            if build_threads is not None:
                numba.set_num_threads(build_threads)  # this thread's count only
            for e in eps_list:
                if stop.is_set():
                    return
                item = (e,) + _build(X, e, dev, precision, ms_list, sample_weight, hybrid)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
            q.put(None)
        except BaseException as exc:  # hand the error to the consumer
            q.put(exc)

    th = threading.Thread(target=producer, name="skyjoin-sweep-tables", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        th.join()


def _sweep(X, eps_list, ms_list, sample_weight, dev, precision, pipeline, progress,
           hybrid=False):
    """The generator behind ``dbscan_sweep``."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(eps_list) * len(ms_list), desc="dbscan sweep", unit="clustering")
    start = time.perf_counter()
    if pipeline and len(eps_list) > 1 and not threadsafe_numba():
        log.debug("dbscan_sweep: Numba's workqueue threading layer is not thread-safe; "
                  "tables are built without pipelining")
        pipeline = False
    pipelined = pipeline and len(eps_list) > 1
    build_threads, assign_threads = _thread_split(dev, pipelined)
    try:
        for e, built, table_s in _tables(X, eps_list, dev, precision, pipelined, ms_list,
                                         sample_weight, build_threads, hybrid):
            if built[0] == "grid":
                levels = _assign_grid_levels(built[1], ms_list)
                info = {"path": "grid-cpu"}
            else:
                _, nt, order = built
                levels = _assign_levels(nt, ms_list, sample_weight, order)
                info = {"path": "table", "pairs": nt.n_pairs}
            while True:
                with numba_threads(assign_threads):  # not around the yield: the caller's code
                    item = next(levels, None)
                if item is None:
                    break
                m, core, labels, n_clusters, assign_s = item
                res = SweepResult(eps=e, min_samples=m, labels=labels, core_sample_indices=core,
                                  n_clusters=n_clusters,
                                  timings={"table": table_s, "assign": assign_s, **info,
                                           "finished": time.perf_counter() - start})
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(eps=e, min_samples=m)
                yield res
            del built, levels
    finally:
        if bar is not None:
            bar.close()
