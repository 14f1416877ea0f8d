"""How big a join's result may be: the memory limit and the size check.

Every path that materialises pairs checks, once it knows how many, that
they fit where they go (host or GPU memory, or the caller's
``memory_limit``), before it allocates them: ``result_size_guard`` raises
``skyjoin.ResultTooLargeError`` naming the size, the limit and what to do
instead.  Cost: O(1).
"""

from __future__ import annotations

import numpy as np

from .._core.memory import available_host_bytes
from ..errors import ResultTooLargeError

__all__ = ["MEMORY_MARGIN", "RESULT_FORMS", "check_memory_limit", "result_size_guard"]

#: With ``memory_limit="auto"``, a result may take this fraction of the
#: memory free when it is allocated (the rest: the process's other
#: allocations and the system's).
MEMORY_MARGIN = 0.9

#: What a result is materialised as (``result_size_guard``'s ``form``).
RESULT_FORMS = ("table", "pairs", "scipy")


def check_memory_limit(memory_limit):
    """``memory_limit`` validated: "auto", or a number of bytes >= 1 (an int).

    Raises
    ------
    ValueError
        Anything else.
    """
    if isinstance(memory_limit, str) and memory_limit == "auto":
        return "auto"
    if isinstance(memory_limit, (bool, np.bool_)) or not isinstance(memory_limit,
                                                                    (int, np.integer)) \
            or int(memory_limit) < 1:
        raise ValueError(f"memory_limit must be 'auto' or a number of bytes >= 1, "
                         f"got {memory_limit!r}")
    return int(memory_limit)


def result_size_guard(n_pairs: int, n_rows: int, *, form: str = "table", index_itemsize: int = 4,
                      distance_itemsize: int = 0, memory_limit="auto", where: str = "host",
                      free_bytes: int | None = None, extra_bytes: int = 0,
                      at_least: bool = False) -> int:
    """The bytes a result needs, after checking that they fit (the one rule).

    Bytes of each form (8-byte ``indptr`` entries, ``n_pairs`` pairs):

    * "table": ``indptr`` plus ``index_itemsize + distance_itemsize`` a pair
      (a ``NeighborTable``, with its distances when asked for);
    * "pairs": 24 a pair (the (n_pairs, 2) int64 array and its row ids);
    * "scipy": ``indptr`` plus 16 a pair (float64 values, and index arrays
      that scipy may widen to int64).

    Rule: the result fits if its bytes are at most ``memory_limit`` when
    that is a number, or, with "auto", at most ``MEMORY_MARGIN`` times the
    free memory where it goes: ``free_bytes`` (the device's, given by the
    caller), else the host's (``available_host_bytes``; no check where the
    system does not tell).  Device memory cannot be overcommitted: where
    ``free_bytes`` is given, the result never fits beyond it, whatever
    ``memory_limit``.

    Parameters
    ----------
    n_pairs, n_rows : int
    form : {"table", "pairs", "scipy"}
    index_itemsize, distance_itemsize : int
        Bytes of a column id and of a distance (0: none) in a table.
    memory_limit : int or "auto"
        As checked by ``check_memory_limit``.
    where : {"host", "device"}
        The memory the result goes to (named in the message).
    free_bytes : int, optional
        Free bytes there; None: the host's available memory.
    extra_bytes : int
        Bytes of a temporary the building of the result adds beside it (the
        forward half of a symmetric pattern, say); counted as needed.
    at_least : bool
        ``n_pairs`` is a lower bound of the result (found so far by a path
        with no counting pass); the message says so.

    Returns
    -------
    int
        The bytes needed.

    Raises
    ------
    ResultTooLargeError
        If the result does not fit; the message names the ways out.

    Notes
    -----
    Cost: O(1) (one read of ``/proc/meminfo`` for the host).
    """
    n_pairs, n_rows = int(n_pairs), int(n_rows)
    per_pair = {"table": index_itemsize + distance_itemsize, "pairs": 24, "scipy": 16}
    if form not in per_pair:
        raise ValueError(f"form must be one of {RESULT_FORMS}, got {form!r}")
    needed = n_pairs * per_pair[form] + (0 if form == "pairs" else 8 * (n_rows + 1)) \
        + int(extra_bytes)
    if memory_limit == "auto":
        free = available_host_bytes() if free_bytes is None else int(free_bytes)
        if free is None:
            return needed
        allowed = int(free * MEMORY_MARGIN)
        source = f"{free:,} bytes are free in {where} memory ({MEMORY_MARGIN:.0%} of it allowed)"
    else:
        allowed = int(memory_limit)
        source = f"memory_limit allows {allowed:,} bytes"
        if free_bytes is not None and int(free_bytes) < allowed:
            allowed = int(free_bytes)
            source = f"{allowed:,} bytes are free in {where} memory"
    if needed <= allowed:
        return needed
    what = {"table": "the neighbour table", "pairs": "the pair array",
            "scipy": "the scipy sparse matrix"}[form]
    device_hint = "on_device=False (a host table), " if where == "device" else ""
    raise ResultTooLargeError(
        f"{what} would hold {'at least ' if at_least else ''}{n_pairs:,} pairs and need "
        f"{'at least ' if at_least else ''}{needed:,} bytes of {where} memory, "
        f"but {source}. Ways out: output='counts' (the neighbour counts alone, O(n) memory), "
        f"{device_hint}skyjoin.self_join_chunks (the pairs in bounded chunks), or on the "
        f"command line --out x.parquet (the pairs streamed to disk); memory_limit=<bytes> "
        f"sets the limit.")
