"""The GPU grid DBSCAN's kernels and orchestration, emulated on the CPU.

``skyjoin.cluster.grid_gpu`` is run with its CUDA C++ kernels compiled by
the host compiler and launched thread by thread (``_cuda_emulation``), and
NumPy in CuPy's place.  Its labels must equal scikit-learn's.  The real
kernels on a GPU are checked by the GPU tests (``-m gpu``).
"""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

from _cuda_emulation import FakeCupy, compiler, emulate_device_kernels, modules_by_real

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")


@pytest.fixture
def emulated(monkeypatch):
    from skyjoin.cluster import grid_gpu as gpu_grid, grid_gpu_kernels

    fake = FakeCupy()
    compiled_module = modules_by_real(grid_gpu_kernels.SOURCE)   # float or double points

    monkeypatch.setattr(gpu_grid, "cupy", lambda: fake)
    monkeypatch.setattr(gpu_grid, "compiled_module", compiled_module)
    compiled = emulate_device_kernels(monkeypatch)
    gpu_grid.gpu_grid_dbscan.compiled = compiled
    return gpu_grid.gpu_grid_dbscan


def _cases():
    rng = np.random.default_rng(7)
    centres = rng.uniform(0, 20, (6, 2))
    blobs = np.concatenate([c + rng.normal(0, 0.6, (300, 2)) for c in centres])
    yield "blobs-2d", blobs, 0.3, 10
    yield "blobs-2d-m1", blobs, 0.2, 1
    yield "blobs-2d-m2", blobs, 0.05, 2
    yield "grid-ties-2d", np.round(rng.uniform(0, 4, (1500, 2)) * 4) / 4, 0.25, 4
    yield "dups-1d", np.round(rng.uniform(0, 30, (1200, 1))), 1.0, 5
    yield "uniform-3d", rng.uniform(0, 3, (1500, 3)), 0.35, 4
    yield "uniform-4d", rng.uniform(-2, 2, (1500, 4)), 0.6, 3
    yield "clumps-3d", np.concatenate([rng.normal(0, 0.05, (400, 3)),
                                       rng.uniform(-1, 1, (600, 3))]), 0.1, 6
    yield "clumps-3d-m2", np.concatenate([rng.normal(0, 0.05, (400, 3)),
                                          rng.uniform(-1, 1, (600, 3))]), 0.12, 2
    yield "grid-ties-3d-m2", np.round(rng.uniform(0, 3, (900, 3)) * 4) / 4, 0.25, 2


@pytest.mark.parametrize("name,X,eps,m", list(_cases()), ids=[c[0] for c in _cases()])
def test_emulated_grid_dbscan_equals_sklearn(emulated, name, X, eps, m):
    timings = {}
    core, labels = emulated(X, eps, m, timings=timings)
    ref = SkDBSCAN(eps=eps, min_samples=m).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)
    # min_samples <= 2: no core pass, the links find the core points
    assert set(timings) >= {"grid", "link", "labels"} | ({"core"} if m > 2 else set())
    assert ("core" in timings) == (m > 2)


def test_emulated_grid_dbscan_compiles_its_kit_only(emulated):
    """One compile of the shared kernels: the DBSCAN kit holds every instance
    used, the cell keys packed above their index or not (1-D points over
    about 2**24 cells: 24 key bits and 10 index bits pass int32's 31)."""
    from skyjoin._core.device_kernels import KITS
    from skyjoin._core.device_prims import packs_index

    rng = np.random.default_rng(5)
    X = np.concatenate([rng.normal(0, 0.3, (400, 2)), rng.uniform(-2, 2, (300, 2))])
    for extent in (1.0, 1e5):
        emulated(X * extent, 0.1 * extent, 5)
    base = rng.uniform(0, 1.6e6, 300)
    line = np.concatenate([base, base + 0.05, rng.uniform(0, 1.6e6, 100)])[:, None]
    assert not packs_index(line.shape[0], 2**24, np.int32)
    core, labels = emulated(line, 0.1, 2)
    np.testing.assert_array_equal(labels, SkDBSCAN(eps=0.1, min_samples=2).fit(line).labels_)
    assert emulated.compiled == [KITS["dbscan"]]


def test_emulated_grid_declines_huge_grids_and_high_d(emulated):
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (500, 2))
    X[0] = [1e9, 1e9]                      # the bounding box needs too many cells
    assert emulated(X, 0.01, 3) is None
    assert emulated(rng.uniform(0, 1, (50, 5)), 0.3, 3) is None
    core, labels = emulated(np.zeros((0, 2)), 0.3, 3)
    assert core.size == 0 and labels.size == 0


def test_emulated_gpu_sweep_equals_sklearn(emulated, monkeypatch):
    import skyjoin._core.device as device
    from skyjoin.cluster.sweep import api as sweep

    monkeypatch.setattr(device, "cupy", lambda: FakeCupy())
    rng = np.random.default_rng(3)
    X = np.concatenate([c + rng.normal(0, 0.4, (250, 2)) for c in rng.uniform(0, 8, (4, 2))])
    got = list(sweep._sweep_gpu_grid(X, [0.2, 0.3], [12, 6, 2], progress=False))
    assert [(r.eps, r.min_samples) for r in got] == [(0.2, 12), (0.2, 6), (0.2, 2),
                                                      (0.3, 12), (0.3, 6), (0.3, 2)]
    for r in got:
        ref = SkDBSCAN(eps=r.eps, min_samples=r.min_samples).fit(X)
        np.testing.assert_array_equal(r.labels, ref.labels_)
        np.testing.assert_array_equal(r.core_sample_indices, ref.core_sample_indices_)
        assert r.timings["path"] == "grid-gpu" and r.n_clusters == ref.labels_.max() + 1


def _float32_oracle(X, eps, m):
    """scikit-learn's DBSCAN on the float32 test: the squared distance summed
    over k in order, each difference, square and sum rounded to float32,
    against float32(eps) squared in float32 (NumPy's float32 arithmetic,
    no fused multiply-add), read as a precomputed 0/1 distance matrix."""
    X = X.astype(np.float32)
    s = np.zeros((len(X), len(X)), dtype=np.float32)
    for k in range(X.shape[1]):
        t = X[:, None, k] - X[None, :, k]
        s = s + t * t
    e = np.float32(eps)
    within = s <= e * e
    return SkDBSCAN(eps=0.5, min_samples=m, metric="precomputed").fit(
        np.where(within, 0.0, 1.0))


@pytest.mark.parametrize("name,X,eps,m", list(_cases()), ids=[c[0] for c in _cases()])
def test_emulated_grid_dbscan_float32_equals_float32_oracle(emulated, name, X, eps, m):
    """float32 points are tested in float32."""
    core, labels = emulated(X.astype(np.float32), eps, m)
    ref = _float32_oracle(X, eps, m)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)


def test_emulated_grid_spans_a_box_of_many_more_cells_than_points(emulated):
    """Only the non-empty cells are stored: a box of about 5e9 cells over
    400 points still takes the grid."""
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(0, 0.05, (200, 3)), rng.uniform(0, 100, (200, 3))])
    core, labels = emulated(X, 0.1, 4)
    ref = SkDBSCAN(eps=0.1, min_samples=4).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)


def test_emulated_on_device_returns_the_device_arrays(emulated, monkeypatch):
    """With on_device (the plan's ``DBSCANPlan.on_device``) the results are the
    device arrays themselves: the device-to-host copy never runs (it does
    without on_device), for one clustering and for the sweep."""
    from skyjoin.cluster import grid_gpu
    from skyjoin.cluster.plan import plan_sweep
    from skyjoin.cluster.sweep import api as sweep
    import skyjoin._core.device as device

    def trap(*args, **kw):
        raise AssertionError("a device-to-host copy ran")

    monkeypatch.setattr(grid_gpu, "d2h", trap)
    _, X, eps, m = next(_cases())
    ref = SkDBSCAN(eps=eps, min_samples=m).fit(X)
    with pytest.raises(AssertionError, match="device-to-host copy"):
        emulated(X, eps, m)
    core, labels = emulated(X, eps, m, on_device=True)
    assert core.dtype == np.int64 and labels.dtype == np.intp
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)
    monkeypatch.setattr(device, "cupy", lambda: FakeCupy())
    plan = plan_sweep("gpu", "float64", False, 2, 1, on_device=True)
    assert plan.path == "grid-gpu" and plan.on_device
    for r in sweep._sweep_gpu_grid(X, [eps], [m, 2 * m], progress=False, plan=plan):
        ref = SkDBSCAN(eps=eps, min_samples=r.min_samples).fit(X)
        np.testing.assert_array_equal(r.labels, ref.labels_)
        np.testing.assert_array_equal(r.core_sample_indices, ref.core_sample_indices_)


@pytest.mark.parametrize("offset", [1e8, -3e9, 1e-30])
def test_emulated_grid_boxes_rounded_outwards_stay_exact(emulated, offset):
    """The cells' boxes are kept as floats rounded outwards: far from the
    origin a float's spacing (8 at 1e8, 256 at 3e9) dwarfs eps, the boxes
    prune nothing, and the labels, ties at eps included, still equal
    scikit-learn's; tiny coordinates round the other way."""
    rng = np.random.default_rng(12)
    scale = 1e-30 if offset == 1e-30 else 1.0
    X = np.round(rng.uniform(0, 6, (700, 3)) * 4) / 4 * scale + offset
    for m in (2, 3):
        core, labels = emulated(X, 0.25 * scale, m)
        ref = SkDBSCAN(eps=0.25 * scale, min_samples=m).fit(X)
        np.testing.assert_array_equal(labels, ref.labels_)
        np.testing.assert_array_equal(core, ref.core_sample_indices_)
        assert ref.labels_.max() >= (30 if m == 2 else 1) and (ref.labels_ < 0).any()


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_emulated_grid_pruning_by_place_keeps_pairs_at_eps(emulated, d):
    """Triples of a centre and two points a hair inside, at or beyond eps from
    it, in random directions: every kind of neighbour cell holds such pairs,
    and the pruning of the pattern's rows by each point's place in its cell
    (``row_window``) keeps each pair that the test accepts, in float64 and
    float32, on the link path (min_samples 2) and the core and border
    searches (3)."""
    rng = np.random.default_rng(40 + d)
    eps, k = 0.3, 300
    centres = rng.uniform(0, 40 * k ** (1 / d) * eps, (k, d))
    parts = [centres]
    for _ in range(2):
        u = rng.normal(size=(k, d))
        u /= np.linalg.norm(u, axis=1)[:, None]
        r = eps * (1 + rng.choice([-1e-9, 0.0, 1e-9, -1e-6, 1e-6, -1e-3], k))
        parts.append(centres + u * r[:, None])
    X = np.concatenate(parts)
    for m in (2, 3):
        ref = SkDBSCAN(eps=eps, min_samples=m).fit(X)
        core, labels = emulated(X, eps, m)
        np.testing.assert_array_equal(labels, ref.labels_)
        np.testing.assert_array_equal(core, ref.core_sample_indices_)
        assert ref.labels_.max() > 50 and (ref.labels_ < 0).sum() > 50
        ref32 = _float32_oracle(X, eps, m)
        core, labels = emulated(X.astype(np.float32), eps, m)
        np.testing.assert_array_equal(labels, ref32.labels_)
        np.testing.assert_array_equal(core, ref32.core_sample_indices_)


@pytest.mark.parametrize("name,X,eps,m", list(_cases())[:6], ids=[c[0] for c in _cases()][:6])
def test_emulated_grid_without_a_row_table_searches_the_keys(emulated, monkeypatch, name, X,
                                                             eps, m):
    """A row table over its limit (sphere-like data spans far more rows than
    points) is replaced by a binary search of the cells' keys: same labels."""
    from skyjoin.cluster import grid_gpu

    monkeypatch.setattr(grid_gpu, "row_table_fits", lambda rows, n: False)
    core, labels = emulated(X, eps, m)
    ref = SkDBSCAN(eps=eps, min_samples=m).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)


def test_emulated_grid_band_between_sure_radius_and_eps(emulated):
    """eps_sure < eps: pairs within eps_sure decide, a pair in between that
    matters makes the answer None (the caller's exact path runs); with no
    pair in the band the labels are those at eps (= at eps_sure)."""
    rng = np.random.default_rng(21)
    lattice = np.round(rng.uniform(0, 10, (500, 2)) * 4) / 4     # ties at 0.25
    for m in (2, 4):
        assert emulated(lattice, 0.25, m, eps_sure=0.2499) is None
        core, labels = emulated(lattice, 0.26, m, eps_sure=0.255)   # no pair in (0.255, 0.26]
        ref = SkDBSCAN(eps=0.25, min_samples=m).fit(lattice)
        np.testing.assert_array_equal(labels, ref.labels_)
        np.testing.assert_array_equal(core, ref.core_sample_indices_)
        assert ref.labels_.max() > 2
    # a band pair that cannot matter: two far, dense clumps whose only band pairs
    # join points already in one cluster
    clump = rng.normal(0, 0.01, (200, 2))
    X = np.concatenate([clump, clump + [5.0, 0.0]])
    core, labels = emulated(X, 0.05, 3, eps_sure=0.045)
    ref = SkDBSCAN(eps=0.05, min_samples=3).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)


@pytest.mark.parametrize("row_table", [True, False])
def test_emulated_grid_haversine_on_unit_vectors(emulated, monkeypatch, row_table):
    """Haversine DBSCAN as the plan runs it on the GPU: the grid of the unit
    vectors at the filter radius, pairs within the sure radius decided
    there; the labels are scikit-learn's haversine labels, poles and the
    antimeridian included.  Points on one parallel 2**-6 rad apart put pairs
    in the band: None, and the table path decides."""
    from skyjoin.cluster import grid_gpu
    from skyjoin.datasets import geographic
    from skyjoin.simjoin.metrics import decision_radii, filter_points

    if not row_table:                   # the hash table of the non-empty rows
        monkeypatch.setattr(grid_gpu, "row_table_fits", lambda rows, n: False)
    X = geographic(3000, n_clusters=8, spread_km=400, seed=5)
    for eps, m in ((0.004, 5), (0.003, 2)):
        U = filter_points(X, "haversine")
        sure, upper = decision_radii(eps, "haversine")
        core, labels = emulated(U, upper, m, eps_sure=sure)
        ref = SkDBSCAN(eps=eps, min_samples=m, metric="haversine").fit(X)
        np.testing.assert_array_equal(labels, ref.labels_)
        np.testing.assert_array_equal(core, ref.core_sample_indices_)
        assert ref.labels_.max() >= 3
    ring = np.stack([np.zeros(400), np.arange(400) * 2.0 ** -6 - 3.0], axis=1)
    eps = 2.0 ** -6
    sure, upper = decision_radii(eps, "haversine")
    assert emulated(filter_points(ring, "haversine"), upper, 3, eps_sure=sure) is None


@pytest.mark.parametrize("linked", [False, True])
def test_emulated_numbering_by_lowest_caller_row(emulated, linked):
    """``number_clusters`` (atomic minima, a scan in caller order): each core
    point's label is the rank of its component's lowest caller row, written
    over the parents; other points -1, whether their parent is -1 or
    (every point linked, min_samples <= 2) the point itself."""
    from skyjoin.cluster import grid_gpu

    rng = np.random.default_rng(9)
    n = 4000
    comp = rng.integers(0, 250, n)
    core = (rng.random(n) < 0.6).astype(np.uint8)
    parent = np.arange(n, dtype=np.int64) if linked else np.full(n, -1, dtype=np.int64)
    for c in np.unique(comp[core == 1]):
        members = np.flatnonzero((comp == c) & (core == 1))
        parent[members] = rng.choice(members)          # compressed: any member as root
    perm = rng.permutation(n).astype(np.int32)
    g = grid_gpu.GridClusters(None, perm, n, 2, "double", (), (), (), core, parent)
    labels = grid_gpu.number_clusters(g)
    lows = {c: perm[(comp == c) & (core == 1)].min() for c in np.unique(comp[core == 1])}
    rank = {c: r for r, c in enumerate(sorted(lows, key=lows.get))}
    want = np.array([rank[comp[p]] if core[p] else -1 for p in range(n)])
    assert labels is parent and want.max() > 100
    np.testing.assert_array_equal(labels, want)


@pytest.mark.parametrize("span", [1e8, 3e9])
def test_emulated_grid_refuses_a_row_of_more_cells_than_int32(emulated, span):
    """Along the sparse dimension a cell's place is an int32 (``cell_q``):
    1-D points over 1e8 / 0.5 = 2e8 cells take the grid, with scikit-learn's
    labels; over 3e9 / 0.5 = 6e9 cells the grid declines (None: the join
    path), where it used to link the wrong cells."""
    from skyjoin.cluster.grid_gpu import MAX_ROW_CELLS

    rng = np.random.default_rng(9)
    base = np.sort(rng.uniform(0, span, 60))
    X = np.concatenate([base, base + 0.3, base + 0.45, rng.uniform(0, span, 40)])[:, None]
    res = emulated(X, 0.5, 2)
    if span / 0.5 > MAX_ROW_CELLS:
        assert res is None
        return
    ref = SkDBSCAN(eps=0.5, min_samples=2).fit(X)
    np.testing.assert_array_equal(res[1], ref.labels_)
    np.testing.assert_array_equal(res[0], ref.core_sample_indices_)
