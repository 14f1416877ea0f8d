"""How the commands word numbers: counts with their noun, singular or plural."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` with thousands separators and ``noun``, plural unless n is 1.

    Examples
    --------
    >>> plural(1, "cluster"), plural(2000, "point"), plural(1, "dimension")
    ('1 cluster', '2,000 points', '1 dimension')
    >>> plural(0, "neighbour per point", "neighbours per point")
    '0 neighbours per point'
    """
    word = noun if n == 1 else (nouns if nouns is not None else noun + "s")
    return f"{n:,} {word}"
