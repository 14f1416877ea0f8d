"""Result writers and readers: neighbour tables, labels, counts, indices, rows.

Every writer is atomic (:mod:`skyjoin.io.atomic`): a failed or interrupted
write leaves no file under the final name.  Every format reads back with
pandas (``pd.read_csv``, ``pd.read_parquet``, ``np.load``).
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..simjoin.result import NeighborTable, index_dtype
from .atomic import atomic_path
from .formats import existing_path, file_format
from .pairs import META_SHAPE, META_SORTED, PAIR_FORMATS, int_vector, open_pair_writer

__all__ = ["write_neighbor_table", "read_neighbor_table", "write_labels", "write_counts",
           "write_indices", "write_rows", "TABLE_FORMATS", "COLUMN_FORMATS"]

#: Extensions that :func:`write_neighbor_table` writes.
TABLE_FORMATS = (".npz",) + PAIR_FORMATS
#: Extensions of the one-column outputs (labels, counts, indices) and of rows.
COLUMN_FORMATS = (".csv", ".parquet", ".npy")

_ONES_PER_WRITE = 1 << 24           # values of the .npz data array written at a time


# --------------------------------------------------------------------------
# neighbour tables
# --------------------------------------------------------------------------
def _npz_member(zf: zipfile.ZipFile, name: str, arr) -> None:
    """Write one array as ``name.npy`` into an open zip (NumPy's .npz layout)."""
    with zf.open(name + ".npy", "w", force_zip64=True) as fh:
        np.lib.format.write_array(fh, np.asanyarray(arr), allow_pickle=False)


def _npz_ones(zf: zipfile.ZipFile, name: str, n: int) -> None:
    """Write ``n`` boolean ones as ``name.npy`` without allocating them all."""
    header = np.lib.format.header_data_from_array_1_0(np.ones(0, dtype=np.bool_))
    header["shape"] = (int(n),)
    block = np.ones(min(n, _ONES_PER_WRITE), dtype=np.bool_)
    with zf.open(name + ".npy", "w", force_zip64=True) as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        for a in range(0, n, len(block) or 1):
            fh.write(block[:min(len(block), n - a)].data)


def _write_npz_table(tmp: str, h: NeighborTable) -> None:
    """The CSR table in ``scipy.sparse.save_npz``'s layout, plus ``sorted``."""
    distances = getattr(h, "distances", None)
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        _npz_member(zf, "indices", h.indices)
        _npz_member(zf, "indptr", np.asarray(h.indptr, dtype=np.int64))
        _npz_member(zf, "format", np.array(b"csr"))
        _npz_member(zf, "shape", np.asarray(h.shape, dtype=np.int64))
        if distances is not None:
            _npz_member(zf, "data", np.asarray(distances))
        else:
            _npz_ones(zf, "data", h.n_pairs)
        _npz_member(zf, "sorted", np.asarray(bool(h.sorted)))


def write_neighbor_table(path: str | os.PathLike[str], nt: NeighborTable,
                         row_group_size: int = 1 << 22) -> int:
    """Write a NeighborTable, atomically; returns the number of pairs written.

    Parameters
    ----------
    path : str or os.PathLike
        ``.npz``: the CSR table in the layout of ``scipy.sparse.save_npz``
        (arrays ``indptr``, ``indices``, ``data``, ``shape``, ``format``),
        so that ``scipy.sparse.load_npz`` reads it as a ``csr_matrix`` with
        boolean ones as values (the table's ``distances`` instead, where it
        carries them), plus ``sorted``; read back by
        :func:`read_neighbor_table`.  ``.parquet``, ``.csv``, ``.npy``: the
        pairs, grouped by row, through :func:`skyjoin.io.open_pair_writer`
        (Parquet carries the shape in its metadata, for
        :func:`read_neighbor_table`).
    nt : NeighborTable
    row_group_size : int
        Pairs per Parquet row group (``.parquet`` only).

    Raises
    ------
    ValueError
        For an unknown extension.
    TypeError
        If nt is not a NeighborTable.

    Notes
    -----
    O(pairs) time; the pair formats write the table's own arrays block by
    block (:meth:`~skyjoin.io.PairWriter.write_csr` without a copy), so
    memory beyond the table stays O(block).

    Examples
    --------
    >>> import os, tempfile, numpy as np, scipy.sparse as sp
    >>> from skyjoin import io
    >>> from skyjoin.simjoin.result import NeighborTable
    >>> nt = NeighborTable(np.array([0, 1, 2]), np.array([1, 0], dtype=np.int32), (2, 2))
    >>> path = os.path.join(tempfile.mkdtemp(), "nt.npz")
    >>> io.write_neighbor_table(path, nt)
    2
    >>> io.read_neighbor_table(path) == nt
    True
    >>> sp.load_npz(path).toarray().astype(int).tolist()
    [[0, 1], [1, 0]]
    """
    if not isinstance(nt, NeighborTable):
        raise TypeError(f"nt must be a NeighborTable, got {type(nt).__name__}")
    ext = file_format(path, TABLE_FORMATS, "write a neighbour table to")
    h = nt.to_host()
    if ext == ".npz":
        with atomic_path(path) as tmp:
            _write_npz_table(tmp, h)
        return h.n_pairs
    with open_pair_writer(path, shape=h.shape, sorted=h.sorted,
                          **({"row_group_size": row_group_size} if ext == ".parquet" else {})) as w:
        w.write_csr(0, h.indptr, h.indices, copy=False)
    return h.n_pairs


def _read_npz_table(p: str) -> NeighborTable:
    """A table from an .npz file: this package's layout or scipy's CSR layout."""
    with np.load(p, allow_pickle=False) as z:
        if "format" in z.files:
            fmt = z["format"].item()
            fmt = fmt.decode("ascii") if isinstance(fmt, bytes) else str(fmt)
            if fmt != "csr":
                raise ValueError(f"{p!r} holds a sparse matrix in {fmt!r} format, not CSR")
        missing = {"indptr", "indices", "shape"} - set(z.files)
        if missing:
            raise ValueError(f"{p!r} is not a neighbour table: no {', '.join(sorted(missing))}")
        shape = tuple(int(s) for s in z["shape"])
        srt = bool(z["sorted"]) if "sorted" in z.files else False
        indices = z["indices"].astype(index_dtype(shape[1]), copy=False)
        return NeighborTable(z["indptr"].astype(np.int64, copy=False), indices, shape, srt)


def read_neighbor_table(path: str | os.PathLike[str]) -> NeighborTable:
    """Read a NeighborTable written by :func:`write_neighbor_table`.

    Parameters
    ----------
    path : str or os.PathLike
        An ``.npz`` file (this package's or ``scipy.sparse.save_npz``'s CSR
        layout; the values are not read), or a ``.parquet`` file of pairs
        grouped by row that carries the table's shape in its metadata (as
        written by :func:`write_neighbor_table` or by a
        :class:`~skyjoin.io.ParquetPairWriter` given ``shape``).

    Returns
    -------
    NeighborTable
        indptr int64, indices int32 when the columns fit (else int64).

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        For an unknown extension, a file that is not a neighbour table, or
        Parquet pairs without the shape or not grouped by row.

    Notes
    -----
    O(pairs) time and memory.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from skyjoin import io
    >>> from skyjoin.simjoin.result import NeighborTable
    >>> nt = NeighborTable(np.array([0, 2, 2]), np.array([0, 1], dtype=np.int32), (2, 2))
    >>> path = os.path.join(tempfile.mkdtemp(), "nt.parquet")
    >>> _ = io.write_neighbor_table(path, nt)
    >>> io.read_neighbor_table(path).pairs().tolist()
    [[0, 0], [0, 1]]
    """
    ext = file_format(path, (".npz", ".parquet"), "read a neighbour table from")
    p = existing_path(path)
    if ext == ".npz":
        return _read_npz_table(p)
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(p)
    meta = pf.schema_arrow.metadata or {}
    if META_SHAPE not in meta:
        raise ValueError(
            f"{p!r} carries no table shape; write it with write_neighbor_table or "
            "ParquetPairWriter(path, shape=...), or read it as pairs with pyarrow"
        )
    shape = tuple(int(s) for s in meta[META_SHAPE].decode().split(","))
    srt = meta.get(META_SORTED, b"0") == b"1"
    table = pf.read(columns=["i", "j"])
    i = table.column("i").to_numpy()
    j = table.column("j").to_numpy().astype(index_dtype(shape[1]), copy=False)
    if len(i) and (np.any(np.diff(i) < 0) or i[0] < 0 or i[-1] >= shape[0]):
        raise ValueError(f"{p!r}: pairs are not grouped by ascending row within the shape")
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(i, minlength=shape[0]), out=indptr[1:])
    return NeighborTable(indptr, j, shape, srt)


# --------------------------------------------------------------------------
# one column a point: labels, counts, indices
# --------------------------------------------------------------------------
def _write_column(path, values: np.ndarray, name: str, what: str) -> None:
    """Write one named int64 column: .csv (a header line), .parquet or .npy."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    ext = file_format(path, COLUMN_FORMATS, f"write {what} to")
    with atomic_path(path) as tmp:
        if ext == ".npy":
            np.save(tmp, values)
            return
        import pyarrow as pa

        table = pa.table({name: values})
        if ext == ".parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
            return
        import pyarrow.csv as pcsv

        with open(tmp, "wb") as fh:
            fh.write((name + "\n").encode())
            pcsv.write_csv(table, fh, pcsv.WriteOptions(include_header=False))


def write_labels(path: str | os.PathLike[str], labels: ArrayLike, name: str = "label") -> None:
    """Write cluster labels (one per point, -1 for noise) as one column, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv`` (a header line with the name, then one label a line),
        ``.parquet`` (one int64 column) or ``.npy`` (an int64 vector).
    labels : array_like of int, shape (n,)
    name : str
        Column name (``.csv``, ``.parquet``).

    Raises
    ------
    ValueError
        For an unknown extension or labels that are not 1-D.
    TypeError
        If the labels are not integers.

    Examples
    --------
    >>> import os, tempfile
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.csv")
    >>> io.write_labels(path, [0, 0, -1])
    >>> open(path).read().split()
    ['label', '0', '0', '-1']
    """
    _write_column(path, int_vector("labels", labels), name, "labels")


def write_counts(path: str | os.PathLike[str], counts: ArrayLike, name: str = "count") -> None:
    """Write neighbour counts (one per point) as one column, atomically.

    As :func:`write_labels` (its parameters, errors and formats: ``.csv``,
    ``.parquet`` or ``.npy``), with the column named ``count``.
    """
    _write_column(path, int_vector("counts", counts), name, "counts")


def write_indices(path: str | os.PathLike[str], idx: ArrayLike, name: str = "index") -> None:
    """Write row indices (e.g. a skyline) as one column, atomically.

    As :func:`write_labels`: ``.csv``, ``.parquet`` or ``.npy``; the
    indices must be >= 0.

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "sky.parquet")
    >>> io.write_indices(path, [2, 5])
    >>> pd.read_parquet(path)["index"].tolist()
    [2, 5]
    """
    idx = int_vector("idx", idx)
    if idx.size and idx.min() < 0:
        raise ValueError("indices must be >= 0")
    _write_column(path, idx, name, "indices")


def write_rows(path: str | os.PathLike[str], frame: Any, rows: ArrayLike, name: str = "row") -> None:
    """Write some rows of a DataFrame with their row ids, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv`` or ``.parquet``: a first column ``name`` (the 0-based
        position of each row in ``frame``; ``name`` gets trailing ``_``
        while a column of ``frame`` has it), then the frame's columns;
        ``.npy``: the row ids alone (an int64 vector).
    frame : pandas.DataFrame
    rows : array_like of int
        0-based positions of the rows in ``frame``.
    name : str
        Name of the row-id column.

    Raises
    ------
    ValueError
        For an unknown extension, or positions not 1-D or negative.
    TypeError
        If the positions are not integers.

    Notes
    -----
    O(len(rows) * columns).

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "best.csv")
    >>> io.write_rows(path, pd.DataFrame({"price": [3, 1, 2]}), [1, 2])
    >>> open(path).read().split()
    ['row,price', '1,1', '2,2']
    """
    ids = int_vector("rows", rows)
    if ids.size and ids.min() < 0:
        raise ValueError("row positions must be >= 0")
    ext = file_format(path, COLUMN_FORMATS, "write rows to")
    if ext == ".npy":
        _write_column(path, ids, name, "rows")
        return
    while name in frame.columns:
        name += "_"
    sub = frame.iloc[ids].reset_index(drop=True)
    sub.insert(0, name, ids)
    with atomic_path(path) as tmp:
        if ext == ".parquet":
            sub.to_parquet(tmp, index=False)
        else:
            sub.to_csv(tmp, index=False)
