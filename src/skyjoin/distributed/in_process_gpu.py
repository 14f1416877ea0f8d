"""Partitions on GPU worker threads that share the caller's memory.

With :func:`~skyjoin.distributed.local_gpu_cluster`'s default thread
workers, the caller's array, the workers and the result live in one
process.  The partitioned join then skips what only separate processes
need: scattering, routing and block summaries, and the assembly of the
partitions' rows into one table (docs/decisions/distributed-partitions.md
and distributed-loading.md have the measurements):

* **input**: the caller's array is neither scattered nor read on the
  host: with several partitions each GPU loads one slice of it, checks,
  summarises and routes it on the GPU, and each partition gathers its
  owned points and halo from the GPUs (:mod:`.gpu_slices`; every point
  crosses from the host once).  A task retried after its routed parts
  were taken selects its box from the array on the host instead
  (:func:`partition_on_gpu`: two parallel passes, ``_kernels.box_counts``
  and ``box_fill``, straight into pinned buffers): O(n) host reads, O(points
  of the partition and its halo) writes and host-to-device bytes;
* **results per point** (the counts of ``output="counts"``, DBSCAN's labels)
  go back to the GPU of each row's slice, which writes its rows of the host
  arrays in order (:func:`.gpu_slices.send_back`); so do DBSCAN's core
  points, as soon as the partitions are clustered: each slice's GPU writes
  its core ids into its range of ``core_sample_indices_`` while the driver
  merges the partitions' clusters (:func:`.gpu_slices.collect_ids`);
* **files** (``out=``): each partition's worker thread writes its part
  (:func:`parquet_task`) into the call's staging folder;
* **table**, in two phases: each partition counts its owned rows on its
  GPU and keeps its engine (grids, ranges, counts) in this process; the
  count tasks write the counts into one array; the driver turns them into
  the global row pointers and allocates the
  column array once; each partition then fills its rows batch by batch and
  copies every batch from pinned memory straight to its rows' final places
  (``place_rows``), so the table is never assembled a second time.

A partition whose kept engine is gone (a task retried) recomputes it.  The
objects shared between the driver and its worker threads live in
:mod:`.registry`, keyed by the call's token, and are dropped when the call
ends.
"""

from __future__ import annotations

import contextlib
import threading
import time

import numba
import numpy as np

from .._core.conditioning import condition_points
from .._core.device import cupy
from .._core.threads import threadsafe_numba
from .._core.transfer import d2h, d2pinned
from ..cluster.table_gpu import component_lows
from ..cluster.grid_gpu import compiled_module, grid_components, grid_labels
from ..simjoin.engine import count_rows, fill_rows
from ..simjoin.plan import request as join_request
from ._kernels import box_counts, box_fill, place_rows, scatter_into
from .gpu_slices import gather, send_back
from .halo_dbscan import owned_labels, partition_dbscan
from .owned_rows import OwnedRows, owned_table
from .part_files import STREAM_BATCH_PAIRS, PartWriter
from .partition import deep_inside, in_widened_box
from .registry import drop, lookup, publish, require, take

__all__ = ["in_process", "partition_on_gpu", "partition_points", "publish", "lookup", "take",
           "drop", "numba_lock", "count_task", "fill_task", "device_table_task", "parquet_task",
           "dbscan_local_task", "dbscan_labels_task"]


def in_process(client) -> bool:
    """Whether every worker of ``client`` is a thread of this process (Dask's inproc transport)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return bool(workers) and all(str(a).startswith("inproc://") for a in workers)


def partition_on_gpu(cp, token: str, p: int, plan, width: float):
    """Partition p's owned points then its halo (``width`` wide), copied to this
    thread's GPU from the caller's array (shared by the driver as "X").

    Two parallel passes over the array select the box's points straight into
    pinned buffers (CuPy's pinned pool keeps them for the next call); only
    those cross to the device.  O(n) reads, O(m) writes for the m points of
    the partition and its halo.

    Returns
    -------
    S : cupy.ndarray, shape (m, d)
        The owned points then the halo points, each in ascending global id.
    ids : cupy.ndarray of int64, shape (m,)
        Global id of each row of S.
    n_own : int
    """
    import cupyx

    X = require(token, "X", "points")
    lo, hi = plan.box(p)
    dims = np.asarray(plan.dims, dtype=np.int64)
    lo, hi, w = np.asarray(lo, np.float64), np.asarray(hi, np.float64), float(width)
    chunks = int(min(max(1, len(X) // 65536), 8 * numba.get_num_threads()))
    with numba_lock():
        own, halo = box_counts(X, dims, lo, hi, w, chunks)
    n_own, m = int(own.sum()), int(own.sum() + halo.sum())
    own_at = np.concatenate([[0], np.cumsum(own)[:-1]]).astype(np.int64)
    halo_at = (n_own + np.concatenate([[0], np.cumsum(halo)[:-1]])).astype(np.int64)
    hX = cupyx.empty_pinned((m, X.shape[1]), dtype=X.dtype)
    hids = cupyx.empty_pinned((m,), dtype=np.int64)
    with numba_lock():
        box_fill(X, dims, lo, hi, w, own_at, halo_at, hX, hids)
    S = cp.empty((m, X.shape[1]), dtype=X.dtype)
    ids = cp.empty(m, dtype=cp.int64)
    if m:
        S.set(hX)
        ids.set(hids)
    return S, ids, n_own


# --------------------------------------------------------------------------
# the join
# --------------------------------------------------------------------------
def partition_points(cp, token: str, p: int, plan, width: float):
    """Partition p's owned points then its halo on this thread's GPU, as
    :func:`partition_on_gpu` returns them: gathered from the GPUs' routed
    slices when this call sliced the array (:func:`.gpu_slices.gather`),
    else selected from the shared array on the host (:func:`partition_on_gpu`;
    also a retried task, whose first attempt took the routed parts)."""
    got = gather(cp, token, p, width)
    return got if got is not None else partition_on_gpu(cp, token, p, plan, width)


def _counted(token, p, plan, h, eps, include_self, precision, counts_only, n, steps=None,
             to_host=True):
    """Partition p's engine with the global ids and counts of its owned rows (on this
    thread's GPU); ``steps`` gets the seconds of "points", "count" and "to_host".
    The ids (int64) and counts come as host arrays, or as device arrays (the
    counts in their engine's dtype) without ``to_host``."""
    cp = cupy()
    tick = _ticker(cp, steps)
    S, ids, n_own = partition_points(cp, token, p, plan, h)
    tick("points")
    (S,), e = condition_points([S], eps, precision)
    plan = join_request("gpu", self_join=True, output="counts" if counts_only else "table",
                        include_self=include_self, precision=precision)
    c = count_rows(plan, None, S, e, query_rows=n_own, column_ids=ids.astype(cp.int32),
                   n_columns=n)
    tick("count")
    counts = c.counts if c.counts is not None else cp.zeros(n_own, dtype=cp.int64)
    if not to_host:
        return c, ids[:n_own], counts
    own_ids = d2h(cp, ids[:n_own])
    counts = d2h(cp, counts.astype(cp.int64))
    tick("to_host")
    return c, own_ids, counts


def _ticker(cp, steps):
    """tick(name): the seconds since the last tick (the device synchronised) into steps."""
    last = [time.perf_counter()]

    def tick(name):
        if steps is not None:
            cp.cuda.get_current_stream().synchronize()
            now = time.perf_counter()
            steps[name] = steps.get(name, 0.0) + now - last[0]
            last[0] = now
    return tick


def count_task(token, p, plan, h, eps, include_self, precision, output, n, *after):
    """Phase 1 on a worker: the counts of partition p's owned rows, written into the
    shared counts (or, for ``output="counts"`` when this call sliced the array
    over the GPUs, sent back to the GPU of each row's slice, which writes
    them); the engine is kept for phase 2.  Returns the number of rows and the
    seconds of its steps ("points", "count", "to_host", "scatter", "send_back").
    ``after``: the futures of the routing it waits for (:func:`.gpu_slices.route`)."""
    steps: dict = {}
    if output == "counts" and lookup(token, "slices") is not None:
        # each GPU writes its slice's rows of the counts (gpu_slices.receive)
        cp = cupy()
        _, own_ids, counts = _counted(token, p, plan, h, eps, include_self, precision, True, n,
                                      steps, to_host=False)
        t = time.perf_counter()
        send_back(cp, token, p, own_ids, counts=counts)
        steps["send_back"] = time.perf_counter() - t
        return int(own_ids.size), steps
    c, own_ids, counts = _counted(token, p, plan, h, eps, include_self, precision,
                                  output == "counts", n, steps)
    out = require(token, "counts")
    t = time.perf_counter()
    with numba_lock():
        scatter_into(own_ids, counts, out)
    steps["scatter"] = time.perf_counter() - t
    if output != "counts":
        publish(token, **{f"part-{p}": (c, own_ids, counts)})
    return len(own_ids), steps


def fill_task(token, p, plan, h, eps, include_self, precision, sort, n):
    """Phase 2 on a worker: partition p's rows, written into the shared table; returns
    the number of pairs written and the engine's phase times."""
    kept = take(token, f"part-{p}")
    if kept is None:        # retried elsewhere: count again
        kept = _counted(token, p, plan, h, eps, include_self, precision, False, n)
    c, own_ids, counts = kept
    indptr, indices = require(token, "indptr", "table"), lookup(token, "indices")
    lock = numba_lock()
    written = [0]

    def sink(r0, r1, chunk):
        with lock:
            place_rows(indptr, own_ids[r0:r1], counts[r0:r1], chunk, indices)
        written[0] += len(chunk)

    tm: dict = {}
    with cupy().cuda.Device(c.device):
        fill_rows(c, sort=sort, sink=sink, timings=tm)
    return written[0], tm


def device_table_task(token, p, plan, h, eps, include_self, precision, sort, n, *after):
    """Partition p's owned rows as a table kept on this thread's GPU: ``[OwnedRows]``
    (global row ids and a CSR table with global column ids, CuPy arrays).
    ``after``: the futures of the routing it waits for."""
    cp = cupy()
    S, ids, n_own = partition_points(cp, token, p, plan, h)
    nt = owned_table(S, ids, n_own, eps, include_self=include_self, sort=sort,
                     precision=precision, n_columns=n, on_device=True)
    return [OwnedRows(ids[:n_own].copy(), nt)]


def parquet_task(token, p, plan, h, eps, include_self, precision, sort, n, stage, *after):
    """Partition p's owned rows written by this worker as its Parquet part in the
    call's staging folder ``stage`` (:mod:`.part_files`), batch by batch as
    the GPU fills them (the writer encodes one while the GPU fills the
    next).  Returns when the GPU's work is done, so that this thread's GPU
    can join its next partition while the part is encoded: a
    ``concurrent.futures.Future`` of (path, pairs), set once the part is
    written (its error raised there).  ``after``: the futures of the
    routing it waits for."""
    cp = cupy()
    S, ids, n_own = partition_points(cp, token, p, plan, h)
    with PartWriter(stage, p, (n, n), sort, d2h(cp, ids[:n_own])) as w:   # discarded on error
        owned_table(S, ids, n_own, eps, include_self=include_self, sort=sort,
                    precision=precision, n_columns=n, rows_ready=w.rows,
                    batch_pairs=STREAM_BATCH_PAIRS)
        return w.closing()


_SERIAL = threading.Lock()


def numba_lock():
    """A lock around Numba's parallel kernels when its threading layer cannot run
    two of them at once (the "workqueue" layer aborts the process)."""
    return contextlib.nullcontext() if threadsafe_numba() else _SERIAL


# --------------------------------------------------------------------------
# DBSCAN
# --------------------------------------------------------------------------
def _cluster_on_gpu(token, p, plan, h, eps, min_samples, n, precision, grid):
    """Partition p's local clustering on this thread's GPU (see :mod:`.halo_dbscan`).

    Returns (kept, merge part): ``kept`` is what the labelling needs later,
    the merge part is (reps, is_node, edge_comp, edge_id) as in
    ``partition_dbscan``.  With ``grid`` (the driver's
    :func:`skyjoin.cluster.plan.grid_applies`: float64, d <= 4), the grid
    DBSCAN of :mod:`skyjoin.cluster.grid_gpu` runs its first three stages on
    the partition and stays on the GPU; without, or when its grid would
    hold too many cells, ``partition_dbscan`` runs on the partition's
    points in ``precision``.
    """
    cp = cupy()
    S, ids, n_own = partition_points(cp, token, p, plan, 2 * h)
    g = grid_components(S, eps, min_samples) if grid and n_own else None
    if g is None:
        own_ids, halo_ids = cp.asnumpy(ids[:n_own]), cp.asnumpy(ids[n_own:])
        state = partition_dbscan(own_ids, cp.asnumpy(S[:n_own]), halo_ids,
                                 cp.asnumpy(S[n_own:]), plan, p, h, eps, min_samples, "gpu",
                                 precision)
        return ("points", state), (state["reps"], state["is_node"], state["edge_comp"],
                                   state["edge_id"])
    del S
    gid = ids[g.perm]                      # global id of each point, in grid order
    own = g.perm < n_own
    core = g.core.astype(cp.bool_)
    # components named by their lowest global core id (the merge graph's nodes), numbered
    # in that order (ascending reps and edge ids: the driver's sort merges sorted runs)
    mod = compiled_module(g.real, dims=g.d)
    roots, reps = component_lows(cp, mod, g.core, g.parent, gid, max(n, 1))
    by_rep = cp.argsort(reps)
    roots, reps = roots[by_rep], reps[by_rep]
    comp = cp.full(g.n, -1, dtype=cp.int64)
    comp[roots] = cp.arange(roots.size, dtype=cp.int64)
    is_node = cp.zeros(roots.size, dtype=cp.bool_)
    is_node[comp[g.parent[core & own]]] = True
    # the core points that another partition also sees (as partition_dbscan)
    seen = cp.where(own, ~deep_inside(plan, p, g.Xs, h * (1.0 + 1e-6)),
                    in_widened_box(plan, p, g.Xs, h))
    shared = cp.flatnonzero(core & seen)
    shared = shared[cp.argsort(gid[shared])]
    part = (cp.asnumpy(reps), cp.asnumpy(is_node), cp.asnumpy(comp[g.parent[shared]]),
            cp.asnumpy(gid[shared]))
    return ("grid", (g, gid, own, roots)), part


def dbscan_local_task(token, p, plan, h, eps, min_samples, n, precision, grid, *after):
    """Step 1 on a worker: the merge part of partition p; the rest is kept for step 3.

    When this call sliced the array over the GPUs, the ids of the owned core
    points also go back to their slices' GPUs (``send_back`` under the tag
    "core", read by :func:`.gpu_slices.collect_ids` while the driver merges),
    and the task returns (merge part, core points per slice); else (merge
    part, None).  ``after``: the futures of the routing it waits for."""
    kept, part = _cluster_on_gpu(token, p, plan, h, eps, min_samples, n, precision, grid)
    publish(token, **{f"dbscan-{p}": kept})
    per_slice = None
    if lookup(token, "slices") is not None:
        cp = cupy()
        kind, st = kept
        if kind == "points":
            core_ids = cp.asarray(st["own_ids"][st["own_core"]])
        else:
            g, gid, own, _ = st
            with cp.cuda.Device(g.Xs.device.id):
                core_ids = gid[own & g.core.astype(cp.bool_)]
        per_slice = send_back(cp, token, p, core_ids, tag="core")
    return part, per_slice


def dbscan_labels_task(token, p, comp_labels, plan, h, eps, min_samples, n, precision, grid):
    """Step 3 on a worker: labels and core flags of partition p's owned points,
    written into the shared arrays; or, when this call sliced the array over the
    GPUs, the labels sent back to the GPU of each point's slice
    (:func:`.gpu_slices.send_back`; the slices write them), the core points
    having gone back at step 1.  Returns the number of points labelled."""
    kept = take(token, f"dbscan-{p}")
    if kept is None:        # retried elsewhere: cluster again (the same components)
        kept, _ = _cluster_on_gpu(token, p, plan, h, eps, min_samples, n, precision, grid)
    sliced = lookup(token, "slices") is not None
    labels_out = require(token, "labels")
    core_out = None if sliced else require(token, "core", "labels")
    kind, st = kept
    cp = cupy()
    it = cp.int32 if n < 2**31 else cp.int64       # ids and labels are < n
    if kind == "points":
        ids, lab, _ = owned_labels(st, comp_labels)
        if sliced:
            send_back(cp, token, p, cp.asarray(ids), labels=cp.asarray(lab).astype(it))
            return len(ids)
        core = st["own_core"]                  # the flags of ids (own_ids), in order
    else:
        g, gid, own, roots = st
        with cp.cuda.Device(g.Xs.device.id):
            root_label = cp.full(g.n, -1, dtype=cp.int64)
            root_label[roots] = cp.asarray(comp_labels, dtype=cp.int64)
            labels = grid_labels(g, root_label)
            if sliced:
                send_back(cp, token, p, gid[own], labels=labels[own].astype(it))
                return int(own.sum())
            # ids and labels cross as int32 into pinned buffers and are scattered from
            # there: half the bytes, and no fresh host memory
            ids = d2pinned(cp, gid[own].astype(it))
            lab = d2pinned(cp, labels[own].astype(it))
            core = d2pinned(cp, g.core[own].astype(cp.bool_))
    with numba_lock():
        scatter_into(ids, lab, labels_out)
        scatter_into(ids, core, core_out)
    return len(ids)
