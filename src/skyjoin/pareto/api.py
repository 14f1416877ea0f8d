"""The public skyline operator: ``skyjoin.skyline`` (check, condition, plan, run)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Hashable, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    import pandas

from .._core.device import is_device_array, resolve_device
from .._core.plans import report
from .columns import check_sense, frame_columns, is_dataframe, prepare_array, prepare_device
from .plan import ALGORITHMS, MAX_SKYALIGN_D, VARIANTS, check_algorithm, plan_skyline
from .run import run

__all__ = ["skyline", "ALGORITHMS", "VARIANTS", "MAX_SKYALIGN_D", "check_sense"]

#: a column preference ("min", "max", "diff", a synonym, or the builtin min / max),
#: one for every column or one per column
Sense = Union[str, Callable[..., Any], Sequence[Union[str, Callable[..., Any]]]]
#: DataFrame column labels: one label or a list of them
Labels = Union[Hashable, Sequence[Hashable]]


def skyline(X: ArrayLike | pandas.DataFrame, sense: Sense | None = None, distinct: bool = False,
            device: str | None = None, algorithm: str = "auto", return_stats: bool = False,
            min: Labels | None = None, max: Labels | None = None, variant: str | None = None,
            diff: Labels | None = None) -> np.ndarray | pandas.DataFrame | tuple[Any, dict]:
    """The skyline (Pareto set) of a point set.

    Point p dominates q iff p is no worse than q on every column and strictly
    better on at least one (smaller is better unless ``sense`` says "max").
    The skyline is the set of points that no point dominates.  Equal points
    never dominate each other, so every copy of a skyline point is kept
    unless ``distinct=True``.  With "diff" columns, points are compared only
    with the points of equal values in every diff column (the union of the
    skylines of those groups; paretoset's group-by).

    Values are compared exactly: integers as integers (int64 / uint64
    beyond +-2**53 too), datetime64 / timedelta64 as their integer values;
    see :mod:`skyjoin.pareto.columns` for the rule and its cost.

    Parameters
    ----------
    X : array_like of shape (n, d), CuPy array, or pandas.DataFrame
        The points: real numbers, bools (0 / 1), datetime64 or timedelta64;
        no NaN, NaT or inf.  With a DataFrame, the columns named in
        ``min`` / ``max`` / ``diff`` take part (the others are ignored for
        dominance and returned unchanged); with none named, ``sense`` gives
        one entry per column or per numeric column (numbers, bools, nullable
        Int / Float / boolean without NA, datetimes, timedeltas), and
        without ``sense`` every numeric column is minimised.  Non-numeric
        columns (strings, categories, objects) can only be "diff" columns.
    sense : str, callable or sequence of them, optional
        Preference per column (default: minimise every column): "min",
        "max" or "diff", or paretoset's synonyms "minimum", "maximum",
        "different" (any case), or the builtins ``min`` / ``max``.  One word
        applies to every column.
    distinct : bool
        If True, keep only the lowest row index of each group of equal points.
    device : {"auto", "cpu", "gpu"} or None
        Where to compute (None: the ``SKYJOIN_DEVICE`` environment variable,
        else "auto").
    algorithm : {"auto", "skyalign", "sort2d", "bruteforce", "bnl", "sfs", "ggs"}
        "auto" is "sort2d" for two columns on the CPU (unless a SkyAlign
        ``variant`` is given), else SkyAlign (Bøgh, Chester, Assent 2016)
        for d <= 64, else SFS on the CPU and GGS on the GPU.  "sort2d" (the
        2-D sort and scan of Kung, Luccio, Preparata 1975, NumPy only:
        nothing to compile), "bruteforce", "bnl" and "sfs" run on the CPU
        only; "ggs" (sort-based, Bøgh et al. 2013) on both.  (A diff
        grouping adds two dimensions: see :mod:`skyjoin.pareto.columns`.)
    return_stats : bool
        Also return a dict: "algorithm", "device", "n", "d",
        "skyline_size", "distinct", "prefilter_survivors" (rows left by the
        linear pre-filters), work counters and per-phase "times" (s).  The
        counters are the algorithm's own: SkyAlign's "dominance_tests" and
        "mask_tests" (Definition 3), the baselines' "dominance_tests"
        (GGS: None, not counted); "sort2d" compares no two rows, so both
        are None, and "tau_survivors" is what its first pre-filter kept.
    min, max, diff : column label or list of labels, optional
        DataFrame only: the columns to minimise / maximise / group by.
    variant : {"default", "nosync", "levelwise", "sync", "noquart", "padded"}, optional
        SkyAlign variants for experiments (§6.2.3).  CPU: "levelwise" (the
        default: the paper's NoSync CPU port, §7.1, run as one pass per mask
        order with the lower cells repacked to their skyline points, so a
        point never scans dead points of lower cells),
        "nosync" (the CPU port as written), "sync" (Algorithm 1 with its d
        rounds), "noquart" (no quartile masks).  GPU: "sync" (Algorithm 1),
        "nosync", "levelwise", "noquart", "padded" (median cells padded to
        whole warps; the GPU default; the paper finds it slower at high d,
        where "sync" may be better).  docs/decisions/skyline-plan.md gives
        the measurements behind both defaults.

    Returns
    -------
    numpy.ndarray of int64, or pandas.DataFrame
        Sorted row indices of the skyline (a DataFrame input gives the
        skyline rows as a DataFrame).  With ``return_stats``, a tuple
        (result, stats).

    Raises
    ------
    ValueError
        NaN/NaT/inf values, a wrong shape, an unknown sense, algorithm,
        variant or device, a sense list of the wrong length, a column in both
        ``min`` and ``max``, a label naming several DataFrame columns.
    TypeError
        Non-numeric values (outside diff columns), ``min`` / ``max`` /
        ``diff`` without a DataFrame.
    skyjoin.GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    skyjoin.DeviceMemoryError
        A ``MemoryError``: on the GPU, the points cannot fit the device's
        free memory (checked before they are copied, against their float64
        copy and the bytes a point the skyline certainly needs:
        ``skyjoin._core.device_memory``), or CuPy ran out of device memory
        during the skyline.  The message gives the bytes and the ways out
        (``skyjoin.distributed.skyline`` over several GPUs, ``device="cpu"``).

    See Also
    --------
    paretoset : the same skyline as paretoset's boolean mask.
    skyjoin.distributed.skyline : the same skyline on a Dask cluster.

    Notes
    -----
    One pass through four steps: the points are checked and conditioned
    (``skyjoin.pareto.columns``), the device is resolved once, the
    algorithm and the SkyAlign variant are chosen by one rule
    (``skyjoin.pareto.plan.plan_skyline``), and the plan runs through one
    entry with one device memory check (``skyjoin.pareto.run.run``).  The
    plan is reported (``skyjoin._core.plans.report``): ``skyjoin -v`` logs
    it, and a ``recording()`` block receives it.

    Two columns on the CPU ("sort2d", :mod:`skyjoin.pareto.sort2d`): two
    linear pre-filters, then a sort of the m rows left by x and one scan of
    running minima of y: O(n + m log m), memory O(n), no compiled kernel.

    SkyAlign (Bøgh, Chester, Assent 2016) drops the points that the
    threshold tau (the least of the points' largest values) rules out,
    places every remaining point in a static grid of median and quartile
    cells (§4.2), and sorts the points by their median cell mask
    ``<|M|, M>`` (Algorithm 1, §5.1), so that a point is compared only
    with points before it; the cell masks refute most dominance tests
    without reading the points (§4.2.3).  Cost: O(n d) for the
    pre-filter and the masks plus O(n log n) to sort; in the worst case
    (every point in the skyline) O(n**2) mask tests and dominance tests
    of O(d) each, far fewer where the masks refute them.  Memory: O(n d).

    Equal points are grouped once, O(m d) expected for m candidates
    (``skyjoin.pareto.groups``), so k copies of a point cost O(k), not
    O(k**2).  Diff columns add a sort, O(n log n), and two dimensions
    (``skyjoin.pareto.columns``).

    References
    ----------
    K. S. Bøgh, S. Chester, I. Assent, "SkyAlign: a portable, work-efficient
    skyline algorithm for multicore and GPU architectures", The VLDB Journal,
    2016: §4.2 (the static grid and its masks), §5 (Algorithm 1 and
    its GPU-friendly initialisation, §5.1), §6.2.3 (the variants), §7.1 (the
    CPU port).

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> X = np.array([[1, 3], [2, 2], [3, 1], [3, 3], [2, 2]])
    >>> sj.skyline(X)
    array([0, 1, 2, 4])
    >>> sj.skyline(X, distinct=True)
    array([0, 1, 2])
    >>> sj.skyline(X, sense=["min", "max"])
    array([0])
    >>> sj.skyline(X, sense=["min", "diff"])     # the best x of each y
    array([0, 1, 2, 4])
    """
    algorithm, variant = check_algorithm(algorithm, variant)
    if not isinstance(distinct, (bool, np.bool_)):
        raise TypeError(f"distinct must be a bool, got {type(distinct).__name__}")

    t0 = time.perf_counter()
    frame, grouped_on_gpu, residence = None, None, "host"
    if is_dataframe(X):                                 # check and condition
        frame = X
        Xc, maximise, n_diff = frame_columns(frame, sense, min, max, diff)
    elif min is not None or max is not None or diff is not None:
        raise TypeError("min=/max=/diff= name DataFrame columns; for arrays use sense=")
    elif is_device_array(X):
        Xc, residence = X, "device"
        maximise, grouped_on_gpu = prepare_device(X, sense)
        n_diff = int(grouped_on_gpu.sum())
    else:
        Xc, maximise, n_diff = prepare_array(X, sense)
    n, d = Xc.shape
    if residence == "device" and n_diff:            # the group number's two columns
        d = d - n_diff + 2
    plan = report(plan_skyline(n, d, resolve_device(device), algorithm, variant, distinct,
                               residence=residence, diff_columns=n_diff), "skyline")
    sky, stats = run(plan, Xc, maximise, diff=grouped_on_gpu, count=return_stats)
    stats["distinct"] = bool(distinct)
    stats["skyline_size"] = int(sky.size)
    stats.setdefault("times", {})["host_total"] = time.perf_counter() - t0
    if frame is not None:
        sky = frame.iloc[sky]
    return (sky, stats) if return_stats else sky
