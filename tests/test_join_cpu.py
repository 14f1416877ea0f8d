"""The CPU epsilon join against float64 brute force and scipy's cKDTree."""

import os

import numpy as np
import pytest
from scipy.spatial import cKDTree

import skyjoin as sj
from skyjoin.index.grid import build_grid, linear_strides

from oracles import brute_pairs, table_matrix

PATTERNS = ["full", "unicomp", "lid_unicomp"]
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


def random_case(rng, kind, n, d):
    if kind == "uniform":
        return rng.uniform(-5, 5, (n, d)), float(rng.choice([0.3, 0.5, 1.0, 2.0]))
    if kind == "grid":  # exactly representable coordinates: many ties at exactly eps
        return rng.integers(-3, 4, (n, d)).astype(float) * 0.5, float(rng.choice([0.5, 1.0]))
    if kind == "scaled":  # very small and very large scales
        s = 10.0 ** rng.uniform(-8, 8)
        return rng.normal(0, 1, (n, d)) * s, float(s * rng.uniform(0.2, 1.5))
    if kind == "clustered":
        X = rng.normal(0, 0.2, (n, d)) + rng.integers(0, 3, (n, 1)) - 10.0
        return X, 0.25
    if kind == "duplicates":
        base = rng.uniform(0, 2, (max(1, n // 5), d))
        return base[rng.integers(0, len(base), n)], 0.4
    if kind == "outlier":  # a far outlier: the grid must not wrap its linear ids
        X = rng.uniform(0, 3, (n, d))
        X[0] = 1e14
        X[-1, 0] = -3e15
        return X, 0.5
    raise ValueError(kind)


KINDS = ["uniform", "grid", "scaled", "clustered", "duplicates", "outlier"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_self_join_matches_brute_force(rng, kind, pattern):
    for trial in range(12):
        n = int(rng.integers(2, 250))
        d = int(rng.integers(1, 11))
        X, eps = random_case(rng, kind, n, d)
        k = int(rng.integers(1, min(d, 8) + 1))
        for include_self in (False, True):
            nt = sj.self_join(X, eps, device="cpu", pattern=pattern, index_dims=k,
                              include_self=include_self)
            want = brute_pairs(X, X, eps, self_join=True, include_self=include_self)
            assert np.array_equal(table_matrix(nt), want), (kind, pattern, n, d, k, include_self)
            # columns ascending within each row
            assert all(np.all(np.diff(nt.row(i)) > 0) for i in range(n))
            assert nt.sorted


def test_patterns_identical_on_larger_data(rng):
    X = np.concatenate([rng.uniform(0, 20, (6000, 3)), rng.normal(5, 0.3, (4000, 3))])
    tables = [sj.self_join(X, 0.35, device="cpu", pattern=p) for p in PATTERNS]
    for t in tables[1:]:
        assert t == tables[0]


@pytest.mark.parametrize("d", [1, 2, 3, 5, 10])
def test_matches_ckdtree(rng, d):
    n = 20000 if d <= 3 else 8000
    X = rng.uniform(0, 10, (n, d))
    eps = {1: 0.002, 2: 0.06, 3: 0.25, 5: 1.2, 10: 4.0}[d]
    nt = sj.self_join(X, eps, device="cpu")
    pairs = cKDTree(X).query_pairs(eps, output_type="ndarray")
    assert nt.n_pairs == 2 * len(pairs)
    got = nt.pairs()
    got = got[got[:, 0] < got[:, 1]]
    want = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    assert np.array_equal(got, want)


def test_unsorted_rows_hold_the_same_sets(rng):
    X = rng.uniform(0, 5, (3000, 2))
    a = sj.self_join(X, 0.2, device="cpu", sort=False)
    b = sj.self_join(X, 0.2, device="cpu")
    assert not a.sorted and b.sorted
    assert np.array_equal(a.indptr, b.indptr)
    assert a.sort_rows() == b


def test_counts_equal_row_lengths(rng):
    X = rng.uniform(0, 4, (5000, 3))
    for include_self in (False, True):
        nt = sj.self_join(X, 0.3, device="cpu", include_self=include_self)
        c = sj.self_join(X, 0.3, device="cpu", output="counts", include_self=include_self)
        assert c.dtype == np.int64
        assert np.array_equal(c, nt.counts())


@pytest.mark.parametrize("kind", ["uniform", "grid", "clustered", "outlier"])
def test_counts_by_each_pattern_match_brute_force(rng, kind):
    """Self-join counts by the full pattern's counting pass and by LID-UNICOMP's
    forward half (asked, or chosen by "auto" for sparse cells) equal the
    brute-force row lengths, duplicates and include_self included."""
    for trial in range(8):
        d = int(rng.integers(1, 8))
        X, eps = random_case(rng, kind, int(rng.integers(1, 300)), d)
        if trial % 2:
            X = np.vstack([X, X[: len(X) // 3]])        # duplicated points
        ref = brute_pairs(X, X, eps)
        np.fill_diagonal(ref, False)
        for include_self in (False, True):
            want = ref.sum(axis=1) + int(include_self)
            for pattern in ("auto", "full", "lid_unicomp", "unicomp"):
                got = sj.self_join(X, eps, device="cpu", output="counts", pattern=pattern,
                                   include_self=include_self)
                assert got.dtype == np.int64
                np.testing.assert_array_equal(got, want, err_msg=f"{pattern} d={d}")


def test_sparse_counts_take_the_forward_half(rng):
    """Most points in sparse cells: "auto" counts by LID-UNICOMP's forward half
    (the pattern of the table), equal to the table's row lengths."""
    from skyjoin.simjoin import plan as jplan
    from skyjoin.simjoin.plan import JoinPlan

    X = rng.uniform(0, 10, (20000, 6))
    g = build_grid(X, 1.5)
    resolved = jplan.plan_cpu(JoinPlan(device="cpu", output="counts", self_join=True), g)
    assert resolved.pattern == "lid_unicomp"
    assert jplan.plan_cpu(JoinPlan(device="cpu", output="counts", self_join=False), g).pattern == "full"
    c = sj.self_join(X, 1.5, device="cpu", output="counts")
    assert np.array_equal(c, sj.self_join(X, 1.5, device="cpu").counts())


@pytest.mark.parametrize("kind", ["uniform", "grid", "clustered", "outlier"])
def test_join_r_s_matches_brute_force(rng, kind):
    for trial in range(10):
        d = int(rng.integers(1, 9))
        S, eps = random_case(rng, kind, int(rng.integers(1, 200)), d)
        R, _ = random_case(rng, kind, int(rng.integers(1, 150)), d)
        R = R + rng.normal(0, eps, R.shape) * (trial % 2)
        nt = sj.join(R, S, eps, device="cpu")
        assert nt.shape == (len(R), len(S))
        assert np.array_equal(table_matrix(nt), brute_pairs(R, S, eps))
        c = sj.join(R, S, eps, device="cpu", output="counts")
        assert np.array_equal(c, nt.counts())


@pytest.mark.parametrize("max_pairs", [1, 50, 1000, 10**9])
def test_chunks_reassemble(rng, max_pairs):
    X = np.concatenate([rng.uniform(0, 3, (1500, 2)), rng.uniform(0, 3, (10, 2))])
    nt = sj.self_join(X, 0.15, device="cpu")
    chunks = list(sj.self_join_chunks(X, 0.15, device="cpu", max_pairs=max_pairs))
    assert chunks[0].row_start == 0 and chunks[-1].row_stop == len(X)
    for a, b in zip(chunks, chunks[1:]):
        assert a.row_stop == b.row_start
    for c in chunks:
        assert len(c) <= max_pairs or c.row_stop - c.row_start == 1
    i = np.concatenate([c.i for c in chunks])
    j = np.concatenate([c.j for c in chunks])
    assert np.array_equal(np.column_stack([i, j]), nt.pairs())


def test_float32_precision(rng):
    X = rng.uniform(0, 3, (2000, 3))
    nt = sj.self_join(X, 0.2, device="cpu", precision="float32")
    want = brute_pairs(X, X, 0.2, self_join=True, dtype=np.float32)
    assert np.array_equal(table_matrix(nt), want)


def test_ties_at_exactly_eps():
    X = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.5], [0.5, 0.5], [1.5, 0.0]])
    nt = sj.self_join(X, 0.5, device="cpu")
    assert nt.pairs().tolist() == [[0, 1], [0, 2], [1, 0], [1, 3], [2, 0], [2, 3], [3, 1], [3, 2]]
    X = np.array([[3.0, 4.0], [0.0, 0.0]])  # distance exactly 5
    assert sj.self_join(X, 5.0, device="cpu").n_pairs == 2
    assert sj.self_join(X, np.nextafter(5.0, 0), device="cpu").n_pairs == 0


def test_empty_and_single_point():
    nt = sj.self_join(np.zeros((0, 3)), 1.0, device="cpu")
    assert nt.shape == (0, 0) and nt.n_pairs == 0
    assert sj.self_join(np.zeros((0, 3)), 1.0, device="cpu", output="counts").shape == (0,)
    nt = sj.self_join(np.ones((1, 3)), 1.0, device="cpu")
    assert nt.shape == (1, 1) and nt.n_pairs == 0
    assert sj.self_join(np.ones((1, 3)), 1.0, device="cpu", include_self=True).pairs().tolist() == [[0, 0]]
    assert list(sj.self_join_chunks(np.zeros((0, 2)), 1.0, device="cpu")) == []
    assert sj.join(np.zeros((0, 2)), np.ones((3, 2)), 1.0, device="cpu").shape == (0, 3)


def test_integer_and_float32_input_dtypes(rng):
    Xi = rng.integers(0, 20, (500, 2))
    assert sj.self_join(Xi, 1.0, device="cpu") == sj.self_join(Xi.astype(float), 1.0, device="cpu")
    Xf = rng.uniform(0, 1, (500, 2)).astype(np.float32)
    assert sj.self_join(Xf, 0.1, device="cpu") == sj.self_join(Xf.astype(np.float64), 0.1, device="cpu")


def test_results_deterministic(rng):
    X = rng.uniform(0, 2, (4000, 2))
    a = sj.self_join(X, 0.1, device="cpu", sort=False)
    b = sj.self_join(X, 0.1, device="cpu", sort=False)
    assert np.array_equal(a.indices, b.indices)


def test_neighbor_table_conversions(rng):
    X = rng.uniform(0, 1, (300, 2))
    nt = sj.self_join(X, 0.1, device="cpu")
    m = nt.to_scipy()
    assert m.shape == (300, 300) and m.nnz == nt.n_pairs
    assert (m != m.T).nnz == 0
    p = nt.pairs()
    assert p.shape == (nt.n_pairs, 2) and p.dtype == np.int64
    assert np.array_equal(nt.counts(), np.bincount(p[:, 0], minlength=300))
    assert "NeighborTable" in repr(nt)


def test_gdsjoin_known_answer():
    path = os.path.join(DATA, "gdsjoin-test-2d-100k.txt")
    if not os.path.exists(path):
        pytest.skip("shared data set not found")
    X = np.loadtxt(path, delimiter=",")
    assert X.shape == (100000, 2)
    nt = sj.self_join(X, 1.0, device="cpu")
    assert nt.n_pairs == 27_882_048
    assert sj.self_join(X, 1.0, device="cpu", output="counts", include_self=True).sum() == 27_982_048


def test_grid_outlier_never_wraps():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [1e300, -1e300], [-1e300, 1e300]])
    g = build_grid(X, 1e-3)
    assert g.k >= 1 and np.all(g.cell_ids >= 0) and np.all(np.diff(g.cell_ids) > 0)
    assert sj.self_join(X, 0.2, device="cpu").pairs().tolist() == [[0, 1], [1, 0]]


def test_grid_structure(rng):
    X = rng.uniform(0, 10, (2000, 4))
    g = build_grid(X, 0.7)
    assert g.k == 4
    assert np.array_equal(np.sort(g.order), np.arange(2000))
    assert np.array_equal(g.points, X[g.order])
    assert g.cell_start[0] == 0 and g.cell_start[-1] == 2000
    assert np.all(np.diff(g.cell_start) > 0)  # only non-empty cells
    for j in range(4):
        m = g.mask(j)
        assert np.all(np.diff(m) > 0)
    # every point lies in the cell whose coordinates its linear id encodes
    coords = np.floor((g.points[:, :4] - g.lo) / g.side).astype(np.int64)
    ranks = np.stack([np.searchsorted(g.mask(j), coords[:, j]) for j in range(4)], axis=1)
    lid = (ranks * g.stride).sum(axis=1)
    cell_of_point = np.repeat(np.arange(g.n_cells), np.diff(g.cell_start))
    assert np.array_equal(lid, g.cell_ids[cell_of_point])


def test_the_plan_records_every_choice(rng):
    """The plan an operator reports says what ran: device, engine, pattern,
    precision, id width and memory route, each resolved (none left "auto")."""
    from skyjoin._core.plans import recording
    from skyjoin.simjoin.plan import JoinPlan

    X = rng.uniform(0, 1, (3000, 2))
    with recording() as plans:
        nt = sj.self_join(X, 0.02, device="cpu", precision="float32")
        c = sj.self_join(X, 0.02, device="cpu", output="counts", pattern="unicomp")
        stream = sj.self_join_chunks(X, 0.02, device="cpu", pattern="lid_unicomp", max_pairs=99)
        chunked = sum(len(ch) for ch in stream)
        sj.join(X[:10], X, 0.02, device="cpu")
    table, counts, chunks, rs = [p for p in plans if isinstance(p, JoinPlan)]
    assert (table.device, table.engine, table.precision, table.id_width, table.memory_route) \
        == ("cpu", "numba", "float32", "int32", "host table")
    assert table.pattern in ("full", "lid_unicomp") and table.sort
    assert (counts.memory_route, counts.pattern) == ("counts", "full")    # no UNICOMP counter
    assert (chunks.memory_route, chunks.pattern) == ("chunks", "full")    # chunks fill by cells
    assert "asked lid_unicomp" in chunks.reason
    assert (rs.self_join, rs.pattern, rs.memory_route) == (False, "full", "host table")
    for p in (table, counts, chunks, rs):
        assert f"route={p.memory_route}" in p.describe() and "ids=int32" in p.describe()
    assert chunked == nt.n_pairs == int(c.sum())


def test_gpu_requests_record_their_route():
    """The GPU request of each output (host-only: the rule, no device)."""
    from skyjoin.simjoin.plan import plan_gpu, request

    assert request("gpu", self_join=True).memory_route == "host table"
    assert request("gpu", self_join=True, on_device=True).memory_route == "device table"
    assert request("gpu", self_join=True, output="counts").memory_route == "counts"
    assert request("gpu", self_join=True, output="counts",
                   on_device=True).memory_route == "device counts"
    assert request("gpu", self_join=True, chunks=True).memory_route == "chunks"
    assert request("cpu", self_join=True, kernel="shared").kernel is None   # GPU options dropped
    plan = plan_gpu(request("gpu", self_join=True, device_memory_limit=10**9), 300.0, 0.5, 2)
    assert (plan.engine, plan.id_width, plan.device_memory_limit) == ("cuda", "int32", 10**9)
    assert plan.kernel == "global" and plan.threads_per_point == 8
    with pytest.raises(ValueError, match="device_memory_limit"):
        request("gpu", self_join=True, device_memory_limit=0)


def test_linear_strides_number_cells_as_numpy_ravels_them():
    """The one helper behind every grid's linear cell keys (last dimension
    fastest) against NumPy's row-major ravel, on random shapes."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        radix = rng.integers(1, 40, rng.integers(1, 6))
        q = np.stack([rng.integers(0, r, 20) for r in radix], axis=1)
        stride = linear_strides(radix)
        assert stride.dtype == np.int64
        np.testing.assert_array_equal(q @ stride, np.ravel_multi_index(q.T, tuple(radix)))
