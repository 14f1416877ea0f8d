"""Pair writers: pairs (i, j) streamed to ``.parquet``, ``.csv`` or ``.npy``.

Each writer appends chunks of pairs to one file without holding them all,
under a temporary name that becomes the final name only when the writer
closes normally (:mod:`skyjoin.io.atomic`).  :func:`open_pair_writer` picks
the writer by extension; :func:`write_pairs` writes one list of pairs.

Formats (every one read back by pandas: ``pd.read_parquet``,
``pd.read_csv``, ``pd.DataFrame(np.load(path), columns=["i", "j"])``):

* ``.parquet``: int64 columns ``i`` and ``j``, in row groups; the table's
  shape and sortedness in the file's metadata when given (so that
  :func:`skyjoin.io.read_neighbor_table` can rebuild the table);
* ``.csv``: a header line ``i,j`` then one pair a line;
* ``.npy``: one (n_pairs, 2) int64 array; its header is written first with
  room for any count and rewritten with the final count on closing.
"""

from __future__ import annotations

import os
import struct
from types import TracebackType
from typing import Any, Iterable

import numpy as np
from numpy.typing import ArrayLike

from .atomic import PendingFile, atomic_path
from .formats import _format

__all__ = ["PAIR_FORMATS", "PairWriter", "ParquetPairWriter", "CsvPairWriter", "NpyPairWriter",
           "open_pair_writer", "write_pairs", "int_vector"]

#: Extensions that :func:`open_pair_writer` streams pairs to.
PAIR_FORMATS = (".parquet", ".csv", ".npy")

META_SHAPE = b"skyjoin.shape"
META_SORTED = b"skyjoin.sorted"


def int_vector(name: str, a) -> np.ndarray:
    """A 1-D int64 array from integer input (a CuPy array is copied to the host).

    Raises
    ------
    ValueError
        Not 1-D.
    TypeError
        Not integers.
    """
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
    i = int_vector("i", i)
    j = int_vector("j", j)
    if len(i) != len(j):
        raise ValueError(f"i and j must have the same length, got {len(i)} and {len(j)}")
    return i, j


class PairWriter:
    """Append pair chunks to one file, atomically; the base of the writers.

    Use it as a context manager: on leaving the block normally the file is
    complete under its final name; if the block raises, nothing is left,
    neither under the final name nor under the temporary one.  Subclasses
    write the format (``_open``, ``_append``, ``_finish``, ``_abort``).

    Parameters
    ----------
    path : str or os.PathLike
        The file to create (replaced if it exists, once complete).

    Attributes
    ----------
    n_pairs : int
        Pairs written (or buffered) so far.
    path : str
        The final name.
    """

    #: The extension this writer writes.
    extension = ""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        _format(path, (self.extension,), "stream pairs to")
        self.path = os.fspath(path)
        self.n_pairs = 0
        self._pending = PendingFile(self.path)
        self._open(self._pending.tmp)
        self._open_now = True

    # -- what subclasses write ----------------------------------------------
    def _open(self, tmp: str) -> None:
        raise NotImplementedError

    def _append(self, i: np.ndarray, j: np.ndarray) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        raise NotImplementedError

    # -- writing -------------------------------------------------------------
    def write(self, i: ArrayLike, j: ArrayLike) -> None:
        """Append the pairs (i[k], j[k]); the caller may reuse its arrays afterwards."""
        if self.closed:
            raise ValueError(f"write to a closed {type(self).__name__}")
        i, j = _pairs_arrays(i, j)
        if not len(i):
            return
        self.n_pairs += len(i)
        self._append(i, j)

    def write_chunk(self, chunk: Any) -> None:
        """Append a chunk with ``.i`` and ``.j`` (e.g. a ``PairChunk``)."""
        self.write(chunk.i, chunk.j)

    def write_chunks(self, chunks: Iterable) -> int:
        """Append every chunk of an iterable; return the pairs written in all."""
        for c in chunks:
            self.write_chunk(c)
        return self.n_pairs

    # -- closing -------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether the writer is closed (committed or discarded)."""
        return not self._open_now

    def close(self) -> None:
        """Finish the file and give it its final name (idempotent)."""
        self._end(complete=True)

    def discard(self) -> None:
        """Abandon the file: nothing is left under either name (idempotent)."""
        self._end(complete=False)

    def _end(self, complete: bool) -> None:
        """Finish and rename, or abort; the temporary file never outlives this."""
        if self.closed:
            return
        self._open_now = False
        kept = False
        try:
            if complete:
                self._finish()
                self._pending.commit()
                kept = True
            else:
                self._abort()
        finally:
            if not kept:
                self._pending.discard()

    def __enter__(self) -> PairWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"{type(self).__name__}({self.path!r}, n_pairs={self.n_pairs}, {state})"


class ParquetPairWriter(PairWriter):
    """Stream pairs to a Parquet file: int64 columns ``i`` and ``j``.

    Pairs are buffered (as copies, so the caller may reuse its arrays) up to
    ``row_group_size`` and written as row groups through
    ``pyarrow.parquet.ParquetWriter``; a chunk of at least ``row_group_size``
    pairs is written at once without a copy.  Atomic, as every
    :class:`PairWriter`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.parquet`` file to create.
    shape : tuple (n_rows, n_cols), optional
        The shape of the neighbour table, stored in the file's metadata so
        that :func:`skyjoin.io.read_neighbor_table` can rebuild the table.
    sorted : bool, optional
        Whether columns are ascending within rows, stored likewise.
    row_group_size : int
        Pairs per row group (buffered before writing).
    compression : str
        Parquet compression codec.

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

    extension = ".parquet"

    def __init__(self, path: str | os.PathLike[str], shape: tuple[int, int] | None = None,
                 sorted: bool | None = None, row_group_size: int = 1 << 22,
                 compression: str = "zstd") -> None:
        if int(row_group_size) < 1:
            raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
        self._row_group_size = int(row_group_size)
        self._compression = compression
        self._schema = pair_schema(shape, sorted)
        self._buf: list[tuple[np.ndarray, np.ndarray]] = []
        self._buffered = 0
        self._writer: Any = None        # pyarrow.parquet.ParquetWriter, once open
        super().__init__(path)

    def _open(self, tmp: str) -> None:
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(tmp, self._schema, compression=self._compression)

    def _append(self, i, j) -> None:
        if not self._buf and len(i) >= self._row_group_size:
            self._write_table(i, j)          # written now: no copy needed
            return
        # buffered pairs are copies: callers may reuse their arrays (e.g. pinned
        # transfer buffers) for the next chunk
        self._buf.append((np.array(i, dtype=np.int64), np.array(j, dtype=np.int64)))
        self._buffered += len(i)
        if self._buffered >= self._row_group_size:
            self._flush()

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

    def _finish(self) -> None:
        try:
            self._flush()
        finally:
            self._writer.close()

    def _abort(self) -> None:
        self._buf.clear()
        self._buffered = 0
        self._writer.close()


class CsvPairWriter(PairWriter):
    """Stream pairs to a CSV file: a header line ``i,j``, then one pair a line.

    Each chunk is formatted by ``pyarrow.csv`` (multithreaded).  Atomic, as
    every :class:`PairWriter`.

    Examples
    --------
    >>> import os, tempfile
    >>> from skyjoin.io import CsvPairWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "pairs.csv")
    >>> with CsvPairWriter(path) as w:
    ...     w.write([0, 1], [1, 0])
    >>> open(path).read().split()
    ['i,j', '0,1', '1,0']
    """

    extension = ".csv"

    def _open(self, tmp: str) -> None:
        self._fh = open(tmp, "wb")
        self._fh.write(b"i,j\n")

    def _append(self, i, j) -> None:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        pcsv.write_csv(pa.table({"i": i, "j": j}), self._fh,
                       pcsv.WriteOptions(include_header=False))

    def _finish(self) -> None:
        self._fh.close()

    def _abort(self) -> None:
        self._fh.close()


class NpyPairWriter(PairWriter):
    """Stream pairs to a ``.npy`` file: one (n_pairs, 2) int64 array of rows (i, j).

    The header (format version 1.0) is written first with room for any
    count and rewritten with the final count when the writer closes; a file
    that was never closed is never given the final name.  Atomic, as every
    :class:`PairWriter`.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from skyjoin.io import NpyPairWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "pairs.npy")
    >>> with NpyPairWriter(path) as w:
    ...     w.write([0, 1], [1, 0])
    >>> np.load(path).tolist()
    [[0, 1], [1, 0]]
    """

    extension = ".npy"
    _HEADER_BYTES = 128                   # magic, version, length and the padded dict

    def _header(self) -> bytes:
        d = f"{{'descr': '<i8', 'fortran_order': False, 'shape': ({self.n_pairs}, 2), }}"
        body_len = self._HEADER_BYTES - 10
        body = d.ljust(body_len - 1).encode("latin1") + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", body_len) + body

    def _open(self, tmp: str) -> None:
        self._fh = open(tmp, "wb")
        self._fh.write(self._header())

    def _append(self, i, j) -> None:
        block = np.empty((len(i), 2), dtype="<i8")
        block[:, 0] = i
        block[:, 1] = j
        self._fh.write(block.data)

    def _finish(self) -> None:
        try:
            self._fh.seek(0)
            self._fh.write(self._header())
        finally:
            self._fh.close()

    def _abort(self) -> None:
        self._fh.close()


def pair_schema(shape=None, sorted=None):
    """The Parquet schema of pairs, with the table's shape as metadata if known."""
    import pyarrow as pa

    meta = {}
    if shape is not None:
        meta[META_SHAPE] = f"{int(shape[0])},{int(shape[1])}".encode()
    if sorted is not None:
        meta[META_SORTED] = b"1" if sorted else b"0"
    return pa.schema([("i", pa.int64()), ("j", pa.int64())], metadata=meta or None)


def open_pair_writer(path: str | os.PathLike[str], shape: tuple[int, int] | None = None,
                     sorted: bool | None = None, **parquet_options: Any) -> PairWriter:
    """The writer of :data:`PAIR_FORMATS` for the extension of ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        ``.parquet``, ``.csv`` or ``.npy``.
    shape, sorted, **parquet_options
        Passed to :class:`ParquetPairWriter` (``.parquet`` only; the other
        formats hold the pairs alone).

    Raises
    ------
    ValueError
        For an unknown extension.
    FileNotFoundError, PermissionError
        The folder does not exist or is not writable.
    """
    ext = _format(path, PAIR_FORMATS, "write pairs to")
    if ext == ".parquet":
        return ParquetPairWriter(path, shape=shape, sorted=sorted, **parquet_options)
    return {".csv": CsvPairWriter, ".npy": NpyPairWriter}[ext](path)


def write_pairs(path: str | os.PathLike[str], i: ArrayLike, j: ArrayLike) -> int:
    """Write a list of pairs (i[k], j[k]), atomically.

    Parameters
    ----------
    path : str or os.PathLike
        ``.parquet``, ``.csv`` or ``.npy`` (see the module notes), or
        ``.npz`` (int64 arrays ``i`` and ``j``).
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
    ext = _format(path, PAIR_FORMATS + (".npz",), "write pairs to")
    i, j = _pairs_arrays(i, j)
    if ext == ".npz":
        with atomic_path(path) as tmp:
            np.savez(tmp, i=i, j=j)
    else:
        with open_pair_writer(path) as w:
            w.write(i, j)
    return len(i)
