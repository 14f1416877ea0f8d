"""LID-UNICOMP forward half in one pass over blocks of cells.

LID-UNICOMP (Gallet & Gowanlock 2019, §III-B, Algorithm 3): a cell
compares with the adjacent cells of higher linear id, so each pair of
adjacent cells is compared once and one distance computation yields both
(i, j) and (j, i).  Each point walks its cell's neighbours with the pruned
point-by-point scan (``point_scan``), writing its forward half into a
buffer per block of cells; ``mirror.mirror_table_blocks`` builds the table.

The neighbour counts of a self-join come from the same pass
(``lid_unicomp_counts``): each point's forward count, plus one for every
point whose forward half lists it, each block's buffer counted and
dropped as soon as it is done.

Cost: one pass over about half of the full pattern's candidate pairs,
O(d) each, plus the cells skipped by the pruning bound; memory O(forward
pairs) in the block buffers (one buffer a thread for the counts).
"""

from __future__ import annotations

import threading

import numba as nb
import numpy as np

from ..._core.pool import map_dynamic
from .cells import decode_cell
from ..csr import to_caller_order
from .point_scan import cell_gaps, scan_point, pruning_args
from ..schedule import JIT, cell_blocks


@nb.njit(**JIT)
def lid_unicomp_block(pts, cell_start, cell_ids, coords, coord_off, radix, stride, lower_bound,
                      point_lb, order, k, eps2, lo, side, slack, lim, cb0, cb1, counts):
    """LID-UNICOMP forward half (load-imbalance paper §III-B) of the cells
    [cb0, cb1) of a self-join grid in a single pass, on the pruned
    point-by-point path: the caller ids of the neighbours of every point go
    to a growing buffer, their number to ``counts`` (reordered rows).
    Returns the buffer, trimmed.  Sequential and nogil: the host runs
    blocks on a pool of threads (dynamic scheduling, no counting pass)."""
    r0 = cell_start[cb0]
    r1 = cell_start[cb1]
    buf = np.empty(4 * (r1 - r0) + 1024, dtype=order.dtype)
    n = np.int64(0)   # not the literal 0: the scan would compile for both types
    d = pts.shape[1]
    early = d > 3
    craw = np.empty(k, dtype=np.int64)
    lo_r = np.empty(k, dtype=np.int64)
    hi_r = np.empty(k, dtype=np.int64)
    own_r = np.empty(k, dtype=np.int64)
    eqp = np.empty(k, dtype=np.bool_)
    gl2 = np.empty(k)
    gh2 = np.empty(k)
    cur = np.empty(k, dtype=np.int64)
    partial = np.empty(k)
    no_map = np.empty(0, dtype=order.dtype)
    # typed, not the literals -1 and True: the full pattern's kernels call
    # the scan with an int64 and a bool there, and share its one compile
    no_excl = np.int64(-1)
    half = np.bool_(True)
    for c in range(cb0, cb1):
        c0 = cell_start[c]
        c1 = cell_start[c + 1]
        decode_cell(cell_ids[c], coords, coord_off, radix, coords, coord_off, k, craw, lo_r,
                     hi_r, own_r)  # a self-join cell always has itself in reach
        for i in range(c0, c1):
            cell_gaps(pts, i, k, lo, side, slack, gl2, gh2)
            while True:   # one call site: the scan's code is compiled once
                room = buf.shape[0] - n
                f = scan_point(pts, i, i, pts, no_map, no_excl, eps2, lim, early, k, craw,
                                lo_r, hi_r, own_r, half, coords, coord_off, stride, cell_ids,
                                lower_bound, cell_start, point_lb, gl2, gh2, cur, partial, eqp,
                                order, buf, n, room)
                if f <= room:
                    break
                grown = np.empty(max(2 * buf.shape[0], n + f), dtype=buf.dtype)
                for t in range(n):   # a loop: a slice copy compiles Numba's error text
                    grown[t] = buf[t]
                buf = grown
            counts[i] = f
            n += f
    return buf[:n].copy()


def _block_runner(g, eps2, counts):
    """The cell blocks of the forward half, and ``run(span)``: the buffer of one
    block (``lid_unicomp_block``), its rows' forward counts into ``counts``."""
    lo, side, slack, lim, _, point_lb, _ = pruning_args(g, half=True)
    threads = max(1, nb.get_num_threads())
    spans = cell_blocks(g.cell_start, max(16 * threads, min(1024, g.n_cells // 256)))

    def run(span):
        cb0, cb1 = span
        return lid_unicomp_block(g.points, g.cell_start, g.cell_ids, g.coords, g.coord_off,
                                 g.radix, g.stride, g.lower_bound, point_lb, g.order, g.k,
                                 eps2, lo, side, slack, lim, cb0, cb1, counts)
    return spans, threads, run


def lid_unicomp_half(g, eps2, check=None):
    """Forward half of LID-UNICOMP in one pass over blocks of cells run on
    a pool of threads (see ``lid_unicomp_block``).
    Returns (half_counts, blocks) with blocks a list of (r0, buffer).

    LID-UNICOMP has no counting pass, so the half's size is known only as
    it is found: ``check(pairs_so_far)``, when given, is called each time
    the pairs found so far have doubled (O(log pairs) calls).  It raises
    to stop (the result-size guard, with a lower bound of the table); the
    blocks not yet started are then skipped, so at most one block per
    thread runs past the limit."""
    counts = np.empty(g.n_points, dtype=np.int64)
    spans, threads, block = _block_runner(g, eps2, counts)
    lock = threading.Lock()
    found = [0, 1 << 20, False]         # pairs so far, next check, stopped

    def run(span):
        cb0, cb1 = span
        if found[2]:
            return None
        buf = block(span)
        if check is not None:
            with lock:
                found[0] += int(counts[g.cell_start[cb0]:g.cell_start[cb1]].sum())
                due = found[0] >= found[1] and not found[2]
                if due:
                    found[1] = 2 * found[0]
                    try:
                        check(found[0])
                    except BaseException:
                        found[2] = True
                        raise
        return buf

    bufs = map_dynamic(run, spans, threads)
    blocks = [(int(g.cell_start[cb0]), b) for (cb0, _), b in zip(spans, bufs)]
    return counts, blocks


@nb.njit(**JIT)
def _count_listed(ids, out):
    """out[j] += 1 for every j of ids (sequential: the caller holds a lock)."""
    for t in range(ids.shape[0]):
        out[ids[t]] += 1


def lid_unicomp_counts(g, eps2, include_self: bool) -> np.ndarray:
    """The neighbour counts of a self-join, in caller order, from the forward
    half of LID-UNICOMP: each point's forward neighbours, plus one for every
    earlier point that lists it (and itself with ``include_self``).

    Each block's buffer is counted into a caller-order array as soon as the
    block is done (under a lock, beside the other threads' scans) and
    dropped: memory O(n) plus one buffer a thread, not the forward half.
    Cost: the forward half's pass (about half of the full pattern's
    distance computations, the full pattern's counting pass) plus O(pairs
    / 2) increments."""
    n = g.n_points
    forward = np.empty(n, dtype=np.int64)
    listed = np.zeros(n, dtype=np.int64)
    spans, threads, block = _block_runner(g, eps2, forward)
    lock = threading.Lock()

    def run(span):
        buf = block(span)
        with lock:
            _count_listed(buf, listed)

    map_dynamic(run, spans, threads)
    out = np.empty(n, dtype=np.int64)
    to_caller_order(g.order, forward, out)
    out += listed
    if include_self:
        out += 1
    return out
