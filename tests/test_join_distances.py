"""Distances of the join table, ``to_scipy(mode=...)`` and ``pairs(unique=True)``.

Oracles: scipy's ``cKDTree.sparse_distance_matrix`` (every pair within r,
the diagonal and duplicates as explicit zeros: our ``include_self=True``),
scikit-learn's ``radius_neighbors_graph(mode="distance")`` (no diagonal by
default, duplicates as explicit zeros: our ``include_self=False``), a
float64 brute force that evaluates the join's own test (terms added in
dimension order, then the square root), and ``cKDTree.query_pairs``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree
from sklearn.neighbors import NearestNeighbors, radius_neighbors_graph

import skyjoin as sj
from skyjoin.simjoin.distances import pair_distances


def points(rng, n, d, duplicates=True):
    X = rng.uniform(0, 1, (n, d))
    if duplicates:
        X[: n // 20] = X[n // 20: 2 * (n // 20)]          # exact duplicates: zero distances
    return X


def brute_distance_matrix(R, S, eps, dtype=np.float64):
    """sqrt(sum_k (r_k - s_k)^2), the sum in dimension order in ``dtype``, for the
    pairs passing the test s <= eps^2 (dense)."""
    Rw, Sw = R.astype(dtype), S.astype(dtype)
    s = np.zeros((len(R), len(S)), dtype=dtype)
    for k in range(R.shape[1]):
        t = Rw[:, None, k] - Sw[None, :, k]
        s = s + t * t
    e = dtype(eps)
    mask = s <= dtype(e * e)
    return mask, np.sqrt(s)


def _same_sparse(A, B):
    A, B = A.tocsr(), B.tocsr()
    A.sort_indices()
    B.sort_indices()
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("pattern", ["full", "unicomp", "lid_unicomp"])
def test_distance_matrix_equals_ckdtree(d, pattern):
    rng = np.random.default_rng(10 + d)
    X = points(rng, 1500, d)
    eps = {1: 0.01, 2: 0.05, 3: 0.12, 5: 0.3}[d]
    nt = sj.self_join(X, eps, include_self=True, return_distance=True, pattern=pattern,
                      device="cpu")
    assert nt.distances.dtype == np.float64
    tree = cKDTree(X)
    ref = tree.sparse_distance_matrix(tree, eps, output_type="coo_matrix")
    _same_sparse(nt.to_scipy(mode="distance"), ref)


@pytest.mark.parametrize("d", [2, 3])
def test_distance_matrix_equals_radius_neighbors_graph(d):
    rng = np.random.default_rng(20 + d)
    X = points(rng, 2000, d)
    eps = 0.06 if d == 2 else 0.12
    nt = sj.self_join(X, eps, return_distance=True, device="cpu")
    _same_sparse(nt.to_scipy(mode="distance"), radius_neighbors_graph(X, eps, mode="distance"))
    nt_self = sj.self_join(X, eps, include_self=True, return_distance=True, device="cpu")
    ref = radius_neighbors_graph(X, eps, mode="distance", include_self=True)
    _same_sparse(nt_self.to_scipy(mode="distance"), ref)
    # connectivity: ones on the same entries
    con = nt.to_scipy(mode="connectivity")
    _same_sparse(con, radius_neighbors_graph(X, eps, mode="connectivity", include_self=False))


def test_r_join_s_distances_equal_sklearn_and_brute_force():
    rng = np.random.default_rng(30)
    R, S = points(rng, 700, 3, duplicates=False), points(rng, 900, 3)
    R[:20] = S[:20]
    eps = 0.15
    nt = sj.join(R, S, eps, return_distance=True, device="cpu")
    ref = NearestNeighbors(radius=eps).fit(S).radius_neighbors_graph(R, mode="distance")
    _same_sparse(nt.to_scipy(mode="distance"), ref)
    mask, dist = brute_distance_matrix(R, S, eps)
    dense = np.zeros_like(dist)
    dense[mask] = dist[mask]
    np.testing.assert_array_equal(nt.to_scipy(mode="distance").toarray(), dense)
    assert int(mask.sum()) == nt.n_pairs


def test_distances_are_the_predicates_at_eps_ties_and_float32():
    """Pairs exactly at eps pass with distance eps; float32 distances are the
    float32 test's own (and never exceed eps)."""
    X = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0], [0.0, 5.0]])
    nt = sj.self_join(X, 5.0, return_distance=True, device="cpu")
    got = {tuple(p): dv for p, dv in zip(nt.pairs().tolist(), nt.distances)}
    assert got[(0, 1)] == 5.0 and got[(1, 2)] == 5.0 and got[(0, 3)] == 5.0
    rng = np.random.default_rng(31)
    Y = rng.uniform(0, 1, (1200, 3))
    nt32 = sj.self_join(Y, 0.1, precision="float32", return_distance=True, device="cpu")
    assert nt32.distances.dtype == np.float32
    mask, dist = brute_distance_matrix(Y, Y, 0.1, dtype=np.float32)
    np.fill_diagonal(mask, False)
    dense = np.zeros_like(dist)
    dense[mask] = dist[mask]
    np.testing.assert_array_equal(nt32.to_scipy(mode="distance", dtype=np.float32).toarray(),
                                  dense)
    assert nt32.distances.max() <= np.float32(0.1)


def test_distances_of_scaled_data_scaled_back():
    """Coordinates far beyond float64's squared range are scaled by a power of
    two at the boundary: the distances come back in the caller's units."""
    rng = np.random.default_rng(32)
    X = rng.uniform(0, 1, (400, 2)) * 2.0**600
    eps = 0.08 * 2.0**600
    nt = sj.self_join(X, eps, return_distance=True, device="cpu")
    small = sj.self_join(X / 2.0**600, 0.08, return_distance=True, device="cpu")
    assert nt == small
    np.testing.assert_array_equal(nt.distances, small.distances * 2.0**600)


def test_unsorted_rows_keep_their_distances():
    rng = np.random.default_rng(33)
    X = points(rng, 1500, 2)
    a = sj.self_join(X, 0.05, return_distance=True, sort=False, pattern="unicomp",
                     device="cpu")
    b = sj.self_join(X, 0.05, return_distance=True, device="cpu")
    a.sort_rows()
    assert a == b
    np.testing.assert_array_equal(a.distances, b.distances)


def test_pair_distances_match_table_order():
    """The NumPy path of ``pair_distances`` in blocks (rows split across blocks)."""
    from skyjoin.simjoin import distances as dmod

    rng = np.random.default_rng(34)
    X = points(rng, 800, 3)
    nt = sj.self_join(X, 0.2, device="cpu")
    old = dmod.BLOCK_PAIRS
    try:
        dmod.BLOCK_PAIRS = 97
        got = pair_distances(nt.indptr, nt.indices, X, None)
    finally:
        dmod.BLOCK_PAIRS = old
    p = nt.pairs()
    ref = np.sqrt(((X[p[:, 0]] - X[p[:, 1]]) ** 2).sum(axis=1))
    np.testing.assert_allclose(got, ref, rtol=1e-15, atol=0)
    assert np.array_equal(got, pair_distances(nt.indptr, nt.indices, X, None))


def test_distance_requests_validated():
    X = np.zeros((3, 2))
    nt = sj.self_join(X, 1.0, device="cpu")
    with pytest.raises(ValueError, match="return_distance"):
        nt.to_scipy(mode="distance")
    with pytest.raises(ValueError, match="mode"):
        nt.to_scipy(mode="weights")
    with pytest.raises(ValueError, match="output='table'"):
        sj.self_join(X, 1.0, output="counts", return_distance=True, device="cpu")
    with pytest.raises(TypeError):
        sj.self_join(X, 1.0, return_distance="yes", device="cpu")


@pytest.mark.parametrize("d", [1, 2, 4])
def test_pairs_unique_equals_query_pairs(d):
    rng = np.random.default_rng(40 + d)
    X = points(rng, 1500, d)
    eps = {1: 0.005, 2: 0.04, 4: 0.2}[d]
    expect = np.array(sorted(cKDTree(X).query_pairs(eps)), dtype=np.int64).reshape(-1, 2)
    for include_self in (False, True):
        nt = sj.self_join(X, eps, include_self=include_self, device="cpu")
        np.testing.assert_array_equal(nt.pairs(unique=True), expect)
    with pytest.raises(ValueError, match="square"):
        sj.join(X[:10], X, eps, device="cpu").pairs(unique=True)
