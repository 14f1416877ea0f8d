"""The largest coordinate magnitude of a point set, in parallel.

NumPy's vectorised ``min`` and ``max`` (they release the GIL and let a NaN
through) run on spans of the array in the host thread pool
(``pool.map_spans``), not in Numba's threading layer: the "omp" layer's
workers spin after a region and slow the host-to-device copy that follows
this pass on the GPU paths (docs/decisions/core-host-passes.md).
"""

import math

import numpy as np

from .pool import map_spans

__all__ = ["max_magnitude"]

#: items per span at the least (the pass is memory-bound)
MIN_SPAN = 1 << 18


def max_magnitude(X) -> float:
    """max |x| over a NumPy array (0.0 when empty; inf if a value is inf or
    NaN): a min and a max per span, with no temporary, split over the host
    threads.  O(n d)."""
    a = np.asarray(X).reshape(-1)
    if not a.size:
        return 0.0

    def span(lo: int, hi: int) -> float:
        s = a[lo:hi]
        top, bottom = float(s.max()), float(s.min())
        if math.isnan(top) or math.isnan(bottom):
            return math.inf
        return max(abs(top), abs(bottom))

    return max(map_spans(span, a.size, MIN_SPAN))
