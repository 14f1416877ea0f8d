"""The routing of skyjoin.dbscan: one plan per call (``skyjoin.cluster.plan``), the
device resolved once from the argument or ``SKYJOIN_DEVICE``, and the data moved once."""

import dataclasses

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin
from _cuda_emulation import FakeCupy
from skyjoin._core import device as _device
from skyjoin.cluster import hybrid
from skyjoin.cluster.plan import DBSCANPlan, fit_route, grid_applies, plan_fit, plan_sweep


def _blobs(n=600, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0, 1.0, (n, d)), 2)


@pytest.fixture
def gpu_probe(monkeypatch):
    """Pretend a GPU is (or is not) usable, without touching one."""
    def set_probe(ok):
        monkeypatch.setattr(_device, "_probe_gpu", lambda: (ok, "test"))
    return set_probe


def test_plan_fit_rule():
    assert plan_fit("join", "cpu", "float64", False, 2).paths == ("grid-cpu", "sparse-grid-cpu",
                                                                  "hybrid-cpu")
    assert plan_fit("join", "cpu", "float64", False, 5).paths == ("hybrid-cpu",)
    assert plan_fit("join", "cpu", "float32", False, 2).paths == ("hybrid-cpu",)
    assert plan_fit("join", "cpu", "float64", True, 2).paths == ("hybrid-cpu",)
    assert plan_fit("join", "gpu", "float64", False, 4).paths == ("grid-gpu", "gpu", "hybrid-gpu")
    assert plan_fit("join", "gpu", "float64", True, 2).paths == ("gpu", "hybrid-gpu")
    # the GPU grid tests float32 points in float32; the CPU grid is float64 only
    assert plan_fit("join", "gpu", "float32", False, 3).paths == ("grid-gpu", "gpu", "hybrid-gpu")
    assert plan_fit("join", "gpu", "float32", False, 5).paths == ("gpu", "hybrid-gpu")
    p = plan_fit("sklearn", None, "float64", False, 2)
    assert p.paths == ("sklearn",) and p.device is None


def test_fit_route():
    assert fit_route("euclidean", None, None, False) == "join"
    assert fit_route("minkowski", None, 2, False) == "join"
    assert fit_route("minkowski", None, None, False) == "sklearn"
    assert fit_route("l2", None, 3, False) == "sklearn"
    assert fit_route("euclidean", {"w": 1}, None, False) == "sklearn"
    assert fit_route("euclidean", None, None, True) == "sklearn"
    assert fit_route("manhattan", None, None, False) == "join"      # a metric of the join
    assert fit_route("braycurtis", None, None, False) == "sklearn"
    assert fit_route(lambda a, b: 0.0, None, None, False) == "sklearn"
    assert fit_route("precomputed", None, None, True) == "graph"
    assert fit_route("precomputed", None, None, False) == "sklearn"


def test_plan_sweep_rule():
    assert plan_sweep("cpu", "float64", True, 2, 1).paths == ("grid-cpu", "table")  # weights: CPU
    assert plan_sweep("gpu", "float64", True, 2, 1).paths == ("table",)
    assert plan_sweep("gpu", "float64", False, 2, 3).paths == ("grid-gpu", "table")
    assert plan_sweep("cpu", "float64", False, 2, 3, method="hybrid").paths == ("table",)
    p = plan_sweep("gpu", "float32", False, 2, 3)
    assert p.paths == ("table",) and p.table_on_device
    assert not plan_sweep("gpu", "float64", False, 2, 3, method="hybrid").table_on_device
    assert not plan_sweep("cpu", "float64", False, 2, 1).pipelined       # one eps
    assert not plan_sweep("cpu", "float64", False, 2, 3, pipeline=False).pipelined
    assert grid_applies("cpu", "float64", False, 4) and not grid_applies("cpu", "float64", False, 5)


def test_plan_is_frozen_and_described():
    p = plan_sweep("cpu", "float64", False, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.device = "gpu"
    text = p.describe()
    assert "grid-cpu -> table" in text and "\n" not in text
    assert isinstance(p, DBSCANPlan) and p.path == "grid-cpu"


@pytest.mark.parametrize("call", ["DBSCAN", "dbscan", "dbscan_sweep", "dbscan_model"])
def test_skyjoin_device_env_is_honoured(monkeypatch, gpu_probe, call):
    """device=None (the default) reads SKYJOIN_DEVICE, as self_join does: "gpu"
    without a GPU is an error, "cpu" keeps the CPU where "auto" would take the GPU."""
    X = _blobs(n=6000)        # about 10 points a fine cell: the dense grid's (dense_grid_wins)
    run = {
        "DBSCAN": lambda: skyjoin.DBSCAN(eps=0.3, min_samples=5).fit(X),
        "dbscan": lambda: skyjoin.dbscan(X, eps=0.3, min_samples=5),
        "dbscan_sweep": lambda: list(skyjoin.dbscan_sweep(X, eps=[0.3], min_samples=[5])),
        "dbscan_model": lambda: skyjoin.dbscan_model(X, 0.3),
    }[call]
    gpu_probe(False)
    monkeypatch.setenv("SKYJOIN_DEVICE", "gpu")
    with pytest.raises(skyjoin.GPUUnavailableError):
        run()
    gpu_probe(True)                       # "auto" would now pick the GPU
    monkeypatch.setenv("SKYJOIN_DEVICE", "cpu")
    out = run()
    if call == "DBSCAN":
        assert out.path_ == "grid-cpu"
    if call == "dbscan_sweep":
        assert out[0].timings["path"] == "grid-cpu"


class _CountingCupy(FakeCupy):
    """NumPy in CuPy's place, counting the point arrays (2-D) that cross between host
    and device."""

    def __init__(self):
        self.h2d = 0
        self.d2h = 0

    def asarray(self, a, *args, **kwargs):
        if np.ndim(a) == 2:
            self.h2d += 1
        return np.array(a, *args, **kwargs)

    def asnumpy(self, a):
        if np.ndim(a) == 2:
            self.d2h += 1
        return np.asarray(a)


def test_hybrid_gpu_copies_the_points_to_the_device_once(monkeypatch):
    """HYBRID-DBSCAN on the GPU orders the points there and joins them from there:
    one host -> device copy of the points, none back (the GPU join is replaced by
    the CPU join of the same ordered points)."""
    cp = _CountingCupy()
    monkeypatch.setattr(_device, "cupy", lambda: cp)
    seen = []
    table = hybrid.neighbor_table

    def join_spy(Xo, eps, *, device="cpu", precision="float64", timings=None, on_device=False,
                 memory_limit="auto", algorithm="grid", grid=None):
        seen.append(device)
        assert grid is None                     # no CPU grid is shared with a GPU join
        return table(np.asarray(Xo), eps, device="cpu", precision=precision, timings=timings,
                     memory_limit=memory_limit, algorithm=algorithm)

    monkeypatch.setattr(hybrid, "neighbor_table", join_spy)
    X = _blobs(800, 2, seed=4)
    core, labels = hybrid.hybrid_dbscan(X, 0.2, 5, device="gpu")
    ref = SkDBSCAN(eps=0.2, min_samples=5).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(core, ref.core_sample_indices_)
    assert seen == ["gpu"]
    assert (cp.h2d, cp.d2h) == (1, 0)


def test_cpu_hybrid_path_builds_the_grid_once(monkeypatch):
    """HYBRID-DBSCAN on the CPU: the grid that orders the points serves the join
    (one build, not two), and the labels are scikit-learn's."""
    from skyjoin.index import grid as grid_mod
    from skyjoin.simjoin.cpu import engine as join_engine

    hybrid_mod = hybrid
    calls = []

    def counting(*a, **k):
        calls.append(1)
        return grid_mod.build_grid(*a, **k)

    monkeypatch.setattr(hybrid_mod, "build_grid", counting)
    monkeypatch.setattr(join_engine, "build_grid", counting)
    X = np.random.default_rng(3).normal(0, 1, (2000, 2))
    w = np.ones(len(X))
    core, labels = hybrid_mod.hybrid_dbscan(X, 0.15, 5, sample_weight=w)
    assert len(calls) == 1
    assert np.array_equal(labels, SkDBSCAN(eps=0.15, min_samples=5).fit(X).labels_)
    calls.clear()
    skyjoin.DBSCAN(eps=0.15, min_samples=5, device="cpu").fit(X, sample_weight=w)  # hybrid
    assert len(calls) == 1
