"""``components_`` of the DBSCAN estimator: the core samples' rows of X.

Gathered where X lies and returned where the results live (the plan's
``on_device``): a host gather in parallel for host points, the device
primitives' gather (``_core.device_prims.take``, no CuPy routine to
compile) for device points of 4- or 8-byte items in C order, CuPy's
indexing for others.
"""

from __future__ import annotations

import numpy as np

from .._core import device_prims as dp
from .._core.device import cupy, is_device_array
from ..index.grid_kernels import gather_rows

__all__ = ["core_rows"]


def core_rows(X, core, on_device: bool):
    """The rows ``X[core]``, gathered where X lies, returned where the results
    live (CuPy with ``on_device``).  Host input with ``on_device`` copies the
    core indices to the host and the rows back; device input without it
    copies the rows to the host.  O(|core| d)."""
    n_core = int(core.shape[0])
    if is_device_array(X):
        cp = cupy()
        if not n_core:
            C = cp.empty((0, X.shape[1]))
        elif X.flags.c_contiguous and X.dtype.itemsize in (4, 8):
            C = dp.take(cp, X, cp.asarray(core))
        else:
            C = X[cp.asarray(core)]
        return C if on_device else cp.asnumpy(C)
    if n_core:
        C = _take_rows(X, cupy().asnumpy(core) if is_device_array(core) else core)
    else:
        C = np.empty((0, X.shape[1]))
    return cupy().asarray(C) if on_device else C


def _take_rows(X, idx):
    """``X[idx]`` as a new array; a C-contiguous float array is gathered in
    parallel (``gather_rows``; see docs/decisions/dbscan-fit-path.md)."""
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.flags.c_contiguous \
            and X.dtype in (np.float64, np.float32):
        return gather_rows(X, np.asarray(idx, dtype=np.int64))
    return X[idx]
