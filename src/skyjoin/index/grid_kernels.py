"""Numba kernels behind ``skyjoin.index.grid.build_grid``.

The passes over every point are sequential nogil kernels over a block of
rows, run on blocks by the host pool (``_blocks``), not parfors: a parfor
costs several times its body to compile, on the first call of every
operator that builds a grid.
"""

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from .._core.pool import map_dynamic
from .._core.validate import all_finite


def _blocks(kernel, args, n, min_block=1 << 16):
    """``kernel(*args, b0, b1)`` over blocks [b0, b1) of range(n), one per
    Numba thread (``numba.get_num_threads()``) and at least ``min_block``
    items each, on the host pool (inline for one block)."""
    n_blocks = max(1, min(nb.get_num_threads(), n // min_block))
    cuts = [n * b // n_blocks for b in range(n_blocks + 1)]
    map_dynamic(lambda b: kernel(*args, cuts[b], cuts[b + 1]), range(n_blocks), n_blocks)


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def _raw_coords_block(X, j, lo, side, out, b0, b1):
    for i in range(b0, b1):
        out[i] = np.int64(np.floor((np.float64(X[i, j]) - lo) / side))


def raw_coords(X, j, lo, side, out):
    """Cell coordinate floor((x_j - lo) / side) of every point (§IV-B), into
    ``out`` (int64).  O(n), on the host pool."""
    _blocks(_raw_coords_block, (X, np.int64(j), np.float64(lo), np.float64(side), out),
            X.shape[0])


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def column_bounds(X, k):
    """Minimum and maximum of each of the first k columns, as float64, in one
    pass (NumPy's axis-0 reduction of a strided (n, k) view is far slower:
    docs/design.md, "Bounds in one pass").
    X has at least one row.  Serial, and compiled in a fraction of a second
    (it is on the join's first call); it releases the GIL, so callers with
    many rows run it on row chunks in threads (``parallel_column_bounds``)."""
    lo = np.empty(k)
    hi = np.empty(k)
    for j in range(k):
        lo[j] = np.float64(X[0, j])
        hi[j] = lo[j]
    for i in range(1, X.shape[0]):
        for j in range(k):
            v = np.float64(X[i, j])
            if v < lo[j]:
                lo[j] = v
            if v > hi[j]:
                hi[j] = v
    return lo, hi


def parallel_column_bounds(X, k, chunk_rows: int = 1 << 20, check_finite: bool = False):
    """``column_bounds`` over row chunks in threads, combined (X has at least one row).

    With ``check_finite`` each chunk's thread also tests that all its values
    are finite (``validate.all_finite``; NumPy releases the GIL), and
    (lo, hi, all_finite) comes back: one parallel pass where ``check_points``
    then the bounds took two, the first one serial.  Otherwise (lo, hi).
    O(n k) work over the threads.
    """
    n = X.shape[0]

    def part(a):
        rows = X[a:a + chunk_rows]
        return column_bounds(rows, k) + ((all_finite(rows),) if check_finite else ())

    if n <= chunk_rows:
        return part(0)
    cuts = range(0, n, chunk_rows)
    parts = map_dynamic(part, cuts, len(cuts))
    out = (np.min([p[0] for p in parts], axis=0), np.max([p[1] for p in parts], axis=0))
    return out + ((all(p[2] for p in parts),) if check_finite else ())


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def _horner_block(lid, rank, radix, b0, b1):
    for i in range(b0, b1):
        lid[i] = lid[i] * radix + rank[i]


def horner_step(lid, rank, radix):
    """lid = lid * radix + rank: append one dimension to the linear ids.
    O(n), on the host pool."""
    _blocks(_horner_block, (lid, rank, np.int64(radix)), lid.shape[0])


@nb.njit(cache=NUMBA_CACHE)
def counting_sort(key, counts, order_zero):
    """Stable counting sort of the points by cell key, given the keys' histogram.

    ``counts`` (``counts[v + 1]`` points have key v: ``np.bincount``, or
    counted while computing the keys) becomes, in place, ``point_start``: cell v holds the sorted points
    ``point_start[v]:point_start[v + 1]`` (length volume + 1, empty cells
    included).  Returns (order, point_start), ``order[p]`` the row of sorted
    point p (dtype of ``order_zero``).  O(n + volume).
    """
    n = key.shape[0]
    point_start = counts
    for v in range(point_start.shape[0] - 1):
        point_start[v + 1] += point_start[v]
    pos = point_start[:-1].copy()
    order = np.empty(n, dtype=type(order_zero))
    for i in range(n):
        v = key[i]
        order[pos[v]] = i
        pos[v] += 1
    return order, point_start


def _take_block(X, order, out, b0, b1):
    # NumPy's take releases the GIL; "clip" writes into ``out`` directly
    # ("raise" buffers), and the ids are valid rows
    np.take(X, order[b0:b1], axis=0, out=out[b0:b1], mode="clip")


def gather_rows(X, order):
    """X[order] into a new C-contiguous array (order: valid row ids).
    O(m d), NumPy's take on blocks of rows on the host pool: no kernel to
    compile, and faster than a Numba loop over the rows."""
    out = np.empty((order.shape[0], X.shape[1]), dtype=X.dtype)
    _blocks(_take_block, (X, order, out), order.shape[0])
    return out
