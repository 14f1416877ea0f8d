"""Coarse spatial partitions with halos, for the join and DBSCAN on Dask.

Space is cut into boxes by a two-level coarse grid: slabs along the widest
dimension, then each slab into sub-slabs along the second widest (one level
in 1-D).  The cut positions are quantiles of a sample of the points, so the
boxes hold about as many points each (a kd-style split: the second-level
cuts differ from slab to slab), and every slab and sub-slab that has two
finite sides is at least one halo width wide.

A point is *owned* by the one box that contains it (a point exactly on a cut
belongs to the upper box).  The *halo* of a box is every point that is not
owned by it but lies within the halo width ``w`` of the box in every split
dimension: a conservative superset of the points within eps of the box,
since the exact distance test, run afterwards, decides.  Because boxes are
at least ``w`` wide, a point lies in the halo of at most 3 boxes per split
dimension (the boxes next to its own).

Rounding: ``halo_width`` is the epsilon grid's cell side (``grid.cell_sides``
bounds how far apart, coordinate by coordinate, two points that pass the
float distance test can be) plus 16 float64 ulps of the largest coordinate,
which covers the rounding of ``x - w`` and ``x + w`` in the routing test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..index.grid import cell_sides

__all__ = ["Boxes", "halo_width", "plan_partitions", "owned_by", "in_widened_box",
           "deep_inside"]

_U64 = np.finfo(np.float64).eps / 2


def halo_width(eps: float, d: int, lo, hi, precision: str = "float64") -> float:
    """A halo width that no pair within eps (float test) can straddle.

    Parameters
    ----------
    eps : float
    d : int
        Number of dimensions summed by the distance test.
    lo, hi : array_like of float
        Bounds of the data (all dimensions).
    precision : {"float64", "float32"}

    Returns
    -------
    float
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    side = float(np.max(cell_sides(lo, hi, eps, d, precision))) if lo.size else float(eps)
    scale = float(max(np.max(np.abs(lo), initial=0.0), np.max(np.abs(hi), initial=0.0)))
    return side * (1.0 + 16.0 * _U64) + 16.0 * _U64 * scale


@dataclass
class Boxes:
    """The partition boxes (two-level kd-style coarse grid).

    Attributes
    ----------
    dims : tuple of int
        Split dimensions: (first,) or (first, second).
    cuts1 : ndarray of float64
        Sorted cut positions of the first level: slab s is
        ``[cuts1[s-1], cuts1[s])`` with -inf / +inf at the ends.
    cuts2 : list of ndarray
        Cut positions of the second level inside each slab (empty arrays in
        1-level plans).
    offset : ndarray of int64
        Partition id of sub-slab t of slab s is ``offset[s] + t``.
    width : float
        The halo width (and the least width of a box with two finite sides).
    """

    dims: tuple
    cuts1: np.ndarray
    cuts2: list
    offset: np.ndarray
    width: float
    d: int = 0
    n_points: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def n_partitions(self) -> int:
        return int(self.offset[-1])

    def box(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) of partition p in the split dimensions (+-inf at open ends)."""
        s = int(np.searchsorted(self.offset, p, side="right") - 1)
        t = p - int(self.offset[s])
        lo = [self.cuts1[s - 1] if s > 0 else -np.inf]
        hi = [self.cuts1[s] if s < len(self.cuts1) else np.inf]
        if len(self.dims) > 1:
            c = self.cuts2[s]
            lo.append(c[t - 1] if t > 0 else -np.inf)
            hi.append(c[t] if t < len(c) else np.inf)
        return np.asarray(lo), np.asarray(hi)


def _spaced_cuts(values: np.ndarray, n_parts: int, width: float,
                 shares: np.ndarray | None = None) -> np.ndarray:
    """Quantile cuts of ``values`` into n_parts, part j holding ``shares[j]`` of
    them (equal parts without ``shares``), keeping cuts at least width apart."""
    if n_parts <= 1 or values.size == 0:
        return np.zeros(0, dtype=np.float64)
    at = np.arange(1, n_parts) / n_parts if shares is None else \
        np.cumsum(shares)[:-1] / np.sum(shares)
    q = np.quantile(values, np.clip(at, 0.0, 1.0), method="lower")
    kept = []
    for c in np.unique(q):
        if not kept or c - kept[-1] >= width:
            kept.append(float(c))
    return np.asarray(kept, dtype=np.float64)


def plan_partitions(sample: np.ndarray, lo, hi, n_partitions: int, width: float,
                    n_points: int = 0, share=None) -> Boxes:
    """Choose the partition boxes from a sample of the points.

    Parameters
    ----------
    sample : ndarray, shape (m, d)
        A uniform sample of the points (any size; a few thousand is plenty).
    lo, hi : ndarray, shape (d,)
        Bounds of all the points.
    n_partitions : int
        Target number of boxes (fewer when the data is too narrow for boxes
        at least ``width`` wide).
    width : float
        The halo width (see :func:`halo_width`).
    n_points : int
        Total number of points (recorded in the plan).
    share : callable, optional
        ``share(p)``: the relative share of the points that box p should
        hold (equal shares without it).  Boxes are numbered slab by slab;
        when cuts closer than ``width`` are dropped, the shares are only
        approached.

    Returns
    -------
    Boxes
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    d = lo.size
    span = (hi - lo) / width
    order = np.argsort(-span, kind="stable")
    n_partitions = max(1, int(n_partitions))
    two_levels = d > 1 and n_partitions > 2 and span[order[1]] >= 2.0
    if two_levels:
        # as many slabs as the span allows, the rest of the parts inside slabs
        n1 = max(1, int(round(math.sqrt(n_partitions * span[order[0]] /
                                        max(span[order[1]], 1e-300)))))
        n1 = min(n_partitions, n1)
        n2 = max(1, int(math.ceil(n_partitions / n1)))
        dims = (int(order[0]), int(order[1]))
    else:
        n1, n2 = n_partitions, 1
        dims = (int(order[0]),)
    w = None if share is None else \
        np.array([share(p) for p in range(n1 * n2)], dtype=np.float64).reshape(n1, n2)
    cuts1 = _spaced_cuts(sample[:, dims[0]], n1, width, None if w is None else w.sum(axis=1))
    cuts2 = []
    counts = [1] * (len(cuts1) + 1)
    if len(dims) > 1:
        slab = np.searchsorted(cuts1, sample[:, dims[0]], side="right")
        for s in range(len(cuts1) + 1):
            c = _spaced_cuts(sample[slab == s, dims[1]], n2, width,
                             None if w is None or s >= n1 else w[s])
            cuts2.append(c)
            counts[s] = len(c) + 1
    else:
        cuts2 = [np.zeros(0)] * (len(cuts1) + 1)
    offset = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offset[1:])
    return Boxes(dims=dims, cuts1=cuts1, cuts2=cuts2, offset=offset, width=float(width), d=d,
                 n_points=int(n_points))


def in_widened_box(plan: Boxes, p: int, X, width: float):
    """Whether each point lies in box p widened by ``width`` (conservative, bool).

    Elementwise on X only, so X may be a NumPy or a CuPy array.
    """
    lo, hi = plan.box(p)
    m = None
    for k, dim in enumerate(plan.dims):
        mk = (X[:, dim] >= lo[k] - width) & (X[:, dim] <= hi[k] + width)
        m = mk if m is None else m & mk
    return m


def owned_by(plan: Boxes, p: int, X):
    """Whether box p owns each point (bool; NumPy or CuPy X): the box is closed
    below and open above (a point on a cut belongs to the upper box)."""
    lo, hi = plan.box(p)
    m = None
    for k, dim in enumerate(plan.dims):
        mk = (X[:, dim] >= lo[k]) & (X[:, dim] < hi[k])
        m = mk if m is None else m & mk
    return m


def deep_inside(plan: Boxes, p: int, X, width: float):
    """Whether each point lies at least ``width`` inside box p (bool; NumPy or CuPy X).

    Such a point is in no other box's halo of that width.
    """
    lo, hi = plan.box(p)
    m = None
    for k, dim in enumerate(plan.dims):
        mk = (X[:, dim] > lo[k] + width) & (X[:, dim] < hi[k] - width)
        m = mk if m is None else m & mk
    return m
