"""Equal points: grouped once, so copies cost O(k), not O(k**2) (issue 14, item 7).

Correctness against the brute-force oracle of test_skyline (float64,
written independently) and paretoset where installed; the cost through the
work counters of Definition 3 (dominance tests), which before grouping
grew with the square of the number of copies.
"""

from __future__ import annotations

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.pareto import groups
from test_skyline import oracle

ALGS = [("skyalign", None), ("skyalign", "levelwise"), ("skyalign", "sync"), ("skyalign", "noquart"),
        ("skyalign", "nosync"), ("bnl", None), ("sfs", None), ("ggs", None), ("bruteforce", None),
        ("sort2d", None)]
FAST = [a for a in ALGS if a[0] in ("skyalign", "sfs", "ggs", "sort2d")]   # group copies themselves


def dims(algorithm, ds):
    """The dimensions of ds that an algorithm takes (sort2d: 2 only)."""
    return [d for d in ds if algorithm != "sort2d" or d == 2]


def with_copies(rng, n=600, d=3, copies=(40, 25, 3), kind="float"):
    """Random points plus many copies of a few of them (skyline points and
    dominated ones), shuffled."""
    X = rng.random((n, d)) if kind == "float" else rng.integers(0, 6, (n, d)).astype(float)
    best = X[np.argsort(X.sum(axis=1))[:len(copies)]]          # skyline points (min sums)
    worst = X[np.argsort(X.sum(axis=1))[-2:]]                   # dominated points
    parts = [X] + [np.repeat(best[k:k + 1], c, axis=0) for k, c in enumerate(copies)] \
        + [np.repeat(worst, 30, axis=0)]
    Y = np.vstack(parts)
    return Y[rng.permutation(len(Y))]


@pytest.mark.parametrize("algorithm,variant", ALGS)
def test_copies_equal_oracle(algorithm, variant):
    rng = np.random.default_rng(31)
    for d in dims(algorithm, (1, 2, 3, 6, 9)):
        for kind in ("float", "grid"):
            X = with_copies(rng, d=d, kind=kind)
            for sense in (None, ["max"] * d):
                for distinct in (False, True):
                    got = sj.skyline(X, sense=sense, distinct=distinct, device="cpu",
                                     algorithm=algorithm, variant=variant)
                    want = oracle(X, sense=sense, distinct=distinct)
                    np.testing.assert_array_equal(
                        got, want, err_msg=f"{algorithm}/{variant} d={d} {kind} {sense} {distinct}")


@pytest.mark.parametrize("algorithm,variant", ALGS)
def test_identical_points(algorithm, variant):
    k = 20_000 if (algorithm, variant) in FAST else 1_500
    for d in dims(algorithm, (1, 2, 5)):
        X = np.full((k, d), 3.25)
        np.testing.assert_array_equal(
            sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant), np.arange(k))
        np.testing.assert_array_equal(
            sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant, distinct=True), [0])


@pytest.mark.parametrize("algorithm,variant", FAST)
def test_copies_cost_linear_work(algorithm, variant):
    """k identical points: one distinct candidate, no dominance test at all
    (before: every copy scanned every other, ~k**2 / 2 tests)."""
    k = 40_000
    X = np.ones((k, 2))
    idx, st = sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant, return_stats=True)
    np.testing.assert_array_equal(idx, np.arange(k))
    if st["dominance_tests"] is not None:
        assert st["dominance_tests"] <= 1
    if algorithm == "skyalign":
        assert st["prefilter_survivors"] == k and st["distinct_survivors"] == 1


def test_uniform_plus_copies_of_the_minimum():
    """The issue's case, scaled: uniform points plus copies of the point of
    smallest sum (a skyline point); the skyline is the uniform set's plus
    every copy, and the dominance work stays that of the distinct points."""
    rng = np.random.default_rng(5)
    U = rng.random((200_000, 2))
    m = U[np.argmin(U.sum(axis=1))]
    X = np.vstack([U, np.repeat(m[None], 16_000, axis=0)])
    base, st0 = sj.skyline(U, device="cpu", algorithm="skyalign", return_stats=True)
    want = np.concatenate([base, np.arange(200_000, X.shape[0])])
    want_d = base
    for algorithm, variant in FAST:
        got, st = sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant,
                             return_stats=True)
        np.testing.assert_array_equal(got, want, err_msg=f"{algorithm}/{variant}")
        np.testing.assert_array_equal(
            sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant, distinct=True),
            want_d, err_msg=f"{algorithm}/{variant} distinct")
        if algorithm == "skyalign":
            assert st["distinct_survivors"] <= st["prefilter_survivors"] - 16_000 + 1
            assert st["dominance_tests"] <= 2 * st0["dominance_tests"] + 100


def test_copies_do_not_skew_the_cells():
    """Half the survivors copies of one point: the quartiles come from
    distinct points, so the dominance work on the distinct points stays
    about that of the data without copies."""
    from skyjoin.datasets import skyline_data

    U = skyline_data(60_000, 6, "independent", seed=9)
    p = U[np.argmin(U.sum(axis=1))]
    X = np.vstack([U, np.repeat(p[None], 60_000, axis=0)])
    for variant in ("levelwise", "nosync", "sync"):
        base, st0 = sj.skyline(U, device="cpu", variant=variant, return_stats=True)
        got, st = sj.skyline(X, device="cpu", variant=variant, return_stats=True)
        np.testing.assert_array_equal(got, np.concatenate([base, np.arange(60_000, 120_000)]))
        # (the pivot candidates are per block of rows, so a block of copies
        # changes them a little)
        assert st["distinct_survivors"] <= 1.1 * st0["distinct_survivors"]
        assert st["dominance_tests"] <= 1.5 * st0["dominance_tests"], variant


def test_copies_agree_with_paretoset():
    ps = pytest.importorskip("paretoset")
    rng = np.random.default_rng(8)
    X = with_copies(rng, n=3000, d=3, copies=(500, 200, 50))
    for distinct in (False, True):
        np.testing.assert_array_equal(sj.skyline(X, device="cpu", distinct=distinct),
                                      np.flatnonzero(ps.paretoset(X, distinct=distinct)))


def test_signed_zero_copies_are_one_group():
    """-0.0 == +0.0: copies differing only in the sign of zero are equal
    points (one group, the lowest index kept by distinct)."""
    X = np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, -0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]] * 50)
    want = oracle(X)
    for algorithm, variant in ALGS:
        np.testing.assert_array_equal(
            sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant), want)
        np.testing.assert_array_equal(
            sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant, distinct=True),
            [0, 2], err_msg=f"{algorithm}/{variant}")


def test_dataframe_copies():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(12)
    X = with_copies(rng, n=400, d=2, kind="grid")
    df = pd.DataFrame({"price": X[:, 0], "rating": X[:, 1], "name": [f"r{i}" for i in range(len(X))]})
    for distinct in (False, True):
        out = sj.skyline(df, min="price", max="rating", distinct=distinct, device="cpu")
        want = oracle(X, sense=["min", "max"], distinct=distinct)
        assert list(out.index) == list(want)


# --------------------------------------------------------------------------
# the grouping functions themselves
# --------------------------------------------------------------------------
def _brute_groups(P):
    """(group of each row numbered by first occurrence, first positions)."""
    seen, group, first = {}, [], []
    for t, row in enumerate(map(tuple, (P + 0.0).tolist())):
        if row not in seen:
            seen[row] = len(first)
            first.append(t)
        group.append(seen[row])
    return np.array(group), np.array(first)


def test_group_candidates_and_group_rows():
    rng = np.random.default_rng(3)
    X = np.vstack([rng.integers(0, 3, (500, 3)).astype(float), rng.random((300, 3))])
    X[::7, 1] *= -1.0                                # signed zeros among the ties
    for idx in (np.arange(len(X)), np.sort(rng.choice(len(X), 400, replace=False))):
        bg, bf = _brute_groups(X[idx])
        got = groups.group_candidates(X, idx)
        assert got is not None
        np.testing.assert_array_equal(got[1], bf)
        np.testing.assert_array_equal(got[0], bg)       # numbered by first occurrence
        gr = groups.group_rows(X[idx])
        np.testing.assert_array_equal(gr[1], bf)
        # same partition (group_rows numbers groups in sorted order)
        assert (bg[:, None] == bg[None, :]).tolist() == (gr[0][:, None] == gr[0][None, :]).tolist()
    D = rng.random((1000, 4))
    assert groups.group_candidates(D, np.arange(1000)) is None
    assert groups.group_rows(D) is None


def test_hash_table_exact_under_colliding_hashes():
    """All hashes equal: the table still separates distinct rows (rows are
    compared whenever tags agree)."""
    rng = np.random.default_rng(4)
    X = rng.integers(0, 4, (700, 2)).astype(float)
    idx = np.arange(700)
    bg, bf = _brute_groups(X)
    g, f = groups._hash_groups(X, idx, np.zeros(700, dtype=np.uint64))
    np.testing.assert_array_equal(f, bf)
    np.testing.assert_array_equal(g, bg)


def test_group_rows_exact_when_hashes_collide(monkeypatch):
    """Equal hashes but distinct rows: the exact sort decides (None)."""
    monkeypatch.setattr(groups, "row_hashes", lambda P: np.zeros(P.shape[0], dtype=np.uint64))
    D = np.random.default_rng(6).random((300, 3))
    assert groups.group_rows(D) is None
    E = np.vstack([D, D[:10]])
    g, f = groups.group_rows(E)
    np.testing.assert_array_equal(f, np.arange(300))
    np.testing.assert_array_equal(g[300:], g[:10])


def test_expand_groups_and_runs():
    cand = np.array([2, 5, 6, 9, 11, 14])
    group = np.array([0, 1, 0, 2, 1, 2])               # first positions 0, 1, 3
    sky = np.array([2, 9])                              # groups 0 and 2 survive
    np.testing.assert_array_equal(groups.expand_groups(sky, cand, group, False), [2, 6, 9, 14])
    np.testing.assert_array_equal(groups.expand_groups(sky, cand, group, True), [2, 9])
    Xs = np.array([[0.0, 1], [0, 1], [1, 0], [2, 2], [2, 2], [2, 2]])
    new = groups.run_starts(Xs)
    np.testing.assert_array_equal(new, [True, False, True, True, False, False])
    np.testing.assert_array_equal(groups.expand_runs(np.array([0, 2]), new, False), [0, 1, 3, 4, 5])
    np.testing.assert_array_equal(groups.expand_runs(np.array([0, 2]), new, True), [0, 3])


def test_row_hashes_numpy_equal_numba():
    """The NumPy (and CuPy) row hash is the Numba one, -0.0 read as +0.0."""
    rng = np.random.default_rng(10)
    P = np.vstack([rng.random((200, 5)), rng.integers(-2, 3, (200, 5)).astype(float)])
    P[::3, 2] = -0.0
    h = groups.row_hashes(P)
    np.testing.assert_array_equal(h, groups._candidate_hashes(P.view(np.uint64), np.arange(400)))
    np.testing.assert_array_equal(h, groups.row_hashes(P + 0.0))
    assert np.unique(h).size == np.unique(P + 0.0, axis=0).shape[0]
