"""skyjoin._core.unique.sorted_unique against numpy.unique."""

import numpy as np
import pytest

from skyjoin._core.unique import sorted_unique


@pytest.mark.parametrize("seed", range(5))
def test_sorted_unique_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    for n, hi in ((0, 5), (1, 5), (1000, 7), (100_000, 2**40)):
        for dtype in (np.int64, np.int32, np.float64):
            a = rng.integers(-hi, hi, size=n).astype(dtype)
            got = sorted_unique(a)
            np.testing.assert_array_equal(got, np.unique(a))
            assert got.dtype == a.dtype
    M = rng.integers(0, 9, size=(40, 3))
    np.testing.assert_array_equal(sorted_unique(M), np.unique(M))
