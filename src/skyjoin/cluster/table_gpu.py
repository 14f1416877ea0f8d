"""DBSCAN entirely on the GPU: core flags, union-find and border points over a device CSR.

Going beyond HYBRID-DBSCAN (which ships the neighbour table T to the host for
the point assignment, §3), a single clustering never needs T on the host:

1. ``core``: a point is core iff |N_eps| + 1 (or the weight of its
   neighbourhood, itself included, summed exactly and rounded once, as on
   the CPU) >= min_samples: one CuPy expression on the row lengths (a warp
   per row for weights, and the rows whose sum lies within rounding of
   min_samples summed exactly on the host);
2. ``hook``: union-find over the edges i < j between core points, lock-free:
   a warp per row, each lane takes edges and links the larger root under the
   smaller with ``atomicCAS`` (ECL-CC style hooking, with path halving by
   plain stores, which only ever move a pointer to an ancestor).  Roots are
   thus the lowest core index of each component, as on the CPU;
3. ``compress``: every core point finds its root;
4. clusters numbered by an exclusive scan over the roots (order of lowest
   core index = scikit-learn's order), and ``border``: a warp per non-core
   row takes the minimum label of its core neighbours (warp-shuffle min).

Only the labels (8 bytes per point) come back to the host, instead of 4
bytes per pair.  The labels equal scikit-learn's for the same reasons as the
CPU assignment (see ``skyjoin.cluster.union_find``).
"""

from __future__ import annotations

import functools
import time

import numpy as np

from .._core import device_prims as dp
from .._core.device import cupy
from .._core.device_kernels import load
from .._core.transfer import d2h
from .core_points import exact_row_sums, integer_weights, naive_sum_decides
from .hybrid import neighbor_table

__all__ = ["gpu_dbscan_table", "gpu_dbscan_points"]

#: The lock-free union-find and the cluster numbering of the GPU kernels (this
#: module's and ``grid_gpu``'s).
UNION_FIND = r"""
// a point's root, halving the path on the way; parent[x] <= x always.  Loads
// and stores are volatile: other threads relink roots concurrently, and a
// value kept in a register would hide their links.
__device__ __forceinline__ long long uf_find(long long* parent_, long long x) {
    volatile long long* parent = parent_;
    long long p = parent[x];
    while (p != x) {
        long long gp = parent[p];
        if (gp != p) parent[x] = gp;   // benign race: gp is an ancestor of x
        x = p;
        p = gp;
    }
    return x;
}

// after every union: the root of x by a walk that only reads.  A find that
// halves paths would race with compress's final stores (a thread could store
// a grandparent over a root that another thread has just stored, and leave a
// point pointing below its root); each thread stores only a final root, so
// concurrent walks still reach it.
__device__ __forceinline__ long long uf_root(volatile long long* parent, long long x) {
    while (parent[x] != x) x = parent[x];
    return x;
}

// after every union: the root of every core point
__global__ void compress(const unsigned char* core, long long n, long long* parent) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !core[i]) return;
    volatile long long* vparent = parent;
    vparent[i] = uf_root(vparent, i);
}

__device__ __forceinline__ void uf_union(long long* parent, long long a, long long b) {
    while (true) {
        a = uf_find(parent, a);
        b = uf_find(parent, b);
        if (a == b) return;
        if (a > b) { long long t = a; a = b; b = t; }
        // hang the larger root b under the smaller root a, if b is still a root
        long long old = (long long)atomicCAS((unsigned long long*)&parent[b],
                                             (unsigned long long)b, (unsigned long long)a);
        if (old == b) return;
        b = old;
    }
}


// The numbering of the clusters (component_lows).  key[i] = parent[c] * span
// + order[c] for the core point c = ci[i] (parent, span < 2**31: no overflow).
__global__ void component_keys(const long long* ci, long long m, const long long* parent,
                               const long long* order, long long span, long long* key) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    long long c = ci[i];
    key[i] = parent[c] * span + order[c];
}

// flags[i] = 1 where the sorted key[i] starts a root's run (key / span differs from
// the previous key's), else 0
__global__ void root_heads(const long long* key, long long m, long long span, int* flags) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    flags[i] = (i == 0 || key[i] / span != key[i - 1] / span) ? 1 : 0;
}

// the root and the lowest order value of each run starting at heads[j]
__global__ void split_keys(const long long* key, const long long* heads, long long r,
                           long long span, long long* roots, long long* low) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= r) return;
    long long k = key[heads[j]];
    roots[j] = k / span;
    low[j] = k % span;
}

// parent[i] = i for a core point, -1 for the others
__global__ void init_parent(const unsigned char* core, long long n, long long* parent) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    parent[i] = core[i] ? i : -1;
}

"""

_SOURCE = r"""
extern "C" {
""" + UNION_FIND + r"""
// core iff the row's length + 1 (itself) >= min_samples
__global__ void core_from_lengths(const long long* indptr, long long n, long long min_samples,
                                  unsigned char* core) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    core[i] = (indptr[i + 1] - indptr[i] + 1 >= min_samples) ? 1 : 0;
}

// flags[i] = 1 for a core point that is its own root, else 0
__global__ void root_flags(const unsigned char* core, const long long* parent, long long n,
                           int* flags) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    flags[i] = (core[i] && parent[i] == i) ? 1 : 0;
}

// naive sum and sum of |w| of each row's neighbourhood, itself included: one warp per
// row (additions only: no contraction into an FMA changes a rounding).  Any order
// of additions keeps the error bound that dbscan.core_points.naive_sum_decides assumes.
__global__ void weighted_sums(const long long* indptr, const int* indices, const double* w,
                              long long n, double* sums, double* abs_sums) {
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= n) return;
    double s = 0.0, a = 0.0;
    for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += 32) {
        double x = w[indices[k]];
        s += x;
        a += fabs(x);
    }
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_down_sync(0xffffffffu, s, off);
        a += __shfl_down_sync(0xffffffffu, a, off);
    }
    if (lane == 0) {
        double own = w[row];
        sums[row] = s + own;
        abs_sums[row] = a + fabs(own);
    }
}

// union-find over the edges i < j between core points: one warp per row
__global__ void hook(const long long* indptr, const int* indices, const unsigned char* core,
                     long long n, long long* parent) {
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= n || !core[row]) return;
    for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += 32) {
        long long j = indices[k];
        if (j > row && core[j]) uf_union(parent, row, j);
    }
}


// label of each core point from the scan of the roots; -1 for the others
__global__ void core_labels(const unsigned char* core, const long long* parent,
                            const long long* root_rank, long long n, long long* labels) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    labels[i] = core[i] ? root_rank[parent[i]] : -1;
}

// a non-core point takes the lowest label of its core neighbours: one warp per row
__global__ void border(const long long* indptr, const int* indices, const unsigned char* core,
                       const long long* core_label, long long n, long long* labels) {
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= n || core[row]) return;
    long long best = 0x7fffffffffffffffLL;
    for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += 32) {
        long long j = indices[k];
        if (core[j]) { long long l = core_label[j]; if (l < best) best = l; }
    }
    for (int off = 16; off > 0; off >>= 1) {
        long long o = __shfl_down_sync(0xffffffffu, best, off);
        if (o < best) best = o;
    }
    if (lane == 0) labels[row] = (best == 0x7fffffffffffffffLL) ? -1 : best;
}

}  // extern "C"
"""

_BLOCK = 256


@functools.lru_cache(maxsize=None)
def _module():
    """The compiled kernels (NVRTC, once per process)."""
    cp = cupy()
    return cp.RawModule(code=_SOURCE, options=("-std=c++17",))


def _warp_grid(n):
    """Blocks for one warp per row."""
    return (int((n * 32 + _BLOCK - 1) // _BLOCK),)


def _thread_grid(n):
    """Blocks for one thread per row."""
    return (int((n + _BLOCK - 1) // _BLOCK),)


def gpu_dbscan_table(indptr, indices, min_samples, *, sample_weight=None, order=None,
                     timings=None):
    """DBSCAN labels from a neighbour table that lives on the GPU.

    Parameters
    ----------
    indptr : cupy.ndarray of int64, shape (n + 1,)
    indices : cupy.ndarray of int32
        Symmetric CSR neighbour table on the device, self pairs excluded
        (what ``self_join(..., device="gpu", on_device=True)`` returns).
    min_samples : int
    sample_weight : array_like of float, shape (n,), optional
        Weights (host or device).  A point is core iff the exact sum of its
        neighbourhood's weights, itself included, rounded once to float64
        (``math.fsum``), is at least min_samples: the rule of the CPU
        (``core_points.core_points``).  The warp sums decide every row that
        ``core_points.naive_sum_decides`` settles; the rows it leaves open (sums
        within rounding of min_samples) are summed exactly on the host
        (``_weighted_core``).
    order : array_like of int, shape (n,), optional
        The caller's row id of each table point, when the table is over the
        points in another order (a sweep builds it in cell order).  Clusters
        are then numbered by the lowest *caller* row of their core points,
        as scikit-learn numbers them, and border points take the lowest of
        those numbers; without it, by the lowest table index.
    timings : dict, optional
        Filled with "core", "hook", "labels" seconds.

    Returns
    -------
    is_core : cupy.ndarray of uint8, shape (n,)
    labels : cupy.ndarray of int64, shape (n,)
        scikit-learn's labels (noise -1), in the table's point order.

    Raises
    ------
    ValueError
        Arrays of the wrong dtype or shape.

    Examples
    --------
    >>> import cupy as cp                                         # doctest: +SKIP
    >>> indptr = cp.asarray([0, 1, 3, 4, 4])                     # doctest: +SKIP
    >>> indices = cp.asarray([1, 0, 2, 1], cp.int32)              # doctest: +SKIP
    >>> core, labels = gpu_dbscan_table(indptr, indices, 2)      # doctest: +SKIP
    >>> labels.get().tolist()                                    # doctest: +SKIP
    [0, 0, 0, -1]
    """
    cp = cupy()
    indptr = cp.ascontiguousarray(cp.asarray(indptr), dtype=cp.int64)
    indices = cp.asarray(indices)
    if indices.dtype != cp.int32:
        raise ValueError(f"indices must be int32 on the device, got {indices.dtype}")
    indices = cp.ascontiguousarray(indices)
    n = int(indptr.shape[0]) - 1
    if n < 0:
        raise ValueError("indptr must have n + 1 >= 1 entries")
    load(cp, "dbscan")
    mod = _module()
    t0 = time.perf_counter()
    if sample_weight is None:
        is_core = cp.empty(n, dtype=cp.uint8)
        if n:
            mod.get_function("core_from_lengths")(_thread_grid(n), (_BLOCK,),
                                                  (indptr, np.int64(n), np.int64(min_samples),
                                                   is_core))
    else:
        w = cp.ascontiguousarray(cp.asarray(sample_weight, dtype=cp.float64))
        if w.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
        sums = cp.empty(n, dtype=cp.float64)
        abs_sums = cp.empty(n, dtype=cp.float64)
        if n:
            mod.get_function("weighted_sums")(_warp_grid(n), (_BLOCK,),
                                              (indptr, indices, w, np.int64(n), sums, abs_sums))
        is_core = _weighted_core(cp, indptr, indices, w, sums, abs_sums, min_samples)
    if n == 0:
        return is_core, cp.zeros(0, dtype=cp.int64)
    parent = dp.arange(cp, n, cp.int64)
    cp.cuda.get_current_stream().synchronize()
    t1 = time.perf_counter()
    mod.get_function("hook")(_warp_grid(n), (_BLOCK,),
                             (indptr, indices, is_core, np.int64(n), parent))
    mod.get_function("compress")(_thread_grid(n), (_BLOCK,), (is_core, np.int64(n), parent))
    cp.cuda.get_current_stream().synchronize()
    t2 = time.perf_counter()
    if order is None:                   # label of each root: roots counted before it
        flags = cp.empty(n, dtype=cp.int32)
        mod.get_function("root_flags")(_thread_grid(n), (_BLOCK,),
                                       (is_core, parent, np.int64(n), flags))
        root_rank = dp.scan(cp, flags, cp.int64, inclusive=True, init=-1)
    else:
        root_rank = ranks_by_caller_row(cp, mod, is_core, parent, order, n)
    core_label = cp.empty(n, dtype=cp.int64)
    mod.get_function("core_labels")(_thread_grid(n), (_BLOCK,),
                                    (is_core, parent, root_rank, np.int64(n), core_label))
    labels = dp.astype(cp, core_label, cp.int64)
    mod.get_function("border")(_warp_grid(n), (_BLOCK,),
                               (indptr, indices, is_core, core_label, np.int64(n), labels))
    cp.cuda.get_current_stream().synchronize()
    t3 = time.perf_counter()
    if timings is not None:
        timings.update(core=t1 - t0, hook=t2 - t1, labels=t3 - t2)
    return is_core, labels


def _weighted_core(cp, indptr, indices, w, sums, abs_sums, min_samples):
    """Core flags (uint8, device) from each row's naive weight sum and sum of |w|.

    The rule of ``core_points.core_points``: core iff the correctly rounded sum
    of the neighbourhood's weights (its own included) is >= min_samples.
    Rows that ``naive_sum_decides`` settles take ``sums >= min_samples``, and
    so do all rows when ``integer_weights`` holds (the sums are then exact);
    the others (sums within rounding of min_samples) have their weights
    brought to the host and summed exactly by ``exact_row_sums``.  O(n) on
    the device, plus O(row length) transfer and exact summing per open row.
    """
    m = float(min_samples)
    is_core = sums >= m
    if integer_weights(w):
        return is_core.astype(cp.uint8)
    k = indptr[1:] - indptr[:-1] + 1
    rows = cp.flatnonzero(~naive_sum_decides(sums, abs_sums, k, m))
    if rows.size:
        exact = _exact_row_weights(cp, indptr, indices, w, rows)
        is_core[rows] = cp.asarray(exact >= m)
    return is_core.astype(cp.uint8)


def _exact_row_weights(cp, indptr, indices, w, rows):
    """Correctly rounded weight of the neighbourhoods (own weight included) of the
    given rows of a device table: their weights gathered on the device, summed on
    the host (``exact_row_sums``).  O(sum of the rows' lengths)."""
    starts = cp.asnumpy(indptr[rows]).astype(np.int64)
    lens = cp.asnumpy(indptr[rows + 1]).astype(np.int64) - starts
    r = len(starts)
    ptr = np.zeros(r + 1, dtype=np.int64)
    np.cumsum(lens + 1, out=ptr[1:])
    # neighbour q of the concatenated rows lies at indptr position q + starts[j] - off[j]
    off = ptr[:-1] - np.arange(r, dtype=np.int64)
    pos = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(starts - off, lens)
    values = np.empty(int(ptr[-1]), dtype=np.float64)
    own = np.zeros(len(values), dtype=bool)
    own[ptr[:-1]] = True
    values[own] = cp.asnumpy(w[rows])
    values[~own] = cp.asnumpy(w[indices[cp.asarray(pos)]])
    return exact_row_sums(ptr, values)


def component_lows(cp, mod, is_core, parent, order, span):
    """Each component's root and the lowest ``order`` value of its core points.

    The core points' keys ``parent * span + order`` sorted (Thrust); the
    first key of each root's run holds the component's lowest value.
    ``order`` values lie in [0, span), span < 2**31 (no overflow).  ``mod``
    is a compiled module of this package's kernels (``_module`` or
    ``grid_gpu.compiled_module``); the other steps are device primitives.
    O(n) plus one radix sort.

    Returns
    -------
    roots, low : cupy.ndarray of int64
        Roots ascending, and the lowest value of each root's component.
    """
    ci, _ = dp.compact(cp, dp.astype(cp, is_core, cp.int32), cp.int64)
    m = int(ci.size)
    if not m:
        z = cp.zeros(0, dtype=cp.int64)
        return z, z
    span = np.int64(span)
    key = cp.empty(m, dtype=cp.int64)
    mod.get_function("component_keys")(_thread_grid(m), (_BLOCK,),
                                       (ci, np.int64(m), parent, order, span, key))
    key.sort()
    heads = cp.empty(m, dtype=cp.int32)
    mod.get_function("root_heads")(_thread_grid(m), (_BLOCK,), (key, np.int64(m), span, heads))
    first, _ = dp.compact(cp, heads, cp.int64)
    r = int(first.size)
    roots = cp.empty(r, dtype=cp.int64)
    low = cp.empty(r, dtype=cp.int64)
    mod.get_function("split_keys")(_thread_grid(r), (_BLOCK,),
                                   (key, first, np.int64(r), span, roots, low))
    return roots, low


def ranks_by_caller_row(cp, mod, is_core, parent, order, n):
    """Label of each root: the rank of its component's lowest caller row
    (:func:`component_lows` with ``order`` the caller rows, the roots ranked
    by it: a stable argsort).  O(n) plus two radix sorts.

    Returns
    -------
    cupy.ndarray of int64, shape (n,)
        The label of each root (-1 at the points that are not roots).
    """
    if not hasattr(order, "__cuda_array_interface__"):
        order = cp.asarray(np.asarray(order, dtype=np.int64))
    if order.shape != (n,):
        raise ValueError(f"order must have shape ({n},), got {order.shape}")
    if order.dtype != np.int64:
        order = order.astype(cp.int64)
    root_rank = cp.empty(n, dtype=cp.int64)
    dp.fill(cp, root_rank, -1)
    roots, low = component_lows(cp, mod, is_core, parent, order, max(n, 1))
    if roots.size:
        by_low = dp.argsort(cp, low)
        dp.inverse_permutation(cp, dp.take(cp, roots, by_low), cp.int64, out=root_rank)
    return root_rank


def gpu_dbscan_points(X, eps, min_samples, *, sample_weight=None, precision="float64",
                      timings=None, memory_limit="auto", on_device=False,
                      join_algorithm="grid"):
    """DBSCAN of points entirely on the GPU: the GPU join keeps T on the device.

    Parameters
    ----------
    X : array_like or cupy.ndarray, shape (n, d)
        Points conditioned for ``precision`` (``skyjoin._core.conditioning``):
        the join runs through its engine entry, which checks nothing.
    eps : float
        Conditioned radius.
    min_samples : int
    sample_weight : array_like, optional
    precision : {"float64", "float32"}
    timings : dict, optional
        Filled with "table" and the phases of ``gpu_dbscan_table``.
    memory_limit : int or "auto"
        Bytes T may take in GPU memory (as ``skyjoin.self_join``).
    on_device : bool, default False
        Return CuPy arrays, with no copy to the host (the plan's
        ``DBSCANPlan.on_device``).
    join_algorithm : {"grid", "brute"} or Projection
        The join's algorithm for T (``DBSCANPlan.join_algorithm``).

    Returns
    -------
    core_sample_indices : ndarray of int64 (host; CuPy with ``on_device``)
    labels : ndarray of intp (host; CuPy with ``on_device``)

    Raises
    ------
    MemoryError
        If the neighbour table does not fit in GPU memory
        (``skyjoin.ResultTooLargeError``, raised before it is allocated; the
        caller then streams it to the host: HYBRID-DBSCAN).
    skyjoin.GPUUnavailableError
        Without a usable GPU.
    """
    t0 = time.perf_counter()
    nt = neighbor_table(X, eps, device="gpu", precision=precision, on_device=True,
                        memory_limit=memory_limit, algorithm=join_algorithm)
    t1 = time.perf_counter()
    is_core, labels = gpu_dbscan_table(nt.indptr, nt.indices, min_samples,
                                       sample_weight=sample_weight, timings=timings)
    del nt
    cp = cupy()
    # the core rows found on the device, and both arrays brought back through
    # pinned staging into host memory of alloc_host's page policy (d2h), not
    # by a pageable copy into fresh memory and a host pass over the flags
    # (docs/decisions/dbscan-fit-path.md has the figures)
    xp = cp if on_device else np
    if labels.size:
        flags = is_core.view(cp.uint8) if is_core.dtype == cp.bool_ else is_core
        core_h = dp.compact(cp, dp.astype(cp, flags, cp.int32), cp.int64)[0]
        labels_h = labels.astype(np.intp, copy=False)
        if not on_device:
            core_h, labels_h = d2h(cp, core_h), d2h(cp, labels_h)
    else:
        core_h, labels_h = xp.zeros(0, dtype=np.int64), xp.zeros(0, dtype=np.intp)
    if timings is not None:
        timings["table"] = t1 - t0
        timings["to_host"] = time.perf_counter() - t1 - sum(
            timings.get(k, 0.0) for k in ("core", "hook", "labels"))
    return core_h, labels_h
