"""The 2-D skyline by sort and scan (Kung, Luccio, Preparata 1975), NumPy only.

Under minimisation, sort the points by x.  A point q is dominated iff some
point p has x_p < x_q and y_p <= y_q, or x_p == x_q and y_p < y_q.  So, in
x order, q is on the skyline iff y_q is below the least y of every point of
smaller x (the prefix minimum up to q's group of equal x) and equal to the
least y of its own group.  Points equal to q in both coordinates never
dominate it: every copy of a skyline point is kept, and ``distinct`` keeps
the lowest row index of each group of copies.

Nothing is compiled (no Numba kernel): the first call costs what the
later ones do.  Two linear pre-filters, each removing only points that a
point of the input dominates, shrink the sort:

* **tau** (Bøgh, Chester, Assent 2016, §5.1): the point s of least
  max(x, y) = tau dominates every point whose smaller coordinate exceeds
  tau.
* **the staircase of a sample**: the x range is cut into :data:`BINS`
  bins, by a bin number that never decreases as x grows, so that a point
  of a lower bin has a strictly smaller x.  The least y of a strided
  sample of the rows in each bin, taken as a running minimum over the bins
  below, is a y that a point of strictly smaller x reaches: a point whose
  y is not below it is dominated.  (Left out where the x range is one
  value or overflows float64.)

Every skyline point survives both, and every dominated survivor is
dominated by a skyline point (which survives), so the sort and scan of the
survivors gives the exact skyline.  The pre-filters read X by blocks of
:data:`BLOCK` rows, so that their temporaries are reused, not n values
each.  Values are compared as they are; the
caller passes the exact float64 matrix of :mod:`skyjoin.pareto.columns`
(-0.0 is read as +0.0).

Cost: O(n) for the pre-filters, O(m log m) to sort the m survivors and O(m)
to scan them; memory O(n).  In the worst case (every point on the
skyline) m = n.

References
----------
H. T. Kung, F. Luccio, F. P. Preparata, "On finding the maxima of a set of
vectors", Journal of the ACM 22(4), 1975.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["skyline_2d", "BINS", "SAMPLE", "BLOCK"]

#: bins of the staircase pre-filter
BINS = 1024
#: points of the strided sample that sets each bin's least y
SAMPLE = 16 * BINS
#: rows per block of the pre-filter passes (their temporaries stay in cache
#: and are reused, instead of arrays of n values touched once)
BLOCK = 1 << 16


def _bounds(X: np.ndarray) -> tuple[float, float, float]:
    """(tau, least x, largest x) of X, one pass by blocks.  O(n)."""
    n = X.shape[0]
    buf = np.empty(min(n, BLOCK))
    tau, lo, hi = np.inf, np.inf, -np.inf
    for a in range(0, n, BLOCK):
        xb, yb = X[a:a + BLOCK, 0], X[a:a + BLOCK, 1]
        tau = min(tau, np.maximum(xb, yb, out=buf[:xb.size]).min())
        lo, hi = min(lo, xb.min()), max(hi, xb.max())
    return float(tau), float(lo), float(hi)


def _bins(x: np.ndarray, lo: float, width: float) -> np.ndarray:
    """Bin number of every x in [lo, lo + width]: 0 .. BINS - 1, never
    decreasing as x grows ((x - lo) <= width, so every step is monotone)."""
    b = ((x - lo) / width * BINS).astype(np.int64)
    return np.minimum(b, BINS - 1, out=b)


def _staircase(X: np.ndarray, lo: float, width: float) -> np.ndarray:
    """For every bin, the least y of the sampled points (every
    ``n // SAMPLE``-th row) in the bins below it (inf for the first).
    O(SAMPLE + BINS)."""
    step = max(1, X.shape[0] // SAMPLE)
    least = np.full(BINS, np.inf)
    np.minimum.at(least, _bins(X[::step, 0], lo, width), X[::step, 1])
    below = np.empty(BINS)
    below[0] = np.inf
    np.minimum.accumulate(least[:-1], out=below[1:])
    return below


def _prefilter(X: np.ndarray) -> tuple[np.ndarray, int]:
    """The rows of X that survive both pre-filters (increasing), and how
    many survived tau alone.  Two passes by blocks, O(n)."""
    n = X.shape[0]
    tau, lo, hi = _bounds(X)
    with np.errstate(over="ignore"):
        width = hi - lo
    # one x value, or a range float64 cannot hold: no bins, tau alone
    below = _staircase(X, lo, width) if np.isfinite(width) and width > 0 else None
    buf = np.empty(min(n, BLOCK))
    flag = np.empty(min(n, BLOCK), dtype=bool)
    out, n_tau = [], 0
    for a in range(0, n, BLOCK):
        xb, yb = X[a:a + BLOCK, 0], X[a:a + BLOCK, 1]
        k = xb.size
        rows = np.flatnonzero(np.less_equal(np.minimum(xb, yb, out=buf[:k]), tau, out=flag[:k]))
        n_tau += rows.size
        if below is not None and rows.size:
            rows = rows[yb[rows] < below[_bins(xb[rows], lo, width)]]
        out.append(rows + a)
    return np.concatenate(out), n_tau


def _sort_scan(x: np.ndarray, y: np.ndarray, distinct: bool) -> np.ndarray:
    """Positions of the skyline of the points (x, y), by the rule of the
    module: sort by x, then one scan of prefix minima.  With ``distinct``,
    the least position of each group of equal skyline points (positions are
    row order, so this is the lowest row index).  O(m log m)."""
    order = np.argsort(x)
    xs, ys = x[order], y[order]
    new = np.empty(xs.size, dtype=bool)
    new[0] = True
    np.not_equal(xs[1:], xs[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    least = np.minimum.reduceat(ys, starts)            # each x group's least y
    before = np.empty(starts.size)                     # least y of smaller x
    before[0] = np.inf
    np.minimum.accumulate(least[:-1], out=before[1:])
    group = np.cumsum(new) - 1
    keep = (ys < before[group]) & (ys == least[group])
    pos = order[keep]
    if distinct and pos.size > 1:
        # the kept points of one x group are equal (same x, the group's least y)
        g = group[keep]
        first = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
        pos = np.minimum.reduceat(pos, first)
    return pos


def skyline_2d(X: np.ndarray, distinct: bool = False):
    """The skyline of the rows of X, (n, 2) float64 under minimisation.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, 2)
        Under minimisation, exact (see :mod:`skyjoin.pareto.columns`).
    distinct : bool
        Keep only the lowest row index of each group of equal skyline points.

    Returns
    -------
    sky : numpy.ndarray of int64
        Sorted row indices of the skyline.
    stats : dict
        "algorithm" ("sort2d"), "device", "n", "d"; "tau_survivors" (rows
        left by the tau pre-filter) and "prefilter_survivors" (rows left by
        both pre-filters: the rows sorted); "dominance_tests" and
        "mask_tests" are None (the scan compares each sorted row with one
        running minimum, never two rows); "times": "prefilter", "sort"
        (sort and scan), "total" (s).

    Raises
    ------
    ValueError
        If X does not have two columns.

    Notes
    -----
    O(n) for the pre-filters plus O(m log m) for the m rows they keep; see
    the module's notes for the rule.
    """
    n, d = X.shape
    if d != 2:
        raise ValueError(f"the 2-D skyline takes 2 columns, got {d}")
    stats = {"algorithm": "sort2d", "device": "cpu", "n": n, "d": d,
             "dominance_tests": None, "mask_tests": None, "tau_survivors": n,
             "prefilter_survivors": n, "times": {}}
    t0 = time.perf_counter()
    if n == 0:
        return np.zeros(0, dtype=np.int64), stats
    rows, stats["tau_survivors"] = _prefilter(X)
    x = X[rows, 0] + 0.0                # -0.0 + 0.0 == +0.0, for the sort
    y = X[rows, 1] + 0.0
    stats["prefilter_survivors"] = int(rows.size)
    t1 = time.perf_counter()
    sky = np.sort(rows[_sort_scan(x, y, distinct)]).astype(np.int64, copy=False)
    t2 = time.perf_counter()
    stats["times"] = {"prefilter": t1 - t0, "sort": t2 - t1, "total": t2 - t0}
    return sky, stats
