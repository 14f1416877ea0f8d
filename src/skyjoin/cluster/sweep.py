"""``skyjoin.dbscan_sweep``: the multi-clustering pipeline of HYBRID-DBSCAN (§7.5, §7.6).

Many (eps, min_samples) variants of one data set, for throughput:

* **table reuse (§7.6)**: the neighbour table T depends on eps only, so it is
  built once per eps and every min_samples reads it.  Going further than the
  paper, the min_samples of one eps are assigned *incrementally*: taken in
  decreasing order, the core set only grows, so the union-find forest of the
  previous min_samples stays valid and only the edges of the newly core
  points are added (``add_core_level``).  Every edge of T is then joined once
  for the whole sweep instead of once per min_samples; each min_samples still
  costs an O(n) numbering pass and its border points.
* **pipelining (§7.5)**: a producer thread builds the table of the next eps
  while the consumer assigns points with the current one (the join and the
  assignment are Numba code that releases the GIL, and on a GPU the join runs
  on the device).  The ideal time of such a pipeline is equation (2),
  ``T_opt = T_np (|V| + 1) / (2 |V|)``.

Results are yielded as they finish, as ``SweepResult`` objects.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .._config import NUMBA_CACHE
from .._device import resolve_device
from .._validate import check_eps, check_min_samples, check_points, check_precision

__all__ = ["SweepResult", "dbscan_sweep", "add_core_level", "ideal_pipeline_time"]

log = logging.getLogger("skyjoin")


@dataclass
class SweepResult:
    """One clustering of a sweep.

    Attributes
    ----------
    eps : float
    min_samples : int
    labels : ndarray of intp
        scikit-learn's labels (noise -1).
    core_sample_indices : ndarray of int64
    n_clusters : int
    timings : dict
        "table" (seconds to build this eps's table, shared by its
        min_samples), "assign" (seconds of this clustering's assignment),
        "pairs" (table size) and "finished" (seconds since the sweep began).
    """

    eps: float
    min_samples: int
    labels: np.ndarray
    core_sample_indices: np.ndarray
    n_clusters: int
    timings: dict = field(default_factory=dict)


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
        ri = i
        while parent[ri] != ri:
            parent[ri] = parent[parent[ri]]
            ri = parent[ri]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            p = parent[j]
            if p < 0 or p == ri:
                continue
            rj = p
            while parent[rj] != rj:
                parent[rj] = parent[parent[rj]]
                rj = parent[rj]
            if rj < ri:
                parent[ri] = rj
                ri = rj
            elif rj > ri:
                parent[rj] = ri


def _levels(min_samples):
    """Distinct min_samples in decreasing order (the core set grows along it)."""
    return sorted({check_min_samples(m) for m in min_samples}, reverse=True)


def _assign_levels(nt, min_samples_desc, sample_weight, order):
    """Yield (min_samples, is_core, labels, seconds) for each level, incrementally (§7.6).

    The table's point p is the caller's row ``order[p]``; results come back
    in the caller's order.
    """
    from .assign import _roots, labels_from_roots, weighted_neighbourhood

    if nt.on_device:
        yield from _assign_levels_gpu(nt, min_samples_desc, sample_weight, order)
        return
    indptr = np.ascontiguousarray(nt.indptr, dtype=np.int64)
    indices = nt.indices
    n = len(indptr) - 1
    if sample_weight is None:
        weight = (np.diff(indptr) + 1).astype(np.float64)
    else:
        weight = weighted_neighbourhood(indptr, indices, sample_weight[order], True)
    parent = np.full(n, -1, dtype=np.int32 if n < 2**31 else np.int64)
    previous = np.inf
    for m in min_samples_desc:
        t0 = time.perf_counter()
        add_core_level(indptr, indices, weight, float(m), previous, parent)
        previous = float(m)
        is_core = (parent >= 0).view(np.uint8)
        labels = labels_from_roots(_roots(parent), is_core, indptr, indices, order)
        core_out = np.empty_like(is_core)
        core_out[order] = is_core
        labels_out = np.empty_like(labels)
        labels_out[order] = labels
        yield m, core_out, labels_out, time.perf_counter() - t0


def _assign_levels_gpu(nt, min_samples_desc, sample_weight, order):
    """Each min_samples assigned on the GPU from the table kept there (§7.6 on the device)."""
    from .._device import cupy
    from .gpu import gpu_dbscan_table

    cp = cupy()
    w = None if sample_weight is None else cp.asarray(sample_weight[order])
    n = nt.shape[0]
    for m in min_samples_desc:
        t0 = time.perf_counter()
        is_core, labels = gpu_dbscan_table(nt.indptr, nt.indices, m, sample_weight=w)
        core_out = np.empty(n, dtype=np.uint8)
        core_out[order] = cp.asnumpy(is_core)
        labels_out = np.empty(n, dtype=np.intp)
        labels_out[order] = cp.asnumpy(labels)
        yield m, core_out, labels_out, time.perf_counter() - t0


def ideal_pipeline_time(non_pipelined_s: float, n_variants: int) -> float:
    """Equation (2) of the paper: T_opt = T_np (|V| + 1) / (2 |V|)."""
    return non_pipelined_s * (n_variants + 1) / (2 * n_variants)


def dbscan_sweep(X, eps, min_samples, *, sample_weight=None, device="auto",
                 precision="float64", pipeline=True, progress=False):
    """DBSCAN for every (eps, min_samples) pair, reusing tables and pipelining (§7.5-7.6).

    Parameters
    ----------
    X : array_like, shape (n, d)
        The points (Euclidean distance).
    eps : float or sequence of float
        Radii; one neighbour table is built per eps, in the order given.
    min_samples : int or sequence of int
        Every min_samples is clustered with every eps.
    sample_weight : array_like of shape (n,), optional
        As in ``DBSCAN.fit``.
    device : {"auto", "cpu", "gpu"} or None
        Device of the join.  On the CPU the assignment runs on the CPU; on
        the GPU each table stays in GPU memory when it fits and every
        min_samples is assigned there, else it is streamed to the host and
        assigned on the CPU (HYBRID-DBSCAN).
    precision : {"float64", "float32"}
    pipeline : bool, default True
        Build the next eps's table in a background thread while the current
        one is assigned (§7.5).  False runs the phases one after the other.
    progress : bool, default False
        Show a tqdm progress bar (one step per clustering).

    Yields
    ------
    SweepResult
        One per (eps, min_samples), as soon as it is ready: eps in the order
        given, min_samples of one eps in decreasing order.

    Raises
    ------
    ValueError
        Bad points, an eps <= 0, a min_samples < 1, a bad sample_weight.

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
    dev = resolve_device(device)
    X = check_points(X, name="X")
    if sample_weight is not None:
        sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != (X.shape[0],) or not np.isfinite(sample_weight).all():
            raise ValueError(f"sample_weight must be {X.shape[0]} finite numbers, "
                             f"got shape {sample_weight.shape}")
    return _sweep(X, eps_list, ms_list, sample_weight, dev, precision, pipeline, progress)


def _build(X, e, dev, precision):
    """Build one table (on the points in cell order) and time it.

    On the GPU the table stays in GPU memory when it fits (every min_samples
    is then assigned there, ``gpu.gpu_dbscan_table``); otherwise it is
    streamed to the host (HYBRID-DBSCAN).
    """
    from .estimator import neighbor_table, spatial_order

    t0 = time.perf_counter()
    Xo, order = spatial_order(X, e, precision)
    nt = None
    if dev == "gpu":
        try:
            nt = neighbor_table(Xo, e, device=dev, precision=precision, on_device=True)
        except MemoryError:
            nt = None
    if nt is None:
        nt = neighbor_table(Xo, e, device=dev, precision=precision)
    return (nt, order), time.perf_counter() - t0


def _threadsafe_numba() -> bool:
    """Whether Numba's threading layer lets two threads launch parallel code at once.

    The "workqueue" layer does not (it aborts the process); "omp" and "tbb" do.
    """
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel function has run yet: run a tiny one
        from .assign import weighted_neighbourhood

        weighted_neighbourhood(np.zeros(2, np.int64), np.zeros(0, np.int64), np.ones(1), True)
        layer = numba.threading_layer()
    return layer != "workqueue"


def _tables(X, eps_list, dev, precision, pipeline):
    """Yield (eps, table, seconds); with pipeline, built one ahead in a thread (§7.5)."""
    if pipeline and not _threadsafe_numba():
        log.debug("dbscan_sweep: Numba's workqueue threading layer is not thread-safe; "
                  "tables are built without pipelining")
        pipeline = False
    if not pipeline:
        for e in eps_list:
            nt, dt = _build(X, e, dev, precision)
            yield e, nt, dt
        return
    q: queue.Queue = queue.Queue(maxsize=1)  # at most one finished table waits
    stop = threading.Event()

    def producer():
        try:
            for e in eps_list:
                if stop.is_set():
                    return
                item = (e,) + _build(X, e, dev, precision)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
            q.put(None)
        except BaseException as exc:  # hand the error to the consumer
            q.put(exc)

    th = threading.Thread(target=producer, name="skyjoin-sweep-tables", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        th.join()


def _sweep(X, eps_list, ms_list, sample_weight, dev, precision, pipeline, progress):
    """The generator behind ``dbscan_sweep``."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(eps_list) * len(ms_list), desc="dbscan sweep", unit="clustering")
    start = time.perf_counter()
    try:
        for e, (nt, order), table_s in _tables(X, eps_list, dev, precision, pipeline):
            for m, is_core, labels, assign_s in _assign_levels(nt, ms_list, sample_weight, order):
                core = np.flatnonzero(is_core)
                res = SweepResult(eps=e, min_samples=m, labels=labels, core_sample_indices=core,
                                  n_clusters=int(labels.max()) + 1 if len(labels) else 0,
                                  timings={"table": table_s, "assign": assign_s,
                                           "pairs": nt.n_pairs,
                                           "finished": time.perf_counter() - start})
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(eps=e, min_samples=m)
                yield res
            del nt, order
    finally:
        if bar is not None:
            bar.close()
