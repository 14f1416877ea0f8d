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

import math
from fractions import Fraction

import numba
import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE

__all__ = [
    "core_points",
    "weighted_neighbourhood",
    "naive_sum_decides",
    "integer_weights",
    "exact_row_sums",
    "union_find_core_components",
    "assign_border_points",
    "point_assignment",
    "dbscan_inner_sequential",
    "labels_from_roots",
    "labels_from_table",
]


# ---------------------------------------------------------------------------
# Weighted neighbourhoods: the one rule for core points with sample weights
# ---------------------------------------------------------------------------
#
# A point is core iff fl(S) >= min_samples, where S is the exact sum of the
# float64 weights of its neighbourhood and fl rounds it once to float64
# (round-half-even), as ``math.fsum`` does.  This value does not depend on
# the order of the neighbours, which no two engines share (scikit-learn's
# ``np.sum`` follows the order of its tree's radius query).  It is found in
# two steps:
#
# 1. the naive sum s and the sum a of the |weights| of each row (one pass
#    over the row).  In any order of additions |S - s| <= gamma_{k-1} * a
#    for k terms (Higham, Accuracy and Stability, eq. 4.4), gamma_j =
#    j u / (1 - j u), u = 2**-53; ``naive_sum_decides`` tests whether s is
#    far enough from the threshold that s >= m and fl(S) >= m agree;
# 2. the rows it does not decide get the exact sum, correctly rounded:
#    Shewchuk's non-overlapping partials, CPython's ``math.fsum`` algorithm
#    (``_grow``, ``_partials_value``).  A row whose partial sums overflow
#    float64 (weights near 1e308) is summed with exact rationals instead.

#: unit roundoff of float64
_U = 2.0 ** -53
#: smallest normal float64: covers what underflow takes from the bound
_TINY = 2.0 ** -1022
#: non-overlapping nonzero float64 partials have disjoint bit ranges in [-1074, 1023]
_MAX_PARTIALS = 2098


def naive_sum_decides(s, a, k, m):
    """Whether ``s >= m`` certainly agrees with ``fl(S) >= m`` (the rule's first step).

    ``s`` is a float64 sum of k weights in any order of additions, ``a``
    a float64 sum of their absolute values, ``S`` the exact sum, ``fl``
    rounding to nearest even and ``m`` a float64 threshold.  True iff
    ``|s - m| > 2.5 u k a + 2 u |m| + 2**-1022`` (u = 2**-53): the first term
    covers twice the error bound ``gamma_{k-1} a`` (with the rounding of
    a, of this test and k u <= 0.001), the second the half-ulp below m that
    rounds up onto m (``fl(S) >= m`` iff S lies above the midpoint between m
    and its predecessor, or on it with an even m), the third underflow.  A
    NaN or infinite s is never decided.

    Pure arithmetic, so the same code runs on float scalars (compiled by
    Numba for the CPU) and elementwise on NumPy or CuPy arrays (the GPU
    path).  O(1) per row.
    """
    return abs(s - m) > (2.5 * _U) * k * a + (2.0 * _U) * abs(m) + _TINY


_naive_sum_decides = njit(cache=NUMBA_CACHE, nogil=True)(naive_sum_decides)


def integer_weights(w):
    """Whether every sum of some of the weights is exact in float64, in any order.

    True iff all weights are integers and the sum of their absolute values
    is at most 2**52 (then every partial sum is an integer below 2**53).
    The naive sums then are the correctly rounded ones and decide every
    row.  Array operations only (NumPy or CuPy arrays); O(n).
    """
    return bool((w.round() == w).all()) and float(abs(w).sum()) <= 2.0 ** 52


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _grow(p, n, x):
    """Add x to the n non-overlapping partials p[:n] (Shewchuk's grow-expansion,
    as CPython's ``math.fsum``); returns the new count, -1 if a partial overflows
    (or the buffer is full, which non-overlapping partials never make it).  O(n)."""
    i = 0
    for j in range(n):
        y = p[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            p[i] = lo
            i += 1
        x = hi
    if x != 0.0:
        if not np.isfinite(x) or i >= p.shape[0]:
            return -1
        p[i] = x
        i += 1
    return i


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _partials_value(p, n):
    """The exact sum of the partials p[:n] rounded once, half to even (the final
    step of CPython's ``math.fsum``).  O(n)."""
    hi = 0.0
    if n > 0:
        n -= 1
        hi = p[n]
        lo = 0.0
        while n > 0:
            x = hi
            n -= 1
            y = p[n]
            hi = x + y
            yr = hi - x
            lo = y - yr
            if lo != 0.0:
                break
        # half-even rounding across partials: a tie broken by the next partial
        if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            yr = x - hi
            if y == yr:
                hi = x
    return hi


@njit(cache=NUMBA_CACHE, nogil=True)
def _row_exact(indptr, indices, w, i, self_weight):
    """Correctly rounded sum of ``self_weight`` and the weights of row i's
    neighbours; NaN where float64 overflows on the way.  O(row length * partials)."""
    p = np.empty(min(indptr[i + 1] - indptr[i] + 1, _MAX_PARTIALS) + 1, dtype=np.float64)
    n = _grow(p, 0, self_weight)
    for k in range(indptr[i], indptr[i + 1]):
        if n < 0:
            return np.nan
        n = _grow(p, n, w[indices[k]])
    if n < 0:
        return np.nan
    v = _partials_value(p, n)
    return v if np.isfinite(v) else np.nan


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _neighbourhood_weights(indptr, indices, w, add_self, m, every_integer, naive_exact):
    """Each row's weight (its own included when add_self), for the core rule.

    Rows that ``naive_sum_decides`` leaves open against m (with
    every_integer: against floor(s) and floor(s) + 1, hence against every
    integer) get the correctly rounded sum, the others their naive sum;
    with naive_exact (``integer_weights``) every row keeps its naive sum.
    Returns the sums and how many rows overflowed (NaN, left to the caller).
    O(nnz) plus O(row length * partials) per open row.
    """
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    overflowed = 0
    for i in prange(n):
        own = w[i] if add_self else 0.0
        s = own
        a = abs(own)
        for k in range(indptr[i], indptr[i + 1]):
            x = w[indices[k]]
            s += x
            a += abs(x)
        cnt = indptr[i + 1] - indptr[i] + (1 if add_self else 0)
        if naive_exact:
            done = True
        elif every_integer:
            f = np.floor(s)
            done = _naive_sum_decides(s, a, cnt, f) and _naive_sum_decides(s, a, cnt, f + 1.0)
        else:
            done = _naive_sum_decides(s, a, cnt, m)
        if not done:
            s = _row_exact(indptr, indices, w, i, own)
            if np.isnan(s):
                overflowed += 1
        out[i] = s
    return out, overflowed


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _exact_row_sums(indptr, values):
    """Correctly rounded sum of each CSR row of values (NaN where float64 overflows
    on the way), and the number of such rows.  O(nnz * partials)."""
    n = indptr.shape[0] - 1
    ids = np.arange(values.shape[0])
    out = np.empty(n, dtype=np.float64)
    overflowed = 0
    for i in prange(n):
        s = _row_exact(indptr, ids, values, i, 0.0)
        if np.isnan(s):
            overflowed += 1
        out[i] = s
    return out, overflowed


def _rational_sum(values):
    """The exact sum of float64 values rounded once, half to even, by exact
    rationals (no intermediate overflow); +-inf beyond float64.  O(len)."""
    total = sum(map(Fraction, np.asarray(values, dtype=np.float64).tolist()), Fraction(0))
    try:
        return float(total)  # int / int true division: correctly rounded
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def exact_row_sums(indptr, values):
    """The correctly rounded sum (``math.fsum``) of each row of a CSR array of float64.

    Parameters
    ----------
    indptr : ndarray of int, shape (n + 1,)
    values : ndarray of float64
        Finite values; row i is ``values[indptr[i]:indptr[i + 1]]``.

    Returns
    -------
    ndarray of float64, shape (n,)
        The exact sum of each row rounded once to float64, half to even
        (independent of the order of the row).  Rows whose partial sums
        overflow float64 are summed with exact rationals, and an exact sum
        beyond float64 gives +-inf (``math.fsum`` raises there).

    Notes
    -----
    O(nnz * p) with p the number of non-overlapping partials (a few for
    ordinary data, at most about 40 for doubles in practice), in parallel
    over rows.

    Examples
    --------
    >>> exact_row_sums(np.array([0, 10, 13]), np.array([0.1] * 10 + [1e16, 1.0, -1e16]))
    array([1., 1.])
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    out, overflowed = _exact_row_sums(indptr, values)
    if overflowed:
        for i in np.flatnonzero(np.isnan(out)):
            out[i] = _rational_sum(values[indptr[i]:indptr[i + 1]])
    return out


def _weights(indptr, indices, sample_weight, add_self, m, every_integer):
    """``_neighbourhood_weights`` with its overflowed rows summed exactly."""
    w = np.ascontiguousarray(sample_weight, dtype=np.float64)
    out, overflowed = _neighbourhood_weights(indptr, indices, w, add_self, m, every_integer,
                                             integer_weights(w))
    if overflowed:
        for i in np.flatnonzero(np.isnan(out)):
            row = w[indices[indptr[i]:indptr[i + 1]]]
            out[i] = _rational_sum(np.concatenate([w[i:i + 1], row]) if add_self else row)
    return out


def weighted_neighbourhood(indptr, indices, sample_weight, add_self):
    """Each row's neighbourhood weight (its own included when add_self), for any
    integer threshold.

    The value compares with every integer m (|m| < 2**52) exactly as the
    correctly rounded sum of the row's weights does (the core rule, see
    ``core_points``): it is that sum wherever the naive sum lies within its
    error bound of an integer, else the naive sum.  What a min_samples sweep
    compares with each of its levels.  O(nnz), plus O(row length * partials)
    per row left open.
    """
    return _weights(indptr, indices, sample_weight, add_self, 0.0, True)


def core_points(indptr, indices, min_samples, sample_weight=None, self_in_table=False):
    """Core flags (uint8) of the points of a neighbour table (§2.1).

    A point is core iff the size of its eps-neighbourhood, itself included,
    is at least ``min_samples``; with ``sample_weight``, iff the exact sum of
    the float64 weights of that neighbourhood, rounded once to float64 (half
    to even, ``math.fsum``), is: one answer for every order of the
    neighbours.  O(nnz); with weights, rows whose naive sum lies within its
    error bound of min_samples (``naive_sum_decides``) are summed exactly,
    O(row length * partials) each.
    """
    if sample_weight is None:
        counts = np.diff(indptr)
        if not self_in_table:
            counts = counts + 1
        return (counts >= min_samples).view(np.uint8)
    m = float(min_samples)
    return (_weights(indptr, indices, sample_weight, not self_in_table, m, False)
            >= m).view(np.uint8)


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _find(parent, x):
    """Root of x, halving the path on the way (parents always have lower ids)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _union(parent, a, b):
    """Join the sets of a and b, hanging the larger root under the smaller."""
    ra = _find(parent, a)
    rb = _find(parent, b)
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
            ri = _find(parent, i)
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                if j <= i:
                    continue
                p = parent[j]
                if p < 0 or p == ri:
                    continue
                rj = _find(parent, p)
                if rj < ri:
                    parent[ri] = rj
                    ri = rj
                elif rj > ri:
                    parent[rj] = ri


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
                        _union(dst, i, _find(src, i))
        step *= 2


@njit(cache=NUMBA_CACHE, nogil=True)
def _roots(parent):
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
    return _roots(core_forest(indptr, indices, is_core, n_threads, min_edges_per_slice))


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
def _number_clusters_by_order(root, is_core, order):
    """Cluster labels of core points when point p is row ``order[p]`` of the caller.

    The union-find ran on the reordered ids, so its roots are the lowest
    *reordered* id of each component; scikit-learn numbers clusters by the
    lowest *original* id, found here in one pass, then ranked.
    """
    n = root.shape[0]
    first = np.full(n, -1, dtype=np.int64)   # lowest original id, kept at the root
    for p in range(n):
        if is_core[p]:
            r = root[p]
            o = order[p]
            if first[r] < 0 or o < first[r]:
                first[r] = o
    n_roots = 0
    for p in range(n):
        if is_core[p] and root[p] == p:
            n_roots += 1
    keys = np.empty(n_roots, dtype=np.int64)
    ids = np.empty(n_roots, dtype=np.int64)
    k = 0
    for p in range(n):
        if is_core[p] and root[p] == p:
            keys[k] = first[p]
            ids[k] = p
            k += 1
    rank = np.argsort(keys)
    label_of_root = np.empty(n, dtype=np.intp)
    for c in range(n_roots):
        label_of_root[ids[rank[c]]] = c
    labels = np.full(n, -1, dtype=np.intp)
    for p in range(n):
        if is_core[p]:
            labels[p] = label_of_root[root[p]]
    return labels


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
        labels = _number_clusters_by_order(root, is_core, order)
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
