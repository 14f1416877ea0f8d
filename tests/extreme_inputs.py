"""Run every join and DBSCAN path on the extreme inputs of issue 14.

Used by the CPU test under Numba's bounds checks
(``test_numeric_extremes.test_cpu_kernels_in_bounds_under_numba_boundscheck``)
and, on a GPU machine, under ``compute-sanitizer`` (``PARTS=sanitize
scripts/gpu-check``): ``python tests/extreme_inputs.py --device gpu``.
Prints "in bounds: DEVICE" when every call returned.
"""

import argparse

import numpy as np

import skyjoin as sj


def cases():
    return [(np.array([[1e308, 0.0], [-1e308, 0.0], [1e308, 0.0]]), 1.0),
            (np.array([[1e308, 0.0], [-1e308, 0.0]]), 1.0),
            (np.random.default_rng(1).uniform(0, 1, (300, 2)) * 1e-200, 1e-200),
            (np.random.default_rng(2).uniform(-1, 1, (300, 3)) * 1e200, 3e199),
            (np.zeros((9, 2)), 1e155)]


def run(device: str) -> None:
    for X, eps in cases():
        for p in ("full", "unicomp", "lid_unicomp"):
            sj.self_join(X, eps, pattern=p, device=device)
        sj.self_join(X, eps, output="counts", device=device)
        sj.join(X[::2], X, eps, device=device)
        list(sj.self_join_chunks(X, eps, max_pairs=5, device=device))
        for w in (None, np.ones(len(X))):
            sj.DBSCAN(eps=eps, min_samples=2, device=device).fit(X, sample_weight=w)
        list(sj.dbscan_sweep(X, eps=[eps], min_samples=[2], device=device))
    print(f"in bounds: {device}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    run(ap.parse_args().device)
