"""Binary searches inside Numba kernels (``numpy.searchsorted`` on a sub-range)."""

from numba import njit

from .config import NUMBA_CACHE

__all__ = ["lower_bound", "upper_bound"]


@njit(cache=NUMBA_CACHE, inline="always")
def lower_bound(a, lo, hi, x):
    """First k in [lo, hi) with a[k] >= x, else hi (searchsorted side="left"); a[lo:hi] sorted."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=NUMBA_CACHE, inline="always")
def upper_bound(a, lo, hi, x):
    """First k in [lo, hi) with a[k] > x, else hi (searchsorted side="right"); a[lo:hi] sorted."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo
