"""Skyline inputs: exact integers and times, DataFrame columns, sense words, diff.

The oracle here is a brute-force skyline over Python objects (exact
integers, never rounded), written independently of the library; where
paretoset is installed it is a second oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.pareto.columns import exact_float64, parse_sense

pd = pytest.importorskip("pandas")

ALGS = [("skyalign", None), ("skyalign", "levelwise"), ("skyalign", "sync"), ("skyalign", "noquart"),
        ("skyalign", "nosync"), ("bnl", None), ("sfs", None), ("ggs", None), ("bruteforce", None)]


def exact_oracle(rows, sense=None, distinct=False):
    """Skyline of rows (a list of tuples of Python ints or other ordered
    values) by brute force: p dominates q iff p and q agree on every "diff"
    column, p is no worse on every other column ("max": larger is better)
    and strictly better on one.  distinct: lowest index of each group of
    equal rows."""
    rows = [tuple(r) for r in rows]
    d = len(rows[0]) if rows else 0
    sense = ["min"] * d if sense is None else list(sense)

    def dominates(p, q):
        better = False
        for a, b, s in zip(p, q, sense):
            if s == "diff":
                if a != b:
                    return False
                continue
            if s == "max":
                a, b = b, a
            if a > b:
                return False
            if a < b:
                better = True
        return better

    keep = [i for i, q in enumerate(rows) if not any(dominates(p, q) for p in rows)]
    if distinct:
        seen, out = set(), []
        for i in keep:
            if rows[i] not in seen:
                seen.add(rows[i])
                out.append(i)
        keep = out
    return np.array(keep, dtype=np.int64)


def as_rows(X):
    """A NumPy array as a list of tuples of Python ints (exact)."""
    return [tuple(int(v) for v in r) for r in np.asarray(X).tolist()]


# --------------------------------------------------------------------------
# Item 2: integers beyond 2**53, datetime64 / timedelta64
# --------------------------------------------------------------------------
def test_issue_int64_cases():
    """The issue's cases: float64 rounding made the two rows equal."""
    X = np.array([[1700000000000000001, 5], [1700000000000000000, 5]])
    assert X.dtype == np.int64
    np.testing.assert_array_equal(sj.skyline(X, device="cpu"), [1])
    np.testing.assert_array_equal(sj.skyline(X, device="cpu"), exact_oracle(as_rows(X)))
    Y = np.array([[2**60 + 1], [2**60]])
    np.testing.assert_array_equal(sj.skyline(Y, device="cpu", distinct=True), [1])
    np.testing.assert_array_equal(sj.skyline(Y, device="cpu"), [1])
    np.testing.assert_array_equal(sj.skyline(Y, device="cpu", sense="max"), [0])


def test_issue_int64_cases_paretoset():
    ps = pytest.importorskip("paretoset")
    X = np.array([[1700000000000000001, 5], [1700000000000000000, 5]])
    np.testing.assert_array_equal(np.flatnonzero(ps.paretoset(X, distinct=False)),
                                  sj.skyline(X, device="cpu"))


def _big_int_cases(rng):
    """Integer matrices whose values float64 cannot all hold."""
    out = []
    for base in (2**53 - 4, 2**53 + 1, 2**60, 2**62 + 12345, 1700000000000000000):
        for sign in (1, -1):
            X = sign * base + rng.integers(0, 6, (150, 3))
            out.append((f"int64 {sign * base}", X.astype(np.int64)))
    lo = np.iinfo(np.int64).min
    hi = np.iinfo(np.int64).max
    X = np.array([[lo, 0], [lo + 1, -1], [hi, -5], [hi - 1, -5], [0, 0], [lo, 1]], dtype=np.int64)
    out.append(("int64 extremes", X))
    U = (np.uint64(2**64 - 8) + rng.integers(0, 6, (120, 2)).astype(np.uint64)).astype(np.uint64)
    out.append(("uint64 top", U))
    M = np.column_stack([2**61 + rng.integers(0, 4, 200), rng.integers(0, 4, 200),
                         -(2**55) - rng.integers(0, 4, 200)]).astype(np.int64)
    out.append(("mixed magnitudes", M))
    return out


@pytest.mark.parametrize("algorithm,variant", ALGS)
def test_big_integers_exact(algorithm, variant):
    rng = np.random.default_rng(21)
    for name, X in _big_int_cases(rng):
        rows = as_rows(X)
        d = X.shape[1]
        for sense in (None, ["max"] * d, [("max" if k % 2 else "min") for k in range(d)]):
            for distinct in (False, True):
                got = sj.skyline(X, sense=sense, distinct=distinct, device="cpu",
                                 algorithm=algorithm, variant=variant)
                np.testing.assert_array_equal(
                    got, exact_oracle(rows, sense, distinct),
                    err_msg=f"{algorithm}/{variant} {name} sense={sense} distinct={distinct}")


def test_float64_input_is_used_as_is():
    """Ordinary data pays nothing: float64 C-contiguous input is the engines'
    matrix itself, and in-range int64 is one cast."""
    from skyjoin.pareto.columns import exact_matrix, prepare_array

    X = np.random.default_rng(0).random((50, 3))
    Xc, maximise, n_diff = prepare_array(X, ["min", "max", "min"])
    assert Xc is X and n_diff == 0
    np.testing.assert_array_equal(maximise, [False, True, False])
    I = np.arange(-6, 6, dtype=np.int64).reshape(4, 3) * 2**50
    np.testing.assert_array_equal(exact_matrix(I), I.astype(np.float64))


def test_exact_float64_rule():
    """Columns float64 holds exactly are cast; the others are ranked, in order."""
    small = np.array([-(2**53), 2**53, 0, 7], dtype=np.int64)
    np.testing.assert_array_equal(exact_float64(small), small.astype(np.float64))
    big = np.array([2**53 + 1, 2**53, 2**53 + 1, -(2**60)], dtype=np.int64)
    r = exact_float64(big)
    assert r.dtype == np.float64
    np.testing.assert_array_equal(r, [2, 1, 2, 0])
    u = np.array([2**64 - 1, 0, 2**64 - 2], dtype=np.uint64)
    np.testing.assert_array_equal(exact_float64(u), [2, 0, 1])
    np.testing.assert_array_equal(exact_float64(np.array([True, False])), [1.0, 0.0])
    np.testing.assert_array_equal(exact_float64(np.array([3, 1], dtype=np.int32)), [3.0, 1.0])
    with pytest.raises(TypeError, match="real numbers"):
        exact_float64(np.array(["a"]))


@pytest.mark.parametrize("unit", ["ns", "us", "s", "D"])
def test_datetime_and_timedelta_arrays(unit):
    rng = np.random.default_rng(5)
    base = np.datetime64("2024-03-01T12:00:00", unit)
    T = base + rng.integers(0, 5, (200, 2)).astype(f"timedelta64[{unit}]")
    D = T - base                                   # timedelta64
    for X in (T, D):
        rows = as_rows(X.view(np.int64))
        for sense in (None, ["max", "min"]):
            for distinct in (False, True):
                np.testing.assert_array_equal(
                    sj.skyline(X, sense=sense, distinct=distinct, device="cpu"),
                    exact_oracle(rows, sense, distinct), err_msg=f"{X.dtype} {sense}")


def test_datetime_one_nanosecond_apart():
    """2024 in ns is ~1.7e18 > 2**53: one nanosecond must still count."""
    T = np.array([["2024-01-01T00:00:00.000000001"], ["2024-01-01T00:00:00"]],
                 dtype="datetime64[ns]")
    np.testing.assert_array_equal(sj.skyline(T, device="cpu"), [1])
    np.testing.assert_array_equal(sj.skyline(T, device="cpu", sense="max"), [0])
    df = pd.DataFrame({"t": T[:, 0], "x": [1, 1]})
    assert list(sj.skyline(df, device="cpu").index) == [1]
    assert list(sj.skyline(df, max="t", min="x", device="cpu").index) == [0]


def test_nat_refused():
    T = np.array([["NaT", 1], ["2024-01-01", 2]], dtype="datetime64[ns]")
    with pytest.raises(ValueError, match="NaT"):
        sj.skyline(T, device="cpu")
    with pytest.raises(ValueError, match="NaT"):
        sj.skyline(np.array([[np.timedelta64("NaT")]], dtype="timedelta64[s]"), device="cpu")
    df = pd.DataFrame({"x": [1, 2], "when": pd.to_datetime([None, "2024-01-01"])})
    with pytest.raises(ValueError, match="'when'.*NaT"):
        sj.skyline(df, device="cpu")


def test_datetime_frame_columns():
    rng = np.random.default_rng(8)
    n = 150
    when = pd.Timestamp("2024-05-01") + pd.to_timedelta(rng.integers(0, 4, n), unit="ns")
    df = pd.DataFrame({"when": when, "tz": when.tz_localize("UTC").tz_convert("Asia/Tokyo"),
                       "dur": pd.to_timedelta(rng.integers(0, 4, n), unit="ns"),
                       "x": rng.integers(0, 4, n)})
    ints = np.column_stack([df["when"].to_numpy().view(np.int64),
                            df["when"].to_numpy().view(np.int64),     # tz: the same instants
                            df["dur"].to_numpy().view(np.int64), df["x"].to_numpy()])
    for sense in (None, ["max", "min", "min", "max"]):
        for distinct in (False, True):
            got = sj.skyline(df, sense=sense, distinct=distinct, device="cpu")
            want = exact_oracle(as_rows(ints), sense, distinct)
            assert list(got.index) == list(df.index[want])


# --------------------------------------------------------------------------
# Item 8: DataFrame columns
# --------------------------------------------------------------------------
def test_frame_int_and_bool_columns():
    """bool columns are 0 / 1 (False is better under min): an int + bool
    frame gave 'dtype object'."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"a": rng.integers(0, 5, 80), "ok": rng.integers(0, 2, 80).astype(bool)})
    rows = as_rows(df.to_numpy(dtype=np.int64))
    for sense in (None, ["min", "max"], "max"):
        words = parse_sense(sense, 2)
        for distinct in (False, True):
            got = sj.skyline(df, sense=sense, distinct=distinct, device="cpu")
            assert list(got.index) == list(exact_oracle(rows, words, distinct))
    assert list(sj.skyline(df, min="a", max="ok", device="cpu").index) == \
        list(exact_oracle(rows, ["min", "max"]))


def test_frame_duplicate_labels():
    df = pd.DataFrame([[1, 2, 3], [2, 1, 0], [0, 5, 9]], columns=["a", "a", "b"])
    with pytest.raises(ValueError, match="'a'.*names 2 columns"):
        sj.skyline(df, min="a", device="cpu")
    with pytest.raises(ValueError, match="'a'.*names 2 columns"):
        sj.skyline(df, min="b", max=["a"], device="cpu")
    # without min/max every column takes part, by position
    got = sj.skyline(df, device="cpu")
    assert list(got.index) == list(exact_oracle(as_rows(df.to_numpy())))
    assert list(sj.skyline(df, min="b", device="cpu").index) == [1]


@pytest.mark.parametrize("dtype", ["Int64", "Int32", "UInt8", "Float64", "boolean"])
def test_frame_nullable_columns(dtype):
    rng = np.random.default_rng(4)
    vals = rng.integers(0, 2 if dtype == "boolean" else 6, (120, 3))
    plain = pd.DataFrame(vals, columns=list("xyz"))
    df = plain.astype(dtype)
    for sense in (None, ["max", "min", "max"]):
        for distinct in (False, True):
            got = sj.skyline(df, sense=sense, distinct=distinct, device="cpu")
            want = exact_oracle(as_rows(vals), parse_sense(sense, 3), distinct)
            assert list(got.index) == list(want), dtype
    bad = df.copy()
    bad.iloc[7, 1] = pd.NA
    with pytest.raises(ValueError, match="column 'y' holds NaN/NA.*row position 7"):
        sj.skyline(bad, device="cpu")


def test_frame_nan_and_inf_name_the_column():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0.0, np.nan, 1.0]})
    with pytest.raises(ValueError, match="column 'b' holds NaN"):
        sj.skyline(df, device="cpu")
    df["b"] = [0.0, np.inf, 1.0]
    with pytest.raises(ValueError, match="column 'b' holds inf"):
        sj.skyline(df, device="cpu")


def test_frame_left_out_string_column_is_named():
    df = pd.DataFrame({"name": list("abc"), "x": [1, 2, 3], "y": [3, 2, 1]})
    # one entry per column: the string column cannot be minimised
    with pytest.raises(TypeError, match="column 'name'.*'diff'"):
        sj.skyline(df, sense=["min"] * 3, device="cpu")
    # neither per column nor per numeric column: both counts and the column named
    with pytest.raises(ValueError, match=r"3 columns, 2 of them numeric.*not numeric: \['name'\]"):
        sj.skyline(df, sense=["min"] * 4, device="cpu")
    with pytest.raises(TypeError, match="column 'name'"):
        sj.skyline(df, min=["name", "x"], device="cpu")
    # one entry per numeric column still works (the string column is ignored)
    assert list(sj.skyline(df, sense=["min", "max"], device="cpu").index) == [0]
    assert list(sj.skyline(df, device="cpu").index) == [0, 1, 2]


def test_frame_object_and_category_columns_refused_for_min_max():
    df = pd.DataFrame({"o": np.array([1, 2], dtype=object), "x": [1, 2]})
    with pytest.raises(TypeError, match="column 'o'"):
        sj.skyline(df, sense=["min", "min"], device="cpu")
    df = pd.DataFrame({"c": pd.Categorical(["a", "b"]), "x": [1, 2]})
    with pytest.raises(TypeError, match="column 'c'"):
        sj.skyline(df, min=["c"], device="cpu")


# --------------------------------------------------------------------------
# Item 12: sense vocabulary and diff columns
# --------------------------------------------------------------------------
def test_sense_synonyms():
    rng = np.random.default_rng(9)
    X = rng.integers(0, 5, (200, 3))
    want = sj.skyline(X, sense=["min", "max", "min"], device="cpu")
    np.testing.assert_array_equal(want, exact_oracle(as_rows(X), ["min", "max", "min"]))
    for s in (["MIN", "Max", "minimum"], ["Minimum", "MAXIMUM", min], [min, max, "min"]):
        np.testing.assert_array_equal(sj.skyline(X, sense=s, device="cpu"), want)
    np.testing.assert_array_equal(sj.skyline(X, sense="Maximum", device="cpu"),
                                  sj.skyline(X, sense=["max"] * 3, device="cpu"))
    np.testing.assert_array_equal(sj.skyline(X, sense=max, device="cpu"),
                                  sj.skyline(X, sense="max", device="cpu"))
    assert parse_sense(["different", "DIFF", "Max"], 3) == ["diff", "diff", "max"]
    with pytest.raises(ValueError, match=r"sense\[1\]"):
        sj.skyline(X, sense=["min", "best", "min"], device="cpu")
    with pytest.raises(ValueError, match=r"sense\[0\]"):
        sj.skyline(X, sense=[sum, "min", "min"], device="cpu")


@pytest.mark.parametrize("algorithm,variant", ALGS)
def test_diff_columns_arrays(algorithm, variant):
    rng = np.random.default_rng(13)
    for d in (1, 2, 3, 5):
        X = rng.integers(0, 4, (160, d + 2))
        X[:, -1] = rng.integers(-1, 2, 160)           # a diff column with few values
        for sense in (["min"] * d + ["diff", "diff"], ["diff"] + ["max"] * d + ["diff"],
                      ["diff"] * (d + 2), ["different"] + ["min"] * d + ["max"]):
            for distinct in (False, True):
                got = sj.skyline(X, sense=sense, distinct=distinct, device="cpu",
                                 algorithm=algorithm, variant=variant)
                want = exact_oracle(as_rows(X), parse_sense(sense, d + 2), distinct)
                np.testing.assert_array_equal(got, want, err_msg=f"{algorithm} d={d} {sense}")


def test_diff_exact_on_big_integers():
    """diff groups on exact values: 2**60 and 2**60 + 1 are two groups."""
    X = np.array([[2**60, 5], [2**60 + 1, 3], [2**60, 4], [2**60 + 1, 9]], dtype=np.int64)
    np.testing.assert_array_equal(sj.skyline(X, sense=["diff", "min"], device="cpu"), [1, 2])


def test_diff_columns_frames():
    rng = np.random.default_rng(17)
    n = 240
    df = pd.DataFrame({"dept": rng.choice(["a", "b", "c", "d"], n),
                       "salary": rng.integers(40, 50, n), "sales": rng.integers(0, 8, n),
                       "level": pd.Categorical(rng.choice(["jr", "sr"], n)),
                       "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 3, n),
                                                                             unit="D")})
    codes = {c: pd.factorize(df[c])[0] for c in ("dept", "level")}
    when = df["when"].to_numpy().view(np.int64)
    ints = np.column_stack([codes["dept"], df["salary"], df["sales"], codes["level"], when])
    for sense in (["diff", "min", "max", "diff", "min"],
                  ["different", "min", "maximum", "diff", "max"]):
        for distinct in (False, True):
            got = sj.skyline(df, sense=sense, distinct=distinct, device="cpu")
            want = exact_oracle(as_rows(ints), parse_sense(sense, 5), distinct)
            assert list(got.index) == list(df.index[want]), (sense, distinct)
    got = sj.skyline(df, min="salary", max="sales", diff=["dept", "level"], device="cpu")
    want = exact_oracle(as_rows(ints[:, :4]), ["diff", "min", "max", "diff"])
    assert list(got.index) == list(df.index[want])
    na = df.copy()
    na.loc[3, "dept"] = None
    with pytest.raises(ValueError, match="diff column 'dept' holds NaN/NA"):
        sj.skyline(na, min="salary", diff="dept", device="cpu")
    with pytest.raises(TypeError, match="DataFrame"):
        sj.skyline(ints, diff=[0], device="cpu")


def test_diff_columns_paretoset():
    ps = pytest.importorskip("paretoset")
    rng = np.random.default_rng(19)
    X = rng.integers(0, 5, (300, 4)).astype(float)
    for sense in (["diff", "min", "max", "min"], ["min", "diff", "diff", "max"]):
        for distinct in (False, True):
            np.testing.assert_array_equal(
                sj.skyline(X, sense=sense, distinct=distinct, device="cpu"),
                np.flatnonzero(ps.paretoset(X, sense=sense, distinct=distinct)))
