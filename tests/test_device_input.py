"""Points already on the GPU, on a machine that may have none: the boundary's rule.

Device input is recognised without CuPy (the CUDA array interface, or DLPack
from a CUDA device), so the boundary refuses it clearly where no GPU can
run it: ``GPUUnavailableError`` (``device="auto"``/"gpu"), ``TypeError``
(``device="cpu"``, or a metric that scikit-learn computes on the host),
never scikit-learn's own TypeError from its host validation.  ``on_device``
off the GPU is a ValueError.  Host input, DLPack exporters on the CPU
included, is unchanged (oracle: scikit-learn's brute force).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj
from skyjoin._core import device as device_mod
from skyjoin._core.device_input import on_gpu
from skyjoin.cluster.params import InvalidParameterError


class FakeCudaArray:
    """An object exposing only the CUDA array interface (as CuPy, Numba and
    PyTorch CUDA tensors do); its pointer leads nowhere."""

    def __init__(self, shape=(10, 2), typestr="<f8"):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (0, False), "version": 3}


class FakeDLPack:
    """A DLPack exporter that says it lives on device type ``kind``."""

    def __init__(self, kind, shape=(10, 2)):
        self.kind, self.shape = kind, shape

    def __dlpack__(self, stream=None):          # never reached without a GPU
        raise AssertionError("the boundary must not read a device array without a GPU")

    def __dlpack_device__(self):
        return (self.kind, 0)


@pytest.fixture
def no_gpu(monkeypatch):
    """A machine without a usable GPU, whatever this one has."""
    monkeypatch.setattr(device_mod, "_probe_gpu", lambda: (False, "no GPU (test)"))
    monkeypatch.delenv("SKYJOIN_DEVICE", raising=False)


def _calls(X):
    """Every public call that takes points, on X."""
    return {
        "DBSCAN.fit": lambda **kw: sj.DBSCAN(eps=0.5, min_samples=2, **kw).fit(X),
        "dbscan": lambda **kw: sj.dbscan(X, eps=0.5, min_samples=2, **kw),
        "dbscan_sweep": lambda **kw: sj.dbscan_sweep(X, eps=[0.5], min_samples=[2], **kw),
        "self_join": lambda **kw: sj.self_join(X, 0.5, **kw),
        "self_join_chunks": lambda **kw: sj.self_join_chunks(X, 0.5, **kw),
        "join R": lambda **kw: sj.join(X, np.zeros((3, 2)), 0.5, **kw),
        "join S": lambda **kw: sj.join(np.zeros((3, 2)), X, 0.5, **kw),
    }


def test_what_is_device_input():
    assert on_gpu(FakeCudaArray())
    assert on_gpu(FakeDLPack(2)) and on_gpu(FakeDLPack(13))      # kDLCUDA, kDLCUDAManaged
    assert not on_gpu(FakeDLPack(1))                             # kDLCPU
    assert not on_gpu(np.zeros((3, 2)))                          # NumPy exports DLPack on the CPU
    assert not on_gpu([[0.0, 1.0]])


@pytest.mark.parametrize("make", [FakeCudaArray, lambda: FakeDLPack(2)],
                         ids=["cuda-array-interface", "dlpack-cuda"])
@pytest.mark.parametrize("device", [None, "auto", "gpu"])
def test_device_input_without_gpu_is_gpu_unavailable(no_gpu, make, device):
    for name, call in _calls(make()).items():
        with pytest.raises(sj.GPUUnavailableError, match="no GPU can be used"):
            call(device=device)


def test_device_input_names_itself_when_auto(no_gpu):
    with pytest.raises(sj.GPUUnavailableError, match="the points are on the GPU"):
        sj.DBSCAN(eps=0.5).fit(FakeCudaArray())


@pytest.mark.parametrize("make", [FakeCudaArray, lambda: FakeDLPack(2)],
                         ids=["cuda-array-interface", "dlpack-cuda"])
def test_device_input_on_cpu_is_refused(make):
    for name, call in _calls(make()).items():
        with pytest.raises(TypeError, match="never copies them to the host"):
            call(device="cpu")


def test_device_input_on_cpu_from_the_environment(monkeypatch):
    monkeypatch.setenv("SKYJOIN_DEVICE", "cpu")
    with pytest.raises(TypeError, match="device='cpu'"):
        sj.DBSCAN(eps=0.5).fit(FakeCudaArray())


@pytest.mark.parametrize("params", [dict(metric="manhattan"), dict(metric="minkowski", p=3),
                                    dict(metric="euclidean", metric_params={"a": 1}),
                                    dict(metric="precomputed")])
def test_device_input_off_the_euclidean_join_is_refused(params):
    """Not scikit-learn's 'Implicit conversion to a NumPy array' from deep inside."""
    with pytest.raises(TypeError, match="only Euclidean DBSCAN runs on the GPU"):
        sj.DBSCAN(eps=0.5, **params).fit(FakeCudaArray())


def test_on_device_off_the_gpu_is_an_error():
    X = np.random.default_rng(0).normal(0, 1, (50, 2))
    with pytest.raises(ValueError, match="on_device=True .* device is 'cpu'"):
        sj.DBSCAN(eps=0.5, device="cpu", on_device=True).fit(X)
    with pytest.raises(ValueError, match="on_device=True .* device is 'cpu'"):
        sj.dbscan(X, eps=0.5, device="cpu", on_device=True)
    with pytest.raises(ValueError, match="on_device=True .* device is 'cpu'"):
        sj.dbscan_sweep(X, eps=[0.5], min_samples=[2], device="cpu", on_device=True)
    with pytest.raises(ValueError, match="on_device=True needs Euclidean DBSCAN on the GPU"), \
            pytest.warns(UserWarning, match="braycurtis"):   # scikit-learn's metric, on the host
        sj.DBSCAN(eps=0.5, metric="braycurtis", on_device=True).fit(X)
    with pytest.raises(TypeError, match="apply to device='gpu' only"):
        sj.self_join(X, 0.5, device="cpu", output="counts", on_device=True)


def test_on_device_is_checked_as_a_parameter():
    X = np.zeros((5, 2))
    with pytest.raises(InvalidParameterError, match="The 'on_device' parameter of DBSCAN"):
        sj.DBSCAN(on_device="yes", device="cpu").fit(X)
    with pytest.raises(TypeError, match="on_device must be True or False"):
        sj.dbscan_sweep(X, eps=[0.5], min_samples=[2], device="cpu", on_device=1)


def test_on_device_false_keeps_host_results():
    """The default is unchanged: NumPy results equal to scikit-learn's."""
    X = np.random.default_rng(1).normal(0, 1, (300, 2))
    est = sj.DBSCAN(eps=0.3, min_samples=4, device="cpu", on_device=False).fit(X)
    ref = SkDBSCAN(eps=0.3, min_samples=4, algorithm="brute").fit(X)
    assert isinstance(est.labels_, np.ndarray) and isinstance(est.components_, np.ndarray)
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    np.testing.assert_array_equal(est.core_sample_indices_, ref.core_sample_indices_)
    np.testing.assert_array_equal(est.components_, ref.components_)
