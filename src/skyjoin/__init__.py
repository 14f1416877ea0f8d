"""skyjoin: distance similarity join, DBSCAN and skyline on GPUs and CPUs.

The public API is re-exported here and loaded lazily, so that
``import skyjoin`` is fast and imports neither Numba-compiled code nor CuPy.

>>> import numpy as np, skyjoin as sj
>>> X = np.random.default_rng(0).uniform(0, 10, (1000, 2))
>>> nt = sj.self_join(X, eps=0.5)            # CSR NeighborTable
>>> labels = sj.DBSCAN(eps=0.5, min_samples=5).fit(X).labels_
>>> front = sj.skyline(X)                    # sorted row indices
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# The operators are functions (``skyjoin.join``, ``skyjoin.self_join``,
# ``skyjoin.skyline``, ``skyjoin.dbscan``, ``skyjoin.DBSCAN``); the
# subpackages that implement them carry other names (``simjoin``,
# ``pareto``, ``cluster``), so an attribute of the package is never both a
# function and a module.  The join's and the skyline's ``api`` modules import
# only NumPy-level code (engines load on first use) and are bound now, for
# type checkers; the rest is served lazily by ``__getattr__``.
from .simjoin.api import join, self_join, self_join_chunks  # noqa: E402
from .pareto.api import skyline  # noqa: E402

# public name -> module that defines it (loaded on first access)
_EXPORTS = {
    "NeighborTable": "skyjoin.simjoin.result",
    "PairChunk": "skyjoin.simjoin.result",
    "PairStream": "skyjoin.simjoin.result",
    "build_grid": "skyjoin.index.grid",
    "Grid": "skyjoin.index.grid",
    "DBSCAN": "skyjoin.cluster.estimator",
    "dbscan": "skyjoin.cluster.estimator",
    "dbscan_sweep": "skyjoin.cluster.sweep",
    "dbscan_model": "skyjoin.cluster.response_time_model",
    "gpu_available": "skyjoin._core.device",
    "GPUUnavailableError": "skyjoin.errors",
    "DeviceMemoryError": "skyjoin.errors",
    "ResultTooLargeError": "skyjoin.errors",
    "InvalidParameterError": "skyjoin.errors",
    "ColumnError": "skyjoin.errors",
    "NonNumericColumnError": "skyjoin.errors",
    "DroppedIndexColumn": "skyjoin.errors",
    "datasets": "skyjoin.datasets",
    "io": "skyjoin.io",
    "paretoset": "skyjoin.pareto.compat",
}

__all__ = sorted(list(_EXPORTS) + ["join", "self_join", "self_join_chunks", "skyline"]) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'skyjoin' has no attribute {name!r}")
    mod = importlib.import_module(module)
    value = mod if module.endswith("." + name) else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
