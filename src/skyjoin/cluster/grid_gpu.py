"""Single-run DBSCAN on a fine grid, on the GPU, without a neighbour table.

The GPU port of :mod:`skyjoin.cluster.grid_cpu` (read its docstring for
the method: cells of side ``eps / sqrt(d)``, dense cells whose bounding box
passes the distance test make all their points core and one group without a
distance computation, other points count neighbours up to min_samples, one
core-core pair within eps joins two cells, border points take the lowest
cluster label of their core neighbours; the dense cells as single boxes
and the union-find over the points, fused with the search and with no
neighbour list, are the ideas of FDBSCAN-DenseBox and FDBSCAN, Prokopenko,
Lebrun-Grandie and Arndt, ICPP 2023).  Only non-empty cells are stored, as
in the join's grid (Gowanlock and Karsin 2018, §IV-B), found by a row
table and a binary search rather than one search per cell (§IV-D).  On
the GPU:

1. ``bin``: a thread per point computes its linear cell key, the dimension
   with most cells fastest (``index.fine_grid.row_grid_shape``); the keys
   are sorted in place by the GPU grid sort
   (``skyjoin.index.grid_gpu.sort_cells_gpu``) and the points gathered by
   the order (int32) once the keys are gone, so every cell is a
   contiguous run.  Only the non-empty cells are kept: the first cell of
   every *row* (the cells that differ in the fastest coordinate only), a
   dense table of ``prod(radix) / radix_fastest`` entries, is the scan of
   each row's number of cells (``row_counts``, which also gives each
   cell's coordinate along its row); where that table
   would pass ``index.fine_grid.row_table_fits`` (points on a sphere, whose
   box holds far more rows than points), a hash table of the non-empty rows
   (open addressing, ``row_hash_insert``) takes its place;
2. ``cell_boxes``: a thread per cell: bounding box (floats rounded
   outwards: 4 bytes a value, and the box test stays exact), and whether it
   is close.  Only the cells of two points or more store one (``box_slot``,
   a scan of ``multi_cells``): a cell of one point is its own box, and at
   tens of millions of clustered points nearly every cell holds one;
3. ``core_flags``: a thread per point, stopping at min_samples (none for
   min_samples <= 2: every point is linked in 4., and a point is core when
   its component holds another point).  A
   neighbour cell is found from the pattern's rows
   (``index.fine_grid.row_pattern``; a cell far enough from the grid's
   edges finds each at its own row plus a fixed step, ``row_delta``): the
   row's entry, then a binary search along the row, over only the steps
   that can hold a point within eps of the point's place in its cell (none
   for a row whose column lies farther: ``row_window``, the pruning by
   place; for a cell, its box's place); the point is tested
   against the box of a neighbour cell of two points or more, and against
   the point of a cell of one;
4. ``link_within`` and ``link_between``: lock-free union-find over the
   points (the hooking of :mod:`skyjoin.cluster.table_gpu`: the larger root is
   hung under the smaller with ``atomicCAS``); a thread per core point for
   the pairs inside its cell, then a thread per cell for the pairs between
   two cells (each unordered pair of cells once: the cells its search finds
   go to its warp's queue in shared memory, tested 32 at a time, one pair a
   lane, so that the tests run with every lane busy), the adjacent cells in a
   first launch and the farther ones in a second, so that most far pairs
   find their cells already joined; with every point core (min_samples
   <= 2: small components, most candidates beyond eps) one launch, in
   which two one-point cells are tested by their distance first
   (:func:`link_phases`);
5. clusters numbered by their lowest caller row (:func:`number_clusters`:
   an atomic minimum at each root and a scan in caller order, no sort), the
   labels written over the union-find's parents, then ``border``: a thread
   per non-core point (none when min_samples <= 2: a point with a neighbour
   is core, and the grid is freed before the numbering); one scatter
   (``scatter_labels``) takes the labels, with the core flags folded in, back
   to the caller's order over an array of -1: the noise is not written, and
   at tens of millions of clustered points most points are noise.  Without
   a border pass the numbering writes them there itself (``number_scatter``).

Only the points go in and the labels come out: no pair is ever stored, so
memory is a few arrays of n entries however large T would be (a table
that fits in no GPU: docs/decisions/dbscan-fit-path.md).  Every distance
decision is the join's test, ``sum_k (x_k - y_k)^2 <= eps^2`` in the
points' precision (float64, or float32 for float32 points) summed over k
in order, compiled with ``--fmad=false`` so that no multiply-add is fused:
the labels equal the CPU path's and scikit-learn's.  Under haversine the
points are unit vectors made on the GPU (``simjoin.gpu.unit_vectors``),
eps the chord beyond which scikit-learn surely refuses a pair and
``eps_sure`` the chord within which it surely accepts one
(``simjoin.metrics.decision_radii``): a pair between the two that matters
sends the clustering to the table path (:func:`gpu_grid_dbscan` returns
None).  Limits: d <= 4, at
most 2**40 cells along a dimension and 2**31 - 1 along the sparse one
(:data:`MAX_ROW_CELLS`), and a row table of at most
``max(2 n, 2^22)`` entries, else :func:`gpu_grid_dbscan` returns None and
the caller takes the join path.  Cost: O(n d) for the grid plus the sort,
then O(5**d) row lookups of O(log cells-per-row) for each point (core
counts, border points) and each cell (links), fewer after the pruning by
place (about half the neighbour cells of a point in 3-D), plus the
distance tests of points in neighbouring cells that are not close.

Memory by phase (the device bytes alive at each phase's peak, a point:
X the points' own bytes, 4 d for float32 or 8 d for float64; mu the
non-empty cells and phi the cells of two points or more, per point; r the
row table's 4 bytes a row, per point; keys of 8 bytes, 4 when they fit 31
bits):

============  ============================================  ===============================
phase         arrays added (- freed)                        alive at the phase's peak
============  ============================================  ===============================
upload        the points (host input: the upload, scratch)  X
bin           keys 8                                        X + 8
sort          Thrust's buffers 8 (keys packed above their   X + 16 (X + 32 not packed)
              index, in place; not packed: the int64
              order 8, buffers 16)
cells         perm 4, point_slot 4, start 4 mu, cells'      X + 16 + 12 mu
              keys 8 mu; - keys
row table     cell_q 4 mu, r; - cells' keys                 X + 8 + 16 mu + r
gather        the sorted points X                           2 X + 8 + 8 mu + r
boxes         box_slot 4 mu, close 1 mu, boxes 8 d phi      P + 8 + 13 mu + 8 d phi + r
core          core flags 1                                  P + 9 + 13 mu + 8 d phi + r
link          parent 8, first 4 mu (min_samples > 2;        P + 17 + 17 mu + 8 d phi + r
              freed at its end)
numbering     minima (in point_slot's place), ranks 4       P + 21 + 13 mu + 8 d phi + r
border        labels over parent                            P + 17 + 13 mu + 8 d phi + r
scatter back  - grid, - sorted points; labels 8, core 4     X + 20 (device input) or 20
============  ============================================  ===============================

P is the points alive from the gather on: X when the input is scratch
(host input, ``overwrite_x``: the sorted copy goes over it), 2 X for the
caller's device points.  For min_samples <= 2 the links need no first
core point (every point is one: 13 mu at the link), and the grid and the
sorted points go before the numbering.  Since a cell of two points or more
holds two points, 13 mu + 8 d phi <= 13 / 2 + 4 d for d >= 2, and the
peak is at most the largest of X + 32, 2 X + 16 + r and P + 28 + 4 d + r:
64 + r bytes a point for 3-D float32 points on the device or float64
host to host.  On the clustered 3-D set of
docs/decisions/dbscan-fit-path.md (37M points: mu 0.98, phi 0.014, r 2.4
at eps 0.1; mu 0.89, phi 0.06, r 0.4 at eps 0.25) the table predicts, for
float32 points on the device (P 24), 57 bytes a point at eps 0.1,
min_samples 2 (link) and 58 at eps 0.25, min_samples 10 (link and
numbering); float64 host to host 65-66 (the gather); float64 device
points that stay (P 48) 81 and 82, or 65-66 with ``overwrite_x``.
``scripts/dbscan-phases`` measures the peak of each phase; the measured
figures are in that record.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from .._core import device_prims as dp
from .._core.device import cupy
from .._core.device_kernels import load
from .._core.device_memory import mark_phase
from .._core.device_reduce import column_bounds
from .._core.transfer import d2h, to_device
from ..index.fine_grid import neighbour_offsets, row_grid_shape, row_pattern, row_table_fits
from ..index.grid import linear_strides
from ..index.grid_gpu import sort_cells_gpu
from .grid_cpu import MAX_DIMS
from .grid_gpu_kernels import compiled_module

__all__ = ["gpu_grid_dbscan", "grid_components", "grid_labels", "number_clusters",
           "border_labels", "compiled_module", "link_phases"]

#: threads a block (the searches' ``SEARCH_BOUNDS`` assume at most this)
_BLOCK = 256
#: the most cells along the grid's sparse dimension: the kernels keep a
#: cell's place along its row (``cell_q``) in an int32
MAX_ROW_CELLS = 2**31 - 1
_NULL = np.uint64(0)            # a null pointer argument


def _blocks(n):
    return (int((n + _BLOCK - 1) // _BLOCK),)


@dataclass
class GridClusters:
    """Core flags and components of points sorted by grid cell (stages 1 to 3),
    with the grid that the border pass needs.

    ``perm[k]`` (int32) is the input row of sorted point k; ``parent[k]``
    (int64) is the root (a sorted position) of a core point's component;
    for other points -1, or the point itself where min_samples <= 2 linked
    every point.
    ``grid`` holds the device arrays and scalars of the kernels' GRID_ARGS,
    ``pattern`` those of PATTERN_ARGS (the whole neighbour pattern),
    ``decide`` those of DECIDE_ARGS.
    """

    Xs: object
    perm: object
    n: int
    d: int
    real: str
    grid: tuple
    pattern: tuple
    decide: tuple
    core: object
    parent: object

    @property
    def undecided(self):
        """One uint32 on the device, non-zero once a pair that mattered lay
        between the sure radius and eps (DECIDE_ARGS' flag)."""
        return self.decide[2]


def _row_hash(cp, mod, cells, m, rs):
    """The hash table of the non-empty rows of the sorted cell keys (the
    kernels' ``hkeys, hfirst, hend, mask``): a power of two of at least
    twice as many slots as rows.  O(m), 16 bytes a slot."""
    size = 1 << max(int(2 * m - 1).bit_length(), 4)
    hkeys = cp.empty(size, dtype=cp.int64)
    dp.fill(cp, hkeys, -1)
    hfirst = cp.empty(size, dtype=cp.int32)
    hend = cp.empty(size, dtype=cp.int32)
    mask = np.uint64(size - 1)
    args = (cells, np.int64(m), np.int64(rs), mask, hkeys)
    mod.get_function("row_hash_insert")(_blocks(m), (_BLOCK,), args + (hfirst,))
    mod.get_function("row_hash_ends")(_blocks(m), (_BLOCK,), args + (hend,))
    return hkeys, hfirst, hend, mask


def _pattern_args(cp, off, lo, hi, radix, korder, eps_cells):
    """The kernels' PATTERN_ARGS for the pattern rows ``off`` (row offsets in
    key order, ``index.fine_grid.row_pattern``): with each row's step in
    row numbers (``row_delta``, for a cell ``reach`` cells or more inside
    the grid along every row coordinate), and ``reach2``, eps in cells
    (``eps_cells``) squared and widened by 2**-10 for the kernels' pruning
    by place (``row_window``)."""
    stride = linear_strides(np.asarray(radix, dtype=np.int64)[np.asarray(korder)[:-1]])
    off = np.asarray(off, dtype=np.int32).reshape(lo.size, stride.size)
    delta = off.astype(np.int64) @ stride if lo.size else np.zeros(0, np.int64)
    reach = int(np.abs(off).max()) if off.size else 0
    return (np.int32(lo.size), cp.asarray(off.ravel()), cp.asarray(lo), cp.asarray(hi),
            cp.asarray(delta), np.int32(reach), np.float32(eps_cells**2 * (1 + 2.0**-10)))


def link_phases(min_samples):
    """The launches of ``link_between``: with every point core (min_samples
    <= 2) the components are small and most candidate pairs lie beyond eps,
    so one pass that tests a pair of one-point cells by its distance first
    (phase 2); else the adjacent cells first (phase 0), then the farther
    ones (phase 1), which find most of their cells already joined.  Figures:
    docs/decisions/dbscan-fit-path.md."""
    return (2,) if min_samples <= 2 else (0, 1)


def grid_components(Xd, eps, min_samples, *, tick=None, overwrite_x=False, eps_sure=None):
    """Stages 1 to 3 on device points Xd (float64 or float32, finite): a
    GridClusters, or None when d > 4 or the grid would be too large
    (``index.fine_grid.row_grid_shape``, or more than :data:`MAX_ROW_CELLS`
    cells along the sparse dimension; a row table over its limit,
    ``row_table_fits``, is replaced by a hash table of the non-empty rows).
    ``overwrite_x``: Xd
    is scratch, and once the grid is built (never when None is returned) it
    holds the sorted points, so that one copy of the points stays in
    memory.  ``eps_sure`` (default eps): pairs within it are neighbours,
    pairs between it and eps undecided (``GridClusters.undecided``)."""
    cp = cupy()
    tick = tick or (lambda name: None)
    n, d = Xd.shape
    if d > MAX_DIMS or n >= 2**31 - 1:
        return None
    real = "float" if Xd.dtype == np.float32 else "double"
    mod = compiled_module(real, dims=d)
    load(cp, "dbscan")
    lo_h, hi_h, _ = column_bounds(cp, Xd)
    shape = row_grid_shape(lo_h, hi_h, n, eps, row_table=False)
    if shape is None:
        return None
    side, radix, korder_h = shape
    rs = int(radix[korder_h[-1]])
    if rs > MAX_ROW_CELLS:          # a cell's place along its row is an int32 (cell_q)
        return None
    rows = int(np.prod(radix[korder_h[:-1]]))
    dense_rows = row_table_fits(rows, n)
    lo, radix_d, korder = cp.asarray(lo_h), cp.asarray(radix), cp.asarray(korder_h)
    rdtype = np.float32 if real == "float" else np.float64
    eps2 = rdtype(rdtype(eps) * rdtype(eps))       # e * e in the working precision
    sure = eps if eps_sure is None else eps_sure
    sure2 = rdtype(rdtype(sure) * rdtype(sure))
    undecided = cp.zeros(1, dtype=cp.uint32)
    decide = (eps2, sure2, undecided)
    # 1. bin and sort by cell (the keys sorted in place; the points gathered once
    # the keys and the cells' keys are gone)
    cell = cp.empty(n, dtype=cp.int64)
    mod.get_function("bin")(_blocks(n), (_BLOCK,),
                            (Xd, np.int64(n), np.int32(d), korder, lo, np.float64(side), radix_d,
                             cell))
    key_t = dp.key_dtype(rs * rows)
    if key_t != cell.dtype:         # 32-bit keys: half the sort's passes
        cell = dp.astype(cp, cell, key_t)
    perm, _, cells, start, point_slot = sort_cells_gpu(cp, None, cell, rs * rows)
    del cell
    m = int(cells.size)
    cell_q = cp.empty(m, dtype=cp.int32)
    if dense_rows:                  # the dense row table: the scan of each row's cells
        row_start = cp.empty(rows + 1, dtype=cp.int32)
        dp.fill(cp, row_start, 0)
        mod.get_function("row_counts")(_blocks(m), (_BLOCK,),
                                       (cells, np.int64(m), np.int64(rs), cell_q, row_start))
        dp.scan(cp, row_start, cp.int32, inclusive=False, out=row_start)
        del cells
        hashed = (_NULL, _NULL, _NULL, np.uint64(0))
    else:                           # a hash table of the non-empty rows
        mod.get_function("row_counts")(_blocks(m), (_BLOCK,),
                                       (cells, np.int64(m), np.int64(rs), cell_q, _NULL))
        hashed = _row_hash(cp, mod, cells, m, rs)
        del cells
        row_start = None
    Xs = dp.take(cp, cp.ascontiguousarray(Xd), perm)
    if overwrite_x:
        Xs = dp.astype(cp, Xs, Xs.dtype, out=Xd)      # a bit copy
    del Xd
    offsets_h, _, _ = neighbour_offsets(side, eps, radix)
    pat = row_pattern(offsets_h, korder_h)
    pattern = _pattern_args(cp, pat.off, pat.lo, pat.hi, radix, korder_h, eps / side)
    positive = _pattern_args(cp, pat.positive_off, pat.positive_lo, pat.positive_hi, radix,
                             korder_h, eps / side)
    positive_adjacent = cp.asarray(pat.positive_adjacent)
    # boxes for the cells of two points or more only (a cell of one point is its point)
    box_slot = cp.empty(m, dtype=cp.int32)
    mod.get_function("multi_cells")(_blocks(m), (_BLOCK,), (start, np.int64(m), box_slot))
    dp.scan(cp, box_slot, cp.int32, inclusive=True, init=-1, out=box_slot)
    n_boxes = int(box_slot[-1]) + 1
    box_lo = cp.empty((n_boxes, d), dtype=cp.float32)        # rounded outwards (cell_boxes)
    box_hi = cp.empty((n_boxes, d), dtype=cp.float32)
    close = cp.empty(m, dtype=cp.uint8)
    mod.get_function("cell_boxes")(_blocks(m), (_BLOCK,),     # close: within the sure radius
                                   (Xs, np.int32(d), start, np.int64(m), sure2, box_slot, box_lo,
                                    box_hi, close))
    grid = (start, point_slot, _NULL if row_start is None else row_start) + hashed + (
        cell_q, close, box_slot, box_lo, box_hi, korder, lo, np.float64(side), radix_d)
    tick("grid")
    # 2. core flags; for min_samples <= 2 none yet: every point is linked, and the
    # points left alone are the non-core ones (2.)
    linked = min_samples <= 2
    core = cp.empty(n, dtype=cp.uint8)
    if linked:
        dp.fill(cp, core, 1)
    else:
        mod.get_function("core_flags")(
            _blocks(n), (_BLOCK,),
            (Xs, np.int64(n), np.int32(d)) + grid + pattern + decide
            + (np.int64(min_samples), core))
        tick("core")
    # 3. union-find over the core points
    parent = cp.empty(n, dtype=cp.int64)
    mod.get_function("init_parent")(_blocks(n), (_BLOCK,), (core, np.int64(n), parent))
    if linked:          # every point core: a cell's first core point is its first point
        first = start
    else:
        first = cp.empty(m, dtype=cp.int32)
        mod.get_function("first_core")(_blocks(m), (_BLOCK,), (start, np.int64(m), core, first))
    mod.get_function("link_within")(
        _blocks(n), (_BLOCK,),
        (Xs, np.int64(n), np.int32(d), start, point_slot, close, first, core) + decide
        + (parent,))
    n_pos = int(pat.positive_lo.size)
    for phase in link_phases(min_samples):
        if n_pos and m:
            mod.get_function("link_between")(
                _blocks(m), (_BLOCK,),
                (Xs, np.int32(d), np.int64(m)) + grid + positive
                + (positive_adjacent, np.int32(phase), first, core) + decide + (parent,))
    del first
    if linked and min_samples == 2:     # the roots found, and the core points with them
        dp.fill(cp, core, 0)
        mod.get_function("compress_linked")(_blocks(n), (_BLOCK,), (np.int64(n), parent, core))
    else:
        mod.get_function("compress")(_blocks(n), (_BLOCK,), (core, np.int64(n), parent))
    tick("link")
    return GridClusters(Xs, perm, n, d, real, grid, pattern, decide, core, parent)


def grid_labels(g: GridClusters, root_label, border=True):
    """Stage 4: labels (int64) in sorted order.  A core point takes its
    root's ``root_label``; a non-core point the lowest label of its core
    neighbours (-1: noise); ``border=False`` skips that search, for
    min_samples <= 2, where a non-core point has no neighbour."""
    cp = cupy()
    mod = compiled_module(g.real, dims=g.d)
    labels = cp.empty(g.n, dtype=cp.int64)
    mod.get_function("core_labels")(_blocks(g.n), (_BLOCK,),
                                    (g.core, g.parent, root_label, np.int64(g.n), labels))
    if border:
        border_labels(g, labels)
    return labels


def number_clusters(g: GridClusters, low=None, scatter_to=None):
    """The labels of the core points (-1 elsewhere), in sorted order, written
    over ``g.parent`` (int64; returned): each cluster numbered by the rank of
    its lowest caller row ``g.perm`` among those of all clusters, as
    scikit-learn numbers them.  An atomic minimum at each root, a scan of
    flags in caller order, no sort: O(n), two int32 arrays of n entries
    (``low``: a scratch one of the caller's, overwritten).  With
    ``scatter_to`` (int64, n entries of -1), where no border pass follows,
    the labels go straight to the caller's order there instead (returned):
    one pass over the points fewer."""
    cp = cupy()
    mod = compiled_module(g.real, dims=g.d)
    n = g.n
    if low is None:
        low = cp.empty(n, dtype=cp.int32)
    dp.fill(cp, low, n)
    mod.get_function("component_low")(_blocks(n), (_BLOCK,),
                                      (g.core, g.parent, g.perm, np.int64(n), low))
    rank = cp.empty(n, dtype=cp.int32)
    dp.fill(cp, rank, 0)
    mod.get_function("mark_lows")(_blocks(n), (_BLOCK,),
                                  (g.core, g.parent, low, np.int64(n), rank))
    dp.scan(cp, rank, cp.int32, inclusive=True, init=-1, out=rank)
    if scatter_to is not None:
        mod.get_function("number_scatter")(_blocks(n), (_BLOCK,),
                                           (g.core, g.parent, low, rank, g.perm, np.int64(n),
                                            scatter_to))
        return scatter_to
    mod.get_function("number_clusters")(_blocks(n), (_BLOCK,),
                                        (g.core, low, rank, np.int64(n), g.parent))
    return g.parent


def border_labels(g: GridClusters, labels) -> None:
    """The border points' labels, in place: a non-core point takes the lowest
    label of its core neighbours (-1: noise).  O(5**d) row lookups a
    non-core point."""
    mod = compiled_module(g.real, dims=g.d)
    mod.get_function("border")(
        _blocks(g.n), (_BLOCK,),
        (g.Xs, np.int64(g.n), np.int32(g.d)) + g.grid + g.pattern + (g.core,) + g.decide
        + (labels,))


def gpu_grid_dbscan(X, eps, min_samples, *, timings=None, on_device=False, overwrite_x=False,
                    eps_sure=None):
    """Exact DBSCAN (scikit-learn's labels) on a fine grid on the GPU, or None.

    Parameters
    ----------
    X : array_like or cupy.ndarray of float64 or float32, shape (n, d)
        Validated, finite points (host or device), conditioned for the
        working precision: float32 points are tested in float32.
    eps : float
    min_samples : int
    timings : dict, optional
        Filled with the seconds of "h2d", "grid", "core", "link", "labels",
        "to_host".
    on_device : bool, default False
        Return the results as CuPy arrays, with no copy to the host (the
        plan's ``DBSCANPlan.on_device``).
    overwrite_x : bool, default False
        X is a device array the caller no longer reads, whatever the
        answer: it is overwritten with the points in grid order (host input
        is always copied), also when None follows the grid (``eps_sure``).
        One copy of the points fewer in device memory.
    eps_sure : float, optional
        Pairs within eps_sure are neighbours; a pair between eps_sure and
        eps is undecided, and when one matters (it could change a core
        flag, a link or a border label) the answer is None: a metric's
        filter (``skyjoin.simjoin.metrics``), whose exact test then runs on
        the table path.  Default eps: every pair is decided.

    Returns
    -------
    (core_sample_indices, labels) as host arrays (CuPy arrays with
    ``on_device``), or None
        None when d > 4, when the grid over the bounding box would pass
        its limits (:func:`grid_components`), or when a pair in the band
        of ``eps_sure`` mattered: the caller then takes the join path.

    Raises
    ------
    skyjoin.GPUUnavailableError
        Without a usable GPU.
    """
    cp = cupy()
    tick = _Ticker(cp, timings)
    load(cp, "dbscan")                          # its device kernels, one compile
    dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
    Xd = to_device(cp, X, "X", dtype, check_finite=False)   # pinned staging for host input
    n = Xd.shape[0]
    if n == 0:
        xp = cp if on_device else np
        return xp.zeros(0, np.int64), xp.zeros(0, np.intp)
    tick("h2d")
    g = grid_components(Xd, eps, min_samples, tick=tick, eps_sure=eps_sure,
                        overwrite_x=Xd is not X or overwrite_x)
    del Xd
    if g is None:
        return None
    # 4. clusters numbered by their lowest caller row, then border points (none
    # when min_samples <= 2: a point with a neighbour is core, and the grid's
    # memory goes before the numbering)
    border = min_samples > 2
    point_slot = g.grid[1]              # read by no later pass: the numbering's minima
    if border:
        g = dataclasses.replace(g, grid=(g.grid[0], _NULL) + g.grid[2:])
    else:
        g = dataclasses.replace(g, Xs=None, grid=(), pattern=())
    mod = compiled_module(g.real, dims=g.d)
    # the labels end in the caller's order over the noise's -1: without a border
    # pass the numbering puts them there; else, once the grid is freed, one
    # scatter carries the labels and the core flags
    if border:
        labels = number_clusters(g, low=point_slot)     # over g.parent
        border_labels(g, labels)
    else:
        labels_out = _noise(cp, n)
        number_clusters(g, low=point_slot, scatter_to=labels_out)
    del point_slot
    perm, core, undecided = g.perm, g.core, g.undecided
    del g                                   # the grid's memory, before the outputs
    if eps_sure is not None and int(cp.asnumpy(undecided)[0]):
        return None                 # a pair in the band between eps_sure and eps mattered
    if border:
        labels_out = _noise(cp, n)
        mod.get_function("scatter_labels")(_blocks(n), (_BLOCK,),
                                           (core, labels, perm, np.int64(n), labels_out))
        del labels
    del core, perm
    tick("labels")
    core_out = cp.empty(n, dtype=cp.int32)
    mod.get_function("decode_core")(_blocks(n), (_BLOCK,), (np.int64(n), labels_out, core_out))
    core_idx = dp.compact(cp, core_out, cp.int64)[0]
    del core_out
    if on_device:
        return core_idx, labels_out.astype(np.intp, copy=False)
    core_idx = d2h(cp, core_idx)
    labels_h = d2h(cp, labels_out).astype(np.intp, copy=False)
    tick("to_host")
    return core_idx, labels_h


def _noise(cp, n):
    """n labels of -1 (int64), the output's start."""
    out = cp.empty(n, dtype=cp.int64)
    dp.fill(cp, out, -1)
    return out


class _Ticker:
    """Phase times into a dict (synchronising the device at each tick)."""

    def __init__(self, cp, timings):
        self.cp, self.timings, self.t = cp, timings, time.perf_counter()

    def __call__(self, name):
        mark_phase(name)
        if self.timings is None:
            return
        self.cp.cuda.get_current_stream().synchronize()
        now = time.perf_counter()
        self.timings[name] = now - self.t
        self.t = now
