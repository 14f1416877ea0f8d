"""The epsilon self-join on Dask: coarse partitions with halos, owned rows only.

1. The input becomes row blocks on the workers (:mod:`.blocks`), each
   summarised there (length, bounds, a sample).
2. The driver picks the partition boxes from the sample
   (:func:`.partition.plan_partitions`): a coarse two-level grid whose boxes
   are at least one halo width (a hair more than eps) wide.
3. Each block is routed on its worker: for every partition, the rows it
   owns and the rows in its halo (:func:`.routing.route_pieces`).
4. Each partition self-joins its owned and halo points with the
   single-machine engine of the worker's device (``skyjoin.self_join``:
   Numba on a CPU worker, CUDA on a GPU worker) and keeps the rows of its
   owned points.  A pair (i, j) is emitted only by the partition that owns
   i, as part of row i, so every pair appears exactly once; every neighbour
   of an owned point is in the partition's owned points or halo, so every
   row is complete.
5. The rows come back to the driver as one NeighborTable (``output="table"``,
   when it fits in memory), or stay on the workers: counts as a Dask array
   whose chunks the workers build (:mod:`.count_chunks`), or pairs written
   by the workers as one Parquet file per partition (``out="dir/"``,
   :mod:`.part_files`).

The distance test is the single-machine one (the same engine, the same
working precision), so the result is identical to ``skyjoin.self_join``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable, Sequence

import numpy as np

if TYPE_CHECKING:
    import dask.array
    import dask.bag
    import distributed

from .._core.device import cupy
from .._core.device_memory import PARTITIONED_WAYS_OUT, reports_device_oom
from .._core.memory import alloc_host
from .._core.validate import check_eps, check_precision, working_dtype
from ..simjoin.result import NeighborTable, index_dtype
from . import gpu_slices, in_process_gpu
from ._kernels import prefix_sum, select_rows
from .count_chunks import host_counts, partition_counts, whole_counts
from .blocks import Points, get_client, new_token, reruns_on_lost_input, stacked
from .part_files import STREAM_BATCH_PAIRS, PartWriter, check_folder, publish, staging, \
    write_rows
from .load import load_blocks
from .plan import (check_n_partitions, in_process_gpu_path, on_gpu, plan_run,
                   worker_of_partition, workers_device)
from .owned_rows import OwnedRows, as_bag, assemble_table, owned_table, task_self_join
from .routing import concat_pieces, route_blocks
from .worker_threads import worker_threads

__all__ = ["self_join", "PartitionedPairs", "partition_rows"]

log = logging.getLogger("skyjoin")

OUTPUTS = ("table", "counts")


@dataclass
class PartitionedPairs:
    """A join result written by the workers as one Parquet file per partition.

    Each file holds int64 columns ``i`` (row, a global row id) and ``j``
    (column), grouped by row; the rows of a file are the points its
    partition owns, so every pair is in exactly one file.

    Attributes
    ----------
    path : str
        The folder.
    files : list of str
        The files written (partitions without pairs write none).
    n_pairs : int
    shape : tuple (n, n)
    sorted : bool
        Columns ascending within each row.
    """

    path: str
    files: list
    n_pairs: int
    shape: tuple
    sorted: bool

    def to_table(self) -> NeighborTable:
        """Read every file back into one NeighborTable (it must fit in memory)."""
        import pyarrow.parquet as pq

        n = self.shape[0]
        counts = np.zeros(n, dtype=np.int64)
        parts = []
        for f in self.files:
            t = pq.read_table(f)
            i = t.column("i").to_numpy()
            j = t.column("j").to_numpy()
            counts += np.bincount(i, minlength=n)
            parts.append((i, j))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=index_dtype(n))
        fill = indptr[:-1].copy()
        for i, j in parts:
            # rows are grouped in a file: place each row's run at its offset
            starts = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
            lens = np.diff(np.r_[starts, len(i)])
            rows = i[starts]
            dest = np.repeat(fill[rows] - starts, lens) + np.arange(len(i))
            indices[dest] = j
            fill[rows] += lens
        return NeighborTable(indptr, indices, self.shape, sorted=self.sorted)


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------
def _n_pairs(rows):
    """Number of pairs in a partition's rows."""
    return len(rows[2])


def _n_pairs_owned(parts):
    """Number of pairs in a partition's ``[OwnedRows]``."""
    return sum(part.n_pairs for part in parts)


def _cat(a, b):
    """a followed by b (no copy when b is empty)."""
    return a if len(b) == 0 else np.concatenate([a, b])


def _needs_gpu(device) -> None:
    """on_device=True keeps tables on the workers' GPUs: refuse CPU workers."""
    if not on_gpu(device):
        raise ValueError("on_device=True keeps each partition's table on its worker's GPU, but "
                         "this worker's device is the CPU; use GPU workers "
                         "(skyjoin.distributed.local_gpu_cluster) or device='gpu'")


def device_rows(own_ids, own_X, halo_ids, halo_X, eps, *, include_self, sort, precision,
                n_total):
    """A partition's owned rows as a table kept on this worker's GPU: ``[OwnedRows]``.

    The engine computes the owned rows alone and names their columns by
    global id on the GPU (as :func:`partition_rows`); nothing comes back
    to the host.
    """
    if n_total >= 2**31:
        raise ValueError(f"on_device=True names columns with int32 ids: at most 2**31 - 1 "
                         f"points, got {n_total}")
    nt = owned_table(_cat(own_X, halo_X), _cat(own_ids, halo_ids), len(own_ids), eps,
                     include_self=include_self, sort=sort, precision=precision,
                     n_columns=n_total, on_device=True)
    return [OwnedRows(cupy().asarray(own_ids, dtype=np.int64), nt)]


def partition_rows(own_ids, own_X, halo_ids, halo_X, eps, *, include_self, sort, device,
                   precision, n_total):
    """Rows of the join owned by a partition: (counts, global columns) per owned point.

    On a GPU worker, the engine computes the owned rows alone and renames
    their columns to global ids on the GPU before sorting them.  Otherwise
    the partition's points (owned and halo), ordered by global id, are
    self-joined by the single-machine engine (its fastest pattern on the
    worker's device); the owned rows are kept and their columns mapped to
    global ids.  Since the local order of the points is their global order,
    rows sorted by the engine stay sorted.  The halo rows are computed and
    dropped: a small waste when partitions are large, as they should be.
    """
    if on_gpu(device) and n_total < 2**31:
        # owned points first: the GPU computes only their rows and renames the
        # columns to global ids before sorting them, so nothing is left to do here
        nt = owned_table(_cat(own_X, halo_X), _cat(own_ids, halo_ids), len(own_ids), eps,
                         include_self=include_self, sort=sort, precision=precision,
                         n_columns=n_total)
        return np.diff(nt.indptr).astype(np.int64), nt.indices
    S_ids = np.concatenate([own_ids, halo_ids])
    order = np.argsort(S_ids, kind="stable")
    S_ids = S_ids[order]
    S_X = np.concatenate([own_X, halo_X])[order]
    rows = np.searchsorted(S_ids, own_ids).astype(np.int64)
    nt = task_self_join(S_X, eps, include_self=include_self, sort=sort,
                        device="gpu" if on_gpu(device) else "cpu", precision=precision).to_host()
    return select_rows(nt.indptr, nt.indices, rows, S_ids, index_dtype(n_total))


def _partition_join(p, eps, include_self, output, sort, device, precision, out_dir, shape, d,
                    dtype, *pieces):
    """Join of one partition (runs on a worker); returns its owned rows or writes them."""
    own_ids, own_X, halo_ids, halo_X = concat_pieces(pieces, d, dtype)
    if output == "device":
        _needs_gpu(device)
        return device_rows(own_ids, own_X, halo_ids, halo_X, eps, include_self=include_self,
                           sort=sort, precision=precision, n_total=shape[0])
    if output == "counts":
        gpu = on_gpu(device)
        c = task_self_join(_cat(own_X, halo_X), eps, output="counts", include_self=include_self,
                           device="gpu" if gpu else "cpu", precision=precision,
                           query_rows=len(own_ids) if gpu else None)
        return own_ids, np.asarray(c[:len(own_ids)], dtype=np.int64)
    counts, cols = partition_rows(own_ids, own_X, halo_ids, halo_X, eps, include_self=include_self,
                                  sort=sort, device=device, precision=precision,
                                  n_total=shape[0])
    if out_dir is None:
        return own_ids, counts, cols
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return write_rows(out_dir, p, shape, sort, own_ids, indptr, cols)


def _whole_join(eps, include_self, output, sort, device, precision, out_dir, n, d, dtype,
                *blocks):
    """The join of all the points as one partition (one worker, no halo, no routing)."""
    X = stacked(blocks, d, dtype)
    if output == "device":
        _needs_gpu(device)
        nt = task_self_join(X, eps, include_self=include_self, sort=sort, device="gpu",
                            precision=precision, on_device=True)
        return [OwnedRows(cupy().arange(n, dtype=np.int64), nt)]
    if out_dir is not None and on_gpu(device):
        # the part is encoded batch by batch while the GPU fills the next
        with PartWriter(out_dir, 0, (n, n), sort) as w:
            task_self_join(X, eps, include_self=include_self, sort=sort, device="gpu",
                           precision=precision, rows_ready=w.rows, batch_pairs=STREAM_BATCH_PAIRS)
            return w.close()
    res = task_self_join(X, eps, include_self=include_self, output=output, sort=sort,
                         device="gpu" if on_gpu(device) else "cpu", precision=precision)
    if output == "counts":
        return np.asarray(res, dtype=np.int64)
    nt = res.to_host()
    if out_dir is None:
        return nt
    return write_rows(out_dir, 0, (n, n), sort, None, nt.indptr, nt.indices)


# --------------------------------------------------------------------------
# driver side
# --------------------------------------------------------------------------
def _check_fits(n_pairs: int, n: int) -> None:
    """Refuse to assemble a table the driver cannot hold (no silent truncation)."""
    need = 4 * n_pairs * (2 if n >= 2**31 else 1) + 8 * (n + 1)
    try:
        import psutil

        avail = psutil.virtual_memory().available
    except Exception:  # pragma: no cover - psutil comes with distributed
        return
    if need > 0.8 * avail:
        raise MemoryError(
            f"the join has {n_pairs:,} pairs ({need / 2**30:.1f} GiB as a table) but only "
            f"{avail / 2**30:.1f} GiB is available on the driver; pass out='folder/' to have "
            "the workers write partitioned Parquet, or output='counts'")


@reruns_on_lost_input
@reports_device_oom("distributed join", PARTITIONED_WAYS_OUT)
def self_join(X: Points, eps: float, *, client: distributed.Client | None = None,
              include_self: bool = False, output: str = "table", sort: bool = True,
              out: str | os.PathLike[str] | None = None, on_device: bool = False,
              device: str | None = None,
              precision: str = "float64", columns: Sequence[Hashable] | None = None,
              n_partitions: int | None = None, block_rows: int | None = None,
              replicas: int | None = None, retries: int = 2,
              timings: dict[str, float] | None = None,
              ) -> NeighborTable | dask.array.Array | PartitionedPairs | dask.bag.Bag:
    """All pairs of points within distance eps, computed on a Dask cluster.

    The same result as :func:`skyjoin.self_join` (pairs (i, j) and (j, i),
    ``sum_k (x_ik - x_jk)**2 <= eps**2`` in the working precision), computed
    by partitions of space with halos on the workers of ``client``.

    Parameters
    ----------
    X : ndarray, dask.array.Array, dask.dataframe.DataFrame, str or os.PathLike
        The points: an in-memory array (scattered to the workers), a Dask
        collection, or a path, glob or folder of ``.parquet`` / ``.csv`` /
        ``.txt`` / ``.npy`` files that the workers read themselves (rows are
        numbered file by file in sorted path order).
    eps : float
        Join radius, finite and > 0.
    client : distributed.Client, optional
        Default: the current client.
    include_self : bool
        Also report (i, i).
    output : {"table", "counts"}
        A :class:`~skyjoin.NeighborTable` assembled on the driver, or the
        int64 neighbour count of each point as a ``dask.array.Array`` whose
        chunks are built and held by the workers (nothing is gathered on the
        driver; ``.compute()`` brings them).
    sort : bool
        Columns ascending within each row.
    out : str or os.PathLike, optional
        A folder: the workers write the pairs there as one Parquet file per
        partition and a :class:`PartitionedPairs` is returned (for results
        larger than the driver's memory).  Only with ``output="table"``.
        The folder receives every part once all are written, or none
        (:mod:`skyjoin.distributed.part_files`): no partial file, even when
        a worker is killed in the middle of a write.
    on_device : bool
        Keep each partition's rows on the GPU of the worker that computed
        them, as CuPy arrays, and return them as a ``dask.bag.Bag`` of
        :class:`~skyjoin.distributed.owned_rows.OwnedRows` (one bag
        partition per spatial partition), for a next GPU step that maps
        over it on the workers; nothing is gathered.  GPU workers only;
        only with ``output="table"`` and no ``out``; at most 2**31 - 1
        points.  The tables live as long as the bag, and are lost with
        their worker.
    device : {"auto", "cpu", "gpu"}, optional
        Device of the workers' engine, resolved once per call by the
        workers (``plan.workers_device``; default: the workers'
        ``SKYJOIN_DEVICE``, else "auto", alike on every worker).
    precision : {"float64", "float32"}
    columns : list, optional
        Columns to use, for files and data frames.
    n_partitions : int, optional
        Target number of partitions (default: one per worker, more when a
        worker process's share passes 2**26 points; see
        ``default_partitions``).  A single partition is the whole join on one
        worker, without halo.
    block_rows : int, optional
        Rows per block when X is an in-memory array.
    replicas : int, optional
        Copies of each scattered block (default min(2, workers)), so that a
        worker's death loses no input.
    retries : int
        Dask retries of each task (a task that raises is run again), and how
        many times the whole join runs again when a worker died with the
        last copy of a scattered block (``blocks.reruns_on_lost_input``).
    timings : dict, optional
        Filled with the seconds of each phase ("load", "plan", "join",
        "assemble") and the number of partitions.

    Returns
    -------
    NeighborTable, dask.array.Array, PartitionedPairs, or dask.bag.Bag
        The table (``output="table"``); the counts (``output="counts"``):
        int64, shape (n,), chunks of consecutive rows (one per partition's
        share of the rows, at most 2**24 rows), already computed on the
        workers when the call returns, kept there as long as the array
        lives (compute it while the client is open); the written files
        (``out=``); the bag with ``on_device=True``.

    Raises
    ------
    ValueError
        As :func:`skyjoin.self_join`; no Dask client.
        A folder ``out`` that already holds ``part-*.parquet`` files.
        ``on_device=True`` with CPU workers, ``output="counts"`` or ``out``.
    MemoryError
        ``output="table"`` without ``out`` for a result the driver cannot
        hold (the message says how large it is).
    skyjoin.DeviceMemoryError
        A GPU ran out of device memory in one of the tasks; the message
        names the ways out (more GPUs, more partitions, float32).

    See Also
    --------
    skyjoin.self_join : the single-machine join that every partition runs.
    DBSCAN : DBSCAN on the same partitions.

    Notes
    -----
    The routing decisions (path, number of partitions, loading) are made
    once, by :mod:`skyjoin.distributed.plan`; ``-v`` logs them.  Costs,
    for n points in P partitions: O(n) to route the blocks (one parallel
    pass per block), then each partition's single-machine join over its
    owned and halo points, on its worker; the driver holds the O(n +
    pairs) table (``output="table"``), or only the futures of the count
    chunks (``output="counts"``: O(n) bytes moved between workers, P x R
    small tasks for R chunks) or the file list (``out=``: O(P) renames).
    A point is in the halo of at most 3 boxes per split dimension, so at
    most 9 partitions hold it.

    Examples
    --------
    >>> import numpy as np, skyjoin.distributed as sd
    >>> from distributed import Client, LocalCluster
    >>> with LocalCluster(n_workers=2, processes=False) as cl, Client(cl) as client:
    ...     X = np.array([[0.0, 0.0], [0.3, 0.4], [2.0, 2.0]])
    ...     sd.self_join(X, 0.5, client=client, device="cpu").pairs().tolist()
    [[0, 1], [1, 0]]
    """
    eps = check_eps(eps)
    precision = check_precision(precision)
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if out is not None and output != "table":
        raise ValueError("out= writes the pairs; it cannot be combined with output='counts'")
    if on_device and (output != "table" or out is not None):
        raise ValueError("on_device=True keeps the table on the GPUs; it cannot be combined "
                         "with output='counts' or out=")
    kind = "device" if on_device else output
    n_partitions = check_n_partitions(n_partitions)
    client = get_client(client)
    device = workers_device(client, device)     # resolved once; every task gets this
    tm = {} if timings is None else timings
    dtype = working_dtype(precision)
    token = new_token("join")
    out_dir = None if out is None else check_folder(out)
    t0 = time.perf_counter()
    blocks = load_blocks(client, X, n_partitions, dtype=dtype, columns=columns,
                         block_rows=block_rows, replicas=replicas, retries=retries, token=token,
                         shared=in_process_gpu_path(client, device), writes_parts=out is not None)
    n = blocks.n
    t1 = time.perf_counter()
    try:
        run = plan_run(blocks, eps, precision, n_partitions, client, device,
                       writes_parts=out is not None)
    except BaseException:
        in_process_gpu.drop(token)      # what a load onto the GPUs left there
        raise
    log.info("self_join: %s", run.describe())
    plan, h = run.boxes, run.halo
    if run.path == "in_process_gpu":
        t2 = time.perf_counter()
        if out_dir is not None:     # each partition writes its part on its GPU's thread
            with staging(out_dir, token) as hidden:
                res = _in_process_gpu_parts(client, blocks, plan, h, token, eps, include_self,
                                            sort, precision, retries, hidden)
                t3 = time.perf_counter()
                parts = PartitionedPairs(out_dir, publish(hidden, res),
                                         int(sum(r[1] for r in res)), (n, n), bool(sort))
            del blocks
            tm.update(load=t1 - t0, plan=t2 - t1, join=t3 - t2,
                      assemble=time.perf_counter() - t3, n_partitions=plan.n_partitions)
            return parts
        result = _in_process_gpu_join(client, blocks, plan, h, token, eps, include_self, kind,
                                      sort, precision, retries, phases=tm)
        if kind == "counts":        # the shared host array, as the other paths' Dask array
            result = host_counts(client, result, plan.n_partitions)
        t3 = time.perf_counter()
        del blocks
        tm.update(load=t1 - t0, plan=t2 - t1, join=t3 - t2, assemble=0.0,
                  n_partitions=plan.n_partitions)
        return result
    whole = run.path == "whole"
    pieces = None if whole else route_blocks(client, blocks, plan, h, token, retries)
    with contextlib.ExitStack() as stack:
        # the workers write into this call's hidden folder; the parts move into out_dir
        # once all are written, and the folder goes with any leftover of a killed writer
        stage = None if out_dir is None else stack.enter_context(staging(out_dir, token))
        t2 = time.perf_counter()
        if whole:
            futs = [client.submit(_whole_join, eps, include_self, kind, sort, device,
                                  precision, stage, n, blocks.d, dtype, *blocks.futures,
                                  retries=retries, key=f"{token}-join-whole")]
        else:
            where = worker_of_partition(client, plan.n_partitions)
            futs = [client.submit(_partition_join, p, eps, include_self, kind, sort, device,
                                  precision, stage, (n, n), blocks.d, dtype,
                                  *pieces[p],  # type: ignore[index]  # set on this path
                                  retries=retries, key=f"{token}-join-partition-{p}",
                                  workers=where[p], allow_other_workers=True)
                    for p in range(plan.n_partitions)]
        if kind == "device":        # each partition's table stays on its GPU
            result = _kept_on_device(client, futs, token)
            t3 = time.perf_counter()
        elif output == "counts":    # stays on the workers: no gather
            result = whole_counts(client, futs[0], n, token, retries) if whole else \
                partition_counts(client, futs, n, token, retries)
            t3 = time.perf_counter()
        elif stage is not None:
            res = client.gather(futs)
            t3 = time.perf_counter()
            result = PartitionedPairs(os.path.dirname(stage), publish(stage, res),
                                      int(sum(r[1] for r in res)), (n, n), bool(sort))
        elif whole:
            result = futs[0].result()
            t3 = time.perf_counter()
        else:
            sizes = client.gather([client.submit(_n_pairs, f, key=f"{token}-size-{p}")
                                   for p, f in enumerate(futs)])
            _check_fits(int(sum(sizes)), n)
            res = client.gather(futs)
            t3 = time.perf_counter()
            result = assemble_table(res, n, sort)
    del futs, pieces, blocks
    tm.update(load=t1 - t0, plan=t2 - t1, join=t3 - t2, assemble=time.perf_counter() - t3,
              n_partitions=1 if whole else plan.n_partitions)
    return result


def _kept_on_device(client, futs, token):
    """The bag of the partitions' ``[OwnedRows]`` futures, once every one is computed
    (their errors raised here); the tables stay on the workers."""
    client.gather([client.submit(_n_pairs_owned, f, key=f"{token}-kept-{p}")
                   for p, f in enumerate(futs)])
    return as_bag(futs)


def _in_process_gpu_parts(client, blocks, plan, h, token, eps, include_self, sort, precision,
                          retries, stage):
    """The partitioned join on in-process GPU workers, each partition's rows written
    by its worker thread as its Parquet part in ``stage``; returns the (path, pairs)
    of the parts, once every part is written (a task returns when its GPU is done,
    its writer still encoding).  Nothing but the file names comes back."""
    workers = worker_threads(client)
    in_process_gpu.publish(token, X=blocks.array)
    try:
        writing = workers.gather(_routed_tasks(workers, blocks, plan, h, token, retries, "parquet",
                                               in_process_gpu.parquet_task, eps, include_self,
                                               precision, sort, blocks.n, stage))
    finally:
        in_process_gpu.drop(token)
    cf.wait(writing)                # every writer done before a failure removes the folder
    return [w.result() for w in writing]


def _routed_tasks(client, blocks, plan, h, token, retries, name, task, *args) -> list:
    """Route the GPU slices (when the array was sliced), then one
    ``task(token, p, plan, h, *args, *routing)`` per partition on its worker;
    the futures."""
    where = worker_of_partition(client, plan.n_partitions)
    routed = gpu_slices.route(client, token, blocks, plan, h)
    return [client.submit(task, token, p, plan, h, *args, *routed, retries=retries,
                          key=f"{token}-{name}-{p}", workers=where[p], allow_other_workers=True)
            for p in range(plan.n_partitions)]


def _slowest_steps(phases, steps, prefix):
    """Each step's seconds in the slowest partition, into ``phases`` as prefix_step."""
    if phases is not None:
        for t in steps:
            for k, v in t.items():
                phases[f"{prefix}_{k}"] = max(phases.get(f"{prefix}_{k}", 0.0), v)


def _in_process_gpu_join(client, blocks, plan, h, token, eps, include_self, output, sort,
                         precision, retries, phases=None):
    """The partitioned join on in-process GPU workers (:mod:`.in_process_gpu`): count,
    allocate, fill in place.  O(n) host memory for the counts and row pointers, plus
    the table.  ``output="device"``: each partition's table stays on its GPU."""
    n, P = blocks.n, plan.n_partitions
    if output == "device":
        in_process_gpu.publish(token, X=blocks.array)
        try:
            futs = _routed_tasks(client, blocks, plan, h, token, retries, "device",
                                 in_process_gpu.device_table_task, eps, include_self,
                                 precision, sort, n)
            return _kept_on_device(client, futs, token)
        finally:
            in_process_gpu.drop(token)     # the shared points; the tables stay with the futures
    workers = worker_threads(client)
    where = worker_of_partition(workers, P)
    counts = alloc_host(n, np.int64)      # every row is written by its one owner (checked)
    in_process_gpu.publish(token, X=blocks.array, counts=counts)
    try:
        futs = _routed_tasks(workers, blocks, plan, h, token, retries, "count",
                             in_process_gpu.count_task, eps, include_self, precision, output, n)
        if output == "counts" and blocks.slices is not None:
            # each GPU writes its rows, its task queued after the counts (no round trip)
            written = gpu_slices.receive(workers, token, P, {"counts": "counts"}, futs)
            if written != n:
                raise RuntimeError(f"the slices received the counts of {written} rows of {n}")
        counted = workers.gather(futs)
        del futs
        rows = sum(r for r, _ in counted)
        _slowest_steps(phases, [t for _, t in counted], "count")
        if rows != n:       # every point has exactly one owner
            raise RuntimeError(f"the partitions counted the rows of {rows} points of {n}")
        if output == "counts":
            return counts
        indptr = alloc_host(n + 1, np.int64)
        with in_process_gpu.numba_lock():     # the workers may be running Numba's threads
            prefix_sum(counts, indptr)
        total = int(indptr[-1])
        _check_fits(total, n)
        indices = alloc_host(total, index_dtype(n))
        in_process_gpu.publish(token, indptr=indptr, indices=indices)
        futs = [workers.submit(in_process_gpu.fill_task, token, p, plan, h, eps, include_self,
                               precision, sort, n, retries=retries,
                               key=f"{token}-fill-{p}", workers=where[p],
                               allow_other_workers=True) for p in range(P)]
        filled = workers.gather(futs)
        written = sum(w for w, _ in filled)
        if written != total:     # never expected: each row is written by its one owner
            raise RuntimeError(f"the partitions wrote {written} pairs for a table of {total}")
        _slowest_steps(phases, [t for _, t in filled], "gpu")
        return NeighborTable(indptr, indices, (n, n), sorted=bool(sort))
    finally:
        in_process_gpu.drop(token)
