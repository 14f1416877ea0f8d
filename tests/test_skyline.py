"""Skyline operator on the CPU against an independent brute-force oracle."""

from __future__ import annotations

import os

import numpy as np
import pytest

import skyjoin as sj

NBA = os.environ.get("SKYJOIN_NBA", "/work/shared/data/nba-U-8-17264.csv")


def oracle(X, sense=None, distinct=False):
    """Brute-force skyline in float64, written independently of the library."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if sense is not None:
        sign = np.array([-1.0 if s == "max" else 1.0 for s in sense])
        X = X * sign
    keep = []
    for i in range(n):
        le = (X <= X[i]).all(axis=1)
        lt = (X < X[i]).any(axis=1)
        if not (le & lt).any():
            keep.append(i)
    keep = np.array(keep, dtype=np.int64)
    if distinct and keep.size:
        seen = {}
        out = []
        for i in keep:
            key = tuple(X[i])
            if key not in seen:
                seen[key] = i
                out.append(i)
        keep = np.array(sorted(out), dtype=np.int64)
    return keep


def cases(seed=0):
    """Seeded random inputs: uniform, small integer grids (ties), duplicates."""
    rng = np.random.default_rng(seed)
    out = []
    for d in (1, 2, 3, 4, 5, 7, 8, 12, 16, 20):
        out.append((f"unif-d{d}", rng.random((400, d))))
        out.append((f"grid3-d{d}", rng.integers(0, 3, (300, d)).astype(np.float64)))
        base = rng.integers(0, 5, (120, d))
        out.append((f"dups-d{d}", np.vstack([base, base[:60], base[:30]]).astype(np.int32)))
    # anticorrelated-like: many skyline points
    x = rng.random((500, 4))
    out.append(("anti-d4", x - x.mean(axis=1, keepdims=True)))
    return out


_WANT = {}


def want_for(name, X, distinct):
    """The oracle's answer for a named case, computed once."""
    key = (name, distinct)
    if key not in _WANT:
        _WANT[key] = oracle(X, distinct=distinct)
    return _WANT[key]


ALGS = [("skyalign", None), ("skyalign", "levelwise"), ("skyalign", "sync"), ("skyalign", "noquart"),
        ("bnl", None), ("sfs", None), ("ggs", None), ("bruteforce", None)]


@pytest.mark.parametrize("algorithm,variant", ALGS)
def test_equals_oracle(algorithm, variant):
    for name, X in cases():
        want = want_for(name, X, False)
        got = sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want, err_msg=f"{algorithm}/{variant} on {name}")
        got_d = sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant, distinct=True)
        np.testing.assert_array_equal(got_d, want_for(name, X, True),
                                      err_msg=f"{algorithm}/{variant} distinct on {name}")


def test_quartile_groups():
    from skyjoin.pareto.cpu import skyalign_cpu

    for name, X in cases()[::3]:
        want = want_for(name, X, False)
        for variant in ("nosync", "noquart"):
            for g in (1, 3):
                got, st = skyalign_cpu(np.asarray(X, dtype=np.float64), variant=variant, groups=g)
                np.testing.assert_array_equal(got, want,
                                              err_msg=f"{variant}, groups={g} on {name}")


@pytest.mark.parametrize("algorithm,variant", ALGS[:4])
def test_mixed_senses(algorithm, variant):
    rng = np.random.default_rng(3)
    for d in (2, 3, 6, 9):
        X = rng.integers(-2, 3, (250, d)).astype(np.float64)
        sense = [("max" if k % 2 else "min") for k in range(d)]
        np.testing.assert_array_equal(
            sj.skyline(X, sense=sense, device="cpu", algorithm=algorithm, variant=variant),
            oracle(X, sense=sense))
    X = rng.random((200, 3))
    np.testing.assert_array_equal(sj.skyline(X, sense="max", device="cpu"),
                                  oracle(X, sense=["max"] * 3))


def test_wide_dimensions():
    rng = np.random.default_rng(7)
    for d in (24, 32, 33, 40):
        X = rng.integers(0, 2, (200, d)).astype(np.float64)
        X[:, 0] += rng.random(200)
        np.testing.assert_array_equal(sj.skyline(X, device="cpu"), oracle(X))
    X = rng.random((60, 70))   # beyond SkyAlign's 64-bit masks: auto picks SFS
    np.testing.assert_array_equal(sj.skyline(X, device="cpu"), oracle(X))
    with pytest.raises(ValueError, match="64"):
        sj.skyline(X, device="cpu", algorithm="skyalign")


def test_signed_zero_and_dtypes():
    X = np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    np.testing.assert_array_equal(sj.skyline(X, device="cpu"), [0, 1, 2])
    np.testing.assert_array_equal(sj.skyline(X, device="cpu", distinct=True), [0, 2])
    B = np.array([[True, False], [False, True], [True, True]])
    np.testing.assert_array_equal(sj.skyline(B, device="cpu"), [0, 1])
    I = np.array([[2**40, 1], [2**40 + 1, 0]], dtype=np.int64)
    np.testing.assert_array_equal(sj.skyline(I, device="cpu"), [0, 1])


def test_trivial_inputs():
    assert sj.skyline(np.zeros((0, 3)), device="cpu").size == 0
    np.testing.assert_array_equal(sj.skyline(np.ones((1, 3)), device="cpu"), [0])
    np.testing.assert_array_equal(sj.skyline(np.ones((5, 2)), device="cpu"), np.arange(5))
    np.testing.assert_array_equal(sj.skyline(np.ones((5, 2)), device="cpu", distinct=True), [0])
    np.testing.assert_array_equal(sj.skyline([[3.0], [1.0], [1.0], [2.0]], device="cpu"), [1, 2])


def test_stats():
    rng = np.random.default_rng(1)
    X = rng.random((3000, 6))
    idx, st = sj.skyline(X, device="cpu", return_stats=True)
    np.testing.assert_array_equal(idx, oracle(X))
    assert st["skyline_size"] == idx.size
    assert idx.size <= st["prefilter_survivors"] <= st["tau_survivors"] <= 3000
    assert st["dominance_tests"] > 0 and st["mask_tests"] > 0
    assert {"prefilter", "masks", "sort", "skyline"} <= set(st["times"])


@pytest.mark.skipif(not os.path.exists(NBA), reason="shared NBA data set not present")
@pytest.mark.parametrize("algorithm,variant", ALGS[:6])
def test_nba(algorithm, variant):
    X = np.loadtxt(NBA, delimiter=",", usecols=range(8))
    assert X.shape == (17264, 8)
    idx = sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant)
    assert idx.size == 1796


def test_dataframe():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"name": list("abcdef"), "price": [3, 1, 2, 2, 5, 1],
                       "rating": [5, 2, 4, 4, 5, 1], "junk": [0, 9, 9, 9, 9, 9]},
                      index=[10, 11, 12, 13, 14, 15])
    out = sj.skyline(df, min=["price"], max=["rating"], device="cpu")
    # a(3,5) b(1,2) c/d(2,4) e(5,5) f(1,1): skyline a, b, c, d
    assert list(out.index) == [10, 11, 12, 13]
    assert list(out.columns) == list(df.columns)
    out = sj.skyline(df, min="price", max="rating", distinct=True, device="cpu")
    assert list(out.index) == [10, 11, 12]
    allnum = sj.skyline(df[["price", "rating", "junk"]], device="cpu")
    want = oracle(df[["price", "rating", "junk"]].to_numpy())
    assert list(allnum.index) == list(df.index[want])
    with pytest.raises(ValueError, match="both min and max"):
        sj.skyline(df, min=["price"], max=["price", "rating"], device="cpu")
    with pytest.raises(ValueError, match="not in the DataFrame"):
        sj.skyline(df, min=["nope"], device="cpu")


@pytest.mark.parametrize("bad,kw,exc,msg", [
    ([[1.0, np.nan]], {}, ValueError, "NaN"),
    ([[1.0, np.inf]], {}, ValueError, "inf"),
    ([[1.0, 2.0]], {"sense": ["min"]}, ValueError, "sense has 1"),
    ([[1.0, 2.0]], {"sense": ["min", "up"]}, ValueError, "sense\\[1\\]"),
    ([[1.0, 2.0]], {"sense": "best"}, ValueError, "sense"),
    ([[1.0, 2.0]], {"algorithm": "quick"}, ValueError, "algorithm"),
    ([[1.0, 2.0]], {"device": "tpu"}, ValueError, "device"),
    ([[1.0, 2.0]], {"variant": "fancy"}, ValueError, "variant"),
    ([[1.0, 2.0]], {"algorithm": "bnl", "variant": "sync"}, ValueError, "variant"),
    ([[1.0, 2.0]], {"variant": "padded", "device": "cpu"}, ValueError, "GPU-only"),
    ([[1.0, 2.0]], {"min": ["a"]}, TypeError, "DataFrame"),
    ([1.0, 2.0], {}, ValueError, "2-D"),
    ([["a", "b"]], {}, TypeError, "real numbers"),
])
def test_bad_input(bad, kw, exc, msg):
    kw.setdefault("device", "cpu")
    with pytest.raises(exc, match=msg):
        sj.skyline(bad, **kw)


def test_sampled_quartiles_many_survivors():
    """More pre-filter survivors than the quartile sample (16384 rows): the
    quartiles and level bounds come from a sample, results stay exact; also
    with heavy ties (values on a coarse grid)."""
    from skyjoin.datasets import anticorrelated
    from skyjoin.pareto.baselines import sfs

    for name, X in (("anti", anticorrelated(40_000, 5, seed=7)),
                    ("anti-ties", np.round(anticorrelated(40_000, 5, seed=8) * 200) / 200)):
        want = sfs(X)[0]      # the sort-first baseline (bruteforce: minutes at this size)
        for variant in ("default", "nosync", "levelwise", "sync", "noquart"):
            got, st = sj.skyline(X, device="cpu", variant=variant, return_stats=True)
            assert st["prefilter_survivors"] > 16384
            np.testing.assert_array_equal(got, want, err_msg=f"{variant} on {name}")


def test_fused_levels_match_reference():
    """masks_and_levels gives the masks of median_quartile_masks and the
    packed count of bounds below each value (the reference search)."""
    from skyjoin.pareto import masks as mk

    rng = np.random.default_rng(4)
    X = np.round(rng.random((5000, 11)) * 50)           # ties on bounds
    idx = np.sort(rng.choice(5000, 3000, replace=False))
    S = mk.sorted_sample(X, idx[:1000])
    bounds = mk.level_bounds(S)
    quart = S[[250, 500, 750]]
    M, Q, order, L = mk.masks_and_levels(X, idx, quart, bounds)
    M0, Q0, o0 = mk.median_quartile_masks(np.ascontiguousarray(X[idx]), quart)
    np.testing.assert_array_equal(M, M0)
    np.testing.assert_array_equal(Q, Q0)
    np.testing.assert_array_equal(order, o0)
    nb = np.isfinite(bounds).sum(axis=1)
    want = (bounds[None, :, :] < X[idx][:, :, None]).sum(axis=2)
    assert (nb <= 127).all()
    np.testing.assert_array_equal(L, mk.pack_levels(want.astype(np.uint8)))
