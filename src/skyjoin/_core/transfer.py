"""Host <-> device copies of the GPU paths (CuPy is passed in, never imported here).

A pageable copy of fresh host memory runs at a few GB/s; these helpers go
through pinned staging slots from CuPy's pinned pool, a chunk at a time
(:func:`copy_chunked`: the host copies one chunk with all host cores while
the DMA of the next runs; NumPy releases the GIL), so that a copy pins a
few chunks, not its whole size.  Costs: O(bytes) each, the host part in
parallel.
"""

from __future__ import annotations

import numpy as np

from .device import is_device_array
from .device_reduce import all_finite
from .memory import alloc_host
from .pool import map_spans
from .validate import check_points

__all__ = ["to_device", "h2d", "d2pinned", "d2h", "copy_chunked", "parallel_copy",
           "CHUNK_BYTES", "SLOTS"]

#: below this size a plain CuPy copy (staging does not pay for itself)
STAGE_MIN_BYTES = 8 << 20
#: bytes of one pinned staging slot of :func:`copy_chunked`
CHUNK_BYTES = 64 << 20
#: pinned slots of one chunked copy (the host fills one while the DMA of another runs)
SLOTS = 3


def to_device(cp, X, name: str, dtype):
    """X (NumPy or CuPy) as a C-contiguous (n, d) device array of the working dtype."""
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
        if A.dtype.kind == "f" and not all_finite(cp, A):
            raise ValueError(f"{name} contains NaN or inf values; remove or impute them first")
        return cp.ascontiguousarray(A.astype(dtype, copy=False))
    A = np.asarray(X)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D with shape (n_points, n_dims), got shape {A.shape}")
    if A.dtype not in (np.float64, np.float32) or not A.flags.c_contiguous:
        A = check_points(A, name=name)
    D = h2d(cp, A)
    if not all_finite(cp, D):
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
    items, ``CHUNK_BYTES`` at a time through ``SLOTS`` pinned slots of
    CuPy's pinned pool.  The host copies one chunk into (or out of) a slot
    with all host cores, casting to the other side's dtype as ``np.copyto``
    does ("same_kind"), while the DMA of another runs on the current
    stream; the call returns once the copy is done.

    Cost: O(items), at about the slower of the host copy and the DMA rather
    than their sum, with ``SLOTS * CHUNK_BYTES`` of pinned memory whatever
    the size (a whole-array staging buffer pins as much as it copies, and
    pinning fresh memory runs at a few GB/s).
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
    stream = cp.cuda.get_current_stream()
    size = min(max(1, CHUNK_BYTES // item), n)
    slots = [cupyx.empty_pinned(size, dtype=dev.dtype)
             for _ in range(min(SLOTS, -(-n // size)))]
    spans = [(a, min(size, n - a)) for a in range(0, n, size)]
    ready: list = [None] * len(slots)
    if to_device:
        for k, (a, m) in enumerate(spans):
            s = k % len(slots)
            if ready[s] is not None:
                ready[s].synchronize()          # the slot's last DMA is done
            parallel_copy(slots[s][:m], flat[a:a + m])
            rt.memcpyAsync(dev.data.ptr + a * item, slots[s].ctypes.data, m * item,
                           rt.memcpyHostToDevice, stream.ptr)
            ready[s] = stream.record()
        stream.synchronize()
        return

    def issue(k: int) -> None:
        a, m = spans[k]
        s = k % len(slots)
        rt.memcpyAsync(slots[s].ctypes.data, dev.data.ptr + a * item, m * item,
                       rt.memcpyDeviceToHost, stream.ptr)
        ready[s] = stream.record()

    for k in range(len(slots)):
        issue(k)
    for k, (a, m) in enumerate(spans):
        s = k % len(slots)
        ready[s].synchronize()
        parallel_copy(flat[a:a + m], slots[s][:m])
        if k + len(slots) < len(spans):
            issue(k + len(slots))


def parallel_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[:] = src with all host cores (NumPy releases the GIL while copying)."""
    def span(a: int, b: int) -> None:
        np.copyto(dst[a:b], src[a:b])

    map_spans(span, src.shape[0])
