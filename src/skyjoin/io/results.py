"""Result writers and readers: pairs, neighbour tables, labels, indices."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Iterable

import numpy as np
from numpy.typing import ArrayLike

from ..join.result import NeighborTable, PairChunk, index_dtype
from .formats import _existing, _format

__all__ = ["write_pairs", "write_neighbor_table", "read_neighbor_table", "write_labels",
           "write_indices", "ParquetPairWriter"]

_PAIRS_PER_WRITE = 1 << 22          # pairs expanded from a CSR table at a time
_META_SHAPE = b"skyjoin.shape"
_META_SORTED = b"skyjoin.sorted"



# --------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------
def _int_vector(name: str, a) -> np.ndarray:
    """A 1-D int64 array from integer input."""
    if hasattr(a, "__cuda_array_interface__"):
        a = a.get()
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _pairs_arrays(i, j) -> tuple[np.ndarray, np.ndarray]:
    """Check and convert a pair list (i, j) to int64 vectors of equal length."""
    i = _int_vector("i", i)
    j = _int_vector("j", j)
    if len(i) != len(j):
        raise ValueError(f"i and j must have the same length, got {len(i)} and {len(j)}")
    return i, j


def _pair_schema(shape=None, sorted=None):
    """The Parquet schema of pairs, with the table's shape as metadata if known."""
    import pyarrow as pa

    meta = {}
    if shape is not None:
        meta[_META_SHAPE] = f"{int(shape[0])},{int(shape[1])}".encode()
    if sorted is not None:
        meta[_META_SORTED] = b"1" if sorted else b"0"
    return pa.schema([("i", pa.int64()), ("j", pa.int64())], metadata=meta or None)


def write_pairs(path: str | os.PathLike[str], i: ArrayLike, j: ArrayLike) -> int:
    """Write a list of pairs (i[k], j[k]).

    Parameters
    ----------
    path : str or os.PathLike
        ``.parquet`` (columns ``i`` and ``j``, int64) or ``.npz`` (arrays
        ``i`` and ``j``, int64).
    i, j : array_like of int, shape (n_pairs,)

    Returns
    -------
    int
        Number of pairs written.

    Raises
    ------
    ValueError
        For an unknown extension or i and j of different lengths or not 1-D.
    TypeError
        If i or j do not hold integers.

    Examples
    --------
    >>> import os, tempfile, pyarrow.parquet as pq
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "pairs.parquet")
    >>> io.write_pairs(path, [0, 1], [1, 0])
    2
    >>> pq.read_table(path).to_pydict()
    {'i': [0, 1], 'j': [1, 0]}
    """
    ext = _format(path, (".parquet", ".npz"), "write pairs to")
    i, j = _pairs_arrays(i, j)
    if ext == ".npz":
        np.savez(os.fspath(path), i=i, j=j)
    else:
        with ParquetPairWriter(path) as w:
            w.write(i, j)
    return len(i)


def write_neighbor_table(path: str | os.PathLike[str], nt: NeighborTable,
                         row_group_size: int = 1 << 22) -> int:
    """Write a NeighborTable.

    Parameters
    ----------
    path : str or os.PathLike
        ``.npz``: the CSR arrays ``indptr``, ``indices``, ``shape`` and
        ``sorted`` (read back by :func:`read_neighbor_table`).
        ``.parquet``: the pairs as columns ``i``, ``j`` (int64), grouped by
        row, with the table's shape in the file's metadata; written a
        bounded number of rows at a time, so that memory stays bounded.
    nt : NeighborTable
    row_group_size : int
        Pairs per Parquet row group (``.parquet`` only).

    Returns
    -------
    int
        Number of pairs written.

    Raises
    ------
    ValueError
        For an unknown extension.
    TypeError
        If nt is not a NeighborTable.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from skyjoin import io
    >>> from skyjoin.join.result import NeighborTable
    >>> nt = NeighborTable(np.array([0, 1, 2]), np.array([1, 0], dtype=np.int32), (2, 2))
    >>> path = os.path.join(tempfile.mkdtemp(), "nt.npz")
    >>> io.write_neighbor_table(path, nt)
    2
    >>> io.read_neighbor_table(path) == nt
    True
    """
    if not isinstance(nt, NeighborTable):
        raise TypeError(f"nt must be a NeighborTable, got {type(nt).__name__}")
    ext = _format(path, (".npz", ".parquet"), "write a neighbour table to")
    h = nt.to_host()
    if ext == ".npz":
        np.savez(os.fspath(path), indptr=np.asarray(h.indptr, dtype=np.int64),
                 indices=np.asarray(h.indices), shape=np.asarray(h.shape, dtype=np.int64),
                 sorted=np.asarray(h.sorted))
        return h.n_pairs
    indptr = np.asarray(h.indptr, dtype=np.int64)
    step = _PAIRS_PER_WRITE
    with ParquetPairWriter(path, shape=h.shape, sorted=h.sorted,
                           row_group_size=row_group_size) as w:
        r0 = 0
        n_rows = h.shape[0]
        while r0 < n_rows:
            r1 = int(np.searchsorted(indptr, indptr[r0] + step, side="right")) - 1
            r1 = min(max(r1, r0 + 1), n_rows)
            a, b = int(indptr[r0]), int(indptr[r1])
            rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(indptr[r0:r1 + 1]))
            w.write(rows, np.asarray(h.indices[a:b]))
            r0 = r1
    return h.n_pairs


def read_neighbor_table(path: str | os.PathLike[str]) -> NeighborTable:
    """Read a NeighborTable written by :func:`write_neighbor_table`.

    Parameters
    ----------
    path : str or os.PathLike
        An ``.npz`` file, or a ``.parquet`` file of pairs grouped by row that
        carries the table's shape in its metadata (as written by
        :func:`write_neighbor_table` or by a :class:`ParquetPairWriter` given
        ``shape``).

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

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from skyjoin import io
    >>> from skyjoin.join.result import NeighborTable
    >>> nt = NeighborTable(np.array([0, 2, 2]), np.array([0, 1], dtype=np.int32), (2, 2))
    >>> path = os.path.join(tempfile.mkdtemp(), "nt.parquet")
    >>> _ = io.write_neighbor_table(path, nt)
    >>> io.read_neighbor_table(path).pairs().tolist()
    [[0, 0], [0, 1]]
    """
    ext = _format(path, (".npz", ".parquet"), "read a neighbour table from")
    p = _existing(path)
    if ext == ".npz":
        with np.load(p, allow_pickle=False) as z:
            missing = {"indptr", "indices", "shape"} - set(z.files)
            if missing:
                raise ValueError(f"{p!r} is not a neighbour table: no {', '.join(sorted(missing))}")
            shape = tuple(int(s) for s in z["shape"])
            srt = bool(z["sorted"]) if "sorted" in z.files else False
            return NeighborTable(z["indptr"].astype(np.int64, copy=False), z["indices"], shape, srt)
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(p)
    meta = pf.schema_arrow.metadata or {}
    if _META_SHAPE not in meta:
        raise ValueError(
            f"{p!r} carries no table shape; write it with write_neighbor_table or "
            "ParquetPairWriter(path, shape=...), or read it as pairs with pyarrow"
        )
    shape = tuple(int(s) for s in meta[_META_SHAPE].decode().split(","))
    srt = meta.get(_META_SORTED, b"0") == b"1"
    table = pf.read(columns=["i", "j"])
    i = table.column("i").to_numpy()
    j = table.column("j").to_numpy().astype(index_dtype(shape[1]), copy=False)
    if len(i) and (np.any(np.diff(i) < 0) or i[0] < 0 or i[-1] >= shape[0]):
        raise ValueError(f"{p!r}: pairs are not grouped by ascending row within the shape")
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(i, minlength=shape[0]), out=indptr[1:])
    return NeighborTable(indptr, j, shape, srt)


def _write_column(path, values: np.ndarray, name: str, what: str) -> None:
    """Write one named column as .csv (header row) or .parquet."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    ext = _format(path, (".csv", ".parquet"), f"write {what} to")
    import pyarrow as pa

    table = pa.table({name: values})
    if ext == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, os.fspath(path))
    else:
        import pyarrow.csv as pcsv

        with open(os.fspath(path), "wb") as fh:
            fh.write((name + "\n").encode())
            pcsv.write_csv(table, fh, pcsv.WriteOptions(include_header=False))


def write_labels(path: str | os.PathLike[str], labels: ArrayLike, name: str = "label") -> None:
    """Write cluster labels (one per point, -1 for noise) as one column.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv`` (a header line with the name, then one label a line) or
        ``.parquet`` (one int64 column).
    labels : array_like of int, shape (n,)
    name : str
        Column name.

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
    _write_column(path, _int_vector("labels", labels), name, "labels")


def write_indices(path: str | os.PathLike[str], idx: ArrayLike, name: str = "index") -> None:
    """Write row indices (e.g. a skyline) as one column.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv`` (a header line, then one index a line) or ``.parquet``
        (one int64 column).
    idx : array_like of int, shape (k,)
    name : str
        Column name.

    Raises
    ------
    ValueError
        For an unknown extension, indices not 1-D or negative.
    TypeError
        If the indices are not integers.

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "sky.parquet")
    >>> io.write_indices(path, [2, 5])
    >>> pd.read_parquet(path)["index"].tolist()
    [2, 5]
    """
    idx = _int_vector("idx", idx)
    if idx.size and idx.min() < 0:
        raise ValueError("indices must be >= 0")
    _write_column(path, idx, name, "indices")


class ParquetPairWriter:
    """Append pair chunks to one Parquet file, never holding them all.

    Pairs are buffered (as copies, so the caller may reuse its arrays) up to
    ``row_group_size`` and written as row groups of int64 columns ``i`` and
    ``j`` through ``pyarrow.parquet.ParquetWriter``; a chunk of at least
    ``row_group_size`` pairs is written at once without a copy.
    Use it as a context manager: on leaving the block normally the file is
    closed and complete; if the block raises, the writer is closed and the
    partial file removed (unless ``keep_partial``), so an incomplete result
    never looks complete.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.parquet`` file to create (overwritten if it exists).
    shape : tuple (n_rows, n_cols), optional
        The shape of the neighbour table, stored in the file's metadata so
        that :func:`read_neighbor_table` can rebuild the CSR table.
    sorted : bool, optional
        Whether columns are ascending within rows, stored likewise.
    row_group_size : int
        Pairs per row group (buffered before writing).
    compression : str
        Parquet compression codec.
    keep_partial : bool
        Keep the file written so far when the block raises.

    Attributes
    ----------
    n_pairs : int
        Pairs written (or buffered) so far.
    path : str

    Examples
    --------
    >>> import os, tempfile, pyarrow.parquet as pq
    >>> from skyjoin.io import ParquetPairWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "pairs.parquet")
    >>> with ParquetPairWriter(path) as w:
    ...     w.write([0, 0], [1, 2])
    ...     w.write([1], [0])
    >>> w.n_pairs, pq.read_table(path).num_rows
    (3, 3)
    """

    def __init__(self, path: str | os.PathLike[str], shape: tuple[int, int] | None = None,
                 sorted: bool | None = None, row_group_size: int = 1 << 22,
                 compression: str = "zstd", keep_partial: bool = False) -> None:
        import pyarrow.parquet as pq

        _format(path, (".parquet",), "stream pairs to")
        if int(row_group_size) < 1:
            raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
        self.path = os.fspath(path)
        self.n_pairs = 0
        self.keep_partial = bool(keep_partial)
        self._row_group_size = int(row_group_size)
        self._schema = _pair_schema(shape, sorted)
        self._buf: list[tuple[np.ndarray, np.ndarray]] = []
        self._buffered = 0
        self._writer = pq.ParquetWriter(self.path, self._schema, compression=compression)

    # -- writing -----------------------------------------------------------
    def write(self, i: ArrayLike, j: ArrayLike) -> None:
        """Append the pairs (i[k], j[k])."""
        if self._writer is None:
            raise ValueError("write to a closed ParquetPairWriter")
        i, j = _pairs_arrays(i, j)
        if not len(i):
            return
        self.n_pairs += len(i)
        if not self._buf and len(i) >= self._row_group_size:
            self._write_table(i, j)          # written now: no copy needed
            return
        # buffered pairs are copies: callers may reuse their arrays (e.g. pinned
        # transfer buffers) for the next chunk
        self._buf.append((np.array(i, dtype=np.int64), np.array(j, dtype=np.int64)))
        self._buffered += len(i)
        if self._buffered >= self._row_group_size:
            self._flush()

    def write_chunk(self, chunk: PairChunk) -> None:
        """Append a chunk with ``.i`` and ``.j`` (e.g. a ``PairChunk``)."""
        self.write(chunk.i, chunk.j)

    def write_chunks(self, chunks: Iterable[PairChunk]) -> int:
        """Append every chunk of an iterable; return the pairs written in all."""
        for c in chunks:
            self.write_chunk(c)
        return self.n_pairs

    def _flush(self) -> None:
        """Write the buffered pairs as one row group."""
        if not self._buf:
            return
        if len(self._buf) == 1:
            i, j = self._buf[0]
        else:
            i = np.concatenate([b[0] for b in self._buf])
            j = np.concatenate([b[1] for b in self._buf])
        self._buf.clear()
        self._buffered = 0
        self._write_table(i, j)

    def _write_table(self, i: np.ndarray, j: np.ndarray) -> None:
        """Write pairs as one row group, synchronously."""
        import pyarrow as pa

        self._writer.write_table(pa.Table.from_arrays([pa.array(i), pa.array(j)],
                                                      schema=self._schema))

    # -- closing -----------------------------------------------------------
    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        if self._writer is None:
            return
        try:
            self._flush()
        finally:
            self._writer.close()
            self._writer = None

    @property
    def closed(self) -> bool:
        """Whether the file is closed."""
        return self._writer is None

    def __enter__(self) -> "ParquetPairWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self._buf.clear()
            self._buffered = 0
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        finally:
            if not self.keep_partial and os.path.exists(self.path):
                os.remove(self.path)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"ParquetPairWriter({self.path!r}, n_pairs={self.n_pairs}, {state})"
