"""Argument checks and docstring parts shared by the generators."""

from __future__ import annotations

import math
import numbers
import re
from typing import Union

import numpy as np

#: a generator's seed: an int >= 0, None (fresh entropy), a SeedSequence, or a
#: numpy.random.Generator used as is
Seed = Union[int, np.random.SeedSequence, np.random.Generator, None]



# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------
def as_generator(seed) -> np.random.Generator:
    """A Generator from an int / None / SeedSequence, or the Generator itself."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"seed must be an int, None or a numpy.random.Generator, got {type(seed).__name__}"
        )
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return np.random.default_rng(int(seed))


def check_nd(n, d) -> tuple[int, int]:
    """Check the number of points n >= 0 and of dimensions d >= 1."""
    for name, v in (("n", n), ("d", d)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    if n < 0:
        raise ValueError(f"n (number of points) must be >= 0, got {n}")
    if d < 1:
        raise ValueError(f"d (number of dimensions) must be >= 1, got {d}")
    return int(n), int(d)


def check_real(name: str, value, positive: bool = False) -> float:
    """Check a finite real parameter (and > 0 when ``positive``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and value <= 0.0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_box(low, high) -> tuple[float, float]:
    """Check a box [low, high) with finite low < high."""
    low = check_real("low", low)
    high = check_real("high", high)
    if not low < high:
        raise ValueError(f"low must be < high, got low={low}, high={high}")
    return low, high


# --------------------------------------------------------------------------
# docstring parts shared by the generators
# --------------------------------------------------------------------------
_N_D = """n : int
    Number of points (>= 0).
d : int
    Number of dimensions (>= 1)."""
_SEED = """seed : int, None or numpy.random.Generator
    Seed of ``numpy.random.default_rng``, or a Generator to draw from."""
_DOC_PARTS = {
    "n_d": _N_D,
    "seed": _SEED,
    "params": f"Parameters\n----------\n{_N_D}\n{_SEED}",
    "returns_unit": "Returns\n-------\nnumpy.ndarray\n"
                    "    float64, C-contiguous, shape (n, d), values in [0, 1].",
}
_SLOT = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)


def fill_doc(fn):
    """Decorator: replace every line of ``fn``'s docstring that is only a
    ``{name}`` of ``_DOC_PARTS`` by that part, indented as the line; the
    parameters and returns that the generators share are written once."""
    def part(m):
        return "\n".join(m.group(1) + line if line else line
                         for line in _DOC_PARTS[m.group(2)].split("\n"))
    if fn.__doc__:
        fn.__doc__ = _SLOT.sub(part, fn.__doc__)
    return fn
