"""DBSCAN on Dask: local clustering with halos, a small merge graph, exact labels.

Each partition (see :mod:`.join`) receives its owned points O and a halo of
*two* halo widths.  Call H1 the halo points within one width of the box:
every neighbour of a point of O + H1 is in the partition, so the neighbour
counts, hence the core flags, of O + H1 are exact there -- those of the
owned points and of every halo point that can neighbour them.  Farther halo
points can only be under-counted, never made core wrongly.

1. Local clustering: the single-machine DBSCAN (``skyjoin.DBSCAN``, the
   fastest path of the worker's device) clusters the partition's points;
   its clusters, restricted to core points, are local components of the
   global core graph.  Each is named by its representative, the lowest
   global id of its core points.
2. Merge graph: a partition emits the edge (representative, g) for every
   core point g of one of its components that is a halo point or an owned
   point close enough to the box border to be in another partition's halo.
   A core-core pair (a, b) within eps, a owned by p, lies in one component
   of p (b is in H1, its flag exact); partitions that share a core point
   both emit an edge to it, so their components meet.  The driver runs the
   single-machine union-find (``skyjoin.dbscan.union_find``) over this small
   graph, its nodes sorted by global id, so each root is the lowest global
   id of a cluster's core points.
3. Labels, exactly scikit-learn's (DESIGN.md): clusters numbered in order
   of their lowest-index core point; each partition labels its owned
   points: a core point by its component's cluster, a border point by the
   lowest label among the clusters of its core neighbours (all of them in
   O + H1, found by a join of its non-core points against its core points),
   noise -1.
"""

from __future__ import annotations

import time

import numpy as np

from .._core.validate import check_eps, check_min_samples, check_precision, working_dtype
from .blocks import get_client, new_token, reruns_on_lost_input, stacked
from .join import (_concat_pieces, load_blocks, make_plan, route_blocks, shared_gpu,
                   worker_of_partition)
from .partition import deep_inside, in_widened_box

__all__ = ["DBSCAN", "local_clusters", "merge_local_clusters"]


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------
def local_clusters(own_ids, own_X, halo_ids, halo_X, plan, p, h, eps, min_samples, device,
                   precision):
    """Local DBSCAN of partition p with its halo (step 1 and the edges of step 2).

    The single-machine DBSCAN (``skyjoin.DBSCAN``: the grid, GPU or hybrid
    path of the worker's device) clusters the owned and halo points S
    together.  A point's count there is exact when all its neighbours are
    in S, which holds for every point within one halo width of the box
    (the halo is two widths wide); farther halo points can only be
    under-counted, so every core point of the local run is a true core
    point, and every edge between local core points is an edge of the
    global core graph.

    Returns
    -------
    dict
        ``own_ids``, ``own_core`` (bool), ``own_comp`` (local component of
        each owned core point), ``border_rows`` / ``border_comps`` (owned
        non-core point, component of one of its core neighbours;
        deduplicated), ``reps`` (global id representing each local
        component) and the merge edges ``edge_rep`` -- ``edge_id``.
    """
    from ..dbscan.estimator import DBSCAN as SingleDBSCAN
    from ..join.api import join

    S_X = np.concatenate([own_X, halo_X])
    S_ids = np.concatenate([own_ids, halo_ids])
    nO = len(own_ids)
    if nO == 0:      # nothing to label here (an empty box): no components, no edges
        e = np.zeros(0, dtype=np.int64)
        return {"own_ids": own_ids, "own_core": np.zeros(0, bool), "own_comp": e,
                "border_rows": e, "border_comps": e, "reps": e, "is_node": np.zeros(0, bool),
                "edge_rep": e, "edge_id": e}
    local = SingleDBSCAN(eps=eps, min_samples=min_samples, device=device,
                         precision=precision).fit(S_X)
    core = np.zeros(len(S_ids), dtype=bool)
    core[local.core_sample_indices_] = True
    comp = np.asarray(local.labels_, dtype=np.int64)     # a core point's local component
    n_comp = int(comp.max()) + 1 if len(comp) else 0
    reps = np.full(n_comp, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(reps, comp[core], S_ids[core])
    # merge edges: the core points of O + H1 that another partition also sees (the halo
    # points of H1, the owned points near the border); farther halo points are left out,
    # since their owners may see them only deep inside and emit nothing for them
    shared = core.copy()
    shared[:nO] &= ~deep_inside(plan, p, own_X, h * (1.0 + 1e-6))
    shared[nO:] &= in_widened_box(plan, p, halo_X, h)
    edge_rep = reps[comp[shared]]
    edge_id = S_ids[shared]
    # the components with an owned core point are nodes of the merge graph even without edges
    is_node = np.zeros(n_comp, dtype=bool)
    is_node[comp[:nO][core[:nO]]] = True
    # border candidates: owned non-core points and the components of their core neighbours.
    # An owned point that the local run leaves as noise has no core neighbour at all (its
    # neighbours are all in O + H1, whose core flags are exact): it is noise, no join needed
    rows = np.flatnonzero(~core[:nO] & (comp[:nO] >= 0))
    pairs = np.zeros((2, 0), dtype=np.int64)
    cores = np.flatnonzero(core)
    if len(rows) and len(cores):
        cores = cores[near_some(S_X[cores], own_X[rows], h)]
    if len(rows) and len(cores):
        nt = join(own_X[rows], S_X[cores], eps, sort=False, device=device,
                  precision=precision).to_host()
        if nt.n_pairs:
            pr = nt.pairs()
            pairs = np.unique(np.stack([rows[pr[:, 0]], comp[cores[pr[:, 1]]]]), axis=1)
    return {"own_ids": own_ids, "own_core": core[:nO].copy(), "own_comp": comp[:nO].copy(),
            "border_rows": pairs[0], "border_comps": pairs[1], "reps": reps, "is_node": is_node,
            "edge_rep": edge_rep, "edge_id": edge_id}


def near_some(B, A, h, max_dims: int = 3):
    """Which rows of B lie in a coarse cell (side 2h) next to, or holding, a row of A.

    A conservative filter: any row of B within eps (< h) of a row of A is kept,
    since their cells differ by at most one in every dimension.
    """
    k = min(A.shape[1], max_dims)
    lo = np.minimum(A[:, :k].min(axis=0), B[:, :k].min(axis=0))
    cb = np.floor((B[:, :k] - lo) / (2.0 * h)).astype(np.int64)
    ca = np.floor((A[:, :k] - lo) / (2.0 * h)).astype(np.int64)
    radix = np.maximum(cb.max(axis=0), ca.max(axis=0)) + 3
    if float(np.prod(radix.astype(np.float64))) >= 2.0**62:
        return np.ones(len(B), dtype=bool)
    stride = np.ones(k, dtype=np.int64)
    for j in range(k - 2, -1, -1):
        stride[j] = stride[j + 1] * radix[j + 1]
    keys_a = np.unique((ca + 1) @ stride)
    shifts = np.array(np.meshgrid(*[[-1, 0, 1]] * k, indexing="ij")).reshape(k, -1).T @ stride
    around = np.unique((keys_a[:, None] + shifts[None, :]).ravel())
    return np.isin((cb + 1) @ stride, around, assume_unique=False)


def _local_dbscan(p, plan, h, eps, min_samples, device, precision, d, dtype, *pieces):
    """Step 1 on a worker: local clusters of partition p."""
    own_ids, own_X, halo_ids, halo_X = _concat_pieces(pieces, d, dtype)
    return local_clusters(own_ids, own_X, halo_ids, halo_X, plan, p, h, eps, min_samples,
                          device, precision)


def _whole_dbscan(eps, min_samples, device, precision, d, dtype, *blocks):
    """DBSCAN of all the points as one partition (one worker): the single-machine estimator."""
    from ..dbscan.estimator import DBSCAN as SingleDBSCAN

    est = SingleDBSCAN(eps=eps, min_samples=min_samples, device=device, precision=precision)
    est._fit_labels(stacked(blocks, d, dtype), None)     # labels only: no components_
    return np.asarray(est.labels_, dtype=np.intp), np.asarray(est.core_sample_indices_,
                                                               dtype=np.int64)


def _merge_part(state):
    """The small part of a local result that the driver needs (step 2)."""
    return state["reps"], state["is_node"], state["edge_rep"], state["edge_id"]


def _final_labels(state, comp_labels):
    """Step 3 on a worker: labels of the owned points from their components' labels."""
    n = len(state["own_ids"])
    labels = np.full(n, -1, dtype=np.int64)
    core = state["own_core"]
    labels[core] = comp_labels[state["own_comp"][core]]
    rows = state["border_rows"]
    if len(rows):
        big = np.iinfo(np.int64).max
        best = np.full(n, big, dtype=np.int64)
        np.minimum.at(best, rows, comp_labels[state["border_comps"]])
        hit = best != big
        labels[hit] = best[hit]
    return state["own_ids"], labels, state["own_ids"][core]


# --------------------------------------------------------------------------
# driver side
# --------------------------------------------------------------------------
def merge_local_clusters(parts):
    """Union-find over the merge graph; the cluster label of every local component.

    Parameters
    ----------
    parts : list of (reps, is_node, edge_rep, edge_id)
        Per partition: the representative (global id) of each local
        component, whether it is a node of the graph by itself (it has an
        owned core point), and the merge edges.

    Returns
    -------
    list of ndarray
        Per partition, the final cluster label of each local component (-1
        for components that are not in the graph: their core points are far
        halo points, which no owned point neighbours).
    """
    from ..dbscan.union_find import union_find_core_components

    pieces = [r[m] for r, m, _, _ in parts] + [a for _, _, a, _ in parts] + \
        [b for _, _, _, b in parts]
    nodes = np.unique(np.concatenate(pieces)) if pieces else np.zeros(0, np.int64)
    m = len(nodes)
    out = [np.full(len(r), -1, dtype=np.int64) for r, _, _, _ in parts]
    if m == 0:
        return out
    a = np.concatenate([np.searchsorted(nodes, e) for _, _, e, _ in parts])
    b = np.concatenate([np.searchsorted(nodes, e) for _, _, _, e in parts])
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=m), out=indptr[1:])
    # nodes are sorted by global id, so each root is a cluster's lowest core id
    root = union_find_core_components(indptr, np.ascontiguousarray(dst[order]),
                                      np.ones(m, dtype=np.uint8))
    label_of_node = np.searchsorted(np.unique(root), root)
    for k, (r, _, _, _) in enumerate(parts):
        pos = np.minimum(np.searchsorted(nodes, r), m - 1)
        hit = nodes[pos] == r
        out[k][hit] = label_of_node[pos[hit]]
    return out


def _shared_gpu_dbscan(client, blocks, plan, h, token, eps, min_samples, dtype, retries):
    """Steps 1 to 3 on in-process GPU workers (see :mod:`.shared`): the local
    clusterings stay on the GPUs between steps, and the labels are written
    straight into the result.  Returns (labels, core_sample_indices, phases)."""
    from .._core.memory import alloc_host
    from . import shared
    from ._kernels import true_indices

    n, P, d = blocks.n, plan.n_partitions, blocks.d
    where = worker_of_partition(client, P)
    t0 = time.perf_counter()
    shared.publish(token, X=blocks.array)
    try:
        futs = [client.submit(shared.dbscan_local_task, token, p, plan, h, eps, min_samples, n,
                              d, dtype, *blocks.futures, retries=retries,
                              key=f"{token}-local-{p}", workers=where[p],
                              allow_other_workers=True) for p in range(P)]
        parts = client.gather(futs)
        del futs
        t1 = time.perf_counter()
        comp_labels = merge_local_clusters(parts)
        t2 = time.perf_counter()
        # every point is labelled by its one owner (checked below): no fill needed
        labels = alloc_host(n, np.intp)
        core = alloc_host(n, np.bool_)
        shared.publish(token, labels=labels, core=core)
        futs = [client.submit(shared.dbscan_labels_task, token, p, comp_labels[p], plan, h, eps,
                              min_samples, n, d, dtype, *blocks.futures, retries=retries,
                              key=f"{token}-labels-{p}", workers=where[p],
                              allow_other_workers=True) for p in range(P)]
        done = sum(client.gather(futs))
        if done != n:       # every point has exactly one owner
            raise RuntimeError(f"the partitions labelled {done} points of {n}")
        with shared._numba_lock():
            core_idx = true_indices(core)
        return labels, core_idx, {"local": t1 - t0, "merge": t2 - t1,
                                  "labels": time.perf_counter() - t2}
    finally:
        shared.drop(token)


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
        Device of the workers' join, resolved on each worker.
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

    Notes
    -----
    Euclidean distance only, and no ``sample_weight`` (the single-machine
    :class:`skyjoin.DBSCAN` has both).  Each partition holds its points and
    a halo two halo widths (a hair more than 2 eps) wide.

    Examples
    --------
    >>> import numpy as np, skyjoin.distributed as sd
    >>> from distributed import Client, LocalCluster
    >>> X = np.array([[1, 2], [2, 2], [2, 3], [8, 7], [8, 8], [25, 80]])
    >>> with LocalCluster(n_workers=2, processes=False) as cl, Client(cl) as client:
    ...     sd.DBSCAN(eps=3, min_samples=2, client=client, device="cpu").fit(X).labels_
    array([ 0,  0,  0,  1,  1, -1])
    """

    def __init__(self, eps=0.5, *, min_samples=5, client=None, device=None,
                 precision="float64", n_partitions=None, block_rows=None, replicas=None,
                 retries=2):
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
    def fit(self, X, y=None, columns=None):
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
        """
        eps = check_eps(self.eps)
        min_samples = check_min_samples(self.min_samples)
        precision = check_precision(self.precision)
        client = get_client(self.client)
        dtype = working_dtype(precision)
        tm = {}
        t0 = time.perf_counter()
        blocks = load_blocks(client, X, self.n_partitions, dtype=dtype, columns=columns,
                             block_rows=self.block_rows, replicas=self.replicas,
                             retries=self.retries, shared=shared_gpu(client, self.device))
        n = blocks.n
        if n == 0:
            raise ValueError("X is empty: DBSCAN needs at least one point")
        t1 = time.perf_counter()
        plan, h = make_plan(blocks, eps, precision, self.n_partitions, client, halo_factor=2)
        token = new_token("dbscan")
        if blocks.array is not None:
            self.labels_, self.core_sample_indices_, phases = _shared_gpu_dbscan(
                client, blocks, plan, h, token, eps, min_samples, dtype, self.retries)
            del blocks
            self.n_partitions_ = plan.n_partitions
            tm.update(load=t1 - t0, **phases)
            self.timings_ = tm
            return self
        if plan.n_partitions == 1:
            fut = client.submit(_whole_dbscan, eps, min_samples, self.device, precision, blocks.d,
                                dtype, *blocks.futures, retries=self.retries,
                                key=f"{token}-whole")
            self.labels_, self.core_sample_indices_ = fut.result()
            del fut, blocks
            self.n_partitions_ = 1
            tm.update(load=t1 - t0, local=time.perf_counter() - t1, merge=0.0, labels=0.0)
            self.timings_ = tm
            return self
        pieces = route_blocks(client, blocks, plan, 2 * h, token, self.retries)
        where = worker_of_partition(client, plan.n_partitions)
        states = [client.submit(_local_dbscan, p, plan, h, eps, min_samples, self.device,
                                precision, blocks.d, dtype, *pieces[p], retries=self.retries,
                                key=f"{token}-local-{p}", workers=where[p],
                                allow_other_workers=True)
                  for p in range(plan.n_partitions)]
        merge = client.gather([client.submit(_merge_part, s, retries=self.retries,
                                             key=f"{token}-merge-{p}")
                               for p, s in enumerate(states)])
        t2 = time.perf_counter()
        comp_labels = merge_local_clusters(merge)
        t3 = time.perf_counter()
        finals = client.gather([client.submit(_final_labels, s, lab, retries=self.retries,
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

    def fit_predict(self, X, y=None, columns=None):
        """``fit(X).labels_``."""
        return self.fit(X, columns=columns).labels_
