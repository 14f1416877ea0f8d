"""``skyjoin warmup`` compiles every kernel that a command can reach.

After the warm-up (CPU), every command runs on small files of several
shapes, and no Numba dispatcher of skyjoin gains a compiled signature: a
kernel that a command reaches and the warm-up does not would compile (or
load from Numba's cache) here, and show up as a new signature.  Slow (the
warm-up compiles everything once when the cache is empty); CI runs it.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from click.testing import CliRunner


def compiled_signatures() -> dict[str, set[str]]:
    """Every Numba CPU dispatcher held by a loaded skyjoin module -> its
    compiled signatures."""
    from numba.core.registry import CPUDispatcher

    out: dict[str, set[str]] = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("skyjoin") or mod is None:
            continue
        for value in list(vars(mod).values()):
            if isinstance(value, CPUDispatcher):
                key = f"{value.py_func.__module__}.{value.py_func.__qualname__}"
                out.setdefault(key, set()).update(str(s) for s in value.signatures)
    return out


def commands(d) -> list[list[str]]:
    """Every command, on files of several shapes (sparse, dense and
    clumped 2-D points, 6-D points, named CSV columns)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, (3000, 2))
    np.save(d / "p.npy", X)
    np.savetxt(d / "p.csv", X, delimiter=",", header="a,b", comments="")
    np.save(d / "sparse.npy", rng.uniform(0, 1000, (2000, 2)))
    np.save(d / "clump.npy", np.concatenate([rng.uniform(0, 100, (2000, 2)),
                                             rng.normal(50, 0.05, (2000, 2))]))
    np.savetxt(d / "s.csv", rng.uniform(0, 10, (2000, 6)), delimiter=",",
               header="a,b,c,e,f,g", comments="")
    cpu = ["--device", "cpu"]
    cmds = []
    for f in ("p.npy", "sparse.npy", "clump.npy", "s.csv"):
        cmds.append(["join", f, "--eps", "0.3"])
    for pattern in ("full", "unicomp", "lid_unicomp"):
        cmds.append(["join", "clump.npy", "--eps", "0.3", "--pattern", pattern, "--out",
                     f"t-{pattern}.npz"])
    for ext in ("parquet", "csv", "npy", "npz"):
        for prec in ("float64", "float32"):
            cmds.append(["join", "p.npy", "--eps", "0.3", "--precision", prec, "--out",
                         f"o-{prec}.{ext}"])
        cmds.append(["join", "p.npy", "p.csv", "--eps", "0.3", "--out", f"rs.{ext}"])
    cmds += [
        ["join", "p.npy", "--eps", "0.3", "--include-self", "--no-sort", "--out", "o2.parquet"],
        ["join", "p.npy", "--eps", "0.3", "--counts", "--out", "c.csv"],
        ["join", "p.npy", "p.csv", "--eps", "0.3", "--counts"],
        ["dbscan", "p.npy", "--eps", "0.3", "--min-samples", "5", "--out", "l.csv"],
        ["dbscan", "clump.npy", "--eps", "0.3", "--min-samples", "5", "--precision", "float32"],
        ["dbscan", "s.csv", "--eps", "1", "--min-samples", "5", "--out", "l.parquet"],
        ["dbscan", "p.npy", "--sweep-eps", "0.2,0.3", "--sweep-min-samples", "5,10"],
        ["dbscan", "p.npy", "--sweep-eps", "0.2,0.3", "--sweep-min-samples", "5,10",
         "--sweep-method", "hybrid"],
        ["skyline", "p.csv"], ["skyline", "s.csv"], ["skyline", "s.csv", "--distinct"],
        ["skyline", "s.csv", "--max", "a,b", "--min", "c", "--out", "sky.csv"],
    ]
    for alg in ("skyalign", "bruteforce", "bnl", "sfs", "ggs"):
        cmds.append(["skyline", "s.csv", "--algorithm", alg])
    cmds.append(["skyline", "p.csv", "--algorithm", "sort2d"])
    cmds = [c + cpu for c in cmds]
    from skyjoin.datasets import KIND_DIMS, KINDS

    for kind in KINDS:
        cmds.append(["generate", kind, "-n", "1000", "-d", str(KIND_DIMS.get(kind, 3)),
                     "--out", f"g-{kind}.csv"])
    cmds.append(["demo", "-n", "3000", "--out", "demo"] + cpu)
    return cmds


@pytest.mark.slow
def test_nothing_compiles_after_the_warmup(tmp_path, monkeypatch):
    from skyjoin.cli import main
    from skyjoin.cli.warmup import run_warmup

    monkeypatch.chdir(tmp_path)
    run_warmup("cpu", echo=lambda line: None, jobs=1)
    warm = compiled_signatures()
    assert sum(map(len, warm.values())) > 20          # the walk finds the kernels
    missed = {}
    for args in commands(tmp_path):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, f"{args}\n{res.output}"
        for kernel, sigs in compiled_signatures().items():
            new = sigs - warm.get(kernel, set())
            if new:
                missed.setdefault(" ".join(args), {})[kernel] = sorted(new)
                warm.setdefault(kernel, set()).update(new)
    assert missed == {}
