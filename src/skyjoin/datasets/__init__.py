"""Seeded, reproducible data generators.

Every generator returns a float64, C-contiguous array of shape (n, d) and
takes ``seed``: an int, ``None`` (fresh entropy) or a ``numpy.random.Generator``
(used as is, so successive calls continue its stream).

* Join and DBSCAN workloads: :func:`uniform` (points uniform in a box),
  :func:`exponential` (rate lambda, values above 1 rejected: the papers'
  *Expo* sets), :func:`blobs` (Gaussian clusters, also the Gaussian
  mixtures of the high-dimensional benchmarks) and :func:`manifold` (a
  k-dimensional linear manifold in d dimensions plus noise).
* Geographic workloads: :func:`geographic` ((lat, lon) clusters on the
  sphere, at both poles and across the antimeridian, for
  ``metric="haversine"``).
* Skyline workloads: :func:`independent`, :func:`correlated`,
  :func:`anticorrelated` (the standard generator of Börzsönyi, Kossmann and
  Stocker, the ``randdataset`` program used by SkyAlign §6.1) and
  :func:`pareto` (SkyAlign §6.1).
* :func:`generate` dispatches on a kind name (the CLI ``skyjoin generate``),
  :func:`skyline_data` on a skyline kind, and :func:`named_case` returns the
  named benchmark cases of the project (data and eps) exactly as pinned.

The exact recipes of :func:`uniform` and :func:`exponential` are part of the
contract (the pair counts of the benchmark cases depend on them): they must
not change.

Modules: ``spatial`` (uniform, exponential, blobs, manifold), ``geographic``,
``skyline`` (the standard skyline generator and pareto), ``cases`` (generate
and the named cases), ``checks`` (argument checks shared by the generators).
"""


from .cases import KIND_DIMS, KINDS, NAMED_CASES, NamedCase, generate, named_case
from .geographic import EARTH_RADIUS_KM, PINNED_PLACES, geographic
from .skyline import (SKYLINE_KINDS, anticorrelated, correlated, independent, pareto,
                      skyline_data)
from .spatial import blobs, exponential, manifold, uniform

__all__ = [
    "uniform",
    "exponential",
    "blobs",
    "manifold",
    "geographic",
    "EARTH_RADIUS_KM",
    "PINNED_PLACES",
    "independent",
    "correlated",
    "anticorrelated",
    "pareto",
    "skyline_data",
    "generate",
    "KINDS",
    "KIND_DIMS",
    "SKYLINE_KINDS",
    "NamedCase",
    "NAMED_CASES",
    "named_case",
]
