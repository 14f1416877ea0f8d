"""The streaming bench runs every path on one data set and reports the same
pair count for each (oracle: self_join's table), leaving no file behind."""

import os

import skyjoin as sj
from skyjoin.bench import streaming
from skyjoin.datasets import named_case


def test_streaming_bench_smoke(tmp_path, capsys):
    rep = streaming.main(["--n", "3000", "--eps", "2.0", "--repeat", "1", "--disk-mib", "1",
                          "--dir", str(tmp_path), "--formats", "npz,parquet,npy,csv",
                          "--codecs", "default,zstd", "--chunk-pairs", "2000",
                          "--json", str(tmp_path / "r.json")])
    X, _ = named_case("Unif2D1M-0.5")
    want = sj.self_join(X[:3000], 2.0, device="cpu").n_pairs
    assert rep["pairs"] == want > 0
    assert set(rep["paths"]) == {"in-memory", "chunks", "npz", "parquet default", "parquet zstd",
                                 "npy", "csv"}
    for name, row in rep["paths"].items():
        assert row["pairs"] == want, name
        assert row["seconds"] > 0 and row["pairs_per_s"] > 0
    assert rep["disk_write_fsync_bytes_per_s"] > 0
    assert "parquet default" in capsys.readouterr().out
    assert os.listdir(tmp_path) == ["r.json"]          # every output removed


def test_streaming_bench_offers_the_euclidean_cases_only():
    """A named case under another metric (the geographic set) is not run as
    a Euclidean join: the command refuses it."""
    import pytest

    with pytest.raises(SystemExit):
        streaming.main(["--case", "Geo2D1M-0.0015"])
