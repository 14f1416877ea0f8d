"""Point files: :func:`read_points`, :func:`read_frame` and :func:`write_points`.

Two columns that a writer adds without being data are dropped on reading,
with a :class:`DroppedIndexColumn` warning: the row index that pandas'
``to_csv`` writes first (a header field that is empty or ``Unnamed: 0`` over
the integers 0..n-1), and the index columns that pandas' ``to_parquet``
names in the file's pandas metadata.

Two kinds of refusal carry their own ``ValueError`` subclass, so that the
command line can tell a wrong selection from wrong data:
:class:`ColumnError` (a selection that names no column of the file) and
:class:`NonNumericColumnError` (columns that hold something other than numbers;
the message quotes the first value that is not a number, with its row).
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Hashable, Literal, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

if TYPE_CHECKING:
    import pandas

from .atomic import atomic_path
from ..errors import ColumnError, DroppedIndexColumn, NonNumericColumnError
from .formats import POINT_FORMATS, TEXT_FORMATS, existing_path, file_format

__all__ = ["read_points", "read_frame", "write_points", "POINT_FORMATS", "DroppedIndexColumn",
           "ColumnError", "NonNumericColumnError", "first_non_number", "non_numeric_message",
           "column_positions"]


#: columns to keep: one name or position, or a sequence of them
Columns = Union[Hashable, Sequence[Hashable]]

_SNIFF_BYTES = 1 << 16



def _is_number(field: str) -> bool:
    """Whether a text field parses as a float."""
    try:
        float(field)
        return True
    except ValueError:
        return False


def _sniff(path: str, delimiter, header):
    """Look at the first lines: delimiter, header row, trailing delimiter.

    Returns (delimiter or None for whitespace, has_header, first_fields).
    """
    with open(path, "rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    text = head.decode("utf-8", errors="replace")
    lines = [ln.strip("\r") for ln in text.split("\n")]
    if len(head) == _SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]                       # the last line may be cut
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        return (delimiter if delimiter is not None else ","), False, []
    first = lines[0]
    if delimiter is None:
        for cand in (",", "\t", ";", "|"):
            if cand in first:
                delimiter = cand
                break
    fields = first.split() if delimiter is None else [f.strip() for f in first.split(delimiter)]
    if header == "infer":
        has_header = any(f and not _is_number(f.strip('"\'')) for f in fields)
    elif header in (True, 0):
        has_header = True
    elif header in (False, None):
        has_header = False
    else:
        raise ValueError(f"header must be 'infer', True or False, got {header!r}")
    return delimiter, has_header, fields


class _Columns:
    """Columns read from a file: a pyarrow Table, whether its names are real,
    and each column's label (its name, or for files without names, headerless
    text and plain .npy, its 0-based position in the file).
    """

    def __init__(self, table, named: bool, labels=None, kind: str = "text"):
        self.table = table
        self.named = named
        self.kind = kind
        self.labels = (list(labels) if labels is not None else
                       list(table.column_names) if named else list(range(table.num_columns)))


def _without_pandas_index(cols: _Columns, path: str) -> _Columns:
    """Drop the row index pandas' ``to_csv`` writes as an unnamed first column."""
    import pyarrow as pa

    t = cols.table
    if not cols.named or t.num_columns < 2 or t.column_names[0] not in ("", "Unnamed: 0"):
        return cols
    first = t.column(0)
    if not pa.types.is_integer(first.type) or first.null_count:
        return cols
    values = np.empty(t.num_rows, dtype=np.int64)
    _fill_column(values, first)
    if not np.array_equal(values, np.arange(t.num_rows)):
        return cols
    warnings.warn(f"{path!r}: the unnamed first column holds the row numbers 0..n-1 (a "
                  "pandas index); it is not read as data", DroppedIndexColumn, stacklevel=5)
    return _Columns(t.remove_column(0), True, kind=cols.kind)


def _without_parquet_index(table, path: str):
    """Drop the index columns that pandas' ``to_parquet`` names in the metadata."""
    meta = table.schema.pandas_metadata or {}
    index = [c for c in meta.get("index_columns", []) if isinstance(c, str)
             and c in table.column_names]
    if index:
        warnings.warn(f"{path!r}: column(s) {', '.join(index)} hold the pandas index; "
                      "not read as data", DroppedIndexColumn, stacklevel=4)
        table = table.drop_columns(index)
    if meta:
        rest = {k: v for k, v in (table.schema.metadata or {}).items() if k != b"pandas"}
        table = table.replace_schema_metadata(rest or None)
    return table


def _read_text(path: str, delimiter, header) -> _Columns:
    """Read delimited or whitespace-separated text."""
    import pyarrow as pa

    delim, has_header, fields = _sniff(path, delimiter, header)
    if not fields:
        raise ValueError(f"{path!r} holds no data")
    if delim is not None:
        import pyarrow.csv as pcsv

        try:
            table = pcsv.read_csv(
                path,
                read_options=pcsv.ReadOptions(autogenerate_column_names=not has_header,
                                              block_size=1 << 24),
                parse_options=pcsv.ParseOptions(delimiter=delim),
            )
        except pa.ArrowInvalid as exc:
            msg = str(exc)
            if "Expected" in msg and "columns" in msg:
                detail = msg.split("CSV parse error: ", 1)[-1]
                raise ValueError(f"{path!r} has ragged rows (not all rows have the same "
                                 f"number of fields): {detail}") from exc
            raise ValueError(f"cannot parse {path!r}: {msg}") from exc
        names = list(table.column_names)
        # a delimiter at the end of every line makes an unnamed, all-empty column
        if len(names) > 1 and table.column(len(names) - 1).null_count == table.num_rows \
                and (not has_header or names[-1].strip() == ""):
            table = table.remove_column(len(names) - 1)
        return _without_pandas_index(_Columns(table, has_header), path)
    import pandas as pd

    try:
        frame = pd.read_csv(path, sep=r"\s+", header=0 if has_header else None, engine="c")
    except pd.errors.ParserError as exc:
        raise ValueError(f"{path!r} has ragged rows (not all rows have the same number of "
                         f"fields): {exc}") from exc
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path!r} holds no data") from exc
    frame.columns = [str(c) for c in frame.columns]
    return _Columns(pa.Table.from_pandas(frame, preserve_index=False), has_header)


def _read_npy(path: str) -> _Columns:
    """Read a .npy array (2-D, 1-D as one column, or structured)."""
    import pyarrow as pa

    arr = np.load(path, allow_pickle=False)
    if arr.dtype.names:
        return _Columns(pa.table({name: arr[name] for name in arr.dtype.names}), True, kind="npy")
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{path!r} holds a {arr.ndim}-D array; expected (n_points, n_dims)")
    return _Columns(pa.table({str(k): arr[:, k] for k in range(arr.shape[1])}), False, kind="npy")


def column_positions(names: Sequence, wanted, path: str, named: bool = True,
                     kind: str = "text") -> list[int]:
    """0-based positions of a column selection among a file's columns.

    Parameters
    ----------
    names : sequence
        The file's column names, in order (any placeholders if ``named`` is False).
    wanted : sequence of str or int
        Names (files with names only) or positions (negative: from the end).
    path : str
        The file, for the messages.
    named : bool
        Whether the file names its columns.
    kind : {"text", "npy", "parquet"}
        What the file is (the message for a name on a file without names).

    Raises
    ------
    ColumnError
        An empty selection, an unknown name, a position out of range, a name
        for a file without names.
    TypeError
        A selector that is neither a name nor a position.

    Notes
    -----
    O(len(names) * len(wanted)).
    """
    wanted = list(wanted)
    if not wanted:
        raise ColumnError("columns must name at least one column")
    names = [str(c) for c in names]
    picked = []
    for c in wanted:
        if isinstance(c, (bool, np.bool_)):
            raise TypeError(f"column selector must be a name or a position, got {c!r}")
        if isinstance(c, (int, np.integer)):
            if not -len(names) <= c < len(names):
                raise ColumnError(
                    f"column position {c} is out of range: {path!r} has {len(names)} columns"
                )
            picked.append(int(c) % len(names))
        elif isinstance(c, str):
            if not named:
                why = ("is a plain NumPy array" if kind == "npy" else "has no header row")
                raise ColumnError(
                    f"{path!r} {why}, so its columns have no names; "
                    f"select column {c!r} by position (0 to {len(names) - 1})"
                )
            if c not in names:
                raise ColumnError(
                    f"unknown column {c!r} in {path!r}; its columns are: {', '.join(names)}"
                )
            picked.append(names.index(c))
        else:
            raise TypeError(f"column selector must be a name or a position, got {c!r}")
    return picked


def _select(cols: _Columns, columns, path: str) -> _Columns:
    """Select columns by names or integer positions, with clear errors."""
    if columns is None:
        return cols
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    picked = column_positions(cols.table.column_names, columns, path, cols.named, cols.kind)
    return _Columns(cols.table.select(picked), cols.named, [cols.labels[k] for k in picked],
                    cols.kind)


def _fill_column(dst: np.ndarray, col) -> None:
    """Copy a null-free numeric pyarrow column into dst, chunk by chunk.

    Reads the value buffers directly: pyarrow's ``to_numpy`` imports pandas,
    which alone costs more than reading a 100k-point file.
    """
    import pyarrow as pa

    t = col.type
    if pa.types.is_null(t):
        dst[:] = np.nan
        return
    if pa.types.is_floating(t):
        np_type = np.dtype({16: np.float16, 32: np.float32, 64: np.float64}[t.bit_width])
    else:
        np_type = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    pos = 0
    for chunk in col.chunks:
        m = len(chunk)
        if m:
            values = np.frombuffer(chunk.buffers()[1], dtype=np_type, count=chunk.offset + m)
            dst[pos:pos + m] = values[chunk.offset:]
        pos += m


def _read_any(path, columns, delimiter, header) -> _Columns:
    """Read any supported point file and select columns."""
    ext = file_format(path, POINT_FORMATS, "read")
    p = existing_path(path)
    if ext in TEXT_FORMATS:
        cols = _read_text(p, delimiter, header)
    elif ext == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(p)
        except Exception as exc:
            raise ValueError(f"cannot read Parquet file {p!r}: {exc}") from exc
        cols = _Columns(_without_parquet_index(table, p), True, kind="parquet")
    else:
        cols = _read_npy(p)
    return _select(cols, columns, p)


# --------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------
def read_frame(path: str | os.PathLike[str], columns: Columns | None = None,
               delimiter: str | None = None,
               header: bool | Literal["infer"] = "infer") -> pandas.DataFrame:
    """Read a point file into a pandas DataFrame.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.csv``, ``.txt``, ``.tsv``, ``.dat``, ``.parquet`` or ``.npy`` file.
    columns : sequence of str or int, str, int, optional
        Columns to keep, by name (files with a header row, Parquet, structured
        ``.npy``) or by position; all columns by default.
    delimiter : str, optional
        Field separator of text files; detected from the first line if None
        (",", tab, ";" or "|", else whitespace).
    header : {"infer", True, False}
        Whether the first line of a text file names the columns; "infer"
        says yes when any of its fields is not a number.

    Returns
    -------
    pandas.DataFrame
        Columns named by the header (or Parquet schema), else numbered 0..d-1.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        For an unknown extension, ragged rows, an unknown column name or an
        out-of-range position.

    Examples
    --------
    >>> import os, tempfile
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "cars.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("price,rating\\n3,4\\n5,2\\n")
    >>> io.read_frame(path)["price"].tolist()
    [3, 5]
    """
    cols = _read_any(path, columns, delimiter, header)
    frame = cols.table.to_pandas()
    if not cols.named:
        frame.columns = range(frame.shape[1])
    return frame


def read_points(path: str | os.PathLike[str], columns: Columns | None = None,
                delimiter: str | None = None, header: bool | Literal["infer"] = "infer",
                dtype: DTypeLike = np.float64,
                return_names: bool = False) -> np.ndarray | tuple[np.ndarray, list[str]]:
    """Read a point file into an (n, d) float array.

    Text files may be comma, tab, semicolon or whitespace separated, with or
    without a header row (detected: a first line with a non-number field is
    a header), and with a delimiter at the end of every line (as in the
    SkyBench files), which does not create an empty column.  A pandas index
    (see the module notes) is dropped with a :class:`DroppedIndexColumn`
    warning.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.csv``, ``.txt``, ``.tsv``, ``.dat``, ``.parquet`` or ``.npy`` file.
    columns : sequence of str or int, str, int, optional
        Columns to keep, by name or by position; all by default.
    delimiter : str, optional
        Field separator of text files; detected if None.
    header : {"infer", True, False}
        Whether the first line of a text file is a header row.
    dtype : numpy float dtype
        dtype of the result (float64 by default).
    return_names : bool
        Also return the columns' names (for files without names, ``"x<k>"``
        with k the column's position in the file).

    Returns
    -------
    numpy.ndarray
        C-contiguous, shape (n, d).
    list of str
        The names, with ``return_names`` only.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        For an unknown extension, ragged rows, missing (empty) fields, NaN
        or infinite values (the message names the file, the column and the
        0-based data row); :class:`NonNumericColumnError` for columns that are
        not numbers (all of them named, the first value that is not a number
        quoted with its row); :class:`ColumnError` for an unknown column
        name or an out-of-range position.

    Notes
    -----
    O(n d) time; memory the file's columns plus the result.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "pts.txt")
    >>> np.savetxt(path, [[0.0, 1.0], [2.0, 3.0]])
    >>> io.read_points(path).tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    import pyarrow as pa

    cols = _read_any(path, columns, delimiter, header)
    table, labels, where = cols.table, cols.labels, os.fspath(path)
    n, d = table.num_rows, table.num_columns
    if d == 0:
        raise ValueError(f"{where!r} has no columns")
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)
               for t in table.schema.types]
    if not all(numeric):
        others = [k for k in range(d) if not numeric[k]]
        raise NonNumericColumnError(
            non_numeric_message([(table.column(k), labels[k]) for k in others], where),
            where, [labels[k] for k in others], [labels[k] for k in range(d) if numeric[k]])
    out = np.empty((n, d), dtype=dtype)
    for k in range(d):
        col = table.column(k)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"{where!r} has a missing value (an empty field or an NA marker) "
                             f"in column {labels[k]!r} at data row {row} (0-based); "
                             "remove or fill it")
        _fill_column(out[:, k], col)
        bad = np.flatnonzero(~np.isfinite(out[:, k]))
        if bad.size:
            v = out[bad[0], k]
            what = "a NaN" if np.isnan(v) else "an infinite"
            raise ValueError(f"{where!r} has {what} value in column {labels[k]!r} at data row "
                             f"{int(bad[0])} (0-based); remove or fill it")
    if return_names:
        return out, [str(c) if cols.named else f"x{c}" for c in labels]
    return out


def first_non_number(col) -> tuple[int, object] | None:
    """The first value of a pyarrow column (or array) that is not a number,
    as (0-based row, value); None if every non-null value is one.

    Text is a number when Python's ``float`` reads it (``"1e3"``, ``"nan"``,
    ``" 7"``); any value of another non-numeric type (a date, true/false) is
    not.  O(n): chunks that Arrow casts to float64 whole are skipped; the
    first that it cannot cast is searched value by value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    row0 = 0
    for chunk in chunks:
        t = chunk.type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t):
            row0 += len(chunk)
            continue
        text = pa.types.is_string(t) or pa.types.is_large_string(t)
        if text:
            try:
                pc.cast(chunk, pa.float64())
                row0 += len(chunk)
                continue
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        for i, v in enumerate(chunk.to_pylist()):
            if v is not None and not (text and _is_number(v)):
                return row0 + i, v
        row0 += len(chunk)
    return None


def non_numeric_message(cols, where: str) -> str:
    """The message for columns that do not hold numbers: ``cols`` is a list
    of (pyarrow column, label), the first of which is described (what it
    holds, and its first value that is not a number, with the row); the
    others are named."""
    import pyarrow as pa

    col, label = cols[0]
    t = col.type
    what = ("text" if pa.types.is_string(t) or pa.types.is_large_string(t)
            else "true/false values" if pa.types.is_boolean(t)
            else "dates or times" if pa.types.is_temporal(t)
            else "values that are not numbers")
    hit = first_non_number(col)
    example = f", e.g. {hit[1]!r} at data row {hit[0]} (0-based)" if hit is not None else ""
    more = ""
    if len(cols) > 1:
        others = ", ".join(repr(lab) for _, lab in cols[1:])
        more = f"; so do column{'s' if len(cols) > 2 else ''} {others}"
    return f"column {label!r} of {where!r} holds {what}, not numbers{example}{more}"


def write_points(path: str | os.PathLike[str], X: ArrayLike, names: Sequence[str] | None = None) -> None:
    """Write an (n, d) array of points, atomically (see :mod:`skyjoin.io.atomic`).

    Parameters
    ----------
    path : str or os.PathLike
        ``.npy``; ``.parquet`` (one float column a dimension); ``.csv`` or
        ``.txt`` (comma-separated, a header row of the names, every float
        written exactly, 17 significant digits).
    X : array_like, shape (n, d)
    names : sequence of str, optional
        Column names (``.parquet``, ``.csv``); default ``x0, x1, ...``.

    Raises
    ------
    ValueError
        For an unknown extension, X not 2-D, or names of the wrong length.

    Notes
    -----
    O(n d); text is formatted by NumPy, about ten times slower than binary.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from skyjoin import io
    >>> path = os.path.join(tempfile.mkdtemp(), "pts.csv")
    >>> io.write_points(path, np.array([[0.5, 1.0]]))
    >>> open(path).read()
    'x0,x1\\n0.5,1\\n'
    >>> io.read_points(path, columns=["x1"]).tolist()
    [[1.0]]
    """
    ext = file_format(path, (".npy", ".parquet", ".csv", ".txt"), "write points to")
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"points must be a 2-D array, got shape {X.shape}")
    names = [f"x{k}" for k in range(X.shape[1])] if names is None else [str(c) for c in names]
    if len(names) != X.shape[1]:
        raise ValueError(f"{len(names)} names for {X.shape[1]} columns")
    with atomic_path(path) as tmp:
        if ext == ".npy":
            np.save(tmp, X)
        elif ext == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({c: X[:, k] for k, c in enumerate(names)}), tmp)
        else:
            np.savetxt(tmp, X, delimiter=",", fmt="%.17g", header=",".join(names), comments="")
