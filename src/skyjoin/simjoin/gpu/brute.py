"""The brute-force join on the GPU: float64 matrix-product tiles (tensor cores), a provable screen, the exact test.

The GPU counterpart of :mod:`skyjoin.simjoin.cpu.brute` (read it for the
method, and :mod:`skyjoin.simjoin.brute_bound` for the margin).  Each tile
``G = A[i0:i1] @ B[j0:j1].T`` of the centred float64 points is one cuBLAS
DGEMM (``cupy.matmul``; FP64 tensor cores on Hopper); one kernel,
``screen``, then reads G once: a thread per entry applies the margin and,
for the rare survivors, the join's test on the original points in the
working precision (terms in order from zero, ``--fmad=false``), and
appends the pair (i, j) to a device buffer with one atomic add, or adds
it to the counts.  The self-join screens the tiles on and above the
diagonal (pairs i < j) and mirrors them; the table is built on the
device by one sort of the pairs' keys.  A buffer that overflows is
enlarged and the tile screened again: no pair is ever dropped.

Costs: n_q n_s d multiply-adds on the tensor cores (half for a
self-join), one read of each product (8 bytes an entry), O(d) per
survivor, then a sort of the pairs; memory the centred float64 copies,
one tile of products (``TILE`` x ``TILE`` float64, 512 MiB), the pairs
found (8 bytes each) and the table.
"""

from __future__ import annotations

import functools

import numpy as np

from ..._core.device import cupy
from ..._core.plans import report
from ..._core.timing import phase
from ..._core.transfer import d2h
from ..brute_bound import centred, filter_bound, tiles
from ..result_size import result_size_guard
from ..result import NeighborTable, index_dtype

__all__ = ["run", "TILE", "SOURCE", "compiled_module", "Pairs", "pair_table", "guard_pairs"]

#: rows and columns of one tile of the product
TILE = 8192
_BLOCK = 256
#: pairs the first buffer holds (it doubles when a tile overflows it)
_FIRST_CAPACITY = 1 << 22

SOURCE = r"""
#ifndef REAL
#define REAL double
#endif
extern "C" {
// One tile: G[ii * cols + jj] = a_(i0+ii) . b_(j0+jj) on the centred points.
// ``per_row`` blocks for each tile row, a thread per column.  which: 0 every
// pair, 1 only j > i.  counts != 0: count each pair found, for i and (both) j;
// else append (i, j) at atomicAdd(counter) if below capacity.
__global__ void screen(const double* G, long long cols, int per_row, const double* na,
                       const double* nb,
                       const double* ra, const double* rb, const REAL* A, const REAL* B, int d,
                       long long i0, long long j0, int which, REAL e2, double root_t,
                       double cu, double cg, double inflate, unsigned long long* counter,
                       long long capacity, int* out_i, int* out_j, unsigned long long* counts,
                       int both) {
    long long ii = blockIdx.x / per_row;
    long long jj = (long long)(blockIdx.x % per_row) * blockDim.x + threadIdx.x;
    if (jj >= cols) return;
    long long i = i0 + ii, j = j0 + jj;
    if (which == 1 && j <= i) return;
    double s = (na[ii] + nb[jj]) - 2.0 * G[ii * cols + jj];
    double rr = ra[ii] + rb[jj];
    double t = root_t + cu * rr;
    if (!(s <= (t * t + cg * (rr * rr)) * inflate)) return;
    REAL acc = 0;
    for (int k = 0; k < d; ++k) {
        REAL x = A[i * d + k] - B[j * d + k];
        acc += x * x;
    }
    if (!(acc <= e2)) return;
    if (counts) {
        atomicAdd(&counts[i], 1ULL);
        if (both) atomicAdd(&counts[j], 1ULL);
        return;
    }
    unsigned long long p = atomicAdd(counter, 1ULL);
    if ((long long)p < capacity) {
        out_i[p] = (int)i;
        out_j[p] = (int)j;
    }
}
}  // extern "C"
"""


@functools.lru_cache(maxsize=None)
def compiled_module(real: str = "double"):
    """The screen for points of C type ``real`` (NVRTC, once per process and
    type); no fused multiply-add."""
    return cupy().RawModule(code=SOURCE, options=("--fmad=false", f"-DREAL={real}"))


class Pairs:
    """The device buffer of pairs found, enlarged on overflow."""

    def __init__(self, cp):
        self.cp = cp
        self.capacity = _FIRST_CAPACITY
        self.i = cp.empty(self.capacity, dtype=cp.int32)
        self.j = cp.empty(self.capacity, dtype=cp.int32)
        self.counter = cp.zeros(1, dtype=cp.uint64)
        self.n = 0

    def grow(self, need):
        cp = self.cp
        cap = max(2 * self.capacity, int(need))
        i, j = cp.empty(cap, dtype=cp.int32), cp.empty(cap, dtype=cp.int32)
        i[:self.n] = self.i[:self.n]
        j[:self.n] = self.j[:self.n]
        self.i, self.j, self.capacity = i, j, cap


def run(plan, R, S, eps, timings=None):
    """The brute-force join on the GPU of conditioned device (or host)
    points (R None: the self-join of S) by the request ``plan``: a
    NeighborTable or int64 counts (on the device for the "device" memory
    routes), equal to the grid path's.  Reports the plan.  Cost: module
    docstring."""
    cp = cupy()
    self_join = R is None
    S = cp.ascontiguousarray(cp.asarray(S))
    Q = S if self_join else cp.ascontiguousarray(cp.asarray(R))
    nq, ns, d = Q.shape[0], S.shape[0], S.shape[1]
    report(plan, "join plan")
    on_device = plan.memory_route in ("device table", "device counts")
    real = "float" if S.dtype == np.float32 else "double"
    wtype = np.float32 if real == "float" else np.float64
    e = wtype(eps)
    e2 = wtype(e * e)
    if plan.output == "counts" and (nq == 0 or ns == 0):
        z = cp.zeros(nq, dtype=cp.int64)
        return z if on_device else d2h(cp, z)
    fb = filter_bound(float(e2), d, plan.precision)
    mod = compiled_module(real)
    screen = mod.get_function("screen")
    with phase(timings, "centre"):
        Qc, nq_, rq, Sc, ns_, rs = centred(Q, S, cp) if nq and ns else (None,) * 6
    counts = cp.zeros(nq, dtype=cp.uint64) if plan.output == "counts" else None
    pairs = Pairs(cp) if counts is None else None
    null = np.uint64(0)                 # a null pointer for the mode's unused buffers
    with phase(timings, "tiles"):
        for i0, i1, j0, j1 in tiles(nq, ns, TILE, TILE, self_join):
            G = cp.matmul(Qc[i0:i1], Sc[j0:j1].T)
            per_row = (j1 - j0 + _BLOCK - 1) // _BLOCK
            grid = (per_row * (i1 - i0),)
            head = (G, np.int64(j1 - j0), np.int32(per_row), nq_[i0:i1], ns_[j0:j1],
                    rq[i0:i1], rs[j0:j1],
                    Q, S, np.int32(d), np.int64(i0), np.int64(j0), np.int32(self_join),
                    e2, np.float64(fb.root_t), np.float64(fb.cu), np.float64(fb.cg),
                    np.float64(fb.inflate))
            if counts is not None:
                screen(grid, (_BLOCK,), head + (null, np.int64(0), null, null, counts,
                                                np.int32(self_join)))
                continue
            while True:
                screen(grid, (_BLOCK,), head + (pairs.counter, np.int64(pairs.capacity),
                                                pairs.i, pairs.j, null, np.int32(0)))
                found = int(cp.asnumpy(pairs.counter)[0])
                if found <= pairs.capacity:
                    break
                pairs.grow(found)           # overflow: enlarge and screen again
                pairs.counter[...] = pairs.n
            pairs.n = found
            guard_pairs(plan, pairs.n * (2 if self_join else 1), nq, ns, at_least=True)
            del G
    if counts is not None:
        out = counts.astype(cp.int64)
        if self_join and plan.include_self:
            out += 1
        return out if on_device else d2h(cp, out)
    with phase(timings, "table"):
        return pair_table(cp, plan, pairs, nq, ns, self_join, on_device)


def guard_pairs(plan, n_pairs, nq, ns, at_least=False):
    """Refuse a table of ``n_pairs`` that would not fit where the plan puts
    it (``result_size.result_size_guard``); ``at_least``: the pairs found so far.
    O(1)."""
    on_device = plan.memory_route == "device table"
    free = cupy().cuda.runtime.memGetInfo()[0] if on_device else None
    result_size_guard(n_pairs, nq, form="table",
                      index_itemsize=np.dtype(index_dtype(ns)).itemsize,
                      memory_limit=plan.memory_limit, where="device" if on_device else "host",
                      free_bytes=free, at_least=at_least)


def pair_table(cp, plan, pairs, nq, ns, self_join, on_device):
    """The CSR table of the pairs found, rows sorted, on the device; to the
    host unless the plan keeps it there."""
    I, J = pairs.i[:pairs.n].astype(cp.int64), pairs.j[:pairs.n].astype(cp.int64)
    if self_join:
        rows = [I, J] + ([cp.arange(nq, dtype=cp.int64)] if plan.include_self else [])
        cols = [J, I] + ([cp.arange(nq, dtype=cp.int64)] if plan.include_self else [])
        I, J = cp.concatenate(rows), cp.concatenate(cols)
    n = int(I.size)
    guard_pairs(plan, n, nq, ns)
    key = I * ns + J
    del I, J
    key.sort()
    row = key // ns
    indptr = cp.zeros(nq + 1, dtype=cp.int64)
    if n:
        indptr[1:] = cp.cumsum(cp.bincount(row, minlength=nq))
    indices = (key - row * ns).astype(index_dtype(ns))
    del key, row
    if on_device:
        return NeighborTable(indptr, indices, (nq, ns), True)
    return NeighborTable(d2h(cp, indptr), d2h(cp, indices), (nq, ns), True)
