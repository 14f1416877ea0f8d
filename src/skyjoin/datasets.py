"""Seeded, reproducible data generators.

Every generator returns a float64, C-contiguous array of shape (n, d) and
takes ``seed``: an int, ``None`` (fresh entropy) or a ``numpy.random.Generator``
(used as is, so successive calls continue its stream).

* Join and DBSCAN workloads: :func:`uniform` (points uniform in a box),
  :func:`exponential` (rate lambda, values above 1 rejected: the papers'
  *Expo* sets) and :func:`blobs` (Gaussian clusters).
* Skyline workloads: :func:`independent`, :func:`correlated`,
  :func:`anticorrelated` (the standard generator of Börzsönyi, Kossmann and
  Stocker, the ``randdataset`` program used by SkyAlign §6.1) and
  :func:`pareto` (SkyAlign §6.1).
* :func:`generate` dispatches on a kind name (the CLI ``skyjoin generate``),
  :func:`skyline_data` on a skyline kind, and :func:`named_case` returns the
  named benchmark cases of the project (data and eps) exactly as pinned.

The exact recipes of :func:`uniform` and :func:`exponential` are part of the
contract (the pair counts of the benchmark cases depend on them): they must
not change.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = [
    "uniform",
    "exponential",
    "blobs",
    "independent",
    "correlated",
    "anticorrelated",
    "pareto",
    "skyline_data",
    "generate",
    "KINDS",
    "SKYLINE_KINDS",
    "NamedCase",
    "NAMED_CASES",
    "named_case",
]

SKYLINE_KINDS = ("independent", "correlated", "anticorrelated", "pareto")
KINDS = ("uniform", "exponential", "blobs") + SKYLINE_KINDS

# Rows per block of the skyline generators: each block has its own child
# generator, so the output does not depend on how many threads draw it.
_BLOCK = 1 << 14


# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------
def _rng(seed) -> np.random.Generator:
    """A Generator from an int / None / SeedSequence, or the Generator itself."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"seed must be an int, None or a numpy.random.Generator, got {type(seed).__name__}"
        )
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return np.random.default_rng(int(seed))


def _check_nd(n, d) -> tuple[int, int]:
    """Check the number of points n >= 0 and of dimensions d >= 1."""
    for name, v in (("n", n), ("d", d)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    if n < 0:
        raise ValueError(f"n (number of points) must be >= 0, got {n}")
    if d < 1:
        raise ValueError(f"d (number of dimensions) must be >= 1, got {d}")
    return int(n), int(d)


def _check_real(name: str, value, positive: bool = False) -> float:
    """Check a finite real parameter (and > 0 when ``positive``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and value <= 0.0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def _check_box(low, high) -> tuple[float, float]:
    """Check a box [low, high) with finite low < high."""
    low = _check_real("low", low)
    high = _check_real("high", high)
    if not low < high:
        raise ValueError(f"low must be < high, got low={low}, high={high}")
    return low, high


# --------------------------------------------------------------------------
# join / DBSCAN workloads
# --------------------------------------------------------------------------
def uniform(n: int, d: int, low: float = 0.0, high: float = 100.0, seed=None) -> np.ndarray:
    """Points uniform in the box [low, high)^d.

    The recipe is pinned: the result equals
    ``np.random.default_rng(seed).uniform(low, high, (n, d))`` exactly
    (the *Unif* sets of the self-join papers, Gowanlock & Karsin 2018 §VI-A).

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    low, high : float
        The box, with low < high.
    seed : int, None or numpy.random.Generator
        Seed of ``numpy.random.default_rng``, or a Generator to draw from.

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
    n, d = _check_nd(n, d)
    low, high = _check_box(low, high)
    rng = _rng(seed)
    return np.ascontiguousarray(rng.uniform(low, high, (n, d)), dtype=np.float64)


def exponential(n: int, d: int, rate: float = 40.0, seed=None) -> np.ndarray:
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
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    rate : float
        The rate lambda (> 0); the mean before rejection is 1 / rate.
    seed : int, None or numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d), values in [0, 1].

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
    n, d = _check_nd(n, d)
    rate = _check_real("rate", rate, positive=True)
    rng = _rng(seed)
    scale = 1.0 / rate
    X = rng.exponential(scale, (n, d))
    while True:
        mask = X > 1.0
        count = int(np.count_nonzero(mask))
        if count == 0:
            break
        X[mask] = rng.exponential(scale, count)
    return np.ascontiguousarray(X, dtype=np.float64)


def blobs(n: int, d: int = 2, centers=50, std: float = 1.5, low: float = 0.0,
          high: float = 100.0, seed=None, return_labels: bool = False):
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
    seed : int, None or numpy.random.Generator
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
    n, d = _check_nd(n, d)
    low, high = _check_box(low, high)
    std = _check_real("std", std)
    if std < 0:
        raise ValueError(f"std must be >= 0, got {std}")
    rng = _rng(seed)
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


# --------------------------------------------------------------------------
# skyline workloads: the standard generator (Börzsönyi et al., ``randdataset``)
# --------------------------------------------------------------------------
# The standard generator is a per-point rejection loop, compiled with Numba on
# first use (and cached on disk) and run in parallel over blocks of rows.  Its
# random numbers come from SplitMix64 (Steele, Lea & Flood, OOPSLA 2014),
# inlined: a 64-bit counter passed through a bit mixer, with one counter per
# block seeded from ``seed``.  So the result depends only on (n, d, seed), not
# on the number of threads nor on Numba's own generator, and a draw costs a
# few instructions (Numba's np.random costs about 8 ns a call).
# ``prange`` is bound to ``numba.prange`` when the kernel is built, so that
# importing this module needs no Numba.
prange = range
_STANDARD_KERNEL = None
_CORRELATED, _ANTICORRELATED = 0, 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_S11, _S27, _S30, _S31, _S32 = (np.uint64(k) for k in (11, 27, 30, 31, 32))


def _next64(state):
    """SplitMix64: advance the block's counter and return 64 mixed bits."""
    z = state[0] + _GOLDEN
    state[0] = z
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


def _uniform01(state):
    """U(0, 1) with 53 random bits (in [0, 1))."""
    return np.float64(_next64(state) >> _S11) * 1.1102230246251565e-16


def _peak01_12(state):
    """peak(0, 1, 12): the mean of 12 draws of U(0, 1), each with 32 random bits
    (two per 64-bit word)."""
    s = 0.0
    for _ in range(6):
        z = _next64(state)
        s += np.float64(z >> _S32) + np.float64(z & _LOW32)
    return s * (2.3283064365386963e-10 / 12.0)


def _peak01(state, m):
    """peak(0, 1, m): the mean of m draws of U(0, 1)."""
    s = 0.0
    for _ in range(m):
        s += _uniform01(state)
    return s / m


def _anticorrelated_offsets(state, u, d):
    """Draw u ~ U(-1, 1)^d; False as soon as no v in [0.25, 0.75] can accept it.

    The point is x_k = v + l (u_k - u_(k-1 mod d)) with l = min(v, 1 - v):
    v <= 1/2 needs every difference >= -1, v >= 1/2 every difference <= 1.
    A difference below -1 together with one above 1 rejects the point for
    every v, so it is dropped before its v (twelve draws) is drawn: the same
    rejection sampling in a cheaper order.
    """
    u[0] = 2.0 * _uniform01(state) - 1.0
    lo = np.inf
    hi = -np.inf
    for k in range(1, d):
        u[k] = 2.0 * _uniform01(state) - 1.0
        diff = u[k] - u[k - 1]
        lo = min(lo, diff)
        hi = max(hi, diff)
        if lo < -1.0 and hi > 1.0:
            return False
    diff = u[0] - u[d - 1]
    lo = min(lo, diff)
    hi = max(hi, diff)
    return not (lo < -1.0 and hi > 1.0)


def _standard_generator(kind, n, d, block, seeds):
    """The standard generator of Börzsönyi et al. (randdataset): correlated or
    anticorrelated points, each redrawn whole until inside [0, 1]^d."""
    out = np.empty((n, d), dtype=np.float64)
    for b in prange(len(seeds)):
        state = np.empty(1, dtype=np.uint64)
        state[0] = seeds[b]
        h = np.empty(d, dtype=np.float64)
        for i in range(b * block, min(n, (b + 1) * block)):
            while True:
                if kind == 0:
                    # correlated: v = peak(0, 1, d), h_k = normal(0, l)
                    v = _peak01(state, d)
                    l = min(v, 1.0 - v)
                    for k in range(d):
                        h[k] = l * (2.0 * _peak01_12(state) - 1.0)   # peak(-l, l, 12)
                else:
                    # anticorrelated: v = normal(0.5, 0.25), h_k = U(-l, l)
                    if not _anticorrelated_offsets(state, h, d):
                        continue
                    v = 0.25 + 0.5 * _peak01_12(state)               # peak(0.25, 0.75, 12)
                    l = min(v, 1.0 - v)
                    for k in range(d):
                        h[k] *= l
                inside = True
                for k in range(d):
                    # coordinate k gets +h_k and -h_(k-1 mod d)
                    x = v + h[k] - h[k - 1 if k > 0 else d - 1]
                    if x < 0.0 or x > 1.0:
                        inside = False
                        break
                    out[i, k] = x
                if inside:
                    break
    return out


def _standard_kernel():
    """The compiled standard generator (built and cached on first use)."""
    global _STANDARD_KERNEL, prange, _next64, _uniform01, _peak01_12, _peak01
    global _anticorrelated_offsets
    if _STANDARD_KERNEL is None:
        import numba

        from ._core.config import NUMBA_CACHE

        prange = numba.prange
        inline = numba.njit(cache=NUMBA_CACHE, inline="always")
        _next64 = inline(_next64)
        _uniform01 = inline(_uniform01)
        _peak01_12 = inline(_peak01_12)
        _peak01 = inline(_peak01)
        _anticorrelated_offsets = numba.njit(cache=NUMBA_CACHE)(_anticorrelated_offsets)
        _STANDARD_KERNEL = numba.njit(cache=NUMBA_CACHE, parallel=True)(_standard_generator)
    return _STANDARD_KERNEL


def _standard(kind: int, n: int, d: int, seed) -> np.ndarray:
    """Run the standard generator with block seeds derived from ``seed``."""
    rng = _rng(seed)
    n_blocks = max(1, -(-n // _BLOCK))
    entropy = rng.integers(0, 2**63, size=4, dtype=np.int64).tolist()
    seeds = np.random.SeedSequence(entropy).generate_state(n_blocks, dtype=np.uint64)
    return _standard_kernel()(kind, n, d, _BLOCK, seeds)


def independent(n: int, d: int, seed=None) -> np.ndarray:
    """Skyline data, *independent*: every coordinate U(0, 1).

    The standard generator of Börzsönyi, Kossmann & Stocker (ICDE 2001),
    as used by SkyAlign §6.1.  Recipe: ``default_rng(seed).random((n, d))``.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    seed : int, None or numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d), values in [0, 1).

    Examples
    --------
    >>> from skyjoin import datasets
    >>> datasets.independent(3, 4, seed=0).shape
    (3, 4)
    """
    n, d = _check_nd(n, d)
    return np.ascontiguousarray(_rng(seed).random((n, d)), dtype=np.float64)


def correlated(n: int, d: int, seed=None) -> np.ndarray:
    """Skyline data, *correlated* (the standard generator of Börzsönyi et al.).

    With peak(a, b, m) = a + (b - a) * (mean of m draws of U(0, 1)) and
    normal(c, w) = peak(c - w, c + w, 12), each point draws v = peak(0, 1, d)
    and l = min(v, 1 - v), sets every coordinate to v, then for every
    dimension k draws h = normal(0, l), adds h to coordinate k and subtracts
    it from coordinate (k + 1) mod d; a point outside [0, 1]^d is redrawn
    whole.  Points lie near the diagonal, so the skyline is small.

    Compiled with Numba on first use (cached on disk), parallel over blocks
    of rows; every block seeds its own SplitMix64 stream from ``seed``, so
    the result depends only on n, d and the seed, not on the number of
    threads.  The uniforms of the 12-draw peaks carry 32 random bits each,
    the others 53.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    seed : int, None or numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d), values in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> X = datasets.correlated(2000, 3, seed=0)
    >>> bool(np.corrcoef(X.T)[0, 1] > 0.5)
    True
    """
    n, d = _check_nd(n, d)
    return _standard(_CORRELATED, n, d, seed)


def anticorrelated(n: int, d: int, seed=None) -> np.ndarray:
    """Skyline data, *anticorrelated* (the standard generator of Börzsönyi et al.).

    As :func:`correlated` but with v = normal(0.5, 0.25) = peak(0.25, 0.75,
    12), so v lies in [0.25, 0.75], and h = U(-l, l); a point outside
    [0, 1]^d is redrawn whole.  Points lie near the plane sum(x) = d/2, so the
    skyline is large.  (0.25 is the half width of the peak, not a standard
    deviation: read as one, v would spread far more and the data degenerate.)

    In high dimensions most candidates are rejected (about 93 % at d = 12):
    the offsets are drawn first, dimension by dimension, and a candidate is
    dropped as soon as no v could accept it, before its v is drawn.  This is
    the same rejection sampling in a cheaper order.  Compiled with Numba on
    first use (cached on disk), parallel over blocks of rows, each block
    with its own SplitMix64 stream seeded from ``seed``: the result depends
    only on n, d and the seed.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    seed : int, None or numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d), values in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> X = datasets.anticorrelated(2000, 3, seed=0)
    >>> bool(np.corrcoef(X.T)[0, 1] < 0)
    True
    """
    n, d = _check_nd(n, d)
    return _standard(_ANTICORRELATED, n, d, seed)


def pareto(n: int, d: int, seed=None) -> np.ndarray:
    """Skyline data, *pareto*: independent heavy-tailed columns (SkyAlign §6.1).

    Each coordinate is x = (1 - r)^-1 with r ~ U(0, 1) (a Pareto distribution
    with x_m = 1 and alpha = 1, by inverse transform), then every column is
    normalised to [0, 1] by min-max scaling, (x - min) / (max - min), over the
    column.  A column with a single distinct value becomes 0.

    Why min-max: it is an increasing affine map per column, so it keeps the
    heavy skew towards low (better) values that makes this set a test for
    grid and partition based skylines (most values crowd near 0, a few reach
    1).  The other natural map, 1 - 1/x, would give back r itself: the
    uniform *independent* data.  Since the skyline is invariant under
    increasing maps of the columns, pareto data has the same skyline as the
    independent data drawn from the same r; only the value distribution the
    algorithm sees differs.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    seed : int, None or numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d), values in [0, 1] (each column
        reaching 0 and 1 when n >= 2).

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> X = datasets.pareto(1000, 2, seed=0)
    >>> float(X.min()), float(X.max()), bool(np.median(X) < 0.01)
    (0.0, 1.0, True)
    """
    n, d = _check_nd(n, d)
    X = _rng(seed).random((n, d))
    np.subtract(1.0, X, out=X)                      # in place: X = 1 / (1 - r)
    np.divide(1.0, X, out=X)
    if n:
        lo = X.min(axis=0)
        span = X.max(axis=0) - lo
        X -= lo
        np.divide(X, span, out=X, where=span > 0)
        X[:, span == 0] = 0.0
    return np.ascontiguousarray(X, dtype=np.float64)


_SKYLINE = {
    "independent": independent,
    "correlated": correlated,
    "anticorrelated": anticorrelated,
    "pareto": pareto,
}


def skyline_data(n: int, d: int, kind: str, seed=None) -> np.ndarray:
    """Skyline benchmark data of one of the four standard kinds.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    kind : {"independent", "correlated", "anticorrelated", "pareto"}
    seed : int, None or numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d), values in [0, 1].

    Raises
    ------
    ValueError
        For an unknown kind, n < 0 or d < 1.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> datasets.skyline_data(100, 4, "anticorrelated", seed=0).shape
    (100, 4)
    """
    fn = _SKYLINE.get(kind) if isinstance(kind, str) else None
    if fn is None:
        raise ValueError(
            f"unknown skyline data kind {kind!r}; choose one of {', '.join(SKYLINE_KINDS)}"
        )
    return fn(n, d, seed=seed)


_GENERATORS = {
    "uniform": (uniform, ("low", "high")),
    "exponential": (exponential, ("rate",)),
    "blobs": (blobs, ("centers", "std", "low", "high", "return_labels")),
    "independent": (independent, ()),
    "correlated": (correlated, ()),
    "anticorrelated": (anticorrelated, ()),
    "pareto": (pareto, ()),
}


def generate(kind: str, n: int, d: int, seed=None, **params):
    """Generate a data set by kind name (used by ``skyjoin generate``).

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`: "uniform", "exponential", "blobs",
        "independent", "correlated", "anticorrelated", "pareto".
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1).
    seed : int, None or numpy.random.Generator
    **params
        Parameters of the generator: ``low``, ``high`` (uniform, blobs),
        ``rate`` (exponential), ``centers``, ``std``, ``return_labels`` (blobs).

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d) (and labels for blobs with
        ``return_labels=True``).

    Raises
    ------
    ValueError
        For an unknown kind, a parameter the kind does not take, n < 0 or d < 1.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> datasets.generate("exponential", 10, 2, seed=0, rate=40).shape
    (10, 2)
    """
    entry = _GENERATORS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise ValueError(f"unknown data kind {kind!r}; choose one of {', '.join(KINDS)}")
    fn, allowed = entry
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"kind {kind!r} takes no parameter(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(allowed) if allowed else 'none besides n, d, seed'}"
        )
    return fn(n, d, seed=seed, **params)


# --------------------------------------------------------------------------
# named benchmark cases
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class NamedCase:
    """A named benchmark case: how its data is drawn and its eps.

    ``pairs_incl_self`` is the exact number of ordered pairs (i, j) with
    dist <= eps, self pairs included, in float64, where known.
    """

    name: str
    kind: str
    n: int
    d: int
    seed: int
    eps: float
    pairs_incl_self: int | None = None
    source: str = ""

    @property
    def pairs_excl_self(self) -> int | None:
        """Ordered pairs without self pairs (``pairs_incl_self - n``)."""
        return None if self.pairs_incl_self is None else self.pairs_incl_self - self.n

    def data(self) -> np.ndarray:
        """Generate the case's points."""
        if self.kind == "uniform":
            return uniform(self.n, self.d, 0.0, 100.0, seed=self.seed)
        if self.kind == "exponential":
            return exponential(self.n, self.d, rate=40.0, seed=self.seed)
        raise ValueError(f"unknown kind {self.kind!r}")  # pragma: no cover


def _cases() -> dict[str, NamedCase]:
    """The registry of named cases."""
    i2, i3 = "issue 2 (CPU join benchmark)", "issue 3 (GPU join benchmark)"
    own = "; seed chosen by skyjoin"
    cases = [
        # issue 3, pinned seeds and known pair counts (scipy agrees)
        NamedCase("Unif2D2M-0.5", "uniform", 2_000_000, 2, 1, 0.5, 314_833_680, i3),
        NamedCase("Unif2D2M-1.0", "uniform", 2_000_000, 2, 1, 1.0, 1_247_933_728, i3),
        NamedCase("Unif6D2M-8.0", "uniform", 2_000_000, 6, 2, 8.0, 6_702_784, i3),
        NamedCase("Expo2D2M-0.0004", "exponential", 2_000_000, 2, 3, 0.0004, 793_578_794, i3),
        NamedCase("Expo2D2M-0.002", "exponential", 2_000_000, 2, 3, 0.002, 18_765_695_968, i3),
        NamedCase("Expo6D2M-0.012", "exponential", 2_000_000, 6, 4, 0.012, 1_729_275_652, i3),
        # issue 3, 10M versions: seeds and eps chosen here (eps scaled by about
        # 1/sqrt(5) from the 2M cases, to keep the mean number of neighbours
        # in the same range at five times the density).  Pair counts of these
        # and of the 1M cases: scipy cKDTree.query_ball_point, float64.
        NamedCase("Unif2D10M-0.25", "uniform", 10_000_000, 2, 5, 0.25, 1_969_148_342, i3 + own),
        NamedCase("Expo2D10M-0.0002", "exponential", 10_000_000, 2, 6, 0.0002, 5_007_001_402,
                  i3 + own),
        # issue 2, the CPU cases
        NamedCase("Unif2D1M-0.5", "uniform", 1_000_000, 2, 11, 0.5, 79_234_870, i2 + own),
        NamedCase("Unif6D1M-12", "uniform", 1_000_000, 6, 12, 12.0, 13_438_614, i2 + own),
        NamedCase("Expo2D1M-0.0008", "exponential", 1_000_000, 2, 13, 0.0008, 785_267_382, i2 + own),
        NamedCase("Expo6D1M-0.02", "exponential", 1_000_000, 6, 14, 0.02, 5_399_736_586, i2 + own),
    ]
    return {c.name: c for c in cases}


#: The named benchmark cases, by name (see :func:`named_case`).
NAMED_CASES: dict[str, NamedCase] = _cases()


def named_case(name: str) -> tuple[np.ndarray, float]:
    """The data and eps of a named benchmark case.

    Uniform cases are ``uniform(n, d, 0, 100, seed)``, exponential cases
    ``exponential(n, d, rate=40, seed)``; the name reads
    ``<Unif|Expo><d>D<n>-<eps>``.

    ===================  ======  ====  ==================  ======  ======================
    name                 n       d     data                seed    ordered pairs incl. self
    ===================  ======  ====  ==================  ======  ======================
    Unif2D2M-0.5         2M      2     uniform [0,100]^2   1       314,833,680
    Unif2D2M-1.0         2M      2     uniform [0,100]^2   1       1,247,933,728
    Unif6D2M-8.0         2M      6     uniform [0,100]^6   2       6,702,784
    Expo2D2M-0.0004      2M      2     expo lambda=40      3       793,578,794
    Expo2D2M-0.002       2M      2     expo lambda=40      3       18,765,695,968
    Expo6D2M-0.012       2M      6     expo lambda=40      4       1,729,275,652
    Unif2D10M-0.25       10M     2     uniform [0,100]^2   5       1,969,148,342
    Expo2D10M-0.0002     10M     2     expo lambda=40      6       5,007,001,402
    Unif2D1M-0.5         1M      2     uniform [0,100]^2   11      79,234,870
    Unif6D1M-12          1M      6     uniform [0,100]^6   12      13,438,614
    Expo2D1M-0.0008      1M      2     expo lambda=40      13      785,267,382
    Expo6D1M-0.02        1M      6     expo lambda=40      14      5,399,736,586
    ===================  ======  ====  ==================  ======  ======================

    The first six are the GPU cases of issue 3, with the seeds and the exact
    float64 pair counts pinned there (scipy's cKDTree reproduces all six
    from these generators).  The 10M cases are issue 3's "10M-point
    versions of Unif2D and Expo2D"; their seeds and eps were chosen here
    (eps about 1/sqrt(5) of the 2M cases', so the mean number of neighbours
    stays in the same range).  The 1M cases are the CPU cases of issue 2,
    with seeds chosen here.  Their counts were computed with scipy's
    ``cKDTree.query_ball_point`` in float64.  Note the size of Expo6D1M-0.02:
    5.4 billion pairs, a 21.6 GB CSR table (int32 columns).
    ``NAMED_CASES[name]`` holds the recipe and the pair count.

    Parameters
    ----------
    name : str
        A key of :data:`NAMED_CASES`.

    Returns
    -------
    X : numpy.ndarray
        float64, C-contiguous, shape (n, d).
    eps : float

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> datasets.NAMED_CASES["Unif6D2M-8.0"].seed
    2
    """
    case = NAMED_CASES.get(name) if isinstance(name, str) else None
    if case is None:
        raise ValueError(
            f"unknown named case {name!r}; choose one of {', '.join(NAMED_CASES)}"
        )
    return case.data(), case.eps
