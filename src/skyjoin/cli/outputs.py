"""What each command writes, by the extension of ``--out``: written once, on :mod:`skyjoin.io`.

The routing rule of ``skyjoin join --out`` is :func:`join_output`; the other
writers check their extension and raise :class:`click.BadParameter` for an
unknown one (a usage error, see :mod:`skyjoin.cli.errors`).
"""

from __future__ import annotations

import os

import click
import numpy as np

from ..io import write_indices, write_labels, write_neighbor_table

__all__ = ["extension", "join_output", "write_points", "write_rows", "write_ids", "write_counts",
           "write_labels", "write_table", "sweep_path"]


def extension(path) -> str:
    """Lower-case extension of a path ('' for none)."""
    return os.path.splitext(os.fspath(path))[1].lower()


def join_output(out, counts: bool, distributed: bool = False) -> str:
    """What ``skyjoin join`` makes and writes, from ``--out`` and ``--counts``.

    ``"counts"``: neighbour counts (a .csv/.parquet column); ``"stream"``:
    pairs streamed to one .parquet file in bounded chunks (this machine);
    ``"folder"``: one Parquet file of pairs per partition, written by the
    workers (Dask, any path other than .npz/.parquet); ``"table"``: the whole
    CSR table, to .npz/.parquet if ``out`` is given.
    """
    if counts:
        return "counts"
    ext = extension(out) if out else ""
    if distributed:
        return "folder" if out and ext not in (".npz", ".parquet") else "table"
    return "stream" if ext == ".parquet" else "table"


def write_points(path, X) -> None:
    """Write an (n, d) array of points: .npy, .parquet (columns x0, x1, ...) or .csv/.txt."""
    ext = extension(path)
    if ext == ".npy":
        np.save(path, X)
    elif ext == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({f"x{k}": X[:, k] for k in range(X.shape[1])}), path)
    elif ext in (".csv", ".txt"):
        np.savetxt(path, X, delimiter=",", fmt="%.17g")
    else:
        raise click.BadParameter(f"unknown extension {ext!r}: use .npy, .parquet or .csv",
                                 param_hint="--out")


def write_rows(path, frame, rows) -> None:
    """Write the rows ``rows`` (a sub-frame) of ``frame``: .csv/.txt, .parquet,
    or .npy of their 0-based row positions in ``frame``."""
    ext = extension(path)
    if ext == ".parquet":
        rows.to_parquet(path)
    elif ext == ".npy":
        np.save(path, frame.index.get_indexer(rows.index).astype(np.int64))
    elif ext in (".csv", ".txt"):
        rows.to_csv(path, index=False)
    else:
        raise click.BadParameter(f"unknown extension {ext!r}: use .csv, .parquet or .npy",
                                 param_hint="--out")


def write_ids(path, ids) -> None:
    """Write row ids: .npy, or one column of .csv/.parquet."""
    if extension(path) == ".npy":
        np.save(path, ids)
    else:
        write_indices(path, ids)


def write_counts(path, counts) -> None:
    """Write neighbour counts as one column ``count`` (.csv/.parquet)."""
    write_labels(path, counts, name="count")


def write_table(path, nt) -> None:
    """Write a NeighborTable: .npz (CSR) or .parquet (pairs)."""
    write_neighbor_table(path, nt)


def sweep_path(out, eps, min_samples) -> str:
    """FILE.ext -> FILE_eps<eps>_ms<m>.ext: the file of one clustering of a sweep."""
    stem, ext = os.path.splitext(out)
    return f"{stem}_eps{eps:g}_ms{min_samples}{ext}"
