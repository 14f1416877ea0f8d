"""Every mistake of the command line gives one ``Error:`` line, no traceback
(CliRunner), and the exit status of the rule in ``skyjoin.cli.errors``:
1 for the data, 2 for the command line, the same in every command;
``--out`` is checked before any computation; ``-vv`` shows the traceback."""

import numpy as np
import pytest
from click.testing import CliRunner

import skyjoin as sj
from skyjoin.cli import main


@pytest.fixture
def files(tmp_path):
    X = np.random.default_rng(0).uniform(0, 10, (200, 2))
    paths = {"npy": tmp_path / "p.npy", "csv": tmp_path / "p.csv"}
    np.save(paths["npy"], X)
    np.savetxt(paths["csv"], X, delimiter=",", header="lon,lat", comments="")
    for name, text in {"nan": "lon,lat\n1,2\n3,nan\n", "inf": "lon,lat\n1,2\n3,inf\n",
                       "text": "lon,lat\n1,x\n2,y\n", "empty": "",
                       "ragged": "1,2\n3,4,5\n"}.items():
        paths[name] = tmp_path / f"{name}.csv"
        paths[name].write_text(text)
    paths["dir"] = tmp_path
    return paths


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(res, code):
    assert res.exit_code == code, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output
    return lines[0]


OPS = {"join": ["join", "{data}", "--eps", "1", "--device", "cpu"],
       "dbscan": ["dbscan", "{data}", "--eps", "1", "--min-samples", "3", "--device", "cpu"],
       "skyline": ["skyline", "{data}", "--device", "cpu"]}
#: the option that chooses columns, by command
SELECT = {"join": "--columns", "dbscan": "--columns", "skyline": "--min"}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("data, cols, expect", [
    ("csv", "lon,z", ["unknown column 'z'", "p.csv", "lon, lat"]),
    ("csv", "5", ["position 5", "out of range", "p.csv"]),
    ("npy", "lon", ["p.npy", "plain NumPy array", "by position"]),
])
def test_column_mistakes_are_usage_errors(files, op, data, cols, expect):
    """A column that the file does not have is a mistake of the command
    line: exit status 2 and the same words in every command."""
    args = [a.format(data=files[data]) for a in OPS[op]] + [SELECT[op], cols]
    line = one_error_line(run(args), 2)
    for word in expect:
        assert word in line
    assert SELECT[op] in line


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("data, extra, expect", [
    ("nan", [], ["nan.csv", "column 'lat'", "data row 1"]),
    ("inf", [], ["inf.csv", "infinite", "column 'lat'", "data row 1"]),
    ("text", [], ["text.csv", "column 'lat'", "holds text", "'x' at data row 0",
                  "these hold numbers: lon"]),
    ("empty", [], ["empty.csv", "no data"]),
    ("ragged", [], ["ragged.csv", "ragged rows"]),
])
def test_data_mistakes(files, op, data, extra, expect):
    args = [a.format(data=files[data]) for a in OPS[op]] + extra
    line = one_error_line(run(args), 1)
    for word in expect:
        assert word in line
    for api in ("read_frame", "large_string", "type string", "X contains"):
        assert api not in line


@pytest.mark.parametrize("args, expect", [
    (["join", "{npy}", "--eps", "-1"], "'--eps'"),
    (["join", "{npy}", "--eps", "0"], "'--eps'"),
    (["join", "{npy}", "--eps", "nan"], "'--eps'"),
    (["join", "{npy}", "--eps", "inf"], "'--eps'"),
    (["join", "{npy}", "--eps", "one"], "'--eps'"),
    (["dbscan", "{npy}", "--eps", "nan", "--min-samples", "3"], "'--eps'"),
    (["dbscan", "{npy}", "--sweep-eps", "0.5,nan", "--min-samples", "3"], "'--sweep-eps'"),
    (["dbscan", "{npy}", "--sweep-eps", "0.5,x", "--min-samples", "3"], "'--sweep-eps'"),
    (["dbscan", "{npy}", "--eps", "1", "--sweep-min-samples", "3,0"], "'--sweep-min-samples'"),
    (["dbscan", "{npy}", "--eps", "1", "--sweep-eps", "0.5,1", "--min-samples", "3"],
     "--eps or --sweep-eps, not both"),
    (["dbscan", "{npy}", "--eps", "1", "--min-samples", "3", "--sweep-min-samples", "3,4"],
     "--min-samples or --sweep-min-samples, not both"),
    (["dbscan", "{npy}", "--min-samples", "3"], "--eps"),
    (["join", "{npy}", "--eps", "1", "--scheduler", "tcp://127.0.0.1:1", "--local-cluster", "2"],
     "not both"),
    (["dbscan", "{npy}", "--eps", "1", "--min-samples", "3", "--scheduler", "tcp://127.0.0.1:1",
      "--local-cluster", "2"], "not both"),
    (["skyline", "{csv}", "--scheduler", "tcp://127.0.0.1:1", "--local-cluster", "2"],
     "not both"),
    (["join", "{dir}/missing.csv", "--eps", "1"], "does not exist"),
    (["skyline", "{dir}/missing.csv"], "does not exist"),
    (["dbscan", "{dir}/missing.csv", "--eps", "1", "--min-samples", "3"], "does not exist"),
    (["skyline", "{csv}", "--plot", "{dir}/s.jpg"], "'--plot'"),
    (["skyline", "{csv}", "--min", "lon", "--max", "lon"], "both min and max"),
    (["demo", "-n", "5", "--out", "{dir}"], "'-n'"),
    (["warmup", "--jobs", "0"], "'--jobs'"),
    (["bench", "nope"], "'nope'"),
    (["dbscan", "{npy}", "--eps", "-1", "--min-samples", "3"], "'--eps'"),
    (["dbscan", "{npy}", "--eps", "1", "--min-samples", "0"], "'--min-samples'"),
    (["dbscan", "{npy}", "--sweep-eps", "0.5,-1", "--min-samples", "3"], "'--sweep-eps'"),
    (["generate", "uniform", "-n", "-5", "-d", "2", "--out", "{dir}/g.npy"], "'-n'"),
    (["generate", "uniform", "-n", "5", "-d", "0", "--out", "{dir}/g.npy"], "'-d'"),
    (["join", "{npy}", "--eps", "1", "--out", "{dir}/missing/p.parquet"], "does not exist"),
    (["join", "{npy}", "--eps", "1", "--out", "{dir}/p.txt"], ".txt"),
    (["join", "{npy}", "--eps", "1", "--counts", "--out", "{dir}/c.npz"], ".npz"),
    (["dbscan", "{npy}", "--eps", "1", "--min-samples", "3", "--out", "{dir}/l.npz"], ".npz"),
    (["dbscan", "{npy}", "--eps", "1", "--min-samples", "3", "--plot", "{dir}/no/a.png"],
     "'--plot'"),
    (["generate", "uniform", "-n", "5", "-d", "2", "--out", "{dir}/missing/g.npy"],
     "does not exist"),
    (["generate", "uniform", "-n", "5", "-d", "2", "--out", "{dir}/g.json"], ".json"),
    (["skyline", "{csv}", "--out", "{dir}/missing/s.csv"], "does not exist"),
    (["join", "{npy}", "{npy}", "--eps", "1", "--include-self"], "--include-self"),
    (["join", "{npy}", "{npy}", "{npy}", "--eps", "1"], "two"),
])
def test_usage_mistakes(files, args, expect):
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    line = one_error_line(run(args + ["--device", "cpu"] if args[0] != "generate" else args), 2)
    assert expect in line


@pytest.mark.parametrize("args", [
    ["join", "{npy}", "--eps", "1", "--out", "{dir}/missing/p.parquet"],
    ["join", "{npy}", "--eps", "1", "--out", "{dir}/p.json"],
    ["join", "{npy}", "--eps", "1", "--counts", "--out", "{dir}/missing/c.csv"],
    ["dbscan", "{npy}", "--eps", "1", "--min-samples", "3", "--out", "{dir}/missing/l.csv"],
    ["generate", "uniform", "-n", "5", "-d", "2", "--out", "{dir}/missing/g.npy"],
])
def test_out_is_checked_before_any_work(files, monkeypatch, args):
    from skyjoin.cli import generate as gen_cmd
    from skyjoin.cli import inputs

    def forbidden(*a, **k):
        raise AssertionError("computed before --out was checked")

    for name in ("self_join", "self_join_chunks", "join", "DBSCAN"):
        monkeypatch.setattr(sj, name, forbidden)
    monkeypatch.setattr(inputs, "read_points", forbidden)
    monkeypatch.setattr(gen_cmd, "generate", forbidden)
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    one_error_line(run(args), 2)


def test_gpu_without_gpu(files):
    from skyjoin._core.device import GPUUnavailableError, resolve_device

    try:
        resolve_device("gpu")
        pytest.skip("a GPU is available here")
    except GPUUnavailableError:
        pass
    for cmd in (["join", files["npy"], "--eps", "1"],
                ["dbscan", files["npy"], "--eps", "1", "--min-samples", "3"],
                ["skyline", files["csv"]]):
        line = one_error_line(run(cmd + ["--device", "gpu"]), 1)
        assert "GPU" in line


def test_vv_shows_the_traceback_and_v_the_plan(files):
    res = run(["join", files["nan"], "--eps", "1", "--device", "cpu", "-vv"])
    assert res.exit_code == 1 and isinstance(res.exception, ValueError)
    res = run(["-v", "join", files["npy"], "--eps", "1", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "join plan:" in res.output and "output: counts only" in res.output
    assert "join:" in res.output and "read " in res.output
    res = run(["join", files["npy"], "--eps", "1", "--device", "cpu"])
    assert "join plan:" not in res.output


def test_system_errors_are_one_line(files, monkeypatch):
    from skyjoin.cli import join as join_cmd

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(join_cmd, "write_neighbor_table", full)
    line = one_error_line(run(["join", files["npy"], "--eps", "1", "--device", "cpu",
                               "--out", files["dir"] / "t.npz"]), 1)
    assert "No space left" in line
    assert not (files["dir"] / "t.npz").exists()
