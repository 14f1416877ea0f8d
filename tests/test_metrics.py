"""The join's metrics (manhattan, chebyshev, haversine, cosine) against scikit-learn.

Oracles, float64 only:

* pairs: ``radius_neighbors_graph`` of ``sklearn.neighbors.NearestNeighbors``.
  Its default algorithm is a tree (kd-tree for Manhattan and Chebyshev, ball
  tree for haversine, brute force for cosine), which decides whole nodes by
  bounds of its own rounding: on pairs at exactly eps it may differ from its
  own per-pair test (an equator pair at 3 * 2**-5 does, for one).  Ties at
  eps are therefore checked against ``algorithm="brute"``, which applies the
  per-pair test ``rdist(x, y) <= _dist_to_rdist(eps)`` to every pair; random
  data (no pair within rounding of eps) against the default as well.
* labels: ``sklearn.cluster.DBSCAN(metric=...)`` likewise.
"""

import math
import warnings

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN
from sklearn.neighbors import NearestNeighbors

import skyjoin as sj
from skyjoin._core.plans import recording
from skyjoin.cluster.plan import fit_metric, fit_route, plan_fit, plan_sweep
from skyjoin.simjoin.metrics import check_metric, filter_points, filter_radius, \
    metric_threshold, refine_points

METRICS = ("manhattan", "chebyshev", "haversine", "cosine")


def _graph(X, eps, metric, algorithm="auto", Q=None, include_self=False):
    """scikit-learn's radius graph (distances), rows sorted."""
    nn = NearestNeighbors(radius=eps, metric=metric, algorithm=algorithm).fit(X)
    query = Q if Q is not None else (X if include_self else None)
    G = nn.radius_neighbors_graph(query, mode="distance").tocsr()
    G.sort_indices()
    return G


def _same_pairs(nt, G):
    return np.array_equal(nt.indptr, G.indptr) and np.array_equal(nt.indices, G.indices)


def _lat_lon(rng, n):
    return np.c_[rng.uniform(-np.pi / 2, np.pi / 2, n), rng.uniform(-np.pi, np.pi, n)]


def _random(metric, rng, n=1500):
    if metric == "haversine":
        return _lat_lon(rng, n), 0.08
    if metric == "cosine":
        return rng.normal(size=(n, 6)), 0.15
    return rng.uniform(0, 1, (n, 3)), 0.09 if metric == "manhattan" else 0.05


def geo_clusters(rng, sizes=(200, 200, 250, 150, 150), pole_lons=(-3.0, -1.0, 0.0, 2.5),
                 corners=False):
    """Clusters of ``sizes`` points at both poles, across the antimeridian
    and on the equator, plus points exactly at the poles at ``pole_lons``;
    with ``corners``, one point at each corner of the domain (|lat| = pi/2,
    |lon| = 2 pi, accepted).  The one geographic fixture of the metric
    tests."""
    parts = []
    for (lat0, lon0), n in zip([(np.pi / 2, 0.0), (-np.pi / 2, 2.0), (0.3, np.pi),
                                (-0.2, -np.pi + 0.01), (0.0, 1.0)], sizes):
        lat = np.clip(rng.normal(lat0, 0.02, n), -np.pi / 2, np.pi / 2)
        lon = (rng.normal(lon0, 0.03, n) + np.pi) % (2 * np.pi) - np.pi   # wrapped
        parts.append(np.c_[lat, lon])
    parts.append(np.array([[s * np.pi / 2, lon] for s in (1, -1) for lon in pole_lons]))
    if corners:
        parts.append(np.array([[s * np.pi / 2, t * 2 * np.pi] for s in (1, -1) for t in (1, -1)]))
    return np.concatenate(parts)


# --- names --------------------------------------------------------------------

def test_metric_names_and_aliases():
    assert check_metric("cityblock") == "manhattan" and check_metric("l1") == "manhattan"
    assert check_metric("infinity") == "chebyshev" and check_metric("l2") == "euclidean"
    with pytest.raises(ValueError, match="unknown metric 'braycurtis'.*haversine"):
        check_metric("braycurtis")
    with pytest.raises(ValueError, match="unknown metric"):
        sj.self_join(np.zeros((3, 2)), 1.0, metric="seuclidean", device="cpu")


# --- pairs ----------------------------------------------------------------------

@pytest.mark.parametrize("metric", METRICS)
def test_pairs_equal_radius_neighbors_graph_random(metric, rng):
    X, eps = _random(metric, rng)
    nt = sj.self_join(X, eps, metric=metric, device="cpu", return_distance=True)
    for algorithm in ("auto", "brute"):
        G = _graph(X, eps, metric, algorithm)
        assert _same_pairs(nt, G), algorithm
    if metric == "cosine":      # scikit-learn's dot products come from BLAS, in its order
        np.testing.assert_allclose(nt.distances, G.data, rtol=0, atol=1e-14)
    else:                       # the same operations in the same order: equal bits
        assert np.array_equal(nt.distances, G.data)
    counts = sj.self_join(X, eps, metric=metric, device="cpu", output="counts")
    assert np.array_equal(counts, np.diff(G.indptr))
    inc = sj.self_join(X, eps, metric=metric, device="cpu", include_self=True)
    assert _same_pairs(inc, _graph(X, eps, metric, "brute", include_self=True))


@pytest.mark.parametrize("metric", METRICS)
def test_join_r_s_equals_sklearn(metric, rng):
    R, eps = _random(metric, rng, 400)
    S, _ = _random(metric, rng, 600)
    nt = sj.join(R, S, eps, metric=metric, device="cpu")
    assert _same_pairs(nt, _graph(S, eps, metric, "brute", Q=R))
    assert _same_pairs(nt, _graph(S, eps, metric, Q=R))
    counts = sj.join(R, S, eps, metric=metric, device="cpu", output="counts")
    assert np.array_equal(counts, nt.counts())


@pytest.mark.parametrize("metric", ["manhattan", "chebyshev"])
@pytest.mark.parametrize("eps", [1.0, 2.0, 3.0])
def test_ties_on_integer_grid(metric, eps):
    """Integer points: every distance is exact, many pairs lie at exactly eps."""
    X = np.array([[i, j, k] for i in range(7) for j in range(6) for k in range(4)], float)
    nt = sj.self_join(X, eps, metric=metric, device="cpu")
    G = _graph(X, eps, metric, "brute")
    assert _same_pairs(nt, G)
    assert _same_pairs(nt, _graph(X, eps, metric, "kd_tree"))   # exact bounds too
    assert (G.data == eps).sum() > 100                          # ties are there


def _meridian_ties():
    """Points on meridians (the antimeridian among them) at latitude steps
    2**-5: their haversine reduced distance is sin(0.5 * dlat)**2 exactly as
    scikit-learn's threshold at eps = dlat is, bit for bit."""
    step = 2.0 ** -5
    lats = np.arange(-50, 51) * step
    lats = lats[np.abs(lats) <= np.pi / 2]
    return np.array([[a, b] for a in lats for b in (0.1, -np.pi, np.pi)]), step


@pytest.mark.parametrize("k", [1, 2, 5])
def test_haversine_ties_meridian_and_equator(k):
    X, step = _meridian_ties()
    eps = k * step
    nt = sj.self_join(X, eps, metric="haversine", device="cpu")
    G = _graph(X, eps, "haversine", "brute")
    assert _same_pairs(nt, G)
    # the (lat, pi) and (lat, -pi) points are one place: pairs across the antimeridian
    i = int(np.flatnonzero((X[:, 1] == np.pi) & (X[:, 0] == 0.0))[0])
    j = int(np.flatnonzero((X[:, 1] == -np.pi) & (X[:, 0] == 0.0))[0])
    assert j in nt.row(i)
    E = np.c_[np.zeros(181), np.arange(-90, 91) * step]        # the equator
    nt = sj.self_join(E, eps, metric="haversine", device="cpu")
    G = _graph(E, eps, "haversine", "brute")
    assert _same_pairs(nt, G) and nt.n_pairs == 2 * 181 * k - k * (k + 1)


def test_haversine_poles_and_antimeridian(rng):
    X = geo_clusters(rng)
    for eps in (0.01, 0.05):
        nt = sj.self_join(X, eps, metric="haversine", device="cpu")
        assert _same_pairs(nt, _graph(X, eps, "haversine", "brute"))
        assert _same_pairs(nt, _graph(X, eps, "haversine"))
    # the points exactly at a pole are all one place, whatever their longitudes
    nt = sj.self_join(X[-8:], 1e-9, metric="haversine", device="cpu")
    assert nt.n_pairs == 2 * 4 * 3


def test_cosine_exact_ties():
    """Rows whose normalised coordinates are dyadic: every dot product is
    exact in any order, so pairs at exactly eps agree with BLAS too."""
    base = [[1, 0, 0, 0], [0, 2, 0, 0], [1, 1, 1, 1], [-1, 1, 1, 1], [4, 4, -4, 4],
            [0, 0, 0, 3], [1, -1, -1, 1], [-2, 0, 0, 0]]
    X = np.array(base * 3, float)
    for eps in (0.5, 1.0, 1.5):
        nt = sj.self_join(X, eps, metric="cosine", device="cpu", return_distance=True)
        G = _graph(X, eps, "cosine", "brute")
        assert _same_pairs(nt, G)
        assert np.array_equal(nt.distances, G.data)
        assert (G.data == eps).any()


@pytest.mark.parametrize("metric", METRICS)
def test_chunks_count_refined_pairs(metric, rng):
    X, eps = _random(metric, rng, 600)
    full = sj.self_join(X, eps, metric=metric, device="cpu")
    stream = sj.self_join_chunks(X, eps, metric=metric, device="cpu", max_pairs=200)
    assert stream.count() == full.n_pairs
    chunks = list(stream)
    assert all(len(c) <= 200 for c in chunks if c.row_stop - c.row_start > 1)
    pairs = np.concatenate([np.c_[c.i, c.j] for c in chunks])
    assert np.array_equal(pairs, full.pairs())


# --- the filter's margin ----------------------------------------------------------

def _near_boundary_pairs(metric, rng, n=3000):
    """n pairs (P[k], Q[k]) whose distance lies within a few ulps of eps."""
    if metric == "haversine":
        eps = 0.3
        P = np.c_[rng.uniform(-1.2, 1.2, n), rng.uniform(-3, 3, n)]
        theta = rng.uniform(0, 2 * np.pi, n)
        # destination at angular distance eps along bearing theta (spherical trigonometry)
        lat = np.arcsin(np.sin(P[:, 0]) * np.cos(eps)
                        + np.cos(P[:, 0]) * np.sin(eps) * np.cos(theta))
        lon = P[:, 1] + np.arctan2(np.sin(theta) * np.sin(eps) * np.cos(P[:, 0]),
                                   np.cos(eps) - np.sin(P[:, 0]) * np.sin(lat))
        return P, np.c_[lat, lon], eps
    d = 6 if metric == "cosine" else 3
    P = rng.uniform(0.5, 1.5, (n, d))
    W = rng.normal(size=(n, d))
    if metric == "cosine":
        eps = 0.2
        U = P / np.linalg.norm(P, axis=1)[:, None]
        W -= np.einsum("ij,ij->i", W, U)[:, None] * U        # orthogonal to P
        W /= np.linalg.norm(W, axis=1)[:, None]
        a = math.acos(1 - eps)
        return P, U * math.cos(a) + W * math.sin(a), eps
    eps = 0.25
    if metric == "manhattan":
        W /= np.abs(W).sum(axis=1)[:, None]
    else:
        W = np.sign(W)                                       # diagonal: |W|_2 = sqrt(d)
    return P, P + eps * W, eps


def _bare_radius(metric, eps, d):
    return {"manhattan": eps, "chebyshev": eps * math.sqrt(d),
            "haversine": 2 * math.sqrt(metric_threshold(eps, "haversine")),
            "cosine": math.sqrt(2 * eps)}[metric]


@pytest.mark.parametrize("metric", METRICS)
def test_filter_margin_keeps_every_pair_just_inside_eps(metric, rng):
    """The filter's Euclidean join at ``filter_radius`` keeps every pair that
    scikit-learn accepts; at the bare radius (no margin) it loses some of
    these pairs, so this test fails if the margin is removed.  Manhattan is
    the exception: L2 < L1 leaves more room than rounding takes whenever two
    coordinates differ, and one differing coordinate rounds monotonically,
    so no pair is lost even at the bare radius (the margin is for the
    proof)."""
    P, Q, eps = _near_boundary_pairs(metric, rng)
    n, d = P.shape
    X = np.concatenate([P, Q])
    G = _graph(X, eps, metric, "brute")
    accepted = np.array([n + k in G.indices[G.indptr[k]:G.indptr[k + 1]] for k in range(n)])
    assert accepted.sum() > n // 20 and (~accepted).sum() > n // 20  # both sides of eps
    F = filter_points(refine_points(X, metric), metric) if metric == "cosine" \
        else filter_points(X, metric)

    def kept(radius):
        nt = sj.join(F[:n], F[n:], radius, device="cpu", algorithm="grid")
        return np.array([k in nt.row(k) for k in range(n)])

    assert np.all(kept(filter_radius(eps, metric, d))[accepted])
    if metric != "manhattan":
        assert not np.all(kept(_bare_radius(metric, eps, d))[accepted])


def _spread_pairs(rng, eps, n):
    """n pairs (X[k], X[n + k]) at great-circle distances within 1e-13 of eps
    relatively (past the sure radius's band), a fifth within 4e-16 (ties)."""
    P = np.c_[rng.uniform(-1.2, 1.2, n), rng.uniform(-3, 3, n)]
    theta = rng.uniform(0, 2 * np.pi, n)
    ang = eps * (1 + rng.uniform(-1e-13, 1e-13, n) * rng.choice([1.0, 0.004], n, p=[.8, .2]))
    lat = np.arcsin(np.sin(P[:, 0]) * np.cos(ang) + np.cos(P[:, 0]) * np.sin(ang) * np.cos(theta))
    lon = P[:, 1] + np.arctan2(np.sin(theta) * np.sin(ang) * np.cos(P[:, 0]),
                               np.cos(ang) - np.sin(P[:, 0]) * np.sin(lat))
    return np.concatenate([P, np.c_[lat, lon]])


def test_refine_keeps_pairs_within_the_sure_chord_untested(rng):
    """The refine's shortcut (pairs within the sure chord kept without the
    haversine test) changes no decision: pairs within 1e-13 of eps give the
    same rows with and without it, and scikit-learn's."""
    from skyjoin.simjoin.cpu import refine
    from skyjoin.simjoin.metrics import METRIC_CODE, sure_radius

    eps, n = 0.3, 4000
    X = _spread_pairs(rng, eps, n)
    F = filter_points(X, "haversine")
    t = metric_threshold(eps, "haversine")
    kept = []
    for sure in (None, (F, F, sure_radius(eps, "haversine"))):
        nt = sj.self_join(F, filter_radius(eps, "haversine", 3), device="cpu")
        kept.append(refine.refine_counts(METRIC_CODE["haversine"], X, X,
                                         np.ascontiguousarray(nt.indptr, dtype=np.int64),
                                         nt.indices, t, self_join=True, sure=sure))
    G = _graph(X, eps, "haversine", "brute")
    np.testing.assert_array_equal(kept[0], kept[1])
    np.testing.assert_array_equal(kept[1], np.diff(G.indptr))


def test_sure_radius_accepts_only_pairs_scikit_learn_accepts(rng):
    """Haversine's sure radius (``metrics.sure_radius``): every pair that the
    join's own test puts within it is one that scikit-learn accepts (and
    every pair it accepts lies within the upper radius), on
    pairs within 1e-13 of eps relatively (the band below eps is narrower);
    the bare chord (no margin) takes in some that scikit-learn refuses, so
    this test fails if the margin is removed."""
    from skyjoin.simjoin.metrics import decision_radii, sure_radius

    eps, n = 0.3, 6000
    X = _spread_pairs(rng, eps, n)
    G = _graph(X, eps, "haversine", "brute")
    accepted = np.array([n + k in G.indices[G.indptr[k]:G.indptr[k + 1]] for k in range(n)])
    F = filter_points(X, "haversine")

    def within(radius):
        nt = sj.join(F[:n], F[n:], radius, device="cpu", algorithm="grid")
        return np.array([k in nt.row(k) for k in range(n)])

    sure = within(sure_radius(eps, "haversine"))
    assert sure.sum() > n // 5 and (~accepted).sum() > n // 5
    assert np.all(accepted[sure])
    assert not np.all(accepted[within(_bare_radius("haversine", eps, 3))])
    # the upper radius the other way: every accepted pair lies within it
    assert np.all(within(decision_radii(eps, "haversine")[1])[accepted])


# --- checks -------------------------------------------------------------------------

def test_bad_metric_input_is_refused():
    with pytest.raises(ValueError, match="2 columns"):
        sj.self_join(np.zeros((4, 3)), 0.1, metric="haversine", device="cpu")
    with pytest.raises(ValueError, match="degrees"):
        sj.self_join(np.array([[45.0, 10.0], [0.0, 0.0]]), 0.1, metric="haversine",
                     device="cpu")
    with pytest.raises(ValueError, match="non-zero norm"):
        sj.self_join(np.array([[1.0, 0.0], [0.0, 0.0]]), 0.1, metric="cosine", device="cpu")
    with pytest.raises(ValueError, match="float64"):
        sj.self_join(np.ones((4, 2)), 0.1, metric="manhattan", precision="float32",
                     device="cpu")
    with pytest.raises(ValueError, match="float64"):
        sj.DBSCAN(eps=0.1, metric="manhattan", precision="float32", device="cpu").fit(
            np.ones((4, 2)))


@pytest.mark.parametrize("metric", METRICS)
def test_empty_and_single_point(metric):
    d = 2 if metric == "haversine" else 3
    assert sj.self_join(np.zeros((0, d)), 0.1, metric=metric, device="cpu").n_pairs == 0
    one = np.full((1, d), 0.5)
    assert sj.self_join(one, 0.1, metric=metric, device="cpu", include_self=True).n_pairs == 1
    assert sj.DBSCAN(eps=0.1, min_samples=1, metric=metric, device="cpu").fit(
        one).labels_.tolist() == [0]
    assert sj.join(one, np.zeros((0, d)), 0.1, metric=metric, device="cpu").n_pairs == 0


def test_manhattan_chebyshev_scaled_points(rng):
    """Points the join scales by a power of two (eps far below 2**-400): the
    refine reads the unscaled points; the pairs are scikit-learn's."""
    X = rng.uniform(0, 1, (800, 2)) * 1e-130
    for metric in ("manhattan", "chebyshev"):
        nt = sj.self_join(X, 0.05e-130, metric=metric, device="cpu")
        assert nt.n_pairs > 0 and _same_pairs(nt, _graph(X, 0.05e-130, metric, "brute"))


def test_float32_input_is_decided_in_float64(rng):
    X = rng.uniform(0, 1, (500, 3)).astype(np.float32)
    nt = sj.self_join(X, 0.1, metric="manhattan", device="cpu")
    assert _same_pairs(nt, _graph(X.astype(np.float64), 0.1, "manhattan", "brute"))


def test_plan_records_metric():
    with recording() as plans:
        sj.self_join(np.zeros((3, 2)), 0.1, metric="haversine", device="cpu")
    assert plans and all(p.metric == "haversine" for p in plans)
    assert "haversine: Euclidean filter, exact refine" in plans[-1].describe()


# --- DBSCAN ---------------------------------------------------------------------------

@pytest.mark.parametrize("metric", METRICS)
def test_dbscan_labels_equal_sklearn(metric, rng):
    X, eps = _random(metric, rng, 1200)
    for ms in (2, 6):
        est = sj.DBSCAN(eps=eps, min_samples=ms, metric=metric, device="cpu").fit(X)
        for algorithm in ("auto", "brute"):
            sk = SkDBSCAN(eps=eps, min_samples=ms, metric=metric, algorithm=algorithm).fit(X)
            assert np.array_equal(est.labels_, sk.labels_)
            assert np.array_equal(est.core_sample_indices_, sk.core_sample_indices_)
        # haversine: the sparse grid of the unit vectors (no pair near eps here)
        assert est.path_ == ("sparse-grid-cpu" if metric == "haversine" else "hybrid-cpu")


def test_dbscan_haversine_poles_antimeridian_and_ties(rng):
    X = geo_clusters(rng)
    for eps, ms in ((0.02, 5), (0.05, 10)):
        est = sj.DBSCAN(eps=eps, min_samples=ms, metric="haversine", device="cpu").fit(X)
        sk = SkDBSCAN(eps=eps, min_samples=ms, metric="haversine").fit(X)
        assert np.array_equal(est.labels_, sk.labels_) and est.labels_.max() >= 3
    T, step = _meridian_ties()
    for k, ms in ((1, 3), (2, 5)):
        est = sj.DBSCAN(eps=k * step, min_samples=ms, metric="haversine", device="cpu").fit(T)
        sk = SkDBSCAN(eps=k * step, min_samples=ms, metric="haversine", algorithm="brute").fit(T)
        assert np.array_equal(est.labels_, sk.labels_)


@pytest.mark.parametrize("metric", ["manhattan", "chebyshev"])
def test_dbscan_ties_integer_grid_and_weights(metric, rng):
    X = np.array([[i, j] for i in range(12) for j in range(9)], float)
    X = X[rng.permutation(len(X))[:80]]
    w = rng.uniform(0.2, 2.0, len(X))
    for eps, ms in ((1.0, 3), (2.0, 4)):
        for sw in (None, w):
            est = sj.DBSCAN(eps=eps, min_samples=ms, metric=metric, device="cpu").fit(
                X, sample_weight=sw)
            sk = SkDBSCAN(eps=eps, min_samples=ms, metric=metric, algorithm="brute").fit(
                X, sample_weight=sw)
            assert np.array_equal(est.labels_, sk.labels_)


def test_dbscan_minkowski_p1_and_functional(rng):
    X = rng.uniform(0, 1, (600, 2))
    est = sj.DBSCAN(eps=0.06, min_samples=4, metric="minkowski", p=1, device="cpu").fit(X)
    sk = SkDBSCAN(eps=0.06, min_samples=4, metric="manhattan").fit(X)
    assert est.path_ == "hybrid-cpu" and np.array_equal(est.labels_, sk.labels_)
    core, labels = sj.dbscan(X, eps=0.06, min_samples=4, metric="cityblock", device="cpu")
    assert np.array_equal(labels, sk.labels_) and np.array_equal(core, sk.core_sample_indices_)


def test_dbscan_unknown_metric_warns_and_goes_to_sklearn(rng):
    X = rng.uniform(0, 1, (60, 3))
    with pytest.warns(UserWarning, match="metric='braycurtis'.*scikit-learn"):
        est = sj.DBSCAN(eps=0.3, min_samples=3, metric="braycurtis").fit(X)
    assert est.path_ == "sklearn"
    assert np.array_equal(est.labels_,
                          SkDBSCAN(eps=0.3, min_samples=3, metric="braycurtis").fit(X).labels_)
    with pytest.warns(UserWarning, match="metric='dist'"):
        def dist(a, b):
            return float(np.abs(a - b).sum())
        sj.DBSCAN(eps=0.3, min_samples=3, metric=dist).fit(X)
    with warnings.catch_warnings():                 # known metrics with sklearn's parameters
        warnings.simplefilter("error")
        assert sj.DBSCAN(eps=0.3, metric="minkowski", p=3).fit(X).path_ == "sklearn"


def test_fit_route_and_plans_of_metrics():
    assert fit_route("manhattan", None, None, False) == "join"
    assert fit_route("haversine", None, None, False) == "join"
    assert fit_route("cosine", {"w": 1}, None, False) == "sklearn"
    assert fit_route("cosine", None, None, True) == "sklearn"
    assert fit_route("braycurtis", None, None, False) == "sklearn"
    assert fit_metric("minkowski", 1) == "manhattan"
    assert fit_metric("minkowski", math.inf) == "chebyshev"
    assert fit_metric("minkowski", 3) is None and fit_metric("infinity", None) == "chebyshev"
    p = plan_fit("join", "cpu", "float64", False, 3, metric="haversine")
    assert p.paths == ("sparse-grid-cpu", "hybrid-cpu") and "haversine" in p.describe()
    p = plan_fit("join", "gpu", "float64", False, 2, metric="manhattan")
    assert p.paths == ("hybrid-gpu",)                # no grid path, no device table
    s = plan_sweep("gpu", "float64", False, 2, 3, metric="cosine")
    assert s.paths == ("table",) and not s.table_on_device and "cosine" in s.describe()


@pytest.mark.parametrize("metric", METRICS)
def test_dbscan_sweep_equals_sklearn(metric, rng):
    X, eps = _random(metric, rng, 700)
    eps_list = [eps * 0.6, eps]
    for pipeline in (True, False):
        for r in sj.dbscan_sweep(X, eps_list, [2, 5], metric=metric, device="cpu",
                                 pipeline=pipeline):
            sk = SkDBSCAN(eps=r.eps, min_samples=r.min_samples, metric=metric).fit(X)
            assert np.array_equal(r.labels, sk.labels_)
            assert np.array_equal(r.core_sample_indices, sk.core_sample_indices_)
            assert r.timings["path"] == "table"


# --- GPU ----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("metric", METRICS)
def test_gpu_pairs_and_labels_equal_sklearn(metric, rng):
    X, eps = _random(metric, rng, 3000)
    G = _graph(X, eps, metric, "brute")
    assert _same_pairs(sj.self_join(X, eps, metric=metric, device="gpu"), G)
    counts = sj.self_join(X, eps, metric=metric, device="gpu", output="counts")
    assert np.array_equal(counts, np.diff(G.indptr))
    stream = sj.self_join_chunks(X, eps, metric=metric, device="gpu", max_pairs=5000)
    assert stream.count() == G.nnz
    assert sum(len(c) for c in stream) == G.nnz
    est = sj.DBSCAN(eps=eps, min_samples=5, metric=metric, device="gpu").fit(X)
    sk = SkDBSCAN(eps=eps, min_samples=5, metric=metric, algorithm="brute").fit(X)
    # haversine's grid decides where no pair lies between its sure radius and eps
    assert est.path_ in (("grid-gpu", "hybrid-gpu") if metric == "haversine"
                         else ("hybrid-gpu",))
    assert np.array_equal(est.labels_, sk.labels_)
    for r in sj.dbscan_sweep(X, [eps], [5], metric=metric, device="gpu"):
        assert np.array_equal(r.labels, sk.labels_)


@pytest.mark.gpu
def test_gpu_haversine_poles_antimeridian_ties(rng):
    X = np.concatenate([geo_clusters(rng), _meridian_ties()[0]])
    eps = 2 * 2.0 ** -5
    assert _same_pairs(sj.self_join(X, eps, metric="haversine", device="gpu"),
                       _graph(X, eps, "haversine", "brute"))


@pytest.mark.gpu
def test_gpu_haversine_dbscan_on_the_grid_of_unit_vectors():
    """Haversine DBSCAN on the GPU runs the grid of the unit vectors when no
    pair near eps matters, else the table path; scikit-learn's labels both
    ways (poles and the antimeridian in the data)."""
    from skyjoin.datasets import geographic

    X = geographic(20000, n_clusters=10, spread_km=300, seed=8)
    for eps, m in ((0.002, 10), (0.001, 2)):
        est = sj.DBSCAN(eps=eps, min_samples=m, metric="haversine", device="gpu").fit(X)
        sk = SkDBSCAN(eps=eps, min_samples=m, metric="haversine").fit(X)
        assert est.path_ == "grid-gpu"
        assert np.array_equal(est.labels_, sk.labels_)
        assert np.array_equal(est.core_sample_indices_, sk.core_sample_indices_)
    ring = np.stack([np.zeros(300), np.arange(300) * 2.0 ** -6 - 2.0], axis=1)
    est = sj.DBSCAN(eps=2.0 ** -6, min_samples=3, metric="haversine", device="gpu").fit(ring)
    sk = SkDBSCAN(eps=2.0 ** -6, min_samples=3, metric="haversine", algorithm="brute").fit(ring)
    assert est.path_ == "hybrid-gpu" and np.array_equal(est.labels_, sk.labels_)


@pytest.mark.gpu
def test_gpu_points_refused_for_metrics(cp):
    X = cp.asarray(np.random.default_rng(0).uniform(0, 1, (50, 2)))
    with pytest.raises(TypeError, match="host"):
        sj.self_join(X, 0.1, metric="manhattan")
    with pytest.raises(TypeError, match="host"):
        sj.DBSCAN(eps=0.1, metric="manhattan").fit(X)
    with pytest.raises(ValueError, match="on_device"):
        sj.self_join(cp.asnumpy(X), 0.1, metric="manhattan", device="gpu", on_device=True)
