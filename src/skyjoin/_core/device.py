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


def resolve_device(device: str | None = None, *, data_on_gpu: bool = False) -> str:
    """Turn a device argument into "cpu" or "gpu".

    Parameters
    ----------
    device : {"auto", "cpu", "gpu"} or None
        None means the environment variable ``SKYJOIN_DEVICE``, else "auto".
    data_on_gpu : bool, default False
        The points are already on the GPU (``device_input.on_gpu``): "auto"
        then means the GPU, and "cpu" is refused (the rule of
        ``skyjoin._core.device_input``: no implicit copy to the host).

    Returns
    -------
    str
        "cpu" or "gpu".

    Raises
    ------
    ValueError
        For an unknown device name.
    GPUUnavailableError
        For "gpu" when no GPU can be used (also "auto" with ``data_on_gpu``).
    TypeError
        For "cpu" with ``data_on_gpu``.
    """
    if device is None:
        device = os.environ.get(ENV_VAR, "auto") or "auto"
    if not isinstance(device, str) or device.lower() not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    device = device.lower()
    if device == "cpu" and data_on_gpu:
        raise TypeError("the points are on the GPU and device='cpu' was asked for: skyjoin "
                        "never copies them to the host implicitly; use device='gpu' or "
                        "'auto', or copy them to the host first (e.g. cupy.asnumpy)")
    if device == "cpu":
        return "cpu"
    ok, reason = _probe_gpu()
    if device == "gpu" or data_on_gpu:
        if not ok:
            asked = "device='gpu' was asked for" if device == "gpu" else \
                "the points are on the GPU (device='auto' runs them there)"
            raise GPUUnavailableError(f"{asked} but no GPU can be used: {reason}")
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
