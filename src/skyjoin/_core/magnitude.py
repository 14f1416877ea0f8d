"""The largest coordinate magnitude of a point set, in parallel (Numba).

Loaded on first use by ``conditioning`` (``import skyjoin`` does not load
Numba).
"""

import numba as nb
import numpy as np

from .config import NUMBA_CACHE

__all__ = ["max_magnitude"]

_BLOCK = 1 << 16    # items per block of the parallel pass


@nb.njit(parallel=True, nogil=True, cache=NUMBA_CACHE)
def _block_maxima(a):
    n_blocks = (a.shape[0] + _BLOCK - 1) // _BLOCK
    out = np.zeros(n_blocks)
    for b in nb.prange(n_blocks):
        m = 0.0
        for k in range(b * _BLOCK, min(a.shape[0], (b + 1) * _BLOCK)):
            v = abs(np.float64(a[k]))
            if v > m:
                m = v
            elif v != v:          # NaN: no magnitude
                m = np.inf
        out[b] = m
    return out


def max_magnitude(X) -> float:
    """max |x| over a C-contiguous NumPy array (0.0 when empty; inf if a value
    is inf or NaN): one parallel pass with no temporary.  O(n d) over
    Numba's threads."""
    a = X.reshape(-1)
    return float(_block_maxima(a).max()) if a.size else 0.0
