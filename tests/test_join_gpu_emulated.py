"""The GPU join's kernels (``simjoin/gpu/kernels/join.cu``: GPUCALCGLOBAL with
its patterns, threads per query and schedules, GPUCALCSHARED, the brute-force
baseline, the row sorts) run by the engine (``simjoin.gpu.engine``) on the
host, the kernels compiled by the host compiler and every block's threads
run as fibers that meet at their barriers and warp collectives
(``_cuda_emulation``), NumPy in CuPy's place.  Oracle: every pair's
distance in the working precision, summed over k in order, and its test
against eps squared there.  The real kernels on a GPU are checked by the
GPU tests (``-m gpu``).
"""

import sys

import numpy as np
import pytest

from _cuda_emulation import FakeCupy, Module, compiler, emulate_device_kernels

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")

_INT2 = "struct int2 { int x, y; };\nstatic inline int2 make_int2(int x, int y) { return {x, y}; }\n"


@pytest.fixture
def engine(monkeypatch):
    from skyjoin.index import grid_gpu
    from skyjoin.simjoin.gpu import engine as gpu_engine

    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    emulate_device_kernels(monkeypatch)
    modules = {}

    def compile_module(names):
        # one host compile of every configuration's instances for the points'
        # dimension and type (the first name's), rather than one a configuration
        D, T = names[0].split("<")[1].split(",")[:2]
        every = _instances(D, T)
        key = every if set(names) <= set(every) else tuple(names)
        if key not in modules:
            modules[key] = Module(_INT2 + grid_gpu._source(), key + grid_gpu.SORT_KERNELS)
        return modules[key]

    monkeypatch.setattr(grid_gpu, "compile_module", compile_module)
    return fake, gpu_engine.GpuEngine


def _oracle(R, S, eps, dtype, self_join, include_self):
    """Each row's neighbours, sorted: sum_k (r_k - s_k)^2 <= eps^2 in ``dtype``."""
    A, B = R.astype(dtype), S.astype(dtype)
    s = np.zeros((A.shape[0], B.shape[0]), dtype=dtype)
    for k in range(A.shape[1]):
        t = A[:, k][:, None] - B[:, k][None, :]
        s = s + t * t
    e = dtype(eps)
    hit = s <= dtype(e * e)
    if self_join and not include_self:
        np.fill_diagonal(hit, False)
    return [np.flatnonzero(row) for row in hit]


def _cases():
    rng = np.random.default_rng(17)
    blobs = np.concatenate([c + rng.normal(0, 0.3, (150, 2)) for c in rng.uniform(0, 6, (4, 2))])
    ties = np.round(rng.uniform(0, 3, (500, 3)) * 4) / 4
    R4, S4 = rng.normal(0, 1, (300, 4)), rng.normal(0.2, 1, (350, 4))
    yield "blobs-2d", None, blobs, 0.3
    yield "ties-3d", None, ties, 0.5
    yield "r-join-s-4d", R4, S4, 0.9


CONFIGS = [  # kernel, pattern, threads a query, schedule
    ("global", "full", 1, "grid"), ("global", "full", 4, "sortbywl"),
    ("global", "full", 32, "workqueue"), ("global", "unicomp", 1, "grid"),
    ("global", "unicomp", 8, "workqueue"), ("global", "lid_unicomp", 2, "sortbywl"),
    ("global", "lid_unicomp", 16, "grid"), ("shared", "full", 1, "grid"),
    ("bruteforce", "full", 4, "grid"),
]


def _instances(D, T):
    """The kernel instances that CONFIGS ask for, as the engine names them."""
    from skyjoin.index.grid_gpu import PATTERNS

    names = [f"gpucalc_shared<{D},{T},{fill}>" for fill in ("false", "true")]
    for kernel, pattern, kt, schedule in CONFIGS:
        wq = "true" if schedule == "workqueue" else "false"
        names += [f"gpucalc_global<{D},{T},{PATTERNS[pattern]},{kt},{fill},{wq}>"
                  for fill in ("false", "true")]
    return tuple(dict.fromkeys(names))


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("config", CONFIGS, ids=["/".join(map(str, c)) for c in CONFIGS])
@pytest.mark.parametrize("name,R,S,eps", list(_cases()), ids=[c[0] for c in _cases()])
def test_emulated_join_kernels_equal_the_oracle(engine, name, R, S, eps, config, precision):
    from skyjoin.simjoin.plan import plan_gpu, request

    cp, GpuEngine = engine
    kernel, pattern, kt, schedule = config
    self_join = R is None
    if pattern != "full" and not self_join:
        pytest.skip("the UNICOMP patterns are self-joins")
    dtype = np.float32 if precision == "float32" else np.float64
    for include_self in ((False, True) if self_join else (False,)):
        req = request("gpu", self_join=self_join, precision=precision, kernel=kernel,
                      pattern=pattern, threads_per_point=kt, schedule=schedule,
                      include_self=include_self)
        eng = GpuEngine(cp, R, S, eps, req, {})
        eng.configure(plan_gpu(req, eng.mean_work, eng.work_cv, eng.dgrid.k))
        want = _oracle(S if R is None else R, S, eps, dtype, self_join, include_self)
        counts = np.asarray(eng.count())
        np.testing.assert_array_equal(counts, [w.size for w in want])
        # the fill of every row, then the row sorts
        n = counts.size
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        out = np.full(int(indptr[-1]), -1, dtype=np.int32)
        cursor = np.zeros(n, dtype=np.int32)
        overflow = np.zeros(1, dtype=np.int32)
        plan = eng.sort_plan(indptr, [(0, n)])
        eng.fill(0, n, counts.astype(np.int32), indptr, out, 0, cursor, overflow, plan, indptr)
        assert overflow[0] == 0
        for r in range(n):
            np.testing.assert_array_equal(out[indptr[r]:indptr[r + 1]], want[r],
                                          err_msg=f"row {r} ({name}, {config})")
