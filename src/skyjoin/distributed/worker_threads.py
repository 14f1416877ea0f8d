"""The in-process GPU path's tasks, run straight on the Dask workers' own threads.

When every worker of the client is a thread of this process (:mod:`.plan`,
rule 1), the in-process GPU path shares its data through :mod:`.registry`
and needs from Dask only a way to run a function on a given worker's GPU
thread, in order.  :class:`WorkerThreads` does that without the
scheduler: it submits each task to the worker's own executor (the thread
that :func:`~skyjoin.distributed.local_gpu_cluster` bound to the worker's
GPU), and a task that takes the futures of earlier tasks waits for them
on that thread.  Each of the path's steps (load, route, count or
cluster, send back) then costs its tasks alone, not also the round trips
through the scheduler, whose messages wait to be batched
(docs/decisions/distributed-worker-threads.md).

Order and deadlock: each executor runs its tasks first in, first out, and
a task only waits for tasks submitted before it, so the oldest unfinished
task never waits (every task it waits for is older and ahead of it in its
own queue).  Dask's own tasks on those workers queue behind ours, and ours
behind theirs.  These tasks do not show on Dask's dashboard or task
stream; the operators report their phases in ``timings``.

Cost: one round of Dask tasks per new set of workers (to find their
executors), then O(1) per task.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import weakref
from typing import Any, Callable

__all__ = ["WorkerThreads", "worker_threads"]

#: each worker's executor by the worker's address (inproc addresses are never reused)
_EXECUTORS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def _own_executor():
    """In a Dask task: the executor of the worker running it."""
    from distributed import get_worker

    return get_worker().executors["default"]


def worker_threads(client) -> "WorkerThreads":
    """The workers of ``client`` (all threads of this process) as a :class:`WorkerThreads`.

    Their executors are found once per worker (one Dask task on each worker
    not seen before) and remembered by address.
    """
    addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
    with _LOCK:
        missing = [a for a in addresses if a not in _EXECUTORS]
    if missing:
        futs = [client.submit(_own_executor, key=f"skyjoin-executor-{a}", workers=[a],
                              allow_other_workers=False, pure=False) for a in missing]
        found = client.gather(futs)
        with _LOCK:
            _EXECUTORS.update(zip(missing, found))
    with _LOCK:
        executors = {a: _EXECUTORS.get(a) for a in addresses}
    if any(e is None for e in executors.values()):     # a worker closed meanwhile
        raise RuntimeError("a Dask worker of the client closed while its thread was looked up")
    return WorkerThreads(executors)


class WorkerThreads:
    """Run functions on given workers' task threads, without Dask's scheduler.

    Duck-types the few ``distributed.Client`` methods that the in-process
    path calls: :meth:`submit`, :meth:`gather` and :meth:`scheduler_info`.
    Results stay in this process and are returned by reference, as Dask's
    in-process workers return them.

    Parameters
    ----------
    executors : dict
        Each worker's executor, by address.
    """

    def __init__(self, executors: dict) -> None:
        self.executors = executors

    def scheduler_info(self, n_workers: int = -1) -> dict:
        """The workers, as ``Client.scheduler_info`` lists them: their addresses
        when this object was made, with no round trip to the scheduler (the
        client's makes one on every call).  O(workers)."""
        return {"workers": {a: {} for a in self.executors}}

    def submit(self, fn: Callable, *args: Any, workers=None, retries: int | None = 0,
               **ignored: Any) -> cf.Future:
        """``fn(*args)`` on the thread of the worker ``workers`` (an address, or a
        list whose first address is taken), after every ``concurrent.futures.Future``
        among ``args`` is done (each replaced by its result), tried ``1 +
        retries`` times; ``key``, ``pure`` and ``allow_other_workers`` are
        accepted and ignored (the task runs where it is sent)."""
        address = workers[0] if isinstance(workers, (list, tuple)) else workers
        if address not in self.executors:
            raise ValueError(f"{address!r} is not a worker of this call")
        attempts = 1 + int(retries or 0)

        def run():
            values = [a.result() if isinstance(a, cf.Future) else a for a in args]
            for _ in range(attempts - 1):
                try:
                    return fn(*values)
                except Exception:
                    continue
            return fn(*values)

        return self.executors[address].submit(run)

    @staticmethod
    def gather(futures: list) -> list:
        """The futures' results, once every one is done (the first error raised
        then: no task of the call is still running when the caller cleans up)."""
        cf.wait(futures)
        return [f.result() for f in futures]
