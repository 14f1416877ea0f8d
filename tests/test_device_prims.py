"""The device primitives (skyjoin._core.device_prims) against NumPy: on the GPU
where there is one, and everywhere with the kernels run on the host
(tests/_cuda_emulation.py: each CUDA kernel compiled by the host compiler,
a block's threads run as fibers that meet at its barriers and warp
exchanges)."""

import numpy as np
import pytest

from _cuda_emulation import FakeCupy, compiler, emulate_device_kernels

SIZES = [0, 1, 2, 255, 256, 257, 5000, 70001]


def _check_prims(cp, sizes, seed=0):
    from skyjoin._core import device_prims as dp

    rng = np.random.default_rng(seed)
    for n in sizes:
        a32 = rng.integers(0, 5, n).astype(np.int32)
        a64 = rng.integers(-2**40, 2**40, n).astype(np.int64)
        d32, d64 = cp.asarray(a32), cp.asarray(a64)
        # scans: exact, inclusive and exclusive, with an initial value, in place
        for dtype in (np.int32, np.int64):
            for inclusive in (True, False):
                got = cp.asnumpy(dp.scan(cp, d32, dtype, inclusive=inclusive, init=-3))
                want = np.cumsum(a32, dtype=dtype) - (0 if inclusive else a32) - 3
                np.testing.assert_array_equal(got, want)
        big = cp.asarray(rng.integers(0, 2**40, n).astype(np.int64))
        np.testing.assert_array_equal(cp.asnumpy(dp.scan(cp, big, np.int64)),
                                      np.cumsum(cp.asnumpy(big)))
        inplace = cp.asarray(a32.copy())
        dp.scan(cp, inplace, np.int32, out=inplace)
        np.testing.assert_array_equal(cp.asnumpy(inplace), np.cumsum(a32))
        # runs of sorted keys, compaction
        keys = np.sort(a64 % 7)
        run_of, starts = dp.runs(cp, cp.asarray(keys), np.int32)
        heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if n else np.zeros(0, int)
        np.testing.assert_array_equal(cp.asnumpy(starts), np.r_[heads, n])
        np.testing.assert_array_equal(cp.asnumpy(run_of), np.cumsum(np.r_[True, keys[1:] != keys[:-1]])[:n] - 1)
        flags = (a32 > 2).astype(np.int32)
        rows, pos = dp.compact(cp, cp.asarray(flags.copy()), np.int64)
        np.testing.assert_array_equal(cp.asnumpy(rows), np.flatnonzero(flags))
        np.testing.assert_array_equal(cp.asnumpy(pos), np.cumsum(flags) - 1)
        # gathers, permutations, casts, fills
        perm = rng.permutation(n)
        for idx in (perm.astype(np.int32), perm.astype(np.int64)):
            di = cp.asarray(idx)
            np.testing.assert_array_equal(cp.asnumpy(dp.take(cp, d64, di)), a64[idx])
            M = rng.normal(size=(n, 3)).astype(np.float32)
            np.testing.assert_array_equal(cp.asnumpy(dp.take(cp, cp.asarray(M), di)), M[idx])
            inv = cp.asnumpy(dp.inverse_permutation(cp, di, np.int32))
            np.testing.assert_array_equal(inv[idx], np.arange(n))
            assert inv.dtype == np.int32
        np.testing.assert_array_equal(cp.asnumpy(dp.astype(cp, d64, np.int32)), a64.astype(np.int32))
        np.testing.assert_array_equal(cp.asnumpy(dp.astype(cp, d32, np.int64)), a32.astype(np.int64))
        np.testing.assert_array_equal(cp.asnumpy(dp.arange(cp, n, np.int64, start=5)), np.arange(5, n + 5))
        pairs = cp.zeros((n, 2), dtype=cp.int32)
        dp.fill(cp, pairs[:, 1], 7)
        np.testing.assert_array_equal(cp.asnumpy(pairs), np.c_[np.zeros(n, int), np.full(n, 7)])
        neg = cp.asarray(a64.copy())
        dp.negate(cp, neg)
        np.testing.assert_array_equal(cp.asnumpy(neg), -a64)
        np.testing.assert_array_equal(cp.asnumpy(dp.sort(cp, d64)), np.sort(a64))
        np.testing.assert_array_equal(cp.asnumpy(dp.argsort(cp, d32)), np.argsort(a32, kind="stable"))
        for keys in (a32, a64):             # in place: the keys themselves left sorted
            work = cp.asarray(keys.copy())
            order = dp.argsort(cp, work, in_place=True)
            np.testing.assert_array_equal(cp.asnumpy(order), np.argsort(keys, kind="stable"))
            np.testing.assert_array_equal(cp.asnumpy(work), np.sort(keys, kind="stable"))
        _check_sorted_runs(cp, dp, rng, n)
        table = np.unique(a64 % 1000)
        for side in ("left", "right"):
            got = dp.searchsorted(cp, cp.asarray(table), cp.asarray(a64 % 1001), side, np.int32)
            np.testing.assert_array_equal(cp.asnumpy(got), np.searchsorted(table, a64 % 1001, side))


def _check_sorted_runs(cp, dp, rng, n):
    """sorted_runs against NumPy's stable argsort, with the keys packed above
    their index and without (a bound too wide to pack), 32- and 64-bit."""
    index_bits = max(n - 1, 0).bit_length()
    for dtype, width in ((np.int32, 31), (np.int64, 63)):
        for key_end in (7, 2 ** (width - index_bits), 2 ** (width - index_bits) + 1):
            if key_end > 2 ** width:
                continue
            assert dp.packs_index(n, key_end, dtype) == (key_end <= 2 ** (width - index_bits))
            top = min(key_end, 50 if key_end == 7 else key_end)     # repeats: long runs
            keys = rng.integers(0, top, n).astype(dtype)
            if n:
                keys[rng.integers(0, n)] = key_end - 1          # the bound's own bits
            order, run_of, starts, run_key = dp.sorted_runs(cp, cp.asarray(keys.copy()), key_end)
            want = np.argsort(keys, kind="stable")
            s = keys[want]
            heads = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if n else np.zeros(0, int)
            np.testing.assert_array_equal(cp.asnumpy(order), want)
            assert order.dtype == run_of.dtype == starts.dtype == np.int32
            np.testing.assert_array_equal(cp.asnumpy(starts), np.r_[heads, n])
            np.testing.assert_array_equal(cp.asnumpy(run_of), np.cumsum(np.r_[True, s[1:] != s[:-1]])[:n] - 1)
            np.testing.assert_array_equal(cp.asnumpy(run_key), s[heads])
            assert run_key.dtype == np.int64


def test_key_dtype_is_int32_while_the_keys_fit_31_bits():
    from skyjoin._core import device_prims as dp

    got = [dp.key_dtype(end) for end in (0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**62)]
    assert got == [np.int32] * 4 + [np.int64] * 2


@pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")
def test_device_prims_emulated_equal_numpy(monkeypatch):
    emulate_device_kernels(monkeypatch)
    _check_prims(FakeCupy(), SIZES[:-1])


@pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")
def test_device_prims_emulated_on_one_block(monkeypatch):
    """One block of threads for every grid-stride launch: each thread takes
    many items, through the unrolled loops and their tails."""
    from skyjoin._core import device_kernels

    emulate_device_kernels(monkeypatch)
    monkeypatch.setattr(device_kernels, "_MAX_BLOCKS", 1)
    _check_prims(FakeCupy(), SIZES[:-1], seed=2)


@pytest.mark.gpu
def test_device_prims_on_the_gpu_equal_numpy():
    from skyjoin._core.device import cupy

    _check_prims(cupy(), SIZES + [3_000_001], seed=1)
