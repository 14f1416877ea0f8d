"""``skyjoin warmup``: compile every kernel ahead, through the operators' own calls.

A first call compiles its kernels: Numba's on the CPU (kept in Numba's
on-disk cache, so later processes load them), CuPy's on the GPU (kept in
CuPy's kernel cache).  Container images and cluster nodes run this command
once, when they are built, so that no user call pays for it.

:func:`warm_calls` lists the calls, :func:`run_warmup` runs them and
reports the time of each; :data:`WARM_OPERATORS` names the operator
packages they cover (the compile notice's estimate).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable

import click
import numpy as np

import skyjoin as sj

from .._core import compiling
from .._core.config import numba_cache_enabled
from .._core.device import resolve_device
from ..datasets import KIND_DIMS, KINDS, generate, geographic
from ..io import PAIR_FORMATS, TABLE_FORMATS, open_pair_writer, write_neighbor_table
from ..pareto.plan import CPU_ONLY, CPU_VARIANTS, GPU_VARIANTS
from .errors import user_errors
from .options import VERBOSE

__all__ = ["warmup_cmd", "run_warmup", "warm_calls", "compile_elsewhere", "can_compile_elsewhere",
           "run_labels", "WARM_OPERATORS"]

#: the operator packages the warm-up compiles (see skyjoin._core.compiling)
WARM_OPERATORS = ("skyjoin.simjoin", "skyjoin.cluster", "skyjoin.cluster.sweep", "skyjoin.pareto")


def _data(seed=0):
    """Small inputs that reach every path: a sparse 2-D set (LID-UNICOMP,
    point-by-point, a grid sorted by comparison), a crowded clump (the full
    pattern's tiled cells), a dense set (about one point a cell: the grid's
    counting sort), 6-D points (the join path of DBSCAN), skyline data up to
    20 dimensions (both words of the quartile masks), (lat, lon) points at
    the poles and across the antimeridian (haversine), 2**16 points of a
    wide box (DBSCAN's sparse grid and its radix sort)."""
    rng = np.random.default_rng(seed)
    sparse = rng.uniform(0.0, 100.0, (3000, 2))
    clump = rng.normal(50.0, 0.05, (2000, 2))
    return {"sparse": sparse, "mixed": np.concatenate([sparse, clump]),
            "dense": rng.uniform(0.0, 10.0, (3000, 2)),
            "six": rng.uniform(0.0, 10.0, (2000, 6)),
            "sky": {d: rng.random((3000, d)) for d in (2, 4, 20)},
            "geo": geographic(2000, n_clusters=12, spread_km=500.0, seed=seed),
            "wide": rng.uniform(0.0, 1e5, (1 << 16, 2))}


def _write_pairs(X, eps, ext: str, device: str, table: bool = False) -> None:
    """The pairs of X to a file of ``ext`` in a folder of its own, as
    ``skyjoin join --out`` writes them: streamed chunk by chunk, or (with
    ``table``) the CSR table at once (R join S, the Dask command)."""
    with tempfile.TemporaryDirectory(prefix="skyjoin-warmup-") as folder:
        out = os.path.join(folder, "pairs" + ext)
        if table:
            write_neighbor_table(out, sj.self_join(X, eps, device=device))
            return
        n = X.shape[0]
        with open_pair_writer(out, shape=(n, n), sorted=True) as w:
            for ch in sj.self_join_chunks(X, eps, max_pairs=1 << 12, device=device):
                w.write_chunk(ch)


def warm_calls(device: str) -> list[tuple[str, Callable[[], object]]]:
    """The calls of the warm-up on ``device`` ("cpu" or "gpu"): (label, call).

    Every join pattern and output in both precisions, both joins, the
    chunked join, sparse and dense grids, the pairs written to every format
    ``skyjoin join --out`` takes; DBSCAN on its grid and join paths with and
    without weights, the sweep by both methods; the skyline's variants and
    algorithms of the device on few and many dimensions; every kind of
    ``skyjoin generate``.  Each call takes well under a second once
    compiled.  (``tests/test_cli_warmup.py`` runs every command after
    these calls and checks that nothing compiles.)
    """
    x = _data()
    sparse, mixed, dense, six = x["sparse"], x["mixed"], x["dense"], x["six"]
    calls: list[tuple[str, Callable[[], object]]] = []
    for prec in ("float64", "float32"):
        kw = {"device": device, "precision": prec}
        calls += [
            (f"join {prec}: auto pattern, table", lambda kw=kw: sj.self_join(mixed, 0.3, **kw)),
            (f"join {prec}: full pattern",
             lambda kw=kw: sj.self_join(mixed, 0.3, pattern="full", **kw)),
            (f"join {prec}: UNICOMP",
             lambda kw=kw: sj.self_join(mixed, 0.3, pattern="unicomp", **kw)),
            (f"join {prec}: LID-UNICOMP",
             lambda kw=kw: sj.self_join(sparse, 0.5, pattern="lid_unicomp", **kw)),
            (f"join {prec}: counts", lambda kw=kw: sj.self_join(mixed, 0.3, output="counts", **kw)),
            (f"join {prec}: distances",
             lambda kw=kw: sj.self_join(mixed, 0.3, return_distance=True, **kw)),
            (f"join {prec}: 6-D", lambda kw=kw: sj.self_join(six, 1.0, **kw)),
            (f"join {prec}: dense grid", lambda kw=kw: sj.self_join(dense, 0.3, **kw)),
            (f"join {prec}: dense grid, counts",
             lambda kw=kw: sj.self_join(dense, 0.3, output="counts", **kw)),
            (f"join {prec}: R with S", lambda kw=kw: sj.join(sparse[:1000], mixed, 0.3, **kw)),
            (f"join {prec}: chunks",
             lambda kw=kw: list(sj.self_join_chunks(mixed, 0.3, max_pairs=1 << 16, **kw))),
            (f"DBSCAN {prec}: grid", lambda kw=kw: sj.DBSCAN(eps=0.3, min_samples=5, **kw).fit(mixed)),
            (f"DBSCAN {prec}: join path",
             lambda kw=kw: sj.DBSCAN(eps=1.0, min_samples=5, **kw).fit(six)),
        ]
    w = np.random.default_rng(1).integers(1, 3, mixed.shape[0]).astype(np.float64)
    calls += [
        ("DBSCAN: weights", lambda: sj.dbscan(mixed, 0.3, min_samples=5, sample_weight=w,
                                              device=device)),
        ("DBSCAN sweep", lambda: list(sj.dbscan_sweep(mixed, [0.2, 0.3], [5, 10],
                                                      device=device))),
        ("DBSCAN sweep, hybrid", lambda: list(sj.dbscan_sweep(mixed, [0.2, 0.3], [5, 10],
                                                              device=device, method="hybrid"))),
        # the demo's and `skyjoin dbscan --metric haversine`'s clustering
        ("DBSCAN haversine", lambda: sj.DBSCAN(eps=0.04, min_samples=10, metric="haversine",
                                               device=device).fit(x["geo"])),
        # a box too wide for the dense fine grid: the sparse grid, its radix
        # sort (from 2**16 points on) and its border search (min_samples > 17)
        ("DBSCAN sparse grid", lambda: sj.DBSCAN(eps=0.3, min_samples=20,
                                                 device=device).fit(x["wide"])),
    ]
    for ext in PAIR_FORMATS:
        calls.append((f"join pairs to {ext}",
                      lambda ext=ext: _write_pairs(mixed, 0.3, ext, device)))
    for ext in TABLE_FORMATS:
        calls.append((f"join table to {ext}",
                      lambda ext=ext: _write_pairs(mixed, 0.3, ext, device, table=True)))
    algorithms = ("ggs",) if device == "gpu" else CPU_ONLY + ("ggs",)
    for d, X in x["sky"].items():
        calls.append((f"skyline {d}-D", lambda X=X: sj.skyline(X, device=device)))
        for v in (GPU_VARIANTS if device == "gpu" else CPU_VARIANTS):
            calls.append((f"skyline {d}-D {v}", lambda X=X, v=v: sj.skyline(X, device=device,
                                                                           variant=v)))
        for a in algorithms:
            if a != "sort2d" or d == 2:
                calls.append((f"skyline {d}-D {a}",
                              lambda X=X, a=a: sj.skyline(X, device=device, algorithm=a)))
    for kind in KINDS:
        calls.append((f"generate {kind}",
                      lambda kind=kind: generate(kind, 1000, KIND_DIMS.get(kind, 3), seed=0)))
    return calls


def run_labels(device: str, labels: list[str]) -> None:
    """Run the calls of :func:`warm_calls` named ``labels``, silently (the
    work of a :func:`compile_elsewhere` process)."""
    logging.getLogger("skyjoin.compile").setLevel(logging.ERROR)
    wanted = set(labels)
    for label, call in warm_calls(device):
        if label in wanted:
            call()


def can_compile_elsewhere(device: str) -> bool:
    """Whether :func:`compile_elsewhere` starts a process: the CPU, more
    than one core, Numba's cache on."""
    return device == "cpu" and (os.cpu_count() or 1) >= 2 and numba_cache_enabled()


def compile_elsewhere(labels: list[str], device: str = "cpu") -> subprocess.Popen | None:
    """Start a process that runs the warm calls ``labels``, so that their
    kernels compile on another core into Numba's on-disk cache while this
    process compiles others (Numba compiles one kernel at a time per
    process).  Returns the process (wait for it, then the calls here load
    the cache), or None where it would not help: one core, the cache off,
    or the GPU.
    """
    if not can_compile_elsewhere(device) or not labels:
        return None
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    code = "import sys; from skyjoin.cli.warmup import run_labels; run_labels(sys.argv[1], sys.argv[2:])"
    return subprocess.Popen([sys.executable, "-c", code, device, *labels], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _operator(label: str) -> str:
    return label.split()[0]


def run_warmup(device: str | None = None, echo: Callable[[str], None] = print,
               jobs: int | None = None) -> dict:
    """Run every call of :func:`warm_calls` once, report each one's time.

    Parameters
    ----------
    device : {"auto", "cpu", "gpu"}, optional
        "gpu" without a usable GPU raises :class:`skyjoin.GPUUnavailableError`.
    echo : callable
        Where to print.
    jobs : int, optional
        Processes that compile at once (CPU, Numba's cache on): the
        skyline's and DBSCAN's calls compile in other processes
        (:func:`compile_elsewhere`) while this one compiles the join's,
        then this one runs them all (loading the cache).  Default: the
        cores, at most 3; 1 compiles everything here.

    Returns
    -------
    dict
        device, seconds (the whole warm-up), compiles (Numba kernels
        compiled in this process, 0 when all came from the cache), steps
        (label -> seconds) and helpers (the other processes started).

    Notes
    -----
    Costs the compiles (none when the caches hold everything) plus a
    fraction of a second of work.
    """
    dev = resolve_device(device)
    calls = warm_calls(dev)
    jobs = min(3, os.cpu_count() or 1) if jobs is None else max(1, int(jobs))
    echo(f"skyjoin warmup: {len(calls)} calls on the {dev}")
    steps = {}
    t_all = time.perf_counter()
    by_op: dict[str, list[str]] = {}
    for label, _ in calls:
        by_op.setdefault(_operator(label), []).append(label)
    others = [labs for op, labs in by_op.items() if op != "join"]
    helpers: list[subprocess.Popen] = []
    per = [sum(others[i::jobs - 1], []) for i in range(min(jobs - 1, len(others)))] \
        if jobs > 1 and can_compile_elsewhere(dev) else []

    def start_helpers():        # only once something compiles: a warm cache needs none
        helpers.extend(p for p in (compile_elsewhere(labs, dev) for labs in per) if p is not None)

    with compiling.when_compiling(start_helpers), compiling.expect(WARM_OPERATORS), \
            compiling.record() as events:
        order = sorted(calls, key=lambda c: _operator(c[0]) != "join") if per else calls
        for label, call in order:
            if helpers and _operator(label) != "join":
                for p in helpers:       # their kernels are in the cache now
                    p.wait()
            t0 = time.perf_counter()
            call()
            steps[label] = time.perf_counter() - t0
            echo(f"  {label:<36} {steps[label]:7.2f} s")
    for p in helpers:
        p.wait()
    seconds = time.perf_counter() - t_all
    compiled = sum(1 for e in events if e.depth == 0)
    where = f", {len(helpers) + 1} processes" if helpers else ""
    echo(f"kernels ready in {seconds:.1f} s ({compiled} compiled here, the rest loaded from the "
         f"cache{where})")
    return {"device": dev, "seconds": seconds, "compiles": compiled, "steps": steps,
            "helpers": len(helpers)}


@click.command("warmup")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="cpu",
              show_default=True, help="Whose kernels to compile: Numba's (cpu) or CuPy's (gpu).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Processes that compile at once on the CPU (default: the cores, at most 3).")
@VERBOSE
@user_errors
def warmup_cmd(device, jobs):
    """Compile every kernel ahead (for images and clusters) and report how long it took."""
    run_warmup(device=device, echo=click.echo, jobs=jobs)
