"""The one-time compile notice, the compile record and ``skyjoin warmup``.

The notice mechanism is tested in this process on kernels made for the
test (Numba compiles them, no cache); the whole path, from an empty Numba
cache to the command line's standard error, in a subprocess.
"""

import logging
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from click.testing import CliRunner

from skyjoin._core import compiling
from skyjoin._core.device import gpu_available
from skyjoin.cli import main
from skyjoin.cli.demo import DBSCAN_WARM
from skyjoin.cli.options import compile_note, operator_clock
from skyjoin.cli.warmup import warm_calls
from skyjoin.pareto.plan import CPU_VARIANTS

NOTICE = "compiling kernels, one time, about"


def probe_kernel(module="skyjoin.simjoin.probe"):
    """A new Numba dispatcher whose function claims to live in ``module``."""
    def f(x):
        return x + 1
    f.__module__ = module
    return numba.njit(cache=False)(f)


@pytest.fixture
def fresh_notice(monkeypatch):
    """The notice not yet given, and known estimates."""
    compiling.install()
    monkeypatch.setattr(compiling, "_noticed", False)
    monkeypatch.setattr(compiling, "_estimates", {"skyjoin.simjoin": 4.6, "skyjoin.pareto": 0.4,
                                                  "skyjoin.cluster": 3.0})
    monkeypatch.setattr(compiling, "busy_factor", lambda: 1.0)     # a quiet machine
    return compiling


def notices(caplog):
    return [r for r in caplog.records if r.name == "skyjoin.compile"]


def test_notice_appears_exactly_once(fresh_notice, caplog):
    caplog.set_level(logging.WARNING, logger="skyjoin.compile")
    probe_kernel()(1)
    probe_kernel()(2.0)          # a second kernel, a second compile
    probe_kernel("skyjoin.cluster.probe")(3)
    got = notices(caplog)
    assert len(got) == 1
    assert got[0].levelno == logging.WARNING
    assert "compiling kernels, one time, about 5 s" in got[0].getMessage()


def test_the_estimate_scales_with_the_load(fresh_notice, caplog, monkeypatch):
    """On a busy machine (load 3x the cores) the join's 4.6 s take about 14 s."""
    caplog.set_level(logging.WARNING, logger="skyjoin.compile")
    monkeypatch.setattr(compiling, "busy_factor", lambda: 3.0)
    probe_kernel()(1)
    msg = notices(caplog)[0].getMessage()
    assert "about 14 s on this busy machine" in msg


def test_busy_factor_reads_the_load(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert compiling.busy_factor() == 4.0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.0, 0.0))
    assert compiling.busy_factor() == 1.0


def test_no_notice_for_a_short_compile_or_foreign_kernels(fresh_notice, caplog):
    caplog.set_level(logging.WARNING, logger="skyjoin.compile")
    probe_kernel("skyjoin.pareto.probe")(1)   # expected 0.4 s: below NOTICE_MIN_S
    probe_kernel("somebody.else")(1)           # not a skyjoin kernel
    assert notices(caplog) == []
    assert compiling._noticed is False
    probe_kernel()(1)                          # the join's: 4.6 s
    assert len(notices(caplog)) == 1


def test_expect_announces_the_sum(fresh_notice, caplog):
    caplog.set_level(logging.WARNING, logger="skyjoin.compile")
    with compiling.expect(("skyjoin.simjoin", "skyjoin.cluster")):
        probe_kernel("skyjoin.pareto.probe")(1)
    assert "about 8 s" in notices(caplog)[0].getMessage()


def test_expect_alongside_announces_the_longer(fresh_notice, caplog):
    caplog.set_level(logging.WARNING, logger="skyjoin.compile")
    with compiling.expect(("skyjoin.pareto",), alongside=("skyjoin.simjoin", "skyjoin.cluster")):
        probe_kernel("skyjoin.pareto.probe")(1)
    assert "about 8 s" in notices(caplog)[0].getMessage()


def frame_in(module, fn):
    """Call ``fn`` from a function whose frame belongs to ``module``."""
    ns = {"__name__": module}
    exec("def call(fn):\n    return fn()", ns)
    return ns["call"](fn)


def test_operator_of_takes_the_outermost_operator_frame():
    got = frame_in("skyjoin.cluster.estimator", lambda: frame_in(
        "skyjoin.simjoin.api", lambda: compiling.operator_of("skyjoin.index.grid_kernels")))
    assert got == "skyjoin.cluster"
    got = frame_in("skyjoin.cli.join", lambda: frame_in(
        "skyjoin.cluster.sweep.api", lambda: compiling.operator_of("skyjoin.index.grid_kernels")))
    assert got == "skyjoin.cluster.sweep"
    assert compiling.operator_of("skyjoin.index.grid_kernels") == "skyjoin.index"
    assert compiling.operator_of("numpy.core") is None


def test_record_and_clock_count_the_compiles():
    k = probe_kernel()
    with compiling.record() as events:
        k(1)
        k(2)                     # same signature: no second compile
        k(1.5)
    top = [e for e in events if e.depth == 0 and e.kernel.endswith("probe_kernel.<locals>.f")]
    assert len(top) == 2
    assert all(e.seconds >= 0 and e.wall > 0 for e in top)
    assert compiling.compile_wall(events) >= sum(e.wall for e in top)
    k2 = probe_kernel()
    with operator_clock() as clock:
        k2(1)
    assert clock["compile"] > 0 and clock["seconds"] >= 0
    with operator_clock() as clock:
        k2(1)
    assert clock["compile"] == 0
    assert compile_note(0.0) == "" and "compiling kernels, once" in compile_note(2.0)


def test_estimates_cover_the_operators(monkeypatch):
    monkeypatch.setattr(compiling, "_estimates", None)    # read the shipped file again
    for op in ("skyjoin.simjoin", "skyjoin.cluster", "skyjoin.pareto", "skyjoin.cluster.sweep",
               "skyjoin.cli.demo"):
        assert compiling.estimate_s(op) > 0


def test_warm_calls_cover_every_path():
    labels = [label for label, _ in warm_calls("cpu")]
    assert len(labels) == len(set(labels))
    for prec in ("float64", "float32"):
        for what in ("full pattern", "LID-UNICOMP", ": UNICOMP", "counts", "chunks", "R with S", "6-D",
                     "DBSCAN {}: grid", "DBSCAN {}: join path"):
            assert any(what.format(prec) in lab and prec in lab for lab in labels), (what, prec)
    for d in (2, 4, 20):
        for v in CPU_VARIANTS + ("bruteforce", "bnl", "sfs", "ggs"):
            assert f"skyline {d}-D {v}" in labels
    assert "skyline 2-D sort2d" in labels
    for prec in ("float64", "float32"):
        assert f"join {prec}: dense grid" in labels
    for ext in (".parquet", ".csv", ".npy"):
        assert f"join pairs to {ext}" in labels and f"join table to {ext}" in labels
    for kind in ("uniform", "blobs", "independent", "anticorrelated", "pareto"):
        assert f"generate {kind}" in labels
    assert "DBSCAN sweep" in labels and "DBSCAN: weights" in labels
    assert "DBSCAN sweep, hybrid" in labels
    assert DBSCAN_WARM in labels              # the demo's helper process runs it


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_warmup_gpu_without_a_gpu_is_a_clean_error():
    r = CliRunner().invoke(main, ["warmup", "--device", "gpu"])
    assert r.exit_code == 1
    assert r.output.startswith("Error: ") and "GPU" in r.output
    assert "Traceback" not in r.output


@pytest.mark.slow
def test_first_run_with_an_empty_cache_says_so_once(tmp_path):
    """From an empty Numba cache: the command compiles, the notice is one
    line on standard error, and the summary keeps compile time apart; a
    second process loads the cache and says nothing."""
    pts = tmp_path / "pts.npy"
    np.save(pts, np.random.default_rng(0).uniform(0, 10, (3000, 2)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), SKYJOIN_DEVICE="cpu")
    cmd = [sys.executable, "-m", "skyjoin.cli", "join", str(pts), "--eps", "0.3"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    lines = [ln for ln in first.stderr.splitlines() if NOTICE in ln]
    assert len(lines) == 1, first.stderr
    assert lines[0].startswith("skyjoin: ")
    assert "compiling kernels, once" in first.stdout
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert NOTICE not in second.stderr
    assert "compiling kernels, once" not in second.stdout


@pytest.mark.slow
def test_warmup_runs_every_call_and_then_compiles_nothing():
    from skyjoin.cli.warmup import run_warmup
    out = []
    first = run_warmup("cpu", echo=out.append)
    assert set(first["steps"]) == {label for label, _ in warm_calls("cpu")}
    again = run_warmup("cpu", echo=out.append)
    assert again["compiles"] == 0
    assert out[-1].startswith("kernels ready in")
