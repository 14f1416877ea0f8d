"""DBSCAN of one partition with its halo, and the merge of the partitions' clusters.

The worker and driver steps of :class:`skyjoin.distributed.DBSCAN`.

Each partition (the boxes of :mod:`.partition`) receives its owned points O
and a halo of *two* halo widths.  Call H1 the halo points within one width
of the box: every neighbour of a point of O + H1 is in the partition, so the neighbour
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
   single-machine union-find (``skyjoin.cluster.union_find``) over this small
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

import numpy as np

from .._core.conditioning import condition_points
from .._core.unique import sorted_unique
from ..index.grid import linear_strides
from ..cluster.engine import cluster_points
from ..cluster.union_find import edge_roots
from ..simjoin import engine as join_engine
from ..simjoin.plan import request as join_request
from .partition import deep_inside, in_widened_box

__all__ = ["partition_dbscan", "near_some", "merge_part", "merge_partitions", "owned_labels"]


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------
def partition_dbscan(own_ids, own_X, halo_ids, halo_X, plan, p, h, eps, min_samples, device,
                     precision):
    """Local DBSCAN of partition p with its halo (step 1 and the edges of step 2).

    The single-machine DBSCAN (``skyjoin.cluster.engine.cluster_points``: the
    grid, GPU or hybrid path of the worker's device) clusters the owned and halo points S
    together.  A point's count there is exact when all its neighbours are
    in S, which holds for every point within one halo width of the box
    (the halo is two widths wide); farther halo points can only be
    under-counted, so every core point of the local run is a true core
    point, and every edge between local core points is an edge of the
    global core graph.

    Cost: the single-machine DBSCAN of the partition's m owned and halo
    points, plus a join of its owned non-core points against the core
    points in the coarse cells around them (:func:`near_some`).

    Returns
    -------
    dict
        ``own_ids``, ``own_core`` (bool), ``own_comp`` (local component of
        each owned core point), ``border_rows`` / ``border_comps`` (owned
        non-core point, component of one of its core neighbours;
        deduplicated), ``reps`` (global id representing each local
        component, ascending: components are numbered in this order) and
        the merge edges from local component ``edge_comp`` to global id
        ``edge_id`` (ascending).
    """
    S_X = np.concatenate([own_X, halo_X])
    S_ids = np.concatenate([own_ids, halo_ids])
    nO = len(own_ids)
    if nO == 0:      # nothing to label here (an empty box): no components, no edges
        e = np.zeros(0, dtype=np.int64)
        return {"own_ids": own_ids, "own_core": np.zeros(0, bool), "own_comp": e,
                "border_rows": e, "border_comps": e, "reps": e, "is_node": np.zeros(0, bool),
                "edge_comp": e, "edge_id": e}
    local_core, local_labels, _ = cluster_points(S_X, eps, min_samples, device=device,
                                                 precision=precision)
    core = np.zeros(len(S_ids), dtype=bool)
    core[local_core] = True
    comp = np.asarray(local_labels, dtype=np.int64)     # a core point's local component
    n_comp = int(comp.max()) + 1 if len(comp) else 0
    reps = np.full(n_comp, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(reps, comp[core], S_ids[core])
    # components renumbered in the order of their representatives (ascending reps: the
    # driver's sort then merges sorted runs)
    by_rep = np.argsort(reps, kind="stable")
    rank = np.empty(n_comp + 1, dtype=np.int64)
    rank[by_rep] = np.arange(n_comp, dtype=np.int64)
    rank[n_comp] = -1                                    # noise stays -1 (comp[i] = -1)
    comp = rank[comp]
    reps = reps[by_rep]
    # merge edges: the core points of O + H1 that another partition also sees (the halo
    # points of H1, the owned points near the border); farther halo points are left out,
    # since their owners may see them only deep inside and emit nothing for them
    shared = core.copy()
    shared[:nO] &= ~deep_inside(plan, p, own_X, h * (1.0 + 1e-6))
    shared[nO:] &= in_widened_box(plan, p, halo_X, h)
    edge_id = S_ids[shared]
    by_id = np.argsort(edge_id, kind="stable")
    edge_comp = comp[shared][by_id]
    edge_id = edge_id[by_id]
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
        nt = _join(own_X[rows], S_X[cores], eps, device, precision)
        if nt.n_pairs:
            pr = nt.pairs()
            pairs = np.unique(np.stack([rows[pr[:, 0]], comp[cores[pr[:, 1]]]]), axis=1)
    return {"own_ids": own_ids, "own_core": core[:nO].copy(), "own_comp": comp[:nO].copy(),
            "border_rows": pairs[0], "border_comps": pairs[1], "reps": reps, "is_node": is_node,
            "edge_comp": edge_comp, "edge_id": edge_id}


def _join(R, S, eps, device, precision):
    """R join S (a table, rows unsorted, in host memory) through the join's engine
    entry: the task's points conditioned once here, the request built by
    ``skyjoin.simjoin.plan.request`` on the resolved ``device``.  Cost: the join's."""
    (Rc, Sc), e = condition_points([R, S], eps, precision)
    plan = join_request(device, self_join=False, output="table", sort=False, pattern="full",
                        precision=precision)
    return join_engine.run(plan, Rc, Sc, e).to_host()


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
    stride = linear_strides(radix)
    keys_a = sorted_unique((ca + 1) @ stride)
    shifts = np.array(np.meshgrid(*[[-1, 0, 1]] * k, indexing="ij")).reshape(k, -1).T @ stride
    around = sorted_unique((keys_a[:, None] + shifts[None, :]).ravel())
    return np.isin((cb + 1) @ stride, around, assume_unique=False)


def merge_part(state):
    """The small part of a partition's result that the driver needs (step 2)."""
    return state["reps"], state["is_node"], state["edge_comp"], state["edge_id"]


def owned_labels(state, comp_labels):
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
def merge_partitions(parts):
    """Union-find over the merge graph; the cluster label of every local component.

    Parameters
    ----------
    parts : list of (reps, is_node, edge_comp, edge_id)
        Per partition: the representative (global id) of each local
        component, whether it is a node of the graph by itself (it has an
        owned core point), and the merge edges, each from the local component
        ``edge_comp`` (an index into ``reps``) to the global id ``edge_id``.
        Any order is right; ascending ``reps`` and ``edge_id`` (as the
        partitions send them) make the sort a merge of sorted runs.

    Returns
    -------
    list of ndarray
        Per partition, the final cluster label of each local component (-1
        for components that are not in the graph: their core points are far
        halo points, which no owned point neighbours).

    Notes
    -----
    An id is a node when it represents a node component or a component that
    an edge leaves, or when it is an edge's global end.  One stable sort of
    the N = R + E ids (every representative, every edge's global end; the
    edges' local ends are found through their components, not sorted) ranks
    them all (:func:`_sorted_with_positions`): O(N log N), O(N) on sorted
    runs.  Then O(N): node numbers in the order of the ids, the union-find
    over the edge list (:func:`skyjoin.cluster.union_find.edge_roots`, the
    root of each component its lowest node, so its lowest global id) and the
    clusters numbered by their roots.
    """
    reps = [np.asarray(r, dtype=np.int64) for r, _, _, _ in parts]
    comps = [np.asarray(c, dtype=np.int64) for _, _, c, _ in parts]
    ends = [np.asarray(e, dtype=np.int64) for _, _, _, e in parts]
    P = len(parts)
    if not P:
        return []
    makes_node = []
    for (_, node_comp, _, _), c in zip(parts, comps):
        m = np.array(node_comp, dtype=np.bool_, copy=True)
        m[c] = True                                   # a component that an edge leaves
        makes_node.append(m)
    n_reps = sum(len(r) for r in reps)
    ids = np.concatenate(reps + ends)
    node_flag = np.concatenate(makes_node + [np.ones(len(ids) - n_reps, dtype=np.bool_)])
    if not node_flag.any():                          # no node: no cluster
        return [np.full(len(r), -1, dtype=np.int64) for r in reps]
    order, s = _sorted_with_positions(ids)
    first = np.empty(len(s), dtype=np.bool_)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    group = np.cumsum(first) - 1                      # distinct id of each sorted entry
    is_node = np.zeros(int(group[-1]) + 1, dtype=np.bool_)
    is_node[group[node_flag[order]]] = True
    node_of_group = np.where(is_node, np.cumsum(is_node) - 1, -1)
    node = np.empty(len(ids), dtype=np.int64)
    node[order] = node_of_group[group]                # node number of every id, or -1
    starts = np.cumsum([0] + [len(r) for r in reps])
    a = np.concatenate([node[starts[k] + comps[k]] for k in range(P)])
    b = node[n_reps:]
    # nodes are numbered by global id, so each root is a cluster's lowest core id
    root = edge_roots(int(is_node.sum()), a, b)
    is_root = np.zeros(len(root), dtype=np.int64)
    is_root[root] = 1
    label_of_node = (np.cumsum(is_root) - 1)[root]    # clusters in the order of their roots
    out = []
    for k in range(P):
        nk = node[starts[k]:starts[k + 1]]
        out.append(np.where(nk >= 0, label_of_node[np.maximum(nk, 0)], -1))
    return out


def _sorted_with_positions(ids):
    """(order, ids[order]) with ids[order] ascending, ties in any order.

    Each id and its position are packed into one int64 key and the keys
    sorted (``np.sort`` of int64 keys took half the time of ``np.argsort``
    of the ids, on 7.6M ids); ids too large to pack with their positions
    go through ``np.argsort``.  NumPy's stable sort finds sorted runs and
    merges them: O(N log N), O(N log R) for R sorted runs.
    """
    n = len(ids)
    bits = max(1, (n - 1).bit_length())
    if n and int(ids.min()) >= 0 and int(ids.max()) < (1 << (63 - bits)):
        key = np.sort((ids << bits) | np.arange(n, dtype=np.int64), kind="stable")
        return key & ((1 << bits) - 1), key >> bits
    order = np.argsort(ids, kind="stable")
    return order, ids[order]
