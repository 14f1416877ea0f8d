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

# ``join`` and ``skyline`` are both public functions and the names of the
# subpackages that implement them.  Importing a subpackage binds the module as
# the attribute ``skyjoin.join`` / ``skyjoin.skyline``; importing them here,
# first, and then binding the functions over them keeps the functions for
# good.  Both ``api`` modules import only NumPy-level code (engines load on
# first use).
from .join.api import join, self_join, self_join_chunks  # noqa: E402
from .skyline.api import skyline  # noqa: E402

# ``dbscan`` is a public function and the subpackage that implements it.  The
# package (whose ``__init__`` imports nothing) is loaded now, so that importing
# its modules later never binds it over the function; the function itself,
# which needs scikit-learn, is served lazily by ``__getattr__``.
from . import dbscan as _dbscan_package  # noqa: E402,F401

globals().pop("dbscan", None)

# public name -> module that defines it (loaded on first access)
_EXPORTS = {
    "NeighborTable": "skyjoin.join.result",
    "PairChunk": "skyjoin.join.result",
    "PairStream": "skyjoin.join.result",
    "build_grid": "skyjoin.index.grid",
    "Grid": "skyjoin.index.grid",
    "DBSCAN": "skyjoin.dbscan.estimator",
    "dbscan": "skyjoin.dbscan.estimator",
    "dbscan_sweep": "skyjoin.dbscan.sweep",
    "dbscan_model": "skyjoin.dbscan.response_time_model",
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
    "paretoset": "skyjoin.skyline.compat",
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
