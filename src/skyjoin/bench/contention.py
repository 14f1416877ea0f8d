"""Contention suite: each operator's slowdown beside busy processes, against its peer's.

Users run skyjoin in notebooks on shared servers and inside Dask workers,
beside other work.  This suite times each CPU operator and a single-threaded
peer on the same data, first on a quiet machine, then with ``busy``
processes beside it (pure-Python spin loops in subprocesses, started before
and always killed after each timed round), and reports

* each implementation's slowdown, busy median / quiet median;
* the ratio of the two slowdowns, ours / the peer's;
* each one's CPU time beside the busy processes over its quiet CPU time
  (``cpu_growth``): above 1, threads burn CPU while they wait (spinning),
  a figure that the machine's other load does not move much.

The operators and peers (sizes configurable, ``quick`` for a smoke test):

* the self-join, 1M uniform 2-D points, eps 0.5 (``Unif2D1M-0.5``'s recipe),
  against ``scipy.spatial.cKDTree.query_pairs``;
* DBSCAN, 200k 2-D blobs, against scikit-learn's ``DBSCAN(n_jobs=1)``;
* the skyline, 50k x 8-D independent points, against ``paretoset``
  (skipped, with the reason, when it is not installed).

Expected figures: with T of our threads on C cores (T = C) and B busy
processes (1 + B >= C), a fair scheduler gives ours T C / (T + B) cores
against T quiet, and the peer C / (1 + B) of its one core, so the slowdowns
are (T + B) / C and (1 + B) / C, and their ideal ratio (T + B) / (1 + B):
4/3 for T = B = C = 2.  ``target_ratio`` is 1.6: above it our threads lose
time to each other (spinning, a region waiting for a preempted thread), not
just their share of the machine.  The skyline runs 8-D by default, where
paretoset takes about a second a call rather than tens of seconds at 12-D
(docs/decisions/cpu-threads.md); ``sizes={"skyline": (50_000, 12)}`` runs
the 12-D case.

Timing rules: every implementation runs once untimed first (compilation,
caches); then ``repeat`` rounds, each round quiet then busy, ours and the
peer interleaved, so that drifting background load hits both conditions
alike.  Medians are reported (a busy machine's fastest run is luck), with
every run kept in the JSON.  Cost: about ``2 x repeat`` runs of every
implementation, the busy ones slower by the slowdown.  Nothing here asserts
a timing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, cast

import numpy as np

import skyjoin as sj

from .._core.thread_count import cpu_threads
from ..datasets import blobs, skyline_data, uniform
from .harness import machine_info, size_tag

__all__ = ["busy_processes", "Operator", "operators", "case_names", "measure", "run",
           "TARGET_RATIO", "BUSY", "REPEAT", "main"]

#: The fairness target: our slowdown at most this times the peer's.
TARGET_RATIO = 1.6
#: Busy processes beside the timed code (full run; quick: 1).
BUSY = 2
#: Rounds (quiet + busy) of each implementation (full run; quick: 1).
REPEAT = 5
#: A pure-Python spin loop: one runnable thread that never sleeps.
_SPIN = "while True:\n    pass\n"
#: Seconds for the busy processes to reach their loop before a timing.
_SETTLE_S = 0.3


@contextlib.contextmanager
def busy_processes(k: int) -> Iterator[list[subprocess.Popen]]:
    """``k`` spinning Python processes for the duration of the block.

    They are killed and reaped on every way out of the block (an exception,
    Ctrl-C included).  O(k) process starts.
    """
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(k):
            procs.append(subprocess.Popen([sys.executable, "-c", _SPIN],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        if procs:
            time.sleep(_SETTLE_S)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


@dataclass
class Operator:
    """One operator and its peer on one data set: ``ours()`` / ``peer()``
    return the result size, which must agree (checked)."""

    name: str
    params: dict
    ours_name: str
    peer_name: str
    make: Callable[[], Any]
    ours: Callable[[Any], int]
    peer: Callable[[Any], int]
    skip_reason: str | None = None
    data: Any = field(default=None, repr=False)


def _join_op(n: int, eps: float) -> Operator:
    from scipy.spatial import cKDTree

    return Operator(
        f"join-2d-{size_tag(n)}", {"n": n, "d": 2, "kind": "uniform [0,100]^2", "seed": 11, "eps": eps},
        "skyjoin self_join (cpu, table)", "scipy cKDTree.query_pairs",
        lambda: uniform(n, 2, 0.0, 100.0, seed=11),
        lambda X: int(cast(Any, sj.self_join(X, eps, device="cpu")).n_pairs),
        lambda X: 2 * len(cKDTree(X).query_pairs(eps, output_type="ndarray")))


def _dbscan_op(n: int, eps: float, min_samples: int) -> Operator:
    from sklearn.cluster import DBSCAN as SklearnDBSCAN

    def clusters(labels):
        return int(labels.max()) + 1 if len(labels) else 0

    return Operator(
        f"dbscan-2d-{size_tag(n)}", {"n": n, "d": 2, "kind": "blobs, 50 centres", "seed": 1, "eps": eps,
                   "min_samples": min_samples},
        "skyjoin DBSCAN (cpu)", "sklearn DBSCAN (n_jobs=1)",
        lambda: blobs(n, 2, centers=50, std=1.5, low=0.0, high=100.0, seed=1),
        lambda X: clusters(sj.DBSCAN(eps=eps, min_samples=min_samples, device="cpu")
                           .fit(X).labels_),
        lambda X: clusters(SklearnDBSCAN(eps=eps, min_samples=min_samples, n_jobs=1)
                           .fit(X).labels_))


def _skyline_op(n: int, d: int) -> Operator:
    try:
        from paretoset import paretoset
        skip = None
    except ImportError:
        paretoset, skip = None, "paretoset is not installed (pip install paretoset)"
    return Operator(
        f"skyline-{d}d-{size_tag(n)}", {"n": n, "d": d, "kind": "independent", "seed": 5},
        "skyjoin skyline (cpu)", "paretoset (use_numba=True)",
        lambda: skyline_data(n, d, "independent", seed=np.random.default_rng(5)),
        lambda X: int(np.asarray(sj.skyline(X, device="cpu")).size),
        lambda X: int(paretoset(X, distinct=False, use_numba=True).sum()),
        skip_reason=skip)


#: Sizes: (join n, join eps), (dbscan n, eps, min_samples), (skyline n, d).
SIZES = {"full": {"join": (1_000_000, 0.5), "dbscan": (200_000, 0.3 * 5 ** 0.5, 10),
                  "skyline": (50_000, 8)},
         "quick": {"join": (20_000, 0.5), "dbscan": (5_000, 1.5, 10), "skyline": (3_000, 6)}}


def operators(quick: bool = False, names=None, sizes: dict | None = None) -> list[Operator]:
    """The suite's operators (``names``: only these, by case name as
    :func:`case_names` gives them, or by operator: join, dbscan, skyline);
    ``sizes`` overrides entries of ``SIZES`` (same shapes)."""
    sz = dict(SIZES["quick" if quick else "full"], **(sizes or {}))
    ops = [_join_op(*sz["join"]), _dbscan_op(*sz["dbscan"]), _skyline_op(*sz["skyline"])]
    if not names:
        return ops
    known = {op.name: op for op in ops} | {op.name.split("-")[0]: op for op in ops}
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown contention case(s) {', '.join(unknown)}; "
                         f"the cases are: {', '.join(op.name for op in ops)}")
    return [op for op in ops if op.name in names or op.name.split("-")[0] in names]


def cases(device: str = "cpu", quick: bool = False) -> list[Operator]:
    """The suite's cases (each with ``name`` and ``params["n"]``); the data is
    made only when a case runs."""
    return operators(quick)


def case_names(device: str = "cpu", quick: bool = False) -> list[str]:
    """The names ``--case`` accepts (the suite runs on the CPU only)."""
    return [op.name for op in operators(quick)]


def _timed(fn: Callable[[Any], int], X) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of the whole process (every thread), result size."""
    c0, t0 = time.process_time(), time.perf_counter()
    size = fn(X)
    return time.perf_counter() - t0, time.process_time() - c0, size


def _summary(quiet: list, busy: list) -> dict:
    """Medians of (wall, cpu) runs.  CPU time that grows beside busy
    processes is time our threads spent waiting actively (spinning)."""
    q, b = statistics.median(t for t, _ in quiet), statistics.median(t for t, _ in busy)
    qc, bc = statistics.median(c for _, c in quiet), statistics.median(c for _, c in busy)
    return {"quiet_s": [t for t, _ in quiet], "busy_s": [t for t, _ in busy],
            "quiet_cpu_s": [c for _, c in quiet], "busy_cpu_s": [c for _, c in busy],
            "quiet_median_s": q, "busy_median_s": b, "slowdown": b / q if q > 0 else None,
            "cpu_growth": bc / qc if qc > 0 else None}


def measure(op: Operator, busy: int, repeat: int, log: Callable[[str], None] = print,
            peer: bool = True) -> dict:
    """One operator's row: quiet and busy times of ours and the peer's,
    each slowdown, and their ratio (ours / peer's).  O(repeat) runs of each.
    ``peer=False``: ours alone (its slowdown and CPU growth, no ratio)."""
    row: dict = {"operator": op.name, "params": op.params, "ours": op.ours_name,
                 "peer": op.peer_name if peer else None, "busy_processes": busy, "repeat": repeat}
    if op.skip_reason and peer:
        log(f"{op.name}: skipped ({op.skip_reason})")
        return dict(row, skipped=op.skip_reason)
    X = op.make()
    impls = [("ours", op.ours)] + ([("peer", op.peer)] if peer else [])
    sizes = {who: _timed(fn, X)[2] for who, fn in impls}   # warm-up: compilation, caches
    if peer and sizes["ours"] != sizes["peer"]:
        raise RuntimeError(f"contention {op.name}: ours gave {sizes['ours']}, "
                           f"{op.peer_name} gave {sizes['peer']}: the results disagree")
    size_ours = sizes["ours"]
    times: dict = {(who, cond): [] for who, _ in impls for cond in ("quiet", "busy")}
    for r in range(repeat):
        for cond, k in (("quiet", 0), ("busy", busy)):
            with busy_processes(k):
                for who, fn in impls if r % 2 == 0 else impls[::-1]:
                    times[(who, cond)].append(_timed(fn, X)[:2])
    ours = _summary(times[("ours", "quiet")], times[("ours", "busy")])
    if not peer:
        row.update(size=size_ours, ours_times=ours, ours_slowdown=ours["slowdown"])
        log(f"{op.name:8s} ours {ours['quiet_median_s']:.3f} s -> {ours['busy_median_s']:.3f} s "
            f"(x{ours['slowdown']:.2f}, CPU x{ours['cpu_growth']:.2f})")
        return row
    theirs = _summary(times[("peer", "quiet")], times[("peer", "busy")])
    ratio = ours["slowdown"] / theirs["slowdown"] \
        if ours["slowdown"] and theirs["slowdown"] else None
    row.update(size=size_ours, ours_times=ours, peer_times=theirs,
               ours_slowdown=ours["slowdown"], peer_slowdown=theirs["slowdown"], ratio=ratio,
               target_ratio=TARGET_RATIO,
               within_target=None if ratio is None else ratio <= TARGET_RATIO)
    log(f"{op.name:8s} ours {ours['quiet_median_s']:.3f} s -> {ours['busy_median_s']:.3f} s "
        f"(x{ours['slowdown']:.2f}, CPU x{ours['cpu_growth']:.2f}); {op.peer_name} "
        f"{theirs['quiet_median_s']:.3f} s -> {theirs['busy_median_s']:.3f} s "
        f"(x{theirs['slowdown']:.2f}); ratio {ratio:.2f} (target <= {TARGET_RATIO})")
    return row


def _load() -> dict:
    """The machine's load average and runnable threads, for the report."""
    try:
        with open("/proc/loadavg") as f:
            a, b, c, running, _ = f.read().split()
        return {"loadavg": [float(a), float(b), float(c)], "runnable": running}
    except OSError:
        return {}


def run(device: str = "cpu", quick: bool = False, out_dir: str = "bench-results", names=None,
        busy: int | None = None, repeat: int | None = None, sizes: dict | None = None,
        peer: bool = True, log: Callable[[str], None] = print) -> str:
    """Run the suite; write ``<out_dir>/contention.json``; return its path.

    ``quick``: small sizes, 1 busy process, 1 round (a smoke test of
    seconds).  ``busy`` / ``repeat`` override the mode's counts; ``sizes``
    entries of ``SIZES``; ``peer=False`` times ours alone.
    """
    if device != "cpu":
        raise ValueError(f"the contention suite runs on the CPU; got device {device!r}")
    busy = (1 if quick else BUSY) if busy is None else int(busy)
    repeat = (1 if quick else REPEAT) if repeat is None else int(repeat)
    if busy < 0 or repeat < 1:
        raise ValueError(f"busy must be >= 0 and repeat >= 1; got busy={busy}, repeat={repeat}")
    ops = operators(quick, names, sizes)
    log(f"contention: {busy} busy process(es), {repeat} round(s), "
        f"{cpu_threads()} skyjoin threads, {os.cpu_count()} CPUs")
    before = _load()
    rows = [measure(op, busy, repeat, log, peer) for op in ops]
    payload = {"suite": "contention", "machine": dict(machine_info(), threads=cpu_threads()),
               "quick": quick, "busy_processes": busy, "repeat": repeat,
               "target_ratio": TARGET_RATIO, "load_before": before, "load_after": _load(),
               "rows": rows}
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "contention.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    log(f"wrote {path}")
    return path


def main(argv=None) -> None:
    """``python -m skyjoin.bench.contention [--quick] [--busy K] [--repeat R] [--case NAME]
    [--skyline-dims D] [--no-peer]``."""
    ap = argparse.ArgumentParser(prog="python -m skyjoin.bench.contention",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 busy process, 1 round")
    ap.add_argument("--busy", type=int, default=None, help=f"busy processes (default {BUSY})")
    ap.add_argument("--repeat", type=int, default=None, help=f"rounds (default {REPEAT})")
    ap.add_argument("--case", action="append", choices=case_names(), help="repeatable")
    ap.add_argument("--skyline-dims", type=int, default=None,
                    help="dimensions of the skyline case (default 8; 12: paretoset takes ~27 s)")
    ap.add_argument("--no-peer", action="store_true", help="time ours alone (no ratio)")
    ap.add_argument("--out", default="bench-results", help="folder for contention.json")
    a = ap.parse_args(argv)
    sizes = None
    if a.skyline_dims is not None:
        n = SIZES["quick" if a.quick else "full"]["skyline"][0]
        sizes = {"skyline": (n, a.skyline_dims)}
    run(quick=a.quick, out_dir=a.out, names=a.case, busy=a.busy, repeat=a.repeat, sizes=sizes,
        peer=not a.no_peer)


if __name__ == "__main__":
    main()
