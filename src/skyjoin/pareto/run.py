"""The skyline's one run entry: a plan and conditioned points in, (indices, stats) out.

``skyjoin.skyline`` checks and conditions the points, resolves the device
and builds the plan (:func:`skyjoin.pareto.plan.plan_skyline`) once; then
:func:`run` executes that plan and decides nothing again.  On the GPU it
makes the one device memory check (``check_skyline_fits``, before the
points are copied) and runs the engine inside the one handler that turns
CuPy's out-of-memory error into :class:`skyjoin.DeviceMemoryError`
(``oom_as_error``), for host and device input alike.  The Numba engines
and CuPy are imported here only when a plan needs them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core.device import cupy
from .._core.device_memory import SKYLINE_WAYS_OUT, check_skyline_fits, oom_as_error
from .._core.thread_count import with_cpu_threads
from .plan import SkylinePlan
from .sort2d import skyline_2d

__all__ = ["run", "run_cpu", "to_minimisation", "distinct_first"]


def to_minimisation(X: np.ndarray, maximise: np.ndarray) -> np.ndarray:
    """Negate the maximised columns and turn -0.0 into +0.0 (a new array).  O(n d)."""
    Y = np.array(X, dtype=np.float64, order="C", copy=True)
    if maximise.any():
        Y[:, maximise] *= -1.0
    Y += 0.0                       # -0.0 + 0.0 == +0.0: equal values stay equal bitwise
    return Y


def distinct_first(Xm: np.ndarray, sky: np.ndarray) -> np.ndarray:
    """Keep the lowest index of each group of equal skyline points.  O(s d log s)
    for s skyline points."""
    if sky.size < 2:
        return sky
    rows = Xm[sky]
    order = np.lexsort(rows.T[::-1])            # stable: equal rows keep index order
    srt = rows[order]
    first = np.ones(sky.size, dtype=bool)
    first[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    return np.sort(sky[order[first]])


def run(plan: SkylinePlan, X, maximise: np.ndarray, diff: np.ndarray | None = None,
        count: bool = False) -> tuple[Any, dict]:
    """Run ``plan`` on conditioned points.

    Parameters
    ----------
    plan : SkylinePlan
        Resolved: its device is "cpu" or "gpu".
    X : numpy.ndarray or CuPy array
        Host input: the float64 C-contiguous matrix of
        ``columns.prepare_array`` / ``frame_columns`` (diff columns already
        grouped).  Device input (``plan.residence == "device"``): the
        user's CuPy array as given.
    maximise : numpy.ndarray of bool
        One flag per column of X.
    diff : numpy.ndarray of bool, optional
        Device input with diff columns only: which columns of X to group
        by, on the GPU (``gpu.group_on_device``).
    count : bool
        Whether the GPU engine counts its tests (the CPU ones always do).

    Returns
    -------
    (indices, stats)
        Sorted int64 row indices (a CuPy array for device input) and the
        engine's stats.

    Raises
    ------
    skyjoin.DeviceMemoryError
        GPU plans: the points cannot fit the free device memory (checked
        before they are copied), or CuPy ran out of memory during the run.
    """
    if plan.device == "cpu":
        # Nothing to negate: use the checked array itself.  The CPU algorithms
        # only read it and only compare values, under which -0.0 == +0.0, so
        # the copy that normalises -0.0 is not needed.
        return run_cpu(to_minimisation(X, maximise) if maximise.any() else X, plan)
    from . import gpu

    cp = cupy()
    check_skyline_fits(cp, X)
    with oom_as_error(cp, "GPU skyline", SKYLINE_WAYS_OUT):
        if diff is not None and diff.any():
            X, maximise = gpu.group_on_device(X, maximise, diff)
        return gpu.skyline_gpu(X, maximise, plan, count=count)


def run_cpu(Xm: np.ndarray, plan: SkylinePlan) -> tuple[np.ndarray, dict]:
    """Run a CPU plan; Xm is float64 under minimisation.

    Sort2d, SkyAlign, SFS and GGS group equal points themselves (and keep
    the lowest index of each group for ``distinct``); brute force and BNL
    return every copy and :func:`distinct_first` reduces them, O(s log s)
    for s skyline points.  Sort2d is NumPy alone (no Numba, no threads to
    set); the others run on ``cpu_threads()`` threads."""
    if plan.algorithm == "sort2d":
        return skyline_2d(Xm, distinct=plan.distinct)
    return run_numba(Xm, plan)


@with_cpu_threads
def run_numba(Xm: np.ndarray, plan: SkylinePlan) -> tuple[np.ndarray, dict]:
    """:func:`run_cpu` for the Numba algorithms (every one but sort2d)."""
    n, d = Xm.shape
    algorithm, distinct = plan.algorithm, plan.distinct
    # the Numba engines load on first use: ``import skyjoin`` binds this module
    from . import baselines
    from .cpu import skyalign_cpu

    if n <= 1:
        return np.arange(n, dtype=np.int64), {"algorithm": algorithm, "device": "cpu", "n": n,
                                              "d": d, "dominance_tests": 0, "mask_tests": 0,
                                              "prefilter_survivors": n, "times": {}}
    if algorithm == "skyalign":
        return skyalign_cpu(Xm, variant=plan.variant, distinct=distinct)  # type: ignore[arg-type]
    if algorithm == "sfs":
        return baselines.sfs(Xm, distinct=distinct)
    if algorithm == "ggs":
        return baselines.ggs_cpu(Xm, distinct=distinct)
    engine = baselines.bruteforce if algorithm == "bruteforce" else baselines.bnl
    sky, stats = engine(Xm)
    return (distinct_first(Xm, sky) if distinct else sky), stats
