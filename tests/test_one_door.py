"""One door into each engine: a public call checks eps, resolves the device and
conditions the points once each, whatever path it takes below.

Spies wrap ``check_eps``, ``resolve_device`` and ``plan_conditioning`` (the
root of every conditioning: ``condition_points`` and ``condition_checked``
call it) wherever a module of skyjoin holds them, and count the calls of one
public call.  The GPU routes run on the CPU machine up to the engine entry,
which is replaced by a recorder (the device check uses a stand-in for CuPy);
what the engine entry receives is then checked: the plan's device, points
conditioned once.  Oracles: the counts are exact; results are compared with
brute force in float64 and scikit-learn.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
import types

import numpy as np
import pytest

import skyjoin as sj
from skyjoin._core import conditioning, device, validate

# every module that may hold a reference, loaded before the spies are set
for _name in ("skyjoin.simjoin.api", "skyjoin.simjoin.engine", "skyjoin.simjoin.cpu.engine",
              "skyjoin.cluster.engine", "skyjoin.cluster.estimator", "skyjoin.cluster.hybrid",
              "skyjoin.cluster.sweep.api", "skyjoin.cluster.sweep.pipeline"):
    importlib.import_module(_name)


class Spy:
    """Counts the calls of ``module.name`` made through any skyjoin module
    (each module's reference to the function is replaced)."""

    def __init__(self, monkeypatch, module, name, returns=None):
        original = getattr(module, name)
        self.calls = 0

        def wrapper(*args, **kwargs):
            self.calls += 1
            result = original(*args, **kwargs)
            return result if returns is None else returns

        wrapper.__name__ = name
        for mod in list(sys.modules.values()):
            if not getattr(mod, "__name__", "").startswith("skyjoin"):
                continue
            for attr, value in list(vars(mod).items()):
                if value is original:
                    monkeypatch.setattr(mod, attr, wrapper)


@pytest.fixture
def spies(monkeypatch):
    return types.SimpleNamespace(
        eps=Spy(monkeypatch, validate, "check_eps"),
        device=Spy(monkeypatch, device, "resolve_device"),
        conditioning=Spy(monkeypatch, conditioning, "plan_conditioning"))


def counts(spies):
    return spies.eps.calls, spies.device.calls, spies.conditioning.calls


def brute_pairs(X, eps, Y=None):
    Y = X if Y is None else Y
    d2 = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    ok = d2 <= eps * eps
    if Y is X:
        np.fill_diagonal(ok, False)
    return np.argwhere(ok)


def test_the_spies_see_a_call(spies):
    """The spies are not vacuous: a direct call of each is counted."""
    validate.check_eps(1.0)
    sj.self_join.__globals__["check_eps"](2.0)      # the API module's reference too
    device.resolve_device("cpu")
    conditioning.condition_points([np.zeros((2, 1))], 1.0)
    assert counts(spies) == (2, 1, 1)


@pytest.mark.parametrize("pattern", ["auto", "full", "unicomp", "lid_unicomp"])
def test_self_join_once(spies, pattern):
    X = np.random.default_rng(0).uniform(0, 1, (400, 2))
    nt = sj.self_join(X, 0.08, device="cpu", pattern=pattern)
    assert counts(spies) == (1, 1, 1)
    np.testing.assert_array_equal(nt.pairs(), brute_pairs(X, 0.08))


def test_join_once(spies):
    rng = np.random.default_rng(1)
    R, S = rng.uniform(0, 1, (150, 3)), rng.uniform(0, 1, (300, 3))
    nt = sj.join(R, S, 0.2, device="cpu")
    assert counts(spies) == (1, 1, 1)
    np.testing.assert_array_equal(nt.pairs(), brute_pairs(R, 0.2, S))


@pytest.mark.parametrize("pattern", ["auto", "unicomp"])
def test_self_join_chunks_once(spies, pattern):
    X = np.random.default_rng(2).uniform(0, 1, (400, 2))
    stream = sj.self_join_chunks(X, 0.08, max_pairs=100, device="cpu", pattern=pattern)
    got = np.concatenate([np.stack([c.i, c.j], axis=1) for c in stream])
    assert counts(spies) == (1, 1, 1)
    np.testing.assert_array_equal(got, brute_pairs(X, 0.08))


@pytest.mark.parametrize("d,weighted", [(2, False), (5, False), (2, True)],
                         ids=["grid", "hybrid", "hybrid-weighted"])
def test_dbscan_fit_once(spies, d, weighted):
    SkDBSCAN = pytest.importorskip("sklearn.cluster").DBSCAN
    # in 2-D about 11 points a fine cell: the dense grid's (dense_grid_wins)
    X = np.random.default_rng(3).normal(0, 0.3 if d == 2 else 1.0, (600, d))
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(X)) if weighted else None
    eps = 0.3 if d == 2 else 1.0
    est = sj.DBSCAN(eps=eps, min_samples=5, device="cpu").fit(X, sample_weight=w)
    assert counts(spies) == (1, 1, 1)
    assert est.path_ == ("grid-cpu" if d == 2 and not weighted else "hybrid-cpu")
    ref = SkDBSCAN(eps=eps, min_samples=5, algorithm="brute").fit(X, sample_weight=w)
    np.testing.assert_array_equal(est.labels_, ref.labels_)


def test_dbscan_hybrid_reaches_the_join_through_its_engine(spies, monkeypatch):
    """HYBRID-DBSCAN's table comes from the join's engine entry with the DBSCAN
    plan's device, never through the public join."""
    from skyjoin.simjoin import api, engine

    entry, public = [], []
    run = engine.run
    monkeypatch.setattr(engine, "run", lambda plan, *a, **k: entry.append(plan) or
                        run(plan, *a, **k))
    monkeypatch.setattr(api, "self_join", lambda *a, **k: public.append(1))
    from skyjoin._core.plans import recording
    from skyjoin.cluster.plan import DBSCANPlan
    from skyjoin.simjoin.plan import JoinPlan

    X = np.random.default_rng(5).normal(0, 1, (500, 5))
    with recording() as plans:
        est = sj.DBSCAN(eps=1.0, min_samples=5, device="cpu").fit(X)
    assert [p.device for p in entry] == ["cpu"] and public == []
    joins = [p for p in plans if isinstance(p, JoinPlan)]
    assert len(joins) == 1 and joins[0].memory_route == "host table"
    assert (joins[0].id_width, joins[0].sort) == ("int32", False) and joins[0].pattern != "auto"
    ran = [p for p in plans if isinstance(p, DBSCANPlan)][-1]
    assert ran.ran == est.path_ == "hybrid-cpu" and ran.shared_grid


@pytest.mark.parametrize("method", ["auto", "hybrid"])
def test_dbscan_sweep_once(spies, method):
    X = np.random.default_rng(6).normal(0, 1, (500, 2))
    res = list(sj.dbscan_sweep(X, eps=[0.3], min_samples=[5, 10], device="cpu", method=method,
                               progress=False))
    assert counts(spies) == (1, 1, 1)
    assert sorted(r.min_samples for r in res) == [5, 10]
    for r in res:
        np.testing.assert_array_equal(
            r.labels, sj.DBSCAN(eps=0.3, min_samples=r.min_samples, device="cpu").fit(X).labels_)


# ---------------------------------------------------------------- GPU routes, up to the entry

class _Pool:
    def free_bytes(self):
        return 0

    def free_all_blocks(self):
        pass


def _fake_cupy():
    """The few CuPy attributes the device-memory check reads: plenty free."""
    cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(memGetInfo=lambda: (10**12, 10**12)),
        memory=types.SimpleNamespace(OutOfMemoryError=type("OOM", (MemoryError,), {})),
        Device=lambda: types.SimpleNamespace(id=0))
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=_Pool)


@pytest.fixture
def on_gpu(monkeypatch):
    """Every resolve_device says "gpu" (and is counted), CuPy is a stand-in."""
    spy = types.SimpleNamespace(
        eps=Spy(monkeypatch, validate, "check_eps"),
        device=Spy(monkeypatch, device, "resolve_device", returns="gpu"),
        conditioning=Spy(monkeypatch, conditioning, "plan_conditioning"))
    from skyjoin.cluster import engine as dbscan_engine
    from skyjoin.cluster import estimator
    from skyjoin.simjoin import api

    monkeypatch.setattr(api, "cupy", _fake_cupy)
    monkeypatch.setattr(dbscan_engine, "cupy", _fake_cupy)
    monkeypatch.setattr(estimator, "cupy", _fake_cupy)
    spy.uploads = []         # the boundary's one upload, kept on the host here
    monkeypatch.setattr(estimator, "to_device", lambda cp, X, name, dtype, check_finite=True:
                        spy.uploads.append(len(X)) or np.asarray(X, dtype=dtype))
    return spy


def test_gpu_self_join_reaches_the_entry_once(on_gpu, monkeypatch):
    from skyjoin.simjoin import engine

    seen = []
    monkeypatch.setattr(engine, "run", lambda plan, R, S, eps, **kw: seen.append((plan, S, eps)))
    X = np.random.default_rng(7).uniform(0, 1e-300, (50, 2))
    sj.self_join(X, 1e-301, output="counts", precision="float32")
    assert counts(on_gpu) == (1, 1, 1)
    (plan, S, eps), = seen
    assert (plan.device, plan.engine, plan.memory_route) == ("gpu", "cuda", "counts")
    # conditioned once, for float32: eps about 1, the points scaled by the same power of two
    assert S.dtype == np.float32 and 0.5 <= eps < 2
    scale = 2.0 ** (math.frexp(eps)[1] - math.frexp(1e-301)[1])
    np.testing.assert_allclose(S, (X * scale).astype(np.float32))


def test_gpu_dbscan_reaches_the_entry_once(on_gpu, monkeypatch):
    from skyjoin.cluster import engine

    seen = []

    def entry(plan, X, eps, min_samples, *args):
        seen.append((plan, X, eps))
        return np.zeros(0, np.int64), np.full(len(X), -1), plan.paths[-1]

    monkeypatch.setattr(engine, "run", entry)
    X = np.random.default_rng(8).normal(0, 1, (100, 3))
    est = sj.DBSCAN(eps=1e200, min_samples=5).fit(X * 1e250)
    assert counts(on_gpu) == (1, 1, 1) and on_gpu.uploads == [len(X)]
    (plan, Xc, eps), = seen
    assert plan.device == "gpu" and plan.paths == ("grid-gpu", "gpu", "hybrid-gpu")
    assert est.path_ == "hybrid-gpu" and 0.5 <= eps < 2
    assert np.isfinite(Xc).all() and np.abs(Xc).max() < 2.0 ** 1000


def test_cli_dbscan_on_gpu_decides_nothing_itself(on_gpu, monkeypatch, tmp_path):
    """``skyjoin dbscan --device auto`` resolved to the GPU: click checks eps once (its EPS type);
    the command passes the device through, so eps is checked, the device
    resolved and the points conditioned once per public call the command
    makes (the untimed first call on the first rows, then the whole set),
    never by the command itself, and the path printed is the one the
    operator reports."""
    from click.testing import CliRunner

    from skyjoin.cli import main
    from skyjoin.cli import options
    from skyjoin.cluster import engine

    from skyjoin._core.plans import report

    seen = []

    def entry(plan, X, eps, min_samples, *args):     # reports what ran, as the entry does
        seen.append(plan)
        report(dataclasses.replace(plan, ran=plan.paths[-1]))
        return np.zeros(0, np.int64), np.full(len(X), -1), plan.paths[-1]

    monkeypatch.setattr(engine, "run", entry)
    clicks = []
    convert = options.EPS.convert
    monkeypatch.setattr(options.EPS, "convert",
                        lambda *a, **k: clicks.append(1) or convert(*a, **k))
    path = tmp_path / "points.csv"
    np.savetxt(path, np.random.default_rng(9).normal(0, 1, (500, 2)), delimiter=",",
               header="x,y", comments="")
    r = CliRunner().invoke(main, ["dbscan", str(path), "--eps", "0.3", "--min-samples", "5",
                                  "--device", "auto"])      # resolved to "gpu" by the spy
    assert r.exit_code == 0, r.output
    calls = len(seen)
    assert calls == 2 and len(clicks) == 1
    assert counts(on_gpu) == (calls, calls, calls)
    assert all(p.device == "gpu" for p in seen)
    assert f"path {seen[-1].paths[-1]} on gpu" in r.output


# ---------------------------------------------------------------- device input, up to the entry

class _OnDevice:
    """Host points dressed as device input (the CUDA array interface's name):
    the stand-in CuPy below reads them "in place" as the NumPy array."""

    def __init__(self, a):
        self.a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (0, False), "version": 3}


@pytest.fixture
def device_input(on_gpu, monkeypatch):
    """``on_gpu``, plus a GPU the probe sees, a stand-in CuPy for the boundary's
    conversion, and a count of the conversions."""
    from skyjoin._core import device_input as di

    monkeypatch.setattr(device, "_probe_gpu", lambda: (True, "a GPU (test)"))

    def fake():
        cp = _fake_cupy()
        cp.asarray = lambda x: x.a if isinstance(x, _OnDevice) else np.asarray(x)
        cp.uint8 = np.uint8
        return cp

    monkeypatch.setattr(di, "cupy", fake)
    on_gpu.conversions = Spy(monkeypatch, di, "as_device_points")
    return on_gpu


def test_device_input_dbscan_converted_once(device_input, monkeypatch):
    from skyjoin.cluster import engine

    seen = []

    def entry(plan, X, eps, min_samples, *args):
        seen.append((plan, X))
        return np.zeros(0, np.int64), np.full(len(X), -1), plan.paths[0]

    monkeypatch.setattr(engine, "run", entry)
    X = np.random.default_rng(10).normal(0, 1, (80, 2))
    est = sj.DBSCAN(eps=0.5, min_samples=5, device="auto").fit(_OnDevice(X))
    assert counts(device_input) == (1, 1, 1) and device_input.conversions.calls == 1
    (plan, Xc), = seen
    assert plan.device == "gpu" and not plan.on_device and est.n_features_in_ == 2
    np.testing.assert_array_equal(Xc, X)


def test_device_input_join_converted_once_per_array(device_input, monkeypatch):
    from skyjoin.simjoin import engine

    seen = []
    monkeypatch.setattr(engine, "run", lambda plan, R, S, eps, **kw: seen.append((plan, R, S)))
    rng = np.random.default_rng(11)
    X, Y = rng.uniform(0, 1, (40, 3)), rng.uniform(0, 1, (30, 3))
    sj.self_join(_OnDevice(X), 0.1, output="counts", on_device=True)
    assert counts(device_input) == (1, 1, 1) and device_input.conversions.calls == 1
    sj.join(_OnDevice(X), Y, 0.1)                       # one array on the device, one on the host
    assert counts(device_input) == (2, 2, 2) and device_input.conversions.calls == 2
    (p1, _, S1), (p2, R2, S2) = seen
    assert p1.memory_route == "device counts" and p2.device == "gpu"
    np.testing.assert_array_equal(S1, X)
    np.testing.assert_array_equal(R2, X)
    np.testing.assert_array_equal(S2, Y)
