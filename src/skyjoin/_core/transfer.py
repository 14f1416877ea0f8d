"""Host <-> device copies of the GPU paths (CuPy is passed in, never imported here).

A pageable copy of fresh host memory runs at a few GB/s; these helpers go
through pinned staging slots from CuPy's pinned pool, a chunk at a time
(:func:`copy_chunked`: host threads copy chunks into their slots while
the DMAs of other chunks run; NumPy releases the GIL), so that a copy
pins a few chunks, not its whole size.  Costs: O(bytes) each, the host part in
parallel.
"""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np

from .device import is_device_array
from .device_reduce import all_finite
from .memory import alloc_host
from .pool import HOST_THREADS, host_pool, map_spans
from .validate import check_points

__all__ = ["to_device", "h2d", "d2pinned", "d2h", "copy_chunked", "parallel_copy",
           "CHUNK_BYTES", "COPY_LANES"]

#: below this size a plain CuPy copy (staging does not pay for itself)
STAGE_MIN_BYTES = 8 << 20
#: bytes of one chunk (and pinned slot) of :func:`copy_chunked`
CHUNK_BYTES = 16 << 20
#: host threads (each with its slot and stream) of one chunked copy
COPY_LANES = min(16, HOST_THREADS)


def to_device(cp, X, name: str, dtype, check_finite: bool = True):
    """X (NumPy or CuPy) as a C-contiguous (n, d) device array of the working
    dtype, its values tested for NaN and inf on the device (one pass) unless
    ``check_finite`` is False: the caller's own pass tests them (the range
    pass of ``conditioning.condition_checked``), or they were tested before."""
    if is_device_array(X):
        A = cp.asarray(X)
        if A.ndim != 2:
            raise ValueError(f"{name} must be 2-D with shape (n_points, n_dims), got shape {A.shape}")
        if A.shape[1] == 0:
            raise ValueError(f"{name} has no columns (shape {A.shape})")
        if A.dtype == cp.bool_:
            A = A.astype(cp.uint8)
        if A.dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {A.dtype}")
        floats = A.dtype.kind == "f"
        # tested after the cast: exact for every float dtype, and the reduction's
        # kernels take the working dtypes (float16 has none)
        A = cp.ascontiguousarray(A.astype(dtype, copy=False))
        if check_finite and floats and not all_finite(cp, A):
            raise ValueError(f"{name} contains NaN or inf values; remove or impute them first")
        return A
    A = np.asarray(X)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D with shape (n_points, n_dims), got shape {A.shape}")
    if A.dtype not in (np.float64, np.float32) or not A.flags.c_contiguous:
        A = check_points(A, name=name)
    D = h2d(cp, A)
    if check_finite and not all_finite(cp, D):
        raise ValueError(f"{name} contains NaN or inf values; remove or impute them first")
    return cp.ascontiguousarray(D.astype(dtype, copy=False))


def h2d(cp, A: np.ndarray):
    """Copy a host array to the device through pinned staging slots (:func:`copy_chunked`)."""
    if A.nbytes < STAGE_MIN_BYTES:
        return cp.asarray(A)
    A = np.ascontiguousarray(A)
    out = cp.empty(A.shape, dtype=A.dtype)
    copy_chunked(cp, A, out, to_device=True)
    return out


def d2pinned(cp, D) -> np.ndarray:
    """A device array in a pinned host buffer from CuPy's pinned pool (cached), by one
    DMA at the pinned rate: for data that the host reads once and drops."""
    import cupyx

    stage = cupyx.empty_pinned(D.shape, dtype=D.dtype)
    D.get(out=stage)
    return stage


def d2h(cp, D) -> np.ndarray:
    """A device array in host memory from ``alloc_host`` (its page policy),
    through pinned staging slots (:func:`copy_chunked`): a pageable copy of
    fresh memory runs at a few GB/s."""
    if D.nbytes < STAGE_MIN_BYTES:
        return cp.asnumpy(D)
    out = alloc_host(D.size, D.dtype)
    copy_chunked(cp, out, cp.ascontiguousarray(D).reshape(-1), to_device=False)
    return out.reshape(D.shape)


def copy_chunked(cp, host: np.ndarray, dev, *, to_device: bool) -> None:
    """Copy ``host`` to ``dev`` (``to_device``) or ``dev`` to ``host``: a
    C-contiguous host array and a C-contiguous device array of as many
    items, in chunks of ``CHUNK_BYTES``.

    ``COPY_LANES`` threads of the host pool each take every ``COPY_LANES``-th
    chunk with their own pinned slot (from CuPy's pinned pool) and stream:
    a lane copies a chunk into its slot (casting to the other side's dtype
    as ``np.copyto`` does, "same_kind") and starts its DMA, or the reverse,
    so that the lanes' host copies run while the other lanes' DMAs do.  The
    caller's stream is synchronised first (the lanes copy on their own
    streams), and the call returns once every chunk has landed.

    Cost: O(items), at about the slower of the host copies and the DMA
    rather than their sum, with ``COPY_LANES * CHUNK_BYTES`` of pinned
    memory whatever the size (a whole-array staging buffer pins as much as
    it copies, and pinning fresh memory runs at a few GB/s).
    """
    import cupyx

    if not host.flags.c_contiguous or not dev.flags.c_contiguous:
        raise ValueError("copy_chunked needs C-contiguous arrays")
    n = host.size
    if dev.size != n:
        raise ValueError(f"copy_chunked: {n} host items against {dev.size} device items")
    if n == 0:
        return
    flat = host.reshape(-1)
    item = dev.dtype.itemsize
    rt = cp.cuda.runtime
    device = dev.device.id
    size = min(max(1, CHUNK_BYTES // item), n)
    starts = range(0, n, size)
    lanes = min(COPY_LANES, len(starts))
    # dev's pending work (a copy to the host) or its memory's last users (a copy to
    # the device) are on the caller's stream; the lanes copy on their own
    cp.cuda.get_current_stream().synchronize()

    def lane(j: int) -> None:
        with cp.cuda.Device(device):
            slot = cupyx.empty_pinned(size, dtype=dev.dtype)
            stream = cp.cuda.Stream(non_blocking=True)
            for a in starts[j::lanes]:
                m = min(size, n - a)
                if to_device:
                    np.copyto(slot[:m], flat[a:a + m])
                    rt.memcpyAsync(dev.data.ptr + a * item, slot.ctypes.data, m * item,
                                   rt.memcpyHostToDevice, stream.ptr)
                    stream.synchronize()        # before the slot is filled again
                else:
                    rt.memcpyAsync(slot.ctypes.data, dev.data.ptr + a * item, m * item,
                                   rt.memcpyDeviceToHost, stream.ptr)
                    stream.synchronize()
                    np.copyto(flat[a:a + m], slot[:m])

    futs = [host_pool().submit(lane, j) for j in range(lanes)]
    cf.wait(futs)           # every lane has stopped before an error is raised
    for f in futs:
        f.result()


def parallel_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[:] = src with all host cores (NumPy releases the GIL while copying)."""
    def span(a: int, b: int) -> None:
        np.copyto(dst[a:b], src[a:b])

    map_spans(span, src.shape[0])
