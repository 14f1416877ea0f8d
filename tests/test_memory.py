import numpy as np

from skyjoin._core.memory import HUGE_MIN_BYTES, alloc_host


def test_alloc_host_small_and_large_are_plain_writable_arrays():
    for n in (0, 5, HUGE_MIN_BYTES // 4 + 3):
        a = alloc_host(n, np.int32)
        assert a.shape == (n,) and a.dtype == np.int32 and a.flags.writeable
        a[:] = np.arange(n, dtype=np.int32)
        assert n == 0 or (a[0] == 0 and a[-1] == n - 1)
