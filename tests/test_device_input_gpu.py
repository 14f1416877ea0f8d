"""Points already on the GPU, results left there: DBSCAN, the sweep and the join
on CuPy arrays, PyTorch CUDA tensors and bare DLPack exporters; skipped
without a GPU.

Oracles: scikit-learn's brute force on the same points in float64 (DBSCAN's
labels), the same call on host input (every other result), brute force
counts in float64.  The round-trip test traps the host copies (``d2h``,
``d2pinned``) and records every ``cupy.asnumpy``: it fails if the labels,
the core indices or the points cross to the host.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj

pytestmark = pytest.mark.gpu


def _blobs(n, d, seed):
    rng = np.random.default_rng(seed)
    C = rng.uniform(0, 10, (6, d))
    X = C[rng.integers(0, 6, n)] + rng.normal(0, 0.4, (n, d))
    X[: n // 10] = rng.uniform(0, 10, (n // 10, d))            # a tenth of noise
    return X


def _sk(X, eps, m):
    return SkDBSCAN(eps=eps, min_samples=m, algorithm="brute").fit(X.astype(np.float64))


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


class _DLPackOnly:
    """A CUDA DLPack exporter without the CUDA array interface (the
    ``cupy.from_dlpack`` branch of the conversion)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", [2, 5])                      # the grid path, the table path
def test_cupy_input_equals_sklearn(cp, seed, dtype, d):
    X = _blobs(3000, d, seed).astype(dtype)
    eps, m = (0.3, 5) if d == 2 else (0.8, 5)
    ref = _sk(X, eps, m)
    for device in ("gpu", "auto"):
        est = sj.DBSCAN(eps=eps, min_samples=m, device=device).fit(cp.asarray(X))
        assert est.path_ == ("grid-gpu" if d == 2 else "gpu")
        assert isinstance(est.labels_, np.ndarray) and est.n_features_in_ == d
        np.testing.assert_array_equal(est.labels_, ref.labels_)
        np.testing.assert_array_equal(est.core_sample_indices_, ref.core_sample_indices_)
        np.testing.assert_array_equal(est.components_, X[ref.core_sample_indices_])
    core, labels = sj.dbscan(cp.asarray(X), eps=eps, min_samples=m)
    np.testing.assert_array_equal(labels, ref.labels_)


@pytest.mark.parametrize("d", [2, 5])
def test_float32_precision_on_device_equals_host(cp, d):
    X = _blobs(3000, d, 3).astype(np.float32)
    eps = 0.3 if d == 2 else 0.8
    host = sj.DBSCAN(eps=eps, min_samples=5, precision="float32", device="gpu").fit(X)
    dev = sj.DBSCAN(eps=eps, min_samples=5, precision="float32", device="gpu",
                    on_device=True).fit(cp.asarray(X))
    np.testing.assert_array_equal(cp.asnumpy(dev.labels_), host.labels_)
    np.testing.assert_array_equal(cp.asnumpy(dev.core_sample_indices_),
                                  host.core_sample_indices_)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_cuda_tensor_equals_sklearn(cp, dtype):
    torch = _torch_cuda()
    for seed, d in [(4, 2), (5, 3), (6, 5)]:
        X = _blobs(2000, d, seed).astype(dtype)
        eps = 0.3 if d == 2 else 0.8
        T = torch.as_tensor(X, device="cuda")
        est = sj.DBSCAN(eps=eps, min_samples=4).fit(T)
        np.testing.assert_array_equal(est.labels_, _sk(X, eps, 4).labels_)


def test_dlpack_only_exporter_is_read_on_the_device(cp):
    X = _blobs(2000, 2, 7)
    est = sj.DBSCAN(eps=0.3, min_samples=4, device="gpu").fit(_DLPackOnly(cp.asarray(X)))
    np.testing.assert_array_equal(est.labels_, _sk(X, 0.3, 4).labels_)


@pytest.mark.parametrize("d", [2, 5])
def test_on_device_results_are_cupy_and_equal_the_host_run(cp, d):
    X = _blobs(4000, d, 8)
    eps = 0.3 if d == 2 else 0.8
    host = sj.DBSCAN(eps=eps, min_samples=5, device="gpu").fit(X)
    for inp in (X, cp.asarray(X)):                        # host or device input
        est = sj.DBSCAN(eps=eps, min_samples=5, device="gpu", on_device=True).fit(inp)
        assert est.path_ == host.path_
        for name in ("labels_", "core_sample_indices_", "components_"):
            got = getattr(est, name)
            assert isinstance(got, cp.ndarray), name
            np.testing.assert_array_equal(cp.asnumpy(got), getattr(host, name))
        assert est.labels_.dtype == np.intp and est.core_sample_indices_.dtype == np.int64
    core, labels = sj.dbscan(cp.asarray(X), eps=eps, min_samples=5, on_device=True)
    assert isinstance(core, cp.ndarray) and isinstance(labels, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(labels), host.labels_)


def test_on_device_hybrid_path_uploads_its_labels(cp):
    """HYBRID-DBSCAN assigns on the host; with on_device its result is uploaded."""
    import dataclasses

    from skyjoin._core.conditioning import condition_points
    from skyjoin.cluster import engine
    from skyjoin.cluster.plan import plan_fit

    X = _blobs(3000, 3, 9)
    plan = plan_fit("join", "gpu", "float64", False, 3, on_device=True)
    plan = dataclasses.replace(plan, paths=("hybrid-gpu",))
    (Xc,), e = condition_points([cp.asarray(X)], 0.5)
    core, labels, path = engine.run(plan, Xc, e, 5)
    assert path == "hybrid-gpu" and isinstance(labels, cp.ndarray) and isinstance(core, cp.ndarray)
    ref = _sk(X, 0.5, 5)
    np.testing.assert_array_equal(cp.asnumpy(labels), ref.labels_)
    np.testing.assert_array_equal(cp.asnumpy(core), ref.core_sample_indices_)


@pytest.fixture
def host_copies(cp, monkeypatch):
    """d2h and d2pinned raise wherever skyjoin holds them; every cupy.asnumpy
    is recorded (shape), for the test to look for the labels, core indices
    or points among them."""
    from skyjoin._core import transfer

    shapes = []
    asnumpy = cp.asnumpy

    def recorded(a, *args, **kw):
        shapes.append(tuple(a.shape))
        return asnumpy(a, *args, **kw)

    def trap(*args, **kw):
        raise AssertionError("a device-to-host copy (d2h/d2pinned) ran")

    for original in (transfer.d2h, transfer.d2pinned):
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("skyjoin"):
                for attr, value in list(vars(mod).items()):
                    if value is original:
                        monkeypatch.setattr(mod, attr, trap)
    monkeypatch.setattr(cp, "asnumpy", recorded)
    return shapes


@pytest.mark.parametrize("d", [2, 5])                      # grid-gpu, then the "gpu" table path
def test_no_host_round_trip_with_on_device(cp, host_copies, d):
    X = _blobs(50_000, d, 10)
    eps = 0.2 if d == 2 else 0.8
    ref = sj.DBSCAN(eps=eps, min_samples=5, device="cpu").fit(X)
    Xd = cp.asarray(X)
    # the trap is armed: the same fit without on_device copies its results to the host
    with pytest.raises(AssertionError, match="device-to-host copy"):
        sj.DBSCAN(eps=eps, min_samples=5, device="gpu").fit(Xd)
    host_copies.clear()
    est = sj.DBSCAN(eps=eps, min_samples=5, device="gpu", on_device=True).fit(Xd)
    n, n_core = len(X), len(ref.core_sample_indices_)
    assert 0 < n_core < n
    crossed = [s for s in host_copies if s in ((n,), (n_core,), (n, d), (n_core, d))]
    assert not crossed, f"arrays the size of the results or points crossed: {crossed}"
    np.testing.assert_array_equal(est.labels_.get(), ref.labels_)


def test_sweep_on_device(cp):
    X = _blobs(5000, 2, 11)
    kw = dict(eps=[0.2, 0.3], min_samples=[5, 10])
    ref = list(sj.dbscan_sweep(X, device="cpu", **kw))
    for method in ("auto", "hybrid"):                    # grid-gpu; a host table, uploaded
        got = list(sj.dbscan_sweep(cp.asarray(X), device="gpu", method=method, on_device=True,
                                   **kw))
        assert len(got) == len(ref)
        for r, g in zip(ref, got):
            assert (r.eps, r.min_samples, r.n_clusters) == (g.eps, g.min_samples, g.n_clusters)
            assert isinstance(g.labels, cp.ndarray)
            assert isinstance(g.core_sample_indices, cp.ndarray)
            np.testing.assert_array_equal(cp.asnumpy(g.labels), r.labels)
            np.testing.assert_array_equal(cp.asnumpy(g.core_sample_indices),
                                          r.core_sample_indices)
    X5 = _blobs(3000, 5, 12)                               # d > 4: a table kept on the GPU
    ref5 = list(sj.dbscan_sweep(X5, eps=[0.8], min_samples=[4, 8], device="cpu"))
    got5 = list(sj.dbscan_sweep(cp.asarray(X5), eps=[0.8], min_samples=[4, 8], on_device=True))
    for r, g in zip(ref5, got5):
        assert isinstance(g.labels, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(g.labels), r.labels)


def test_self_join_and_join_on_torch_tensors(cp):
    torch = _torch_cuda()
    rng = np.random.default_rng(13)
    X, Y = rng.uniform(0, 1, (1500, 3)), rng.uniform(0, 1, (700, 3))
    host = sj.self_join(X, 0.08, device="cpu")
    dev = sj.self_join(torch.as_tensor(X, device="cuda"), 0.08)
    np.testing.assert_array_equal(dev.pairs(), host.pairs())
    hj = sj.join(X, Y, 0.1, device="cpu")
    dj = sj.join(torch.as_tensor(X, device="cuda"), torch.as_tensor(Y, device="cuda"), 0.1)
    np.testing.assert_array_equal(dj.pairs(), hj.pairs())


def test_counts_on_device_are_cupy(cp):
    rng = np.random.default_rng(14)
    X, Y = rng.uniform(0, 1, (2000, 2)), rng.uniform(0, 1, (900, 2))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    brute = (d2 <= 0.05 ** 2).sum(1) - 1
    c = sj.self_join(cp.asarray(X), 0.05, output="counts", on_device=True)
    assert isinstance(c, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(c), brute)
    c = sj.self_join(_DLPackOnly(cp.asarray(X)), 0.05, output="counts", on_device=True)
    np.testing.assert_array_equal(cp.asnumpy(c), brute)
    cj = sj.join(cp.asarray(X), cp.asarray(Y), 0.05, output="counts", on_device=True)
    assert isinstance(cj, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(cj),
                                  sj.join(X, Y, 0.05, output="counts", device="cpu"))
    nt = sj.self_join(cp.asarray(X), 0.05, on_device=True)
    assert nt.on_device


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64, np.uint8, np.bool_])
def test_other_dtypes_on_device_as_on_host(cp, dtype):
    rng = np.random.default_rng(15)
    X = (rng.uniform(0, 6, (1500, 2))).astype(dtype)
    host = sj.DBSCAN(eps=1.0, min_samples=4, device="gpu").fit(X)
    dev = sj.DBSCAN(eps=1.0, min_samples=4).fit(cp.asarray(X))
    np.testing.assert_array_equal(dev.labels_, host.labels_)
    np.testing.assert_array_equal(dev.components_, host.components_)
    np.testing.assert_array_equal(sj.self_join(cp.asarray(X), 1.0).pairs(),
                                  sj.self_join(X, 1.0, device="cpu").pairs())


def test_device_sample_weight_equals_host(cp):
    X = _blobs(2000, 2, 16)
    w = np.random.default_rng(17).integers(0, 3, len(X)).astype(float)
    host = sj.DBSCAN(eps=0.3, min_samples=4, device="gpu").fit(X, sample_weight=w)
    dev = sj.DBSCAN(eps=0.3, min_samples=4).fit(cp.asarray(X), sample_weight=cp.asarray(w))
    np.testing.assert_array_equal(dev.labels_, host.labels_)
    np.testing.assert_array_equal(
        dev.labels_, SkDBSCAN(eps=0.3, min_samples=4, algorithm="brute").fit(
            X, sample_weight=w).labels_)


def test_bad_device_input_gets_the_host_messages(cp):
    X = cp.asarray(_blobs(100, 2, 18))
    with pytest.raises(TypeError, match="must hold real numbers"):
        sj.DBSCAN(eps=0.3).fit(X.astype(cp.complex128))
    with pytest.raises(TypeError, match="must hold real numbers"):
        sj.self_join(X.astype(cp.complex64), 0.3)
    with pytest.raises(ValueError, match="must be 2-D"):
        sj.DBSCAN(eps=0.3).fit(X[:, 0])
    with pytest.raises(ValueError, match="must be 2-D"):
        sj.self_join(X[:, 0], 0.3)
    with pytest.raises(ValueError, match="no columns"):
        sj.self_join(X[:, :0], 0.3)
    with pytest.raises(ValueError, match="Found array with 0 sample"):
        sj.DBSCAN(eps=0.3).fit(X[:0])
    with pytest.raises(ValueError, match="is empty"):
        list(sj.dbscan_sweep(X[:0], eps=[0.3], min_samples=[2]))
    Y = X.copy()
    Y[5, 1] = cp.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        sj.DBSCAN(eps=0.3).fit(Y)
    with pytest.raises(ValueError, match="NaN or inf"):
        list(sj.dbscan_sweep(Y, eps=[0.3], min_samples=[2]))
    with pytest.raises(ValueError, match="X contains NaN or inf"):     # the range pass
        sj.self_join(Y, 0.3)
    Y[5, 1] = -cp.inf
    for points in (Y, Y.astype(cp.float32), cp.asnumpy(Y)):     # host input too
        with pytest.raises(ValueError, match="NaN or inf"):
            sj.DBSCAN(eps=0.3, device="gpu").fit(points)
    with pytest.raises(TypeError, match="never copies them to the host"):
        sj.DBSCAN(eps=0.3, device="cpu").fit(X)
    with pytest.raises(TypeError, match="only Euclidean DBSCAN runs on the GPU"):
        sj.DBSCAN(eps=0.3, metric="manhattan").fit(X)
