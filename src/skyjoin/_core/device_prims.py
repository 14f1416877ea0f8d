"""Device primitives of the GPU first-call paths, on the project's own kernels.

Rule: a first-call path on the GPU (the grids, ranges and plans of the join,
DBSCAN and skyline) uses these primitives, not CuPy's elementwise, indexing,
scan or ``unique`` routines: each of those compiles a kernel with NVRTC on
its first call per routine and dtype, whereas these are instances of the one
module of :mod:`skyjoin._core.device_kernels`, compiled once per process
(docs/decisions/core-gpu-first-calls.md).  CuPy's sorts (Thrust, compiled
ahead) are kept, called so that CuPy makes no copy of its own.

Arrays are CuPy arrays, 1-D and C-contiguous unless a function says
otherwise; CuPy is passed in, never imported here.  Every function is one
or a few launches of O(n) work (``sort`` and ``argsort``: Thrust's radix
sort), with no synchronisation unless it returns a host value.
"""

from __future__ import annotations

import numpy as np

from .device_kernels import c_type, function, item_type, launch

__all__ = ["astype", "fill", "arange", "negate", "take", "inverse_permutation",
           "scan", "runs", "compact", "sort", "argsort", "sorted_runs", "key_dtype", "packs_index",
           "searchsorted"]

_SCAN_CHUNKS = 1024        # most chunks of a scan (one block scans their sums)
_SCAN_THREADS = 256        # the scan's block size
_SCAN_TILE = 256 * 8       # items per tile of a chunk (SCAN_TILE in prims.cu)


def astype(cp, a, dtype, out=None):
    """A C-contiguous copy of ``a`` (any shape) as ``dtype``, new or into
    ``out`` (C-contiguous, a's size): a bit copy when the dtype is a's,
    else a cast (int64 <-> int32)."""
    dtype = np.dtype(dtype)
    if out is None:
        out = cp.empty(a.shape, dtype=dtype)
    src = cp.ascontiguousarray(a)
    name = (f"cast<{item_type(dtype)}, {item_type(dtype)}>" if dtype == src.dtype
            else f"cast<{c_type(src.dtype)}, {c_type(dtype)}>")
    launch(cp, name, src.size, (src, np.int64(src.size), out))
    return out


def _bits(dtype, value):
    """``value`` as a scalar of the unsigned type of the dtype's item size."""
    return np.asarray(value, dtype=dtype).reshape(1).view(f"u{np.dtype(dtype).itemsize}")[0]


def fill(cp, out, value) -> None:
    """out[:] = value for a 1-D array ``out`` (a strided view is fine)."""
    n = int(out.size)
    if n:
        step = out.strides[0] // out.itemsize
        launch(cp, f"fill<{item_type(out.dtype)}>", n,
               (out, np.int64(n), np.int64(step), _bits(out.dtype, value)))


def arange(cp, n: int, dtype, start: int = 0):
    """[start, start + n) as int32 or int64."""
    dtype = np.dtype(dtype)
    out = cp.empty(int(n), dtype=dtype)
    launch(cp, f"iota<{c_type(dtype)}>", n, (out, np.int64(n), dtype.type(start)))
    return out


def negate(cp, a) -> None:
    """a[:] = -a[:] in place (int64)."""
    launch(cp, "negate<long long>", a.size, (a, np.int64(a.size)))


def take(cp, src, idx, out=None):
    """src[idx]: items of a 1-D ``src`` or rows of a C-contiguous 2-D one
    (idx int32 or int64, in range).  ``out`` may be ``idx`` itself when src
    is 1-D of idx's item size (the in-place renaming ``idx[:] = src[idx]``)."""
    n = int(idx.size)
    d = 1 if src.ndim == 1 else int(src.shape[1])
    if out is None:
        out = cp.empty((n,) + tuple(src.shape[1:]), dtype=src.dtype)
    launch(cp, f"gather_rows<{item_type(src.dtype)}, {c_type(idx.dtype)}>", n * d,
           (src, idx, np.int64(n), np.int32(d), out))
    return out


def inverse_permutation(cp, perm, dtype, out=None):
    """inv with inv[perm[i]] = i (perm int32 or int64, without repeats, in
    range: a permutation of 0 .. n-1 gives its inverse).  Into ``out`` (any
    size; its other items are left alone) or a new array of perm's size."""
    n = int(perm.size)
    if out is None:
        out = cp.empty(n, dtype=dtype)
    launch(cp, f"scatter_iota<{c_type(perm.dtype)}, {c_type(out.dtype)}>", n,
           (perm, np.int64(n), out))
    return out


def scan(cp, a, dtype, inclusive: bool = True, init: int = 0, out=None):
    """Prefix sums of the int32 or int64 array ``a`` into ``dtype`` (int32 or
    int64, not narrower than a): out[i] = init + sum of a[:i + 1]
    (``inclusive``) or of a[:i].  Exact (integers); ``out`` may be ``a``.

    Three launches over fixed chunks (chunk sums, their scan by one block,
    the chunks scanned in tiles from their offsets): O(n).
    """
    dtype = np.dtype(dtype)
    n = int(a.size)
    if out is None:
        out = cp.empty(n, dtype=dtype)
    if not n:
        return out
    ti, to = c_type(a.dtype), c_type(dtype)
    tiles = -(-n // _SCAN_TILE)
    chunk = -(-tiles // min(tiles, _SCAN_CHUNKS)) * _SCAN_TILE
    nb = -(-n // chunk)
    part = cp.empty(nb, dtype=dtype)
    function(cp, f"scan_chunk_sums<{ti}, {to}>")((nb,), (_SCAN_THREADS,), (a, np.int64(n), np.int64(chunk), part))
    function(cp, f"scan_chunk_offsets<{to}>")((1,), (1024,), (part, np.int32(nb)))
    function(cp, f"scan_chunks<{ti}, {to}>")((nb,), (_SCAN_THREADS,),
                                             (a, np.int64(n), np.int64(chunk), part, dtype.type(init),
                                              np.int32(1 if inclusive else 0), out))
    return out


def runs(cp, keys, start_dtype):
    """The runs of equal items (bitwise) of ``keys`` (any dtype; sorted keys
    give one run per distinct key).

    Returns (run_of, starts): ``run_of`` (n,) int32, the run of each
    position, and ``starts`` (n_runs + 1,) of ``start_dtype``, where run r
    is ``starts[r]:starts[r + 1]`` (the last entry is n).  The flags of the
    runs' first positions, then their :func:`compact`: O(n), one small
    host copy (the number of runs).
    """
    n = int(keys.size)
    run_of = cp.empty(n, dtype=cp.int32)
    if n:
        launch(cp, f"run_flags<{item_type(keys.dtype)}>", n, (keys, np.int64(n), run_of))
    starts, run_of = compact(cp, run_of, start_dtype, tail=True)
    return run_of, starts


def compact(cp, flags, dtype, tail: bool = False):
    """The positions of the non-zero items of the 0/1 int32 array ``flags``
    (overwritten by its inclusive scan minus one), in order, as ``dtype``,
    followed by n with ``tail`` (the flags of runs' first positions then
    give the runs' starts and end).

    Returns (positions, pos): ``pos[i]`` is the number of flags set in
    ``flags[:i + 1]`` minus one (``flags`` itself, rewritten).  O(n), one
    small host copy (the count).
    """
    n = int(flags.size)
    pos = scan(cp, flags, cp.int32, inclusive=True, init=-1, out=flags)
    count = int(pos[-1]) + 1 if n else 0
    out = cp.empty(count + int(tail), dtype=dtype)
    if count or tail:
        launch(cp, f"compact_from_scan<int, {c_type(dtype)}>", n,
               (pos, np.int64(n), out, np.int32(tail)))
    return out, pos


def sort(cp, a):
    """A sorted copy of ``a`` (Thrust's sort, in place on our own copy)."""
    out = astype(cp, a, a.dtype)
    out.sort()
    return out


def argsort(cp, keys, in_place: bool = False):
    """The stable ascending order of ``keys`` as int64 (Thrust's radix
    argsort, the one behind ``cupy.argsort``), on our own copy of the keys,
    or with ``in_place`` on ``keys`` themselves (C-contiguous), which are
    left sorted: no copy, the keys' bytes a point fewer at the sort's peak
    (Thrust's own buffers take as much again as the keys and the order)."""
    if in_place and not keys.flags.c_contiguous:
        raise ValueError("argsort in place needs C-contiguous keys")
    work = keys if in_place else astype(cp, keys, keys.dtype)
    idx = cp.empty(int(keys.size), dtype=cp.int64)
    if keys.size:
        cp.cuda.thrust.argsort(work.dtype, idx.data.ptr, work.data.ptr, 0, (int(keys.size),))
    return idx


def key_dtype(key_end: int):
    """The key type in which :func:`sorted_runs` sorts keys in [0, key_end):
    int32 where they fit 31 bits (key_end <= 2**31), else int64.  Thrust's
    radix sort makes four passes over int32 keys against eight over int64,
    so narrow keys stay int32 even where the index does not fit beside them
    (sorted with their index: 0.63-0.68 ms for 10M keys, against 0.89-0.94
    packed in int64; docs/decisions/dbscan-fit-path.md, "The cell keys'
    sort")."""
    return np.dtype(np.int32) if int(key_end) <= 2**31 else np.dtype(np.int64)


def packs_index(n: int, key_end: int, dtype) -> bool:
    """Whether ``n`` keys of ``dtype`` (int32 or int64) in [0, key_end) sort
    with each key packed above its index (:func:`sorted_runs`): the key's
    bits and an index's fit the dtype's, its sign bit left clear."""
    index_bits = max(int(n) - 1, 0).bit_length()
    key_bits = max(int(key_end) - 1, 0).bit_length()
    return key_bits + index_bits <= 8 * np.dtype(dtype).itemsize - 1


def sorted_runs(cp, keys, key_end: int):
    """Sort ``keys`` (int32 or int64, C-contiguous, in [0, key_end), fewer
    than 2**31; :func:`key_dtype` is the type to give them) in place and
    find their runs: the sort of every GPU grid.

    Where :func:`packs_index` holds, each key is packed above its index and
    Thrust's radix sort runs on the keys alone (distinct keys: the order is
    the stable one); else Thrust's argsort (:func:`argsort`), its int64
    order then narrowed.  The packed sort moves a key a pass, the argsort a
    key and an int64 index (docs/decisions/dbscan-fit-path.md, "The cell
    keys' sort").  ``keys`` is overwritten.

    Returns (order, run_of, starts, run_key): ``order`` (n,) int32, the row
    of each sorted key; ``run_of`` (n,) int32, the run of each sorted
    position; ``starts`` (n_runs + 1,) int32, run r is
    ``starts[r]:starts[r + 1]``; ``run_key`` (n_runs,) int64, its key.
    O(n) plus the sort, one host copy (the number of runs).
    """
    n = int(keys.size)
    if not keys.flags.c_contiguous:
        raise ValueError("sorted_runs needs C-contiguous keys")
    t = c_type(keys.dtype)
    if packs_index(n, key_end, keys.dtype):
        shift = max(n - 1, 0).bit_length()
        launch(cp, f"pack_index<{t}>", n, (keys, np.int64(n), np.int32(shift)))
        keys.sort()
        order = cp.empty(n, dtype=cp.int32)
        run_of = cp.empty(n, dtype=cp.int32)
        launch(cp, f"unpack_runs<{t}>", n, (keys, np.int64(n), np.int32(shift), order, run_of))
        starts, run_of = compact(cp, run_of, cp.int32, tail=True)
    else:
        shift = 0
        order = astype(cp, argsort(cp, keys, in_place=True), cp.int32)
        run_of, starts = runs(cp, keys, cp.int32)
    n_runs = int(starts.size) - 1
    run_key = cp.empty(n_runs, dtype=cp.int64)
    launch(cp, f"run_keys<{t}>", n_runs, (keys, starts, np.int64(n_runs), np.int32(shift), run_key))
    return order, run_of, starts, run_key


def searchsorted(cp, table, v, side: str = "left", dtype=np.int64):
    """Index of each item of ``v`` in the sorted ``table`` (both int32 or both
    int64), like ``numpy.searchsorted``; O(n log m)."""
    out = cp.empty(int(v.size), dtype=dtype)
    launch(cp, f"searchsorted<{c_type(table.dtype)}, {c_type(dtype)}>", v.size,
           (table, np.int64(table.size), v, np.int64(v.size), np.int32(side == "right"), out))
    return out
