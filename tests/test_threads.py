"""The CPU thread-count rule (``_core.thread_count``) and the contention suite.

The rule's terms are read from fake cgroup files, a monkeypatched affinity
mask and fake environments; the per-call limits from ``numba.set_num_threads``
and ``threadpoolctl``.  Operators are checked to run under the rule's count by
recording the count their kernels see.  The contention suite runs its quick
variant (seconds) and is checked for its fields only: no timing assertion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from skyjoin._core import thread_count as tc


@pytest.fixture
def cgroup(tmp_path):
    """Write a fake cgroup tree: v2 ``cpu.max`` or v1 ``cpu/cpu.cfs_*``."""
    def make(v2=None, v1=None):
        if v2 is not None:
            (tmp_path / "cpu.max").write_text(v2 + "\n")
        if v1 is not None:
            (tmp_path / "cpu").mkdir()
            (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(f"{v1[0]}\n")
            (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(f"{v1[1]}\n")
        return str(tmp_path)
    return make


@pytest.mark.parametrize("text, want", [("max 100000", None), ("200000 100000", 2),
                                        ("150000 100000", 1), ("50000 100000", 1),
                                        ("1600000 100000", 16)])
def test_cgroup_v2_quota(cgroup, text, want):
    assert tc.cgroup_cpus(cgroup(v2=text)) == want


@pytest.mark.parametrize("quota, period, want", [(-1, 100000, None), (300000, 100000, 3),
                                                 (250000, 100000, 2), (10000, 100000, 1)])
def test_cgroup_v1_quota(cgroup, quota, period, want):
    assert tc.cgroup_cpus(cgroup(v1=(quota, period))) == want


def test_no_cgroup_files_no_quota(tmp_path):
    assert tc.cgroup_cpus(str(tmp_path)) is None


def test_affinity_mask(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert tc.affinity_cpus() == 3


def test_affinity_falls_back_to_cpu_count(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert tc.affinity_cpus() == 7


@pytest.mark.parametrize("env, want", [({}, None), ({"SKYJOIN_NUM_THREADS": "3"}, 3),
                                       ({"OMP_NUM_THREADS": "4,2"}, 4),
                                       ({"OMP_NUM_THREADS": "4", "SKYJOIN_NUM_THREADS": "6"}, 4),
                                       ({"NUMBA_NUM_THREADS": "2", "OMP_NUM_THREADS": "5"}, 2),
                                       ({"SKYJOIN_NUM_THREADS": " "}, None)])
def test_env_limit(env, want):
    assert tc.env_limit(env) == want


@pytest.mark.parametrize("var, value", [("SKYJOIN_NUM_THREADS", "0"),
                                        ("SKYJOIN_NUM_THREADS", "two"),
                                        ("OMP_NUM_THREADS", "-1"),
                                        ("NUMBA_NUM_THREADS", "1.5")])
def test_env_limit_refuses_bad_values_by_name(var, value):
    with pytest.raises(ValueError, match=var):
        tc.env_limit({var: value})


def test_pool_threads_is_the_smallest_term(monkeypatch, cgroup):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    root = cgroup(v2="400000 100000")
    assert tc.pool_threads({}, root) == 4
    assert tc.pool_threads({"SKYJOIN_NUM_THREADS": "3"}, root) == 3
    assert tc.pool_threads({"OMP_NUM_THREADS": "8"}, root) == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2}, raising=False)
    assert tc.pool_threads({"SKYJOIN_NUM_THREADS": "3"}, root) == 1


def test_cpu_threads_follows_numba_and_environment(monkeypatch):
    pool = numba.config.NUMBA_NUM_THREADS
    assert 1 <= tc.cpu_threads() <= min(pool, tc.affinity_cpus())
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        assert tc.cpu_threads() == 1
    finally:
        numba.set_num_threads(before)
    monkeypatch.setenv("SKYJOIN_NUM_THREADS", "1")
    assert tc.cpu_threads() == 1
    monkeypatch.setenv("SKYJOIN_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="SKYJOIN_NUM_THREADS"):
        tc.cpu_threads()


def test_cpu_threads_respects_threadpoolctl():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    tc.cpu_threads()                                   # the pool and its runtime loaded
    if numba.threading_layer() != "omp" or tc.openmp_limit() is None:
        pytest.skip("threadpoolctl limits reach Numba through the OpenMP layer only")
    with threadpoolctl.threadpool_limits(1):
        assert tc.cpu_threads() == 1
    assert tc.cpu_threads() == min(tc.pool_threads(), numba.get_num_threads())


def test_decorator_sets_the_count_for_the_call_and_restores_it(monkeypatch):
    seen = []

    @tc.with_cpu_threads
    def op():
        seen.append(numba.get_num_threads())
        return 5

    @tc.with_cpu_threads
    def steps():
        for k in range(3):
            seen.append(numba.get_num_threads())
            yield k

    before = numba.get_num_threads()
    monkeypatch.setenv("SKYJOIN_NUM_THREADS", "1")
    assert op() == 5
    out = []
    for k in steps():
        out.append((k, numba.get_num_threads()))     # the caller's code: its own count
    assert seen == [1, 1, 1, 1]
    assert out == [(0, before), (1, before), (2, before)]
    assert numba.get_num_threads() == before


def test_operators_run_on_the_rule_count(monkeypatch):
    """Each CPU operator's kernels see SKYJOIN_NUM_THREADS=1, checked against
    brute-force float64 oracles, and the caller's count comes back."""
    import skyjoin as sj
    from skyjoin.index import grid_kernels

    seen = []
    real = numba.get_num_threads

    class Spy:       # the grid kernels' view of Numba: records the count they see
        def __getattr__(self, name):
            return getattr(numba, name)

        def get_num_threads(self):
            seen.append(real())
            return seen[-1]

    monkeypatch.setattr(grid_kernels, "nb", Spy())
    before = real()
    monkeypatch.setenv("SKYJOIN_NUM_THREADS", "1")
    X = np.random.default_rng(3).random((400, 2))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    assert sj.self_join(X, 0.1).n_pairs == int((d2 <= 0.01).sum()) - len(X)
    assert sj.skyline(X).size > 0
    labels = sj.DBSCAN(eps=0.1, min_samples=3).fit(X).labels_
    assert len(labels) == len(X)
    assert real() == before
    assert seen and set(seen) <= {1}, seen


def test_wait_policy_is_passive_when_the_pool_starts():
    """In a fresh process: the variable is set as soon as a kernel module
    loads, taken back once Numba's threads run; a user's value is kept."""
    code = textwrap.dedent("""
        import os, numpy as np
        import skyjoin as sj
        import skyjoin._core.threads  # a module with a kernel (reads NUMBA_CACHE)
        print(os.environ.get("OMP_WAIT_POLICY"))
        sj.self_join(np.random.default_rng(0).random((200, 2)), 0.1)
        print(os.environ.get("OMP_WAIT_POLICY"))
    """)
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["PASSIVE", "None"]
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["ACTIVE", "ACTIVE"]


def test_busy_processes_are_killed():
    from skyjoin.bench.contention import busy_processes

    with pytest.raises(RuntimeError):
        with busy_processes(2) as procs:
            assert all(p.poll() is None for p in procs)
            raise RuntimeError("out of the block")
    assert all(p.poll() is not None for p in procs)


def test_contention_quick_reports_its_fields(tmp_path):
    from skyjoin.bench import contention

    path = contention.run(quick=True, out_dir=str(tmp_path), log=lambda s: None,
                          sizes={"join": (3000, 2.0), "dbscan": (2000, 2.0, 5),
                                 "skyline": (1000, 4)})
    rep = json.loads(open(path).read())
    assert rep["suite"] == "contention" and rep["busy_processes"] == 1
    assert [r["operator"] for r in rep["rows"]] == ["join-2d-3k", "dbscan-2d-2k", "skyline-4d-1k"]
    for r in rep["rows"]:
        if "skipped" in r:
            continue
        for key in ("ours_slowdown", "peer_slowdown", "ratio", "within_target"):
            assert key in r
        assert r["ours_slowdown"] > 0 and r["peer_slowdown"] > 0
        assert len(r["ours_times"]["quiet_s"]) == len(r["ours_times"]["busy_s"]) == 1
    alone = json.loads(open(contention.run(quick=True, out_dir=str(tmp_path), names=["join"],
                                           sizes={"join": (3000, 2.0)}, peer=False,
                                           log=lambda s: None)).read())
    (row,) = alone["rows"]
    assert row["peer"] is None and "ratio" not in row and row["ours_slowdown"] > 0
    with pytest.raises(ValueError, match="CPU"):
        contention.run(device="gpu", quick=True, out_dir=str(tmp_path))
    with pytest.raises(ValueError, match="unknown contention case"):
        contention.operators(names=["nope"])
