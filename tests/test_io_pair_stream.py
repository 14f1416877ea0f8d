"""The streamed pair writers: CSR rows written without expansion in Python,
blocks encoded on a background thread, int32 ids, bounded memory, errors
raised in the caller's thread, and every format read back by pandas and
read_neighbor_table (oracle: np.repeat of the rows, NumPy's own arrays)."""

import os
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from skyjoin import io
from skyjoin.io import pair_writer
from skyjoin.io import pairs as pairs_mod
from skyjoin.simjoin.csr import pair_rows
from skyjoin.simjoin.result import NeighborTable, PairChunk


def _random_csr(rng, n_rows, n_cols, max_len=9):
    """A random CSR table, some rows empty, columns sorted within rows."""
    counts = rng.integers(0, max_len, n_rows)
    counts[rng.random(n_rows) < 0.2] = 0
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate([np.sort(rng.choice(n_cols, c, replace=False)) for c in counts]
                             + [np.zeros(0, dtype=np.int64)]).astype(np.int32)
    return indptr, indices


def _writer(path, shape, block, background=True):
    """The writer of ``path``'s format with blocks of ``block`` pairs."""
    ext = os.path.splitext(path)[1]
    if ext == ".parquet":
        return io.ParquetPairWriter(path, shape=shape, sorted=True, row_group_size=block,
                                    background=background)
    cls = {".csv": io.CsvPairWriter, ".npy": io.NpyPairWriter}[ext]
    return cls(path, shape, block_pairs=block, background=background)


def _read(path):
    """The pairs of a file as (i, j) int64, by pandas."""
    ext = os.path.splitext(path)[1]
    if ext == ".npy":
        df = pd.DataFrame(np.load(path), columns=["i", "j"])
    elif ext == ".csv":
        df = pd.read_csv(path)
    else:
        df = pd.read_parquet(path)
    assert list(df.columns) == ["i", "j"]
    return df["i"].to_numpy(np.int64), df["j"].to_numpy(np.int64)


@pytest.mark.parametrize("threaded", [True, False])
def test_pair_rows_equals_repeat(threaded):
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        indptr, _ = _random_csr(rng, n, 50)
        base = int(rng.integers(0, 5))
        ptr = indptr + base                       # a slice of a larger table's offsets
        m = int(indptr[-1])
        want = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) + 7
        start = int(rng.integers(0, m + 1))
        stop = int(rng.integers(start, m + 1))
        out = np.full(stop - start, -1, dtype=np.int32)
        pair_rows(ptr, 7, np.zeros(0, np.int64), start, out)
        assert out.tolist() == want[start:stop].tolist()
        block = np.full((stop - start, 2), -1, dtype=np.int64)  # a strided column
        pair_rows(ptr, 7, np.zeros(0, np.int64), start, block[:, 0])
        assert block[:, 0].tolist() == want[start:stop].tolist()
        assert (block[:, 1] == -1).all()
        ids = np.sort(rng.choice(1000, size=n, replace=False)).astype(np.int64)   # named rows
        pair_rows(ptr, 7, ids, start, out)
        assert out.tolist() == np.repeat(ids, np.diff(indptr))[start:stop].tolist()


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
@pytest.mark.parametrize("block", [1, 3, 64, 1 << 20])
@pytest.mark.parametrize("background", [True, False])
@pytest.mark.parametrize("copy", [True, False])
def test_write_csr_equals_expanded_pairs(tmp_path, ext, block, background, copy):
    rng = np.random.default_rng(block)
    n = 120
    indptr, indices = _random_csr(rng, n, n)
    want_i = np.repeat(np.arange(n), np.diff(indptr))
    path = str(tmp_path / f"p{ext}")
    with _writer(path, (n, n), block, background) as w:
        # rows in uneven runs, each run a slice of the table's offsets
        r0 = 0
        while r0 < n:
            r1 = min(n, r0 + int(rng.integers(0, 30)))
            a, b = int(indptr[r0]), int(indptr[r1])
            w.write_csr(r0, indptr[r0:r1 + 1], indices[a:b], copy=copy)
            r0 = r1
        w.write([], [])
    assert w.n_pairs == len(indices)
    i, j = _read(path)
    assert np.array_equal(i, want_i) and np.array_equal(j, indices)
    if ext == ".parquet":
        nt = io.read_neighbor_table(path)
        assert nt == NeighborTable(indptr, indices, (n, n)) and nt.sorted


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
@pytest.mark.parametrize("block", [1, 7, 1 << 20])
@pytest.mark.parametrize("copy", [True, False])
def test_write_csr_with_row_ids(tmp_path, ext, block, copy):
    """Rows named by row_ids (a partition's global ids) instead of first_row + r."""
    rng = np.random.default_rng(block + 3)
    n, m = 90, 400
    indptr, indices = _random_csr(rng, n, m)
    ids = np.sort(rng.choice(m, size=n, replace=False))
    path = str(tmp_path / f"r{ext}")
    with _writer(path, (m, m), block, True) as w:
        w.write_csr(0, indptr[:41], indices[:indptr[40]], copy=copy, row_ids=ids[:40])
        w.write_csr(0, indptr[40:], indices[indptr[40]:], copy=copy, row_ids=ids[40:])
    i, j = _read(path)
    assert np.array_equal(i, np.repeat(ids, np.diff(indptr))) and np.array_equal(j, indices)
    with _writer(str(tmp_path / f"bad{ext}"), (m, m), block, True) as w:
        with pytest.raises(ValueError, match="one id per row"):
            w.write_csr(0, indptr, indices, row_ids=ids[:-1])
        with pytest.raises(ValueError, match="outside"):
            w.write_csr(0, indptr[:2], indices[:indptr[1]], row_ids=[2**40])


@pytest.mark.parametrize("background", [True, False])
def test_blocks_bounded_and_order_kept(tmp_path, background):
    """However many pairs are written, at most DEPTH + 1 blocks exist; the
    row groups come out in order, one block each."""
    path = tmp_path / "b.parquet"
    n = 10_000
    with io.ParquetPairWriter(path, shape=(n, n), row_group_size=10,
                              background=background) as w:
        for a in range(0, n, 7):
            rows = np.arange(a, min(a + 7, n))
            w.write(rows, rows[::-1])
    assert w._blocks._made <= (pair_writer.DEPTH + 1 if background else 1)
    pf = pq.ParquetFile(path)
    assert pf.num_row_groups == n // 10
    t = pf.read()
    i = t.column("i").to_numpy()
    assert np.array_equal(i, np.arange(n))
    j = t.column("j").to_numpy()
    assert np.array_equal(j, np.concatenate([np.arange(a, min(a + 7, n))[::-1]
                                             for a in range(0, n, 7)]))


def test_parquet_layout(tmp_path):
    """Required int32 columns (int64 without a shape), no dictionary, raw column
    ids; row ids delta-encoded for short rows (fewer than DELTA_BELOW_PAIRS
    pairs on average in the first block), lz4-compressed for longer ones,
    unless a codec is asked; statistics for i when asked, read by pandas with
    the same dtypes."""
    path = tmp_path / "l.parquet"
    indptr = np.array([0, 2, 2, 5])
    with io.ParquetPairWriter(path, shape=(3, 4), sorted=True) as w:
        w.write_csr(0, indptr, np.array([1, 3, 0, 1, 2], dtype=np.int32))
    pf = pq.ParquetFile(path)
    for name in ("i", "j"):
        f = pf.schema_arrow.field(name)
        assert str(f.type) == "int32" and not f.nullable
    col_i = pf.metadata.row_group(0).column(0)
    col_j = pf.metadata.row_group(0).column(1)
    assert not any("DICTIONARY" in e for e in col_i.encodings + col_j.encodings)
    assert "DELTA_BINARY_PACKED" in col_i.encodings and "DELTA_BINARY_PACKED" not in \
        col_j.encodings
    assert col_i.compression == "UNCOMPRESSED" and col_j.compression == "UNCOMPRESSED"
    assert not col_i.is_stats_set
    # rows of DELTA_BELOW_PAIRS pairs: lz4 row ids, plain
    k = pairs_mod.DELTA_BELOW_PAIRS
    long_ptr = np.arange(0, 3 * k + 1, k)
    cols = np.tile(np.arange(k, dtype=np.int32), 3)
    with io.ParquetPairWriter(tmp_path / "long.parquet", shape=(3, k), sorted=True) as w:
        w.write_csr(0, long_ptr, cols)
    col_i = pq.ParquetFile(tmp_path / "long.parquet").metadata.row_group(0).column(0)
    assert col_i.compression.startswith("LZ4") and "DELTA_BINARY_PACKED" not in col_i.encodings
    back = pd.read_parquet(tmp_path / "long.parquet")
    assert back["i"].tolist() == np.repeat(np.arange(3), k).tolist()
    assert back["j"].tolist() == cols.tolist()
    # an asked codec: plain encoding with it
    with io.ParquetPairWriter(tmp_path / "z.parquet", shape=(3, 4), compression="lz4") as w:
        w.write_csr(0, indptr, np.array([1, 3, 0, 1, 2], dtype=np.int32))
    col_i = pq.ParquetFile(tmp_path / "z.parquet").metadata.row_group(0).column(0)
    assert col_i.compression.startswith("LZ4") and "DELTA_BINARY_PACKED" not in col_i.encodings
    # no pairs: a file with the schema alone
    with io.ParquetPairWriter(tmp_path / "e.parquet", shape=(3, 4)):
        pass
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0
    with io.ParquetPairWriter(tmp_path / "s.parquet", shape=(3, 4), statistics=True,
                              compression="zstd") as w:
        w.write_csr(0, indptr, np.array([1, 3, 0, 1, 2], dtype=np.int32))
    col_i = pq.ParquetFile(tmp_path / "s.parquet").metadata.row_group(0).column(0)
    assert col_i.statistics.min == 0 and col_i.statistics.max == 2
    assert col_i.compression == "ZSTD"
    assert pd.read_parquet(tmp_path / "s.parquet")["j"].tolist() == [1, 3, 0, 1, 2]
    df = pd.read_parquet(path)
    assert df["i"].tolist() == [0, 0, 2, 2, 2] and df["j"].tolist() == [1, 3, 0, 1, 2]
    io.write_pairs(tmp_path / "w.parquet", [0], [2**40])
    assert str(pq.ParquetFile(tmp_path / "w.parquet").schema_arrow.field("j").type) == "int64"
    assert pd.read_parquet(tmp_path / "w.parquet")["j"].tolist() == [2**40]


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
def test_ids_that_do_not_fit_the_shape_raise(tmp_path, ext):
    path = tmp_path / f"x{ext}"
    with pytest.raises(ValueError, match="outside the int32 ids"):
        with io.open_pair_writer(path, shape=(10, 10)) as w:
            w.write([0], [2**31])
    with pytest.raises(ValueError, match="outside the int32 ids"):
        with io.open_pair_writer(path, shape=(10, 10)) as w:
            w.write_csr(2**31 - 1, [0, 1, 2], np.array([0, 1], dtype=np.int64))
    assert os.listdir(tmp_path) == []
    with io.open_pair_writer(path, shape=(2**31, 2**31)) as w:
        assert w.dtype == np.int64
        w.write([2**31 - 1], [2**31 + 5])
    assert [v.tolist() for v in _read(str(path))] == [[2**31 - 1], [2**31 + 5]]


def test_write_csr_checks_its_arrays(tmp_path):
    with io.ParquetPairWriter(tmp_path / "c.parquet") as w:
        with pytest.raises(ValueError, match="indices must hold"):
            w.write_csr(0, [0, 2], [1])
        with pytest.raises(ValueError, match="non-decreasing"):
            w.write_csr(0, [0, 2, 1], [1])
        with pytest.raises(ValueError, match="none"):
            w.write_csr(0, [], [])
        with pytest.raises(TypeError, match="integers"):
            w.write_csr(0, [0, 1], [0.5])
        w.write_csr(5, [3, 3], [])                # one empty row: nothing written
    assert w.n_pairs == 0 and pq.read_table(tmp_path / "c.parquet").num_rows == 0


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
@pytest.mark.parametrize("at", ["write", "close", "owned chunk"])
def test_background_error_reaches_the_caller(tmp_path, monkeypatch, ext, at):
    """An error of the encoding thread is raised in the caller's thread (at a
    later write, or at close), and no file is left under either name."""
    cls = {".parquet": io.ParquetPairWriter, ".csv": io.CsvPairWriter,
           ".npy": io.NpyPairWriter}[ext]
    calls = []

    def broken(self, block, j):
        calls.append(block.n)
        raise OSError("disk full")

    monkeypatch.setattr(cls, "_encode", broken)
    writes = []
    with pytest.raises(OSError, match="disk full"):
        with _writer(str(tmp_path / f"e{ext}"), (100, 100), 4) as w:
            w.write(np.arange(3), np.arange(3))
            if at == "owned chunk":
                for k in range(100):                  # chunks written from their arrays
                    w.write_csr(0, np.array([0, 50]), np.arange(50), copy=False)
                    writes.append(k)
            if at == "write":
                for k in range(100):                  # the error surfaces at a later write
                    w.write(np.arange(4), np.arange(4))
                    writes.append(k)
    assert calls and w.closed
    if at != "close":
        assert len(writes) < 100                      # raised by a write, not by close
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
@pytest.mark.parametrize("background", [True, False])
def test_copies_and_owned_chunks_keep_their_order(tmp_path, ext, background):
    """Pairs copied into blocks (write, write_csr) and chunks written from the
    caller's arrays (write_csr(copy=False), write_chunk) come out in the
    order given, with int64 chunks narrowed to the file's int32 ids; a
    copied caller's arrays may be reused at once."""
    rng = np.random.default_rng(9)
    n = 300
    indptr, indices = _random_csr(rng, n, n)
    wide = indices.astype(np.int64)
    path = str(tmp_path / f"o{ext}")
    with _writer(path, (n, n), 16, background) as w:
        r0 = 0
        for k in range(60):
            r1 = min(n, r0 + int(rng.integers(1, 12)))
            a, b = int(indptr[r0]), int(indptr[r1])
            how = k % 4
            if how == 0:
                i = np.repeat(np.arange(r0, r1), np.diff(indptr[r0:r1 + 1]))
                j = indices[a:b].copy()
                w.write(i, j)
                j[:] = -1                                  # reused by the caller
            elif how == 1:
                w.write_csr(r0, indptr[r0:r1 + 1], wide[a:b], copy=False)
            elif how == 2:
                w.write_chunk(PairChunk.from_csr(r0, indptr[r0:r1 + 1] - a, indices[a:b]))
            else:
                w.write_chunk(PairChunk(np.repeat(np.arange(r0, r1), np.diff(indptr[r0:r1 + 1])),
                                        indices[a:b], r0, r1))
            r0 = r1
            if r0 == n:
                break
    i, j = _read(path)
    m = int(indptr[r0])
    assert np.array_equal(i, np.repeat(np.arange(n), np.diff(indptr))[:m])
    assert np.array_equal(j, indices[:m])


def test_csv_text_formatted_in_spans_keeps_order(tmp_path, monkeypatch):
    """A CSV block is formatted in spans on several threads, written in order."""
    monkeypatch.setattr(pairs_mod, "CSV_SPAN", 7)
    rng = np.random.default_rng(12)
    n = 400
    indptr, indices = _random_csr(rng, n, n)
    path = str(tmp_path / "s.csv")
    with _writer(path, (n, n), 1000) as w:
        w.write_csr(0, indptr, indices, copy=False)
    i, j = _read(path)
    assert np.array_equal(i, np.repeat(np.arange(n), np.diff(indptr)))
    assert np.array_equal(j, indices)


def test_discard_stops_a_long_chunk_between_blocks(tmp_path, monkeypatch):
    """An abandoned writer does not write the rest of a chunk it holds: the
    thread stops between blocks, and nothing is left on disk."""
    calls = []
    real = io.ParquetPairWriter._encode

    def slow(self, block, j):
        calls.append(block.n)
        time.sleep(0.001)
        real(self, block, j)

    monkeypatch.setattr(io.ParquetPairWriter, "_encode", slow)
    m = 5000
    with pytest.raises(RuntimeError, match="stop"):
        with io.ParquetPairWriter(tmp_path / "x.parquet", shape=(1, m), row_group_size=1) as w:
            w.write_csr(0, np.array([0, m]), np.arange(m), copy=False)
            raise RuntimeError("stop")
    assert w.closed and len(calls) < m
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("ext", [".parquet", ".npy"])
def test_row_ids_written_in_spans(tmp_path, monkeypatch, ext):
    """The row ids of a chunk are written in spans by the host pool."""
    real = pair_writer.map_spans
    spans = []

    def small_spans(fn, n, min_span=1):
        out = real(fn, n, min_span=3)
        spans.append(len(out))
        return out

    monkeypatch.setattr(pair_writer, "map_spans", small_spans)
    rng = np.random.default_rng(13)
    n = 200
    indptr, indices = _random_csr(rng, n, n)
    path = str(tmp_path / f"r{ext}")
    with _writer(path, (n, n), 64) as w:
        w.write_csr(0, indptr, indices, copy=False)
    assert max(spans) > 1
    i, j = _read(path)
    assert np.array_equal(i, np.repeat(np.arange(n), np.diff(indptr)))
    assert np.array_equal(j, indices)


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".npy"])
def test_unchecked_csr_rows_write_the_same_pairs(tmp_path, ext):
    """write_csr(check=False), as the partitions' writers call it, writes the
    same pairs as the checked call, over many blocks (the thread fills the
    next block while it encodes one); lengths are still checked."""
    rng = np.random.default_rng(21)
    n = 500
    indptr, indices = _random_csr(rng, n, n)
    ids = rng.permutation(n).astype(np.int64)
    out = []
    for check in (True, False):
        path = str(tmp_path / f"{check}{ext}")
        with _writer(path, (n, n), 37) as w:
            w.write_csr(0, indptr, indices.astype(np.int64), copy=False, row_ids=ids, check=check)
        out.append(_read(path))
    assert np.array_equal(out[0][0], np.repeat(ids, np.diff(indptr)))
    assert np.array_equal(out[0][1], indices)
    assert np.array_equal(out[1][0], out[0][0]) and np.array_equal(out[1][1], out[0][1])
    with _writer(str(tmp_path / f"bad{ext}"), (n, n), 37) as w:
        with pytest.raises(ValueError, match="indices must hold"):
            w.write_csr(0, indptr, indices[:-1], check=False)
