"""The caller's array as slices on the GPU worker threads of this process,
checked, summarised and routed to the partitions by the GPUs.

On the in-process GPU path with several partitions (:mod:`.plan`, rule 3)
the array is not read on the host at all:

1. **load** (:func:`load`, one task per worker): worker t copies rows
   ``offsets[t]:offsets[t + 1]`` of the caller's array to its GPU (through
   pinned staging slots), tests them for NaN and inf, and returns their
   bounds and the rows of the plan's sample that fall in its slice.  The
   driver builds the partition plan from these summaries, as it would from
   the host's (the same sample rows, so the same boxes);
2. **route** (:func:`route`, one task per worker): on its GPU, worker t
   picks from its slice, for every partition q, the rows that q owns and
   the rows in q's halo (the rules of :mod:`.partition`), with their global
   ids, and keeps them on its GPU until q takes them;
3. **gather** (:func:`gather`, in partition q's task): q's rows from every
   slice, copied GPU to GPU (peer copies where the devices allow them,
   CuPy's ``copy_from_device_async``), owned rows then halo rows, each in
   ascending global id: the order of :func:`.in_process_gpu.partition_on_gpu`.

Results per point go the other way (:func:`send_back` in each partition's
task, :func:`receive` on each slice's worker): each GPU receives the
values of its slice's rows, places them on the GPU, and copies them into
rows ``offsets[t]:offsets[t + 1]`` of the caller's host arrays: the host
writes each output row once, in order, and reads nothing.  Ids sent back
without values (the core points of DBSCAN) come back through
:func:`collect_ids` instead: each slice's GPU marks them, reads them back in
order and writes them into its range of one host array of ids, the ranges
given by the rows :func:`send_back` reported for each slice.

Costs, for n points of d dimensions on W GPUs and P partitions: each point
crosses from the host once (n d values in all, W copies in parallel);
each GPU makes O(P) passes over its n/W rows; the rows that change GPU
(about (W - 1)/W of them, plus the halos) cross between the GPUs once.  The
host reads nothing but the staging copies.  Device memory: a slice, then
its routed parts (a slice plus the halo rows), then the partition.
"""

from __future__ import annotations

import numpy as np

from .._core.device import cupy
from .._core.device_reduce import column_bounds
from .._core.transfer import copy_chunked, h2d
from .._core.validate import check_points
from .blocks import Blocks, in_working_layout, sample_rows
from .partition import in_widened_box, owned_by
from .registry import drop, lookup, publish, require, take

__all__ = ["load", "load_task", "route", "route_task", "gather", "send_back", "receive",
           "receive_task", "collect_ids", "ids_task"]


def _workers(client) -> list:
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


def load(client, X, token: str, *, dtype, name: str = "X", columns=None, seed: int = 0,
         sample_target: int = 20000) -> Blocks:
    """Step 1: the array as one slice per GPU worker of this process, checked and
    summarised there.

    Parameters
    ----------
    client : WorkerThreads or distributed.Client
        Workers that are GPU threads of this process: the in-process path
        hands its :class:`.worker_threads.WorkerThreads` (each step's tasks
        on the workers' own threads), as it does to :func:`route`,
        :func:`receive` and :func:`collect_ids`; a client's tasks also work.
    X : array_like
        The points.  A C-contiguous 2-D array of the working dtype is read in
        place; anything else is converted (and checked) on the host first.
    token : str
        The call's token (the slices are shared under it).
    dtype : dtype
        Working dtype.
    name : str
        Argument name for error messages.
    columns : None
        Only for files and data frames (a TypeError otherwise).
    seed, sample_target : int
        The sample of the plan, drawn as :func:`.blocks.as_blocks` draws it.

    Returns
    -------
    Blocks
        With ``array`` (the checked array, read by retried partitions),
        ``slices`` (the slices' row bounds, one slice per worker in sorted
        worker order), bounds and sample; no futures.

    Raises
    ------
    ValueError
        Bad shape, NaN or inf values (the host's check names the first bad row).
    TypeError
        ``columns`` given.
    """
    if columns is not None:
        raise TypeError("columns= selects columns of files and data frames; slice the array "
                        "instead")
    dtype = np.dtype(dtype)
    arr = X if in_working_layout(X, dtype) else check_points(X, name=name, dtype=dtype)
    n, d = arr.shape
    workers = _workers(client)
    offsets = np.linspace(0, n, len(workers) + 1).astype(np.int64)
    pick = sample_rows(n, sample_target, seed)
    publish(token, X=arr, slices=offsets)
    try:
        futs = [client.submit(load_task, token, t, int(offsets[t]), int(offsets[t + 1]),
                              pick[(pick >= offsets[t]) & (pick < offsets[t + 1])] - offsets[t],
                              key=f"{token}-load-{t}", workers=[w], allow_other_workers=False,
                              pure=False)
                for t, w in enumerate(workers)]
        summaries = client.gather(futs)
        if not all(s[0] for s in summaries):
            check_points(arr, name=name, dtype=dtype)     # raises, naming the first bad row
            raise AssertionError("a GPU saw a NaN or inf that check_points accepts")
    except BaseException:
        drop(token)            # the slices already on the GPUs
        raise
    full = [s for s in summaries if s[1] is not None]
    lo = np.min([s[1] for s in full], axis=0) if full else np.zeros(d)
    hi = np.max([s[2] for s in full], axis=0) if full else np.zeros(d)
    sample = np.concatenate([s[3] for s in summaries]) if summaries else np.zeros((0, d))
    return Blocks(futures=[], offsets=np.array([0, n], dtype=np.int64), d=d, lo=lo, hi=hi,
                  sample=sample, from_array=True, array=arr, slices=offsets)


def load_task(token: str, t: int, a: int, b: int, pick: np.ndarray):
    """Step 1 on worker t: rows a..b to this thread's GPU, kept as slice t.

    Returns (finite?, lo, hi, sample rows): lo and hi are None for an empty
    slice.  O((b - a) d) bytes across, one pass on the GPU for each test.
    """
    cp = cupy()
    X = require(token, "X", "points")
    S = h2d(cp, np.ascontiguousarray(X[a:b]))
    finite, lo, hi = True, None, None
    if b > a:
        lo, hi, finite = column_bounds(cp, S)
    sample = cp.asnumpy(S[cp.asarray(pick, dtype=cp.int64)]) if len(pick) else \
        np.zeros((0, X.shape[1]), dtype=X.dtype)
    publish(token, **{f"slice-{t}": (S, a)})
    return finite, lo, hi, sample


def route(client, token: str, blocks: Blocks, plan, width: float) -> list:
    """Step 2: submit the routing of every slice (``width``: the halo width routed).

    Returns the futures (each the row counts its slice sends to each
    partition), for the partition tasks to wait on; an empty list when the
    array was not sliced (``blocks.slices`` is None).
    """
    if blocks.slices is None:
        return []
    return [client.submit(route_task, token, t, plan, float(width), key=f"{token}-route-{t}",
                          workers=[w], allow_other_workers=False, pure=False)
            for t, w in enumerate(_workers(client))]


def route_task(token: str, t: int, plan, width: float) -> list:
    """Step 2 on worker t: slice t's rows of every partition, kept on this GPU
    as ``part-t-q`` = (width, owned rows, their ids, halo rows, their ids);
    the slice itself is then dropped.  O(P) passes over the slice."""
    cp = cupy()
    got = take(token, f"slice-{t}")
    if got is None:
        raise RuntimeError(f"{token}: slice {t} is gone (the call ended, or it was routed)")
    S, a = got
    sizes = []
    for q in range(plan.n_partitions):
        own = owned_by(plan, q, S)
        halo = in_widened_box(plan, q, S, width) & ~own
        io = cp.flatnonzero(own)
        ih = cp.flatnonzero(halo)
        publish(token, **{f"part-{t}-{q}": (width, S[io], io + a, S[ih], ih + a)})
        sizes.append((int(io.size), int(ih.size)))
    cp.cuda.get_current_stream().synchronize()    # the parts are read from other GPUs
    return sizes


def gather(cp, token: str, p: int, width: float):
    """Step 3, in partition p's task: its rows from every slice, on this thread's GPU.

    Returns (S, ids, n_own) as :func:`.in_process_gpu.partition_on_gpu`, or
    None when this call's slices were not routed for p (the array was not
    sliced, or a retried task already took them).
    """
    slices = lookup(token, "slices")
    if slices is None:
        return None
    parts = [take(token, f"part-{t}-{p}") for t in range(len(slices) - 1)]
    if any(x is None for x in parts):
        return None
    if any(x[0] != width for x in parts):
        raise RuntimeError(f"{token}: partition {p} was routed with halo width "
                           f"{parts[0][0]!r}, asked for {width!r}")
    d = parts[0][1].shape[1]
    dtype = parts[0][1].dtype
    n_own = sum(int(x[2].size) for x in parts)
    m = n_own + sum(int(x[4].size) for x in parts)
    S = cp.empty((m, d), dtype=dtype)
    ids = cp.empty(m, dtype=cp.int64)
    stream = cp.cuda.get_current_stream()
    at = 0
    for k in (1, 3):                 # every slice's owned rows, then every slice's halo
        for x in parts:
            rows, rid = x[k], x[k + 1]
            c = int(rid.size)
            if c:
                S[at:at + c].data.copy_from_device_async(rows.data, rows.nbytes, stream)
                ids[at:at + c].data.copy_from_device_async(rid.data, rid.nbytes, stream)
            at += c
    stream.synchronize()             # before the parts go back to their GPUs' pools
    return S, ids, n_own


def send_back(cp, token: str, p: int, ids, *, tag: str = "back", **values) -> list[int]:
    """In partition p's task: the values of its owned rows (device arrays on this
    GPU, one per name; ``ids`` their global ids) split by the slice holding each
    row, kept on this GPU as ``<tag>-p-t`` until slice t's worker takes them
    (:func:`receive`, or :func:`collect_ids` for ids sent without values).
    Returns the rows sent to each slice.  O(W) passes over the rows for W
    slices; the ids cross as int32 offsets into their slice."""
    offsets = lookup(token, "slices")
    sent = []
    for t in range(len(offsets) - 1):
        a, b = int(offsets[t]), int(offsets[t + 1])
        sel = cp.flatnonzero((ids >= a) & (ids < b))
        rel = cp.int32 if b - a < 2**31 else cp.int64
        publish(token, **{f"{tag}-{p}-{t}": ((ids[sel] - a).astype(rel),
                                             {k: v[sel] for k, v in values.items()})})
        sent.append(int(sel.size))
    cp.cuda.get_current_stream().synchronize()    # read from other GPUs
    return sent


def receive(client, token: str, n_partitions: int, outputs: dict, after: list) -> int:
    """Submit the slices' :func:`receive_task` (after the futures ``after``) and
    wait for them.  ``outputs`` maps each value's name to the registry name of
    its host array.  Returns the rows written (n when every row had its owner)."""
    futs = [client.submit(receive_task, token, t, n_partitions, outputs, *after,
                          key=f"{token}-receive-{t}", workers=[w], allow_other_workers=False,
                          pure=False)
            for t, w in enumerate(_workers(client))]
    return int(sum(client.gather(futs)))


def _sent_here(cp, token: str, t: int, n_partitions: int, tag: str):
    """Every partition's ``<tag>-p-t`` (row offsets in slice t, values), copied to
    this GPU (peer copies), on this thread's stream."""
    parts = [lookup(token, f"{tag}-{p}-{t}") for p in range(n_partitions)]
    if any(x is None for x in parts):
        raise RuntimeError(f"{token}: a partition's {tag} rows of slice {t} are missing")
    stream = cp.cuda.get_current_stream()
    out = []
    for rid, vals in parts:
        if not rid.size:
            continue
        here = cp.empty(rid.size, dtype=rid.dtype)
        here.data.copy_from_device_async(rid.data, rid.nbytes, stream)
        got = {}
        for name, v in vals.items():
            w = cp.empty(v.size, dtype=v.dtype)
            w.data.copy_from_device_async(v.data, v.nbytes, stream)
            got[name] = w
        out.append((here, got))
    return out


def receive_task(token: str, t: int, n_partitions: int, outputs: dict, *after) -> int:
    """On worker t: every partition's values of slice t's rows, copied to this GPU
    (peer copies), placed by row, and copied into the shared host arrays'
    rows a..b (through pinned staging slots, ``transfer.copy_chunked``).
    Returns the rows received.  O(rows of the slice) device and host work."""
    cp = cupy()
    offsets = lookup(token, "slices")
    a, b = int(offsets[t]), int(offsets[t + 1])
    placed: dict = {}
    rows = 0
    for here, vals in _sent_here(cp, token, t, n_partitions, "back"):
        rows += int(here.size)
        for name, w in vals.items():
            if name not in placed:
                placed[name] = cp.zeros(b - a, dtype=w.dtype)
            placed[name][here] = w
    cp.cuda.get_current_stream().synchronize()
    for name, dev in placed.items():
        copy_chunked(cp, require(token, outputs[name], name)[a:b], dev, to_device=False)
    return rows


def collect_ids(client, token: str, n_partitions: int, tag: str, out: str,
                starts: np.ndarray) -> list:
    """Submit, on each slice's worker, :func:`ids_task`: the ids the partitions
    sent back under ``tag`` without values (:func:`send_back`), ascending, into
    rows ``starts[t]:starts[t + 1]`` of the shared host array ``out`` (the
    registry name of an int64 array of ``starts[-1]`` items; ``starts`` from
    the rows that :func:`send_back` reported for each slice).  Returns the
    futures, each the ids it wrote, without waiting."""
    return [client.submit(ids_task, token, t, n_partitions, tag, out, int(starts[t]),
                          int(starts[t + 1]), key=f"{token}-ids-{tag}-{t}", workers=[w],
                          allow_other_workers=False, pure=False)
            for t, w in enumerate(_workers(client))]


def ids_task(token: str, t: int, n_partitions: int, tag: str, out: str, lo: int,
             hi: int) -> int:
    """On worker t: slice t's ids sent back under ``tag``, marked in a mask of the
    slice's rows (each at most once) and read back in order into rows lo..hi of
    the shared host array ``out``.  O(rows of the slice) device work, and the
    ids' bytes to the host."""
    cp = cupy()
    offsets = lookup(token, "slices")
    a, b = int(offsets[t]), int(offsets[t + 1])
    mask = cp.zeros(b - a, dtype=cp.bool_)
    for here, _ in _sent_here(cp, token, t, n_partitions, tag):
        mask[here] = True
    ids = cp.flatnonzero(mask)           # int64, ascending
    del mask
    if int(ids.size) != hi - lo:        # never expected: each id has one owner
        raise RuntimeError(f"{token}: slice {t} received {int(ids.size)} {tag} ids, "
                           f"expected {hi - lo}")
    if b < 2**31:                        # half the bytes to the host, widened there
        ids = ids.astype(cp.int32)
    ids += a
    copy_chunked(cp, require(token, out)[lo:hi], ids, to_device=False)
    return int(ids.size)
