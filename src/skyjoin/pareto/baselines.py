"""Baseline skyline algorithms on the CPU: brute force, BNL, SFS, GGS-style.

All take (n, d) float64 under minimisation and return the sorted int64 row
indices of the skyline (every copy of equal points kept), plus a stats dict
with the dominance-test count of Definition 3.

Equal points: SFS and GGS presort by sum with a lexicographic tie-break, so
copies are adjacent; they run on the first of each run of equal rows and
expand the result (:mod:`skyjoin.pareto.groups`), and take ``distinct``.
Brute force and BNL compare every pair / the whole window as written (k
copies of a skyline point cost O(k**2) in BNL); the caller keeps the first
of equal points for them.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE
from .groups import expand_runs, run_starts
from .masks import dominates

__all__ = ["bruteforce", "bnl", "sfs", "ggs_cpu", "sum_order"]


def bruteforce(X: np.ndarray, block: int = 512):
    """Quadratic skyline by blocks of NumPy comparisons (for tests, small n).

    Point q is dropped iff some p has p <= q everywhere and p < q somewhere.
    """
    n, d = X.shape
    t0 = time.perf_counter()
    dominated = np.zeros(n, dtype=bool)
    for a in range(0, n, block):
        Q = X[a:a + block]                      # (b, d) candidates
        for c in range(0, n, block):
            Pb = X[c:c + block]                 # (e, d) dominators
            le = (Pb[None, :, :] <= Q[:, None, :]).all(axis=2)
            lt = (Pb[None, :, :] < Q[:, None, :]).any(axis=2)
            dominated[a:a + block] |= (le & lt).any(axis=1)
    sky = np.flatnonzero(~dominated).astype(np.int64)
    return sky, {"algorithm": "bruteforce", "device": "cpu", "n": n, "d": d,
                 "dominance_tests": n * max(n - 1, 0), "mask_tests": 0,
                 "times": {"total": time.perf_counter() - t0}}


@njit(cache=NUMBA_CACHE)
def _window_skyline(X, evict):
    """One pass over the points against a window of the skyline so far,
    unbounded (n slots).  With ``evict``, block-nested-loops (Börzsönyi et
    al. 2001): window points that the new point dominates leave the window.
    Without, sort-filter-skyline on presorted points (a dominator always
    comes first): the window only grows.  Returns (window, dominance tests);
    O(n * window) tests."""
    n, d = X.shape
    window = np.empty(n, dtype=np.int64)
    w = 0
    ndt = 0
    for i in range(n):
        dominated = False
        k = 0
        while k < w:
            j = window[k]
            ndt += 1
            if dominates(X, j, i, d):
                dominated = True
                break
            if evict:
                ndt += 1
                if dominates(X, i, j, d):
                    # drop j from the window (swap with last)
                    w -= 1
                    window[k] = window[w]
                    continue
            k += 1
        if not dominated:
            window[w] = i
            w += 1
    return window[:w].copy(), ndt


def bnl(X: np.ndarray):
    """Block-nested-loops skyline (sequential, Numba)."""
    t0 = time.perf_counter()
    sky, ndt = _window_skyline(np.ascontiguousarray(X), True)
    return np.sort(sky), {"algorithm": "bnl", "device": "cpu", "n": X.shape[0], "d": X.shape[1],
                          "dominance_tests": int(ndt), "mask_tests": 0,
                          "times": {"total": time.perf_counter() - t0}}


def sum_order(X: np.ndarray) -> np.ndarray:
    """Order by the sum of attributes, ties broken lexicographically.

    Float addition is monotone, so a dominator's computed sum is <= the
    dominated point's; on equal sums the lexicographic tie-break still puts
    the dominator first.  Hence every dominator precedes what it dominates.
    """
    s = X.sum(axis=1)
    keys = tuple(X[:, k] for k in range(X.shape[1] - 1, -1, -1)) + (s,)
    return np.lexsort(keys)


def _distinct_sorted(Xs: np.ndarray):
    """Xs (rows in sum order) reduced to the first of each run of equal rows,
    and the run flags (None when all rows are distinct)."""
    new = run_starts(Xs)
    if new.all():
        return Xs, None
    return np.ascontiguousarray(Xs[new]), new


def sfs(X: np.ndarray, distinct: bool = False):
    """SFS skyline (Chomicki et al. 2003): presort by sum, one pass (Numba),
    over one row per group of equal rows (adjacent after the presort)."""
    t0 = time.perf_counter()
    order = sum_order(X)
    Xs, new = _distinct_sorted(np.ascontiguousarray(X[order]))
    pos, ndt = _window_skyline(Xs, False)
    if new is not None:
        pos = expand_runs(pos, new, distinct)
    return np.sort(order[pos]), {"algorithm": "sfs", "device": "cpu", "n": X.shape[0],
                                 "d": X.shape[1], "dominance_tests": int(ndt), "mask_tests": 0,
                                 "times": {"total": time.perf_counter() - t0}}


@njit(cache=NUMBA_CACHE, parallel=True)
def _ggs_block(Xs, alive, lo, hi, d):
    """GGS phase 1: points lo..hi of the sorted order against their alive
    predecessors inside the block (in parallel); returns the block's flags."""
    out = np.zeros(hi - lo, dtype=np.uint8)
    for t in prange(hi - lo):
        i = lo + t
        if not alive[i]:
            continue
        for j in range(lo, i):
            if alive[j] and dominates(Xs, j, i, d):
                out[t] = 1
                break
    return out


@njit(cache=NUMBA_CACHE, parallel=True)
def _ggs_filter(Xs, alive, sky, lo, d):
    """GGS phase 2: every alive point after lo against the new skyline points."""
    n = Xs.shape[0]
    cnt = 0
    for i in prange(lo, n):
        if alive[i]:
            for u in range(sky.shape[0]):
                if dominates(Xs, sky[u], i, d):
                    alive[i] = 0
                    break
    return cnt


def ggs_cpu(X: np.ndarray, alpha: int = 1024, distinct: bool = False):
    """GGS-style sort-based skyline (Bøgh et al. 2013) on the CPU: presort by
    sum; take the next alpha alive points, settle them among themselves, then
    filter every later point against the new skyline points; repeat.  Runs
    over one row per group of equal rows (adjacent after the presort)."""
    t0 = time.perf_counter()
    n, d = X.shape
    order = sum_order(X)
    Xs, new = _distinct_sorted(np.ascontiguousarray(X[order]))
    n = Xs.shape[0]
    alive = np.ones(n, dtype=np.uint8)
    result = []
    pos = 0
    while pos < n:
        live = np.flatnonzero(alive[pos:]) + pos
        if live.size == 0:
            break
        blk = live[:alpha]
        # compact the block so the in-block test reads contiguous rows
        Xb = np.ascontiguousarray(Xs[blk])
        ab = np.ones(blk.size, dtype=np.uint8)
        dom = _ggs_block(Xb, ab, 0, blk.size, d)
        sky_b = blk[dom == 0]
        result.append(sky_b)
        alive[blk] = 0
        nxt = int(blk[-1]) + 1
        if nxt < n and sky_b.size:
            _ggs_filter(Xs, alive, sky_b.astype(np.int64), nxt, d)
        pos = nxt
    sky = np.concatenate(result) if result else np.zeros(0, np.int64)
    if new is not None:
        sky = expand_runs(sky, new, distinct)
    return np.sort(order[sky]), {"algorithm": "ggs", "device": "cpu", "n": X.shape[0], "d": d,
                                 "dominance_tests": None, "mask_tests": 0,
                                 "times": {"total": time.perf_counter() - t0}}
