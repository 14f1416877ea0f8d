"""Sweep grid path: the border reaches, found in parallel beside the union-find.

For each non-core point and each cell holding a neighbour of it, its
"reach": the highest level of such a neighbour (a border point at level k
takes the lowest cluster among the cells of reach >= k).  O(points of the
near cells) per border point.  ``_share`` runs the sequential union-find on
a helper thread while the reaches fill the other threads.
"""

from __future__ import annotations

import itertools
import threading

import numba
import numpy as np
from numba import njit, prange

from ..._core.config import NUMBA_CACHE
from ..._core.thread_count import numba_threads
from ..grid_cpu import d2, neighbour_slots
from .grid_levels import gap2, span2


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
        if u < 0 or u == t or maxlev[u] <= lp or gap2(Xs, p, box_lo, box_hi, u) > eps2:
            continue
        c2 = cells[u]
        if span2(Xs, p, box_lo, box_hi, u) <= eps2:  # all of u within eps: its best point
            if at >= 0:
                out_r[at + cnt] = maxlev[u]
                out_c[at + cnt] = u
            cnt += 1
            continue
        for q in range(start[c2], start[c2 + 1]):
            lq = level[q]
            if lq <= lp:
                break
            if d2(Xs, p, q) <= eps2:
                if at >= 0:
                    out_r[at + cnt] = lq
                    out_c[at + cnt] = u
                cnt += 1
                break
    return cnt


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _border_cell(t, cells, start, level, K, radix, offsets, deltas, slot_of):
    """Points a..b of cell slot t (sorted by level) and the slots of its
    neighbour cells (``grid_cpu.neighbour_slots``).  When they are all core
    at every level (the last one's level >= K) there is nothing to reach:
    an empty range and an empty view of ``slot_of`` (no allocation)."""
    c = cells[t]
    a = start[c]
    b = start[c + 1]
    if level[b - 1] >= K:
        return a, a, slot_of[:0]
    return a, b, neighbour_slots(c, radix, offsets, deltas, slot_of)


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _reach_room(start, cells, slot_of, radix, offsets, deltas, level, maxlev, K, gap_test, Xs,
                box_lo, box_hi, eps2, hits):
    """Room for the reaching cells of each point: the cells of a higher max level
    (with ``gap_test``, only those that pass the box test too; with ``hits``,
    only those that hold a neighbour)."""
    n = level.shape[0]
    room = np.zeros(n + 1, dtype=np.int64)
    for t in prange(cells.shape[0]):
        a, b, nb = _border_cell(t, cells, start, level, K, radix, offsets, deltas, slot_of)
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
                    if not gap_test or gap2(Xs, p, box_lo, box_hi, u) <= eps2:
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
        a, b, nb = _border_cell(t, cells, start, level, K, radix, offsets, deltas, slot_of)
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


def _share(serial, prepare, task, n_tasks, n_threads=None):
    """Run ``serial()`` on a helper thread while this thread runs ``prepare()``, then the
    tasks ``task(i)``, i in 0..n_tasks-1, taken in turn by this thread, by the helper
    once ``serial`` returns, and by Numba's other threads (if more than two).

    ``serial`` is sequential Numba code that releases the GIL, ``task`` too;
    ``prepare`` may run parallel regions, on one thread fewer than Numba's
    count (the helper has one core).  Handing out small tasks lets the
    serial part end on a core of its own while the rest fill the others
    (docs/decisions/dbscan-sweep.md).  Each task runs once, O(n_tasks)
    hand-outs.
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


def border_reaches(g, serial):
    """The border reaches of ``g`` (``_Reach``), found beside ``serial()`` (``_share``)."""
    rc = _Reach(g, _REACH_PARTS_PER_THREAD * max(2, numba.get_num_threads()))
    _share(serial, rc.prepare, rc.fill, rc.n_parts)
    return rc.result()
