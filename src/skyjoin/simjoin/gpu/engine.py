"""The GPU join engine: grids, candidate ranges, kernels and row sorts on one device.

One ``GpuEngine`` per join call: the points go to the device once, the grid
of non-empty cells is built there (``skyjoin.index.grid_gpu``), and each
query cell's candidate ranges are found once.  Its passes:

* **count**: a kernel counts |N_eps| of every query: GPUCALCGLOBAL
  (Gowanlock & Karsin 2018, §IV-E), the shared-memory kernel
  (HYBRID-DBSCAN §4.2) or the brute-force baseline; cell pattern full,
  UNICOMP (§V-B) or LID-UNICOMP (Gallet & Gowanlock 2019, §III-B); k
  threads per query (§III-A); grid order, SORTBYWL or WORKQUEUE schedule
  (§III-C, §III-D);
* **fill**: per batch of rows, the kernel writes each row's column ids
  contiguously at ``indptr[row]`` (4 bytes per pair), then the rows are
  sorted on the GPU (``sort_rows``).

The engine executes the plan it is given (``configure``); the rule that
resolves it is ``skyjoin.simjoin.plan.plan_gpu`` (``choose_config``).  Cost per
pass: O(candidates x d) distance work on the device.
"""

from __future__ import annotations

import time

import numpy as np

from ..._core import device_prims as dp
from ..._core.device_kernels import launch, load
from ..._core.device_reduce import flag_differ, weighted_span_sum, work_sums
from ..._core.transfer import to_device
from ..._core.validate import working_dtype
from ...index import grid_gpu

__all__ = ["GpuEngine"]

_SMALL_ROW = 64          # rows up to this length: one thread insertion-sorts the row
_SHARED_SORT_MAX = 32768  # rows up to this length: bitonic sort in shared memory


def _eps2(eps: float, dtype) -> np.generic:
    """eps squared in the working precision (float32: eps cast first, squared in float32)."""
    e = np.dtype(dtype).type(eps)
    return np.dtype(dtype).type(e * e)


_T_NAME = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}


class GpuEngine:
    """State of one join on the device: grids, ranges, configuration, kernels.

    Built in two steps: the constructor copies the points to the device,
    builds the grids and the candidate ranges, and measures the work per
    query (``mean_work``, ``work_cv``: the statistics of the configuration
    rule); ``configure`` then takes the plan resolved by ``plan.plan_gpu``
    and prepares its kernels.  ``request`` is the call's ``JoinPlan`` as
    built at the public boundary (``plan.request``).
    """

    def __init__(self, cp, R, S, eps, request, stats):
        self.cp = cp
        self.stats = stats
        self.column_ids = None
        precision = request.precision
        self.dtype = working_dtype(precision)
        self.precision = precision
        self.self_join = R is None
        self.include_self = bool(request.include_self) and self.self_join
        t0 = time.perf_counter()
        load(cp, "join")                        # the join's device kernels, one compile
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
        self.qgrid, self.dgrid = grid_gpu.build_gpu_grids(Rd, Sd, eps, precision,
                                                           request.index_dims)
        del Sd, Rd
        cp.cuda.Device().synchronize()
        stats["grid_cells_s"] = time.perf_counter() - t0
        kernel, pattern = request.kernel, request.pattern
        if kernel == "bruteforce":
            self.rptr, self.ranges = grid_gpu.bruteforce_ranges(self.qgrid, self.dgrid)
            range_pattern = "full"
        else:
            range_pattern = "unicomp" if pattern == "unicomp" else "full"
            self.rptr, self.ranges = grid_gpu.build_cell_ranges(self.qgrid, self.dgrid, range_pattern)
        # work per query cell = number of candidate points (SORTBYWL's workload)
        nqc = self.qgrid.n_cells
        self.cell_work = cp.empty(nqc, dtype=cp.int64)
        launch(cp, "range_lengths", nqc, (self.rptr, self.ranges, np.int64(nqc), self.cell_work))
        mean, sd = work_sums(cp, self.cell_work, self.qgrid.point_cell)
        cv = sd / mean if mean > 0 else 0.0
        cp.cuda.Device().synchronize()
        stats["grid_s"] = time.perf_counter() - t0
        stats["n_cells"] = self.dgrid.n_cells
        stats["index_dims"] = self.dgrid.k
        stats["n_ranges"] = int(self.ranges.shape[0])
        stats["candidates"] = weighted_span_sum(cp, self.cell_work, self.qgrid.cell_start)
        self.mean_work, self.work_cv = mean, cv
        self.range_pattern = range_pattern
        self.cfg = None

    def configure(self, cfg):
        """Take the resolved plan ``cfg`` (``plan.plan_gpu``'s): the ranges
        of its pattern, its kernels and its query order."""
        cp, stats = self.cp, self.stats
        self.cfg = cfg
        if self.cfg.pattern == "unicomp" and self.range_pattern != "unicomp":
            self.rptr, self.ranges = grid_gpu.build_cell_ranges(self.qgrid, self.dgrid, "unicomp")
        stats["config"] = (f"{cfg.kernel}/{cfg.pattern}/k={cfg.threads_per_point}/"
                           f"{cfg.schedule}")
        self._prepare_kernels()
        nq = self.qgrid.n_points
        # position of each original row in the query grid
        self.inv_order = dp.inverse_permutation(cp, self.qgrid.order, cp.int32)
        if self.cfg.schedule != "grid":
            self.all_queries = self._most_work_first(self.qgrid.point_cell)    # SORTBYWL
        else:
            self.all_queries = dp.arange(cp, nq, cp.int32)

    def _most_work_first(self, pos):
        """The grid positions ``pos`` (int32) ordered by decreasing work of
        their cell, ties in their order (a stable sort): SORTBYWL's order of
        the queries.  Returns int32 grid positions when ``pos`` is the
        whole ``point_cell`` (then positions are 0 .. n-1), else ``pos``
        reordered.  O(n) plus the radix sort."""
        cp = self.cp
        cells = pos if pos is self.qgrid.point_cell else dp.take(cp, self.qgrid.point_cell, pos)
        w = dp.take(cp, self.cell_work, cells)
        dp.negate(cp, w)
        order = dp.argsort(cp, w)
        if pos is self.qgrid.point_cell:
            return dp.astype(cp, order, cp.int32)
        return dp.take(cp, pos, order)

    # -- kernels ---------------------------------------------------------
    def _prepare_kernels(self):
        """Compile (or fetch from the cache) the kernels this configuration needs."""
        D, T = self.d, _T_NAME[self.dtype]
        pat = grid_gpu.PATTERNS[self.cfg.pattern]
        wq = "true" if self.cfg.schedule == "workqueue" else "false"
        if self.cfg.kernel == "shared":
            names = (f"gpucalc_shared<{D},{T},false>", f"gpucalc_shared<{D},{T},true>")
        else:
            kt = self.cfg.threads_per_point
            names = tuple(f"gpucalc_global<{D},{T},{pat},{kt},{fill},{wq}>"
                          for fill in ("false", "true"))
        mod = grid_gpu.compile_module(names)      # the row sorts come with it
        self.k_count = mod.get_function(names[0])
        self.k_fill = mod.get_function(names[1])
        self.k_sort_small = mod.get_function(grid_gpu.SORT_KERNELS[0])
        self.k_sort_bitonic = mod.get_function(grid_gpu.SORT_KERNELS[1])
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
            _, seg_start = dp.runs(cp, dp.take(cp, q.point_cell, qlist), cp.int32)
            nseg = int(seg_start.size) - 1
            threads = 128 if self.d <= 24 else 32
            smem = threads * self.d * self.dtype.itemsize
            fn((nseg,), (threads,), (q.points, q.point_cell, q.order, d.points, d.order,
                                     self.rptr, self.ranges, qlist, seg_start, np.int32(nseg),
                                     self.eps2, sj, isf, counts, dummy64, np.int64(out_base), out,
                                     overflow), shared_mem=smem)
            return
        kt = self.cfg.threads_per_point
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
            return dp.sort(cp, pos)
        return self._most_work_first(pos)

    def fill(self, r0, r1, counts, indptr, out, out_base, cursor, overflow, sort_plan, indptr_h):
        """Write the rows [r0, r1) into out (at indptr[row] - out_base), sorted if a plan is given."""
        cp = self.cp
        qlist = self.batch_queries(r0, r1)
        if self.cfg.pattern != "full":
            cursor[r0:r1].fill(0)                  # a memset
        self._launch(True, qlist, counts, indptr, out_base, out, cursor, r0, r1, overflow)
        if self.cfg.pattern != "full":
            # a row that came up short is flagged too: no pair may be lost
            flag_differ(cp, cursor[r0:r1], counts[r0:r1], overflow)
        if self.column_ids is not None:
            # columns renamed before the sort, so rows come out sorted by the new ids
            seg = out[int(indptr_h[r0]) - out_base:int(indptr_h[r1]) - out_base]
            dp.take(cp, self.column_ids, seg, out=seg)
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
        over every row.  Cost: O(n_rows) on the device per class.
        """
        cp = self.cp
        n = int(indptr.size) - 1
        edges = sorted({r for b in batches for r in b})
        # at[e], the class's rows before row e: its flags' inclusive scan at e - 1, plus one
        before = cp.asarray(np.asarray([max(e - 1, 0) for e in edges], dtype=np.int32))
        plan = []
        for lo_len, hi_len, threads in self._SORT_CLASSES:
            flags = cp.empty(n, dtype=cp.int32)
            launch(cp, "length_flags", n, (indptr, np.int64(n), np.int64(lo_len),
                                           np.int64(-1 if hi_len is None else hi_len), flags))
            rows_d, pos = dp.compact(cp, flags, cp.int32)
            got = cp.asnumpy(dp.take(cp, pos, before)).tolist() if n else [0] * len(edges)
            at = {e: (int(g) + 1 if e > 0 else 0) for e, g in zip(edges, got)}
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
