"""Benchmark of skyjoin.distributed: 1 worker against N workers against one machine.

Each case (2-D Gaussian blobs for the join and DBSCAN, anticorrelated data
for the skyline) is timed three ways, each configuration with its own
cluster, started before and closed after its cases, so that no idle
cluster holds memory (or GPU memory) while another runs:

* ``single machine``: the ordinary operator in this process (all cores, or
  the GPU);
* ``dask 1 worker``: :mod:`skyjoin.distributed` on a local cluster of one
  worker (all cores through Numba's threads, or one GPU);
* ``dask N workers``: N workers sharing the cores (each ``cores / N``
  Numba threads), or one worker per GPU.

Times include moving the data to the workers and the result back (an
in-memory NumPy array in, a NeighborTable / labels / row ids out), which is
what a user of the API waits for.  The report gives the scaling
(1 worker / N workers) and the distributed overhead (1 worker / single
machine).  The GPU figure, 20M 2-D points on 1 GPU against 2 GPUs and
against the single machine, is the ``device="gpu"`` run of this file on a
2-GPU host (``python -m skyjoin.bench.distributed --device gpu``);
``--ideal`` times the bound of that path instead (:func:`ideal_split`:
slabs on GPU threads of one process, no Dask).  On the 2-core
development machine the CPU run can only show the overheads: two workers
share the same two cores as one.  ``--large`` runs the join and DBSCAN on
200M points instead (same neighbours per point), to see how the scaling
and the overheads change with size.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

import numpy as np

import skyjoin as sj

from .. import datasets
from .. import distributed as sd
from .._core.device import cupy
from ..dbscan.grid_gpu import gpu_grid_dbscan
from ..join.gpu import gpu_self_join
from ..skyline.api import skyline
from .harness import (Impl, case_order, check_names, data_case, format_table, run_suite, size_tag,
                      write_report)

__all__ = ["run", "case_specs", "case_names", "ideal_split"]

# name (before the size), operator, n (full), n (quick), d, eps at the full n, min_samples
_SPECS = {
    "cpu": [("JoinBlobs2D", "join", 2_000_000, 200_000, 2, 0.095, None),
            ("JoinCountsBlobs2D", "counts", 2_000_000, 200_000, 2, 0.095, None),
            ("DBSCANBlobs2D", "dbscan", 2_000_000, 200_000, 2, 0.095, 10),
            ("SkylineAnti4D", "skyline", 2_000_000, 200_000, 4, None, None)],
    "gpu": [("JoinBlobs2D", "join", 20_000_000, 2_000_000, 2, 0.03, None),
            ("JoinCountsBlobs2D", "counts", 20_000_000, 2_000_000, 2, 0.03, None),
            ("DBSCANBlobs2D", "dbscan", 20_000_000, 2_000_000, 2, 0.03, 10),
            ("SkylineAnti4D", "skyline", 20_000_000, 2_000_000, 4, None, None)],
    # ten times the points at the same neighbours per point (eps / sqrt(10)):
    # where the scaling stands once the GPUs' work outweighs the fixed costs
    "gpu-large": [("JoinBlobs2D", "join", 200_000_000, 2_000_000, 2, 0.03 / 10 ** 0.5, None),
                  ("DBSCANBlobs2D", "dbscan", 200_000_000, 2_000_000, 2, 0.03 / 10 ** 0.5, 10)],
}


def case_specs(device: str, quick: bool, large: bool = False):
    """(name, operator, n, d, eps, min_samples) of each case; eps keeps the neighbours per point.

    Names carry the points the case runs (``JoinBlobs2D-2M``, quick
    ``JoinBlobs2D-200k``).  ``large`` (GPU only): the 200M-point join and
    DBSCAN instead.
    """
    out = []
    if large and device != "gpu":
        raise ValueError("the large cases are for GPU workers (device='gpu')")
    for name, op, n_full, n_quick, d, eps, m in _SPECS["gpu-large" if large else device]:
        n = n_quick if quick else n_full
        if eps is not None and quick:
            eps = eps * (n_full / n) ** (1.0 / d)
        out.append((f"{name}-{size_tag(n)}", op, n, d, eps, m))
    return out


def case_names(device: str = "cpu", quick: bool = False) -> list[str]:
    """The names ``--case`` accepts on this device in this mode."""
    return [spec[0] for spec in case_specs(device, quick)]


def _data(op, n, d):
    """The case's points (seeded)."""
    if op == "skyline":
        return datasets.anticorrelated(n, d, seed=3)
    return datasets.blobs(n, d, centers=50, std=1.5, low=0.0, high=100.0, seed=1)


def _single_fn(op, get, eps, m, device):
    """The single-machine operator."""
    def fn():
        if op == "join":
            return sj.self_join(get(), eps, device=device).n_pairs
        if op == "counts":
            return int(sj.self_join(get(), eps, device=device, output="counts").sum())
        if op == "dbscan":
            est = sj.DBSCAN(eps=eps, min_samples=m, device=device).fit(get())
            return int(est.labels_.max() + 1)

        return len(skyline(get(), device=device))
    return fn


_KEY = re.compile(r"^skyjoin-[a-z]+-[0-9a-f]{10}-")


def task_seconds(stream) -> dict:
    """Seconds of compute (and of transfers) per kind of task, from a Dask task stream.

    Keys like ``skyjoin-join-<token>-route-3`` count as "route";
    Dask's own tasks under their name prefix.
    """
    out: dict = {}
    for rec in stream:
        key = rec["key"] if isinstance(rec["key"], str) else str(rec["key"])
        kind = _KEY.sub("", key)
        kind = re.sub(r"-[0-9a-f]{32}$", "", kind)         # Dask's own keys: name-hash
        kind = re.sub(r"(-\d+)+$", "", kind) or key
        for ss in rec.get("startstops", ()):
            name = kind if ss["action"] == "compute" else f"{kind} ({ss['action']})"
            out[name] = out.get(name, 0.0) + ss["stop"] - ss["start"]
    return {k: round(v, 4) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def _dask_fn(op, get, eps, m, device, client):
    """The distributed operator on ``client``."""
    from distributed import get_task_stream

    def fn():
        with get_task_stream(client) as ts:
            out = run_op()
        out["task_s"] = task_seconds(ts.data)
        return out

    def run_op():
        tm: dict = {}
        if op == "join":
            size = sd.self_join(get(), eps, client=client, device=device, timings=tm).n_pairs
        elif op == "counts":
            size = int(sd.self_join(get(), eps, client=client, device=device, output="counts",
                                    timings=tm).sum())
        elif op == "dbscan":
            est = sd.DBSCAN(eps=eps, min_samples=m, client=client, device=device).fit(get())
            size, tm = int(est.labels_.max() + 1), est.timings_
        else:
            size = len(sd.skyline(get(), client=client, device=device, timings=tm))
        return {"size": size, **{f"phase_{k}_s" if k != "n_partitions" else k:
                                 (round(v, 4) if isinstance(v, float) else v)
                                 for k, v in tm.items()}}
    return fn


def _cluster(n_workers, device):
    """A local cluster of n workers (CPU processes sharing the cores, or one per GPU)."""
    if device == "gpu":
        return sd.local_gpu_cluster(n_workers)
    return sd.local_cluster(n_workers, silence_logs=40)


def _cases(specs, device, client, label):
    """Cases for one configuration (client None: single machine)."""
    after = (lambda: cupy().get_default_memory_pool().free_all_blocks()) if device == "gpu" \
        else None
    cases = []
    for name, op, n, d, eps, m in specs:
        def impls_of(get, op=op, eps=eps, m=m):
            fn = (_single_fn(op, get, eps, m, device) if client is None
                  else _dask_fn(op, get, eps, m, device, client))
            return [Impl(label, fn, ours=client is not None)]

        params = {"n": n, "d": d, "eps": eps, "min_samples": m, "operator": op, "device": device}
        cases.append(data_case(name, params, lambda op=op, n=n, d=d: _data(op, n, d), impls_of,
                               after=after))
    return cases


def run(quick: bool = False, out_dir: str = "bench-results", device: str = "cpu",
        n_workers: int = 2, names=None, log=print, large: bool = False):
    """Run the suite; write ``distributed.json`` / ``.png`` and return the rows.

    Parameters
    ----------
    quick : bool
        Cases of 200k points (CPU) or 2M (GPU) instead of 2M / 20M.
    out_dir : str
        Folder of the report.
    device : {"cpu", "gpu"}
        CPU workers sharing the cores, or one worker per GPU.
    n_workers : int
        Workers (GPUs) of the N-worker configuration.
    names : list of str, optional
        Run only these cases (as ``case_names(device, quick)`` gives them).
    log : callable
    large : bool
        The 200M-point GPU cases (join, DBSCAN) instead of the 20M ones.

    Returns
    -------
    list of harness.Row
    """
    from distributed import Client

    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    specs = case_specs(device, quick, large)
    if names:
        check_names(names, [s[0] for s in specs])
        specs = [s for s in specs if s[0] in set(names)]
    rows = []
    log(f"skyjoin.distributed bench on {device}: single machine, 1 worker, {n_workers} workers")
    rows += run_suite("distributed", _cases(specs, device, None, "single machine"), log=log)
    for k in (1, n_workers):
        label = f"dask {k} worker" + ("s" if k > 1 else "")
        t0 = time.perf_counter()
        with _cluster(k, device) as cluster, Client(cluster) as client:
            log(f"  cluster of {k} worker(s) up in {time.perf_counter() - t0:.1f} s, "
                f"dashboard {client.dashboard_link}")
            rows += run_suite("distributed", _cases(specs, device, client, label), log=log)
    summary = scaling(rows, n_workers)
    json_path, png = write_report("distributed", rows, out_dir,
                                  title=f"skyjoin.distributed ({device})")
    with open(os.path.join(out_dir, "distributed-scaling.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    log(format_table(rows))
    log("")
    for r in rows:
        if r.extra:
            ph = {k[6:-2]: v for k, v in r.extra.items() if k.startswith("phase_")}
            log(f"{r.case} | {r.impl}: phases {ph} tasks {r.extra.get('task_s')}")
    log("")
    log(f"{'case':<32} {'1 worker / single':>18} {'scaling 1 -> ' + str(n_workers):>16}")
    for s in summary:
        o = f"{s['overhead']:.2f}x" if s["overhead"] is not None else "-"
        g = f"{s['scaling']:.2f}x" if s["scaling"] is not None else "-"
        log(f"{s['case']:<32} {o:>18} {g:>16}")
    log(f"report: {json_path}" + (f", {png}" if png else ""))
    return rows


def ideal_split(n: int = 20_000_000, eps: float = 0.03, min_samples: int = 10,
                n_gpus: int = 2, log=print) -> dict:
    """The bound the Dask GPU path can reach: the join and grid DBSCAN of 2-D blobs split
    at the median of x into n_gpus slabs (each with a 1.001 eps halo), every slab run
    on its own GPU by a thread of this process, without Dask, against one GPU running
    everything.  Returns the seconds of each run (best of two)."""
    cp = cupy()
    X = _data("join", n, 2)
    x = X[:, 0]
    cuts = np.quantile(x[:1_000_000], np.arange(1, n_gpus) / n_gpus)
    slab = np.searchsorted(cuts, x, side="right")
    parts = []
    for k in range(n_gpus):
        own = np.flatnonzero(slab == k)
        lo = cuts[k - 1] - 1.001 * eps if k > 0 else -np.inf
        hi = cuts[k] + 1.001 * eps if k < n_gpus - 1 else np.inf
        halo = np.flatnonzero((slab != k) & (x >= lo) & (x < hi))
        ids = np.concatenate([own, halo])
        parts.append((X[ids], ids.astype(np.int32), len(own)))
    for k in range(n_gpus):      # compile and warm every GPU
        with cp.cuda.Device(k):
            gpu_self_join(X[:100_000], eps * 10)
    runs = {
        "join": (lambda k: gpu_self_join(parts[k][0], eps, query_rows=parts[k][2],
                                         column_ids=parts[k][1], n_columns=n),
                 lambda: gpu_self_join(X, eps)),
        "dbscan": (lambda k: gpu_grid_dbscan(parts[k][0], eps, min_samples),
                   lambda: gpu_grid_dbscan(X, eps, min_samples)),
    }
    def side_by_side(one_part):
        errors = []

        def work(k):
            try:
                with cp.cuda.Device(k):
                    one_part(k)
                    cp.cuda.Device(k).synchronize()
            except BaseException as exc:  # re-raised in the calling thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(n_gpus)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    out = {}
    for op, (one_part, whole) in runs.items():
        for label, fn in ((f"{op} 1 GPU", whole),
                          (f"{op} {n_gpus} threads x 1 GPU",
                           lambda one_part=one_part: side_by_side(one_part))):
            best = None
            for _ in range(2):
                t0 = time.perf_counter()
                fn()
                cp.cuda.Device(0).synchronize()
                t = time.perf_counter() - t0
                best = t if best is None else min(best, t)
            out[label] = round(best, 4)
            log(f"{label}: {best:.3f} s")
    return out


def scaling(rows, n_workers: int) -> list[dict]:
    """Per case: t(1 worker) / t(single machine) and t(1 worker) / t(N workers)."""
    out = []
    for c in case_order(rows):
        t = {r.impl: r.time_s for r in rows if r.case == c and r.time_s is not None}
        one, single = t.get("dask 1 worker"), t.get("single machine")
        many = t.get(f"dask {n_workers} workers")
        out.append({"case": c, "single_s": single, "one_worker_s": one, "n_workers_s": many,
                    "overhead": one / single if one and single else None,
                    "scaling": one / many if one and many else None})
    return out


if __name__ == "__main__":  # pragma: no cover
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="bench-results")
    ap.add_argument("--case", action="append", default=None)
    ap.add_argument("--large", action="store_true",
                    help="the 200M-point GPU cases (join, DBSCAN) instead of the 20M ones")
    ap.add_argument("--ideal", action="store_true",
                    help="only the bound of the GPU path: slabs on GPU threads, no Dask "
                         "(ideal_split)")
    a = ap.parse_args()
    if a.ideal:
        ideal_split(n_gpus=a.workers)
    else:
        run(quick=a.quick, out_dir=a.out, device=a.device, n_workers=a.workers, names=a.case,
            large=a.large)
