"""The brute-force join (``algorithm="brute"``): pair for pair the float64
(or float32) brute-force oracle, ties at eps included, and adversarial
inputs for the filter's margin (large norms close together, huge and tiny
scales).  The GPU engine's screen kernel runs here through the CPU
emulation of CUDA (``_cuda_emulation``); on a GPU, ``-m gpu``."""

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.simjoin import brute_bound
from skyjoin.simjoin.cpu import brute as cpu_brute
from skyjoin.simjoin.algorithm import (BRUTE_MIN_DIMS, BRUTE_MIN_WORK, JoinSample,
                                       candidate_fraction, choose_algorithm)

from _cuda_emulation import FakeCupy, compiler, modules_by_real
from oracles import check_gpu_screen

gpu = pytest.mark.gpu


def oracle(R, S, eps, dtype=np.float64):
    """The join's test, written independently: sum_k (r_k - s_k)^2 in order
    from zero, each operation rounded to ``dtype`` (NumPy, no fused
    multiply-add), against e * e rounded the same way."""
    R, S = np.asarray(R, dtype), np.asarray(S, dtype)
    e = dtype(eps)
    s = np.zeros((len(R), len(S)), dtype=dtype)
    for k in range(R.shape[1]):
        t = R[:, None, k] - S[None, :, k]
        s = s + t * t
    return s <= e * e


def table_of(mask, include_self=False):
    """(indptr, indices) of a boolean pair matrix, columns ascending."""
    if include_self:
        mask = mask | np.eye(*mask.shape, dtype=bool)
    indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))])
    return indptr, np.nonzero(mask)[1]


def check_self(X, eps, precision="float64", device="cpu", **kw):
    dtype = np.float32 if precision == "float32" else np.float64
    mask = oracle(X, X, eps, dtype)
    np.fill_diagonal(mask, False)
    nt = sj.self_join(X, eps, algorithm="brute", device=device, precision=precision, **kw)
    indptr, indices = table_of(mask, kw.get("include_self", False))
    np.testing.assert_array_equal(nt.indptr, indptr)
    np.testing.assert_array_equal(nt.indices, indices)
    counts = sj.self_join(X, eps, algorithm="brute", device=device, precision=precision,
                          output="counts", **kw)
    np.testing.assert_array_equal(counts, np.diff(indptr))
    return nt


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of 64 x 96, so that every case crosses tile edges, and rows that
    keep two survivors a tile, so that many are screened again."""
    monkeypatch.setattr(cpu_brute, "TILE_ROWS", 64)
    monkeypatch.setattr(cpu_brute, "TILE_COLS", 96)
    monkeypatch.setattr(cpu_brute, "SCREEN_WIDTH", 2)        # rows overflow: screened again


@pytest.mark.parametrize("d", [1, 5, 20, 64, 130])
@pytest.mark.parametrize("seed", [0, 1])
def test_self_join_equals_the_oracle(small_tiles, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, d))
    # eps at the 2% quantile of the distances: a few neighbours a point
    D = np.sqrt(((X[:50, None] - X[None]) ** 2).sum(-1))
    eps = float(np.quantile(D[D > 0], 0.02))
    nt = check_self(X, eps)
    assert nt.n_pairs > 0
    check_self(X, eps, include_self=True)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_join_equals_the_oracle(small_tiles, precision):
    rng = np.random.default_rng(3)
    dtype = np.float32 if precision == "float32" else np.float64
    R = rng.normal(size=(230, 40)).astype(dtype)
    S = rng.normal(size=(310, 40)).astype(dtype)
    eps = 6.5
    mask = oracle(R, S, eps, dtype)
    assert mask.any() and not mask.all()
    nt = sj.join(R, S, eps, algorithm="brute", device="cpu", precision=precision)
    indptr, indices = table_of(mask)
    np.testing.assert_array_equal(nt.indptr, indptr)
    np.testing.assert_array_equal(nt.indices, indices)
    c = sj.join(R, S, eps, algorithm="brute", device="cpu", precision=precision,
                output="counts")
    np.testing.assert_array_equal(c, mask.sum(axis=1))


def test_float32_self_join_equals_the_float32_oracle(small_tiles):
    X = np.random.default_rng(4).normal(size=(300, 24)).astype(np.float32)
    check_self(X, 4.0, precision="float32")


def test_pairs_exactly_at_eps(small_tiles):
    """Integer coordinates: many pairs lie exactly at eps (representable);
    the test is <=, so they are in, as the grid path has them."""
    rng = np.random.default_rng(5)
    B = rng.integers(0, 9, size=(80, 20)).astype(np.float64) * 10
    step = np.zeros((80, 20))
    step[np.arange(80), rng.integers(0, 20, 80)] = 2.0          # distance exactly 2
    quad = np.zeros((80, 20))
    quad[:, :4] = 1.0                                           # sqrt(4 * 1) = 2 again
    X = np.concatenate([B, B + step, B - quad, B + 0.5 * step])
    nt = check_self(X, 2.0)
    g = sj.self_join(X, 2.0, algorithm="grid", device="cpu")
    np.testing.assert_array_equal(nt.indices, g.indices)
    D2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    assert (D2 == 4.0).sum() > 100        # the ties are really there


def test_large_norms_close_together(small_tiles):
    """Two tight clusters far from their common centre (+-1e8): the margin is
    wide (it grows with the norms), so whole clusters become candidates, and
    the exact test must still decide every pair as the oracle does."""
    rng = np.random.default_rng(6)
    A = 1e8 + rng.normal(0, 1e-3, size=(150, 16))
    B = -1e8 + rng.normal(0, 1e-3, size=(150, 16))
    X = np.concatenate([A, B])
    check_self(X, 4e-3)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_huge_and_tiny_scales(small_tiles, scale):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 30))
    a = sj.self_join(X * scale, 5.0 * scale, algorithm="brute", device="cpu")
    b = sj.self_join(X * scale, 5.0 * scale, algorithm="grid", device="cpu")
    assert a.n_pairs > 0
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)


def test_empty_and_single_point():
    for X in (np.zeros((0, 20)), np.ones((1, 20))):
        nt = sj.self_join(X, 1.0, algorithm="brute", device="cpu")
        assert nt.n_pairs == 0 and nt.shape == (len(X), len(X))
        assert sj.self_join(X, 1.0, algorithm="brute", device="cpu",
                            output="counts").tolist() == [0] * len(X)


def test_filter_bound_keeps_every_pair_within_eps():
    """The margin, directly: for pairs around eps far from their centre (the
    rounding of the far coordinates puts some just over eps), every pair
    that the test accepts screens within the threshold."""
    rng = np.random.default_rng(8)
    d, eps = 50, 1e-3
    base = rng.normal(size=d) * 1e6
    u = rng.normal(size=(400, d))
    u /= np.linalg.norm(u, axis=1)[:, None]
    A = base + rng.normal(size=(400, d))
    B = A + u * eps * (1 - 1e-12)
    ok = oracle(A[:, None, :].reshape(-1, d), B, eps).diagonal()
    Qc, nq_, rq, Sc, ns_, rs = brute_bound.centred(A, np.concatenate([A, B]))
    Bc = Sc[400:]
    nb, rb = ns_[400:], rs[400:]
    fb = brute_bound.filter_bound(eps * eps, d, "float64")
    g = (Qc * Bc).sum(axis=1)
    s = (nq_ + nb) - 2.0 * g
    rr = rq + rb
    thr = ((fb.root_t + fb.cu * rr) ** 2 + fb.cg * rr * rr) * fb.inflate
    assert 50 < ok.sum() < len(ok)
    assert (s[ok] <= thr[ok]).all()


def test_choose_algorithm_rule():
    d = BRUTE_MIN_DIMS
    assert choose_algorithm("auto", d, sample=JoinSample(BRUTE_MIN_WORK / d)) == "brute"
    assert choose_algorithm("auto", d, sample=JoinSample(0.99 * BRUTE_MIN_WORK / d)) == "grid"
    assert choose_algorithm("auto", d - 1, sample=JoinSample(1.0)) == "grid"
    assert choose_algorithm("auto", 100) == "grid"                 # no sample: the grid
    assert choose_algorithm("grid", 100, sample=JoinSample(1.0)) == "grid"
    assert choose_algorithm("brute", 2) == "brute"
    assert choose_algorithm("auto", 100, chunks=True, sample=JoinSample(1.0)) == "grid"
    with pytest.raises(ValueError, match="does not stream chunks"):
        choose_algorithm("brute", 100, chunks=True)
    with pytest.raises(ValueError, match="algorithm must be"):
        sj.self_join(np.zeros((3, 2)), 1.0, algorithm="kd_tree", device="cpu")


def test_candidate_fraction_against_all_pairs():
    """The sampled share of pairs in adjacent cells of the six leading
    dimensions, on data small enough to be sampled whole: equal to the
    share over all pairs."""
    rng = np.random.default_rng(14)
    X = rng.uniform(0, 4, size=(300, 9))
    c = np.floor((X[:, :6] - X[:, :6].min(axis=0)) / 1.0)
    adjacent = (np.abs(c[:, None, :] - c[None, :, :]) <= 1).all(axis=2)
    assert candidate_fraction(X, X, 1.0) == pytest.approx(adjacent.mean())
    assert 0.0 < candidate_fraction(X, X, 1.0) < 1.0
    assert candidate_fraction(X, X, 100.0) == 1.0


def test_auto_reads_the_data_in_high_dimensions():
    """The manifold's pairs are nearly all grid candidates (brute force);
    well-separated clusters in 128-D are not (the grid); few dimensions
    never sample (the grid)."""
    from skyjoin._core.plans import recording

    rng = np.random.default_rng(9)
    manifold = rng.normal(size=(600, 12)) @ rng.normal(size=(12, 40)) / np.sqrt(12)
    centres = rng.uniform(0, 1000, (20, 128))
    blobs = np.concatenate([c + rng.normal(0, 1.5, (30, 128)) for c in centres])
    with recording() as plans:
        sj.self_join(manifold, 3.0, device="cpu")
        sj.self_join(blobs, 22.0, device="cpu")
        sj.self_join(manifold[:, :3], 0.3, device="cpu")
    algos = [p.algorithm for p in plans if hasattr(p, "algorithm")]
    assert algos == ["brute", "grid", "grid"]


# -- the GPU engine, its kernel emulated on the CPU --------------------------

@pytest.fixture
def emulated_gpu(monkeypatch):
    if compiler() is None:
        pytest.skip("no host C++ compiler")
    from skyjoin.simjoin.gpu import brute as gpu_brute

    fake = FakeCupy()
    compiled_module = modules_by_real(gpu_brute.SOURCE)

    monkeypatch.setattr(gpu_brute, "cupy", lambda: fake)
    monkeypatch.setattr(gpu_brute, "compiled_module", compiled_module)
    monkeypatch.setattr(gpu_brute, "TILE", 40)
    monkeypatch.setattr(gpu_brute, "_FIRST_CAPACITY", 16)       # overflow and retry
    monkeypatch.setattr(gpu_brute, "d2h", lambda cp, a: np.asarray(a))
    monkeypatch.setattr(gpu_brute, "guard_pairs", lambda *a, **k: None)
    return gpu_brute


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_emulated_gpu_brute_equals_the_oracle(emulated_gpu, precision):
    from skyjoin.simjoin.plan import request

    dtype = np.float32 if precision == "float32" else np.float64
    rng = np.random.default_rng(10)
    X = rng.normal(size=(90, 18)).astype(dtype)
    R = rng.normal(size=(50, 18)).astype(dtype)
    eps = 5.0
    for include_self in (False, True):
        plan = request("cpu", self_join=True, precision=precision, include_self=include_self,
                       algorithm="brute")
        nt = emulated_gpu.run(plan, None, X, eps)
        mask = oracle(X, X, eps, dtype)
        np.fill_diagonal(mask, False)
        indptr, indices = table_of(mask, include_self)
        np.testing.assert_array_equal(nt.indptr, indptr)
        np.testing.assert_array_equal(nt.indices, indices)
        c = emulated_gpu.run(request("cpu", self_join=True, output="counts",
                                     include_self=include_self, precision=precision,
                                     algorithm="brute"), None, X, eps)
        np.testing.assert_array_equal(c, np.diff(indptr))
    mask = oracle(R, X, eps, dtype)
    nt = emulated_gpu.run(request("cpu", self_join=False, precision=precision,
                                  algorithm="brute"), R, X, eps)
    indptr, indices = table_of(mask)
    np.testing.assert_array_equal(nt.indptr, indptr)
    np.testing.assert_array_equal(nt.indices, indices)


# -- on a GPU -----------------------------------------------------------------

@gpu
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gpu_brute_equals_grid_and_cpu(precision):
    rng = np.random.default_rng(11)
    Z = rng.normal(size=(6000, 6)) @ rng.normal(size=(6, 48)) / np.sqrt(6)
    X = Z + rng.normal(0, 0.05, size=Z.shape)
    check_gpu_screen("brute", X, 1.0, precision, [("grid", "gpu"), ("brute", "cpu")])


@gpu
def test_gpu_brute_adversarial_margin_and_ties():
    rng = np.random.default_rng(12)
    A = 1e8 + rng.normal(0, 1e-3, size=(300, 16))
    B = -1e8 + rng.normal(0, 1e-3, size=(300, 16))
    X = np.concatenate([A, B])
    check_self(X, 4e-3, device="gpu")
    B = rng.integers(0, 9, size=(150, 20)).astype(np.float64) * 10
    step = np.zeros((150, 20))
    step[np.arange(150), rng.integers(0, 20, 150)] = 2.0
    check_self(np.concatenate([B, B + step, B - step]), 2.0, device="gpu")


# -- DBSCAN's tables in high dimensions ----------------------------------------

def _plane_clusters_20d():
    """Clusters on a 2-D plane in 20-D, tight enough that the grid's six
    indexed dimensions would make most pairs candidates."""
    rng = np.random.default_rng(13)
    C = rng.normal(0, 0.6, (4, 2))
    L = np.concatenate([c + rng.normal(0, 0.12, (150, 2)) for c in C]
                       + [rng.uniform(-2, 2, (100, 2))])
    return L @ rng.normal(size=(2, 20)) * 0.3 + rng.normal(0, 0.02, (700, 20))


def test_cpu_dbscan_tables_by_brute_force_in_high_dimensions():
    """Where the grid would test nearly every pair, the DBSCAN's table
    comes from the brute force (the plan says so, on either device), and
    the labels are scikit-learn's."""
    from sklearn.cluster import DBSCAN as SkDBSCAN
    from skyjoin._core.plans import recording
    from skyjoin.cluster.plan import plan_fit, plan_sweep, table_algorithm

    assert plan_fit("join", "cpu", "float64", False, 20, join_sample=JoinSample(1.0)).join_algorithm \
        == "brute"
    assert plan_fit("join", "cpu", "float64", False, 20, join_sample=JoinSample(0.01)).join_algorithm \
        == "grid"
    assert plan_fit("join", "cpu", "float64", False, 3).join_algorithm == "grid"
    assert plan_fit("join", "gpu", "float64", False, 20, join_sample=JoinSample(1.0)).join_algorithm \
        == "brute"
    assert plan_fit("join", "gpu", "float64", False, 3).join_algorithm == "grid"
    assert plan_sweep("cpu", "float64", False, 20, 2, join_sample=JoinSample(1.0)).join_algorithm \
        == "brute"
    assert table_algorithm("cpu", 20, JoinSample(1.0)) == "brute"
    X = _plane_clusters_20d()
    for eps, m in ((0.2, 12), (0.25, 20)):
        with recording() as plans:
            est = sj.DBSCAN(eps=eps, min_samples=m, device="cpu").fit(X)
        ref = SkDBSCAN(eps=eps, min_samples=m, algorithm="brute").fit(X)
        np.testing.assert_array_equal(est.labels_, ref.labels_)
        np.testing.assert_array_equal(est.core_sample_indices_, ref.core_sample_indices_)
        assert any(getattr(p, "algorithm", None) == "brute" for p in plans)
        assert 0 < ref.labels_.max() and (ref.labels_ < 0).any()
    for r in sj.dbscan_sweep(X, eps=[0.2, 0.25], min_samples=[12, 20], device="cpu"):
        ref = SkDBSCAN(eps=r.eps, min_samples=r.min_samples, algorithm="brute").fit(X)
        np.testing.assert_array_equal(r.labels, ref.labels_)


@gpu
def test_gpu_dbscan_tables_by_brute_force_in_high_dimensions(monkeypatch):
    """The GPU DBSCAN takes its table by the join's rule: on this plane in
    20-D the screen on principal components, and the brute force's
    product screen where the rule is made to refuse the former; labels
    equal scikit-learn's, for host and device input and the sweep."""
    import cupy as cp
    from sklearn.cluster import DBSCAN as SkDBSCAN
    from skyjoin._core.plans import recording
    from skyjoin.simjoin import algorithm

    from dataclasses import replace

    X = _plane_clusters_20d()
    model = algorithm.SCREEN_MODELS["gpu"]
    for share, chosen in ((model.share, "projected"), (0.0, "brute")):
        monkeypatch.setitem(algorithm.SCREEN_MODELS, "gpu", replace(model, share=share))
        for eps, m in ((0.2, 12), (0.25, 20)):
            ref = SkDBSCAN(eps=eps, min_samples=m, algorithm="brute").fit(X)
            for data in (X, cp.asarray(X)):
                with recording() as plans:
                    est = sj.DBSCAN(eps=eps, min_samples=m, device="gpu").fit(data)
                assert est.path_ == "gpu"
                assert any(str(getattr(p, "join_algorithm", None)) == chosen for p in plans)
                assert any(getattr(p, "algorithm", None) == chosen for p in plans)
                np.testing.assert_array_equal(est.labels_, ref.labels_)
                np.testing.assert_array_equal(est.core_sample_indices_,
                                              ref.core_sample_indices_)
    for r in sj.dbscan_sweep(X, eps=[0.2, 0.25], min_samples=[12, 20], device="gpu"):
        ref = SkDBSCAN(eps=r.eps, min_samples=r.min_samples, algorithm="brute").fit(X)
        np.testing.assert_array_equal(r.labels, ref.labels_)
