"""Public API of the epsilon join: ``self_join``, ``join``, ``self_join_chunks``.

Each public function runs the same steps, once each: check its arguments
(``skyjoin._core.validate``), resolve the device
(``skyjoin._core.device.resolve_device``), condition the points
(``skyjoin._core.conditioning``: into the working precision's range), build
the call's request (``plan.request``), and hand points, eps and request to
the one entry into the engines, ``skyjoin.simjoin.engine``; then the result
(with the distances, when asked for: ``distances.pair_distances``).  On the
GPU the points are first checked against the device's free memory
(``skyjoin._core.device_memory``), and CuPy's out-of-memory error is
reported as ``DeviceMemoryError``.

The engine builds its grid, completes the plan (``plan.plan_cpu``,
``plan.plan_gpu``), reports it (``skyjoin._core.plans.report``: the
"skyjoin" logger at debug level, which ``skyjoin -v`` shows, and
``recording()`` blocks) and checks that the table fits
(``result_size.result_size_guard``) once its count pass knows the size.  The
engines are imported on first use, so that ``import skyjoin`` stays light
(no Numba; CuPy only when the GPU engine runs).
"""

from __future__ import annotations

import math
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from .._core.conditioning import condition_checked
from .._core.device import cupy, resolve_device
from .._core.device_input import as_device_points, on_gpu
from .._core.device_memory import check_points_fit, oom_as_error, oom_as_error_in
from .._core.timing import phase
from .._core.validate import check_bool, check_eps, check_points, check_precision, \
    working_dtype
from ..index.grid import check_index_dims
from . import engine, metric_join
from .algorithm import resolve_algorithm
from .metrics import check_metric
from .plan import PATTERNS as CELL_PATTERNS, JoinPlan, request
from .result_size import check_memory_limit
from .result import NeighborTable, PairStream

__all__ = ["self_join", "join", "self_join_chunks"]

OUTPUTS = ("table", "counts")
PATTERNS = ("auto",) + CELL_PATTERNS
# Options understood by the GPU engine only: its choices (recorded in the
# plan, ``plan.request``) and how the call reports progress.
GPU_ROUTING = ("kernel", "threads_per_point", "schedule", "batch_pairs", "device_memory_limit",
               "on_device")
GPU_RUN = ("progress",)


def _check_choice(value, name, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _split_options(device: str, options: dict) -> dict:
    unknown = [k for k in options if k not in GPU_ROUTING and k not in GPU_RUN]
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    if device == "cpu":
        gpu_only = [k for k, v in options.items()
                    if k in GPU_ROUTING and v not in (None, False, "auto")]
        if gpu_only:
            raise TypeError(
                f"option(s) {', '.join(sorted(gpu_only))} apply to device='gpu' only"
            )
    return options


def _routing(options: dict) -> dict:
    """The GPU routing options of a call, for ``plan.request``."""
    return {k: options[k] for k in GPU_ROUTING if k in options}


def _prepare(named, eps, precision, device, index_dims):
    """Validate the point sets and ``index_dims``, then bring the points and eps
    into the working precision's range (``skyjoin._core.conditioning``):
    ``(arrays, eps)``.

    Device input (``skyjoin._core.device_input``: CuPy, any CUDA array
    interface, CUDA DLPack) stays on the GPU, read in place as CuPy arrays
    (its values are checked there by the GPU engine); the device was
    resolved for it (``resolve_device(..., data_on_gpu=True)``).  Host
    points are checked in float64 (float32 input stays float32 when the
    working precision is float32), so that the conditioning sees them
    before any rounding to float32.  The range pass
    (``largest_magnitude``) is also the finiteness test: one pass over the
    points, not two; a bad value is then reported by ``check_points``.
    """
    arrays = []
    for X, name in named:
        if device == "gpu" and on_gpu(X):
            arrays.append(as_device_points(X, name))
            continue
        dtype = np.float64
        if precision == "float32" and getattr(X, "dtype", None) == np.float32:
            dtype = np.float32
        arrays.append(check_points(X, name=name, dtype=dtype, check_finite=False))
    if len(arrays) == 2 and arrays[0].shape[1:] != arrays[1].shape[1:]:
        raise ValueError(
            f"R and S must have the same number of dimensions, got {arrays[0].shape[1]} and "
            f"{arrays[1].shape[1]}"
        )
    check_index_dims(index_dims, arrays[0].shape[1] if arrays[0].ndim == 2 else 0)
    return condition_checked(arrays, [name for _, name in named], eps, precision)


def _points(named, eps, precision, device, index_dims, metric):
    """``_prepare`` for the Euclidean metric: ``(arrays, eps, None)``; for
    another, the filter's points and radius, conditioned, and the checked
    points (``metric_join.metric_points``, ``metric_join.filter_problem``)."""
    if metric == "euclidean":
        return (*_prepare(named, eps, precision, device, index_dims), None)
    mp = metric_join.metric_points(named, metric, precision, index_dims)
    return (*metric_join.filter_problem(mp, eps), mp)


def _scale_exponent(eps, eps_conditioned) -> int:
    """The power of two by which ``_prepare`` scaled the points (exact: the
    conditioning multiplies eps by that power)."""
    return math.frexp(eps_conditioned)[1] - math.frexp(eps)[1]


def _check_distance_request(return_distance, output):
    check_bool(return_distance, "return_distance")
    if return_distance and output != "table":
        raise ValueError("return_distance=True needs output='table' (counts carry no distances)")


def _with_distances(nt, Q, S, scale_exp):
    """``nt`` with the distance of each pair (``distances.pair_distances``)."""
    from .distances import pair_distances

    nt.distances = pair_distances(nt.indptr, nt.indices, Q, S, scale_exp)
    return nt


def _gpu_fits(R, S, precision) -> str:
    """Check that the points fit the GPU (``device_memory.check_points_fit``),
    before anything is copied; returns the operator's name for messages."""
    what = "GPU self-join" if R is None else "GPU join"
    check_points_fit(cupy(), what, [S] if R is None else [R, S], working_dtype(precision),
                     self_join=R is None)
    return what


def _run(plan: JoinPlan, R, S, eps, options, timings, metric_call=None):
    """Hand the request to the engine entry (``metric_call``: the metric
    join's, ``metric_join.run`` with its points, radius and output bound);
    on the GPU, the points checked against the free device memory first and
    CuPy's out-of-memory error reported as ``DeviceMemoryError``."""
    run = engine.run if metric_call is None else metric_call
    if plan.device != "gpu":
        return run(plan, R, S, eps, timings=timings)
    what = _gpu_fits(R, S, plan.precision)
    with oom_as_error(cupy(), what):
        return run(plan, R, S, eps, timings=timings, progress=options.get("progress"))


@overload
def self_join(X: ArrayLike, eps: float, *, include_self: bool = ...,
              output: Literal["table"] = ..., sort: bool = ..., pattern: str = ...,
              device: str | None = ..., precision: str = ..., index_dims: int | None = ...,
              algorithm: str = ..., return_distance: bool = ..., memory_limit: int | str = ...,
              metric: str = ..., timings: dict[str, float] | None = ...,
              **options: Any) -> NeighborTable: ...


@overload
def self_join(X: ArrayLike, eps: float, *, include_self: bool = ...,
              output: Literal["counts"], sort: bool = ..., pattern: str = ...,
              device: str | None = ..., precision: str = ..., index_dims: int | None = ...,
              algorithm: str = ..., return_distance: bool = ..., memory_limit: int | str = ...,
              metric: str = ..., timings: dict[str, float] | None = ...,
              **options: Any) -> np.ndarray: ...


@overload
def self_join(X: ArrayLike, eps: float, *, include_self: bool = ..., output: str,
              sort: bool = ..., pattern: str = ..., device: str | None = ...,
              precision: str = ..., index_dims: int | None = ..., algorithm: str = ...,
              return_distance: bool = ..., memory_limit: int | str = ...,
              metric: str = ..., timings: dict[str, float] | None = ...,
              **options: Any) -> NeighborTable | np.ndarray: ...


def self_join(X: ArrayLike, eps: float, *, include_self: bool = False, output: str = "table",
              sort: bool = True, pattern: str = "auto", device: str | None = None,
              precision: str = "float64", index_dims: int | None = None,
              algorithm: str = "auto",
              return_distance: bool = False, memory_limit: int | str = "auto",
              metric: str = "euclidean", timings: dict[str, float] | None = None,
              **options: Any) -> NeighborTable | np.ndarray:
    """All pairs of points of X within distance eps of each other.

    The pair (i, j) is reported iff ``sum_k (X[i, k] - X[j, k])**2 <= eps**2``
    evaluated in the working precision (for another ``metric``, iff
    scikit-learn's test of that metric accepts it).  Results are symmetric:
    (i, j) and (j, i) both appear.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The points; any real dtype.  Points already on the GPU (CuPy, any
        ``__cuda_array_interface__``, a CUDA DLPack tensor such as PyTorch's)
        are read there in place and run on the GPU (``device="cpu"`` is
        then a TypeError): the rule of ``skyjoin._core.device_input``.
    eps : float
        Radius of the join, finite and > 0.
    include_self : bool, default False
        Also report each point as its own neighbour (i, i).
    output : {"table", "counts"}
        "table" returns a :class:`NeighborTable`; "counts" returns the int64
        number of neighbours of each point, without building the table.
    sort : bool, default True
        Columns ascending within each row (as scipy users expect, and equal
        across devices).  ``sort=False`` skips that work.
    pattern : {"auto", "full", "unicomp", "lid_unicomp"}
        Cell access pattern: every adjacent cell ("full"), or one of the two
        patterns in which one distance computation yields both (i, j) and
        (j, i): UNICOMP (Gowanlock & Karsin 2018, §V-B) and LID-UNICOMP
        (Gallet & Gowanlock 2019, §III-B).  "auto" picks the fastest measured
        for the device.  All give identical results.
    device : {"auto", "cpu", "gpu"}, optional
        Default: the environment variable ``SKYJOIN_DEVICE``, else "auto"
        (the GPU when CuPy finds one).  "gpu" without a GPU is an error.
    precision : {"float64", "float32"}
        Working precision of the distance test.  float32 is opt-in: it halves
        memory traffic.  The points are rounded to float32, so a pair's
        answer can differ from the float64 answer only if its distance lies
        within ``2**-24 * (3 sqrt(d) M + (d + 8) eps)`` of eps, M being the
        largest coordinate magnitude: centre data that sits far from the
        origin (say 1e6 + U(0, 1)) before a float32 join.
    index_dims : int, optional
        Number of leading dimensions the grid indexes (default min(d, 6)).
    algorithm : {"auto", "grid", "brute", "brute-fp16", "projected"}
        "grid": the grid of non-empty cells.  "brute": every pair screened
        by a float64 matrix product (tensor cores on the GPU) with a
        provable margin, each survivor decided by the same test: the grid's
        pairs (``skyjoin.simjoin.brute_bound``).  "brute-fp16" (GPU; never
        "auto"'s): its product on the FP16 tensor cores, exact on the points
        rounded to a lattice whose rounding the margin covers
        (``skyjoin.simjoin.lattice``).  "projected": every pair
        screened on the data's few leading principal components, with a
        margin that covers the projection (``skyjoin.simjoin.projection``):
        the same pairs, far fewer operations on data of low intrinsic
        dimension.  "auto": from a sample of the data, brute force where
        the grid would prune little (8 dimensions or more), and there
        "projected" where it costs a share of the brute force a pair (the
        rule ``skyjoin.simjoin.algorithm.choose_algorithm``).
    return_distance : bool, default False
        Also give the distance of every pair, ``NeighborTable.distances``:
        the square root of the very sum the test compared with ``eps**2``
        (working precision: float64 for float64 input); for another
        ``metric``, scikit-learn's distance of the pair, from the value its
        test compared.
    memory_limit : int or "auto", default "auto"
        Bytes the table (and its distances) may take in the memory it goes
        to.  "auto": ``skyjoin.simjoin.result_size.MEMORY_MARGIN`` of the memory free
        there when the count is known (host: ``MemAvailable``; device: the
        GPU's free memory).
    metric : str, default "euclidean"
        scikit-learn's names and meanings: "euclidean" ("l2"), "manhattan"
        ("cityblock", "l1"), "chebyshev" ("infinity"), "haversine" (latitude,
        longitude in radians, within [-pi/2, pi/2] and [-2 pi, 2 pi]) and
        "cosine" (1 - cosine similarity; rows of non-zero norm).  The pairs
        of ``sklearn.neighbors.radius_neighbors_graph(X, eps, metric=...)``
        exactly: a Euclidean join filters with a proven margin, then
        scikit-learn's own test decides on the host in float64
        (``skyjoin.simjoin.metric_join``).  Not with ``precision="float32"``
        nor points on the GPU.
    timings : dict, optional
        If given, filled with the seconds spent in each phase.
    **options
        GPU engine options: ``kernel`` ("auto", "global", "shared",
        "bruteforce"), ``threads_per_point`` ("auto", 1, 2, ..., 32),
        ``schedule`` ("auto", "grid", "sortbywl", "workqueue"),
        ``batch_pairs`` (pairs per result batch), ``device_memory_limit``
        (bytes the result buffers may take), ``on_device`` (keep the table,
        or the counts, on the GPU as CuPy arrays: no copy to the host),
        ``progress`` (called as
        ``progress(rows_done, n_rows)`` after each batch); the rule is
        :func:`skyjoin.simjoin.plan.choose_config`.

    Returns
    -------
    NeighborTable or ndarray of int64

    Raises
    ------
    ValueError
        Bad shape, NaN or inf values, eps <= 0 or not finite, unknown option
        value, eps too small for the coordinates' magnitude (see Notes).
    TypeError
        Non-numeric input, a flag that is not a bool, or GPU options on the
        CPU.
    skyjoin.ResultTooLargeError
        A ``MemoryError``: the table would not fit in the memory it goes to
        (or exceed ``memory_limit``).  Raised after the count pass, before
        the table is allocated; the message gives the pairs, the bytes
        needed and free, and the ways out (``output="counts"``,
        ``self_join_chunks``, the command line's ``--out x.parquet``).
    skyjoin.GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    skyjoin.DeviceMemoryError
        A ``MemoryError``: on the GPU, the points cannot fit the device's
        free memory (checked before they are copied, against the bytes the
        join certainly needs: ``skyjoin._core.device_memory``), or CuPy ran
        out of device memory during the join.  The message gives the bytes
        and the ways out (``skyjoin.distributed`` over several GPUs,
        ``precision="float32"``, ``device="cpu"``).

    Notes
    -----
    Numeric range.  Where ``eps**2`` would overflow or underflow the
    working precision (float64: eps outside [2**-400, 2**400]), or the
    coordinates reach 2**1000, the points and eps are first multiplied by
    one power of two (exact wherever nothing under- or overflows), so the
    answer is the same on every pattern and device and is the Euclidean
    answer up to rounding: identical points always pair, however large
    eps.  If no power of two brings eps and the coordinates into range
    together (the coordinates over about 2**1400 times eps), ValueError.
    The rule is ``skyjoin._core.conditioning``'s, applied once here.

    Cost: O(n d) to build the grid, plus the distance tests of each point
    against the points of its cell pattern (at most ``3**k`` cells, k the
    indexed dimensions), plus O(pairs) to write the table (O(pairs d) more
    for the distances).  Memory: the table, 8 bytes per row plus 4 bytes
    per pair (8 beyond 2**31 points), 8 more with distances, and O(n)
    besides; ``output="counts"`` needs O(n) only.

    The pattern, kernel and batch sizes are chosen by one rule,
    ``skyjoin.simjoin.plan`` (``plan_cpu``, ``plan_gpu``); ``skyjoin -v``
    logs the plan.  Whether the table fits is one rule too,
    ``result_size.result_size_guard``.

    See Also
    --------
    join : R join S, two point sets.
    self_join_chunks : the same pairs in bounded chunks, for any result size.
    NeighborTable : the result (``pairs(unique=True)``: the pairs i < j).
    skyjoin.distributed.self_join : the same join on a Dask cluster.
    scipy.spatial.cKDTree.query_pairs : the pairs i < j, as a set.

    References
    ----------
    M. Gowanlock, B. Karsin, "GPU Accelerated Self-join for the Distance
    Similarity Metric", arXiv:1803.04120, 2018: §IV (the grid index of
    non-empty cells and its search), §V-B (UNICOMP).

    B. Gallet, M. Gowanlock, "Load Imbalance Mitigation Optimizations for
    GPU-Accelerated Similarity Joins", 2019: §III-A (threads per point),
    §III-B (LID-UNICOMP), §III-C and §III-D (SORTBYWL, WORKQUEUE).

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> X = np.array([[0.0, 0.0], [0.3, 0.4], [2.0, 2.0]])
    >>> nt = sj.self_join(X, eps=0.5, device="cpu")
    >>> nt.pairs().tolist()
    [[0, 1], [1, 0]]
    >>> sj.self_join(X, eps=0.5, output="counts", include_self=True, device="cpu").tolist()
    [2, 2, 1]
    """
    eps = check_eps(eps)
    precision = check_precision(precision)
    _check_choice(output, "output", OUTPUTS)
    _check_choice(pattern, "pattern", PATTERNS)
    check_bool(include_self, "include_self")
    check_bool(sort, "sort")
    _check_distance_request(return_distance, output)
    memory_limit = check_memory_limit(memory_limit)
    metric = check_metric(metric)
    dev = resolve_device(device, data_on_gpu=on_gpu(X))
    options = _split_options(dev, options)
    (X,), eps_c, mp = _points([(X, "X")], eps, precision, dev, index_dims, metric)
    plan = request(dev, self_join=True, output="table" if mp else output, sort=sort,
                   include_self=include_self, precision=precision, index_dims=index_dims,
                   pattern=pattern, memory_limit=memory_limit,
                   return_distance=return_distance and not mp, metric=metric,
                   algorithm=resolve_algorithm(algorithm, X, X, eps_c, dev), **_routing(options))
    res = _run(plan, None, X, eps_c, options, timings,
               metric_join.entry(mp, eps, output, return_distance))
    if return_distance and not mp:
        with phase(timings, "distances"):
            res = _with_distances(res, X, None, _scale_exponent(eps, eps_c))
    return res


def join(R: ArrayLike, S: ArrayLike, eps: float, *, output: str = "table", sort: bool = True,
         device: str | None = None, precision: str = "float64", index_dims: int | None = None,
         algorithm: str = "auto", return_distance: bool = False, memory_limit: int | str = "auto",
         metric: str = "euclidean", timings: dict[str, float] | None = None,
         **options: Any) -> NeighborTable | np.ndarray:
    """All pairs (i, j) with R[i] within distance eps of S[j] (R join S).

    Parameters
    ----------
    R : array_like, shape (n_r, d)
        Query points: the rows of the result.
    S : array_like, shape (n_s, d)
        Data points: the columns of the result.
    eps : float
        Radius, finite and > 0.
    output : {"table", "counts"}
        A :class:`NeighborTable` of shape (n_r, n_s), or the int64 number of
        points of S near each point of R.
    sort, device, precision, index_dims, algorithm, return_distance, memory_limit, metric
        As for :func:`self_join` (metric: rows R are scikit-learn's queries,
        columns S its fitted points).
    timings, **options
        As for :func:`self_join`.

    Returns
    -------
    NeighborTable or ndarray of int64
        The table (rows R, columns S), or the counts per row of R.

    Raises
    ------
    ValueError
        As for :func:`self_join`, and if R and S differ in dimensionality.
    skyjoin.ResultTooLargeError
        As for :func:`self_join`.

    Notes
    -----
    The pair (i, j) is reported iff ``sum_k (R[i, k] - S[j, k])**2 <=
    eps**2`` in the working precision, with the numeric-range rule of
    :func:`self_join`.  Both sets are indexed by grids of the same cell
    geometry over their joint bounds; each point of R is tested against
    the points of S in its adjacent cells (the full pattern: UNICOMP and
    LID-UNICOMP need one set).

    Cost: O((n_r + n_s) d) for the two grids, plus the distance tests of
    each point of R against the points of S in at most ``3**k`` cells, plus
    O(pairs) to write the table.

    See Also
    --------
    self_join : the pairs of one point set.
    scipy.spatial.cKDTree.query_ball_tree : the same pairs as lists.

    References
    ----------
    M. Gowanlock, B. Karsin, "GPU Accelerated Self-join for the Distance
    Similarity Metric", arXiv:1803.04120, 2018, §IV: the grid index and
    its search, here over the cells of S around each point of R.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> R = np.array([[0.0], [5.0]]); S = np.array([[0.5], [1.0], [9.0]])
    >>> sj.join(R, S, eps=1.0, device="cpu").pairs().tolist()
    [[0, 0], [0, 1]]
    """
    eps = check_eps(eps)
    precision = check_precision(precision)
    _check_choice(output, "output", OUTPUTS)
    check_bool(sort, "sort")
    _check_distance_request(return_distance, output)
    memory_limit = check_memory_limit(memory_limit)
    metric = check_metric(metric)
    dev = resolve_device(device, data_on_gpu=on_gpu(R) or on_gpu(S))
    options = _split_options(dev, options)
    (R, S), eps_c, mp = _points([(R, "R"), (S, "S")], eps, precision, dev, index_dims, metric)
    plan = request(dev, self_join=False, output="table" if mp else output, sort=sort,
                   precision=precision, index_dims=index_dims, pattern="full",
                   memory_limit=memory_limit, return_distance=return_distance and not mp,
                   metric=metric, algorithm=resolve_algorithm(algorithm, R, S, eps_c, dev),
                   **_routing(options))
    res = _run(plan, R, S, eps_c, options, timings, metric_join.entry(mp, eps, output, return_distance))
    if return_distance and not mp:
        with phase(timings, "distances"):
            res = _with_distances(res, R, S, _scale_exponent(eps, eps_c))
    return res


#: Pairs a chunk of ``self_join_chunks`` holds at most by default (256 MiB of
#: int32 ids): each chunk costs the CPU fill a pass over its cells' candidates.
DEFAULT_CHUNK_PAIRS = 1 << 26


def self_join_chunks(X: ArrayLike, eps: float, *, include_self: bool = False, sort: bool = True,
                     max_pairs: int = DEFAULT_CHUNK_PAIRS, pattern: str = "auto",
                     device: str | None = None, precision: str = "float64",
                     index_dims: int | None = None, metric: str = "euclidean",
                     **options: Any) -> PairStream:
    """The self-join result as a stream of bounded chunks, for any result size.

    Rows are taken in order: each chunk holds every pair of the rows
    ``[chunk.row_start, chunk.row_stop)``, grouped by row (columns ascending
    within a row when ``sort``).  Chunks hold at most ``max_pairs`` pairs,
    except that a single row with more neighbours than that forms a chunk of
    its own (rows are never split).  Memory stays bounded by the chunk size
    plus O(n), whatever the total number of pairs.

    Parameters
    ----------
    X, eps, include_self, sort, pattern, device, precision, index_dims, metric, **options
        As for :func:`self_join` (every pattern gives the same pairs; the
        CPU fills chunks with the full pattern whatever is asked, and the
        plan records it).  Under a metric other than the Euclidean, the
        filter's chunks are made twice, once to count the refined pairs
        (``count()``), once to hand them over: twice the join's time.
    max_pairs : int
        Target number of pairs per chunk (default 2**26).  Each chunk
        costs the CPU fill a gather of the candidates of every cell that
        holds one of its rows: fewer, larger chunks cost less time and
        more memory.

    Returns
    -------
    PairStream
        An iterator of the chunks (:class:`PairChunk`) in row order; each
        holds its row range ``[row_start, row_stop)`` and its pairs, in CSR
        form (``indptr``, ``indices``, as the join wrote them) and as int64
        arrays ``i`` (rows) and ``j`` (columns), built on first access.
        Their concatenation is ``self_join(X, eps, ...).pairs()`` (when
        sorted).  ``count()`` gives the total number of pairs once the
        count pass has run, before the first chunk is filled.  The input
        is checked when the function is called; the join runs as the
        iterator is consumed.

    Raises
    ------
    ValueError, TypeError, skyjoin.GPUUnavailableError, skyjoin.DeviceMemoryError
        As for :func:`self_join`, and for ``max_pairs`` < 1; raised by the
        call, before the first chunk.
    skyjoin.DeviceMemoryError
        Also while the chunks are iterated (or counted): on the GPU, CuPy
        ran out of device memory; the message gives the bytes and the ways
        out.

    Notes
    -----
    The rule of :func:`self_join`.  The neighbours of every row are
    counted first, the rows are cut into ranges of at most ``max_pairs``
    pairs, and each range is filled when its chunk is asked for (on the
    CPU with the full pattern, from the grid cells that hold its rows).

    Cost: one counting pass (the join's distance tests), then for each
    chunk the distance tests of the cells that hold its rows, plus
    O(pairs) in total to write the chunks.  On the GPU the chunks come
    out of the in-memory table's pipeline (the GPU fills the next chunk
    while one is handed over), and each is copied once from pinned memory
    into its own array.

    Memory, whatever the total number of pairs: O(n) plus the chunks the
    caller holds (4 bytes a pair, int32 ids below 2**31 points, plus 8 a
    row); on the GPU also 3 x ``max_pairs`` x 4 bytes on the device and
    as much pinned host memory.

    See Also
    --------
    self_join : the whole table at once.
    skyjoin.io.ParquetPairWriter : streams chunks into one Parquet file.

    References
    ----------
    M. Gowanlock, B. Karsin, "GPU Accelerated Self-join for the Distance
    Similarity Metric", arXiv:1803.04120, 2018, §V-A: batching the result
    set, which the chunks extend to the host.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> X = np.random.default_rng(0).uniform(0, 1, (500, 2))
    >>> total = sum(len(c) for c in sj.self_join_chunks(X, 0.1, max_pairs=1000, device="cpu"))
    >>> total == sj.self_join(X, 0.1, device="cpu").n_pairs
    True
    """
    eps = check_eps(eps)
    precision = check_precision(precision)
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, (int, np.integer)) or max_pairs < 1:
        raise ValueError(f"max_pairs must be an integer >= 1, got {max_pairs!r}")
    _check_choice(pattern, "pattern", PATTERNS)
    check_bool(include_self, "include_self")
    check_bool(sort, "sort")
    metric = check_metric(metric)
    dev = resolve_device(device, data_on_gpu=on_gpu(X))
    options = _split_options(dev, options)
    for ignored in ("on_device", "batch_pairs", "progress"):   # chunks decide these
        options.pop(ignored, None)
    (Xc,), eps_c, mp = _points([(X, "X")], eps, precision, dev, index_dims, metric)
    plan = request(dev, self_join=True, sort=sort, include_self=include_self,
                   precision=precision, index_dims=index_dims, pattern=pattern, chunks=True,
                   metric=metric, **_routing(options))
    chunks = (engine.run_chunks(plan, Xc, eps_c, int(max_pairs)) if mp is None
              else metric_join.run_chunks(plan, mp, eps, Xc, eps_c, int(max_pairs)))
    if dev == "gpu":
        return PairStream(oom_as_error_in(cupy(), _gpu_fits(None, Xc, precision), chunks))
    return PairStream(chunks)
