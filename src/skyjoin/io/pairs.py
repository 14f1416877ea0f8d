"""Pair writers: pairs (i, j) streamed to ``.parquet``, ``.csv`` or ``.npy``.

Each writer appends pairs to one file without holding them all, under a
temporary name that becomes the final name only when the writer closes
normally (:mod:`skyjoin.io.atomic`).  :func:`open_pair_writer` picks the
writer by extension; :func:`write_pairs` writes one list of pairs.

Pairs come as two id arrays (:meth:`PairWriter.write`) or as CSR rows
(:meth:`PairWriter.write_csr`: row offsets and column ids, the form of a
join's result, whose row ids are then written without expanding the rows in
Python).  They are copied into blocks of a fixed size, which a background
thread encodes and writes in order while the caller computes the next
pairs (:mod:`skyjoin.io.background`).

Formats (every one read back by pandas: ``pd.read_parquet``,
``pd.read_csv``, ``pd.DataFrame(np.load(path), columns=["i", "j"])``):

* ``.parquet``: columns ``i`` and ``j`` (required, no nulls), one row group
  a block; the table's shape and sortedness in the file's metadata when
  given (so that :func:`skyjoin.io.read_neighbor_table` can rebuild the
  table);
* ``.csv``: a header line ``i,j`` then one pair a line;
* ``.npy``: one (n_pairs, 2) array; its header is written first with room
  for any count and rewritten with the final count on closing.

Ids are int32 when the shape is given and both of its sides are below
2**31 (half the bytes of int64), else int64 (:func:`pair_dtype`).
"""

from __future__ import annotations

import os
import struct
from types import TracebackType
from typing import Any, Iterable

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .atomic import PendingFile, atomic_path
from .background import BlockWriter
from .formats import _format

__all__ = ["PAIR_FORMATS", "PairWriter", "ParquetPairWriter", "CsvPairWriter", "NpyPairWriter",
           "open_pair_writer", "write_pairs", "int_vector", "pair_dtype", "pair_schema"]

#: Extensions that :func:`open_pair_writer` streams pairs to.
PAIR_FORMATS = (".parquet", ".csv", ".npy")

META_SHAPE = b"skyjoin.shape"
META_SORTED = b"skyjoin.sorted"

#: Pairs a block holds (the CSV and NPY writers; Parquet's is its row group).
BLOCK_PAIRS = 1 << 22
#: Blocks that wait or are being written, besides the one being filled.
DEPTH = 2


def int_vector(name: str, a) -> np.ndarray:
    """A 1-D int64 array from integer input (a CuPy array is copied to the host).

    Raises
    ------
    ValueError
        Not 1-D.
    TypeError
        Not integers.
    """
    return _ints(name, a).astype(np.int64, copy=False)


def _ints(name: str, a) -> np.ndarray:
    """A 1-D integer array (any integer dtype, not converted); a CuPy array
    is copied to the host; an empty list gives int64."""
    if hasattr(a, "__cuda_array_interface__"):
        a = a.get()
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not arr.size:
        return arr.astype(np.int64, copy=False)
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr


def _check_fits(name: str, arr: np.ndarray, dtype: np.dtype) -> None:
    """ValueError if a narrowing cast of ``arr`` to ``dtype`` would change a
    value (the file's ids are int32 when its shape allows).  O(len) for a
    narrowing cast, O(1) otherwise."""
    if not arr.size or np.can_cast(arr.dtype, dtype, casting="safe"):
        return
    info = np.iinfo(dtype)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < info.min or hi > info.max:
        raise ValueError(f"{name} holds {lo if lo < info.min else hi}, outside the {dtype} ids "
                         f"of this file (its shape); give the right shape")


def pair_dtype(shape: tuple[int, int] | None) -> np.dtype:
    """The id dtype of a pair file: int32 when ``shape`` is given and both
    sides are below 2**31, else int64."""
    if shape is not None and max(int(shape[0]), int(shape[1])) < 2**31:
        return np.dtype(np.int32)
    return np.dtype(np.int64)


class _Block:
    """A block of pairs being filled: id columns ``i``, ``j`` (views of
    ``base``), ``n`` pairs so far."""

    __slots__ = ("base", "i", "j", "n")

    def __init__(self, base: Any, i: np.ndarray, j: np.ndarray) -> None:
        self.base, self.i, self.j, self.n = base, i, j, 0

    @property
    def room(self) -> int:
        return self.i.shape[0] - self.n


class PairWriter:
    """Append pairs to one file, atomically; the base of the writers.

    Use it as a context manager: on leaving the block normally the file is
    complete under its final name; if the block raises, nothing is left,
    neither under the final name nor under the temporary one.  Subclasses
    write the format (``_open``, ``_encode``, ``_finish``, ``_abort``).

    Parameters
    ----------
    path : str or os.PathLike
        The file to create (replaced if it exists, once complete).
    shape : tuple (n_rows, n_cols), optional
        The table's shape; chooses the id dtype (:func:`pair_dtype`).
    block_pairs : int
        Pairs a block holds: the unit handed to the background thread.
    background : bool
        Encode and write blocks on a background thread (default), or in
        the caller's thread.

    Attributes
    ----------
    n_pairs : int
        Pairs written (or buffered) so far.
    path : str
        The final name.
    dtype : numpy.dtype
        The ids' dtype in the file.

    Notes
    -----
    Memory: at most ``DEPTH + 1`` blocks of ``block_pairs`` pairs (two ids
    each) plus what the format's encoder holds for one block, whatever
    the number of pairs written.  Time: one copy of each pair into a block
    in the caller's thread (and, for :meth:`write_csr`, its row id
    written there), then the format's encoding on the background thread.
    """

    #: The extension this writer writes.
    extension = ""

    def __init__(self, path: str | os.PathLike[str], shape: tuple[int, int] | None = None, *,
                 block_pairs: int = BLOCK_PAIRS, background: bool = True) -> None:
        _format(path, (self.extension,), "stream pairs to")
        if int(block_pairs) < 1:
            raise ValueError(f"block size must be >= 1 pairs, got {block_pairs}")
        self.path = os.fspath(path)
        self.n_pairs = 0
        self.dtype = pair_dtype(shape)
        self._block_pairs = int(block_pairs)
        self._block: _Block | None = None
        self._pending = PendingFile(self.path)
        self._open(self._pending.tmp)
        self._open_now = True
        self._blocks = BlockWriter(self._write_block, self._new_block, depth=DEPTH,
                                   threaded=background)

    # -- what subclasses write ----------------------------------------------
    def _open(self, tmp: str) -> None:
        raise NotImplementedError

    def _new_block(self) -> _Block:
        """An empty block: two id columns of ``block_pairs``."""
        i = np.empty(self._block_pairs, dtype=self.dtype)
        j = np.empty(self._block_pairs, dtype=self.dtype)
        return _Block(None, i, j)

    def _encode(self, block: _Block) -> None:
        """Write the block's ``n`` pairs (on the background thread)."""
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        raise NotImplementedError

    # -- writing -------------------------------------------------------------
    @property
    def _buffered(self) -> int:
        """Pairs in the block being filled (not yet handed over)."""
        return 0 if self._block is None else self._block.n

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"write to a closed {type(self).__name__}")

    def _current(self) -> _Block:
        if self._block is None:
            self._block = self._blocks.take()
            self._block.n = 0
        return self._block

    def _write_block(self, block: _Block) -> None:
        if block.n:
            self._encode(block)

    def _hand_over_if_full(self, block: _Block) -> None:
        if block.room == 0:
            self._block = None
            self._blocks.submit(block)

    def write(self, i: ArrayLike, j: ArrayLike) -> None:
        """Append the pairs (i[k], j[k]); the caller may reuse its arrays afterwards.

        Raises
        ------
        ValueError
            i and j differ in length or are not 1-D, or an id does not fit
            the file's id dtype.
        TypeError
            Not integers.
        """
        self._check_open()
        i = _ints("i", i)
        j = _ints("j", j)
        if len(i) != len(j):
            raise ValueError(f"i and j must have the same length, got {len(i)} and {len(j)}")
        _check_fits("i", i, self.dtype)
        _check_fits("j", j, self.dtype)
        a, m = 0, len(i)
        while a < m:
            blk = self._current()
            take = min(m - a, blk.room)
            blk.i[blk.n:blk.n + take] = i[a:a + take]
            blk.j[blk.n:blk.n + take] = j[a:a + take]
            blk.n += take
            a += take
            self.n_pairs += take
            self._hand_over_if_full(blk)

    def write_csr(self, first_row: int, indptr: ArrayLike, indices: ArrayLike) -> None:
        """Append CSR rows: row ``first_row + r`` holds the columns
        ``indices[indptr[r] - indptr[0]:indptr[r + 1] - indptr[0]]``.

        The row ids are written straight into the block (no per-pair
        temporary); the caller may reuse its arrays afterwards.

        Parameters
        ----------
        first_row : int
            Id of the first row.
        indptr : array_like of int, shape (n_rows + 1,)
            Row offsets (a slice of a larger table's is fine).
        indices : array_like of int, shape (indptr[-1] - indptr[0],)
            The column ids, row after row.

        Raises
        ------
        ValueError
            ``indptr`` empty or decreasing, ``indices`` of the wrong length,
            or an id that does not fit the file's id dtype.
        """
        from ..join.csr import pair_rows  # Numba: loaded on first use

        self._check_open()
        ptr = int_vector("indptr", indptr)
        cols = _ints("indices", indices)
        if len(ptr) < 1:
            raise ValueError("indptr must hold n_rows + 1 offsets, got none")
        m = int(ptr[-1] - ptr[0])
        if len(cols) != m:
            raise ValueError(f"indices must hold indptr[-1] - indptr[0] = {m} ids, "
                             f"got {len(cols)}")
        if len(ptr) > 1 and np.any(ptr[1:] < ptr[:-1]):
            raise ValueError("indptr must be non-decreasing")
        _check_fits("j", cols, self.dtype)
        _check_fits("i", np.array([first_row, first_row + len(ptr) - 2]), self.dtype)
        p = 0
        while p < m:
            blk = self._current()
            take = min(m - p, blk.room)
            pair_rows(ptr, first_row, p, blk.i[blk.n:blk.n + take])
            blk.j[blk.n:blk.n + take] = cols[p:p + take]
            blk.n += take
            p += take
            self.n_pairs += take
            self._hand_over_if_full(blk)

    def write_chunk(self, chunk: Any) -> None:
        """Append a chunk: CSR rows (``row_start``, ``indptr``, ``indices``)
        when it carries them, else its pairs ``.i`` and ``.j`` (e.g. a
        ``PairChunk``)."""
        if getattr(chunk, "indptr", None) is not None:
            self.write_csr(chunk.row_start, chunk.indptr, chunk.indices)
        else:
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
        """Write what is buffered, finish the file and give it its final name
        (idempotent)."""
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
                if self._block is not None:
                    blk, self._block = self._block, None
                    self._blocks.submit(blk)
                self._blocks.drain()
                self._finish()
                self._pending.commit()
                kept = True
        finally:
            if not kept:
                try:
                    self._blocks.cancel()
                    self._abort()
                finally:
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
    """Stream pairs to a Parquet file: required columns ``i`` and ``j``.

    Each block of ``row_group_size`` pairs becomes one row group, encoded by
    ``pyarrow.parquet.ParquetWriter`` on the background thread (pyarrow
    releases the GIL) while the caller computes the next pairs.  Plain
    encoding (no dictionary: ids are nearly all distinct, and building the
    dictionary cost more than the rest of the write), statistics for ``i``
    (a reader can skip row groups by row id), ``compression`` per page.
    Atomic, as every :class:`PairWriter`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.parquet`` file to create.
    shape : tuple (n_rows, n_cols), optional
        The shape of the neighbour table, stored in the file's metadata so
        that :func:`skyjoin.io.read_neighbor_table` can rebuild the table;
        int32 ids when both sides are below 2**31 (else, or without it,
        int64).
    sorted : bool, optional
        Whether columns are ascending within rows, stored likewise.
    row_group_size : int
        Pairs per row group (one block).
    compression : str
        Parquet codec: "lz4" (default), "snappy", "zstd", "gzip", "brotli"
        or "none".  design.md compares their speed and size.
    background : bool
        Encode row groups on a background thread (default).

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
                 compression: str = "lz4", background: bool = True) -> None:
        if int(row_group_size) < 1:
            raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
        self._compression = compression
        self._schema = pair_schema(shape, sorted)
        self._writer: Any = None        # pyarrow.parquet.ParquetWriter, once open
        super().__init__(path, shape, block_pairs=int(row_group_size), background=background)

    def _open(self, tmp: str) -> None:
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(tmp, self._schema, compression=self._compression,
                                        use_dictionary=False, write_statistics=["i"],
                                        write_batch_size=1 << 16)

    def _encode(self, block: _Block) -> None:
        import pyarrow as pa

        n = block.n
        table = pa.Table.from_arrays([pa.array(block.i[:n]), pa.array(block.j[:n])],
                                     schema=self._schema)
        self._writer.write_table(table, row_group_size=n)

    def _finish(self) -> None:
        self._writer.close()

    def _abort(self) -> None:
        self._writer.close()


class CsvPairWriter(PairWriter):
    """Stream pairs to a CSV file: a header line ``i,j``, then one pair a line.

    Each block is formatted by ``pyarrow.csv`` on the background thread.
    Atomic, as every :class:`PairWriter`.

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
        import pyarrow as pa

        self._sink = pa.OSFile(tmp, "wb")
        self._sink.write(b"i,j\n")

    def _encode(self, block: _Block) -> None:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        n = block.n
        pcsv.write_csv(pa.table({"i": block.i[:n], "j": block.j[:n]}), self._sink,
                       pcsv.WriteOptions(include_header=False))

    def _finish(self) -> None:
        self._sink.close()

    def _abort(self) -> None:
        self._sink.close()


class NpyPairWriter(PairWriter):
    """Stream pairs to a ``.npy`` file: one (n_pairs, 2) array of rows (i, j).

    Blocks are (block_pairs, 2) arrays, filled in place and written as they
    are.  The header (format version 1.0) is written first with room for any
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
        d = (f"{{'descr': '{self.dtype.newbyteorder('<').str}', 'fortran_order': False, "
             f"'shape': ({self.n_pairs}, 2), }}")
        body_len = self._HEADER_BYTES - 10
        body = d.ljust(body_len - 1).encode("latin1") + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", body_len) + body

    def _open(self, tmp: str) -> None:
        self._fh = open(tmp, "wb", buffering=0)
        self._fh.write(self._header())

    def _new_block(self) -> _Block:
        base = np.empty((self._block_pairs, 2), dtype=self.dtype.newbyteorder("<"))
        return _Block(base, base[:, 0], base[:, 1])

    def _encode(self, block: _Block) -> None:
        view = memoryview(block.base[:block.n]).cast("B")
        while len(view):
            view = view[self._fh.write(view):]

    def _finish(self) -> None:
        try:
            self._fh.seek(0)
            self._fh.write(self._header())
        finally:
            self._fh.close()

    def _abort(self) -> None:
        self._fh.close()


def pair_schema(shape=None, sorted=None, dtype: DTypeLike | None = None):
    """The Parquet schema of pairs: required id columns ``i``, ``j`` of
    :func:`pair_dtype` (or ``dtype``), with the table's shape and sortedness
    as metadata when known."""
    import pyarrow as pa

    meta = {}
    if shape is not None:
        meta[META_SHAPE] = f"{int(shape[0])},{int(shape[1])}".encode()
    if sorted is not None:
        meta[META_SORTED] = b"1" if sorted else b"0"
    t = pa.from_numpy_dtype(np.dtype(dtype) if dtype is not None else pair_dtype(shape))
    return pa.schema([pa.field("i", t, nullable=False), pa.field("j", t, nullable=False)],
                     metadata=meta or None)


def open_pair_writer(path: str | os.PathLike[str], shape: tuple[int, int] | None = None,
                     sorted: bool | None = None, **parquet_options: Any) -> PairWriter:
    """The writer of :data:`PAIR_FORMATS` for the extension of ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        ``.parquet``, ``.csv`` or ``.npy``.
    shape : tuple (n_rows, n_cols), optional
        The table's shape: the id dtype of every format (:func:`pair_dtype`),
        and the Parquet file's metadata.
    sorted, **parquet_options
        Passed to :class:`ParquetPairWriter` (``.parquet`` only).

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
    return {".csv": CsvPairWriter, ".npy": NpyPairWriter}[ext](path, shape)


def write_pairs(path: str | os.PathLike[str], i: ArrayLike, j: ArrayLike) -> int:
    """Write a list of pairs (i[k], j[k]), atomically.

    Parameters
    ----------
    path : str or os.PathLike
        ``.parquet``, ``.csv`` or ``.npy`` (see the module notes; int64
        ids), or ``.npz`` (int64 arrays ``i`` and ``j``).
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
    i, j = int_vector("i", i), int_vector("j", j)
    if len(i) != len(j):
        raise ValueError(f"i and j must have the same length, got {len(i)} and {len(j)}")
    if ext == ".npz":
        with atomic_path(path) as tmp:
            np.savez(tmp, i=i, j=j)
    else:
        with open_pair_writer(path) as w:
            w.write(i, j)
    return len(i)
