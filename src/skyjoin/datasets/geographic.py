"""Geographic workloads: clusters of (latitude, longitude) points on the sphere.

The places where a grid over latitude and longitude goes wrong are pinned:
one cluster at each pole (where every longitude meets) and one across the
antimeridian (where longitude wraps from +pi to -pi).  The data is meant for
``metric="haversine"`` (scikit-learn's convention: (lat, lon) in radians,
distances in radians of a unit sphere).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .checks import Seed, as_generator, check_nd, check_real, fill_doc

__all__ = ["geographic", "EARTH_RADIUS_KM", "PINNED_PLACES"]

#: The mean Earth radius (IUGG, R1), in km: ``spread_km / EARTH_RADIUS_KM``
#: is an angle in radians, the unit of haversine distances.
EARTH_RADIUS_KM = 6371.0088

#: The first centres of :func:`geographic`, (lat, lon) in degrees: the north
#: pole, the south pole, and a place on the antimeridian (17 S, 180: Fiji).
PINNED_PLACES = ((90.0, 0.0), (-90.0, 0.0), (-17.0, -180.0))


def _unit_vectors(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Points of the unit sphere, (k, 3), from (lat, lon) in radians."""
    c = np.cos(lat)
    return np.column_stack([c * np.cos(lon), c * np.sin(lon), np.sin(lat)])


def _tangent_bases(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors e1, e2 orthogonal to each centre and to each other."""
    ref = np.zeros_like(C)
    polar = np.abs(C[:, 2]) > 0.9           # the z axis is a bad reference there
    ref[polar, 0] = 1.0
    ref[~polar, 2] = 1.0
    e1 = np.cross(ref, C)
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(C, e1)
    return e1, e2


def _lat_lon(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lat, lon) in radians of points on the unit sphere; lon in [-pi, pi)."""
    lat = np.arctan2(P[:, 2], np.hypot(P[:, 0], P[:, 1]))
    lon = np.arctan2(P[:, 1], P[:, 0])
    return lat, np.where(lon >= math.pi, lon - 2.0 * math.pi, lon)


def _check_count(name: str, value, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


@fill_doc
def geographic(n: int, n_clusters: int = 20, spread_km: float = 300.0,
               noise_fraction: float = 0.1, seed: Seed = None, degrees: bool = False,
               return_labels: bool = False,
               return_centers: bool = False) -> np.ndarray | tuple[np.ndarray, ...]:
    """Clusters of (lat, lon) points around places on the sphere, with noise.

    The first centres are :data:`PINNED_PLACES`: the north pole, the south
    pole and (17 S, 180) on the antimeridian, so that clusters sit where
    every longitude meets and where longitude wraps; the other
    ``n_clusters - 3`` centres are uniform on the sphere.  Each cluster
    point lies at great-circle distance r < ``spread_km`` from its centre,
    r a Rayleigh variable of scale spread_km / 3 truncated at spread_km
    (a Gaussian in the tangent plane, 1 % of it beyond the cut), in a
    uniform direction, mapped onto the sphere by the exponential map (the
    great circle leaving the centre in that direction), so the distance
    is exact at the poles and across the antimeridian alike.  Noise
    points are uniform on the sphere.

    The recipe (fixed, so a seed always gives the same data)::

        rng = np.random.default_rng(seed)
        z, lon = rng.uniform(-1, 1, k), rng.uniform(-pi, pi, k)  # k = n_clusters - 3
        labels = rng.integers(0, n_clusters, n)
        labels[rng.random(n) < noise_fraction] = -1
        u, phi = rng.random(n), rng.uniform(0, 2 pi, n)       # distance, direction
        nz, nlon = rng.uniform(-1, 1, n), rng.uniform(-pi, pi, n)  # the noise

    O(n) time and memory.

    Parameters
    ----------
    n : int
        Number of points (>= 0).
    n_clusters : int
        Number of clusters (>= 1); with fewer than 3, the first
        ``n_clusters`` pinned places.
    spread_km : float
        Largest distance of a cluster point from its centre, in km on a
        sphere of radius :data:`EARTH_RADIUS_KM` (> 0, at most half the
        circumference).  In radians: ``spread_km / EARTH_RADIUS_KM``.
    noise_fraction : float
        Expected fraction of noise points, in [0, 1].
    {seed}
    degrees : bool
        Return degrees instead of radians (lon in [-180, 180)).
    return_labels : bool
        Also return each point's cluster (-1 for noise).
    return_centers : bool
        Also return the centres, (n_clusters, 2) (lat, lon), in the unit of X.

    Returns
    -------
    X : numpy.ndarray
        float64, C-contiguous, shape (n, 2): latitude in [-pi/2, pi/2],
        longitude in [-pi, pi) (radians, scikit-learn's haversine input).
    labels : numpy.ndarray of int64, shape (n,)
        Only with ``return_labels``.
    centers : numpy.ndarray, shape (n_clusters, 2)
        Only with ``return_centers``.

    Raises
    ------
    ValueError
        If n < 0, n_clusters < 1, spread_km is not in (0, pi R] or
        noise_fraction is not in [0, 1].
    TypeError
        If n, n_clusters or seed have the wrong type.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> X, y = datasets.geographic(1000, n_clusters=5, seed=0, return_labels=True)
    >>> X.shape, bool(abs(X[:, 0]).max() <= 1.5707963267948966)
    ((1000, 2), True)
    >>> bool((X[y == 0, 0] > 1.5).all())    # cluster 0: the north pole
    True
    """
    n, _ = check_nd(n, 2)
    n_clusters = _check_count("n_clusters", n_clusters, 1)
    spread_km = check_real("spread_km", spread_km, positive=True)
    if spread_km > math.pi * EARTH_RADIUS_KM:
        raise ValueError(f"spread_km must be at most half the circumference, "
                         f"{math.pi * EARTH_RADIUS_KM:.1f} km, got {spread_km}")
    noise_fraction = check_real("noise_fraction", noise_fraction)
    if not 0.0 <= noise_fraction <= 1.0:
        raise ValueError(f"noise_fraction must be in [0, 1], got {noise_fraction}")
    rng = as_generator(seed)
    pinned = np.radians(np.array(PINNED_PLACES[:n_clusters], dtype=np.float64)).reshape(-1, 2)
    k = n_clusters - len(pinned)
    z, lon = rng.uniform(-1.0, 1.0, k), rng.uniform(-math.pi, math.pi, k)
    centres = np.concatenate([pinned, np.column_stack([np.arcsin(z), lon])])
    labels = rng.integers(0, n_clusters, n).astype(np.int64, copy=False)
    labels[rng.random(n) < noise_fraction] = -1
    u, phi = rng.random(n), rng.uniform(0.0, 2.0 * math.pi, n)
    nz, nlon = rng.uniform(-1.0, 1.0, n), rng.uniform(-math.pi, math.pi, n)

    spread = spread_km / EARTH_RADIUS_KM            # radians
    sigma = spread / 3.0
    # inverse CDF of the Rayleigh law truncated at `spread`: r < spread
    r = sigma * np.sqrt(-2.0 * np.log1p(u * np.expm1(-0.5 * (spread / sigma) ** 2)))
    C = _unit_vectors(centres[:, 0], centres[:, 1])
    e1, e2 = _tangent_bases(C)
    member = labels >= 0
    lab = labels[member]
    rr, pp = r[member, None], phi[member, None]
    P = np.cos(rr) * C[lab] + np.sin(rr) * (np.cos(pp) * e1[lab] + np.sin(pp) * e2[lab])
    X = np.empty((n, 2), dtype=np.float64)
    X[member, 0], X[member, 1] = _lat_lon(P)
    X[~member, 0], X[~member, 1] = np.arcsin(nz[~member]), nlon[~member]
    out_centres = centres                            # lon already in [-pi, pi)
    if degrees:
        X = np.degrees(X)
        X[:, 1] = np.where(X[:, 1] >= 180.0, X[:, 1] - 360.0, X[:, 1])
        out_centres = np.degrees(out_centres)
    X = np.ascontiguousarray(X)
    out = (X,) + ((labels,) if return_labels else ()) + \
        ((out_centres,) if return_centers else ())
    return out if len(out) > 1 else X
