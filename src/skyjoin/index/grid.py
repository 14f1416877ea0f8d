"""The epsilon grid of non-empty cells (self-join paper, Gowanlock & Karsin 2018, §IV).

Points are binned into cells whose side is (a hair more than) eps in each
of the first ``k`` dimensions, so that every neighbour of a point lies in
its own cell or an adjacent one (§IV-B).  Only non-empty cells are stored
(§IV-C):

* ``points``      the points reordered by cell (the paper keeps a lookup
                  array A; storing the reordered points makes the candidates
                  of a cell contiguous, so loads are sequential);
* ``order``       original row id of each reordered point (the paper's A);
* ``cell_ids``    sorted linear ids of the non-empty cells (the paper's B);
* ``cell_start``  cell c holds reordered points [cell_start[c], cell_start[c+1])
                  (the paper's G);
* ``coords``      per-dimension coordinate values that are occupied (the
                  paper's masks M_j), see below.

Linear ids never wrap around.  Each indexed dimension j is first binned to
an integer coordinate ``c_j = floor((x_j - lo_j) / side_j)``.  The linear id
is then built not from ``c_j`` itself but from its *rank* among the occupied
coordinates of that dimension (``coords[j]``, the mask M_j).  Ranks keep
adjacency (coordinates c and c + 1 that are both occupied have consecutive
ranks) and bound the radix of every dimension by the number of distinct
occupied coordinates, so a far outlier costs one extra rank, not 10^15
empty cells.  If the product of the radices still does not fit in 63 bits,
fewer dimensions are indexed (the remaining ones are still compared exactly
by the distance test).

Which dimensions: the first ``k = min(d, 6)`` by default.  The number of
adjacent cells grows as 3^k; beyond six indexed dimensions a cell has over
2,000 neighbours to look up, most of them empty, and the extra pruning is
rarely worth it for the low-dimensional data this library targets (both
papers index all n <= 6 dimensions).  ``index_dims`` overrides the default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.thread_count import with_cpu_threads
from .._core.unique import sorted_unique

__all__ = ["Grid", "build_grid", "cell_sides", "CellOrder", "sort_cells", "linear_strides",
           "DEFAULT_INDEX_DIMS", "MAX_INDEX_DIMS"]

DEFAULT_INDEX_DIMS = 6
#: from this many keys on, a sparse grid's sort is the radix sort of the host
#: threads (``radix_sort``); below, NumPy's stable argsort (the same order)
RADIX_MIN_KEYS = 1 << 16
MAX_INDEX_DIMS = 8
_U64 = np.finfo(np.float64).eps / 2  # unit roundoff of float64


def cell_sides(lo, hi, eps: float, d: int, precision: str = "float64") -> np.ndarray:
    """Side of the grid cells in each dimension, a hair more than eps.

    The distance test is evaluated in the working precision, so a pair that
    passes it may be up to a few ulps farther apart than eps in some
    coordinate; and the cell coordinate ``floor((x - lo) / side)`` is itself
    rounded.  The side is enlarged just enough that two points which pass the
    test always land in the same or adjacent cells:

    * a pair passing ``fl(sum_k fl(fl(x_k - y_k)^2)) <= fl(eps^2)`` in a
      precision of unit roundoff u has |x_k - y_k| <= eps (1 + (d + 5) u) in
      every coordinate (each rounding is at most a factor 1 + u; the rounded
      sum of non-negative terms is at least its largest term times
      (1 - u)^(d - 1)); we use the factor 1 + 4 (d + 5) u;
    * ``v(x) = fl(fl(x - lo) / s)`` differs from (x - lo) / s by at most
      2.01 u64 (x - lo) / s, so two coordinates at most ``eps'`` apart have
      v values less than 1 apart once s > eps' + 4.02 u64 (hi - lo); we add
      8 u64 (hi - lo).

    A dimension whose span would need more than 2^61 cells gets wider cells
    (span / 2^61): any side at least the bound above is correct.

    Parameters
    ----------
    lo, hi : array_like of float, shape (k,)
        Bounds of all points (queries and data) in the indexed dimensions.
    eps : float
        The join radius.
    d : int
        Total number of dimensions summed by the distance test.
    precision : {"float64", "float32"}

    Returns
    -------
    ndarray of float64, shape (k,)
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    u_w = float(np.finfo(np.float32 if precision == "float32" else np.float64).eps) / 2
    with np.errstate(over="ignore"):
        span = np.maximum(hi - lo, 0.0)
        side = eps * (1.0 + 4.0 * (d + 5) * u_w) + 8.0 * _U64 * span
        side = side * (1.0 + 4.0 * _U64)
    side = np.maximum(side, span / float(2**61))
    if not (np.isfinite(span).all() and np.isfinite(side).all()):
        # a cell coordinate would be inf or NaN, and index out of bounds
        raise ValueError(
            f"the data's span {span.tolist()} or cell side {side.tolist()} (eps={eps!r}) "
            "overflows float64; the operators bring such data into range "
            "(skyjoin._core.conditioning) before building a grid")
    return side


@dataclass
class Grid:
    """An epsilon grid of non-empty cells (see the module docstring).

    Attributes
    ----------
    points : ndarray, shape (n, d), or None
        The points reordered by cell, in the working dtype (None once a
        user of the grid has dropped them, e.g. the CPU join's filling
        pass, which reads the caller's array instead).
    order : ndarray of int32 or int64, shape (n,)
        ``points[r] == X[order[r]]`` (the paper's lookup array A).
    cell_start : ndarray of int64, shape (n_cells + 1,)
        Cell c holds reordered points ``cell_start[c]:cell_start[c + 1]``.
    cell_ids : ndarray of int64, shape (n_cells,)
        Sorted linear ids (in rank space) of the non-empty cells (array B).
    coords : ndarray of int64
        Occupied cell coordinates of every indexed dimension, concatenated:
        dimension j holds ``coords[coord_off[j]:coord_off[j + 1]]``, sorted
        (the paper's masks M_j).  The rank of a coordinate is its position.
    coord_off : ndarray of int64, shape (k + 1,)
    radix : ndarray of int64, shape (k,)
        Number of occupied coordinates per indexed dimension.
    stride : ndarray of int64, shape (k,)
        Linear id = sum_j rank_j * stride[j] (last dimension fastest).
    lower_bound : ndarray of int64
        When the rank space is small (dense), ``lower_bound[v]`` is the index
        of the first cell whose id is >= v (length volume + 1); else empty,
        and cells are found by binary search in ``cell_ids``.
    lo, side : ndarray of float64, shape (k,)
        Cell coordinate of x in dimension j: ``floor((x_j - lo[j]) / side[j])``.
    slack : ndarray of float64, shape (k,)
        Bound, in cells, on the rounding error of that coordinate (used to
        keep distance-to-cell pruning conservative).
    eps : float
    k : int
        Number of indexed dimensions (may be fewer than asked if the linear
        id would not fit in 63 bits).
    """

    points: np.ndarray
    order: np.ndarray
    cell_start: np.ndarray
    cell_ids: np.ndarray
    coords: np.ndarray
    coord_off: np.ndarray
    radix: np.ndarray
    stride: np.ndarray
    lower_bound: np.ndarray
    lo: np.ndarray
    side: np.ndarray
    slack: np.ndarray
    eps: float
    k: int

    @property
    def n_points(self) -> int:
        return self.order.shape[0]

    @property
    def n_cells(self) -> int:
        return self.cell_ids.shape[0]

    @property
    def dense(self) -> bool:
        return self.lower_bound.shape[0] > 0

    def point_lower_bound(self) -> np.ndarray:
        """For a dense grid, ``cell_start[lower_bound]``: the first reordered
        point of the first cell whose id is >= v, for v in [0, volume]
        (one table load per row lookup); empty otherwise.  Computed once."""
        plb = self.__dict__.get("_point_lb")
        if plb is None:
            plb = self.cell_start[self.lower_bound] if self.dense else np.zeros(0, np.int64)
            self.__dict__["_point_lb"] = plb
        return plb

    def mask(self, j: int) -> np.ndarray:
        """Occupied cell coordinates of indexed dimension j (the mask M_j)."""
        return self.coords[self.coord_off[j]:self.coord_off[j + 1]]

    def cell_sizes(self) -> np.ndarray:
        """Number of points in each non-empty cell."""
        return np.diff(self.cell_start)

    def nbytes(self) -> int:
        """Memory held by the grid's arrays."""
        return sum(a.nbytes for a in (self.points, self.order, self.cell_start, self.cell_ids,
                                      self.coords, self.coord_off, self.lower_bound)
                   if a is not None)


@dataclass
class CellOrder:
    """Points sorted by cell key: the one sort behind every CPU grid.

    Attributes
    ----------
    order : ndarray of int32 or int64, shape (n,)
        Row of each sorted point (stable: equal keys keep the row order).
    cell_ids : ndarray of int64, shape (n_cells,)
        Sorted keys of the non-empty cells.
    cell_start : ndarray of int64, shape (n_cells + 1,)
        Cell c holds the sorted points ``cell_start[c]:cell_start[c + 1]``.
    point_start : ndarray of int64, shape (volume + 1,), or empty
        Dense sort only: key v holds ``point_start[v]:point_start[v + 1]``.
    table : ndarray of int64, shape (volume + 1,), or empty
        Dense sort only: per key, the first non-empty cell whose key is >= v
        (lower bound), or with ``empty_slot`` -1 for an empty key (slot).
    """

    order: np.ndarray
    cell_ids: np.ndarray
    cell_start: np.ndarray
    point_start: np.ndarray
    table: np.ndarray


def sort_cells(key, volume: int, dense: bool, order_dtype=None,
               empty_slot: bool = False, counts=None) -> CellOrder:
    """Sort the points by their cell key (int64 in [0, volume)) and find the non-empty cells.

    The grids differ only in their key (the epsilon grid: ranks of occupied
    coordinates, ``build_grid``; the fine grid: cells of a dense box,
    ``skyjoin.index.fine_grid``); this sort serves both.  The caller then
    gathers the points (``grid_kernels.gather_rows(X, order)``), after
    dropping the keys.

    Parameters
    ----------
    key : ndarray of int64, shape (n,)
    volume : int
        Keys lie in [0, volume).
    dense : bool
        Counting sort with per-key tables (``point_start``, ``table``), for
        a volume of about n; else a stable sort, no tables: from
        ``RADIX_MIN_KEYS`` keys on a radix sort on the host threads
        (``radix_sort.radix_argsort``), below NumPy's stable argsort.
    order_dtype : numpy integer type, optional
        Default int32 when n < 2^31, else int64.
    empty_slot : bool
        Table flavour, see :class:`CellOrder`.
    counts : ndarray of int64, shape (volume + 1,), optional
        Dense only: the keys' histogram shifted by one (``counts[v + 1]``
        points have key v), when the caller counted while computing the
        keys; consumed (it becomes ``point_start``).

    Returns
    -------
    CellOrder

    Notes
    -----
    Dense: O(n + volume).  Otherwise O(n bits(volume) / 13) (the radix
    sort), or O(n log n) below ``RADIX_MIN_KEYS`` keys.
    """
    from . import grid_kernels as gk

    n = key.shape[0]
    if order_dtype is None:
        order_dtype = np.int32 if n < 2**31 else np.int64
    if dense:
        if counts is None:
            # NumPy's histogram: no kernel to compile for it
            counts = np.zeros(volume + 1, dtype=np.int64)
            counts[1:] = np.bincount(key, minlength=volume)
        cell_ids = np.flatnonzero(counts[1:]).astype(np.int64, copy=False)
        order, point_start = gk.counting_sort(key, counts, order_dtype(0))
        cell_start = np.empty(len(cell_ids) + 1, dtype=np.int64)
        cell_start[:-1] = point_start[cell_ids]
        cell_start[-1] = n
        if empty_slot:
            table = np.full(volume + 1, -1, dtype=np.int64)
            table[cell_ids] = np.arange(len(cell_ids))
        else:                       # cells with an id below v: a running count
            table = np.zeros(volume + 1, dtype=np.int64)
            table[cell_ids + 1] = 1
            np.cumsum(table, out=table)
        return CellOrder(order, cell_ids, cell_start, point_start, table)
    if n >= RADIX_MIN_KEYS:
        from .radix_sort import radix_argsort  # Numba: loaded on first use (CLI start-up)

        order, sorted_key = radix_argsort(key, int(key.max()), order_dtype)
    else:
        order = np.argsort(key, kind="stable").astype(order_dtype)
        sorted_key = key[order]
    if n:
        starts = np.flatnonzero(np.diff(sorted_key)) + 1
        cell_start = np.empty(len(starts) + 2, dtype=np.int64)
        cell_start[0] = 0
        cell_start[1:-1] = starts
        cell_start[-1] = n
        cell_ids = sorted_key[cell_start[:-1]].copy()
    else:
        cell_start = np.zeros(1, dtype=np.int64)
        cell_ids = np.zeros(0, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    return CellOrder(order, cell_ids, cell_start, empty, empty)


def linear_strides(radix) -> np.ndarray:
    """The strides (int64) of linear cell keys over a grid of ``radix[j]``
    cells along dimension j, the last dimension fastest: key = sum_j q_j
    stride[j].  O(len(radix))."""
    radix = np.asarray(radix, dtype=np.int64)
    stride = np.ones(radix.size, dtype=np.int64)
    for j in range(radix.size - 2, -1, -1):
        stride[j] = stride[j + 1] * radix[j + 1]
    return stride


def default_index_dims(d: int) -> int:
    """Number of dimensions indexed by default (see the module docstring)."""
    return min(d, DEFAULT_INDEX_DIMS)


def check_index_dims(index_dims, d: int) -> int:
    """Validate the ``index_dims`` argument against the dimensionality d."""
    if index_dims is None:
        return default_index_dims(d)
    if isinstance(index_dims, bool) or not isinstance(index_dims, (int, np.integer)):
        raise TypeError(f"index_dims must be an integer, got {type(index_dims).__name__}")
    if not 1 <= index_dims <= min(d, MAX_INDEX_DIMS):
        raise ValueError(
            f"index_dims must be between 1 and min(d, {MAX_INDEX_DIMS}) = "
            f"{min(d, MAX_INDEX_DIMS)}, got {index_dims}"
        )
    return int(index_dims)


_I63 = 2**63 - 1


@with_cpu_threads
def build_grid(X: np.ndarray, eps: float, index_dims: int | None = None, precision: str = "float64",
               bounds: tuple[np.ndarray, np.ndarray] | None = None,
               like: "Grid | None" = None) -> Grid:
    """Build the epsilon grid of a point set on the CPU (self-join paper §IV-B, IV-C).

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Validated points in the working dtype (see ``skyjoin._core.validate``).
    eps : float
        The join radius.
    index_dims : int, optional
        Number of leading dimensions to index (default ``min(d, 6)``).
    precision : {"float64", "float32"}
        Working precision of the distance test (sets the rounding margin).
    bounds : (lo, hi), optional
        Bounds of the indexed dimensions over every point that will be
        compared (for R join S: both sets).  Default: those of X.
    like : Grid, optional
        Reuse the cell geometry (``lo``, ``side``, ``k``) of another grid,
        so that the cells of both line up (R join S).

    Returns
    -------
    Grid

    See Also
    --------
    skyjoin.self_join : the join that searches this grid.

    Notes
    -----
    Only non-empty cells are stored, so memory is O(n) whatever the
    volume of the cell space.  Cost: O(n k) for the bounds and the cell
    coordinates of the k indexed dimensions, then a stable sort of the
    cell ids: a counting sort, O(n), when the cell space holds at most
    about 2n cells, else O(n log n); O(n d) to gather the points in cell
    order.

    References
    ----------
    M. Gowanlock, B. Karsin, "GPU Accelerated Self-join for the Distance
    Similarity Metric", arXiv:1803.04120, 2018, §IV-B and §IV-C.

    Examples
    --------
    >>> import numpy as np
    >>> g = build_grid(np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]]), eps=0.5)
    >>> g.n_cells
    2
    """
    from . import grid_kernels as gk

    n, d = X.shape
    if like is not None:
        k, lo, side, slack = like.k, like.lo, like.side, like.slack
    else:
        k = check_index_dims(index_dims, d)
        if bounds is None:
            if n:
                lo, hi = gk.column_bounds(X, k)
            else:
                lo = hi = np.zeros(k)
        else:
            lo = np.asarray(bounds[0], dtype=np.float64)[:k]
            hi = np.asarray(bounds[1], dtype=np.float64)[:k]
        side = cell_sides(lo, hi, eps, d, precision)
        # |fl(fl(x - lo) / side) - (x - lo) / side| <= 2.01 u (x - lo) / side:
        # twice that for two points, plus headroom, in units of cells
        slack = 4.1 * _U64 * (np.maximum(hi - lo, 0.0) / side + 1.0)

    lid = np.zeros(n, dtype=np.int64)
    raw = np.empty(n, dtype=np.int64)
    coords_list, radix_list = [], []
    volume = 1
    for j in range(k):
        gk.raw_coords(X, j, lo[j], side[j], raw)
        span = int(raw.max()) + 1 if n else 1
        if span <= 4 * n + 64 and int(raw.min() if n else 0) >= 0:
            occ = np.zeros(span, dtype=np.bool_)
            occ[raw] = True
            cj = np.flatnonzero(occ).astype(np.int64)
            rank_of = np.cumsum(occ, dtype=np.int64) - 1
            rank = rank_of[raw]
            del occ, rank_of
        else:
            cj = sorted_unique(raw)
            rank = np.searchsorted(cj, raw).astype(np.int64)
        r = max(len(cj), 1)
        if volume * r > _I63:
            # The linear id of one more dimension would not fit in 63 bits:
            # index fewer dimensions (the distance test still uses all d).
            k = j
            lo, side, slack = lo[:k], side[:k], slack[:k]
            break
        volume *= r
        gk.horner_step(lid, rank, r)
        coords_list.append(cj)
        radix_list.append(r)
        del rank
    del raw
    if k == 0:  # only possible for a pathological first dimension: index it coarsely
        raise ValueError("cannot index any dimension: the data span is too large for the grid")

    radix = np.asarray(radix_list, dtype=np.int64)
    stride = linear_strides(radix)
    coord_off = np.zeros(k + 1, dtype=np.int64)
    coord_off[1:] = np.cumsum([len(c) for c in coords_list])
    coords = np.concatenate(coords_list) if coords_list else np.zeros(0, np.int64)

    cells = sort_cells(lid, volume, dense=volume <= 2 * n + 1024)
    del lid
    points = gk.gather_rows(X, cells.order)
    return Grid(points=points, order=cells.order, cell_start=cells.cell_start,
                cell_ids=cells.cell_ids, coords=coords, coord_off=coord_off, radix=radix,
                stride=stride, lower_bound=cells.table, lo=np.asarray(lo, np.float64),
                side=np.asarray(side, np.float64), slack=np.asarray(slack, np.float64), eps=float(eps), k=int(k))
