"""Phase timings: the seconds a block of code takes, added to a dict."""

from __future__ import annotations

import time
from contextlib import contextmanager

__all__ = ["phase"]


@contextmanager
def phase(timings, name):
    """Add the seconds spent in the block to ``timings[name]`` (if a dict)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
