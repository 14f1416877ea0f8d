"""Sorted distinct values of a 1-D array, by one sort.

NumPy 2's ``numpy.unique`` goes through a hash table for integer arrays
before it sorts; on a million int64 ids that was about 15 times slower
than a sort and a comparison of neighbours
(docs/decisions/distributed-dbscan-merge.md).  Cost here: O(n log n), one
sorted copy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sorted_unique"]


def sorted_unique(a) -> np.ndarray:
    """The distinct values of ``a`` (flattened), ascending: ``numpy.unique(a)``
    for integers, and for floats without NaN."""
    s = np.sort(np.asarray(a).ravel())
    if s.size == 0:
        return s
    keep = np.empty(s.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
