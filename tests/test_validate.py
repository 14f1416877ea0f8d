"""Bad input gets a clear ValueError / TypeError naming the problem."""

import numpy as np
import pytest

import skyjoin as sj
from skyjoin._core.device import GPUUnavailableError, resolve_device


@pytest.mark.parametrize("bad, exc, words", [
    (np.array([[0.0, np.nan]]), ValueError, "NaN"),
    (np.array([[0.0, np.inf]]), ValueError, "inf"),
    (np.zeros(5), ValueError, "2-D"),
    (np.zeros((2, 2, 2)), ValueError, "2-D"),
    (np.zeros((3, 0)), ValueError, "no columns"),
    (np.array([["a", "b"]]), TypeError, "real numbers"),
    (np.array([[1 + 2j]]), TypeError, "real numbers"),
    ([[1.0, 2.0], [3.0]], ValueError, "array"),
])
def test_bad_points(bad, exc, words):
    with pytest.raises(exc, match=words):
        sj.self_join(bad, 1.0, device="cpu")


@pytest.mark.parametrize("eps, exc", [(0, ValueError), (-1.0, ValueError), (np.nan, ValueError),
                                      (np.inf, ValueError), ("1", TypeError), (None, TypeError),
                                      (True, TypeError)])
def test_bad_eps(eps, exc):
    with pytest.raises(exc, match="eps"):
        sj.self_join(np.zeros((3, 2)), eps, device="cpu")


def test_mismatched_dimensions():
    with pytest.raises(ValueError, match="same number of dimensions"):
        sj.join(np.zeros((3, 2)), np.zeros((3, 3)), 1.0, device="cpu")


def test_bad_options():
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="device"):
        sj.self_join(X, 1.0, device="tpu")
    with pytest.raises(ValueError, match="output"):
        sj.self_join(X, 1.0, device="cpu", output="pairs")
    with pytest.raises(ValueError, match="pattern"):
        sj.self_join(X, 1.0, device="cpu", pattern="diagonal")
    with pytest.raises(ValueError, match="precision"):
        sj.self_join(X, 1.0, device="cpu", precision="float16")
    with pytest.raises(ValueError, match="index_dims"):
        sj.self_join(X, 1.0, device="cpu", index_dims=3)
    with pytest.raises(TypeError, match="device='gpu' only"):
        sj.self_join(X, 1.0, device="cpu", kernel="shared")
    with pytest.raises(TypeError, match="unexpected keyword"):
        sj.self_join(X, 1.0, device="cpu", bogus=1)
    with pytest.raises(ValueError, match="max_pairs"):
        list(sj.self_join_chunks(X, 1.0, device="cpu", max_pairs=0))


def test_gpu_request_without_gpu_is_an_error(monkeypatch):
    if sj.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(GPUUnavailableError, match="no GPU"):
        sj.self_join(np.zeros((3, 2)), 1.0, device="gpu")
    monkeypatch.setenv("SKYJOIN_DEVICE", "gpu")
    with pytest.raises(GPUUnavailableError):
        sj.self_join(np.zeros((3, 2)), 1.0)


def test_auto_falls_back_to_cpu_and_says_so(caplog, monkeypatch):
    if sj.gpu_available():
        pytest.skip("a GPU is present")
    monkeypatch.delenv("SKYJOIN_DEVICE", raising=False)
    with caplog.at_level("DEBUG", logger="skyjoin"):
        assert resolve_device("auto") == "cpu"
    assert any("using the CPU" in r.message for r in caplog.records)


def test_import_is_light():
    import subprocess
    import sys

    code = ("import sys, skyjoin; "
            "print('cupy' in sys.modules, 'numba' in sys.modules, 'skyjoin.simjoin.cpu.engine' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


@pytest.mark.parametrize("seed", range(6))
def test_all_finite_over_chunks_equals_numpy(seed):
    """The chunked finiteness test agrees with NumPy's whole-array one, wherever the bad
    value is (first row, chunk borders, last row) and whatever its kind."""
    from skyjoin._core.validate import all_finite, check_points

    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 400)), int(rng.integers(1, 5))
    X = rng.normal(size=(n, d))
    chunk = int(rng.integers(1, 40))
    assert all_finite(X, chunk_items=chunk)
    for row in {0, n - 1, int(rng.integers(0, n)), min(n - 1, chunk // d)}:
        Y = X.copy()
        Y[row, int(rng.integers(0, d))] = rng.choice([np.nan, np.inf, -np.inf])
        assert not all_finite(Y, chunk_items=chunk)
        assert all_finite(Y, chunk_items=chunk) == bool(np.isfinite(Y).all())
        with pytest.raises(ValueError, match=f"first at row {row}"):
            check_points(Y)


@pytest.mark.parametrize("eps", [10**400, -10**400, 10**5000], ids=["1e400", "-1e400", "1e5000"])
def test_eps_beyond_float_range_is_a_value_error_naming_eps(eps):
    """float(10**400) raises OverflowError; every entry point says what is wrong
    instead, without printing (or failing to print) thousands of digits."""
    from fractions import Fraction

    X = np.zeros((3, 2))
    calls = [lambda e: sj.self_join(X, e, device="cpu"),
             lambda e: sj.join(X, X, e, device="cpu"),
             lambda e: list(sj.self_join_chunks(X, e, device="cpu")),
             lambda e: list(sj.dbscan_sweep(X, eps=[1.0, e], min_samples=[2], device="cpu"))]
    for call in calls:
        with pytest.raises(ValueError, match=r"eps must be finite and > 0, got an int of about "
                                             r"-?10\*\*\d+ \(too large for a float\)"):
            call(eps)
    with pytest.raises(ValueError, match=r"'eps' parameter of DBSCAN .* Got an int of about"):
        sj.DBSCAN(eps=eps, device="cpu").fit(X)
    with pytest.raises(ValueError, match="got a Fraction of about 10\\*\\*400"):
        sj.self_join(X, Fraction(10**400, 3), device="cpu")


def test_positive_eps_rounding_to_zero_says_so():
    from fractions import Fraction

    with pytest.raises(ValueError, match=r"got Fraction\(1, 10+\), 0.0 as a float"):
        sj.self_join(np.zeros((3, 2)), Fraction(1, 10**400), device="cpu")


@pytest.mark.parametrize("fmt", ["csr_matrix", "coo_matrix", "csc_array"])
def test_sparse_points_are_refused_by_name(fmt):
    """NumPy reads a scipy.sparse matrix as one object ("dtype object"); the
    error names it and the way out.  (DBSCAN takes sparse input, as
    scikit-learn's does.)"""
    import scipy.sparse

    X = np.random.default_rng(0).random((12, 2))
    A = getattr(scipy.sparse, fmt)(X)
    calls = [("X", lambda: sj.self_join(A, 0.3, device="cpu")),
             ("R", lambda: sj.join(A, X, 0.3, device="cpu")),
             ("S", lambda: sj.join(X, A, 0.3, device="cpu")),
             ("X", lambda: list(sj.self_join_chunks(A, 0.3, device="cpu"))),
             ("X", lambda: list(sj.dbscan_sweep(A, eps=[0.3], min_samples=[2], device="cpu"))),
             ("X", lambda: sj.skyline(A, device="cpu"))]
    for name, call in calls:
        with pytest.raises(TypeError, match=f"{name} is a scipy.sparse {fmt}; .* "
                                            f"pass {name}.toarray\\(\\)"):
            call()
    want = sj.DBSCAN(eps=0.3, min_samples=2, device="cpu").fit(X).labels_
    assert np.array_equal(sj.DBSCAN(eps=0.3, min_samples=2, device="cpu").fit(A).labels_, want)
