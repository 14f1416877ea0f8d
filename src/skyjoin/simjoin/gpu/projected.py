"""The brute force screened on principal components, on the GPU: one fused kernel.

The GPU engine of ``algorithm="projected"`` (:mod:`skyjoin.simjoin.projection`
for the method, :mod:`skyjoin.simjoin.brute_bound` step 4 for the margin).
The centred points are projected on the plan's q principal axes (one
cuBLAS product), rounded to the screen's precision and padded with zeros
to a multiple of four columns.  One kernel, ``screen_projected``, then
visits every pair of a tile of ``TILE`` rows by ``TILE`` columns: a block
of ``THREADS`` threads, each holding ``ROWS`` rows' coordinates in
registers, reads the tile's columns through shared memory ``CHUNK`` at a
time and sums the q squared differences; nothing of the n^2 distances
reaches memory.  A pair within the one threshold is tested at once by the
join's own test on the original points in the working precision (terms in
order from zero, each operation rounded on its own: ``__dsub_rn``,
``__dmul_rn``, ``__dadd_rn`` and their float forms, so the result is the
grid path's and the brute force's, pair for pair) and appended to the
pairs, or counted.  The self-join visits the tiles on and above the
diagonal.  Blocks are launched in slices; a slice whose pairs overflow
the buffer is run again into a larger one: no pair is ever dropped.

Costs: n_q n_s q (half for a self-join) subtractions and multiply-adds in
the screen's precision (float32: the CUDA cores' fastest), O(d) for each
pair through the screen, the projection's O(n d q) on the tensor cores;
memory the float64 centred points while they are projected (8 d bytes a
point), the projections (4 or 8 bytes a component), the pairs (8 bytes
each) and the table.
"""

from __future__ import annotations

import functools

import numpy as np

from ..._core.device import cupy
from ..._core.timing import phase
from ..brute_bound import projected, projected_threshold
from .brute import PAIR_SOURCE, Screening

__all__ = ["run", "compiled_module", "THREADS", "ROWS", "CHUNK", "SLICE"]

#: threads of a block
THREADS = 128
#: rows each thread screens (a tile is THREADS x ROWS rows and as many columns)
ROWS = 2
#: columns of a tile in shared memory at a time
CHUNK = 64
#: blocks launched at a time (the pairs' buffer is checked between slices)
SLICE = 1 << 15

SOURCE = PAIR_SOURCE + r"""
extern "C" {
#define TILE (THREADS * ROWS)

// Blocks first .. first + gridDim.x - 1 of the tiles (ti, tj): for a self-join
// those with ti <= tj, numbered tj (tj + 1) / 2 + ti; else ti * col_tiles + tj.
// PQ, PS: the projections, Q components a row (zero-padded).  A pair whose
// screened squared distance is <= thr and which passes the test (``within``)
// is kept (``keep``).
__global__ void screen_projected(const FT* __restrict__ PQ, const FT* __restrict__ PS,
                                 long long nq, long long ns, long long col_tiles,
                                 int self_join, long long first, FT thr,
                                 const REAL* __restrict__ A, const REAL* __restrict__ B, int d,
                                 REAL e2, unsigned long long* counter, long long capacity,
                                 int* out_i, int* out_j, unsigned long long* counts, int both) {
    __shared__ FT sh[CHUNK * Q];
    long long b = first + blockIdx.x;
    long long ti, tj;
    if (self_join) {
        long long t = (long long)((sqrt(8.0 * (double)b + 1.0) - 1.0) * 0.5);
        while (t > 0 && t * (t + 1) / 2 > b) --t;
        while ((t + 1) * (t + 2) / 2 <= b) ++t;
        tj = t;
        ti = b - t * (t + 1) / 2;
    } else {
        ti = b / col_tiles;
        tj = b - ti * col_tiles;
    }
    long long i0 = ti * TILE, j0 = tj * TILE;
    long long jend = min(j0 + (long long)TILE, ns);
    FT r[ROWS][Q];
    for (int a = 0; a < ROWS; ++a) {
        long long i = i0 + a * THREADS + threadIdx.x;
        for (int k = 0; k < Q; ++k) r[a][k] = i < nq ? PQ[i * Q + k] : (FT)0;
    }
    for (long long c0 = j0; c0 < jend; c0 += CHUNK) {
        int cn = (int)min((long long)CHUNK, jend - c0);
        __syncthreads();
        for (int e = threadIdx.x; e < cn * Q; e += THREADS) sh[e] = PS[c0 * Q + e];
        __syncthreads();
        for (int c = 0; c < cn; ++c) {
            FT acc[ROWS];
            for (int a = 0; a < ROWS; ++a) acc[a] = 0;
#pragma unroll
            for (int k = 0; k < Q; ++k) {
                FT s = sh[c * Q + k];
#pragma unroll
                for (int a = 0; a < ROWS; ++a) {
                    FT t = r[a][k] - s;
                    acc[a] += t * t;
                }
            }
            for (int a = 0; a < ROWS; ++a) {
                if (!(acc[a] <= thr)) continue;
                long long i = i0 + a * THREADS + threadIdx.x, j = c0 + c;
                if (i >= nq || (self_join && j <= i) || !within(A, B, i, j, d, e2)) continue;
                keep(i, j, counter, capacity, out_i, out_j, counts, both);
            }
        }
    }
}
}  // extern "C"
"""


@functools.lru_cache(maxsize=None)
def compiled_module(screen: str, real: str, q: int):
    """The kernel for projections of ``q`` columns (padded) in C type
    ``screen`` and points of C type ``real`` (NVRTC, once per process and
    combination)."""
    defines = (f"-DFT={screen}", f"-DREAL={real}", f"-DQ={q}", f"-DIS_FLOAT={int(real == 'float')}",
               f"-DTHREADS={THREADS}", f"-DROWS={ROWS}", f"-DCHUNK={CHUNK}")
    return cupy().RawModule(code=SOURCE, options=defines)


def _padded(P, cols, dtype, cp):
    """P (n x q, float64) rounded to ``dtype``, zero-padded to ``cols``
    columns, C-contiguous."""
    out = cp.zeros((P.shape[0], cols), dtype=dtype)
    out[:, :P.shape[1]] = P
    return out


def run(plan, R, S, eps, timings=None):
    """The principal-component screen's join on the GPU of conditioned
    device (or host) points (R None: the self-join of S) by the request
    ``plan`` (``plan.projection``): a NeighborTable or int64 counts (on the
    device for the "device" memory routes), equal to the grid path's and
    the brute force's.  Reports the plan.  Cost: module docstring."""
    job = Screening(plan, R, S, eps)
    if job.empty:
        return job.result(timings)
    cp, Q, S, self_join, nq, ns, d = job.cp, job.Q, job.S, job.self_join, job.nq, job.ns, job.d
    proj = plan.projection
    q = proj.components
    cols = (q + 3) // 4 * 4
    stype = np.float32 if proj.screen == "float32" else np.float64
    with phase(timings, "project"):
        Pq, _, rq, Ps, _, rs = projected(Q, S, proj.basis, cp)
        radius = float(cp.maximum(rq.max(), rs.max()))
        PS = _padded(Ps, cols, stype, cp)
        PQ = PS if self_join else _padded(Pq, cols, stype, cp)
        del Pq, Ps, rq, rs
    thr = stype(projected_threshold(float(job.e2), d, plan.precision, proj.sigma, q, radius,
                                    proj.screen))
    kernel = compiled_module("float" if stype == np.float32 else "double", job.real,
                             cols).get_function("screen_projected")
    tile = THREADS * ROWS
    row_tiles, col_tiles = -(-nq // tile), -(-ns // tile)
    blocks = col_tiles * (col_tiles + 1) // 2 if self_join else row_tiles * col_tiles
    head = (PQ, PS, np.int64(nq), np.int64(ns), np.int64(col_tiles), np.int32(self_join))
    tail = (thr, Q, S, np.int32(d), job.e2)
    # counts need no check between launches; the pairs' buffer is checked a slice at a time
    step = 1 << 30 if job.counts is not None else SLICE
    with phase(timings, "screen"):
        for first in range(0, blocks, step):
            grid = (min(blocks - first, step),)
            args = head + (np.int64(first),) + tail
            job.launch(lambda out: kernel(grid, (THREADS,), args + out))
    del PQ, PS
    return job.result(timings)
