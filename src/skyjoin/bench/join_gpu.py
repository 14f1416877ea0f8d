"""GPU epsilon-join benchmark suite: our GPU join against its peers.

Run on the GPU machine (``scripts/gpu-check`` does)::

    python3 -m skyjoin.bench.join_gpu --out DIR [--cases A,B] [--no-peers] [--no-sweep]

For every case (``DEFAULT_CASES``) it measures, in one process:

* ours, end to end from a NumPy array to a host NeighborTable (grid
  included), with rows sorted and unsorted, and counts only; the phase
  breakdown (transfer in, grid, count, fill pipeline, host copy);
* the physical bounds: 4 bytes x pairs over the measured pinned
  device-to-host rate, and over the measured rate of writing fresh host memory;
* peers: our CPU engine (all cores), scipy's cKDTree (``workers=-1``,
  counts with ``return_length=True``; on a sample of the queries where the full
  run would take minutes, scaled, and labelled so), ``query_pairs`` where the
  result is small, a tiled brute force in CuPy and the papers' GPU
  brute-force kernel (both on a query sample, scaled);
* a sweep of the kernel options (counts only), the measurements behind the
  default configuration rule of ``skyjoin.simjoin.plan.choose_config``.

Writes ``join_gpu.json`` (via ``skyjoin.bench.harness``), ``join_gpu_table.txt``
and prints the summary table last.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import traceback

import numpy as np
from scipy.spatial import cKDTree

import skyjoin

from .._core.memory import alloc_host
from .._core.transfer import parallel_copy
from ..datasets import NAMED_CASES, named_case
from ..simjoin.api import join, self_join
from ..simjoin.gpu.pipeline import last_stats
from .harness import Row, format_table, write_report
from .peers_gpu import tiled_bruteforce_counts

SUITE = "join_gpu"
MAX_PEER_S = 15.0   # a peer whose full run is estimated longer runs on a query sample

#: Anchors: best of the papers' authors' codes on an H200 (seconds), and their configuration.
AUTHORS = {
    "Unif2D2M-0.5": (1.33, "GDS-Join without unicomp"),
    "Unif2D2M-1.0": (1.63, "GDS-Join without unicomp"),
    "Unif6D2M-8.0": (0.50, "load-imbalance code, WorkQueue + LID-Unicomp, k=1"),
    "Expo2D2M-0.0004": (1.42, "GDS-Join without unicomp"),
    "Expo6D2M-0.012": (4.14, "load-imbalance code, WorkQueue + LID-Unicomp, k=8"),
    "Expo2D2M-0.002": (22.7, "GDS-Join with unicomp"),
}
EXPECTED = {
    "Unif2D2M-0.5": 314_833_680, "Unif2D2M-1.0": 1_247_933_728, "Unif6D2M-8.0": 6_702_784,
    "Expo2D2M-0.0004": 793_578_794, "Expo6D2M-0.012": 1_729_275_652,
    "Expo2D2M-0.002": 18_765_695_968,
}
DEFAULT_CASES = ["Unif2D2M-0.5", "Unif2D2M-1.0", "Unif6D2M-8.0", "Expo2D2M-0.0004",
                 "Expo6D2M-0.012", "Expo2D2M-0.002", "Unif2D10M-0.25", "Expo2D10M-0.0002"]

SWEEP = [
    dict(kernel="global", threads_per_point=1, schedule="grid"),
    dict(kernel="global", threads_per_point=8, schedule="grid"),
    dict(kernel="global", threads_per_point=32, schedule="grid"),
    dict(kernel="global", threads_per_point=1, schedule="sortbywl"),
    dict(kernel="global", threads_per_point=1, schedule="workqueue"),
    dict(kernel="global", threads_per_point=8, schedule="workqueue"),
    dict(kernel="global", pattern="lid_unicomp", threads_per_point=1, schedule="workqueue"),
    dict(kernel="global", pattern="lid_unicomp", threads_per_point=8, schedule="workqueue"),
    dict(kernel="global", pattern="unicomp", threads_per_point=1, schedule="grid"),
    dict(kernel="shared"),
]


def load_case(name: str):
    """Data, eps and known pair count (incl. self) of a named case."""
    try:
        X, eps = named_case(name)
        return X, eps, NAMED_CASES[name].pairs_incl_self
    except ImportError:
        pass
    kind, rest = name[:4], name[4:]
    d = int(rest.split("D")[0])
    n = {"2M": 2_000_000, "10M": 10_000_000}[rest.split("D")[1].split("-")[0]]
    eps = float(name.split("-")[1])
    seed = {("Unif", 2, 2_000_000): 1, ("Unif", 6, 2_000_000): 2, ("Expo", 2, 2_000_000): 3,
            ("Expo", 6, 2_000_000): 4, ("Unif", 2, 10_000_000): 5, ("Expo", 2, 10_000_000): 6}[(kind, d, n)]
    rng = np.random.default_rng(seed)
    if kind == "Unif":
        X = rng.uniform(0, 100, (n, d))
    else:
        X = rng.exponential(1 / 40, (n, d))
        while True:
            m = X > 1
            c = int(m.sum())
            if not c:
                break
            X[m] = rng.exponential(1 / 40, c)
    return np.ascontiguousarray(X), eps, EXPECTED.get(name)


# ---------------------------------------------------------------------------
# physical bounds
# ---------------------------------------------------------------------------

def measure_bounds(nbytes: int = 2 << 30) -> dict:
    """Pinned device-to-host rate, and fresh host memory write rates (GB/s)."""
    import cupy as cp
    import cupyx

    out = {}
    n = nbytes // 4
    dev = cp.arange(n, dtype=cp.int32)
    pinned = cupyx.empty_pinned(n, dtype=np.int32)
    dev.get(out=pinned)
    ts = []
    for _ in range(3):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        dev.get(out=pinned)
        ts.append(time.perf_counter() - t0)
    out["d2h_pinned_GBps"] = nbytes / min(ts) / 1e9
    t0 = time.perf_counter()
    page = np.empty(n, dtype=np.int32)
    dev.get(out=page)
    out["d2h_pageable_fresh_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
    del page
    t0 = time.perf_counter()
    fresh = alloc_host(n, reuse=False)
    parallel_copy(fresh, pinned)
    out["host_fresh_parallel_copy_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
    t0 = time.perf_counter()
    parallel_copy(fresh, pinned)
    out["host_warm_parallel_copy_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
    del fresh
    t0 = time.perf_counter()
    plain = np.empty(n, dtype=np.int32)
    np.copyto(plain, pinned)
    out["host_fresh_1thread_copy_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
    del plain
    # pinning fresh host memory in place, then copying straight into it
    try:
        reg = alloc_host(n, reuse=False)
        t0 = time.perf_counter()
        cp.cuda.runtime.hostRegister(reg.ctypes.data, nbytes, 0)
        out["host_register_fresh_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
        t0 = time.perf_counter()
        dev.get(out=reg)
        out["d2h_registered_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
        cp.cuda.runtime.hostUnregister(reg.ctypes.data)
        del reg
    except Exception:   # report what works
        pass
    t0 = time.perf_counter()
    mem = cp.cuda.alloc_pinned_memory(nbytes)   # straight from the driver: the pool is empty
    out["pinned_alloc_GBps"] = nbytes / (time.perf_counter() - t0) / 1e9
    del mem, pinned, dev
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    return out


# ---------------------------------------------------------------------------
# the suite
# ---------------------------------------------------------------------------

def _best(fn, repeat):
    """Best wall time of repeat calls; returns (seconds, last result)."""
    best, res = None, None
    for _ in range(max(1, repeat)):
        gc.collect()
        t0 = time.perf_counter()
        res = fn()
        t = time.perf_counter() - t0
        best = t if best is None or t < best else best
    return best, res


def run_case(name, log, peers=True, sweep=True, bounds=None,
             max_peer_s=MAX_PEER_S) -> tuple[list, dict]:
    """Time ours and the peers on one case; returns harness rows and a summary dict."""
    import cupy as cp

    rows = []
    t0 = time.perf_counter()
    X, eps, expected = load_case(name)
    n = X.shape[0]
    params = {"n": n, "d": X.shape[1], "eps": eps, "expected_pairs_incl_self": expected}
    log(f"== {name}: n={n} d={X.shape[1]} eps={eps} (data {time.perf_counter() - t0:.1f} s)")
    summary = {"case": name, "pairs_expected": expected}
    huge = expected is not None and expected > 4e9

    def add(impl, t, size, ours, extra=None, error=None):
        rows.append(Row(SUITE, name, impl, ours, t, size, extra or {}, params, error))
        if not ours and t is not None:
            summary.setdefault("peers", {})[impl] = t
        ts = f"{t:8.3f} s" if t is not None else "       -"
        log(f"  {impl:<44} {ts}  size={size} {error or ''}")

    # --- ours: counts only
    self_join(X, eps, device="gpu", include_self=True, output="counts")       # compile, warm up
    t, c = _best(lambda: self_join(X, eps, device="gpu", include_self=True, output="counts"), 3)
    pairs = int(c.sum())
    st = last_stats()
    add("skyjoin-gpu counts", t, pairs, True, {"config": st.get("config"), "size_not_comparable": False})
    summary.update(pairs=pairs, counts_s=t, config=st.get("config"), candidates=st.get("candidates"),
                   correct=(expected is None or pairs == expected))
    counts = c
    # --- ours: tables
    if huge:
        # the lent VM backs guest memory lazily: the first touch of tens of GB
        # runs at a fraction of the warm rate; time that run apart, then warm
        t, nt = _best(lambda: self_join(X, eps, device="gpu", include_self=True, sort=False), 1)
        add("skyjoin-gpu table unsorted (first run: cold VM memory)", t, nt.n_pairs, True,
            {"phases": {k: round(v, 4) for k, v in last_stats().items() if k.endswith("_s")}})
        summary["unsorted_cold_s"] = t
        del nt
        gc.collect()
    for sort in (False, True):
        label = "skyjoin-gpu table " + ("sorted" if sort else "unsorted")
        if not huge:
            nt = self_join(X, eps, device="gpu", include_self=True, sort=sort)   # warm (pinned pool)
            del nt
            gc.collect()
        t, nt = _best(lambda: self_join(X, eps, device="gpu", include_self=True, sort=sort), 1 if huge else 2)
        st = last_stats()
        ok = nt.n_pairs == pairs and np.array_equal(np.diff(nt.indptr), counts)
        if ok and sort:   # rows ascending: check a spread of rows
            for i in np.linspace(0, n - 1, 2000).astype(np.int64):
                r = nt.indices[nt.indptr[i]:nt.indptr[i + 1]]
                ok = ok and bool(np.all(r[1:] > r[:-1])) and i in r
        phases = {k: round(v, 4) for k, v in st.items() if k.endswith("_s")}
        add(label, t, nt.n_pairs, True, {"phases": phases, "batches": st.get("batches"),
                                         "config": st.get("config")})
        summary["sorted_s" if sort else "unsorted_s"] = t
        summary["table_config"] = st.get("config")
        summary["phases_sorted" if sort else "phases_unsorted"] = phases
        summary["batches"] = st.get("batches")
        summary["table_ok"] = summary.get("table_ok", True) and ok
        del nt
        gc.collect()
    del counts
    if bounds:
        summary["bound_d2h_s"] = 4 * pairs / (bounds["d2h_pinned_GBps"] * 1e9)
        summary["bound_hostwrite_s"] = 4 * pairs / (bounds["host_fresh_parallel_copy_GBps"] * 1e9)
    # --- sweep of kernel options (counts only)
    if sweep:
        for opts in SWEEP:
            label = "opt " + "/".join(str(v) for v in opts.values())
            try:
                self_join(X, eps, device="gpu", include_self=True, output="counts", **opts)
                t, c = _best(lambda: self_join(X, eps, device="gpu", include_self=True, output="counts",
                                                     **opts), 2)
                add(label + " counts", t, int(c.sum()), True, {"sweep": True})
            except Exception as exc:   # report, keep going
                add(label + " counts", None, None, True, error=f"{type(exc).__name__}: {exc}")
    # --- peers
    if peers:
        _peers(name, X, eps, pairs, huge, add, log, max_peer_s=max_peer_s)
    cp.get_default_memory_pool().free_all_blocks()
    return rows, summary


def _probe_rate(fn, n, fractions=(0.002, 0.01)):
    """Time fn(m) for two query-sample sizes; fit t = a + b m and extrapolate to n queries."""
    ms = [max(200, int(n * f)) for f in fractions]
    ts = []
    for m in ms:
        t0 = time.perf_counter()
        fn(m)
        ts.append(time.perf_counter() - t0)
    b = max(0.0, (ts[1] - ts[0]) / max(1, ms[1] - ms[0]))
    a = max(0.0, ts[0] - b * ms[0])
    return a + b * n, (a, b)


def _peers(name, X, eps, pairs, huge, add, log, max_peer_s=MAX_PEER_S):
    """Time the peers; sampled ones are scaled and say so in their name."""
    n = X.shape[0]
    rng = np.random.default_rng(0)
    # our CPU engine, all cores
    try:
        small = X[:20000]
        skyjoin.self_join(small, eps, device="cpu", include_self=True)          # JIT warm-up
        skyjoin.self_join(small, eps, device="cpu", include_self=True, output="counts")
        skyjoin.join(small[:100], small, eps, device="cpu", output="counts")
        sample = rng.choice(n, max(200, n // 100), replace=False)
        est, (a, b) = _probe_rate(lambda m: skyjoin.join(X[sample[:m]], X, eps, device="cpu",
                                                         output="counts"), n)
        if est <= max_peer_s:
            t, c = _best(lambda: skyjoin.self_join(X, eps, device="cpu", include_self=True,
                                                   output="counts"), 1)
            add("skyjoin-cpu counts", t, int(np.asarray(c).sum()), False)
        else:
            add("skyjoin-cpu counts (0.2% and 1% query samples, linear fit)", est, None, False,
                {"fit_a_s": a, "fit_b_s_per_query": b, "estimated": True})
        if not huge and est * 3 <= max_peer_s:
            t, nt = _best(lambda: skyjoin.self_join(X, eps, device="cpu", include_self=True), 1)
            add("skyjoin-cpu table sorted", t, nt.n_pairs, False)
            del nt
            gc.collect()
    except Exception as exc:
        add("skyjoin-cpu", None, None, False, error=f"{type(exc).__name__}: {exc}")
    # scipy cKDTree, all cores
    try:
        t0 = time.perf_counter()
        tree = cKDTree(X)
        t_build = time.perf_counter() - t0
        sample = rng.choice(n, max(200, n // 100), replace=False)
        est, _ = _probe_rate(lambda m: tree.query_ball_point(X[sample[:m]], eps, workers=-1,
                                                             return_length=True), n)
        frac = min(1.0, max_peer_s / 2 / max(est, 1e-9))
        m = max(1000, int(n * frac))
        idx = np.sort(rng.choice(n, m, replace=False)) if m < n else None
        Q = X if idx is None else X[idx]
        t0 = time.perf_counter()
        cnt = tree.query_ball_point(Q, eps, workers=-1, return_length=True)
        t_q = time.perf_counter() - t0
        scale = n / Q.shape[0]
        label = "cKDTree counts" + ("" if idx is None else f" ({Q.shape[0] / n:.1%} sample, scaled)")
        add(label, t_build + t_q * scale, int(cnt.sum() * scale), False,
            {"size_not_comparable": idx is not None, "sample_fraction": Q.shape[0] / n})
        # the table the cKDTree way on all cores: neighbour lists, then one CSR
        # (on a query sample of about 2e7 pairs where the result is larger)
        m = max(1000, min(n, int(n * 2e7 / max(pairs, 1))))
        idx = np.sort(rng.choice(n, m, replace=False)) if m < n else None
        Q = X if idx is None else X[idx]
        t0 = time.perf_counter()
        lists = tree.query_ball_point(Q, eps, workers=-1)
        lens = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        indptr = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        indices = np.fromiter((j for x in lists for j in x), dtype=np.int32, count=int(indptr[-1]))
        t_l = time.perf_counter() - t0
        label = "cKDTree table (lists + CSR)" + ("" if idx is None else
                                                 f" ({m / n:.1%} sample, scaled)")
        add(label, t_build + t_l * n / m, int(indices.size * n / m), False,
            {"size_not_comparable": idx is not None, "sample_fraction": m / n})
        del lists, indices, indptr
        # query_pairs runs on one thread: only where it fits the time allowed
        if pairs < 5e7 and (t_build + t_q * scale) * 5 <= max_peer_s:
            t0 = time.perf_counter()
            pr = tree.query_pairs(eps, output_type="ndarray")
            add("cKDTree query_pairs (1 thread)", t_build + time.perf_counter() - t0,
                2 * len(pr) + n, False)
            del pr
        else:
            add("cKDTree query_pairs (1 thread)", None, None, False,
                error=f"skipped: estimated over {max_peer_s:.0f} s")
        del tree
    except Exception as exc:
        add("cKDTree", None, None, False, error=f"{type(exc).__name__}: {exc}")
    # tiled CuPy brute force and the papers' GPU brute-force kernel, on a query sample
    try:
        m = 2000
        Q = X[:m]
        tiled_bruteforce_counts(Q[:10], X, eps)
        t0 = time.perf_counter()
        cnt = tiled_bruteforce_counts(Q, X, eps)
        t = time.perf_counter() - t0
        add(f"cupy tiled brute force ({m} queries, scaled)", t * n / m, int(cnt.sum()) * n // m,
            False, {"size_not_comparable": True, "sample_queries": m})
        m = 20000
        join(X[:10], X, eps, device="gpu", kernel="bruteforce", output="counts")
        t0 = time.perf_counter()
        cnt = join(X[:m], X, eps, device="gpu", kernel="bruteforce", output="counts")
        t = time.perf_counter() - t0
        add(f"gpu brute-force kernel ({m} queries, scaled)", t * n / m, int(cnt.sum()) * n // m,
            False, {"size_not_comparable": True, "sample_queries": m})
    except Exception as exc:
        add("gpu brute force", None, None, False, error=f"{type(exc).__name__}: {exc}")


def summary_table(summaries, bounds) -> str:
    """The short table printed last."""
    lines = []
    if bounds:
        lines.append("bounds: " + ", ".join(f"{k}={v:.1f}" for k, v in bounds.items()))
    hdr = (f"{'case':<18} {'pairs':>14} {'ok':>3} {'unsorted':>9} {'sorted':>8} {'counts':>7} "
           f"{'authors':>7} {'target':>6} {'met':>4} {'cnt10x':>6} {'D2Hbnd':>7} {'hostbnd':>7} "
           f"{'batches':>7}  config")
    lines.append(hdr)
    for s in summaries:
        a = AUTHORS.get(s["case"], (None, ""))[0]
        target = a / 3 if a else None
        best = min(x for x in (s.get("unsorted_s"), s.get("sorted_s")) if x is not None) \
            if s.get("unsorted_s") is not None else None

        def f(x, w=8, p=3):
            return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and x is not None else " " * (w - 1) + "-"

        met = "-" if target is None or best is None else ("yes" if best <= target else "NO")
        cmet = "-" if a is None else ("yes" if s["counts_s"] <= a / 10 else "NO")
        ok = "ok" if s.get("correct") and s.get("table_ok") else "BAD"
        lines.append(f"{s['case']:<18} {s['pairs']:>14,d} {ok:>3} {f(s.get('unsorted_s'), 9)} "
                     f"{f(s.get('sorted_s'))} {f(s.get('counts_s'), 7)} {f(a, 7, 2)} "
                     f"{f(target, 6, 2)} {met:>4} {cmet:>6} {f(s.get('bound_d2h_s'), 7)} "
                     f"{f(s.get('bound_hostwrite_s'), 7)} {s.get('batches', 0):>7}  {s.get('config')}")
    for s in summaries:     # against cKDTree on all cores: table to table, counts to counts
        peers = s.get("peers", {})
        tab = next((v for k, v in peers.items() if k.startswith("cKDTree table")), None)
        cnt = next((v for k, v in peers.items() if k.startswith("cKDTree counts")), None)
        ours_t = s.get("sorted_s")
        parts = []
        if tab and ours_t:
            parts.append(f"cKDTree table {tab:.2f} s / ours sorted = {tab / ours_t:.1f}x")
        if cnt and s.get("counts_s"):
            parts.append(f"cKDTree counts {cnt:.2f} s / ours counts = {cnt / s['counts_s']:.0f}x")
        if cnt and ours_t:
            parts.append(f"cKDTree counts / ours sorted table = {cnt / ours_t:.1f}x")
        if parts:
            lines.append(f"{s['case']:<18} " + "; ".join(parts) + f"  (table config {s.get('table_config')})")
    cold = [f"{s['case']} {s['unsorted_cold_s']:.2f} s" for s in summaries if s.get("unsorted_cold_s")]
    if cold:
        lines.append("first unsorted run on cold VM memory (not in the table): " + ", ".join(cold))
    lines.append("phases (sorted run): " + "; ".join(
        f"{s['case']}: " + ", ".join(f"{k[:-2]}={v:.3f}" for k, v in s.get("phases_sorted", {}).items())
        for s in summaries))
    return "\n".join(lines)


def main(argv=None) -> int:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-bounds", action="store_true")
    ap.add_argument("--max-peer-s", type=float, default=MAX_PEER_S,
                    help="peers estimated to take longer run on a query sample, scaled")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "join_gpu.log"), "a")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    log(f"device: {props['name'].decode() if isinstance(props['name'], bytes) else props['name']}, "
        f"{os.cpu_count()} host cores")
    bounds = None if args.no_bounds else measure_bounds()
    if bounds:
        log("bounds: " + json.dumps({k: round(v, 2) for k, v in bounds.items()}))
    rows, summaries = [], []
    for name in [c for c in args.cases.split(",") if c]:
        try:
            r, s = run_case(name, log, peers=not args.no_peers, sweep=not args.no_sweep,
                            bounds=bounds, max_peer_s=args.max_peer_s)
            rows += r
            summaries.append(s)
        except Exception as exc:
            log(f"== {name} FAILED: {type(exc).__name__}: {exc}")
            log(traceback.format_exc())
        with open(os.path.join(args.out, "join_gpu_summary.json"), "w") as fh:
            json.dump({"bounds": bounds, "cases": summaries}, fh, indent=1, default=str)
        with open(os.path.join(args.out, "join_gpu_table.txt"), "w") as fh:   # so far
            fh.write(format_table(rows) + "\n\n" + summary_table(summaries, bounds) + "\n")
    write_report(SUITE, rows, args.out, title="skyjoin GPU join")
    table = format_table(rows) + "\n\n" + summary_table(summaries, bounds)
    with open(os.path.join(args.out, "join_gpu_table.txt"), "w") as fh:
        fh.write(table + "\n")
    log("")
    log(summary_table(summaries, bounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
