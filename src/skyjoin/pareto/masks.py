"""SkyAlign's initialisation on the CPU: tau pre-filter, quartiles, masks, sort.

Everything here works on points already turned into pure minimisation
(columns to maximise negated, -0.0 normalised to +0.0, float64).

Soundness under ties (the paper assumes distinct values; our data has ties)
--------------------------------------------------------------------------
Per dimension the masks place a value v on one of four *levels*
``L(v) = 2*M + Q`` with ``M = v > quart2`` and ``Q = v > (M ? quart3 : quart1)``.
L is a non-decreasing function of v, so

    L(p_j[k]) > L(p_i[k])  ==>  p_j[k] > p_i[k]          (strictly)

holds whatever the ties: equal values always get equal levels.  Every mask
test of Eqs. 1-5 only ever concludes "p_j is strictly worse than p_i on some
dimension k", i.e. from a bit set in p_j's (median or quartile) mask and clear
in p_i's on a dimension where the coarser masks agree; that is exactly
L(p_j[k]) > L(p_i[k]), hence ``p_j`` cannot dominate ``p_i``.  So every mask
shortcut is sound with ties and duplicates.

The *distinct-value* dominance test (``p_j <=`` ``p_i`` everywhere, without
checking that they differ) is only used across different median-level cells:
there ``M_j`` is a proper subset of ``M_i``, so some k has ``M_j[k] = 0 <
M_i[k] = 1``, i.e. ``p_j[k] <= quart2 < p_i[k]``: the points differ, and "no
worse everywhere" is then dominance.  Within a cell the full test (no worse
everywhere and strictly better somewhere) is used, so equal points never
dominate each other.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import get_num_threads, njit, prange

from .._core.config import NUMBA_CACHE

_U1 = np.uint64(1)


@njit(cache=NUMBA_CACHE, inline="always")
def popcount64(x):
    """Number of set bits of a uint64 (SWAR)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=NUMBA_CACHE, parallel=True)
def _quartiles(P, k1, k2, k3):
    """Order statistics k1 <= k2 <= k3 of every column (columns in parallel)."""
    m, d = P.shape
    out = np.empty((3, d), dtype=np.float64)
    for k in prange(d):
        col = P[:, k].copy()
        a = np.partition(col, k2)
        out[1, k] = a[k2]
        lo = np.partition(a[:k2 + 1], k1)      # k1 <= k2: the lower part holds it
        out[0, k] = lo[k1]
        hi = np.partition(a[k2:], k3 - k2)
        out[2, k] = hi[k3 - k2]
    return out


def quartiles(P: np.ndarray) -> np.ndarray:
    """Quartiles per dimension (Algorithm 1, lines 3-5): quart_i = P[floor(i*m/4)]
    of each column sorted; returns an array of shape (3, d)."""
    m, d = P.shape
    ks = [min((q * m) // 4, m - 1) for q in (1, 2, 3)]
    return _quartiles(P, ks[0], ks[1], ks[2])


@njit(cache=NUMBA_CACHE, inline="always")
def _mask_bits(v, k, quart, mm, qq, c):
    """Value v of dimension k added to a point's median mask mm, quartile mask
    qq and |M| count c (§4.2.2): bit k of mm iff v > quart2, of qq iff v lies
    in the upper half of its median half."""
    bit = np.uint64(1) << np.uint64(k)
    if v > quart[1, k]:
        mm |= bit
        c += 1
        if v > quart[2, k]:
            qq |= bit
    elif v > quart[0, k]:
        qq |= bit
    return mm, qq, c


@njit(cache=NUMBA_CACHE, parallel=True)
def median_quartile_masks(P, quart):
    """Median-level and quartile-level bitmasks of §4.2.2 (Algorithm 1, lines
    6-9), bit k for dimension k; also |M| (the order)."""
    m, d = P.shape
    M = np.empty(m, dtype=np.uint64)
    Q = np.empty(m, dtype=np.uint64)
    order = np.empty(m, dtype=np.int64)
    for i in prange(m):
        mm = np.uint64(0)
        qq = np.uint64(0)
        c = 0
        for k in range(d):
            mm, qq, c = _mask_bits(P[i, k], k, quart, mm, qq, c)
        M[i] = mm
        Q[i] = qq
        order[i] = c
    return M, Q, order


def median_mask(P: np.ndarray, quart: np.ndarray) -> np.ndarray:
    """Median-level masks M of §4.2.2 only (bit k set iff p[k] > quart2[k])."""
    return median_quartile_masks(P, quart)[0]


def quartile_mask(P: np.ndarray, quart: np.ndarray) -> np.ndarray:
    """Quartile-level masks Q of §4.2.2 only."""
    return median_quartile_masks(P, quart)[1]


@njit(cache=NUMBA_CACHE, parallel=True)
def _levels_from_bounds(P, bounds, nb):
    """L[i, k] = number of bounds[k, :nb[k]] strictly below P[i, k]."""
    m, d = P.shape
    L = np.empty((m, d), dtype=np.uint8)
    for i in prange(m):
        for k in range(d):
            v = P[i, k]
            lo = 0
            hi = nb[k]
            while lo < hi:
                mid = (lo + hi) >> 1
                if bounds[k, mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            L[i, k] = lo
    return L


def fine_levels(P: np.ndarray, n_levels: int = 128, sample: int = 16384,
                seed: int = 0) -> np.ndarray:
    """Per-dimension 8-bit levels (a finer, third resolution than quartiles).

    ``L[i, k]`` is the number of boundaries below ``P[i, k]``, the boundaries
    being quantiles of a sample of column k.  L is non-decreasing in the
    value, so ``L[j, k] > L[i, k]`` implies ``P[j, k] > P[i, k]`` whatever the
    boundaries or ties: a byte compare refutes most dominance tests from a
    cache-resident array before the float64 rows are read.
    """
    m, d = P.shape
    if m == 0:
        return np.empty((0, d), dtype=np.uint8)
    rng = np.random.default_rng(seed)
    S = P[rng.integers(0, m, size=sample)] if m > sample else P
    S = np.sort(S, axis=0)
    pos = (np.arange(1, n_levels) * S.shape[0]) // n_levels
    bounds = np.empty((d, n_levels - 1), dtype=np.float64)
    nb = np.empty(d, dtype=np.int64)
    for k in range(d):
        u = np.unique(S[pos, k])
        nb[k] = u.size
        bounds[k, :u.size] = u
    return _levels_from_bounds(P, bounds, nb)


def pack_levels(L: np.ndarray) -> np.ndarray:
    """Pack 7-bit levels, 8 dimensions per uint64 word (little-endian bytes,
    unused bytes 0), for the branch-free test of :func:`levels_no_worse`."""
    m, d = L.shape
    W = (d + 7) // 8
    pad = np.zeros((m, 8 * W), dtype=np.uint8)
    pad[:, :d] = L
    return np.ascontiguousarray(pad).view(np.uint64).reshape(m, W)


_H = np.uint64(0x8080808080808080)


@njit(cache=NUMBA_CACHE, inline="always")
def levels_no_worse(Lw, j, i):
    """Whether L[j, k] <= L[i, k] on every dimension (SWAR on packed 7-bit
    levels: byte k of (L_i | 0x80) - L_j keeps its top bit iff L_j <= L_i,
    and no byte borrows since 128 + L_i - L_j >= 1)."""
    for w in range(Lw.shape[1]):
        if (((Lw[i, w] | _H) - Lw[j, w]) & _H) != _H:
            return False
    return True


@njit(cache=NUMBA_CACHE, inline="always")
def no_worse(X, j, i, d, strict):
    """Whether X[j] is no worse than X[i] on every one of the d dimensions
    (under minimisation) and, with ``strict``, strictly better on one: with
    ``strict`` the full dominance X[j] < X[i], without it Definition 1's
    X[j] <_distinct X[i] for points known to differ.  O(d), exits at the
    first dimension where X[j] is worse."""
    lt = not strict
    for k in range(d):
        a = X[j, k]
        b = X[i, k]
        if a > b:
            return False
        if a < b:
            lt = True
    return lt


@njit(cache=NUMBA_CACHE, inline="always")
def dominates(X, j, i, d):
    """Full dominance X[j] < X[i] under minimisation: no worse on every one
    of the d dimensions and strictly better on one.  O(d); see
    :func:`no_worse`."""
    return no_worse(X, j, i, d, True)


@njit(cache=NUMBA_CACHE)
def _counting_sort(M, Q, rank, g):
    """Stable counting sort of points by (rank[M], low g bits of Q)."""
    m = M.shape[0]
    nb = rank.shape[0] << g
    low = (1 << g) - 1
    cnt = np.zeros(nb + 1, dtype=np.int64)
    for i in range(m):
        cnt[((rank[M[i]] << g) | (np.int64(Q[i]) & low)) + 1] += 1
    for b in range(nb):
        cnt[b + 1] += cnt[b]
    perm = np.empty(m, dtype=np.int64)
    for i in range(m):
        r = (rank[M[i]] << g) | (np.int64(Q[i]) & low)
        perm[cnt[r]] = i
        cnt[r] += 1
    return perm


@functools.lru_cache(maxsize=None)
def _mask_rank(d: int) -> np.ndarray:
    """rank[mask] = position of mask in the <|M|, M> order of all 2^d masks."""
    masks = np.arange(1 << d, dtype=np.uint64)
    key = (np.bitwise_count(masks).astype(np.uint64) << np.uint64(d)) | masks
    rank = np.empty(1 << d, dtype=np.int64)
    rank[np.argsort(key, kind="stable")] = np.arange(1 << d)
    return rank


def sort_by_order_and_mask(M: np.ndarray, order: np.ndarray, d: int, Q=None, g: int = 0) -> np.ndarray:
    """Permutation sorting points by <|M|, M> (Algorithm 1, line 10); stable.
    A counting sort over the 2^d possible masks for d <= 16, else argsort.
    With Q and g > 0 (d <= 16 only), points of a cell are further grouped by
    the low g bits of their quartile mask."""
    if d <= 16:
        if Q is None or g == 0:
            Q, g = M, 0
        return _counting_sort(M, Q, _mask_rank(d), g)
    if d <= 56:
        key = (order.astype(np.uint64) << np.uint64(d)) | M
        return np.argsort(key, kind="stable")
    return np.lexsort((M, order))


@njit(cache=NUMBA_CACHE)
def cell_boundaries(Ms):
    """Start offsets (plus end sentinel) and masks of the non-empty median-level
    cells of points sorted by <|M|, M> (§5.2: 'start index' array)."""
    m = Ms.shape[0]
    cnt = 0
    for i in range(m):
        if i == 0 or Ms[i] != Ms[i - 1]:
            cnt += 1
    starts = np.empty(cnt + 1, dtype=np.int64)
    masks = np.empty(cnt, dtype=np.uint64)
    c = 0
    for i in range(m):
        if i == 0 or Ms[i] != Ms[i - 1]:
            starts[c] = i
            masks[c] = Ms[i]
            c += 1
    starts[cnt] = m
    return starts, masks


# --------------------------------------------------------------------------
# Fused initialisation of the CPU port (§5.1 pre-filter, §7.1 pivot filter,
# §4.2.2 masks, the <|M|, M> sort of Algorithm 1 line 10), in few parallel
# passes: every pass over the points is parallel, and the points are read
# from X only twice (pre-filter) and gathered once in sorted order.
# --------------------------------------------------------------------------
def rowmax_and_pivot_candidates(X, block, k):
    """One pass over X: the maximum of every row (for tau, §5.1) and, per block
    of rows, the k rows of smallest coordinate sum (candidates for the pivot
    filter of §7.1), kept sorted by an insertion step that rarely runs.
    Returns (rowmax, cand (n_blocks, k) row ids or -1, candsum).  Blocks run
    on Numba's threads (:func:`_rowmax_blocks`)."""
    n = X.shape[0]
    nb = max(1, (n + block - 1) // block)
    rowmax = np.empty(n, dtype=np.float64)
    cand = np.full((nb, k), -1, dtype=np.int64)
    csum = np.full((nb, k), np.inf, dtype=np.float64)
    _rowmax_parallel(X, block, k, rowmax, cand, csum, nb)
    return rowmax, cand, csum


@njit(cache=NUMBA_CACHE, parallel=True)
def _rowmax_parallel(X, block, k, rowmax, cand, csum, nb):
    """The blocks of :func:`_rowmax_blocks` on Numba's threads."""
    for b in prange(nb):
        b0 = np.int64(b)        # one signature of the range kernel, not one per index type
        _rowmax_blocks(X, block, k, rowmax, cand, csum, b0, b0 + 1)


@njit(cache=NUMBA_CACHE, nogil=True)
def _rowmax_blocks(X, block, k, rowmax, cand, csum, b0, b1):
    """:func:`rowmax_and_pivot_candidates` for the blocks [b0, b1)."""
    n, d = X.shape
    for b in range(b0, b1):
        for i in range(b * block, min(n, (b + 1) * block)):
            m = X[i, 0]
            s = X[i, 0]
            for t in range(1, d):
                v = X[i, t]
                s += v
                if v > m:
                    m = v
            rowmax[i] = m
            if k > 0 and s < csum[b, k - 1]:
                j = k - 1
                while j > 0 and csum[b, j - 1] > s:
                    csum[b, j] = csum[b, j - 1]
                    cand[b, j] = cand[b, j - 1]
                    j -= 1
                csum[b, j] = s
                cand[b, j] = i


def pick_pivots(cand: np.ndarray, csum: np.ndarray, k: int,
                X: np.ndarray | None = None) -> np.ndarray:
    """The k rows of smallest sum among the per-block candidates, distinct
    rows of X when X is given: copies of one point filter no more than the
    point does, so k copies of the minimum would leave one pivot.  Equal
    rows have equal sums, so the rows are compared (np.unique over the
    candidates, O(c log c) for c = n_blocks * k) only when two of the
    smallest sums tie."""
    ok = cand.ravel() >= 0
    c, s = cand.ravel()[ok], csum.ravel()[ok]
    o = np.argsort(s, kind="stable")
    c, s = c[o], s[o]
    if X is not None and c.size > 1 and bool((s[1:k + 1] == s[:min(k, c.size - 1)]).any()):
        first = np.unique(X[c], axis=0, return_index=True)[1]
        c = c[np.sort(first)]                   # first copies, still by sum
    return np.sort(c[:k])


def prefilter_keep(X, tau, s, PT, block):
    """tau pre-filter (§5.1, exact under ties: a point with every coordinate
    >= tau is kept only if it equals s) and the pivot filter of the CPU port
    (§7.1: full dominance test against the pivots, columns of PT (d, b)).
    The pivot test is branch-free over the pivots (worse/better flags per
    pivot, one sweep per dimension), so it vectorises.  Returns
    (keep flags, kept count per block, tau survivors per block); blocks run
    on Numba's threads (:func:`_prefilter_blocks`)."""
    n = X.shape[0]
    nb = max(1, (n + block - 1) // block)
    keep = np.empty(n, dtype=np.uint8)
    counts = np.zeros(nb, dtype=np.int64)
    tcounts = np.zeros(nb, dtype=np.int64)
    _prefilter_parallel(X, float(tau), int(s), PT, block, keep, counts, tcounts, nb)
    return keep, counts, tcounts


@njit(cache=NUMBA_CACHE, parallel=True)
def _prefilter_parallel(X, tau, s, PT, block, keep, counts, tcounts, nb):
    """The blocks of :func:`_prefilter_blocks` on Numba's threads."""
    for b in prange(nb):
        b0 = np.int64(b)
        _prefilter_blocks(X, tau, s, PT, block, keep, counts, tcounts, b0, b0 + 1)


@njit(cache=NUMBA_CACHE, nogil=True)
def _prefilter_blocks(X, tau, s, PT, block, keep, counts, tcounts, b0, b1):
    """:func:`prefilter_keep` for the blocks [b0, b1)."""
    n, d = X.shape
    b = PT.shape[1]
    for blk in range(b0, b1):
        worse = np.empty(b, dtype=np.uint8)
        better = np.empty(b, dtype=np.uint8)
        cnt = 0
        tcnt = 0
        for i in range(blk * block, min(n, (blk + 1) * block)):
            below = False
            for t in range(d):
                below |= X[i, t] < tau
            kp = below
            if not below:
                kp = True
                for t in range(d):
                    if X[i, t] != X[s, t]:
                        kp = False
                        break
            tcnt += 1 if kp else 0
            if kp and b > 0:
                for u in range(b):
                    worse[u] = 0
                    better[u] = 0
                for t in range(d):
                    c = X[i, t]
                    for u in range(b):
                        worse[u] |= PT[t, u] > c
                        better[u] |= PT[t, u] < c
                dom = np.uint8(0)
                for u in range(b):
                    dom |= better[u] & (worse[u] ^ np.uint8(1))
                kp = dom == 0
            keep[i] = 1 if kp else 0
            cnt += 1 if kp else 0
        counts[blk] = cnt
        tcounts[blk] = tcnt


@njit(cache=NUMBA_CACHE, parallel=True)
def compact_kept(keep, counts, block):
    """Indices of the kept rows, in increasing order: each block of rows
    writes its kept rows at the offset its count gives (parallel)."""
    nb = counts.shape[0]
    off = np.zeros(nb + 1, dtype=np.int64)
    for b in range(nb):
        off[b + 1] = off[b] + counts[b]
    idx = np.empty(off[nb], dtype=np.int64)
    n = keep.shape[0]
    for b in prange(nb):
        w = off[b]
        for i in range(b * block, min(n, (b + 1) * block)):
            if keep[i]:
                idx[w] = i
                w += 1
    return idx


def sorted_sample(X, rows):
    """X[rows] with every column sorted (NumPy: O(m d log m) for m rows)."""
    return np.sort(np.asarray(X, dtype=np.float64)[rows], axis=0)


def row_spans(m: int, min_rows: int = 4096) -> np.ndarray:
    """Bounds of the row spans of a parallel pass over m rows: about four per
    Numba thread (for balance), each of at least ``min_rows`` rows."""
    k = max(1, min(4 * get_num_threads(), -(-m // min_rows)))
    return (np.arange(k + 1, dtype=np.int64) * m) // k


def level_bounds(S: np.ndarray, n_levels: int = 128) -> np.ndarray:
    """Boundaries of the fine levels from a column-sorted sample S: the
    distinct sample quantiles at 1/n_levels steps, padded with +inf to
    n_levels entries per dimension (for a branch-free binary search)."""
    ns, d = S.shape
    pos = (np.arange(1, n_levels) * ns) // n_levels
    bounds = np.full((d, n_levels), np.inf, dtype=np.float64)
    for k in range(d):
        u = np.unique(S[pos, k])
        bounds[k, :u.size] = u
    return bounds


def masks_and_levels(X, idx, quart, bounds):
    """For the rows X[idx]: median-level and quartile-level masks and |M|
    (§4.2.2, Algorithm 1 lines 6-9) and the packed 7-bit fine levels (the
    count of bounds below each value, see :func:`fine_levels`), in one pass
    (spans of rows on Numba's threads, :func:`_masks_and_levels_rows`).
    bounds has 128 entries per dimension (+inf padded); the search is
    branch-free (7 halvings)."""
    m = idx.shape[0]
    W = (X.shape[1] + 7) // 8
    M = np.empty(m, dtype=np.uint64)
    Q = np.empty(m, dtype=np.uint64)
    order = np.empty(m, dtype=np.int64)
    L = np.zeros((m, W), dtype=np.uint64)
    _masks_and_levels_parallel(X, idx, quart, bounds, M, Q, order, L, row_spans(m))
    return M, Q, order, L


@njit(cache=NUMBA_CACHE, parallel=True)
def _masks_and_levels_parallel(X, idx, quart, bounds, M, Q, order, L, spans):
    """The row spans of :func:`_masks_and_levels_rows` on Numba's threads."""
    for r in prange(spans.shape[0] - 1):
        _masks_and_levels_rows(X, idx, quart, bounds, M, Q, order, L, spans[r], spans[r + 1])


@njit(cache=NUMBA_CACHE, nogil=True)
def _masks_and_levels_rows(X, idx, quart, bounds, M, Q, order, L, t0, t1):
    """:func:`masks_and_levels` for the rows [t0, t1) of idx."""
    d = X.shape[1]
    for t in range(t0, t1):
        i = idx[t]
        mm = np.uint64(0)
        qq = np.uint64(0)
        c = 0
        for k in range(d):
            v = X[i, k]
            mm, qq, c = _mask_bits(v, k, quart, mm, qq, c)
            pos = 0
            step = 64
            while step > 0:
                pos += step if bounds[k, pos + step - 1] < v else 0
                step >>= 1
            L[t, k >> 3] |= np.uint64(pos) << np.uint64(8 * (k & 7))
        M[t] = mm
        Q[t] = qq
        order[t] = c


def gather_sorted(X, idx, perm, M, Q, order, L, Qout):
    """Apply the sort permutation: rows X[idx[perm]] and the masks, levels and
    indices in the same order, in one pass over spans of rows on Numba's
    threads (Q cast to Qout's word)."""
    m = perm.shape[0]
    P = np.empty((m, X.shape[1]), dtype=np.float64)
    Ls = np.empty((m, L.shape[1]), dtype=np.uint64)
    Ms = np.empty(m, dtype=np.uint64)
    os_ = np.empty(m, dtype=np.int64)
    ids = np.empty(m, dtype=np.int64)
    _gather_sorted_parallel(X, idx, perm, M, Q, order, L, Qout, P, Ls, Ms, os_, ids,
                            row_spans(m))
    return P, Ls, Ms, os_, ids


@njit(cache=NUMBA_CACHE, parallel=True)
def _gather_sorted_parallel(X, idx, perm, M, Q, order, L, Qout, P, Ls, Ms, os_, ids, spans):
    """The row spans of :func:`_gather_sorted_rows` on Numba's threads."""
    for r in prange(spans.shape[0] - 1):
        _gather_sorted_rows(X, idx, perm, M, Q, order, L, Qout, P, Ls, Ms, os_, ids, spans[r],
                            spans[r + 1])


@njit(cache=NUMBA_CACHE, nogil=True)
def _gather_sorted_rows(X, idx, perm, M, Q, order, L, Qout, P, Ls, Ms, os_, ids, t0, t1):
    """:func:`gather_sorted` for the rows [t0, t1)."""
    d = X.shape[1]
    W = L.shape[1]
    for t in range(t0, t1):
        r = perm[t]
        i = idx[r]
        for k in range(d):
            P[t, k] = X[i, k]
        for w in range(W):
            Ls[t, w] = L[r, w]
        Ms[t] = M[r]
        Qout[t] = Q[r]
        os_[t] = order[r]
        ids[t] = i
