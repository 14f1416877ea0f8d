"""Worker processes compile Numba kernels, with the thread count local_cluster promises.

A worker process imports Numba before the Nanny applies its ``env`` (the
spawn start method imports the caller's main module first), so a Numba
thread count passed as ``NUMBA_NUM_THREADS`` in that ``env`` made Numba
refuse to compile on the workers once their thread pool had started.  The
regression test runs a script in a fresh Python process, with an empty Numba
cache (every kernel compiles on the workers) and a Numba pool of 2 threads
while the workers are promised 1, and compares its distributed join and counts
with the single-machine join run here (DBSCAN's kernels compile on the
workers the same way).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import numba  # noqa: E402

import skyjoin as sj  # noqa: E402
import skyjoin.distributed as sd  # noqa: E402

# The main module imports Numba at its top, as user scripts (and the bench) do:
# each worker process, which imports it again, has Numba before its Nanny env.
SCRIPT = """
import json
import sys

import numba
import numpy as np

import distributed
import skyjoin.distributed as sd


def main(data, out):
    X = np.load(data)
    with sd.local_cluster(2, numba_threads=1, silence_logs=40) as cluster, \\
            distributed.Client(cluster) as client:
        pairs = sd.self_join(X, 0.4, client=client, device="cpu", n_partitions=4)
        counts = sd.self_join(X, 0.4, client=client, device="cpu", output="counts",
                              n_partitions=4).compute()
        workers = sorted(client.run(numba.get_num_threads))
        threads = {
            "pool": list(client.run(lambda: numba.config.NUMBA_NUM_THREADS).values()),
            "event_loop": list(client.run(numba.get_num_threads).values()),
            "task": [client.submit(numba.get_num_threads, workers=[w], pure=False).result()
                     for w in workers],
        }
    with sd.local_cluster(2, numba_threads=1, processes=False) as cluster, \\
            distributed.Client(cluster) as client:
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        threads["thread_workers_task"] = [
            client.submit(numba.get_num_threads, workers=[w], pure=False).result()
            for w in workers]
    np.savez(out, pairs=pairs.pairs(), counts=counts)
    print(json.dumps(threads))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
"""


def blobs(rng, n):
    """2-D Gaussian blobs plus uniform noise."""
    centres = rng.uniform(0, 10, size=(5, 2))
    k = n * 4 // 5
    X = np.vstack([centres[rng.integers(0, 5, k)] + rng.normal(0, 0.5, size=(k, 2)),
                   rng.uniform(-1, 11, size=(n - k, 2))])
    return X[rng.permutation(n)]


@pytest.mark.slow
def test_workers_compile_with_the_promised_thread_count(tmp_path):
    X = blobs(np.random.default_rng(3), 3000)
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "script.py").write_text(SCRIPT)
    src = os.path.dirname(os.path.dirname(os.path.abspath(sj.__file__)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"), NUMBA_NUM_THREADS="2",
               PYTHONPATH=os.pathsep.join([src] + [p for p in [os.environ.get("PYTHONPATH")]
                                                   if p]))
    run = subprocess.run([sys.executable, str(tmp_path / "script.py"), str(tmp_path / "X.npy"),
                          str(tmp_path / "out.npz")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    threads = json.loads(run.stdout.strip().splitlines()[-1])
    assert threads == {"pool": [2, 2], "event_loop": [1, 1], "task": [1, 1],
                       "thread_workers_task": [1, 1]}

    got = np.load(tmp_path / "out.npz")
    ref = sj.self_join(X, 0.4, device="cpu")
    assert ref.n_pairs > len(X)
    np.testing.assert_array_equal(got["pairs"], ref.pairs())
    np.testing.assert_array_equal(got["counts"], ref.counts())


def test_local_cluster_rejects_thread_counts_it_cannot_give():
    pool = numba.config.NUMBA_NUM_THREADS
    for bad in (0, -1, pool + 1, True):
        with pytest.raises(ValueError, match="numba_threads"):
            sd.local_cluster(2, numba_threads=bad)
    with pytest.raises(ValueError, match="NUMBA_NUM_THREADS"):
        sd.local_cluster(2, env={"NUMBA_NUM_THREADS": "1"})


def test_default_thread_count_divides_the_pool():
    from skyjoin.distributed.workers import numba_threads_per_worker

    pool = numba.config.NUMBA_NUM_THREADS
    assert numba_threads_per_worker(None, 1) == pool
    assert numba_threads_per_worker(None, 2) == max(1, pool // 2)
    assert numba_threads_per_worker(None, pool + 3) == 1
    assert numba_threads_per_worker(1, 7) == 1
