"""The public skyline operator: ``skyjoin.skyline``."""

from __future__ import annotations

import time

import numpy as np

from .._device import is_device_array, resolve_device
from .._validate import check_points

__all__ = ["skyline", "ALGORITHMS", "VARIANTS", "MAX_SKYALIGN_D"]

ALGORITHMS = ("auto", "skyalign", "bruteforce", "bnl", "sfs", "ggs")
VARIANTS = ("default", "nosync", "levelwise", "sync", "noquart", "padded")
MAX_SKYALIGN_D = 64          # masks are 64-bit words
_CPU_ONLY = ("bruteforce", "bnl", "sfs")


def _is_dataframe(X) -> bool:
    """Duck-typed pandas DataFrame check (pandas is not imported here)."""
    return hasattr(X, "columns") and hasattr(X, "iloc") and hasattr(X, "select_dtypes")


def check_sense(sense, d: int) -> np.ndarray:
    """Turn ``sense`` into a bool array, True where a column is maximised."""
    if sense is None:
        return np.zeros(d, dtype=bool)
    if isinstance(sense, str):
        s = sense.lower()
        if s not in ("min", "max"):
            raise ValueError(f"sense must be 'min', 'max' or a list of them, got {sense!r}")
        return np.full(d, s == "max")
    try:
        items = list(sense)
    except TypeError:
        raise TypeError(f"sense must be 'min', 'max' or a list of them, got {type(sense).__name__}")
    if len(items) != d:
        raise ValueError(f"sense has {len(items)} entries but the data has {d} columns")
    out = np.zeros(d, dtype=bool)
    for k, s in enumerate(items):
        if not isinstance(s, str) or s.lower() not in ("min", "max"):
            raise ValueError(f"sense[{k}] must be 'min' or 'max', got {s!r}")
        out[k] = s.lower() == "max"
    return out


def to_minimisation(X: np.ndarray, maximise: np.ndarray) -> np.ndarray:
    """Negate the maximised columns and turn -0.0 into +0.0 (a new array)."""
    Y = np.array(X, dtype=np.float64, order="C", copy=True)
    if maximise.any():
        Y[:, maximise] *= -1.0
    Y += 0.0                       # -0.0 + 0.0 == +0.0: equal values stay equal bitwise
    return Y


def distinct_first(Xm: np.ndarray, sky: np.ndarray) -> np.ndarray:
    """Keep the lowest index of each group of equal skyline points."""
    if sky.size < 2:
        return sky
    rows = Xm[sky]
    order = np.lexsort(rows.T[::-1])            # stable: equal rows keep index order
    srt = rows[order]
    first = np.ones(sky.size, dtype=bool)
    first[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    return np.sort(sky[order[first]])


def _frame_columns(df, min_cols, max_cols, sense):
    """Columns used for dominance and their sense, from min=/max= or all numeric."""
    def as_list(c, name):
        if c is None:
            return []
        if isinstance(c, str) or not hasattr(c, "__iter__"):
            return [c]
        return list(c)

    mins, maxs = as_list(min_cols, "min"), as_list(max_cols, "max")
    if mins or maxs:
        if sense is not None:
            raise ValueError("give either sense= or min=/max= for a DataFrame, not both")
        both = set(mins) & set(maxs)
        if both:
            raise ValueError(f"column(s) {sorted(map(str, both))} named in both min and max")
        for c in mins + maxs:
            if c not in df.columns:
                raise ValueError(f"column {c!r} is not in the DataFrame")
        cols = mins + maxs
        if len(set(cols)) != len(cols):
            raise ValueError("a column is named twice in min/max")
        maximise = np.array([False] * len(mins) + [True] * len(maxs))
        return cols, maximise
    cols = list(df.select_dtypes(include=[np.number, "bool"]).columns)
    if not cols:
        raise ValueError("the DataFrame has no numeric columns; name them with min=/max=")
    return cols, check_sense(sense, len(cols))


def skyline(X, sense=None, distinct: bool = False, device: str | None = "auto",
            algorithm: str = "auto", return_stats: bool = False, min=None, max=None,
            variant: str | None = None):
    """The skyline (Pareto set) of a point set.

    Point p dominates q iff p is no worse than q on every column and strictly
    better on at least one (smaller is better unless ``sense`` says "max").
    The skyline is the set of points that no point dominates.  Equal points
    never dominate each other, so every copy of a skyline point is kept
    unless ``distinct=True``.

    Parameters
    ----------
    X : array_like of shape (n, d), CuPy array, or pandas.DataFrame
        The points, any real dtype, no NaN or inf.  With a DataFrame, only the
        columns named in ``min``/``max`` take part in dominance (the other
        columns are ignored for dominance and returned unchanged); with
        neither, all numeric columns are minimised (or follow ``sense``).
    sense : "min", "max" or sequence of them, optional
        Preference per column (default: minimise every column).
    distinct : bool
        If True, keep only the lowest row index of each group of equal points.
    device : {"auto", "cpu", "gpu"} or None
        Where to compute (None: the ``SKYJOIN_DEVICE`` environment variable).
    algorithm : {"auto", "skyalign", "bruteforce", "bnl", "sfs", "ggs"}
        "auto" is SkyAlign (Bøgh, Chester, Assent 2016) for d <= 64, else SFS
        on the CPU and GGS on the GPU.  "bruteforce", "bnl" and "sfs" run on
        the CPU only; "ggs" (sort-based, Bøgh et al. 2013) on both.
    return_stats : bool
        Also return a dict of work counters (Definition 3: "dominance_tests",
        "mask_tests"), "prefilter_survivors" and per-phase "times" (s).
    min, max : column label or list of labels, optional
        DataFrame only: the columns to minimise / maximise.
    variant : {"default", "nosync", "levelwise", "sync", "noquart", "padded"}, optional
        SkyAlign variants for experiments (§6.2.3).  CPU: "levelwise" (the
        default: the paper's NoSync CPU port, §7.1, run as one pass per mask
        order with the lower cells repacked to their skyline points, so a
        point never scans dead points of lower cells; as fast as or faster
        than "nosync" in every case measured, at 1, 2 and 16 threads),
        "nosync" (the CPU port as written), "sync" (Algorithm 1 with its d
        rounds), "noquart" (no quartile masks).  GPU: "sync" (Algorithm 1),
        "nosync", "levelwise", "noquart", "padded" (median cells padded to
        whole warps; the GPU default, fastest on the H200 at d = 12; the paper
        finds it slower at high d, where "sync" may be better).

    Returns
    -------
    numpy.ndarray of int64, or pandas.DataFrame
        Sorted row indices of the skyline (a DataFrame input gives the
        skyline rows as a DataFrame).  With ``return_stats``, a tuple
        (result, stats).

    Raises
    ------
    ValueError
        NaN/inf values, a wrong shape, an unknown sense, algorithm, variant
        or device, a sense list of the wrong length, a column in both
        ``min`` and ``max``, ``min``/``max`` without a DataFrame.
    TypeError
        Non-numeric values.
    skyjoin.GPUUnavailableError
        ``device="gpu"`` without a usable GPU.

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
    """
    if not isinstance(algorithm, str) or algorithm.lower() not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    algorithm = algorithm.lower()
    if variant is not None and (not isinstance(variant, str) or variant.lower() not in VARIANTS):
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    variant = None if variant in (None, "default") else variant.lower()
    if variant is not None and algorithm not in ("auto", "skyalign"):
        raise ValueError(f"variant={variant!r} applies to algorithm='skyalign' only")
    if not isinstance(distinct, (bool, np.bool_)):
        raise TypeError(f"distinct must be a bool, got {type(distinct).__name__}")

    frame = None
    if _is_dataframe(X):
        frame = X
        cols, maximise = _frame_columns(frame, min, max, sense)
        X = frame[cols].to_numpy()
    elif min is not None or max is not None:
        raise TypeError("min=/max= name DataFrame columns; for arrays use sense=")

    if is_device_array(X):
        dev = resolve_device(device)
        if dev != "gpu":
            raise ValueError("X is a GPU array but device resolved to 'cpu'; pass device='gpu' or "
                             "copy it to the host")
        from . import gpu
        d = X.shape[1] if X.ndim == 2 else None
        if frame is None:
            maximise = check_sense(sense, d if d is not None else 0)
        sky, stats = gpu.skyline_gpu(X, maximise, distinct, algorithm, variant,
                                      count=return_stats)
        return (sky, stats) if return_stats else sky

    t0 = time.perf_counter()
    Xc = check_points(X, name="X")
    n, d = Xc.shape
    if frame is None:
        maximise = check_sense(sense, d)
    dev = resolve_device(device)
    if algorithm == "auto":
        algorithm = "skyalign" if d <= MAX_SKYALIGN_D else ("ggs" if dev == "gpu" else "sfs")
    if algorithm == "skyalign" and d > MAX_SKYALIGN_D:
        raise ValueError(f"SkyAlign supports up to {MAX_SKYALIGN_D} dimensions, got {d}; "
                         "use algorithm='sfs' or 'ggs'")
    if dev == "gpu" and algorithm in _CPU_ONLY:
        raise ValueError(f"algorithm={algorithm!r} runs on the CPU only; pass device='cpu'")

    if dev == "gpu":
        from . import gpu
        sky, stats = gpu.skyline_gpu(Xc, maximise, distinct, algorithm, variant,
                                      count=return_stats)
    else:
        # Nothing to negate: use the checked array itself.  The CPU algorithms
        # only read it and only compare values, under which -0.0 == +0.0, so
        # the copy that normalises -0.0 is not needed (it was a serial pass
        # over the whole input, a large part of the 16-thread time).
        Xm = to_minimisation(Xc, maximise) if maximise.any() else Xc
        sky, stats = _skyline_cpu(Xm, algorithm, variant)
        if distinct:
            sky = distinct_first(Xm, sky)
    stats["distinct"] = bool(distinct)
    stats["skyline_size"] = int(sky.size)
    stats.setdefault("times", {})["host_total"] = time.perf_counter() - t0
    if frame is not None:
        sky = frame.iloc[sky]
    return (sky, stats) if return_stats else sky


def _skyline_cpu(Xm: np.ndarray, algorithm: str, variant: str | None):
    """Dispatch to a CPU algorithm; Xm is float64 under minimisation."""
    n, d = Xm.shape
    if algorithm == "skyalign" and variant not in (None, "nosync", "levelwise", "sync", "noquart"):
        raise ValueError(f"variant {variant!r} is GPU-only; the CPU has nosync, levelwise, sync, "
                         "noquart")
    if n <= 1:
        return np.arange(n, dtype=np.int64), {"algorithm": algorithm, "device": "cpu", "n": n,
                                              "d": d, "dominance_tests": 0, "mask_tests": 0,
                                              "prefilter_survivors": n, "times": {}}
    if algorithm == "skyalign":
        from .cpu import VARIANTS as CPU_VARIANTS, skyalign_cpu

        v = variant or "levelwise"
        if v not in CPU_VARIANTS:
            raise ValueError(f"variant {v!r} is GPU-only; the CPU has {CPU_VARIANTS}")
        return skyalign_cpu(Xm, variant=v)
    from . import baselines

    if algorithm == "bruteforce":
        return baselines.bruteforce(Xm)
    if algorithm == "bnl":
        return baselines.bnl(Xm)
    if algorithm == "sfs":
        return baselines.sfs(Xm)
    if algorithm == "ggs":
        return baselines.ggs_cpu(Xm)
    raise ValueError(f"unknown algorithm {algorithm!r}")  # pragma: no cover
