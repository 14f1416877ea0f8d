"""Every public exception of skyjoin, in one place (re-exported as ``skyjoin.X``).

Each is a subclass of the built-in error a caller would already catch, so
``except MemoryError`` or ``except ValueError`` keeps working:

* :class:`GPUUnavailableError` (``RuntimeError``): ``device="gpu"`` without
  a usable GPU.
* :class:`DeviceMemoryError` (``MemoryError``): the points cannot fit the
  GPU, or CuPy ran out of device memory during an operator.
* :class:`ResultTooLargeError` (``MemoryError``): a join result would not
  fit the memory it goes to.
* :class:`InvalidParameterError` (``ValueError`` and ``TypeError``): a
  DBSCAN parameter of the wrong type or value.
* :class:`ColumnError` (``ValueError``): a column selection that names no
  column of a points file.
* :class:`NonNumericColumnError` (``ValueError``): columns of a points file
  that hold values other than numbers.
* :class:`DroppedIndexColumn` (``UserWarning``): a reader dropped a pandas
  row-index column.

This module imports nothing from skyjoin, so every layer may import it
(pyproject's import-linter contract puts it below ``skyjoin._core``).
"""

from __future__ import annotations

__all__ = ["GPUUnavailableError", "DeviceMemoryError", "ResultTooLargeError",
           "InvalidParameterError", "ColumnError", "NonNumericColumnError", "DroppedIndexColumn"]


class GPUUnavailableError(RuntimeError):
    """Raised when ``device="gpu"`` is asked for and no GPU can be used."""


class DeviceMemoryError(MemoryError):
    """A GPU operator needs more device memory than the GPU has free.

    Raised before the points are copied when they cannot fit
    (``skyjoin._core.device_memory.check_points_fit``), or when CuPy runs
    out of memory during the operator (``oom_as_error``).  The message
    gives the bytes needed (or asked for), the bytes free, and the ways out.
    """


class ResultTooLargeError(MemoryError):
    """A join result would not fit in the memory it goes to.

    Raised once the count pass knows the result's size, before anything of
    that size is allocated.  The message gives the pairs, the bytes needed,
    the bytes free and the ways out: ``output="counts"``,
    ``skyjoin.self_join_chunks`` (bounded chunks), or on the command line
    ``--out x.parquet`` (streamed to disk).
    """


class InvalidParameterError(ValueError, TypeError):
    """A DBSCAN parameter of the wrong type or value: a ``ValueError`` and a
    ``TypeError``, as scikit-learn's own error for the same mistake."""


class DroppedIndexColumn(UserWarning):
    """A reader dropped a column that holds a row index written by pandas, not data."""


class ColumnError(ValueError):
    """A column selection that names no column of the file: an unknown name,
    a position out of range, a name for a file whose columns have no names,
    or an empty selection."""


class NonNumericColumnError(ValueError):
    """Columns that hold values other than numbers (text, dates, true/false).

    Attributes
    ----------
    path : str
        The file.
    columns : list
        Labels of the columns that are not numbers, in file order (names, or
        0-based positions for files without names).
    numeric : list
        Labels of the columns that are.
    """

    def __init__(self, message: str, path: str, columns: list, numeric: list) -> None:
        super().__init__(message)
        self.path, self.columns, self.numeric = path, list(columns), list(numeric)
