"""High-dimensional cases of the join suite (``skyjoin bench join``).

The grid of the low-dimensional cases stops paying beyond about 8
dimensions; these cases measure the join where a brute-force pass over the
n^2 pairs is the baseline, against what a user writes instead:

* ``Manifold90D515345-<eps>``: 515,345 points near a 12-D linear manifold
  in 90-D (``datasets.manifold``, seed 11, the size of the MSD set of the
  GPU-join papers), at
  two eps giving about 10 and about 100 neighbours per point;
* ``Unif32D1M-<eps>``: 1M points uniform in [0, 1]^32, about 10 neighbours
  per point;
* ``Mix128D200k-<eps>``: 200,000 points of a 128-D Gaussian mixture (50
  components, ``datasets.blobs`` with std 1.5, seed 32), about 30
  neighbours per point;
* with ``--quick``, each at ``QUICK_N`` points, with its own eps for the
  same neighbours per point.

Implementations of each case: ours, ``skyjoin.self_join(X, eps, device=...)``
as a table (the rule's choice of algorithm, recorded in the row),
``algorithm="brute"`` as a table and as counts, ``algorithm="projected"``
(the screen on principal components) as counts, on the GPU
``algorithm="brute-fp16"`` (the FP16 lattice screen) as counts, and the grid path
(``algorithm="grid"``, counts) on the quick sizes only; on the GPU
(``--device gpu``), a tiled PyTorch brute force in float64 and in float32
(TF32 off), inexact, and the row "FP64 GEMM bound (measured, reference)":
the n^2 d multiply-adds of the same blocks, in float64
(``skyjoin.bench.peers_gpu``).  The harness has no column for a bound, so
the bound is a row timed like a peer and marked a reference in its name: its
"peer / ours" figure in the report is bound / ours, the reciprocal of
"ours / bound".  On the CPU: scikit-learn's ``radius_neighbors_graph``
(brute force and ball tree) and scipy's ``cKDTree.query_ball_point``, each
skipped with the reason where it would take more than a few minutes
(``CPU_PEER_MAX_DISTANCES``).  Every row counts ordered pairs without self
pairs; the PyTorch rows, inexact, are not held to the others' count.

The eps.  A case's eps is the one at which the mean number of neighbours
(each point itself excluded) of a sample of ``EPS_SAMPLE`` points, drawn
with ``default_rng(0)`` without replacement, against the whole set equals
the target: the (target x sample)-th smallest of the sample's pooled
distances (:func:`neighbour_eps`; chunked NumPy brute force in float64).
Rounded to 4 significant digits, they are the constants of ``EPS``.  The
counts spread widely around that mean (on the full manifold at 10
neighbours per point, a sample's median is 4 and its largest count 74).
This command recomputes the constants::

    PYTHONPATH=src python -m skyjoin.bench.highdim --find-eps
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from typing import Callable

import numpy as np

import skyjoin as sj

from .. import datasets
from .._core.plans import recording
from .._core.validate import check_points
from .harness import REPEAT, Case, Impl, data_case, size_tag
from .peers import ckdtree_query_ball_point, sklearn_radius_neighbors_graph
from .peers_gpu import fp64_gemm_bound, torch_tiled_counts

__all__ = ["HighDimCase", "highdim_cases", "case_names", "cases", "neighbour_eps", "EPS",
           "EPS_SAMPLE", "QUICK_N", "KINDS", "CPU_PEER_MAX_DISTANCES", "TORCH_BLOCK",
           "TORCH_ROWS", "BOUND_ROW"]

#: Points of every case in ``quick`` mode.
QUICK_N = 10_000
#: Sample points of the eps procedure (:func:`neighbour_eps`).
EPS_SAMPLE = 2000
#: Rows of the PyTorch peer's and the GEMM bound's blocks.
TORCH_BLOCK = 2048
#: The rows of the PyTorch peer (blocks of ``TORCH_BLOCK`` rows; no margin,
#: no refine) by precision, and of the FP64 GEMM bound: a reference, timed
#: like a peer, so the report's "peer / ours" of this row is bound / ours.
TORCH_ROWS = {"float64": "torch tiled brute fp64 (inexact)",
              "float32": "torch tiled brute fp32 TF32-off (inexact)"}
BOUND_ROW = "FP64 GEMM bound (measured, reference)"
#: The CPU peers at full size.  scikit-learn's brute force evaluates all n^2
#: distances (it writes, reads and thresholds each in float64): skipped beyond
#: this many.  The trees prune little on the manifold and uniform sets and are
#: skipped there at the same limit; on the mixture a query meets only its own
#: component and they run (docs/decisions/bench-highdim-peers.md).
CPU_PEER_MAX_DISTANCES = 1e11


@dataclasses.dataclass(frozen=True)
class _Kind:
    prefix: str
    d: int
    n: int                       # full size
    make: Callable[[int], np.ndarray]
    recipe: str
    trees_prune: bool            # a tree query visits only a small part of the set


#: The data of the cases.  Each function of n draws the set of that size
#: (a quick set is drawn by the same recipe, not cut from the full one).
KINDS: dict[str, _Kind] = {
    "manifold": _Kind("Manifold", 90, 515_345,
                      lambda n: datasets.manifold(n, d=90, k=12, noise=0.05, seed=11),
                      "datasets.manifold(n, d=90, k=12, noise=0.05, seed=11)", False),
    "uniform": _Kind("Unif", 32, 1_000_000,
                     lambda n: datasets.uniform(n, 32, 0.0, 1.0, seed=31),
                     "datasets.uniform(n, 32, 0.0, 1.0, seed=31)", False),
    "mixture": _Kind("Mix", 128, 200_000,
                     lambda n: datasets.blobs(n, 128, centers=50, std=1.5, seed=32),
                     "datasets.blobs(n, 128, centers=50, std=1.5, seed=32)", True),
}

#: (kind, neighbours per point) -> (eps of the full set, eps of the quick
#: set), 4 significant digits, from ``python -m skyjoin.bench.highdim --find-eps``.
EPS: dict[tuple[str, int], tuple[float, float]] = {
    ("manifold", 10): (3.809, 5.642),
    ("manifold", 100): (4.689, 7.17),
    ("uniform", 10): (1.255, 1.537),
    ("mixture", 30): (20.38, 22.42),
}


def neighbour_eps(X: np.ndarray, targets, sample: int = EPS_SAMPLE, seed: int = 0,
                  keep: int = 8192, block_elems: int = 1 << 25) -> list[float]:
    """The eps at which a sample's mean neighbour count equals each target.

    ``sample`` points drawn with ``default_rng(seed)`` without replacement
    are compared with every point of X by brute force in float64
    (||q||^2 + ||x||^2 - 2 q.x, in blocks of about ``block_elems``
    distances), the point itself left out; each keeps its ``keep`` smallest
    distances.  For a target t, eps is the (t x sample)-th smallest of the
    pooled distances: at that eps the sample's neighbours sum to t x sample
    (ties aside).  O(sample n d) time, O(sample keep + block_elems) memory.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    targets : sequence of int
        Mean neighbours per point, each >= 1.
    sample, seed : int
        The sample's size (at most n) and seed.
    keep : int
        Distances kept per sample point.

    Returns
    -------
    list of float
        One eps per target, unrounded.

    Raises
    ------
    ValueError
        For bad points (NaN, inf, not 2-D) or fewer than 2, a target < 1,
        or when a sample point has ``keep`` or more
        neighbours within an eps found (its count would be cut: raise keep).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(10.0)[:, None]
    >>> neighbour_eps(X, [1, 2], sample=10)
    [1.0, 2.0]
    """
    X = check_points(X)
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X needs at least 2 points, got {n}")
    targets = [int(t) for t in targets]
    if any(t < 1 for t in targets):
        raise ValueError(f"targets must be >= 1, got {targets}")
    m = min(int(sample), n)
    idx = np.random.default_rng(seed).choice(n, m, replace=False)
    keep = min(int(keep), n - 1)
    sq = np.einsum("ij,ij->i", X, X)
    rows = max(1, block_elems // max(n, 1))
    kept = np.empty((m, keep))
    for a in range(0, m, rows):
        b = min(m, a + rows)
        q = idx[a:b]
        d2 = sq[q, None] + sq[None, :] - 2.0 * (X[q] @ X.T)
        np.maximum(d2, 0.0, out=d2)
        d2[np.arange(b - a), q] = np.inf           # the point itself
        kept[a:b] = np.sort(np.partition(d2, keep - 1, axis=1)[:, :keep], axis=1)
    pooled = np.sort(kept, axis=None)
    out = []
    for t in targets:
        if t * m > pooled.size:
            raise ValueError(f"target {t} needs more than the {keep} distances kept per point")
        e2 = pooled[t * m - 1]
        if keep < n - 1 and np.any(kept[:, -1] <= e2):
            raise ValueError(f"a sample point has {keep} or more neighbours within the eps of "
                             f"target {t}: raise keep")
        out.append(float(np.sqrt(e2)))
    return out


@dataclasses.dataclass(frozen=True)
class HighDimCase:
    """A high-dimensional case: its name (with the points it really runs),
    kind (a key of ``KINDS``), size, eps and target neighbours per point."""

    name: str
    kind: str
    n: int
    d: int
    eps: float
    neighbours: int
    quick: bool

    def load(self) -> np.ndarray:
        """The case's points (O(n d), the manifold O(n k d))."""
        return KINDS[self.kind].make(self.n)

    @property
    def params(self) -> dict:
        spec = KINDS[self.kind]
        return {"n": self.n, "d": self.d, "kind": self.kind, "recipe": spec.recipe,
                "eps": self.eps, "neighbours_per_point": self.neighbours,
                "eps_from": f"mean neighbours of {EPS_SAMPLE} sample points (bench.highdim)"}


def highdim_cases(quick: bool = False) -> list[HighDimCase]:
    """Every high-dimensional case in this mode (``quick``: ``QUICK_N``
    points each, at the quick set's own eps), named ``<prefix><d>D<n>-<eps>``."""
    out = []
    for (kind, target), (eps_full, eps_quick) in EPS.items():
        spec = KINDS[kind]
        n, eps = (QUICK_N, eps_quick) if quick else (spec.n, eps_full)
        out.append(HighDimCase(f"{spec.prefix}{spec.d}D{size_tag(n)}-{eps:g}", kind, n, spec.d,
                               eps, target, quick))
    return out


def case_names(quick: bool = False) -> list[str]:
    """The names of :func:`highdim_cases`."""
    return [c.name for c in highdim_cases(quick)]


def _ours(get, hc: HighDimCase, device: str, repeat: int) -> list[Impl]:
    """``self_join(..., algorithm="auto")`` as a table (the rule's choice in
    the row), "brute" as a table and as counts, "projected" (the screen on
    principal components) as counts, on the GPU "brute-fp16" as counts,
    and the grid path's counts (quick sizes only)."""
    def auto_table():
        tm: dict = {}
        with recording() as plans:
            nt = sj.self_join(get(), hc.eps, device=device, output="table", timings=tm)
        chosen = [p for p in plans if hasattr(p, "projection")][-1]
        return {"size": nt.n_pairs, "algorithm": chosen.algorithm,
                **({"components": chosen.projection.components} if chosen.projection else {}),
                **{f"phase_{k}_s": round(v, 4) for k, v in tm.items()}}

    def brute_table():
        tm: dict = {}
        nt = sj.self_join(get(), hc.eps, device=device, algorithm="brute", output="table",
                          timings=tm)
        return {"size": nt.n_pairs, **{f"phase_{k}_s": round(v, 4) for k, v in tm.items()}}

    def counts(algorithm):
        return lambda: int(sj.self_join(get(), hc.eps, device=device, algorithm=algorithm,
                                        output="counts").sum())

    grid_skip = None if hc.quick else (
        "the grid path prunes little at full size (docs/decisions/bench-highdim-peers.md): "
        "it is timed on the quick sizes only")
    return [Impl(f"skyjoin {device} auto table", auto_table, ours=True, repeat=repeat),
            Impl(f"skyjoin {device} brute table", brute_table, ours=True, repeat=repeat),
            Impl(f"skyjoin {device} brute counts", counts("brute"), ours=True, repeat=repeat),
            Impl(f"skyjoin {device} projected counts", counts("projected"), ours=True,
                 repeat=repeat),
            *([Impl("skyjoin gpu brute-fp16 counts", counts("brute-fp16"), ours=True,
                    repeat=repeat)] if device == "gpu" else []),
            Impl(f"skyjoin {device} grid counts", counts("grid"), ours=True, repeat=repeat,
                 skip_reason=grid_skip)]


def _cpu_peers(get, hc: HighDimCase, repeat: int) -> list[Impl]:
    """scikit-learn (brute force, ball tree) and cKDTree, each skipped where
    it would evaluate more than ``CPU_PEER_MAX_DISTANCES`` distances."""
    spec = KINDS[hc.kind]
    distances = float(hc.n) ** 2
    slow = distances > CPU_PEER_MAX_DISTANCES
    brute_skip = (f"{hc.n:,}^2 = {distances:.1e} distances in {hc.d}-D (beyond a few minutes "
                  f"on the CPU; the limit is {CPU_PEER_MAX_DISTANCES:.0e})") if slow else None
    tree_skip = (f"a tree in {hc.d}-D prunes little on this set (it costs more than the "
                 f"brute force: docs/decisions/bench-highdim-peers.md), and the brute force's "
                 f"{distances:.1e} distances are already beyond a few minutes on the CPU"
                 ) if slow and not spec.trees_prune else None
    peers = [("sklearn radius_neighbors_graph(brute, n_jobs=-1)", "brute", brute_skip),
             ("sklearn radius_neighbors_graph(ball_tree, n_jobs=-1)", "ball_tree", tree_skip)]
    out = [Impl(name, (lambda algorithm=algorithm: sklearn_radius_neighbors_graph(
                get(), hc.eps, algorithm=algorithm)), skip_reason=skip, repeat=1)
           for name, algorithm, skip in peers]
    out.append(Impl("scipy cKDTree.query_ball_point(workers=-1)",
                    lambda: ckdtree_query_ball_point(get(), hc.eps), skip_reason=tree_skip,
                    repeat=repeat))
    return out


def _gpu_peers(get, hc: HighDimCase, device: str, repeat: int) -> list[Impl]:
    """The PyTorch brute force (float64; float32, TF32 off) and the FP64
    GEMM bound, on the GPU runs of the suite."""
    def missing(module, what):
        if device != "gpu":
            return "a GPU row: runs with --device gpu"
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed"
        if not sj.gpu_available():
            return "no usable GPU (skyjoin.gpu_available() is False)"
        return None

    def torch_fn(dtype):
        def fn():
            return {"size": torch_tiled_counts(get(), hc.eps, dtype=dtype, block=TORCH_BLOCK),
                    "inexact": True, "size_not_comparable": True}
        return fn

    def bound():
        return {**fp64_gemm_bound(get(), block=TORCH_BLOCK), "size_not_comparable": True}

    no_torch = missing("torch", "PyTorch")
    return [Impl(TORCH_ROWS["float64"], torch_fn("float64"), skip_reason=no_torch,
                 repeat=repeat),
            Impl(TORCH_ROWS["float32"], torch_fn("float32"), skip_reason=no_torch,
                 repeat=repeat),
            Impl(BOUND_ROW, bound, skip_reason=missing("cupy", "CuPy"), repeat=repeat,
                 self_timed=True)]


def cases(quick: bool = False, device: str = "cpu", repeat: int = REPEAT) -> list[Case]:
    """The high-dimensional cases of the join suite as harness cases.

    Each times ours (:func:`_ours`), the CPU peers and, on ``device="gpu"``,
    the GPU peers and the bound; the peers that cannot run say why in
    their skip reason.  Nothing is generated until a case's setup.
    """
    out = []
    for hc in highdim_cases(quick):
        def impls_of(get, hc=hc):
            return (_ours(get, hc, device, repeat) + _gpu_peers(get, hc, device, repeat)
                    + _cpu_peers(get, hc, repeat))

        out.append(data_case(hc.name, hc.params, hc.load, impls_of))
    return out


def _find_eps(sample: int = EPS_SAMPLE, log=print) -> dict:
    """Recompute ``EPS`` (:func:`neighbour_eps` on every full and quick set)."""
    out: dict = {}
    for kind, spec in KINDS.items():
        targets = [t for k, t in EPS if k == kind]
        for n in (spec.n, QUICK_N):
            for t, e in zip(targets, neighbour_eps(spec.make(n), targets, sample=sample)):
                out.setdefault((kind, t), []).append(e)
                log(f"{kind:<9} n={n:>9,} neighbours={t:>4}: eps {e:.6g} -> {float(f'{e:.4g}'):g}")
    log("EPS = {")
    for (kind, t), (full, quick) in out.items():
        log(f"    ({kind!r}, {t}): ({float(f'{full:.4g}')!r}, {float(f'{quick:.4g}')!r}),")
    log("}")
    return out


def main(argv=None) -> int:
    """``python -m skyjoin.bench.highdim --find-eps``: print the eps constants."""
    ap = argparse.ArgumentParser(description="The eps of the high-dimensional join cases.")
    ap.add_argument("--find-eps", action="store_true", required=True,
                    help="recompute EPS by the module's procedure and print it")
    ap.add_argument("--sample", type=int, default=EPS_SAMPLE)
    args = ap.parse_args(argv)
    _find_eps(args.sample)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
