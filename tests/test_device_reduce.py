"""Column bounds on the GPU (skyjoin._core.device_reduce.column_bounds) against NumPy:
on the GPU where there is one, and everywhere with its CUDA source run on the
host (tests/_cuda_emulation.py, on a grid of 3 blocks)."""

import numpy as np
import pytest

from _cuda_emulation import FakeCupy, emulate_device_kernels

SHAPES = [(1, 1), (5, 2), (1000, 3), (300001, 2), (4097, 8), (777, 9), (2000, 17)]


def _cases(seed=0):
    rng = np.random.default_rng(seed)
    for n, d in SHAPES:
        for dtype in (np.float64, np.float32):
            X = (rng.normal(size=(n, d)) * 10.0 ** rng.integers(-3, 6, size=d)).astype(dtype)
            yield X


def _check(cp, X):
    from skyjoin._core.device_reduce import column_bounds

    lo, hi, finite = column_bounds(cp, cp.asarray(X))
    assert finite
    np.testing.assert_array_equal(lo, X.min(axis=0).astype(np.float64))
    np.testing.assert_array_equal(hi, X.max(axis=0).astype(np.float64))
    for bad in (np.nan, np.inf, -np.inf):
        Y = X.copy()
        Y[len(Y) // 2, Y.shape[1] - 1] = bad
        assert not column_bounds(cp, cp.asarray(Y))[2]


def test_column_bounds_emulated_equals_numpy(monkeypatch):
    emulate_device_kernels(monkeypatch)
    for X in _cases(1):
        _check(FakeCupy(), X)


@pytest.mark.gpu
def test_column_bounds_on_the_gpu_equal_numpy():
    from skyjoin._core.device import cupy
    from skyjoin._core.device_reduce import all_finite, column_bounds

    cp = cupy()
    for X in _cases(2):
        _check(cp, X)
    # more rows than the fixed grid's threads take four at a time: the unrolled
    # loop and its tail, a bad value in each
    rng = np.random.default_rng(3)
    for n, d in ((2_000_003, 3), (1_048_577, 1)):
        for dtype in (np.float64, np.float32):
            X = rng.normal(size=(n, d)).astype(dtype)
            _check(cp, X)
            for row in (0, 1, n // 3, n - 2, n - 1):
                Y = cp.asarray(X)
                Y[row, d - 1] = np.nan
                assert not all_finite(cp, Y) and not column_bounds(cp, Y)[2]
            assert all_finite(cp, cp.asarray(X))
    with pytest.raises(ValueError, match="at least one row"):
        column_bounds(cp, cp.zeros((0, 2)))
