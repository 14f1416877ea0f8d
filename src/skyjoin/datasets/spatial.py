"""Join and DBSCAN workloads: uniform, exponential (the papers' Expo sets), blobs,
manifold (a low-dimensional linear manifold in high dimensions)."""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike

from .checks import Seed, as_generator, check_box, check_nd, check_real, fill_doc

__all__ = ["uniform", "exponential", "blobs", "manifold"]



# --------------------------------------------------------------------------
# join / DBSCAN workloads
# --------------------------------------------------------------------------
@fill_doc
def uniform(n: int, d: int, low: float = 0.0, high: float = 100.0, seed: Seed = None) -> np.ndarray:
    """Points uniform in the box [low, high)^d.

    The recipe is pinned: the result equals
    ``np.random.default_rng(seed).uniform(low, high, (n, d))`` exactly
    (the *Unif* sets of the self-join papers, Gowanlock & Karsin 2018 §VI-A).

    Parameters
    ----------
    {n_d}
    low, high : float
        The box, with low < high.
    {seed}

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d).

    Raises
    ------
    ValueError
        If n < 0, d < 1, or the box is empty or not finite.
    TypeError
        If n, d or seed have the wrong type.

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> X = datasets.uniform(5, 2, seed=1)
    >>> np.array_equal(X, np.random.default_rng(1).uniform(0, 100, (5, 2)))
    True
    """
    n, d = check_nd(n, d)
    low, high = check_box(low, high)
    rng = as_generator(seed)
    return np.ascontiguousarray(rng.uniform(low, high, (n, d)), dtype=np.float64)


@fill_doc
def exponential(n: int, d: int, rate: float = 40.0, seed: Seed = None) -> np.ndarray:
    """Coordinates exponential with rate ``rate``, values above 1 redrawn.

    The *Expo* sets of the self-join papers.  The recipe is pinned (the
    benchmark pair counts depend on it)::

        rng = np.random.default_rng(seed)
        X = rng.exponential(1 / rate, (n, d))
        while (X > 1).any():
            X[X > 1] = rng.exponential(1 / rate, int((X > 1).sum()))

    Boolean-mask assignment fills the rejected values in row-major order.
    Every value lies in [0, 1].  A small rate rejects most draws (a fraction
    exp(-rate) per round) and so takes many rounds.

    Parameters
    ----------
    {n_d}
    rate : float
        The rate lambda (> 0); the mean before rejection is 1 / rate.
    {seed}

    {returns_unit}

    Raises
    ------
    ValueError
        If n < 0, d < 1 or rate is not a finite number > 0.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> X = datasets.exponential(1000, 2, seed=3)
    >>> bool(X.max() <= 1.0), X.shape
    (True, (1000, 2))
    """
    n, d = check_nd(n, d)
    rate = check_real("rate", rate, positive=True)
    rng = as_generator(seed)
    scale = 1.0 / rate
    X = rng.exponential(scale, (n, d))
    while True:
        mask = X > 1.0
        count = int(np.count_nonzero(mask))
        if count == 0:
            break
        X[mask] = rng.exponential(scale, count)
    return np.ascontiguousarray(X, dtype=np.float64)


@fill_doc
def blobs(n: int, d: int = 2, centers: int | ArrayLike = 50, std: float = 1.5,
          low: float = 0.0, high: float = 100.0, seed: Seed = None,
          return_labels: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs: isotropic clusters around centres uniform in a box.

    The recipe (fixed, so a seed always gives the same data)::

        rng = np.random.default_rng(seed)
        C = rng.uniform(low, high, (centers, d))      # unless centres are given
        labels = rng.integers(0, len(C), n)           # each point picks a centre
        X = C[labels] + rng.normal(0.0, std, (n, d))

    Points are not clipped to the box: a blob near the border spills over it.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1); must match the centres if given.
    centers : int or array_like of shape (k, d)
        Number of centres (drawn uniform in [low, high)^d), or the centres.
    std : float
        Standard deviation of every coordinate around its centre (>= 0).
    low, high : float
        The box of the random centres.
    {seed}
    return_labels : bool
        Also return the index of each point's centre.

    Returns
    -------
    X : numpy.ndarray
        float64, C-contiguous, shape (n, d).
    labels : numpy.ndarray of int64, shape (n,)
        Only when ``return_labels`` is true.

    Raises
    ------
    ValueError
        If n < 0, d < 1, centers < 1, std < 0, or the centres are not (k, d).

    Examples
    --------
    >>> from skyjoin import datasets
    >>> X, y = datasets.blobs(100, 2, centers=3, seed=0, return_labels=True)
    >>> X.shape, sorted(set(y.tolist())) == [0, 1, 2]
    ((100, 2), True)
    """
    n, d = check_nd(n, d)
    low, high = check_box(low, high)
    std = check_real("std", std)
    if std < 0:
        raise ValueError(f"std must be >= 0, got {std}")
    rng = as_generator(seed)
    if isinstance(centers, numbers.Integral) and not isinstance(centers, (bool, np.bool_)):
        if centers < 1:
            raise ValueError(f"centers must be >= 1, got {centers}")
        C = rng.uniform(low, high, (int(centers), d))
    else:
        C = np.asarray(centers, dtype=np.float64)
        if C.ndim != 2 or C.shape[0] < 1 or C.shape[1] != d:
            raise ValueError(
                f"centers must be an int or an array of shape (k, {d}), got shape {C.shape}"
            )
        if not np.isfinite(C).all():
            raise ValueError("centers contain NaN or inf values")
    labels = rng.integers(0, C.shape[0], n).astype(np.int64, copy=False)
    X = C[labels] + rng.normal(0.0, std, (n, d))
    X = np.ascontiguousarray(X, dtype=np.float64)
    return (X, labels) if return_labels else X


@fill_doc
def manifold(n: int, d: int = 90, k: int = 12, noise: float = 0.05,
             seed: Seed = 11) -> np.ndarray:
    """Points near a random k-dimensional linear subspace of R^d, plus noise.

    Latent Gaussian coordinates mapped into d dimensions by a random
    Gaussian matrix, then isotropic Gaussian noise: data of high ambient and
    low intrinsic dimension, like embeddings.  The recipe is pinned (the
    draws in this order: the latent points, the map, the noise)::

        rng = np.random.default_rng(seed)
        Z = (rng.normal(size=(n, k)) @ rng.normal(size=(k, d)) / sqrt(k)
             + rng.normal(0, noise, (n, d)))

    Coordinate c has variance sum_j B[j, c]^2 / k + noise^2, where B is
    the k x d map: 1 + noise^2 on average.  With the defaults and
    ``n=515_345`` it is the manifold set of the high-dimensional join's
    benchmark (515,345 points in 90-D, a 12-D manifold, noise 0.05, seed
    11; the size of the MSD set of the GPU-join papers), up to
    the last bits of the product, which the BLAS library computes.

    O(n k d) time for the product, O(n d) memory.

    Parameters
    ----------
    {n_d}
    k : int
        Dimension of the manifold, 1 <= k <= d.
    noise : float
        Standard deviation of the noise on every coordinate (>= 0).
    {seed}

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d).

    Raises
    ------
    ValueError
        If n < 0, d < 1, k is not in [1, d], or noise is negative or not finite.
    TypeError
        If n, d, k or seed have the wrong type.

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> Z = datasets.manifold(2000, d=20, k=3, noise=0.01, seed=0)
    >>> s = np.linalg.svd(Z - Z.mean(axis=0), compute_uv=False)
    >>> bool(s[2] > 50 * s[3]), Z.shape
    (True, (2000, 20))
    """
    n, d = check_nd(n, d)
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an integer, got {type(k).__name__}")
    if not 1 <= k <= d:
        raise ValueError(f"k (dimension of the manifold) must be in [1, d={d}], got {k}")
    noise = check_real("noise", noise)
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    rng = as_generator(seed)
    k = int(k)
    Z = rng.normal(size=(n, k)) @ rng.normal(size=(k, d)) / math.sqrt(k) \
        + rng.normal(0, noise, (n, d))
    return np.ascontiguousarray(Z, dtype=np.float64)
