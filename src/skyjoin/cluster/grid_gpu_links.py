"""The CUDA kernels that link the GPU grid DBSCAN's core points (lock-free
union-find over the sorted points): a part of
:data:`skyjoin.cluster.grid_gpu_kernels.SOURCE` (its ``REAL``, ``DIMS``, the
grid's and the pattern's arguments, the boxes and the searches, compiled
there), launched by :mod:`skyjoin.cluster.grid_gpu` after the core flags.

``link_within`` joins the core points of each cell (a thread a core point);
``link_between`` the cells of the positive pattern (a thread a cell, its
candidates tested through its warp's queue in shared memory), in one pass
or two (``grid_gpu.link_phases``).
"""

__all__ = ["LINKS"]

LINKS = r"""// core points p and q at squared distance s (d2): joined when within the sure
// radius and in two components; a pair in the band (sure2, eps2] raises the
// flag only where it would join two components (``within``).  The distance
// comes first: most candidate pairs are farther than eps, and it reads no
// parent.
__device__ __forceinline__ void link_pair(long long* parent, long long p, long long q, REAL s,
                                          DECIDE_ARGS) {
    if (!(s <= eps2) || uf_find(parent, p) == uf_find(parent, q)) return;
    if (s <= sure2) uf_union(parent, p, q);
    else *undecided = 1;
}

// core pairs inside each cell: a thread per point
__global__ void link_within(const REAL* X, long long n, int dims, const int* start,
                            const int* point_slot, const unsigned char* close,
                            const int* first, const unsigned char* core, DECIDE_ARGS,
                            long long* parent) {
    const int d = FIXED_D(dims);
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || !core[p]) return;
    long long t = point_slot[p];
    if (close[t]) {
        if (p != first[t]) uf_union(parent, first[t], p);
        return;
    }
    for (long long q = p + 1; q < start[t + 1]; ++q)
        if (core[q]) link_pair(parent, p, q, d2(X, d, p, q), eps2, sure2, undecided);
}

// the core pairs between cells t and u (u a candidate of t's pattern, first[u]
// >= 0): two close cells already joined are skipped before any distance;
// with single (two cells of one point under LINK_ONE_PASS) the distance comes
// first (link_pair), and only a pair within eps reads the parents
__device__ __forceinline__ void link_cells(const REAL* X, int d, const int* start,
                                           const int* box_slot, const float* box_lo,
                                           const float* box_hi, const unsigned char* close,
                                           const int* first, const unsigned char* core,
                                           long long t, long long u, bool single, DECIDE_ARGS,
                                           long long* parent) {
    if (single && box_slot[u] < 0) {
        long long p = start[t], q = start[u];
        link_pair(parent, p, q, d2(X, d, p, q), eps2, sure2, undecided);
        return;
    }
    bool both_close = close[t] && close[u];
    if (both_close && uf_find(parent, first[t]) == uf_find(parent, first[u])) return;
    if ((box_slot[t] >= 0 || box_slot[u] >= 0) &&
        apart(X, d, start, box_slot, box_lo, box_hi, 0, t, u, eps2)) return;
    for (long long p = first[t]; p < start[t + 1]; ++p) {
        if (!core[p]) continue;
        for (long long q = first[u]; q < start[u + 1]; ++q) {
            if (!core[q]) continue;
            if (!both_close) {
                link_pair(parent, p, q, d2(X, d, p, q), eps2, sure2, undecided);
            } else if (within(d2(X, d, p, q), eps2, sure2, undecided)) {
                uf_union(parent, p, q);     // one pair joins two close cells
                return;
            }
        }
    }
}

// The links' candidates go through a queue of each warp's in shared memory:
// a lane's search of a pattern row pushes the cells it found, and the warp
// tests them LINK_BATCH at a time, one pair a lane, so that the tests run
// with every lane busy instead of the lanes whose cells found candidates
// only (at tens of millions of mostly lone points, a few lanes of a warp).
#define LINK_ONE_PASS 2
#define LINK_BATCH 32
#define LINK_QUEUE (2 * LINK_BATCH)
#define LINK_WARPS (256 / 32)             // SEARCH_BOUNDS' block of 256
#define ALL_LANES 0xffffffffu

// a queued candidate: cell u, found by cell t's search of pattern row j
__device__ __forceinline__ void link_candidate(const REAL* X, int d, const int* start,
                                               const int* cell_q, const int* box_slot,
                                               const float* box_lo, const float* box_hi,
                                               const unsigned char* close,
                                               const unsigned char* row_adjacent, int phase,
                                               const int* first, const unsigned char* core,
                                               long long t, int u, int j, DECIDE_ARGS,
                                               long long* parent) {
    if (phase != LINK_ONE_PASS) {
        int step = cell_q[u] - cell_q[t];
        bool adjacent = row_adjacent[j] && step >= -1 && step <= 1;
        if (adjacent != (phase == 0)) return;
    }
    if (first[u] < 0) return;
    bool single = phase == LINK_ONE_PASS && box_slot[t] < 0;
    link_cells(X, d, start, box_slot, box_lo, box_hi, close, first, core, t, u, single,
               eps2, sure2, undecided, parent);
}

// core pairs between cell t and the cells of the positive pattern (each
// unordered pair of cells once): a thread per cell, its candidates tested
// through its warp's queue.  Phase 0 links the
// adjacent cells (every step at most one), phase 1 the farther ones, so that
// most far pairs find their cells already joined; phase 2 (LINK_ONE_PASS)
// links them all in one pass (link_cells).  Each pattern row is searched
// only where it can hold a point within eps of the cell's place (row_window).
__global__ void SEARCH_BOUNDS link_between(const REAL* X, int dims, long long m, GRID_ARGS, PATTERN_ARGS,
                             const unsigned char* row_adjacent, int phase,
                             const int* first, const unsigned char* core, DECIDE_ARGS,
                             long long* parent) {
    __shared__ int queue_u[LINK_WARPS][LINK_QUEUE];
    // a pattern row fits a byte: at most 5^3 rows (MAX_DIMS 4, cells of eps / sqrt(d))
    __shared__ unsigned char queue_from[LINK_WARPS][LINK_QUEUE], queue_row[LINK_WARPS][LINK_QUEUE];
    const int d = FIXED_D(dims);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, t0 = t - lane;
    bool live = t < m && first[t] >= 0;
    long long c[MAXD], r0 = 0;
    float flo[MAXD], fhi[MAXD];
    bool inner = false;
    if (live) {
        long long slot = box_slot[t];
        cell_place(X, start[t], d, korder, lo, side, radix, c, flo);
        for (int k = 0; k < d; ++k) {      // the place of the cell's box, rounded outwards
            if (slot < 0) { fhi[k] = flo[k]; continue; }
            int x = korder[k];
            flo[k] = (float)(in_cells((double)box_lo[slot * d + x], lo[x], side) - (double)c[k]);
            fhi[k] = (float)(in_cells((double)box_hi[slot * d + x], lo[x], side) - (double)c[k]);
        }
        r0 = home_row(c, d, korder, radix, reach, &inner);
    }
    int queued = 0;                         // the same in every lane
    for (int j = 0; j < n_rows; ++j) {
        int u0 = 0, u1 = 0;
        if (live && (phase != 0 || row_adjacent[j])) {
            int a = row_lo[j], b = row_hi[j];
            if (phase == 0) { a = a < -1 ? -1 : a; b = b > 1 ? 1 : b; }   // the adjacent cells only
            if (!pattern_slots(GRID_PASS, PATTERN_PASS, d, c, r0, inner, flo, fhi, j, a, b, &u0,
                               &u1))
                u0 = u1 = 0;
        }
        int left = u1 - u0;
        while (true) {                      // a candidate a lane at a time: most push one or none
            unsigned pushing = __ballot_sync(ALL_LANES, left > 0);
            if (!pushing) break;
            if (left > 0) {
                int at = queued + __popc(pushing & ((1u << lane) - 1u));
                queue_u[warp][at] = u0;
                queue_from[warp][at] = (unsigned char)lane;
                queue_row[warp][at] = (unsigned char)j;
                ++u0;
                --left;
            }
            queued += __popc(pushing);
            __syncwarp();
            if (queued >= LINK_BATCH) {
                queued -= LINK_BATCH;
                int u = queue_u[warp][queued + lane], from = queue_from[warp][queued + lane];
                int row = queue_row[warp][queued + lane];
                __syncwarp();
                link_candidate(X, d, start, cell_q, box_slot, box_lo, box_hi, close, row_adjacent,
                               phase, first, core, t0 + from, u, row, eps2, sure2, undecided,
                               parent);
            }
        }
    }
    __syncwarp();
    if (lane < queued)
        link_candidate(X, d, start, cell_q, box_slot, box_lo, box_hi, close, row_adjacent, phase,
                       first, core, t0 + queue_from[warp][lane], queue_u[warp][lane],
                       queue_row[warp][lane], eps2, sure2, undecided, parent);
}

"""
