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


def assert_same_tables(a, b):
    """Two NeighborTables hold the same rows, pair for pair."""
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)


def check_gpu_screen(algorithm, X, eps, precision, references, *, min_pairs=1, queries=700):
    """The GPU join by ``algorithm`` (a screen of every pair) against
    independent paths: its self-join of X equals each ``(algorithm,
    device)`` of ``references``, its counts (``include_self``) the table's
    rows plus one, and its join of ``queries`` shifted rows of X with X
    the CPU grid's.  Returns the self-join's table."""
    import skyjoin as sj

    a = sj.self_join(X, eps, algorithm=algorithm, device="gpu", precision=precision)
    assert a.n_pairs >= min_pairs
    for ref_algorithm, device in references:
        assert_same_tables(a, sj.self_join(X, eps, algorithm=ref_algorithm, device=device,
                                           precision=precision))
    counts = sj.self_join(X, eps, algorithm=algorithm, device="gpu", precision=precision,
                          output="counts", include_self=True)
    np.testing.assert_array_equal(counts, np.diff(a.indptr) + 1)
    R = X[:queries] + 0.01
    assert_same_tables(sj.join(R, X, eps, algorithm=algorithm, device="gpu", precision=precision),
                       sj.join(R, X, eps, algorithm="grid", device="cpu", precision=precision))
    return a
