"""The CPU epsilon-join benchmark suite (``skyjoin bench join``).

Cases: 1M uniform points in [0,100]^2 with eps 0.5; 1M in
[0,100]^6 with eps 12; 1M exponential (lambda 40) in 2-D with eps 0.0008
and in 6-D with eps 0.02; the shared GDS-Join test file with eps 1.0.
Every case times our engine (sorted table, unsorted table, counts only) and
the peers of :mod:`skyjoin.bench.peers` in the same process; every
implementation reports the number of ordered pairs without self pairs, so
the harness checks that they agree.  Our peak memory is measured in a
fresh subprocess (RSS sampled during the call, minus RSS before it) and
reported against the budget "1.5 x input + output CSR".
"""

from __future__ import annotations

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
from .harness import Case, Impl, format_table, run_suite, write_report
from .peers import available_memory_bytes, peer_impls

__all__ = ["cases", "run", "peak_memory"]

SHARED_DATA = os.environ.get(
    "SKYJOIN_SHARED_DATA",
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"),
)
GDS_FILE = "gdsjoin-test-2d-100k.txt"

CPU_CASES = ["Unif2D1M-0.5", "Unif6D1M-12", "Expo2D1M-0.0008", "Expo6D1M-0.02"]


def _gds_path() -> str | None:
    p = os.path.join(SHARED_DATA, GDS_FILE)
    return p if os.path.exists(p) else None


def _loader(name: str, quick: bool) -> tuple[Callable[[], np.ndarray], float, dict]:
    """A function producing the case's data, its eps and its parameters."""
    if name == "GDSJoin100k-1.0":
        path = _gds_path()

        def load():
            return read_points(path)

        return load, 1.0, {"n": 100_000, "d": 2, "source": GDS_FILE, "pairs_excl_self": 27_882_048}
    c = NAMED_CASES[name]
    n = 50_000 if quick else c.n
    eps = c.eps * ((c.n / n) ** (1.0 / c.d) if quick else 1.0)  # keep neighbours per point

    def load():
        if c.kind == "uniform":
            return datasets.uniform(n, c.d, 0.0, 100.0, seed=c.seed)
        return datasets.exponential(n, c.d, rate=40.0, seed=c.seed)

    params = {"n": n, "d": c.d, "kind": c.kind, "seed": c.seed}
    if not quick and c.pairs_excl_self is not None:
        params["pairs_excl_self"] = c.pairs_excl_self
    return load, float(eps), params


def _ours(get, eps, device, pairs_hint=None, memory_fraction=0.6, repeat=1) -> list[Impl]:
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
        Impl(f"skyjoin {device} table (sorted)", table(True), ours=True, warmup=too_big is None,
             skip_reason=too_big, repeat=repeat),
        Impl(f"skyjoin {device} table (unsorted)", table(False), ours=True, skip_reason=too_big,
             repeat=repeat),
        Impl(f"skyjoin {device} counts only", counts, ours=True, warmup=too_big is not None,
             repeat=repeat),
    ]
    if too_big:
        impls.append(Impl(f"skyjoin {device} chunks (streamed)", streamed, ours=True,
                          repeat=repeat))
    return impls


def cases(quick: bool = False, device: str = "cpu", names=None, rtree_max_seconds: float = 300.0,
          skip_peers: tuple[str, ...] = (), repeat: int = 3) -> list[Case]:
    """The suite's cases (``quick`` shrinks the generated ones to 50k points).

    Our engine and the scipy peers run ``repeat`` times each and keep their
    fastest run: on a shared machine a single run can be 15% off either way.
    """
    names = list(names) if names else CPU_CASES + ["GDSJoin100k-1.0"]
    out = []
    for name in names:
        if name == "GDSJoin100k-1.0" and _gds_path() is None:
            continue
        load, eps, params = _loader(name, quick)
        holder: dict = {}

        def get(holder=holder):
            return holder["X"]

        def setup(holder=holder, load=load):
            holder["X"] = load()

        def teardown(holder=holder):
            holder.clear()

        hint = params.get("pairs_excl_self")
        impls = _ours(get, eps, device, pairs_hint=hint, repeat=repeat) + peer_impls(
            get, eps, rtree_max_seconds=rtree_max_seconds, skip=skip_peers, pairs_hint=hint,
            shape=(params["n"], params["d"]), repeat=repeat)
        out.append(Case(name if not quick else f"{name} (quick)", dict(params, eps=eps), impls,
                        setup=setup, teardown=teardown))
    return out


_MEMORY_SCRIPT = r"""
import json, os, sys, threading, time
import numpy as np
import skyjoin as sj
from skyjoin.bench import join as bj

name, quick, device = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
load, eps, _ = bj._loader(name, quick)
X = load()
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
    """Run the suite; write ``join-<device>.json``/``.png``; return the rows."""
    rows = run_suite(f"join-{device}", cases(quick=quick, device=device, names=names), log=log)
    if memory:
        for name in (names or CPU_CASES):
            if name not in CPU_CASES:
                continue

            hint, avail = NAMED_CASES[name].pairs_excl_self, available_memory_bytes()
            if not quick and hint and avail and 4 * hint > 0.6 * avail:
                log(f"  {name:<24} peak memory: not probed (a table of {hint:,} pairs does not fit)")
                continue
            try:
                m = peak_memory(name, quick=quick, device=device)
                log(f"  {name:<24} peak memory: +{m['peak_increase_bytes'] / 2**20:.0f} MiB "
                    f"(input {m['input_bytes'] / 2**20:.0f} MiB, output {m['output_bytes'] / 2**20:.0f} MiB; "
                    f"{m['ratio_to_budget']:.2f} of the budget 1.5 x input + output)")
                for r in rows:
                    if r.case.startswith(name) and r.impl.endswith("table (sorted)"):
                        r.extra.update({f"memory_{k}": v for k, v in m.items()})
            except Exception as exc:  # reported, never hidden
                log(f"  {name:<24} peak memory: probe failed: {exc}")
    json_path, png = write_report(f"join-{device}", rows, out_dir)
    log(format_table(rows))
    log(f"report: {json_path}" + (f", chart: {png}" if png else ""))
    return rows
