"""The epsilon-join benchmark suite (``skyjoin bench join [--device cpu|gpu]``).

Our join is ``skyjoin.self_join`` on the chosen device (from host data to a
host result); the peers run on the CPU, in the same process, on the same
data.  Cases: 1M uniform points in [0,100]^2 with eps 0.5; 1M in
[0,100]^6 with eps 12; 1M exponential (lambda 40) in 2-D with eps 0.0008
and in 6-D with eps 0.02; the shared GDS-Join test file with eps 1.0.
Every case times our engine (sorted table, unsorted table, counts only) and
the peers of :mod:`skyjoin.bench.peers` in the same process; every
implementation reports the number of ordered pairs without self pairs, so
the harness checks that they agree.  Our peak memory is measured in a
fresh subprocess (RSS sampled during the call, minus RSS before it) and
reported against the budget "1.5 x input + output CSR".

The high-dimensional cases (:mod:`skyjoin.bench.highdim`) follow: a 12-D
manifold in 90-D (515,345 points, about 10 and 100 neighbours per point),
1M uniform points in 32-D and a 128-D Gaussian mixture of 200,000 points.
They time ``self_join(..., algorithm="brute")`` (table and counts; the grid
path's counts on the quick sizes) against scikit-learn's brute force and
ball tree and cKDTree, and, with ``--device gpu``, against a tiled PyTorch
brute force (float64, and float32 with TF32 off) beside the measured FP64
GEMM bound of the same products.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Callable

import numpy as np

import skyjoin as sj

from .. import datasets
from ..datasets import NAMED_CASES
from ..io import read_points
from . import highdim
from .harness import (REPEAT, Case, Impl, available_memory_bytes, data_case, format_table,
                      run_suite, select, size_tag, write_report)
from .peers import peer_impls

__all__ = ["cases", "case_names", "join_cases", "JoinCase", "run", "peak_memory", "QUICK_N"]

SHARED_DATA = os.environ.get(
    "SKYJOIN_SHARED_DATA",
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"),
)
GDS_FILE = "gdsjoin-test-2d-100k.txt"

CPU_CASES = ["Unif2D1M-0.5", "Unif6D1M-12", "Expo2D1M-0.0008", "Expo6D1M-0.02"]
#: Points of every generated case in ``quick`` mode.
QUICK_N = 10_000
#: Most neighbours per point of a quick case (a smoke run, not a measurement).
QUICK_MAX_NEIGHBOURS = 50
_PREFIX = {"uniform": "Unif", "exponential": "Expo"}


def _gds_path() -> str | None:
    p = os.path.join(SHARED_DATA, GDS_FILE)
    return p if os.path.exists(p) else None


@dataclasses.dataclass(frozen=True)
class JoinCase:
    """A case of the suite: its name (with the points it really runs), how
    its data is made, its eps and its parameters."""

    name: str
    load: Callable[[], np.ndarray]
    eps: float
    params: dict
    base: str          # the full-size case it stands for

    @property
    def pairs_hint(self) -> int | None:
        return self.params.get("pairs_excl_self")


def _named(base: str, quick: bool) -> JoinCase:
    """A generated case.  ``quick``: ``QUICK_N`` points, and eps scaled to
    keep the full case's neighbours per point, at most
    ``QUICK_MAX_NEIGHBOURS`` (eps x (n_full / n) ** (1 / d) x
    min(1, max / neighbours) ** (1 / d), to three digits)."""
    c = NAMED_CASES[base]
    n = QUICK_N if quick else c.n
    eps = c.eps
    if quick:
        per_point = (c.pairs_excl_self or 0) / c.n
        cap = min(1.0, QUICK_MAX_NEIGHBOURS / per_point) if per_point else 1.0
        eps = float(f"{c.eps * (c.n / n * cap) ** (1.0 / c.d):.3g}")

    def load():
        if c.kind == "uniform":
            return datasets.uniform(n, c.d, 0.0, 100.0, seed=c.seed)
        return datasets.exponential(n, c.d, rate=40.0, seed=c.seed)

    params = {"n": n, "d": c.d, "kind": c.kind, "seed": c.seed, "eps": eps}
    if not quick and c.pairs_excl_self is not None:
        params["pairs_excl_self"] = c.pairs_excl_self
    return JoinCase(f"{_PREFIX[c.kind]}{c.d}D{size_tag(n)}-{eps:g}", load, eps, params, base)


def _gds() -> JoinCase:
    """The shared GDS-Join test file (100,000 2-D points), eps 1.0."""
    path = _gds_path()
    params = {"n": 100_000, "d": 2, "source": GDS_FILE, "eps": 1.0,
              "pairs_excl_self": 27_882_048}
    return JoinCase("GDSJoin100k-1.0", lambda: read_points(path), 1.0, params, "GDSJoin100k-1.0")


def join_cases(quick: bool = False) -> list[JoinCase]:
    """Every case of the suite in this mode, named with the points it runs.

    ``quick``: the generated cases at ``QUICK_N`` points (see ``_named``); the GDS-Join file
    (100,000 points, no smaller version) is left out.
    """
    out = [_named(base, quick) for base in CPU_CASES]
    if not quick and _gds_path() is not None:
        out.append(_gds())
    return out


def case_names(device: str = "cpu", quick: bool = False) -> list[str]:
    """The names ``--case`` accepts in this mode (the high-dimensional cases last)."""
    return [c.name for c in join_cases(quick)] + highdim.case_names(quick)


def _ours(get, eps, device, pairs_hint=None, memory_fraction=0.6, repeat=REPEAT) -> list[Impl]:
    """Our implementations.  A table that would not fit in memory (4 bytes
    per pair, from the case's known pair count) is skipped, with the reason,
    and the result is streamed through ``self_join_chunks`` instead."""
    def table(sort):
        def fn():
            tm: dict = {}
            nt = sj.self_join(get(), eps, device=device, sort=sort, timings=tm)
            return {"size": nt.n_pairs, **{f"phase_{k}_s": round(v, 4) for k, v in tm.items()}}
        return fn

    def counts():
        return int(sj.self_join(get(), eps, device=device, output="counts").sum())

    def streamed():
        return sum(len(c) for c in sj.self_join_chunks(get(), eps, device=device))

    avail = available_memory_bytes()
    too_big = None
    if pairs_hint is not None and avail is not None and 4 * pairs_hint > memory_fraction * avail:
        too_big = (f"a table of {pairs_hint:,} pairs needs {4 * pairs_hint / 2**30:.1f} GiB, "
                   f"more than {memory_fraction:.0%} of the {avail / 2**30:.1f} GiB available")
    impls = [
        Impl(f"skyjoin {device} table (sorted)", table(True), ours=True, skip_reason=too_big,
             repeat=repeat),
        Impl(f"skyjoin {device} table (unsorted)", table(False), ours=True, skip_reason=too_big,
             repeat=repeat),
        Impl(f"skyjoin {device} counts only", counts, ours=True, repeat=repeat),
    ]
    if too_big:
        impls.append(Impl(f"skyjoin {device} chunks (streamed)", streamed, ours=True,
                          repeat=repeat))
    return impls


def cases(quick: bool = False, device: str = "cpu", names=None, rtree_max_seconds: float = 300.0,
          skip_peers: tuple[str, ...] = (), repeat: int = REPEAT) -> list[Case]:
    """The suite's cases (``quick``: ``QUICK_N`` points each; see ``join_cases``).

    Every implementation, ours and the peers', runs once untimed, then
    ``repeat`` times interleaved with the others (the harness's rule); the
    R-tree and scikit-learn peers, minutes long on the full cases, are timed
    once.  The high-dimensional cases (:func:`skyjoin.bench.highdim.cases`)
    come last.
    """
    out = []
    for jc in join_cases(quick):
        hint = jc.pairs_hint

        def impls_of(get, jc=jc, hint=hint):
            return _ours(get, jc.eps, device, pairs_hint=hint, repeat=repeat) + peer_impls(
                get, jc.eps, rtree_max_seconds=rtree_max_seconds, skip=skip_peers,
                pairs_hint=hint, shape=(jc.params["n"], jc.params["d"]), repeat=repeat)

        out.append(data_case(jc.name, jc.params, jc.load, impls_of))
    out += highdim.cases(quick=quick, device=device, repeat=repeat)
    return select(out, names)


_MEMORY_SCRIPT = r"""
import json, os, sys, threading, time
import numpy as np
import skyjoin as sj
from skyjoin.bench import join as bj

name, quick, device = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
case = {c.name: c for c in bj.join_cases(quick)}[name]
X, eps = case.load(), case.eps
sj.self_join(X[:2000], eps, device=device)          # compile / load the cache

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

peak = [0]
stop = threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.002)
before = rss()
t = threading.Thread(target=sample); t.start()
nt = sj.self_join(X, eps, device=device)
stop.set(); t.join()
peak[0] = max(peak[0], rss())
out = nt.indptr.nbytes + nt.indices.nbytes
print(json.dumps({"input_bytes": X.nbytes, "output_bytes": out,
                  "peak_increase_bytes": peak[0] - before}))
"""


def peak_memory(name: str, quick: bool = False, device: str = "cpu") -> dict:
    """Peak RSS increase of one self-join, measured in a fresh process.

    Returns the input and output sizes, the peak increase of the resident
    memory during the call, and its ratio to the memory budget
    ``1.5 * input + output CSR`` (read as: what the call adds on top of the
    caller's input array).
    """
    res = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, name, "1" if quick else "0", device],
                         capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"memory probe failed: {res.stderr.strip()[-500:]}")
    m = json.loads(res.stdout.strip().splitlines()[-1])
    budget = 1.5 * m["input_bytes"] + m["output_bytes"]
    m["budget_bytes"] = budget
    m["ratio_to_budget"] = m["peak_increase_bytes"] / budget if budget else float("nan")
    return m


def run(device: str = "cpu", quick: bool = False, out_dir: str = "bench-results", names=None,
        memory: bool = True, log=print) -> list:
    """Run the suite on ``device``; write ``join-<device>.json``/``.png``; return the rows.

    Parameters
    ----------
    device : {"cpu", "gpu"}
        Device of our join (``skyjoin.self_join(..., device=device)``, data
        and result on the host); the peers run on the CPU.
    quick : bool
        The cases at ``QUICK_N`` points (a smoke test).
    out_dir : str
        Folder of the report.
    names : list of str, optional
        Only these cases (names as ``case_names(device, quick)`` gives them).
    memory : bool
        Also probe our peak memory on each generated case, in a fresh
        process (quick: on the first case only, a smoke test of the probe).

    Returns
    -------
    list of skyjoin.bench.harness.Row

    Raises
    ------
    ValueError
        For a name that is not a case of this mode.
    """
    suite = f"join-{device}"
    rows = run_suite(suite, cases(quick=quick, device=device, names=names), log=log)
    if memory:
        probed = [jc for jc in join_cases(quick)
                  if jc.base in CPU_CASES and (not names or jc.name in names)]
        for jc in probed[:1] if quick else probed:
            hint, avail = jc.pairs_hint, available_memory_bytes()
            if hint and avail and 4 * hint > 0.6 * avail:
                log(f"  {jc.name:<24} peak memory: not probed (a table of {hint:,} pairs does "
                    f"not fit)")
                continue
            try:
                m = peak_memory(jc.name, quick=quick, device=device)
                log(f"  {jc.name:<24} peak memory: +{m['peak_increase_bytes'] / 2**20:.0f} MiB "
                    f"(input {m['input_bytes'] / 2**20:.0f} MiB, output "
                    f"{m['output_bytes'] / 2**20:.0f} MiB; "
                    f"{m['ratio_to_budget']:.2f} of the budget 1.5 x input + output)")
                for r in rows:
                    if r.case == jc.name and r.impl.endswith("table (sorted)"):
                        r.extra.update({f"memory_{k}": v for k, v in m.items()})
            except Exception as exc:  # reported, never hidden
                log(f"  {jc.name:<24} peak memory: probe failed: {exc}")
    json_path, png = write_report(suite, rows, out_dir)
    log(format_table(rows))
    log(f"report: {json_path}" + (f", chart: {png}" if png else ""))
    return rows
