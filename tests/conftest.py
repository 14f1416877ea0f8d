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


@pytest.fixture(scope="module")
def client():
    """A Dask client of 2 CPU worker processes (1 Numba thread each), one per test module."""
    distributed = pytest.importorskip("distributed")
    import skyjoin.distributed as sd
    from skyjoin.pareto.api import skyline as single_skyline

    # compile the single-machine engines here first: the workers then load them from
    # Numba's disk cache instead of both compiling them at once on the same cores
    W = np.random.default_rng(0).uniform(0, 3, (300, 2))
    skyjoin.self_join(W, 0.5, device="cpu")
    skyjoin.join(W, W, 0.5, device="cpu", output="counts")
    skyjoin.DBSCAN(eps=0.5, min_samples=3, device="cpu").fit(W)
    single_skyline(W, device="cpu")
    cluster = sd.local_cluster(2, numba_threads=1, silence_logs=40)
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()
