"""The neighbour counts of a distributed join as a Dask array built on the workers.

Each partition's task leaves (owned ids ascending, counts) on its worker.
Chunk r of the array covers the consecutive rows ``[lo_r, hi_r)``
(:func:`row_ranges`); its task receives from every partition only the
owned rows in that range (:func:`rows_in_range`, run where the partition's
result lies) and scatters them into place (:func:`assemble_chunk`).  So
every count crosses the network at most once, O(n) bytes in all, and none
goes through the driver: the driver holds the futures of the chunks, which
the array keeps alive.  Tasks: P x R pieces and R chunks for P partitions
and R chunks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import dask.array
    import distributed

__all__ = ["CHUNK_ROWS", "row_ranges", "rows_in_range", "assemble_chunk", "partition_counts",
           "whole_counts", "host_counts"]

#: Most rows of a chunk (int64 counts: 128 MiB).
CHUNK_ROWS = 1 << 24


def row_ranges(n: int, n_partitions: int) -> list[tuple[int, int]]:
    """The rows ``[lo, hi)`` of each chunk: consecutive ranges of ``ceil(n / P)``
    rows, at most :data:`CHUNK_ROWS`; one empty range for n = 0."""
    size = max(1, min(CHUNK_ROWS, -(-n // max(1, n_partitions))))
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)] or [(0, 0)]


def rows_in_range(result, lo: int, hi: int):
    """The (ids, counts) of a partition's result whose ids are in ``[lo, hi)``
    (ids ascending): two binary searches and two views, O(log m)."""
    ids, counts = result
    a, b = np.searchsorted(ids, [lo, hi])
    return ids[a:b], counts[a:b]


def assemble_chunk(lo: int, hi: int, *pieces) -> np.ndarray:
    """The int64 counts of rows ``[lo, hi)`` from every partition's piece of them.

    Raises
    ------
    RuntimeError
        A row of the range received no count or more than one (every point
        has exactly one owning partition; never expected).

    Notes
    -----
    O(hi - lo) time and memory.
    """
    out = np.full(hi - lo, -1, dtype=np.int64)
    seen = 0
    for ids, c in pieces:
        out[ids - lo] = c
        seen += len(ids)
    if seen != hi - lo or (out < 0).any():
        raise RuntimeError(f"the partitions gave {seen} counts for the {hi - lo} rows "
                           f"[{lo}, {hi}), not one each")
    return out


def _slice(counts: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Rows ``[lo, hi)`` of a whole int64 counts array: a view, O(1), not an O(n)
    copy (the chunks together cover the array, which they keep alive)."""
    return counts[lo:hi]


def _as_array(futures, ranges) -> dask.array.Array:
    """A Dask array over the chunk futures, once they are all computed.

    Waits without bringing data to the driver; the first failed task's error
    is raised here (``CancelledError`` when their input was lost).
    """
    import dask.array as da
    from distributed import wait

    wait(futures)
    for f in futures:
        if f.status != "finished":
            f.result()     # raises the task's error
    return da.concatenate([da.from_delayed(f, shape=(hi - lo,), dtype=np.int64)
                           for f, (lo, hi) in zip(futures, ranges)])


def partition_counts(client: distributed.Client, results, n: int, token: str,
                     retries: int) -> dask.array.Array:
    """The counts array from the futures of the partitions' (owned ids, counts).

    Chunks of :func:`row_ranges` (n, number of partitions), each built on a
    worker (module docstring); returns once every chunk is computed.
    """
    ranges = row_ranges(n, len(results))
    chunks = []
    for r, (lo, hi) in enumerate(ranges):
        pieces = [client.submit(rows_in_range, f, lo, hi, retries=retries,
                                key=f"{token}-counts-piece-{p}-{r}")
                  for p, f in enumerate(results)]
        chunks.append(client.submit(assemble_chunk, lo, hi, *pieces, retries=retries,
                                    key=f"{token}-counts-{r}"))
    return _as_array(chunks, ranges)


def whole_counts(client: distributed.Client, result, n: int, token: str,
                 retries: int) -> dask.array.Array:
    """The counts array from the future of one task's whole counts: that future
    as the one chunk, or cut on its worker into :func:`row_ranges` (n, 1)."""
    ranges = row_ranges(n, 1)
    chunks = [result] if len(ranges) == 1 else [
        client.submit(_slice, result, lo, hi, retries=retries, key=f"{token}-counts-{r}")
        for r, (lo, hi) in enumerate(ranges)]
    return _as_array(chunks, ranges)


def host_counts(client: distributed.Client, counts: np.ndarray,
                n_partitions: int) -> dask.array.Array:
    """The counts array over an array in this process's memory, for workers that
    are threads of this process: chunks of :func:`row_ranges`, each a view
    of ``counts`` scattered to a worker (spread over them, not hashed), so
    the workers read the chunks in place and the graphs of later
    computations hold futures, not the data.  O(chunks).
    ``dask.array.from_array`` took seconds on such an array, and views
    held in the graph itself made every computation on the array send a
    graph of the array's size (docs/decisions/distributed-worker-threads.md)."""
    ranges = row_ranges(len(counts), n_partitions)
    futures = client.scatter([counts[lo:hi] for lo, hi in ranges], hash=False)
    return _as_array(futures, ranges)
