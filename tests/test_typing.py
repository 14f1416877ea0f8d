"""The public API is typed: every public function, method and class carries
annotations, and the package ships ``py.typed`` (PEP 561).  ``mypy`` checks
the annotations themselves in CI (``[tool.mypy]`` in pyproject.toml)."""

import importlib
import inspect
from pathlib import Path

import pytest

import skyjoin

PUBLIC_MODULES = ["skyjoin", "skyjoin.io", "skyjoin.datasets", "skyjoin.distributed"]
# dunder methods that are part of the public behaviour of a class
PUBLIC_DUNDERS = {"__init__", "__call__", "__enter__", "__exit__", "__len__", "__eq__"}


def _unannotated(qualname, fn, is_method):
    """The names of the parameters (and "return") of fn without an annotation."""
    sig = inspect.signature(fn)
    missing = [f"{qualname}({name})" for k, (name, p) in enumerate(sig.parameters.items())
               if not (is_method and k == 0) and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append(f"{qualname} -> ?")
    return missing


def _members(cls):
    """The public functions written in a class (not those that ``dataclass``
    generates): (name, function, is_method)."""
    for name, attr in vars(cls).items():
        if name.startswith("_") and name not in PUBLIC_DUNDERS:
            continue
        if inspect.isfunction(attr) and not Path(attr.__code__.co_filename).is_file():
            continue
        if isinstance(attr, property):
            yield name, attr.fget, True
        elif isinstance(attr, staticmethod):
            yield name, attr.__func__, False
        elif isinstance(attr, classmethod):
            yield name, attr.__func__, True
        elif inspect.isfunction(attr):
            yield name, attr, True


def _public_objects():
    for modname in PUBLIC_MODULES:
        if modname == "skyjoin.distributed":
            pytest.importorskip("distributed")
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if not name.startswith("__") and not inspect.ismodule(obj):
                yield f"{modname}.{name}", obj


def test_public_api_is_annotated():
    missing = []
    n_checked = 0
    for qualname, obj in _public_objects():
        if inspect.isclass(obj):
            for name, fn, is_method in _members(obj):
                missing += _unannotated(f"{qualname}.{name}", fn, is_method)
                n_checked += 1
        elif callable(obj):
            missing += _unannotated(qualname, obj, False)
            n_checked += 1
    assert n_checked > 50
    assert missing == []


def test_unannotated_function_is_reported():
    def f(x, y: int):
        return x

    assert _unannotated("f", f, False) == ["f(x)", "f -> ?"]


def test_py_typed_is_shipped():
    package = Path(skyjoin.__file__).parent
    assert (package / "py.typed").is_file()
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():  # the source tree: the wheel lists the marker
        assert '"skyjoin" = ["py.typed"]' in pyproject.read_text()


def test_self_join_output_is_overloaded():
    """A type checker knows what ``output=`` returns: a NeighborTable for
    "table" (the default), an ndarray for "counts" (``typing.overload``)."""
    import typing

    import numpy as np

    hints = [typing.get_type_hints(f) for f in typing.get_overloads(skyjoin.self_join)]
    by_output = {typing.get_args(h["output"]): h["return"] for h in hints
                 if typing.get_origin(h["output"]) is typing.Literal}
    assert by_output == {("table",): skyjoin.NeighborTable, ("counts",): np.ndarray}
    assert any(h["output"] is str for h in hints)           # a computed output: either
