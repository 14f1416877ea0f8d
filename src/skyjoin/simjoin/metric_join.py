"""The join under a metric other than the Euclidean: filter, then refine.

The public boundary (``api``, DBSCAN, the sweep) checks the points once for
their metric (``metric_points``), maps them into the filter's Euclidean
space and conditions them there (``filter_problem``), and builds the
join's request with its ``metric`` recorded.  ``run`` then hands the
filter's points to the one entry into the join's engines
(``skyjoin.simjoin.engine``), on the plan's device and by the plan's
algorithm, for a host table of candidates, and decides every candidate on
the host by the metric's own test (``cpu.refine``) on the original points.
The GPU's table comes back to the host for the refine: CUDA's sine and
cosine are not the C library's, and the host's test is scikit-learn's bit
for bit (docs/exactness.md).

Rules of the metric path, checked here:

* the points are read in float64 (float32 input is converted, as
  scikit-learn's trees do); ``precision="float32"`` is refused;
* points on the GPU are refused (the refine reads host points), except by
  ``device_problem``: haversine DBSCAN on the GPU grid, whose plan makes
  the unit vectors there (``skyjoin.cluster.plan.filter_on_device``) and
  copies the points to the host only if the grid hands the clustering to
  the table path (``MetricPoints.on_host``, 16 bytes a point);
* the filter's points are scaled by a power of two only where the join's
  numeric range needs it (``skyjoin._core.conditioning``): never for
  haversine and cosine, whose filter points are unit vectors and whose
  radius is at least ``metrics.FILTER_SLACK``; the refine reads the
  unscaled points.

Costs: O(n d) to check and map the points (``device_problem``: O(n) on
the GPU, O(1) on the host); the filter join's cost on its
candidates; O(candidates d) for the refine.  Memory: the candidate table
and the refined one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from .._core.conditioning import condition_points
from .._core.device import cupy, is_device_array
from .._core.device_input import on_gpu
from .._core.transfer import to_device
from .._core.validate import check_points
from ..index.grid import check_index_dims
from . import engine
from .gpu import unit_vectors as gpu_unit_vectors
from .metrics import METRIC_CODE, check_haversine_columns, check_metric_points, filter_points, \
    filter_radius, metric_threshold, refine_points, sure_radius
from .plan import JoinPlan

__all__ = ["MetricPoints", "metric_points", "device_problem", "filter_problem", "run", "entry",
           "run_chunks"]


@dataclass(frozen=True)
class MetricPoints:
    """The point sets of a metric join, checked: ``refine`` what the refine
    reads (float64; cosine: rows normalised as scikit-learn does), ``filter``
    their images in the filter's Euclidean space (unconditioned); one entry
    for a self-join, (R, S) for R join S.  From ``device_problem``:
    ``filter`` None (the unit vectors were made on the GPU) and ``refine``
    the caller's points, on the host or the GPU; ``on_host`` completes
    them."""

    metric: str
    refine: tuple
    filter: tuple | None

    def on_host(self) -> "MetricPoints":
        """The points the table path reads: itself when ``filter`` is there;
        else the one point set in float64 on the host (copied from the GPU
        where it lies there, 16 bytes a point) with the filter's points made
        there (``metrics.filter_points``: the host's unit vectors, those the
        filter's margin and the refine's sure chord are derived for).
        O(n d)."""
        if self.filter is not None:
            return self
        A = self.refine[0]
        A = cupy().asnumpy(A) if is_device_array(A) else A
        A = np.ascontiguousarray(A, dtype=np.float64)
        return MetricPoints(self.metric, (A,), (filter_points(A, self.metric),))

    def host_filter(self) -> tuple:
        """The filter's points on the host, one array a point set
        (``on_host``'s).  O(1), or ``on_host``'s cost."""
        points = self.on_host().filter
        assert points is not None      # on_host makes them
        return points

    def ordered(self, order) -> "MetricPoints":
        """The one point set of a self-join renumbered: point p is the
        former ``order[p]``.  O(n d), gathered on the host threads."""
        from ..index.grid_kernels import gather_rows  # Numba: loaded on first use (CLI start-up)

        order = np.asarray(order, dtype=np.int64)
        return MetricPoints(self.metric, (gather_rows(self.refine[0], order),),
                            (gather_rows(self.filter[0], order),))


def metric_points(named, metric: str, precision: str = "float64",
                  index_dims: int | None = None) -> MetricPoints:
    """Check the point sets ``named`` (pairs (array, name)) for ``metric``
    (a canonical name, ``metrics.check_metric``), once, at a public
    boundary.  O(n d).

    Raises
    ------
    TypeError
        Points on the GPU, or values that are not real numbers.
    ValueError
        ``precision="float32"``; bad shapes or values (``check_points``),
        points outside the metric's domain (``metrics.check_metric_points``),
        R and S of different dimensions, a bad ``index_dims`` (of the
        filter's space: 3 dimensions for haversine).
    """
    _check_precision(metric, precision)
    refine, filt = [], []
    for X, name in named:
        if on_gpu(X):
            raise TypeError(f"{name} is on the GPU, but metric={metric!r} decides its pairs on "
                            "the host: copy the points there first (e.g. cupy.asnumpy); the "
                            "join itself still runs on the GPU")
        A = check_metric_points(check_points(X, name=name), metric, name)
        refine.append(refine_points(A, metric))
        filt.append(refine[-1] if metric == "cosine" else filter_points(A, metric))
    if len(refine) == 2 and refine[0].shape[1] != refine[1].shape[1]:
        raise ValueError(f"R and S must have the same number of dimensions, got "
                         f"{refine[0].shape[1]} and {refine[1].shape[1]}")
    check_index_dims(index_dims, filt[0].shape[1])
    return MetricPoints(metric, tuple(refine), tuple(filt))


def device_problem(X, metric: str, eps: float, precision: str = "float64", name: str = "X"):
    """Haversine's self-join problem with its unit vectors made on the GPU
    (where the plan says so: ``skyjoin.cluster.plan.filter_on_device``):
    ``(MetricPoints, U, filter_eps)``, U the (n, 3) device unit vectors.

    X, host points checked by the caller's validation (shape, real numbers)
    or device input (``_core.device_input.as_device_points``), is uploaded
    as it is (float64, 16 bytes a point; none for float64 device input),
    its values tested there (finiteness: ``transfer.to_device``; the range:
    ``gpu.unit_vectors``, the ValueError of ``metrics.check_metric_points``)
    and U computed there.  The ``MetricPoints`` keep X as the refine's
    points and no filter points: ``MetricPoints.on_host`` makes them if the
    grid hands the clustering to the table path.  U is not conditioned:
    unit vectors at a radius of at least ``metrics.FILTER_SLACK`` never are
    (module docstring).  O(n) on the GPU, O(1) on the host.

    Raises
    ------
    ValueError
        ``precision="float32"``, not 2 columns, NaN or inf, a point outside
        haversine's domain.
    """
    if metric != "haversine":
        raise ValueError(f"no unit vectors on the GPU for metric {metric!r}")
    _check_precision(metric, precision)
    check_haversine_columns(int(X.shape[1]), name)
    P = to_device(cupy(), X, name, np.float64)
    U = gpu_unit_vectors.unit_vectors(P, name)
    refine = P if is_device_array(X) else X
    return MetricPoints(metric, (refine,), None), U, filter_radius(eps, metric, 3)


def _check_precision(metric: str, precision: str) -> None:
    if precision != "float64":
        raise ValueError(f"metric={metric!r} is decided in float64, as scikit-learn does; "
                         f"precision={precision!r} applies to the Euclidean metric only")


def filter_problem(mp: MetricPoints, eps: float):
    """The filter's points, conditioned, and its radius, at the caller's
    radius eps: ``(arrays, filter_eps)`` (``metrics.filter_radius``).
    O(n d)."""
    d = mp.refine[0].shape[1]
    return condition_points(list(mp.filter), filter_radius(eps, mp.metric, d), "float64")


def _refine_module():
    from .cpu import refine  # Numba: loaded on first use

    return refine


def run(plan: JoinPlan, R, S, filter_eps: float, *, points: MetricPoints, eps: float,
        output: str = "table", return_distance: bool = False, timings=None, progress=None,
        grid=None):
    """The metric join of ``points`` at the caller's radius eps: the filter
    join of the conditioned filter points (R None: the self-join of S) by
    ``plan`` (a request for a host table, ``plan.metric`` recorded), then
    the refine.  Returns the refined ``NeighborTable`` (with the metric's
    distances when ``return_distance``), or its int64 row counts for
    ``output="counts"``: the counts of the refined pairs, never of the
    candidates."""
    if plan.memory_route != "host table":
        raise ValueError(f"metric={points.metric!r} decides its pairs on the host, so its "
                         "table (or counts) is a host array: on_device=True applies to the "
                         "Euclidean metric only")
    refine = _refine_module()
    nt = engine.run(plan, R, S, filter_eps, timings=timings, progress=progress, grid=grid)
    Q = points.refine[0]
    Sr = Q if R is None else points.refine[1]
    code, threshold = METRIC_CODE[points.metric], metric_threshold(eps, points.metric)
    sure = _sure(points, eps, R is None)
    if output == "counts":
        indptr = np.ascontiguousarray(nt.indptr, dtype=np.int64)
        return refine.refine_counts(code, Q, Sr, indptr, nt.indices, threshold,
                                    self_join=R is None, sure=sure)
    return refine.refine_table(code, Q, Sr, nt, threshold, self_join=R is None,
                               distances=return_distance, sure=sure)


def _sure(points: MetricPoints, eps: float, self_join: bool):
    """What lets the refine keep a pair untested: for haversine the unit
    vectors (never conditioned) and the sure chord (``metrics.sure_radius``),
    else None.  O(1)."""
    if points.metric != "haversine":
        return None
    F = points.filter[0]
    return F, F if self_join else points.filter[1], sure_radius(eps, "haversine")


def entry(points: MetricPoints | None, eps: float, output: str = "table",
          return_distance: bool = False):
    """``run`` with the caller's points, radius and output bound, called as
    ``engine.run`` is (plan, R, S, filter_eps, ...); None for the Euclidean
    join (``points`` None)."""
    if points is None:
        return None
    return partial(run, points=points, eps=eps, output=output, return_distance=return_distance)


def run_chunks(plan: JoinPlan, mp: MetricPoints, eps: float, X, filter_eps: float,
               max_pairs: int):
    """``self_join_chunks`` under a metric: a generator of the total number
    of refined pairs, then the refined chunks in row order.  The total needs
    every chunk refined, so the filter's chunks are made twice: once to
    count, once to hand over (twice the filter join's time; memory stays
    bounded by a chunk).  A chunk holds at most ``max_pairs`` candidates,
    so at most as many pairs."""
    refine = _refine_module()
    code, threshold = METRIC_CODE[mp.metric], metric_threshold(eps, mp.metric)
    Q = mp.refine[0]
    sure = _sure(mp, eps, True)
    total = 0
    stream = engine.run_chunks(plan, X, filter_eps, max_pairs)
    next(stream, None)                      # the candidates' total
    for chunk in stream:                    # count only: no refined chunk is built
        indptr = np.ascontiguousarray(chunk.indptr, dtype=np.int64)
        total += int(refine.refine_counts(code, Q, Q, indptr, chunk.indices, threshold,
                                          self_join=True, row0=chunk.row_start,
                                          sure=sure).sum())
    yield total
    stream = engine.run_chunks(plan, X, filter_eps, max_pairs)
    next(stream, None)
    for chunk in stream:
        yield refine.refine_chunk(code, Q, chunk, threshold, sure)
