"""The CPU rule between the dense fine grid and the sparse epsilon grid
(``skyjoin.index.fine_grid.dense_grid_wins``) and the paths it sends a
clustering to.

Oracle: ``sklearn.cluster.DBSCAN(algorithm="brute")`` (every pair tested,
float64).
"""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj
from skyjoin.cluster.grid_cpu import grid_dbscan
from skyjoin.index.fine_grid import DENSE_MIN_POINTS_PER_CELL, build_fine_grid, dense_grid_wins


def _sk(X, eps, ms):
    sk = SkDBSCAN(eps=eps, min_samples=ms, algorithm="brute").fit(X)
    return sk.core_sample_indices_, sk.labels_


def _same(core, labels, want):
    np.testing.assert_array_equal(core, want[0])
    np.testing.assert_array_equal(labels, want[1])


def test_rule_reads_the_mean_points_per_non_empty_cell():
    t = DENSE_MIN_POINTS_PER_CELL
    assert t == 8.0
    for cells in (1, 10, 12345):
        assert dense_grid_wins(int(t * cells), cells)
        assert dense_grid_wins(int(t * cells) + 1, cells)
        assert not dense_grid_wins(int(t * cells) - 1, cells)
    assert not dense_grid_wins(1, 1) and not dense_grid_wins(2_000_000, 1_130_000)
    assert dense_grid_wins(1_000_000, 65_000)


@pytest.mark.parametrize("per_cell, kept", [(8, True), (7, False), (1, False), (30, True)])
def test_build_fine_grid_declines_by_the_rule(per_cell, kept):
    """Five far-apart cells of ``per_cell`` points each (small offsets inside
    a cell): only a caller with the sparse fallback is declined, and only
    below the threshold."""
    eps = 0.1
    base = np.repeat(np.arange(5.0)[:, None] * [1.0, 0.5], per_cell, axis=0)
    X = base + np.tile(np.linspace(0, 0.01, per_cell), 5)[:, None]
    g = build_fine_grid(X, eps)
    assert g is not None and g.cells.size == 5
    g2 = build_fine_grid(X, eps, sparse_fallback=True)
    assert (g2 is not None) == kept
    if kept:
        np.testing.assert_array_equal(g2.perm, g.perm)


def _uniform3(rng):
    return rng.uniform(0, 1, (3000, 3)), 0.08         # about 1 point a fine cell


def _blobs2(rng):
    X = np.concatenate([rng.normal(c, 0.1, (1000, 2)) for c in ((0, 0), (1, 1), (2, 0))]
                       + [rng.uniform(-0.5, 2.5, (100, 2))])
    return X, 0.1                                      # about 10 points a fine cell


def test_grid_dbscan_declines_only_with_the_fallback(rng):
    X, eps = _uniform3(rng)
    assert grid_dbscan(X, eps, 5, sparse_fallback=True) is None
    _same(*grid_dbscan(X, eps, 5), _sk(X, eps, 5))


@pytest.mark.parametrize("data, path", [(_uniform3, "sparse-grid-cpu"), (_blobs2, "grid-cpu")])
def test_fit_takes_the_grid_of_the_rule(rng, data, path):
    X, eps = data(rng)
    for ms in (3, 10):
        est = sj.DBSCAN(eps=eps, min_samples=ms, device="cpu").fit(X)
        assert est.path_ == path
        _same(est.core_sample_indices_, est.labels_, _sk(X, eps, ms))


def test_sweep_keeps_the_dense_grid(rng):
    """The sweep has no sparse path: the rule does not apply there."""
    X, eps = _uniform3(rng)
    (res,) = list(sj.dbscan_sweep(X, eps=[eps], min_samples=[5], device="cpu"))
    assert res.timings["path"] == "grid-cpu"
    np.testing.assert_array_equal(res.labels, _sk(X, eps, 5)[1])
