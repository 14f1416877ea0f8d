"""The skyline operator: SkyAlign (Bøgh, Chester, Assent 2016) on GPUs and CPUs.

The public function is :func:`skyjoin.pareto.api.skyline`, re-exported as
``skyjoin.skyline`` by the top-level package (the subpackage is named
``pareto`` so that the name ``skyline`` is only ever the function).  Nothing heavy is
imported here (no Numba kernels, no CuPy).
"""

from .api import skyline

__all__ = ["skyline"]
