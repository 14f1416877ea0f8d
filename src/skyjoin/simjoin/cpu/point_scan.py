"""The pruned point-by-point scan of the full pattern (sparse cells).

For sparse cells (a few points each, typical from 4 dimensions up)
gathering a cell's 3^k neighbours is wasted work: each point walks the
neighbour odometer with a running lower bound on its squared distance to
the cells, skips every cell (and whole sub-trees) out of reach, and tests
candidates with an early exit.  The walk enumerates the adjacent cells of
Gowanlock & Karsin 2018, §IV-D, with the full pattern (§IV-E) or, for a
symmetric half (``half``), LID-UNICOMP's cells of higher id (Gallet &
Gowanlock 2019, §III-B).

Cost: per point, O(k) per visited cell plus O(d) per candidate tested;
cells beyond the bound cost nothing past their lookup.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..._core.search import lower_bound
from .cells import U64
from ..plan import TILE_MIN_POINTS
from ..schedule import INNER, JIT


@nb.njit(inline="always", **JIT)
def cell_gaps(q_pts, i, k, lo, side, slack, gl2, gh2):
    """Squared lower bounds on |q_ij - y_j| for y in the cell below
    (``gl2[j]``) and above (``gh2[j]``) the query's cell in dimension j.

    With v = fl(fl(q - lo) / side) (the value whose floor is the cell
    coordinate c) and f = v - c, every point y of the cell below satisfies
    q - y > side (f - slack), since both coordinates carry at most
    ``slack / 2`` cells of rounding; likewise y - q > side (1 - f - slack)
    above.  The bounds are shrunk by a few ulps more for their own rounding.
    """
    for j in range(k):
        v = (np.float64(q_pts[i, j]) - lo[j]) / side[j]
        f = v - np.floor(v)
        a = f - slack[j]
        b = 1.0 - f - slack[j]
        a = side[j] * a * (1.0 - 8.0 * U64) if a > 0.0 else 0.0
        b = side[j] * b * (1.0 - 8.0 * U64) if b > 0.0 else 0.0
        gl2[j] = a * a
        gh2[j] = b * b


@nb.njit(inline="always", **JIT)
def _gap2(s_coords, off, r, c, gl2j, gh2j):
    e = s_coords[off + r]
    if e < c:
        return gl2j
    if e > c:
        return gh2j
    return 0.0


@nb.njit(inline="always", **JIT)
def _test(q_pts, i, s_pts, j, d, eps2, early):
    """The distance test; with ``early`` it stops once the partial sum
    exceeds eps2 (partial sums of squares only grow, so the answer is the
    same)."""
    acc = q_pts[i, 0] * 0    # a zero of the points' dtype (eps2 * 0 is NaN for eps2 = inf)
    for t in range(d):
        diff = q_pts[i, t] - s_pts[j, t]
        acc += diff * diff
        if early and acc > eps2:
            return False
    return acc <= eps2


@nb.njit(inline="always", **JIT)
def _row_bounds(s_cell_ids, s_lower_bound, s_cell_start, point_lb, lid0, lid1):
    """Reordered points [start, stop) of the non-empty cells with linear ids
    in [lid0, lid1).  With a dense rank space ``point_lb[v]`` is the first
    point of the first cell whose id is >= v (one table load instead of
    lower_bound -> cell_start)."""
    if point_lb.shape[0] > 0:
        top = point_lb.shape[0] - 1
        return point_lb[min(lid0, top)], point_lb[min(lid1, top)]
    a = lower_bound(s_cell_ids, 0, s_cell_ids.shape[0], lid0)
    b = lower_bound(s_cell_ids, a, s_cell_ids.shape[0], lid1)
    return s_cell_start[a], s_cell_start[b]


@nb.njit(**INNER)
def scan_point(q_pts, qi, i, s_pts, s_map, excl, eps2, lim, early, k, craw, lo_r, hi_r, own_r,
                half, s_coords, s_coord_off, s_stride, s_cell_ids, s_lower_bound, s_cell_start,
                point_lb, gl2, gh2, cur, partial, eqp, s_order, out, out_start, cap):
    """Count the neighbours of reordered query point i (coordinates
    ``q_pts[qi]``), walking only the adjacent cells within reach (``lim``
    bounds the squared distance of any pair that can pass the test); with
    ``cap >= 0`` also write the first ``cap`` of them from
    ``out[out_start]`` (never more: the caller checks the count).  Reordered
    data point j lies at ``s_pts[j]``, or at ``s_pts[s_map[j]]`` when
    ``s_map`` is not empty (points in the caller's order).

    With ``half`` (self-join only) the walk follows LID-UNICOMP
    (load-imbalance paper §III-B): only cells of higher linear id than the
    own cell (rank tuple ``own_r``), and in the own cell only points j > i.
    Linear ids order cells lexicographically by rank tuple, so a prefix of
    ranks below the own prefix is skipped whole, one above it is taken whole.
    ``eqp[j]`` records whether ranks 0..j equal the own ranks."""
    last = k - 1
    n_found = 0
    j = 0
    d = q_pts.shape[1]
    mapped = s_map.shape[0] > 0
    if last > 0:
        cur[0] = own_r[0] if half else lo_r[0]
    while True:
        if last > 0:
            if cur[j] > hi_r[j]:
                j -= 1
                if j < 0:
                    break
                cur[j] += 1
                continue
            ps = partial[j - 1] if j > 0 else 0.0
            ps += _gap2(s_coords, s_coord_off[j], cur[j], craw[j], gl2[j], gh2[j])
            if ps > lim:
                cur[j] += 1
                continue
            partial[j] = ps
            if half:
                eqp[j] = (j == 0 or eqp[j - 1]) and cur[j] == own_r[j]
            if j < last - 1:
                j += 1
                cur[j] = own_r[j] if (half and eqp[j - 1]) else lo_r[j]
                continue
        else:
            ps = 0.0
        # a row: the last dimension's reachable ranks form one interval
        off = s_coord_off[last]
        r0 = lo_r[last]
        r1 = hi_r[last]
        own_row = half and (last == 0 or eqp[last - 1])
        if own_row:
            r0 = own_r[last]  # the own cell (gap 0) and those above it
        while r0 <= r1 and ps + _gap2(s_coords, off, r0, craw[last], gl2[last], gh2[last]) > lim:
            r0 += 1
        while r1 >= r0 and ps + _gap2(s_coords, off, r1, craw[last], gl2[last], gh2[last]) > lim:
            r1 -= 1
        if r0 <= r1:
            base = 0
            for t in range(last):
                base += cur[t] * s_stride[t]
            p0, p1 = _row_bounds(s_cell_ids, s_lower_bound, s_cell_start, point_lb,
                                 base + r0, base + r1 + 1)
            if own_row:
                p0 = i + 1  # r0 is the own cell: only its points after i
            for jj in range(p0, p1):
                # with a map: points in the caller's order (the fill)
                sj = s_map[jj] if mapped else jj
                if jj != excl and _test(q_pts, qi, s_pts, sj, d, eps2, early):
                    if n_found < cap:
                        out[out_start + n_found] = s_order[jj]
                    n_found += 1
        if last == 0:
            break
        cur[j] += 1
    return n_found


def pruning_limit(eps: float, d: int, k: int, precision: str) -> float:
    """Squared distance beyond which no pair can pass the test.

    A pair that passes ``fl(sum_k fl(fl(x_k - y_k)^2)) <= fl(eps^2)`` in a
    precision of unit roundoff u has exact squared distance at most
    (eps (1 + (d + 5) u))^2 (same argument as ``skyjoin.index.grid.cell_sides``),
    so the exact sum of its per-dimension gaps to a cell is no larger; the
    float64 sum of k lower bounds errs by at most a factor 1 + k u64.
    """
    u_w = float(np.finfo(np.float32 if precision == "float32" else np.float64).eps) / 2
    e = eps * (1.0 + 4.0 * (d + 5) * u_w)
    return e * e * (1.0 + 16.0 * (k + 2) * U64)


def pruning_args(g, half=False, pts=None, tile_min=TILE_MIN_POINTS):
    """The pruning arguments of the full-pattern kernels for data grid ``g``
    (``pts``: its points, default ``g.points``): (lo, side, slack, limit,
    tile_min, point_lower_bound, half).  ``half``: the symmetric walk,
    which exists on the point-by-point path only (no tiled cells)."""
    pts = g.points if pts is None else pts
    d = pts.shape[1]
    precision = "float32" if pts.dtype == np.float32 else "float64"
    tile_min = np.iinfo(np.int64).max if half else tile_min
    return (g.lo, g.side, g.slack, pruning_limit(g.eps, d, g.k, precision), tile_min,
            g.point_lower_bound(), bool(half))
