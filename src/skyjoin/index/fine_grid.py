"""The fine grid: cells of side a little under ``eps / sqrt(d)`` over the bounding box.

A cell's diagonal is then shorter than eps, so any two of its points are
within eps, up to rounding (the DBSCAN grid paths test each cell's bounding
box to be exact; the cell-graph formulation of Gunawan 2013 and of Wang, Gu
& Shun 2020).  Unlike the epsilon grid of :mod:`skyjoin.index.grid`, the
cells are numbered over the whole box (a dense grid, no ranks): the cell at
a given offset from cell c is ``c + delta``, and ``slot_of`` maps every key
to its non-empty cell.  So the grid is built only when the box holds at
most ``max(8 n, 2^22)`` cells (:func:`fine_grid_shape`), and, for a
single clustering, which has the sparse epsilon grid to fall back on, only
when its non-empty cells hold enough points (:func:`dense_grid_wins`).

The points are sorted by cell with the sort of every CPU grid
(:func:`skyjoin.index.grid.sort_cells`, a counting sort); only the key
differs (:func:`fine_cell_keys`).  On the GPU the DBSCAN grid path
computes the same keys in a CUDA kernel and sorts with
:func:`skyjoin.index.grid_gpu.sort_cells_gpu`, the sort of every GPU grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from numba import njit
import numpy as np

from .._core.config import NUMBA_CACHE
from .grid import linear_strides, sort_cells
from .grid_kernels import column_bounds, gather_rows

__all__ = ["FineGrid", "RowPattern", "build_fine_grid", "dense_grid_wins", "fine_cell_keys",
           "fine_grid_shape", "row_table_fits",
           "neighbour_offsets", "positive_offsets", "row_grid_shape", "row_pattern"]

#: cells a little smaller than eps / sqrt(d), so that a cell's box usually passes
#: the distance test
SIDE_FACTOR = 0.999


def fine_grid_shape(lo, hi, n, eps):
    """Cell side and cells per dimension (int64) of the fine grid over the box
    [lo, hi], or None when it would hold more than ``max(8 n, 2^22)`` cells."""
    side = eps / math.sqrt(len(lo)) * SIDE_FACTOR
    with np.errstate(over="ignore"):         # an overflowing span: no grid (None)
        radix = np.floor((hi - lo) / side).astype(np.float64) + 1
        total = float(np.prod(radix))
    if not np.isfinite(total) or total > max(8 * n, 1 << 22):
        return None
    return side, radix.astype(np.int64)


#: the fewest mean points per non-empty fine cell at which a single
#: clustering keeps the dense fine grid rather than the sparse epsilon grid
#: (measured: docs/decisions/dbscan-fit-path.md, "The sparse grid on the CPU")
DENSE_MIN_POINTS_PER_CELL = 8.0


def dense_grid_wins(n_points: int, n_cells: int) -> bool:
    """Whether a single Euclidean clustering on the CPU keeps the dense fine
    grid rather than the sparse epsilon grid: THE rule between the two.

    The dense grid wins where its non-empty cells hold at least
    ``DENSE_MIN_POINTS_PER_CELL`` points on average (``n_points /
    n_cells``).  Its gains come per cell (a close cell of min_samples
    points is all core without a distance, and two close cells are joined
    by one pair), and so does its cost, a neighbourhood of 25, 125 or 841
    fine cells in 2, 3 or 4 dimensions, where the sparse grid reads 3**d
    cells of side eps.  With fewer points a cell (uniform-ish data at a
    small eps) the sparse grid was faster in 2 to 4 dimensions and at
    min_samples 4 to 30; the box's cells per point, known before the
    keys, does not separate the cases (skewed data fills few of its
    cells).  ``n_cells`` is counted after the dense grid's counting pass
    (``fine_cell_keys``), before its sort: the rule is O(1), the count
    O(volume).
    """
    return n_points >= DENSE_MIN_POINTS_PER_CELL * max(1, n_cells)


#: the largest linear cell key of the sparse (row) grid: keys are int64
MAX_ROW_GRID_KEYS = 2.0 ** 62
#: the most cells along one dimension of the sparse grid: a cell coordinate
#: ``floor((x - lo) / side)`` is then off by at most 2**-12 of a cell, far
#: inside the pattern's margin (for d <= 4 the nearest offset that
#: ``neighbour_offsets`` leaves out is at least 11% farther than eps)
MAX_ROW_GRID_RADIX = 2.0 ** 40


def row_table_fits(rows: int, n: int) -> bool:
    """Whether a dense table of ``rows`` rows is kept for n points: at most
    ``max(2 n, 2^22)`` entries (4 bytes each).  O(1)."""
    return rows <= max(2 * n, 1 << 22)


def row_grid_shape(lo, hi, n, eps, row_table=True):
    """The fine grid over the box [lo, hi] kept sparse along one dimension:
    cell side, cells per dimension (int64) and the dimensions in key order
    (``korder``, the one with most cells last), or None.

    The cells are numbered with ``korder[-1]`` fastest, so that the cells of
    one *row* (the same coordinates in every other dimension) are consecutive
    keys; only the non-empty cells are stored, and a dense table of rows
    (``prod(radix[korder[:-1]])`` entries) finds a row's cells.  None when
    the keys would pass 2**62, a dimension would hold more than 2**40
    cells, or (``row_table``) the row table would not fit
    (``row_table_fits``).  O(d log d).
    """
    side = eps / math.sqrt(len(lo)) * SIDE_FACTOR
    with np.errstate(over="ignore"):         # an overflowing span: no grid (None)
        radix = np.floor((hi - lo) / side).astype(np.float64) + 1
        total = float(np.prod(radix))
    if (not np.isfinite(total) or total >= MAX_ROW_GRID_KEYS
            or float(radix.max()) > MAX_ROW_GRID_RADIX):
        return None
    korder = np.argsort(radix, kind="stable")
    if row_table and not row_table_fits(float(np.prod(radix[korder[:-1]])), n):
        return None
    return side, radix.astype(np.int64), korder.astype(np.int32)


@dataclass
class RowPattern:
    """The neighbour-cell offsets of the sparse fine grid, grouped by row.

    Row j of the pattern is the row at offset ``off[j]`` (d - 1 steps, in
    ``korder``'s first d - 1 dimensions) from a cell's row, and the cells
    of that row whose sparse coordinate lies ``lo[j]..hi[j]`` steps from the
    cell's.  ``positive_*`` is the same for the lexicographically positive
    offsets only (each unordered pair of cells once), and
    ``positive_adjacent[j]`` whether every step of ``positive_off[j]`` is at
    most one (the links' first phase).
    """

    off: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    positive_off: np.ndarray
    positive_lo: np.ndarray
    positive_hi: np.ndarray
    positive_adjacent: np.ndarray


def row_pattern(offsets, korder) -> RowPattern:
    """The :class:`RowPattern` of ``neighbour_offsets``' offsets (original
    dimension order) for the key order ``korder``.  For a fixed row offset
    the kept sparse steps form one interval, since the cells' gap grows with
    every step.  O(n_off d)."""
    o = np.asarray(offsets)[:, np.asarray(korder)]
    d = o.shape[1]
    spans: dict = {}
    for row in o.tolist():
        key, s = tuple(row[:-1]), row[-1]
        a, b = spans.get(key, (s, s))
        spans[key] = (min(a, s), max(b, s))
    keys = sorted(spans)
    pos = [(k, (spans[k][0] if any(k) else 1), spans[k][1]) for k in keys
           if k > (0,) * (d - 1) or (not any(k) and spans[k][1] >= 1)]

    def arrays(items):
        off = np.array([k for k, _, _ in items], dtype=np.int32).reshape(len(items), d - 1)
        lo = np.array([a for _, a, _ in items], dtype=np.int32)
        hi = np.array([b for _, _, b in items], dtype=np.int32)
        return np.ascontiguousarray(off), lo, hi

    # the adjacent rows first: a point's core count stops sooner
    near = sorted(keys, key=lambda k: max(map(abs, k), default=0) > 1)
    full = arrays([(k, spans[k][0], spans[k][1]) for k in near])
    positive = arrays(pos)
    adjacent = (np.abs(positive[0]) <= 1).all(axis=1).astype(np.uint8)
    return RowPattern(*full, *positive, adjacent)


@njit(cache=NUMBA_CACHE, nogil=True)
def fine_cell_keys(X, lo, side, radix):
    """Linear cell key of every point, ``floor((x_k - lo_k) / side)`` clamped into
    [0, radix_k), last dimension fastest, and the keys' histogram
    (``counts[v + 1]`` points have key v), counted in the same pass.  O(n d + volume)."""
    n, d = X.shape
    total = 1
    for k in range(d):
        total *= radix[k]
    key = np.empty(n, dtype=np.int64)
    counts = np.zeros(total + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for k in range(d):
            q = int(math.floor((X[i, k] - lo[k]) / side))
            if q < 0:
                q = 0
            elif q >= radix[k]:
                q = radix[k] - 1
            c = c * radix[k] + q
        key[i] = c
        counts[c + 1] += 1
    return key, counts


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


def neighbour_offsets(side, eps, radix):
    """The neighbour-cell offsets (adjacent ones first), how many are adjacent,
    and each offset's step in linear cell keys.  O((2 r + 1)^d), r = eps / side + 1."""
    offsets, n_adjacent = _offsets(len(radix), side, eps)
    return offsets, n_adjacent, np.ascontiguousarray(offsets @ linear_strides(radix))


def positive_offsets(offsets):
    """Indices of the lexicographically positive offsets (each unordered pair of cells once)."""
    d = offsets.shape[1]
    return np.flatnonzero([tuple(o) > (0,) * d for o in offsets.tolist()]).astype(np.int64)


@dataclass
class FineGrid:
    """The fine grid of a point set on the CPU.

    Attributes
    ----------
    side : float
        Cell side in every dimension.
    radix : ndarray of int64, shape (d,)
        Cells per dimension over the bounding box.
    perm : ndarray of int64, shape (n,)
        ``Xs[p] == X[perm[p]]``.
    Xs : ndarray of float64, shape (n, d)
        The points sorted by cell.
    start : ndarray of int64, shape (volume + 1,)
        Cell key c holds the sorted points ``start[c]:start[c + 1]``.
    cells : ndarray of int64, shape (m,)
        Sorted keys of the non-empty cells (their slots are their positions).
    slot_of : ndarray of int64, shape (volume + 1,)
        Slot of every cell key, -1 for an empty cell.
    offsets : ndarray of int64, shape (n_off, d)
        Offsets of the cells that can hold a neighbour, adjacent ones first.
    n_adjacent : int
    deltas : ndarray of int64, shape (n_off,)
        Step of each offset in linear cell keys.
    """

    side: float
    radix: np.ndarray
    perm: np.ndarray
    Xs: np.ndarray
    start: np.ndarray
    cells: np.ndarray
    slot_of: np.ndarray
    offsets: np.ndarray
    n_adjacent: int
    deltas: np.ndarray


def build_fine_grid(X, eps, sparse_fallback=False):
    """The :class:`FineGrid` of X (float64, n >= 1), or None when the grid over
    its bounding box would hold more than ``max(8 n, 2^22)`` cells, or, with
    ``sparse_fallback``, where the sparse epsilon grid wins
    (:func:`dense_grid_wins`, read after the counting pass).

    Parameters
    ----------
    X : ndarray of float64, shape (n, d)
        Validated, finite points, n >= 1.
    eps : float
    sparse_fallback : bool, default False
        The caller clusters on the sparse grid where this one declines (a
        single clustering); False keeps the dense grid wherever it fits
        (the sweep, which has no sparse path).

    Returns
    -------
    FineGrid or None

    Notes
    -----
    O(n d + volume): bounds, keys, counting sort, gather; declined by the
    rule: bounds, keys and one count over the cells.

    Examples
    --------
    >>> import numpy as np
    >>> g = build_fine_grid(np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]]), eps=1.0)
    >>> g.cells.size, g.perm.tolist()
    (2, [0, 1, 2])
    """
    n = X.shape[0]
    lo, hi = column_bounds(X, X.shape[1])
    shape = fine_grid_shape(lo, hi, n, eps)
    if shape is None:
        return None
    side, radix = shape
    key, counts = fine_cell_keys(X, lo, side, radix)
    if sparse_fallback and not dense_grid_wins(n, int(np.count_nonzero(counts))):
        return None
    s = sort_cells(key, int(np.prod(radix)), dense=True, order_dtype=np.int64, empty_slot=True,
                   counts=counts)
    del key
    Xs = gather_rows(X, s.order)
    offsets, n_adjacent, deltas = neighbour_offsets(side, eps, radix)
    return FineGrid(side, radix, s.order, Xs, s.point_start, s.cell_ids, s.table, offsets,
                    n_adjacent, deltas)
