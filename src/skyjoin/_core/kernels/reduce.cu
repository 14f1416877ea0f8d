// Whole-array reductions that compile fast (no CUB): skyjoin._core.device_reduce.
// Every kernel runs on a fixed grid with a grid-stride loop, so the partial
// sum of each block, and hence the host's total, is the same on every run.

// Acc: long long for integer sums, double for floating ones.
template <typename T, typename Acc>
__global__ void block_sum(const T* x, long long n, Acc* part) {
    __shared__ Acc s[256];
    Acc acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc += (Acc)x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

template <typename T>
__global__ void flag_nonfinite(const T* x, long long n, int* flag) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        if (!isfinite((double)x[i])) { *flag = 1; return; }
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
