"""The CPU join's fast paths against the float64 brute-force oracle.

Dense cells take the tiled path (candidates merged in caller-id order,
sub-tiles with a bounding-box filter), sparse cells the pruned point-by-point
path, and ``pattern="lid_unicomp"`` a single pass over blocks of cells on a
thread pool; ``"auto"`` chooses between them per grid.  Each path is forced
here on data built to reach it, and must give exactly the brute-force pairs.
"""

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.index.grid import build_grid
from skyjoin.simjoin import plan
from skyjoin.simjoin.cpu import engine as cpu_engine, full_pattern
from skyjoin.simjoin.csr import indptr_from_counts

from oracles import brute_pairs, table_matrix


def _check_table(nt, want):
    assert np.array_equal(table_matrix(nt), want)
    for i in range(nt.shape[0]):
        assert np.all(np.diff(nt.row(i)) > 0)


def _dense(rng, n, d, scale=1.0):
    """Exponential-like data: a few cells hold hundreds of points (sub-tiles)."""
    X = rng.exponential(0.05, (n, d)) * scale
    X[: n // 10] = np.round(X[: n // 10] * 20) / 20 * scale  # ties on a lattice
    return X


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_dense_cells_subtiles(rng, d):
    n = 2500 if d < 6 else 1800
    X = _dense(rng, n, d)
    eps = {1: 0.004, 2: 0.02, 3: 0.05, 6: 0.12}[d]
    g = build_grid(X, eps)
    assert np.diff(g.cell_start).max() >= 2 * full_pattern.SUBTILE_POINTS  # the path is reached
    for include_self in (False, True):
        nt = sj.self_join(X, eps, device="cpu", pattern="full", include_self=include_self)
        _check_table(nt, brute_pairs(X, X, eps, self_join=True, include_self=include_self))
    unsorted = sj.self_join(X, eps, device="cpu", pattern="full", sort=False)
    assert np.array_equal(table_matrix(unsorted), brute_pairs(X, X, eps, self_join=True))
    counts = sj.self_join(X, eps, device="cpu", output="counts")
    assert np.array_equal(counts, brute_pairs(X, X, eps, self_join=True).sum(axis=1))


def test_dense_cells_r_join_s(rng):
    S = _dense(rng, 2000, 2)
    R = S[rng.permutation(2000)[:900]] + rng.normal(0, 0.004, (900, 2))
    nt = sj.join(R, S, 0.02, device="cpu")
    assert np.array_equal(table_matrix(nt), brute_pairs(R, S, 0.02))


def test_dense_cells_float32(rng):
    X = _dense(rng, 2000, 3).astype(np.float32)
    nt = sj.self_join(X, 0.05, device="cpu", precision="float32", pattern="full")
    _check_table(nt, brute_pairs(X, X, 0.05, self_join=True, dtype=np.float32))


@pytest.mark.parametrize("d", [2, 4, 6])
def test_lid_unicomp_single_pass_many_blocks(rng, d):
    # sparse data: many cells, so that the thread pool gets many blocks
    n = 6000
    X = rng.uniform(0, 10, (n, d))
    eps = {2: 0.08, 4: 0.9, 6: 2.0}[d]
    g = build_grid(X, eps)
    assert plan.auto_pattern(g) == "lid_unicomp"
    want = brute_pairs(X, X, eps, self_join=True)
    for include_self in (False, True):
        nt = sj.self_join(X, eps, device="cpu", include_self=include_self)
        w = want.copy()
        if include_self:
            np.fill_diagonal(w, True)
        _check_table(nt, w)
    assert sj.self_join(X, eps, device="cpu", pattern="full") == sj.self_join(X, eps, device="cpu")


def test_auto_pattern_choice(rng):
    dense = rng.uniform(0, 1, (5000, 2))
    sparse = rng.uniform(0, 100, (5000, 2))
    assert plan.auto_pattern(build_grid(dense, 0.05)) == "full"
    assert plan.auto_pattern(build_grid(sparse, 0.5)) == "lid_unicomp"


@pytest.mark.parametrize("dtype, offset", [(np.int32, 0), (np.int64, 2**40), (np.int64, 2**62)])
def test_merge_runs_sorts_any_runs(rng, dtype, offset):
    # 32-bit and 64-bit caller ids, up to 2^62
    for m in (0, 1, 2, 3, 7, 100, 225, 1000):
        for n_cuts in (0, 1, 2, 5, 8, 13):
            cid = (rng.permutation(10 * m + 1)[:m] + offset).astype(dtype)
            # a few ascending runs, as the cells of a candidate list
            cuts = np.sort(rng.integers(0, m + 1, n_cuts))
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, m]):
                cid[a:b] = np.sort(cid[a:b])
            cj = rng.permutation(m).astype(np.int64) * 3
            sid, sj_ = full_pattern._merge_runs(cid.copy(), cj.copy(), m)
            order = np.argsort(cid, kind="stable")
            assert np.array_equal(sid[:m], cid[order])
            assert np.array_equal(sj_[:m], cj[order])


def test_mixed_dense_and_sparse(rng):
    # one dense cluster (tiled, sub-tiles) among sparse points (point path)
    X = np.concatenate([rng.normal(3, 0.01, (1500, 3)), rng.uniform(0, 6, (1500, 3))])
    for pattern in ("auto", "full", "unicomp", "lid_unicomp"):
        nt = sj.self_join(X, 0.05, device="cpu", pattern=pattern)
        _check_table(nt, brute_pairs(X, X, 0.05, self_join=True))


@pytest.mark.parametrize("d", [2, 3])
def test_fill_from_caller_points(rng, d):
    # the fill reads the caller's array (the grid's reordered copy is dropped
    # after counting): sorted or not, with and without self pairs, on dense
    # (tiled, sub-tiles) and sparse cells (point path) alike, into the
    # caller-order rows of indptr and into per-point slots (the chunks' way)
    X = np.concatenate([_dense(rng, 1500, d), rng.uniform(0, 2, (1000, d))])
    X = X[rng.permutation(len(X))]
    eps = 0.03
    for include_self in (False, True):
        want = brute_pairs(X, X, eps, self_join=True, include_self=include_self)
        g = build_grid(X, eps)
        assert np.diff(g.cell_start).max() >= 2 * full_pattern.SUBTILE_POINTS
        assert np.diff(g.cell_start).min() < plan.TILE_MIN_POINTS
        eps2 = cpu_engine.eps_squared(eps, X.dtype)
        counts_r = cpu_engine.counts_reordered(g, g, eps2, 0, True, include_self)
        indptr, total = indptr_from_counts(g, counts_r)
        g.points = None
        row_pos = indptr[:-1][g.order]  # slot of reordered point i
        for sort in (True, False):
            for slots in (False, True):
                ind = np.full(total, -1, dtype=np.int32)
                if slots:
                    cpu_engine.fill_full(g, g, eps2, True, include_self, sort, row_pos, counts_r, ind,
                                  cell_list=np.arange(g.n_cells), caller_points=(X, X))
                else:
                    cpu_engine.fill_full(g, g, eps2, True, include_self, sort, None, None, ind,
                                  indptr=indptr, caller_points=(X, X))
                nt = sj.NeighborTable(indptr, ind, (len(X), len(X)), sorted=sort)
                assert np.array_equal(table_matrix(nt), want)
                if sort:
                    for i in range(len(X)):
                        assert np.all(np.diff(nt.row(i)) > 0)


def test_table_path_drops_the_reordered_copy(rng, monkeypatch):
    # the memory budget (1.5 x input + output) has no room for the copy
    X = rng.uniform(0, 1, (4000, 2))
    seen = []
    orig = cpu_engine.fill_full

    def spy(gq, gs, *a, **k):
        seen.append((gq.points, gs.points, k.get("caller_points")))
        return orig(gq, gs, *a, **k)

    monkeypatch.setattr(cpu_engine, "fill_full", spy)
    nt = sj.self_join(X, 0.05, device="cpu", pattern="full")
    assert seen and seen[0][0] is None and seen[0][1] is None
    assert seen[0][2][0] is X or np.shares_memory(seen[0][2][0], X)
    _check_table(nt, brute_pairs(X, X, 0.05, self_join=True))
