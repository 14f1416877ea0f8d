"""Numba compilation, watched: the one-time notice and the compile record.

Numba compiles a kernel on its first call with new argument types unless
its on-disk cache (``cache=True``, switched by ``SKYJOIN_NUMBA_CACHE``)
already holds it; a cache hit compiles nothing.  A listener on Numba's
``numba:compile`` event, which fires on real compiles only, does three
things:

* the **notice**: when a skyjoin kernel starts to compile and the
  operator being called is expected to compile for about a second or
  more, one line "compiling kernels, one time, about N s" goes to the
  ``skyjoin.compile`` logger at WARNING level, at most once per process
  (Python prints it on standard error when logging is not configured; the
  command line prints it there itself).  Silence it with
  ``logging.getLogger("skyjoin.compile").setLevel(logging.ERROR)``.
  :func:`expect` widens N to several operators called in a row.
* the **pause of the cyclic garbage collector** while a kernel called
  from Python compiles (callees included): a compile makes many
  long-lived objects, which set off full collections that walk every
  object of the process (Numba, LLVM, SciPy included); the collector is
  switched back on when the compile ends, if it was on.  Numba compiles
  one kernel at a time per process, under its compile lock.
* the **record**: inside :func:`record`, every compile (kernel, argument
  types, CPU seconds, nesting depth) is appended to a list; the
  ``skyjoin warmup`` command and ``scripts/compile-times`` read it.

The operator is the outermost frame of a skyjoin operator package
(``skyjoin.simjoin``, ``skyjoin.cluster``, ``skyjoin.cluster.sweep``,
``skyjoin.pareto``, ``skyjoin.datasets``) on the compiling thread's stack
(a kernel run from a pool thread: the kernel's own package); N is that
operator's first-call compile time on the quiet reference machine, times
:func:`busy_factor` (the load over the cores, at least 1), kept in ``compile_estimates.json`` beside this module (written by
``scripts/compile-times --write-estimates``;
docs/decisions/core-compile-time.md).

:func:`install` registers the listener, once per process; the Numba
kernel modules call it through ``skyjoin._core.config.NUMBA_CACHE``, so
that it is in place before any kernel compiles.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from .thread_count import affinity_cpus

__all__ = ["CompileEvent", "install", "record", "expect", "when_compiling", "estimate_s",
           "operator_of", "compile_wall", "busy_factor", "NOTICE_MIN_S"]

log = logging.getLogger("skyjoin.compile")

#: operators expected to compile for less than this many seconds pass silently
NOTICE_MIN_S = 1.0

_ESTIMATES_FILE = os.path.join(os.path.dirname(__file__), "compile_estimates.json")
_OPERATORS = ("skyjoin.cluster.sweep", "skyjoin.cluster", "skyjoin.simjoin", "skyjoin.pareto",
              "skyjoin.datasets", "skyjoin.index")


@dataclass(frozen=True)
class CompileEvent:
    """One compile of one kernel for one signature.

    ``seconds`` is the compiling thread's CPU time, callees included, and
    ``wall`` the wall time (other threads that call a kernel wait for the
    compile); ``depth`` is 0 for a kernel called from Python, more for a
    kernel that another one's compile pulled in (its time is inside its
    caller's)."""

    kernel: str
    signature: str
    seconds: float
    wall: float
    depth: int


_lock = threading.Lock()
_installed = False
_noticed = False
_recorders: list[list[CompileEvent]] = []
_local = threading.local()
_estimates: dict[str, float] | None = None
_expected: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
_hooks: list[list] = []


def estimate_s(operator: str) -> float:
    """Expected first-call compile seconds of ``operator`` (a package name
    of :data:`_OPERATORS`, or a command's own figure: "skyjoin.cli.demo");
    the largest known figure for an unknown one.

    Reads ``compile_estimates.json`` once (0 when it is missing)."""
    global _estimates
    if _estimates is None:
        try:
            with open(_ESTIMATES_FILE) as f:
                _estimates = {str(k): float(v) for k, v in json.load(f).items()}
        except (OSError, ValueError):
            _estimates = {}
    if operator in _estimates:
        return _estimates[operator]
    return max(_estimates.values(), default=0.0)


def _package_of(module: str) -> str | None:
    for op in _OPERATORS:
        if module == op or module.startswith(op + "."):
            return op
    return None


def operator_of(kernel_module: str, frame=None) -> str | None:
    """The operator a compile belongs to: the package of the outermost
    operator frame on the stack above ``frame`` (default: the caller's),
    else the package of the kernel's module ``kernel_module``."""
    found = None
    f = frame if frame is not None else sys._getframe(1)
    while f is not None:
        op = _package_of(f.f_globals.get("__name__", ""))
        if op is not None:
            found = op
        f = f.f_back
    return found if found is not None else _package_of(kernel_module)


def _notice(kernel_module: str) -> None:
    """Log the one-time notice if the operator is expected to compile long."""
    global _noticed
    with _lock:
        if _noticed:
            return
        if _expected:
            here, alongside = _expected[-1]
            seconds = max(sum(estimate_s(op) for op in here),
                          sum(estimate_s(op) for op in alongside))
        else:
            op = operator_of(kernel_module)
            seconds = estimate_s(op) if op is not None else 0.0
        busy = busy_factor()
        seconds *= busy
        if seconds < NOTICE_MIN_S:
            return
        _noticed = True
    log.warning("compiling kernels, one time, about %d s%s (kept in Numba's cache for later "
                "runs; 'skyjoin warmup' compiles them all ahead)", max(1, round(seconds)),
                " on this busy machine" if busy >= 1.25 else "")


def busy_factor() -> float:
    """How many times longer than on a quiet machine a compile takes now:
    the 1-minute load average over the cores this process may use, at
    least 1 (1 where the load cannot be read).  Numba compiles on one
    thread, which shares the cores with every runnable process; the
    estimates were taken on a quiet machine.  O(1)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return 1.0
    return max(1.0, load / affinity_cpus())


def _on_start(event) -> None:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    disp = event.data["dispatcher"]
    module = getattr(disp.py_func, "__module__", "") or ""
    if not stack and _hooks:
        with _lock:
            due = [fn for hook in _hooks for fn in hook]
            for hook in _hooks:
                hook.clear()
        for fn in due:
            fn()
    if not stack and not _noticed and module.startswith("skyjoin."):
        _notice(module)
    if not stack:
        _local.gc_was_on = gc.isenabled()
        gc.disable()
    stack.append((f"{module}.{disp.py_func.__qualname__}", str(event.data["args"]),
                  time.thread_time(), time.perf_counter()))


def _on_end(event) -> None:
    stack = getattr(_local, "stack", None)
    if not stack:
        return
    kernel, signature, t0, w0 = stack.pop()
    if not stack and getattr(_local, "gc_was_on", False):
        gc.enable()
    if _recorders:
        ev = CompileEvent(kernel, signature, time.thread_time() - t0, time.perf_counter() - w0,
                          len(stack))
        with _lock:
            for r in _recorders:
                r.append(ev)


def install() -> None:
    """Register the compile listener with Numba (once per process; cheap
    after the first call)."""
    global _installed
    if _installed:
        return
    with _lock:
        if _installed:
            return
        import numba.core.event as nbev

        class _Listener(nbev.Listener):
            def on_start(self, event):
                _on_start(event)

            def on_end(self, event):
                _on_end(event)

        nbev.register("numba:compile", _Listener())
        _installed = True


@contextmanager
def expect(operators: tuple[str, ...], alongside: tuple[str, ...] = ()) -> Iterator[None]:
    """Inside the block, a notice announces the compile time of all of
    ``operators`` (package names, as :func:`estimate_s` takes), not only
    the current one's: for a command that calls several operators in a
    row, so that its one notice covers them all.  ``alongside``: operators
    that another process compiles at the same time (the notice gives the
    longer of the two sums)."""
    install()
    with _lock:
        _expected.append((tuple(operators), tuple(alongside)))
    try:
        yield
    finally:
        with _lock:
            _expected.pop()


@contextmanager
def when_compiling(fn) -> Iterator[None]:
    """Call ``fn()`` once, at the first compile that starts inside the
    block (before its notice), if one does: work that is worth doing only
    when kernels are not in the cache."""
    install()
    hook = [fn]
    with _lock:
        _hooks.append(hook)
    try:
        yield
    finally:
        with _lock:
            _hooks.remove(hook)


@contextmanager
def record() -> Iterator[list[CompileEvent]]:
    """Collect the compiles that happen inside the block (any thread).

    Yields the list the events are appended to, in the order they end (a
    callee before its caller)."""
    install()
    events: list[CompileEvent] = []
    with _lock:
        _recorders.append(events)
    try:
        yield events
    finally:
        with _lock:
            _recorders.remove(events)


def compile_wall(events: list[CompileEvent]) -> float:
    """Wall seconds spent compiling kernels called from Python (depth 0) in
    ``events``: the part of a first call's time that later calls skip."""
    return sum(e.wall for e in events if e.depth == 0)
