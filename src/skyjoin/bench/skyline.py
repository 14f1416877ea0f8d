"""Skyline benchmark suite: SkyAlign against paretoset and our baselines.

``run(device="cpu")`` times, in one process: the shared NBA set, two
paretoset cases (100k points, 12-D independent and 8-D anticorrelated),
the 1M-point 12-D cases next to SkyBench Hybrid's quoted times, and a sweep
over n in {1e5, 1e6}, d in {4, 8, 12, 16} and the four distributions.
``run(device="gpu")`` times SkyAlign on the GPU (data already on the GPU and
host to host, every variant of §6.2.3) up to 8M points, and the GGS-style
baseline.  Each row's ``extra`` carries the pre-filter survivors.
"""

from __future__ import annotations

import os
import time

import numpy as np

import skyjoin as sj

from .._core.device import cupy
from ..datasets import skyline_data
from .harness import Case, Impl, format_table, run_suite, write_report

__all__ = ["run", "run_gpu", "cases", "HYBRID_QUOTED_S", "NBA_PATH"]

NBA_PATH = os.environ.get("SKYJOIN_NBA", "/work/shared/data/nba-U-8-17264.csv")

#: SkyBench Hybrid (C++, the multicore state of the art) as quoted by its paper:
#: (case, threads) -> seconds.
HYBRID_QUOTED_S = {("1M-12d-independent", 2): 1.72, ("1M-12d-anticorrelated", 2): 7.03,
                   ("1M-12d-independent", 16): 0.56, ("1M-12d-anticorrelated", 16): 2.25}

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
        out.append(Impl(f"skyjoin skyalign {v} ({device}){tag}", fn, ours=True, warmup=False))
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


class _Holder:
    """Lazily generated data of one case, dropped in teardown."""

    def __init__(self, make):
        self.make = make
        self.X = None

    def setup(self):
        self.X = self.make()

    def get(self):
        return self.X

    def teardown(self):
        self.X = None


def _case(name, params, make, impls_of):
    h = _Holder(make)
    return Case(name, params, impls_of(h.get), setup=h.setup, teardown=h.teardown)


def _warm_cpu():
    """Compile the Numba kernels once, outside any timing."""
    X = np.random.default_rng(0).random((5000, 6))
    for v in ("nosync", "levelwise"):
        sj.skyline(X, device="cpu", variant=v)
    for a in ("sfs", "bnl"):
        sj.skyline(X, device="cpu", algorithm=a)


def cases(device: str = "cpu", quick: bool = False, names=None) -> list[Case]:
    """The suite's cases for a device ("cpu" or "gpu")."""
    out: list[Case] = []
    q = 20 if quick else 1                      # quick: n / 20
    if device == "cpu":
        if os.path.exists(NBA_PATH):
            out.append(_case("nba-8d", {"n": 17264, "d": 8, "expected": 1796},
                             lambda: np.loadtxt(NBA_PATH, delimiter=",", usecols=range(8)),
                             lambda g: _ours(g, "cpu", ("nosync", "levelwise"))
                             + [_baseline(g, "sfs"), _baseline(g, "bnl"), _paretoset(g)]))
        for name, n, d, kind in (("100k-12d-independent", 100_000, 12, "independent"),
                                 ("100k-8d-anticorrelated", 100_000, 8, "anticorrelated")):
            out.append(_case(name, {"n": n // q, "d": d, "kind": kind},
                             lambda n=n, d=d, kind=kind: _data(n // q, d, kind),
                             lambda g: _ours(g, "cpu", ("nosync", "levelwise"))
                             + [_baseline(g, "sfs"), _paretoset(g)]))
        for name, n, d, kind in (("1M-12d-independent", 1_000_000, 12, "independent"),
                                 ("1M-12d-anticorrelated", 1_000_000, 12, "anticorrelated")):
            out.append(_case(name, {"n": n // q, "d": d, "kind": kind,
                                    "hybrid_quoted_s_2_threads": HYBRID_QUOTED_S[(name, 2)]},
                             lambda n=n, d=d, kind=kind: _data(n // q, d, kind),
                             lambda g: _ours(g, "cpu", ("nosync", "levelwise"))))
        sweep_n = (100_000,) if quick else (100_000, 1_000_000)
        for n in sweep_n:
            for d in (4, 8, 12, 16):
                for kind in ("correlated", "independent", "anticorrelated", "pareto"):
                    if n >= 1_000_000 and kind == "anticorrelated" and d > 8:
                        continue          # minutes each on 2 cores; the 12-D one is above
                    nn = n // q
                    base = [] if (n >= 1_000_000 or (kind == "anticorrelated" and d >= 12)) \
                        else ["sfs"]
                    out.append(_case(f"sweep-{nn}-{d}d-{kind}", {"n": nn, "d": d, "kind": kind},
                                     lambda nn=nn, d=d, kind=kind: _data(nn, d, kind),
                                     lambda g, base=base: _ours(g, "cpu")
                                     + [_baseline(g, a) for a in base]))
    else:
        out.extend(_gpu_cases(quick))
    if names:
        out = [c for c in out if c.name in set(names)]
    return out


def _gpu_cases(quick: bool) -> list[Case]:
    """GPU cases: data on the GPU and host to host, all variants."""
    def gpu_impls(get_dev, get_host, variants):
        out = []
        for v in variants:
            out.append(Impl(f"skyjoin skyalign {v or 'default'} (gpu, data on GPU)",
                            lambda v=v: _sync_size(sj.skyline(get_dev(), device="gpu", variant=v)),
                            ours=True, warmup=True, repeat=3))
        out.append(Impl("skyjoin skyalign default (gpu, host to host)",
                        lambda: int(sj.skyline(get_host(), device="gpu").size),
                        ours=True, warmup=False, repeat=2))
        return out

    specs = [("1M-12d-independent", 1_000_000, 12, "independent", 5),
             ("1M-12d-anticorrelated", 1_000_000, 12, "anticorrelated", 6),
             ("8M-12d-anticorrelated", 8_000_000, 12, "anticorrelated", 8),
             ("8M-12d-independent", 8_000_000, 12, "independent", 7)]
    out = []
    for name, n, d, kind, seed in specs:
        if quick:
            n //= 20
            name = f"{name}-quick"
        hold = {}

        def setup(n=n, d=d, kind=kind, seed=seed, hold=hold):
            hold["X"] = _data(n, d, kind, seed)
            hold["Xd"] = cupy().asarray(hold["X"])

        def teardown(hold=hold):
            hold.clear()

        variants = ((None, "sync", "nosync", "levelwise", "noquart", "padded") if n <= 1_000_000
                    else (None, "sync", "padded"))
        impls = gpu_impls(lambda hold=hold: hold["Xd"], lambda hold=hold: hold["X"], variants)
        if n == 1_000_000:
            # the CPU port on all the host's cores, next to SkyBench Hybrid's 16-thread figure
            impls = impls + _ours(lambda hold=hold: hold["X"], "cpu", ("nosync", "levelwise"),
                                  tag=f" {os.cpu_count()} threads")
        params = {"n": n, "d": d, "kind": kind, "seed": seed}
        if (name, 16) in HYBRID_QUOTED_S:
            params["hybrid_quoted_s_16_threads"] = HYBRID_QUOTED_S[(name, 16)]
        out.append(Case(name, params, impls,
                        setup=setup, teardown=teardown))
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
        Run only these cases.

    Returns
    -------
    list of skyjoin.bench.harness.Row
    """
    _warm_cpu()          # the GPU suite times the CPU port on all cores too
    t0 = time.perf_counter()
    rows = run_suite(f"skyline-{device}", cases(device=device, quick=quick, names=names), log=log)
    for r in rows:
        hy = r.params.get("hybrid_quoted_s_2_threads")
        if hy and r.time_s:
            r.extra["vs_hybrid_2_threads"] = hy / r.time_s
        hy16 = r.params.get("hybrid_quoted_s_16_threads")
        if hy16 and r.time_s and "(cpu)" in r.impl:
            r.extra["vs_hybrid_16_threads"] = hy16 / r.time_s
    json_path, png = write_report(f"skyline-{device}", rows, out_dir)
    log(format_table(rows))
    for r in rows:
        for th in (2, 16):
            if f"vs_hybrid_{th}_threads" in r.extra:
                log(f"  {r.case:<24} {r.impl:<36} Hybrid (quoted, {th} threads) / ours = "
                    f"{r.extra[f'vs_hybrid_{th}_threads']:.2f}x")
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
    for r in rows:
        if "vs_hybrid_16_threads" in r.extra:
            lines.append(f"  {r.case:<24} {r.impl:<40} {r.time_s:8.4f} s  Hybrid 16 threads "
                         f"{r.params['hybrid_quoted_s_16_threads']} s: "
                         f"{r.extra['vs_hybrid_16_threads']:.2f}x")
    for r in rows:
        if r.case.startswith("1M") and r.impl.startswith("skyjoin skyalign default (gpu, data"):
            lines.append(f"  {r.case:<24} skyline size {r.size}")
    return "\n".join(lines)
