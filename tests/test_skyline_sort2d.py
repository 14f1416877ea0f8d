"""The 2-D skyline by sort and scan ("sort2d") against the brute-force oracles.

The oracles are test_skyline's float64 brute force (here by blocks of
rows, checked against it on small inputs) and test_skyline_inputs' brute
force over exact Python values, both written independently of the library;
SkyAlign (asked for by name) must give the same index set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.pareto import sort2d
from skyjoin.pareto.plan import SkylinePlan, plan_skyline
from test_skyline import oracle
from test_skyline_inputs import as_rows, exact_oracle

pd = pytest.importorskip("pandas")


def block_oracle(X, distinct=False, keep=None):
    """test_skyline's oracle by blocks of 256 rows: q is dropped iff some p
    is <= q in both columns and < in one; distinct keeps the lowest index of
    equal rows (of ``keep``, the skyline, where already known).  O(n**2),
    vectorised."""
    X = np.asarray(X, dtype=np.float64)
    if keep is None:
        dominated = np.zeros(len(X), dtype=bool)
        for a in range(0, len(X), 256):
            Q = X[a:a + 256, None, :]
            le = (X[None] <= Q).all(axis=2)
            lt = (X[None] < Q).any(axis=2)
            dominated[a:a + 256] = (le & lt).any(axis=1)
        keep = np.flatnonzero(~dominated)
    if distinct:
        first = {}
        for i in keep:
            first.setdefault(tuple(X[i] + 0.0), i)
        keep = np.array(sorted(first.values()), dtype=np.int64)
    return keep


def check_both_ways(X, name):
    """sort2d through the API equals the oracle and SkyAlign, with and
    without distinct (the oracle's skyline computed once)."""
    want = block_oracle(X)
    for distinct in (False, True):
        got, sky = both(X, distinct=distinct)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, block_oracle(X, distinct, want),
                                      err_msg=f"{name} distinct={distinct}")
        np.testing.assert_array_equal(got, sky, err_msg=f"{name} distinct={distinct}")


def test_block_oracle_is_the_oracle():
    rng = np.random.default_rng(9)
    for X in (rng.random((300, 2)), rng.integers(-1, 2, (300, 2)) * np.float64(-0.0 + 1),
              np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, 0.0]])):
        for distinct in (False, True):
            np.testing.assert_array_equal(block_oracle(X, distinct), oracle(X, distinct=distinct))


def both(X, **kw):
    """(sort2d's answer through the public API, SkyAlign's), after checking
    that "auto" picked sort2d."""
    got, st = sj.skyline(X, device="cpu", return_stats=True, **kw)
    assert st["algorithm"] == "sort2d"
    return got, sj.skyline(X, device="cpu", algorithm="skyalign", **kw)


def random_2d(rng):
    """Seeded 2-D inputs of every shape of trouble: uniform, anticorrelated,
    small integer grids (many ties and copies), signed zeros, a line where
    every point is on the skyline, constant columns."""
    out = []
    for n in (1, 2, 3, 7, 50, 400, 3000):
        out.append((f"unif-{n}", rng.random((n, 2))))
        a = rng.random((n, 1))
        out.append((f"anti-{n}", np.hstack([a, 1.0 - a]) + 0.05 * rng.random((n, 2))))
        for k in (2, 3, 5, 20):
            out.append((f"grid{k}-{n}", rng.integers(0, k, (n, 2)).astype(np.float64)))
        z = rng.integers(-1, 2, (n, 2)).astype(np.float64)
        z[rng.random((n, 2)) < 0.5] *= -1.0            # -0.0 beside +0.0
        out.append((f"zeros-{n}", z))
        out.append((f"line-{n}", np.column_stack([np.arange(n), -np.arange(n)]).astype(float)))
        out.append((f"const-x-{n}", np.column_stack([np.full(n, 2.0), rng.integers(0, 4, n)])))
        out.append((f"const-y-{n}", np.column_stack([rng.integers(0, 4, n), np.full(n, 2.0)])))
    return out


@pytest.mark.parametrize("seed", range(2))
def test_equals_oracle_and_skyalign(seed):
    rng = np.random.default_rng(seed)
    for name, X in random_2d(rng):
        check_both_ways(X, name)


def test_shuffled_copies_keep_every_copy_or_the_lowest_index():
    rng = np.random.default_rng(4)
    base = rng.integers(0, 6, (300, 2)).astype(np.float64)
    X = np.vstack([base, base[:150], base[:40], np.repeat(base[:3], 200, axis=0)])
    check_both_ways(X[rng.permutation(len(X))], "copies")


@pytest.mark.parametrize("kind", ["anticorrelated", "independent", "correlated", "pareto"])
def test_larger_inputs(kind):
    """6k points of each kind, also on a coarse grid (many ties)."""
    from skyjoin.datasets import skyline_data

    X = skyline_data(6_000, 2, kind, seed=3)
    check_both_ways(X, kind)
    check_both_ways(np.round(X * 60) / 60, f"{kind} on a grid")


@pytest.mark.parametrize("block", [None, 1000])
def test_staircase_exact_where_it_prunes_and_where_it_cannot(block, monkeypatch):
    """Anticorrelated points (tau keeps most, the staircase prunes), on a
    grid too, and a line (every point on the skyline: nothing may be
    pruned); in one block and in blocks of 1000 rows."""
    from skyjoin.datasets import skyline_data

    if block is not None:
        monkeypatch.setattr(sort2d, "BLOCK", block)
    A = skyline_data(10_000, 2, "anticorrelated", seed=5)
    line = np.column_stack([np.arange(5000), -np.arange(5000)]).astype(float)
    for name, X in (("anti", A), ("anti on a grid", np.round(A * 40) / 40)):
        _, st = sj.skyline(X, device="cpu", return_stats=True)
        assert st["prefilter_survivors"] < st["tau_survivors"] // 4, name
        check_both_ways(X, name)
    for name, X in (("line", line), ("line, copies", np.vstack([line, line[::7]]))):
        _, st = sj.skyline(X, device="cpu", return_stats=True)
        assert st["prefilter_survivors"] == st["tau_survivors"] == len(X), name
        check_both_ways(X, name)


def test_staircase_prunes_and_stats():
    """Anticorrelated points: the tau pre-filter keeps most rows, the
    staircase few; the counters say so and claim no pairwise tests."""
    from skyjoin.datasets import skyline_data

    X = skyline_data(50_000, 2, "anticorrelated", seed=1)
    got, st = sj.skyline(X, device="cpu", return_stats=True)
    np.testing.assert_array_equal(got, sj.skyline(X, device="cpu", algorithm="skyalign"))
    assert st["algorithm"] == "sort2d" and st["device"] == "cpu" and st["d"] == 2
    assert got.size <= st["prefilter_survivors"] < st["tau_survivors"] // 4
    assert st["dominance_tests"] is None and st["mask_tests"] is None
    assert st["skyline_size"] == got.size and st["distinct"] is False
    assert {"prefilter", "sort", "total", "host_total"} <= set(st["times"])


def test_staircase_skipped_where_bins_cannot_be_made():
    """An x range that overflows float64 (and one x value) leaves the
    pre-filter out; the answer stays exact."""
    rng = np.random.default_rng(6)
    n = 5000
    a = rng.random(n)
    wide = np.column_stack([np.where(a < 0.5, -1e308, 1e308) * (0.9 + 0.1 * a), 1.0 - a])
    one_x = np.column_stack([np.zeros(n), rng.integers(0, 3, n)]).astype(float)
    for X in (wide, one_x):
        got, sky = both(X)
        np.testing.assert_array_equal(got, sky)
        np.testing.assert_array_equal(got, block_oracle(X))
        _, st = sj.skyline(X, device="cpu", return_stats=True)
        assert st["prefilter_survivors"] == st["tau_survivors"]      # tau alone


def test_exact_columns_and_senses():
    """int64 / uint64 beyond 2**53, datetimes, timedeltas, bools, max and
    mixed senses: the same exact representation as SkyAlign's."""
    rng = np.random.default_rng(21)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    cases = [np.array([[1700000000000000001, 5], [1700000000000000000, 5]]),
             np.array([[lo, 0], [lo + 1, -1], [hi, -5], [hi - 1, -5], [0, 0], [lo, 1]])]
    for base in (2**53 + 1, 2**60, -(2**62)):
        cases.append((base + rng.integers(0, 6, (200, 2))).astype(np.int64))
    cases.append(np.uint64(2**64 - 8) + rng.integers(0, 6, (150, 2)).astype(np.uint64))
    when = np.datetime64("2024-03-01T12:00:00", "ns") + rng.integers(0, 5, (200, 2)).astype(
        "timedelta64[ns]")
    cases += [when, when - np.datetime64("2024-01-01", "ns")]
    for X in cases:
        rows = as_rows(X.view(np.int64) if X.dtype.kind in "Mm" else X)
        for sense in (None, ["max", "max"], ["min", "max"], "max"):
            words = [sense] * 2 if isinstance(sense, str) else sense
            for distinct in (False, True):
                got, sky = both(X, sense=sense, distinct=distinct)
                np.testing.assert_array_equal(got, exact_oracle(rows, words, distinct),
                                              err_msg=f"{X.dtype} {sense}")
                np.testing.assert_array_equal(got, sky)
    B = rng.random((100, 2)) < 0.5
    got, sky = both(B)
    np.testing.assert_array_equal(got, oracle(B.astype(float)))
    np.testing.assert_array_equal(got, sky)


def test_float32_and_lists():
    X = np.random.default_rng(2).integers(0, 9, (500, 2)).astype(np.float32) / 7
    got, sky = both(X)
    np.testing.assert_array_equal(got, oracle(X.astype(np.float64)))
    np.testing.assert_array_equal(got, sky)
    np.testing.assert_array_equal(sj.skyline([[1, 3], [2, 2], [3, 1], [3, 3], [2, 2]],
                                             device="cpu"),
                                  [0, 1, 2, 4])


def test_trivial_sizes():
    for n in (0, 1):
        got, st = sj.skyline(np.ones((n, 2)), device="cpu", return_stats=True)
        np.testing.assert_array_equal(got, np.arange(n))
        assert st["algorithm"] == "sort2d"
    np.testing.assert_array_equal(sj.skyline(np.ones((5, 2)), device="cpu", distinct=True), [0])
    sky, st = sort2d.skyline_2d(np.zeros((0, 2)))
    assert sky.size == 0 and st["prefilter_survivors"] == 0


def test_diff_columns():
    """Only diff columns: two grouping columns reach the engine (every row
    is on the skyline); with value columns the grouping adds two columns and
    SkyAlign runs.  Both against the exact oracle."""
    rng = np.random.default_rng(13)
    X = rng.integers(0, 4, (200, 2))
    for distinct in (False, True):
        got, st = sj.skyline(X, sense=["diff", "diff"], distinct=distinct, device="cpu",
                             return_stats=True)
        assert st["algorithm"] == "sort2d"
        np.testing.assert_array_equal(got, exact_oracle(as_rows(X), ["diff"] * 2, distinct))
    Y = rng.integers(0, 4, (200, 3))
    for sense in (["min", "min", "diff"], ["diff", "max", "min"]):
        got, st = sj.skyline(Y, sense=sense, device="cpu", return_stats=True)
        assert st["algorithm"] == "skyalign"
        np.testing.assert_array_equal(got, exact_oracle(as_rows(Y), sense))


def test_dataframes():
    rng = np.random.default_rng(17)
    n = 300
    df = pd.DataFrame({"price": rng.integers(0, 6, n), "rating": rng.integers(0, 6, n),
                       "name": [f"r{i}" for i in range(n)],
                       "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(
                           rng.integers(0, 3, n), unit="ns")},
                      index=rng.permutation(n) + 1000)
    for kw, cols, sense in (({"min": "price", "max": "rating"}, ["price", "rating"], ["min", "max"]),
                            ({"max": ["when", "price"]}, ["when", "price"], ["max", "max"])):
        for distinct in (False, True):
            got, st = sj.skyline(df, distinct=distinct, device="cpu", return_stats=True, **kw)
            assert st["algorithm"] == "sort2d"
            vals = np.column_stack([df[c].to_numpy().view(np.int64) if c == "when"
                                    else df[c].to_numpy() for c in cols])
            want = exact_oracle(as_rows(vals), sense, distinct)
            assert list(got.index) == list(df.index[want])
            assert list(got.columns) == list(df.columns)


def test_paretoset_interface():
    X = np.random.default_rng(8).integers(0, 5, (400, 2))
    for distinct in (False, True):
        mask = sj.paretoset(X, sense=["min", "max"], distinct=distinct)
        np.testing.assert_array_equal(np.flatnonzero(mask),
                                      exact_oracle(as_rows(X), ["min", "max"], distinct))


def test_routing():
    """auto: sort2d for 2-D on the CPU (not with a SkyAlign variant, not on
    the GPU); SkyAlign and the others when asked; sort2d refused elsewhere."""
    assert plan_skyline(10, 2, "cpu") == SkylinePlan("cpu", "sort2d", None, False, 10, 2)
    assert plan_skyline(10, 2, "cpu", variant="default").algorithm == "sort2d"
    assert plan_skyline(10, 2, "cpu", variant="nosync") == \
        SkylinePlan("cpu", "skyalign", "nosync", False, 10, 2)
    assert plan_skyline(10, 2, "cpu", "skyalign").variant == "levelwise"
    assert plan_skyline(10, 2, "gpu") == SkylinePlan("gpu", "skyalign", "padded", False, 10, 2)
    assert plan_skyline(10, 3, "cpu").algorithm == "skyalign"
    assert plan_skyline(10, 1, "cpu").algorithm == "skyalign"
    assert plan_skyline(10, 2, "cpu", "SORT2D").algorithm == "sort2d"
    with pytest.raises(ValueError, match="2-D skylines only"):
        plan_skyline(10, 3, "cpu", "sort2d")
    with pytest.raises(ValueError, match="CPU only"):
        plan_skyline(10, 2, "gpu", "sort2d")
    with pytest.raises(ValueError, match="applies to algorithm='skyalign' only"):
        plan_skyline(10, 2, "cpu", "sort2d", "sync")
    with pytest.raises(ValueError, match="2-D skylines only"):
        sj.skyline(np.ones((4, 3)), device="cpu", algorithm="sort2d")
    X = np.random.default_rng(0).random((200, 2))
    for algorithm, variant in (("skyalign", None), ("auto", "nosync"), ("sfs", None)):
        got, st = sj.skyline(X, device="cpu", algorithm=algorithm, variant=variant,
                             return_stats=True)
        assert st["algorithm"] == (algorithm if algorithm != "auto" else "skyalign")
        np.testing.assert_array_equal(got, oracle(X))
    with pytest.raises(ValueError, match="2 columns"):
        sort2d.skyline_2d(np.ones((3, 3)))


def test_nothing_compiled_in_a_fresh_process(tmp_path):
    """A 2-D skyline on the CPU imports neither Numba nor a kernel module:
    nothing can compile, and no compile notice appears."""
    code = (
        "import json, logging, sys, numpy as np, skyjoin as sj\n"
        "seen = []\n"
        "class H(logging.Handler):\n"
        "    def emit(self, r): seen.append(r.getMessage())\n"
        "logging.getLogger('skyjoin.compile').addHandler(H())\n"
        "X = np.random.default_rng(0).random((5000, int(sys.argv[1])))\n"
        "sj.skyline(X, device='cpu')\n"
        "print(json.dumps({'numba': 'numba' in sys.modules, "
        "'engine': 'skyjoin.pareto.cpu' in sys.modules, 'notices': seen}))\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), SKYJOIN_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", code, "2"], env=env, check=True,
                         capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res == {"numba": False, "engine": False, "notices": []}
