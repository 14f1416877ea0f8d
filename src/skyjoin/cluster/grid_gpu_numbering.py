"""The CUDA kernels that number the GPU grid DBSCAN's clusters and carry
labels and core flags back to the caller's order: a part of
:data:`skyjoin.cluster.grid_gpu_kernels.SOURCE` (its ``REAL``, compiled
there), launched by :mod:`skyjoin.cluster.grid_gpu` after the links.
"""

__all__ = ["NUMBERING"]

NUMBERING = r"""// min_samples 2, every point linked: a point is core when it has a neighbour,
// that is when its component holds another point (parent compressed)
__global__ void linked_core(const long long* parent, long long n, unsigned char* core) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long r = parent[p];
    if (r != p) { core[p] = 1; core[r] = 1; }
}

// a core point's label as it is, another's as -2 - label (<= -1): one scatter
// carries both to the caller's order, where decode_core splits them again
__global__ void encode_core(const unsigned char* core, long long n, long long* labels) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n && !core[p]) labels[p] = -2 - labels[p];
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

__global__ void number_clusters(const unsigned char* core, const int* low, const int* rank,
                                long long n, long long* parent) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    parent[p] = core[p] ? (long long)rank[low[parent[p]]] : -1;
}

"""
