"""Skyline workloads: the standard generator (independent, correlated,
anticorrelated; Börzsönyi, Kossmann and Stocker, SkyAlign §6.1) and pareto."""

from __future__ import annotations

import numpy as np

from .checks import Seed, as_generator, check_nd, fill_doc

__all__ = ["independent", "correlated", "anticorrelated", "pareto", "skyline_data",
           "SKYLINE_KINDS"]

SKYLINE_KINDS = ("independent", "correlated", "anticorrelated", "pareto")

# The standard generator is a per-point rejection loop, compiled with Numba on
# first use (and cached on disk) and run in parallel over blocks of rows.  Its
# random numbers come from SplitMix64 (Steele, Lea & Flood, OOPSLA 2014),
# inlined: a 64-bit counter passed through a bit mixer, with one counter per
# block seeded from ``seed``.  So the result depends only on (n, d, seed), not
# on the number of threads nor on Numba's own generator, and a draw costs a
# few instructions.
# ``prange`` is bound to ``numba.prange`` when the kernel is built, so that
# importing this module needs no Numba.
prange = range

# Rows per block of the skyline generators: each block has its own child
# generator, so the output does not depend on how many threads draw it.
_BLOCK = 1 << 14

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

        from .._core.config import NUMBA_CACHE

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
    rng = as_generator(seed)
    n_blocks = max(1, -(-n // _BLOCK))
    entropy = rng.integers(0, 2**63, size=4, dtype=np.int64).tolist()
    seeds = np.random.SeedSequence(entropy).generate_state(n_blocks, dtype=np.uint64)
    return _standard_kernel()(kind, n, d, _BLOCK, seeds)


@fill_doc
def independent(n: int, d: int, seed: Seed = None) -> np.ndarray:
    """Skyline data, *independent*: every coordinate U(0, 1).

    The standard generator of Börzsönyi, Kossmann & Stocker (ICDE 2001),
    as used by SkyAlign §6.1.  Recipe: ``default_rng(seed).random((n, d))``.

    {params}

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
    n, d = check_nd(n, d)
    return np.ascontiguousarray(as_generator(seed).random((n, d)), dtype=np.float64)


@fill_doc
def correlated(n: int, d: int, seed: Seed = None) -> np.ndarray:
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

    {params}

    {returns_unit}

    Examples
    --------
    A point good in one dimension tends to be good in the others:

    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> X = datasets.correlated(2000, 3, seed=0)
    >>> bool(np.corrcoef(X.T)[0, 1] > 0.5)
    True
    """
    n, d = check_nd(n, d)
    return _standard(_CORRELATED, n, d, seed)


@fill_doc
def anticorrelated(n: int, d: int, seed: Seed = None) -> np.ndarray:
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

    {params}

    {returns_unit}

    Examples
    --------
    A point good in one dimension tends to be bad in another:

    >>> import numpy as np
    >>> from skyjoin import datasets
    >>> X = datasets.anticorrelated(2000, 3, seed=0)
    >>> bool(np.corrcoef(X.T)[0, 1] < 0)
    True
    """
    n, d = check_nd(n, d)
    return _standard(_ANTICORRELATED, n, d, seed)


@fill_doc
def pareto(n: int, d: int, seed: Seed = None) -> np.ndarray:
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

    {params}

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
    n, d = check_nd(n, d)
    X = as_generator(seed).random((n, d))
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


@fill_doc
def skyline_data(n: int, d: int, kind: str, seed: Seed = None) -> np.ndarray:
    """Skyline benchmark data of one of the four standard kinds.

    Parameters
    ----------
    {n_d}
    kind : {"independent", "correlated", "anticorrelated", "pareto"}
    {seed}

    {returns_unit}

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
