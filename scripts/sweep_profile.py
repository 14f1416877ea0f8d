"""Where the CPU sweep's time goes (issue 4): the parts of ``dbscan_sweep``'s grid path
on 1M blobs, for the 16-min_samples sweep (eps 0.3) and the 8-eps sweep (min_samples
10), each run three times; then the 8-eps sweep, pipelined and not, with its stage
times.

Run: ``python scripts/sweep_profile.py`` (add ``--threads N`` to limit Numba's threads).
``--gpu-hybrid``: instead, the 8-eps sweep by HYBRID-DBSCAN on the GPU (T built on the
GPU, assigned on the CPU), not pipelined and pipelined with the assigner on all of
Numba's threads or on fewer (``_thread_split``).
"""

import argparse
import time

import numba

from skyjoin.bench.dbscan import PAPER_MINPTS, SWEEP_EPS, _data
from skyjoin.dbscan import plan
from skyjoin.dbscan import sweep as sw
from skyjoin.dbscan.sweep import grid_links, grid_reach
from skyjoin.dbscan.sweep import pipeline as sweep_pipeline


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--gpu-hybrid", action="store_true")
    args = ap.parse_args()
    if args.threads:
        numba.set_num_threads(args.threads)
    X = _data("blobs", 1_000_000, 1)
    if args.gpu_hybrid:
        return gpu_hybrid(X)
    T = {}

    def wrap(name):
        mod = grid_reach if name == "_share" else grid_links
        f = getattr(mod, name)

        def g(*a, **k):
            t0 = time.perf_counter()
            r = f(*a, **k)
            T[name] = T.get(name, 0.0) + time.perf_counter() - t0
            return r
        setattr(mod, name, g)

    for name in ("_order_by_level", "_cell_pairs", "_link_all", "_labels_levels", "_share"):
        wrap(name)
    print(f"threads {numba.get_num_threads()} ({numba.threading_layer()})", flush=True)
    for title, eps_list, ms in (("16 min_samples, eps 0.3", [0.3], PAPER_MINPTS),
                                ("8 eps, min_samples 10", SWEEP_EPS, [10])):
        for _ in range(3):
            T.clear()
            tm = {}
            t0 = time.perf_counter()
            for e in eps_list:
                gi = grid_links._grid_index(X, e, sorted(ms), None, tm)
                res = list(grid_links._assign_grid_levels(gi, sorted(ms, reverse=True)))
            total = time.perf_counter() - t0
            parts = {k: round(v, 3) for k, v in {**tm, **T}.items()}
            print(f"{title}: {total:.3f} s {parts}", flush=True)
            del res
    for _ in range(3):
        for pipeline in (False, True):
            t0 = time.perf_counter()
            c0 = time.process_time()
            res = list(sw.dbscan_sweep(X, eps=SWEEP_EPS, min_samples=[10], device="cpu",
                                       pipeline=pipeline))
            total = time.perf_counter() - t0
            cpu = time.process_time() - c0
            b = [r.timings["table"] for r in res]
            a = [r.timings["assign"] for r in res]
            print(f"8 eps {'pipelined' if pipeline else 'not pipelined'}: {total:.3f} s "
                  f"(CPU {cpu:.2f} s) build {sum(b):.3f} assign {sum(a):.3f} "
                  f"two-stage ideal {sw.pipeline_makespan(b, a):.3f}", flush=True)
            del res

def gpu_hybrid(X):
    split = plan._thread_split
    table = sweep_pipeline.neighbor_table
    phases = {}

    def timed_table(*a, **k):  # the join's phases, summed over the eps of a sweep
        tm = {}
        out = table(*a, **{**k, "timings": tm})
        for key, v in tm.items():
            if isinstance(v, float):
                phases[key] = phases.get(key, 0.0) + v
        return out
    sweep_pipeline.neighbor_table = timed_table
    total = numba.get_num_threads()
    runs = [(False, None)] + [(True, k) for k in (None, total * 3 // 4, total // 2, total // 4)]
    list(sw.dbscan_sweep(X, eps=SWEEP_EPS, min_samples=[10], device="gpu", method="hybrid"))
    for _ in range(2):
        for pipeline, k in runs:
            plan._thread_split = (lambda dev, pipelined, k=k: (None, k))
            phases.clear()
            t0 = time.perf_counter()
            res = list(sw.dbscan_sweep(X, eps=SWEEP_EPS, min_samples=[10], device="gpu",
                                       method="hybrid", pipeline=pipeline))
            wall = time.perf_counter() - t0
            b = [r.timings["table"] for r in res]
            a = [r.timings["assign"] for r in res]
            print(f"gpu hybrid {'pipelined' if pipeline else 'not pipelined'}, assigner "
                  f"threads {k or total}: {wall:.3f} s build {sum(b):.3f} assign {sum(a):.3f} "
                  f"two-stage ideal {sw.pipeline_makespan(b, a):.3f} "
                  f"eq2 {sw.ideal_pipeline_time(wall, 8):.3f} builds {[round(x, 3) for x in b]} "
                  f"assigns {[round(x, 3) for x in a]}", flush=True)
            print("  join phases", {key: round(v, 3) for key, v in phases.items()}, flush=True)
            del res
    plan._thread_split = split
    sweep_pipeline.neighbor_table = table


if __name__ == "__main__":
    main()
