"""The provable margin of the brute-force join's filter.

The brute-force path (``cpu.brute``, ``gpu.brute``) finds candidate pairs
from a matrix product, ``s = |a|^2 + |b|^2 - 2 a.b`` in float64 on points
``a = fl(x - c)``, ``b = fl(y - c)`` moved by a common centre c, and then
decides every candidate with the join's own test (``sum_k (x_k - y_k)^2 <=
e^2`` in the working precision, terms in order from zero).  The filter
must never drop a pair that the test accepts.  With u the unit roundoff of
float64, u_w that of the working precision and gamma_k(u) = k u / (1 - k u)
(Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1):

1. A pair that passes the rounded test has true squared distance
   ``S <= T = e2 / (1 - gamma_{d+2}(u_w)) + (d + 2) m_w``: each difference,
   square and partial sum is rounded once, so the computed sum is at least
   ``S (1 - gamma_{d+2}(u_w))``, less at most m_w (the smallest subnormal
   of the working precision) for each term that underflows.
2. Centring rounds each coordinate once: ``|(a - b) - (x - y)|`` is at
   most ``u (|a| + |b|) / (1 - u)``, so ``|a - b| <= sqrt(T) + cu (|a| + |b|)``.
3. The product and the norms: any summation order of a length-d dot product
   errs by at most ``gamma_d(u) sum_k |a_k b_k| <= gamma_d(u) |a| |b|``
   (IEEE float64 arithmetic, fused or not, in any order: tensor cores and
   blocked GEMMs included); the two norms likewise, and the two last
   operations (the sum of the norms, the subtraction) add one rounding
   each.  So the computed s exceeds ``|a - b|^2`` by at most
   ``gamma_{d+3}(u) (|a| + |b|)^2``; the bound takes twice that.

Hence the filter keeps (i, j) when ``s <= ((sqrt(T) + cu (r_i + r_j))^2 +
cg (r_i + r_j)^2) (1 + 16 u)``, with r_i an upper bound of |a_i| from its
computed norm (:func:`row_radii`) and the factor 1 + 16 u for the
rounding of the threshold itself (at most nine roundings, each of a
non-negative quantity).  Every pair within eps survives; the refine then
answers exactly as the grid path does.  The margin grows with the norms,
not with eps: points far from their centre and close together (large |a|,
tiny eps) make many candidates, which cost refine time, never a lost pair.

4. The screen on principal components (``projection``) reads ``p = fl(V^T
   a)`` for a computed basis V (d x q) whose spectral norm is at most sigma
   (``projection.axes_norm_bound``).  ``|V^T w| <= sigma |w|``, and each
   coordinate of p errs by at most ``gamma_d(u) |v_k| |a| <= gamma_d(u)
   sigma r`` (any order, as in step 3), so ``|p_i - p_j| <= sigma (sqrt(T)
   + (cu + sqrt(q) gamma_d(u)) (r_i + r_j))`` and ``|p_i| <= sigma (1 +
   sqrt(q) gamma_d(u)) r_i``, with r the radii of the d-dimensional
   centred points.  The product screen on p (the CPU) is then step 3 in q
   dimensions (``projected_bound``).  The GPU's screen sums the squared
   differences of p rounded to its precision (unit u_s, smallest subnormal
   m_s), each rounding at most ``u_s |p| + m_s``, in any order, fused or
   not: the computed sum is at most ``(1 + gamma_{q+3}(u_s)) B^2 + q m_s``,
   B the bound above widened by ``u_s sigma (1 + sqrt(q) gamma_d(u))
   (r_i + r_j) + 2 sqrt(q) m_s``, taken at the largest radius for one
   threshold (``projected_threshold``), rounded up to the screen's
   precision.
5. The FP16 screen (``lattice``) reads exact products of the points
   rounded to an integer lattice; its margin adds the rounding to the
   lattice to steps 1-2 (``lattice.lattice_bound``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["FilterBound", "filter_bound", "gamma", "row_radii", "centred", "tiles", "U64",
           "projected_bound", "projected_threshold", "projected"]

#: unit roundoff of float64
U64 = 2.0 ** -53
_UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24}


def gamma(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u), the relative error bound of k
    roundings.  O(1)."""
    ku = k * u
    if ku >= 0.5:
        raise ValueError(f"{k} roundings of unit {u} have no useful bound")
    return ku / (1.0 - ku)


@dataclass(frozen=True)
class FilterBound:
    """The constants of the filter's threshold (module docstring):
    ``thr(i, j) = ((root_t + cu * rr)^2 + cg * rr^2) * inflate`` with
    ``rr = r_i + r_j``."""

    root_t: float
    cu: float
    cg: float
    inflate: float


def filter_bound(e2: float, d: int, precision: str) -> FilterBound:
    """The threshold constants for the working-precision threshold ``e2``
    (e * e rounded in the working precision, as the test compares) in d
    dimensions.  O(1)."""
    tiny = float(np.finfo(np.float32 if precision == "float32" else np.float64)
                 .smallest_subnormal)
    t = float(e2) / (1.0 - gamma(d + 2, _UNIT[precision])) + (d + 2) * tiny
    return FilterBound(root_t=math.sqrt(t) * (1.0 + 4 * U64),
                       cu=U64 / (1.0 - U64) * 1.01,
                       cg=2.0 * gamma(d + 3, U64),
                       inflate=1.0 + 16 * U64)


def projected_bound(fb: FilterBound, sigma: float, q: int, d: int) -> FilterBound:
    """The threshold constants of the product screen on q principal
    components (step 4) from those of the d-dimensional filter ``fb``: the
    same form, ``rr`` the sum of the d-dimensional radii.  O(1)."""
    c = math.sqrt(q) * gamma(d, U64)
    up = 1.0 + 8 * U64
    return FilterBound(root_t=sigma * fb.root_t * up,
                       cu=sigma * (fb.cu + c) * up,
                       cg=2.0 * gamma(q + 3, U64) * (sigma * (1.0 + c)) ** 2 * up,
                       inflate=fb.inflate)


def projected_threshold(e2: float, d: int, precision: str, sigma: float, q: int,
                        radius: float, screen: str) -> float:
    """The one threshold of the GPU's difference screen on q principal
    components (step 4) in the screen's precision ``screen`` ("float32" or
    "float64"), rounded up into it: every pair that the join's test accepts
    has a computed squared screen distance at most this.  ``radius``
    bounds every centred point's norm.  O(1)."""
    fb = filter_bound(e2, d, precision)
    dtype = np.float32 if screen == "float32" else np.float64
    us = _UNIT[screen]
    ms = float(np.finfo(dtype).smallest_subnormal)
    c = math.sqrt(q) * gamma(d, U64)
    rr = 2.0 * radius
    b = sigma * (fb.root_t + (fb.cu + c + us * (1.0 + c)) * rr) + 2.0 * math.sqrt(q) * ms
    thr = ((1.0 + gamma(q + 3, us)) * b * b + q * ms) * (1.0 + 16 * U64)
    t = dtype(thr)
    return float(t if float(t) >= thr else np.nextafter(t, dtype(np.inf)))


def row_radii(sq_norms, d: int, xp=np):
    """Upper bounds of the rows' Euclidean norms from their computed squared
    norms (each within gamma_d of the exact one), for the threshold.
    O(n)."""
    return xp.sqrt(sq_norms * (1.0 + gamma(d, U64))) * (1.0 + 2 * U64)


def tiles(nq: int, ns: int, rows: int, cols: int, self_join: bool):
    """The (i0, i1, j0, j1) bounds of the product's tiles of ``rows`` query
    points by ``cols`` data points, column tiles outermost (a column block
    is read by every row tile in turn): every tile, or for a self-join only
    those that hold a pair i < j.  The brute-force engines' one tiling."""
    for j0 in range(0, ns, cols):
        j1 = min(j0 + cols, ns)
        for i0 in range(0, nq, rows):
            if self_join and j1 <= i0 + 1:
                break
            yield i0, min(i0 + rows, nq), j0, j1


def centred(Q, S, xp=np):
    """Float64 copies of the query points Q and data points S (arrays of
    ``xp``, NumPy or CuPy) moved by the data's mean: one centre for both, so
    that each difference is preserved up to one rounding (step 2 above).
    Returns (Qc, |Qc|^2, Q's radii, Sc, |Sc|^2, S's radii); a self-join
    (Q is S) shares them.  O((n_q + n_s) d)."""
    c = S.mean(axis=0, dtype=xp.float64)
    Sc = S.astype(xp.float64) - c
    ns_ = xp.einsum("ij,ij->i", Sc, Sc)
    rs = row_radii(ns_, S.shape[1], xp)
    if Q is S:
        return Sc, ns_, rs, Sc, ns_, rs
    Qc = Q.astype(xp.float64) - c
    nq_ = xp.einsum("ij,ij->i", Qc, Qc)
    return Qc, nq_, row_radii(nq_, S.shape[1], xp), Sc, ns_, rs


def projected(Q, S, basis, xp=np):
    """``centred``'s tuple for the screen on principal components (step 4):
    (Pq, |Pq|^2, Q's radii, Ps, |Ps|^2, S's radii), P the float64
    coordinates of the centred points on the columns of ``basis`` (d x q)
    and the radii those of the d-dimensional centred points.  The centred
    copies are dropped once projected.  O((n_q + n_s) d q)."""
    Qc, _, rq, Sc, _, rs = centred(Q, S, xp)
    V = xp.asarray(basis)
    Ps = xp.matmul(Sc, V)
    ps_ = xp.einsum("ij,ij->i", Ps, Ps)
    if Q is S:
        return Ps, ps_, rs, Ps, ps_, rs
    Pq = xp.matmul(Qc, V)
    return Pq, xp.einsum("ij,ij->i", Pq, Pq), rq, Ps, ps_, rs

