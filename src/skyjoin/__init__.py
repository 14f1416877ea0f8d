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
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The operators are functions (``skyjoin.join``, ``skyjoin.self_join``,
# ``skyjoin.skyline``, ``skyjoin.dbscan``, ``skyjoin.DBSCAN``); the
# subpackages that implement them carry other names (``simjoin``,
# ``pareto``, ``cluster``), so an attribute of the package is never both a
# function and a module.  Every public name is served on first use by
# ``__getattr__``, so that ``import skyjoin`` imports nothing heavy, not even
# NumPy (the command line's start-up, and its Ctrl-C, rest on that).
if TYPE_CHECKING:   # their signatures, for type checkers; loaded on first use at run time
    from .pareto.api import skyline as skyline
    from .simjoin.api import join as join
    from .simjoin.api import self_join as self_join
    from .simjoin.api import self_join_chunks as self_join_chunks

# public name -> module that defines it (loaded on first access)
_EXPORTS = {
    "join": "skyjoin.simjoin.api",
    "self_join": "skyjoin.simjoin.api",
    "self_join_chunks": "skyjoin.simjoin.api",
    "skyline": "skyjoin.pareto.api",
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

__all__ = sorted(_EXPORTS) + ["__version__"]


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
