"""The skyline operator: SkyAlign (Bøgh, Chester, Assent 2016) on GPUs and CPUs.

The public function is :func:`skyjoin.skyline.api.skyline`, re-exported as
``skyjoin.skyline`` by the top-level package (which binds the function over
this subpackage's name; see ``skyjoin/__init__.py``).  Nothing heavy is
imported here (no Numba kernels, no CuPy).
"""

from .api import skyline

__all__ = ["skyline"]
