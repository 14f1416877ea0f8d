"""The skyline on Dask: local skylines per block, then a tree reduction of unions.

The skyline of a union is the skyline of the union of the skylines: a point
dominated in the union is dominated by a point of the union's skyline
(dominance is transitive and the sets are finite), and a point not
dominated in the union is not dominated in its own block.  So each block's
skyline is computed on its worker (``skyjoin.skyline``, CPU or GPU), then
groups of ``fan_in`` partial skylines are merged, level by level, until one
remains.  Every partial result carries the global row ids of its points,
ordered by id, so that:

* copies of equal points, which never dominate each other, all survive
  (SkyBench semantics), whichever blocks they come from;
* with ``distinct=True`` each merge keeps the lowest index of each group of
  equal points, which is the lowest global id of the group.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Hashable, Sequence

import numpy as np

if TYPE_CHECKING:
    import distributed

from .._core.device_memory import reports_device_oom
from .._core.plans import report
from ..pareto.api import Sense, check_sense
from ..pareto.plan import SkylinePlan, plan_skyline
from ..pareto.run import run, to_minimisation
from .blocks import Points, as_blocks, get_client, new_token, reruns_on_lost_input
from .plan import workers_device

__all__ = ["skyline"]


def _skyline_of(Xm, plan: SkylinePlan):
    """Row indices of the skyline of Xm (float64, minimised), by the call's plan
    (its device resolved once, on the driver: nothing is decided here)."""
    idx, _ = run(plan, Xm, np.zeros(Xm.shape[1], dtype=bool))
    return idx


def _local_skyline(block, offset, maximise, plan: SkylinePlan):
    """Skyline of one block, as (global ids, rows under minimisation)."""
    Xm = to_minimisation(block, maximise)
    idx = _skyline_of(Xm, plan)
    return idx.astype(np.int64) + offset, Xm[idx]


def _merge_skylines(plan: SkylinePlan, *parts):
    """Skyline of the union of partial skylines (parts ordered by global id)."""
    ids = np.concatenate([p[0] for p in parts])
    rows = np.concatenate([p[1] for p in parts])
    order = np.argsort(ids, kind="stable")
    ids, rows = ids[order], rows[order]
    if len(ids) < 2:
        return ids, rows
    idx = _skyline_of(rows, plan)
    return ids[idx], rows[idx]


@reruns_on_lost_input
@reports_device_oom("distributed skyline", "more GPUs, or smaller blocks (block_rows=)")
def skyline(X: Points, client: distributed.Client | None = None, sense: Sense | None = None,
            distinct: bool = False, *, columns: Sequence[Hashable] | None = None,
            device: str | None = None, fan_in: int = 4, block_rows: int | None = None,
            replicas: int | None = None, retries: int = 2,
            timings: dict[str, float] | None = None) -> np.ndarray:
    """The skyline (Pareto set) of a point set, computed on a Dask cluster.

    The same result as :func:`skyjoin.skyline`: the sorted row ids of the
    points that no point dominates (p dominates q iff p is no worse on every
    column and strictly better on one; equal points never dominate each
    other).

    Parameters
    ----------
    X : ndarray, dask.array.Array, dask.dataframe.DataFrame, str or os.PathLike
        As :func:`skyjoin.distributed.self_join`.
    client : distributed.Client, optional
        Default: the current client.
    sense : "min", "max" or sequence of them, optional
        Preference per column (default: minimise every column).
    distinct : bool
        Keep only the lowest row id of each group of equal skyline points.
    columns : list, optional
        Columns to use, for files and data frames.
    device : {"auto", "cpu", "gpu"}, optional
        Device of the workers' skyline, resolved once per call by the
        workers (``skyjoin.distributed.plan.workers_device``), alike on
        every worker.
    fan_in : int
        Partial skylines merged per task of the reduction tree (>= 2).
    block_rows, replicas, retries
        As :func:`skyjoin.distributed.self_join`.
    timings : dict, optional
        Filled with the seconds of "load" and "skyline".

    Returns
    -------
    ndarray of int64
        Sorted global row ids of the skyline.

    Raises
    ------
    ValueError
        NaN/inf values, a wrong shape, an unknown sense, fan_in < 2, no client.
    skyjoin.DeviceMemoryError
        A GPU ran out of device memory in one of the tasks.

    See Also
    --------
    skyjoin.skyline : the single-machine skyline that every block and merge runs.

    Notes
    -----
    Each block's skyline runs on its worker; then ceil(log_fan_in(blocks))
    levels of merges, each the skyline of at most ``fan_in`` partial
    skylines.  The driver receives only the final skyline's row ids.
    Every block and merge runs one plan (``skyjoin.pareto.plan``), made
    once here with the resolved device, through the single-machine run
    entry (``skyjoin.pareto.run.run``).

    Examples
    --------
    >>> import numpy as np, skyjoin.distributed as sd
    >>> from distributed import Client, LocalCluster
    >>> X = np.array([[1, 3], [2, 2], [3, 1], [3, 3], [2, 2]])
    >>> with LocalCluster(n_workers=2, processes=False) as cl, Client(cl) as client:
    ...     sd.skyline(X, client=client, device="cpu", block_rows=2)
    array([0, 1, 2, 4])
    """
    if not isinstance(distinct, (bool, np.bool_)):
        raise TypeError(f"distinct must be a bool, got {type(distinct).__name__}")
    if isinstance(fan_in, bool) or not isinstance(fan_in, (int, np.integer)) or fan_in < 2:
        raise ValueError(f"fan_in must be an integer >= 2, got {fan_in!r}")
    client = get_client(client)
    device = workers_device(client, device)
    t0 = time.perf_counter()
    blocks = as_blocks(client, X, dtype=np.float64, columns=columns, block_rows=block_rows,
                       replicas=replicas, retries=retries)
    maximise = check_sense(sense, blocks.d)
    t1 = time.perf_counter()
    if blocks.n == 0:
        return np.zeros(0, dtype=np.int64)
    plan = report(plan_skyline(blocks.n, blocks.d, device, distinct=bool(distinct)),
                  "distributed skyline")
    token = new_token("skyline")
    level = [client.submit(_local_skyline, f, int(blocks.offsets[b]), maximise, plan,
                           retries=retries, key=f"{token}-local-{b}")
             for b, f in enumerate(blocks.futures) if blocks.offsets[b + 1] > blocks.offsets[b]]
    depth = 0
    while len(level) > 1:
        depth += 1
        level = [client.submit(_merge_skylines, plan, *level[k:k + fan_in],
                               retries=retries, key=f"{token}-merge-{depth}-{k}")
                 for k in range(0, len(level), fan_in)]
    ids, _ = level[0].result()
    if timings is not None:
        timings.update(load=t1 - t0, skyline=time.perf_counter() - t1)
    return np.sort(ids).astype(np.int64)
