"""The two-stage pipeline of HYBRID-DBSCAN (§7.5, Fig. 3): build one eps while assigning another.

A producer thread builds what the next eps needs (its grid and levels, or
its table T) while the consumer assigns points with the current one; both
stages are Numba code that releases the GIL, or GPU work.  The ideal time
of such a pipeline is equation (2) (``ideal_pipeline_time``);
``pipeline_makespan`` gives it for measured stage times.
"""

from __future__ import annotations

import queue
import threading
import time

import numba

from ..._core.conditioning import condition_points
from ...simjoin.metric_join import filter_problem
from ..hybrid import cell_order, metric_neighbor_table, neighbor_table
from .grid_links import grid_index


def ideal_pipeline_time(non_pipelined_s: float, n_variants: int) -> float:
    """Equation (2) of the paper: T_opt = T_np (|V| + 1) / (2 |V|).

    It is the time of the two-stage pipeline of Fig. 3 when each stage of
    each variant takes T_np / (2 |V|), "perfect load balancing between CPU
    and GPU components" (§7.5), each stage on its own processor.  For stages
    of other lengths see ``pipeline_makespan``.
    """
    return non_pipelined_s * (n_variants + 1) / (2 * n_variants)


def pipeline_makespan(build_s, assign_s) -> float:
    """Best time of the two-stage pipeline of §7.5 (Fig. 3) for measured stage times.

    Variant i's table (``build_s[i]``) is built after variant i-1's, and
    its assignment (``assign_s[i]``) starts when both its table and the
    previous assignment are done, each stage on its own processor.  With
    every stage equal to T_np / (2 |V|) this is equation (2); with unequal
    stages equation (2) is below what any schedule can reach, since the
    longer stage runs back to back.
    """
    built = done = 0.0
    for b, a in zip(build_s, assign_s, strict=True):
        built += b
        done = max(done, built) + a
    return done


def _build(X, e, plan, ms_list, sample_weight):
    """Build what one eps's clusterings read, and time it (the first stage of §7.5).

    Plan path "grid-cpu": the fine-grid index of this eps (the levels,
    ``grid_links.grid_index``), which replaces T for a whole min_samples
    sweep; when its grid does not fit, or otherwise, the table T on the
    points in cell order: kept in GPU memory when ``plan.table_on_device``
    and it fits (every min_samples is then assigned there), else on the host
    (HYBRID-DBSCAN).  Under another metric (``plan.metric``; X is then the
    checked ``MetricPoints``), T of this eps's filter join, refined on the
    host (``hybrid.metric_neighbor_table``).  O(n d) plus the join's cost (or
    the levels' cost).
    """
    t0 = time.perf_counter()
    if plan.metric != "euclidean":
        (Xf,), ef = filter_problem(X, e)
        Xo, order = cell_order(Xf, ef, plan.device, "float64")
        nt = metric_neighbor_table(X.ordered(order), e, Xo, ef, device=plan.device,
                                   algorithm=plan.join_algorithm)
        return ("table", nt, order), time.perf_counter() - t0
    (X,), e = condition_points([X], e, plan.precision)   # the grid's and the join's range
    if plan.path == "grid-cpu":
        gi = grid_index(X, e, ms_list[::-1], sample_weight)
        if gi is not None:
            return ("grid", gi), time.perf_counter() - t0
    Xo, order = cell_order(X, e, plan.device, plan.precision)
    nt = None
    if plan.table_on_device:
        try:
            nt = neighbor_table(Xo, e, device=plan.device, precision=plan.precision,
                                on_device=True, algorithm=plan.join_algorithm)
        except MemoryError:
            nt = None
    if nt is None:
        nt = neighbor_table(Xo, e, device=plan.device, precision=plan.precision,
                            algorithm=plan.join_algorithm)
    return ("table", nt, order), time.perf_counter() - t0


def eps_tables(X, eps_list, plan, ms_list, sample_weight):
    """Yield (eps, table, seconds); with ``plan.pipelined``, built one ahead in a thread
    (§7.5) on ``plan.build_threads``."""
    build_threads = plan.build_threads
    if not plan.pipelined or len(eps_list) == 1:  # nothing to overlap with one eps
        for e in eps_list:
            built, dt = _build(X, e, plan, ms_list, sample_weight)
            yield e, built, dt
        return
    q: queue.Queue = queue.Queue(maxsize=1)  # at most one finished table waits
    stop = threading.Event()

    def producer():
        try:
            if build_threads is not None:
                numba.set_num_threads(build_threads)  # this thread's count only
            for e in eps_list:
                if stop.is_set():
                    return
                item = (e,) + _build(X, e, plan, ms_list, sample_weight)
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
