"""Outputs of skyjoin.distributed.self_join that stay on the workers.

Counts: a Dask array whose chunks exist on the workers when the call
returns, equal to cKDTree's neighbour counts.  Parquet parts: written by the
workers, moved into the folder all at once, equal once read back to the
single-machine table (itself checked against brute force and cKDTree in the
join tests), for several numbers of partitions, with partitions that have
no pairs; a worker process killed in the middle of a part's write leaves no
file behind and the result is complete.
"""

import glob
import os
import signal
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")

import skyjoin as sj  # noqa: E402
import skyjoin.distributed as sd  # noqa: E402
from skyjoin.distributed.count_chunks import (CHUNK_ROWS, assemble_chunk,  # noqa: E402
                                              row_ranges)
from skyjoin.distributed.part_files import PartWriter, check_folder, publish, staging  # noqa: E402


def blobs(rng, n, d=2):
    """Gaussian blobs plus uniform noise."""
    centres = rng.uniform(0, 10, size=(4, d))
    k = n * 3 // 4
    X = np.vstack([centres[rng.integers(0, 4, k)] + rng.normal(0, 0.6, size=(k, d)),
                   rng.uniform(-1, 11, size=(n - k, d))])
    return X[rng.permutation(n)]


def kdtree_counts(X, eps):
    """Neighbours within eps of each point, itself excluded (scipy's cKDTree)."""
    from scipy.spatial import cKDTree

    return cKDTree(X).query_ball_point(X, eps, return_length=True) - 1


def part_names(folder):
    return sorted(os.listdir(folder))


# --------------------------------------------------------------------------
# counts: a Dask array built on the workers
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n,parts", [(0, 3), (1, 1), (10, 3), (1000, 7), (2**24 + 5, 1),
                                     (5 * 2**24, 2)])
def test_row_ranges_cover_the_rows_in_order(n, parts):
    ranges = row_ranges(n, parts)
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) <= CHUNK_ROWS and len(set(sizes[:-1])) <= 1 and sizes[-1] <= sizes[0]
    assert len(ranges) <= max(parts, -(-n // CHUNK_ROWS), 1)


def test_assemble_chunk_refuses_a_missing_or_doubled_row():
    ids = np.array([3, 5]), np.array([1, 2])
    other = np.array([4, 6]), np.array([7, 0])
    np.testing.assert_array_equal(assemble_chunk(3, 7, ids, other), [1, 7, 2, 0])
    with pytest.raises(RuntimeError, match="not one each"):
        assemble_chunk(3, 7, ids)
    with pytest.raises(RuntimeError, match="not one each"):
        assemble_chunk(3, 7, ids, other, (np.array([4]), np.array([9])))


@pytest.mark.parametrize("parts", [1, 2, 5, 8])
def test_counts_are_a_dask_array_equal_to_kdtree(client, parts):
    import dask.array as da

    rng = np.random.default_rng(parts)
    X = blobs(rng, 3000)
    eps = 0.4
    tm: dict = {}
    got = sd.self_join(X, eps, client=client, device="cpu", output="counts",
                       n_partitions=parts, block_rows=700, timings=tm)
    assert isinstance(got, da.Array)
    assert got.dtype == np.int64 and got.shape == (len(X),)
    # consecutive row ranges, one per partition's share of the rows
    assert got.chunks == (tuple(hi - lo for lo, hi in row_ranges(len(X), tm["n_partitions"])),)
    # every chunk already exists on the workers: the array holds finished futures
    futs = distributed.futures_of(got)
    assert len(futs) == len(got.chunks[0]) and all(f.status == "finished" for f in futs)
    expect = kdtree_counts(X, eps)
    np.testing.assert_array_equal(got.compute(), expect)
    assert int(got.sum().compute()) == int(expect.sum())
    self_too = sd.self_join(X, eps, client=client, device="cpu", output="counts",
                            include_self=True, n_partitions=parts)
    np.testing.assert_array_equal(self_too.compute(), expect + 1)


def test_counts_of_no_points_and_of_points_without_neighbours(client):
    import dask.array as da

    empty = sd.self_join(np.zeros((0, 2)), 0.5, client=client, device="cpu", output="counts")
    assert isinstance(empty, da.Array) and empty.shape == (0,)
    assert empty.compute().shape == (0,)
    far = np.arange(40, dtype=np.float64).reshape(20, 2) * 10.0
    got = sd.self_join(far, 0.5, client=client, device="cpu", output="counts", n_partitions=4)
    np.testing.assert_array_equal(got.compute(), np.zeros(20, dtype=np.int64))


# --------------------------------------------------------------------------
# Parquet parts: all written, then moved into the folder
# --------------------------------------------------------------------------
@pytest.mark.parametrize("parts", [1, 3, 8])
def test_partitioned_parquet_reads_back_equal_to_single_machine(client, tmp_path, parts):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(40 + parts)
    # a dense blob and a sparse lattice (spacing 2 > eps): the lattice's partitions
    # have no pairs and write no file
    lattice = np.stack(np.meshgrid(np.arange(30), np.arange(30)), -1).reshape(-1, 2) * 2.0
    X = np.vstack([rng.normal(-20, 1.0, (1500, 2)), lattice])[rng.permutation(2400)]
    eps = 0.3
    ref = sj.self_join(X, eps, device="cpu")
    tm: dict = {}
    for sort in (True, False):
        out = tmp_path / f"pairs-{sort}"
        res = sd.self_join(X, eps, client=client, device="cpu", out=out, sort=sort,
                           n_partitions=parts, timings=tm)
        assert isinstance(res, sd.PartitionedPairs) and res.sorted == sort
        assert part_names(out) == sorted(os.path.basename(f) for f in res.files)
        assert all(f.startswith("part-") and f.endswith(".parquet") for f in part_names(out))
        assert sum(pq.read_table(f).num_rows for f in res.files) == res.n_pairs == ref.n_pairs
        got = res.to_table()
        assert (got if sort else got.sort_rows()) == ref
    if parts == 8:
        assert 0 < len(res.files) < tm["n_partitions"]


def test_staging_folder_goes_with_a_failed_call(tmp_path):
    out = check_folder(tmp_path / "pairs")
    with pytest.raises(KeyError):
        with staging(out, "call-a") as stage:
            open(os.path.join(stage, "part-00000.parquet"), "wb").close()
            open(os.path.join(stage, ".part-00001.0123456789ab.partial.parquet"), "wb").close()
            raise KeyError("a task failed")
    assert os.listdir(out) == []
    # another call's files are never touched; a finished call publishes its parts only
    open(os.path.join(out, ".other-call-leftover"), "wb").close()
    with staging(out, "call-b") as stage:
        done = os.path.join(stage, "part-00002.parquet")
        open(done, "wb").close()
        open(os.path.join(stage, ".part-00003.0123456789ab.partial.parquet"), "wb").close()
        files = publish(stage, [(None, 0), (done, 5)])
    assert files == [os.path.join(out, "part-00002.parquet")]
    assert part_names(out) == [".other-call-leftover", "part-00002.parquet"]
    with pytest.raises(ValueError, match="empty folder"):
        check_folder(out)


# --------------------------------------------------------------------------
# a worker killed in the middle of a part's write
# --------------------------------------------------------------------------
class WriterKiller(threading.Thread):
    """Kills (SIGKILL) the worker process that holds a part's temporary file open,
    the first time one is seen in a hidden folder of ``folder``."""

    def __init__(self, folder, pids):
        super().__init__(daemon=True)
        self.folder = os.path.realpath(folder)
        self.pids = list(pids)
        self.done = threading.Event()
        self.killed = None          # (pid, temporary file)
        self.left = False           # the killed writer's temporary file was left behind

    def run(self):
        while not self.done.is_set():
            for tmp in glob.glob(os.path.join(self.folder, ".*", ".part-*.partial.parquet")):
                pid = self.writer_of(tmp)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    self.killed = (pid, tmp)
                    time.sleep(0.2)
                    self.left = os.path.exists(tmp)
                    return
            time.sleep(0.0005)

    def writer_of(self, path):
        for pid in self.pids:
            fds = f"/proc/{pid}/fd"
            try:
                names = os.listdir(fds)
            except OSError:
                continue
            for fd in names:
                try:
                    if os.readlink(os.path.join(fds, fd)) == path:
                        return pid
                except OSError:
                    pass
        return None


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds the writer through /proc")
@pytest.mark.parametrize("source", ["array", "file"])
def test_killed_worker_during_a_partitioned_write(client, tmp_path, source):
    """An in-memory array (scattered: the call may run again if the killed worker
    took the last copy of a block) or a file the workers read (Dask reads the
    lost blocks again); either way Dask runs the killed write again elsewhere."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(44)
    n, neighbours = 300_000, 30
    X = rng.uniform(0, 1, (n, 2))
    eps = float(np.sqrt(neighbours / (np.pi * n)))
    ref = sj.self_join(X, eps, device="cpu")
    if source == "file":
        np.save(tmp_path / "points.npy", X)
    data = X if source == "array" else str(tmp_path / "points.npy")
    for attempt in range(4):        # the kill must land inside a write: try again if not
        client.wait_for_workers(2, timeout=60)
        pids = client.run(os.getpid).values()
        out = tmp_path / f"pairs-{attempt}"
        os.makedirs(out)
        killer = WriterKiller(out, pids)
        killer.start()
        try:
            res = sd.self_join(data, eps, client=client, device="cpu", out=out,
                               n_partitions=8, retries=3)
        finally:
            killer.done.set()
            killer.join()
        if killer.killed and killer.left:
            break
    assert killer.killed, "no worker was caught writing a part"
    assert killer.left, "the killed writer left no temporary file"
    client.wait_for_workers(2, timeout=60)      # the killed worker was replaced
    assert killer.killed[0] not in client.run(os.getpid).values()
    # only complete parts, no temporary file nor hidden folder of the call
    assert part_names(out) == sorted(os.path.basename(f) for f in res.files)
    assert all(f.startswith("part-") and f.endswith(".parquet") for f in part_names(out))
    assert sum(pq.read_table(f).num_rows for f in res.files) == res.n_pairs == ref.n_pairs
    assert res.to_table() == ref


def test_part_written_batch_by_batch_reads_back_equal(tmp_path):
    """A part written as a join hands over its row batches (PartWriter.rows,
    the GPU join's rows_ready) holds every pair once, in order, with the
    rows' global ids; without pairs, or on an error, no file is left."""
    rng = np.random.default_rng(5)
    X = blobs(rng, 3000)
    eps = 0.2
    nt = sj.self_join(X, eps, device="cpu")
    ids = rng.permutation(10_000)[:3000].astype(np.int64)
    cuts = [0, 1, 700, 700, 2999, 3000]
    with PartWriter(str(tmp_path), 3, (10_000, 10_000), True, ids) as w:
        for r0, r1 in zip(cuts[:-1], cuts[1:]):
            w.rows(r0, r1, nt.indptr, nt.indices)
        done = w.closing()                  # as the GPU threads' parts finish
        assert w.closing() is done
        path, pairs = done.result()
    assert os.path.basename(path) == "part-00003.parquet" and pairs == nt.n_pairs
    t = pq.read_table(path)
    assert np.array_equal(t["i"].to_numpy(), np.repeat(ids, np.diff(nt.indptr)))
    assert np.array_equal(t["j"].to_numpy(), nt.indices)
    with PartWriter(str(tmp_path), 4, (10, 10), True) as w:
        w.rows(0, 2, np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.int32))
        assert w.close() == (None, 0)
    with pytest.raises(RuntimeError):
        with PartWriter(str(tmp_path), 5, (10_000, 10_000), True, ids) as w:
            w.rows(0, 700, nt.indptr, nt.indices)
            raise RuntimeError("the join failed")
    w = PartWriter(str(tmp_path), 6, (10_000, 10_000), True, ids)
    w.rows(0, 700, nt.indptr, nt.indices[:5])          # the writer's error comes back
    with pytest.raises(ValueError, match="indices must hold"):
        w.close()
    assert sorted(os.listdir(tmp_path)) == ["part-00003.parquet"]
