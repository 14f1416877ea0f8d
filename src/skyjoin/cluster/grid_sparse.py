"""Single-run DBSCAN on the sparse epsilon grid, without a neighbour table (CPU).

:mod:`skyjoin.cluster.grid_cpu` clusters on a dense fine grid, an array
over the bounding box, which fits only where the box holds few cells; on
points of a sphere (haversine's unit vectors in 3-D) or data of a wide box
it does not.  This path keeps only the non-empty cells: the epsilon grid of
the join (:mod:`skyjoin.index.grid`, Gowanlock & Karsin 2018, §IV-B, IV-C:
cells of side a hair over eps, sorted linear ids in rank space), whose
adjacent cells come in 3^(k-1) rows found by pointers that only move
forward (:mod:`skyjoin.index.grid_rows`).  What a single clustering needs
is got as in ``grid_cpu``, from the cell-graph formulation of Gunawan 2013
and of Wang, Gu & Shun 2020 (implemented here from the description), with
cells of side eps instead of eps / sqrt(d): at one or two points a cell
(haversine at 14 neighbours a point) the fine grid's 5^d-cell
neighbourhood costs more lookups than its dense cells save.

* ``core_flags``: each point counts its neighbours in its 3^k adjacent
  cells (its own row first), stopping at min_samples (checked once a row:
  no branch per pair); a point found non-core keeps its neighbours, fewer
  than min_samples, where min_samples <= ``KEPT_MAX`` + 1;
* ``link_within`` and ``link_between``: union-find over the points; inside
  a cell core points are chained, stopping once they form one set; between
  two cells (each unordered pair once) whose core points each form one set
  the first pair within eps joins them, else every core pair of different
  sets is tried;
* ``border_kept`` (from the kept neighbours, no distance computed) or
  ``border_labels`` (a search): a non-core point takes the lowest cluster
  label of its core neighbours, skipping points whose label cannot lower
  it.

Every decision is the join's test, ``sum_k (x_k - y_k)^2`` in float64
summed over k in order, against ``eps^2``, so the labels are scikit-learn's
numbered as in ``skyjoin.cluster.union_find``.  Under haversine the points
are unit vectors and two chords decide (``simjoin.metrics.decision_radii``):
a pair within ``eps_sure`` is a neighbour, one beyond eps is not, and one
in between (``metrics.sure_radius``: about 1e-10 of eps relatively at
kilometre radii) is undecided; where such a pair
could change a core flag (sure count below min_samples, sure plus band
count at least min_samples), a link (its two sets still apart at the end)
or a border label (a lower label than the sure one) ``sparse_grid_dbscan``
returns None and the caller takes the table path, whose refine decides
with scikit-learn's formula.

Costs: the grid's build, O(n k) plus a sort of the cell ids; then for each
point the distance tests in its adjacent cells (core flags stop at
min_samples), and for each cell 3^(k-1) row walks in the core pass and
about half as many in the links.  The links between cells are sequential
(one union-find); the other passes run on the host threads over blocks of
cells.  Memory: the grid (O(n d)), a few arrays of n entries, and the kept
neighbours, 4 (min_samples - 1) bytes a point; no pair is stored.
Measured: docs/decisions/dbscan-metrics.md.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from .._core.config import NUMBA_CACHE
from ..index.grid import build_grid
from ..index.grid_rows import cell_ranks, cell_rows, new_cursor, row_offsets
from ..simjoin.schedule import run_blocks
from .grid_cpu import d2
from .union_find import find, number_clusters_by_order, roots, union

__all__ = ["sparse_grid_dbscan", "BAND_PAIRS", "KEPT_MAX"]

#: band pairs between core points kept for the links' final check; one more
#: and the clustering is handed on as undecided
BAND_PAIRS = 4096
#: up to this min_samples - 1, the core pass keeps each non-core point's
#: neighbours (fewer than min_samples, 4 bytes each) for the border pass
KEPT_MAX = 16


@njit(cache=NUMBA_CACHE, nogil=True)
def core_flags(X, cell_start, cell_ids, ranks, coords, coord_off, radix, stride, offsets, sure2,
               eps2, min_samples, core, kept, n_kept, undecided, t0, t1):
    """Core flag of the (sorted) points of cells [t0, t1) into ``core``: at
    least min_samples neighbours within the sure radius, itself included;
    ``undecided[0] = 1`` where the band's pairs could make up the rest.
    Where ``kept`` has min_samples - 1 columns, a non-core point keeps its
    neighbours there (``n_kept`` of them, fewer than min_samples: a band
    pair's q as -1 - q), for ``border_kept``."""
    cursor = new_cursor(coord_off.shape[0] - 1, offsets.shape[0])
    a, b = cursor[3], cursor[4]
    n_rows = offsets.shape[0]
    keep = kept.shape[1] > 0
    cap = kept.shape[1]
    buf = np.empty(cap + 1, dtype=np.int32)     # the last entry takes the overflow
    for t in range(t0, t1):
        cell_rows(t, cell_ids, ranks, coords, coord_off, radix, stride, offsets, cursor)
        for p in range(cell_start[t], cell_start[t + 1]):
            cnt = 0                     # pairs within the sure radius
            cnt_eps = 0                 # within eps, the band's too
            for o in range(n_rows):
                for q in range(cell_start[a[o]], cell_start[b[o]]):
                    s = d2(X, p, q)
                    cnt += s <= sure2
                    if keep:            # no branch on the pair: a store, kept or not
                        buf[min(cnt_eps, cap)] = q if s <= sure2 else -1 - q
                    cnt_eps += s <= eps2
                if cnt >= min_samples:  # a row at a time: no branch per pair
                    break
            if cnt >= min_samples:
                core[p] = 1
            elif cnt_eps >= min_samples:
                undecided[0] = 1
            elif keep:
                n_kept[p] = cnt_eps
                for i in range(cnt_eps):
                    kept[p, i] = buf[i]


@njit(cache=NUMBA_CACHE, nogil=True)
def border_kept(core, labels, kept, n_kept, undecided, b0, b1):
    """``border_labels`` for the points [b0, b1) from the neighbours that
    ``core_flags`` kept: no search, no distance computed."""
    for p in range(b0, b1):
        if core[p]:
            continue
        best = -1
        low_band = -1
        for i in range(n_kept[p]):
            v = kept[p, i]
            q = v if v >= 0 else -1 - v
            if not core[q]:
                continue
            lab = labels[q]
            if v >= 0:
                if best < 0 or lab < best:
                    best = lab
            elif low_band < 0 or lab < low_band:
                low_band = lab
        labels[p] = best
        if low_band >= 0 and (best < 0 or low_band < best):
            undecided[0] = 1


@njit(cache=NUMBA_CACHE, nogil=True)
def link_within(X, cell_start, core, parent, first_core, one_set, band_cell, sure2, eps2, t0, t1):
    """Union-find inside each cell of [t0, t1): the parents of its points
    (itself for a core point, -1 for another), then its core points chained
    by the test, stopping once they form one set (``one_set[t]``, with the
    cell's first core point ``first_core[t]``).  A cell touches only its
    own points, so blocks run at once.  A band pair whose sets are apart
    when met marks the cell (``band_cell``, checked by ``within_band_apart``
    once every link is made)."""
    for t in range(t0, t1):
        a, e = cell_start[t], cell_start[t + 1]
        n_core = 0
        for p in range(a, e):
            if core[p]:
                parent[p] = p
                if n_core == 0:
                    first_core[t] = p
                n_core += 1
            else:
                parent[p] = -1
        if n_core == 0:
            continue
        joined = 0
        for p in range(first_core[t], e):
            if joined == n_core - 1:
                break
            if not core[p]:
                continue
            for q in range(p + 1, e):
                if not core[q] or find(parent, p) == find(parent, q):
                    continue
                s = d2(X, p, q)
                if s <= sure2:
                    union(parent, p, q)
                    joined += 1
                    if joined == n_core - 1:
                        break
                elif s <= eps2:
                    band_cell[t] = 1
        one_set[t] = 1 if joined == n_core - 1 else 0


@njit(cache=NUMBA_CACHE, nogil=True)
def within_band_apart(X, cell_start, core, parent, band_cell, sure2, eps2):
    """Whether a band pair of core points inside a marked cell joins two
    sets still apart once every link is made."""
    for t in range(band_cell.shape[0]):
        if not band_cell[t]:
            continue
        for p in range(cell_start[t], cell_start[t + 1]):
            if not core[p]:
                continue
            for q in range(p + 1, cell_start[t + 1]):
                if core[q]:
                    s = d2(X, p, q)
                    if sure2 < s <= eps2 and find(parent, p) != find(parent, q):
                        return True
    return False


@njit(cache=NUMBA_CACHE, nogil=True)
def caller_order(perm, core, labels, core_out, labels_out, b0, b1):
    """The core flags and labels of sorted points [b0, b1) back in the
    caller's order (``perm[p]`` the caller's row of sorted point p)."""
    for p in range(b0, b1):
        core_out[perm[p]] = core[p]
        labels_out[perm[p]] = labels[p]


@njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _keep_band(band, n_band, p, q):
    """Keep a band pair (p, q) of core points; past ``band``'s rows only
    counted, which ``band_apart`` reads as undecided."""
    i = n_band[0]
    if i < band.shape[0]:
        band[i, 0] = p
        band[i, 1] = q
    n_band[0] = i + 1


@njit(cache=NUMBA_CACHE, nogil=True)
def link_between(X, cell_start, cell_ids, ranks, coords, coord_off, radix, stride, offsets, core,
                 parent, first_core, one_set, sure2, eps2, band, n_band):
    """Union-find between cells, each unordered pair of adjacent cells once
    (``offsets`` the half rows, ``row_offsets(k, half=True)``: the later
    cells of the own row, then the rows of positive offset); sequential.  Two cells whose core points each form one set are joined
    by their first pair within the sure radius; others try every core pair
    of different sets.  Band pairs go to ``band``: one per pair of one-set
    cells left apart, every one otherwise."""
    m = cell_ids.shape[0]
    cursor = new_cursor(coord_off.shape[0] - 1, offsets.shape[0])
    a, b = cursor[3], cursor[4]
    for t in range(m):
        ft = first_core[t]
        if ft < 0:
            continue
        cell_rows(t, cell_ids, ranks, coords, coord_off, radix, stride, offsets, cursor)
        e = cell_start[t + 1]
        for o in range(offsets.shape[0]):
            u0 = t + 1 if o == 0 else a[o]   # the own row: its later cells
            for u in range(u0, b[o]):
                fu = first_core[u]
                if fu < 0:
                    continue
                e2 = cell_start[u + 1]
                if one_set[t] and one_set[u]:
                    if find(parent, ft) == find(parent, fu):
                        continue
                    bp = -1
                    bq = -1
                    joined = False
                    for p in range(ft, e):
                        if not core[p]:
                            continue
                        for q in range(fu, e2):
                            if not core[q]:
                                continue
                            s = d2(X, p, q)
                            if s <= sure2:
                                union(parent, p, q)
                                joined = True
                                break
                            if s <= eps2:
                                bp = p
                                bq = q
                        if joined:
                            break
                    if not joined and bp >= 0:
                        _keep_band(band, n_band, bp, bq)
                    continue
                for p in range(ft, e):
                    if not core[p]:
                        continue
                    for q in range(fu, e2):
                        if not core[q] or find(parent, p) == find(parent, q):
                            continue
                        s = d2(X, p, q)
                        if s <= sure2:
                            union(parent, p, q)
                        elif s <= eps2:
                            _keep_band(band, n_band, p, q)


@njit(cache=NUMBA_CACHE, nogil=True)
def band_apart(parent, band, n_band):
    """Whether a kept band pair's sets are still apart, or more pairs came
    than ``band`` keeps."""
    if n_band[0] > band.shape[0]:
        return True
    for i in range(n_band[0]):
        if find(parent, band[i, 0]) != find(parent, band[i, 1]):
            return True
    return False


@njit(cache=NUMBA_CACHE, nogil=True)
def border_labels(X, cell_start, cell_ids, ranks, coords, coord_off, radix, stride, offsets, core,
                  labels, sure2, eps2, undecided, t0, t1):
    """Each non-core point of cells [t0, t1) takes the lowest label of its
    core neighbours (-1: none), in place; ``undecided[0] = 1`` where a band
    pair holds a lower one."""
    cursor = new_cursor(coord_off.shape[0] - 1, offsets.shape[0])
    a, b = cursor[3], cursor[4]
    n_rows = offsets.shape[0]
    for t in range(t0, t1):
        all_core = True
        for p in range(cell_start[t], cell_start[t + 1]):
            if not core[p]:
                all_core = False
                break
        if all_core:
            continue
        cell_rows(t, cell_ids, ranks, coords, coord_off, radix, stride, offsets, cursor)
        for p in range(cell_start[t], cell_start[t + 1]):
            if core[p]:
                continue
            best = -1
            low_band = -1
            for o in range(n_rows):
                for q in range(cell_start[a[o]], cell_start[b[o]]):
                    if not core[q]:
                        continue
                    lab = labels[q]
                    if best >= 0 and lab >= best:
                        continue
                    s = d2(X, p, q)
                    if s <= sure2:
                        best = lab
                    elif s <= eps2 and (low_band < 0 or lab < low_band):
                        low_band = lab
            labels[p] = best
            if low_band >= 0 and (best < 0 or low_band < best):
                undecided[0] = 1


def sparse_grid_dbscan(X, eps, min_samples, *, eps_sure=None, timings=None):
    """Exact DBSCAN (scikit-learn's labels) on the sparse epsilon grid, or None.

    Parameters
    ----------
    X : ndarray of float64, shape (n, d)
        Validated, finite points, conditioned for the join (float64).
    eps : float
        The radius: pairs beyond it are not neighbours.
    min_samples : int
    eps_sure : float, optional
        Pairs within eps_sure are neighbours; a pair between eps_sure and
        eps is undecided, and when one matters (a core flag, a link or a
        border label could change) the answer is None: a metric's filter
        (``skyjoin.simjoin.metrics.decision_radii``), whose exact test then
        runs on the table path.  Default eps: every pair is decided.
    timings : dict, optional
        Filled with the seconds of "grid", "core", "link" and "labels".

    Returns
    -------
    (core_sample_indices, labels) or None
        None only where an undecided pair mattered.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.0, 0.5], [0.5, 0.0], [0.4, 0.4], [5.0, 5.0]])
    >>> core, labels = sparse_grid_dbscan(X, 0.6, 3)
    >>> core.tolist(), labels.tolist()
    ([0, 1, 2, 3], [0, 0, 0, 0, -1])
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.intp)
    timings = {} if timings is None else timings
    t = time.perf_counter()
    g = build_grid(X, eps)
    Xs, start, ids, perm = g.points, g.cell_start, g.cell_ids, g.order
    grid = (ids, cell_ranks(ids, g.radix), g.coords, g.coord_off, g.radix, g.stride,
            row_offsets(g.k))
    eps2 = float(np.float64(eps) * np.float64(eps))
    sure = eps if eps_sure is None else eps_sure
    sure2 = float(np.float64(sure) * np.float64(sure))
    undecided = np.zeros(1, dtype=np.uint8)
    t = _tick(timings, "grid", t)
    core = np.zeros(n, dtype=np.uint8)
    # the kept neighbours are int32 rows
    slots = min_samples - 1 if 0 < min_samples - 1 <= KEPT_MAX and n < 2**31 else 0
    kept = np.empty((n if slots else 0, slots), dtype=np.int32)
    n_kept = np.zeros(n if slots else 0, dtype=np.uint8)
    run_blocks(core_flags, (Xs, start) + grid + (sure2, eps2, min_samples, core, kept, n_kept,
                                                 undecided), start)
    t = _tick(timings, "core", t)
    if undecided[0]:
        return None
    m = ids.shape[0]
    parent = np.empty(n, dtype=np.int64)
    first_core = np.full(m, -1, dtype=np.int64)
    one_set = np.zeros(m, dtype=np.uint8)
    band_cell = np.zeros(m, dtype=np.uint8)
    run_blocks(link_within, (Xs, start, core, parent, first_core, one_set, band_cell, sure2,
                             eps2), start)
    band = np.zeros((BAND_PAIRS, 2), dtype=np.int64)
    n_band = np.zeros(1, dtype=np.int64)
    link_between(Xs, start, *grid[:-1], row_offsets(g.k, half=True), core, parent, first_core,
                 one_set, sure2, eps2, band, n_band)
    if band_apart(parent, band, n_band) or \
            within_band_apart(Xs, start, core, parent, band_cell, sure2, eps2):
        return None
    root = roots(parent)
    labels = number_clusters_by_order(root, core, perm)
    t = _tick(timings, "link", t)
    if slots:
        run_blocks(border_kept, (core, labels, kept, n_kept, undecided), n)
    else:
        run_blocks(border_labels, (Xs, start) + grid + (core, labels, sure2, eps2, undecided),
                   start)
    if undecided[0]:
        return None
    core_out = np.empty(n, dtype=np.uint8)
    labels_out = np.empty(n, dtype=np.intp)
    run_blocks(caller_order, (perm, core, labels, core_out, labels_out), n)
    _tick(timings, "labels", t)
    return np.flatnonzero(core_out), labels_out


def _tick(timings, name, t):
    now = time.perf_counter()
    timings[name] = now - t
    return now
