"""SKYJOIN_DEVICE is honoured by every operator whose device is left unset."""

import numpy as np
import pytest

import skyjoin as sj
from skyjoin._core import device as device_mod


@pytest.fixture
def fake_no_gpu(monkeypatch):
    """A machine without a usable GPU, whatever this one has."""
    monkeypatch.setattr(device_mod, "_probe_gpu", lambda: (False, "no GPU (test)"))


def test_skyline_honours_the_environment(monkeypatch, fake_no_gpu):
    X = np.random.default_rng(0).uniform(0, 1, (50, 3))
    monkeypatch.setenv("SKYJOIN_DEVICE", "gpu")
    with pytest.raises(sj.GPUUnavailableError):
        sj.skyline(X)
    with pytest.raises(sj.GPUUnavailableError):
        sj.paretoset(X)
    monkeypatch.setenv("SKYJOIN_DEVICE", "cpu")
    assert np.array_equal(sj.skyline(X), sj.skyline(X, device="cpu"))
    assert np.array_equal(sj.paretoset(X), sj.paretoset(X, device="cpu"))


def test_join_honours_the_environment(monkeypatch, fake_no_gpu):
    X = np.random.default_rng(1).uniform(0, 1, (50, 2))
    monkeypatch.setenv("SKYJOIN_DEVICE", "gpu")
    with pytest.raises(sj.GPUUnavailableError):
        sj.self_join(X, 0.2)
    with pytest.raises(sj.GPUUnavailableError):
        sj.join(X, X, 0.2)
