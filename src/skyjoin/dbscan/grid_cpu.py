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
``skyjoin.dbscan.union_find``.  The grid is dense (an array over the bounding
box of the cells), so it is used only when that box holds at most
``max(8 n, 2^22)`` cells and d <= 4; ``grid_dbscan`` returns None otherwise
and the caller takes the join path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE
from ..index.grid_kernels import column_bounds, gather_rows
from .union_find import find, number_clusters_by_order, roots, union

__all__ = ["grid_dbscan", "MAX_DIMS"]

MAX_DIMS = 4
_SIDE_FACTOR = 0.999  # cells a little smaller than eps / sqrt(d): dense cells pass the box test


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def d2(X, a, b):
    """Squared distance of rows a and b, summed over k in order (the join's test)."""
    s = 0.0
    for k in range(X.shape[1]):
        t = X[a, k] - X[b, k]
        s += t * t
    return s


@njit(cache=NUMBA_CACHE, nogil=True)
def _bin(X, lo, side, radix):
    """Linear cell id of every point and the count of every cell."""
    n, d = X.shape
    total = 1
    for k in range(d):
        total *= radix[k]
    cell = np.empty(n, dtype=np.int64)
    count = np.zeros(total + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for k in range(d):
            q = int(math.floor((X[i, k] - lo[k]) / side))
            if q < 0:
                q = 0
            elif q >= radix[k]:
                q = radix[k] - 1
            c = c * radix[k] + q
        cell[i] = c
        count[c + 1] += 1
    return cell, count


@njit(cache=NUMBA_CACHE, nogil=True)
def _scatter(cell, start):
    """Counting sort of the points by cell: perm[p] is the row of sorted point p.

    Not ``index.grid_kernels.counting_sort``: that one counts the cells itself
    and builds a lower-bound table over every cell id (two more O(volume)
    passes); here ``_bin`` has counted the cells while binning.  O(n).
    """
    n = cell.shape[0]
    pos = start[:-1].copy()
    perm = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = cell[i]
        perm[pos[c]] = i
        pos[c] += 1
    return perm


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _cell_boxes(Xs, start, cells, eps2):
    """Bounding box of each non-empty cell, and whether all its pairs pass the test.

    A cell is "close" when its box diagonal passes the distance test:
    rounding is monotone, so every pair of its points passes it too.
    """
    m = cells.shape[0]
    d = Xs.shape[1]
    close = np.zeros(m, dtype=np.uint8)
    box_lo = np.empty((m, d), dtype=Xs.dtype)
    box_hi = np.empty((m, d), dtype=Xs.dtype)
    for t in prange(m):
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
    return close, box_lo, box_hi


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


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def core_flags(Xs, start, cells, slot_of, close, box_lo, box_hi, radix, offsets, deltas, eps2,
               min_samples):
    """Core flag of every (sorted) point: dense cells at once, others by counting (§2.1)."""
    n = Xs.shape[0]
    m = cells.shape[0]
    core = np.zeros(n, dtype=np.uint8)
    n_off = offsets.shape[0]
    for t in prange(m):
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
    return core


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
        if close[t]:
            for p in range(first_core[t] + 1, b):
                if core[p]:
                    union(parent, first_core[t], p)
        else:
            for p in range(a, b):
                if not core[p]:
                    continue
                for q in range(p + 1, b):
                    if core[q] and find(parent, p) != find(parent, q) \
                            and d2(Xs, p, q) <= eps2:
                        union(parent, p, q)
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
        if both_close:
            # one set per cell: one pair within eps joins them
            found = False
            for p in range(a, b):
                if not core[p]:
                    continue
                for q in range(a2, b2):
                    if core[q] and d2(Xs, p, q) <= eps2:
                        union(parent, p, q)
                        found = True
                        break
                if found:
                    break
        else:
            for p in range(a, b):
                if not core[p]:
                    continue
                for q in range(a2, b2):
                    if core[q] and find(parent, p) != find(parent, q) \
                            and d2(Xs, p, q) <= eps2:
                        union(parent, p, q)


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _positive(offsets, o):
    """Whether offset o is lexicographically > 0 (each cell pair once)."""
    for k in range(offsets.shape[1]):
        if offsets[o, k] > 0:
            return True
        if offsets[o, k] < 0:
            return False
    return False


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def border_labels(Xs, start, cells, slot_of, close, box_lo, box_hi, core, labels, radix, offsets,
                  deltas, eps2):
    """Each non-core point takes the lowest label among its core neighbours (in place)."""
    m = cells.shape[0]
    n_off = offsets.shape[0]
    for t in prange(m):
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


def _offsets(d, side, eps):
    """Cell offsets whose cells can hold a point within eps of a point of the centre cell."""
    r = int(math.floor(1 + eps / side))
    grids = np.meshgrid(*[np.arange(-r, r + 1)] * d, indexing="ij")
    offs = np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)
    gap = np.maximum(np.abs(offs) - 1, 0) * side           # smallest distance per axis
    keep = (gap ** 2).sum(axis=1) <= eps * eps * (1 + 1e-6)  # generous: extra cells cost time only
    offs = offs[keep]
    adjacent = (np.abs(offs) <= 1).all(axis=1)
    offs = np.concatenate([offs[adjacent], offs[~adjacent]])
    return np.ascontiguousarray(offs), int(adjacent.sum())


def grid_shape(lo, hi, n, eps):
    """Cell side and cells per dimension (int64) of the fine grid over the box
    [lo, hi], or None when it would hold more than ``max(8 n, 2^22)`` cells."""
    side = eps / math.sqrt(len(lo)) * _SIDE_FACTOR
    with np.errstate(over="ignore"):         # an overflowing span: no grid (None)
        radix = np.floor((hi - lo) / side).astype(np.float64) + 1
        total = float(np.prod(radix))
    if not np.isfinite(total) or total > max(8 * n, 1 << 22):
        return None
    return side, radix.astype(np.int64)


def offset_table(side, eps, radix):
    """The neighbour-cell offsets (adjacent ones first), how many are adjacent,
    and each offset's step in linear cell ids."""
    d = len(radix)
    offsets, n_adjacent = _offsets(d, side, eps)
    strides = np.ones(d, dtype=np.int64)
    for k in range(d - 2, -1, -1):
        strides[k] = strides[k + 1] * radix[k + 1]
    return offsets, n_adjacent, np.ascontiguousarray(offsets @ strides)


def positive_offsets(offsets):
    """Indices of the lexicographically positive offsets (each unordered pair of cells once)."""
    d = offsets.shape[1]
    return np.flatnonzero([tuple(o) > (0,) * d for o in offsets.tolist()]).astype(np.int64)


@dataclass
class FineGrid:
    """The fine grid of a point set on the CPU: points sorted by cell (``Xs``,
    ``perm[p]`` the caller's row of sorted point p), non-empty cells and
    their bounding boxes, and the neighbour-cell offsets."""

    side: float
    radix: np.ndarray
    eps2: float
    perm: np.ndarray
    Xs: np.ndarray
    start: np.ndarray
    cells: np.ndarray
    slot_of: np.ndarray
    close: np.ndarray
    box_lo: np.ndarray
    box_hi: np.ndarray
    offsets: np.ndarray
    n_adjacent: int
    deltas: np.ndarray


def fine_grid(X, eps):
    """The :class:`FineGrid` of X (float64, n >= 1, d <= MAX_DIMS), or None
    when the grid over its bounding box would be too large."""
    n = X.shape[0]
    lo, hi = column_bounds(X, X.shape[1])
    shape = grid_shape(lo, hi, n, eps)
    if shape is None:
        return None
    side, radix = shape
    eps2 = float(np.float64(eps) * np.float64(eps))
    cell, count = _bin(X, lo, side, radix)
    start = np.cumsum(count)
    perm = _scatter(cell, start)
    Xs = gather_rows(X, perm)
    cells = np.flatnonzero(count[1:]).astype(np.int64)
    slot_of = np.full(len(count) - 1, -1, dtype=np.int64)
    slot_of[cells] = np.arange(len(cells))
    close, box_lo, box_hi = _cell_boxes(Xs, start, cells, eps2)
    offsets, n_adjacent, deltas = offset_table(side, eps, radix)
    return FineGrid(side, radix, eps2, perm, Xs, start, cells, slot_of, close, box_lo, box_hi,
                    offsets, n_adjacent, deltas)


def grid_dbscan(X, eps, min_samples):
    """Exact DBSCAN (scikit-learn's labels) on a fine grid, or None when the grid does not fit.

    Parameters
    ----------
    X : ndarray of float64, shape (n, d)
        Validated, finite points.
    eps : float
    min_samples : int

    Returns
    -------
    (core_sample_indices, labels) or None
        None when d > MAX_DIMS or the dense grid would be too large (the
        caller then uses the join path).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0], [9.0]])
    >>> core, labels = grid_dbscan(X, 1.0, 3)
    >>> core.tolist(), labels.tolist()
    ([1], [0, 0, 0, -1])
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    if n == 0 or d > MAX_DIMS:
        return None if n else (np.zeros(0, np.int64), np.zeros(0, np.intp))
    g = fine_grid(X, eps)
    if g is None:
        return None
    Xs, start, cells, slot_of, close, box_lo, box_hi, radix, offsets, deltas, eps2 = (
        g.Xs, g.start, g.cells, g.slot_of, g.close, g.box_lo, g.box_hi, g.radix, g.offsets,
        g.deltas, g.eps2)
    perm, n_adjacent = g.perm, g.n_adjacent
    core = core_flags(Xs, start, cells, slot_of, close, box_lo, box_hi, radix, offsets, deltas,
                      eps2, min_samples)
    parent = link_cells(Xs, start, cells, slot_of, close, box_lo, box_hi, core, radix, offsets,
                        deltas, n_adjacent, eps2)
    root = roots(parent)
    labels = number_clusters_by_order(root, core, perm)
    border_labels(Xs, start, cells, slot_of, close, box_lo, box_hi, core, labels, radix, offsets,
                  deltas, eps2)
    core_out = np.empty(n, dtype=np.uint8)
    core_out[perm] = core
    labels_out = np.empty(n, dtype=np.intp)
    labels_out[perm] = labels
    return np.flatnonzero(core_out), labels_out
