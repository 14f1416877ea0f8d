"""GPU skyline benchmark for the lent GPU machine (issue 5).

Times SkyAlign on the GPU (every variant) with the data already on the GPU
and host to host, the GGS-style baseline on a smaller case, and the CPU port
at the machine's thread count; prints a table and writes JSON to $OUT (or
./bench-results).  Usage: ``PYTHONPATH=src python3 scripts/bench_skyline_gpu.py [--quick] [--gpu-only]``
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import skyjoin as sj
from skyjoin.datasets import skyline_data


def main(quick: bool = False, gpu_only: bool = False) -> list[dict]:
    import cupy as cp

    out_dir = os.environ.get("OUT") or "bench-results"
    os.makedirs(out_dir, exist_ok=True)
    rows: list[dict] = []

    def sync():
        cp.cuda.get_current_stream().synchronize()

    def best_of(fn, reps=3):
        fn()
        sync()
        best, res = None, None
        for _ in range(reps):
            t0 = time.perf_counter()
            res = fn()
            sync()
            t = time.perf_counter() - t0
            best = t if best is None else min(best, t)
        return best, res

    def log(row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    # (name, n, d, kind, rng seed, expected skyline size from the issue)
    cases = [("1M-12d-independent", 1_000_000, 12, "independent", 5, 239_121),
             ("1M-12d-anticorrelated", 1_000_000, 12, "anticorrelated", 6, 709_734)]
    if not quick:
        cases += [("8M-12d-anticorrelated", 8_000_000, 12, "anticorrelated", 8, None),
                  ("8M-12d-independent", 8_000_000, 12, "independent", 7, None)]
    for name, n, d, kind, seed, expect in cases:
        t0 = time.perf_counter()
        X = skyline_data(n, d, kind, seed=np.random.default_rng(seed))
        tgen = time.perf_counter() - t0
        Xd = cp.asarray(X)
        sync()
        idx, st = sj.skyline(Xd, device="gpu", return_stats=True)
        size = int(idx.size)
        log({"case": name, "impl": "stats gpu skyalign sync", "size": size, "expected": expect,
             "prefilter_survivors": st["prefilter_survivors"],
             "dominance_tests": st["dominance_tests"], "mask_tests": st["mask_tests"],
             "times": st["times"], "rounds": st.get("rounds"), "gen_s": tgen})
        for v in (["sync", "levelwise", "padded"] if n > 1_000_000
                  else ["sync", "nosync", "levelwise", "noquart", "padded"]):
            t, r = best_of(lambda: sj.skyline(Xd, device="gpu", variant=v))
            log({"case": name, "impl": f"gpu skyalign {v} (data on GPU)", "time_s": t,
                 "size": int(r.size)})
        t, r = best_of(lambda: sj.skyline(X, device="gpu"), reps=2)
        log({"case": name, "impl": "gpu skyalign sync (host to host)", "time_s": t,
             "size": int(r.size)})
        if n <= 1_000_000 and not gpu_only:
            for v in ("nosync", "levelwise"):
                sj.skyline(X[:20000], device="cpu", variant=v)
                t0 = time.perf_counter()
                r = sj.skyline(X, device="cpu", variant=v)
                log({"case": name, "impl": f"cpu skyalign {v} ({os.cpu_count()} cpus)",
                     "time_s": time.perf_counter() - t0, "size": int(r.size)})
        del Xd
        cp.get_default_memory_pool().free_all_blocks()

    # the GGS-style baseline is quadratic in the skyline: a smaller case
    X = None if gpu_only else skyline_data(200_000, 12, "independent", seed=np.random.default_rng(5))
    for alg in (() if gpu_only else ("ggs", "skyalign")):
        Xd = cp.asarray(X)
        t, r = best_of(lambda: sj.skyline(Xd, device="gpu", algorithm=alg), reps=1)
        log({"case": "200k-12d-independent", "impl": f"gpu {alg} (data on GPU)", "time_s": t,
             "size": int(r.size)})

    with open(os.path.join(out_dir, "skyline_gpu.json"), "w") as fh:
        json.dump(rows, fh, indent=1, default=str)
    print()
    print(f"{'case':<24} {'implementation':<44} {'time s':>9} {'size':>9}")
    for r in rows:
        if "time_s" in r:
            print(f"{r['case']:<24} {r['impl']:<44} {r['time_s']:9.4f} {r['size']:>9}")
    return rows


if __name__ == "__main__":
    main(quick="--quick" in sys.argv, gpu_only="--gpu-only" in sys.argv)
