"""The ``skyjoin dbscan`` command and ``demo_dbscan``."""

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.cluster import DBSCAN as SkDBSCAN

from skyjoin.cli.dbscan import dbscan_cmd
from skyjoin.cli.demo import demo_dbscan


@pytest.fixture
def points(tmp_path):
    rng = np.random.default_rng(0)
    C = rng.uniform(0, 10, (4, 3))
    X = C[rng.integers(0, 4, 800)] + rng.normal(0, 0.4, (800, 3))
    path = tmp_path / "points.csv"
    np.savetxt(path, X, delimiter=",")
    return path, np.loadtxt(path, delimiter=",")


def _read_labels(path):
    return np.loadtxt(path, skiprows=1, dtype=np.int64, delimiter=",")


def test_single_run_writes_labels_and_plot(points, tmp_path):
    path, X = points
    out, png = tmp_path / "labels.csv", tmp_path / "clusters.png"
    res = CliRunner().invoke(dbscan_cmd, [str(path), "--eps", "0.5", "--min-samples", "6",
                                          "--out", str(out), "--plot", str(png),
                                          "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "clusters" in res.output
    expect = SkDBSCAN(eps=0.5, min_samples=6).fit(X).labels_
    np.testing.assert_array_equal(_read_labels(out), expect)
    assert png.stat().st_size > 1000


@pytest.mark.parametrize("method, path_name", [("auto", "grid-cpu"), ("hybrid", "table")])
def test_sweep_writes_one_file_per_clustering(points, tmp_path, method, path_name):
    path, X = points
    out, png = tmp_path / "lab.csv", tmp_path / "sweep.png"
    res = CliRunner().invoke(dbscan_cmd, [str(path), "--sweep-eps", "0.4,0.6",
                                          "--sweep-min-samples", "4,10", "--out", str(out),
                                          "--plot", str(png), "--device", "cpu",
                                          "--sweep-method", method])
    assert res.exit_code == 0, res.output
    assert "4 clusterings" in res.output and f"({method}, path {path_name})" in res.output
    for e in (0.4, 0.6):
        for m in (4, 10):
            got = _read_labels(tmp_path / f"lab_eps{e:g}_ms{m}.csv")
            np.testing.assert_array_equal(got, SkDBSCAN(eps=e, min_samples=m).fit(X).labels_)
    assert png.exists()


@pytest.mark.parametrize("args", [["--eps", "0.5"], ["--min-samples", "3"],
                                  ["--eps", "-1", "--min-samples", "3"],
                                  ["--sweep-eps", "a,b", "--min-samples", "3"]])
def test_bad_arguments(points, args):
    path, _ = points
    res = CliRunner().invoke(dbscan_cmd, [str(path), "--device", "cpu"] + args)
    assert res.exit_code != 0
    assert "Traceback" not in res.output


def test_demo_dbscan_draws_and_summarises():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # std 0.25: about 12 points a fine cell, the dense grid's (dense_grid_wins)
    X = np.random.default_rng(1).normal(size=(2000, 2)) * 0.25
    fig, ax = plt.subplots()
    s = demo_dbscan(X, eps=0.15, min_samples=5, ax=ax, device="cpu")
    plt.close(fig)
    sk = SkDBSCAN(eps=0.15, min_samples=5).fit(X)
    assert s["clusters"] == sk.labels_.max() + 1
    assert s["noise"] == int((sk.labels_ == -1).sum()) and s["n"] == 2000
    assert s["path"] == "grid-cpu"
