"""The epsilon grid of non-empty cells (self-join paper, Gowanlock & Karsin 2018, §IV).

Points are binned into cells whose side is (a hair more than) eps in each
of the first ``k`` dimensions, so that every neighbour of a point lies in
its own cell or an adjacent one (§IV-B).  Only non-empty cells are stored
(§IV-C):

* ``points``      the points reordered by cell (the paper keeps a lookup
                  array A; storing the reordered points makes the candidates
                  of a cell contiguous, so loads are sequential);
* ``order``       original row id of each reordered point (the paper's A);
* ``cell_ids``    sorted linear ids of the non-empty cells (the paper's B);
* ``cell_start``  cell c holds reordered points [cell_start[c], cell_start[c+1])
                  (the paper's G);
* ``coords``      per-dimension coordinate values that are occupied (the
                  paper's masks M_j), see below.

Linear ids never wrap around.  Each indexed dimension j is first binned to
an integer coordinate ``c_j = floor((x_j - lo_j) / side_j)``.  The linear id
is then built not from ``c_j`` itself but from its *rank* among the occupied
coordinates of that dimension (``coords[j]``, the mask M_j).  Ranks keep
adjacency (coordinates c and c + 1 that are both occupied have consecutive
ranks) and bound the radix of every dimension by the number of distinct
occupied coordinates, so a far outlier costs one extra rank, not 10^15
empty cells.  If the product of the radices still does not fit in 63 bits,
fewer dimensions are indexed (the remaining ones are still compared exactly
by the distance test).

Which dimensions: the first ``k = min(d, 6)`` by default.  The number of
adjacent cells grows as 3^k; beyond six indexed dimensions a cell has over
2,000 neighbours to look up, most of them empty, and the extra pruning is
rarely worth it for the low-dimensional data this library targets (both
papers index all n <= 6 dimensions).  ``index_dims`` overrides the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Grid", "build_grid", "cell_sides", "DEFAULT_INDEX_DIMS", "MAX_INDEX_DIMS"]

DEFAULT_INDEX_DIMS = 6
MAX_INDEX_DIMS = 8
_U64 = np.finfo(np.float64).eps / 2  # unit roundoff of float64


def cell_sides(lo, hi, eps: float, d: int, precision: str = "float64") -> np.ndarray:
    """Side of the grid cells in each dimension, a hair more than eps.

    The distance test is evaluated in the working precision, so a pair that
    passes it may be up to a few ulps farther apart than eps in some
    coordinate; and the cell coordinate ``floor((x - lo) / side)`` is itself
    rounded.  The side is enlarged just enough that two points which pass the
    test always land in the same or adjacent cells:

    * a pair passing ``fl(sum_k fl(fl(x_k - y_k)^2)) <= fl(eps^2)`` in a
      precision of unit roundoff u has |x_k - y_k| <= eps (1 + (d + 5) u) in
      every coordinate (each rounding is at most a factor 1 + u; the rounded
      sum of non-negative terms is at least its largest term times
      (1 - u)^(d - 1)); we use the factor 1 + 4 (d + 5) u;
    * ``v(x) = fl(fl(x - lo) / s)`` differs from (x - lo) / s by at most
      2.01 u64 (x - lo) / s, so two coordinates at most ``eps'`` apart have
      v values less than 1 apart once s > eps' + 4.02 u64 (hi - lo); we add
      8 u64 (hi - lo).

    A dimension whose span would need more than 2^61 cells gets wider cells
    (span / 2^61): any side at least the bound above is correct.

    Parameters
    ----------
    lo, hi : array_like of float, shape (k,)
        Bounds of all points (queries and data) in the indexed dimensions.
    eps : float
        The join radius.
    d : int
        Total number of dimensions summed by the distance test.
    precision : {"float64", "float32"}

    Returns
    -------
    ndarray of float64, shape (k,)
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    u_w = float(np.finfo(np.float32 if precision == "float32" else np.float64).eps) / 2
    span = np.maximum(hi - lo, 0.0)
    side = eps * (1.0 + 4.0 * (d + 5) * u_w) + 8.0 * _U64 * span
    side = side * (1.0 + 4.0 * _U64)
    side = np.maximum(side, span / float(2**61))
    return side
