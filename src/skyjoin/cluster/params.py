"""The parameters and sample weights of ``skyjoin.DBSCAN``, checked once in ``fit``.

scikit-learn's rules for its DBSCAN's parameters, with its wording, plus
skyjoin's own (``device``, ``precision``, ``memory_limit``, ``on_device``),
written out here with the public parts of scikit-learn only
(``VALID_METRICS``, ``check_array``).  Cost: O(1) for the parameters, O(n) for the weights.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.neighbors import VALID_METRICS
from sklearn.utils.validation import check_array

from .._core.device_input import device_vector_to_host
from .._core.validate import as_float, describe_number
from ..errors import InvalidParameterError

__all__ = ["METRICS", "ALGORITHMS", "check_params",
           "check_sample_weight"]

#: the metric names DBSCAN accepts (a callable is accepted too)
METRICS = frozenset(VALID_METRICS["brute"]) | {"precomputed"}
#: scikit-learn's neighbour search algorithms (used on the "sklearn" path)
ALGORITHMS = ("auto", "ball_tree", "kd_tree", "brute")


def _number(v, kind) -> bool:
    return isinstance(v, kind) and not isinstance(v, (bool, np.bool_))


def _real_above(lo, closed_left):
    """A real number, finite as a float (scikit-learn's "(lo, inf)" / "[lo, inf)"
    refuses inf and NaN; an int beyond float64's range, such as 10**400, is
    refused too, where scikit-learn's check lets it through: for eps, to an
    OverflowError in ``fit``)."""
    def ok(v):
        f = as_float(v) if _number(v, Real) else None
        return f is not None and math.isfinite(f) and (f >= lo if closed_left else f > lo)
    return ok


def _int_from(lo):
    return lambda v: _number(v, Integral) and v >= lo


# name -> [(test, description)]; the value is valid if any test passes
_RULES: dict[str, list[tuple[Any, str]]] = {
    "eps": [(_real_above(0.0, False), "a float in the range (0.0, inf)")],
    "min_samples": [(_int_from(1), "an int in the range [1, inf)")],
    "metric": [(lambda v: isinstance(v, str) and v in METRICS,
                f"a str among {sorted(METRICS)}"), (callable, "a callable")],
    "metric_params": [(lambda v: isinstance(v, dict), "an instance of 'dict'"),
                      (lambda v: v is None, "None")],
    "algorithm": [(lambda v: isinstance(v, str) and v in ALGORITHMS,
                   f"a str among {list(ALGORITHMS)}")],
    "leaf_size": [(_int_from(1), "an int in the range [1, inf)")],
    "p": [(_real_above(0.0, True), "a float in the range [0.0, inf)"),
          (lambda v: v is None, "None")],
    "n_jobs": [(lambda v: _number(v, Integral), "an int"), (lambda v: v is None, "None")],
    "device": [(lambda v: isinstance(v, str) and v in ("auto", "cpu", "gpu"),
                "a str among ['auto', 'cpu', 'gpu']"), (lambda v: v is None, "None")],
    "precision": [(lambda v: isinstance(v, str) and v in ("float64", "float32"),
                   "a str among ['float32', 'float64']")],
    "memory_limit": [(lambda v: isinstance(v, str) and v == "auto", "a str among ['auto']"),
                     (_int_from(1), "an int in the range [1, inf)")],
    "on_device": [(lambda v: isinstance(v, (bool, np.bool_)), "an instance of 'bool'")],
}


def check_params(est) -> None:
    """Check every constructor parameter of ``est`` (a DBSCAN) against its rule.

    Raises
    ------
    InvalidParameterError
        For the first parameter that breaks its rule; the message names it,
        what it must be and what it got, as scikit-learn's does.
    """
    name = type(est).__name__
    for param, rules in _RULES.items():
        value = getattr(est, param)
        if any(test(value) for test, _ in rules):
            continue
        wanted = " or ".join(what for _, what in rules)
        raise InvalidParameterError(
            f"The {param!r} parameter of {name} must be {wanted}. "
            f"Got {describe_number(value)} instead.")


def check_sample_weight(sample_weight, n_samples: int) -> np.ndarray:
    """``sample_weight`` as a C-contiguous float array of shape (n_samples,): a
    number is repeated; an array must be 1-D, finite and of that length
    (float32 stays float32, anything else becomes float64); not every
    weight may be zero.  Weights on the GPU (``skyjoin._core.device_input``)
    are copied to the host first: the exact sums check and add them there.

    Raises
    ------
    ValueError
        A shape other than (n_samples,), NaN or inf values, all weights zero.
    TypeError
        Values that are not numbers.
    """
    sample_weight = device_vector_to_host(sample_weight, "sample_weight")
    if isinstance(sample_weight, Real) and not isinstance(sample_weight, (bool, np.bool_)):
        w = np.full(n_samples, sample_weight, dtype=np.float64)
    else:
        # check_array tests finiteness by a sum first, which overflows (with a
        # RuntimeWarning) for finite weights near the float64 limit before it
        # looks value by value: only that warning is silenced
        with np.errstate(over="ignore", invalid="ignore"):
            w = check_array(sample_weight, accept_sparse=False, ensure_2d=False,
                            dtype=[np.float64, np.float32], order="C",
                            input_name="sample_weight")
        if w.ndim != 1:
            raise ValueError(f"Sample weights must be 1D array or scalar, got {w.ndim}D array. "
                             f"Expected either a scalar value or a 1D array of length "
                             f"{n_samples}.")
        if w.shape != (n_samples,):
            raise ValueError(f"sample_weight.shape == {w.shape}, expected {(n_samples,)}!")
    if n_samples and not w.any():
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return w
