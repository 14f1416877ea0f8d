"""The GPU skyline (skyjoin.pareto.gpu) with its kernels run on the host.

``kernels/skyalign.cu`` and the shared device primitives are compiled by
the host compiler and launched thread by thread (``_cuda_emulation``),
NumPy in CuPy's place.  Oracle: brute force (q is in the skyline iff no
point is <= q in every column and < q in one).  The real kernels on a GPU
are checked by the GPU tests (``-m gpu``).
"""

from types import SimpleNamespace

import numpy as np
import pytest

from _cuda_emulation import FakeCupy, Module, compiler, emulate_device_kernels

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")

VARIANTS = ["sync", "nosync", "levelwise", "noquart", "padded"]


@pytest.fixture
def emulated(monkeypatch):
    from skyjoin.pareto import gpu, gpu_kernels, groups

    fake = FakeCupy()
    cache = {}

    def kernels(d):
        if d not in cache:
            names = gpu_kernels.kernel_names(d)
            mod = Module(gpu_kernels._kernel_source(), list(names.values()))
            cache[d] = {k: mod.get_function(v) for k, v in names.items()}
        return cache[d]

    monkeypatch.setattr(gpu, "_cupy", lambda: fake)
    monkeypatch.setattr(gpu, "skyline_kernels", kernels)
    monkeypatch.setattr(groups, "skyline_kernels", kernels)
    monkeypatch.setattr(gpu, "_RED_BLOCKS", 3)         # few emulated threads
    compiled = emulate_device_kernels(monkeypatch)
    return SimpleNamespace(gpu=gpu, kernels=kernels, compiled=compiled)


def _oracle(X, maximise):
    Y = np.where(maximise, -X, X)
    le = (Y[:, None, :] <= Y[None, :, :]).all(axis=2)
    lt = (Y[:, None, :] < Y[None, :, :]).any(axis=2)
    return np.flatnonzero(~(le & lt).any(axis=0))


def _inputs():
    rng = np.random.default_rng(11)
    for d in (1, 2, 3, 6, 9):
        yield f"unif-d{d}", rng.random((400, d))
        yield f"ties-d{d}", rng.integers(0, 3, (300, d)).astype(np.float64)
    b = rng.integers(0, 4, (150, 4)).astype(np.float64)
    yield "dups-d4", np.vstack([b, b[:60], b[:20]])
    yield "signed-zero-d3", np.array([[0.0, -0.0, 1.0], [-0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])


@pytest.mark.parametrize("variant", VARIANTS)
def test_emulated_gpu_skyline_equals_oracle(emulated, variant):
    for name, X in _inputs():
        for maximise in (np.zeros(X.shape[1], bool), np.arange(X.shape[1]) % 2 == 1):
            plan = SimpleNamespace(algorithm="skyalign", variant=variant, distinct=False)
            got, stats = emulated.gpu.skyline_gpu(X, maximise, plan)
            np.testing.assert_array_equal(got, _oracle(X, maximise), err_msg=f"{variant} {name}")
            assert stats["skyline_size"] == got.size


def test_emulated_grouping_on_the_device_equals_the_host_grouping(emulated):
    """Device input with diff columns is grouped on the GPU (run entry); the
    skyline equals the oracle of each group's skyline, unioned."""
    from skyjoin.pareto.columns import prepare_array
    from skyjoin.pareto.plan import plan_skyline

    rng = np.random.default_rng(8)
    X = np.column_stack([rng.integers(0, 4, 300), rng.random(300), rng.integers(0, 3, 300),
                         rng.random(300)]).astype(np.float64)
    sense = ["diff", "min", "diff", "max"]
    maximise = np.array([False, False, False, True])
    diff = np.array([True, False, True, False])
    Xg, mx = emulated.gpu.group_on_device(X, maximise, diff)
    Xh, mh, n_diff = prepare_array(X, sense)
    assert n_diff == 2
    np.testing.assert_array_equal(np.asarray(Xg), Xh)
    np.testing.assert_array_equal(mx, mh)
    plan = plan_skyline(300, 4, "gpu", residence="device", diff_columns=2)
    got, _ = emulated.gpu.skyline_gpu(Xg, mx, plan)
    want = []
    for key in {tuple(r) for r in X[:, diff]}:
        rows = np.flatnonzero((X[:, diff] == key).all(axis=1))
        want.extend(rows[_oracle(X[rows][:, ~diff], maximise[~diff])])
    np.testing.assert_array_equal(got, np.sort(want))


class _OnDevice(np.ndarray):
    """A NumPy array that says it is a GPU array (the emulated CuPy's)."""
    __cuda_array_interface__: dict = {}


@pytest.mark.parametrize("on_device", [False, True])
def test_emulated_public_gpu_route_checks_memory_once(emulated, monkeypatch, on_device):
    """sj.skyline on the GPU, host or device input, with diff columns: one
    device check (on the array the run entry receives), one plan, and the
    oracle's answer; device input's indices stay "on the device"."""
    import skyjoin as sj
    from skyjoin._core.plans import recording
    from skyjoin.pareto import api, run

    checked = []
    monkeypatch.setattr(api, "resolve_device", lambda device=None, **kw: "gpu")
    monkeypatch.setattr(run, "cupy", lambda: emulated.gpu._cupy())
    monkeypatch.setattr(run, "check_skyline_fits", lambda cp, X: checked.append(X.shape))
    rng = np.random.default_rng(9)
    X = np.column_stack([rng.random(250), rng.integers(0, 3, 250), rng.random(250)])
    Xin = X.view(_OnDevice) if on_device else X
    with recording() as plans:
        got = sj.skyline(Xin, sense=["min", "diff", "max"], device="gpu")
    want = []
    for g in range(3):
        rows = np.flatnonzero(X[:, 1] == g)
        want.extend(rows[_oracle(X[rows][:, [0, 2]], np.array([False, True]))])
    np.testing.assert_array_equal(np.asarray(got), np.sort(want))
    assert checked == [(250, 3) if on_device else (250, 4)]
    assert [(p.device, p.residence, p.diff_columns, p.d) for p in plans] == [
        ("gpu", "device" if on_device else "host", 1, 4)]


def test_emulated_gpu_skyline_compiles_its_kit_only(emulated):
    from skyjoin._core.device_kernels import KITS

    rng = np.random.default_rng(4)
    for d in (2, 5):
        plan = SimpleNamespace(algorithm="skyalign", variant="padded", distinct=False)
        emulated.gpu.skyline_gpu(rng.random((500, d)), np.zeros(d, bool), plan)
    assert emulated.compiled == [KITS["skyline"]]


def test_emulated_tau_prefilter_and_quartiles(emulated):
    rng = np.random.default_rng(5)
    X = rng.integers(0, 6, (700, 4)).astype(np.float64)
    X[[3, 9]] = 1.0                            # two rows reach tau = 1: the first is s
    rowmax = X.max(axis=1)
    s = int(np.argmin(rowmax))
    keep = (X < rowmax[s]).any(axis=1) | (X == X[s]).all(axis=1)
    np.testing.assert_array_equal(emulated.gpu.tau_prefilter_gpu(X), np.flatnonzero(keep))
    m = X.shape[0]
    rows = [min((q * m) // 4, m - 1) for q in (1, 2, 3)]
    np.testing.assert_array_equal(emulated.gpu._quartiles(X, m), np.sort(X, axis=0)[rows])


def test_emulated_row_hash_and_probe_equal_numpy(emulated):
    from skyjoin.pareto import groups

    rng = np.random.default_rng(6)
    P = np.vstack([rng.random((300, 4)), np.zeros((1, 4)), -np.zeros((1, 4))])
    h = np.empty(len(P), dtype=np.uint64)
    k = emulated.kernels(4)
    k["row_hash"](((len(P) + 255) // 256,), (256,), (P.view(np.uint64), np.int64(len(P)), np.int64(4), h))
    np.testing.assert_array_equal(h, groups.row_hashes(P))
    assert h[-1] == h[-2]                      # -0.0 hashes as +0.0

    def repeats(keys):
        cap = 1024
        table, found = np.zeros(cap, np.uint64), np.zeros(1, np.int32)
        k["hash_probe"]((2,), (256,), (keys, np.int64(keys.size), table, np.uint64(cap - 1), found))
        return bool(found[0])

    assert not repeats(h[:-1].copy()) and repeats(h.copy())
