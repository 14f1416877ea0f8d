"""The sparse epsilon grid's DBSCAN (``skyjoin.cluster.grid_sparse``) against scikit-learn.

Oracles, float64 only: ``sklearn.cluster.DBSCAN`` (a kd-tree for the
Euclidean metric, whose test is the join's ``sum (x - y)^2 <= eps^2``, so
ties at eps agree; brute force for haversine ties, which applies
scikit-learn's per-pair test to every pair).
"""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj
from skyjoin.cluster.grid_sparse import KEPT_MAX, sparse_grid_dbscan
from skyjoin.cluster.plan import plan_fit
from skyjoin.datasets import geographic
from skyjoin.index.grid import build_grid
from skyjoin.simjoin.metrics import decision_radii, filter_points

from test_metrics import geo_clusters


def _sk(X, eps, ms, metric="euclidean", algorithm="auto"):
    sk = SkDBSCAN(eps=eps, min_samples=ms, metric=metric, algorithm=algorithm).fit(X)
    return sk.core_sample_indices_, sk.labels_


def _same(ours, want):
    assert ours is not None
    np.testing.assert_array_equal(ours[0], want[0])
    np.testing.assert_array_equal(ours[1], want[1])


# --- Euclidean -----------------------------------------------------------------------

@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_euclidean_ties_equal_sklearn(rng, d):
    """Small integers and halves: duplicates and pairs at exactly eps; every
    min_samples regime (1, 2: every neighbour core; up to KEPT_MAX + 1 the
    border pass reads the kept neighbours, above it searches)."""
    X = rng.integers(0, 7, (700, d)).astype(np.float64) / 2
    for eps in (0.5, 1.0):
        for ms in (1, 2, 4, KEPT_MAX + 1, KEPT_MAX + 2, 40):
            _same(sparse_grid_dbscan(X, eps, ms), _sk(X, eps, ms, algorithm="kd_tree"))


def test_euclidean_blobs_and_noise_equal_sklearn(rng):
    X = np.concatenate([rng.normal(c, 0.3, (400, 3)) for c in (0.0, 2.0, 5.0)]
                       + [rng.uniform(-3, 8, (300, 3))])
    for eps, ms in ((0.2, 5), (0.35, 12), (0.35, 25)):
        _same(sparse_grid_dbscan(X, eps, ms), _sk(X, eps, ms, algorithm="kd_tree"))


def test_euclidean_wide_box_takes_the_sparse_grid(rng):
    """Clusters far apart: the dense fine grid refuses the box, the sparse
    grid clusters (the plan's second path), scikit-learn's labels."""
    X = np.concatenate([rng.normal(c, 0.05, (300, 2)) for c in (0.0, 1e6, -3e7)]
                       + [np.round(rng.uniform(0, 1, (200, 2)) * 20) / 20])
    plan = plan_fit("join", "cpu", "float64", False, 2)
    assert plan.paths == ("grid-cpu", "sparse-grid-cpu", "hybrid-cpu")
    est = sj.DBSCAN(eps=0.05, min_samples=4, device="cpu").fit(X)
    assert est.path_ == "sparse-grid-cpu"
    _same((est.core_sample_indices_, est.labels_), _sk(X, 0.05, 4, algorithm="kd_tree"))


def test_fewer_indexed_dimensions_than_coordinates(rng):
    """60k points spread over a wide 4-D box: the linear cell ids of four
    dimensions would pass 63 bits, so the grid indexes three and the
    distance test still sums all four."""
    X = np.concatenate([rng.uniform(0, 1e6, (60000, 4)), rng.normal(5e5, 0.5, (3000, 4))])
    assert build_grid(X, 1.0).k == 3
    _same(sparse_grid_dbscan(X, 1.0, 5), _sk(X, 1.0, 5, algorithm="kd_tree"))


def test_empty_and_single_point():
    core, labels = sparse_grid_dbscan(np.zeros((0, 2)), 1.0, 3)
    assert core.size == 0 and labels.size == 0
    core, labels = sparse_grid_dbscan(np.zeros((1, 3)), 1.0, 1)
    assert core.tolist() == [0] and labels.tolist() == [0]


# --- the band: pairs between the sure radius and eps ------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_band_pairs_that_do_not_matter_leave_both_answers_equal(seed):
    """With ``eps_sure`` below eps the pairs in between are undecided.  An
    answer (not None) must then be the labels of both readings, every band
    pair a neighbour (eps) and none (eps_sure), and where the two readings
    differ the answer must be None.  Points on a lattice of step 1/4 put
    many pairs at exactly the two radii."""
    rng = np.random.default_rng(seed)
    d = 2 + seed % 2
    X = rng.integers(0, 24, (500, d)).astype(np.float64) / 4
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    answered = 0
    for eps, sure, ms in ((0.5, 0.45, 3), (0.75, 0.7, 6), (0.5, 0.3, 4), (0.75, 0.55, 20),
                          (1.0, 0.9, 30)):
        ours = sparse_grid_dbscan(X, eps, ms, eps_sure=sure)
        wide = _sk(X, eps, ms, algorithm="kd_tree")
        narrow = _sk(X, sure, ms, algorithm="kd_tree")
        if ours is None:            # only where some pair lies in the band
            assert ((d2 > sure * sure) & (d2 <= eps * eps)).any()
        else:
            answered += 1
            _same(ours, wide)
            _same(ours, narrow)
        if not all(np.array_equal(a, b) for a, b in zip(wide, narrow)):
            assert ours is None


def _line(xs):
    return np.c_[np.asarray(xs, float), np.zeros(len(xs))]


def test_core_flag_and_link_band_pairs_hand_on():
    """One band pair decides a core flag, or a link: None; with the pair
    beyond eps, or its two sets joined by a sure pair, the answer stands."""
    eps, sure = 1.0, 0.9
    # core flag: the middle point has one sure neighbour and one at 0.95
    assert sparse_grid_dbscan(_line([0.0, 0.5, 1.45]), eps, 3, eps_sure=sure) is None
    X = _line([0.0, 0.5, 1.6])
    _same(sparse_grid_dbscan(X, eps, 3, eps_sure=sure), _sk(X, eps, 3))
    # link: two groups of core points whose every cross pair is in the band,
    # in one cell (from 0) and in two cells (from 0.5: the pair of one-set cells)
    for x0 in (0.0, 0.5):
        a, b = [x0, x0 + 0.01, x0 + 0.02], [x0 + 0.97, x0 + 0.98, x0 + 0.99]
        X = _line([0.0] * (x0 > 0) + a + b)
        X[0, 1] = 5.0 if x0 > 0 else X[0, 1]          # far away: fixes the grid's origin
        assert sparse_grid_dbscan(X, eps, 3, eps_sure=sure) is None
        X = np.concatenate([X, _line([x0 + 0.5])])    # a sure bridge: one cluster
        _same(sparse_grid_dbscan(X, eps, 3, eps_sure=sure), _sk(X, eps, 3))


@pytest.mark.parametrize("ms", [4, KEPT_MAX + 2])
def test_border_band_pair_with_a_lower_label_hands_on(ms):
    """A non-core point with a sure core neighbour of cluster 1 and a band
    core neighbour of cluster 0 (0.95 away): its label rests on the band
    pair, for both border passes (kept neighbours, search)."""
    eps, sure = 1.0, 0.9
    spread = np.linspace(-0.05, 0.05, ms - 1)
    c0 = np.concatenate([[[0.0, 0.0]], np.c_[np.full(ms - 1, -0.5), spread]])
    c1 = np.concatenate([[[1.8, 0.0]], np.c_[np.full(ms - 1, 2.3), spread]])
    X = np.concatenate([c0, c1, [[0.95, 0.0]]])
    want = _sk(X, eps, ms)
    assert want[1][-1] == 0 and _sk(X, sure, ms)[1][-1] == 1
    assert sparse_grid_dbscan(X, eps, ms, eps_sure=sure) is None
    X[0, 0] = -0.1                                    # 1.05 away: no band pair
    _same(sparse_grid_dbscan(X, eps, ms, eps_sure=sure), _sk(X, eps, ms))


# --- haversine ------------------------------------------------------------------------

def _geo_clusters(rng):
    return geo_clusters(rng, sizes=(250, 250, 300, 200, 200), pole_lons=(-3.0, 0.0, 2.5))


def test_haversine_plan_takes_the_sparse_grid_first():
    p = plan_fit("join", "cpu", "float64", False, 3, metric="haversine")
    assert p.paths == ("sparse-grid-cpu", "hybrid-cpu")
    assert plan_fit("join", "cpu", "float64", True, 3, metric="haversine").paths == ("hybrid-cpu",)


@pytest.mark.parametrize("eps, ms", [(0.01, 4), (0.02, 10), (0.05, 30)])
def test_haversine_poles_antimeridian_equal_sklearn(rng, eps, ms):
    X = _geo_clusters(rng)
    est = sj.DBSCAN(eps=eps, min_samples=ms, metric="haversine", device="cpu").fit(X)
    assert est.path_ == "sparse-grid-cpu"
    _same((est.core_sample_indices_, est.labels_), _sk(X, eps, ms, "haversine"))
    assert est.labels_.max() >= 3


def test_haversine_geographic_generator_equal_sklearn():
    X = geographic(6000, n_clusters=8, spread_km=300, seed=4)
    for eps, ms in ((0.003, 5), (0.0015, 2)):
        est = sj.DBSCAN(eps=eps, min_samples=ms, metric="haversine", device="cpu").fit(X)
        assert est.path_ == "sparse-grid-cpu"
        _same((est.core_sample_indices_, est.labels_), _sk(X, eps, ms, "haversine"))


def test_haversine_ties_hand_on_to_the_table_path():
    """Points on the equator at steps of eps exactly: every neighbour pair is
    a tie, inside the band between the sure chord and eps, so the grid
    answers None and the table path's refine decides: scikit-learn's labels."""
    eps = 2.0 ** -6
    ring = np.stack([np.zeros(300), np.arange(300) * eps - 2.0], axis=1)
    sure, upper = decision_radii(eps, "haversine")
    assert sparse_grid_dbscan(filter_points(ring, "haversine"), upper, 3, eps_sure=sure) is None
    est = sj.DBSCAN(eps=eps, min_samples=3, metric="haversine", device="cpu").fit(ring)
    assert est.path_ == "hybrid-cpu"
    _same((est.core_sample_indices_, est.labels_), _sk(ring, eps, 3, "haversine", "brute"))


def test_haversine_grid_is_the_joins_grid_of_the_unit_vectors(rng):
    """The sparse path builds the join's epsilon grid at the upper chord: the
    cells of the unit vectors, so a sphere's box costs only its points."""
    U = filter_points(_geo_clusters(rng), "haversine")
    g = build_grid(U, decision_radii(0.02, "haversine")[1])
    assert g.k == 3 and g.n_cells <= len(U)
