"""Haversine's points on the host threads: their range check and unit vectors.

``(cos lat cos lon, cos lat sin lon, sin lat)`` for each row, with the C
library's ``cos`` and ``sin`` (``math``; within 1 ulp, so 10 u on a chord,
inside the 32 u the filter's margin books: docs/exactness.md),
by sequential nogil kernels over blocks of rows (``schedule.run_blocks``).
O(n), memory the (n, 3) output.  The GPU's, for DBSCAN's grid path:
``skyjoin.simjoin.gpu.unit_vectors``.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..schedule import JIT, run_blocks

__all__ = ["unit_vectors", "first_outside"]


@nb.njit(**JIT)
def _rows(X, out, b0, b1):
    for i in range(b0, b1):
        c = math.cos(X[i, 0])
        out[i, 0] = c * math.cos(X[i, 1])
        out[i, 1] = c * math.sin(X[i, 1])
        out[i, 2] = math.sin(X[i, 0])


def unit_vectors(X: np.ndarray) -> np.ndarray:
    """The (n, 3) unit vectors of the (n, 2) float64 rows (lat, lon) in radians."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    out = np.empty((X.shape[0], 3))
    if X.shape[0]:
        run_blocks(_rows, (X, out), X.shape[0])
    return out


@nb.njit(**JIT)
def _outside_rows(X, lat_limit, lon_limit, flags, b0, b1):
    for i in range(b0, b1):
        flags[i] = abs(X[i, 0]) > lat_limit or abs(X[i, 1]) > lon_limit


def first_outside(X: np.ndarray, lat_limit: float, lon_limit: float) -> int:
    """The first row of the (n, 2) float64 rows whose |lat| passes
    ``lat_limit`` or |lon| ``lon_limit``, or -1.  O(n) on the host
    threads, plus n bytes of flags."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    flags = np.zeros(X.shape[0], dtype=np.bool_)
    if X.shape[0]:
        run_blocks(_outside_rows, (X, lat_limit, lon_limit, flags), X.shape[0])
    return int(np.argmax(flags)) if flags.any() else -1

