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
// must wait hands over to the next that can run.  A group is the threads that
// meet at a barrier: the block's (group 32) or a warp's (group w).  A thread
// that has returned counts as arrived (as on the GPU for __syncthreads); for a
// warp exchange it is a fault, since its lane has no value to give.
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
struct EmuGroup { int size, arrived, exited; unsigned round; };
struct EmuFiber { EmuContext ctx; int wait; bool done; };
static const int EMU_BLOCK_GROUP = 32;
static const size_t EMU_STACK = 256 * 1024;
static EmuGroup emu_groups[33];
static std::vector<EmuFiber> emu_fibers;
static std::unique_ptr<char[]> emu_stacks;
static size_t emu_stack_count = 0;
static EmuContext emu_scheduler;
static std::function<void()> emu_body;
static unsigned long long emu_lane_value[2][32][32];
static int emu_fault = 0;   // 1 warp exchange without a lane, 2 threads left waiting

extern "C" int emu_take_fault() { int f = emu_fault; emu_fault = 0; return f; }

static void emu_release(int g) {
    EmuGroup& grp = emu_groups[g];
    grp.arrived = 0;
    ++grp.round;
    for (auto& f : emu_fibers) if (f.wait == g) f.wait = -1;
}

static void emu_meet(int g) {
    EmuGroup& grp = emu_groups[g];
    if (g != EMU_BLOCK_GROUP && grp.exited) emu_fault |= 1;
    if (++grp.arrived + grp.exited >= grp.size) { emu_release(g); return; }
    const unsigned me = threadIdx.x, n = (unsigned)emu_fibers.size();
    emu_fibers[me].wait = g;
    for (unsigned k = 1; k < n; ++k) {      // straight on to the next thread that can run
        const unsigned t = (me + k) % n;
        if (emu_fibers[t].done || emu_fibers[t].wait >= 0) continue;
        threadIdx.x = t;
        emu_swap(&emu_fibers[me].ctx, &emu_fibers[t].ctx);
        return;                             // resumed, threadIdx.x set back to me
    }
    emu_swap(&emu_fibers[me].ctx, &emu_scheduler);   // none can: the scheduler sees it
}

static void emu_leave(int g) {
    EmuGroup& grp = emu_groups[g];
    ++grp.exited;
    if (grp.arrived) {
        if (g != EMU_BLOCK_GROUP) emu_fault |= 1;
        if (grp.arrived + grp.exited >= grp.size) emu_release(g);
    }
}

static void emu_fiber_start() {
    emu_body();
    const unsigned t = threadIdx.x;
    emu_fibers[t].done = true;
    emu_leave((int)(t >> 5));
    emu_leave(EMU_BLOCK_GROUP);
    emu_swap(&emu_fibers[t].ctx, &emu_scheduler);   // never resumed
}

// lane src's value v in this thread's warp (its own v where src is no lane);
// two buffers by the warp's round, so that one meeting an exchange suffices
template <typename T> static T emu_exchange(T v, int src) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned buf = emu_groups[w].round & 1u;
    unsigned long long slot = 0;
    std::memcpy(&slot, &v, sizeof(T));
    emu_lane_value[buf][w][lane] = slot;
    emu_meet(w);
    T r = v;
    if (src >= 0 && src < emu_groups[w].size) std::memcpy(&r, &emu_lane_value[buf][w][src], sizeof(T));
    return r;
}
template <typename T> static inline T __shfl_sync(unsigned, T v, int src) {
    return emu_exchange(v, src & 31);
}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, int o) {
    const int lane = threadIdx.x & 31;
    return emu_exchange(v, lane >= o ? lane - o : -1);
}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int o) {
    const int lane = threadIdx.x & 31;
    return emu_exchange(v, lane + o < 32 ? lane + o : -1);
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int x) {
    return emu_exchange(v, (threadIdx.x & 31) ^ x);
}
static inline unsigned __ballot_sync(unsigned, int pred) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned buf = emu_groups[w].round & 1u;
    emu_lane_value[buf][w][lane] = pred ? 1 : 0;
    emu_meet(w);
    unsigned bits = 0;
    for (int l = 0; l < emu_groups[w].size; ++l) if (emu_lane_value[buf][w][l]) bits |= 1u << l;
    return bits;
}
static inline int __any_sync(unsigned m, int pred) { return __ballot_sync(m, pred) != 0u; }
static inline int __all_sync(unsigned m, int pred) {
    const int size = emu_groups[threadIdx.x >> 5].size;
    return __ballot_sync(m, pred) == (size == 32 ? 0xffffffffu : (1u << size) - 1u);
}
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_meet((int)(threadIdx.x >> 5)); }
static inline void __syncthreads() { emu_meet(EMU_BLOCK_GROUP); }

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
static void emu_launch(void (*kernel)(A...), unsigned grid, unsigned block,
                       const unsigned long long* slots) {
    std::tuple<A...> args = emu_args<A...>(slots, std::index_sequence_for<A...>{});
    emu_body = [&] { std::apply(kernel, args); };
    if (emu_stack_count < block) {
        emu_stacks.reset(new char[EMU_STACK * block]);
        emu_stack_count = block;
    }
    emu_fibers.assign(block, EmuFiber());
    gridDim.x = grid;
    blockDim.x = block;
    for (unsigned b = 0; b < grid && !(emu_fault & 2); ++b) {
        for (int g = 0; g <= EMU_BLOCK_GROUP; ++g) {
            int lanes = (int)block - 32 * g;
            emu_groups[g] = EmuGroup{g == EMU_BLOCK_GROUP ? (int)block
                                     : (lanes < 0 ? 0 : (lanes > 32 ? 32 : lanes)), 0, 0, 0};
        }
        for (unsigned t = 0; t < block; ++t) {
            EmuFiber& f = emu_fibers[t];
            emu_prepare(&f.ctx, emu_stacks.get() + EMU_STACK * t, EMU_STACK);
            f.wait = -1;
            f.done = false;
        }
        blockIdx.x = b;
        for (unsigned left = block; left;) {
            bool ran = false;
            for (unsigned t = 0; t < block; ++t) {
                EmuFiber& f = emu_fibers[t];
                if (f.done || f.wait >= 0) continue;
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
        self.launch(ctypes.c_uint(int(grid[0])), ctypes.c_uint(int(block[0])), slots)
        _check(self.lib, self.name)


# a kernel's name in its definition: __global__ void [qualifiers] name(
_KERNEL = re.compile(r"__global__\s+void\s+(?:[A-Za-z_]\w*(?:\s*\([^()]*\))?\s+)*"
                     r"([A-Za-z_]\w*)\s*\(")


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
        code = _STUB + source + "".join(
            f'\nextern "C" void emu_launch_{i}(unsigned g, unsigned b, '
            f'const unsigned long long* s) {{ emu_launch(&{n}, g, b, s); }}'
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

    @staticmethod
    def asnumpy(a):
        return np.asarray(a)

    def __getattr__(self, name):
        return getattr(np, name)


class DeviceModule:
    """Stands in for the module of ``skyjoin._core.device_kernels``
    (``reduce.cu`` + ``prims.cu``): every kernel its CUDA source compiled by
    the host compiler (``Module``), the instances ``device_kernels.NAMES``."""

    def __init__(self):
        from skyjoin._core import device_kernels

        code = "\n".join((device_kernels._DIR / f).read_text() for f in device_kernels._SOURCES)
        self.compiled = Module(code, device_kernels.NAMES)

    def get_function(self, name):
        return self.compiled.get_function(name)


def emulate_reductions(monkeypatch):
    """Make ``skyjoin._core.device_reduce`` and ``device_prims`` run on the
    host (``emulate_device_kernels``, whose list it returns)."""
    return emulate_device_kernels(monkeypatch)


_DEVICE_MODULE = []


def emulate_device_kernels(monkeypatch):
    """Make ``skyjoin._core.device_kernels`` (the reductions and the device
    primitives) run on ``DeviceModule`` (the reductions on a grid of 3
    blocks), and the Thrust argsort on NumPy's
    stable argsort.  Returns the list of the instance sets that
    ``device_kernels.module`` was asked to compile, in order (a kit, or one
    instance that no loaded kit holds), empty at the start."""
    from skyjoin._core import device_kernels, device_prims, device_reduce

    if not _DEVICE_MODULE:
        _DEVICE_MODULE.append(DeviceModule())
    compiled = []

    def module(cp, names):
        compiled.append(tuple(names))
        return _DEVICE_MODULE[0]

    monkeypatch.setattr(device_kernels, "module", module)
    monkeypatch.setattr(device_kernels, "_HOME", {})
    # the reductions' fixed grid, 3 blocks instead of 512: each emulated block
    # starts 256 host threads (the result is the same on any grid)
    monkeypatch.setattr(device_reduce, "_BLOCKS", 3)

    def argsort(cp, keys, in_place=False):
        order = np.argsort(keys, kind="stable").astype(np.int64)
        if in_place:                    # the keys left sorted, as Thrust leaves them
            keys[:] = keys[order]
        return order

    monkeypatch.setattr(device_prims, "argsort", argsort)
    return compiled
