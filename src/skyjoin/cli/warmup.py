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

import time
from typing import Callable

import click
import numpy as np

import skyjoin as sj

from .._core import compiling
from .._core.device import resolve_device
from ..skyline.plan import CPU_VARIANTS, GPU_VARIANTS
from .errors import user_errors
from .options import VERBOSE

__all__ = ["warmup_cmd", "run_warmup", "warm_calls", "WARM_OPERATORS"]

#: the operator packages the warm-up compiles (see skyjoin._core.compiling)
WARM_OPERATORS = ("skyjoin.join", "skyjoin.dbscan", "skyjoin.dbscan.sweep", "skyjoin.skyline")


def _data(seed=0):
    """Small inputs that reach every path: a sparse 2-D set (LID-UNICOMP,
    point-by-point), a crowded clump (the full pattern's tiled cells), 6-D
    points (the join path of DBSCAN), skyline data up to 20 dimensions
    (both words of the quartile masks)."""
    rng = np.random.default_rng(seed)
    sparse = rng.uniform(0.0, 100.0, (3000, 2))
    clump = rng.normal(50.0, 0.05, (2000, 2))
    return {"sparse": sparse, "mixed": np.concatenate([sparse, clump]),
            "six": rng.uniform(0.0, 10.0, (2000, 6)),
            "sky": {d: rng.random((3000, d)) for d in (2, 4, 20)}}


def warm_calls(device: str) -> list[tuple[str, Callable[[], object]]]:
    """The calls of the warm-up on ``device`` ("cpu" or "gpu"): (label, call).

    Every join pattern and output in both precisions, both joins, the
    chunked join; DBSCAN on its grid and join paths with and without
    weights, the sweep; the skyline's variants of the device on few and many
    dimensions.  Each call takes well under a second once compiled.
    """
    x = _data()
    sparse, mixed, six = x["sparse"], x["mixed"], x["six"]
    calls: list[tuple[str, Callable[[], object]]] = []
    for prec in ("float64", "float32"):
        kw = {"device": device, "precision": prec}
        calls += [
            (f"join {prec}: auto pattern, table", lambda kw=kw: sj.self_join(mixed, 0.3, **kw)),
            (f"join {prec}: full pattern",
             lambda kw=kw: sj.self_join(mixed, 0.3, pattern="full", **kw)),
            (f"join {prec}: LID-UNICOMP",
             lambda kw=kw: sj.self_join(sparse, 0.5, pattern="lid_unicomp", **kw)),
            (f"join {prec}: counts", lambda kw=kw: sj.self_join(mixed, 0.3, output="counts", **kw)),
            (f"join {prec}: distances",
             lambda kw=kw: sj.self_join(mixed, 0.3, return_distance=True, **kw)),
            (f"join {prec}: 6-D", lambda kw=kw: sj.self_join(six, 1.0, **kw)),
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
    ]
    for d, X in x["sky"].items():
        calls.append((f"skyline {d}-D", lambda X=X: sj.skyline(X, device=device)))
        for v in (GPU_VARIANTS if device == "gpu" else CPU_VARIANTS):
            calls.append((f"skyline {d}-D {v}", lambda X=X, v=v: sj.skyline(X, device=device,
                                                                           variant=v)))
    return calls


def run_warmup(device: str | None = None, echo: Callable[[str], None] = print) -> dict:
    """Run every call of :func:`warm_calls` once, report each one's time.

    Parameters
    ----------
    device : {"auto", "cpu", "gpu"}, optional
        "gpu" without a usable GPU raises :class:`skyjoin.GPUUnavailableError`.
    echo : callable
        Where to print.

    Returns
    -------
    dict
        device, seconds (the whole warm-up), compiles (Numba kernels
        compiled, 0 when all came from the cache) and steps (label ->
        seconds).

    Notes
    -----
    Costs the compiles (none when the caches hold everything) plus a
    fraction of a second of work.
    """
    dev = resolve_device(device)
    calls = warm_calls(dev)
    echo(f"skyjoin warmup: {len(calls)} calls on the {dev}")
    steps = {}
    t_all = time.perf_counter()
    with compiling.expect(WARM_OPERATORS), compiling.record() as events:
        for label, call in calls:
            t0 = time.perf_counter()
            call()
            steps[label] = time.perf_counter() - t0
            echo(f"  {label:<36} {steps[label]:7.2f} s")
    seconds = time.perf_counter() - t_all
    compiled = sum(1 for e in events if e.depth == 0)
    echo(f"kernels ready in {seconds:.1f} s ({compiled} compiled, the rest loaded from the cache)")
    return {"device": dev, "seconds": seconds, "compiles": compiled, "steps": steps}


@click.command("warmup")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="cpu",
              show_default=True, help="Whose kernels to compile: Numba's (cpu) or CuPy's (gpu).")
@VERBOSE
@user_errors
def warmup_cmd(device):
    """Compile every kernel ahead (for images and clusters) and report how long it took."""
    run_warmup(device=device, echo=click.echo)
