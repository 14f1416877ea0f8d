"""The ``skyjoin skyline`` command, the demo helper and the bench suite's cases."""

from __future__ import annotations

import numpy as np
import pytest

click_testing = pytest.importorskip("click.testing")
pd = pytest.importorskip("pandas")


@pytest.fixture
def cars(tmp_path):
    path = tmp_path / "cars.csv"
    path.write_text("name,price,rating,hp\na,3,5,100\nb,1,2,90\nc,2,4,80\nd,2,4,80\ne,5,5,70\n")
    return path


def run(args):
    from skyjoin.cli.skyline import skyline_cmd

    return click_testing.CliRunner().invoke(skyline_cmd, [str(a) for a in args])


def test_cli_min_max_out_plot(cars, tmp_path):
    out, png = tmp_path / "best.csv", tmp_path / "best.png"
    res = run([cars, "--min", "price", "--max", "rating", "--device", "cpu", "--out", out,
               "--plot", png])
    assert res.exit_code == 0, res.output
    assert "4 skyline rows of 5" in res.output
    got = pd.read_csv(out)
    assert list(got["name"]) == ["a", "b", "c", "d"]
    assert png.stat().st_size > 1000


def test_cli_distinct_positions_parallel_plot(cars, tmp_path):
    png = tmp_path / "pc.png"
    res = run([cars, "--min", "1", "--max", "2,3", "--distinct", "--device", "cpu", "--plot", png])
    assert res.exit_code == 0, res.output
    assert "skyline rows of 5" in res.output
    assert png.exists()


def test_cli_errors(cars):
    res = run([cars, "--min", "price", "--max", "price", "--device", "cpu"])
    assert res.exit_code != 0 and "both min and max" in res.output
    res = run([cars, "--min", "nope", "--device", "cpu"])
    assert res.exit_code != 0 and "nope" in res.output


def test_cli_text_column_is_refused_with_the_numeric_ones_named(cars):
    """As in ``join``: every column takes part unless chosen, and a text
    column is refused, naming it and the columns that hold numbers."""
    res = run([cars, "--device", "cpu"])
    assert res.exit_code == 1, res.output
    assert "column 'name'" in res.output and "holds text" in res.output
    assert "'a' at data row 0" in res.output
    assert "--min/--max" in res.output and "price, rating, hp" in res.output
    res = run([cars, "--device", "cpu", "--max", "name"])
    assert res.exit_code == 1 and "column 'name'" in res.output


def test_cli_all_numeric_npy_out(cars, tmp_path):
    out = tmp_path / "idx.npy"
    res = run([cars, "--device", "cpu", "--out", out, "--min", "price,rating,hp"])
    assert res.exit_code == 0, res.output
    X = pd.read_csv(cars)[["price", "rating", "hp"]].to_numpy()
    import skyjoin as sj

    np.testing.assert_array_equal(np.load(out), sj.skyline(X, device="cpu"))


def test_cli_counters_of_the_algorithm_that_ran(cars):
    """Two columns: sort2d, whose stats count no dominance or mask tests, so
    the line names none; SkyAlign by name prints its counters."""
    res = run([cars, "--min", "price", "--max", "rating", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "cpu, sort2d" in res.output
    assert "pre-filter kept" in res.output and "tests" not in res.output
    res = run([cars, "--min", "price", "--max", "rating", "--device", "cpu",
               "--algorithm", "skyalign"])
    assert res.exit_code == 0, res.output
    assert "cpu, skyalign" in res.output and "dominance tests" in res.output
    assert "mask tests" in res.output


def test_demo_skyline_draws():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from skyjoin.cli.demo import demo_skyline

    fig, ax = plt.subplots()
    info = demo_skyline(3000, d=2, device="cpu", ax=ax)
    plt.close(fig)
    assert info["n"] == 3000 and 0 < info["skyline"] <= 3000
    info = demo_skyline(np.random.default_rng(0).random((500, 5)), device="cpu")
    assert info["d"] == 5


def test_bench_cases_build():
    from skyjoin.bench import skyline as bs

    names = [c.name for c in bs.cases(device="cpu", quick=True)]
    assert "5k-12d-independent" in names and "50k-12d-anticorrelated" in names
    assert any(n.startswith("sweep-") for n in names)
