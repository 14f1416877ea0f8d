"""HYBRID-DBSCAN (Gowanlock et al. 2019, §3, Algorithm 1): the join builds T, the CPU assigns.

The neighbour table T is built once by the join engine of the plan's device
(``neighbor_table``, through ``skyjoin.simjoin.engine``: Algorithm 1 lines
3-6) on the points numbered in cell order (``cell_order``), then DBSCAN
only assigns points by reading T (``union_find.labels_from_table``, line 7).

``hybrid_labels`` and ``neighbor_table`` take points conditioned by their
caller (``skyjoin._core.conditioning``, for the plan's precision) and the
plan's device and precision: they validate, scale and route nothing.
``hybrid_dbscan`` and ``spatial_order`` are the entries for direct callers
(the bench, the response-time model): they check and condition once.

Costs: O(n d) for the order, the join's cost for T (O(pairs) to write it),
O(pairs) for the assignment.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .._core import device as _device
from .._core.conditioning import condition_checked
from .._core.transfer import h2d
from .._core.validate import check_points
from ..index.grid import build_grid
from ..simjoin import engine as join_engine
from ..simjoin import metric_join
from ..simjoin.plan import request as join_request
from .plan import shares_grid
from .union_find import labels_from_table

__all__ = ["neighbor_table", "metric_neighbor_table", "spatial_order", "cell_order", "shared_order",
           "hybrid_labels", "hybrid_dbscan"]


def neighbor_table(X, eps, *, device="cpu", precision="float64", timings=None, on_device=False,
                   algorithm="grid",
                   memory_limit="auto", grid=None):
    """The neighbour table T of HYBRID-DBSCAN (Algorithm 1, lines 3-6) from our join.

    Rows list the neighbours of each point, itself excluded, unsorted
    (DBSCAN does not need the order).  The join runs through its engine
    entry (``skyjoin.simjoin.engine.run``) with the request built here.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Host points, or a CuPy array with ``device="gpu"``, conditioned for
        ``precision`` (``skyjoin._core.conditioning``).
    eps : float
        Conditioned radius.
    device : {"cpu", "gpu"}
        Resolved device.
    precision : {"float64", "float32"}
    timings : dict, optional
        Filled with the join's phase times.
    on_device : bool
        GPU only: leave the table on the GPU (CuPy arrays).
    memory_limit : int or "auto"
        Bytes T may take where it goes (as ``skyjoin.self_join``).
    grid : Grid, optional
        CPU: the grid of X, X already in its cell order (``hybrid_labels``:
        the grid that ordered the points serves the join; the brute force
        does not read it).
    algorithm : {"grid", "brute"} or Projection
        The join's algorithm (``DBSCANPlan.join_algorithm``).

    Returns
    -------
    skyjoin.NeighborTable

    Raises
    ------
    skyjoin.ResultTooLargeError
        If T does not fit (found after the join's count, before T is
        allocated).
    """
    plan = join_request(device, self_join=True, output="table", sort=False, include_self=False,
                        precision=precision, memory_limit=memory_limit,
                        on_device=bool(on_device) and device == "gpu", algorithm=algorithm)
    return join_engine.run(plan, None, X, eps, timings=timings, grid=grid)


def metric_neighbor_table(points, eps, X, filter_eps, *, device="cpu", timings=None,
                          algorithm="grid", memory_limit="auto", grid=None):
    """T under a metric other than the Euclidean (``skyjoin.simjoin.metric_join``):
    the filter join of X (the conditioned filter points of ``points``, in the
    same order, on the host or on the GPU) at ``filter_eps`` on ``device``,
    its table refined on the host at the caller's radius eps.  Rows exclude
    the point itself and are unsorted, as ``neighbor_table``'s.  ``grid``: as
    ``neighbor_table``'s (the CPU grid of X, X in its order).  Cost: the
    filter join's, plus O(candidates d) for the refine."""
    plan = join_request(device, self_join=True, output="table", sort=False, include_self=False,
                        memory_limit=memory_limit, algorithm=algorithm,
                        metric=points.metric)
    return metric_join.run(plan, None, X, filter_eps, points=points, eps=eps, timings=timings,
                           grid=grid)


def spatial_order(X, eps, precision="float64", device="cpu"):
    """A cell-by-cell order of the points (the join's epsilon grid, self-join paper §IV).

    Numbering the points in this order before the join makes neighbours
    have nearby ids, so the union-find of the assignment touches memory
    locally (see docs/decisions/dbscan-fit-path.md).  Any order gives the
    same labels (clusters are numbered by the caller's ids).

    Parameters
    ----------
    X : array_like, shape (n, d)
    eps : float
    precision : {"float64", "float32"}
    device : {"cpu", "gpu"}
        "gpu": the points sorted by their cell key on the GPU
        (``_gpu_cell_order``), for a join that runs there.

    Returns
    -------
    X_ordered : ndarray of float64
        The points, reordered.
    order : ndarray of int
        ``X_ordered[p] == X[order[p]]``.

    Notes
    -----
    O(n d) for the grid plus O(n) (counting sort) or O(n log n) (sort by key).
    """
    # float64 here: a float32 join rounds the points itself, after any
    # scaling into range (skyjoin._core.conditioning), so it must see them unrounded
    X = check_points(X, name="X")
    if len(X) == 0:
        return X, np.zeros(0, dtype=np.int64)
    if device == "gpu":
        cp = _device.cupy()
        Xo, order = _gpu_cell_order(cp, cp.asarray(X), eps)
        return cp.asnumpy(Xo), cp.asnumpy(order)
    g = build_grid(X, eps, precision=precision)
    return g.points, g.order             # the grid has gathered the points in its order


#: at most this many cells per dimension in ``_gpu_cell_order`` (keys stay exact)
_GPU_ORDER_MAX_CELLS = 2**30


def _gpu_cell_order(cp, Xd, eps):
    """``spatial_order`` on the GPU, on device arrays: the points sorted by a linear key
    of their cells (side eps, or wider where a dimension would have more than 2**30
    cells), over as many leading dimensions as fit in 62 bits.  O(n d + n log n)."""
    lo = Xd.min(axis=0)
    span = cp.asnumpy(Xd.max(axis=0) - lo)
    side = np.maximum(float(eps), span / _GPU_ORDER_MAX_CELLS)
    key = cp.zeros(len(Xd), dtype=cp.int64)
    volume = 1
    for j in range(Xd.shape[1]):
        cells = int(span[j] // side[j]) + 2
        if volume * cells >= 2**62:
            break
        c = cp.minimum(cp.floor((Xd[:, j] - lo[j]) / side[j]), cells - 1).astype(cp.int64)
        key = key * cells + c
        volume *= cells
    order = cp.argsort(key)
    return Xd[order], order


def cell_order(X, eps, device, precision):
    """``spatial_order`` for a join on ``device``: ``(X_ordered, order)``, X checked
    and conditioned by the caller (host points, or device points on the GPU).  On
    the GPU ``X_ordered`` stays there (a CuPy array), so the points cross to the
    device once: ordered there, joined from there.  O(n d) plus the sort."""
    if len(X) == 0:
        return X, np.zeros(0, dtype=np.int64)
    if device == "gpu":
        cp = _device.cupy()
        Xd = X if _device.is_device_array(X) else h2d(cp, X)  # pinned staging for large X
        Xo, order = _gpu_cell_order(cp, Xd, eps)
        return Xo, cp.asnumpy(order)
    g = build_grid(X, eps, precision=precision)
    return g.points, g.order             # the grid has gathered the points in its order


def shared_order(X, eps, precision):
    """One CPU grid that both orders the points and serves the join:
    ``(X_ordered, order, grid)``, the grid renumbered so that its points are
    X_ordered itself (``plan.shares_grid``).  O(n d) plus the grid's sort."""
    g = build_grid(X, eps, precision=precision)
    return g.points, g.order, dataclasses.replace(g, order=np.arange(len(X), dtype=g.order.dtype))


def hybrid_dbscan(X, eps, min_samples, *, sample_weight=None, device="cpu", precision="float64",
                  timings=None, memory_limit="auto"):
    """HYBRID-DBSCAN (§3, Algorithm 1): the join builds T, the CPU assigns points.

    Parameters
    ----------
    X : array_like, shape (n, d)
    eps : float
    min_samples : int
    sample_weight : array_like of shape (n,), optional
        As ``DBSCAN.fit``: neighbourhood weights summed exactly, rounded once.
    device : {"cpu", "gpu"}
        Device of the join; the assignment always runs on the CPU.
    precision : {"float64", "float32"}
    timings : dict, optional
        Filled with "order", "table" and "assign" seconds, "join_grid" (the
        join's grid-building seconds, inside "table"; 0 on the CPU in float64,
        where the grid that orders the points serves the join) and "pairs".
    memory_limit : int or "auto"
        Bytes T may take in host memory (as ``skyjoin.self_join``).

    Returns
    -------
    core_sample_indices : ndarray of int64
    labels : ndarray of intp

    Raises
    ------
    skyjoin.ResultTooLargeError
        If T does not fit in host memory (or ``memory_limit``), before it is
        allocated.

    Notes
    -----
    O(n d) for the order, the join's cost for T, O(pairs) for the assignment.

    See Also
    --------
    skyjoin.DBSCAN : the estimator, which picks this path or another (``plan``).

    References
    ----------
    M. Gowanlock et al., "A Hybrid Approach for Optimizing Parallel Clustering
    Throughput using the GPU", IEEE TPDS 30(4), 2019, §3.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0], [9.0]])
    >>> core, labels = hybrid_dbscan(X, 1.0, 3)
    >>> core.tolist(), labels.tolist()
    ([1], [0, 0, 0, -1])
    """
    (X,), eps = condition_checked([check_points(X, name="X", check_finite=False)], ["X"], eps,
                                  precision)
    return hybrid_labels(X, eps, min_samples, sample_weight=sample_weight, device=device,
                         precision=precision, shared_grid=shares_grid(device, precision),
                         timings=timings, memory_limit=memory_limit)


def hybrid_labels(X, eps, min_samples, *, sample_weight=None, device="cpu", precision="float64",
                  shared_grid=False, timings=None, memory_limit="auto", join_algorithm="grid",
                  metric=None):
    """HYBRID-DBSCAN (§3, Algorithm 1) of conditioned points: what
    ``hybrid_dbscan`` runs once it has checked and conditioned X, and the
    "hybrid-*" paths of ``skyjoin.cluster.engine``.

    ``X`` is conditioned for ``precision`` (host points; on the GPU device
    points too), ``eps`` likewise; ``device``, ``shared_grid`` (one CPU grid
    orders the points and serves the join: ``shared_order``) and
    ``join_algorithm`` are the plan's (``DBSCANPlan``).  ``metric``: (the
    checked ``MetricPoints``, the caller's eps) under a metric other than
    the Euclidean; X and eps are then its filter's, and T is filtered and
    refined (``metric_neighbor_table``).  Returns and costs as
    ``hybrid_dbscan`` (plus the refine's O(candidates d)); nothing here
    validates, scales or routes.
    """
    t0 = time.perf_counter()
    join_t: dict = {}
    grid = None
    if shared_grid and len(X):
        Xo, order, grid = shared_order(X, eps, precision)
    else:
        Xo, order = cell_order(X, eps, device, precision)
    ordered = None if metric is None else metric[0].ordered(order)
    t1 = time.perf_counter()
    if metric is None:
        nt = neighbor_table(Xo, eps, device=device, precision=precision, timings=join_t,
                            memory_limit=memory_limit, grid=grid, algorithm=join_algorithm)
    else:
        nt = metric_neighbor_table(ordered, metric[1], Xo, eps, device=device, timings=join_t,
                                   algorithm=join_algorithm, memory_limit=memory_limit,
                                   grid=grid)
    del Xo, grid, ordered
    t2 = time.perf_counter()
    is_core, labels = labels_from_table(nt.indptr, nt.indices, min_samples, sample_weight,
                                        order=order)
    if timings is not None:
        timings.update(order=t1 - t0, table=t2 - t1, assign=time.perf_counter() - t2,
                       pairs=nt.n_pairs, join_grid=float(join_t.get("grid", 0.0)))
    return np.flatnonzero(is_core), labels
