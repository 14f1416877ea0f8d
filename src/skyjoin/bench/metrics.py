"""DBSCAN under the join's other metrics, beside scikit-learn and the Euclidean path.

The cases of ``skyjoin bench dbscan`` for haversine and cosine:

* ``Geo-1M-haversine``: 1M points of :func:`skyjoin.datasets.geographic`
  (clusters at both poles and across the antimeridian), eps 3 km (about
  14 neighbours a point), min_samples 10: ours on the device asked for,
  and on the CPU scikit-learn's ``DBSCAN(metric="haversine")`` (its ball
  tree, with its defaults);
* ``Geo-10M-haversine`` (GPU): 10M such points at eps 1 km, ours beside
  the Euclidean 2-D path on the same points mapped to an equal-area plane
  (x = lon, y = sin lat: the same area, so the same neighbours a point on
  average, at the same eps);
* ``Sphere64D-200k-cosine``: 200k points of a Gaussian mixture on the unit
  sphere in 64-D (100 clusters of varied width), eps 0.005 (about 20
  neighbours a point), min_samples 10: ours, and on the CPU
  scikit-learn's ``DBSCAN(metric="cosine")`` (brute force).

Every implementation's cluster and noise counts are reported; ours must
equal scikit-learn's labels (the tests check that, on smaller data).
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj

from .. import datasets
from ..datasets import EARTH_RADIUS_KM
from .harness import Case, Impl, data_case, label_counts, size_tag

__all__ = ["cases", "sphere_mixture", "equal_area"]

#: (name, points, eps, min_samples, metric, devices)
_CASES = (("Geo", 1_000_000, 3.0 / EARTH_RADIUS_KM, 10, "haversine", ("cpu", "gpu")),
          ("Geo", 10_000_000, 1.0 / EARTH_RADIUS_KM, 10, "haversine", ("gpu",)),
          ("Sphere64D", 200_000, 0.005, 10, "cosine", ("cpu", "gpu")))
QUICK_N = 20_000


def sphere_mixture(n: int, d: int = 64, k: int = 100, seed: int = 3) -> np.ndarray:
    """n points of k Gaussian clusters on the unit sphere in d dimensions:
    random unit centres, noise of width 0.15 / sqrt(d) times a per-cluster
    factor in [0.5, 2], every row normalised.  O(n d)."""
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(k, d))
    C /= np.linalg.norm(C, axis=1)[:, None]
    lab = rng.integers(0, k, n)
    Y = C[lab] + rng.normal(0, 0.15, (n, d)) / np.sqrt(d) * rng.uniform(0.5, 2.0, k)[lab, None]
    return Y / np.linalg.norm(Y, axis=1)[:, None]


def equal_area(X: np.ndarray) -> np.ndarray:
    """(lat, lon) in radians on Lambert's equal-area cylinder, (lon, sin lat):
    areas are kept, so a radius encloses as many points on average as the
    same great-circle radius does.  O(n)."""
    return np.ascontiguousarray(np.stack([X[:, 1], np.sin(X[:, 0])], axis=1))


def _counts(est) -> dict:
    """The clusters and noise of a fitted estimator, with ours' path."""
    out = label_counts(est.labels_)
    if hasattr(est, "path_"):
        out["path"] = est.path_
    return out


def _ours(get, eps, m, metric, device, tag=""):
    def fn():
        return _counts(sj.DBSCAN(eps=eps, min_samples=m, metric=metric, device=device)
                       .fit(get()))
    return Impl(f"skyjoin DBSCAN {metric} ({device}){tag}", fn, ours=True)


def _sklearn(get, eps, m, metric):
    def fn():
        return _counts(SkDBSCAN(eps=eps, min_samples=m, metric=metric).fit(get()))
    return Impl(f"scikit-learn DBSCAN {metric}", fn, repeat=1)


def _euclidean_plane(get, eps, m):
    plane = {}

    def fn():
        if "X" not in plane:
            plane["X"] = equal_area(get())
        return _counts(sj.DBSCAN(eps=eps, min_samples=m, device="gpu").fit(plane["X"]))
    return Impl("skyjoin DBSCAN euclidean 2-D equal-area plane (gpu)", fn)


def _data(kind: str, n: int) -> np.ndarray:
    if kind == "Geo":
        return datasets.geographic(n, seed=15)
    return sphere_mixture(n)


def cases(quick: bool = False, device: str = "cpu") -> list[Case]:
    """The metric cases for ``device`` (``QUICK_N`` points when quick)."""
    out = []
    for kind, n_full, eps, m, metric, devices in _CASES:
        if device not in devices or (quick and n_full > 1_000_000):
            continue
        n = QUICK_N if quick else n_full

        def impls_of(get, eps=eps, m=m, metric=metric, n_full=n_full):
            impls = [_ours(get, eps, m, metric, device)]
            if device == "cpu":
                impls.append(_sklearn(get, eps, m, metric))
            elif metric == "haversine" and n_full > 1_000_000:
                impls.append(_euclidean_plane(get, eps, m))
            else:
                impls.append(_ours(get, eps, m, metric, "cpu"))
            return impls

        out.append(data_case(f"{kind}-{size_tag(n)}-{metric}-eps{eps:.3g}-m{m}",
                             {"n": n, "eps": eps, "min_samples": m, "metric": metric},
                             lambda kind=kind, n=n: _data(kind, n), impls_of))
    return out
