"""GPU epsilon join: every kernel and option equal to a float64 brute force, pair for pair.

All tests are marked ``gpu`` and skip cleanly without CuPy or a GPU.  The
oracle evaluates the same test as the library (sum over k of (x_k - y_k)^2 <=
eps^2, terms added in dimension order, in the working precision) by brute
force in NumPy, which performs no fused multiply-add.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import skyjoin
from skyjoin.simjoin.result import NeighborTable

# Every test that touches the GPU is marked ``gpu``; the host-side planning
# tests at the end need no GPU and run everywhere.




def engine_self_join(X, eps, *, progress=None, timings=None, query_rows=None, column_ids=None,
                     n_columns=None, rows_ready=None, **request_options):
    """The GPU self-join through the engine entry (``skyjoin.simjoin.engine.run``),
    with a request of ``plan.request`` (the options the distributed join's
    partitions use included: ``query_rows``, ``column_ids``)."""
    from skyjoin.simjoin import engine
    from skyjoin.simjoin.plan import request

    plan = request("gpu", self_join=True, **request_options)
    return engine.run(plan, None, X, eps, progress=progress, timings=timings,
                      query_rows=query_rows, column_ids=column_ids, n_columns=n_columns,
                      rows_ready=rows_ready)


def engine_join(R, S, eps, **request_options):
    """R join S on the GPU through the engine entry."""
    from skyjoin.simjoin import engine
    from skyjoin.simjoin.plan import request

    return engine.run(request("gpu", self_join=False, **request_options), R, S, eps)


def engine_chunks(X, eps, *, max_pairs, **request_options):
    """The GPU self-join's chunks through the engine entry."""
    from skyjoin.simjoin import engine
    from skyjoin.simjoin.plan import request
    from skyjoin.simjoin.result import PairStream

    plan = request("gpu", self_join=True, chunks=True, **request_options)
    return PairStream(engine.run_chunks(plan, X, eps, max_pairs))


def last_stats():
    from skyjoin.simjoin.gpu.pipeline import last_stats as stats

    return stats()


def estimate_batches(sample_pairs, fraction, buffer_pairs, gamma=0.05):
    """The papers' sampled result-size estimate and batch count (HYBRID-DBSCAN
    §6, Eq. 1; Gallet & Gowanlock 2019 §II-C2): a_b = e_b / f pairs from e_b
    pairs found for a fraction f of the queries, and
    n_b = ceil((1 + gamma) a_b / b_b) batches of b_b pairs."""
    a_b = int(math.ceil(sample_pairs / fraction))
    n_b = max(1, int(math.ceil((1.0 + gamma) * a_b / max(1, buffer_pairs))))
    return a_b, n_b


def sampled_estimate(X, eps, *, fraction=0.01, buffer_pairs=10**8, gamma=0.05,
                     precision="float64", index_dims=None, include_self=True):
    """The papers' result-size estimate: count the neighbours of every
    ``1/fraction``-th query point (in grid order, so the sample is spread over
    the data) and apply ``estimate_batches``."""
    from skyjoin.simjoin.gpu.pipeline import configure, start
    from skyjoin.simjoin.plan import request as join_request

    request = join_request("gpu", self_join=True, include_self=include_self,
                           precision=precision, index_dims=index_dims)
    cp, eng, stats = start(None, X, eps, request)
    if eng.empty:
        return {"estimate": 0, "batches": 1, "sample_pairs": 0}
    configure(eng, request)
    step = max(1, int(round(1.0 / fraction)))
    sample = cp.arange(0, eng.qgrid.n_points, step, dtype=cp.int32)
    counts = cp.zeros(eng.n_rows, dtype=cp.int32)
    eng._launch(False, sample, counts, None, 0, None, None, 0, eng.n_rows, None)
    e_b = int(counts.sum(dtype=cp.int64))
    frac = sample.size / eng.qgrid.n_points
    a_b, n_b = estimate_batches(e_b, frac, buffer_pairs, gamma)
    return {"estimate": a_b, "batches": n_b, "sample_pairs": e_b}


# ---------------------------------------------------------------------------
# oracle and data
# ---------------------------------------------------------------------------

def brute(R, S, eps, *, self_join, include_self=False, precision="float64"):
    """CSR (indptr, indices) of the join by brute force in the working precision."""
    dt = np.float32 if precision == "float32" else np.float64
    Rw = np.asarray(R, dtype=dt)
    Sw = np.asarray(S, dtype=dt)
    e = dt(eps)
    e2 = dt(e * e)
    s = np.zeros((Rw.shape[0], Sw.shape[0]), dtype=dt)
    for k in range(Rw.shape[1]):
        t = Rw[:, None, k] - Sw[None, :, k]
        s = s + t * t
    mask = s <= e2
    if self_join and not include_self:
        np.fill_diagonal(mask, False)
    counts = mask.sum(axis=1)
    indptr = np.zeros(Rw.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.nonzero(mask)[1].astype(np.int32)
    return indptr, indices


def make_points(rng, n, d, kind):
    """Uniform, clustered, duplicated, lattice (ties at exactly eps) or outlier data."""
    if kind == "uniform":
        X = rng.uniform(0, 10, (n, d))
    elif kind == "clustered":
        centers = rng.uniform(0, 10, (4, d))
        X = centers[rng.integers(0, 4, n)] + rng.normal(0, 0.3, (n, d))
    elif kind == "duplicates":
        base = rng.uniform(0, 5, (max(1, n // 4), d))
        X = base[rng.integers(0, base.shape[0], n)]
    elif kind == "lattice":
        # coordinates on a 0.25 grid: many squared distances equal eps^2 exactly
        X = rng.integers(0, 12, (n, d)) * 0.25
    elif kind == "outlier":
        n = max(n, 2)
        X = rng.uniform(0, 10, (n, d))
        X[0] = 1e15
        X[1, 0] = -3e14
    else:
        raise ValueError(kind)
    return np.ascontiguousarray(X, dtype=np.float64)


def eps_for(kind, d):
    return {"lattice": 0.5, "duplicates": 0.4}.get(kind, 0.6 + 0.25 * d)


def assert_table_equal(nt, indptr, indices, sorted_rows=True):
    assert isinstance(nt, NeighborTable)
    h = nt.to_host()
    np.testing.assert_array_equal(np.asarray(h.indptr), indptr)
    got = np.asarray(h.indices)
    if sorted_rows:
        np.testing.assert_array_equal(got, indices)
    else:
        for i in range(len(indptr) - 1):
            a, b = indptr[i], indptr[i + 1]
            np.testing.assert_array_equal(np.sort(got[a:b]), indices[a:b])


# ---------------------------------------------------------------------------
# the default path
# ---------------------------------------------------------------------------

KINDS = ["uniform", "clustered", "duplicates", "lattice", "outlier"]


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(24))
def test_self_join_random_cases(cp, seed):
    rng = np.random.default_rng(1000 + seed)
    d = int(rng.integers(1, 11))
    kind = KINDS[seed % len(KINDS)]
    n = int(rng.integers(1, 1500))
    X = make_points(rng, n, d, kind)
    eps = eps_for(kind, d)
    include_self = bool(seed % 2)
    precision = "float32" if seed % 3 == 0 else "float64"
    nt = engine_self_join(X, eps, include_self=include_self, precision=precision)
    ip, ind = brute(X, X, eps, self_join=True, include_self=include_self, precision=precision)
    assert_table_equal(nt, ip, ind)
    assert nt.sorted and nt.shape == (n, n)
    counts = engine_self_join(X, eps, include_self=include_self, precision=precision,
                                 output="counts")
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, np.diff(ip))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(8))
def test_join_r_s(cp, seed):
    rng = np.random.default_rng(2000 + seed)
    d = int(rng.integers(1, 8))
    kind = KINDS[seed % len(KINDS)]
    R = make_points(rng, int(rng.integers(1, 700)), d, kind)
    S = make_points(rng, int(rng.integers(1, 900)), d, "uniform" if seed % 2 else kind)
    eps = eps_for(kind, d)
    precision = "float32" if seed % 2 else "float64"
    nt = engine_join(R, S, eps, precision=precision)
    ip, ind = brute(R, S, eps, self_join=False, precision=precision)
    assert nt.shape == (len(R), len(S))
    assert_table_equal(nt, ip, ind)
    c = engine_join(R, S, eps, precision=precision, output="counts")
    np.testing.assert_array_equal(c, np.diff(ip))


@pytest.mark.gpu
def test_sort_false_same_pairs(cp):
    rng = np.random.default_rng(5)
    X = make_points(rng, 1200, 3, "clustered")
    nt = engine_self_join(X, 0.5, sort=False)
    ip, ind = brute(X, X, 0.5, self_join=True)
    assert not nt.sorted
    assert_table_equal(nt, ip, ind, sorted_rows=False)


@pytest.mark.gpu
def test_deterministic(cp):
    rng = np.random.default_rng(6)
    X = make_points(rng, 2000, 2, "clustered")
    a = engine_self_join(X, 0.3, sort=False, threads_per_point=4)
    b = engine_self_join(X, 0.3, sort=False, threads_per_point=4)
    np.testing.assert_array_equal(a.indices, b.indices)


@pytest.mark.gpu
def test_dimensions_up_to_20(cp):
    rng = np.random.default_rng(7)
    for d in (12, 16, 20):
        X = rng.uniform(0, 1, (400, d))
        eps = 0.35 * np.sqrt(d) * 0.5
        nt = engine_self_join(X, eps)
        assert_table_equal(nt, *brute(X, X, eps, self_join=True))
        for k in (7, 8):
            nt = engine_self_join(X, eps, index_dims=k)
            assert_table_equal(nt, *brute(X, X, eps, self_join=True))


@pytest.mark.gpu
def test_linear_ids_never_wrap(cp):
    # 8 indexed dims with ~n occupied coordinates each: the product overflows
    # 62 bits, so fewer dimensions are indexed; results stay exact.
    rng = np.random.default_rng(8)
    X = rng.uniform(0, 1e6, (3000, 8))
    X[:100] = X[100:200] + rng.uniform(0, 0.5, (100, 8))
    nt = engine_self_join(X, 1.5, index_dims=8)
    assert last_stats()["index_dims"] < 8
    assert_table_equal(nt, *brute(X, X, 1.5, self_join=True))


@pytest.mark.gpu
def test_single_point_and_empty(cp):
    X = np.zeros((1, 3))
    nt = engine_self_join(X, 1.0)
    assert nt.n_pairs == 0 and nt.shape == (1, 1)
    nt = engine_self_join(X, 1.0, include_self=True)
    assert nt.pairs().tolist() == [[0, 0]]
    nt = engine_self_join(np.zeros((0, 2)), 1.0)
    assert nt.n_pairs == 0 and nt.shape == (0, 0)


# ---------------------------------------------------------------------------
# every kernel and option of the papers
# ---------------------------------------------------------------------------

OPTION_CASES = (
    [dict(kernel="global", pattern=p) for p in ("full", "unicomp", "lid_unicomp", "lid-unicomp")]
    + [dict(threads_per_point=k) for k in (1, 2, 4, 8, 16, 32)]
    + [dict(schedule=s) for s in ("grid", "sortbywl", "workqueue")]
    + [dict(pattern="lid_unicomp", schedule="workqueue", threads_per_point=8),
       dict(pattern="unicomp", schedule="sortbywl", threads_per_point=4),
       dict(kernel="shared"), dict(kernel="bruteforce"),
       dict(kernel="bruteforce", threads_per_point=32)]
)


@pytest.mark.gpu
@pytest.mark.parametrize("opts", OPTION_CASES, ids=lambda o: "-".join(f"{v}" for v in o.values()))
@pytest.mark.parametrize("d", [2, 3])
def test_options_equal_bruteforce(cp, opts, d):
    rng = np.random.default_rng(30 + d)
    X = np.concatenate([make_points(rng, 900, d, "clustered"),
                        make_points(rng, 300, d, "lattice")])
    for include_self in (False, True):
        for eps in (0.5, 1.0):
            nt = engine_self_join(X, eps, include_self=include_self, **opts)
            assert_table_equal(nt, *brute(X, X, eps, self_join=True, include_self=include_self))
            c = engine_self_join(X, eps, include_self=include_self, output="counts", **opts)
            np.testing.assert_array_equal(c, np.diff(brute(X, X, eps, self_join=True,
                                                           include_self=include_self)[0]))


@pytest.mark.gpu
@pytest.mark.parametrize("opts", [dict(threads_per_point=8), dict(schedule="workqueue"),
                                  dict(kernel="shared"), dict(kernel="bruteforce")],
                         ids=lambda o: "-".join(f"{v}" for v in o.values()))
def test_join_options(cp, opts):
    rng = np.random.default_rng(40)
    R = make_points(rng, 500, 3, "clustered")
    S = make_points(rng, 800, 3, "clustered")
    nt = engine_join(R, S, 0.7, **opts)
    assert_table_equal(nt, *brute(R, S, 0.7, self_join=False))


@pytest.mark.gpu
def test_bad_options(cp):
    """Bad options are refused at the public boundary (the engine has no door of its own)."""
    X = np.zeros((10, 2))
    with pytest.raises(ValueError):
        skyjoin.self_join(X, 1.0, device="gpu", pattern="diagonal")
    with pytest.raises(ValueError):
        skyjoin.self_join(X, 1.0, device="gpu", threads_per_point=3)
    with pytest.raises(ValueError):
        skyjoin.self_join(X, 1.0, device="gpu", schedule="random")
    with pytest.raises(ValueError):
        skyjoin.self_join(X, 1.0, device="gpu", kernel="shared", threads_per_point=8)
    with pytest.raises(ValueError):
        skyjoin.self_join(X, 1.0, device="gpu", output="pairs")
    with pytest.raises(ValueError):
        skyjoin.self_join(X, -1.0, device="gpu")
    with pytest.raises(ValueError):
        skyjoin.self_join(X, 1.0, device="gpu", index_dims=3)


# ---------------------------------------------------------------------------
# batching: many batches, memory caps, results on the device, chunks
# ---------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("opts", [dict(), dict(pattern="lid_unicomp"), dict(pattern="unicomp"),
                                  dict(schedule="workqueue", threads_per_point=4),
                                  dict(kernel="shared")],
                         ids=["default", "lid", "uni", "wq-k4", "shared"])
def test_many_batches(cp, opts):
    rng = np.random.default_rng(50)
    X = make_points(rng, 1500, 2, "clustered")
    ref = brute(X, X, 0.4, self_join=True)
    longest = int(np.diff(ref[0]).max())
    nt = engine_self_join(X, 0.4, batch_pairs=longest, **opts)
    st = last_stats()
    assert st["batches"] >= 10
    assert_table_equal(nt, *ref)


@pytest.mark.gpu
@pytest.mark.parametrize("opts", [dict(), dict(pattern="lid_unicomp"), dict(pattern="unicomp"),
                                  dict(schedule="workqueue", threads_per_point=4),
                                  dict(kernel="shared"), dict(threads_per_point=8)],
                         ids=["default", "lid", "uni", "wq-k4", "shared", "k8"])
@pytest.mark.parametrize("seed", range(3))
def test_query_rows_and_column_ids(cp, opts, seed):
    """The first m rows only, with columns renamed before sorting (the distributed
    join's partitions): equal to the brute-force rows mapped through the ids."""
    rng = np.random.default_rng(60 + seed)
    d = 1 + seed
    X = make_points(rng, 1200, d, ["clustered", "lattice", "duplicates"][seed])
    eps = eps_for(["clustered", "lattice", "duplicates"][seed], d)
    n = len(X)
    m = int(rng.integers(0, n + 1)) if seed else n // 3
    ids = rng.permutation(5 * n)[:n].astype(np.int32)         # any distinct ids
    include_self = bool(seed % 2)
    ip, ind = brute(X, X, eps, self_join=True, include_self=include_self)
    counts = np.diff(ip)[:m]
    rows = [np.sort(ids[ind[ip[i]:ip[i + 1]]]) for i in range(m)]
    expect = np.concatenate(rows) if rows else np.zeros(0, np.int32)
    longest = int(counts.max()) if m and counts.max() > 0 else 1
    for bp in (None, max(longest, int(counts.sum()) // 7 + 1)):
        nt = engine_self_join(X, eps, include_self=include_self, query_rows=m,
                                 column_ids=ids, n_columns=5 * n, batch_pairs=bp, **opts)
        assert nt.shape == (m, 5 * n) and nt.sorted
        np.testing.assert_array_equal(np.diff(nt.indptr), counts)
        np.testing.assert_array_equal(nt.indices, expect)
        c = engine_self_join(X, eps, include_self=include_self, query_rows=m,
                                output="counts", **opts)
        np.testing.assert_array_equal(c, counts)
    with pytest.raises(ValueError, match="query_rows"):
        engine_self_join(X, eps, query_rows=n + 1)
    with pytest.raises(ValueError, match="column_ids"):
        engine_self_join(X, eps, column_ids=ids[:-1], n_columns=5 * n)


@pytest.mark.gpu
def test_device_memory_limit_forces_batches(cp):
    rng = np.random.default_rng(51)
    X = make_points(rng, 3000, 2, "clustered")
    ref = brute(X, X, 0.3, self_join=True)
    pool = cp.get_default_memory_pool()
    used = pool.used_bytes()
    # the grid and counts take well under 2 MB here; the rest holds a few rows only
    limit = used + 2 * 1024 * 1024 + 12 * 3 * int(np.diff(ref[0]).max())
    assert ref[0][-1] * 12 > 4 * 1024 * 1024
    nt = engine_self_join(X, 0.3, device_memory_limit=limit)
    assert last_stats()["batches"] > 1
    assert_table_equal(nt, *ref)
    with pytest.raises(MemoryError):
        engine_self_join(X, 0.3, device_memory_limit=1, on_device=True)


@pytest.mark.gpu
def test_on_device_result(cp):
    rng = np.random.default_rng(52)
    X = make_points(rng, 1000, 3, "clustered")
    nt = engine_self_join(X, 0.5, on_device=True)
    assert nt.on_device
    assert isinstance(nt.indptr, cp.ndarray) and nt.indices.dtype == np.int32
    assert_table_equal(nt, *brute(X, X, 0.5, self_join=True))
    nt = engine_self_join(X, 0.5, on_device=True, batch_pairs=2000)
    assert last_stats()["batches"] > 1
    assert_table_equal(nt, *brute(X, X, 0.5, self_join=True))
    c = engine_self_join(X, 0.5, on_device=True, output="counts")
    assert isinstance(c, cp.ndarray)


@pytest.mark.gpu
def test_cupy_input(cp):
    rng = np.random.default_rng(53)
    X = make_points(rng, 800, 2, "uniform")
    nt = engine_self_join(cp.asarray(X), 0.4)
    assert_table_equal(nt, *brute(X, X, 0.4, self_join=True))
    nt = engine_self_join(cp.asarray(X.astype(np.float32)), 0.4, precision="float32")
    assert_table_equal(nt, *brute(X.astype(np.float32), X.astype(np.float32), 0.4,
                                  self_join=True, precision="float32"))
    Y = cp.asarray(X)
    Y[3, 1] = cp.nan
    with pytest.raises(ValueError):
        engine_self_join(Y, 0.4)
    with pytest.raises(ValueError):
        engine_self_join(cp.zeros(5), 0.4)
    with pytest.raises(TypeError):
        engine_self_join(cp.zeros((5, 2), dtype=cp.complex64), 0.4)


@pytest.mark.gpu
def test_chunks(cp):
    rng = np.random.default_rng(54)
    X = make_points(rng, 1500, 2, "clustered")
    ip, ind = brute(X, X, 0.4, self_join=True, include_self=True)
    longest = int(np.diff(ip).max())
    chunks = list(engine_chunks(X, 0.4, include_self=True, max_pairs=3 * longest))
    assert len(chunks) > 3
    i = np.concatenate([c.i for c in chunks])
    j = np.concatenate([c.j for c in chunks])
    rows = np.repeat(np.arange(len(X)), np.diff(ip))
    np.testing.assert_array_equal(i, rows)
    np.testing.assert_array_equal(j, ind)
    for c in chunks:
        assert len(c) <= 3 * longest
        assert c.i.dtype == np.int64 and c.j.dtype == np.int64


@pytest.mark.gpu
def test_long_rows_are_sorted(cp):
    # rows longer than 64, 2048, 8192 and 32768 entries take each sorting path
    rng = np.random.default_rng(55)
    S = rng.uniform(0, 1, (40000, 2))
    R = rng.uniform(0, 1, (40, 2))
    for e in (0.05, 0.3, 0.6, 2.0):
        nt = engine_join(R, S, e)
        assert_table_equal(nt, *brute(R, S, e, self_join=False))
    X = rng.uniform(0, 1, (3000, 2))
    nt = engine_self_join(X, 0.5)
    assert_table_equal(nt, *brute(X, X, 0.5, self_join=True))


@pytest.mark.gpu
def test_sampled_estimate(cp):
    rng = np.random.default_rng(56)
    X = rng.uniform(0, 10, (20000, 2))
    est = sampled_estimate(X, 0.3, fraction=0.05, buffer_pairs=10**5)
    true = int(engine_self_join(X, 0.3, include_self=True, output="counts").sum())
    assert 0.7 * true < est["estimate"] < 1.3 * true
    assert est["batches"] == int(np.ceil(1.05 * est["estimate"] / 10**5))


@pytest.mark.gpu
def test_public_api_gpu_equals_cpu(cp):
    api = pytest.importorskip("skyjoin.simjoin.api")
    rng = np.random.default_rng(57)
    for d, kind in ((2, "clustered"), (3, "lattice"), (5, "duplicates")):
        X = make_points(rng, 1200, d, kind)
        eps = eps_for(kind, d)
        for precision in ("float64", "float32"):
            g = skyjoin.self_join(X, eps, device="gpu", precision=precision)
            c = skyjoin.self_join(X, eps, device="cpu", precision=precision)
            assert g == c
    del api


@pytest.mark.gpu
def test_result_size_guard_on_the_gpu(cp):
    """The count knows the size: a table over memory_limit raises
    ResultTooLargeError before the fill, host or device table, self-join or
    R join S; counts are never guarded; a normal run passes."""
    rng = np.random.default_rng(58)
    X = rng.uniform(0, 1, (20000, 2))
    n_pairs = int(skyjoin.self_join(X, 0.5, device="gpu", output="counts").sum())
    for opts in ({}, {"on_device": True}):
        with pytest.raises(skyjoin.ResultTooLargeError) as info:
            skyjoin.self_join(X, 0.5, device="gpu", memory_limit=1 << 20, **opts)
        msg = str(info.value)
        assert f"{n_pairs:,} pairs" in msg
        for way in ("output='counts'", "self_join_chunks", "--out x.parquet"):
            assert way in msg
        assert ("on_device=False" in msg) == bool(opts)
        assert "fill_s" not in last_stats()           # raised before the fill
        with pytest.raises(skyjoin.ResultTooLargeError):
            skyjoin.join(X[:10000], X[10000:], 0.5, device="gpu", memory_limit=1 << 20, **opts)
    c = skyjoin.self_join(X, 0.5, device="gpu", output="counts", memory_limit=1)
    assert int(c.sum()) == n_pairs
    Y = X[:3000]
    nt = skyjoin.self_join(Y, 0.1, device="gpu")
    table = (len(Y) + 1) * 8 + nt.n_pairs * 4
    assert skyjoin.self_join(Y, 0.1, device="gpu", memory_limit=table) == nt
    with pytest.raises(skyjoin.ResultTooLargeError):
        skyjoin.self_join(Y, 0.1, device="gpu", memory_limit=table - 1)


@pytest.mark.gpu
def test_gpu_distances_equal_cpu(cp):
    """The GPU table's distances are the CPU's bit for bit (same test, same
    arithmetic: the kernels are compiled without fused multiply-adds), on a
    host or device table, float64 and float32, self-join and R join S."""
    rng = np.random.default_rng(59)
    for d, kind in ((2, "clustered"), (3, "duplicates"), (5, "uniform")):
        X = make_points(rng, 1500, d, kind)
        eps = eps_for(kind, d)
        for precision in ("float64", "float32"):
            c = skyjoin.self_join(X, eps, device="cpu", precision=precision,
                                  return_distance=True, include_self=True)
            g = skyjoin.self_join(X, eps, device="gpu", precision=precision,
                                  return_distance=True, include_self=True)
            assert g == c
            np.testing.assert_array_equal(g.distances, c.distances)
            gd = skyjoin.self_join(X, eps, device="gpu", precision=precision,
                                   return_distance=True, include_self=True, on_device=True)
            assert isinstance(gd.distances, cp.ndarray)
            np.testing.assert_array_equal(cp.asnumpy(gd.distances), c.distances)
            gx = skyjoin.self_join(cp.asarray(X), eps, device="gpu", precision=precision,
                                   return_distance=True, include_self=True)
            np.testing.assert_array_equal(gx.distances, c.distances)
        R = X[: len(X) // 3]
        c = skyjoin.join(R, X, eps, device="cpu", return_distance=True)
        g = skyjoin.join(R, X, eps, device="gpu", return_distance=True)
        assert g == c
        np.testing.assert_array_equal(g.distances, c.distances)
        _assert_scipy_equal(g.to_scipy(mode="distance"), c.to_scipy(mode="distance"))


def _assert_scipy_equal(A, B):
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


@pytest.mark.gpu
def test_gpu_plan_built_at_the_boundary_is_logged(cp, caplog):
    rng = np.random.default_rng(61)
    X = rng.uniform(0, 1, (2000, 2))
    with caplog.at_level("DEBUG", logger="skyjoin"):
        skyjoin.self_join(X, 0.1, device="gpu", memory_limit=1 << 30, return_distance=True)
    plans = [r.getMessage() for r in caplog.records if r.getMessage().startswith("join plan:")]
    assert plans and "self-join on gpu" in plans[-1]
    assert "memory_limit=1073741824" in plans[-1] and "distances" in plans[-1]
    assert "kernel=global" in plans[-1]


# ---------------------------------------------------------------------------
# host-side planning (pure Python: these run without a GPU too)
# ---------------------------------------------------------------------------

def test_gpu_request_and_plan():
    """The GPU request is built at the boundary and resolved by plan_gpu alone."""
    from skyjoin.simjoin.plan import plan_gpu, request

    req = request("gpu", self_join=True, output="table", pattern="lid-unicomp",
                  threads_per_point=16, schedule="sortbywl", memory_limit=1000,
                  return_distance=True)
    assert (req.device, req.pattern, req.kernel, req.memory_limit) == ("gpu", "lid_unicomp",
                                                                       "auto", 1000)
    plan = plan_gpu(req, 10.0, 0.1, 2)
    assert (plan.pattern, plan.threads_per_point, plan.schedule, plan.index_dims) == \
        ("lid_unicomp", 16, "sortbywl", 2)
    assert plan.return_distance and plan.memory_limit == 1000
    auto = plan_gpu(request("gpu", self_join=True), 1800.0, 0.2, 2)
    assert (auto.kernel, auto.pattern, auto.threads_per_point, auto.schedule) == \
        ("global", "full", 8, "grid")
    counts = plan_gpu(request("gpu", self_join=True, output="counts"), 400.0, 2.5, 6)
    assert (counts.pattern, counts.schedule) == ("lid_unicomp", "workqueue")
    with pytest.raises(ValueError, match="memory_limit"):
        request("gpu", self_join=True, memory_limit=0)
    with pytest.raises(ValueError):
        plan_gpu(request("gpu", self_join=False, pattern="unicomp"), 1.0, 0.0, 2)


def test_plan_row_batches_cover_rows_within_capacity():
    from skyjoin.simjoin.plan import plan_row_batches

    rng = np.random.default_rng(60)
    for _ in range(50):
        n = int(rng.integers(1, 300))
        counts = rng.integers(0, 50, n)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        cap = int(max(counts.max(), 1) * rng.integers(1, 6))
        batches = plan_row_batches(indptr, cap)
        assert batches[0][0] == 0 and batches[-1][1] == n
        for (a, b), (c, _) in zip(batches, batches[1:]):
            assert b == c and b > a
        for a, b in batches:
            assert indptr[b] - indptr[a] <= cap
    with pytest.raises(ValueError):
        plan_row_batches(np.array([0, 5, 6], dtype=np.int64), 4)


def test_batch_capacity_and_estimate():
    from skyjoin.simjoin.plan import batch_capacity

    assert batch_capacity(10**9, 100, None, 12 * 1000, 12) == 1000
    assert batch_capacity(10**9, 100, 500, 10**12, 12) == 500
    assert batch_capacity(50, 10, None, 10**12, 12) == 50
    assert batch_capacity(10**6, 3000, 10, 10**12, 12) == 3000      # a row is never split
    with pytest.raises(MemoryError):
        batch_capacity(10**6, 3000, None, 1000, 12)
    with pytest.raises(ValueError):
        batch_capacity(10, 1, 0, 10**6, 4)
    a_b, n_b = estimate_batches(1000, 0.01, 10**4, gamma=0.05)
    assert a_b == 100000 and n_b == 11


def test_default_rule():
    from skyjoin.simjoin.plan import choose_config

    c = choose_config(1800.0, 0.2, True)
    assert (c.kernel, c.pattern, c.kt, c.schedule) == ("global", "full", 8, "grid")
    c = choose_config(100.0, 0.2, True)
    assert c.kt == 1
    c = choose_config(400.0, 2.5, True, index_dims=6)        # a table: the fill rule
    assert (c.pattern, c.kt, c.schedule) == ("full", 8, "grid")
    c = choose_config(100.0, 2.5, True, index_dims=6)
    assert (c.pattern, c.kt, c.schedule) == ("full", 1, "grid")
    c = choose_config(400.0, 2.5, True, index_dims=6, counts_only=True)
    assert (c.pattern, c.kt, c.schedule) == ("lid_unicomp", 1, "workqueue")
    c = choose_config(400.0, 2.5, False, index_dims=6, counts_only=True)
    assert c.pattern == "full"                     # R join S has no symmetric pattern
    c = choose_config(400.0, 0.3, True, index_dims=6, counts_only=True, kernel="shared")
    assert (c.kernel, c.pattern, c.kt, c.schedule) == ("shared", "full", 1, "grid")
    c = choose_config(10.0, 0.1, True, pattern="lid-unicomp", threads_per_point=16,
                      schedule="sortbywl")
    assert (c.pattern, c.kt, c.schedule) == ("lid_unicomp", 16, "sortbywl")
    for bad in (dict(pattern="x"), dict(kernel="x"), dict(schedule="x"),
                dict(threads_per_point=5), dict(kernel="bruteforce", pattern="unicomp")):
        with pytest.raises(ValueError):
            choose_config(10.0, 0.1, True, **bad)
    with pytest.raises(ValueError):
        choose_config(10.0, 0.1, False, pattern="unicomp")
