"""What each command reads: point files and tables, with the readers' notices.

A reader's :class:`skyjoin.io.DroppedIndexColumn` warning (a pandas index
column left out) becomes one ``Notice:`` line on standard error; errors
propagate to :mod:`skyjoin.cli.errors`.
"""

from __future__ import annotations

import warnings

import click

from ..io import DroppedIndexColumn, read_frame, read_points
from .options import phase

__all__ = ["read_input", "read_input_frame"]


def _with_notices(fn, *args, **kwargs):
    """Call a reader; print each DroppedIndexColumn warning as a Notice line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DroppedIndexColumn)
        out = fn(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, DroppedIndexColumn):
            click.echo(f"Notice: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return out


def read_input(path, columns=None):
    """The points of ``path`` (the ``--columns`` selection) and their column names.

    Returns
    -------
    (ndarray of float64, shape (n, d), list of str)
    """
    with phase(f"read {path}"):
        return _with_notices(read_points, path, columns=columns, return_names=True)


def read_input_frame(path):
    """The table of ``path`` as a DataFrame (the skyline's input)."""
    with phase(f"read {path}"):
        return _with_notices(read_frame, path)
