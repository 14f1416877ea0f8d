// SkyAlign on the GPU (Boegh, Chester, Assent 2016), compiled at run time by
// cupy.RawModule (NVRTC).  Templated on the dimension D and the mask word
// MaskT (unsigned int for d <= 32, unsigned long long for d <= 64).
//
// Points are minimised, float64, row-major, sorted by <|M|, M> (§5.1); one
// thread per sorted point (§5.2), so a warp works on few median-level cells.
// Every mask shortcut is sound under ties (see skyline/masks.py): a mask bit
// set for p_j and clear for p_i on a dimension where the coarser masks agree
// means p_j[k] > p_i[k] strictly.  Across median-level cells the
// distinct-value test is exact because the cells differ on a dimension where
// M_j[k] = 0 < M_i[k] = 1, i.e. p_j[k] <= quart2 < p_i[k].

template <typename T> __device__ __forceinline__ int popc(T x);
template <> __device__ __forceinline__ int popc<unsigned int>(unsigned int x) { return __popc(x); }
template <> __device__ __forceinline__ int popc<unsigned long long>(unsigned long long x) { return __popcll(x); }

// §4.2.2: median-level mask M (bit k: p[k] > quart2[k]) and quartile-level
// mask Q (bit k: p[k] > (M[k] ? quart3[k] : quart1[k])), the order |M| and
// the sort key <|M|, M> (valid when D <= 56).
template <int D, typename MaskT>
__global__ void median_quartile_masks(const double* __restrict__ P, const double* __restrict__ quart,
                                      long long m, MaskT* __restrict__ M, MaskT* __restrict__ Q,
                                      int* __restrict__ order, unsigned long long* __restrict__ key)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= m) return;
    MaskT mm = 0, qq = 0;
    const double* p = P + i * D;
#pragma unroll
    for (int k = 0; k < D; ++k) {
        double v = p[k];
        MaskT bit = MaskT(1) << k;
        if (v > quart[D + k]) {
            mm |= bit;
            if (v > quart[2 * D + k]) qq |= bit;
        } else if (v > quart[k]) {
            qq |= bit;
        }
    }
    M[i] = mm;
    Q[i] = qq;
    int o = popc<MaskT>(mm);
    order[i] = o;
    if constexpr (D <= 56) {
        key[i] = (((unsigned long long)o) << D) | (unsigned long long)mm;
    } else {
        key[i] = 0ull;
    }
}

// p_j <_distinct p_i (Definition 1, right-hand clause), branch-free.
template <int D>
__device__ __forceinline__ bool dominates_distinct(const double* __restrict__ pj, const double* me)
{
    bool ok = true;
#pragma unroll
    for (int k = 0; k < D; ++k) ok &= (pj[k] <= me[k]);
    return ok;
}

// Full dominance p_j < p_i: no worse everywhere and strictly better once.
template <int D>
__device__ __forceinline__ bool dominates(const double* __restrict__ pj, const double* me)
{
    bool le = true, lt = false;
#pragma unroll
    for (int k = 0; k < D; ++k) {
        double a = __ldg(pj + k);
        le &= (a <= me[k]);
        lt |= (a < me[k]);
    }
    return le && lt;
}

// The DT of scan_cell: the full test in p_i's own cell, else the
// distinct-value test.
template <int D, bool OWN>
__device__ __forceinline__ bool candidate_dominates(const double* __restrict__ pj, const double* me)
{
    if constexpr (OWN) {
        return dominates<D>(pj, me);
    } else {
        return dominates_distinct<D>(pj, me);
    }
}

// The points lo..hi of one cell against p_i: the quartile-level mask test,
// then the DT of each point that passes it.  The masks are read through the
// read-only cache (__ldg), four at a time for memory-level parallelism; a
// stale mask (a point marked dominated meanwhile) only costs an extra DT.  nm
// counts every mask of the cell.
//   OWN false: a dominating-candidate cell (Algorithm 1, lines 16-19): Eq. 4,
//     then the distinct-value DT (i is unused).
//   OWN true: the other points of p_i's own cell (lines 21-24): Eq. 5, then
//     the full DT (equal points never dominate each other); p_i is skipped.
template <int D, typename MaskT, bool OWN>
__device__ __forceinline__ bool scan_cell(const double* __restrict__ P, const MaskT* Q,
                                          long long lo, long long hi, long long i, MaskT need,
                                          const double* me, unsigned long long& nm,
                                          unsigned long long& nd)
{
    nm += (unsigned long long)(hi - lo);
    long long j = lo;
    for (; j + 4 <= hi; j += 4) {
        MaskT q[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) q[u] = __ldg(Q + j + u);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (!(q[u] & need) && (!OWN || j + u != i)) {
                ++nd;
                if (candidate_dominates<D, OWN>(P + (j + u) * D, me)) return true;
            }
        }
    }
    for (; j < hi; ++j) {
        if ((__ldg(Q + j) & need) || (OWN && j == i)) continue;
        ++nd;
        if (candidate_dominates<D, OWN>(P + j * D, me)) return true;
    }
    return false;
}

// mode 0 (NoSync): each point against every lower cell that is a proper
//   subset of its median mask (Eqs. 1-3; submasks enumerated through the
//   dense cell table when use_dense), then against its own cell.
// mode 1 (Algorithm 1, iteration `level`): points of order > level against
//   the cells c_lo..c_hi of order `level` (Eq. 1, Eq. 4, distinct DT);
//   points of order == level against their own cell (Eq. 5, full DT).
// tmap (optional, Padded variant): thread -> point, -1 for padding threads.
template <int D, typename MaskT>
__global__ void skyalign_kernel(const double* __restrict__ P, MaskT* Q, const MaskT* __restrict__ M,
                                const int* __restrict__ point_cell, const long long* __restrict__ starts,
                                const long long* __restrict__ ends, const MaskT* __restrict__ cmasks,
                                const int* __restrict__ dense, int use_dense, int mode, int level,
                                int c_lo, int c_hi, long long n_threads, const int* __restrict__ tmap,
                                unsigned char* __restrict__ dead, unsigned long long* __restrict__ counters)
{
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= n_threads) return;
    long long i = t;
    if (tmap != nullptr) {
        i = tmap[t];
        if (i < 0) return;
    }
    const MaskT Mi = M[i];
    const MaskT Qi = Q[i];
    const MaskT nMi = ~Mi;
    const MaskT nQi = ~Qi;
    double me[D];
#pragma unroll
    for (int k = 0; k < D; ++k) me[k] = P[i * D + k];
    const int ci = point_cell[i];
    const int oi = popc<MaskT>(Mi);
    unsigned long long nm = 0, nd = 0;
    bool dom = false;

    if (mode == 0) {
        if (use_dense) {
            MaskT s = 0;
            while (s != Mi) {                       // proper submasks, increasing
                int c = dense[(long long)s];
                ++nm;
                if (c >= 0) {
                    MaskT need = (cmasks[c] | nMi) & nQi;
                    if (scan_cell<D, MaskT, false>(P, Q, starts[c], ends[c], -1, need, me, nm, nd)) {
                        dom = true;
                        break;
                    }
                }
                s = ((s | nMi) + MaskT(1)) & Mi;
            }
        } else {
            for (int c = 0; c < ci; ++c) {
                MaskT Mj = cmasks[c];
                ++nm;
                if (Mj & nMi) continue;                // Eq. 1
                MaskT need = (Mj | nMi) & nQi;
                if (scan_cell<D, MaskT, false>(P, Q, starts[c], ends[c], -1, need, me, nm, nd)) {
                    dom = true;
                    break;
                }
            }
        }
    } else if (oi > level) {
        for (int c = c_lo; c < c_hi; ++c) {
            MaskT Mj = cmasks[c];
            ++nm;
            if (Mj & nMi) continue;                    // Eq. 1 (Eq. 3 for equal orders)
            MaskT need = (Mj | nMi) & nQi;             // Eq. 4
            if (scan_cell<D, MaskT, false>(P, Q, starts[c], ends[c], -1, need, me, nm, nd)) {
                dom = true;
                break;
            }
        }
    }
    if (!dom && (mode == 0 || oi == level)) {
        dom = scan_cell<D, MaskT, true>(P, Q, starts[ci], ends[ci], i, nQi, me, nm, nd);  // Eq. 5
    }
    if (dom) {
        dead[i] = 1;
        Q[i] = ~MaskT(0);       // later mask tests against p_i fail: it is skipped
    }
    if (counters != nullptr) {
        atomicAdd(counters, nm);
        atomicAdd(counters + 1, nd);
    }
}

// GGS-style (Boegh et al. 2013) phase 1: the points of a block (in sum
// order) against their predecessors inside the block.
template <int D>
__global__ void ggs_block(const double* __restrict__ X, const long long* __restrict__ blk, int nb,
                          unsigned char* __restrict__ out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nb) return;
    double me[D];
    const double* p = X + blk[t] * D;
#pragma unroll
    for (int k = 0; k < D; ++k) me[k] = p[k];
    unsigned char dom = 0;
    for (int u = 0; u < t; ++u) {
        if (dominates<D>(X + blk[u] * D, me)) { dom = 1; break; }
    }
    out[t] = dom;
}

// GGS phase 2: every alive point after `lo` against the block's skyline points.
template <int D>
__global__ void ggs_filter(const double* __restrict__ X, unsigned char* __restrict__ alive,
                           long long lo, long long n, const long long* __restrict__ sky, int ns)
{
    long long i = lo + blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n || !alive[i]) return;
    double me[D];
#pragma unroll
    for (int k = 0; k < D; ++k) me[k] = X[i * D + k];
    for (int u = 0; u < ns; ++u) {
        if (dominates<D>(X + sky[u] * D, me)) { alive[i] = 0; return; }
    }
}

// ---------------------------------------------------------------------------
// The host side's regular steps (skyline/gpu.py), so that a first call runs on
// this module and the shared device primitives, not on CuPy routines that each
// compile.  One thread per item unless said otherwise.
// ---------------------------------------------------------------------------

// Under minimisation: x = x * sign[k] + 0.0 (sign +-1: exact; -0.0 becomes +0.0).
__global__ void minimise(double* X, long long n, int d, const double* sign)
{
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= n * d) return;
    X[t] = __dadd_rn(__dmul_rn(X[t], sign[t % d]), 0.0);
}

// An order-preserving unsigned key of a double (no NaN).
__device__ __forceinline__ unsigned long long ordered_key(double v)
{
    unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

// §5.1: rowmax[i] = max_k X[i, k]; the least rowmax, as an ordered key, into
// *best (atomicMin; *best starts at ~0).  A grid-stride loop.
template <int D>
__global__ void row_max(const double* __restrict__ X, long long n, double* __restrict__ rowmax,
                        unsigned long long* best)
{
    unsigned long long low = ~0ull;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double v = X[i * D];
#pragma unroll
        for (int k = 1; k < D; ++k) v = fmax(v, X[i * D + k]);
        rowmax[i] = v;
        unsigned long long key = ordered_key(v);
        if (key < low) low = key;
    }
    if (low != ~0ull) atomicMin(best, low);
}

// *first = the least i whose rowmax has the key *best (atomicMin; starts at ~0).
__global__ void first_at(const double* __restrict__ rowmax, long long n,
                         const unsigned long long* best, unsigned long long* first)
{
    unsigned long long low = ~0ull;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (ordered_key(rowmax[i]) == *best && (unsigned long long)i < low) low = (unsigned long long)i;
    if (low != ~0ull) atomicMin(first, low);
}

// §5.1, exact under ties: keep q (flags 1) iff some q[k] < tau or q equals the
// point s = *first that reaches tau = rowmax[s].
template <int D>
__global__ void tau_keep(const double* __restrict__ X, long long n, const double* __restrict__ rowmax,
                         const unsigned long long* first, int* __restrict__ flags)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long s = (long long)*first;
    double tau = rowmax[s];
    bool below = false, same = true;
#pragma unroll
    for (int k = 0; k < D; ++k) {
        double v = X[i * D + k];
        below |= v < tau;
        same &= v == X[s * D + k];
    }
    flags[i] = (below || same) ? 1 : 0;
}

// PT[k * m + i] = P[i * D + k]: the columns, each contiguous (for their sorts).
template <int D>
__global__ void columns(const double* __restrict__ P, long long m, double* __restrict__ PT)
{
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= m * D) return;
    long long i = t / D;
    int k = (int)(t - i * D);
    PT[k * m + i] = P[t];
}

// "padded": the size of each median-level cell rounded up to whole warps.
__global__ void padded_sizes(const long long* __restrict__ starts, long long nc,
                             long long* __restrict__ psizes)
{
    long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (c >= nc) return;
    psizes[c] = (starts[c + 1] - starts[c] + 31) / 32 * 32;
}

// "padded": thread slot of point i = its cell's padded start + its rank in the cell.
__global__ void padded_map(const int* __restrict__ point_cell, const long long* __restrict__ starts,
                           const long long* __restrict__ pstart, long long m, int* __restrict__ tmap)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= m) return;
    int c = point_cell[i];
    tmap[pstart[c] + (i - starts[c])] = (int)i;
}

// After round `level`: done (alive, of order level: skyline points) and rest
// (alive, of a higher order: repacked for the next round), as 0/1 flags.
__global__ void split_level(const unsigned char* __restrict__ dead, const int* __restrict__ order,
                            long long m, int level, int* __restrict__ done, int* __restrict__ rest)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= m) return;
    bool alive = dead[i] == 0;
    done[i] = (alive && order[i] == level) ? 1 : 0;
    rest[i] = (alive && order[i] > level) ? 1 : 0;
}

// skyline.groups.row_hash of every row of B (the float64 bits, m rows of d words);
// its constants ROW_HASH_* are defined by gpu_kernels.py ahead of this source.
__global__ void row_hash(const unsigned long long* __restrict__ B, long long m, long long d,
                         unsigned long long* __restrict__ h)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= m) return;
    unsigned long long x = ROW_HASH_SEED;
    for (long long k = 0; k < d; ++k) {
        unsigned long long b = B[i * d + k];
        if (b == 0x8000000000000000ull) b = 0;
        unsigned long long y = (b + (unsigned long long)(k + 1) * ROW_HASH_SEED) * ROW_HASH_MUL;
        y = (y ^ (y >> 31)) * ROW_HASH_MUL2;
        x += y ^ (y >> 29);
    }
    x = (x ^ (x >> 32)) * ROW_HASH_MUL2;
    x = (x ^ (x >> 29)) * ROW_HASH_MUL;
    h[i] = x ^ (x >> 32);
}

// Insert every hash into an open-addressing set (0 = empty, keys h | 1, slot from
// the high bits, linear probing); set *found when a key is already there.
__global__ void hash_probe(const unsigned long long* __restrict__ h, long long m,
                           unsigned long long* table, unsigned long long mask, int* found)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= m) return;
    unsigned long long key = h[i] | 1ull;
    unsigned long long s = (h[i] >> 32) & mask;
    while (true) {
        unsigned long long prev = atomicCAS(&table[s], 0ull, key);
        if (prev == 0ull) return;
        if (prev == key) { *found = 1; return; }
        s = (s + 1ull) & mask;
    }
}
