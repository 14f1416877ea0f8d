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
pairs (:mod:`skyjoin.io.pair_writer`, the base of the writers).

Formats (every one read back by pandas: ``pd.read_parquet``,
``pd.read_csv``, ``pd.DataFrame(np.load(path), columns=["i", "j"])``):

* ``.parquet``: columns ``i`` and ``j`` (required, no nulls), one row group
  a block; the table's shape (when given) and sortedness (given, or found
  from the pairs) in the file's metadata (so that
  :func:`skyjoin.io.read_neighbor_table` can rebuild the table);
* ``.csv``: a header line ``i,j`` then one pair a line;
* ``.npy``: one (n_pairs, 2) array; its header is written first with room
  for any count and rewritten with the final count on closing.

Ids are int32 when the shape is given and both of its sides are below
2**31 (half the bytes of int64), else int64 (:func:`pair_dtype`).
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .._core.pool import map_spans
from .atomic import atomic_path
from .formats import file_format
from .pair_writer import Block, PairWriter, RowOrder, int_vector, pair_dtype

__all__ = ["PAIR_FORMATS", "PairWriter", "ParquetPairWriter", "CsvPairWriter", "NpyPairWriter",
           "open_pair_writer", "write_pairs", "int_vector", "pair_dtype", "pair_schema"]

#: Extensions that :func:`open_pair_writer` streams pairs to.
PAIR_FORMATS = (".parquet", ".csv", ".npy")

META_SHAPE = b"skyjoin.shape"
META_SORTED = b"skyjoin.sorted"

#: Fewest pairs a thread formats as CSV text.
CSV_SPAN = 1 << 18
#: The Parquet codecs of ``ParquetPairWriter`` by default, a column, for rows
#: of at least ``DELTA_BELOW_PAIRS`` pairs on average.
DEFAULT_CODECS = {"i": "lz4", "j": "none"}
#: Pairs a row (on average, in the first block) below which the default writer
#: delta-encodes the row ids (``DELTA_BINARY_PACKED``, no codec) instead of
#: compressing them with lz4 (docs/decisions/join-streaming.md).
DELTA_BELOW_PAIRS = 8


class ParquetPairWriter(PairWriter):
    """Stream pairs to a Parquet file: required columns ``i`` and ``j``.

    Each block of ``row_group_size`` pairs becomes one row group, encoded by
    ``pyarrow.parquet.ParquetWriter`` on the background thread (pyarrow
    releases the GIL) while the caller computes the next pairs.  No
    dictionary (ids are nearly all distinct, and building the dictionary
    cost more than the rest of the write).  The column ids, nearly random
    within a row group, are stored as they are (lz4 and snappy do not
    shrink them).  By default the row ids, in runs of equal values, are
    compressed with lz4 when the first block's rows hold at least
    ``DELTA_BELOW_PAIRS`` pairs on average, and delta-encoded
    (``DELTA_BINARY_PACKED``, no codec) when they are shorter: lz4 is slow
    on short runs and shrinks them less (docs/decisions/join-streaming.md
    has the figures).  The file is opened with the first block.  Atomic, as
    every :class:`PairWriter`.

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
        Whether the pairs are sorted (rows ascending, columns ascending
        within a row), recorded in the metadata as ``skyjoin.sorted`` (``1``
        or ``0``), as ``skyjoin join --out`` does.  None (default): found
        from the pairs written (:class:`~skyjoin.io.pair_writer.RowOrder`,
        O(pairs) on the writer's thread) and recorded when the file closes
        (needs pyarrow >= 17, whose ``ParquetWriter`` can add metadata
        then; with an older pyarrow nothing is recorded, as for a file of
        unknown order).
    row_group_size : int
        Pairs per row group (one block).
    compression : str or dict, optional
        Parquet codec of both columns ("lz4", "snappy", "zstd", "gzip",
        "brotli" or "none"), or one a column (``{"i": ..., "j": ...}``),
        plain encoding; default: none for ``j``, and for ``i`` lz4 or delta
        encoding by the length of the rows (above).  zstd makes the
        smallest files and the slowest writes.
    statistics : bool
        Store the min and max of ``i`` per row group (lets readers skip row
        groups by row id; costs a pass over the row ids).
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
                 compression: str | dict[str, str] | None = None, statistics: bool = False,
                 background: bool = True) -> None:
        if int(row_group_size) < 1:
            raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
        self._compression = compression
        self._statistics = ["i"] if statistics else False
        self._schema = pair_schema(shape, sorted)
        self._tmp = ""
        self._writer: Any = None        # pyarrow.parquet.ParquetWriter, from the first block
        if sorted is None:
            self._order = RowOrder()
        super().__init__(path, shape, block_pairs=int(row_group_size), background=background)

    def _open(self, tmp: str) -> None:
        self._tmp = tmp         # opened by the first block, whose rows choose the encoding

    def _open_for(self, i: np.ndarray) -> None:
        """The pyarrow writer, its row ids' encoding chosen from the row ids ``i``
        of the first block (the class docstring's rule): O(len(i))."""
        import pyarrow.parquet as pq

        options: dict[str, Any] = {"compression": self._compression}
        if self._compression is None:
            runs = 1 + int(np.count_nonzero(i[1:] != i[:-1])) if len(i) else 1
            if len(i) < DELTA_BELOW_PAIRS * runs:
                options = {"compression": "none",
                           "column_encoding": {"i": "DELTA_BINARY_PACKED"}}
            else:
                options = {"compression": DEFAULT_CODECS}
        self._writer = pq.ParquetWriter(self._tmp, self._schema, use_dictionary=False,
                                        write_statistics=self._statistics,
                                        write_batch_size=1 << 16, **options)

    def _encode(self, block: Block, j: np.ndarray) -> None:
        import pyarrow as pa

        n = block.n
        if self._writer is None:
            self._open_for(block.i[:n])
        table = pa.Table.from_arrays([pa.array(block.i[:n]), pa.array(j)], schema=self._schema)
        self._writer.write_table(table, row_group_size=n)

    def _finish(self) -> None:
        if self._writer is None:        # no pairs: a file with the schema alone
            self._open_for(np.zeros(0, dtype=self.dtype))
        if self._order is not None and hasattr(self._writer, "add_key_value_metadata"):
            self._add_metadata({META_SORTED: b"1" if self._order.sorted else b"0"})
        self._writer.close()

    def _add_metadata(self, meta: dict[bytes, bytes]) -> None:
        """Record ``meta`` in the open file as if the schema had carried it: in
        the file's key-value metadata and in the Arrow schema stored there
        (``ARROW:schema``, the base64 of the IPC-serialised schema, which
        pyarrow reads back as the file's schema), so that readers of either
        find it.  O(1)."""
        import base64

        schema = self._schema.with_metadata({**(self._schema.metadata or {}), **meta})
        stored = base64.b64encode(schema.serialize().to_pybytes())
        self._writer.add_key_value_metadata({**meta, b"ARROW:schema": stored})

    def _abort(self) -> None:
        if self._writer is not None:
            self._writer.close()


class CsvPairWriter(PairWriter):
    """Stream pairs to a CSV file: a header line ``i,j``, then one pair a line.

    Each block is formatted by ``pyarrow.csv`` in spans on the host thread
    pool (``skyjoin._core.pool``, all cores), then written in order, on the
    background thread.  Memory: the text of one block besides the blocks.
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

    def _encode(self, block: Block, j: np.ndarray) -> None:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        i = block.i[:block.n]
        options = pcsv.WriteOptions(include_header=False)

        def text(a: int, b: int) -> Any:
            out = pa.BufferOutputStream()
            pcsv.write_csv(pa.table({"i": i[a:b], "j": j[a:b]}), out, options)
            return out.getvalue()

        for part in map_spans(text, block.n, min_span=CSV_SPAN):
            self._sink.write(part)

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
    _J_FROM_ANY = False                   # the block is written as it is: (i, j) rows

    def _header(self) -> bytes:
        d = (f"{{'descr': '{self.dtype.newbyteorder('<').str}', 'fortran_order': False, "
             f"'shape': ({self.n_pairs}, 2), }}")
        body_len = self._HEADER_BYTES - 10
        body = d.ljust(body_len - 1).encode("latin1") + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", body_len) + body

    def _open(self, tmp: str) -> None:
        self._fh = open(tmp, "wb", buffering=0)
        self._fh.write(self._header())

    def _new_block(self) -> Block:
        base = np.empty((self._block_pairs, 2), dtype=self.dtype.newbyteorder("<"))
        return Block(base, base[:, 0], base[:, 1])

    def _encode(self, block: Block, j: np.ndarray) -> None:
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
    sorted : bool, optional
        Whether the pairs are sorted, recorded in a Parquet file's metadata
        (``skyjoin.sorted``); None (default): found from the pairs written
        (see :class:`ParquetPairWriter`).  ``.parquet`` only.
    **parquet_options
        Passed to :class:`ParquetPairWriter` (``.parquet`` only).

    Raises
    ------
    ValueError
        For an unknown extension.
    FileNotFoundError, PermissionError
        The folder does not exist or is not writable.
    """
    ext = file_format(path, PAIR_FORMATS, "write pairs to")
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
    ext = file_format(path, PAIR_FORMATS + (".npz",), "write pairs to")
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
