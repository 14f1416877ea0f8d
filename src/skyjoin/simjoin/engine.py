"""The one internal entry into the epsilon join's engines.

Every caller of the join (``self_join``, ``join``, ``self_join_chunks``,
HYBRID-DBSCAN's table, the GPU DBSCAN's table, the sweep's tables, the
distributed join's tasks) hands over:

* the points, conditioned once at its public boundary
  (``skyjoin._core.conditioning``: in the working precision's range) and
  checked there;
* eps in the same units;
* the call's request, a ``JoinPlan`` from ``plan.request`` on a resolved
  device.

This module dispatches on ``plan.algorithm`` and ``plan.device``: the grid
to the CPU engine (``cpu.engine``: Numba) or the GPU pipeline
(``gpu.pipeline``: CuPy and CUDA C++), the brute force to ``cpu.brute`` or
``gpu.brute``, its screen on principal components to ``cpu.brute`` or
``gpu.projected``, each loaded on first use so that ``import skyjoin`` stays
light.
The engine builds its grid, completes the plan by the rules of
``skyjoin.simjoin.plan`` (``plan_cpu``, ``plan_gpu``), reports it
(``skyjoin._core.plans.report``) and runs it.  Nothing here or below
validates the input, scales it, or resolves the device.

Costs: those of the join (``skyjoin.simjoin.api.self_join``); O(1) here.
"""

from __future__ import annotations

from .plan import JoinPlan

__all__ = ["run", "run_chunks", "count_rows", "fill_rows"]


def run(plan: JoinPlan, R, S, eps: float, *, timings=None, grid=None, progress=None,
        query_rows=None, column_ids=None, n_columns=None, rows_ready=None):
    """Execute the join request ``plan`` on conditioned points: R join S, or
    the self-join of S when R is None.

    Parameters
    ----------
    plan : JoinPlan
        The request (``plan.request``), device resolved.
    R, S : ndarray (or cupy.ndarray on the GPU)
        Conditioned points, in the working precision's range.
    eps : float
        Conditioned radius.
    timings : dict, optional
        Filled with the seconds of each phase.
    grid : Grid, optional
        CPU self-join: the grid of S, S already in its cell order
        (HYBRID-DBSCAN orders the points by the grid that then serves the
        join).
    progress, query_rows, column_ids, n_columns, rows_ready
        GPU only: as ``gpu.pipeline.run`` (the distributed join's
        partitions rename columns and compute their owned rows only).

    Returns
    -------
    NeighborTable or ndarray of int64
        As ``plan.output`` and ``plan.memory_route`` say.
    """
    if plan.algorithm == "projected" and plan.device == "gpu":
        from .gpu import projected  # CuPy: loaded on first use

        return projected.run(plan, R, S, eps, timings=timings)
    if plan.algorithm in ("brute", "brute-fp16", "projected"):
        if plan.device == "gpu":
            from .gpu import brute as gpu_brute  # CuPy: loaded on first use

            return gpu_brute.run(plan, R, S, eps, timings=timings)
        from .cpu import brute as cpu_brute  # Numba: loaded on first use (both screens)

        return cpu_brute.run(plan, R, S, eps, timings=timings)
    if plan.device == "gpu":
        from .gpu import pipeline  # CuPy: loaded on first use

        return pipeline.run(R, S, eps, plan, progress=progress, timings=timings,
                            query_rows=query_rows, column_ids=column_ids, n_columns=n_columns,
                            rows_ready=rows_ready)
    from .cpu import engine as cpu  # Numba: loaded on first use

    return cpu.run(plan, R, S, eps, timings=timings, grid=grid)


def run_chunks(plan: JoinPlan, X, eps: float, max_pairs: int):
    """Execute the self-join request ``plan`` (memory route "chunks") on
    conditioned points X: a generator of the total number of pairs, once
    counted, then the ``PairChunk`` of at most ``max_pairs`` pairs each (or
    one longer row), what ``PairStream`` wraps.  Nothing runs before the
    first item is asked for."""
    if plan.device == "gpu":
        from .gpu import pipeline  # CuPy: loaded on first use

        return pipeline.chunk_stream(X, eps, plan, int(max_pairs))
    from .cpu import engine as cpu  # Numba: loaded on first use

    return cpu.run_chunks(plan, X, eps, int(max_pairs))


def count_rows(plan: JoinPlan, R, S, eps: float, *, query_rows=None, column_ids=None,
               n_columns=None):
    """GPU only: the first half of ``run`` (engine built, plan resolved and
    reported, rows counted), for a caller that needs the counts of every
    partition before any is filled (the distributed join's in-process GPU
    path); ``fill_rows`` finishes it.  Returns ``gpu.pipeline.Counted``."""
    from .gpu import pipeline  # CuPy: loaded on first use

    return pipeline.count_rows(R, S, eps, plan, query_rows=query_rows, column_ids=column_ids,
                               n_columns=n_columns)


def fill_rows(counted, *, sort=None, progress=None, timings=None, sink=None, rows_ready=None):
    """GPU only: the second half of ``run`` on ``count_rows``' result
    (``gpu.pipeline.fill_rows``: a table, or each batch to ``sink``)."""
    from .gpu import pipeline  # CuPy: loaded on first use

    return pipeline.fill_rows(counted, sort=sort, progress=progress, timings=timings, sink=sink,
                              rows_ready=rows_ready)
