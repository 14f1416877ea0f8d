"""The package's shape, checked: file sizes, private names, engines below the
public API, lazy heavy imports.

The import layers, the ban on skyjoin.distributed in single-machine code and
the absence of import cycles are import-linter contracts (pyproject.toml,
run by ``lint-imports`` in .ci/run).
"""

import ast
import pathlib
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "skyjoin"
MAX_LINES = 600


def sources():
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path):
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_of(module, is_package):
    return module if is_package else module.rpartition(".")[0]


def test_no_source_file_over_the_limit():
    long = {str(p.relative_to(SRC)): n for p in sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def imports_from(path):
    """(target module, name) for every ``from X import name`` in the file at
    ``path`` (relative imports resolved; lazy imports in functions included)."""
    mod = module_name(path)
    pkg = package_of(mod, path.name == "__init__.py")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = pkg.split(".")
            base = base[:len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        for alias in node.names:
            yield target, alias.name


def is_package(module):
    return (SRC.parent / module.replace(".", "/") / "__init__.py").exists()


def is_module(module):
    """A module or package of the tree (not a name defined in one)."""
    return is_package(module) or (SRC.parent / (module.replace(".", "/") + ".py")).exists()


def private_imports(path, same_package: bool):
    """``from X import _name`` lines of the file at ``path`` whose X is a module of
    the importer's own package (``same_package``: a sibling) or of another
    package."""
    mod = module_name(path)
    pkg = package_of(mod, path.name == "__init__.py")
    found = []
    for target, name in imports_from(path):
        if name is None or not target.startswith("skyjoin"):
            continue
        private = name.startswith("_") and not name.startswith("__")
        if not private or is_module(f"{target}.{name}"):
            continue
        target_pkg = package_of(target, is_package(target))
        if (target_pkg == pkg) == same_package:
            found.append((mod, f"from {target} import {name}"))
    return found


def private_imports_across_packages():
    """(importer, 'from X import _name') for every private name imported from
    a module of another package."""
    return [hit for path in sources() for hit in private_imports(path, same_package=False)]


def test_no_private_name_imported_from_another_package():
    assert private_imports_across_packages() == []


def test_the_check_finds_a_private_import(tmp_path, monkeypatch):
    """The check above is not vacuous: a planted import across packages is found."""
    fake = tmp_path / "skyjoin"
    for sub in ("a", "b"):
        (fake / sub).mkdir(parents=True)
        (fake / sub / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "a" / "m.py").write_text("from ..b.n import _hidden\nfrom .k import _ok\n")
    (fake / "b" / "n.py").write_text("_hidden = 1\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert private_imports_across_packages() == [("skyjoin.a.m", "from skyjoin.b.n import _hidden")]


def exception_classes():
    """(module, class) for every public class in the source that derives from
    a built-in exception or warning (by the name of a base: ...Error,
    Exception or Warning).  A private class (``_Interrupted``, the command
    line's own signal) is no public exception."""
    found = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and any(
                    getattr(b, "id", getattr(b, "attr", "")).endswith(
                        ("Error", "Exception", "Warning"))
                    for b in node.bases):
                found.append((module_name(path), node.name))
    return found


def test_every_public_exception_has_one_home():
    """skyjoin.errors defines every exception class, and the top level
    re-exports each of them (the same object)."""
    import skyjoin
    import skyjoin.errors as errors

    assert sorted(exception_classes()) == sorted(("skyjoin.errors", n) for n in errors.__all__)
    for name in errors.__all__:
        assert getattr(skyjoin, name) is getattr(errors, name)
        assert getattr(errors, name).__module__ == "skyjoin.errors"
        assert name in skyjoin.__all__


@pytest.mark.parametrize("heavy", ["cupy", "dask", "distributed", "matplotlib", "pandas",
                                   "skyjoin.distributed"])
def test_import_skyjoin_stays_light(heavy):
    """``import skyjoin`` loads none of the lazy dependencies."""
    code = f"import sys, skyjoin; print({heavy!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


#: Where the engines live: they take conditioned points and a plan, and never
#: climb back up into a public function (which would check, condition and
#: route a second time).
ENGINE_MODULES = ("skyjoin.simjoin.cpu", "skyjoin.simjoin.gpu", "skyjoin.simjoin.engine",
                  "skyjoin.cluster.engine", "skyjoin.cluster.hybrid", "skyjoin.cluster.table_gpu",
                  "skyjoin.cluster.grid_cpu", "skyjoin.cluster.grid_gpu",
                  "skyjoin.cluster.core_points", "skyjoin.cluster.union_find", "skyjoin.index",
                  "skyjoin.distributed.join", "skyjoin.distributed.owned_rows",
                  "skyjoin.distributed.halo_dbscan", "skyjoin.distributed.dbscan",
                  "skyjoin.distributed.in_process_gpu")
#: The public functions' modules: check, condition, plan, then the engine.
PUBLIC_API_MODULES = ("skyjoin.simjoin.api", "skyjoin.cluster.estimator", "skyjoin.pareto.api",
                      "skyjoin.cluster.sweep.api")


def _within(module, prefixes):
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def engine_imports_of_public_api():
    """(engine module, public API module it imports) pairs, any import form:
    ``from skyjoin.simjoin.api import x``, ``from skyjoin.simjoin import api``,
    ``import skyjoin.simjoin.api``."""
    found = []
    for path in sources():
        mod = module_name(path)
        if not _within(mod, ENGINE_MODULES):
            continue
        for target, name in imports_from(path):
            for full in (target, f"{target}.{name}" if name else target):
                found += [(mod, api) for api in PUBLIC_API_MODULES if _within(full, (api,))]
    return sorted(set(found))


def test_engine_modules_exist():
    """The lists above name real modules (a renamed engine must be listed again)."""
    for name in ENGINE_MODULES + PUBLIC_API_MODULES:
        path = SRC.parent / name.replace(".", "/")
        assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), name


def test_no_engine_module_imports_a_public_api_module():
    assert engine_imports_of_public_api() == []


def test_the_engine_check_finds_a_climb(tmp_path, monkeypatch):
    """The check above is not vacuous: an engine importing the API is found, in
    each import form."""
    fake = tmp_path / "skyjoin"
    (fake / "simjoin" / "cpu").mkdir(parents=True)
    for init in (fake, fake / "simjoin", fake / "simjoin" / "cpu"):
        (init / "__init__.py").write_text("")
    (fake / "simjoin" / "api.py").write_text("def self_join(): pass\n")
    (fake / "simjoin" / "cpu" / "a.py").write_text("from ..api import self_join\n")
    (fake / "simjoin" / "cpu" / "b.py").write_text("def f():\n    from .. import api\n")
    (fake / "simjoin" / "cpu" / "c.py").write_text("import skyjoin.simjoin.api\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert engine_imports_of_public_api() == [
        ("skyjoin.simjoin.cpu.a", "skyjoin.simjoin.api"), ("skyjoin.simjoin.cpu.b", "skyjoin.simjoin.api"),
        ("skyjoin.simjoin.cpu.c", "skyjoin.simjoin.api")]


def test_no_private_name_imported_from_a_sibling():
    """A helper shared inside a package is public within it: no module
    imports a sibling's ``_name`` (private modules are import-linter's)."""
    found = [hit for path in sources() for hit in private_imports(path, same_package=True)]
    assert found == []


def test_the_sibling_check_finds_a_private_import(tmp_path, monkeypatch):
    fake = tmp_path / "skyjoin"
    (fake / "a").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "a" / "__init__.py").write_text("")
    (fake / "a" / "m.py").write_text("from .k import _hidden, shown\nfrom . import _simd\n")
    (fake / "a" / "k.py").write_text("_hidden = shown = 1\n")
    (fake / "a" / "_simd.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert private_imports(fake / "a" / "m.py", same_package=True) == [
        ("skyjoin.a.m", "from skyjoin.a.k import _hidden")]


def test_operator_names_are_functions_never_modules():
    """``skyjoin.join``, ``skyjoin.skyline`` and ``skyjoin.dbscan`` are the
    functions, also after every module of the package is imported (a fresh
    process), and no module of those names exists: the subpackages are
    ``simjoin``, ``pareto`` and ``cluster``."""
    code = (
        "import importlib, pkgutil, sys, types, skyjoin\n"
        "skip = ('skyjoin.distributed', 'skyjoin.bench')\n"
        "for m in pkgutil.walk_packages(skyjoin.__path__, 'skyjoin.'):\n"
        "    if not m.name.startswith(skip):\n"
        "        importlib.import_module(m.name)\n"
        "for name in ('join', 'skyline', 'dbscan'):\n"
        "    f = getattr(skyjoin, name)\n"
        "    assert isinstance(f, types.FunctionType), (name, f)\n"
        "    assert 'skyjoin.' + name not in sys.modules, name\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_cuda_sources_are_where_their_loaders_read_them():
    """Every CUDA source a GPU module reads by path is there (a moved
    package must take its kernels along); read on the CPU, no GPU needed."""
    import os

    from skyjoin._core import device_kernels
    from skyjoin.index import grid_gpu
    from skyjoin.pareto import gpu_kernels

    assert os.path.isfile(grid_gpu._KERNEL_FILE), grid_gpu._KERNEL_FILE
    assert "__global__" in gpu_kernels._kernel_source()
    for name in device_kernels._SOURCES:
        assert (device_kernels._DIR / name).is_file(), name
