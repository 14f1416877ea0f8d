"""The ``skyjoin`` command, through click's test runner."""

import os

import numpy as np
import pyarrow.parquet as pq
from click.testing import CliRunner

import skyjoin as sj
from skyjoin.cli import main


def test_help_of_every_command():
    r = CliRunner().invoke(main, ["--help"])
    assert r.exit_code == 0, r.output
    for cmd in ["join", "generate", "demo", "bench"]:
        assert cmd in r.output
        rr = CliRunner().invoke(main, [cmd, "--help"])
        assert rr.exit_code == 0, rr.output
        assert "Usage" in rr.output


def test_generate_then_join_to_parquet_and_npz(tmp_path):
    pts = tmp_path / "pts.npy"
    r = CliRunner().invoke(main, ["generate", "uniform", "-n", "3000", "-d", "2", "--seed", "3",
                                  "--out", str(pts)])
    assert r.exit_code == 0, r.output
    X = np.load(pts)
    assert X.shape == (3000, 2)
    want = sj.self_join(X, 2.0, device="cpu")
    out = tmp_path / "pairs.parquet"
    r = CliRunner().invoke(main, ["join", str(pts), "--eps", "2.0", "--out", str(out),
                                  "--device", "cpu", "--chunk-pairs", "500"])
    assert r.exit_code == 0, r.output
    assert f"{want.n_pairs:,} pairs" in r.output and "3,000 points, 2 dimensions" in r.output
    t = pq.read_table(out)
    got = np.column_stack([t.column("i").to_numpy(), t.column("j").to_numpy()])
    assert np.array_equal(got, want.pairs())
    npz = tmp_path / "table.npz"
    r = CliRunner().invoke(main, ["join", str(pts), "--eps", "2.0", "--out", str(npz), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    from skyjoin.io import read_neighbor_table

    assert read_neighbor_table(npz) == want


def test_join_counts_csv(tmp_path):
    pts = tmp_path / "pts.csv"
    X = np.random.default_rng(0).uniform(0, 5, (500, 3))
    np.savetxt(pts, X, delimiter=",", header="a,b,c", comments="")
    out = tmp_path / "counts.csv"
    r = CliRunner().invoke(main, ["join", str(pts), "--eps", "0.7", "--counts", "--columns", "a,c",
                                  "--out", str(out), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    got = np.loadtxt(out, delimiter=",", skiprows=1)
    want = sj.self_join(X[:, [0, 2]], 0.7, output="counts", device="cpu")
    assert np.array_equal(got, want)


def test_join_bad_input_is_reported(tmp_path):
    pts = tmp_path / "pts.npy"
    np.save(pts, np.array([[0.0, np.nan]]))
    r = CliRunner().invoke(main, ["join", str(pts), "--eps", "1", "--device", "cpu"])
    assert r.exit_code != 0
    assert "NaN" in str(r.exception)


def test_demo_small(tmp_path):
    r = CliRunner().invoke(main, ["demo", "-n", "3000", "--out", str(tmp_path), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "self-join" in r.output and "DBSCAN" in r.output and "skyline" in r.output
    assert os.path.getsize(tmp_path / "demo.png") > 10_000
