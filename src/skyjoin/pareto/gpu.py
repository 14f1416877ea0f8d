"""SkyAlign and a GGS-style baseline on the GPU: CuPy host side.

The kernels are in ``kernels/skyalign.cu``, compiled at run time by
``cupy.RawModule`` (NVRTC) for each (dimension, mask word) and cached
(``gpu_kernels``): the irregular ones and the regular steps of SkyAlign
(minimisation, the tau pre-filter of §5.1, column copies whose in-place
sorts give the quartiles of Algorithm 1, lines 3-5, padded cells, the
per-round split).  Gathers, cells, scans and compactions use the shared
device primitives (``skyjoin._core.device_prims``, the "skyline" kit) and
the <|M|, M> order Thrust's radix argsort (line 10): a first call runs no
CuPy routine that compiles (docs/decisions/core-gpu-first-calls.md).

Variants (§6.2.3): "sync" (Algorithm 1 with its d + 1 rounds and
repacking of the survivors after each), "nosync" (one launch, no rounds),
"levelwise" (round l runs only the points of order l, against lower cells
that hold skyline points only, then repacks),
"noquart" (sync without quartile-level masks), "padded" (sync with every
median-level cell padded to whole warps, so no warp straddles two cells).
The default ("padded") is chosen by ``plan.plan_skyline``
(docs/decisions/skyline-plan.md).
CuPy is imported only here, lazily, through :func:`skyjoin._core.device.cupy`.
"""

from __future__ import annotations

import time

import numpy as np

from .._core import device_prims as dp
from .._core.device import cupy as _cupy
from .._core.device_kernels import load
from .._core.device_reduce import all_finite, all_true, row_sums
from .columns import exact_matrix, group_columns
from .gpu_kernels import skyline_kernels
from .groups import expand_groups, expand_runs, group_rows, run_starts
from .plan import DEFAULT_VARIANT, GPU_VARIANTS

__all__ = ["skyline_gpu", "skyalign_gpu", "ggs_gpu", "group_on_device", "GPU_VARIANTS"]

_BLOCK = 256
_DENSE_MAX_D = 20
_NULL = np.uint64(0)   # a null pointer argument for the kernels
_RED_BLOCKS = 512      # fixed grid of the grid-stride reductions


def _grid(n: int) -> tuple[int]:
    return (max(1, (int(n) + _BLOCK - 1) // _BLOCK),)


def _sync():
    _cupy().cuda.get_current_stream().synchronize()


def to_device_minimisation(X, maximise: np.ndarray):
    """Copy X to the GPU as float64 under minimisation; check NaN/inf.

    64-bit integer columns go through :func:`skyjoin.pareto.columns.exact_float64`
    (on the GPU for a CuPy array): compared as integers, not rounded."""
    cp = _cupy()
    load(cp, "skyline")                 # the shared device kernels it uses, one compile
    if getattr(X, "ndim", 0) == 2 and getattr(X, "dtype", np.dtype(object)).kind in "iu":
        X = exact_matrix(X)
    Xd = cp.array(X, dtype=cp.float64, order="C", copy=True)
    if Xd.ndim != 2:
        raise ValueError(f"X must be 2-D with shape (n_points, n_dims), got shape {Xd.shape}")
    if Xd.shape[1] == 0:
        raise ValueError(f"X has no columns (shape {Xd.shape})")
    if not all_finite(cp, Xd):
        raise ValueError("X contains NaN or inf values; remove or impute them first")
    if maximise.size != Xd.shape[1]:
        raise ValueError(f"sense has {maximise.size} entries but the data has {Xd.shape[1]} columns")
    n, d = Xd.shape
    if n:           # x * (-1 or 1) + 0.0: maximised columns negated, -0.0 made +0.0
        sign = cp.asarray(np.where(maximise, -1.0, 1.0))
        skyline_kernels(d)["minimise"](_grid(n * d), (_BLOCK,),
                                       (Xd, np.int64(n), np.int32(d), sign))
    return Xd


def group_on_device(X, maximise: np.ndarray, diff: np.ndarray):
    """Group the rows of a GPU array by its diff columns, on the GPU: (float64
    CuPy array of the min / max columns and the two of the group number,
    their maximise flags), as :func:`skyjoin.pareto.columns.group_columns`.
    ``maximise`` and ``diff`` have one flag per column of X.  One float64
    copy of X (its values checked), O(k n log n) for k diff columns."""
    Xd = to_device_minimisation(X, np.zeros(X.shape[1], dtype=bool))
    keep = [k for k in range(Xd.shape[1]) if not diff[k]]      # a list, as split_diff's
    V = Xd[:, keep] if len(keep) < Xd.shape[1] else Xd
    return group_columns(V, maximise[keep], [Xd[:, k] for k in range(Xd.shape[1]) if diff[k]])


def skyline_gpu(X, maximise: np.ndarray, plan, count: bool = True):
    """Run a GPU plan (``skyline.plan.SkylinePlan``) of :func:`skyjoin.skyline`.
    Returns (indices, stats): a NumPy array for host input, a CuPy array for
    CuPy input.  O(n d) for the transfer and the sign flips, then the
    algorithm's cost."""
    cp = _cupy()
    on_device = hasattr(X, "__cuda_array_interface__")
    t0 = time.perf_counter()
    Xd = to_device_minimisation(X, maximise)
    _sync()
    t_in = time.perf_counter() - t0
    if plan.algorithm == "skyalign":
        sky, stats = skyalign_gpu(Xd, plan.variant, count=count, distinct=plan.distinct)
    else:   # "ggs", the only other algorithm a GPU plan holds
        sky, stats = ggs_gpu(Xd, distinct=plan.distinct)
    stats["times"]["to_device"] = t_in
    stats["distinct"] = plan.distinct
    stats["skyline_size"] = int(sky.size)
    out = sky if on_device else cp.asnumpy(sky)
    stats["times"]["host_total"] = time.perf_counter() - t0
    return out, stats


def tau_prefilter_gpu(Xd):
    """§5.1 pre-filter (exact under ties): keep q iff some q[k] < tau or q
    equals the point s reaching tau = min max (the first such row).
    Increasing int64 row ids.  Three launches over the rows, O(n d)."""
    cp = _cupy()
    n, d = Xd.shape
    k = skyline_kernels(d)
    rowmax = cp.empty(n, dtype=cp.float64)
    best = cp.asarray(np.full(2, ~np.uint64(0), dtype=np.uint64))   # least key, its first row
    k["row_max"]((_RED_BLOCKS,), (_BLOCK,), (Xd, np.int64(n), rowmax, best))
    k["first_at"]((_RED_BLOCKS,), (_BLOCK,), (rowmax, np.int64(n), best, best[1:]))
    flags = cp.empty(n, dtype=cp.int32)
    k["tau_keep"](_grid(n), (_BLOCK,), (Xd, np.int64(n), rowmax, best[1:], flags))
    return dp.compact(cp, flags, cp.int64)[0]


def _cells(M):
    """Cell starts (with end sentinel, int64), masks and each point's cell
    index (int32) of the sorted masks M (m >= 1)."""
    cp = _cupy()
    point_cell, starts = dp.runs(cp, M, cp.int64)
    return starts, dp.take(cp, M, starts[:-1]), point_cell


def _quartiles(P, m: int):
    """Rows m/4, m/2, 3m/4 (at most m - 1) of every column of P sorted,
    as a (3, d) array: the columns copied out contiguous, each sorted in
    place (Thrust), the values gathered.  O(d m log m)."""
    cp = _cupy()
    d = P.shape[1]
    PT = cp.empty((d, m), dtype=cp.float64)
    skyline_kernels(d)["columns"](_grid(m * d), (_BLOCK,), (P, np.int64(m), PT))
    for j in range(d):
        PT[j].sort()
    rows = [min((q * m) // 4, m - 1) for q in (1, 2, 3)]
    at = np.array([[j * m + r for j in range(d)] for r in rows], dtype=np.int64)
    return dp.take(cp, PT.reshape(-1), cp.asarray(at.reshape(-1))).reshape(3, d)


def skyalign_gpu(Xd, variant: str = DEFAULT_VARIANT["gpu"], count: bool = True,
                 distinct: bool = False):
    """SkyAlign (Algorithm 1) on minimised float64 points already on the GPU.

    Returns (sorted CuPy int64 indices, stats).  The tau survivors (every
    copy of every skyline point among them) are grouped by
    :func:`skyjoin.pareto.groups.group_rows` (a row hash and a hash set; an
    exact sort only when two hashes are equal), the rest of Algorithm 1 runs
    on one point per group, and the result is expanded back to every copy,
    or to the lowest index of each group with ``distinct``."""
    cp = _cupy()
    if variant not in GPU_VARIANTS:
        raise ValueError(f"unknown GPU SkyAlign variant {variant!r}; expected one of {GPU_VARIANTS}")
    n, d = Xd.shape
    mt = cp.uint32 if d <= 32 else cp.uint64
    stats = {"algorithm": "skyalign", "variant": variant, "device": "gpu", "n": n, "d": d,
             "dominance_tests": 0, "mask_tests": 0, "times": {}}
    times = stats["times"]
    if n == 0:
        stats["prefilter_survivors"] = 0
        return cp.zeros(0, cp.int64), stats
    k = skyline_kernels(d)
    t0 = time.perf_counter()
    idx = tau_prefilter_gpu(Xd)
    m = int(idx.size)
    stats["prefilter_survivors"] = stats["tau_survivors"] = m
    P = dp.take(cp, Xd, idx)
    cand = idx
    eq = group_rows(P)                      # one point per group of equal survivors
    if eq is not None:
        idx, P = cand[eq[1]], P[eq[1]]
        m = int(idx.size)
    stats["distinct_survivors"] = m
    _sync()
    t1 = time.perf_counter()
    times["prefilter"] = t1 - t0

    quart = _quartiles(P, m)                                  # lines 3-5
    M = cp.empty(m, dtype=mt)
    Q = cp.empty(m, dtype=mt)
    order = cp.empty(m, dtype=cp.int32)
    key = cp.empty(m, dtype=cp.uint64)
    k["masks"](_grid(m), (_BLOCK,), (P, quart, np.int64(m), M, Q, order, key))
    if d <= 56:                                               # line 10
        perm = dp.argsort(cp, key)
    else:
        perm = cp.lexsort(cp.stack([M.astype(cp.uint64), order.astype(cp.uint64)]))
    P = dp.take(cp, P, perm)
    M, Q, order, idx = (dp.take(cp, a, perm) for a in (M, Q, order, idx))
    if variant == "noquart":
        Q = cp.zeros_like(Q)
    _sync()
    t2 = time.perf_counter()
    times["masks_sort"] = t2 - t1

    counters = cp.zeros(2, dtype=cp.uint64) if count else None
    out = []
    levels = []
    if variant == "nosync":
        starts, cmasks, point_cell = _cells(M)
        ends = cp.ascontiguousarray(starts[1:])
        use_dense = d <= _DENSE_MAX_D
        dense = cp.full(1 << d if use_dense else 1, -1, dtype=cp.int32)
        if use_dense:
            dense[cmasks.astype(cp.int64)] = cp.arange(cmasks.size, dtype=cp.int32)
        dead = cp.zeros(m, dtype=cp.uint8)
        k["skyalign"](_grid(m), (_BLOCK,),
                      (P, Q, M, point_cell, starts, ends, cmasks, dense, np.int32(use_dense),
                       np.int32(0), np.int32(0), np.int32(0), np.int32(0), np.int64(m), _NULL,
                       dead, _NULL if counters is None else counters))
        out.append(idx[dead == 0])
    elif variant == "levelwise":
        # one round per order l: only the points of order l run, against the
        # lower cells (already repacked to skyline points) and their own cell;
        # then the dominated points of order l are removed (repacking).
        use_dense = d <= _DENSE_MAX_D
        for level in range(d + 1):
            m = int(P.shape[0])
            bounds = cp.searchsorted(order, cp.array([level, level + 1], dtype=cp.int32))
            p_lo, p_hi = (int(v) for v in bounds)
            if p_hi == p_lo:
                continue
            starts, cmasks, point_cell = _cells(M)
            ends = cp.ascontiguousarray(starts[1:])
            dense = cp.full(1 << d if use_dense else 1, -1, dtype=cp.int32)
            if use_dense:
                dense[cmasks.astype(cp.int64)] = cp.arange(cmasks.size, dtype=cp.int32)
            tmap = cp.arange(p_lo, p_hi, dtype=cp.int32)
            dead = cp.zeros(m, dtype=cp.uint8)
            k["skyalign"](_grid(p_hi - p_lo), (_BLOCK,),
                          (P, Q, M, point_cell, starts, ends, cmasks, dense, np.int32(use_dense),
                           np.int32(0), np.int32(0), np.int32(0), np.int32(0),
                           np.int64(p_hi - p_lo), tmap, dead,
                           _NULL if counters is None else counters))
            keep = cp.flatnonzero(dead == 0)
            levels.append((level, p_hi - p_lo, p_hi - p_lo - (m - int(keep.size))))
            P = P[keep]
            M, Q, order, idx = M[keep], Q[keep], order[keep], idx[keep]
        out.append(idx)
        stats["rounds"] = levels
    else:
        dummy_dense = cp.asarray(np.full(1, -1, dtype=np.int32))
        for level in range(d + 1):                              # line 11
            m = int(P.shape[0])
            if m == 0:
                break
            starts, cmasks, point_cell = _cells(M)              # line 12
            ends = starts[1:]
            corder = dp.take(cp, order, starts[:-1])
            bounds = cp.asarray(np.array([level, level + 1], dtype=np.int32))
            c_lo, c_hi = (int(v) for v in cp.asnumpy(dp.searchsorted(cp, corder, bounds)))
            tmap = None
            n_threads = m
            if variant == "padded":     # each cell padded to whole warps
                nc = int(cmasks.size)
                psizes = cp.empty(nc, dtype=cp.int64)
                k["padded_sizes"](_grid(nc), (_BLOCK,), (starts, np.int64(nc), psizes))
                pstart = dp.scan(cp, psizes, cp.int64, inclusive=False)
                n_threads = int(pstart[-1]) + int(psizes[-1])
                tmap = cp.empty(n_threads, dtype=cp.int32)
                dp.fill(cp, tmap, -1)
                k["padded_map"](_grid(m), (_BLOCK,), (point_cell, starts, pstart, np.int64(m), tmap))
            dead = cp.zeros(m, dtype=cp.uint8)
            k["skyalign"](_grid(n_threads), (_BLOCK,),
                          (P, Q, M, point_cell, starts, ends, cmasks, dummy_dense, np.int32(0),
                           np.int32(1), np.int32(level), np.int32(c_lo), np.int32(c_hi),
                           np.int64(n_threads), _NULL if tmap is None else tmap, dead,
                           _NULL if counters is None else counters))
            done = cp.empty(m, dtype=cp.int32)
            rest = cp.empty(m, dtype=cp.int32)
            k["split_level"](_grid(m), (_BLOCK,), (dead, order, np.int64(m), np.int32(level),
                                                   done, rest))
            done = dp.compact(cp, done, cp.int64)[0]            # line 26
            out.append(dp.take(cp, idx, done))
            rest = dp.compact(cp, rest, cp.int64)[0]            # line 25: repack
            levels.append((level, m, int(done.size)))
            P = dp.take(cp, P, rest)
            M, Q, order, idx = (dp.take(cp, a, rest) for a in (M, Q, order, idx))
        stats["rounds"] = levels
    sky = _sorted_union(cp, out)
    if eq is not None:
        sky = expand_groups(sky, cand, eq[0], distinct)
    _sync()
    t3 = time.perf_counter()
    times["skyline"] = t3 - t2
    times["total"] = t3 - t0
    if count:
        c = cp.asnumpy(counters)
        stats["mask_tests"] = int(c[0])
        stats["dominance_tests"] = int(c[1])
    else:
        stats["mask_tests"] = stats["dominance_tests"] = None
    return sky, stats


def _sorted_union(cp, parts):
    """The int64 arrays ``parts`` end to end, sorted (Thrust, in place)."""
    sky = cp.empty(sum(int(a.size) for a in parts), dtype=cp.int64)
    at = 0
    for a in parts:
        if a.size:
            dp.astype(cp, a, cp.int64, out=sky[at:at + a.size])
            at += int(a.size)
    sky.sort()
    return sky


def ggs_gpu(Xd, alpha: int = 2048, distinct: bool = False):
    """GGS-style sort-based skyline (Bøgh et al. 2013) on the GPU: presort by
    sum (ties lexicographic); settle the next alpha alive points among
    themselves, then filter every later point against the block's skyline.
    Runs on the first of each run of equal points (adjacent after the
    presort; the stable sort puts the lowest index first) and expands the
    result back to every copy, or to that first one with ``distinct``."""
    cp = _cupy()
    n, d = Xd.shape
    t0 = time.perf_counter()
    stats = {"algorithm": "ggs", "device": "gpu", "n": n, "d": d, "dominance_tests": None,
             "mask_tests": 0, "prefilter_survivors": None, "times": {}}
    if n == 0:
        return cp.zeros(0, cp.int64), stats
    k = skyline_kernels(d)
    keys = cp.concatenate([Xd.T[::-1], row_sums(cp, Xd)[None, :]], axis=0)
    order = cp.lexsort(keys)
    Xs = cp.ascontiguousarray(Xd[order])
    new = run_starts(Xs)
    if all_true(cp, new):
        new = None
    else:
        Xs = cp.ascontiguousarray(Xs[new])
        n = int(Xs.shape[0])
    alive = cp.ones(n, dtype=cp.uint8)
    res = []
    pos = 0
    while pos < n:
        live = cp.flatnonzero(alive[pos:pos + 64 * alpha])
        if live.size == 0:
            rest = cp.flatnonzero(alive[pos:])
            if rest.size == 0:
                break
            pos += int(rest[0])
            continue
        blk = (live[:alpha] + pos).astype(cp.int64)
        nb = int(blk.size)
        dom = cp.empty(nb, dtype=cp.uint8)
        k["ggs_block"](_grid(nb), (_BLOCK,), (Xs, blk, np.int32(nb), dom))
        sky_b = blk[dom == 0]
        res.append(sky_b)
        alive[blk] = 0
        nxt = int(blk[-1]) + 1
        ns = int(sky_b.size)
        if nxt < n and ns:
            k["ggs_filter"](_grid(n - nxt), (_BLOCK,),
                            (Xs, alive, np.int64(nxt), np.int64(n), sky_b, np.int32(ns)))
        pos = nxt
    pos = cp.concatenate(res) if res else cp.zeros(0, cp.int64)
    if new is not None:
        pos = expand_runs(pos, new, distinct)
    sky = cp.sort(order[pos])
    _sync()
    stats["times"]["total"] = time.perf_counter() - t0
    return sky, stats
