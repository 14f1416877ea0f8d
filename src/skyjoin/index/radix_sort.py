"""A stable sort of non-negative int64 keys on the host threads: LSD radix sort.

The sparse grids sort their points by cell key (``grid.sort_cells``);
NumPy's stable argsort (a radix sort for small integers, a merge sort for
int64) runs on one thread, and at a million keys it was most of the grid's
build (docs/decisions/dbscan-metrics.md).  Here the keys are sorted by digits
of up to 13 bits, least significant first, only as many digits as the
largest key needs (Knuth, TAOCP vol. 3, §5.2.5, radix sorting): each pass
counts its digits per contiguous chunk of the input (one chunk per
thread), turns the counts into each chunk's starting places, and moves
the keys and their rows there, chunk after chunk in input order, so every
pass, and hence the sort, is stable: the order equals
``numpy.argsort(key, kind="stable")``.  O(n passes), passes =
ceil(bits / 13); memory two copies of the keys and of the rows.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from .._core.pool import map_dynamic

__all__ = ["radix_argsort", "DIGIT_BITS"]

#: the most bits of one digit (8192 counters a chunk: they stay in cache)
DIGIT_BITS = 13


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def _count(key, shift, mask, counts, c, b0, b1):
    """counts[c, v]: keys of [b0, b1) whose digit is v."""
    for i in range(b0, b1):
        counts[c, (key[i] >> shift) & mask] += 1


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def _move(key, rows, shift, mask, place, c, key_out, rows_out, b0, b1):
    """Move the keys of [b0, b1) and their rows to their places (chunk c's)."""
    for i in range(b0, b1):
        v = (key[i] >> shift) & mask
        j = place[c, v]
        key_out[j] = key[i]
        rows_out[j] = rows[i]
        place[c, v] = j + 1


def radix_argsort(key, max_key: int, order_dtype, threads: int | None = None):
    """(order, sorted keys): ``order`` of dtype ``order_dtype`` such that
    ``key[order]`` is sorted, equal keys in input order (stable), and the
    sorted keys.  ``key``: int64 in [0, max_key], not modified.  On
    ``threads`` chunks (default Numba's thread count) of the host pool.
    O(n ceil(bits(max_key) / DIGIT_BITS)).

    Examples
    --------
    >>> import numpy as np
    >>> order, keys = radix_argsort(np.array([5, 1, 5, 0]), 5, np.int32)
    >>> order.tolist(), keys.tolist()
    ([3, 1, 0, 2], [0, 1, 5, 5])
    """
    n = key.shape[0]
    bits = max(int(max_key).bit_length(), 1)
    passes = -(-bits // DIGIT_BITS)
    digit = -(-bits // passes)
    mask = (1 << digit) - 1
    threads = max(1, min(threads or nb.get_num_threads(), n // (1 << 15) or 1))
    cuts = [n * c // threads for c in range(threads + 1)]
    chunks = range(threads)
    src_key, src_rows = key, np.arange(n, dtype=order_dtype)
    dst_key, dst_rows = np.empty_like(key), np.empty_like(src_rows)
    for p in range(passes):
        shift = np.int64(p * digit)
        counts = np.zeros((threads, mask + 1), dtype=np.int64)
        map_dynamic(lambda c: _count(src_key, shift, np.int64(mask), counts, c, cuts[c],
                                     cuts[c + 1]), chunks, threads)
        # chunk c's places for digit v: every key of a lower digit, then the
        # keys of digit v in the chunks before c
        flat = counts.T.ravel()
        place = (np.cumsum(flat) - flat).reshape(mask + 1, threads).T.copy()
        map_dynamic(lambda c: _move(src_key, src_rows, shift, np.int64(mask), place, c, dst_key,
                                    dst_rows, cuts[c], cuts[c + 1]), chunks, threads)
        if p == 0:
            src_key, dst_key = dst_key, np.empty_like(key)   # never write the caller's keys
        else:
            src_key, dst_key = dst_key, src_key
        src_rows, dst_rows = dst_rows, src_rows
    return src_rows, src_key
