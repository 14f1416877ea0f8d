"""Independent oracles for the join tests: float64 brute force."""

import numpy as np


def brute_pairs(R, S, eps, self_join=False, include_self=False, dtype=np.float64):
    """Boolean (n_r, n_s) matrix of sum_k (r_k - s_k)^2 <= eps^2, in ``dtype``,
    summing the dimensions in order (the library's stated semantics)."""
    R = np.asarray(R, dtype=dtype)
    S = np.asarray(S, dtype=dtype)
    e = dtype(eps)
    acc = np.zeros((len(R), len(S)), dtype=dtype)
    for t in range(R.shape[1]):
        diff = R[:, t][:, None] - S[:, t][None, :]
        acc += diff * diff
    m = acc <= e * e
    if self_join and not include_self:
        np.fill_diagonal(m, False)
    return m


def table_matrix(nt):
    """Dense boolean matrix of a NeighborTable."""
    return nt.to_scipy().toarray().astype(bool)
