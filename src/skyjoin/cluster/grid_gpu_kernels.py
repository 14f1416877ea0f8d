"""The CUDA kernels of the GPU grid DBSCAN (:mod:`skyjoin.cluster.grid_gpu`,
whose docstring gives the method and the stages that launch them).

One source, compiled per point type and dimension: ``REAL`` is double or
float, ``DIMS`` the points' dimension (the loops over the coordinates
unroll and the cell coordinates stay in registers: figures in
docs/decisions/dbscan-fit-path.md), the
cells' boxes are floats rounded outwards whatever ``REAL`` is, and every
distance decision is the join's test in ``REAL`` with no fused
multiply-add (``--fmad=false``).  The union-find is
:data:`skyjoin.cluster.table_gpu.UNION_FIND`, the links over it
:data:`skyjoin.cluster.grid_gpu_links.LINKS`, the clusters' numbering
:data:`skyjoin.cluster.grid_gpu_numbering.NUMBERING`.
"""

from __future__ import annotations

import functools

from .._core.device import cupy
from .grid_gpu_links import LINKS
from .grid_gpu_numbering import NUMBERING
from .table_gpu import UNION_FIND

__all__ = ["SOURCE", "compiled_module"]

SOURCE = r"""
extern "C" {
""" + UNION_FIND + r"""

#ifndef REAL
#define REAL double
#endif
#define MAXD 4
// the points' dimension: DIMS where the module is compiled for one
// (compiled_module), so that the loops over the coordinates unroll and the
// cell coordinates stay in registers; else the kernel's argument
#ifdef DIMS
#define FIXED_D(dims) DIMS
#else
#define FIXED_D(dims) (dims)
#endif
// The searches (core_flags, link_between, border) are bound by the latency of
// their loads and by divergence: at 256 threads a block they are held to 32
// registers, so that 8 blocks fit an SM (full occupancy; 56 registers left
// it half full: docs/decisions/dbscan-fit-path.md).
#define SEARCH_BOUNDS __launch_bounds__(256, 8)

// squared distance of sorted points a and b, summed over k in order, in REAL
__device__ __forceinline__ REAL d2(const REAL* X, int d, long long a, long long b) {
    REAL s = 0;
    for (int k = 0; k < d; ++k) { REAL t = X[a * d + k] - X[b * d + k]; s += t * t; }
    return s;
}

// whether a pair at squared distance s (d2) is within eps: at most sure2, yes;
// in (sure2, eps2], undecided: the flag is raised and the whole answer is
// discarded by the caller; above eps2, no.  sure2 == eps2 (the Euclidean
// metric) leaves nothing undecided.
#define DECIDE_ARGS REAL eps2, REAL sure2, unsigned int* undecided
__device__ __forceinline__ bool within(REAL s, DECIDE_ARGS) {
    if (s <= sure2) return true;
    if (s <= eps2) *undecided = 1;
    return false;
}

// The box of a cell: a cell of two points or more has one stored (box_slot[t],
// its place among those cells; floats rounded outwards), a cell of one point
// (box_slot -1) is its point.  BOX_ARGS: what reads them.
#define BOX_ARGS const REAL* X, int d, const int* start, const int* box_slot, \
    const float* box_lo, const float* box_hi
__device__ __forceinline__ void box_at(BOX_ARGS, long long t, int k, REAL* lo, REAL* hi) {
    long long b = box_slot[t];
    if (b < 0) {
        *lo = *hi = X[(long long)start[t] * d + k];
    } else {
        *lo = (REAL)box_lo[b * d + k];
        *hi = (REAL)box_hi[b * d + k];
    }
}

// whether no point of cell t can be within eps of a point of cell u (box gap
// test), or with t < 0 no point of cell u within eps of point p.  Exact
// although the boxes are floats rounded outwards: every rounding is monotone,
// so the gaps, their squares and their sum can only come out smaller than the
// join's test of any pair of the two cells (or of p and a point of u) computes.
__device__ __forceinline__ bool apart(BOX_ARGS, long long p, long long t, long long u,
                                      REAL eps2) {
    REAL s = 0;
    for (int k = 0; k < d; ++k) {
        REAL tlo, thi, ulo, uhi;
        if (t < 0) tlo = thi = X[p * d + k];
        else box_at(X, d, start, box_slot, box_lo, box_hi, t, k, &tlo, &thi);
        box_at(X, d, start, box_slot, box_lo, box_hi, u, k, &ulo, &uhi);
        REAL g = ulo - thi;
        REAL g2 = tlo - uhi;
        if (g2 > g) g = g2;
        if (g > 0) s += g * g;
    }
    return s > eps2;
}

// coordinate x in cells of the grid along a dimension (lo its bound, side the
// cells' side): the grid's one conversion to cell units
__device__ __forceinline__ double in_cells(double x, double lo, double side) {
    return (x - lo) / side;
}

// cell coordinates q of point p, in key order (korder[d - 1], the sparse one,
// last), and its place in its cell: f[j] = (x - lo) / side - q[j] along
// key-order dimension j, in cells (in [0, 1] up to rounding)
__device__ __forceinline__ void cell_place(const REAL* X, long long p, int d, const int* korder,
                                           const double* lo, double side,
                                           const long long* radix, long long* q, float* f) {
    for (int j = 0; j < d; ++j) {
        int k = korder[j];
        double u = in_cells((double)X[p * d + k], lo[k], side);
        long long v = (long long)floor(u);
        if (v < 0) v = 0; else if (v >= radix[k]) v = radix[k] - 1;
        q[j] = v;
        f[j] = (float)(u - (double)v);
    }
}

// cell coordinates of point p (cell_place without the place)
__device__ __forceinline__ void cell_of(const REAL* X, long long p, int d, const int* korder,
                                        const double* lo, double side, const long long* radix,
                                        long long* q) {
    float f[MAXD];
    cell_place(X, p, d, korder, lo, side, radix, q, f);
}

// Pruning by place: of pattern row j (row steps off, sparse steps [*a, *b]),
// only the steps that can hold a point within eps of the place [flo, fhi] (a
// point's, or a cell's box, in cells from its cell, cell_place) are kept:
// none when the row's column lies farther than eps, else those within the
// eps left beside it.  reach2 is (eps / side)^2 widened by 2^-10 (far beyond
// the join test's rounding, a few ulps of REAL), and every
// gap is shrunk by PLACE_SLACK (2^-10 of a cell, beyond the 2^-12 by which
// a cell coordinate can be off: index.fine_grid.MAX_ROW_GRID_RADIX), so that
// no pair that the join's test accepts is pruned.  Returns whether a step
// is left.
#define PLACE_SLACK (1.0f / 1024.0f)
__device__ __forceinline__ bool row_window(const float* flo, const float* fhi, const int* off,
                                           int d, float reach2, int* a, int* b) {
    float s = 0.0f;
    for (int k = 0; k < d - 1; ++k) {
        float o = (float)off[k];
        float g = fmaxf(o - fhi[k], flo[k] - o - 1.0f) - PLACE_SLACK;
        if (g > 0.0f) s += g * g;
    }
    if (s > reach2) return false;
    float zr = sqrtf(reach2 - s) + PLACE_SLACK;
    int lo = (int)ceilf(flo[d - 1] - zr - 1.0f), hi = (int)floorf(fhi[d - 1] + zr);
    if (lo > *a) *a = lo;
    if (hi < *b) *b = hi;
    return *a <= *b;
}

// the row at offset off (d - 1 steps) from the row of coordinates q, or -1 outside the grid
__device__ __forceinline__ long long row_at(const long long* q, int d, const int* korder,
                                            const long long* radix, const int* off) {
    long long r = 0;
    for (int j = 0; j < d - 1; ++j) {
        long long v = q[j] + off[j], R = radix[korder[j]];
        if (v < 0 || v >= R) return -1;
        r = r * R + v;
    }
    return r;
}

// the row of cell coordinates q (row_at at offset zero), and whether each of
// its row coordinates lies at least reach cells from both ends of the grid:
// then every pattern row j is inside it, at row r + row_delta[j]
__device__ __forceinline__ long long home_row(const long long* q, int d, const int* korder,
                                              const long long* radix, int reach, bool* inner) {
    long long r = 0;
    bool in = true;
    for (int j = 0; j < d - 1; ++j) {
        long long R = radix[korder[j]];
        if (q[j] < reach || q[j] >= R - reach) in = false;
        r = r * R + q[j];
    }
    *inner = in;
    return r;
}

// the slot of row r in the hash table of the non-empty rows (open addressing,
// linear probing; an empty slot holds -1), or -1 when row r holds no cell
__device__ __forceinline__ unsigned long long row_hash(long long r, unsigned long long mask) {
    unsigned long long x = (unsigned long long)r * 0x9E3779B97F4A7C15ull;
    return (x ^ (x >> 29)) & mask;
}

__device__ __forceinline__ long long row_find(const long long* hkeys, unsigned long long mask,
                                              long long r) {
    unsigned long long h = row_hash(r, mask);
    while (hkeys[h] != -1) {
        if (hkeys[h] == r) return (long long)h;
        h = (h + 1) & mask;
    }
    return -1;
}

// the slots [*a, *b) of row r whose sparse coordinate lies in [qlo, qhi]: the
// row's cells from the dense row table, or, without one (row_start null), from
// the hash table of the non-empty rows; then a binary search along the row
__device__ __forceinline__ void row_slots(const int* row_start, const int* cell_q,
                                          const long long* hkeys, const int* hfirst,
                                          const int* hend, unsigned long long mask,
                                          long long r, long long qlo, long long qhi,
                                          int* a, int* b) {
    int lo, end;
    if (row_start) {
        lo = row_start[r];
        end = row_start[r + 1];
    } else {
        long long h = row_find(hkeys, mask, r);
        if (h < 0) { *a = *b = 0; return; }
        lo = hfirst[h];
        end = hend[h];
    }
    int hi = end;
    while (lo < hi) {
        int mid = lo + ((hi - lo) >> 1);
        if (cell_q[mid] < qlo) lo = mid + 1; else hi = mid;
    }
    int e = lo;
    while (e < end && cell_q[e] <= qhi) ++e;
    *a = lo;
    *b = e;
}

__global__ void bin(const REAL* X, long long n, int dims, const int* korder, const double* lo,
                    double side, const long long* radix, long long* cell) {
    const int d = FIXED_D(dims);
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long q[MAXD];
    cell_of(X, i, d, korder, lo, side, radix, q);
    long long c = 0;
    for (int j = 0; j < d; ++j) c = c * radix[korder[j]] + q[j];
    cell[i] = c;
}

// each cell's sparse coordinate and, into cnt (rows + 1 zeros; null without a
// dense row table), each row's number of cells: a row's first cell adds -t, its
// last t + 1 (one thread both for a row of one cell), so that the exclusive
// scan of cnt is the first slot of every row
__global__ void row_counts(const long long* cells, long long m, long long rs, int* cell_q,
                           int* cnt) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long key = cells[t], r = key / rs, base = r * rs;
    cell_q[t] = (int)(key - base);
    if (!cnt) return;
    if (t == 0 || cells[t - 1] < base) atomicAdd(&cnt[r], -(int)t);
    if (t == m - 1 || cells[t + 1] >= base + rs) atomicAdd(&cnt[r], (int)t + 1);
}

// the hash table of the non-empty rows (row_slots): the first cell of each row
// inserts the row with its first slot, then the last cell writes the row's end
__global__ void row_hash_insert(const long long* cells, long long m, long long rs,
                                unsigned long long mask, long long* hkeys, int* hfirst) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long r = cells[t] / rs;
    if (t > 0 && cells[t - 1] / rs == r) return;
    unsigned long long h = row_hash(r, mask);
    while (true) {
        unsigned long long prev = atomicCAS((unsigned long long*)&hkeys[h],
                                            0xFFFFFFFFFFFFFFFFull, (unsigned long long)r);
        if (prev == 0xFFFFFFFFFFFFFFFFull) { hfirst[h] = (int)t; return; }
        h = (h + 1) & mask;
    }
}

__global__ void row_hash_ends(const long long* cells, long long m, long long rs,
                              unsigned long long mask, const long long* hkeys, int* hend) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long r = cells[t] / rs;
    if (t + 1 < m && cells[t + 1] / rs == r) return;
    hend[row_find(hkeys, mask, r)] = (int)(t + 1);
}

// the float at or below v, and at or above it (a box rounded outwards: 4 bytes a
// value whatever REAL is; (float)-1e39 is -inf)
__device__ __forceinline__ float float_below(REAL v) {
    float f = (float)v;
    if ((double)f > (double)v) f = v < -3.0e38 ? (float)-1.0e39 : nextafterf(f, (float)-1.0e39);
    return f;
}

__device__ __forceinline__ float float_above(REAL v) {
    float f = (float)v;
    if ((double)f < (double)v) f = v > 3.0e38 ? (float)1.0e39 : nextafterf(f, (float)1.0e39);
    return f;
}

// 1 for a cell of two points or more (its box is stored), 0 for a cell of one
__global__ void multi_cells(const int* start, long long m, int* box_slot) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < m) box_slot[t] = start[t + 1] - start[t] > 1 ? 1 : 0;
}

// each cell's bounding box (rounded outwards) at box_slot[t] (multi_cells scanned:
// its place among the cells of two points or more; -1 written for a cell of one
// point, whose box is its point), and whether it is close: its diagonal, in REAL
// from the exact box, within eps (then every pair of its points is)
__global__ void cell_boxes(const REAL* X, int dims, const int* start, long long m,
                           REAL eps2, int* box_slot, float* box_lo, float* box_hi,
                           unsigned char* close) {
    const int d = FIXED_D(dims);
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    long long a = start[t], b = start[t + 1];
    if (b - a == 1) {
        box_slot[t] = -1;
        close[t] = 1;
        return;
    }
    long long slot = box_slot[t];
    REAL s = 0;
    for (int k = 0; k < d; ++k) {
        REAL lo = X[a * d + k], hi = lo;
        for (long long p = a + 1; p < b; ++p) {
            REAL v = X[p * d + k];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        box_lo[slot * d + k] = float_below(lo);
        box_hi[slot * d + k] = float_above(hi);
        REAL w = hi - lo;
        s += w * w;
    }
    close[t] = s <= eps2 ? 1 : 0;
}

// the grid as the per-point kernels read it
#define GRID_ARGS const int* start, const int* point_slot, const int* row_start, \
    const long long* hkeys, const int* hfirst, const int* hend, unsigned long long mask, \
    const int* cell_q, const unsigned char* close, const int* box_slot, const float* box_lo, \
    const float* box_hi, const int* korder, const double* lo, double side, const long long* radix
#define PATTERN_ARGS int n_rows, const int* row_off, const int* row_lo, const int* row_hi, \
    const long long* row_delta, int reach, float reach2
// the same arguments, passed on
#define GRID_PASS start, point_slot, row_start, hkeys, hfirst, hend, mask, cell_q, close, \
    box_slot, box_lo, box_hi, korder, lo, side, radix
#define PATTERN_PASS n_rows, row_off, row_lo, row_hi, row_delta, reach, reach2

// The slots [*u0, *u1) of the cells of pattern row j, at steps [a, b] from the
// cell at coordinates c (row r0, inner: home_row), that can hold a point
// within eps of the place [flo, fhi] (row_window); false when none can or the
// row lies outside the grid.  The searches' one lookup of a pattern row.
__device__ __forceinline__ bool pattern_slots(GRID_ARGS, PATTERN_ARGS, int d, const long long* c,
                                              long long r0, bool inner, const float* flo,
                                              const float* fhi, int j, int a, int b, int* u0,
                                              int* u1) {
    if (!row_window(flo, fhi, row_off + j * (d - 1), d, reach2, &a, &b)) return false;
    long long r = inner ? r0 + row_delta[j] : row_at(c, d, korder, radix, row_off + j * (d - 1));
    if (r < 0) return false;
    row_slots(row_start, cell_q, hkeys, hfirst, hend, mask, r, c[d - 1] + a, c[d - 1] + b, u0, u1);
    return true;
}

__global__ void SEARCH_BOUNDS core_flags(const REAL* X, long long n, int dims, GRID_ARGS, PATTERN_ARGS,
                           DECIDE_ARGS, long long min_samples, unsigned char* core) {
    const int d = FIXED_D(dims);
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long t = point_slot[p];
    long long a = start[t], b = start[t + 1];
    long long cnt;
    if (close[t]) {
        cnt = b - a;
    } else {
        cnt = 0;
        for (long long q = a; q < b && cnt < min_samples; ++q)
            if (within(d2(X, d, p, q), eps2, sure2, undecided)) ++cnt;
    }
    if (cnt < min_samples) {
        long long c[MAXD];
        float f[MAXD];
        cell_place(X, p, d, korder, lo, side, radix, c, f);
        bool inner;
        long long r0 = home_row(c, d, korder, radix, reach, &inner);
        for (int j = 0; j < n_rows && cnt < min_samples; ++j) {
            int u0, u1;
            if (!pattern_slots(GRID_PASS, PATTERN_PASS, d, c, r0, inner, f, f, j, row_lo[j],
                               row_hi[j], &u0, &u1))
                continue;
            for (int u = u0; u < u1 && cnt < min_samples; ++u) {
                if (u == t || (box_slot[u] >= 0 &&
                               apart(X, d, start, box_slot, box_lo, box_hi, p, -1, u, eps2)))
                    continue;
                for (long long q = start[u]; q < start[u + 1] && cnt < min_samples; ++q)
                    if (within(d2(X, d, p, q), eps2, sure2, undecided)) ++cnt;
            }
        }
    }
    core[p] = cnt >= min_samples ? 1 : 0;
}

__global__ void first_core(const int* start, long long m, const unsigned char* core,
                           int* first) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    int f = -1;
    for (int p = start[t]; p < start[t + 1]; ++p) if (core[p]) { f = p; break; }
    first[t] = f;
}

""" + LINKS + NUMBERING + r"""// a non-core point takes the lowest label of its core neighbours
__global__ void SEARCH_BOUNDS border(const REAL* X, long long n, int dims, GRID_ARGS, PATTERN_ARGS,
                       const unsigned char* core, DECIDE_ARGS, long long* labels) {
    const int d = FIXED_D(dims);
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || core[p]) return;
    long long c[MAXD];
    float f[MAXD];
    cell_place(X, p, d, korder, lo, side, radix, c, f);
    bool inner;
    long long r0 = home_row(c, d, korder, radix, reach, &inner);
    long long best = -1;
    for (int j = 0; j < n_rows; ++j) {
        int u0, u1;
        if (!pattern_slots(GRID_PASS, PATTERN_PASS, d, c, r0, inner, f, f, j, row_lo[j], row_hi[j],
                           &u0, &u1))
            continue;
        for (int u = u0; u < u1; ++u) {
            if (box_slot[u] >= 0 && apart(X, d, start, box_slot, box_lo, box_hi, p, -1, u, eps2))
                continue;
            for (long long q = start[u]; q < start[u + 1]; ++q) {
                if (!core[q]) continue;
                long long lab = labels[q];
                if (best >= 0 && lab >= best) {
                    if (close[u]) break;        // one label per close cell: nothing lower here
                    continue;
                }
                if (within(d2(X, d, p, q), eps2, sure2, undecided)) {
                    best = lab;
                    if (close[u]) break;
                }
            }
        }
    }
    labels[p] = best;
}

}  // extern "C"
"""


@functools.lru_cache(maxsize=None)
def compiled_module(real: str, dims: int):
    """The compiled kernels for points of C type ``real`` ("double" or
    "float") and ``dims`` coordinates (NVRTC, once per process, type and
    dimension); no fused multiply-add.  The module runs its kernels for
    that dimension only: their loops over the coordinates unroll and the
    cell coordinates stay in registers."""
    cp = cupy()
    options = ("-std=c++17", "--fmad=false", f"-DREAL={real}", f"-DDIMS={int(dims)}")
    return cp.RawModule(code=SOURCE, options=options)
