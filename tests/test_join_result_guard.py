"""The result-size guard: ResultTooLargeError before any large allocation.

The count pass knows a result's size before it is filled; a result over
the memory it goes to (or over ``memory_limit``) raises
``ResultTooLargeError`` (a ``MemoryError``) whose message names the pairs,
the bytes and the ways out.  The oracle of the sizes is the table itself,
built without a limit: its pairs and bytes are what the guard had to
foresee.
"""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.simjoin.cpu import engine as cpu_engine
from skyjoin.errors import ResultTooLargeError
from skyjoin.simjoin.result_size import MEMORY_MARGIN, check_memory_limit, result_size_guard

WAYS_OUT = ("output='counts'", "self_join_chunks", "--out x.parquet")
MB = 1 << 20


@pytest.fixture(scope="module")
def dense():
    """20,000 points in the unit square: eps 0.5 gives about 1.9e8 pairs (780 MB)."""
    return np.random.default_rng(5).uniform(0, 1, (20_000, 2))


@pytest.fixture(scope="module")
def warm():
    """Compile the kernels once, so that tracemalloc sees the join, not Numba."""
    X = np.random.default_rng(0).uniform(0, 1, (300, 2))
    for pattern in ("full", "unicomp", "lid_unicomp"):
        sj.self_join(X, 0.3, device="cpu", pattern=pattern)
    sj.join(X, X, 0.3, device="cpu")


def _expected_pairs(X, eps):
    return int(sj.self_join(X, eps, output="counts", device="cpu").sum())


def _check_message(err, n_pairs):
    msg = str(err)
    assert f"{n_pairs:,} pairs" in msg
    for way in WAYS_OUT:
        assert way in msg, way
    assert "bytes" in msg


def test_result_too_large_is_a_memory_error_exported():
    assert issubclass(sj.ResultTooLargeError, MemoryError)
    assert sj.ResultTooLargeError is ResultTooLargeError
    assert "ResultTooLargeError" in sj.__all__


@pytest.mark.parametrize("pattern", ["full", "unicomp"])
def test_self_join_guard_fires_before_the_table(dense, warm, pattern, monkeypatch):
    n_pairs = _expected_pairs(dense, 0.5)
    assert n_pairs * 4 > 500 * MB       # the table would be hundreds of MB

    def no_table(n, dtype=np.int32):  # the table's allocation must not happen
        raise AssertionError(f"a table of {n} entries was allocated")

    monkeypatch.setattr(cpu_engine, "alloc_host", no_table)
    tracemalloc.start()
    try:
        with pytest.raises(ResultTooLargeError) as info:
            sj.self_join(dense, 0.5, device="cpu", pattern=pattern, memory_limit=MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _check_message(info.value, n_pairs)
    assert "memory_limit allows 1,048,576 bytes" in str(info.value)
    assert peak < 20 * MB           # O(n) temporaries only, never the table or its half


def test_lid_unicomp_guard_fires_before_the_mirror(dense):
    """LID-UNICOMP has no counting pass: the guard checks once the forward half
    is found, before the table is written."""
    n_pairs = _expected_pairs(dense[:5000], 0.5)
    with pytest.raises(ResultTooLargeError) as info:
        sj.self_join(dense[:5000], 0.5, device="cpu", pattern="lid_unicomp", memory_limit=MB)
    msg = str(info.value)
    for way in WAYS_OUT:
        assert way in msg, way
    found = int(re.search(r"hold (?:at least )?([\d,]+) pairs", msg).group(1).replace(",", ""))
    assert found <= n_pairs


def test_lid_unicomp_guard_stops_while_the_half_is_found():
    """Over many cells the guard fires on a lower bound, long before the whole
    forward half exists: the message says "at least" and names far fewer
    pairs than the table holds."""
    X = np.random.default_rng(8).uniform(0, 100, (200_000, 2))
    n_pairs = _expected_pairs(X, 1.0)
    assert n_pairs > 8 * (1 << 20)
    with pytest.raises(ResultTooLargeError) as info:
        sj.self_join(X, 1.0, device="cpu", pattern="lid_unicomp", memory_limit=MB)
    msg = str(info.value)
    assert "at least" in msg
    found = int(re.search(r"hold at least ([\d,]+) pairs", msg).group(1).replace(",", ""))
    assert len(X) < found < n_pairs // 2
    assert sj.self_join(X, 1.0, device="cpu", pattern="lid_unicomp").n_pairs == n_pairs


def test_join_r_s_guard(dense, warm):
    R, S = dense[:10_000], dense[10_000:]
    n_pairs = int(sj.join(R, S, 0.5, output="counts", device="cpu").sum())
    tracemalloc.start()
    try:
        with pytest.raises(ResultTooLargeError) as info:
            sj.join(R, S, 0.5, device="cpu", memory_limit=MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _check_message(info.value, n_pairs)
    assert peak < 20 * MB


def test_guard_boundary_is_exact_and_counts_distances():
    """A limit of exactly the table's bytes passes, one byte less raises; the
    distances add 8 bytes a pair (float64); a symmetric pattern's forward
    half, alive while the table is written, counts too."""
    X = np.random.default_rng(1).uniform(0, 1, (3000, 3))
    nt = sj.self_join(X, 0.1, device="cpu")
    table = (len(X) + 1) * 8 + nt.n_pairs * 4
    assert sj.self_join(X, 0.1, device="cpu", pattern="full", memory_limit=table) == nt
    with pytest.raises(ResultTooLargeError):
        sj.self_join(X, 0.1, device="cpu", pattern="full", memory_limit=table - 1)
    with_d = table + nt.n_pairs * 8
    got = sj.self_join(X, 0.1, device="cpu", pattern="full", memory_limit=with_d,
                       return_distance=True)
    assert got == nt and got.distances is not None
    with pytest.raises(ResultTooLargeError):
        sj.self_join(X, 0.1, device="cpu", pattern="full", memory_limit=with_d - 1,
                     return_distance=True)
    with_half = table + nt.n_pairs // 2 * 4
    for pattern in ("unicomp", "lid_unicomp"):
        assert sj.self_join(X, 0.1, device="cpu", pattern=pattern,
                            memory_limit=with_half) == nt
        with pytest.raises(ResultTooLargeError):
            sj.self_join(X, 0.1, device="cpu", pattern=pattern, memory_limit=with_half - 1)


def test_counts_and_chunks_never_guarded(dense):
    """output="counts" and self_join_chunks hold no table: no limit applies."""
    c = sj.self_join(dense[:4000], 0.5, output="counts", device="cpu", memory_limit=1)
    assert int(c.sum()) == _expected_pairs(dense[:4000], 0.5)
    total = sum(len(ch) for ch in sj.self_join_chunks(dense[:4000], 0.5, device="cpu",
                                                      max_pairs=100_000))
    assert total == int(c.sum())


def test_guard_does_not_fire_for_normal_runs():
    X = np.random.default_rng(2).uniform(0, 10, (5000, 2))
    nt = sj.self_join(X, 0.3, device="cpu")            # memory_limit="auto"
    assert nt.n_pairs > 0
    assert nt.pairs().shape == (nt.n_pairs, 2)
    assert nt.to_scipy().nnz == nt.n_pairs
    r = sj.join(X[:100], X, 0.3, device="cpu")
    assert r.n_pairs > 0


def test_auto_uses_the_free_memory_with_a_margin():
    free = 1000 * MB
    allowed = int(free * MEMORY_MARGIN)
    pairs = (allowed - 8 * 11) // 4
    assert result_size_guard(pairs, 10, free_bytes=free, where="device") == 8 * 11 + 4 * pairs
    with pytest.raises(ResultTooLargeError) as info:
        result_size_guard(pairs + 1, 10, free_bytes=free, where="device")
    assert "device memory" in str(info.value) and "on_device=False" in str(info.value)
    # device memory cannot be overcommitted: the free bytes bound a larger limit
    with pytest.raises(ResultTooLargeError):
        result_size_guard(pairs, 10, free_bytes=MB, where="device", memory_limit=free)
    # host: the system's available memory (a result far beyond any machine's)
    with pytest.raises(ResultTooLargeError) as info:
        result_size_guard(10**18, 10)
    assert "host memory" in str(info.value)


@pytest.mark.parametrize("bad", [0, -5, 1.5, "big", True, None])
def test_memory_limit_validated(bad):
    with pytest.raises(ValueError, match="memory_limit"):
        check_memory_limit(bad)
    with pytest.raises(ValueError, match="memory_limit"):
        sj.self_join(np.zeros((3, 2)), 1.0, device="cpu", memory_limit=bad)


def test_pairs_and_to_scipy_guarded():
    X = np.random.default_rng(3).uniform(0, 1, (2000, 2))
    nt = sj.self_join(X, 0.05, device="cpu", return_distance=True)
    for call in (lambda: nt.pairs(memory_limit=1000),
                 lambda: nt.pairs(unique=True, memory_limit=1000),
                 lambda: nt.to_scipy(memory_limit=1000),
                 lambda: nt.to_scipy(mode="distance", memory_limit=1000)):
        with pytest.raises(ResultTooLargeError) as info:
            call()
        _check_message(info.value, nt.n_pairs)
    assert nt.pairs(memory_limit=24 * nt.n_pairs).shape == (nt.n_pairs, 2)


def test_dbscan_table_path_guarded():
    """DBSCAN in 5-D takes the table path (HYBRID-DBSCAN): the guard applies,
    float64 (the join on the ordering grid) and float32 alike; a normal run
    equals scikit-learn."""
    from sklearn.cluster import DBSCAN as SkDBSCAN

    rng = np.random.default_rng(4)
    X = rng.normal(0, 1, (3000, 5))
    for precision in ("float64", "float32"):
        est = sj.DBSCAN(eps=3.0, min_samples=5, device="cpu", precision=precision,
                        memory_limit=100_000)
        with pytest.raises(ResultTooLargeError) as info:
            est.fit(X)
        for way in WAYS_OUT:
            assert way in str(info.value)
    with pytest.raises(ResultTooLargeError):
        sj.dbscan(X, eps=3.0, min_samples=5, device="cpu", memory_limit=100_000)
    est = sj.DBSCAN(eps=1.0, min_samples=5, device="cpu").fit(X)
    assert est.path_ == "hybrid-cpu"
    ref = SkDBSCAN(eps=1.0, min_samples=5).fit(X)
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    with pytest.raises(ValueError):
        sj.DBSCAN(eps=1.0, memory_limit=-1, device="cpu").fit(X)
