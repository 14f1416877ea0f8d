"""Chunked host <-> device copies (skyjoin._core.transfer.copy_chunked, h2d, d2h)
against the arrays themselves: on the GPU where there is one, and everywhere
through a stand-in whose "device" is host memory and whose DMA is a memmove
(the chunking, the lanes' shares of the chunks and the casts are the code
under test)."""

import ctypes
import sys
import time
import types

import numpy as np
import pytest

from skyjoin._core import transfer

SIZES = [1, 7, 1000, 4096, 4097, 12289, 100_003]


class _Stream:
    ptr = 0

    def __init__(self, non_blocking=False):
        pass

    def synchronize(self):
        pass


class _Device:
    def __init__(self, i):
        self.id = i

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Ptr:
    def __init__(self, arr):
        self.ptr = arr.ctypes.data


class _DevArray:
    """A host array posing as a device array (``.data.ptr`` as CuPy's)."""

    def __init__(self, arr):
        self.arr = arr
        self.data = _Ptr(arr)
        self.flags = arr.flags
        self.size = arr.size
        self.dtype = arr.dtype
        self.device = _Device(0)


def _fake_cp(log):
    def memcpy_async(dst, src, nbytes, kind, stream):
        log.append((kind, nbytes))
        ctypes.memmove(dst, src, nbytes)

    runtime = types.SimpleNamespace(memcpyAsync=memcpy_async, memcpyHostToDevice=1,
                                    memcpyDeviceToHost=2)
    cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=_Stream, Stream=_Stream,
                                 Device=_Device)
    return types.SimpleNamespace(cuda=cuda)


@pytest.fixture
def fake(monkeypatch):
    pinned = []

    def empty_pinned(n, dtype):
        a = np.full(n * np.dtype(dtype).itemsize, 0x5A, dtype=np.uint8).view(dtype)
        pinned.append(a)
        return a

    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(empty_pinned=empty_pinned))
    monkeypatch.setattr(transfer, "CHUNK_BYTES", 4096)
    log = []
    return _fake_cp(log), log, pinned


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_both_ways_equal_the_source(fake, n, dtype):
    cp, log, pinned = fake
    rng = np.random.default_rng(n)
    src = (rng.normal(size=n) * 1000).astype(dtype)
    dev = _DevArray(np.zeros(n, dtype=dtype))
    transfer.copy_chunked(cp, src, dev, to_device=True)
    np.testing.assert_array_equal(dev.arr, src)
    back = np.zeros(n, dtype=dtype)
    transfer.copy_chunked(cp, back, dev, to_device=False)
    np.testing.assert_array_equal(back, src)
    item = np.dtype(dtype).itemsize
    chunk = max(1, transfer.CHUNK_BYTES // item)
    assert sum(b for k, b in log if k == 1) == n * item           # every byte once, each way
    assert sum(b for k, b in log if k == 2) == n * item
    assert max(b for _, b in log) <= chunk * item
    assert len(pinned) == 2 * min(transfer.COPY_LANES, -(-n // chunk))  # a slot per lane


def test_into_a_slice_with_a_cast(fake):
    """D2H into rows a..b of a wider host array (the receive of the slices), int32
    on the device into int64 on the host; the rows around are untouched."""
    cp, _, _ = fake
    vals = np.arange(-5000, 5000, dtype=np.int32) * 7
    dev = _DevArray(vals.copy())
    out = np.full(20_000, -1, dtype=np.int64)
    transfer.copy_chunked(cp, out[3000:13000], dev, to_device=False)
    np.testing.assert_array_equal(out[3000:13000], vals.astype(np.int64))
    assert (out[:3000] == -1).all() and (out[13000:] == -1).all()


def test_refuses_unequal_sizes_and_strided_arrays(fake):
    cp, _, _ = fake
    with pytest.raises(ValueError, match="host items"):
        transfer.copy_chunked(cp, np.zeros(10), _DevArray(np.zeros(11)), to_device=True)
    with pytest.raises(ValueError, match="C-contiguous"):
        transfer.copy_chunked(cp, np.zeros(20)[::2], _DevArray(np.zeros(10)), to_device=True)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 2), (1_000_003, 2), (3_000_001, 3)])
def test_h2d_and_d2h_on_the_gpu(shape, monkeypatch):
    from skyjoin._core.device import cupy

    cp = cupy()
    monkeypatch.setattr(transfer, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(transfer, "STAGE_MIN_BYTES", 0)
    X = np.random.default_rng(1).normal(size=shape)
    D = transfer.h2d(cp, X)
    np.testing.assert_array_equal(cp.asnumpy(D), X)
    np.testing.assert_array_equal(transfer.d2h(cp, D), X)
    lab = cp.arange(shape[0], dtype=cp.int32) - 17
    out = np.full(shape[0] + 10, -9, dtype=np.int64)
    transfer.copy_chunked(cp, out[5:-5], lab, to_device=False)
    np.testing.assert_array_equal(out[5:-5], cp.asnumpy(lab).astype(np.int64))
    assert (out[:5] == -9).all() and (out[-5:] == -9).all()


def test_an_error_in_one_lane_is_raised_after_every_lane_stopped(fake, monkeypatch):
    """Chunk 2 fails at once; the other chunks take 2 ms each.  The error is
    raised only once no lane copies any more (the caller may free the arrays)."""
    cp, _, _ = fake
    copied = []
    real = cp.cuda.runtime.memcpyAsync
    n = 20 * transfer.CHUNK_BYTES // 8
    dev = _DevArray(np.zeros(n))

    def slow_or_failing(dst, src, nbytes, kind, stream):
        if dst == dev.data.ptr + 2 * transfer.CHUNK_BYTES:
            raise RuntimeError("DMA failed")
        time.sleep(0.002)
        real(dst, src, nbytes, kind, stream)
        copied.append(dst)

    monkeypatch.setattr(cp.cuda.runtime, "memcpyAsync", slow_or_failing)
    with pytest.raises(RuntimeError, match="DMA failed"):
        transfer.copy_chunked(cp, np.ones(n), dev, to_device=True)
    settled = len(copied)
    time.sleep(0.1)
    assert len(copied) == settled
    assert settled >= 1
