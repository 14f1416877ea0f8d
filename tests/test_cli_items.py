"""What a new user meets at the command line: the bad cell quoted, the
columns used said, progress bars on a terminal only, help that names files,
plots that stay small, the skyline's one-time kernel cost reported apart, and
the device that the operator's plan reports (never decided again here)."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

import skyjoin as sj
from skyjoin._core.plans import recording, report
from skyjoin.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


@pytest.fixture
def badcell(tmp_path):
    """A CSV whose column y holds one word at data row 5 (0-based)."""
    rng = np.random.default_rng(0)
    rows = [[f"{v:.6f}" for v in rng.uniform(0, 10, 3)] for _ in range(10)]
    rows[5][1] = "oops"
    path = tmp_path / "badcell.csv"
    path.write_text("x,y,z\n" + "".join(",".join(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("cmd", [["join", "{f}", "--eps", "1"],
                                 ["dbscan", "{f}", "--eps", "1", "--min-samples", "2"],
                                 ["skyline", "{f}"]])
def test_the_bad_cell_is_quoted(badcell, cmd):
    res = run([a.format(f=badcell) for a in cmd] + ["--device", "cpu"])
    assert res.exit_code == 1, res.output
    assert "'oops' at data row 5" in res.output and "column 'y'" in res.output
    assert "badcell.csv" in res.output
    assert "6." not in res.output.split("e.g.")[1][:12]      # not the column's first cell


def test_the_reader_quotes_the_bad_cell_past_a_chunk(tmp_path):
    """The search skips whole chunks that are numbers: a bad cell far down
    a large file is still the one quoted."""
    from skyjoin.io import read_points

    n = 300_000
    lines = [f"{k},{k % 7}.5" for k in range(n)]
    lines[n - 3] = f"{n - 3},n/a?"
    path = tmp_path / "big.csv"
    path.write_text("a,b\n" + "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"'n/a\?' at data row {n - 3} "):
        read_points(path)


def test_the_columns_used_are_said(tmp_path):
    path = tmp_path / "p.csv"
    np.savetxt(path, np.random.default_rng(1).uniform(0, 1, (40, 3)), delimiter=",",
               header="lon,lat,alt", comments="")
    res = run(["join", path, "--eps", "0.3", "--device", "cpu", "--columns", "lat,lon"])
    assert res.exit_code == 0, res.output
    assert "2 dimensions" in res.output and "columns lat, lon" in res.output
    res = run(["dbscan", path, "--eps", "0.3", "--min-samples", "2", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "3 dimensions (lon, lat, alt)" in res.output
    res = run(["skyline", path, "--device", "cpu", "--max", "alt"])
    assert res.exit_code == 0, res.output
    assert "(1 column: alt max)" in res.output


def _bar(text: str) -> bool:
    """Whether ``text`` holds a tqdm bar."""
    return "%|" in text or "it/s]" in text or "/s]" in text


def test_progress_bars_only_on_a_terminal(tmp_path):
    """Click's runner gives the command a standard error that is no
    terminal: no bar unless --progress asks for one (which shows that the
    check can fail)."""
    path = tmp_path / "p.npy"
    np.save(path, np.random.default_rng(2).uniform(0, 1, (1500, 2)))
    sweep = ["dbscan", path, "--sweep-eps", "0.05,0.1", "--sweep-min-samples", "3,5",
             "--device", "cpu"]
    stream = ["join", path, "--eps", "0.05", "--device", "cpu", "--out", tmp_path / "p.parquet",
              "--chunk-pairs", "1000"]
    for args in (sweep, stream):
        res = run(args)
        assert res.exit_code == 0, res.output
        assert not _bar(res.output), res.output
        res = run(args + ["--progress"])
        assert res.exit_code == 0, res.output
        assert _bar(res.output), res.output


def test_help_names_files_and_explains_every_option():
    for cmd, options in {"skyline": ["--out FILE", "--plot FILE"],
                         "join": ["--out FILE"], "dbscan": ["--out FILE", "--plot FILE"],
                         "generate": ["--out FILE"], "demo": ["--out DIR"],
                         "bench": ["--out DIR"]}.items():
        res = run([cmd, "--help"])
        assert res.exit_code == 0, res.output
        for opt in options:
            assert opt in res.output, (cmd, opt)
        assert "TEXT" not in res.output, cmd
        assert "nba.csv" not in res.output
        # every option has a help text: a line that starts with the option
        # and carries nothing after it would be followed by the next option
        cmd_obj = main.commands[cmd]
        for p in cmd_obj.params:
            if p.param_type_name == "option":
                assert p.help, (cmd, p.name)


def test_the_skyline_examples_run(tmp_path):
    """The skyline's help examples work on the file that ``generate`` makes."""
    cars = tmp_path / "cars.csv"
    res = run(["generate", "anticorrelated", "-n", "2000", "-d", "3", "--out", cars])
    assert res.exit_code == 0, res.output
    res = run(["skyline", cars, "--device", "cpu"])
    assert res.exit_code == 0, res.output
    res = run(["skyline", cars, "--min", "x0", "--max", "x1,x2", "--out", tmp_path / "best.csv",
               "--plot", tmp_path / "best.png", "--device", "cpu"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("ext", ["svg", "pdf"])
def test_vector_plots_rasterise_the_points(tmp_path, ext):
    """200k points in a .svg or .pdf: one raster image of the points, the
    axes as vectors, a small file."""
    from skyjoin.cli.plots import save_clusters, save_skyline

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (200_000, 2))
    labels = (X[:, 0] * 5).astype(np.int64) - 1
    path = tmp_path / f"c.{ext}"
    save_clusters(str(path), [(labels, "clusters")], X, names=["a", "b"])
    assert path.stat().st_size < 2_000_000
    sky = sj.skyline(X, device="cpu")
    path2 = tmp_path / f"s.{ext}"
    save_skyline(str(path2), X, sky, sense=["min", "min"], names=["a", "b"], title="t")
    assert path2.stat().st_size < 2_000_000
    if ext == "svg":
        text = path.read_text()
        assert text.count("<image") == 1        # the points, one raster
        assert "DejaVuSans" in text             # the labels, as vector glyphs


@pytest.mark.parametrize("cmd", [["skyline"], ["join", "--eps", "0.1"],
                                 ["dbscan", "--eps", "0.1", "--min-samples", "3"]])
def test_the_first_call_is_reported_apart(tmp_path, cmd):
    """In a fresh process an operator's first call loads (or compiles) its
    engine and kernels: that time is a note of its own, not the operator's."""
    path = tmp_path / "p.csv"
    np.savetxt(path, np.random.default_rng(4).uniform(0, 1, (1000, 3)), delimiter=",",
               header="a,b,c", comments="")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    res = subprocess.run([sys.executable, "-m", "skyjoin", cmd[0], str(path), *cmd[1:],
                          "--device", "cpu"], env=env, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr
    line = [ln for ln in res.stdout.splitlines() if "kernels, once)" in ln]
    assert len(line) == 1, res.stdout


def _fake_join(device_seen):
    """A stand-in for skyjoin.self_join that reports a plan on "gpu" and
    records the device it was given."""
    def fake(X, eps, output="table", device=None, **kw):
        device_seen.append(device)
        report(SimpleNamespace(device="gpu", pattern="unicomp", describe=lambda: "fake"))
        return np.zeros(len(X), dtype=np.int64)
    return fake


def test_the_device_is_passed_through_and_the_plans_printed(tmp_path, monkeypatch):
    """The command passes --device as given (None without it) and prints the
    device of the plan the operator reports, whatever it is; without a
    reported plan it prints none rather than deciding one itself."""
    path = tmp_path / "p.npy"
    np.save(path, np.zeros((5, 2)))
    seen: list = []
    monkeypatch.setattr(sj, "self_join", _fake_join(seen))
    res = run(["join", path, "--eps", "1"])
    assert res.exit_code == 0, res.output
    assert " on gpu " in res.output
    res = run(["join", path, "--eps", "1", "--device", "auto"])
    assert seen == [None, None, "auto", "auto"]     # each time the first rows, then all
    monkeypatch.setattr(sj, "self_join", lambda X, eps, **kw: np.zeros(len(X), dtype=np.int64))
    res = run(["join", path, "--eps", "1", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert " on " not in res.output


def test_commands_do_not_resolve_the_device():
    """Only warmup (which kernels to compile), bench (which peers) and the
    local Dask cluster (which workers to start) decide a device in the CLI."""
    import skyjoin.cli as cli

    folder = os.path.dirname(cli.__file__)
    for name in ("join", "dbscan", "skyline", "demo", "generate"):
        with open(os.path.join(folder, f"{name}.py")) as fh:
            assert "resolve_device" not in fh.read(), name


def _operators_report() -> bool:
    with recording() as plans:
        sj.self_join(np.zeros((3, 2)), 1.0, device="cpu")
        sj.skyline(np.random.default_rng(0).random((10, 3)), device="cpu")
    return len({type(p).__name__ for p in plans}) >= 2


@pytest.mark.skipif(not _operators_report(),
                    reason="the join and the skyline do not report their plans yet")
def test_the_real_operators_plans_are_printed(tmp_path):
    """After the operators report their plans: the device printed is theirs."""
    path = tmp_path / "p.csv"
    np.savetxt(path, np.random.default_rng(5).uniform(0, 1, (300, 3)), delimiter=",",
               header="a,b,c", comments="")
    res = run(["join", path, "--eps", "0.2", "--device", "cpu"])
    assert res.exit_code == 0 and " on cpu " in res.output, res.output
    res = run(["dbscan", path, "--eps", "0.2", "--min-samples", "3", "--device", "cpu"])
    assert res.exit_code == 0 and " on cpu)" in res.output, res.output
    res = run(["skyline", path, "--device", "cpu"])
    assert res.exit_code == 0 and "; cpu, " in res.output, res.output
    res = run(["demo", "-n", "3000", "--out", tmp_path, "--device", "cpu"])
    assert res.exit_code == 0 and "on the cpu, the join's pattern " in res.output, res.output
