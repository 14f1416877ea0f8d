"""skyjoin.distributed.self_join(..., on_device=True): each partition's table stays on
its worker's GPU, as a Dask bag of OwnedRows; read back equal to the single-machine
table (the oracle: the CPU join, itself checked against brute force elsewhere)."""

import numpy as np
import pytest

import skyjoin as sj
import skyjoin.distributed as sd
from skyjoin.distributed.owned_rows import OwnedRows, to_host_table

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cpu_client():
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=":0") as cl, distributed.Client(cl) as c:
        yield c


def _points(seed=5, n=6000):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(c, 0.6, (n // 3, 2)) for c in ((0, 0), (4, 1), (1, 5))])


def test_on_device_refuses_cpu_workers(cpu_client):
    X = _points()
    with pytest.raises(ValueError, match="on_device=True keeps each partition's table"):
        sd.self_join(X, 0.3, client=cpu_client, device="cpu", on_device=True, retries=0)


@pytest.mark.parametrize("kw", [{"output": "counts"}, {"out": "somewhere"}])
def test_on_device_refuses_other_outputs(cpu_client, kw):
    with pytest.raises(ValueError, match="cannot be combined"):
        sd.self_join(_points(), 0.3, client=cpu_client, on_device=True, **kw)


def test_owned_rows_assemble_the_table():
    """The host side of the bag: rows owned by disjoint partitions make the whole table."""
    X = _points(n=3000)
    ref = sj.self_join(X, 0.4, device="cpu")
    rng = np.random.default_rng(1)
    owner = rng.integers(0, 3, len(X))
    parts = []
    for p in range(3):
        rows = np.flatnonzero(owner == p)
        sub = [ref.row(i) for i in rows]
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in sub], out=indptr[1:])
        cols = np.concatenate(sub) if sub else np.zeros(0, dtype=np.int32)
        parts.append(OwnedRows(rows, sj.NeighborTable(indptr, cols, (len(rows), len(X)),
                                                      sorted=True)))
    assert sum(p.n_pairs for p in parts) == ref.n_pairs
    assert to_host_table(parts, len(X), True) == ref


@pytest.mark.gpu
@pytest.mark.parametrize("processes", [False, True])
def test_gpu_tables_stay_on_their_gpus(processes):
    from skyjoin.distributed.workers import visible_gpus

    k = min(2, len(visible_gpus()))
    if k < 1:
        pytest.skip("needs a GPU")
    X = _points(n=30000)
    ref = sj.self_join(X, 0.2, device="cpu")
    with sd.local_gpu_cluster(k, processes=processes) as cluster, \
            distributed.Client(cluster) as c:
        for parts in (None, 1, 5):
            tm: dict = {}
            bag = sd.self_join(X, 0.2, client=c, device="gpu", on_device=True,
                               n_partitions=parts, timings=tm)
            # one bag partition per spatial partition (the plan rounds the target)
            assert bag.npartitions == tm["n_partitions"] == (k if parts is None else
                                                             tm["n_partitions"])
            assert bag.npartitions >= (parts or k)
            # the next GPU step runs on the workers, where the rows are
            assert bag.map(lambda r: int(r.table.on_device)).sum().compute() == bag.npartitions
            assert bag.map(lambda r: r.n_pairs).sum().compute() == ref.n_pairs
            got = bag.compute()
            assert all(isinstance(r, OwnedRows) and r.table.on_device for r in got)
            if not processes and k == 2 and parts == 5:
                assert len({r.table.indices.device.id for r in got}) == 2
            assert to_host_table(got, len(X), True) == ref
