"""``skyjoin.dbscan_sweep``: the multi-clustering pipeline of HYBRID-DBSCAN (§7.5, §7.6).

Many (eps, min_samples) variants of one data set, for throughput:

* **reuse over min_samples (§7.6)**: what one eps needs is built once and
  every min_samples reads it.  Going further than the paper, the
  min_samples of one eps are assigned *incrementally*: taken in decreasing
  order, the core set only grows, so the union-find forest of the previous
  min_samples stays valid and only the links of the newly core points are
  added.  Every link is then joined once for the whole sweep instead of
  once per min_samples.

  - the grid path (the rule: ``plan.grid_applies``; ``grid_links``): no
    table at all.  On the fine grid of ``grid_cpu`` one capped count per point
    gives its level (how many of the min_samples it is core for), one
    bottleneck level per pair of cells replaces the pairs of T (found
    lazily, Kruskal-style: never for two cells already joined), and one
    "reach" per (non-core point, cell) gives every border label; each
    min_samples then costs a union-find step over the cells and an O(n)
    labelling pass (those of all min_samples run side by side, one per
    thread, once every union-find step is done).
  - otherwise (the table path): T on the points in cell order, the core
    points of each new level made core by ``add_core_level``.

* **pipelining (§7.5)**: a producer thread builds the next eps's table
  (grid path: its grid and levels, what T would tell) while the consumer
  assigns points with the current one (everything that decides clusters:
  links, border reaches, labels).  Both are Numba code that releases the
  GIL; on a GPU the join runs on the device, and on the CPU the threads are
  split between the stages (``plan.plan_sweep``).  The ideal time of such a pipeline
  is equation (2), ``T_opt = T_np (|V| + 1) / (2 |V|)``, when the two
  stages take equal times on separate processors; ``pipeline_makespan``
  gives it for measured stage times.

Results are yielded as they finish, as ``SweepResult`` objects.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..._core import device as _device
from ..._core.conditioning import plan_conditioning
from ..._core.device import resolve_device
from ..._core.device_input import as_device_points, on_gpu
from ..._core.device_kernels import load
from ..._core.device_memory import DBSCAN_POINT_BYTES, check_points_fit, oom_as_error_in
from ..._core.thread_count import with_cpu_threads
from ..._core.thread_count import numba_threads
from ..._core.transfer import to_device
from ..._core.validate import check_bool, check_eps, check_min_samples, check_points, \
    check_precision, working_dtype
from ...simjoin.metric_join import filter_problem, metric_points
from ...simjoin.metrics import check_metric
from ..grid_gpu import gpu_grid_dbscan
from ..params import check_sample_weight
from ..plan import SWEEP_METHODS, DBSCANPlan, join_sample, plan_sweep
from .grid_links import assign_grid_levels
from .pipeline import eps_tables
from .table import assign_levels, count_clusters

__all__ = ["SweepResult", "dbscan_sweep"]

log = logging.getLogger("skyjoin")


@dataclass
class SweepResult:
    """One clustering of a sweep.

    Attributes
    ----------
    eps : float
    min_samples : int
    labels : ndarray of intp
        scikit-learn's labels (noise -1); a CuPy array with ``on_device``.
    core_sample_indices : ndarray of int64
        A CuPy array with ``on_device``.
    n_clusters : int
    timings : dict
        "table" (seconds to build what this eps's min_samples share: the
        grid index or the table T), "assign" (seconds of this clustering's
        assignment), "path" ("grid-cpu" or "table"), "pairs" (size of T, on
        the table path only) and "finished" (seconds since the sweep began).
    """

    eps: float
    min_samples: int
    labels: np.ndarray
    core_sample_indices: np.ndarray
    n_clusters: int
    timings: dict[str, Any] = field(default_factory=dict)


def _levels(min_samples):
    """Distinct min_samples in decreasing order (the core set grows along it)."""
    return sorted({check_min_samples(m) for m in min_samples}, reverse=True)


def dbscan_sweep(X: ArrayLike, eps: float | Sequence[float], min_samples: int | Sequence[int], *,
                 sample_weight: ArrayLike | None = None, device: str | None = None,
                 precision: str = "float64", pipeline: bool = True, progress: bool = False,
                 method: str = "auto", on_device: bool = False,
                 metric: str = "euclidean") -> Iterator[SweepResult]:
    """DBSCAN for every (eps, min_samples) pair, reusing tables and pipelining (§7.5-7.6).

    Parameters
    ----------
    X : array_like, shape (n, d)
        The points (Euclidean distance).  Points already on the GPU (CuPy,
        any ``__cuda_array_interface__``, a CUDA DLPack tensor) are read
        there in place and run on the GPU, as in :class:`skyjoin.DBSCAN`
        (``skyjoin._core.device_input``).
    eps : float or sequence of float
        Radii; one neighbour table is built per eps, in the order given.
    min_samples : int or sequence of int
        Every min_samples is clustered with every eps.
    sample_weight : array_like of shape (n,), optional
        As in ``DBSCAN.fit``.
    device : {"auto", "cpu", "gpu"} or None, default None
        Device of the join (None: the ``SKYJOIN_DEVICE`` environment
        variable, else "auto").  The paths (``plan.plan_sweep``): on the
        CPU, in float64 with d <= 4 and a grid of cells of side
        eps / sqrt(d) that fits (as ``grid_cpu.grid_dbscan``), no table is
        built (the grid path, see the module's notes); otherwise
        T is built by the join and assigned on the CPU.  On the GPU, in
        float64 without weights and d <= 4, every clustering runs the GPU
        grid path from points sent once (``_sweep_gpu_grid``); otherwise
        each table stays in GPU memory when it fits and every min_samples
        is assigned there, else it is streamed to the host and assigned on
        the CPU (HYBRID-DBSCAN).
    precision : {"float64", "float32"}
    pipeline : bool, default True
        Build the next eps's table (or grid and levels) in a background
        thread while the current one is assigned (§7.5); on the CPU the
        builder keeps all of Numba's threads and the assigner gets half.
        False runs the stages one after the other, each on all threads.
    progress : bool, default False
        Show a tqdm progress bar (one step per clustering).
    method : {"auto", "hybrid"}, default "auto"
        "auto": the paths above, the fastest.  "hybrid": the paper's
        HYBRID-DBSCAN on any device: T is built by the device's join and
        streamed to the host, and the CPU assigns every min_samples from it
        (incrementally, §7.6) while the join builds the next eps's T (§7.5).
        On a GPU this keeps the two processors of Fig. 3 busy at once.
    on_device : bool, default False
        Leave each result's labels and core sample indices on the GPU (CuPy
        arrays, no copy to the host); needs the GPU (ValueError otherwise).
        A table assigned on the host (method "hybrid", or a table too
        large for the GPU) has its results uploaded.
    metric : str, default "euclidean"
        As for :func:`skyjoin.self_join` ("manhattan", "chebyshev",
        "haversine", "cosine" and their aliases; unknown: ValueError).
        Another metric than the Euclidean takes the table path: each eps's
        table is built by its own filter join on the device, refined on the
        host (``skyjoin.simjoin.metric_join``) and assigned there, so the
        labels are ``sklearn.cluster.DBSCAN(metric=...)``'s.  Host points,
        float64 only.

    Returns
    -------
    iterator of SweepResult
        One result per (eps, min_samples), each as soon as it is ready: eps
        in the order given, the min_samples of one eps in decreasing order
        (the core set grows along them).  Each holds the labels, the core
        sample indices, the number of clusters and the timings.  The input
        is checked when the function is called; the clusterings run as the
        iterator is consumed.

    Raises
    ------
    ValueError
        Bad points, an eps <= 0, a min_samples < 1, a bad sample_weight or
        method; ``on_device=True`` off the GPU.
    TypeError
        Points on the GPU with ``device="cpu"``; ``on_device`` not a bool.
    skyjoin.GPUUnavailableError
        ``device="gpu"``, or points on the GPU, without a usable GPU.
    skyjoin.DeviceMemoryError
        On the GPU, points that cannot fit the device's free memory
        (checked by the call, as for :class:`skyjoin.DBSCAN`), or, while
        the results are iterated, CuPy out of device memory.

    See Also
    --------
    skyjoin.DBSCAN : one clustering.
    skyjoin.dbscan_model : predicts the time of other eps from one run.

    Notes
    -----
    The paths are chosen by ``skyjoin.cluster.plan.plan_sweep``.  Costs per
    eps: the grid path O(n d) plus one capped count per point, then
    O(cell pairs) for the links and O(n) per min_samples for the labels;
    the table path the join's cost plus O(pairs) for all its min_samples
    together (incremental union-find) and O(n) per min_samples.

    References
    ----------
    M. Gowanlock, C. M. Rude, D. M. Blair, J. D. Li, V. Pankratius, "A Hybrid
    Approach for Optimizing Parallel Clustering Throughput using the GPU",
    IEEE TPDS 30(4), 2019, §7.5-7.6.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> X = np.random.default_rng(0).normal(size=(2000, 2))
    >>> res = list(sj.dbscan_sweep(X, eps=[0.1, 0.2], min_samples=[5, 10], device="cpu"))
    >>> [(r.eps, r.min_samples) for r in res]
    [(0.1, 10), (0.1, 5), (0.2, 10), (0.2, 5)]
    """
    eps_list = [check_eps(e) for e in np.atleast_1d(np.asarray(eps, dtype=object)).tolist()]
    ms_list = _levels(np.atleast_1d(np.asarray(min_samples, dtype=object)).tolist())
    if not eps_list or not ms_list:
        raise ValueError("eps and min_samples must each hold at least one value")
    precision = check_precision(precision)
    if method not in SWEEP_METHODS:
        raise ValueError(f"method must be 'auto' or 'hybrid', got {method!r}")
    on_device = check_bool(on_device, "on_device")
    metric = check_metric(metric)
    dev = resolve_device(device, data_on_gpu=on_gpu(X))
    mp = None if metric == "euclidean" else metric_points([(X, "X")], metric, precision)
    points: Any = (mp.host_filter()[0] if mp is not None     # the filter's points
                   else as_device_points(X, "X", allow_empty=False, check_finite=True)
                   if on_gpu(X)     # read in place; no GPU path of the sweep tests the values
                   else check_points(X, name="X"))
    if sample_weight is not None:          # DBSCAN's rule, then the sweep's float64
        sample_weight = np.ascontiguousarray(
            check_sample_weight(sample_weight, points.shape[0]), dtype=np.float64)
    sample, sample_eps = points, max(eps_list)
    if mp is not None:                     # the filter's points at the largest radius
        (sample,), sample_eps = filter_problem(mp, max(eps_list))
    plan = plan_sweep(dev, precision, sample_weight is not None, points.shape[1],
                      len(eps_list), method, pipeline, on_device=on_device, metric=metric,
                      join_sample=join_sample(sample, sample_eps, dev))
    log.debug("%s", plan.describe())
    what = "GPU DBSCAN sweep"
    if plan.device == "gpu":
        check_points_fit(_device.cupy(), what, [points], working_dtype(precision),
                         self_join=True, per_point=DBSCAN_POINT_BYTES)
    if plan.path == "grid-gpu":
        results = _sweep_gpu_grid(points, eps_list, ms_list, progress, plan)
    else:
        results = _sweep(points if mp is None else mp, eps_list, ms_list, sample_weight, plan,
                         progress)
    return oom_as_error_in(_device.cupy(), what, results) if plan.device == "gpu" else results


def _progress_bar(progress, total):
    """A tqdm bar of ``total`` clusterings, or None (tqdm imported only when asked)."""
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="dbscan sweep", unit="clustering")


def _sweep_gpu_grid(X, eps_list, ms_list, progress, plan=None):
    """The sweep on the GPU by the grid path (``gpu_grid.gpu_grid_dbscan``) per clustering.

    On the GPU a single grid clustering (no table) costs about what reading a
    reused table once costs (docs/decisions/dbscan-sweep.md), so reuse buys nothing
    there: the points go to the GPU once and every (eps, min_samples) is
    clustered from them, O(n) transfers in all.  An eps whose grid does not
    fit takes the plan's next path, the table path.
    """
    if plan is None:
        plan = plan_sweep("gpu", "float64", False, X.shape[1], len(eps_list))
    table_plan = dataclasses.replace(plan, paths=plan.paths[1:], pipelined=False,
                                     build_threads=None, assign_threads=None)
    bar = _progress_bar(progress, len(eps_list) * len(ms_list))
    start = time.perf_counter()
    load(_device.cupy(), "dbscan")             # its device kernels, one compile
    Xd = to_device(_device.cupy(), X, "X", np.float64)
    try:
        for e in eps_list:
            t0 = time.perf_counter()
            # an eps that needs the points rescaled (skyjoin._core.conditioning)
            # takes the table path, which rescales them
            scaled = not plan_conditioning([X], e).identity
            res = None if scaled else gpu_grid_dbscan(Xd, e, ms_list[0],
                                                      on_device=plan.on_device)
            if res is None:
                for r in _sweep(X, [e], ms_list, None, table_plan, False):
                    if bar is not None:
                        bar.update(1)
                    yield r
                continue
            for k, m in enumerate(ms_list):
                if k:
                    t0 = time.perf_counter()
                    res = gpu_grid_dbscan(Xd, e, m, on_device=plan.on_device)
                core, labels = res
                r = SweepResult(eps=e, min_samples=m, labels=labels, core_sample_indices=core,
                                n_clusters=count_clusters(labels),
                                timings={"table": 0.0, "assign": time.perf_counter() - t0,
                                         "path": "grid-gpu",
                                         "finished": time.perf_counter() - start})
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(eps=e, min_samples=m)
                yield r
    finally:
        if bar is not None:
            bar.close()


@with_cpu_threads
def _sweep(X, eps_list, ms_list, sample_weight, plan: DBSCANPlan, progress):
    """The generator behind ``dbscan_sweep``: the plan's grid-cpu or table path per eps."""
    bar = _progress_bar(progress, len(eps_list) * len(ms_list))
    start = time.perf_counter()
    assign_threads = plan.assign_threads
    try:
        for e, built, table_s in eps_tables(X, eps_list, plan, ms_list, sample_weight):
            if built[0] == "grid":
                levels = assign_grid_levels(built[1], ms_list)
                info = {"path": "grid-cpu"}
            else:
                _, nt, order = built
                levels = assign_levels(nt, ms_list, sample_weight, order, plan.on_device)
                info = {"path": "table", "pairs": nt.n_pairs}
            while True:
                with numba_threads(assign_threads):  # not around the yield: the caller's code
                    item = next(levels, None)
                if item is None:
                    break
                m, core, labels, n_clusters, assign_s = item
                res = SweepResult(eps=e, min_samples=m, labels=labels, core_sample_indices=core,
                                  n_clusters=n_clusters,
                                  timings={"table": table_s, "assign": assign_s, **info,
                                           "finished": time.perf_counter() - start})
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(eps=e, min_samples=m)
                yield res
            del built, levels
    finally:
        if bar is not None:
            bar.close()
