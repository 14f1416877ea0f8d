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
