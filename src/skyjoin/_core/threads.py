"""Numba's threads: whether two Python threads may run parallel code at once.
(The per-thread count is :mod:`skyjoin._core.thread_count`'s.)"""

from __future__ import annotations

import numba
import numpy as np

from .config import NUMBA_CACHE
from .thread_count import start_numba_threads

__all__ = ["threadsafe_numba"]


@numba.njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _tiny_parallel(a):
    """A parallel region, to make Numba pick its threading layer."""
    for i in numba.prange(a.shape[0]):
        a[i] += 1.0
    return a


def threadsafe_numba() -> bool:
    """Whether Numba's threading layer lets two threads launch parallel code at once.

    The "workqueue" layer does not (it aborts the process); "omp" and "tbb" do.
    The layer is fixed by the first parallel region of the process, run here
    if none has run yet.
    """
    start_numba_threads()   # the pool starts with sleeping waits (thread_count)
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel function has run yet: run a tiny one
        _tiny_parallel(np.zeros(2))
        layer = numba.threading_layer()
    return layer != "workqueue"
