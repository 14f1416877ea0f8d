"""Run-time switches read from the environment in one place.

``SKYJOIN_NUMBA_CACHE``: "0" disables Numba's on-disk cache of compiled
functions (default on, so that a second process skips compilation).

``SKYJOIN_NO_SIMD``: "1" makes the CPU join use its portable scalar code
instead of the explicit vector instructions of ``skyjoin.simjoin._simd``.

``SKYJOIN_HUGE_PAGES``: "1" or "0" puts large host arrays on transparent
huge pages or not, overriding the rule of ``_core.memory.huge_pages_pay``
(default "auto": the rule).

``NUMBA_CACHE`` is served on first access (a module ``__getattr__``): every
Numba kernel module reads it for its ``cache=`` argument, so reading it
also installs the compile listener of :mod:`skyjoin._core.compiling`
before any kernel compiles, while ``import skyjoin`` imports no Numba.  It
also sets ``OMP_WAIT_POLICY=PASSIVE`` until Numba's threads start, where the
user has not set it (:mod:`skyjoin._core.thread_count` says why).
"""

import os

__all__ = ["NO_SIMD", "HUGE_PAGES", "numba_cache_enabled"]   # and NUMBA_CACHE, served by __getattr__

_NUMBA_CACHE = os.environ.get("SKYJOIN_NUMBA_CACHE", "1") not in ("0", "false", "no", "")

NO_SIMD = os.environ.get("SKYJOIN_NO_SIMD", "0") not in ("0", "false", "no", "")

HUGE_PAGES = os.environ.get("SKYJOIN_HUGE_PAGES", "auto").strip().lower() or "auto"


def numba_cache_enabled() -> bool:
    """``NUMBA_CACHE`` without installing anything (for code that imports no Numba)."""
    return _NUMBA_CACHE


def __getattr__(name: str):
    if name == "NUMBA_CACHE":
        from .compiling import install
        from .thread_count import prepare_wait_policy
        install()
        prepare_wait_policy()   # before any kernel can start Numba's threads
        return _NUMBA_CACHE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
