"""Device memory: the one check that the points fit a GPU, and one error for when they do not.

Two rules, applied at the public boundary of each GPU operator:

* **Before the points go to the GPU** (:func:`check_points_fit`): a join or
  DBSCAN on the GPU certainly holds, at its peak, the copies of its points
  it makes in the working dtype (two for host input, or device input of
  another dtype: the upload and the copy sorted by cell; one for device
  input of the working dtype) plus :data:`SELF_JOIN_POINT_BYTES` (self-join),
  :data:`DBSCAN_POINT_BYTES` (DBSCAN) or :data:`JOIN_POINT_BYTES` (R join S,
  per point of R and of S) bytes a point of grid arrays and counts.  Those constants are at or
  below the smallest peak measured beyond the copies, over 2 to 12 dimensions,
  uniform and clustered points, both precisions
  (``docs/decisions/core-device-memory.md``), so the rule is a lower
  bound: where even it exceeds the free memory the call cannot succeed,
  and :class:`DeviceMemoryError` says so before anything is copied.  What
  depends on the data (the candidate ranges of the grid's cells, the
  result) is not in the bound.
* **While the operator runs** (:func:`oom_as_error`): CuPy's
  ``OutOfMemoryError`` becomes a :class:`DeviceMemoryError` that names the
  operator, the sizes and the ways out, after the failed call's arrays
  and the memory pool's cached blocks are handed back (the GPU stays
  usable); for operators that yield their results one at a time
  (``self_join_chunks``, ``dbscan_sweep``), while the caller iterates
  (:func:`oom_as_error_in`).

The distributed operators, whose GPU work runs in Dask tasks, report
CuPy's error from any task the same way (:func:`reports_device_oom`).

Free memory is the device's (``cudaMemGetInfo``) plus the blocks CuPy's
pool holds unused, which it releases before it gives up on an allocation.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Iterator, TypeVar

import numpy as np

from ..errors import DeviceMemoryError
from .device import is_device_array

__all__ = ["mark_phase", "SELF_JOIN_POINT_BYTES", "DBSCAN_POINT_BYTES", "JOIN_POINT_BYTES",
           "SKYLINE_POINT_BYTES", "WAYS_OUT", "PARTITIONED_WAYS_OUT", "SKYLINE_WAYS_OUT",
           "free_bytes", "copies_of", "points_bytes", "skyline_bytes", "check_points_fit",
           "check_skyline_fits", "is_device_oom",
           "oom_as_error", "oom_as_error_in", "reports_device_oom", "PoolPeak"]

T = TypeVar("T")

#: device bytes a point of a GPU self-join certainly takes beyond its copies:
#: cell ids, the order, counts (below the smallest measured peak, 32.1:
#: docs/decisions/core-device-memory.md)
SELF_JOIN_POINT_BYTES = 24
#: the same for a GPU DBSCAN: its grid path (d <= 4) holds, beside the two
#: copies, at least the order (int32) and the cell of each point
#: (``skyjoin.cluster.grid_gpu``'s memory by phase), its other paths a join's
DBSCAN_POINT_BYTES = 8
#: the same per point of R and of S in a GPU R join S (below the smallest
#: measured, which depends on the split between R and S)
JOIN_POINT_BYTES = 16

#: device bytes a point of a GPU skyline certainly takes beyond its float64
#: copy of the points: per-point keys, flags and ids (smallest measured peak:
#: docs/decisions/core-device-memory.md)
SKYLINE_POINT_BYTES = 12

#: what a user can do when the points do not fit one GPU
WAYS_OUT = ("skyjoin.distributed over several GPUs (skyjoin.distributed.local_gpu_cluster), "
            "precision='float32' (half the bytes of each copy of the points), or device='cpu'")


#: the same for the distributed join and DBSCAN, whose partitions run on several GPUs
PARTITIONED_WAYS_OUT = ("more GPUs (skyjoin.distributed.local_gpu_cluster, or more GPU "
                        "workers), more partitions (n_partitions=), or precision='float32'")


#: the same for the skyline (float64 only)
SKYLINE_WAYS_OUT = ("skyjoin.distributed.skyline over several GPUs "
                    "(skyjoin.distributed.local_gpu_cluster), or device='cpu'")


def free_bytes(cp) -> int:
    """Bytes the current device can still hand out: free memory plus the pool's
    unused blocks.  O(1)."""
    free, _total = cp.cuda.runtime.memGetInfo()
    return int(free) + int(cp.get_default_memory_pool().free_bytes())


def copies_of(X, dtype) -> int:
    """Copies of ``X`` a GPU join makes in the working ``dtype``: one (the copy
    sorted by cell) for a device array already of that dtype, else two (the
    upload or cast, and the sorted copy)."""
    return 1 if is_device_array(X) and X.dtype == dtype else 2


def points_bytes(arrays, dtype, self_join: bool, per_point: int | None = None) -> int:
    """The device bytes a GPU join of ``arrays`` (one point set for a
    self-join, R and S for a join; NumPy or CuPy) certainly takes in the
    working ``dtype``: :func:`copies_of` each set, plus the grid's bytes a
    point (module docstring; ``per_point`` instead, for DBSCAN's).  O(1)."""
    itemsize = np.dtype(dtype).itemsize
    if per_point is None:
        per_point = SELF_JOIN_POINT_BYTES if self_join else JOIN_POINT_BYTES
    return sum(int(X.shape[0]) * (copies_of(X, dtype) * int(X.shape[1]) * itemsize + per_point)
               for X in arrays)


def skyline_bytes(X) -> int:
    """The device bytes a GPU skyline of ``X`` (NumPy or CuPy, n x d) certainly
    takes: its float64 copy of the points (made for host and device input
    alike), plus :data:`SKYLINE_POINT_BYTES` a point.  O(1)."""
    return int(X.shape[0]) * (8 * int(X.shape[1]) + SKYLINE_POINT_BYTES)


def check_skyline_fits(cp, X) -> int:
    """Raise :class:`DeviceMemoryError` if :func:`skyline_bytes` exceeds the free
    memory of the current device (with the skyline's ways out); else return
    the bytes it needs.  O(1)."""
    return _check_fits(cp, "GPU skyline", skyline_bytes(X), int(X.shape[0]), int(X.shape[1]),
                       "its float64 copy of the points and its arrays a point", SKYLINE_WAYS_OUT)


def _check_fits(cp, what: str, needed: int, n: int, d: int, holds: str, ways_out: str) -> int:
    """The refusal of :func:`check_points_fit` and :func:`check_skyline_fits`."""
    free = free_bytes(cp)
    if needed > free:
        raise DeviceMemoryError(
            f"the {what} of {n:,} points in {d} dimensions needs at least {needed:,} bytes of "
            f"device memory ({holds}), but GPU {cp.cuda.Device().id} has {free:,} bytes free. "
            f"Ways out: {ways_out}.")
    return needed


def check_points_fit(cp, what: str, arrays, dtype, self_join: bool,
                     per_point: int | None = None) -> int:
    """Raise :class:`DeviceMemoryError` if :func:`points_bytes` exceeds the free
    memory of the current device; else return the bytes it needs.

    Parameters
    ----------
    cp : module
        CuPy.
    what : str
        The operator, as the message names it ("GPU self-join", "GPU DBSCAN").
    arrays : sequence of (n, d) arrays
        The point sets as they reach the engine (NumPy or CuPy).
    dtype : the working dtype
    self_join : bool
    per_point : int, optional
        The bytes a point beyond the copies (default: the join's constant;
        :data:`DBSCAN_POINT_BYTES` for DBSCAN).

    Notes
    -----
    O(1): one ``cudaMemGetInfo``.
    """
    return _check_fits(cp, what, points_bytes(arrays, dtype, self_join, per_point),
                       sum(int(X.shape[0]) for X in arrays), int(arrays[0].shape[1]),
                       f"its copies of the points in {np.dtype(dtype).name} and its grid",
                       WAYS_OUT)


def is_device_oom(exc: BaseException, cp=None) -> bool:
    """Whether ``exc`` is CuPy's ``OutOfMemoryError``.  Without ``cp``, CuPy is
    looked up among the loaded modules, never imported: an error of its
    class can only exist once CuPy is loaded (unpickling one from a worker
    loads it too), so a process without CuPy answers False."""
    cp = cp if cp is not None else sys.modules.get("cupy")
    return cp is not None and isinstance(exc, cp.cuda.memory.OutOfMemoryError)


@contextlib.contextmanager
def oom_as_error(cp, what: str, ways_out: str = WAYS_OUT) -> Iterator[None]:
    """Run the body; turn CuPy's ``OutOfMemoryError`` into :class:`DeviceMemoryError`
    naming ``what`` and ``ways_out``.

    The finished frames of the failed call are cleared first (their local
    variables held its device arrays, which the traceback would keep alive
    as long as the error is).  With ``cp``, the body's GPU is the current
    device: its pool's cached blocks are freed too, so the device is usable
    for the next call and the free bytes the message gives are real.  With
    ``cp`` None, the GPU work ran in Dask tasks on the workers' GPUs (see
    :func:`reports_device_oom`): each worker's pool keeps its cached blocks
    (CuPy frees them before it gives up on an allocation), and the message
    gives no free bytes.  A :class:`DeviceMemoryError` from an inner
    operator (the join a sweep runs) passes through the same way, its
    frames cleared and the pool freed, so that the outer operator's
    arrays go too.  Any other error passes through unchanged (a result-size
    error too).
    """
    try:
        yield
    except MemoryError as exc:
        reported = isinstance(exc, DeviceMemoryError)      # by an inner operator
        if not reported and not is_device_oom(exc, cp):
            raise
        traceback.clear_frames(exc.__traceback__)
        if cp is not None:
            cp.get_default_memory_pool().free_all_blocks()
        if reported:
            raise
        if cp is None:
            what_happened = f"a GPU ran out of device memory during the {what} ({exc})"
        else:
            what_happened = (f"the {what} ran out of device memory ({exc}); GPU "
                             f"{cp.cuda.Device().id} now has {free_bytes(cp):,} bytes free")
        raise DeviceMemoryError(f"{what_happened}. Ways out: {ways_out}.") from exc


def oom_as_error_in(cp, what: str, items: Iterator[T], ways_out: str = WAYS_OUT) -> Iterator[T]:
    """The items of ``items``, a generator that runs GPU work between them (a
    stream of chunks, a sweep's clusterings), with :func:`oom_as_error`
    around every step: CuPy's error raised while the caller iterates becomes
    :class:`DeviceMemoryError` as well.  Nothing is computed before the
    first item is asked for; closing the iterator closes ``items``."""
    with oom_as_error(cp, what, ways_out):
        yield from items


def reports_device_oom(what: str, ways_out: str) -> contextlib.ContextDecorator:
    """Decorate an operator whose GPU work runs on Dask workers: CuPy's
    ``OutOfMemoryError`` from any of its tasks (or its driver) becomes a
    :class:`DeviceMemoryError` (:func:`oom_as_error` with no device of its
    own, as a decorator: a fresh context for every call)."""
    return oom_as_error(None, what, ways_out)


class PoolPeak:
    """The most bytes in use in CuPy's pool while the block runs: an allocator
    that reads the pool's use after each allocation (for the rule's
    measurements and tests; the pool's cached blocks are emptied on entry).

    >>> with PoolPeak(cp) as peak:              # doctest: +SKIP
    ...     sj.self_join(X, eps, device="gpu", output="counts")
    >>> peak.bytes                              # doctest: +SKIP
    """

    #: the block being measured, if any (``mark_phase`` reports to it)
    active: "PoolPeak | None" = None

    def __init__(self, cp):
        self.cp, self.pool = cp, cp.get_default_memory_pool()
        self.base = self.peak = self.lap = 0
        #: peak bytes in use during each phase that ``mark_phase`` ended
        self.phases: dict = {}

    def __enter__(self) -> "PoolPeak":
        self.pool.free_all_blocks()
        self.base = self.peak = self.lap = self.pool.used_bytes()
        self.phases = {}
        self.cp.cuda.set_allocator(self._malloc)
        PoolPeak.active = self
        return self

    def _malloc(self, size):
        mem = self.pool.malloc(size)
        used = self.pool.used_bytes()
        self.peak = max(self.peak, used)
        self.lap = max(self.lap, used)
        return mem

    def __exit__(self, *exc) -> None:
        self.cp.cuda.set_allocator(self.pool.malloc)
        PoolPeak.active = None

    @property
    def bytes(self) -> int:
        """Peak bytes in use beyond those in use on entry."""
        return self.peak - self.base


def mark_phase(name: str) -> None:
    """End a phase of a GPU engine: inside a ``PoolPeak`` block, record the
    most bytes in use since the previous mark as ``phases[name]``.  O(1);
    nothing outside such a block."""
    pk = PoolPeak.active
    if pk is not None:
        pk.phases[name] = pk.lap
        pk.lap = pk.pool.used_bytes()
