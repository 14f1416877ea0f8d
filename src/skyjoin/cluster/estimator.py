"""``skyjoin.DBSCAN`` and ``skyjoin.dbscan``: scikit-learn's DBSCAN on the epsilon join.

``fit`` checks X and the parameters, resolves the device once, conditions
the points once (``skyjoin._core.conditioning``), asks ``plan.plan_fit``
for the paths (the one rule, written there), reports the plan
(``skyjoin._core.plans.report``) and runs it, clustering on the join through
the one entry ``skyjoin.cluster.engine.run``:

* "graph": ``metric="precomputed"`` with a sparse X: X *is* a
  radius-neighbours graph, its entries ``<= eps`` (and the diagonal) are the
  neighbour table;
* the join, for Euclidean distance on dense data ("euclidean", "l2", or "minkowski"
  with p = 2, no ``metric_params``): "grid-cpu" / "grid-gpu" (``grid_cpu``,
  ``grid_gpu``: a fine grid, no neighbour table), "sparse-grid-cpu" (``grid_sparse``:
  the epsilon grid's non-empty cells, no table, where the dense fine grid does not
  fit or its cells hold few points: ``index.fine_grid.dense_grid_wins``), "gpu"
  (``table_gpu``: T kept on the GPU), "hybrid-cpu" / "hybrid-gpu" (``hybrid``:
  HYBRID-DBSCAN, Gowanlock et al. 2019, §3); for the join's other metrics
  (Manhattan, Chebyshev, haversine, cosine: ``plan.fit_metric``) "hybrid-cpu" /
  "hybrid-gpu", T refined on the host (``hybrid.hybrid_labels`` with ``metric``),
  after "grid-gpu" / "sparse-grid-cpu" for haversine (``plan.metric_grid_applies``;
  on the GPU its unit vectors made there, ``plan.filter_on_device``);
* "sklearn": everything else (other metrics, callables, dense precomputed
  distance matrices, sparse feature matrices) is handed to
  ``sklearn.cluster.DBSCAN`` unchanged (a metric skyjoin does not know
  warns: ``_warn_unknown_metric``).

Measurements behind the rule: docs/decisions/dbscan-fit-path.md.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import DBSCAN as SklearnDBSCAN
from sklearn.utils import assert_all_finite
from sklearn.utils.validation import validate_data

from .._core.conditioning import condition_checked
from .._core.device import cupy, is_device_array, resolve_device
from .._core.device_input import as_device_points, on_gpu
from .._core.device_memory import DBSCAN_POINT_BYTES, check_points_fit, oom_as_error
from .._core.plans import report
from .._core.thread_count import with_cpu_threads
from .._core.transfer import to_device
from .._core.validate import check_eps, check_min_samples, check_precision, working_dtype
from ..simjoin.metric_join import device_problem, filter_problem, metric_points
from ..simjoin.result_size import check_memory_limit
from . import engine
from .core_rows import core_rows
from .params import check_params, check_sample_weight
from .plan import (KNOWN_METRICS, filter_on_device, finite_when_conditioned, fit_metric, fit_route,
                   join_sample, plan_fit)
from .union_find import labels_from_table

__all__ = ["DBSCAN", "dbscan"]


def _graph_table(X, eps):
    """Neighbour table of a precomputed sparse distance graph, as scikit-learn reads it.

    The diagonal is made explicit (a point is its own neighbour unless its
    stored self-distance exceeds eps) and only stored entries ``<= eps``
    count; implicit zeros elsewhere are not neighbours.
    """
    G = sparse.csr_matrix(X, copy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sparse.SparseEfficiencyWarning)
        G.setdiag(G.diagonal())
    G.sort_indices()
    keep = G.data <= eps
    rows = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    indptr = np.zeros(G.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=G.shape[0]), out=indptr[1:])
    indices = G.indices[keep].astype(np.int64)
    # is the relation symmetric? (then the parallel assignment applies)
    A = sparse.csr_matrix((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=G.shape)
    symmetric = (A != A.T).nnz == 0
    return indptr, indices, symmetric


class DBSCAN(ClusterMixin, BaseEstimator):
    """DBSCAN clustering on the epsilon join, with scikit-learn's exact results.

    A drop-in replacement for ``sklearn.cluster.DBSCAN``: same parameters,
    attributes and labels (not only the same partition; scikit-learn's
    brute force on float64 input is the reference, see the Notes).  Euclidean DBSCAN
    on dense data runs HYBRID-DBSCAN (Gowanlock et al. 2019): the neighbour
    table from skyjoin's epsilon join (CPU or GPU), then a parallel point
    assignment; on a GPU a single clustering runs entirely on the GPU.  See
    the module docstring for the exact rule.

    Parameters
    ----------
    eps : float, default=0.5
        Two samples are neighbours iff their distance is ``<= eps``.
    min_samples : int, default=5
        Number of samples (or total weight) in a neighbourhood, the point
        itself included, for the point to be a core point.
    metric : str or callable, default="euclidean"
        Accelerated, with scikit-learn's meaning and labels: "euclidean"
        (also "l2", "minkowski" with p=2), "manhattan" ("cityblock", "l1",
        "minkowski" with p=1), "chebyshev" ("infinity", "minkowski" with
        p=inf), "haversine" (latitude, longitude in radians) and "cosine"
        (the last four: a Euclidean filter join on the device, each pair
        decided on the host by scikit-learn's own test, float64 only; see
        :func:`skyjoin.self_join`); "precomputed" with a sparse
        radius-neighbours graph is used directly; anything else is computed
        by ``sklearn.cluster.DBSCAN``, with a UserWarning naming a metric
        that skyjoin does not know.
    metric_params : dict, default=None
        Passed to scikit-learn (any value other than None/{} means the
        scikit-learn path).
    algorithm : {"auto", "ball_tree", "kd_tree", "brute"}, default="auto"
        Used only on the scikit-learn path (the join is always grid based).
    leaf_size : int, default=30
        Used only on the scikit-learn path.
    p : float, default=None
        Minkowski power; p other than None or 2 means the scikit-learn path.
    n_jobs : int, default=None
        Used only on the scikit-learn path (our engines use Numba's threads,
        see ``numba.set_num_threads``).
    device : {"auto", "cpu", "gpu"} or None, default=None
        Device of the join ("gpu" without a GPU is an error; None reads the
        ``SKYJOIN_DEVICE`` environment variable, else "auto").
    precision : {"float64", "float32"}, default="float64"
        Working precision of the distance test (float32 is opt-in: pairs
        within a few float32 ulps of eps may differ from float64).
    memory_limit : int or "auto", default="auto"
        Bytes the neighbour table of the table paths ("gpu", "hybrid-cpu",
        "hybrid-gpu") may take in the memory it goes to ("auto": most of the
        memory free there; see ``skyjoin.self_join``).  A table over the GPU's limit is
        built on the host instead; over the host's, the fit raises
        ``skyjoin.ResultTooLargeError`` before allocating it.
    on_device : bool, default=False
        Leave the results on the GPU: ``labels_``, ``core_sample_indices_``
        and ``components_`` are CuPy arrays, and no copy of them to the host
        is made (saves the device-to-host copy, 8 bytes a sample for the
        labels).  Needs a metric of the join on the GPU (``device="gpu"``,
        or "auto" with a GPU); otherwise ``fit`` raises ValueError.  The
        HYBRID-DBSCAN path, which assigns on the host (the metrics other
        than the Euclidean take it, haversine when its grid hands over),
        uploads its result.

    Attributes
    ----------
    core_sample_indices_ : ndarray of shape (n_core_samples,)
        Indices of core samples (a CuPy array with ``on_device``, as are
        the next two).
    components_ : ndarray of shape (n_core_samples, n_features)
        Copy of each core sample found by training.
    labels_ : ndarray of shape (n_samples,)
        Cluster labels; noisy samples get -1.  Clusters are numbered in order
        of their lowest-index core sample, and a border sample takes the
        lowest label among the clusters of its core neighbours, exactly as
        scikit-learn.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X has feature names that are all strings.
    path_ : str
        Which path computed the result: "grid-cpu", "sparse-grid-cpu",
        "grid-gpu", "hybrid-cpu", "hybrid-gpu", "gpu", "graph" or "sklearn".
    timings_ : dict
        Seconds spent in the phases of the fit ("table", "assign", ...).

    See Also
    --------
    dbscan : the functional form.
    skyjoin.dbscan_sweep : many (eps, min_samples) with table reuse.
    sklearn.cluster.DBSCAN : the reference semantics.

    Notes
    -----
    The path is chosen by one rule, ``skyjoin.cluster.plan.plan_fit`` (see
    the module docstring); ``skyjoin -v`` logs the plan.  Costs: the grid
    paths O(n d) to build a fine grid of cells of side eps / sqrt(d) (every
    cell with ``min_samples`` points or more is all core), plus the
    distance tests of the other points against their near cells, plus
    O(n) to label; the table paths the join's cost (see
    :func:`skyjoin.self_join`) plus O(pairs) for the core flags and the
    union-find assignment, parallel over the points (§3, §5).

    The neighbour table holds every pair within eps, so on the table paths
    memory grows with the mean number of neighbours times n (4 bytes per
    pair); choose eps accordingly.

    With ``sample_weight``, a sample is core iff the exact sum of the
    float64 weights of its neighbourhood (itself included), rounded once to
    float64 (half to even, as ``math.fsum``), is at least ``min_samples``;
    every path and device applies this rule (``core_points.core_points``).  That
    sum does not depend on the order of the neighbours.  scikit-learn adds
    the weights with ``np.sum`` in the order its radius query returns the
    neighbours, which depends on ``algorithm`` and ``leaf_size``; its sum is
    within a few ulps of the correctly rounded one, so the two decide
    differently only where scikit-learn's sum lands on the other side of
    ``min_samples``.  For example, three samples within eps of each other
    with weights 0.7, 0.2 and 0.1, ``min_samples=1``: these doubles sum
    exactly to 1 - 2**-55, which rounds to 1.0, so all three are core here; ``np.sum`` adding them in that order gives
    0.9999999999999999 and scikit-learn labels all three noise (listed as
    0.1, 0.2, 0.7 it gets 1.0 and agrees).  Conversely, weights 1 - 2**-53,
    2**-54 and -2**-55 sum exactly to 1 - 3 * 2**-55, which rounds to
    1 - 2**-53 < 1: noise here, while ``np.sum`` gives 1.0 and scikit-learn
    finds them core.  Weights whose sums float64 holds exactly in any order
    (integers, multiples of one power of two that stay small) decide
    identically.

    Which scikit-learn settings the labels equal.  Two samples are
    neighbours iff the float64 sum of their squared differences is at most
    ``fl(eps)**2``; scikit-learn's ``algorithm="brute"`` on float64 input
    decides the same, as do scipy's ``cKDTree`` neighbourhoods.  Two of
    scikit-learn's settings decide otherwise:

    * Its trees (``algorithm="kd_tree"`` and, in scikit-learn 1.9, also
      ``"ball_tree"``; ``"auto"`` where it picks one) take a whole tree node
      when a rounded distance bound is ``<= eps``, so at an exact tie they
      can admit pairs whose squared distance exceeds ``fl(eps)**2``.
      Example: 6 copies each of (0, 1, 0) and (1, 0, 1), ``eps=np.sqrt(3)``,
      ``min_samples=7``.  The squared distance across is 3, above
      fl(sqrt(3))**2 = 2.9999999999999996: brute force, cKDTree and skyjoin
      label all 12 samples -1, scikit-learn's kd_tree and ball_tree all 0.
    * Its brute force computes float32 input in float32.  Example: the
      float32 points 0
      and 0.1 (0.10000000149 in float64), ``eps=0.1``, ``min_samples=2``:
      scikit-learn's brute force labels them 0, 0; skyjoin works in float64
      and labels them -1, -1, as scikit-learn does for
      ``X.astype(np.float64)`` (``precision="float32"`` gives 0, 0 here).

    ``tests/test_dbscan_sklearn_differences.py`` checks both examples.

    References
    ----------
    M. Gowanlock, C. M. Rude, D. M. Blair, J. D. Li, V. Pankratius, "A Hybrid
    Approach for Optimizing Parallel Clustering Throughput using the GPU",
    IEEE TPDS 30(4), 2019: §3 (the neighbour table T and HYBRID-DBSCAN),
    §5 (the algorithm), §6 (batching the table).

    M. Ester, H.-P. Kriegel, J. Sander, X. Xu, "A Density-Based Algorithm
    for Discovering Clusters in Large Spatial Databases with Noise", KDD
    1996 (the definition).

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin import DBSCAN
    >>> X = np.array([[1, 2], [2, 2], [2, 3], [8, 7], [8, 8], [25, 80]])
    >>> clustering = DBSCAN(eps=3, min_samples=2, device="cpu").fit(X)
    >>> clustering.labels_
    array([ 0,  0,  0,  1,  1, -1])
    """

    def __init__(self, eps: float = 0.5, *, min_samples: int = 5,
                 metric: str | Callable[..., float] = "euclidean",
                 metric_params: dict[str, Any] | None = None, algorithm: str = "auto",
                 leaf_size: int = 30, p: float | None = None, n_jobs: int | None = None,
                 device: str | None = None, precision: str = "float64",
                 memory_limit: int | str = "auto", on_device: bool = False) -> None:
        self.eps = eps
        self.min_samples = min_samples
        self.metric = metric
        self.metric_params = metric_params
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.p = p
        self.n_jobs = n_jobs
        self.device = device
        self.precision = precision
        self.memory_limit = memory_limit
        self.on_device = on_device

    # -- fitting -----------------------------------------------------------
    @with_cpu_threads
    def fit(self, X: ArrayLike | sparse.spmatrix, y: object = None,
            sample_weight: ArrayLike | None = None) -> DBSCAN:
        """Perform DBSCAN clustering from features or a distance graph.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or \
                (n_samples, n_samples)
            Training instances, or distances between instances if
            ``metric="precomputed"`` (a sparse matrix is a radius-neighbours
            graph: only stored entries count).  Points already on the GPU
            (a CuPy array, any ``__cuda_array_interface__``, a CUDA DLPack
            tensor such as PyTorch's) are read there in place, without a
            copy through the host, and clustered on the GPU (the rule of
            ``skyjoin._core.device_input``: ``device="auto"`` means the GPU
            for them, ``device="cpu"`` is a TypeError); they need the
            Euclidean metric, or haversine without sample_weight.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each sample: a sample is core iff the total weight of
            its neighbourhood (itself included), summed exactly and rounded
            once to float64, is at least ``min_samples`` (see the Notes of
            the class for where scikit-learn's ``np.sum`` may decide
            otherwise).  Weights may be negative or zero.  Weights on the
            GPU are copied to the host (8 bytes a sample).

        Returns
        -------
        self : DBSCAN
            The fitted estimator.

        Raises
        ------
        ValueError
            Bad parameters (eps <= 0, min_samples < 1, ...), NaN/inf values,
            wrong shapes, a sample_weight of the wrong length;
            ``on_device=True`` where the clustering does not run on the GPU.
        TypeError
            Values that are not real numbers; points on the GPU with
            ``device="cpu"`` or another metric (haversine unweighted aside).
        skyjoin.GPUUnavailableError
            ``device="gpu"``, or points on the GPU, without a usable GPU.
        skyjoin.ResultTooLargeError
            The neighbour table of a table path would not fit in host memory
            (or ``memory_limit``).
        skyjoin.DeviceMemoryError
            On the GPU: the points cannot fit the device's free memory
            (checked before they are copied), or CuPy ran out of device
            memory on every path that could take the clustering.
        """
        check_params(self)
        device: str | None
        if on_gpu(X):
            # points on the GPU (_core.device_input): read there, not by scikit-learn
            route = fit_route(self.metric, self.metric_params, self.p, False)
            _refuse_host_route(route, self.metric, fit_metric(self.metric, self.p),
                               sample_weight is not None)
            device = resolve_device(self.device, data_on_gpu=True)
            X = as_device_points(X, "X", min_rows=1)
            self._features_of_device_input(X)
        else:
            X = validate_data(self, X, accept_sparse="csr", ensure_all_finite=False)
            route = fit_route(self.metric, self.metric_params, self.p, sparse.issparse(X))
            device = resolve_device(self.device) if route == "join" else None
            if not finite_when_conditioned(route, self.metric, self.p, device, X.shape[1]):
                assert_all_finite(X, input_name="X")
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X.shape[0])
        eps = check_eps(self.eps)
        min_samples = check_min_samples(self.min_samples)
        precision = check_precision(self.precision)
        memory_limit = check_memory_limit(self.memory_limit)
        metric = fit_metric(self.metric, self.p) if route == "join" else "euclidean"
        if route == "sklearn":
            _warn_unknown_metric(self.metric)
        Xj, eps_j, refine = X, eps, None
        if metric != "euclidean":       # the filter's points and radius, the checked points
            Xj, eps_j, refine = _metric_problem(X, metric, eps, precision, filter_on_device(
                device, sample_weight is not None, metric))
        plan = plan_fit(route, device, precision, sample_weight is not None, Xj.shape[1],
                        on_device=self.on_device, metric=metric,
                        join_sample=join_sample(Xj, eps_j, device))
        timings: dict = {}
        t0 = time.perf_counter()
        if route == "join":
            Xc, eps_c = _conditioned(plan, X, eps) if refine is None else (Xj, eps_j)
            core, labels, path = engine.run(plan, Xc, eps_c, min_samples, sample_weight,
                                            timings, memory_limit, Xc is not X, refine)
            del Xc, Xj
        else:
            report(plan, "dbscan plan")
            if route == "sklearn":
                core, labels = self._fit_sklearn(X, sample_weight)
            else:
                indptr, indices, symmetric = _graph_table(X, eps)
                is_core, labels = labels_from_table(indptr, indices, min_samples,
                                                    sample_weight, self_in_table=True,
                                                    symmetric=symmetric)
                core = np.flatnonzero(is_core)
            path = route
        timings["total"] = time.perf_counter() - t0
        self.core_sample_indices_ = _as_result(core, np.int64)
        self.labels_ = _as_result(labels, np.intp)
        self.path_ = path
        self.timings_ = timings
        self.components_ = core_rows(X, self.core_sample_indices_, plan.on_device)
        return self

    def _features_of_device_input(self, X) -> None:
        """What ``validate_data`` records for host input: ``n_features_in_``
        (device arrays carry no feature names, so none are kept)."""
        self.n_features_in_ = int(X.shape[1])
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _fit_sklearn(self, X, sample_weight):
        """Hand the fit to scikit-learn's DBSCAN (metrics we do not accelerate)."""
        est = SklearnDBSCAN(eps=self.eps, min_samples=self.min_samples, metric=self.metric,
                        metric_params=self.metric_params, algorithm=self.algorithm,
                        leaf_size=self.leaf_size, p=self.p, n_jobs=self.n_jobs)
        est.fit(X, sample_weight=sample_weight)
        return est.core_sample_indices_, est.labels_

    def fit_predict(self, X: ArrayLike | sparse.spmatrix, y: object = None,
                    sample_weight: ArrayLike | None = None) -> np.ndarray:
        """Compute clusters and return the labels (``fit(X).labels_``).

        Parameters
        ----------
        X : {array-like, sparse matrix}
            As in ``fit``.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster labels; noise is -1.
        """
        self.fit(X, sample_weight=sample_weight)
        return self.labels_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.metric == "precomputed"
        tags.input_tags.sparse = True
        return tags


def _conditioned(plan, X, eps):
    """The points and eps conditioned once (``_core.conditioning``), where the plan's
    first path reads them: on the GPU for a GPU path (the one upload, checked against
    the free device memory first, then one reduction there), else on the host; both
    test NaN and inf on the way, in the range pass (``plan.finite_when_conditioned``).  float32 points
    travel as float32 (scaled by a power of two, they round once).  O(n d)."""
    if plan.device == "gpu" and plan.paths[0] != "hybrid-gpu":
        cp = cupy()
        check_points_fit(cp, "GPU DBSCAN", [X], working_dtype(plan.precision), self_join=True,
                         per_point=DBSCAN_POINT_BYTES)
        dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
        with oom_as_error(cp, "GPU DBSCAN"):       # tested by condition_checked's pass
            X = to_device(cp, X, "X", dtype, check_finite=False)
    (Xc,), eps_c = condition_checked([X], ["X"], eps, plan.precision)
    return Xc, eps_c


def _metric_problem(X, metric, eps, precision, on_device):
    """(filter points, filter radius, (checked points, eps)) of a clustering
    under another metric, made where the plan's rule says
    (``plan.filter_on_device``): on the GPU (``metric_join.device_problem``,
    once the points are found to fit there, as in ``_conditioned``), else on
    the host.  O(n d), on the GPU O(1) on the host."""
    if not on_device:
        points = metric_points([(X, "X")], metric, precision)
        (Xj,), eps_j = filter_problem(points, eps)
        return Xj, eps_j, (points, eps)
    cp = cupy()
    check_points_fit(cp, "GPU DBSCAN", [X], np.float64, self_join=True)
    with oom_as_error(cp, "GPU DBSCAN"):
        points, U, eps_j = device_problem(X, metric, eps, precision)
    return U, eps_j, (points, eps)


def _warn_unknown_metric(metric) -> None:
    """A UserWarning naming a metric that skyjoin does not know (a callable,
    or a name outside ``plan.KNOWN_METRICS``): scikit-learn computes the
    clustering, and ``path_`` says "sklearn".  Known metrics that take
    scikit-learn's path for their parameters (p, metric_params, sparse
    input) do not warn.  O(1)."""
    if isinstance(metric, str) and metric in KNOWN_METRICS:
        return
    name = metric if isinstance(metric, str) else getattr(metric, "__name__", repr(metric))
    warnings.warn(f"metric={name!r} is not one of skyjoin's metrics: scikit-learn's DBSCAN "
                  "computes this clustering on the host (path_ 'sklearn'); skyjoin's are "
                  f"{', '.join(KNOWN_METRICS[:-1])}", UserWarning, stacklevel=4)


def _refuse_host_route(route, metric, join_metric=None, weighted=False) -> None:
    """TypeError for points on the GPU on a path that reads them on the host
    (scikit-learn's metrics, and the refine of the join's other metrics):
    only Euclidean DBSCAN, and haversine DBSCAN whose unit vectors are made
    on the GPU (``plan.filter_on_device``: without weights), read points on
    the GPU; they are never copied to the host implicitly (haversine's only
    when its grid hands the clustering to the table path).  O(1)."""
    if route == "join" and (join_metric == "euclidean"
                            or filter_on_device("gpu", weighted, join_metric)):
        return
    where = ("computed by scikit-learn on the host" if route != "join" else
             "decided on the host (the join's filter runs on the GPU from host points)")
    raise TypeError(
        f"X is on the GPU, but metric={metric!r} (with these p, metric_params and "
        f"sample_weight) is {where}: only Euclidean DBSCAN runs on the GPU from points "
        "there (and haversine DBSCAN without sample_weight). "
        "Copy X to the host first (e.g. cupy.asnumpy(X)) for this metric")


def _as_result(a, dtype):
    """A result array in the given dtype, where it lies (NumPy or CuPy)."""
    return a.astype(dtype, copy=False) if is_device_array(a) else np.asarray(a, dtype=dtype)


def dbscan(X: ArrayLike | sparse.spmatrix, eps: float = 0.5, *, min_samples: int = 5,
           metric: str | Callable[..., float] = "minkowski",
           metric_params: dict[str, Any] | None = None, algorithm: str = "auto",
           leaf_size: int = 30, p: float | None = 2, sample_weight: ArrayLike | None = None,
           n_jobs: int | None = None, device: str | None = None,
           precision: str = "float64", memory_limit: int | str = "auto",
           on_device: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """DBSCAN clustering from a vector array or distance matrix, like ``sklearn.cluster.dbscan``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features) or \
            (n_samples, n_samples)
        Feature array, or distances if ``metric="precomputed"``.  Points on
        the GPU are read there in place, as in ``DBSCAN.fit``.
    eps : float, default=0.5
        Neighbourhood radius (distance ``<= eps``).
    min_samples : int, default=5
        Neighbourhood size (itself included) of a core point.
    metric, metric_params, algorithm, leaf_size, p, n_jobs
        As ``DBSCAN``; the join's metrics are accelerated (Euclidean, that
        is minkowski with p=2, Manhattan, Chebyshev, haversine, cosine).
    sample_weight : array-like of shape (n_samples,), default=None
        As ``DBSCAN.fit``: neighbourhood weights summed exactly, rounded once.
    device : {"auto", "cpu", "gpu"} or None, default=None
        None: the ``SKYJOIN_DEVICE`` environment variable, else "auto".
    precision : {"float64", "float32"}, default="float64"
    memory_limit : int or "auto", default="auto"
        As ``DBSCAN``: bytes the neighbour table of a table path may take.
    on_device : bool, default=False
        As ``DBSCAN``: both results stay on the GPU as CuPy arrays.

    Returns
    -------
    core_samples : ndarray of shape (n_core_samples,)
        Indices of core samples (CuPy with ``on_device``).
    labels : ndarray of shape (n_samples,)
        Cluster labels; noise is -1 (CuPy with ``on_device``).

    Raises
    ------
    ValueError
        As ``DBSCAN.fit``.
    skyjoin.ResultTooLargeError
        As ``DBSCAN.fit``.

    See Also
    --------
    DBSCAN : the estimator (same rule, attributes ``path_`` and ``timings_``).
    skyjoin.dbscan_sweep : many (eps, min_samples) with table reuse.

    Notes
    -----
    The path is chosen by ``skyjoin.cluster.plan.plan_fit``.  Costs: the grid
    paths O(n d) plus the distance tests of each non-dense point against its
    near cells; the table paths the join's cost plus O(pairs) to assign.

    References
    ----------
    HYBRID-DBSCAN, §3: the full reference is in :class:`DBSCAN`.

    Examples
    --------
    >>> from skyjoin import dbscan
    >>> X = [[1, 2], [2, 2], [2, 3], [8, 7], [8, 8], [25, 80]]
    >>> core_samples, labels = dbscan(X, eps=3, min_samples=2, device="cpu")
    >>> core_samples
    array([0, 1, 2, 3, 4])
    >>> labels
    array([ 0,  0,  0,  1,  1, -1])
    """
    est = DBSCAN(eps=eps, min_samples=min_samples, metric=metric, metric_params=metric_params,
                 algorithm=algorithm, leaf_size=leaf_size, p=p, n_jobs=n_jobs, device=device,
                 precision=precision, memory_limit=memory_limit, on_device=on_device)
    est.fit(X, sample_weight=sample_weight)
    return est.core_sample_indices_, est.labels_
