"""GPU brute-force peers of the join benchmarks: what a GPU user writes by hand.

* :func:`tiled_bruteforce_counts`, :func:`tiled_bruteforce_pairs`: a tiled
  brute force in CuPy with the library's exact test (sum over k of
  (x_k - y_k)^2 <= eps^2 in float64, terms in dimension order); O(n^2 d)
  work, so the benchmarks run it on a sample of the queries and scale the
  time (the sample is stated).
* :func:`torch_tiled_counts`: the chunked PyTorch brute force of the
  high-dimensional cases, ``sq[i] + sq[j] - 2 * (block @ X.T) <= eps**2``,
  in float64 or float32 (TF32 off): inexact.
* :func:`fp64_gemm_bound`: the time of the n^2 d float64 multiply-adds of
  that brute force alone (tiled ``cupy.matmul``), a reference, not a peer.

CuPy and PyTorch are imported inside the functions.
"""

from __future__ import annotations

import time

import numpy as np

from .._core.validate import check_eps, check_points

__all__ = ["tiled_bruteforce_counts", "tiled_bruteforce_pairs", "torch_tiled_counts",
           "fp64_gemm_bound", "TORCH_DTYPES"]

#: The precisions of the PyTorch peer.
TORCH_DTYPES = ("float64", "float32")


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


def _check_block(block) -> int:
    if int(block) < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    return int(block)


def torch_tiled_counts(X, eps: float, dtype: str = "float64", block: int = 2048) -> int:
    """Ordered pairs within eps by a chunked brute force in PyTorch, as a user writes it.

    The points go to the GPU in ``dtype``; with ``sq`` their squared norms,
    each block of ``block`` rows counts ``sq[i] + sq[j] - 2 * (X[i] @ X.T)
    <= eps**2`` over all j (matmul with TF32 off:
    ``torch.backends.cuda.matmul.allow_tf32 = False`` during the call, then
    restored); the n self pairs are subtracted from the sum.

    **Inexact**: no error margin and no exact refine, so a pair whose
    distance is within the rounding of the expansion of eps can be counted
    wrongly (more so in float32), and a self pair is assumed to be counted.
    It is the peer users write instead of an exact join, not an oracle.
    O(n^2 d) work; O(block n) device memory for each of the expression's
    temporaries (several GB at n = 1M).

    Parameters
    ----------
    X : array_like, shape (n, d)
        The points (host).
    eps : float
        The join radius (> 0).
    dtype : {"float64", "float32"}
        Precision of the points, norms and products.
    block : int
        Rows per block.

    Returns
    -------
    int
        Ordered pairs (i, j), i != j, counted within eps.

    Raises
    ------
    ImportError
        Without PyTorch.
    RuntimeError
        When PyTorch sees no CUDA GPU.
    ValueError
        For bad points, eps, dtype or block.

    Examples
    --------
    >>> torch_tiled_counts([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]], 1.5)  # doctest: +SKIP
    2
    """
    X = check_points(X)
    eps = check_eps(eps)
    if dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype must be one of {TORCH_DTYPES}, got {dtype!r}")
    block = _check_block(block)
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA GPU (torch.cuda.is_available() is False)")
    n = X.shape[0]
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        Xt = torch.from_numpy(X).to("cuda").to(getattr(torch, dtype))
        sq = (Xt * Xt).sum(dim=1)
        e2 = eps * eps
        total = torch.zeros((), dtype=torch.int64, device="cuda")
        for a in range(0, n, block):
            b = min(n, a + block)
            d2 = sq[a:b, None] + sq[None, :] - 2 * (Xt[a:b] @ Xt.T)
            total += (d2 <= e2).sum()
        return int(total.item()) - n
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def fp64_gemm_bound(X, block: int = 2048) -> dict:
    """Time of the float64 products of the brute force alone: a reference bound.

    The points are copied to the GPU (not timed); then, timed, every block
    of ``block`` rows is multiplied by ``X.T`` with ``cupy.matmul`` in
    float64 into one reused buffer, the results discarded: the n^2 d
    multiply-adds of :func:`torch_tiled_counts` and of a brute-force join,
    in the same shapes, without norms, filter or output (cuBLAS runs
    float64 GEMM on the tensor cores where the GPU has them).  One block is
    multiplied first, untimed.  O(n^2 d) work, O(block n) device memory.

    Parameters
    ----------
    X : array_like, shape (n, d)
    block : int
        Rows per block.

    Returns
    -------
    dict
        ``seconds`` (the products, from a synchronised start to a
        synchronised end), ``multiply_adds`` (n^2 d) and ``fp64_tflops``
        (2 n^2 d / seconds / 1e12).

    Raises
    ------
    ImportError
        Without CuPy.
    ValueError
        For bad points or block.

    Examples
    --------
    >>> fp64_gemm_bound(np.ones((4096, 8)))["multiply_adds"]  # doctest: +SKIP
    134217728
    """
    X = check_points(X)
    block = _check_block(block)
    import cupy as cp

    n, d = X.shape
    Xd = cp.asarray(X)
    XT = Xd.T
    buf = cp.empty((min(block, n), n), dtype=cp.float64)
    if n:
        cp.matmul(Xd[:buf.shape[0]], XT, out=buf)
    stream = cp.cuda.get_current_stream()
    stream.synchronize()
    t0 = time.perf_counter()
    for a in range(0, n, block):
        b = min(n, a + block)
        cp.matmul(Xd[a:b], XT, out=buf[:b - a])
    stream.synchronize()
    seconds = time.perf_counter() - t0
    madds = n * n * d
    del buf, XT, Xd
    return {"seconds": seconds, "multiply_adds": madds,
            "fp64_tflops": 2 * madds / seconds / 1e12 if seconds > 0 else float("nan")}
