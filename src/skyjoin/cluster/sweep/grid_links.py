"""Sweep grid path: the grid index of one eps, the links between cells, the labels (§7.6).

``grid_index`` builds the first stage of the pipeline (the fine grid and
the level of every point, ``grid_levels``); ``assign_grid_levels`` is the
second: pairs of near cells, one union-find over the cells for the whole
sweep (``union_find.find/union``, Kruskal-style by decreasing level), the
border reaches (``grid_reach``) and the labels of every level.  Costs: O(n)
per level for the labels, O(cell pairs) for the links, each pair of cells
scanned at most once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..._core.config import NUMBA_CACHE
from ...index.fine_grid import positive_offsets
from ..grid_cpu import MAX_DIMS, boxes_apart, d2, fine_grid, neighbour_slots
from ..union_find import find, union
from .grid_levels import (SCAN_PARTS, exact_levels, gap2, level_codes, point_levels,
                          point_levels_weighted, scan_orders, sort_by_level)
from .grid_reach import border_reaches


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _cell_pairs(start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, positive, eps2,
                maxlev, K, U):
    """The pairs of cells that may be linked, bucketed by their upper bound (counting sort).

    Each unordered pair of near cells once, unless the box test separates
    them; its link level cannot exceed ``ub = min(maxlev[t], maxlev[u])``,
    and pairs of bucket k are [ptr[k], ptr[k + 1]), by increasing t then
    offset.  In parallel over blocks of cells: each block counts its pairs
    per bucket, then writes them at its place.  ``U``: (m, len(positive))
    scratch of integers.
    """
    m = cells.shape[0]
    n_pos = positive.shape[0]
    B = min(m, _PAIR_BLOCKS)
    cnt = np.zeros((B, K + 1), dtype=np.int64)
    for b in prange(B):
        for t in range(b * m // B, (b + 1) * m // B):
            for j in range(n_pos):
                U[t, j] = -1
            if maxlev[t] == 0:
                continue
            nb = neighbour_slots(cells[t], radix, offsets, deltas, slot_of)
            for j in range(n_pos):
                u = nb[positive[j]]
                if u < 0 or maxlev[u] == 0 or boxes_apart(box_lo, box_hi, t, u, eps2):
                    continue
                U[t, j] = u
                cnt[b, min(maxlev[t], maxlev[u])] += 1
    ptr = np.zeros(K + 2, dtype=np.int64)
    run = 0
    for k in range(K + 1):
        ptr[k] = run
        for b in range(B):
            c = cnt[b, k]
            cnt[b, k] = run  # now where block b's pairs of bucket k go
            run += c
    ptr[K + 1] = run
    pa = np.empty(run, dtype=np.int64)
    pb = np.empty(run, dtype=np.int64)
    for b in prange(B):
        for t in range(b * m // B, (b + 1) * m // B):
            for j in range(n_pos):
                u = U[t, j]
                if u >= 0:
                    k = min(maxlev[t], maxlev[u])
                    at = cnt[b, k]
                    pa[at] = t
                    pb[at] = u
                    cnt[b, k] = at + 1
    return ptr, pa, pb


_PAIR_BLOCKS = 1024  # blocks of cells of ``_cell_pairs``


@njit(cache=NUMBA_CACHE, nogil=True)
def _bottleneck(Xs, start, cells, box_lo, box_hi, eps2, level, t, u, ub):
    """``w(t, u)``: the highest min(level_p, level_q) over pairs within eps, 0 if none.

    Both cells' points are in decreasing level, so the scan stops at the
    first pair that cannot beat the best so far, and at ``ub``.
    """
    c, c2 = cells[t], cells[u]
    a, b = start[c], start[c + 1]
    a2, b2 = start[c2], start[c2 + 1]
    best = 0
    for p in range(a, b):
        lp = level[p]
        if lp <= best:
            break
        if gap2(Xs, p, box_lo, box_hi, u) > eps2:
            continue
        for q in range(a2, b2):
            lq = level[q]
            if lq <= best:
                break
            if d2(Xs, p, q) <= eps2:
                best = lp if lp < lq else lq
                break
        if best == ub:
            break
    return best


@njit(cache=NUMBA_CACHE, nogil=True)
def _link_level(k, Xs, start, cells, box_lo, box_hi, eps2, level, pair_ptr, pa, pb, later_head,
                later_next, parent):
    """Join the cells linked at level k: Kruskal over the cell pairs, evaluated lazily.

    A pair whose bound is k is skipped when its cells are already joined
    (through links of level >= k, so adding it changes no level <= k);
    otherwise its level w is found: joined now if w == k, kept for level w
    if lower.  Then the pairs kept for level k are joined (if still apart).
    """
    for e in range(pair_ptr[k], pair_ptr[k + 1]):
        t, u = pa[e], pb[e]
        if find(parent, t) == find(parent, u):
            continue
        w = _bottleneck(Xs, start, cells, box_lo, box_hi, eps2, level, t, u, k)
        if w == k:
            union(parent, t, u)
        elif w > 0:
            later_next[e] = later_head[w]
            later_head[w] = e
    e = later_head[k]
    while e >= 0:
        union(parent, pa[e], pb[e])
        e = later_next[e]


@njit(cache=NUMBA_CACHE, nogil=True)
def _components_at(k, parent, maxlev, level, start, cells, perm, pos, first, comp_min,
                   cell_label):
    """Number the clusters of level k once its links are in ``parent`` (§7.6, incrementally).

    ``pos[t]``/``first[t]``: how far cell t's points (by decreasing level)
    have been read and the lowest caller id among them, advanced to level k;
    clusters are numbered by the lowest caller id of their core points
    (scikit-learn's order).  Fills ``cell_label`` for the cells of max level
    >= k and returns the number of clusters.
    """
    m = maxlev.shape[0]
    big = np.iinfo(np.int64).max
    n_roots = 0
    for t in range(m):
        if maxlev[t] < k:
            continue
        b = start[cells[t] + 1]
        p = pos[t]
        f = first[t]
        while p < b and level[p] >= k:
            if perm[p] < f:
                f = perm[p]
            p += 1
        pos[t] = p
        first[t] = f
        comp_min[t] = big
    for t in range(m):
        if maxlev[t] < k:
            continue
        r = find(parent, t)
        if r == t:
            n_roots += 1
        if first[t] < comp_min[r]:
            comp_min[r] = first[t]
    keys = np.empty(n_roots, dtype=np.int64)
    ids = np.empty(n_roots, dtype=np.int64)
    i = 0
    for t in range(m):
        if maxlev[t] >= k and parent[t] == t:
            keys[i] = comp_min[t]
            ids[i] = t
            i += 1
    rank = np.argsort(keys)
    for c in range(n_roots):
        cell_label[ids[rank[c]]] = c
    for t in range(m):
        if maxlev[t] >= k and parent[t] != t:
            cell_label[t] = cell_label[find(parent, t)]
    return n_roots


@njit(cache=NUMBA_CACHE, nogil=True)
def _link_all(Xs, start, cells, box_lo, box_hi, eps2, level, pair_ptr, pa, pb, maxlev, perm, K,
              tab, n_clusters):
    """The cell clusters of every level, K down to 1, in one union-find (§7.6, incrementally).

    ``tab[k, t]``: the cluster of cell slot t at level k (for the cells of
    max level >= k; -1 elsewhere), ``n_clusters[k]`` their number.  The
    links of level k are joined when level k is reached (``_link_level``),
    then the clusters are numbered (``_components_at``).
    """
    m = cells.shape[0]
    parent = np.arange(m)
    later_head = np.full(K + 1, -1, dtype=np.int64)
    later_next = np.empty(pa.shape[0], dtype=np.int64)
    pos = np.empty(m, dtype=np.int64)
    for t in range(m):
        pos[t] = start[cells[t]]
    first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    comp_min = np.empty(m, dtype=np.int64)
    cell_label = np.full(m, -1, dtype=np.intp)
    for k in range(K, 0, -1):
        _link_level(k, Xs, start, cells, box_lo, box_hi, eps2, level, pair_ptr, pa, pb,
                    later_head, later_next, parent)
        n_clusters[k] = _components_at(k, parent, maxlev, level, start, cells, perm, pos, first,
                                       comp_min, cell_label)
        for t in range(m):
            tab[k, t] = cell_label[t] if maxlev[t] >= k else -1


@njit(cache=NUMBA_CACHE, parallel=True, nogil=True)
def _labels_levels(k_hi, k_lo, at_least, code, bits, tab, cand, cand_level, row_at, row_len,
                   reach, cell):
    """Labels and core indices of the levels k_hi down to k_lo, in the caller's order.

    The levels in parallel, each one pass over the points.  ``code[i] = cell
    slot << bits | level`` of the caller's point i.  Core points take their
    cell's cluster (``tab``); border points (``cand``, increasing caller
    ids, with their reaching cells by decreasing reach) the lowest cluster
    among the cells that reach them at level k; noise -1.  Returns two
    lists, entry g for level k_hi - g.  The arrays come from Numba's
    allocator (plain pages): NumPy's asks for huge pages, and a fault on
    those can stall on memory compaction (docs/decisions/dbscan-sweep.md).
    """
    n = code.shape[0]
    mask = (1 << bits) - 1
    G = k_hi - k_lo + 1
    labels = [np.empty(n, dtype=np.intp) for _ in range(G)]
    cores = [np.empty(at_least[k_hi - g] + 1, dtype=np.int64) for g in range(G)]
    for g in prange(G):
        k = k_hi - g
        lab = labels[g]
        core = cores[g]
        c = 0
        for i in range(n):
            v = code[i]
            is_core = (v & mask) >= k
            lab[i] = tab[k, v >> bits] if is_core else -1
            core[c] = i
            c += is_core
        for j in range(cand.shape[0]):
            if cand_level[j] >= k:
                continue
            best = -1
            for e in range(row_at[j], row_at[j] + row_len[j]):
                if reach[e] < k:
                    break
                lb = tab[k, cell[e]]
                if best < 0 or lb < best:
                    best = lb
            lab[cand[j]] = best
    return labels, cores


@dataclass
class _GridIndex:
    """One eps on the fine grid (``grid_index``): the first stage of the pipeline, no table.

    The grid, the points in cell order and their levels (the neighbourhood
    sizes that T would give); the assignment stage adds the rest.
    """

    n_levels: int
    Xs: np.ndarray
    start: np.ndarray
    cells: np.ndarray
    slot_of: np.ndarray
    box_lo: np.ndarray
    box_hi: np.ndarray
    radix: np.ndarray
    offsets: np.ndarray
    deltas: np.ndarray
    positive: np.ndarray
    eps2: float
    level: np.ndarray          # level of each point (cell order)
    perm: np.ndarray           # caller id of each point in cell order
    hits: np.ndarray           # offsets holding a neighbour, bit mask per point (or empty)
    # filled by ``_order_by_level`` (assignment stage):
    maxlev: np.ndarray = None  # max level of each cell
    code: np.ndarray = None    # cell slot << bits | level of every point, caller's order
    bits: int = 0
    at_least: np.ndarray = None  # at_least[k]: how many points have level >= k


def grid_index(X, eps, m_asc, sample_weight=None, timings=None):
    """The grid of one eps and the level of every point, or None (§7.6 without T).

    None when ``grid_cpu.grid_dbscan`` would not take the grid (d > 4, too many
    cells) or when rounding left a cell that is not close (the table path
    is exact in every case).
    """
    clock = [time.perf_counter()]

    def tick(name):
        now = time.perf_counter()
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + now - clock[0]
        clock[0] = now

    n, d = X.shape
    if n == 0 or d > MAX_DIMS:
        return None
    g = fine_grid(X, eps)
    if g is None or not g.close.all():
        return None
    Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas, eps2, perm = (
        g.Xs, g.start, g.cells, g.slot_of, g.box_lo, g.box_hi, g.radix, g.offsets, g.deltas,
        g.eps2, g.perm)
    positive = positive_offsets(offsets)
    tick("grid")
    K = len(m_asc)
    m_arr = np.asarray(m_asc, dtype=np.float64)
    hits = np.empty(n if len(offsets) <= 64 else 0, dtype=np.uint64)
    if sample_weight is None:
        R = SCAN_PARTS if d <= 2 else 2
        level = point_levels(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                             eps2, m_arr, hits, scan_orders(offsets, R), R)
    else:
        w = np.ascontiguousarray(sample_weight[perm], dtype=np.float64)
        level = point_levels_weighted(Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets,
                                      deltas, eps2, m_arr, w, hits)
        exact_levels(level, Xs, start, cells, slot_of, box_lo, box_hi, radix, offsets, deltas,
                     eps2, w, m_arr)
    tick("levels")
    return _GridIndex(n_levels=K, Xs=Xs, start=start, cells=cells, slot_of=slot_of,
                      box_lo=box_lo, box_hi=box_hi, radix=radix, offsets=offsets, deltas=deltas,
                      positive=positive, eps2=eps2, level=level, perm=perm, hits=hits)


def _order_by_level(g):
    """Each cell's points by decreasing level, the cells' max levels and the caller-order
    codes (the start of the assignment stage)."""
    K = g.n_levels
    sort_by_level(g.Xs, g.perm, g.level, g.hits, g.start, g.cells, K)
    g.maxlev = g.level[g.start[g.cells]]
    g.bits = max(1, int(K).bit_length())
    code_t = np.int32 if (len(g.cells) << g.bits) < 2**31 else np.int64
    g.code = level_codes(g.start, g.cells, g.perm, g.level, g.bits, np.zeros(0, dtype=code_t))
    g.at_least = np.cumsum(np.bincount(g.level, minlength=K + 1)[::-1])[::-1]


_GROUP_BYTES = 1 << 29  # output bytes of the levels labelled in one pass


def _prepare_links(g):
    """The points ordered by level, and the pairs of near cells (ptr, a, b) that the
    union-find reads."""
    _order_by_level(g)
    U = np.empty((len(g.cells), len(g.positive)),
                 dtype=np.int32 if len(g.cells) < 2**31 else np.int64)
    return _cell_pairs(g.start, g.cells, g.slot_of, g.box_lo, g.box_hi, g.radix, g.offsets,
                       g.deltas, g.positive, g.eps2, g.maxlev, g.n_levels, U)


def assign_grid_levels(gi, min_samples_desc):
    """Yield (min_samples, core indices, labels, n_clusters, seconds), largest first (§7.6).

    The second stage of the pipeline: the points ordered by level, the
    pairs of near cells, the reaching cells of the border points, one
    union-find over the cells for the whole sweep (the links of level k
    found and joined when level k is reached, ``_link_all``), then the
    labels of all levels in parallel passes over the points
    (``_labels_levels``, as many levels per pass as ``_GROUP_BYTES`` of
    output allows).  The shared seconds are counted in the first clustering
    of each pass.
    """
    g = gi
    t0 = time.perf_counter()
    K = g.n_levels
    pair_ptr, pair_a, pair_b = _prepare_links(g)
    n = len(g.level)
    m = len(g.cells)
    tab = np.empty((K + 1, m), dtype=np.int32 if n < 2**31 else np.int64)
    n_clusters = np.zeros(K + 1, dtype=np.int64)

    def links():
        _link_all(g.Xs, g.start, g.cells, g.box_lo, g.box_hi, g.eps2, g.level, pair_ptr, pair_a,
                  pair_b, g.maxlev, g.perm, K, tab, n_clusters)

    # the union-find (sequential) beside the border reaches, in the assignment
    # stage rather than the build stage (docs/decisions/dbscan-sweep.md)
    cand, cand_level, row_at, row_len, reach, reach_cell = border_reaches(g, links)
    k_hi = K
    while k_hi >= 1:
        k_lo = k_hi
        size = 8 * (n + g.at_least[k_hi])
        while k_lo > 1 and size + 8 * (n + g.at_least[k_lo - 1]) <= _GROUP_BYTES:
            k_lo -= 1
            size += 8 * (n + g.at_least[k_lo])
        labels, cores = _labels_levels(k_hi, k_lo, g.at_least, g.code, g.bits, tab, cand,
                                       cand_level, row_at, row_len, reach, reach_cell)
        for j, k in enumerate(range(k_hi, k_lo - 1, -1)):
            ms = min_samples_desc[K - k]
            yield (ms, cores[j][:-1], labels[j], int(n_clusters[k]),
                   time.perf_counter() - t0)
            t0 = time.perf_counter()
        del labels, cores
        k_hi = k_lo - 1
