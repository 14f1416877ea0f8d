"""DBSCAN on Dask: local clustering with halos, a small merge graph, exact labels.

The algorithm (local clustering with halos, the merge graph, the labels)
is in :mod:`.halo_dbscan`; the routing decisions in :mod:`.plan`.  The
result equals the single-machine :class:`skyjoin.DBSCAN`'s exactly.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Hashable, Sequence

import numpy as np

if TYPE_CHECKING:
    import distributed

from .._core.device_memory import PARTITIONED_WAYS_OUT, reports_device_oom
from .._core.memory import alloc_host
from .._core.validate import check_eps, check_min_samples, check_precision, working_dtype
from ..cluster.engine import cluster_points
from ..cluster.plan import grid_applies
from . import gpu_slices, in_process_gpu
from ._kernels import true_indices
from .blocks import Points, get_client, new_token, reruns_on_lost_input, stacked
from .halo_dbscan import merge_part, merge_partitions, owned_labels, partition_dbscan
from .load import load_blocks
from .plan import (check_n_partitions, in_process_gpu_path, plan_run, worker_of_partition,
                   workers_device)
from .routing import concat_pieces, route_blocks
from .worker_threads import worker_threads

__all__ = ["DBSCAN"]

log = logging.getLogger("skyjoin")


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------
def _partition_task(p, plan, h, eps, min_samples, device, precision, d, dtype, *pieces):
    """Step 1 on a worker: local clusters of partition p."""
    own_ids, own_X, halo_ids, halo_X = concat_pieces(pieces, d, dtype)
    return partition_dbscan(own_ids, own_X, halo_ids, halo_X, plan, p, h, eps, min_samples,
                          device, precision)


def _whole_dbscan(eps, min_samples, device, precision, d, dtype, *blocks):
    """DBSCAN of all the points as one partition (one worker): the single-machine
    engine (``skyjoin.cluster.engine.cluster_points``), labels only."""
    core, labels, _ = cluster_points(stacked(blocks, d, dtype), eps, min_samples,
                                     device=device, precision=precision)
    return np.asarray(labels, dtype=np.intp), np.asarray(core, dtype=np.int64)


# --------------------------------------------------------------------------
# driver side
# --------------------------------------------------------------------------
def _in_process_gpu_dbscan(client, blocks, plan, h, token, eps, min_samples, precision,
                           retries):
    """Steps 1 to 3 on in-process GPU workers (see :mod:`.in_process_gpu`): the local
    clusterings stay on the GPUs between steps, and the labels are written
    straight into the result.  When the array was sliced over the GPUs, the
    slices write the core points' ids into ``core_sample_indices_`` while the
    driver merges (:func:`.gpu_slices.collect_ids`); else the partitions flag
    them in a host array that the driver reads.  The partitions take the
    single machine's path rule (grid or points,
    :func:`skyjoin.cluster.plan.grid_applies`).
    Returns (labels, core_sample_indices, phases)."""
    n, P = blocks.n, plan.n_partitions
    sliced = blocks.slices is not None
    grid = grid_applies("gpu", precision, False, blocks.d)
    workers = worker_threads(client)
    where = worker_of_partition(workers, P)
    t0 = time.perf_counter()
    in_process_gpu.publish(token, X=blocks.array)
    try:
        routed = gpu_slices.route(workers, token, blocks, plan, 2 * h)
        futs = [workers.submit(in_process_gpu.dbscan_local_task, token, p, plan, h, eps,
                               min_samples, n, precision, grid, *routed, retries=retries,
                               key=f"{token}-local-{p}", workers=where[p],
                               allow_other_workers=True) for p in range(P)]
        local = workers.gather(futs)
        del futs
        core_futs: list = []
        if sliced:      # the slices write the core ids while the driver merges
            starts = np.concatenate([[0], np.cumsum(np.sum([c for _, c in local], axis=0))])
            core_idx = alloc_host(int(starts[-1]), np.int64)
            in_process_gpu.publish(token, core_idx=core_idx)
            core_futs = gpu_slices.collect_ids(workers, token, P, "core", "core_idx", starts)
        t1 = time.perf_counter()
        comp_labels = merge_partitions([part for part, _ in local])
        t2 = time.perf_counter()
        # every point is labelled by its one owner (checked below): no fill needed
        labels = alloc_host(n, np.intp)
        in_process_gpu.publish(token, labels=labels)
        if not sliced:
            core = alloc_host(n, np.bool_)
            in_process_gpu.publish(token, core=core)
        futs = [workers.submit(in_process_gpu.dbscan_labels_task, token, p, comp_labels[p],
                               plan, h, eps, min_samples, n, precision, grid, retries=retries,
                               key=f"{token}-labels-{p}", workers=where[p],
                               allow_other_workers=True) for p in range(P)]
        if sliced:     # each GPU writes its slice's rows
            done = gpu_slices.receive(workers, token, P, {"labels": "labels"}, futs)
            if sum(workers.gather(core_futs)) != len(core_idx):   # never expected
                raise RuntimeError("the slices wrote fewer core points than the partitions "
                                   "found")
        else:
            done = sum(workers.gather(futs))
            with in_process_gpu.numba_lock():
                core_idx = true_indices(core)
        if done != n:       # every point has exactly one owner
            raise RuntimeError(f"the partitions labelled {done} points of {n}")
        return labels, core_idx, {"local": t1 - t0, "merge": t2 - t1,
                                  "labels": time.perf_counter() - t2}
    finally:
        in_process_gpu.drop(token)


class DBSCAN:
    """DBSCAN on a Dask cluster, with exactly the single-machine (scikit-learn) labels.

    Parameters
    ----------
    eps : float, default=0.5
        Neighbourhood radius (distance ``<= eps``).
    min_samples : int, default=5
        Neighbourhood size, the point itself included, of a core point.
    client : distributed.Client, optional
        Default: the current client.
    device : {"auto", "cpu", "gpu"}, optional
        Device of the workers' join, resolved once per fit by the workers
        (``plan.workers_device``), alike on every worker.
    precision : {"float64", "float32"}
    n_partitions : int, optional
        Target number of partitions (default: one per worker, see
        :func:`skyjoin.distributed.join.default_partitions`); one partition
        is the single-machine DBSCAN on one worker.
    block_rows, replicas, retries
        As :func:`skyjoin.distributed.self_join`.

    Attributes
    ----------
    labels_ : ndarray of intp, shape (n,)
        Clusters 0..k-1 in order of their lowest-index core point; a border
        point takes the lowest label among the clusters of its core
        neighbours; noise -1.
    core_sample_indices_ : ndarray of int64
    n_partitions_ : int
    timings_ : dict
        Seconds of the phases ("load", "local", "merge", "labels").

    See Also
    --------
    skyjoin.DBSCAN : the single-machine estimator that every partition runs.
    self_join : the join on the same partitions.

    Notes
    -----
    Euclidean distance only, and no ``sample_weight`` (the single-machine
    :class:`skyjoin.DBSCAN` has both).  Each partition holds its points and
    a halo two halo widths (a hair more than 2 eps) wide
    (:mod:`skyjoin.distributed.halo_dbscan` has the algorithm and why its
    labels are exact).  Costs, for n points in P partitions: O(n) routing,
    each partition's single-machine DBSCAN on its worker, a union-find on
    the driver over the merge graph, whose nodes and edges are the core
    points near the partition borders (O(n) at worst, usually far fewer),
    and O(n) labels.

    Examples
    --------
    >>> import numpy as np, skyjoin.distributed as sd
    >>> from distributed import Client, LocalCluster
    >>> X = np.array([[1, 2], [2, 2], [2, 3], [8, 7], [8, 8], [25, 80]])
    >>> with LocalCluster(n_workers=2, processes=False) as cl, Client(cl) as client:
    ...     sd.DBSCAN(eps=3, min_samples=2, client=client, device="cpu").fit(X).labels_
    array([ 0,  0,  0,  1,  1, -1])
    """

    def __init__(self, eps: float = 0.5, *, min_samples: int = 5,
                 client: distributed.Client | None = None, device: str | None = None,
                 precision: str = "float64", n_partitions: int | None = None,
                 block_rows: int | None = None, replicas: int | None = None,
                 retries: int = 2) -> None:
        self.eps = eps
        self.min_samples = min_samples
        self.client = client
        self.device = device
        self.precision = precision
        self.n_partitions = n_partitions
        self.block_rows = block_rows
        self.replicas = replicas
        self.retries = retries

    @reruns_on_lost_input
    @reports_device_oom("distributed DBSCAN", PARTITIONED_WAYS_OUT)
    def fit(self, X: Points, y: object = None,
            columns: Sequence[Hashable] | None = None) -> DBSCAN:
        """Cluster X.

        Parameters
        ----------
        X : ndarray, dask.array.Array, dask.dataframe.DataFrame, str or os.PathLike
            As :func:`skyjoin.distributed.self_join`.
        y : Ignored
        columns : list, optional
            Columns to use, for files and data frames.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            eps <= 0, min_samples < 1, NaN/inf values, bad shapes, empty X,
            no client.
        skyjoin.DeviceMemoryError
            A GPU ran out of device memory in one of the tasks.
        """
        eps = check_eps(self.eps)
        min_samples = check_min_samples(self.min_samples)
        precision = check_precision(self.precision)
        n_partitions = check_n_partitions(self.n_partitions)
        client = get_client(self.client)
        device = workers_device(client, self.device)    # resolved once; every task gets this
        dtype = working_dtype(precision)
        tm: dict[str, float] = {}
        token = new_token("dbscan")
        t0 = time.perf_counter()
        blocks = load_blocks(client, X, n_partitions, dtype=dtype, columns=columns,
                             block_rows=self.block_rows, replicas=self.replicas,
                             retries=self.retries, token=token,
                             shared=in_process_gpu_path(client, device))
        n = blocks.n
        if n == 0:
            raise ValueError("X is empty: DBSCAN needs at least one point")
        t1 = time.perf_counter()
        try:
            run = plan_run(blocks, eps, precision, n_partitions, client, device,
                           halo_factor=2)
        except BaseException:
            in_process_gpu.drop(token)      # what a load onto the GPUs left there
            raise
        log.info("DBSCAN: %s", run.describe())
        plan, h = run.boxes, run.halo
        if run.path == "in_process_gpu":
            self.labels_, self.core_sample_indices_, phases = _in_process_gpu_dbscan(
                client, blocks, plan, h, token, eps, min_samples, precision, self.retries)
            del blocks
            self.n_partitions_ = plan.n_partitions
            tm.update(load=t1 - t0, **phases)
            self.timings_ = tm
            return self
        if run.path == "whole":
            fut = client.submit(_whole_dbscan, eps, min_samples, device, precision, blocks.d,
                                dtype, *blocks.futures, retries=self.retries,
                                key=f"{token}-whole")
            self.labels_, self.core_sample_indices_ = fut.result()
            del fut, blocks
            self.n_partitions_ = 1
            tm.update(load=t1 - t0, local=time.perf_counter() - t1, merge=0.0, labels=0.0)
            self.timings_ = tm
            return self
        pieces = route_blocks(client, blocks, plan, run.halo_factor * h, token, self.retries)
        where = worker_of_partition(client, plan.n_partitions)
        states = [client.submit(_partition_task, p, plan, h, eps, min_samples, device,
                                precision, blocks.d, dtype, *pieces[p], retries=self.retries,
                                key=f"{token}-local-{p}", workers=where[p],
                                allow_other_workers=True)
                  for p in range(plan.n_partitions)]
        merge = client.gather([client.submit(merge_part, s, retries=self.retries,
                                             key=f"{token}-merge-{p}")
                               for p, s in enumerate(states)])
        t2 = time.perf_counter()
        comp_labels = merge_partitions(merge)
        t3 = time.perf_counter()
        finals = client.gather([client.submit(owned_labels, s, lab, retries=self.retries,
                                              key=f"{token}-labels-{p}")
                                for p, (s, lab) in enumerate(zip(states, comp_labels))])
        labels = np.full(n, -1, dtype=np.intp)
        core = []
        for ids, lab, core_ids in finals:
            labels[ids] = lab
            core.append(core_ids)
        del states, pieces, blocks
        self.labels_ = labels
        self.core_sample_indices_ = np.sort(np.concatenate(core)) if core else np.zeros(0, np.int64)
        self.core_sample_indices_ = self.core_sample_indices_.astype(np.int64)
        self.n_partitions_ = plan.n_partitions
        tm.update(load=t1 - t0, local=t2 - t1, merge=t3 - t2, labels=time.perf_counter() - t3)
        self.timings_ = tm
        return self

    def fit_predict(self, X: Points, y: object = None,
                    columns: Sequence[Hashable] | None = None) -> np.ndarray:
        """``fit(X).labels_``."""
        return self.fit(X, columns=columns).labels_
