"""The CUDA kernels that number the GPU grid DBSCAN's clusters and carry
labels and core flags back to the caller's order: a part of
:data:`skyjoin.cluster.grid_gpu_kernels.SOURCE` (its ``REAL``, compiled
there), launched by :mod:`skyjoin.cluster.grid_gpu` after the links.
"""

__all__ = ["NUMBERING"]

NUMBERING = r"""// min_samples 2, every point linked: compress's walk to the root (uf_root),
// then a point is core when it has a neighbour, that is when its component
// holds another point (core: zeros)
__global__ void compress_linked(long long n, long long* parent, unsigned char* core) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    volatile long long* vparent = parent;
    long long x = uf_root(vparent, i);
    if (x == i) return;
    vparent[i] = x;
    core[i] = 1;
    core[x] = 1;
}

// The labels in the caller's order: out[perm[p]], a core point's label as it
// is, another's as -2 - label (<= -1), so that one scatter carries both and
// decode_core splits them again.  Noise (-1, encoded -1 too) is not written:
// out holds -1 already, and at tens of millions of clustered points most
// points are noise, so the scatter's random writes are those of the others.
__global__ void scatter_labels(const unsigned char* core, const long long* labels,
                               const int* perm, long long n, long long* out) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long v = labels[p];
    if (!core[p]) {
        if (v < 0) return;
        v = -2 - v;
    }
    out[perm[p]] = v;
}

__global__ void decode_core(long long n, long long* labels, int* core) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long v = labels[p];
    core[p] = v >= 0 ? 1 : 0;
    if (v < 0) labels[p] = -2 - v;
}

__global__ void core_labels(const unsigned char* core, const long long* parent,
                            const long long* rank, long long n, long long* labels) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    labels[p] = core[p] ? rank[parent[p]] : -1;
}

// The clusters numbered by their lowest caller row (scikit-learn's numbering),
// with no sort: low[r] (filled with n) takes the lowest caller row perm[p] of the
// core points p of root r; flags (caller rows, zeros) marks each root's low,
// and its inclusive scan from -1 is then each root's rank; number_clusters
// writes the labels over parent (compressed: a core point's root).
__global__ void component_low(const unsigned char* core, const long long* parent,
                              const int* perm, long long n, int* low) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || !core[p]) return;
    long long r = parent[p];
    int v = perm[p];
    if (v < ((volatile int*)low)[r]) atomicMin(&low[r], v);    // few atomics: most lose
}

__global__ void mark_lows(const unsigned char* core, const long long* parent, const int* low,
                          long long n, int* flags) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n && core[p] && parent[p] == p) flags[low[p]] = 1;
}

// the label of core point p: the rank of its root's lowest caller row
__device__ __forceinline__ long long cluster_number(const long long* parent, const int* low,
                                                    const int* rank, long long p) {
    return (long long)rank[low[parent[p]]];
}

__global__ void number_clusters(const unsigned char* core, const int* low, const int* rank,
                                long long n, long long* parent) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    parent[p] = core[p] ? cluster_number(parent, low, rank, p) : -1;
}

// number_clusters and scatter_labels in one pass where no border pass follows
// (every labelled point is core): out (the caller's order, filled with -1)
// takes each core point's label at its caller row
__global__ void number_scatter(const unsigned char* core, const long long* parent,
                               const int* low, const int* rank, const int* perm, long long n,
                               long long* out) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n || !core[p]) return;
    out[perm[p]] = cluster_number(parent, low, rank, p);
}

"""
