// Device primitives of the GPU first-call paths: skyjoin._core.device_prims.
// Compiled with reduce.cu as one module (one NVRTC call per process), so that a
// first call compiles one module instead of one CuPy routine per operation and
// dtype.  Every kernel is a grid-stride loop unless it says otherwise; copies go
// by item size (U: an unsigned type of the item's size), so one instantiation
// serves every dtype of that size.  Arithmetic that must match the CPU grid uses
// the _rn intrinsics (never contracted into a fused multiply-add).

typedef long long i64;

#define GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); \
         i += (i64)gridDim.x * blockDim.x)

// dst[i] = (To)src[i]
template <typename Ti, typename To>
__global__ void cast(const Ti* __restrict__ src, i64 n, To* __restrict__ dst) {
    GRID_STRIDE(i, n) dst[i] = (To)src[i];
}

// dst[i * step] = v
template <typename U>
__global__ void fill(U* dst, i64 n, i64 step, U v) {
    GRID_STRIDE(i, n) dst[i * step] = v;
}

// dst[i] = start + i
template <typename T>
__global__ void iota(T* dst, i64 n, T start) {
    GRID_STRIDE(i, n) dst[i] = start + (T)i;
}

// x[i] = -x[i]
template <typename T>
__global__ void negate(T* x, i64 n) {
    GRID_STRIDE(i, n) x[i] = -x[i];
}

// Rows of d items: dst[i, :] = src[idx[i], :] (n rows).  dst may be idx itself
// when d == 1 and the item sizes agree (each thread reads idx[i] before it writes).
template <typename U, typename I>
__global__ void gather_rows(const U* src, const I* idx, i64 n, int d, U* dst) {
    GRID_STRIDE(t, n * d) {
        i64 i = t / d, j = t - i * d;
        dst[t] = src[(i64)idx[i] * d + j];
    }
}

// dst[idx[i]] = i: the inverse of a permutation idx.
template <typename I, typename T>
__global__ void scatter_iota(const I* idx, i64 n, T* dst) {
    GRID_STRIDE(i, n) dst[idx[i]] = (T)i;
}

// flags[i] = 1 where a run of equal items of keys starts (bitwise equality), else 0.
template <typename U>
__global__ void run_flags(const U* keys, i64 n, int* flags) {
    GRID_STRIDE(i, n) flags[i] = (i == 0 || keys[i] != keys[i - 1]) ? 1 : 0;
}

// keys[i] = keys[i] << shift | i: each key (non-negative, below 2^(bits - 1 -
// shift)) packed above its index, so that a sort of the keys alone is stable.
template <typename T>
__global__ void pack_index(T* keys, i64 n, int shift) {
    GRID_STRIDE(i, n) keys[i] = (keys[i] << shift) | (T)i;
}

// Of sorted packed keys (pack_index): the index under each (order[i]) and
// where each run of equal keys starts (flags[i] = 1 at a run's first
// position, else 0; run_flags for keys not packed).
template <typename T>
__global__ void unpack_runs(const T* packed, i64 n, int shift, int* order, int* flags) {
    const T low = (T)(((T)1 << shift) - 1);
    GRID_STRIDE(i, n) {
        const T v = packed[i];
        order[i] = (int)(v & low);
        flags[i] = (i == 0 || (v >> shift) != (packed[i - 1] >> shift)) ? 1 : 0;
    }
}

// keys[r] = packed[starts[r]] >> shift: the key of each run (unpack_runs)
template <typename T>
__global__ void run_keys(const T* packed, const int* starts, i64 m, int shift, i64* keys) {
    GRID_STRIDE(r, m) keys[r] = (i64)(packed[starts[r]] >> shift);
}

// The positions p with pos[p] != pos[p - 1] (pos[-1] taken as -1), written at
// out[pos[p]]: with pos the inclusive scan of 0/1 flags minus one, the positions
// of the flags, in order (a compaction); out[count] = n when tail != 0.
template <typename P, typename I>
__global__ void compact_from_scan(const P* pos, i64 n, I* out, int tail) {
    GRID_STRIDE(i, n) {
        P prev = i == 0 ? (P)-1 : pos[i - 1];
        if (pos[i] != prev) out[pos[i]] = (I)i;
    }
    if (tail && blockIdx.x == 0 && threadIdx.x == 0) out[n ? (i64)pos[n - 1] + 1 : 0] = (I)n;
}

// ---------------------------------------------------------------------------
// Scan (prefix sums), exact in integers, three launches: per-chunk sums, a scan
// of the chunk sums by one block, and each chunk scanned in tiles of
// SCAN_ITEMS items a thread from its offset.  out[i] = init + sum of in[0 .. i]
// (inclusive) or of in[0 .. i-1] (exclusive).  out may be in.  blockDim must
// be 256.
// ---------------------------------------------------------------------------
#define SCAN_THREADS 256
#define SCAN_ITEMS 8
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)
// a tile's slot k in shared memory, one word of padding every 32: a thread's
// SCAN_ITEMS consecutive items then lie in distinct banks across its warp
#define SCAN_SLOT(k) ((k) + ((k) >> 5))

template <typename T>
__device__ __forceinline__ T block_inclusive_scan(T v, T* warp_tot) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        T u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    if (lane == 31) warp_tot[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T w = lane < SCAN_THREADS / 32 ? warp_tot[lane] : (T)0;
#pragma unroll
        for (int o = 1; o < SCAN_THREADS / 32; o <<= 1) {
            T u = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += u;
        }
        if (lane < SCAN_THREADS / 32) warp_tot[lane] = w;   // inclusive warp totals
    }
    __syncthreads();
    if (warp > 0) v += warp_tot[warp - 1];
    return v;
}

template <typename Ti, typename To>
__global__ void scan_chunk_sums(const Ti* in, i64 n, i64 chunk, To* part) {
    __shared__ To s[SCAN_THREADS];
    const i64 a = blockIdx.x * chunk, b = min(n, a + chunk);
    To acc = 0;
    i64 i = a + threadIdx.x;
    for (; i + 3 * SCAN_THREADS < b; i += 4 * SCAN_THREADS) {   // four loads in flight
        const Ti v0 = in[i], v1 = in[i + SCAN_THREADS], v2 = in[i + 2 * SCAN_THREADS],
                 v3 = in[i + 3 * SCAN_THREADS];
        acc += (To)v0 + (To)v1 + (To)v2 + (To)v3;
    }
    for (; i < b; i += SCAN_THREADS) acc += (To)in[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = SCAN_THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

// One block: part[0 .. nb) becomes its exclusive scan (nb <= 1024).
template <typename To>
__global__ void scan_chunk_offsets(To* part, int nb) {
    __shared__ To s[1024];
    for (int i = threadIdx.x; i < nb; i += blockDim.x) s[i] = part[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        To acc = 0;
        for (int i = 0; i < nb; ++i) { To v = s[i]; s[i] = acc; acc += v; }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += blockDim.x) part[i] = s[i];
}

// Each tile: loaded across the block (coalesced, every load in flight), each
// thread's SCAN_ITEMS consecutive items summed, the block's scan of those sums,
// then each thread's items scanned from its offset and stored across the block.
template <typename Ti, typename To>
__global__ void scan_chunks(const Ti* in, i64 n, i64 chunk, const To* part, To init,
                            int inclusive, To* out) {
    __shared__ To tile[SCAN_SLOT(SCAN_TILE)];
    __shared__ To warp_tot[SCAN_THREADS / 32];
    __shared__ To carry_s;
    const i64 a = blockIdx.x * chunk, b = min(n, a + chunk);
    const int mine = threadIdx.x * SCAN_ITEMS;
    To carry = init + part[blockIdx.x];
    for (i64 t0 = a; t0 < b; t0 += SCAN_TILE) {
#pragma unroll
        for (int r = 0; r < SCAN_ITEMS; ++r) {
            const int k = r * SCAN_THREADS + threadIdx.x;
            tile[SCAN_SLOT(k)] = t0 + k < b ? (To)in[t0 + k] : (To)0;
        }
        __syncthreads();
        To v[SCAN_ITEMS], sum = 0;
#pragma unroll
        for (int r = 0; r < SCAN_ITEMS; ++r) {
            v[r] = tile[SCAN_SLOT(mine + r)];
            sum += v[r];
        }
        const To inc = block_inclusive_scan<To>(sum, warp_tot);
        To run = carry + (inc - sum);
#pragma unroll
        for (int r = 0; r < SCAN_ITEMS; ++r) {
            run += v[r];
            tile[SCAN_SLOT(mine + r)] = inclusive ? run : run - v[r];
        }
        if (threadIdx.x == SCAN_THREADS - 1) carry_s = inc;
        __syncthreads();
#pragma unroll
        for (int r = 0; r < SCAN_ITEMS; ++r) {
            const int k = r * SCAN_THREADS + threadIdx.x;
            if (t0 + k < b) out[t0 + k] = tile[SCAN_SLOT(k)];
        }
        carry += carry_s;
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// Sorted tables.
// ---------------------------------------------------------------------------

// First index i in [0, m) with a[i] >= v (RIGHT: a[i] > v), or m.
template <typename T, bool RIGHT>
__device__ __forceinline__ i64 bound(const T* a, i64 m, T v) {
    i64 lo = 0, hi = m;
    while (lo < hi) {
        i64 mid = (lo + hi) >> 1;
        if (RIGHT ? !(v < a[mid]) : a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// out[i] = index of v[i] in the sorted table (m items): left or right side.
template <typename T, typename I>
__global__ void searchsorted(const T* table, i64 m, const T* v, i64 n, int right, I* out) {
    GRID_STRIDE(i, n) out[i] = (I)(right ? bound<T, true>(table, m, v[i]) : bound<T, false>(table, m, v[i]));
}

// ---------------------------------------------------------------------------
// The epsilon grid (skyjoin.index.grid_gpu).  Tables: k sorted int64 tables
// concatenated, table j is tables[off[j] .. off[j + 1]).
// ---------------------------------------------------------------------------

// Cell coordinates floor((x[r, j] - lo[j]) / side[j]) of the first k of d columns,
// in float64, for the rows r = rows[i] (use_rows) or r = i, i < n: written column
// by column, coords[j * n + i] (colmajor), or row by row, coords[i * k + j].
template <typename T>
__global__ void cell_coords(const T* x, i64 n, int d, int k, const double* lo,
                            const double* side, const int* rows, int use_rows, int colmajor,
                            i64* coords) {
    GRID_STRIDE(t, n * k) {
        i64 i = t / k;
        int j = (int)(t - i * k);
        i64 r = use_rows ? (i64)rows[i] : i;
        double c = floor(__ddiv_rn(__dsub_rn((double)x[r * d + j], lo[j]), side[j]));
        coords[colmajor ? j * n + i : t] = (i64)c;
    }
}

// Linear ids: lid[i] = sum over j < k of rank of coords[j * n + i] in table j,
// times stride[j] (the coordinate is in its table).
__global__ void rank_ids(const i64* coords, i64 n, int k, const i64* tables, const i64* off,
                         const i64* stride, i64* lid) {
    GRID_STRIDE(i, n) {
        i64 s = 0;
        for (int j = 0; j < k; ++j)
            s += bound<i64, false>(tables + off[j], off[j + 1] - off[j], coords[j * n + i]) * stride[j];
        lid[i] = s;
    }
}

// For each row c of cc (m rows, k int64 columns) and j < k, in table j: the rank
// of the first coordinate >= cc - 1 (lo), of the last <= cc + 1 (hi), and of the
// first >= cc (own); row-major (m, k) int32 outputs.
__global__ void window_ranks(const i64* cc, i64 m, int k, const i64* tables, const i64* off,
                             int* lo, int* hi, int* own) {
    GRID_STRIDE(t, m * k) {
        int j = (int)(t % k);
        const i64* a = tables + off[j];
        i64 len = off[j + 1] - off[j], c = cc[t];
        lo[t] = (int)bound<i64, false>(a, len, c - 1);
        hi[t] = (int)bound<i64, true>(a, len, c + 1) - 1;
        own[t] = (int)bound<i64, false>(a, len, c);
    }
}

// out[c] = sum over ranges r in [rptr[c], rptr[c + 1]) of stop - start, ranges an
// (n_ranges, 2) int32 array of [start, stop).
__global__ void range_lengths(const i64* rptr, const int* ranges, i64 m, i64* out) {
    GRID_STRIDE(c, m) {
        i64 s = 0;
        for (i64 r = rptr[c]; r < rptr[c + 1]; ++r) s += (i64)(ranges[2 * r + 1] - ranges[2 * r]);
        out[c] = s;
    }
}

// flags[i] = 1 when lo < indptr[i + 1] - indptr[i] and (hi < 0 or it is <= hi).
__global__ void length_flags(const i64* indptr, i64 n, i64 lo, i64 hi, int* flags) {
    GRID_STRIDE(i, n) {
        i64 len = indptr[i + 1] - indptr[i];
        flags[i] = (len > lo && (hi < 0 || len <= hi)) ? 1 : 0;
    }
}
