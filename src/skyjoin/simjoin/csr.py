"""CSR helpers of the CPU join: reordered rows back to caller order, scans,
row sorts, the row ids of pairs, and the release of free heap pages before
a large output.

Cost: O(n) per scatter or scan; the row sort is O(m log m) per row of m
entries (insertion sort for short rows, heap sort otherwise), rows in
parallel.
"""

from __future__ import annotations

import ctypes

import numba as nb
import numpy as np

from .schedule import JIT, run_blocks


@nb.njit(**JIT)
def _scatter_block(order, values_reordered, out, b0, b1):
    """out[order[r]] = values_reordered[r] for r in [b0, b1)."""
    for r in range(b0, b1):
        out[order[r]] = values_reordered[r]


def to_caller_order(order, values_reordered, out):
    """out[order[r]] = values_reordered[r] (reordered rows back to caller
    order), in blocks on the thread pool (no prange kernel: its compilation
    would cost more than the pass)."""
    run_blocks(_scatter_block, (order, values_reordered, out), order.shape[0])


@nb.njit(inline="always", **JIT)
def sort_range(a, lo, hi):
    """Sort a[lo:hi] in place: insertion sort for short ranges, else an
    in-place heapsort (small code: NumPy's sort adds seconds of compilation
    to every kernel that calls it).  One function with one sift-down loop:
    each helper inlined into a kernel costs compile time of its own."""
    n = hi - lo
    if n <= 24:
        for i in range(lo + 1, hi):
            v = a[i]
            j = i - 1
            while j >= lo and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
        return
    # heapsort: first sift the roots n // 2 - 1 .. 0 down into a max-heap
    # of size n, then move the top to the end and sift the new root down
    start = n // 2
    size = n
    while True:
        if start > 0:
            start -= 1
        else:
            size -= 1
            if size == 0:
                break
            v = a[lo]
            a[lo] = a[lo + size]
            a[lo + size] = v
        root = start
        v = a[lo + root]
        while True:
            child = 2 * root + 1
            if child >= size:
                break
            if child + 1 < size and a[lo + child + 1] > a[lo + child]:
                child += 1
            if a[lo + child] <= v:
                break
            a[lo + root] = a[lo + child]
            root = child
        a[lo + root] = v


@nb.njit(**JIT)
def _sort_rows_block(indptr, indices, b0, b1):
    """Sort the columns of CSR rows [b0, b1) in place (sequential, nogil)."""
    for i in range(b0, b1):
        sort_range(indices, indptr[i], indptr[i + 1])


def sort_csr_rows(indptr, indices):
    """Sort the columns of every CSR row in place: blocks of rows of
    similar sizes on the pool of threads (``schedule.run_blocks``, no
    parfor to compile).  O(m log m) per row of m entries."""
    run_blocks(_sort_rows_block, (indptr, indices), indptr)


def exclusive_scan_into(counts, indptr):
    """indptr[0] = 0, indptr[i + 1] = sum(counts[:i + 1]); returns the total.
    NumPy's cumsum (sequential, O(n)): no kernel to compile."""
    indptr[0] = 0
    np.cumsum(counts, out=indptr[1:])
    return int(indptr[-1])


@nb.njit(**JIT)
def pair_rows(indptr, first_row, row_ids, start, out):
    """The row ids of a run of CSR pairs: ``out[k]`` is the id of the row r that
    holds pair ``start + k`` (pairs counted from ``indptr[0]``: ``indptr`` may
    be a slice of a larger table's): ``first_row + r``, or ``row_ids[r]`` when
    ``row_ids`` (int64) is not empty.  ``out`` may be a strided view (a column
    of an (m, 2) block).

    The expansion that ``np.repeat(rows, counts)`` makes, without its int64
    temporary and into any integer dtype.  O(log rows + len(out)), one
    thread, nogil."""
    m = out.shape[0]
    if m == 0:
        return
    p = indptr[0] + start
    r = np.searchsorted(indptr, p, side="right") - 1
    k = 0
    last = indptr.shape[0] - 1
    named = row_ids.shape[0] > 0
    while k < m and r < last:
        end = min(indptr[r + 1] - p, m)
        v = row_ids[r] if named else first_row + r
        while k < end:
            out[k] = v
            k += 1
        r += 1


# ---------------------------------------------------------------------------
# Host-side orchestration


def indptr_from_counts(g_rows, counts_r):
    """Caller-order CSR indptr from the counts of the reordered rows.
    Returns (indptr, total)."""
    n = g_rows.n_points
    indptr = np.empty(n + 1, dtype=np.int64)
    indptr[0] = 0
    to_caller_order(g_rows.order, counts_r, indptr[1:])
    np.cumsum(indptr[1:], out=indptr[1:])
    return indptr, int(indptr[-1])


_LIBC_TRIM = []


def release_free_memory():
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``)
    before a large output is allocated.  Temporaries of a few MB come from
    the heap once glibc has raised its mmap threshold, and stay resident
    after they are freed; trimming keeps the peak at what is alive.  A
    no-op elsewhere."""
    if not _LIBC_TRIM:
        try:
            fn = ctypes.CDLL("libc.so.6").malloc_trim
            fn.argtypes = [ctypes.c_size_t]
            _LIBC_TRIM.append(fn)
        except (OSError, AttributeError):
            _LIBC_TRIM.append(None)
    if _LIBC_TRIM[0] is not None:
        _LIBC_TRIM[0](0)
