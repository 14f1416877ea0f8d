"""The NumPy reference of the distributed routing rule, for the tests.

``skyjoin.distributed.routing.route_pieces`` (one parallel Numba pass) and
the in-process GPU path (``partition.owned_by`` / ``in_widened_box`` on the
device) must assign every point as these do.
"""

from __future__ import annotations

import numpy as np

from skyjoin.distributed.partition import Boxes


def owner_of(plan: Boxes, X: np.ndarray) -> np.ndarray:
    """Partition that owns each point (int64)."""
    s = np.searchsorted(plan.cuts1, X[:, plan.dims[0]], side="right")
    if len(plan.dims) == 1:
        return s.astype(np.int64)
    out = np.empty(len(X), dtype=np.int64)
    x1 = X[:, plan.dims[1]]
    for k in range(len(plan.cuts1) + 1):
        m = np.flatnonzero(s == k)
        if m.size:
            out[m] = plan.offset[k] + np.searchsorted(plan.cuts2[k], x1[m], side="right")
    return out


def _reach(cuts: np.ndarray, x: np.ndarray, w: float) -> tuple[np.ndarray, np.ndarray]:
    """First and last slab whose box widened by w contains each x (conservative)."""
    first = np.searchsorted(cuts, x - w, side="left")
    last = np.searchsorted(cuts, x + w, side="right")
    return first, last


def route_block(plan: Boxes, X: np.ndarray, width: float | None = None):
    """Split a block of points into, for each partition, its owned rows and its halo rows.

    Parameters
    ----------
    plan : Boxes
    X : ndarray, shape (m, d)
    width : float, optional
        Halo width (default ``plan.width``).

    Returns
    -------
    list of (owned_rows, halo_rows)
        Row positions (int64, ascending) into X, one pair per partition.
    """
    w = plan.width if width is None else float(width)
    P = plan.n_partitions
    owner = owner_of(plan, X)
    owned = [np.flatnonzero(owner == p) for p in range(P)] if P > 1 else [np.arange(len(X))]
    halos = [[] for _ in range(P)]
    if P > 1:
        x0 = X[:, plan.dims[0]]
        f0, l0 = _reach(plan.cuts1, x0, w)
        for s in range(len(plan.cuts1) + 1):
            rows = np.flatnonzero((f0 <= s) & (s <= l0))
            if rows.size == 0:
                continue
            if len(plan.dims) == 1:
                halos[s].append(rows[owner[rows] != s])
                continue
            f1, l1 = _reach(plan.cuts2[s], X[rows, plan.dims[1]], w)
            for t in range(len(plan.cuts2[s]) + 1):
                p = int(plan.offset[s] + t)
                r = rows[(f1 <= t) & (t <= l1)]
                halos[p].append(r[owner[r] != p])
    out = []
    for p in range(P):
        h = np.concatenate(halos[p]) if halos[p] else np.zeros(0, dtype=np.int64)
        out.append((owned[p], np.sort(h)))
    return out
