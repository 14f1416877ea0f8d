"""The GPU grid DBSCAN's device memory by phase, emulated on the CPU.

``skyjoin.cluster.grid_gpu`` runs with its kernels compiled by the host
compiler (``_cuda_emulation``) and a stand-in for CuPy that counts the
bytes of every array it hands out while the array lives, as
``skyjoin._core.device_memory.PoolPeak`` counts CuPy's pool: the
high-water mark in all and per phase (``mark_phase``).  Thrust's sort is
modelled by its buffers (a key and an int64 order a point, as its radix
sort of pairs takes).  The data are the ArborX comparison's clustered 3-D
set scaled down (``bench.arborx.clustered``: nearly every cell holds one
point), at its two parameter pairs.  The labels must equal
scikit-learn's, and the peak, the row table aside, stay within 80 bytes a
point (issue 30: a billion 3-D points on one GPU); the grid's row table
of at least 2**22 entries is a fixed cost, large beside a few thousand
points.
"""

import weakref

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.spatial import cKDTree
from sklearn.cluster import DBSCAN as SkDBSCAN

from _cuda_emulation import FakeCupy, compiler, emulate_device_kernels, modules_by_real

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")

#: fixed bytes beside those a point: the bounds' partials, the pattern, scan sums
SLACK = 1 << 16


class CountingCupy(FakeCupy):
    """NumPy under CuPy's names, counting the bytes of the arrays it makes
    while they live (``used``), their high-water mark (``peak``) and that of
    each phase ``mark_phase`` ends (``phases``): PoolPeak's interface."""

    def __init__(self):
        self.used = self.peak = self.lap = 0
        self.phases = {}
        self.pool = self

    def used_bytes(self):
        return self.used

    def _free(self, nbytes):
        self.used -= nbytes

    def count(self, a):
        self.used += a.nbytes
        self.peak = max(self.peak, self.used)
        self.lap = max(self.lap, self.used)
        weakref.finalize(a, self._free, a.nbytes)
        return a

    def empty(self, shape, dtype=float):
        return self.count(np.empty(shape, dtype=dtype))

    def zeros(self, shape, dtype=float):
        return self.count(np.zeros(shape, dtype=dtype))

    def full(self, shape, value, dtype=None):
        return self.count(np.full(shape, value, dtype=dtype))

    def asarray(self, a, dtype=None):
        out = np.asarray(a, dtype=dtype)
        return out if out is a or out.base is not None else self.count(out)


def _data(n, seed=8):
    """``bench.arborx.clustered`` scaled to n points: Gaussian clusters of
    150 points on average, a fifth of the points uniform."""
    rng = np.random.default_rng(seed)
    k = n // 150
    centres = rng.uniform(0, 30, (k, 3))
    lab = rng.integers(0, k, n)
    X = centres[lab] + rng.normal(0, 1, (n, 3)) * rng.uniform(0.1, 0.6, k)[lab, None]
    X[: n // 5] = rng.uniform(0, 30, (n // 5, 3))
    return X


@pytest.fixture
def counted(monkeypatch):
    from skyjoin._core import device_memory, device_prims
    from skyjoin.cluster import grid_gpu, grid_gpu_kernels

    cp = CountingCupy()
    compiled_module = modules_by_real(grid_gpu_kernels.SOURCE)

    def argsort(_cp, keys, in_place=False):
        """Thrust's radix argsort: our copy of the keys unless in place, the
        order, and its own buffers (a key and an order a point) meanwhile."""
        work = keys if in_place else cp.count(keys.copy())
        order = cp.empty(keys.size, dtype=np.int64)
        buffers = cp.empty(keys.nbytes + 8 * keys.size, dtype=np.uint8)
        order[:] = np.argsort(work, kind="stable")
        work[:] = work[order]
        del buffers
        return order

    monkeypatch.setattr(grid_gpu, "cupy", lambda: cp)
    monkeypatch.setattr(grid_gpu, "compiled_module", compiled_module)
    emulate_device_kernels(monkeypatch)
    monkeypatch.setattr(device_prims, "argsort", argsort)
    monkeypatch.setattr(device_memory.PoolPeak, "active", cp)
    return cp, grid_gpu.gpu_grid_dbscan


def _row_table_bytes(X, eps):
    from skyjoin.index.fine_grid import row_grid_shape, row_table_fits

    lo, hi = X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)
    _, radix, korder = row_grid_shape(lo, hi, len(X), eps, row_table=False)
    rows = int(np.prod(radix[korder[:-1]]))
    assert row_table_fits(rows, len(X))          # the dense table (the hash table: haversine)
    return 4 * (rows + 1)


def _float32_oracle(X32, eps, m):
    """scikit-learn's DBSCAN on the float32 test (the squared distance summed
    over k in order, each step rounded to float32, against float32(eps)
    squared), from a sparse graph of the pairs that the test accepts among
    those within eps (1 + 1e-4) in float64."""
    P = X32.astype(np.float64)
    pairs = cKDTree(P).query_pairs(eps * (1 + 1e-4), output_type="ndarray")
    i, j = pairs[:, 0], pairs[:, 1]
    s = np.zeros(len(i), dtype=np.float32)
    for k in range(X32.shape[1]):
        t = X32[i, k] - X32[j, k]
        s = s + t * t
    e = np.float32(eps)
    keep = s <= e * e
    i, j = i[keep], j[keep]
    graph = csr_matrix((np.full(2 * len(i), 0.5), (np.r_[i, j], np.r_[j, i])),
                       shape=(len(X32), len(X32)))
    return SkDBSCAN(eps=0.5, min_samples=m, metric="precomputed").fit(graph)


@pytest.mark.parametrize("eps,m", [(0.1, 2), (0.25, 10)])
@pytest.mark.parametrize("residence", ["float32 on the device", "float64 scratch"])
def test_emulated_grid_peak_within_80_bytes_a_point(counted, eps, m, residence):
    cp, gpu_grid_dbscan = counted
    n = 30000
    X0 = _data(n)
    if residence == "float32 on the device":     # the caller's points stay, and count
        X0 = X0.astype(np.float32)
        ref = _float32_oracle(X0, eps, m)
        overwrite = False
    else:                                        # the upload, reordered in place
        ref = SkDBSCAN(eps=eps, min_samples=m).fit(X0)
        overwrite = True
    X = cp.count(X0.copy())
    assert cp.used == X.nbytes
    core, labels = gpu_grid_dbscan(X, eps, m, on_device=True, overwrite_x=overwrite)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)
    assert ref.labels_.max() > 50 and (ref.labels_ < 0).any()
    table = _row_table_bytes(X0, eps)
    print(f"\n{residence}, eps {eps}, min_samples {m}: peak {(cp.peak - table) / n:.1f} B a "
          f"point beside the row table ({table / n:.1f}); phases, the table in: "
          + ", ".join(f"{k} {v / n:.1f}" for k, v in cp.phases.items()))
    assert cp.peak - table - SLACK <= 80 * n
