"""Two small code-generation helpers of the CPU engine's tiled fill.

* ``compress16(dst, dpos, src, spos, dist, thr)``: the candidates
  ``src[spos:spos + 16]`` whose ``dist`` is ``<= thr``, packed to
  ``dst[dpos:]`` in their order; returns how many.  All 16 slots
  ``dst[dpos:dpos + 16]`` may be written (the ones past the count hold
  garbage), and ``src``/``dist`` must be readable up to ``spos + 16``.
  On x86 with AVX-512 and LLVM 19 or newer, for 32-bit ids (fewer than
  2^31 points), it is one register compress
  (``llvm.experimental.vector.compress``: ``vpcompressd``) and one vector
  store; elsewhere a branch-free scalar loop with the same contract
  (``compress16_scalar``).  The comparison is the ordered ``<=`` of the
  scalar test: a NaN never passes.
* ``prefetch_write(arr, pos)``, ``prefetch_read(arr, pos)``: a hint that
  item ``pos`` of the C-contiguous ``arr`` (counted over all its items, in
  memory order) will be written or read soon (``llvm.prefetch``, LLVM 17
  or newer); a no-op elsewhere.

The register form of the compress plus a plain store is used, not the
memory form (``masked.compressstore``); the measurements are in
``docs/decisions/join-tiled-path.md``.
"""

from __future__ import annotations

import llvmlite.binding as ll
import numba as nb
from llvmlite import ir
from numba.core import cgutils, config, types
from numba.extending import intrinsic, overload

from ..._core.config import NO_SIMD, NUMBA_CACHE

__all__ = ["compress16", "compress16_scalar", "prefetch_write", "prefetch_read",
           "VECTOR_COMPRESS", "PREFETCH"]


def _llvm_version() -> tuple:
    try:
        return tuple(ll.llvm_version_info)
    except Exception:  # no LLVM information: the portable code
        return (0,)


def _vector_compress_available() -> bool:
    """LLVM >= 19 (the generic compress intrinsic) and an AVX-512 target
    (elsewhere LLVM expands the intrinsic lane by lane: slower than the
    scalar loop).  A target fixed through NUMBA_CPU_NAME/NUMBA_CPU_FEATURES
    (portable caches) gets the scalar loop."""
    if NO_SIMD or _llvm_version() < (19,):
        return False
    try:
        if config.CPU_NAME or config.CPU_FEATURES:
            return False
        return bool(ll.get_host_cpu_features().get("avx512f", False))
    except Exception:
        return False


#: ``compress16`` is the vector form
VECTOR_COMPRESS = _vector_compress_available()
#: ``prefetch_write`` emits a prefetch (LLVM >= 17: opaque pointers, so the
#: intrinsic is named ``llvm.prefetch.p0``)
PREFETCH = not NO_SIMD and _llvm_version() >= (17,)


@nb.njit(inline="always", cache=NUMBA_CACHE, nogil=True)
def compress16_scalar(dst, dpos, src, spos, dist, thr):
    """``compress16`` as a branch-free scalar loop (the portable code)."""
    n = 0
    for t in range(16):
        dst[dpos + n] = src[spos + t]
        n += dist[spos + t] <= thr
    return n


@nb.njit(inline="always", cache=NUMBA_CACHE, nogil=True)
def _no_prefetch(arr, pos):
    return None


if VECTOR_COMPRESS or PREFETCH:
    def _splat(builder, vty, value):
        v = builder.insert_element(ir.Constant(vty, ir.Undefined), value,
                                   ir.Constant(ir.IntType(32), 0))
        zeros = ir.Constant(ir.VectorType(ir.IntType(32), vty.count), [0] * vty.count)
        return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), zeros)

    def _vector_types(dst, dpos, src, spos, dist):
        """The vector form takes 32-bit ids only: LLVM 22 crashed at run time
        on the compress of 16 64-bit lanes (split into two registers)."""
        return (isinstance(dst, types.Array) and isinstance(src, types.Array)
                and isinstance(dist, types.Array) and dst.ndim == src.ndim == dist.ndim == 1
                and dst.dtype == src.dtype and isinstance(src.dtype, types.Integer)
                and src.dtype.bitwidth == 32 and isinstance(dist.dtype, types.Float)
                and isinstance(dpos, types.Integer) and isinstance(spos, types.Integer))

    @intrinsic
    def compress16_vector(typingctx, dst, dpos, src, spos, dist, thr):
        if not (_vector_types(dst, dpos, src, spos, dist)
                and isinstance(dpos, types.Integer) and isinstance(spos, types.Integer)):
            return None
        sig = types.int64(dst, dpos, src, spos, dist, thr)

        def codegen(context, builder, sig, args):
            dst_t, dpos_t, src_t, spos_t, dist_t, thr_t = sig.args
            a_dst = context.make_array(dst_t)(context, builder, args[0])
            a_src = context.make_array(src_t)(context, builder, args[2])
            a_dist = context.make_array(dist_t)(context, builder, args[4])
            i64 = ir.IntType(64)
            dpos = context.cast(builder, args[1], dpos_t, types.int64)
            spos = context.cast(builder, args[3], spos_t, types.int64)
            ity = context.get_value_type(src_t.dtype)
            fty = context.get_value_type(dist_t.dtype)
            vi = ir.VectorType(ity, 16)
            vf = ir.VectorType(fty, 16)
            vm = ir.VectorType(ir.IntType(1), 16)
            vals = builder.load(builder.bitcast(builder.gep(a_src.data, [spos]),
                                                vi.as_pointer()), align=1)
            dv = builder.load(builder.bitcast(builder.gep(a_dist.data, [spos]),
                                              vf.as_pointer()), align=1)
            t = context.cast(builder, args[5], thr_t, dist_t.dtype)
            mask = builder.fcmp_ordered("<=", dv, _splat(builder, vf, t))
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vi, [vi, vm, vi]),
                f"llvm.experimental.vector.compress.v16i{ity.width}")
            packed = builder.call(fn, [vals, mask, ir.Constant(vi, ir.Undefined)])
            builder.store(packed, builder.bitcast(builder.gep(a_dst.data, [dpos]),
                                                  vi.as_pointer()), align=1)
            bits = builder.bitcast(mask, ir.IntType(16))
            pop = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(16), [ir.IntType(16)]),
                "llvm.ctpop.i16")
            return builder.zext(builder.call(pop, [bits]), i64)

        return sig, codegen

    def _prefetch(rw):
        @intrinsic
        def prefetch(typingctx, arr, pos):
            if not (isinstance(arr, types.Array) and arr.layout == "C"
                    and isinstance(pos, types.Integer)):
                return None
            sig = types.none(arr, pos)

            def codegen(context, builder, sig, args):
                a = context.make_array(sig.args[0])(context, builder, args[0])
                p = context.cast(builder, args[1], sig.args[1], types.int64)
                i8p = ir.IntType(8).as_pointer()
                i32 = ir.IntType(32)
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                    "llvm.prefetch.p0")
                # read or write, keep in all cache levels, data cache
                builder.call(fn, [builder.bitcast(builder.gep(a.data, [p]), i8p),
                                  ir.Constant(i32, rw), ir.Constant(i32, 3), ir.Constant(i32, 1)])
                return context.get_dummy_value()

            return sig, codegen
        return prefetch

    prefetch_write_intrinsic = _prefetch(1)
    prefetch_read_intrinsic = _prefetch(0)

prefetch_write = prefetch_write_intrinsic if PREFETCH else _no_prefetch
prefetch_read = prefetch_read_intrinsic if PREFETCH else _no_prefetch


def compress16(dst, dpos, src, spos, dist, thr):
    """See the module docstring (compiled code only)."""
    raise NotImplementedError("compress16 is callable from compiled code only")


@overload(compress16)
def _compress16_impl(dst, dpos, src, spos, dist, thr):
    if VECTOR_COMPRESS and _vector_types(dst, dpos, src, spos, dist):
        def impl(dst, dpos, src, spos, dist, thr):
            return compress16_vector(dst, dpos, src, spos, dist, thr)
    else:
        def impl(dst, dpos, src, spos, dist, thr):
            return compress16_scalar(dst, dpos, src, spos, dist, thr)
    return impl

