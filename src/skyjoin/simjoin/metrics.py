"""Metrics other than the Euclidean: a Euclidean filter, then the metric's own test.

A join (or DBSCAN) under metric m runs in two steps:

1. **filter**: the Euclidean join, on any device and by any of its
   algorithms, of the points mapped into a Euclidean space
   (``filter_points``) at a radius (``filter_radius``) that provably keeps
   every pair within eps under m, rounding included (the derivation is in
   docs/exactness.md);
2. **refine**: each candidate pair decided on the host by m's reduced
   distance compared with m's reduced threshold, the very formula and
   comparison of scikit-learn's neighbour searches
   (``sklearn.metrics._dist_metrics``: ``rdist(x, y) <= _dist_to_rdist(eps)``;
   cosine: ``sklearn.metrics.pairwise.cosine_distances``), evaluated in
   float64 on the original points (``skyjoin.simjoin.cpu.refine``).

Per metric (scikit-learn's meaning; names and aliases as scikit-learn's):

============  ===========================  ===================================
metric        filter points                reduced distance, threshold
============  ===========================  ===================================
manhattan     the points                   sum_k |x_k - y_k|, eps
chebyshev     the points                   max_k |x_k - y_k|, eps
haversine     unit vectors of (lat, lon)   sin^2(dlat/2) + cos lat1 cos lat2
                                           sin^2(dlon/2), sin^2(eps/2)
cosine        rows / their norm            clip(1 - u.v, 0, 2), eps
============  ===========================  ===================================

This module holds the names, the checks of the points, the filter's points
and radius and the thresholds: NumPy, and the host threads for
haversine's unit vectors; O(n d) at most.  Haversine's checks and unit
vectors on the GPU (the DBSCAN grid path: ``skyjoin.cluster.plan.filter_on_device``)
are ``skyjoin.simjoin.gpu.unit_vectors``, with this module's limits and
messages.
"""

from __future__ import annotations

import math

import numpy as np

from .brute_bound import U64

__all__ = ["METRICS", "METRIC_ALIASES", "METRIC_CODE", "check_metric", "check_metric_points",
           "check_haversine_columns", "haversine_domain_error",
           "filter_points", "refine_points", "filter_radius", "sure_radius", "decision_radii",
           "metric_threshold",
           "FILTER_SLACK", "LAT_LIMIT", "LON_LIMIT"]

#: the join's metrics (canonical names); "euclidean" is the join itself
METRICS = ("euclidean", "manhattan", "chebyshev", "haversine", "cosine")
#: scikit-learn's other names of the same metrics
METRIC_ALIASES = {"l2": "euclidean", "cityblock": "manhattan", "l1": "manhattan",
                  "infinity": "chebyshev"}
#: the refine kernels' code of each metric
METRIC_CODE = {"manhattan": 0, "chebyshev": 1, "haversine": 2, "cosine": 3}
#: slack added to every filter radius (``filter_radius``), far above the
#: rounding it must cover (a few hundred units of 2**-53): it costs a few
#: candidates, never a pair
FILTER_SLACK = 2.0 ** -40

#: haversine's domain, radians: |latitude| <= LAT_LIMIT, |longitude| <= LON_LIMIT
#: (values outside are almost surely degrees; the filter's margin is derived for it)
LAT_LIMIT = math.pi / 2
LON_LIMIT = 2 * math.pi


def check_metric(metric) -> str:
    """The canonical name of ``metric`` (``METRICS``, or an alias of
    ``METRIC_ALIASES``).  O(1).

    Raises
    ------
    ValueError
        An unknown metric: the message names it and the supported ones.
    """
    if isinstance(metric, str):
        name = metric.lower()
        name = METRIC_ALIASES.get(name, name)
        if name in METRICS:
            return name
    supported = ", ".join(repr(m) for m in METRICS + tuple(METRIC_ALIASES))
    raise ValueError(f"unknown metric {metric!r}: the join supports {supported} "
                     "(scikit-learn's meaning of each)")


def check_metric_points(X: np.ndarray, metric: str, name: str = "X") -> np.ndarray:
    """Check float64 points (already ``check_points``-ed) for ``metric``;
    returns them.  O(n d).

    * haversine: exactly 2 columns, (latitude, longitude) in radians, the
      latitude within [-pi/2, pi/2] and the longitude within [-2 pi, 2 pi]
      (values outside are almost surely degrees; the filter's margin is
      derived for these ranges);
    * cosine: every row of norm at least ``10 * 2**-52`` (scikit-learn's
      ``normalize`` leaves smaller rows unnormalised, so their cosine
      distance is not the angle's: a zero row is at distance 1 from every
      row, itself included).

    Raises
    ------
    ValueError
        Naming the rule and the first row that breaks it.
    """
    if metric == "haversine":
        check_haversine_columns(X.shape[1], name)
    if not X.size:
        return X
    if metric == "haversine":
        from .cpu import unit_vectors as sphere  # Numba: loaded on first use (CLI start-up)

        row = sphere.first_outside(X, LAT_LIMIT, LON_LIMIT)
        if row >= 0:
            raise haversine_domain_error(name, row, X[row].tolist())
    elif metric == "cosine":
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        small = norms < 10 * np.finfo(np.float64).eps
        if small.any():
            row = int(np.argmax(small))
            raise ValueError(
                f"metric='cosine' needs rows of non-zero norm (at least 2.2e-15); "
                f"{name}[{row}] has norm {norms[row]:.3g}: its cosine distance to any row, "
                "itself included, would be 1")
    return X


def check_haversine_columns(d: int, name: str = "X") -> None:
    """ValueError unless haversine's points have exactly 2 columns (latitude,
    longitude in radians).  O(1)."""
    if d != 2:
        raise ValueError(f"metric='haversine' needs 2 columns (latitude, longitude in "
                         f"radians); {name} has {d}")


def haversine_domain_error(name: str, row: int, values) -> ValueError:
    """The error of a haversine point outside ``LAT_LIMIT``, ``LON_LIMIT``:
    ``values`` the row's [latitude, longitude] as floats; one text for the
    host check (``check_metric_points``) and the GPU's
    (``skyjoin.simjoin.gpu.unit_vectors``).  O(1)."""
    return ValueError(
        f"metric='haversine' reads (latitude, longitude) in radians, latitude in "
        f"[-pi/2, pi/2] and longitude in [-2 pi, 2 pi]; {name}[{row}] is "
        f"{list(values)} (degrees? convert with numpy.radians)")


def refine_points(X: np.ndarray, metric: str) -> np.ndarray:
    """The points the refine reads: the points themselves, except for
    cosine, whose rows are normalised exactly as scikit-learn's
    ``sklearn.preprocessing.normalize`` does (``X / sqrt(einsum(X, X))``,
    the same NumPy operations).  O(n d)."""
    if metric != "cosine":
        return X
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return X / norms[:, None]


def filter_points(X: np.ndarray, metric: str) -> np.ndarray:
    """The Euclidean points of the filter: haversine's unit vectors
    ``(cos lat cos lon, cos lat sin lon, sin lat)`` (on the host threads:
    ``cpu.unit_vectors``), the normalised rows of cosine (``refine_points``),
    the points themselves for Manhattan and Chebyshev.  O(n d)."""
    if metric == "haversine":
        from .cpu import unit_vectors as sphere  # Numba: loaded on first use (CLI start-up)

        return sphere.unit_vectors(X)
    return np.ascontiguousarray(refine_points(X, metric))


def metric_threshold(eps: float, metric: str) -> float:
    """What the refine compares the reduced distance with: scikit-learn's
    ``_dist_to_rdist(eps)`` (haversine: ``sin(0.5 * eps) ** 2`` with the C
    library's sine, as ``math.sin``), eps itself for the others.  O(1)."""
    if metric == "haversine":
        t = math.sin(0.5 * eps)
        return t * t
    return float(eps)


def filter_radius(eps: float, metric: str, d: int) -> float:
    """The Euclidean radius of the filter in ``filter_points``' space: every
    pair that the refine accepts lies within it there, by the join's own
    rounded test (docs/exactness.md, for the derivation; u is
    2**-53, d the points' dimensions):

    * manhattan: ``eps (1 + 4 (d + 3) u)`` (L2 <= L1);
    * chebyshev: ``eps sqrt(d) (1 + 4 (d + 3) u)`` (L2 <= sqrt(d) Linf);
    * haversine: the chord ``2 sqrt(t)`` of the threshold t
      (``metric_threshold``), plus 64 u (the host's unit vectors);
    * cosine: ``sqrt(2 eps + 16 (d + 3) u) (1 + 4 (d + 4) u)``
      (|u - v|^2 = 2 (1 - cos) for unit vectors);

    each then widened by ``FILTER_SLACK``, relative (covering the rounding
    of this very formula), and for haversine and cosine, whose filter
    points are unit vectors, absolute too.  Manhattan and Chebyshev stay
    scale-free: the join scales their points and radius by one power of two
    where their range needs it (``skyjoin._core.conditioning``).  O(1).
    """
    if metric == "manhattan":
        r = eps * (1.0 + 4 * (d + 3) * U64)
    elif metric == "chebyshev":
        r = eps * math.sqrt(d) * (1.0 + 4 * (d + 3) * U64)
    elif metric == "haversine":
        r = 2.0 * math.sqrt(metric_threshold(eps, metric)) + 64 * U64
    elif metric == "cosine":
        r = math.sqrt(2.0 * eps + 16 * (d + 3) * U64) * (1.0 + 4 * (d + 4) * U64)
    else:
        raise ValueError(f"no filter for metric {metric!r}")
    r *= 1.0 + FILTER_SLACK
    return r + FILTER_SLACK if metric in ("haversine", "cosine") else r


def decision_radii(eps: float, metric: str) -> tuple[float, float]:
    """(sure, upper): haversine's chords within which every pair is
    accepted (``sure_radius``) and beyond which every pair is refused by the
    refine: ``(2 sqrt(t) + 128 u) (1 + 16 u)``, the same bound the other way
    (``filter_radius`` widens it by ``FILTER_SLACK`` on top, which a table
    pays in candidates but a decision in pairs left undecided).  Both hold
    for unit vectors from ``sin`` and ``cos`` within 11 ulp of the exact
    values: the host's (the C library's, 1 ulp) and the GPU's (CUDA's,
    2 ulp of the correctly rounded value; ``skyjoin.simjoin.gpu.unit_vectors``)
    alike (docs/exactness.md).  O(1)."""
    sure = sure_radius(eps, metric)
    upper = (2.0 * math.sqrt(metric_threshold(eps, metric)) + 128 * U64) * (1.0 + 16 * U64)
    return sure, upper


def sure_radius(eps: float, metric: str) -> float:
    """The Euclidean radius in ``filter_points``' space within which every
    pair is accepted by the refine: haversine only, where the filter's
    bound holds both ways (docs/exactness.md: the computed chord
    and ``2 sqrt(rdist)`` of the refine differ by at most
    ``8 u c + 32 u + E``, u = 2**-53, E = 10 u for the host's unit vectors,
    22 u for the GPU's), so ``(2 sqrt(t) - 128 u) (1 - 16 u)``, t the
    threshold: room for E up to 95 u, and a relative 16 u for the join's
    test of the squared chord (``(1 + gamma_5)``) and this formula's own
    rounding.  It is kept
    tighter than ``FILTER_SLACK``: the band between it and eps holds only
    pairs within about 1e-10 of eps relatively, which at 10M points of
    realistic data is less than one pair.  A pair in the band is decided by
    the refine alone (the GPU grid hands such a clustering to the table
    path: ``skyjoin.cluster.grid_gpu``).  O(1).
    """
    if metric != "haversine":
        raise ValueError(f"no sure radius for metric {metric!r}")
    r = (2.0 * math.sqrt(metric_threshold(eps, metric)) - 128 * U64) * (1.0 - 16 * U64)
    return max(r, 0.0)
