"""paretoset's interface over skyjoin's skyline: ``skyjoin.paretoset``.

A drop-in for ``paretoset.paretoset`` (tommyod/paretoset 1.2.5): the same
arguments, the same boolean mask, the same handling of DataFrames (``sense``
covers every column; non-numeric columns only as "diff") and of
``distinct`` (True, the default there: only the first row of each group of
equal Pareto-optimal rows).  The work is :func:`skyjoin.skyline`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    import pandas

from .._core.device import resolve_device
from .._core.plans import report
from .api import Sense
from .columns import frame_columns, is_dataframe, prepare_array
from .plan import plan_skyline
from .run import run

__all__ = ["paretoset"]


def paretoset(costs: ArrayLike | pandas.DataFrame, sense: Sense | None = None, distinct: bool = True,
              use_numba: bool = True, *, device: str | None = None) -> np.ndarray:
    """Boolean mask of the Pareto set (skyline) of ``costs``, as paretoset's.

    Parameters
    ----------
    costs : array_like of shape (n, d) or (n,), or pandas.DataFrame
        The observations; a 1-D array is one objective.  For a DataFrame,
        ``sense`` has one entry per column, and columns that are not numbers
        (strings, categories, objects) must be "diff" columns.  No NaN, NaT
        or inf (paretoset leaves NaN to the caller; skyjoin refuses it).
    sense : sequence of str or callables, optional
        Per column "min" (default), "max" or "diff", or a synonym
        ("minimum", "maximum", "different", any case, the builtins ``min``
        and ``max``).  "diff" compares rows only within groups of equal
        values in the diff columns (a group-by).
    distinct : bool
        True: of each group of equal Pareto-optimal rows only the first
        (lowest position) is marked.  False: every copy is marked.
    use_numba : bool
        Accepted for compatibility and ignored (skyjoin always compiles).
    device : {"auto", "cpu", "gpu"} or None
        As :func:`skyjoin.skyline` (keyword only; not in paretoset).

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        True for the observations in the Pareto set.

    Raises
    ------
    TypeError
        Object-dtype arrays or non-numeric min / max columns (as paretoset).
    ValueError
        A ``sense`` of the wrong length or with an unknown word, NaN / NaT /
        inf values.

    See Also
    --------
    skyjoin.skyline : the sorted row indices, DataFrames in and out.

    Notes
    -----
    The dominance rule of :func:`skyjoin.skyline` (minimisation unless
    ``sense`` says otherwise; equal rows never dominate each other), and
    its route: the points checked and conditioned once, the device
    resolved once, one plan, one run (``skyjoin.pareto.run.run``).
    Cost: that of :func:`skyjoin.skyline` plus O(n) for the mask (and the
    grouping of :mod:`skyjoin.pareto.columns` with diff columns).

    References
    ----------
    K. S. Bøgh, S. Chester, I. Assent, "SkyAlign: a portable, work-efficient
    skyline algorithm for multicore and GPU architectures", The VLDB Journal,
    2016, §5.

    Examples
    --------
    >>> import numpy as np, skyjoin as sj
    >>> costs = np.array([[2, 0], [1, 1], [0, 2], [3, 3]])
    >>> sj.paretoset(costs)
    array([ True,  True,  True, False])
    >>> sj.paretoset(costs, sense=["min", "max"])
    array([False, False,  True,  True])
    >>> sj.paretoset([0, 0], distinct=True)
    array([ True, False])
    >>> sj.paretoset([0, 0], distinct=False)
    array([ True,  True])
    """
    if is_dataframe(costs):
        X, maximise, n_diff = frame_columns(costs, sense, all_columns=True)
    else:
        arr = costs if isinstance(costs, np.ndarray) else np.asarray(costs)
        if arr.dtype == np.dtype(object):
            raise TypeError(f"Data must be numerical. Please convert it. Data has type: {arr.dtype}")
        if arr.ndim == 1:
            arr = arr.reshape(-1, 1)
        X, maximise, n_diff = prepare_array(arr, sense, name="costs")
    plan = report(plan_skyline(X.shape[0], X.shape[1], resolve_device(device),
                               distinct=bool(distinct), diff_columns=n_diff), "paretoset")
    mask = np.zeros(X.shape[0], dtype=bool)
    if X.shape[0]:
        sky, _ = run(plan, X, maximise)       # the points checked once, above
        mask[cast(np.ndarray, sky)] = True      # host input, host indices
    return mask
