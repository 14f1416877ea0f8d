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
            "print('cupy' in sys.modules, 'numba' in sys.modules, 'skyjoin.join.cpu.engine' in sys.modules)")
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
