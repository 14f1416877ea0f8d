"""Mirroring of a symmetric pattern's forward half into the full table.

With UNICOMP (Gowanlock & Karsin 2018, §V-B) and LID-UNICOMP (Gallet &
Gowanlock 2019, §III-B) one distance computation yields both (i, j) and
(j, i): the forward half holds (i, j); this module writes row i's forward
half, then scatters every (i, j) into row j as well, in a sequential pass
(the CPU target has no atomics).

Cost: O(n + pairs) time, the table plus O(n) of memory; rows come out
unsorted.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..._core.memory import alloc_host
from ..csr import exclusive_scan_into, release_free_memory
from ..schedule import JIT


@nb.njit(**JIT)
def mirror_counts(order, half_counts, r0, r1, half_indices, total):
    """Add a block of the forward half to the caller-order row counts
    ``total``: reordered rows [r0, r1) hold their forward pairs (row
    order[r] gets half_counts[r]), and every forward pair (i, j) in
    ``half_indices`` also belongs to row j (sequential: the CPU target has
    no atomics).  One kernel for both: a first call compiles one kernel
    less."""
    for r in range(r0, r1):
        total[order[r]] += half_counts[r]
    for p in range(half_indices.shape[0]):
        total[half_indices[p]] += 1


@nb.njit(**JIT)
def fill_block(order, r0, loc_indptr, buf, forward, include_self, fill_pos, indices):
    """Write a block of the forward half into the table; reordered row
    r0 + t holds ``buf[loc_indptr[t]:loc_indptr[t + 1]]``.

    ``forward``: copy each row's forward half to the start of row
    order[r0 + t] (plus the self pair if asked).  Else scatter the mirrored
    half: for each forward pair (i, j), write i into row j at its next free
    slot (after every block's forward pass; sequential, blocks taken in
    order).  Both advance ``fill_pos``.  One kernel for both passes: a first
    call compiles one kernel less."""
    for t in range(loc_indptr.shape[0] - 1):
        o = order[r0 + t]
        if forward:
            pos = fill_pos[o]
            for p in range(loc_indptr[t], loc_indptr[t + 1]):
                indices[pos] = buf[p]
                pos += 1
            if include_self:
                indices[pos] = o
                pos += 1
            fill_pos[o] = pos
        else:
            for p in range(loc_indptr[t], loc_indptr[t + 1]):
                j = buf[p]
                indices[fill_pos[j]] = o
                fill_pos[j] += 1


def mirror_table_blocks(order, half_counts, blocks, include_self, idx_dtype, trim=True):
    """``mirror_table`` for a forward half held in blocks (r0, buffer) that
    cover the reordered rows in order.  With ``trim``, the C heap's free
    pages are handed back before the table is allocated
    (``csr.release_free_memory``: the blocks' temporaries)."""
    n = order.shape[0]
    total = np.zeros(n, dtype=np.int64)
    ends = [r0 for r0, _ in blocks[1:]] + [n]
    for (r0, buf), r1 in zip(blocks, ends):
        mirror_counts(order, half_counts, r0, r1, buf, total)
    if include_self:
        total += 1
    indptr = np.empty(n + 1, dtype=np.int64)
    grand = exclusive_scan_into(total, indptr)
    del total
    if trim:
        release_free_memory()
    indices = alloc_host(grand, idx_dtype)
    fill_pos = indptr[:-1].copy()
    loc = []
    for (r0, buf), r1 in zip(blocks, ends):
        li = np.zeros(r1 - r0 + 1, dtype=np.int64)
        np.cumsum(half_counts[r0:r1], out=li[1:])
        loc.append(li)
        fill_block(order, r0, li, buf, True, include_self, fill_pos, indices)
    for (r0, buf), li in zip(blocks, loc):
        fill_block(order, r0, li, buf, False, include_self, fill_pos, indices)
    return indptr, indices


def mirror_table(order, half_counts, half_indptr, half_indices, include_self, idx_dtype):
    """Caller-order CSR from a forward half: row order[r] gets the forward
    half of reordered row r (+ the self pair), then every mirrored pair.
    Returns (indptr, indices); rows are not sorted.  The whole half table is
    one block starting at reordered row 0 (``half_indptr`` is the running
    sum of ``half_counts``, which the block form recomputes)."""
    return mirror_table_blocks(order, half_counts, [(0, half_indices)], include_self, idx_dtype,
                               trim=False)
