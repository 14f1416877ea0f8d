"""The GPU join's driver: count, scan, then fill in batches (host side).

Pipeline of one call (``count_rows`` then ``fill_rows``):

1. ``start``: the engine (``engine.GpuEngine``) copies the points to the
   device, builds the grid and the candidate ranges; ``configure`` resolves
   the call's plan (built at the public boundary, ``plan.request``) by
   the rule ``plan.plan_gpu``, hands it to the engine and reports it
   (``skyjoin._core.plans.report``);
2. **count**: a kernel counts the neighbours of every query;
   ``output="counts"`` stops here;
3. **scan**: ``indptr`` is the exclusive scan of the counts, so each row's
   neighbours have a known place and the result's size is known: the
   guard ``result_size.result_size_guard`` checks that it fits where it goes
   (host or device) before it is allocated; batches are runs of rows that
   fit one result buffer (``plan.batch_capacity``, ``plan.plan_row_batches``);
4. **fill**: per batch, the kernel writes each row's column ids
   contiguously, the rows are sorted on the GPU when ``sort=True``, and the
   batch is copied into pinned host buffers and from there, by parallel
   host threads, into the final host CSR array, while the GPU already
   computes the next batch (3 CUDA streams: ``batches``).

Nothing can overflow: the buffers are sized from exact counts, and the fill
kernel still checks every write against ``indptr`` and flags a batch that
would overflow or come up short; such a batch is recomputed once, then the
call fails loudly.  Cost: the engine's passes plus O(pairs) of copies.

The batched fill is its own stage, ``batches``.  ``chunk_stream`` runs the
same stages for ``self_join_chunks``: the fill's
batches handed out as bounded chunks.  Entered through
``skyjoin.simjoin.engine`` only: the points are conditioned and the plan's
scalars checked by the caller; nothing here validates, scales or routes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..._core.device import cupy
from ..._core.memory import alloc_host
from ..._core.plans import report as report_plan
from ..._core.transfer import parallel_copy
from ..plan import JoinPlan, batch_capacity, plan_gpu, plan_row_batches
from ..result_size import result_size_guard
from ..result import NeighborTable, PairChunk
from .batches import N_STREAMS, fill_batches, fill_to_host
from .engine import GpuEngine

__all__ = ["count_rows", "fill_rows", "Counted", "last_stats", "start", "configure", "run",
           "chunk_stream", "free_device_bytes"]

_STATS: dict = {}


def last_stats() -> dict:
    """Phase times (seconds) and sizes of the last GPU join call in this process."""
    return dict(_STATS)


def start(R, S, eps, request: JoinPlan):
    """Pick up CuPy and build the engine of ``request`` (points on the device,
    grid, candidate ranges, work statistics); returns (cp, engine, stats).

    The caller has validated eps and the plan's scalars and conditioned
    the points (``skyjoin.simjoin.engine``'s callers)."""
    cp = cupy()
    stats = {"precision": request.precision}
    _STATS.clear()
    _STATS.update(stats)
    t0 = time.perf_counter()
    eng = GpuEngine(cp, R, S, eps, request, stats)
    stats["setup_s"] = time.perf_counter() - t0
    return cp, eng, stats


def configure(eng, request: JoinPlan) -> JoinPlan:
    """The plan of ``request`` on the engine's measured work (``plan.plan_gpu``),
    handed to the engine and reported (``skyjoin._core.plans.report``: the
    "skyjoin" logger at debug level, and ``recording()`` blocks).  An empty
    join (nothing runs) reports ``request`` as it is."""
    if eng.empty:
        return report_plan(request, "join plan")
    t0 = time.perf_counter()
    plan = plan_gpu(request, eng.mean_work, eng.work_cv, eng.dgrid.k)
    eng.configure(plan)
    report_plan(plan, "join plan")
    eng.stats["setup_s"] = eng.stats.get("setup_s", 0.0) + time.perf_counter() - t0
    return plan


def free_device_bytes(cp, device_memory_limit) -> int:
    """Bytes the result buffers may take on the device: 0.6 of the free
    memory, within the plan's ``device_memory_limit`` (bytes > 0, checked
    by ``plan.request``; None: no limit) less what the pool holds."""
    pool = cp.get_default_memory_pool()
    free, _total = cp.cuda.runtime.memGetInfo()
    avail = int((free + pool.free_bytes()) * 0.6)
    if device_memory_limit is not None:
        avail = min(avail, max(0, int(device_memory_limit) - pool.used_bytes()))
    return avail


def report(timings, stats):
    """Publish the phase times: last_stats(), and the caller's timings dict if any."""
    _STATS.update(stats)
    if timings is not None:
        for k, v in stats.items():
            if k.endswith("_s"):
                timings[k[:-2]] = timings.get(k[:-2], 0.0) + v


@dataclass
class Counted:
    """A join whose rows are counted on the device and not yet filled
    (``count_rows``); ``fill_rows`` finishes it.

    Attributes
    ----------
    eng : GpuEngine
        Grids, ranges and kernels on the current device.
    plan : JoinPlan
        The resolved plan the engine runs.
    counts : cupy.ndarray of int32 or None
        Neighbour count of each row [0, n_rows) (None when empty).
    n_rows, n_cols : int
        Shape of the table (columns in the renamed space with column_ids).
    device : int
        The device that holds the engine.
    """

    cp: object
    eng: object
    plan: JoinPlan
    stats: dict
    counts: object
    n_rows: int
    n_cols: int
    device: int
    t_start: float


def count_rows(R, S, eps, plan: JoinPlan, *, query_rows=None, column_ids=None,
               n_columns=None) -> Counted:
    """Build the engine on the current device and count the neighbours of the rows.

    ``plan`` is the call's request (``plan.request``, built at its public
    boundary, device "gpu"); eps and the points are conditioned by the
    caller.

    ``query_rows`` (m) keeps only the rows [0, m); ``column_ids`` renames the
    columns (column j becomes ``column_ids[j]``, int32, before rows are
    sorted) in a column space of ``n_columns``: the distributed join's
    partitions use both to produce their owned rows in global ids.
    """
    t_start = time.perf_counter()
    cp, eng, stats = start(R, S, eps, plan)
    plan = configure(eng, plan)
    n_rows, n_cols = eng.n_rows, eng.n_cols
    if query_rows is not None:
        if not 0 <= int(query_rows) <= n_rows:
            raise ValueError(f"query_rows must be in [0, {n_rows}], got {query_rows!r}")
        n_rows = int(query_rows)
    if column_ids is not None:
        if len(column_ids) != n_cols or n_columns is None or int(n_columns) > 2**31 - 1:
            raise ValueError("column_ids needs one int32 id per column and n_columns < 2**31")
        eng.column_ids = cp.asarray(column_ids, dtype=cp.int32)
        n_cols = int(n_columns)
    counts = None
    if not eng.empty:
        t0 = time.perf_counter()
        counts = eng.count(n_rows)
        stats["count_s"] = time.perf_counter() - t0
    return Counted(cp, eng, plan, stats, counts, n_rows, n_cols, int(cp.cuda.Device().id),
                   t_start)


def fill_rows(c: Counted, *, sort=None, progress=None, timings=None, sink=None,
              rows_ready=None):
    """Fill the counted rows as the plan says: a NeighborTable (in host memory,
    or on the device for the memory route "device table"), or, with
    ``sink``, hand each batch to ``sink(r0, r1, chunk)`` and return None.
    ``sort`` None: the plan's.  The batch size chosen (``plan.batch_capacity``)
    is recorded in the plan, which is reported again.

    ``sink`` receives the rows [r0, r1) as one host array (a pinned buffer,
    valid only during the call) laid out by the row counts; the distributed
    join copies the rows from there straight to their places in the global
    table.  ``rows_ready(r0, r1, indptr, indices)`` (a host table only) is
    called once the rows [r0, r1) of each batch are in the host table's
    arrays, which later batches do not change there: a caller may write
    them while the GPU fills the next batch.
    """
    cp, eng, stats, counts, n_rows, n_cols = c.cp, c.eng, c.stats, c.counts, c.n_rows, c.n_cols
    sort = c.plan.sort if sort is None else sort
    on_device = c.plan.memory_route == "device table"
    device_memory_limit = c.plan.device_memory_limit
    if eng.empty:
        report(timings, stats)
        if sink is not None:
            return None
        xp = cp if on_device else np
        return NeighborTable(xp.zeros(n_rows + 1, dtype=xp.int64), xp.zeros(0, dtype=xp.int32),
                             (n_rows, n_cols), sorted=True)
    t0 = time.perf_counter()
    indptr = cp.zeros(n_rows + 1, dtype=cp.int64)
    cp.cumsum(counts, dtype=cp.int64, out=indptr[1:])
    indptr_h = cp.asnumpy(indptr)
    total = int(indptr_h[-1])
    longest = int(counts.max()) if n_rows else 0
    stats["scan_s"] = time.perf_counter() - t0
    stats["pairs"] = total
    bytes_per_pair = 4 * (N_STREAMS if not on_device else 1)
    free = free_device_bytes(cp, device_memory_limit)
    if sink is None:
        # the result's size is known: it must fit where it goes (a table kept
        # on the device leaves the rest of the allowance to the batch buffers)
        needed = result_size_guard(
            total, n_rows, form="table", index_itemsize=4,
            distance_itemsize=np.dtype(eng.dtype).itemsize if c.plan.return_distance else 0,
            memory_limit=c.plan.memory_limit, where="device" if on_device else "host",
            free_bytes=free if on_device else None)
        if on_device:
            free -= needed
    cap = batch_capacity(total, longest, c.plan.batch_pairs, free, bytes_per_pair)
    c.plan = report_plan(replace(c.plan, batch_pairs=cap), "join plan")
    batches = plan_row_batches(indptr_h, cap)
    stats["batches"] = len(batches)
    stats["batch_pairs"] = cap
    cursor = cp.zeros(n_rows, dtype=cp.int32) if eng.cfg.pattern != "full" else None
    t0 = time.perf_counter()
    if on_device:
        out = cp.empty(max(total, 1), dtype=cp.int32)
        overflow = cp.zeros(1, dtype=cp.int32)
        plan = eng.sort_plan(indptr, batches) if sort else None
        for b, (r0, r1) in enumerate(batches):
            eng.fill(r0, r1, counts, indptr, out, 0, cursor, overflow, plan, indptr_h)
            if int(overflow.get()[0]):
                overflow.fill(0)
                eng.fill(r0, r1, counts, indptr, out, 0, cursor, overflow, plan, indptr_h)
                if int(overflow.get()[0]):
                    raise RuntimeError(f"GPU join: batch of rows [{r0}, {r1}) overflowed twice")
            if progress is not None:
                progress(r1, n_rows)
        cp.cuda.Device().synchronize()
        stats["fill_s"] = time.perf_counter() - t0
        stats["total_s"] = time.perf_counter() - c.t_start
        report(timings, stats)
        return NeighborTable(indptr, out[:total], (n_rows, n_cols), sorted=bool(sort))
    indices = fill_to_host(cp, eng, batches, counts, indptr, indptr_h, cursor, cap, sort,
                            progress, stats, sink, rows_ready)
    stats["total_s"] = time.perf_counter() - c.t_start
    report(timings, stats)
    if sink is not None:
        return None
    return NeighborTable(indptr_h, indices, (n_rows, n_cols), sorted=bool(sort))


def run(R, S, eps, plan: JoinPlan, *, progress=None, timings=None, query_rows=None,
        column_ids=None, n_columns=None, rows_ready=None):
    """Execute the GPU join ``plan`` (a request of ``plan.request``; eps and the
    points conditioned by the caller): count, then fill.  R None: the
    self-join of S."""
    c = count_rows(R, S, eps, plan, query_rows=query_rows, column_ids=column_ids,
                   n_columns=n_columns)
    if plan.output == "counts":
        cp = c.cp
        res = c.counts.astype(cp.int64) if c.counts is not None \
            else cp.zeros(c.n_rows, dtype=cp.int64)
        res = res if plan.memory_route == "device counts" else cp.asnumpy(res)
        c.stats["total_s"] = time.perf_counter() - c.t_start
        report(timings, c.stats)
        return res
    return fill_rows(c, progress=progress, timings=timings, rows_ready=rows_ready)


def chunk_stream(X, eps, request: JoinPlan, max_pairs: int):
    """Execute the self-join request ``request`` (memory route "chunks"; eps
    and the points conditioned by the caller) as a generator of the total,
    once counted, then ``PairChunk`` of at most ``max_pairs`` pairs (or one
    longer row), in CSR form: what ``PairStream`` wraps.  Nothing runs
    before the first item is asked for.

    The batches run through the in-memory pipeline (``fill_batches``: three
    streams, pinned staging, the GPU filling batch b+1 while batch b is
    handed over), and each chunk's column ids are copied by parallel host
    threads from pinned memory into the chunk's own array: O(pairs) host
    work, as the in-memory table's.  Memory: 3 x ``max_pairs`` pairs on the
    device and in pinned host memory, plus the chunks the caller keeps,
    plus O(n).  The total comes from the count pass alone.
    """
    cp, eng, stats = start(None, X, eps, request)
    n = eng.n_rows
    if eng.empty:
        configure(eng, request)
        return
    plan = configure(eng, request)
    counts = eng.count()
    indptr = cp.zeros(n + 1, dtype=cp.int64)
    cp.cumsum(counts, dtype=cp.int64, out=indptr[1:])
    indptr_h = cp.asnumpy(indptr)
    yield int(indptr_h[-1])
    longest = int(counts.max())
    free = free_device_bytes(cp, plan.device_memory_limit)
    cap = batch_capacity(int(indptr_h[-1]), longest, max(int(max_pairs), longest), free,
                         4 * N_STREAMS)
    report_plan(replace(plan, batch_pairs=cap), "join plan")
    cursor = cp.zeros(n, dtype=cp.int32) if eng.cfg.pattern != "full" else None
    batches = plan_row_batches(indptr_h, cap)
    for r0, r1, pinned in fill_batches(cp, eng, batches, counts, indptr, indptr_h, cursor, cap,
                                       plan.sort, stats):
        indices = alloc_host(pinned.shape[0], np.int32)
        parallel_copy(indices, pinned)
        yield PairChunk.from_csr(r0, indptr_h[r0:r1 + 1] - indptr_h[r0], indices)
