"""The epsilon grid of non-empty cells, built on the GPU with CuPy.

Same grid as ``skyjoin.index.grid`` (Gowanlock & Karsin 2018, §IV): cells of side
``skyjoin.index.grid.cell_sides`` in the first k dimensions, only non-empty cells
stored, points reordered by cell, sorted linear ids.  Everything is built on
the device with Thrust's sort (CuPy's) and the project's own device
primitives (``skyjoin._core.device_prims``: gathers, scans, run starts, and
the grid kernels of the same module), so that a first call compiles one
module rather than a CuPy routine per step: no point crosses back to the
host (only a few scalars do: the bounds, the number of cells, the radices).

Linear ids never wrap around: each indexed dimension's coordinate is replaced
by its rank among the occupied coordinates of that dimension (the masks M_j
of §IV-C), so each radix is at most the number of distinct occupied
coordinates; if the product of the radices still exceeds 2^62, fewer
dimensions are indexed (distances stay exact, the grid only prunes less).

The candidate *ranges*: with the last indexed dimension varying fastest in the
linear id, the (up to three) cells adjacent along that dimension are
consecutive among the sorted non-empty cells, so their points form one
contiguous run of the reordered points.  Each query cell therefore owns at
most 3^(k-1) ranges, found once per cell (not once per point) by
``build_cell_ranges`` in ``kernels/join.cu``.  Data on the same cells as the
CPU engine's grid; only the search differs.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

import numpy as np

from .._core import device_prims as dp
from .._core.device_kernels import c_type, launch
from .._core.device_reduce import column_bounds
from .grid import DEFAULT_INDEX_DIMS, MAX_INDEX_DIMS, cell_sides, linear_strides

__all__ = ["GpuGrid", "build_gpu_grids", "build_cell_ranges", "bruteforce_ranges",
           "sort_cells_gpu", "PATTERNS", "compile_module"]

PATTERNS = {"full": 0, "unicomp": 1, "lid_unicomp": 2}
#: The CUDA source of the range search and of the join kernels (one file: the
#: join kernels share its helpers); it ships with ``skyjoin.simjoin.gpu``.
_KERNEL_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "simjoin", "gpu",
                            "kernels", "join.cu")
_MAX_LINEAR = 2 ** 62
#: The row-sort kernels of join.cu, compiled with every instance set.
SORT_KERNELS = ("sort_rows_small", "sort_rows_bitonic")


@functools.lru_cache(maxsize=None)
def _source() -> str:
    """The CUDA source of the join kernels."""
    with open(_KERNEL_FILE, encoding="utf-8") as fh:
        return fh.read()


@functools.lru_cache(maxsize=None)
def compile_module(names: tuple):
    """Compile (once per process and set of instantiations) the join kernels.

    ``names`` are the template instantiations wanted (NVRTC name expressions);
    the module is cached per tuple, i.e. per (d, k, dtype, options).  The
    row sorts (``SORT_KERNELS``) are compiled into every module, so that the
    join's kernels and its row sorts come from one compile.
    """
    import cupy as cp

    names = tuple(names) + tuple(n for n in SORT_KERNELS if n not in names)
    return cp.RawModule(code=_source(), options=("-std=c++17", "--fmad=false"),
                        name_expressions=list(names))


@dataclass
class GpuGrid:
    """A grid of non-empty cells on the GPU (arrays are CuPy arrays).

    Attributes
    ----------
    points : (n, d) working dtype, reordered by cell, C-contiguous
    order : (n,) int32, original row of each reordered point (array A)
    point_cell : (n,) int32, cell index of each reordered point
    cell_ids : (n_cells,) int64, sorted linear ids of the non-empty cells (B)
    cell_start : (n_cells + 1,) int32, cell c holds points [start[c], start[c+1])
    cell_coords : (n_cells, k) int64, cell coordinates (not ranks)
    masks : list of k (m_j,) int64, occupied coordinates per dimension (M_j),
        views into ``mask_table``
    stride : tuple of int, linear id = sum rank_j * stride[j]
    k : int, number of indexed dimensions
    mask_table : (sum m_j,) int64, the masks end to end
    mask_off : (k + 1,) int64, mask j is ``mask_table[mask_off[j]:mask_off[j + 1]]``
    """

    points: object
    order: object
    point_cell: object
    cell_ids: object
    cell_start: object
    cell_coords: object
    masks: list
    stride: tuple
    k: int
    mask_table: object
    mask_off: object

    @property
    def n_points(self) -> int:
        return int(self.points.shape[0])

    @property
    def n_cells(self) -> int:
        return int(self.cell_ids.shape[0])


def _cell_coords(cp, P, lo, side, k, rows=None):
    """Integer cell coordinates floor((x_j - lo_j) / side_j) of the first k
    dims, in float64 (no fused multiply-add: the CPU grid's coordinates).

    Of every row of P, column by column as a (k, n) int64 array; or of the
    rows ``rows`` (int32) of P, row by row as a (len(rows), k) one.  O(n k).
    """
    n, d = (int(P.shape[0]) if rows is None else int(rows.size)), int(P.shape[1])
    out = cp.empty((k, n) if rows is None else (n, k), dtype=cp.int64)
    lo_d = cp.asarray(np.asarray(lo[:k], dtype=np.float64))
    side_d = cp.asarray(np.asarray(side[:k], dtype=np.float64))
    launch(cp, f"cell_coords<{c_type(P.dtype)}>", n * k,
           (P, np.int64(n), np.int32(d), np.int32(k), lo_d, side_d,
            out if rows is None else rows, np.int32(rows is not None),
            np.int32(rows is None), out))
    return out


def _masks(cp, coords_t):
    """Sorted occupied coordinates of each dimension (the masks M_j), end to
    end: (table, off), mask j is ``table[off[j]:off[j + 1]]`` (off on the
    host).  A sort and a run search per dimension, O(k n) plus the sorts."""
    uniq = []
    for j in range(coords_t.shape[0]):
        col = dp.sort(cp, coords_t[j])
        _, starts = dp.runs(cp, col, cp.int64)
        uniq.append(dp.take(cp, col, starts[:-1]))
    off = np.zeros(len(uniq) + 1, dtype=np.int64)
    off[1:] = np.cumsum([int(u.size) for u in uniq])
    table = cp.empty(int(off[-1]), dtype=cp.int64)
    for j, u in enumerate(uniq):
        dp.astype(cp, u, cp.int64, out=table[int(off[j]):int(off[j + 1])])
    return table, off


def _fits(radix) -> bool:
    """Whether the product of the radices leaves linear ids below 2^62."""
    prod = 1
    for r in radix:
        prod *= int(r)
    return prod < _MAX_LINEAR


def _grid_from_coords(cp, P, coords_t, table, off, k, lo, side) -> GpuGrid:
    """Sort the points by linear id (in rank space) and find the non-empty cells."""
    n = P.shape[0]
    radix = [int(off[j + 1] - off[j]) for j in range(k)]
    stride = [int(s) for s in linear_strides(radix)]
    off_k = off[:k + 1]
    table_k = table[:int(off_k[-1])]
    off_d = cp.asarray(off_k)
    lid = cp.empty(n, dtype=cp.int64)
    launch(cp, "rank_ids", n, (coords_t, np.int64(n), np.int32(k), table_k, off_d,
                               cp.asarray(np.asarray(stride, dtype=np.int64)), lid))
    order, points, cell_ids, cell_start, point_cell = sort_cells_gpu(cp, P, lid, math.prod(radix))
    del lid
    # the coordinates of each cell, from its first (sorted) point
    cell_coords = _cell_coords(cp, points, lo, side, k, rows=cell_start[:-1])
    masks = [table_k[int(off_k[j]):int(off_k[j + 1])] for j in range(k)]
    return GpuGrid(points=points, order=order, point_cell=point_cell,
                   cell_ids=cell_ids, cell_start=cell_start, cell_coords=cell_coords,
                   masks=masks, stride=tuple(stride), k=k, mask_table=table_k, mask_off=off_d)


def sort_cells_gpu(cp, P, key, key_end: int):
    """Sort the device points P by cell key and find the non-empty cells: the one
    sort behind every GPU grid (the epsilon grid here, the fine grid of the
    DBSCAN grid path); only the key differs.

    Parameters
    ----------
    cp : module
        CuPy (or a stand-in with its API).
    P : cupy.ndarray, shape (n, d), n >= 1, C-contiguous, or None
        None: the points are not gathered (the caller gathers them by
        ``order`` when it has freed what it no longer needs).
    key : cupy.ndarray of int32 or int64, shape (n,), C-contiguous
        Cell key of every point, in [0, key_end); sorted in place, and
        overwritten (the sort's own keys: no copy of them).
    key_end : int
        A bound on the keys (the grid's number of cells).

    Returns
    -------
    order : (n,) int32, the row of each sorted point (stable)
    points : (n, d) ``P[order]``, C-contiguous (None when P is None)
    cell_ids : (n_cells,) int64, sorted keys of the non-empty cells
    cell_start : (n_cells + 1,) int32, cell c holds sorted points [start[c], start[c + 1])
    point_cell : (n,) int32, cell index of each sorted point

    Notes
    -----
    O(n d) work plus the radix sort of the keys
    (``skyjoin._core.device_prims.sorted_runs``: the keys alone, each packed
    above its index, where both fit the key's width; else Thrust's argsort);
    the project's own kernels, no CuPy routine that compiles.  Memory
    beyond P and key: the order and the cells (4 bytes a point each) and,
    during the sort, Thrust's buffers (a key a point when packed, a key and
    an int64 order a point, plus that order, when not).
    """
    order, point_cell, cell_start, cell_ids = dp.sorted_runs(cp, key, key_end)
    points = None if P is None else dp.take(cp, cp.ascontiguousarray(P), order)
    return order, points, cell_ids, cell_start, point_cell


def build_gpu_grids(R, S, eps: float, precision: str, index_dims=None):
    """Build the data grid on S and (for R join S) the query grid on R, on the GPU.

    Parameters
    ----------
    R : cupy.ndarray (n_r, d) or None
        Query points in the working dtype (None for a self-join).
    S : cupy.ndarray (n_s, d)
        Data points in the working dtype.
    eps : float
    precision : {"float64", "float32"}
    index_dims : int or None
        Number of leading dimensions to index (default ``min(d, 6)``).

    Returns
    -------
    (query_grid, data_grid) : GpuGrid, GpuGrid (the same object for a self-join)
    """
    import cupy as cp

    d = S.shape[1]
    if index_dims is None:
        k = min(d, DEFAULT_INDEX_DIMS)
    else:
        k = int(index_dims)
        if not 1 <= k <= min(d, MAX_INDEX_DIMS):
            raise ValueError(f"index_dims must be between 1 and {min(d, MAX_INDEX_DIMS)}, got {index_dims}")
    sets = [S] if R is None else [S, R]
    bounds = [column_bounds(cp, P, k) for P in sets]
    lo = np.min(np.stack([b[0] for b in bounds]), axis=0)
    hi = np.max(np.stack([b[1] for b in bounds]), axis=0)
    side = cell_sides(lo, hi, eps, d, precision)
    coords = [_cell_coords(cp, P, lo, side, k) for P in sets]
    masks = [_masks(cp, c) for c in coords]
    while k > 1 and not all(_fits(np.diff(off[:k + 1])) for _, off in masks):
        k -= 1                                   # index fewer dims: ids must not wrap
    grids = [_grid_from_coords(cp, P, c, table, off, k, lo, side)
             for P, c, (table, off) in zip(sets, coords, masks)]
    data = grids[0]
    query = data if R is None else grids[1]
    return query, data


def _rank_ranges(cp, qgrid: GpuGrid, dgrid: GpuGrid):
    """Per query cell and dimension: ranks in the data masks of coordinates c-1..c+1."""
    k = dgrid.k
    nqc = qgrid.n_cells
    rlo = cp.empty((nqc, k), dtype=cp.int32)
    rhi = cp.empty((nqc, k), dtype=cp.int32)
    own = cp.empty((nqc, k), dtype=cp.int32)
    launch(cp, "window_ranks", nqc * k, (qgrid.cell_coords, np.int64(nqc), np.int32(k),
                                         dgrid.mask_table, dgrid.mask_off, rlo, rhi, own))
    return rlo, rhi, own


def build_cell_ranges(qgrid: GpuGrid, dgrid: GpuGrid, pattern: str = "full"):
    """Candidate ranges of every query cell (count, scan, fill on the GPU).

    Returns
    -------
    rptr : cupy int64 (n_query_cells + 1,)
    ranges : cupy int32 (n_ranges, 2) of [start, stop) data positions
    """
    import cupy as cp

    pat = PATTERNS[pattern]
    if pat == PATTERNS["unicomp"] and qgrid is not dgrid:
        raise ValueError("the UNICOMP pattern needs a self-join")
    k = dgrid.k
    nqc = qgrid.n_cells
    rlo, rhi, own = _rank_ranges(cp, qgrid, dgrid)
    strides = cp.asarray(np.asarray(dgrid.stride, dtype=np.int64))
    kpat = pat if pat == PATTERNS["unicomp"] else 0   # LID-UNICOMP reuses the full ranges
    names = (f"build_cell_ranges<{k},{kpat},false>", f"build_cell_ranges<{k},{kpat},true>")
    mod = compile_module(names)
    f_count = mod.get_function(names[0])
    f_fill = mod.get_function(names[1])
    nr = cp.empty(nqc, dtype=cp.int32)
    rptr = cp.zeros(nqc + 1, dtype=cp.int64)
    threads = 128
    blocks = (nqc + threads - 1) // threads
    null_i64 = cp.zeros(1, dtype=cp.int64)
    dummy = cp.zeros(1, dtype=cp.int32)
    ranges_dummy = cp.zeros((1, 2), dtype=cp.int32)
    args_common = (np.int32(nqc), rlo, rhi, own, qgrid.cell_coords, dgrid.cell_ids,
                   np.int32(dgrid.n_cells), dgrid.cell_start, strides)
    f_count((blocks,), (threads,), args_common + (nr, null_i64, ranges_dummy))
    dp.scan(cp, nr, cp.int64, out=rptr[1:])
    total = int(rptr[-1])
    ranges = cp.empty((max(total, 1), 2), dtype=cp.int32)
    f_fill((blocks,), (threads,), args_common + (dummy, rptr, ranges))
    return rptr, ranges[:total]


def bruteforce_ranges(qgrid: GpuGrid, dgrid: GpuGrid):
    """One range holding every data point for each query cell (the brute-force baseline)."""
    import cupy as cp

    nqc = qgrid.n_cells
    rptr = dp.arange(cp, nqc + 1, cp.int64)
    ranges = cp.empty((nqc, 2), dtype=cp.int32)
    dp.fill(cp, ranges[:, 0], 0)
    dp.fill(cp, ranges[:, 1], dgrid.n_points)
    return rptr, ranges
