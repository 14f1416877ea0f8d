"""The Numba thread count of a Dask worker, set inside the worker when it starts.

Numba launches a pool of ``NUMBA_NUM_THREADS`` threads when the first
parallel kernel runs, the size read from the environment when Numba is
imported; a parallel kernel then uses ``numba.get_num_threads()`` of them,
a count that is per Python thread (``numba.set_num_threads`` lowers it for
the calling thread only).

A worker process cannot be given its count through ``NUMBA_NUM_THREADS`` in
the Nanny's ``env``: the Nanny applies that ``env`` after the process has
started, and by then the process has imported Numba (the spawn start method
imports the caller's main module first, and unpickling the worker's
arguments imports the modules they name).  The pool keeps the size read at
import, while Numba's compiler, which reads the environment again before
every compilation, sees another value and refuses to compile
("Cannot set NUMBA_NUM_THREADS to a different value once the threads have
been launched").  Setting the variable before the process starts (Dask's
``distributed.nanny.pre-spawn-environ``) would set it in the caller's
process too, which runs Numba itself, with the same failure there.  So the
pool keeps its size and the count is set per thread, within the pool.
"""

from __future__ import annotations

import asyncio
import threading

import numba
from distributed import WorkerPlugin

__all__ = ["NumbaThreads"]

_BARRIER_TIMEOUT_S = 60.0


class NumbaThreads(WorkerPlugin):
    """Worker plugin: ``numba.set_num_threads(n)`` on the threads of a worker, when it starts.

    It sets the count on the worker's event-loop thread (where
    ``Client.run`` calls functions) and on each thread of its task
    executor, before the worker takes any task; a restarted worker runs it
    again.

    Parameters
    ----------
    n : int
        Numba threads for each of the worker's threads; at most the
        worker's Numba pool, ``numba.config.NUMBA_NUM_THREADS`` (else the
        worker fails to start, with Numba's ValueError).

    Notes
    -----
    O(worker threads) calls, once per worker start.  The count belongs to
    the threads that exist then: a task thread that the worker starts later
    (after a task leaves the pool with ``distributed.secede``) uses the
    whole Numba pool.
    """

    name = "skyjoin-numba-threads"

    def __init__(self, n: int):
        self.n = int(n)

    async def setup(self, worker) -> None:
        """Set the count on the event-loop thread, then on every task thread."""
        numba.set_num_threads(self.n)
        k = max(1, int(worker.state.nthreads))
        # each call waits for the others, so that the k calls run on k distinct threads
        # (an executor with fewer threads breaks the barrier: the worker fails to start)
        everyone = threading.Barrier(k, timeout=_BARRIER_TIMEOUT_S)

        def on_task_thread():
            numba.set_num_threads(self.n)
            everyone.wait()

        await asyncio.gather(*(asyncio.wrap_future(worker.executor.submit(on_task_thread))
                               for _ in range(k)))
