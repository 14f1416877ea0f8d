"""Single-run Euclidean DBSCAN on a fine grid, on the GPU, without a neighbour table.

The GPU port of :mod:`skyjoin.cluster.grid_cpu` (read its docstring for
the method: cells of side ``eps / sqrt(d)``, dense cells whose bounding box
passes the distance test make all their points core and one group without a
distance computation, other points count neighbours up to min_samples, one
core-core pair within eps joins two cells, border points take the lowest
cluster label of their core neighbours).  On the GPU:

1. ``bin``: a thread per point computes its linear cell id (the key of
   ``skyjoin.index.fine_grid.fine_cell_keys``); the points are sorted by it
   and gathered by the GPU grid sort (``skyjoin.index.grid_gpu.sort_cells_gpu``),
   so every cell is a contiguous run; the dense array ``slot_of`` maps a
   cell id to its run;
2. ``cell_boxes``: a thread per cell: bounding box, and whether it is close;
3. ``core_flags``: a thread per point, stopping at min_samples;
4. ``link_within`` and ``link_between``: lock-free union-find over the
   points (the hooking of :mod:`skyjoin.cluster.table_gpu`: the larger root is
   hung under the smaller with ``atomicCAS``); a thread per core point for
   the pairs inside its cell, then a thread per (cell, offset) pair for the
   pairs between two cells (each unordered pair of cells once), the adjacent
   offsets in a first launch and the farther ones in a second, so that most
   far pairs find their cells already joined;
5. clusters numbered by their lowest caller row
   (``table_gpu.ranks_by_caller_row``), then ``border``: a thread per non-core
   point.

Only the points go in and the labels come out: no pair is ever stored, so
memory is a few arrays of n entries however large T would be (a table
that fits in no GPU: docs/decisions/dbscan-fit-path.md).  Every distance
decision is the join's test, ``sum_k (x_k - y_k)^2 <= eps^2`` in float64 summed over k
in order, compiled with ``--fmad=false`` so that no multiply-add is fused:
the labels equal the CPU path's and scikit-learn's.  The same limits as
the CPU grid apply: d <= 4 and at most ``max(8 n, 2^22)`` cells over the
bounding box, else :func:`gpu_grid_dbscan` returns None and the caller takes
the join path.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from .._core import device_prims as dp
from .._core.device import cupy
from .._core.device_kernels import load
from .._core.device_reduce import column_bounds
from .._core.transfer import d2h, to_device
from ..index.fine_grid import fine_grid_shape, neighbour_offsets, positive_offsets
from ..index.grid_gpu import sort_cells_gpu
from .grid_cpu import MAX_DIMS
from .table_gpu import UNION_FIND, ranks_by_caller_row

__all__ = ["gpu_grid_dbscan", "grid_components", "grid_labels", "compiled_module"]

_BLOCK = 256

_SOURCE = r"""
extern "C" {
""" + UNION_FIND + r"""

#define MAXD 4

// squared distance of sorted points a and b, summed over k in order
__device__ __forceinline__ double d2(const double* X, int d, long long a, long long b) {
    double s = 0.0;
    for (int k = 0; k < d; ++k) { double t = X[a * d + k] - X[b * d + k]; s += t * t; }
    return s;
}

// whether no point of slot t can be within eps of a point of slot u (box gap test)
__device__ __forceinline__ bool boxes_apart(const double* lo, const double* hi, int d,
                                            long long t, long long u, double eps2) {
    double s = 0.0;
    for (int k = 0; k < d; ++k) {
        double g = lo[u * d + k] - hi[t * d + k];
        double g2 = lo[t * d + k] - hi[u * d + k];
        if (g2 > g) g = g2;
        if (g > 0.0) s += g * g;
    }
    return s > eps2;
}

// slot of the cell at offset o from cell c, or -1 (outside the grid or empty)
__device__ __forceinline__ long long neighbour_slot(long long c, int d, const long long* radix,
                                                    const int* offsets, const long long* deltas,
                                                    const int* slot_of, int o) {
    long long rem = c;
    for (int k = d - 1; k >= 0; --k) {
        long long q = rem % radix[k];
        rem /= radix[k];
        long long q2 = q + offsets[o * d + k];
        if (q2 < 0 || q2 >= radix[k]) return -1;
    }
    return slot_of[c + deltas[o]];
}

__global__ void bin(const double* X, long long n, int d, const double* lo, double side,
                    const long long* radix, long long* cell) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long c = 0;
    for (int k = 0; k < d; ++k) {
        long long q = (long long)floor((X[i * d + k] - lo[k]) / side);
        if (q < 0) q = 0; else if (q >= radix[k]) q = radix[k] - 1;
        c = c * radix[k] + q;
    }
    cell[i] = c;
}

__global__ void cell_boxes(const double* X, int d, const long long* start, long long m,
                           double eps2, double* box_lo, double* box_hi, unsigned char* close) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long a = start[t], b = start[t + 1];
    double s = 0.0;
    for (int k = 0; k < d; ++k) {
        double lo = X[a * d + k], hi = lo;
        for (long long p = a + 1; p < b; ++p) {
            double v = X[p * d + k];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        box_lo[t * d + k] = lo;
        box_hi[t * d + k] = hi;
        double w = hi - lo;
        s += w * w;
    }
    close[t] = s <= eps2 ? 1 : 0;
}

__global__ void core_flags(const double* X, long long n, int d, const long long* start,
                           const long long* cells, const int* point_slot, const int* slot_of,
                           const unsigned char* close, const double* box_lo, const double* box_hi,
                           const long long* radix, const int* offsets, const long long* deltas,
                           int n_off, double eps2, long long min_samples, unsigned char* core) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long t = point_slot[p];
    long long a = start[t], b = start[t + 1];
    long long cnt;
    if (close[t]) {
        cnt = b - a;
    } else {
        cnt = 0;
        for (long long q = a; q < b; ++q) if (d2(X, d, p, q) <= eps2) ++cnt;
    }
    if (cnt < min_samples) {
        long long c = cells[t];
        for (int o = 0; o < n_off && cnt < min_samples; ++o) {
            long long u = neighbour_slot(c, d, radix, offsets, deltas, slot_of, o);
            if (u < 0 || u == t || boxes_apart(box_lo, box_hi, d, t, u, eps2)) continue;
            for (long long q = start[u]; q < start[u + 1]; ++q)
                if (d2(X, d, p, q) <= eps2) ++cnt;
        }
    }
    core[p] = cnt >= min_samples ? 1 : 0;
}

__global__ void first_core(const long long* start, long long m, const unsigned char* core,
                           long long* first) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long f = -1;
    for (long long p = start[t]; p < start[t + 1]; ++p) if (core[p]) { f = p; break; }
    first[t] = f;
}

// core pairs inside each cell: a thread per point
__global__ void link_within(const double* X, long long n, int d, const long long* start,
                            const int* point_slot, const unsigned char* close,
                            const long long* first, const unsigned char* core, double eps2,
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

// core pairs between cell t and its cell at offset o, for o in [o_lo, o_hi) of
// the positive offsets (each unordered pair of cells once): a thread per (t, o)
__global__ void link_between(const double* X, int d, const long long* start,
                             const long long* cells, long long m, const int* slot_of,
                             const unsigned char* close, const double* box_lo,
                             const double* box_hi, const long long* first,
                             const unsigned char* core, const long long* radix,
                             const int* offsets, const long long* deltas, int o_lo, int o_hi,
                             double eps2, long long* parent) {
    long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long span = o_hi - o_lo;
    if (w >= m * span) return;
    long long t = w / span;
    int o = o_lo + (int)(w % span);
    if (first[t] < 0) return;
    long long u = neighbour_slot(cells[t], d, radix, offsets, deltas, slot_of, o);
    if (u < 0 || first[u] < 0) return;
    bool both_close = close[t] && close[u];
    if (both_close && uf_find(parent, first[t]) == uf_find(parent, first[u])) return;
    if (boxes_apart(box_lo, box_hi, d, t, u, eps2)) return;
    for (long long p = first[t]; p < start[t + 1]; ++p) {
        if (!core[p]) continue;
        for (long long q = first[u]; q < start[u + 1]; ++q) {
            if (!core[q]) continue;
            if (both_close) {
                if (d2(X, d, p, q) <= eps2) { uf_union(parent, p, q); return; }
            } else if (uf_find(parent, p) != uf_find(parent, q) && d2(X, d, p, q) <= eps2) {
                uf_union(parent, p, q);
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
__global__ void border(const double* X, long long n, int d, const long long* start,
                       const long long* cells, const int* point_slot, const int* slot_of,
                       const unsigned char* close, const double* box_lo, const double* box_hi,
                       const unsigned char* core, const long long* radix, const int* offsets,
                       const long long* deltas, int n_off, double eps2, long long* labels) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || core[p]) return;
    long long t = point_slot[p];
    long long c = cells[t];
    long long best = -1;
    for (int o = 0; o <= n_off; ++o) {
        long long u;
        if (o == n_off) {
            u = t;
        } else {
            u = neighbour_slot(c, d, radix, offsets, deltas, slot_of, o);
            if (u < 0 || u == t) continue;
        }
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
    labels[p] = best;
}

}  // extern "C"
"""


@functools.lru_cache(maxsize=None)
def compiled_module():
    """The compiled kernels (NVRTC, once per process); no fused multiply-add."""
    cp = cupy()
    return cp.RawModule(code=_SOURCE, options=("-std=c++17", "--fmad=false"))


def _blocks(n):
    return (int((n + _BLOCK - 1) // _BLOCK),)


@dataclass
class GridClusters:
    """Core flags and components of points sorted by grid cell (stages 1 to 3),
    with the grid that the border pass needs.

    ``perm[k]`` is the input row of sorted point k; ``parent[k]`` is the root
    (a sorted position) of a core point's component, -1 for other points.
    """

    Xs: object
    perm: object
    n: int
    d: int
    start: object
    cells: object
    point_slot: object
    slot_of: object
    close: object
    box_lo: object
    box_hi: object
    radix: object
    offsets: object
    deltas: object
    n_off: int
    eps2: float
    core: object
    parent: object


def grid_components(Xd, eps, min_samples, *, tick=None):
    """Stages 1 to 3 on device points Xd (float64, finite): a GridClusters, or None
    when d > 4 or the grid over the bounding box would be too large."""
    cp = cupy()
    mod = compiled_module()
    tick = tick or (lambda name: None)
    n, d = Xd.shape
    if d > MAX_DIMS or n >= 2**31 - 1:
        return None
    load(cp, "dbscan")
    lo_h, hi_h, _ = column_bounds(cp, Xd)
    shape = fine_grid_shape(lo_h, hi_h, n, eps)
    if shape is None:
        return None
    side, radix = shape
    lo = cp.asarray(lo_h)
    total = int(np.prod(radix))
    radix_d = cp.asarray(radix)
    eps2 = float(np.float64(eps) * np.float64(eps))
    # 1. bin and sort by cell
    cell = cp.empty(n, dtype=cp.int64)
    mod.get_function("bin")(_blocks(n), (_BLOCK,),
                            (Xd, np.int64(n), np.int32(d), lo, np.float64(side), radix_d, cell))
    if total < 2**31:       # 32-bit keys: half the radix passes of the sort
        cell = dp.astype(cp, cell, cp.int32)
    perm, Xs, cells, start, point_slot = sort_cells_gpu(cp, Xd, cell, cp.int64)
    del cell
    m = int(cells.size)
    slot_of = cp.empty(total, dtype=cp.int32)
    dp.fill(cp, slot_of, -1)
    dp.inverse_permutation(cp, cells, cp.int32, out=slot_of)      # slot_of[cells[t]] = t
    offsets_h, n_adjacent, deltas_h = neighbour_offsets(side, eps, radix)
    # the positive offsets, adjacent ones first (offsets_h lists those first)
    pos_idx = positive_offsets(offsets_h)
    n_pos_adjacent = int((pos_idx < n_adjacent).sum())
    offsets = cp.asarray(offsets_h.astype(np.int32).ravel())
    deltas = cp.asarray(deltas_h.astype(np.int64))
    pos_offsets = cp.asarray(offsets_h[pos_idx].astype(np.int32).ravel())
    pos_deltas = cp.asarray(deltas_h[pos_idx].astype(np.int64))
    n_off, n_pos = int(offsets_h.shape[0]), int(pos_idx.size)
    box_lo = cp.empty((m, d), dtype=cp.float64)
    box_hi = cp.empty((m, d), dtype=cp.float64)
    close = cp.empty(m, dtype=cp.uint8)
    mod.get_function("cell_boxes")(_blocks(m), (_BLOCK,),
                                   (Xs, np.int32(d), start, np.int64(m), np.float64(eps2),
                                    box_lo, box_hi, close))
    tick("grid")
    # 2. core flags
    core = cp.empty(n, dtype=cp.uint8)
    mod.get_function("core_flags")(
        _blocks(n), (_BLOCK,),
        (Xs, np.int64(n), np.int32(d), start, cells, point_slot, slot_of, close, box_lo, box_hi,
         radix_d, offsets, deltas, np.int32(n_off), np.float64(eps2), np.int64(min_samples), core))
    tick("core")
    # 3. union-find over the core points
    parent = cp.empty(n, dtype=cp.int64)
    mod.get_function("init_parent")(_blocks(n), (_BLOCK,), (core, np.int64(n), parent))
    first = cp.empty(m, dtype=cp.int64)
    mod.get_function("first_core")(_blocks(m), (_BLOCK,), (start, np.int64(m), core, first))
    mod.get_function("link_within")(
        _blocks(n), (_BLOCK,),
        (Xs, np.int64(n), np.int32(d), start, point_slot, close, first, core, np.float64(eps2),
         parent))
    for o_lo, o_hi in ((0, n_pos_adjacent), (n_pos_adjacent, n_pos)):
        if o_hi > o_lo:
            mod.get_function("link_between")(
                _blocks(m * (o_hi - o_lo)), (_BLOCK,),
                (Xs, np.int32(d), start, cells, np.int64(m), slot_of, close, box_lo, box_hi,
                 first, core, radix_d, pos_offsets, pos_deltas, np.int32(o_lo), np.int32(o_hi),
                 np.float64(eps2), parent))
    mod.get_function("compress")(_blocks(n), (_BLOCK,), (core, np.int64(n), parent))
    tick("link")
    return GridClusters(Xs, perm, n, d, start, cells, point_slot, slot_of, close, box_lo, box_hi,
                        radix_d, offsets, deltas, n_off, eps2, core, parent)


def grid_labels(g: GridClusters, root_label):
    """Stage 4: labels in sorted order.  A core point takes its root's
    ``root_label``; a non-core point the lowest label of its core neighbours
    (-1: noise)."""
    cp = cupy()
    mod = compiled_module()
    labels = cp.empty(g.n, dtype=cp.int64)
    mod.get_function("core_labels")(_blocks(g.n), (_BLOCK,),
                                    (g.core, g.parent, root_label, np.int64(g.n), labels))
    mod.get_function("border")(
        _blocks(g.n), (_BLOCK,),
        (g.Xs, np.int64(g.n), np.int32(g.d), g.start, g.cells, g.point_slot, g.slot_of, g.close,
         g.box_lo, g.box_hi, g.core, g.radix, g.offsets, g.deltas, np.int32(g.n_off),
         np.float64(g.eps2), labels))
    return labels


def gpu_grid_dbscan(X, eps, min_samples, *, timings=None, on_device=False):
    """Exact DBSCAN (scikit-learn's labels) on a fine grid on the GPU, or None.

    Parameters
    ----------
    X : array_like or cupy.ndarray of float64, shape (n, d)
        Validated, finite points (host or device).
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
    Xd = to_device(cp, X, "X", np.float64)        # pinned staging for host input
    n = Xd.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.intp)
    tick("h2d")
    g = grid_components(Xd, eps, min_samples, tick=tick)
    del Xd
    if g is None:
        return None
    # 4. clusters numbered by their lowest caller row, then border points
    labels = grid_labels(g, ranks_by_caller_row(cp, compiled_module(), g.core, g.parent, g.perm, n))
    tick("labels")
    core_out = cp.empty(n, dtype=cp.int32)           # back in the caller's order
    dp.scatter(cp, core_out, g.perm, dp.astype(cp, g.core, cp.int32))
    labels_out = cp.empty(n, dtype=cp.int64)
    dp.scatter(cp, labels_out, g.perm, labels)
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
        if self.timings is None:
            return
        self.cp.cuda.get_current_stream().synchronize()
        now = time.perf_counter()
        self.timings[name] = now - self.t
        self.t = now
