"""Host <-> device copies of the GPU paths (CuPy is passed in, never imported here).

A pageable copy of fresh host memory runs at a few GB/s; these helpers go
through pinned staging buffers from CuPy's pinned pool (one DMA at the
pinned rate) and copy between host buffers with all host cores (NumPy
releases the GIL).  Costs: O(bytes) each, the host part in parallel.
"""

from __future__ import annotations

import numpy as np

from .device import is_device_array
from .device_reduce import all_finite
from .memory import alloc_host
from .pool import map_spans
from .validate import check_points

__all__ = ["to_device", "h2d", "d2pinned", "d2h", "parallel_copy"]

#: below this size a plain CuPy copy (staging does not pay for itself)
STAGE_MIN_BYTES = 8 << 20


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
    """Copy a host array to the device through a pinned staging buffer (parallel host copy)."""
    if A.nbytes < STAGE_MIN_BYTES:
        return cp.asarray(A)
    import cupyx

    stage = cupyx.empty_pinned(A.shape, dtype=A.dtype)     # from CuPy's pinned pool (cached)
    parallel_copy(stage.reshape(-1), A.reshape(-1))
    out = cp.empty(A.shape, dtype=A.dtype)
    out.set(stage)
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
    through a pinned staging buffer (one DMA at the pinned rate, then a
    parallel host copy): a pageable copy of fresh memory runs at a few GB/s."""
    if D.nbytes < STAGE_MIN_BYTES:
        return cp.asnumpy(D)
    stage = d2pinned(cp, D)
    out = alloc_host(D.size, D.dtype)
    parallel_copy(out, stage.reshape(-1))
    return out.reshape(D.shape)


def parallel_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[:] = src with all host cores (NumPy releases the GIL while copying)."""
    def span(a: int, b: int) -> None:
        np.copyto(dst[a:b], src[a:b])

    map_spans(span, src.shape[0])
