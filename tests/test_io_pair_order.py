"""A Parquet file of pairs records whether its rows are sorted
(``skyjoin.sorted`` in its metadata), from ``io.open_pair_writer`` as from
``skyjoin join --out``: as given, or, by default, found from the pairs.

Oracle: the pairs read back, tested for lexicographic order in Python.
"""

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import skyjoin as sj
from skyjoin import io
from skyjoin.io.pair_writer import RowOrder

KEY = b"skyjoin.sorted"


def in_order(i, j):
    """Rows ascending, columns ascending within a row (ties allowed)."""
    pairs = list(zip(np.asarray(i).tolist(), np.asarray(j).tolist()))
    return all(a <= b for a, b in zip(pairs, pairs[1:]))


def recorded(path):
    """``skyjoin.sorted`` as the Arrow schema and as the file's key-value
    metadata hold it (they must agree)."""
    a = (pq.read_schema(path).metadata or {}).get(KEY)
    b = (pq.read_metadata(path).metadata or {}).get(KEY)
    assert a == b
    return a


def read_pairs(path):
    t = pq.read_table(path)
    return t.column("i").to_numpy(), t.column("j").to_numpy()


@pytest.mark.parametrize("seed", range(40))
def test_row_order_equals_the_oracle_over_any_blocks(seed, monkeypatch):
    """Pairs seen in blocks of any size, order broken (or not) anywhere,
    inside a block or at a border, steps of the test included."""
    import skyjoin.io.pair_writer as pw

    rng = np.random.default_rng(seed)
    monkeypatch.setattr(pw, "ORDER_SPAN", int(rng.integers(1, 6)))
    n = int(rng.integers(0, 30))
    i = np.sort(rng.integers(0, 5, n))
    j = rng.integers(0, 6, n)
    j = j[np.lexsort((j, i))]
    if n > 1 and rng.random() < 0.7:
        k = int(rng.integers(0, n - 1))
        if rng.random() < 0.5:
            j[k], j[k + 1] = j[k + 1], j[k]
        else:
            i[k], i[k + 1] = i[k + 1], i[k]
    order = RowOrder()
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 4))))
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, n]):
        order.see(i[a:b], j[a:b])
    assert order.sorted == in_order(i, j)


@pytest.mark.parametrize("background", [True, False])
@pytest.mark.parametrize("sort", [True, False])
def test_default_writer_records_the_order_of_join_chunks(tmp_path, sort, background):
    X = np.random.default_rng(3).random((3000, 2))
    path = tmp_path / "p.parquet"
    with io.open_pair_writer(path, shape=(len(X), len(X)), row_group_size=5000,
                             background=background) as w:
        w.write_chunks(sj.self_join_chunks(X, 0.04, max_pairs=4000, sort=sort, device="cpu"))
    i, j = read_pairs(path)
    assert len(i) > 10_000 and in_order(i, j) == sort        # sort=False: not sorted here
    assert recorded(path) == (b"1" if sort else b"0")
    assert io.read_neighbor_table(path).sorted == sort


def test_order_broken_at_a_block_border_or_by_a_later_write(tmp_path):
    for name, writes in [("border", [([0, 0, 1], [1, 2, 0]), ([1, 2], [0, 1])]),
                         ("row back", [([0, 2], [1, 0]), ([1], [0])]),
                         ("sorted", [([0, 0], [1, 2]), ([0, 1], [3, 0]), ([1], [0])])]:
        path = tmp_path / f"{name}.parquet"
        with io.open_pair_writer(path, row_group_size=2) as w:
            for i, j in writes:
                w.write(i, j)
        i, j = read_pairs(path)
        assert recorded(path) == (b"1" if in_order(i, j) else b"0"), name
    path = tmp_path / "csr.parquet"
    with io.open_pair_writer(path, shape=(4, 4), row_group_size=3) as w:
        w.write_csr(0, np.array([0, 2, 3]), np.array([1, 3, 0]))
        w.write_csr(2, np.array([0, 2]), np.array([3, 1]), copy=False)   # row 2: 3 then 1
    assert recorded(path) == b"0"
    with io.open_pair_writer(tmp_path / "empty.parquet", shape=(4, 4)):
        pass
    assert recorded(tmp_path / "empty.parquet") == b"1"


def test_a_given_order_is_recorded_as_given(tmp_path):
    for flag in (True, False):
        path = tmp_path / f"{flag}.parquet"
        with io.open_pair_writer(path, shape=(3, 3), sorted=flag) as w:
            w.write([0, 1], [2, 0])
        assert recorded(path) == (b"1" if flag else b"0")


def test_same_key_as_the_command_line(tmp_path, monkeypatch):
    """``skyjoin join --out x.parquet`` and the API's default writer record the
    same metadata for the same join."""
    from skyjoin.cli import main

    X = np.random.default_rng(5).random((500, 2))
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["join", "x.csv", "--eps", "0.05", "--out", "cli.parquet"])
    assert res.exit_code == 0, res.output
    with io.open_pair_writer(tmp_path / "api.parquet", shape=(len(X), len(X))) as w:
        w.write_chunks(sj.self_join_chunks(X, 0.05, device="cpu"))
    cli, api = pq.read_schema(tmp_path / "cli.parquet"), pq.read_schema(tmp_path / "api.parquet")
    assert cli.metadata == api.metadata and cli.metadata[KEY] == b"1"
    assert pq.read_table(tmp_path / "cli.parquet").equals(pq.read_table(tmp_path / "api.parquet"))
