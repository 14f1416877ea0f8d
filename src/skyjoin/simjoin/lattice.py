"""The FP16 screen of the brute force: the points on an integer lattice, their products exact.

``algorithm="brute-fp16"`` (GPU) screens every pair like "brute", but its
matrix product runs on the FP16 tensor cores, with FP32 accumulation,
instead of in float64.  Low-precision products usually carry an error
that depends on how the hardware accumulates (alignment, truncation),
which NVIDIA does not document.  This screen avoids needing that model:
its products are of small integers and come out exact.

The centred float64 points a (``brute_bound.centred``) are written
``a = s x + r``, with s a power of two shared by both sides of the join,
``x = rint(a / s)`` an integer vector and r the remainder.  r is computed
exactly: where ``x_k != 0``, ``|r_k| <= s / 2 <= |s x_k| / 2``, so
``a_k - s x_k`` is exact (Sterbenz's lemma), and where ``x_k = 0``,
``r_k = a_k``.  The scale s is the smallest power of two with every
``|x_k| <= 2048`` and every ``|x|^2 < 2^24`` (``lattice_scale``; checked
on the integers themselves).  Then:

* FP16 holds every integer up to 2048, so the rounding to FP16 is exact;
* each product ``x_ik x_jk`` is an integer of at most 22 bits, exact in
  FP32;
* every partial sum of a dot product, in any order, is an integer of
  magnitude at most ``|x_i| |x_j| < 2^24`` (Cauchy-Schwarz).  So any FP32
  accumulation that keeps float32's 24-bit significand aligned to its
  largest addend adds them exactly.  That covers IEEE rounding, blocked
  and split-K sums, and the tensor cores' truncating adders.

So the screen's ``D = |x_i|^2 + |x_j|^2 - 2 x_i . x_j`` (float64, integers
below 2^26) is exactly ``|x_i - x_j|^2``.  From ``s (x_i - x_j) = (a_i -
a_j) - (r_i - r_j)`` and ``brute_bound`` steps 1-2, a pair that the join's
test accepts has ``s |x_i - x_j| <= sqrt(T) + w_i + w_j``, with ``w = cu R
+ rho`` (R the radius of a, rho an upper bound of |r|).  The screen keeps
the pair when ``D <= ((sqrt(T) + w_i + w_j) / s)^2`` (evaluated with the
same rounding allowance as the float64 screen).  This is brute_bound's
step 5, and the only rounding it pays for is the quantisation.

Cost: O(n d) to place the points, against the float64 screen's n^2 d
product: its cost is the FP16 tensor cores' (about 15 times the FP64 rate on
Hopper) and one read of a float32 product (4 bytes an entry, against 8).
The margin grows by ``rho_i + rho_j <= s sqrt(d)`` against the largest
norm: about ``sqrt(d) / 4096`` of the data's radius.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .brute_bound import U64, FilterBound, row_radii

__all__ = ["FP16_INTEGERS", "NORM_LIMIT", "Lattice", "lattice_scale", "on_lattice",
           "lattice_bound", "padded_columns"]

#: FP16 represents every integer of magnitude up to this
FP16_INTEGERS = 2048
#: squared lattice norms stay below this (FP32's 24-bit significand)
NORM_LIMIT = 2 ** 24
#: the tensor cores' FP16 products read the columns in multiples of this
_COLUMN_MULTIPLE = 8


@dataclass(frozen=True, eq=False)
class Lattice:
    """Points placed on the lattice of spacing ``scale`` (module
    docstring), arrays of the caller's module (NumPy or CuPy).

    Attributes
    ----------
    points : float16 array (n, d padded)
        The integer coordinates x, zero-padded to ``padded_columns(d)``.
    norms : float64 array (n,)
        ``|x|^2``, exact.
    slack : float64 array (n,)
        ``w / s`` rounded up: the row's share of the screen's radius,
        in lattice units.
    scale : float
        s, a power of two.
    """

    points: Any
    norms: Any
    slack: Any
    scale: float


def padded_columns(d: int) -> int:
    """The lattice's column count: d rounded up to the tensor cores'
    multiple.  O(1)."""
    return -(-d // _COLUMN_MULTIPLE) * _COLUMN_MULTIPLE


def lattice_scale(radius: float, absmax: float, d: int) -> float:
    """The smallest power of two s for which points of norm at most
    ``radius`` and coordinates at most ``absmax`` in magnitude round to
    integers ``|x_k| <= 2048`` with ``|x|^2 < 2^24``.  Rounding moves a
    point by at most ``sqrt(d) / 2`` lattice units, so the norm's budget is
    ``4095 - sqrt(d) / 2``.  O(1).

    Raises
    ------
    ValueError
        d so large that rounding alone could reach the norm limit.
    """
    room = 4095.0 - math.sqrt(d) / 2.0
    if room < 1.0:
        raise ValueError(f"{d} dimensions are too many for the FP16 lattice screen "
                         "(at most 16 million): use algorithm='brute'")
    need = max(radius / room, absmax / (FP16_INTEGERS - 0.5))
    if not need > 0.0:
        return 1.0
    m, e = math.frexp(need)           # need = m 2^e, 0.5 <= m < 1
    return math.ldexp(1.0, e - 1) if m == 0.5 else math.ldexp(1.0, e)


def on_lattice(A, radii, cu: float, scale: float, xp=np) -> Lattice:
    """The centred float64 points A (n x d, of ``xp``) with radii ``radii``
    (``brute_bound.row_radii``) on the lattice of spacing ``scale``; ``cu``
    the centring's constant (``FilterBound.cu``).  O(n d).

    Raises
    ------
    ValueError
        The scale leaves an integer beyond FP16's or a squared norm at or
        above 2^24 (``lattice_scale`` prevents both).
    """
    n, d = A.shape
    x = xp.rint(A / scale)
    r = A - x * scale                                   # exact (module docstring)
    norms = xp.einsum("ij,ij->i", x, x)                 # integers below 2^53: exact
    if n and (float(xp.abs(x).max()) > FP16_INTEGERS or float(norms.max()) >= NORM_LIMIT):
        raise ValueError(f"lattice spacing {scale!r} leaves integers beyond FP16's range")
    rho = row_radii(xp.einsum("ij,ij->i", r, r), d, xp)
    # w / s rounded up: three roundings covered by (1 + 4u); the tiny term
    # covers an underflow of the division
    slack = (cu * radii + rho) * (1.0 + 4 * U64) / scale + 1e-300
    points = xp.zeros((n, padded_columns(d)), dtype=xp.float16)
    points[:, :d] = x
    return Lattice(points=points, norms=norms, slack=slack, scale=float(scale))


def lattice_bound(fb: FilterBound, scale: float) -> FilterBound:
    """The float64 screen's threshold constants (``brute_bound.filter_bound``)
    for the lattice of spacing ``scale``: ``thr = (root_t / s + w_i / s +
    w_j / s)^2 inflate``, with the rows' ``slack`` as the radii and
    ``cu = 1``, ``cg = 0`` (the products are exact).  O(1)."""
    return FilterBound(root_t=fb.root_t / scale * (1.0 + 2 * U64) + 1e-300, cu=1.0, cg=0.0,
                       inflate=fb.inflate)
