"""One pool of host threads for the GIL-free passes over host arrays.

Made once per process: a pool made per call costs a thread start and join
per thread on every call, which short calls (a skyline of a million
points) notice.

Copies (``transfer.parallel_copy``) and the range pass
(``magnitude.max_magnitude``) split an array into spans and run a function
that releases the GIL (NumPy's copy, a ``nogil`` Numba kernel) on each span
in these threads.  They are plain Python threads, not Numba's threading
layer: the "omp" layer's workers keep spinning after a parallel region and
slow the next host pass that runs beside them
(docs/decisions/core-host-passes.md).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
from typing import Callable, Sequence, TypeVar

__all__ = ["HOST_THREADS", "host_pool", "map_spans", "map_dynamic"]

T = TypeVar("T")

#: threads of the host pool: every core, at most 32
HOST_THREADS = max(1, min(32, os.cpu_count() or 1))

_POOL: cf.ThreadPoolExecutor | None = None


def host_pool() -> cf.ThreadPoolExecutor:
    """The process's host thread pool (made on first use)."""
    global _POOL
    if _POOL is None:
        _POOL = cf.ThreadPoolExecutor(max_workers=HOST_THREADS, thread_name_prefix="skyjoin-host")
    return _POOL


def map_spans(fn: Callable[[int, int], T], n: int, min_span: int = 1 << 20) -> list[T]:
    """``[fn(a, b) for (a, b) in spans]`` over ``range(n)`` cut into at most
    ``HOST_THREADS`` spans of at least ``min_span`` items, run in the host
    pool (inline when one span covers all).  ``fn`` should release the GIL.
    """
    span = max(min_span, -(-n // HOST_THREADS))
    if n <= span:
        return [fn(0, n)]
    futs = [host_pool().submit(fn, a, min(n, a + span)) for a in range(0, n, span)]
    return [f.result() for f in futs]


def map_dynamic(fn: Callable[[T], object], items: Sequence[T], threads: int) -> list:
    """``[fn(x) for x in items]``, on at most ``threads`` threads of the host pool
    that take the items one after another (dynamic scheduling: items of
    unequal cost balance out).  Inline for one thread or one item.

    The first exception stops the others from taking new items and is
    raised here once every running item has finished.  ``fn`` should
    release the GIL (a ``nogil`` Numba kernel).  Not for ``fn`` that waits
    on the host pool itself.
    """
    n = len(items)
    k = max(1, min(int(threads), n, HOST_THREADS))
    if k == 1:
        return [fn(x) for x in items]
    out: list = [None] * n
    lock = threading.Lock()
    state = {"next": 0, "failed": False}

    def worker() -> None:
        while True:
            with lock:
                i = state["next"]
                if i >= n or state["failed"]:
                    return
                state["next"] = i + 1
            try:
                out[i] = fn(items[i])
            except BaseException:
                state["failed"] = True
                raise

    futs = [host_pool().submit(worker) for _ in range(k)]
    errors = [f.exception() for f in futs]
    for e in errors:
        if e is not None:
            raise e
    return out
