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
