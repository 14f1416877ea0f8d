"""Numba's threads: whether two Python threads may run parallel code at once,
and the per-thread thread count."""

from __future__ import annotations

import contextlib

import numba
import numpy as np

from .config import NUMBA_CACHE
from .thread_count import start_numba_threads

__all__ = ["threadsafe_numba", "numba_threads"]


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


@contextlib.contextmanager
def numba_threads(n):
    """Numba's thread count for the calling thread (it is per thread), restored after."""
    if n is None:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(before)
