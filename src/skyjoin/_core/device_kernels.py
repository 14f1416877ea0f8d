"""The one module of the project's small device kernels, compiled once per process.

Rule: the whole-array reductions (``kernels/reduce.cu``, used by
:mod:`skyjoin._core.device_reduce`) and the device primitives of the GPU
first-call paths (``kernels/prims.cu``, used by
:mod:`skyjoin._core.device_prims`) are one source and one ``cupy.RawModule``:
a first GPU call pays one NVRTC compile for all of them, where each CuPy
elementwise, indexing or scan routine would compile once per routine and
dtype (docs/design.md, "First calls on the GPU").  Only the template
instances listed here are compiled (NVRTC name expressions).

CuPy is passed in, never imported here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["module", "function", "launch", "c_type", "item_type", "BLOCK"]

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


def _names() -> list:
    """Every template instance of the module (NVRTC name expressions)."""
    c = _C_TYPES
    names = [f"block_sum<{c[t]}, long long>" for t in _INTS]
    names += [f"block_sum<{c[t]}, double>" for t in _FLOATS]
    names += [f"flag_nonfinite<{c[t]}>" for t in _FLOATS]
    names += [f"{k}<{c[t]}>" for k in ("flag_nonzero", "flag_zero") for t in _INTS + _FLOATS]
    names += [f"column_bounds<{c[t]}>" for t in _FLOATS]
    names += ["gathered_sum", "weighted_spans", "flag_differ<int>"]
    items = ("unsigned int", "unsigned long long")       # 4- and 8-byte items only
    names += [f"cast<{u}, {u}>" for u in items]
    names += ["cast<long long, int>", "cast<int, long long>"]
    names += [f"fill<{u}>" for u in items] + [f"run_flags<{u}>" for u in items]
    names += [f"{k}<{u}, {i}>" for k in ("gather_rows", "scatter_rows") for u in items for i in _IDX]
    names += [f"iota<{i}>" for i in _IDX] + ["negate<long long>"]
    names += [f"scatter_iota<{i}, {t}>" for i in _IDX for t in _IDX]
    names += [f"compact_from_scan<int, {i}>" for i in _IDX]
    for ti, to in (("int", "int"), ("int", "long long"), ("long long", "long long")):
        names += [f"scan_chunk_sums<{ti}, {to}>", f"scan_chunks<{ti}, {to}>"]
    names += [f"scan_chunk_offsets<{i}>" for i in _IDX]
    names += [f"searchsorted<{t}, {i}>" for t in _IDX for i in _IDX]
    names += [f"cell_coords<{c[t]}>" for t in _FLOATS]
    names += ["rank_ids", "window_ranks", "range_lengths", "length_flags"]
    return names


NAMES = tuple(_names())
_NAME_SET = frozenset(NAMES)
BLOCK = 256
_MAX_BLOCKS = 8192
_MODULE = None


def module(cp):
    """The compiled module (compiled on the first call of the process)."""
    global _MODULE
    if _MODULE is None:
        code = "\n".join((_DIR / f).read_text() for f in _SOURCES)
        _MODULE = cp.RawModule(code=code, options=("--std=c++14",), name_expressions=list(NAMES))
    return _MODULE


def function(cp, name: str):
    """The kernel ``name`` (one of ``NAMES``).

    Raises
    ------
    KeyError
        When ``name`` is not an instance of the module.
    """
    if name not in _NAME_SET:
        raise KeyError(f"no device kernel {name!r} in skyjoin._core.kernels")
    return module(cp).get_function(name)


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
