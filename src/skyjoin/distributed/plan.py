"""Every routing decision of the distributed join and DBSCAN, in one place.

A call validates its arguments, then decides, in this order and each in one
function:

1. whether its partitions may run on GPU worker threads of this process
   that read the caller's array in place (:func:`in_process_gpu_path`),
   their tasks then sent straight to those threads (:mod:`.worker_threads`);
2. how many partitions it wants (:func:`default_partitions`);
3. how the input reaches the workers: scattered or read in place,
   summarised or not (:func:`load_blocks`);
4. the partition boxes and the path that runs them (:func:`plan_run`),
   returned as a :class:`RunPlan`.

The engines (:mod:`.join`, :mod:`.dbscan`, :mod:`.in_process_gpu`) execute
a RunPlan and decide nothing.  The device is resolved by each worker for its
own engine (a worker of ``local_gpu_cluster(processes=True)`` sets
``SKYJOIN_DEVICE=gpu``); the driver resolves it only for rule 1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._core.device import resolve_device
from . import gpu_slices
from .blocks import as_blocks, is_dask_array, is_dask_frame
from .in_process_gpu import in_process
from .partition import Boxes, halo_width, plan_partitions
from .worker_threads import worker_threads

__all__ = ["RunPlan", "PATHS", "PARTITION_POINTS", "PARTS_PER_WRITING_GPU", "PART_SIZE_RATIO",
           "check_n_partitions", "on_gpu", "in_process_gpu_path", "default_partitions",
           "worker_of_partition", "part_shares", "load_blocks", "plan_run"]

#: the paths of a run: one worker, no halo; partitions with halos on the
#: workers; partitions on GPU worker threads of this process
PATHS = ("whole", "partitions", "in_process_gpu")

#: points per partition above which a worker gets more than one partition
PARTITION_POINTS = 1 << 26


@dataclass(frozen=True, eq=False)
class RunPlan:
    """How one distributed join or DBSCAN runs.

    Attributes
    ----------
    path : {"whole", "partitions", "in_process_gpu"}
    boxes : partition.Boxes
        The partition boxes (one unbounded box for the "whole" path).
    halo : float
        The halo width h (a hair more than eps, :func:`.partition.halo_width`).
    halo_factor : int
        Halo widths routed to each partition: 1 for the join, 2 for DBSCAN.
    device : str or None
        The workers' device argument, resolved on each worker.
    """

    path: str
    boxes: Boxes
    halo: float
    halo_factor: int
    device: str | None

    @property
    def n_partitions(self) -> int:
        return self.boxes.n_partitions

    def describe(self) -> str:
        """One line for ``-v`` logging."""
        return (f"distributed {self.path}: {self.n_partitions} partition(s), halo "
                f"{self.halo_factor} x {self.halo:.6g}, device {self.device or 'worker default'}")


def check_n_partitions(n_partitions):
    """``n_partitions`` as given (None or a number >= 1); ValueError otherwise."""
    if n_partitions is not None and (isinstance(n_partitions, bool) or int(n_partitions) < 1):
        raise ValueError(f"n_partitions must be an integer >= 1, got {n_partitions!r}")
    return n_partitions


def on_gpu(device) -> bool:
    """Whether the engine for ``device`` is the GPU's, resolved in the calling process."""
    return resolve_device(device) == "gpu"


def in_process_gpu_path(client, device) -> bool:
    """Rule 1: whether the partitions can run on GPU worker threads of this process that
    read the caller's array in place and write one shared result (:mod:`.in_process_gpu`).

    Every worker of ``client`` must be a thread of this process and ``device``
    must resolve to the GPU here.  O(workers).
    """
    return in_process(client) and on_gpu(device)


#: partitions per GPU when the GPU worker threads write Parquet parts (rule 2)
PARTS_PER_WRITING_GPU = 3
#: each such GPU's next part holds this fraction of its last one's points (rule 4)
PART_SIZE_RATIO = 0.6


def default_partitions(client, n: int, shared: bool = False, writes_parts: bool = False) -> int:
    """Rule 2: one partition per worker, more when a worker's share passes PARTITION_POINTS.

    A worker's engine already uses all of its cores (Numba's threads) or its
    GPU on one partition, so more partitions than workers only add halo
    points and routing; a single worker gets one partition: the whole join,
    with no halo at all.  With ``shared`` (GPU worker threads reading the
    caller's array, :mod:`.in_process_gpu`) there is no cap either: each
    partition runs the single-machine GPU engine, which batches what does not
    fit, and more partitions per GPU only add halos and rounds
    (docs/design.md has the measurement).  Except with ``writes_parts`` (the
    call writes Parquet parts, ``out=``): a part is encoded by one thread,
    which takes longer than the GPU's join of it, so each GPU gets
    ``PARTS_PER_WRITING_GPU`` partitions: the GPU joins its next partition
    while the writer encodes the last, and the parts encode side by side.
    """
    workers = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
    if shared:
        return workers * (PARTS_PER_WRITING_GPU if writes_parts else 1)
    per_worker = -(-max(n, 1) // workers)
    return int(workers * max(1, -(-per_worker // PARTITION_POINTS)))


def worker_of_partition(client, n_partitions: int) -> list:
    """A worker address for each partition, round robin over the sorted workers.

    With as many partitions as workers, each worker gets one; the scheduler
    would otherwise place tasks by where their input pieces are, which can
    put two partitions on one worker and leave another idle.
    """
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not workers:
        return [None] * n_partitions
    return [workers[p % len(workers)] for p in range(n_partitions)]


def load_blocks(client, X, n_partitions, *, shared: bool = False, token: str | None = None,
                writes_parts: bool = False, **kw):
    """Rule 3: the input as blocks; not summarised when it will be one partition anyway.

    A NumPy array whose default plan (or ``n_partitions``) is one partition
    skips the bounds and sample, which only a plan of several needs.  With
    ``shared`` (rule 1 holds), a non-empty NumPy array of several partitions
    is not scattered: it goes to the GPU workers as one slice each, checked
    and summarised there (:mod:`.gpu_slices`, under the call's ``token``),
    and stays readable in place (``Blocks.array``).
    """
    single = False
    if isinstance(X, np.ndarray) and X.ndim == 2:
        if n_partitions is None:
            single = default_partitions(client, X.shape[0], shared, writes_parts) == 1
        else:
            single = isinstance(n_partitions, (int, np.integer)) and \
                not isinstance(n_partitions, bool) and int(n_partitions) == 1
    array_input = not isinstance(X, (str, os.PathLike)) and not is_dask_array(X) \
        and not is_dask_frame(X)
    # the GPU partitions name their columns with int32 ids
    in_place = shared and array_input and not single and np.ndim(X) >= 1 \
        and np.shape(X)[0] < 2**31
    if in_place and token is not None and np.shape(X)[0] > 0:
        return gpu_slices.load(worker_threads(client), X, token, dtype=kw["dtype"],
                               columns=kw.get("columns"))
    # one partition runs the single-machine operator on a worker, which checks
    # the points itself: no second pass over them here
    return as_blocks(client, X, summarise=not single, scatter=not in_place, check=not single,
                     **kw)


def part_shares(client):
    """Rule 4's shares for Parquet parts written by GPU worker threads: box p,
    the ``p // W``-th part of its GPU (``worker_of_partition``: round robin
    over the W workers, each joining its parts in order), gets a share
    ``PART_SIZE_RATIO ** (p // W)``.

    A part's writer encodes on its own thread after its GPU has moved on,
    and takes longer than the GPU's join of it, so the call ends with the
    last part's writer; parts that shrink make every writer end near the
    same time (docs/design.md, "The Parquet parts' tail").  Every GPU gets
    the same total.  O(1).
    """
    workers = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
    return lambda p: PART_SIZE_RATIO ** (p // workers)


def plan_run(blocks, eps, precision, n_partitions, client, device, halo_factor: int = 1,
             writes_parts: bool = False) -> RunPlan:
    """Rule 4: the partition boxes, at least ``halo_factor`` halo widths wide, and the path.

    The path is "in_process_gpu" when the workers read the caller's array in
    place (``blocks.array``), else "whole" for one partition, else
    "partitions".  Boxes from the blocks' sample: O(sample log sample);
    equal shares of it, except for the Parquet parts that GPU worker
    threads write (``writes_parts`` on that path: :func:`part_shares`).
    """
    if blocks.sample is None:        # not summarised: one partition (see load_blocks)
        boxes = Boxes(dims=(0,), cuts1=np.zeros(0), cuts2=[np.zeros(0)],
                      offset=np.array([0, 1], dtype=np.int64), width=float(eps), d=blocks.d,
                      n_points=blocks.n)
        h = float(eps)
    else:
        h = halo_width(eps, blocks.d, blocks.lo, blocks.hi, precision)
        if n_partitions is None:
            n_partitions = default_partitions(client, blocks.n, blocks.array is not None,
                                              writes_parts)
        boxes = plan_partitions(blocks.sample, blocks.lo, blocks.hi, int(n_partitions),
                                halo_factor * h, n_points=blocks.n,
                                share=part_shares(client) if writes_parts and
                                blocks.array is not None else None)
    if blocks.array is not None:
        path = "in_process_gpu"
    elif boxes.n_partitions == 1:
        path = "whole"
    else:
        path = "partitions"
    return RunPlan(path=path, boxes=boxes, halo=h, halo_factor=halo_factor, device=device)
