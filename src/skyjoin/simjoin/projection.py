"""The screen on principal components: an index for a low intrinsic dimension.

Points in many dimensions often lie near a subspace of few (embeddings,
physics events, the manifold of the high-dimensional join's issue).  The
brute force (``brute_bound``) pays n^2 d / 2 multiply-adds whatever the
data; its screen can instead read the points' coordinates on the q leading
principal axes: an orthogonal projection never lengthens a distance, so a
pair within eps is within eps there too, and on such data the q-D screen
lets through hardly more pairs than are within eps.  This is the seed
papers' dimension reordering (GDS-Join, Gowanlock and Karsin, JPDC 2019,
§IV-C: index the dimensions of largest variance first) taken one step
further: the axes are rotated onto the principal components rather than
chosen among the coordinates, and every pair is screened on them (no
grid, whose adjacent cells hold most pairs in 6 or more dimensions).

The axes come from a fixed-seed sample of the data (``principal_axes``);
the number q from the sampled share of pairs each q lets through
(``screen_fractions``) and a cost model (``choose_components``, its
constants per device in ``skyjoin.simjoin.algorithm.SCREEN_MODELS``).  Any axes
keep the result exact, since the margin (``brute_bound.projected_bound``,
``projected_threshold``) bounds the norm of the computed axes and every
rounding of the projection: a poor sample costs survivors, never a pair.

Costs: the sample's O(m d^2 + d^3) for the axes (m = 4,096 rows), and
O(512 x 4,096 x q_max) for the fractions; the projection O(n d q).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .brute_bound import U64, gamma

__all__ = ["Projection", "principal_axes", "screen_fractions", "choose_components",
           "axes_norm_bound", "screen_precision", "COMPONENT_STEPS"]

#: the numbers of components the choice tries (those below d)
COMPONENT_STEPS = (2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32)


@dataclass(frozen=True, eq=False)
class Projection:
    """The principal-component screen of one join: ``basis`` (d x q,
    float64, orthonormal columns up to rounding) of the q leading axes of
    the sampled data, ``sigma`` an upper bound of the basis' spectral norm
    (``axes_norm_bound``), ``fraction`` the sampled share of pairs the screen
    lets through at the join's radius, and ``screen`` the precision of the
    screen's arithmetic ("float32" where the margin it adds stays below
    eps / 64, else "float64").  Prints as the algorithm's name; compares
    by identity (it holds an array)."""

    basis: np.ndarray
    sigma: float
    fraction: float
    screen: str = "float32"

    @property
    def components(self) -> int:
        """q, the screened dimensions."""
        return int(self.basis.shape[1])

    def __str__(self) -> str:
        return "projected"

    def describe(self) -> str:
        """One line for ``-v`` logging."""
        return (f"screen on {self.components} principal components ({self.screen}, "
                f"{self.fraction:.2g} of sampled pairs through)")


def principal_axes(sample: np.ndarray) -> np.ndarray:
    """The principal axes of the float64 rows ``sample`` (m x d), as columns
    in decreasing order of variance (d x d).  O(m d^2 + d^3)."""
    c = sample - sample.mean(axis=0)
    cov = c.T @ c
    w, V = np.linalg.eigh(cov)
    return np.ascontiguousarray(V[:, ::-1])


def screen_fractions(a: np.ndarray, b: np.ndarray, axes: np.ndarray, eps: float,
                     steps) -> dict[int, float]:
    """For each q in ``steps``, the share of the pairs (a_i, b_j) of the
    float64 samples whose distance on the q leading ``axes`` is within eps
    (``|p|^2 + |r|^2 - 2 p.r`` from one product a q: an estimate, not a
    decision).  O(|a| |b| len(steps) + (|a| + |b|) d max(steps))."""
    top = max(steps)
    pa, pb = a @ axes[:, :top], b @ axes[:, :top]
    na, nb = np.cumsum(pa * pa, axis=1), np.cumsum(pb * pb, axis=1)
    e2 = eps * eps
    out = {}
    for q in steps:
        s = (na[:, q - 1, None] + nb[None, :, q - 1]) - 2.0 * (pa[:, :q] @ pb[:, :q].T)
        out[q] = float(np.count_nonzero(s <= e2)) / s.size
    return out


def choose_components(fractions: dict[int, float], d: int, within: float,
                      survivor_cost: float) -> tuple[int, float]:
    """(q, cost): the number of components whose screen costs least per
    pair, ``q + survivor_cost (f_q - within) d`` in screened
    pair-components (q screened per pair, and the share f_q let through
    beyond the share ``within`` eps, which any algorithm tests, tested
    exactly in d at ``survivor_cost`` a dimension), with that cost.
    O(len(fractions))."""
    def cost(q):
        return q + survivor_cost * max(fractions[q] - within, 0.0) * d

    best = min(fractions, key=lambda q: (cost(q), q))
    return best, cost(best)


def screen_precision(extent: float, sigma: float, eps: float) -> str:
    """The GPU screen's precision: "float32" where rounding the projections
    to it moves a pair's screened distance by at most eps / 64 (about ``2
    u32 sigma extent``, ``brute_bound`` step 4) and they stay far from its
    overflow, else "float64".  ``extent`` bounds every centred point's
    norm.  O(1)."""
    moved = 2.0 * 2.0 ** -24 * sigma * extent
    return "float32" if moved <= eps / 64 and sigma * extent < 1e30 else "float64"


def axes_norm_bound(basis: np.ndarray) -> float:
    """An upper bound of the spectral norm of ``basis`` (d x q), however
    far from orthonormal its columns are: the largest row sum of |G|, G =
    basis^T basis, bounds G's largest eigenvalue (Gershgorin), each entry
    of the computed G within gamma_d of the exact one times the columns'
    largest squared norm; the square root, rounded up.  O(d q^2)."""
    d, q = basis.shape
    G = basis.T @ basis
    m = float(np.max(np.diag(G))) / (1.0 - gamma(d, U64))
    row = float(np.max(np.abs(G).sum(axis=1))) * (1.0 + gamma(q + 1, U64))
    return math.sqrt((row + q * gamma(d, U64) * m) * (1.0 + 4 * U64)) * (1.0 + 4 * U64)
