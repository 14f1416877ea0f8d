"""Helpers shared by the readers and writers: file names and formats."""

from __future__ import annotations

import os
from typing import Sequence

#: File extensions that :func:`skyjoin.io.read_points` understands.
POINT_FORMATS = (".csv", ".txt", ".tsv", ".dat", ".parquet", ".npy")
TEXT_FORMATS = (".csv", ".txt", ".tsv", ".dat")



# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _ext(path) -> str:
    """Lower-case extension of a path."""
    return os.path.splitext(os.fspath(path))[1].lower()


def existing_path(path) -> str:
    """The path as a string; FileNotFoundError if there is no such file."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file: {p!r}")
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p!r} is a directory, not a data file")
    return p


def file_format(path, allowed: Sequence[str], what: str) -> str:
    """The extension of path, checked against the allowed ones."""
    ext = _ext(path)
    if ext not in allowed:
        raise ValueError(
            f"cannot {what} {os.fspath(path)!r}: unknown extension {ext or '(none)'!r}; "
            f"use one of {', '.join(allowed)}"
        )
    return ext
