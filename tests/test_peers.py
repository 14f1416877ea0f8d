"""The CPU peers of the join benchmark count the same ordered pairs as brute force."""

import os

import numpy as np
import pytest

from skyjoin.bench import peers


def brute_force_pairs(X, eps):
    """Ordered pairs i != j with sum_k (x_ik - x_jk)^2 <= eps^2, in float64."""
    X = np.asarray(X, dtype=np.float64)
    d2 = np.zeros((len(X), len(X)))
    for k in range(X.shape[1]):
        diff = X[:, None, k] - X[None, :, k]
        d2 += diff * diff
    return int(np.count_nonzero(d2 <= eps * eps)) - len(X)


def _data(seed, n, d, dup=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3.0
    if dup:
        X[n // 2: n // 2 + n // 10] = X[: n // 10]        # exact duplicates
        X[-3:] = X[0]                                     # a point with several copies
    return X


@pytest.mark.parametrize("name", list(peers.PEERS))
@pytest.mark.parametrize("d,eps", [(2, 0.4), (2, 1.5), (5, 2.0), (1, 0.05), (3, 1e-9)])
@pytest.mark.parametrize("seed", [0, 1])
def test_peer_equals_brute_force(name, d, eps, seed):
    X = _data(seed, 600, d)
    assert peers.PEERS[name](X, eps) == brute_force_pairs(X, eps)


def test_ties_at_exactly_eps():
    # integer grid: many pairs at distance exactly 1 and sqrt(2), all exact
    g = np.stack(np.meshgrid(np.arange(12.0), np.arange(12.0)), -1).reshape(-1, 2)
    for eps in (1.0, np.sqrt(2.0), 2.0):
        want = brute_force_pairs(g, eps)
        for name, fn in peers.PEERS.items():
            assert fn(g, eps) == want, name


def test_empty_single_and_all_equal():
    for fn in peers.PEERS.values():
        assert fn(np.empty((0, 3)), 1.0) == 0
        assert fn(np.zeros((1, 2)), 1.0) == 0
        assert fn(np.ones((7, 3)), 0.5) == 42


def test_bad_input():
    for fn in peers.PEERS.values():
        with pytest.raises(ValueError):
            fn(np.array([[0.0, np.nan]]), 1.0)
        with pytest.raises(ValueError):
            fn(np.zeros((3, 2)), 0.0)


def test_rtree_batches_and_timeout():
    X = _data(3, 500, 3)
    want = brute_force_pairs(X, 1.0)
    for batch in (1, 7, 10_000):
        assert peers.rtree_search_and_refine(X, 1.0, batch=batch) == want
    with pytest.raises(TimeoutError, match=r"0 of 500 query points"):
        peers.rtree_search_and_refine(X, 1.0, max_seconds=0.0)
    assert peers.rtree_search_and_refine(X, 1.0, max_seconds=3600) == want
    with pytest.raises(ValueError, match="max_seconds"):
        peers.rtree_search_and_refine(X, 1.0, max_seconds=-1)


def test_peer_impls_for_the_harness():
    from skyjoin.bench.harness import Case, run_suite

    X = _data(4, 400, 2)
    want = brute_force_pairs(X, 0.5)
    impls = peers.peer_impls(lambda: X, 0.5, skip=("sklearn radius_neighbors_graph(n_jobs=-1)",))
    rows = run_suite("join-test", [Case("small", {"eps": 0.5}, impls)], log=lambda s: None)
    sizes = {r.impl: r.size for r in rows}
    assert sizes.pop("sklearn radius_neighbors_graph(n_jobs=-1)") is None
    assert set(sizes.values()) == {want}


GDS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "gdsjoin-test-2d-100k.txt")


@pytest.mark.skipif(not os.path.exists(GDS), reason="shared data not present")
@pytest.mark.parametrize("name", ["scipy cKDTree.query_pairs",
                                  "scipy cKDTree.query_ball_point(workers=-1)",
                                  "R-tree search-and-refine (1 thread)"])
def test_gds_file_known_answer(name):
    """The shared GDS-Join file at eps 1.0: 27,882,048 ordered pairs excluding self (float64)."""
    from skyjoin import io

    X = io.read_points(GDS)
    assert peers.PEERS[name](X, 1.0) == 27_882_048


def test_peer_impls_memory_guard():
    X = _data(5, 100, 2)
    huge = 10**15                       # a petabyte of pairs: nobody has the memory
    impls = {i.name: i for i in peers.peer_impls(X, 0.5, pairs_hint=huge, shape=X.shape)}
    assert "GiB" in impls["sklearn radius_neighbors_graph(n_jobs=-1)"].skip_reason
    assert "GiB" in impls["scipy cKDTree.query_pairs"].skip_reason
    assert impls["scipy cKDTree.query_ball_point(workers=-1)"].skip_reason is None
    assert impls["R-tree search-and-refine (1 thread)"].skip_reason is None
    small = {i.name: i for i in peers.peer_impls(X, 0.5, pairs_hint=10, shape=X.shape)}
    assert all(i.skip_reason is None for i in small.values())
    with pytest.raises(ValueError, match="unknown peer"):
        peers.estimated_peak_bytes("nope", 1, 1, 1)
