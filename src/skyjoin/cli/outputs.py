"""What each command writes, by the extension of ``--out``, checked before any work.

The writers themselves are :mod:`skyjoin.io`'s (atomic: a failed or
interrupted run leaves no partial file).  This module holds the formats each
output accepts, :func:`check_out` (extension, folder, writable: a usage
error, before any computation), the routing rule of ``skyjoin join --out``
(:func:`join_output`) and the file names of a sweep (:func:`sweep_path`).
"""

from __future__ import annotations

import os

import click

from ..io import COLUMN_FORMATS, TABLE_FORMATS, check_writable

__all__ = ["POINTS_OUT", "PAIRS_OUT", "COLUMN_OUT", "PLOT_OUT", "extension", "check_out",
           "join_output", "sweep_path"]

#: ``skyjoin generate --out``.
POINTS_OUT = (".npy", ".parquet", ".csv", ".txt")
#: ``skyjoin join --out`` (pairs, or the CSR table as ``.npz``).
PAIRS_OUT = TABLE_FORMATS
#: Counts, labels and skyline rows.
COLUMN_OUT = COLUMN_FORMATS
#: ``--plot``.
PLOT_OUT = (".png", ".pdf", ".svg")


def extension(path) -> str:
    """Lower-case extension of a path ('' for none)."""
    return os.path.splitext(os.fspath(path))[1].lower()


def check_out(path, formats, option: str = "--out", what: str = "the output"):
    """Check an output path before any work: its extension is one of
    ``formats``, its folder exists and is writable.  Returns the path (None
    stays None).

    Raises
    ------
    click.BadParameter
        A usage error (exit status 2) naming the option and the problem.

    Notes
    -----
    O(1): two ``stat`` calls; nothing is created.
    """
    if path is None:
        return None
    ext = extension(path)
    if ext not in formats:
        raise click.BadParameter(
            f"{what} cannot be written as {ext or 'a file without extension'!r}: "
            f"use {', '.join(formats[:-1])} or {formats[-1]}", param_hint=f"'{option}'")
    try:
        check_writable(path)
    except OSError as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{option}'") from None
    return path


def join_output(out, counts: bool, distributed: bool = False) -> str:
    """What ``skyjoin join`` makes and writes, from ``--out`` and ``--counts``.

    ``"counts"``: neighbour counts (written as one column if ``out``);
    ``"summary"``: no ``--out``, so the counts alone, summed for the
    summary (never a table); ``"stream"``: pairs streamed to one .parquet,
    .csv or .npy file in bounded chunks (this machine); ``"table"``: the
    whole CSR table, written as .npz (this machine) or .npz/.parquet (Dask);
    ``"folder"``: one Parquet file of pairs per partition, written by the
    workers (Dask, ``out`` without one of those extensions).
    """
    if counts:
        return "counts"
    if not out:
        return "summary"
    ext = extension(out)
    if distributed:
        return "table" if ext in (".npz", ".parquet") else "folder"
    return "table" if ext == ".npz" else "stream"


def sweep_path(out, eps, min_samples) -> str:
    """FILE.ext -> FILE_eps<eps>_ms<m>.ext: the file of one clustering of a sweep."""
    stem, ext = os.path.splitext(out)
    return f"{stem}_eps{eps:g}_ms{min_samples}{ext}"
