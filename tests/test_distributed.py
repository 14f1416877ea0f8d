"""skyjoin.distributed on a LocalCluster of 2 worker processes.

The join, DBSCAN and the skyline on Dask must equal the single-machine
results exactly (which the other test files check against float64 brute
force, scikit-learn and a brute-force skyline); here also against cKDTree
and scikit-learn directly for a few cases.  Data includes points exactly on
partition cuts (lattice data, whose quantile cuts are data values), ties at
exactly eps, duplicates, and clusters that cross every partition.  The last
test kills a worker process in the middle of a join.
"""

import os
import sys

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import skyjoin as sj  # noqa: E402
import skyjoin.distributed as sd  # noqa: E402
from skyjoin.pareto.api import skyline as single_skyline  # noqa: E402


def lattice(rng, n, d, side=12):
    """Integer points: many exact ties at eps = 1 and duplicates; cuts fall on points."""
    return rng.integers(0, side, size=(n, d)).astype(np.float64)


def mixed_blobs(rng, n, d):
    """Gaussian blobs plus uniform noise."""
    centres = rng.uniform(0, 20, size=(6, d))
    k = n * 3 // 4
    blobs = centres[rng.integers(0, 6, k)] + rng.normal(0, 0.7, size=(k, d))
    noise = rng.uniform(-2, 22, size=(n - k, d))
    X = np.vstack([blobs, noise])
    return X[rng.permutation(n)]


# --------------------------------------------------------------------------
# join
# --------------------------------------------------------------------------
@pytest.mark.parametrize("seed,d,kind,eps,parts", [
    (0, 2, "lattice", 1.0, 9),
    (1, 1, "lattice", 1.0, 5),
    (2, 3, "lattice", 1.0, 12),
    (3, 2, "blobs", 0.35, 16),
    (4, 5, "blobs", 1.2, 6),
])
def test_join_equals_single_machine(client, seed, d, kind, eps, parts):
    rng = np.random.default_rng(seed)
    X = lattice(rng, 3000, d) if kind == "lattice" else mixed_blobs(rng, 4000, d)
    ref = sj.self_join(X, eps, device="cpu")
    got = sd.self_join(X, eps, client=client, device="cpu", n_partitions=parts,
                       block_rows=700)
    assert got == ref
    assert got.sorted
    counts = sd.self_join(X, eps, client=client, device="cpu", output="counts",
                          include_self=True, n_partitions=parts)
    np.testing.assert_array_equal(counts.compute(), ref.counts() + 1)


def test_join_against_kdtree_and_options(client):
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(7)
    X = np.vstack([lattice(rng, 1500, 2), mixed_blobs(rng, 1500, 2)])
    eps = 1.0
    pairs = cKDTree(X).query_pairs(eps, output_type="ndarray")
    expect = np.unique(np.vstack([pairs, pairs[:, ::-1]]), axis=0)
    got = sd.self_join(X, eps, client=client, device="cpu", n_partitions=10)
    np.testing.assert_array_equal(got.pairs(), expect)
    # include_self, unsorted rows
    ref = sj.self_join(X, eps, device="cpu", include_self=True)
    uns = sd.self_join(X, eps, client=client, device="cpu", include_self=True, sort=False,
                       n_partitions=10)
    assert not uns.sorted
    assert uns.sort_rows() == ref


def test_join_partitioned_parquet(client, tmp_path):
    rng = np.random.default_rng(8)
    X = mixed_blobs(rng, 3000, 2)
    res = sd.self_join(X, 0.4, client=client, device="cpu", out=tmp_path / "pairs",
                       n_partitions=6)
    ref = sj.self_join(X, 0.4, device="cpu")
    assert isinstance(res, sd.PartitionedPairs)
    assert res.n_pairs == ref.n_pairs
    assert all(os.path.exists(f) for f in res.files)
    assert res.to_table() == ref
    with pytest.raises(ValueError, match="empty folder"):
        sd.self_join(X, 0.4, client=client, device="cpu", out=tmp_path / "pairs")


def test_inputs_dask_collections_and_files(client, tmp_path):
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    rng = np.random.default_rng(9)
    X = mixed_blobs(rng, 2500, 3)
    eps = 0.8
    ref = sj.self_join(X, eps, device="cpu")
    assert sd.self_join(da.from_array(X, chunks=(600, 2)), eps, client=client,
                        device="cpu") == ref
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(name="x")
    ddf = dd.from_pandas(frame, npartitions=4)
    assert sd.self_join(ddf, eps, client=client, device="cpu",
                        columns=["a", "b", "c"]) == ref
    # files read by the workers: rows numbered file by file in sorted order
    for k, (a, b) in enumerate([(0, 900), (900, 1800), (1800, 2500)]):
        frame.iloc[a:b, :3].to_parquet(tmp_path / f"part-{k}.parquet")
        np.savetxt(tmp_path / f"pts-{k}.csv", X[a:b], delimiter=",", fmt="%.17g")
    assert sd.self_join(str(tmp_path / "part-*.parquet"), eps, client=client,
                        device="cpu") == ref
    assert sd.self_join(str(tmp_path / "pts-*.csv"), eps, client=client, device="cpu") == ref


def test_bad_input(client):
    X = np.zeros((10, 2))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sd.self_join(X, 1.0, client=client)
    for parts in (1, 2):    # one partition: the worker's single-machine operator checks
        with pytest.raises(ValueError, match=r"NaN values \(first at row 3\)"):
            sd.self_join(X, 1.0, client=client, device="cpu", n_partitions=parts)
        with pytest.raises(ValueError, match="NaN"):
            sd.DBSCAN(eps=1.0, min_samples=2, client=client, device="cpu",
                      n_partitions=parts).fit(X)
    with pytest.raises(ValueError, match="eps"):
        sd.self_join(np.zeros((4, 2)), -1.0, client=client)
    with pytest.raises(ValueError, match="output"):
        sd.self_join(np.zeros((4, 2)), 1.0, client=client, output="pairs")
    with pytest.raises(ValueError, match="2-D"):
        sd.skyline(np.zeros(5), client=client)
    with pytest.raises(ValueError, match="min_samples"):
        sd.DBSCAN(eps=1.0, min_samples=0, client=client).fit(np.zeros((4, 2)))
    with pytest.raises(FileNotFoundError):
        sd.self_join("/nonexistent/dir/*.parquet", 1.0, client=client)
    empty = sd.self_join(np.zeros((0, 2)), 1.0, client=client, device="cpu")
    assert empty.shape == (0, 0) and empty.n_pairs == 0
    assert sd.skyline(np.zeros((0, 3)), client=client, device="cpu").size == 0
    with pytest.raises(ValueError, match="empty"):
        sd.DBSCAN(eps=1.0, min_samples=2, client=client, device="cpu").fit(np.zeros((0, 2)))
    one = sd.DBSCAN(eps=1.0, min_samples=2, client=client, device="cpu").fit(np.ones((1, 2)))
    assert one.labels_.tolist() == [-1] and one.core_sample_indices_.size == 0


# --------------------------------------------------------------------------
# DBSCAN
# --------------------------------------------------------------------------
def long_clusters(rng, n):
    """A spiral and a long diagonal band that cross every partition, plus noise."""
    t = rng.uniform(0, 6 * np.pi, n // 3)
    spiral = np.column_stack([t * np.cos(t), t * np.sin(t)]) + rng.normal(0, 0.15, (len(t), 2))
    u = rng.uniform(-20, 20, n // 3)
    band = np.column_stack([u, 0.7 * u - 3]) + rng.normal(0, 0.2, (len(u), 2))
    noise = rng.uniform(-20, 20, (n - len(t) - len(u), 2))
    X = np.vstack([spiral, band, noise])
    return X[rng.permutation(len(X))]


@pytest.mark.parametrize("seed,kind,eps,min_samples,parts", [
    (0, "long", 0.5, 5, 16),
    (1, "blobs", 0.45, 6, 9),
    (2, "lattice", 1.0, 4, 9),
    (3, "lattice", 1.0, 12, 5),
    (4, "long", 0.3, 1, 7),
])
def test_dbscan_equals_single_machine(client, seed, kind, eps, min_samples, parts):
    from sklearn.cluster import DBSCAN as SkDBSCAN

    rng = np.random.default_rng(seed)
    if kind == "long":
        X = long_clusters(rng, 4000)
    elif kind == "blobs":
        X = mixed_blobs(rng, 4000, 2)
    else:
        X = lattice(rng, 2500, 2, side=30)
    ref = sj.DBSCAN(eps=eps, min_samples=min_samples, device="cpu").fit(X)
    got = sd.DBSCAN(eps=eps, min_samples=min_samples, client=client, device="cpu",
                    n_partitions=parts, block_rows=900).fit(X)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_array_equal(got.core_sample_indices_, ref.core_sample_indices_)
    assert got.n_partitions_ > 1
    if kind == "long":
        sk = SkDBSCAN(eps=eps, min_samples=min_samples, algorithm="kd_tree").fit(X)
        np.testing.assert_array_equal(got.labels_, sk.labels_)
        # the spiral and the band cross many partitions
        assert got.labels_.max() >= 1


# --------------------------------------------------------------------------
# skyline
# --------------------------------------------------------------------------
def brute_skyline(X, distinct=False):
    """O(n^2) skyline under minimisation; distinct keeps the lowest index of equal points."""
    le = (X[:, None, :] <= X[None, :, :]).all(axis=2)
    lt = (X[:, None, :] < X[None, :, :]).any(axis=2)
    dominated = (le & lt).any(axis=0)
    sky = np.flatnonzero(~dominated)
    if distinct:
        keep = [i for i in sky if not any((X[j] == X[i]).all() for j in sky if j < i)]
        sky = np.asarray(keep, dtype=np.int64)
    return sky


@pytest.mark.parametrize("seed,d,sense,distinct", [
    (0, 2, None, False),
    (1, 3, ["min", "max", "min"], False),
    (2, 3, None, True),
    (3, 4, "max", True),
])
def test_skyline_equals_single_machine(client, seed, d, sense, distinct):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 6, size=(1500, d)).astype(np.float64)   # many equal points
    X[rng.integers(0, 1500, 40)] = X[rng.integers(0, 1500, 40)]
    ref = single_skyline(X, sense=sense, distinct=distinct, device="cpu")
    got = sd.skyline(X, client=client, sense=sense, distinct=distinct, device="cpu",
                     block_rows=200, fan_in=3)
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.int64
    Xm = X.copy()
    if sense is not None:
        mx = np.array([sense] * d if isinstance(sense, str) else sense) == "max"
        Xm[:, mx] *= -1
    np.testing.assert_array_equal(got, brute_skyline(Xm, distinct))


def test_skyline_anticorrelated_dask_array(client):
    import dask.array as da

    X = sj.datasets.anticorrelated(5000, 3, seed=5)
    ref = single_skyline(X, device="cpu")
    got = sd.skyline(da.from_array(X, chunks=(700, 3)), client=client, device="cpu")
    np.testing.assert_array_equal(got, ref)


# --------------------------------------------------------------------------
# a worker dies in the middle of a join
# --------------------------------------------------------------------------
class KillOnce(distributed.WorkerPlugin):
    """Kill this worker's process when it starts its first task whose key holds all of
    ``parts`` (a partition join by default; once per marker)."""

    def __init__(self, marker, parts=("join-partition",)):
        self.marker = marker
        self.parts = tuple(parts)

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and all(p in str(key) for p in self.parts):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, str(key).encode())
            os.close(fd)
            os._exit(1)


def test_killed_worker_is_replaced_and_result_is_the_same(client, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rng = np.random.default_rng(11)
    X = mixed_blobs(rng, 6000, 2)
    ref = sj.self_join(X, 0.3, device="cpu")
    client.wait_for_workers(2, timeout=60)
    before = set(client.scheduler_info(n_workers=-1)["workers"])
    marker = str(tmp_path / "killed")
    client.register_plugin(KillOnce(marker), name="skyjoin-kill-once")
    try:
        got = sd.self_join(X, 0.3, client=client, device="cpu", n_partitions=8, retries=3)
    finally:
        client.unregister_worker_plugin("skyjoin-kill-once")
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert os.path.exists(marker), "no worker was killed"
    assert got == ref
    client.wait_for_workers(2, timeout=60)
    after = set(client.scheduler_info(n_workers=-1)["workers"])
    assert len(after) == 2 and after != before      # the dead worker was replaced



def test_killed_worker_after_its_replicas_were_dropped(tmp_path):
    """Scattered blocks have replicas, but Dask's Active Memory Manager drops the replicas
    that no task waits for (ReduceReplicas, every 2 s by default).  Here it runs every
    10 ms, as a job longer than 2 s sees it: the killed worker takes the only copy of
    some blocks with it.  The operators scatter the caller's array again and end with
    the single-machine results."""
    import cloudpickle
    import dask

    rng = np.random.default_rng(12)
    X = mixed_blobs(rng, 6000, 2)
    with dask.config.set({"distributed.scheduler.active-memory-manager.interval": "10ms"}):
        cluster = sd.local_cluster(2, numba_threads=1, silence_logs=50)
    c = distributed.Client(cluster)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        runs = [
            (("join-partition",), lambda: sd.self_join(X, 0.3, client=c, device="cpu",
                                                       n_partitions=8),
             sj.self_join(X, 0.3, device="cpu")),
            (("dbscan", "-local-"), lambda: sd.DBSCAN(eps=0.3, min_samples=5, client=c,
                                                      device="cpu", n_partitions=8).fit(X).labels_,
             sj.DBSCAN(eps=0.3, min_samples=5, device="cpu").fit(X).labels_),
            (("skyline", "-local-"), lambda: sd.skyline(X, client=c, device="cpu",
                                                        block_rows=500),
             single_skyline(X, device="cpu")),
        ]
        for k, (parts, run, ref) in enumerate(runs):
            c.wait_for_workers(2, timeout=60)
            marker = str(tmp_path / f"killed-{k}")
            c.register_plugin(KillOnce(marker, parts), name="skyjoin-kill-once")
            try:
                got = run()
            finally:
                c.unregister_worker_plugin("skyjoin-kill-once")
            assert os.path.exists(marker), f"no worker was killed ({parts})"
            if isinstance(ref, np.ndarray):
                np.testing.assert_array_equal(got, ref)
            else:
                assert got == ref
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        c.close()
        cluster.close()


def test_reruns_on_lost_input_counts_and_inputs(tmp_path):
    """The operator runs again only for in-memory input, at most ``retries`` times."""
    from concurrent.futures import CancelledError

    from skyjoin.distributed.blocks import reruns_on_lost_input

    calls = []

    @reruns_on_lost_input
    def op(X, retries=2, fail=99):
        calls.append(1)
        if len(calls) <= fail:
            raise CancelledError("lost")
        return len(calls)

    for X, retries, runs in ((np.zeros((3, 2)), 2, 3), (np.zeros((3, 2)), 0, 1),
                             (np.zeros((3, 2)), None, 1), (str(tmp_path / "*.csv"), 2, 1)):
        calls.clear()
        with pytest.raises(CancelledError):
            op(X, retries=retries)
        assert len(calls) == runs
    calls.clear()
    assert op(np.zeros((3, 2)), fail=1) == 2     # lost once, then done

# --------------------------------------------------------------------------
# command-line helpers
# --------------------------------------------------------------------------
def test_cli_helpers(client, tmp_path):
    import click
    import pandas as pd
    from click.testing import CliRunner

    from skyjoin.cli.distributed import (client_from_options, distributed_options, run_dbscan,
                                         run_join, run_skyline)
    from skyjoin.io import read_neighbor_table

    rng = np.random.default_rng(12)
    X = mixed_blobs(rng, 2000, 2)
    path = str(tmp_path / "pts.parquet")
    pd.DataFrame(X, columns=["x", "y"]).to_parquet(path)
    with client_from_options(None, None) as none:
        assert none is None
    with pytest.raises(ValueError, match="not both"):
        with client_from_options("tcp://x:1", 2):
            pass

    @click.command()
    @distributed_options
    def cmd(scheduler, local_cluster):
        with client_from_options(scheduler, local_cluster, echo=click.echo) as c:
            click.echo(run_join(c, path, 0.4, out=str(tmp_path / "t.npz"), device="cpu"))
            labels, msg = run_dbscan(c, path, 0.4, 5, out=str(tmp_path / "l.csv"), device="cpu")
            click.echo(msg)
            ids, msg = run_skyline(c, path, min_cols=["x"], max_cols=["y"], device="cpu")
            click.echo(msg)
            np.testing.assert_array_equal(
                ids, single_skyline(X, sense=["min", "max"], device="cpu"))
            np.testing.assert_array_equal(
                labels, sj.DBSCAN(eps=0.4, min_samples=5, device="cpu").fit(X).labels_)

    res = CliRunner().invoke(cmd, ["--scheduler", client.scheduler.address])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "dashboard" in res.output and "pairs" in res.output
    assert read_neighbor_table(str(tmp_path / "t.npz")) == sj.self_join(X, 0.4, device="cpu")


# --------------------------------------------------------------------------
# several GPUs of one host: one worker per GPU
# --------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_workers_equal_single_machine():
    from skyjoin.distributed.workers import visible_gpus

    if len(visible_gpus()) < 2:
        pytest.skip("needs 2 GPUs")
    rng = np.random.default_rng(21)
    X = np.vstack([long_clusters(rng, 20000), lattice(rng, 5000, 2, side=40) - 20])
    for processes in (False, True):
        _gpu_workers_equal(X, processes)


def _gpu_workers_equal(X, processes):
    with sd.local_gpu_cluster(2, processes=processes) as cluster, \
            distributed.Client(cluster) as c:
        assert len(c.scheduler_info(n_workers=-1)["workers"]) == 2
        # each worker runs on its own GPU
        gpus = c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")) if processes else \
            {w: c.submit(lambda: __import__("cupy").cuda.runtime.getDevice(), workers=[w],
                         pure=False).result() for w in c.scheduler_info()["workers"]}
        assert len(set(gpus.values())) == 2, gpus
        ref = sj.self_join(X, 0.5, device="cpu")
        assert sd.self_join(X, 0.5, client=c, device="gpu", n_partitions=6) == ref
        assert sd.self_join(X, 0.5, client=c, device="gpu") == ref      # one per GPU
        cnt = sd.self_join(X, 0.5, client=c, device="gpu", output="counts")
        assert type(cnt).__module__.startswith("dask.array") and cnt.dtype == np.int64
        np.testing.assert_array_equal(cnt.compute(), ref.counts())
        one = sj.DBSCAN(eps=0.5, min_samples=5, device="cpu").fit(X)
        for parts in (6, None):
            est = sd.DBSCAN(eps=0.5, min_samples=5, client=c, device="gpu",
                            n_partitions=parts).fit(X)
            np.testing.assert_array_equal(est.labels_, one.labels_)
            np.testing.assert_array_equal(est.core_sample_indices_, one.core_sample_indices_)
        Y = sj.datasets.anticorrelated(50000, 4, seed=2)
        np.testing.assert_array_equal(sd.skyline(Y, client=c, device="gpu"),
                                      single_skyline(Y, device="cpu"))
        # one box owns nothing (every point on the cut: all duplicates), and no points at all
        Z = np.ones((500, 2))
        assert sd.self_join(Z, 0.05, client=c, device="gpu") == sj.self_join(Z, 0.05, device="cpu")
        np.testing.assert_array_equal(
            sd.DBSCAN(eps=0.05, min_samples=5, client=c, device="gpu").fit(Z).labels_,
            sj.DBSCAN(eps=0.05, min_samples=5, device="cpu").fit(Z).labels_)
        empty = sd.self_join(np.zeros((0, 2)), 0.5, client=c, device="gpu")
        assert empty.shape == (0, 0) and empty.n_pairs == 0


# --------------------------------------------------------------------------
# one partition per worker: the whole operator on one worker, no halo
# --------------------------------------------------------------------------
class WorkersOnly:
    """A client whose scheduler reports ``n`` workers and nothing else: the rule reads
    only the worker count, and a live cluster's count can dip while the nanny of a
    worker killed by an earlier test replaces it."""

    def __init__(self, n):
        self.n = n

    def scheduler_info(self, n_workers=-1):
        return {"workers": {f"tcp://127.0.0.1:{9000 + w}": {} for w in range(self.n)}}


@pytest.mark.parametrize("workers, parts", [(1, 5), (2, 6), (3, 6)])
def test_default_partitions_one_per_worker(workers, parts):
    from skyjoin.distributed.plan import (PARTITION_POINTS, PARTS_PER_WRITING_GPU,
                                          default_partitions)

    c = WorkersOnly(workers)
    assert default_partitions(c, 1000) == workers
    assert default_partitions(c, 0) == workers
    n = 4 * PARTITION_POINTS + 1                   # a worker's share passes the cap
    assert default_partitions(c, n) == parts
    # GPU worker threads reading the caller's array: one partition per worker, any size
    assert default_partitions(c, n, shared=True) == workers
    assert default_partitions(c, n, shared=True, writes_parts=True) == (
        workers * PARTS_PER_WRITING_GPU)
    assert default_partitions(WorkersOnly(0), 1000) == 1


def test_single_partition_equals_single_machine(client, tmp_path):
    rng = np.random.default_rng(31)
    X = np.vstack([lattice(rng, 2000, 2), mixed_blobs(rng, 2000, 2)])
    ref = sj.self_join(X, 1.0, device="cpu")
    tm: dict = {}
    got = sd.self_join(X, 1.0, client=client, device="cpu", n_partitions=1, block_rows=700,
                       timings=tm)
    assert tm["n_partitions"] == 1
    assert got == ref and got.sorted
    counts = sd.self_join(X, 1.0, client=client, device="cpu", output="counts",
                          include_self=True, n_partitions=1, block_rows=700)
    np.testing.assert_array_equal(counts.compute(), ref.counts() + 1)
    res = sd.self_join(X, 1.0, client=client, device="cpu", n_partitions=1,
                       out=tmp_path / "whole")
    assert len(res.files) == 1 and res.to_table() == ref
    for ms in (1, 4, 9):
        est = sd.DBSCAN(eps=1.0, min_samples=ms, client=client, device="cpu", n_partitions=1,
                        block_rows=700).fit(X)
        one = sj.DBSCAN(eps=1.0, min_samples=ms, device="cpu").fit(X)
        assert est.n_partitions_ == 1
        np.testing.assert_array_equal(est.labels_, one.labels_)
        np.testing.assert_array_equal(est.core_sample_indices_, one.core_sample_indices_)


_BOUND = __import__("threading").local()


def _bind_tag(tag):
    _BOUND.tag = tag


def _bound_tag():
    return getattr(_BOUND, "tag", None)


def test_thread_cluster_binds_each_worker_and_moves_data_by_reference():
    """The GPU workers' cluster, with a CPU stand-in for binding a GPU to each worker."""
    from skyjoin.distributed.workers import thread_cluster

    X = np.random.default_rng(4).uniform(0, 1, (100_000, 2))
    with thread_cluster([("a", ("A",)), ("b", ("B",))], _bind_tag) as cl, \
            distributed.Client(cl) as c:
        info = c.scheduler_info(n_workers=-1)["workers"]
        assert len(info) == 2 and all(a.startswith("inproc://") for a in info)
        assert all(not w["memory_limit"] for w in info.values())
        tags = {c.submit(_bound_tag, workers=[w], pure=False).result() for w in info}
        assert tags == {"A", "B"}
        f = c.scatter(X, hash=False)
        back = c.submit(lambda a: a[10:], f).result()
        assert np.shares_memory(back, X)
        assert sd.self_join(X, 0.01, client=c, device="cpu") == sj.self_join(X, 0.01,
                                                                            device="cpu")


def test_thread_workers_see_the_callers_array_without_copy():
    """Blocks scattered to thread workers are views of the caller's array: stacked()
    views them as one array again; blocks from elsewhere are concatenated."""
    from skyjoin.distributed.blocks import stacked

    X = np.random.default_rng(3).uniform(0, 10, (5000, 3))
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                  dashboard_address=":0") as cl, distributed.Client(cl) as c:
        futs = c.scatter([X[a:a + 1000] for a in range(0, 5000, 1000)], hash=False)
        shared, equal = c.submit(lambda *b: (np.shares_memory(stacked(b, 3, X.dtype), X),
                                             np.array_equal(stacked(b, 3, X.dtype), X)),
                                 *futs).result()
        assert shared and equal
        got = sd.self_join(X, 0.7, client=c, device="cpu")
        assert got == sj.self_join(X, 0.7, device="cpu")
    parts = [X[:1000].copy(), X[1000:3000].copy(), X[3000:].copy()]
    out = stacked(parts, 3, X.dtype)
    assert not np.shares_memory(out, parts[0]) and np.array_equal(out, X)
    gap = [X[:1000], X[2000:3000]]         # same buffer, not adjacent: copied
    np.testing.assert_array_equal(stacked(gap, 3, X.dtype), np.vstack(gap))
    assert stacked([X[:0]], 3, X.dtype).shape == (0, 3)


# --------------------------------------------------------------------------
# the partition logic in this process, on many partitions (no cluster)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_route_pieces_equal_route_block(seed):
    """The parallel routing kernel against the NumPy reference, on 1- and 2-level
    plans, points on cuts (lattice), float32 blocks and a block offset."""
    from skyjoin.distributed.routing import route_pieces
    from _partition_reference import route_block
    from skyjoin.distributed.partition import halo_width, plan_partitions

    rng = np.random.default_rng(300 + seed)
    d = 1 + seed % 3
    X = lattice(rng, 5000, d, side=20) if seed % 2 else mixed_blobs(rng, 5000, d)
    if seed == 7:
        X = X.astype(np.float32)
    parts = int(rng.integers(1, 25))
    h = halo_width(float(rng.choice([0.3, 1.0, 2.0])), d, X.min(0), X.max(0))
    plan = plan_partitions(X[rng.choice(len(X), 400)].astype(np.float64), X.min(0), X.max(0),
                           parts, h * (1 + seed % 2), len(X))
    width = h * (1 + seed % 2)
    got = route_pieces(X, 1000, plan, width)
    ref = route_block(plan, X, width)
    assert len(got) == len(ref) == plan.n_partitions
    for (oi, oX, hi, hX), (o, hh) in zip(got, ref):
        np.testing.assert_array_equal(oi, o + 1000)
        np.testing.assert_array_equal(oX, X[o])
        np.testing.assert_array_equal(hi, hh + 1000)
        np.testing.assert_array_equal(hX, X[hh])
        assert oX.dtype == X.dtype


def _partitioned_join(plan, X, h, eps):
    """The table of the join of X through the partitions of ``plan`` (halo h),
    each partition joined on its own on the CPU."""
    from skyjoin.distributed.join import partition_rows
    from skyjoin.distributed.owned_rows import assemble_table
    from _partition_reference import route_block

    rows = []
    for own, halo in route_block(plan, X, h):
        rows.append((own, *partition_rows(own, X[own], halo, X[halo], eps, include_self=False,
                                          sort=True, device="cpu", precision="float64",
                                          n_total=len(X))))
    return assemble_table(rows, len(X), True)


@pytest.mark.parametrize("seed", range(6))
def test_partitions_in_process(seed):
    from skyjoin.distributed.halo_dbscan import merge_partitions as merge_local_clusters
    from skyjoin.distributed.halo_dbscan import owned_labels as _final_labels
    from skyjoin.distributed.halo_dbscan import partition_dbscan as local_clusters
    from _partition_reference import route_block
    from skyjoin.distributed.partition import halo_width, plan_partitions

    rng = np.random.default_rng(100 + seed)
    kind = seed % 3
    if kind == 0:
        X = long_clusters(rng, 1200)
    elif kind == 1:
        X = lattice(rng, 1000, 1 + seed % 3, side=int(rng.integers(6, 30)))
    else:
        X = mixed_blobs(rng, 1200, int(rng.integers(1, 4)))
    n, d = X.shape
    eps = float(rng.choice([0.3, 0.5, 1.0, 1.5]))
    ms = int(rng.integers(1, 10))
    parts = int(rng.integers(8, 30))
    h = halo_width(eps, d, X.min(0), X.max(0))
    sample = X[rng.choice(n, 300)]
    plan = plan_partitions(sample, X.min(0), X.max(0), parts, h, n)
    assert _partitioned_join(plan, X, h, eps) == sj.self_join(X, eps, device="cpu")
    plan = plan_partitions(sample, X.min(0), X.max(0), parts, 2 * h, n)
    states = [local_clusters(own, X[own], halo, X[halo], plan, p, h, eps, ms, "cpu", "float64")
              for p, (own, halo) in enumerate(route_block(plan, X, 2 * h))]
    labels_of = merge_local_clusters([(s["reps"], s["is_node"], s["edge_comp"], s["edge_id"])
                                      for s in states])
    labels = np.full(n, -2)
    for s, lab in zip(states, labels_of):
        ids, lab_p, _ = _final_labels(s, lab)
        labels[ids] = lab_p
    ref = sj.DBSCAN(eps=eps, min_samples=ms, device="cpu").fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)


@pytest.mark.parametrize("seed", range(4))
def test_box_masks_equal_routing(seed):
    """owned_by / in_widened_box (the GPU workers' selection) give the routing's partitions."""
    from _partition_reference import owner_of, route_block
    from skyjoin.distributed.partition import (halo_width, in_widened_box, owned_by,
                                               plan_partitions)

    rng = np.random.default_rng(300 + seed)
    X = mixed_blobs(rng, 3000, 1 + seed % 3) if seed % 2 else lattice(rng, 2000, 2, side=25)
    n, d = X.shape
    eps = float(rng.choice([0.3, 0.7, 1.5]))
    h = halo_width(eps, d, X.min(0), X.max(0))
    plan = plan_partitions(X[rng.choice(n, 500)], X.min(0), X.max(0), int(rng.integers(2, 12)),
                           h, n)
    owner = owner_of(plan, X)
    from scipy.spatial import cKDTree

    tree = cKDTree(X)
    for p, (own, halo) in enumerate(route_block(plan, X, h)):
        mine = owned_by(plan, p, X)
        np.testing.assert_array_equal(np.flatnonzero(mine), np.flatnonzero(owner == p))
        np.testing.assert_array_equal(np.flatnonzero(mine), own)
        widened = np.flatnonzero(in_widened_box(plan, p, X, h) & ~mine)
        np.testing.assert_array_equal(widened, halo)
        # every neighbour of an owned point is owned or in the halo
        near = [np.asarray(r, dtype=np.int64) for r in tree.query_ball_point(X[own], eps)]
        near = np.unique(np.concatenate(near + [np.zeros(0, np.int64)]))
        assert np.isin(near, np.concatenate([own, widened])).all()


@pytest.mark.parametrize("n", [1, 7, 65536 * 3 + 5, 1_000_003])
def test_column_bounds_equal_numpy(n):
    """The parallel bounds behind the plans (and the grids) equal NumPy's min / max."""
    from skyjoin.index.grid_kernels import column_bounds, parallel_column_bounds

    X = np.random.default_rng(n).normal(size=(n, 3)) * 1e3
    X[n // 2, 1] = -5e6           # an extreme row inside one chunk
    for A, k in ((X, 3), (X.astype(np.float32), 2)):
        for lo, hi in (column_bounds(A, k), parallel_column_bounds(A, k, chunk_rows=65536)):
            np.testing.assert_array_equal(lo, A[:, :k].min(axis=0).astype(np.float64))
            np.testing.assert_array_equal(hi, A[:, :k].max(axis=0).astype(np.float64))
        lo, hi, finite = parallel_column_bounds(A, k, chunk_rows=65536, check_finite=True)
        assert finite
        np.testing.assert_array_equal(lo, A[:, :k].min(axis=0).astype(np.float64))
        np.testing.assert_array_equal(hi, A[:, :k].max(axis=0).astype(np.float64))
    # a NaN or inf anywhere, in any column (also one the bounds do not read), is seen
    rng = np.random.default_rng(n)
    for bad in (np.nan, np.inf, -np.inf):
        B = rng.normal(size=(n, 3))
        B[int(rng.integers(0, n)), int(rng.integers(0, 3))] = bad
        for chunk in (65536, 1 << 20):
            assert not parallel_column_bounds(B, 2, chunk_rows=chunk, check_finite=True)[2]


@pytest.mark.parametrize("n", [0, 1, 9, 65536 * 5 + 3, 2_000_001])
def test_prefix_sum_equals_cumsum(n):
    """The shared table's parallel row pointers equal NumPy's cumulative sum."""
    from skyjoin.distributed._kernels import prefix_sum

    counts = np.random.default_rng(n).integers(0, 100, size=n).astype(np.int64)
    indptr = np.full(n + 1, -7, dtype=np.int64)
    prefix_sum(counts, indptr)
    np.testing.assert_array_equal(indptr, np.concatenate([[0], np.cumsum(counts)]))



@pytest.mark.parametrize("n", [0, 1, 9, 65536 * 5 + 3, 2_000_001])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_true_indices_equal_flatnonzero(n, density):
    """The parallel core indices equal NumPy's (all false, some, all true; a true
    or false last flag)."""
    from skyjoin.distributed._kernels import true_indices

    mask = np.random.default_rng(n).random(n) < density
    for m in (mask, np.r_[mask, True], np.r_[mask, False]):
        got = true_indices(m)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.flatnonzero(m))

def test_bench_large_cases_keep_the_neighbours_per_point():
    """The 200M GPU cases: ten times the points of the 20M ones, in the same box, with eps
    scaled so that the area of an eps-disc holds as many points; CPU runs refuse them."""
    from skyjoin.bench.distributed import case_specs

    base = {op: (n, eps, m) for _, op, n, _, eps, m in case_specs("gpu", False)}
    large = case_specs("gpu", False, large=True)
    assert [op for _, op, *_ in large] == ["counts", "device", "parquet", "dbscan", "join"]
    for name, op, n, d, eps, m in large:
        n0, eps0, m0 = base["join" if op in ("device", "parquet") else op]
        assert n == 10 * n0 and d == 2 and m == m0 and name.endswith("-200M")
        # the Parquet case: a fortieth of the neighbours, so that its files fit a disk
        share = 1 / 40 if op == "parquet" else 1.0
        assert n * eps ** 2 == pytest.approx(share * n0 * eps0 ** 2, rel=1e-12)
    with pytest.raises(ValueError, match="GPU"):
        case_specs("cpu", False, large=True)


def test_local_cluster_device_follows_auto(monkeypatch):
    """--local-cluster with --device auto (or SKYJOIN_DEVICE) starts GPU workers
    on a GPU host: the device is resolved, not compared as a raw string."""
    import skyjoin._core.device as device_mod
    from skyjoin.cli.distributed import local_cluster_device

    monkeypatch.delenv("SKYJOIN_DEVICE", raising=False)
    monkeypatch.setattr(device_mod, "_probe_gpu", lambda: (True, "a fake GPU"))
    assert local_cluster_device("auto") == "gpu"
    assert local_cluster_device(None) == "gpu"
    assert local_cluster_device("cpu") == "cpu"
    monkeypatch.setenv("SKYJOIN_DEVICE", "cpu")
    assert local_cluster_device(None) == "cpu"
    monkeypatch.setattr(device_mod, "_probe_gpu", lambda: (False, "no GPU"))
    monkeypatch.delenv("SKYJOIN_DEVICE")
    assert local_cluster_device("auto") == "cpu"


def test_bench_gpu_counts():
    """The GPU counts the distributed bench runs: 1, 2, 4, 8 up to the host's, or those
    asked for, never more than the host has."""
    from skyjoin.bench.distributed import gpu_counts

    assert gpu_counts(1) == [1]
    assert gpu_counts(2) == [1, 2]
    assert gpu_counts(6) == [1, 2, 4]
    assert gpu_counts(8) == [1, 2, 4, 8]
    assert gpu_counts(4, [2, 1, 2]) == [1, 2]
    with pytest.raises(ValueError, match="has 2 GPU"):
        gpu_counts(2, [4])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_box_selection_matches_the_partition_rule(dtype):
    """What a GPU partition task copies (``_kernels.box_counts``/``box_fill``): the
    points its box owns, then those in its widened box it does not own, each in
    row order, against ``partition.owned_by`` / ``in_widened_box`` in NumPy, with
    points on the cuts and on the widened edges."""
    from skyjoin.distributed._kernels import box_counts, box_fill
    from skyjoin.distributed.partition import in_widened_box, owned_by, plan_partitions

    rng = np.random.default_rng(8)
    X = rng.uniform(0, 10, (20000, 3)).astype(dtype)
    plan = plan_partitions(X[::7].astype(np.float64), X.min(0), X.max(0), 6, 0.3,
                           n_points=len(X))
    for p in range(plan.n_partitions):       # put points exactly on the cuts and edges
        lo, hi = plan.box(p)
        for k, dim in enumerate(plan.dims):
            for v in (lo[k], hi[k], lo[k] - 0.3, hi[k] + 0.3):
                if np.isfinite(v):
                    X[rng.integers(0, len(X), 20), dim] = v
    dims = np.asarray(plan.dims, dtype=np.int64)
    for p in range(plan.n_partitions):
        own_ref = np.flatnonzero(owned_by(plan, p, X))
        halo_ref = np.flatnonzero(in_widened_box(plan, p, X, 0.3) & ~owned_by(plan, p, X))
        lo, hi = (np.asarray(a, np.float64) for a in plan.box(p))
        for chunks in (1, 7):
            own, halo = box_counts(X, dims, lo, hi, 0.3, chunks)
            assert own.sum() == len(own_ref) and halo.sum() == len(halo_ref)
            n_own, m = int(own.sum()), int(own.sum() + halo.sum())
            own_at = np.concatenate([[0], np.cumsum(own)[:-1]]).astype(np.int64)
            halo_at = (n_own + np.concatenate([[0], np.cumsum(halo)[:-1]])).astype(np.int64)
            out_X, out_ids = np.empty((m, 3), dtype), np.empty(m, np.int64)
            box_fill(X, dims, lo, hi, 0.3, own_at, halo_at, out_X, out_ids)
            np.testing.assert_array_equal(out_ids, np.concatenate([own_ref, halo_ref]))
            np.testing.assert_array_equal(out_X, X[out_ids])


def test_bench_task_seconds_groups_keys():
    """The bench's per-task seconds: skyjoin's keys by their kind, Dask's own (and a
    collection's chunk keys, tuples) by their name prefix, transfers apart."""
    from skyjoin.bench.distributed import task_seconds

    def rec(key, action, t):
        return {"key": key, "startstops": [{"action": action, "start": 0.0, "stop": t}]}

    stream = [rec(("array-sum-394a26c027585db8d05d51715400dc0b", 5), "compute", 1.0),
              rec(("array-sum-394a26c027585db8d05d51715400dc0b", 6), "compute", 2.0),
              rec("skyjoin-join-0123456789-route-3", "compute", 0.5),
              rec("skyjoin-join-0123456789-route-4", "transfer", 0.25)]
    assert task_seconds(stream) == {"array-sum": 3.0, "route": 0.5, "route (transfer)": 0.25}


def test_registry_require_names_what_is_gone():
    """A worker's shared object: returned while its call holds it, a RuntimeError
    naming it once the call dropped it."""
    from skyjoin.distributed.registry import drop, publish, require

    table = np.arange(3)
    publish("skyjoin-test-require", indptr=table)
    try:
        assert require("skyjoin-test-require", "indptr", "table") is table
    finally:
        drop("skyjoin-test-require")
    with pytest.raises(RuntimeError, match="the shared table is gone"):
        require("skyjoin-test-require", "indptr", "table")
    with pytest.raises(RuntimeError, match="the shared counts are gone"):
        require("skyjoin-test-require", "counts")


def test_host_counts_views_the_array():
    """The in-process GPU path's counts: a Dask array over views of the host array,
    scattered to thread workers, chunked by row_ranges, equal to it when
    computed; the chunks share its memory, and a computation on the array
    sends no graph of the array's size."""
    import warnings

    from skyjoin.distributed.count_chunks import CHUNK_ROWS, host_counts, row_ranges
    from skyjoin.distributed.workers import thread_cluster

    with thread_cluster([("a", ("A",)), ("b", ("B",))], _bind_tag) as cl, \
            distributed.Client(cl) as c:
        for n, parts in ((0, 2), (7, 3), (1000, 2), (CHUNK_ROWS + 5, 2)):
            counts = np.random.default_rng(n).integers(0, 100, n).astype(np.int64)
            arr = host_counts(c, counts, parts)
            assert type(arr).__module__.startswith("dask.array") and arr.dtype == np.int64
            assert arr.chunks == (tuple(hi - lo for lo, hi in row_ranges(n, parts)),)
            # where each chunk lies, read on the workers: inside the caller's array
            base = counts.__array_interface__["data"][0]
            where = arr.map_blocks(lambda b: np.array([b.__array_interface__["data"][0]]),
                                   chunks=((1,) * len(arr.chunks[0]),)).compute()
            assert n == 0 or (where - base).tolist() == [8 * lo for lo, _ in row_ranges(n, parts)]
            with warnings.catch_warnings():
                warnings.simplefilter("error")          # "Sending large graph ..." fails
                np.testing.assert_array_equal(c.compute(arr).result(), counts)
                assert int(arr.sum().compute()) == int(counts.sum())


@pytest.mark.parametrize("d", [1, 2])
def test_partition_shares_are_held_and_exact(d):
    """Boxes planned with shares (the Parquet parts of GPU worker threads:
    each GPU's parts shrinking by PART_SIZE_RATIO) hold those shares of the
    points, and the partitioned join is still the single-machine join."""
    from skyjoin.distributed.partition import halo_width, owned_by, plan_partitions
    from skyjoin.distributed.plan import PART_SIZE_RATIO

    rng = np.random.default_rng(40 + d)
    X = rng.uniform(0, 50, (60_000, d))
    n = len(X)
    W = 2

    def share(p):
        return PART_SIZE_RATIO ** (p // W)

    eps = 0.4
    h = halo_width(eps, d, X.min(0), X.max(0))
    plan = plan_partitions(X[rng.choice(n, 20_000)], X.min(0), X.max(0), 6, h, n, share=share)
    P = plan.n_partitions
    assert P == 6
    want = np.array([share(p) for p in range(P)])
    want /= want.sum()
    got = np.array([np.count_nonzero(owned_by(plan, p, X)) for p in range(P)]) / n
    np.testing.assert_allclose(got, want, atol=0.02)
    assert got[0] > got[2] > got[4] and got[1] > got[3] > got[5]
    assert _partitioned_join(plan, X, h, eps) == sj.self_join(X, eps, device="cpu")


def test_the_device_is_resolved_once_by_the_workers(monkeypatch):
    """workers_device: "cpu" at once; otherwise one client.run whose answers
    must agree; tasks then only compare the resolved string (on_gpu)."""
    from types import SimpleNamespace

    import skyjoin._core.device as device_mod
    from skyjoin.distributed.plan import in_process_gpu_path, on_gpu, workers_device

    def fake(answers):
        calls = []

        def run(fn, device):
            calls.append(device)
            return dict(answers)
        return SimpleNamespace(run=run, calls=calls, scheduler_info=lambda n_workers=-1: {
            "workers": {a: {} for a in answers}})

    c = fake({"tcp://a": "gpu", "tcp://b": "gpu"})
    assert workers_device(c, "CPU") == "cpu" and c.calls == []
    assert workers_device(c, None) == "gpu" and c.calls == [None]
    assert workers_device(c, "auto") == "gpu"
    with pytest.raises(ValueError, match=r"1 to 'cpu', 1 to 'gpu'.*device='cpu'"):
        workers_device(fake({"tcp://a": "gpu", "tcp://b": "cpu"}), None)
    with pytest.raises(ValueError, match="device must be one of"):
        workers_device(c, "tpu")
    monkeypatch.delenv("SKYJOIN_DEVICE", raising=False)
    monkeypatch.setattr(device_mod, "_probe_gpu", lambda: (False, "no GPU"))
    assert workers_device(fake({}), None) == "cpu"          # no worker yet: resolved here
    assert on_gpu("gpu") and not on_gpu("cpu")
    for unresolved in (None, "auto"):
        with pytest.raises(ValueError, match="resolved device"):
            on_gpu(unresolved)
    assert not in_process_gpu_path(c, "cpu")


def test_distributed_skyline_runs_one_reported_plan(client):
    from skyjoin._core.plans import recording

    X = np.random.default_rng(4).integers(0, 50, (3000, 3)).astype(np.float64)
    with recording() as plans:
        got = sd.skyline(X, client=client, sense=["min", "max", "min"], distinct=True,
                         block_rows=700)
    np.testing.assert_array_equal(
        got, single_skyline(X, sense=["min", "max", "min"], distinct=True, device="cpu"))
    assert [(p.device, p.algorithm, p.n, p.d, p.distinct) for p in plans] == [
        ("cpu", "skyalign", 3000, 3, True)]


def test_part_shares_shrink_per_gpu_and_balance():
    from types import SimpleNamespace

    from skyjoin.distributed.plan import PART_SIZE_RATIO, part_shares, worker_of_partition

    fake = SimpleNamespace(scheduler_info=lambda n_workers=-1: {"workers": {"a": {}, "b": {}}})
    share = part_shares(fake)
    where = worker_of_partition(fake, 6)
    for w in ("a", "b"):
        mine = [share(p) for p in range(6) if where[p] == w]      # in the order it runs them
        assert mine == [1.0, PART_SIZE_RATIO, PART_SIZE_RATIO ** 2]
