"""Run the GPU kernels that share memory across threads on small sets, for
``compute-sanitizer --tool racecheck`` (``PARTS=sanitize scripts/gpu-check``):
``python tests/shared_memory_races.py``.

The grid DBSCAN in 2-4 dimensions through both link schedules
(``grid_gpu.link_phases``: min_samples 2 one pass, 4 and 10 two phases),
whose ``link_between`` queues each warp's candidates in shared memory, each
fit's labels compared with scikit-learn's.  Prints "labels equal to
scikit-learn's: N fits" when every fit's were; racecheck reports the hazards.
"""

import numpy as np
from sklearn.cluster import DBSCAN as SklearnDBSCAN

import skyjoin as sj


def run() -> int:
    rng = np.random.default_rng(3)
    fits = 0
    for d in (2, 3, 4):
        X = np.concatenate([rng.normal(size=(3000, d)) * 0.3, rng.uniform(-3, 3, (2000, d))])
        for eps, m in ((0.08, 2), (0.2, 10), (0.15, 4)):
            est = sj.DBSCAN(eps=eps, min_samples=m, device="gpu", precision="float64").fit(X)
            ref = SklearnDBSCAN(eps=eps, min_samples=m).fit(X).labels_
            if est.path_ != "grid-gpu" or not np.array_equal(est.labels_, ref):
                raise SystemExit(f"d {d} eps {eps} min_samples {m}: path {est.path_}, "
                                 f"labels equal to scikit-learn's: {np.array_equal(est.labels_, ref)}")
            fits += 1
    return fits


if __name__ == "__main__":
    print(f"labels equal to scikit-learn's: {run()} fits")
