import numpy as np
import pytest

import skyjoin


def pytest_collection_modifyitems(config, items):
    """Skip GPU tests cleanly where no GPU can be used."""
    if skyjoin.gpu_available():
        return
    skip = pytest.mark.skip(reason="no usable GPU (CuPy missing or no CUDA device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def cp():
    """CuPy, or skip: the test needs a GPU."""
    cupy = pytest.importorskip("cupy")
    if not skyjoin.gpu_available():
        pytest.skip("no usable GPU")
    return cupy
