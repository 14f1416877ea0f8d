"""The epsilon join on an NVIDIA GPU (host side): CuPy plus CUDA C++ kernels.

Pipeline (one call of ``gpu_self_join`` / ``gpu_join``):

1. the points go to the device once; the grid of non-empty cells is built
   there (``gpu_grid.build_gpu_grids``), and each query cell's candidate
   ranges are found once (``gpu_grid.build_cell_ranges``);
2. **count**: a kernel counts |N_eps| of every query (GPUCALCGLOBAL, the
   shared-memory kernel, or the brute-force baseline; cell pattern full,
   UNICOMP or LID-UNICOMP; k threads per query; grid order, SORTBYWL or
   WORKQUEUE schedule);  ``output="counts"`` stops here;
3. **scan**: ``indptr`` is the exclusive scan of the counts, so each row's
   neighbours have a known place: batches are runs of rows that fit one
   result buffer (``plan.plan_row_batches``);
4. **fill**: per batch, the kernel writes each row's column ids contiguously
   (4 bytes per pair, no key/value sort), the rows are sorted on the GPU when
   ``sort=True``, and the batch is copied into pinned host buffers and from
   there, by parallel host threads, into the final host CSR array, while
   the GPU already computes the next batch (3 CUDA streams).

Nothing can overflow: the buffers are sized from exact counts, and the fill
kernel still checks every write against ``indptr`` and flags a batch that
would overflow or come up short; such a batch is recomputed once, then the
call fails loudly.

Default configuration (``kernel="auto"`` etc.): see ``choose_config``, whose
docstring gives the measurements behind the rule.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from .._core.memory import alloc_host
from .._core.transfer import parallel_copy, to_device
from .._core.validate import check_eps, check_precision, working_dtype
from . import gpu_grid
from .plan import batch_capacity, estimate_batches, plan_row_batches
from .result import NeighborTable, PairChunk

__all__ = ["gpu_self_join", "gpu_join", "gpu_self_join_chunks", "choose_config", "last_stats",
           "KERNELS", "SCHEDULES", "THREADS_PER_POINT"]

KERNELS = ("global", "shared", "bruteforce")
SCHEDULES = ("grid", "sortbywl", "workqueue")
THREADS_PER_POINT = (1, 2, 4, 8, 16, 32)
_N_STREAMS = 3
_SMALL_ROW = 64          # rows up to this length: one thread insertion-sorts the row
_SHARED_SORT_MAX = 32768  # rows up to this length: bitonic sort in shared memory

_STATS: dict = {}


def last_stats() -> dict:
    """Phase times (seconds) and sizes of the last GPU join call in this process."""
    return dict(_STATS)


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------

@dataclass
class Config:
    """A resolved kernel configuration."""

    kernel: str = "global"
    pattern: str = "full"
    kt: int = 1
    schedule: str = "grid"
    reason: str = ""


def choose_config(mean_work: float, work_cv: float, self_join: bool, *, index_dims: int = 2,
                  counts_only: bool = False, kernel="auto", pattern="auto",
                  threads_per_point="auto", schedule="auto") -> Config:
    """Resolve "auto" options into a configuration (the documented default rule).

    The rule, from the option sweep of ``skyjoin.bench.join_gpu`` on an H200
    (counts only, seconds end to end, 2M points; k = threads per query):

    =================  ======  ======  ======  ======  ======  ======  =========  =======
    case               k1      k8      k32     k1      k1      k8      LID k1 WQ  UNI k1
                       grid    grid    grid    SBWL    WQ      WQ
    =================  ======  ======  ======  ======  ======  ======  =========  =======
    Unif2D2M-0.5       0.012   0.013   0.013   0.013   0.013   0.013   0.017      0.015
    Unif2D2M-1.0       0.014   0.014   0.016   0.014   0.015   0.015   0.018      0.018
    Expo2D2M-0.0004    0.013   0.014   0.014   0.013   0.014   0.013   0.016      0.015
    Unif6D2M-8.0       0.048   0.050   0.067   0.052   0.052   0.057   0.048      0.039
    Expo6D2M-0.012     0.216   0.201   0.372   0.175   0.170   0.205   0.116      0.160
    =================  ======  ======  ======  ======  ======  ======  =========  =======

    (the shared-memory kernel: 0.013, 0.014, 0.013, 0.126, 0.339.)  Hence:

    * kernel: the global-memory kernel (GPUCALCGLOBAL); the shared-memory
      kernel ties in 2-D and loses in 6-D, where cells hold few points;
    * cell pattern: *full* for tables, because count-then-fill writes each
      row contiguously only with the full pattern (the UNICOMP patterns emit
      into two rows, need atomics and a row sort, and every batch must visit
      every query); for counts only with three or more indexed dimensions,
      LID-UNICOMP (one distance serves two points: 0.116 s against 0.170 s on
      Expo6D2M); in 2-D the full pattern is faster;
    * threads per query: in 2-D, k = 8 when the mean candidate count is at
      least 256 (ties with k = 1 on the measured cases; the papers find it
      helps dense 2-D data), else 1; with three or more indexed dimensions
      k = 1 (0.170 s against 0.205 s on Expo6D2M with the work queue);
    * schedule: WORKQUEUE when the per-query work varies a lot (coefficient
      of variation above 1: Expo6D2M 0.170 s against 0.216 s in grid order),
      else the grid order, which keeps the queries of one cell in one warp.

    Tables (count-then-fill) follow another rule, because the fill kernel
    writes every pair: k = 8 whenever the mean candidate count is at least
    256, in any dimension, and the grid order.  On the H200, Expo6D2M to a
    sorted host table took 0.877 s with k = 8 in grid order and 1.59 s with
    the counts rule (k = 1, WORKQUEUE); Unif6D2M 0.089 s against 0.080 s.

    Parameters
    ----------
    mean_work : float
        Mean number of candidate points per query.
    work_cv : float
        Coefficient of variation of the per-query candidate counts.
    self_join : bool
    index_dims : int
        Number of dimensions the grid indexes.
    counts_only : bool
        Whether only the neighbour counts are wanted.
    kernel, pattern, threads_per_point, schedule
        The caller's choices; "auto" entries are resolved.

    Returns
    -------
    Config

    Raises
    ------
    ValueError
        For an unknown option value or an incompatible combination.

    Examples
    --------
    >>> choose_config(1800.0, 0.2, True).kt
    8
    >>> choose_config(300.0, 3.0, True, index_dims=6, counts_only=True).pattern
    'lid_unicomp'
    >>> c = choose_config(900.0, 3.0, True, index_dims=6)      # a table
    >>> (c.pattern, c.kt, c.schedule)
    ('full', 8, 'grid')
    """
    cfg = Config()
    why = []
    if isinstance(pattern, str):
        pattern = pattern.replace("-", "_")
    if kernel == "auto":
        cfg.kernel = "global"
    elif kernel in KERNELS:
        cfg.kernel = kernel
    else:
        raise ValueError(f"kernel must be 'auto' or one of {KERNELS}, got {kernel!r}")
    if pattern == "auto":
        lid = counts_only and self_join and index_dims >= 3 and cfg.kernel == "global"
        cfg.pattern = "lid_unicomp" if lid else "full"
        why.append(f"pattern={cfg.pattern}")
    elif pattern in gpu_grid.PATTERNS:
        cfg.pattern = pattern
    else:
        raise ValueError(f"pattern must be 'auto' or one of {tuple(gpu_grid.PATTERNS)}, got {pattern!r}")
    if cfg.pattern != "full" and not self_join:
        raise ValueError(f"pattern={cfg.pattern!r} needs a self-join (one distance gives two pairs)")
    if threads_per_point == "auto":
        cfg.kt = 8 if (mean_work >= 256 and (index_dims <= 2 or not counts_only)) else 1
        why.append(f"k={cfg.kt} (mean candidates {mean_work:.0f}, {index_dims} indexed dims)")
    else:
        if threads_per_point not in THREADS_PER_POINT:
            raise ValueError(f"threads_per_point must be 'auto' or one of {THREADS_PER_POINT}, "
                             f"got {threads_per_point!r}")
        cfg.kt = int(threads_per_point)
    if schedule == "auto":
        cfg.schedule = "workqueue" if (work_cv > 1.0 and counts_only) else "grid"
        why.append(f"schedule={cfg.schedule} (work cv {work_cv:.2f})")
    elif schedule in SCHEDULES:
        cfg.schedule = schedule
    else:
        raise ValueError(f"schedule must be 'auto' or one of {SCHEDULES}, got {schedule!r}")
    if cfg.kernel in ("shared", "bruteforce"):
        if cfg.kernel == "shared":
            if pattern not in ("auto", "full") or threads_per_point not in ("auto", 1) \
                    or schedule not in ("auto", "grid"):
                raise ValueError("kernel='shared' supports pattern='full', threads_per_point=1 "
                                 "and schedule='grid' only")
            cfg.kt, cfg.schedule = 1, "grid"
        if cfg.kernel == "bruteforce" and pattern not in ("auto", "full"):
            raise ValueError("kernel='bruteforce' compares every pair: pattern must be 'full'")
        cfg.pattern = "full"
    cfg.reason = "; ".join(why)
    return cfg


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

def _eps2(eps: float, dtype) -> np.generic:
    """eps squared in the working precision (float32: eps cast first, squared in float32)."""
    e = np.dtype(dtype).type(eps)
    return np.dtype(dtype).type(e * e)


# ---------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------

_T_NAME = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}


class _Engine:
    """State of one join on the device: grids, ranges, configuration, kernels."""

    def __init__(self, cp, R, S, eps, precision, index_dims, include_self, options, stats,
                 counts_only=False):
        self.cp = cp
        self.stats = stats
        self.column_ids = None
        self.dtype = working_dtype(precision)
        self.precision = precision
        self.self_join = R is None
        self.include_self = bool(include_self) and self.self_join
        t0 = time.perf_counter()
        Sd = to_device(cp, S, "X" if R is None else "S", self.dtype)
        Rd = None if R is None else to_device(cp, R, "R", self.dtype)
        if Rd is not None and Rd.shape[1] != Sd.shape[1]:
            raise ValueError(f"R and S must have the same number of columns, got {Rd.shape[1]} and {Sd.shape[1]}")
        self.d = int(Sd.shape[1])
        self.eps2 = _eps2(eps, self.dtype)
        cp.cuda.Device().synchronize()
        stats["h2d_s"] = time.perf_counter() - t0
        self.n_rows = int(Sd.shape[0] if Rd is None else Rd.shape[0])
        self.n_cols = int(Sd.shape[0])
        self.empty = self.n_rows == 0 or self.n_cols == 0
        if self.empty:
            return
        t0 = time.perf_counter()
        self.qgrid, self.dgrid = gpu_grid.build_gpu_grids(Rd, Sd, eps, precision, index_dims)
        del Sd, Rd
        cp.cuda.Device().synchronize()
        stats["grid_cells_s"] = time.perf_counter() - t0
        kernel = options.get("kernel", "auto")
        pattern = options.get("pattern", "auto")
        if isinstance(pattern, str):
            pattern = pattern.replace("-", "_")
        if kernel == "bruteforce":
            self.rptr, self.ranges = gpu_grid.bruteforce_ranges(self.qgrid, self.dgrid)
            range_pattern = "full"
        else:
            range_pattern = "unicomp" if pattern == "unicomp" else "full"
            self.rptr, self.ranges = gpu_grid.build_cell_ranges(self.qgrid, self.dgrid, range_pattern)
        # work per query cell = number of candidate points (SORTBYWL's workload)
        lens = (self.ranges[:, 1] - self.ranges[:, 0]).astype(cp.int64)
        cs = cp.zeros(lens.size + 1, dtype=cp.int64)
        if lens.size:
            cp.cumsum(lens, out=cs[1:])
        self.cell_work = cs[self.rptr[1:]] - cs[self.rptr[:-1]]
        q_work = self.cell_work[self.qgrid.point_cell]
        mean = float(q_work.mean())
        cv = float(q_work.std()) / mean if mean > 0 else 0.0
        cp.cuda.Device().synchronize()
        stats["grid_s"] = time.perf_counter() - t0
        stats["n_cells"] = self.dgrid.n_cells
        stats["index_dims"] = self.dgrid.k
        stats["n_ranges"] = int(self.ranges.shape[0])
        stats["candidates"] = int((self.cell_work * cp.diff(self.qgrid.cell_start)).sum())
        self.cfg = choose_config(mean, cv, self.self_join, index_dims=self.dgrid.k,
                                 counts_only=counts_only, kernel=kernel, pattern=pattern,
                                 threads_per_point=options.get("threads_per_point", "auto"),
                                 schedule=options.get("schedule", "auto"))
        if self.cfg.pattern == "unicomp" and range_pattern != "unicomp":
            self.rptr, self.ranges = gpu_grid.build_cell_ranges(self.qgrid, self.dgrid, "unicomp")
        stats["config"] = (f"{self.cfg.kernel}/{self.cfg.pattern}/k={self.cfg.kt}/{self.cfg.schedule}")
        self._prepare_kernels()
        nq = self.qgrid.n_points
        # position of each original row in the query grid
        self.inv_order = cp.empty(nq, dtype=cp.int32)
        self.inv_order[self.qgrid.order] = cp.arange(nq, dtype=cp.int32)
        if self.cfg.schedule != "grid":
            w = self.cell_work[self.qgrid.point_cell]
            self.all_queries = cp.argsort(-w).astype(cp.int32)      # most work first (SORTBYWL)
        else:
            self.all_queries = cp.arange(nq, dtype=cp.int32)

    # -- kernels ---------------------------------------------------------
    def _prepare_kernels(self):
        """Compile (or fetch from the cache) the kernels this configuration needs."""
        D, T = self.d, _T_NAME[self.dtype]
        pat = gpu_grid.PATTERNS[self.cfg.pattern]
        wq = "true" if self.cfg.schedule == "workqueue" else "false"
        if self.cfg.kernel == "shared":
            names = (f"gpucalc_shared<{D},{T},false>", f"gpucalc_shared<{D},{T},true>")
        else:
            names = tuple(f"gpucalc_global<{D},{T},{pat},{self.cfg.kt},{fill},{wq}>"
                          for fill in ("false", "true"))
        mod = gpu_grid.compile_module(names)
        self.k_count = mod.get_function(names[0])
        self.k_fill = mod.get_function(names[1])
        smod = gpu_grid.compile_module(("sort_rows_small", "sort_rows_bitonic"))
        self.k_sort_small = smod.get_function("sort_rows_small")
        self.k_sort_bitonic = smod.get_function("sort_rows_bitonic")
        dev = self.cp.cuda.Device()
        self.n_sm = int(dev.attributes["MultiProcessorCount"])
        self.max_threads_sm = int(dev.attributes["MaxThreadsPerMultiProcessor"])

    def _launch(self, fill: bool, qlist, counts, indptr, out_base, out, cursor, row_lo, row_hi,
                overflow):
        """Run the count or fill kernel over the queries in qlist."""
        cp = self.cp
        nq = int(qlist.size)
        if nq == 0:
            return
        q, d = self.qgrid, self.dgrid
        dummy64 = indptr if indptr is not None else cp.zeros(1, dtype=cp.int64)
        dummy32 = cp.zeros(1, dtype=cp.int32)
        counts = counts if counts is not None else dummy32
        out = out if out is not None else dummy32
        cursor = cursor if cursor is not None else dummy32
        overflow = overflow if overflow is not None else dummy32
        sj = np.int32(1 if self.self_join else 0)
        isf = np.int32(1 if self.include_self else 0)
        fn = self.k_fill if fill else self.k_count
        if self.cfg.kernel == "shared":
            # segments of consecutive queries of one cell (qlist is in grid order)
            qc = q.point_cell[qlist]
            flag = cp.empty(nq, dtype=cp.bool_)
            flag[0] = True
            if nq > 1:
                cp.not_equal(qc[1:], qc[:-1], out=flag[1:])
            seg = cp.flatnonzero(flag).astype(cp.int32)
            nseg = int(seg.size)
            seg_start = cp.empty(nseg + 1, dtype=cp.int32)
            seg_start[:-1] = seg
            seg_start[-1] = nq
            threads = 128 if self.d <= 24 else 32
            smem = threads * self.d * self.dtype.itemsize
            fn((nseg,), (threads,), (q.points, q.point_cell, q.order, d.points, d.order,
                                     self.rptr, self.ranges, qlist, seg_start, np.int32(nseg),
                                     self.eps2, sj, isf, counts, dummy64, np.int64(out_base), out,
                                     overflow), shared_mem=smem)
            return
        kt = self.cfg.kt
        threads = 256
        work_counter = cp.zeros(1, dtype=cp.int32)   # one per launch: streams run concurrently
        if self.cfg.schedule == "workqueue":
            blocks = self.n_sm * max(1, self.max_threads_sm // threads)
        else:
            blocks = (nq * kt + threads - 1) // threads
        fn((blocks,), (threads,), (q.points, q.point_cell, q.order, d.points, d.order,
                                   d.cell_start, self.rptr, self.ranges, qlist, np.int32(nq),
                                   self.eps2, sj, isf, counts, dummy64, np.int64(out_base), out,
                                   cursor, np.int32(row_lo), np.int32(row_hi),
                                   work_counter, overflow))

    # -- passes ------------------------------------------------------------
    def count(self, rows: int | None = None):
        """Neighbour count of the rows [0, rows) (default all; int32 device array,
        original row order); with the full pattern only their queries run."""
        cp = self.cp
        counts = cp.zeros(self.n_rows, dtype=cp.int32)
        m = self.n_rows if rows is None else int(rows)
        self._launch(False, self.batch_queries(0, m), counts, None, 0, None, None, 0, m, None)
        return counts[:m]

    def batch_queries(self, r0: int, r1: int):
        """Queries (grid positions) of the rows [r0, r1), in the schedule's order."""
        cp = self.cp
        if self.cfg.pattern != "full":
            return self.all_queries             # UNICOMP: every query may emit into these rows
        if r0 == 0 and r1 == self.n_rows:
            return self.all_queries
        pos = self.inv_order[r0:r1]
        if self.cfg.schedule == "grid":
            return cp.sort(pos)
        w = self.cell_work[self.qgrid.point_cell[pos]]
        return pos[cp.argsort(-w)]

    def fill(self, r0, r1, counts, indptr, out, out_base, cursor, overflow, sort_plan, indptr_h):
        """Write the rows [r0, r1) into out (at indptr[row] - out_base), sorted if a plan is given."""
        cp = self.cp
        qlist = self.batch_queries(r0, r1)
        if self.cfg.pattern != "full":
            cursor[r0:r1] = 0
        self._launch(True, qlist, counts, indptr, out_base, out, cursor, r0, r1, overflow)
        if self.cfg.pattern != "full":
            # a row that came up short is flagged too: no pair may be lost
            bad = cp.any(cursor[r0:r1] != counts[r0:r1])
            cp.bitwise_or(overflow, bad.astype(cp.int32), out=overflow)
        if self.column_ids is not None:
            # columns renamed before the sort, so rows come out sorted by the new ids
            seg = out[int(indptr_h[r0]) - out_base:int(indptr_h[r1]) - out_base]
            cp.take(self.column_ids, seg, out=seg)
        if sort_plan is not None:
            self.sort_rows(r0, r1, sort_plan, indptr, indptr_h, out, out_base)

    _SORT_CLASSES = ((1, _SMALL_ROW, 0), (_SMALL_ROW, 2048, 256), (2048, 8192, 512),
                     (8192, _SHARED_SORT_MAX, 1024), (_SHARED_SORT_MAX, None, -1))

    def sort_plan(self, indptr, batches) -> list:
        """Rows of each length class, found on the device, and where each batch's
        rows start in each class's list.

        Classes: insertion sort by one thread (up to 64 entries), bitonic sort
        in shared memory (up to 2048, 8192, 32768 entries), and a global sort
        of (row, column) keys for longer rows (whose few row ids also come to
        the host).  Knowing the classes ahead keeps the batch pipeline free of
        host synchronisation; finding them on the device spares a host pass
        over every row (0.1 s for 10M rows).
        """
        cp = self.cp
        lens = cp.diff(indptr)
        edges = sorted({r for b in batches for r in b})
        edges_d = cp.asarray(np.asarray(edges, dtype=np.int32))
        plan = []
        for lo_len, hi_len, threads in self._SORT_CLASSES:
            sel = lens > lo_len if hi_len is None else (lens > lo_len) & (lens <= hi_len)
            rows_d = cp.flatnonzero(sel).astype(cp.int32)
            at = dict(zip(edges, cp.asnumpy(cp.searchsorted(rows_d, edges_d)).tolist()))
            rows_h = cp.asnumpy(rows_d) if hi_len is None else None
            plan.append((lo_len, hi_len, threads, rows_d, at, rows_h))
        return plan

    def sort_rows(self, r0, r1, plan, indptr, indptr_h, out, out_base):
        """Sort the columns within each row of [r0, r1) on the GPU (no host sync)."""
        for lo_len, hi_len, threads, rows_d, at, rows_h in plan:
            a, b = at[r0], at[r1]
            if a == b:
                continue
            sel = rows_d[a:b]
            m = b - a
            if hi_len is None:
                self._sort_big_rows(rows_h[a:b], sel, indptr, indptr_h, out, out_base)
            elif threads == 0:
                t = 128
                self.k_sort_small(((m + t - 1) // t,), (t,),
                                  (sel, np.int32(m), indptr, np.int64(out_base), out))
            else:
                smem = hi_len * 4
                if smem > 48 * 1024:
                    self.k_sort_bitonic.max_dynamic_shared_size_bytes = smem
                self.k_sort_bitonic((m,), (threads,),
                                    (sel, np.int32(m), indptr, np.int64(out_base), out),
                                    shared_mem=smem)

    def _sort_big_rows(self, big_h, big_d, indptr, indptr_h, out, out_base):
        """Rows longer than shared memory: a global sort of (row, column) keys, in groups."""
        cp = self.cp
        lens_h = indptr_h[big_h + 1] - indptr_h[big_h]
        cum_h = np.zeros(big_h.size + 1, dtype=np.int64)
        np.cumsum(lens_h, out=cum_h[1:])
        starts = indptr[big_d] - out_base
        step = 1 << 24
        g0 = 0
        while g0 < big_h.size:
            g1 = int(np.searchsorted(cum_h, cum_h[g0] + step, side="right")) - 1
            g1 = max(g1, g0 + 1)
            m = int(cum_h[g1] - cum_h[g0])
            cum_d = cp.empty(g1 - g0 + 1, dtype=cp.int64)
            cum_d[0] = 0
            cp.cumsum(indptr[big_d[g0:g1] + 1] - indptr[big_d[g0:g1]], out=cum_d[1:])
            idx = cp.arange(m, dtype=cp.int64)
            seg = cp.searchsorted(cum_d, idx, side="right") - 1
            src = starts[g0:g1][seg] + (idx - cum_d[seg])
            keys = (seg.astype(cp.int64) << 32) | out[src].astype(cp.int64)
            keys = cp.sort(keys)
            out[src] = (keys & 0xFFFFFFFF).astype(cp.int32)
            g0 = g1


# ---------------------------------------------------------------------------
# drivers
# ---------------------------------------------------------------------------

def _start(R, S, eps, precision, index_dims, include_self, options, counts_only=False):
    """Validate scalars, pick up CuPy, build the engine; returns (cp, engine, stats)."""
    from .._core.device import cupy as _cupy

    cp = _cupy()
    eps = check_eps(eps)
    precision = check_precision(precision)
    stats = {"precision": precision}
    _STATS.clear()
    _STATS.update(stats)
    t0 = time.perf_counter()
    eng = _Engine(cp, R, S, eps, precision, index_dims, include_self, options, stats,
                  counts_only=counts_only)
    stats["setup_s"] = time.perf_counter() - t0
    return cp, eng, stats


def _free_device_bytes(cp, device_memory_limit) -> int:
    """Bytes the result buffers may take on the device."""
    pool = cp.get_default_memory_pool()
    free, _total = cp.cuda.runtime.memGetInfo()
    avail = int((free + pool.free_bytes()) * 0.6)
    if device_memory_limit is not None:
        lim = int(device_memory_limit)
        if lim <= 0:
            raise ValueError(f"device_memory_limit must be > 0 bytes, got {device_memory_limit}")
        avail = min(avail, max(0, lim - pool.used_bytes()))
    return avail


def _report(timings, stats):
    """Publish the phase times: last_stats(), and the caller's timings dict if any."""
    _STATS.update(stats)
    if timings is not None:
        for k, v in stats.items():
            if k.endswith("_s"):
                timings[k[:-2]] = timings.get(k[:-2], 0.0) + v


@dataclass
class Counted:
    """A join whose rows are counted on the device and not yet filled
    (``count_rows``); ``fill_rows`` finishes it.

    Attributes
    ----------
    eng : _Engine
        Grids, ranges and kernels on the current device.
    counts : cupy.ndarray of int32 or None
        Neighbour count of each row [0, n_rows) (None when empty).
    n_rows, n_cols : int
        Shape of the table (columns in the renamed space with column_ids).
    device : int
        The device that holds the engine.
    """

    cp: object
    eng: object
    stats: dict
    counts: object
    n_rows: int
    n_cols: int
    device: int
    t_start: float


def count_rows(R, S, eps, *, include_self=False, precision="float64", index_dims=None,
               query_rows=None, column_ids=None, n_columns=None, counts_only=False,
               **options) -> Counted:
    """Build the engine on the current device and count the neighbours of the rows.

    ``query_rows`` (m) keeps only the rows [0, m); ``column_ids`` renames the
    columns (column j becomes ``column_ids[j]``, int32, before rows are
    sorted) in a column space of ``n_columns``: the distributed join's
    partitions use both to produce their owned rows in global ids.
    """
    t_start = time.perf_counter()
    cp, eng, stats = _start(R, S, eps, precision, index_dims, include_self, options,
                            counts_only=counts_only)
    n_rows, n_cols = eng.n_rows, eng.n_cols
    if query_rows is not None:
        if not 0 <= int(query_rows) <= n_rows:
            raise ValueError(f"query_rows must be in [0, {n_rows}], got {query_rows!r}")
        n_rows = int(query_rows)
    if column_ids is not None:
        if len(column_ids) != n_cols or n_columns is None or int(n_columns) > 2**31 - 1:
            raise ValueError("column_ids needs one int32 id per column and n_columns < 2**31")
        eng.column_ids = cp.asarray(column_ids, dtype=cp.int32)
        n_cols = int(n_columns)
    counts = None
    if not eng.empty:
        t0 = time.perf_counter()
        counts = eng.count(n_rows)
        stats["count_s"] = time.perf_counter() - t0
    return Counted(cp, eng, stats, counts, n_rows, n_cols, int(cp.cuda.Device().id), t_start)


def fill_rows(c: Counted, *, sort=True, on_device=False, batch_pairs=None,
              device_memory_limit=None, progress=None, timings=None, sink=None):
    """Fill the counted rows: a NeighborTable (host or device), or, with ``sink``,
    hand each batch to ``sink(r0, r1, chunk)`` and return None.

    ``sink`` receives the rows [r0, r1) as one host array (a pinned buffer,
    valid only during the call) laid out by the row counts; the distributed
    join copies the rows from there straight to their places in the global
    table.
    """
    cp, eng, stats, counts, n_rows, n_cols = c.cp, c.eng, c.stats, c.counts, c.n_rows, c.n_cols
    if eng.empty:
        _report(timings, stats)
        if sink is not None:
            return None
        xp = cp if on_device else np
        return NeighborTable(xp.zeros(n_rows + 1, dtype=xp.int64), xp.zeros(0, dtype=xp.int32),
                             (n_rows, n_cols), sorted=True)
    t0 = time.perf_counter()
    indptr = cp.zeros(n_rows + 1, dtype=cp.int64)
    cp.cumsum(counts, dtype=cp.int64, out=indptr[1:])
    indptr_h = cp.asnumpy(indptr)
    total = int(indptr_h[-1])
    longest = int(counts.max()) if n_rows else 0
    stats["scan_s"] = time.perf_counter() - t0
    stats["pairs"] = total
    bytes_per_pair = 4 * (_N_STREAMS if not on_device else 1)
    free = _free_device_bytes(cp, device_memory_limit)
    if on_device:
        if total * 4 > free:
            raise MemoryError(f"the result ({total} pairs, {4 * total} bytes) does not fit in the "
                              f"device memory allowed ({free} bytes); use on_device=False or "
                              f"self_join_chunks")
        free -= total * 4
    cap = batch_capacity(total, longest, batch_pairs, free, bytes_per_pair)
    batches = plan_row_batches(indptr_h, cap)
    stats["batches"] = len(batches)
    stats["batch_pairs"] = cap
    cursor = cp.zeros(n_rows, dtype=cp.int32) if eng.cfg.pattern != "full" else None
    t0 = time.perf_counter()
    if on_device:
        out = cp.empty(max(total, 1), dtype=cp.int32)
        overflow = cp.zeros(1, dtype=cp.int32)
        plan = eng.sort_plan(indptr, batches) if sort else None
        for b, (r0, r1) in enumerate(batches):
            eng.fill(r0, r1, counts, indptr, out, 0, cursor, overflow, plan, indptr_h)
            if int(overflow.get()[0]):
                overflow.fill(0)
                eng.fill(r0, r1, counts, indptr, out, 0, cursor, overflow, plan, indptr_h)
                if int(overflow.get()[0]):
                    raise RuntimeError(f"GPU join: batch of rows [{r0}, {r1}) overflowed twice")
            if progress is not None:
                progress(r1, n_rows)
        cp.cuda.Device().synchronize()
        stats["fill_s"] = time.perf_counter() - t0
        stats["total_s"] = time.perf_counter() - c.t_start
        _report(timings, stats)
        return NeighborTable(indptr, out[:total], (n_rows, n_cols), sorted=bool(sort))
    indices = _fill_to_host(cp, eng, batches, counts, indptr, indptr_h, cursor, cap, sort,
                            progress, stats, sink)
    stats["total_s"] = time.perf_counter() - c.t_start
    _report(timings, stats)
    if sink is not None:
        return None
    return NeighborTable(indptr_h, indices, (n_rows, n_cols), sorted=bool(sort))


def _run(R, S, eps, *, include_self=False, output="table", sort=True, precision="float64",
         index_dims=None, on_device=False, batch_pairs=None, device_memory_limit=None,
         progress=None, timings=None, query_rows=None, column_ids=None, n_columns=None,
         **options):
    """Shared implementation of gpu_self_join and gpu_join: count, then fill."""
    if output not in ("table", "counts"):
        raise ValueError(f"output must be 'table' or 'counts', got {output!r}")
    c = count_rows(R, S, eps, include_self=include_self, precision=precision,
                   index_dims=index_dims, query_rows=query_rows, column_ids=column_ids,
                   n_columns=n_columns, counts_only=(output == "counts"), **options)
    if output == "counts":
        cp = c.cp
        res = c.counts.astype(cp.int64) if c.counts is not None \
            else cp.zeros(c.n_rows, dtype=cp.int64)
        res = res if on_device else cp.asnumpy(res)
        c.stats["total_s"] = time.perf_counter() - c.t_start
        _report(timings, c.stats)
        return res
    return fill_rows(c, sort=sort, on_device=on_device, batch_pairs=batch_pairs,
                     device_memory_limit=device_memory_limit, progress=progress,
                     timings=timings)


def _fill_to_host(cp, eng, batches, counts, indptr, indptr_h, cursor, cap, sort, progress, stats,
                  sink=None):
    """Fill every batch on the GPU and assemble the host CSR column array.

    Three streams, each with a device result buffer and a pinned host staging
    buffer: while the host threads copy batch b-2 from pinned memory into the
    final array, the GPU fills and sorts batch b-1 and copies it down.  With
    ``sink``, each batch goes to ``sink(r0, r1, pinned_chunk)`` instead, and
    nothing is allocated here (returns None).
    """
    import cupyx

    total = int(indptr_h[-1])
    n_rows = len(indptr_h) - 1
    t0 = time.perf_counter()
    final = alloc_host(total, np.int32) if sink is None else None
    stats["host_alloc_s"] = time.perf_counter() - t0
    if total == 0:
        return final
    t_fill = time.perf_counter()
    nslots = min(_N_STREAMS, len(batches))
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(nslots)]
    dev_out = [cp.empty(cap, dtype=cp.int32) for _ in range(nslots)]
    pinned = [cupyx.empty_pinned(cap, dtype=np.int32) for _ in range(nslots)]
    flags = [cp.zeros(1, dtype=cp.int32) for _ in range(nslots)]
    flags_h = [cupyx.empty_pinned(1, dtype=np.int32) for _ in range(nslots)]
    cursors = [cursor] + [cp.zeros_like(cursor) for _ in range(nslots - 1)] if cursor is not None \
        else [None] * nslots
    plan = eng.sort_plan(indptr, batches) if sort else None
    cp.cuda.Device().synchronize()      # counts / indptr ready before other streams read them
    inflight: deque = deque()
    copy_s = 0.0
    wait_s = 0.0

    def launch(b, slot):
        r0, r1 = batches[b]
        base = int(indptr_h[r0])
        m = int(indptr_h[r1]) - base
        with streams[slot]:
            flags[slot].fill(0)
            eng.fill(r0, r1, counts, indptr, dev_out[slot], base, cursors[slot], flags[slot], plan,
                     indptr_h)
            if m:
                dev_out[slot][:m].get(stream=streams[slot], out=pinned[slot][:m], blocking=False)
            flags[slot].get(stream=streams[slot], out=flags_h[slot], blocking=False)
            ev = streams[slot].record()
        inflight.append((b, slot, ev, base, m))

    def drain():
        nonlocal copy_s, wait_s
        b, slot, ev, base, m = inflight.popleft()
        tw = time.perf_counter()
        ev.synchronize()
        wait_s += time.perf_counter() - tw
        if int(flags_h[slot][0]):
            # recompute the batch once, synchronously; then fail loudly
            r0, r1 = batches[b]
            with streams[slot]:
                flags[slot].fill(0)
                eng.fill(r0, r1, counts, indptr, dev_out[slot], base, cursors[slot], flags[slot],
                         plan, indptr_h)
                streams[slot].synchronize()
                if int(flags[slot].get()[0]):
                    raise RuntimeError(f"GPU join: batch of rows [{r0}, {r1}) overflowed twice")
                if m:
                    dev_out[slot][:m].get(stream=streams[slot], out=pinned[slot][:m])
                streams[slot].synchronize()
        tc = time.perf_counter()
        if m and sink is not None:
            sink(batches[b][0], batches[b][1], pinned[slot][:m])
        elif m:
            parallel_copy(final[base:base + m], pinned[slot][:m])
        copy_s += time.perf_counter() - tc
        if progress is not None:
            progress(batches[b][1], n_rows)

    for b in range(len(batches)):
        while len(inflight) >= max(1, nslots - 1):
            drain()
        launch(b, b % nslots)
    while inflight:
        drain()
    stats["fill_pipeline_s"] = time.perf_counter() - t_fill
    stats["host_copy_s"] = copy_s
    stats["gpu_wait_s"] = wait_s
    return final


# ---------------------------------------------------------------------------
# public entry points (called by skyjoin.join.api for device="gpu")
# ---------------------------------------------------------------------------

def gpu_self_join(X, eps, *, include_self=False, output="table", sort=True, precision="float64",
                  index_dims=None, on_device=False, pattern="auto", kernel="auto",
                  threads_per_point="auto", schedule="auto", batch_pairs=None,
                  device_memory_limit=None, progress=None, timings=None, query_rows=None,
                  column_ids=None, n_columns=None):
    """Epsilon self-join of X on the GPU.

    Parameters
    ----------
    X : array_like or cupy.ndarray, shape (n, d)
        The points (NumPy input is expected validated by the API; CuPy input
        is checked here, on the device).
    eps : float
        Pairs (i, j) with sum_k (x_ik - x_jk)^2 <= eps^2 in the working precision.
    include_self : bool
        Whether (i, i) pairs are reported.
    output : {"table", "counts"}
        A NeighborTable, or the int64 neighbour count of every point.
    sort : bool
        Columns ascending within each row (sorted on the GPU).
    precision : {"float64", "float32"}
    index_dims : int, optional
        Leading dimensions indexed by the grid (default ``min(d, 6)``).
    on_device : bool
        Keep the result on the GPU (CuPy arrays).
    pattern : {"auto", "full", "unicomp", "lid_unicomp"}
        Cell access pattern (Gowanlock & Karsin 2018 §V-B; Gallet & Gowanlock 2019 §III-B).
    kernel : {"auto", "global", "shared", "bruteforce"}
        GPUCALCGLOBAL, the shared-memory kernel (HYBRID-DBSCAN §4.2), or the
        brute-force baseline.
    threads_per_point : {"auto", 1, 2, 4, 8, 16, 32}
        Threads per query point (Gallet & Gowanlock 2019 §III-A).
    schedule : {"auto", "grid", "sortbywl", "workqueue"}
        Query order: grid order, SORTBYWL, or WORKQUEUE (§III-C, §III-D).
    batch_pairs : int, optional
        Pairs per result batch (default 2^27, bounded by device memory).
    device_memory_limit : int, optional
        Bytes of device memory the result buffers may use.
    progress : callable, optional
        Called as ``progress(rows_done, n_rows)`` after each batch.
    timings : dict, optional
        Filled with the seconds spent in each phase (h2d, grid, count,
        fill_pipeline, host_copy, total, ...).
    query_rows : int, optional
        Compute only the rows of the first ``query_rows`` points (their
        neighbours are still found among all points).
    column_ids : array_like of int, optional
        New name of each column (point), applied on the GPU before the rows
        are sorted; with ``n_columns``, the size of that column space
        (below 2**31).  A partition of the distributed join passes its
        points' global ids.

    Returns
    -------
    NeighborTable or ndarray of int64

    Raises
    ------
    ValueError, TypeError
        For bad input or incompatible options.
    MemoryError
        If a single row (or, with ``on_device=True``, the whole result) does
        not fit in the allowed device memory.

    Examples
    --------
    >>> import numpy as np
    >>> nt = gpu_self_join(np.array([[0.0], [1.0], [3.0]]), 1.0)  # doctest: +SKIP
    >>> nt.pairs().tolist()                                         # doctest: +SKIP
    [[0, 1], [1, 0]]
    """
    return _run(None, X, eps, include_self=include_self, output=output, sort=sort,
                precision=precision, index_dims=index_dims, on_device=on_device,
                batch_pairs=batch_pairs, device_memory_limit=device_memory_limit,
                progress=progress, timings=timings, pattern=pattern, kernel=kernel,
                threads_per_point=threads_per_point, schedule=schedule, query_rows=query_rows,
                column_ids=column_ids, n_columns=n_columns)


def gpu_join(R, S, eps, *, output="table", sort=True, precision="float64", index_dims=None,
             on_device=False, kernel="auto", threads_per_point="auto", schedule="auto",
             batch_pairs=None, device_memory_limit=None, progress=None, timings=None):
    """Epsilon join of R with S on the GPU: rows index R, columns index S.

    Parameters are those of ``gpu_self_join`` (no ``include_self``; the
    UNICOMP patterns need a self-join and are not offered).

    Returns
    -------
    NeighborTable of shape (len(R), len(S)), or int64 counts per row of R.

    Examples
    --------
    >>> import numpy as np
    >>> gpu_join(np.zeros((1, 2)), np.ones((2, 2)), 1.5).n_pairs   # doctest: +SKIP
    2
    """
    return _run(R, S, eps, output=output, sort=sort, precision=precision, index_dims=index_dims,
                on_device=on_device, batch_pairs=batch_pairs,
                device_memory_limit=device_memory_limit, progress=progress, timings=timings,
                kernel=kernel, threads_per_point=threads_per_point, schedule=schedule,
                pattern="full")


def gpu_self_join_chunks(X, eps, *, include_self=False, sort=True, max_pairs=1 << 26,
                         precision="float64", index_dims=None, **options):
    """Yield the self-join in bounded pieces (``PairChunk``), row by row.

    Each chunk holds every pair of a run of consecutive rows, at most
    ``max_pairs`` pairs unless a single row has more (a row is never split).

    Parameters
    ----------
    X, eps, include_self, sort, precision, index_dims
        As for ``gpu_self_join``.
    max_pairs : int
        Bound on the pairs of one chunk.
    **options
        pattern, kernel, threads_per_point, schedule, device_memory_limit.

    Yields
    ------
    PairChunk

    Examples
    --------
    >>> import numpy as np
    >>> sum(len(c) for c in gpu_self_join_chunks(np.zeros((3, 1)), 1.0))  # doctest: +SKIP
    6
    """
    if int(max_pairs) < 1:
        raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
    device_memory_limit = options.pop("device_memory_limit", None)
    options.pop("timings", None)
    options.pop("on_device", None)
    options.pop("output", None)
    options.pop("progress", None)
    options.pop("batch_pairs", None)
    cp, eng, stats = _start(None, X, eps, precision, index_dims, include_self, options)
    n = eng.n_rows
    if eng.empty:
        return
    counts = eng.count()
    indptr = cp.zeros(n + 1, dtype=cp.int64)
    cp.cumsum(counts, dtype=cp.int64, out=indptr[1:])
    indptr_h = cp.asnumpy(indptr)
    longest = int(counts.max())
    free = _free_device_bytes(cp, device_memory_limit)
    cap = batch_capacity(int(indptr_h[-1]), longest, max(int(max_pairs), longest), free,
                         4)
    cursor = cp.zeros(n, dtype=cp.int32) if eng.cfg.pattern != "full" else None
    out = cp.empty(max(cap, 1), dtype=cp.int32)
    overflow = cp.zeros(1, dtype=cp.int32)
    batches = plan_row_batches(indptr_h, cap)
    plan = eng.sort_plan(indptr, batches) if sort else None
    for r0, r1 in batches:
        base = int(indptr_h[r0])
        m = int(indptr_h[r1]) - base
        overflow.fill(0)
        eng.fill(r0, r1, counts, indptr, out, base, cursor, overflow, plan, indptr_h)
        if int(overflow.get()[0]):
            raise RuntimeError(f"GPU join: batch of rows [{r0}, {r1}) overflowed")
        j = cp.asnumpy(out[:m]).astype(np.int64)
        i = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(indptr_h[r0:r1 + 1]))
        yield PairChunk(i=i, j=j, row_start=r0, row_stop=r1)


def sampled_estimate(X, eps, *, fraction=0.01, buffer_pairs=10**8, gamma=0.05,
                     precision="float64", index_dims=None, include_self=True):
    """The papers' result-size estimate: count a strided sample of the queries.

    Counts the neighbours of every ``1/fraction``-th query point (in grid
    order, so the sample is spread over the data) and applies Eq. 1 of
    HYBRID-DBSCAN §6.

    Returns
    -------
    dict with ``estimate`` (a_b), ``batches`` (n_b), ``sample_pairs`` (e_b)
    """
    cp, eng, stats = _start(None, X, eps, precision, index_dims, include_self, {})
    if eng.empty:
        return {"estimate": 0, "batches": 1, "sample_pairs": 0}
    step = max(1, int(round(1.0 / fraction)))
    sample = cp.arange(0, eng.qgrid.n_points, step, dtype=cp.int32)
    counts = cp.zeros(eng.n_rows, dtype=cp.int32)
    eng._launch(False, sample, counts, None, 0, None, None, 0, eng.n_rows, None)
    e_b = int(counts.sum(dtype=cp.int64))
    frac = sample.size / eng.qgrid.n_points
    a_b, n_b = estimate_batches(e_b, frac, buffer_pairs, gamma)
    return {"estimate": a_b, "batches": n_b, "sample_pairs": e_b}
