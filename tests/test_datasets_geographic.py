"""The geographic generator: ranges, the recipe's determinism, clusters at
both poles and across the antimeridian, and every cluster point within the
stated spread of its centre (scikit-learn's haversine distance)."""

import math

import numpy as np
import pytest
from sklearn.metrics.pairwise import haversine_distances

from skyjoin import datasets as ds


def _haversine_to(X, c):
    """Great-circle distances (radians) of the rows of X to the point c, by
    scikit-learn (an independent float64 oracle)."""
    return haversine_distances(X, np.asarray(c, dtype=np.float64).reshape(1, 2))[:, 0]


@pytest.mark.parametrize("n, k, seed", [(5000, 20, 0), (777, 3, 4), (0, 5, 1), (1, 1, 2)])
def test_shape_ranges_and_dtype(n, k, seed):
    X = ds.geographic(n, n_clusters=k, seed=seed)
    assert X.shape == (n, 2) and X.dtype == np.float64 and X.flags.c_contiguous
    assert np.all(np.abs(X[:, 0]) <= math.pi / 2)
    assert np.all(X[:, 1] >= -math.pi) and np.all(X[:, 1] < math.pi)
    D = ds.geographic(n, n_clusters=k, seed=seed, degrees=True)
    assert np.all(np.abs(D[:, 0]) <= 90.0)
    assert np.all(D[:, 1] >= -180.0) and np.all(D[:, 1] < 180.0)


def test_degrees_are_the_radians_converted():
    X = ds.geographic(3000, seed=7)
    D = ds.geographic(3000, seed=7, degrees=True)
    np.testing.assert_allclose(np.radians(D), X, rtol=0, atol=1e-15)


def test_deterministic_by_seed():
    a, la = ds.geographic(4000, seed=3, return_labels=True)
    b, lb = ds.geographic(4000, seed=3, return_labels=True)
    c = ds.geographic(4000, seed=4)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert not np.array_equal(a, c)
    g = ds.geographic(4000, seed=np.random.default_rng(3))
    assert np.array_equal(a, g)


def test_pinned_places_poles_and_antimeridian():
    spread = 400.0
    X, y, C = ds.geographic(20_000, n_clusters=8, spread_km=spread, noise_fraction=0.05,
                            seed=11, return_labels=True, return_centers=True)
    np.testing.assert_array_equal(np.degrees(C[:3]), [[90, 0], [-90, 0], [-17, -180]])
    cut = math.pi / 2 - spread / ds.EARTH_RADIUS_KM
    north, south, anti = X[y == 0], X[y == 1], X[y == 2]
    assert len(north) > 1000 and (north[:, 0] >= cut - 1e-12).all()
    assert len(south) > 1000 and (south[:, 0] <= -cut + 1e-12).all()
    # every longitude appears at a pole: the cluster surrounds it
    for pole in (north, south):
        assert np.histogram(pole[:, 1], bins=8, range=(-math.pi, math.pi))[0].min() > 50
    # one cluster across the antimeridian: longitudes near +pi and near -pi
    assert (anti[:, 1] > math.pi - 0.05).sum() > 500
    assert (anti[:, 1] < -math.pi + 0.05).sum() > 500
    assert not ((anti[:, 1] > -math.pi + 0.1) & (anti[:, 1] < math.pi - 0.1)).any()


@pytest.mark.parametrize("spread_km", [50.0, 300.0, 2000.0])
def test_cluster_points_lie_within_the_spread(spread_km):
    X, y, C = ds.geographic(6000, n_clusters=12, spread_km=spread_km, seed=5,
                            return_labels=True, return_centers=True)
    limit = spread_km / ds.EARTH_RADIUS_KM
    for k in range(12):
        d = _haversine_to(X[y == k], C[k])
        assert len(d) > 100
        assert d.max() <= limit * (1 + 1e-9), (k, d.max(), limit)
        # a Gaussian of scale spread/3 in the tangent plane, cut at spread
        assert 0.25 * limit < np.median(d) < 0.5 * limit


def test_noise_fraction_and_labels():
    X, y = ds.geographic(20_000, n_clusters=6, noise_fraction=0.2, seed=2, return_labels=True)
    assert y.dtype == np.int64 and set(np.unique(y)) == {-1, 0, 1, 2, 3, 4, 5}
    assert abs((y < 0).mean() - 0.2) < 0.02
    # noise is uniform on the sphere: sin(lat) uniform in [-1, 1]
    assert abs(np.sin(X[y < 0, 0]).mean()) < 0.05
    assert (ds.geographic(100, noise_fraction=1.0, seed=0, return_labels=True)[1] < 0).all()
    assert (ds.geographic(100, noise_fraction=0.0, seed=0, return_labels=True)[1] >= 0).all()


def test_generate_dispatches_geographic():
    X = ds.generate("geographic", 500, 2, seed=9, n_clusters=4, degrees=True)
    assert np.array_equal(X, ds.geographic(500, n_clusters=4, seed=9, degrees=True))
    assert "geographic" in ds.KINDS and ds.KIND_DIMS["geographic"] == 2
    with pytest.raises(ValueError, match="'geographic' has 2 dimensions, got d=3"):
        ds.generate("geographic", 10, 3)
    with pytest.raises(ValueError, match="takes no parameter"):
        ds.generate("geographic", 10, 2, std=1.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n": -1}, ValueError, "n .*>= 0"),
    ({"n": 10, "n_clusters": 0}, ValueError, "n_clusters must be >= 1"),
    ({"n": 10, "n_clusters": 2.5}, TypeError, "n_clusters must be an integer"),
    ({"n": 10, "spread_km": 0.0}, ValueError, "spread_km must be > 0"),
    ({"n": 10, "spread_km": 30_000.0}, ValueError, "half the circumference"),
    ({"n": 10, "noise_fraction": 1.5}, ValueError, r"noise_fraction must be in \[0, 1\]"),
    ({"n": 10, "seed": "a"}, TypeError, "seed"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ds.geographic(**kwargs)


def test_named_geographic_case():
    c = ds.NAMED_CASES["Geo2D1M-0.0015"]
    assert (c.kind, c.n, c.d, c.metric, c.eps) == ("geographic", 1_000_000, 2, "haversine", 0.0015)
    assert ds.NAMED_CASES["Unif2D2M-0.5"].metric == "euclidean"
    small = ds.NamedCase("g", "geographic", 2000, 2, c.seed, c.eps, metric="haversine")
    assert np.array_equal(small.data(), ds.geographic(2000, seed=c.seed))
