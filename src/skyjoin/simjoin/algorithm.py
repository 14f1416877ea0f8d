"""Which algorithm a join runs: the grid, or every pair screened (brute force).

The grid of non-empty cells (Gowanlock and Karsin 2018, §IV) prunes by
cells; beyond about a dozen dimensions almost every cell neighbours every
other and the index costs without saving (the paper's own remark on the
curse of dimensionality, §IV-D).  The brute force screens every pair by a
matrix product with a provable margin (``brute_bound``) and tests the
survivors exactly, so both give the same pairs.
"""

from __future__ import annotations

__all__ = ["ALGORITHMS", "BRUTE_MIN_DIMS", "choose_algorithm"]

#: the join's two algorithms: the grid of non-empty cells, or every pair
#: screened by a matrix product (``brute_bound``) and tested exactly
ALGORITHMS = ("grid", "brute")
#: "auto" screens every pair from this many dimensions on
#: (docs/decisions/join-brute-force.md)
BRUTE_MIN_DIMS = 16


def choose_algorithm(algorithm, n_features: int, *, chunks: bool = False) -> str:
    """THE rule of the join's algorithm: "grid" or "brute" as asked; "auto"
    screens every pair (brute force) from ``BRUTE_MIN_DIMS`` dimensions on,
    where almost every cell of the grid neighbours every other
    (docs/decisions/join-brute-force.md), else the grid.  The streamed
    chunks (``self_join_chunks``) run on the grid.  O(1).

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
    if algorithm == "auto":
        return "brute" if n_features >= BRUTE_MIN_DIMS else "grid"
    return algorithm
