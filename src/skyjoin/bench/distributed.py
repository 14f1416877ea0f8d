"""Benchmark of skyjoin.distributed: 1 worker against N workers against one machine.

Every case states its regime: the points, the neighbours per point, and
where its result ends up (``OUTPUTS``): one table on the driver, counts,
Parquet files written by the workers, tables left on the workers' GPUs,
labels.  The scaling of each output kind is reported separately, since
they are bounded by different things (a table on the driver by the first
touch of its fresh host memory, whatever the GPUs; files by the workers'
writes; counts and device tables by the GPUs).

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
what a user of the API waits for.  The counts stay on the workers (a Dask
array): their time runs until every chunk exists there (``self_join``
returns once they do), plus their sum brought back as the case's size,
not their gather.  The report gives the scaling
(1 worker / N workers) and the distributed overhead (1 worker / single
machine).  The GPU figure, 20M 2-D points on 1 GPU against 2 GPUs and
against the single machine, is the ``device="gpu"`` run of this file on a
2-GPU host (``python -m skyjoin.bench.distributed --device gpu``);
``--ideal`` times the bound of that path instead (:func:`ideal_split`:
slabs on GPU threads of one process, no Dask).  On the 2-core
development machine the CPU run can only show the overheads: two workers
share the same two cores as one.  ``--large`` runs the join and DBSCAN on
200M points instead (same neighbours per point; the Parquet case with
fewer, so that its files fit a local disk), with every output kind, on 1,
2, 4 and 8 GPUs where the host has them (``--gpus``), without the
single-machine run unless ``--single``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time

import numpy as np

import skyjoin as sj

from .. import datasets
from .. import distributed as sd
from .._core.device import cupy
from ..cluster.grid_gpu import gpu_grid_dbscan
from ..distributed.owned_rows import task_self_join
from ..distributed.workers import visible_gpus
from ..pareto.api import skyline
from .harness import (REPEAT, Impl, case_order, check_names, data_case, format_table, run_suite,
                      size_tag, write_report)

__all__ = ["run", "case_specs", "case_names", "ideal_split", "OUTPUTS", "WHERE", "gpu_counts"]

#: where the result of each operator ends up (the regime its scaling speaks of)
OUTPUTS = {"join": "one NeighborTable in the driver's memory",
           "counts": "neighbour counts (int64 per point)",
           "parquet": "Parquet files, one per partition, written by the workers",
           "device": "CSR tables left on the workers' GPUs (dask.bag of OwnedRows)",
           "dbscan": "labels and core flags in the driver's memory",
           "skyline": "the skyline's row ids in the driver's memory"}
#: the same, in a word or two (the scaling table's column)
WHERE = {"join": "driver table", "counts": "counts", "parquet": "worker files",
         "device": "worker GPUs", "dbscan": "driver labels", "skyline": "driver rows"}

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
    "gpu-large": [("JoinCountsBlobs2D", "counts", 200_000_000, 2_000_000, 2, 0.03 / 10 ** 0.5,
                   None),
                  ("JoinOnDeviceBlobs2D", "device", 200_000_000, 2_000_000, 2, 0.03 / 10 ** 0.5,
                   None),
                  # a fortieth of the neighbours: about one pair a point, a few GB of files
                  ("JoinParquetBlobs2D", "parquet", 200_000_000, 2_000_000, 2, 0.03 / 20, None),
                  ("DBSCANBlobs2D", "dbscan", 200_000_000, 2_000_000, 2, 0.03 / 10 ** 0.5, 10),
                  ("JoinBlobs2D", "join", 200_000_000, 2_000_000, 2, 0.03 / 10 ** 0.5, None)],
}


def case_specs(device: str, quick: bool, large: bool = False):
    """(name, operator, n, d, eps, min_samples) of each case; eps keeps the neighbours per point.

    Names carry the points the case runs (``JoinBlobs2D-2M``, quick
    ``JoinBlobs2D-200k``).  ``large`` (GPU only): the 200M-point cases,
    one per output kind, instead.
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


_LAST: dict = {}


def _data(op, n, d):
    """The case's points (seeded); the last ones are kept for the next case that
    wants the same (the join cases share their points)."""
    key = ("anti" if op == "skyline" else "blobs", n, d)
    if key not in _LAST:
        _LAST.clear()
        _LAST[key] = datasets.anticorrelated(n, d, seed=3) if op == "skyline" else \
            datasets.blobs(n, d, centers=50, std=1.5, low=0.0, high=100.0, seed=1)
    return _LAST[key]


def _total(counts) -> int:
    """Sum of counts from a NumPy or a Dask array."""
    total = counts.sum()
    return int(total.compute() if hasattr(total, "compute") else total)


def _parquet_dir(scratch: str) -> str:
    """A fresh folder for one run's Parquet files (removed with the case)."""
    os.makedirs(scratch, exist_ok=True)
    return tempfile.mkdtemp(prefix="run-", dir=scratch)


def _single_fn(op, get, eps, m, device, scratch):
    """The single-machine operator."""
    def fn():
        if op == "join":
            return sj.self_join(get(), eps, device=device).n_pairs
        if op == "counts":
            return int(sj.self_join(get(), eps, device=device, output="counts").sum())
        if op == "parquet":
            path = os.path.join(_parquet_dir(scratch), "pairs.parquet")
            return sj.self_join(get(), eps, device=device, out=path).n_pairs
        if op == "device":
            return sj.self_join(get(), eps, device=device, on_device=True).n_pairs
        if op == "dbscan":
            est = sj.DBSCAN(eps=eps, min_samples=m, device=device).fit(get())
            return int(est.labels_.max() + 1)

        return len(skyline(get(), device=device))
    return fn


_KEY = re.compile(r"^skyjoin-[a-z]+-[0-9a-f]{10}-")


def task_seconds(stream) -> dict:
    """Seconds of compute (and of transfers) per kind of task, from a Dask task stream.

    Keys like ``skyjoin-join-<token>-route-3`` count as "route";
    Dask's own tasks (a collection's chunks too) under their name prefix.
    """
    out: dict = {}
    for rec in stream:
        key = rec["key"]
        if isinstance(key, tuple):          # a Dask collection's chunk: (name, index...)
            key = key[0]
        key = str(key)
        kind = _KEY.sub("", key)
        kind = re.sub(r"-[0-9a-f]{32}$", "", kind)         # Dask's own keys: name-hash
        kind = re.sub(r"(-\d+)+$", "", kind) or key
        for ss in rec.get("startstops", ()):
            name = kind if ss["action"] == "compute" else f"{kind} ({ss['action']})"
            out[name] = out.get(name, 0.0) + ss["stop"] - ss["start"]
    return {k: round(v, 4) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def _dask_fn(op, get, eps, m, device, client, scratch):
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
            size = _total(sd.self_join(get(), eps, client=client, device=device,
                                       output="counts", timings=tm))
        elif op == "parquet":
            size = sd.self_join(get(), eps, client=client, device=device,
                                out=_parquet_dir(scratch), timings=tm).n_pairs
        elif op == "device":
            bag = sd.self_join(get(), eps, client=client, device=device, on_device=True,
                               timings=tm)
            size = int(bag.map(lambda r: r.n_pairs).sum().compute())
            del bag
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


def gpu_counts(available: int, wanted=None) -> list[int]:
    """The GPU counts to run: ``wanted`` (each at most ``available``), else 1, 2, 4
    and 8 up to ``available``."""
    if wanted:
        bad = [k for k in wanted if int(k) < 1 or int(k) > available]
        if bad:
            raise ValueError(f"--gpus {bad}: this host has {available} GPU(s)")
        return sorted(set(int(k) for k in wanted))
    return [k for k in (1, 2, 4, 8) if k <= max(1, available)]


def _cases(specs, device, client, label, scratch, repeat):
    """Cases for one configuration (client None: single machine)."""
    def after():
        shutil.rmtree(scratch, ignore_errors=True)      # the Parquet runs' files
        if device == "gpu":
            cupy().get_default_memory_pool().free_all_blocks()

    cases = []
    for name, op, n, d, eps, m in specs:
        def impls_of(get, op=op, eps=eps, m=m):
            fn = (_single_fn(op, get, eps, m, device, scratch) if client is None
                  else _dask_fn(op, get, eps, m, device, client, scratch))
            return [Impl(label, fn, ours=client is not None, repeat=repeat)]

        params = {"n": n, "d": d, "eps": eps, "min_samples": m, "operator": op, "device": device,
                  "output": OUTPUTS[op]}
        cases.append(data_case(name, params, lambda op=op, n=n, d=d: _data(op, n, d), impls_of,
                               after=after))
    return cases


def run(quick: bool = False, out_dir: str = "bench-results", device: str = "cpu",
        n_workers: int = 2, names=None, log=print, large: bool = False, gpus=None,
        single: bool | None = None, repeat: int | None = None):
    """Run the suite; write ``distributed.json`` / ``.png`` and return the rows.

    Parameters
    ----------
    quick : bool
        Cases of 200k points (CPU) or 2M (GPU) instead of 2M / 20M.
    out_dir : str
        Folder of the report (the Parquet runs write under it, and their
        files are removed after each case).
    device : {"cpu", "gpu"}
        CPU workers sharing the cores, or one worker per GPU.
    n_workers : int
        CPU workers of the N-worker configuration (CPU runs).
    names : list of str, optional
        Run only these cases (as ``case_names(device, quick)`` gives them).
    log : callable
    large : bool
        The 200M-point GPU cases, one per output kind, instead of the 20M ones.
    gpus : list of int, optional
        GPU counts to run (GPU runs; default 1, 2, 4, 8 up to the host's GPUs).
    single : bool, optional
        Also time the single-machine operator (default: not for ``large``).
    repeat : int, optional
        Timed runs per configuration (default the harness's; 2 for ``large``).

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
    if device == "gpu":
        counts = gpu_counts(len(visible_gpus()), gpus)
    else:
        counts = sorted({1, int(n_workers)})
    single = (not large) if single is None else bool(single)
    repeat = (2 if large else REPEAT) if repeat is None else int(repeat)
    scratch = os.path.join(os.path.abspath(out_dir), "parquet-runs")
    unit = "GPU" if device == "gpu" else "worker"
    log(f"skyjoin.distributed bench on {device}: "
        f"{'single machine, ' if single else ''}{', '.join(map(str, counts))} {unit}(s)")
    for name, op, n, d, eps, m in specs:
        log(f"  {name}: {n:,} points, {d}-D, eps {eps}; result: {OUTPUTS[op]}")
    rows = []
    try:
        if single:
            rows += run_suite("distributed", _cases(specs, device, None, "single machine",
                                                    scratch, repeat), log=log)
        for k in counts:
            label = _label(k, device)
            t0 = time.perf_counter()
            with _cluster(k, device) as cluster, Client(cluster) as client:
                log(f"  cluster of {k} worker(s) up in {time.perf_counter() - t0:.1f} s, "
                    f"dashboard {client.dashboard_link}")
                rows += run_suite("distributed", _cases(specs, device, client, label, scratch,
                                                        repeat), log=log)
    finally:
        _LAST.clear()       # the points shared by the cases go with the run
    summary = scaling(rows, [_label(k, device) for k in counts])
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
    log(f"scaling, each output kind on its own: t({_label(counts[0], device)}) / t(k)")
    head = f"{'case':<28} {'result':<14}" + "".join(f"{_label(k, device):>14}"
                                                   for k in counts[1:])
    if single:
        head += f"{'1 / single':>12}"
    log(head)
    for srow in summary:
        line = f"{srow['case']:<28} {srow['where']:<14}"
        for k in counts[1:]:
            g = srow["scaling"].get(_label(k, device))
            line += f"{(f'{g:.2f}x' if g else '-'):>14}"
        if single:
            o = srow["overhead"]
            line += f"{(f'{o:.2f}x' if o else '-'):>12}"
        log(line)
    log(f"report: {json_path}" + (f", {png}" if png else ""))
    return rows


def _label(k: int, device: str) -> str:
    """The name of the k-worker configuration in the report."""
    if device == "gpu":
        return f"dask {k} GPU" + ("s" if k > 1 else "")
    return f"dask {k} worker" + ("s" if k > 1 else "")


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
            task_self_join(X[:100_000], eps * 10, device="gpu", precision="float64")
    runs = {
        "join": (lambda k: task_self_join(parts[k][0], eps, device="gpu", precision="float64",
                                          query_rows=parts[k][2], column_ids=parts[k][1],
                                          n_columns=n),
                 lambda: task_self_join(X, eps, device="gpu", precision="float64")),
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


def scaling(rows, labels: list[str]) -> list[dict]:
    """Per case: t(labels[0]) / t(label) for the other configurations, and
    t(labels[0]) / t(single machine) when timed."""
    out = []
    for c in case_order(rows):
        t = {r.impl: r.time_s for r in rows if r.case == c and r.time_s is not None}
        params = next(r.params for r in rows if r.case == c)
        one, single = t.get(labels[0]), t.get("single machine")
        out.append({"case": c, "output": params.get("output", ""),
                    "where": WHERE.get(params.get("operator", ""), ""), "single_s": single,
                    "times_s": {k: t.get(k) for k in labels},
                    "overhead": one / single if one and single else None,
                    "scaling": {k: (one / t[k] if one and t.get(k) else None)
                                for k in labels[1:]}})
    return out


if __name__ == "__main__":  # pragma: no cover
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=2, help="CPU workers (CPU runs)")
    ap.add_argument("--gpus", type=int, action="append", default=None,
                    help="GPU counts to run (repeat: --gpus 1 --gpus 2); default 1, 2, 4, 8 "
                         "up to the host's GPUs")
    ap.add_argument("--single", action="store_true",
                    help="also time the single-machine operator (on by default but for --large)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--out", default="bench-results")
    ap.add_argument("--case", action="append", default=None)
    ap.add_argument("--large", action="store_true",
                    help="the 200M-point GPU cases, one per output kind")
    ap.add_argument("--ideal", action="store_true",
                    help="only the bound of the GPU path: slabs on GPU threads, no Dask "
                         "(ideal_split)")
    a = ap.parse_args()
    if a.ideal:
        ideal_split(n_gpus=a.workers)
    else:
        run(quick=a.quick, out_dir=a.out, device=a.device, n_workers=a.workers, names=a.case,
            large=a.large, gpus=a.gpus, single=True if a.single else None, repeat=a.repeat)
