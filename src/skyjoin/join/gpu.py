"""The epsilon join on an NVIDIA GPU: the entry points of ``device="gpu"``.

``skyjoin.join.api`` validates its input, builds the call's request
(``plan.gpu_request``) and executes it with ``run`` or ``chunk_stream``;
the distributed join and the benchmarks call the public entry points
``gpu_self_join``, ``gpu_join`` and ``gpu_self_join_chunks``, which check
their scalars and build the request the same way.  The work is done by
``gpu_pipeline`` (count, scan, batched fill) with a
``gpu_engine.GpuEngine`` (grid, ranges, CUDA C++ kernels of
``kernels/join.cu``), configured by the rule ``plan.plan_gpu``.  See
``gpu_pipeline`` for the pipeline and its costs.
"""

from __future__ import annotations

import numpy as np

from .._core.memory import alloc_host
from .._core.transfer import parallel_copy
from .._core.validate import check_eps, check_precision
from .gpu_pipeline import (N_STREAMS, configure, fill_batches, free_device_bytes, last_stats, run,
                           start)
from .plan import batch_capacity, gpu_request, plan_row_batches
from .result import PairChunk, PairStream

__all__ = ["gpu_self_join", "gpu_join", "gpu_self_join_chunks", "chunk_stream", "run",
           "last_stats"]


def _checked(eps, precision, output):
    """The scalars of a public entry point, validated."""
    if output not in ("table", "counts"):
        raise ValueError(f"output must be 'table' or 'counts', got {output!r}")
    return check_eps(eps), check_precision(precision)


def gpu_self_join(X, eps, *, include_self=False, output="table", sort=True, precision="float64",
                  index_dims=None, on_device=False, pattern="auto", kernel="auto",
                  threads_per_point="auto", schedule="auto", batch_pairs=None,
                  device_memory_limit=None, progress=None, timings=None, query_rows=None,
                  column_ids=None, n_columns=None, memory_limit="auto", rows_ready=None):
    """Epsilon self-join of X on the GPU.

    Parameters
    ----------
    X : array_like or cupy.ndarray, shape (n, d)
        The points (NumPy input is expected validated by the API; CuPy input
        is checked here, on the device).
    eps : float
        Pairs (i, j) with sum_k (x_ik - x_jk)^2 <= eps^2 in the working precision.
    include_self : bool
        Whether (i, i) pairs are reported.
    output : {"table", "counts"}
        A NeighborTable, or the int64 neighbour count of every point.
    sort : bool
        Columns ascending within each row (sorted on the GPU).
    precision : {"float64", "float32"}
    index_dims : int, optional
        Leading dimensions indexed by the grid (default ``min(d, 6)``).
    on_device : bool
        Keep the result on the GPU (CuPy arrays).
    pattern : {"auto", "full", "unicomp", "lid_unicomp"}
        Cell access pattern (Gowanlock & Karsin 2018 §V-B; Gallet & Gowanlock 2019 §III-B).
    kernel : {"auto", "global", "shared", "bruteforce"}
        GPUCALCGLOBAL, the shared-memory kernel (HYBRID-DBSCAN §4.2), or the
        brute-force baseline.
    threads_per_point : {"auto", 1, 2, 4, 8, 16, 32}
        Threads per query point (Gallet & Gowanlock 2019 §III-A).
    schedule : {"auto", "grid", "sortbywl", "workqueue"}
        Query order: grid order, SORTBYWL, or WORKQUEUE (§III-C, §III-D).
    batch_pairs : int, optional
        Pairs per result batch (default 2^27, bounded by device memory).
    device_memory_limit : int, optional
        Bytes of device memory the result buffers may use.
    progress : callable, optional
        Called as ``progress(rows_done, n_rows)`` after each batch.
    timings : dict, optional
        Filled with the seconds spent in each phase (h2d, grid, count,
        fill_pipeline, host_copy, total, ...).
    query_rows : int, optional
        Compute only the rows of the first ``query_rows`` points (their
        neighbours are still found among all points).
    column_ids : array_like of int, optional
        New name of each column (point), applied on the GPU before the rows
        are sorted; with ``n_columns``, the size of that column space
        (below 2**31).  A partition of the distributed join passes its
        points' global ids.
    memory_limit : int or "auto"
        Bytes the table may take where it goes ("auto": the memory free
        there; ``plan.result_size_guard``).
    rows_ready : callable, optional
        A host table only: called as ``rows_ready(r0, r1, indptr, indices)``
        once each batch's rows [r0, r1) are in the host table's arrays (final
        there: later batches do not change them), from the calling thread,
        in row order; a writer can encode them while the GPU fills the next
        batch (``batch_pairs`` sets how many batches there are).

    Returns
    -------
    NeighborTable or ndarray of int64

    Raises
    ------
    ValueError, TypeError
        For bad input or incompatible options.
    MemoryError
        If a single row does not fit in the allowed device memory.
    skyjoin.ResultTooLargeError
        If the table does not fit where it goes (host, or the device with
        ``on_device=True``), found after the count, before the fill.

    Examples
    --------
    >>> import numpy as np
    >>> nt = gpu_self_join(np.array([[0.0], [1.0], [3.0]]), 1.0)  # doctest: +SKIP
    >>> nt.pairs().tolist()                                         # doctest: +SKIP
    [[0, 1], [1, 0]]
    """
    eps, precision = _checked(eps, precision, output)
    request = gpu_request(self_join=True, output=output, sort=sort, include_self=include_self,
                          precision=precision, index_dims=index_dims, pattern=pattern,
                          kernel=kernel, threads_per_point=threads_per_point, schedule=schedule,
                          batch_pairs=batch_pairs, memory_limit=memory_limit)
    return run(None, X, eps, request, on_device=on_device,
               device_memory_limit=device_memory_limit, progress=progress, timings=timings,
               query_rows=query_rows, column_ids=column_ids, n_columns=n_columns,
               rows_ready=rows_ready)


def gpu_join(R, S, eps, *, output="table", sort=True, precision="float64", index_dims=None,
             on_device=False, kernel="auto", threads_per_point="auto", schedule="auto",
             batch_pairs=None, device_memory_limit=None, progress=None, timings=None,
             memory_limit="auto"):
    """Epsilon join of R with S on the GPU: rows index R, columns index S.

    Parameters are those of ``gpu_self_join`` (no ``include_self``; the
    UNICOMP patterns need a self-join and are not offered).

    Returns
    -------
    NeighborTable of shape (len(R), len(S)), or int64 counts per row of R.

    Examples
    --------
    >>> import numpy as np
    >>> gpu_join(np.zeros((1, 2)), np.ones((2, 2)), 1.5).n_pairs   # doctest: +SKIP
    2
    """
    eps, precision = _checked(eps, precision, output)
    request = gpu_request(self_join=False, output=output, sort=sort, precision=precision,
                          index_dims=index_dims, pattern="full", kernel=kernel,
                          threads_per_point=threads_per_point, schedule=schedule,
                          batch_pairs=batch_pairs, memory_limit=memory_limit)
    return run(R, S, eps, request, on_device=on_device, device_memory_limit=device_memory_limit,
               progress=progress, timings=timings)


def gpu_self_join_chunks(X, eps, *, include_self=False, sort=True, max_pairs=1 << 26,
                         precision="float64", index_dims=None, **options):
    """Yield the self-join in bounded pieces (``PairChunk``), row by row.

    Each chunk holds every pair of a run of consecutive rows, at most
    ``max_pairs`` pairs unless a single row has more (a row is never split).

    Parameters
    ----------
    X, eps, include_self, sort, precision, index_dims
        As for ``gpu_self_join``.
    max_pairs : int
        Bound on the pairs of one chunk.
    **options
        pattern, kernel, threads_per_point, schedule, device_memory_limit.

    Returns
    -------
    PairStream
        The chunks (``PairChunk``, in CSR form), after the total (``count``).

    Examples
    --------
    >>> import numpy as np
    >>> sum(len(c) for c in gpu_self_join_chunks(np.zeros((3, 1)), 1.0))  # doctest: +SKIP
    6
    """
    if int(max_pairs) < 1:
        raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
    eps, precision = _checked(eps, precision, "table")
    device_memory_limit = options.pop("device_memory_limit", None)
    for ignored in ("timings", "on_device", "output", "progress", "batch_pairs"):
        options.pop(ignored, None)
    request = gpu_request(self_join=True, sort=sort, include_self=include_self,
                          precision=precision, index_dims=index_dims, **options)
    return PairStream(chunk_stream(X, eps, request, int(max_pairs), device_memory_limit))


def chunk_stream(X, eps, request, max_pairs, device_memory_limit=None):
    """Execute the self-join request ``request`` (``plan.gpu_request``; eps and
    the request validated by the caller) as a generator of the total, once
    counted, then ``PairChunk`` of at most ``max_pairs`` pairs (or one longer
    row), in CSR form: what ``PairStream`` wraps.  Nothing runs before the
    first item is asked for.

    The batches run through the in-memory pipeline (``gpu_pipeline.fill_batches``:
    three streams, pinned staging, the GPU filling batch b+1 while batch b
    is handed over), and each chunk's column ids are copied by parallel
    host threads from pinned memory into the chunk's own array: O(pairs)
    host work, as the in-memory table's.  Memory: 3 x ``max_pairs`` pairs
    on the device and in pinned host memory, plus the chunks the caller
    keeps, plus O(n).  The total comes from the count pass alone.
    """
    cp, eng, stats = start(None, X, eps, request)
    n = eng.n_rows
    if eng.empty:
        return
    configure(eng, request)
    counts = eng.count()
    indptr = cp.zeros(n + 1, dtype=cp.int64)
    cp.cumsum(counts, dtype=cp.int64, out=indptr[1:])
    indptr_h = cp.asnumpy(indptr)
    yield int(indptr_h[-1])
    longest = int(counts.max())
    free = free_device_bytes(cp, device_memory_limit)
    cap = batch_capacity(int(indptr_h[-1]), longest, max(int(max_pairs), longest), free,
                         4 * N_STREAMS)
    cursor = cp.zeros(n, dtype=cp.int32) if eng.cfg.pattern != "full" else None
    batches = plan_row_batches(indptr_h, cap)
    for r0, r1, pinned in fill_batches(cp, eng, batches, counts, indptr, indptr_h, cursor, cap,
                                       request.sort, stats):
        indices = alloc_host(pinned.shape[0], np.int32)
        parallel_copy(indices, pinned)
        yield PairChunk.from_csr(r0, indptr_h[r0:r1 + 1] - indptr_h[r0], indices)
