"""A tiled brute-force epsilon join in CuPy: what a GPU user would write by hand.

No index: every query tile is compared with every data tile by broadcasting,
with the same exact test as the library (sum over k of (x_k - y_k)^2 <= eps^2
in float64, terms in dimension order).  O(n^2) work, so the benchmarks run it
on a sample of the queries and scale the time (the sample is stated).
"""

from __future__ import annotations

import numpy as np

__all__ = ["tiled_bruteforce_counts", "tiled_bruteforce_pairs"]


def _tiles(n: int, tile: int):
    """Start/stop of consecutive tiles."""
    for a in range(0, n, tile):
        yield a, min(n, a + tile)


def _within(Q, X, eps: float, tile_q: int, tile_x: int):
    """For every (query tile, data tile): its starts and the boolean matrix
    of pairs within eps (a tile_q x tile_x float64 matrix at a time).

    The exact test of the library: sum over k of (q_k - x_k)^2 <= eps^2 in
    float64, terms in dimension order.  O(m n d) work.
    """
    import cupy as cp

    Qd = cp.asarray(Q, dtype=cp.float64)
    Xd = cp.asarray(X, dtype=cp.float64)
    e2 = float(eps) * float(eps)
    for qa, qb in _tiles(Qd.shape[0], tile_q):
        q = Qd[qa:qb]
        for xa, xb in _tiles(Xd.shape[0], tile_x):
            x = Xd[xa:xb]
            s = cp.zeros((qb - qa, xb - xa), dtype=cp.float64)
            for k in range(Qd.shape[1]):
                t = q[:, k:k + 1] - x[None, :, k]
                s += t * t
            yield qa, xa, s <= e2


def tiled_bruteforce_counts(Q, X, eps: float, *, tile_q: int = 256, tile_x: int = 1 << 20):
    """Neighbour counts of each query (self included) by tiled brute force on the GPU.

    Parameters
    ----------
    Q : array_like (m, d)
        Query points (host or device).
    X : array_like (n, d)
        Data points.
    eps : float
    tile_q, tile_x : int
        Tile sizes (a tile_q x tile_x float64 matrix is materialised).

    Returns
    -------
    numpy.ndarray of int64, shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>> tiled_bruteforce_counts(np.zeros((2, 2)), np.zeros((3, 2)), 1.0)  # doctest: +SKIP
    array([3, 3])
    """
    import cupy as cp

    out = cp.zeros(len(Q), dtype=cp.int64)
    for qa, _, within in _within(Q, X, eps, tile_q, tile_x):
        out[qa:qa + within.shape[0]] += within.sum(axis=1)
    return cp.asnumpy(out)


def tiled_bruteforce_pairs(Q, X, eps: float, *, tile_q: int = 256, tile_x: int = 1 << 20):
    """All (query, data) pairs within eps by tiled brute force (int64 (p, 2), host).

    Examples
    --------
    >>> import numpy as np
    >>> tiled_bruteforce_pairs(np.zeros((1, 2)), np.zeros((2, 2)), 1.0)  # doctest: +SKIP
    array([[0, 0],
           [0, 1]])
    """
    import cupy as cp

    parts = []
    for qa, xa, within in _within(Q, X, eps, tile_q, tile_x):
        i, j = cp.nonzero(within)
        parts.append(cp.stack([i + qa, j + xa], axis=1).get())
    if not parts:
        return np.zeros((0, 2), dtype=np.int64)
    return np.concatenate(parts).astype(np.int64)
