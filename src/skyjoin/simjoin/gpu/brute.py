"""The brute-force join on the GPU: matrix-product tiles (tensor cores), a provable screen, the exact test.

The GPU counterpart of :mod:`skyjoin.simjoin.cpu.brute` (read it for the
method, and :mod:`skyjoin.simjoin.brute_bound` for the margin).  Each tile
``G = A[i0:i1] @ B[j0:j1].T`` of the centred float64 points is one cuBLAS
DGEMM (``cupy.matmul``; FP64 tensor cores on Hopper), or for
"brute-fp16" one FP16 GemmEx of the points' lattice with FP32
accumulation, exact (``fp16_product``, :mod:`skyjoin.simjoin.lattice`).
One kernel, ``screen``, then reads G once: each thread takes
``PER_THREAD`` entries of a tile row, applies the margin and, for the
rare survivors, the join's test on the original points in the working
precision (terms in order from zero, each operation rounded on its own),
and appends the pair (i, j) to a device buffer with one atomic add, or
adds it to the counts.  The self-join screens the tiles on and above the
diagonal (pairs i < j) and mirrors them; the table is built on the
device by one sort of the pairs' keys.  A buffer that overflows is
enlarged and the tile screened again: no pair is ever dropped.

Costs: n_q n_s d multiply-adds on the tensor cores (half for a
self-join), one read of each product (8 bytes an entry, 4 for
"brute-fp16"), O(d) per survivor, then a sort of the pairs; memory the
centred float64 copies (or the lattice's 2 bytes a coordinate), one tile
of products (``TILE`` x ``TILE``: 512 MiB in float64), the pairs found (8
bytes each) and the table.
"""

from __future__ import annotations

import functools

import numpy as np

from ..._core.device import cupy
from ..._core.plans import report
from ..._core.timing import phase
from ..._core.transfer import d2h
from ..brute_bound import centred, filter_bound, tiles
from ..lattice import lattice_bound, lattice_scale, on_lattice
from ..result_size import result_size_guard
from ..result import NeighborTable, index_dtype

__all__ = ["run", "TILE", "SOURCE", "PAIR_SOURCE", "compiled_module", "fp16_product", "Pairs",
           "Screening", "pair_table", "guard_pairs"]

#: rows and columns of one tile of the product
TILE = 8192
_BLOCK = 256
#: columns of a tile row each thread of the screen reads
PER_THREAD = 8
#: a null pointer, for a launch's unused buffers
_NULL = np.uint64(0)
#: pairs the first buffer holds (it doubles when a tile overflows it)
_FIRST_CAPACITY = 1 << 22

#: the join's exact test and the keeping of a pair, shared by the GPU screens
#: (``REAL`` the points' C type, ``IS_FLOAT`` whether it is float)
PAIR_SOURCE = r"""
#if IS_FLOAT
#define SUB_RN __fsub_rn
#define MUL_RN __fmul_rn
#define ADD_RN __fadd_rn
#else
#define SUB_RN __dsub_rn
#define MUL_RN __dmul_rn
#define ADD_RN __dadd_rn
#endif
extern "C" {
// The join's test of (i, j) on the original points, each operation rounded
// on its own (no contraction): sum_k (a_k - b_k)^2 <= e2, terms in order.
__device__ __forceinline__ bool within(const REAL* A, const REAL* B, long long i, long long j,
                                       int d, REAL e2) {
    REAL acc = 0;
    for (int k = 0; k < d; ++k) {
        REAL x = SUB_RN(A[i * d + k], B[j * d + k]);
        acc = ADD_RN(acc, MUL_RN(x, x));
    }
    return acc <= e2;
}

// A pair found: counted (counts != 0: for i, and for j when both), or
// appended at atomicAdd(counter) if below capacity.
__device__ __forceinline__ void keep(long long i, long long j, unsigned long long* counter,
                                     long long capacity, int* out_i, int* out_j,
                                     unsigned long long* counts, int both) {
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

SOURCE = PAIR_SOURCE + r"""
#ifndef GREAL
#define GREAL double
#endif
#ifndef PER_THREAD
#define PER_THREAD 8
#endif
extern "C" {
// One tile: G[ii * cols + jj] = a_(i0+ii) . b_(j0+jj) on the centred points
// (GREAL double), or on their lattice (float, exact integers).  ``per_row``
// blocks for each tile row, each thread ``PER_THREAD`` columns a blockDim
// apart.  which: 0 every pair, 1 only j > i.  A pair within the threshold
// and the test is kept (``keep``).
__global__ void screen(const GREAL* G, long long cols, int per_row, const double* na,
                       const double* nb,
                       const double* ra, const double* rb, const REAL* A, const REAL* B, int d,
                       long long i0, long long j0, int which, REAL e2, double root_t,
                       double cu, double cg, double inflate, unsigned long long* counter,
                       long long capacity, int* out_i, int* out_j, unsigned long long* counts,
                       int both) {
    long long ii = blockIdx.x / per_row;
    long long first = (long long)(blockIdx.x % per_row) * blockDim.x * PER_THREAD;
    long long i = i0 + ii;
    double ni = na[ii], ri = ra[ii];
    const GREAL* g = G + ii * cols;
    for (int e = 0; e < PER_THREAD; ++e) {
        long long jj = first + (long long)e * blockDim.x + threadIdx.x;
        if (jj >= cols) return;
        long long j = j0 + jj;
        if (which == 1 && j <= i) continue;
        double s = (ni + nb[jj]) - 2.0 * (double)g[jj];
        double rr = ri + rb[jj];
        double t = root_t + cu * rr;
        if (!(s <= (t * t + cg * (rr * rr)) * inflate)) continue;
        if (within(A, B, i, j, d, e2)) keep(i, j, counter, capacity, out_i, out_j, counts, both);
    }
}
}  // extern "C"
"""


@functools.lru_cache(maxsize=None)
def compiled_module(real: str = "double", product: str = "double"):
    """The screen for points of C type ``real`` and products of C type
    ``product`` (NVRTC, once per process and combination); no fused
    multiply-add."""
    return cupy().RawModule(code=SOURCE, options=("--fmad=false", f"-DREAL={real}",
                                                  f"-DIS_FLOAT={int(real == 'float')}",
                                                  f"-DGREAL={product}",
                                                  f"-DPER_THREAD={PER_THREAD}"))


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

    def collect(self, launch):
        """Run ``launch(counter, capacity, out_i, out_j)``, a kernel that
        appends pairs at ``atomicAdd(counter)`` below ``capacity``, until
        its pairs fit: an overflow enlarges the buffer and runs it again
        after the pairs held before.  One read of the counter a launch."""
        while True:
            launch(self.counter, np.int64(self.capacity), self.i, self.j)
            found = int(self.cp.asnumpy(self.counter)[0])
            if found <= self.capacity:
                break
            self.grow(found)
            self.counter[...] = self.n
        self.n = found


class Screening:
    """One GPU join that screens every pair, as its engine's ``run`` reads
    the request: the device points Q (queries; S itself for a self-join)
    and S, their sizes, the working precision's C type ``real`` and its
    ``e2 = fl(e * e)``, and the result's buffer, uint64 ``counts`` or the
    ``pairs``.  Built once a call; reports the plan.  The screens of
    "brute", "brute-fp16" (this module) and "projected"
    (``gpu.projected``) share it."""

    def __init__(self, plan, R, S, eps):
        cp = self.cp = cupy()
        self.plan = plan
        self.self_join = R is None
        self.S = cp.ascontiguousarray(cp.asarray(S))
        self.Q = self.S if self.self_join else cp.ascontiguousarray(cp.asarray(R))
        self.nq, self.ns, self.d = self.Q.shape[0], self.S.shape[0], self.S.shape[1]
        report(plan, "join plan")
        self.on_device = plan.memory_route in ("device table", "device counts")
        self.real = "float" if self.S.dtype == np.float32 else "double"
        wtype = np.float32 if self.real == "float" else np.float64
        e = wtype(eps)
        self.e2 = wtype(e * e)
        self.counts = cp.zeros(self.nq, dtype=cp.uint64) if plan.output == "counts" else None
        self.pairs = Pairs(cp) if self.counts is None else None

    @property
    def empty(self) -> bool:
        """No pair to screen (no query or no data point)."""
        return self.nq == 0 or self.ns == 0

    def launch(self, kernel):
        """Run ``kernel(tail)``, a launch whose last six arguments are the
        pairs' (counter, capacity, out_i, out_j) and the counts' (counts,
        both): into the counts, or into the pairs until they fit
        (``Pairs.collect``), whose total is then checked against the
        plan's memory (``guard_pairs``)."""
        if self.counts is not None:
            kernel((_NULL, np.int64(0), _NULL, _NULL, self.counts, np.int32(self.self_join)))
            return
        self.pairs.collect(lambda *out: kernel(out + (_NULL, np.int32(0))))
        guard_pairs(self.plan, self.pairs.n * (2 if self.self_join else 1), self.nq, self.ns,
                    at_least=True)

    def result(self, timings=None):
        """int64 counts (each point itself included where the plan says) or
        the CSR table, on the device for the "device" memory routes."""
        cp = self.cp
        if self.counts is not None:
            out = self.counts.astype(cp.int64)
            if self.self_join and self.plan.include_self:
                out += 1
            return out if self.on_device else d2h(cp, out)
        with phase(timings, "table"):
            return pair_table(cp, self.plan, self.pairs, self.nq, self.ns, self.self_join,
                              self.on_device)


def run(plan, R, S, eps, timings=None):
    """The brute-force join on the GPU of conditioned device (or host)
    points (R None: the self-join of S) by the request ``plan``: a
    NeighborTable or int64 counts (on the device for the "device" memory
    routes), equal to the grid path's.  ``plan.algorithm`` "brute-fp16"
    screens on the points' FP16 lattice (``lattice``).  Reports the plan.
    Cost: module docstring."""
    job = Screening(plan, R, S, eps)
    if job.empty:
        return job.result(timings)
    cp, Q, S, self_join, d = job.cp, job.Q, job.S, job.self_join, job.d
    fb = filter_bound(float(job.e2), d, plan.precision)
    fp16 = plan.algorithm == "brute-fp16"
    screen = compiled_module(job.real, "float" if fp16 else "double").get_function("screen")
    with phase(timings, "centre"):
        Qc, nq_, rq, Sc, ns_, rs = centred(Q, S, cp)
        if fp16:
            (Qc, nq_, rq, Sc, ns_, rs), fb = _lattice(Qc, rq, Sc, rs, fb, self_join, cp)
    product = fp16_product if fp16 else _float64_product
    with phase(timings, "tiles"):
        for i0, i1, j0, j1 in tiles(job.nq, job.ns, TILE, TILE, self_join):
            G = product(cp, Qc[i0:i1], Sc[j0:j1])
            per_row = -(-(j1 - j0) // (_BLOCK * PER_THREAD))
            grid = (per_row * (i1 - i0),)
            head = (G, np.int64(j1 - j0), np.int32(per_row), nq_[i0:i1], ns_[j0:j1],
                    rq[i0:i1], rs[j0:j1],
                    Q, S, np.int32(d), np.int64(i0), np.int64(j0), np.int32(self_join),
                    job.e2, np.float64(fb.root_t), np.float64(fb.cu), np.float64(fb.cg),
                    np.float64(fb.inflate))
            job.launch(lambda tail: screen(grid, (_BLOCK,), head + tail))
            del G
    return job.result(timings)


def _float64_product(cp, A, B):
    """``A @ B.T`` in float64 (cuBLAS DGEMM: FP64 tensor cores on Hopper)."""
    return cp.matmul(A, B.T)


def fp16_product(cp, A, B):
    """``A @ B.T`` as float32 for FP16 matrices A (m x k) and B (n x k),
    C-contiguous, k a multiple of 8: cuBLAS GemmEx on the FP16 tensor cores
    with FP32 accumulation (``CUBLAS_COMPUTE_32F``; exact on the lattice,
    ``lattice``).  O(m n k)."""
    from cupy.cuda import cublas, device, runtime    # CuPy: loaded on first use

    m, k = A.shape
    n = B.shape[0]
    out = cp.empty((m, n), dtype=cp.float32)
    if m == 0 or n == 0:
        return out
    one, zero = np.ones(1, dtype=np.float32), np.zeros(1, dtype=np.float32)
    handle = device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    try:
        # row-major out = A B^T is column-major out^T = B A^T
        cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                      one.ctypes.data, B.data.ptr, runtime.CUDA_R_16F, k,
                      A.data.ptr, runtime.CUDA_R_16F, k,
                      zero.ctypes.data, out.data.ptr, runtime.CUDA_R_32F, n,
                      cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT)
    finally:
        cublas.setPointerMode(handle, mode)
    return out


def _lattice(Qc, rq, Sc, rs, fb, self_join, cp):
    """The centred points' lattice (``lattice.on_lattice``, one scale for
    both sides) in ``centred``'s tuple form, the lattice points, their
    squared norms and slacks, with the screen's constants
    (``lattice.lattice_bound``).  O((n_q + n_s) d)."""
    d = Sc.shape[1]
    radius = float(rs.max()) if self_join else float(cp.maximum(rq.max(), rs.max()))
    absmax = float(cp.abs(Sc).max()) if self_join else \
        max(float(cp.abs(Sc).max()), float(cp.abs(Qc).max()))
    scale = lattice_scale(radius, absmax, d)
    ls = on_lattice(Sc, rs, fb.cu, scale, cp)
    lq = ls if self_join else on_lattice(Qc, rq, fb.cu, scale, cp)
    return ((lq.points, lq.norms, lq.slack, ls.points, ls.norms, ls.slack),
            lattice_bound(fb, scale))


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
