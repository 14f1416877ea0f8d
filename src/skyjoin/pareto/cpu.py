"""SkyAlign on multicore CPUs with Numba (Bøgh, Chester, Assent 2016, §5 and §7.1).

The CPU port of §7.1 is the NoSync form of Algorithm 1: no synchronisation
rounds, every thread takes the next chunk of 32 points in the <|M|, M> order
and compares each point with the points of its dominating-candidate cells
(proper subsets of its median mask, Eqs. 1-3, then Eq. 4 on quartile masks)
and of its own cell (Eq. 5, then the full dominance test).

Scheduling.  OpenMP's ``schedule(dynamic, 32)`` has no Numba equivalent (its
``prange`` splits the iteration space into one contiguous block per thread).
We emulate it with *virtual workers*: ``prange`` runs over V = 16 x threads
workers, worker w takes chunks w, w + V, w + 2V, ... of 32 points.  Cheap
(early-dying) and expensive (skyline) points are spread evenly over the
threads this way, which is what the dynamic schedule buys in the paper, and
``numba.parallel_chunksize(1)`` lets the threading layer hand out the workers
one at a time where it can.

The ``"sync"`` variant runs Algorithm 1 as written (d + 1 rounds, one per
order l, with repacking of the survivors after each round), for comparison.
All mask shortcuts are sound under ties: see :mod:`skyjoin.pareto.masks`.
"""

from __future__ import annotations

import time

import numba
import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE
from .._core.search import lower_bound
from .groups import expand_groups, group_candidates
from .masks import (cell_boundaries, compact_kept, gather_sorted, level_bounds, levels_no_worse,
                    masks_and_levels, no_worse, pick_pivots, popcount64, prefilter_keep,
                    rowmax_and_pivot_candidates, sort_by_order_and_mask, sorted_sample)
from .plan import CPU_VARIANTS

__all__ = ["skyalign_cpu", "CHUNK"]

CHUNK = 32          # §7.1: dynamic schedule of size 32 (the warp size)
DENSE_MAX_D = 20    # a dense mask -> cell table up to 2^20 entries
_BLOCK = 1 << 14    # rows per block of the parallel pre-filter passes
_SAMPLE = 1 << 14   # sample rows for the quartiles and fine-level bounds
# Once a point is known dominated its quartile mask is overwritten with all
# ones: every Eq. 4/5 test against it then fails (the masks have the bits >= d
# clear and `need` has them set), so the inner loops read no separate
# 'dominated' flag.  Q is stored in the narrowest word with a spare bit.


def quartile_dtype(d: int):
    """Word for the quartile masks: uint16 (d <= 15, a spare bit left) or
    uint64.  A uint32 middle size would be a third compiled specialisation of
    every kernel (compile time) for little gain."""
    return np.uint16 if d <= 15 else np.uint64


@njit(cache=NUMBA_CACHE, inline="always")
def _dominates_in(P, L, j, i, d, own):
    """Whether p_j dominates p_i, refuted first on the packed 7-bit levels L.
    In p_i's own cell (``own``) the full test p_j < p_i (ties are possible
    there); in the cell of a proper submask, p_j <_distinct p_i of
    Definition 1 (no worse everywhere).  O(d)."""
    if not levels_no_worse(L, j, i):
        return False
    return no_worse(P, j, i, d, own)


@njit(cache=NUMBA_CACHE, inline="always")
def _find_cell(s, dense, cmasks, cell_of_order):
    """Index of the non-empty cell with median mask s, or -1."""
    if dense.shape[0] > 0:
        return dense[s]
    o = popcount64(s)
    lo = lower_bound(cmasks, cell_of_order[o], cell_of_order[o + 1], s)
    if lo < cell_of_order[o + 1] and cmasks[lo] == s:
        return lo
    return -1


@njit(cache=NUMBA_CACHE, inline="always")
def _ctz64(x):
    """Count of trailing zero bits of a non-zero uint64."""
    return popcount64((x & (~x + np.uint64(1))) - np.uint64(1))


@njit(cache=NUMBA_CACHE, inline="always")
def _mask_tests(Q, lo, hi, need, flags):
    """Quartile-level mask tests (Eq. 4 / Eq. 5) of a whole cell at once,
    branch-free so that the loop vectorises: flags[t] = 1 iff p_(lo+t) passes
    (may dominate).  Zero-pads flags to whole 8-byte words; returns the count
    of words."""
    k = hi - lo
    Qs = Q[lo:hi]   # a slice: no negative-index wrap check, so LLVM vectorises
    for t in range(k):
        flags[t] = (Qs[t] & need) == 0
    nw = (k + 7) >> 3
    for t in range(k, nw * 8):
        flags[t] = 0
    return nw


@njit(cache=NUMBA_CACHE, inline="always")
def _scan_cell(P, L, Q, lo, hi, need, i, d, flags, fw, own):
    """Compare p_i with the points lo..hi of one cell: the mask test, then
    the dominance test of each point that passes it.  A dominating-candidate
    cell (Algorithm 1, lines 16-19): Eq. 4 on quartile masks, then the
    distinct-value test.  With ``own``, p_i's own cell (lines 21-24): Eq. 5,
    then the full dominance test (ties possible here), p_i itself skipped.
    Returns (dominated?, mask tests, dominance tests)."""
    nw = _mask_tests(Q, lo, hi, need, flags)
    nd = 0
    for w in range(nw):
        x = fw[w]
        while x != np.uint64(0):
            j = lo + w * 8 + np.int64(_ctz64(x) >> np.uint64(3))   # little-endian bytes
            x &= x - np.uint64(1)
            if own and j == i:
                continue
            nd += 1
            if _dominates_in(P, L, j, i, d, own):
                return True, hi - lo, nd
    return False, hi - lo, nd


@njit(cache=NUMBA_CACHE, inline="always")
def _scan(P, L, Q, gst, ng, lo, hi, c, need, i, d, flags, fw, own):
    """Compare p_i with cell c (points lo..hi) by _scan_cell.  When the cells
    are split into ng > 1 quartile groups (group g is gst[c, g]..gst[c, g + 1]),
    group by group: a group whose group bits (the Q bits of the first
    log2(ng) dimensions) meet ``need`` fails Eq. 4 (Eq. 5 in the own cell)
    for every one of its points and is skipped whole.  One _scan_cell site,
    so that the kernels inline one copy of it.  Returns (dominated?, mask
    tests, dominance tests)."""
    nm = 0
    nd = 0
    needg = np.int64(need) & (ng - 1)
    for g in range(ng):
        if ng > 1:
            if (g & needg) != 0:
                continue
            lo = gst[c, g]
            hi = gst[c, g + 1]
        if hi > lo:
            dom, a, b = _scan_cell(P, L, Q, lo, hi, need, i, d, flags, fw, own)
            nm += a
            nd += b
            if dom:
                return True, nm, nd
    return False, nm, nd


@njit(cache=NUMBA_CACHE, inline="always")
def _test_point(P, L, Q, gst, ng, starts, ends, cmasks, cell_of_order, dense, i, Mi, submasks,
                c_lo, c_hi, own_cell, d, flags, fw, needq, use_quart):
    """Compare p_i (median mask Mi) with its dominating-candidate cells, then
    with its own cell, one cell at a time, stopping at the first dominator.

    The candidate cells: with ``submasks``, the proper submasks of Mi in
    increasing order, looked up one by one (Eq. 1 by construction, one mask
    test per submask); else the cells c_lo..c_hi, each kept by Eq. 1 on its
    median mask (one mask test per cell).  A candidate cell c holds the points
    starts[c]..ends[c].  Then, unless ``own_cell`` < 0, p_i's own cell
    (starts[own_cell]..starts[own_cell + 1]).  Every cell goes through one
    _scan site (one inlined copy of the scans in the kernels).

    Returns (dominated?, mask tests, dominance tests).  O(cells + tests * d)."""
    nMi = ~Mi
    nQi = ~np.uint64(Q[i])
    nm = 0
    nd = 0
    s = np.uint64(0)            # the next submask (with ``submasks``)
    cc = c_lo                   # the next cell of c_lo..c_hi (without)
    phase = 0 if submasks else 1
    while True:
        own = False
        if phase == 0:
            if s == Mi:
                phase = 2
                continue
            c = _find_cell(s, dense, cmasks, cell_of_order)
            s = ((s | nMi) + np.uint64(1)) & Mi
            nm += 1
            if c < 0:
                continue
        elif phase == 1:
            if cc >= c_hi:
                phase = 2
                continue
            c = cc
            cc += 1
            nm += 1
            if (cmasks[c] & nMi) != np.uint64(0):
                continue
        else:
            if own_cell < 0:
                return False, nm, nd
            c = own_cell
            own = True
        if own:
            needq[0] = nQi
            hi = starts[c + 1]
        else:
            needq[0] = (cmasks[c] | nMi) & nQi
            hi = ends[c]
        dom, a, b = _scan(P, L, Q, gst, ng, starts[c], hi, c, needq[0], i, d, flags, fw, own)
        nm += a * use_quart
        nd += b
        if dom or own:
            return dom, nm, nd


@njit(cache=NUMBA_CACHE, inline="always")
def _worker_scratch(Q, starts):
    """One worker's scratch: the flags of the largest cell's mask tests
    (zero-padded to whole words; ``fw`` the same bytes as uint64 words) and
    ``needq``, one word of Q's width (a cell's ``need`` mask cast to it)."""
    maxcell = 1
    for c0 in range(starts.shape[0] - 1):
        maxcell = max(maxcell, starts[c0 + 1] - starts[c0])
    flags = np.zeros((maxcell // 8 + 2) * 8, dtype=np.uint8)
    return flags, flags.view(np.uint64), np.empty_like(Q[:1])


@njit(cache=NUMBA_CACHE, inline="always")
def _record(i, dom, nm, nd, Q, dominated, mts, dts):
    """Store p_i's outcome and test counts; a dominated point's quartile
    mask becomes all ones, so later mask tests skip it."""
    if dom:
        dominated[i] = 1
        Q[i] = Q[i] | ~Q[i]
    mts[i] = nm
    dts[i] = nd


@njit(cache=NUMBA_CACHE, parallel=True)
def skyalign_points(P, L, M, Q, order, point_cell, starts, ends, cmasks, cell_of_order, dense,
                    use_quart, n_virtual, p_lo, p_hi, dominated, mts, dts, gst, ng):
    """SkyAlign's per-point work (Algorithm 1, lines 14-24, all levels at once)
    for the sorted points p_lo..p_hi, in chunks of 32 (§7.1).

    Each point is tested against the points of every non-empty cell whose
    median mask is a proper subset of its own (Eq. 1; the candidates of cell c
    are starts[c]..ends[c]), then against its own cell.  Fills dominated,
    mts (mask tests) and dts (dominance tests)."""
    d = P.shape[1]
    nchunks = (p_hi - p_lo + CHUNK - 1) // CHUNK
    for w in prange(n_virtual):
        flags, fw, needq = _worker_scratch(Q, starts)
        for r in range((nchunks - w + n_virtual - 1) // n_virtual):
            lo_i = p_lo + (w + r * n_virtual) * CHUNK
            for i in range(lo_i, min(p_hi, lo_i + CHUNK)):
                ci = point_cell[i]
                oi = order[i]
                # submask enumeration where it takes fewer lookups (2^o_i) than
                # the cells before p_i's own (ci)
                sub = oi < 40 and (np.int64(1) << oi) <= ci
                dom, nm, nd = _test_point(P, L, Q, gst, ng, starts, ends, cmasks, cell_of_order,
                                          dense, i, M[i], sub, np.int64(0), ci, ci, d, flags, fw,
                                          needq, use_quart)
                _record(i, dom, nm, nd, Q, dominated, mts, dts)


@njit(cache=NUMBA_CACHE)
def group_starts(Q, starts, ng):
    """Start of every quartile group inside every cell (points sorted by
    group within their cell); shape (n_cells, ng + 1)."""
    nc = starts.shape[0] - 1
    gst = np.empty((nc, ng + 1), dtype=np.int64)
    for c in range(nc):
        lo = starts[c]
        hi = starts[c + 1]
        j = lo
        for g in range(ng):
            gst[c, g] = j
            while j < hi and (np.int64(Q[j]) & (ng - 1)) == g:
                j += 1
        gst[c, ng] = hi
    return gst


@njit(cache=NUMBA_CACHE, parallel=True)
def compact_cells(P, L, Q, idx, dominated, starts, ends, c_lo, c_hi):
    """Repack the survivors of cells c_lo..c_hi to the front of each cell
    (§5.2's repacking, per cell so that start indexes stay valid); sets ends."""
    d = P.shape[1]
    for cc in prange(c_lo, c_hi):
        w = starts[cc]
        for r in range(starts[cc], starts[cc + 1]):
            if dominated[r] == 0:
                if w != r:
                    for k in range(d):
                        P[w, k] = P[r, k]
                    for k in range(L.shape[1]):
                        L[w, k] = L[r, k]
                    Q[w] = Q[r]
                    idx[w] = idx[r]
                    dominated[w] = 0
                w += 1
        ends[cc] = w


@njit(cache=NUMBA_CACHE, parallel=True)
def skyalign_round(P, L, M, Q, order, point_cell, starts, cmasks, level, c_lo, c_hi,
                   use_quart, n_virtual):
    """One round (iteration l) of Algorithm 1, lines 13-24: points of order > l
    against the cells of order l (cells c_lo..c_hi), points of order l
    against their own cell."""
    m, d = P.shape
    dominated = np.zeros(m, dtype=np.uint8)
    mts = np.zeros(m, dtype=np.int64)
    dts = np.zeros(m, dtype=np.int64)
    nchunks = (m + CHUNK - 1) // CHUNK
    no_groups = np.empty((0, 2), dtype=np.int64)
    no_table = np.zeros(0, dtype=np.int64)     # no submask lookups here
    ends = starts[1:]
    for w in prange(n_virtual):
        flags, fw, needq = _worker_scratch(Q, starts)
        for r in range((nchunks - w + n_virtual - 1) // n_virtual):
            lo_i = (w + r * n_virtual) * CHUNK
            for i in range(lo_i, min(m, lo_i + CHUNK)):
                if order[i] > level:    # against the cells of order l
                    hi_c, own_cell = c_hi, np.int64(-1)
                else:                   # against its own cell
                    hi_c, own_cell = c_lo, point_cell[i]
                dom, nm, nd = _test_point(P, L, Q, no_groups, 1, starts, ends, cmasks, no_table,
                                          no_table, i, M[i], False, c_lo, hi_c, own_cell, d,
                                          flags, fw, needq, use_quart)
                _record(i, dom, nm, nd, Q, dominated, mts, dts)
    return dominated, mts, dts


@njit(cache=NUMBA_CACHE)
def _point_cells(starts, m):
    """Cell index of every sorted point."""
    pc = np.empty(m, dtype=np.int64)
    for c in range(starts.shape[0] - 1):
        for i in range(starts[c], starts[c + 1]):
            pc[i] = c
    return pc


def _cell_tables(Ms, d):
    """Cell starts/masks, each point's cell, cells per order, dense table."""
    starts, cmasks = cell_boundaries(Ms)
    m = Ms.shape[0]
    point_cell = _point_cells(starts, m)
    corder = np.bitwise_count(cmasks).astype(np.int64) if cmasks.size else np.zeros(0, np.int64)
    cell_of_order = np.searchsorted(corder, np.arange(d + 2)).astype(np.int64)
    if d <= DENSE_MAX_D:
        dense = np.full(1 << d, -1, dtype=np.int64)
        dense[cmasks.astype(np.int64)] = np.arange(cmasks.size, dtype=np.int64)
    else:
        dense = np.zeros(0, dtype=np.int64)
    return starts, cmasks, point_cell, cell_of_order, dense


def _n_virtual() -> int:
    """Virtual workers for the chunked round-robin schedule."""
    return 16 * max(1, numba.get_num_threads())


VARIANTS = CPU_VARIANTS


def skyalign_cpu(X: np.ndarray, variant: str = "nosync", prefilter: str = "tau+sum",
                 n_pivots: int = 32, groups: int | None = None, distinct: bool = False):
    """SkyAlign on the CPU; X is (n, d) float64 under minimisation.

    Returns (indices of skyline rows, unsorted-safe sorted int64; stats dict).
    ``variant``: "nosync" (§7.1, default), "sync" (Algorithm 1 with rounds),
    "noquart" (NoSync without the quartile-level masks, §6.2.3).
    ``prefilter``: "tau" (§5.1) or "tau+sum" (tau, then the Hybrid-style test
    against the ``n_pivots`` points of smallest sum, §7.1).
    ``groups``: split each cell into 2**groups quartile groups (0-6, d <= 16,
    "nosync" only; other variants ignore it).
    ``distinct``: keep only the lowest index of each group of equal points.

    Equal points: the survivors of the pre-filters (which hold every copy of
    every skyline point) are grouped by
    :func:`skyjoin.pareto.groups.group_candidates` (expected O(m d) for m
    survivors); quartiles, masks, sort and dominance run on one point per
    group, then the result is expanded back to every copy (or the group's
    lowest index), so k copies cost O(k) instead of the O(k**2) of the
    own-cell scans.
    """
    n, d = X.shape
    stats = {"algorithm": "skyalign", "variant": variant, "device": "cpu", "n": n, "d": d,
             "dominance_tests": 0, "mask_tests": 0, "times": {}}
    times = stats["times"]
    if n == 0:
        stats["prefilter_survivors"] = 0
        return np.zeros(0, dtype=np.int64), stats
    t0 = time.perf_counter()
    # §5.1 tau pre-filter and §7.1 pivot filter: one pass for the row maxima
    # and the pivot candidates (smallest sums), one for the tests.
    b = n_pivots if prefilter == "tau+sum" and n > 4 * n_pivots else 0
    rowmax, cand, csum = rowmax_and_pivot_candidates(X, _BLOCK, b)
    s = int(np.argmin(rowmax))
    piv = pick_pivots(cand, csum, b, X) if b else np.zeros(0, dtype=np.int64)
    PT = np.ascontiguousarray(X[piv].T)
    keep, counts, tau_counts = prefilter_keep(X, rowmax[s], s, PT, _BLOCK)
    idx = compact_kept(keep, counts, _BLOCK)
    stats["tau_survivors"] = int(tau_counts.sum())
    stats["prefilter_survivors"] = int(idx.size)
    stats["pivots"] = int(piv.size)
    t1 = time.perf_counter()
    times["prefilter"] = t1 - t0

    # Equal survivors (the copies of a point all survive or all die): one
    # per group (the lowest index) goes on, and the result is expanded to the
    # copies at the end.  The quartiles then come from distinct points too,
    # so that copies do not pull them onto one value.
    surv = idx
    eq = group_candidates(X, idx)
    if eq is not None:
        idx = surv[eq[1]]
    m = idx.size
    stats["distinct_survivors"] = int(m)
    # Quartiles (Algorithm 1, lines 3-5) and fine-level bounds from one
    # column-sorted sample of the survivors: exact when there are at most
    # _SAMPLE survivors, else within about 0.4 % of rank.  Any thresholds
    # keep every mask test sound (see masks.py); exact quartiles only balance
    # the cells, and a full selection per column cost more than the rest of
    # the initialisation.
    rows = idx if m <= _SAMPLE else np.sort(
        idx[np.random.default_rng(0).integers(0, m, size=_SAMPLE)])
    S = sorted_sample(X, rows)
    ns = S.shape[0]
    quart = S[[min((q * ns) // 4, ns - 1) for q in (1, 2, 3)]]
    M, Q, order, L = masks_and_levels(X, idx, quart, level_bounds(S))
    t2 = time.perf_counter()
    times["masks"] = t2 - t1
    # Optional quartile groups inside each cell (a second index level on the
    # Q bits of the first g dimensions, skipping whole groups by Eq. 4): off
    # unless asked for (docs/decisions/skyline-plan.md).  NoSync
    # only: NoQuart's masks are all zero, so no group may be skipped.
    g = 0
    if groups is not None and d <= 16 and variant == "nosync":
        g = int(np.clip(groups, 0, 6))
    ng = 1 << g
    perm = sort_by_order_and_mask(M, order, d, Q if g else None, g)
    use_quart = variant != "noquart"
    # working copy of Q (all ones for dominated points); NoQuart uses
    # all-zero quartile masks, so only the dead-point check remains.
    qdt = quartile_dtype(d)
    Qs = np.empty(m, dtype=qdt)
    P, L, M, order, idx = gather_sorted(X, idx, perm, M, Q, order, L, Qs)
    Q = Qs if use_quart else np.zeros(m, dtype=qdt)
    starts, cmasks, point_cell, cell_of_order, dense = _cell_tables(M, d)
    stats["cells"] = int(cmasks.size)
    stats["quartile_groups"] = ng
    gst = group_starts(Qs, starts, ng) if ng > 1 else np.zeros((1, 2), dtype=np.int64)
    t3 = time.perf_counter()
    times["sort"] = t3 - t2

    nv = _n_virtual()
    dominated = np.zeros(m, dtype=np.uint8)
    mts = np.zeros(m, dtype=np.int64)
    dts = np.zeros(m, dtype=np.int64)
    if variant in ("nosync", "noquart"):
        ends = starts[1:].copy()
        with numba.parallel_chunksize(1):
            skyalign_points(P, L, M, Q, order, point_cell, starts, ends, cmasks, cell_of_order,
                            dense, use_quart, nv, 0, m, dominated, mts, dts, gst, ng)
        sky = idx[dominated == 0]
        stats["mask_tests"] = int(mts.sum())
        stats["dominance_tests"] = int(dts.sum())
    elif variant == "levelwise":
        # one pass per order l: the points of order l against the (already
        # repacked) skyline points of lower cells and their own cell; then the
        # order-l cells are repacked, so later points never meet dead points.
        ends = starts[1:].copy()
        pstart = np.searchsorted(order, np.arange(d + 2)).astype(np.int64)
        with numba.parallel_chunksize(1):
            for level in range(d + 1):
                p_lo, p_hi = int(pstart[level]), int(pstart[level + 1])
                if p_hi == p_lo:
                    continue
                skyalign_points(P, L, M, Q, order, point_cell, starts, ends, cmasks,
                                cell_of_order, dense, use_quart, nv, p_lo, p_hi, dominated,
                                mts, dts, gst, 1)
                compact_cells(P, L, Q, idx, dominated, starts, ends,
                              int(cell_of_order[level]), int(cell_of_order[level + 1]))
        stats["mask_tests"] = int(mts.sum())
        stats["dominance_tests"] = int(dts.sum())
        sky = np.concatenate([idx[starts[c]:ends[c]] for c in range(cmasks.size)]) \
            if cmasks.size else np.zeros(0, np.int64)
    elif variant == "sync":
        out = []
        nmt = ndt = 0
        for level in range(d + 1):
            if P.shape[0] == 0:
                break
            starts, cmasks, point_cell, cell_of_order, _ = _cell_tables(M, d)
            c_lo, c_hi = int(cell_of_order[level]), int(cell_of_order[level + 1])
            with numba.parallel_chunksize(1):
                dominated, mts, dts = skyalign_round(P, L, M, Q, order, point_cell, starts,
                                                     cmasks, level, c_lo, c_hi, use_quart, nv)
            nmt += int(mts.sum())
            ndt += int(dts.sum())
            alive = dominated == 0
            done = alive & (order == level)      # line 26: order-l survivors are final
            out.append(idx[done])
            rest = alive & (order > level)       # line 25: repack the survivors
            P = np.ascontiguousarray(P[rest])
            L = np.ascontiguousarray(L[rest])
            M, Q, order, idx = M[rest], Q[rest], order[rest], idx[rest]
        sky = np.concatenate(out) if out else np.zeros(0, np.int64)
        stats["mask_tests"] = nmt
        stats["dominance_tests"] = ndt
    else:
        raise ValueError(f"unknown SkyAlign CPU variant {variant!r}; expected one of {VARIANTS}")
    t4 = time.perf_counter()
    times["skyline"] = t4 - t3
    sky = np.sort(sky.astype(np.int64))
    if eq is not None:
        sky = expand_groups(sky, surv, eq[0], distinct)
    times["total"] = time.perf_counter() - t0
    return sky, stats
