"""The array as slices on the GPU worker threads (skyjoin.distributed.gpu_slices):
the same plan as the host's summaries, the same partitions as the host's
selection, checked input, nothing left behind."""

import numpy as np
import pytest

import skyjoin as sj

pytestmark = pytest.mark.gpu

distributed = pytest.importorskip("distributed")
sd = pytest.importorskip("skyjoin.distributed")


def _two_gpus():
    from skyjoin.distributed.workers import visible_gpus

    if len(visible_gpus()) < 2:
        pytest.skip("needs 2 GPUs")


@pytest.fixture(scope="module")
def gpu_client():
    _two_gpus()
    with sd.local_gpu_cluster(2, processes=False) as cluster, distributed.Client(cluster) as c:
        yield c


def _points(n=60000, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) * [3.0, 1.0]
    X[: n // 10] = np.round(X[: n // 10], 1)       # duplicates, some on the cuts
    return X


def test_slices_summaries_equal_the_hosts(gpu_client):
    from skyjoin.distributed import load as dload
    from skyjoin.distributed.blocks import as_blocks, new_token
    from skyjoin.distributed.registry import drop, lookup

    X = _points()
    token = new_token("test")
    try:
        got = dload.load_blocks(gpu_client, X, None, shared=True, token=token,
                                dtype=np.float64)
        ref = as_blocks(gpu_client, X, scatter=False)
        assert got.slices is not None and got.slices[0] == 0 and got.slices[-1] == len(X)
        assert lookup(token, "slice-0") is not None and lookup(token, "slice-1") is not None
        np.testing.assert_array_equal(got.lo, ref.lo)
        np.testing.assert_array_equal(got.hi, ref.hi)
        np.testing.assert_array_equal(got.sample, ref.sample)
    finally:
        drop(token)


def test_gathered_partitions_equal_the_host_selection(gpu_client):
    """Every partition gathered from the routed slices holds the rows, ids and
    order that the host's selection (partition_on_gpu) gives; a second
    gather finds nothing (a retried task selects on the host)."""
    import cupy as cp

    from skyjoin.distributed import gpu_slices, in_process_gpu
    from skyjoin.distributed import load as dload
    from skyjoin.distributed import plan as dplan
    from skyjoin.distributed.blocks import new_token
    from skyjoin.distributed.registry import drop, lookup

    X = _points(80000, seed=6)
    token = new_token("test")
    try:
        blocks = dload.load_blocks(gpu_client, X, 5, shared=True, token=token, dtype=np.float64)
        run = dplan.plan_run(blocks, 0.05, "float64", 5, gpu_client, "gpu", halo_factor=2)
        width = 2 * run.halo
        assert run.path == "in_process_gpu" and run.n_partitions >= 3
        gpu_client.gather(gpu_slices.route(gpu_client, token, blocks, run.boxes, width))
        assert lookup(token, "slice-0") is None           # routed, then dropped

        def both(p):
            got = gpu_slices.gather(cp, token, p, width)
            again = gpu_slices.gather(cp, token, p, width)
            ref = in_process_gpu.partition_on_gpu(cp, token, p, run.boxes, width)
            return [cp.asnumpy(a) if hasattr(a, "device") else a for a in got], \
                [cp.asnumpy(a) if hasattr(a, "device") else a for a in ref], again is None

        workers = sorted(gpu_client.scheduler_info()["workers"])
        for p in range(run.n_partitions):
            got, ref, gone = gpu_client.submit(both, p, workers=[workers[p % 2]],
                                               pure=False).result()
            assert gone
            assert got[2] == ref[2]
            np.testing.assert_array_equal(got[1], ref[1])
            np.testing.assert_array_equal(got[0], ref[0])
    finally:
        drop(token)


def test_bad_input_is_refused_and_nothing_stays(gpu_client):
    X = _points(30000)
    X[12345, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sd.self_join(X, 0.1, client=gpu_client, device="gpu", output="counts")
    from skyjoin.distributed.registry import tokens

    assert not [k for k in tokens() if k.startswith("skyjoin-join")]


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_other_layouts_and_precisions_equal_single_machine(gpu_client, precision):
    X = np.asfortranarray(_points(40000, seed=8).astype(np.float32))
    ref = sj.self_join(X, 0.05, device="cpu", precision=precision)
    got = sd.self_join(X, 0.05, client=gpu_client, device="gpu", precision=precision)
    assert got == ref
    one = sj.DBSCAN(eps=0.05, min_samples=4, device="cpu", precision=precision).fit(X)
    est = sd.DBSCAN(eps=0.05, min_samples=4, client=gpu_client, device="gpu",
                    precision=precision).fit(X)
    np.testing.assert_array_equal(est.labels_, one.labels_)
    # float64: the grid path's core ids; float32: the points path's, each written by the
    # slices into their ranges of core_sample_indices_
    assert est.core_sample_indices_.dtype == np.int64
    np.testing.assert_array_equal(est.core_sample_indices_, one.core_sample_indices_)


@pytest.mark.parametrize("sort,batch", [(True, None), (False, None), (True, 4096)])
def test_parts_written_by_the_gpu_threads_read_back_equal(gpu_client, tmp_path, sort, batch,
                                                           monkeypatch):
    """out= on the in-process GPU path: each partition writes its part from its
    GPU's thread, batch by batch as the GPU fills them (``batch``: pairs a
    batch, so that a part takes many); the folder holds the parts only, equal
    to the single machine's table once read back."""
    import os

    from skyjoin.distributed import in_process_gpu
    from skyjoin.distributed.plan import PARTS_PER_WRITING_GPU

    if batch is not None:
        monkeypatch.setattr(in_process_gpu, "STREAM_BATCH_PAIRS", batch)
    X = _points(50000, seed=9)
    ref = sj.self_join(X, 0.05, device="cpu")
    tm = {}
    res = sd.self_join(X, 0.05, client=gpu_client, device="gpu", out=tmp_path / "o",
                       sort=sort, timings=tm)
    assert isinstance(res, sd.PartitionedPairs) and res.n_pairs == ref.n_pairs
    # the box planner meets its target at least (slabs x parts a slab)
    assert tm["n_partitions"] >= 2 * PARTS_PER_WRITING_GPU
    assert sorted(os.listdir(tmp_path / "o")) == sorted(os.path.basename(f) for f in res.files)
    got = res.to_table()
    assert (got if sort else got.sort_rows()) == ref


def test_one_gpu_writes_its_parts_batch_by_batch(tmp_path, monkeypatch):
    """One GPU worker: by default PARTS_PER_WRITING_GPU parts on its thread;
    with n_partitions=1 the whole join as one part, written batch by batch
    as the GPU fills it (many batches here); both equal to the single
    machine's table."""
    from skyjoin.distributed import join as djoin
    from skyjoin.distributed.plan import PARTS_PER_WRITING_GPU

    monkeypatch.setattr(djoin, "STREAM_BATCH_PAIRS", 4096)
    X = _points(30000, seed=10)
    ref = sj.self_join(X, 0.05, device="cpu")
    with sd.local_gpu_cluster(1, processes=False) as cluster, distributed.Client(cluster) as c:
        tm = {}
        res = sd.self_join(X, 0.05, client=c, device="gpu", out=tmp_path / "a", timings=tm)
        assert tm["n_partitions"] >= PARTS_PER_WRITING_GPU
        assert res.n_pairs == ref.n_pairs and 1 <= len(res.files) <= tm["n_partitions"]
        assert res.to_table() == ref
        res = sd.self_join(X, 0.05, client=c, device="gpu", out=tmp_path / "b", n_partitions=1)
    assert res.n_pairs == ref.n_pairs and len(res.files) == 1
    assert res.to_table() == ref
