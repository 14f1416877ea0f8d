"""CPU peers of the epsilon-join benchmark.

The peers' contract: each takes ``(X, eps)``, the points (array_like of
shape (n, d), converted to float64) and the join radius (> 0), validated
once on entry (``ValueError`` for NaN, inf, a wrong shape or eps <= 0), and
returns one number, so that all compare alike: the count of **ordered pairs
(i, j), i != j, with distance <= eps**, that is twice the number of
unordered pairs, self pairs excluded.  Every peer starts from the points and
builds its own index inside the timed call, as our join builds its grid.

* :func:`ckdtree_query_pairs` -- scipy ``cKDTree.query_pairs`` (ndarray output).
* :func:`ckdtree_query_ball_point` -- scipy ``cKDTree.query_ball_point`` on
  all cores, lengths only.
* :func:`sklearn_radius_neighbors_graph` -- scikit-learn's sparse radius graph
  on all cores.
* :func:`rtree_search_and_refine` -- the papers' sequential CPU reference
  (CPU-RTREE, Gowanlock & Karsin 2018 §VI-B): an R-tree over all points,
  then for every point a box search and an exact distance refine.

:func:`peer_impls` wraps them as ``bench.harness.Impl`` objects for a case.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

import numpy as np
from scipy.spatial import cKDTree
from sklearn.neighbors import NearestNeighbors

from .._core.validate import check_eps, check_points
from .harness import REPEAT, Impl, available_memory_bytes

__all__ = [
    "ckdtree_query_pairs",
    "ckdtree_query_ball_point",
    "sklearn_radius_neighbors_graph",
    "rtree_search_and_refine",
    "PEERS",
    "peer_impls",
    "estimated_peak_bytes",
]


def _peer(count: Callable) -> Callable:
    """The peer ``count(X, eps, **options)`` behind the peers' contract: the
    points and eps validated once here, 0 for fewer than two points."""
    @functools.wraps(count)
    def peer(X, eps, **options) -> int:
        X = check_points(X)
        eps = check_eps(eps)
        if len(X) < 2:
            return 0
        return count(X, eps, **options)

    return peer


@_peer
def ckdtree_query_pairs(X, eps) -> int:
    """Ordered pairs within eps by ``cKDTree(X).query_pairs(eps, output_type="ndarray")``.

    Parameters
    ----------
    X, eps
        The points (n, d) and the join radius (> 0), as for every peer.

    Returns
    -------
    int
        2 x the unordered pairs that ``query_pairs`` returns.

    Raises
    ------
    ValueError
        For bad points (NaN, inf, wrong shape) or eps <= 0.

    Examples
    --------
    >>> from skyjoin.bench.peers import ckdtree_query_pairs
    >>> ckdtree_query_pairs([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]], 1.0)
    2
    """
    return 2 * int(len(cKDTree(X).query_pairs(eps, output_type="ndarray")))


@_peer
def ckdtree_query_ball_point(X, eps, workers: int = -1) -> int:
    """Ordered pairs within eps by ``cKDTree.query_ball_point(..., return_length=True)``.

    Every point queries the tree (on ``workers`` threads, all cores by
    default); the neighbour counts include the point itself, so n is
    subtracted from their sum.

    Parameters
    ----------
    X, eps
        As for every peer (the module's contract).
    workers : int
        Threads of the query (-1: all cores).

    Returns
    -------
    int
        The sum of the neighbour counts, less n.

    Raises
    ------
    ValueError
        As every peer, for bad points or eps.

    Examples
    --------
    >>> from skyjoin.bench.peers import ckdtree_query_ball_point
    >>> ckdtree_query_ball_point([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]], 1.0)
    2
    """
    counts = cKDTree(X).query_ball_point(X, eps, workers=workers, return_length=True)
    return int(np.sum(counts, dtype=np.int64)) - len(X)


@_peer
def sklearn_radius_neighbors_graph(X, eps, algorithm: str = "auto") -> int:
    """Ordered pairs within eps by scikit-learn's ``radius_neighbors_graph``.

    ``NearestNeighbors(radius=eps, algorithm=algorithm, n_jobs=-1).fit(X)
    .radius_neighbors_graph(mode="connectivity").nnz``, what the function
    ``radius_neighbors_graph(X, eps, include_self=False, n_jobs=-1)`` runs,
    with the choice of algorithm that the function does not pass on.
    scikit-learn drops each point from its own row by index, so duplicates
    of a point still count, as in the other peers.

    Parameters
    ----------
    X, eps
        As for every peer.
    algorithm : {"auto", "brute", "ball_tree", "kd_tree"}
        scikit-learn's neighbour search ("brute": blocked distance matrices;
        the trees: O(n log n) build, then a search per point).

    Returns
    -------
    int
        The stored entries of the sparse graph.

    Raises
    ------
    ValueError
        From the peers' common input check.

    Examples
    --------
    >>> from skyjoin.bench.peers import sklearn_radius_neighbors_graph
    >>> sklearn_radius_neighbors_graph([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]], 1.0)
    2
    """
    nn = NearestNeighbors(radius=eps, algorithm=algorithm, n_jobs=-1).fit(X)
    g = nn.radius_neighbors_graph(mode="connectivity")
    return int(g.nnz)


def _rtree_index(X: np.ndarray):
    """An R-tree (libspatialindex) bulk-loaded with every point as a degenerate box."""
    from rtree import index

    n, d = X.shape
    prop = index.Property(dimension=d)
    ids = np.arange(n, dtype=np.int64)
    try:
        # bulk load from arrays (STR packing in libspatialindex >= 2.1)
        return index.Index((ids, X, X), properties=prop, interleaved=True)
    except NotImplementedError:
        # older libspatialindex: bulk load from a stream
        stream = ((int(k), tuple(X[k]) + tuple(X[k]), None) for k in range(n))
        return index.Index(stream, properties=prop, interleaved=True)


def _search(idx, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the points in each query box, and the count per box."""
    if hasattr(idx, "intersection_v"):
        ids, counts = idx.intersection_v(lo, hi)
        return ids, counts.astype(np.int64, copy=False)
    found = [np.fromiter(idx.intersection(tuple(a) + tuple(b), objects=False), dtype=np.int64)
             for a, b in zip(lo, hi)]
    counts = np.array([len(f) for f in found], dtype=np.int64)
    return (np.concatenate(found) if found else np.empty(0, np.int64)), counts


@_peer
def rtree_search_and_refine(X, eps, max_seconds: float | None = None,
                            batch: int = 4096) -> int:
    """Ordered pairs within eps by the papers' CPU reference: R-tree search and refine.

    CPU-RTREE of the self-join papers (Gowanlock & Karsin 2018 §VI-B): an
    R-tree (the ``rtree`` package, libspatialindex) is bulk-loaded with all
    points; then each point searches the tree with the box of half side eps
    around it and refines the candidates with the exact test
    sum_k (x_k - y_k)^2 <= eps^2 in float64.  It runs on one thread, as in
    the paper: the searches go through libspatialindex's bulk query
    (``Index.intersection_v``, a sequential C loop) ``batch`` points at a
    time, and each batch is refined with vectorised NumPy.  Every point is
    searched: there is no sampling.  The queries run in the order of their
    grid cell of side eps, which keeps the tree nodes they visit in cache
    (the count does not depend on the order).

    The search box is widened by a few units in the last place so that
    rounding of x +- eps can never drop a point that the exact refine keeps.
    One-dimensional data is indexed with a zero second coordinate
    (libspatialindex needs d >= 2).

    Parameters
    ----------
    X : array_like, shape (n, d)
    eps : float
        The join radius (> 0).
    max_seconds : float, optional
        Give up after this many seconds (checked after the bulk load and
        after every batch) by raising ``TimeoutError``.
    batch : int
        Query points per bulk search.

    Returns
    -------
    int
        Ordered pairs excluding self pairs.

    Raises
    ------
    TimeoutError
        When ``max_seconds`` runs out; the message says how far it got.
    ValueError
        For bad points or eps.

    Examples
    --------
    >>> from skyjoin.bench.peers import rtree_search_and_refine
    >>> rtree_search_and_refine([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]], 1.0)
    2
    """
    if max_seconds is not None and not max_seconds >= 0:
        raise ValueError(f"max_seconds must be >= 0, got {max_seconds}")
    if int(batch) < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    batch = int(batch)
    t0 = time.perf_counter()
    n, d = X.shape
    P = X if d >= 2 else np.hstack([X, np.zeros_like(X)])
    tree = _rtree_index(P)

    def check_time(done: int, pairs: int) -> None:
        if max_seconds is not None:
            elapsed = time.perf_counter() - t0
            if elapsed > max_seconds:
                raise TimeoutError(
                    f"R-tree search-and-refine stopped after {elapsed:.1f} s "
                    f"(limit {max_seconds:g} s): {done:,} of {n:,} query points searched, "
                    f"{pairs:,} ordered pairs found so far"
                )

    check_time(0, 0)
    # Queries run in the order of their grid cell of side eps: neighbouring
    # queries then visit the same tree nodes (about 1.7x fewer cache misses in
    # the search); the count does not depend on the order.
    cells = np.floor((X - X.min(axis=0)) / eps)
    order = np.lexsort(cells.T[::-1])
    cols = np.ascontiguousarray(X.T)                 # one contiguous array per dimension
    half = eps * (1.0 + 1e-12)
    eps2 = eps * eps
    total = 0
    for a in range(0, n, batch):
        b = min(n, a + batch)
        qi = order[a:b]
        Q = P[qi]
        lo = np.nextafter(np.nextafter(Q - half, -np.inf), -np.inf)
        hi = np.nextafter(np.nextafter(Q + half, np.inf), np.inf)
        ids, counts = _search(tree, lo, hi)
        # refine: exact squared distance, dimensions summed in order
        dist2 = np.zeros(len(ids), dtype=np.float64)
        for k in range(d):
            diff = np.repeat(cols[k, qi], counts) - cols[k, ids]
            dist2 += diff * diff
        keep = dist2 <= eps2
        self_pairs = np.count_nonzero(keep & (np.repeat(qi, counts) == ids))
        total += int(np.count_nonzero(keep)) - int(self_pairs)
        check_time(b, total)
    return total


#: Points of the R-tree peer's warm-up run.
RTREE_WARMUP_POINTS = 2000

#: The peers by name, as the benchmark reports them.
PEERS: dict[str, Callable] = {
    "scipy cKDTree.query_pairs": ckdtree_query_pairs,
    "scipy cKDTree.query_ball_point(workers=-1)": ckdtree_query_ball_point,
    "sklearn radius_neighbors_graph(n_jobs=-1)": sklearn_radius_neighbors_graph,
    "R-tree search-and-refine (1 thread)": rtree_search_and_refine,
}


# Bytes of peak memory per ordered pair found, beyond the input (measured
# orders of magnitude, rounded up): query_pairs returns an (m, 2) int64 array
# of the m = pairs / 2 unordered pairs and grows it by doubling; scikit-learn
# keeps a per-row int64 array, concatenates them and adds float64 ones.
_BYTES_PER_PAIR = {
    "scipy cKDTree.query_pairs": 16,
    "sklearn radius_neighbors_graph(n_jobs=-1)": 32,
}


def estimated_peak_bytes(name: str, n: int, d: int, pairs: int) -> int:
    """Rough peak memory of a peer beyond the input, for ``pairs`` ordered pairs.

    Parameters
    ----------
    name : str
        A key of :data:`PEERS`.
    n, d : int
        Points and dimensions.
    pairs : int
        Ordered pairs excluding self pairs (the peers' result).

    Returns
    -------
    int
        Bytes; the tree-only peers need O(n d).

    Examples
    --------
    >>> from skyjoin.bench.peers import estimated_peak_bytes
    >>> estimated_peak_bytes("scipy cKDTree.query_pairs", 1000, 2, 10**6) >= 16 * 10**6
    True
    """
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose one of {', '.join(PEERS)}")
    return _BYTES_PER_PAIR.get(name, 0) * int(pairs) + 64 * int(n) * max(1, int(d))


def peer_impls(data, eps: float, rtree_max_seconds: float | None = 600.0,
               skip: tuple[str, ...] = (), pairs_hint: int | None = None,
               shape: tuple[int, int] | None = None, memory_fraction: float = 0.6,
               repeat: int = REPEAT, slow_repeat: int = 1) -> list:
    """The peers of one join case as ``bench.harness.Impl`` objects.

    Parameters
    ----------
    data : array_like or callable
        The points, or a function of no arguments returning them (called at
        run time, e.g. after the case's ``setup`` generated them).
    eps : float
        The join radius.
    rtree_max_seconds : float or None
        Time limit of the R-tree peer (it raises ``TimeoutError`` beyond it,
        which the harness records as a failed run); None for no limit.
    skip : tuple of str
        Names in :data:`PEERS` to list as skipped (with reason "skipped by
        the suite").
    pairs_hint : int, optional
        The expected result (ordered pairs excluding self), e.g. a known
        answer or our engine's count from the same run.  With ``shape``, a
        peer whose estimated peak memory (:func:`estimated_peak_bytes`)
        exceeds ``memory_fraction`` of the memory available now is listed as
        skipped with the reason, instead of risking the machine's OOM killer
        (scikit-learn needs about 32 bytes per pair: 25 GB for 784M pairs).
    shape : tuple (n, d), optional
        Shape of the data, for the memory estimate.
    memory_fraction : float
        Share of the available memory a peer may plan to use.
    repeat : int
        Timed runs of each scipy peer, the fastest kept (as for our engine).
    slow_repeat : int
        Timed runs of the R-tree and scikit-learn peers (minutes long on the
        full cases).  Every peer runs once untimed first; the R-tree, which
        compiles nothing, on its first ``RTREE_WARMUP_POINTS`` points.

    Returns
    -------
    list of skyjoin.bench.harness.Impl
        Each returns the ordered pairs excluding self pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from skyjoin.bench.peers import peer_impls
    >>> X = np.random.default_rng(0).random((200, 2))
    >>> sorted({impl.fn() for impl in peer_impls(X, 0.1)}).__len__()
    1
    """
    get = data if callable(data) else (lambda: data)
    avail = available_memory_bytes()
    impls = []
    for name, fn in PEERS.items():
        warmup = None
        if fn is rtree_search_and_refine:
            call = (lambda fn=fn: fn(get(), eps, max_seconds=rtree_max_seconds))
            # nothing to compile: the warm-up loads libspatialindex on a slice
            warmup = (lambda fn=fn: fn(get()[:RTREE_WARMUP_POINTS], eps))
        else:
            call = (lambda fn=fn: fn(get(), eps))
        reason = "skipped by the suite" if name in skip else None
        if reason is None and pairs_hint is not None and shape is not None and avail:
            need = estimated_peak_bytes(name, shape[0], shape[1], pairs_hint)
            if need > memory_fraction * avail:
                reason = (f"needs about {need / 2**30:.1f} GiB for {pairs_hint:,} pairs, "
                          f"{avail / 2**30:.1f} GiB available")
        impls.append(Impl(name=name, fn=call, ours=False, skip_reason=reason, warmup_fn=warmup,
                          repeat=repeat if name.startswith("scipy") else slow_repeat))
    return impls
