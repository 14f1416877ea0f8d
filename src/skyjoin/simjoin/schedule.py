"""Dynamic scheduling of the CPU join's kernels on a pool of threads.

The kernels are sequential and nogil; the host runs them on blocks of
cells on the process's host pool (``_core.pool.map_dynamic``): dynamic
scheduling, since dense cells cost far more than sparse ones, and no
parfor to compile.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .._core.config import NUMBA_CACHE
from .._core.pool import map_dynamic

__all__ = ["JIT", "INNER", "run_blocks", "cell_blocks"]

#: Options of every CPU join kernel: cached, and nogil (the kernels run on
#: a pool of threads, ``run_blocks``).
JIT = dict(cache=NUMBA_CACHE, nogil=True)
#: Options of a kernel called only from other kernels: no wrappers for calls
#: from Python or C (their code is compiled for nothing), and not cached on
#: its own (its callers' cache entries hold its code).
INNER = dict(nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)


def run_blocks(kernel, args, weight):
    """Run ``kernel(*args, b0, b1)`` over blocks [b0, b1) of items on a pool
    of threads (dynamic scheduling: dense cells cost far more than sparse
    ones).  ``weight`` is the cumulative work estimate (length items + 1,
    e.g. ``cell_start``); blocks get similar shares of it, and there are
    many more blocks than threads.  An int ``weight`` is the number of
    items, all of the same cost.  The kernels are nogil and sequential,
    so no parfor is compiled.

    Cost: O(blocks log items) to cut the blocks, then the kernels' work on
    ``numba.get_num_threads()`` threads."""
    uniform = isinstance(weight, (int, np.integer))
    n_items = int(weight) if uniform else weight.shape[0] - 1
    if n_items <= 0:
        return
    threads = max(1, nb.get_num_threads())
    # items of equal cost need no more blocks than threads
    n_blocks = max(1, min(n_items, (1 if uniform else 64) * threads))
    total = n_items if uniform else int(weight[-1])
    if uniform and n_blocks > 1:
        bounds = np.unique(np.linspace(0, n_items, n_blocks + 1).astype(np.int64))
    elif total > 0 and n_blocks > 1:
        cuts = np.searchsorted(weight, np.linspace(0, total, n_blocks + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], cuts, [n_items]]))
    else:
        bounds = np.array([0, n_items])
    spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    map_dynamic(lambda sp: kernel(*args, sp[0], sp[1]), spans, threads)


def cell_blocks(cell_start, n_blocks):
    """Split the cells into about n_blocks runs of similar point counts."""
    n = int(cell_start[-1])
    targets = np.linspace(0, n, n_blocks + 1)[1:-1]
    cuts = np.searchsorted(cell_start, targets)
    bounds = np.unique(np.concatenate([[0], cuts, [cell_start.shape[0] - 1]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
