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

import contextlib
import logging
import os
import shutil
from typing import Iterator

from ..io import ParquetPairWriter

__all__ = ["part_name", "check_folder", "staging", "publish", "write_rows"]

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


def write_rows(out_dir, p, shape, sort, row_ids, indptr, cols):
    """Write a partition's rows as ``part-<p>.parquet`` (atomically): row r, of id
    ``row_ids[r]`` (``r`` when None), holds ``cols[indptr[r]:indptr[r + 1]]``.
    Returns (path, pairs), or (None, 0) without pairs.  The writer's thread
    expands the row ids block by block from the arrays (no per-pair
    temporary here), which a join made: they are not checked again.
    O(pairs), mostly the Parquet encoding."""
    if len(cols) == 0:
        return None, 0
    path = os.path.join(out_dir, part_name(p))
    with ParquetPairWriter(path, shape=shape, sorted=sort) as w:
        w.write_csr(0, indptr, cols, copy=False, row_ids=row_ids, check=False)
    return path, int(len(cols))
