"""The folder of a partitioned join: one Parquet file per partition, written by
the workers, all or none.

The workers write the parts of a call into a hidden folder of that call,
``<out>/.<call token>/``, each atomically (:class:`skyjoin.io.ParquetPairWriter`).
Once every part is written, the driver moves them into ``<out>``
(:func:`publish`, one rename each, no data through the driver), then removes
the call's hidden folder with whatever it still holds: the temporary file of
a worker killed in the middle of a write (Dask ran the task again
elsewhere), or the parts of a call that failed.  So ``<out>`` receives
complete parts of a complete result, or nothing, and no other file; files
of other calls are never touched.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import queue
import shutil
import threading
from typing import Iterator

from ..io import ParquetPairWriter

__all__ = ["part_name", "check_folder", "staging", "publish", "write_rows", "PartWriter",
           "STREAM_BATCH_PAIRS"]

log = logging.getLogger("skyjoin")


def part_name(p: int) -> str:
    """The file name of partition p's pairs."""
    return f"part-{p:05d}.parquet"


def check_folder(out: str | os.PathLike[str]) -> str:
    """The absolute folder ``out``, created if needed, holding no ``part-*.parquet``.

    Raises
    ------
    ValueError
        The folder already holds ``part-*.parquet`` files (they would be mixed
        with this result's).
    """
    out_dir = os.path.abspath(os.fspath(out))
    os.makedirs(out_dir, exist_ok=True)
    stale = sorted(f for f in os.listdir(out_dir)
                   if f.startswith("part-") and f.endswith(".parquet"))
    if stale:
        raise ValueError(f"{out_dir!r} already holds part-*.parquet files (e.g. {stale[0]}); "
                         "write to an empty folder so that old parts are not mixed in")
    return out_dir


@contextlib.contextmanager
def staging(out_dir: str, token: str) -> Iterator[str]:
    """The hidden folder where the workers write this call's parts; removed,
    with what it holds, when the block ends (normally or not)."""
    stage = os.path.join(out_dir, f".{token}")
    os.mkdir(stage)
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if os.path.exists(stage):     # a write of a cancelled task still going on
            log.warning("could not remove %s: a task of a failed call may still be writing "
                        "there", stage)


def publish(stage: str, written: list[tuple[str | None, int]]) -> list[str]:
    """Move the parts written in ``stage`` up into the output folder (the folder
    that holds ``stage``); their final paths.

    ``written`` holds the (path, pairs) of each partition, ``(None, 0)`` for
    a partition without pairs (no file).  O(parts) renames.
    """
    out_dir = os.path.dirname(stage)
    files = []
    for path, _ in written:
        if path is None:
            continue
        if os.path.dirname(path) != stage:      # never expected: paths come from staging
            raise RuntimeError(f"a part was written outside {stage!r}: {path!r}")
        final = os.path.join(out_dir, os.path.basename(path))
        os.replace(path, final)
        files.append(final)
    return files


#: Pairs per GPU batch when a part is written as the GPU fills it: the
#: writer encodes one batch while the GPU fills the next (a few batches a
#: part; docs/decisions/distributed-parquet-parts.md).
STREAM_BATCH_PAIRS = 1 << 24


class PartWriter:
    """Partition p's part ``part-<p>.parquet`` in ``out_dir``, written row batch
    by row batch as a join fills its host table (atomically: the file
    appears when :meth:`close` succeeds, not at all on :meth:`discard` or
    without pairs).

    :meth:`rows` is the ``rows_ready`` callback of
    :func:`skyjoin.distributed.owned_rows.task_self_join`: rows [r0, r1) of the table, of
    ids ``row_ids[r0:r1]`` (``r0...`` when None), are queued for the writer
    without a copy and without being checked again (a join made them), and
    the call returns at once: the GPU's thread never waits for the
    encoding.  A feeding thread hands them to the writer's thread in order.
    O(pairs), mostly the Parquet encoding, on the writer's thread; memory:
    the table's own arrays, which the caller keeps until :meth:`close`.
    """

    def __init__(self, out_dir: str, p: int, shape, sort: bool, row_ids=None) -> None:
        self.path = os.path.join(out_dir, part_name(p))
        self._ids = row_ids
        self._w = ParquetPairWriter(self.path, shape=shape, sorted=sort)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._feeder: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stop = False
        self._closed: cf.Future | None = None     # closing()'s future, once asked

    def rows(self, r0: int, r1: int, indptr, indices) -> None:
        """Queue rows [r0, r1) of the table (indptr, indices) for writing."""
        if int(indptr[r1]) == int(indptr[r0]):
            return
        self._start()
        self._queue.put((r0, r1, indptr, indices))

    def _start(self) -> None:
        if self._feeder is None:
            self._feeder = threading.Thread(target=self._feed, name="skyjoin-part-feed",
                                            daemon=True)
            self._feeder.start()

    def _feed(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, cf.Future):       # closing(): every queued row is written
                try:
                    item.set_result(self._finish())
                except BaseException as exc:      # handed to whoever waits on the future
                    item.set_exception(exc)
                return
            if self._stop or self._error is not None:
                continue
            r0, r1, indptr, indices = item
            a, b = int(indptr[r0]), int(indptr[r1])
            ids = None if self._ids is None else self._ids[r0:r1]
            try:
                self._w.write_csr(r0, indptr[r0:r1 + 1], indices[a:b], copy=False, row_ids=ids,
                                  check=False)
            except BaseException as exc:      # raised by closing()
                self._error = exc

    def _join_feeder(self) -> None:
        if self._feeder is not None:
            self._queue.put(None)
            self._feeder.join()
            self._feeder = None

    def _finish(self) -> tuple[str | None, int]:
        if self._error is not None:
            self._w.discard()
            raise self._error
        if self._w.n_pairs == 0:
            self._w.discard()
            return None, 0
        self._w.close()
        return self.path, int(self._w.n_pairs)

    def closing(self) -> cf.Future:
        """Finish the part on the feeding thread once every queued row is
        written, and return at once: a Future of (path, pairs), or of
        (None, 0) and no file without pairs; the writer's error is raised
        there (and no file is left).  Asked again, the same Future."""
        if self._closed is None:
            self._closed = cf.Future()
            self._start()
            self._queue.put(self._closed)
        return self._closed

    def close(self) -> tuple[str | None, int]:
        """:meth:`closing`, waited for."""
        return self.closing().result()

    def discard(self) -> None:
        """Abandon the part: no file is left (idempotent)."""
        self._stop = True
        self._w.discard()
        self._join_feeder()

    def __enter__(self) -> "PartWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()


def write_rows(out_dir, p, shape, sort, row_ids, indptr, cols):
    """Write a partition's rows as ``part-<p>.parquet`` (atomically): row r, of id
    ``row_ids[r]`` (``r`` when None), holds ``cols[indptr[r]:indptr[r + 1]]``.
    Returns (path, pairs), or (None, 0) without pairs.  One
    :class:`PartWriter` batch: O(pairs), mostly the Parquet encoding."""
    if len(cols) == 0:
        return None, 0
    with PartWriter(out_dir, p, shape, sort, row_ids) as w:
        w.rows(0, len(indptr) - 1, indptr, cols)
        return w.close()
