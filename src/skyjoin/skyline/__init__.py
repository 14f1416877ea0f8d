"""The skyline operator: SkyAlign (Bøgh, Chester, Assent 2016) on GPUs and CPUs.

``skyjoin.skyline`` is both this subpackage and the public function
(:func:`skyjoin.skyline.api.skyline`).  Once a submodule such as
``skyjoin.skyline.cli`` has been imported, Python binds the attribute
``skyjoin.skyline`` to this package, so the package itself is made callable
and forwards to the function: ``skyjoin.skyline(X, ...)`` works either way.
Nothing heavy is imported here (no Numba kernels, no CuPy).
"""

from __future__ import annotations

import sys
import types

__all__ = ["skyline"]


def skyline(*args, **kwargs):
    """Forward to :func:`skyjoin.skyline.api.skyline` (imported on first call)."""
    from .api import skyline as _skyline

    return _skyline(*args, **kwargs)


class _CallableModule(types.ModuleType):
    """This package, callable as the skyline function."""

    def __call__(self, *args, **kwargs):
        return skyline(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
