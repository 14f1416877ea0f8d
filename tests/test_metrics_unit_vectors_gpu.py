"""Haversine's unit vectors made on the GPU (``plan.filter_on_device``).

DBSCAN's GPU grid path under haversine uploads the (lat, lon) points as
they are and checks them and makes their unit vectors on the device
(``skyjoin.simjoin.gpu.unit_vectors``, ``metric_join.device_problem``).
Here, without a GPU: the kernel compiled by the host compiler and run
thread by thread (``_cuda_emulation``), the plan's rule, the decision
chords' proof for CUDA's sin and cos (2 ulp, where the host's are within
1) checked numerically, and the whole grid path, emulated, against
scikit-learn's ``DBSCAN(metric="haversine")``.  The ``gpu`` tests run the
same on a GPU, with host and device input.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN
from sklearn.neighbors import NearestNeighbors

import skyjoin as sj
from test_metrics import geo_clusters
from _cuda_emulation import FakeCupy, Module, compiler, emulate_device_kernels, modules_by_real
from skyjoin._core.plans import recording
from skyjoin.cluster.plan import filter_on_device, plan_fit
from skyjoin.simjoin.metrics import check_metric_points, decision_radii, filter_points, \
    metric_threshold

U64 = 2.0 ** -53
needs_compiler = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")


def _geo_clusters(rng):
    return geo_clusters(rng, sizes=(150, 150, 200, 120, 120), corners=True)


def _ring(n=300):
    """Points on the equator 2**-6 rad apart: pairs exactly at eps = 2**-6."""
    return np.stack([np.zeros(n), np.arange(n) * 2.0 ** -6 - 2.0], axis=1)


def _wrapped_ring(n=200):
    """Points 2**-6 rad apart along the parallel at 0.4 rad, across the
    antimeridian, their longitudes wrapped into [-pi, pi): neighbours
    within rounding of ``_wrapped_eps`` on either side of it (scikit-learn
    finds 2 clusters at it, none 1e-12 below, 1 above)."""
    lon = np.pi - 60 * 2.0 ** -6 + np.arange(n) * 2.0 ** -6
    return np.stack([np.full(n, 0.4), (lon + np.pi) % (2 * np.pi) - np.pi], axis=1)


def _wrapped_eps():
    """The great-circle distance of neighbours of ``_wrapped_ring``."""
    return 2 * math.asin(math.cos(0.4) * math.sin(2.0 ** -7))


# --- the kernel, emulated -----------------------------------------------------------

@pytest.fixture
def device_kernel(monkeypatch):
    """``gpu.unit_vectors`` and ``metric_join.device_problem`` with the CUDA
    kernel compiled by the host compiler and NumPy in CuPy's place."""
    from skyjoin.simjoin import metric_join
    from skyjoin.simjoin.gpu import unit_vectors

    fake = FakeCupy()
    module = Module(unit_vectors.SOURCE)
    monkeypatch.setattr(unit_vectors, "cupy", lambda: fake)
    monkeypatch.setattr(unit_vectors, "compiled_module", lambda: module)
    monkeypatch.setattr(metric_join, "cupy", lambda: fake)
    emulate_device_kernels(monkeypatch)                 # the finiteness test of the upload
    return metric_join.device_problem


@needs_compiler
def test_device_unit_vectors_are_the_host_formula(device_kernel, rng):
    X = np.concatenate([_geo_clusters(rng),
                        np.c_[rng.uniform(-np.pi / 2, np.pi / 2, 500),
                              rng.uniform(-2 * np.pi, 2 * np.pi, 500)]])
    points, U, filter_eps = device_kernel(X, "haversine", 0.01)
    H = filter_points(X, "haversine")
    assert U.shape == H.shape == (len(X), 3)
    # the same formula; sin and cos of the host's C library here (on a GPU, CUDA's)
    np.testing.assert_allclose(U, H, rtol=0, atol=8 * U64)
    assert np.allclose(np.linalg.norm(U, axis=1), 1.0, rtol=0, atol=16 * U64)
    assert points.filter is None and points.refine[0] is X
    assert filter_eps > 2 * math.sqrt(metric_threshold(0.01, "haversine"))
    host = points.on_host()                  # what the table path reads, made then
    np.testing.assert_array_equal(host.filter[0], H)
    np.testing.assert_array_equal(host.refine[0], X)


@needs_compiler
@pytest.mark.parametrize("bad", [[(7, 0, 45.0), (12, 1, 10.0)], [(3, 1, 7.0)],
                                 [(0, 0, -1.5708)], [(9, 0, 2.0), (4, 1, -6.3)]])
def test_device_range_check_raises_the_host_error(device_kernel, rng, bad):
    """The first row outside the domain, found on the device, named with
    its values in the very text of the host check."""
    X = np.c_[rng.uniform(-1.5, 1.5, 20), rng.uniform(-3, 3, 20)]
    for row, col, value in bad:
        X[row, col] = value
    with pytest.raises(ValueError) as host:
        check_metric_points(X, "haversine")
    with pytest.raises(ValueError) as device:
        device_kernel(X, "haversine", 0.01)
    assert str(device.value) == str(host.value)
    assert f"X[{min(r for r, _, _ in bad)}]" in str(device.value)


@needs_compiler
def test_device_problem_refuses_what_the_host_refuses(device_kernel):
    with pytest.raises(ValueError, match="2 columns"):
        device_kernel(np.zeros((4, 3)), "haversine", 0.1)
    with pytest.raises(ValueError, match="float64"):
        device_kernel(np.zeros((4, 2)), "haversine", 0.1, precision="float32")
    with pytest.raises(ValueError, match="NaN or inf"):
        device_kernel(np.array([[0.1, 0.2], [np.nan, 0.0]]), "haversine", 0.1)
    with pytest.raises(ValueError, match="no unit vectors on the GPU"):
        device_kernel(np.zeros((4, 2)), "cosine", 0.1)


# --- the plan's rule ------------------------------------------------------------------

def test_unit_vectors_on_the_gpu_where_its_grid_runs():
    p = plan_fit("join", "gpu", "float64", False, 3, metric="haversine")
    assert p.paths == ("grid-gpu", "hybrid-gpu") and p.filter_on_device
    assert "unit vectors on the GPU" in p.describe()
    for device, weighted, metric in (("cpu", False, "haversine"), ("gpu", True, "haversine"),
                                     ("gpu", False, "cosine"), ("gpu", False, "manhattan")):
        p = plan_fit("join", device, "float64", weighted, 3, metric=metric)
        assert not p.filter_on_device and "grid-gpu" not in p.paths
        assert not filter_on_device(device, weighted, metric)
    assert not plan_fit("join", "gpu", "float64", False, 3).filter_on_device


def test_device_input_under_haversine_passes_the_boundary(monkeypatch):
    """Device input of haversine DBSCAN without weights is read on the GPU
    (no GPU here: the device's refusal, not the metric's); with weights, or
    another metric, the boundary refuses it."""
    from skyjoin._core import device as device_mod
    from skyjoin.errors import GPUUnavailableError

    class FakeCudaArray:
        shape = (10, 2)
        __cuda_array_interface__ = {"shape": (10, 2), "typestr": "<f8", "data": (0, False),
                                    "version": 3}

    monkeypatch.setattr(device_mod, "_probe_gpu", lambda: (False, "test"))
    with pytest.raises(GPUUnavailableError):
        sj.DBSCAN(eps=0.1, metric="haversine").fit(FakeCudaArray())
    with pytest.raises(TypeError, match="only Euclidean DBSCAN runs on the GPU"):
        sj.DBSCAN(eps=0.1, metric="haversine").fit(FakeCudaArray(), sample_weight=np.ones(10))
    with pytest.raises(TypeError, match="only Euclidean DBSCAN runs on the GPU"):
        sj.DBSCAN(eps=0.1, metric="cosine").fit(FakeCudaArray())


# --- the decision chords hold for CUDA's sin and cos ------------------------------------

def _near_eps_pairs(rng, eps, n):
    """n pairs (X[k], X[n + k]) at great-circle distances within 1e-13 of eps
    relatively, a fifth within 4e-16 (ties), latitudes near the poles
    included, every longitude within haversine's domain."""
    P = np.c_[rng.uniform(-1.55, 1.55, n), rng.uniform(-np.pi, np.pi, n)]
    theta = rng.uniform(0, 2 * np.pi, n)
    ang = eps * (1 + rng.uniform(-1e-13, 1e-13, n) * rng.choice([1.0, 0.004], n, p=[.8, .2]))
    lat = np.arcsin(np.sin(P[:, 0]) * np.cos(ang) + np.cos(P[:, 0]) * np.sin(ang) * np.cos(theta))
    lon = P[:, 1] + np.arctan2(np.sin(theta) * np.sin(ang) * np.cos(P[:, 0]),
                               np.cos(ang) - np.sin(P[:, 0]) * np.sin(lat))
    return P, np.c_[lat, lon]


def _ulps(x, k):
    """x moved by |k| ulps, each element its own sign (k an array of ints)."""
    out = x.copy()
    for _ in range(int(np.abs(k).max(initial=0))):
        go = np.abs(k) > 0
        out[go] = np.nextafter(out[go], np.where(k[go] > 0, np.inf, -np.inf))
        k = k - np.sign(k)
    return out


def _perturbed_unit_vectors(X, rng, ulps):
    """The unit vectors with sin and cos each off by up to ``ulps`` ulps, as a
    library within that bound may return them: the four values of every
    point moved by +-ulps (random signs, half the points) or by a random
    amount in [-ulps, ulps], then the product rounded as on the device."""
    lat, lon = X[:, 0], X[:, 1]
    vals = [np.cos(lat), np.cos(lon), np.sin(lon), np.sin(lat)]
    n = len(X)
    out = []
    for v in vals:
        k = np.where(rng.random(n) < 0.5, ulps * rng.choice([-1, 1], n),
                     rng.integers(-ulps, ulps + 1, n))
        out.append(_ulps(v, k))
    cl, co, so, sl = out
    return np.c_[cl * co, cl * so, sl]


def _squared_chords(A, B):
    """The grid's test of each pair (A[k], B[k]): the squared differences
    summed over the three coordinates in order from zero, in float64 (NumPy:
    no fused multiply-add)."""
    s = np.zeros(len(A))
    for k in range(3):
        t = A[:, k] - B[:, k]
        s = s + t * t
    return s


def _decisions_hold(P, Q, accepted, sure, upper, rng, ulps, trials=4):
    """Whether, for unit vectors off by ``ulps`` per sin and cos, every pair
    the grid's test puts within the sure chord is one scikit-learn accepts,
    and every pair it accepts lies within the upper chord."""
    sure2, upper2 = sure * sure, upper * upper
    for _ in range(trials):
        s = _squared_chords(_perturbed_unit_vectors(P, rng, ulps),
                            _perturbed_unit_vectors(Q, rng, ulps))
        if not (np.all(accepted[s <= sure2]) and np.all(s[accepted] <= upper2)):
            return False
    return True


def test_decision_chords_hold_for_unit_vectors_off_by_two_ulps(rng):
    """The proof of docs/exactness.md ("Haversine decided without the refine")
    for the GPU's unit vectors, checked numerically: with sin and cos off by
    2 ulp (CUDA's bound) the sure and upper chords still decide every pair
    near eps as scikit-learn does.  Can fail: the bare chord 2 sqrt(t)
    decides some of these pairs otherwise, and unit vectors off by 64 ulp
    break the decision chords themselves."""
    eps, n = 0.3, 4000
    P, Q = _near_eps_pairs(rng, eps, n)
    nn = NearestNeighbors(radius=eps, metric="haversine", algorithm="brute").fit(Q)
    rows = nn.radius_neighbors(P, return_distance=False)
    accepted = np.array([k in rows[k] for k in range(n)])
    assert accepted.sum() > n // 5 and (~accepted).sum() > n // 5
    assert np.abs(np.r_[P[:, 1], Q[:, 1]]).max() <= 2 * np.pi
    sure, upper = decision_radii(eps, "haversine")
    assert _decisions_hold(P, Q, accepted, sure, upper, rng, ulps=2)
    assert _decisions_hold(P, Q, accepted, sure, upper, rng, ulps=1)
    bare = 2 * math.sqrt(metric_threshold(eps, "haversine"))
    assert not _decisions_hold(P, Q, accepted, bare, bare, rng, ulps=2)
    assert not _decisions_hold(P, Q, accepted, sure, upper, rng, ulps=64)


def test_unit_vectors_off_by_two_ulps_stay_within_the_bound(rng):
    """The bound the derivation books for CUDA's sin and cos (within 2 ulp
    of the correctly rounded value, so 2.5 ulp, a relative 5 u, of the exact
    one): each unit vector within 11 u of the exact one, a chord within
    22 u.  Checked against unit vectors from 40-digit sines and cosines."""
    X = np.c_[rng.uniform(-np.pi / 2, np.pi / 2, 2000), rng.uniform(-2 * np.pi, 2 * np.pi, 2000)]
    err = _distance_to_exact(_perturbed_unit_vectors(X, rng, 2), X)
    assert err.max() <= 11 * U64 * (1 + 1e-6)
    assert err.max() > 4 * U64               # the perturbation is felt


def _distance_to_exact(U, X):
    """|U[i] - exact unit vector of X[i]| for each i, the exact one from
    sines and cosines summed as Taylor series in 40-digit decimals (the
    difference is rounded once, far below u)."""
    from decimal import Decimal, localcontext

    def sin_cos(x):
        x = Decimal(float(x))
        s, c, term_s, term_c, k = Decimal(0), Decimal(0), x, Decimal(1), 0
        x2 = x * x
        while abs(term_s) > Decimal(10) ** -44 or abs(term_c) > Decimal(10) ** -44:
            s, c, k = s + term_s, c + term_c, k + 2
            term_s = -term_s * x2 / (k * (k + 1))
            term_c = -term_c * x2 / ((k - 1) * k)
        return s, c

    err = np.empty(len(X))
    with localcontext() as ctx:
        ctx.prec = 40
        for i, (lat, lon) in enumerate(X):
            sl, cl = sin_cos(lat)
            so, co = sin_cos(lon)
            d2 = sum((Decimal(float(u)) - v) ** 2 for u, v in zip(U[i], (cl * co, cl * so, sl)))
            err[i] = float(d2.sqrt())
    return err


# --- the grid path, emulated ----------------------------------------------------------

@pytest.fixture
def emulated_gpu(monkeypatch, device_kernel):
    """``engine.run`` of haversine's GPU plan with the grid's and the unit
    vectors' kernels emulated; the table path on the CPU (its GPU join is
    the GPU tests')."""
    from skyjoin.cluster import engine, grid_gpu, grid_gpu_kernels

    fake = FakeCupy()
    compiled_module = modules_by_real(grid_gpu_kernels.SOURCE)

    monkeypatch.setattr(grid_gpu, "cupy", lambda: fake)
    monkeypatch.setattr(grid_gpu, "compiled_module", compiled_module)
    monkeypatch.setattr(engine, "cupy", lambda: fake)

    def run(X, eps, m):
        points, U, filter_eps = device_kernel(X, "haversine", eps)
        plan = plan_fit("join", "gpu", "float64", False, 3, metric="haversine")
        plan = dataclasses.replace(plan, device="cpu", paths=("grid-gpu", "hybrid-cpu"))
        with recording() as plans:
            core, labels, path = engine.run(plan, U, filter_eps, m, overwrite_x=True,
                                            metric=(points, eps))
        assert plans[-1].filter_on_device
        return core, labels, path

    return run


@needs_compiler
def test_emulated_grid_on_device_unit_vectors_equals_sklearn(emulated_gpu, rng):
    X = _geo_clusters(rng)
    for eps, m in ((0.02, 5), (0.05, 10), (0.01, 2)):
        core, labels, path = emulated_gpu(X, eps, m)
        sk = SkDBSCAN(eps=eps, min_samples=m, metric="haversine").fit(X)
        assert path == "grid-gpu"
        np.testing.assert_array_equal(labels, sk.labels_)
        np.testing.assert_array_equal(core, sk.core_sample_indices_)
        assert sk.labels_.max() >= 3


@needs_compiler
def test_emulated_grid_hands_ties_to_the_host_table(emulated_gpu):
    """Pairs exactly at eps lie between the chords: the grid hands over, and
    the table path makes the host's unit vectors and decides them.  Near
    ties across the antimeridian: scikit-learn's labels by either path."""
    X = _ring()
    for m in (3, 2):
        core, labels, path = emulated_gpu(X, 2.0 ** -6, m)
        sk = SkDBSCAN(eps=2.0 ** -6, min_samples=m, metric="haversine", algorithm="brute").fit(X)
        assert path == "hybrid-cpu"
        np.testing.assert_array_equal(labels, sk.labels_)
        np.testing.assert_array_equal(core, sk.core_sample_indices_)
    W = _wrapped_ring()
    eps = _wrapped_eps()
    for m in (3, 2):
        core, labels, path = emulated_gpu(W, eps, m)
        sk = SkDBSCAN(eps=eps, min_samples=m, metric="haversine", algorithm="brute").fit(W)
        assert sk.labels_.max() == 1            # a pair within rounding of eps splits it
        np.testing.assert_array_equal(labels, sk.labels_)
        np.testing.assert_array_equal(core, sk.core_sample_indices_)


# --- on a GPU -------------------------------------------------------------------------------

def _inputs(cp, X):
    return (("host", X), ("device", cp.asarray(X)))


@pytest.mark.gpu
def test_gpu_haversine_grid_host_and_device_input(cp, rng):
    from skyjoin.datasets import geographic

    for X in (_geo_clusters(rng), geographic(20000, n_clusters=10, spread_km=300, seed=8)):
        for eps, m in ((0.02, 5), (0.002, 10), (0.001, 2)):
            sk = SkDBSCAN(eps=eps, min_samples=m, metric="haversine").fit(X)
            for kind, Xin in _inputs(cp, X):
                with recording() as plans:
                    est = sj.DBSCAN(eps=eps, min_samples=m, metric="haversine",
                                    device="gpu").fit(Xin)
                assert est.path_ == "grid-gpu", kind
                assert plans[-1].filter_on_device
                np.testing.assert_array_equal(est.labels_, sk.labels_)
                np.testing.assert_array_equal(est.core_sample_indices_,
                                              sk.core_sample_indices_)
                if kind == "device":        # the caller's points are left as they were
                    np.testing.assert_array_equal(cp.asnumpy(Xin), X)


@pytest.mark.gpu
def test_gpu_haversine_ties_hand_over_host_and_device_input(cp):
    X = _ring()
    ring = SkDBSCAN(eps=2.0 ** -6, min_samples=3, metric="haversine", algorithm="brute").fit(X)
    for kind, Xin in _inputs(cp, X):
        est = sj.DBSCAN(eps=2.0 ** -6, min_samples=3, metric="haversine", device="gpu").fit(Xin)
        assert est.path_ == "hybrid-gpu", kind
        np.testing.assert_array_equal(est.labels_, ring.labels_)
        np.testing.assert_array_equal(est.core_sample_indices_, ring.core_sample_indices_)
    W = _wrapped_ring()                     # near ties across the antimeridian
    eps = _wrapped_eps()
    for m in (3, 2):
        sk = SkDBSCAN(eps=eps, min_samples=m, metric="haversine", algorithm="brute").fit(W)
        for kind, Win in _inputs(cp, W):
            est = sj.DBSCAN(eps=eps, min_samples=m, metric="haversine", device="gpu").fit(Win)
            np.testing.assert_array_equal(est.labels_, sk.labels_)
            np.testing.assert_array_equal(est.core_sample_indices_, sk.core_sample_indices_)
    est = sj.DBSCAN(eps=2.0 ** -6, min_samples=3, metric="haversine", device="gpu",
                    on_device=True).fit(cp.asarray(X))
    np.testing.assert_array_equal(cp.asnumpy(est.labels_), ring.labels_)


@pytest.mark.gpu
def test_gpu_haversine_range_error_is_the_host_one(cp, rng):
    X = np.c_[rng.uniform(-1.5, 1.5, 50), rng.uniform(-3, 3, 50)]
    X[31, 0], X[17, 1] = 45.0, 10.0
    with pytest.raises(ValueError) as host:
        check_metric_points(X, "haversine")
    for kind, Xin in _inputs(cp, X):
        with pytest.raises(ValueError) as gpu:
            sj.DBSCAN(eps=0.01, metric="haversine", device="gpu").fit(Xin)
        assert str(gpu.value) == str(host.value) and "X[17]" in str(gpu.value), kind


@pytest.mark.gpu
def test_gpu_unit_vectors_within_the_derived_bound(cp, rng):
    """CUDA's unit vectors against the exact ones: within 11 u each (sin and
    cos within 2 ulp of the correctly rounded value, one product), the bound
    the decision chords book."""
    from skyjoin.simjoin.gpu.unit_vectors import unit_vectors

    X = np.c_[rng.uniform(-np.pi / 2, np.pi / 2, 3000), rng.uniform(-2 * np.pi, 2 * np.pi, 3000)]
    U = cp.asnumpy(unit_vectors(cp.asarray(X)))
    assert _distance_to_exact(U, X).max() <= 11 * U64 * (1 + 1e-6)
