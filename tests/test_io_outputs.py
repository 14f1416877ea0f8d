"""skyjoin.io: atomic outputs, every output format read back by pandas/scipy,
the pandas index column, and messages that name the file, column and row."""

import os
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import skyjoin as sj
from skyjoin import io
from skyjoin.simjoin.result import PairChunk


@pytest.fixture
def table():
    X = np.random.default_rng(3).uniform(0, 4, (300, 2))
    return sj.self_join(X, 0.4, device="cpu")


def _chunks_then_fail(nt, exc):
    """The table's pairs as chunks of 50 rows, then ``exc`` from inside the iterator."""
    pairs = nt.pairs()
    rows = np.diff(nt.indptr)
    for r0 in range(0, nt.shape[0], 50):
        a, b = int(nt.indptr[r0]), int(nt.indptr[min(r0 + 50, nt.shape[0])])
        yield PairChunk(pairs[a:b, 0], pairs[a:b, 1], r0, min(r0 + 50, nt.shape[0]))
        if r0 >= 100 and rows.sum():
            raise exc


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
@pytest.mark.parametrize("exc", [RuntimeError("stopped"), KeyboardInterrupt()])
def test_interrupted_stream_leaves_no_file(tmp_path, table, ext, exc):
    path = tmp_path / f"pairs{ext}"
    with pytest.raises(type(exc)):
        with io.open_pair_writer(path, shape=table.shape) as w:
            w.write_chunks(_chunks_then_fail(table, exc))
    assert w.n_pairs > 0 and w.closed
    assert os.listdir(tmp_path) == []          # no final file, no temporary file


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "labels.npy"
    io.write_labels(path, [1, 2, 3])

    def broken_save(file, arr):
        with open(file, "wb") as fh:
            fh.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        io.write_labels(path, [4, 5])
    monkeypatch.undo()
    assert np.load(path).tolist() == [1, 2, 3]
    assert os.listdir(tmp_path) == ["labels.npy"]


def test_check_writable(tmp_path):
    assert io.check_writable(tmp_path / "a.csv") == str(tmp_path / "a.csv")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        io.check_writable(tmp_path / "no" / "a.csv")
    with pytest.raises(IsADirectoryError):
        io.check_writable(tmp_path)
    with pytest.raises(FileNotFoundError):
        io.write_labels(tmp_path / "no" / "a.csv", [1])


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
def test_table_as_pairs_round_trips_through_pandas(tmp_path, table, ext):
    path = tmp_path / f"pairs{ext}"
    assert io.write_neighbor_table(path, table) == table.n_pairs
    if ext == ".npy":
        got = pd.DataFrame(np.load(path), columns=["i", "j"])
    else:
        got = (pd.read_csv if ext == ".csv" else pd.read_parquet)(path)
    assert list(got.columns) == ["i", "j"]
    assert np.array_equal(got.to_numpy(), table.pairs())


def test_npz_is_scipy_layout(tmp_path, table):
    path = tmp_path / "table.npz"
    io.write_neighbor_table(path, table)
    m = sp.load_npz(path)
    assert m.shape == table.shape and m.nnz == table.n_pairs
    assert (m != table.to_scipy()).nnz == 0
    assert io.read_neighbor_table(path) == table
    # a matrix saved by scipy itself reads back as a table too
    other = tmp_path / "scipy.npz"
    sp.save_npz(other, table.to_scipy(), compressed=False)
    got = io.read_neighbor_table(other)
    assert np.array_equal(got.pairs(), table.pairs()) and got.shape == table.shape
    sp.save_npz(other, table.to_scipy().tocoo(), compressed=False)
    with pytest.raises(ValueError, match="'coo' format, not CSR"):
        io.read_neighbor_table(other)


@pytest.mark.parametrize("ext", [".csv", ".parquet", ".npy"])
def test_rows_keep_their_ids(tmp_path, ext):
    frame = pd.DataFrame({"name": ["a", "b", "c", "d"], "price": [3, 1, 2, 5],
                          "row": [9, 9, 9, 9]})
    path = tmp_path / f"best{ext}"
    io.write_rows(path, frame, [1, 3])
    if ext == ".npy":
        assert np.load(path).tolist() == [1, 3]
        return
    got = (pd.read_csv if ext == ".csv" else pd.read_parquet)(path)
    assert list(got.columns) == ["row_", "name", "price", "row"]
    assert got["row_"].tolist() == [1, 3] and got["name"].tolist() == ["b", "d"]


@pytest.mark.parametrize("ext", [".csv", ".parquet", ".npy"])
def test_points_round_trip(tmp_path, ext):
    X = np.random.default_rng(0).normal(size=(50, 3))
    path = tmp_path / f"pts{ext}"
    io.write_points(path, X, names=["lon", "lat", "h"] if ext != ".npy" else None)
    Y, names = io.read_points(path, return_names=True)
    assert np.array_equal(X, Y)
    assert names == (["x0", "x1", "x2"] if ext == ".npy" else ["lon", "lat", "h"])
    if ext == ".csv":
        assert list(pd.read_csv(path).columns) == ["lon", "lat", "h"]


def test_pandas_index_csv_is_dropped_with_a_notice(tmp_path):
    X = np.random.default_rng(0).uniform(0, 10, (40, 2))
    path = tmp_path / "saved.csv"
    pd.DataFrame(X, columns=["lon", "lat"]).to_csv(path)
    with pytest.warns(sj.DroppedIndexColumn, match="pandas index"):
        Y, names = io.read_points(path, return_names=True)
    assert names == ["lon", "lat"] and np.allclose(Y, X)
    with pytest.warns(sj.DroppedIndexColumn):
        assert list(io.read_frame(path).columns) == ["lon", "lat"]
    # a first column that is not 0..n-1, or is named, is data
    other = tmp_path / "named.csv"
    pd.DataFrame({"id": np.arange(40), "lon": X[:, 0]}).to_csv(other, index=False)
    shuffled = tmp_path / "shuffled.csv"
    pd.DataFrame(X, columns=["lon", "lat"], index=np.arange(40)[::-1]).to_csv(shuffled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert io.read_points(other).shape == (40, 2)
        assert io.read_points(shuffled).shape == (40, 3)


def test_pandas_index_parquet_is_dropped(tmp_path):
    path = tmp_path / "ix.parquet"
    pd.DataFrame({"a": [1.0, 2.0]}, index=[5, 7]).to_parquet(path)
    with pytest.warns(sj.DroppedIndexColumn):
        assert io.read_points(path).tolist() == [[1.0], [2.0]]


def test_messages_name_file_column_and_row(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("a,b\n1,2\n3,inf\n")
    with pytest.raises(ValueError, match=r"bad.csv' has an infinite value in column 'b' at "
                                         r"data row 1"):
        io.read_points(p)
    p.write_text("a,b\n1,2\n3,nan\n")
    with pytest.raises(ValueError, match=r"bad.csv' has a (NaN|missing) value.* column 'b' "
                                         r"at data row 1") as info:
        io.read_points(p)
    assert "read_frame" not in str(info.value)
    npy = tmp_path / "x.npy"
    np.save(npy, np.array([[0.0, 1.0], [np.nan, 2.0]]))
    with pytest.raises(ValueError, match=r"NaN value in column 0 at data row 1"):
        io.read_points(npy)
    with pytest.raises(ValueError, match="plain NumPy array, so its columns have no names"):
        io.read_points(npy, columns=["lon"])
    # labels are the file's positions, whatever the selection
    with pytest.raises(ValueError, match="column 0 at data row 1"):
        io.read_points(npy, columns=[1, 0])
    t = tmp_path / "t.csv"
    t.write_text("a,b\n1,x\n")
    with pytest.raises(ValueError) as info:
        io.read_points(t)
    assert "string" not in str(info.value) and "holds text" in str(info.value)
