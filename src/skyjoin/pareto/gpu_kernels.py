"""The skyline's CUDA kernels (``kernels/skyalign.cu``), compiled once per dimension.

Rule: one ``cupy.RawModule`` per (dimension d, device) holds every kernel
that the GPU skyline runs, the irregular ones (masks, SkyAlign, GGS) and
the regular steps of its host side (minimisation, the tau pre-filter,
column sorts, padded cells, repacking, row hashes): with the shared
primitives of the skyline's kit (``skyjoin._core.device_kernels``), a
first call compiles these two modules, not one CuPy routine per step and
dtype (docs/decisions/core-gpu-first-calls.md).  CuPy is imported only
through :func:`skyjoin._core.device.cupy`, lazily.
"""

from __future__ import annotations

import functools
import os

from .._core.device import cupy as _cupy

__all__ = ["skyline_kernels", "kernel_names", "mask_type", "ROW_HASH_SEED", "ROW_HASH_MUL",
           "ROW_HASH_MUL2"]

#: the constants of the row hash (``groups.row_hash``), which the kernel
#: source receives as macros of the same names: one definition for both
ROW_HASH_SEED = 0x9E3779B97F4A7C15
ROW_HASH_MUL = 0xBF58476D1CE4E5B9
ROW_HASH_MUL2 = 0x94D049BB133111EB

#: The kernels of skyalign.cu that are not templated on the dimension.
_PLAIN = ("minimise", "first_at", "padded_sizes", "padded_map", "split_level", "row_hash",
          "hash_probe")


def _kernel_source() -> str:
    """The CUDA source, read next to this module, after the row hash's macros."""
    path = os.path.join(os.path.dirname(__file__), "kernels", "skyalign.cu")
    with open(path) as fh:
        code = fh.read()
    macros = {"ROW_HASH_SEED": ROW_HASH_SEED, "ROW_HASH_MUL": ROW_HASH_MUL,
              "ROW_HASH_MUL2": ROW_HASH_MUL2}
    return "".join(f"#define {k} {v:#x}ull\n" for k, v in macros.items()) + code


def mask_type(d: int) -> str:
    """C++ mask word for d dimensions."""
    return "unsigned int" if d <= 32 else "unsigned long long"


def skyline_kernels(d: int) -> dict:
    """The kernels for dimension d on the current device, by short name
    ("masks", "skyalign", "ggs_block", "ggs_filter", "row_max", "tau_keep",
    "columns" and the plain ones of ``_PLAIN``)."""
    return _kernels(d, _cupy().cuda.runtime.getDevice())


@functools.lru_cache(maxsize=None)
def _kernels(d: int, device: int) -> dict:
    """Compile (once per d) the kernels for dimension d; load them on ``device``.

    CuPy loads a module's functions on the device that is current when they
    are fetched, so the cache is per device (one process may drive several
    GPUs, one per thread).
    """
    names = kernel_names(d)
    mod = _cupy().RawModule(code=_kernel_source(), options=("-std=c++17",),
                            name_expressions=list(names.values()))
    return {k: mod.get_function(v) for k, v in names.items()}


def kernel_names(d: int) -> dict:
    """The instance (NVRTC name expression) of each kernel for dimension d."""
    mt = mask_type(d)
    names = {"masks": f"median_quartile_masks<{d}, {mt}>", "skyalign": f"skyalign_kernel<{d}, {mt}>",
             "ggs_block": f"ggs_block<{d}>", "ggs_filter": f"ggs_filter<{d}>",
             "row_max": f"row_max<{d}>", "tau_keep": f"tau_keep<{d}>", "columns": f"columns<{d}>"}
    names.update({n: n for n in _PLAIN})
    return names
