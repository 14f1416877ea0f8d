"""Point readers: :func:`read_points` and :func:`read_frame`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Hashable, Literal, Sequence, Union

import numpy as np
from numpy.typing import DTypeLike

if TYPE_CHECKING:
    import pandas

from .formats import POINT_FORMATS, TEXT_FORMATS, _existing, _format

__all__ = ["read_points", "read_frame", "POINT_FORMATS"]

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
    """Columns read from a file: a pyarrow Table and whether its names are real.

    Files without names (headerless text, plain .npy) get positions as names.
    """

    def __init__(self, table, named: bool):
        self.table = table
        self.named = named

    @property
    def names(self) -> list:
        """Column labels: names if the file has them, else positions."""
        return list(self.table.column_names) if self.named else list(range(self.table.num_columns))


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
                raise ValueError(f"ragged rows in {path!r}: {msg}") from exc
            raise ValueError(f"cannot parse {path!r}: {msg}") from exc
        names = list(table.column_names)
        # a delimiter at the end of every line makes an unnamed, all-empty column
        if len(names) > 1 and table.column(len(names) - 1).null_count == table.num_rows \
                and (not has_header or names[-1].strip() == ""):
            table = table.remove_column(len(names) - 1)
        return _Columns(table, has_header)
    import pandas as pd

    try:
        frame = pd.read_csv(path, sep=r"\s+", header=0 if has_header else None, engine="c")
    except pd.errors.ParserError as exc:
        raise ValueError(f"ragged rows in {path!r}: {exc}") from exc
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path!r} holds no data") from exc
    frame.columns = [str(c) for c in frame.columns]
    return _Columns(pa.Table.from_pandas(frame, preserve_index=False), has_header)


def _read_npy(path: str) -> _Columns:
    """Read a .npy array (2-D, 1-D as one column, or structured)."""
    import pyarrow as pa

    arr = np.load(path, allow_pickle=False)
    if arr.dtype.names:
        return _Columns(pa.table({name: arr[name] for name in arr.dtype.names}), True)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{path!r} holds a {arr.ndim}-D array; expected (n_points, n_dims)")
    return _Columns(pa.table({str(k): arr[:, k] for k in range(arr.shape[1])}), False)


def _select(cols: _Columns, columns, path: str) -> _Columns:
    """Select columns by names or integer positions, with clear errors."""
    if columns is None:
        return cols
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    wanted = list(columns)
    if not wanted:
        raise ValueError("columns must name at least one column")
    names = list(cols.table.column_names)
    picked = []
    for c in wanted:
        if isinstance(c, (bool, np.bool_)):
            raise TypeError(f"column selector must be a name or a position, got {c!r}")
        if isinstance(c, (int, np.integer)):
            if not -len(names) <= c < len(names):
                raise ValueError(
                    f"column position {c} is out of range: {path!r} has {len(names)} columns"
                )
            picked.append(int(c) % len(names))
        elif isinstance(c, str):
            if not cols.named:
                raise ValueError(
                    f"{path!r} has no header row, so its columns have no names; "
                    f"select column {c!r} by position (0 to {len(names) - 1})"
                )
            if c not in names:
                raise ValueError(
                    f"unknown column {c!r} in {path!r}; its columns are: {', '.join(names)}"
                )
            picked.append(names.index(c))
        else:
            raise TypeError(f"column selector must be a name or a position, got {c!r}")
    return _Columns(cols.table.select(picked), cols.named)


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
    ext = _format(path, POINT_FORMATS, "read")
    p = _existing(path)
    if ext in TEXT_FORMATS:
        cols = _read_text(p, delimiter, header)
    elif ext == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(p)
        except Exception as exc:
            raise ValueError(f"cannot read Parquet file {p!r}: {exc}") from exc
        cols = _Columns(table, True)
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
                dtype: DTypeLike = np.float64) -> np.ndarray:
    """Read a point file into an (n, d) float array.

    Text files may be comma, tab, semicolon or whitespace separated, with or
    without a header row (detected: a first line with a non-number field is
    a header), and with a delimiter at the end of every line (as in the
    SkyBench files), which does not create an empty column.

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

    Returns
    -------
    numpy.ndarray
        C-contiguous, shape (n, d).

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        For an unknown extension, ragged rows, a non-numeric column, missing
        (empty) fields or NaN values, an unknown column name or an
        out-of-range position.

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
    table, labels = cols.table, cols.names
    n, d = table.num_rows, table.num_columns
    if d == 0:
        raise ValueError(f"{os.fspath(path)!r} has no columns")
    out = np.empty((n, d), dtype=dtype)
    for k in range(d):
        col = table.column(k)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)):
            sample = col.drop_null()[:1].to_pylist()
            raise ValueError(
                f"column {labels[k]!r} of {os.fspath(path)!r} is not numeric "
                f"(type {t}" + (f", e.g. value {sample[0]!r})" if sample else ")")
            )
        if col.null_count:
            row = next(r for r, v in enumerate(col.is_null().to_pylist()) if v)
            raise ValueError(
                f"{os.fspath(path)!r} has a missing value (empty field or NA/NaN marker) "
                f"at data row {row}, "
                f"column {labels[k]!r}; use read_frame to inspect or impute it"
            )
        _fill_column(out[:, k], col)
    if n and np.isnan(out).any():
        row, k = (int(v[0]) for v in np.nonzero(np.isnan(out)))
        raise ValueError(
            f"{os.fspath(path)!r} has a NaN value at data row {row}, column {labels[k]!r}; "
            "use read_frame to inspect or impute it"
        )
    return out
