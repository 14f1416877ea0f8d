"""Groups of equal points, so that the skyline's dominance phase sees each once.

Equal points never dominate each other, so a dominance test between two
copies always fails and never ends a scan: with k copies of a skyline
point, SkyAlign's own-cell scan (and the window of SFS / GGS) costs
O(k**2).  The skyline of a point set is the skyline of its distinct
points, each expanded back to its copies (``distinct=False``) or to the
lowest index of its copies (``distinct=True``).

Grouping all n points would cost a sort of every row; the engines group
only what is left after their cheap linear pre-filters, where every copy of
a skyline point still is (a pre-filter removes dominated points only):

* CPU SkyAlign: :func:`group_candidates`, a hash table over the survivors of
  the §5.1 / §7.1 pre-filters (O(m d) expected for m survivors, hashes in
  parallel), see :func:`skyjoin.pareto.cpu.skyalign_cpu`;
* GPU SkyAlign: :func:`group_rows` (NumPy or CuPy) over the tau survivors:
  a row hash and a test for repeated hashes (a sort with NumPy, a lock-free
  hash set with CuPy), O(m d) expected, and only when two hashes are equal
  an exact stable lexicographic sort, O(d m log m);
* sort-based engines (SFS, GGS, CPU and GPU): their presort already puts
  equal points next to each other, :func:`run_starts` marks the first of
  each run in O(m d).

:func:`expand_groups` and :func:`expand_runs` map the skyline of the
distinct points back, in O(m + s log m).
"""

from __future__ import annotations


import numpy as np
from numba import njit, prange

from .._core.config import NUMBA_CACHE
from .._core.device import array_module, cupy as _cupy
from .gpu_kernels import ROW_HASH_MUL, ROW_HASH_MUL2, ROW_HASH_SEED, skyline_kernels

__all__ = ["group_candidates", "group_rows", "row_hash", "row_hashes", "run_starts",
           "expand_groups", "expand_runs"]

_SIGN = np.uint64(1) << np.uint64(63)        # the bits of -0.0
_SEED = np.uint64(ROW_HASH_SEED)
_MUL = np.uint64(ROW_HASH_MUL)
_MUL2 = np.uint64(ROW_HASH_MUL2)



@njit(cache=NUMBA_CACHE, inline="always")
def _mix(x):
    """Final mixer of a 64-bit hash (every output bit depends on every input bit)."""
    x = (x ^ (x >> np.uint64(32))) * _MUL2
    x = (x ^ (x >> np.uint64(29))) * _MUL
    return x ^ (x >> np.uint64(32))


@njit(cache=NUMBA_CACHE, inline="always")
def row_hash(Xb, i, d):
    """64-bit hash of row i of Xb (the float64 bits of X; -0.0 read as +0.0,
    so equal rows hash equal): each word, keyed by its column, goes through
    its own multiply-xorshift-multiply (independent across the columns, no
    dependency chain), the results are summed and mixed once more."""
    x = _SEED
    for k in range(d):
        b = Xb[i, k]
        if b == _SIGN:
            b = np.uint64(0)
        y = (b + np.uint64(k + 1) * _SEED) * _MUL
        y = (y ^ (y >> np.uint64(31))) * _MUL2
        x += y ^ (y >> np.uint64(29))
    return _mix(x)


@njit(cache=NUMBA_CACHE, parallel=True)
def _candidate_hashes(Xb, idx):
    """:func:`row_hash` of every row Xb[idx[t]], in parallel."""
    m = idx.shape[0]
    d = Xb.shape[1]
    h = np.empty(m, dtype=np.uint64)
    for t in prange(m):
        h[t] = row_hash(Xb, idx[t], d)
    return h


@njit(cache=NUMBA_CACHE)
def _hash_groups(X, idx, h):
    """Open-addressing table over the rows X[idx], one uint64 word per slot
    (the hash's high 32 bits and the position + 1 of the group's first row,
    0 = empty; the slot from the low bits, linear probing, load <= 1/2).
    Rows are compared (float ==, so -0.0 == +0.0) only when the 32-bit tags
    agree.  Returns the group number of every position (numbered by first
    occurrence) and the first position of each group."""
    m = idx.shape[0]
    d = X.shape[1]
    cap = 16
    while cap < 2 * m:
        cap <<= 1
    mask = np.uint64(cap - 1)
    low = np.uint64(0xFFFFFFFF)
    table = np.zeros(cap, dtype=np.uint64)
    group = np.empty(m, dtype=np.int64)
    first = np.empty(m, dtype=np.int64)
    ng = 0
    for t in range(m):
        i = idx[t]
        tag = h[t] >> np.uint64(32)
        s = h[t] & mask
        while True:
            e = table[s]
            if e == np.uint64(0):
                table[s] = (tag << np.uint64(32)) | np.uint64(t + 1)
                group[t] = ng
                first[ng] = t
                ng += 1
                break
            if (e >> np.uint64(32)) == tag:
                f = np.int64(e & low) - 1
                j = idx[f]
                same = True
                for k in range(d):
                    if X[j, k] != X[i, k]:
                        same = False
                        break
                if same:
                    group[t] = group[f]
                    break
            s = (s + np.uint64(1)) & mask
    return group, first[:ng].copy()


def group_candidates(X: np.ndarray, idx: np.ndarray, h: np.ndarray | None = None):
    """Group the equal rows among X[idx] (CPU; X C-contiguous float64, idx
    increasing; ``h`` their :func:`row_hash` if already computed).  Returns
    None when they are all distinct, else (group of every position of idx,
    increasing positions of the first row of each group, which hold the
    lowest row index of the group).  Expected O(m d) for m = idx.size:
    hashes in parallel, one sequential pass over a table of 2m-4m words."""
    if idx.size < 2:
        return None
    if idx.size >= 2**31 - 1:                 # positions must fit the table's 32 bits
        return group_rows(X[idx])
    X = np.ascontiguousarray(X)
    if h is None:
        h = _candidate_hashes(X.view(np.uint64), idx)
    group, first = _hash_groups(X, idx, h)
    if first.size == idx.size:
        return None
    return group, first


def row_hashes(P):
    """:func:`row_hash` of every row of P (float64, NumPy or CuPy): equal rows
    get equal hashes, and NumPy, CuPy and Numba give the same values.  O(m d):
    element-wise NumPy operations per column, or one CuPy kernel reading
    each row once (``row_hash`` of ``kernels/skyalign.cu``)."""
    xp = array_module(P)
    m, d = P.shape
    B = xp.ascontiguousarray(P).view(xp.uint64)
    if xp is not np:
        h = xp.empty(m, dtype=xp.uint64)
        if m:
            skyline_kernels(d)["row_hash"](((m + 255) // 256,), (256,), (B, np.int64(m), np.int64(d), h))
        return h
    B = np.where(B == _SIGN, np.uint64(0), B)
    h = np.full(m, _SEED, dtype=np.uint64)
    for k in range(d):
        y = (B[:, k] + np.uint64(((k + 1) * int(_SEED)) % 2**64)) * _MUL
        y = (y ^ (y >> np.uint64(31))) * _MUL2
        h += y ^ (y >> np.uint64(29))
    h = (h ^ (h >> np.uint64(32))) * _MUL2
    h = (h ^ (h >> np.uint64(29))) * _MUL
    return h ^ (h >> np.uint64(32))


def _hashes_repeat(h, d: int = 1) -> bool:
    """Whether two of the hashes h may be equal (NumPy: sort and compare
    neighbours; CuPy: one pass of a lock-free hash set with atomicCAS, where
    two hashes equal but in their lowest bit also count as equal: the
    ``hash_probe`` kernel of the module for dimension ``d``, the caller's)."""
    if not hasattr(h, "__cuda_array_interface__"):
        hs = np.sort(h)
        return bool((hs[1:] == hs[:-1]).any())
    cp = _cupy()
    m = int(h.size)
    cap = 16
    while cap < 2 * m:
        cap <<= 1
    table = cp.zeros(cap, dtype=cp.uint64)
    found = cp.zeros(1, dtype=cp.int32)
    block = 256
    skyline_kernels(d)["hash_probe"](((m + block - 1) // block,), (block,),
                                     (h, np.int64(m), table, np.uint64(cap - 1), found))
    return bool(int(found[0]))


def group_rows(P):
    """Group the equal rows of P (m, d) (NumPy or CuPy float64).

    Returns None when all rows are distinct (decided by the row hashes: no
    two equal; O(m d + m log m) with NumPy, O(m d) expected with CuPy), else
    (group of every row, increasing positions of the first row of each
    group).  Only then the rows are
    sorted exactly: a stable lexicographic sort (NumPy's and CuPy's lexsort
    are stable), so a group's first row in that order is its lowest
    position.
    """
    xp = array_module(P)
    m = P.shape[0]
    if m < 2:
        return None
    if not _hashes_repeat(row_hashes(P), P.shape[1]):
        return None
    order = xp.lexsort(xp.ascontiguousarray(P.T[::-1]))
    S = P[order]
    new = xp.ones(m, dtype=bool)
    new[1:] = (S[1:] != S[:-1]).any(axis=1)
    first = order[new]
    if first.size == m:
        return None                            # equal hashes, distinct rows
    group = xp.empty(m, dtype=xp.int64)
    group[order] = xp.cumsum(new) - 1
    return group, xp.sort(first)


def expand_groups(sky, cand, group, distinct: bool):
    """Back from the skyline of the distinct candidates to all candidates.

    ``sky``: sorted row ids of the skyline of cand[first] (one per group);
    ``cand``: increasing row ids; ``group``: group of each position of
    cand.  distinct: sky itself (each group's lowest index); else every
    candidate of a group in sky, sorted.  O(m + s log m)."""
    if distinct or sky.size == 0:
        return sky
    xp = array_module(cand)
    live = xp.zeros(int(group.max()) + 1, dtype=bool)
    live[group[xp.searchsorted(cand, sky)]] = True
    return cand[live[group]]


def run_starts(Xs):
    """First of each run of equal rows in Xs (rows sorted so that equal rows
    are adjacent; NumPy or CuPy): a bool array, O(m d)."""
    xp = array_module(Xs)
    new = xp.ones(Xs.shape[0], dtype=bool)
    if Xs.shape[0] > 1:
        new[1:] = (Xs[1:] != Xs[:-1]).any(axis=1)
    return new


def expand_runs(pos, new, distinct: bool):
    """Back from the skyline of the distinct rows Xs[new] to Xs.

    ``pos``: positions (into the distinct rows) of the skyline; ``new``:
    :func:`run_starts`.  Returns positions into Xs: the first row of each
    skyline run (distinct), else every row of it.  O(m)."""
    xp = array_module(new)
    starts = xp.flatnonzero(new)
    if distinct:
        return starts[pos]
    live = xp.zeros(starts.size, dtype=bool)
    live[pos] = True
    return xp.flatnonzero(live[xp.cumsum(new) - 1])
