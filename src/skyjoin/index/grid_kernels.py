"""Numba kernels and NumPy passes behind ``skyjoin.index.grid.build_grid``.

The passes over every point run on blocks of rows on the host pool
(``_blocks``), not as parfors: a parfor costs several times its body to
compile, on the first call of every operator that builds a grid.  The
element-wise passes (cell coordinates, the Horner step of the ids) are
NumPy ufuncs, which release the GIL: no kernel to compile at all.
"""

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from .._core.pool import map_dynamic
from .._core.validate import all_finite


#: rows per NumPy pass inside a block (its float64 temporary stays in cache)
_CHUNK = 1 << 14


def _blocks(kernel, args, n, min_block=1 << 16):
    """``kernel(*args, b0, b1)`` over blocks [b0, b1) of range(n), one per
    Numba thread (``numba.get_num_threads()``) and at least ``min_block``
    items each, on the host pool (inline for one block)."""
    n_blocks = max(1, min(nb.get_num_threads(), n // min_block))
    cuts = [n * b // n_blocks for b in range(n_blocks + 1)]
    map_dynamic(lambda b: kernel(*args, cuts[b], cuts[b + 1]), range(n_blocks), n_blocks)


def _raw_coords_block(X, j, lo, side, out, b0, b1):
    # NumPy's ufuncs release the GIL; chunks keep the temporary in cache.
    # The same operations as a loop, element by element: float64(x) - lo,
    # divided by side, floored, truncated to int64
    for a in range(b0, b1, _CHUNK):
        b = min(a + _CHUNK, b1)
        v = np.subtract(X[a:b, j], lo, dtype=np.float64)
        v /= side
        np.floor(v, out=v)
        out[a:b] = v


def raw_coords(X, j, lo, side, out):
    """Cell coordinate floor((x_j - lo) / side) of every point (§IV-B), into
    ``out`` (int64).  O(n), NumPy on blocks on the host pool: no kernel to
    compile on an operator's first call."""
    _blocks(_raw_coords_block, (X, np.int64(j), np.float64(lo), np.float64(side), out),
            X.shape[0])


@nb.njit(cache=NUMBA_CACHE, nogil=True)
def _column_bounds_into(X, lo, hi):
    for j in range(lo.shape[0]):
        lo[j] = np.float64(X[0, j])
        hi[j] = lo[j]
    for i in range(1, X.shape[0]):
        for j in range(lo.shape[0]):
            v = np.float64(X[i, j])
            if v < lo[j]:
                lo[j] = v
            if v > hi[j]:
                hi[j] = v


def column_bounds(X, k):
    """Minimum and maximum of each of the first k columns, as float64, in one
    pass (NumPy's axis-0 reduction of a strided (n, k) view is far slower:
    docs/decisions/core-host-passes.md).
    X has at least one row.  Serial, and compiled in a fraction of a second
    (it is on the join's first call: the kernel fills arrays made here, as
    allocating and returning them would compile more); it releases the GIL,
    so callers with many rows run it on row chunks in threads
    (``parallel_column_bounds``)."""
    lo = np.empty(k)
    hi = np.empty(k)
    _column_bounds_into(X, lo, hi)
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


def _horner_block(lid, rank, radix, b0, b1):
    part = lid[b0:b1]
    part *= radix
    part += rank[b0:b1]


def horner_step(lid, rank, radix):
    """lid = lid * radix + rank: append one dimension to the linear ids.
    O(n), NumPy on blocks on the host pool (no kernel to compile)."""
    _blocks(_horner_block, (lid, rank, np.int64(radix)), lid.shape[0])


@nb.njit(cache=NUMBA_CACHE)
def _place_by_key(key, pos, order):
    for i in range(key.shape[0]):
        v = key[i]
        order[pos[v]] = i
        pos[v] += 1


def counting_sort(key, counts, order_zero):
    """Stable counting sort of the points by cell key, given the keys' histogram.

    ``counts`` (``counts[v + 1]`` points have key v: ``np.bincount``, or
    counted while computing the keys) becomes, in place, ``point_start``: cell v holds the sorted points
    ``point_start[v]:point_start[v + 1]`` (length volume + 1, empty cells
    included).  Returns (order, point_start), ``order[p]`` the row of sorted
    point p (dtype of ``order_zero``).  O(n + volume): NumPy's running sum,
    then one kernel pass that places the points (it allocates nothing and
    returns nothing, which keeps its first compile small).
    """
    point_start = np.cumsum(counts, out=counts)
    pos = point_start[:-1].copy()
    order = np.empty(key.shape[0], dtype=type(order_zero))
    _place_by_key(key, pos, order)
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
