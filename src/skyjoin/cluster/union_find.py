"""DBSCAN point assignment over a neighbour table (HYBRID-DBSCAN, §3, Algorithm 1 line 7).

Once the neighbour table T is built (by the join on the CPU or the GPU),
DBSCAN needs no more distance computations: it only has to find the core
points and the connected components that core points form through T, and to
attach the border points.  The paper runs the classic sequential expansion on
T; here the same result is computed in parallel with Numba and without any
recursion whose depth grows with n:

1. ``core_points``: a point is core iff the size of its eps-neighbourhood,
   itself included, is at least ``min_samples`` (with weights: the exact
   sum of their float64 values rounded once, see "Weighted neighbourhoods");
2. ``union_find_core_components``: union-find over the CSR edges between core
   points, one private forest per thread over a balanced slice of the rows,
   then the forests merged pairwise.  Every link hangs the larger root under
   the smaller one, so the root of a component is its lowest-index core point;
3. ``point_assignment``: clusters numbered 0..k-1 in order of that root, and
   every non-core point takes the lowest label among its core neighbours
   (noise, -1, if it has none).

Why this is exactly scikit-learn's labelling
--------------------------------------------
scikit-learn (``sklearn/cluster/_dbscan_inner.pyx``) scans i = 0..n-1 and, at
each core point that is still unlabelled, starts a new cluster with the next
label and expands it completely with a stack: every reached point that is
still unlabelled gets the label, and only core points push their neighbours.

* A core point can only be labelled by the expansion of its own component
  (a path of core points leads from the seed to it and the expansion follows
  all of it), so the seed of a component is the first of its core points met
  by the scan: its lowest-index core point.  Clusters are therefore numbered
  in increasing order of their lowest-index core point, which is the order of
  our roots.
* Each expansion finishes before the scan starts the next cluster, and every
  core point of the component is expanded, so a non-core point is reached by
  the first (lowest-numbered) cluster that has a core point among its
  neighbours, and keeps that label (labels are never overwritten).  Since the
  neighbourhood relation of a join is symmetric, "a core point of cluster c
  lists b" is the same as "b lists a core point of cluster c", which is what
  ``assign_border_points`` reads.  Hence border label = lowest label among the
  clusters of its core neighbours.

For a neighbourhood relation that is not symmetric (a user's precomputed
sparse graph can be anything) the second step does not hold, and
``dbscan_inner_sequential`` follows scikit-learn's expansion literally.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE
from .core_points import core_points

__all__ = [
    "find",
    "union",
    "roots",
    "edge_roots",
    "number_clusters_by_order",
    "core_forest",
    "union_find_core_components",
    "assign_border_points",
    "point_assignment",
    "dbscan_inner_sequential",
    "labels_from_roots",
    "labels_from_table",
]


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def find(parent, x):
    """Root of x, halving the path on the way (parents always have lower ids)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def hang(parent, ri, p):
    """Join the set of p to the root ri, the larger root under the smaller;
    returns the root of the joined set (for a caller that keeps ri across a
    row of neighbours)."""
    rj = find(parent, p)
    if rj < ri:
        parent[ri] = rj
        return rj
    if rj > ri:
        parent[rj] = ri
    return ri


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def union(parent, a, b):
    """Join the sets of a and b, hanging the larger root under the smaller."""
    ra = find(parent, a)
    rb = find(parent, b)
    if ra < rb:
        parent[rb] = ra
    elif rb < ra:
        parent[ra] = rb


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _forests(indptr, indices, bounds, parents):
    """One union-find forest per slice of rows, over edges i < j between core points.

    ``parents[t][i]`` is -1 for a non-core point, so one load per edge both
    filters non-core neighbours and, in the common case where the neighbour
    already hangs directly under the current root, skips the edge.
    """
    n_slices = bounds.shape[0] - 1
    for t in prange(n_slices):
        parent = parents[t]
        for i in range(bounds[t], bounds[t + 1]):
            if parent[i] < 0:
                continue
            ri = find(parent, i)
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                if j <= i:
                    continue
                p = parent[j]
                if p < 0 or p == ri:
                    continue
                ri = hang(parent, ri, p)


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _merge_forests(parents):
    """Merge the forests pairwise (log2 rounds) into parents[0]."""
    n_forests = parents.shape[0]
    n = parents.shape[1]
    step = 1
    while step < n_forests:
        n_pairs = (n_forests + 2 * step - 1) // (2 * step)
        for p in prange(n_pairs):
            a = 2 * step * p
            b = a + step
            if b < n_forests:
                dst = parents[a]
                src = parents[b]
                for i in range(n):
                    if src[i] >= 0 and src[i] != i:
                        union(dst, i, find(src, i))
        step *= 2


@njit(cache=NUMBA_CACHE, nogil=True)
def roots(parent):
    """Root of every core point (-1 for the others) in one increasing pass.

    Valid because parent[i] <= i always, so the root of parent[i] is known
    by the time i is reached.
    """
    n = parent.shape[0]
    root = np.empty(n, dtype=np.int64)
    for i in range(n):
        p = parent[i]
        if p < 0:
            root[i] = -1
        else:
            root[i] = i if p == i else root[p]
    return root


@njit(cache=NUMBA_CACHE, nogil=True)
def edge_roots(n, a, b):
    """Root of each of n nodes once the sets of ``a[k]`` and ``b[k]`` are joined for
    every edge k: the lowest node of its component.  An edge list needs no
    CSR table; one thread, O(n + E) (path halving, smaller root kept)."""
    parent = np.arange(n, dtype=np.int64)
    for k in range(a.shape[0]):
        union(parent, a[k], b[k])
    return roots(parent)


def _row_slices(indptr, n_slices):
    """Row bounds that split the table into slices of about equal edge counts."""
    n = len(indptr) - 1
    targets = np.linspace(0, indptr[-1], n_slices + 1)
    bounds = np.searchsorted(indptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n
    return np.maximum.accumulate(np.minimum(bounds, n))


def core_forest(indptr, indices, is_core, n_threads=None, min_edges_per_slice=65536):
    """A union-find forest of the core points through a symmetric neighbour table.

    Private forests over slices of rows of about equal edge counts, built in
    parallel, then merged pairwise.  ``parent[i]`` is -1 for a non-core
    point, else a core point of its component with ``parent[i] <= i``; roots
    are the lowest index of their component (the form ``add_core_level``
    extends).  Parameters as ``union_find_core_components``.
    """
    n = len(indptr) - 1
    if n_threads is None:
        n_threads = numba.get_num_threads()
    n_slices = int(max(1, min(n_threads, indptr[-1] // max(1, min_edges_per_slice))))
    idx_t = np.int32 if n < 2**31 else np.int64
    parents = np.empty((n_slices, n), dtype=idx_t)
    parents[:] = np.where(is_core.view(bool), np.arange(n, dtype=idx_t), idx_t(-1))
    bounds = _row_slices(indptr, n_slices)
    _forests(indptr, indices, bounds, parents)
    if n_slices > 1:
        _merge_forests(parents)
        return parents[0].copy()  # not a view holding every slice's forest
    return parents[0]


def union_find_core_components(indptr, indices, is_core, n_threads=None,
                               min_edges_per_slice=65536):
    """Connected components of the core points through a symmetric neighbour table.

    Parameters
    ----------
    indptr, indices : ndarray
        CSR neighbour table (symmetric; self entries are ignored).
    is_core : ndarray of uint8
    n_threads : int, optional
        Number of private forests (default: Numba's thread count).
    min_edges_per_slice : int
        No forest gets fewer edges than this (small tables use one forest).

    Returns
    -------
    ndarray of int64
        For each core point the lowest index of a core point in its component;
        -1 for the other points.
    """
    return roots(core_forest(indptr, indices, is_core, n_threads, min_edges_per_slice))


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def assign_border_points(indptr, indices, is_core, labels):
    """Give each non-core point the lowest label of its core neighbours (in place)."""
    n = indptr.shape[0] - 1
    for i in prange(n):
        if is_core[i]:
            continue
        best = -1
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if is_core[j]:
                lab = labels[j]
                if best < 0 or lab < best:
                    best = lab
        labels[i] = best


@njit(cache=NUMBA_CACHE, nogil=True)
def _number_clusters(root, is_core):
    """Cluster labels of core points: rank of their root; -1 elsewhere."""
    n = root.shape[0]
    labels = np.full(n, -1, dtype=np.intp)
    next_label = 0
    for i in range(n):
        if is_core[i]:
            if root[i] == i:
                labels[i] = next_label
                next_label += 1
            else:
                labels[i] = labels[root[i]]
    return labels


@njit(cache=NUMBA_CACHE, nogil=True)
def _roots_by_first_id(root, is_core, order):
    """The roots of the core points, and the lowest original id
    (``order[p]``) of each one's component: one pass, then one over the roots."""
    n = root.shape[0]
    first = np.full(n, -1, dtype=np.int64)   # lowest original id, kept at the root
    n_roots = 0
    for p in range(n):
        if is_core[p]:
            r = root[p]
            o = order[p]
            if first[r] < 0 or o < first[r]:
                first[r] = o
            if r == p:
                n_roots += 1
    keys = np.empty(n_roots, dtype=np.int64)
    ids = np.empty(n_roots, dtype=np.int64)
    k = 0
    for p in range(n):
        if is_core[p] and root[p] == p:
            keys[k] = first[p]
            ids[k] = p
            k += 1
    return keys, ids


@njit(cache=NUMBA_CACHE, nogil=True)
def _labels_by_rank(root, is_core, ids, rank):
    """Labels of the core points: the rank of their root (root ``ids[rank[c]]``
    gets label c); -1 elsewhere."""
    n = root.shape[0]
    label_of_root = np.empty(n, dtype=np.intp)
    for c in range(ids.shape[0]):
        label_of_root[ids[rank[c]]] = c
    labels = np.full(n, -1, dtype=np.intp)
    for p in range(n):
        if is_core[p]:
            labels[p] = label_of_root[root[p]]
    return labels


def number_clusters_by_order(root, is_core, order):
    """Cluster labels of core points when point p is row ``order[p]`` of the caller.

    The union-find ran on the reordered ids, so its roots are the lowest
    *reordered* id of each component; scikit-learn numbers clusters by the
    lowest *original* id, found here in one pass, then ranked (NumPy's
    argsort between two passes: Numba's would compile for longer than it
    runs).  O(n + r log r) for r clusters.
    """
    keys, ids = _roots_by_first_id(root, is_core, order)
    return _labels_by_rank(root, is_core, ids, np.argsort(keys))


def labels_from_roots(root, is_core, indptr, indices, order=None):
    """Final labels from the component roots: numbering, then border points.

    Parameters
    ----------
    root : ndarray of int64
        Root (lowest id) of the component of each core point, -1 elsewhere.
    is_core : ndarray of uint8
    indptr, indices : ndarray
        The (symmetric) neighbour table.
    order : ndarray of int, optional
        If the table's ids are a reordering of the caller's points (point p
        is the caller's row ``order[p]``): number clusters by the caller's
        ids.  The labels returned are still indexed by the table's ids.
    """
    if order is None:
        labels = _number_clusters(root, is_core)
    else:
        labels = number_clusters_by_order(root, is_core, order)
    assign_border_points(indptr, indices, is_core, labels)
    return labels


def point_assignment(indptr, indices, is_core, n_threads=None, min_edges_per_slice=65536,
                     order=None):
    """DBSCAN labels from a symmetric neighbour table and core flags (§3, Alg. 1 line 7).

    Parameters
    ----------
    indptr : ndarray of int64, shape (n + 1,)
    indices : ndarray of int32 or int64
        Symmetric CSR neighbour table (self entries allowed, ignored).
    is_core : ndarray of uint8, shape (n,)
    n_threads, min_edges_per_slice : int, optional
        Parallel slicing of the union-find (see ``union_find_core_components``).
    order : ndarray of int, optional
        Point p of the table is the caller's row ``order[p]`` (a spatial
        reordering makes the union-find's memory accesses local); clusters
        are then numbered by the caller's ids.  Labels stay in table order.

    Returns
    -------
    ndarray of intp, shape (n,)
        scikit-learn's labels: clusters 0..k-1 in order of their lowest-index
        core point, border points the lowest label among their core
        neighbours, noise -1.

    Examples
    --------
    >>> import numpy as np
    >>> indptr = np.array([0, 1, 3, 4, 4]); indices = np.array([1, 0, 2, 1])
    >>> point_assignment(indptr, indices, np.array([1, 1, 0, 0], np.uint8)).tolist()
    [0, 0, 0, -1]
    """
    root = union_find_core_components(indptr, indices, is_core, n_threads,
                                      min_edges_per_slice)
    return labels_from_roots(root, is_core, indptr, indices, order)


@njit(cache=NUMBA_CACHE, nogil=True)
def dbscan_inner_sequential(indptr, indices, is_core):
    """scikit-learn's expansion, literally, for any (even asymmetric) table.

    Scan the points in index order; each unlabelled core point seeds a new
    cluster, expanded with an explicit stack (no recursion): reached points
    that are still unlabelled take the label, and core points push their
    neighbours.
    """
    n = indptr.shape[0] - 1
    labels = np.full(n, -1, dtype=np.intp)
    stack = np.empty(max(1, indices.shape[0] + 1), dtype=np.int64)
    label_num = 0
    for seed in range(n):
        if labels[seed] != -1 or not is_core[seed]:
            continue
        top = 0
        stack[0] = seed
        top = 1
        while top > 0:
            top -= 1
            i = stack[top]
            if labels[i] != -1:
                continue
            labels[i] = label_num
            if is_core[i]:
                for k in range(indptr[i], indptr[i + 1]):
                    v = indices[k]
                    if labels[v] == -1:
                        stack[top] = v
                        top += 1
        label_num += 1
    return labels


def labels_from_table(indptr, indices, min_samples, sample_weight=None,
                      self_in_table=False, symmetric=True, n_threads=None, order=None):
    """Core flags and labels of DBSCAN on a CSR neighbour table.

    Parameters
    ----------
    indptr, indices : ndarray
        The neighbour table.
    min_samples : int
    sample_weight : ndarray of float, optional
        Finite weights; the core rule of ``core_points`` (exact sums).
    self_in_table : bool
        Whether each row already lists the point itself (otherwise it is
        counted implicitly).
    symmetric : bool
        Whether the table is symmetric (any join result is); if not, the
        sequential expansion is used.
    order : ndarray of int, optional
        Point p of the table is the caller's row ``order[p]`` (symmetric
        tables only); ``sample_weight`` is then in the caller's order too,
        and so are the results.

    Returns
    -------
    is_core : ndarray of uint8
    labels : ndarray of intp
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    if order is not None:
        if not symmetric:
            raise ValueError("a reordered table must be symmetric")
        order = np.ascontiguousarray(order)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)[order]
    is_core = core_points(indptr, indices, min_samples, sample_weight, self_in_table)
    is_core = np.ascontiguousarray(is_core)
    if not symmetric:
        return is_core, dbscan_inner_sequential(indptr, indices, is_core)
    labels = point_assignment(indptr, indices, is_core, n_threads, order=order)
    if order is None:
        return is_core, labels
    core_out = np.empty_like(is_core)
    core_out[order] = is_core
    labels_out = np.empty_like(labels)
    labels_out[order] = labels
    return core_out, labels_out
