"""Which path computes a DBSCAN: the one routing rule of ``skyjoin.cluster``.

``DBSCAN.fit``, ``dbscan``, ``dbscan_sweep`` and ``dbscan_model`` validate
their input and resolve the device once, then ask ``plan_fit`` or
``plan_sweep`` for a ``DBSCANPlan``; the engines (``skyjoin.cluster.engine``
for one clustering) execute it and never choose a path.  Measurements
behind the rules are in docs/decisions/dbscan-fit-path.md (``plan_fit``)
and docs/decisions/dbscan-sweep.md (``plan_sweep``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from .._core.thread_count import cpu_threads
from .._core.threads import threadsafe_numba
from ..simjoin.algorithm import JoinSample, choose_algorithm, needs_sample, sample_join
from ..simjoin.projection import Projection
from ..simjoin.metrics import METRIC_ALIASES, METRICS
from .grid_cpu import MAX_DIMS

log = logging.getLogger("skyjoin")

__all__ = ["DBSCANPlan", "fit_route", "fit_metric", "KNOWN_METRICS", "grid_applies",
           "metric_grid_applies", "filter_on_device", "shares_grid", "table_algorithm",
           "join_sample",
           "results_on_device", "plan_fit", "plan_sweep", "FIT_PATHS", "SWEEP_METHODS"]

#: every path of a single clustering (``DBSCAN.path_``)
FIT_PATHS = ("grid-cpu", "sparse-grid-cpu", "grid-gpu", "gpu", "hybrid-cpu", "hybrid-gpu", "graph",
             "sklearn")
#: ``dbscan_sweep``'s methods
SWEEP_METHODS = ("auto", "hybrid")


@dataclass(frozen=True)
class DBSCANPlan:
    """Every routing decision of one DBSCAN call (single clustering or sweep).

    Attributes
    ----------
    device : {"cpu", "gpu"} or None
        Resolved device (None on the "graph" and "sklearn" paths, which need none).
    paths : tuple of str
        The paths to try, in order: each but the last may find out only by
        trying that it does not fit (a grid too large: the engine returns
        None; a table over GPU memory: MemoryError), and then the next runs.
        Single clustering: names of ``FIT_PATHS``; sweep: "grid-cpu",
        "grid-gpu" (per eps, then per clustering) and "table".
    precision : {"float64", "float32"}
    weighted : bool
    table_on_device : bool
        Sweep table path: keep T in GPU memory (if it fits) and assign there.
    pipelined : bool
        Sweep: build the next eps while the current one is assigned (§7.5).
    build_threads, assign_threads : int or None
        Sweep: Numba threads of the pipeline's two stages (None: all).
    shared_grid : bool
        "hybrid-cpu": one grid orders the points and serves the join
        (``shares_grid``).
    on_device : bool
        The results (labels, core indices) stay on the GPU as CuPy arrays
        (``results_on_device``): the GPU paths return their device arrays
        instead of copying them to the host, and a path that assigns on the
        host (HYBRID-DBSCAN) uploads its result.
    join_algorithm : {"grid", "brute"} or Projection
        The join's algorithm for the neighbour tables of the table paths
        (``table_algorithm``): a Projection for the screen on principal
        components ("projected").
    metric : str
        The join's metric (``fit_metric``): "euclidean", or one decided by
        a Euclidean filter and an exact refine (the table paths; haversine
        on the GPU grid too, ``metric_grid_applies``).
    filter_on_device : bool
        Haversine's unit vectors are made on the GPU from the points
        uploaded as they are, checked there (``filter_on_device``), and on
        the host only if the grid hands the clustering to the table path.
    ran : str or None
        The path that computed the result, once it has run (``path_``).
    """

    device: str | None
    paths: tuple
    precision: str = "float64"
    weighted: bool = False
    table_on_device: bool = False
    pipelined: bool = False
    build_threads: int | None = None
    assign_threads: int | None = None
    shared_grid: bool = False
    on_device: bool = False
    join_algorithm: str | Projection = "grid"
    metric: str = "euclidean"
    filter_on_device: bool = False
    ran: str | None = None

    @property
    def path(self) -> str:
        """The first path tried."""
        return self.paths[0]

    def describe(self) -> str:
        """One line for ``-v`` logging."""
        parts = [f"dbscan on {self.device or 'host'}: " + " -> ".join(self.paths),
                 self.precision]
        if self.metric != "euclidean":
            parts.append(f"metric {self.metric} (Euclidean filter, exact refine)")
        if self.filter_on_device:
            parts.append("unit vectors on the GPU")
        if self.weighted:
            parts.append("weighted")
        if self.table_on_device:
            parts.append("table on device")
        if self.pipelined:
            parts.append(f"pipelined (build threads {self.build_threads or 'all'}, "
                         f"assign threads {self.assign_threads or 'all'})")
        if self.shared_grid:
            parts.append("one grid orders and joins")
        if self.on_device:
            parts.append("results on device")
        if isinstance(self.join_algorithm, Projection):
            parts.append(f"tables by brute force ({self.join_algorithm.describe()})")
        elif self.join_algorithm != "grid":
            parts.append(f"tables by {self.join_algorithm} force")
        if self.ran is not None:
            parts.append(f"ran {self.ran}")
        return ", ".join(parts)


#: metric names that ``fit_route`` knows (the others are unknown to skyjoin:
#: scikit-learn runs them, and the estimator warns)
KNOWN_METRICS = METRICS + tuple(METRIC_ALIASES) + ("minkowski", "precomputed")
#: minkowski's powers that are metrics of the join (scikit-learn's own reading)
_MINKOWSKI = {1.0: "manhattan", 2.0: "euclidean", math.inf: "chebyshev"}


def fit_metric(metric, p):
    """The join's metric of a clustering (a name of
    ``skyjoin.simjoin.metrics.METRICS``), or None when the join has none:
    the metrics of ``METRICS`` and their aliases with p None or 2 (as
    before for the Euclidean metric), and "minkowski" with p = 1, 2 or inf
    (which scikit-learn reads as "manhattan", "euclidean", "chebyshev";
    p=None it refuses).  O(1)."""
    if not isinstance(metric, str):
        return None
    if metric == "minkowski":
        return None if p is None else _MINKOWSKI.get(float(p))
    name = METRIC_ALIASES.get(metric, metric)
    if name not in METRICS:
        return None
    return name if p is None or float(p) == 2.0 else None


def fit_route(metric, metric_params, p, sparse_input: bool) -> str:
    """Which family of paths a clustering takes: "join", "graph" or "sklearn".

    "graph": ``metric="precomputed"`` with a sparse X (a radius-neighbours
    graph, read as the neighbour table); "join": a metric of the join
    (``fit_metric``: Euclidean, Manhattan, Chebyshev, haversine, cosine),
    no ``metric_params``, on dense X; "sklearn": everything else (other
    metrics, callables, dense precomputed matrices, sparse features), run by
    ``sklearn.cluster.DBSCAN`` unchanged.  O(1).
    """
    if metric == "precomputed":
        return "graph" if sparse_input else "sklearn"
    if sparse_input or metric_params or fit_metric(metric, p) is None:
        return "sklearn"
    return "join"


def metric_grid_applies(device: str | None, weighted: bool, metric: str) -> bool:
    """Whether a grid path is tried under another metric: haversine (3-D
    unit vectors, a sure radius, ``skyjoin.simjoin.metrics.sure_radius``)
    without weights, on the GPU ("grid-gpu") and on the CPU
    ("sparse-grid-cpu": the dense fine grid of a sphere's box never fits).
    Manhattan and Chebyshev are no function of the Euclidean distance
    (their band would hold most pairs), and cosine's points have too many
    dimensions.  O(1)."""
    return device in ("cpu", "gpu") and not weighted and metric == "haversine"


def filter_on_device(device: str | None, weighted: bool, metric: str) -> bool:
    """Where the filter's points of a clustering under another metric are
    made: on the GPU iff its GPU grid path is tried (``metric_grid_applies``
    on the GPU: haversine), whose points they are.  The boundary then uploads the
    (latitude, longitude) points as they are (16 bytes a point, as the
    Euclidean path's 2-D points) and checks them and makes the unit vectors
    there (``skyjoin.simjoin.metric_join.device_problem``), instead of the
    host's check, unit vectors and a 24-byte upload; the table path, if the
    grid hands over, makes the host's from the points
    (``MetricPoints.on_host``).  Points already on the GPU are then read
    there.  Else on the host (``metric_points``).  O(1)."""
    return device == "gpu" and metric_grid_applies(device, weighted, metric)


def grid_applies(device: str, precision: str, weighted: bool, n_features: int,
                 sweep: bool = False) -> bool:
    """Whether the fine-grid path (no neighbour table) is tried: THE path rule.

    d <= ``grid_cpu.MAX_DIMS`` (4), no sample_weight (except that a CPU
    sweep handles weights on the grid: exact weighted levels), and float64,
    except that a single GPU clustering takes the grid in float32 too (its
    kernels test float32 points in float32; the CPU grid and the GPU sweep
    are float64 only).  Whether the grid then fits is known only once the
    bounds are found (``index.fine_grid.fine_grid_shape`` on the CPU,
    ``row_grid_shape`` on the GPU): the grid engines return None and the
    next path of the plan runs.  O(1).
    """
    if n_features > MAX_DIMS:
        return False
    if precision != "float64" and (device != "gpu" or sweep):
        return False
    return not weighted or (sweep and device == "cpu")


def _reads_sample(device: str | None, n_features: int) -> bool:
    """Whether the tables' rule (``table_algorithm``) reads the data's
    sample: where the join's rule needs one (on either device)."""
    return device is not None and needs_sample("auto", n_features)


def finite_when_conditioned(route: str, metric, p, device: str | None,
                            n_features: int) -> bool:
    """Whether a fit's points are tested for NaN and inf where they are
    conditioned (the GPU's upload, ``transfer.to_device``, or the host's
    range pass, ``conditioning.condition_checked``: passes made anyway)
    instead of by a pass of their own at validation (scikit-learn's, one
    thread): the Euclidean join (``metric`` and ``p`` as the estimator's,
    :func:`fit_metric`) whose plan reads no sample of the points before.
    O(1)."""
    return (route == "join" and fit_metric(metric, p) == "euclidean"
            and not _reads_sample(device, n_features))


def join_sample(X, eps: float, device: str | None) -> JoinSample | None:
    """The join rule's sample of X at radius eps
    (``skyjoin.simjoin.algorithm.sample_join``) where ``table_algorithm``
    reads it, else None (no sample is taken): what ``plan_fit`` and
    ``plan_sweep`` take.  O(1), or the sample's."""
    if not _reads_sample(device, int(X.shape[1])):
        return None
    return sample_join("auto", X, X, eps, device)


def table_algorithm(device: str | None, n_features: int,
                    sample: JoinSample | None = None) -> str | Projection:
    """The join's algorithm for DBSCAN's neighbour tables: the join's own
    rule (``skyjoin.simjoin.algorithm.choose_algorithm`` on the ``sample``),
    on the CPU and the GPU alike (the table is the join's, whichever
    algorithm builds it).  O(1)."""
    if not _reads_sample(device, n_features):
        return "grid"
    return choose_algorithm("auto", n_features, sample=sample, device=device)


def shares_grid(device: str, precision: str) -> bool:
    """Whether HYBRID-DBSCAN's one grid both orders the points and serves the
    join (the join then builds no grid of its own): on the CPU in float64,
    where the join's grid is the ordering grid.  O(1)."""
    return device == "cpu" and precision == "float64"


def results_on_device(on_device: bool, device: str | None, route: str = "join") -> bool:
    """Where the results of a DBSCAN call live: True (on the GPU, CuPy
    arrays) iff the caller asked ``on_device=True``, which needs the
    Euclidean join (route "join") on the GPU.  O(1).

    Raises
    ------
    ValueError
        ``on_device=True`` on the CPU, or on a route that runs on the host
        (scikit-learn's metrics, a precomputed graph).
    """
    if not on_device:
        return False
    if route != "join":
        raise ValueError(
            "on_device=True needs Euclidean DBSCAN on the GPU; this call takes the "
            f"{route!r} path, which runs on the host (metric, p or metric_params)")
    if device != "gpu":
        raise ValueError(f"on_device=True leaves the results on the GPU, but the device is "
                         f"{device!r}: use device='gpu' (or 'auto' on a machine with a GPU)")
    return True


def plan_fit(route: str, device: str | None, precision: str, weighted: bool,
             n_features: int, on_device: bool = False,
             join_sample: JoinSample | None = None, metric: str = "euclidean") -> DBSCANPlan:
    """The plan of one clustering (``DBSCAN.fit``, ``dbscan``).

    route "graph" (a precomputed sparse graph) and "sklearn" (other
    metrics) are single paths.  A metric other than the Euclidean takes
    HYBRID-DBSCAN ("hybrid-cpu", "hybrid-gpu": the filter join on the
    device, its table refined on the host, ``skyjoin.simjoin.metric_join``,
    then assigned there), after "grid-gpu" or "sparse-grid-cpu" where
    ``metric_grid_applies`` (haversine: the grid of the unit vectors
    decides the pairs within the sure radius, and hands the clustering on
    when a pair nearer eps matters; on the GPU its unit vectors are made
    there: ``filter_on_device``).  Euclidean DBSCAN on the join ("join"):

    * CPU: when ``grid_applies``, "grid-cpu" (the dense fine grid), then,
      when its box holds too many cells or its non-empty cells hold few
      points (``index.fine_grid.dense_grid_wins``), "sparse-grid-cpu" (the
      join's epsilon grid of non-empty cells, no table: ``grid_sparse``; it never
      refuses Euclidean points); else "hybrid-cpu", HYBRID-DBSCAN with the
      join on the CPU;
    * GPU: "grid-gpu" when ``grid_applies``, then "gpu" (T left on the GPU,
      core flags and union-find there, only labels come back: a single
      clustering reads T once, so shipping it, 4 bytes per pair, buys
      nothing), then "hybrid-gpu" (T streamed to the host and assigned on
      the CPU, the paper's HYBRID-DBSCAN) when T does not fit in GPU memory.

    Parameters
    ----------
    route : {"join", "graph", "sklearn"}
    device : {"cpu", "gpu"} or None
        Resolved device (used by "join" only).
    precision : {"float64", "float32"}
    weighted : bool
    n_features : int
    on_device : bool
        Leave the results on the GPU (``results_on_device``, which raises
        where that cannot be).
    join_sample : JoinSample, optional
        What the join's rule read of the data (``join_sample``), for the
        tables' algorithm (``table_algorithm``); None: the grid.
    metric : str
        The join's metric (``fit_metric``); n_features are then those of
        the filter's points.

    Returns
    -------
    DBSCANPlan

    Notes
    -----
    O(1).
    """
    on_device = results_on_device(on_device, device, route)
    if route != "join":
        return DBSCANPlan(device=None, paths=(route,), precision=precision, weighted=weighted)
    algorithm = table_algorithm(device, n_features, join_sample)
    if metric != "euclidean":
        grid = metric_grid_applies(device, weighted, metric)
        first = "grid-gpu" if device == "gpu" else "sparse-grid-cpu"
        return DBSCANPlan(device=device, paths=((first,) if grid else ())
                          + (f"hybrid-{device}",), precision=precision,
                          weighted=weighted, on_device=on_device, join_algorithm=algorithm,
                          shared_grid=shares_grid(device, precision), metric=metric,
                          filter_on_device=filter_on_device(device, weighted, metric))
    grid = grid_applies(device, precision, weighted, n_features)
    if device == "gpu":
        paths = (("grid-gpu",) if grid else ()) + ("gpu", "hybrid-gpu")
    else:
        paths = (("grid-cpu", "sparse-grid-cpu") if grid else ()) + ("hybrid-cpu",)
    return DBSCANPlan(device=device, paths=paths, precision=precision, weighted=weighted,
                      shared_grid=shares_grid(device, precision), on_device=on_device,
                      join_algorithm=algorithm)


def _thread_split(device: str, pipelined: bool):
    """Numba threads of the (builder, assigner) of a pipelined sweep; None: all of them.

    The assigner gets half of the threads; on the CPU the builder, whose
    count pass is parallel, keeps all of them (both share the cores; the
    assigner, mostly sequential, runs where the builder leaves cores idle),
    on a GPU the builder's host side keeps Numba's default.  O(1).
    """
    if not pipelined:
        return None, None
    total = cpu_threads()  # the caller's count, capped by the rule
    return (total if device == "cpu" else None), max(1, total // 2)


def plan_sweep(device: str, precision: str, weighted: bool, n_features: int, n_eps: int,
               method: str = "auto", pipeline: bool = True,
               on_device: bool = False, join_sample: JoinSample | None = None,
               metric: str = "euclidean") -> DBSCANPlan:
    """The plan of ``dbscan_sweep``.

    method "hybrid": the table path only, T streamed to the host and every
    min_samples assigned on the CPU (HYBRID-DBSCAN on any device).  method
    "auto": when ``grid_applies`` (sweep rule), the grid path first, per eps
    ("grid-cpu": one grid and the levels of every point for all min_samples;
    "grid-gpu": points sent once, every clustering on the GPU grid), an eps
    whose grid does not fit (or, on the GPU, whose points need rescaling,
    ``_core.conditioning``) taking the table path; on the GPU the table
    stays there if it fits (MemoryError: streamed to the host instead).

    Pipelining (§7.5) needs two eps and a thread-safe Numba threading layer
    (``_core.threads.threadsafe_numba``).  ``on_device``: every result's
    labels and core indices stay on the GPU (``results_on_device``).
    ``join_sample``: as for ``plan_fit`` (at the largest eps).  A metric
    other than the Euclidean takes the table path alone, each eps's table
    built by its own filter and refined (``skyjoin.simjoin.metric_join``),
    streamed to the host.

    Notes
    -----
    O(1) (the first call may run a tiny parallel region to fix Numba's layer).
    """
    on_device = results_on_device(on_device, device)
    hybrid = method == "hybrid"
    paths = ("table",)
    if metric != "euclidean":
        hybrid = True                    # refined on the host: no device table
    elif not hybrid and grid_applies(device, precision, weighted, n_features, sweep=True):
        paths = ("grid-gpu" if device == "gpu" else "grid-cpu",) + paths
    pipelined = bool(pipeline) and n_eps > 1 and paths[0] != "grid-gpu"
    if pipelined and not threadsafe_numba():
        log.debug("dbscan_sweep: Numba's workqueue threading layer is not thread-safe; "
                  "tables are built without pipelining")
        pipelined = False
    build, assign = _thread_split(device, pipelined)
    return DBSCANPlan(device=device, paths=paths, precision=precision, weighted=weighted,
                      table_on_device=device == "gpu" and not hybrid, pipelined=pipelined,
                      build_threads=build, assign_threads=assign, on_device=on_device,
                      join_algorithm=table_algorithm(device, n_features, join_sample),
                      metric=metric)
