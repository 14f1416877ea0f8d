"""Data by kind name (``generate``) and the named benchmark cases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .checks import Seed
from .geographic import geographic
from .skyline import SKYLINE_KINDS, anticorrelated, correlated, independent, pareto
from .spatial import blobs, exponential, uniform

__all__ = ["generate", "KINDS", "KIND_DIMS", "NamedCase", "NAMED_CASES", "named_case"]

KINDS = ("uniform", "exponential", "blobs") + SKYLINE_KINDS + ("geographic",)
#: The kinds whose number of dimensions is fixed: geographic data is (lat, lon).
KIND_DIMS = {"geographic": 2}



_GENERATORS: dict[str, tuple[Callable[..., np.ndarray | tuple[np.ndarray, np.ndarray]],
                             tuple[str, ...]]] = {
    "uniform": (uniform, ("low", "high")),
    "exponential": (exponential, ("rate",)),
    "blobs": (blobs, ("centers", "std", "low", "high", "return_labels")),
    "independent": (independent, ()),
    "correlated": (correlated, ()),
    "anticorrelated": (anticorrelated, ()),
    "pareto": (pareto, ()),
    "geographic": (geographic, ("n_clusters", "spread_km", "noise_fraction", "degrees",
                                "return_labels", "return_centers")),
}


def generate(kind: str, n: int, d: int, seed: Seed = None,
             **params: Any) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Generate a data set by kind name (used by ``skyjoin generate``).

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`: "uniform", "exponential", "blobs",
        "independent", "correlated", "anticorrelated", "pareto", "geographic".
    n : int
        Number of points (>= 0).
    d : int
        Number of dimensions (>= 1); for a kind of :data:`KIND_DIMS`, that
        number (2 for "geographic": the columns are lat, lon).
    seed : int, None or numpy.random.Generator
    **params
        Parameters of the generator: ``low``, ``high`` (uniform, blobs),
        ``rate`` (exponential), ``centers``, ``std``, ``return_labels`` (blobs),
        ``n_clusters``, ``spread_km``, ``noise_fraction``, ``degrees``,
        ``return_labels``, ``return_centers`` (geographic).

    Returns
    -------
    numpy.ndarray
        float64, C-contiguous, shape (n, d) (and labels for blobs with
        ``return_labels=True``).

    Raises
    ------
    ValueError
        For an unknown kind, a parameter the kind does not take, n < 0, d < 1,
        or a d other than the kind's fixed one.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> datasets.generate("exponential", 10, 2, seed=0, rate=40).shape
    (10, 2)
    """
    entry = _GENERATORS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise ValueError(f"unknown data kind {kind!r}; choose one of {', '.join(KINDS)}")
    fn, allowed = entry
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"kind {kind!r} takes no parameter(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(allowed) if allowed else 'none besides n, d, seed'}"
        )
    if kind in KIND_DIMS:
        if d != KIND_DIMS[kind]:
            raise ValueError(f"kind {kind!r} has {KIND_DIMS[kind]} dimensions, got d={d}")
        return fn(n, seed=seed, **params)
    return fn(n, d, seed=seed, **params)




# --------------------------------------------------------------------------
# named benchmark cases
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class NamedCase:
    """A named benchmark case: how its data is drawn and its eps.

    ``pairs_incl_self`` is the exact number of ordered pairs (i, j) with
    dist <= eps, self pairs included, in float64, where known.  ``metric``
    is the distance that eps bounds ("euclidean", or "haversine" for
    (lat, lon) data in radians, eps in radians).
    """

    name: str
    kind: str
    n: int
    d: int
    seed: int
    eps: float
    pairs_incl_self: int | None = None
    source: str = ""
    metric: str = "euclidean"

    @property
    def pairs_excl_self(self) -> int | None:
        """Ordered pairs without self pairs (``pairs_incl_self - n``)."""
        return None if self.pairs_incl_self is None else self.pairs_incl_self - self.n

    def data(self) -> np.ndarray:
        """Generate the case's points."""
        if self.kind == "uniform":
            return uniform(self.n, self.d, 0.0, 100.0, seed=self.seed)
        if self.kind == "exponential":
            return exponential(self.n, self.d, rate=40.0, seed=self.seed)
        if self.kind == "geographic":
            return geographic(self.n, seed=self.seed)
        raise ValueError(f"unknown kind {self.kind!r}")  # pragma: no cover


def _cases() -> dict[str, NamedCase]:
    """The registry of named cases."""
    i2, i3 = "issue 2 (CPU join benchmark)", "issue 3 (GPU join benchmark)"
    i32 = "issue 32 (haversine DBSCAN benchmark)"
    own = "; seed chosen by skyjoin"
    cases = [
        # issue 3, pinned seeds and known pair counts (scipy agrees)
        NamedCase("Unif2D2M-0.5", "uniform", 2_000_000, 2, 1, 0.5, 314_833_680, i3),
        NamedCase("Unif2D2M-1.0", "uniform", 2_000_000, 2, 1, 1.0, 1_247_933_728, i3),
        NamedCase("Unif6D2M-8.0", "uniform", 2_000_000, 6, 2, 8.0, 6_702_784, i3),
        NamedCase("Expo2D2M-0.0004", "exponential", 2_000_000, 2, 3, 0.0004, 793_578_794, i3),
        NamedCase("Expo2D2M-0.002", "exponential", 2_000_000, 2, 3, 0.002, 18_765_695_968, i3),
        NamedCase("Expo6D2M-0.012", "exponential", 2_000_000, 6, 4, 0.012, 1_729_275_652, i3),
        # issue 3, 10M versions: seeds and eps chosen here (eps scaled by about
        # 1/sqrt(5) from the 2M cases, to keep the mean number of neighbours
        # in the same range at five times the density).  Pair counts of these
        # and of the 1M cases: scipy cKDTree.query_ball_point, float64.
        NamedCase("Unif2D10M-0.25", "uniform", 10_000_000, 2, 5, 0.25, 1_969_148_342, i3 + own),
        NamedCase("Expo2D10M-0.0002", "exponential", 10_000_000, 2, 6, 0.0002, 5_007_001_402,
                  i3 + own),
        # issue 2, the CPU cases
        NamedCase("Unif2D1M-0.5", "uniform", 1_000_000, 2, 11, 0.5, 79_234_870, i2 + own),
        NamedCase("Unif6D1M-12", "uniform", 1_000_000, 6, 12, 12.0, 13_438_614, i2 + own),
        NamedCase("Expo2D1M-0.0008", "exponential", 1_000_000, 2, 13, 0.0008, 785_267_382, i2 + own),
        NamedCase("Expo6D1M-0.02", "exponential", 1_000_000, 6, 14, 0.02, 5_399_736_586, i2 + own),
        # issue 32: geographic(n, seed) with its defaults (20 clusters of
        # 300 km, both poles and the antimeridian among them, 10 % noise);
        # eps 0.0015 rad, about 9.6 km; haversine pairs not counted yet
        NamedCase("Geo2D1M-0.0015", "geographic", 1_000_000, 2, 15, 0.0015, None, i32 + own,
                  metric="haversine"),
    ]
    return {c.name: c for c in cases}


#: The named benchmark cases, by name (see :func:`named_case`).
NAMED_CASES: dict[str, NamedCase] = _cases()


def named_case(name: str) -> tuple[np.ndarray, float]:
    """The data and eps of a named benchmark case.

    Uniform cases are ``uniform(n, d, 0, 100, seed)``, exponential cases
    ``exponential(n, d, rate=40, seed)``, geographic cases
    ``geographic(n, seed=seed)`` ((lat, lon) in radians; their eps bounds
    the haversine distance, ``NAMED_CASES[name].metric``); the name reads
    ``<Unif|Expo|Geo><d>D<n>-<eps>``.

    ===================  ======  ====  ==================  ======  ======================
    name                 n       d     data                seed    ordered pairs incl. self
    ===================  ======  ====  ==================  ======  ======================
    Unif2D2M-0.5         2M      2     uniform [0,100]^2   1       314,833,680
    Unif2D2M-1.0         2M      2     uniform [0,100]^2   1       1,247,933,728
    Unif6D2M-8.0         2M      6     uniform [0,100]^6   2       6,702,784
    Expo2D2M-0.0004      2M      2     expo lambda=40      3       793,578,794
    Expo2D2M-0.002       2M      2     expo lambda=40      3       18,765,695,968
    Expo6D2M-0.012       2M      6     expo lambda=40      4       1,729,275,652
    Unif2D10M-0.25       10M     2     uniform [0,100]^2   5       1,969,148,342
    Expo2D10M-0.0002     10M     2     expo lambda=40      6       5,007,001,402
    Unif2D1M-0.5         1M      2     uniform [0,100]^2   11      79,234,870
    Unif6D1M-12          1M      6     uniform [0,100]^6   12      13,438,614
    Expo2D1M-0.0008      1M      2     expo lambda=40      13      785,267,382
    Expo6D1M-0.02        1M      6     expo lambda=40      14      5,399,736,586
    Geo2D1M-0.0015       1M      2     geographic          15      (haversine; not counted)
    ===================  ======  ====  ==================  ======  ======================

    The first six are the GPU benchmark cases, with their seeds and exact
    float64 pair counts pinned (scipy's cKDTree reproduces all six from these
    generators).  The 10M cases are 10M-point versions of Unif2D and Expo2D
    (eps about 1/sqrt(5) of the 2M cases', so the mean number of neighbours
    stays in the same range).  The 1M cases are the CPU benchmark cases;
    Geo2D1M-0.0015 is the haversine DBSCAN case (eps in radians, about
    9.6 km on the Earth).
    Their counts were computed with scipy's ``cKDTree.query_ball_point`` in
    float64.  Note the size of Expo6D1M-0.02:
    5.4 billion pairs, a 21.6 GB CSR table (int32 columns).
    ``NAMED_CASES[name]`` holds the recipe and the pair count.

    Parameters
    ----------
    name : str
        A key of :data:`NAMED_CASES`.

    Returns
    -------
    X : numpy.ndarray
        float64, C-contiguous, shape (n, d).
    eps : float

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> from skyjoin import datasets
    >>> datasets.NAMED_CASES["Unif6D2M-8.0"].seed
    2
    """
    case = NAMED_CASES.get(name) if isinstance(name, str) else None
    if case is None:
        raise ValueError(
            f"unknown named case {name!r}; choose one of {', '.join(NAMED_CASES)}"
        )
    return case.data(), case.eps
