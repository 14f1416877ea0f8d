"""The cluster numbering of the GPU DBSCAN, run on the CPU.

``dbscan.table_gpu.ranks_by_caller_row`` runs here with its kernels and the
device primitives compiled by the host compiler (``_cuda_emulation``) and
NumPy in CuPy's place: a table built over the points in a permuted order
must still give scikit-learn's labels once clusters are numbered by their
lowest caller row.
"""

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin
from _cuda_emulation import FakeCupy, Module, compiler, emulate_device_kernels

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")


@pytest.fixture
def ranks(monkeypatch):
    """``ranks_by_caller_row`` on the emulated kernels, NumPy arrays in and out."""
    from skyjoin.cluster import grid_gpu, grid_gpu_kernels, table_gpu

    emulate_device_kernels(monkeypatch)
    mod = Module(grid_gpu_kernels.SOURCE)
    return lambda *args: table_gpu.ranks_by_caller_row(FakeCupy(), mod, *args)


def _labels_from_permuted_table(_ranks_by_caller_row, X, eps, m, perm):
    nt = skyjoin.self_join(X[perm], eps, device="cpu")
    n = len(X)
    core = ((np.diff(nt.indptr) + 1) >= m).astype(np.uint8)
    rows = np.repeat(np.arange(n), np.diff(nt.indptr))
    keep = core[rows].astype(bool) & core[nt.indices].astype(bool)
    g = csr_matrix((np.ones(int(keep.sum())), (rows[keep], nt.indices[keep])), shape=(n, n))
    _, comp = connected_components(g, directed=False)
    parent = np.arange(n)                       # what the GPU's hook + compress leave
    for c in np.unique(comp):
        members = np.flatnonzero(comp == c)
        parent[members] = members.min()
    rank = _ranks_by_caller_row(core, parent, perm, n)
    core_label = np.where(core.astype(bool), rank[parent], -1)
    labels = core_label.copy()
    for i in np.flatnonzero(core == 0):         # the border kernel: lowest core label
        nb = nt.indices[nt.indptr[i]:nt.indptr[i + 1]]
        c = core_label[nb][core[nb].astype(bool)]
        labels[i] = c.min() if c.size else -1
    out = np.empty(n, dtype=np.int64)
    out[perm] = labels
    return out


@pytest.mark.parametrize("seed,eps,m", [(0, 0.15, 3), (1, 0.12, 4), (2, 0.2, 6), (3, 0.05, 1)])
def test_numbering_by_caller_row_equals_sklearn(ranks, seed, eps, m):
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(0, 6, (2000, 2)), 1)      # ties and duplicates
    perm = rng.permutation(len(X))
    got = _labels_from_permuted_table(ranks, X, eps, m, perm)
    want = SkDBSCAN(eps=eps, min_samples=m).fit(X).labels_
    assert want.max() > 5
    np.testing.assert_array_equal(got, want)


def test_numbering_rejects_wrong_order_length(ranks):
    with pytest.raises(ValueError, match="order must have shape"):
        ranks(np.ones(3, np.uint8), np.zeros(3, np.int64), np.arange(2), 3)


def test_numbering_without_core_points(ranks):
    np.testing.assert_array_equal(ranks(np.zeros(4, np.uint8), np.full(4, -1), np.arange(4), 4),
                                  np.full(4, -1))
