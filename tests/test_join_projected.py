"""The screen on principal components (``algorithm="projected"``): pair for
pair the float64 (or float32) brute-force oracle, ties at eps included,
with adversarial inputs for the margin of the projection (large norms
close together, huge and tiny scales, axes far from orthonormal).  The
GPU kernel runs here through the CPU emulation of CUDA
(``_cuda_emulation``); on a GPU, ``-m gpu``."""

import numpy as np
import pytest

import skyjoin as sj
from skyjoin._core.plans import recording
from skyjoin.simjoin import brute_bound
from skyjoin.simjoin.algorithm import (BRUTE_MIN_WORK, SCREEN_MODELS, JoinSample,
                                       choose_algorithm, sample_join)
from skyjoin.simjoin.projection import (Projection, axes_norm_bound, choose_components,
                                        principal_axes, screen_fractions, screen_precision)

from _cuda_emulation import FakeCupy, Module, compiler
from oracles import check_gpu_screen
from test_join_brute import oracle, table_of

gpu = pytest.mark.gpu


def manifold(n, d=40, k=5, noise=0.05, seed=11):
    """n points near a k-dimensional subspace of R^d (the issue's recipe)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, k)) @ rng.normal(size=(k, d)) / np.sqrt(k) \
        + rng.normal(0, noise, (n, d))


def check(R, S, eps, precision="float64", device="cpu", include_self=False, run=None):
    """The projected join (``run``: a callable of (R, S, eps, output)) against
    the oracle: the table and the counts."""
    dtype = np.float32 if precision == "float32" else np.float64
    self_join = R is None
    mask = oracle(S if self_join else R, S, eps, dtype)
    if self_join:
        np.fill_diagonal(mask, False)
    if run is None:
        def run(R, S, eps, output):
            if R is None:
                return sj.self_join(S, eps, algorithm="projected", device=device,
                                    precision=precision, output=output,
                                    include_self=include_self)
            return sj.join(R, S, eps, algorithm="projected", device=device,
                           precision=precision, output=output)
    nt = run(R, S, eps, "table")
    indptr, indices = table_of(mask, include_self)
    np.testing.assert_array_equal(nt.indptr, indptr)
    np.testing.assert_array_equal(nt.indices, indices)
    np.testing.assert_array_equal(run(R, S, eps, "counts"), np.diff(indptr))
    return nt


# -- the bounds ----------------------------------------------------------------

def test_axes_norm_bound_holds_for_any_basis():
    """The bound is at least the spectral norm: orthonormal axes, scaled
    ones, and random matrices far from orthonormal."""
    rng = np.random.default_rng(1)
    for d, q in [(40, 5), (90, 12), (8, 8)]:
        V = np.linalg.qr(rng.normal(size=(d, q)))[0]
        for B in (V, V * (1 + 1e-9), V * 3.0, rng.normal(size=(d, q))):
            s = np.linalg.norm(B, 2)
            assert axes_norm_bound(B) >= s
            assert axes_norm_bound(B) <= s * np.sqrt(q) * 1.01 + 1e-12
        assert axes_norm_bound(V) == pytest.approx(1.0, abs=1e-12)


def test_projected_threshold_keeps_pairs_at_eps():
    """Pairs exactly at eps, far from the centre: their squared distance on
    the axes, computed in the screen's precision, is within the
    threshold."""
    rng = np.random.default_rng(2)
    d, q = 30, 4
    for scale in (1e-6, 1.0, 1e6):
        X = rng.normal(size=(200, d)) * scale
        V = principal_axes(X)[:, :q]
        sigma = axes_norm_bound(V)
        c = X.mean(axis=0)
        Y = X - c
        u = rng.normal(size=(200, d))
        u /= np.linalg.norm(u, axis=1)[:, None]
        eps = 0.37 * scale
        Z = X + eps * u                      # each at eps (up to rounding) from its point
        radius = float(np.sqrt(np.concatenate([(Y * Y).sum(axis=1),
                                               ((Z - c) ** 2).sum(axis=1)])).max()) * 1.01
        e2 = float(np.sum((X - Z) ** 2, axis=1).max())
        for screen, dt in (("float32", np.float32), ("float64", np.float64)):
            thr = brute_bound.projected_threshold(e2, d, "float64", sigma, q, radius, screen)
            p = ((X - c) @ V).astype(dt)
            pz = ((Z - c) @ V).astype(dt)
            s = ((p - pz) ** 2).sum(axis=1, dtype=dt)
            assert (s <= dt(thr)).all()
            assert thr < 4 * e2                # and not vacuous


def test_screen_fractions_and_choice():
    rng = np.random.default_rng(3)
    X = manifold(600, d=30, k=3, noise=0.01)
    axes = principal_axes(X)
    f = screen_fractions(X[:100], X[100:], axes, 1.0, [1, 2, 3, 6, 30])
    D = ((X[:100, None, :] - X[None, 100:, :]) ** 2).sum(axis=2)
    assert f[30] == pytest.approx((D <= 1.0).mean(), abs=1e-3)   # an estimate (products)
    P = (X[:100] @ axes[:, :3])[:, None, :] - (X[100:] @ axes[:, :3])[None, :, :]
    assert f[3] == pytest.approx(((P ** 2).sum(axis=2) <= 1.0).mean(), abs=1e-3)
    assert f[1] >= f[2] >= f[3] >= f[6] >= f[30]   # fewer axes: never fewer pairs
    c = 250.0
    q, cost = choose_components({2: 0.5, 4: 0.01, 8: 0.0}, 100, 0.0, c)
    assert (q, cost) == (8, 8.0)
    q, cost = choose_components({2: 0.5, 4: 0.0001, 8: 0.0}, 100, 0.0, c)
    assert (q, cost) == (4, 4 + c * 0.0001 * 100)
    q, cost = choose_components({2: 0.5, 4: 0.0101, 8: 0.01}, 100, 0.01, c)  # pairs within
    assert (q, cost) == (4, pytest.approx(4 + c * 0.0001 * 100))
    q, cost = choose_components({2: 0.5, 4: 0.01, 8: 0.0}, 100, 0.0, 1.0)   # cheap tests
    assert (q, cost) == (4, 5.0)
    assert screen_precision(10.0, 1.0, 1.0) == "float32"
    assert screen_precision(1e8, 1.0, 1.0) == "float64"      # rounding would move pairs
    del rng


def test_rule_picks_the_screen_on_low_intrinsic_dimension():
    d = 40
    screen = (Projection(np.eye(d)[:, :6], 1.0, 0.001), 6.08)
    for device in ("gpu", "cpu"):
        model = SCREEN_MODELS[device]
        brute = model.brute[0] + model.brute[1] * d
        assert choose_algorithm("auto", d, sample=JoinSample(1.0, screen),
                                device=device) is screen[0]
        at = (screen[0], model.share * brute)
        assert choose_algorithm("auto", d, sample=JoinSample(1.0, at), device=device) is at[0]
        costly = (screen[0], model.share * brute * 1.01)
        assert choose_algorithm("auto", d, sample=JoinSample(1.0, costly),
                                device=device) == "brute"
        assert choose_algorithm("auto", d, sample=JoinSample(0.99 * BRUTE_MIN_WORK / d, screen),
                                device=device) == "grid"
    assert choose_algorithm("projected", d, sample=JoinSample(None, screen)) is screen[0]
    assert str(screen[0]) == "projected"
    with pytest.raises(ValueError, match="chunks"):
        choose_algorithm("projected", d, chunks=True, sample=JoinSample(None, screen))
    with pytest.raises(ValueError, match="'projected'"):
        choose_algorithm("nearest", d)


def test_sample_finds_the_manifold_and_not_uniform_data():
    """On a 4-D manifold in 60-D the sampled screen takes few components and
    pays on both devices; on uniform 64-D data every component is needed,
    and it pays on neither."""
    X = manifold(3000, d=60, k=4)
    for device in ("gpu", "cpu"):
        s = sample_join("auto", X, X, 1.5, device)
        assert s.screen[0].components <= 8
        assert choose_algorithm("auto", 60, sample=s, device=device) is s.screen[0]
    U = np.random.default_rng(4).uniform(size=(3000, 64))
    for device in ("gpu", "cpu"):
        s = sample_join("auto", U, U, 2.2, device)
        assert s.fraction * 64 >= BRUTE_MIN_WORK                     # the brute force's ground
        assert choose_algorithm("auto", 64, sample=s, device=device) == "brute"
    with recording() as plans:
        sj.self_join(X, 1.5, device="cpu")
        sj.self_join(U, 2.2, device="cpu")
        sj.self_join(U, 2.2, device="cpu", algorithm="projected")
    assert [p.algorithm for p in plans if hasattr(p, "algorithm")] == \
        ["projected", "brute", "projected"]


# -- the CPU engine ---------------------------------------------------------------

@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_cpu_projected_equals_the_oracle(precision):
    X = manifold(700, d=40, k=5)
    dtype = np.float32 if precision == "float32" else np.float64
    X = X.astype(dtype)
    for eps in (1.0, 2.5):
        check(None, X, eps, precision)
        check(None, X, eps, precision, include_self=True)
    check(X[:150] + dtype(0.01), X, 2.0, precision)


def test_cpu_projected_ties_and_adversarial_scales():
    """Ties at eps on exactly representable coordinates (the pair's
    difference off the axes), points far from the origin and close
    together, and huge and tiny scales."""
    rng = np.random.default_rng(5)
    B = rng.integers(0, 9, size=(120, 20)).astype(np.float64) * 10
    step = np.zeros((120, 20))
    step[np.arange(120), rng.integers(0, 20, 120)] = 2.0
    check(None, np.concatenate([B, B + step, B - step]), 2.0)
    A = 1e8 + rng.normal(0, 1e-3, size=(200, 16))
    C = -1e8 + rng.normal(0, 1e-3, size=(200, 16))
    check(None, np.concatenate([A, C]), 4e-3)
    for scale in (1e-150, 1e150):
        check(None, manifold(300, d=24, k=3) * scale, 1.0 * scale)


# -- the GPU kernel, emulated on the CPU ------------------------------------------

@pytest.fixture
def emulated_gpu(monkeypatch):
    if compiler() is None:
        pytest.skip("no host C++ compiler")
    from skyjoin.simjoin.gpu import brute as gpu_brute, projected as gpu_projected

    fake = FakeCupy()
    modules = {}

    def compiled_module(screen, real, q):
        key = (screen, real, q)
        if key not in modules:
            defines = (f"#define FT {screen}\n#define REAL {real}\n#define Q {q}\n"
                       f"#define IS_FLOAT {int(real == 'float')}\n#define THREADS 4\n"
                       f"#define ROWS 2\n#define CHUNK 3\n")
            modules[key] = Module(defines + gpu_projected.SOURCE)
        return modules[key]

    for mod in (gpu_brute, gpu_projected):
        monkeypatch.setattr(mod, "cupy", lambda: fake)
    monkeypatch.setattr(gpu_brute, "d2h", lambda cp, a: np.asarray(a))     # Screening's
    monkeypatch.setattr(gpu_projected, "compiled_module", compiled_module)
    monkeypatch.setattr(gpu_projected, "THREADS", 4)
    monkeypatch.setattr(gpu_projected, "ROWS", 2)
    monkeypatch.setattr(gpu_projected, "SLICE", 5)                  # many slices
    monkeypatch.setattr(gpu_brute, "guard_pairs", lambda *a, **k: None)
    monkeypatch.setattr(gpu_brute, "_FIRST_CAPACITY", 16)           # overflow and retry
    return gpu_projected


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_emulated_gpu_projected_equals_the_oracle(emulated_gpu, precision):
    from skyjoin.simjoin.algorithm import resolve_algorithm
    from skyjoin.simjoin.plan import request

    dtype = np.float32 if precision == "float32" else np.float64
    X = manifold(90, d=18, k=3).astype(dtype)
    R = (X[:37] + dtype(0.02)).astype(dtype)

    def run(R_, S_, eps, output, include_self=False):
        proj = resolve_algorithm("projected", S_ if R_ is None else R_, S_, eps)
        plan = request("cpu", self_join=R_ is None, output=output, precision=precision,
                       include_self=include_self, algorithm=proj)
        return emulated_gpu.run(plan, R_, S_, eps)

    for eps in (0.8, 1.6):
        check(None, X, eps, precision, run=run)
        check(None, X, eps, precision, include_self=True,
              run=lambda R_, S_, e, o: run(R_, S_, e, o, include_self=True))
        check(R, X, eps, precision, run=run)
    # float64 screen: the same pairs
    proj = resolve_algorithm("projected", X, X, 1.6)
    wide = Projection(proj.basis, proj.sigma, proj.fraction, "float64")
    check(None, X, 1.6, precision, run=lambda R_, S_, e, o: emulated_gpu.run(
        request("cpu", self_join=True, output=o, precision=precision, algorithm=wide),
        None, S_, e))


# -- on a GPU ---------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gpu_projected_equals_brute_and_oracle(precision):
    import cupy

    X = manifold(5000, d=48, k=6)
    dtype = np.float32 if precision == "float32" else np.float64
    eps = 1.6
    a = check_gpu_screen("projected", X, eps, precision, [("brute", "gpu")], min_pairs=1001,
                         queries=600)
    c = sj.self_join(cupy.asarray(X.astype(dtype)), eps, algorithm="projected",
                     precision=precision, output="counts", include_self=True)
    np.testing.assert_array_equal(cupy.asnumpy(c) if hasattr(c, "get") else c,
                                  np.diff(a.indptr) + 1)
    check(None, X[:1500].astype(dtype), eps, precision, device="gpu")


@gpu
def test_gpu_projected_adversarial_margin_and_ties():
    rng = np.random.default_rng(12)
    A = 1e8 + rng.normal(0, 1e-3, size=(300, 16))
    C = -1e8 + rng.normal(0, 1e-3, size=(300, 16))
    check(None, np.concatenate([A, C]), 4e-3, device="gpu")
    B = rng.integers(0, 9, size=(150, 20)).astype(np.float64) * 10
    step = np.zeros((150, 20))
    step[np.arange(150), rng.integers(0, 20, 150)] = 2.0
    check(None, np.concatenate([B, B + step, B - step]), 2.0, device="gpu")
    for scale in (1e-150, 1e150):
        check(None, manifold(400, d=24, k=3) * scale, 1.0 * scale, device="gpu")
