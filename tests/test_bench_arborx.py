"""The ArborX anchor's plumbing, on the CPU: the points the driver reads, its
output parsed, its failures reported, the rows it makes and the counts
compared.  A stand-in driver (a Python program) reads the raw file the way
the real one does and clusters it with scikit-learn (brute force, float64):
its counts are the oracle for what reached it."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.bench import arborx
from skyjoin.bench.harness import Case, Impl, Row, ratios, run_case

SklearnDBSCAN = pytest.importorskip("sklearn.cluster").DBSCAN


def stand_in(tmp_path, body=None):
    """An executable stand-in for ``dbscan_driver FILE N EPS MINPTS REPS``."""
    path = tmp_path / "dbscan_driver"
    body = body or textwrap.dedent("""
        import sys
        import numpy as np
        from sklearn.cluster import DBSCAN
        f, n, eps, m, reps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \\
            int(sys.argv[4]), int(sys.argv[5])
        P = np.fromfile(f, dtype=np.float32)
        assert P.size == 3 * n, (P.size, n)
        labels = DBSCAN(eps=eps, min_samples=m, algorithm="brute").fit(
            P.reshape(n, 3).astype(np.float64)).labels_
        noise, clusters = int((labels < 0).sum()), int(labels.max()) + 1
        for impl in ("FDBSCAN-DenseBox", "FDBSCAN"):
            for residence, base in (("device", 0.5), ("host", 0.9)):
                for r in range(reps):
                    print(f"arborx {impl} {residence} eps {eps:g} minpts {m}: "
                          f"{base + r / 10:.4f} s  noise {noise}  clusters {clusters}")
    """)
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_driver_points_pad_2d_and_keep_3d():
    X2 = np.array([[1.5, -2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(arborx.driver_points(X2),
                                  np.array([[1.5, -2.0, 0.0], [3.0, 4.0, 0.0]], np.float32))
    X3 = np.random.default_rng(0).random((5, 3))
    P = arborx.driver_points(X3)
    assert P.dtype == np.float32 and P.flags.c_contiguous
    np.testing.assert_array_equal(P, X3.astype(np.float32))
    with pytest.raises(ValueError, match="2-D or 3-D"):
        arborx.driver_points(np.zeros((4, 5)))


@pytest.mark.parametrize("d", [2, 3])
def test_run_driver_counts_are_those_of_the_points_written(tmp_path, d):
    X = np.random.default_rng(d).normal(0, 1, (600, d)).astype(np.float32)
    got = arborx.run_driver(stand_in(tmp_path), X, 0.3, 5, reps=3)
    ref = SklearnDBSCAN(eps=0.3, min_samples=5, algorithm="brute").fit(
        X.astype(np.float64)).labels_
    assert sorted(got) == sorted((i, r) for i in arborx.IMPLEMENTATIONS
                                 for r in arborx.RESIDENCES)
    for impl in arborx.IMPLEMENTATIONS:
        for residence, base in (("device", 0.5), ("host", 0.9)):
            run = got[(impl, residence)]
            assert run["clusters"] == ref.max() + 1
            assert run["noise"] == (ref < 0).sum()
            assert run["times"] == pytest.approx([base, base + 0.1, base + 0.2])
            assert run["seconds"] == base


def test_a_failing_or_silent_driver_is_an_error(tmp_path):
    failing = stand_in(tmp_path, "import sys\nprint('CUDA error: no device')\nsys.exit(3)\n")
    with pytest.raises(RuntimeError, match=r"failed \(status 3\).*no device"):
        arborx.run_driver(failing, np.zeros((4, 3)), 1.0, 2)
    (tmp_path / "b").mkdir()
    silent = stand_in(tmp_path / "b", "print('arborx FDBSCAN device eps 1 minpts 2: 0.1 s  "
                                      "noise 0  clusters 1')\n")
    with pytest.raises(RuntimeError, match=r"no 1 runs of FDBSCAN-DenseBox \(device\), "
                                           r"FDBSCAN-DenseBox \(host\), FDBSCAN \(host\)"):
        arborx.run_driver(silent, np.zeros((4, 3)), 1.0, 2, reps=1)
    (tmp_path / "c").mkdir()
    fickle = stand_in(tmp_path / "c", "for c in (1, 2):\n    print(f'arborx FDBSCAN host eps 1 "
                                      "minpts 2: 0.1 s  noise 0  clusters {c}')\n")
    with pytest.raises(RuntimeError, match="runs of FDBSCAN disagree"):
        arborx.run_driver(fickle, np.zeros((4, 3)), 1.0, 2, reps=2)


def test_self_timed_row_takes_the_implementations_own_time():
    impl = Impl("peer", lambda: {"seconds": 0.125, "size": 7, "noise": 3}, repeat=2,
                self_timed=True)
    (row,) = run_case("s", Case("c", {}, [impl]), log=lambda s: None)
    assert row.time_s == 0.125 and row.size == 7 and row.extra["noise"] == 3
    assert "seconds" not in row.extra


def test_arborx_rows_through_the_harness(tmp_path, monkeypatch):
    """An ArborX implementation of a case: one driver call, its own time, the
    counts of the points it read; without a driver, skipped with the way
    to build one."""
    X = np.random.default_rng(5).normal(0, 1, (400, 3)).astype(np.float32)
    path, runs, calls = stand_in(tmp_path), {}, []

    def get():
        calls.append(1)
        return X

    impls = [arborx._arborx(get, 0.4, 4, "FDBSCAN", r, path, runs) for r in ("device", "host")]
    rows = run_case("s", Case("c", {}, impls), log=lambda s: None)
    ref = SklearnDBSCAN(eps=0.4, min_samples=4, algorithm="brute").fit(X).labels_
    assert [(r.impl, r.time_s) for r in rows] == [("ArborX FDBSCAN (points on GPU)", 0.5),
                                                  ("ArborX FDBSCAN (host to host)", 0.9)]
    assert [r.extra["residence"] for r in rows] == ["points on GPU", "host to host"]
    assert len(calls) == 1                      # one driver call for both rows
    for row in rows:
        assert row.size == ref.max() + 1 and row.extra["noise"] == (ref < 0).sum()
    monkeypatch.delenv(arborx.DRIVER_ENV, raising=False)
    names = [c.name for c in arborx.cases(quick=True)]
    assert names == ["Clustered3D-200k-eps0.1-m2", "Clustered3D-200k-eps0.25-m10",
                     "Blobs2D-200k-eps0.3-m10", "Dense3D-200k-eps0.2-m10"]
    case = arborx.cases(quick=True)[0]
    skipped = [i for i in case.impls if i.skip_reason]
    assert len(skipped) == 4 and all(arborx.DRIVER_ENV in i.skip_reason for i in skipped)


def test_driver_found_only_when_it_is_a_program(tmp_path, monkeypatch):
    monkeypatch.setenv(arborx.DRIVER_ENV, str(tmp_path / "absent"))
    assert arborx.driver() is None
    path = stand_in(tmp_path)
    monkeypatch.setenv(arborx.DRIVER_ENV, path)
    assert arborx.driver() == path
    os.chmod(path, 0o644)
    assert arborx.driver() is None


def test_count_differences_name_both_counts():
    def row(impl, ours, size, noise, case="c"):
        return Row("s", case, impl, ours, 1.0, size, {"noise": noise}, {})

    rows = [row("skyjoin DBSCAN (gpu)", True, 10, 5), row("ArborX FDBSCAN (points on GPU)",
                                                         False, 10, 5),
            row("ArborX FDBSCAN-DenseBox (points on GPU)", False, 11, 2),
            row("sklearn DBSCAN", False, 9, 9)]
    assert arborx.count_differences(rows) == [
        "c: ArborX FDBSCAN-DenseBox (points on GPU) 11 clusters / 2 noise, ours 10 / 5"]


def test_count_differences_compare_our_two_rows_too():
    def row(impl, ours, size, noise, case="c"):
        return Row("s", case, impl, ours, 1.0, size, {"noise": noise}, {})

    rows = [row("skyjoin DBSCAN (points on GPU)", True, 10, 5),
            row("skyjoin DBSCAN (gpu, host to host)", True, 10, 6),
            row("ArborX FDBSCAN (points on GPU)", False, 10, 5)]
    assert arborx.count_differences(rows) == [
        "c: skyjoin DBSCAN (gpu, host to host) 10 clusters / 6 noise, "
        "ours (skyjoin DBSCAN (points on GPU)) 10 / 5"]


def test_cases_time_ours_like_for_like_and_host_to_host():
    """Each case has our run with the points on the GPU (as ArborX's driver
    times it) and our host-to-host run, beside both ArborX implementations."""
    for case in arborx.cases(quick=True):
        names = [i.name for i in case.impls]
        assert names[:2] == ["skyjoin DBSCAN (points on GPU)",
                             "skyjoin DBSCAN (gpu, host to host)"]
        assert all(i.ours for i in case.impls[:2])
        assert [n for n in names if n.startswith("ArborX")] == [
            f"ArborX {i} ({w})" for w in ("points on GPU", "host to host")
            for i in arborx.IMPLEMENTATIONS]
        assert all(i.self_timed for i in case.impls)   # each row times its call alone


def test_ours_times_the_fit_alone_not_the_counts(monkeypatch):
    """Our host-to-host row's seconds are the estimator's making and fit, as
    the driver times ArborX's call: the counting of its labels runs after
    the clock stops (a fake clock that the fit moves by 2 and the count by 5)."""
    clock = [0.0]
    labels = np.array([0, 0, 1, -1, 1, -1, -1])

    class Fit:
        def __init__(self, **kw):
            assert kw["device"] == "gpu" and kw["eps"] == 0.3 and kw["min_samples"] == 4
            self.path_ = "stub"

        def fit(self, X):
            clock[0] += 2.0
            self.labels_ = labels
            return self

    def counts(got):
        clock[0] += 5.0
        return {"size": int(got.max()) + 1, "noise": int((got < 0).sum())}

    monkeypatch.setattr(arborx, "time", type("T", (), {"perf_counter": lambda: clock[0]}))
    monkeypatch.setattr(arborx.sj, "DBSCAN", Fit)
    monkeypatch.setattr(arborx, "label_counts", counts)
    impl = arborx._ours(lambda: np.zeros((7, 3), np.float32), 0.3, 4)
    (row,) = run_case("s", Case("c", {}, [impl]), log=lambda s: None)
    assert row.time_s == 2.0 and row.size == 2 and row.extra["noise"] == 3
    assert row.extra["path"] == "stub" and row.extra["residence"] == "host to host"


def test_ratios_pair_rows_of_one_residence():
    """Ours on the GPU against ArborX on the GPU, host to host against host
    to host; a row that names no residence meets every other row."""
    def row(impl, ours, t, residence=None):
        extra = {} if residence is None else {"residence": residence}
        return Row("s", "c", impl, ours, t, 1, extra, {})

    rows = [row("ours dev", True, 1.0, "points on GPU"), row("ours host", True, 2.0, "host to host"),
            row("peer dev", False, 3.0, "points on GPU"), row("peer host", False, 8.0, "host to host"),
            row("peer any", False, 5.0)]
    got = {(r["ours"], r["peer"]): r["speedup"] for r in ratios(rows)}
    assert got == {("ours dev", "peer dev"): 3.0, ("ours dev", "peer any"): 5.0,
                   ("ours host", "peer host"): 4.0, ("ours host", "peer any"): 2.5}


_ARBORX_COUNTS = json.loads((Path(__file__).parent / "data" / "arborx_counts.json").read_text())


@pytest.mark.parametrize("case", arborx.cases(quick=True), ids=lambda c: c.name)
def test_cpu_clusters_equal_arborx_on_the_quick_cases(case):
    """Our CPU DBSCAN, in float32 as ArborX computes, finds ArborX's cluster
    and noise counts (recorded from its driver on a GPU) on each quick case."""
    want = _ARBORX_COUNTS["cases"][case.name]
    X = arborx._data(case.params["kind"], case.params["n"])
    labels = sj.DBSCAN(eps=case.params["eps"], min_samples=case.params["min_samples"],
                       device="cpu", precision="float32").fit(X).labels_
    assert (int(labels.max()) + 1, int((labels < 0).sum())) == (want["clusters"], want["noise"])
