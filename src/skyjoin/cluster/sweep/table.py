"""Sweep table path: every min_samples of one eps assigned incrementally from T (§7.6).

Taken in decreasing order of min_samples, the core set only grows, so the
union-find forest of the previous min_samples stays valid and only the edges
of the newly core points are joined (``add_core_level``): every edge of T
is joined once for the whole sweep, O(pairs) in all plus O(n) per level for
the labels.  With T kept on the GPU, each level is clustered there
(``table_gpu.gpu_dbscan_table``).
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from ..._core import device as _device
from ..._core.config import NUMBA_CACHE
from ..core_points import weighted_neighbourhood
from ..table_gpu import gpu_dbscan_table
from ..union_find import core_forest, find, hang, labels_from_roots, roots


@njit(cache=NUMBA_CACHE, nogil=True)
def add_core_level(indptr, indices, weight, level, previous_level, parent):
    """Make the points with level <= weight < previous_level core and join their edges.

    ``parent`` is the union-find forest of the core points of the previous
    (larger) min_samples, -1 for non-core points; links always hang the
    larger root under the smaller, so roots stay the lowest core index.
    """
    n = indptr.shape[0] - 1
    for i in range(n):
        if weight[i] >= level and weight[i] < previous_level:
            parent[i] = i
    for i in range(n):
        if not (weight[i] >= level and weight[i] < previous_level):
            continue
        ri = find(parent, i)            # kept across the row: the one union-find's find
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            p = parent[j]
            if p < 0 or p == ri:
                continue
            ri = hang(parent, ri, p)


def assign_levels(nt, min_samples_desc, sample_weight, order, on_device=False):
    """Yield (min_samples, core indices, labels, n_clusters, seconds), incrementally (§7.6).

    The table's point p is the caller's row ``order[p]``; results come back
    in the caller's order, as CuPy arrays with ``on_device`` (the plan's
    ``DBSCANPlan.on_device``: a table on the GPU is assigned there and its
    results stay; a host table's results are uploaded, O(n)).
    """
    if nt.on_device:
        yield from _assign_levels_gpu(nt, min_samples_desc, sample_weight, order, on_device)
        return
    if on_device:
        cp = _device.cupy()
        for m, core, labels, n_clusters, dt in assign_levels(nt, min_samples_desc,
                                                              sample_weight, order):
            yield m, cp.asarray(core), cp.asarray(labels), n_clusters, dt
        return
    indptr = np.ascontiguousarray(nt.indptr, dtype=np.int64)
    indices = nt.indices
    if sample_weight is None:
        weight = (np.diff(indptr) + 1).astype(np.float64)
    else:
        weight = weighted_neighbourhood(indptr, indices, sample_weight[order], True)
    parent = None
    previous = np.inf
    for m in min_samples_desc:
        t0 = time.perf_counter()
        if parent is None:  # the first level from nothing: the parallel forests
            parent = core_forest(indptr, indices, (weight >= m).view(np.uint8))
        else:               # then only the new core points' edges
            add_core_level(indptr, indices, weight, float(m), previous, parent)
        previous = float(m)
        is_core = (parent >= 0).view(np.uint8)
        labels = labels_from_roots(roots(parent), is_core, indptr, indices, order)
        core_out = np.empty_like(is_core)
        core_out[order] = is_core
        labels_out = np.empty_like(labels)
        labels_out[order] = labels
        yield (m, np.flatnonzero(core_out), labels_out, count_clusters(labels_out),
               time.perf_counter() - t0)


def _assign_levels_gpu(nt, min_samples_desc, sample_weight, order, on_device=False):
    """Each min_samples assigned on the GPU from the table kept there (§7.6 on the
    device); the results copied to the host unless ``on_device``."""
    cp = _device.cupy()
    w = None if sample_weight is None else cp.asarray(sample_weight[order])
    order_d = cp.asarray(order)          # numbering by caller rows, as scikit-learn's
    n = nt.shape[0]
    for m in min_samples_desc:
        t0 = time.perf_counter()
        is_core, labels = gpu_dbscan_table(nt.indptr, nt.indices, m, sample_weight=w,
                                           order=order_d)
        if on_device:
            core_d = cp.empty(n, dtype=cp.uint8)
            core_d[order_d] = is_core.astype(cp.uint8, copy=False)
            labels_d = cp.empty(n, dtype=np.intp)
            labels_d[order_d] = labels
            yield (m, cp.flatnonzero(core_d).astype(np.int64, copy=False), labels_d,
                   count_clusters(labels_d), time.perf_counter() - t0)
            continue
        core_out = np.empty(n, dtype=np.uint8)
        core_out[order] = cp.asnumpy(is_core)
        labels_out = np.empty(n, dtype=np.intp)
        labels_out[order] = cp.asnumpy(labels)
        yield (m, np.flatnonzero(core_out), labels_out, count_clusters(labels_out),
               time.perf_counter() - t0)


def count_clusters(labels):
    return int(labels.max()) + 1 if len(labels) else 0
