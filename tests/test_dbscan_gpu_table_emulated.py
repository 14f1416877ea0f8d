"""DBSCAN over a neighbour table on the GPU (``skyjoin.cluster.table_gpu``:
core flags, the warp-per-row hooking of the lock-free union-find, the
numbering, the warp-shuffle minimum of the border points) with its kernels
run on the host (``_cuda_emulation``: every block's threads as fibers that
meet at their warp collectives), NumPy in CuPy's place.  Oracle:
scikit-learn's DBSCAN, weighted and not.  The real kernels on a GPU are
checked by the GPU tests (``-m gpu``).
"""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin
from _cuda_emulation import FakeCupy, Module, compiler, emulate_device_kernels
from _dbscan_cases import random_cases

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")


@pytest.fixture
def table_dbscan(monkeypatch):
    from skyjoin.cluster import table_gpu

    fake = FakeCupy()
    monkeypatch.setattr(table_gpu, "cupy", lambda: fake)
    emulate_device_kernels(monkeypatch)
    module = Module(table_gpu._SOURCE)
    monkeypatch.setattr(table_gpu, "_module", lambda: module)
    return table_gpu.gpu_dbscan_table


@pytest.mark.parametrize("case", range(12))
def test_emulated_table_dbscan_equals_sklearn(table_dbscan, case):
    X, eps, m, w = list(random_cases(23, 12, 900, 5))[case]
    nt = skyjoin.self_join(X, eps, device="cpu", sort=False)
    is_core, labels = table_dbscan(nt.indptr, nt.indices.astype(np.int32), m, sample_weight=w)
    sk = SkDBSCAN(eps=eps, min_samples=m, algorithm="kd_tree").fit(X, sample_weight=w)
    np.testing.assert_array_equal(np.flatnonzero(is_core), sk.core_sample_indices_)
    np.testing.assert_array_equal(labels, sk.labels_)


def test_emulated_table_dbscan_numbers_by_the_caller_rows(table_dbscan):
    """With ``order`` (a table over the points in another order), clusters
    are numbered by their lowest caller row, as scikit-learn numbers them."""
    rng = np.random.default_rng(4)
    X = np.concatenate([c + rng.normal(0, 0.3, (120, 2)) for c in rng.uniform(0, 8, (5, 2))])
    perm = rng.permutation(X.shape[0])
    nt = skyjoin.self_join(X[perm], 0.4, device="cpu", sort=False)
    is_core, labels = table_dbscan(nt.indptr, nt.indices.astype(np.int32), 5, order=perm)
    sk = SkDBSCAN(eps=0.4, min_samples=5).fit(X)
    got = np.empty_like(labels)
    got[perm] = labels
    np.testing.assert_array_equal(got, sk.labels_)
    np.testing.assert_array_equal(np.sort(perm[np.flatnonzero(is_core)]), sk.core_sample_indices_)
