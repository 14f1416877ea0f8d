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
are non-empty and the index stops pruning).
"""

from __future__ import annotations

import numpy as np

from .._core.device import cupy, is_device_array

__all__ = ["ALGORITHMS", "BRUTE_MIN_DIMS", "BRUTE_MIN_WORK", "choose_algorithm",
           "candidate_fraction", "needs_sample", "resolve_algorithm"]

#: the join's two algorithms: the grid of non-empty cells, or every pair
#: screened by a matrix product (``brute_bound``) and tested exactly
ALGORITHMS = ("grid", "brute")
#: below this many dimensions "auto" always takes the grid
BRUTE_MIN_DIMS = 8
#: "auto" screens every pair when (sampled fraction of pairs in adjacent
#: grid cells) x d reaches this (docs/decisions/join-brute-force.md)
BRUTE_MIN_WORK = 10.0
#: the grid's indexed dimensions (``index.grid.DEFAULT_INDEX_DIMS``)
_INDEXED = 6
_SAMPLE_ROWS, _SAMPLE_COLS = 512, 4096


def candidate_fraction(R, S, eps: float) -> float:
    """The fraction of pairs (r, s) whose cells of side eps are adjacent in
    each of the leading ``min(d, 6)`` dimensions (the grid's candidates),
    from 512 sampled rows of R against 4,096 of S (fixed seed: the same
    data gives the same plan).  Device arrays are sampled on the device and
    the sample copied.  O(512 x 4,096 x 6)."""
    rng = np.random.default_rng(0)
    k = min(int(S.shape[1]), _INDEXED)

    def sample(A, m):
        idx = np.sort(rng.choice(A.shape[0], size=min(m, A.shape[0]), replace=False))
        if is_device_array(A):
            cp = cupy()
            return cp.asnumpy(A[cp.asarray(idx), :k]).astype(np.float64)
        return np.asarray(A[idx, :k], dtype=np.float64)

    a, b = sample(R, _SAMPLE_ROWS), sample(S, _SAMPLE_COLS)
    if not len(a) or not len(b):
        return 0.0
    lo = np.minimum(a.min(axis=0), b.min(axis=0))
    ca, cb = np.floor((a - lo) / eps), np.floor((b - lo) / eps)
    adjacent = np.ones((len(a), len(b)), dtype=bool)
    for j in range(k):
        adjacent &= np.abs(ca[:, None, j] - cb[None, :, j]) <= 1
    return float(adjacent.mean())


def choose_algorithm(algorithm, n_features: int, *, chunks: bool = False,
                     fraction: float | None = None) -> str:
    """THE rule of the join's algorithm: "grid" or "brute" as asked; "auto"
    the grid below ``BRUTE_MIN_DIMS`` dimensions, else the brute force when
    ``fraction`` (``candidate_fraction``) times d reaches
    ``BRUTE_MIN_WORK`` (the grid without a sample).  The streamed chunks
    (``self_join_chunks``) run on the grid.  O(1).

    Raises
    ------
    ValueError
        An unknown algorithm, or "brute" for the chunks.
    """
    if algorithm not in ALGORITHMS + ("auto",):
        raise ValueError(f"algorithm must be 'auto', 'grid' or 'brute', got {algorithm!r}")
    if chunks:
        if algorithm == "brute":
            raise ValueError("algorithm='brute' does not stream chunks: use self_join, "
                             "or algorithm='grid'")
        return "grid"
    if algorithm != "auto":
        return algorithm
    if n_features < BRUTE_MIN_DIMS or fraction is None:
        return "grid"
    return "brute" if fraction * n_features >= BRUTE_MIN_WORK else "grid"


def needs_sample(algorithm, n_features: int) -> bool:
    """Whether "auto" must look at the data (``candidate_fraction``) to
    decide.  O(1)."""
    return algorithm == "auto" and n_features >= BRUTE_MIN_DIMS


def resolve_algorithm(algorithm, R, S, eps: float) -> str:
    """``choose_algorithm`` for the points R (queries) and S at radius eps,
    sampling them only when "auto" needs it.  For the public boundary.
    O(1), or the sample's cost."""
    d = int(S.shape[1])
    fraction = candidate_fraction(R, S, eps) if needs_sample(algorithm, d) else None
    return choose_algorithm(algorithm, d, fraction=fraction)

