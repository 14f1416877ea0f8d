"""The CPU emulation of CUDA kernels (tests/_cuda_emulation.py) itself: the
warp exchanges, votes and barriers against NumPy, the kernels a source
defines, and the faults where the GPU would not run a kernel as written."""

import numpy as np
import pytest

from _cuda_emulation import EmulationFault, Module, compiler, kernel_names

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")

SOURCE = r"""
// each thread's value v[i], i = blockIdx.x * blockDim.x + threadIdx.x: out[k * n + i]
// for the k-th collective below (n threads in all)
extern "C" __global__ void collectives(const int* v, long long n, long long* out) {
    __shared__ int tile[256];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    int x = v[i];
    out[0 * n + i] = __shfl_up_sync(0xffffffffu, x, 3);
    out[1 * n + i] = __shfl_down_sync(0xffffffffu, x, 5);
    out[2 * n + i] = __shfl_xor_sync(0xffffffffu, x, 6);
    out[3 * n + i] = __shfl_sync(0xffffffffu, x, 31 - lane);
    out[4 * n + i] = __ballot_sync(0xffffffffu, x & 1);
    out[5 * n + i] = __any_sync(0xffffffffu, x == 7);
    out[6 * n + i] = __all_sync(0xffffffffu, x >= 0);
    int sum = x;                     // the warp's inclusive scan
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, sum, o);
        if (lane >= o) sum += u;
    }
    out[7 * n + i] = sum;
    tile[threadIdx.x] = x;           // the block reversed through shared memory
    __syncthreads();
    out[8 * n + i] = tile[blockDim.x - 1 - threadIdx.x];
    __syncthreads();
    tile[threadIdx.x] = 2 * x;       // and again, the first pass's reads all done
    __syncwarp();
    out[9 * n + i] = tile[threadIdx.x ^ 1];
}

// groups of 8 lanes, each its own loop of v[group] rounds (the groups of a warp
// diverge): round r's ballot within the group and the group's sum by xor
// shuffles; the block's values reversed through a dynamic shared array
extern "C" __global__ void groups(const int* v, const int* rounds, long long* out) {
    extern __shared__ long long dyn[];
    const int lane = threadIdx.x & 31, grp = lane / 8;
    const unsigned gmask = 0xffu << (grp * 8);
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int g = (int)(i / 8);
    long long acc = 0;
    for (int r = 0; r < rounds[g]; ++r) {
        unsigned m = __ballot_sync(gmask, (v[i] + r) % 3 == 0);
        int s = v[i] * (r + 1);
        for (int o = 4; o > 0; o >>= 1) s += __shfl_xor_sync(gmask, s, o);
        acc = acc * 7 + (long long)(m >> (grp * 8)) + 1000LL * s;
    }
    out[i] = acc;
    dyn[threadIdx.x] = v[i];
    __syncthreads();
    out[gridDim.x * blockDim.x + i] = dyn[blockDim.x - 1 - threadIdx.x];
}

// lane 0 returns before its warp's exchange
extern "C" __global__ void early_return(const int* v, long long* out) {
    if (threadIdx.x == 0) return;
    out[threadIdx.x] = __shfl_sync(0xffffffffu, v[threadIdx.x], 0);
}

// half the warp at a block barrier, half at a warp barrier: neither completes
extern "C" __global__ void split_barriers(long long* out) {
    if (threadIdx.x < 16) __syncthreads(); else __syncwarp();
    out[threadIdx.x] = 1;
}
"""


def _expected(v, block):
    n = v.size
    out = np.zeros((10, n), dtype=np.int64)
    for b0 in range(0, n, block):
        blk = v[b0:b0 + block]
        out[8, b0:b0 + block] = blk[::-1]
        out[9, b0:b0 + block] = 2 * blk[np.arange(blk.size) ^ 1]
        for w0 in range(0, block, 32):
            w = blk[w0:w0 + 32].astype(np.int64)
            lane = np.arange(32)
            at = slice(b0 + w0, b0 + w0 + 32)
            out[0, at] = np.where(lane >= 3, w[np.maximum(lane - 3, 0)], w)
            out[1, at] = np.where(lane + 5 < 32, w[np.minimum(lane + 5, 31)], w)
            out[2, at] = w[lane ^ 6]
            out[3, at] = w[31 - lane]
            out[4, at] = int(sum(1 << k for k in range(32) if w[k] & 1))
            out[5, at] = int((w == 7).any())
            out[6, at] = int((w >= 0).all())
            out[7, at] = np.cumsum(w)
    return out


@pytest.mark.parametrize("grid,block", [(1, 32), (3, 64), (2, 256)])
def test_collectives_equal_numpy(grid, block):
    mod = Module(SOURCE)
    rng = np.random.default_rng(grid * block)
    n = grid * block
    v = rng.integers(0, 9, n).astype(np.int32)
    out = np.zeros(10 * n, dtype=np.int64)
    mod.get_function("collectives")((grid,), (block,), (v, np.int64(n), out))
    want = _expected(v, block)
    for k in range(10):
        np.testing.assert_array_equal(out.reshape(10, n)[k], want[k], err_msg=f"collective {k}")


def test_collectives_of_lane_groups_that_diverge():
    mod = Module(SOURCE)
    rng = np.random.default_rng(5)
    grid, block = 2, 64
    n = grid * block
    v = rng.integers(0, 50, n).astype(np.int32)
    rounds = rng.integers(0, 6, n // 8).astype(np.int32)
    out = np.zeros(2 * n, dtype=np.int64)
    mod.get_function("groups")((grid,), (block,), (v, rounds, out), shared_mem=8 * block)
    want = np.zeros(n, dtype=np.int64)
    for g in range(n // 8):
        vg = v[8 * g:8 * g + 8].astype(np.int64)
        acc = 0
        for r in range(rounds[g]):
            m = sum(1 << k for k in range(8) if (vg[k] + r) % 3 == 0)
            acc = acc * 7 + m + 1000 * int((vg * (r + 1)).sum())
        want[8 * g:8 * g + 8] = acc
    np.testing.assert_array_equal(out[:n], want)
    np.testing.assert_array_equal(out[n:], v.reshape(grid, block)[:, ::-1].ravel())


def test_exchange_after_a_lane_returned_is_a_fault():
    mod = Module(SOURCE)
    v = np.arange(32, dtype=np.int32)
    with pytest.raises(EmulationFault, match="lane which had returned"):
        mod.get_function("early_return")((1,), (32,), (v, np.zeros(32, np.int64)))


def test_threads_left_waiting_is_a_fault():
    mod = Module(SOURCE)
    with pytest.raises(EmulationFault, match="left waiting"):
        mod.get_function("split_barriers")((1,), (32,), (np.zeros(32, np.int64),))


def test_kernel_names_and_the_instances_of_templates():
    src = """
template <typename T>
__global__ void fill_with(T* a, long long n, T v) { long long i = threadIdx.x; if (i < n) a[i] = v; }
#define BOUNDS __launch_bounds__(64, 2)
extern "C" __global__ void BOUNDS __launch_bounds__(64) plain(int* a) { a[threadIdx.x] = blockIdx.x; }
"""
    assert kernel_names(src) == ["plain"]
    mod = Module(src, ["fill_with<int>"])
    a = np.zeros(70, dtype=np.int32)
    mod.get_function("plain")((3,), (64,), (a,))
    np.testing.assert_array_equal(a, np.r_[np.full(64, 2), np.zeros(6)])
    mod.get_function("fill_with<int>")((1,), (32,), (a, np.int64(20), np.int32(7)))
    np.testing.assert_array_equal(a[:21], np.r_[np.full(20, 7), 2])
    with pytest.raises(KeyError, match="no kernel fill_with"):
        mod.get_function("fill_with")
