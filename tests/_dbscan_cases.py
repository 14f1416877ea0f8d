"""Random DBSCAN inputs shared by the GPU tests and their emulated twins."""

import numpy as np


def random_cases(seed: int, trials: int, max_n: int, max_d: int):
    """(X, eps, min_samples, sample_weight) for ``trials`` draws: dimension
    1 + trial % max_d, 1 to max_n - 1 points, in turn integer points
    (duplicates, ties), five Gaussian blobs and uniform points; weights,
    some negative, every fourth trial."""
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        d = 1 + trial % max_d
        n = int(rng.integers(1, max_n))
        if trial % 3 == 0:
            X = rng.integers(0, 7, (n, d)).astype(float)        # duplicates, ties
        elif trial % 3 == 1:
            C = rng.uniform(0, 10, (5, d))
            X = C[rng.integers(0, 5, n)] + rng.normal(0, 0.5, (n, d))
        else:
            X = rng.uniform(0, 5, (n, d))
        eps = float(rng.choice([0.5, 1.0, 1.5]))
        m = int(rng.integers(1, 15))
        w = rng.integers(-1, 4, n).astype(float) if trial % 4 == 0 else None
        yield X, eps, m, w
