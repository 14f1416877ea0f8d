"""Weighted DBSCAN (issue 14): a point is core iff the exact sum of its
neighbourhood's float64 weights, rounded once to float64, is >= min_samples.

Oracles, independent of the code under test: exact rational sums
(``fractions.Fraction`` of each float64 weight; ``float`` of a Fraction is
correctly rounded, half to even) over a float64 brute-force neighbourhood,
and scikit-learn's expansion (``dbscan_inner``) written out literally.
scikit-learn itself adds the weights with ``np.sum`` in its tree's order, so
it is compared where its rounded sums decide as the exact ones, and
elsewhere shown to differ only within its own rounding of min_samples.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import sparse
from sklearn.cluster import DBSCAN as SkDBSCAN
from sklearn.neighbors import NearestNeighbors

import skyjoin
from _cuda_emulation import FakeCupy
from oracles import brute_pairs
from skyjoin.cluster.core_points import (core_points, exact_row_sums, integer_weights,
                                       naive_sum_decides, weighted_neighbourhood)
from skyjoin.cluster.union_find import labels_from_table
from skyjoin.cluster.hybrid import hybrid_dbscan

U = 2.0 ** -53


# -- oracles -----------------------------------------------------------------

def _rounded_exact(values):
    """The exact sum of float64 values rounded once (half to even); +-inf beyond."""
    total = sum(map(Fraction, np.asarray(values, dtype=np.float64).tolist()), Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _one_by_one(values):
    """float64 additions one weight after another (Python >= 3.12's ``sum`` of floats
    compensates, so it is not this)."""
    s = 0.0
    for v in np.asarray(values, dtype=np.float64).tolist():
        s += v
    return s


def _adjacency(X, eps):
    return brute_pairs(X, X, eps, self_join=True, include_self=True)


def _exact_core(A, w, m):
    return np.array([_rounded_exact(w[row]) >= m for row in A], dtype=bool)


def _expansion_labels(A, core):
    """scikit-learn's ``dbscan_inner``, literally, on a dense adjacency."""
    n = len(core)
    labels = np.full(n, -1, dtype=np.intp)
    label = 0
    for seed in range(n):
        if labels[seed] != -1 or not core[seed]:
            continue
        stack = []
        i = seed
        while True:
            if labels[i] == -1:
                labels[i] = label
                if core[i]:
                    stack.extend(int(v) for v in np.flatnonzero(A[i]) if labels[v] == -1)
            if not stack:
                break
            i = stack.pop()
        label += 1
    return labels


def _flags(indices, n):
    f = np.zeros(n, dtype=bool)
    f[np.asarray(indices, dtype=np.int64)] = True
    return f


def _csr(A, keep_diagonal=False):
    """CSR table (indptr int64, indices int32) of a boolean adjacency."""
    B = A.copy()
    if not keep_diagonal:
        np.fill_diagonal(B, False)
    G = sparse.csr_matrix(B)
    return G.indptr.astype(np.int64), G.indices.astype(np.int32)


# -- the CPU paths ------------------------------------------------------------

def _cpu_results(X, eps, m, w, A):
    """(name, core flags, labels) of every CPU path that takes weights."""
    n = len(X)
    out = []
    est = skyjoin.DBSCAN(eps=eps, min_samples=m, device="cpu").fit(X, sample_weight=w)
    assert est.path_ == "hybrid-cpu"
    out.append(("DBSCAN", _flags(est.core_sample_indices_, n), est.labels_))
    core, labels = skyjoin.dbscan(X, eps=eps, min_samples=m, sample_weight=w, device="cpu")
    out.append(("dbscan", _flags(core, n), labels))
    core, labels = hybrid_dbscan(X, eps, m, sample_weight=w, device="cpu")
    out.append(("hybrid_dbscan", _flags(core, n), labels))
    indptr, indices = _csr(A)
    is_core, labels = labels_from_table(indptr, indices, m, w)
    out.append(("labels_from_table", is_core.view(bool), labels))
    is_core, labels = labels_from_table(indptr, indices, m, w, symmetric=False)
    out.append(("labels_from_table sequential", is_core.view(bool), labels))
    order = np.arange(n)[::-1].copy()  # table point p is the caller's row order[p]
    indptr_o, indices_o = _csr(A[np.ix_(order, order)])
    is_core, labels = labels_from_table(indptr_o, indices_o, m, w, order=order)
    out.append(("labels_from_table order", is_core.view(bool), labels))
    # a precomputed radius graph: every stored entry (eps / 2) is a neighbour
    r, c = np.nonzero(A)
    G = sparse.csr_matrix((np.full(len(r), eps / 2), (r, c)), shape=(n, n))
    est = skyjoin.DBSCAN(eps=eps, min_samples=m, metric="precomputed").fit(G, sample_weight=w)
    assert est.path_ == "graph"
    out.append(("graph", _flags(est.core_sample_indices_, n), est.labels_))
    # a sweep's table path: the levels compare with the sums of weighted_neighbourhood
    levels = sorted({m, m + 1, 1}, reverse=True)
    for res in skyjoin.dbscan_sweep(X, eps=eps, min_samples=levels, sample_weight=w,
                                    device="cpu", method="hybrid", pipeline=False):
        if res.min_samples == m:
            out.append(("dbscan_sweep hybrid", _flags(res.core_sample_indices, n), res.labels))
    # the default sweep: the grid levels (d <= 4) with their exact re-walk
    for res in skyjoin.dbscan_sweep(X, eps=eps, min_samples=levels, sample_weight=w,
                                    device="cpu", pipeline=False):
        if res.min_samples == m:
            out.append((f"dbscan_sweep {res.timings['path']}",
                        _flags(res.core_sample_indices, n), res.labels))
    return out


def _check_cpu(X, eps, m, w):
    """Every CPU path gives the exact rule's core flags and labels; returns them."""
    A = _adjacency(X, eps)
    core_x = _exact_core(A, w, m)
    labels_x = _expansion_labels(A, core_x)
    for name, core, labels in _cpu_results(X, eps, m, w, A):
        np.testing.assert_array_equal(core, core_x, err_msg=name)
        np.testing.assert_array_equal(labels, labels_x, err_msg=name)
    return A, core_x, labels_x


def _groups(weights, spacing=1e-3):
    """One tight group of points per weight list (all within eps = 1 of each other),
    groups 100 apart; returns X and the weights, concatenated."""
    X, w = [], []
    for g, ws in enumerate(weights):
        X.extend(100.0 * g + spacing * np.arange(len(ws)))
        w.extend(ws)
    return np.asarray(X).reshape(-1, 1), np.asarray(w, dtype=np.float64)


# -- the issue's example and the documented ones --------------------------------

def test_issue_example_every_cpu_path():
    X = np.arange(10.0).reshape(-1, 1) * 0.01
    w = np.full(10, 0.1)
    # ten 0.1 add up to 0.9999999999999999 one by one; exactly they exceed 1
    assert _one_by_one(w) < 1 <= math.fsum(w)
    sk = SkDBSCAN(eps=1, min_samples=1).fit(X, sample_weight=w)
    np.testing.assert_array_equal(sk.labels_, np.zeros(10))
    _, core_x, labels_x = _check_cpu(X, 1.0, 1, w)
    assert core_x.all()
    np.testing.assert_array_equal(labels_x, sk.labels_)


def test_documented_differences_from_sklearn():
    X = np.arange(3.0).reshape(-1, 1) * 0.001
    # 0.7 + 0.2 + 0.1 is exactly 1 - 2**-55, which rounds to 1.0: core here
    w = np.array([0.7, 0.2, 0.1])
    assert sum(map(Fraction, w.tolist())) == 1 - Fraction(1, 2**55)
    assert np.sum(w) == 0.9999999999999999 and np.sum(w[::-1]) == 1.0
    _, core_x, labels_x = _check_cpu(X, 1.0, 1, w)
    np.testing.assert_array_equal(labels_x, [0, 0, 0])
    np.testing.assert_array_equal(SkDBSCAN(eps=1, min_samples=1).fit(X, sample_weight=w).labels_,
                                  [-1, -1, -1])
    np.testing.assert_array_equal(
        SkDBSCAN(eps=1, min_samples=1).fit(X, sample_weight=w[::-1]).labels_, [0, 0, 0])
    # 1 - 2**-53, 2**-54, -2**-55 is exactly 1 - 3 * 2**-55, which rounds below 1: noise here
    w = np.array([1 - 2.0**-53, 2.0**-54, -2.0**-55])
    assert math.fsum(w) == 1 - 2.0**-53 and np.sum(w) == 1.0
    _, core_x, labels_x = _check_cpu(X, 1.0, 1, w)
    np.testing.assert_array_equal(labels_x, [-1, -1, -1])
    np.testing.assert_array_equal(SkDBSCAN(eps=1, min_samples=1).fit(X, sample_weight=w).labels_,
                                  [0, 0, 0])


_AT_THRESHOLD = [
    # (weights of one group, min_samples, core by the exact rule)
    ([0.1] * 10, 1, True),                      # 1 + 2**-54 - ...: rounds to 1
    ([0.1] * 20, 2, True),
    ([0.1] * 12 + [-0.1] * 2, 1, True),
    ([1 / 3] * 3, 1, True),                     # exactly 1 - 2**-54: a tie, to even (1.0)
    ([1 / 3] * 6, 2, True),                     # exactly 2 - 2**-53: a tie, to even (2.0)
    ([2 / 3, 1 / 3], 1, True),
    ([0.5, 0.5 - 2.0**-54], 1, True),           # the tie again, from two weights
    ([0.5, 0.5 - 2.0**-54, -2.0**-80], 1, False),   # just below the tie: 1 - 2**-53
    ([0.5, 0.5 - 2.0**-54, 2.0**-80], 1, True),
    ([1 - 2.0**-53, 2.0**-54, -2.0**-55], 1, False),
    ([0.7, 0.2, 0.1], 1, True),
    ([0.6, 0.3, 0.1, 0.0, 0.0], 1, True),
    ([0.3, 0.2, 0.1, 0.7, 0.7], 2, True),
    ([1e16, 1.0, -1e16], 1, True),              # cancellation: naive 0
    ([1e16, -1e16, 1.0 - 2.0**-53], 1, False),
    ([1e308, 1e308, -1e308, -1e308, 0.5], 1, False),   # partial sums overflow
    ([1e308, -1e308, 1e308], 1, True),
    ([3.0, -1.0, -1.0], 1, True),
    ([3.0, -1.0, -1.0, -2.0**-60], 1, True),    # exactly below 1, rounds onto 1
    ([3.0, -1.0, -1.0, -2.0**-53], 1, False),   # 1 - 2**-53 is a double: below 1
]


# scikit-learn's finiteness check sums the weights first: 1e308 + 1e308 - ... warns
@pytest.mark.filterwarnings("ignore:invalid value encountered in reduce:RuntimeWarning")
@pytest.mark.parametrize("ws,m,expected", _AT_THRESHOLD)
def test_sums_at_the_threshold(ws, m, expected):
    assert (_rounded_exact(ws) >= m) == expected
    # a group at the threshold, a group clearly core, one clearly not
    X, w = _groups([ws, [float(m)] * 2, [0.25]])
    _, core_x, _ = _check_cpu(X, 1.0, m, w)
    k = len(ws)
    assert core_x[:k].tolist() == [expected] * k
    assert core_x[k:k + 2].all() and not core_x[k + 2]


def test_the_threshold_cases_defeat_naive_sums():
    """The cases above sit where one-by-one float64 sums decide otherwise."""
    wrong = sum((_one_by_one(ws) >= m) != expected for ws, m, expected in _AT_THRESHOLD)
    assert wrong >= 6


# -- random data against the exact oracle and scikit-learn ----------------------

def _random_weights(rng, kind, n):
    if kind == "tenths":
        return rng.integers(-2, 8, n) * 0.1
    if kind == "tenths-div":
        return rng.integers(0, 6, n) / 10
    if kind == "uniform":
        w = rng.uniform(-0.2, 1.0, n)
        w[rng.random(n) < 0.1] = 0.0
        return w
    if kind == "thirds":
        return rng.integers(-1, 4, n) / 3
    return rng.choice([0.1, 0.2, 0.3, 0.7, 1 / 3, 2 / 3, -0.1, 0.0, 0.25, 0.6], n)


def _random_case(rng, kind):
    n = int(rng.integers(30, 260))
    d = int(rng.integers(1, 4))
    target = float(rng.uniform(5, 40))               # mean neighbourhood size
    ball = {1: 2.0, 2: math.pi, 3: 4 / 3 * math.pi}[d]
    side = (n * ball / target) ** (1 / d)
    X = rng.uniform(0, side, (n, d))
    return X, _random_weights(rng, kind, n), int(rng.integers(1, 8))


_KINDS = ("tenths", "tenths-div", "uniform", "thirds", "mixed")


@pytest.mark.parametrize("seed", range(8))
def test_random_weights_exact_rule_and_sklearn(seed):
    rng = np.random.default_rng(1400 + seed)
    for trial in range(5):
        kind = _KINDS[(seed + trial) % len(_KINDS)]
        X, w, m = _random_case(rng, kind)
        A, core_x, labels_x = _check_cpu(X, 1.0, m, w)
        # scikit-learn decides by np.sum in its radius query's order: reproduce it
        sk = SkDBSCAN(eps=1.0, min_samples=m).fit(X, sample_weight=w)
        nbrs = NearestNeighbors(radius=1.0).fit(X).radius_neighbors(X, return_distance=False)
        npsum = np.array([np.sum(w[nb]) for nb in nbrs])
        sk_core = _flags(sk.core_sample_indices_, len(X))
        np.testing.assert_array_equal(sk_core, npsum >= m)
        # it differs from the exact rule only where its own sum, within its rounding
        # error bound, lands on the other side of min_samples
        differ = sk_core != core_x
        k = np.array([len(nb) for nb in nbrs])
        a = np.array([np.abs(w[nb]).sum() for nb in nbrs])
        assert np.all(np.abs(npsum - m)[differ] <= (2 * U * k * a + np.spacing(float(m)))[differ])
        if not differ.any():
            np.testing.assert_array_equal(sk.labels_, labels_x)


def test_many_points_at_the_threshold():
    """The issue's 400 points: every neighbourhood weight a multiple of 0.1 near an integer."""
    rng = np.random.default_rng(14)
    X = rng.uniform(0, 20, (400, 1))
    w = np.full(400, 0.1)
    eps = 0.3
    A = _adjacency(X, eps)
    sizes = A.sum(axis=1)
    one_by_one = np.array([_one_by_one(w[row]) for row in A])
    failed_before = 0
    for m in (1, 2):
        _, core_x, _ = _check_cpu(X, eps, m, w)
        np.testing.assert_array_equal(core_x, sizes >= 10 * m)  # exact 0.1 * k >= m iff k >= 10m
        failed_before += ((one_by_one >= m) != core_x).sum()
    assert failed_before > 10   # where sums of one weight after another decided otherwise


# -- the parts ----------------------------------------------------------------

def test_exact_row_sums_equal_fsum():
    rng = np.random.default_rng(5)
    specials = np.array([1e308, -1e308, 1e16, -1e16, 1.0, -1.0, 0.1, -0.1, 2.0**-1074,
                         -(2.0**-1074), 1e-300, 0.0, -0.0, 2.0**-53, 3.0, 2.0**52, 1 / 3])
    rows = []
    for t in range(2000):
        n = int(rng.integers(0, 30))
        kind = t % 4
        if kind == 0:   # every magnitude
            x = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
        elif kind == 1:  # huge cancellation, tiny values
            x = rng.choice(specials, n)
        elif kind == 2:
            x = rng.integers(-10, 10, n) * 0.1
        else:
            x = rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-60, 60, n)
        rows.append(x)
    rows += [np.array(r) for r in ([1e16, 1.0, -1e16], [1e308, -1e308, 1e-300], [0.1] * 10,
                                   [2.0**-1074] * 5, [1e308, -1e308, 2.0**-1074, 1.0],
                                   [1 / 3] * 3, [], [0.0], [-0.0])]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    got = exact_row_sums(indptr, np.concatenate(rows))
    checked = 0
    for r, g in zip(rows, got):
        try:
            ref = math.fsum(r)
        except OverflowError:   # intermediate overflow: the rational oracle decides
            ref = _rounded_exact(r)
        assert g == ref, (r, g, ref)
        assert g == _rounded_exact(r)
        checked += 1
    assert checked == len(rows)


def test_exact_row_sums_beyond_fsum():
    """Partial sums that overflow float64: fsum raises, the exact sum is still finite."""
    big = np.finfo(np.float64).max          # its ulp is 2**971
    rows = [[1e308, 1e308, -1e308], [1e308, 1e308, -1e308, -1e308, 0.5], [1e308, 1e308],
            [-1e308, -1e308], [big, 2.0**960], [big, 2.0**970], [-big, -(2.0**969), -(2.0**969)]]
    with pytest.raises(OverflowError):
        math.fsum(rows[0])
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    got = exact_row_sums(indptr, np.concatenate(rows))
    # below half an ulp past max: max; a tie there goes to the even 2**1024: inf
    assert got.tolist() == [1e308, 0.5, math.inf, -math.inf, big, math.inf, -math.inf]
    assert got.tolist() == [_rounded_exact(r) for r in rows]


def test_naive_sum_decides_is_sound():
    """Wherever the test decides, the naive sum (in any order) sides with the exact one."""
    rng = np.random.default_rng(8)
    decided = 0
    for t in range(3000):
        k = int(rng.integers(1, 25))
        if t % 3 == 0:
            x = rng.integers(-3, 10, k) * 0.1
        elif t % 3 == 1:
            x = rng.choice([0.1, 0.2, 0.3, 0.7, 1 / 3, 2 / 3, 1 - 2.0**-53, 2.0**-54], k)
        else:
            x = rng.uniform(-1, 2, k)
        exact = _rounded_exact(x)
        for order in (x, x[::-1], rng.permutation(x)):
            s = _one_by_one(order)
            a = 0.0
            for v in order.tolist():
                a += abs(v)
            for m in {math.floor(exact), math.floor(exact) + 1, 1.0, 2.0}:
                if naive_sum_decides(s, a, k, m):
                    decided += 1
                    assert (s >= m) == (exact >= m), (x, s, m)
    assert decided > 10000
    # never decided on the threshold, nor from a NaN or infinite sum
    assert not naive_sum_decides(1.0, 1.0, 10, 1.0)
    assert not naive_sum_decides(math.nan, math.inf, 3, 1.0)
    assert not naive_sum_decides(math.inf, math.inf, 3, 1.0)
    assert not naive_sum_decides(1.0 - 2.0**-53, 1.0, 1, 1.0)   # one ulp below m
    assert naive_sum_decides(0.5, 0.5, 1, 1.0)
    # the same rule elementwise on arrays (the GPU path applies it to CuPy arrays)
    s = np.array([1.0, 0.5, 1.0 - 1e-15, 1.0 + 1e-9, np.nan])
    a = np.array([1.0, 0.5, 5.0, 5.0, np.inf])
    k = np.array([10, 1, 30, 30, 3])
    got = naive_sum_decides(s, a, k, 1.0)
    assert got.tolist() == [bool(naive_sum_decides(float(s[i]), float(a[i]), int(k[i]), 1.0))
                            for i in range(5)]
    assert got.tolist() == [False, True, False, True, False]


def test_weighted_neighbourhood_compares_with_every_integer():
    """What a min_samples sweep reads: its values side with the exact sums at every level."""
    rng = np.random.default_rng(9)
    for kind in _KINDS:
        X, w, _ = _random_case(rng, kind)
        A = _adjacency(X, 1.0)
        indptr, indices = _csr(A)
        v = weighted_neighbourhood(indptr, indices, w, True)
        exact = np.array([_rounded_exact(w[row]) for row in A])
        for m in range(-3, 15):
            np.testing.assert_array_equal(v >= m, exact >= m, err_msg=f"{kind} {m}")
        indptr_s, indices_s = _csr(A, keep_diagonal=True)
        v = weighted_neighbourhood(indptr_s, indices_s, w, False)
        for m in range(-3, 15):
            np.testing.assert_array_equal(v >= m, exact >= m, err_msg=f"{kind} {m} self")


def test_integer_weights_shortcut():
    assert integer_weights(np.array([0.0, 3.0, -2.0, 1e6]))
    assert not integer_weights(np.array([0.0, 3.0, 0.5]))
    assert not integer_weights(np.array([2.0**52, 2.0**52]))     # sums may round
    assert integer_weights(np.zeros(0))
    # integer weights: the naive sums are exact and decide, also right at min_samples
    X, w = _groups([[1.0, 1.0, -1.0, 2.0], [2.0, 1.0], [4.0, -1.0]])
    A = _adjacency(X, 1.0)
    indptr, indices = _csr(A)
    assert core_points(indptr, indices, 3, w).view(bool).tolist() == [True] * 8
    assert core_points(indptr, indices, 4, w).view(bool).tolist() == [False] * 8


def test_sample_weight_validation_still_refuses_bad_weights():
    X = np.zeros((3, 1))
    with pytest.raises(ValueError):
        skyjoin.DBSCAN(device="cpu").fit(X, sample_weight=[0.1, np.nan, 0.2])
    with pytest.raises(ValueError):
        skyjoin.DBSCAN(device="cpu").fit(X, sample_weight=[0.1, np.inf, 0.2])


def test_sweep_grid_path_follows_the_rule():
    X = np.arange(10.0).reshape(-1, 1) * 0.01
    w = np.full(10, 0.1)
    (res,) = skyjoin.dbscan_sweep(X, eps=1.0, min_samples=1, sample_weight=w, device="cpu")
    assert res.timings["path"] == "grid-cpu"
    np.testing.assert_array_equal(res.labels, np.zeros(10))


# -- the GPU path ---------------------------------------------------------------

def _warp_sums(indptr, indices, w):
    """The naive sums and sums of |w| in the order of the GPU kernel ``weighted_sums``:
    32 lanes each add every 32nd neighbour, a shuffle tree adds the lanes, then the
    point's own weight."""
    n = len(indptr) - 1
    sums, abs_sums = np.empty(n), np.empty(n)
    with np.errstate(over="ignore", invalid="ignore"):   # rows of 1e308 overflow
        for r in range(n):
            vals = w[indices[indptr[r]:indptr[r + 1]]]
            s, a = np.zeros(32), np.zeros(32)
            for lane in range(32):
                for x in vals[lane::32].tolist():
                    s[lane] += x
                    a[lane] += abs(x)
            off = 16
            while off:
                s[:off] += s[off:2 * off].copy()
                a[:off] += a[off:2 * off].copy()
                off //= 2
            sums[r] = s[0] + w[r]
            abs_sums[r] = a[0] + abs(w[r])
    return sums, abs_sums


def test_gpu_core_rule_on_warp_order_sums_emulated():
    """The GPU path's host side (``gpu._weighted_core``: the rule on the warp sums, the
    open rows gathered and summed exactly), with NumPy in CuPy's place."""
    from skyjoin.cluster.table_gpu import _weighted_core

    fake = FakeCupy()
    rng = np.random.default_rng(11)
    cases = [_groups([[0.1] * 10, [0.7, 0.2, 0.1], [1 / 3] * 3, [1e308, 1e308, -1e308, -1e308, 0.5],
                      [1 - 2.0**-53, 2.0**-54, -2.0**-55], [0.1] * 40])]
    cases += [_random_case(rng, kind)[:2] for kind in _KINDS]
    opened = 0
    for X, w in cases:
        A = _adjacency(X, 1.0)
        indptr, indices = _csr(A)
        sums, abs_sums = _warp_sums(indptr, indices, w)
        for m in (1, 2, 3, 4):
            got = _weighted_core(fake, indptr, indices, w, sums, abs_sums, m)
            assert got.dtype == np.uint8
            np.testing.assert_array_equal(got.view(bool), _exact_core(A, w, m), err_msg=str(m))
            opened += int((~naive_sum_decides(sums, abs_sums, np.diff(indptr) + 1, m)).sum())
    assert opened > 20   # the exact step did run


@pytest.mark.gpu
def test_gpu_weighted_paths_follow_the_rule(cp):
    from skyjoin.cluster.table_gpu import gpu_dbscan_table

    rng = np.random.default_rng(12)
    cases = [(np.arange(10.0).reshape(-1, 1) * 0.01, np.full(10, 0.1), 1)]
    for ws, m, _ in _AT_THRESHOLD:
        X, w = _groups([ws, [float(m)] * 2, [0.25], [0.1] * 40])
        cases.append((X, w, m))
    cases += [_random_case(rng, _KINDS[t % len(_KINDS)]) for t in range(15)]
    cases.append((rng.uniform(0, 3, (600, 2)), rng.integers(-1, 4, 600).astype(float), 5))
    for X, w, m in cases:
        n = len(X)
        A = _adjacency(X, 1.0)
        core_x = _exact_core(A, w, m)
        labels_x = _expansion_labels(A, core_x)
        indptr, indices = _csr(A)
        is_core, labels = gpu_dbscan_table(cp.asarray(indptr), cp.asarray(indices), m,
                                           sample_weight=w)
        np.testing.assert_array_equal(is_core.get().view(bool), core_x)
        np.testing.assert_array_equal(labels.get(), labels_x)
        is_core, labels = gpu_dbscan_table(cp.asarray(indptr), cp.asarray(indices), m,
                                           sample_weight=cp.asarray(w))
        np.testing.assert_array_equal(is_core.get().view(bool), core_x)
        est = skyjoin.DBSCAN(eps=1.0, min_samples=m, device="gpu").fit(X, sample_weight=w)
        assert est.path_ == "gpu"
        np.testing.assert_array_equal(_flags(est.core_sample_indices_, n), core_x)
        np.testing.assert_array_equal(est.labels_, labels_x)
        core, labels = hybrid_dbscan(X, 1.0, m, sample_weight=w, device="gpu")
        np.testing.assert_array_equal(_flags(core, n), core_x)
        np.testing.assert_array_equal(labels, labels_x)
        # the sweep's device table, assigned on the GPU in cell order
        (res,) = skyjoin.dbscan_sweep(X, eps=1.0, min_samples=m, sample_weight=w,
                                      device="gpu", pipeline=False)
        np.testing.assert_array_equal(_flags(res.core_sample_indices, n), core_x)
        np.testing.assert_array_equal(res.labels, labels_x)


def test_weighted_grid_sweep_is_exact_on_every_repeat():
    """The weighted grid sweep runs parallel regions beside a helper thread:
    a race shows as a run that differs now and then.  Every case of the
    random test, three times each, must give the exact rule's core flags."""
    for seed in range(8):
        rng = np.random.default_rng(1400 + seed)
        for trial in range(5):
            X, w, m = _random_case(rng, _KINDS[(seed + trial) % len(_KINDS)])
            core_x = _exact_core(_adjacency(X, 1.0), w, m)
            levels = sorted({m, m + 1, 1}, reverse=True)
            for _ in range(3):
                for res in skyjoin.dbscan_sweep(X, eps=1.0, min_samples=levels, sample_weight=w,
                                                device="cpu", pipeline=False):
                    if res.min_samples == m:
                        np.testing.assert_array_equal(_flags(res.core_sample_indices, len(X)),
                                                      core_x, err_msg=f"{seed} {trial}")
