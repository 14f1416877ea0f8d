"""How a distributed join's or DBSCAN's input reaches the workers (rule 3 of :mod:`.plan`).

Scattered as blocks, or read in place by the GPU worker threads of this
process, summarised (bounds and a sample, for the partition plan) or not.
The rule is :func:`load_blocks`; the blocks themselves are
:mod:`.blocks`' and :mod:`.gpu_slices`'.
"""

from __future__ import annotations

import os

import numpy as np

from . import gpu_slices
from .blocks import as_blocks, is_dask_array, is_dask_frame
from .plan import default_partitions
from .worker_threads import worker_threads

__all__ = ["load_blocks"]


def load_blocks(client, X, n_partitions, *, shared: bool = False, token: str | None = None,
                writes_parts: bool = False, **kw):
    """Rule 3: the input as blocks; not summarised when it will be one partition anyway.

    A NumPy array whose default plan (or ``n_partitions``) is one partition
    skips the bounds and sample, which only a plan of several needs.  With
    ``shared`` (rule 1 holds), a non-empty NumPy array of several partitions
    is not scattered: it goes to the GPU workers as one slice each, checked
    and summarised there (:mod:`.gpu_slices`, under the call's ``token``),
    and stays readable in place (``Blocks.array``).
    """
    single = False
    if isinstance(X, np.ndarray) and X.ndim == 2:
        if n_partitions is None:
            single = default_partitions(client, X.shape[0], shared, writes_parts) == 1
        else:
            single = isinstance(n_partitions, (int, np.integer)) and \
                not isinstance(n_partitions, bool) and int(n_partitions) == 1
    array_input = not isinstance(X, (str, os.PathLike)) and not is_dask_array(X) \
        and not is_dask_frame(X)
    # the GPU partitions name their columns with int32 ids
    in_place = shared and array_input and not single and np.ndim(X) >= 1 \
        and np.shape(X)[0] < 2**31
    if in_place and token is not None and np.shape(X)[0] > 0:
        return gpu_slices.load(worker_threads(client), X, token, dtype=kw["dtype"],
                               columns=kw.get("columns"))
    # one partition runs the single-machine operator on a worker, which checks
    # the points itself: no second pass over them here
    return as_blocks(client, X, summarise=not single, scatter=not in_place, check=not single,
                     **kw)
