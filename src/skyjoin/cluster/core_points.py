"""Core points of DBSCAN from a neighbour table: counts, or exact weighted sums (§2.1).

A point is core iff its eps-neighbourhood, itself included, holds at least
``min_samples`` points; with sample weights, iff the exact sum of their float64
values, rounded once, is at least ``min_samples`` (the rule below).  Every path
and device of ``skyjoin.cluster`` applies it; the GPU twin of the two-step test
is in ``table_gpu``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE

__all__ = ["core_points", "weighted_neighbourhood", "naive_sum_decides", "naive_sum_decides_nb",
           "integer_weights", "exact_row_sums"]


# ---------------------------------------------------------------------------
# Weighted neighbourhoods: the one rule for core points with sample weights
# ---------------------------------------------------------------------------
#
# A point is core iff fl(S) >= min_samples, where S is the exact sum of the
# float64 weights of its neighbourhood and fl rounds it once to float64
# (round-half-even), as ``math.fsum`` does.  This value does not depend on
# the order of the neighbours, which no two engines share (scikit-learn's
# ``np.sum`` follows the order of its tree's radius query).  It is found in
# two steps:
#
# 1. the naive sum s and the sum a of the |weights| of each row (one pass
#    over the row).  In any order of additions |S - s| <= gamma_{k-1} * a
#    for k terms (Higham, Accuracy and Stability, eq. 4.4), gamma_j =
#    j u / (1 - j u), u = 2**-53; ``naive_sum_decides`` tests whether s is
#    far enough from the threshold that s >= m and fl(S) >= m agree;
# 2. the rows it does not decide get the exact sum, correctly rounded:
#    Shewchuk's non-overlapping partials, CPython's ``math.fsum`` algorithm
#    (``_grow``, ``_partials_value``).  A row whose partial sums overflow
#    float64 (weights near 1e308) is summed with exact rationals instead.

#: unit roundoff of float64
_U = 2.0 ** -53
#: smallest normal float64: covers what underflow takes from the bound
_TINY = 2.0 ** -1022
#: non-overlapping nonzero float64 partials have disjoint bit ranges in [-1074, 1023]
_MAX_PARTIALS = 2098


def naive_sum_decides(s, a, k, m):
    """Whether ``s >= m`` certainly agrees with ``fl(S) >= m`` (the rule's first step).

    ``s`` is a float64 sum of k weights in any order of additions, ``a``
    a float64 sum of their absolute values, ``S`` the exact sum, ``fl``
    rounding to nearest even and ``m`` a float64 threshold.  True iff
    ``|s - m| > 2.5 u k a + 2 u |m| + 2**-1022`` (u = 2**-53): the first term
    covers twice the error bound ``gamma_{k-1} a`` (with the rounding of
    a, of this test and k u <= 0.001), the second the half-ulp below m that
    rounds up onto m (``fl(S) >= m`` iff S lies above the midpoint between m
    and its predecessor, or on it with an even m), the third underflow.  A
    NaN or infinite s is never decided.

    Pure arithmetic, so the same code runs on float scalars (compiled by
    Numba for the CPU) and elementwise on NumPy or CuPy arrays (the GPU
    path).  O(1) per row.
    """
    return abs(s - m) > (2.5 * _U) * k * a + (2.0 * _U) * abs(m) + _TINY


naive_sum_decides_nb = njit(cache=NUMBA_CACHE, nogil=True)(naive_sum_decides)


def integer_weights(w):
    """Whether every sum of some of the weights is exact in float64, in any order.

    True iff all weights are integers and the sum of their absolute values
    is at most 2**52 (then every partial sum is an integer below 2**53).
    The naive sums then are the correctly rounded ones and decide every
    row.  Array operations only (NumPy or CuPy arrays); O(n).
    """
    return bool((w.round() == w).all()) and float(abs(w).sum()) <= 2.0 ** 52


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _grow(p, n, x):
    """Add x to the n non-overlapping partials p[:n] (Shewchuk's grow-expansion,
    as CPython's ``math.fsum``); returns the new count, -1 if a partial overflows
    (or the buffer is full, which non-overlapping partials never make it).  O(n)."""
    i = 0
    for j in range(n):
        y = p[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            p[i] = lo
            i += 1
        x = hi
    if x != 0.0:
        if not np.isfinite(x) or i >= p.shape[0]:
            return -1
        p[i] = x
        i += 1
    return i


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _partials_value(p, n):
    """The exact sum of the partials p[:n] rounded once, half to even (the final
    step of CPython's ``math.fsum``).  O(n)."""
    hi = 0.0
    if n > 0:
        n -= 1
        hi = p[n]
        lo = 0.0
        while n > 0:
            x = hi
            n -= 1
            y = p[n]
            hi = x + y
            yr = hi - x
            lo = y - yr
            if lo != 0.0:
                break
        # half-even rounding across partials: a tie broken by the next partial
        if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            yr = x - hi
            if y == yr:
                hi = x
    return hi


@njit(cache=NUMBA_CACHE, nogil=True)
def _row_exact(indptr, indices, w, i, self_weight):
    """Correctly rounded sum of ``self_weight`` and the weights of row i's
    neighbours; NaN where float64 overflows on the way.  O(row length * partials)."""
    p = np.empty(min(indptr[i + 1] - indptr[i] + 1, _MAX_PARTIALS) + 1, dtype=np.float64)
    n = _grow(p, 0, self_weight)
    for k in range(indptr[i], indptr[i + 1]):
        if n < 0:
            return np.nan
        n = _grow(p, n, w[indices[k]])
    if n < 0:
        return np.nan
    v = _partials_value(p, n)
    return v if np.isfinite(v) else np.nan


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _neighbourhood_weights(indptr, indices, w, add_self, m, every_integer, naive_exact):
    """Each row's weight (its own included when add_self), for the core rule.

    Rows that ``naive_sum_decides`` leaves open against m (with
    every_integer: against floor(s) and floor(s) + 1, hence against every
    integer) get the correctly rounded sum, the others their naive sum;
    with naive_exact (``integer_weights``) every row keeps its naive sum.
    Returns the sums and how many rows overflowed (NaN, left to the caller).
    O(nnz) plus O(row length * partials) per open row.
    """
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    overflowed = 0
    for i in prange(n):
        own = w[i] if add_self else 0.0
        s = own
        a = abs(own)
        for k in range(indptr[i], indptr[i + 1]):
            x = w[indices[k]]
            s += x
            a += abs(x)
        cnt = indptr[i + 1] - indptr[i] + (1 if add_self else 0)
        if naive_exact:
            done = True
        elif every_integer:
            f = np.floor(s)
            done = naive_sum_decides_nb(s, a, cnt, f) and naive_sum_decides_nb(s, a, cnt, f + 1.0)
        else:
            done = naive_sum_decides_nb(s, a, cnt, m)
        if not done:
            s = _row_exact(indptr, indices, w, i, own)
            if np.isnan(s):
                overflowed += 1
        out[i] = s
    return out, overflowed


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _exact_row_sums(indptr, values):
    """Correctly rounded sum of each CSR row of values (NaN where float64 overflows
    on the way), and the number of such rows.  O(nnz * partials)."""
    n = indptr.shape[0] - 1
    ids = np.arange(values.shape[0])
    out = np.empty(n, dtype=np.float64)
    overflowed = 0
    for i in prange(n):
        s = _row_exact(indptr, ids, values, i, 0.0)
        if np.isnan(s):
            overflowed += 1
        out[i] = s
    return out, overflowed


def _rational_sum(values):
    """The exact sum of float64 values rounded once, half to even, by exact
    rationals (no intermediate overflow); +-inf beyond float64.  O(len)."""
    total = sum(map(Fraction, np.asarray(values, dtype=np.float64).tolist()), Fraction(0))
    try:
        return float(total)  # int / int true division: correctly rounded
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def exact_row_sums(indptr, values):
    """The correctly rounded sum (``math.fsum``) of each row of a CSR array of float64.

    Parameters
    ----------
    indptr : ndarray of int, shape (n + 1,)
    values : ndarray of float64
        Finite values; row i is ``values[indptr[i]:indptr[i + 1]]``.

    Returns
    -------
    ndarray of float64, shape (n,)
        The exact sum of each row rounded once to float64, half to even
        (independent of the order of the row).  Rows whose partial sums
        overflow float64 are summed with exact rationals, and an exact sum
        beyond float64 gives +-inf (``math.fsum`` raises there).

    Notes
    -----
    O(nnz * p) with p the number of non-overlapping partials (a few for
    ordinary data, at most about 40 for doubles in practice), in parallel
    over rows.

    Examples
    --------
    >>> exact_row_sums(np.array([0, 10, 13]), np.array([0.1] * 10 + [1e16, 1.0, -1e16]))
    array([1., 1.])
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    out, overflowed = _exact_row_sums(indptr, values)
    if overflowed:
        for i in np.flatnonzero(np.isnan(out)):
            out[i] = _rational_sum(values[indptr[i]:indptr[i + 1]])
    return out


def _weights(indptr, indices, sample_weight, add_self, m, every_integer):
    """``_neighbourhood_weights`` with its overflowed rows summed exactly."""
    w = np.ascontiguousarray(sample_weight, dtype=np.float64)
    out, overflowed = _neighbourhood_weights(indptr, indices, w, add_self, m, every_integer,
                                             integer_weights(w))
    if overflowed:
        for i in np.flatnonzero(np.isnan(out)):
            row = w[indices[indptr[i]:indptr[i + 1]]]
            out[i] = _rational_sum(np.concatenate([w[i:i + 1], row]) if add_self else row)
    return out


def weighted_neighbourhood(indptr, indices, sample_weight, add_self):
    """Each row's neighbourhood weight (its own included when add_self), for any
    integer threshold.

    The value compares with every integer m (|m| < 2**52) exactly as the
    correctly rounded sum of the row's weights does (the core rule, see
    ``core_points``): it is that sum wherever the naive sum lies within its
    error bound of an integer, else the naive sum.  What a min_samples sweep
    compares with each of its levels.  O(nnz), plus O(row length * partials)
    per row left open.
    """
    return _weights(indptr, indices, sample_weight, add_self, 0.0, True)


def core_points(indptr, indices, min_samples, sample_weight=None, self_in_table=False):
    """Core flags (uint8) of the points of a neighbour table (§2.1).

    A point is core iff the size of its eps-neighbourhood, itself included,
    is at least ``min_samples``; with ``sample_weight``, iff the exact sum of
    the float64 weights of that neighbourhood, rounded once to float64 (half
    to even, ``math.fsum``), is: one answer for every order of the
    neighbours.  O(nnz); with weights, rows whose naive sum lies within its
    error bound of min_samples (``naive_sum_decides``) are summed exactly,
    O(row length * partials) each.
    """
    if sample_weight is None:
        counts = np.diff(indptr)
        if not self_in_table:
            counts = counts + 1
        return (counts >= min_samples).view(np.uint8)
    m = float(min_samples)
    return (_weights(indptr, indices, sample_weight, not self_in_table, m, False)
            >= m).view(np.uint8)
