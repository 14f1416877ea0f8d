"""How many CPU threads an operator runs on, and how Numba's threads wait.

The rule (docs/decisions/cpu-threads.md): an operator runs on

    min(cores in the CPU affinity mask, the cgroup CPU quota (rounded down,
        at least 1), SKYJOIN_NUM_THREADS, OMP_NUM_THREADS, NUMBA_NUM_THREADS,
        the calling thread's Numba count (``numba.set_num_threads``),
        the calling thread's OpenMP limit (``threadpoolctl.threadpool_limits``))

threads, each term only where it is set.  :func:`pool_threads` is the part
fixed for the process (affinity, quota, environment); :func:`cpu_threads`
adds the calling thread's limits, and is what operators run with
(:func:`with_cpu_threads`).

Waiting.  Numba's "omp" threading layer runs on the OpenMP runtime, whose
idle threads spin before they sleep: GNU libgomp spins 300,000 times (one
to tens of milliseconds, by the CPU's pause instruction) after every
parallel region unless ``OMP_WAIT_POLICY`` says otherwise.  On a machine
shared with other work that spinning takes a core from the threads that
have work, and the skyline, made of many short regions, burnt about three
times its CPU time beside two busy processes.  Numba's pool therefore starts
with ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep as soon as they wait)
unless the user set the variable (``ACTIVE`` spins without end).
:func:`prepare_wait_policy` sets it when a kernel module loads, so that
whichever kernel runs first starts the pool that way, and
:func:`start_numba_threads` takes it back once the pool runs.  The runtime
reads the policy once, when it loads: a pool started before skyjoin's first
call (by other Numba code, or another library's use of the same OpenMP
runtime) keeps its own setting.

Costs: a call reads the affinity mask and at most two small cgroup files,
O(1); the first call starts Numba's pool (tens of milliseconds).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import inspect
import math
import os
import threading
from collections.abc import Mapping
from typing import Any, Callable

__all__ = ["ENV_VAR", "affinity_cpus", "cgroup_cpus", "env_limit", "pool_threads",
           "openmp_limit", "pool_started", "prepare_wait_policy", "start_numba_threads", "cpu_threads",
           "with_cpu_threads", "numba_threads", "LIMIT_VARS", "CGROUP_ROOT"]

#: The environment variable that caps skyjoin's CPU threads.
ENV_VAR = "SKYJOIN_NUM_THREADS"
#: Thread-count variables honoured, in the order their errors are reported.
LIMIT_VARS = (ENV_VAR, "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
CGROUP_ROOT = "/sys/fs/cgroup"

_lock = threading.Lock()
_started = False
_wait_set = False     # whether skyjoin set OMP_WAIT_POLICY (taken back once the pool runs)
_omp_max_threads: Callable[[], int] | None = None


def affinity_cpus() -> int:
    """Cores this process may run on: its affinity mask (``taskset``,
    ``docker --cpuset-cpus``), else ``os.cpu_count()``."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        return max(1, len(getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cgroup_cpus(root: str = CGROUP_ROOT) -> int | None:
    """CPUs the cgroup quota allows (``docker --cpus``, a Kubernetes CPU
    limit), rounded down and at least 1; None without a quota.

    cgroup v2: ``<root>/cpu.max`` holds "QUOTA PERIOD" or "max PERIOD".
    cgroup v1: ``<root>/cpu/cpu.cfs_quota_us`` (-1: none) over
    ``cpu.cfs_period_us``.  Rounded down, as a thread beyond the quota is
    throttled with the others at the end of every period.
    """
    v2 = _read(os.path.join(root, "cpu.max"))
    if v2 is not None:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max":
            quota, period = int(parts[0]), int(parts[1])
            if quota > 0 and period > 0:
                return max(1, math.floor(quota / period))
        return None
    for sub in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        q = _read(os.path.join(root, sub, "cpu.cfs_quota_us"))
        p = _read(os.path.join(root, sub, "cpu.cfs_period_us"))
        if q is not None and p is not None:
            quota, period = int(q), int(p)
            if quota > 0 and period > 0:
                return max(1, math.floor(quota / period))
            return None
    return None


def env_limit(environ: Mapping[str, str] | None = None) -> int | None:
    """The smallest thread count set by ``SKYJOIN_NUM_THREADS``,
    ``OMP_NUM_THREADS`` (its first, outermost level) or ``NUMBA_NUM_THREADS``;
    None where none is set.

    Raises ValueError naming the variable when a set value is not an integer >= 1.
    """
    env = os.environ if environ is None else environ
    out = None
    for var in LIMIT_VARS:
        raw = env.get(var, "").strip()
        if not raw:
            continue
        first = raw.split(",")[0].strip()
        try:
            n = int(first)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"{var} must be an integer >= 1 (a thread count), got {raw!r}")
        out = n if out is None else min(out, n)
    return out


def pool_threads(environ: Mapping[str, str] | None = None, root: str = CGROUP_ROOT) -> int:
    """The process-wide part of the rule: min(affinity, cgroup quota,
    environment limits), at least 1."""
    terms = [affinity_cpus(), cgroup_cpus(root), env_limit(environ)]
    return max(1, min(t for t in terms if t is not None))


def openmp_limit() -> int | None:
    """The calling thread's OpenMP thread limit (``omp_get_max_threads``) in
    the OpenMP runtime under Numba's "omp" layer: what
    ``threadpoolctl.threadpool_limits`` and ``OMP_NUM_THREADS`` set.  None
    for another layer, or where the runtime does not say.  O(1)."""
    global _omp_max_threads
    if _omp_max_threads is None:
        import numba

        fn: Callable[[], int] = lambda: 0   # noqa: E731  (no OpenMP runtime: no limit)
        if numba.threading_layer() == "omp":
            omppool = importlib.import_module("numba.np.ufunc.omppool")
            try:   # dlsym through the layer's library finds the runtime it links
                sym = ctypes.CDLL(omppool.__file__).omp_get_max_threads
                sym.restype, sym.argtypes = ctypes.c_int, []
                fn = sym
            except (OSError, AttributeError):
                pass
        _omp_max_threads = fn
    n = _omp_max_threads()
    return n if n >= 1 else None


def pool_started() -> bool:
    """Whether Numba's thread pool has started: its threading layer is
    loaded (``numba.threading_layer`` raises ValueError before).  O(1)."""
    import numba

    try:
        numba.threading_layer()
    except ValueError:
        return False
    return True


def prepare_wait_policy() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` where the user has not set it and
    Numba's threads have not started, so that whichever kernel starts them
    starts them sleeping when they wait; :func:`start_numba_threads` takes
    the variable back.  Called when a kernel module loads (before any of its
    kernels can run).  O(1)."""
    global _wait_set
    with _lock:
        if _started or _wait_set or "OMP_WAIT_POLICY" in os.environ:
            return
        if pool_started():
            return
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        _wait_set = True


def start_numba_threads() -> bool:
    """Start Numba's thread pool once, with threads that sleep when they wait
    (module docstring).  Returns whether this call started it (False:
    started before, by this function or by other Numba code).

    ``OMP_WAIT_POLICY=PASSIVE`` is set only until the runtime has loaded, and
    only where the user has not set the variable.  The pool's size stays
    Numba's (``NUMBA_NUM_THREADS``, fixed when Numba is imported); the rule
    caps the threads each call uses (:func:`cpu_threads`), and the pool's
    other threads sleep.
    """
    global _started, _wait_set
    if _started:
        return False
    prepare_wait_policy()
    with _lock:
        if _started:
            return False
        import numba

        started = not pool_started()
        try:
            numba.get_num_threads()   # launches the pool: the runtime reads the policy now
        finally:
            if _wait_set:
                os.environ.pop("OMP_WAIT_POLICY", None)
                _wait_set = False
            _started = True
        return started


def cpu_threads() -> int:
    """The threads an operator called from this thread runs on (the rule of
    the module docstring), at least 1.  Starts Numba's pool on first use."""
    import numba

    start_numba_threads()
    terms = [pool_threads(), numba.get_num_threads(), openmp_limit()]
    return max(1, min(t for t in terms if t is not None))


def with_cpu_threads(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for an operator's entry: its Numba code runs on
    :func:`cpu_threads` threads (the calling thread's count set for the call
    and restored after).  A generator function gets the count around each
    step, never around the caller's code between steps."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            n = cpu_threads()
            it = fn(*args, **kwargs)
            try:
                while True:
                    with numba_threads(n):
                        try:
                            item = next(it)
                        except StopIteration as stop:
                            return stop.value
                    yield item
            finally:
                it.close()

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with numba_threads(cpu_threads()):
            return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def numba_threads(n):
    """Numba's thread count for the calling thread (it is per thread), restored after."""
    if n is None:
        yield
        return
    import numba  # lazy: ``import skyjoin`` imports no Numba

    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(before)
