"""Which algorithm a join runs: the grid, or every pair screened (brute force).

The grid of non-empty cells (Gowanlock and Karsin 2018, §IV) indexes the
leading ``min(d, 6)`` dimensions with cells of side about eps and tests
the pairs of adjacent cells; the brute force screens every pair by a
matrix product with a provable margin (``brute_bound``) and tests the
survivors exactly, so both give the same pairs.  Both costs grow as n^2
in high dimensions: the grid's with the fraction f of pairs whose cells
are adjacent in every indexed dimension times d (each candidate is a
d-term distance), the brute force's with the product and one read of it
per pair, at far higher throughput per term.  So the rule compares f d,
estimated on a sample, with one threshold (the paper's own remark on the
curse of dimensionality, §IV-D: in high dimensions most adjacent cells
are non-empty and the index stops pruning).  Where the brute force would
run, the screen on the q leading principal components
(``projection``, "projected") replaces it when the sample shows it costs
a share of the brute force a pair (``SCREEN_MODELS``): on the GPU half
(q squared differences in float32 registers and the survivors' exact
tests, against a d-term float64 product read from memory: data of low
intrinsic dimension, and up to about 32 dimensions any data); on the
CPU, whose screens both read a product per pair, when q and the
survivors cost a quarter of d or less.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.device import cupy, is_device_array
from .projection import (COMPONENT_STEPS, Projection, axes_norm_bound, choose_components,
                         principal_axes, screen_fractions, screen_precision)

__all__ = ["ALGORITHMS", "BRUTE_MIN_DIMS", "BRUTE_MIN_WORK", "ScreenModel", "SCREEN_MODELS",
           "JoinSample", "choose_algorithm", "candidate_fraction", "component_screen",
           "needs_sample", "sample_join", "resolve_algorithm"]

#: the join's algorithms: the grid of non-empty cells, every pair screened
#: by a matrix product (``brute_bound``) and tested exactly, the same with
#: the product of the points' FP16 lattice on the GPU (``lattice``), or
#: every pair screened on the leading principal components (``projection``)
ALGORITHMS = ("grid", "brute", "brute-fp16", "projected")
#: the algorithms that screen every pair
_SCREENS = ("brute", "brute-fp16", "projected")


@dataclass(frozen=True)
class ScreenModel:
    """One device's costs for the choice of the component screen, in
    screened pair-components: ``survivor`` the exact test of a survivor,
    per dimension; ``brute`` the brute force's cost a pair, ``a + b d``;
    the screen runs where its cost a pair is at most ``share`` of that."""

    survivor: float
    brute: tuple[float, float]
    share: float


#: the component screen's cost model by device, fitted to the figures of
#: docs/decisions/join-principal-components.md: on the GPU the fused
#: float32 screen against the FP64 product's screen; on the CPU both
#: screens read a product per pair, and the component screen saves the
#: product's d - q terms of it
SCREEN_MODELS = {"gpu": ScreenModel(survivor=250.0, brute=(60.0, 0.7), share=0.5),
                 "cpu": ScreenModel(survivor=30.0, brute=(0.0, 1.0), share=0.25)}
#: sampled pairs of the component screen's estimate (rows x columns)
_SCREEN_ROWS, _SCREEN_COLS = 256, 2048
#: below this many dimensions "auto" always takes the grid
BRUTE_MIN_DIMS = 8
#: "auto" screens every pair when (sampled fraction of pairs in adjacent
#: grid cells) x d reaches this (docs/decisions/join-brute-force.md)
BRUTE_MIN_WORK = 10.0
#: the grid's indexed dimensions (``index.grid.DEFAULT_INDEX_DIMS``)
_INDEXED = 6
_SAMPLE_ROWS, _SAMPLE_COLS = 512, 4096


@dataclass(frozen=True)
class JoinSample:
    """What the rule read of the data: the sampled share of grid candidates
    (``candidate_fraction``), and where the brute force would run, the
    cheapest component screen and its cost a pair (``component_screen``)."""

    fraction: float | None
    screen: tuple[Projection, float] | None = None


def _samples(R, S, columns):
    """512 rows of R and 4,096 of S (fixed seed: the same data gives the
    same plan), their first ``columns`` columns in float64 on the host.
    Device arrays are sampled on the device and the sample copied."""
    rng = np.random.default_rng(0)

    def sample(A, m):
        idx = np.sort(rng.choice(A.shape[0], size=min(m, A.shape[0]), replace=False))
        if is_device_array(A):
            cp = cupy()
            return cp.asnumpy(A[cp.asarray(idx), :columns]).astype(np.float64)
        return np.asarray(A[idx, :columns], dtype=np.float64)

    return sample(R, _SAMPLE_ROWS), sample(S, _SAMPLE_COLS)


def candidate_fraction(R, S, eps: float) -> float:
    """The fraction of pairs (r, s) whose cells of side eps are adjacent in
    each of the leading ``min(d, 6)`` dimensions (the grid's candidates),
    from 512 sampled rows of R against 4,096 of S (fixed seed: the same
    data gives the same plan).  O(512 x 4,096 x 6)."""
    return _grid_fraction(*_samples(R, S, min(int(S.shape[1]), _INDEXED)), eps)


def _grid_fraction(a, b, eps: float) -> float:
    """``candidate_fraction`` of the samples a, b (their leading
    ``min(d, 6)`` columns)."""
    k = min(int(b.shape[1]), _INDEXED)
    a, b = a[:, :k], b[:, :k]
    if not len(a) or not len(b):
        return 0.0
    lo = np.minimum(a.min(axis=0), b.min(axis=0))
    ca, cb = np.floor((a - lo) / eps), np.floor((b - lo) / eps)
    adjacent = np.ones((len(a), len(b)), dtype=bool)
    for j in range(k):
        adjacent &= np.abs(ca[:, None, j] - cb[None, :, j]) <= 1
    return float(adjacent.mean())


def component_screen(R, S, eps: float, device: str = "cpu",
                     samples=None) -> tuple[Projection, float]:
    """The cheapest screen on principal components for R join S at radius
    eps on ``device``, and its cost a pair (``projection.choose_components``
    with the device's ``SCREEN_MODELS``): the axes of 4,096 sampled rows of
    S, the share of 256 x 2,048 sampled pairs each number of components
    lets through (and all d: the pairs within eps), and the screen's
    precision from the data's extent (one pass over R and S).  ``samples``:
    the rule's (``_samples``), if taken.  O(n d + 4,096 d^2 + d^3)."""
    d = int(S.shape[1])
    a, b = samples if samples is not None else _samples(R, S, d)
    axes = principal_axes(b) if len(b) > 1 else np.eye(d)
    steps = [q for q in COMPONENT_STEPS if q < d] + ([d] if d <= max(COMPONENT_STEPS) else [])
    if len(a) and len(b):
        fractions = screen_fractions(a[:_SCREEN_ROWS], b[:_SCREEN_COLS], axes, eps, steps + [d])
    else:
        fractions = {q: 0.0 for q in steps + [d]}
    within = fractions[d]                    # every axis: the pairs within eps
    q, cost = choose_components({q: fractions[q] for q in steps}, d, within,
                                SCREEN_MODELS[device].survivor)
    basis = np.ascontiguousarray(axes[:, :q])
    sigma = axes_norm_bound(basis)
    screen = screen_precision(_extent(R, S), sigma, eps)
    return Projection(basis=basis, sigma=sigma, fraction=fractions[q], screen=screen), cost


def _extent(R, S) -> float:
    """The diagonal of the box around R and S: at least any point's
    distance from a centre inside S's box.  O(n d)."""
    if not len(R) or not len(S):
        return 0.0
    xp = cupy() if is_device_array(S) else np
    lo, hi = S.min(axis=0), S.max(axis=0)
    if R is not S:                      # a self-join reads its points once
        lo, hi = xp.minimum(lo, R.min(axis=0)), xp.maximum(hi, R.max(axis=0))
    w = (hi.astype(xp.float64) - lo.astype(xp.float64))
    return float(xp.sqrt((w * w).sum())) * (1.0 + 1e-12)


def choose_algorithm(algorithm, n_features: int, *, chunks: bool = False,
                     sample: JoinSample | None = None, device: str = "cpu") -> str | Projection:
    """THE rule of the join's algorithm: "grid", "brute" or "brute-fp16"
    as asked (the last on the GPU only: an option, never chosen), the
    component ``screen`` (its Projection) for "projected"; "auto" the grid
    below ``BRUTE_MIN_DIMS`` dimensions, else the brute force when
    ``fraction`` (``candidate_fraction``) times d reaches
    ``BRUTE_MIN_WORK`` (the grid without a sample), and there the
    ``screen`` (``component_screen``: Projection, cost a pair) instead when
    its cost is at most the device's share of the brute force's
    (``SCREEN_MODELS``); ``fraction`` and
    ``screen`` are the ``sample``'s (``sample_join``).  The streamed chunks
    (``self_join_chunks``) run on the grid.  O(1).

    Raises
    ------
    ValueError
        An unknown algorithm, a screen of every pair for the chunks,
        "brute-fp16" off the GPU, or "projected" without its screen.
    """
    if algorithm not in ALGORITHMS + ("auto",):
        raise ValueError(f"algorithm must be 'auto', 'grid', 'brute', 'brute-fp16' or "
                         f"'projected', got {algorithm!r}")
    if algorithm == "brute-fp16" and device != "gpu":
        raise ValueError("algorithm='brute-fp16' runs on the GPU's tensor cores: use "
                         "device='gpu', or algorithm='brute' on the CPU")
    fraction, screen = (sample.fraction, sample.screen) if sample is not None else (None, None)
    if chunks:
        if algorithm in _SCREENS:
            raise ValueError(f"algorithm={algorithm!r} does not stream chunks: use self_join, "
                             "or algorithm='grid'")
        return "grid"
    if algorithm == "projected":
        if screen is None:
            raise ValueError("algorithm='projected' needs its component screen "
                             "(algorithm.component_screen)")
        return screen[0]
    if algorithm != "auto":
        return algorithm
    if n_features < BRUTE_MIN_DIMS or fraction is None:
        return "grid"
    if fraction * n_features < BRUTE_MIN_WORK:
        return "grid"
    model = SCREEN_MODELS[device]
    if screen is not None and screen[1] <= model.share * (model.brute[0]
                                                          + model.brute[1] * n_features):
        return screen[0]
    return "brute"


def needs_sample(algorithm, n_features: int) -> bool:
    """Whether "auto" must look at the data (``candidate_fraction``) to
    decide.  O(1)."""
    return algorithm == "auto" and n_features >= BRUTE_MIN_DIMS


def needs_screen(algorithm, n_features: int, fraction: float | None) -> bool:
    """Whether the rule reads the component screen (``component_screen``):
    for "projected", and for "auto" where the brute force would run.
    O(1)."""
    if algorithm == "projected":
        return True
    return (needs_sample(algorithm, n_features) and fraction is not None
            and fraction * n_features >= BRUTE_MIN_WORK)


def sample_join(algorithm, R, S, eps: float, device: str = "cpu") -> JoinSample:
    """What ``choose_algorithm`` reads of the points R (queries) and S at
    radius eps for ``algorithm`` on ``device``, sampled (once) only where
    the rule needs it.  O(1), or the samples' cost."""
    d = int(S.shape[1])
    if not (needs_sample(algorithm, d) or algorithm == "projected"):
        return JoinSample(None)
    samples = _samples(R, S, d)
    fraction = _grid_fraction(*samples, eps) if needs_sample(algorithm, d) else None
    screen = component_screen(R, S, eps, device, samples) \
        if needs_screen(algorithm, d, fraction) else None
    return JoinSample(fraction, screen)


def resolve_algorithm(algorithm, R, S, eps: float, device: str = "cpu") -> str | Projection:
    """``choose_algorithm`` for the points R (queries) and S at radius eps
    on ``device`` (``sample_join``).  For the public boundary.  O(1), or
    the samples' cost."""
    return choose_algorithm(algorithm, int(S.shape[1]), device=device,
                            sample=sample_join(algorithm, R, S, eps, device))

