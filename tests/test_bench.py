"""The benchmark harness and suites: honest names, warm-ups, interleaving, no quoted ratios."""

import json
import re
import struct

import numpy as np
import pytest
from click.testing import CliRunner

from skyjoin.bench import harness
from skyjoin.bench.harness import Case, Impl, Row, run_suite
from skyjoin.cli import main
from skyjoin.cli.bench import SUITES

MODES = [(suite, quick) for suite in SUITES for quick in (False, True)]


def _sizes_in(name):
    """Every size a case name carries: 50k, 1M, or a plain number of 1000 or more."""
    unit = {"": 1, "k": 1000, "M": 1_000_000}
    found = [int(a) * unit[b] for a, b in re.findall(r"(?<![\d.])(\d+)([kM]?)(?![\d.])", name)]
    return [v for v in found if v >= 1000]


def _cases(suite, quick):
    if suite == "distributed":
        return [(name, n) for name, _, n, *_ in SUITES[suite].case_specs("cpu", quick)]
    return [(c.name, c.params["n"]) for c in SUITES[suite].cases(device="cpu", quick=quick)]


@pytest.mark.parametrize("suite,quick", MODES)
def test_case_names_carry_their_real_sizes(suite, quick):
    cases = _cases(suite, quick)
    assert cases
    for name, n in cases:
        assert _sizes_in(name) == [n], (name, n)
    names = [name for name, _ in cases]
    assert len(set(names)) == len(names)


def test_quick_names_match_their_sizes():
    """The issue's example: a quick join case of 50,000 points is not called Unif2D1M."""
    from skyjoin.bench import join as bj

    quick = {c.name: c.params["n"] for c in bj.cases(quick=True)}
    assert "Unif2D10k-4" in quick and quick["Unif2D10k-4"] == bj.QUICK_N == 10_000
    assert not any("1M" in name for name in quick)
    assert _sizes_in("Unif2D1M-0.5") == [1_000_000] and _sizes_in("nba-8d-17264") == [17264]


@pytest.mark.parametrize("n,tag", [(1_000_000, "1M"), (20_000_000, "20M"), (50_000, "50k"),
                                   (17264, "17264"), (1_500_000, "1500k"), (999, "999")])
def test_size_tag(n, tag):
    assert harness.size_tag(n) == tag


@pytest.mark.parametrize("suite,quick", MODES)
def test_list_lists_every_case(suite, quick):
    args = ["bench", suite, "--device", "cpu", "--list"] + (["--quick"] if quick else [])
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert r.output.split() == [name for name, _ in _cases(suite, quick)]


def test_unknown_case_is_refused_with_the_names():
    r = CliRunner().invoke(main, ["bench", "join", "--device", "cpu", "--quick",
                                  "--case", "Unif2D1M-0.5", "--out", "unused"])
    assert r.exit_code == 1
    assert "Unif2D1M-0.5" in str(r.exception) and "Unif2D10k-4" in str(r.exception)


def test_every_suite_runner_takes_the_device(monkeypatch):
    """The GPU join goes through the same suite as the CPU one: skyjoin.self_join(device=...)."""
    from skyjoin.cli.bench import suite_runner

    seen = []
    for suite, mod in SUITES.items():
        monkeypatch.setattr(mod, "run", lambda **kw: seen.append(kw))
        suite_runner(suite, "gpu")(quick=True, out_dir="x", names=None)
    assert [kw["device"] for kw in seen] == ["gpu"] * len(SUITES)


def test_join_suite_times_self_join_on_the_device(monkeypatch):
    from skyjoin.bench import join as bj

    devices = []
    real = bj.sj.self_join

    def fake_self_join(X, eps, device=None, **kw):
        devices.append(device)
        return real(X, eps, device="cpu", **kw)

    monkeypatch.setattr(bj.sj, "self_join", fake_self_join)
    case = bj.cases(quick=True, device="gpu", names=["Unif2D10k-4"])[0]
    ours = [i for i in case.impls if i.ours]
    case.setup()
    try:
        for impl in ours:
            impl.fn()
    finally:
        case.teardown()
    assert devices and set(devices) == {"gpu"}
    assert all("gpu" in i.name for i in ours)


def test_warm_up_then_interleaved_best_of_three():
    log = []

    def impl(name, ours):
        def fn():
            log.append(name)
            return 7
        return Impl(name, fn, ours=ours)

    slow_warm = []
    impls = [impl("ours", True), impl("peer", False),
             Impl("slow", lambda: log.append("slow") or 7, warmup_fn=lambda: slow_warm.append(1),
                  repeat=1)]
    rows = run_suite("t", [Case("c-1k", {"n": 1000}, impls)], log=lambda s: None)
    # warm-up of each (the slow one through its own warm-up), then rounds
    assert log == ["ours", "peer", "ours", "peer", "slow", "ours", "peer", "ours", "peer"]
    assert slow_warm == [1]
    assert {r.impl: r.extra["timed_runs"] for r in rows} == {"ours": 3, "peer": 3, "slow": 1}
    assert all(r.size == 7 for r in rows)


def test_a_failing_warm_up_is_reported_and_not_timed():
    calls = []

    def bad():
        calls.append(1)
        raise RuntimeError("no")

    rows = run_suite("t", [Case("c", {}, [Impl("ours", lambda: 3, ours=True),
                                          Impl("bad", bad)])], log=lambda s: None)
    by = {r.impl: r for r in rows}
    assert calls == [1] and by["bad"].time_s is None and "RuntimeError: no" in by["bad"].error
    assert by["ours"].time_s is not None and by["ours"].size == 3


def test_no_ratio_against_a_quoted_figure():
    case = Case("c-1k", {"n": 1000}, [Impl("ours", lambda: 1, ours=True),
                                      Impl("peer", lambda: 1)],
                quoted={"Paper X, 16 threads, 1M points": 0.5})
    rows = run_suite("t", [case], log=lambda s: None)
    rs = harness.ratios(rows)
    assert [(q["ours"], q["peer"]) for q in rs] == [("ours", "peer")]
    table = harness.format_table(rows)
    assert harness.QUOTED_LABEL in table
    quoted_lines = [ln for ln in table.splitlines() if "Paper X" in ln]
    assert len(quoted_lines) == 1 and "0.500" in quoted_lines[0]
    assert not re.search(r"\d+\.\d+x", quoted_lines[0])


def test_skyline_suite_prints_no_ratio_against_hybrid(tmp_path):
    """The real suite: SkyBench Hybrid's quoted time is shown, never divided by ours."""
    from skyjoin.bench import skyline as bs

    out = []
    rows = bs.run(device="cpu", quick=True, out_dir=str(tmp_path),
                  names=["50k-12d-independent"], log=out.append)
    text = "\n".join(out)
    quoted = [r for r in rows if r.quoted_s is not None]
    assert [r.quoted_s for r in quoted] == [bs.HYBRID_QUOTED_S[("independent", 2)]]
    assert "Hybrid" in text and harness.QUOTED_LABEL in text
    for line in text.splitlines():
        if "Hybrid" in line:
            assert not re.search(r"\d\s*x\b|\d+\.\d+x", line), line
    data = json.loads((tmp_path / "skyline-cpu.json").read_text())
    assert all("Hybrid" not in q["peer"] for q in data["ratios"])


def _png_size(path):
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.parametrize("n_cases,n_impls", [(3, 2), (40, 5)])
def test_chart_width_and_legend_outside(tmp_path, n_cases, n_impls):
    import matplotlib.pyplot as plt

    rows = [Row("t", f"case-{c}", f"implementation number {k} with a long name", k == 0,
                0.01 * (c + 1) * (k + 1), 1, {}, {}) for c in range(n_cases)
            for k in range(n_impls)]
    _, png = harness.write_report("t", rows, str(tmp_path))
    w, h = _png_size(png)
    assert w <= harness.MAX_CHART_PX and h > 0
    fig = harness.chart(rows, "t")
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    axes = ax.get_window_extent()
    assert legend.x0 >= axes.x1                    # beside the bars, not over them
    assert legend.x1 <= fig.bbox.width + 1          # and inside the picture
    plt.close(fig)


def test_bench_join_quick_end_to_end(tmp_path):
    from skyjoin.bench import join as bj

    from scipy.spatial import cKDTree

    case = bj.join_cases(quick=True)[0]
    rows = bj.run(quick=True, out_dir=str(tmp_path), names=[case.name], memory=False,
                  log=lambda s: None)
    sizes = {r.size for r in rows if r.size is not None}
    assert len(sizes) == 1  # ours and every peer agree on the pairs
    pairs = cKDTree(case.load()).query_pairs(case.eps, output_type="ndarray")
    assert sizes == {2 * len(pairs)}
    data = json.loads((tmp_path / "join-cpu.json").read_text())
    assert data["ratios"] and all(q["speedup"] > 0 for q in data["ratios"])
    assert all(r["extra"]["timed_runs"] >= 1 for r in data["rows"] if r["time_s"] is not None)
    assert np.isfinite([q["speedup"] for q in data["ratios"]]).all()


@pytest.mark.gpu
def test_gpu_tiled_bruteforce_peer_counts_and_pairs():
    """Both GPU brute-force peers share one tiled loop; small tiles cross tile edges."""
    from skyjoin.bench.peers_gpu import tiled_bruteforce_counts, tiled_bruteforce_pairs

    rng = np.random.default_rng(3)
    X = rng.random((300, 3))
    Q = X[:70]
    d2 = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    want = d2 <= 0.2 ** 2
    for tq, tx in ((256, 1 << 20), (16, 50)):
        counts = tiled_bruteforce_counts(Q, X, 0.2, tile_q=tq, tile_x=tx)
        np.testing.assert_array_equal(counts, want.sum(axis=1))
        pairs = tiled_bruteforce_pairs(Q, X, 0.2, tile_q=tq, tile_x=tx)
        assert sorted(map(tuple, pairs.tolist())) == sorted(zip(*np.nonzero(want)))


def test_contention_suite_is_a_cpu_suite_of_the_command():
    """``skyjoin bench contention`` lists its three operators on any machine
    and refuses ``--device gpu`` as a usage error (it times the CPU)."""
    listed = CliRunner().invoke(main, ["bench", "contention", "--list"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.split() == ["join-2d-1M", "dbscan-2d-200k", "skyline-8d-50k"]
    refused = CliRunner().invoke(main, ["bench", "contention", "--device", "gpu"])
    assert refused.exit_code == 2
    assert "times the CPU operators" in refused.output
