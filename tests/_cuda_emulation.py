"""Run the project's CUDA C++ kernels on the CPU.

For logic checks on machines without a GPU: the kernel source is compiled
by the host C++ compiler with the CUDA keywords defined away, and NumPy
stands in for CuPy.  A launch runs its blocks one after another, each
thread of a block a fiber of this host thread: thread 0 runs
until it returns or reaches a barrier or warp exchange (``__syncthreads``,
``__shfl*_sync``, ``__ballot_sync``, ``__any_sync``, ``__all_sync``,
``__syncwarp``), then thread 1, and so on, and the threads that wait are
resumed once the others have met them, with the values they trade.  So a
kernel without collectives runs one thread after another, as its
arithmetic, indexing and control flow need; races are not exercised (the
GPU tests do that).  A warp exchange that a lane which has returned cannot
join, or threads left waiting at a barrier that the others never reach,
is a fault: the launch raises ``EmulationFault``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

_STUB = r"""
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
using std::min; using std::max; using std::floor; using std::isfinite; using std::fmin; using std::fmax;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__
struct D3 { unsigned x, y, z; };
static D3 blockIdx, blockDim, threadIdx, gridDim;

// A launch: each thread of a block is a fiber of this one host thread,
// switched at barriers and warp exchanges only, round robin: a thread that
// must wait hands over to the next that can run.  Threads meet at the block's
// barrier or at a warp collective of the lanes in a mask.  A thread that has
// returned counts as arrived (as on the GPU for __syncthreads); for a warp
// collective it is a fault, since its lane has no value to give.
//
// The switch: on x86-64 a stack switch that saves the callee-saved registers
// (no system call: a launch starts a fiber for every thread); elsewhere
// ucontext.
static void emu_fiber_start();
#if defined(__x86_64__)
extern "C" void emu_switch(void** save, void* load);
asm(".text\n.globl emu_switch\n.hidden emu_switch\n.type emu_switch,@function\n"
    "emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n");
struct EmuContext { void* sp; };
static void emu_swap(EmuContext* from, EmuContext* to) { emu_switch(&from->sp, to->sp); }
// a fiber that starts in emu_fiber_start on the stack [base, base + size)
static void emu_prepare(EmuContext* c, char* base, size_t size) {
    uintptr_t top = ((uintptr_t)(base + size)) & ~(uintptr_t)15;
    void** sp = (void**)(top - 64);      // six registers, then the start as a return address
    for (int k = 0; k < 6; ++k) sp[k] = nullptr;
    sp[6] = (void*)&emu_fiber_start;
    sp[7] = nullptr;
    c->sp = sp;
}
#else
struct EmuContext { ucontext_t ctx; };
static void emu_swap(EmuContext* from, EmuContext* to) { swapcontext(&from->ctx, &to->ctx); }
static void emu_prepare(EmuContext* c, char* base, size_t size) {
    getcontext(&c->ctx);
    c->ctx.uc_stack.ss_sp = base;
    c->ctx.uc_stack.ss_size = size;
    c->ctx.uc_link = nullptr;
    makecontext(&c->ctx, emu_fiber_start, 0);
}
#endif
// Where a fiber waits: nowhere (ready), at the block's barrier, or at a warp
// collective of the lanes in a mask (warp_wait).
struct EmuFiber { EmuContext ctx; long long wait; bool done; };
static const long long EMU_READY = -1, EMU_BLOCK_WAIT = -2;
static long long emu_warp_wait(int w, unsigned mask) { return ((long long)w << 32) | mask; }
// The block's barrier, and each warp's lanes, those that have returned and the
// collectives in progress (the lanes arrived, by the mask they were called with).
struct EmuBarrier { int size, arrived, exited; };
struct EmuWarp { unsigned lanes, exited; int pending; unsigned mask[32], arrived[32]; };
static const size_t EMU_STACK = 256 * 1024;
static EmuBarrier emu_block;
static EmuWarp emu_warps[32];
// a lane's input to its warp's collective (value, kind, source lane) and its result
enum { EMU_SHUFFLE, EMU_BALLOT, EMU_SYNC };
static unsigned long long emu_in[32][32], emu_out[32][32];
static int emu_kind[32][32], emu_src[32][32];
static std::vector<EmuFiber> emu_fibers;
static std::unique_ptr<char[]> emu_stacks;
static size_t emu_stack_count = 0;
static EmuContext emu_scheduler;
static std::function<void()> emu_body;
static std::unique_ptr<double[]> emu_dynamic_buffer;     // extern __shared__ arrays
static size_t emu_dynamic_size = 0;
static void* emu_dynamic_shared = nullptr;
static int emu_fault = 0;   // 1 warp exchange without a lane, 2 threads left waiting

extern "C" int emu_take_fault() { int f = emu_fault; emu_fault = 0; return f; }

static void emu_release(long long wait) {
    for (auto& f : emu_fibers) if (f.wait == wait) f.wait = EMU_READY;
}

// this fiber waits (wait): on to the next thread that can run
static void emu_wait(long long wait) {
    const unsigned me = threadIdx.x, n = (unsigned)emu_fibers.size();
    emu_fibers[me].wait = wait;
    for (unsigned k = 1; k < n; ++k) {
        const unsigned t = (me + k) % n;
        if (emu_fibers[t].done || emu_fibers[t].wait != EMU_READY) continue;
        threadIdx.x = t;
        emu_swap(&emu_fibers[me].ctx, &emu_fibers[t].ctx);
        return;                             // resumed, threadIdx.x set back to me
    }
    emu_swap(&emu_fibers[me].ctx, &emu_scheduler);   // none can: the scheduler sees it
}

// the block's barrier reached by every thread that has not returned: they run on
static bool emu_block_met() {
    if (!emu_block.arrived || emu_block.arrived + emu_block.exited < emu_block.size) return false;
    emu_block.arrived = 0;
    emu_release(EMU_BLOCK_WAIT);
    return true;
}

static void __syncthreads() {
    ++emu_block.arrived;
    if (!emu_block_met()) emu_wait(EMU_BLOCK_WAIT);
}

// collective e of warp w complete: every member's result, then they run on
static void emu_complete(int w, int e) {
    EmuWarp& wp = emu_warps[w];
    const unsigned m = wp.mask[e];
    unsigned bits = 0;
    for (int l = 0; l < 32; ++l)
        if ((m >> l & 1u) && !(wp.exited >> l & 1u) && emu_in[w][l]) bits |= 1u << l;
    for (int l = 0; l < 32; ++l) {
        if (!(m >> l & 1u) || (wp.exited >> l & 1u)) continue;
        if (emu_kind[w][l] == EMU_BALLOT) emu_out[w][l] = bits;
        else if (emu_kind[w][l] == EMU_SHUFFLE) {
            int s = emu_src[w][l];
            bool from = s >= 0 && s < 32 && (m >> s & 1u) && !(wp.exited >> s & 1u);
            emu_out[w][l] = emu_in[w][from ? s : l];
        }
    }
    wp.mask[e] = wp.mask[wp.pending - 1];
    wp.arrived[e] = wp.arrived[wp.pending - 1];
    --wp.pending;
    emu_release(emu_warp_wait(w, m));
}

// collective e of warp w reached by every lane of its mask that has not returned
static bool emu_warp_met(int w, int e) {
    const EmuWarp& wp = emu_warps[w];
    if ((wp.arrived[e] | (wp.exited & wp.mask[e])) != wp.mask[e]) return false;
    emu_complete(w, e);
    return true;
}

// this lane's part in a collective of the lanes in mask: its result
static unsigned long long emu_collective(unsigned mask, int kind, unsigned long long in, int src) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    EmuWarp& wp = emu_warps[w];
    const unsigned m = (mask | 1u << lane) & wp.lanes;
    if (m & wp.exited) emu_fault |= 1;
    emu_in[w][lane] = in;
    emu_kind[w][lane] = kind;
    emu_src[w][lane] = src;
    int e = 0;
    while (e < wp.pending && wp.mask[e] != m) ++e;
    if (e == wp.pending) { wp.mask[e] = m; wp.arrived[e] = 0; ++wp.pending; }
    wp.arrived[e] |= 1u << lane;
    if (!emu_warp_met(w, e)) emu_wait(emu_warp_wait(w, m));
    return emu_out[w][lane];
}

static void emu_leave() {                   // this thread has returned
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    EmuWarp& wp = emu_warps[w];
    wp.exited |= 1u << lane;
    for (int e = 0; e < wp.pending; ++e) {
        if (!(wp.mask[e] >> lane & 1u)) continue;
        emu_fault |= 1;                     // lanes wait for this one at a collective
        if (emu_warp_met(w, e)) --e;        // completed: another collective took slot e
    }
    ++emu_block.exited;
    emu_block_met();
}

static void emu_fiber_start() {
    emu_body();
    const unsigned t = threadIdx.x;
    emu_fibers[t].done = true;
    emu_leave();
    emu_swap(&emu_fibers[t].ctx, &emu_scheduler);   // never resumed
}

template <typename T> static T emu_shuffle(unsigned mask, T v, int src) {
    unsigned long long slot = 0;
    std::memcpy(&slot, &v, sizeof(T));
    slot = emu_collective(mask, EMU_SHUFFLE, slot, src);
    T r;
    std::memcpy(&r, &slot, sizeof(T));
    return r;
}
template <typename T> static inline T __shfl_sync(unsigned m, T v, int src) {
    return emu_shuffle(m, v, src & 31);
}
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, int o) {
    const int lane = threadIdx.x & 31;
    return emu_shuffle(m, v, lane >= o ? lane - o : -1);
}
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, int o) {
    const int lane = threadIdx.x & 31;
    return emu_shuffle(m, v, lane + o < 32 ? lane + o : -1);
}
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int x) {
    return emu_shuffle(m, v, (threadIdx.x & 31) ^ x);
}
static inline unsigned __ballot_sync(unsigned m, int pred) {
    return (unsigned)emu_collective(m, EMU_BALLOT, pred ? 1 : 0, -1);
}
static inline int __any_sync(unsigned m, int pred) { return __ballot_sync(m, pred) != 0u; }
static inline int __all_sync(unsigned m, int pred) {
    const unsigned lanes = (m | 1u << (threadIdx.x & 31)) & emu_warps[threadIdx.x >> 5].lanes;
    return __ballot_sync(m, pred) == lanes;
}
static inline void __syncwarp(unsigned m = 0xffffffffu) { emu_collective(m, EMU_SYNC, 0, -1); }

// the kernel's arguments unpacked from 8-byte slots (each value in the low
// bytes of its own), then its blocks one after another
template <typename T> static T emu_arg(const unsigned long long* slot) {
    T v;
    std::memcpy(&v, slot, sizeof(T));
    return v;
}
template <typename... A, std::size_t... I>
static std::tuple<A...> emu_args(const unsigned long long* slots, std::index_sequence<I...>) {
    return std::tuple<A...>(emu_arg<A>(slots + I)...);
}
template <typename... A>
static void emu_launch(void (*kernel)(A...), unsigned grid, unsigned block, unsigned shared,
                       const unsigned long long* slots) {
    std::tuple<A...> args = emu_args<A...>(slots, std::index_sequence_for<A...>{});
    emu_body = [&] { std::apply(kernel, args); };
    if (emu_stack_count < block) {
        emu_stacks.reset(new char[EMU_STACK * block]);
        emu_stack_count = block;
    }
    if (emu_dynamic_size < shared) {
        emu_dynamic_buffer.reset(new double[(shared + 7) / 8]);
        emu_dynamic_size = shared;
    }
    emu_dynamic_shared = emu_dynamic_buffer.get();
    emu_fibers.assign(block, EmuFiber());
    gridDim.x = grid;
    blockDim.x = block;
    for (unsigned b = 0; b < grid && !(emu_fault & 2); ++b) {
        emu_block = EmuBarrier{(int)block, 0, 0};
        for (int w = 0; w < 32; ++w) {
            int lanes = (int)block - 32 * w;
            lanes = lanes < 0 ? 0 : (lanes > 32 ? 32 : lanes);
            emu_warps[w].lanes = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
            emu_warps[w].exited = 0;
            emu_warps[w].pending = 0;
        }
        for (unsigned t = 0; t < block; ++t) {
            EmuFiber& f = emu_fibers[t];
            emu_prepare(&f.ctx, emu_stacks.get() + EMU_STACK * t, EMU_STACK);
            f.wait = EMU_READY;
            f.done = false;
        }
        blockIdx.x = b;
        for (unsigned left = block; left;) {
            bool ran = false;
            for (unsigned t = 0; t < block; ++t) {
                EmuFiber& f = emu_fibers[t];
                if (f.done || f.wait != EMU_READY) continue;
                threadIdx.x = t;
                emu_swap(&emu_scheduler, &f.ctx);    // back when a thread returns or all wait
                ran = true;
            }
            left = 0;
            for (const auto& f : emu_fibers) left += !f.done;
            if (left && !ran) { emu_fault |= 2; break; }
        }
    }
}

static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
static inline long long __double_as_longlong(double v) { long long b; std::memcpy(&b, &v, 8); return b; }
template <typename T> static inline T __ldg(const T* p) { return *p; }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
template <typename T, typename V> static T atomicAdd(T* a, V v) { T old = *a; *a += (T)v; return old; }
static unsigned long long atomicMin(unsigned long long* a, unsigned long long v) {
    unsigned long long old = *a;
    if (v < old) *a = v;
    return old;
}
static int atomicMin(int* a, int v) {
    int old = *a;
    if (v < old) *a = v;
    return old;
}
static unsigned long long atomicCAS(unsigned long long* a, unsigned long long cmp,
                                    unsigned long long val) {
    unsigned long long old = *a;
    if (old == cmp) *a = val;
    return old;
}
"""


class EmulationFault(RuntimeError):
    """A kernel did what the GPU would not run as written (``_STUB``'s faults)."""


_FAULTS = {1: "a warp exchange (shuffle, vote, __syncwarp) that a lane which had returned "
              "could not join",
           2: "threads left waiting at a barrier that the others never reached"}


def _check(lib, name):
    fault = lib.emu_take_fault()
    if fault:
        raise EmulationFault(f"kernel {name}: " + "; ".join(
            text for bit, text in _FAULTS.items() if fault & bit))


def compiler():
    """The host C++ compiler, or None."""
    return shutil.which("g++") or shutil.which("c++")


_SCALARS = {np.int64: ctypes.c_longlong, np.int32: ctypes.c_int, np.float64: ctypes.c_double,
            np.float32: ctypes.c_float, np.uint64: ctypes.c_ulonglong, np.uint32: ctypes.c_uint,
            np.uint16: ctypes.c_ushort, np.uint8: ctypes.c_ubyte}


class _Kernel:
    def __init__(self, lib, name, launch):
        self.lib, self.name, self.launch = lib, name, launch

    def __call__(self, grid, block, args, shared_mem=0):
        slots = (ctypes.c_ulonglong * max(1, len(args)))()
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                c = ctypes.c_void_p(a.ctypes.data)
            elif type(a) in _SCALARS:
                c = _SCALARS[type(a)](a.item())
            else:
                raise TypeError(f"kernel argument of type {type(a).__name__}")
            ctypes.memmove(ctypes.addressof(slots) + 8 * i, ctypes.byref(c), ctypes.sizeof(c))
        self.launch(ctypes.c_uint(int(grid[0])), ctypes.c_uint(int(block[0])),
                    ctypes.c_uint(int(shared_mem)), slots)
        _check(self.lib, self.name)


# a kernel's name in its definition: __global__ void [qualifiers] name(
_KERNEL = re.compile(r"__global__\s+void\s+(?:[A-Za-z_]\w*(?:\s*\([^()]*\))?\s+)*"
                     r"([A-Za-z_]\w*)\s*\(")


# a dynamic shared array, extern __shared__ T name[]: the launch's buffer
_DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+([A-Za-z_][\w\s]*?)\s+(\w+)\s*\[\s*\]\s*;")


def kernel_names(source: str) -> list:
    """The kernels that ``source`` defines, templates left out (their
    instances are named by the caller)."""
    names = []
    for m in _KERNEL.finditer(source):
        if not re.search(r"template\s*<[^;{}]*>\s*$", source[:m.start()]):
            names.append(m.group(1))
    return list(dict.fromkeys(names))


class Module:
    """Stands in for ``cupy.RawModule``: ``get_function(name)(grid, block, args)``
    for every kernel ``source`` defines and the template instances
    ``name_expressions``, each launched by a launcher of its own (``_STUB``'s
    ``emu_launch``, its arguments packed in 8-byte slots)."""

    def __init__(self, source: str, name_expressions=()):
        self.names = list(dict.fromkeys(kernel_names(source) + list(name_expressions)))
        source = _DYNAMIC_SHARED.sub(r"\1* \2 = (\1*)emu_dynamic_shared;", source)
        code = _STUB + source + "".join(
            f'\nextern "C" void emu_launch_{i}(unsigned g, unsigned b, '
            f'unsigned sh, const unsigned long long* s) {{ emu_launch(&{n}, g, b, sh, s); }}'
            for i, n in enumerate(self.names))
        tag = hashlib.sha1(code.encode()).hexdigest()[:16]
        folder = os.path.join(tempfile.gettempdir(), "skyjoin-cuda-emulation")
        os.makedirs(folder, exist_ok=True)
        lib = os.path.join(folder, f"k{tag}.so")
        if not os.path.exists(lib):
            src = os.path.join(folder, f"k{tag}.cpp")
            with open(src, "w") as fh:
                fh.write(code)
            subprocess.run([compiler(), "-O1", "-std=c++17", "-shared", "-fPIC",
                            "-ffp-contract=off", "-o", lib, src], check=True)
        self.lib = ctypes.CDLL(lib)

    def get_function(self, name):
        if name not in self.names:
            raise KeyError(f"no kernel {name} in the module")
        return _Kernel(self.lib, name, getattr(self.lib, f"emu_launch_{self.names.index(name)}"))


def modules_by_real(source: str):
    """Stands in for a GPU module's ``compiled_module(real="double")``: the
    kernel ``source`` compiled for the host once per C type ``real`` (and
    ``product``, the brute force's C type of the products, and ``dims``,
    the points' dimension, where given)."""
    modules = {}

    def compiled_module(real="double", product=None, dims=None):
        if (real, product, dims) not in modules:
            defines = f"#define REAL {real}\n#define IS_FLOAT {int(real == 'float')}\n"
            if product is not None:
                defines += f"#define GREAL {product}\n"
            if dims is not None:
                defines += f"#define DIMS {int(dims)}\n"
            modules[real, product, dims] = Module(defines + source)
        return modules[real, product, dims]

    return compiled_module


class _Stream:
    def synchronize(self):
        pass


class FakeCupy:
    """NumPy under CuPy's names, as far as the GPU modules use them."""

    class cuda:
        @staticmethod
        def get_current_stream():
            return _Stream()

        class runtime:
            @staticmethod
            def getDevice():
                return 0

        class Device:
            """A small device: a work-queue launch of (SMs x threads an SM /
            256) blocks stays a few blocks."""

            attributes = {"MultiProcessorCount": 2, "MaxThreadsPerMultiProcessor": 512}

            def __init__(self, index=0):
                pass

            def synchronize(self):
                pass

    @staticmethod
    def asnumpy(a):
        return np.asarray(a)

    def __getattr__(self, name):
        return getattr(np, name)


_DEVICE_MODULE = []


def emulate_device_kernels(monkeypatch):
    """Make ``skyjoin._core.device_kernels`` (the reductions and the device
    primitives) run on the host: their CUDA source (``reduce.cu`` and
    ``prims.cu``, the instances ``device_kernels.NAMES``) as one ``Module``
    (the reductions on a grid of 3 blocks), and the Thrust argsort on NumPy's
    stable argsort.  Returns the list of the instance sets that
    ``device_kernels.module`` was asked to compile, in order (a kit, or one
    instance that no loaded kit holds), empty at the start."""
    from skyjoin._core import device_kernels, device_prims, device_reduce

    if not _DEVICE_MODULE:          # reduce.cu + prims.cu, every instance, compiled once
        _DEVICE_MODULE.append(Module(device_kernels.source(), device_kernels.NAMES))
    compiled = []

    def module(cp, names):
        compiled.append(tuple(names))
        return _DEVICE_MODULE[0]

    monkeypatch.setattr(device_kernels, "module", module)
    monkeypatch.setattr(device_kernels, "_HOME", {})
    # the reductions' fixed grid, 3 blocks instead of 512: each emulated block
    # runs its 256 threads as fibers, in turn (the result is the same on any grid)
    monkeypatch.setattr(device_reduce, "_BLOCKS", 3)

    def argsort(cp, keys, in_place=False):
        order = np.argsort(keys, kind="stable").astype(np.int64)
        if in_place:                    # the keys left sorted, as Thrust leaves them
            keys[:] = keys[order]
        return order

    monkeypatch.setattr(device_prims, "argsort", argsort)
    return compiled
