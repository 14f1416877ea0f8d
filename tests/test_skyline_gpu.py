"""Skyline on the GPU: GPU == CPU == brute force (run on the lent GPU machine)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import skyjoin as sj

pytestmark = pytest.mark.gpu

NBA = os.environ.get("SKYJOIN_NBA", "/work/shared/data/nba-U-8-17264.csv")




def oracle(X, sense=None, distinct=False):
    """Brute-force skyline in float64 (independent of the library)."""
    X = np.asarray(X, dtype=np.float64)
    if sense is not None:
        X = X * np.array([-1.0 if s == "max" else 1.0 for s in sense])
    keep = [i for i in range(X.shape[0])
            if not (((X <= X[i]).all(axis=1)) & ((X < X[i]).any(axis=1))).any()]
    keep = np.array(keep, dtype=np.int64)
    if distinct and keep.size:
        seen, out = set(), []
        for i in keep:
            if tuple(X[i]) not in seen:
                seen.add(tuple(X[i]))
                out.append(i)
        keep = np.array(out, dtype=np.int64)
    return keep


def inputs():
    rng = np.random.default_rng(11)
    out = []
    for d in (1, 2, 3, 5, 8, 12, 20, 33):
        out.append((f"unif-d{d}", rng.random((700, d))))
        out.append((f"grid-d{d}", rng.integers(0, 3, (500, d)).astype(np.float64)))
        b = rng.integers(0, 4, (200, d))
        out.append((f"dups-d{d}", np.vstack([b, b[:100], b[:50]]).astype(np.float64)))
    return out


VARIANTS = ["sync", "nosync", "levelwise", "noquart", "padded"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_equals_cpu_and_oracle(cp, variant):
    for name, X in inputs():
        want = oracle(X)
        cpu = sj.skyline(X, device="cpu")
        gpu = sj.skyline(X, device="gpu", variant=variant)
        assert isinstance(gpu, np.ndarray) and gpu.dtype == np.int64
        np.testing.assert_array_equal(cpu, want, err_msg=f"cpu {name}")
        np.testing.assert_array_equal(gpu, want, err_msg=f"gpu {variant} {name}")
        np.testing.assert_array_equal(sj.skyline(X, device="gpu", variant=variant, distinct=True),
                                      oracle(X, distinct=True), err_msg=f"distinct {name}")


def test_gpu_ggs(cp):
    for name, X in inputs()[::2]:
        np.testing.assert_array_equal(sj.skyline(X, device="gpu", algorithm="ggs"), oracle(X),
                                      err_msg=name)


def test_gpu_mixed_sense_and_device_input(cp):
    rng = np.random.default_rng(2)
    X = rng.integers(-2, 3, (600, 6)).astype(np.float64)
    sense = ["min", "max", "min", "max", "max", "min"]
    want = oracle(X, sense=sense)
    np.testing.assert_array_equal(sj.skyline(X, sense=sense, device="gpu"), want)
    Xd = cp.asarray(X)
    got = sj.skyline(Xd, sense=sense, device="gpu")
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(got), want)


def test_gpu_larger_random(cp):
    for kind, seed in (("independent", 1), ("anticorrelated", 2), ("correlated", 3)):
        X = sj.datasets.skyline_data(20000, 8, kind, seed=seed)
        cpu = sj.skyline(X, device="cpu", algorithm="sfs")
        for v in VARIANTS:
            np.testing.assert_array_equal(sj.skyline(X, device="gpu", variant=v), cpu,
                                          err_msg=f"{kind} {v}")


def test_gpu_stats(cp):
    X = np.random.default_rng(0).random((20000, 6))
    idx, st = sj.skyline(X, device="gpu", return_stats=True)
    assert st["device"] == "gpu" and st["skyline_size"] == idx.size
    assert st["dominance_tests"] > 0 and st["mask_tests"] > 0
    assert idx.size <= st["prefilter_survivors"] <= 20000


@pytest.mark.skipif(not os.path.exists(NBA), reason="NBA data set not present")
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_nba(cp, variant):
    X = np.loadtxt(NBA, delimiter=",", usecols=range(8))
    assert sj.skyline(X, device="gpu", variant=variant).size == 1796


def test_gpu_bad_input(cp):
    with pytest.raises(ValueError, match="NaN"):
        sj.skyline(cp.asarray([[1.0, float("nan")]]), device="gpu")
    with pytest.raises(ValueError, match="CPU only"):
        sj.skyline(np.ones((3, 2)), device="gpu", algorithm="bnl")


# --------------------------------------------------------------------------
# issue 14: equal points grouped once, exact integers, diff columns on the GPU
# --------------------------------------------------------------------------
def with_copies(rng, n=700, d=3, kind="float"):
    """Random points plus many copies of skyline points and of dominated points."""
    X = rng.random((n, d)) if kind == "float" else rng.integers(0, 5, (n, d)).astype(float)
    o = np.argsort(X.sum(axis=1))
    Y = np.vstack([X, np.repeat(X[o[:1]], 300, axis=0), np.repeat(X[o[1:3]], 40, axis=0),
                   np.repeat(X[o[-2:]], 50, axis=0)])
    return Y[rng.permutation(len(Y))]


@pytest.mark.parametrize("variant", VARIANTS + ["ggs"])
def test_gpu_copies_equal_oracle(cp, variant):
    rng = np.random.default_rng(41)
    kw = {"algorithm": "ggs"} if variant == "ggs" else {"variant": variant}
    for d in (1, 2, 3, 6, 12):
        for kind in ("float", "grid"):
            X = with_copies(rng, d=d, kind=kind)
            X[::5] = np.where(X[::5] == 0.0, -0.0, X[::5])   # signed zeros stay equal
            for distinct in (False, True):
                want = oracle(X, distinct=distinct)
                np.testing.assert_array_equal(
                    sj.skyline(X, device="gpu", distinct=distinct, **kw), want,
                    err_msg=f"{variant} d={d} {kind} {distinct}")
                got = sj.skyline(cp.asarray(X), device="gpu", distinct=distinct, **kw)
                np.testing.assert_array_equal(cp.asnumpy(got), want)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_identical_points_linear_work(cp, variant):
    k = 40_000
    X = np.ones((k, 3))
    idx, st = sj.skyline(X, device="gpu", variant=variant, return_stats=True)
    np.testing.assert_array_equal(idx, np.arange(k))
    assert st["prefilter_survivors"] == k and st["distinct_survivors"] == 1
    assert st["dominance_tests"] <= 1
    np.testing.assert_array_equal(sj.skyline(X, device="gpu", variant=variant, distinct=True), [0])
    np.testing.assert_array_equal(sj.skyline(X, device="gpu", algorithm="ggs"), np.arange(k))
    np.testing.assert_array_equal(sj.skyline(X, device="gpu", algorithm="ggs", distinct=True), [0])


def test_gpu_uniform_plus_copies(cp):
    rng = np.random.default_rng(6)
    U = rng.random((300_000, 2))
    m = U[np.argmin(U.sum(axis=1))]
    X = np.vstack([U, np.repeat(m[None], 30_000, axis=0)])
    base = sj.skyline(U, device="cpu")
    want = np.concatenate([base, np.arange(300_000, 330_000)])
    for v in VARIANTS:
        np.testing.assert_array_equal(sj.skyline(X, device="gpu", variant=v), want, err_msg=v)
        np.testing.assert_array_equal(sj.skyline(X, device="gpu", variant=v, distinct=True), base)
    np.testing.assert_array_equal(sj.skyline(X, device="gpu", algorithm="ggs"), want)


def test_gpu_group_rows_equals_numpy(cp):
    from skyjoin.pareto import groups

    rng = np.random.default_rng(2)
    P = np.vstack([rng.integers(0, 3, (2000, 4)).astype(float), rng.random((500, 4))])
    g_np, f_np = groups.group_rows(P)
    g_cp, f_cp = groups.group_rows(cp.asarray(P))
    np.testing.assert_array_equal(cp.asnumpy(f_cp), f_np)
    np.testing.assert_array_equal(cp.asnumpy(g_cp), g_np)
    np.testing.assert_array_equal(cp.asnumpy(groups.row_hashes(cp.asarray(P))), groups.row_hashes(P))
    assert groups.group_rows(cp.asarray(rng.random((3000, 3)))) is None
    h = rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    assert not groups._hashes_repeat(cp.asarray(h)) and not groups._hashes_repeat(h)
    h[4321] = h[17]
    assert groups._hashes_repeat(cp.asarray(h)) and groups._hashes_repeat(h)


def test_gpu_big_integers_exact(cp):
    """int64 beyond 2**53 compared as integers, host and CuPy input."""
    X = np.array([[1700000000000000001, 5], [1700000000000000000, 5]])
    np.testing.assert_array_equal(sj.skyline(X, device="gpu"), [1])
    np.testing.assert_array_equal(cp.asnumpy(sj.skyline(cp.asarray(X), device="gpu")), [1])
    Y = np.array([[2**60 + 1], [2**60]])
    np.testing.assert_array_equal(sj.skyline(Y, device="gpu", distinct=True), [1])
    np.testing.assert_array_equal(cp.asnumpy(sj.skyline(cp.asarray(Y), device="gpu",
                                                         distinct=True)), [1])
    rng = np.random.default_rng(3)
    Z = (2**61 + rng.integers(0, 4, (400, 3))).astype(np.int64)
    U = (np.uint64(2**64 - 9) + rng.integers(0, 4, (400, 2)).astype(np.uint64)).astype(np.uint64)
    for A in (Z, U):
        want = sj.skyline(A, device="cpu", sense="max")
        assert want.size < A.shape[0]
        np.testing.assert_array_equal(sj.skyline(A, device="gpu", sense="max"), want)
        np.testing.assert_array_equal(cp.asnumpy(sj.skyline(cp.asarray(A), device="gpu",
                                                             sense="max")), want)
        np.testing.assert_array_equal(sj.skyline(A, device="gpu", algorithm="ggs"),
                                      sj.skyline(A, device="cpu"))


def test_gpu_diff_columns(cp):
    rng = np.random.default_rng(4)
    X = rng.integers(0, 5, (800, 4)).astype(float)
    for sense in (["diff", "min", "max", "min"], ["min", "different", "diff", "max"]):
        for distinct in (False, True):
            want = sj.skyline(X, sense=sense, distinct=distinct, device="cpu")
            np.testing.assert_array_equal(
                sj.skyline(X, sense=sense, distinct=distinct, device="gpu"), want)
            got = sj.skyline(cp.asarray(X), sense=sense, distinct=distinct, device="gpu")
            np.testing.assert_array_equal(cp.asnumpy(got), want)
