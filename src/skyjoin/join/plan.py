"""Batching plans for the GPU join: how many pairs each batch may produce.

Two schemes (issue 3):

* **count-then-fill** (the default): a first kernel counts the neighbours of
  every query exactly; an exclusive scan gives the CSR ``indptr``; batches are
  then runs of consecutive rows whose pairs fit one result buffer, and the
  second kernel writes each row's neighbours contiguously at ``indptr[row]``.
  No buffer can overflow (the kernels still check and flag it).
* the papers' **sampled estimate** (Gowanlock et al., HYBRID-DBSCAN §6; Gallet &
  Gowanlock 2019 §II-C2): count the neighbours of a strided sample of a
  fraction f of the queries, scale by 1/f, and take
  n_b = ceil((1 + gamma) a_b / b_b) batches (Eq. 1).  Used here to size
  buffers before the count is known and reported by the benchmarks next to the
  exact count.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["plan_row_batches", "batch_capacity", "estimate_batches", "DEFAULT_BATCH_PAIRS"]

#: Default result buffer per batch: 2^27 pairs (512 MiB of int32 column ids).
DEFAULT_BATCH_PAIRS = 1 << 27


def plan_row_batches(indptr: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """Split rows into runs of consecutive rows holding at most ``cap`` pairs each.

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_rows + 1,)
        The CSR row pointer (exact counts, count-then-fill).
    cap : int
        Pairs per batch; must be at least the longest row.

    Returns
    -------
    list of (row_start, row_stop)
        Covering all rows in order; rows with no pairs are included.

    Raises
    ------
    ValueError
        If a single row holds more than ``cap`` pairs.
    """
    n = len(indptr) - 1
    if n <= 0:
        return []
    cap = int(cap)
    longest = int(np.max(np.diff(indptr))) if n else 0
    if longest > cap:
        raise ValueError(f"a row holds {longest} pairs, more than the batch capacity {cap}")
    out = []
    r0 = 0
    total = int(indptr[-1])
    if total <= cap:
        return [(0, n)]
    while r0 < n:
        limit = int(indptr[r0]) + cap
        r1 = int(np.searchsorted(indptr, limit, side="right")) - 1
        r1 = max(min(r1, n), r0 + 1)
        out.append((r0, r1))
        r0 = r1
    return out


def batch_capacity(total_pairs: int, longest_row: int, batch_pairs: int | None,
                   free_bytes: int, bytes_per_pair: int) -> int:
    """Pairs per batch buffer: asked for, else a default bounded by free device memory.

    The capacity is never below the longest row (a row is never split) and
    never above the total.  Raises MemoryError if even the longest row cannot
    be buffered within ``free_bytes``.
    """
    if batch_pairs is not None:
        if int(batch_pairs) < 1:
            raise ValueError(f"batch_pairs must be >= 1, got {batch_pairs}")
        cap = int(batch_pairs)
    else:
        cap = DEFAULT_BATCH_PAIRS
    by_memory = max(0, int(free_bytes)) // max(1, bytes_per_pair)
    cap = min(cap, by_memory)
    cap = min(cap, max(total_pairs, 1))
    if cap < longest_row:
        if longest_row * bytes_per_pair > free_bytes:
            raise MemoryError(
                f"one row has {longest_row} neighbours, which needs "
                f"{longest_row * bytes_per_pair} bytes of device buffers; only {free_bytes} are allowed")
        cap = longest_row
    return max(cap, 1)


def estimate_batches(sample_pairs: int, fraction: float, buffer_pairs: int,
                     gamma: float = 0.05) -> tuple[int, int]:
    """The papers' sampled result-size estimate and batch count (HYBRID-DBSCAN §6, Eq. 1).

    Parameters
    ----------
    sample_pairs : int
        Pairs found for the sampled queries (e_b).
    fraction : float
        Fraction f of the queries sampled (0.01 in the papers).
    buffer_pairs : int
        Result buffer per batch (b_b).
    gamma : float
        Overestimation factor.

    Returns
    -------
    (a_b, n_b) : estimated total pairs and number of batches
    """
    a_b = int(math.ceil(sample_pairs / fraction))
    n_b = max(1, int(math.ceil((1.0 + gamma) * a_b / max(1, buffer_pairs))))
    return a_b, n_b
