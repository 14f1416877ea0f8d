"""From the caller's data to the float64 matrix the skyline engines read.

Every engine (SkyAlign, the baselines, CPU and GPU) compares float64 values
under minimisation.  This module turns arrays, CuPy arrays and DataFrames
into that matrix without changing any answer:

* **Exact columns** (:func:`exact_float64`, the one rule).  Dominance and
  equality depend only on each column's order, so a column is replaced by
  any strictly increasing function of it.  Columns that float64 holds
  exactly are cast (no cost beyond the cast); 64-bit integer columns with a
  value beyond +-2**53, and datetime64 / timedelta64 columns (their int64
  values, NaT refused) whose values are, are replaced by their dense rank.
* **Sense** (:func:`parse_sense`): paretoset's vocabulary, "min" /
  "minimum", "max" / "maximum", "diff" / "different", any case, or the
  builtins ``min`` / ``max``.  Maximised columns are negated by the engines'
  callers (ranks negate exactly).
* **diff columns** (:func:`group_columns`): rows are compared only within
  groups of equal values in the diff columns (paretoset's group-by).  The
  diff columns are replaced by two columns (g, -g), g the dense number of
  the row's group: p can be no worse than q on both only if g_p = g_q, so
  rows of different groups never dominate each other, and equal rows are
  equal on g.  One skyline over all groups is the union of the per-group
  skylines, for every engine and device alike, at the cost of a sort per
  diff column (O(n log n)) and two more dimensions.
* **DataFrames** (:func:`frame_columns`): numbers, bools (as 0 / 1, False
  preferred under "min"), nullable Int/Float/boolean columns without NA,
  datetimes and timedeltas are usable; other columns (strings, objects,
  categories) only as diff columns.  Errors name the column.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from .._core.device import array_module
from .._core.validate import check_points

__all__ = ["SENSE_WORDS", "parse_sense", "check_sense", "exact_float64", "exact_matrix",
           "group_codes", "group_columns", "split_diff", "prepare_array", "prepare_device",
           "frame_columns", "is_dataframe"]

#: paretoset's sense vocabulary (paretoset.utils.validate_inputs), lower case.
SENSE_WORDS = {"min": "min", "minimum": "min", "max": "max", "maximum": "max",
               "diff": "diff", "different": "diff"}

_EXACT = 2 ** 53            # float64 holds every integer of magnitude <= 2**53
_NAT = np.iinfo(np.int64).min


def is_dataframe(X: object) -> TypeGuard[Any]:
    """Duck-typed pandas DataFrame check (pandas is not imported here)."""
    return hasattr(X, "columns") and hasattr(X, "iloc") and hasattr(X, "select_dtypes")


def _sense_word(s, where: str, allow_diff: bool) -> str:
    """One sense entry as "min", "max" or "diff"."""
    if callable(s) and not isinstance(s, str):
        s = getattr(s, "__name__", s)            # the builtins min / max, as paretoset
    word = SENSE_WORDS.get(s.lower()) if isinstance(s, str) else None
    if word is None or (word == "diff" and not allow_diff):
        allowed = "'min', 'max' or 'diff'" if allow_diff else "'min' or 'max'"
        raise ValueError(f"{where} must be {allowed} (or a synonym: minimum, maximum"
                         + (", different" if allow_diff else "") + f"), got {s!r}")
    return word


def parse_sense(sense, d: int, allow_diff: bool = True) -> list[str]:
    """``sense`` as a list of d words "min" / "max" / "diff".

    None means "min" everywhere; one word applies to every column; else one
    entry per column.  Raises ValueError for an unknown word or a wrong
    length, TypeError for a non-sequence.
    """
    if sense is None:
        return ["min"] * d
    if isinstance(sense, str) or (callable(sense) and not hasattr(sense, "__len__")):
        return [_sense_word(sense, "sense", allow_diff)] * d
    try:
        items = list(sense)
    except TypeError:
        raise TypeError(f"sense must be 'min', 'max' or a list of them, got {type(sense).__name__}")
    if len(items) != d:
        raise ValueError(f"sense has {len(items)} entries but the data has {d} columns")
    return [_sense_word(s, f"sense[{k}]", allow_diff) for k, s in enumerate(items)]


def check_sense(sense, d: int) -> np.ndarray:
    """``sense`` of "min" / "max" words (no "diff") as a bool array, True
    where a column is maximised."""
    return np.array([w == "max" for w in parse_sense(sense, d, allow_diff=False)], dtype=bool)



def _time_as_int64(col, name: str):
    """datetime64 / timedelta64 values as int64, NaT refused."""
    v = col.view(np.int64)
    if v.size and bool((v == _NAT).any()):
        row = int(np.argmax(v == _NAT))
        raise ValueError(f"{name} holds NaT (first at row {row}); remove or impute it first")
    return v


def exact_float64(col, name: str = "X"):
    """A 1-D column as float64 with the same order and the same equalities.

    The rule: floats, bools (0 / 1) and integers of at most 32 bits are
    cast.  int64 / uint64 columns are cast when every value lies within
    +-2**53 (two O(n) reductions), else replaced by their dense rank
    (``unique(col, return_inverse=True)``, O(n log n)); datetime64 and
    timedelta64 columns are their int64 values under the same rule (NaT
    refused with ValueError).  Works on NumPy and CuPy arrays alike.
    Non-numeric dtypes raise TypeError.
    """
    xp = array_module(col)
    kind = col.dtype.kind
    if kind in "Mm":
        col = _time_as_int64(col, name)
        kind = "i"
    if kind == "f" or kind == "b" or (kind in "iu" and col.dtype.itemsize <= 4):
        return col.astype(np.float64)
    if kind not in "iu":
        raise TypeError(f"{name} must hold real numbers, got dtype {col.dtype}")
    if col.size == 0 or (int(col.min()) >= -_EXACT and int(col.max()) <= _EXACT):
        return col.astype(np.float64)
    return xp.unique(col, return_inverse=True)[1].reshape(-1).astype(np.float64)


def exact_matrix(X, name: str = "X"):
    """A 2-D int64 / uint64 / datetime64 / timedelta64 array (NumPy or CuPy)
    as float64, column by column under :func:`exact_float64`; other dtypes
    are returned as they are (the caller casts them)."""
    if X.ndim != 2 or X.shape[1] == 0 or not (
            X.dtype.kind in "Mm" or (X.dtype.kind in "iu" and X.dtype.itemsize == 8)):
        return X
    xp = array_module(X)
    if X.dtype.kind in "Mm":
        X = _time_as_int64(X, name)
    if X.size == 0 or (int(X.min()) >= -_EXACT and int(X.max()) <= _EXACT):
        return X.astype(np.float64)
    out = xp.empty(X.shape, dtype=np.float64)
    for k in range(X.shape[1]):
        out[:, k] = exact_float64(X[:, k], f"{name}[:, {k}]")
    return out


def group_codes(codes):
    """Dense group number of every row from per-column codes (1-D int arrays,
    NumPy or CuPy, equal codes = equal values): rows get the same number iff
    they agree in every column.  O(k n log n) for k columns."""
    xp = array_module(codes[0])
    g = xp.unique(codes[0], return_inverse=True)[1].reshape(-1).astype(np.int64)
    for c in codes[1:]:
        c = xp.unique(c, return_inverse=True)[1].reshape(-1).astype(np.int64)
        # g, c < n, so g * (max c + 1) + c < n**2 fits in int64 for n < 3e9
        g = xp.unique(g * (int(c.max()) + 1) + c, return_inverse=True)[1].reshape(-1)
    return g


def group_columns(V, maximise, codes):
    """Append (g, -g) to the min/max columns V (float64, exact; NumPy or CuPy),
    g the dense group number of each row under the diff columns' ``codes``
    (equal codes = equal values).  Returns (float64 array, maximise flags
    with False for g and -g)."""
    xp = array_module(V)
    g = group_codes(codes).astype(np.float64)
    d = V.shape[1]
    out = xp.empty((V.shape[0], d + 2), dtype=np.float64)
    if d:
        out[:, :d] = V
    out[:, d] = g
    out[:, d + 1] = -g
    return out, np.concatenate([np.asarray(maximise, dtype=bool), [False, False]])


def split_diff(X, words):
    """(columns of X to minimise / maximise, their maximise flags, the diff
    columns as a list of 1-D arrays) for a float64 X (NumPy or CuPy)."""
    keep = [k for k, w in enumerate(words) if w != "diff"]
    V = X[:, keep] if len(keep) < X.shape[1] else X
    return V, np.array([words[k] == "max" for k in keep], dtype=bool), \
        [X[:, k] for k, w in enumerate(words) if w == "diff"]


def prepare_array(X, sense, name: str = "X"):
    """Check a host array and return (float64 C-contiguous matrix, maximise
    flags, number of diff columns) for the engines; the matrix is X itself
    for float64 C-contiguous input without diff columns (with them, the
    min / max columns and the two of the group number,
    :func:`group_columns`).  Raises as :func:`skyjoin.skyline`."""
    try:
        arr = np.asarray(X)
    except Exception:
        arr = X                                  # check_points words the error
    if isinstance(arr, np.ndarray):
        arr = exact_matrix(arr, name)
    Xc = check_points(arr, name=name)
    words = parse_sense(sense, Xc.shape[1])
    V, maximise, diffs = split_diff(Xc, words)
    if not diffs:
        return Xc, maximise, 0
    Xg, maximise = group_columns(V, maximise, diffs)
    return np.ascontiguousarray(Xg), maximise, len(diffs)


def prepare_device(X, sense, name: str = "X"):
    """Check the shape and sense of a GPU (CuPy) array, without touching its
    values or the device: (maximise flags, diff flags), one of each per
    column.  Its values are checked on the GPU when it is copied
    (``gpu.to_device_minimisation``), and its diff columns grouped there.
    O(d).  Raises as :func:`skyjoin.skyline`."""
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D with shape (n_points, n_dims), got shape {X.shape}")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has no columns (shape {X.shape})")
    words = parse_sense(sense, X.shape[1])
    return (np.array([w == "max" for w in words], dtype=bool),
            np.array([w == "diff" for w in words], dtype=bool))


# --------------------------------------------------------------------------
# DataFrames (duck-typed: pandas is not imported here)
# --------------------------------------------------------------------------
def _usable(dtype) -> bool:
    """Whether a column dtype can be minimised / maximised."""
    return getattr(dtype, "kind", "O") in "biufMm"


def _label(df, pos: int) -> str:
    return repr(df.columns[pos])


def _frame_column(df, pos: int):
    """Column at position pos as a 1-D NumPy array of exact float64 values."""
    s = df.iloc[:, pos]
    label = f"column {_label(df, pos)}"
    dtype = s.dtype
    if not _usable(dtype):
        raise TypeError(f"{label} holds {dtype} values, not numbers: it can only be a 'diff' "
                        "column (group rows by it), or leave it out")
    if bool(s.isna().any()):
        row = int(np.argmax(s.isna().to_numpy()))
        what = "NaT" if dtype.kind in "Mm" else "NaN/NA"
        raise ValueError(f"{label} holds {what} (first at row position {row}); remove or "
                         "impute it first")
    if dtype.kind == "M" and getattr(dtype, "tz", None) is not None:
        s = s.dt.tz_convert(None)               # the same instants in UTC
    numpy_dtype = getattr(dtype, "numpy_dtype", None)   # nullable Int64 / Float64 / boolean
    a = s.to_numpy(dtype=numpy_dtype) if numpy_dtype is not None else s.to_numpy()
    v = exact_float64(np.asarray(a), label)
    if v.size and not bool(np.isfinite(v).all()):
        row = int(np.argmax(~np.isfinite(v)))
        raise ValueError(f"{label} holds inf (first at row position {row}); remove or impute "
                         "it first")
    return v


def _diff_codes(df, pos: int):
    """Group codes of a diff column (any dtype; NA refused)."""
    codes, _ = df.iloc[:, pos].factorize()
    codes = np.asarray(codes)
    if codes.size and bool((codes < 0).any()):
        row = int(np.argmax(codes < 0))
        raise ValueError(f"diff column {_label(df, pos)} holds NaN/NA (first at row position "
                         f"{row}); fill it first")
    return codes


def _positions(df, labels, what: str) -> list[int]:
    """Column positions of labels, each label present exactly once."""
    cols = list(df.columns)
    out = []
    for c in labels:
        hits = [k for k, x in enumerate(cols) if _same_label(x, c)]
        if not hits:
            raise ValueError(f"column {c!r} is not in the DataFrame")
        if len(hits) > 1:
            raise ValueError(f"column label {c!r} ({what}) names {len(hits)} columns of the "
                             "DataFrame; give the columns unique names")
        out.append(hits[0])
    if len(set(out)) != len(out):
        raise ValueError("a column is named twice in min/max/diff")
    return out


def _same_label(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _as_list(c):
    if c is None:
        return []
    if isinstance(c, str) or not hasattr(c, "__iter__"):
        return [c]
    return list(c)


def frame_columns(df, sense=None, min_cols=None, max_cols=None, diff_cols=None,
                  all_columns: bool = False):
    """The engines' matrix for a DataFrame: (float64 C-contiguous array,
    maximise flags, number of diff columns).

    Columns and senses come from ``min_cols`` / ``max_cols`` / ``diff_cols``
    (labels, each naming one column), or else from ``sense``: one entry per
    column of the frame, or (unless ``all_columns``) one per usable column
    (numbers, bools, datetimes, timedeltas; the others are left out), or one
    word for all of those.  Without either, every usable column is
    minimised (every column with ``all_columns``, as paretoset).
    """
    mins, maxs, diffs = _as_list(min_cols), _as_list(max_cols), _as_list(diff_cols)
    ncol = df.shape[1]
    if mins or maxs or diffs:
        if sense is not None:
            raise ValueError("give either sense= or min=/max=/diff= for a DataFrame, not both")
        both = set(map(repr, mins)) & set(map(repr, maxs))
        if both:
            raise ValueError(f"column(s) {sorted(both)} named in both min and max")
        pos = _positions(df, mins + maxs + diffs, "min/max/diff")
        words = ["min"] * len(mins) + ["max"] * len(maxs) + ["diff"] * len(diffs)
    else:
        usable = [k for k in range(ncol) if _usable(df.dtypes.iloc[k])]
        left_out = [df.columns[k] for k in range(ncol) if k not in set(usable)]
        n_sense = None
        if sense is not None and not isinstance(sense, str) and not callable(sense):
            try:
                n_sense = len(sense)
            except TypeError:
                n_sense = None
        if all_columns or (n_sense is not None and n_sense == ncol):
            pos = list(range(ncol))
        elif n_sense is None or n_sense == len(usable):
            pos = usable
        else:
            raise ValueError(
                f"sense has {n_sense} entries but the DataFrame has {ncol} columns, "
                f"{len(usable)} of them numeric ({[df.columns[k] for k in usable]}); "
                f"not numeric: {left_out}. Give one entry per column ('diff' for a "
                "non-numeric column to group by) or per numeric column")
        if not pos:
            raise ValueError("the DataFrame has no numeric columns; name them with min=/max=")
        words = parse_sense(sense, len(pos))
    n = df.shape[0]
    vals = [k for k, w in zip(pos, words) if w != "diff"]
    Xv = np.empty((n, len(vals)), dtype=np.float64)
    for j, k in enumerate(vals):
        Xv[:, j] = _frame_column(df, k)
    maximise = np.array([w == "max" for w in words if w != "diff"], dtype=bool)
    codes = [_diff_codes(df, k) for k, w in zip(pos, words) if w == "diff"]
    if not codes:
        return Xv, maximise, 0
    Xg, maximise = group_columns(Xv, maximise, codes)
    return np.ascontiguousarray(Xg), maximise, len(codes)
