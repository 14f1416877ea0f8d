"""Device choice: "auto" | "cpu" | "gpu", and the guarded CuPy import.

CuPy is imported only here and only when a GPU path is taken, so that
``import skyjoin`` works (and is fast) on a machine with neither a GPU nor
CuPy.  ``device="gpu"`` without a usable GPU is an error, never a silent
fallback; ``device="auto"`` falls back to the CPU and says so at debug level.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, TypeGuard

import numpy as np

from ..errors import GPUUnavailableError

log = logging.getLogger("skyjoin")

DEVICES = ("auto", "cpu", "gpu")
ENV_VAR = "SKYJOIN_DEVICE"


@functools.lru_cache(maxsize=1)
def _probe_gpu() -> tuple[bool, str]:
    """Return (usable, reason) for the GPU path; cached for the process."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA install
        return False, f"CuPy cannot be imported ({exc.__class__.__name__}: {exc}); install skyjoin[cu12] or skyjoin[cu13]"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"CuPy finds no CUDA device ({exc})"
    if n < 1:
        return False, "CuPy finds no CUDA device"
    return True, f"{n} CUDA device(s)"


def gpu_available() -> bool:
    """Whether the GPU path can be used (CuPy imports and sees a device)."""
    return _probe_gpu()[0]


def resolve_device(device: str | None = None) -> str:
    """Turn a device argument into "cpu" or "gpu".

    Parameters
    ----------
    device : {"auto", "cpu", "gpu"} or None
        None means the environment variable ``SKYJOIN_DEVICE``, else "auto".

    Returns
    -------
    str
        "cpu" or "gpu".

    Raises
    ------
    ValueError
        For an unknown device name.
    GPUUnavailableError
        For "gpu" when no GPU can be used.
    """
    if device is None:
        device = os.environ.get(ENV_VAR, "auto") or "auto"
    if not isinstance(device, str) or device.lower() not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    device = device.lower()
    if device == "cpu":
        return "cpu"
    ok, reason = _probe_gpu()
    if device == "gpu":
        if not ok:
            raise GPUUnavailableError(f"device='gpu' was asked for but no GPU can be used: {reason}")
        return "gpu"
    if ok:
        return "gpu"
    log.debug("device='auto': using the CPU because %s", reason)
    return "cpu"


def is_device_array(x: object) -> TypeGuard[Any]:
    """Whether x is a GPU array (CUDA array interface), without importing CuPy."""
    return hasattr(x, "__cuda_array_interface__")


def array_module(x):
    """NumPy, or CuPy for a GPU array (CuPy is imported only for one)."""
    return cupy() if is_device_array(x) else np


def cupy():
    """Import and return CuPy (only call on the GPU path)."""
    import cupy as cp

    return cp
