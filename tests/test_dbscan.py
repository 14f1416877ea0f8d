"""skyjoin.DBSCAN / skyjoin.dbscan against scikit-learn: equal labels and core samples.

The oracle is ``sklearn.cluster.DBSCAN`` with a tree algorithm (its distance
test is ``sum (x - y)^2 <= eps^2`` in float64, the same as the join's, so
ties at exactly eps agree; the brute algorithm uses a dot-product formula
that rounds differently).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import DBSCAN as SkDBSCAN
from sklearn.neighbors import radius_neighbors_graph

import skyjoin
from skyjoin import DBSCAN, dbscan
from skyjoin.cluster.core_points import core_points
from skyjoin.cluster.hybrid import hybrid_dbscan
from skyjoin.cluster.union_find import dbscan_inner_sequential, labels_from_table, point_assignment
from skyjoin.cluster.grid_cpu import MAX_DIMS, grid_dbscan
from skyjoin.index.fine_grid import build_fine_grid


def _oracle(X, eps, min_samples, sample_weight=None, algorithm="kd_tree"):
    sk = SkDBSCAN(eps=eps, min_samples=min_samples, algorithm=algorithm)
    sk.fit(X, sample_weight=sample_weight)
    return sk.core_sample_indices_, sk.labels_


def _assert_same(ours, X, eps, min_samples, sample_weight=None):
    core, labels = _oracle(X, eps, min_samples, sample_weight)
    np.testing.assert_array_equal(ours.core_sample_indices_, core)
    np.testing.assert_array_equal(ours.labels_, labels)
    assert ours.labels_.dtype == labels.dtype
    np.testing.assert_array_equal(ours.components_, np.asarray(X)[core])


def _case(rng, kind, n, d):
    if kind == "grid":  # small integers: many duplicates and exact ties at eps
        return rng.integers(0, 6, (n, d)).astype(np.float64)
    if kind == "blobs":
        C = rng.uniform(0, 10, (4, d))
        return C[rng.integers(0, 4, n)] + rng.normal(0, 0.6, (n, d))
    if kind == "halves":  # exactly representable coordinates, ties at eps = 0.5, 1, 1.5
        return rng.integers(0, 12, (n, d)) * 0.5
    return rng.uniform(0, 4, (n, d))


@pytest.mark.parametrize("d", range(1, 9))
@pytest.mark.parametrize("kind", ["grid", "blobs", "halves", "uniform"])
def test_equal_to_sklearn_random(d, kind):
    rng = np.random.default_rng(1000 * d + len(kind))
    for trial in range(6):
        n = int(rng.integers(1, 300))
        X = _case(rng, kind, n, d)
        eps = float(rng.choice([0.5, 1.0, 1.5, 2.0, 0.7]))
        min_samples = int(rng.integers(1, 12))
        est = DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(X)
        # d <= 4: the dense grid, or the sparse one where its cells hold few points
        assert est.path_ == ("hybrid-cpu" if d > MAX_DIMS else "grid-cpu"
                             if build_fine_grid(X, eps, sparse_fallback=True) is not None
                             else "sparse-grid-cpu")
        _assert_same(est, X, eps, min_samples)
        if d <= MAX_DIMS:                # the dense grid itself, wherever it fits
            core, labels = grid_dbscan(X, eps, min_samples)
            np.testing.assert_array_equal(core, est.core_sample_indices_)
            np.testing.assert_array_equal(labels, est.labels_)
        # the other path too: HYBRID-DBSCAN on the join for every d
        core, labels = hybrid_dbscan(X, eps, min_samples, device="cpu")
        np.testing.assert_array_equal(core, est.core_sample_indices_)
        np.testing.assert_array_equal(labels, est.labels_)


@pytest.mark.parametrize("weights", ["int", "signed", "dyadic"])
def test_equal_to_sklearn_sample_weight(weights):
    rng = np.random.default_rng(7)
    for trial in range(15):
        d = int(rng.integers(1, 5))
        n = int(rng.integers(1, 250))
        X = _case(rng, ["grid", "blobs", "halves"][trial % 3], n, d)
        if weights == "int":
            w = rng.integers(0, 5, n).astype(float)
        elif weights == "signed":
            w = rng.integers(-2, 6, n).astype(float)
        else:
            w = rng.integers(0, 16, n) / 8.0
        eps = float(rng.choice([0.5, 1.0, 1.5]))
        min_samples = int(rng.integers(1, 15))
        est = DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(X, sample_weight=w)
        _assert_same(est, X, eps, min_samples, w)


def test_larger_blobs_and_function_form():
    rng = np.random.default_rng(3)
    C = rng.uniform(0, 30, (12, 2))
    X = C[rng.integers(0, 12, 6000)] + rng.normal(0, 1.0, (6000, 2))
    core, labels = dbscan(X, eps=0.3, min_samples=8, device="cpu")
    core_sk, labels_sk = _oracle(X, 0.3, 8)
    np.testing.assert_array_equal(core, core_sk)
    np.testing.assert_array_equal(labels, labels_sk)
    assert labels.max() > 3  # a real multi-cluster case


def test_labels_order_and_border_rule_known_case():
    # 0 1 2 3 4 on a line, eps 1, min_samples 3: 1..3 are core, one chain.
    # A border point (5) between two clusters takes the lower label.
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0], [6.0], [5.0], [7.0]])
    # clusters: {0,1,2} (+ ...), {3,4,5}; point 7 (x=5) and 8 (x=7) bridge nothing
    core, labels = dbscan(X, eps=1.0, min_samples=2, device="cpu")
    sk_core, sk_labels = _oracle(X, 1.0, 2)
    np.testing.assert_array_equal(labels, sk_labels)
    # border point 1 with core neighbours in two clusters
    X = np.array([[2.0], [1.0], [0.0], [-0.5], [3.0], [3.5]])
    w = np.array([1, 1, 3, 1, 3, 1.0])
    est = DBSCAN(eps=1.0, min_samples=3, device="cpu").fit(X, sample_weight=w)
    _assert_same(est, X, 1.0, 3, w)


def test_float32_precision_matches_away_from_ties():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 5, (800, 3))
    a = DBSCAN(eps=0.4, min_samples=4, device="cpu", precision="float32").fit(X)
    _assert_same(a, X, 0.4, 4)


def test_single_point_and_all_noise():
    est = DBSCAN(eps=1.0, min_samples=1, device="cpu").fit([[3.0, 4.0]])
    assert est.labels_.tolist() == [0] and est.core_sample_indices_.tolist() == [0]
    est = DBSCAN(eps=0.1, min_samples=3, device="cpu").fit(np.arange(10.0).reshape(-1, 1))
    assert (est.labels_ == -1).all() and est.components_.shape == (0, 1)


# --- the assignment on its own -----------------------------------------------

def _table(X, eps):
    G = radius_neighbors_graph(X, eps, mode="connectivity", include_self=False)
    return G.indptr.astype(np.int64), G.indices.astype(np.int32)


def test_parallel_forests_merge_equal_sequential():
    rng = np.random.default_rng(11)
    for trial in range(40):
        d = int(rng.integers(1, 4))
        X = rng.integers(0, 9, (int(rng.integers(2, 700)), d)).astype(float)
        indptr, indices = _table(X, 1.0)
        min_samples = int(rng.integers(1, 6))
        is_core = core_points(indptr, indices, min_samples)
        expect = dbscan_inner_sequential(indptr, indices, is_core)
        np.testing.assert_array_equal(expect, _oracle(X, 1.0, min_samples)[1])
        for n_threads in (1, 2, 3, 8):
            got = point_assignment(indptr, indices, is_core, n_threads=n_threads,
                                   min_edges_per_slice=1)
            np.testing.assert_array_equal(got, expect)


def test_parallel_forest_extended_level_by_level_equals_fresh_runs():
    """The sweep's table path: the first (largest) min_samples by the parallel forests
    (``core_forest``, many slices), each smaller one added by ``add_core_level``; every
    level's labels equal a fresh sequential run and scikit-learn's."""
    from skyjoin.cluster.union_find import core_forest, labels_from_roots
    from skyjoin.cluster.union_find import roots as _roots
    from skyjoin.cluster.sweep import add_core_level

    rng = np.random.default_rng(12)
    for trial in range(15):
        d = int(rng.integers(1, 4))
        X = rng.integers(0, 9, (int(rng.integers(50, 700)), d)).astype(float)
        indptr, indices = _table(X, 1.0)
        weight = (np.diff(indptr) + 1).astype(np.float64)
        levels = sorted(set(rng.integers(1, 12, 4).tolist()), reverse=True)
        parent, previous = None, np.inf
        for m in levels:
            if parent is None:
                parent = core_forest(indptr, indices, (weight >= m).view(np.uint8),
                                     n_threads=int(rng.integers(2, 9)), min_edges_per_slice=1)
            else:
                add_core_level(indptr, indices, weight, float(m), previous, parent)
            previous = float(m)
            is_core = (parent >= 0).view(np.uint8)
            np.testing.assert_array_equal(is_core, core_points(indptr, indices, m))
            got = labels_from_roots(_roots(parent), is_core, indptr, indices)
            np.testing.assert_array_equal(got, dbscan_inner_sequential(indptr, indices, is_core))
            np.testing.assert_array_equal(got, _oracle(X, 1.0, m)[1])


def test_no_recursion_long_chain():
    # a chain of 200k core points: one component, expanded without recursion
    n = 200_000
    X = np.arange(n, dtype=np.float64).reshape(-1, 1)
    core, labels = dbscan(X, eps=1.0, min_samples=3, device="cpu")
    assert len(core) == n - 2 and (labels == 0).all()


# --- precomputed graphs and delegated metrics ----------------------------------

def test_precomputed_sparse_graph_used_directly():
    rng = np.random.default_rng(2)
    X = rng.integers(0, 8, (300, 2)).astype(float)
    G = radius_neighbors_graph(X, 1.5, mode="distance")
    for eps in (1.0, 1.5):
        est = DBSCAN(eps=eps, min_samples=4, metric="precomputed").fit(G)
        sk = SkDBSCAN(eps=eps, min_samples=4, metric="precomputed").fit(G)
        assert est.path_ == "graph"
        np.testing.assert_array_equal(est.labels_, sk.labels_)
        np.testing.assert_array_equal(est.core_sample_indices_, sk.core_sample_indices_)


def test_precomputed_asymmetric_graph_matches_sklearn():
    rng = np.random.default_rng(9)
    for trial in range(20):
        n = int(rng.integers(2, 80))
        A = sp.random(n, n, density=0.08, random_state=int(rng.integers(1 << 30)),
                      format="csr", data_rvs=lambda k: rng.uniform(0, 2, k))
        est = DBSCAN(eps=1.0, min_samples=2, metric="precomputed").fit(A)
        sk = SkDBSCAN(eps=1.0, min_samples=2, metric="precomputed").fit(A)
        np.testing.assert_array_equal(est.labels_, sk.labels_)
        np.testing.assert_array_equal(est.core_sample_indices_, sk.core_sample_indices_)


@pytest.mark.parametrize("kwargs", [dict(metric="manhattan"), dict(metric="minkowski", p=1),
                                    dict(metric="chebyshev"), dict(metric=lambda a, b: abs(a - b).sum())])
def test_other_metrics_paths(kwargs):
    """The join's other metrics take HYBRID-DBSCAN (filter and refine); a
    callable goes to scikit-learn.  Labels equal scikit-learn's either way."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 3, (200, 2))
    est = DBSCAN(eps=0.4, min_samples=4, **kwargs).fit(X)
    sk = SkDBSCAN(eps=0.4, min_samples=4, **kwargs).fit(X)
    if callable(kwargs["metric"]):
        assert est.path_ == "sklearn"
    else:
        assert est.path_ in ("hybrid-cpu", "hybrid-gpu")
    np.testing.assert_array_equal(est.labels_, sk.labels_)


def test_minkowski_p2_and_dense_precomputed():
    rng = np.random.default_rng(6)
    X = rng.integers(0, 3, (400, 3)).astype(float)  # many points a fine cell: the dense grid
    est = DBSCAN(eps=1.0, min_samples=3, metric="minkowski", p=2, device="cpu").fit(X)
    assert est.path_ == "grid-cpu"
    _assert_same(est, X, 1.0, 3)
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    est = DBSCAN(eps=1.0, min_samples=3, metric="precomputed").fit(D)
    assert est.path_ == "sklearn"
    np.testing.assert_array_equal(est.labels_, _oracle(X, 1.0, 3)[1])


# --- bad input -------------------------------------------------------------------

@pytest.mark.parametrize("params", [dict(eps=0.0), dict(eps=-1.0), dict(min_samples=0),
                                    dict(min_samples=1.5), dict(device="tpu"),
                                    dict(precision="float16"), dict(metric="nope")])
def test_bad_parameters(params):
    with pytest.raises(ValueError):
        DBSCAN(**params).fit(np.zeros((5, 2)))


@pytest.mark.parametrize("X", [np.array([[0.0, np.nan], [1.0, 1.0]]),
                               np.array([[0.0, np.inf], [1.0, 1.0]]),
                               np.zeros(5), np.zeros((2, 2, 2)), np.zeros((0, 2))])
def test_bad_points(X):
    with pytest.raises(ValueError):
        DBSCAN(device="cpu").fit(X)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("kw", [dict(), dict(metric="manhattan"), dict(metric="haversine"),
                                dict(algorithm="brute", metric="cosine")],
                         ids=["euclidean", "manhattan", "haversine", "cosine"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_are_refused_wherever_they_lie(device, kw, bad):
    """The test of finiteness is made once (at validation, or where the points
    are conditioned: ``plan.finite_when_conditioned``), on every route, for a
    bad value in any row and column, and before any result is set."""
    rng = np.random.default_rng(7)
    for trial in range(4):
        X = rng.uniform(-1, 1, (300, 2))
        X[rng.integers(300), rng.integers(2)] = bad
        for dtype in (np.float64, np.float32):
            est = DBSCAN(eps=0.2, min_samples=3, device=device, **kw)
            with pytest.raises(ValueError, match="NaN|inf"):
                est.fit(X.astype(dtype))
            assert not hasattr(est, "labels_")


def test_bad_sample_weight():
    with pytest.raises(ValueError):
        DBSCAN(device="cpu").fit(np.zeros((3, 2)), sample_weight=[1.0, 2.0])


def test_gpu_without_gpu_is_an_error():
    if skyjoin.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(skyjoin.GPUUnavailableError):
        DBSCAN(device="gpu").fit(np.zeros((3, 2)))


def test_reordered_table_numbers_clusters_by_caller_ids():
    rng = np.random.default_rng(12)
    for trial in range(30):
        X = rng.integers(0, 9, (int(rng.integers(2, 600)), 2)).astype(float)
        order = rng.permutation(len(X))
        indptr, indices = _table(X[order], 1.0)
        m = int(rng.integers(1, 6))
        w = rng.integers(0, 3, len(X)).astype(float) if trial % 2 else None
        core_sk, labels_sk = _oracle(X, 1.0, m, w)
        for n_threads in (1, 3):
            is_core, labels = labels_from_table(indptr, indices, m, w, order=order,
                                                n_threads=n_threads)
            np.testing.assert_array_equal(np.flatnonzero(is_core), core_sk)
            np.testing.assert_array_equal(labels, labels_sk)


def test_path_rule():
    rng = np.random.default_rng(8)
    X = rng.uniform(0, 1, (300, 2))          # about 12 points a fine cell: the dense grid
    assert DBSCAN(eps=0.3, device="cpu").fit(X).path_ == "grid-cpu"
    # about 1 point a fine cell: the dense grid fits, but the sparse grid runs
    S = rng.uniform(0, 5, (300, 2))
    est = DBSCAN(eps=0.3, min_samples=3, device="cpu").fit(S)
    assert est.path_ == "sparse-grid-cpu" and grid_dbscan(S, 0.3, 3) is not None
    _assert_same(est, S, 0.3, 3)
    assert DBSCAN(eps=0.3, device="cpu").fit(X, sample_weight=np.ones(300)).path_ == "hybrid-cpu"
    assert DBSCAN(eps=0.3, device="cpu", precision="float32").fit(X).path_ == "hybrid-cpu"
    assert DBSCAN(eps=0.3, device="cpu").fit(rng.uniform(0, 5, (300, 5))).path_ == "hybrid-cpu"
    # a far outlier makes the dense grid too large: the sparse grid, same labels
    Y = np.vstack([X, [[1e12, 0.0]]])
    est = DBSCAN(eps=0.3, min_samples=3, device="cpu").fit(Y)
    assert est.path_ == "sparse-grid-cpu"
    assert grid_dbscan(Y, 0.3, 3) is None
    _assert_same(est, Y, 0.3, 3)


def test_grid_dbscan_dense_cells_and_ties():
    rng = np.random.default_rng(13)
    for trial in range(40):
        d = int(rng.integers(1, MAX_DIMS + 1))
        n = int(rng.integers(1, 2000))
        # heavy duplicates: many dense cells; and points on cell boundaries
        X = rng.integers(0, 4, (n, d)) * (0.25 if trial % 2 else 1.0)
        eps = float(rng.choice([0.25, 0.5, 1.0]))
        m = int(rng.integers(1, 40))
        core, labels = grid_dbscan(X, eps, m)
        core_sk, labels_sk = _oracle(X, eps, m)
        np.testing.assert_array_equal(core, core_sk)
        np.testing.assert_array_equal(labels, labels_sk)


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_gpu_cell_order_sorts_by_cell(monkeypatch, d):
    """The GPU's spatial order (NumPy in CuPy's place; the GPU run is in the GPU
    tests): a permutation, the points with it, and cells in increasing key order
    (lexicographic over the dimensions the key holds)."""
    from _cuda_emulation import FakeCupy

    from skyjoin._core import device as _device
    from skyjoin.cluster.union_find import labels_from_table
    from skyjoin.cluster.hybrid import neighbor_table, spatial_order

    monkeypatch.setattr(_device, "cupy", lambda: FakeCupy())
    rng = np.random.default_rng(d)
    X = np.round(rng.normal(0, 2.0, (3000, d)), 1)
    eps = 0.3
    Xo, order = spatial_order(X, eps, device="gpu")
    assert sorted(order.tolist()) == list(range(len(X)))
    np.testing.assert_array_equal(Xo, X[order])
    cells = np.floor((Xo - X.min(axis=0)) / eps).astype(np.int64)
    assert len({tuple(c) for c in cells}) > 20
    rows = [tuple(c) for c in cells]
    assert rows == sorted(rows)
    core, labels = _oracle(X, eps, 4)
    nt = neighbor_table(Xo, eps, device="cpu")
    is_core, got = labels_from_table(nt.indptr, nt.indices, 4, order=order)  # caller's order
    np.testing.assert_array_equal(got, labels)
    np.testing.assert_array_equal(np.flatnonzero(is_core), core)
