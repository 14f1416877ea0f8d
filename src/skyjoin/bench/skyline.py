"""Skyline benchmark suite: SkyAlign against paretoset and our baselines.

``run(device="cpu")`` times, in one process: the shared NBA set, two
paretoset cases (100k points, 12-D independent and 8-D anticorrelated),
the 1M-point 12-D cases with SkyBench Hybrid's quoted times beside them
(quoted from its paper, other machine: never divided by ours), and a sweep
over n in {1e5, 1e6}, d in {4, 8, 12, 16} and the four distributions.
``run(device="gpu")`` times SkyAlign on the GPU (data already on the GPU and
host to host, every variant of §6.2.3) up to 8M points, and the GGS-style
baseline.  Each row's ``extra`` carries the pre-filter survivors.  Case
names carry the points a case runs (``1M-12d-independent``, quick
``50k-12d-independent``).
"""

from __future__ import annotations

import os
import time

import numpy as np

import skyjoin as sj

from .._core.device import cupy
from ..datasets import skyline_data
from .harness import (QUOTED_LABEL, Case, Impl, data_case, format_table, run_suite, select,
                      size_tag, write_report)

__all__ = ["run", "run_gpu", "cases", "case_names", "HYBRID_QUOTED_S", "NBA_PATH"]

NBA_PATH = os.environ.get("SKYJOIN_NBA", "/work/shared/data/nba-U-8-17264.csv")

#: SkyBench Hybrid (C++, the multicore state of the art) as quoted by its paper
#: on 1M 12-D points: (distribution, threads) -> seconds.  Other machine (and,
#: in quick mode, other size): reported beside our times, never as a ratio.
HYBRID_QUOTED_S = {("independent", 2): 1.72, ("anticorrelated", 2): 7.03,
                   ("independent", 16): 0.56, ("anticorrelated", 16): 2.25}


def _quoted(kind: str, threads: int) -> dict[str, float]:
    """The quoted Hybrid figure of a 1M 12-D case, as a Case.quoted entry."""
    return {f"SkyBench Hybrid, {threads} threads, 1M points (paper)":
            HYBRID_QUOTED_S[(kind, threads)]}

_SEEDS = {"independent": 5, "anticorrelated": 6, "correlated": 3, "pareto": 4}


def _data(n, d, kind, seed=None):
    seed = _SEEDS[kind] if seed is None else seed
    return skyline_data(n, d, kind, seed=np.random.default_rng(seed))


def _ours(get, device, variants=("nosync",), tag=""):
    """Impls for our skyline on the data returned by get()."""
    out = []
    for v in variants:
        def fn(v=v):
            c0 = time.process_time()
            idx, st = sj.skyline(get(), device=device, variant=v, return_stats=True)
            return {"size": int(idx.size), "cpu_s": time.process_time() - c0,
                    "prefilter_survivors": st.get("prefilter_survivors"),
                    "dominance_tests": st.get("dominance_tests"), "mask_tests": st.get("mask_tests"),
                    "phase_times": st.get("times")}
        out.append(Impl(f"skyjoin skyalign {v} ({device}){tag}", fn, ours=True))
    return out


def _baseline(get, algorithm):
    return Impl(f"skyjoin {algorithm} (cpu)",
                lambda: int(sj.skyline(get(), device="cpu", algorithm=algorithm).size))


def _paretoset(get):
    try:
        from paretoset import paretoset
    except ImportError:
        return Impl("paretoset (distinct=False)", lambda: None, skip_reason="paretoset not installed")
    return Impl("paretoset (distinct=False)",
                lambda: int(paretoset(get(), distinct=False, use_numba=True).sum()))


def cases(device: str = "cpu", quick: bool = False, names=None) -> list[Case]:
    """The suite's cases for a device ("cpu" or "gpu")."""
    out: list[Case] = []
    q = 20 if quick else 1                      # quick: n / 20
    if device == "cpu":
        if os.path.exists(NBA_PATH):
            out.append(data_case(f"nba-8d-{size_tag(17264)}", {"n": 17264, "d": 8, "expected": 1796},
                             lambda: np.loadtxt(NBA_PATH, delimiter=",", usecols=range(8)),
                             lambda g: _ours(g, "cpu", ("nosync", "levelwise"))
                             + [_baseline(g, "sfs"), _baseline(g, "bnl"), _paretoset(g)]))
        for n, d, kind in ((100_000, 12, "independent"), (100_000, 8, "anticorrelated")):
            out.append(data_case(f"{size_tag(n // q)}-{d}d-{kind}", {"n": n // q, "d": d, "kind": kind},
                             lambda n=n, d=d, kind=kind: _data(n // q, d, kind),
                             lambda g: _ours(g, "cpu", ("nosync", "levelwise"))
                             + [_baseline(g, "sfs"), _paretoset(g)]))
        for n, d, kind in ((1_000_000, 12, "independent"), (1_000_000, 12, "anticorrelated")):
            out.append(data_case(f"{size_tag(n // q)}-{d}d-{kind}", {"n": n // q, "d": d, "kind": kind},
                                 lambda n=n, d=d, kind=kind: _data(n // q, d, kind),
                                 lambda g: _ours(g, "cpu", ("nosync", "levelwise")),
                                 quoted=_quoted(kind, 2)))
        sweep_n = (100_000,) if quick else (100_000, 1_000_000)
        for n in sweep_n:
            for d in (4, 8, 12, 16):
                for kind in ("correlated", "independent", "anticorrelated", "pareto"):
                    if n >= 1_000_000 and kind == "anticorrelated" and d > 8:
                        continue          # minutes each on 2 cores; the 12-D one is above
                    nn = n // q
                    base = [] if (n >= 1_000_000 or (kind == "anticorrelated" and d >= 12)) \
                        else ["sfs"]
                    out.append(data_case(f"sweep-{size_tag(nn)}-{d}d-{kind}",
                                         {"n": nn, "d": d, "kind": kind},
                                     lambda nn=nn, d=d, kind=kind: _data(nn, d, kind),
                                     lambda g, base=base: _ours(g, "cpu")
                                     + [_baseline(g, a) for a in base]))
    else:
        out.extend(_gpu_cases(quick))
    return select(out, names)


def case_names(device: str = "cpu", quick: bool = False) -> list[str]:
    """The names ``--case`` accepts on this device in this mode."""
    return [c.name for c in cases(device=device, quick=quick)]


def _gpu_cases(quick: bool) -> list[Case]:
    """GPU cases: data on the GPU and host to host, all variants (quick: n / 20)."""
    def gpu_impls(get, variants, cpu_port):
        out = [Impl(f"skyjoin skyalign {v or 'default'} (gpu, data on GPU)",
                    lambda v=v: _sync_size(sj.skyline(get()[1], device="gpu", variant=v)),
                    ours=True)
               for v in variants]
        out.append(Impl("skyjoin skyalign default (gpu, host to host)",
                        lambda: int(sj.skyline(get()[0], device="gpu").size), ours=True))
        if cpu_port:
            # the CPU port on all the host's cores
            out += _ours(lambda: get()[0], "cpu", ("nosync", "levelwise"),
                         tag=f" {os.cpu_count()} threads")
        return out

    def make(n, d, kind, seed):
        X = _data(n, d, kind, seed)
        return X, cupy().asarray(X)

    out = []
    for n_full, d, kind, seed in ((1_000_000, 12, "independent", 5),
                                  (1_000_000, 12, "anticorrelated", 6),
                                  (8_000_000, 12, "anticorrelated", 8),
                                  (8_000_000, 12, "independent", 7)):
        n = n_full // 20 if quick else n_full
        variants = ((None, "sync", "nosync", "levelwise", "noquart", "padded") if n <= 1_000_000
                    else (None, "sync", "padded"))
        out.append(data_case(
            f"{size_tag(n)}-{d}d-{kind}", {"n": n, "d": d, "kind": kind, "seed": seed},
            lambda n=n, d=d, kind=kind, seed=seed: make(n, d, kind, seed),
            lambda g, variants=variants, n=n: gpu_impls(g, variants, n == 1_000_000),
            after=lambda: cupy().get_default_memory_pool().free_all_blocks(),
            quoted=_quoted(kind, 16) if n_full == 1_000_000 else None))
    return out


def _sync_size(idx) -> int:
    cupy().cuda.get_current_stream().synchronize()
    return int(idx.size)


def run(device: str = "cpu", quick: bool = False, out_dir: str = "bench-results", names=None,
        log=print) -> list:
    """Run the skyline suite on a device; write ``skyline-<device>.json``/``.png``.

    Parameters
    ----------
    device : {"cpu", "gpu"}
    quick : bool
        Small versions of the cases (n / 20, shorter sweep): a smoke test.
    out_dir : str
        Folder for the report.
    names : list of str, optional
        Run only these cases (as ``case_names(device, quick)`` gives them).

    Returns
    -------
    list of skyjoin.bench.harness.Row
        SkyBench Hybrid's quoted figures come as rows of their own, with
        ``quoted_s`` set and no time: they are never divided by our times.
    """
    t0 = time.perf_counter()
    rows = run_suite(f"skyline-{device}", cases(device=device, quick=quick, names=names), log=log)
    json_path, png = write_report(f"skyline-{device}", rows, out_dir)
    log(format_table(rows))
    log(f"report: {json_path}" + (f", chart: {png}" if png else "") +
        f"  ({time.perf_counter() - t0:.0f} s)")
    return rows


#: Targets on the lent GPU (data already on the GPU), seconds.
GPU_TARGETS_S = {"1M-12d-independent": 0.045, "1M-12d-anticorrelated": 0.060,
                 "8M-12d-anticorrelated": 1.0}


def run_gpu(out_dir: str = "bench-results", quick: bool = False) -> str:
    """The GPU suite for ``scripts/gpu-check``; returns a short summary of the
    GPU targets (default variant, data already on the GPU)."""
    rows = run(device="gpu", quick=quick, out_dir=out_dir)
    lines = ["skyline GPU targets (default variant, data on the GPU):"]
    for case, target in GPU_TARGETS_S.items():
        t = [r.time_s for r in rows if r.case == case and r.time_s is not None
             and r.impl.startswith("skyjoin skyalign default (gpu, data on GPU)")]
        if t:
            lines.append(f"  {case:<24} {t[0]:8.4f} s  target <= {target} s  "
                         f"{'met' if t[0] <= target else 'NOT met'}")
    for r in rows:     # quoted figures beside ours, never divided
        if r.quoted_s is not None:
            lines.append(f"  {r.case:<24} {r.impl:<40} {r.quoted_s:8.4f} s  ({QUOTED_LABEL})")
    for r in rows:
        if r.case.startswith("1M") and r.impl.startswith("skyjoin skyalign default (gpu, data"):
            lines.append(f"  {r.case:<24} skyline size {r.size}")
    return "\n".join(lines)
