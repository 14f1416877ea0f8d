"""``--metric`` and ``--degrees`` on ``skyjoin dbscan`` and ``skyjoin join``,
``skyjoin generate geographic``, and the map that haversine clusters are
drawn on.  Oracles: scikit-learn's DBSCAN and haversine distances in float64."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.cluster import DBSCAN as SkDBSCAN
from sklearn.metrics.pairwise import haversine_distances

import skyjoin as sj
from skyjoin import datasets as ds
from skyjoin.cli import main
from skyjoin.io import read_neighbor_table

EPS = 150.0 / ds.EARTH_RADIUS_KM          # 150 km in radians
JOIN_TAKES_METRIC = "metric" in inspect.signature(sj.self_join).parameters
SWEEP_TAKES_METRIC = "metric" in inspect.signature(sj.dbscan_sweep).parameters


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def read_labels(path):
    return np.loadtxt(path, skiprows=1, dtype=np.int64, delimiter=",")


@pytest.fixture(scope="module")
def geo(tmp_path_factory):
    """The generator's data, written by the command: degrees in CSV, and
    the same points in radians (numpy.radians of the degrees, as the
    command converts them) in .npy."""
    folder = tmp_path_factory.mktemp("geo")
    deg = folder / "geo.csv"
    res = run(["generate", "geographic", "-n", "3000", "--seed", "4", "--degrees", "--out", deg])
    assert res.exit_code == 0, res.output
    assert "(lat, lon in degrees)" in res.output
    D = np.loadtxt(deg, delimiter=",", skiprows=1)
    assert np.array_equal(D, ds.geographic(3000, seed=4, degrees=True))
    rad = folder / "geo.npy"
    np.save(rad, np.radians(D))
    return folder, deg, rad, np.radians(D)


def _labels(folder, args, name):
    out = folder / name
    res = run(["dbscan"] + args + ["--out", out, "--device", "cpu"])
    assert res.exit_code == 0, res.output
    return read_labels(out), res.output


def test_generate_geographic_columns_and_radians(tmp_path):
    out = tmp_path / "g.csv"
    res = run(["generate", "geographic", "-n", "500", "-d", "2", "--seed", "1", "--out", out])
    assert res.exit_code == 0, res.output
    assert "(lat, lon in radians)" in res.output
    assert out.read_text().splitlines()[0] == "lat,lon"
    X = np.loadtxt(out, delimiter=",", skiprows=1)
    assert np.array_equal(X, ds.geographic(500, seed=1))


def test_haversine_dbscan_equals_scikit_learn(geo):
    folder, _, rad, X = geo
    got, text = _labels(folder, [rad, "--metric", "haversine", "--eps", EPS,
                                 "--min-samples", "10"], "rad.csv")
    expect = SkDBSCAN(eps=EPS, min_samples=10, metric="haversine").fit(X).labels_
    np.testing.assert_array_equal(got, expect)
    assert expect.max() >= 15 and "(haversine)" in text and "in radians" in text


def test_degrees_and_radians_give_identical_labels(geo):
    folder, deg, rad, X = geo
    args = ["--metric", "haversine", "--eps", EPS, "--min-samples", "10"]
    from_deg, text = _labels(folder, [deg, "--degrees"] + args, "deg.csv")
    from_rad, _ = _labels(folder, [rad] + args, "rad2.csv")
    np.testing.assert_array_equal(from_deg, from_rad)
    assert "(lat, lon in degrees)" in text
    # and both are the clusters of the generator: the polar ones included
    y = ds.geographic(3000, seed=4, return_labels=True)[1]
    for k in (0, 1, 2):                     # north pole, south pole, antimeridian
        assert len(np.unique(from_deg[y == k])) == 1 and from_deg[y == k][0] >= 0


@pytest.mark.parametrize("metric, eps", [("manhattan", 0.7), ("chebyshev", 0.4),
                                         ("cosine", 0.002)])
def test_other_metrics_equal_scikit_learn(tmp_path, metric, eps):
    X = ds.blobs(1500, 3, centers=6, std=0.4, low=1.0, high=10.0, seed=3)
    path = tmp_path / "b.npy"
    np.save(path, X)
    got, text = _labels(tmp_path, [path, "--metric", metric, "--eps", eps,
                                   "--min-samples", "5"], "l.csv")
    np.testing.assert_array_equal(got, SkDBSCAN(eps=eps, min_samples=5, metric=metric)
                                  .fit(X).labels_)
    assert f"({metric})" in text


def test_columns_choose_lat_lon(tmp_path, geo):
    _, _, _, X = geo
    path = tmp_path / "three.csv"
    table = np.column_stack([np.arange(len(X)), X])
    np.savetxt(path, table, delimiter=",", header="id,lat,lon", comments="", fmt="%.17g")
    got, _ = _labels(tmp_path, [path, "--columns", "lat,lon", "--metric", "haversine",
                                "--eps", EPS, "--min-samples", "10"], "l.csv")
    np.testing.assert_array_equal(
        got, SkDBSCAN(eps=EPS, min_samples=10, metric="haversine").fit(X).labels_)


def test_verbose_logs_the_conversion_and_the_plan(geo):
    _, deg, _, _ = geo
    res = run(["-v", "dbscan", deg, "--degrees", "--metric", "haversine", "--eps", EPS,
               "--min-samples", "10", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "(lat, lon) in degrees, converted to radians" in res.output
    assert "dbscan plan" in res.output


def _usage_error(args) -> str:
    res = run(args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    return res.output.strip().splitlines()[-1]


@pytest.mark.parametrize("cmd", [["dbscan", "--min-samples", "5"], ["join"]])
def test_usage_errors(tmp_path, geo, cmd):
    _, deg, rad, X = geo
    base = [cmd[0], "{f}", "--eps", "0.01"] + cmd[1:] + ["--device", "cpu"]

    def args(f, *more):
        return [a.format(f=f) if isinstance(a, str) else a for a in base] + list(more)

    line = _usage_error(args(rad, "--degrees"))
    assert "--degrees" in line and "--metric haversine" in line and "euclidean" in line
    line = _usage_error(args(rad, "--degrees", "--metric", "cosine"))
    assert "got --metric cosine" in line
    line = _usage_error(args(deg, "--metric", "haversine"))       # degrees read as radians
    assert "[-pi/2, pi/2] radians" in line and "'lat'" in line and "give --degrees" in line
    three = tmp_path / "three.npy"
    np.save(three, np.column_stack([X, X[:, :1]]))
    line = _usage_error(args(three, "--metric", "haversine"))
    assert "exactly 2 columns" in line and "3 columns" in line and "--columns" in line
    bad = tmp_path / "bad.csv"
    D = np.degrees(X)
    D[7, 0] = 90.5
    np.savetxt(bad, D, delimiter=",", header="lat,lon", comments="", fmt="%.17g")
    line = _usage_error(args(bad, "--metric", "haversine", "--degrees"))
    assert "[-90, 90] degrees" in line and "90.5 at data row 7" in line
    assert "1 latitude out of range" in line
    D = np.degrees(X)
    D[[3, 9], 1] = [400.0, -361.0]                  # the library refuses these too
    np.savetxt(bad, D, delimiter=",", header="lat,lon", comments="", fmt="%.17g")
    line = _usage_error(args(bad, "--metric", "haversine", "--degrees"))
    assert "[-360, 360] degrees" in line and "400.0 at data row 3" in line
    assert "2 longitudes out of range" in line
    line = _usage_error(args(rad, "--metric", "haversine", "--local-cluster", "2"))
    assert "--metric haversine runs on this machine" in line
    line = _usage_error(args(rad, "--metric", "minkowski"))
    assert "'--metric'" in line


def test_generate_usage_errors(tmp_path):
    out = str(tmp_path / "g.npy")
    line = _usage_error(["generate", "geographic", "-n", "10", "-d", "3", "--out", out])
    assert "geographic data has 2 dimensions, got 3" in line
    line = _usage_error(["generate", "uniform", "-n", "10", "--out", out])
    assert "'-d' / '--dims'" in line
    line = _usage_error(["generate", "blobs", "-n", "10", "-d", "2", "--degrees", "--out", out])
    assert "--degrees is for geographic data" in line


def test_haversine_plot_is_a_map(geo, tmp_path):
    folder, deg, _, _ = geo
    png = tmp_path / "map.png"
    res = run(["dbscan", deg, "--degrees", "--metric", "haversine", "--eps", EPS,
               "--min-samples", "10", "--plot", png, "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert png.stat().st_size > 20_000


def test_map_axes_draw_every_point_and_the_polar_caps():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skyjoin.cli.plots import MAP_PROJECTION, POLAR_CAP_DEG, plot_map_clusters

    X, y = ds.geographic(2000, n_clusters=5, seed=2, return_labels=True)
    X[:5, 1] += 2 * np.pi                   # another period of longitude: drawn in place
    fig = plt.figure()
    ax = fig.add_subplot(projection=MAP_PROJECTION)
    plot_map_clusters(ax, X, y, title="t")
    lon = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    assert len(lon) == 2000 and lon.min() >= -np.pi and lon.max() < np.pi
    north, south = ax.child_axes
    near = [len(np.concatenate([c.get_offsets() for c in a.collections])) for a in (north, south)]
    cap = np.radians(90 - POLAR_CAP_DEG)
    assert near == [int((X[:, 0] > cap).sum()), int((X[:, 0] < -cap).sum())]
    r = np.concatenate([c.get_offsets()[:, 1] for c in north.collections])
    assert r.max() < POLAR_CAP_DEG and np.allclose(np.sort(r), np.sort(
        90 - np.degrees(X[X[:, 0] > cap, 0])))
    plt.close(fig)


def test_demo_clusters_lat_lon_on_a_map(tmp_path):
    from skyjoin.cli.demo import geo_setting, run_demo

    lines = []
    info = run_demo(n=3000, out_dir=str(tmp_path), device="cpu", echo=lines.append)
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    n, km = geo_setting(3000)
    G = ds.geographic(n, n_clusters=12, spread_km=500.0, seed=0)
    sk = SkDBSCAN(eps=km / ds.EARTH_RADIUS_KM, min_samples=10, metric="haversine").fit(G)
    assert info["geo_clusters"] == sk.labels_.max() + 1 >= 10
    assert any(ln.startswith("DBSCAN haversine, 3,000 lat/lon") for ln in lines)


@pytest.mark.skipif(not JOIN_TAKES_METRIC,
                    reason="self_join takes no metric= yet (the library's haversine join)")
def test_haversine_join_equals_brute_force(geo, tmp_path):
    folder, deg, rad, X = geo
    eps = 40.0 / ds.EARTH_RADIUS_KM
    expect = haversine_distances(X) <= eps
    np.fill_diagonal(expect, False)
    for f, more in ((rad, []), (deg, ["--degrees"])):
        out = tmp_path / "t.npz"
        res = run(["join", f, "--metric", "haversine", "--eps", eps, "--out", out,
                   "--device", "cpu"] + more)
        assert res.exit_code == 0, res.output
        assert "(haversine)" in res.output
        A = read_neighbor_table(out).to_scipy().toarray().astype(bool)
        np.testing.assert_array_equal(A, expect)
    res = run(["join", rad, rad, "--metric", "haversine", "--eps", eps, "--counts",
               "--out", tmp_path / "c.npy", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), expect.sum(1) + 1)


@pytest.mark.skipif(not SWEEP_TAKES_METRIC,
                    reason="dbscan_sweep takes no metric= yet (the library's haversine sweep)")
def test_haversine_sweep_equals_scikit_learn(geo, tmp_path):
    folder, deg, _, X = geo
    out = tmp_path / "l.csv"
    res = run(["dbscan", deg, "--degrees", "--metric", "haversine", "--sweep-eps",
               f"{EPS},{2 * EPS}", "--sweep-min-samples", "5,10", "--out", out,
               "--device", "cpu"])
    assert res.exit_code == 0, res.output
    for e in (EPS, 2 * EPS):
        for m in (5, 10):
            got = read_labels(tmp_path / f"l_eps{e:g}_ms{m}.csv")
            np.testing.assert_array_equal(
                got, SkDBSCAN(eps=e, min_samples=m, metric="haversine").fit(X).labels_)
