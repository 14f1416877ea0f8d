"""The ``skyjoin`` command as a process: what it imports to start, ``python -m
skyjoin``, Ctrl-C (exit status 130, one line) and a closed pipe (quiet).

Each test runs the command in a subprocess, as a user's shell does; none
asserts a time: start-up is checked by the modules it loads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")

#: what --help and a usage error must not import (each costs 0.05-1 s)
HEAVY = ("numba", "sklearn", "scipy", "pandas", "pyarrow", "matplotlib", "tqdm", "dask",
         "distributed", "cupy", "skyjoin.bench", "skyjoin.cluster.estimator",
         "skyjoin.distributed")


def env():
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    e.pop("PYTHONWARNINGS", None)
    return e


def skyjoin(*args, **kw):
    return subprocess.run([sys.executable, "-m", "skyjoin", *map(str, args)], env=env(),
                          capture_output=True, text=True, timeout=600, **kw)


def imported(*argv) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules a Python process started with ``argv`` imports (-X importtime)."""
    res = subprocess.run([sys.executable, "-X", "importtime", *map(str, argv)], env=env(),
                         capture_output=True, text=True, timeout=600)
    mods = {ln.rsplit("|", 1)[1].strip() for ln in res.stderr.splitlines()
            if ln.startswith("import time:") and ln.count("|") == 2}
    return mods, res


def heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("argv, status", [
    (["-c", "import skyjoin.cli"], 0),
    (["-m", "skyjoin", "--help"], 0),
    (["-m", "skyjoin", "join", "--help"], 0),
    (["-m", "skyjoin", "skyline", "--help"], 0),
    (["-m", "skyjoin", "join", "missing.csv", "--eps", "1"], 2),
    (["-m", "skyjoin", "dbscan", "missing.csv", "--eps", "1", "--min-samples", "2"], 2),
    (["-m", "skyjoin", "bench", "nope"], 2),
])
def test_help_and_usage_errors_import_no_engine(argv, status):
    """--help and a usage error load click and skyjoin's NumPy-level modules
    only: Numba, scikit-learn, SciPy, pandas, Matplotlib wait for a command
    that runs."""
    mods, res = imported(*argv)
    assert res.returncode == status, res.stderr[-2000:]
    assert "skyjoin.cli" in mods
    assert heavy(mods) == []


def test_the_command_imports_what_it_needs(tmp_path):
    """The check above can fail: a command that runs imports its engines."""
    path = tmp_path / "p.npy"
    np.save(path, np.random.default_rng(0).uniform(0, 1, (50, 2)))
    mods, res = imported("-m", "skyjoin", "join", path, "--eps", "0.1", "--device", "cpu")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "numba" in heavy(mods)


def test_python_m_skyjoin():
    res = skyjoin("--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Usage: skyjoin ")
    for cmd in ("join", "dbscan", "skyline", "generate", "demo", "bench", "warmup"):
        assert cmd in res.stdout
    res = skyjoin("join", "missing.csv", "--eps", "1")
    assert res.returncode == 2
    assert "Usage: skyjoin join" in res.stderr and "does not exist" in res.stderr


def _loaded(pid: int, name: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return name in fh.read()
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc")
def test_ctrl_c_during_start_up(tmp_path):
    """SIGINT while the command imports its engines (Numba's libraries being
    mapped): exit status 130, one line on standard error, no traceback."""
    path = tmp_path / "p.npy"
    np.save(path, np.random.default_rng(0).uniform(0, 1, (20000, 2)))
    p = subprocess.Popen([sys.executable, "-m", "skyjoin", "dbscan", str(path), "--eps", "0.01",
                          "--min-samples", "3", "--device", "cpu"], env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while p.poll() is None and not _loaded(p.pid, "/numba/") \
                and time.monotonic() - t0 < 120:
            time.sleep(0.005)
        assert p.poll() is None, "the command ended before its engines loaded"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == ["Interrupted (Ctrl-C)."], err


def test_ctrl_c_in_process_is_130(tmp_path, monkeypatch):
    """The same rule through click's test runner, for every command: a
    KeyboardInterrupt inside the command exits 130 with the one line."""
    from click.testing import CliRunner

    import skyjoin as sj
    from skyjoin.cli import main

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    from skyjoin.cli import bench, demo, generate, warmup

    for name in ("self_join", "DBSCAN", "skyline"):
        monkeypatch.setattr(sj, name, interrupted)
    monkeypatch.setattr(generate, "generate", interrupted)
    monkeypatch.setattr(demo, "run_demo", interrupted)
    monkeypatch.setattr(warmup, "run_warmup", interrupted)
    monkeypatch.setattr(bench, "suite_runner", interrupted)
    csv = tmp_path / "p.csv"
    csv.write_text("a,b\n1,2\n2,1\n")
    for args in (["join", csv, "--eps", "1"], ["dbscan", csv, "--eps", "1", "--min-samples", "2"],
                 ["skyline", csv], ["generate", "uniform", "-n", "5", "-d", "2", "--out",
                                    tmp_path / "g.npy"],
                 ["demo", "--out", tmp_path], ["warmup"], ["bench", "join"]):
        res = CliRunner().invoke(main, [str(a) for a in args])
        assert res.exit_code == 130, res.output
        assert "Interrupted (Ctrl-C)." in res.output and "Traceback" not in res.output
        assert "Aborted" not in res.output


def test_closed_pipe_is_quiet():
    """Standard output closed before the command writes: no message, exit
    status 141 (as a tool ended by SIGPIPE)."""
    p = subprocess.Popen([sys.executable, "-m", "skyjoin", "bench", "skyline", "--list",
                          "--device", "cpu"], env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=600)
    assert "Error" not in err and "Traceback" not in err and "Exception" not in err, err
    assert p.returncode == 141, err


def test_head_of_a_list():
    """``skyjoin bench skyline --list | head -1``: the first case, and
    nothing on standard error."""
    cmd = f"{sys.executable} -m skyjoin bench skyline --list --device cpu | head -1"
    res = subprocess.run(["sh", "-c", cmd], env=env(), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0
    assert len(res.stdout.splitlines()) == 1
    assert res.stderr == "", res.stderr


def test_ctrl_c_while_the_command_loads_its_modules():
    """A Ctrl-C that arrives while ``skyjoin.cli`` imports its modules (here:
    raised when click is imported, the first of them) ends with the rule's
    one line and 130, no traceback; ``import skyjoin`` before it imports
    nothing heavy, so that the window before the command's own code is
    the interpreter's start alone."""
    code = ("import builtins, sys\n"
            "real = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name == 'click':\n"
            "        raise KeyboardInterrupt\n"
            "    return real(name, *a, **k)\n"
            "import skyjoin\n"
            "assert 'numpy' not in sys.modules, 'import skyjoin loaded NumPy'\n"
            "builtins.__import__ = imp\n"
            "from skyjoin.cli import main\n")
    p = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True)
    assert p.returncode == 130, p.stderr
    assert p.stderr.strip().splitlines() == ["Interrupted (Ctrl-C)."], p.stderr
