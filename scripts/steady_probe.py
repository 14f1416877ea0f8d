"""Probe: the CPU join's time and counters, alone or alternated with scipy.

    PYTHONPATH=src python scripts/steady_probe.py [--d 2|6] [--rounds 3]
        [--mode fresh|interleaved] [--no-reuse]

The bench's uniform cases (1M points in [0, 100]^d: 2-D eps 0.5, 6-D eps
12), a warm-up join, then ``--rounds`` joins, each after a
``cKDTree.query_pairs`` of the same data in ``interleaved`` mode.  Per
call: wall, user and sys CPU seconds, minor faults (getrusage), the
system-wide /proc/vmstat deltas of huge page faults and compaction stalls,
and the join's phases.  With ``PERF_CTL_FIFO``/``PERF_ACK_FIFO`` set (the
fifos of ``perf record -D -1 --control fifo:CTL,ACK``) only our joins are
profiled.  ``SKYJOIN_HUGE_PAGES=1`` / ``0`` overrides the page rule.
"""
import argparse
import gc
import os
import resource
import time

from scipy.spatial import cKDTree

import skyjoin as sj
from skyjoin import datasets
from skyjoin._core import memory

VMSTAT = ("thp_fault_alloc", "thp_fault_fallback", "compact_stall", "compact_fail",
          "compact_success", "pgmajfault", "thp_collapse_alloc", "pgfault")


def vmstat():
    out = {}
    try:
        with open("/proc/vmstat") as fh:
            for line in fh:
                k, v = line.split()
                if k in VMSTAT:
                    out[k] = int(v)
    except OSError:
        pass
    return out


_CTL = os.environ.get("PERF_CTL_FIFO")


def perf_ctl(cmd):
    """Enable or disable a ``perf record --control fifo:...`` around our calls."""
    if _CTL:
        with open(_CTL, "w") as fh:
            fh.write(cmd + "\n")
        with open(os.environ["PERF_ACK_FIFO"]) as fh:
            fh.read(5)


def measure(fn, profile=False):
    gc.collect()
    if profile:
        perf_ctl("enable")
    r0, v0, t0 = resource.getrusage(resource.RUSAGE_SELF), vmstat(), time.perf_counter()
    res = fn()
    t1, r1, v1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), vmstat()
    if profile:
        perf_ctl("disable")
    return res, {"wall": t1 - t0, "user": r1.ru_utime - r0.ru_utime,
                 "sys": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt,
                 "maxrss_mb": r1.ru_maxrss / 1024,
                 **{k: v1.get(k, 0) - v0.get(k, 0) for k in VMSTAT}}


def fmt(name, m):
    return (f"{name:6s} wall {m['wall']:6.3f}  user {m['user']:6.3f}  sys {m['sys']:6.3f}  "
            f"minflt {m['minflt']:8d}  thp {m['thp_fault_alloc']:4d}/{m['thp_fault_fallback']:<4d}"
            f" cstall {m['compact_stall']:3d} pgfault {m['pgfault']:8d}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", default="interleaved", choices=["fresh", "interleaved"])
    ap.add_argument("--no-reuse", action="store_true",
                    help="hand the freed table's pages back after each join")
    a = ap.parse_args()
    n, eps, seed = (1_000_000, 0.5, 11) if a.d == 2 else (1_000_000, 12.0, 12)
    X = datasets.uniform(n, a.d, 0.0, 100.0, seed=seed)
    sj.self_join(X, eps)  # compile / load the cache (the bench's warm-up run)
    if hasattr(memory, "huge_pages_pay"):   # absent before the page policy existed
        print(f"huge pages: {memory.huge_pages_pay()}")
    ours, peer, cpu = [], [], []
    for _ in range(a.rounds):
        if a.mode == "interleaved":
            _, m = measure(lambda: len(cKDTree(X).query_pairs(eps, output_type="ndarray")))
            peer.append(m["wall"])
            print(fmt("scipy", m), flush=True)
        tm = {}
        nt, m = measure(lambda: sj.self_join(X, eps, device="cpu", timings=tm), profile=True)
        del nt
        if a.no_reuse and hasattr(memory, "release_retained"):
            gc.collect()
            memory.release_retained()
        ours.append(m["wall"])
        cpu.append((m["user"], m["sys"], m["minflt"]))
        print(fmt("ours", m) + "  " + " ".join(f"{k} {v:.3f}" for k, v in tm.items()), flush=True)
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    pages = os.environ.get("SKYJOIN_HUGE_PAGES", "auto")
    line = f"d={a.d} mode={a.mode} huge={pages} reuse={not a.no_reuse} ours best {min(ours):.3f}"
    if peer:
        line += f"  query_pairs best {min(peer):.3f}  ratio {min(peer) / min(ours):.2f}x"
    u, sy, f = (sorted(c)[len(c) // 2] for c in zip(*cpu))
    print(line + f"  (ours median user {u:.2f} s, sys {sy:.2f} s, {f} minor faults)  load {load}")


if __name__ == "__main__":
    main()
