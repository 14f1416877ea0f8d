"""Keep the distance test inside the working precision's range.

The join's predicate is ``sum_k (x_k - y_k)**2 <= eps**2`` evaluated in the
working precision.  At numeric extremes the literal evaluation goes wrong:
``eps**2`` overflows (eps > 1.34e154 in float64, 1.8e19 in float32),
underflows (eps < 1.5e-154 in float64), or the data's span ``hi - lo``
overflows (coordinates near +-1.8e308), and the grid's cell coordinates
become inf or NaN.  The rule, applied once at each operator's public
boundary, before any rounding to float32:

* If eps lies outside [2**-400, 2**400) (float32: [2**-30, 2**30)) or a
  coordinate's magnitude reaches 2**1000 (float32: 2**120), the points and
  eps are multiplied by one power of two 2**s, chosen so that eps becomes
  about 1 as far as the largest coordinate allows.  A power of two is exact
  wherever no value under- or overflows, so the test decides exactly as the
  literal test would have wherever that one did not under- or overflow;
  where it did, the scaled test is the Euclidean test in real arithmetic up
  to rounding.  If no power of two brings both eps and the coordinates into
  range (the largest coordinate over about 2**1500 times eps; float32:
  2**180), ValueError.  Every positive float eps is in reach, subnormals
  included: 5e-324 = 2**-1074 takes 2**1074, which is no float64 and is
  applied as two exact factors (``power_of_two_factors``).
* Otherwise the points are used as they are.

The rule is idempotent: data already in range is returned as is, so layers
that call one another may each apply it.

float32 (opt-in) rounds the points to float32 after this step.  A pair's
answer can then differ from the float64 answer only if its distance lies
within ``u * (3 sqrt(d) M + (d + 8) eps)`` of eps, with u = 2**-24 and M the
largest coordinate magnitude: the rounding of each coordinate is relative
to its magnitude, not to eps.  Data far from the origin (say 1e6 + U(0, 1))
should be centred by the caller before a float32 join.

Cost: one pass over the data for the largest magnitude (O(n d), in parallel
for large host arrays), plus an O(n d) copy only when a scaling applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .device import array_module, is_device_array
from .device_reduce import column_bounds
from .magnitude import max_magnitude
from .validate import check_points

__all__ = ["Conditioning", "plan_conditioning", "condition_points", "condition_checked",
           "largest_magnitude", "power_of_two_factors"]

#: eps kept within [2**-eps_exp, 2**eps_exp), coordinates below 2**max_exp, and a
#: scaled eps of at least 2**min_eps_exp
_LIMITS = {
    "float64": {"eps_exp": 400, "max_exp": 1000, "min_eps_exp": -500},
    "float32": {"eps_exp": 30, "max_exp": 120, "min_eps_exp": -60},
}


@dataclass(frozen=True)
class Conditioning:
    """How the points and eps are brought into range (see the module rule).

    Attributes
    ----------
    exp : int
        Points and eps are multiplied by ``2**exp``.
    precision : {"float64", "float32"}
        The working precision: ``apply`` returns points of this dtype.
    """

    exp: int
    precision: str

    @property
    def identity(self) -> bool:
        """True when the points are used as they are (apart from the cast)."""
        return self.exp == 0

    def eps(self, eps: float) -> float:
        """The join radius in conditioned units."""
        return math.ldexp(eps, self.exp)

    def apply(self, X):
        """The points in conditioned units and the working dtype, C-contiguous.

        ``X`` is a checked (n, d) array (NumPy, or CuPy on the GPU path);
        unscaled and already in the working dtype, it is returned as is.
        """
        xp = array_module(X)
        dtype = np.dtype(self.precision)
        if self.identity:
            return xp.ascontiguousarray(X, dtype=dtype)
        Y = xp.array(X, dtype=np.float64, order="C", copy=True)
        for factor in power_of_two_factors(self.exp):
            Y *= factor
        return xp.ascontiguousarray(Y, dtype=dtype)


def power_of_two_factors(exp: int) -> list[float]:
    """float64 factors whose product, applied one after another, multiplies by
    ``2**exp`` with a single rounding.

    ``2**exp`` itself is a float64 only for -1074 <= exp <= 1023, but the
    rule's scaling reaches 2**1074 (eps = 5e-324 scaled to 1).  Scaling up is
    exact step by step (the values only grow, towards a final result that
    does not overflow), so upward factors are 2**1023 and the rest; scaling
    down takes one factor (exp >= -1023 under the rule), which rounds once
    where a value becomes subnormal, as ``math.ldexp`` would.  O(1).
    """
    if exp < -1074:
        raise ValueError(f"a scaling by 2**{exp} leaves nothing of float64 values")
    factors = []
    while exp > 1023:
        factors.append(math.ldexp(1.0, 1023))
        exp -= 1023
    if exp:
        factors.append(math.ldexp(1.0, exp))
    return factors


#: arrays with at least this many values take the parallel pass
def largest_magnitude(arrays) -> float:
    """Largest |coordinate| over every non-empty array (float64), or inf if any
    value is inf or NaN: the range pass of the module rule, which also serves
    as the finiteness test of callers that skip ``check_points``'.  Host
    arrays take one pass split over the host threads
    (``magnitude.max_magnitude``); GPU arrays one on the device
    (``device_reduce.column_bounds``)."""
    m = 0.0
    for A in arrays:
        if not A.size:
            continue
        if not is_device_array(A):
            m = max(m, max_magnitude(A))
            continue
        cp = array_module(A)
        B = A.reshape(A.shape[0], -1)
        if B.dtype not in (np.float32, np.float64):       # integers, float16: exact in float64
            B = B.astype(cp.float64)
        lo, hi, finite = column_bounds(cp, B)
        if not finite:
            return math.inf
        m = max(m, float(np.abs(lo).max()), float(np.abs(hi).max()))
    return m


def _exponent(x: float) -> int:
    """e with 2**(e - 1) <= x < 2**e for x > 0 (``math.frexp``)."""
    return math.frexp(x)[1]


def _scale_exponent(eps: float, extent: float, precision: str) -> int:
    """The power of two of the module rule, or ValueError when none fits."""
    lim = _LIMITS[precision]
    e_eps = _exponent(eps)
    e_ext = _exponent(extent) if extent > 0 else -1100
    eps_ok = -lim["eps_exp"] < e_eps <= lim["eps_exp"]    # 2**-eps_exp <= eps < 2**eps_exp
    if eps_ok and e_ext <= lim["max_exp"]:
        return 0
    s = 0 if eps_ok else -e_eps + 1          # eps * 2**s in [1, 2)
    s = min(s, lim["max_exp"] - e_ext)       # the coordinates stay below 2**max_exp
    if e_eps + s < lim["min_eps_exp"]:
        raise ValueError(
            f"eps={eps!r} is too small next to coordinates as large as {extent:.3g}: "
            f"no power-of-two scaling brings both into {precision}'s range "
            f"(their ratio exceeds 2**{lim['max_exp'] - lim['min_eps_exp']})"
            + ("; use precision='float64'" if precision == "float32" else ""))
    return s


def plan_conditioning(arrays, eps: float, precision: str = "float64",
                      extent: float | None = None) -> Conditioning:
    """The conditioning of the module rule for points ``arrays`` and ``eps``.

    ``arrays`` are checked, finite (n_i, d) arrays (NumPy or CuPy) sharing one
    coordinate system (X, or R and S).  O(n d) for the largest magnitude,
    unless the caller has it (``extent``, from ``largest_magnitude``).
    """
    if extent is None:
        extent = largest_magnitude(arrays)
    return Conditioning(_scale_exponent(eps, extent, precision), precision)


def condition_points(arrays, eps: float, precision: str = "float64", extent: float | None = None):
    """Apply the module rule: ``(conditioned arrays, conditioned eps)``.

    Examples
    --------
    >>> import numpy as np
    >>> (Y,), e = condition_points([np.array([[1e-200], [3e-200]])], 2e-200)
    >>> e, Y.ravel().tolist() == [v * 2 ** 664 for v in (1e-200, 3e-200)]
    (1.5309010345804195, True)
    """
    plan = plan_conditioning(arrays, eps, precision, extent)
    return [plan.apply(A) for A in arrays], plan.eps(eps)


def condition_checked(arrays, names, eps: float, precision: str = "float64"):
    """``condition_points`` for arrays that ``check_points(..., check_finite=False)``
    (or ``device_input.as_device_points``) has checked in every way but
    finiteness: the range pass is the finiteness test too (one pass over the
    points, not two), and a NaN or inf is then reported, for a host array by
    ``check_points``, naming the array and the first bad row, for a GPU
    array naming the array.  O(n d).

    Raises
    ------
    ValueError
        A NaN or inf value.
    """
    extent = largest_magnitude(arrays)
    if not math.isfinite(extent):
        for A, name in zip(arrays, names):
            if not is_device_array(A):
                check_points(A, name=name, dtype=A.dtype)   # raises
            elif not math.isfinite(largest_magnitude([A])):
                raise ValueError(f"{name} contains NaN or inf values; remove or impute them "
                                 "first")
    return condition_points(arrays, eps, precision, extent)
