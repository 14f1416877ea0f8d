"""What the commands write: every format read back by pandas/scipy and equal
to the API's answer; R join S; the summary from counts alone; interrupted
writes; the pandas-index CSV; plots and wording."""

import os

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

import skyjoin as sj
from skyjoin.cli import main


@pytest.fixture
def pts(tmp_path):
    X = np.random.default_rng(1).uniform(0, 10, (400, 2))
    path = tmp_path / "pts.csv"
    pd.DataFrame(X, columns=["lon", "lat"]).to_csv(path, index=False)
    return path, pd.read_csv(path).to_numpy()


def run(args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res


def _read_pairs(path):
    ext = os.path.splitext(path)[1]
    if ext == ".npy":
        return pd.DataFrame(np.load(path), columns=["i", "j"])
    return (pd.read_csv if ext == ".csv" else pd.read_parquet)(path)


def _read_column(path, name):
    ext = os.path.splitext(path)[1]
    if ext == ".npy":
        return np.load(path)
    return (pd.read_csv if ext == ".csv" else pd.read_parquet)(path)[name].to_numpy()


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
def test_join_pairs_every_format(pts, tmp_path, ext):
    path, X = pts
    out = tmp_path / f"pairs{ext}"
    res = run(["join", path, "--eps", "0.8", "--out", out, "--device", "cpu",
               "--chunk-pairs", "300"])
    assert res.exit_code == 0, res.output
    want = sj.self_join(X, 0.8, device="cpu")
    got = _read_pairs(out)
    assert list(got.columns) == ["i", "j"]
    assert np.array_equal(got.to_numpy(), want.pairs())
    assert f"{want.n_pairs:,} pairs" in res.output


def test_join_table_npz_loads_with_scipy(pts, tmp_path):
    path, X = pts
    out = tmp_path / "table.npz"
    assert run(["join", path, "--eps", "0.8", "--out", out, "--device", "cpu"]).exit_code == 0
    want = sj.self_join(X, 0.8, device="cpu")
    m = sp.load_npz(out)
    assert (m != want.to_scipy()).nnz == 0 and m.shape == want.shape
    from skyjoin.io import read_neighbor_table

    assert read_neighbor_table(out) == want


@pytest.mark.parametrize("ext", [".csv", ".parquet", ".npy"])
def test_counts_and_labels_every_format(pts, tmp_path, ext):
    path, X = pts
    out = tmp_path / f"counts{ext}"
    assert run(["join", path, "--eps", "0.8", "--counts", "--out", out,
                "--device", "cpu"]).exit_code == 0
    assert np.array_equal(_read_column(out, "count"),
                          sj.self_join(X, 0.8, output="counts", device="cpu"))
    lab = tmp_path / f"labels{ext}"
    res = run(["dbscan", path, "--eps", "0.8", "--min-samples", "5", "--out", lab,
               "--device", "cpu"])
    assert res.exit_code == 0, res.output
    from sklearn.cluster import DBSCAN

    assert np.array_equal(_read_column(lab, "label"),
                          DBSCAN(eps=0.8, min_samples=5).fit(X).labels_)


def test_r_join_s(pts, tmp_path):
    path, S = pts
    R = np.random.default_rng(2).uniform(0, 10, (50, 2))
    rpath = tmp_path / "r.npy"
    np.save(rpath, R)
    out = tmp_path / "rs.parquet"
    res = run(["join", rpath, path, "--eps", "0.7", "--out", out, "--device", "cpu"])
    assert res.exit_code == 0, res.output
    want = sj.join(R, S, 0.7, device="cpu")
    assert np.array_equal(_read_pairs(out).to_numpy(), want.pairs())
    assert "50 points joined with 400 points" in res.output
    res = run(["join", rpath, path, "--eps", "0.7", "--counts", "--out", tmp_path / "c.npy",
               "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert np.array_equal(np.load(tmp_path / "c.npy"),
                          sj.join(R, S, 0.7, output="counts", device="cpu"))


def test_summary_uses_counts_only(pts, monkeypatch):
    path, X = pts
    outputs = []
    real = sj.self_join

    def spy(*args, **kwargs):
        outputs.append(kwargs.get("output", "table"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sj, "self_join", spy)
    res = run(["join", path, "--eps", "0.8", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert outputs == ["counts", "counts"]       # the first rows (loading), then all
    assert f"{real(X, 0.8, device='cpu').n_pairs:,} pairs" in res.output


def test_interrupted_join_leaves_no_file(pts, tmp_path, monkeypatch):
    path, X = pts
    real = sj.self_join_chunks

    class Stopped:
        """The real stream, interrupted at its third chunk."""

        def __init__(self, stream):
            self.stream, self.k = stream, 0

        def count(self):
            return self.stream.count()

        def __iter__(self):
            return self

        def __next__(self):
            if self.k == 2:
                raise KeyboardInterrupt
            self.k += 1
            return next(self.stream)

    def stopped(*args, **kwargs):
        return Stopped(real(*args, **kwargs))

    monkeypatch.setattr(sj, "self_join_chunks", stopped)
    before = set(os.listdir(tmp_path))
    for ext in (".parquet", ".csv", ".npy"):
        res = run(["join", path, "--eps", "0.8", "--out", tmp_path / f"p{ext}",
                   "--chunk-pairs", "100", "--device", "cpu"])
        assert res.exit_code != 0
        assert set(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("ext", [".csv", ".parquet", ".npy"])
def test_skyline_keeps_row_ids(tmp_path, ext):
    cars = tmp_path / "cars.csv"
    cars.write_text("name,price,rating\na,3,5\nb,1,2\nc,2,4\nd,4,1\n")
    out = tmp_path / f"best{ext}"
    res = run(["skyline", cars, "--min", "price", "--max", "rating", "--out", out,
               "--device", "cpu"])
    assert res.exit_code == 0, res.output
    if ext == ".npy":
        assert np.load(out).tolist() == [0, 1, 2]
        return
    got = (pd.read_csv if ext == ".csv" else pd.read_parquet)(out)
    assert list(got.columns) == ["row", "name", "price", "rating"]
    assert got["row"].tolist() == [0, 1, 2] and got["name"].tolist() == ["a", "b", "c"]


def test_pandas_index_csv(tmp_path):
    X = np.random.default_rng(0).uniform(0, 5, (300, 2))
    path = tmp_path / "saved.csv"
    pd.DataFrame(X, columns=["lon", "lat"]).to_csv(path)      # with its index
    res = run(["join", path, "--eps", "0.5", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "Notice:" in res.output and "pandas index" in res.output
    want = sj.self_join(X, 0.5, device="cpu").n_pairs
    assert "300 points, 2 dimensions" in res.output and f"{want:,} pairs" in res.output


def test_generate_csv_has_named_columns(tmp_path):
    out = tmp_path / "g.csv"
    assert run(["generate", "uniform", "-n", "20", "-d", "1", "--out", out]).exit_code == 0
    assert list(pd.read_csv(out).columns) == ["x0"]
    res = run(["join", out, "--eps", "5", "--columns", "x0", "--device", "cpu"])
    assert res.exit_code == 0 and "20 points, 1 dimension," in res.output


def test_dbscan_wording_plot_names_and_sweep_order(tmp_path, monkeypatch):
    from skyjoin.cli import dbscan as dbscan_cmd

    path = tmp_path / "line.csv"
    pd.DataFrame({"lon": np.linspace(0, 1, 50), "lat": np.zeros(50)}).to_csv(path, index=False)
    drawn = []
    monkeypatch.setattr(dbscan_cmd, "save_clusters",
                        lambda plot, panels, X, names=None, metric="euclidean":
                        drawn.append((panels, names)))
    res = run(["dbscan", path, "--columns", "lon", "--eps", "0.1", "--min-samples", "2",
               "--plot", tmp_path / "c.png", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "1 dimension " in res.output and ": 1 cluster," in res.output
    assert drawn[0][1] == ["lon"]
    res = run(["dbscan", path, "--sweep-eps", "0.1,0.05", "--sweep-min-samples", "10,2,5",
               "--plot", tmp_path / "s.png", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    rows = [ln.split() for ln in res.output.splitlines() if ln.strip()[:1].isdigit()
            and len(ln.split()) == 7]
    keys = [(float(r[0]), int(r[1])) for r in rows]
    assert keys == sorted(keys) and len(keys) == 6
    titles = [t for _, t in drawn[1][0]]
    assert titles[0].startswith("eps=0.05, min_samples=2") and len(titles) == 6
    assert drawn[1][1] == ["lon", "lat"]


def test_cluster_colours_have_no_grey_but_noise():
    from matplotlib.colors import to_rgba

    from skyjoin.cli.plots import CLUSTER_COLORS, NOISE_COLOR, cluster_colors

    labels = np.arange(-1, 3 * CLUSTER_COLORS)
    c = cluster_colors(labels)
    grey = np.isclose(c[:, 0], c[:, 1], atol=0.02) & np.isclose(c[:, 1], c[:, 2], atol=0.02)
    assert grey[0] and not grey[1:].any()
    assert tuple(c[0]) == to_rgba(NOISE_COLOR)
    assert len({tuple(x) for x in c[1:CLUSTER_COLORS + 1]}) == CLUSTER_COLORS


def test_plot_file_is_a_picture(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from skyjoin.cli.plots import save_clusters

    X = np.random.default_rng(0).normal(size=(100, 2))
    labels = np.where(X[:, 0] > 0, 0, -1)
    save_clusters(tmp_path / "a.png", [(labels, "t")], X, names=["lon", "lat"])
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert os.listdir(tmp_path) == ["a.png"]


def test_stream_progress_counts_pairs_after_the_count(pts, tmp_path):
    """The streamed write's bar runs over the pairs (total known from the
    count pass, rate in pairs per second), after a notice of the count."""
    path, X = pts
    out = tmp_path / "p.parquet"
    res = run(["join", path, "--eps", "0.8", "--out", out, "--progress", "--chunk-pairs", "500",
               "--device", "cpu"])
    assert res.exit_code == 0, res.output
    n_pairs = sj.self_join(X, 0.8, device="cpu").n_pairs
    text = res.output
    assert text.index("counting the neighbours") < text.index("pair/s")
    assert f"{n_pairs / 1000:.2f}k/{n_pairs / 1000:.2f}k" in text        # unit_scale
    got = pd.read_parquet(out)
    assert len(got) == n_pairs
