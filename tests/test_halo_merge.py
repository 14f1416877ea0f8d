"""The driver's merge of the partitions' local clusters
(skyjoin.distributed.halo_dbscan.merge_partitions) against scipy's connected
components of the same merge graph, on random graphs: clusters numbered in
the order of their lowest global id, -1 for a component that is not a node."""

import numpy as np
import pytest
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from skyjoin.distributed.halo_dbscan import merge_partitions


def _random_parts(rng, n_ids, n_parts, comps, edges, ordered):
    """Per partition: representatives, node flags, edges from a local component to
    a global id; ascending representatives and edge ends as the partitions send
    them (``ordered``), or in any order."""
    parts = []
    for _ in range(n_parts):
        reps = rng.choice(n_ids, comps, replace=False).astype(np.int64)
        is_node = rng.random(comps) < 0.8
        edge_comp = rng.integers(0, comps, edges) if comps else np.zeros(0, np.int64)
        edge_id = rng.integers(0, n_ids, edges).astype(np.int64)
        if ordered:
            reps = np.sort(reps)
            by_id = np.argsort(edge_id)
            edge_comp, edge_id = edge_comp[by_id], edge_id[by_id]
        parts.append((reps, is_node, edge_comp, edge_id))
    return parts


def _reference(parts):
    """Nodes: node representatives, representatives an edge leaves, edge ends;
    components by scipy; labels in the order of each component's lowest global id."""
    starts = [r[c] for r, _, c, _ in parts]
    nodes = np.unique(np.concatenate([r[m] for r, m, _, _ in parts] + starts
                                     + [e for _, _, _, e in parts]))
    a = np.concatenate([np.searchsorted(nodes, e) for e in starts])
    b = np.concatenate([np.searchsorted(nodes, e) for _, _, _, e in parts])
    g = sparse.coo_matrix((np.ones(len(a)), (a, b)), shape=(len(nodes), len(nodes)))
    _, comp = connected_components(g, directed=False)
    lowest = np.full(comp.max() + 1 if len(comp) else 0, np.iinfo(np.int64).max)
    np.minimum.at(lowest, comp, nodes)
    rank = np.argsort(np.argsort(lowest))
    out = []
    for r, _, _, _ in parts:
        pos = np.searchsorted(nodes, r)
        hit = (pos < len(nodes)) & (nodes[np.minimum(pos, len(nodes) - 1)] == r)
        lab = np.full(len(r), -1, dtype=np.int64)
        lab[hit] = rank[comp[pos[hit]]]
        out.append(lab)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_merge_equals_connected_components(seed):
    rng = np.random.default_rng(seed)
    n_ids = int(rng.choice([50, 1000, 10**6, 2**40]))
    comps = int(rng.integers(0, min(n_ids, 400)))
    parts = _random_parts(rng, n_ids, int(rng.integers(1, 6)), comps,
                          int(rng.integers(0, 300)) if comps else 0, ordered=seed % 2 == 0)
    got = merge_partitions(parts)
    ref = _reference(parts)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_no_nodes_gives_minus_one():
    parts = [(np.array([3, 7], np.int64), np.zeros(2, bool), np.zeros(0, np.int64),
              np.zeros(0, np.int64)), (np.zeros(0, np.int64), np.zeros(0, bool),
                                       np.zeros(0, np.int64), np.zeros(0, np.int64))]
    got = merge_partitions(parts)
    np.testing.assert_array_equal(got[0], [-1, -1])
    assert got[1].shape == (0,)


def test_ids_too_large_to_pack_take_the_argsort():
    """Global ids near 2**62 cannot share an int64 with their positions."""
    big = np.int64(2**62)
    parts = [(np.array([big + 5, big + 9], np.int64), np.array([True, True]),
              np.array([0], np.int64), np.array([big + 9], np.int64)),
             (np.array([big + 1], np.int64), np.array([True]), np.zeros(0, np.int64),
              np.zeros(0, np.int64))]
    got = merge_partitions(parts)
    np.testing.assert_array_equal(got[0], [1, 1])
    np.testing.assert_array_equal(got[1], [0])
