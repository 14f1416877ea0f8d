"""The distance of every pair of a join table, as the join's test computed it.

The test of a pair (i, j) is ``s <= eps**2`` with
``s = sum_k (q_ik - p_jk)**2``, the terms added in dimension order from
zero in the working precision, without fused multiply-adds (the CPU
kernels and the CUDA kernels, compiled with ``--fmad=false``, alike).  The
distance of the pair is ``sqrt(s)`` in the same precision: the same
operations in the same order, here one array operation at a time (NumPy
and CuPy never fuse them), then ``sqrt``, correctly rounded.  A pair in
the table has ``sqrt(s) <= eps``.  Points the public boundary scaled by a
power of two (``skyjoin._core.conditioning``) give distances scaled back
by the same power, exactly.

Works on host (NumPy) and device (CuPy) tables alike: the points are
brought to the table's side.  Cost: O(n_pairs d) time; memory the output
(one value a pair) plus O(block) temporaries.
"""

from __future__ import annotations

import numpy as np

from .._core.device import array_module, is_device_array
from .plan import plan_row_batches

__all__ = ["pair_distances", "BLOCK_PAIRS"]

#: pairs per block of the computation (bounds the temporaries)
BLOCK_PAIRS = 1 << 20


def _rows_of_block(xp, indptr, r0, r1, p0, p1):
    """The row id of each pair in [p0, p1), the pairs of the rows [r0, r1)."""
    if xp is np:
        return np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(indptr[r0:r1 + 1]))
    pos = xp.arange(p0, p1, dtype=xp.int64)
    return xp.searchsorted(indptr[r0:r1 + 1], pos, side="right") - 1 + r0


def _on_side_of(xp, A):
    """``A`` on the device of the module ``xp`` (a copy only when it moves)."""
    if xp is np:
        return A.get() if is_device_array(A) else np.asarray(A)
    return xp.asarray(A)


def pair_distances(indptr, indices, Q, S, scale_exp: int = 0):
    """The distance of every pair of the CSR table (indptr, indices).

    Parameters
    ----------
    indptr, indices : ndarray (NumPy or CuPy)
        The table: row i holds the columns ``indices[indptr[i]:indptr[i + 1]]``.
    Q, S : ndarray, shape (n_rows, d) and (n_cols, d)
        The row and column points in the working precision, as the join
        tested them (S None: a self-join, S is Q).
    scale_exp : int
        The points are the caller's times ``2**scale_exp``; distances are
        divided by it.

    Returns
    -------
    ndarray of Q's dtype, shape (n_pairs,), on the table's device.
    """
    xp = array_module(indices)
    Q = _on_side_of(xp, Q)
    S = Q if S is None else _on_side_of(xp, S)
    n_pairs = int(indptr[-1])
    out = xp.empty(n_pairs, dtype=Q.dtype)
    if n_pairs == 0:
        return out
    indptr_h = np.asarray(indptr) if xp is np else xp.asnumpy(indptr)
    longest = int(np.max(np.diff(indptr_h)))
    for r0, r1 in plan_row_batches(indptr_h, max(BLOCK_PAIRS, longest)):
        p0, p1 = int(indptr_h[r0]), int(indptr_h[r1])
        if p0 == p1:
            continue
        rows = _rows_of_block(xp, indptr, r0, r1, p0, p1)
        cols = indices[p0:p1]
        s = xp.zeros(p1 - p0, dtype=Q.dtype)
        for k in range(Q.shape[1]):
            t = Q[rows, k] - S[cols, k]
            s += t * t
        xp.sqrt(s, out=out[p0:p1])
    if scale_exp:
        xp.ldexp(out, -int(scale_exp), out=out)
    return out
