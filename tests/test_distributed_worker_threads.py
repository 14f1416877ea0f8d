"""Tasks run straight on the Dask workers' threads (``skyjoin.distributed.worker_threads``).

On a cluster of worker threads (the CPU stands in for the GPUs: the class
only places functions on threads), each task must run on the thread of the
worker it is sent to, wait for the futures it is given, be retried as
asked, and the steps of the in-process path (every worker's task of one
step waiting for every task of the step before) must complete.
"""

from __future__ import annotations

import threading
import time

import pytest

distributed = pytest.importorskip("distributed")

from skyjoin.distributed import worker_threads as wt  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.Client(processes=False, n_workers=3, threads_per_worker=1,
                            dashboard_address=":0") as c:
        yield c


def _addresses(client):
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


def _thread_id(*_):
    return threading.get_ident()


def test_tasks_run_on_the_workers_own_threads(client):
    workers = wt.worker_threads(client)
    for a in _addresses(client):
        dask_thread = client.submit(_thread_id, workers=[a], pure=False).result()
        assert workers.submit(_thread_id, workers=[a]).result() == dask_thread
        assert workers.submit(_thread_id, workers=a).result() == dask_thread
    with pytest.raises(ValueError, match="not a worker of this call"):
        workers.submit(_thread_id, workers="inproc://nowhere")


def test_executors_are_found_once_per_worker(client):
    wt.worker_threads(client)
    with distributed.get_task_stream(client) as ts:
        again = wt.worker_threads(client)
    assert not ts.data                      # no Dask task the second time
    assert sorted(again.executors) == _addresses(client)
    assert sorted(again.scheduler_info()["workers"]) == _addresses(client)


def test_steps_wait_for_the_futures_they_are_given(client):
    """Three steps, each task of a step taking every future of the step before
    (the in-process path's shape: load, route, count, receive)."""
    workers = wt.worker_threads(client)
    addrs = _addresses(client)

    def first(k):
        time.sleep(0.02 * (len(addrs) - k))       # the last worker finishes first
        return k

    def step(k, *before):
        return k + sum(before)

    one = [workers.submit(first, k, workers=[a]) for k, a in enumerate(addrs)]
    two = [workers.submit(step, k, *one, workers=[a]) for k, a in enumerate(addrs)]
    three = [workers.submit(step, 0, *two, workers=[a]) for a in addrs]
    s1 = sum(range(len(addrs)))
    expected = sum(k + s1 for k in range(len(addrs)))
    assert workers.gather(three) == [expected] * len(addrs)


def test_retries_and_errors(client):
    workers = wt.worker_threads(client)
    a = _addresses(client)[0]
    tries = []

    def flaky():
        tries.append(1)
        if len(tries) < 3:
            raise OSError("transient")
        return "done"

    assert workers.submit(flaky, workers=[a], retries=2).result() == "done"
    tries.clear()
    with pytest.raises(OSError, match="transient"):
        workers.submit(flaky, workers=[a], retries=1).result()
    assert len(tries) == 2


def test_gather_waits_for_every_task_before_raising(client):
    workers = wt.worker_threads(client)
    a, b = _addresses(client)[:2]
    finished = threading.Event()

    def fails():
        raise ValueError("bad partition")

    def slow():
        time.sleep(0.2)
        finished.set()
        return 1

    futs = [workers.submit(fails, workers=[a]), workers.submit(slow, workers=[b])]
    with pytest.raises(ValueError, match="bad partition"):
        workers.gather(futs)
    assert finished.is_set()


def test_a_failed_step_fails_the_steps_after_it(client):
    workers = wt.worker_threads(client)
    a, b = _addresses(client)[:2]

    def fails():
        raise RuntimeError("route failed")

    first = workers.submit(fails, workers=[a])
    after = workers.submit(_thread_id, first, workers=[b])
    with pytest.raises(RuntimeError, match="route failed"):
        after.result(timeout=10)


def test_two_callers_at_once_both_complete(client):
    """Two driver threads submitting their steps to the same worker threads at
    the same time (their tasks interleave in each worker's queue) both finish,
    each with its own answer."""
    addrs = _addresses(client)
    results: dict = {}

    def caller(tag):
        workers = wt.worker_threads(client)

        def first(k):
            time.sleep(0.005 * k)
            return k * tag

        def step(k, *before):
            return k + sum(before)

        one = [workers.submit(first, k, workers=[a]) for k, a in enumerate(addrs)]
        two = [workers.submit(step, k, *one, workers=[a]) for k, a in enumerate(addrs)]
        results[tag] = workers.gather([workers.submit(step, 0, *two, workers=[a])
                                       for a in addrs])

    threads = [threading.Thread(target=caller, args=(tag,)) for tag in (1, 100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    for tag in (1, 100):
        s1 = sum(k * tag for k in range(len(addrs)))
        assert results[tag] == [sum(k + s1 for k in range(len(addrs)))] * len(addrs)
