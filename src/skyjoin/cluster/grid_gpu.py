"""Single-run Euclidean DBSCAN on a fine grid, on the GPU, without a neighbour table.

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
   with most cells fastest (``index.fine_grid.row_grid_shape``); the points
   are sorted by it and gathered by the GPU grid sort
   (``skyjoin.index.grid_gpu.sort_cells_gpu``), so every cell is a
   contiguous run.  Only the non-empty cells are kept: ``row_table`` finds
   the first cell of every *row* (the cells that differ in the fastest
   coordinate only), a dense table of ``prod(radix) / radix_fastest``
   entries, and each cell's coordinate along its row;
2. ``cell_boxes``: a thread per cell: bounding box, and whether it is close;
3. ``core_flags``: a thread per point, stopping at min_samples.  A
   neighbour cell is found from the pattern's rows
   (``index.fine_grid.row_pattern``): the row's entry, then a binary search
   along the row;
4. ``link_within`` and ``link_between``: lock-free union-find over the
   points (the hooking of :mod:`skyjoin.cluster.table_gpu`: the larger root is
   hung under the smaller with ``atomicCAS``); a thread per core point for
   the pairs inside its cell, then a thread per cell for the pairs between
   two cells (each unordered pair of cells once), the adjacent cells in a
   first launch and the farther ones in a second, so that most far pairs
   find their cells already joined;
5. clusters numbered by their lowest caller row
   (``table_gpu.ranks_by_caller_row``), then ``border``: a thread per non-core
   point (none when min_samples <= 2: a point with a neighbour is core).

Only the points go in and the labels come out: no pair is ever stored, so
memory is a few arrays of n entries however large T would be (a table
that fits in no GPU: docs/decisions/dbscan-fit-path.md).  Every distance
decision is the join's test, ``sum_k (x_k - y_k)^2 <= eps^2`` in the
points' precision (float64, or float32 for float32 points) summed over k
in order, compiled with ``--fmad=false`` so that no multiply-add is fused:
the labels equal the CPU path's and scikit-learn's.  Limits: d <= 4, at
most 2**40 cells along a dimension, and a row table of at most
``max(2 n, 2^22)`` entries, else :func:`gpu_grid_dbscan` returns None and
the caller takes the join path.  Cost: O(n d) for the grid plus the sort,
then O(5**d) row lookups of O(log cells-per-row) for each point (core
counts, border points) and each cell (links), plus the distance tests of
points in neighbouring cells that are not close; memory a few arrays of
n entries and of the non-empty cells, their boxes the largest (measured:
docs/decisions/dbscan-fit-path.md).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from .._core import device_prims as dp
from .._core.device import cupy
from .._core.device_kernels import load
from .._core.device_memory import mark_phase
from .._core.device_reduce import column_bounds
from .._core.transfer import d2h, to_device
from ..index.fine_grid import neighbour_offsets, row_grid_shape, row_pattern
from ..index.grid_gpu import sort_cells_gpu
from .grid_cpu import MAX_DIMS
from .table_gpu import UNION_FIND, ranks_by_caller_row

__all__ = ["gpu_grid_dbscan", "grid_components", "grid_labels", "compiled_module"]

_BLOCK = 256

_SOURCE = r"""
extern "C" {
""" + UNION_FIND + r"""

#ifndef REAL
#define REAL double
#endif
#define MAXD 4

// squared distance of sorted points a and b, summed over k in order, in REAL
__device__ __forceinline__ REAL d2(const REAL* X, int d, long long a, long long b) {
    REAL s = 0;
    for (int k = 0; k < d; ++k) { REAL t = X[a * d + k] - X[b * d + k]; s += t * t; }
    return s;
}

// whether no point of slot t can be within eps of a point of slot u (box gap test)
__device__ __forceinline__ bool boxes_apart(const REAL* lo, const REAL* hi, int d,
                                            long long t, long long u, REAL eps2) {
    REAL s = 0;
    for (int k = 0; k < d; ++k) {
        REAL g = lo[u * d + k] - hi[t * d + k];
        REAL g2 = lo[t * d + k] - hi[u * d + k];
        if (g2 > g) g = g2;
        if (g > 0) s += g * g;
    }
    return s > eps2;
}

// cell coordinates of point p, in key order (korder[d - 1], the sparse one, last)
__device__ __forceinline__ void cell_of(const REAL* X, long long p, int d, const int* korder,
                                        const double* lo, double side, const long long* radix,
                                        long long* q) {
    for (int j = 0; j < d; ++j) {
        int k = korder[j];
        long long v = (long long)floor(((double)X[p * d + k] - lo[k]) / side);
        if (v < 0) v = 0; else if (v >= radix[k]) v = radix[k] - 1;
        q[j] = v;
    }
}

// the row at offset off (d - 1 steps) from the row of coordinates q, or -1 outside the grid
__device__ __forceinline__ long long row_at(const long long* q, int d, const int* korder,
                                            const long long* radix, const int* off) {
    long long r = 0;
    for (int j = 0; j < d - 1; ++j) {
        long long v = q[j] + off[j], R = radix[korder[j]];
        if (v < 0 || v >= R) return -1;
        r = r * R + v;
    }
    return r;
}

// the slots [*a, *b) of row r whose sparse coordinate lies in [qlo, qhi]
__device__ __forceinline__ void row_slots(const int* row_start, const int* cell_q, long long r,
                                          long long qlo, long long qhi, int* a, int* b) {
    int lo = row_start[r], end = row_start[r + 1], hi = end;
    while (lo < hi) {
        int mid = lo + ((hi - lo) >> 1);
        if (cell_q[mid] < qlo) lo = mid + 1; else hi = mid;
    }
    int e = lo;
    while (e < end && cell_q[e] <= qhi) ++e;
    *a = lo;
    *b = e;
}

__global__ void bin(const REAL* X, long long n, int d, const int* korder, const double* lo,
                    double side, const long long* radix, long long* cell) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long q[MAXD];
    cell_of(X, i, d, korder, lo, side, radix, q);
    long long c = 0;
    for (int j = 0; j < d; ++j) c = c * radix[korder[j]] + q[j];
    cell[i] = c;
}

// each cell's sparse coordinate, and the first slot of every row (a thread per
// cell and per row: the row's lower bound in the sorted keys)
__global__ void row_table(const long long* cells, long long m, long long rs, long long rows,
                          int* cell_q, int* row_start) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) cell_q[i] = (int)(cells[i] % rs);
    if (i <= rows) {
        long long key = i * rs, a = 0, b = m;
        while (a < b) {
            long long mid = a + ((b - a) >> 1);
            if (cells[mid] < key) a = mid + 1; else b = mid;
        }
        row_start[i] = (int)a;
    }
}

__global__ void cell_boxes(const REAL* X, int d, const int* start, long long m,
                           REAL eps2, REAL* box_lo, REAL* box_hi, unsigned char* close) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long a = start[t], b = start[t + 1];
    REAL s = 0;
    for (int k = 0; k < d; ++k) {
        REAL lo = X[a * d + k], hi = lo;
        for (long long p = a + 1; p < b; ++p) {
            REAL v = X[p * d + k];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        box_lo[t * d + k] = lo;
        box_hi[t * d + k] = hi;
        REAL w = hi - lo;
        s += w * w;
    }
    close[t] = s <= eps2 ? 1 : 0;
}

// the grid as the per-point kernels read it
#define GRID_ARGS const int* start, const int* point_slot, const int* row_start, \
    const int* cell_q, const unsigned char* close, const REAL* box_lo, const REAL* box_hi, \
    const int* korder, const double* lo, double side, const long long* radix
#define PATTERN_ARGS int n_rows, const int* row_off, const int* row_lo, const int* row_hi

__global__ void core_flags(const REAL* X, long long n, int d, GRID_ARGS, PATTERN_ARGS,
                           REAL eps2, long long min_samples, unsigned char* core) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long t = point_slot[p];
    long long a = start[t], b = start[t + 1];
    long long cnt;
    if (close[t]) {
        cnt = b - a;
    } else {
        cnt = 0;
        for (long long q = a; q < b && cnt < min_samples; ++q) if (d2(X, d, p, q) <= eps2) ++cnt;
    }
    if (cnt < min_samples) {
        long long c[MAXD];
        cell_of(X, p, d, korder, lo, side, radix, c);
        for (int j = 0; j < n_rows && cnt < min_samples; ++j) {
            long long r = row_at(c, d, korder, radix, row_off + j * (d - 1));
            if (r < 0) continue;
            int u0, u1;
            row_slots(row_start, cell_q, r, c[d - 1] + row_lo[j], c[d - 1] + row_hi[j], &u0, &u1);
            for (int u = u0; u < u1 && cnt < min_samples; ++u) {
                if (u == t || boxes_apart(box_lo, box_hi, d, t, u, eps2)) continue;
                for (long long q = start[u]; q < start[u + 1] && cnt < min_samples; ++q)
                    if (d2(X, d, p, q) <= eps2) ++cnt;
            }
        }
    }
    core[p] = cnt >= min_samples ? 1 : 0;
}

__global__ void first_core(const int* start, long long m, const unsigned char* core,
                           int* first) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    int f = -1;
    for (int p = start[t]; p < start[t + 1]; ++p) if (core[p]) { f = p; break; }
    first[t] = f;
}

// core pairs inside each cell: a thread per point
__global__ void link_within(const REAL* X, long long n, int d, const int* start,
                            const int* point_slot, const unsigned char* close,
                            const int* first, const unsigned char* core, REAL eps2,
                            long long* parent) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || !core[p]) return;
    long long t = point_slot[p];
    if (close[t]) {
        if (p != first[t]) uf_union(parent, first[t], p);
        return;
    }
    for (long long q = p + 1; q < start[t + 1]; ++q)
        if (core[q] && uf_find(parent, p) != uf_find(parent, q) && d2(X, d, p, q) <= eps2)
            uf_union(parent, p, q);
}

// core pairs between cell t and the cells of the positive pattern (each
// unordered pair of cells once): a thread per cell.  Phase 0 links the
// adjacent cells (every step at most one), phase 1 the farther ones, so that
// most far pairs find their cells already joined.
__global__ void link_between(const REAL* X, int d, long long m, GRID_ARGS, PATTERN_ARGS,
                             const unsigned char* row_adjacent, int phase,
                             const int* first, const unsigned char* core, REAL eps2,
                             long long* parent) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m || first[t] < 0) return;
    long long c[MAXD];
    cell_of(X, start[t], d, korder, lo, side, radix, c);
    for (int j = 0; j < n_rows; ++j) {
        if (phase == 0 && !row_adjacent[j]) continue;
        long long r = row_at(c, d, korder, radix, row_off + j * (d - 1));
        if (r < 0) continue;
        int a = row_lo[j], b = row_hi[j];
        if (phase == 0) { a = a < -1 ? -1 : a; b = b > 1 ? 1 : b; }   // the adjacent cells only
        int u0, u1;
        row_slots(row_start, cell_q, r, c[d - 1] + a, c[d - 1] + b, &u0, &u1);
        for (int u = u0; u < u1; ++u) {
            long long step = (long long)cell_q[u] - c[d - 1];
            bool adjacent = row_adjacent[j] && step >= -1 && step <= 1;
            if (adjacent != (phase == 0) || first[u] < 0) continue;
            bool both_close = close[t] && close[u];
            if (both_close && uf_find(parent, first[t]) == uf_find(parent, first[u])) continue;
            if (boxes_apart(box_lo, box_hi, d, t, u, eps2)) continue;
            bool done = false;
            for (long long p = first[t]; p < start[t + 1] && !done; ++p) {
                if (!core[p]) continue;
                for (long long q = first[u]; q < start[u + 1]; ++q) {
                    if (!core[q]) continue;
                    if (both_close) {
                        if (d2(X, d, p, q) <= eps2) { uf_union(parent, p, q); done = true; break; }
                    } else if (uf_find(parent, p) != uf_find(parent, q) &&
                               d2(X, d, p, q) <= eps2) {
                        uf_union(parent, p, q);
                    }
                }
            }
        }
    }
}

__global__ void core_labels(const unsigned char* core, const long long* parent,
                            const long long* rank, long long n, long long* labels) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    labels[p] = core[p] ? rank[parent[p]] : -1;
}

// a non-core point takes the lowest label of its core neighbours
__global__ void border(const REAL* X, long long n, int d, GRID_ARGS, PATTERN_ARGS,
                       const unsigned char* core, REAL eps2, long long* labels) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || core[p]) return;
    long long t = point_slot[p];
    long long c[MAXD];
    cell_of(X, p, d, korder, lo, side, radix, c);
    long long best = -1;
    for (int j = 0; j < n_rows; ++j) {
        long long r = row_at(c, d, korder, radix, row_off + j * (d - 1));
        if (r < 0) continue;
        int u0, u1;
        row_slots(row_start, cell_q, r, c[d - 1] + row_lo[j], c[d - 1] + row_hi[j], &u0, &u1);
        for (int u = u0; u < u1; ++u) {
            if (boxes_apart(box_lo, box_hi, d, t, u, eps2)) continue;
            for (long long q = start[u]; q < start[u + 1]; ++q) {
                if (!core[q]) continue;
                long long lab = labels[q];
                if (best >= 0 && lab >= best) {
                    if (close[u]) break;        // one label per close cell: nothing lower here
                    continue;
                }
                if (d2(X, d, p, q) <= eps2) {
                    best = lab;
                    if (close[u]) break;
                }
            }
        }
    }
    labels[p] = best;
}

}  // extern "C"
"""


@functools.lru_cache(maxsize=None)
def compiled_module(real: str = "double"):
    """The compiled kernels for points of C type ``real`` ("double" or
    "float"; NVRTC, once per process and type); no fused multiply-add."""
    cp = cupy()
    return cp.RawModule(code=_SOURCE, options=("-std=c++17", "--fmad=false", f"-DREAL={real}"))


def _blocks(n):
    return (int((n + _BLOCK - 1) // _BLOCK),)


@dataclass
class GridClusters:
    """Core flags and components of points sorted by grid cell (stages 1 to 3),
    with the grid that the border pass needs.

    ``perm[k]`` is the input row of sorted point k; ``parent[k]`` is the root
    (a sorted position) of a core point's component, -1 for other points.
    ``grid`` holds the device arrays and scalars of the kernels' GRID_ARGS,
    ``pattern`` those of PATTERN_ARGS (the whole neighbour pattern).
    """

    Xs: object
    perm: object
    n: int
    d: int
    real: str
    grid: tuple
    pattern: tuple
    eps2: object
    core: object
    parent: object


def _pattern_args(cp, off, lo, hi):
    return (np.int32(lo.size), cp.asarray(off.ravel()), cp.asarray(lo), cp.asarray(hi))


def grid_components(Xd, eps, min_samples, *, tick=None):
    """Stages 1 to 3 on device points Xd (float64 or float32, finite): a
    GridClusters, or None when d > 4 or the grid would be too large
    (``index.fine_grid.row_grid_shape``)."""
    cp = cupy()
    tick = tick or (lambda name: None)
    n, d = Xd.shape
    if d > MAX_DIMS or n >= 2**31 - 1:
        return None
    real = "float" if Xd.dtype == np.float32 else "double"
    mod = compiled_module(real)
    load(cp, "dbscan")
    lo_h, hi_h, _ = column_bounds(cp, Xd)
    shape = row_grid_shape(lo_h, hi_h, n, eps)
    if shape is None:
        return None
    side, radix, korder_h = shape
    rs = int(radix[korder_h[-1]])
    rows = int(np.prod(radix[korder_h[:-1]]))
    lo, radix_d, korder = cp.asarray(lo_h), cp.asarray(radix), cp.asarray(korder_h)
    rdtype = np.float32 if real == "float" else np.float64
    eps2 = rdtype(rdtype(eps) * rdtype(eps))       # e * e in the working precision
    # 1. bin and sort by cell
    cell = cp.empty(n, dtype=cp.int64)
    mod.get_function("bin")(_blocks(n), (_BLOCK,),
                            (Xd, np.int64(n), np.int32(d), korder, lo, np.float64(side), radix_d,
                             cell))
    if rs * rows < 2**31:       # 32-bit keys: half the radix passes of the sort
        cell = dp.astype(cp, cell, cp.int32)
    perm, Xs, cells, start, point_slot = sort_cells_gpu(cp, Xd, cell, cp.int32)
    del cell
    m = int(cells.size)
    cell_q = cp.empty(m, dtype=cp.int32)
    row_start = cp.empty(rows + 1, dtype=cp.int32)
    mod.get_function("row_table")(_blocks(max(m, rows + 1)), (_BLOCK,),
                                  (cells, np.int64(m), np.int64(rs), np.int64(rows), cell_q,
                                   row_start))
    del cells
    offsets_h, _, _ = neighbour_offsets(side, eps, radix)
    pat = row_pattern(offsets_h, korder_h)
    pattern = _pattern_args(cp, pat.off, pat.lo, pat.hi)
    positive = _pattern_args(cp, pat.positive_off, pat.positive_lo, pat.positive_hi)
    positive_adjacent = cp.asarray(pat.positive_adjacent)
    box_lo = cp.empty((m, d), dtype=Xd.dtype)
    box_hi = cp.empty((m, d), dtype=Xd.dtype)
    close = cp.empty(m, dtype=cp.uint8)
    mod.get_function("cell_boxes")(_blocks(m), (_BLOCK,),
                                   (Xs, np.int32(d), start, np.int64(m), eps2, box_lo, box_hi,
                                    close))
    grid = (start, point_slot, row_start, cell_q, close, box_lo, box_hi, korder, lo,
            np.float64(side), radix_d)
    tick("grid")
    # 2. core flags
    core = cp.empty(n, dtype=cp.uint8)
    mod.get_function("core_flags")(
        _blocks(n), (_BLOCK,),
        (Xs, np.int64(n), np.int32(d)) + grid + pattern + (eps2, np.int64(min_samples), core))
    tick("core")
    # 3. union-find over the core points
    parent = cp.empty(n, dtype=cp.int64)
    mod.get_function("init_parent")(_blocks(n), (_BLOCK,), (core, np.int64(n), parent))
    first = cp.empty(m, dtype=cp.int32)
    mod.get_function("first_core")(_blocks(m), (_BLOCK,), (start, np.int64(m), core, first))
    mod.get_function("link_within")(
        _blocks(n), (_BLOCK,),
        (Xs, np.int64(n), np.int32(d), start, point_slot, close, first, core, eps2, parent))
    n_pos = int(pat.positive_lo.size)
    for phase in (0, 1):
        if n_pos and m:
            mod.get_function("link_between")(
                _blocks(m), (_BLOCK,),
                (Xs, np.int32(d), np.int64(m)) + grid + positive
                + (positive_adjacent, np.int32(phase), first, core, eps2, parent))
    del first
    mod.get_function("compress")(_blocks(n), (_BLOCK,), (core, np.int64(n), parent))
    tick("link")
    return GridClusters(Xs, perm, n, d, real, grid, pattern, eps2, core, parent)


def grid_labels(g: GridClusters, root_label, border=True):
    """Stage 4: labels in sorted order.  A core point takes its root's
    ``root_label``; a non-core point the lowest label of its core neighbours
    (-1: noise); ``border=False`` skips that search, for min_samples <= 2,
    where a non-core point has no neighbour."""
    cp = cupy()
    mod = compiled_module(g.real)
    labels = cp.empty(g.n, dtype=cp.int64)
    mod.get_function("core_labels")(_blocks(g.n), (_BLOCK,),
                                    (g.core, g.parent, root_label, np.int64(g.n), labels))
    if border:
        mod.get_function("border")(
            _blocks(g.n), (_BLOCK,),
            (g.Xs, np.int64(g.n), np.int32(g.d)) + g.grid + g.pattern + (g.core, g.eps2, labels))
    return labels


def gpu_grid_dbscan(X, eps, min_samples, *, timings=None, on_device=False):
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

    Returns
    -------
    (core_sample_indices, labels) as host arrays (CuPy arrays with
    ``on_device``), or None
        None when d > 4 or the grid over the bounding box would hold more
        than ``max(8 n, 2^22)`` cells (the caller then takes the join path).

    Raises
    ------
    skyjoin.GPUUnavailableError
        Without a usable GPU.
    """
    cp = cupy()
    tick = _Ticker(cp, timings)
    load(cp, "dbscan")                          # its device kernels, one compile
    dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
    Xd = to_device(cp, X, "X", dtype)        # pinned staging for host input
    n = Xd.shape[0]
    if n == 0:
        xp = cp if on_device else np
        return xp.zeros(0, np.int64), xp.zeros(0, np.intp)
    tick("h2d")
    g = grid_components(Xd, eps, min_samples, tick=tick)
    del Xd
    if g is None:
        return None
    # 4. clusters numbered by their lowest caller row, then border points (none
    # when min_samples <= 2: a point with a neighbour is core)
    root_label = ranks_by_caller_row(cp, compiled_module(g.real), g.core, g.parent, g.perm, n)
    labels = grid_labels(g, root_label, border=min_samples > 2)
    perm, core = g.perm, g.core
    del g, root_label                       # the grid's memory, before the outputs
    tick("labels")
    core_out = cp.empty(n, dtype=cp.int32)           # back in the caller's order
    dp.scatter(cp, core_out, perm, dp.astype(cp, core, cp.int32))
    labels_out = cp.empty(n, dtype=cp.int64)
    dp.scatter(cp, labels_out, perm, labels)
    del perm, core, labels
    core_idx = dp.compact(cp, core_out, cp.int64)[0]
    if on_device:
        return core_idx, labels_out.astype(np.intp, copy=False)
    core_idx = d2h(cp, core_idx)
    labels_h = d2h(cp, labels_out).astype(np.intp, copy=False)
    tick("to_host")
    return core_idx, labels_h


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
