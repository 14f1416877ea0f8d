"""The project's small device kernels, compiled per operator kit, once per process.

Rule: the whole-array reductions (``kernels/reduce.cu``, used by
:mod:`skyjoin._core.device_reduce`) and the device primitives of the GPU
first-call paths (``kernels/prims.cu``, used by
:mod:`skyjoin._core.device_prims`) are one source.  Each GPU operator
names its *kit* (``KITS``: the template instances its calls use) and loads
it first (:func:`load`): one NVRTC compile of just those instances, the
ones this process has not compiled yet, as one ``cupy.RawModule``.  A first
call thus pays one compile for its operator's instances, not for every
operator's, and not one per CuPy routine and dtype
(docs/decisions/core-gpu-first-calls.md).  An instance that no loaded kit
holds is compiled alone on its first use (:func:`function`): correct, one
more compile.

CuPy is passed in, never imported here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["source", "module", "load", "function", "launch", "c_type", "item_type", "BLOCK", "KITS", "NAMES"]

_DIR = Path(__file__).with_name("kernels")
_SOURCES = ("reduce.cu", "prims.cu")
#: C type of each dtype a kernel may take.
_C_TYPES = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int",
            "uint64": "unsigned long long", "uint32": "unsigned int", "uint8": "unsigned char",
            "bool": "bool", "int8": "signed char", "int16": "short", "uint16": "unsigned short"}
#: The unsigned C type of each item size: copies go by item size.
_ITEM = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
_INTS = ("int64", "int32", "uint64", "uint32", "uint8", "bool", "int8", "int16", "uint16")
_FLOATS = ("float64", "float32")
_IDX = ("int", "long long")
#: The kernels of ``device_prims.sorted_runs``, one instance a key type.
_SORTED_RUNS = ("pack_index", "unpack_runs", "run_keys")


def _reductions() -> list:
    """The instances of ``reduce.cu`` that the validation and the bounds use."""
    c = _C_TYPES
    names = [f"flag_nonfinite<{c[t]}>" for t in _FLOATS]
    return names + [f"column_bounds<{c[t]}>" for t in _FLOATS]


def _join() -> list:
    """The join's kit: its grid, ranges, plan and row statistics."""
    c = _C_TYPES
    names = _reductions() + ["gathered_sum", "weighted_spans", "flag_differ<int>"]
    items = ("unsigned int", "unsigned long long")       # 4- and 8-byte items only
    names += [f"cast<{u}, {u}>" for u in items]
    names += ["cast<long long, int>", "cast<int, long long>"]
    names += [f"fill<{u}>" for u in items] + [f"run_flags<{u}>" for u in items]
    names += [f"gather_rows<{u}, {i}>" for u in items for i in _IDX]
    names += [f"iota<{i}>" for i in _IDX] + ["negate<long long>"]
    names += [f"scatter_iota<{i}, {t}>" for i in _IDX for t in _IDX]
    names += [f"compact_from_scan<int, {i}>" for i in _IDX]
    names += [f"{k}<long long>" for k in _SORTED_RUNS]
    names += _scans((("int", "int"), ("int", "long long"), ("long long", "long long")))
    names += [f"searchsorted<{t}, {i}>" for t in _IDX for i in _IDX]
    names += [f"cell_coords<{c[t]}>" for t in _FLOATS]
    return names + ["rank_ids", "window_ranks", "range_lengths", "length_flags"]


def _scans(pairs) -> list:
    """The three scan phases for each (input, output) C type pair."""
    names = []
    for ti, to in pairs:
        names += [f"scan_chunk_sums<{ti}, {to}>", f"scan_chunks<{ti}, {to}>"]
    return names + [f"scan_chunk_offsets<{to}>" for to in dict.fromkeys(to for _, to in pairs)]


def _dbscan() -> list:
    """The DBSCAN grid path's kit: bounds (float32 and float64 points), the
    cell sort (32- and 64-bit keys), cluster numbering."""
    names = [f"{k}<{t}>" for k in ("flag_nonfinite", "column_bounds") for t in ("double", "float")]
    names += [f"cast<{u}, {u}>" for u in ("unsigned int", "unsigned long long")]
    names += ["cast<long long, int>", "cast<int, long long>", "cast<unsigned char, int>"]
    names += ["fill<unsigned char>", "fill<unsigned int>", "fill<unsigned long long>"]
    names += [f"{k}<{i}>" for k in _SORTED_RUNS for i in _IDX]   # 32- and 64-bit keys
    names += ["run_flags<unsigned int>", "run_flags<unsigned long long>"]   # keys not packed
    names += [f"gather_rows<{u}, {i}>" for u in ("unsigned int", "unsigned long long")
              for i in _IDX]
    names += ["scatter_iota<long long, int>", "scatter_iota<long long, long long>"]
    names += ["compact_from_scan<int, long long>", "compact_from_scan<int, int>"]
    return names + _scans((("int", "int"),))


def _skyline() -> list:
    """The skyline's kit (SkyAlign): validation, gathers, cells, repacking."""
    names = ["flag_nonfinite<double>", "cast<unsigned long long, unsigned long long>",
             "fill<unsigned int>", "run_flags<unsigned int>", "run_flags<unsigned long long>"]
    names += [f"gather_rows<{u}, long long>" for u in ("unsigned int", "unsigned long long")]
    names += ["compact_from_scan<int, long long>", "searchsorted<int, long long>"]
    return names + _scans((("int", "int"), ("long long", "long long")))


def _others() -> list:
    """Instances that no kit lists (the reductions of other dtypes)."""
    c = _C_TYPES
    names = [f"block_sum<{c[t]}, long long>" for t in _INTS]
    names += [f"block_sum<{c[t]}, double>" for t in _FLOATS]
    return names + [f"{k}<{c[t]}>" for k in ("flag_nonzero", "flag_zero") for t in _INTS + _FLOATS]


#: The instances each GPU operator's calls use, compiled together by :func:`load`.
KITS = {"join": tuple(_join()), "dbscan": tuple(_dbscan()), "skyline": tuple(_skyline())}
#: Every instance of the source (NVRTC name expressions).
NAMES = tuple(dict.fromkeys(KITS["join"] + KITS["dbscan"] + KITS["skyline"] + tuple(_others())))
_NAME_SET = frozenset(NAMES)
BLOCK = 256
_MAX_BLOCKS = 8192
#: The module that holds each instance compiled in this process.
_HOME: dict = {}


def source() -> str:
    """The CUDA source of every instance: ``kernels/reduce.cu`` then
    ``kernels/prims.cu``, as one text."""
    return "\n".join((_DIR / f).read_text() for f in _SOURCES)


def module(cp, names: tuple):
    """Compile one module of the instances ``names`` (NVRTC name expressions).

    O(compile of those instances): the source is parsed once, code is
    generated for the listed instances only.
    """
    return cp.RawModule(code=source(), options=("--std=c++14",), name_expressions=list(names))


def load(cp, kit: str) -> None:
    """Compile, as one module, the instances of ``KITS[kit]`` that this
    process has not compiled yet (nothing when it has them all).

    Raises
    ------
    KeyError
        For an unknown kit.
    """
    missing = tuple(n for n in KITS[kit] if n not in _HOME)
    if missing:
        mod = module(cp, missing)
        for name in missing:
            _HOME[name] = mod


def function(cp, name: str):
    """The kernel ``name`` (one of ``NAMES``), from the module of a loaded kit,
    else from a module of its own (compiled on this first use).

    Raises
    ------
    KeyError
        When ``name`` is not an instance of the module.
    """
    if name not in _NAME_SET:
        raise KeyError(f"no device kernel {name!r} in skyjoin._core.kernels")
    if name not in _HOME:                   # in no loaded kit: compiled alone
        _HOME[name] = module(cp, (name,))
    return _HOME[name].get_function(name)


def launch(cp, name: str, n: int, args, threads: int = BLOCK):
    """Run the grid-stride kernel ``name`` over ``n`` items: enough blocks of
    ``threads`` threads for one item each, at most 8192 blocks (at least one)."""
    blocks = max(1, min((int(n) + threads - 1) // threads, _MAX_BLOCKS))
    function(cp, name)((blocks,), (threads,), tuple(args))


def c_type(dtype) -> str:
    """The C type of a dtype, for a kernel's template argument.

    Raises
    ------
    TypeError
        For a dtype no kernel takes.
    """
    name = np.dtype(dtype).name
    if name not in _C_TYPES:
        raise TypeError(f"no device kernel takes dtype {name}")
    return _C_TYPES[name]


def item_type(dtype) -> str:
    """The unsigned C type of the dtype's item size (copies go by item size)."""
    return _ITEM[np.dtype(dtype).itemsize]
