"""Objects one call shares with the worker threads of this process, by the call's token.

The in-process GPU path (:mod:`.in_process_gpu`, :mod:`.gpu_slices`) hands
its workers the caller's array, the GPU slices of it, the routed parts and
the shared outputs through this registry instead of through Dask (which
would copy them).  Everything a call published is dropped when the call
ends (:func:`drop`); device arrays then go back to CuPy's pools.
"""

from __future__ import annotations

import threading

__all__ = ["publish", "lookup", "require", "take", "drop", "tokens"]

_REGISTRY: dict = {}
_LOCK = threading.Lock()


def publish(token: str, **objs) -> None:
    """Share objects of one call with its worker threads."""
    with _LOCK:
        _REGISTRY.setdefault(token, {}).update(objs)


def lookup(token: str, name: str, default=None):
    """A shared object of the call (``default`` when absent)."""
    with _LOCK:
        return _REGISTRY.get(token, {}).get(name, default)


def require(token: str, name: str, what: str | None = None):
    """A shared object a worker needs: RuntimeError naming it (``what``, default
    ``name``) when the call already dropped it (it ended or failed)."""
    obj = lookup(token, name)
    if obj is None:
        what = what or name
        verb = "are" if what.endswith("s") else "is"
        raise RuntimeError(f"{token}: the shared {what} {verb} gone (the call ended or failed)")
    return obj


def take(token: str, name: str):
    """Remove and return a shared object (None when absent)."""
    with _LOCK:
        return _REGISTRY.get(token, {}).pop(name, None)


def drop(token: str) -> None:
    """Forget everything one call shared (its engines free their GPU memory)."""
    with _LOCK:
        _REGISTRY.pop(token, None)


def tokens() -> list:
    """The tokens of the calls that hold shared objects now (none once every call ended)."""
    with _LOCK:
        return sorted(_REGISTRY)
