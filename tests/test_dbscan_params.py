"""DBSCAN's parameter and weight checks (``dbscan.params``) against scikit-learn's.

The oracle is scikit-learn's own DBSCAN: for each value, skyjoin's DBSCAN
refuses it exactly when scikit-learn's does, with an error that is both a
ValueError and a TypeError, naming the parameter.
"""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SklearnDBSCAN

import skyjoin as sj
from skyjoin.cluster.params import InvalidParameterError, check_sample_weight

X = np.random.default_rng(0).random((40, 2))

SHARED = [
    ("eps", [0.5, 1, 1e-9, 0.0, -1.0, float("nan"), "0.5", None]),
    ("min_samples", [1, 5, np.int64(3), 0, -2, 2.0, "5", None]),
    ("metric", ["euclidean", "manhattan", "cosine", "precomputed", "no-such", 3, None,
                lambda a, b: float(np.abs(a - b).sum())]),
    ("metric_params", [None, {}, {"p": 2}, [], "x"]),
    ("algorithm", ["auto", "ball_tree", "kd_tree", "brute", "grid", None]),
    ("leaf_size", [1, 30, 0, -1, 2.5, None]),
    ("p", [None, 0, 1.5, 2, -0.1, "2"]),
    ("n_jobs", [None, 1, -1, 2.0, "all"]),
]


def _refused(make, **params):
    try:
        make(**params).fit(X if params.get("metric") != "precomputed" else X @ X.T * 0)
    except (ValueError, TypeError) as exc:
        return exc
    return None


@pytest.mark.parametrize("name,values", SHARED, ids=[n for n, _ in SHARED])
def test_refused_exactly_where_sklearn_refuses(name, values):
    for value in values:
        theirs = _refused(SklearnDBSCAN, **{name: value})
        ours = _refused(lambda **k: sj.DBSCAN(device="cpu", **k), **{name: value})
        assert (ours is None) == (theirs is None), (name, value, ours, theirs)
        if ours is not None and isinstance(theirs, TypeError) and isinstance(theirs, ValueError):
            # ours, or scikit-learn's where the "sklearn" path hands a value on
            assert isinstance(ours, ValueError) and isinstance(ours, TypeError)
            assert f"The '{name}' parameter of" in str(ours), str(ours)


@pytest.mark.parametrize("name", ["eps", "min_samples", "leaf_size", "p", "n_jobs",
                                  "memory_limit"])
def test_a_bool_is_not_a_number(name):
    """Where scikit-learn takes True for 1, skyjoin refuses it (its convention
    for every numeric argument)."""
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of DBSCAN"):
        sj.DBSCAN(device="cpu", **{name: True}).fit(X)


@pytest.mark.parametrize("name,bad", [("device", "tpu"), ("device", 0), ("precision", "float16"),
                                      ("memory_limit", 0), ("memory_limit", "big"),
                                      ("memory_limit", 1.5)])
def test_skyjoin_parameters_are_checked(name, bad):
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of DBSCAN"):
        sj.DBSCAN(**{name: bad}).fit(X)


@pytest.mark.parametrize("weights", [None, 2.0, 3, np.arange(1, 41), np.ones(40, np.float32),
                                     [1.0] * 40, np.zeros(40), 0.0, [2.0], np.ones((40, 1)),
                                     np.r_[np.nan, np.ones(39)], ["a"] * 40])
def test_sample_weight_checked_as_sklearn_checks_it(weights):
    def outcome(make):
        try:
            est = make().fit(X, sample_weight=weights)
        except (ValueError, TypeError) as exc:
            return type(exc).__mro__[1:]
        return est.labels_.tolist()

    theirs = outcome(lambda: SklearnDBSCAN(eps=0.2, min_samples=3))
    ours = outcome(lambda: sj.DBSCAN(eps=0.2, min_samples=3, device="cpu"))
    assert isinstance(ours, list) == isinstance(theirs, list), (ours, theirs)
    if isinstance(ours, list):
        assert ours == theirs


def test_check_sample_weight_shapes_and_dtypes():
    assert check_sample_weight(2, 3).tolist() == [2.0, 2.0, 2.0]
    assert check_sample_weight(np.ones(3, np.float32), 3).dtype == np.float32
    assert check_sample_weight([1, 2, 3], 3).dtype == np.float64
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(2,\), expected \(3,\)"):
        check_sample_weight([1, 2], 3)
    with pytest.raises(ValueError, match="at least one non-zero"):
        check_sample_weight(np.zeros(3), 3)


@pytest.mark.parametrize("weights", [2.0, np.arange(1, 41), np.zeros(40), [2.0],
                                     np.r_[np.inf, np.ones(39)], np.ones((40, 1))])
def test_sweep_takes_the_weights_dbscan_takes(weights):
    """One rule for the weights: the sweep refuses what DBSCAN refuses, and
    clusters the rest as DBSCAN does."""
    def labels_or_error(fn):
        try:
            return fn().tolist()
        except ValueError as exc:
            return type(exc)

    est = labels_or_error(lambda: sj.DBSCAN(eps=0.2, min_samples=3, device="cpu")
                          .fit(X, sample_weight=weights).labels_)
    sweep = labels_or_error(lambda: next(iter(sj.dbscan_sweep(
        X, eps=0.2, min_samples=3, sample_weight=weights, device="cpu"))).labels)
    assert sweep == est


def test_finite_weights_near_the_limit_raise_no_warning():
    """Weights whose sum overflows are finite: taken without a RuntimeWarning,
    while an inf among them is still refused.  (NumPy sums 8 interleaved
    partial sums: here two of them overflow to +inf and -inf, whose sum is
    NaN, "invalid value encountered in reduce".)"""
    import warnings

    w = np.array(([1e308, -1e308] + [0.5] * 6) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = check_sample_weight(w, 16)
    np.testing.assert_array_equal(got, w)
    with pytest.raises(ValueError, match="infinity"):
        check_sample_weight(np.array([1e308, np.inf, 0.5]), 3)


@pytest.mark.parametrize("name,value", [("eps", 10**400), ("eps", -10**400), ("p", 10**400),
                                        ("eps", np.inf), ("p", np.inf)],
                         ids=["eps-1e400", "eps--1e400", "p-1e400", "eps-inf", "p-inf"])
def test_a_number_beyond_float_range_is_refused_by_name(name, value):
    """float(10**400) overflows: a clear InvalidParameterError naming the
    parameter (a ValueError), not numpy's TypeError from isnan."""
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of DBSCAN") as info:
        sj.DBSCAN(device="cpu", **{name: value}).fit(X)
    assert isinstance(info.value, ValueError)
    if isinstance(value, int):
        assert "(too large for a float)" in str(info.value) and len(str(info.value)) < 200
