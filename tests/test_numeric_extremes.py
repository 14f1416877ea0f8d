"""The join and DBSCAN at numeric extremes (skyjoin._core.conditioning).

Oracles: the Euclidean test in exact rational arithmetic (``fractions``),
scikit-learn's DBSCAN, and float64 brute force where it does not overflow.
"""

import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj
from skyjoin._core.conditioning import condition_points, plan_conditioning, power_of_two_factors
from skyjoin._core.memory import alloc_host

from oracles import brute_pairs, table_matrix

PATTERNS = ["full", "unicomp", "lid_unicomp"]


def exact_matrix(R, S, eps):
    """(pairs, ambiguous): dist <= eps in exact arithmetic, and the pairs
    within a relative 1e-9 of eps, where a rounded test may decide either way."""
    Rf = [[Fraction(float(v)) for v in row] for row in np.asarray(R)]
    Sf = [[Fraction(float(v)) for v in row] for row in np.asarray(S)]
    e2 = Fraction(float(eps)) ** 2
    lo, hi = e2 * Fraction(1 - 10**-9), e2 * Fraction(1 + 10**-9)
    m = np.zeros((len(Rf), len(Sf)), dtype=bool)
    amb = np.zeros_like(m)
    for i, r in enumerate(Rf):
        for j, s in enumerate(Sf):
            d2 = sum((a - b) ** 2 for a, b in zip(r, s))
            m[i, j] = d2 <= e2
            amb[i, j] = lo <= d2 <= hi
    return m, amb


def assert_matches_exact(got, R, S, eps, self_join):
    want, amb = exact_matrix(R, S, eps)
    if self_join:
        np.fill_diagonal(want, False)
    assert np.array_equal(got[~amb], want[~amb])


def extreme_cases():
    rng = np.random.default_rng(7)
    cases = []
    for scale in (1e-200, 1e-170, 1e-160, 1e150, 1e160, 1e200, 1e300):
        X = rng.uniform(0, 1, (70, 2)) * scale
        cases.append((f"uniform*{scale:g}", X, 0.2 * scale))
    X = np.array([[1e308, 0.0], [-1e308, 0.0], [1e308, 0.0], [1.7e308, 1.0], [-1.7e308, -5.0]])
    cases.append(("+-1e308", X, 1.0))
    cases.append(("+-1e308 eps 3e308", X, 1.5e308))
    cases.append(("zeros eps 1e155", np.zeros((3, 2)), 1e155))
    cases.append(("spread eps 1e200", rng.uniform(-1, 1, (40, 3)) * 1e200, 5e199))
    for unit in (5e-324, 1e-310):                        # subnormal eps: scaled by up to 2**1074
        K = rng.integers(0, 9, (50, 2))
        cases.append((f"lattice*{unit:g}", K * unit, 2.5 * unit))
    return cases


CASES = extreme_cases()


@pytest.mark.parametrize("name,X,eps", CASES, ids=[c[0] for c in CASES])
def test_self_join_extremes_every_pattern(name, X, eps):
    tables = []
    for pattern in PATTERNS:
        nt = sj.self_join(X, eps, pattern=pattern, device="cpu")
        tables.append(table_matrix(nt) if nt.n_pairs else np.zeros((len(X),) * 2, bool))
        assert_matches_exact(tables[-1], X, X, eps, self_join=True)
    assert all(np.array_equal(t, tables[0]) for t in tables)
    counts = sj.self_join(X, eps, output="counts", device="cpu")
    assert np.array_equal(counts, tables[0].sum(axis=1))
    nt = sj.self_join(X, eps, device="cpu", include_self=True)
    assert np.array_equal(table_matrix(nt), tables[0] | np.eye(len(X), dtype=bool))
    chunks = list(sj.self_join_chunks(X, eps, max_pairs=7, device="cpu"))
    got = np.zeros_like(tables[0])
    for c in chunks:
        got[c.i, c.j] = True
    assert np.array_equal(got, tables[0])


@pytest.mark.parametrize("name,X,eps", CASES, ids=[c[0] for c in CASES])
def test_r_join_s_extremes(name, X, eps):
    R = X[::2]
    nt = sj.join(R, X, eps, device="cpu")
    m = table_matrix(nt) if nt.n_pairs else np.zeros((len(R), len(X)), bool)
    assert_matches_exact(m, R, X, eps, self_join=False)
    assert all(m[i, 2 * i] for i in range(len(R)))          # (i, i) is never lost
    assert np.array_equal(sj.join(R, X, eps, output="counts", device="cpu"), m.sum(axis=1))


def test_issue_examples():
    assert sj.self_join(np.zeros((2, 2)), 1e155, device="cpu").n_pairs == 2
    assert sj.join(np.zeros((2, 2)), np.zeros((2, 2)), 1e155, device="cpu").n_pairs == 4
    X = np.random.default_rng(12345).uniform(0, 1, (200, 2)) * 1e-200
    n = {p: sj.self_join(X, 1e-200, pattern=p, device="cpu").n_pairs for p in PATTERNS}
    assert len(set(n.values())) == 1
    want, amb = exact_matrix(X, X, 1e-200)
    assert not amb.any()
    assert n["full"] == want.sum() - len(X)
    X = np.array([[1e308, 0.0], [-1e308, 0.0], [1e308, 0.0]])
    assert sj.self_join(X, 1.0, output="counts", device="cpu").tolist() == [1, 0, 1]
    assert sj.join(X, X, 1.0, device="cpu").pairs().tolist() == [
        [0, 0], [0, 2], [1, 1], [2, 0], [2, 2]]


#: the spacing of the points, eps = 5 units: subnormal (down to the smallest
#: float, 2**-1074), the smallest normal and a normal power of two below 2**-400
TINY_UNITS = [5e-324, 1e-320, 1e-310, 2.0 ** -1040, 2.2250738585072014e-308, 2.0 ** -1000]


def tiny_lattice(unit, seed=0, span=12):
    """(X, eps, K): points K * unit on an integer lattice K in [0, span)**2,
    eps = 5 units, with 3-4-5 ties.  K * unit is exact (checked)."""
    rng = np.random.default_rng(seed)
    K = np.vstack([[[0, 0], [3, 4], [0, 5], [5, 0], [4, 3], [4, 3]],
                   rng.integers(0, span, (60, 2))]).astype(np.float64)
    X = K * unit
    assert all(Fraction(x) == Fraction(k) * Fraction(unit) for x, k in zip(X.ravel(), K.ravel()))
    return X, 5 * unit, K


def scaled_brute(R, S, eps, self_join=False):
    """The oracle of the README's rule: the float64 test on the points and eps
    multiplied by 2**1074, which no value here under- or overflows (so any
    such power of two gives the same answer)."""
    return brute_pairs(np.ldexp(R, 1074), np.ldexp(S, 1074), math.ldexp(eps, 1074),
                       self_join=self_join)


def test_issue_subnormal_eps_examples():
    """Every positive float is an eps: the scaling of 2**1074 that brings
    5e-324 to 1 is applied in exact steps (2**1074 is no float64)."""
    assert sj.self_join(np.zeros((2, 1)), 1e-310, device="cpu").n_pairs == 2
    assert sj.self_join(np.zeros((2, 1)), 5e-324, device="cpu").n_pairs == 2
    assert sj.join(np.zeros((2, 1)), np.zeros((3, 1)), 5e-324, device="cpu").n_pairs == 6
    assert sj.DBSCAN(eps=1e-310, min_samples=2, device="cpu").fit(
        np.zeros((2, 1))).labels_.tolist() == [0, 0]
    (res,) = sj.dbscan_sweep(np.zeros((2, 1)), eps=[5e-324], min_samples=[2], device="cpu")
    assert res.labels.tolist() == [0, 0]
    plan = plan_conditioning([np.zeros((2, 1))], 5e-324)
    assert plan.exp == 1074 and plan.eps(5e-324) == 1.0
    (Y,), e = condition_points([np.array([[5e-324], [1e-310]])], 5e-324)
    assert e == 1.0 and Y.ravel().tolist() == [1.0, float(Fraction(1e-310) * 2 ** 1074)]


def test_power_of_two_factors_round_once():
    """The factors multiply as ``numpy.ldexp`` does (one rounding), where
    2**exp itself is no float64 too."""
    x = np.array([5e-324, 3 * 5e-324, 1e-310, 2.0 ** -1022, 1e-300, 0.75, 3.0, -1e-320])
    for exp in (0, 1, 52, 1023, 1024, 1074, 1100, -1, -52, -1023):
        with np.errstate(over="ignore"):
            want = np.ldexp(x, exp)
        got = x.copy()
        with np.errstate(over="ignore"):
            for f in power_of_two_factors(exp):
                got *= f
        finite = np.isfinite(want)
        assert finite.any() and np.array_equal(got[finite], want[finite]), exp
    assert power_of_two_factors(0) == [] and len(power_of_two_factors(1074)) == 2


@pytest.mark.parametrize("unit", TINY_UNITS, ids=[f"{u:g}" for u in TINY_UNITS])
def test_tiny_eps_joins_match_scaled_brute_force(unit):
    X, eps, K = tiny_lattice(unit)
    want = scaled_brute(X, X, eps, self_join=True)
    if unit != 1e-310:
        # the unit's multiples square exactly: the integer problem, ties included
        assert np.array_equal(want, brute_pairs(K, K, 5.0, self_join=True))
        assert want[0, 1] and want[0, 2]
    for pattern in PATTERNS:
        nt = sj.self_join(X, eps, pattern=pattern, device="cpu")
        assert np.array_equal(table_matrix(nt), want), pattern
    assert np.array_equal(sj.self_join(X, eps, output="counts", device="cpu"), want.sum(axis=1))
    assert np.array_equal(table_matrix(sj.self_join(X, eps, include_self=True, device="cpu")),
                          want | np.eye(len(X), dtype=bool))
    got = np.zeros_like(want)
    for c in sj.self_join_chunks(X, eps, max_pairs=50, device="cpu"):
        got[c.i, c.j] = True
    assert np.array_equal(got, want)
    m = table_matrix(sj.join(X[::3], X, eps, device="cpu"))
    assert np.array_equal(m, scaled_brute(X[::3], X, eps))
    if unit != 1e-310:        # the lattice is exact in float32 too
        nt = sj.self_join(X, eps, precision="float32", device="cpu")
        assert np.array_equal(table_matrix(nt), want)


@pytest.mark.parametrize("min_samples", [2, 4])
@pytest.mark.parametrize("unit", TINY_UNITS, ids=[f"{u:g}" for u in TINY_UNITS])
def test_tiny_eps_dbscan_matches_sklearn(unit, min_samples):
    """scikit-learn on X itself is no oracle (5e-324**2 is 0: its squared
    distances underflow).  It clusters the neighbourhoods of the scaled
    float64 test instead (metric="precomputed"); and where the unit is a
    power of two, scikit-learn's brute force on K and eps 5 (integers, exact)
    gives the same labels."""
    X, eps, K = tiny_lattice(unit, seed=1, span=40)
    adj = scaled_brute(X, X, eps)
    want = SkDBSCAN(eps=0.5, min_samples=min_samples, metric="precomputed").fit(
        np.where(adj, 0.0, 1.0)).labels_
    assert len(set(want)) > 2                            # clusters and noise: not vacuous
    if math.frexp(unit)[0] == 0.5:
        assert np.array_equal(
            SkDBSCAN(eps=5.0, min_samples=min_samples, algorithm="brute").fit(K).labels_, want)
    est = sj.DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(X)
    assert np.array_equal(est.labels_, want), est.path_
    lw = sj.DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(
        X, sample_weight=np.ones(len(X))).labels_
    assert np.array_equal(lw, want)
    for method in ("auto", "hybrid"):
        (res,) = sj.dbscan_sweep(X, eps=[eps], min_samples=[min_samples], device="cpu",
                                 method=method)
        assert np.array_equal(res.labels, want), method


def test_float32_extremes():
    rng = np.random.default_rng(3)
    for scale in (1e-25, 1e25, 1e35):
        X = rng.uniform(0, 1, (60, 2)) * scale
        eps = 0.3 * scale
        m = table_matrix(sj.self_join(X, eps, device="cpu", precision="float32"))
        want, _ = exact_matrix(X, X, eps)
        np.fill_diagonal(want, False)
        # float32's own rounding: pairs within its bound of eps may differ
        d = np.sqrt((((X[:, None, :] / scale) - (X[None, :, :] / scale)) ** 2).sum(-1)) * scale
        bound = 2.0 ** -24 * (3 * math.sqrt(2) * np.abs(X).max() + 10 * eps)
        assert not (m != want)[np.abs(d - eps) > bound].any()
    assert sj.self_join(np.zeros((2, 2)), 1e20, device="cpu", precision="float32").n_pairs == 2


def test_float32_rule_relative_to_magnitude():
    """The documented float32 rule: a pair differs from float64 only within
    2**-24 (3 sqrt(d) M + (d + 8) eps) of eps, M the largest magnitude."""
    rng = np.random.default_rng(11)
    for offset, eps, d in ((1e6, 0.01, 2), (0.0, 0.05, 3), (-3e3, 0.2, 2), (1e3, 0.02, 4)):
        X = offset + rng.uniform(0, 1, (1500, d))
        a = table_matrix(sj.self_join(X, eps, device="cpu"))
        b = table_matrix(sj.self_join(X, eps, device="cpu", precision="float32"))
        dist = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
        bound = 2.0 ** -24 * (3 * math.sqrt(d) * np.abs(X).max() + (d + 8) * eps)
        diff = a != b
        assert not diff[np.abs(dist - eps) > bound].any()
        if offset == 1e6:
            assert diff.any()      # the rule is not vacuous here: float32 does differ


def test_conditioning_rule():
    X = np.random.default_rng(0).uniform(0, 100, (50, 2))
    assert plan_conditioning([X], 0.5).identity
    (Y,), e = condition_points([X], 0.5)
    assert Y is X and e == 0.5
    for eps in (1e-200, 1e200, 2.0 ** -401, 2.0 ** 401):
        plan = plan_conditioning([X], eps)
        assert not plan.identity and 1 <= plan.eps(eps) < 2
        (Y,), e = condition_points([X], eps)
        assert plan_conditioning([Y], e).identity                 # idempotent
        assert np.array_equal(Y, X * 2.0 ** plan.exp)              # exact
    big = np.array([[1e308], [-1e308]])
    plan = plan_conditioning([big], 1.0)
    assert plan.exp < 0 and np.isfinite(big * 2.0 ** plan.exp).all()
    with pytest.raises(ValueError, match="too small next to coordinates"):
        plan_conditioning([big], 1e-200)
    with pytest.raises(ValueError, match="precision='float64'"):
        plan_conditioning([np.array([[1e30]])], 1e-30, "float32")
    assert plan_conditioning([X], 1e25, "float32").exp < 0


def test_tiny_eps_on_huge_coordinates_is_refused():
    with pytest.raises(ValueError, match="too small"):
        sj.self_join(np.array([[1e300, 0.0], [0.0, 0.0]]), 1e-300, device="cpu")


@pytest.mark.parametrize("min_samples", [1, 2, 3])
def test_dbscan_extremes_match_sklearn(min_samples):
    """scikit-learn on the same points at an ordinary scale is the oracle (its
    own squared distances under- or overflow at the extreme one)."""
    rng = np.random.default_rng(5)
    X = np.array([[1e308, 0.0], [-1e308, 0.0], [1e308, 0.0]])
    cases = [(X, 1.0, X, 1.0)]
    for scale in (1e-200, 1e200):
        Z = rng.normal(0, 1, (120, 2))
        cases.append((Z * scale, 0.3 * scale, Z, 0.3))
    for X, eps, Xo, eps_o in cases:
        want = SkDBSCAN(eps=eps_o, min_samples=min_samples).fit(Xo).labels_
        est = sj.DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(X)
        assert np.array_equal(est.labels_, want), est.path_
        w = np.ones(len(X))                                    # the weighted (hybrid) path
        lw = sj.DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(
            X, sample_weight=w).labels_
        assert np.array_equal(lw, want)
        for method in ("auto", "hybrid"):
            (res,) = sj.dbscan_sweep(X, eps=[eps], min_samples=[min_samples], device="cpu",
                                     method=method)
            assert np.array_equal(res.labels, want)


def test_huge_eps_dbscan_is_one_cluster():
    X = np.random.default_rng(1).uniform(0, 1, (30, 2))
    for eps in (1e155, 1e300):
        est = sj.DBSCAN(eps=eps, min_samples=3, device="cpu").fit(X, sample_weight=np.ones(30))
        assert (est.labels_ == 0).all()
        (res,) = sj.dbscan_sweep(X, eps=[eps], min_samples=[3], device="cpu", method="hybrid")
        assert (res.labels == 0).all()


def test_flags_must_be_bools():
    X = np.zeros((3, 2))
    with pytest.raises(TypeError, match="include_self"):
        sj.self_join(X, 1.0, include_self="yes", device="cpu")
    with pytest.raises(TypeError, match="sort"):
        sj.self_join(X, 1.0, sort=None, device="cpu")
    with pytest.raises(TypeError, match="sort"):
        sj.join(X, X, 1.0, sort="no", device="cpu")
    with pytest.raises(TypeError, match="include_self"):
        list(sj.self_join_chunks(X, 1.0, include_self=1, device="cpu"))
    assert sj.self_join(X, 1.0, include_self=np.bool_(True), device="cpu").n_pairs == 9


def test_host_allocation_failure_is_a_memory_error_with_the_way_out():
    with pytest.raises(MemoryError, match="self_join_chunks") as info:
        alloc_host(2 ** 59, np.int64)          # 2**62 bytes: more than any address space
    assert "4,611,686,018,427,387,904 bytes" in str(info.value)


def test_non_finite_cell_geometry_is_refused_not_indexed():
    from skyjoin.index.grid import cell_sides

    with pytest.raises(ValueError, match="overflows float64"):
        cell_sides(np.array([-1e308]), np.array([1e308]), 1.0, 1)


@pytest.mark.slow
def test_cpu_kernels_in_bounds_under_numba_boundscheck(tmp_path):
    """Every CPU kernel on the extreme inputs, compiled with Numba's bounds
    checks (an out-of-bounds read raises IndexError instead of reading)."""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", SKYJOIN_NUMBA_CACHE="0",
               NUMBA_CACHE_DIR=str(tmp_path))
    check = "from numba.core import config; assert config.BOUNDSCHECK; import extreme_inputs; " \
            "extreme_inputs.run('cpu')"
    res = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True,
                         timeout=1500, cwd=os.path.dirname(__file__))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "in bounds: cpu" in res.stdout


def test_segfault_input_repeated():
    """The input that crashed 2 runs in 8: now the same answer every time."""
    X = np.array([[1e308, 0.0], [-1e308, 0.0]])
    for _ in range(8):
        for p in PATTERNS:
            assert sj.self_join(X, 1.0, pattern=p, device="cpu").n_pairs == 0


@pytest.mark.gpu
@pytest.mark.parametrize("name,X,eps", CASES, ids=[c[0] for c in CASES])
def test_gpu_extremes_equal_cpu(cp, name, X, eps):
    c = sj.self_join(X, eps, device="cpu")
    assert sj.self_join(X, eps, device="gpu") == c
    assert sj.self_join(cp.asarray(X), eps, device="gpu") == c
    assert np.array_equal(sj.self_join(X, eps, device="gpu", output="counts"),
                          sj.self_join(X, eps, device="cpu", output="counts"))
    assert sj.join(X[::2], X, eps, device="gpu") == sj.join(X[::2], X, eps, device="cpu")
    for ms in (1, 2):
        a = sj.DBSCAN(eps=eps, min_samples=ms, device="gpu").fit(X).labels_
        b = sj.DBSCAN(eps=eps, min_samples=ms, device="cpu").fit(X).labels_
        assert np.array_equal(a, b)
        w = np.ones(len(X))
        a = sj.DBSCAN(eps=eps, min_samples=ms, device="gpu").fit(X, sample_weight=w).labels_
        assert np.array_equal(a, b)
        (r,) = sj.dbscan_sweep(X, eps=[eps], min_samples=[ms], device="gpu")
        assert np.array_equal(r.labels, b)


@pytest.mark.gpu
def test_gpu_float32_extremes(cp):
    X = np.random.default_rng(4).uniform(0, 1, (80, 2)) * 1e25
    a = sj.self_join(X, 3e24, device="gpu", precision="float32")
    assert a == sj.self_join(X, 3e24, device="cpu", precision="float32")
    assert sj.self_join(np.zeros((2, 2)), 1e20, device="gpu", precision="float32").n_pairs == 2


def test_brute_oracle_agrees_on_ordinary_data():
    """The exact oracle and the float64 brute force agree away from ties (a
    check on the oracle itself)."""
    X = np.random.default_rng(9).uniform(0, 1, (40, 2))
    want, amb = exact_matrix(X, X, 0.3)
    got = brute_pairs(X, X, 0.3)
    assert np.array_equal(got[~amb], want[~amb])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("n", [7, 700_000])
def test_range_pass_is_the_finiteness_test(bad, n):
    """The join checks finiteness in its range pass (one pass, not two): a bad
    value anywhere is still reported with its row, small or large input."""
    from skyjoin._core.conditioning import largest_magnitude

    rng = np.random.default_rng(n)
    X = rng.uniform(-5, 5, (n, 2))
    assert largest_magnitude([X]) == np.abs(X).max()
    row = int(rng.integers(0, n))
    X[row, 1] = bad
    assert largest_magnitude([X]) == np.inf
    kind = "NaN" if np.isnan(bad) else "inf"
    with pytest.raises(ValueError, match=f"X contains {kind} values \\(first at row {row}\\)"):
        sj.self_join(X, 0.5, device="cpu", output="counts")
    with pytest.raises(ValueError, match=f"S contains {kind}"):
        sj.join(X[:3] * 0, X, 0.5, device="cpu")
    if n < 1000:                      # HYBRID-DBSCAN makes the same single pass
        from skyjoin.cluster.hybrid import hybrid_dbscan

        with pytest.raises(ValueError, match=f"X contains {kind} values \\(first at row {row}\\)"):
            hybrid_dbscan(X, 0.5, 2)
