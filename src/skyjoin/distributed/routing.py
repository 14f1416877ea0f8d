"""Routing of row blocks to partitions: each row to the partition that owns it
and to those whose halo holds it.

One pass per block on its worker (:func:`route_pieces`, O(rows of the
block x split dimensions) with Numba's threads), then per partition the
concatenation of its pieces from every block (:func:`concat_pieces`,
O(points of the partition and its halo)).
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels import route_points

__all__ = ["route_pieces", "select_piece", "concat_pieces", "route_blocks"]


def route_pieces(block, offset, plan, width):
    """Route one block: per partition, (owned ids, owned points, halo ids, halo points).

    The ownership and halo rule of :mod:`.partition`, applied by one parallel
    pass (``_kernels.route_points``) that also copies the points out:
    O(rows) work.
    """
    block = np.ascontiguousarray(block)
    two = len(plan.dims) > 1
    cuts2 = np.concatenate([np.zeros(0)] + [np.asarray(c, np.float64) for c in plan.cuts2])
    cptr = np.zeros(len(plan.cuts2) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in plan.cuts2], out=cptr[1:])
    chunks = int(min(max(1, len(block) // 65536), 8 * numba.get_num_threads()))
    op, orows, oX, hp, hrows, hX = route_points(
        block, np.int64(offset), int(plan.dims[0]), int(plan.dims[1] if two else 0), two,
        np.asarray(plan.cuts1, np.float64), cuts2, cptr, np.asarray(plan.offset, np.int64),
        float(width), max(1, chunks))
    return [(orows[op[p]:op[p + 1]], oX[op[p]:op[p + 1]], hrows[hp[p]:hp[p + 1]],
             hX[hp[p]:hp[p + 1]]) for p in range(plan.n_partitions)]


def select_piece(routed, p):
    """Piece p of a routed block."""
    return routed[p]


def concat_pieces(pieces, d, dtype):
    """Owned ids/points and halo ids/points of a partition, from its pieces (ids ascending)."""
    def cat(k, shape):
        arrs = [pc[k] for pc in pieces if len(pc[k])]
        if not arrs:
            return np.zeros(shape, dtype=np.int64 if len(shape) == 1 else dtype)
        return np.concatenate(arrs)

    return cat(0, (0,)), cat(1, (0, d)), cat(2, (0,)), cat(3, (0, d))


def route_blocks(client, blocks, plan, width, token, retries):
    """Route every block on its worker; return, per partition, the futures of its pieces."""
    P = plan.n_partitions
    routed = [client.submit(route_pieces, f, int(blocks.offsets[b]), plan, width, retries=retries,
                            key=f"{token}-route-{b}")
              for b, f in enumerate(blocks.futures)]
    return [[client.submit(select_piece, r, p, retries=retries, key=f"{token}-piece-{b}-{p}")
             for b, r in enumerate(routed)] for p in range(P)]
