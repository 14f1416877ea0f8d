// Epsilon-join kernels for skyjoin (compiled at run time by cupy.RawModule / NVRTC).
//
// Templated on the number of dimensions D and the working type T, so that any d
// works without a rebuild; every other choice (cell pattern, threads per query,
// schedule) is a template argument too, and the host instantiates only what a
// call needs (name_expressions).  Compile with --fmad=false: the distance test
// must be evaluated with the same operations, in the same order, as the CPU
// engine (sum over k = 0..d-1 of (x_k - y_k)^2, no fused multiply-add).
//
// Data layout (see gpu_grid.py): the points of a grid are stored reordered by
// cell; a query cell c owns a list of candidate *ranges* of data positions
// (ranges[rptr[c] .. rptr[c+1]]), each range being the points of up to three
// cells that are adjacent along the last indexed dimension (contiguous in the
// reordered data).  A query compares itself to every point of its ranges.

typedef long long i64;

#define PATTERN_FULL 0   // every adjacent cell (GPUCALCGLOBAL, Gowanlock & Karsin 2018 Alg. 1)
#define PATTERN_UNI  1   // UNICOMP (Gowanlock & Karsin 2018 §V-B)
#define PATTERN_LID  2   // LID-UNICOMP (Gallet & Gowanlock 2019 §III-B)

// ---------------------------------------------------------------------------
// Searching the sorted cell ids B (Gowanlock & Karsin 2018 §IV-D).
// ---------------------------------------------------------------------------

// First index i >= start with a[i] >= key, galloping from start (a[start-1] < key).
__device__ __forceinline__ int gallop_lower_bound(const i64* __restrict__ a, int n, int start, i64 key)
{
    int lo = start, step = 1, hi = start;
    while (hi < n && a[hi] < key) {
        lo = hi + 1;
        hi = start + step;
        step <<= 1;
    }
    if (hi > n) hi = n;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (a[mid] < key) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// The candidate ranges of each query cell: one thread per query cell enumerates
// the adjacent cells (all combinations of ranks within [rank_lo, rank_hi] in the
// first K-1 indexed dimensions; the last dimension is a contiguous id range)
// and looks each up in the sorted non-empty cell ids.  PATTERN_UNI keeps only
// the cells of the UNICOMP pattern (the own cell is handled by the join kernel).
// FILL = false writes the number of ranges of each cell; FILL = true writes them.
template<int K, int PATTERN, bool FILL>
__global__ void build_cell_ranges(
    int nqc,
    const int* __restrict__ rank_lo,     // (nqc, K) first neighbouring rank per dim
    const int* __restrict__ rank_hi,     // (nqc, K) last neighbouring rank per dim (inclusive)
    const int* __restrict__ own_rank,    // (nqc, K) for PATTERN_UNI (self-join)
    const i64* __restrict__ own_coord,   // (nqc, K) cell coordinates (parity), PATTERN_UNI
    const i64* __restrict__ cell_ids, int ncells,
    const int* __restrict__ cell_start,  // (ncells + 1)
    const i64* __restrict__ strides,     // (K)
    int* __restrict__ nranges,           // (nqc) out when !FILL
    const i64* __restrict__ rptr,        // (nqc + 1) when FILL
    int2* __restrict__ ranges)           // out when FILL
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nqc) return;
    int lo[K], hi[K], cur[K];
    i64 st[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
        lo[j] = rank_lo[(i64)c * K + j];
        hi[j] = rank_hi[(i64)c * K + j];
        cur[j] = lo[j];
        st[j] = strides[j];
    }
    int count = 0;
    i64 w = FILL ? rptr[c] : 0;
    bool empty = false;
#pragma unroll
    for (int j = 0; j < K; ++j) empty |= (lo[j] > hi[j]);
    if (!empty) {
        int prev = 0;
        while (true) {
            bool take = true, split_own = false;
            if (PATTERN == PATTERN_UNI) {
                int j = 0;
                while (j < K - 1 && cur[j] == own_rank[(i64)c * K + j]) ++j;
                take = (own_coord[(i64)c * K + j] & 1) != 0;
                split_own = (j == K - 1);
            }
            if (take) {
                i64 base = 0;
#pragma unroll
                for (int j = 0; j < K - 1; ++j) base += (i64)cur[j] * st[j];
                i64 key_lo = base + (i64)lo[K - 1] * st[K - 1];
                i64 key_hi = base + (i64)hi[K - 1] * st[K - 1];
                int a = gallop_lower_bound(cell_ids, ncells, prev, key_lo);
                prev = a;
                int b = a;
                while (b < ncells && cell_ids[b] <= key_hi) ++b;
                if (a < b) {
                    if (split_own) {
                        // own cell is c itself (self-join): the cells before and after it
                        int s0 = cell_start[a], e0 = cell_start[c];
                        int s1 = cell_start[c + 1], e1 = cell_start[b];
                        if (s0 < e0) { if (FILL) ranges[w + count] = make_int2(s0, e0); ++count; }
                        if (s1 < e1) { if (FILL) ranges[w + count] = make_int2(s1, e1); ++count; }
                    } else {
                        if (FILL) ranges[w + count] = make_int2(cell_start[a], cell_start[b]);
                        ++count;
                    }
                }
            }
            int j = K - 2;
            while (j >= 0) {
                if (++cur[j] <= hi[j]) break;
                cur[j] = lo[j];
                --j;
            }
            if (j < 0) break;
        }
    }
    if (!FILL) nranges[c] = count;
}

// ---------------------------------------------------------------------------
// The distance test: the same operations, in the same order, as the CPU engine.
// ---------------------------------------------------------------------------
template<int D, typename T>
__device__ __forceinline__ bool within_eps(const T (&q)[D], const T* __restrict__ p, T eps2)
{
    T s = (T)0;
#pragma unroll
    for (int k = 0; k < D; ++k) {
        T t = q[k] - p[k];
        s = s + t * t;
    }
    return s <= eps2;
}

__device__ __forceinline__ unsigned lanemask_lt(int lane)
{
    return lane == 0 ? 0u : (0xffffffffu >> (32 - lane));
}

// Emit one pair (row <- col) with a per-row atomic cursor (UNICOMP patterns).
__device__ __forceinline__ void emit_atomic(int row, int col, int row_lo, int row_hi,
                                            int* __restrict__ cursor,
                                            const i64* __restrict__ indptr, i64 out_base,
                                            int* __restrict__ out, int* __restrict__ overflow)
{
    if (row < row_lo || row >= row_hi) return;
    int slot = atomicAdd(cursor + row, 1);          // cursor counts entries written in this row
    i64 pos = indptr[row] + slot;
    if (pos >= indptr[row + 1]) { *overflow = 1; return; }
    out[pos - out_base] = col;
}

// GPUCALCGLOBAL (Gowanlock & Karsin 2018 Alg. 1; Gallet & Gowanlock 2019 Alg. 1),
// with KT threads per query point (Gallet & Gowanlock 2019 §III-A), the cell
// patterns full / UNICOMP / LID-UNICOMP, and either a plain launch over a query
// list (grid order or SORTBYWL order) or WORKQUEUE (§III-D: a global atomic
// counter hands out the queries, sorted from most to least work).
//
// FILL = false: counts[row] = |N_eps(row)| (full pattern: plain store; UNICOMP
// patterns: atomics on both rows of a pair).  FILL = true: writes the columns
// of each row into out[indptr[row] - out_base ...]; a row that would receive
// more entries than indptr allows sets *overflow (no write out of bounds).
template<int D, typename T, int PATTERN, int KT, bool FILL, bool WQ>
__global__ void gpucalc_global(
    const T* __restrict__ qpts, const int* __restrict__ qcell, const int* __restrict__ qorder,
    const T* __restrict__ dpts, const int* __restrict__ dorder,
    const int* __restrict__ dcell_start,
    const i64* __restrict__ rptr, const int2* __restrict__ ranges,
    const int* __restrict__ qlist, int nq,
    T eps2, int self_join, int include_self,
    int* __restrict__ counts,
    const i64* __restrict__ indptr, i64 out_base, int* __restrict__ out,
    int* __restrict__ cursor, int row_lo, int row_hi,
    int* __restrict__ work_counter, int* __restrict__ overflow)
{
    const int lane = threadIdx.x & 31;
    const int gl = lane % KT;                 // lane within the query's group
    const int grp = lane / KT;                // group within the warp
    const unsigned gmask = (KT == 32) ? 0xffffffffu : (((1u << KT) - 1u) << (grp * KT));
    int qi;
    int wq_base = 0;
    if (WQ) {
        if (lane == 0) wq_base = atomicAdd(work_counter, 32 / KT);
        wq_base = __shfl_sync(0xffffffffu, wq_base, 0);
        qi = wq_base + grp;
    } else {
        qi = (int)(((i64)blockIdx.x * blockDim.x + threadIdx.x) / KT);
    }
    while (true) {
        if (WQ && wq_base >= nq) return;
        if (qi < nq) {
            const int p = qlist[qi];
            const int c = qcell[p];
            const int row = qorder[p];
            T q[D];
#pragma unroll
            for (int k = 0; k < D; ++k) q[k] = qpts[(i64)p * D + k];
            int cnt = 0;
            i64 wpos = 0, wend = 0;
            if (FILL && PATTERN == PATTERN_FULL) {
                wpos = indptr[row];
                wend = indptr[row + 1];
            }
            const i64 r0 = rptr[c], r1 = rptr[c + 1];
            // UNICOMP visits the own cell separately (pairs after p); others skip it
            const int extra = (PATTERN == PATTERN_UNI) ? 1 : 0;
            for (i64 r = r0; r < r1 + extra; ++r) {
                int s, e;
                if (r < r1) { int2 rg = ranges[r]; s = rg.x; e = rg.y; }
                else { s = p + 1; e = dcell_start[c + 1]; }
                if (PATTERN == PATTERN_LID && s <= p) s = p + 1;
                for (int b = s; b < e; b += KT) {
                    const int j = b + gl;
                    bool hit = false;
                    if (j < e) {
                        hit = within_eps<D, T>(q, dpts + (i64)j * D, eps2);
                        if (PATTERN == PATTERN_FULL && self_join && !include_self && j == p) hit = false;
                    }
                    if (PATTERN == PATTERN_FULL) {
                        if (FILL) {
                            if (KT == 1) {
                                if (hit) {
                                    if (wpos < wend) out[wpos - out_base] = dorder[j];
                                    else *overflow = 1;
                                    ++wpos;
                                }
                            } else {
                                unsigned m = __ballot_sync(gmask, hit);
                                m = (KT == 32) ? m : (m >> (grp * KT));
                                if (hit) {
                                    i64 at = wpos + __popc(m & lanemask_lt(gl));
                                    if (at < wend) out[at - out_base] = dorder[j];
                                    else *overflow = 1;
                                }
                                wpos += __popc(m);
                            }
                        } else {
                            cnt += hit ? 1 : 0;
                        }
                    } else if (hit) {
                        // one distance gives both (row, col) and (col, row)
                        const int col = dorder[j];
                        if (FILL) {
                            emit_atomic(row, col, row_lo, row_hi, cursor, indptr, out_base, out, overflow);
                            emit_atomic(col, row, row_lo, row_hi, cursor, indptr, out_base, out, overflow);
                        } else {
                            ++cnt;
                            atomicAdd(counts + col, 1);
                        }
                    }
                }
            }
            if (PATTERN != PATTERN_FULL && include_self && gl == 0) {
                if (FILL) emit_atomic(row, row, row_lo, row_hi, cursor, indptr, out_base, out, overflow);
                else ++cnt;
            }
            if (!FILL) {
                if (KT > 1) {
#pragma unroll
                    for (int off = KT / 2; off > 0; off >>= 1) cnt += __shfl_xor_sync(gmask, cnt, off);
                }
                if (gl == 0) {
                    if (PATTERN == PATTERN_FULL) counts[row] = cnt;
                    else atomicAdd(counts + row, cnt);
                }
            }
            if (FILL && PATTERN == PATTERN_FULL && gl == 0 && wpos != wend) *overflow = 1;
        }
        if (!WQ) return;
        if (lane == 0) wq_base = atomicAdd(work_counter, 32 / KT);
        wq_base = __shfl_sync(0xffffffffu, wq_base, 0);
        qi = wq_base + grp;
    }
}

// GPUCALCSHARED (Gowanlock et al., HYBRID-DBSCAN §4.2): one block per query
// cell segment; the block's query points and, tile by tile, the points of
// each candidate range are paged through shared memory.  Full pattern, one
// thread per query point.
template<int D, typename T, bool FILL>
__global__ void gpucalc_shared(
    const T* __restrict__ qpts, const int* __restrict__ qcell, const int* __restrict__ qorder,
    const T* __restrict__ dpts, const int* __restrict__ dorder,
    const i64* __restrict__ rptr, const int2* __restrict__ ranges,
    const int* __restrict__ qlist, const int* __restrict__ seg_start, int nseg,
    T eps2, int self_join, int include_self,
    int* __restrict__ counts,
    const i64* __restrict__ indptr, i64 out_base, int* __restrict__ out,
    int* __restrict__ overflow)
{
    extern __shared__ unsigned char smem_raw[];
    T* tile = reinterpret_cast<T*>(smem_raw);          // blockDim.x * D values
    const int seg = blockIdx.x;
    if (seg >= nseg) return;
    const int q0 = seg_start[seg], q1 = seg_start[seg + 1];
    const int c = qcell[qlist[q0]];
    const i64 r0 = rptr[c], r1 = rptr[c + 1];
    for (int qb = q0; qb < q1; qb += blockDim.x) {
        const int qi = qb + threadIdx.x;
        const bool active = qi < q1;
        int p = 0, row = 0;
        T q[D];
        if (active) {
            p = qlist[qi];
            row = qorder[p];
#pragma unroll
            for (int k = 0; k < D; ++k) q[k] = qpts[(i64)p * D + k];
        } else {
#pragma unroll
            for (int k = 0; k < D; ++k) q[k] = (T)0;
        }
        int cnt = 0;
        i64 wpos = 0, wend = 0;
        if (FILL && active) { wpos = indptr[row]; wend = indptr[row + 1]; }
        for (i64 r = r0; r < r1; ++r) {
            const int2 rg = ranges[r];
            for (int t0 = rg.x; t0 < rg.y; t0 += blockDim.x) {
                const int nt = min((int)blockDim.x, rg.y - t0);
                __syncthreads();
                for (int x = threadIdx.x; x < nt * D; x += blockDim.x) tile[x] = dpts[(i64)t0 * D + x];
                __syncthreads();
                if (active) {
                    for (int u = 0; u < nt; ++u) {
                        const int j = t0 + u;
                        bool hit = within_eps<D, T>(q, tile + u * D, eps2);
                        if (self_join && !include_self && j == p) hit = false;
                        if (hit) {
                            if (FILL) {
                                if (wpos < wend) out[wpos - out_base] = dorder[j];
                                else *overflow = 1;
                                ++wpos;
                            } else {
                                ++cnt;
                            }
                        }
                    }
                }
            }
        }
        if (active) {
            if (FILL) { if (wpos != wend) *overflow = 1; }
            else counts[row] = cnt;
        }
    }
}

// ---------------------------------------------------------------------------
// Sorting the columns within each row of a filled batch (sort=True).
// ---------------------------------------------------------------------------

// Rows of at most 64 entries: one thread per row, insertion sort in place.
__global__ void sort_rows_small(const int* __restrict__ rows, int nrows,
                                const i64* __restrict__ indptr, i64 out_base, int* __restrict__ out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nrows) return;
    int row = rows[t];
    int* a = out + (indptr[row] - out_base);
    int n = (int)(indptr[row + 1] - indptr[row]);
    for (int i = 1; i < n; ++i) {
        int v = a[i];
        int j = i - 1;
        while (j >= 0 && a[j] > v) { a[j + 1] = a[j]; --j; }
        a[j + 1] = v;
    }
}

// Longer rows: one block per row, bitonic sort in (dynamic) shared memory of
// m_cap ints (a power of two at least the row length).
__global__ void sort_rows_bitonic(const int* __restrict__ rows, int nrows,
                                  const i64* __restrict__ indptr, i64 out_base, int* __restrict__ out)
{
    extern __shared__ int s[];
    int b = blockIdx.x;
    if (b >= nrows) return;
    int row = rows[b];
    int* a = out + (indptr[row] - out_base);
    int n = (int)(indptr[row + 1] - indptr[row]);
    int m = 1;
    while (m < n) m <<= 1;
    for (int i = threadIdx.x; i < m; i += blockDim.x) s[i] = (i < n) ? a[i] : 0x7fffffff;
    __syncthreads();
    for (int k = 2; k <= m; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < m; i += blockDim.x) {
                int l = i ^ j;
                if (l > i) {
                    int x = s[i], y = s[l];
                    bool up = (i & k) == 0;
                    if ((x > y) == up) { s[i] = y; s[l] = x; }
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) a[i] = s[i];
}
