"""What each command reads: point files and tables, with the readers' notices.

A reader's :class:`skyjoin.DroppedIndexColumn` warning (a pandas index
column left out) becomes one ``Notice:`` line on standard error.  A column
selection that names no column of the file (:class:`skyjoin.ColumnError`)
is a usage error of the option that selected it (exit status 2); columns
that do not hold numbers (:class:`skyjoin.NonNumericColumnError`) are
a data error (exit status 1) whose message quotes the first bad value and
says which columns do hold numbers and how to choose them.  Other errors
propagate to :mod:`skyjoin.cli.errors`.

Every command uses every column of its input unless told otherwise, and all
of them must hold numbers: no column is dropped without the user saying so.
"""

from __future__ import annotations

import warnings

import click

from ..errors import ColumnError, DroppedIndexColumn, NonNumericColumnError
from ..io import read_frame, read_points
from .options import phase

__all__ = ["read_input", "read_input_frame", "column_names_text", "not_numbers_error",
           "column_usage_error"]


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


def column_names_text(names, most: int = 8) -> str:
    """'a, b, c' for the summary lines; beyond ``most`` names, the first
    ones and how many more.

    >>> column_names_text(["x0", "x1"]), column_names_text([f"c{k}" for k in range(10)], 3)
    ('x0, x1', 'c0, c1, c2 and 7 more')
    """
    names = [str(c) for c in names]
    if len(names) <= most:
        return ", ".join(names)
    return ", ".join(names[:most]) + f" and {len(names) - most} more"


def not_numbers_error(exc: NonNumericColumnError, option: str) -> ValueError:
    """The data error for columns that are not numbers: the reader's message
    and how to choose others with ``option``."""
    hint = (f"; choose the columns with {option} (these hold numbers: "
            f"{column_names_text(exc.numeric)})" if exc.numeric
            else "; no column holds numbers")
    return ValueError(f"{exc}{hint}")


def column_usage_error(exc: ColumnError, option: str) -> click.BadParameter:
    """The usage error (exit status 2) for a selection that names no column."""
    return click.BadParameter(str(exc), param_hint=f"'{option}'")


def read_input(path, columns=None, option: str = "--columns"):
    """The points of ``path`` (the ``--columns`` selection) and their column names.

    Returns
    -------
    (ndarray of float64, shape (n, d), list of str)

    Raises
    ------
    click.BadParameter
        The selection names no column of the file (a usage error of ``option``).
    ValueError
        The data: columns that are not numbers (naming the ones that are),
        missing, NaN or infinite values, ragged rows, an empty file.
    """
    with phase(f"read {path}"):
        try:
            return _with_notices(read_points, path, columns=columns, return_names=True)
        except ColumnError as exc:
            raise column_usage_error(exc, option) from None
        except NonNumericColumnError as exc:
            raise not_numbers_error(exc, option) from None


def read_input_frame(path):
    """The table of ``path`` as a DataFrame (the skyline's input)."""
    with phase(f"read {path}"):
        return _with_notices(read_frame, path)
