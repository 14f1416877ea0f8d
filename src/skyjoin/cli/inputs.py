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

``--metric`` / ``--degrees`` are checked here, at the boundary, once:
:func:`check_metric_options` before any work (``--degrees`` belongs to
``--metric haversine``), :func:`metric_points` on the points read
(haversine takes exactly two columns, (lat, lon), latitudes in
[-90, 90] degrees or [-pi/2, pi/2] radians; degrees become radians here,
with ``numpy.radians``, so the operators see scikit-learn's convention).
"""

from __future__ import annotations

import logging
import math
import warnings

import click
import numpy as np

from ..errors import ColumnError, DroppedIndexColumn, NonNumericColumnError
from ..io import read_frame, read_points
from .options import phase
from .wording import plural

__all__ = ["read_input", "read_input_frame", "column_names_text", "not_numbers_error",
           "column_usage_error", "check_metric_options", "metric_points"]

log = logging.getLogger("skyjoin.cli")


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


def check_metric_options(metric: str, degrees: bool) -> None:
    """Refuse ``--degrees`` without ``--metric haversine`` (a usage error,
    exit status 2, before any work): degrees say the columns are (lat, lon),
    which only the haversine distance reads."""
    if degrees and metric != "haversine":
        raise click.UsageError(f"--degrees says the columns are (lat, lon) in degrees, for "
                               f"--metric haversine; got --metric {metric}")


def metric_points(X: np.ndarray, names, metric: str, degrees: bool, path) -> np.ndarray:
    """The points of ``path`` as the operator with ``metric`` takes them.

    Other metrics: ``X`` unchanged.  Haversine: exactly two columns, (lat,
    lon), the latitudes in [-90, 90] degrees (``degrees``) or [-pi/2, pi/2]
    radians, else a usage error (exit status 2) that names the column, the
    first row out of range and its value; the longitudes within [-360,
    360] degrees or [-2 pi, 2 pi] radians likewise (the library's range,
    ``skyjoin.simjoin.metrics.check_metric_points``); with ``degrees`` the
    points converted to radians (``numpy.radians``).  O(n).
    """
    if metric != "haversine":
        return X
    d = X.shape[1]
    if d != 2:
        raise click.UsageError(
            f"--metric haversine takes exactly 2 columns, (lat, lon); {path} gives "
            f"{plural(d, 'column')} ({column_names_text(names)}): choose two with --columns")
    bound, rule = (90.0, "--degrees takes latitudes") if degrees else (math.pi / 2,
                                                                        "takes latitudes")
    span = "[-90, 90] degrees" if degrees else "[-pi/2, pi/2] radians"
    bad = np.flatnonzero(np.abs(X[:, 0]) > bound)
    if bad.size:
        row = int(bad[0])
        hint = ""
        if not degrees and np.abs(X[:, 0]).max() <= 90.0:
            hint = ": if they are in degrees, give --degrees"
        raise click.UsageError(
            f"--metric haversine {rule} (the first column, {names[0]!r}) in {span}; "
            f"{path} holds {float(X[row, 0])!r} at data row {row} "
            f"({plural(bad.size, 'latitude')} out of range){hint}")
    lon_bound, lon_span = (360.0, "[-360, 360] degrees") if degrees else \
        (2 * math.pi, "[-2 pi, 2 pi] radians")
    bad = np.flatnonzero(np.abs(X[:, 1]) > lon_bound)
    if bad.size:
        row = int(bad[0])
        raise click.UsageError(
            f"--metric haversine takes longitudes (the second column, {names[1]!r}) in "
            f"{lon_span}; {path} holds {float(X[row, 1])!r} at data row {row} "
            f"({plural(bad.size, 'longitude')} out of range)")
    if degrees:
        log.info("%s: (lat, lon) in degrees, converted to radians", path)
        return np.radians(X)
    return X
