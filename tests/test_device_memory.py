"""The device memory rule and error (``skyjoin._core.device_memory``).

The host-side tests drive the rule with a stand-in for CuPy (free memory
chosen by the test), and the public entry points with the device forced
to "gpu", so that the check is seen to run before any engine.  The GPU
tests check the rule against the peaks CuPy's pool really reaches, and
the errors on a GPU whose free memory a held block makes small.
"""

from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

import skyjoin as sj
from skyjoin._core import device_memory as dm


class _Pool:
    def __init__(self, free):
        self.free = free
        self.freed = 0

    def free_bytes(self):
        return self.free

    def free_all_blocks(self):
        self.freed += 1


class _OOM(MemoryError):
    pass


def fake_cupy(free_device, free_pool=0):
    """The few CuPy attributes the rule reads, with the free memory given."""
    pool = _Pool(free_pool)
    cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(memGetInfo=lambda: (free_device, 10 * free_device + 1)),
        memory=types.SimpleNamespace(OutOfMemoryError=_OOM),
        Device=lambda: types.SimpleNamespace(id=3))
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool)


class _DeviceArray:
    """Shape and dtype of a device array, as ``is_device_array`` sees one."""

    __cuda_array_interface__: dict = {}

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


def test_points_bytes_counts_copies_and_grid():
    X = np.zeros((1000, 3))
    # host input: the upload and the sorted copy, 8 bytes a coordinate, + grid bytes
    assert dm.points_bytes([X], np.float64, True) == 1000 * (2 * 3 * 8 + dm.SELF_JOIN_POINT_BYTES)
    assert dm.points_bytes([X], np.float32, True) == 1000 * (2 * 3 * 4 + dm.SELF_JOIN_POINT_BYTES)
    assert dm.points_bytes([X], np.float64, True, dm.DBSCAN_POINT_BYTES) == \
        1000 * (2 * 3 * 8 + dm.DBSCAN_POINT_BYTES)
    R = np.zeros((10, 3), dtype=np.float32)
    assert dm.points_bytes([R, X], np.float64, False) == \
        1010 * (2 * 3 * 8 + dm.JOIN_POINT_BYTES)
    # a device array of the working dtype is only sorted; of another dtype, cast first
    assert dm.copies_of(_DeviceArray((1000, 3), np.float64), np.float64) == 1
    assert dm.copies_of(_DeviceArray((1000, 3), np.float64), np.float32) == 2
    assert dm.copies_of(X, np.float64) == 2
    D = _DeviceArray((1000, 3), np.float32)
    assert dm.points_bytes([D], np.float32, True) == 1000 * (3 * 4 + dm.SELF_JOIN_POINT_BYTES)


def test_check_points_fit_counts_pool_blocks_as_free():
    X = np.zeros((1000, 2))
    needed = dm.points_bytes([X], np.float64, True)
    assert dm.check_points_fit(fake_cupy(needed), "GPU self-join", [X], np.float64, True) == needed
    # the pool's unused blocks are free memory too
    cp = fake_cupy(needed // 2, needed - needed // 2)
    assert dm.check_points_fit(cp, "GPU self-join", [X], np.float64, True) == needed


def test_check_points_fit_refuses_with_the_figures():
    X = np.zeros((1000, 2))
    needed = dm.points_bytes([X], np.float64, True)
    with pytest.raises(sj.DeviceMemoryError) as info:
        dm.check_points_fit(fake_cupy(needed - 1), "GPU self-join", [X], np.float64, True)
    msg = str(info.value)
    assert isinstance(info.value, MemoryError)
    assert f"{needed:,} bytes" in msg and f"{needed - 1:,} bytes free" in msg
    assert "GPU self-join of 1,000 points in 2 dimensions" in msg and "GPU 3" in msg
    assert "skyjoin.distributed" in msg and "float32" in msg and "device='cpu'" in msg


def test_oom_as_error_reports_and_empties_the_pool():
    cp = fake_cupy(123)
    with pytest.raises(sj.DeviceMemoryError) as info:
        with dm.oom_as_error(cp, "GPU skyline"):
            raise _OOM("Out of memory allocating 4,096 bytes")
    assert "GPU skyline ran out of device memory (Out of memory allocating 4,096 bytes)" \
        in str(info.value)
    assert isinstance(info.value.__cause__, _OOM)
    assert cp.get_default_memory_pool().freed == 1


def test_oom_as_error_frees_what_an_inner_report_left():
    """An inner operator's DeviceMemoryError passes through, the outer frames'
    arrays released (their frames cleared) and the pool emptied."""
    cp = fake_cupy(123)

    def outer_step():
        held = np.ones(10)          # stands for the outer operator's device array
        raise sj.DeviceMemoryError(f"the inner join ran out ({held.size})")

    with pytest.raises(sj.DeviceMemoryError, match="the inner join ran out") as info:
        with dm.oom_as_error(cp, "GPU DBSCAN sweep"):
            outer_step()
    frames = []
    tb = info.value.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    step = [f for f in frames if f.f_code is outer_step.__code__]
    assert step and "held" not in step[0].f_locals
    assert cp.get_default_memory_pool().freed == 1


@pytest.mark.parametrize("exc", [ValueError("bad"), MemoryError("host")])
def test_oom_as_error_passes_other_errors(exc):
    cp = fake_cupy(123)
    with pytest.raises(type(exc)) as info:
        with dm.oom_as_error(cp, "GPU join"):
            raise exc
    assert info.value is exc and cp.get_default_memory_pool().freed == 0


def _force_gpu(monkeypatch, module, free):
    """``module``'s device resolved to "gpu", its CuPy the stand-in; any engine
    import fails the test (the check must come first)."""
    monkeypatch.setattr(module, "resolve_device", lambda device=None, **kw: "gpu")
    monkeypatch.setattr(module, "cupy", lambda: fake_cupy(free))


def test_self_join_checks_before_any_engine(monkeypatch):
    from skyjoin.simjoin import api

    _force_gpu(monkeypatch, api, free=1000)
    X = np.random.default_rng(0).random((500, 2))
    with pytest.raises(sj.DeviceMemoryError, match="GPU self-join of 500 points"):
        sj.self_join(X, 0.1)
    with pytest.raises(sj.DeviceMemoryError, match="GPU self-join of 500 points"):
        sj.self_join_chunks(X, 0.1)
    with pytest.raises(sj.DeviceMemoryError, match="GPU join of 800 points"):
        sj.join(X, X[:300], 0.1, output="counts")


def test_skyline_checks_before_any_engine(monkeypatch):
    from skyjoin.pareto import api, run

    monkeypatch.setattr(api, "resolve_device", lambda device=None, **kw: "gpu")
    monkeypatch.setattr(run, "cupy", lambda: fake_cupy(1000))      # the run entry checks
    X = np.random.default_rng(0).random((500, 3))
    with pytest.raises(sj.DeviceMemoryError, match="GPU skyline of 500 points in 3 dimensions "
                                                   "needs at least 18,000 bytes") as info:
        sj.skyline(X)
    assert "skyjoin.distributed.skyline" in str(info.value)
    assert "float32" not in str(info.value)        # the skyline has no precision to lower


def test_dbscan_checks_before_any_engine(monkeypatch):
    pytest.importorskip("sklearn")
    from skyjoin.cluster import engine, estimator

    from skyjoin.cluster.sweep import api as sweep_api

    monkeypatch.setattr(estimator, "resolve_device", lambda device=None, **kw: "gpu")
    monkeypatch.setattr(engine, "cupy", lambda: fake_cupy(1000))
    monkeypatch.setattr(estimator, "cupy", lambda: fake_cupy(1000))   # checked at the boundary
    X = np.random.default_rng(0).random((500, 2))
    with pytest.raises(sj.DeviceMemoryError, match="GPU DBSCAN of 500 points"):
        sj.DBSCAN(eps=0.1, min_samples=5).fit(X)
    monkeypatch.setattr(sweep_api, "resolve_device", lambda device=None, **kw: "gpu")
    monkeypatch.setattr(sweep_api._device, "cupy", lambda: fake_cupy(1000))
    with pytest.raises(sj.DeviceMemoryError, match="GPU DBSCAN sweep of 500 points"):
        sj.dbscan_sweep(X, eps=[0.1, 0.2], min_samples=[5])


def _fails_after(first, exc):
    """A stand-in result stream: one item, then ``exc`` (the GPU work of the next)."""
    yield first
    raise exc


def test_iterated_results_report_device_oom(monkeypatch):
    """CuPy's error raised while the caller iterates a chunk stream or a sweep
    reaches it as DeviceMemoryError, after the items made before it."""
    pytest.importorskip("sklearn")
    from skyjoin.cluster.sweep import api as sweep_api
    from skyjoin.simjoin import api
    from skyjoin.simjoin.gpu import pipeline

    cp = fake_cupy(10**12)
    _force_gpu(monkeypatch, api, free=10**12)
    monkeypatch.setattr(api, "cupy", lambda: cp)
    oom = _OOM("Out of memory allocating 512 bytes")
    monkeypatch.setattr(pipeline, "chunk_stream", lambda *args, **kw: _fails_after(7, oom))
    X = np.random.default_rng(0).random((500, 2))
    stream = sj.self_join_chunks(X, 0.1)
    assert stream.count() == 7
    with pytest.raises(sj.DeviceMemoryError, match="the GPU self-join ran out of device memory "
                                                   r"\(Out of memory allocating 512 bytes\)"):
        next(stream)
    assert cp.get_default_memory_pool().freed == 1

    monkeypatch.setattr(sweep_api, "resolve_device", lambda device=None, **kw: "gpu")
    monkeypatch.setattr(sweep_api._device, "cupy", lambda: cp)
    first = object()
    for name in ("_sweep", "_sweep_gpu_grid"):
        monkeypatch.setattr(sweep_api, name, lambda *args, **kw: _fails_after(first, oom))
    results = sj.dbscan_sweep(X, eps=[0.1, 0.2], min_samples=[5])
    assert next(results) is first
    with pytest.raises(sj.DeviceMemoryError, match="the GPU DBSCAN sweep ran out of device memory"):
        next(results)
    assert cp.get_default_memory_pool().freed == 2


# ---------------------------------------------------------------- on the GPU

def _blobs(n, d, seed=1):
    return sj.datasets.blobs(n, d, centers=20, std=1.5, low=0.0, high=100.0, seed=seed)


@pytest.mark.gpu
@pytest.mark.parametrize("d,precision,on_gpu", [(2, "float64", False), (2, "float32", False),
                                                 (3, "float64", True), (8, "float64", False),
                                                 (8, "float32", True)])
def test_rule_is_below_the_measured_peak(cp, d, precision, on_gpu):
    """The bytes the rule calls certain are no more than the pool's real peak."""
    n = 2_000_000
    X = _blobs(n, d)
    eps = 0.3 if d == 2 else 1.5
    Xin = cp.asarray(X) if on_gpu else X
    with dm.PoolPeak(cp) as peak:
        sj.self_join(Xin, eps, device="gpu", output="counts", precision=precision)
    dtype = np.float32 if precision == "float32" else np.float64
    assert dm.points_bytes([Xin], dtype, True) <= peak.bytes
    with dm.PoolPeak(cp) as peak:
        sj.join(Xin[: n // 4], Xin[n // 4:], eps, device="gpu", output="counts",
                precision=precision)
    assert dm.points_bytes([Xin[: n // 4], Xin[n // 4:]], dtype, False) <= peak.bytes
    if not on_gpu and precision == "float64":
        with dm.PoolPeak(cp) as peak:
            sj.DBSCAN(eps=eps, min_samples=10, device="gpu").fit(X)
        assert dm.points_bytes([X], dtype, True, dm.DBSCAN_POINT_BYTES) <= peak.bytes


@pytest.mark.gpu
@pytest.mark.parametrize("kind,d,on_gpu", [("correlated", 2, False), ("correlated", 5, True),
                                           ("independent", 3, False),
                                           ("anticorrelated", 4, True)])
def test_skyline_rule_is_below_the_measured_peak(cp, kind, d, on_gpu):
    X = getattr(sj.datasets, kind)(1_000_000, d, seed=d)
    Xin = cp.asarray(X) if on_gpu else X
    with dm.PoolPeak(cp) as peak:
        sj.skyline(Xin, device="gpu")
    assert dm.skyline_bytes(Xin) <= peak.bytes


@contextlib.contextmanager
def _little_free(cp, leave):
    """A device block held while the body runs, leaving about ``leave`` bytes
    free (the pool emptied before and after)."""
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    hold = cp.empty(max(0, dm.free_bytes(cp) - int(leave)), dtype=cp.uint8)
    try:
        yield
    finally:
        del hold
        pool.free_all_blocks()


def _usable_again(X, eps):
    """The device takes a join again, and answers as the CPU does."""
    got = sj.self_join(X, eps, device="gpu", output="counts")
    np.testing.assert_array_equal(got, sj.self_join(X, eps, device="cpu", output="counts"))


@pytest.mark.gpu
def test_points_that_cannot_fit_are_refused_before_the_copy(cp):
    X = _blobs(4_000_000, 2)
    needed = dm.points_bytes([X], np.float64, True)
    with _little_free(cp, needed // 2):
        with pytest.raises(sj.DeviceMemoryError, match="needs at least"):
            sj.self_join(X, 0.3, device="gpu", output="counts")
        with pytest.raises(sj.DeviceMemoryError, match="GPU DBSCAN"):
            sj.DBSCAN(eps=0.3, min_samples=10, device="gpu").fit(X)
    _usable_again(X[:200_000], 0.3)
    S = sj.datasets.anticorrelated(4_000_000, 4, seed=1)
    with _little_free(cp, dm.skyline_bytes(S) // 2):
        with pytest.raises(sj.DeviceMemoryError, match="GPU skyline of 4,000,000 points") as info:
            sj.skyline(S, device="gpu")
    assert "skyjoin.distributed.skyline" in str(info.value)
    np.testing.assert_array_equal(sj.skyline(S[:100_000], device="gpu"),
                                  sj.skyline(S[:100_000], device="cpu"))


@pytest.mark.gpu
def test_out_of_memory_inside_the_join_is_a_device_memory_error(cp):
    """Points that pass the check, whose grid ranges then do not fit (uniform
    6-D points: tens of ranges a point)."""
    X = np.random.default_rng(6).random((2_000_000, 6))
    needed = dm.points_bytes([X], np.float64, True)
    with _little_free(cp, needed + needed // 4):
        with pytest.raises(sj.DeviceMemoryError, match="ran out of device memory"):
            sj.self_join(X, 0.1, device="gpu", output="counts")
        # the failed call's arrays are gone, although its traceback is still held here
        assert dm.free_bytes(cp) >= needed
    _usable_again(X[:100_000], 0.1)


@pytest.mark.gpu
def test_out_of_memory_while_iterating_is_a_device_memory_error(cp):
    """The same points through the operators that yield their results: the
    error comes from the iteration (the call itself only checks the points)."""
    X = np.random.default_rng(6).random((2_000_000, 6))
    needed = dm.points_bytes([X], np.float64, True)
    with _little_free(cp, needed + needed // 4):
        stream = sj.self_join_chunks(X, 0.1, device="gpu")
        with pytest.raises(sj.DeviceMemoryError, match="GPU self-join ran out of device memory"):
            stream.count()
        # 6-D: the sweep's table path; its join runs through the join engine's
        # entry, so the one report is the sweep's own (no handler nested inside)
        sweep = sj.dbscan_sweep(X, eps=[0.1], min_samples=[10], device="gpu")
        with pytest.raises(sj.DeviceMemoryError,
                           match="the GPU DBSCAN sweep ran out of device memory"):
            next(sweep)
        assert dm.free_bytes(cp) >= needed
    _usable_again(X[:100_000], 0.1)


def _task_out_of_memory():
    raise _OOM("Out of memory allocating 1,024 bytes")


def test_distributed_operators_report_a_workers_oom(monkeypatch):
    """CuPy's error raised in a Dask task reaches the caller as DeviceMemoryError
    (CuPy stood in for by a module whose OutOfMemoryError the task raises)."""
    distributed = pytest.importorskip("distributed")
    import sys

    import skyjoin.distributed as sd
    from skyjoin.distributed import join as djoin

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(0))

    def plan_run(*args, **kwargs):          # the plan's step, failing in a task
        return distributed.get_client().submit(_task_out_of_memory, pure=False).result()

    monkeypatch.setattr(djoin, "plan_run", plan_run)
    X = np.random.default_rng(0).random((200, 2))
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=":0") as c:
        with pytest.raises(sj.DeviceMemoryError, match="during the distributed join") as info:
            sd.self_join(X, 0.1, client=c, device="cpu")
    assert "n_partitions=" in str(info.value) and isinstance(info.value.__cause__, _OOM)
    assert not dm.is_device_oom(MemoryError("host"))
    assert dm.is_device_oom(_OOM("x"))
