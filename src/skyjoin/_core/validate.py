"""Input checks shared by every operator.

Every public entry point sends its inputs through these functions, so that
bad input gets the same clear ``ValueError`` / ``TypeError`` everywhere.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np

__all__ = [
    "check_points",
    "check_eps",
    "check_min_samples",
    "check_precision",
    "check_bool",
    "all_finite",
    "working_dtype",
    "as_float",
    "describe_number",
]

_PRECISIONS = {"float64": np.float64, "float32": np.float32}


def working_dtype(precision: str) -> np.dtype:
    """Return the NumPy dtype of a precision name ("float64" or "float32")."""
    return np.dtype(_PRECISIONS[check_precision(precision)])


def check_precision(precision) -> str:
    """Check a precision name; return it normalised."""
    if isinstance(precision, type) or isinstance(precision, np.dtype):
        precision = np.dtype(precision).name
    if not isinstance(precision, str) or precision not in _PRECISIONS:
        raise ValueError(
            f"precision must be 'float64' or 'float32', got {precision!r}"
        )
    return precision


def check_points(X, name: str = "X", dtype=np.float64, allow_empty: bool = True,
                 copy: bool = False, check_finite: bool = True) -> np.ndarray:
    """Check and convert a point set to a C-contiguous (n, d) array.

    Parameters
    ----------
    X : array_like
        Anything ``numpy.asarray`` accepts, of shape (n, d) (a 1-D array is
        refused: say ``X.reshape(-1, 1)`` for one dimension).
    name : str
        Name of the argument, used in error messages.
    dtype : dtype
        The working dtype of the result.
    allow_empty : bool
        Whether n = 0 is accepted.
    check_finite : bool
        Test for NaN and inf (O(n d)).  False only for a caller that tests
        finiteness itself in a pass it makes anyway (the join's numeric-range
        pass, ``conditioning.largest_magnitude``) and calls this again with
        True to raise the error when that pass finds a bad value.

    Returns
    -------
    numpy.ndarray
        C-contiguous array of shape (n, d) and the working dtype.

    Raises
    ------
    TypeError
        If the values are not real numbers (strings, objects, complex), or
        ``X`` is a scipy.sparse matrix or array (refused by name: its
        ``toarray()`` gives the dense points).
    ValueError
        If the array is not 2-D, has no columns, or holds NaN or inf.
    """
    _refuse_sparse(X, name)
    if hasattr(X, "__cuda_array_interface__"):
        raise TypeError(
            f"{name} is a GPU array; pass it to a device='gpu' operator or "
            "copy it to the host first (e.g. cupy.asnumpy)"
        )
    try:
        arr = np.asarray(X)
    except Exception as exc:  # e.g. ragged lists
        raise ValueError(f"{name} cannot be read as an array: {exc}") from exc
    if arr.dtype == object and arr.ndim == 0:
        _refuse_sparse(arr.item(), name)          # np.asarray(a sparse matrix), from a caller
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(
            f"{name} must hold real numbers, got dtype {arr.dtype}"
        )
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D with shape (n_points, n_dims), got {arr.ndim}-D "
            f"array of shape {arr.shape}"
            + ("; use X.reshape(-1, 1) for one-dimensional data" if arr.ndim == 1 else "")
        )
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no columns (shape {arr.shape})")
    if arr.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    out = np.ascontiguousarray(arr, dtype=dtype)
    if copy and out is arr:
        out = out.copy()
    if check_finite and out.size and not all_finite(out):
        bad = ~np.isfinite(out)
        row = int(np.argmax(bad.any(axis=1)))
        kind = "NaN" if np.isnan(out[row]).any() else "inf"
        raise ValueError(
            f"{name} contains {kind} values (first at row {row}); "
            "remove or impute them first"
        )
    return out


def _refuse_sparse(X, name: str) -> None:
    """TypeError naming a scipy.sparse matrix or array (NumPy would read it as
    one object).  scipy.sparse is not imported here: where it is not loaded,
    X cannot be one.  O(1)."""
    sparse = sys.modules.get("scipy.sparse")
    if sparse is not None and sparse.issparse(X):
        raise TypeError(
            f"{name} is a scipy.sparse {type(X).__name__}; skyjoin needs dense "
            f"points: pass {name}.toarray()"
        )


def all_finite(a, chunk_items: int = 1 << 17) -> bool:
    """``np.isfinite(a).all()`` for a 2-D array, over row chunks, stopping at the first bad one.

    No temporary the size of ``a`` (whose first touch dominates NumPy's
    whole-array test: docs/decisions/core-host-passes.md).  O(n d).
    """
    rows = max(1, chunk_items // max(1, a.shape[1]))
    return all(bool(np.isfinite(a[i:i + rows]).all()) for i in range(0, a.shape[0], rows))


def as_float(value: numbers.Real) -> float | None:
    """``float(value)``, or None where the value lies beyond float64's range (an
    int or Fraction of 10**309 and more: Python raises OverflowError there)."""
    try:
        return float(value)
    except OverflowError:
        return None


def describe_number(value) -> str:
    """``repr(value)`` for an error message, except for a number too large for
    a float, which is described by its magnitude (the repr of such an int can
    run to thousands of digits, or fail beyond Python's digit limit)."""
    if isinstance(value, numbers.Real) and as_float(value) is None:
        if isinstance(value, numbers.Rational):      # int, Fraction: math.log10 takes big ints
            digits = math.log10(abs(value.numerator)) - math.log10(value.denominator)
            sign = "-" if value < 0 else ""
            return (f"{_article(value)} of about {sign}10**{digits:.0f} "
                    "(too large for a float)")
        return f"{_article(value)} too large for a float"
    return repr(value)


def _article(value) -> str:
    """'an int', 'a Fraction': the type's name with its article."""
    name = type(value).__name__
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def check_eps(eps) -> float:
    """Check the join radius: a real number > 0 that is finite as a float.

    Every positive float is accepted, subnormals included (5e-324): the join
    brings it into range (``skyjoin._core.conditioning``).  A number beyond
    float64's range (``10**400``) is refused with ValueError.
    """
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    value = as_float(eps)
    if value is None or not math.isfinite(value) or value <= 0.0:
        if value is None:
            shown = describe_number(eps)
        elif value == 0.0 and eps > 0:
            shown = f"{eps!r}, 0.0 as a float"
        else:
            shown = str(value)
        raise ValueError(f"eps must be finite and > 0, got {shown}")
    return value


def check_bool(value, name: str) -> bool:
    """Check a flag: a Python or NumPy bool (not a string, None or a number)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_min_samples(min_samples) -> int:
    """Check DBSCAN's min_samples: an integer >= 1."""
    if isinstance(min_samples, (bool, np.bool_)) or not isinstance(min_samples, numbers.Integral):
        raise TypeError(
            f"min_samples must be an integer, got {type(min_samples).__name__}"
        )
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples}")
    return int(min_samples)
