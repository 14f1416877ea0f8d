"""DBSCAN on Dask: local clustering with halos, a small merge graph, exact labels.

Each partition (see :mod:`.join`) receives its owned points O and a halo of
*two* halo widths, split into the inner halo H1 (within one width of the
box) and the outer halo H2.  Every neighbour of a point of R = O + H1 lies in
O + H1 + H2, so joining R against all of them gives the exact neighbour
count, hence the exact core flag, of every point of R: of the owned points
and of the halo points that can neighbour them.

1. Local clustering (HYBRID-DBSCAN's assignment, Gowanlock et al. 2019, §3,
   on the partition's table): the core points of R are joined into local
   components by the single-machine union-find
   (``skyjoin.cluster.assign.union_find_core_components``).  Each component
   is named by its representative, the lowest global id of its core points.
2. Merge graph: a partition emits, for each of its components, the edges
   (representative, g) for every core point g of the component that is a
   halo point or an owned point close enough to the box border to be in
   another partition's halo.  Two partitions that share a core point g both
   emit an edge to g, so their components meet.  The driver runs the same
   union-find over this small graph (its nodes sorted by global id, so each
   root is the lowest global id of a cluster's core points).
3. Labels, exactly scikit-learn's: clusters numbered in order of their
   lowest-index core point; each partition then labels its owned points: a
   core point by its component's cluster, a border point by the lowest
   label among the clusters of its core neighbours (all of which are in R),
   noise -1.
"""

from __future__ import annotations

import time

import numpy as np

from .._validate import check_eps, check_min_samples, check_precision, working_dtype
from .blocks import as_blocks, get_client, new_token
from .join import _concat_pieces, make_plan, route_blocks
from .partition import deep_inside, in_widened_box

__all__ = ["DBSCAN", "local_clusters", "merge_local_clusters"]


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------
def local_clusters(own_ids, own_X, halo_ids, halo_X, plan, p, h, eps, min_samples, device,
                   precision):
    """Local DBSCAN of partition p with its halo (step 1 and the edges of step 2).

    Returns
    -------
    dict
        ``own_ids``, ``own_core`` (bool), ``own_comp`` (local component of
        each owned core point, -1 otherwise), ``border_rows`` /
        ``border_comps`` (owned non-core point, component of one of its core
        neighbours; deduplicated), ``reps`` (global id representing each
        local component) and the merge edges ``edge_rep`` -- ``edge_id``.
    """
    from ..cluster.assign import union_find_core_components
    from ..join.api import join

    inner = in_widened_box(plan, p, halo_X, h)
    R_X = np.concatenate([own_X, halo_X[inner]])
    R_ids = np.concatenate([own_ids, halo_ids[inner]])
    S_X = np.concatenate([R_X, halo_X[~inner]])
    nR, nO = len(R_ids), len(own_ids)
    nt = join(R_X, S_X, eps, sort=False, device=device, precision=precision).to_host()
    counts = np.diff(nt.indptr)                      # the point itself included
    is_core = (counts >= min_samples).astype(np.uint8)
    # the table restricted to R x R (symmetric): the local core graph
    rows = np.repeat(np.arange(nR, dtype=np.int64), counts)
    keep = nt.indices < nR
    rows, cols = rows[keep], nt.indices[keep]
    indptr = np.zeros(nR + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nR), out=indptr[1:])
    del nt, keep
    root = union_find_core_components(indptr, np.ascontiguousarray(cols), is_core)
    core = is_core.view(bool)
    roots = np.unique(root[core])
    comp = np.full(nR, -1, dtype=np.int64)
    comp[core] = np.searchsorted(roots, root[core])
    reps = np.full(len(roots), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(reps, comp[core], R_ids[core])
    # merge edges: core points that another partition may also see
    shared = core.copy()
    shared[:nO] &= ~deep_inside(plan, p, own_X, h)
    edge_rep = reps[comp[shared]]
    edge_id = R_ids[shared]
    # border candidates: owned non-core rows and the components of their core neighbours
    sel = (rows < nO) & ~core[rows] & core[cols]
    pairs = np.unique(np.stack([rows[sel], comp[cols[sel]]]), axis=1) if sel.any() else \
        np.zeros((2, 0), dtype=np.int64)
    return {"own_ids": own_ids, "own_core": core[:nO].copy(), "own_comp": comp[:nO].copy(),
            "border_rows": pairs[0], "border_comps": pairs[1], "reps": reps,
            "edge_rep": edge_rep, "edge_id": edge_id}


def _local_dbscan(p, plan, h, eps, min_samples, device, precision, d, dtype, *pieces):
    """Step 1 on a worker: local clusters of partition p."""
    own_ids, own_X, halo_ids, halo_X = _concat_pieces(pieces, d, dtype)
    return local_clusters(own_ids, own_X, halo_ids, halo_X, plan, p, h, eps, min_samples,
                          device, precision)


def _merge_part(state):
    """The small part of a local result that the driver needs (step 2)."""
    return state["reps"], state["edge_rep"], state["edge_id"]


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
    parts : list of (reps, edge_rep, edge_id)
        Per partition: the representative (global id) of each local
        component, and its merge edges.

    Returns
    -------
    list of ndarray
        Per partition, the final cluster label of each local component.
    """
    from ..cluster.assign import union_find_core_components

    all_nodes = [r for r, _, _ in parts] + [a for _, a, _ in parts] + [b for _, _, b in parts]
    nodes = np.unique(np.concatenate(all_nodes)) if all_nodes else np.zeros(0, np.int64)
    m = len(nodes)
    if m == 0:
        return [np.zeros(0, dtype=np.int64) for _ in parts]
    a = np.concatenate([np.searchsorted(nodes, e) for _, e, _ in parts])
    b = np.concatenate([np.searchsorted(nodes, e) for _, _, e in parts])
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=m), out=indptr[1:])
    # nodes are sorted by global id, so each root is a cluster's lowest core id
    root = union_find_core_components(indptr, np.ascontiguousarray(dst[order]),
                                      np.ones(m, dtype=np.uint8))
    cluster_roots = np.unique(root)
    label_of_node = np.searchsorted(cluster_roots, root)
    return [label_of_node[np.searchsorted(nodes, r)].astype(np.int64) for r, _, _ in parts]


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
        Target number of partitions (default: two per worker thread).
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
            eps <= 0, min_samples < 1, NaN/inf values, bad shapes, no client.
        """
        eps = check_eps(self.eps)
        min_samples = check_min_samples(self.min_samples)
        precision = check_precision(self.precision)
        client = get_client(self.client)
        dtype = working_dtype(precision)
        tm = {}
        t0 = time.perf_counter()
        blocks = as_blocks(client, X, dtype=dtype, columns=columns, block_rows=self.block_rows,
                           replicas=self.replicas, retries=self.retries)
        n = blocks.n
        t1 = time.perf_counter()
        plan, h = make_plan(blocks, eps, precision, self.n_partitions, client, halo_factor=2)
        token = new_token("dbscan")
        pieces = route_blocks(client, blocks, plan, 2 * h, token, self.retries)
        states = [client.submit(_local_dbscan, p, plan, h, eps, min_samples, self.device,
                                precision, blocks.d, dtype, *pieces[p], retries=self.retries,
                                key=f"{token}-local-{p}")
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
