"""Where the 2-GPU time goes (issue 6): phase times of the single-GPU join and
DBSCAN on 20M blobs, of two threads each running half on its own GPU (the
ideal the Dask path can reach), and of the Dask path itself.

Run on a 2-GPU host: ``python3 scripts/dist_profile.py [parts]`` with parts a
comma list of single, threads, dask, dbscan (default all).
"""

import sys
import threading
import time

import numpy as np


def main():
    parts = set((sys.argv[1] if len(sys.argv) > 1 else "single,threads,dask,dbscan").split(","))
    import cupy as cp

    import skyjoin as sj
    from skyjoin import datasets
    from skyjoin.join.gpu import gpu_self_join

    n, eps, ms = 20_000_000, 0.03, 10
    t = time.perf_counter()
    X = datasets.blobs(n, 2, centers=50, std=1.5, low=0.0, high=100.0, seed=1)
    print(f"data {time.perf_counter() - t:.2f} s", flush=True)
    for dev in range(cp.cuda.runtime.getDeviceCount()):
        with cp.cuda.Device(dev):
            gpu_self_join(X[:100_000], eps * 10)
    r = lambda d: {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}
    if "single" in parts:
        for rep in range(2):
            tm = {}
            t = time.perf_counter()
            nt = gpu_self_join(X, eps, timings=tm)
            print(f"single join {time.perf_counter() - t:.3f} s pairs {nt.n_pairs} {r(tm)}",
                  flush=True)
            del nt
    # the ideal: two threads, each its half plus halo on its own GPU
    t = time.perf_counter()
    m = float(np.median(X[:1_000_000, 0]))
    x = X[:, 0]
    own0 = x < m
    ids = [np.flatnonzero(own0), np.flatnonzero(~own0)]
    halo = [np.flatnonzero(~own0 & (x < m + 1.001 * eps)), np.flatnonzero(own0 & (x >= m - 1.001 * eps))]
    P = [(np.concatenate([X[ids[k]], X[halo[k]]]),
          np.concatenate([ids[k], halo[k]]).astype(np.int32), len(ids[k])) for k in range(2)]
    print(f"split on host {time.perf_counter() - t:.3f} s sizes {[len(p[1]) for p in P]}", flush=True)
    if "threads" in parts:
        for rep in range(2):
            res = [None, None]

            def work(k):
                with cp.cuda.Device(k):
                    tm = {}
                    t0 = time.perf_counter()
                    nt = gpu_self_join(P[k][0], eps, query_rows=P[k][2], column_ids=P[k][1],
                                       n_columns=n, timings=tm)
                    res[k] = (time.perf_counter() - t0, nt.n_pairs, r(tm))

            t = time.perf_counter()
            th = [threading.Thread(target=work, args=(k,)) for k in range(2)]
            [h.start() for h in th]
            [h.join() for h in th]
            print(f"2 threads join {time.perf_counter() - t:.3f} s: {res}", flush=True)
        res = [None]
        t = time.perf_counter()
        work(0)
        print(f"1 thread half join {time.perf_counter() - t:.3f} s: {res[0]}", flush=True)
    if "dbscan" in parts:
        from skyjoin.dbscan.grid_gpu import gpu_grid_dbscan

        for rep in range(2):
            tm = {}
            t = time.perf_counter()
            out = gpu_grid_dbscan(X, eps, ms, timings=tm)
            print(f"single grid dbscan {time.perf_counter() - t:.3f} s clusters "
                  f"{int(out[1].max()) + 1} {r(tm)}", flush=True)
            t = time.perf_counter()
            est = sj.DBSCAN(eps=eps, min_samples=ms, device="gpu").fit(X)
            print(f"single estimator {time.perf_counter() - t:.3f} s", flush=True)
        res = [None, None]

        def dwork(k):
            with cp.cuda.Device(k):
                tm = {}
                t0 = time.perf_counter()
                gpu_grid_dbscan(P[k][0], eps, ms, timings=tm)
                res[k] = (time.perf_counter() - t0, r(tm))

        for rep in range(2):
            t = time.perf_counter()
            th = [threading.Thread(target=dwork, args=(k,)) for k in range(2)]
            [h.start() for h in th]
            [h.join() for h in th]
            print(f"2 threads grid dbscan (1 eps halo) {time.perf_counter() - t:.3f} s: {res}",
                  flush=True)
    if "dask" in parts:
        from distributed import Client, get_task_stream

        import skyjoin.distributed as sd
        from skyjoin.bench.distributed import task_seconds

        for nw in (1, 2):
            with sd.local_gpu_cluster(nw) as cl, Client(cl) as client:
                for rep in range(2):
                    tm = {}
                    with get_task_stream(client) as ts:
                        t = time.perf_counter()
                        nt = sd.self_join(X, eps, client=client, device="gpu", timings=tm)
                        el = time.perf_counter() - t
                    print(f"dask {nw} join {el:.3f} s pairs {nt.n_pairs} {r(tm)} "
                          f"{task_seconds(ts.data)}", flush=True)
                    del nt
                    with get_task_stream(client) as ts:
                        t = time.perf_counter()
                        est = sd.DBSCAN(eps=eps, min_samples=ms, client=client, device="gpu").fit(X)
                        el = time.perf_counter() - t
                    print(f"dask {nw} dbscan {el:.3f} s clusters {int(est.labels_.max()) + 1} "
                          f"{r(est.timings_)} {task_seconds(ts.data)}", flush=True)


if __name__ == "__main__":
    main()
