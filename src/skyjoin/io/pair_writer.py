"""The base of the pair writers: pairs copied into blocks, written in order
on a background thread, into one file that appears only when complete.

:class:`PairWriter` takes pairs as two id arrays (:meth:`PairWriter.write`)
or as CSR rows (:meth:`PairWriter.write_csr`: row offsets and column ids,
the form of a join's result, whose row ids are written straight into the
block by ``join.csr.pair_rows``, never expanded in Python).  Full blocks go
to a :class:`~skyjoin.io.background.BlockWriter`, whose thread encodes and
writes them while the caller computes the next pairs.  The formats
(``skyjoin.io.pairs``) say how a block is encoded.

Ids are int32 when the table's shape is given and both of its sides are
below 2**31 (half the bytes of int64), else int64 (:func:`pair_dtype`); a
narrowing cast is checked, never silent.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from types import TracebackType
from typing import Any, Iterable

import numpy as np
from numpy.typing import ArrayLike

from .._core.pool import map_spans
from .atomic import PendingFile
from .background import BlockWriter
from .formats import file_format

__all__ = ["PairWriter", "Block", "RowOrder", "int_vector", "pair_dtype", "BLOCK_PAIRS",
           "DEPTH", "ORDER_SPAN"]

#: Pairs a block holds (the CSV and NPY writers; Parquet's is its row group).
BLOCK_PAIRS = 1 << 22
#: Blocks that wait or are being written, besides the one being filled.
DEPTH = 2

_NO_IDS = np.zeros(0, dtype=np.int64)   # pair_rows: rows numbered from first_row

#: Pairs a step of :class:`RowOrder`'s test compares (its temporaries stay in cache).
ORDER_SPAN = 1 << 18


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


class RowOrder:
    """Whether the pairs of a file, seen block after block in file order, are
    sorted: rows ascending, and columns ascending within a row (ties
    allowed), the order of a sorted join's table.

    :meth:`see` costs O(pairs) on the writer's thread, in steps of
    ``ORDER_SPAN`` pairs (a few ns a pair: about a fifth more time for a
    Parquet file of long sorted rows), and nothing once the order is
    broken.  A writer given the order (``sorted=``) does not test it.
    """

    def __init__(self) -> None:
        self.sorted = True
        self._last: tuple[int, int] | None = None

    def see(self, i: np.ndarray, j: np.ndarray) -> None:
        """Take the next pairs (row ids ``i``, column ids ``j``) of the file."""
        n = len(i)
        if not self.sorted or n == 0:
            return
        if self._last is not None:
            li, lj = self._last
            if int(i[0]) < li or (int(i[0]) == li and int(j[0]) < lj):
                self.sorted = False
                return
        for a in range(0, n - 1, ORDER_SPAN):
            b = min(a + ORDER_SPAN, n - 1)
            prev_i, next_i = i[a:b], i[a + 1:b + 1]
            if not (bool((next_i >= prev_i).all())
                    and bool(((j[a + 1:b + 1] >= j[a:b]) | (next_i != prev_i)).all())):
                self.sorted = False
                return
        self._last = (int(i[-1]), int(j[-1]))


class Block:
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
    Memory, whatever the number of pairs written: at most ``DEPTH + 3``
    blocks of ``block_pairs`` pairs (two ids each: ``DEPTH + 1`` filled by
    the caller, two by the thread for CSR rows written without a copy),
    what the format's encoder holds for one block, and at most one chunk
    of the caller's held until written (:meth:`write_csr` with
    ``copy=False``, :meth:`write_chunk`).  Time: :meth:`write` and
    :meth:`write_csr` copy each pair into a block in the caller's thread;
    with ``copy=False`` the row ids are written and the pairs encoded on
    the background thread alone, while the caller computes the next chunk.
    """

    #: Whether the format encodes a block's column ids from any 1-D array
    #: (a slice of the caller's), not only from the block's own.
    _J_FROM_ANY = True

    #: The extension this writer writes.
    extension = ""

    #: Tracks the order of the pairs written, for a format that records it
    #: (set by the subclass; None: not tracked).
    _order: RowOrder | None = None

    def __init__(self, path: str | os.PathLike[str], shape: tuple[int, int] | None = None, *,
                 block_pairs: int = BLOCK_PAIRS, background: bool = True) -> None:
        file_format(path, (self.extension,), "stream pairs to")
        if int(block_pairs) < 1:
            raise ValueError(f"block size must be >= 1 pairs, got {block_pairs}")
        self.path = os.fspath(path)
        self.n_pairs = 0
        self.dtype = pair_dtype(shape)
        self._block_pairs = int(block_pairs)
        self._block: Block | None = None
        self._scratch: tuple[Block, Block] | None = None   # the thread's blocks for CSR rows
        self._pending = PendingFile(self.path)
        self._open(self._pending.tmp)
        self._open_now = True
        self._blocks = BlockWriter(self._write_block, self._new_block, depth=DEPTH,
                                   threaded=background)

    # -- what subclasses write ----------------------------------------------
    def _open(self, tmp: str) -> None:
        raise NotImplementedError

    def _new_block(self) -> Block:
        """An empty block: two id columns of ``block_pairs``."""
        i = np.empty(self._block_pairs, dtype=self.dtype)
        j = np.empty(self._block_pairs, dtype=self.dtype)
        return Block(None, i, j)

    def _encode(self, block: Block, j: np.ndarray) -> None:
        """Write the block's ``n`` pairs (on the background thread): row ids
        ``block.i[:n]``, column ids ``j`` (``block.j[:n]``, or any 1-D array
        of the file's dtype when ``_J_FROM_ANY``)."""
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

    def _current(self) -> Block:
        if self._block is None:
            self._block = self._blocks.take()
            self._block.n = 0
        return self._block

    def _encode_in_order(self, block: Block, j: np.ndarray) -> None:
        """``_encode``, the pairs seen by ``_order`` first (if tracked)."""
        if self._order is not None:
            self._order.see(block.i[:block.n], j)
        self._encode(block, j)

    def _write_block(self, block: Block) -> None:
        if block.n:
            self._encode_in_order(block, block.j[:block.n])

    def _write_csr_now(self, first_row: int, ptr: np.ndarray, cols: np.ndarray,
                       row_ids: np.ndarray) -> None:
        """Write CSR rows block by block from the caller's arrays (on the
        background thread): row ids into one of two blocks of the thread's
        (in spans on the host pool), column ids sliced from ``cols`` where
        the format allows, else copied.  A helper thread fills the next
        block while this one encodes the current one, so the expansion of
        the row ids costs no time beside the encoding."""
        from ..simjoin.csr import pair_rows  # Numba: loaded on first use

        if self._scratch is None:
            self._scratch = (self._new_block(), self._new_block())
        blocks = self._scratch
        size = blocks[0].i.shape[0]
        direct = self._J_FROM_ANY and cols.dtype == self.dtype
        starts = range(0, cols.shape[0], size)

        def fill(p: int, blk: Block) -> tuple[Block, np.ndarray]:
            take = min(size, cols.shape[0] - p)
            out = blk.i

            def rows(a: int, b: int) -> None:
                pair_rows(ptr, first_row, row_ids, p + a, out[a:b])

            map_spans(rows, take)                     # nogil: the host pool's threads
            if direct:
                j = cols[p:p + take]
            else:
                blk.j[:take] = cols[p:p + take]
                j = blk.j[:take]
            blk.n = take
            return blk, j

        if len(starts) == 0:
            return
        with cf.ThreadPoolExecutor(1, thread_name_prefix="skyjoin-fill") as ahead:
            nxt = ahead.submit(fill, starts[0], blocks[0])
            for k in range(len(starts)):
                blk, j = nxt.result()
                if self._blocks.stopped:              # abandoned: stop between blocks
                    return
                if k + 1 < len(starts):
                    nxt = ahead.submit(fill, starts[k + 1], blocks[(k + 1) % 2])
                self._encode_in_order(blk, j)

    def _hand_over_if_full(self, block: Block) -> None:
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

    def write_csr(self, first_row: int, indptr: ArrayLike, indices: ArrayLike, *,
                  copy: bool = True, row_ids: ArrayLike | None = None,
                  check: bool = True) -> None:
        """Append CSR rows: row ``first_row + r`` (or ``row_ids[r]``) holds the
        columns ``indices[indptr[r] - indptr[0]:indptr[r + 1] - indptr[0]]``.

        The row ids are written straight into a block (no per-pair
        temporary).  With ``copy`` (default) the pairs are copied into
        blocks now, and the caller may reuse its arrays afterwards; with
        ``copy=False`` the writer keeps the arrays until it has written
        them on its thread (the caller must not change them), and returns
        at once unless an earlier such call is still being written.

        Parameters
        ----------
        first_row : int
            Id of the first row.
        indptr : array_like of int, shape (n_rows + 1,)
            Row offsets (a slice of a larger table's is fine).
        indices : array_like of int, shape (indptr[-1] - indptr[0],)
            The column ids, row after row.
        copy : bool
            Copy now (default), or write from the caller's arrays.
        row_ids : array_like of int, shape (n_rows,), optional
            The id of each row, instead of ``first_row + r`` (the rows of a
            partition, for instance); kept, like the arrays, with ``copy=False``.
        check : bool
            Check that ``indptr`` is non-decreasing and that every id fits
            the file's id dtype (default): O(rows + pairs) in the caller's
            thread.  False skips both, for a table that a skyjoin join made
            (its offsets and ids are right by construction); wrong arrays
            then make a wrong file.  Lengths are checked either way.

        Raises
        ------
        ValueError
            ``indptr`` empty or decreasing, ``indices`` of the wrong length,
            or an id that does not fit the file's id dtype.
        """
        from ..simjoin.csr import pair_rows  # Numba: loaded on first use

        self._check_open()
        ptr = int_vector("indptr", indptr)
        cols = _ints("indices", indices)
        if len(ptr) < 1:
            raise ValueError("indptr must hold n_rows + 1 offsets, got none")
        m = int(ptr[-1] - ptr[0])
        if len(cols) != m:
            raise ValueError(f"indices must hold indptr[-1] - indptr[0] = {m} ids, "
                             f"got {len(cols)}")
        if check and len(ptr) > 1 and np.any(ptr[1:] < ptr[:-1]):
            raise ValueError("indptr must be non-decreasing")
        if check:
            _check_fits("j", cols, self.dtype)
        if row_ids is None:
            ids = _NO_IDS
            _check_fits("i", np.array([first_row, first_row + len(ptr) - 2]), self.dtype)
        else:
            ids = int_vector("row_ids", row_ids)
            if len(ids) != len(ptr) - 1:
                raise ValueError(f"row_ids must hold one id per row ({len(ptr) - 1}), "
                                 f"got {len(ids)}")
            if check:
                _check_fits("i", ids, self.dtype)
        if not copy:
            if m:
                if self._block is not None and self._block.n:
                    blk, self._block = self._block, None      # earlier pairs first
                    self._blocks.submit(blk)
                self._blocks.submit_call(lambda: self._write_csr_now(first_row, ptr, cols, ids))
                self.n_pairs += m
            return
        p = 0
        while p < m:
            blk = self._current()
            take = min(m - p, blk.room)
            pair_rows(ptr, first_row, ids, p, blk.i[blk.n:blk.n + take])
            blk.j[blk.n:blk.n + take] = cols[p:p + take]
            blk.n += take
            p += take
            self.n_pairs += take
            self._hand_over_if_full(blk)

    def write_chunk(self, chunk: Any) -> None:
        """Append a chunk: CSR rows (``row_start``, ``indptr``, ``indices``),
        written from the chunk's own arrays (``copy=False``: a chunk of
        ``self_join_chunks`` is never changed after it is yielded), when it
        carries them; else its pairs ``.i`` and ``.j`` (copied)."""
        if getattr(chunk, "indptr", None) is not None:
            self.write_csr(chunk.row_start, chunk.indptr, chunk.indices, copy=False)
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


