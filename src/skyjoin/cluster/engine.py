"""The one internal entry into DBSCAN's engines: one clustering on the join by its plan.

``DBSCAN.fit`` (and ``dbscan``) check X and the parameters, resolve the
device, condition the points once (``skyjoin._core.conditioning``, for the
plan's precision), make the plan (``plan.plan_fit``) and call ``run``; the
distributed DBSCAN's tasks call ``cluster_points``, which conditions a
task's points and plans the same way.  ``run`` tries the plan's paths in
turn, until one fits:

* "grid-cpu" / "grid-gpu": the fine grid (``grid_cpu``, ``grid_gpu``; None
  when its grid does not fit, and on the CPU where the sparse grid next
  wins: ``index.fine_grid.dense_grid_wins``);
* "sparse-grid-cpu": the epsilon grid's non-empty cells (``grid_sparse``;
  None only when a pair between haversine's two chords mattered);
* "gpu": T kept on the GPU (``table_gpu``; MemoryError when T does not fit
  there);
* "hybrid-cpu" / "hybrid-gpu": HYBRID-DBSCAN (``hybrid.hybrid_labels``,
  Gowanlock et al. 2019, §3), T in host memory; under another metric than
  the Euclidean (``plan.metric``) T filtered and refined, after the grid
  of the unit vectors for haversine (``metrics.decision_radii``); on the
  GPU the boundary made them there (``plan.filter_on_device``), and when
  the grid hands over, the table path makes the host's unit vectors from
  the points (``MetricPoints.on_host``), copied to the host first if they
  lie on the GPU.

Where the results live is the plan's ``on_device``: the GPU paths then
return their device arrays (no copy to the host), and the hybrid path,
which assigns on the host, uploads its labels and core indices (O(n)).

The join's tables come from ``skyjoin.simjoin.engine``.  Nothing here
validates, scales or resolves the device.  Cost: the path's (``DBSCAN``).
"""

from __future__ import annotations

import dataclasses
import time

from .._core.conditioning import condition_checked
from .._core.device import cupy, is_device_array
from .._core.device_kernels import load
from .._core.device_memory import DBSCAN_POINT_BYTES, check_points_fit, oom_as_error
from .._core.plans import report
from .._core.transfer import to_device
from .._core.validate import working_dtype
from ..simjoin.metric_join import filter_problem
from ..simjoin.metrics import decision_radii
from .grid_cpu import grid_dbscan
from .grid_gpu import gpu_grid_dbscan
from .grid_sparse import sparse_grid_dbscan
from .hybrid import hybrid_labels
from .plan import DBSCANPlan, join_sample, plan_fit
from .table_gpu import gpu_dbscan_points

__all__ = ["run", "cluster_points"]


def run(plan: DBSCANPlan, X, eps: float, min_samples: int, sample_weight=None,
        timings: dict | None = None, memory_limit="auto", overwrite_x: bool = False,
        metric=None):
    """DBSCAN on the join of conditioned points by ``plan``: the plan's paths
    in turn, until one finishes.

    Parameters
    ----------
    plan : DBSCANPlan
        From ``plan.plan_fit`` (route "join").
    X : ndarray or cupy.ndarray, shape (n, d)
        Points conditioned for ``plan.precision`` (C-contiguous, in the
        working dtype): on the host, or on the GPU when the plan's first
        path is a GPU path (the boundary conditions them there, after the
        one upload; the hybrid path then takes them back to the host).
    eps : float
        Conditioned radius.
    min_samples : int
    sample_weight : ndarray of float64, optional
    timings : dict, optional
        Filled with the seconds of the path's phases.
    memory_limit : int or "auto"
        Bytes the neighbour table of a table path may take.
    overwrite_x : bool, default False
        X is the caller's scratch copy: the GPU grid path may reorder it in
        place (one copy of the points fewer on the device).
    metric : (MetricPoints, float), optional
        A plan under another metric (``plan.metric``): the checked points
        and the caller's eps (``skyjoin.simjoin.metric_join``); X and eps
        are then the filter's, conditioned: with ``plan.filter_on_device``
        the unit vectors on the GPU (``metric_join.device_problem``), X
        scratch for the grid, and no filter points in ``metric``.

    Returns
    -------
    (core indices, labels, path)
        ``path`` the one that finished; the arrays are CuPy arrays when
        ``plan.on_device``, else NumPy arrays.  The plan is reported
        (``skyjoin._core.plans.report``) before the run and again with the
        path that ran (``DBSCANPlan.ran``).

    Raises
    ------
    skyjoin.DeviceMemoryError
        On the GPU: the points cannot fit the device's free memory (checked
        before they are copied), or CuPy ran out of device memory on every
        path that could take the clustering.
    skyjoin.ResultTooLargeError
        The table of the last path does not fit in host memory.
    """
    timings = {} if timings is None else timings
    report(plan, "dbscan plan")
    if plan.device == "gpu":
        check_points_fit(cupy(), "GPU DBSCAN", [X], working_dtype(plan.precision),
                         self_join=True, per_point=DBSCAN_POINT_BYTES)
        with oom_as_error(cupy(), "GPU DBSCAN"):
            core, labels, path = _paths(plan, X, eps, min_samples, sample_weight, timings,
                                        memory_limit, overwrite_x, metric)
    else:
        core, labels, path = _paths(plan, X, eps, min_samples, sample_weight, timings,
                                    memory_limit, overwrite_x, metric)
    report(dataclasses.replace(plan, ran=path), "dbscan plan")
    return core, labels, path


def _paths(plan, X, eps, min_samples, sample_weight, timings, memory_limit, overwrite_x=False,
           metric=None):
    """The plan's paths in turn: a grid path returns None when its grid does
    not fit; the "gpu" path raises MemoryError when T does not fit in GPU
    memory; "hybrid-*" finishes, or raises ResultTooLargeError when T does
    not fit in host memory (``memory_limit``).  The GPU paths share one
    upload of the points."""
    Xd = None                                   # the points on the GPU, once uploaded
    for path in plan.paths:
        if path in ("grid-gpu", "gpu") and Xd is None:
            load(cupy(), "dbscan")              # its device kernels, one compile
            Xd = X if is_device_array(X) else to_device(cupy(), X, "X", X.dtype)
        if path == "grid-cpu":
            t0 = time.perf_counter()
            # the dense grid declines where the sparse grid, next, wins
            res = grid_dbscan(X, eps, min_samples,
                              sparse_fallback="sparse-grid-cpu" in plan.paths)
            if res is not None:
                timings["grid_dbscan"] = time.perf_counter() - t0
                return res[0], res[1], path
        elif path == "sparse-grid-cpu":
            t0 = time.perf_counter()
            # under haversine: the unit vectors and the chords that decide, as
            # on the GPU grid; None when a pair between them mattered
            sure, upper = (None, eps) if metric is None else \
                decision_radii(metric[1], plan.metric)
            res = sparse_grid_dbscan(X, upper, min_samples, eps_sure=sure, timings=timings)
            if res is not None:
                timings["grid_dbscan"] = time.perf_counter() - t0
                return res[0], res[1], path
        elif path == "grid-gpu":
            t0 = time.perf_counter()
            # the points are reordered in place only once the grid is built (a
            # grid that does not fit leaves them for the next path)
            # under haversine: the unit vectors made on the GPU (never scaled;
            # scratch: the table path makes the host's), the chords that decide
            # (``metrics.decision_radii``) rather than the filter's
            sure, upper = (None, eps) if metric is None else \
                decision_radii(metric[1], plan.metric)
            res = gpu_grid_dbscan(Xd, upper, min_samples, timings=timings,
                                  on_device=plan.on_device,
                                  overwrite_x=overwrite_x or Xd is not X, eps_sure=sure)
            if res is not None:
                timings["grid_dbscan"] = time.perf_counter() - t0
                return res[0], res[1], path
        elif path == "gpu":
            try:
                core, labels = gpu_dbscan_points(Xd, eps, min_samples,
                                                 sample_weight=sample_weight,
                                                 precision=plan.precision, timings=timings,
                                                 memory_limit=memory_limit,
                                                 on_device=plan.on_device,
                                                 join_algorithm=plan.join_algorithm)
                return core, labels, path
            except MemoryError:
                pass  # T does not fit on the GPU: stream it to the host (HYBRID-DBSCAN)
        else:
            Xd = None
            if plan.filter_on_device:       # the grid handed over: the host's unit vectors
                points = metric[0].on_host()
                (X,), eps = filter_problem(points, metric[1])
                metric = (points, metric[1])
            # on the GPU the points are ordered there (``hybrid.cell_order``): device
            # points are not copied to the host and back; under another metric T
            # is filtered and refined (``metric``)
            core, labels = hybrid_labels(X, eps, min_samples, sample_weight=sample_weight,
                                         device=plan.device, precision=plan.precision,
                                         shared_grid=plan.shared_grid, timings=timings,
                                         memory_limit=memory_limit,
                                         join_algorithm=plan.join_algorithm, metric=metric)
            if plan.on_device:                      # assigned on the host: uploaded, O(n)
                core, labels = cupy().asarray(core), cupy().asarray(labels)
            return core, labels, path
    raise AssertionError(f"no path of {plan.paths} finished")  # pragma: no cover


def cluster_points(X, eps: float, min_samples: int, *, device: str, precision: str,
                   timings: dict | None = None):
    """Euclidean DBSCAN of a task's points X ((n, d) float arrays; a NaN or inf
    is found by the range pass of the conditioning and reported with its
    row) on the resolved ``device``: conditioned once here, planned
    by ``plan.plan_fit`` and run by ``run``.  For the distributed DBSCAN's
    tasks, whose driver has checked eps, min_samples and precision.
    Returns (core indices, labels, path).  Cost: ``run``'s plus O(n d)."""
    (Xc,), eps_c = condition_checked([X], ["X"], eps, precision)
    plan = plan_fit("join", device, precision, False, X.shape[1],
                    join_sample=join_sample(Xc, eps_c, device))
    return run(plan, Xc, eps_c, min_samples, timings=timings)
