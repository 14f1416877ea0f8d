"""Tests of skyjoin.io: readers, writers, round trips, the streaming Parquet writer."""

import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from skyjoin import io
from skyjoin.simjoin.result import NeighborTable, PairChunk

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
NBA = os.path.join(DATA, "nba-U-8-17264.csv")
GDS = os.path.join(DATA, "gdsjoin-test-2d-100k.txt")


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    return str(path)


# --------------------------------------------------------------------------
# the shared files
# --------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.exists(NBA), reason="shared data not present")
def test_nba_file_trailing_comma():
    X = io.read_points(NBA)
    assert X.shape == (17264, 8) and X.dtype == np.float64 and X.flags.c_contiguous
    assert np.isfinite(X).all() and X.min() >= 0 and X.max() < 1
    first = [float(v) for v in open(NBA).readline().strip().rstrip(",").split(",")]
    assert X[0].tolist() == first


@pytest.mark.skipif(not os.path.exists(GDS), reason="shared data not present")
def test_gds_file():
    X = io.read_points(GDS)
    assert X.shape == (100_000, 2)
    ref = np.loadtxt(GDS, delimiter=",")
    assert np.array_equal(X, ref)          # correctly rounded, like NumPy's parser
    assert np.array_equal(io.read_points(GDS, columns=[1]), ref[:, 1:])


# --------------------------------------------------------------------------
# text formats
# --------------------------------------------------------------------------
@pytest.mark.parametrize("sep", [",", "\t", ";", " ", "   "])
@pytest.mark.parametrize("header", [False, True])
@pytest.mark.parametrize("trailing", [False, True])
def test_text_roundtrip(tmp_path, sep, header, trailing):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3)) * 10.0 ** rng.integers(-5, 5, (50, 3))
    lines = [sep.join(repr(float(v)) for v in row) + (sep if trailing and sep.strip() else "")
             for row in X]
    if header:
        lines.insert(0, sep.join(["a", "b", "c"]) + (sep if trailing and sep.strip() else ""))
    path = _write(tmp_path / "p.txt", "\n".join(lines) + "\n")
    Y = io.read_points(path)
    assert np.array_equal(X, Y)
    if header:
        assert np.array_equal(io.read_points(path, columns=["c", "a"]), X[:, [2, 0]])
        assert list(io.read_frame(path).columns) == ["a", "b", "c"]
    else:
        assert list(io.read_frame(path).columns) == [0, 1, 2]
    assert np.array_equal(io.read_points(path, columns=[2, 0]), X[:, [2, 0]])
    assert np.array_equal(io.read_points(path, columns=-1), X[:, [2]])


def test_header_detection_and_override(tmp_path):
    path = _write(tmp_path / "h.csv", "x,y\n1,2\n3,4\n")
    assert io.read_points(path).tolist() == [[1, 2], [3, 4]]
    # numeric-looking header: only an explicit header=True skips it
    path2 = _write(tmp_path / "n.csv", "1,2\n3,4\n")
    assert io.read_points(path2).shape == (2, 2)
    assert io.read_points(path2, header=True).tolist() == [[3, 4]]
    with pytest.raises(ValueError, match="header"):
        io.read_points(path2, header="maybe")
    # an explicit delimiter
    path3 = _write(tmp_path / "d.txt", "1|2\n3|4\n")
    assert io.read_points(path3, delimiter="|").tolist() == [[1, 2], [3, 4]]


def test_integer_columns_and_dtype(tmp_path):
    path = _write(tmp_path / "i.csv", "1,2\n3,4\n")
    X = io.read_points(path, dtype=np.float32)
    assert X.dtype == np.float32 and X.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(TypeError, match="floating"):
        io.read_points(path, dtype=np.int64)


def test_read_frame_mixed_types(tmp_path):
    path = _write(tmp_path / "cars.csv", "name,price,rating\nA,3,4.5\nB,5,2\n")
    df = io.read_frame(path)
    assert df["name"].tolist() == ["A", "B"] and df["price"].tolist() == [3, 5]
    assert io.read_points(path, columns=["price", "rating"]).tolist() == [[3, 4.5], [5, 2]]


# --------------------------------------------------------------------------
# binary formats
# --------------------------------------------------------------------------
def test_npy_and_parquet(tmp_path):
    X = np.random.default_rng(1).random((100, 4))
    np.save(tmp_path / "x.npy", X)
    assert np.array_equal(io.read_points(tmp_path / "x.npy"), X)
    assert np.array_equal(io.read_points(tmp_path / "x.npy", columns=[3, 1]), X[:, [3, 1]])
    np.save(tmp_path / "v.npy", X[:, 0])
    assert io.read_points(tmp_path / "v.npy").shape == (100, 1)
    np.save(tmp_path / "c.npy", np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="3-D"):
        io.read_points(tmp_path / "c.npy")
    import pandas as pd

    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "s": ["x"] * 100}).to_parquet(tmp_path / "x.parquet")
    assert np.array_equal(io.read_points(tmp_path / "x.parquet", columns=["b", "a"]), X[:, [1, 0]])
    assert np.array_equal(io.read_points(tmp_path / "x.parquet", columns=[0]), X[:, [0]])
    with pytest.raises(ValueError, match="column 's' of .* holds text, not numbers"):
        io.read_points(tmp_path / "x.parquet")
    assert list(io.read_frame(tmp_path / "x.parquet").columns) == ["a", "b", "s"]


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------
def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        io.read_points(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="unknown extension"):
        io.read_points(_write(tmp_path / "x.json", "[]"))
    ragged = _write(tmp_path / "r.csv", "1,2\n3,4,5\n")
    with pytest.raises(ValueError, match="ragged"):
        io.read_points(ragged)
    ragged_ws = _write(tmp_path / "r.txt", "1 2\n3 4 5\n")
    with pytest.raises(ValueError, match="ragged"):
        io.read_points(ragged_ws)
    short = _write(tmp_path / "s.csv", "1,2\n3,\n")
    with pytest.raises(ValueError, match="missing"):
        io.read_points(short)
    short_ws = _write(tmp_path / "s.txt", "1 2 3\n3 4\n")
    with pytest.raises(ValueError, match="missing|ragged"):
        io.read_points(short_ws)
    text = _write(tmp_path / "t.csv", "a,b\n1,x\n2,y\n")
    with pytest.raises(ValueError, match="column 'b' .* holds text, not numbers, e.g. 'x'"):
        io.read_points(text)
    with pytest.raises(ValueError, match="unknown column 'z'"):
        io.read_points(text, columns=["z"])
    with pytest.raises(ValueError, match="out of range"):
        io.read_points(text, columns=[5])
    nohead = _write(tmp_path / "nh.csv", "1,2\n")
    with pytest.raises(ValueError, match="no header"):
        io.read_points(nohead, columns=["a"])
    with pytest.raises(ValueError, match="no data"):
        io.read_points(_write(tmp_path / "e.csv", ""))
    nan = _write(tmp_path / "nan.csv", "1,2\nnan,4\n")
    with pytest.raises(ValueError, match="missing .* row 1"):
        io.read_points(nan)
    assert np.isnan(io.read_frame(nan).iloc[1, 0])
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="NaN value in column 1 at data row 0"):
        io.read_points(tmp_path / "nan.npy")
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(IsADirectoryError):
        io.read_points(tmp_path / "dir.csv")


def test_header_only_file(tmp_path):
    X = io.read_points(_write(tmp_path / "h.csv", "a,b\n"))
    assert X.shape == (0, 2)


# --------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------
def _table(rng, n=40, m=30, p=0.2):
    dense = rng.random((n, m)) < p
    counts = dense.sum(1)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.nonzero(dense)[1].astype(np.int32)
    return NeighborTable(indptr, indices, (n, m), sorted=True)


@pytest.mark.parametrize("ext", [".parquet", ".npz", ".csv", ".npy"])
def test_write_pairs_roundtrip(tmp_path, ext):
    i = np.array([0, 0, 1, 5], dtype=np.int32)
    j = np.array([1, 2, 0, 3])
    path = tmp_path / f"p{ext}"
    assert io.write_pairs(path, i, j) == 4
    if ext == ".npz":
        z = np.load(path)
        assert z["i"].dtype == np.int64 and z["i"].tolist() == i.tolist() and z["j"].tolist() == j.tolist()
    elif ext == ".csv":
        import pandas as pd

        got = pd.read_csv(path)
        assert list(got.columns) == ["i", "j"]
        assert got["i"].tolist() == i.tolist() and got["j"].tolist() == j.tolist()
    elif ext == ".npy":
        got = np.load(path)
        assert got.dtype == np.int64 and got.shape == (4, 2)
        assert got[:, 0].tolist() == i.tolist() and got[:, 1].tolist() == j.tolist()
    else:
        t = pq.read_table(path)
        assert str(t.schema.field("i").type) == "int64"
        assert t.column("i").to_pylist() == i.tolist() and t.column("j").to_pylist() == j.tolist()
    with pytest.raises(ValueError, match="same length"):
        io.write_pairs(path, [0, 1], [0])
    with pytest.raises(TypeError, match="integers"):
        io.write_pairs(path, [0.5], [1])
    with pytest.raises(ValueError, match="unknown extension"):
        io.write_pairs(tmp_path / "p.txt", [0], [1])


@pytest.mark.parametrize("ext", [".npz", ".parquet"])
def test_neighbor_table_roundtrip(tmp_path, ext):
    rng = np.random.default_rng(3)
    for nt in (_table(rng), _table(rng, n=0, m=5), _table(rng, n=7, m=7, p=0.0)):
        path = tmp_path / f"nt{ext}"
        assert io.write_neighbor_table(path, nt) == nt.n_pairs
        back = io.read_neighbor_table(path)
        assert back == nt and back.shape == nt.shape and back.sorted == nt.sorted
        assert back.indptr.dtype == np.int64
        if ext == ".parquet" and nt.n_pairs:
            t = pq.read_table(path)
            assert np.array_equal(np.column_stack([t.column("i").to_numpy(), t.column("j").to_numpy()]),
                                  nt.pairs())
    with pytest.raises(TypeError, match="NeighborTable"):
        io.write_neighbor_table(tmp_path / "x.npz", "not a table")


def test_neighbor_table_parquet_many_row_groups(tmp_path):
    rng = np.random.default_rng(4)
    nt = _table(rng, n=300, m=300, p=0.3)
    path = tmp_path / "nt.parquet"
    # small blocks: the table is written a bounded number of pairs at a time
    io.write_neighbor_table(path, nt, row_group_size=1000)
    pf = pq.ParquetFile(path)
    assert pf.num_row_groups > 5
    assert max(pf.metadata.row_group(k).num_rows for k in range(pf.num_row_groups)) == 1000
    assert io.read_neighbor_table(path) == nt


def test_read_neighbor_table_errors(tmp_path):
    io.write_pairs(tmp_path / "p.parquet", [0], [1])
    with pytest.raises(ValueError, match="shape"):
        io.read_neighbor_table(tmp_path / "p.parquet")
    np.savez(tmp_path / "o.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a neighbour table"):
        io.read_neighbor_table(tmp_path / "o.npz")
    with pytest.raises(FileNotFoundError):
        io.read_neighbor_table(tmp_path / "none.npz")


@pytest.mark.parametrize("ext", [".csv", ".parquet", ".npy"])
def test_labels_and_indices(tmp_path, ext):
    import pandas as pd

    labels = np.array([0, 1, -1, 1, 0], dtype=np.int32)
    io.write_labels(tmp_path / f"l{ext}", labels)
    io.write_indices(tmp_path / f"i{ext}", np.array([3, 7]), name="row")
    io.write_counts(tmp_path / f"c{ext}", np.array([4, 0, 2]))

    def read(path, name):
        if ext == ".npy":
            return pd.Series(np.load(path), name=name)
        return (pd.read_csv if ext == ".csv" else pd.read_parquet)(path)[name]

    assert read(tmp_path / f"l{ext}", "label").tolist() == labels.tolist()
    assert read(tmp_path / f"i{ext}", "row").tolist() == [3, 7]
    assert read(tmp_path / f"c{ext}", "count").tolist() == [4, 0, 2]
    if ext == ".csv":
        assert open(tmp_path / "l.csv").read() == "label\n0\n1\n-1\n1\n0\n"
        # our own reader reads them back too
        assert io.read_points(tmp_path / "l.csv").ravel().tolist() == labels.tolist()
    with pytest.raises(ValueError, match=">= 0"):
        io.write_indices(tmp_path / f"i{ext}", [-1])
    with pytest.raises(ValueError, match="1-D"):
        io.write_labels(tmp_path / f"l{ext}", [[1]])
    with pytest.raises(ValueError, match="unknown extension"):
        io.write_labels(tmp_path / "l.npz", [1])


# --------------------------------------------------------------------------
# the streaming writer
# --------------------------------------------------------------------------
def test_parquet_pair_writer_streams(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "s.parquet"
    all_i, all_j = [], []
    with io.ParquetPairWriter(path, shape=(1000, 1000), sorted=True, row_group_size=500) as w:
        start = 0
        for _ in range(20):
            stop = start + int(rng.integers(1, 50))
            i = np.repeat(np.arange(start, stop), 3)
            j = rng.integers(0, 1000, len(i))
            w.write_chunk(PairChunk(i, j, start, stop))
            all_i.append(i)
            all_j.append(j)
            start = stop
            # never more than a row group's worth buffered
            assert w._buffered < 500
        w.write([], [])
        assert w.n_pairs == sum(len(a) for a in all_i)
    assert w.closed
    pf = pq.ParquetFile(path)
    assert pf.num_row_groups >= 2
    t = pf.read()
    assert np.array_equal(t.column("i").to_numpy(), np.concatenate(all_i))
    assert np.array_equal(t.column("j").to_numpy(), np.concatenate(all_j))
    nt = io.read_neighbor_table(path)
    assert nt.n_pairs == w.n_pairs and nt.shape == (1000, 1000)
    with pytest.raises(ValueError, match="closed"):
        w.write([0], [0])


def test_parquet_pair_writer_empty_and_error(tmp_path):
    path = tmp_path / "e.parquet"
    with io.ParquetPairWriter(path) as w:
        pass
    assert w.n_pairs == 0 and pq.read_table(path).num_rows == 0
    bad = tmp_path / "bad.parquet"
    with pytest.raises(RuntimeError, match="boom"):
        with io.ParquetPairWriter(bad, row_group_size=2) as w:
            w.write([0, 1, 2], [1, 2, 3])
            raise RuntimeError("boom")
    assert w.closed and not bad.exists()        # no partial file left behind
    assert sorted(os.listdir(tmp_path)) == ["e.parquet"]   # nor a temporary one
    with pytest.raises(ValueError, match="unknown extension"):
        io.ParquetPairWriter(tmp_path / "x.csv")


def test_parquet_pair_writer_copies_buffered_chunks(tmp_path):
    """A caller may reuse its arrays after write(): the buffered pairs are copies."""
    path = tmp_path / "reuse.parquet"
    buf_i = np.zeros(4, dtype=np.int64)
    buf_j = np.zeros(4, dtype=np.int64)
    want = []
    with io.ParquetPairWriter(path, row_group_size=10) as w:
        for c in range(5):
            buf_i[:] = c
            buf_j[:] = np.arange(4) + 10 * c
            w.write(buf_i, buf_j)              # the same arrays every time
            want.append(np.column_stack([buf_i.copy(), buf_j.copy()]))
        big_i = np.arange(20)
        w.write(big_i, big_i)                  # >= row group: written directly
        want.append(np.column_stack([big_i, big_i]))
        big_i[:] = -1
    t = pq.read_table(path)
    got = np.column_stack([t.column("i").to_numpy(), t.column("j").to_numpy()])
    assert np.array_equal(got, np.concatenate(want))


@pytest.mark.parametrize("kw", [{}, {"return_distance": True},
                                {"return_distance": True, "precision": "float32"}],
                         ids=["connectivity", "distance", "distance-float32"])
def test_npz_and_to_scipy_differ_only_in_the_documented_value_dtype(tmp_path, kw):
    """The .npz of write_neighbor_table (and of ``skyjoin join --out``) holds
    bool ones or the table's distance dtype; ``to_scipy()`` float64.  With
    that dtype asked, ``to_scipy`` equals ``load_npz`` in every array."""
    import scipy.sparse as sp

    import skyjoin as sj

    X = np.random.default_rng(8).random((400, 2))
    nt = sj.self_join(X, 0.08, device="cpu", **kw)
    path = tmp_path / "t.npz"
    io.write_neighbor_table(path, nt)
    got = sp.load_npz(path)
    mode = "distance" if kw else "connectivity"
    assert nt.to_scipy(mode).dtype == np.float64
    want_dtype = nt.distances.dtype if kw else np.bool_
    assert got.dtype == want_dtype
    same = nt.to_scipy(mode, dtype=want_dtype)
    for name in ("data", "indices", "indptr"):
        a, b = getattr(same, name), getattr(got, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert same.shape == got.shape


def test_cli_npz_holds_bool_ones(tmp_path, monkeypatch):
    import scipy.sparse as sp
    from click.testing import CliRunner

    import skyjoin as sj
    from skyjoin.cli import main

    X = np.random.default_rng(9).random((300, 2))
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["join", "x.csv", "--eps", "0.08", "--out", "t.npz"])
    assert res.exit_code == 0, res.output
    got = sp.load_npz(tmp_path / "t.npz")
    assert got.dtype == np.bool_
    want = sj.self_join(X, 0.08, device="cpu").to_scipy(dtype=bool)
    assert (got != want).nnz == 0 and np.array_equal(got.indptr, want.indptr)
