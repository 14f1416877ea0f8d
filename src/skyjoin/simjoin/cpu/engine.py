"""The multicore CPU join engine (Numba): executes a ``JoinPlan`` on grids.

Entered through ``skyjoin.simjoin.engine`` (``run``, ``run_chunks``) with
conditioned points and the call's request: the engine builds the grid(s)
(``skyjoin.index.grid``), completes the plan by the rule ``plan.plan_cpu``,
reports it (``skyjoin._core.plans.report``) and runs it, never validating,
scaling or re-deciding:

* the full pattern (``full_pattern``): count every row exactly, scan, then
  fill each row in place in caller order (rows sorted by the merge);
* UNICOMP (``unicomp``) or LID-UNICOMP (``lid_unicomp``): the forward half
  of a symmetric pattern, then ``mirror`` writes both halves;
* ``self_join_chunks``: the full pattern's fill restricted to the cells of
  a block of rows, block after block.

Parallelism: the kernels are sequential and nogil, run on blocks of cells
from a pool of threads (``schedule.run_blocks``).
"""

from __future__ import annotations


import numpy as np

from ..._core.memory import alloc_host
from ..._core.plans import report
from ..._core.thread_count import with_cpu_threads
from ..._core.timing import phase
from ...index.grid import build_grid
from .cells import PATTERN_CODE
from ..csr import indptr_from_counts, release_free_memory, sort_csr_rows, to_caller_order
from .full_pattern import full_kernel
from .lid_unicomp import lid_unicomp_counts, lid_unicomp_half
from .mirror import mirror_table, mirror_table_blocks
from ..plan import TILE_MIN_POINTS, plan_cpu
from ..result_size import result_size_guard
from .point_scan import pruning_args
from ..result import NeighborTable, PairChunk, index_dtype
from ..schedule import run_blocks
from .unicomp import count_rows, forward_half


def eps_squared(eps: float, dtype) -> float:
    """eps^2 evaluated in the working precision (the threshold of the test)."""
    e = dtype.type(eps)
    return e * e


def _full_pass(gq, gs, eps2, self_join, include_self, *, counts, caller_points=None,
               sort=False, row_pos=None, row_len=None, indptr=None, indices=None,
               cell_list=None, tile_min=TILE_MIN_POINTS):
    """Run ``full_kernel`` on the cells of ``cell_list`` (every cell when
    None): the count into ``counts`` (the grids' reordered points), or,
    with ``counts`` None, the fill of ``indices`` (``caller_points``, read
    through the grids' orders).  Every argument has the same type in both
    passes, so that one compile serves both."""
    empty = np.zeros(0, dtype=np.int64)
    if cell_list is None:
        # every cell: no list (and no temporary of the cells' size)
        cell_list = empty
        weight = gq.cell_start
    else:
        sizes = gq.cell_start[cell_list + 1] - gq.cell_start[cell_list]
        weight = np.zeros(cell_list.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=weight[1:])
    if counts is None:
        q_pts, s_pts = caller_points
        q_order, s_map = gq.order, gs.order
        counts = empty
    else:
        q_pts, s_pts = gq.points, gs.points
        q_order = np.zeros(0, dtype=gq.order.dtype)
        s_map = np.zeros(0, dtype=gs.order.dtype)
        indices = np.zeros(0, dtype=index_dtype(gs.n_points))
    row_pos = empty if row_pos is None else row_pos
    row_len = empty if row_len is None else row_len
    indptr = empty if indptr is None else indptr
    bad = np.zeros(1, dtype=np.int8)
    args = (q_pts, q_order, gq.cell_start, gq.cell_ids, gq.coords, gq.coord_off, gq.radix,
            s_pts, s_map, gs.cell_ids, gs.lower_bound, gs.cell_start, gs.coords, gs.coord_off,
            gs.stride, gs.k, eps2, self_join, include_self, sort, cell_list, row_pos, row_len,
            indptr, gs.order, *pruning_args(gs, pts=s_pts, tile_min=tile_min), counts, indices,
            bad)
    run_blocks(full_kernel, args, weight)
    if bad[0]:
        raise RuntimeError("internal error: a row's neighbour count changed between the "
                           "counting and filling passes; no result was produced")


def counts_reordered(gq, gs, eps2, pattern: int, self_join: bool, include_self: bool,
                     tile_min: int = TILE_MIN_POINTS) -> np.ndarray:
    """Neighbour counts of the query grid's reordered points (forward half
    for the symmetric patterns; ``pattern`` a ``PATTERN_CODE``).  Cells of
    at least ``tile_min`` points take the tiled path (full pattern)."""
    counts = np.empty(gq.n_points, dtype=np.int64)
    if gq.n_points == 0:
        return counts
    if pattern == 0:
        _full_pass(gq, gs, eps2, self_join, include_self, counts=counts, tile_min=tile_min)
    else:
        count_rows(gq, gs, eps2, pattern, self_join, include_self, counts)
    return counts


def fill_full(gq, gs, eps2, self_join, include_self, sort, row_pos, row_len, indices,
              cell_list=None, indptr=None, *, caller_points, tile_min=TILE_MIN_POINTS):
    """Full-pattern filling pass (rows sorted when ``sort``).  Rows go to
    ``row_pos``/``row_len`` (reordered query points), or, when those are
    None, to the caller-order CSR rows of ``indptr``.  ``caller_points``
    is (Q, S): the C-contiguous query and data points, in the caller's
    order, from which the grids were built; the grids' reordered copies
    are not read (they may have been dropped: ``points`` None)."""
    if gq.n_points == 0:
        return
    if row_pos is not None:
        indptr = None
    _full_pass(gq, gs, eps2, self_join, include_self, counts=None, caller_points=caller_points,
               sort=sort, row_pos=row_pos, row_len=row_len, indptr=indptr, indices=indices,
               cell_list=cell_list, tile_min=tile_min)


def guard_table(plan, n_pairs, n_rows, idx_dtype, dtype, extra_bytes=0, at_least=False):
    """``result_size.result_size_guard`` for the host table of ``plan`` (its distances
    included when asked for), before it is allocated (``at_least``: n_pairs
    is a lower bound, found so far)."""
    result_size_guard(n_pairs, n_rows, form="table", index_itemsize=np.dtype(idx_dtype).itemsize,
                      distance_itemsize=np.dtype(dtype).itemsize if plan.return_distance else 0,
                      memory_limit=plan.memory_limit, extra_bytes=extra_bytes, at_least=at_least)


def full_pattern_csr(gq, gs, eps2, self_join, include_self, output, sort, idx_dtype, timings,
                     caller_points, tile_min=TILE_MIN_POINTS, plan=None):
    """Count, then (for a table) fill, with the full pattern: the caller-order
    counts, or the CSR arrays (indptr, indices).  ``caller_points`` are the
    query and data arrays the grids were built from: the grids' reordered
    copies of the points are dropped after counting and the fill reads the
    caller's arrays (the memory budget, 1.5 x input + output, has no room
    for the copy next to the output).  Between the two passes the table's
    size is known: ``guard_table`` checks that it fits (with ``plan``).

    Cost: two passes over the candidates; memory O(n) plus the output."""
    with phase(timings, "count"):
        counts_r = counts_reordered(gq, gs, eps2, 0, self_join, include_self, tile_min)
    if output == "counts":
        out = np.empty(gq.n_points, dtype=np.int64)
        to_caller_order(gq.order, counts_r, out)
        return out
    with phase(timings, "fill"):
        # rows are found through indptr (no per-point arrays alive while the
        # output is written: the memory target)
        indptr, total = indptr_from_counts(gq, counts_r)
        del counts_r
        if plan is not None:
            guard_table(plan, total, gq.n_points, idx_dtype, caller_points[0].dtype)
        gq.points = gs.points = None
        release_free_memory()
        indices = alloc_host(total, idx_dtype)        # pages of a freed table reused
        fill_full(gq, gs, eps2, self_join, include_self, sort, None, None, indices,
                  indptr=indptr, caller_points=caller_points, tile_min=tile_min)
    return indptr, indices


@with_cpu_threads
def run_self_join(X, grids, eps, plan, timings=None):
    """Execute the CPU self-join ``plan`` on X and its grid: a NeighborTable
    or the int64 counts (``plan.output``).  ``grids`` is a list holding the
    grid, handed over: it is emptied here, so that the grid can be freed
    before the mirror writes the table."""
    g = grids.pop()
    n = X.shape[0]
    eps2 = eps_squared(eps, X.dtype)
    code = PATTERN_CODE[plan.pattern]
    idx_dtype = index_dtype(n)
    if plan.output == "counts" and code == 2:      # the forward half, counted, no table
        with phase(timings, "count"):
            return lid_unicomp_counts(g, eps2, plan.include_self)
    if plan.output == "counts" or code == 0:
        res = full_pattern_csr(g, g, eps2, True, plan.include_self, plan.output, plan.sort,
                               idx_dtype, timings, caller_points=(X, X),
                               tile_min=plan.tile_min_points, plan=plan)
        if plan.output == "counts":
            return res
        indptr, indices = res
    else:
        with phase(timings, "fill"):
            self_pairs = n if plan.include_self else 0
            if code == 2:
                # no counting pass: the table's lower bound is checked while
                # the forward half is found, and its size once it is
                def check(half_total, at_least=True):
                    guard_table(plan, 2 * half_total + self_pairs, n, idx_dtype, X.dtype,
                                extra_bytes=half_total * idx_dtype.itemsize, at_least=at_least)

                half = lid_unicomp_half(g, eps2, check)
                check(int(half[0].sum()), at_least=False)
            else:
                half = forward_half(g, eps2, code, idx_dtype, before_fill=lambda half_total:
                                    guard_table(plan, 2 * half_total + self_pairs, n, idx_dtype,
                                                X.dtype,
                                                extra_bytes=half_total * idx_dtype.itemsize))
            order = g.order
            del g  # the reordered points are not needed for the mirror
        with phase(timings, "mirror"):
            if code == 2:
                indptr, indices = mirror_table_blocks(order, *half, plan.include_self, idx_dtype)
            else:
                indptr, indices = mirror_table(order, *half, plan.include_self, idx_dtype)
            del half
        if plan.sort:
            with phase(timings, "sort"):
                sort_csr_rows(indptr, indices)
    return NeighborTable(indptr, indices, (n, n), sorted=bool(plan.sort))


@with_cpu_threads
def run_join(R, S, gr, gs, eps, plan, timings=None):
    """Execute the CPU R-join-S ``plan`` (full pattern) on the grids
    ``gr``, ``gs`` of R and S (same cell geometry)."""
    nr, ns = R.shape[0], S.shape[0]
    eps2 = eps_squared(eps, R.dtype)
    res = full_pattern_csr(gr, gs, eps2, False, False, plan.output, plan.sort, index_dtype(ns),
                           timings, caller_points=(R, S), tile_min=plan.tile_min_points,
                           plan=plan)
    if plan.output == "counts":
        return res
    indptr, indices = res
    return NeighborTable(indptr, indices, (nr, ns), sorted=bool(plan.sort))


def chunk_bounds(counts: np.ndarray, max_pairs: int) -> list[tuple[int, int]]:
    """Split rows into consecutive blocks of at most max_pairs pairs each
    (a row larger than max_pairs is a block of its own).  O(n)."""
    n = len(counts)
    bounds = []
    start = 0
    csum = np.cumsum(counts)
    while start < n:
        base = csum[start - 1] if start else 0
        stop = int(np.searchsorted(csum, base + max_pairs, side="right"))
        stop = max(stop, start + 1)
        bounds.append((start, min(stop, n)))
        start = stop
    return bounds


@with_cpu_threads
def run_self_join_chunks(X, g, eps, plan, max_pairs):
    """Execute the CPU self-join ``plan`` as a stream: count all rows, yield
    the total (an int, for ``PairStream``), then fill the cells of each
    block of at most ``max_pairs`` pairs (``chunk_bounds``), yielded in CSR
    form (``PairChunk.from_csr``: the row ids are not expanded).  Cost per chunk: O(rows + cells) besides
    the fill of its cells.  Memory: O(n) plus one chunk."""
    n = X.shape[0]
    include_self, sort = plan.include_self, plan.sort
    eps2 = eps_squared(eps, X.dtype)
    counts_r = counts_reordered(g, g, eps2, 0, True, include_self, plan.tile_min_points)
    g.points = None  # the fills read X
    counts = np.empty(n, dtype=np.int64)
    to_caller_order(g.order, counts_r, counts)
    yield int(counts.sum())
    inv = np.empty(n, dtype=np.int64)
    inv[g.order] = np.arange(n, dtype=np.int64)
    point_cell = np.repeat(np.arange(g.n_cells, dtype=np.int64), np.diff(g.cell_start))
    row_pos = np.full(n, -1, dtype=np.int64)
    idx_dtype = index_dtype(n)
    in_chunk = np.zeros(g.n_cells, dtype=np.bool_)
    for r0, r1 in chunk_bounds(counts, max_pairs):
        c = counts[r0:r1]
        indptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
        np.cumsum(c, out=indptr[1:])
        members = inv[r0:r1]
        row_pos[members] = indptr[:-1]
        indices = alloc_host(int(indptr[-1]), idx_dtype)
        in_chunk[point_cell[members]] = True       # the cells holding the chunk's rows
        cells = np.flatnonzero(in_chunk)
        in_chunk[cells] = False
        fill_full(g, g, eps2, True, include_self, sort, row_pos, counts_r, indices,
                  cell_list=cells, caller_points=(X, X), tile_min=plan.tile_min_points)
        row_pos[members] = -1
        yield PairChunk.from_csr(r0, indptr, indices)


# ---------------------------------------------------------------------------
# The engine's entry (``skyjoin.simjoin.engine``): grids, plan, execution
# ---------------------------------------------------------------------------

def empty_result(plan, n_rows, n_cols):
    """The result of a join with no rows or no columns: zero counts or an
    empty table.  O(n_rows)."""
    if plan.output == "counts":
        return np.zeros(n_rows, dtype=np.int64)
    return NeighborTable(np.zeros(n_rows + 1, dtype=np.int64),
                         np.zeros(0, dtype=index_dtype(n_cols)), (n_rows, n_cols), True)


def joint_grids(R, S, eps, index_dims, precision):
    """Grids of S (data) and R (queries) with the same cell geometry, over the
    joint bounds.  O((n_r + n_s) d)."""
    k_req = index_dims
    while True:
        both_lo = np.minimum(R.min(axis=0), S.min(axis=0)).astype(np.float64)
        both_hi = np.maximum(R.max(axis=0), S.max(axis=0)).astype(np.float64)
        gs = build_grid(S, eps, index_dims=k_req, precision=precision, bounds=(both_lo, both_hi))
        gr = build_grid(R, eps, precision=precision, like=gs)
        if gr.k == gs.k:
            return gr, gs
        k_req = gr.k  # R's ranks needed fewer dimensions: index that many in both


def run(request, R, S, eps, timings=None, grid=None):
    """Execute the CPU request ``request`` (R None: the self-join of S): build
    the grid(s) (or take ``grid``, the grid of S already in its cell order:
    HYBRID-DBSCAN's), resolve and report the plan, run it.  Returns a
    NeighborTable or the int64 counts.  Cost: the join's (``api``)."""
    if R is None:
        n = S.shape[0]
        if n == 0:
            report(plan_cpu(request, None), "join plan")
            return empty_result(request, 0, 0)
        if grid is None:
            with phase(timings, "grid"):
                grid = build_grid(S, eps, index_dims=request.index_dims,
                                  precision=request.precision)
        plan = report(plan_cpu(request, grid), "join plan")
        grids = [grid]
        del grid  # handed over to the engine, which frees it before the mirror
        return run_self_join(S, grids, eps, plan, timings)
    nr, ns = R.shape[0], S.shape[0]
    if nr == 0 or ns == 0:
        report(plan_cpu(request, None), "join plan")
        return empty_result(request, nr, ns)
    with phase(timings, "grid"):
        gr, gs = joint_grids(R, S, eps, request.index_dims, request.precision)
    plan = report(plan_cpu(request, gs), "join plan")
    return run_join(R, S, gr, gs, eps, plan, timings)


def run_chunks(request, X, eps, max_pairs):
    """Execute the CPU chunks request (memory route "chunks") on X: a generator
    of the total, then the chunks (``run_self_join_chunks``).  Nothing runs
    before the first item is asked for."""
    if X.shape[0] == 0:
        report(plan_cpu(request, None), "join plan")
        return
    g = build_grid(X, eps, index_dims=request.index_dims, precision=request.precision)
    plan = report(plan_cpu(request, g), "join plan")
    yield from run_self_join_chunks(X, g, eps, plan, max_pairs)
