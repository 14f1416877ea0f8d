// Whole-array reductions that compile fast (no CUB): skyjoin._core.device_reduce.
// Every kernel runs on a fixed grid with a grid-stride loop, so the partial
// sum of each block, and hence the host's total, is the same on every run.

// The sum of every thread's acc in the block into part[blockIdx.x] (blockDim 256).
template <typename Acc>
__device__ __forceinline__ void block_partial(Acc acc, Acc* part) {
    __shared__ Acc s[256];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

// Acc: long long for integer sums, double for floating ones.
template <typename T, typename Acc>
__global__ void block_sum(const T* x, long long n, Acc* part) {
    Acc acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc += (Acc)x[i];
    block_partial<Acc>(acc, part);
}

// Per-block sums of v_i = (double)w[idx[i]] (squared = 0) or of (v_i - mean)^2,
// each term rounded as block_sum over the materialised terms would see it.
__global__ void gathered_sum(const long long* w, const int* idx, long long n, double mean,
                             int squared, double* part) {
    double acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double v = (double)w[idx[i]];
        if (squared) { v = __dsub_rn(v, mean); v = __dmul_rn(v, v); }
        acc = __dadd_rn(acc, v);
    }
    block_partial<double>(acc, part);
}

// Per-block sums of w[c] * (start[c + 1] - start[c]) over c < n.
__global__ void weighted_spans(const long long* w, const int* start, long long n, long long* part) {
    long long acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc += w[i] * (long long)(start[i + 1] - start[i]);
    block_partial<long long>(acc, part);
}

// flag set to 1 when a[i] != b[i] for some i (left alone otherwise).
template <typename T>
__global__ void flag_differ(const T* a, const T* b, long long n, int* flag) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (a[i] != b[i]) { *flag = 1; return; }
}

// The order-free reductions below (flags, bounds) take UNROLL items a thread at
// a time, their loads issued before any is used: one load at a time leaves a
// fixed grid waiting on memory latency, not bandwidth.
#define UNROLL 4

template <typename T>
__global__ void flag_nonfinite(const T* x, long long n, int* flag) {
    const long long step = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int bad = 0;
    for (; i + (UNROLL - 1) * step < n; i += UNROLL * step) {
        T v[UNROLL];
        #pragma unroll
        for (int r = 0; r < UNROLL; ++r) v[r] = x[i + r * step];
        #pragma unroll
        for (int r = 0; r < UNROLL; ++r) bad |= !isfinite((double)v[r]);
    }
    for (; i < n; i += step) bad |= !isfinite((double)x[i]);
    if (bad) *flag = 1;
}

template <typename T>
__global__ void flag_nonzero(const T* x, long long n, int* flag) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (x[i] != T(0)) { *flag = 1; return; }
}

template <typename T>
__global__ void flag_zero(const T* x, long long n, int* flag) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (x[i] == T(0)) { *flag = 1; return; }
}

// Column bounds of a C-contiguous (n, d) array, columns j0 .. j0 + 7 (a pass per 8
// columns): per-block minima and maxima into lo[block * d + j], hi[...]; flag set when
// a value is NaN or inf.  A block without rows leaves +inf / -inf.
template <typename T>
__global__ void column_bounds(const T* x, long long n, int d, int j0, double* lo, double* hi,
                              int* flag) {
    __shared__ double slo[8][256];
    __shared__ double shi[8][256];
    T a[8], b[8];                   // min and max are exact in T: compared there
    const int m = min(8, d - j0);
    const T inf = (T)__longlong_as_double(0x7ff0000000000000LL);   // NVRTC has no INFINITY
    #pragma unroll
    for (int k = 0; k < 8; ++k) { a[k] = inf; b[k] = -inf; }
    int bad = 0;
    // float rows four at a time; double rows one at a time (four took more
    // registers than the loads in flight gained: 0.64 ms against 0.58 at 37M x 3)
    constexpr int R = sizeof(T) == 4 ? UNROLL : 1;
    const long long step = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i + (R - 1) * step < n; i += R * step) {
        T v[R][8];
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            const T* row = x + (i + r * step) * d + j0;
            #pragma unroll
            for (int k = 0; k < 8; ++k) v[r][k] = k < m ? row[k] : T(0);
        }
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            #pragma unroll
            for (int k = 0; k < 8; ++k) {
                if (k < m) {
                    bad |= !isfinite((double)v[r][k]);
                    a[k] = fmin(a[k], v[r][k]);
                    b[k] = fmax(b[k], v[r][k]);
                }
            }
        }
    }
    for (; i < n; i += step) {
        const T* row = x + i * d + j0;
        #pragma unroll
        for (int k = 0; k < 8; ++k) {
            if (k < m) {
                T v = row[k];
                bad |= !isfinite((double)v);
                a[k] = fmin(a[k], v);
                b[k] = fmax(b[k], v);
            }
        }
    }
    if (bad) *flag = 1;
    #pragma unroll
    for (int k = 0; k < 8; ++k) { slo[k][threadIdx.x] = (double)a[k]; shi[k][threadIdx.x] = (double)b[k]; }
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            #pragma unroll
            for (int k = 0; k < 8; ++k) {
                slo[k][threadIdx.x] = fmin(slo[k][threadIdx.x], slo[k][threadIdx.x + w]);
                shi[k][threadIdx.x] = fmax(shi[k][threadIdx.x], shi[k][threadIdx.x + w]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < m) {
        lo[blockIdx.x * (long long)d + j0 + threadIdx.x] = slo[threadIdx.x][0];
        hi[blockIdx.x * (long long)d + j0 + threadIdx.x] = shi[threadIdx.x][0];
    }
}
