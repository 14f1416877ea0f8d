"""Single-run Euclidean DBSCAN on a fine grid, without a neighbour table (CPU).

HYBRID-DBSCAN materialises T, every pair within eps, to write and read back
(4 bytes a pair) for one clustering.  A single clustering needs much less than T: whether each point
is core, one core-core link per pair of touching groups, and each border
point's lowest cluster.  This module gets exactly those, on a grid of cells
of side ``eps / sqrt(d)`` (the cell-graph formulation of Gunawan 2013 and of
Wang, Gu & Shun 2020, implemented here from the description):

* ``dense cells``: all points of a cell whose bounding box passes the
  distance test are pairwise within eps (rounding is monotone, so the test on
  the box's diagonal bounds every pair's test), so a cell holding at least
  min_samples points makes them all core, and its core points form one
  group, without a single distance computation;
* ``core_flags``: other points count neighbours in the cells that can hold
  one, stopping at min_samples;
* ``link_cells``: union-find over the points; inside a cell its core points
  are chained; between two cells, core pairs are searched until the first
  pair within eps (nothing to do when both are already in one set);
* ``border_labels``: a non-core point takes the lowest cluster label among
  the cells whose core points reach it, skipping cells whose label cannot
  lower the current one.

Every distance decision is the join's test, ``sum_k (x_k - y_k)^2 <= eps^2``
in float64, so the labels equal scikit-learn's, numbered as in
``skyjoin.cluster.union_find``.  The grid is dense (an array over the bounding
box of the cells), so it is used only when that box holds at most
``max(8 n, 2^22)`` cells and d <= 4; ``grid_dbscan`` returns None otherwise
and the caller takes the next path.  A single clustering, which has the
sparse grid next (``grid_sparse``), also declines where the non-empty cells
hold fewer than ``index.fine_grid.DENSE_MIN_POINTS_PER_CELL`` points on
average (``index.fine_grid.dense_grid_wins``): there the neighbourhoods of
the fine cells (25, 125, 841 cells in 2, 3, 4 dimensions) cost more than
its close cells save.  The grid itself (cell keys, the sort by cell, the
neighbour-cell offsets) is :mod:`skyjoin.index.fine_grid`, the one CPU grid
builder; this module adds the cell boxes and the DBSCAN passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .._core.config import NUMBA_CACHE
from ..index.fine_grid import FineGrid, build_fine_grid
from ..simjoin.schedule import run_blocks
from .union_find import find, number_clusters_by_order, roots, union

__all__ = ["grid_dbscan", "MAX_DIMS"]

MAX_DIMS = 4


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def d2(X, a, b):
    """Squared distance of rows a and b, summed over k in order (the join's test)."""
    s = 0.0
    for k in range(X.shape[1]):
        t = X[a, k] - X[b, k]
        s += t * t
    return s


@njit(cache=NUMBA_CACHE, nogil=True)
def _cell_boxes(Xs, start, cells, eps2, close, box_lo, box_hi, t0, t1):
    """Bounding box of the non-empty cells [t0, t1), and whether all its pairs pass the test.

    A cell is "close" when its box diagonal passes the distance test:
    rounding is monotone, so every pair of its points passes it too.
    """
    d = Xs.shape[1]
    for t in range(t0, t1):
        c = cells[t]
        a, b = start[c], start[c + 1]
        s = 0.0
        for k in range(d):
            lo = Xs[a, k]
            hi = Xs[a, k]
            for p in range(a + 1, b):
                v = Xs[p, k]
                if v < lo:
                    lo = v
                if v > hi:
                    hi = v
            box_lo[t, k] = lo
            box_hi[t, k] = hi
            w = hi - lo
            s += w * w
        close[t] = 1 if s <= eps2 else 0


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def boxes_apart(box_lo, box_hi, t, u, eps2):
    """Whether no point of cell slot t can be within eps of one of slot u (box gap test)."""
    s = 0.0
    for k in range(box_lo.shape[1]):
        g = box_lo[u, k] - box_hi[t, k]
        g2 = box_lo[t, k] - box_hi[u, k]
        if g2 > g:
            g = g2
        if g > 0.0:
            s += g * g
    return s > eps2


@njit(cache=NUMBA_CACHE, nogil=True)
def neighbour_slots(c, radix, offsets, deltas, slot_of):
    """Slots of the non-empty cells at each offset from cell c (-1: outside or empty)."""
    d = radix.shape[0]
    q = np.empty(d, dtype=np.int64)
    rem = c
    for k in range(d - 1, -1, -1):
        q[k] = rem % radix[k]
        rem //= radix[k]
    n_off = offsets.shape[0]
    out = np.empty(n_off, dtype=np.int64)
    for o in range(n_off):
        inside = True
        for k in range(d):
            q2 = q[k] + offsets[o, k]
            if q2 < 0 or q2 >= radix[k]:
                inside = False
                break
        out[o] = slot_of[c + deltas[o]] if inside else -1
    return out


@njit(cache=NUMBA_CACHE, nogil=True)
def core_flags(Xs, start, cells, slot_of, close, box_lo, box_hi, radix, offsets, deltas, eps2,
               min_samples, core, t0, t1):
    """Core flag of the (sorted) points of cells [t0, t1) into ``core`` (zeros
    on entry): dense cells at once, others by counting (§2.1)."""
    n_off = offsets.shape[0]
    for t in range(t0, t1):
        c = cells[t]
        a, b = start[c], start[c + 1]
        size = b - a
        if close[t] and size >= min_samples:
            for p in range(a, b):
                core[p] = 1
            continue
        nb = neighbour_slots(c, radix, offsets, deltas, slot_of)
        for p in range(a, b):
            if close[t]:
                cnt = size
            else:
                cnt = 0
                for q in range(a, b):
                    if d2(Xs, p, q) <= eps2:
                        cnt += 1
            if cnt >= min_samples:
                core[p] = 1
                continue
            for o in range(n_off):
                t2 = nb[o]
                if t2 < 0 or t2 == t or boxes_apart(box_lo, box_hi, t, t2, eps2):
                    continue
                c2 = cells[t2]
                for q in range(start[c2], start[c2 + 1]):
                    if d2(Xs, p, q) <= eps2:
                        cnt += 1
                if cnt >= min_samples:
                    core[p] = 1
                    break


@njit(cache=NUMBA_CACHE, nogil=True)
def link_cells(Xs, start, cells, slot_of, close, box_lo, box_hi, core, radix, offsets, deltas,
               n_adjacent, eps2):
    """Union-find over the sorted points: core points within eps end in one set."""
    n = Xs.shape[0]
    m = cells.shape[0]
    parent = np.full(n, -1, dtype=np.int64)
    first_core = np.full(m, -1, dtype=np.int64)
    for p in range(n):
        if core[p]:
            parent[p] = p
    # inside each cell
    for t in range(m):
        c = cells[t]
        a, b = start[c], start[c + 1]
        for p in range(a, b):
            if core[p]:
                first_core[t] = p
                break
        if first_core[t] < 0:
            continue
        # a close cell: its first core point joins every other one, no test
        # (one loop for both cases: union and the test are compiled once)
        close_t = close[t] != 0
        for p in range(first_core[t], b):
            if not core[p]:
                continue
            for q in range(p + 1, b):
                if core[q] and (close_t or (find(parent, p) != find(parent, q)
                                            and d2(Xs, p, q) <= eps2)):
                    union(parent, p, q)
            if close_t:
                break
    # between cells: offsets listed once per unordered pair of cells (o > 0);
    # the adjacent cells first, over the whole grid, so that by the time the
    # farther offsets are tried most of their cell pairs are already joined
    n_off = offsets.shape[0]
    for sweep in range(2):
        o_lo = 0 if sweep == 0 else n_adjacent
        o_hi = n_adjacent if sweep == 0 else n_off
        for t in range(m):
            if first_core[t] < 0:
                continue
            _link_cell(Xs, start, cells, slot_of, close, box_lo, box_hi, core, radix, offsets,
                       deltas, eps2, parent, first_core, t, o_lo, o_hi)
    return parent


@njit(cache=NUMBA_CACHE, nogil=True)
def _link_cell(Xs, start, cells, slot_of, close, box_lo, box_hi, core, radix, offsets, deltas,
               eps2, parent, first_core, t, o_lo, o_hi):
    """Join the core points of cell slot t with those of its cells at offsets [o_lo, o_hi)."""
    c = cells[t]
    a, b = start[c], start[c + 1]
    nb = neighbour_slots(c, radix, offsets, deltas, slot_of)
    for o in range(o_lo, o_hi):
        t2 = nb[o]
        if t2 < 0 or first_core[t2] < 0 or not _positive(offsets, o):
            continue
        both_close = close[t] and close[t2]
        if both_close and find(parent, first_core[t]) == find(parent, first_core[t2]):
            continue
        if boxes_apart(box_lo, box_hi, t, t2, eps2):
            continue
        c2 = cells[t2]
        a2, b2 = start[c2], start[c2 + 1]
        # both close: one set per cell, so one pair within eps joins them
        # (one loop for both cases: the distance test is compiled once)
        for p in range(a, b):
            if not core[p]:
                continue
            joined = False
            for q in range(a2, b2):
                if core[q] and (both_close or find(parent, p) != find(parent, q)) \
                        and d2(Xs, p, q) <= eps2:
                    union(parent, p, q)
                    if both_close:
                        joined = True
                        break
            if joined:
                break


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _positive(offsets, o):
    """Whether offset o is lexicographically > 0 (each cell pair once)."""
    for k in range(offsets.shape[1]):
        if offsets[o, k] > 0:
            return True
        if offsets[o, k] < 0:
            return False
    return False


@njit(cache=NUMBA_CACHE, nogil=True)
def border_labels(Xs, start, cells, slot_of, close, box_lo, box_hi, core, labels, radix, offsets,
                  deltas, eps2, t0, t1):
    """Each non-core point of cells [t0, t1) takes the lowest label among its
    core neighbours (in place)."""
    n_off = offsets.shape[0]
    for t in range(t0, t1):
        c = cells[t]
        a, b = start[c], start[c + 1]
        all_core = True
        for p in range(a, b):
            if not core[p]:
                all_core = False
                break
        if all_core:
            continue
        nb = neighbour_slots(c, radix, offsets, deltas, slot_of)
        for p in range(a, b):
            if core[p]:
                continue
            best = -1
            for o in range(n_off + 1):
                if o == n_off:
                    t2 = np.int64(t)
                else:
                    t2 = nb[o]
                    if t2 < 0 or t2 == t:
                        continue
                if boxes_apart(box_lo, box_hi, t, t2, eps2):
                    continue
                c2 = cells[t2]
                for q in range(start[c2], start[c2 + 1]):
                    if not core[q]:
                        continue
                    lab = labels[q]
                    if best >= 0 and lab >= best:
                        if close[t2]:
                            break  # one label per close cell: nothing lower here
                        continue
                    if d2(Xs, p, q) <= eps2:
                        best = lab
                        if close[t2]:
                            break
            labels[p] = best


@dataclass
class BoxedGrid(FineGrid):
    """The fine grid (``skyjoin.index.fine_grid``) with what DBSCAN adds: each
    non-empty cell's bounding box, and whether all its pairs pass the test
    (``close``), for the squared radius ``eps2``; ``weight``, the
    cumulative point counts over the non-empty cells (length cells + 1,
    the work weights of ``join.schedule.run_blocks``)."""

    eps2: float
    close: np.ndarray
    box_lo: np.ndarray
    box_hi: np.ndarray
    weight: np.ndarray


def fine_grid(X, eps, sparse_fallback=False):
    """The :class:`BoxedGrid` of X (float64, n >= 1, d <= MAX_DIMS), or None
    when the grid over its bounding box would be too large or, with
    ``sparse_fallback``, the sparse grid wins
    (``index.fine_grid.dense_grid_wins``).  O(n d + volume)."""
    g = build_fine_grid(X, eps, sparse_fallback)
    if g is None:
        return None
    eps2 = float(np.float64(eps) * np.float64(eps))
    m, d = g.cells.shape[0], g.Xs.shape[1]
    close = np.zeros(m, dtype=np.uint8)
    box_lo = np.empty((m, d), dtype=g.Xs.dtype)
    box_hi = np.empty((m, d), dtype=g.Xs.dtype)
    weight = np.empty(m + 1, dtype=np.int64)
    weight[:m] = g.start[g.cells]
    weight[m] = g.Xs.shape[0]
    run_blocks(_cell_boxes, (g.Xs, g.start, g.cells, eps2, close, box_lo, box_hi), weight)
    return BoxedGrid(**vars(g), eps2=eps2, close=close, box_lo=box_lo, box_hi=box_hi,
                     weight=weight)


def grid_dbscan(X, eps, min_samples, *, sparse_fallback=False):
    """Exact DBSCAN (scikit-learn's labels) on a fine grid, or None when the
    grid does not fit or (``sparse_fallback``) the sparse grid wins.

    Parameters
    ----------
    X : ndarray of float64, shape (n, d)
        Validated, finite points.
    eps : float
    min_samples : int
    sparse_fallback : bool, default False
        The caller runs ``grid_sparse.sparse_grid_dbscan`` where this grid
        declines: decline where its non-empty cells hold few points
        (``index.fine_grid.dense_grid_wins``, after the counting pass).

    Returns
    -------
    (core_sample_indices, labels) or None
        None when d > MAX_DIMS, the dense grid would be too large, or
        (``sparse_fallback``) the sparse grid wins; the caller then takes
        the next path of its plan.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.0, 0.5], [0.5, 0.0], [0.4, 0.4], [5.0, 5.0]])
    >>> core, labels = grid_dbscan(X, 0.6, 3)
    >>> core.tolist(), labels.tolist()
    ([0, 1, 2, 3], [0, 0, 0, 0, -1])
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    if n == 0 or d > MAX_DIMS:
        return None if n else (np.zeros(0, np.int64), np.zeros(0, np.intp))
    g = fine_grid(X, eps, sparse_fallback)
    if g is None:
        return None
    Xs, start, cells, slot_of, close, box_lo, box_hi, radix, offsets, deltas, eps2 = (
        g.Xs, g.start, g.cells, g.slot_of, g.close, g.box_lo, g.box_hi, g.radix, g.offsets,
        g.deltas, g.eps2)
    perm, n_adjacent = g.perm, g.n_adjacent
    weight = g.weight
    core = np.zeros(n, dtype=np.uint8)
    run_blocks(core_flags, (Xs, start, cells, slot_of, close, box_lo, box_hi, radix, offsets,
                            deltas, eps2, min_samples, core), weight)
    parent = link_cells(Xs, start, cells, slot_of, close, box_lo, box_hi, core, radix, offsets,
                        deltas, n_adjacent, eps2)
    root = roots(parent)
    labels = number_clusters_by_order(root, core, perm)
    run_blocks(border_labels, (Xs, start, cells, slot_of, close, box_lo, box_hi, core, labels,
                               radix, offsets, deltas, eps2), weight)
    core_out = np.empty(n, dtype=np.uint8)
    core_out[perm] = core
    labels_out = np.empty(n, dtype=np.intp)
    labels_out[perm] = labels
    return np.flatnonzero(core_out), labels_out
