"""The radix sort of the sparse grids' cell keys against NumPy's stable argsort."""

import numpy as np
import pytest

from skyjoin.index.grid import RADIX_MIN_KEYS, sort_cells
from skyjoin.index.radix_sort import radix_argsort


@pytest.mark.parametrize("n, top", [(1, 0), (50, 3), (70_000, 2**37), (90_000, 2**62),
                                    (80_000, 5)])
def test_radix_argsort_is_numpy_stable_argsort(rng, n, top):
    key = rng.integers(0, top + 1, n)
    before = key.copy()
    for threads in (1, 3):
        order, keys = radix_argsort(key, int(key.max()), np.int32, threads=threads)
        want = np.argsort(key, kind="stable")
        np.testing.assert_array_equal(order, want)
        np.testing.assert_array_equal(keys, key[want])
        assert order.dtype == np.int32
    np.testing.assert_array_equal(key, before)              # the caller's keys untouched


def test_sparse_sort_cells_above_and_below_the_radix_threshold(rng):
    for n in (RADIX_MIN_KEYS - 1, RADIX_MIN_KEYS + 5):
        key = rng.integers(0, 2**40, n) // 7 * 7          # repeated keys: stability matters
        s = sort_cells(key, 2**40, dense=False)
        want = np.argsort(key, kind="stable")
        np.testing.assert_array_equal(s.order, want)
        np.testing.assert_array_equal(s.cell_ids, np.unique(key))
