"""Every routing decision of the distributed join and DBSCAN, in one place.

A call validates its arguments, then decides, in this order and each in one
function:

0. the device of its engines, resolved once for the whole call
   (:func:`workers_device`): "cpu" or "gpu", passed down to every task;
1. whether its partitions may run on GPU worker threads of this process
   that read the caller's array in place (:func:`in_process_gpu_path`),
   their tasks then sent straight to those threads (:mod:`.worker_threads`);
2. how many partitions it wants (:func:`default_partitions`);
3. how the input reaches the workers: scattered or read in place,
   summarised or not (``load.load_blocks``, which applies this rule);
4. the partition boxes and the path that runs them (:func:`plan_run`),
   returned as a :class:`RunPlan`.

The engines (:mod:`.join`, :mod:`.dbscan`, :mod:`.in_process_gpu`) execute
a RunPlan and decide nothing: the tasks receive the resolved device and
only compare it (:func:`on_gpu`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.device import DEVICES, resolve_device
from .in_process_gpu import in_process
from .partition import Boxes, halo_width, plan_partitions

__all__ = ["RunPlan", "PATHS", "PARTITION_POINTS", "PARTS_PER_WRITING_GPU", "PART_SIZE_RATIO",
           "check_n_partitions", "workers_device", "on_gpu", "in_process_gpu_path",
           "default_partitions", "worker_of_partition", "part_shares", "plan_run"]

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
    device : {"cpu", "gpu"}
        The device of every task's engine, resolved once by
        :func:`workers_device`.
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
                f"{self.halo_factor} x {self.halo:.6g}, on the {self.device}")


def check_n_partitions(n_partitions):
    """``n_partitions`` as given (None or a number >= 1); ValueError otherwise."""
    if n_partitions is not None and (isinstance(n_partitions, bool) or int(n_partitions) < 1):
        raise ValueError(f"n_partitions must be an integer >= 1, got {n_partitions!r}")
    return n_partitions


def workers_device(client, device) -> str:
    """Rule 0: the device of a distributed call's engines, "cpu" or "gpu",
    resolved once at the call's public boundary and passed to every task.

    "cpu" is the answer at once.  Otherwise each worker of ``client``
    resolves ``device`` once, with its own environment and GPU (as
    :func:`skyjoin._core.device.resolve_device`: a worker of
    ``local_gpu_cluster(processes=True)`` has ``SKYJOIN_DEVICE=gpu``), in
    one ``client.run``: "gpu" on a worker without a usable GPU raises
    :class:`skyjoin.GPUUnavailableError` here, and None or "auto" must
    resolve alike on every worker (different answers are refused: pass
    ``device="cpu"`` or ``"gpu"``).  With no worker yet, it is resolved in
    this process.  O(workers), one round trip.
    """
    if device is not None and (not isinstance(device, str) or device.lower() not in DEVICES):
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device is not None and device.lower() == "cpu":
        return "cpu"
    answers = client.run(resolve_device, device) if client.scheduler_info(
        n_workers=-1)["workers"] else {}
    found = sorted(set(answers.values()))
    if not found:
        return resolve_device(device)
    if len(found) > 1:
        counts = {dev: sum(v == dev for v in answers.values()) for dev in found}
        raise ValueError(f"device={device!r} resolves differently on the workers "
                         f"({counts['cpu']} to 'cpu', {counts['gpu']} to 'gpu'); pass "
                         "device='cpu' or device='gpu'")
    return found[0]


def on_gpu(device: str) -> bool:
    """Whether the engine for the resolved ``device`` ("cpu" or "gpu", from
    :func:`workers_device`) is the GPU's; nothing is resolved again.  O(1)."""
    if device not in ("cpu", "gpu"):
        raise ValueError(f"a distributed task takes a resolved device ('cpu' or 'gpu'), got "
                         f"{device!r}; resolve it once with plan.workers_device")
    return device == "gpu"


def in_process_gpu_path(client, device: str) -> bool:
    """Rule 1: whether the partitions can run on GPU worker threads of this process that
    read the caller's array in place and write one shared result (:mod:`.in_process_gpu`).

    Every worker of ``client`` must be a thread of this process and the
    resolved ``device`` the GPU.  O(workers).
    """
    return on_gpu(device) and in_process(client)


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
    (docs/decisions/distributed-partitions.md has the measurement).  Except
    with ``writes_parts`` (the call writes Parquet parts, ``out=``): a part
    is encoded by one thread, which takes longer than the GPU's join of it,
    so each GPU gets ``PARTS_PER_WRITING_GPU`` partitions: the GPU joins its
    next partition while the writer encodes the last, and the parts encode
    side by side.
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


def part_shares(client):
    """Rule 4's shares for Parquet parts written by GPU worker threads: box p,
    the ``p // W``-th part of its GPU (``worker_of_partition``: round robin
    over the W workers, each joining its parts in order), gets a share
    ``PART_SIZE_RATIO ** (p // W)``.

    A part's writer encodes on its own thread after its GPU has moved on,
    and takes longer than the GPU's join of it, so the call ends with the
    last part's writer; parts that shrink make every writer end near the
    same time (docs/decisions/distributed-parquet-parts.md).  Every GPU gets
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
    on_gpu(device)                   # resolved once, by workers_device
    if blocks.sample is None:        # not summarised: one partition (see load.load_blocks)
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
